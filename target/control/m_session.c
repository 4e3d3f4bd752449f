/* Methods on sessions and statistics: read from the reactors (fanout.c, iscsi/stats.c). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "target/control/control.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/control/stats.h"

static int m_sessions(struct rpc_call *c)
{
	char name[1024];
	const char *ini = rpc_initiator(c, name);
	int64_t tsih = rpc_int(c, "tsih", 0);
	json_object *a = json_object_new_array();
	char err[160];
	if (admin_sessions(a, (uint16_t)tsih, ini, rpc_str(c, "target"), err, sizeof(err))) {
		json_object_put(a);
		return rpc_fail(c, RPC_UNAVAILABLE, "%s", err);
	}
	if (tsih && !json_object_array_length(a)) {
		json_object_put(a);
		return rpc_fail(c, RPC_NOT_FOUND, "no session with TSIH %" PRId64, tsih);
	}
	c->result = json_object_new_object();
	json_object_object_add(c->result, "sessions", a);
	return 0;
}

static int m_stats(struct rpc_call *c)
{
	static const char *const sections[] = { "luns", "connections", "portals", "rdma_devices", "reactors", NULL };
	char name[1024];
	struct stats_filter f = { .lun = rpc_int(c, "lun", -1), .tsih = (int)rpc_int(c, "tsih", 0),
				  .target = rpc_str(c, "target"), .initiator = rpc_initiator(c, name),
				  .luns = true, .connections = true, .portals = true, .rdma_devices = true,
				  .reactors = true };
	json_object *sec;
	/* The luns section comes in pages (at most STATS_PAGE_MAX rows), so an answer stays bounded. */
	if (json_object_object_get_ex(c->params, "sections", &sec)) {
		f.luns = f.connections = f.portals = f.rdma_devices = f.reactors = false;
		for (size_t i = 0; i < json_object_array_length(sec); i++) {
			const char *s = json_object_get_string(json_object_array_get_idx(sec, i));
			if (!json_object_is_type(json_object_array_get_idx(sec, i), json_type_string) ||
			    !doc_in_list(sections, s))
				return rpc_fail(c, RPC_INVALID_PARAMS, "sections[%zu]: must be one of luns, connections, "
								       "portals, rdma_devices, reactors", i);
			f.luns |= !strcmp(s, "luns");
			f.connections |= !strcmp(s, "connections");
			f.portals |= !strcmp(s, "portals");
			f.rdma_devices |= !strcmp(s, "rdma_devices");
			f.reactors |= !strcmp(s, "reactors");
		}
	}
	char err[160];
	json_object *out = json_object_new_object();
	int rc = stats_collect(out, &f, rpc_str(c, "cursor"), (unsigned)rpc_int(c, "limit", STATS_PAGE_MAX), err,
			       sizeof(err));
	if (rc) {
		json_object_put(out);
		return rpc_fail(c, rc == -ETIMEDOUT	? RPC_UNAVAILABLE
				: rc == -ENOTSUP	? RPC_REFUSED
				: rc == -EINVAL		? RPC_INVALID_PARAMS
							: RPC_INTERNAL,
				"%s", err);
	}
	c->result = out;
	return 0;
}

static int m_stats_reset(struct rpc_call *c)
{
	char err[160];
	int rc = stats_reset(err, sizeof(err));
	if (rc)
		return rpc_fail(c, rc == -ETIMEDOUT ? RPC_UNAVAILABLE : RPC_INTERNAL, "%s", err);
	c->result = json_object_new_object();
	return 0;
}

static int m_session_close(struct rpc_call *c)
{
	int64_t tsih = rpc_int(c, "tsih", 0);
	char err[160];
	int n = admin_close_sessions((uint16_t)tsih, NULL, -1, "closed by the admin", err, sizeof(err));
	if (n < 0)
		return rpc_fail(c, RPC_UNAVAILABLE, "%s", err);
	if (!n)
		return rpc_fail(c, RPC_NOT_FOUND, "no session with TSIH %" PRId64, tsih);
	c->result = json_object_new_object();
	json_object_object_add(c->result, "closed", json_object_new_int(n));
	return 0;
}

static const struct rpc_param p_none[] = { P_END };
static const struct rpc_param p_sessions[] = { P_INITIATOR(false), P_STR("target", false),
					       P_INT("tsih", false, 1, 65535), P_END };
static const struct rpc_param p_stats[] = { P_STR("target", false), P_INITIATOR(false),
					    P_INT("lun", false, 0, INT64_MAX), P_INT("tsih", false, 1, 65535),
					    P_STR("cursor", false), P_INT("limit", false, 1, STATS_PAGE_MAX),
					    { "sections", RPC_P_ARRAY, false, 0, 0, false, NULL }, P_END };
static const struct rpc_param p_session_close[] = { P_INT("tsih", true, 1, 65535), P_END };

const struct rpc_method rpc_methods_session[] = {
	{ "sessions", m_sessions, NULL, false, p_sessions, NULL,
	  "sessions with their negotiated parameters; filter by tsih, initiator, target" },
	{ "stats", m_stats, NULL, false, p_stats, NULL,
	  "statistics (docs/stats.md): luns, connections, portals, rdma_devices, reactors; "
	  "filter by target, initiator, lun, tsih; sections: which of them; luns in pages of "
	  "limit rows (at most 512) from cursor, the answer's cursor while more is true" },
	{ "stats.reset", m_stats_reset, NULL, false, p_none, NULL,
	  "zero every statistics counter (gauges stay)" },
	{ "session.close", m_session_close, NULL, false, p_session_close, NULL,
	  "close the connection of session tsih (the initiator may log in again)" },
	{ NULL, NULL, NULL, false, NULL, NULL, NULL },
};
