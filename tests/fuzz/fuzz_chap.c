/*
 * CHAP value decoding and algorithm choice.  Input: [outlen:2][alg bytes:4]
 * then a string (up to the first NUL) used as a CHAP_C/CHAP_R value, a
 * CHAP_A list and a secret.
 *  - chap_decode() never writes past outlen and returns -EINVAL or a length
 *    <= outlen; what it accepts re-encodes to the same digits;
 *  - chap_pick_alg() returns -1 or one of the allowed, supported algorithms.
 */
#include <errno.h>
#include <string.h>

#include "common/proto/chap.h"
#include "fuzz.h"

static bool hex_equal_ci(const char *a, const char *b)
{
	for (; *a && *b; a++, b++) {
		char x = *a, y = *b;

		if (x >= 'A' && x <= 'F')
			x = (char)(x - 'A' + 'a');
		if (y >= 'A' && y <= 'F')
			y = (char)(y - 'A' + 'a');
		if (x != y)
			return false;
	}
	return *a == *b;
}

static void b64_encode(const uint8_t *in, size_t n, char *out)
{
	static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < n; i++) {
		acc = acc << 8 | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			*out++ = tab[(acc >> bits) & 63];
		}
	}
	if (bits)
		*out++ = tab[(acc << (6 - bits)) & 63];
	*out = '\0';
}

static void check_decode(const char *s, size_t outlen)
{
	uint8_t *out = malloc(outlen ? outlen : 1);
	size_t slen = strlen(s);
	int r = chap_decode(s, out, outlen);

	FUZZ_CHECK(r == -EINVAL || (r >= 0 && (size_t)r <= outlen), "returned %d for outlen %zu", r, outlen);
	if (r > 0 && (s[1] == 'x' || s[1] == 'X')) {
		char *enc = malloc(2 * (size_t)r + 3);
		const char *digits = s + 2;

		FUZZ_CHECK(chap_encode_hex(out, (size_t)r, enc, 2 * (size_t)r + 3) == 2 * r + 2, "encode");
		/* An odd digit count has an implied leading 0. */
		if (strlen(digits) & 1)
			FUZZ_CHECK(enc[2] == '0' && hex_equal_ci(enc + 3, digits), "%s -> %s", s, enc);
		else
			FUZZ_CHECK(hex_equal_ci(enc + 2, digits), "%s -> %s", s, enc);
		FUZZ_CHECK(chap_encode_hex(out, (size_t)r, enc, 2 * (size_t)r + 2) == -EINVAL, "short buffer");
		free(enc);
	}
	if (r > 0 && (s[1] == 'b' || s[1] == 'B')) {
		char *enc = malloc(slen + 4);
		size_t n = slen - 2;

		while (n && s[2 + n - 1] == '=')
			n--;
		b64_encode(out, (size_t)r, enc);
		FUZZ_CHECK(strlen(enc) == n && memcmp(enc, s + 2, n) == 0, "%s -> %s", s, enc);
		free(enc);
	}
	if (r == 0)
		FUZZ_CHECK(0, "empty value %s decoded", s);
	free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	size_t outlen = (size_t)(fuzz_u8(&in) | fuzz_u8(&in) << 8) % (CHAP_MAX_BINARY + 64);
	int allowed[4], nallowed = 0, alg;
	char *s;

	for (int i = 0; i < 4; i++) {
		int8_t v = (int8_t)fuzz_u8(&in);

		if (v)
			allowed[nallowed++] = v;
	}
	s = malloc(in.n + 1);
	memcpy(s, in.p, in.n);
	s[in.n] = '\0';

	check_decode(s, outlen);
	check_decode(s, CHAP_MAX_BINARY);
	check_decode(s, 0);

	alg = chap_pick_alg(s, allowed, (size_t)nallowed);
	if (alg != -1) {
		bool found = false;

		for (int i = 0; i < nallowed; i++)
			found |= allowed[i] == alg;
		FUZZ_CHECK(found && chap_alg_supported(alg), "picked %d", alg);
	}
	FUZZ_CHECK(chap_pick_alg(NULL, allowed, (size_t)nallowed) == -1, "NULL list");
	FUZZ_CHECK(chap_pick_alg(s, allowed, 0) == -1, "nothing allowed");

	/* A response over whatever the string decodes to, with the string as secret. */
	if (nallowed) {
		uint8_t chal[CHAP_MAX_BINARY], digest[CHAP_MAX_DIGEST];
		int n = chap_decode(s, chal, sizeof(chal));
		int r = chap_response((enum chap_alg)allowed[0], 7, s, chal, n > 0 ? (size_t)n : 0, digest);

		FUZZ_CHECK(chap_alg_supported(allowed[0]) ? r == 0 : r == -EINVAL, "response %d for alg %d",
			   r, allowed[0]);
	}
	free(s);
	return 0;
}
