/*
 * The copy engine (copy.h): chunks read into pool buffers and written from
 * them through the backstores' asynchronous API, a few in flight per
 * command, on the issuing reactor.  Shared by EXTENDED COPY and WRITE
 * USING TOKEN; every destination chunk first invalidates the ROD tokens
 * whose ranges it is about to change (rod.c).
 */
#include <string.h>

#include "common/bufpool.h"
#include "common/reactor.h"
#include "target/scsi/copy/copy.h"
#include "target/scsi/copy/rod.h"
#include "target/scsi/pr/pr.h"
#include "target/scsi/scsi_int.h"

bool copy_lu_unready(struct scsi_lu *lu)
{
	return __atomic_load_n(&lu->stopped, __ATOMIC_RELAXED) || __atomic_load_n(&lu->ejected, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&lu->sanitize, __ATOMIC_ACQUIRE) != SAN_STATE_NONE;
}

bool copy_pr_blocks(struct scsi_lu *lu, const struct scsi_nexus *nx, uint8_t opcode)
{
	uint8_t cdb[16] = { opcode };

	if (!nx)
		return false;
	pthread_mutex_lock(&lu->mu);
	bool c = pr_conflict(lu->pr, nx, cdb);
	pthread_mutex_unlock(&lu->mu);
	return c;
}

/* The next segment, if there is one: how it is cut into chunks. */
static bool seg_setup(struct copy_job *j)
{
	struct copy_seg *s = &j->s;

	if (!j->ops->seg(j, j->seg, s))
		return false;
	bool overlap = s->src == s->dst && s->src_lba < s->dst_lba + s->nblocks &&
		       s->dst_lba < s->src_lba + s->nblocks;
	j->next = 0;
	j->written = 0;
	j->chunk_blocks = COPY_CHUNK_BYTES >> s->dst->block_shift;
	/*
	 * Overlapping ranges copy as memmove does: one chunk at a time, from
	 * the end when the destination lies above the source.
	 */
	j->width = overlap ? 1 : COPY_INFLIGHT;
	j->backward = overlap && s->dst_lba > s->src_lba;
	/* No volatile cache reported (WCE=0) on the destination: durable at GOOD, as for a WRITE. */
	j->fua = !lu_flag(&s->dst->wce);
	return true;
}

static void pump(struct copy_job *j);

static void chunk_free(struct copy_chunk *c)
{
	struct copy_job *j = c->j;

	bufpool_put(c->buf);
	c->buf = NULL;
	c->busy = false;
	j->inflight--;
}

static void chunk_submit(struct copy_chunk *c, enum backstore_op op, struct scsi_lu *lu, uint64_t lba, bool fua,
			 void (*cb)(struct bs_io *, int))
{
	struct bs_io *io = &c->io;

	memset(io, 0, sizeof(*io));
	io->op = op;
	io->offset = lba << lu->block_shift;
	io->len = (uint64_t)c->n << lu->block_shift;
	io->buf = c->buf->data;
	io->fua = fua;
	io->reactor = c->j->cmd->reactor;
	io->cb = cb;
	io->priv = c;
	backstore_submit(lu->bs, io);
}

/* A SANITIZE of lu (state st) stops the job before its next chunk. */
static void stop_unready(struct copy_job *j, struct scsi_lu *lu, uint8_t st)
{
	if (!j->unready) {
		j->unready = lu;
		j->unready_state = st;
	}
}

static void chunk_written(struct bs_io *io, int res)
{
	struct copy_chunk *c = io->priv;
	struct copy_job *j = c->j;

	/* The segment (and so its destination) changes only once no chunk is in flight. */
	lu_write_end(j->s.dst, j->cmd->reactor);
	if (res < 0) {
		j->failed = true;
	} else {
		j->written += c->n;
		__atomic_store_n(&j->blocks_done, j->blocks_done + c->n, __ATOMIC_RELAXED);
		j->bytes_done += (uint64_t)c->n << j->s.dst->block_shift;
	}
	chunk_free(c);
	pump(j);
}

static void chunk_write(struct copy_chunk *c)
{
	struct copy_job *j = c->j;
	uint8_t st = lu_write_begin(j->s.dst, j->cmd->reactor);

	if (st != SAN_STATE_NONE) {
		stop_unready(j, j->s.dst, st);
		chunk_free(c);
		pump(j);
		return;
	}
	rod_will_write(j->s.dst, c->dst_lba, c->n);
	chunk_submit(c, BS_WRITE, j->s.dst, c->dst_lba, j->fua, chunk_written);
}

static void chunk_read(struct bs_io *io, int res)
{
	struct copy_chunk *c = io->priv;
	struct copy_job *j = c->j;
	/* A source being sanitized: what was read of it goes nowhere (its blocks may already be half erased). */
	uint8_t src_st = __atomic_load_n(&j->s.src->sanitize, __ATOMIC_ACQUIRE);

	if (res < 0) {
		j->failed = true;
	} else if (j->cmd->stop) {
		/* the owner reports the abort */
	} else if (j->ops->may_write && !j->ops->may_write(j)) {
		j->vetoed = true;
	} else if (src_st != SAN_STATE_NONE) {
		stop_unready(j, j->s.src, src_st);
	} else {
		chunk_write(c);
		return;
	}
	chunk_free(c);
	pump(j);
}

static void pump_deferred(void *arg)
{
	struct copy_job *j = arg;

	j->deferred = false;
	pump(j);
}

/* Hand out chunks while the window allows; true when the copy has nothing more to start. */
static bool step(struct copy_job *j)
{
	uint64_t started = 0;

	for (;;) {
		if (j->cmd->stop || j->failed || j->nomem || j->vetoed || j->unready || !j->have_seg)
			return true;
		const struct copy_seg *s = &j->s;
		if (j->next == s->nblocks) {
			if (j->inflight)
				return false;   /* the next segment may overlap this one's writes */
			j->segs_done++;
			j->seg++;
			j->have_seg = seg_setup(j);
			continue;
		}
		if (j->inflight >= j->width)
			return false;
		/* A yield is pending: the deferred pump goes on (pump() calling
		 * again after an inline completion must not). */
		if (j->deferred)
			return false;
		/* A RAM backstore completes inline: let the reactor breathe now and then. */
		if (started >= COPY_YIELD_BYTES && j->cmd->reactor &&
		    reactor_defer(j->cmd->reactor, pump_deferred, j) == 0) {
			j->deferred = true;
			return false;
		}
		struct copy_chunk *c = NULL;
		for (unsigned i = 0; i < COPY_INFLIGHT && !c; i++)
			if (!j->ch[i].busy)
				c = &j->ch[i];
		uint32_t n = (uint32_t)MIN((uint64_t)j->chunk_blocks, s->nblocks - j->next);
		size_t len = (size_t)n << s->dst->block_shift;
		c->buf = scsi_buf_get(j->cmd, len);
		if (!c->buf) {
			if (!j->inflight)
				j->nomem = true;
			return !j->inflight;   /* else a finished chunk frees room */
		}
		uint64_t at = j->backward ? s->nblocks - j->next - n : j->next;
		c->j = j;
		c->n = n;
		c->src_lba = s->src_lba + at;
		c->dst_lba = s->dst_lba + at;
		c->busy = true;
		j->next += n;
		j->inflight++;
		started += len;
		if (s->src) {
			chunk_submit(c, BS_READ, s->src, c->src_lba, false, chunk_read);
		} else {
			memset(c->buf->data, 0, len);
			chunk_write(c);
		}
	}
}

static void finish(struct copy_job *j)
{
	if (j->failed || j->unready)
		j->seg_resid = j->s.nblocks - j->written;
	j->cmd->scratch = NULL;
	j->ops->end(j);
}

/*
 * Every completion comes back here.  A completion inside backstore_submit()
 * (RAM) only marks that more may start: the loop below picks it up, so the
 * stack does not grow with the number of chunks.
 */
static void pump(struct copy_job *j)
{
	if (j->in_pump) {
		j->again = true;
		return;
	}
	j->in_pump = true;
	bool idle;
	do {
		j->again = false;
		idle = step(j);
	} while (j->again);
	j->in_pump = false;
	if (idle && !j->inflight && !j->deferred)
		finish(j);
}

void copy_start(struct copy_job *j)
{
	j->cmd->scratch = j;
	j->seg = 0;
	j->have_seg = seg_setup(j);
	pump(j);
}

bool scsi_cmd_uses_lu(const struct scsi_cmd *cmd, const struct scsi_lu *lu)
{
	if (cmd->lu == lu)
		return true;
	/* Only the copy commands (EXTENDED COPY, WRITE USING TOKEN) keep a job in scratch under this opcode. */
	if (cmd->cdb[0] != SCSI_OP_EXTENDED_COPY || !cmd->scratch)
		return false;
	const struct copy_job *j = cmd->scratch;
	return j->ops->uses_lu(j, lu);
}
