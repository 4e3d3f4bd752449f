/*
 * What each backstore type needs and can do, and the rules that hold before
 * anything is opened: the configuration loader (with the file's JSON path in
 * its message), apply, the admin methods and backstore_open() all ask here
 * instead of switching on the type.  Kept apart from backstore.c so that
 * the loader's fuzzer links it alone.
 */
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "target/backstore/backstore.h"

#define KIND_ROW(T, n, noun, product, caps) { BACKSTORE_##T, #n, noun, product, caps },
static const struct backstore_kind kinds[] = { BACKSTORE_KINDS(KIND_ROW) };

const struct backstore_kind *backstore_kind(enum backstore_type type)
{
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (kinds[i].type == type)
			return &kinds[i];
	return NULL;
}

const struct backstore_kind *backstore_kind_named(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(kinds); i++)
		if (!strcmp(kinds[i].name, name))
			return &kinds[i];
	return NULL;
}

const char *backstore_kind_names(char *buf, size_t buflen)
{
	size_t n = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(kinds) && n < buflen; i++) {
		const char *sep = !i ? "" : i + 1 < ARRAY_SIZE(kinds) ? ", " : " or ";
		int w = snprintf(buf + n, buflen - n, "%s\"%s\"", sep, kinds[i].name);
		if (w < 0)
			break;
		n += (size_t)w;
	}
	return buf;
}

bool backstore_kind_has(enum backstore_type type, unsigned caps)
{
	const struct backstore_kind *k = backstore_kind(type);
	return k && (k->caps & caps);
}

const char *backstore_check_geometry(enum backstore_type type, uint64_t size, uint32_t block_size, char *why,
				     size_t whylen)
{
	uint32_t bsz = block_size ? block_size : 512;
	if (block_size && (block_size < 512 || block_size > 4096 || (block_size & (block_size - 1)))) {
		snprintf(why, whylen, "must be 512, 1024, 2048 or 4096, got %u", block_size);
		return "block_size";
	}
	if (backstore_kind_has(type, BS_KIND_SIZE) && size == 0) {
		snprintf(why, whylen, "must be greater than 0 for %s", backstore_kind(type)->noun);
		return "size";
	}
	if (size % bsz) {
		snprintf(why, whylen, "must be a multiple of the block size %u, got %llu", bsz, (unsigned long long)size);
		return "size";
	}
	return NULL;
}

const char *backstore_check_preallocate(enum backstore_type type, bool thin, bool preallocate, char *why,
					size_t whylen)
{
	if (!preallocate)
		return NULL;
	const struct backstore_kind *k = backstore_kind(type);
	if (!backstore_kind_has(type, BS_KIND_PREALLOC))
		snprintf(why, whylen, "not for %s (only ram)", k ? k->noun : "this type");
	else if (thin)
		snprintf(why, whylen, "not with thin: a preallocated ram backstore keeps its pages");
	else
		return NULL;
	return "preallocate";
}

enum bs_resize backstore_resize_rule(enum backstore_type type, uint64_t was, uint64_t want, uint64_t have,
				     char *why, size_t whylen)
{
	const struct backstore_kind *k = backstore_kind(type);
	unsigned caps = k ? k->caps : 0;
	if (caps & BS_KIND_FOLLOW)
		return want != was ? BS_RESIZE_DO : BS_RESIZE_NONE;
	if (caps & BS_KIND_GROW) {
		if (!want || want == have)
			return BS_RESIZE_NONE;
		if (want > have)
			return BS_RESIZE_DO;
		/* Grown underneath since (rbd resize by another client, a longer file): the document did not ask. */
		if (want == was)
			return BS_RESIZE_NONE;
		/* An initiator's file system may hold blocks past the new end: shrinking is a restart's decision. */
		snprintf(why, whylen, "%llu is smaller than the current %llu bytes; a LUN is only grown while it is in use",
			 (unsigned long long)want, (unsigned long long)have);
		return BS_RESIZE_REFUSED;
	}
	if (want == was)
		return BS_RESIZE_NONE;
	snprintf(why, whylen, "%s cannot be resized while it runs", k ? k->noun : "this backstore");
	return BS_RESIZE_REFUSED;
}
