/*
 * Bearer tokens of the HTTPS admin listener (docs/admin-remote-client.md):
 * 256 random bits written as 64 lowercase hex characters.  The client holds
 * the token in a file of its user's, mode 0600; isertd holds only
 * "sha256:" and the SHA-256 of those 64 characters, in hex.
 */
#ifndef TOOLS_TOKEN_H
#define TOOLS_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#define ADMIN_TOKEN_LEN   64
#define ADMIN_TOKEN_BYTES 32
/* "sha256:" and 64 hex characters */
#define ADMIN_TOKEN_HASH_LEN (7 + 64)

/* Is s (n characters) a token: exactly 64 lowercase hex characters? */
bool admin_token_valid(const char *s, size_t n);

/*
 * The token in FILE (one line, a trailing newline allowed) into
 * out[ADMIN_TOKEN_LEN + 1].  Refused as isertd refuses a password_file: not
 * a regular file, owned by someone else than the user or root, readable by
 * group or others.  0, or -errno with err saying why and what to do; what
 * was read is wiped either way.
 */
int admin_token_read(const char *path, char *out, char *err, size_t errlen);

/* "sha256:<hex>" of the token's 64 characters into out[ADMIN_TOKEN_HASH_LEN + 1]; 0 or -ENOMEM. */
int admin_token_hash(const char *token, char *out);

#endif
