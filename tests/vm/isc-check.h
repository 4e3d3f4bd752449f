/*
 * What the guest's test programs on the initiator library (isc-datacheck,
 * isc-recovery) share besides their checks (tests/lib/check.h): the login,
 * data patterns, size arguments.
 */
#ifndef ISC_CHECK_H
#define ISC_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "check.h"
#include "isert/initiator.h"

/* Pattern words depend on the seed and the offset: misplaced data shows. */
void pattern_fill(uint8_t *p, uint32_t len, uint64_t seed);
/* 0 if got holds the pattern, else -1 and why says where it differs. */
int pattern_compare(const uint8_t *got, uint32_t len, uint64_t seed, char *why, size_t whylen);
/* A session logged in to u, with an "ok - login" line; NULL after a "not ok" one. */
struct isc_session *check_login(const struct isc_options *o, const struct isc_url *u);
/* "4096", "128k", "8m" -> bytes; 0 if malformed or over 1 GiB. */
uint32_t parse_size(const char *s);

#endif
