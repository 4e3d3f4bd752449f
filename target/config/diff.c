/*
 * What differs between two documents, as the steps of a plan: each
 * {"op": "create" | "delete" | "set", "path", "value"}, with paths as
 * iserctl names objects (/backstores/NAME, /iscsi/IQN/tpg1/luns/lun0,
 * /iscsi/IQN/tpg1/acls/INI/mapped_lun0) and secrets masked by their place.
 * Pure: apply's plan and its dry run, without anything that runs.
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/config/config_int.h"

void config_step(json_object *plan, const char *op, const char *path, json_object *value)
{
	json_object *s = json_object_new_object();
	json_object_object_add(s, "op", json_object_new_string(op));
	json_object_object_add(s, "path", json_object_new_string(path));
	if (value)
		json_object_object_add(s, "value", value);
	json_object_array_add(plan, s);
}

/* The name an element of array `key` has in a path, or NULL when the array is a plain value. */
static bool elem_name(const char *key, json_object *e, char *out, size_t n)
{
	json_object *v, *w, *x;
	if (!json_object_is_type(e, json_type_object))
		return false;
	if (!strcmp(key, "backstores") && json_object_object_get_ex(e, "name", &v))
		snprintf(out, n, "%s", json_object_get_string(v));
	else if (!strcmp(key, "targets") && json_object_object_get_ex(e, "iqn", &v))
		snprintf(out, n, "%s", json_object_get_string(v));
	else if (!strcmp(key, "tpgs") && json_object_object_get_ex(e, "tag", &v))
		snprintf(out, n, "tpg%s", json_object_get_string(v));
	else if (!strcmp(key, "luns") && json_object_object_get_ex(e, "lun", &v))
		snprintf(out, n, "lun%s", json_object_get_string(v));
	else if (!strcmp(key, "mapped_luns") && json_object_object_get_ex(e, "mapped_lun", &v))
		snprintf(out, n, "mapped_lun%s", json_object_get_string(v));
	else if (!strcmp(key, "groups") && json_object_object_get_ex(e, "id", &v))
		snprintf(out, n, "group%s", json_object_get_string(v));
	else if (!strcmp(key, "acls") && json_object_object_get_ex(e, "initiator", &v))
		snprintf(out, n, "%s", json_object_get_string(v));
	else if (!strcmp(key, "portals") && json_object_object_get_ex(e, "ip", &v) &&
		 json_object_object_get_ex(e, "port", &w) && json_object_object_get_ex(e, "iser", &x))
		snprintf(out, n, "%s:%s%s", json_object_get_string(v), json_object_get_string(w),
			 json_object_get_boolean(x) ? "(iser)" : "");
	else
		return false;
	return true;
}

/* key: a's and b's name in their parent object, itself named parent (secrets are masked by their place). */
static void diff(json_object *plan, const char *path, const char *parent, const char *key, json_object *a,
		 json_object *b);

struct named {
	char name[300];
	json_object *e;
};

static int cmp_named(const void *x, const void *y)
{
	return strcmp(((const struct named *)x)->name, ((const struct named *)y)->name);
}

/* The elements of arr by name, sorted (NULL: an element without a name, or out of memory). */
static struct named *index_named(const char *key, json_object *arr, size_t *n)
{
	*n = json_object_array_length(arr);
	struct named *v = calloc(*n ? *n : 1, sizeof(*v));
	for (size_t i = 0; v && i < *n; i++) {
		v[i].e = json_object_array_get_idx(arr, i);
		if (!elem_name(key, v[i].e, v[i].name, sizeof(v[i].name))) {
			free(v);
			return NULL;
		}
	}
	if (v)
		qsort(v, *n, sizeof(*v), cmp_named);
	return v;
}

static json_object *find_named(const struct named *v, size_t n, const char *name)
{
	struct named k;
	snprintf(k.name, sizeof(k.name), "%s", name);
	const struct named *f = bsearch(&k, v, n, sizeof(*v), cmp_named);
	return f ? f->e : NULL;
}

/* Arrays of named objects (backstores, targets, LUNs, ...) are compared element by element,
 * matched by name (sorted: a configuration of thousands of LUNs diffs in milliseconds). */
static void diff_array(json_object *plan, const char *path, const char *key, json_object *a, json_object *b)
{
	char p[1024];
	size_t na, nb;
	struct named *va = index_named(key, a, &na), *vb = va ? index_named(key, b, &nb) : NULL;
	if (!va || !vb) {
		if (!json_object_equal(a, b))
			config_step(plan, "set", path, config_redacted(NULL, key, b));
		free(va);
		free(vb);
		return;
	}
	for (size_t i = 0; i < na; i++) {
		snprintf(p, sizeof(p), "%s/%s", path, va[i].name);
		json_object *f = find_named(vb, nb, va[i].name);
		if (!f)
			config_step(plan, "delete", p, NULL);
		else
			diff(plan, p, key, key, va[i].e, f);
	}
	for (size_t i = 0; i < nb; i++)
		if (!find_named(va, na, vb[i].name)) {
			snprintf(p, sizeof(p), "%s/%s", path, vb[i].name);
			config_step(plan, "create", p, NULL);
		}
	free(va);
	free(vb);
}

static void diff(json_object *plan, const char *path, const char *parent, const char *key, json_object *a,
		 json_object *b)
{
	char p[1024];
	if (json_object_is_type(a, json_type_object) && json_object_is_type(b, json_type_object)) {
		json_object_object_foreach(a, k, va)
		{
			json_object *vb;
			/* Paths as iserctl names objects: /iscsi/IQN/tpg1/acls/INI/mapped_lun0. */
			if ((!strcmp(k, "tpgs") && !strstr(path, "/alua/")) || !strcmp(k, "mapped_luns"))
				snprintf(p, sizeof(p), "%s", path);
			else
				snprintf(p, sizeof(p), "%s/%s", path, !strcmp(k, "targets") && !*path ? "iscsi" : k);
			if (!json_object_object_get_ex(b, k, &vb))
				config_step(plan, "delete", p, NULL);
			else
				diff(plan, p, key, k, va, vb);
		}
		json_object_object_foreach(b, k2, vb2)
		{
			json_object *va2;
			if (!json_object_object_get_ex(a, k2, &va2)) {
				snprintf(p, sizeof(p), "%s/%s", path, k2);
				config_step(plan, "set", p, config_redacted(key, k2, vb2));
			}
		}
		return;
	}
	if (json_object_is_type(a, json_type_array) && json_object_is_type(b, json_type_array)) {
		diff_array(plan, path, key, a, b);
		return;
	}
	if (!json_object_equal(a, b))
		config_step(plan, "set", path, config_redacted(parent, key, b));
}

void config_diff(json_object *steps, json_object *a, json_object *b)
{
	diff(steps, "", NULL, "", a, b);
}
