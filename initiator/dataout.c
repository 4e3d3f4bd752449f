/*
 * Data-Out over TCP: the unsolicited burst of a write and the sequence each
 * R2T asks for wait in one queue per session, in the order they were asked
 * for, and go out as PDUs while the send queue has room (ISC_SENDQ_BYTES):
 * a target that stops reading, or asks faster than it reads, holds at most
 * that much of ours plus one PDU, not a PDU per R2T.  The PDUs point into
 * the caller's buffer; a waiting sequence costs one small record.
 *
 * The rules an R2T must keep (RFC 7143 sec. 11.8 and 13.17) are checked
 * before anything is queued for it: a SCSI write it belongs to, R2TSN in
 * order from 0, a Desired Data Transfer Length from 1 to MaxBurstLength,
 * the range inside the write's expected transfer length, and at most
 * MaxOutstandingR2T R2Ts of the task whose last Data-Out has not left.  A
 * target that breaks one loses the connection (isc_proto_drop).
 */
#include <errno.h>
#include <stdlib.h>

#include "common/util.h"
#include "isc_internal.h"

struct isc_seq {
	struct isc_seq *next;
	struct isc_task *t;
	uint32_t ttt, off, end, datasn;
	bool r2t;
};

int isc_dout_add(struct isc_session *s, struct isc_task *t, uint32_t ttt, uint32_t off, uint32_t len, bool r2t)
{
	struct isc_seq *q = malloc(sizeof(*q));
	if (!q)
		return -ENOMEM;
	*q = (struct isc_seq){ .t = t, .ttt = ttt, .off = off, .end = off + len, .r2t = r2t };
	if (s->seq_tail)
		s->seq_tail->next = q;
	else
		s->seq_head = q;
	s->seq_tail = q;
	t->nseq++;
	if (r2t)
		t->r2t_out++;
	return 0;
}

/* Unlink q (prev is the one before it, or NULL) and free it. */
static void seq_free(struct isc_session *s, struct isc_seq *prev, struct isc_seq *q, bool done)
{
	if (prev)
		prev->next = q->next;
	else
		s->seq_head = q->next;
	if (s->seq_tail == q)
		s->seq_tail = prev;
	q->t->nseq--;
	/* Dropped before its last PDU was queued: that PDU's completion will not count it off. */
	if (!done && q->r2t && q->t->r2t_out)
		q->t->r2t_out--;
	free(q);
}

void isc_dout_pump(struct isc_session *s)
{
	bool ffp = s->state == ISC_S_FFP || s->state == ISC_S_LOGOUT;
	uint32_t max = isc_send_dsl(s);
	while (s->seq_head && ffp && s->xc && !isc_sendq_full(s)) {
		struct isc_seq *q = s->seq_head;
		struct isc_task *t = q->t;
		uint32_t n = MIN(q->end - q->off, max);
		bool last = n == q->end - q->off;
		uint8_t bhs[PDU_BHS_LEN] = { 0 };
		struct pdu_data_out *d = (void *)bhs;
		d->opcode = PDU_OP_DATA_OUT;
		d->flags = last ? PDU_FLAG_FINAL : 0;
		pdu_set_lun(bhs, pdu_lun_encode(t->cmd.lun));
		d->itt = htobe32(t->itt);
		d->ttt = htobe32(q->ttt);
		d->datasn = htobe32(q->datasn++);
		d->offset = htobe32(q->off);
		int rc = isc_send_bhs(s, bhs, (const uint8_t *)t->cmd.data + q->off, n,
				      last && q->r2t ? ISC_TX_R2T_END : 0, t);
		if (rc) {
			isc_conn_lost(s, rc, "cannot send Data-Out");
			return;
		}
		q->off += n;
		if (last)
			seq_free(s, NULL, q, true);
	}
}

void isc_dout_drop(struct isc_session *s, struct isc_task *t)
{
	struct isc_seq *prev = NULL, *q = s->seq_head;
	while (q && t->nseq) {
		struct isc_seq *next = q->next;
		if (q->t == t)
			seq_free(s, prev, q, false);
		else
			prev = q;
		q = next;
	}
}

void isc_dout_drop_all(struct isc_session *s)
{
	while (s->seq_head)
		seq_free(s, NULL, s->seq_head, false);
}

void isc_r2t_rx(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_r2t *r = (const void *)rx->bhs;
	isc_update_sn(s, be32toh(r->exp_cmdsn), be32toh(r->max_cmdsn));
	struct isc_task *t = isc_task_by_itt(s, be32toh(r->itt));
	if (!t || !t->issued)
		return; /* a task we gave up on (aborted, or answered already): nothing to send */
	const struct neg_params *n = &s->params;
	uint32_t off = be32toh(r->offset), len = be32toh(r->length), sn = be32toh(r->r2tsn), itt = t->itt;
	uint32_t max_out = n->max_outstanding_r2t ? n->max_outstanding_r2t : 1;
	if (t->kind != ISC_K_SCSI || t->cmd.dir != ISC_DIR_WRITE) {
		isc_proto_drop(s, "target sent an R2T for a task that writes nothing (ITT 0x%08x)", itt);
		return;
	}
	if (sn != t->next_r2tsn) {
		isc_proto_drop(s, "target sent an R2T with R2TSN %u, expected %u (ITT 0x%08x)", sn, t->next_r2tsn,
			       itt);
		return;
	}
	if (!len || len > n->max_burst) {
		isc_proto_drop(s, "target asked for %u bytes in one R2T; MaxBurstLength is %u (ITT 0x%08x)", len,
			       n->max_burst, itt);
		return;
	}
	if (off > t->cmd.len || len > t->cmd.len - off) {
		isc_proto_drop(s, "target sent an R2T for [%u, +%u), outside the %u-byte write (ITT 0x%08x)", off,
			       len, t->cmd.len, itt);
		return;
	}
	if (t->r2t_out >= max_out) {
		isc_proto_drop(s, "target sent an R2T beyond MaxOutstandingR2T=%u: %u not yet answered (ITT 0x%08x)",
			       max_out, t->r2t_out, itt);
		return;
	}
	t->next_r2tsn++;
	int rc = isc_dout_add(s, t, be32toh(r->ttt), off, len, true);
	if (rc) {
		isc_conn_lost(s, rc, "cannot queue Data-Out");
		return;
	}
	isc_dout_pump(s);
}
