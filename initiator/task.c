/*
 * Tasks: ITT slots, the CmdSN window, SCSI Command / Data-Out / R2T /
 * Data-In / Response handling, TMF, Text, NOP and Logout requests.  Data-In
 * lands straight in the caller's buffer (the transport's rx_bhs upcall);
 * Data-Out is sent from it without a copy.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/transport/iser.h"
#include "common/reactor.h"
#include "common/proto/serial.h"
#include "common/util.h"
#include "isc_internal.h"

#define ISC_MAX_SLOTS 0xfff0u

static int slot_get(struct isc_session *s, struct isc_task *t)
{
	if (!s->nfree) {
		uint32_t n = s->nslots ? s->nslots * 2 : 256;
		if (n > ISC_MAX_SLOTS)
			n = ISC_MAX_SLOTS;
		if (n <= s->nslots)
			return -EAGAIN;
		struct isc_task **ns = realloc(s->slots, n * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		s->slots = ns;
		uint32_t *nf = realloc(s->free_slots, n * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		s->free_slots = nf;
		for (uint32_t i = n; i > s->nslots; i--)
			s->free_slots[s->nfree++] = i - 1;
		memset(s->slots + s->nslots, 0, (n - s->nslots) * sizeof(*ns));
		s->nslots = n;
	}
	uint32_t slot = s->free_slots[--s->nfree];
	s->slots[slot] = t;
	/* The generation in the high half keeps a late PDU from hitting a reused slot. */
	s->slot_gen = (s->slot_gen + 1) & 0x7fff;
	t->itt = s->slot_gen << 16 | slot;
	return 0;
}

struct isc_task *isc_task_by_itt(struct isc_session *s, uint32_t itt)
{
	uint32_t slot = itt & 0xffff;
	if (slot >= s->nslots)
		return NULL;
	struct isc_task *t = s->slots[slot];
	return t && t->itt == itt ? t : NULL;
}

struct isc_task *isc_task_alloc(struct isc_session *s, enum isc_kind kind)
{
	struct isc_task *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (slot_get(s, t)) {
		free(t);
		return NULL;
	}
	t->s = s;
	t->kind = kind;
	t->immediate = kind != ISC_K_SCSI;
	return t;
}

static void list_del(struct isc_task **head, struct isc_task **tail, struct isc_task *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		*head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	else
		*tail = t->prev;
	t->prev = t->next = NULL;
}

static void list_add(struct isc_task **head, struct isc_task **tail, struct isc_task *t)
{
	t->next = NULL;
	t->prev = *tail;
	if (*tail)
		(*tail)->next = t;
	else
		*head = t;
	*tail = t;
}

void isc_task_queue(struct isc_session *s, struct isc_task *t)
{
	list_add(&s->wait_head, &s->wait_tail, t);
	s->ntasks++;
}

static void task_release(struct isc_session *s, struct isc_task *t)
{
	uint32_t slot = t->itt & 0xffff;
	if (slot < s->nslots && s->slots[slot] == t) {
		s->slots[slot] = NULL;
		s->free_slots[s->nfree++] = slot;
	}
	isc_task_unmap(t);
	text_buf_free(&t->text);
	free(t->out_data);
	free(t);
}

static void deliver(struct isc_session *s, struct isc_task *t)
{
	s->ntasks--;
	if (t->text_sink) {
		struct text_buf tmp = *t->text_sink;
		*t->text_sink = t->text;
		t->text = tmp;
	}
	if (t->done_cb)
		t->done_cb(s, t->res.err, t->arg);
	else if (t->tmf_cb)
		t->tmf_cb(s, t->res.err, t->tmf_response, t->arg);
	else if (t->cb)
		t->cb(s, &t->res, t->arg);
	task_release(s, t);
}

void isc_task_finish(struct isc_session *s, struct isc_task *t, int err)
{
	if (t->completed)
		return;
	t->completed = true;
	if (t->nseq)
		isc_dout_drop(s, t);
	if (!t->res.err)
		t->res.err = err;
	if (t->issued) {
		list_del(&s->fly_head, &s->fly_tail, t);
		if (t->kind == ISC_K_SCSI)
			s->nfly_scsi--;
	} else
		list_del(&s->wait_head, &s->wait_tail, t);
	t->issued = false;
	/* The caller's buffer may still be in a queued Data-Out: wait for the transport. */
	if (!t->pdus)
		deliver(s, t);
}

void isc_task_pdu_done(struct isc_session *s, struct isc_task *t)
{
	if (--t->pdus == 0 && t->completed)
		deliver(s, t);
}

/*
 * iSER (RFC 7145 sec. 7.3): immediate data rides in the command's Send, as
 * much as the target takes (TargetRecvDataSegmentLength, FirstBurstLength);
 * the target RDMA READs the rest, from our write VA that points past the
 * immediate part; a read's data arrives by the target's RDMA WRITE.  There
 * are no unsolicited Data-Out PDUs, so the command always carries F.
 */
static uint32_t iser_imm(const struct isc_session *s, const struct isc_task *t)
{
	const struct neg_params *n = &s->params;
	if (t->cmd.dir != ISC_DIR_WRITE || !n->immediate_data)
		return 0;
	return MIN(t->cmd.len, MIN(n->first_burst, isc_send_dsl(s)));
}

/* Does the target need the task's buffer registered (an RDMA WRITE or READ)? */
static bool iser_remote_access(const struct isc_session *s, const struct isc_task *t)
{
	return t->cmd.dir != ISC_DIR_NONE && t->cmd.len > iser_imm(s, t);
}

static int issue_scsi_iser(struct isc_session *s, struct isc_task *t, uint8_t *bhs)
{
	struct xp_pdu st = { 0 };
	uint32_t imm = iser_imm(s, t);
	bhs[1] |= PDU_FLAG_FINAL;
	if (iser_remote_access(s, t)) {
		uint32_t rkey;
		int rc = isc_task_map(s, t, &rkey);
		if (rc)
			return rc;
		if (t->cmd.dir == ISC_DIR_READ) {
			st.read_stag_valid = true;
			st.read_stag = rkey;
			st.read_va = (uintptr_t)t->cmd.data;
		} else {
			st.write_stag_valid = true;
			st.write_stag = rkey;
			st.write_va = (uintptr_t)t->cmd.data + imm;
		}
	}
	return isc_send_pdu(s, bhs, t->cmd.data, imm, 0, t, &st);
}

static int issue_scsi(struct isc_session *s, struct isc_task *t)
{
	const struct neg_params *n = &s->params;
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_scsi_cmd *c = (void *)bhs;
	uint32_t imm = 0, unsol = 0, len = t->cmd.len;
	c->opcode = PDU_OP_SCSI_CMD;
	c->flags = PDU_ATTR_SIMPLE;
	if (t->cmd.dir == ISC_DIR_READ)
		c->flags |= PDU_CMD_READ;
	if (t->cmd.dir == ISC_DIR_WRITE && len)
		c->flags |= PDU_CMD_WRITE;
	pdu_set_lun(bhs, pdu_lun_encode(t->cmd.lun));
	c->itt = htobe32(t->itt);
	c->edtl = htobe32(t->cmd.dir == ISC_DIR_NONE ? 0 : len);
	c->cmdsn = htobe32(t->cmdsn);
	memcpy(c->cdb, t->cmd.cdb, t->cmd.cdb_len);
	if (s->o.iser)
		return issue_scsi_iser(s, t, bhs);
	if (t->cmd.dir == ISC_DIR_WRITE && len) {
		uint32_t fb = MIN(len, n->first_burst);
		if (n->immediate_data)
			imm = MIN(fb, isc_send_dsl(s));
		if (!n->initial_r2t)
			unsol = fb - imm;
	}
	if (!unsol)
		c->flags |= PDU_FLAG_FINAL;
	int rc = isc_send_bhs(s, bhs, t->cmd.data, imm, 0, t);
	/* The unsolicited burst is sent as the send queue has room, like R2T-solicited data. */
	if (!rc && unsol && !(rc = isc_dout_add(s, t, PDU_RESERVED_TAG, imm, unsol, false)))
		isc_dout_pump(s);
	return rc;
}

static int issue(struct isc_session *s, struct isc_task *t)
{
	t->cmdsn = s->cmdsn;
	t->next_datasn = 0;
	t->data_in = 0;
	t->next_r2tsn = 0;
	t->r2t_out = 0;
	memset(&t->res, 0, sizeof(t->res));
	if (t->kind == ISC_K_SCSI) {
		/* Register before the CmdSN is taken: a gap would stall every later command. */
		uint32_t rkey;
		int rc = s->o.iser && iser_remote_access(s, t) ? isc_task_map(s, t, &rkey) : 0;
		if (rc)
			return rc;
		s->cmdsn++;
		return issue_scsi(s, t);
	}
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_bhs *b = (void *)bhs;
	switch (t->kind) {
	case ISC_K_NOP: {
		struct pdu_nop *o = (void *)bhs;
		o->opcode = PDU_OP_NOP_OUT | PDU_FLAG_IMMEDIATE;
		o->flags = PDU_FLAG_FINAL;
		o->ttt = htobe32(PDU_RESERVED_TAG);
		break;
	}
	case ISC_K_TMF: {
		struct pdu_tmf_req *m = (void *)t->bhs;
		m->opcode = PDU_OP_TMF_REQ | PDU_FLAG_IMMEDIATE;
		m->function |= PDU_FLAG_FINAL;
		struct isc_task *ref = t->has_ref ? isc_task_by_itt(s, t->ref_itt) : NULL;
		if (ref) {
			/* The referenced task may have been re-issued with a new CmdSN. */
			m->ref_itt = htobe32(ref->itt);
			m->ref_cmdsn = htobe32(ref->cmdsn);
		}
		memcpy(bhs, t->bhs, PDU_BHS_LEN);
		break;
	}
	case ISC_K_TEXT:
		memcpy(bhs, t->bhs, PDU_BHS_LEN);
		bhs[0] = PDU_OP_TEXT_REQ | PDU_FLAG_IMMEDIATE;
		break;
	case ISC_K_LOGOUT: {
		struct pdu_logout_req *l = (void *)bhs;
		l->opcode = PDU_OP_LOGOUT_REQ | PDU_FLAG_IMMEDIATE;
		l->reason = PDU_FLAG_FINAL | PDU_LOGOUT_SESSION;
		l->cid = htobe16(s->cid);
		break;
	}
	default:
		break;
	}
	b->itt = htobe32(t->itt);
	b->sn1 = htobe32(s->cmdsn);
	return isc_send_bhs(s, bhs, t->out_data, t->out_len, 0, t);
}

void isc_task_pump(struct isc_session *s)
{
	bool ffp = s->state == ISC_S_FFP || s->state == ISC_S_LOGOUT;
	if (!ffp || !s->xc)
		return;
	struct isc_task *t = s->wait_head;
	while (t) {
		struct isc_task *next = t->next;
		if (!t->immediate) {
			/*
			 * Over iSER every response needs one of the receives we posted;
			 * on any transport, a send queue the target does not drain
			 * stops new commands (their data would pile up behind).
			 */
			bool full = (s->o.iser && s->nfly_scsi >= ISER_INITIATOR_QUEUE_DEPTH) || isc_sendq_full(s);
			if (s->state == ISC_S_LOGOUT || serial_gt(s->cmdsn, s->max_cmdsn) || full) {
				/* Window closed: later non-immediate tasks keep their order. */
				t = next;
				while (t && !t->immediate)
					t = t->next;
				continue;
			}
		}
		list_del(&s->wait_head, &s->wait_tail, t);
		list_add(&s->fly_head, &s->fly_tail, t);
		t->issued = true;
		if (t->kind == ISC_K_SCSI)
			s->nfly_scsi++;
		s->issue_err_said = false;
		int rc = issue(s, t);
		if (rc) {
			if (!s->issue_err_said)
				isc_seterr(s, "cannot send: %s", strerror(-rc));
			isc_task_finish(s, t, rc);
		}
		t = next;
	}
}

struct isc_task *isc_submit(struct isc_session *s, const struct isc_cmd *cmd, isc_task_cb cb, void *arg)
{
	if (!cmd || !cb || cmd->cdb_len == 0 || cmd->cdb_len > 16 || (cmd->len && !cmd->data) ||
	    (cmd->dir == ISC_DIR_NONE && cmd->len)) {
		errno = EINVAL;
		return NULL;
	}
	/* While reconnecting, tasks wait for the new connection. */
	if (s->state != ISC_S_FFP && !s->reconnecting) {
		errno = ENOTCONN;
		return NULL;
	}
	struct isc_task *t = isc_task_alloc(s, ISC_K_SCSI);
	if (!t) {
		errno = ENOMEM;
		return NULL;
	}
	t->cmd = *cmd;
	t->cb = cb;
	t->arg = arg;
	t->carried = s->reconnecting;
	isc_task_queue(s, t);
	isc_task_pump(s);
	return t;
}

unsigned isc_tasks_pending(const struct isc_session *s) { return s->ntasks; }

/* ---- receive ---- */

int isc_task_rx_bhs(struct isc_session *s, const uint8_t *bhs, uint8_t **dest)
{
	const struct pdu_data_in *d = (const void *)bhs;
	uint32_t dlen = pdu_dlen(bhs), off = be32toh(d->offset);
	struct isc_task *t = isc_task_by_itt(s, be32toh(d->itt));
	if (!t || !t->issued || t->kind != ISC_K_SCSI) {
		*dest = XP_DISCARD; /* a task we gave up on (aborted): drop its data */
		return 0;
	}
	if (t->cmd.dir != ISC_DIR_READ || off > t->cmd.len || dlen > t->cmd.len - off)
		return isc_proto_fail(s, "target sent Data-In [%u, +%u) outside the %u-byte read buffer", off, dlen,
				      t->cmd.len);
	*dest = (uint8_t *)t->cmd.data + off;
	return 0;
}

static void take_residual(struct isc_result *r, uint8_t flags, uint32_t resid)
{
	r->underflow = flags & PDU_RSP_UNDERFLOW;
	r->overflow = flags & PDU_RSP_OVERFLOW;
	r->residual = r->underflow || r->overflow ? resid : 0;
}

/*
 * After a reconnect the target sees a new I_T nexus (or has restarted) and
 * reports it with a UNIT ATTENTION, ASC 29h (power on, reset, I_T nexus
 * loss), on the next command to each LUN.  The reconnect is the library's to
 * hide, so a task it carried over is issued again on such a sense, as the
 * kernel's SCSI layer retries unit attentions.  Other unit attentions, and
 * those on tasks submitted after the reconnect, reach the caller.
 */
static bool retry_after_reconnect(struct isc_session *s, struct isc_task *t, uint8_t status)
{
	enum { CHECK_CONDITION = 0x02, UNIT_ATTENTION = 0x6, ASC_RESET_OCCURRED = 0x29 };
	if (status != CHECK_CONDITION || !t->carried || t->ua_retries >= 3 || t->pdus || !t->res.sense.valid ||
	    t->res.sense.key != UNIT_ATTENTION || t->res.sense.asc != ASC_RESET_OCCURRED)
		return false;
	t->ua_retries++;
	if (t->nseq)
		isc_dout_drop(s, t);
	list_del(&s->fly_head, &s->fly_tail, t);
	s->nfly_scsi--;
	t->issued = false;
	list_add(&s->wait_head, &s->wait_tail, t);
	return true;
}

static void scsi_done(struct isc_session *s, struct isc_task *t, uint8_t status)
{
	/* A status came: this target works, whatever it did to earlier connections. */
	s->proto_drops = 0;
	if (retry_after_reconnect(s, t, status))
		return;
	t->res.status = status;
	isc_task_finish(s, t, status ? -EIO : 0);
}

static void rx_data_in(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_data_in *d = (const void *)rx->bhs;
	isc_update_sn(s, be32toh(d->exp_cmdsn), be32toh(d->max_cmdsn));
	struct isc_task *t = isc_task_by_itt(s, be32toh(d->itt));
	if (!t || !t->issued)
		return;
	if (rx->data_digest_error) {
		isc_conn_lost(s, -EIO, "data digest error on Data-In");
		return;
	}
	if (be32toh(d->datasn) != t->next_datasn) {
		isc_conn_lost(s, -EPROTO, "Data-In out of sequence");
		return;
	}
	t->next_datasn++;
	t->data_in += rx->data_len;
	if (d->flags & PDU_DATAIN_STATUS) {
		if (!(d->flags & PDU_FLAG_FINAL)) {
			isc_conn_lost(s, -EPROTO, "Data-In with status but without the F bit");
			return;
		}
		uint32_t statsn = be32toh(d->statsn);
		if (serial_ge(statsn, s->exp_statsn))
			s->exp_statsn = statsn + 1;
		take_residual(&t->res, d->flags, be32toh(d->resid));
		scsi_done(s, t, d->status);
	}
}

static void rx_scsi_rsp(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_scsi_rsp *r = (const void *)rx->bhs;
	isc_update_sn(s, be32toh(r->exp_cmdsn), be32toh(r->max_cmdsn));
	uint32_t statsn = be32toh(r->statsn);
	if (serial_ge(statsn, s->exp_statsn))
		s->exp_statsn = statsn + 1;
	struct isc_task *t = isc_task_by_itt(s, be32toh(r->itt));
	if (!t || !t->issued)
		return;
	if (r->response != PDU_RESPONSE_COMPLETED) {
		isc_seterr(s, "target failure (iSCSI response 0x%02x)", r->response);
		t->res.err = -EIO;
		scsi_done(s, t, r->status);
		return;
	}
	take_residual(&t->res, r->flags, be32toh(r->resid));
	if (rx->data && rx->data_len >= 2) {
		uint32_t sl = get_be16(rx->data);
		if (sl > rx->data_len - 2)
			sl = rx->data_len - 2;
		isc_sense_parse(rx->data + 2, sl, &t->res.sense);
	}
	scsi_done(s, t, r->status);
}

static void rx_tmf_rsp(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_tmf_rsp *r = (const void *)rx->bhs;
	isc_update_sn(s, be32toh(r->exp_cmdsn), be32toh(r->max_cmdsn));
	uint32_t statsn = be32toh(r->statsn);
	if (serial_ge(statsn, s->exp_statsn))
		s->exp_statsn = statsn + 1;
	struct isc_task *t = isc_task_by_itt(s, be32toh(r->itt));
	if (!t || t->kind != ISC_K_TMF)
		return;
	t->tmf_response = r->response;
	/* Function complete or no such task: the aborted task will not answer any more. */
	struct isc_task *ref = t->has_ref ? isc_task_by_itt(s, t->ref_itt) : NULL;
	if (ref && (r->response == PDU_TMF_RSP_COMPLETE || r->response == PDU_TMF_RSP_NO_TASK) &&
	    !ref->completed) {
		isc_seterr(s, "task aborted");
		isc_task_finish(s, ref, -ECANCELED);
	}
	/* After an LU reset the target answers none of that LUN's tasks. */
	if ((t->bhs[1] & 0x7f) == PDU_TMF_LU_RESET && r->response == PDU_TMF_RSP_COMPLETE) {
		uint64_t lun = pdu_lun_decode(pdu_lun(t->bhs));
		for (struct isc_task *x = s->fly_head; x;) {
			struct isc_task *next = x->next;
			if (x->kind == ISC_K_SCSI && x->cmd.lun == lun)
				isc_task_finish(s, x, -ECANCELED);
			x = next;
		}
	}
	isc_task_finish(s, t, 0);
}

static void rx_text_rsp(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_text *r = (const void *)rx->bhs;
	isc_update_sn(s, be32toh(r->sn2), be32toh(r->max_cmdsn));
	uint32_t statsn = be32toh(r->sn1);
	if (serial_ge(statsn, s->exp_statsn))
		s->exp_statsn = statsn + 1;
	struct isc_task *t = isc_task_by_itt(s, be32toh(r->itt));
	if (!t || t->kind != ISC_K_TEXT)
		return;
	if (rx->data && rx->data_len) {
		if (t->text.len + rx->data_len > TEXT_MAX_TOTAL) {
			isc_seterr(s, "text response longer than %u bytes", TEXT_MAX_TOTAL);
			isc_task_finish(s, t, -E2BIG);
			return;
		}
		text_append(&t->text, rx->data, rx->data_len);
	}
	if (r->flags & PDU_FLAG_FINAL) {
		isc_task_finish(s, t, t->text.oom ? -ENOMEM : 0);
		return;
	}
	/* More to come: an empty Text Request with the target's TTT asks for it (an answer: capped). */
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_text *q = (void *)bhs;
	q->opcode = PDU_OP_TEXT_REQ | PDU_FLAG_IMMEDIATE;
	q->flags = PDU_FLAG_FINAL;
	q->itt = r->itt;
	q->ttt = r->ttt;
	q->sn1 = htobe32(s->cmdsn);
	pdu_set_lun(bhs, 0);
	int rc = isc_send_reply(s, bhs, NULL, 0, t);
	if (rc)
		isc_task_finish(s, t, rc);
}

void isc_task_rx(struct isc_session *s, struct xp_rx *rx)
{
	switch (pdu_opcode(rx->bhs)) {
	case PDU_OP_DATA_IN:
		rx_data_in(s, rx);
		break;
	case PDU_OP_SCSI_RSP:
		rx_scsi_rsp(s, rx);
		break;
	case PDU_OP_R2T:
		isc_r2t_rx(s, rx);
		break;
	case PDU_OP_TMF_RSP:
		rx_tmf_rsp(s, rx);
		break;
	case PDU_OP_TEXT_RSP:
		rx_text_rsp(s, rx);
		break;
	default:
		break;
	}
}

/* After a connection loss: SCSI tasks go back to the front of the queue, in order. */
void isc_tasks_requeue(struct isc_session *s)
{
	/* Data-Out belongs to the connection: the target asks again on the new one. */
	isc_dout_drop_all(s);
	struct isc_task *t = s->fly_tail;
	while (t) {
		struct isc_task *prev = t->prev;
		list_del(&s->fly_head, &s->fly_tail, t);
		t->issued = false;
		if (t->kind == ISC_K_SCSI)
			s->nfly_scsi--;
		if (t->kind == ISC_K_SCSI) {
			t->next = s->wait_head;
			t->prev = NULL;
			if (s->wait_head)
				s->wait_head->prev = t;
			else
				s->wait_tail = t;
			s->wait_head = t;
		} else {
			/* Control requests belong to the old connection. */
			list_add(&s->wait_head, &s->wait_tail, t);
			t->completed = false;
			isc_task_finish(s, t, -ECONNRESET);
		}
		t = prev;
	}
	/* Waiting control requests are not carried over either. */
	for (t = s->wait_head; t;) {
		struct isc_task *next = t->next;
		if (t->kind != ISC_K_SCSI)
			isc_task_finish(s, t, -ECONNRESET);
		else
			t->carried = true;
		t = next;
	}
}

void isc_tasks_fail_all(struct isc_session *s, int err)
{
	while (s->fly_head)
		isc_task_finish(s, s->fly_head, err);
	while (s->wait_head)
		isc_task_finish(s, s->wait_head, err);
}

/* Session teardown: tasks whose PDUs never completed (transport gone). */
void isc_tasks_free_all(struct isc_session *s)
{
	isc_dout_drop_all(s);
	for (uint32_t i = 0; i < s->nslots; i++) {
		struct isc_task *t = s->slots[i];
		if (t)
			task_release(s, t);
	}
}

/* ---- task management ---- */

static int tmf_submit(struct isc_session *s, uint8_t func, uint64_t lun, struct isc_task *ref, isc_tmf_cb cb,
		      void *arg)
{
	if (s->state != ISC_S_FFP)
		return -ENOTCONN;
	struct isc_task *t = isc_task_alloc(s, ISC_K_TMF);
	if (!t)
		return -ENOMEM;
	struct pdu_tmf_req *m = (void *)t->bhs;
	m->function = func;
	pdu_set_lun(t->bhs, pdu_lun_encode(lun));
	m->ref_itt = htobe32(PDU_RESERVED_TAG);
	if (ref) {
		t->has_ref = true;
		t->ref_itt = ref->itt;
	}
	t->tmf_cb = cb;
	t->arg = arg;
	isc_task_queue(s, t);
	isc_task_pump(s);
	return 0;
}

int isc_abort_task_async(struct isc_session *s, struct isc_task *ref, isc_tmf_cb cb, void *arg)
{
	if (!ref || ref->kind != ISC_K_SCSI || ref->completed)
		return -EINVAL;
	if (!ref->issued) {
		/* Never sent: drop it here. */
		isc_task_finish(s, ref, -ECANCELED);
		return -EALREADY;
	}
	return tmf_submit(s, PDU_TMF_ABORT_TASK, ref->cmd.lun, ref, cb, arg);
}

int isc_lu_reset_async(struct isc_session *s, uint64_t lun, isc_tmf_cb cb, void *arg)
{
	return tmf_submit(s, PDU_TMF_LU_RESET, lun, NULL, cb, arg);
}
