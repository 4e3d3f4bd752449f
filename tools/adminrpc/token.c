/* Bearer tokens of the HTTPS admin listener (token.h). */
#include "token.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return admin_fail(err, errlen, errno, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	/* Room for the token, "\r\n" and one more byte, which tells a longer file. */
	char buf[ADMIN_TOKEN_LEN + 3];
	ssize_t n = -1;
	int r = 0;
	if (fstat(fd, &st))
		r = admin_fail(err, errlen, errno, "%s: stat: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		r = admin_fail(err, errlen, EINVAL, "%s: not a regular file", path);
	else if (st.st_uid != 0 && st.st_uid != geteuid())
		r = admin_fail(err, errlen, EPERM, "%s: owned by uid %u: a token's file belongs to root or to you (uid %u)",
			       path, (unsigned)st.st_uid, (unsigned)geteuid());
	else if (st.st_mode & 0077)
		r = admin_fail(err, errlen, EPERM, "%s: mode %04o lets %s read it: chmod 600 it", path,
			       (unsigned)(st.st_mode & 07777), !(st.st_mode & 0070) ? "others" : "its group");
	else if ((n = read(fd, buf, sizeof(buf))) < 0)
		r = admin_fail(err, errlen, errno, "%s: read: %s", path, strerror(errno));
	close(fd);
	if (!r) {
		size_t len = (size_t)n;
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
