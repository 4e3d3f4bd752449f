/*
 * The persistent reservation state of one LU as a file (SPC-4 APTPL,
 * "activate persist through power loss"): a plain copy of what pr.c holds,
 * its JSON text, and the atomic write, read and removal of the file.
 * Nothing here knows the LU's locks; pr.c calls it under the LU mutex.
 * The format is in docs/reservations.md.
 */
#ifndef SCSI_PR_STATE_H
#define SCSI_PR_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PR_STATE_VERSION 1
/* Registrations an LU holds at most (pr.c refuses more); a file with more is refused too. */
#define PR_STATE_MAX_REGS 1024
/*
 * 1024 registrations of two 255-byte names stay below this even when every
 * byte of the names is written as a \u00XX escape (names come from the wire
 * as any bytes but NUL); pr.c never writes a file longer than this.
 */
#define PR_STATE_MAX_BYTES (4u << 20)

struct pr_state_reg {
	uint64_t key;             /* never 0 */
	char iport[256];          /* "<name>,i,0x<ISID>", or the bare name for every port of it; any bytes but NUL */
	char tport[256];          /* "<target name>,t,0x<TPGT>"; any bytes but NUL */
	uint16_t rtpi;
	bool all_tg_pt;
};

struct pr_state {
	char serial[65];          /* the LU's unit serial when written (VPD 0x80) */
	char naa[33];             /* its NAA designator in hex (VPD 0x83) */
	char backstore[64];       /* the backstore's name, for the operator and the log */
	uint32_t generation;
	bool aptpl;
	bool reserved;
	uint8_t type;
	int holder;               /* index into regs; -1 for all-registrants types */
	unsigned nregs;
	struct pr_state_reg *regs;
	/*
	 * An SPC-2 reservation (RESERVE(6/10)) and its I_T nexus: kept only in
	 * a state shared with other targets (SPC-2 reservations do not persist
	 * through power loss, so an APTPL file never has one).
	 */
	bool res2;
	char res2_iport[256];     /* "<name>,i,0x<ISID>" */
	char res2_tport[256];
};

/* Is iport a valid initiator port or name for a registration? Sets *has_isid, *name_len. */
bool pr_state_valid_iport(const char *iport, bool *has_isid, size_t *name_len);

/* JSON text of st (malloc'd; NULL without memory). */
char *pr_state_format(const struct pr_state *st);
/* Parse text (len bytes, not necessarily terminated); 0, or -EINVAL with err naming the field. */
int pr_state_parse(const char *text, size_t len, struct pr_state *st, char *err, size_t errlen);
void pr_state_clear(struct pr_state *st);

/* Read and parse path: 0, -ENOENT when absent, else -errno / -EINVAL with err. */
int pr_state_read(const char *path, struct pr_state *st, char *err, size_t errlen);
/* Write text to path atomically: temp file, fsync, rename, fsync of the folder (created 0700 if missing). */
int pr_state_write(const char *path, const char *text, char *err, size_t errlen);
/* Remove path (absent is fine) and fsync the folder. */
int pr_state_remove(const char *path, char *err, size_t errlen);

#endif
