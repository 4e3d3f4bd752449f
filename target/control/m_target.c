/* Methods on targets, their portal groups, portals and LUNs. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "target/control/rpc.h"
#include "target/control/rpc_int.h"

static const char *const skip_none[] = { NULL };

static int e_target_create(struct rpc_call *c, struct change *ch)
{
	const char *iqn = rpc_str(c, "iqn");
	json_object *doc = change_doc(c, ch);
	if (!doc)
		return -1;
	json_object *a = doc_array(doc, "targets");
	if (doc_find(a, "iqn", iqn, 0, NULL))
		return rpc_fail(c, RPC_REFUSED, "target %s exists", iqn);
	json_object *t = json_object_new_object();
	doc_merge(t, c->params, skip_none);
	if (!json_object_object_get_ex(t, "tpgs", NULL)) {
		/* As targetcli does: a target comes with TPG 1, enabled, to which portals and LUNs are added. */
		json_object *tpgs = json_object_new_array(), *g = json_object_new_object();
		json_object_object_add(g, "tag", json_object_new_int(1));
		json_object_object_add(g, "enable", json_object_new_boolean(true));
		json_object_array_add(tpgs, g);
		json_object_object_add(t, "tpgs", tpgs);
	}
	json_object_array_add(a, t);
	return 0;
}

static int e_target_delete(struct rpc_call *c, struct change *ch)
{
	size_t at;
	if (!doc_target(c, ch, rpc_str(c, "iqn"), &at))
		return -1;
	json_object_array_del_idx(doc_array(change_doc(c, ch), "targets"), at, 1);
	return 0;
}

static int e_tpg_create(struct rpc_call *c, struct change *ch)
{
	static const char *const skip[] = { "target", "tag", "alua_group", NULL };
	const char *iqn = rpc_str(c, "target");
	int64_t tag = rpc_int(c, "tag", 0), group = rpc_int(c, "alua_group", 0);
	json_object *t = doc_target(c, ch, iqn, NULL);
	if (!t)
		return -1;
	if (doc_find(doc_array(t, "tpgs"), "tag", NULL, tag, NULL))
		return rpc_fail(c, RPC_REFUSED, "target %s has a TPG %" PRId64 " already", iqn, tag);
	if (group) {
		/* Its relative port joins an ALUA target port group in the same change. */
		json_object *ag = doc_alua_group(c, t, iqn, group);
		if (!ag)
			return -1;
		json_object_array_add(doc_array(ag, "tpgs"), json_object_new_int64(tag));
	}
	json_object *g = json_object_new_object();
	json_object_object_add(g, "tag", json_object_new_int64(tag));
	doc_merge(g, c->params, skip);
	json_object_array_add(doc_array(t, "tpgs"), g);
	return 0;
}

static int e_tpg_delete(struct rpc_call *c, struct change *ch)
{
	size_t at;
	int64_t tag = rpc_int(c, "tag", 0);
	if (!doc_tpg(c, ch, &at))
		return -1;
	json_object *t = doc_target(c, ch, rpc_str(c, "target"), NULL), *a;
	json_object_array_del_idx(doc_array(t, "tpgs"), at, 1);
	/* Its relative port leaves its ALUA group with it. */
	if (json_object_object_get_ex(t, "alua", &a) && json_object_is_type(a, json_type_object)) {
		json_object *gs = doc_array(a, "groups");
		for (size_t i = 0; i < json_object_array_length(gs); i++) {
			json_object *ports = doc_array(json_object_array_get_idx(gs, i), "tpgs");
			for (size_t j = json_object_array_length(ports); j-- > 0;)
				if (json_object_get_int64(json_object_array_get_idx(ports, j)) == tag)
					json_object_array_del_idx(ports, j, 1);
		}
	}
	return 0;
}

static int e_tpg_set(struct rpc_call *c, struct change *ch)
{
	json_object *g = doc_tpg(c, ch, NULL);
	if (!g)
		return -1;
	for (const char *const *k = (const char *const[]){ "portals", "luns", "acls", NULL }; *k; k++)
		if (json_object_object_get_ex(c->params, *k, NULL))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: changed with the portal.*, lun.* and acl.* methods", *k);
	json_object *np;
	if (json_object_object_get_ex(c->params, "params", &np) && json_object_is_type(np, json_type_object)) {
		/* Negotiation parameters are merged one by one: the others keep their values. */
		json_object *cur;
		if (!json_object_object_get_ex(g, "params", &cur)) {
			cur = json_object_new_object();
			json_object_object_add(g, "params", cur);
		}
		doc_merge(cur, np, skip_none);
	}
	static const char *const skip[] = { "target", "tag", "params", NULL };
	doc_merge(g, c->params, skip);
	/* KEY=null takes a key back to its default (redirect=null: no redirection, of either type). */
	json_object_object_foreach(c->params, k, v)
		if (!v && !doc_in_list(skip, k)) {
			json_object_object_del(g, k);
			if (!strcmp(k, "redirect"))
				json_object_object_del(g, "redirect_type");
		}
	return 0;
}

static int tpg_enable(struct rpc_call *c, struct change *ch, bool on)
{
	json_object *g = doc_tpg(c, ch, NULL);
	if (!g)
		return -1;
	json_object_object_add(g, "enable", json_object_new_boolean(on));
	return 0;
}

static int e_tpg_enable(struct rpc_call *c, struct change *ch)
{
	return tpg_enable(c, ch, true);
}

static int e_tpg_disable(struct rpc_call *c, struct change *ch)
{
	return tpg_enable(c, ch, false);
}

/* The portal named by ip, port (default 3260) and iser (default false) in TPG g's portals (NULL: none). */
static json_object *find_portal(struct rpc_call *c, json_object *g, size_t *at)
{
	const char *ip = rpc_str(c, "ip");
	int64_t port = rpc_int(c, "port", 3260);
	bool iser = rpc_bool(c, "iser");
	json_object *ps = doc_array(g, "portals");
	for (size_t i = 0; i < json_object_array_length(ps); i++) {
		json_object *p = json_object_array_get_idx(ps, i), *v;
		int64_t pp = json_object_object_get_ex(p, "port", &v) ? json_object_get_int64(v) : 3260;
		bool pi = json_object_object_get_ex(p, "iser", &v) && json_object_get_boolean(v);
		if (json_object_object_get_ex(p, "ip", &v) && !strcmp(json_object_get_string(v), ip) && pp == port &&
		    pi == iser) {
			*at = i;
			return p;
		}
	}
	return NULL;
}

static int e_portal_add(struct rpc_call *c, struct change *ch)
{
	json_object *g = doc_tpg(c, ch, NULL);
	size_t at;
	if (!g)
		return -1;
	if (find_portal(c, g, &at))
		return rpc_fail(c, RPC_REFUSED, "the TPG has that portal already");
	json_object *p = json_object_new_object();
	json_object_object_add(p, "ip", json_object_new_string(rpc_str(c, "ip")));
	json_object_object_add(p, "port", json_object_new_int64(rpc_int(c, "port", 3260)));
	json_object_object_add(p, "iser", json_object_new_boolean(rpc_bool(c, "iser")));
	if (rpc_int(c, "tos", 0))
		json_object_object_add(p, "tos", json_object_new_int64(rpc_int(c, "tos", 0)));
	json_object_array_add(doc_array(g, "portals"), p);
	return 0;
}

static int e_portal_remove(struct rpc_call *c, struct change *ch)
{
	json_object *g = doc_tpg(c, ch, NULL);
	size_t at;
	if (!g)
		return -1;
	if (!find_portal(c, g, &at))
		return rpc_fail(c, RPC_NOT_FOUND, "the TPG has no such portal");
	json_object_array_del_idx(doc_array(g, "portals"), at, 1);
	return 0;
}

/*
 * lun.add: the LUN as an object of the file, numbered by the running TPG
 * (the number given, or the lowest free one, as targetcli picks), and added
 * alone (change.c): whether planned only or carried out, it is numbered and
 * checked here and by the loader's code, and nowhere else.
 */
static int e_lun_add(struct rpc_call *c, struct change *ch)
{
	size_t ti, gi;
	const struct cfg_tpg *g = running_tpg(c, &ti, &gi);
	int64_t lun = rpc_int(c, "lun", -1);
	if (!g)
		return -1;
	uint8_t *used = calloc(16384 / 8, 1);
	if (!used)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	for (size_t i = 0; i < g->nluns; i++)
		used[g->luns[i].lun / 8] |= (uint8_t)(1u << (g->luns[i].lun % 8));
	bool taken = lun >= 0 && (used[lun / 8] & (1u << (lun % 8)));
	if (lun < 0)
		for (lun = 0; lun < 16384 && (used[lun / 8] & (1u << (lun % 8))); lun++)
			;
	free(used);
	if (taken)
		return rpc_fail(c, RPC_REFUSED, "LUN %" PRId64 " exists in this TPG", lun);
	json_object *l = json_object_new_object();
	json_object_object_add(l, "lun", json_object_new_int64(lun));
	json_object_object_add(l, "backstore", json_object_new_string(rpc_str(c, "backstore")));
	if (json_object_object_get_ex(c->params, "read_only", NULL))
		json_object_object_add(l, "read_only", json_object_new_boolean(rpc_bool(c, "read_only")));
	change_add_lun(ch, ti, gi, l);
	return 0;
}

static int e_lun_remove(struct rpc_call *c, struct change *ch)
{
	json_object *g = doc_tpg(c, ch, NULL);
	int64_t lun = rpc_int(c, "lun", 0);
	size_t at;
	if (!g)
		return -1;
	if (!doc_find(doc_array(g, "luns"), "lun", NULL, lun, &at))
		return rpc_fail(c, RPC_NOT_FOUND, "no LUN %" PRId64 " in this TPG", lun);
	json_object_array_del_idx(doc_array(g, "luns"), at, 1);
	/* The mappings of every ACL to it go with it, as in LIO. */
	json_object *acls = doc_array(g, "acls");
	for (size_t i = 0; i < json_object_array_length(acls); i++) {
		json_object *ml = doc_array(json_object_array_get_idx(acls, i), "mapped_luns");
		while (doc_find(ml, "tpg_lun", NULL, lun, &at))
			json_object_array_del_idx(ml, at, 1);
	}
	return 0;
}

static const struct rpc_param p_iqn[] = { P_STR("iqn", true), P_END };
static const struct rpc_param p_tpg[] = { P_TPG, P_END };
static const struct rpc_param p_tpg_create[] = { P_TPG, P_INT("alua_group", false, 1, 65535), P_END };
static const struct rpc_param p_tpg_set[] = { P_TPG, P_SECRET("demo_chap"), P_END };
static const struct rpc_param p_portal[] = { P_TPG, P_STR("ip", true), P_INT("port", false, 1, 65535), P_BOOL("iser"),
					     P_END };
static const struct rpc_param p_portal_add[] = { P_TPG, P_STR("ip", true), P_INT("port", false, 1, 65535),
						 P_BOOL("iser"), P_INT("tos", false, 0, 255), P_END };
static const struct rpc_param p_lun_add[] = { P_TPG, P_STR("backstore", true), P_INT("lun", false, 0, 16383),
					      P_BOOL("read_only"), P_END };
static const struct rpc_param p_lun_remove[] = { P_TPG, P_INT("lun", true, 0, 16383), P_END };

const struct rpc_method rpc_methods_target[] = {
	{ "target.create", NULL, e_target_create, true, p_iqn, "a target's keys in the file (alias, tpgs, alua)",
	  "a target (iqn, alias; with TPG 1 enabled unless tpgs are given)" },
	{ "target.delete", NULL, e_target_delete, true, p_iqn, NULL,
	  "a target and its TPGs (iqn); their sessions are closed" },
	{ "tpg.create", NULL, e_tpg_create, true, p_tpg_create, "a TPG's keys in the file",
	  "a TPG (target, tag, and its settings as in the file; alua_group: the "
	  "ALUA target port group its port joins)" },
	{ "tpg.delete", NULL, e_tpg_delete, true, p_tpg, NULL,
	  "a TPG (target, tag); its sessions are closed" },
	{ "tpg.set", NULL, e_tpg_set, true, p_tpg_set, "a TPG's keys in the file but portals, luns and acls; params merged key by key",
	  "settings of a TPG (enable, demo_mode, demo_write_protect, demo_target_reset, "
	  "demo_chap, params, redirect, redirect_type, redirect_balance; KEY null: its default)" },
	{ "tpg.enable", NULL, e_tpg_enable, true, p_tpg, NULL,
	  "accept logins to TPG tag of target" },
	{ "tpg.disable", NULL, e_tpg_disable, true, p_tpg, NULL,
	  "refuse logins to TPG tag of target and close its sessions" },
	{ "portal.add", NULL, e_portal_add, true, p_portal_add, NULL,
	  "a portal (target, tag, ip, port, iser, tos): listening at once" },
	{ "portal.remove", NULL, e_portal_remove, true, p_portal, NULL,
	  "a portal; its listener stops when no TPG has it (sessions stay)" },
	{ "lun.add", NULL, e_lun_add, true, p_lun_add, NULL,
	  "a LUN (target, tag, backstore, lun: default the lowest free, read_only)" },
	{ "lun.remove", NULL, e_lun_remove, true, p_lun_remove, NULL,
	  "a LUN (target, tag, lun) and the ACL mappings to it" },
	{ NULL, NULL, NULL, false, NULL, NULL, NULL },
};
