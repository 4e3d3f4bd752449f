/* Unit tests for common/proto/chap.c: digests against hashlib vectors, encodings, picking. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <string.h>

#include "common/proto/chap.h"

#include "unit_run.h"

static const uint8_t challenge[16] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 };

/* Expected values: python3 hashlib.new(alg, bytes([0x2a]) + b"secretsecret" + bytes(range(16))). */
static void check_alg(enum chap_alg alg, const char *hex)
{
	uint8_t out[CHAP_MAX_DIGEST], want[CHAP_MAX_DIGEST];
	char enc[2 * CHAP_MAX_DIGEST + 3];
	size_t n = chap_digest_len(alg);

	CU_ASSERT_TRUE(chap_alg_supported(alg));
	CU_ASSERT_EQUAL(chap_decode(hex, want, sizeof(want)), (int)n);
	CU_ASSERT_EQUAL(chap_response(alg, 0x2a, "secretsecret", challenge, sizeof(challenge), out), 0);
	CU_ASSERT_EQUAL(memcmp(out, want, n), 0);
	CU_ASSERT_EQUAL(chap_encode_hex(out, n, enc, sizeof(enc)), (int)(2 + 2 * n));
	CU_ASSERT_STRING_EQUAL(enc, hex);
}

static void test_digests(void)
{
	CU_ASSERT_EQUAL(chap_digest_len(CHAP_MD5), 16);
	CU_ASSERT_EQUAL(chap_digest_len(CHAP_SHA1), 20);
	CU_ASSERT_EQUAL(chap_digest_len(CHAP_SHA256), 32);
	CU_ASSERT_EQUAL(chap_digest_len(CHAP_SHA3_256), 32);
	check_alg(CHAP_MD5, "0x54d49338a27b0c1dd5e935c21ab005a3");
	check_alg(CHAP_SHA1, "0xb060c80c0e004a388193dd4b911b5a400ca2b931");
	check_alg(CHAP_SHA256, "0x2076dab09b25dfe7f89cdb79aa854cf8af88246b80126a0856a426662b39d903");
	check_alg(CHAP_SHA3_256, "0x1e1bc4b940a438823a7ab5862e223043f6f65ee8148abe3310f5b7de30b8aa95");
}

static void test_response_errors(void)
{
	uint8_t out[CHAP_MAX_DIGEST], a[CHAP_MAX_DIGEST], b[CHAP_MAX_DIGEST];

	CU_ASSERT_FALSE(chap_alg_supported(4));
	CU_ASSERT_FALSE(chap_alg_supported(9));
	CU_ASSERT_EQUAL(chap_response((enum chap_alg)9, 1, "s", challenge, 16, out), -EINVAL);
	CU_ASSERT_EQUAL(chap_response(CHAP_MD5, 1, NULL, challenge, 16, out), -EINVAL);
	/* The identifier and the secret both change the response. */
	CU_ASSERT_EQUAL(chap_response(CHAP_SHA256, 1, "secret", challenge, 16, a), 0);
	CU_ASSERT_EQUAL(chap_response(CHAP_SHA256, 2, "secret", challenge, 16, b), 0);
	CU_ASSERT_NOT_EQUAL(memcmp(a, b, 32), 0);
	CU_ASSERT_EQUAL(chap_response(CHAP_SHA256, 1, "secreT", challenge, 16, b), 0);
	CU_ASSERT_NOT_EQUAL(memcmp(a, b, 32), 0);
}

static void test_decode(void)
{
	uint8_t out[8];

	CU_ASSERT_EQUAL(chap_decode("0x0102ff", out, sizeof(out)), 3);
	CU_ASSERT_EQUAL(out[0], 1);
	CU_ASSERT_EQUAL(out[2], 0xff);
	CU_ASSERT_EQUAL(chap_decode("0XAbCd", out, sizeof(out)), 2);
	CU_ASSERT_EQUAL(out[0], 0xab);
	CU_ASSERT_EQUAL(out[1], 0xcd);
	/* Odd digit count: implied leading zero. */
	CU_ASSERT_EQUAL(chap_decode("0x123", out, sizeof(out)), 2);
	CU_ASSERT_EQUAL(out[0], 0x01);
	CU_ASSERT_EQUAL(out[1], 0x23);
	CU_ASSERT_EQUAL(chap_decode("0b3q2+7wE=", out, sizeof(out)), 5);
	CU_ASSERT_EQUAL(out[0], 0xde);
	CU_ASSERT_EQUAL(out[4], 0x01);
	CU_ASSERT_EQUAL(chap_decode("0BAAEC", out, sizeof(out)), 3);
	CU_ASSERT_EQUAL(out[2], 2);
	CU_ASSERT_EQUAL(chap_decode("0b3q2+7wE", out, sizeof(out)), 5); /* padding optional */

	CU_ASSERT_EQUAL(chap_decode("0x", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("0b", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("0x12g4", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("1234", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode(NULL, out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("0b3q2*7wE=", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("0bA", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("0b3q2+7wE==", out, sizeof(out)), -EINVAL);
	/* Length limits: 9 bytes do not fit in 8. */
	CU_ASSERT_EQUAL(chap_decode("0x010203040506070809", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("0x0102030405060708", out, sizeof(out)), 8);
	CU_ASSERT_EQUAL(chap_decode("0bAAECAwQFBgcI", out, sizeof(out)), -EINVAL);
	CU_ASSERT_EQUAL(chap_decode("0bAAECAwQFBgc=", out, sizeof(out)), 8);
}

static void test_encode(void)
{
	static const uint8_t in[3] = { 0x00, 0x7f, 0xff };
	char buf[9];

	CU_ASSERT_EQUAL(chap_encode_hex(in, 3, buf, sizeof(buf)), 8);
	CU_ASSERT_STRING_EQUAL(buf, "0x007fff");
	CU_ASSERT_EQUAL(chap_encode_hex(in, 3, buf, 8), -EINVAL);
	CU_ASSERT_EQUAL(chap_encode_hex(in, 0, buf, 3), 2);
	CU_ASSERT_STRING_EQUAL(buf, "0x");
}

static void test_pick(void)
{
	static const int pref[] = { CHAP_SHA256, CHAP_SHA1, CHAP_MD5 };
	static const int md5_only[] = { CHAP_MD5 };

	CU_ASSERT_EQUAL(chap_pick_alg("5", pref, 3), CHAP_MD5);
	CU_ASSERT_EQUAL(chap_pick_alg("5,6,7", pref, 3), CHAP_SHA256);
	CU_ASSERT_EQUAL(chap_pick_alg("6,5", pref, 3), CHAP_SHA1);
	CU_ASSERT_EQUAL(chap_pick_alg("8", pref, 3), -1);
	CU_ASSERT_EQUAL(chap_pick_alg("7,6", md5_only, 1), -1);
	/* Unknown values are skipped, not fatal. */
	CU_ASSERT_EQUAL(chap_pick_alg("junk,99,,5", pref, 3), CHAP_MD5);
	CU_ASSERT_EQUAL(chap_pick_alg("0x7", pref, 3), CHAP_SHA256);
	CU_ASSERT_EQUAL(chap_pick_alg("55", pref, 3), -1);
	CU_ASSERT_EQUAL(chap_pick_alg("", pref, 3), -1);
	CU_ASSERT_EQUAL(chap_pick_alg(NULL, pref, 3), -1);
}

static void test_random(void)
{
	uint8_t a[CHAP_CHALLENGE_LEN] = { 0 }, b[CHAP_CHALLENGE_LEN] = { 0 }, zero[CHAP_CHALLENGE_LEN] = { 0 };

	CU_ASSERT_EQUAL(chap_random(a, sizeof(a)), 0);
	CU_ASSERT_EQUAL(chap_random(b, sizeof(b)), 0);
	CU_ASSERT_NOT_EQUAL(memcmp(a, zero, sizeof(a)), 0);
	CU_ASSERT_NOT_EQUAL(memcmp(a, b, sizeof(a)), 0);
	CU_ASSERT_EQUAL(chap_random(a, 0), 0);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("chap", NULL, NULL);
	CU_add_test(s, "digest vectors", test_digests);
	CU_add_test(s, "response errors", test_response_errors);
	CU_add_test(s, "decode", test_decode);
	CU_add_test(s, "encode", test_encode);
	CU_add_test(s, "pick algorithm", test_pick);
	CU_add_test(s, "random", test_random);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
