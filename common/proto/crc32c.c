/* CRC32C (Castagnoli, reflected poly 0x82f63b78): slicing-by-8 table and SSE4.2. */
#include "common/proto/crc32c.h"

#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#define CRC32C_POLY 0x82f63b78u

static uint32_t crc_table[8][256];
static uint32_t (*crc_impl)(uint32_t, const void *, size_t) = crc32c_update_table;
static int have_hw;

/* Tables are built before main() so the I/O path never races on them. */
__attribute__((constructor)) static void crc32c_setup(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int j = 0; j < 8; j++)
			c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1)));
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_hw = __builtin_cpu_supports("sse4.2");
#endif
	crc_impl = have_hw ? crc32c_update_hw : crc32c_update_table;
}

uint32_t crc32c_update_table(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len >= 8) {
		uint32_t lo, hi;

		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
		lo = __builtin_bswap32(lo);
		hi = __builtin_bswap32(hi);
#endif
		lo ^= crc;
		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		      crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		      crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = _mm_crc32_u8(crc, *p++);
	return crc;
}
#endif

uint32_t crc32c_update_hw(uint32_t crc, const void *data, size_t len)
{
#if defined(__x86_64__)
	if (have_hw)
		return crc_sse42(crc, data, len);
#endif
	return crc32c_update_table(crc, data, len);
}

int crc32c_have_hw(void)
{
	return have_hw;
}

uint32_t crc32c_update(uint32_t crc, const void *data, size_t len)
{
	return crc_impl(crc, data, len);
}

uint32_t crc32c(const void *data, size_t len)
{
	return crc32c_final(crc32c_update(crc32c_init(), data, len));
}
