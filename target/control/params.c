/*
 * The methods' parameter tables: every request checked against its
 * method's before the method runs, the parameters then read without
 * further checks, and the tables listed (rpc.methods), so the answer, the
 * checks, iserctl's completion and docs/admin.md (a test compares them)
 * all come from one place.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/utf8.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"

/* The dispatcher's own parameters, accepted by the methods of their kind. */
static const struct rpc_param p_dry_run = P_BOOL("dry_run");

static const struct rpc_param *param_of(const struct rpc_method *m, const char *name)
{
	for (const struct rpc_param *p = m->params; p->name; p++)
		if (!strcmp(p->name, name))
			return p;
	if (m->edit && !strcmp(name, p_dry_run.name))
		return &p_dry_run;
	return NULL;
}

bool rpc_has_param(const struct rpc_method *m, const char *name)
{
	return param_of(m, name) != NULL;
}

void rpc_param_list(const struct rpc_method *m, bool dispatcher_too, char *buf, size_t n)
{
	size_t used = 0;
	buf[0] = 0;
	for (const struct rpc_param *p = m->params; p->name && used < n; p++) {
		int k = snprintf(buf + used, n - used, "%s%s", used ? ", " : "", p->name);
		used += k > 0 ? (size_t)k : 0;
	}
	if (dispatcher_too && m->edit && used < n)
		snprintf(buf + used, n - used, "%s%s", used ? ", " : "", p_dry_run.name);
}

int rpc_unknown_param(struct rpc_call *c, const struct rpc_method *m, const char *k)
{
	char list[256];
	rpc_param_list(m, true, list, sizeof(list));
	return rpc_fail(c, RPC_INVALID_PARAMS, "unknown parameter '%.64s' (this method takes: %s)", k,
			list[0] ? list : "none");
}

static int check_param(struct rpc_call *c, const struct rpc_param *p, json_object *v)
{
	errno = 0;
	switch (p->type) {
	case RPC_P_STR:
		if (!json_object_is_type(v, json_type_string) || !json_object_get_string_len(v))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be a non-empty string", p->name);
		if (p->max && json_object_get_string_len(v) > p->max)
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: at most %" PRId64 " bytes", p->name, p->max);
		return 0;
	case RPC_P_INT: {
		int64_t x = json_object_get_int64(v);
		if (!json_object_is_type(v, json_type_int) || errno || x < p->min || x > p->max)
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be an integer from %" PRId64 " to %" PRId64,
					p->name, p->min, p->max);
		return 0;
	}
	case RPC_P_BOOL:
		if (!json_object_is_type(v, json_type_boolean))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be true or false", p->name);
		return 0;
	case RPC_P_ARRAY:
		if (!json_object_is_type(v, json_type_array))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be an array", p->name);
		return 0;
	case RPC_P_OBJECT:
		if (!json_object_is_type(v, json_type_object))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be an object", p->name);
		return 0;
	case RPC_P_VALUE:
		return 0;
	}
	return 0;
}

/* A parameter present is of its type, a required one is present. */
static int check_present(struct rpc_call *c, const struct rpc_param *p)
{
	json_object *v;
	if (json_object_object_get_ex(c->params, p->name, &v))
		return check_param(c, p, v);
	if (p->required)
		return rpc_fail(c, RPC_INVALID_PARAMS, "%s: required%s%s", p->name, p->hint ? " " : "",
				p->hint ? p->hint : "");
	return 0;
}

int rpc_check_params(const struct rpc_method *m, struct rpc_call *c)
{
	json_object_object_foreach(c->params, k, v)
	{
		(void)v;
		/* A method that takes its object's file keys names what it refuses; the loader checks the rest. */
		if (!param_of(m, k) && !m->doc_keys)
			return rpc_unknown_param(c, m, k);
	}
	/* In the table's order, then the dispatcher's own. */
	for (const struct rpc_param *p = m->params; p->name; p++)
		if (check_present(c, p))
			return -1;
	return m->edit ? check_present(c, &p_dry_run) : 0;
}

const char *rpc_str(const struct rpc_call *c, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(c->params, key, &v) ? json_object_get_string(v) : NULL;
}

int64_t rpc_int(const struct rpc_call *c, const char *key, int64_t dflt)
{
	json_object *v;
	return json_object_object_get_ex(c->params, key, &v) ? json_object_get_int64(v) : dflt;
}

bool rpc_bool(const struct rpc_call *c, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(c->params, key, &v) && json_object_get_boolean(v);
}

const char *rpc_initiator(const struct rpc_call *c, char buf[1024])
{
	const char *s = rpc_str(c, "initiator");
	if (!s)
		return NULL;
	utf8_unshown(s, buf);
	return buf;
}

static json_object *param_obj(const struct rpc_param *p)
{
	static const char *const types[] = { [RPC_P_STR] = "string", [RPC_P_INT] = "integer",
					     [RPC_P_BOOL] = "boolean", [RPC_P_ARRAY] = "array",
					     [RPC_P_OBJECT] = "object", [RPC_P_VALUE] = "value" };
	json_object *o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(p->name));
	json_object_object_add(o, "type", json_object_new_string(types[p->type]));
	json_object_object_add(o, "required", json_object_new_boolean(p->required));
	if (p->type == RPC_P_INT) {
		json_object_object_add(o, "min", json_object_new_int64(p->min));
		json_object_object_add(o, "max", json_object_new_int64(p->max));
	} else if (p->type == RPC_P_STR && p->max) {
		json_object_object_add(o, "max_bytes", json_object_new_int64(p->max));
	}
	if (p->secret)
		json_object_object_add(o, "secret", json_object_new_boolean(true));
	return o;
}

json_object *rpc_methods_json(void)
{
	json_object *a = json_object_new_array();
	for (const struct rpc_method *m = rpc_method_next(NULL); m; m = rpc_method_next(m)) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(m->name));
		json_object_object_add(o, "change", json_object_new_boolean(RPC_CHANGES(m)));
		json_object_object_add(o, "role", json_object_new_string(config_role_name(rpc_method_role(m))));
		json_object_object_add(o, "help", json_object_new_string(m->help));
		json_object *ps = json_object_new_array();
		for (const struct rpc_param *p = m->params; p->name; p++)
			json_object_array_add(ps, param_obj(p));
		if (m->edit)
			json_object_array_add(ps, param_obj(&p_dry_run));
		json_object_object_add(o, "params", ps);
		if (m->doc_keys)
			json_object_object_add(o, "doc_keys", json_object_new_string(m->doc_keys));
		json_object_array_add(a, o);
	}
	return a;
}
