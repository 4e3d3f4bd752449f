/* Unit tests for common/proto/crc32c.c: RFC 3720 B.4 vectors on both implementations. */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto/crc32c.h"

#include "unit_run.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static uint32_t oneshot(crc_fn f, const void *d, size_t n)
{
	return crc32c_final(f(crc32c_init(), d, n));
}

static void vectors(crc_fn f)
{
	uint8_t b[32];

	memset(b, 0, sizeof(b));
	CU_ASSERT_EQUAL(oneshot(f, b, 32), 0x8a9136aa);
	memset(b, 0xff, sizeof(b));
	CU_ASSERT_EQUAL(oneshot(f, b, 32), 0x62a8ab43);
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)i;
	CU_ASSERT_EQUAL(oneshot(f, b, 32), 0x46dd794e);
	for (int i = 0; i < 32; i++)
		b[i] = (uint8_t)(31 - i);
	CU_ASSERT_EQUAL(oneshot(f, b, 32), 0x113fdb5c);
	CU_ASSERT_EQUAL(oneshot(f, "123456789", 9), 0xe3069283);
	CU_ASSERT_EQUAL(oneshot(f, "a", 1), 0xc1d04330);
	CU_ASSERT_EQUAL(oneshot(f, "", 0), 0);
}

static void test_table(void)
{
	vectors(crc32c_update_table);
}

static void test_hw(void)
{
	/* Falls back to the table without SSE4.2, so the vectors hold either way. */
	vectors(crc32c_update_hw);
	vectors(crc32c_update);
}

static void test_oneshot_le(void)
{
	uint8_t zeros[32] = { 0 }, wire[4];
	uint32_t d = crc32c(zeros, sizeof(zeros));

	/* RFC 3720 B.4 lists the digest bytes as aa 36 91 8a: little-endian. */
	CU_ASSERT_EQUAL(d, 0x8a9136aa);
	wire[0] = (uint8_t)d;
	wire[1] = (uint8_t)(d >> 8);
	wire[2] = (uint8_t)(d >> 16);
	wire[3] = (uint8_t)(d >> 24);
	CU_ASSERT_EQUAL(wire[0], 0xaa);
	CU_ASSERT_EQUAL(wire[1], 0x36);
	CU_ASSERT_EQUAL(wire[2], 0x91);
	CU_ASSERT_EQUAL(wire[3], 0x8a);
}

/* Both implementations agree at every length and alignment, and chunking is invisible. */
static void test_agree(void)
{
	enum { N = 4096 + 64 };
	uint8_t *buf = malloc(N);
	uint32_t seed = 12345;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	for (int i = 0; i < N; i++) {
		seed = seed * 1103515245u + 12345u;
		buf[i] = (uint8_t)(seed >> 16);
	}
	for (size_t off = 0; off < 9; off++) {
		for (size_t len = 0; len < 300; len++) {
			uint32_t a = oneshot(crc32c_update_table, buf + off, len);
			uint32_t b = oneshot(crc32c_update_hw, buf + off, len);

			if (a != b) {
				CU_FAIL("table and hardware CRC differ");
				goto out;
			}
		}
	}
	{
		uint32_t whole = crc32c(buf, 4096), c = crc32c_init();

		c = crc32c_update(c, buf, 1);
		c = crc32c_update(c, buf + 1, 1000);
		c = crc32c_update(c, buf + 1001, 4096 - 1001);
		CU_ASSERT_EQUAL(crc32c_final(c), whole);
		CU_ASSERT_EQUAL(oneshot(crc32c_update_table, buf, 4096), whole);
		/* A single flipped bit changes the digest. */
		buf[2000] ^= 0x10;
		CU_ASSERT_NOT_EQUAL(crc32c(buf, 4096), whole);
	}
out:
	free(buf);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("crc32c", NULL, NULL);
	CU_add_test(s, "table vectors", test_table);
	CU_add_test(s, "hardware vectors", test_hw);
	CU_add_test(s, "one-shot byte order", test_oneshot_le);
	CU_add_test(s, "implementations agree", test_agree);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	int rc = unit_run();
	printf("SSE4.2 CRC32C: %s\n", crc32c_have_hw() ? "yes" : "no");
	return rc;
}
