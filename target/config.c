/*
 * Target configuration: JSON <-> struct config.  The format is documented in
 * docs/config.md; keep the two in step.  Loading is strict on purpose: an
 * unknown key is far more often a typo than a feature, and a silently ignored
 * "acl" instead of "acls" would expose every LUN.
 */
#include "target/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

#define CFG_MAX_FILE       (16u << 20)
#define CFG_MAX_NAME       223      /* RFC 7143 sec. 4.2.7.1: iSCSI names up to 223 bytes */
#define CFG_MAX_LUN        16383
#define CFG_MAX_BACKSTORES 4096
#define CFG_MAX_TARGETS    1024
#define CFG_MAX_TPGS       256
#define CFG_MAX_PORTALS    64
#define CFG_MAX_ACLS       4096
#define CFG_CHAP_MIN       12       /* RFC 7143 sec. 12.1.3: at least 96 bits */
#define CFG_CHAP_MAX       255
#define CFG_DEFAULT_PORT   3260

#define MIN_SZ(a, b) ((a) < (b) ? (a) : (b))

static void __attribute__((format(printf, 3, 4))) seterr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

const char config_default_json[] =
	"{\n"
	"  \"backstores\": [\n"
	"    { \"name\": \"ram0\", \"type\": \"ram\", \"size\": \"1G\", \"block_size\": 512 }\n"
	"  ],\n"
	"  \"targets\": [\n"
	"    {\n"
	"      \"iqn\": \"iqn.2026-11.org.isert:default\",\n"
	"      \"tpgs\": [\n"
	"        {\n"
	"          \"tag\": 1,\n"
	"          \"enable\": true,\n"
	"          \"demo_mode\": true,\n"
	"          \"demo_write_protect\": false,\n"
	"          \"portals\": [ { \"ip\": \"127.0.0.1\", \"port\": 3260, \"iser\": false } ],\n"
	"          \"luns\": [ { \"lun\": 0, \"backstore\": \"ram0\" } ]\n"
	"        }\n"
	"      ]\n"
	"    }\n"
	"  ]\n"
	"}\n";

/* ------------------------------------------------------------------------ */
/* Parse context: where we are, for messages that name the JSON path. */

/* A backstore's name (or path) and its index: sorted, for lookups in thousands of LUNs. */
struct bs_key {
	const char *key;
	size_t idx;
};

struct pctx {
	const char *origin;
	char *err;
	size_t errlen;
	char path[512];
	size_t plen;
	struct bs_key *bs_names;  /* sorted by name once the backstores are read */
	size_t nbs_names;
};

static int __attribute__((format(printf, 2, 3))) perr(struct pctx *p, const char *fmt, ...)
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

static int enomem(struct pctx *p)
{
	perr(p, "out of memory");
	return -ENOMEM;
}

static size_t push_key(struct pctx *p, const char *key)
{
	size_t mark = p->plen;
	int n = snprintf(p->path + p->plen, sizeof(p->path) - p->plen, "%s%s",
			 p->plen ? "." : "", key);

	if (n > 0)
		p->plen = MIN_SZ(p->plen + (size_t)n, sizeof(p->path) - 1);
	return mark;
}

static size_t push_idx(struct pctx *p, size_t i)
{
	size_t mark = p->plen;
	int n = snprintf(p->path + p->plen, sizeof(p->path) - p->plen, "[%zu]", i);

	if (n > 0)
		p->plen = MIN_SZ(p->plen + (size_t)n, sizeof(p->path) - 1);
	return mark;
}

static void pop(struct pctx *p, size_t mark)
{
	p->plen = mark;
	p->path[mark] = '\0';
}

/* A short rendering of a JSON value for "got ..." in messages. */
static const char *jdesc(json_object *v, char *buf, size_t n)
{
	const char *s = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
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

static int lookup(struct pctx *p, json_object *o, const char *key, bool required, json_object **v)
{
	if (json_object_object_get_ex(o, key, v))
		return 1;
	if (required) {
		push_key(p, key);
		return perr(p, "required field missing");
	}
	return 0;
}

static int expect_object(struct pctx *p, json_object *v)
{
	char d[48];

	if (!json_object_is_type(v, json_type_object))
		return perr(p, "must be an object, got %s", jdesc(v, d, sizeof(d)));
	return 0;
}

/* Reject keys not in allowed (NULL-terminated): typo protection. */
static int check_keys(struct pctx *p, json_object *o, const char *const *allowed)
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
		push_key(p, key);
		return perr(p, "unknown key (expected one of: %s)", list);
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

static int get_str(struct pctx *p, json_object *o, const char *key, bool required,
		   size_t maxlen, char **out)
{
	json_object *v;
	char d[48];
	size_t mark;
	int r = lookup(p, o, key, required, &v);

	if (r <= 0)
		return r;
	mark = push_key(p, key);
	if (!json_object_is_type(v, json_type_string))
		return perr(p, "must be a string, got %s", jdesc(v, d, sizeof(d)));
	const char *s = json_object_get_string(v);
	size_t len = (size_t)json_object_get_string_len(v);
	if (strlen(s) != len)
		return perr(p, "must not contain a NUL character");
	if (len == 0)
		return perr(p, "must not be empty");
	if (len > maxlen)
		return perr(p, "must be at most %zu characters, got %zu", maxlen, len);
	if (has_ctl(s))
		return perr(p, "must not contain control characters");
	free(*out);
	*out = strdup(s);
	if (!*out)
		return enomem(p);
	pop(p, mark);
	return 1;
}

static int get_bool(struct pctx *p, json_object *o, const char *key, bool *out)
{
	json_object *v;
	char d[48];
	int r = lookup(p, o, key, false, &v);

	if (r <= 0)
		return r;
	if (!json_object_is_type(v, json_type_boolean)) {
		push_key(p, key);
		return perr(p, "must be true or false, got %s", jdesc(v, d, sizeof(d)));
	}
	*out = json_object_get_boolean(v);
	return 1;
}

static int range_err(struct pctx *p, uint64_t min, uint64_t max, const char *got)
{
	if (max == UINT64_MAX || max == INT64_MAX)
		return perr(p, "must be at least %" PRIu64 ", got %s", min, got);
	return perr(p, "must be %" PRIu64 "-%" PRIu64 ", got %s", min, max, got);
}

/* A non-negative JSON integer (json-c saturates on overflow: caught by range). */
static int json_to_u64(struct pctx *p, json_object *v, uint64_t min, uint64_t max, uint64_t *out)
{
	char d[48];

	if (!json_object_is_type(v, json_type_int))
		return perr(p, "must be an integer, got %s", jdesc(v, d, sizeof(d)));
	if (json_object_get_int64(v) < 0)
		return range_err(p, min, max, jdesc(v, d, sizeof(d)));
	uint64_t u = json_object_get_uint64(v);
	if (u < min || u > max || u == UINT64_MAX)
		return range_err(p, min, max, jdesc(v, d, sizeof(d)));
	*out = u;
	return 0;
}

static int get_u64(struct pctx *p, json_object *o, const char *key, bool required,
		   uint64_t min, uint64_t max, uint64_t *out)
{
	json_object *v;
	size_t mark;
	int r = lookup(p, o, key, required, &v);

	if (r <= 0)
		return r;
	mark = push_key(p, key);
	r = json_to_u64(p, v, min, max, out);
	if (r)
		return r;
	pop(p, mark);
	return 1;
}

static int get_u32(struct pctx *p, json_object *o, const char *key, bool required,
		   uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int r = get_u64(p, o, key, required, min, max, &v);

	if (r == 1)
		*out = (uint32_t)v;
	return r;
}

static int get_array(struct pctx *p, json_object *o, const char *key, bool required,
		     size_t maxn, json_object **arr, size_t *n)
{
	json_object *v;
	char d[48];
	int r = lookup(p, o, key, required, &v);

	if (r <= 0)
		return r;
	if (!json_object_is_type(v, json_type_array)) {
		push_key(p, key);
		return perr(p, "must be an array, got %s", jdesc(v, d, sizeof(d)));
	}
	*arr = v;
	*n = json_object_array_length(v);
	if (*n > maxn) {
		push_key(p, key);
		return perr(p, "at most %zu entries allowed, got %zu", maxn, *n);
	}
	return 1;
}

/* ------------------------------------------------------------------------ */
/* Value syntaxes. */

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
			return false;
	}
	return true;
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/*
 * RFC 7143 sec. 4.2.7 / RFC 3722.  Names are stringprep-normalised, so an iqn
 * carries no upper-case ASCII; the hex of eui./naa. is accepted in either
 * case since RFC 7143's own examples use upper case.  Non-ASCII bytes are let
 * through in the unique part without checking the full nameprep profile.
 * '_' is tolerated there too: deployed initiators use it.
 */
bool config_valid_iscsi_name(const char *n)
{
	size_t len;
	const char *s;

	if (!n)
		return false;
	len = strlen(n);
	if (len == 0 || len > CFG_MAX_NAME)
		return false;
	if (!strncmp(n, "eui.", 4))
		return len == 20 && is_hex(n + 4, 16);
	if (!strncmp(n, "naa.", 4))
		return (len == 20 || len == 36) && is_hex(n + 4, len - 4);
	if (strncmp(n, "iqn.", 4))
		return false;
	s = n + 4;
	/* yyyy-mm. */
	for (int i = 0; i < 4; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	if (s[4] != '-' || s[5] < '0' || s[5] > '1' || s[6] < '0' || s[6] > '9')
		return false;
	int month = (s[5] - '0') * 10 + (s[6] - '0');
	if (month < 1 || month > 12 || s[7] != '.')
		return false;
	s += 8;
	/* reversed domain: labels of [a-z0-9-] separated by single dots */
	size_t label = 0;
	for (; *s && *s != ':'; s++) {
		if (*s == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if (is_lower_alnum(*s) || *s == '-') {
			label++;
		} else {
			return false;
		}
	}
	if (label == 0)
		return false;
	if (*s == ':') {
		s++;
		if (!*s)
			return false;
		for (; *s; s++) {
			unsigned char c = (unsigned char)*s;
			if (!(is_lower_alnum((char)c) || c == '-' || c == '.' || c == ':' ||
			      c == '_' || c >= 0x80))
				return false;
		}
	}
	return true;
}

static bool names_equal(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;   /* eui./naa. hex compares case-blind */
}

static bool valid_ip(const char *s, int *family, unsigned char bin[16])
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

int config_parse_hostport(const char *s, char **host, uint16_t *port)
{
	char h[INET6_ADDRSTRLEN];
	const char *hs, *ps = NULL;
	size_t hlen;
	bool bracketed = false;
	int family;

	if (!s || !*s || !host || !port)
		return -EINVAL;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close)
			return -EINVAL;
		hs = s + 1;
		hlen = (size_t)(close - hs);
		if (close[1] == ':')
			ps = close + 2;
		else if (close[1])
			return -EINVAL;
		bracketed = true;
	} else {
		const char *first = strchr(s, ':'), *last = strrchr(s, ':');
		hs = s;
		if (first && first == last) {
			hlen = (size_t)(first - s);
			ps = first + 1;
		} else {
			/* no colon, or several: a bare IPv6 address, never with a port */
			hlen = strlen(s);
		}
	}
	if (hlen == 0 || hlen >= sizeof(h))
		return -EINVAL;
	memcpy(h, hs, hlen);
	h[hlen] = '\0';
	if (!valid_ip(h, &family, NULL) || (bracketed && family != AF_INET6))
		return -EINVAL;
	unsigned long pv = CFG_DEFAULT_PORT;
	if (ps) {
		if (!*ps || strlen(ps) > 5)
			return -EINVAL;
		pv = 0;
		for (const char *c = ps; *c; c++) {
			if (*c < '0' || *c > '9')
				return -EINVAL;
			pv = pv * 10 + (unsigned long)(*c - '0');
		}
		if (pv < 1 || pv > 65535)
			return -EINVAL;
	}
	*host = strdup(h);
	if (!*host)
		return -ENOMEM;
	*port = (uint16_t)pv;
	return 0;
}

/* "1073741824", "512M", "1G", "1GiB": binary multiples. */
static int parse_size_str(const char *s, uint64_t *out)
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

/* ------------------------------------------------------------------------ */
/* Sections. */

static int parse_chap(struct pctx *p, json_object *v, struct cfg_chap *c)
{
	static const char *const keys[] = { "userid", "password", "mutual_userid",
					    "mutual_password", NULL };
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if (!json_object_object_get_ex(v, "userid", NULL) &&
	    !json_object_object_get_ex(v, "password", NULL) &&
	    (json_object_object_get_ex(v, "mutual_userid", NULL) ||
	     json_object_object_get_ex(v, "mutual_password", NULL)))
		return perr(p, "mutual CHAP requires one-way CHAP: set userid and password too");
	if ((r = get_str(p, v, "userid", true, CFG_CHAP_MAX, &c->userid)) < 0 ||
	    (r = get_str(p, v, "password", true, CFG_CHAP_MAX, &c->password)) < 0 ||
	    (r = get_str(p, v, "mutual_userid", false, CFG_CHAP_MAX, &c->mutual_userid)) < 0 ||
	    (r = get_str(p, v, "mutual_password", false, CFG_CHAP_MAX, &c->mutual_password)) < 0)
		return r;
	if (strlen(c->password) < CFG_CHAP_MIN) {
		push_key(p, "password");
		return perr(p, "CHAP secret must be at least %d characters (RFC 7143 sec. 12.1.3), got %zu",
			    CFG_CHAP_MIN, strlen(c->password));
	}
	if (!c->mutual_userid != !c->mutual_password)
		return perr(p, "mutual CHAP needs both mutual_userid and mutual_password");
	if (c->mutual_password) {
		if (strlen(c->mutual_password) < CFG_CHAP_MIN) {
			push_key(p, "mutual_password");
			return perr(p, "CHAP secret must be at least %d characters (RFC 7143 sec. 12.1.3), got %zu",
				    CFG_CHAP_MIN, strlen(c->mutual_password));
		}
		if (!strcmp(c->mutual_password, c->password)) {
			push_key(p, "mutual_password");
			return perr(p, "must differ from password (RFC 7143 sec. 12.1.3 forbids reusing a secret in both directions)");
		}
	}
	return 0;
}

static int get_chap(struct pctx *p, json_object *o, const char *key, struct cfg_chap *c)
{
	json_object *v;
	size_t mark;
	int r = lookup(p, o, key, false, &v);

	if (r <= 0)
		return r;
	mark = push_key(p, key);
	r = parse_chap(p, v, c);
	if (r)
		return r;
	pop(p, mark);
	return 1;
}

static bool valid_bs_name(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

static int parse_backstore(struct pctx *p, json_object *v, struct cfg_backstore *b)
{
	static const char *const keys[] = { "name", "type", "path", "size", "block_size",
					    "thin", "write_cache", "readonly", "serial", NULL };
	char *type = NULL;
	json_object *sv;
	char d[48];
	size_t mark;
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if ((r = get_str(p, v, "name", true, 64, &b->name)) < 0)
		return r;
	if (!valid_bs_name(b->name)) {
		push_key(p, "name");
		return perr(p, "may hold only letters, digits, '_', '-' and '.', got \"%s\"", b->name);
	}
	if ((r = get_str(p, v, "type", true, 16, &type)) < 0)
		return r;
	if (!strcmp(type, "ram"))
		b->bs.type = BACKSTORE_RAM;
	else if (!strcmp(type, "file"))
		b->bs.type = BACKSTORE_FILE;
	else if (!strcmp(type, "block"))
		b->bs.type = BACKSTORE_BLOCK;
	else {
		push_key(p, "type");
		r = perr(p, "must be \"ram\", \"file\" or \"block\", got \"%s\"", type);
		free(type);
		return r;
	}
	free(type);

	if ((r = get_str(p, v, "path", b->bs.type != BACKSTORE_RAM, PATH_MAX - 1, &b->path)) < 0)
		return r;
	if (b->path && b->bs.type == BACKSTORE_RAM) {
		push_key(p, "path");
		return perr(p, "not allowed for a ram backstore");
	}
	if (b->path && b->path[0] != '/') {
		push_key(p, "path");
		return perr(p, "must be an absolute path, got \"%s\"", b->path);
	}

	if ((r = get_u32(p, v, "block_size", false, 0, 4096, &b->bs.block_size)) < 0)
		return r;
	r = lookup(p, v, "size", b->bs.type == BACKSTORE_RAM, &sv);
	if (r < 0)
		return r;
	if (r == 1) {
		mark = push_key(p, "size");
		if (json_object_is_type(sv, json_type_string)) {
			int e = parse_size_str(json_object_get_string(sv), &b->bs.size);
			if (e == -ERANGE || (!e && b->bs.size > INT64_MAX))
				return perr(p, "too large, got %s", jdesc(sv, d, sizeof(d)));
			if (e)
				return perr(p, "must be a byte count or a number with a K, M, G or T suffix (powers of 1024), got %s",
					    jdesc(sv, d, sizeof(d)));
		} else if ((r = json_to_u64(p, sv, 0, INT64_MAX, &b->bs.size))) {
			return r;
		}
		pop(p, mark);
	}
	/* The block size and size rules are the backstore's own, in one place. */
	char why[96];
	const char *field = backstore_check_geometry(b->bs.type, b->bs.size, b->bs.block_size, why, sizeof(why));
	if (field) {
		push_key(p, field);
		return perr(p, "%s", why);
	}
	if ((r = get_bool(p, v, "thin", &b->bs.thin)) < 0 ||
	    (r = get_bool(p, v, "write_cache", &b->bs.write_cache)) < 0 ||
	    (r = get_bool(p, v, "readonly", &b->bs.readonly)) < 0)
		return r;
	if ((r = get_str(p, v, "serial", false, 64, &b->serial)) < 0)
		return r;
	if (b->serial && strchr(b->serial, ' ')) {
		push_key(p, "serial");
		return perr(p, "must not contain spaces");
	}
	if (b->serial) {
		for (const char *c = b->serial; *c; c++)
			if ((unsigned char)*c >= 0x80) {
				push_key(p, "serial");
				return perr(p, "must be printable ASCII");
			}
	}
	b->bs.name = b->name;
	b->bs.path = b->path;
	return 0;
}

static int parse_portal(struct pctx *p, json_object *v, struct cfg_portal *pt)
{
	static const char *const keys[] = { "ip", "port", "iser", NULL };
	uint32_t port = CFG_DEFAULT_PORT;
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if ((r = get_str(p, v, "ip", true, INET6_ADDRSTRLEN - 1, &pt->host)) < 0)
		return r;
	if (!valid_ip(pt->host, NULL, NULL)) {
		push_key(p, "ip");
		return perr(p, "must be a numeric IPv4 or IPv6 address (host names are not resolved), got \"%s\"",
			    pt->host);
	}
	if ((r = get_u32(p, v, "port", false, 1, 65535, &port)) < 0)
		return r;
	pt->port = (uint16_t)port;
	if ((r = get_bool(p, v, "iser", &pt->iser)) < 0)
		return r;
	return 0;
}

static bool portal_same(const struct cfg_portal *a, const struct cfg_portal *b)
{
	unsigned char ba[16], bb[16];
	int fa = 0, fb = 0;

	if (a->port != b->port || a->iser != b->iser)
		return false;
	valid_ip(a->host, &fa, ba);
	valid_ip(b->host, &fb, bb);
	return fa == fb && !memcmp(ba, bb, 16);
}

static int get_yesno(struct pctx *p, json_object *o, const char *key, bool *out)
{
	json_object *v;
	char d[48];
	int r = lookup(p, o, key, false, &v);

	if (r <= 0)
		return r;
	if (json_object_is_type(v, json_type_boolean)) {
		*out = json_object_get_boolean(v);
		return 1;
	}
	if (json_object_is_type(v, json_type_string)) {
		if (!strcmp(json_object_get_string(v), "Yes")) {
			*out = true;
			return 1;
		}
		if (!strcmp(json_object_get_string(v), "No")) {
			*out = false;
			return 1;
		}
	}
	push_key(p, key);
	return perr(p, "must be true, false, \"Yes\" or \"No\", got %s", jdesc(v, d, sizeof(d)));
}

/* Digest offer: a list of CRC32C and None; None must be in it. */
static int get_digest(struct pctx *p, json_object *o, const char *key, bool *out)
{
	json_object *v;
	char d[48];
	size_t mark;
	int r = lookup(p, o, key, false, &v);

	if (r <= 0)
		return r;
	mark = push_key(p, key);
	if (!json_object_is_type(v, json_type_string))
		return perr(p, "must be a string such as \"CRC32C,None\", got %s", jdesc(v, d, sizeof(d)));
	const char *s = json_object_get_string(v);
	if (!strcmp(s, "None"))
		*out = false;
	else if (!strcmp(s, "CRC32C,None") || !strcmp(s, "None,CRC32C"))
		*out = true;
	else if (!strcmp(s, "CRC32C"))
		return perr(p, "must include None (a CRC32C-only offer is not supported), got \"CRC32C\"");
	else
		return perr(p, "must be \"CRC32C,None\" or \"None\", got %s", jdesc(v, d, sizeof(d)));
	pop(p, mark);
	return 1;
}

static void params_default(struct cfg_params *pr)
{
	pr->max_recv_dsl = 262144;
	pr->max_burst = 1048576;
	pr->first_burst = 65536;
	pr->max_outstanding_r2t = 1;
	pr->initial_r2t = false;
	pr->immediate_data = true;
	pr->header_digest = true;
	pr->data_digest = true;
	pr->default_time2wait = 2;
	pr->default_time2retain = 20;
	pr->max_connections = 1;
	pr->queue_depth = 128;
	pr->nop_in_interval = 0;
	pr->max_immediate = 16;
	pr->session_buffer_mb = 64;
}

static int parse_params(struct pctx *p, json_object *v, struct cfg_params *pr)
{
	static const char *const keys[] = {
		"MaxRecvDataSegmentLength", "MaxBurstLength", "FirstBurstLength",
		"MaxOutstandingR2T", "InitialR2T", "ImmediateData", "HeaderDigest",
		"DataDigest", "DefaultTime2Wait", "DefaultTime2Retain", "MaxConnections",
		"QueueDepth", "NopInInterval", "MaxImmediateCommands", "SessionBufferMB", NULL };
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	/* Ranges from RFC 7143 sec. 13; the last four keys are ours. */
	if ((r = get_u32(p, v, "MaxRecvDataSegmentLength", false, 512, 16777215, &pr->max_recv_dsl)) < 0 ||
	    (r = get_u32(p, v, "MaxBurstLength", false, 512, 16777215, &pr->max_burst)) < 0 ||
	    (r = get_u32(p, v, "FirstBurstLength", false, 512, 16777215, &pr->first_burst)) < 0 ||
	    (r = get_u32(p, v, "MaxOutstandingR2T", false, 1, 65535, &pr->max_outstanding_r2t)) < 0 ||
	    (r = get_yesno(p, v, "InitialR2T", &pr->initial_r2t)) < 0 ||
	    (r = get_yesno(p, v, "ImmediateData", &pr->immediate_data)) < 0 ||
	    (r = get_digest(p, v, "HeaderDigest", &pr->header_digest)) < 0 ||
	    (r = get_digest(p, v, "DataDigest", &pr->data_digest)) < 0 ||
	    (r = get_u32(p, v, "DefaultTime2Wait", false, 0, 3600, &pr->default_time2wait)) < 0 ||
	    (r = get_u32(p, v, "DefaultTime2Retain", false, 0, 3600, &pr->default_time2retain)) < 0 ||
	    (r = get_u32(p, v, "MaxConnections", false, 1, 65535, &pr->max_connections)) < 0 ||
	    (r = get_u32(p, v, "QueueDepth", false, 1, 65535, &pr->queue_depth)) < 0 ||
	    (r = get_u32(p, v, "NopInInterval", false, 0, 3600, &pr->nop_in_interval)) < 0 ||
	    (r = get_u32(p, v, "MaxImmediateCommands", false, 1, 1024, &pr->max_immediate)) < 0 ||
	    (r = get_u32(p, v, "SessionBufferMB", false, 1, 65536, &pr->session_buffer_mb)) < 0)
		return r;
	if (pr->first_burst > pr->max_burst) {
		push_key(p, "FirstBurstLength");
		return perr(p, "must not exceed MaxBurstLength (%" PRIu32 "), got %" PRIu32,
			    pr->max_burst, pr->first_burst);
	}
	return 0;
}

struct lunmap { uint8_t bits[(CFG_MAX_LUN + 1) / 8]; };

static bool lunmap_test_set(struct lunmap *m, uint64_t lun)
{
	bool was = m->bits[lun / 8] & (1u << (lun % 8));

	m->bits[lun / 8] |= (uint8_t)(1u << (lun % 8));
	return was;
}

static int cmp_bs_key(const void *a, const void *b)
{
	const struct bs_key *x = a, *y = b;
	int r = strcmp(x->key, y->key);
	return r ? r : (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_bs_name(const void *a, const void *b)
{
	return strcmp(((const struct bs_key *)a)->key, ((const struct bs_key *)b)->key);
}

/*
 * Backstore names and paths must be unique.  Sorted, so that a
 * configuration of thousands stays fast; the error names the first
 * backstore (in document order) that repeats an earlier one, as a check
 * element by element would.
 */
static int check_backstore_dups(struct pctx *p, struct config *c)
{
	size_t n = c->nbackstores, np = 0, bad = SIZE_MAX, first = 0;
	bool by_path = false;
	struct bs_key *names = calloc(n ? n : 1, sizeof(*names)), *paths = calloc(n ? n : 1, sizeof(*paths));
	if (!names || !paths) {
		free(names);
		free(paths);
		return enomem(p);
	}
	for (size_t i = 0; i < n; i++) {
		names[i] = (struct bs_key){ c->backstores[i].name, i };
		if (c->backstores[i].path)
			paths[np++] = (struct bs_key){ c->backstores[i].path, i };
	}
	qsort(names, n, sizeof(*names), cmp_bs_key);
	qsort(paths, np, sizeof(*paths), cmp_bs_key);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(names[i].key, names[i - 1].key) && (i < 2 || strcmp(names[i - 1].key, names[i - 2].key)) &&
		    names[i].idx < bad) {
			bad = names[i].idx;
			first = names[i - 1].idx;
		}
	for (size_t i = 1; i < np; i++)
		if (!strcmp(paths[i].key, paths[i - 1].key) && paths[i].idx < bad) {
			bad = paths[i].idx;
			first = paths[i - 1].idx;
			by_path = true;
		}
	free(paths);
	p->bs_names = names;
	p->nbs_names = n;
	if (bad == SIZE_MAX)
		return 0;
	/* A name repeated at the same index beats a path (the element check looked at the name first). */
	for (size_t j = 0; by_path && j < bad; j++)
		if (!strcmp(c->backstores[j].name, c->backstores[bad].name)) {
			by_path = false;
			first = j;
		}
	size_t mark = push_key(p, "backstores");
	push_idx(p, bad);
	push_key(p, by_path ? "path" : "name");
	int r = by_path ? perr(p, "\"%s\" is already used by backstores[%zu]", c->backstores[bad].path, first)
			: perr(p, "duplicate backstore name \"%s\", also in backstores[%zu]", c->backstores[bad].name,
			       first);
	pop(p, mark);
	return r;
}

static int parse_lun(struct pctx *p, json_object *v, const struct config *c, struct cfg_lun *l)
{
	static const char *const keys[] = { "lun", "backstore", "read_only", NULL };
	size_t i;
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if ((r = get_u64(p, v, "lun", true, 0, CFG_MAX_LUN, &l->lun)) < 0 ||
	    (r = get_str(p, v, "backstore", true, 64, &l->backstore)) < 0 ||
	    (r = get_bool(p, v, "read_only", &l->read_only)) < 0)
		return r;
	struct bs_key k = { .key = l->backstore }, *f = NULL;
	if (p->bs_names)
		f = bsearch(&k, p->bs_names, p->nbs_names, sizeof(k), cmp_bs_name);
	i = f ? f->idx : c->nbackstores;
	if (i == c->nbackstores) {
		push_key(p, "backstore");
		return perr(p, "no backstore named \"%s\"", l->backstore);
	}
	l->backstore_index = i;
	return 0;
}

static int parse_mapped_lun(struct pctx *p, json_object *v, const struct lunmap *tpg_luns,
			    struct cfg_mapped_lun *m)
{
	static const char *const keys[] = { "mapped_lun", "tpg_lun", "write_protect", NULL };
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if ((r = get_u64(p, v, "mapped_lun", true, 0, CFG_MAX_LUN, &m->mapped_lun)) < 0 ||
	    (r = get_u64(p, v, "tpg_lun", true, 0, CFG_MAX_LUN, &m->tpg_lun)) < 0 ||
	    (r = get_bool(p, v, "write_protect", &m->write_protect)) < 0)
		return r;
	if (!(tpg_luns->bits[m->tpg_lun / 8] & (1u << (m->tpg_lun % 8)))) {
		push_key(p, "tpg_lun");
		return perr(p, "the portal group has no LUN %" PRIu64, m->tpg_lun);
	}
	return 0;
}

static int parse_acl(struct pctx *p, json_object *v, const struct lunmap *tpg_luns,
		     struct cfg_acl *a)
{
	static const char *const keys[] = { "initiator", "chap", "mapped_luns", "allow_target_reset", NULL };
	json_object *arr;
	size_t n, mark;
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if ((r = get_str(p, v, "initiator", true, CFG_MAX_NAME, &a->initiator)) < 0)
		return r;
	if (!config_valid_iscsi_name(a->initiator)) {
		push_key(p, "initiator");
		return perr(p, "not a valid iSCSI name (iqn.yyyy-mm.reversed.domain[:id], eui.<16 hex>, naa.<16|32 hex>), got \"%s\"",
			    a->initiator);
	}
	if ((r = get_chap(p, v, "chap", &a->chap)) < 0 ||
	    (r = get_bool(p, v, "allow_target_reset", &a->allow_target_reset)) < 0)
		return r;
	if ((r = get_array(p, v, "mapped_luns", false, CFG_MAX_LUN + 1, &arr, &n)) < 0)
		return r;
	if (r == 0)
		return 0;
	a->luns = calloc(n ? n : 1, sizeof(*a->luns));
	if (!a->luns)
		return enomem(p);
	a->nluns = n;
	struct lunmap *seen = calloc(1, sizeof(*seen));
	if (!seen)
		return enomem(p);
	mark = push_key(p, "mapped_luns");
	for (size_t i = 0; i < n; i++) {
		size_t m2 = push_idx(p, i);
		r = parse_mapped_lun(p, json_object_array_get_idx(arr, i), tpg_luns, &a->luns[i]);
		if (!r && lunmap_test_set(seen, a->luns[i].mapped_lun)) {
			push_key(p, "mapped_lun");
			r = perr(p, "duplicate mapped LUN %" PRIu64, a->luns[i].mapped_lun);
		}
		if (r) {
			free(seen);
			return r;
		}
		pop(p, m2);
	}
	free(seen);
	pop(p, mark);
	return 0;
}

/* Parse array key of o into a freshly allocated *items of *n elements. */
#define PARSE_ARRAY(p, o, key, maxn, items, n, PARSE_ONE)                          \
	do {                                                                       \
		json_object *arr_;                                                 \
		size_t cnt_, mark_;                                                \
		int r_ = get_array(p, o, key, false, maxn, &arr_, &cnt_);          \
		if (r_ < 0)                                                        \
			return r_;                                                 \
		if (r_ == 0)                                                       \
			break;                                                     \
		(items) = calloc(cnt_ ? cnt_ : 1, sizeof(*(items)));               \
		if (!(items))                                                      \
			return enomem(p);                                          \
		(n) = cnt_;                                                        \
		mark_ = push_key(p, key);                                          \
		for (size_t i = 0; i < cnt_; i++) {                                \
			size_t m_ = push_idx(p, i);                                \
			json_object *el = json_object_array_get_idx(arr_, i);      \
			r_ = PARSE_ONE;                                            \
			if (r_)                                                    \
				return r_;                                         \
			pop(p, m_);                                                \
		}                                                                  \
		pop(p, mark_);                                                     \
	} while (0)

static int parse_one_portal(struct pctx *p, json_object *el, struct cfg_tpg *t, size_t i)
{
	int r = parse_portal(p, el, &t->portals[i]);

	if (r)
		return r;
	for (size_t j = 0; j < i; j++)
		if (portal_same(&t->portals[j], &t->portals[i]))
			return perr(p, "duplicate portal %s:%u (iser %s), same as portals[%zu]",
				    t->portals[i].host, t->portals[i].port,
				    t->portals[i].iser ? "true" : "false", j);
	return 0;
}

static int parse_one_lun(struct pctx *p, json_object *el, const struct config *c,
			 struct cfg_tpg *t, size_t i, struct lunmap *luns)
{
	int r = parse_lun(p, el, c, &t->luns[i]);

	if (r)
		return r;
	if (lunmap_test_set(luns, t->luns[i].lun)) {
		push_key(p, "lun");
		return perr(p, "duplicate LUN %" PRIu64, t->luns[i].lun);
	}
	return 0;
}

static int parse_one_acl(struct pctx *p, json_object *el, struct cfg_tpg *t, size_t i,
			 const struct lunmap *luns)
{
	int r = parse_acl(p, el, luns, &t->acls[i]);

	if (r)
		return r;
	for (size_t j = 0; j < i; j++)
		if (names_equal(t->acls[j].initiator, t->acls[i].initiator)) {
			push_key(p, "initiator");
			return perr(p, "duplicate initiator \"%s\", also in acls[%zu]",
				    t->acls[i].initiator, j);
		}
	return 0;
}

static int parse_tpg_body(struct pctx *p, json_object *v, const struct config *c,
			  struct cfg_tpg *t, struct lunmap *luns)
{
	static const char *const keys[] = { "tag", "enable", "demo_mode", "demo_write_protect",
					    "demo_target_reset", "demo_chap", "portals", "luns", "acls",
					    "params", NULL };
	json_object *pv;
	uint32_t tag = 0;
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if ((r = get_u32(p, v, "tag", true, 1, 65535, &tag)) < 0)
		return r;
	t->tag = (uint16_t)tag;
	t->enable = true;
	if ((r = get_bool(p, v, "enable", &t->enable)) < 0 ||
	    (r = get_bool(p, v, "demo_mode", &t->demo_mode)) < 0 ||
	    (r = get_bool(p, v, "demo_write_protect", &t->demo_write_protect)) < 0 ||
	    (r = get_bool(p, v, "demo_target_reset", &t->demo_target_reset)) < 0 ||
	    (r = get_chap(p, v, "demo_chap", &t->demo_chap)) < 0)
		return r;
	PARSE_ARRAY(p, v, "portals", CFG_MAX_PORTALS, t->portals, t->nportals,
		    parse_one_portal(p, el, t, i));
	PARSE_ARRAY(p, v, "luns", CFG_MAX_LUN + 1, t->luns, t->nluns,
		    parse_one_lun(p, el, c, t, i, luns));
	PARSE_ARRAY(p, v, "acls", CFG_MAX_ACLS, t->acls, t->nacls,
		    parse_one_acl(p, el, t, i, luns));
	params_default(&t->params);
	r = lookup(p, v, "params", false, &pv);
	if (r == 1) {
		size_t mark = push_key(p, "params");
		if ((r = parse_params(p, pv, &t->params)))
			return r;
		pop(p, mark);
	}
	return r < 0 ? r : 0;
}

static int parse_tpg(struct pctx *p, json_object *v, const struct config *c, struct cfg_tpg *t)
{
	struct lunmap *luns = calloc(1, sizeof(*luns));
	int r;

	if (!luns)
		return enomem(p);
	r = parse_tpg_body(p, v, c, t, luns);
	free(luns);
	return r;
}

static int parse_one_tpg(struct pctx *p, json_object *el, const struct config *c,
			 struct cfg_target *tg, size_t i)
{
	int r = parse_tpg(p, el, c, &tg->tpgs[i]);

	if (r)
		return r;
	for (size_t j = 0; j < i; j++)
		if (tg->tpgs[j].tag == tg->tpgs[i].tag) {
			push_key(p, "tag");
			return perr(p, "duplicate portal group tag %u, also in tpgs[%zu]",
				    tg->tpgs[i].tag, j);
		}
	return 0;
}

static int parse_target(struct pctx *p, json_object *v, const struct config *c,
			struct cfg_target *tg)
{
	static const char *const keys[] = { "iqn", "alias", "tpgs", NULL };
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if ((r = get_str(p, v, "iqn", true, CFG_MAX_NAME, &tg->iqn)) < 0)
		return r;
	if (!config_valid_iscsi_name(tg->iqn)) {
		push_key(p, "iqn");
		return perr(p, "not a valid iSCSI name (iqn.yyyy-mm.reversed.domain[:id], eui.<16 hex>, naa.<16|32 hex>), got \"%s\"",
			    tg->iqn);
	}
	if ((r = get_str(p, v, "alias", false, 255, &tg->alias)) < 0)
		return r;
	PARSE_ARRAY(p, v, "tpgs", CFG_MAX_TPGS, tg->tpgs, tg->ntpgs,
		    parse_one_tpg(p, el, c, tg, i));
	return 0;
}

static int parse_one_target(struct pctx *p, json_object *el, struct config *c, size_t i)
{
	int r = parse_target(p, el, c, &c->targets[i]);

	if (r)
		return r;
	for (size_t j = 0; j < i; j++)
		if (names_equal(c->targets[j].iqn, c->targets[i].iqn)) {
			push_key(p, "iqn");
			return perr(p, "duplicate target \"%s\", also in targets[%zu]",
				    c->targets[i].iqn, j);
		}
	return 0;
}

static int parse_one_backstore(struct pctx *p, json_object *el, struct config *c, size_t i)
{
	struct cfg_backstore *b = &c->backstores[i];
	int r = parse_backstore(p, el, b);

	(void)i; /* names and paths are checked together afterwards (check_backstore_dups) */
	return r;
}

static int parse_discovery(struct pctx *p, json_object *v, struct config *c)
{
	static const char *const keys[] = { "auth_required", "chap", NULL };
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	if ((r = get_bool(p, v, "auth_required", &c->discovery_auth_required)) < 0 ||
	    (r = get_chap(p, v, "chap", &c->discovery_chap)) < 0)
		return r;
	if (c->discovery_auth_required && !c->discovery_chap.userid) {
		push_key(p, "auth_required");
		return perr(p, "is true but no discovery chap is configured");
	}
	return 0;
}

/* What peers may hold: defaults (docs/security.md) and ranges. */
static const struct limit_key {
	const char *key;
	size_t off;
	uint32_t def, min, max;
} limit_keys[] = {
	{ "login_timeout", offsetof(struct config, login_timeout_s), 15, 1, 3600 },
	{ "max_connections", offsetof(struct config, max_connections), 4096, 1, 1048576 },
	{ "max_connections_per_portal", offsetof(struct config, max_connections_per_portal), 4096, 1, 1048576 },
	{ "max_connections_per_host", offsetof(struct config, max_connections_per_host), 256, 1, 1048576 },
	{ "max_sessions", offsetof(struct config, max_sessions), 4096, 1, 1048576 },
	{ "tcp_keepalive", offsetof(struct config, tcp_keepalive_s), 30, 0, 3600 },
	{ "buffer_pool_mb", offsetof(struct config, buffer_pool_mb), 2048, 16, 1048576 },
	{ "shutdown_timeout", offsetof(struct config, shutdown_timeout_s), 10, 1, 3600 },
};

static unsigned *limit_field(struct config *c, const struct limit_key *k)
{
	return (unsigned *)((char *)c + k->off);
}

static void limits_default(struct config *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(limit_keys); i++)
		*limit_field(c, &limit_keys[i]) = limit_keys[i].def;
}

static int parse_global(struct pctx *p, json_object *v, struct config *c)
{
	static const char *const keys[] = { "reactors", "poll_mode", "admin_socket", "login_timeout",
					    "max_connections", "max_connections_per_portal",
					    "max_connections_per_host", "max_sessions", "tcp_keepalive",
					    "buffer_pool_mb", "shutdown_timeout", NULL };
	char *mode = NULL;
	uint32_t n = 0;
	int r;

	if ((r = expect_object(p, v)) || (r = check_keys(p, v, keys)))
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(limit_keys); i++) {
		const struct limit_key *k = &limit_keys[i];
		uint32_t val = k->def;
		if ((r = get_u32(p, v, k->key, false, k->min, k->max, &val)) < 0)
			return r;
		*limit_field(c, k) = val;
	}
	if ((r = get_u32(p, v, "reactors", false, 0, 1024, &n)) < 0)
		return r;
	c->reactors = n;
	if ((r = get_str(p, v, "poll_mode", false, 16, &mode)) < 0)
		return r;
	if (mode) {
		if (!strcmp(mode, "event"))
			c->poll_mode = REACTOR_EVENT;
		else if (!strcmp(mode, "busy"))
			c->poll_mode = REACTOR_BUSY_POLL;
		else if (!strcmp(mode, "adaptive"))
			c->poll_mode = REACTOR_ADAPTIVE;
		else {
			push_key(p, "poll_mode");
			r = perr(p, "must be \"event\", \"busy\" or \"adaptive\", got \"%s\"", mode);
			free(mode);
			return r;
		}
		free(mode);
	}
	/* sun_path holds 108 bytes with the terminator */
	if ((r = get_str(p, v, "admin_socket", false, 107, &c->admin_socket)) < 0)
		return r;
	return 0;
}

static int parse_section(struct pctx *p, json_object *root, const char *key, struct config *c,
			 int (*fn)(struct pctx *, json_object *, struct config *))
{
	json_object *v;
	size_t mark;
	int r = lookup(p, root, key, false, &v);

	if (r <= 0)
		return r;
	mark = push_key(p, key);
	if ((r = fn(p, v, c)))
		return r;
	pop(p, mark);
	return 0;
}

static int parse_root(struct pctx *p, json_object *root, struct config *c)
{
	static const char *const keys[] = { "backstores", "targets", "discovery", "global", NULL };
	int r;

	if (!json_object_is_type(root, json_type_object))
		return perr(p, "the document must be a JSON object");
	if ((r = check_keys(p, root, keys)))
		return r;
	PARSE_ARRAY(p, root, "backstores", CFG_MAX_BACKSTORES, c->backstores, c->nbackstores,
		    parse_one_backstore(p, el, c, i));
	/* Two backstores over one file would corrupt each other; names must be unique for LUNs. */
	if ((r = check_backstore_dups(p, c)))
		return r;
	PARSE_ARRAY(p, root, "targets", CFG_MAX_TARGETS, c->targets, c->ntargets,
		    parse_one_target(p, el, c, i));
	if ((r = parse_section(p, root, "discovery", c, parse_discovery)) ||
	    (r = parse_section(p, root, "global", c, parse_global)))
		return r;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Loading. */

static void offset_to_linecol(const char *s, size_t off, unsigned *line, unsigned *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && s[i]; i++) {
		if (s[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)s[i] & 0xc0) != 0x80) {
			(*col)++;   /* count characters, not UTF-8 continuation bytes */
		}
	}
}

static int load_buf(const char *json, size_t len, const char *origin, struct config **out,
		    char *err, size_t errlen)
{
	struct pctx p = { .origin = origin ? origin : "<string>", .err = err, .errlen = errlen };
	struct json_tokener *tok;
	json_object *root;
	struct config *c;
	int r;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (strlen(json) != len)
		return perr(&p, "the document contains a NUL byte");
	if (len > CFG_MAX_FILE)
		return perr(&p, "the document is larger than %u bytes", CFG_MAX_FILE);
	tok = json_tokener_new();
	if (!tok)
		return enomem(&p);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	/* Passing the terminator too makes json-c finish a trailing number. */
	root = json_tokener_parse_ex(tok, json, (int)len + 1);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	if (!root || jerr != json_tokener_success) {
		unsigned line, col;
		size_t off = json_tokener_get_parse_end(tok);
		offset_to_linecol(json, off, &line, &col);
		if (jerr == json_tokener_success || jerr == json_tokener_continue ||
		    jerr == json_tokener_error_parse_eof)
			r = perr(&p, "line %u, column %u: JSON syntax error: unexpected end of document", line, col);
		else
			r = perr(&p, "line %u, column %u: JSON syntax error: %s", line, col,
				 json_tokener_error_desc(jerr));
		json_object_put(root);
		json_tokener_free(tok);
		return r;
	}
	json_tokener_free(tok);

	c = calloc(1, sizeof(*c));
	if (!c) {
		json_object_put(root);
		return enomem(&p);
	}
	c->poll_mode = REACTOR_EVENT;
	limits_default(c);
	c->origin = strdup(p.origin);
	r = c->origin ? parse_root(&p, root, c) : enomem(&p);
	free(p.bs_names);
	json_object_put(root);
	if (r) {
		config_free(c);
		return r;
	}
	*out = c;
	return 0;
}

int config_load_string(const char *json, const char *origin, struct config **out,
		       char *err, size_t errlen)
{
	if (!json || !out)
		return -EINVAL;
	return load_buf(json, strlen(json), origin, out, err, errlen);
}

int config_load_file(const char *path, struct config **out, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, r;

	if (!path || !out)
		return -EINVAL;
	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		seterr(err, errlen, "%s: cannot open: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		seterr(err, errlen, "%s: stat: %s", path, strerror(-r));
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)CFG_MAX_FILE) {
		r = S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
		seterr(err, errlen, "%s: %s", path,
		       r == -EFBIG ? "larger than 16 MiB" : "not a regular file");
		close(fd);
		return r;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		seterr(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			seterr(err, errlen, "%s: read: %s", path, strerror(-r));
			free(buf);
			close(fd);
			return r;
		}
		if (n == 0)
			break;   /* shrank under us: parse what we have */
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	r = load_buf(buf, got, path, out, err, errlen);
	free(buf);
	if (!r)
		(*out)->file_mode = st.st_mode & 07777;
	return r;
}

/* ------------------------------------------------------------------------ */
/* Serialising: every field written explicitly, so a saved file documents the
 * effective values; optional strings only when set. */

static bool put(json_object *o, const char *key, json_object *v)
{
	if (!v)
		return false;
	if (json_object_object_add(o, key, v)) {
		json_object_put(v);
		return false;
	}
	return true;
}

static bool put_str(json_object *o, const char *key, const char *s)
{
	return !s || put(o, key, json_object_new_string(s));
}

static bool arr_add(json_object *a, json_object *v)
{
	if (!v)
		return false;
	if (json_object_array_add(a, v)) {
		json_object_put(v);
		return false;
	}
	return true;
}

static json_object *chap_to_json(const struct cfg_chap *c)
{
	json_object *o = json_object_new_object();
	bool ok = o && put_str(o, "userid", c->userid) && put_str(o, "password", c->password) &&
		  put_str(o, "mutual_userid", c->mutual_userid) &&
		  put_str(o, "mutual_password", c->mutual_password);

	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static const char *bs_type_name(enum backstore_type t)
{
	switch (t) {
	case BACKSTORE_RAM: return "ram";
	case BACKSTORE_FILE: return "file";
	case BACKSTORE_BLOCK: return "block";
	}
	return "?";
}

static json_object *backstore_to_json(const struct cfg_backstore *b)
{
	json_object *o = json_object_new_object();
	bool ok = o && put_str(o, "name", b->name) &&
		  put(o, "type", json_object_new_string(bs_type_name(b->bs.type))) &&
		  put_str(o, "path", b->path) &&
		  put(o, "size", json_object_new_uint64(b->bs.size)) &&
		  (!b->bs.block_size || put(o, "block_size", json_object_new_int64(b->bs.block_size))) &&
		  put(o, "thin", json_object_new_boolean(b->bs.thin)) &&
		  put(o, "write_cache", json_object_new_boolean(b->bs.write_cache)) &&
		  put(o, "readonly", json_object_new_boolean(b->bs.readonly)) &&
		  put_str(o, "serial", b->serial);

	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *params_to_json(const struct cfg_params *pr)
{
	json_object *o = json_object_new_object();
	bool ok = o &&
		put(o, "MaxRecvDataSegmentLength", json_object_new_int64(pr->max_recv_dsl)) &&
		put(o, "MaxBurstLength", json_object_new_int64(pr->max_burst)) &&
		put(o, "FirstBurstLength", json_object_new_int64(pr->first_burst)) &&
		put(o, "MaxOutstandingR2T", json_object_new_int64(pr->max_outstanding_r2t)) &&
		put(o, "InitialR2T", json_object_new_boolean(pr->initial_r2t)) &&
		put(o, "ImmediateData", json_object_new_boolean(pr->immediate_data)) &&
		put(o, "HeaderDigest", json_object_new_string(pr->header_digest ? "CRC32C,None" : "None")) &&
		put(o, "DataDigest", json_object_new_string(pr->data_digest ? "CRC32C,None" : "None")) &&
		put(o, "DefaultTime2Wait", json_object_new_int64(pr->default_time2wait)) &&
		put(o, "DefaultTime2Retain", json_object_new_int64(pr->default_time2retain)) &&
		put(o, "MaxConnections", json_object_new_int64(pr->max_connections)) &&
		put(o, "QueueDepth", json_object_new_int64(pr->queue_depth)) &&
		put(o, "NopInInterval", json_object_new_int64(pr->nop_in_interval)) &&
		put(o, "MaxImmediateCommands", json_object_new_int64(pr->max_immediate)) &&
		put(o, "SessionBufferMB", json_object_new_int64(pr->session_buffer_mb));

	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *acl_to_json(const struct cfg_acl *a)
{
	json_object *o = json_object_new_object();
	json_object *ml = json_object_new_array();
	bool ok = o && ml;

	for (size_t i = 0; ok && i < a->nluns; i++) {
		json_object *m = json_object_new_object();
		ok = m && put(m, "mapped_lun", json_object_new_uint64(a->luns[i].mapped_lun)) &&
		     put(m, "tpg_lun", json_object_new_uint64(a->luns[i].tpg_lun)) &&
		     put(m, "write_protect", json_object_new_boolean(a->luns[i].write_protect));
		if (!ok)
			json_object_put(m);
		else
			ok = arr_add(ml, m);
	}
	ok = ok && put_str(o, "initiator", a->initiator) &&
	     (!a->chap.userid || put(o, "chap", chap_to_json(&a->chap))) &&
	     put(o, "allow_target_reset", json_object_new_boolean(a->allow_target_reset));
	if (ok) {
		ok = put(o, "mapped_luns", ml);
		ml = NULL;
	}
	json_object_put(ml);
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *tpg_to_json(const struct cfg_tpg *t)
{
	json_object *o = json_object_new_object();
	json_object *ps = json_object_new_array(), *ls = json_object_new_array(),
		    *as = json_object_new_array();
	bool ok = o && ps && ls && as;

	for (size_t i = 0; ok && i < t->nportals; i++) {
		json_object *e = json_object_new_object();
		ok = e && put(e, "ip", json_object_new_string(t->portals[i].host)) &&
		     put(e, "port", json_object_new_int64(t->portals[i].port)) &&
		     put(e, "iser", json_object_new_boolean(t->portals[i].iser));
		ok = ok ? arr_add(ps, e) : (json_object_put(e), false);
	}
	for (size_t i = 0; ok && i < t->nluns; i++) {
		json_object *e = json_object_new_object();
		ok = e && put(e, "lun", json_object_new_uint64(t->luns[i].lun)) &&
		     put(e, "backstore", json_object_new_string(t->luns[i].backstore)) &&
		     put(e, "read_only", json_object_new_boolean(t->luns[i].read_only));
		ok = ok ? arr_add(ls, e) : (json_object_put(e), false);
	}
	for (size_t i = 0; ok && i < t->nacls; i++)
		ok = arr_add(as, acl_to_json(&t->acls[i]));
	ok = ok && put(o, "tag", json_object_new_int64(t->tag)) &&
	     put(o, "enable", json_object_new_boolean(t->enable)) &&
	     put(o, "demo_mode", json_object_new_boolean(t->demo_mode)) &&
	     put(o, "demo_write_protect", json_object_new_boolean(t->demo_write_protect)) &&
	     put(o, "demo_target_reset", json_object_new_boolean(t->demo_target_reset)) &&
	     (!t->demo_chap.userid || put(o, "demo_chap", chap_to_json(&t->demo_chap)));
	if (ok) {
		ok = put(o, "portals", ps);
		ps = NULL;
	}
	if (ok) {
		ok = put(o, "luns", ls);
		ls = NULL;
	}
	if (ok) {
		ok = put(o, "acls", as);
		as = NULL;
	}
	ok = ok && put(o, "params", params_to_json(&t->params));
	json_object_put(ps);
	json_object_put(ls);
	json_object_put(as);
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *target_to_json(const struct cfg_target *tg)
{
	json_object *o = json_object_new_object();
	json_object *ts = json_object_new_array();
	bool ok = o && ts;

	for (size_t i = 0; ok && i < tg->ntpgs; i++)
		ok = arr_add(ts, tpg_to_json(&tg->tpgs[i]));
	ok = ok && put_str(o, "iqn", tg->iqn) && put_str(o, "alias", tg->alias);
	if (ok) {
		ok = put(o, "tpgs", ts);
		ts = NULL;
	}
	json_object_put(ts);
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static const char *poll_mode_name(enum reactor_poll_mode m)
{
	switch (m) {
	case REACTOR_EVENT: return "event";
	case REACTOR_BUSY_POLL: return "busy";
	case REACTOR_ADAPTIVE: return "adaptive";
	}
	return "event";
}

json_object *config_to_obj(const struct config *c)
{
	json_object *root = json_object_new_object();
	json_object *bs = json_object_new_array(), *ts = json_object_new_array();
	json_object *disc = json_object_new_object(), *glob = json_object_new_object();
	bool ok = root && bs && ts && disc && glob;

	for (size_t i = 0; ok && i < c->nbackstores; i++)
		ok = arr_add(bs, backstore_to_json(&c->backstores[i]));
	for (size_t i = 0; ok && i < c->ntargets; i++)
		ok = arr_add(ts, target_to_json(&c->targets[i]));
	ok = ok && put(disc, "auth_required", json_object_new_boolean(c->discovery_auth_required)) &&
	     (!c->discovery_chap.userid || put(disc, "chap", chap_to_json(&c->discovery_chap))) &&
	     put(glob, "reactors", json_object_new_int64(c->reactors)) &&
	     put(glob, "poll_mode", json_object_new_string(poll_mode_name(c->poll_mode))) &&
	     put_str(glob, "admin_socket", c->admin_socket);
	for (size_t i = 0; ok && i < ARRAY_SIZE(limit_keys); i++)
		ok = put(glob, limit_keys[i].key,
			 json_object_new_int64(*limit_field((struct config *)c, &limit_keys[i])));
	json_object *parts[] = { bs, ts, disc, glob };
	const char *names[] = { "backstores", "targets", "discovery", "global" };
	for (size_t i = 0; i < 4; i++) {
		if (ok)
			ok = put(root, names[i], parts[i]);
		else
			json_object_put(parts[i]);
	}
	if (!ok) {
		json_object_put(root);
		return NULL;
	}
	return root;
}

char *config_to_json(const struct config *c)
{
	json_object *o;
	const char *s;
	char *out = NULL;

	if (!c)
		return NULL;
	o = config_to_obj(c);
	if (!o)
		return NULL;
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					   JSON_C_TO_STRING_NOSLASHESCAPE);
	if (s) {
		size_t n = strlen(s);
		out = malloc(n + 2);
		if (out) {
			memcpy(out, s, n);
			out[n] = '\n';
			out[n + 1] = '\0';
		}
	}
	json_object_put(o);
	return out;
}

/* ------------------------------------------------------------------------ */
/* Atomic save: a crash leaves either the old file or the new one. */

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int config_save_file(const struct config *c, const char *path, char *err, size_t errlen)
{
	char *json, *tmp = NULL, *dir = NULL;
	const char *slash;
	int fd = -1, dfd, r;

	if (!c || !path || !*path)
		return -EINVAL;
	json = config_to_json(c);
	if (!json) {
		seterr(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	slash = strrchr(path, '/');
	if (slash)
		dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	else
		dir = strdup(".");
	if (!dir || asprintf(&tmp, "%s/.%s.tmpXXXXXX", dir, slash ? slash + 1 : path) < 0) {
		tmp = NULL;
		r = -ENOMEM;
		seterr(err, errlen, "%s: out of memory", path);
		goto out;
	}
	/* mkstemp creates 0600: the file holds CHAP secrets. */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		seterr(err, errlen, "%s: cannot create temporary file in %s: %s", path, dir, strerror(-r));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	if ((r = write_all(fd, json, strlen(json))) ||
	    (fsync(fd) < 0 && (r = -errno))) {
		seterr(err, errlen, "%s: write %s: %s", path, tmp, strerror(-r));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		r = -errno;
		seterr(err, errlen, "%s: close %s: %s", path, tmp, strerror(-r));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		r = -errno;
		seterr(err, errlen, "%s: rename from %s: %s", path, tmp, strerror(-r));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	/* The rename is durable only once the directory is. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		r = -errno;
		seterr(err, errlen, "%s: fsync directory %s: %s", path, dir, strerror(-r));
		if (dfd >= 0)
			close(dfd);
		goto out;
	}
	close(dfd);
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	free(dir);
	free(json);
	return r;
}

/* ------------------------------------------------------------------------ */

static void chap_free(struct cfg_chap *c)
{
	free(c->userid);
	free(c->password);
	free(c->mutual_userid);
	free(c->mutual_password);
}

static void tpg_free(struct cfg_tpg *t)
{
	for (size_t i = 0; i < t->nportals; i++)
		free(t->portals[i].host);
	free(t->portals);
	for (size_t i = 0; i < t->nluns; i++)
		free(t->luns[i].backstore);
	free(t->luns);
	for (size_t i = 0; i < t->nacls; i++) {
		free(t->acls[i].initiator);
		chap_free(&t->acls[i].chap);
		free(t->acls[i].luns);
	}
	free(t->acls);
	chap_free(&t->demo_chap);
}

void config_free(struct config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nbackstores; i++) {
		free(c->backstores[i].name);
		free(c->backstores[i].path);
		free(c->backstores[i].serial);
	}
	free(c->backstores);
	for (size_t i = 0; i < c->ntargets; i++) {
		struct cfg_target *tg = &c->targets[i];
		free(tg->iqn);
		free(tg->alias);
		for (size_t j = 0; j < tg->ntpgs; j++)
			tpg_free(&tg->tpgs[j]);
		free(tg->tpgs);
	}
	free(c->targets);
	chap_free(&c->discovery_chap);
	free(c->admin_socket);
	free(c->origin);
	free(c);
}

/* ------------------------------------------------------------------------ */
/* One object added to a loaded configuration, checked by the same code as the file. */

void config_backstore_clear(struct cfg_backstore *b)
{
	free(b->name);
	free(b->path);
	free(b->serial);
	memset(b, 0, sizeof(*b));
}

int config_check_backstore(const struct config *c, json_object *obj, const char *origin, struct cfg_backstore *out,
			   char *err, size_t errlen)
{
	struct pctx p = { .origin = origin, .err = err, .errlen = errlen };
	size_t n = c->nbackstores;
	memset(out, 0, sizeof(*out));
	if (n >= CFG_MAX_BACKSTORES) {
		push_key(&p, "backstores");
		return perr(&p, "at most %u entries", CFG_MAX_BACKSTORES);
	}
	/* As element n of the array: the names and paths of all are checked together, as in a file. */
	struct config view = *c;
	view.backstores = malloc((n + 1) * sizeof(*view.backstores));
	if (!view.backstores)
		return enomem(&p);
	memcpy(view.backstores, c->backstores, n * sizeof(*view.backstores));
	memset(&view.backstores[n], 0, sizeof(view.backstores[n]));
	size_t mark = push_key(&p, "backstores");
	push_idx(&p, n);
	int r = parse_backstore(&p, obj, &view.backstores[n]);
	pop(&p, mark);
	if (!r) {
		view.nbackstores = n + 1;
		r = check_backstore_dups(&p, &view);
		free(p.bs_names);
	}
	if (r)
		config_backstore_clear(&view.backstores[n]);
	else
		*out = view.backstores[n];
	free(view.backstores);
	return r;
}

int config_append_backstore(struct config *c, struct cfg_backstore *b)
{
	struct cfg_backstore *v = realloc(c->backstores, (c->nbackstores + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->backstores = v;
	v[c->nbackstores++] = *b;
	memset(b, 0, sizeof(*b));
	return 0;
}

int config_check_lun(const struct config *c, size_t ti, size_t gi, json_object *obj, const char *origin,
		     struct cfg_lun *out, char *err, size_t errlen)
{
	struct pctx p = { .origin = origin, .err = err, .errlen = errlen };
	const struct cfg_tpg *g = &c->targets[ti].tpgs[gi];
	struct lunmap *seen = calloc(1, sizeof(*seen));
	struct cfg_tpg view = *g;
	memset(out, 0, sizeof(*out));
	view.luns = calloc(g->nluns + 1, sizeof(*view.luns));
	int r = seen && view.luns ? 0 : enomem(&p);
	for (size_t i = 0; !r && i < g->nluns; i++)
		lunmap_test_set(seen, g->luns[i].lun);
	/* The backstore names, sorted as when a file is read (parse_lun looks them up there). */
	struct config names = *c;
	if (!r)
		r = check_backstore_dups(&p, &names);
	if (!r) {
		size_t m = push_key(&p, "targets");
		push_idx(&p, ti);
		push_key(&p, "tpgs");
		push_idx(&p, gi);
		push_key(&p, "luns");
		push_idx(&p, g->nluns);
		r = parse_one_lun(&p, obj, c, &view, g->nluns, seen);
		pop(&p, m);
	}
	if (!r)
		*out = view.luns[g->nluns];
	else if (view.luns)
		free(view.luns[g->nluns].backstore);
	free(p.bs_names);
	free(view.luns);
	free(seen);
	return r;
}

int config_append_lun(struct config *c, size_t ti, size_t gi, struct cfg_lun *l)
{
	struct cfg_tpg *g = &c->targets[ti].tpgs[gi];
	struct cfg_lun *v = realloc(g->luns, (g->nluns + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	g->luns = v;
	v[g->nluns++] = *l;
	memset(l, 0, sizeof(*l));
	return 0;
}

int config_set_portals(struct config *c, const char *const *hostports, size_t n, bool iser, char *err,
		       size_t errlen)
{
	size_t ntpg = 0;

	if (!c || !n || n > CFG_MAX_PORTALS) {
		seterr(err, errlen, "from 1 to %u portals", CFG_MAX_PORTALS);
		return -EINVAL;
	}
	for (size_t i = 0; i < c->ntargets; i++)
		ntpg += c->targets[i].ntpgs;
	if (!ntpg) {
		seterr(err, errlen, "%s: the configuration has no portal group to listen for", c->origin);
		return -ENOENT;
	}
	/* Parse and allocate everything first so a failure leaves the config untouched. */
	struct cfg_portal *parsed = calloc(n, sizeof(*parsed));
	struct cfg_portal **fresh = calloc(ntpg, sizeof(*fresh));
	int r = parsed && fresh ? 0 : -ENOMEM;
	for (size_t i = 0; !r && i < n; i++) {
		r = config_parse_hostport(hostports[i], &parsed[i].host, &parsed[i].port);
		parsed[i].iser = iser;
		if (r) {
			seterr(err, errlen, "%s: expected ADDRESS[:PORT] or [IPV6]:PORT with a numeric address, port 1-65535",
			       hostports[i] ? hostports[i] : "(null)");
			goto out;
		}
		for (size_t j = 0; j < i; j++)
			if (parsed[j].port == parsed[i].port && !strcmp(parsed[j].host, parsed[i].host)) {
				seterr(err, errlen, "%s: given twice", hostports[i]);
				r = -EINVAL;
				goto out;
			}
	}
	for (size_t k = 0; !r && k < ntpg; k++) {
		fresh[k] = calloc(n, sizeof(**fresh));
		if (!fresh[k])
			r = -ENOMEM;
		for (size_t i = 0; !r && i < n; i++) {
			fresh[k][i] = parsed[i];
			if (!(fresh[k][i].host = strdup(parsed[i].host)))
				r = -ENOMEM;
		}
	}
	if (r) {
		seterr(err, errlen, "out of memory");
		goto out;
	}
	size_t k = 0;
	for (size_t i = 0; i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++) {
			struct cfg_tpg *t = &c->targets[i].tpgs[j];
			for (size_t m = 0; m < t->nportals; m++)
				free(t->portals[m].host);
			free(t->portals);
			t->portals = fresh[k];
			fresh[k++] = NULL;
			t->nportals = n;
		}
out:
	for (size_t k2 = 0; fresh && k2 < ntpg; k2++) {
		for (size_t i = 0; fresh[k2] && i < n; i++)
			free(fresh[k2][i].host);
		free(fresh[k2]);
	}
	for (size_t i = 0; parsed && i < n; i++)
		free(parsed[i].host);
	free(fresh);
	free(parsed);
	return r;
}

int config_override_portals_iser(struct config *c, const char *hostport, bool iser, char *err, size_t errlen)
{
	return config_set_portals(c, &hostport, 1, iser, err, errlen);
}

int config_override_portals(struct config *c, const char *hostport, char *err, size_t errlen)
{
	return config_set_portals(c, &hostport, 1, false, err, errlen);
}

bool config_has_secrets(const struct config *c)
{
	if (c->discovery_chap.userid)
		return true;
	for (size_t i = 0; i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++) {
			const struct cfg_tpg *t = &c->targets[i].tpgs[j];
			if (t->demo_chap.userid)
				return true;
			for (size_t k = 0; k < t->nacls; k++)
				if (t->acls[k].chap.userid)
					return true;
		}
	return false;
}
