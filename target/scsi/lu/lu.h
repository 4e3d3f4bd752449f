/*
 * The logical unit (lu.c): the object every room of target/scsi works on,
 * its I_T nexus entries, the seam by which its reservations change, and
 * what a command ends with (sense.c, din.c).  Below every other room.
 */
#ifndef SCSI_LU_H
#define SCSI_LU_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/proto/scsi_proto.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/scsi/lu/din.h"
#include "target/scsi/lu/sense.h"
#include "target/scsi/scsi.h"

#define SCSI_UA_MAX 8
/* Stripes of an LU's count of writes in flight (struct scsi_lu, writers). */
#define SAN_WRITER_STRIPES 8
/* lu->sanitize: what the LU's sanitize state makes of commands (read without the LU's mutex). */
enum { SAN_STATE_NONE, SAN_STATE_RUNNING, SAN_STATE_FAILED };
/* Additional sense codes of sanitize operations (SPC-4 D.2). */
#define ASC_SANITIZE_IN_PROGRESS 0x041b
#define ASC_SANITIZE_FAILED      0x3103

/* EXTENDED COPY (LID1) list identifiers of one nexus at one copy manager (xcopy.c). */
#define XCOPY_IDS_MAX 8
enum { XCOPY_ID_FREE, XCOPY_ID_RUNNING, XCOPY_ID_HELD };
struct xcopy_id {
	uint8_t state;
	bool named;              /* LIST ID USAGE other than 11b */
	uint8_t list_id;
	uint8_t cm_status;       /* COPY MANAGER STATUS once held */
	uint16_t segs;           /* segments processed */
	uint32_t bytes;          /* bytes written */
	uint32_t seq;            /* age: the oldest held result gives way first */
};

/*
 * Per I_T nexus state of one LU (the I_T_L entry): pending unit attentions,
 * PREVENT, copies.  Written under the LU's mutex; abort_gen, n_ua and
 * alua_gen are also read without it (check_shared's common case), so they
 * are written with atomic stores.
 */
struct lu_nexus {
	uint64_t id;
	char initiator_name[224];
	char initiator_port[256];
	uint16_t abort_gen;          /* bumped by PREEMPT AND ABORT of this nexus */
	uint16_t ua[SCSI_UA_MAX];
	uint32_t n_ua;
	bool prevent;
	bool alua_seen;              /* alua_gen set (alua.c) */
	uint32_t alua_gen;           /* ALUA state changes this nexus was told of */
	struct xcopy_id xcopy_ids[XCOPY_IDS_MAX];
	struct lu_nexus *next;
};

/*
 * How an LU's reservations change (the design's seam 8: one interface, two
 * implementations).  Local (pr/local.c): pr.c under the LU's mutex, the
 * state of this process.  Shared (shared/share.c): the state of every
 * target serving the store, changed by compare-and-set and told to all of
 * them before the command is answered.  PR IN, the conflict checks and the unit attentions
 * read the LU's own copy (lu->pr) either way.
 */
struct lu_state_ops {
	void (*pr_out)(struct scsi_cmd *cmd);  /* each ends with scsi_cmd_complete(), maybe later */
	void (*reserve)(struct scsi_cmd *cmd);
	void (*release)(struct scsi_cmd *cmd);
	/*
	 * Under lu->mu: LU or target reset (the SPC-2 reservation goes, and ua,
	 * the unit attention it gave every nexus here, goes to every nexus
	 * there is), or nexus loss (its own SPC-2 reservation goes; ua 0).
	 */
	void (*reset)(struct scsi_lu *lu, const struct scsi_nexus *nexus, bool nexus_loss_only, uint16_t ua,
		      struct scsi_wait *w);
};
extern const struct lu_state_ops lu_state_local, lu_state_shared;
struct scsi_pr;
struct shared;

struct scsi_lu {
	pthread_mutex_t mu;          /* guards everything below marked (mu) */
	struct backstore *bs;
	struct scsi_pr *pr;          /* (mu) */
	const struct lu_state_ops *state;
	struct shared *share;        /* the store's shared object its reservations are kept in (share.c), or NULL */
	char *share_desc;            /* this gateway's entry on share's list of sharers, as last written */
	char vendor[9], product[17], revision[5], serial[65];
	uint64_t naa_hi, naa_lo;     /* NAA 6 designator derived from the serial */
	uint32_t block_size;
	uint8_t block_shift;
	bool thin;

	/* Mode page state (mu for writers; readers on the I/O path use atomics). */
	bool wce, d_sense, swp;

	bool stopped, ejected;       /* (mu) START STOP UNIT */
	struct lu_nexus *nexuses;    /* (mu) */
	/* ROD tokens made on this LU (rod.c): how many are alive (every write reads it, atomically), and which. */
	uint32_t rod_tokens;
	struct rod_token *rod_list;
	uint32_t pr_aborts;          /* PREEMPT AND ABORTs so far (written under mu, read atomically) */

	/* COMPARE AND WRITE, ORWRITE, WRITE ATOMIC in flight, in arrival order (sbc.c, serial_run). (mu) */
	struct scsi_cmd *ser_head, *ser_tail;

	/* SANITIZE (sanitize.c): SAN_STATE_* (written under mu, read atomically by prepare) and its operation. */
	uint8_t sanitize;
	struct lu_sanitize *san;
	uint16_t san_progress;       /* the running operation's PROGRESS INDICATION, of 65536 (atomic) */
	/*
	 * Commands and copy chunks writing the medium now (sanitize.c,
	 * lu_write_begin): a SANITIZE starts overwriting only once none
	 * is left.  One count per stripe of reactors, a cache line apart, so
	 * reactors writing the same LU do not bounce one line; only the sum
	 * means anything (a write may end on another stripe than it began).
	 */
	struct { uint32_t n; uint8_t pad[60]; } writers[SAN_WRITER_STRIPES];
};

struct buf *scsi_buf_get(struct scsi_cmd *cmd, size_t len);
void scsi_cmd_complete(struct scsi_cmd *cmd);
/* Under lu->mu: the nexus entry, created on first use (NULL without a nexus or memory). */
struct lu_nexus *lu_nexus_get(struct scsi_lu *lu, const struct scsi_nexus *nx);
/* Under lu->mu: queue asc on every nexus except skip (may be NULL). */
void lu_ua_all(struct scsi_lu *lu, const struct scsi_nexus *skip, uint16_t asc);
/* Under lu->mu: another gateway's reset: asc to every nexus here, and (abort) their commands not started end. */
void lu_everyone(struct scsi_lu *lu, uint16_t asc, bool abort);
bool lu_ua_pop(struct lu_nexus *n, uint16_t *asc);
/* Under lu->mu: queue asc on nexus n. */
void lu_ua_add(struct lu_nexus *n, uint16_t asc);
/*
 * cmd->flags bits 16-31 hold the nexus's abort_gen as seen by prepare, so
 * exec can tell a command that PREEMPT AND ABORT overtook while its
 * Data-Out arrived.  The emulation files use the low 16 bits.
 */
#define CMD_GEN_SHIFT 16
/* Under lu->mu: was cmd's nexus aborted since prepare? */
bool lu_cmd_aborted(struct scsi_lu *lu, const struct scsi_cmd *cmd);
uint64_t lu_nblocks(const struct scsi_lu *lu);
/*
 * A write to lu's medium begins (a command's exec, a copy's chunk; r its
 * reactor or NULL): SAN_STATE_NONE, and it is counted until
 * lu_write_end(), or the state that refuses it (nothing counted).
 * A SANITIZE overwrites only once every write counted before it has ended
 * (lu_writers() is 0).
 */
uint8_t lu_write_begin(struct scsi_lu *lu, const struct reactor *r);
void lu_write_end(struct scsi_lu *lu, const struct reactor *r);
uint32_t lu_writers(struct scsi_lu *lu);
/* The sense of a command that the LU's sanitize state (RUNNING or FAILED) refuses. */
void lu_sanitize_refuse(struct scsi_cmd *cmd, uint8_t state);
/* The NAA 6 designator VPD 83h reports (locally administered OUI, 100 bits from the serial). */
void lu_naa(const struct scsi_lu *lu, uint8_t id[16]);
/* A parameter list of plen bytes (bounded by the caller) comes as Data-Out into cmd->buf. */
bool scsi_prep_param_list(struct scsi_cmd *cmd, uint32_t plen);
/* The medium may not be written: read-only mapping or backstore, or SWP. */
bool lu_write_protected(const struct scsi_cmd *cmd);
/* This nexus sees the LU through a read-only mapping (or the backstore is read-only). */
bool lu_mapping_ro(const struct scsi_cmd *cmd);
static inline bool lu_flag(const bool *p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
static inline void lu_flag_set(bool *p, bool v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

/* sense.c: build sense bytes into out (>= SCSI_SENSE_LEN); sks: 3 bytes or NULL. Returns length. */
uint32_t sense_build(uint8_t *out, bool desc, uint8_t key, uint16_t asc,
		     bool info_valid, uint64_t info, const uint8_t *sks);
bool sense_desc_format(const struct scsi_cmd *cmd);

#endif
