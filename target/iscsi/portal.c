/*
 * Portals: one listener per portal of the running configuration, accepting
 * on the first reactor and handing connections round-robin to all
 * reactors; and the iSCSI layer's start-up and end around the running
 * target's (target/runtime/).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/netaddr.h"
#include "common/reactor.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/iscsi/iscsi.h"
#include "target/scsi/alua/alua.h"

struct iscsi_globals iscsi_g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static bool wildcard_host(const char *h)
{
	return !strcmp(h, "0.0.0.0") || !strcmp(h, "::") || !strcmp(h, "[::]");
}

/* A TCP portal whose port space an iSER portal would share on iWARP, or NULL. */
static const struct cfg_portal *tcp_clash(const struct config *cfg, const struct cfg_portal *ip)
{
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++)
			for (size_t k = 0; k < cfg->targets[i].tpgs[j].nportals; k++) {
				const struct cfg_portal *p = &cfg->targets[i].tpgs[j].portals[k];
				if (!p->iser && p->port == ip->port &&
				    (!strcmp(p->host, ip->host) || wildcard_host(p->host) || wildcard_host(ip->host)))
					return p;
			}
	return NULL;
}

/* cfg's portal that ip listens for (every TPG's copy has the same ToS: config/load.c), or NULL. */
static const struct cfg_portal *portal_of(const struct config *cfg, const struct iscsi_portal *ip)
{
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++)
			for (size_t k = 0; k < cfg->targets[i].tpgs[j].nportals; k++) {
				const struct cfg_portal *p = &cfg->targets[i].tpgs[j].portals[k];
				if (p->port == ip->port && p->iser == ip->iser && !strcmp(p->host, ip->host))
					return p;
			}
	return NULL;
}

bool iscsi_portal_in(const struct config *cfg, const struct iscsi_portal *ip)
{
	return portal_of(cfg, ip) != NULL;
}

void iscsi_portal_retos(const struct config *cfg)
{
	for (struct iscsi_portal *ip = iscsi_g.portals; ip; ip = ip->next) {
		const struct cfg_portal *p = ip->l ? portal_of(cfg, ip) : NULL;
		if (!p || p->tos == ip->tos)
			continue;
		int rc = ip->ops->set_tos ? ip->ops->set_tos(ip->l, p->tos) : -EOPNOTSUPP;
		if (rc == -EOPNOTSUPP) {
			/* iSER: rdma_cm takes a listener's ToS when it starts listening. */
			char err[256] = "";
			iscsi_portal_unlisten(ip);
			rc = iscsi_portal_listen(cfg, p, &ip, err, sizeof(err));
			if (rc) {
				log_err("%s: listening again with tos %u: %s; this portal is not served", ip->name, p->tos,
					err[0] ? err : strerror(-rc));
				continue;
			}
		} else if (rc) {
			log_err("%s: tos %u: %s; its new connections keep tos %u", ip->name, p->tos, strerror(-rc), ip->tos);
			continue;
		}
		log_info("%s: tos %u (was %u) for the connections it accepts from now on", ip->name, p->tos, ip->tos);
		ip->tos = p->tos;
	}
}

/* The portal object made for p's address and transport, or NULL. */
static struct iscsi_portal *portal_find(const struct cfg_portal *p)
{
	struct iscsi_portal *ip = iscsi_g.portals;
	while (ip && !(ip->port == p->port && ip->iser == p->iser && !strcmp(ip->host, p->host)))
		ip = ip->next;
	return ip;
}

bool iscsi_portal_listening(const struct cfg_portal *p)
{
	const struct iscsi_portal *ip = portal_find(p);
	return ip && ip->l;
}

int iscsi_portal_listen(const struct config *cfg, const struct cfg_portal *p, struct iscsi_portal **out, char *err,
			size_t errlen)
{
	struct iscsi_portal *ip = portal_find(p);
	if (!ip) {
		if (strlen(p->host) >= sizeof(ip->host)) {
			snprintf(err, errlen, "portal %s: address too long", p->host);
			return -EINVAL;
		}
		ip = calloc(1, sizeof(*ip));
		if (!ip)
			return -ENOMEM;
		ip->ops = p->iser ? &iser_transport : &tcp_transport;
		snprintf(ip->host, sizeof(ip->host), "%s", p->host);
		ip->port = p->port;
		ip->iser = p->iser;
		netaddr_join(ip->name, sizeof(ip->name), p->host, p->port);
		size_t at = strlen(ip->name);
		snprintf(ip->name + at, sizeof(ip->name) - at, " (%s)", ip->ops->name);
		if (stats_portal_init(ip, iscsi_g.nreactors)) {
			free(ip);
			return -ENOMEM;
		}
		ip->next = iscsi_g.portals;
		/* Published whole: statistics readers walk the list from other threads. */
		__atomic_store_n(&iscsi_g.portals, ip, __ATOMIC_RELEASE);
	}
	*out = ip;
	if (ip->l)
		return 0;
	const struct cfg_portal *clash = p->iser ? tcp_clash(cfg, p) : NULL;
	char at[NETADDR_LEN], clash_at[NETADDR_LEN];
	netaddr_join(at, sizeof(at), p->host, p->port);
	if (clash) {
		netaddr_join(clash_at, sizeof(clash_at), clash->host, clash->port);
		log_warn("iSER portal %s and TCP portal %s share a port: fine on RoCE and InfiniBand, "
			 "but on iWARP the RDMA listener uses the TCP port space and cannot coexist", at, clash_at);
	}
	struct xp_listen_params lp = {
		.admit = admit_conn, .accept = conn_accept, .dropped = admit_dropped, .arg = ip,
		.keepalive_s = cfg->tcp_keepalive_s,
		.srq_depth = cfg->iser_srq,
		.tos = p->tos,
	};
	int rc = ip->ops->listen(p->host, p->port, iscsi_g.reactors[0], &lp, &ip->l, err, errlen);
	if (rc) {
		ip->l = NULL;
		if (rc == -EADDRINUSE && clash)
			snprintf(err, errlen, "iSER portal %s cannot listen: TCP portal %s holds the port (iWARP "
				 "shares TCP's port space); move one of them to another address or port", at, clash_at);
		return rc;
	}
	ip->tos = p->tos;
	if (p->tos)
		log_info("listening on %s, tos %u", ip->name, p->tos);
	else
		log_info("listening on %s", ip->name);
	return 0;
}

void iscsi_portal_unlisten(struct iscsi_portal *ip)
{
	if (!ip->l)
		return;
	ip->ops->unlisten(ip->l);
	ip->l = NULL;
	log_info("%s: no longer listening (connections it took stay)", ip->name);
}

void iscsi_portal_unlisten_gone(const struct config *cfg)
{
	for (struct iscsi_portal *ip = iscsi_g.portals; ip; ip = ip->next)
		if (ip->l && !iscsi_portal_in(cfg, ip))
			iscsi_portal_unlisten(ip);
}

/* Listen on every portal of cfg not listening yet: TCP first (on iWARP a TCP and an RDMA
 * listener cannot share an address and port).  An iSER portal that cannot listen is logged
 * and left out (a host without RDMA still serves TCP); a TCP one is an error. */
static int iscsi_listen_all(const struct config *cfg, char *err, size_t errlen)
{
	for (int iser = 0; iser < 2; iser++)
		for (size_t i = 0; i < cfg->ntargets; i++)
			for (size_t j = 0; j < cfg->targets[i].ntpgs; j++) {
				const struct cfg_tpg *g = &cfg->targets[i].tpgs[j];
				for (size_t k = 0; k < g->nportals; k++) {
					const struct cfg_portal *p = &g->portals[k];
					struct iscsi_portal *ip;
					if (p->iser != (bool)iser)
						continue;
					int rc = iscsi_portal_listen(cfg, p, &ip, err, errlen);
					if (rc && p->iser) {
						log_err("%s; this portal is not served, the others are", err);
						err[0] = 0;
					} else if (rc) {
						if (!err[0]) {
							char at[NETADDR_LEN];
							netaddr_join(at, sizeof(at), p->host, p->port);
							snprintf(err, errlen, "%s: %s", at, strerror(-rc));
						}
						return rc;
					}
				}
			}
	return 0;
}

/* Listen on every portal of the running configuration. */
static int iscsi_listen(char *err, size_t errlen)
{
	return iscsi_listen_all(rt_config(), err, errlen);
}

int iscsi_setup(struct config *cfg, struct reactor **reactors, unsigned nreactors, char *err, size_t errlen)
{
	iscsi_g.reactors = reactors;
	iscsi_g.nreactors = nreactors;
	/* A reactor's pool holds at most buffer_pool_mb; what is beyond a quarter of it is given back when free. */
	size_t cap = (size_t)cfg->buffer_pool_mb << 20;
	for (unsigned i = 0; i < nreactors; i++)
		bufpool_set_limits(reactor_bufpool(reactors[i]), cap, cap / 4);
	admit_set_limits(cfg);
	int rc = rt_start(cfg, err, errlen);
	if (rc && !err[0])
		snprintf(err, errlen, "%s", strerror(-rc));
	return rc;
}

int iscsi_start(struct config *cfg, struct reactor **reactors, unsigned nreactors, char *err, size_t errlen)
{
	int rc = iscsi_setup(cfg, reactors, nreactors, err, errlen);
	return rc ? rc : iscsi_listen(err, errlen);
}

bool iscsi_stopping(void)
{
	return iscsi_g.stopping;
}

void iscsi_force_close(void)
{
	atomic_store(&iscsi_g.force_close, true);
}

unsigned iscsi_reactors(struct reactor ***out)
{
	*out = iscsi_g.reactors;
	return iscsi_g.nreactors;
}

void iscsi_stop(void)
{
	iscsi_g.stopping = true;
	for (struct iscsi_portal *ip = iscsi_g.portals; ip; ip = ip->next)
		if (ip->l) {
			ip->ops->unlisten(ip->l);
			ip->l = NULL;
		}
	/* The portal records stay: connections still point at them until they are freed. */
}

int iscsi_flush(void)
{
	return rt_flush();
}

/* After the reactors stopped: nothing runs any more, free everything. */
void iscsi_free(void)
{
	rt_free();
	stats_free();
	while (iscsi_g.portals) {
		struct iscsi_portal *p = iscsi_g.portals;
		iscsi_g.portals = p->next;
		free(p->st);
		free(p);
	}
}
