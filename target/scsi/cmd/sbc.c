/*
 * SBC-3 commands: READ/WRITE (6/10/12/16), WRITE AND VERIFY, VERIFY,
 * SYNCHRONIZE CACHE, PRE-FETCH, UNMAP, WRITE SAME, COMPARE AND WRITE,
 * READ CAPACITY, GET LBA STATUS; SBC-4's ORWRITE, WRITE ATOMIC and READ
 * DEFECT DATA.  The read/write path allocates one buffer
 * and the backstore moves data straight into or out of it.
 */
#include <errno.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/transport/memreg.h"
#include "common/reactor.h"
#include "common/transport/transport.h" /* ISERT_STATS: the backstore's share of a command's latency */
#include "target/scsi/scsi_int.h"

_Static_assert(sizeof(struct bs_io) <= sizeof(((struct scsi_cmd *)0)->io), "bs_io must fit in cmd->io");

/* CF_FLUSH: a FLUSH follows deallocation before GOOD (WCE=0, see dealloc_end). */
enum { CF_FUA = 1u << 0, CF_UNMAP = 1u << 1, CF_BYTCHK = 1u << 2, CF_FLUSH = 1u << 3 };

static struct bs_io *cmd_io(struct scsi_cmd *cmd)
{
	return (struct bs_io *)cmd->io;
}

/* LBA, transfer length and where the transfer length sits, by CDB group. */
static void cdb_lba_tl(const uint8_t *cdb, uint64_t *lba, uint32_t *tl, uint16_t *tl_byte)
{
	switch (cdb[0] >> 5) {
	case 0:
		*lba = get_be24(cdb + 1) & 0x1fffff;
		*tl = cdb[4] ? cdb[4] : 256;   /* READ(6)/WRITE(6): 0 means 256 */
		*tl_byte = 4;
		break;
	case 4:
		*lba = get_be64(cdb + 2);
		*tl = get_be32(cdb + 10);
		*tl_byte = 10;
		break;
	case 5:
		*lba = get_be32(cdb + 2);
		*tl = get_be32(cdb + 6);
		*tl_byte = 6;
		break;
	default:
		*lba = get_be32(cdb + 2);
		*tl = get_be16(cdb + 7);
		*tl_byte = 7;
		break;
	}
}

/* LBA range check shared by every medium command; n == 0 still needs lba inside. */
static bool lba_ok(struct scsi_cmd *cmd, uint64_t lba, uint64_t n)
{
	uint64_t nb = lu_nblocks(cmd->lu);

	if (lba >= nb || n > nb - lba) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
		return false;
	}
	return true;
}

static bool xfer_ok(struct scsi_cmd *cmd, uint64_t n, uint16_t tl_byte)
{
	if (n > (SCSI_MAX_XFER_BYTES >> cmd->lu->block_shift)) {
		sense_invalid_cdb(cmd, tl_byte, 7);
		return false;
	}
	return true;
}

static bool get_buf(struct scsi_cmd *cmd, struct buf **b, size_t len)
{
	*b = scsi_buf_get(cmd, len ? len : 1);
	if (!*b) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		return false;
	}
	return true;
}

#if ISERT_STATS
/* The backstore's share of a command's latency (statistics): every request it makes, summed. */
static void timed_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;
	cmd->bs_ns += reactor_now_ns() - cmd->bs_t0;
	cmd->bs_cb(io, res);
}
#endif

static void submit(struct scsi_cmd *cmd, enum backstore_op op, uint64_t lba, uint64_t nblocks,
		   void *data, void (*cb)(struct bs_io *, int))
{
	struct bs_io *io = cmd_io(cmd);
	uint8_t sh = cmd->lu->block_shift;

	memset(io, 0, sizeof(*io));
	io->op = op;
	io->offset = lba << sh;
	io->len = nblocks << sh;
	io->buf = data;
	io->pattern_len = op == BS_WRITE_SAME ? cmd->lu->block_size : 0;
	io->fua = (cmd->flags & CF_FUA) != 0;
	io->reactor = cmd->reactor;
	io->stop = &cmd->stop;
	io->cb = cb;
	io->priv = cmd;
#if ISERT_STATS
	cmd->bs_cb = cb;
	io->cb = timed_done;
	cmd->bs_t0 = reactor_now_ns();
#endif
	backstore_submit(cmd->lu->bs, io);
}

/* Reads at least this long go out from a store's view when it gives one.  The
 * copy a view saves grows with the length, while every view touches a count
 * all reactors share; short reads keep their copy (views were measured at 128
 * KiB and more, docs/architecture.md, not below). */
#define SBC_VIEW_MIN (16u << 10)

/* A WRITE ATOMIC of the view's blocks waited too long for it: the transport lets go. */
static void read_view_revoke(struct bs_view *v)
{
	struct scsi_cmd *cmd = container_of(v, struct scsi_cmd, view_h);
	cmd->view_revoke(cmd);
}

/*
 * The READ's blocks as the store's own bytes (no copy), where the transport
 * and the store allow it: TCP sends from any memory, RDMA from a store
 * registered with the connection's device (until that registration is done,
 * reads copy), and the transport can be made to let go (view_revoke).
 */
static bool read_view(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	size_t len = (size_t)cmd->nblocks << lu->block_shift;
	uint32_t lkey = 0;
	if (len < SBC_VIEW_MIN)
		return false;
	if (!cmd->send_any_memory) {
		struct memreg *m = cmd->rdma_xc ? backstore_memreg(lu->bs) : NULL;
		if (!m || !(lkey = memreg_lkey(m, cmd->rdma_xc)))
			return false;
	}
	if (!cmd->view_revoke)
		return false;
	cmd->view_h = (struct bs_view){ .reactor = cmd->reactor, .revoke = read_view_revoke };
	const uint8_t *p = backstore_read_view(lu->bs, &cmd->view_h, cmd->lba << lu->block_shift, len);
	if (!p)
		return false;
	cmd->view = (struct buf){ .data = (uint8_t *)p, .len = len, .cap = len, .lkey = lkey };
	cmd->buf = &cmd->view;
	return true;
}

static bool is_read_op(uint8_t opc)
{
	return opc == SCSI_OP_READ6 || opc == SCSI_OP_READ10 || opc == SCSI_OP_READ12 || opc == SCSI_OP_READ16;
}

/* READ and WRITE (and WRITE AND VERIFY): data length is min(CDB, EDTL); the residual says the rest. */
bool sbc_prep_rw(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	const uint8_t *cdb = cmd->cdb;
	uint64_t lba;
	uint32_t tl;
	uint16_t tl_byte;
	bool rd = is_read_op(cdb[0]);

	cdb_lba_tl(cdb, &lba, &tl, &tl_byte);
	if (cdb[0] >> 5) {
		if (cdb[1] & 0xe0) {   /* RDPROTECT/WRPROTECT: no protection information */
			sense_invalid_cdb(cmd, 1, 7);
			return false;
		}
		if (cdb[1] & 0x08)
			cmd->flags |= CF_FUA;
		if (cdb[0] == SCSI_OP_WRITE_VERIFY10 || cdb[0] == SCSI_OP_WRITE_VERIFY12 ||
		    cdb[0] == SCSI_OP_WRITE_VERIFY16)
			cmd->flags |= CF_FUA;   /* verify after write: the data must be on the medium */
	}
	/* No volatile cache reported (WCE=0): every write is durable at GOOD, WRITE(6) included. */
	if (!rd && !lu_flag(&lu->wce))
		cmd->flags |= CF_FUA;
	if (!lba_ok(cmd, lba, tl) || !xfer_ok(cmd, tl, tl_byte))
		return false;
	uint64_t xfer = (uint64_t)tl << lu->block_shift;
	uint32_t room = (rd ? cmd->dir_read : cmd->dir_write) ? cmd->edtl : 0;
	uint32_t len = (uint32_t)MIN(xfer, (uint64_t)room);

	cmd->lba = lba;
	cmd->resid = (int64_t)cmd->edtl - (int64_t)xfer;
	if (rd) {
		/* Whole blocks are read; only len bytes go out. */
		cmd->nblocks = (len + lu->block_size - 1) >> lu->block_shift;
		cmd->state = len;
		if (!cmd->nblocks || read_view(cmd))
			return true;
		return get_buf(cmd, &cmd->buf, (size_t)cmd->nblocks << lu->block_shift);
	}
	cmd->nblocks = len >> lu->block_shift;
	cmd->dout_len = len;
	if (!len)
		return true;
	return get_buf(cmd, &cmd->buf, len);
}

static void read_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;

	if (res < 0)
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_READ_ERROR);
	else
		cmd->din_len = cmd->state;
	scsi_cmd_complete(cmd);
}

void sbc_read(struct scsi_cmd *cmd)
{
	if (!cmd->nblocks) {
		scsi_cmd_complete(cmd);
		return;
	}
	if (cmd->buf == &cmd->view) {   /* the bytes are the store's own: nothing to read */
		cmd->din_len = cmd->state;
		scsi_cmd_complete(cmd);
		return;
	}
	submit(cmd, BS_READ, cmd->lba, cmd->nblocks, cmd->buf->data, read_done);
}

static void write_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;

	if (res < 0)
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_WRITE_ERROR);
	scsi_cmd_complete(cmd);
}

void sbc_write(struct scsi_cmd *cmd)
{
	if (!cmd->nblocks) {
		scsi_cmd_complete(cmd);
		return;
	}
	submit(cmd, BS_WRITE, cmd->lba, cmd->nblocks, cmd->buf->data, write_done);
}

/* VERIFY: BYTCHK 00b checks the range only; 01b compares the Data-Out with the medium. */
bool sbc_prep_verify(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	uint64_t lba;
	uint32_t tl;
	uint16_t tl_byte;
	uint8_t bytchk = (cmd->cdb[1] >> 1) & 3;

	cdb_lba_tl(cmd->cdb, &lba, &tl, &tl_byte);
	if (cmd->cdb[1] & 0xe0) {
		sense_invalid_cdb(cmd, 1, 7);
		return false;
	}
	if (bytchk > 1) {
		sense_invalid_cdb(cmd, 1, 2);
		return false;
	}
	if (!lba_ok(cmd, lba, tl) || !xfer_ok(cmd, tl, tl_byte))
		return false;
	cmd->lba = lba;
	if (!bytchk) {
		scsi_no_xfer(cmd);
		return true;
	}
	uint64_t xfer = (uint64_t)tl << lu->block_shift;
	uint32_t len = (uint32_t)MIN(xfer, (uint64_t)(cmd->dir_write ? cmd->edtl : 0));

	cmd->flags |= CF_BYTCHK;
	cmd->resid = (int64_t)cmd->edtl - (int64_t)xfer;
	cmd->dout_len = len;
	cmd->nblocks = (len + lu->block_size - 1) >> lu->block_shift;
	if (!len)
		return true;
	return get_buf(cmd, &cmd->buf, len) &&
	       get_buf(cmd, &cmd->buf2, (size_t)cmd->nblocks << lu->block_shift);
}

static bool compare(struct scsi_cmd *cmd, const uint8_t *want, const uint8_t *have, uint32_t len)
{
	if (!memcmp(want, have, len))
		return true;
	uint32_t i = 0;
	while (want[i] == have[i])
		i++;
	sense_set_info(cmd, SK_MISCOMPARE, ASC_MISCOMPARE_DURING_VERIFY, i);
	return false;
}

static void verify_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;

	if (res < 0)
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_READ_ERROR);
	else
		compare(cmd, cmd->buf->data, cmd->buf2->data, cmd->dout_len);
	scsi_cmd_complete(cmd);
}

void sbc_verify(struct scsi_cmd *cmd)
{
	if (!(cmd->flags & CF_BYTCHK) || !cmd->nblocks) {
		scsi_cmd_complete(cmd);
		return;
	}
	submit(cmd, BS_READ, cmd->lba, cmd->nblocks, cmd->buf2->data, verify_done);
}

/* SYNCHRONIZE CACHE / PRE-FETCH: a number of blocks of 0 means "to the end". */
static bool prep_range_to_end(struct scsi_cmd *cmd)
{
	uint64_t lba;
	uint32_t tl;
	uint16_t tl_byte;

	cdb_lba_tl(cmd->cdb, &lba, &tl, &tl_byte);
	if (!lba_ok(cmd, lba, tl))
		return false;
	scsi_no_xfer(cmd);
	return true;
}

bool sbc_prep_sync(struct scsi_cmd *cmd)
{
	return prep_range_to_end(cmd);
}

void sbc_sync(struct scsi_cmd *cmd)
{
	submit(cmd, BS_FLUSH, 0, 0, NULL, write_done);
}

bool sbc_prep_prefetch(struct scsi_cmd *cmd)
{
	return prep_range_to_end(cmd);
}

/* PRE-FETCH: nothing to stage; GOOD says the range is valid (no cache claim). */
void sbc_nop(struct scsi_cmd *cmd)
{
	scsi_cmd_complete(cmd);
}

/*
 * Deallocation (UNMAP, WRITE SAME with UNMAP) with WCE=0 must be on stable
 * storage before GOOD, like a write.  A backstore has no FUA for it (a
 * block device's discard), so one FLUSH follows the last range.
 */
static void dealloc_end(struct scsi_cmd *cmd)
{
	if (cmd->flags & CF_FLUSH) {
		cmd->flags &= ~CF_FLUSH;
		submit(cmd, BS_FLUSH, 0, 0, NULL, write_done);
		return;
	}
	scsi_cmd_complete(cmd);
}

static void unmap_next(struct scsi_cmd *cmd);

/* One range deallocated: UNMAP goes on with its next descriptor, WRITE SAME ends. */
static void dealloc_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;

	if (res < 0) {
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_WRITE_ERROR);
		scsi_cmd_complete(cmd);
	} else if (cmd->cdb[0] == SCSI_OP_UNMAP) {
		unmap_next(cmd);
	} else {
		dealloc_end(cmd);
	}
}

/* UNMAP (SBC-3 5.28): parameter list checked whole before anything is deallocated. */
bool sbc_prep_unmap(struct scsi_cmd *cmd)
{
	uint32_t plen = get_be16(cmd->cdb + 7);

	if (cmd->cdb[1] & 0x01) {   /* ANCHOR: not supported (ANC_SUP = 0) */
		sense_invalid_cdb(cmd, 1, 0);
		return false;
	}
	cmd->resid = (int64_t)cmd->edtl - plen;
	if (!plen)
		return true;
	if (plen < 8) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		return false;
	}
	cmd->dout_len = cmd->dir_write ? MIN(plen, cmd->edtl) : 0;
	cmd->state = plen;
	if (!lu_flag(&cmd->lu->wce))
		cmd->flags |= CF_FLUSH;
	return get_buf(cmd, &cmd->buf, cmd->dout_len);
}

/* cmd->lba: index of the next descriptor; cmd->nblocks: descriptor count. */
static void unmap_next(struct scsi_cmd *cmd)
{
	const uint8_t *p = cmd->buf->data + 8;

	while (cmd->lba < cmd->nblocks) {
		const uint8_t *d = p + 16 * cmd->lba++;
		uint32_t n = get_be32(d + 8);
		if (n) {
			submit(cmd, BS_UNMAP, get_be64(d), n, NULL, dealloc_done);
			return;
		}
	}
	dealloc_end(cmd);
}

void sbc_unmap(struct scsi_cmd *cmd)
{
	uint32_t len = cmd->dout_len, plen = cmd->state;
	const uint8_t *p;
	uint64_t total = 0, nb = lu_nblocks(cmd->lu);

	if (!plen)
		goto done;
	if (len < plen) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		goto done;
	}
	p = cmd->buf->data;
	uint32_t bddl = get_be16(p + 2);
	if (bddl > len - 8)
		bddl = len - 8;
	uint32_t count = bddl / 16;
	if (count > SCSI_MAX_UNMAP_DESCS) {
		sense_invalid_param(cmd, 2, -1);
		goto done;
	}
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *d = p + 8 + 16 * i;
		uint64_t lba = get_be64(d);
		uint32_t n = get_be32(d + 8);
		if (lba > nb || n > nb - lba) {
			sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
			goto done;
		}
		total += n;
	}
	if (total > SCSI_MAX_UNMAP_LBAS) {
		sense_invalid_param(cmd, 8 + 8, -1);
		goto done;
	}
	cmd->lba = 0;
	cmd->nblocks = count;
	unmap_next(cmd);
	return;
done:
	scsi_cmd_complete(cmd);
}

/* WRITE SAME (10/16): UNMAP on a thin LU deallocates; NDOB means zeroes. */
bool sbc_prep_ws(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	const uint8_t *cdb = cmd->cdb;
	bool ws16 = cdb[0] == SCSI_OP_WRITE_SAME16;
	bool ndob = ws16 && (cdb[1] & 0x01);
	uint64_t lba, nb = lu_nblocks(lu);
	uint32_t tl;
	uint16_t tl_byte;

	cdb_lba_tl(cdb, &lba, &tl, &tl_byte);
	if (cdb[1] & 0xe0) {
		sense_invalid_cdb(cmd, 1, 7);
		return false;
	}
	if (cdb[1] & 0x10) {   /* ANCHOR */
		sense_invalid_cdb(cmd, 1, 4);
		return false;
	}
	if ((cdb[1] & 0x08) && !lu->thin) {   /* UNMAP needs LBPWS/LBPWS10 */
		sense_invalid_cdb(cmd, 1, 3);
		return false;
	}
	if (!lba_ok(cmd, lba, tl))
		return false;
	if (!tl)
		tl = (uint32_t)MIN(nb - lba, (uint64_t)UINT32_MAX);
	if (tl > SCSI_MAX_WS_BLOCKS) {   /* VPD B0 MAXIMUM WRITE SAME LENGTH */
		sense_invalid_cdb(cmd, tl_byte, 7);
		return false;
	}
	if (ndob) {
		cmd->resid = (int64_t)cmd->edtl;
	} else {
		if (!cmd->dir_write || cmd->edtl != lu->block_size) {
			sense_invalid_cdb(cmd, tl_byte, 7);
			return false;
		}
		cmd->dout_len = lu->block_size;
	}
	cmd->lba = lba;
	cmd->nblocks = tl;
	if (cdb[1] & 0x08)
		cmd->flags |= CF_UNMAP;
	if (!lu_flag(&lu->wce))
		cmd->flags |= CF_FUA;
	if (!get_buf(cmd, &cmd->buf, lu->block_size))
		return false;
	if (ndob)
		memset(cmd->buf->data, 0, lu->block_size);
	return true;
}

void sbc_ws(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	/*
	 * Deallocate whatever the pattern where LBPRZ says reads return zeroes (as
	 * libiscsi expects); where deallocation leaves reads undefined (a device
	 * discard), write the pattern instead (the backstore zeroes cheaply).
	 */
	if ((cmd->flags & CF_UNMAP) && lu->thin && backstore_unmap_zeroes(lu->bs)) {
		/* WCE=0: the FLUSH after the unmap makes it durable (one sync, not two). */
		if (cmd->flags & CF_FUA)
			cmd->flags = (cmd->flags & ~CF_FUA) | CF_FLUSH;
		submit(cmd, BS_UNMAP, cmd->lba, cmd->nblocks, NULL, dealloc_done);
	} else {
		submit(cmd, BS_WRITE_SAME, cmd->lba, cmd->nblocks, cmd->buf->data, write_done);
	}
}

/*
 * COMPARE AND WRITE, ORWRITE and WRITE ATOMIC run one at a time per LU and
 * block range, so none of them sees another's half-done read-modify-write
 * (or a CAW's compare an atomic write's half).  A command waits only for
 * those before it whose blocks overlap its own: an ESXi heartbeat (a
 * one-block CAW on its host's own block) never queues behind another
 * initiator's 16 MiB ORWRITEs elsewhere on the LU.  Overlapping ones keep
 * their arrival order.  Waiters resume on their own reactor.  The list holds
 * what these commands have in flight on the LU, each with its buffers, so
 * the session buffer budgets bound it.
 */
static void caw_start(struct scsi_cmd *cmd);
static void orwrite_start(struct scsi_cmd *cmd);
static void atomic_start(struct scsi_cmd *cmd);

static void serial_start(struct scsi_cmd *cmd)
{
	switch (cmd->cdb[0]) {
	case SCSI_OP_ORWRITE16:
		orwrite_start(cmd);
		break;
	case SCSI_OP_WRITE_ATOMIC16:
		atomic_start(cmd);
		break;
	default:
		caw_start(cmd);
		break;
	}
}

static void serial_resume(void *arg)
{
	serial_start(arg);
}

static bool overlap(const struct scsi_cmd *a, const struct scsi_cmd *b)
{
	return a->lba < b->lba + b->nblocks && b->lba < a->lba + a->nblocks;
}

/* Under lu->mu: does a command before c in the list overlap it? */
static bool blocked(const struct scsi_lu *lu, const struct scsi_cmd *c)
{
	for (const struct scsi_cmd *o = lu->ser_head; o != c; o = o->ser_next)
		if (overlap(o, c))
			return true;
	return false;
}

/* Start cmd now, or when the commands ahead of it on its blocks are done. */
static void serial_run(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	pthread_mutex_lock(&lu->mu);
	cmd->ser_next = NULL;
	if (lu->ser_tail)
		lu->ser_tail->ser_next = cmd;
	else
		lu->ser_head = cmd;
	lu->ser_tail = cmd;
	cmd->ser_running = !blocked(lu, cmd);
	bool run = cmd->ser_running;
	pthread_mutex_unlock(&lu->mu);
	if (run)
		serial_start(cmd);
}

/* Complete cmd and start the waiters it held back. */
static void serial_finish(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct scsi_cmd *start = NULL, **sp = &start;

	pthread_mutex_lock(&lu->mu);
	struct scsi_cmd **pp = &lu->ser_head, *prev = NULL;
	while (*pp != cmd) {
		prev = *pp;
		pp = &(*pp)->ser_next;
	}
	*pp = cmd->ser_next;
	if (lu->ser_tail == cmd)
		lu->ser_tail = prev;
	for (struct scsi_cmd *w = lu->ser_head; w; w = w->ser_next)
		if (!w->ser_running && overlap(w, cmd) && !blocked(lu, w)) {
			w->ser_running = true;
			w->ser_start = NULL;
			*sp = w;
			sp = &w->ser_start;
		}
	pthread_mutex_unlock(&lu->mu);
	scsi_cmd_complete(cmd);
	while (start) {
		struct scsi_cmd *next = start;
		start = next->ser_start;
		if (!next->reactor || reactor_send(next->reactor, serial_resume, next) != 0)
			serial_start(next);
	}
}

/* The write of a serialized command ended it. */
static void serial_write_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;

	if (res == -ECANCELED) {   /* aborted while it waited (BS_WRITE_ATOMIC): nothing written */
		cmd->status = SCSI_TASK_ABORTED;
		cmd->sense_len = 0;
	} else if (res < 0) {
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_WRITE_ERROR);
	}
	serial_finish(cmd);
}

bool sbc_prep_caw(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	uint64_t lba = get_be64(cmd->cdb + 2);
	uint32_t n = cmd->cdb[13];

	if (cmd->cdb[1] & 0xe0) {
		sense_invalid_cdb(cmd, 1, 7);
		return false;
	}
	if (n > SCSI_MAX_CAW_BLOCKS) {
		sense_invalid_cdb(cmd, 13, 7);
		return false;
	}
	if (!lba_ok(cmd, lba, n))
		return false;
	uint32_t xfer = (2 * n) << lu->block_shift;
	/*
	 * The Data-Out must be exactly the verify + write data the CDB names;
	 * this also catches a one-byte count that wrapped (256 blocks sent as
	 * 0 with 512 blocks of data), which libiscsi expects refused.
	 */
	if (!n && !cmd->edtl) {
		scsi_no_xfer(cmd);
		return true;
	}
	if (!n || !cmd->dir_write || cmd->edtl != xfer) {
		sense_invalid_cdb(cmd, 13, 7);
		return false;
	}
	cmd->lba = lba;
	cmd->nblocks = n;
	cmd->dout_len = xfer;
	cmd->flags |= CF_FUA;
	return get_buf(cmd, &cmd->buf, xfer) &&
	       get_buf(cmd, &cmd->buf2, (size_t)n << lu->block_shift);
}

static void caw_read_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;
	uint32_t len = cmd->nblocks << cmd->lu->block_shift;

	if (res < 0) {
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_READ_ERROR);
		serial_finish(cmd);
		return;
	}
	if (!compare(cmd, cmd->buf->data, cmd->buf2->data, len)) {
		serial_finish(cmd);
		return;
	}
	submit(cmd, BS_WRITE, cmd->lba, cmd->nblocks, cmd->buf->data + len, serial_write_done);
}

/*
 * The store compared and wrote (BS_COMPARE_WRITE): atomic for every gateway
 * of an RBD image, not just this one.  Ranges the store cannot take (librbd:
 * more than one 512-byte sector) fall back to the read, compare and write
 * below, which serial_run makes atomic in this process only.
 */
static void caw_store_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;

	if (res == -EILSEQ)
		sense_set_info(cmd, SK_MISCOMPARE, ASC_MISCOMPARE_DURING_VERIFY, (uint32_t)io->miscompare);
	else if (res < 0)
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_WRITE_ERROR);
	serial_finish(cmd);
}

static void caw_start(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	if (backstore_compare_write_fits(lu->bs, cmd->lba << lu->block_shift, (uint64_t)cmd->nblocks << lu->block_shift)) {
		submit(cmd, BS_COMPARE_WRITE, cmd->lba, cmd->nblocks, cmd->buf->data, caw_store_done);
		return;
	}
	submit(cmd, BS_READ, cmd->lba, cmd->nblocks, cmd->buf2->data, caw_read_done);
}

void sbc_caw(struct scsi_cmd *cmd)
{
	if (!cmd->nblocks) {
		scsi_cmd_complete(cmd);
		return;
	}
	serial_run(cmd);
}

/*
 * ORWRITE (16) (SBC-4 5.9): medium = medium OR Data-Out, a read-modify-write
 * serialized like COMPARE AND WRITE.  The Data-Out is taken like a WRITE's
 * (min of the CDB's length and the EDTL, whole blocks); one command is at
 * most MAXIMUM TRANSFER LENGTH (VPD B0) and holds two buffers of that size.
 */
bool sbc_prep_orwrite(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	const uint8_t *cdb = cmd->cdb;
	uint64_t lba = get_be64(cdb + 2);
	uint32_t tl = get_be32(cdb + 10);

	if (cdb[1] & 0xe0) {   /* ORPROTECT: no protection information */
		sense_invalid_cdb(cmd, 1, 7);
		return false;
	}
	if (!lba_ok(cmd, lba, tl) || !xfer_ok(cmd, tl, 10))
		return false;
	if ((cdb[1] & 0x08) || !lu_flag(&lu->wce))
		cmd->flags |= CF_FUA;
	uint64_t xfer = (uint64_t)tl << lu->block_shift;
	uint32_t len = (uint32_t)MIN(xfer, (uint64_t)(cmd->dir_write ? cmd->edtl : 0));

	cmd->lba = lba;
	cmd->resid = (int64_t)cmd->edtl - (int64_t)xfer;
	cmd->nblocks = len >> lu->block_shift;
	cmd->dout_len = len;
	/* Less than a block of Data-Out (EDTL under the block size) is still
	 * received, into buf, and then ORs nothing: like a WRITE's. */
	if (!len)
		return true;
	if (!get_buf(cmd, &cmd->buf, len))
		return false;
	return !cmd->nblocks || get_buf(cmd, &cmd->buf2, (size_t)cmd->nblocks << lu->block_shift);
}

static void orwrite_read_done(struct bs_io *io, int res)
{
	struct scsi_cmd *cmd = io->priv;
	size_t len = (size_t)cmd->nblocks << cmd->lu->block_shift;
	uint8_t *out = cmd->buf2->data;
	const uint8_t *in = cmd->buf->data;

	if (res < 0) {
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_READ_ERROR);
		serial_finish(cmd);
		return;
	}
	for (size_t i = 0; i < len; i++)
		out[i] |= in[i];
	submit(cmd, BS_WRITE, cmd->lba, cmd->nblocks, out, serial_write_done);
}

static void orwrite_start(struct scsi_cmd *cmd)
{
	submit(cmd, BS_READ, cmd->lba, cmd->nblocks, cmd->buf2->data, orwrite_read_done);
}

void sbc_orwrite(struct scsi_cmd *cmd)
{
	if (!cmd->nblocks) {
		scsi_cmd_complete(cmd);
		return;
	}
	serial_run(cmd);
}

/* WRITE ATOMIC: blocks at most, from the backstore's guarantee (0: not offered). */
uint32_t sbc_atomic_max_blocks(const struct scsi_lu *lu)
{
	uint32_t n = backstore_atomic_max(lu->bs) >> lu->block_shift;

	return MIN(n, SCSI_MAX_XFER_BYTES >> lu->block_shift);
}

/*
 * WRITE ATOMIC (16) (SBC-4 5.48): all of the blocks or none, also as seen
 * by a concurrent READ (what BS_WRITE_ATOMIC promises), serialized with
 * COMPARE AND WRITE and ORWRITE.  No alignment or granularity rule
 * (VPD B0 reports 0 for both) and no atomic boundaries.  The whole Data-Out
 * must come: writing a part of it would not be the atomic write asked for.
 */
bool sbc_prep_atomic(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	const uint8_t *cdb = cmd->cdb;
	uint64_t lba = get_be64(cdb + 2);
	uint32_t tl = get_be16(cdb + 12);

	if (cdb[1] & 0xe0) {   /* WRPROTECT */
		sense_invalid_cdb(cmd, 1, 7);
		return false;
	}
	if (get_be16(cdb + 10)) {   /* ATOMIC BOUNDARY: MAXIMUM ATOMIC BOUNDARY SIZE is 0 */
		sense_invalid_cdb(cmd, 10, 7);
		return false;
	}
	if (!lba_ok(cmd, lba, tl))
		return false;
	if (tl > sbc_atomic_max_blocks(lu)) {
		sense_invalid_cdb(cmd, 12, 7);
		return false;
	}
	uint32_t xfer = tl << lu->block_shift;

	if (xfer && (!cmd->dir_write || cmd->edtl < xfer)) {
		sense_invalid_cdb(cmd, 12, 7);
		return false;
	}
	if ((cdb[1] & 0x08) || !lu_flag(&lu->wce))
		cmd->flags |= CF_FUA;
	cmd->lba = lba;
	cmd->nblocks = tl;
	cmd->dout_len = xfer;
	cmd->resid = (int64_t)cmd->edtl - (int64_t)xfer;
	if (!tl)
		return true;
	return get_buf(cmd, &cmd->buf, xfer);
}

static void atomic_start(struct scsi_cmd *cmd)
{
	submit(cmd, BS_WRITE_ATOMIC, cmd->lba, cmd->nblocks, cmd->buf->data, serial_write_done);
}

void sbc_atomic(struct scsi_cmd *cmd)
{
	if (!cmd->nblocks) {
		scsi_cmd_complete(cmd);
		return;
	}
	serial_run(cmd);
}

/*
 * READ DEFECT DATA (10)/(12) (SBC-4 5.20, 5.21): a virtual LU has no
 * primary or grown defects: the header of an empty list in the format
 * asked for, PLISTV/GLISTV as requested.  The reserved formats 001b, 010b
 * and 111b are refused.
 */
void sbc_read_defect(struct scsi_cmd *cmd)
{
	bool ten = cmd->cdb[0] == SCSI_OP_READ_DEFECT10;
	uint8_t req = ten ? cmd->cdb[2] : cmd->cdb[1];
	uint8_t fmt = req & 0x07;
	uint8_t d[8] = { 0 };

	if (fmt == 1 || fmt == 2 || fmt == 7) {
		sense_invalid_cdb(cmd, ten ? 2 : 1, 2);
	} else {
		d[1] = req & 0x1f;   /* PLISTV, GLISTV, DEFECT LIST FORMAT; list length 0 */
		if (ten)
			scsi_cmd_din(cmd, d, 4, get_be16(cmd->cdb + 7));
		else
			scsi_cmd_din(cmd, d, 8, get_be32(cmd->cdb + 6));
	}
	scsi_cmd_complete(cmd);
}

void sbc_read_capacity10(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t d[8];
	uint64_t last = lu_nblocks(lu) - 1;

	if (!(cmd->cdb[8] & 0x01) && get_be32(cmd->cdb + 2)) {
		sense_invalid_cdb(cmd, 2, 7);
	} else {
		put_be32(d, last > 0xffffffffull ? 0xffffffffu : (uint32_t)last);
		put_be32(d + 4, lu->block_size);
		scsi_cmd_din(cmd, d, sizeof(d), sizeof(d));
	}
	scsi_cmd_complete(cmd);
}

void sbc_read_capacity16(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t d[32] = { 0 };

	put_be64(d, lu_nblocks(lu) - 1);
	put_be32(d + 8, lu->block_size);
	if (lu->thin)
		d[14] = 0x80 | (backstore_unmap_zeroes(lu->bs) ? 0x40 : 0);   /* LBPME, LBPRZ */
	scsi_cmd_din(cmd, d, sizeof(d), get_be32(cmd->cdb + 10));
	scsi_cmd_complete(cmd);
}

bool sbc_prep_get_lba_status(struct scsi_cmd *cmd)
{
	if (!lba_ok(cmd, get_be64(cmd->cdb + 2), 0))
		return false;
	scsi_no_xfer(cmd);
	return true;
}

/* Descriptors of LBA status from the CDB's LBA, as many as the allocation length holds (at most 32). */
static void lba_status_build(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	struct scsi_lu *lu = cmd->lu;
	uint64_t lba = get_be64(cmd->cdb + 2), nb = lu_nblocks(lu);
	uint32_t alloc = get_be32(cmd->cdb + 10);
	uint32_t max = alloc > 24 ? MIN((alloc - 8) / 16, 32u) : 1;

	din_zero(d, 8);   /* parameter data length, below */
	for (uint32_t i = 0; i < max && lba < nb; i++) {
		bool mapped = true;
		uint64_t run = 0;
		if (backstore_lba_status(lu->bs, lba << lu->block_shift, &mapped, &run) < 0) {
			sense_set(cmd, SK_MEDIUM_ERROR, ASC_READ_ERROR);
			return;
		}
		uint64_t blocks = run >> lu->block_shift;
		if (!blocks)
			blocks = 1;
		blocks = MIN(blocks, nb - lba);
		blocks = MIN(blocks, (uint64_t)UINT32_MAX);
		din_be64(d, lba);
		din_be32(d, (uint32_t)blocks);
		din_u8(d, mapped ? 0 : 1);
		din_zero(d, 3);
		lba += blocks;
	}
	din_set_be32(d, 0, din_pos(d) - 4);
}

void sbc_get_lba_status(struct scsi_cmd *cmd)
{
	din_build(cmd, get_be32(cmd->cdb + 10), lba_status_build, NULL);
	scsi_cmd_complete(cmd);
}
