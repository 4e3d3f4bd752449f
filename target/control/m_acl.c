/* Methods on ACLs and their mapped LUNs. */
#include <inttypes.h>
#include <string.h>

#include "target/control/rpc.h"
#include "target/control/rpc_int.h"

static int e_acl_add(struct rpc_call *c, struct change *ch)
{
	static const char *const skip[] = { "target", "tag", NULL };
	json_object *g = doc_tpg(c, ch, NULL);
	const char *ini = rpc_str(c, "initiator");
	if (!g)
		return -1;
	json_object *acls = doc_array(g, "acls");
	if (doc_find(acls, "initiator", ini, 0, NULL))
		return rpc_fail(c, RPC_REFUSED, "the TPG has an ACL for %s already", ini);
	json_object *a = json_object_new_object();
	doc_merge(a, c->params, skip);
	if (!json_object_object_get_ex(a, "mapped_luns", NULL)) {
		/* Every LUN of the TPG, at its own number (targetcli's auto_add_mapped_luns). */
		json_object *ml = json_object_new_array(), *luns = doc_array(g, "luns");
		for (size_t i = 0; i < json_object_array_length(luns); i++) {
			json_object *l = json_object_array_get_idx(luns, i), *id, *m = json_object_new_object();
			json_object_object_get_ex(l, "lun", &id);
			json_object_object_add(m, "mapped_lun", json_object_get(id));
			json_object_object_add(m, "tpg_lun", json_object_get(id));
			json_object_array_add(ml, m);
		}
		json_object_object_add(a, "mapped_luns", ml);
	}
	json_object_array_add(acls, a);
	return 0;
}

/* The ACL named by params target, tag and initiator (NULL: error set); its TPG's ACLs in *acls. */
static json_object *doc_acl(struct rpc_call *c, struct change *ch, json_object **acls, size_t *at)
{
	json_object *g = doc_tpg(c, ch, NULL), *a;
	const char *ini = rpc_str(c, "initiator");
	if (!g)
		return NULL;
	*acls = doc_array(g, "acls");
	if (!(a = doc_find(*acls, "initiator", ini, 0, at)))
		rpc_fail(c, RPC_NOT_FOUND, "the TPG has no ACL for %s", ini);
	return a;
}

static int e_acl_remove(struct rpc_call *c, struct change *ch)
{
	json_object *acls;
	size_t at;
	if (!doc_acl(c, ch, &acls, &at))
		return -1;
	json_object_array_del_idx(acls, at, 1);
	return 0;
}

static int e_acl_set(struct rpc_call *c, struct change *ch)
{
	static const char *const skip[] = { "target", "tag", "initiator", NULL };
	json_object *acls, *a = doc_acl(c, ch, &acls, NULL), *chap;
	if (!a)
		return -1;
	if (json_object_object_get_ex(c->params, "mapped_luns", NULL))
		return rpc_fail(c, RPC_INVALID_PARAMS, "mapped_luns: changed with mapped_lun.add and mapped_lun.remove");
	doc_merge(a, c->params, skip);
	if (json_object_object_get_ex(a, "chap", &chap) && json_object_is_type(chap, json_type_null))
		json_object_object_del(a, "chap"); /* "chap": null turns CHAP off */
	return 0;
}

static int e_mapped_lun_add(struct rpc_call *c, struct change *ch)
{
	json_object *acls, *a = doc_acl(c, ch, &acls, NULL);
	int64_t m = rpc_int(c, "mapped_lun", 0), t = rpc_int(c, "tpg_lun", 0);
	if (!a)
		return -1;
	json_object *ml = doc_array(a, "mapped_luns");
	if (doc_find(ml, "mapped_lun", NULL, m, NULL))
		return rpc_fail(c, RPC_REFUSED, "mapped LUN %" PRId64 " exists in this ACL", m);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "mapped_lun", json_object_new_int64(m));
	json_object_object_add(o, "tpg_lun", json_object_new_int64(t));
	if (json_object_object_get_ex(c->params, "write_protect", NULL))
		json_object_object_add(o, "write_protect", json_object_new_boolean(rpc_bool(c, "write_protect")));
	json_object_array_add(ml, o);
	return 0;
}

static int e_mapped_lun_remove(struct rpc_call *c, struct change *ch)
{
	json_object *acls, *a = doc_acl(c, ch, &acls, NULL);
	int64_t m = rpc_int(c, "mapped_lun", 0);
	size_t at;
	if (!a)
		return -1;
	if (!doc_find(doc_array(a, "mapped_luns"), "mapped_lun", NULL, m, &at))
		return rpc_fail(c, RPC_NOT_FOUND, "no mapped LUN %" PRId64 " in this ACL", m);
	json_object_array_del_idx(doc_array(a, "mapped_luns"), at, 1);
	return 0;
}

static const struct rpc_param p_acl[] = { P_TPG, P_STR("initiator", true), P_END };
static const struct rpc_param p_acl_chap[] = { P_TPG, P_STR("initiator", true), P_SECRET("chap"), P_END };
static const struct rpc_param p_mapped_lun_add[] = { P_TPG, P_STR("initiator", true), P_INT("mapped_lun", true, 0, 16383),
						     P_INT("tpg_lun", true, 0, 16383), P_BOOL("write_protect"), P_END };
static const struct rpc_param p_mapped_lun_remove[] = { P_TPG, P_STR("initiator", true),
							P_INT("mapped_lun", true, 0, 16383), P_END };

const struct rpc_method rpc_methods_acl[] = {
	{ "acl.add", NULL, e_acl_add, true, p_acl_chap, "an ACL's keys in the file (allow_target_reset, mapped_luns)",
	  "an ACL (target, tag, initiator, chap, allow_target_reset; mapped_luns: default "
	  "every LUN of the TPG)" },
	{ "acl.remove", NULL, e_acl_remove, true, p_acl, NULL,
	  "an ACL (target, tag, initiator); its sessions are closed" },
	{ "acl.set", NULL, e_acl_set, true, p_acl_chap, "an ACL's keys in the file but mapped_luns",
	  "chap (null: off) or allow_target_reset of an ACL" },
	{ "mapped_lun.add", NULL, e_mapped_lun_add, true, p_mapped_lun_add, NULL,
	  "map tpg_lun as mapped_lun for an ACL (write_protect)" },
	{ "mapped_lun.remove", NULL, e_mapped_lun_remove, true, p_mapped_lun_remove, NULL,
	  "a mapped LUN of an ACL" },
	{ NULL, NULL, NULL, false, NULL, NULL, NULL },
};
