/*
 * iserctl call METHOD [JSON-OBJECT | KEY=VALUE...]: any method of the admin
 * socket.  KEY=VALUE arguments take their JSON type from the method's
 * parameter table as rpc.methods gives it (docs/admin.md), so what the
 * command line accepts is what the socket takes.
 */
#include <ctype.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iserctl.h"

/* The element named name of an array of {"name": ...} objects (rpc.methods' answer, a method's params), or NULL. */
static json_object *method_of(json_object *methods, const char *name)
{
	size_t n = json_object_is_type(methods, json_type_array) ? json_object_array_length(methods) : 0;
	for (size_t i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(methods, i);
		const char *mn = json_object_get_string(get(m, "name"));
		if (mn && !strcmp(mn, name))
			return m;
	}
	return NULL;
}

static json_object *param_of(json_object *m, const char *key)
{
	return method_of(get(m, "params"), key);
}

/* A refusal before anything is sent: the message printed with die_usage's words around it. */
static int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *fmt, ...)
{
	va_list ap;
	char *msg;
	va_start(ap, fmt);
	int n = vasprintf(&msg, fmt, ap);
	va_end(ap);
	int rc = die_usage("%s", n < 0 ? "call: out of memory" : msg);
	if (n >= 0)
		free(msg);
	return rc;
}

/* KEY=VALUE whose value is not what its type takes; a secret's value is left out of the message. */
static int refuse_value(const char *method, const char *key, const char *v, bool secret, const char *what)
{
	return refuse("call %s: %s: %s%s%s%s", shown(method), shown(key), secret ? "" : "'", secret ? "" : shown(v),
		      secret ? "" : "' is ", what);
}

/* The names the method takes, as the socket's own message lists them: "a, b" or "none". */
static char *param_names(json_object *m)
{
	json_object *ps = get(m, "params");
	size_t n = ps ? json_object_array_length(ps) : 0, len = sizeof("none");
	for (size_t i = 0; i < n; i++)
		len += strlen(gets(json_object_array_get_idx(ps, i), "name", "?")) + 2;
	char *out = malloc(len);
	if (!out)
		return NULL;
	strcpy(out, n ? "" : "none");
	for (size_t i = 0; i < n; i++)
		strcat(strcat(out, i ? ", " : ""), gets(json_object_array_get_idx(ps, i), "name", "?"));
	return out;
}

/*
 * The value of KEY=VALUE for method m (NULL: a method rpc.methods does not
 * list, left to the socket to name) as the JSON its table asks for; 0, or the
 * exit status with the message printed.
 */
static int typed_value(const char *method, json_object *m, const char *key, const char *v, json_object **out)
{
	json_object *p = m ? param_of(m, key) : NULL;
	/* A change method also takes generation (docs/admin.md, "Generations"). */
	bool gen = m && json_object_get_boolean(get(m, "change")) && !strcmp(key, "generation");
	const char *type = p ? gets(p, "type", "value") : gen ? "integer" : NULL;
	bool secret = p && json_object_get_boolean(get(p, "secret"));
	*out = NULL;
	if (m && !type && !get(m, "doc_keys")) {
		char *names = param_names(m);
		int rc = refuse("call %s: unknown parameter '%s' (this method takes: %s)", shown(method), shown(key),
				names ? names : "?");
		free(names);
		return rc;
	}
	if (type && !strcmp(type, "integer")) {
		char *end;
		errno = 0;
		long long n = strtoll(v, &end, 10);
		if (!(isdigit((unsigned char)*v) || *v == '-') || *end || errno)
			return refuse_value(method, key, v, secret, "not an integer");
		*out = json_object_new_int64(n);
	} else if (type && !strcmp(type, "boolean")) {
		bool t = !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1");
		if (!t && strcmp(v, "false") && strcmp(v, "no") && strcmp(v, "0"))
			return refuse_value(method, key, v, secret, "not true or false (nor yes, no, 1, 0)");
		*out = json_object_new_boolean(t);
	} else {
		/* object, array, value, and the keys of the file that doc_keys methods pass on. */
		*out = type && !strcmp(type, "string") ? json_object_new_string(v) : arg_value(v);
	}
	return 0;
}

/* KEY=VALUE arguments of method into a new *params; 0, or the exit status with the message printed. */
static int params_of_args(const char *method, int argc, char **argv, json_object **params)
{
	json_object *methods;
	int rc = call("rpc.methods", NULL, &methods);
	if (rc)
		return rc;
	json_object *m = method_of(methods, method);
	*params = json_object_new_object();
	for (int i = 0; !rc && i < argc; i++) {
		char *eq = strchr(argv[i], '='), *key = argv[i];
		json_object *v;
		/* Not shown: the object may hold a secret. */
		if (key[0] == '{')
			rc = die_usage("call: %s", "a JSON object of parameters comes alone, without KEY=VALUE");
		else if (!eq || eq == key)
			rc = die_usage("call: '%s' is not KEY=VALUE", key);
		if (rc)
			break;
		*eq = 0;
		if (json_object_object_get_ex(*params, key, NULL))
			rc = refuse("call %s: '%s' given twice", shown(method), shown(key));
		else if (!(rc = typed_value(method, m, key, eq + 1, &v)))
			json_object_object_add(*params, key, v);
	}
	json_object_put(methods);
	if (rc) {
		json_object_put(*params);
		*params = NULL;
	}
	return rc;
}

int cmd_call(int argc, char **argv)
{
	json_object *params = NULL, *res;
	int rc = 0;
	/* The JSON form, as before KEY=VALUE: one argument, an object. */
	if (argc == 2 && argv[1][strspn(argv[1], " \t\n")] == '{') {
		params = json_tokener_parse(argv[1]);
		if (!params || !json_object_is_type(params, json_type_object)) {
			json_object_put(params);
			/* Not shown: it may hold a secret. */
			return die_usage("call %s: the parameters are not a JSON object", shown(argv[0]));
		}
	} else if (argc > 1 && (rc = params_of_args(argv[0], argc - 1, argv + 1, &params))) {
		return rc;
	}
	rc = call(argv[0], params ? params : (generation ? json_object_new_object() : NULL), &res);
	if (!rc)
		print_json(res);
	json_object_put(res);
	return rc;
}
