/* Medium access for the SCSI unit tests: see medium.h. */
#include "medium.h"

#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>

static void medium_cb(struct bs_io *io, int res)
{
	*(int *)io->priv = res;
}

void medium_rw(struct backstore *b, enum backstore_op op, uint64_t lba, uint32_t n, void *buf)
{
	uint32_t bs = backstore_block_size(b);
	int res = 1;
	struct bs_io io = { .op = op, .buf = buf, .offset = lba * bs, .len = (uint64_t)n * bs, .cb = medium_cb,
			    .priv = &res };
	backstore_submit(b, &io);
	CU_ASSERT_EQUAL(res, 0);
}

void medium_fill(struct backstore *b, uint64_t lba, uint32_t n, uint8_t tag)
{
	uint32_t bs = backstore_block_size(b);
	uint8_t *buf = malloc((size_t)n * bs);
	for (uint32_t k = 0; k < n; k++)
		for (uint32_t i = 0; i < bs; i++)
			buf[(size_t)k * bs + i] = (uint8_t)(tag ^ (lba + k) ^ (i * 7));
	medium_rw(b, BS_WRITE, lba, n, buf);
	free(buf);
}

uint8_t *medium_readback(struct backstore *b, uint64_t lba, uint32_t n)
{
	uint8_t *buf = malloc((size_t)n * backstore_block_size(b));
	medium_rw(b, BS_READ, lba, n, buf);
	return buf;
}

bool medium_same(struct backstore *ba, uint64_t a, struct backstore *bb, uint64_t bl, uint32_t n)
{
	uint8_t *x = medium_readback(ba, a, n), *y = medium_readback(bb, bl, n);
	bool eq = !memcmp(x, y, (size_t)n * backstore_block_size(ba));
	free(x);
	free(y);
	return eq;
}
