/*
 * Text requests: SendTargets (RFC 7143 sec. 12.3, appendix C) listing only
 * what the initiator may log in to through the portal it asked on: portal
 * groups served there, and their portals of the same transport (as LIO
 * does); a target's other networks and transports stay unnamed.  A portal
 * group redirected permanently is listed at its new address instead (a
 * temporary redirection or a balance list keeps the group's own portals:
 * logins there are redirected, and the records stay at home).  Text
 * negotiation in full feature phase is refused per key.  An answer longer
 * than the initiator's MaxRecvDataSegmentLength is cut at a pair boundary.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/netaddr.h"
#include "common/util.h"
#include "target/iscsi/iscsi.h"

bool tpg_initiator_allowed(const struct rt_tpg *tpg, const char *initiator, const struct cfg_acl **acl)
{
	*acl = NULL;
	if (!tpg->cfg)
		return false; /* it left the configuration */
	for (size_t i = 0; i < tpg->cfg->nacls; i++) {
		if (!strcmp(tpg->cfg->acls[i].initiator, initiator)) {
			*acl = &tpg->cfg->acls[i];
			return true;
		}
	}
	return tpg->cfg->demo_mode;
}

static bool wildcard(const char *host)
{
	return !strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "[::]");
}

bool tpg_has_portal(const struct rt_tpg *tpg, const struct xp_conn *xp)
{
	if (!tpg->cfg)
		return false;
	for (size_t i = 0; i < tpg->cfg->nportals; i++) {
		const struct cfg_portal *p = &tpg->cfg->portals[i];
		if (p->port != xp->local_port || p->iser != xp->ops->rdma)
			continue;
		if (wildcard(p->host) || !strcmp(p->host, xp->local_ip))
			return true;
		/* "::1" in the config and "::1" from getsockname, or bracketed forms */
		char b[64];
		snprintf(b, sizeof(b), "[%s]", xp->local_ip);
		if (!strcmp(p->host, b))
			return true;
	}
	return false;
}

static void add_target(struct text_buf *tb, const struct cfg_target *t, const char *initiator,
		       const struct xp_conn *xp)
{
	bool named = false;
	for (size_t j = 0; j < t->ntpgs; j++) {
		const struct rt_tpg *tpg = rt_tpg_find(t->iqn, t->tpgs[j].tag);
		const struct cfg_acl *acl;
		if (!tpg || !tpg->cfg->enable || !tpg_initiator_allowed(tpg, initiator, &acl) || !tpg_has_portal(tpg, xp))
			continue;
		const struct cfg_tpg *g = tpg->cfg;
		if (g->redirect_host && g->redirect_permanent) {
			/* Moved for good: the new address, so that the initiator's records follow it. */
			if (!named) {
				text_add(tb, "TargetName", t->iqn);
				named = true;
			}
			char at[NETADDR_LEN];
			netaddr_join(at, sizeof(at), g->redirect_host, g->redirect_port);
			text_addf(tb, "TargetAddress", "%s,%u", at, g->tag);
			continue;
		}
		for (size_t k = 0; k < tpg->cfg->nportals; k++) {
			const struct cfg_portal *p = &tpg->cfg->portals[k];
			if (p->iser != xp->ops->rdma)
				continue;
			if (!named) {
				text_add(tb, "TargetName", t->iqn);
				named = true;
			}
			/* A wildcard portal is reported as the address the initiator reached. */
			const char *host = wildcard(p->host) ? xp->local_ip : p->host;
			char at[NETADDR_LEN];
			netaddr_join(at, sizeof(at), host, p->port);
			text_addf(tb, "TargetAddress", "%s,%u", at, tpg->cfg->tag);
		}
	}
}

void discovery_text(struct iscsi_conn *c, struct xp_rx *rx)
{
	const struct pdu_text *req = (const void *)rx->bhs;
	struct iscsi_session *s = c->sess;
	char why[128];
	struct text_list kv;
	struct text_buf tb;
	text_buf_init(&tb);
	if (req->flags & PDU_TEXT_CONTINUE) {
		/* Multi-PDU text requests are not needed by any key we serve. */
		conn_send_reject(c, rx->bhs, PDU_REJECT_CMD_NOT_SUPPORTED);
		return;
	}
	if (text_parse(rx->data, rx->data ? rx->data_len : 0, &kv, why, sizeof(why))) {
		char esc[160];
		log_limited(LOG_INFO, "%s: bad text request: %s", c->xp->peer, log_escape(why, esc, sizeof(esc)));
		conn_send_reject(c, rx->bhs, PDU_REJECT_PROTOCOL_ERROR);
		return;
	}
	for (unsigned i = 0; i < kv.count; i++) {
		const char *k = kv.pairs[i].key, *v = kv.pairs[i].value;
		if (!strcmp(k, "SendTargets")) {
			pthread_rwlock_rdlock(&rt_lock);
			const struct config *cfg = rt_config();
			for (size_t j = 0; j < cfg->ntargets; j++) {
				const struct cfg_target *t = &cfg->targets[j];
				if (s->discovery ? (!strcmp(v, "All") || !strcmp(v, t->iqn))
						 : (s->tpg && !strcmp(s->tpg->iqn, t->iqn) && (!*v || !strcmp(v, t->iqn))))
					add_target(&tb, t, s->initiator, c->xp);
			}
			pthread_rwlock_unlock(&rt_lock);
		} else {
			/* Renegotiation in full feature phase is not offered: keep values, say so. */
			if (neg_is_operational_key(k))
				text_add(&tb, k, "Reject");
			else
				text_add(&tb, k, "NotUnderstood");
		}
	}
	text_list_free(&kv);
	struct pdu_text rsp = { 0 };
	rsp.opcode = PDU_OP_TEXT_RSP;
	rsp.flags = PDU_FLAG_FINAL;
	memcpy(rsp.lun, req->lun, 8);
	rsp.itt = req->itt;
	rsp.ttt = PDU_RESERVED_TAG;
	uint32_t max = c->params.peer_max_recv_dsl ? c->params.peer_max_recv_dsl : 8192;
	if (tb.len > max) {
		/* Answers that long do not happen with sane configurations; cut at a pair boundary. */
		uint32_t cut = max;
		while (cut && tb.data[cut - 1] != 0)
			cut--;
		log_limited(LOG_WARN, "%s: SendTargets answer of %u bytes truncated to %u", c->xp->peer, tb.len, cut);
		tb.len = cut;
	}
	conn_fill_sn(c, &rsp, true);
	conn_send_owned(c, &rsp, tb.data, tb.len, false);
}
