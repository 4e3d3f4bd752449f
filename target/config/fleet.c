/*
 * The fleet's configuration document (fleet.h): a gateway's configuration
 * composed from it, the document decomposed again from an edited one, the
 * fleet's own rules, and the document made from the files of gateways that
 * ran alone.
 *
 * What a gateway keeps for itself: the global keys of its process (threads,
 * polling, its sockets and folders), its stores that are not shared (any
 * store but rbd, unless the document already shares it), and its portal
 * groups (each a tag of a target and its portals).  Everything else is
 * shared: a target's portal groups, on whichever gateway, hold the same
 * LUNs, ACLs and settings (the target's "tpg"), and its ALUA groups list
 * relative ports fleet-wide: composed for one gateway, the ports it serves
 * are the group's "tpgs", the others its "remote_ports".
 */
#include "target/config/fleet.h"

#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/config/config.h"
#include "target/config/config_int.h"

/* The global keys each gateway keeps for itself (docs/config.md, "global"); the others are the fleet's. */
static const char *const own_global[] = { "reactors", "poll_mode", "iser_srq", "admin_socket", "buffer_pool_mb",
					  "adaptive_spin_us", "metrics", "state_dir", "admin_https", NULL };

static bool in_list(const char *const *l, const char *s)
{
	for (; *l; l++)
		if (!strcmp(*l, s))
			return true;
	return false;
}

bool config_fleet_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;
	if (!n || n > FLEET_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
		      (name[i] >= '0' && name[i] <= '9') || name[i] == '.' || name[i] == '_' || name[i] == '-'))
			return false;
	return true;
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;
	return json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *get_str(json_object *o, const char *key)
{
	json_object *v = get(o, key);
	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* An array's length; 0 for anything else (json-c asserts on it). */
static size_t len_of(json_object *a)
{
	return json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
}

static json_object *copy(json_object *o)
{
	json_object *c = NULL;
	if (o && json_object_deep_copy(o, &c, NULL))
		return NULL;
	return c;
}

/* o[key], an array made when absent. */
static json_object *array_of(json_object *o, const char *key)
{
	json_object *a = get(o, key);
	if (json_object_is_type(a, json_type_array))
		return a;
	a = json_object_new_array();
	json_object_object_add(o, key, a);
	return a;
}

static json_object *gateway_of(json_object *doc, const char *gw)
{
	json_object *gws = get(doc, "gateways");
	for (size_t i = 0; gws && i < json_object_array_length(gws); i++) {
		const char *n = get_str(json_object_array_get_idx(gws, i), "name");
		if (n && !strcmp(n, gw))
			return json_object_array_get_idx(gws, i);
	}
	return NULL;
}

static json_object *named(json_object *arr, const char *key, const char *name)
{
	for (size_t i = 0; name && json_object_is_type(arr, json_type_array) && i < json_object_array_length(arr); i++) {
		const char *n = get_str(json_object_array_get_idx(arr, i), key);
		if (n && !strcmp(n, name))
			return json_object_array_get_idx(arr, i);
	}
	return NULL;
}

static bool tag_in(json_object *tags, int64_t tag)
{
	for (size_t i = 0; json_object_is_type(tags, json_type_array) && i < json_object_array_length(tags); i++)
		if (json_object_get_int64(json_object_array_get_idx(tags, i)) == tag)
			return true;
	return false;
}

/* The tags gateway g serves of target iqn, as a new array. */
static json_object *tags_of(json_object *g, const char *iqn)
{
	json_object *tags = json_object_new_array(), *tp = get(g, "tpgs");
	for (size_t i = 0; tp && i < json_object_array_length(tp); i++) {
		json_object *e = json_object_array_get_idx(tp, i);
		const char *t = get_str(e, "target");
		if (t && !strcmp(t, iqn))
			json_object_array_add(tags, json_object_new_int64(json_object_get_int64(get(e, "tag"))));
	}
	return tags;
}

/* ------------------------------------------------------------------------ */
/* Composing: the document seen by one gateway. */

/* A target's ALUA groups for a gateway serving tags: the group's ports it serves are "tpgs", the others remote. */
static json_object *compose_alua(json_object *alua, json_object *tags)
{
	json_object *a = copy(alua), *groups = get(a, "groups");
	for (size_t i = 0; groups && i < json_object_array_length(groups); i++) {
		json_object *g = json_object_array_get_idx(groups, i), *ports = get(g, "tpgs");
		json_object *mine = json_object_new_array(), *remote = json_object_new_array();
		for (size_t k = 0; ports && k < json_object_array_length(ports); k++) {
			int64_t p = json_object_get_int64(json_object_array_get_idx(ports, k));
			json_object_array_add(tag_in(tags, p) ? mine : remote, json_object_new_int64(p));
		}
		json_object_object_add(g, "tpgs", mine);
		if (json_object_array_length(remote))
			json_object_object_add(g, "remote_ports", remote);
		else
			json_object_put(remote);
	}
	return a;
}

static json_object *compose_target(json_object *t, json_object *g)
{
	const char *iqn = get_str(t, "iqn");
	json_object *out = json_object_new_object(), *tpgs = json_object_new_array(), *tags = tags_of(g, iqn ? iqn : "");
	if (json_object_is_type(t, json_type_object)) { /* json-c cannot iterate anything else */
		json_object_object_foreach(t, k, v) {
			if (strcmp(k, "tpg") && strcmp(k, "alua"))
				json_object_object_add(out, k, copy(v));
		}
	}
	json_object *tp = get(g, "tpgs");
	for (size_t i = 0; iqn && tp && i < json_object_array_length(tp); i++) {
		json_object *e = json_object_array_get_idx(tp, i);
		const char *et = get_str(e, "target");
		if (!et || strcmp(et, iqn))
			continue;
		json_object *one = copy(get(t, "tpg"));
		if (!one)
			one = json_object_new_object();
		json_object_object_add(one, "tag", copy(get(e, "tag")));
		json_object_object_add(one, "portals", get(e, "portals") ? copy(get(e, "portals")) : json_object_new_array());
		json_object_array_add(tpgs, one);
	}
	json_object_object_add(out, "tpgs", tpgs);
	if (get(t, "alua"))
		json_object_object_add(out, "alua", compose_alua(get(t, "alua"), tags));
	json_object_put(tags);
	return out;
}

int config_fleet_compose(json_object *doc, const char *gw, json_object **out, char *err, size_t errlen)
{
	json_object *g = gateway_of(doc, gw);
	if (!g) {
		snprintf(err, errlen, "the fleet's document has no gateway '%s' (add it: iserctl gateway add %s)", gw, gw);
		return -ENOENT;
	}
	json_object *c = json_object_new_object(), *global = copy(get(doc, "global"));
	if (!global)
		global = json_object_new_object();
	if (json_object_is_type(get(g, "global"), json_type_object)) {
		json_object_object_foreach(get(g, "global"), gk, gv) {
			json_object_object_add(global, gk, copy(gv));
		}
	}
	json_object_object_add(c, "global", global);
	if (get(doc, "discovery"))
		json_object_object_add(c, "discovery", copy(get(doc, "discovery")));
	json_object *bs = json_object_new_array();
	json_object *lists[2] = { get(doc, "backstores"), get(g, "backstores") };
	for (int l = 0; l < 2; l++)
		for (size_t i = 0; lists[l] && i < json_object_array_length(lists[l]); i++)
			json_object_array_add(bs, copy(json_object_array_get_idx(lists[l], i)));
	json_object_object_add(c, "backstores", bs);
	json_object *tg = json_object_new_array(), *dt = get(doc, "targets");
	for (size_t i = 0; dt && i < json_object_array_length(dt); i++)
		json_object_array_add(tg, compose_target(json_object_array_get_idx(dt, i), g));
	json_object_object_add(c, "targets", tg);
	*out = c;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Decomposing: the document once one gateway's configuration changed. */

/* A secret written in the configuration (not a file's name): the document is readable by every client key. */
static const char *secret_in(json_object *o)
{
	static const char *const keys[] = { "password", "mutual_password", NULL };
	if (json_object_is_type(o, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(o); i++) {
			const char *s = secret_in(json_object_array_get_idx(o, i));
			if (s)
				return s;
		}
	} else if (json_object_is_type(o, json_type_object)) {
		if (json_object_is_type(o, json_type_object)) {
			json_object_object_foreach(o, k, v) {
				if (in_list(keys, k))
					return k;
				const char *s = secret_in(v);
				if (s)
					return s;
			}
		}
	}
	return NULL;
}

/* Ports of a gateway's ALUA group, fleet-wide: its tpgs and remote_ports, sorted. */
static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static json_object *decompose_alua(json_object *alua)
{
	json_object *a = copy(alua), *groups = get(a, "groups");
	for (size_t i = 0; groups && i < json_object_array_length(groups); i++) {
		json_object *g = json_object_array_get_idx(groups, i);
		json_object *l[2] = { get(g, "tpgs"), get(g, "remote_ports") };
		size_t n = 0, cap = (l[0] ? json_object_array_length(l[0]) : 0) + (l[1] ? json_object_array_length(l[1]) : 0);
		int64_t *v = calloc(cap ? cap : 1, sizeof(*v));
		for (int k = 0; v && k < 2; k++)
			for (size_t j = 0; l[k] && j < json_object_array_length(l[k]); j++)
				v[n++] = json_object_get_int64(json_object_array_get_idx(l[k], j));
		if (v)
			qsort(v, n, sizeof(*v), cmp_i64);
		json_object *ports = json_object_new_array();
		for (size_t j = 0; v && j < n; j++)
			if (!j || v[j] != v[j - 1])
				json_object_array_add(ports, json_object_new_int64(v[j]));
		free(v);
		json_object_object_add(g, "tpgs", ports);
		json_object_object_del(g, "remote_ports");
	}
	return a;
}

/* A portal group without what is the gateway's own (its tag and portals): what the target's groups share. */
static json_object *tpg_template(json_object *tpg)
{
	json_object *t = copy(tpg);
	json_object_object_del(t, "tag");
	json_object_object_del(t, "portals");
	return t;
}

static bool served_before(json_object *g, const char *iqn)
{
	json_object *tags = tags_of(g, iqn);
	bool any = json_object_array_length(tags) > 0;
	json_object_put(tags);
	return any;
}

/* Drop every gateway's portal groups of targets no longer in the document, and g's (it gets them anew). */
static void drop_tpgs(json_object *doc, json_object *g)
{
	json_object *gws = get(doc, "gateways"), *targets = get(doc, "targets");
	for (size_t i = 0; gws && i < json_object_array_length(gws); i++) {
		json_object *gi = json_object_array_get_idx(gws, i), *tp = get(gi, "tpgs"), *keep = json_object_new_array();
		for (size_t k = 0; tp && k < json_object_array_length(tp); k++) {
			json_object *e = json_object_array_get_idx(tp, k);
			if (gi != g && named(targets, "iqn", get_str(e, "target")))
				json_object_array_add(keep, copy(e));
		}
		json_object_object_add(gi, "tpgs", keep);
	}
}

static int decompose_targets(json_object *old, json_object *nd, json_object *g, json_object *cfg, const char *gw,
			     char *err, size_t errlen)
{
	json_object *ct = get(cfg, "targets"), *targets = json_object_new_array(), *mine = json_object_new_array();
	json_object *og = gateway_of(old, gw);
	for (size_t i = 0; ct && i < json_object_array_length(ct); i++) {
		json_object *t = json_object_array_get_idx(ct, i), *tpgs = get(t, "tpgs");
		const char *iqn = get_str(t, "iqn");
		json_object *ot = named(get(old, "targets"), "iqn", iqn), *tmpl = NULL;
		json_object *nt = json_object_new_object();
		if (json_object_is_type(t, json_type_object)) {
			json_object_object_foreach(t, k, v) {
				if (strcmp(k, "tpgs") && strcmp(k, "alua"))
					json_object_object_add(nt, k, copy(v));
			}
		}
		if (get(t, "alua"))
			json_object_object_add(nt, "alua", decompose_alua(get(t, "alua")));
		for (size_t k = 0; tpgs && k < json_object_array_length(tpgs); k++) {
			json_object *tp = json_object_array_get_idx(tpgs, k), *e = json_object_new_object();
			json_object *tt = tpg_template(tp);
			if (!tmpl) {
				tmpl = tt;
			} else {
				bool same = json_object_equal(tmpl, tt);
				json_object_put(tt);
				if (!same) {
					snprintf(err, errlen, "target %s: its portal groups on gateway %s differ in what they "
						 "hold (LUNs, ACLs, settings); in a fleet every portal group of a target holds "
						 "the same", iqn ? iqn : "?", gw);
					json_object_put(tmpl);
					json_object_put(nt);
					json_object_put(targets);
					json_object_put(mine);
					return -EINVAL;
				}
			}
			json_object_object_add(e, "target", json_object_new_string(iqn ? iqn : ""));
			json_object_object_add(e, "tag", copy(get(tp, "tag")));
			json_object_object_add(e, "portals", get(tp, "portals") ? copy(get(tp, "portals")) :
										 json_object_new_array());
			json_object_array_add(mine, e);
		}
		/*
		 * A portal group new on a gateway that served none of the target
		 * joins what the target's groups hold already: what was edited is
		 * taken only from a gateway that served the target.
		 */
		if (ot && get(ot, "tpg") && (!tmpl || (og && !served_before(og, iqn)))) {
			json_object_put(tmpl);
			tmpl = copy(get(ot, "tpg"));
		}
		json_object_object_add(nt, "tpg", tmpl ? tmpl : json_object_new_object());
		json_object_array_add(targets, nt);
	}
	json_object_object_add(nd, "targets", targets);
	drop_tpgs(nd, g);
	json_object *gt = get(g, "tpgs");
	for (size_t k = 0; k < json_object_array_length(mine); k++)
		json_object_array_add(gt, copy(json_object_array_get_idx(mine, k)));
	json_object_put(mine);
	return 0;
}

int config_fleet_decompose(json_object *doc, const char *gw, json_object *cfg, json_object **out, char *err,
			   size_t errlen)
{
	const char *s = secret_in(cfg);
	if (s) {
		snprintf(err, errlen, "a CHAP \"%s\" is written in the configuration: the fleet's document is read by "
			 "every gateway's Ceph client, so it holds no secret; give \"%s_file\" (a file of mode 0600 "
			 "on each gateway) instead", s, s);
		return -EINVAL;
	}
	json_object *nd = copy(doc);
	if (!nd)
		nd = json_object_new_object();
	json_object_object_add(nd, "format", json_object_new_string(FLEET_FORMAT));
	json_object *g = gateway_of(nd, gw);
	if (!g) {
		g = json_object_new_object();
		json_object_object_add(g, "name", json_object_new_string(gw));
		json_object_array_add(array_of(nd, "gateways"), g);
	}
	/* global: split between the fleet's keys and the gateway's own */
	json_object *shared = json_object_new_object(), *own = json_object_new_object();
	if (json_object_is_type(get(cfg, "global"), json_type_object)) {
		json_object_object_foreach(get(cfg, "global"), k, v) {
			json_object_object_add(in_list(own_global, k) ? own : shared, k, copy(v));
		}
	}
	json_object_object_add(nd, "global", shared);
	json_object_object_add(g, "global", own);
	if (get(cfg, "discovery"))
		json_object_object_add(nd, "discovery", copy(get(cfg, "discovery")));
	else
		json_object_object_del(nd, "discovery");
	/* backstores: those the document shares stay shared; new rbd ones are shared; the others the gateway's */
	json_object *sb = json_object_new_array(), *lb = json_object_new_array(), *cb = get(cfg, "backstores");
	for (size_t i = 0; cb && i < json_object_array_length(cb); i++) {
		json_object *b = json_object_array_get_idx(cb, i);
		const char *name = get_str(b, "name"), *type = get_str(b, "type");
		bool was_shared = named(get(doc, "backstores"), "name", name) != NULL;
		bool was_own = named(get(gateway_of(doc, gw), "backstores"), "name", name) != NULL;
		bool to_shared = was_shared || (!was_own && type && !strcmp(type, "rbd"));
		json_object_array_add(to_shared ? sb : lb, copy(b));
	}
	json_object_object_add(nd, "backstores", sb);
	json_object_object_add(g, "backstores", lb);
	int rc = decompose_targets(doc, nd, g, cfg, gw, err, errlen);
	if (rc) {
		json_object_put(nd);
		return rc;
	}
	*out = nd;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Membership. */

int config_fleet_gateway_add(json_object *doc, const char *gw, char *err, size_t errlen)
{
	if (!config_fleet_name_ok(gw)) {
		snprintf(err, errlen, "gateway name '%s': 1-%d characters of A-Z a-z 0-9 . _ -", gw ? gw : "",
			 FLEET_NAME_MAX);
		return -EINVAL;
	}
	if (gateway_of(doc, gw)) {
		snprintf(err, errlen, "gateway '%s' is in the fleet already", gw);
		return -EEXIST;
	}
	json_object *gws = array_of(doc, "gateways");
	if (json_object_array_length(gws) >= FLEET_MAX_GATEWAYS) {
		snprintf(err, errlen, "the fleet has %d gateways already, the most it takes", FLEET_MAX_GATEWAYS);
		return -ENOSPC;
	}
	json_object *g = json_object_new_object();
	json_object_object_add(g, "name", json_object_new_string(gw));
	json_object_object_add(g, "tpgs", json_object_new_array());
	json_object_array_add(gws, g);
	return 0;
}

int config_fleet_gateway_remove(json_object *doc, const char *gw, char *err, size_t errlen)
{
	json_object *gws = get(doc, "gateways");
	for (size_t i = 0; gws && i < json_object_array_length(gws); i++) {
		const char *n = get_str(json_object_array_get_idx(gws, i), "name");
		if (n && !strcmp(n, gw)) {
			json_object_array_del_idx(gws, i, 1);
			return 0;
		}
	}
	snprintf(err, errlen, "gateway '%s' is not in the fleet", gw);
	return -ENOENT;
}

/* ------------------------------------------------------------------------ */
/* The fleet's rules. */

/* o[key] is there and not of type t. */
static bool bad(json_object *o, const char *key, json_type t)
{
	json_object *v = get(o, key);
	return v && !json_object_is_type(v, t);
}

static int type_err(char *err, size_t errlen, const char *where, size_t i, const char *key, const char *what)
{
	snprintf(err, errlen, "%s[%zu]%s%s: expected %s", where, i, key ? "." : "", key ? key : "", what);
	return -EINVAL;
}

/* What composing and decomposing read has the type they take (the loader checks the rest, in each gateway's words). */
static int check_types(json_object *doc, char *err, size_t errlen)
{
	static const char *const objs[] = { "global", "discovery" }, *const arrs[] = { "backstores", "targets", "gateways" };
	for (int k = 0; k < 2; k++)
		if (bad(doc, objs[k], json_type_object)) {
			snprintf(err, errlen, "%s: expected an object", objs[k]);
			return -EINVAL;
		}
	for (int k = 0; k < 3; k++)
		if (bad(doc, arrs[k], json_type_array)) {
			snprintf(err, errlen, "%s: expected an array", arrs[k]);
			return -EINVAL;
		}
	json_object *targets = get(doc, "targets"), *gws = get(doc, "gateways");
	for (size_t i = 0; targets && i < json_object_array_length(targets); i++) {
		json_object *t = json_object_array_get_idx(targets, i), *alua = get(t, "alua"), *groups = get(alua, "groups");
		if (!json_object_is_type(t, json_type_object))
			return type_err(err, errlen, "targets", i, NULL, "an object");
		if (!get_str(t, "iqn"))
			return type_err(err, errlen, "targets", i, "iqn", "a string (the target's name)");
		if (bad(t, "tpg", json_type_object) || bad(t, "alua", json_type_object))
			return type_err(err, errlen, "targets", i, bad(t, "tpg", json_type_object) ? "tpg" : "alua",
					"an object");
		if (bad(alua, "groups", json_type_array))
			return type_err(err, errlen, "targets", i, "alua.groups", "an array");
		for (size_t k = 0; groups && k < json_object_array_length(groups); k++) {
			json_object *g = json_object_array_get_idx(groups, k);
			if (!json_object_is_type(g, json_type_object) || bad(g, "tpgs", json_type_array) ||
			    bad(g, "remote_ports", json_type_array))
				return type_err(err, errlen, "targets", i, "alua.groups",
						"objects whose tpgs are an array of relative ports");
		}
	}
	for (size_t i = 0; gws && i < json_object_array_length(gws); i++) {
		json_object *g = json_object_array_get_idx(gws, i), *tp = get(g, "tpgs");
		if (!json_object_is_type(g, json_type_object))
			return type_err(err, errlen, "gateways", i, NULL, "an object");
		if (bad(g, "global", json_type_object) || bad(g, "backstores", json_type_array) ||
		    bad(g, "tpgs", json_type_array))
			return type_err(err, errlen, "gateways", i, bad(g, "global", json_type_object) ? "global" :
					bad(g, "backstores", json_type_array) ? "backstores" : "tpgs",
					bad(g, "global", json_type_object) ? "an object" : "an array");
		for (size_t k = 0; tp && k < json_object_array_length(tp); k++) {
			json_object *e = json_object_array_get_idx(tp, k);
			if (!json_object_is_type(e, json_type_object) || !json_object_is_type(get(e, "tag"), json_type_int) ||
			    bad(e, "portals", json_type_array))
				return type_err(err, errlen, "gateways", i, "tpgs",
						"objects {\"target\", \"tag\" (an integer), \"portals\" (an array)}");
		}
	}
	return 0;
}

static int check_shape(json_object *doc, char *err, size_t errlen)
{
	static const char *const keys[] = { "format", "global", "discovery", "backstores", "targets", "gateways", NULL };
	static const char *const gkeys[] = { "name", "global", "backstores", "tpgs", NULL };
	if (!json_object_is_type(doc, json_type_object)) {
		snprintf(err, errlen, "the fleet's document: expected a JSON object");
		return -EINVAL;
	}
	const char *f = get_str(doc, "format");
	if (!f || strcmp(f, FLEET_FORMAT)) {
		snprintf(err, errlen, "format: expected \"%s\"", FLEET_FORMAT);
		return -EINVAL;
	}
	if (json_object_is_type(doc, json_type_object)) {
		json_object_object_foreach(doc, k, v) {
			(void)v;
			if (!in_list(keys, k)) {
				snprintf(err, errlen, "%s: unknown key (expected one of format, global, discovery, backstores, "
					 "targets, gateways)", k);
				return -EINVAL;
			}
		}
	}
	int rc = check_types(doc, err, errlen);
	if (rc)
		return rc;
	json_object *gws = get(doc, "gateways"), *targets = get(doc, "targets");
	if (!json_object_is_type(gws, json_type_array) || !json_object_array_length(gws) ||
	    json_object_array_length(gws) > FLEET_MAX_GATEWAYS) {
		snprintf(err, errlen, "gateways: expected an array of 1-%d gateways", FLEET_MAX_GATEWAYS);
		return -EINVAL;
	}
	/* A gateway's configuration holds as many at most (docs/config.md); the fleet's rules count on it. */
	if (len_of(targets) > CFG_MAX_TARGETS || len_of(get(doc, "backstores")) > CFG_MAX_BACKSTORES) {
		bool t = len_of(targets) > CFG_MAX_TARGETS;
		snprintf(err, errlen, "%s: at most %u", t ? "targets" : "backstores", t ? CFG_MAX_TARGETS : CFG_MAX_BACKSTORES);
		return -EINVAL;
	}
	for (size_t i = 0; targets && i < json_object_array_length(targets); i++) {
		json_object *t = json_object_array_get_idx(targets, i);
		if (get(t, "tpgs")) {
			snprintf(err, errlen, "targets[%zu].tpgs: a fleet's target has one \"tpg\" (what its portal "
				 "groups hold); each gateway's portal groups are in its \"tpgs\"", i);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < json_object_array_length(gws); i++) {
		json_object *g = json_object_array_get_idx(gws, i), *tp = get(g, "tpgs");
		const char *name = get_str(g, "name");
		if (!config_fleet_name_ok(name)) {
			snprintf(err, errlen, "gateways[%zu].name: 1-%d characters of A-Z a-z 0-9 . _ -", i,
				 FLEET_NAME_MAX);
			return -EINVAL;
		}
		for (size_t k = 0; k < i; k++)
			if (!strcmp(get_str(json_object_array_get_idx(gws, k), "name"), name)) {
				snprintf(err, errlen, "gateways[%zu].name: '%s' twice", i, name);
				return -EINVAL;
			}
		if (json_object_is_type(g, json_type_object)) {
			json_object_object_foreach(g, gk, gv) {
				(void)gv;
				if (!in_list(gkeys, gk)) {
					snprintf(err, errlen, "gateway %s: %s: unknown key (expected name, global, backstores, tpgs)",
						 name, gk);
					return -EINVAL;
				}
			}
		}
		if (tp && !json_object_is_type(tp, json_type_array)) {
			snprintf(err, errlen, "gateway %s: tpgs: expected an array", name);
			return -EINVAL;
		}
		for (size_t k = 0; tp && k < json_object_array_length(tp); k++) {
			json_object *e = json_object_array_get_idx(tp, k);
			const char *iqn = get_str(e, "target");
			if (!iqn || !named(targets, "iqn", iqn)) {
				snprintf(err, errlen, "gateway %s: tpgs[%zu].target: %s%s%s", name, k,
					 iqn ? "no target '" : "required", iqn ? iqn : "", iqn ? "' in the fleet" : "");
				return -EINVAL;
			}
		}
	}
	return 0;
}

/* One portal group of the document: target (its index), tag, the gateway serving it (its index). */
struct port {
	size_t t, g;
	int64_t tag;
};

static int cmp_port(const void *a, const void *b)
{
	const struct port *x = a, *y = b;
	return x->t != y->t ? (x->t < y->t ? -1 : 1) : x->tag != y->tag ? (x->tag < y->tag ? -1 : 1) : 0;
}

static size_t target_index(json_object *targets, const char *iqn)
{
	for (size_t i = 0; i < len_of(targets); i++)
		if (!strcmp(get_str(json_object_array_get_idx(targets, i), "iqn"), iqn))
			return i;
	return (size_t)-1;
}

/*
 * docs/cluster.md's rules, on the whole fleet: one relative port of a
 * target, one gateway (an I_T nexus must name one port); and a gateway
 * serving a shared store serves it under every target name the others do
 * (under another it would be a second SCSI target with the same LU).
 * Sorted and as bitmaps: the document may hold 1024 targets, 4096 stores.
 */
#define TWORDS ((CFG_MAX_TARGETS + 63) / 64)

static int check_fleet_rules(json_object *doc, char *err, size_t errlen)
{
	json_object *gws = get(doc, "gateways"), *targets = get(doc, "targets"), *bs = get(doc, "backstores");
	size_t ng = len_of(gws), nt = len_of(targets), nb = len_of(bs), np = 0, cap = 0;
	for (size_t i = 0; i < ng; i++)
		cap += len_of(get(json_object_array_get_idx(gws, i), "tpgs"));
	struct port *ports = calloc(cap ? cap : 1, sizeof(*ports));
	uint64_t (*served)[TWORDS] = calloc(ng ? ng : 1, sizeof(*served)), (*users)[TWORDS] = calloc(nb ? nb : 1,
												  sizeof(*users));
	int rc = ports && served && users ? 0 : -ENOMEM;
	if (rc)
		snprintf(err, errlen, "out of memory");
	for (size_t i = 0; !rc && i < ng; i++) {
		json_object *tp = get(json_object_array_get_idx(gws, i), "tpgs");
		for (size_t k = 0; k < len_of(tp); k++) {
			json_object *e = json_object_array_get_idx(tp, k);
			ports[np] = (struct port){ target_index(targets, get_str(e, "target")), i,
						   json_object_get_int64(get(e, "tag")) };
			if (ports[np].t >= nt)
				continue; /* check_shape refused it already */
			served[i][ports[np].t / 64] |= 1ull << (ports[np].t % 64);
			np++;
		}
	}
	if (!rc) {
		qsort(ports, np, sizeof(*ports), cmp_port);
		for (size_t k = 1; k < np; k++)
			if (!cmp_port(&ports[k - 1], &ports[k])) {
				snprintf(err, errlen, "relative port %lld of target %s is served by gateway %s and by gateway "
					 "%s: give one of them another portal group tag", (long long)ports[k].tag,
					 get_str(json_object_array_get_idx(targets, ports[k].t), "iqn"),
					 get_str(json_object_array_get_idx(gws, ports[k - 1].g), "name"),
					 get_str(json_object_array_get_idx(gws, ports[k].g), "name"));
				rc = -EINVAL;
				break;
			}
	}
	/* Which targets hold a LUN of each shared store. */
	for (size_t t = 0; !rc && t < nt; t++) {
		json_object *luns = get(get(json_object_array_get_idx(targets, t), "tpg"), "luns");
		for (size_t l = 0; l < len_of(luns); l++) {
			const char *b = get_str(json_object_array_get_idx(luns, l), "backstore");
			for (size_t k = 0; b && k < nb; k++) {
				const char *name = get_str(json_object_array_get_idx(bs, k), "name");
				if (name && !strcmp(b, name)) {
					users[k][t / 64] |= 1ull << (t % 64);
					break;
				}
			}
		}
	}
	for (size_t g = 0; !rc && g < ng; g++)
		for (size_t k = 0; !rc && k < nb; k++) {
			bool some = false, all = true;
			for (size_t w = 0; w < TWORDS; w++) {
				some |= (served[g][w] & users[k][w]) != 0;
				all &= (served[g][w] & users[k][w]) == users[k][w];
			}
			if (!some || all)
				continue;
			size_t t = 0;
			while (!(users[k][t / 64] & (1ull << (t % 64))) || (served[g][t / 64] & (1ull << (t % 64))))
				t++;
			snprintf(err, errlen, "backstore %s is a LUN of target %s, and gateway %s serves other targets "
				 "with it but has no portal group of %s: every gateway of a shared store serves it under "
				 "every target name it has (docs/cluster.md)",
				 get_str(json_object_array_get_idx(bs, k), "name"),
				 get_str(json_object_array_get_idx(targets, t), "iqn"),
				 get_str(json_object_array_get_idx(gws, g), "name"),
				 get_str(json_object_array_get_idx(targets, t), "iqn"));
			rc = -EINVAL;
		}
	free(ports);
	free(served);
	free(users);
	return rc;
}

/*
 * A secret's file is each gateway's own: the check of every gateway's
 * configuration on one host reads none of them (a stand-in takes its
 * place); each gateway reads its own when it plans the document.
 */
static void stand_in_secrets(json_object *o)
{
	if (json_object_is_type(o, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(o); i++)
			stand_in_secrets(json_object_array_get_idx(o, i));
		return;
	}
	if (!json_object_is_type(o, json_type_object))
		return;
	static const char *const files[] = { "password_file", "mutual_password_file" };
	for (int k = 0; k < 2; k++)
		if (get(o, files[k])) {
			json_object_object_del(o, files[k]);
			json_object_object_add(o, k ? "mutual_password" : "password",
					       json_object_new_string(k ? "fleet-stand-in-2" : "fleet-stand-in-1"));
		}
	json_object_object_foreach(o, key, v) {
		(void)key;
		stand_in_secrets(v);
	}
}

int config_fleet_check(json_object *doc, char *err, size_t errlen)
{
	int rc = check_shape(doc, err, errlen);
	if (!rc)
		rc = check_fleet_rules(doc, err, errlen);
	if (rc)
		return rc;
	const char *s = secret_in(doc);
	if (s) {
		snprintf(err, errlen, "a CHAP \"%s\" is written in the document, which every gateway's Ceph client "
			 "reads: give \"%s_file\" instead", s, s);
		return -EINVAL;
	}
	json_object *gws = get(doc, "gateways");
	for (size_t i = 0; i < json_object_array_length(gws); i++) {
		const char *name = get_str(json_object_array_get_idx(gws, i), "name");
		json_object *c = NULL;
		struct config *cfg = NULL;
		char e[512] = "";
		if (!(rc = config_fleet_compose(doc, name, &c, e, sizeof(e)))) {
			stand_in_secrets(c);
			rc = config_load_doc(c, name, &cfg, e, sizeof(e));
		}
		config_wipe_secrets(c);
		json_object_put(c);
		config_free(cfg);
		if (rc) {
			snprintf(err, errlen, "gateway %s: %s", name, e);
			return rc;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Import. */

/* Where a and b first differ ("targets[0].tpg.luns[1]"), into path; false when they are equal. */
static bool first_difference(json_object *a, json_object *b, char *path, size_t len)
{
	if (json_object_equal(a, b))
		return false;
	size_t n = strlen(path);
	if (json_object_is_type(a, json_type_object) && json_object_is_type(b, json_type_object)) {
		json_object *sides[2] = { a, b };
		for (int s = 0; s < 2; s++) {
			if (json_object_is_type(sides[s], json_type_object)) {
				json_object_object_foreach(sides[s], k, v) {
					(void)v;
					snprintf(path + n, len - n, "%s%s", n ? "." : "", k);
					if (first_difference(get(a, k), get(b, k), path, len))
						return true;
				}
			}
		}
	} else if (json_object_is_type(a, json_type_array) && json_object_is_type(b, json_type_array)) {
		size_t la = json_object_array_length(a), lb = json_object_array_length(b);
		for (size_t i = 0; i < la && i < lb; i++) {
			snprintf(path + n, len - n, "[%zu]", i);
			if (first_difference(json_object_array_get_idx(a, i), json_object_array_get_idx(b, i), path, len))
				return true;
		}
		snprintf(path + n, len - n, "[%zu]", la < lb ? la : lb);
		return true;
	}
	path[n] = 0;
	return true;
}

static const char *shown(json_object *o)
{
	return o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE) :
		   "(absent)";
}

/* The value at path in doc (path as first_difference writes it), or NULL. */
static json_object *at(json_object *doc, const char *path)
{
	char key[256];
	json_object *o = doc;
	while (o && *path) {
		if (*path == '.') {
			path++;
		} else if (*path == '[') {
			size_t i = strtoul(path + 1, (char **)&path, 10);
			path += *path == ']';
			o = json_object_is_type(o, json_type_array) && i < json_object_array_length(o) ?
				    json_object_array_get_idx(o, i) : NULL;
		} else {
			size_t l = strcspn(path, ".[");
			snprintf(key, sizeof(key), "%.*s", (int)(l < sizeof(key) ? l : sizeof(key) - 1), path);
			o = get(o, key);
			path += l;
		}
	}
	return o;
}

int config_fleet_import(json_object *const *cfgs, const char *const *names, size_t n, json_object **out, char *err,
			size_t errlen)
{
	static const char *const shared[] = { "global", "discovery", "backstores", "targets" };
	json_object *doc = NULL;
	int rc = 0;
	if (!n || n > FLEET_MAX_GATEWAYS) {
		snprintf(err, errlen, "import: 1-%d gateways, got %zu", FLEET_MAX_GATEWAYS, n);
		return -EINVAL;
	}
	json_object *first = NULL;
	for (size_t i = 0; !rc && i < n; i++) {
		if (!config_fleet_name_ok(names[i])) {
			snprintf(err, errlen, "gateway name '%s': 1-%d characters of A-Z a-z 0-9 . _ -", names[i],
				 FLEET_NAME_MAX);
			rc = -EINVAL;
			break;
		}
		json_object *alone = NULL, *empty = json_object_new_object();
		json_object_object_add(empty, "format", json_object_new_string(FLEET_FORMAT));
		rc = config_fleet_decompose(empty, names[i], cfgs[i], &alone, err, errlen);
		json_object_put(empty);
		if (rc)
			break;
		if (!first) {
			first = alone;
			doc = copy(alone);
			continue;
		}
		/* What every gateway shares must be the same in every file. */
		for (size_t s = 0; !rc && s < sizeof(shared) / sizeof(shared[0]); s++) {
			char path[512];
			snprintf(path, sizeof(path), "%s", shared[s]);
			if (!first_difference(get(first, shared[s]), get(alone, shared[s]), path, sizeof(path)))
				continue;
			json_object *va = at(first, path), *vb = at(alone, path);
			char a[200], b[200];
			snprintf(a, sizeof(a), "%s", shown(va));
			snprintf(b, sizeof(b), "%s", shown(vb));
			snprintf(err, errlen, "gateways %s and %s differ in what a fleet shares: %s is %s on %s, %s on %s",
				 names[0], names[i], path, a, names[0], b, names[i]);
			rc = -EINVAL;
		}
		json_object *g = json_object_get(gateway_of(alone, names[i]));
		json_object_put(alone);
		if (!rc && gateway_of(doc, names[i])) {
			snprintf(err, errlen, "gateway name '%s' given twice", names[i]);
			rc = -EINVAL;
		}
		if (!rc)
			json_object_array_add(array_of(doc, "gateways"), g);
		else
			json_object_put(g);
	}
	json_object_put(first);
	if (!rc)
		rc = config_fleet_check(doc, err, errlen);
	if (rc) {
		json_object_put(doc);
		return rc;
	}
	*out = doc;
	return 0;
}
