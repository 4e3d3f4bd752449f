/*
 * The fd engine, which the file and block kinds share (file.c, block.c):
 * their store is a struct bs_fd.
 *
 * The engine runs one request at a time per bs_io through the submitting
 * reactor's io_uring (the SQE's user_data is io->uop): a short read or write
 * resubmits the rest, a huge one goes in pieces of FD_MAX_IO.  UNMAP and
 * zero WRITE_SAME try FALLOC_FL_PUNCH_HOLE (thin), then FALLOC_FL_ZERO_RANGE,
 * then plain writes of zeroes, remembering per backstore what the file
 * system or device refused.  Without a ring (or a reactor) each step runs
 * synchronously instead.
 *
 * Files use buffered I/O: FUA is RWF_DSYNC on the write, FLUSH is fdatasync.
 * Without a volatile write cache (write_cache false) every write is FUA,
 * since WCE=0 promises durability at completion.
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/util.h"
#include "target/backstore/backstore_impl.h"
#include "target/backstore/fd_int.h"

#define FD_MAX_IO   (1u << 30)   /* CQE res is an int */
#define FD_FILL_MAX (1u << 20)   /* WRITE_SAME / zero-write buffer */

/*
 * isertd-nodurable (target/meson.build) builds this file with
 * ISERT_TEST_NO_DURABILITY: a deliberately broken target that acknowledges FUA
 * writes, writes with the cache off and SYNCHRONIZE CACHE without making
 * anything durable.  The crash-consistency check (tests/crash) must catch it.
 * It is never installed.
 */
#ifdef ISERT_TEST_NO_DURABILITY
#define FD_DURABLE false
#else
#define FD_DURABLE true
#endif

static bool fd_fua(const struct backstore *bs, const struct bs_io *io)
{
	return FD_DURABLE && (io->fua || !backstore_write_cache(bs));
}

static bool fd_aligned(const struct backstore *bs, const void *p)
{
	return !bs_fd(bs)->direct || (uintptr_t)p % bs_fd(bs)->dio_align == 0;
}

/* A buffer of whole patterns (or zeroes) for ST_FILL. */
static int fd_fill_buf(struct bs_io *io, bool zero)
{
	uint64_t n;
	if (zero) {
		n = MIN((uint64_t)FD_FILL_MAX, io->len);
	} else {
		/* io->len is a multiple of pattern_len, so n stays one too. */
		n = MAX((uint64_t)io->pattern_len, FD_FILL_MAX / io->pattern_len * io->pattern_len);
		n = MIN(n, io->len);
	}
	int rc = bs_fill_bounce(io, zero, n);
	if (rc == 0)
		io->stage = ST_FILL;
	return rc;
}

/* First stage of zeroing [offset, offset+len). */
static int fd_zero_stage(struct backstore *bs, struct bs_io *io)
{
	if (bs->thin && !bs_fd(bs)->no_punch) {
		io->stage = ST_PUNCH;
		return 0;
	}
	if (!bs_fd(bs)->no_zero) {
		io->stage = ST_ZERO;
		return 0;
	}
	return fd_fill_buf(io, true);
}

int fd_start(struct backstore *bs, struct bs_io *io)
{
	switch (io->op) {
	case BS_READ:
	case BS_WRITE:
		io->stage = ST_RW;
		if (!fd_aligned(bs, io->buf)) {
			io->bounce = bs_alloc_aligned((size_t)io->len);
			if (!io->bounce)
				return -ENOMEM;
			if (io->op == BS_WRITE)
				memcpy(io->bounce, io->buf, (size_t)io->len);
		}
		return 0;
	case BS_FLUSH:
		io->stage = ST_SYNC;
		return 0;
	case BS_UNMAP:
		return fd_zero_stage(bs, io);
	case BS_WRITE_SAME:
		if (bs_is_zero(io->buf, io->pattern_len))
			return fd_zero_stage(bs, io);
		return fd_fill_buf(io, false);
	case BS_WRITE_ATOMIC:
	case BS_COMPARE_WRITE:
		return -EOPNOTSUPP;   /* not offered here: backstore_submit refuses them first */
	}
	return -EINVAL;
}

void fd_next(struct backstore *bs, struct bs_io *io, struct fd_req *rq)
{
	memset(rq, 0, sizeof(*rq));
	uint64_t left = io->len - io->done;
	switch ((enum fd_stage)io->stage) {
	case ST_RW:
		rq->kind = io->op == BS_READ ? RQ_READ : RQ_WRITE;
		rq->buf = (uint8_t *)(io->bounce ? io->bounce : io->buf) + io->done;
		rq->len = (uint32_t)MIN(left, (uint64_t)FD_MAX_IO);
		rq->pos = io->offset + io->done;
		if (rq->kind == RQ_WRITE && fd_fua(bs, io))
			rq->rwf = RWF_DSYNC;
		break;
	case ST_SYNC:
	case ST_SYNC_AFTER:
		rq->kind = FD_DURABLE ? RQ_FSYNC : RQ_READ;   /* broken on purpose: a 0-byte read */
		break;
	case ST_PUNCH:
	case ST_ZERO:
		rq->kind = RQ_FALLOC;
		rq->mode = FALLOC_FL_KEEP_SIZE |
			   (io->stage == ST_PUNCH ? FALLOC_FL_PUNCH_HOLE : FALLOC_FL_ZERO_RANGE);
		rq->pos = io->offset;
		rq->len = 0;   /* falloc length is taken from io->len */
		break;
	case ST_FILL: {
		/* After a short write, resume mid-pattern: the buffer holds whole patterns. */
		uint64_t unit = io->op == BS_WRITE_SAME && io->pattern_len ? io->pattern_len : 1;
		uint64_t phase = io->done % unit;
		rq->kind = RQ_WRITE;
		rq->buf = (uint8_t *)io->bounce + phase;
		rq->len = (uint32_t)MIN(left, io->bounce_len - phase);
		rq->pos = io->offset + io->done;
		if (fd_fua(bs, io))
			rq->rwf = RWF_DSYNC;
		break;
	}
	}
}

int fd_result(struct backstore *bs, struct bs_io *io, int res)
{
	if (res == -EINTR || res == -EAGAIN)
		return 1;
	switch ((enum fd_stage)io->stage) {
	case ST_RW:
	case ST_FILL:
		if (res < 0) {
			io->err = res;
			return 0;
		}
		if (res == 0) {
			/* A file truncated behind our back reads as zeroes; a device cannot. */
			if (io->op == BS_READ && bs_fd(bs)->short_zeroes) {
				uint8_t *b = io->bounce ? io->bounce : io->buf;
				memset(b + io->done, 0, (size_t)(io->len - io->done));
				io->done = io->len;
			} else {
				io->err = -EIO;
				return 0;
			}
		}
		io->done += (uint64_t)res;
		if (io->done < io->len)
			return 1;
		io->err = 0;
		return 0;
	case ST_SYNC:
	case ST_SYNC_AFTER:
		io->err = res < 0 ? res : 0;
		return 0;
	case ST_PUNCH:
	case ST_ZERO:
		if (res == -EOPNOTSUPP || res == -ENOTSUP || res == -EINVAL || res == -ENOSYS) {
			/* Not supported here: fall back and stop trying for this backstore. */
			int rc = 0;
			if (io->stage == ST_PUNCH)
				bs_fd(bs)->no_punch = true;
			else
				bs_fd(bs)->no_zero = true;
			if (io->stage == ST_PUNCH && !bs_fd(bs)->no_zero)
				io->stage = ST_ZERO;
			else
				rc = fd_fill_buf(io, true);
			if (rc < 0) {
				io->err = rc;
				return 0;
			}
			return 1;
		}
		if (res < 0) {
			io->err = res;
			return 0;
		}
		io->done = io->len;
		if (fd_fua(bs, io)) {
			io->stage = ST_SYNC_AFTER;
			return 1;
		}
		io->err = 0;
		return 0;
	}
	io->err = -EINVAL;
	return 0;
}

static int fd_exec_sync(struct backstore *bs, struct bs_io *io, const struct fd_req *rq)
{
	ssize_t n;
	switch (rq->kind) {
	case RQ_READ:
		n = pread(bs_fd(bs)->fd, rq->buf, rq->len, (off_t)rq->pos);
		break;
	case RQ_WRITE: {
		struct iovec iov = { .iov_base = rq->buf, .iov_len = rq->len };
		n = pwritev2(bs_fd(bs)->fd, &iov, 1, (off_t)rq->pos, rq->rwf);
		break;
	}
	case RQ_FSYNC:
		n = fdatasync(bs_fd(bs)->fd);
		break;
	case RQ_FALLOC:
		n = fallocate(bs_fd(bs)->fd, rq->mode, (off_t)rq->pos, (off_t)io->len);
		break;
	default:
		return -EINVAL;
	}
	return n < 0 ? -errno : (int)n;
}

static void fd_prep(struct backstore *bs, struct bs_io *io, const struct fd_req *rq,
		    struct io_uring_sqe *sqe)
{
	switch (rq->kind) {
	case RQ_READ:
		io_uring_prep_read(sqe, bs_fd(bs)->fd, rq->buf, rq->len, rq->pos);
		break;
	case RQ_WRITE:
		io_uring_prep_write(sqe, bs_fd(bs)->fd, rq->buf, rq->len, rq->pos);
		sqe->rw_flags = rq->rwf;
		break;
	case RQ_FSYNC:
		io_uring_prep_fsync(sqe, bs_fd(bs)->fd, IORING_FSYNC_DATASYNC);
		break;
	case RQ_FALLOC:
		io_uring_prep_fallocate(sqe, bs_fd(bs)->fd, rq->mode, (off_t)rq->pos, (off_t)io->len);
		break;
	}
	io_uring_sqe_set_data(sqe, &io->uop);
}

static void fd_cqe(struct reactor_uring_op *op, int res);

/*
 * Issue the next request.  in_submit: still inside backstore_submit(), so a
 * synchronous completion goes through reactor_defer() to keep the caller's
 * stack out of its own callback (when there is a reactor to defer to).
 */
static void fd_issue(struct backstore *bs, struct bs_io *io, bool in_submit)
{
	struct io_uring *ring = io->reactor ? reactor_ring(io->reactor) : NULL;
	for (;;) {
		struct fd_req rq;
		fd_next(bs, io, &rq);
		if (ring) {
			/* NULL only if the ring stays full: do this step synchronously. */
			struct io_uring_sqe *sqe = reactor_uring_sqe(io->reactor);
			if (sqe) {
				io->uop.cb = fd_cqe;
				io->inflight = 1;
				fd_prep(bs, io, &rq, sqe);
				return;
			}
		}
		if (fd_result(bs, io, fd_exec_sync(bs, io, &rq)))
			continue;
		if (in_submit && io->reactor && reactor_defer(io->reactor, bs_finish_bounce_deferred, io) == 0)
			return;
		bs_finish_bounce(io);
		return;
	}
}

static void fd_cqe(struct reactor_uring_op *op, int res)
{
	struct bs_io *io = container_of(op, struct bs_io, uop);
	io->inflight = 0;
	if (fd_result(io->bs, io, res))
		fd_issue(io->bs, io, false);
	else
		bs_finish_bounce(io);
}

void bs_fd_submit(struct backstore *bs, struct bs_io *io)
{
	int rc = fd_start(bs, io);
	if (rc < 0) {
		io->err = rc;
		bs_finish_bounce(io);
		return;
	}
	fd_issue(bs, io, true);
}

void bs_fd_close(struct backstore *bs)
{
	if (bs_fd(bs)->fd >= 0)
		close(bs_fd(bs)->fd);
	bs_fd(bs)->fd = -1;
}
