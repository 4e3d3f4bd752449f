/* Methods on the ALUA target port groups of a target. */
#include <inttypes.h>
#include <string.h>

#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/runtime/runtime.h"
#include "target/scsi/alua/alua.h"

/* alua.show: every target's (or one target's) ALUA groups with their running states. */
static int m_alua_show(struct rpc_call *c)
{
	const char *iqn = rpc_str(c, "target");
	const struct config *cfg = rt_config();
	json_object *ts = json_object_new_array();
	for (size_t i = 0; i < cfg->ntargets; i++) {
		const struct cfg_target *t = &cfg->targets[i];
		if (iqn && strcmp(iqn, t->iqn))
			continue;
		json_object *a = config_alua_obj(t), *gs;
		if (!a) {
			json_object_put(ts);
			return rpc_fail(c, RPC_INTERNAL, "out of memory");
		}
		json_object_object_add(a, "target", json_object_new_string(t->iqn));
		json_object_object_add(a, "configured", json_object_new_boolean(t->alua_given));
		json_object_object_get_ex(a, "groups", &gs);
		for (size_t j = 0; j < json_object_array_length(gs); j++)
			json_object_object_add(json_object_array_get_idx(gs, j), "status",
					       json_object_new_string(scsi_alua_status_name(t->iqn, t->alua_groups[j].id)));
		json_object_array_add(ts, a);
	}
	if (iqn && !json_object_array_length(ts)) {
		json_object_put(ts);
		return rpc_fail(c, RPC_NOT_FOUND, "no target %s", iqn);
	}
	c->result = json_object_new_object();
	json_object_object_add(c->result, "targets", ts);
	return 0;
}

/* alua.set: a group's state or preference, or the target's mode and transition time. */
static int e_alua_set(struct rpc_call *c, struct change *ch)
{
	const char *iqn = rpc_str(c, "target");
	int64_t id = rpc_int(c, "group", 0);
	json_object *t = doc_target(c, ch, iqn, NULL), *v;
	if (!t)
		return -1;
	bool per_group = json_object_object_get_ex(c->params, "state", NULL) ||
			 json_object_object_get_ex(c->params, "preferred", NULL);
	bool per_target = json_object_object_get_ex(c->params, "mode", NULL) ||
			  json_object_object_get_ex(c->params, "transition_time", NULL);
	if (!per_group && !per_target)
		return rpc_fail(c, RPC_INVALID_PARAMS, "nothing to set: give group with state or preferred, or mode, "
						       "or transition_time");
	if (per_group && !id)
		return rpc_fail(c, RPC_INVALID_PARAMS, "group: required with state and preferred");
	json_object *a = doc_alua(c, t, iqn);
	if (!a)
		return -1;
	if (per_group) {
		json_object *g = doc_alua_group(c, t, iqn, id);
		if (!g)
			return -1;
		/* The loader checks the values and names the field, as in a file. */
		if (json_object_object_get_ex(c->params, "state", &v))
			json_object_object_add(g, "state", json_object_get(v));
		if (json_object_object_get_ex(c->params, "preferred", &v))
			json_object_object_add(g, "preferred", json_object_get(v));
	}
	if (json_object_object_get_ex(c->params, "mode", &v))
		json_object_object_add(a, "mode", json_object_get(v));
	if (json_object_object_get_ex(c->params, "transition_time", &v))
		json_object_object_add(a, "transition_time", json_object_get(v));
	return 0;
}

static const struct rpc_param p_alua_show[] = { P_STR("target", false), P_END };
static const struct rpc_param p_alua_set[] = { P_STR("target", true), P_INT("group", false, 1, 65535), P_VALUE("state"),
					       P_VALUE("preferred"), P_VALUE("mode"), P_VALUE("transition_time"),
					       P_END };

const struct rpc_method rpc_methods_alua[] = {
	{ "alua.show", m_alua_show, NULL, false, p_alua_show, NULL,
	  "ALUA target port groups of every target (or target): mode, transition_time, "
	  "groups with id, state, status, preferred, tpgs, remote_ports" },
	{ "alua.set", NULL, e_alua_set, true, p_alua_set, NULL,
	  "ALUA of a target: state (active_optimized, active_nonoptimized, standby, "
	  "unavailable, transitioning) or preferred of group; mode; transition_time" },
	{ NULL, NULL, NULL, false, NULL, NULL, NULL },
};
