/*
 * The unit tests' view of a finished scsi_cmd's sense data (fixed or
 * descriptor format, SPC-4 4.4): key, ASC/ASCQ, the fixed format's field
 * pointer, and a CUnit check of all three that prints what came instead.
 */
#ifndef SENSE_CHECK_H
#define SENSE_CHECK_H

#include <CUnit/CUnit.h>
#include <stdio.h>

#include "common/util.h"
#include "target/scsi/scsi.h"

static inline uint8_t sk(const struct scsi_cmd *c)
{
	return c->sense[0] == 0x72 ? c->sense[1] & 0xf : c->sense[2] & 0xf;
}

static inline uint16_t asc(const struct scsi_cmd *c)
{
	return c->sense[0] == 0x72 ? get_be16(c->sense + 2) : get_be16(c->sense + 12);
}

/* Fixed format: the sense-key-specific field pointer (bytes 16-17). */
static inline uint16_t field_ptr(const struct scsi_cmd *c)
{
	return get_be16(c->sense + 16);
}

static inline void expect_sense(const struct scsi_cmd *c, uint8_t key, uint16_t a)
{
	CU_ASSERT_EQUAL(c->status, SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(sk(c), key);
	CU_ASSERT_EQUAL(asc(c), a);
	if (c->status != SCSI_CHECK_CONDITION || sk(c) != key || asc(c) != a)
		fprintf(stderr, "  got status %02x sense %x/%04x, want %x/%04x\n", c->status, sk(c), asc(c), key, a);
}

#endif
