/*
 * Inside the fd engine (fd.c), for its unit test: the steps of one request
 * without io_uring or a system call, so that short and failed I/O and the
 * fall-backs can be driven by hand.  The kinds (file.c, block.c) use
 * backstore_impl.h's bs_fd_submit and bs_fd_close only.
 */
#ifndef FD_INT_H
#define FD_INT_H

#include <stdint.h>

struct backstore;
struct bs_io;

/* io->stage of an fd request. */
enum fd_stage { ST_RW, ST_SYNC, ST_PUNCH, ST_ZERO, ST_FILL, ST_SYNC_AFTER };
enum fd_kind { RQ_READ, RQ_WRITE, RQ_FSYNC, RQ_FALLOC };

/* One system call of a request: what fd_next asks for next. */
struct fd_req {
	enum fd_kind kind;
	void *buf;
	uint32_t len;
	uint64_t pos;
	int rwf;
	int mode;
};

/* Stage and buffers of a new request: 0, or -errno. */
int fd_start(struct backstore *bs, struct bs_io *io);
/* The request io's stage asks for next. */
void fd_next(struct backstore *bs, struct bs_io *io, struct fd_req *rq);
/* Account for one result: 1 = issue the next request, 0 = finished (io->err set). */
int fd_result(struct backstore *bs, struct bs_io *io, int res);

#endif
