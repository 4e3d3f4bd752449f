/*
 * The SCSI unit tests' access to an LU's medium around the SCSI layer:
 * blocks written and read straight on the backstore (one that completes
 * inline, as RAM does without a reactor), a pattern in which every byte
 * names its block, and comparisons.
 */
#ifndef MEDIUM_H
#define MEDIUM_H

#include <stdbool.h>
#include <stdint.h>

#include "target/backstore/backstore.h"

/* n blocks at lba, from or into buf; a CUnit check that it succeeded. */
void medium_rw(struct backstore *b, enum backstore_op op, uint64_t lba, uint32_t n, void *buf);
/* Writes the pattern of tag: every byte names the block and its offset. */
void medium_fill(struct backstore *b, uint64_t lba, uint32_t n, uint8_t tag);
/* n blocks at lba, in a buffer the caller frees. */
uint8_t *medium_readback(struct backstore *b, uint64_t lba, uint32_t n);
/* Whether n blocks at a of ba hold what n blocks at bl of bb do (ba's block size). */
bool medium_same(struct backstore *ba, uint64_t a, struct backstore *bb, uint64_t bl, uint32_t n);

#endif
