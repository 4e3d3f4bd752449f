/*
 * The APTPL state file of one LU: JSON text, and its atomic write.  The
 * file is only ever produced by pr_state_format and renamed into place
 * after an fsync, so a damaged one came from outside (disk, hand edit):
 * the parser trusts nothing in it and bounds every count and length.
 */
#include "target/scsi/pr/pr_state.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define PR_STATE_FORMAT "isert-pr"

static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
			return false;
	return true;
}

static bool all_hex(const char *s, size_t n)
{
	return strlen(s) == n && strspn(s, "0123456789abcdefABCDEF") == n;
}

/*
 * Names are whatever the initiator sent at login (isertd does not restrict
 * iSCSI names to RFC 3722's characters), so any byte but NUL is kept.
 */
bool pr_state_valid_iport(const char *iport, bool *has_isid, size_t *name_len)
{
	size_t n = strlen(iport);
	const char *sep = strcasestr(iport, ",i,0x");

	if (n == 0 || n > 255)
		return false;
	if (!sep) {
		*has_isid = false;
		*name_len = n;
		return n <= 223;
	}
	*has_isid = true;
	*name_len = (size_t)(sep - iport);
	return *name_len > 0 && *name_len <= 223 && all_hex(sep + 5, 12);
}

/* ---- format ---- */

static bool put(json_object *o, const char *k, json_object *v)
{
	if (!v)
		return false;
	json_object_object_add(o, k, v);
	return true;
}

static json_object *reg_to_json(const struct pr_state_reg *r)
{
	json_object *o = json_object_new_object();
	char key[19];

	snprintf(key, sizeof(key), "0x%016" PRIx64, r->key);
	if (o && put(o, "key", json_object_new_string(key)) &&
	    put(o, "initiator", json_object_new_string(r->iport)) &&
	    put(o, "target_port", json_object_new_string(r->tport)) &&
	    put(o, "relative_port", json_object_new_int(r->rtpi)) &&
	    put(o, "all_target_ports", json_object_new_boolean(r->all_tg_pt)))
		return o;
	json_object_put(o);
	return NULL;
}

char *pr_state_format(const struct pr_state *st)
{
	json_object *root = json_object_new_object(), *regs = json_object_new_array(), *res = NULL;
	char *text = NULL;
	bool ok = root && regs;

	for (unsigned i = 0; ok && i < st->nregs; i++) {
		json_object *r = reg_to_json(&st->regs[i]);

		ok = r && json_object_array_add(regs, r) == 0;
		if (!ok)
			json_object_put(r);
	}
	if (ok && st->reserved) {
		res = json_object_new_object();
		ok = res && put(res, "type", json_object_new_int(st->type)) &&
		     (st->holder < 0 || put(res, "holder", json_object_new_int(st->holder)));
	}
	if (ok && st->res2) {
		json_object *r2 = json_object_new_object();
		ok = r2 && put(r2, "initiator", json_object_new_string(st->res2_iport)) &&
		     put(r2, "target_port", json_object_new_string(st->res2_tport)) && put(root, "spc2_reservation", r2);
		if (!ok)
			json_object_put(r2);
	}
	ok = ok && put(root, "format", json_object_new_string(PR_STATE_FORMAT)) &&
	     put(root, "version", json_object_new_int(PR_STATE_VERSION)) &&
	     put(root, "serial", json_object_new_string(st->serial)) &&
	     put(root, "naa", json_object_new_string(st->naa)) &&
	     put(root, "backstore", json_object_new_string(st->backstore)) &&
	     put(root, "generation", json_object_new_int64(st->generation)) &&
	     put(root, "aptpl", json_object_new_boolean(st->aptpl));
	if (ok) {
		json_object_object_add(root, "registrations", regs);
		regs = NULL;
		json_object_object_add(root, "reservation", res);
		res = NULL;
		const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY |
								       JSON_C_TO_STRING_SPACED |
								       JSON_C_TO_STRING_NOSLASHESCAPE);
		if (s) {
			size_t n = strlen(s);

			text = malloc(n + 2);
			if (text) {
				memcpy(text, s, n);
				text[n] = '\n';
				text[n + 1] = 0;
			}
		}
	}
	json_object_put(res);
	json_object_put(regs);
	json_object_put(root);
	return text;
}

/* ---- parse ---- */

static json_object *field(json_object *o, const char *k, json_type t, bool required, const char *where,
			  char *err, size_t errlen, bool *bad)
{
	json_object *v;

	if (!json_object_object_get_ex(o, k, &v) || (!required && json_object_is_type(v, json_type_null))) {
		if (required) {
			seterr(err, errlen, "%s%s is missing", where, k);
			*bad = true;
		}
		return NULL;
	}
	if (!json_object_is_type(v, t)) {
		seterr(err, errlen, "%s%s has the wrong type", where, k);
		*bad = true;
		return NULL;
	}
	return v;
}

/* A string field of at most max bytes, printable ASCII unless any_byte (then no NUL); into out (max + 1 bytes). */
static bool str_field_ex(json_object *o, const char *k, size_t max, bool required, bool any_byte,
			 const char *where, char *out, char *err, size_t errlen)
{
	bool bad = false;
	json_object *v = field(o, k, json_type_string, required, where, err, errlen, &bad);
	const char *s;
	size_t n;

	if (!v)
		return !bad;
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n > max || strlen(s) != n || (!any_byte && !printable(s))) {
		seterr(err, errlen, "%s%s must be at most %zu %s", where, k, max,
		       any_byte ? "bytes, none of them NUL" : "printable ASCII characters");
		return false;
	}
	memcpy(out, s, n + 1);
	return true;
}

static bool str_field(json_object *o, const char *k, size_t max, bool required, const char *where, char *out,
		      char *err, size_t errlen)
{
	return str_field_ex(o, k, max, required, false, where, out, err, errlen);
}

static bool int_field(json_object *o, const char *k, int64_t min, int64_t max, const char *where, int64_t *out,
		      char *err, size_t errlen)
{
	bool bad = false;
	json_object *v = field(o, k, json_type_int, true, where, err, errlen, &bad);

	if (!v)
		return false;
	errno = 0;
	*out = json_object_get_int64(v);
	if (errno || *out < min || *out > max) {
		seterr(err, errlen, "%s%s must be %" PRId64 "-%" PRId64, where, k, min, max);
		return false;
	}
	return true;
}

static bool parse_key(const char *s, uint64_t *key)
{
	size_t n = strlen(s);
	char *end;

	if (n < 3 || n > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !all_hex(s + 2, n - 2))
		return false;
	*key = strtoull(s + 2, &end, 16);
	return *end == 0 && *key != 0;
}

static bool same_nexus(const struct pr_state_reg *a, const struct pr_state_reg *b)
{
	return strcasecmp(a->iport, b->iport) == 0 &&
	       (a->all_tg_pt || b->all_tg_pt || strcasecmp(a->tport, b->tport) == 0);
}

static bool parse_reg(json_object *o, unsigned i, struct pr_state_reg *r, char *err, size_t errlen)
{
	char where[48], key[32];
	int64_t rtpi;
	bool bad = false, has_isid;
	size_t nl;
	json_object *atp;

	snprintf(where, sizeof(where), "registrations[%u].", i);
	if (!json_object_is_type(o, json_type_object)) {
		seterr(err, errlen, "registrations[%u] must be an object", i);
		return false;
	}
	if (!str_field(o, "key", sizeof(key) - 1, true, where, key, err, errlen))
		return false;
	if (!parse_key(key, &r->key)) {
		seterr(err, errlen, "%skey must be \"0x\" and 1-16 hex digits, not zero", where);
		return false;
	}
	if (!str_field_ex(o, "initiator", 255, true, true, where, r->iport, err, errlen) ||
	    !str_field_ex(o, "target_port", 255, true, true, where, r->tport, err, errlen) ||
	    !int_field(o, "relative_port", 0, 65535, where, &rtpi, err, errlen))
		return false;
	if (!pr_state_valid_iport(r->iport, &has_isid, &nl)) {
		seterr(err, errlen, "%sinitiator must be an iSCSI name (at most 223 bytes), optionally followed "
			       "by \",i,0x\" and a 12-digit ISID", where);
		return false;
	}
	if (!r->tport[0]) {
		seterr(err, errlen, "%starget_port is empty", where);
		return false;
	}
	r->rtpi = (uint16_t)rtpi;
	atp = field(o, "all_target_ports", json_type_boolean, true, where, err, errlen, &bad);
	if (!atp)
		return false;
	r->all_tg_pt = json_object_get_boolean(atp);
	return true;
}

static int parse_root(json_object *root, struct pr_state *st, char *err, size_t errlen)
{
	char fmt[16];
	int64_t v;
	bool bad = false;
	json_object *regs, *res, *ap;
	size_t n;

	if (!json_object_is_type(root, json_type_object)) {
		seterr(err, errlen, "the document must be a JSON object");
		return -EINVAL;
	}
	if (!str_field(root, "format", sizeof(fmt) - 1, true, "", fmt, err, errlen))
		return -EINVAL;
	if (strcmp(fmt, PR_STATE_FORMAT)) {
		seterr(err, errlen, "format must be \"" PR_STATE_FORMAT "\", got \"%s\"", fmt);
		return -EINVAL;
	}
	if (!int_field(root, "version", 0, INT32_MAX, "", &v, err, errlen))
		return -EINVAL;
	if (v != PR_STATE_VERSION) {
		seterr(err, errlen, "version %" PRId64 " is not known (this isertd writes %d)", v, PR_STATE_VERSION);
		return -EINVAL;
	}
	if (!str_field(root, "serial", sizeof(st->serial) - 1, true, "", st->serial, err, errlen) ||
	    !str_field(root, "naa", sizeof(st->naa) - 1, true, "", st->naa, err, errlen) ||
	    !str_field(root, "backstore", sizeof(st->backstore) - 1, false, "", st->backstore, err, errlen) ||
	    !int_field(root, "generation", 0, UINT32_MAX, "", &v, err, errlen))
		return -EINVAL;
	st->generation = (uint32_t)v;
	if (!all_hex(st->naa, 32)) {
		seterr(err, errlen, "naa must be 32 hex digits");
		return -EINVAL;
	}
	ap = field(root, "aptpl", json_type_boolean, true, "", err, errlen, &bad);
	if (!ap)
		return -EINVAL;
	st->aptpl = json_object_get_boolean(ap);
	regs = field(root, "registrations", json_type_array, true, "", err, errlen, &bad);
	if (!regs)
		return -EINVAL;
	n = json_object_array_length(regs);
	if (n > PR_STATE_MAX_REGS) {
		seterr(err, errlen, "registrations holds %zu entries, at most %d are allowed", n, PR_STATE_MAX_REGS);
		return -EINVAL;
	}
	st->regs = n ? calloc(n, sizeof(*st->regs)) : NULL;
	if (n && !st->regs) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		if (!parse_reg(json_object_array_get_idx(regs, i), (unsigned)i, &st->regs[i], err, errlen))
			return -EINVAL;
		for (size_t j = 0; j < i; j++)
			if (same_nexus(&st->regs[i], &st->regs[j])) {
				seterr(err, errlen, "registrations[%zu] names the I_T nexus of registrations[%zu] again",
				       i, j);
				return -EINVAL;
			}
		st->nregs = (unsigned)i + 1;
	}
	st->holder = -1;
	res = field(root, "spc2_reservation", json_type_object, false, "", err, errlen, &bad);
	if (bad)
		return -EINVAL;
	if (res) {
		bool has_isid;
		size_t nl;
		if (!str_field_ex(res, "initiator", 255, true, true, "spc2_reservation.", st->res2_iport, err, errlen) ||
		    !str_field_ex(res, "target_port", 255, true, true, "spc2_reservation.", st->res2_tport, err,
				  errlen))
			return -EINVAL;
		if (!pr_state_valid_iport(st->res2_iport, &has_isid, &nl) || !has_isid || !st->res2_tport[0]) {
			seterr(err, errlen, "spc2_reservation must name an initiator port (\",i,0x\" and an ISID) and a "
				       "target port");
			return -EINVAL;
		}
		st->res2 = true;
	}
	res = field(root, "reservation", json_type_object, false, "", err, errlen, &bad);
	if (bad)
		return -EINVAL;
	if (!res)
		return 0;
	if (!int_field(res, "type", 0, 15, "reservation.", &v, err, errlen))
		return -EINVAL;
	st->type = (uint8_t)v;
	if (v != 1 && v != 3 && v != 5 && v != 6 && v != 7 && v != 8) {
		seterr(err, errlen, "reservation.type %" PRId64 " is not a persistent reservation type", v);
		return -EINVAL;
	}
	/* All-registrants types (7, 8) have no single holder; the others must name one registration. */
	if (v == 7 || v == 8) {
		if (json_object_object_get_ex(res, "holder", NULL)) {
			seterr(err, errlen, "reservation.holder must be absent for type %" PRId64, v);
			return -EINVAL;
		}
		if (!st->nregs) {
			seterr(err, errlen, "reservation of type %" PRId64 " without registrations", v);
			return -EINVAL;
		}
	} else {
		if (!st->nregs || !int_field(res, "holder", 0, (int64_t)st->nregs - 1, "reservation.", &v, err,
					     errlen)) {
			if (!st->nregs)
				seterr(err, errlen, "reservation.holder names no registration");
			return -EINVAL;
		}
		st->holder = (int)v;
	}
	st->reserved = true;
	return 0;
}

int pr_state_parse(const char *text, size_t len, struct pr_state *st, char *err, size_t errlen)
{
	json_tokener *tok;
	json_object *root;
	enum json_tokener_error e;
	int rc;

	memset(st, 0, sizeof(*st));
	st->holder = -1;
	if (len > PR_STATE_MAX_BYTES) {
		seterr(err, errlen, "%zu bytes, at most %u are allowed", len, PR_STATE_MAX_BYTES);
		return -EINVAL;
	}
	if (memchr(text, 0, len)) {
		seterr(err, errlen, "a NUL byte at offset %zu", (size_t)((const char *)memchr(text, 0, len) - text));
		return -EINVAL;
	}
	/* Depth 4 is all the format needs (root, registrations, one registration); 8 is plenty. */
	tok = json_tokener_new_ex(8);
	if (!tok) {
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	root = json_tokener_parse_ex(tok, text, (int)len);
	e = json_tokener_get_error(tok);
	if (!root || e != json_tokener_success) {
		seterr(err, errlen, "not valid JSON: %s at offset %zu",
		       e == json_tokener_continue ? "the text ends early" : json_tokener_error_desc(e),
		       json_tokener_get_parse_end(tok));
		json_object_put(root);
		json_tokener_free(tok);
		return -EINVAL;
	}
	for (size_t i = json_tokener_get_parse_end(tok); i < len; i++)
		if (!strchr(" \t\r\n", text[i])) {
			seterr(err, errlen, "text after the JSON document at offset %zu", i);
			json_object_put(root);
			json_tokener_free(tok);
			return -EINVAL;
		}
	json_tokener_free(tok);
	rc = parse_root(root, st, err, errlen);
	json_object_put(root);
	if (rc)
		pr_state_clear(st);
	return rc;
}

void pr_state_clear(struct pr_state *st)
{
	free(st->regs);
	memset(st, 0, sizeof(*st));
	st->holder = -1;
}

/* ---- the file ---- */

int pr_state_read(const char *path, struct pr_state *st, char *err, size_t errlen)
{
	/* O_NONBLOCK: a FIFO in the file's place must not hang the start. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat sb;
	char *text;
	size_t got = 0;
	int rc;

	memset(st, 0, sizeof(*st));
	st->holder = -1;
	if (fd < 0) {
		rc = -errno;
		seterr(err, errlen, "cannot open: %s", strerror(errno));
		return rc;
	}
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
		/* Not damaged content: something else has the name; it is left alone. */
		seterr(err, errlen, "not a regular file");
		close(fd);
		return -EPERM;
	}
	if (sb.st_size > PR_STATE_MAX_BYTES) {
		seterr(err, errlen, "%lld bytes, at most %u are allowed", (long long)sb.st_size, PR_STATE_MAX_BYTES);
		close(fd);
		return -EINVAL;
	}
	/* One byte more than fstat said, so a file that grew since is caught. */
	size_t cap = (size_t)sb.st_size + 1;

	text = malloc(cap);
	if (!text) {
		close(fd);
		seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, text + got, cap - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			seterr(err, errlen, "cannot read: %s", strerror(errno));
			free(text);
			close(fd);
			return rc;
		}
		if (n == 0)
			break;
		if ((got += (size_t)n) == cap) {
			seterr(err, errlen, "the file grew while it was read");
			free(text);
			close(fd);
			return -EIO;
		}
	}
	close(fd);
	rc = pr_state_parse(text, got, st, err, errlen);
	free(text);
	return rc;
}

static int split_dir(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 1;

	if (n >= cap)
		return -ENAMETOOLONG;
	if (!slash)
		memcpy(dir, ".", 2);
	else if (n == 0)
		memcpy(dir, "/", 2);
	else {
		memcpy(dir, path, n);
		dir[n] = 0;
	}
	return 0;
}

static int sync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd))
		rc = -errno;
	close(fd);
	return rc;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int pr_state_write(const char *path, const char *text, char *err, size_t errlen)
{
	char dir[PATH_MAX], tmp[PATH_MAX];
	int fd, rc;

	if (split_dir(path, dir, sizeof(dir)) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		seterr(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 && errno == ENOENT && mkdir(dir, 0700) == 0) {
		/* The folder is new: its own entry in the parent must be durable too. */
		char parent[PATH_MAX];

		if (split_dir(dir, parent, sizeof(parent)) == 0)
			sync_dir(parent);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	}
	if (fd < 0) {
		rc = -errno;
		seterr(err, errlen, "cannot create %s: %s", tmp, strerror(errno));
		return rc;
	}
	rc = write_all(fd, text, strlen(text));
	if (!rc && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (rc) {
		seterr(err, errlen, "cannot write %s: %s", tmp, strerror(-rc));
		unlink(tmp);
		return rc;
	}
	if (rename(tmp, path)) {
		rc = -errno;
		seterr(err, errlen, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
		unlink(tmp);
		return rc;
	}
	rc = sync_dir(dir);
	if (rc)
		seterr(err, errlen, "cannot fsync the folder %s: %s", dir, strerror(-rc));
	return rc;
}

int pr_state_remove(const char *path, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	int rc;

	if (split_dir(path, dir, sizeof(dir))) {
		seterr(err, errlen, "path too long");
		return -ENAMETOOLONG;
	}
	if (unlink(path) && errno != ENOENT) {
		rc = -errno;
		seterr(err, errlen, "cannot remove: %s", strerror(errno));
		return rc;
	}
	rc = sync_dir(dir);
	if (rc == -ENOENT)
		return 0; /* no folder, no file */
	if (rc)
		seterr(err, errlen, "cannot fsync the folder %s: %s", dir, strerror(-rc));
	return rc;
}
