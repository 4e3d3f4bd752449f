/* CHAP hashing, challenge encoding and randomness for iSCSI authentication. */
#include "common/proto/chap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>

static const EVP_MD *chap_md(int alg)
{
	switch (alg) {
	case CHAP_MD5: return EVP_md5();
	case CHAP_SHA1: return EVP_sha1();
	case CHAP_SHA256: return EVP_sha256();
	case CHAP_SHA3_256: return EVP_sha3_256();
	}
	return NULL;
}

bool chap_alg_supported(int alg)
{
	return chap_md(alg) != NULL;
}

size_t chap_digest_len(enum chap_alg alg)
{
	switch (alg) {
	case CHAP_MD5: return 16;
	case CHAP_SHA1: return 20;
	case CHAP_SHA256: return 32;
	case CHAP_SHA3_256: return 32;
	}
	return 0;
}

/* Is the decimal or hex number alg one item of the comma list? */
static bool list_has_alg(const char *list, int alg)
{
	for (const char *p = list; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);
		char item[16];
		long v;
		char *end;

		if (l > 0 && l < sizeof(item)) {
			memcpy(item, p, l);
			item[l] = '\0';
			errno = 0;
			v = strtol(item, &end, 0);
			/* Values not understood are ignored, as RFC 7143 sec. 6.2.1 asks. */
			if (!errno && *end == '\0' && item[0] >= '0' && item[0] <= '9' && v == alg)
				return true;
		}
		if (!c)
			break;
		p = c + 1;
	}
	return false;
}

int chap_pick_alg(const char *list, const int *allowed, size_t nallowed)
{
	if (!list)
		return -1;
	for (size_t i = 0; i < nallowed; i++)
		if (chap_alg_supported(allowed[i]) && list_has_alg(list, allowed[i]))
			return allowed[i];
	return -1;
}

int chap_response(enum chap_alg alg, uint8_t id, const char *secret,
		  const uint8_t *challenge, size_t challenge_len, uint8_t *out)
{
	const EVP_MD *md = chap_md(alg);
	EVP_MD_CTX *ctx;
	unsigned int outlen = 0;
	int ok;

	if (!md || !secret || (!challenge && challenge_len))
		return -EINVAL;
	ctx = EVP_MD_CTX_new();
	if (!ctx)
		return -ENOMEM;
	ok = EVP_DigestInit_ex(ctx, md, NULL) &&
	     EVP_DigestUpdate(ctx, &id, 1) &&
	     EVP_DigestUpdate(ctx, secret, strlen(secret)) &&
	     EVP_DigestUpdate(ctx, challenge, challenge_len) &&
	     EVP_DigestFinal_ex(ctx, out, &outlen);
	EVP_MD_CTX_free(ctx);
	if (!ok || outlen != chap_digest_len(alg))
		return -EIO;
	return 0;
}

static int hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

static int decode_hex(const char *s, uint8_t *out, size_t outlen)
{
	size_t n = strlen(s), bytes = (n + 1) / 2, o = 0, i = 0;

	if (n == 0 || bytes > outlen)
		return -EINVAL;
	/* An odd digit count means an implied leading zero nibble. */
	if (n & 1) {
		int v = hex_val(s[0]);

		if (v < 0)
			return -EINVAL;
		out[o++] = (uint8_t)v;
		i = 1;
	}
	for (; i < n; i += 2) {
		int hi = hex_val(s[i]), lo = hex_val(s[i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[o++] = (uint8_t)(hi << 4 | lo);
	}
	return (int)o;
}

static int decode_b64(const char *s, uint8_t *out, size_t outlen)
{
	size_t n = strlen(s), o = 0, pad = 0;
	uint32_t acc = 0;
	int bits = 0;

	while (n > 0 && s[n - 1] == '=' && pad < 2) {
		n--;
		pad++;
	}
	if (n == 0 || (pad && (n + pad) % 4) || n % 4 == 1)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		int v = b64_val(s[i]);

		if (v < 0)
			return -EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (o >= outlen)
				return -EINVAL;
			out[o++] = (uint8_t)(acc >> bits);
			acc &= (1u << bits) - 1;
		}
	}
	if (acc) /* leftover bits must be zero in canonical base64 */
		return -EINVAL;
	return (int)o;
}

int chap_decode(const char *s, uint8_t *out, size_t outlen)
{
	if (!s || s[0] != '0' || outlen > (size_t)INT32_MAX)
		return -EINVAL;
	if (s[1] == 'x' || s[1] == 'X')
		return decode_hex(s + 2, out, outlen);
	if (s[1] == 'b' || s[1] == 'B')
		return decode_b64(s + 2, out, outlen);
	return -EINVAL;
}

int chap_encode_hex(const uint8_t *in, size_t len, char *out, size_t outlen)
{
	static const char digits[] = "0123456789abcdef";

	if (len > (size_t)(INT32_MAX - 3) / 2 || outlen < 2 * len + 3)
		return -EINVAL;
	out[0] = '0';
	out[1] = 'x';
	for (size_t i = 0; i < len; i++) {
		out[2 + 2 * i] = digits[in[i] >> 4];
		out[3 + 2 * i] = digits[in[i] & 15];
	}
	out[2 + 2 * len] = '\0';
	return (int)(2 + 2 * len);
}

bool chap_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

int chap_random(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
