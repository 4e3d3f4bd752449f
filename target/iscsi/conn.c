/*
 * iSCSI connections: accept, the login time limit, PDU dispatch by opcode
 * and phase, the shared sequence numbers of target PDUs, NOP-In/Out, Logout
 * and Reject, and draining at shutdown.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/reactor.h"
#include "common/proto/serial.h"
#include "common/util.h"
#include "target/iscsi/iscsi.h"

#define LOGIN_MAX_DLEN 8192

static int conn_rx_bhs(struct xp_conn *xp, const uint8_t *bhs, uint8_t **dest);
static void conn_rx_pdu(struct xp_conn *xp, struct xp_rx *rx);
static void conn_closed(struct xp_conn *xp, int err);

static const struct xp_upcalls conn_upcalls = {
	.rx_bhs = conn_rx_bhs,
	.rx_pdu = conn_rx_pdu,
	.closed = conn_closed,
};

/* Connections alive in the process, and this reactor's (only its own thread touches them). */
static atomic_uint conns_alive;
static __thread struct iscsi_conn *reactor_conns;

unsigned conn_count(void)
{
	return atomic_load(&conns_alive);
}

/* Never started: no upcall may reach c while the transport is destroyed. */
static void conn_destroy_early(struct iscsi_conn *c)
{
	admit_conn_gone(c);
	c->xp->up = NULL;
	c->xp->upper = NULL;
	c->xp->ops->destroy(c->xp);
	free(c);
	atomic_fetch_sub(&conns_alive, 1);
}

static void login_expired(void *arg)
{
	struct iscsi_conn *c = arg;
	c->login_timer = NULL;
	if (c->state != CONN_LOGIN)
		return;
	log_limited(LOG_INFO, "%s: login not finished within %u s, closing the connection", c->xp->peer,
		    rt_login_timeout_s());
	conn_close(c);
}

static void conn_start(void *arg)
{
	struct iscsi_conn *c = arg;
	struct reactor *r = c->r;
	c->xp->reactor = r;
	int rc = c->xp->ops->start(c->xp, r);
	if (rc) {
		log_limited(LOG_WARN, "%s: cannot start connection: %s", c->xp->peer, strerror(-rc));
		conn_destroy_early(c);
		return;
	}
	c->rnext = reactor_conns;
	if (reactor_conns)
		reactor_conns->rprev = c;
	reactor_conns = c;
	/* A connection that does not finish its login in time costs nothing for long. */
	unsigned s = rt_login_timeout_s();
	if (s)
		c->login_timer = reactor_timer_add(r, (uint64_t)s * 1000, login_expired, c);
	if (iscsi_g.stopping)
		conn_close(c);
}

void conn_login_done(struct iscsi_conn *c)
{
	if (c->login_timer)
		reactor_timer_cancel(c->r, c->login_timer);
	c->login_timer = NULL;
}

void conn_accept(void *arg, struct xp_conn *xp)
{
	struct iscsi_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		admit_dropped(arg, xp);
		xp->ops->destroy(xp);
		return;
	}
	atomic_fetch_add(&conns_alive, 1);
	c->portal = arg;
	c->xp = xp;
	xp->upper = c;
	xp->up = &conn_upcalls;
	neg_params_default(&c->params);
	/* An RDMA connection was set up on its reactor already; a TCP one goes round-robin. */
	c->r = xp->reactor ? xp->reactor : reactor_next();
	log_debug("connection from %s to %s on reactor %d", xp->peer, xp->local, reactor_index(c->r));
	if (reactor_send(c->r, conn_start, c))
		conn_destroy_early(c);
}

struct xp_pdu *conn_pdu_get(struct iscsi_conn *c)
{
	struct xp_pdu *p = c->pdu_free;
	if (p)
		c->pdu_free = p->next;
	else
		p = malloc(sizeof(*p));
	if (p) {
		memset(p, 0, sizeof(*p));
		c->pdus_out++;
	}
	return p;
}

void conn_pdu_put(struct iscsi_conn *c, struct xp_pdu *p)
{
	c->pdus_out--;
	p->next = c->pdu_free;
	c->pdu_free = p;
}

void conn_fill_sn(struct iscsi_conn *c, void *bhs, bool status_pdu)
{
	struct pdu_bhs *h = bhs;
	h->sn1 = htobe32(c->statsn);
	if (status_pdu)
		c->statsn++;
	if (c->sess) {
		h->sn2 = htobe32(c->sess->exp_cmdsn);
		h->sn3 = htobe32(session_next_max_cmdsn(c->sess));
	}
}

/* The transport answers every PDU through its done(), also after a close (transport.h). */
void conn_send(struct iscsi_conn *c, struct xp_pdu *p)
{
	c->xp->ops->send(c->xp, p);
}

void conn_pdu_failed(struct iscsi_conn *c, int err)
{
	if (err != -ECONNRESET)
		log_limited(LOG_INFO, "%s: send failed: %s", c->xp->peer, strerror(-err));
	conn_close(c);
}

static void owned_done(struct xp_pdu *p, int err)
{
	struct iscsi_conn *c = p->priv;
	c->reply_bytes -= PDU_BHS_LEN + p->data_len;
	free((void *)p->data);
	conn_pdu_put(c, p);
	if (err)
		conn_pdu_failed(c, err);
}

static void owned_close_done(struct xp_pdu *p, int err)
{
	struct iscsi_conn *c = p->priv;
	owned_done(p, err);
	conn_close(c);
}

int conn_send_owned(struct iscsi_conn *c, const void *bhs, void *data, uint32_t len, bool close_after)
{
	struct xp_pdu *p = conn_pdu_get(c);
	if (!p) {
		free(data);
		conn_close(c);
		return -ENOMEM;
	}
	memcpy(p->bhs, bhs, PDU_BHS_LEN);
	p->data = data;
	p->data_len = len;
	pdu_set_dlen(p->bhs, len);
	p->priv = c;
	c->reply_bytes += PDU_BHS_LEN + len;
	p->done = close_after ? owned_close_done : owned_done;
	conn_send(c, p);
	return 0;
}

int conn_send_simple(struct iscsi_conn *c, const void *bhs, const void *data, uint32_t len)
{
	uint8_t *d = NULL;
	if (len) {
		d = malloc(len);
		if (!d)
			return -ENOMEM;
		memcpy(d, data, len);
	}
	return conn_send_owned(c, bhs, d, len, false);
}

int conn_send_then_close(struct iscsi_conn *c, const void *bhs)
{
	return conn_send_owned(c, bhs, NULL, 0, true);
}

void conn_send_reject(struct iscsi_conn *c, const uint8_t *bad_bhs, uint8_t reason)
{
	struct pdu_reject r = { 0 };
	r.opcode = PDU_OP_REJECT;
	r.flags = PDU_FLAG_FINAL;
	r.reason = reason;
	r.ffffffff = PDU_RESERVED_TAG;
	conn_fill_sn(c, &r, true);
	log_debug("%s: reject %s, reason 0x%02x", c->xp->peer, pdu_opcode_name(pdu_opcode(bad_bhs)), reason);
	conn_send_simple(c, &r, bad_bhs, PDU_BHS_LEN);
}

void conn_close(struct iscsi_conn *c)
{
	if (c->state == CONN_CLOSING)
		return;
	c->state = CONN_CLOSING;
	conn_login_done(c);
	c->xp->ops->close(c->xp);
}

static void conn_free(struct iscsi_conn *c)
{
	log_debug("%s: connection freed", c->xp->peer);
	if (c->nop_timer)
		reactor_timer_cancel(c->r, c->nop_timer);
	conn_login_done(c);
	login_free(c);
	tmf_free(c);
	while (c->pdu_free) {
		struct xp_pdu *p = c->pdu_free;
		c->pdu_free = p->next;
		free(p);
	}
	session_free(c->sess);
	stats_conn_closed(c);
	admit_conn_gone(c);
	if (c->rprev)
		c->rprev->rnext = c->rnext;
	else if (reactor_conns == c)
		reactor_conns = c->rnext;
	if (c->rnext)
		c->rnext->rprev = c->rprev;
	c->xp->ops->destroy(c->xp);
	free(c);
	atomic_fetch_sub(&conns_alive, 1);
}

static void conn_try_free(void *arg)
{
	struct iscsi_conn *c = arg;
	/* Tasks in the SCSI layer, PDUs in the transport or a queued call still point at us. */
	if (c->ntasks || c->pdus_out || c->kick_scheduled) {
		reactor_timer_add(c->r, 1, conn_try_free, c);
		return;
	}
	conn_free(c);
}

static void conn_closed(struct xp_conn *xp, int err)
{
	struct iscsi_conn *c = xp->upper;
	c->state = CONN_CLOSING;
	if (err && err != -ECONNRESET)
		log_limited(LOG_INFO, "%s: connection closed: %s", xp->peer, strerror(-err));
	session_conn_gone(c);
	conn_try_free(c);
}

/* Ping the initiator; a ping still unanswered one interval later ends the connection. */
static void nop_tick(void *arg)
{
	struct iscsi_conn *c = arg;
	c->nop_timer = NULL;
	if (c->state != CONN_FULL)
		return;
	if (c->nop_outstanding) {
		log_limited(LOG_INFO, "%s: no answer to NOP-In within %u ms, closing the connection", c->xp->peer,
			    c->nop_interval_ms);
		STATS_INC(c->st.nop_timeouts);
		conn_close(c);
		return;
	}
	struct pdu_nop in = { 0 };
	in.opcode = PDU_OP_NOP_IN;
	in.flags = PDU_FLAG_FINAL;
	in.itt = PDU_RESERVED_TAG;
	if (++c->nop_ttt == PDU_RESERVED_TAG)
		c->nop_ttt = 1;
	in.ttt = htobe32(c->nop_ttt);
	conn_fill_sn(c, &in, false); /* a ping carries no status: StatSN does not advance */
	c->nop_outstanding = true;
	conn_send_simple(c, &in, NULL, 0);
	c->nop_timer = reactor_timer_add(c->r, c->nop_interval_ms, nop_tick, c);
}

void conn_start_nop(struct iscsi_conn *c, uint32_t interval_s)
{
	if (!interval_s || c->nop_timer)
		return;
	c->nop_interval_ms = interval_s * 1000;
	c->nop_timer = reactor_timer_add(c->r, c->nop_interval_ms, nop_tick, c);
}

static void nop_out(struct iscsi_conn *c, struct xp_rx *rx)
{
	const struct pdu_nop *req = (const void *)rx->bhs;
	uint32_t itt = be32toh(req->itt);
	if (itt == PDU_RESERVED_TAG) {
		/* Answer to our NOP-In ping. */
		if (be32toh(req->ttt) == c->nop_ttt)
			c->nop_outstanding = false;
		if (!pdu_immediate(rx->bhs))
			session_check_cmdsn(c, rx->bhs);
		return;
	}
	if (!session_check_cmdsn(c, rx->bhs))
		return;
	struct pdu_nop in = { 0 };
	in.opcode = PDU_OP_NOP_IN;
	in.flags = PDU_FLAG_FINAL;
	memcpy(in.lun, req->lun, 8);
	in.itt = req->itt;
	in.ttt = PDU_RESERVED_TAG;
	conn_fill_sn(c, &in, true);
	/* Ping data comes back unchanged (it fit our MaxRecvDataSegmentLength). */
	conn_send_simple(c, &in, rx->data, rx->data ? rx->data_len : 0);
}

static void logout(struct iscsi_conn *c, struct xp_rx *rx)
{
	const struct pdu_logout_req *req = (const void *)rx->bhs;
	if (!session_check_cmdsn(c, rx->bhs))
		return;
	uint8_t reason = req->reason & 0x7f;
	struct pdu_logout_rsp rsp = { 0 };
	rsp.opcode = PDU_OP_LOGOUT_RSP;
	rsp.flags = PDU_FLAG_FINAL;
	rsp.itt = req->itt;
	if (reason == PDU_LOGOUT_RECOVERY)
		rsp.response = PDU_LOGOUT_RSP_NO_RECOVERY;
	else if (reason == PDU_LOGOUT_CONNECTION && be16toh(req->cid) != c->cid)
		rsp.response = PDU_LOGOUT_RSP_NO_CID;
	else
		rsp.response = PDU_LOGOUT_RSP_OK;
	if (rsp.response != PDU_LOGOUT_RSP_OK) {
		conn_fill_sn(c, &rsp, true);
		conn_send_simple(c, &rsp, NULL, 0);
		return;
	}
	tmf_logout(c, &rsp);
}

static void text_rx(struct iscsi_conn *c, struct xp_rx *rx)
{
	if (!session_check_cmdsn(c, rx->bhs))
		return;
	discovery_text(c, rx);
}

static int conn_rx_bhs(struct xp_conn *xp, const uint8_t *bhs, uint8_t **dest)
{
	struct iscsi_conn *c = xp->upper;
	char why[128];
	uint32_t max = c->state == CONN_LOGIN ? LOGIN_MAX_DLEN : c->params.max_recv_dsl;
	int reason = pdu_check_bhs(bhs, true, max, why, sizeof(why));
	if (reason > 0) {
		log_limited(LOG_INFO, "%s: bad PDU: %s", xp->peer, why);
		uint32_t dlen = pdu_dlen(bhs);
		/* A data segment we can skip keeps the stream in step; a huge one cannot be trusted. */
		if (dlen > PDU_MAX_DLEN || (c->state == CONN_LOGIN && dlen > 16 * LOGIN_MAX_DLEN))
			return -EPROTO;
		*dest = XP_DISCARD;
		return 0;
	}
	if (c->state == CONN_FULL && pdu_opcode(bhs) == PDU_OP_DATA_OUT)
		return session_data_out_dest(c, bhs, dest);
	*dest = NULL;
	return 0;
}

/*
 * Replies the peer does not read (NOP-In echoes, Rejects, text answers)
 * pile up in memory: past the session's buffer budget (1 MiB before
 * login) the connection is not worth keeping.
 */
static bool replies_unread(struct iscsi_conn *c)
{
	size_t cap = c->sess ? c->sess->buf_budget : (size_t)1 << 20;
	if (c->reply_bytes <= cap)
		return false;
	log_limited(LOG_INFO, "%s: %zu bytes of replies not read by the peer (limit %zu), closing", c->xp->peer,
		    c->reply_bytes, cap);
	conn_close(c);
	return true;
}

static void conn_rx_pdu(struct xp_conn *xp, struct xp_rx *rx)
{
	struct iscsi_conn *c = xp->upper;
	uint8_t op = pdu_opcode(rx->bhs);
	if (c->state == CONN_CLOSING || replies_unread(c))
		return;
	char why[128];
	uint32_t max = c->state == CONN_LOGIN ? LOGIN_MAX_DLEN : c->params.max_recv_dsl;
	int reason = pdu_check_bhs(rx->bhs, true, max, why, sizeof(why));
	if (reason > 0) {
		if (c->state == CONN_LOGIN) {
			conn_close(c);
			return;
		}
		conn_send_reject(c, rx->bhs, (uint8_t)reason);
		return;
	}
	if (rx->data_digest_error) {
		/* The PDU is dropped; the initiator recovers by retry or timeout. */
		log_limited(LOG_INFO, "%s: data digest error on %s", xp->peer, pdu_opcode_name(op));
		conn_send_reject(c, rx->bhs, PDU_REJECT_DIGEST_ERROR);
		return;
	}
	if (c->state == CONN_LOGIN) {
		if (op != PDU_OP_LOGIN_REQ) {
			log_limited(LOG_INFO, "%s: %s before login completed, closing", xp->peer, pdu_opcode_name(op));
			conn_close(c);
			return;
		}
		login_rx(c, rx);
		return;
	}
	if (c->state == CONN_LOGOUT)
		return;
	bool discovery = c->sess && c->sess->discovery;
	switch (op) {
	case PDU_OP_NOP_OUT:
		nop_out(c, rx);
		break;
	case PDU_OP_SCSI_CMD:
		if (discovery)
			conn_send_reject(c, rx->bhs, PDU_REJECT_PROTOCOL_ERROR);
		else
			session_scsi_cmd(c, rx);
		break;
	case PDU_OP_DATA_OUT:
		session_data_out(c, rx);
		break;
	case PDU_OP_TMF_REQ:
		if (discovery)
			conn_send_reject(c, rx->bhs, PDU_REJECT_PROTOCOL_ERROR);
		else
			tmf_rx(c, rx);
		break;
	case PDU_OP_TEXT_REQ:
		text_rx(c, rx);
		break;
	case PDU_OP_LOGOUT_REQ:
		logout(c, rx);
		break;
	case PDU_OP_LOGIN_REQ:
		/* A login on a full-feature connection is a protocol error. */
		conn_send_reject(c, rx->bhs, PDU_REJECT_PROTOCOL_ERROR);
		break;
	case PDU_OP_SNACK_REQ:
		/* ErrorRecoveryLevel 0: SNACK is not supported. */
		conn_send_reject(c, rx->bhs, PDU_REJECT_CMD_NOT_SUPPORTED);
		break;
	default:
		conn_send_reject(c, rx->bhs, PDU_REJECT_CMD_NOT_SUPPORTED);
		break;
	}
}

/* Shutdown: a connection closes once nothing it took is still running. */
static bool conn_idle(const struct iscsi_conn *c)
{
	for (const struct iscsi_task *t = c->tasks; t; t = t->lnext)
		if (!t->aborted && t->state != TASK_QUEUED)
			return false;
	return true;
}

static void drain_tick(void *arg)
{
	struct reactor *r = arg;
	for (struct iscsi_conn *c = reactor_conns, *n; c; c = n) {
		n = c->rnext;
		c->draining = true;
		bool force = atomic_load(&iscsi_g.force_close);
		if (c->state != CONN_CLOSING && (force || c->state != CONN_FULL || conn_idle(c)))
			conn_close(c);
	}
	if (reactor_conns)
		reactor_timer_add(r, 10, drain_tick, r);
}

void conn_drain_all(void *arg)
{
	drain_tick(arg);
}

void conn_foreach(void (*fn)(struct iscsi_conn *c, void *arg), void *arg)
{
	for (struct iscsi_conn *c = reactor_conns, *n; c; c = n) {
		n = c->rnext;
		fn(c, arg);
	}
}
