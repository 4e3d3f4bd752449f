/* Unit tests for tools/adminrpc/url.c and token.c: iserctl --url's parser and bearer tokens' text and hash. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <string.h>

#include "token.h"
#include "url.h"

#include "unit_run.h"

static char err[512];

static void ok(const char *url, const char *host, const char *port, bool ip, bool v6)
{
	struct admin_url u;
	CU_ASSERT_EQUAL(admin_url_parse(url, &u, err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(u.host, host);
	CU_ASSERT_STRING_EQUAL(u.port, port);
	CU_ASSERT_EQUAL(u.ip, ip);
	CU_ASSERT_EQUAL(u.v6, v6);
}

/* Refused, with want in the message and the secret (when given) not. */
static void refused(const char *url, const char *want, const char *secret)
{
	struct admin_url u;
	err[0] = 0;
	CU_ASSERT_EQUAL(admin_url_parse(url, &u, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
	if (secret)
		CU_ASSERT_PTR_NULL(strstr(err, secret));
}

static void test_accepted(void)
{
	ok("https://admin.example:8443", "admin.example", "8443", false, false);
	ok("HTTPS://admin.example:8443/", "admin.example", "8443", false, false);
	ok("https://admin.example:8443/rpc", "admin.example", "8443", false, false);
	ok("https://admin.example", "admin.example", "443", false, false);
	ok("https://127.0.0.1:8443", "127.0.0.1", "8443", true, false);
	ok("https://[::1]:8443", "::1", "8443", true, true);
	ok("https://[fe80::1:2]", "fe80::1:2", "443", true, true);
	ok("https://localhost:1", "localhost", "1", false, false);
	ok("https://h:65535", "h", "65535", false, false);
}

static void test_refused(void)
{
	refused("https://admin:hunter2@h:8443", "user-info", "hunter2");
	refused("https://tok@h", "user-info", NULL);
	refused("https://h:8443/rpc?token=abc", "query", "abc");
	refused("https://h:8443#abc", "fragment", "abc");
	refused("https://h:8443?x#y", "query", NULL);
	refused("http://u:hunter2@h:8443", "only https://", "hunter2");
	refused("h:8443", "only https://", NULL);
	refused("ftp://h", "only https://", NULL);
	refused("https://h:8443/admin", "/rpc", NULL);
	refused("https://", "no host", NULL);
	refused("https://:8443", "no host", NULL);
	refused("https://h:", "port", NULL);
	refused("https://h:0", "port", NULL);
	refused("https://h:65536", "port", NULL);
	refused("https://h:+1", "port", NULL);
	refused("https://h:12x", "port", NULL);
	refused("https://h:1234567", "port", NULL);
	refused("https://[::1", "'['", NULL);
	refused("https://[::1]8443", "':PORT'", NULL);
	refused("https://[127.0.0.1]:8443", "not an IPv6 address", NULL);
	refused("https://::1:8443", "brackets", NULL);
	refused("https://a_b:8443", "neither", NULL);
	refused("https://-h:8443", "neither", NULL);
}

static void test_token(void)
{
	const char *t = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
	char hash[ADMIN_TOKEN_HASH_LEN + 1];
	CU_ASSERT_TRUE(admin_token_valid(t, strlen(t)));
	CU_ASSERT_FALSE(admin_token_valid(t, strlen(t) - 1));
	CU_ASSERT_FALSE(admin_token_valid("00112233445566778899AABBCCDDEEFF00112233445566778899aabbccddeeff", 64));
	CU_ASSERT_FALSE(admin_token_valid("g0112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 64));
	CU_ASSERT_EQUAL(admin_token_hash(t, hash), 0);
	/* python3 -c 'import hashlib; print(hashlib.sha256(b"0011...eeff").hexdigest())' */
	CU_ASSERT_STRING_EQUAL(hash, "sha256:2a8abfa8cb9906290437854193ca6bca41d4d4e26d1d454bd66a35158095e737");
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("url", NULL, NULL);
	CU_add_test(s, "accepted", test_accepted);
	CU_add_test(s, "refused", test_refused);
	CU_add_test(s, "token", test_token);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
