/* Built without rdma-core: iSER portals are refused with a clear reason. */
#include <errno.h>
#include <stdio.h>

#include "common/netaddr.h"
#include "common/transport/transport.h"

static int no_listen(const char *host, uint16_t port, struct reactor *r, const struct xp_listen_params *lp,
		     struct xp_listener **out, char *err, size_t errlen)
{
	char at[NETADDR_LEN];
	netaddr_join(at, sizeof(at), host, port);
	snprintf(err, errlen, "iSER portal %s: this build has no RDMA support (rdma-core was not found)", at);
	return -EOPNOTSUPP;
}

static int no_connect(const char *host, uint16_t port, struct reactor *r, unsigned timeout_ms, struct xp_conn **out,
		      char *err, size_t errlen)
{
	char at[NETADDR_HOST_LEN];
	netaddr_join(at, sizeof(at), host, port);
	snprintf(err, errlen, "iSER connection to %s: this build has no RDMA support (rdma-core was not found)", at);
	return -EPROTONOSUPPORT;
}

/* Only listen and connect are reached without a connection; both say why they cannot. */
const struct transport_ops iser_transport = {
	.name = "iser", .rdma = true, .listen = no_listen, .connect = no_connect,
};
