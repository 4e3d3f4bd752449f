/*
 * Login redirection (RFC 7143 sec. 11.13.5, docs/config.md "redirect"): a
 * portal group sends new normal sessions elsewhere, with status 0101 (moved
 * temporarily) or 0102 (moved permanently) and a TargetAddress.  Either to
 * one fixed address (draining a gateway before maintenance, or a target
 * that moved), or to whichever of the TPG's own balance portals has the
 * fewest sessions (spreading sessions over the portals of one box).  The
 * initiator reconnects there and logs in afresh; discovery sessions are
 * never redirected, and a login already arriving at the chosen portal is
 * taken, so a TPG may name one of its own portals without a loop.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "common/netaddr.h"
#include "target/iscsi/iscsi.h"

/* Numeric addresses compared as addresses ("::1" and "0:0::1" are one). */
static bool same_ip(const char *a, const char *b)
{
	unsigned char ba[16] = { 0 }, bb[16] = { 0 };
	int fa = strchr(a, ':') ? AF_INET6 : AF_INET, fb = strchr(b, ':') ? AF_INET6 : AF_INET;
	return fa == fb && inet_pton(fa, a, ba) == 1 && inet_pton(fb, b, bb) == 1 && !memcmp(ba, bb, sizeof(ba));
}

static bool arrived_at(const struct xp_conn *xp, const char *host, uint16_t port)
{
	return xp->local_port == port && same_ip(xp->local_ip, host);
}

/* Normal sessions whose login arrived at host:port over this transport; call with iscsi_g.lock. */
static unsigned sessions_at(const char *host, uint16_t port, bool iser)
{
	unsigned n = 0;
	for (const struct iscsi_session *o = iscsi_g.sessions; o; o = o->next)
		n += !o->gone && !o->discovery && o->portal_iser == iser && o->portal_port == port &&
		     same_ip(o->portal_ip, host);
	return n;
}

static void format_addr(char *out, size_t n, const char *host, uint16_t port)
{
	/* No ",tag": RFC 7143 sec. 13.8 leaves the portal group tag out of a redirection's TargetAddress. */
	netaddr_join(out, n, host, port);
}

uint16_t redirect_login(const struct rt_tpg *tpg, const struct xp_conn *xp, char *addr, size_t n)
{
	const struct cfg_tpg *g = tpg->cfg;
	if (!g)
		return 0;
	if (g->redirect_host) {
		if (arrived_at(xp, g->redirect_host, g->redirect_port))
			return 0;
		format_addr(addr, n, g->redirect_host, g->redirect_port);
		return g->redirect_permanent ? PDU_LOGIN_REDIRECT_PERM : PDU_LOGIN_REDIRECT_TEMP;
	}
	const struct cfg_portal *best = NULL;
	unsigned best_n = 0, here_n = 0;
	bool here = false, iser = xp->ops->rdma;
	pthread_mutex_lock(&iscsi_g.lock);
	for (size_t i = 0; i < g->nbalance; i++) {
		const struct cfg_portal *p = &g->portals[g->balance[i]];
		if (p->iser != iser)
			continue; /* a redirection keeps the transport: iSER to iSER, TCP to TCP */
		unsigned k = sessions_at(p->host, p->port, iser);
		if (arrived_at(xp, p->host, p->port)) {
			here = true;
			here_n = k;
		}
		if (!best || k < best_n) {
			best = p;
			best_n = k;
		}
	}
	pthread_mutex_unlock(&iscsi_g.lock);
	/* Staying is as good as moving when this portal is among the least loaded. */
	if (!best || (here && here_n <= best_n))
		return 0;
	format_addr(addr, n, best->host, best->port);
	return PDU_LOGIN_REDIRECT_TEMP;
}
