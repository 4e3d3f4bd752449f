/*
 * Objects of a document found and changed, for the edit methods: the
 * running configuration as JSON, which the loader checks whole once the
 * method is done (change.c), so these only find and place things.
 */
#include <inttypes.h>
#include <string.h>

#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/runtime/runtime.h"

json_object *doc_array(json_object *o, const char *key)
{
	json_object *a;
	if (!json_object_object_get_ex(o, key, &a) || !json_object_is_type(a, json_type_array)) {
		a = json_object_new_array();
		json_object_object_add(o, key, a);
	}
	return a;
}

json_object *doc_find(json_object *a, const char *key, const char *sv, int64_t iv, size_t *at)
{
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *e = json_object_array_get_idx(a, i), *k;
		if (!json_object_object_get_ex(e, key, &k))
			continue;
		if (sv ? !strcmp(json_object_get_string(k), sv) : json_object_get_int64(k) == iv) {
			if (at)
				*at = i;
			return e;
		}
	}
	return NULL;
}

json_object *doc_target(struct rpc_call *c, struct change *ch, const char *iqn, size_t *at)
{
	json_object *doc = change_doc(c, ch), *t;
	if (!doc)
		return NULL;
	if (!(t = doc_find(doc_array(doc, "targets"), "iqn", iqn, 0, at)))
		rpc_fail(c, RPC_NOT_FOUND, "no target %s", iqn);
	return t;
}

json_object *doc_tpg(struct rpc_call *c, struct change *ch, size_t *at)
{
	const char *iqn = rpc_str(c, "target");
	int64_t tag = rpc_int(c, "tag", 0);
	json_object *t = doc_target(c, ch, iqn, NULL);
	if (!t)
		return NULL;
	json_object *g = doc_find(doc_array(t, "tpgs"), "tag", NULL, tag, at);
	if (!g)
		rpc_fail(c, RPC_NOT_FOUND, "target %s has no TPG %" PRId64, iqn, tag);
	return g;
}

bool doc_in_list(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return true;
	return false;
}

void doc_merge(json_object *o, json_object *params, const char *const *skip)
{
	json_object_object_foreach(params, k, v)
	{
		if (!strcmp(k, "dry_run") || doc_in_list(skip, k))
			continue;
		json_object_object_add(o, k, json_object_get(v));
	}
}

const struct cfg_tpg *running_tpg(struct rpc_call *c, size_t *ti, size_t *gi)
{
	const char *iqn = rpc_str(c, "target");
	int64_t tag = rpc_int(c, "tag", 0);
	const struct config *cfg = rt_config();
	for (*ti = 0; *ti < cfg->ntargets && strcmp(cfg->targets[*ti].iqn, iqn); (*ti)++)
		;
	if (*ti == cfg->ntargets)
		return rpc_fail(c, RPC_NOT_FOUND, "no target %s", iqn), NULL;
	const struct cfg_target *t = &cfg->targets[*ti];
	for (*gi = 0; *gi < t->ntpgs && t->tpgs[*gi].tag != tag; (*gi)++)
		;
	if (*gi == t->ntpgs)
		return rpc_fail(c, RPC_NOT_FOUND, "target %s has no TPG %" PRId64, iqn, tag), NULL;
	return &t->tpgs[*gi];
}

json_object *doc_alua(struct rpc_call *c, json_object *t, const char *iqn)
{
	json_object *a;
	if (json_object_object_get_ex(t, "alua", &a) && json_object_is_type(a, json_type_object))
		return a;
	const struct config *cfg = rt_config();
	size_t i = 0;
	while (i < cfg->ntargets && strcmp(cfg->targets[i].iqn, iqn))
		i++;
	if (i == cfg->ntargets)
		return rpc_fail(c, RPC_REFUSED, "target %s is new: give it its ALUA groups once it exists", iqn), NULL;
	if (!(a = config_alua_obj(&cfg->targets[i])))
		return rpc_fail(c, RPC_INTERNAL, "out of memory"), NULL;
	json_object_object_add(t, "alua", a);
	return a;
}

json_object *doc_alua_group(struct rpc_call *c, json_object *t, const char *iqn, int64_t id)
{
	json_object *a = doc_alua(c, t, iqn), *g;
	if (!a)
		return NULL;
	if (!(g = doc_find(doc_array(a, "groups"), "id", NULL, id, NULL)))
		rpc_fail(c, RPC_NOT_FOUND, "target %s has no ALUA target port group %" PRId64, iqn, id);
	return g;
}
