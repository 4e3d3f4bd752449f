/*
 * EXTENDED COPY (LID1) parameter list: the limits the copy manager reports
 * (RECEIVE COPY RESULTS operating parameters, VPD 8Fh) and enforces, and
 * the parser, kept apart from the copy engine so it can be tested alone.
 */
#ifndef SCSI_XCOPY_H
#define SCSI_XCOPY_H

#include <stdint.h>

/* Identification descriptor CSCD descriptors (E4h): 32 bytes each. */
#define XCOPY_MAX_TGT_DESCS   8u
/* Block device to block device segment descriptors (02h): 28 bytes each. */
#define XCOPY_MAX_SEG_DESCS   16u
/* MAXIMUM DESCRIPTOR LIST LENGTH: room for both maxima, nothing more. */
#define XCOPY_MAX_DESC_LIST   (XCOPY_MAX_TGT_DESCS * 32u + XCOPY_MAX_SEG_DESCS * 28u)
/* The most Data-Out an EXTENDED COPY may carry: header + descriptors (no inline data). */
#define XCOPY_MAX_PARAM_LEN   (16u + XCOPY_MAX_DESC_LIST)
/* MAXIMUM SEGMENT LENGTH in bytes: the largest READ/WRITE (VPD B0) as well. */
#define XCOPY_MAX_SEG_BYTES   (16u << 20)
/* One command moves at most this much (every segment at its maximum). */
#define XCOPY_MAX_TOTAL_BYTES ((uint64_t)XCOPY_MAX_SEG_DESCS * XCOPY_MAX_SEG_BYTES)

/* LIST ID USAGE (parameter list header byte 1 bits 4-3). */
enum { XCOPY_USAGE_HOLD = 0, XCOPY_USAGE_NOHOLD = 2, XCOPY_USAGE_NONE = 3 };

struct xcopy_tgt {
	uint16_t off;          /* of the descriptor in the parameter list */
	uint8_t desig_type;    /* designation descriptor: DESIGNATOR TYPE */
	uint8_t assoc;         /* ASSOCIATION */
	uint8_t desig_len;
	uint8_t desig[20];
	uint32_t block_len;    /* DISK BLOCK LENGTH */
};

struct xcopy_seg {
	uint16_t off;          /* of the descriptor in the parameter list */
	uint16_t src, dst;     /* CSCD descriptor indexes */
	uint32_t nblocks;
	uint64_t src_lba, dst_lba;
};

struct xcopy_list {
	uint8_t list_id, usage;
	uint16_t ntgt, nseg;
	struct xcopy_tgt tgt[XCOPY_MAX_TGT_DESCS];
	struct xcopy_seg seg[XCOPY_MAX_SEG_DESCS];
};

/* Why a list was refused: sense key, ASC/ASCQ and the field pointer into the list. */
struct xcopy_err {
	uint8_t key;
	uint16_t asc;
	uint16_t field;
	int8_t bit;            /* < 0: no bit pointer */
	uint8_t no_sks;        /* no sense-key specific data (PARAMETER LIST LENGTH ERROR) */
};

/*
 * Parse and check the structure of a parameter list of len bytes (the
 * whole list the CDB announced, len >= 1): header, CSCD and segment
 * descriptors.  Which LUs the descriptors name is resolved by the caller.
 * Returns 0, or -1 with *e saying why.
 */
int xcopy_parse(const uint8_t *p, uint32_t len, struct xcopy_list *l, struct xcopy_err *e);

#endif
