/*
 * CHAP for iSCSI (RFC 7143 sec. 12.1.3, RFC 1994) with the IANA algorithm
 * numbers: 5 MD5, 6 SHA-1, 7 SHA-256, 8 SHA3-256.  Both the authenticator
 * (target) and the responder (initiator, or the target for mutual CHAP) use it.
 */
#ifndef CHAP_H
#define CHAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum chap_alg { CHAP_MD5 = 5, CHAP_SHA1 = 6, CHAP_SHA256 = 7, CHAP_SHA3_256 = 8 };

#define CHAP_MAX_DIGEST 32
#define CHAP_CHALLENGE_LEN 32
#define CHAP_MAX_BINARY 1024 /* longest challenge/response accepted from the wire */
/* Shortest challenge a peer may send us: 128 bits, as long as a digest block of MD5. */
#define CHAP_MIN_CHALLENGE 16

bool chap_alg_supported(int alg);
size_t chap_digest_len(enum chap_alg alg);
/* Pick our preferred algorithm from a CHAP_A list ("7,5"); -1 if none. */
int chap_pick_alg(const char *list, const int *allowed, size_t nallowed);

/* response = H(id || secret || challenge) */
int chap_response(enum chap_alg alg, uint8_t id, const char *secret,
		  const uint8_t *challenge, size_t challenge_len, uint8_t *out);

/* Binary <-> iSCSI encoding ("0x" hex or "0b" base64).  Return length or -EINVAL. */
int chap_decode(const char *s, uint8_t *out, size_t outlen);
int chap_encode_hex(const uint8_t *in, size_t len, char *out, size_t outlen);

/* Fill buf with random bytes (challenge, identifier): 0, or -errno and buf must not be used. */
int chap_random(void *buf, size_t len);
/* Compare two digests in time that does not depend on where they differ. */
bool chap_equal(const uint8_t *a, const uint8_t *b, size_t len);

#endif
