/* Bearer tokens of the HTTPS admin listener (token.h). */
#include "token.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "common/secret_file.h"
#include "fail.h"

bool admin_token_valid(const char *s, size_t n)
{
	if (n != ADMIN_TOKEN_LEN)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

int admin_token_read(const char *path, char *out, char *err, size_t errlen)
{
	/* Room for the token, "\r\n" and one more byte, which tells a longer file. */
	char buf[ADMIN_TOKEN_LEN + 3];
	size_t len;
	int r = secret_file_read(path, false, "you", buf, sizeof(buf), &len, err, errlen);
	if (!r) {
		if (len && buf[len - 1] == '\n')
			len--;
		if (len && buf[len - 1] == '\r')
			len--;
		if (!admin_token_valid(buf, len))
			r = admin_fail(err, errlen, EINVAL, "%s: not a token (one line of 64 lowercase hex characters, "
							    "as iserctl token create writes)", path);
		else
			memcpy(out, buf, ADMIN_TOKEN_LEN), out[ADMIN_TOKEN_LEN] = 0;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	return r;
}

int admin_token_hash(const char *token, char *out)
{
	unsigned char md[32];
	unsigned mdlen = 0;
	if (!EVP_Digest(token, strlen(token), md, &mdlen, EVP_sha256(), NULL) || mdlen != sizeof(md))
		return -ENOMEM;
	static const char hex[] = "0123456789abcdef";
	memcpy(out, "sha256:", 7);
	for (unsigned i = 0; i < mdlen; i++) {
		out[7 + 2 * i] = hex[md[i] >> 4];
		out[8 + 2 * i] = hex[md[i] & 15];
	}
	out[ADMIN_TOKEN_HASH_LEN] = 0;
	OPENSSL_cleanse(md, sizeof(md));
	return 0;
}
