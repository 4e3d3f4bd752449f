/*
 * The rules on a backstore's block size and size, in one place: the
 * configuration loader (with the file's JSON path in its message) and
 * backstore_open() both ask here.  Kept apart from backstore.c so that the
 * loader's fuzzer links it alone.
 */
#include <stdio.h>

#include "target/backstore/backstore.h"

const char *backstore_check_geometry(enum backstore_type type, uint64_t size, uint32_t block_size, char *why,
				     size_t whylen)
{
	uint32_t bsz = block_size ? block_size : 512;
	if (block_size && (block_size < 512 || block_size > 4096 || (block_size & (block_size - 1)))) {
		snprintf(why, whylen, "must be 512, 1024, 2048 or 4096, got %u", block_size);
		return "block_size";
	}
	if (type == BACKSTORE_RAM && size == 0) {
		snprintf(why, whylen, "must be greater than 0 for a ram backstore");
		return "size";
	}
	if (size % bsz) {
		snprintf(why, whylen, "must be a multiple of the block size %u, got %llu", bsz, (unsigned long long)size);
		return "size";
	}
	return NULL;
}
