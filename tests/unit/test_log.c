/* Unit tests for common/log.c and common/utf8.c: every line escaped where it is written. */
#include <CUnit/Basic.h>
#include <string.h>

#include "common/log.h"
#include "common/utf8.h"

#include "unit_run.h"

static char got[2048];

static void sink(enum log_level lvl, const char *line)
{
	(void)lvl;
	snprintf(got, sizeof(got), "%s", line);
}

static const char *logged(const char *arg)
{
	got[0] = 0;
	log_info("name '%s' end", arg);
	return got;
}

static void test_controls(void)
{
	CU_ASSERT_STRING_EQUAL(logged("a\nisert error: forged"), "name 'a\\x0aisert error: forged' end");
	CU_ASSERT_STRING_EQUAL(logged("b\rc"), "name 'b\\x0dc' end");
	CU_ASSERT_STRING_EQUAL(logged("\x1b[31mred"), "name '\\x1b[31mred' end");
	CU_ASSERT_STRING_EQUAL(logged("del\x7f"), "name 'del\\x7f' end");
	/* C1 CSI (U+009B) is valid UTF-8 but a terminal control. */
	CU_ASSERT_STRING_EQUAL(logged("\xc2\x9b" "2J"), "name '\\xc2\\x9b2J' end");
}

static void test_utf8(void)
{
	/* Valid UTF-8 passes as it is; invalid bytes are escaped one by one. */
	CU_ASSERT_STRING_EQUAL(logged("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe"), "name 'caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe' end");
	CU_ASSERT_STRING_EQUAL(logged("\xc3\x28\xff"), "name '\\xc3(\\xff' end");
	CU_ASSERT_STRING_EQUAL(logged("\xc0\xaf"), "name '\\xc0\\xaf' end");           /* overlong '/' */
	CU_ASSERT_STRING_EQUAL(logged("\xed\xa0\x80"), "name '\\xed\\xa0\\x80' end");   /* a surrogate */
	CU_ASSERT_STRING_EQUAL(logged("\xf4\x90\x80\x80"), "name '\\xf4\\x90\\x80\\x80' end"); /* past U+10FFFF */
	CU_ASSERT_STRING_EQUAL(logged("\xe2\x82"), "name '\\xe2\\x82' end");           /* cut short */
}

static void test_long_line(void)
{
	/* A line of escapes is cut, never overflows, and ends on a whole escape. */
	char in[1000];
	memset(in, '\n', sizeof(in) - 1);
	in[sizeof(in) - 1] = 0;
	const char *out = logged(in);
	size_t n = strlen(out);
	CU_ASSERT_TRUE(n > 900 && n < 1024);
	CU_ASSERT_PTR_NULL(strchr(out, '\n'));
	CU_ASSERT_EQUAL((n - strlen("name '")) % 4, 0);
}

static void test_seq_len(void)
{
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"a", 1), 1);
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"\n", 1), 1);
	CU_ASSERT_EQUAL(utf8_printable_len((const unsigned char *)"\n", 1), 0);
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"\xc3\xa9", 2), 2);
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"\xc3\xa9", 1), 0);
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"\x80", 1), 0);
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"\xe0\x80\x80", 3), 0);
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"\xef\xbf\xbf", 3), 3);
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"\xf4\x8f\xbf\xbf", 4), 4);
	CU_ASSERT_EQUAL(utf8_seq_len((const unsigned char *)"", 0), 0);
	CU_ASSERT_EQUAL(utf8_printable_len((const unsigned char *)"\xc2\xa0", 2), 2);
	CU_ASSERT_EQUAL(utf8_printable_len((const unsigned char *)"\xc2\x85", 2), 0);
}

int main(void)
{
	log_sink = sink;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("log", NULL, NULL);
	CU_add_test(s, "controls", test_controls);
	CU_add_test(s, "utf8", test_utf8);
	CU_add_test(s, "long_line", test_long_line);
	CU_add_test(s, "seq_len", test_seq_len);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
