/*
 * The fake target of fake_target.h.  Blocking sockets, one connection at a
 * time: enough iSCSI for our initiator to log in (no CHAP, no digests),
 * discover, run TEST UNIT READY, INQUIRY, READ CAPACITY(16), REPORT LUNS
 * and WRITE(16) through R2T, and log out; then each scenario's misbehaviour.
 */
#include "fake_target.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proto/pdu.h"
#include "common/util.h"

struct conn {
	int fd;
	const struct ft_config *cfg;
	struct ft_stats *st;
	uint32_t statsn, exp_cmdsn;
	bool discovery;
	uint32_t luns_listed;  /* LUNs the last REPORT LUNS named */
	uint32_t write_itt;    /* the WRITE waiting for its Data-Out */
	uint32_t write_len, write_next, write_r2tsn; /* its length, the next offset to ask for */
	bool write_pending;
};

static int read_full(int fd, void *p, size_t n)
{
	uint8_t *b = p;
	while (n) {
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_full(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;
	while (n) {
		ssize_t r = send(fd, b, n, MSG_NOSIGNAL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* One PDU (no digests are negotiated); *data is malloc'd, NUL-terminated. */
static int read_pdu(struct conn *c, uint8_t *bhs, uint8_t **data, uint32_t *dlen)
{
	*data = NULL;
	if (read_full(c->fd, bhs, PDU_BHS_LEN))
		return -1;
	uint32_t ahs = pdu_ahs_bytes(bhs), n = pdu_dlen(bhs);
	uint8_t *d = malloc(ahs + n + pdu_pad(n) + 1);
	if (!d || read_full(c->fd, d, ahs + n + pdu_pad(n))) {
		free(d);
		return -1;
	}
	memmove(d, d + ahs, n);
	d[n] = 0;
	*data = d;
	*dlen = n;
	return 0;
}

static int send_pdu(struct conn *c, uint8_t *bhs, const void *data, uint32_t len)
{
	static const uint8_t pad[4];
	pdu_set_dlen(bhs, len);
	if (write_full(c->fd, bhs, PDU_BHS_LEN))
		return -1;
	if (len && (write_full(c->fd, data, len) || write_full(c->fd, pad, pdu_pad(len))))
		return -1;
	return 0;
}

/* The fields every target PDU carries: StatSN (taken when it advances), ExpCmdSN, MaxCmdSN. */
static void sn(struct conn *c, uint8_t *bhs, bool advance)
{
	struct pdu_bhs *b = (void *)bhs;
	b->sn1 = htobe32(advance ? c->statsn++ : c->statsn);
	b->sn2 = htobe32(c->exp_cmdsn);
	b->sn3 = htobe32(c->exp_cmdsn + 31);
}

/* ---- login ---- */

static const char *answer(const struct conn *c, const char *k, char *buf, size_t len)
{
	static const struct { const char *key, *value; } fixed[] = {
		{ "HeaderDigest", "None" }, { "DataDigest", "None" }, { "AuthMethod", "None" },
		{ "InitialR2T", "Yes" }, { "ImmediateData", "No" }, { "FirstBurstLength", "65536" },
		{ "MaxOutstandingR2T", "1" }, { "MaxConnections", "1" }, { "ErrorRecoveryLevel", "0" },
		{ "DefaultTime2Wait", "2" }, { "DefaultTime2Retain", "0" }, { "DataPDUInOrder", "Yes" },
		{ "DataSequenceInOrder", "Yes" }, { "IFMarker", "No" }, { "OFMarker", "No" },
	};
	if (!strcmp(k, "InitiatorName") || !strcmp(k, "InitiatorAlias") || !strcmp(k, "SessionType") ||
	    !strcmp(k, "TargetName"))
		return NULL;
	if (!strcmp(k, "MaxRecvDataSegmentLength")) {
		snprintf(buf, len, "%u", c->cfg->mrdsl);
		return buf;
	}
	if (!strcmp(k, "MaxBurstLength")) {
		snprintf(buf, len, "%u", c->cfg->max_burst);
		return buf;
	}
	for (size_t i = 0; i < ARRAY_SIZE(fixed); i++)
		if (!strcmp(k, fixed[i].key))
			return fixed[i].value;
	return "NotUnderstood";
}

/* Answer every key of a login request's text; note a discovery session. */
static uint32_t login_answers(struct conn *c, const uint8_t *data, uint32_t dlen, char *out, uint32_t cap)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < dlen;) {
		const char *kv = (const char *)data + i;
		size_t l = strnlen(kv, dlen - i);
		char key[64], val[32];
		const char *eq = memchr(kv, '=', l);
		if (eq && (size_t)(eq - kv) < sizeof(key)) {
			memcpy(key, kv, (size_t)(eq - kv));
			key[eq - kv] = 0;
			if (!strcmp(key, "SessionType") && !strncmp(eq + 1, "Discovery", 9))
				c->discovery = true;
			const char *a = answer(c, key, val, sizeof(val));
			if (a && n + strlen(key) + strlen(a) + 2 <= cap)
				n += (uint32_t)snprintf(out + n, cap - n, "%s=%s", key, a) + 1;
		}
		i += (uint32_t)l + 1;
	}
	return n;
}

static int login(struct conn *c)
{
	for (;;) {
		uint8_t bhs[PDU_BHS_LEN], *data;
		uint32_t dlen;
		if (read_pdu(c, bhs, &data, &dlen))
			return -1;
		if (pdu_opcode(bhs) != PDU_OP_LOGIN_REQ) {
			free(data);
			return -1;
		}
		const struct pdu_login_rsp *q = (const void *)bhs;
		char text[2048];
		uint32_t tlen = login_answers(c, data, dlen, text, sizeof(text));
		free(data);
		bool final = (q->flags & PDU_LOGIN_TRANSIT) && PDU_LOGIN_NSG(q->flags) == PDU_STAGE_FULL_FEATURE;
		c->exp_cmdsn = get_be32(bhs + 24); /* the login's CmdSN: the first command carries it */
		uint8_t rsp[PDU_BHS_LEN] = { 0 };
		struct pdu_login_rsp *r = (void *)rsp;
		r->opcode = PDU_OP_LOGIN_RSP;
		r->flags = q->flags & (PDU_LOGIN_TRANSIT | 0x0f);
		memcpy(r->isid, q->isid, 6);
		r->tsih = htobe16(final ? 1 : 0);
		r->itt = q->itt;
		sn(c, rsp, true);
		/* Counted before the answer goes: the initiator may look as soon as it is logged in. */
		if (final && c->discovery)
			c->st->discovery_logins++;
		else if (final)
			c->st->logins++;
		if (send_pdu(c, rsp, text, tlen))
			return -1;
		if (final)
			return 0;
	}
}

/* ---- full feature phase ---- */

static int send_status(struct conn *c, uint32_t itt, const void *data, uint32_t len, uint32_t edtl)
{
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	if (!len) {
		struct pdu_scsi_rsp *r = (void *)bhs;
		r->opcode = PDU_OP_SCSI_RSP;
		r->flags = PDU_FLAG_FINAL;
		r->itt = htobe32(itt);
		sn(c, bhs, true);
		return send_pdu(c, bhs, NULL, 0);
	}
	struct pdu_data_in *d = (void *)bhs;
	uint32_t n = MIN(len, edtl);
	d->opcode = PDU_OP_DATA_IN;
	d->flags = PDU_FLAG_FINAL | PDU_DATAIN_STATUS | (n < edtl ? PDU_RSP_UNDERFLOW : 0);
	d->itt = htobe32(itt);
	d->ttt = htobe32(PDU_RESERVED_TAG);
	d->resid = htobe32(edtl - n);
	sn(c, bhs, true);
	return send_pdu(c, bhs, data, n);
}

static int send_r2t(struct conn *c, uint32_t itt, uint32_t r2tsn, uint32_t off, uint32_t len)
{
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_r2t *r = (void *)bhs;
	r->opcode = PDU_OP_R2T;
	r->flags = PDU_FLAG_FINAL;
	r->itt = htobe32(itt);
	r->ttt = htobe32(0x1000 + r2tsn);
	r->r2tsn = htobe32(r2tsn);
	r->offset = htobe32(off);
	r->length = htobe32(len);
	sn(c, bhs, false);
	c->st->r2ts_sent++;
	return send_pdu(c, bhs, NULL, 0);
}

static int send_ping(struct conn *c, uint32_t ttt, uint32_t len)
{
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_nop *n = (void *)bhs;
	n->opcode = PDU_OP_NOP_IN;
	n->flags = PDU_FLAG_FINAL;
	n->itt = htobe32(PDU_RESERVED_TAG);
	n->ttt = htobe32(ttt);
	sn(c, bhs, false);
	uint8_t *data = len ? calloc(1, len) : NULL;
	if (len && !data)
		return -1;
	int rc = send_pdu(c, bhs, data, len);
	free(data);
	c->st->pings_sent++;
	return rc;
}

/* A target that stopped reading: wait (without reading) until the initiator goes. */
static void wait_gone(struct conn *c)
{
	struct pollfd p = { c->fd, POLLRDHUP, 0 };
	for (int i = 0; i < 600; i++)
		if (poll(&p, 1, 100) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
			return;
}

static int report_luns(struct conn *c, uint32_t itt, const uint8_t *cdb, uint32_t edtl)
{
	bool cut = c->cfg->sc == FT_LUNS_CUT;
	uint32_t sent = cut ? FT_LUNS_SENT : 2;
	/* The first answer needs a larger buffer, the second claims more than it carries. */
	uint32_t claimed = cut && c->st->report_luns > 0 ? FT_LUNS_CLAIMED : sent;
	c->st->report_luns++;
	uint32_t alloc = MIN(get_be32(cdb + 6), edtl);
	uint8_t *buf = calloc(1, 8 + 8 * sent);
	if (!buf)
		return -1;
	put_be32(buf, 8 * claimed);
	for (uint32_t i = 0; i < sent; i++)
		put_be64(buf + 8 + 8 * i, pdu_lun_encode(i));
	c->luns_listed = sent;
	int rc = send_status(c, itt, buf, MIN(alloc, 8 + 8 * sent), edtl);
	free(buf);
	return rc;
}

static int write_cmd(struct conn *c, uint32_t itt, uint32_t edtl)
{
	const struct ft_config *cfg = c->cfg;
	uint32_t burst = MIN(edtl, cfg->max_burst);
	c->write_itt = itt;
	c->write_len = edtl;
	c->write_next = burst;
	c->write_r2tsn = 1;
	c->write_pending = true;
	switch (cfg->sc) {
	case FT_R2T_FLOOD:
		for (uint32_t i = 0; i < cfg->count; i++)
			if (send_r2t(c, itt, i, 0, burst))
				return -1;
		wait_gone(c);
		return -1;
	case FT_R2T_RANGE:
		return send_r2t(c, itt, 0, 0, edtl + 512);
	case FT_R2T_BURST:
		return send_r2t(c, itt, 0, 0, MIN(edtl, 2 * cfg->max_burst));
	case FT_R2T_SN:
		return send_r2t(c, itt, 3, 0, burst);
	case FT_CLOSE_AT_WRITE:
		if (c->st->logins > 1)   /* only the first session's first write: the next one is served */
			return send_r2t(c, itt, 0, 0, burst);
		/* The initiator is sending the burst: closing with its data unread sends a reset. */
		send_r2t(c, itt, 0, 0, burst);
		return -1;
	default:
		return send_r2t(c, itt, 0, 0, burst);
	}
}

static int scsi_cmd(struct conn *c, const uint8_t *bhs)
{
	static const uint8_t inquiry[36] = { 0, 0, 5, 2, 31, 0, 0, 0, 'F', 'A', 'K', 'E', ' ', ' ', ' ', ' ',
					     'H', 'O', 'S', 'T', 'I', 'L', 'E', ' ', ' ', ' ', ' ', ' ',
					     ' ', ' ', ' ', ' ', '0', '0', '0', '1' };
	const struct pdu_scsi_cmd *q = (const void *)bhs;
	uint32_t itt = be32toh(q->itt), edtl = be32toh(q->edtl);
	uint64_t lun = pdu_lun_decode(pdu_lun(bhs));
	if (!pdu_immediate(bhs))
		c->exp_cmdsn = be32toh(q->cmdsn) + 1;
	c->st->scsi_cmds++;
	if (q->cdb[0] != 0xa0 && lun >= (c->luns_listed ? c->luns_listed : 2))
		c->st->unlisted_lun_cmds++;
	switch (q->cdb[0]) {
	case 0x12:
		return send_status(c, itt, inquiry, sizeof(inquiry), edtl);
	case 0x9e: {
		uint8_t cap[32] = { 0 };
		put_be64(cap, 2047);
		put_be32(cap + 8, 512);
		return send_status(c, itt, cap, sizeof(cap), edtl);
	}
	case 0xa0:
		return report_luns(c, itt, q->cdb, edtl);
	case 0x8a:
		return write_cmd(c, itt, edtl);
	default:
		return send_status(c, itt, NULL, 0, 0);
	}
}

static int nop_out(struct conn *c, const uint8_t *bhs, uint32_t dlen)
{
	const struct pdu_nop *q = (const void *)bhs;
	if (q->ttt != htobe32(PDU_RESERVED_TAG)) {
		c->st->echoes++;
		if (dlen > c->st->echo_len_max)
			c->st->echo_len_max = dlen;
	}
	if (q->itt == htobe32(PDU_RESERVED_TAG))
		return 0;
	uint8_t rsp[PDU_BHS_LEN] = { 0 };
	struct pdu_nop *n = (void *)rsp;
	n->opcode = PDU_OP_NOP_IN;
	n->flags = PDU_FLAG_FINAL;
	n->itt = q->itt;
	n->ttt = htobe32(PDU_RESERVED_TAG);
	sn(c, rsp, true);
	return send_pdu(c, rsp, NULL, 0);
}

static int text_req(struct conn *c, const uint8_t *bhs)
{
	char text[256];
	int n = snprintf(text, sizeof(text), "TargetName=%s%cTargetAddress=127.0.0.1:%u,1", FT_TARGET, 0,
			 c->cfg->port);
	uint8_t rsp[PDU_BHS_LEN] = { 0 };
	struct pdu_text *r = (void *)rsp;
	r->opcode = PDU_OP_TEXT_RSP;
	r->flags = PDU_FLAG_FINAL;
	r->itt = ((const struct pdu_text *)bhs)->itt;
	r->ttt = htobe32(PDU_RESERVED_TAG);
	sn(c, rsp, true);
	return send_pdu(c, rsp, text, (uint32_t)n + 1);
}

static int logout(struct conn *c, const uint8_t *bhs)
{
	uint8_t rsp[PDU_BHS_LEN] = { 0 };
	rsp[0] = PDU_OP_LOGOUT_RSP;
	rsp[1] = PDU_FLAG_FINAL;
	memcpy(rsp + 16, bhs + 16, 4);
	sn(c, rsp, true);
	send_pdu(c, rsp, NULL, 0);
	return -1;
}

/* What a scenario does as soon as the session is up; -1 ends the connection. */
static int after_login(struct conn *c)
{
	const struct ft_config *cfg = c->cfg;
	switch (cfg->sc) {
	case FT_PING_FLOOD:
		for (uint32_t i = 0; i < cfg->count; i++)
			if (send_ping(c, 0x100 + i, cfg->len))
				return -1;
		wait_gone(c);
		return -1;
	case FT_NOP_BIG:
	case FT_NOP_ECHO:
		return send_ping(c, 0x55, cfg->len);
	default:
		return 0;
	}
}

static void serve(struct conn *c)
{
	if (login(c))
		return;
	if (!c->discovery && after_login(c))
		return;
	for (;;) {
		uint8_t bhs[PDU_BHS_LEN], *data;
		uint32_t dlen;
		if (read_pdu(c, bhs, &data, &dlen))
			return;
		int rc = 0;
		switch (pdu_opcode(bhs)) {
		case PDU_OP_NOP_OUT:
			rc = nop_out(c, bhs, dlen);
			break;
		case PDU_OP_SCSI_CMD:
			rc = scsi_cmd(c, bhs);
			break;
		case PDU_OP_DATA_OUT:
			/* The last PDU of an R2T's sequence: the next R2T, or (also after a hostile one) the status. */
			if (!pdu_final(bhs) || !c->write_pending)
				break;
			if (c->cfg->sc == FT_NORMAL && c->write_next < c->write_len) {
				uint32_t n = MIN(c->write_len - c->write_next, c->cfg->max_burst);
				rc = send_r2t(c, c->write_itt, c->write_r2tsn++, c->write_next, n);
				c->write_next += n;
				break;
			}
			c->write_pending = false;
			rc = send_status(c, c->write_itt, NULL, 0, 0);
			break;
		case PDU_OP_TEXT_REQ:
			rc = text_req(c, bhs);
			break;
		case PDU_OP_LOGOUT_REQ:
			rc = logout(c, bhs);
			break;
		default:
			break;
		}
		free(data);
		if (rc)
			return;
	}
}

static void child(int lfd, const struct ft_config *cfg, struct ft_stats *st)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		/* A BHS and its data go in two writes: without this, each answer waits for a delayed ACK. */
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct conn c = { .fd = fd, .cfg = cfg, .st = st };
		serve(&c);
		close(fd);
	}
}

struct ft_stats *ft_start(const struct ft_config *cfg, pid_t *pid)
{
	struct ft_stats *st = mmap(NULL, sizeof(*st), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (st == MAP_FAILED)
		return NULL;
	memset(st, 0, sizeof(*st));
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	/* A target that stops reading should not hide the initiator's sends in its own kernel buffer. */
	int rcvbuf = 16384;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(cfg->port) };
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    setsockopt(lfd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf)) ||
	    bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 8)) {
		int e = errno;
		if (lfd >= 0)
			close(lfd);
		munmap(st, sizeof(*st));
		errno = e;
		return NULL;
	}
	fflush(NULL);
	*pid = fork();
	if (*pid == 0)
		child(lfd, cfg, st);
	close(lfd);
	if (*pid < 0) {
		munmap(st, sizeof(*st));
		return NULL;
	}
	return st;
}

void ft_stop(pid_t pid, struct ft_stats *st)
{
	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	if (st)
		munmap(st, sizeof(*st));
}
