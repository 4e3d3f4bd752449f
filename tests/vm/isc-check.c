/* Shared by the guest's initiator-library test programs; see isc-check.h. */
#include "isc-check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pattern_fill(uint8_t *p, uint32_t len, uint64_t seed)
{
	uint64_t x = 0x9e3779b97f4a7c15ull ^ seed;
	for (uint32_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		uint64_t w = x + i;
		memcpy(p + i, &w, len - i < 8 ? len - i : 8);
	}
}

int pattern_compare(const uint8_t *got, uint32_t len, uint64_t seed, char *why, size_t whylen)
{
	uint8_t *want = malloc(len);
	if (!want) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	pattern_fill(want, len, seed);
	int rc = 0;
	for (uint32_t i = 0; i < len; i++)
		if (got[i] != want[i]) {
			snprintf(why, whylen, "first difference at byte %u of %u (got 0x%02x, want 0x%02x)", i, len,
				 got[i], want[i]);
			rc = -1;
			break;
		}
	free(want);
	return rc;
}

struct isc_session *check_login(const struct isc_options *o, const struct isc_url *u)
{
	struct isc_session *s = isc_session_new(o);
	if (!s) {
		check("login", false, "out of memory");
		return NULL;
	}
	int rc = isc_connect_url_sync(s, u);
	check("login", !rc, "%s", isc_errmsg(s));
	if (rc) {
		isc_session_free(s);
		return NULL;
	}
	return s;
}

uint32_t parse_size(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);
	if (*end == 'k' || *end == 'K')
		v <<= 10, end++;
	else if (*end == 'm' || *end == 'M')
		v <<= 20, end++;
	return *end || end == s || v == 0 || v > (1ul << 30) ? 0 : (uint32_t)v;
}
