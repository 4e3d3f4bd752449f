/*
 * Third-party copy (SPC-4 6.4, 6.18, 7.8.17): EXTENDED COPY (LID1) with
 * identification CSCD descriptors (E4h) and block device to block device
 * segments (02h), RECEIVE COPY RESULTS (COPY STATUS, OPERATING
 * PARAMETERS) and the third-party copy VPD page.
 *
 * The LU that receives the command is the copy manager; the copy targets
 * are LUs of this target that the issuing I_T nexus has mapped, named by
 * their NAA designator (VPD 83h).  The whole list is checked before a block
 * moves.  The data then moves inside the target through the copy engine
 * (copy.c, shared with WRITE USING TOKEN): chunks read into pool buffers
 * and written from them, a few in flight, all on the issuing reactor.  The
 * command ends only when nothing is in flight any more, so an abort or a
 * lost connection (the transport sets cmd->stop) stops issuing chunks and
 * leaves neither a buffer nor a callback behind.
 */
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "target/scsi/copy/copy.h"
#include "target/scsi/copy/rod.h"
#include "target/scsi/copy/xcopy.h"
#include "target/scsi/scsi_int.h"

/* Additional sense codes of copy operations (SPC-4 D.2), used only here. */
#define ASC_NO_ADDITIONAL_SENSE          0x0000
#define ASC_OPERATION_IN_PROGRESS        0x0016
#define ASC_THIRD_PARTY_DEVICE_FAILURE   0x0d01
#define ASC_COPY_TARGET_NOT_REACHABLE    0x0d02
#define ASC_TOO_MANY_TARGET_DESCS        0x2606
#define ASC_UNSUPPORTED_TARGET_DESC_TYPE 0x2607
#define ASC_TOO_MANY_SEGMENT_DESCS       0x2608
#define ASC_UNSUPPORTED_SEGMENT_DESC     0x2609
#define ASC_INSUFFICIENT_RESOURCES       0x5503

enum { TGT_DESC_ID = 0xe4, SEG_DESC_B2B = 0x02, SEG_DESC_B2B_LEN = 0x18 };
enum { RCR_COPY_STATUS = 0x00, RCR_OP_PARAMS = 0x03 };
enum { CM_IN_PROGRESS = 0x00, CM_GOOD = 0x01, CM_ERROR = 0x02 };

/* ---- parameter list ---- */

static int perr(struct xcopy_err *e, uint8_t key, uint16_t asc, uint32_t field, int bit)
{
	e->key = key;
	e->asc = asc;
	e->field = (uint16_t)field;
	e->bit = (int8_t)bit;
	e->no_sks = 0;
	return -1;
}

static int plle(struct xcopy_err *e)
{
	perr(e, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR, 0, -1);
	e->no_sks = 1;
	return -1;
}

static int parse_tgt(const uint8_t *d, uint32_t off, struct xcopy_tgt *t, struct xcopy_err *e)
{
	if (d[0] != TGT_DESC_ID)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_UNSUPPORTED_TARGET_DESC_TYPE, off, -1);
	/* LU ID TYPE and NUL are obsolete in SPC-4 and ignored; only block devices are copied. */
	if (d[1] & 0x1f)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, off + 1, 4);
	if (d[7] > sizeof(t->desig))
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, off + 7, 7);
	t->off = (uint16_t)off;
	t->assoc = (d[5] >> 4) & 3;
	t->desig_type = d[5] & 0x0f;
	t->desig_len = d[7];
	memcpy(t->desig, d + 8, t->desig_len);
	t->block_len = get_be24(d + 29);
	return 0;
}

int xcopy_parse(const uint8_t *p, uint32_t len, struct xcopy_list *l, struct xcopy_err *e)
{
	memset(l, 0, offsetof(struct xcopy_list, tgt));
	if (len < 16)
		return plle(e);
	l->list_id = p[0];
	l->usage = (p[1] >> 3) & 3;
	if (l->usage == 1)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 1, 4);
	if (l->usage == XCOPY_USAGE_NONE && l->list_id)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 0, 7);
	uint32_t tdl = get_be16(p + 2), sdl = get_be32(p + 8), idl = get_be32(p + 12);
	if (idl)   /* MAXIMUM INLINE DATA LENGTH is 0 */
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 12, 7);
	if ((uint64_t)tdl + sdl > XCOPY_MAX_DESC_LIST || 16 + (uint64_t)tdl + sdl > len)
		return plle(e);
	if (tdl > XCOPY_MAX_TGT_DESCS * 32)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_TOO_MANY_TARGET_DESCS, 2, -1);

	uint32_t off = 16, end = 16 + tdl;
	while (off < end) {
		/* Every supported CSCD descriptor is 32 bytes; a shorter tail is a wrong length field. */
		if (end - off < 32) {
			if (p[off] != TGT_DESC_ID)
				return perr(e, SK_ILLEGAL_REQUEST, ASC_UNSUPPORTED_TARGET_DESC_TYPE, off, -1);
			return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 2, -1);
		}
		if (parse_tgt(p + off, off, &l->tgt[l->ntgt], e))
			return -1;
		l->ntgt++;
		off += 32;
	}

	end += sdl;
	while (off < end) {
		if (end - off < 4)
			return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 8, -1);
		const uint8_t *d = p + off;
		uint32_t dl = get_be16(d + 2);
		if (dl > end - off - 4)
			return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, off + 2, -1);
		if (l->nseg == XCOPY_MAX_SEG_DESCS)
			return perr(e, SK_ILLEGAL_REQUEST, ASC_TOO_MANY_SEGMENT_DESCS, 8, -1);
		if (d[0] != SEG_DESC_B2B)
			return perr(e, SK_ILLEGAL_REQUEST, ASC_UNSUPPORTED_SEGMENT_DESC, off, -1);
		if (dl != SEG_DESC_B2B_LEN)
			return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, off + 2, -1);
		/* DC and CAT change nothing here: both copy targets have one block size, no residue. */
		struct xcopy_seg *s = &l->seg[l->nseg++];
		s->off = (uint16_t)off;
		s->src = get_be16(d + 4);
		s->dst = get_be16(d + 6);
		s->nblocks = get_be16(d + 10);
		s->src_lba = get_be64(d + 12);
		s->dst_lba = get_be64(d + 20);
		off += 4 + dl;
	}
	return 0;
}

/* ---- sense ---- */

static void set_err(struct scsi_cmd *cmd, const struct xcopy_err *e)
{
	if (e->no_sks)
		sense_set(cmd, e->key, e->asc);
	else
		sense_set_field(cmd, e->key, e->asc, false, e->field, e->bit);
}

/*
 * COPY ABORTED for segment seg (SPC-4 6.4.3.x): the segment pointer
 * (SD=1: FIELD POINTER is the byte in that segment descriptor) and the
 * segment's number in COMMAND-SPECIFIC INFORMATION; INFORMATION, when
 * valid, the blocks of the segment not known to be written.
 */
static void copy_aborted(struct scsi_cmd *cmd, uint16_t asc, uint32_t seg, uint16_t field, bool iv, uint64_t info)
{
	uint8_t sks[3] = { 0x80 | 0x20 };
	bool desc = sense_desc_format(cmd);

	put_be16(sks + 1, field);
	cmd->status = SCSI_CHECK_CONDITION;
	cmd->din_len = 0;
	cmd->sense_len = sense_build(cmd->sense, desc, SK_COPY_ABORTED, asc, iv, info, sks);
	if (!desc) {
		put_be32(cmd->sense + 8, seg);
		return;
	}
	uint32_t n = cmd->sense_len;
	cmd->sense[n] = 0x01;       /* command-specific information descriptor */
	cmd->sense[n + 1] = 0x0a;
	put_be64(cmd->sense + n + 4, seg);
	n += 12;
	cmd->sense[7] = (uint8_t)(n - 8);
	cmd->sense_len = n;
}

/* ---- list identifiers held per nexus (lu->mu) ---- */

static struct lu_nexus *nexus_find(struct scsi_lu *lu, const struct scsi_nexus *nx)
{
	if (!nx)
		return NULL;
	for (struct lu_nexus *n = lu->nexuses; n; n = n->next)
		if (n->id == nx->id)
			return n;
	return NULL;
}

static uint32_t id_seq;   /* ages of held entries, for eviction (atomic: LUs on every reactor count here) */

/*
 * Take a slot for a copy: refused while the same list identifier runs, or
 * when every slot runs a copy.  A held result of the same identifier, else
 * the oldest held result, gives way.  Returns the slot or -1 with sense.
 */
static int id_take(struct scsi_cmd *cmd, const struct xcopy_list *l)
{
	struct scsi_lu *lu = cmd->lu;
	int slot = -1;

	pthread_mutex_lock(&lu->mu);
	struct lu_nexus *n = lu_nexus_get(lu, cmd->nexus);
	if (!n) {
		pthread_mutex_unlock(&lu->mu);
		return -2;   /* no nexus (tools, tests) or no memory: nothing held */
	}
	bool named = l->usage != XCOPY_USAGE_NONE;
	for (int i = 0; i < XCOPY_IDS_MAX; i++) {
		struct xcopy_id *x = &n->xcopy_ids[i];
		if (x->state == XCOPY_ID_RUNNING && x->named && named && x->list_id == l->list_id) {
			pthread_mutex_unlock(&lu->mu);
			sense_set_field(cmd, SK_ILLEGAL_REQUEST, ASC_OPERATION_IN_PROGRESS, false, 0, -1);
			return -1;
		}
	}
	for (int i = 0; i < XCOPY_IDS_MAX && slot < 0; i++)
		if (n->xcopy_ids[i].state == XCOPY_ID_HELD && named && n->xcopy_ids[i].list_id == l->list_id)
			slot = i;
	for (int i = 0; i < XCOPY_IDS_MAX && slot < 0; i++)
		if (n->xcopy_ids[i].state == XCOPY_ID_FREE)
			slot = i;
	for (int i = 0; i < XCOPY_IDS_MAX; i++)
		if (n->xcopy_ids[i].state == XCOPY_ID_HELD && slot < 0)
			slot = i;
		else if (n->xcopy_ids[i].state == XCOPY_ID_HELD && n->xcopy_ids[slot].state == XCOPY_ID_HELD &&
			 (int32_t)(n->xcopy_ids[i].seq - n->xcopy_ids[slot].seq) < 0)
			slot = i;
	if (slot < 0) {
		pthread_mutex_unlock(&lu->mu);
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_INSUFFICIENT_RESOURCES);
		return -1;
	}
	struct xcopy_id *x = &n->xcopy_ids[slot];
	memset(x, 0, sizeof(*x));
	x->state = XCOPY_ID_RUNNING;
	x->named = named;
	x->list_id = l->list_id;
	x->seq = __atomic_add_fetch(&id_seq, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lu->mu);
	return slot;
}

/* The copy ended: hold its result (LIST ID USAGE 00b) or free the slot.  The nexus may be gone. */
static void id_end(struct scsi_cmd *cmd, int slot, uint8_t usage, uint8_t status, uint16_t segs, uint64_t bytes)
{
	struct scsi_lu *lu = cmd->lu;

	pthread_mutex_lock(&lu->mu);
	struct lu_nexus *n = nexus_find(lu, cmd->nexus);
	if (n) {
		struct xcopy_id *x = &n->xcopy_ids[slot];
		if (usage == XCOPY_USAGE_HOLD) {
			x->state = XCOPY_ID_HELD;
			x->cm_status = status;
			x->segs = segs;
			x->bytes = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
			x->seq = __atomic_add_fetch(&id_seq, 1, __ATOMIC_RELAXED);
		} else {
			x->state = XCOPY_ID_FREE;
		}
	}
	pthread_mutex_unlock(&lu->mu);
}

/* ---- the copy ---- */

struct xtarget {
	struct scsi_lu *lu;   /* NULL: not resolved (yet) */
	bool ro;
};

struct xjob {
	struct copy_job c;       /* first: the engine's part (copy.c) */
	struct xcopy_list l;
	struct xtarget t[XCOPY_MAX_TGT_DESCS];
	int slot;                /* list identifier slot, < 0: none */
};

static bool tgt_is(const struct xcopy_tgt *t, const struct scsi_lu *lu)
{
	uint8_t id[16];

	if (t->desig_type != 3 || t->assoc != 0 || t->desig_len != 16)
		return false;
	lu_naa(lu, id);
	return memcmp(id, t->desig, 16) == 0;
}

/* The LU a CSCD descriptor names among those the nexus sees; false if none. */
static bool resolve(struct xjob *j, unsigned idx)
{
	struct scsi_cmd *cmd = j->c.cmd;
	const struct scsi_lun_map *m = cmd->lun_map;
	struct xtarget *x = &j->t[idx];
	const struct xcopy_tgt *t = &j->l.tgt[idx];

	if (x->lu)
		return true;
	if (!m || !m->lu_at) {
		if (tgt_is(t, cmd->lu)) {
			x->lu = cmd->lu;
			x->ro = cmd->read_only;
		}
		return x->lu != NULL;
	}
	for (uint32_t i = 0; i < m->count; i++) {
		bool ro = false;
		struct scsi_lu *lu = m->lu_at(m, i, &ro);
		if (!lu || !tgt_is(t, lu))
			continue;
		/* Mapped twice: writable if any of its LUNs is. */
		x->ro = x->lu ? x->ro && ro : ro;
		x->lu = lu;
	}
	return x->lu != NULL;
}

/* Everything about the segments that can be known before a block moves. */
static bool check_segments(struct xjob *j)
{
	struct scsi_cmd *cmd = j->c.cmd;
	uint64_t total = 0;

	for (uint32_t k = 0; k < j->l.nseg; k++) {
		const struct xcopy_seg *s = &j->l.seg[k];
		if (s->src >= j->l.ntgt || !resolve(j, s->src)) {
			copy_aborted(cmd, ASC_COPY_TARGET_NOT_REACHABLE, k, 4, false, 0);
			return false;
		}
		if (s->dst >= j->l.ntgt || !resolve(j, s->dst)) {
			copy_aborted(cmd, ASC_COPY_TARGET_NOT_REACHABLE, k, 6, false, 0);
			return false;
		}
		const struct xtarget *src = &j->t[s->src], *dst = &j->t[s->dst];
		if (j->l.tgt[s->src].block_len != src->lu->block_size) {
			sense_invalid_param(cmd, j->l.tgt[s->src].off + 29, 7);
			return false;
		}
		if (j->l.tgt[s->dst].block_len != dst->lu->block_size) {
			sense_invalid_param(cmd, j->l.tgt[s->dst].off + 29, 7);
			return false;
		}
		/* One block size on both sides: a segment never splits a block. */
		if (src->lu->block_size != dst->lu->block_size) {
			sense_invalid_param(cmd, s->off + 6, 7);
			return false;
		}
		uint64_t bytes = (uint64_t)s->nblocks << src->lu->block_shift;
		if (bytes > XCOPY_MAX_SEG_BYTES) {
			sense_invalid_param(cmd, s->off + 10, 7);
			return false;
		}
		total += bytes;
		if (total > XCOPY_MAX_TOTAL_BYTES) {
			sense_invalid_param(cmd, s->off + 10, 7);
			return false;
		}
		if (copy_lu_unready(src->lu) || copy_lu_unready(dst->lu)) {
			copy_aborted(cmd, ASC_COPY_TARGET_NOT_REACHABLE, k, copy_lu_unready(src->lu) ? 4 : 6, false, 0);
			return false;
		}
		uint64_t snb = lu_nblocks(src->lu), dnb = lu_nblocks(dst->lu);
		if (s->src_lba > snb || s->nblocks > snb - s->src_lba) {
			copy_aborted(cmd, ASC_NO_ADDITIONAL_SENSE, k, 12, false, 0);
			return false;
		}
		if (s->dst_lba > dnb || s->nblocks > dnb - s->dst_lba) {
			copy_aborted(cmd, ASC_NO_ADDITIONAL_SENSE, k, 20, false, 0);
			return false;
		}
		/* The destination as a WRITE from this nexus would find it: mapping, backstore, SWP. */
		if (dst->ro || backstore_readonly(dst->lu->bs) || lu_flag(&dst->lu->swp)) {
			sense_set(cmd, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
			return false;
		}
		if (copy_pr_blocks(src->lu, cmd->nexus, SCSI_OP_READ16) ||
		    copy_pr_blocks(dst->lu, cmd->nexus, SCSI_OP_WRITE16)) {
			cmd->status = SCSI_RESERVATION_CONFLICT;
			cmd->sense_len = 0;
			return false;
		}
	}
	return true;
}

static bool xseg(struct copy_job *c, uint32_t k, struct copy_seg *s)
{
	const struct xjob *j = (const struct xjob *)c;

	if (k >= j->l.nseg)
		return false;
	const struct xcopy_seg *x = &j->l.seg[k];
	s->src = j->t[x->src].lu;
	s->dst = j->t[x->dst].lu;
	s->src_lba = x->src_lba;
	s->dst_lba = x->dst_lba;
	s->nblocks = x->nblocks;
	return true;
}

static void xend(struct copy_job *c)
{
	struct xjob *j = (struct xjob *)c;
	struct scsi_cmd *cmd = c->cmd;
	bool ok = !cmd->stop && !c->failed && !c->nomem && !c->unready;

	if (j->slot >= 0)
		id_end(cmd, j->slot, j->l.usage, ok ? CM_GOOD : CM_ERROR, (uint16_t)c->segs_done, c->bytes_done);
	if (cmd->stop) {
		cmd->status = SCSI_TASK_ABORTED;
		cmd->sense_len = 0;
	} else if (c->unready == cmd->lu) {
		/* The copy manager's own LU is being sanitized: what any command to it gets (SBC-4 4.11). */
		lu_sanitize_refuse(cmd, c->unready_state);
	} else if (c->unready) {
		copy_aborted(cmd, ASC_COPY_TARGET_NOT_REACHABLE, c->seg, c->unready == c->s.src ? 4 : 6, true,
			     c->seg_resid);
	} else if (c->failed) {
		copy_aborted(cmd, ASC_THIRD_PARTY_DEVICE_FAILURE, c->seg, 0, true, c->seg_resid);
	} else if (c->nomem) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
	}
	free(j);
	scsi_cmd_complete(cmd);
}

static bool xuses(const struct copy_job *c, const struct scsi_lu *lu)
{
	const struct xjob *j = (const struct xjob *)c;

	for (unsigned i = 0; i < XCOPY_MAX_TGT_DESCS; i++)
		if (j->t[i].lu == lu)
			return true;
	return false;
}

static const struct copy_ops xcopy_ops = { .seg = xseg, .end = xend, .uses_lu = xuses };

bool xcopy_prep(struct scsi_cmd *cmd)
{
	uint32_t plen = get_be32(cmd->cdb + 10);

	cmd->resid = (int64_t)cmd->edtl - plen;
	if (!plen)
		return true;   /* SPC-4 6.4.1: nothing to do, and not an error */
	if (plen > XCOPY_MAX_PARAM_LEN) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		return false;
	}
	cmd->dout_len = cmd->dir_write ? MIN(plen, cmd->edtl) : 0;
	cmd->state = plen;
	if (!cmd->dout_len)
		return true;
	cmd->buf = scsi_buf_get(cmd, cmd->dout_len);
	if (!cmd->buf) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		return false;
	}
	return true;
}

void xcopy_exec(struct scsi_cmd *cmd)
{
	uint32_t plen = cmd->state;
	struct xcopy_err e;
	struct xjob *j;

	if (!plen) {
		scsi_cmd_complete(cmd);
		return;
	}
	if (cmd->dout_len < plen) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		scsi_cmd_complete(cmd);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		scsi_cmd_complete(cmd);
		return;
	}
	j->c.cmd = cmd;
	j->c.ops = &xcopy_ops;
	j->slot = -1;
	if (xcopy_parse(cmd->buf->data, plen, &j->l, &e)) {
		set_err(cmd, &e);
		goto refused;
	}
	if (!check_segments(j))
		goto refused;
	j->slot = id_take(cmd, &j->l);
	if (j->slot == -1)
		goto refused;
	if (j->slot < 0)
		j->slot = -1;
	/* The Data-Out buffer is not needed any more: the pool gets it back before the copy takes chunks. */
	bufpool_put(cmd->buf);
	cmd->buf = NULL;
	copy_start(&j->c);
	return;
refused:
	free(j);
	scsi_cmd_complete(cmd);
}

/* ---- RECEIVE COPY RESULTS ---- */

static void copy_status(struct scsi_cmd *cmd, uint32_t alloc)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t list_id = cmd->cdb[2];
	struct xcopy_id x = { 0 };

	pthread_mutex_lock(&lu->mu);
	struct lu_nexus *n = nexus_find(lu, cmd->nexus);
	for (int i = 0; n && i < XCOPY_IDS_MAX; i++)
		if (n->xcopy_ids[i].state != XCOPY_ID_FREE && n->xcopy_ids[i].named &&
		    n->xcopy_ids[i].list_id == list_id)
			x = n->xcopy_ids[i];
	pthread_mutex_unlock(&lu->mu);
	if (x.state == XCOPY_ID_FREE) {
		/* No copy of that list identifier runs or is held (SPC-4 6.18.2). */
		sense_invalid_cdb(cmd, 2, 7);
		return;
	}
	uint8_t d[12] = { 0 };
	put_be32(d, sizeof(d) - 4);
	d[4] = x.state == XCOPY_ID_RUNNING ? CM_IN_PROGRESS : x.cm_status;
	put_be16(d + 5, x.segs);
	d[7] = 0x00;   /* TRANSFER COUNT UNITS: bytes */
	put_be32(d + 8, x.bytes);
	scsi_cmd_din(cmd, d, sizeof(d), alloc);
}

static const uint8_t impl_descs[] = { SEG_DESC_B2B, TGT_DESC_ID };

static void op_params(struct scsi_cmd *cmd, uint32_t alloc)
{
	uint8_t d[44 + sizeof(impl_descs)] = { 0 };

	put_be32(d, sizeof(d) - 4);
	d[4] = 0x01;   /* SNLID: LIST ID USAGE 11b is supported */
	put_be16(d + 8, XCOPY_MAX_TGT_DESCS);
	put_be16(d + 10, XCOPY_MAX_SEG_DESCS);
	put_be32(d + 12, XCOPY_MAX_DESC_LIST);
	put_be32(d + 16, XCOPY_MAX_SEG_BYTES);
	put_be32(d + 20, 0);   /* MAXIMUM INLINE DATA LENGTH */
	put_be32(d + 24, 0);   /* HELD DATA LIMIT: no RECEIVE DATA */
	put_be16(d + 34, XCOPY_IDS_MAX);   /* TOTAL CONCURRENT COPIES (per nexus) */
	d[36] = XCOPY_IDS_MAX;             /* MAXIMUM CONCURRENT COPIES */
	d[37] = cmd->lu->block_shift;      /* DATA SEGMENT GRANULARITY (log2) */
	d[43] = sizeof(impl_descs);
	memcpy(d + 44, impl_descs, sizeof(impl_descs));
	scsi_cmd_din(cmd, d, sizeof(d), alloc);
}

void xcopy_receive_results(struct scsi_cmd *cmd)
{
	uint32_t alloc = get_be32(cmd->cdb + 10);

	if ((cmd->cdb[1] & 0x1f) == RCR_COPY_STATUS)
		copy_status(cmd, alloc);
	else
		op_params(cmd, alloc);
	scsi_cmd_complete(cmd);
}

/* ---- VPD 8Fh: third-party copy ---- */

static void tpc_desc_head(struct din *d, uint16_t type, uint16_t len)
{
	din_be16(d, type);
	din_be16(d, len);
}

/* The descriptors go in ascending order of type; rod.c adds those of token-based copy (0000h, 0106h, 0108h). */
void xcopy_vpd(struct scsi_cmd *cmd, struct din *d)
{
	/*
	 * Supported commands: EXTENDED COPY (LID1), RECEIVE COPY RESULTS (COPY
	 * STATUS, OPERATING PARAMETERS); with tokens also POPULATE TOKEN, WRITE
	 * USING TOKEN and RECEIVE ROD TOKEN INFORMATION.
	 */
	static const uint8_t xcmds[] = { SCSI_OP_EXTENDED_COPY, 1, 0x00,
					 SCSI_OP_RECEIVE_COPY_RESULTS, 2, RCR_COPY_STATUS, RCR_OP_PARAMS };
	static const uint8_t rcmds[] = { SCSI_OP_EXTENDED_COPY, 3, 0x00, ROD_SA_PT, ROD_SA_WUT,
					 SCSI_OP_RECEIVE_COPY_RESULTS, 3, RCR_COPY_STATUS, RCR_OP_PARAMS, ROD_SA_RRTI };
	bool rod = rod_supported(cmd->lu);
	const uint8_t *cmds = rod ? rcmds : xcmds;
	uint32_t n = rod ? sizeof(rcmds) : sizeof(xcmds);
	uint32_t l = (1 + n + 3) & ~3u;

	rod_vpd_limits(cmd, d);
	tpc_desc_head(d, 0x0001, (uint16_t)l);
	din_u8(d, (uint8_t)n);
	din_put(d, cmds, n);
	din_zero(d, l - 1 - n);

	/* Parameter data. */
	tpc_desc_head(d, 0x0004, 0x1c);
	din_zero(d, 4);
	din_be16(d, XCOPY_MAX_TGT_DESCS);
	din_be16(d, XCOPY_MAX_SEG_DESCS);
	din_be32(d, XCOPY_MAX_DESC_LIST);
	din_be32(d, 0);   /* MAXIMUM INLINE DATA LENGTH */
	din_zero(d, 12);

	/* Supported descriptors. */
	l = (1 + sizeof(impl_descs) + 3) & ~3u;
	tpc_desc_head(d, 0x0008, (uint16_t)l);
	din_u8(d, sizeof(impl_descs));
	din_put(d, impl_descs, sizeof(impl_descs));
	din_zero(d, l - 1 - sizeof(impl_descs));

	rod_vpd_features(cmd, d);

	/* General copy operations. */
	tpc_desc_head(d, 0x8001, 0x20);
	din_be32(d, XCOPY_IDS_MAX);   /* TOTAL CONCURRENT COPIES */
	din_be32(d, XCOPY_IDS_MAX);   /* MAXIMUM IDENTIFIED CONCURRENT COPIES */
	din_be32(d, XCOPY_MAX_SEG_BYTES);
	din_u8(d, cmd->lu->block_shift);   /* DATA SEGMENT GRANULARITY */
	din_u8(d, 0);                      /* INLINE DATA GRANULARITY */
	din_zero(d, 18);
}
