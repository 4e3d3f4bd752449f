/* Methods on backstores. */
#include <stdio.h>
#include <string.h>

#include "target/backstore/backstore.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/runtime/runtime.h"
#include "target/scsi/scsi.h"

static const char *const skip_none[] = { NULL };

/* One object added: checked alone and appended (change.c), so the 4000th costs what the first did. */
static int e_backstore_create(struct rpc_call *c, struct change *ch)
{
	const char *name = rpc_str(c, "name");
	if (rt_store_named(name, NULL))
		return rpc_fail(c, RPC_REFUSED, "backstore '%s' exists", name);
	json_object *b = json_object_new_object();
	doc_merge(b, c->params, skip_none);
	change_add_backstore(ch, b);
	return 0;
}

static int e_backstore_set(struct rpc_call *c, struct change *ch)
{
	const char *name = rpc_str(c, "name");
	json_object *doc = change_doc(c, ch), *b;
	if (!doc)
		return -1;
	if (!(b = doc_find(doc_array(doc, "backstores"), "name", name, 0, NULL)))
		return rpc_fail(c, RPC_NOT_FOUND, "no backstore '%s'", name);
	doc_merge(b, c->params, skip_none);
	return 0;
}

/* The first LUN of doc that uses backstore name, as a path for a message (false: none). */
static bool backstore_user(json_object *doc, const char *name, char *out, size_t n)
{
	json_object *ts = doc_array(doc, "targets");
	for (size_t i = 0; i < json_object_array_length(ts); i++) {
		json_object *t = json_object_array_get_idx(ts, i), *iqn, *tags = doc_array(t, "tpgs");
		json_object_object_get_ex(t, "iqn", &iqn);
		for (size_t j = 0; j < json_object_array_length(tags); j++) {
			json_object *g = json_object_array_get_idx(tags, j), *tag, *luns = doc_array(g, "luns");
			json_object_object_get_ex(g, "tag", &tag);
			for (size_t k = 0; k < json_object_array_length(luns); k++) {
				json_object *l = json_object_array_get_idx(luns, k), *b, *id;
				if (json_object_object_get_ex(l, "backstore", &b) && !strcmp(json_object_get_string(b), name)) {
					json_object_object_get_ex(l, "lun", &id);
					snprintf(out, n, "/iscsi/%s/tpg%s/lun%s", json_object_get_string(iqn),
						 json_object_get_string(tag), json_object_get_string(id));
					return true;
				}
			}
		}
	}
	return false;
}

static int e_backstore_delete(struct rpc_call *c, struct change *ch)
{
	const char *name = rpc_str(c, "name");
	json_object *doc = change_doc(c, ch);
	size_t at;
	char user[512];
	if (!doc)
		return -1;
	if (!doc_find(doc_array(doc, "backstores"), "name", name, 0, &at))
		return rpc_fail(c, RPC_NOT_FOUND, "no backstore '%s'", name);
	if (backstore_user(doc, name, user, sizeof(user)))
		return rpc_fail(c, RPC_REFUSED, "backstore '%s' is used by %s: remove that LUN first", name, user);
	json_object_array_del_idx(doc_array(doc, "backstores"), at, 1);
	return 0;
}

/*
 * An action on the running store: the size asked for is checked as the
 * file's would be, the store grown (or made to read its device again), and
 * the running configuration takes the size it has now.
 */
static int m_backstore_resize(struct rpc_call *c)
{
	const char *name = rpc_str(c, "name");
	json_object *size;
	json_object_object_get_ex(c->params, "size", &size);
	struct config *cfg = rt_config();
	size_t i;
	struct rt_store *s = rt_store_named(name, &i);
	if (!s)
		return rpc_fail(c, RPC_NOT_FOUND, "no backstore '%s'", name);
	/* The size checked by the loader, in the running document with this one size changed. */
	json_object *doc = config_to_obj(cfg), *bss;
	if (!doc)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	json_object_object_get_ex(doc, "backstores", &bss);
	json_object_object_add(json_object_array_get_idx(bss, i), "size", json_object_get(size));
	struct config *n = NULL;
	char err[512] = "";
	int rc = config_load_doc(doc, "the change", &n, err, sizeof(err));
	config_wipe_secrets(doc);
	json_object_put(doc);
	if (rc)
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	uint64_t want = n->backstores[i].bs.size;
	config_free(n);
	uint64_t before = backstore_size(s->bs);
	if (backstore_resize(s->bs, want, err, sizeof(err)))
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	uint64_t now = backstore_size(s->bs);
	if (now != before)
		scsi_lu_capacity_changed(s->lu);
	/* A device-sized backstore configured with size 0 keeps following its device. */
	if (!backstore_kind_has(cfg->backstores[i].bs.type, BS_KIND_FOLLOW) || cfg->backstores[i].bs.size) {
		pthread_rwlock_wrlock(&rt_lock);
		cfg->backstores[i].bs.size = now;
		pthread_rwlock_unlock(&rt_lock);
	}
	c->result = json_object_new_object();
	json_object_object_add(c->result, "name", json_object_new_string(name));
	json_object_object_add(c->result, "size", json_object_new_uint64(now));
	json_object_object_add(c->result, "was", json_object_new_uint64(before));
	return 0;
}

static const struct rpc_param p_name[] = { P_STR("name", true), P_END };
static const struct rpc_param p_backstore_resize[] = {
	P_STR("name", true),
	{ "size", RPC_P_VALUE, true, 0, 0, false,
	  "(bytes, or a string such as \"20G\"; 0 for a block or nvme backstore: follow the device)" },
	P_END };

const struct rpc_method rpc_methods_backstore[] = {
	{ "backstore.create", NULL, e_backstore_create, true, p_name, "a backstore's keys in the file (type, path, size, ...)",
	  "a backstore (name, type, path, size, ... as in the file)" },
	{ "backstore.delete", NULL, e_backstore_delete, true, p_name, NULL,
	  "a backstore no LUN uses (name)" },
	{ "backstore.set", NULL, e_backstore_set, true, p_name, "a backstore's keys in the file",
	  "attributes of a backstore (write_cache and size live; the others "
	  "only while no LUN uses it)" },
	{ "backstore.resize", m_backstore_resize, NULL, true, p_backstore_resize, NULL,
	  "grow backstore name to size (file, rbd; block, nvme: size 0 follows the device)" },
	{ NULL, NULL, NULL, false, NULL, NULL, NULL },
};
