/*
 * iser-hostile: an iSER initiator that misbehaves on purpose, for
 * t-isertd-iser.sh.  It sits on the transport seam alone (common/transport/transport.h),
 * not on the initiator library's task layer, so it can send what the library
 * never would.  Each connection logs in to LUN 0 of TARGET (operational stage
 * straight to full feature phase, RDMAExtensions=Yes, ImmediateData=No,
 * InitialR2T=Yes).
 *
 * iser-hostile CMD[,CMD...] ADDR PORT TARGET INITIATOR, CMD one of:
 *   no-stag         a READ at ExpCmdSN whose iSER header names no read STag
 *                   (RSV clear)
 *   no-stag-queued  the same READ at ExpCmdSN + 1, which isertd queues, then a
 *                   TEST UNIT READY at ExpCmdSN, which lets the queue drain
 *   no-write-stag   a WRITE without immediate data and without a write STag
 *                   (WSV clear)
 * isertd must close each of these connections without answering the command.
 *
 * iser-hostile reset-while-sending ADDR PORT TARGET INITIATOR ROUNDS [PARALLEL [PERIOD-MS]]
 *   ROUNDS times, each in a child process (PARALLEL at once, a batch at most
 *   every PERIOD-MS): log in, 32 READs of 256 KiB, and once the first
 *   response is back drop the connection without waiting for the rest: close
 *   and destroy it, destroy it alone, or SIGKILL the child, in turn.
 *
 * Both end with a new login whose READ with a read STag gets data and GOOD.
 * Prints "ok"/"not ok" lines and "# N failed"; exits 0 when all passed.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proto/chap.h"
#include "common/proto/pdu.h"
#include "common/reactor.h"
#include "common/proto/serial.h"
#include "common/proto/text.h"
#include "common/transport/transport.h"
#include "common/util.h"
#include "isc-check.h"

#define MAX_ITT 64
#define NREADS 32
#define READ_LEN (256u << 10)
#define BLOCK 512u        /* LUN 0 of isertd-iser.json */

struct cli {
	struct reactor *r;
	struct xp_conn *xc;
	const char *addr, *target, *initiator;
	uint16_t port;
	bool up, closed, ffp, rdma_ext;
	int err;
	char why[300];
	unsigned login_rounds;
	uint8_t isid[6];
	uint32_t cmdsn, exp_statsn, max_cmdsn;
	int status[MAX_ITT + 1];  /* per ITT: SCSI status, -1 while no response */
	unsigned nrsp;
};

/* A registered buffer of ours, as an iSER header names it. */
struct mr {
	uint32_t stag;
	uint64_t va;
};

static void pdu_done(struct xp_pdu *p, int err)
{
	(void)err;
	free(p);
}

/* A PDU carrying a copy of data; the transport frees it through done(). */
static struct xp_pdu *pdu_new(const void *data, uint32_t len)
{
	struct xp_pdu *p = calloc(1, sizeof(*p) + len);
	if (!p) {
		perror("iser-hostile");
		exit(2);
	}
	if (len)
		memcpy(p + 1, data, len);
	p->data = len ? (const uint8_t *)(p + 1) : NULL;
	p->data_len = len;
	p->done = pdu_done;
	return p;
}

static void xmit(struct cli *c, struct xp_pdu *p)
{
	pdu_set_dlen(p->bhs, p->data_len);
	if (c->xc && !c->closed)
		c->xc->ops->send(c->xc, p);
	else
		free(p);
}

/* Operational stage straight to full feature phase; no authentication. */
static void send_login(struct cli *c, bool keys)
{
	struct text_buf tb;
	text_buf_init(&tb);
	if (keys) {
		text_add(&tb, "InitiatorName", c->initiator);
		text_add(&tb, "TargetName", c->target);
		text_add(&tb, "SessionType", "Normal");
		text_add(&tb, "HeaderDigest", "None");
		text_add(&tb, "DataDigest", "None");
		text_add(&tb, "RDMAExtensions", "Yes");
		text_add(&tb, "InitiatorRecvDataSegmentLength", "8192");
		text_add(&tb, "TargetRecvDataSegmentLength", "8192");
		text_add(&tb, "MaxRecvDataSegmentLength", "8192");
		text_add(&tb, "MaxOutstandingUnexpectedPDUs", "0");
		text_add(&tb, "ImmediateData", "No");
		text_add(&tb, "InitialR2T", "Yes");
		text_add(&tb, "MaxBurstLength", "262144");
	}
	struct xp_pdu *p = pdu_new(tb.data, tb.len);
	text_buf_free(&tb);
	struct pdu_login_req *q = (void *)p->bhs;
	q->opcode = PDU_OP_LOGIN_REQ | PDU_FLAG_IMMEDIATE;
	q->flags = PDU_LOGIN_TRANSIT | PDU_STAGE_OPERATIONAL << 2 | PDU_STAGE_FULL_FEATURE;
	memcpy(q->isid, c->isid, 6);
	q->itt = htobe32(0x1000);
	q->cmdsn = htobe32(c->cmdsn);
	q->exp_statsn = htobe32(c->exp_statsn);
	xmit(c, p);
}

static void fail_conn(struct cli *c, const char *why)
{
	if (!c->why[0])
		snprintf(c->why, sizeof(c->why), "%s", why);
	if (c->xc && !c->closed)
		c->xc->ops->close(c->xc);
}

static void on_login_rsp(struct cli *c, const struct xp_rx *rx)
{
	const struct pdu_login_rsp *r = (const void *)rx->bhs;
	c->exp_statsn = be32toh(r->statsn) + 1;
	if (r->status_class || r->status_detail) {
		char why[80];
		snprintf(why, sizeof(why), "target refused the login (status 0x%02x%02x)", r->status_class,
			 r->status_detail);
		fail_conn(c, why);
		return;
	}
	struct text_list kv;
	char why[200];
	if (rx->data_len && text_parse(rx->data, rx->data_len, &kv, why, sizeof(why)) == 0) {
		const char *v = text_get(&kv, "RDMAExtensions");
		if (v)
			c->rdma_ext = !strcmp(v, "Yes");
		text_list_free(&kv);
	}
	if ((r->flags & PDU_LOGIN_TRANSIT) && PDU_LOGIN_NSG(r->flags) == PDU_STAGE_FULL_FEATURE) {
		if (!c->rdma_ext) {
			fail_conn(c, "the target did not answer RDMAExtensions=Yes");
			return;
		}
		c->cmdsn = be32toh(r->exp_cmdsn);
		c->max_cmdsn = be32toh(r->max_cmdsn);
		c->ffp = true;
		return;
	}
	/* The target wants another round: ask again to go on. */
	if (++c->login_rounds > 4)
		fail_conn(c, "the target does not let the login end");
	else
		send_login(c, false);
}

static int up_rx_bhs(struct xp_conn *xc, const uint8_t *bhs, uint8_t **dest)
{
	(void)xc;
	(void)bhs;
	*dest = NULL;
	return 0;
}

static void up_rx_pdu(struct xp_conn *xc, struct xp_rx *rx)
{
	struct cli *c = xc->upper;
	uint8_t op = pdu_opcode(rx->bhs);
	if (!c)
		return;
	if (op == PDU_OP_LOGIN_RSP) {
		on_login_rsp(c, rx);
		return;
	}
	if (op == PDU_OP_SCSI_RSP || op == PDU_OP_REJECT || op == PDU_OP_ASYNC_MSG || op == PDU_OP_LOGOUT_RSP) {
		uint32_t statsn = get_be32(rx->bhs + 24), max_cmdsn = get_be32(rx->bhs + 32);
		if (serial_ge(statsn, c->exp_statsn))
			c->exp_statsn = statsn + 1;
		if (serial_gt(max_cmdsn, c->max_cmdsn))
			c->max_cmdsn = max_cmdsn;
	}
	if (op == PDU_OP_SCSI_RSP) {
		const struct pdu_scsi_rsp *r = (const void *)rx->bhs;
		uint32_t itt = be32toh(r->itt);
		if (itt <= MAX_ITT)
			c->status[itt] = r->response ? 0x100 | r->response : r->status;
		c->nrsp++;
	} else if (op == PDU_OP_NOP_IN && get_be32(rx->bhs + 20) != PDU_RESERVED_TAG) {
		/* A ping from the target: answer with its TTT. */
		struct xp_pdu *p = pdu_new(rx->data, rx->data_len);
		struct pdu_nop *o = (void *)p->bhs;
		o->opcode = PDU_OP_NOP_OUT | PDU_FLAG_IMMEDIATE;
		o->flags = PDU_FLAG_FINAL;
		o->itt = htobe32(PDU_RESERVED_TAG);
		o->ttt = htobe32(get_be32(rx->bhs + 20));
		o->sn1 = htobe32(c->cmdsn);
		o->sn2 = htobe32(c->exp_statsn);
		xmit(c, p);
	}
}

static void up_closed(struct xp_conn *xc, int err)
{
	struct cli *c = xc->upper;
	if (!c)
		return;
	c->closed = true;
	c->err = err;
	if (!c->up && !c->why[0])
		snprintf(c->why, sizeof(c->why), "%s", xc->why[0] ? xc->why : "connect failed");
}

static void up_connected(struct xp_conn *xc)
{
	struct cli *c = xc->upper;
	c->up = true;
	int rc = xc->ops->start(xc, c->r);
	if (rc) {
		snprintf(c->why, sizeof(c->why), "cannot start the connection: %s", strerror(-rc));
		xc->ops->close(xc);
	}
}

static const struct xp_upcalls upcalls = {
	.rx_bhs = up_rx_bhs, .rx_pdu = up_rx_pdu, .closed = up_closed, .connected = up_connected,
};

/* Run the reactor until cond(c) or ms pass; returns cond(c). */
static bool wait_until(struct cli *c, bool (*cond)(const struct cli *c), unsigned ms)
{
	uint64_t end = reactor_now_ns() + (uint64_t)ms * 1000000u;
	while (!cond(c)) {
		uint64_t now = reactor_now_ns();
		if (now >= end)
			return false;
		reactor_poll_once(c->r, (int)MIN((end - now) / 1000000u + 1, 100u));
	}
	return true;
}

static bool is_closed(const struct cli *c) { return c->closed; }
static bool up_or_closed(const struct cli *c) { return c->up || c->closed; }
static bool ffp_or_closed(const struct cli *c) { return c->ffp || c->closed; }
static bool any_rsp(const struct cli *c) { return c->nrsp > 0 || c->closed; }

static void cli_init(struct cli *c, const char *addr, uint16_t port, const char *target, const char *initiator)
{
	memset(c, 0, sizeof(*c));
	c->addr = addr;
	c->port = port;
	c->target = target;
	c->initiator = initiator;
	for (int i = 0; i <= MAX_ITT; i++)
		c->status[i] = -1;
	c->r = reactor_create(0, REACTOR_EVENT);
	if (!c->r) {
		fprintf(stderr, "iser-hostile: cannot create a reactor\n");
		exit(2);
	}
}

/* Connect and log in; 0, or -1 with c->why saying why. */
static int cli_login(struct cli *c)
{
	char err[256];
	int rc = iser_transport.connect(c->addr, c->port, c->r, 10000, &c->xc, err, sizeof(err));
	if (rc) {
		snprintf(c->why, sizeof(c->why), "%s", err);
		c->xc = NULL;
		return -1;
	}
	c->xc->up = &upcalls;
	c->xc->upper = c;
	if (!wait_until(c, up_or_closed, 15000) || c->closed) {
		if (!c->why[0])
			snprintf(c->why, sizeof(c->why), "no connection within 15 s");
		return -1;
	}
	chap_random(c->isid, sizeof(c->isid));
	c->isid[0] = 0x80 | (c->isid[0] & 0x3f);
	c->cmdsn = 1;
	send_login(c, true);
	if (!wait_until(c, ffp_or_closed, 10000) || !c->ffp) {
		if (!c->why[0])
			snprintf(c->why, sizeof(c->why), c->closed ? "connection closed during login"
								    : "no login response within 10 s");
		return -1;
	}
	return 0;
}

/* Close (unless done already), wait for the closed upcall, free the connection and the reactor. */
static void cli_free(struct cli *c)
{
	if (c->xc) {
		if (!c->closed)
			c->xc->ops->close(c->xc);
		wait_until(c, is_closed, 10000);
		c->xc->upper = NULL;
		c->xc->ops->destroy(c->xc);
		c->xc = NULL;
	}
	while (reactor_poll_once(c->r, 0) > 0)
		;
	reactor_destroy(c->r);
	c->r = NULL;
}

static void cdb_rw10(uint8_t *cdb, uint8_t op, uint32_t lba, uint16_t blocks)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	put_be32(cdb + 2, lba);
	put_be16(cdb + 7, blocks);
}

/*
 * A SCSI command to LUN 0.  dir: PDU_CMD_READ, PDU_CMD_WRITE or 0.  mr: the
 * buffer's STag goes into the iSER header; NULL leaves it out (RSV/WSV clear).
 */
static void scsi_cmd(struct cli *c, uint32_t itt, uint32_t cmdsn, const uint8_t *cdb, uint8_t dir, uint32_t edtl,
		     const struct mr *mr)
{
	struct xp_pdu *p = pdu_new(NULL, 0);
	struct pdu_scsi_cmd *q = (void *)p->bhs;
	q->opcode = PDU_OP_SCSI_CMD;
	q->flags = PDU_FLAG_FINAL | dir | PDU_ATTR_SIMPLE;
	pdu_set_lun(q, pdu_lun_encode(0));
	q->itt = htobe32(itt);
	q->edtl = htobe32(edtl);
	q->cmdsn = htobe32(cmdsn);
	q->exp_statsn = htobe32(c->exp_statsn);
	memcpy(q->cdb, cdb, 16);
	if (mr && dir == PDU_CMD_READ) {
		p->read_stag_valid = true;
		p->read_stag = mr->stag;
		p->read_va = mr->va;
	} else if (mr && dir == PDU_CMD_WRITE) {
		p->write_stag_valid = true;
		p->write_stag = mr->stag;
		p->write_va = mr->va;
	}
	xmit(c, p);
}

/* A buffer the target may RDMA WRITE into, registered with the connection's device. */
static void *reg_buf(struct cli *c, size_t len, struct mr *mr, void **handle)
{
	void *b = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b == MAP_FAILED)
		return NULL;
	int rc = c->xc->ops->mem_reg(c->xc->ops->rdma_dev(c->xc), b, len, true, &mr->stag, handle);
	if (rc) {
		snprintf(c->why, sizeof(c->why), "cannot register %zu bytes: %s", len, strerror(-rc));
		munmap(b, len);
		return NULL;
	}
	mr->va = (uintptr_t)b;
	return b;
}

static bool status_known(const struct cli *c) { return c->status[2] >= 0 || c->closed; }

/* isertd still serves: a new login, then a 64 KiB READ with a read STag gets data and GOOD. */
static void check_serves(struct cli *proto, const char *after)
{
	char what[160];
	struct cli c;
	struct mr mr;
	void *h = NULL;
	uint8_t cdb[16];
	snprintf(what, sizeof(what), "after %s: a new login, a 64 KiB READ with a read STag gets GOOD and data", after);
	cli_init(&c, proto->addr, proto->port, proto->target, proto->initiator);
	uint8_t *b = NULL;
	if (cli_login(&c) == 0 && (b = reg_buf(&c, 65536, &mr, &h))) {
		memset(b, 0xa5, 65536);
		cdb_rw10(cdb, 0x28, 0, 65536 / BLOCK);
		scsi_cmd(&c, 2, c.cmdsn++, cdb, PDU_CMD_READ, 65536, &mr);
		if (!wait_until(&c, status_known, 10000))
			snprintf(c.why, sizeof(c.why), "no response within 10 s");
		else if (c.closed)
			snprintf(c.why, sizeof(c.why), "isertd closed the connection (error %d)", c.err);
		else if (c.status[2] != 0)
			snprintf(c.why, sizeof(c.why), "status 0x%x", c.status[2]);
		else {
			/* The RAM LUN may hold zeroes or data, never our poison across a whole 64 KiB. */
			bool placed = false;
			for (unsigned i = 0; i < 65536 && !placed; i++)
				placed = b[i] != 0xa5;
			if (!placed)
				snprintf(c.why, sizeof(c.why), "GOOD, but the buffer still holds the poison");
		}
	}
	check(what, !c.why[0], "%s", c.why);
	cli_free(&c);
	if (h)
		iser_transport.mem_dereg(h);
	if (b)
		munmap(b, 65536);
}

/* Log in, send the crafted command(s), expect isertd to close the connection. */
static void crafted(struct cli *proto, const char *cmd)
{
	struct cli conn, *c = &conn;
	cli_init(c, proto->addr, proto->port, proto->target, proto->initiator);
	uint8_t cdb[16];
	const char *desc;
	if (cli_login(c)) {
		check(cmd, false, "%s", c->why);
		cli_free(c);
		return;
	}
	if (!strcmp(cmd, "no-stag")) {
		desc = "a READ at ExpCmdSN without a read STag: isertd closes the connection, no response";
		cdb_rw10(cdb, 0x28, 0, 8);
		scsi_cmd(c, 1, c->cmdsn++, cdb, PDU_CMD_READ, 8 * BLOCK, NULL);
	} else if (!strcmp(cmd, "no-stag-queued")) {
		/* ExpCmdSN + 1: isertd keeps it until the command at ExpCmdSN came. */
		cdb_rw10(cdb, 0x28, 0, 8);
		scsi_cmd(c, 1, c->cmdsn + 1, cdb, PDU_CMD_READ, 8 * BLOCK, NULL);
		wait_until(c, is_closed, 300);
		check("a READ without a read STag at ExpCmdSN + 1 waits in the queue", !c->closed && c->nrsp == 0,
		      "%s", c->closed ? "the connection closed already" : "it was answered");
		desc = "then a TEST UNIT READY at ExpCmdSN: the queue drains, isertd closes the connection, "
		       "no response to the READ";
		memset(cdb, 0, 16);
		scsi_cmd(c, 2, c->cmdsn, cdb, 0, 0, NULL);
		c->cmdsn += 2;
	} else {
		desc = "a WRITE without immediate data and without a write STag: isertd closes the connection, "
		       "no response";
		cdb_rw10(cdb, 0x2a, 4096, 8);
		scsi_cmd(c, 1, c->cmdsn++, cdb, PDU_CMD_WRITE, 8 * BLOCK, NULL);
	}
	char why[200] = "";
	if (!wait_until(c, is_closed, 10000))
		snprintf(why, sizeof(why), "the connection is still up after 10 s (%u responses)", c->nrsp);
	else if (c->status[1] >= 0)
		snprintf(why, sizeof(why), "the command was answered (status 0x%x) before the close", c->status[1]);
	check(desc, !why[0], "%s", why);
	cli_free(c);
}

/*
 * One round in a child process: log in, READs in flight, drop the connection
 * once a response is back.  Writes how many responses had come to fd, then
 * ends as way says: 0 close + destroy, 1 destroy alone, 2 SIGKILL.  Every
 * READ lands in the same buffer: what matters is what isertd has in flight.
 */
static void __attribute__((noreturn)) reset_round(struct cli *c, int fd, int way)
{
	struct mr mr;
	void *h;
	uint8_t cdb[16];
	int n = -1;
	if (cli_login(c) || !reg_buf(c, READ_LEN, &mr, &h)) {
		fprintf(stderr, "iser-hostile: round: %s\n", c->why);
		if (write(fd, &n, sizeof(n)) < 0)
			_exit(3);
		_exit(1);
	}
	uint32_t window = c->max_cmdsn - c->cmdsn + 1;
	for (uint32_t i = 0; i < NREADS && i < window; i++) {
		cdb_rw10(cdb, 0x28, i * (READ_LEN / BLOCK), READ_LEN / BLOCK);
		scsi_cmd(c, i + 1, c->cmdsn++, cdb, PDU_CMD_READ, READ_LEN, &mr);
	}
	wait_until(c, any_rsp, 5000);
	n = c->closed ? -2 : (int)c->nrsp;
	if (write(fd, &n, sizeof(n)) < 0)
		_exit(3);
	if (way == 2)
		kill(getpid(), SIGKILL);
	if (way == 0)
		c->xc->ops->close(c->xc);
	/* Destroy at once: the QP and the cm_id go without waiting for any flush. */
	c->xc->upper = NULL;
	c->xc->ops->destroy(c->xc);
	while (reactor_poll_once(c->r, 0) > 0)
		;
	_exit(0);
}

/* Start round i in a child; returns the read end of its pipe, or -1. */
static int round_start(const struct cli *proto, unsigned i, pid_t *pid)
{
	int pfd[2];
	*pid = -1;
	if (pipe(pfd))
		return -1;
	*pid = fork();
	if (*pid == 0) {
		struct cli c;
		close(pfd[0]);
		cli_init(&c, proto->addr, proto->port, proto->target, proto->initiator);
		reset_round(&c, pfd[1], (int)(i % 3));
	}
	close(pfd[1]);
	if (*pid < 0) {
		close(pfd[0]);
		return -1;
	}
	return pfd[0];
}

/* The responses a round had before its drop; -1: it failed; -2: isertd closed the connection first. */
static int round_end(int fd, pid_t pid)
{
	int n = -1, st;
	if (fd < 0 || read(fd, &n, sizeof(n)) != sizeof(n))
		n = -1;
	if (fd >= 0)
		close(fd);
	if (pid > 0)
		waitpid(pid, &st, 0);
	return n;
}

/* ROUNDS rounds, PARALLEL children at a time, a batch at most every PERIOD ms. */
static void reset_while_sending(struct cli *proto, unsigned rounds, unsigned parallel, unsigned period)
{
	static const char *const ways[] = { "close+destroy", "destroy", "SIGKILL" };
	unsigned done = 0, midway = 0;
	long total_rsp = 0;
	char why[300] = "";
	fflush(stdout);
	uint64_t next = reactor_now_ns();
	for (unsigned i = 0; i < rounds; i += parallel) {
		uint64_t now = reactor_now_ns();
		if (now < next)
			usleep((useconds_t)((next - now) / 1000));
		next = reactor_now_ns() + (uint64_t)period * 1000000u;
		int fds[64];
		pid_t pids[64];
		unsigned k = MIN(MIN(parallel, rounds - i), 64u);
		for (unsigned j = 0; j < k; j++)
			fds[j] = round_start(proto, i + j, &pids[j]);
		for (unsigned j = 0; j < k; j++) {
			int n = round_end(fds[j], pids[j]);
			if (n < 0 && !why[0])
				snprintf(why, sizeof(why), "round %u (%s): %s", i + j + 1, ways[(i + j) % 3],
					 n == -2 ? "isertd closed the connection" : "login or registration failed");
			done += n >= 0;
			total_rsp += MAX(n, 0);
			midway += n >= 0 && n < NREADS;
		}
	}
	printf("# %u rounds, %u dropped with READs still in flight, %.1f of %d responses back on average\n",
	       done, midway, done ? (double)total_rsp / done : 0.0, NREADS);
	if (!why[0] && !midway)
		snprintf(why, sizeof(why), "all %d responses came before every drop: nothing in flight", NREADS);
	char what[200];
	snprintf(what, sizeof(what),
		 "%u rounds (%u at a time, at most every %u ms): %d READs of %u KiB, the connection dropped "
		 "while isertd sends (%s, %s, %s in turn)",
		 rounds, parallel, period, NREADS, READ_LEN >> 10, ways[0], ways[1], ways[2]);
	check(what, !why[0], "%s", why);
	check_serves(proto, "the dropped connections");
}

int main(int argc, char **argv)
{
	static const char *const crafts[] = { "no-stag", "no-stag-queued", "no-write-stag" };
	bool reset = argc > 1 && !strcmp(argv[1], "reset-while-sending");
	if (argc < 6 || (reset && argc < 7)) {
		fprintf(stderr, "usage: iser-hostile no-stag|no-stag-queued|no-write-stag[,...] ADDR PORT TARGET "
				"INITIATOR\n       iser-hostile reset-while-sending ADDR PORT TARGET INITIATOR ROUNDS "
				"[PARALLEL [PERIOD-MS]]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* No reactor (and so no verbs state) here: reset-while-sending forks its rounds. */
	struct cli proto = { .addr = argv[2], .port = (uint16_t)atoi(argv[3]), .target = argv[4],
			     .initiator = argv[5] };
	if (reset) {
		unsigned rounds = (unsigned)atoi(argv[6]), parallel = argc > 7 ? (unsigned)atoi(argv[7]) : 1;
		unsigned period = argc > 8 ? (unsigned)atoi(argv[8]) : 0;
		reset_while_sending(&proto, rounds, parallel ? parallel : 1, period);
	} else {
		char list[256];
		snprintf(list, sizeof(list), "%s", argv[1]);
		for (char *save, *cmd = strtok_r(list, ",", &save); cmd; cmd = strtok_r(NULL, ",", &save)) {
			size_t i = 0;
			while (i < ARRAY_SIZE(crafts) && strcmp(cmd, crafts[i]))
				i++;
			if (i == ARRAY_SIZE(crafts)) {
				fprintf(stderr, "iser-hostile: unknown command '%s'\n", cmd);
				return 2;
			}
			crafted(&proto, crafts[i]);
		}
		check_serves(&proto, argv[1]);
	}
	printf("# %u failed\n", check_failed);
	return check_failed ? 1 : 0;
}
