/*
 * Token-based copy (ODX): POPULATE TOKEN, WRITE USING TOKEN and RECEIVE ROD
 * TOKEN INFORMATION (SBC-3 5.9, 5.52; SPC-4 5.16.6, 6.19) over the copy
 * engine (copy.c); the ROD tokens' table, their bounds, and the hooks by
 * which every write cancels the tokens whose ranges it changes.  The limits
 * below are what VPD 8Fh reports and what the commands enforce.
 */
#ifndef SCSI_ROD_H
#define SCSI_ROD_H

#include <stdbool.h>
#include <stdint.h>

#include "target/scsi/scsi_int.h"

#define ROD_TOKEN_LEN        512u
#define ROD_TOKEN_LEN_FIELD  0x01f8u          /* ROD TOKEN LENGTH: the bytes after byte 7 */
/* Block device range descriptors in one POPULATE TOKEN or WRITE USING TOKEN (MAXIMUM RANGE DESCRIPTORS). */
#define ROD_MAX_RANGES       64u
/* What one token represents and one WRITE USING TOKEN writes (MAXIMUM TOKEN TRANSFER SIZE, in bytes here). */
#define ROD_MAX_BYTES        (256ull << 20)
/* OPTIMAL TRANSFER COUNT (bytes here): a few engine windows per command. */
#define ROD_OPTIMAL_BYTES    (64ull << 20)
/* Inactivity timeouts (s): the default for 0, the most a POPULATE TOKEN may ask. */
#define ROD_DEFAULT_TIMEOUT  60u
#define ROD_MAX_TIMEOUT      600u
/* A token expires this long after it was made (s), however busy. */
#define ROD_MAX_LIFETIME     3600u
/* Tokens alive at once: on one LU, and in the whole process. */
#define ROD_TOKENS_PER_LU    128u
#define ROD_TOKENS_MAX       1024u
/* Tokens gone (expired, cancelled, revoked, deleted) remembered to say why, oldest forgotten first. */
#define ROD_GONE_MAX         256u
/* POPULATE TOKEN / WRITE USING TOKEN results held for RECEIVE ROD TOKEN INFORMATION: per I_T nexus and LU, in all. */
#define ROD_HELD_PER_NEXUS   8u
#define ROD_HELD_MAX         1024u

#define ROD_PT_HDR           16u
#define ROD_WUT_HDR          536u
#define ROD_RANGE_LEN        16u
#define ROD_MAX_PT_LIST      (ROD_PT_HDR + ROD_MAX_RANGES * ROD_RANGE_LEN)
#define ROD_MAX_WUT_LIST     (ROD_WUT_HDR + ROD_MAX_RANGES * ROD_RANGE_LEN)

/* ROD types (SPC-4 table 115). */
#define ROD_TYPE_AUR         0x00010000u      /* access upon reference */
#define ROD_TYPE_PIT_DEFAULT 0x00800000u      /* point in time copy - default */
#define ROD_TYPE_PIT_VULN    0x00800001u      /* point in time copy - change vulnerable */
#define ROD_TYPE_PIT_PERSIST 0x00800002u      /* point in time copy - persistent */
#define ROD_TYPE_PIT_ANY     0x0080ffffu      /* point in time copy - any */
#define ROD_TYPE_ZERO        0xffff0001u      /* block device zero ROD token */

/* Service actions: EXTENDED COPY (83h) and RECEIVE COPY RESULTS (84h). */
enum { ROD_SA_PT = 0x10, ROD_SA_WUT = 0x11, ROD_SA_RRTI = 0x07 };

struct rod_range {
	uint64_t lba;
	uint32_t n;
};

/* A POPULATE TOKEN parameter list. */
struct rod_pt {
	bool immed, rtv;
	uint32_t timeout;        /* INACTIVITY TIMEOUT, 0: the default */
	uint32_t rod_type;       /* valid with rtv */
	uint32_t nranges;
	struct rod_range r[ROD_MAX_RANGES];
};

/* A WRITE USING TOKEN parameter list (token points into the list). */
struct rod_wut {
	bool immed, del_tkn;
	uint64_t offset;         /* OFFSET INTO ROD, in logical blocks */
	const uint8_t *token;
	uint32_t nranges;
	struct rod_range r[ROD_MAX_RANGES];
};

/* Why a list was refused: sense key, ASC/ASCQ, field pointer into the list or INFORMATION. */
struct rod_err {
	uint8_t key;
	uint16_t asc;
	uint16_t field;
	int8_t bit;              /* < 0: no bit pointer */
	bool no_sks;             /* no sense-key specific data */
	bool info_valid;
	uint64_t info;
};

/*
 * Parse a parameter list of len bytes (all the CDB announced, all of it
 * received): the header, every range descriptor against the LU's nblocks
 * (none past the end, none overlapping another, at most max_blocks in all).
 * Returns 0, or -1 with *e saying why.
 */
int rod_parse_pt(const uint8_t *p, uint32_t len, uint64_t nblocks, uint64_t max_blocks, struct rod_pt *pt,
		 struct rod_err *e);
int rod_parse_wut(const uint8_t *p, uint32_t len, uint64_t nblocks, uint64_t max_blocks, struct rod_wut *w,
		  struct rod_err *e);

/* The commands (dispatch.c's table). */
bool rod_prep_pt(struct scsi_cmd *cmd);
void rod_pt(struct scsi_cmd *cmd);
bool rod_prep_wut(struct scsi_cmd *cmd);
void rod_wut(struct scsi_cmd *cmd);
void rod_rrti(struct scsi_cmd *cmd);

/* Tokens are offered on lu: not where other gateways write the same store (their writes would not cancel them). */
bool rod_supported(const struct scsi_lu *lu);
/* VPD 8Fh descriptors (xcopy_vpd): Block Device ROD Token Limits (0000h); ROD Token Features and Supported ROD Types (0106h, 0108h). */
void rod_vpd_limits(struct scsi_cmd *cmd, struct din *d);
void rod_vpd_features(struct scsi_cmd *cmd, struct din *d);

/* ---- hooks ---- */

/* Cancel lu's tokens that [lba, lba + n) overlaps (rod_will_write's slow path). */
void rod_invalidate(struct scsi_lu *lu, uint64_t lba, uint64_t n);
/* A write to [lba, lba + n) of lu is about to be issued: the tokens it overlaps are cancelled. */
static inline void rod_will_write(struct scsi_lu *lu, uint64_t lba, uint64_t n)
{
	if (n && __atomic_load_n(&lu->rod_tokens, __ATOMIC_ACQUIRE))
		rod_invalidate(lu, lba, n);
}
/* A command that changes the medium (OPF_WRITE) is about to execute: what it changes cancels tokens. */
void rod_cmd_writes_slow(struct scsi_cmd *cmd);
static inline void rod_cmd_writes(struct scsi_cmd *cmd)
{
	if (cmd->lu && __atomic_load_n(&cmd->lu->rod_tokens, __ATOMIC_ACQUIRE))
		rod_cmd_writes_slow(cmd);
}
/* LU or target reset: lu's tokens are revoked (a copy using one stops). */
void rod_lu_reset(struct scsi_lu *lu);
/* lu is being destroyed: its tokens and held results go (nothing may use them any more). */
void rod_lu_gone(struct scsi_lu *lu);
/* The nexus ended: its held results at lu go (those of a copy still running go when it ends). */
void rod_nexus_gone(struct scsi_lu *lu, uint64_t nexus_id);

/* The clock tokens expire by (ms, monotonic); tests point it elsewhere. */
extern uint64_t (*rod_clock_ms)(void);

#endif
