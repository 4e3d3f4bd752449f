/*
 * Shared by the fuzz harnesses: the libFuzzer entry point and an invariant
 * check that aborts, so libFuzzer (and tests/fuzz/driver.c) record the input.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                        \
	do {                                                                         \
		if (!(cond)) {                                                       \
			fprintf(stderr, "fuzz invariant failed at %s:%d: %s: ", __FILE__, \
				__LINE__, #cond);                                    \
			fprintf(stderr, __VA_ARGS__);                                \
			fputc('\n', stderr);                                         \
			abort();                                                     \
		}                                                                    \
	} while (0)

/* A little-endian cursor over the input, for harnesses that split it into fields. */
struct fuzz_in {
	const uint8_t *p;
	size_t n;
};

static inline uint8_t fuzz_u8(struct fuzz_in *in)
{
	uint8_t v = 0;

	if (in->n) {
		v = *in->p++;
		in->n--;
	}
	return v;
}

static inline uint32_t fuzz_u32(struct fuzz_in *in)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++)
		v |= (uint32_t)fuzz_u8(in) << (8 * i);
	return v;
}

/* A value in [lo, hi] taken from 4 input bytes. */
static inline uint32_t fuzz_range(struct fuzz_in *in, uint32_t lo, uint32_t hi)
{
	uint64_t span = (uint64_t)hi - lo + 1;

	return lo + (uint32_t)(fuzz_u32(in) % span);
}

#endif
