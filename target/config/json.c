/*
 * Target configuration: reading JSON values.  The parse context (where we
 * are, so that every message names the file and the JSON path) and the typed
 * getters that the loader and the one-object checks are built on.  Nothing
 * here knows the document's shape: that is config_load.c.
 */
#include "target/config/config_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_SZ(a, b) ((a) < (b) ? (a) : (b))

void cfg_seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------------ */
/* Parse context: where we are, for messages that name the JSON path. */

int cfg_perr(struct pctx *p, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!p->err || !p->errlen)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (p->plen)
		snprintf(p->err, p->errlen, "%s: %s: %s", p->origin, p->path, msg);
	else
		snprintf(p->err, p->errlen, "%s: %s", p->origin, msg);
	return -EINVAL;
}

int cfg_enomem(struct pctx *p)
{
	cfg_perr(p, "out of memory");
	return -ENOMEM;
}

size_t cfg_push_key(struct pctx *p, const char *key)
{
	size_t mark = p->plen;
	int n = snprintf(p->path + p->plen, sizeof(p->path) - p->plen, "%s%s",
			 p->plen ? "." : "", key);

	if (n > 0)
		p->plen = MIN_SZ(p->plen + (size_t)n, sizeof(p->path) - 1);
	return mark;
}

size_t cfg_push_idx(struct pctx *p, size_t i)
{
	size_t mark = p->plen;
	int n = snprintf(p->path + p->plen, sizeof(p->path) - p->plen, "[%zu]", i);

	if (n > 0)
		p->plen = MIN_SZ(p->plen + (size_t)n, sizeof(p->path) - 1);
	return mark;
}

void cfg_pop(struct pctx *p, size_t mark)
{
	p->plen = mark;
	p->path[mark] = '\0';
}

/* A short rendering of a JSON value for "got ..." in messages. */
const char *cfg_jdesc(struct pctx *p, json_object *v, char *buf, size_t n)
{
	const char *s = cfg_path_secret(p->path) ? "(not shown: a secret's place)"
						  : json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
										      JSON_C_TO_STRING_NOSLASHESCAPE);

	if (!s)
		s = "?";
	if (strlen(s) > 40)
		snprintf(buf, n, "%.37s...", s);
	else
		snprintf(buf, n, "%s", s);
	return buf;
}

/* ------------------------------------------------------------------------ */
/* Typed field access.  Each returns 1 if the key is present and valid, 0 if
 * absent (output untouched), negative errno on error (message written). */

int cfg_lookup(struct pctx *p, json_object *o, const char *key, bool required, json_object **v)
{
	if (json_object_object_get_ex(o, key, v))
		return 1;
	if (required) {
		cfg_push_key(p, key);
		return cfg_perr(p, "required field missing");
	}
	return 0;
}

int cfg_expect_object(struct pctx *p, json_object *v)
{
	char d[48];

	if (!json_object_is_type(v, json_type_object))
		return cfg_perr(p, "must be an object, got %s", cfg_jdesc(p, v, d, sizeof(d)));
	return 0;
}

/* Reject keys not in allowed (NULL-terminated): typo protection. */
int cfg_check_keys(struct pctx *p, json_object *o, const char *const *allowed)
{
	json_object_object_foreach(o, key, val) {
		const char *const *a;
		char list[384];
		size_t used = 0;

		(void)val;
		for (a = allowed; *a; a++)
			if (!strcmp(*a, key))
				break;
		if (*a)
			continue;
		list[0] = '\0';
		for (a = allowed; *a && used < sizeof(list); a++) {
			int n = snprintf(list + used, sizeof(list) - used, "%s%s",
					 a == allowed ? "" : ", ", *a);
			if (n < 0)
				break;
			used += (size_t)n;
		}
		cfg_push_key(p, key);
		return cfg_perr(p, "unknown key (expected one of: %s)", list);
	}
	return 0;
}

static bool has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

int cfg_get_str(struct pctx *p, json_object *o, const char *key, bool required,
		size_t maxlen, char **out)
{
	json_object *v;
	char d[48];
	size_t mark;
	int r = cfg_lookup(p, o, key, required, &v);

	if (r <= 0)
		return r;
	mark = cfg_push_key(p, key);
	if (!json_object_is_type(v, json_type_string))
		return cfg_perr(p, "must be a string, got %s", cfg_jdesc(p, v, d, sizeof(d)));
	const char *s = json_object_get_string(v);
	size_t len = (size_t)json_object_get_string_len(v);
	if (strlen(s) != len)
		return cfg_perr(p, "must not contain a NUL character");
	if (len == 0)
		return cfg_perr(p, "must not be empty");
	if (len > maxlen)
		return cfg_perr(p, "must be at most %zu characters, got %zu", maxlen, len);
	if (has_ctl(s))
		return cfg_perr(p, "must not contain control characters");
	free(*out);
	*out = strdup(s);
	if (!*out)
		return cfg_enomem(p);
	cfg_pop(p, mark);
	return 1;
}

int cfg_get_bool(struct pctx *p, json_object *o, const char *key, bool *out)
{
	json_object *v;
	char d[48];
	int r = cfg_lookup(p, o, key, false, &v);

	if (r <= 0)
		return r;
	if (!json_object_is_type(v, json_type_boolean)) {
		cfg_push_key(p, key);
		return cfg_perr(p, "must be true or false, got %s", cfg_jdesc(p, v, d, sizeof(d)));
	}
	*out = json_object_get_boolean(v);
	return 1;
}

static int range_err(struct pctx *p, uint64_t min, uint64_t max, const char *got)
{
	if (max == UINT64_MAX || max == INT64_MAX)
		return cfg_perr(p, "must be at least %" PRIu64 ", got %s", min, got);
	return cfg_perr(p, "must be %" PRIu64 "-%" PRIu64 ", got %s", min, max, got);
}

/* A non-negative JSON integer (json-c saturates on overflow: caught by range). */
int cfg_json_to_u64(struct pctx *p, json_object *v, uint64_t min, uint64_t max, uint64_t *out)
{
	char d[48];

	if (!json_object_is_type(v, json_type_int))
		return cfg_perr(p, "must be an integer, got %s", cfg_jdesc(p, v, d, sizeof(d)));
	if (json_object_get_int64(v) < 0)
		return range_err(p, min, max, cfg_jdesc(p, v, d, sizeof(d)));
	uint64_t u = json_object_get_uint64(v);
	if (u < min || u > max || u == UINT64_MAX)
		return range_err(p, min, max, cfg_jdesc(p, v, d, sizeof(d)));
	*out = u;
	return 0;
}

int cfg_get_u64(struct pctx *p, json_object *o, const char *key, bool required,
		uint64_t min, uint64_t max, uint64_t *out)
{
	json_object *v;
	size_t mark;
	int r = cfg_lookup(p, o, key, required, &v);

	if (r <= 0)
		return r;
	mark = cfg_push_key(p, key);
	r = cfg_json_to_u64(p, v, min, max, out);
	if (r)
		return r;
	cfg_pop(p, mark);
	return 1;
}

int cfg_get_u32(struct pctx *p, json_object *o, const char *key, bool required,
		uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int r = cfg_get_u64(p, o, key, required, min, max, &v);

	if (r == 1)
		*out = (uint32_t)v;
	return r;
}

int cfg_get_array(struct pctx *p, json_object *o, const char *key, bool required,
		  size_t maxn, json_object **arr, size_t *n)
{
	json_object *v;
	char d[48];
	int r = cfg_lookup(p, o, key, required, &v);

	if (r <= 0)
		return r;
	if (!json_object_is_type(v, json_type_array)) {
		cfg_push_key(p, key);
		return cfg_perr(p, "must be an array, got %s", cfg_jdesc(p, v, d, sizeof(d)));
	}
	*arr = v;
	*n = json_object_array_length(v);
	if (*n > maxn) {
		cfg_push_key(p, key);
		return cfg_perr(p, "at most %zu entries allowed, got %zu", maxn, *n);
	}
	return 1;
}

/* ------------------------------------------------------------------------ */
/* Value syntaxes. */

bool cfg_valid_ip(const char *s, int *family, unsigned char bin[16])
{
	unsigned char tmp[16];

	if (!bin)
		bin = tmp;
	memset(bin, 0, 16);
	if (inet_pton(AF_INET, s, bin) == 1) {
		if (family)
			*family = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, s, bin) == 1) {
		if (family)
			*family = AF_INET6;
		return true;
	}
	return false;
}

/* "1073741824", "512M", "1G", "1GiB": binary multiples. */
int cfg_parse_size_str(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *c = s;
	unsigned shift = 0;

	if (*c < '0' || *c > '9')
		return -EINVAL;
	for (; *c >= '0' && *c <= '9'; c++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*c - '0');
	}
	if (*c) {
		switch (*c) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		case 't': case 'T': shift = 40; break;
		default: return -EINVAL;
		}
		c++;
		if (*c && strcmp(c, "iB") && strcmp(c, "B"))
			return -EINVAL;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}
