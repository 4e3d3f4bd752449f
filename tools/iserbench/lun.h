/*
 * iserbench LUN drivers: one interface over an initiator-library session
 * (iscsi://, iser://) and an O_DIRECT file or block device driven by
 * io_uring.  Each LUN exposes one pollable fd; the engine polls them all
 * from its single thread and calls ib_lun_service() when one is ready.
 */
#ifndef ISERBENCH_LUN_H
#define ISERBENCH_LUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <liburing.h>

struct ib_lun;
struct ib_io;

/* err: 0 or a negative errno; why: the decoded failure (sense included), NULL when err == 0. */
typedef void (*ib_io_done_fn)(struct ib_io *io, int err, const char *why);

/* One thread slot: preallocated, reused for every I/O it carries. */
struct ib_io {
	struct ib_lun *lun;
	void *buf;                  /* aligned, the largest xfersize of its SD */
	uint64_t off;               /* bytes from the start of the LUN */
	uint32_t len;
	bool write;
	/* the engine's */
	uint64_t arrival_ns;        /* when it was due (a fixed rate's arrival) */
	uint64_t start_ns;          /* when it was submitted: response time counts from here */
	unsigned wd;
	bool counted;               /* false while draining: not in the statistics */
	struct ib_io *next_free;
};

enum ib_lun_kind { IB_LUN_ISC, IB_LUN_URING };

struct ib_lun {
	enum ib_lun_kind kind;
	char spec[1024];
	uint64_t size;              /* bytes */
	uint32_t block_size;
	ib_io_done_fn done;
	unsigned inflight;
	bool dead;                  /* the session was lost: no more I/O */
	/* IB_LUN_ISC */
	struct isc_session *s;
	uint64_t lunid;
	/* IB_LUN_URING */
	int fd;
	struct io_uring ring;
	bool ring_ok;
	unsigned queued;            /* SQEs prepared, not yet submitted */
};

/* The initiator name of the iscsi:// and iser:// sessions opened after this. */
void ib_lun_set_initiator(const char *iqn);
/* The initiator name iscsi:// and iser:// sessions log in with (-i, or the library's default). */
const char *ib_lun_initiator(void);
/*
 * Open spec (URL, file or block device) for up to qd outstanding I/Os.  A
 * file that does not exist is created with create_size bytes (sd size=), as
 * vdbench does; 0: it must exist.
 */
int ib_lun_open(struct ib_lun *l, const char *spec, unsigned qd, uint64_t create_size, ib_io_done_fn done,
		char *err, size_t errlen);
void ib_lun_close(struct ib_lun *l);
/* Start io; its done callback runs later from ib_lun_service().  Returns 0 or a negative errno. */
int ib_lun_submit(struct ib_lun *l, struct ib_io *io);
/* Hand queued work to the kernel (io_uring batches its submissions). */
void ib_lun_flush(struct ib_lun *l);
/*
 * Buffers for the slots: for an initiator-library LUN from the session's
 * registered pool (over iSER the target reaches them with no per-command
 * registration), else page-aligned memory (O_DIRECT).  Free before closing.
 */
void *ib_lun_buf_alloc(struct ib_lun *l, size_t len);
void ib_lun_buf_free(struct ib_lun *l, void *buf);
int ib_lun_fd(const struct ib_lun *l);
short ib_lun_events(const struct ib_lun *l);
/* Run completions; returns 0 or a negative errno (the session is gone). */
int ib_lun_service(struct ib_lun *l, short revents);

#endif
