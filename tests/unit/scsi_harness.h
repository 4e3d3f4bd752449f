/*
 * The SCSI unit tests' one way to run a command through the SCSI layer
 * without a transport: a scsi_cmd built as an initiator's would be,
 * prepared, its Data-Out copied in, executed, and counted when done; and
 * the buffer pool the commands take their buffers from, with the check that
 * every buffer came back.
 */
#ifndef SCSI_HARNESS_H
#define SCSI_HARNESS_H

#include <stdbool.h>
#include <stdint.h>

#include "target/scsi/scsi.h"

struct bufpool;

/* lu.c's pool for commands without a reactor: sh_pool_open makes it. */
extern struct bufpool *scsi_test_pool;
/* Commands ended (their done called) since sh_start reset it.  Atomic: a
 * background worker (SANITIZE's) may end a command on its own thread. */
extern int sh_ndone;
/* The nexus and LUN map sh_cmd_init gives each command (NULL: none); a
 * test's setup sets them, a test may change c->nexus or c->lun_map after. */
extern const struct scsi_nexus *sh_nexus;
extern const struct scsi_lun_map *sh_lun_map;

/* 0, or -1 if the pool could not be made. */
int sh_pool_open(void);
/* Destroys it: -1 if a buffer was still out (a leak), else 0. */
int sh_pool_close(void);

/* A command of cdb[0..cdb_len) (a 16-byte CDB as the transport gives it) to
 * lu, with sh_nexus and sh_lun_map; edtl bytes expected, rd/wr its
 * direction; done counts into sh_ndone. */
void sh_cmd_init(struct scsi_cmd *c, struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len, uint32_t edtl,
		 bool rd, bool wr);
/* scsi_cmd_prepare, then the Data-Out (at most dlen bytes of dout) into the
 * command's buffer: false if prepare ended the command (c->status says how). */
bool sh_prepare(struct scsi_cmd *c, const void *dout, uint32_t dlen);
/* sh_ndone = 0, sh_prepare, scsi_cmd_exec: the command may end later.
 * False if prepare ended it.  The caller releases it. */
bool sh_start(struct scsi_cmd *c, const void *dout, uint32_t dlen);

#endif
