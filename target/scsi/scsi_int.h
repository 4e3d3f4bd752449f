/*
 * Private to target/scsi: the opcode table entry, the limits the commands
 * share, and what dispatch.c and lu_life.c call in the rooms below them.
 * The LU itself is lu/lu.h, which every room stands on.
 */
#ifndef SCSI_INT_H
#define SCSI_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "target/scsi/lu/lu.h"
#include "target/scsi/scsi.h"

/* Limits advertised in VPD B0 and enforced on the CDB. */
#define SCSI_MAX_XFER_BYTES   (16u << 20)
#define SCSI_MAX_UNMAP_LBAS   (1u << 20)
#define SCSI_MAX_UNMAP_DESCS  256u
#define SCSI_MAX_CAW_BLOCKS   255u
/* WRITE SAME: what WRITE SAME(10) can name, so (10) and (16) agree; bounds one command's work. */
#define SCSI_MAX_WS_BLOCKS    0xffffu

/* The longest PERSISTENT RESERVE OUT parameter list taken (prepare refuses more): the longest a shared change carries. */
#define SCSI_PR_OUT_MAX 4096

/* The job that w waits for started (w's reactor), or ended (any thread); w may be NULL. */
void scsi_wait_hold(struct scsi_wait *w);
void scsi_wait_end(struct scsi_wait *w);

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
