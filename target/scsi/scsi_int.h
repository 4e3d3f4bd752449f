/*
 * Private to target/scsi: the LU object, the opcode table entry and the
 * helpers the emulation files share.
 */
#ifndef SCSI_INT_H
#define SCSI_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/scsi_proto.h"
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

/* Limits advertised in VPD B0 and enforced on the CDB. */
#define SCSI_MAX_XFER_BYTES   (16u << 20)
#define SCSI_MAX_UNMAP_LBAS   (1u << 20)
#define SCSI_MAX_UNMAP_DESCS  256u
#define SCSI_MAX_CAW_BLOCKS   255u
/* WRITE SAME: what WRITE SAME(10) can name, so (10) and (16) agree; bounds one command's work. */
#define SCSI_MAX_WS_BLOCKS    0xffffu

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

/* The longest PERSISTENT RESERVE OUT parameter list taken (prepare refuses more): the longest a shared change carries. */
#define SCSI_PR_OUT_MAX 4096

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
/* The job that w waits for started (w's reactor), or ended (any thread); w may be NULL. */
void scsi_wait_hold(struct scsi_wait *w);
void scsi_wait_end(struct scsi_wait *w);
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

/* Command flags in the opcode table. */
enum {
	OPF_UA_OK   = 1u << 0,  /* runs (and does not clear) with a unit attention pending */
	OPF_NO_LU   = 1u << 1,  /* answered for an unmapped LUN */
	OPF_MEDIUM  = 1u << 2,  /* needs the medium: NOT READY when stopped */
	OPF_WRITE   = 1u << 3,  /* modifies the medium: DATA PROTECT when read-only */
	OPF_THIN    = 1u << 4,  /* only on thin LUs */
	OPF_SA      = 1u << 5,  /* opcode has service actions */
	/*
	 * Changes LU state other nexuses see (mode pages, power and medium
	 * state, medium removal, reservations): DATA PROTECT from a read-only
	 * mapping.  Not for SWP: a read-write initiator sets and clears SWP
	 * with MODE SELECT.
	 */
	OPF_SHARED  = 1u << 6,
	OPF_ATOMIC  = 1u << 7,  /* only where the backstore offers atomic writes */
	OPF_EXPLICIT_ALUA = 1u << 8,  /* only where the target's alua.mode allows explicit transitions */
	/*
	 * Reservations: unsupported where other targets serve the same blocks
	 * (backstore_shared: an RBD image behind two gateways) and the LU could
	 * not attach to the store's shared state, where they would be silently
	 * wrong.
	 */
	OPF_RESERVATION = 1u << 9,
	/* Token-based copy (rod.c): not where other gateways write the same store. */
	OPF_TOKEN = 1u << 11,
	/* Runs in an ALUA standby, unavailable, transitioning port group (SPC-4 5.16.2.4); others: NOT READY. */
	OPF_STANDBY_OK       = 1u << 12,
	OPF_UNAVAILABLE_OK   = 1u << 13,
	OPF_TRANSITIONING_OK = 1u << 14,
	/* A SANITIZE service action only where the LU's backstore can do it (sanitize.c); else INVALID FIELD IN CDB. */
	OPF_SANITIZE = 1u << 15,
};

struct scsi_op {
	uint8_t opcode;
	uint16_t sa;
	uint8_t cdb_len;
	uint16_t flags;
	bool (*prepare)(struct scsi_cmd *cmd);   /* NULL: nothing to check or allocate */
	void (*exec)(struct scsi_cmd *cmd);
	uint8_t usage[16];                       /* CDB usage data for REPORT SUPPORTED OPCODES */
};

/* dispatch.c */
const struct scsi_op *scsi_op_find(uint8_t opcode, uint16_t sa, bool *sa_bad);
size_t scsi_op_count(void);
const struct scsi_op *scsi_op_at(size_t i);
/* The command exists for this LU and nexus (thin-only, atomic-only, explicit ALUA only). */
bool scsi_op_supported(const struct scsi_cmd *cmd, const struct scsi_op *op);

/* lu/lu.c */
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

/* lu/sense.c: build sense bytes into out (>= SCSI_SENSE_LEN); sks: 3 bytes or NULL. Returns length. */
uint32_t sense_build(uint8_t *out, bool desc, uint8_t key, uint16_t asc,
		     bool info_valid, uint64_t info, const uint8_t *sks);
bool sense_desc_format(const struct scsi_cmd *cmd);

/*
 * shared/share.c: keep lu's reservations in its store's shared state
 * (lu->state becomes lu_state_shared); 0, or -errno (logged; reservations
 * are then refused on it).  naa: the LU's NAA designator in hex.
 */
int share_attach(struct scsi_lu *lu, const char *name, const char *naa);
void share_detach(struct scsi_lu *lu);

/* cmd/spc.c */
bool spc_prep_din(struct scsi_cmd *cmd);
void spc_inquiry(struct scsi_cmd *cmd);
void spc_report_luns(struct scsi_cmd *cmd);
void spc_tur(struct scsi_cmd *cmd);
void spc_request_sense(struct scsi_cmd *cmd);
void spc_start_stop(struct scsi_cmd *cmd);
void spc_prevent_allow(struct scsi_cmd *cmd);
bool spc_prep_pr_out(struct scsi_cmd *cmd);
void spc_pr_in(struct scsi_cmd *cmd);
void spc_pr_out(struct scsi_cmd *cmd);
void spc_reserve(struct scsi_cmd *cmd);
void spc_release(struct scsi_cmd *cmd);

/* cmd/vpd.c: INQUIRY's Data-In for VPD page; false (nothing done) when the page is unknown. */
bool vpd_page(struct scsi_cmd *cmd, uint8_t page, uint32_t alloc);

/* alua.c */
bool alua_check(struct scsi_cmd *cmd, const struct scsi_op *op);
void alua_ua_sync(struct lu_nexus *n, const struct scsi_nexus *nx);
uint16_t alua_not_ready_asc(const struct scsi_nexus *nx);
uint16_t alua_group_id(const struct scsi_nexus *nx);
uint8_t alua_tpgs(const struct scsi_nexus *nx);
void alua_report_tpgs(struct scsi_cmd *cmd);
bool alua_prep_stpg(struct scsi_cmd *cmd);
void alua_set_tpgs(struct scsi_cmd *cmd);

/* cmd/mode.c */
void mode_sense(struct scsi_cmd *cmd);
bool mode_select_prep(struct scsi_cmd *cmd);
void mode_select(struct scsi_cmd *cmd);

/* cmd/sbc.c */
bool sbc_prep_rw(struct scsi_cmd *cmd);
void sbc_read(struct scsi_cmd *cmd);
void sbc_write(struct scsi_cmd *cmd);
bool sbc_prep_verify(struct scsi_cmd *cmd);
void sbc_verify(struct scsi_cmd *cmd);
bool sbc_prep_sync(struct scsi_cmd *cmd);
void sbc_sync(struct scsi_cmd *cmd);
bool sbc_prep_prefetch(struct scsi_cmd *cmd);
void sbc_nop(struct scsi_cmd *cmd);
bool sbc_prep_unmap(struct scsi_cmd *cmd);
void sbc_unmap(struct scsi_cmd *cmd);
bool sbc_prep_ws(struct scsi_cmd *cmd);
void sbc_ws(struct scsi_cmd *cmd);
bool sbc_prep_caw(struct scsi_cmd *cmd);
void sbc_caw(struct scsi_cmd *cmd);
bool sbc_prep_orwrite(struct scsi_cmd *cmd);
void sbc_orwrite(struct scsi_cmd *cmd);
bool sbc_prep_atomic(struct scsi_cmd *cmd);
void sbc_atomic(struct scsi_cmd *cmd);
uint32_t sbc_atomic_max_blocks(const struct scsi_lu *lu);
void sbc_read_defect(struct scsi_cmd *cmd);
void sbc_read_capacity10(struct scsi_cmd *cmd);
void sbc_read_capacity16(struct scsi_cmd *cmd);
void sbc_get_lba_status(struct scsi_cmd *cmd);
bool sbc_prep_get_lba_status(struct scsi_cmd *cmd);

/* copy/xcopy.c */
bool xcopy_prep(struct scsi_cmd *cmd);
void xcopy_exec(struct scsi_cmd *cmd);
void xcopy_receive_results(struct scsi_cmd *cmd);
void xcopy_vpd(struct scsi_cmd *cmd, struct din *d);

/* Common end of prepare for commands without a transfer from the CDB's view. */
static inline void scsi_no_xfer(struct scsi_cmd *cmd) { cmd->resid = (int64_t)cmd->edtl; }

#endif
