/* Unit tests for common/proto/serial.h: RFC 1982 comparisons with SERIAL_BITS = 32. */
#include <CUnit/Basic.h>

#include "common/proto/serial.h"

#include "unit_run.h"

static void test_basic(void)
{
	CU_ASSERT_TRUE(serial_lt(1, 2));
	CU_ASSERT_FALSE(serial_lt(2, 1));
	CU_ASSERT_FALSE(serial_lt(5, 5));
	CU_ASSERT_TRUE(serial_gt(2, 1));
	CU_ASSERT_FALSE(serial_gt(1, 2));
	CU_ASSERT_FALSE(serial_gt(5, 5));
	CU_ASSERT_TRUE(serial_le(5, 5));
	CU_ASSERT_TRUE(serial_ge(5, 5));
	CU_ASSERT_TRUE(serial_le(4, 5));
	CU_ASSERT_FALSE(serial_ge(4, 5));
}

static void test_wrap(void)
{
	/* 0xffffffff + 1 wraps to 0: 0 is after 0xffffffff. */
	CU_ASSERT_TRUE(serial_lt(0xffffffffu, 0));
	CU_ASSERT_TRUE(serial_gt(0, 0xffffffffu));
	CU_ASSERT_TRUE(serial_lt(0xfffffff0u, 0x10));
	CU_ASSERT_FALSE(serial_gt(0xfffffff0u, 0x10));
	/* Largest forward distance 2^31 - 1 still compares. */
	CU_ASSERT_TRUE(serial_lt(0, 0x7fffffffu));
	CU_ASSERT_TRUE(serial_gt(0x7fffffffu, 0));
	CU_ASSERT_TRUE(serial_lt(0x80000001u, 0));
	CU_ASSERT_TRUE(serial_gt(0, 0x80000001u));
	CU_ASSERT_TRUE(serial_lt(0x90000001u, 0x10000000u));
	CU_ASSERT_FALSE(serial_lt(0x10000000u, 0x90000001u));
}

static void test_undefined(void)
{
	/* Distance exactly 2^31 is undefined in RFC 1982: neither less nor greater. */
	CU_ASSERT_FALSE(serial_lt(0, 0x80000000u));
	CU_ASSERT_FALSE(serial_gt(0, 0x80000000u));
	CU_ASSERT_FALSE(serial_lt(0x80000000u, 0));
	CU_ASSERT_FALSE(serial_gt(0x80000000u, 0));
	CU_ASSERT_FALSE(serial_lt(0x12345678u, 0x92345678u));
	CU_ASSERT_FALSE(serial_le(0, 0x80000000u));
	CU_ASSERT_FALSE(serial_ge(0, 0x80000000u));
}

static void test_window(void)
{
	CU_ASSERT_TRUE(serial_in_window(10, 10, 20));
	CU_ASSERT_TRUE(serial_in_window(20, 10, 20));
	CU_ASSERT_TRUE(serial_in_window(15, 10, 20));
	CU_ASSERT_FALSE(serial_in_window(9, 10, 20));
	CU_ASSERT_FALSE(serial_in_window(21, 10, 20));
	/* A CmdSN window that spans the wrap. */
	CU_ASSERT_TRUE(serial_in_window(0xfffffffeu, 0xfffffff0u, 5));
	CU_ASSERT_TRUE(serial_in_window(0, 0xfffffff0u, 5));
	CU_ASSERT_TRUE(serial_in_window(5, 0xfffffff0u, 5));
	CU_ASSERT_FALSE(serial_in_window(6, 0xfffffff0u, 5));
	CU_ASSERT_FALSE(serial_in_window(0xffffffefu, 0xfffffff0u, 5));
	/* Empty window, as when MaxCmdSN = ExpCmdSN - 1 (queue full). */
	CU_ASSERT_FALSE(serial_in_window(10, 10, 9));
}

/* Exhaustive over a small neighbourhood: exactly one of <, ==, > or undefined holds. */
static void test_trichotomy(void)
{
	static const uint32_t base[] = { 0, 1, 0x7fffffffu, 0x80000000u, 0xfffffffeu, 0xffffffffu };

	for (unsigned i = 0; i < sizeof(base) / sizeof(base[0]); i++) {
		for (int d = -3; d <= 3; d++) {
			uint32_t a = base[i], b = base[i] + (uint32_t)d;
			int n = serial_lt(a, b) + serial_gt(a, b) + (a == b);

			CU_ASSERT_EQUAL(n, 1);
			CU_ASSERT_EQUAL(serial_lt(a, b), serial_gt(b, a));
			CU_ASSERT_EQUAL(serial_lt(a, b), d > 0);
		}
	}
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("serial", NULL, NULL);
	CU_add_test(s, "basic", test_basic);
	CU_add_test(s, "wrap-around", test_wrap);
	CU_add_test(s, "undefined distance", test_undefined);
	CU_add_test(s, "window", test_window);
	CU_add_test(s, "trichotomy", test_trichotomy);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
