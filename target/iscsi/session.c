/*
 * Sessions and the SCSI command path: the CmdSN window (RFC 7143 sec.
 * 3.2.2.1) of QueueDepth slots, a cap on immediate commands, the session's
 * buffer memory budget, immediate and unsolicited data, R2T and Data-Out
 * checks, Data-In split to the initiator's MaxRecvDataSegmentLength with
 * status in the last Data-In, and the SCSI Response.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/log.h"
#include "common/reactor.h"
#include "common/proto/serial.h"
#include "common/util.h"
#include "target/iscsi/iscsi.h"
#include "target/scsi/alua/alua.h"

/* The most one command allocates: the SCSI layer refuses larger transfers (VPD B0). */
#define SESSION_CMD_BUF_MAX (16u << 20)

static void task_scsi_done(struct scsi_cmd *cmd);
static void task_start(struct iscsi_task *t, const uint8_t *data, uint32_t len, bool busy);
static void data_out_pdu(struct iscsi_task *t, const uint8_t *bhs, const uint8_t *data, uint32_t len, bool placed);

const struct iscsi_lun *session_lun(const struct iscsi_session *s, uint64_t lun)
{
	for (size_t i = 0; i < s->nluns; i++)
		if (s->luns[i].lun == lun)
			return &s->luns[i];
	return NULL;
}

/*
 * Every command taken in CmdSN order holds a slot until its status is on
 * its way (or it is aborted), so the window is QueueDepth minus the slots
 * held; with all held it is closed (MaxCmdSN = ExpCmdSN - 1).  A transport
 * whose receives are shared (iSER with a shared receive queue) may grant
 * less: the window then shrinks as ExpCmdSN moves up to a MaxCmdSN that
 * stays, since MaxCmdSN never goes back (sec. 3.2.2.1: an initiator never
 * lowers its own).  Here: the window's end as last sent, which commands are
 * checked against.
 */
static uint32_t session_max_cmdsn(const struct iscsi_session *s)
{
	return s->max_cmdsn;
}

uint32_t session_next_max_cmdsn(struct iscsi_session *s)
{
	struct xp_conn *xp = s->conn ? s->conn->xp : NULL;
	uint32_t open = s->queue_depth - s->active;
	/* Commands the initiator may send already: ExpCmdSN up to the MaxCmdSN it has. */
	uint32_t floor = serial_lt(s->max_cmdsn, s->exp_cmdsn) ? 0 : s->max_cmdsn - s->exp_cmdsn + 1;
	if (xp && xp->ops->grant)
		open = xp->ops->grant(xp, floor, open);
	s->max_cmdsn = s->exp_cmdsn + MAX(open, floor) - 1;
	return s->max_cmdsn;
}

static void slot_take(struct iscsi_task *t)
{
	t->slot = true;
	t->conn->sess->active++;
}

enum go { GO_NOW, GO_WAIT, GO_BUSY };

/*
 * May a command whose turn came have its buffers now?  Past the session's
 * budget it waits for buffers of its own session to come back; a full
 * reactor pool makes it wait too, or, when the session holds nothing that
 * could come back, answers BUSY (the initiator retries it).
 */
static enum go may_start(const struct iscsi_session *s, const struct iscsi_task *t)
{
	size_t need = bufpool_buf_size(MIN(t->edtl, SESSION_CMD_BUF_MAX));
	bool mine = s->buf_bytes > 0;
	if (mine && s->buf_bytes + need > s->buf_budget)
		return GO_WAIT;
	if (!bufpool_has_room(reactor_bufpool(t->conn->r), need))
		return mine ? GO_WAIT : GO_BUSY;
	return GO_NOW;
}

/* A task that waited (for its CmdSN turn or for memory) starts: its data and Data-Out come from the stash. */
static void task_begin(struct iscsi_task *t, bool busy)
{
	struct stash *first = task_unstash(t);
	/* Starting may end the task at once (an iSER READ without a read STag closes the connection). */
	t->refs++;
	task_start(t, first ? first->data : NULL, first ? first->len : 0, busy);
	if (first)
		task_stash_free(t, first);
	/* Data-Out that arrived while it waited. */
	while (t->stash && (t->state == TASK_DATA_OUT || t->absorbing) && t->conn->state == CONN_FULL) {
		struct stash *d = task_unstash(t);
		data_out_pdu(t, d->bhs, d->data, d->len, false);
		task_stash_free(t, d);
	}
	task_put(t);
}

static void park(struct iscsi_session *s, struct iscsi_task *t)
{
	t->state = TASK_QUEUED;
	t->qnext = NULL;
	if (s->bufq_tail)
		s->bufq_tail->qnext = t;
	else
		s->bufq = t;
	s->bufq_tail = t;
}

/* Its turn came: start it now, or park it (first come, first served) until buffers allow. */
static void session_go(struct iscsi_task *t, const uint8_t *bhs, const uint8_t *data, uint32_t len, bool stashed)
{
	struct iscsi_session *s = t->conn->sess;
	enum go g = s->bufq ? GO_WAIT : may_start(s, t);
	if (g != GO_WAIT) {
		if (stashed)
			task_begin(t, g == GO_BUSY);
		else
			task_start(t, data, len, g == GO_BUSY);
		return;
	}
	if (!stashed && task_stash(t, bhs, data, len, false)) {
		conn_close(t->conn);
		return;
	}
	park(s, t);
}

static void session_resume(void *arg)
{
	struct iscsi_conn *c = arg;
	struct iscsi_session *s = c->sess;
	c->kick_scheduled = false;
	while (s && s->bufq && c->state == CONN_FULL) {
		struct iscsi_task *t = s->bufq;
		enum go g = t->aborted ? GO_NOW : may_start(s, t);
		if (g == GO_WAIT)
			return;
		s->bufq = t->qnext;
		if (!s->bufq)
			s->bufq_tail = NULL;
		if (t->aborted)
			task_put(t);
		else
			task_begin(t, g == GO_BUSY);
	}
}

void session_bufs_freed(struct iscsi_session *s)
{
	struct iscsi_conn *c = s->conn;
	/* Deferred: this runs inside task_put(), deep in completions. */
	if (s->bufq && c && !c->kick_scheduled && c->state == CONN_FULL && !reactor_defer(c->r, session_resume, c))
		c->kick_scheduled = true;
}

/* Run queued commands whose turn came. */
static void drain_cmdq(struct iscsi_session *s)
{
	while (s->cmdq && serial_le(s->cmdq->cmdsn, s->exp_cmdsn) && s->conn->state == CONN_FULL) {
		struct iscsi_task *t = s->cmdq;
		s->cmdq = t->qnext;
		if (t->cmdsn != s->exp_cmdsn || t->aborted) {
			/* Aborted while it waited (its CmdSN still counts), or a PDU of another kind took its CmdSN. */
			if (t->cmdsn == s->exp_cmdsn)
				s->exp_cmdsn++;
			task_put(t);
			continue;
		}
		s->exp_cmdsn++;
		slot_take(t);
		session_go(t, NULL, NULL, 0, true);
	}
}

bool session_check_cmdsn(struct iscsi_conn *c, const void *bhs)
{
	struct iscsi_session *s = c->sess;
	if (!s || pdu_immediate(bhs))
		return true;
	uint32_t cmdsn = be32toh(((const struct pdu_bhs *)bhs)->sn1);
	if (cmdsn == s->exp_cmdsn) {
		s->exp_cmdsn++;
		drain_cmdq(s);
		return true;
	}
	if (!serial_in_window(cmdsn, s->exp_cmdsn, session_max_cmdsn(s))) {
		log_limited(LOG_INFO, "%s: %s CmdSN %u outside the window [%u, %u], dropped", c->xp->peer,
			    pdu_opcode_name(pdu_opcode(bhs)), cmdsn, s->exp_cmdsn, session_max_cmdsn(s));
		return false;
	}
	return true;
}

static void datain_done(struct xp_pdu *p, int err)
{
	struct iscsi_task *t = p->priv;
	conn_pdu_put(t->conn, p);
	if (err)
		conn_pdu_failed(t->conn, err);
	task_put(t);
}

static void rsp_done(struct xp_pdu *p, int err)
{
	struct iscsi_task *t = p->priv;
	if (err)
		conn_pdu_failed(t->conn, err);
	task_put(t);
}

/* Residual flags and count; returns the count in network order. */
static uint32_t fill_resid(const struct iscsi_task *t, uint8_t *flags)
{
	int64_t r = t->cmd.resid;
	if (r > 0) {
		*flags |= PDU_RSP_UNDERFLOW;
		return htobe32((uint32_t)MIN(r, (int64_t)UINT32_MAX));
	}
	if (r < 0) {
		*flags |= PDU_RSP_OVERFLOW;
		return htobe32((uint32_t)MIN(-r, (int64_t)UINT32_MAX));
	}
	return 0;
}

static void send_response(struct iscsi_task *t)
{
	struct iscsi_conn *c = t->conn;
	struct pdu_scsi_rsp *r = (void *)t->rsp.bhs;
	stats_cmd_status(t);
	memset(&t->rsp, 0, sizeof(t->rsp));
	r->opcode = PDU_OP_SCSI_RSP;
	r->flags = PDU_FLAG_FINAL;
	r->response = PDU_RESPONSE_COMPLETED;
	r->status = t->cmd.status;
	r->itt = htobe32(t->itt);
	r->exp_datasn = htobe32(t->datasn + t->r2t_sn);
	r->resid = fill_resid(t, &r->flags);
	/* The status is on its way: its slot opens the window in this very PDU. */
	task_slot_release(t);
	conn_fill_sn(c, r, true);
	if (t->cmd.status == SCSI_CHECK_CONDITION && t->cmd.sense_len) {
		uint32_t sl = MIN(t->cmd.sense_len, (uint32_t)SCSI_SENSE_LEN);
		/* iSER initiators receive control PDUs into 128-byte buffers: shorten the sense. */
		if (c->xp->max_ctrl_data && sl + 2 > c->xp->max_ctrl_data)
			sl = c->xp->max_ctrl_data - 2;
		put_be16(t->rspbuf, (uint16_t)sl);
		memcpy(t->rspbuf + 2, t->cmd.sense, sl);
		t->rsp.data = t->rspbuf;
		t->rsp.data_len = sl + 2;
	}
	pdu_set_dlen(r, t->rsp.data_len);
	t->rsp.priv = t;
	t->rsp.done = rsp_done;
	t->state = TASK_SENDING;
	conn_send(c, &t->rsp);
}

/* iSER: Data-In is one RDMA WRITE into the initiator's buffer; the Send of the status follows it. */
static void rdma_data_in(struct iscsi_task *t)
{
	struct iscsi_conn *c = t->conn;
	if (!t->read_stag_valid) {
		log_limited(LOG_INFO, "%s: READ without a read STag (ITT 0x%x), closing", c->xp->peer, t->itt);
		conn_close(c);
		task_put(t);
		return;
	}
	int rc = c->xp->ops->rdma_write(c->xp, t->cmd.buf, 0, t->cmd.din_len, t->read_va, t->read_stag, NULL, NULL);
	if (rc) {
		conn_close(c);
		task_put(t);
		return;
	}
	send_response(t);
}

/* Data-In PDUs from the command's buffer; status rides on the last one when GOOD. */
static void send_data_in(struct iscsi_task *t)
{
	struct iscsi_conn *c = t->conn;
	if (c->xp->ops->rdma) {
		rdma_data_in(t);
		return;
	}
	uint32_t total = t->cmd.din_len, seg = c->params.peer_max_recv_dsl;
	uint32_t burst = c->params.max_burst ? c->params.max_burst : total;
	bool status_in_data = t->cmd.status == SCSI_GOOD;
	if (!seg)
		seg = 8192;
	t->state = TASK_SENDING;
	for (uint32_t off = 0; off < total;) {
		uint32_t len = MIN(seg, total - off);
		/* A Data-In sequence ends at each MaxBurstLength boundary. */
		uint32_t to_burst = burst - (off % burst);
		len = MIN(len, to_burst);
		bool last = off + len == total;
		struct xp_pdu *p = conn_pdu_get(c);
		if (!p) {
			conn_close(c);
			break;
		}
		struct pdu_data_in *d = (void *)p->bhs;
		d->opcode = PDU_OP_DATA_IN;
		if (last || len == to_burst)
			d->flags |= PDU_FLAG_FINAL;
		pdu_set_lun(d, pdu_lun_encode(t->cmd.lun));
		d->itt = htobe32(t->itt);
		d->ttt = PDU_RESERVED_TAG;
		d->datasn = htobe32(t->datasn++);
		d->offset = htobe32(off);
		if (last && status_in_data) {
			stats_cmd_status(t);
			d->flags |= PDU_DATAIN_STATUS | PDU_FLAG_FINAL;
			d->status = t->cmd.status;
			d->resid = fill_resid(t, &d->flags);
			task_slot_release(t);
			conn_fill_sn(c, d, true);
		} else {
			conn_fill_sn(c, d, false);
			d->statsn = 0;
		}
		p->data = t->cmd.buf->data + off;
		p->data_len = len;
		pdu_set_dlen(d, len);
		p->priv = t;
		p->done = datain_done;
		t->refs++;
		conn_send(c, p);
		off += len;
	}
	if (status_in_data || c->state == CONN_CLOSING)
		task_put(t); /* the PDUs in flight hold the task now */
	else
		send_response(t);
}

static void task_complete(struct iscsi_task *t)
{
	if (t->aborted || t->conn->state == CONN_CLOSING) {
		task_put(t);
		return;
	}
	/* The SCSI layer may have swapped the buffer for its Data-In. */
	task_bufs_account(t);
	if (t->cmd.din_len && t->cmd.buf)
		send_data_in(t);
	else
		send_response(t);
}

static void task_scsi_done(struct scsi_cmd *cmd)
{
	task_complete(cmd->priv);
}

/*
 * A READ sent from the store's pages has held up a WRITE ATOMIC of its
 * blocks for the store's bound: its peer does not take the data.  Closing
 * ends every send from the store at once (TCP fails the queued PDUs, which
 * releases the task; iSER flushes its work requests), where a copy of the
 * rest could not take back an RDMA WRITE already posted.
 */
static void task_view_revoke(struct scsi_cmd *cmd)
{
	struct iscsi_task *t = cmd->priv;
	struct iscsi_conn *c = t->conn;
	if (c->state == CONN_CLOSING)
		return;
	log_limited(LOG_WARN, "%s: a READ (ITT 0x%x) still being sent from the store holds up a WRITE ATOMIC of its "
		    "blocks: the peer does not take its data, closing the connection", c->xp->peer, t->itt);
	conn_close(c);
}

static void maybe_exec(struct iscsi_task *t);

static void rdma_read_done(void *arg, int err)
{
	struct iscsi_task *t = arg;
	uint32_t len = t->seq_len;
	t->r2t_outstanding = 0;
	if (err || t->aborted || t->conn->state == CONN_CLOSING) {
		/* The connection is going away; the task ends with it. */
		if (!t->aborted && t->conn->state != CONN_CLOSING)
			conn_close(t->conn);
		task_put(t);
		return;
	}
	t->dout_got += len;
	t->state = TASK_DATA_OUT;
	maybe_exec(t);
	task_put(t);
}

/* iSER: fetch the solicited part with one RDMA READ from the initiator's write buffer. */
static void rdma_solicit(struct iscsi_task *t)
{
	struct iscsi_conn *c = t->conn;
	uint32_t off = t->r2t_next_offset, len = t->dout_total - off;
	if (!t->write_stag_valid) {
		log_limited(LOG_INFO, "%s: WRITE without a write STag (ITT 0x%x), closing", c->xp->peer, t->itt);
		conn_close(c);
		return;
	}
	/* The initiator's write VA already points past the unsolicited part. */
	uint64_t va = t->write_va + (off - t->unsol_expected);
	t->seq_len = len;
	t->r2t_next_offset = t->dout_total;
	t->r2t_outstanding = 1;
	t->refs++;
	if (c->xp->ops->rdma_read(c->xp, t->cmd.buf, off, len, va, t->write_stag, rdma_read_done, t)) {
		t->r2t_outstanding = 0;
		task_put(t);
		conn_close(c);
	}
}

static void send_r2ts(struct iscsi_task *t)
{
	struct iscsi_conn *c = t->conn;
	if (c->xp->ops->rdma) {
		if (!t->r2t_outstanding && t->r2t_next_offset < t->dout_total)
			rdma_solicit(t);
		return;
	}
	/* One solicited sequence at a time: MaxOutstandingR2T >= 1 allows it. */
	if (t->r2t_outstanding || t->r2t_next_offset >= t->dout_total)
		return;
	uint32_t len = MIN(t->dout_total - t->r2t_next_offset, c->params.max_burst);
	struct pdu_r2t r = { 0 };
	r.opcode = PDU_OP_R2T;
	r.flags = PDU_FLAG_FINAL;
	pdu_set_lun(&r, pdu_lun_encode(t->cmd.lun));
	r.itt = htobe32(t->itt);
	t->ttt = c->next_ttt++;
	if (t->ttt == PDU_RESERVED_TAG)
		t->ttt = c->next_ttt++;
	r.ttt = htobe32(t->ttt);
	r.r2tsn = htobe32(t->r2t_sn++);
	r.offset = htobe32(t->r2t_next_offset);
	r.length = htobe32(len);
	conn_fill_sn(c, &r, false);
	r.statsn = htobe32(c->statsn);
	t->seq_offset = t->r2t_next_offset;
	t->seq_len = len;
	t->seq_got = 0;
	t->seq_datasn = 0;
	t->r2t_next_offset += len;
	t->r2t_outstanding = 1;
	STATS_INC(c->st.r2ts);
	conn_send_simple(c, &r, NULL, 0);
}

static void maybe_exec(struct iscsi_task *t)
{
	if (t->r2t_outstanding && t->conn->xp->ops->rdma)
		return;
	if (t->state != TASK_DATA_OUT || t->dout_got < t->dout_total || !t->unsol_done)
		return;
	t->state = TASK_EXEC;
	scsi_cmd_exec(&t->cmd);
}

/* Unsolicited data the initiator may send for this command beyond its immediate data (sec. 4.2.5.2). */
static uint32_t unsol_allowed(const struct iscsi_task *t)
{
	const struct neg_params *np = &t->conn->params;
	uint32_t edtl = t->cmd.dir_write ? t->edtl : 0;
	if (np->initial_r2t || t->cmd_final)
		return 0;
	uint32_t first = MIN(np->first_burst, edtl);
	return first > t->imm_len ? first - t->imm_len : 0;
}

/*
 * Start a command whose turn came, with its immediate data.  busy: no
 * buffer memory for it now, answer BUSY without asking the SCSI layer.
 */
static void task_start(struct iscsi_task *t, const uint8_t *data, uint32_t len, bool busy)
{
	/*
	 * What the initiator will send without being asked (RFC 7143 sec.
	 * 4.2.5.2): up to FirstBurstLength with InitialR2T=No, unless the
	 * command's F bit says no unsolicited Data-Out follows it.
	 */
	t->unsol_expected = len + unsol_allowed(t);
	t->unsol_got = len;
	t->unsol_done = t->unsol_got >= t->unsol_expected;
	t->r2t_next_offset = t->unsol_expected;
	if (busy) {
		t->cmd.status = SCSI_BUSY;
		t->cmd.resid = (int64_t)t->edtl;
	}
	if (busy || !scsi_cmd_prepare(&t->cmd)) {
		/* Keep the ITT while the unsolicited data still arrives. */
		if (!t->unsol_done)
			task_absorb(t);
		task_complete(t);
		return;
	}
	task_bufs_account(t);
	t->dout_total = t->cmd.dout_len;
	t->state = TASK_DATA_OUT;
	if (len && t->dout_total) {
		uint32_t k = MIN(len, t->dout_total);
		memcpy(t->cmd.buf->data, data, k);
		t->dout_got = k;
	}
	if (t->r2t_next_offset < t->dout_total)
		send_r2ts(t);
	maybe_exec(t);
}

static bool cmdq_has(const struct iscsi_session *s, uint32_t cmdsn)
{
	for (const struct iscsi_task *t = s->cmdq; t; t = t->qnext)
		if (t->cmdsn == cmdsn)
			return true;
	return false;
}

void session_scsi_cmd(struct iscsi_conn *c, struct xp_rx *rx)
{
	struct iscsi_session *s = c->sess;
	const struct pdu_scsi_cmd *h = (const void *)rx->bhs;
	uint32_t itt = be32toh(h->itt), cmdsn = be32toh(h->cmdsn);
	bool immediate = pdu_immediate(h);
	/* Shutting down: not taken; the initiator issues it again after it reconnects. */
	if (c->draining)
		return;
	/* RFC 7143 sec. 3.2.2.1: outside the window, or a duplicate: silently ignored. */
	if (!immediate && !serial_in_window(cmdsn, s->exp_cmdsn, session_max_cmdsn(s))) {
		log_limited(LOG_INFO, "%s: command CmdSN %u outside the window [%u, %u], dropped", c->xp->peer, cmdsn,
			    s->exp_cmdsn, session_max_cmdsn(s));
		return;
	}
	if (!immediate && cmdsn != s->exp_cmdsn && cmdq_has(s, cmdsn)) {
		log_limited(LOG_INFO, "%s: command CmdSN %u already queued, duplicate dropped", c->xp->peer, cmdsn);
		return;
	}
	if (immediate && s->immediate >= s->max_immediate) {
		log_limited(LOG_INFO, "%s: more than %u immediate commands at once, rejected", c->xp->peer,
			    s->max_immediate);
		conn_send_reject(c, rx->bhs, PDU_REJECT_IMMEDIATE_CMD_REJECT);
		return;
	}
	struct iscsi_task *old = itt == PDU_RESERVED_TAG ? NULL : task_find(c, itt);
	if (old && old->absorbing) {
		/* Answered or aborted, only waiting for Data-Out that will not come now: the ITT is free again. */
		task_absorb_end(old);
		old = task_find(c, itt);
	}
	if (itt == PDU_RESERVED_TAG || old) {
		conn_send_reject(c, rx->bhs, PDU_REJECT_TASK_IN_PROGRESS);
		return;
	}
	uint32_t dlen = rx->data ? rx->data_len : 0;
	bool w = h->flags & PDU_CMD_WRITE;
	if (dlen && (!w || !c->params.immediate_data || dlen > c->params.first_burst || dlen > be32toh(h->edtl))) {
		conn_send_reject(c, rx->bhs, PDU_REJECT_PROTOCOL_ERROR);
		return;
	}
	struct iscsi_task *t = task_new(c, h);
	if (!t) {
		conn_close(c);
		return;
	}
	struct scsi_cmd *cmd = &t->cmd;
	uint32_t bidi = 0;
	if (pdu_parse_cmd_ahs(h, rx->ahs, rx->ahs_len, cmd->cdb, &cmd->cdb_len, &bidi)) {
		task_put(t);
		conn_send_reject(c, rx->bhs, PDU_REJECT_INVALID_PDU_FIELD);
		return;
	}
	cmd->lun = pdu_lun_decode(pdu_lun(h));
	const struct iscsi_lun *l = session_lun(s, cmd->lun);
	stats_cmd_arrived(t, s, (struct iscsi_lun *)l);
	cmd->lu = l ? l->lu : NULL;
	cmd->read_only = l ? l->read_only : false;
	cmd->itl = l ? l->itl : NULL;
	cmd->nexus = &s->nexus;
	cmd->lun_map = &s->lun_map;
	cmd->edtl = t->edtl;
	cmd->dir_read = h->flags & PDU_CMD_READ;
	cmd->dir_write = w;
	cmd->task_attr = h->flags & PDU_CMD_ATTR_MASK;
	cmd->reactor = c->r;
	/*
	 * A view's bytes are sent some time after the PDU is queued, and a WRITE
	 * may change them meanwhile (a READ racing a WRITE may get either): with
	 * DataDigest the digest, made at queueing, would then be wrong, so those
	 * READs are copied into a pool buffer instead.
	 */
	cmd->send_any_memory = !c->xp->ops->rdma && !c->xp->data_digest;
	cmd->rdma_xc = c->xp->ops->rdma ? c->xp : NULL;
	cmd->view_revoke = task_view_revoke;
	cmd->done = task_scsi_done;
	cmd->priv = t;
	t->cmd_final = h->flags & PDU_FLAG_FINAL;
	t->imm_len = dlen;
	t->read_stag_valid = rx->read_stag_valid;
	t->write_stag_valid = rx->write_stag_valid;
	t->read_stag = rx->read_stag;
	t->write_stag = rx->write_stag;
	t->read_va = rx->read_va;
	t->write_va = rx->write_va;
	if (immediate) {
		session_go(t, rx->bhs, rx->data, dlen, false);
		return;
	}
	if (cmdsn == s->exp_cmdsn) {
		s->exp_cmdsn++;
		slot_take(t);
		session_go(t, rx->bhs, rx->data, dlen, false);
		drain_cmdq(s);
		return;
	}
	/* Early: keep it (and its data) until the commands before it arrived. */
	t->state = TASK_QUEUED;
	if (task_stash(t, rx->bhs, rx->data, dlen, false)) {
		conn_close(c);
		return;
	}
	struct iscsi_task **pp = &s->cmdq;
	while (*pp && serial_lt((*pp)->cmdsn, cmdsn))
		pp = &(*pp)->qnext;
	t->qnext = *pp;
	*pp = t;
}

int session_data_out_dest(struct iscsi_conn *c, const uint8_t *bhs, uint8_t **dest)
{
	const struct pdu_data_out *d = (const void *)bhs;
	struct iscsi_task *t = task_find(c, be32toh(d->itt));
	uint32_t off = be32toh(d->offset), len = pdu_dlen(bhs);
	*dest = NULL;
	if (t && t->state == TASK_DATA_OUT && !t->aborted && t->cmd.buf && off <= t->dout_total &&
	    len <= t->dout_total - off)
		*dest = t->cmd.buf->data + off;
	return 0;
}

static void data_out_pdu(struct iscsi_task *t, const uint8_t *bhs, const uint8_t *data, uint32_t len, bool placed)
{
	struct iscsi_conn *c = t->conn;
	const struct pdu_data_out *d = (const void *)bhs;
	uint32_t ttt = be32toh(d->ttt), off = be32toh(d->offset), datasn = be32toh(d->datasn);
	bool final = d->flags & PDU_FLAG_FINAL;
	if (ttt == PDU_RESERVED_TAG) {
		if (t->unsol_done || datasn != t->unsol_datasn || off != t->unsol_got ||
		    len > t->unsol_expected - t->unsol_got) {
			log_limited(LOG_INFO, "%s: bad unsolicited Data-Out (ITT 0x%x DataSN %u offset %u len %u)",
				    c->xp->peer, t->itt, datasn, off, len);
			conn_send_reject(c, bhs, PDU_REJECT_PROTOCOL_ERROR);
			return;
		}
		t->unsol_datasn++;
		t->unsol_got += len;
		if (final || t->unsol_got == t->unsol_expected)
			t->unsol_done = true;
	} else {
		if (!t->r2t_outstanding || ttt != t->ttt || datasn != t->seq_datasn ||
		    off != t->seq_offset + t->seq_got || len > t->seq_len - t->seq_got) {
			log_limited(LOG_INFO, "%s: bad solicited Data-Out (ITT 0x%x TTT 0x%x DataSN %u offset %u len %u)",
				    c->xp->peer, t->itt, ttt, datasn, off, len);
			conn_send_reject(c, bhs, PDU_REJECT_PROTOCOL_ERROR);
			return;
		}
		t->seq_datasn++;
		t->seq_got += len;
	}
	if (t->absorbing) {
		if (!task_data_owed(t))
			task_absorb_end(t);
		return;
	}
	if (off < t->dout_total) {
		uint32_t k = MIN(len, t->dout_total - off);
		if (!placed && data)
			memcpy(t->cmd.buf->data + off, data, k);
		t->dout_got += k;
	}
	if (ttt != PDU_RESERVED_TAG && t->seq_got == t->seq_len) {
		t->r2t_outstanding = 0;
		send_r2ts(t);
	}
	maybe_exec(t);
}

/* Data-Out for a command that has not started: only its unsolicited data, kept within bounds. */
static void data_out_early(struct iscsi_conn *c, struct iscsi_task *t, struct xp_rx *rx)
{
	const struct pdu_data_out *d = (const void *)rx->bhs;
	uint32_t len = rx->data ? rx->data_len : 0;
	uint32_t kept = t->stash_bytes - t->imm_len;
	if (be32toh(d->ttt) != PDU_RESERVED_TAG || kept + len > unsol_allowed(t)) {
		log_limited(LOG_INFO, "%s: Data-Out for a command not started (ITT 0x%x) beyond its unsolicited "
			    "data (%u + %u > %u bytes), rejected", c->xp->peer, t->itt, kept, len, unsol_allowed(t));
		conn_send_reject(c, rx->bhs, PDU_REJECT_PROTOCOL_ERROR);
		return;
	}
	int rc = task_stash(t, rx->bhs, rx->data, len, true);
	if (rc == -ENOBUFS) {
		log_limited(LOG_INFO, "%s: more than %zu bytes of Data-Out kept for commands not started, rejected",
			    c->xp->peer, c->sess->buf_budget);
		conn_send_reject(c, rx->bhs, PDU_REJECT_PROTOCOL_ERROR);
	} else if (rc) {
		conn_close(c);
	}
}

void session_data_out(struct iscsi_conn *c, struct xp_rx *rx)
{
	const struct pdu_data_out *d = (const void *)rx->bhs;
	struct iscsi_task *t = task_find(c, be32toh(d->itt));
	if (!t) {
		conn_send_reject(c, rx->bhs, PDU_REJECT_INVALID_PDU_FIELD);
		return;
	}
	if (t->aborted && !t->absorbing)
		return;
	if (t->state == TASK_QUEUED) {
		data_out_early(c, t, rx);
		return;
	}
	if (t->state != TASK_DATA_OUT && !t->absorbing) {
		conn_send_reject(c, rx->bhs, PDU_REJECT_PROTOCOL_ERROR);
		return;
	}
	data_out_pdu(t, rx->bhs, rx->data, rx->data ? rx->data_len : 0, rx->placed);
}

static void session_unregister(struct iscsi_session *s);

void session_nexus_lost(struct iscsi_conn *c, struct scsi_lu *lu)
{
	/* Tasks still in the backstore stay on c->tasks until they end; none may keep the entry. */
	for (struct iscsi_task *t = c->tasks; t; t = t->lnext)
		if (t->cmd.lu == lu)
			t->cmd.itl = NULL;
	scsi_lu_event(lu, &c->sess->nexus, SCSI_EV_NEXUS_LOSS, NULL);
}

void session_lu_event(struct iscsi_session *s, enum scsi_lu_event ev, struct scsi_wait *w)
{
	for (size_t i = 0; i < s->nluns; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = s->luns[j].lu == s->luns[i].lu;
		if (!seen)
			scsi_lu_event(s->luns[i].lu, &s->nexus, ev, w);
	}
}

/* The connection ended: its tasks end with it, and the nexus is lost. */
void session_conn_gone(struct iscsi_conn *c)
{
	struct iscsi_session *s = c->sess;
	if (s) {
		/* Queued tasks are on these lists and in c->tasks: the loop below ends them. */
		s->cmdq = NULL;
		s->bufq = s->bufq_tail = NULL;
	}
	for (struct iscsi_task *t = c->tasks, *n; t; t = n) {
		t->refs++; /* keep t (and so t->lnext) valid while its refs drop */
		task_absorb_end(t);
		if (!t->aborted) {
			t->aborted = true;
			t->cmd.stop = true;
			task_slot_release(t);
			if (t->state == TASK_QUEUED || t->state == TASK_DATA_OUT)
				task_put(t);
		}
		n = t->lnext;
		task_put(t);
	}
	if (!s)
		return;
	for (size_t i = 0; i < s->nluns; i++)
		session_nexus_lost(c, s->luns[i].lu);
	/* Gone for everyone else now; the memory goes with the connection (tasks still point at it). */
	session_unregister(s);
}

static int lun_cmp(const void *a, const void *b)
{
	const struct iscsi_lun *x = a, *y = b;
	return x->lun < y->lun ? -1 : x->lun > y->lun;
}

/*
 * The LUNs session s sees now (caller holds rt_lock): its ACL's
 * mapped LUNs, or every LUN of the portal group in demo mode.  -EACCES when
 * the initiator is no longer admitted (ACL gone, demo mode off, the TPG
 * removed or disabled).
 */
int session_lun_map(const struct iscsi_session *s, struct iscsi_lun **out, uint64_t **ids, size_t *count)
{
	const struct rt_tpg *tpg = s->tpg;
	const struct cfg_acl *acl = NULL;
	*out = NULL;
	*ids = NULL;
	*count = 0;
	if (!tpg_initiator_allowed(tpg, s->initiator, &acl) || !tpg->cfg->enable)
		return -EACCES;
	const struct cfg_tpg *g = tpg->cfg;
	size_t n = acl ? acl->nluns : g->nluns, k = 0;
	struct iscsi_lun *luns = calloc(n ? n : 1, sizeof(*luns));
	uint64_t *id_array = calloc(n ? n : 1, sizeof(*id_array));
	if (!luns || !id_array) {
		free(luns);
		free(id_array);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		const struct cfg_lun *l = NULL;
		uint64_t id;
		bool ro;
		if (acl) {
			const struct cfg_mapped_lun *m = &acl->luns[i];
			for (size_t j = 0; j < g->nluns && !l; j++)
				if (g->luns[j].lun == m->tpg_lun)
					l = &g->luns[j];
			if (!l)
				continue;
			id = m->mapped_lun;
			ro = l->read_only || m->write_protect;
		} else {
			l = &g->luns[i];
			id = l->lun;
			ro = l->read_only || g->demo_write_protect;
		}
		luns[k].lun = id;
		luns[k].lu = rt_store_at(l->backstore_index)->lu;
		luns[k].read_only = ro;
		k++;
	}
	qsort(luns, k, sizeof(*luns), lun_cmp);
	*out = luns;
	*ids = id_array;
	*count = k;
	return 0;
}

/* The LU behind entry i of a session's LUN map (EXTENDED COPY looks its copy targets up here). */
static struct scsi_lu *lun_map_lu_at(const struct scsi_lun_map *m, uint32_t i, bool *read_only)
{
	const struct iscsi_session *s =
		(const struct iscsi_session *)((const char *)m - offsetof(struct iscsi_session, lun_map));
	if (i >= s->nluns)
		return NULL;
	*read_only = s->luns[i].read_only;
	return s->luns[i].lu;
}

/* Take luns and ids (from session_lun_map) as the session's LUN map. */
void session_set_lun_map(struct iscsi_session *s, struct iscsi_lun *luns, uint64_t *ids, size_t n)
{
	stats_map_dropped(s->luns, s->nluns);
	free(s->luns);
	free(s->lun_ids);
	s->luns = luns;
	s->nluns = n;
	s->lun_ids = ids;
	for (size_t i = 0; i < n; i++) {
		s->lun_ids[i] = s->luns[i].lun;
		s->luns[i].itl = scsi_lu_itl(s->luns[i].lu, &s->nexus);
	}
	s->lun_map.count = (uint32_t)s->nluns;
	s->lun_map.luns = s->lun_ids;
	s->lun_map.lu_at = lun_map_lu_at;
}

static void close_by_id(void *arg)
{
	uint64_t *id = arg;
	struct iscsi_conn *c = NULL;
	/* Sessions are freed only on their own reactor, which is running this. */
	pthread_mutex_lock(&iscsi_g.lock);
	for (struct iscsi_session *o = iscsi_g.sessions; o; o = o->next)
		if (o->nexus.id == *id)
			c = o->conn;
	pthread_mutex_unlock(&iscsi_g.lock);
	free(id);
	if (c && c->state != CONN_CLOSING)
		conn_close(c);
}

/* Close a session that may live on another reactor; call with iscsi_g.lock held. */
void session_close_async(struct iscsi_session *o)
{
	uint64_t *id = malloc(sizeof(*id));
	if (!id)
		return;
	*id = o->nexus.id;
	o->gone = true;
	if (reactor_send(o->r, close_by_id, id))
		free(id);
}

int session_register(struct iscsi_session *s, char *why, size_t whylen)
{
	struct iscsi_lun *luns = NULL;
	uint64_t *ids = NULL;
	size_t n = 0;
	/* The LUN map as the configuration has it now, installed once the nexus is known. */
	int rc = s->discovery ? 0 : session_lun_map(s, &luns, &ids, &n);
	if (rc) {
		/* The configuration may have changed since the login began. */
		snprintf(why, whylen, rc == -EACCES ? "the initiator is no longer admitted to this portal group"
						    : "out of memory");
		return rc;
	}
	pthread_mutex_lock(&iscsi_g.lock);
	/* Session reinstatement: same initiator port and target port replaces the old session. */
	for (struct iscsi_session *o = iscsi_g.sessions; o; o = o->next) {
		if (o->gone || o->tpg != s->tpg || o->discovery != s->discovery || memcmp(o->isid, s->isid, 6) ||
		    strcmp(o->initiator, s->initiator))
			continue;
		char who[160];
		log_limited(LOG_INFO, "reinstating session of '%s' (TSIH %u)", log_escape(o->initiator, who, sizeof(who)),
			    o->tsih);
		session_close_async(o);
	}
	bool clash;
	do {
		s->tsih = ++iscsi_g.next_tsih;
		clash = s->tsih == 0;
		for (struct iscsi_session *o = iscsi_g.sessions; o && !clash; o = o->next)
			clash = o->tsih == s->tsih;
	} while (clash);
	s->nexus.id = ++iscsi_g.next_nexus_id;
	s->next = iscsi_g.sessions;
	iscsi_g.sessions = s;
	pthread_mutex_unlock(&iscsi_g.lock);
	struct scsi_nexus *nx = &s->nexus;
	snprintf(nx->initiator_name, sizeof(nx->initiator_name), "%s", s->initiator);
	snprintf(nx->initiator_port, sizeof(nx->initiator_port), "%s,i,0x%02x%02x%02x%02x%02x%02x", s->initiator,
		 s->isid[0], s->isid[1], s->isid[2], s->isid[3], s->isid[4], s->isid[5]);
	if (s->tpg) {
		snprintf(nx->target_name, sizeof(nx->target_name), "%s", s->tpg->iqn);
		snprintf(nx->target_port, sizeof(nx->target_port), "%s,t,0x%04x", s->tpg->iqn, s->tpg->tag);
		nx->rel_port_id = s->tpg->tag;
		nx->port = s->tpg->alua_port;
		nx->alua_gen = scsi_alua_gen(nx->port);
	}
	/* Installed only now: its I_T_L entries are made for this nexus. */
	if (!s->discovery)
		session_set_lun_map(s, luns, ids, n);
	return 0;
}

/* Out of the process-wide list (reinstatement, TSIHs, limits); memory stays. */
static void session_unregister(struct iscsi_session *s)
{
	pthread_mutex_lock(&iscsi_g.lock);
	for (struct iscsi_session **pp = &iscsi_g.sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	pthread_mutex_unlock(&iscsi_g.lock);
	if (s->counted)
		admit_session_gone();
	s->counted = false;
}

void session_free(struct iscsi_session *s)
{
	if (!s)
		return;
	session_unregister(s);
	stats_map_dropped(s->luns, s->nluns);
	free(s->luns);
	free(s->lun_ids);
	free(s);
}
