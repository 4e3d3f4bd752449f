/*
 * The copy engine of third-party copy: EXTENDED COPY (xcopy.c) and WRITE
 * USING TOKEN (rod.c) move blocks inside the target through it.  A job is a
 * list of segments (source LU and LBA, destination LU and LBA, blocks) that
 * its owner hands out one at a time; the engine reads chunks into pool
 * buffers and writes them from there through the backstores' asynchronous
 * API, a few chunks in flight, all on the command's reactor.  The job ends
 * (ops->end) only when nothing is in flight any more, so an abort or a lost
 * connection (cmd->stop), a backstore error or the owner's own veto
 * (ops->may_write) stops issuing chunks and leaves neither a buffer nor a
 * callback behind.  So does a SANITIZE of a copy target: each chunk is
 * counted as a write of its destination (lu_write_begin), which the
 * SANITIZE waits for, and neither a chunk to a LU being sanitized nor one
 * read from it is written.
 */
#ifndef SCSI_COPY_H
#define SCSI_COPY_H

#include <stdbool.h>
#include <stdint.h>

#include "target/backstore/backstore.h"

struct buf;
struct scsi_cmd;
struct scsi_lu;
struct scsi_nexus;

/* Chunks of this size, this many in flight per command. */
#define COPY_CHUNK_BYTES (1u << 20)
#define COPY_INFLIGHT    4u
/* An inline copy in one reactor callback yields after this much (RAM completes inline). */
#define COPY_YIELD_BYTES (8u << 20)

struct copy_seg {
	struct scsi_lu *src;     /* NULL: zeros (the block device zero ROD token) */
	struct scsi_lu *dst;
	uint64_t src_lba, dst_lba;
	uint64_t nblocks;        /* both LUs have the destination's block size */
};

struct copy_job;

struct copy_ops {
	/* Segment k of the job; false past the last. */
	bool (*seg)(struct copy_job *j, uint32_t k, struct copy_seg *s);
	/* A chunk was read: may it be written (WRITE USING TOKEN: the token still holds)?  NULL: always. */
	bool (*may_write)(struct copy_job *j);
	/* The job ended (every chunk back): the owner sets the status, frees the job and completes the command. */
	void (*end)(struct copy_job *j);
	/* Does the job read or write lu (the admin waits for such commands before it removes an LU)? */
	bool (*uses_lu)(const struct copy_job *j, const struct scsi_lu *lu);
};

struct copy_chunk {
	struct bs_io io;
	struct copy_job *j;
	struct buf *buf;
	uint64_t src_lba, dst_lba;
	uint32_t n;
	bool busy;
};

/* The owner's job embeds this as its first member: cmd->scratch points at both while it runs. */
struct copy_job {
	struct scsi_cmd *cmd;
	const struct copy_ops *ops;
	/* What end() reads. */
	uint32_t seg;            /* the segment being copied when the job ended (== segments when all went) */
	uint32_t segs_done;
	uint64_t blocks_done;    /* written, all segments (atomic: RECEIVE ROD TOKEN INFORMATION reads it) */
	uint64_t bytes_done;
	uint64_t seg_resid;      /* failed or unready: blocks of segment seg not known to be written */
	bool failed;             /* a backstore error */
	bool nomem;              /* no buffer with nothing in flight */
	bool vetoed;             /* may_write said no */
	struct scsi_lu *unready; /* a copy target a SANITIZE made unready (running or failed) */
	uint8_t unready_state;   /* ... its sanitize state then (SAN_STATE_*) */
	/* Private to copy.c. */
	struct copy_seg s;
	bool have_seg, backward, fua, in_pump, again, deferred;
	uint64_t next;           /* blocks of the segment handed to chunks */
	uint64_t written;        /* blocks of the segment written */
	uint32_t width;          /* chunks in flight allowed for this segment */
	uint32_t chunk_blocks;
	unsigned inflight;
	struct copy_chunk ch[COPY_INFLIGHT];
};

/* Run the job (cmd->scratch = j until it ends): ops->end() is called once, maybe before this returns. */
void copy_start(struct copy_job *j);

/* The LU's medium is stopped, ejected, being sanitized or in sanitize failure mode. */
bool copy_lu_unready(struct scsi_lu *lu);
/* Would a command with this opcode from nx conflict with lu's reservations? */
bool copy_pr_blocks(struct scsi_lu *lu, const struct scsi_nexus *nx, uint8_t opcode);

#endif
