/*
 * The cluster view (docs/cluster.md): what this gateway keeps with the
 * other gateways serving the same stores, for iserctl cluster.
 */
#include <string.h>

#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/runtime/runtime.h"
#include "target/scsi/alua/alua.h"
#include "target/scsi/scsi.h"

/* cluster.show: each shared LU's reservations and each shared target's ALUA states, with their gateways. */
static int m_cluster_show(struct rpc_call *c)
{
	const struct config *cfg = rt_config();
	json_object *lus = json_object_new_array(), *tgts = json_object_new_array();
	for (size_t i = 0; i < cfg->nbackstores; i++) {
		json_object *o = scsi_lu_share_json(rt_store_at(i)->lu);
		if (!o)
			continue;
		json_object_object_add(o, "backstore", json_object_new_string(cfg->backstores[i].name));
		json_object_array_add(lus, o);
	}
	for (size_t i = 0; i < cfg->ntargets; i++) {
		json_object *o = scsi_alua_share_json(scsi_alua_get(cfg->targets[i].iqn));
		if (!o)
			continue;
		json_object_object_add(o, "target", json_object_new_string(cfg->targets[i].iqn));
		json_object_array_add(tgts, o);
	}
	c->result = json_object_new_object();
	json_object_object_add(c->result, "reservations", lus);
	json_object_object_add(c->result, "alua", tgts);
	return 0;
}

static const struct rpc_param p_none[] = { P_END };

const struct rpc_method rpc_methods_cluster[] = {
	{ "cluster.show", m_cluster_show, NULL, false, p_none, NULL,
	  "what is kept with the other gateways serving the same stores: each shared LU's reservations and each "
	  "shared target's ALUA states, with the object, its version and the gateways (docs/cluster.md)" },
	{ NULL, NULL, NULL, false, NULL, NULL, NULL },
};
