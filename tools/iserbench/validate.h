/*
 * iserbench data validation (-v), vdbench-like.  An SD is cut into
 * data-validation units; a key table holds one byte per unit: 0 never
 * written (or content unknown, e.g. after a failed write), else the key
 * 1..126 of the last write.  A write gives each unit it covers the next key
 * and fills it with a self-describing pattern: a header (magic, hash of the
 * SD name, the unit's LBA, the key, the SD's write count) and a body derived
 * from LBA and key.  A read checks every unit whose key is known; reads of
 * units never written are not checked (no pre-fill pass, unlike vdbench's
 * "read of a never-written block" journal).  An in-flight bit per unit keeps
 * two I/Os off the same unit, so the expected key is always well defined.
 */
#ifndef ISERBENCH_VALIDATE_H
#define ISERBENCH_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ib_val {
	const char *sd, *lun;       /* names for messages */
	uint64_t sdhash;
	uint32_t unit;              /* bytes, a power of two >= 512 */
	uint32_t block_size;        /* of the LUN: LBAs in messages */
	uint64_t nunits;
	uint8_t *key;
	uint8_t *busy;              /* one bit per unit */
	uint8_t *scratch;           /* one unit: the expected pattern */
	uint64_t writes;            /* units written so far */
	uint64_t errors;
	unsigned printed;           /* messages printed (capped) */
};

/* The key table of an SD of size bytes; refuses tables over 1 GiB. */
int ib_val_init(struct ib_val *v, const char *sd, const char *lun, uint64_t size, uint32_t unit,
		uint32_t block_size, char *err, size_t errlen);
void ib_val_free(struct ib_val *v);
/* Claim the units of [off, off+len) for one I/O; false if one is in flight. */
bool ib_val_claim(struct ib_val *v, uint64_t off, uint32_t len);
void ib_val_release(struct ib_val *v, uint64_t off, uint32_t len);
/* Give the units their next key and fill buf with their patterns. */
void ib_val_fill(struct ib_val *v, void *buf, uint64_t off, uint32_t len);
/* A write failed: the units' content is unknown from now on. */
void ib_val_forget(struct ib_val *v, uint64_t off, uint32_t len);
/* Check a completed read; prints mismatches to stderr, returns how many units failed. */
unsigned ib_val_check(struct ib_val *v, const void *buf, uint64_t off, uint32_t len);

#endif
