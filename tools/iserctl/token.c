/*
 * iserctl token create TOKEN_FILE HASH_FILE | token hash TOKEN_FILE: bearer
 * tokens for the HTTPS admin listener, made without isertd
 * (docs/admin-remote-client.md).  The token goes to the client; isertd
 * gets only its hash, so a copy of its configuration is no credential.
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "iserctl.h"
#include "token.h"

/* text (with a newline) into a new file of mode 0600; an existing file is refused, never overwritten. */
static int write_new(const char *path, const char *text, const char *what)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		if (errno == EEXIST)
			fprintf(stderr, "iserctl: token create: %s exists: a %s is never overwritten (remove it first, or "
					"give another name)\n", path, what);
		else
			fprintf(stderr, "iserctl: token create: %s: %s\n", path, strerror(errno));
		return EX_REFUSED;
	}
	size_t len = strlen(text);
	ssize_t n = write(fd, text, len);
	bool ok = n == (ssize_t)len && write(fd, "\n", 1) == 1;
	int e = errno;
	if (close(fd))
		ok = false, e = errno;
	if (!ok) {
		fprintf(stderr, "iserctl: token create: writing %s: %s\n", path, strerror(e));
		unlink(path);
		return EX_REFUSED;
	}
	return EX_OK;
}

static int token_create(const char *tok_path, const char *hash_path)
{
	unsigned char rnd[ADMIN_TOKEN_BYTES];
	char tok[ADMIN_TOKEN_LEN + 1], hash[ADMIN_TOKEN_HASH_LEN + 1];
	size_t got = 0;
	while (got < sizeof(rnd)) {
		ssize_t n = getrandom(rnd + got, sizeof(rnd) - got, 0);
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "iserctl: token create: getrandom: %s\n", strerror(errno));
			return EX_REFUSED;
		}
		got += n > 0 ? (size_t)n : 0;
	}
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < sizeof(rnd); i++) {
		tok[2 * i] = hex[rnd[i] >> 4];
		tok[2 * i + 1] = hex[rnd[i] & 15];
	}
	tok[ADMIN_TOKEN_LEN] = 0;
	OPENSSL_cleanse(rnd, sizeof(rnd));
	int rc = admin_token_hash(tok, hash) ? EX_REFUSED : EX_OK;
	if (rc)
		fprintf(stderr, "iserctl: token create: SHA-256 failed\n");
	if (!rc && !(rc = write_new(tok_path, tok, "token file")) && (rc = write_new(hash_path, hash, "hash file")))
		unlink(tok_path); /* a token whose hash was not written is of no use: try again with other names */
	OPENSSL_cleanse(tok, sizeof(tok));
	if (!rc)
		printf("token in %s (the client's: iserctl --token-file %s); its hash in %s (isertd's: the principal's "
		       "token_hash_file)\n", tok_path, tok_path, hash_path);
	return rc;
}

static int token_hash(const char *tok_path)
{
	char tok[ADMIN_TOKEN_LEN + 1], hash[ADMIN_TOKEN_HASH_LEN + 1], why[512];
	int rc = EX_OK;
	if (admin_token_read(tok_path, tok, why, sizeof(why))) {
		fprintf(stderr, "iserctl: token hash: %s\n", why);
		rc = EX_USAGE;
	} else if (admin_token_hash(tok, hash)) {
		fprintf(stderr, "iserctl: token hash: SHA-256 failed\n");
		rc = EX_REFUSED;
	} else {
		printf("%s\n", hash);
	}
	OPENSSL_cleanse(tok, sizeof(tok));
	return rc;
}

int cmd_token(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[0], "create"))
		return token_create(argv[1], argv[2]);
	if (argc == 2 && !strcmp(argv[0], "hash"))
		return token_hash(argv[1]);
	/* Said here, not with iserctl.c's die_usage: this command needs nothing of the client's. */
	fprintf(stderr, "iserctl: token: expected 'token create TOKEN_FILE HASH_FILE' or 'token hash TOKEN_FILE' "
			"(try iserctl --help)\n");
	return EX_USAGE;
}
