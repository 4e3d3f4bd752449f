/*
 * The initiator library (initiator/) against a target whose every PDU comes
 * from the input.  The library runs as in a program: a session, its private
 * reactor, the public API.  Under it is a fake transport: this file defines
 * tcp_transport, so common/transport/tcp.c is not linked.  What the library sends is
 * recorded, so that generated PDUs can carry the ITTs, ISID and R2TSNs it
 * expects and reach deep states; events from the input then deliver target
 * PDUs through the transport's upcalls (rx_bhs, then rx_pdu; Data-In lands
 * where rx_bhs says, as TCP does), stall or complete the sends, close the
 * connection, fire the reconnect, or call the API: async SCSI commands,
 * ABORT TASK, LU RESET, NOP, logout, and the synchronous REPORT LUNS,
 * INQUIRY, READ CAPACITY and SendTargets, during which the fake target
 * takes its answers from the events that follow.
 *
 * Input: an 8-byte header (see options()), then events: a kind byte and its
 * fields (see event()).  The whole input also goes to the answer parsers
 * (isc_parse_inquiry, _readcap16, _report_luns, _report_luns2).
 *
 * Checked besides crashes, leaks and ASan (every caller buffer is malloc'd
 * at its exact size): every task's callback runs exactly once by the time
 * the session is freed (the connect callback at most once), with 0 or a
 * negative errno; REPORT LUNS stores at most max LUNs and no more than the
 * answer held, and the two parsers agree; after every event no task has
 * more R2Ts outstanding than MaxOutstandingR2T, and the answers queued to
 * the target stay within ISC_REPLY_BYTES (or one answer).
 * FUZZ_INITIATOR_TRACE=1 in the environment prints what an input does.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include "common/reactor.h"
#include "common/util.h"
#include "fuzz.h"
#include "initiator/isc_internal.h"

#define MAX_TRACK 48    /* tasks and requests tracked per input */
#define MAX_EVENTS 400
#define MAX_DATA 65536  /* data bytes of one generated PDU */

/* ---- the fake transport ---- */

struct fconn {
	struct xp_conn xc;
	struct xp_pdu *qh, *qt;     /* sent, done() not called yet */
	unsigned calls;             /* deferred calls pending on it */
	bool closing, notified, destroyed, flush_pending, refuse;
};

static struct {
	struct fuzz_in in;
	struct isc_session *s;
	struct fconn *conn;         /* the latest connection */
	bool stall;                 /* sends stay queued: a target that does not read */
	bool refuse;                /* the next connect fails */
	bool sync_active;           /* a synchronous call runs: the fake target answers from the input */
	unsigned events;
	/* what the library sent */
	uint8_t sent[8][PDU_BHS_LEN];
	unsigned nsent;
	uint32_t login_itt, text_itt, nop_itt, tmf_itt, logout_itt, login_cmdsn;
	uint8_t login_flags, isid[6];
	struct cmdrec {
		uint32_t itt, edtl, next_datasn, next_r2tsn, din_off;
		bool write;
	} cmds[16];
	unsigned ncmds;
	uint32_t statsn;
} H;

static void f_defer(struct fconn *c, reactor_fn fn)
{
	if (!reactor_defer(c->xc.reactor, fn, c))
		c->calls++;
}

/* First thing in a deferred call: true (and freed when the last) once destroy() ran. */
static bool f_gone(struct fconn *c)
{
	c->calls--;
	if (!c->destroyed)
		return false;
	if (!c->calls)
		free(c);
	return true;
}

static void f_fail_queue(struct fconn *c)
{
	while (c->qh) {
		struct xp_pdu *p = c->qh;
		c->qh = p->next;
		if (!c->qh)
			c->qt = NULL;
		if (p->done)
			p->done(p, -ECONNRESET);
	}
}

static void f_notify(void *arg)
{
	struct fconn *c = arg;
	if (f_gone(c) || c->notified)
		return;
	c->notified = true;
	c->xc.up->closed(&c->xc, c->refuse ? -ECONNREFUSED : -ECONNRESET);
}

static void f_close(struct xp_conn *xc)
{
	struct fconn *c = (struct fconn *)xc;
	if (c->closing)
		return;
	c->closing = true;
	f_fail_queue(c);
	f_defer(c, f_notify);
}

static void f_flush(void *arg)
{
	struct fconn *c = arg;
	if (f_gone(c))
		return;
	c->flush_pending = false;
	if (c->closing) {
		f_fail_queue(c);
		return;
	}
	while (c->qh && !H.stall) {
		struct xp_pdu *p = c->qh;
		c->qh = p->next;
		if (!c->qh)
			c->qt = NULL;
		if (p->done)
			p->done(p, 0);
	}
}

static void record(const uint8_t *bhs)
{
	memcpy(H.sent[H.nsent++ % 8], bhs, PDU_BHS_LEN);
	uint32_t itt = get_be32(bhs + 16);
	switch (pdu_opcode(bhs)) {
	case PDU_OP_LOGIN_REQ:
		H.login_itt = itt;
		H.login_flags = bhs[1];
		H.login_cmdsn = get_be32(bhs + 24);
		memcpy(H.isid, bhs + 8, 6);
		break;
	case PDU_OP_SCSI_CMD: {
		struct cmdrec *r = &H.cmds[H.ncmds++ % 16];
		*r = (struct cmdrec){ .itt = itt, .edtl = get_be32(bhs + 20), .write = bhs[1] & PDU_CMD_WRITE };
		break;
	}
	case PDU_OP_TEXT_REQ:
		H.text_itt = itt;
		break;
	case PDU_OP_NOP_OUT:
		if (itt != PDU_RESERVED_TAG)
			H.nop_itt = itt;
		break;
	case PDU_OP_TMF_REQ:
		H.tmf_itt = itt;
		break;
	case PDU_OP_LOGOUT_REQ:
		H.logout_itt = itt;
		break;
	default:
		break;
	}
}

static void f_send(struct xp_conn *xc, struct xp_pdu *p)
{
	struct fconn *c = (struct fconn *)xc;
	FUZZ_CHECK(pdu_dlen(p->bhs) == p->data_len && (!p->data_len || p->data), "PDU data %u, BHS says %u",
		   p->data_len, pdu_dlen(p->bhs));
	record(p->bhs);
	p->next = NULL;
	if (c->qt)
		c->qt->next = p;
	else
		c->qh = p;
	c->qt = p;
	/* done() never from inside send(): transport.h. */
	if (!c->flush_pending) {
		c->flush_pending = true;
		f_defer(c, f_flush);
	}
}

static void f_connected(void *arg)
{
	struct fconn *c = arg;
	if (f_gone(c) || c->closing)
		return;
	if (c->refuse) {
		f_close(&c->xc);
		return;
	}
	c->xc.up->connected(&c->xc);
}

static int f_connect(const char *host, uint16_t port, struct reactor *r, unsigned timeout_ms, struct xp_conn **out,
		     char *err, size_t errlen)
{
	(void)host, (void)port, (void)timeout_ms, (void)err, (void)errlen;
	struct fconn *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->xc.ops = &tcp_transport;
	c->xc.reactor = r;
	c->refuse = H.refuse;
	snprintf(c->xc.peer, sizeof(c->xc.peer), "127.0.0.1:3260");
	H.conn = c;
	f_defer(c, f_connected);
	*out = &c->xc;
	return 0;
}

static int f_start(struct xp_conn *xc, struct reactor *r)
{
	xc->reactor = r;
	return 0;
}

static void f_destroy(struct xp_conn *xc)
{
	struct fconn *c = (struct fconn *)xc;
	if (!c->closing)
		f_close(xc);
	f_fail_queue(c);
	if (H.conn == c)
		H.conn = NULL;
	if (c->calls) {
		c->destroyed = true;
		return;
	}
	free(c);
}

const struct transport_ops tcp_transport = {
	.name = "fuzz", .connect = f_connect, .start = f_start, .send = f_send, .close = f_close,
	.destroy = f_destroy,
};

/* ---- target PDUs ---- */

static uint16_t in_u16(void)
{
	uint16_t v = fuzz_u8(&H.in);
	return (uint16_t)(v | fuzz_u8(&H.in) << 8);
}

/* Up to n bytes of the input (zeros past its end) into a buffer of exactly n. */
static uint8_t *in_bytes(uint32_t n)
{
	uint8_t *p = calloc(1, n ? n : 1);
	FUZZ_CHECK(p, "out of memory");
	uint32_t k = (uint32_t)MIN((size_t)n, H.in.n);
	memcpy(p, H.in.p, k);
	H.in.p += k;
	H.in.n -= k;
	return p;
}

/* StatSN, ExpCmdSN, MaxCmdSN: mostly right (the window open), sometimes from the input. */
static void sns(uint8_t *bhs, uint8_t how)
{
	put_be32(bhs + 24, how & 1 ? fuzz_u32(&H.in) : H.statsn++);
	uint32_t exp = how & 2 ? fuzz_u32(&H.in) : H.s->cmdsn;
	put_be32(bhs + 28, exp);
	put_be32(bhs + 32, exp + (how & 4 ? fuzz_u8(&H.in) - 1u : 63u));
}

/* Through the upcalls as TCP would: rx_bhs places the data (or the connection ends), then rx_pdu. */
static void deliver(uint8_t *bhs, const uint8_t *data, uint32_t dlen, bool digest_err)
{
	struct fconn *c = H.conn;
	if (!c || c->closing || c->destroyed || !c->xc.up)
		return;
	pdu_set_dlen(bhs, dlen);
	uint8_t *dest = NULL;
	int rc = c->xc.up->rx_bhs(&c->xc, bhs, &dest);
	if (rc < 0) {
		f_close(&c->xc);
		return;
	}
	struct xp_rx rx = { 0 };
	memcpy(rx.bhs, bhs, PDU_BHS_LEN);
	rx.placed = dest && dest != XP_DISCARD;
	uint8_t *own = NULL;
	if (!dest && dlen)
		dest = own = malloc(dlen);
	if (dest && dest != XP_DISCARD && dlen)
		memcpy(dest, data, dlen); /* into the caller's buffer when the library says so: ASan checks it */
	rx.data = dest == XP_DISCARD ? NULL : dest;
	rx.data_len = dest == XP_DISCARD ? 0 : dlen;
	rx.data_digest_error = digest_err;
	c->xc.up->rx_pdu(&c->xc, &rx);
	free(own);
}

static struct cmdrec *pick_cmd(void)
{
	if (!H.ncmds)
		return NULL;
	unsigned n = MIN(H.ncmds, 16u);
	return &H.cmds[(H.ncmds - 1 - fuzz_u8(&H.in) % n) % 16];
}

/* A PDU with its data segment of up to MAX_DATA input bytes (length from the input). */
static void with_data(uint8_t *bhs, uint32_t max)
{
	uint32_t n = in_u16() % (MIN(max, (uint32_t)MAX_DATA) + 1);
	uint8_t *d = in_bytes(n);
	deliver(bhs, d, n, false);
	free(d);
}

static void t_login(void)
{
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	static const uint8_t nsg[4] = { PDU_STAGE_FULL_FEATURE, PDU_STAGE_OPERATIONAL, PDU_STAGE_SECURITY, 2 };
	bhs[0] = PDU_OP_LOGIN_RSP;
	bhs[1] = (uint8_t)((f & 1 ? PDU_LOGIN_TRANSIT : 0) | (f & 8 ? PDU_LOGIN_CONTINUE : 0) |
			   (PDU_LOGIN_CSG(H.login_flags) << 2) | nsg[(f >> 1) & 3]);
	memcpy(bhs + 8, H.isid, 6);
	if (f & 0x40)
		bhs[8] ^= 1;
	put_be16(bhs + 14, in_u16());
	put_be32(bhs + 16, f & 0x20 ? fuzz_u32(&H.in) : H.login_itt);
	put_be32(bhs + 24, H.statsn++);
	put_be32(bhs + 28, H.login_cmdsn);
	put_be32(bhs + 32, H.login_cmdsn + 63);
	if (f & 0x10) {
		bhs[36] = fuzz_u8(&H.in) % 4;
		bhs[37] = fuzz_u8(&H.in);
	}
	with_data(bhs, 9000);
}

static void t_scsi_rsp(void)
{
	struct cmdrec *r = pick_cmd();
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_scsi_rsp *p = (void *)bhs;
	p->opcode = PDU_OP_SCSI_RSP;
	p->flags = PDU_FLAG_FINAL | (f & 0x1e);
	p->response = f & 0x80 ? fuzz_u8(&H.in) : 0;
	p->status = f & 1 ? fuzz_u8(&H.in) : 0;
	p->itt = htobe32(r && !(f & 0x20) ? r->itt : fuzz_u32(&H.in));
	p->resid = htobe32(fuzz_u32(&H.in));
	sns(bhs, fuzz_u8(&H.in));
	with_data(bhs, f & 0x40 ? 300 : 0);
}

static void t_data_in(void)
{
	struct cmdrec *r = pick_cmd();
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_data_in *d = (void *)bhs;
	uint32_t edtl = r ? r->edtl : 0, off = r ? r->din_off : 0;
	if (f & 1)
		off = fuzz_u32(&H.in) % (edtl + 16);
	uint32_t n = off < edtl ? edtl - off : 0;
	n = f & 2 ? in_u16() % (n + 16) : MIN(n, (uint32_t)(1 + fuzz_u8(&H.in)) * 512);
	d->opcode = PDU_OP_DATA_IN;
	d->flags = (f & 4 ? PDU_FLAG_FINAL : 0) | (f & 8 ? PDU_DATAIN_STATUS : 0) | (f & 0x10 ? PDU_RSP_UNDERFLOW : 0);
	d->status = f & 0x20 ? fuzz_u8(&H.in) : 0;
	d->itt = htobe32(r && !(f & 0x40) ? r->itt : fuzz_u32(&H.in));
	d->ttt = htobe32(PDU_RESERVED_TAG);
	d->datasn = htobe32(r && !(f & 0x80) ? r->next_datasn++ : fuzz_u32(&H.in));
	d->offset = htobe32(off);
	d->resid = htobe32(fuzz_u32(&H.in));
	sns(bhs, 0);
	if (r)
		r->din_off = off + n;
	uint8_t *data = in_bytes(MIN(n, (uint32_t)MAX_DATA));
	deliver(bhs, data, MIN(n, (uint32_t)MAX_DATA), fuzz_u8(&H.in) == 0xd1);
	free(data);
}

static void t_r2t(void)
{
	struct cmdrec *r = pick_cmd();
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_r2t *t = (void *)bhs;
	uint32_t edtl = r ? r->edtl : 0;
	uint32_t off = f & 1 ? fuzz_u32(&H.in) : fuzz_u32(&H.in) % (edtl + 1);
	uint32_t len = f & 2 ? fuzz_u32(&H.in) : fuzz_u32(&H.in) % (edtl - MIN(off, edtl) + 1);
	t->opcode = PDU_OP_R2T;
	t->flags = PDU_FLAG_FINAL;
	t->itt = htobe32(r && !(f & 4) ? r->itt : fuzz_u32(&H.in));
	t->ttt = htobe32(fuzz_u32(&H.in));
	t->r2tsn = htobe32(r && !(f & 8) ? r->next_r2tsn++ : fuzz_u32(&H.in));
	t->offset = htobe32(off);
	t->length = htobe32(len);
	sns(bhs, f >> 4);
	deliver(bhs, NULL, 0, false);
}

static void t_nop_in(void)
{
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_nop *n = (void *)bhs;
	n->opcode = PDU_OP_NOP_IN;
	n->flags = PDU_FLAG_FINAL;
	n->itt = htobe32(f & 1 ? H.nop_itt : f & 2 ? fuzz_u32(&H.in) : PDU_RESERVED_TAG);
	n->ttt = htobe32(f & 4 ? PDU_RESERVED_TAG : fuzz_u32(&H.in));
	sns(bhs, f >> 3);
	uint32_t n_len = f & 0x80 ? in_u16() * 8u : in_u16() % 4096;
	uint8_t *d = in_bytes(n_len);
	deliver(bhs, d, n_len, false);
	free(d);
}

static void t_reject(void)
{
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	bhs[0] = PDU_OP_REJECT;
	bhs[1] = PDU_FLAG_FINAL;
	bhs[2] = fuzz_u8(&H.in);
	put_be32(bhs + 16, PDU_RESERVED_TAG);
	sns(bhs, f);
	uint8_t data[PDU_BHS_LEN];
	memcpy(data, H.sent[(H.nsent - 1 - f % 8) % 8], sizeof(data));
	deliver(bhs, data, f & 0x80 ? fuzz_u8(&H.in) % (PDU_BHS_LEN + 1) : PDU_BHS_LEN, false);
}

static void t_async(void)
{
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_async *a = (void *)bhs;
	a->opcode = PDU_OP_ASYNC_MSG;
	a->flags = PDU_FLAG_FINAL;
	a->ffffffff = htobe32(PDU_RESERVED_TAG);
	a->event = fuzz_u8(&H.in) % 8;
	a->param1 = htobe16(in_u16());
	sns(bhs, f);
	with_data(bhs, f & 0x80 ? 300 : 0);
}

static void t_text_rsp(void)
{
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_text *t = (void *)bhs;
	t->opcode = PDU_OP_TEXT_RSP;
	t->flags = (f & 1 ? PDU_FLAG_FINAL : 0) | (f & 2 ? PDU_TEXT_CONTINUE : 0);
	t->itt = htobe32(f & 4 ? fuzz_u32(&H.in) : H.text_itt);
	t->ttt = htobe32(f & 1 ? PDU_RESERVED_TAG : fuzz_u32(&H.in));
	sns(bhs, f >> 3);
	with_data(bhs, 9000);
}

static void t_tmf_or_logout(bool tmf)
{
	uint8_t f = fuzz_u8(&H.in), bhs[PDU_BHS_LEN] = { 0 };
	bhs[0] = tmf ? PDU_OP_TMF_RSP : PDU_OP_LOGOUT_RSP;
	bhs[1] = PDU_FLAG_FINAL;
	bhs[2] = f & 1 ? fuzz_u8(&H.in) : 0;
	put_be32(bhs + 16, f & 2 ? fuzz_u32(&H.in) : tmf ? H.tmf_itt : H.logout_itt);
	sns(bhs, f >> 2);
	deliver(bhs, NULL, 0, false);
}

static void t_raw(void)
{
	uint8_t bhs[PDU_BHS_LEN];
	uint8_t *b = in_bytes(PDU_BHS_LEN);
	memcpy(bhs, b, sizeof(bhs));
	free(b);
	uint32_t n = in_u16();
	uint8_t *d = in_bytes(n);
	deliver(bhs, d, n, false);
	free(d);
}

/* ---- what a program does ---- */

/* Event kinds: the target's first (E_SERVICE: the sends complete), then the program's. */
enum {
	E_LOGIN, E_SCSI_RSP, E_DATA_IN, E_R2T, E_NOP_IN, E_REJECT, E_ASYNC, E_TEXT_RSP, E_TMF_RSP, E_LOGOUT_RSP,
	E_RAW, E_CLOSE, E_STALL, E_SERVICE,
	E_SUBMIT, E_ABORT, E_LU_RESET, E_NOP, E_LOGOUT, E_SYNC, E_RECONNECT, E_COUNT
};

struct track {
	int calls, err;
	uint8_t *buf;
	uint32_t len;
	uint8_t op;
	struct isc_task *t;   /* valid until the callback */
};
static struct track tracks[MAX_TRACK];
static unsigned ntracks;
static bool trace; /* FUZZ_INITIATOR_TRACE: what happens, on stderr */

static void check_err(int err)
{
	FUZZ_CHECK(err <= 0 && err > -4096, "error %d", err);
}

/* The answer parsers on what a completed READ-type command received. */
static void parse_answer(const struct track *k, const struct isc_result *r)
{
	uint32_t got = k->len;
	if (r->underflow)
		got = r->residual < got ? got - r->residual : 0;
	if (k->op == 0x12) {
		struct isc_inquiry inq;
		if (!isc_parse_inquiry(k->buf, got, &inq))
			FUZZ_CHECK(strlen(inq.vendor) <= 8 && strlen(inq.product) <= 16, "inquiry strings");
	} else if (k->op == 0x9e) {
		struct isc_capacity cap;
		isc_parse_readcap16(k->buf, got, &cap);
	} else if (k->op == 0xa0) {
		uint64_t luns[16];
		unsigned n;
		bool cut;
		int held = isc_parse_report_luns(k->buf, got, luns, 16);
		int rc = isc_parse_report_luns2(k->buf, got, luns, 16, &n, &cut);
		FUZZ_CHECK((held < 0) == (rc < 0) && (rc < 0 || (n == MIN((unsigned)held, 16u) && n <= 16)),
			   "report luns: held %d, rc %d, n %u", held, rc, n);
	}
}

static void task_cb(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct track *k = arg;
	(void)s;
	k->calls++;
	k->t = NULL;
	if (trace)
		fprintf(stderr, "  task %ld (op 0x%02x): err %d status 0x%02x resid %u\n", (long)(k - tracks), k->op,
			r->err, r->status, r->residual);
	check_err(r->err);
	if (!r->err)
		parse_answer(k, r);
}

static void done_cb(struct isc_session *s, int err, void *arg)
{
	struct track *k = arg;
	(void)s;
	k->calls++;
	if (trace)
		fprintf(stderr, "  request %ld: err %d\n", (long)(k - tracks), err);
	check_err(err);
}

static void tmf_cb(struct isc_session *s, int err, int response, void *arg)
{
	struct track *k = arg;
	(void)s;
	(void)response;
	k->calls++;
	check_err(err);
}

static struct track *new_track(void)
{
	if (ntracks == MAX_TRACK)
		return NULL;
	struct track *k = &tracks[ntracks++];
	memset(k, 0, sizeof(*k));
	return k;
}

static void submit(void)
{
	uint8_t f = fuzz_u8(&H.in);
	struct track *k = new_track();
	if (!k)
		return;
	struct isc_cmd c;
	uint32_t blocks = 1 + fuzz_u8(&H.in) % 128;
	switch (f % 7) {
	case 0:
	case 1:
		k->len = blocks * 512;
		k->buf = malloc(k->len);
		if (f % 7)
			isc_cmd_write16(&c, 0, 0, blocks, 512, memset(k->buf, 0x5a, k->len), f & 0x80);
		else
			isc_cmd_read16(&c, 0, 0, blocks, 512, k->buf);
		break;
	case 2:
		k->len = 8 + 8 * (fuzz_u8(&H.in) % 32);
		k->buf = calloc(1, k->len);
		isc_cmd_report_luns(&c, k->buf, k->len);
		break;
	case 3:
		k->len = 36 + fuzz_u8(&H.in);
		k->buf = calloc(1, k->len);
		isc_cmd_inquiry(&c, 0, f & 0x80, 0x83, k->buf, (uint16_t)k->len);
		break;
	case 4:
		k->len = 32;
		k->buf = calloc(1, k->len);
		isc_cmd_readcap16(&c, 0, k->buf, k->len);
		break;
	case 5:
		isc_cmd_tur(&c, fuzz_u8(&H.in));
		break;
	default:
		isc_cmd_sync_cache16(&c, 0, 0, 0);
		break;
	}
	k->op = c.cdb[0];
	k->t = isc_submit(H.s, &c, task_cb, k);
	if (!k->t)
		k->calls = 1; /* refused at once: no callback owed */
}

static void abort_one(void)
{
	unsigned i = fuzz_u8(&H.in) % (ntracks ? ntracks : 1);
	if (i >= ntracks || !tracks[i].t || tracks[i].calls)
		return;
	struct track *k = new_track();
	if (k && isc_abort_task_async(H.s, tracks[i].t, tmf_cb, k))
		k->calls = 1; /* refused, or the task was never sent (-EALREADY): no TMF callback */
}

static void request(uint8_t kind)
{
	struct track *k = new_track();
	if (!k)
		return;
	int rc;
	if (kind == 0)
		rc = isc_lu_reset_async(H.s, fuzz_u8(&H.in), tmf_cb, k);
	else if (kind == 1)
		rc = isc_nop_async(H.s, done_cb, k);
	else
		rc = isc_logout_async(H.s, done_cb, k);
	if (rc)
		k->calls = 1;
}

/* During a synchronous call the fake target answers from the events that follow (target ones only). */
static bool target_event(uint8_t kind);

static void feed(void *arg)
{
	(void)arg;
	if (!H.sync_active)
		return;
	uint8_t kind = H.in.n && H.events++ < MAX_EVENTS ? fuzz_u8(&H.in) : 0xff;
	if (trace)
		fprintf(stderr, "  answer %u (state %d)\n", kind % E_COUNT, H.s->state);
	if (target_event(kind)) {
		reactor_defer(H.s->r, feed, NULL);
		return;
	}
	/* Out of answers: the connection ends, so the call does. */
	if (H.conn)
		f_close(&H.conn->xc);
}

static void sync_call(void)
{
	uint8_t f = fuzz_u8(&H.in);
	/* A reconnect waits for real time (its back-off): only without one. */
	if (H.s->o.reconnect_timeout_s || reactor_defer(H.s->r, feed, NULL))
		return;
	H.sync_active = true;
	if (trace)
		fprintf(stderr, "  sync call %u\n", f % 5);
	switch (f % 5) {
	case 0: {
		uint64_t luns[64];
		unsigned max = f >> 3, n = 99;
		bool cut;
		if (!isc_report_luns2_sync(H.s, luns, max, &n, &cut, NULL))
			FUZZ_CHECK(n <= max, "REPORT LUNS stored %u of max %u", n, max);
		break;
	}
	case 1: {
		uint64_t luns[8];
		unsigned n = 99;
		if (!isc_report_luns_sync(H.s, luns, 8, &n, NULL))
			FUZZ_CHECK(n <= 8, "REPORT LUNS stored %u of max 8", n);
		break;
	}
	case 2: {
		struct isc_inquiry inq;
		isc_inquiry_sync(H.s, 0, &inq, NULL);
		break;
	}
	case 3: {
		struct isc_capacity cap;
		isc_readcap16_sync(H.s, 0, &cap, NULL);
		break;
	}
	default: {
		struct isc_discovery *d = NULL;
		if (!isc_send_targets_sync(H.s, &d))
			for (unsigned i = 0; i < d->ntargets; i++)
				FUZZ_CHECK(d->targets[i].nportals >= 1, "target without a portal");
		isc_discovery_free(d);
		break;
	}
	}
	H.sync_active = false;
}

static void service(void)
{
	for (int i = 0; i < 4; i++)
		isc_service(H.s, POLLIN);
}

/* ---- events ---- */


static bool target_event(uint8_t kind)
{
	switch (kind % E_COUNT) {
	case E_LOGIN: t_login(); break;
	case E_SCSI_RSP: t_scsi_rsp(); break;
	case E_DATA_IN: t_data_in(); break;
	case E_R2T: t_r2t(); break;
	case E_NOP_IN: t_nop_in(); break;
	case E_REJECT: t_reject(); break;
	case E_ASYNC: t_async(); break;
	case E_TEXT_RSP: t_text_rsp(); break;
	case E_TMF_RSP: t_tmf_or_logout(true); break;
	case E_LOGOUT_RSP: t_tmf_or_logout(false); break;
	case E_RAW: t_raw(); break;
	case E_CLOSE:
		if (H.conn)
			f_close(&H.conn->xc);
		break;
	case E_STALL:
		H.stall = !H.stall;
		if (!H.stall && H.conn && !H.conn->flush_pending && !H.conn->closing) {
			H.conn->flush_pending = true;
			f_defer(H.conn, f_flush);
		}
		break;
	case E_SERVICE:
		break; /* the reactor runs after every event */
	default:
		return false;
	}
	return kind != 0xff;
}

/* After every event: the bounds the library promises. */
static void check_bounds(void)
{
	struct isc_session *s = H.s;
	uint32_t max_out = s->params.max_outstanding_r2t ? s->params.max_outstanding_r2t : 1;
	for (uint32_t i = 0; i < s->nslots; i++) {
		const struct isc_task *t = s->slots[i];
		FUZZ_CHECK(!t || t->r2t_out <= max_out, "task %u: %u R2Ts outstanding, MaxOutstandingR2T %u", i,
			   t ? t->r2t_out : 0, max_out);
	}
	/* One answer always goes; more only up to the cap (a record of < 512 bytes plus the echo). */
	size_t one = 512 + (size_t)isc_send_dsl(s);
	FUZZ_CHECK(s->reply_mem <= MAX(ISC_REPLY_BYTES, one), "%zu bytes of answers queued", s->reply_mem);
}

static void event(void)
{
	uint8_t kind = fuzz_u8(&H.in);
	if (trace)
		fprintf(stderr, "event %u (state %d)\n", kind % E_COUNT, H.s->state);
	if (!target_event(kind)) {
		switch (kind % E_COUNT) {
		case E_SUBMIT: submit(); break;
		case E_ABORT: abort_one(); break;
		case E_LU_RESET: request(0); break;
		case E_NOP: request(1); break;
		case E_LOGOUT: request(2); break;
		case E_SYNC: sync_call(); break;
		case E_RECONNECT:
			/* The back-off has passed: what the timer would do. */
			H.refuse = fuzz_u8(&H.in) & 1;
			if (H.s->state == ISC_S_RECONNECT) {
				H.s->reconnect_next_ns = 0;
				isc_on_tick(H.s, 0);
			}
			break;
		default: break;
		}
	}
	service();
	check_bounds();
}

/* ---- the input ---- */

static void log_cb(enum isc_log_level lvl, const char *msg, void *arg)
{
	(void)arg;
	FUZZ_CHECK(lvl <= ISC_LOG_DEBUG && strlen(msg) < 1024, "log line");
	if (trace)
		fprintf(stderr, "  log %d: %s\n", lvl, msg);
}

/* Header: flags, lengths, CHAP_A choice; the rest of isc_options stays at its defaults. */
static void options(struct isc_options *o, bool *discovery)
{
	static const uint32_t dsl[4] = { 512, 8192, 65536, 262144 };
	static const uint32_t burst[4] = { 512, 65536, 1048576, 8388608 };
	uint8_t f = fuzz_u8(&H.in), l = fuzz_u8(&H.in), a = fuzz_u8(&H.in);
	isc_options_default(o);
	o->immediate_data = f & 1;
	o->initial_r2t = f & 2;
	*discovery = f & 4;
	o->reconnect_timeout_s = f & 8 ? 30 : 0;
	if (f & 0x10) {
		o->user = "fuzz";
		o->password = "fuzz-secret-1234";
	}
	if (f & 0x20) {
		o->target_user = "target";
		o->target_password = "target-secret-12";
	}
	o->header_digest = f & 0x40;
	o->data_digest = f & 0x40;
	H.refuse = f & 0x80;
	o->max_recv_dsl = dsl[l & 3];
	o->max_burst = burst[(l >> 2) & 3];
	o->first_burst = MIN(o->max_burst, burst[(l >> 4) & 3]);
	o->nop_interval_s = 0; /* timers run on real time: the input drives everything else */
	o->chap_algs[0] = 5 + a % 4;
	o->chap_algs[1] = 0;
	for (int i = 0; i < 5; i++)
		fuzz_u8(&H.in); /* reserved */
}

static void parsers(const uint8_t *data, size_t size)
{
	uint32_t len = (uint32_t)MIN(size, (size_t)UINT32_MAX);
	struct isc_inquiry inq;
	struct isc_capacity cap;
	uint64_t luns[32];
	unsigned n;
	bool cut;
	isc_parse_inquiry(data, len, &inq);
	isc_parse_readcap16(data, len, &cap);
	unsigned max = size ? data[0] % 33 : 0;
	int held = isc_parse_report_luns(data, len, luns, max);
	int rc = isc_parse_report_luns2(data, len, luns, max, &n, &cut);
	FUZZ_CHECK(held < 0 || (uint32_t)held <= (len - 8) / 8, "held %d of a %u-byte answer", held, len);
	FUZZ_CHECK((held < 0) == (rc < 0) && (rc < 0 || (n == MIN((unsigned)held, max) &&
							 cut == (get_be32(data) / 8 > n))),
		   "held %d, rc %d, n %u, cut %d", held, rc, n, cut);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	parsers(data, size);
	memset(&H, 0, sizeof(H));
	ntracks = 0;
	trace = getenv("FUZZ_INITIATOR_TRACE");
	H.in = (struct fuzz_in){ data, size };
	isc_set_log_cb(log_cb, NULL, ISC_LOG_DEBUG);
	struct isc_options o;
	bool discovery;
	options(&o, &discovery);
	H.s = isc_session_new(&o);
	FUZZ_CHECK(H.s, "isc_session_new: %s", strerror(errno));
	struct track *login = new_track();
	if (isc_connect_async(H.s, "127.0.0.1", 3260, discovery ? NULL : "iqn.2026-11.org.isert:fuzz", done_cb,
			      login))
		login->calls = 1;
	service();
	while (H.in.n && H.events++ < MAX_EVENTS)
		event();
	isc_session_free(H.s);
	/* The connect callback: once, or never when the session is freed during the login. */
	FUZZ_CHECK(login->calls <= 1, "connect callback ran %d times", login->calls);
	for (unsigned i = 1; i < ntracks; i++) {
		FUZZ_CHECK(tracks[i].calls == 1, "callback %u ran %d times", i, tracks[i].calls);
		free(tracks[i].buf);
	}
	return 0;
}
