/*
 * SANITIZE (SBC-4 5.30, 4.11): the CDB and OVERWRITE parameter list
 * parsers (pure, unit-tested and fuzzed), and the hooks the rest of the
 * SCSI layer calls: the LU's sanitize state refuses commands while an
 * operation runs or failed, REQUEST SENSE reports its progress, VPD B1
 * and REPORT SUPPORTED OPERATION CODES say which service actions the LU's
 * backstore can do.  The operation itself runs on a thread of its own
 * (sanitize.c), never on a reactor.
 */
#ifndef SCSI_SANITIZE_H
#define SCSI_SANITIZE_H

#include <stdbool.h>
#include <stdint.h>

struct reactor;
struct scsi_cmd;
struct scsi_lu;
struct scsi_op;

/* Service actions (SBC-4 table 98). */
enum { SAN_OVERWRITE = 0x01, SAN_BLOCK_ERASE = 0x02, SAN_CRYPTO_ERASE = 0x03, SAN_EXIT_FAILURE = 0x1f };

/* The most an INITIALIZATION PATTERN can be: one logical block (4096 is the largest block size served). */
#define SAN_PATTERN_MAX 4096u
/* The worker's buffer: overwrite passes are written from it, chunk by chunk (bounded, not the LU's size). */
#define SAN_CHUNK_BYTES (1u << 20)
/* Block erase hands the backstore ranges of at most this much, so progress moves and a cancel is seen. */
#define SAN_ERASE_BYTES (64u << 20)

/* Why a CDB or parameter list was refused: INVALID FIELD IN CDB / PARAMETER LIST and the field pointer. */
struct san_err {
	bool in_cdb;          /* INVALID FIELD IN CDB, else INVALID FIELD IN PARAMETER LIST */
	bool plle;            /* PARAMETER LIST LENGTH ERROR (no field pointer) */
	uint16_t field;       /* byte */
	int8_t bit;           /* < 0: no bit pointer */
};

struct san_cdb {
	uint8_t sa;
	bool immed, ause, znr;
	uint16_t plen;        /* PARAMETER LIST LENGTH */
};

struct san_overwrite {
	bool invert;
	uint8_t count;        /* OVERWRITE COUNT, 1..31 */
	uint16_t ipl;         /* INITIALIZATION PATTERN LENGTH, 1..block size */
	uint8_t pattern[SAN_PATTERN_MAX];
};

/* The CDB (10 bytes); the service action itself was checked by the opcode table.  0, or -1 with *e. */
int sanitize_parse_cdb(const uint8_t *cdb, uint32_t block_size, struct san_cdb *c, struct san_err *e);
/* The OVERWRITE parameter list of len bytes (len == the CDB's PARAMETER LIST LENGTH).  0, or -1 with *e. */
int sanitize_parse_overwrite(const uint8_t *p, uint32_t len, uint32_t block_size, struct san_overwrite *o,
			     struct san_err *e);
/*
 * One logical block of pass `pass` (0-based) of o: the pattern from the
 * block's first byte, repeated and cut at its end; with INVERT, passes
 * alternate so that the last one writes the pattern as given.
 */
void sanitize_fill_block(const struct san_overwrite *o, unsigned pass, uint8_t *block, uint32_t block_size);

/*
 * The fuzzer sets this: the operation runs on the caller's thread before
 * the command ends (one command at a time, deterministic), not on a worker.
 */
extern bool sanitize_inline;

/* The opcode table's entries and hooks (dispatch.c, spc.c, vpd.c, ../lu_life.c). */
bool sanitize_prep(struct scsi_cmd *cmd);
void sanitize_exec(struct scsi_cmd *cmd);
/* Can this LU do the service action (OPF_SANITIZE entries)? */
bool sanitize_sa_supported(const struct scsi_lu *lu, uint16_t sa);
/* prepare and exec: false (sense set) when the LU's sanitize state refuses op. */
bool sanitize_check(struct scsi_cmd *cmd, const struct scsi_op *op);
/* REQUEST SENSE: the sanitize state's sense, with the progress indication in sks; false if none. */
bool sanitize_sense(struct scsi_lu *lu, uint8_t *key, uint16_t *asc, uint8_t sks[3]);
/* VPD B1 byte 7: WABEREQ and WACEREQ (01b where the LU does that erase: reads after it succeed). */
uint8_t sanitize_vpd_b1(const struct scsi_lu *lu);
/*
 * At LU creation: where the LU's "sanitize needed" marker lives (the APTPL
 * state folder; NULL: nowhere) and, if one was left by a sanitize that did
 * not finish (isertd died), the LU starts in sanitize failure mode.
 */
void sanitize_lu_init(struct scsi_lu *lu, const char *state_dir, const char *naa_hex);
/* The LU goes: a running operation is stopped (at its next chunk) and its thread joined. */
void sanitize_lu_destroy(struct scsi_lu *lu);

#endif
