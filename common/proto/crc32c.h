/* CRC32C (Castagnoli) for iSCSI header and data digests (RFC 7143 sec. 12.1). */
#ifndef CRC32C_H
#define CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a CRC: crc starts at 0xffffffff via crc32c_init(); finish with crc32c_final(). */
static inline uint32_t crc32c_init(void) { return 0xffffffffu; }
static inline uint32_t crc32c_final(uint32_t crc) { return ~crc; }
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);
/* One-shot, as carried in the PDU (little-endian byte order on the wire). */
uint32_t crc32c(const void *data, size_t len);

/* The two implementations, exported for tests; crc32c_update picks one at start. */
uint32_t crc32c_update_table(uint32_t crc, const void *data, size_t len);
uint32_t crc32c_update_hw(uint32_t crc, const void *data, size_t len); /* SSE4.2; table if absent */
int crc32c_have_hw(void);

#endif
