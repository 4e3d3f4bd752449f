/*
 * Unit tests for common/bufpool.c: size classes, the byte cap a peer cannot
 * push the pool past, slabs beyond the warm size given back once free, and
 * the registration hook called once per slab (never per buffer).
 */
#include <CUnit/Basic.h>
#include <stdint.h>

#include "common/bufpool.h"

static int regs, deregs;

static int reg(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey, void **handle)
{
	regs++;
	*lkey = *rkey = 7;
	*handle = addr;
	return 0;
}

static void dereg(void *ctx, void *handle)
{
	deregs++;
}

static void test_classes(void)
{
	CU_ASSERT_EQUAL(bufpool_buf_size(0), 4096);
	CU_ASSERT_EQUAL(bufpool_buf_size(4097), 8192);
	CU_ASSERT_EQUAL(bufpool_buf_size(1 << 20), 1 << 20);
	CU_ASSERT_EQUAL(bufpool_buf_size((size_t)1 << 40), 0);
	struct bufpool *p = bufpool_create();
	struct buf *b = bufpool_get(p, 5000);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(b->cap, 8192);
	CU_ASSERT_EQUAL(bufpool_in_use(p), 1);
	bufpool_put(b);
	CU_ASSERT_EQUAL(bufpool_in_use(p), 0);
	CU_ASSERT_PTR_NULL(bufpool_get(p, (size_t)1 << 40));
	bufpool_destroy(p);
}

/* The cap: past it bufpool_get fails and bufpool_has_room says so first. */
static void test_cap(void)
{
	struct bufpool *p = bufpool_create();
	bufpool_set_limits(p, 16u << 20, SIZE_MAX);
	struct buf *b[8];
	for (int i = 0; i < 4; i++) {
		CU_ASSERT(bufpool_has_room(p, 4u << 20));
		b[i] = bufpool_get(p, 4u << 20);
		CU_ASSERT_FATAL(b[i] != NULL);
	}
	CU_ASSERT_EQUAL(bufpool_bytes(p), 16u << 20);
	CU_ASSERT_FALSE(bufpool_has_room(p, 4096));
	CU_ASSERT_PTR_NULL(bufpool_get(p, 4096));
	bufpool_put(b[0]);
	/* A free 4 MiB buffer is room for its class, not for a new slab of another. */
	CU_ASSERT(bufpool_has_room(p, 4u << 20));
	CU_ASSERT_FALSE(bufpool_has_room(p, 4096));
	for (int i = 1; i < 4; i++)
		bufpool_put(b[i]);
	bufpool_destroy(p);
}

/* Beyond the warm size a slab whose buffers all came back is unmapped and deregistered. */
static void test_give_back(void)
{
	struct bufpool *p = bufpool_create();
	struct bufpool_reg_ops ops = { .reg = reg, .dereg = dereg };
	regs = deregs = 0;
	bufpool_set_limits(p, 64u << 20, 8u << 20);
	CU_ASSERT_EQUAL(bufpool_set_reg(p, &ops), 0);
	struct buf *b[6];
	for (int i = 0; i < 6; i++) {
		b[i] = bufpool_get(p, 2u << 20); /* two per 4 MiB slab */
		CU_ASSERT_FATAL(b[i] != NULL);
		CU_ASSERT_EQUAL(b[i]->lkey, 7);
	}
	CU_ASSERT_EQUAL(regs, 3);
	CU_ASSERT_EQUAL(bufpool_bytes(p), 12u << 20);
	for (int i = 0; i < 6; i++)
		bufpool_put(b[i]);
	/* 12 MiB held, 8 warm: the first slab to empty went; the rest stay for the next burst. */
	CU_ASSERT_EQUAL(bufpool_bytes(p), 8u << 20);
	CU_ASSERT_EQUAL(deregs, 1);
	struct buf *again = bufpool_get(p, 2u << 20);
	CU_ASSERT_EQUAL(regs, 3); /* warm: no new registration */
	bufpool_put(again);
	bufpool_destroy(p);
	CU_ASSERT_EQUAL(deregs, 3);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("bufpool", NULL, NULL);
	CU_add_test(s, "size classes", test_classes);
	CU_add_test(s, "byte cap", test_cap);
	CU_add_test(s, "slabs beyond the warm size given back", test_give_back);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	unsigned fails = CU_get_number_of_failures();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
