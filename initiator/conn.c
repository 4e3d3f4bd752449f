/*
 * Initiator connection: PDU sending, the CmdSN window, the transport's
 * upcalls, NOP keepalive, the login time limit, and reconnect with
 * back-off (a new login with the same ISID reinstates the session;
 * unfinished tasks are issued again, so the caller's workload completes).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/transport/iser.h"
#include "common/log.h"
#include "common/reactor.h"
#include "common/proto/serial.h"
#include "common/util.h"
#include "isc_internal.h"

#define ISC_TICK_MS 100
#define ISC_BACKOFF_MIN_MS 100
#define ISC_BACKOFF_MAX_MS 2000

static void unkick(void *arg)
{
	struct isc_session *s = arg;
	s->kicked = false;
}

/*
 * Work queued outside isc_service() (a submit from the caller's code) sits
 * in the reactor's deferred list, which does not make the fd readable: poke
 * the reactor's eventfd once so the caller's loop comes back to service.
 */
static void isc_kick(struct isc_session *s)
{
	if (s->in_service || s->kicked)
		return;
	if (reactor_send(s->r, unkick, s) == 0)
		s->kicked = true;
}

struct isc_opdu {
	struct xp_pdu x;
	struct isc_session *s;
	struct isc_task *t;
	uint32_t wire;      /* what it adds to s->sendq */
	uint32_t reply;     /* what it adds to s->reply_mem */
	uint32_t gen;       /* the connection it was sent on (s->conn_gen) */
	bool r2t_end;
	uint8_t buf[];
};

bool isc_sendq_full(const struct isc_session *s)
{
	return s->sendq >= ISC_SENDQ_BYTES;
}

uint32_t isc_send_dsl(const struct isc_session *s)
{
	const struct neg_params *n = &s->params;
	uint32_t m = n->peer_max_recv_dsl ? n->peer_max_recv_dsl : 8192;
	/* iSER (RFC 7145 sec. 6): the target's receive buffers, and our send slots. */
	if (s->o.iser)
		m = MIN(m, MIN(n->target_recv_dsl ? n->target_recv_dsl : 8192u, (uint32_t)ISER_INITIATOR_SEND_DSL));
	return m;
}

/* The queue drained below its bound: send what waited for room (from a fresh stack). */
static void sendq_resume(void *arg)
{
	struct isc_session *s = arg;
	s->resume_pending = false;
	isc_dout_pump(s);
	isc_task_pump(s);
}

static void opdu_done(struct xp_pdu *p, int err)
{
	struct isc_opdu *o = container_of(p, struct isc_opdu, x);
	struct isc_session *s = o->s;
	bool was_full = isc_sendq_full(s);
	s->sendq -= o->wire;
	s->reply_mem -= o->reply;
	/* The last Data-Out of an R2T left: that R2T is no longer outstanding (RFC 7143 sec. 13.17). */
	if (o->r2t_end && o->t && o->gen == s->conn_gen && o->t->r2t_out)
		o->t->r2t_out--;
	if (o->t)
		isc_task_pdu_done(s, o->t);
	/*
	 * A PDU that failed went with its connection, which takes no more; but
	 * one of an older connection failing late frees room on the current.
	 */
	bool room = !err || o->gen != s->conn_gen;
	if (room && was_full && !isc_sendq_full(s) && !s->resume_pending && s->state != ISC_S_FREEING &&
	    !reactor_defer(s->r, sendq_resume, s))
		s->resume_pending = true;
	free(o);
}

int isc_send_bhs(struct isc_session *s, const uint8_t *bhs, const uint8_t *data, uint32_t len, unsigned flags,
		 struct isc_task *t)
{
	return isc_send_pdu(s, bhs, data, len, flags, t, NULL);
}

static int send_pdu(struct isc_session *s, const uint8_t *bhs, const uint8_t *data, uint32_t len,
		    unsigned flags, struct isc_task *t, const struct xp_pdu *iser, bool reply)
{
	if (!s->xc)
		return -ENOTCONN;
	bool copy = flags & ISC_TX_COPY;
	struct isc_opdu *o = malloc(sizeof(*o) + (copy ? len : 0));
	if (!o)
		return -ENOMEM;
	memset(&o->x, 0, sizeof(o->x));
	memcpy(o->x.bhs, bhs, PDU_BHS_LEN);
	put_be32(o->x.bhs + 28, s->exp_statsn);
	pdu_set_dlen(o->x.bhs, len);
	if (copy && len)
		memcpy(o->buf, data, len);
	o->x.data = copy ? o->buf : data;
	o->x.data_len = len;
	o->x.done = opdu_done;
	if (iser) {
		o->x.read_stag_valid = iser->read_stag_valid;
		o->x.read_stag = iser->read_stag;
		o->x.read_va = iser->read_va;
		o->x.write_stag_valid = iser->write_stag_valid;
		o->x.write_stag = iser->write_stag;
		o->x.write_va = iser->write_va;
	}
	o->s = s;
	o->t = t;
	o->wire = PDU_BHS_LEN + len;
	o->reply = reply ? (uint32_t)sizeof(*o) + len : 0;
	o->gen = s->conn_gen;
	o->r2t_end = flags & ISC_TX_R2T_END;
	s->sendq += o->wire;
	s->reply_mem += o->reply;
	if (t)
		t->pdus++;
	/* A failure comes back through opdu_done() and the connection's closed() upcall. */
	s->xc->ops->send(s->xc, &o->x);
	isc_kick(s);
	return 0;
}

int isc_send_pdu(struct isc_session *s, const uint8_t *bhs, const uint8_t *data, uint32_t len, unsigned flags,
		 struct isc_task *t, const struct xp_pdu *iser)
{
	return send_pdu(s, bhs, data, len, flags, t, iser, false);
}

int isc_send_reply(struct isc_session *s, const uint8_t *bhs, const uint8_t *data, uint32_t len,
		   struct isc_task *t)
{
	/* One answer always goes (a ping may carry up to MaxRecvDataSegmentLength); more pile up only to the cap. */
	size_t need = sizeof(struct isc_opdu) + len;
	if (s->reply_mem && s->reply_mem + need > ISC_REPLY_BYTES) {
		isc_proto_drop(s, "target is not reading: %zu bytes of answers to its pings and requests not sent "
				  "(limit %u)", s->reply_mem, ISC_REPLY_BYTES);
		return -ENOBUFS;
	}
	return send_pdu(s, bhs, data, len, ISC_TX_COPY, t, NULL, true);
}

void isc_update_sn(struct isc_session *s, uint32_t exp_cmdsn, uint32_t max_cmdsn)
{
	/* RFC 7143 sec. 4.2.2.1: ignore a window that closes below ExpCmdSN - 1. */
	if (serial_lt(max_cmdsn, exp_cmdsn - 1))
		return;
	if (serial_gt(exp_cmdsn, s->exp_cmdsn))
		s->exp_cmdsn = exp_cmdsn;
	if (serial_gt(max_cmdsn, s->max_cmdsn))
		s->max_cmdsn = max_cmdsn;
}

static void arm(struct isc_session *s, bool on)
{
	struct itimerspec its = { 0 };
	if (on) {
		its.it_value.tv_nsec = ISC_TICK_MS * 1000000L;
		its.it_interval.tv_nsec = ISC_TICK_MS * 1000000L;
	}
	timerfd_settime(s->tfd, 0, &its, NULL);
}

void isc_arm_timer(struct isc_session *s)
{
	bool need = s->state == ISC_S_CONNECT || s->state == ISC_S_LOGIN || s->state == ISC_S_RECONNECT ||
		    s->state == ISC_S_LOGOUT || (s->state == ISC_S_FFP && s->o.nop_interval_s);
	arm(s, need);
}

/* The session's error as a log line: it may quote the target (login keys), so escaped. */
static void warn_errmsg(const struct isc_session *s, const char *what)
{
	char esc[sizeof(s->errmsg) + 64], at[NETADDR_HOST_LEN];
	isc_log(ISC_LOG_WARN, "%s: %s%s", isc_at(s, at, sizeof(at)), log_escape(s->errmsg, esc, sizeof(esc)), what);
}

/* One line per connection: the first violation is the reason, the rest follow from it. */
static void proto_note(struct isc_session *s)
{
	if (s->drop_err == -EPROTO)
		return;
	s->drop_err = -EPROTO;
	warn_errmsg(s, "; closing the connection");
}

int isc_proto_fail(struct isc_session *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	va_end(ap);
	proto_note(s);
	return -EPROTO;
}

void isc_proto_drop(struct isc_session *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	va_end(ap);
	isc_conn_lost(s, -EPROTO, NULL);
}

/* ---- transport upcalls ---- */

static int up_rx_bhs(struct xp_conn *c, const uint8_t *bhs, uint8_t **dest)
{
	struct isc_session *s = c->upper;
	if (!s)
		return -ECONNRESET;
	char why[128];
	/*
	 * What we declared (MaxRecvDataSegmentLength, or iSER's
	 * InitiatorRecvDataSegmentLength, the same value): in force since the
	 * login; a login PDU may carry 8192 (RFC 7143 sec. 6.2).
	 */
	uint32_t max = s->params.max_recv_dsl ? s->params.max_recv_dsl : 8192;
	if (s->state == ISC_S_LOGIN)
		max = MAX(8192u, s->o.max_recv_dsl);
	if (pdu_check_bhs(bhs, false, max, why, sizeof(why)))
		return isc_proto_fail(s, "target sent a bad PDU: %s", why);
	if (pdu_opcode(bhs) == PDU_OP_DATA_IN)
		return isc_task_rx_bhs(s, bhs, dest);
	*dest = NULL;
	return 0;
}

static void update_statsn(struct isc_session *s, const uint8_t *bhs)
{
	uint32_t statsn = get_be32(bhs + 24);
	if (serial_ge(statsn, s->exp_statsn))
		s->exp_statsn = statsn + 1;
}

static void on_nop_in(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_nop *n = (const void *)rx->bhs;
	isc_update_sn(s, be32toh(n->sn2), be32toh(n->max_cmdsn));
	if (n->itt != htobe32(PDU_RESERVED_TAG)) {
		update_statsn(s, rx->bhs);
		struct isc_task *t = isc_task_by_itt(s, be32toh(n->itt));
		if (t && t->kind == ISC_K_NOP) {
			if (t == s->ping)
				s->ping = NULL;
			isc_task_finish(s, t, 0);
		}
		return;
	}
	/* Unsolicited (TTT 0xffffffff): nothing to answer (RFC 7143 sec. 11.19). */
	if (n->ttt == htobe32(PDU_RESERVED_TAG))
		return;
	/*
	 * The target pings us: answer with its TTT, echoing its data up to what
	 * the target receives in one PDU (its data arrived within our own
	 * receive length, checked in up_rx_bhs).  The echo is a copy held until
	 * sent: isc_send_reply() caps what a target that does not read can
	 * make us keep.
	 */
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_nop *o = (void *)bhs;
	o->opcode = PDU_OP_NOP_OUT | PDU_FLAG_IMMEDIATE;
	o->flags = PDU_FLAG_FINAL;
	memcpy(o->lun, n->lun, 8);
	o->itt = htobe32(PDU_RESERVED_TAG);
	o->ttt = n->ttt;
	o->sn1 = htobe32(s->cmdsn);
	uint32_t len = rx->data ? MIN(rx->data_len, isc_send_dsl(s)) : 0;
	isc_send_reply(s, bhs, rx->data, len, NULL);
}

static void on_reject(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_reject *rj = (const void *)rx->bhs;
	isc_update_sn(s, be32toh(rj->exp_cmdsn), be32toh(rj->max_cmdsn));
	update_statsn(s, rx->bhs);
	if (!rx->data || rx->data_len < PDU_BHS_LEN) {
		isc_conn_lost(s, -EPROTO, "target sent a Reject without the rejected header");
		return;
	}
	struct isc_task *t = isc_task_by_itt(s, get_be32(rx->data + 16));
	isc_seterr(s, "target rejected a %s PDU (reason 0x%02x)", pdu_opcode_name(rx->data[0] & 0x3f),
		   rj->reason);
	if (t && t->issued && !t->completed)
		isc_task_finish(s, t, -EPROTO);
}

static void on_async(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_async *a = (const void *)rx->bhs;
	isc_update_sn(s, be32toh(a->exp_cmdsn), be32toh(a->max_cmdsn));
	update_statsn(s, rx->bhs);
	switch (a->event) {
	case PDU_ASYNC_LOGOUT_REQUEST:
	case PDU_ASYNC_DROP_CONNECTION:
	case PDU_ASYNC_DROP_SESSION:
		isc_conn_lost(s, -ECONNRESET, "target asked us to leave (async event)");
		break;
	default:
		break;
	}
}

static void on_logout_rsp(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_logout_rsp *l = (const void *)rx->bhs;
	update_statsn(s, rx->bhs);
	struct isc_task *t = isc_task_by_itt(s, be32toh(l->itt));
	if (t && t->kind == ISC_K_LOGOUT)
		isc_task_finish(s, t, l->response ? -EPROTO : 0);
	if (s->xc)
		s->xc->ops->close(s->xc);
}

static void up_rx_pdu(struct xp_conn *c, struct xp_rx *rx)
{
	struct isc_session *s = c->upper;
	if (!s)
		return;
	s->last_rx_ns = reactor_now_ns();
	uint8_t op = pdu_opcode(rx->bhs);
	if (op == PDU_OP_LOGIN_RSP) {
		isc_login_rx(s, rx);
		return;
	}
	if (s->state == ISC_S_LOGIN) {
		isc_conn_lost(s, -EPROTO, "target sent a non-login PDU during login");
		return;
	}
	if (s->o.iser && (op == PDU_OP_DATA_IN || op == PDU_OP_R2T)) {
		/* RFC 7145: data moves by RDMA; these PDUs have no place to land. */
		isc_conn_lost(s, -EPROTO, op == PDU_OP_DATA_IN ? "target sent a Data-In PDU over iSER"
							      : "target sent an R2T over iSER");
		return;
	}
	switch (op) {
	case PDU_OP_SCSI_RSP:
	case PDU_OP_DATA_IN:
	case PDU_OP_R2T:
	case PDU_OP_TMF_RSP:
	case PDU_OP_TEXT_RSP:
		isc_task_rx(s, rx);
		break;
	case PDU_OP_NOP_IN:
		on_nop_in(s, rx);
		break;
	case PDU_OP_REJECT:
		on_reject(s, rx);
		break;
	case PDU_OP_ASYNC_MSG:
		on_async(s, rx);
		break;
	case PDU_OP_LOGOUT_RSP:
		on_logout_rsp(s, rx);
		break;
	default:
		isc_conn_lost(s, -EPROTO, "unexpected opcode from target");
		return;
	}
	isc_task_pump(s);
}

static void finish_login(struct isc_session *s, int err)
{
	isc_done_cb cb = s->login_cb;
	s->login_cb = NULL;
	if (cb)
		cb(s, err, s->login_arg);
}

static void give_up(struct isc_session *s, int err)
{
	s->state = ISC_S_FAILED;
	s->reconnecting = false;
	isc_arm_timer(s);
	isc_tasks_fail_all(s, err);
	finish_login(s, err);
}

/* Connection events at debug level (ISC_DEBUG in the environment: on stderr without a callback). */
static void dbg(const struct isc_session *s, const char *what, int err)
{
	char at[NETADDR_HOST_LEN];
	isc_log(ISC_LOG_DEBUG, "%s: %s (state %d, err %d, tasks %u)", isc_at(s, at, sizeof(at)), what, s->state, err,
		s->ntasks);
}

static void destroy_conn(void *arg)
{
	struct xp_conn *c = arg;
	c->ops->destroy(c);
}

static int conn_open(struct isc_session *s);

static void up_closed(struct xp_conn *c, int err)
{
	struct isc_session *s = c->upper;
	if (!s || s->xc != c)
		return;
	/* Destroy from a fresh stack: the transport is still unwinding this call. */
	s->xc = NULL;
	c->upper = NULL;
	reactor_defer(s->r, destroy_conn, c);
	s->ping = NULL;
	isc_login_end(s); /* a login on this connection is over, whatever it got to */
	dbg(s, "connection closed", err);
	if (s->state == ISC_S_FREEING)
		return;
	if (s->redir_port && s->state == ISC_S_LOGIN && !s->user_logout) {
		/* Redirected: the same login, at the address the target gave. */
		snprintf(s->host, sizeof(s->host), "%s", s->redir_host);
		s->port = s->redir_port;
		s->redir_port = 0;
		if (!conn_open(s))
			return;
		err = s->login_err = -EHOSTUNREACH;
	}
	s->redir_port = 0;
	if (!err)
		err = -ECONNRESET;
	bool proto = err == -EPROTO || s->drop_err == -EPROTO;
	s->drop_err = 0;
	bool was_ffp = s->state == ISC_S_FFP;
	if (s->state == ISC_S_CONNECT && c->why[0])
		isc_seterr(s, "%s", c->why);
	if (s->state == ISC_S_LOGOUT || s->user_logout) {
		s->state = ISC_S_IDLE;
		isc_arm_timer(s);
		isc_tasks_fail_all(s, -ECANCELED);
		return;
	}
	if (s->o.reconnect_timeout_s && !s->discovery && (was_ffp || s->reconnecting)) {
		/*
		 * A target that breaks the protocol on every connection would be
		 * logged in to again and again (each login a fresh reconnect
		 * window), the same tasks re-issued each time: give up instead.
		 */
		if (proto && ++s->proto_drops >= ISC_PROTO_DROPS_MAX) {
			char msg[sizeof(s->errmsg)];
			snprintf(msg, sizeof(msg), "%s", s->errmsg);
			isc_seterr(s, "gave up: the target broke the protocol on %u connections in a row; the last "
				      "time: %.380s", s->proto_drops, msg);
			warn_errmsg(s, "");
			give_up(s, -EPROTO);
			return;
		}
		if (was_ffp) {
			s->reconnecting = true;
			s->reconnect_start_ns = reactor_now_ns();
			s->backoff_ms = ISC_BACKOFF_MIN_MS;
			char at[NETADDR_HOST_LEN];
			if (!s->errmsg[0])
				isc_seterr(s, "connection to %s lost", isc_at(s, at, sizeof(at)));
		}
		s->state = ISC_S_RECONNECT;
		s->reconnect_next_ns = reactor_now_ns() + (uint64_t)s->backoff_ms * 1000000ull;
		s->backoff_ms = MIN(s->backoff_ms * 2, ISC_BACKOFF_MAX_MS);
		isc_tasks_requeue(s);
		isc_arm_timer(s);
		return;
	}
	char at[NETADDR_HOST_LEN];
	if (s->state == ISC_S_LOGIN && !s->errmsg[0])
		isc_seterr(s, "connection to %s closed during login", isc_at(s, at, sizeof(at)));
	give_up(s, s->login_err ? s->login_err : err);
}

static void up_connected(struct xp_conn *c)
{
	struct isc_session *s = c->upper;
	if (!s || s->xc != c || s->state != ISC_S_CONNECT)
		return;
	dbg(s, "connected", 0);
	char at[NETADDR_HOST_LEN];
	int rc = s->o.iser ? isc_mem_attach(s, c) : 0;
	if (!rc && (rc = c->ops->start(c, s->r)))
		isc_seterr(s, "cannot start the connection to %s: %s", isc_at(s, at, sizeof(at)), strerror(-rc));
	if (!rc) {
		s->last_rx_ns = reactor_now_ns();
		s->state = ISC_S_LOGIN;
		rc = isc_login_start(s);
	}
	if (rc) {
		s->login_err = rc;
		isc_conn_lost(s, rc, NULL);
	}
	isc_task_pump(s);
}

static const struct xp_upcalls isc_upcalls = {
	.rx_bhs = up_rx_bhs,
	.rx_pdu = up_rx_pdu,
	.closed = up_closed,
	.connected = up_connected,
};

void isc_conn_lost(struct isc_session *s, int err, const char *why)
{
	if (why)
		isc_seterr(s, "%s", why);
	if (err == -EPROTO)
		proto_note(s);
	/* While connecting or logging in, this is the error the caller gets. */
	if ((s->state == ISC_S_CONNECT || s->state == ISC_S_LOGIN) && !s->login_err)
		s->login_err = err;
	if (s->xc)
		s->xc->ops->close(s->xc);
}

/* Start connecting; up_connected() logs in, up_closed() reports a failure. */
static int conn_open(struct isc_session *s)
{
	char err[256];
	struct xp_conn *xc = NULL;
	unsigned tmo_s = s->o.connect_timeout_s ? s->o.connect_timeout_s : 15;
	s->xops = s->o.iser ? &iser_transport : &tcp_transport;
	s->login_err = 0;
	s->drop_err = 0;
	s->conn_gen++;
	int rc = s->xops->connect(s->host, s->port, s->r, tmo_s * 1000, &xc, err, sizeof(err));
	if (rc) {
		isc_seterr(s, "%s", err);
		return rc;
	}
	xc->up = &isc_upcalls;
	xc->upper = s;
	s->xc = xc;
	s->state = ISC_S_CONNECT;
	/* One time limit for connecting and logging in (the transport's own fires first). */
	s->deadline_ns = reactor_now_ns() + ((uint64_t)tmo_s * 1000 + 500) * 1000000ull;
	isc_arm_timer(s);
	return 0;
}

static void reconnected(struct isc_session *s, int err, void *arg)
{
	(void)arg;
	dbg(s, "re-login done", err);
	if (!err) {
		s->reconnects++;
		s->reconnecting = false;
		s->errmsg[0] = 0;
	}
}

static void try_reconnect(struct isc_session *s)
{
	uint64_t now = reactor_now_ns();
	if (now - s->reconnect_start_ns > (uint64_t)s->o.reconnect_timeout_s * 1000000000ull) {
		char msg[sizeof(s->errmsg)];
		snprintf(msg, sizeof(msg), "%s", s->errmsg);
		isc_seterr(s, "gave up reconnecting after %u s: %.400s", s->o.reconnect_timeout_s, msg);
		give_up(s, -ECONNRESET);
		return;
	}
	if (now < s->reconnect_next_ns)
		return;
	s->login_cb = reconnected;
	s->login_arg = NULL;
	dbg(s, "reconnecting", 0);
	s->tsih = 0; /* a new session with the old ISID: the target reinstates (drops) the old one */
	/* Back to the portal given (a temporary redirection is for one login). */
	snprintf(s->host, sizeof(s->host), "%s", s->home_host);
	s->port = s->home_port;
	s->redirects = 0;
	if (conn_open(s)) {
		s->state = ISC_S_RECONNECT;
		s->reconnect_next_ns = now + (uint64_t)s->backoff_ms * 1000000ull;
		s->backoff_ms = MIN(s->backoff_ms * 2, ISC_BACKOFF_MAX_MS);
	}
}

void isc_on_tick(void *arg, uint32_t events)
{
	struct isc_session *s = arg;
	uint64_t ticks;
	(void)events;
	if (read(s->tfd, &ticks, sizeof(ticks)) < 0) {
		/* nothing to read: spurious wake-up */
	}
	uint64_t now = reactor_now_ns();
	switch (s->state) {
	case ISC_S_RECONNECT:
		try_reconnect(s);
		break;
	case ISC_S_CONNECT:
	case ISC_S_LOGIN:
	case ISC_S_LOGOUT:
		if (now > s->deadline_ns)
			isc_conn_lost(s, -ETIMEDOUT, s->state == ISC_S_CONNECT ? "connect timed out"
						     : s->state == ISC_S_LOGIN ? "login timed out" : "logout timed out");
		break;
	case ISC_S_FFP:
		if (!s->o.nop_interval_s)
			break;
		if (s->ping) {
			if (now - s->ping_sent_ns > (uint64_t)(s->o.nop_timeout_s ? s->o.nop_timeout_s : 10) *
							    1000000000ull)
				isc_conn_lost(s, -ETIMEDOUT, "target did not answer a NOP-Out ping");
		} else if (now - s->last_rx_ns > (uint64_t)s->o.nop_interval_s * 1000000000ull) {
			struct isc_task *t = isc_task_alloc(s, ISC_K_NOP);
			if (t) {
				s->ping = t;
				s->ping_sent_ns = now;
				isc_task_queue(s, t);
			}
		}
		break;
	default:
		break;
	}
	isc_task_pump(s);
}

int isc_connect_async(struct isc_session *s, const char *host, uint16_t port, const char *target,
		      isc_done_cb cb, void *arg)
{
	if (s->state != ISC_S_IDLE && s->state != ISC_S_FAILED)
		return -EBUSY;
	if (!host || strlen(host) >= sizeof(s->host) || (target && strlen(target) >= sizeof(s->target)))
		return -EINVAL;
	snprintf(s->host, sizeof(s->host), "%s", host);
	s->port = port ? port : 3260;
	snprintf(s->home_host, sizeof(s->home_host), "%s", s->host);
	s->home_port = s->port;
	s->redirects = 0;
	s->redir_port = 0;
	s->discovery = !target;
	snprintf(s->target, sizeof(s->target), "%s", target ? target : "");
	s->errmsg[0] = 0;
	s->user_logout = false;
	s->proto_drops = 0;
	s->tsih = 0;
	s->login_cb = cb;
	s->login_arg = arg;
	int rc = conn_open(s);
	if (rc) {
		s->login_cb = NULL;
		s->state = ISC_S_FAILED;
	}
	return rc;
}

/* Logout and NOP tasks report through done_cb; their result callback has nothing to do. */
static void no_result(struct isc_session *s, const struct isc_result *r, void *arg)
{
	(void)s;
	(void)r;
	(void)arg;
}

int isc_logout_async(struct isc_session *s, isc_done_cb cb, void *arg)
{
	if (s->state != ISC_S_FFP)
		return -ENOTCONN;
	struct isc_task *t = isc_task_alloc(s, ISC_K_LOGOUT);
	if (!t)
		return -ENOMEM;
	s->user_logout = true;
	s->state = ISC_S_LOGOUT;
	s->deadline_ns = reactor_now_ns() + 10000000000ull;
	t->cb = no_result;
	t->done_cb = cb;
	t->arg = arg;
	isc_task_queue(s, t);
	isc_task_pump(s);
	isc_arm_timer(s);
	return 0;
}

int isc_nop_async(struct isc_session *s, isc_done_cb cb, void *arg)
{
	if (s->state != ISC_S_FFP)
		return -ENOTCONN;
	struct isc_task *t = isc_task_alloc(s, ISC_K_NOP);
	if (!t)
		return -ENOMEM;
	t->cb = no_result;
	t->done_cb = cb;
	t->arg = arg;
	isc_task_queue(s, t);
	isc_task_pump(s);
	return 0;
}
