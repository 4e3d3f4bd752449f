/*
 * Unit tests of the target's iSCSI layer at its seam: a fake transport
 * (struct transport_ops) feeds PDUs into conn.c / session.c / tmf.c and
 * records what comes out, on a real reactor with RAM and file (io_uring)
 * LUNs, so the CmdSN window, immediate commands, buffer budget, Data-Out
 * bounds, task management and close-while-sending run without sockets.
 * Every test ends with every connection freed and no pool buffer in use.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/reactor.h"
#include "common/util.h"
#include "target/config/config.h"
#include "target/iscsi/iscsi.h"

#include "unit_run.h"

#define TGT "iqn.2026-11.org.isert.unit:t"
#define INI "iqn.2026-11.org.isert.unit:i"
#define MAXLOG 8192

/* getrandom() failing on demand (the link wraps it: -Wl,--wrap=getrandom). */
static bool random_fails;
ssize_t __real_getrandom(void *buf, size_t len, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned flags)
{
	if (random_fails) {
		errno = EIO;
		return -1;
	}
	return __real_getrandom(buf, len, flags);
}

/* ---- the fake transport ---- */

struct sent {
	uint8_t bhs[PDU_BHS_LEN];
	uint32_t len;
	uint8_t data[64];
};

struct fk {
	struct xp_conn xc;
	struct xp_pdu *q, *qtail;     /* sent, not yet "on the wire" */
	struct xp_pdu *dead;          /* sent after the close */
	bool hold;                    /* keep sends queued until fk_wire() */
	bool closing, notified, destroyed, dead_scheduled, wire_scheduled;
	unsigned sends_after_close;
	struct sent log[MAXLOG];
	unsigned nlog;
	/* iSER: RDMA READs waiting to complete */
	void (*read_cb[64])(void *, int);
	void *read_arg[64];
	unsigned nreads;
};

static struct reactor *r;
static struct config *cfg;
static char lunfile[64];

static void fk_done_all(struct xp_pdu **head, int err)
{
	while (*head) {
		struct xp_pdu *p = *head;
		*head = p->next;
		if (p->done)
			p->done(p, err);
	}
}

static void fk_wire(struct fk *f)
{
	f->qtail = NULL;
	fk_done_all(&f->q, 0);
}

static void fk_wire_later(void *arg)
{
	struct fk *f = arg;
	f->wire_scheduled = false;
	if (!f->destroyed && !f->hold)
		fk_wire(f);
}

static void fk_fail_dead(void *arg)
{
	struct fk *f = arg;
	f->dead_scheduled = false;
	if (!f->destroyed)
		fk_done_all(&f->dead, -ECONNRESET);
}

static void fk_send(struct xp_conn *xc, struct xp_pdu *p)
{
	struct fk *f = (struct fk *)xc;
	CU_ASSERT_FATAL(f->nlog < MAXLOG);
	struct sent *s = &f->log[f->nlog++];
	memcpy(s->bhs, p->bhs, PDU_BHS_LEN);
	s->len = p->data_len;
	if (p->data_len)
		memcpy(s->data, p->data, MIN(p->data_len, sizeof(s->data)));
	p->next = NULL;
	if (f->closing) {
		/* The contract: a failure comes back through done(), never from inside send(). */
		f->sends_after_close++;
		p->next = f->dead;
		f->dead = p;
		if (!f->dead_scheduled && !reactor_defer(r, fk_fail_dead, f))
			f->dead_scheduled = true;
		return;
	}
	if (f->qtail)
		f->qtail->next = p;
	else
		f->q = p;
	f->qtail = p;
	if (!f->hold && !f->wire_scheduled && !reactor_defer(r, fk_wire_later, f))
		f->wire_scheduled = true;
}

static void fk_notify(void *arg)
{
	struct fk *f = arg;
	if (f->destroyed || f->notified)
		return;
	f->notified = true;
	f->xc.up->closed(&f->xc, -ECONNRESET);
}

static void fk_fail_reads(struct fk *f, int err)
{
	while (f->nreads) {
		f->nreads--;
		f->read_cb[f->nreads](f->read_arg[f->nreads], err);
	}
}

static void fk_close(struct xp_conn *xc)
{
	struct fk *f = (struct fk *)xc;
	if (f->closing)
		return;
	f->closing = true;
	f->qtail = NULL;
	fk_done_all(&f->q, -ECONNRESET);
	fk_fail_reads(f, -ECONNRESET);
	reactor_defer(r, fk_notify, f);
}

static void fk_destroy(struct xp_conn *xc)
{
	struct fk *f = (struct fk *)xc;
	fk_done_all(&f->dead, -ECONNRESET);
	f->destroyed = true; /* kept for the test's assertions; freed by it */
}

static int fk_start(struct xp_conn *xc, struct reactor *rr)
{
	return 0;
}

static int fk_rdma_write(struct xp_conn *c, struct buf *b, uint32_t off, uint32_t len, uint64_t va, uint32_t stag,
			 void (*cb)(void *arg, int err), void *arg)
{
	return 0;
}

static int fk_rdma_read(struct xp_conn *xc, struct buf *b, uint32_t off, uint32_t len, uint64_t va, uint32_t stag,
			void (*cb)(void *arg, int err), void *arg)
{
	struct fk *f = (struct fk *)xc;
	CU_ASSERT_FATAL(f->nreads < 64);
	f->read_cb[f->nreads] = cb;
	f->read_arg[f->nreads++] = arg;
	return 0;
}

/* The receives fk_iser "has": grant() cuts every window to grant_cap (at least the floor it is given). */
static uint32_t grant_cap = UINT32_MAX;

static uint32_t fk_grant(struct xp_conn *xc, uint32_t floor, uint32_t want)
{
	(void)xc;
	return MAX(floor, MIN(want, grant_cap));
}

static const struct transport_ops fk_tcp = {
	.name = "fake-tcp", .start = fk_start, .send = fk_send, .close = fk_close, .destroy = fk_destroy,
};
static const struct transport_ops fk_iser = {
	.name = "fake-iser", .rdma = true, .start = fk_start, .send = fk_send, .close = fk_close,
	.destroy = fk_destroy, .grant = fk_grant, .rdma_write = fk_rdma_write, .rdma_read = fk_rdma_read,
};

static void pump(int n)
{
	for (int i = 0; i < n; i++)
		reactor_poll_once(r, 0);
}

/* Poll (up to 2 s) until cond(f) holds. */
static bool pump_until(struct fk *f, bool (*cond)(struct fk *))
{
	for (int i = 0; i < 200 && !cond(f); i++)
		reactor_poll_once(r, 10);
	return cond(f);
}

static struct fk *fk_new(bool iser)
{
	struct fk *f = calloc(1, sizeof(*f));
	f->xc.ops = iser ? &fk_iser : &fk_tcp;
	snprintf(f->xc.peer, sizeof(f->xc.peer), "127.0.0.9:4000");
	snprintf(f->xc.peer_ip, sizeof(f->xc.peer_ip), "127.0.0.9");
	snprintf(f->xc.local_ip, sizeof(f->xc.local_ip), "127.0.0.1");
	f->xc.local_port = 3260;
	CU_ASSERT_FATAL(admit_conn(NULL, &f->xc));
	conn_accept(NULL, &f->xc);
	pump(2);
	return f;
}

/* Set while PDUs must arrive back to back, with no reactor iteration in between. */
static bool rx_no_pump;

/* Deliver a PDU as a transport would: rx_bhs says where its data goes, then rx_pdu. */
static void fk_rx(struct fk *f, const void *bhs, const void *data, uint32_t len, const struct xp_rx *iser)
{
	struct xp_rx rx = { 0 };
	if (iser)
		rx = *iser;
	memcpy(rx.bhs, bhs, PDU_BHS_LEN);
	pdu_set_dlen(rx.bhs, len);
	uint8_t *dest = NULL, *own = NULL;
	CU_ASSERT_FATAL(f->xc.up->rx_bhs(&f->xc, rx.bhs, &dest) == 0);
	if (dest && dest != XP_DISCARD) {
		memcpy(dest, data, len);
		rx.placed = true;
		rx.data = dest;
	} else if (dest != XP_DISCARD && len) {
		own = malloc(len);
		memcpy(own, data, len);
		rx.data = own;
	}
	rx.data_len = dest == XP_DISCARD ? 0 : len;
	f->xc.up->rx_pdu(&f->xc, &rx);
	free(own);
	if (!rx_no_pump)
		pump(3);
}

static const struct sent *last_of(struct fk *f, uint8_t op)
{
	for (unsigned i = f->nlog; i-- > 0;)
		if (pdu_opcode(f->log[i].bhs) == op)
			return &f->log[i];
	return NULL;
}

static unsigned count_of(struct fk *f, uint8_t op, unsigned from)
{
	unsigned n = 0;
	for (unsigned i = from; i < f->nlog; i++)
		n += pdu_opcode(f->log[i].bhs) == op;
	return n;
}

static unsigned rejects(struct fk *f, uint8_t reason, unsigned from)
{
	unsigned n = 0;
	for (unsigned i = from; i < f->nlog; i++)
		n += pdu_opcode(f->log[i].bhs) == PDU_OP_REJECT && f->log[i].bhs[2] == reason;
	return n;
}

static uint32_t cmdsn = 1;

/* Poll (up to 2 s) until the target sent at least n PDUs of opcode op. */
static bool wait_op(struct fk *f, uint8_t op, unsigned n)
{
	for (int i = 0; i < 200 && count_of(f, op, 0) < n; i++)
		reactor_poll_once(r, 10);
	return count_of(f, op, 0) >= n;
}

static void fk_login_keys(struct fk *f, const char *keys, size_t klen, uint8_t csg, uint8_t nsg)
{
	struct pdu_login_req q = { 0 };
	q.opcode = PDU_OP_LOGIN_REQ | 0x40;
	q.flags = PDU_LOGIN_TRANSIT | (uint8_t)(csg << 2) | nsg;
	q.isid[0] = 0x80;
	q.isid[5] = 7;
	q.itt = htobe32(1);
	q.cmdsn = htobe32(cmdsn);
	fk_rx(f, &q, keys, (uint32_t)klen, NULL);
}

/* Log in straight to the operational stage: returns the login status. */
static unsigned fk_login(struct fk *f, const char *extra, size_t elen)
{
	char keys[1024];
	int n = snprintf(keys, sizeof(keys),
			 "InitiatorName=" INI "%cTargetName=" TGT "%cSessionType=Normal%cHeaderDigest=None%c"
			 "DataDigest=None%cInitialR2T=Yes%cImmediateData=No%cMaxRecvDataSegmentLength=8192%c"
			 "MaxBurstLength=262144%cFirstBurstLength=65536%c",
			 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
	memcpy(keys + n, extra, elen);
	fk_login_keys(f, keys, (size_t)n + elen, PDU_STAGE_OPERATIONAL, PDU_STAGE_FULL_FEATURE);
	const struct sent *s = last_of(f, PDU_OP_LOGIN_RSP);
	CU_ASSERT_FATAL(s != NULL);
	return (unsigned)s->bhs[36] << 8 | s->bhs[37];
}

static struct fk *session(bool iser)
{
	struct fk *f = fk_new(iser);
	cmdsn = 1;
	CU_ASSERT_FATAL(fk_login(f, "", 0) == 0);
	return f;
}

static uint32_t itt_of(const struct sent *s)
{
	return be32toh(((const struct pdu_bhs *)s->bhs)->itt);
}

/* LUN 0 is the file LUN (completes later, through io_uring), LUN 1 the RAM LUN (at once). */
static uint64_t cmd_lun;

static void fk_cmd(struct fk *f, uint32_t itt, uint32_t sn, bool immediate, const uint8_t *cdb, uint32_t edtl,
		   bool rd, bool wr, const struct xp_rx *iser)
{
	struct pdu_scsi_cmd c = { 0 };
	pdu_set_lun(&c, pdu_lun_encode(cmd_lun));
	c.opcode = PDU_OP_SCSI_CMD | (immediate ? 0x40 : 0);
	c.flags = PDU_FLAG_FINAL | (rd ? PDU_CMD_READ : 0) | (wr ? PDU_CMD_WRITE : 0) | 1;
	c.itt = htobe32(itt);
	c.edtl = htobe32(edtl);
	c.cmdsn = htobe32(sn);
	memcpy(c.cdb, cdb, 16);
	fk_rx(f, &c, NULL, 0, iser);
}

static void rw10(uint8_t *cdb, uint8_t op, uint32_t lba, uint16_t blocks)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	put_be32(cdb + 2, lba);
	put_be16(cdb + 7, blocks);
}

static void fk_dout(struct fk *f, uint32_t itt, uint32_t ttt, uint32_t datasn, uint32_t off, uint32_t len, bool final)
{
	static uint8_t data[65536];
	struct pdu_data_out d = { 0 };
	d.opcode = PDU_OP_DATA_OUT;
	d.flags = final ? PDU_FLAG_FINAL : 0;
	d.itt = htobe32(itt);
	d.ttt = htobe32(ttt);
	d.datasn = htobe32(datasn);
	d.offset = htobe32(off);
	fk_rx(f, &d, data, len, NULL);
}

static void fk_tmf(struct fk *f, uint32_t itt, int fn, uint32_t ref_itt, uint64_t lun)
{
	struct pdu_tmf_req t = { 0 };
	t.opcode = PDU_OP_TMF_REQ | 0x40;
	t.function = 0x80 | (uint8_t)fn;
	pdu_set_lun(&t, pdu_lun_encode(lun));
	t.itt = htobe32(itt);
	t.ref_itt = htobe32(ref_itt);
	t.cmdsn = htobe32(cmdsn);
	fk_rx(f, &t, NULL, 0, NULL);
}

static bool all_free(struct fk *f)
{
	return f->destroyed && conn_count() == 0;
}

/* Close from the initiator's side and check that everything the connection held came back. */
static void finish(struct fk *f)
{
	if (!f->closing)
		fk_close(&f->xc);
	CU_ASSERT(pump_until(f, all_free));
	CU_ASSERT_EQUAL(bufpool_in_use(reactor_bufpool(r)), 0);
	free(f);
}

/* ---- tests ---- */

/* Finding 2: commands beyond MaxCmdSN are dropped; the window closes at QueueDepth and reopens with status. */
static void test_window(void)
{
	struct fk *f = session(false);
	uint8_t cdb[16];
	rw10(cdb, 0x2a, 0, 8);
	for (uint32_t i = 0; i < 10; i++)
		fk_cmd(f, 100 + i, cmdsn + i, false, cdb, 4096, false, true, NULL);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_R2T, 0), 4);
	const struct pdu_r2t *r2t = (const void *)last_of(f, PDU_OP_R2T)->bhs;
	CU_ASSERT_EQUAL(be32toh(r2t->max_cmdsn), be32toh(r2t->exp_cmdsn) - 1);
	CU_ASSERT_EQUAL(be32toh(r2t->exp_cmdsn), cmdsn + 4);
	/* The first WRITE's data: its status reopens one slot in that very response. */
	fk_dout(f, 100, be32toh(((const struct pdu_r2t *)f->log[1].bhs)->ttt), 0, 0, 4096, true);
	CU_ASSERT_FATAL(wait_op(f, PDU_OP_SCSI_RSP, 1));
	const struct pdu_scsi_rsp *rsp = (const void *)last_of(f, PDU_OP_SCSI_RSP)->bhs;
	CU_ASSERT_EQUAL(rsp->status, 0);
	CU_ASSERT_EQUAL(be32toh(rsp->max_cmdsn), be32toh(rsp->exp_cmdsn));
	/* A command at the reopened CmdSN is taken; one past it is not. */
	unsigned before = count_of(f, PDU_OP_R2T, 0);
	fk_cmd(f, 200, cmdsn + 5, false, cdb, 4096, false, true, NULL);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_R2T, 0), before);
	fk_cmd(f, 201, cmdsn + 4, false, cdb, 4096, false, true, NULL);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_R2T, 0), before + 1);
	finish(f);
}

/*
 * A transport that grants less (iSER on a shared receive queue): the window
 * is cut to it, shrinks without MaxCmdSN going back, and opens again.
 */
static void test_window_grant(void)
{
	grant_cap = 2;
	cmd_lun = 1;
	struct fk *f = session(true);
	const struct pdu_login_rsp *lr = (const void *)last_of(f, PDU_OP_LOGIN_RSP)->bhs;
	CU_ASSERT_EQUAL(be32toh(lr->max_cmdsn), cmdsn + 1); /* a window of 2, not QueueDepth's 4 */
	uint8_t tur[16] = { 0 };
	const struct pdu_scsi_rsp *rsp;
	/* Each TEST UNIT READY takes CmdSN cmdsn+i; its status carries the window the grant allows then. */
	static const struct { uint32_t cap, max; } step[] = {
		{ 2, 2 },          /* ExpCmdSN cmdsn+1, window 2 */
		{ UINT32_MAX, 5 }, /* granted in full: QueueDepth 4 from ExpCmdSN cmdsn+2 */
		{ 1, 5 },          /* cut to 1, but CmdSN up to cmdsn+5 was allowed: MaxCmdSN stays */
		{ 1, 5 },          /* ExpCmdSN moves up to it: the window shrinks to 2 */
	};
	for (uint32_t i = 0; i < ARRAY_SIZE(step); i++) {
		grant_cap = step[i].cap;
		fk_cmd(f, 300 + i, cmdsn + i, false, tur, 0, false, false, NULL);
		CU_ASSERT_FATAL(wait_op(f, PDU_OP_SCSI_RSP, i + 1));
		rsp = (const void *)last_of(f, PDU_OP_SCSI_RSP)->bhs;
		CU_ASSERT_EQUAL(be32toh(rsp->exp_cmdsn), cmdsn + i + 1);
		CU_ASSERT_EQUAL(be32toh(rsp->max_cmdsn), cmdsn + step[i].max);
	}
	/* One past what was advertised is dropped. */
	fk_cmd(f, 310, cmdsn + 6, false, tur, 0, false, false, NULL);
	pump(5);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_SCSI_RSP, 0), ARRAY_SIZE(step));
	grant_cap = UINT32_MAX;
	cmd_lun = 0;
	finish(f);
}

/* Finding 2: immediate commands are bounded (MaxImmediateCommands) and refused with Reject 0x06. */
static void test_immediate_cap(void)
{
	struct fk *f = session(false);
	uint8_t cdb[16];
	rw10(cdb, 0x2a, 0, 8);
	for (uint32_t i = 0; i < 6; i++)
		fk_cmd(f, 300 + i, cmdsn, true, cdb, 4096, false, true, NULL);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_R2T, 0), 2);
	CU_ASSERT_EQUAL(rejects(f, PDU_REJECT_IMMEDIATE_CMD_REJECT, 0), 4);
	finish(f);
}

/* Finding 2: past the session's buffer budget, commands wait for memory instead of allocating more. */
static void test_buffer_budget(void)
{
	struct fk *f = session(false);
	uint8_t cdb[16];
	rw10(cdb, 0x2a, 0, 1024); /* 512 KiB each; the budget is 1 MiB */
	for (uint32_t i = 0; i < 3; i++)
		fk_cmd(f, 400 + i, cmdsn + i, false, cdb, 512 * 1024, false, true, NULL);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_R2T, 0), 2);
	/* The first one's data (two R2T sequences of 256 KiB): its buffer comes back, the third starts. */
	for (uint32_t seq = 0; seq < 2; seq++) {
		const struct pdu_r2t *r2t = NULL;
		for (unsigned i = 0; i < f->nlog; i++)
			if (pdu_opcode(f->log[i].bhs) == PDU_OP_R2T && itt_of(&f->log[i]) == 400)
				r2t = (const void *)f->log[i].bhs;
		CU_ASSERT_FATAL(r2t != NULL);
		for (uint32_t k = 0; k < 4; k++)
			fk_dout(f, 400, be32toh(r2t->ttt), k, seq * 262144 + k * 65536, 65536, k == 3);
	}
	CU_ASSERT(wait_op(f, PDU_OP_R2T, 4));
	bool third = false;
	for (unsigned i = 0; i < f->nlog; i++)
		third |= pdu_opcode(f->log[i].bhs) == PDU_OP_R2T && itt_of(&f->log[i]) == 402;
	CU_ASSERT(third);
	finish(f);
}

/* Finding 3: Data-Out for a command that has not started is kept only up to its unsolicited allowance. */
static void test_stash_bound(void)
{
	struct fk *f = session(false);
	uint8_t cdb[16];
	rw10(cdb, 0x28, 0, 8);
	fk_cmd(f, 500, cmdsn + 1, false, cdb, 4096, true, false, NULL); /* waits for CmdSN cmdsn */
	for (uint32_t i = 0; i < 50; i++)
		fk_dout(f, 500, PDU_RESERVED_TAG, i, i * 65536, 65536, false);
	CU_ASSERT_EQUAL(rejects(f, PDU_REJECT_PROTOCOL_ERROR, 0), 50);
	/* The hole fills: the READ runs and is answered. */
	rw10(cdb, 0x00, 0, 0);
	fk_cmd(f, 501, cmdsn, false, cdb, 0, false, false, NULL);
	CU_ASSERT(wait_op(f, PDU_OP_SCSI_RSP, 1) && wait_op(f, PDU_OP_DATA_IN, 1));
	finish(f);
}

/* Finding 10: a duplicate early CmdSN is dropped; it must not block the queue. */
static void test_duplicate_cmdsn(void)
{
	struct fk *f = session(false);
	uint8_t tur[16] = { 0 };
	fk_cmd(f, 600, cmdsn + 1, false, tur, 0, false, false, NULL);
	fk_cmd(f, 601, cmdsn + 1, false, tur, 0, false, false, NULL);
	fk_cmd(f, 602, cmdsn + 3, false, tur, 0, false, false, NULL);
	fk_cmd(f, 603, cmdsn, false, tur, 0, false, false, NULL);
	fk_cmd(f, 604, cmdsn + 2, false, tur, 0, false, false, NULL);
	CU_ASSERT(wait_op(f, PDU_OP_SCSI_RSP, 4));
	pump(5);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_SCSI_RSP, 0), 4);
	for (unsigned i = 0; i < f->nlog; i++)
		CU_ASSERT(pdu_opcode(f->log[i].bhs) != PDU_OP_SCSI_RSP || itt_of(&f->log[i]) != 601);
	finish(f);
}

/*
 * Finding 8: a queued iSER READ without a read STag closes the connection
 * when its turn comes, which frees the task; draining the queue must not
 * touch it afterwards (AddressSanitizer catches the use after free).
 */
static void test_iser_queued_read_no_stag(void)
{
	struct fk *f = session(true);
	uint8_t cdb[16], tur[16] = { 0 };
	rw10(cdb, 0x28, 0, 8);
	cmd_lun = 1; /* RAM: the READ ends inside the drain of the queue */
	fk_cmd(f, 700, cmdsn + 1, false, cdb, 4096, true, false, NULL); /* queued, no read STag */
	fk_cmd(f, 701, cmdsn, false, tur, 0, false, false, NULL);
	cmd_lun = 0;
	CU_ASSERT(f->closing);
	finish(f);
}

/* Finding 9: a READ completing after the transport closed itself: its send fails later, everything is freed. */
static void test_close_during_send(bool iser)
{
	struct fk *f = session(iser);
	f->hold = true;
	uint8_t cdb[16];
	struct xp_rx st = { .read_stag_valid = true, .read_stag = 1, .read_va = 4096 };
	for (uint32_t i = 0; i < 4; i++) {
		rw10(cdb, 0x28, i * 128, 128);
		fk_cmd(f, 800 + i, cmdsn + i, false, cdb, 65536, true, false, iser ? &st : NULL);
	}
	/* The transport fails on its own (peer reset): the upper layer hears of it later. */
	fk_close(&f->xc);
	CU_ASSERT(pump_until(f, all_free)); /* the file LUN's reads complete meanwhile */
	CU_ASSERT(f->sends_after_close > 0 || count_of(f, PDU_OP_DATA_IN, 0) + count_of(f, PDU_OP_SCSI_RSP, 0) > 0);
	finish(f);
}

static void test_close_during_send_tcp(void)
{
	test_close_during_send(false);
}

static void test_close_during_send_iser(void)
{
	test_close_during_send(true);
}

/* Finding 10: two TMFs waiting on aborted tasks are both answered, in order. */
static void test_two_pending_tmfs(void)
{
	struct fk *f = session(false);
	uint8_t cdb[16];
	rw10(cdb, 0x28, 0, 128);
	/* All three before the reactor runs: the READ is still in the file LUN's io_uring. */
	rx_no_pump = true;
	fk_cmd(f, 900, cmdsn, false, cdb, 65536, true, false, NULL);
	fk_tmf(f, 901, PDU_TMF_ABORT_TASK, 900, 0);
	fk_tmf(f, 902, PDU_TMF_ABORT_TASK, 0x7777, 0);
	rx_no_pump = false;
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_TMF_RSP, 0), 0);
	CU_ASSERT(wait_op(f, PDU_OP_TMF_RSP, 2));
	const struct sent *a = NULL, *b = NULL;
	for (unsigned i = 0; i < f->nlog; i++)
		if (pdu_opcode(f->log[i].bhs) == PDU_OP_TMF_RSP)
			*(a ? &b : &a) = &f->log[i];
	CU_ASSERT_FATAL(a && b);
	CU_ASSERT_EQUAL(itt_of(a), 901);
	CU_ASSERT_EQUAL(a->bhs[2], PDU_TMF_RSP_COMPLETE);
	CU_ASSERT_EQUAL(itt_of(b), 902);
	CU_ASSERT_EQUAL(b->bhs[2], PDU_TMF_RSP_NO_TASK);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_DATA_IN, 0) + count_of(f, PDU_OP_SCSI_RSP, 0), 0);
	finish(f);
}

/* Data-Out owed to an aborted WRITE is taken quietly (no Reject), and the ITT is free again. */
static void test_abort_absorbs_data(void)
{
	struct fk *f = session(false);
	uint8_t cdb[16];
	rw10(cdb, 0x2a, 0, 64);
	fk_cmd(f, 1000, cmdsn, false, cdb, 32768, false, true, NULL);
	const struct pdu_r2t *r2t = (const void *)last_of(f, PDU_OP_R2T)->bhs;
	uint32_t ttt = be32toh(r2t->ttt);
	fk_tmf(f, 1001, PDU_TMF_LU_RESET, 0, 0);
	CU_ASSERT_EQUAL(last_of(f, PDU_OP_TMF_RSP)->bhs[2], PDU_TMF_RSP_COMPLETE);
	unsigned mark = f->nlog;
	for (uint32_t k = 0; k < 4; k++)
		fk_dout(f, 1000, ttt, k, k * 8192, 8192, k == 3);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_REJECT, mark), 0);
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_SCSI_RSP, mark), 0);
	finish(f);
}

/* Aborted tasks waiting for Data-Out are bounded by QueueDepth per connection: the oldest are forgotten. */
static void test_absorb_cap(void)
{
	struct fk *f = session(false);
	struct iscsi_conn *c = f->xc.upper;
	uint8_t cdb[16];
	rw10(cdb, 0x2a, 0, 64);
	uint32_t ttt[8], itt = 1100, tmf = 1200;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 4; i++, itt++) {
			fk_cmd(f, itt, cmdsn++, false, cdb, 32768, false, true, NULL);
			ttt[itt - 1100] = be32toh(((const struct pdu_r2t *)last_of(f, PDU_OP_R2T)->bhs)->ttt);
		}
		fk_tmf(f, tmf++, PDU_TMF_LU_RESET, 0, 0);
	}
	CU_ASSERT_EQUAL(c->nabsorbing, 4);
	unsigned mark = f->nlog;
	fk_dout(f, 1100, ttt[0], 0, 0, 8192, false);   /* forgotten: an unknown task now */
	CU_ASSERT_EQUAL(rejects(f, PDU_REJECT_INVALID_PDU_FIELD, mark), 1);
	mark = f->nlog;
	fk_dout(f, 1107, ttt[7], 0, 0, 8192, false);   /* still absorbed quietly */
	CU_ASSERT_EQUAL(count_of(f, PDU_OP_REJECT, mark), 0);
	finish(f);
}

/* Answers waiting for aborted tasks are bounded by MaxImmediateCommands; past it, "function rejected" at once. */
static void test_tmf_cap(void)
{
	struct fk *f = session(false);
	uint8_t cdb[16];
	rw10(cdb, 0x28, 0, 128);
	rx_no_pump = true;
	fk_cmd(f, 1300, cmdsn, false, cdb, 65536, true, false, NULL);
	fk_tmf(f, 1301, PDU_TMF_ABORT_TASK, 1300, 0);
	fk_tmf(f, 1302, PDU_TMF_ABORT_TASK, 0x7777, 0);
	fk_tmf(f, 1303, PDU_TMF_ABORT_TASK, 0x7778, 0);
	rx_no_pump = false;
	const struct sent *s = last_of(f, PDU_OP_TMF_RSP);
	CU_ASSERT_FATAL(s != NULL);
	CU_ASSERT_EQUAL(itt_of(s), 1303);
	CU_ASSERT_EQUAL(s->bhs[2], PDU_TMF_RSP_REJECTED);
	CU_ASSERT(wait_op(f, PDU_OP_TMF_RSP, 3));
	finish(f);
}

/* Finding 10: without random bytes the target refuses a CHAP login instead of sending a zero challenge. */
static void test_chap_no_random(void)
{
	struct fk *f = fk_new(false);
	cmdsn = 1;
	char keys[256];
	int n = snprintf(keys, sizeof(keys), "InitiatorName=iqn.2026-11.org.isert.unit:chap%cTargetName=" TGT
			 "%cSessionType=Normal%cAuthMethod=CHAP%c", 0, 0, 0, 0);
	struct pdu_login_req q = { 0 };
	q.opcode = PDU_OP_LOGIN_REQ | 0x40;
	q.flags = PDU_LOGIN_TRANSIT | PDU_STAGE_OPERATIONAL; /* security stage, asking to move on */
	q.itt = htobe32(1);
	fk_rx(f, &q, keys, (uint32_t)n, NULL);
	CU_ASSERT_EQUAL(last_of(f, PDU_OP_LOGIN_RSP)->bhs[36], 0);
	random_fails = true;
	n = snprintf(keys, sizeof(keys), "CHAP_A=5%c", 0);
	q.flags = 0; /* stay in the security stage */
	fk_rx(f, &q, keys, (uint32_t)n, NULL);
	random_fails = false;
	const struct sent *s = last_of(f, PDU_OP_LOGIN_RSP);
	CU_ASSERT_EQUAL(s->bhs[36] << 8 | s->bhs[37], PDU_LOGIN_TARGET_ERROR);
	CU_ASSERT(s->len == 0); /* no CHAP_C at all */
	finish(f);
}

/* Finding 1 (SendTargets): a long answer honours the initiator's MaxRecvDataSegmentLength and ends on a pair. */
static void test_sendtargets_capacity(void)
{
	struct fk *f = fk_new(false);
	cmdsn = 1;
	char keys[256];
	int n = snprintf(keys, sizeof(keys),
			 "InitiatorName=" INI "%cSessionType=Discovery%cMaxRecvDataSegmentLength=512%c", 0, 0, 0);
	fk_login_keys(f, keys, (size_t)n, PDU_STAGE_OPERATIONAL, PDU_STAGE_FULL_FEATURE);
	CU_ASSERT_EQUAL(last_of(f, PDU_OP_LOGIN_RSP)->bhs[36], 0);
	struct pdu_bhs t = { 0 };
	t.opcode = PDU_OP_TEXT_REQ | 0x40;
	t.flags = PDU_FLAG_FINAL;
	t.itt = htobe32(2);
	t.ttt = PDU_RESERVED_TAG;
	t.sn1 = htobe32(cmdsn);
	static const char st[] = "SendTargets=All";
	fk_rx(f, &t, st, sizeof(st), NULL);
	const struct sent *s = last_of(f, PDU_OP_TEXT_RSP);
	CU_ASSERT_FATAL(s != NULL);
	CU_ASSERT(s->len > 0 && s->len <= 512);
	CU_ASSERT(pdu_dlen(s->bhs) == s->len);
	finish(f);
}

/* ---- suite ---- */

static int suite_init(void)
{
	snprintf(lunfile, sizeof(lunfile), "/tmp/isertd-unit-iscsi-%d.img", (int)getpid());
	char json[8192];
	/* Long target names: the SendTargets answer must be cut to the initiator's limit. */
	char more[4096] = "";
	for (int i = 0; i < 8; i++) {
		char name[230];
		snprintf(name, sizeof(name), "iqn.2026-11.org.isert.unit:%0190d", i);
		snprintf(more + strlen(more), sizeof(more) - strlen(more),
			 ",{\"iqn\":\"%s\",\"tpgs\":[{\"tag\":1,\"demo_mode\":true,"
			 "\"portals\":[{\"ip\":\"127.0.0.1\",\"port\":3260}],\"luns\":[{\"lun\":0,\"backstore\":\"ram\"}]}]}",
			 name);
	}
	snprintf(json, sizeof(json),
		 "{\"backstores\":[{\"name\":\"ram\",\"type\":\"ram\",\"size\":\"8M\"},"
		 "{\"name\":\"file\",\"type\":\"file\",\"path\":\"%s\",\"size\":\"8M\"}],"
		 "\"targets\":[{\"iqn\":\"" TGT "\",\"tpgs\":[{\"tag\":1,\"demo_mode\":true,"
		 "\"portals\":[{\"ip\":\"127.0.0.1\",\"port\":3260},{\"ip\":\"127.0.0.1\",\"port\":3260,\"iser\":true}],"
		 "\"luns\":[{\"lun\":0,\"backstore\":\"file\"},{\"lun\":1,\"backstore\":\"ram\"}],"
		 "\"acls\":[{\"initiator\":\"" INI "\",\"mapped_luns\":[{\"mapped_lun\":0,\"tpg_lun\":0},"
		 "{\"mapped_lun\":1,\"tpg_lun\":1}]},"
		 "{\"initiator\":\"iqn.2026-11.org.isert.unit:chap\",\"chap\":{\"userid\":\"u\",\"password\":\"unit-secret-123\"},"
		 "\"mapped_luns\":[{\"mapped_lun\":0,\"tpg_lun\":0}]}],"
		 "\"params\":{\"QueueDepth\":4,\"MaxImmediateCommands\":2,\"SessionBufferMB\":1}}]}%s]}",
		 lunfile, more);
	char err[512];
	if (config_load_string(json, "<unit>", &cfg, err, sizeof(err))) {
		fprintf(stderr, "config: %s\n", err);
		return 1;
	}
	r = reactor_create(0, REACTOR_EVENT);
	if (!r || iscsi_setup(cfg, &r, 1, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return 1;
	}
	return 0;
}

static int suite_clean(void)
{
	iscsi_free(); /* the running configuration with it */
	reactor_destroy(r);
	unlink(lunfile);
	return 0;
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("iscsi", suite_init, suite_clean);
	CU_add_test(s, "CmdSN window: QueueDepth taken, the rest dropped, reopened by status", test_window);
	CU_add_test(s, "CmdSN window cut by the transport's grant: shrinks, MaxCmdSN never back, reopens",
		    test_window_grant);
	CU_add_test(s, "immediate commands capped, Reject 0x06", test_immediate_cap);
	CU_add_test(s, "session buffer budget: commands wait for memory", test_buffer_budget);
	CU_add_test(s, "Data-Out for a command not started: bounded", test_stash_bound);
	CU_add_test(s, "duplicate early CmdSN dropped, queue not blocked", test_duplicate_cmdsn);
	CU_add_test(s, "iSER: queued READ without read STag (no use after free)", test_iser_queued_read_no_stag);
	CU_add_test(s, "close while sending over TCP: everything freed", test_close_during_send_tcp);
	CU_add_test(s, "close while sending over iSER: everything freed", test_close_during_send_iser);
	CU_add_test(s, "two TMFs waiting: both answered in order", test_two_pending_tmfs);
	CU_add_test(s, "LU RESET: owed Data-Out absorbed quietly", test_abort_absorbs_data);
	CU_add_test(s, "absorbing aborted tasks: at most QueueDepth", test_absorb_cap);
	CU_add_test(s, "waiting TMF answers: at most MaxImmediateCommands", test_tmf_cap);
	CU_add_test(s, "CHAP without random bytes: login refused", test_chap_no_random);
	CU_add_test(s, "SendTargets answer within the initiator's limit", test_sendtargets_capacity);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
