/*
 * iserbench data validation: key table, unit patterns, checks (see validate.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "validate.h"

#define VAL_MAGIC "IBVALID1"
#define VAL_MAX_KEY 126
#define VAL_TABLE_MAX (1ull << 30)
#define VAL_PRINT_MAX 20

/* The unit header; the body after it is derived from lba and key. */
struct val_hdr {
	char magic[8];
	uint64_t sdhash;
	uint64_t lba;
	uint64_t wcount;            /* informative: not predictable, so not checked */
	uint8_t key;
	uint8_t pad[7];
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
	return h;
}

int ib_val_init(struct ib_val *v, const char *sd, const char *lun, uint64_t size, uint32_t unit,
		uint32_t block_size, char *err, size_t errlen)
{
	memset(v, 0, sizeof(*v));
	v->sd = sd;
	v->lun = lun;
	v->sdhash = fnv1a(sd);
	v->unit = unit;
	v->block_size = block_size;
	v->nunits = size / unit;
	if (v->nunits > VAL_TABLE_MAX) {
		snprintf(err, errlen, "sd=%s: validating %" PRIu64 " bytes in %u-byte units needs a %" PRIu64
			 "-byte key table (limit 1 GiB): give the SD a smaller size=", sd, size, unit, v->nunits);
		return -1;
	}
	v->key = calloc(v->nunits ? v->nunits : 1, 1);
	v->busy = calloc(v->nunits / 8 + 1, 1);
	v->scratch = malloc(unit);
	if (!v->key || !v->busy || !v->scratch) {
		snprintf(err, errlen, "sd=%s: out of memory for the validation key table", sd);
		ib_val_free(v);
		return -1;
	}
	return 0;
}

void ib_val_free(struct ib_val *v)
{
	free(v->key);
	free(v->busy);
	free(v->scratch);
	v->key = v->busy = v->scratch = NULL;
}

bool ib_val_claim(struct ib_val *v, uint64_t off, uint32_t len)
{
	uint64_t u0 = off / v->unit, n = len / v->unit;
	for (uint64_t u = u0; u < u0 + n; u++)
		if (v->busy[u >> 3] & (1u << (u & 7)))
			return false;
	for (uint64_t u = u0; u < u0 + n; u++)
		v->busy[u >> 3] |= (uint8_t)(1u << (u & 7));
	return true;
}

void ib_val_release(struct ib_val *v, uint64_t off, uint32_t len)
{
	uint64_t u0 = off / v->unit, n = len / v->unit;
	for (uint64_t u = u0; u < u0 + n; u++)
		v->busy[u >> 3] &= (uint8_t)~(1u << (u & 7));
}

static void pattern(const struct ib_val *v, uint8_t *p, uint64_t lba, uint8_t key, uint64_t wcount)
{
	struct val_hdr h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, VAL_MAGIC, 8);
	h.sdhash = v->sdhash;
	h.lba = lba;
	h.wcount = wcount;
	h.key = key;
	memcpy(p, &h, sizeof(h));
	uint64_t w = (lba + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)key << 56);
	for (size_t o = sizeof(h); o + 8 <= v->unit; o += 8) {
		w += 0xd1b54a32d192ed03ull;
		memcpy(p + o, &w, 8);
	}
}

void ib_val_fill(struct ib_val *v, void *buf, uint64_t off, uint32_t len)
{
	uint64_t u0 = off / v->unit, n = len / v->unit;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t u = u0 + i;
		uint8_t k = v->key[u] >= VAL_MAX_KEY ? 1 : v->key[u] + 1;
		v->key[u] = k;
		pattern(v, (uint8_t *)buf + i * v->unit, (u * v->unit) / v->block_size, k, ++v->writes);
	}
}

void ib_val_forget(struct ib_val *v, uint64_t off, uint32_t len)
{
	memset(v->key + off / v->unit, 0, len / v->unit);
}

static void hexdump(char *out, size_t outlen, const uint8_t *p, size_t n)
{
	size_t o = 0;
	out[0] = 0;
	for (size_t i = 0; i < n && o + 4 < outlen; i++)
		o += (size_t)snprintf(out + o, outlen - o, "%s%02x", i ? " " : "", p[i]);
}

static void report(struct ib_val *v, uint64_t u, const uint8_t *found, const uint8_t *exp)
{
	v->errors++;
	if (++v->printed > VAL_PRINT_MAX) {
		if (v->printed == VAL_PRINT_MAX + 1)
			fprintf(stderr, "validation: sd=%s: more errors, not printed\n", v->sd);
		return;
	}
	struct val_hdr fh, eh;
	memcpy(&fh, found, sizeof(fh));
	memcpy(&eh, exp, sizeof(eh));
	uint64_t off = u * v->unit;
	size_t d = 0;
	while (d < v->unit && found[d] == exp[d])
		d++;
	size_t n = v->unit - d < 16 ? v->unit - d : 16;
	char e[64], f[64];
	hexdump(e, sizeof(e), exp + d, n);
	hexdump(f, sizeof(f), found + d, n);
	bool magic = !memcmp(fh.magic, VAL_MAGIC, 8);
	fprintf(stderr,
		"validation error: sd=%s lun=%s lba=%" PRIu64 " (byte offset %" PRIu64 "): expected key %u lba %" PRIu64
		", found key %u lba %" PRIu64 "%s%s\n"
		"  first difference at byte %zu of the %u-byte unit: expected %s, found %s\n",
		v->sd, v->lun, off / v->block_size, off, eh.key, eh.lba, fh.key, fh.lba,
		magic ? "" : " (no iserbench header: not our data)",
		magic && fh.sdhash != v->sdhash ? " (written for another SD)" : "", d, v->unit, e, f);
}

unsigned ib_val_check(struct ib_val *v, const void *buf, uint64_t off, uint32_t len)
{
	uint64_t u0 = off / v->unit, n = len / v->unit;
	unsigned bad = 0;
	uint8_t *exp = v->scratch;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t u = u0 + i;
		if (!v->key[u])
			continue;
		const uint8_t *p = (const uint8_t *)buf + i * v->unit;
		struct val_hdr fh;
		memcpy(&fh, p, sizeof(fh));
		pattern(v, exp, (u * v->unit) / v->block_size, v->key[u], fh.wcount);
		if (!memcmp(p, exp, v->unit))
			continue;
		bad++;
		report(v, u, p, exp);
		/* Report a corrupted unit once; its next write makes it checkable again. */
		v->key[u] = 0;
	}
	return bad;
}
