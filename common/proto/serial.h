/* RFC 1982 serial number arithmetic (SERIAL_BITS = 32) for CmdSN, StatSN, DataSN. */
#ifndef SERIAL_H
#define SERIAL_H

#include <stdbool.h>
#include <stdint.h>

/* s1 < s2 in serial arithmetic; undefined pairs (distance exactly 2^31) are "not less". */
static inline bool serial_lt(uint32_t s1, uint32_t s2)
{
	return s1 != s2 && (int32_t)(s1 - s2) < 0 && (s2 - s1) != 0x80000000u;
}
static inline bool serial_gt(uint32_t s1, uint32_t s2)
{
	return s1 != s2 && (int32_t)(s2 - s1) < 0 && (s1 - s2) != 0x80000000u;
}
static inline bool serial_le(uint32_t s1, uint32_t s2) { return s1 == s2 || serial_lt(s1, s2); }
static inline bool serial_ge(uint32_t s1, uint32_t s2) { return s1 == s2 || serial_gt(s1, s2); }
/* s lies in the closed window [lo, hi]. */
static inline bool serial_in_window(uint32_t s, uint32_t lo, uint32_t hi)
{
	return serial_le(lo, s) && serial_le(s, hi);
}

#endif
