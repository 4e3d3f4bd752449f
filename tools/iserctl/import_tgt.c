/*
 * iserctl import tgt: tgt's targets.conf (the Config::General file that
 * tgt-admin reads) as an isertd configuration.  Items are named FILE:LINE KEY.
 * What tgt-admin does is followed: LUNs numbered from 1 (tgt's LUN 0 is its
 * controller), backing-stores before direct-stores, each sorted by path, an
 * explicit `lun` kept; target-level LUN keys apply to every LUN that does not
 * set its own; blocks of one target name merged; write-cache on unless off;
 * no initiator-address and no initiator-name: every initiator admitted.
 * Access is never widened: what isertd cannot check (initiator addresses, a
 * CHAP secret it refuses) leaves the target admitting no initiator instead.
 * An included file is named, its text never shown (struct src): include
 * takes any file, and iserctl import runs as root.  Every item is found by
 * a lookup, not a scan of those before it: work is linear in the input.
 * What it builds is bounded by isertd's loader (import.h): each
 * initiator-name is an ACL mapping every LUN of its target, with its CHAP
 * user, so the ACLs (names x LUNs mapped LUNs) are counted in bytes of the
 * document as written before each is added.
 */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/proto/iscsi_name.h"
#include "import.h"
#include "iserctl.h"

#define LINE_MAX_BYTES 4096   /* one line, continuation lines joined */
#define INCLUDE_DEPTH  8      /* include within include ...: deeper is a loop */
#define INCLUDE_FILES  256    /* files read in all */

/* Keys a LUN takes (in its block, or for every LUN at target level). */
static const char *const lun_keys[] = {
	"lun", "scsi_sn", "write-cache", "readonly", "online", "device-type", "bs-type", "bsopts", "block-size",
	"allow-in-use", NULL,
};
#define LUN_KEYS (sizeof(lun_keys) / sizeof(lun_keys[0]) - 1)

/*
 * Where a line is, and whether its file was included.  tgt-admin's include
 * takes any file, and iserctl import runs as root: `include /etc/shadow`
 * once printed its lines as items not carried.  So an included file's line
 * is named by file and line only, in a message about it (tell) or about
 * another line (text_of); the main file's lines are the admin's own and
 * are shown.
 */
struct src {
	char where[160];        /* FILE:LINE */
	bool included;
};

struct kv {
	char *key, *val;
	struct src at;
};
struct kvs {
	struct kv *v;
	size_t n;
};
struct store {
	char *path;
	bool direct;
	struct kvs kv;
	struct src at;
};
struct target {
	char *iqn;
	struct kvs kv;
	struct store *st;
	size_t nst;
	json_object *stores;    /* "b PATH" or "d PATH" (direct) -> index in st; NULL once st is sorted */
	struct kv *lun_dflt[LUN_KEYS + 1]; /* the target-level value of each of lun_keys, or NULL (the last: none) */
	struct src at;
};

struct tgt {
	struct import *im;
	struct kvs global;
	struct target *t;
	size_t nt;
	json_object *iqns;      /* target name -> index in t */
	json_object *paths;     /* "path PATH" or "rbd POOL/IMAGE" -> its backstore */
	json_object *serials;   /* serials given to backstores */
	struct target *cur;     /* inside <target> */
	struct store *curst;    /* inside <backing-store>/<direct-store> */
	size_t used, files;     /* bytes and files read */
	size_t acl_bytes;       /* the ACLs' bytes in the document as written: at most IMPORT_MAX_DOC */
	bool bad;
};

enum tell_how { DROP, NOTE, FAIL };

/* A message about the line at: imp_drop, imp_note or imp_fail; of a line of an included file, its place alone. */
static void tell(struct tgt *g, enum tell_how how, const struct src *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void tell(struct tgt *g, enum tell_how how, const struct src *at, const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (!at->included && vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	const char *m = !at->included ? msg ? msg : "(out of memory)"
			: how == FAIL ? "a line of an included file that tgt-admin would not read (not shown)"
				      : "a line of an included file (not shown)";
	if (how == DROP)
		imp_drop(g->im, at->where, "%s", m);
	else if (how == NOTE)
		imp_note(g->im, at->where, "%s", m);
	else
		imp_fail(at->where, "%s", m);
	free(msg);
}

/* Text read at `at`, as a message may show it: an included file's as its place. */
static const char *text_of(const struct src *at, const char *s)
{
	static char ring[4][sizeof(at->where) + 2];
	static unsigned next;
	if (!at->included)
		return imp_shown(s);
	char *b = ring[next++ % 4];
	snprintf(b, sizeof(ring[0]), "(%s)", at->where);
	return b;
}

/* Room for element n of an array that grows by doubling (a realloc of one more element each time may copy them all). */
static void *grow(void *p, size_t n, size_t size)
{
	return n & (n - 1) ? p : realloc(p, (n ? 2 * n : 1) * size);
}

static void add_kv(struct kvs *k, const char *key, const char *val, const struct src *at)
{
	k->v = grow(k->v, k->n, sizeof(*k->v));
	struct kv *e = &k->v[k->n++];
	e->key = strdup(key);
	e->val = strdup(val);
	e->at = *at;
}

static void free_kvs(struct kvs *k)
{
	for (size_t i = 0; i < k->n; i++) {
		free(k->v[i].key);
		free(k->v[i].val);
	}
	free(k->v);
}

/* The last value of key in k (Config::General keeps them all; tgt-admin takes one), or NULL. */
static struct kv *find(struct kvs *k, const char *key)
{
	for (size_t i = k->n; i-- > 0;)
		if (!strcmp(k->v[i].key, key))
			return &k->v[i];
	return NULL;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = 0;
	/* Config::General takes "quoted values" without their quotes. */
	if (n >= 2 && s[0] == '"' && s[n - 1] == '"') {
		s[n - 1] = 0;
		s++;
	}
	return s;
}

static int parse_file(struct tgt *g, const char *path, int depth);

/* include PATTERN: a glob, or a folder (every file in it), relative names from the including file's folder. */
static void include(struct tgt *g, const char *pat, const char *from, const struct src *at, int depth)
{
	char full[4096];
	const char *slash = strrchr(from, '/');
	if (pat[0] != '/' && slash)
		snprintf(full, sizeof(full), "%.*s/%s", (int)(slash - from), from, pat);
	else
		snprintf(full, sizeof(full), "%s", pat);
	struct stat st;
	if (!stat(full, &st) && S_ISDIR(st.st_mode) && strlen(full) + 3 < sizeof(full))
		strcat(full, "/*");
	glob_t gl;
	int r = glob(full, 0, NULL, &gl);
	if (r == GLOB_NOMATCH && !strpbrk(pat, "*?[")) {
		tell(g, DROP, at, "include %s: no such file: nothing included", text_of(at, pat));
	} else if (r == 0) {
		for (size_t i = 0; i < gl.gl_pathc && !g->bad; i++)
			if (!stat(gl.gl_pathv[i], &st) && S_ISREG(st.st_mode))
				parse_file(g, gl.gl_pathv[i], depth + 1);
	}
	globfree(&gl);
}

static struct target *target_named(struct tgt *g, const char *iqn, const struct src *at)
{
	/* tgt-admin merges blocks of one name (-MergeDuplicateBlocks). */
	json_object *i = get(g->iqns, iqn);
	if (i)
		return &g->t[json_object_get_int64(i)];
	json_object_object_add(g->iqns, iqn, json_object_new_int64((int64_t)g->nt));
	g->t = grow(g->t, g->nt, sizeof(*g->t));
	struct target *t = &g->t[g->nt++];
	memset(t, 0, sizeof(*t));
	t->iqn = strdup(iqn);
	t->stores = json_object_new_object();
	t->at = *at;
	return t;
}

static struct store *store_named(struct target *t, const char *path, bool direct, const struct src *at)
{
	char *key;
	if (asprintf(&key, "%c %s", direct ? 'd' : 'b', path) < 0)
		return NULL;
	json_object *i = get(t->stores, key);
	if (!i)
		json_object_object_add(t->stores, key, json_object_new_int64((int64_t)t->nst));
	free(key);
	if (i)
		return &t->st[json_object_get_int64(i)];
	t->st = grow(t->st, t->nst, sizeof(*t->st));
	struct store *s = &t->st[t->nst++];
	memset(s, 0, sizeof(*s));
	s->path = strdup(path);
	s->direct = direct;
	s->at = *at;
	return s;
}

static void line(struct tgt *g, char *s, const char *file, const struct src *at, int depth)
{
	/* A # starts a comment unless escaped (Config::General). */
	for (char *c = s; *c; c++) {
		if (*c == '\\' && c[1] == '#') {
			memmove(c, c + 1, strlen(c));
		} else if (*c == '#') {
			*c = 0;
			break;
		}
	}
	s = trim(s);
	if (!*s)
		return;
	if (s[0] == '<' && s[1] == '<') {
		/* <<include FILE>> is Config::General's own include; here-documents are not. */
		size_t n = strlen(s);
		if (!strncasecmp(s, "<<include", 9) && n > 11 && s[n - 1] == '>' && s[n - 2] == '>') {
			s[n - 2] = 0;
			include(g, trim(s + 9), file, at, depth);
			return;
		}
		tell(g, FAIL, at, "%s: here-documents are not read", text_of(at, s));
		g->bad = true;
		return;
	}
	if (s[0] == '<') {
		size_t n = strlen(s);
		if (s[n - 1] != '>') {
			tell(g, FAIL, at, "%s: a block line must end with >", text_of(at, s));
			g->bad = true;
			return;
		}
		s[n - 1] = 0;
		if (s[1] == '/') {
			char *name = trim(s + 2);
			if (g->curst && (!strcasecmp(name, "backing-store") || !strcasecmp(name, "direct-store"))) {
				g->curst = NULL;
			} else if (g->cur && !g->curst && !strcasecmp(name, "target")) {
				g->cur = NULL;
			} else {
				tell(g, FAIL, at, "</%s> closes no open block", text_of(at, name));
				g->bad = true;
			}
			return;
		}
		char *name = s + 1, *arg = name;
		while (*arg && !isspace((unsigned char)*arg))
			arg++;
		if (*arg)
			*arg++ = 0;
		arg = trim(arg);
		if (!strcasecmp(name, "target") && !g->cur && *arg) {
			g->cur = target_named(g, arg, at);
		} else if (g->cur && !g->curst && *arg &&
			   (!strcasecmp(name, "backing-store") || !strcasecmp(name, "direct-store"))) {
			g->curst = store_named(g->cur, arg, !strcasecmp(name, "direct-store"), at);
		} else {
			tell(g, FAIL, at, "<%s%s%s>: %s", text_of(at, name), *arg ? " " : "", *arg ? text_of(at, arg) : "",
				 !*arg ? "a block needs a name" : g->cur ? "not a block tgt-admin reads inside <target>" : "tgt-admin reads only <target> blocks here");
			g->bad = true;
		}
		return;
	}
	/* key value, or key = value. */
	char *v = s;
	while (*v && !isspace((unsigned char)*v) && *v != '=')
		v++;
	if (*v)
		*v++ = 0;
	v = trim(v);
	if (*v == '=')
		v = trim(v + 1);
	if (!strcasecmp(s, "include")) {
		include(g, v, file, at, depth);
		return;
	}
	add_kv(g->curst ? &g->curst->kv : g->cur ? &g->cur->kv : &g->global, s, v, at);
}

static int parse_file(struct tgt *g, const char *path, int depth)
{
	if (depth > INCLUDE_DEPTH || g->files >= INCLUDE_FILES) {
		imp_fail(path, "%s: refused (an include loop?)",
			 depth > INCLUDE_DEPTH ? "included more than 8 levels deep" : "more than 256 files included");
		g->bad = true;
		return EX_REFUSED;
	}
	g->files++;
	size_t len;
	char *text = imp_read(path, &len, &g->used);
	if (!text) {
		g->bad = true;
		return EX_REFUSED;
	}
	if (memchr(text, 0, len) || !imp_text(path, text, len, depth > 0)) {
		if (memchr(text, 0, len))
			imp_fail(path, "contains a NUL byte: not a targets.conf");
		g->bad = true;
		free(text);
		return EX_REFUSED;
	}
	char buf[LINE_MAX_BYTES + 1];
	struct src at = { .included = depth > 0 };
	size_t have = 0;
	unsigned lineno = 0, first = 0;
	for (char *p = text; *p && !g->bad;) {
		char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char *next = nl ? nl + 1 : p + n; /* before the CR is cut: a last line of just "\r" ends the text */
		lineno++;
		if (!have)
			first = lineno;
		if (n && p[n - 1] == '\r')
			n--;
		if (have + n > LINE_MAX_BYTES) {
			snprintf(at.where, sizeof(at.where), "%s:%u", path, lineno);
			imp_fail(at.where, "line longer than %d bytes: refused", LINE_MAX_BYTES);
			g->bad = true;
			break;
		}
		memcpy(buf + have, p, n);
		have += n;
		buf[have] = 0;
		p = next;
		/* A line ending in a backslash goes on on the next one. */
		if (have && buf[have - 1] == '\\' && (nl || *p)) {
			buf[--have] = 0;
			continue;
		}
		snprintf(at.where, sizeof(at.where), "%s:%u", path, first);
		line(g, buf, path, &at, depth);
		have = 0;
	}
	free(text);
	return g->bad ? EX_REFUSED : 0;
}

/* ---- the configuration ------------------------------------------------------ */

/* Keys a LUN may have that isertd has no setting for (lun_keys: those it reads). */
static const char *const lun_dropped[] = {
	"vendor_id", "product_id", "product_rev", "scsi_id", "removable", "sense_format", "mode_page", "params",
	"lbppbe", "la_lba", "optimal_xfer_gran", "optimal_xfer_len", "path", "bsoflags", NULL,
};
static const char *const target_params[] = {
	"MaxRecvDataSegmentLength", "HeaderDigest", "DataDigest", "InitialR2T", "MaxOutstandingR2T", "ImmediateData",
	"FirstBurstLength", "MaxBurstLength", "DefaultTime2Wait", "DefaultTime2Retain", "MaxConnections", NULL,
};
static const char *const target_params_dropped[] = {
	"MaxXmitDataSegmentLength", "DataPDUInOrder", "DataSequenceInOrder", "ErrorRecoveryLevel", "IFMarker", "OFMarker",
	"OFMarkInt", "IFMarkInt", "state", NULL,
};

static bool listed(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return true;
	return false;
}

/* The LUN's value of key (one of lun_keys): its own, else the target's (tgt-admin's "global" LUN parameters). */
static struct kv *lun_opt(struct target *t, struct store *s, const char *key)
{
	struct kv *v = find(&s->kv, key);
	size_t i = 0;
	while (!v && lun_keys[i] && strcmp(lun_keys[i], key))
		i++;
	return v ? v : t->lun_dflt[i];
}

static bool truthy(const char *v)
{
	return !strcasecmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") || !strcasecmp(v, "true");
}

static int cmp_store(const void *a, const void *b)
{
	const struct store *x = a, *y = b;
	if (x->direct != y->direct)
		return x->direct ? 1 : -1;
	return strcmp(x->path, y->path);
}

/* The backstore for store s of target t (one per path, shared by the targets that list it), or NULL (g->bad: the
 * import is refused). */
static const char *backstore(struct tgt *g, struct target *t, struct store *s)
{
	struct import *im = g->im;
	struct kv *bst = lun_opt(t, s, "bs-type"), *dt = lun_opt(t, s, "device-type");
	const char *bs = bst ? bst->val : "rdwr";
	if (dt && strcmp(dt->val, "disk")) {
		tell(g, DROP, &dt->at, "device-type %s: isertd serves disks only; LUN %s not carried", text_of(&dt->at, dt->val),
		     text_of(&s->at, s->path));
		return NULL;
	}
	bool rbd = !strcmp(bs, "rbd");
	if (strcmp(bs, "rdwr") && strcmp(bs, "aio") && !rbd) {
		tell(g, DROP, &bst->at, "bs-type %s has no isertd backstore (rdwr, aio and rbd do); LUN %s not carried",
		     text_of(&bst->at, bs), text_of(&s->at, s->path));
		return NULL;
	}
	char rbd_pool[256] = "rbd", rbd_image[256];
	if (rbd) {
		/* tgt's rbd path: [pool/]image[@snapshot]. */
		const char *slash = strchr(s->path, '/');
		if (strchr(s->path, '@') || strlen(s->path) >= sizeof(rbd_image) || (slash && strchr(slash + 1, '/'))) {
			tell(g, DROP, &s->at, "rbd %s: a snapshot or a name isertd does not take; LUN not carried",
			     text_of(&s->at, s->path));
			return NULL;
		}
		if (slash)
			snprintf(rbd_pool, sizeof(rbd_pool), "%.*s", (int)(slash - s->path), s->path);
		snprintf(rbd_image, sizeof(rbd_image), "%s", slash ? slash + 1 : s->path);
	} else if (s->path[0] != '/') {
		tell(g, DROP, &s->at, "%s: not an absolute path; LUN not carried", text_of(&s->at, s->path));
		return NULL;
	}
	/* One backstore per path: isertd refuses two on one path, tgt lets targets share a device. */
	char *key;
	if ((rbd ? asprintf(&key, "rbd %s/%s", rbd_pool, rbd_image) : asprintf(&key, "path %s", s->path)) < 0)
		return NULL;
	json_object *b = get(g->paths, key);
	if (b) {
		free(key);
		/* Settings of a later LUN on the same store that differ from the first's are not carried. */
		struct kv *wc = lun_opt(t, s, "write-cache"), *sn = lun_opt(t, s, "scsi_sn");
		bool wce = !wc || strcasecmp(wc->val, "off");
		const char *have = json_object_get_string(get(b, "serial"));
		if (wce != json_object_get_boolean(get(b, "write_cache")))
			tell(g, DROP, wc ? &wc->at : &s->at, "write-cache of %s: the backstore is shared with an earlier LUN, "
			     "whose setting (%s) it keeps", text_of(&s->at, s->path), wce ? "off" : "on");
		if (sn && (!have || strcmp(have, sn->val)))
			tell(g, DROP, &sn->at, "scsi_sn %s of %s: the backstore is shared with an earlier LUN, whose serial it keeps",
			     text_of(&sn->at, sn->val), text_of(&s->at, s->path));
		return json_object_get_string(get(b, "name"));
	}
	if (json_object_array_length(im->backstores) == IMPORT_MAX_BACKSTORES) {
		free(key);
		imp_fail(s->at.where, "%s: the %uth backstore: isertd takes at most %u: refused", text_of(&s->at, s->path),
			 IMPORT_MAX_BACKSTORES + 1, IMPORT_MAX_BACKSTORES);
		g->bad = true;
		return NULL;
	}
	const char *base = rbd ? rbd_image : strrchr(s->path, '/') + 1;
	char *name = imp_backstore_name(im, base);
	b = json_object_new_object();
	json_object_object_add(g->paths, key, json_object_get(b));
	free(key);
	json_object_object_add(b, "name", json_object_new_string(name));
	free(name);
	if (rbd) {
		json_object_object_add(b, "type", json_object_new_string("rbd"));
		json_object_object_add(b, "pool", json_object_new_string(rbd_pool));
		json_object_object_add(b, "image", json_object_new_string(rbd_image));
	} else {
		/* tgt's rdwr serves files and devices alike: which one this is, the path says here. */
		struct stat st;
		bool blk = !stat(s->path, &st) ? S_ISBLK(st.st_mode) : !strncmp(s->path, "/dev/", 5);
		if (stat(s->path, &st))
			tell(g, NOTE, &s->at, "%s does not exist here: taken as a %s", text_of(&s->at, s->path),
			     blk ? "block device" : "file");
		json_object_object_add(b, "type", json_object_new_string(blk ? "block" : "file"));
		json_object_object_add(b, "path", json_object_new_string(s->path));
	}
	struct kv *wc = lun_opt(t, s, "write-cache");
	/* tgtd reports a write cache unless write-cache off. */
	json_object_object_add(b, "write_cache", json_object_new_boolean(!wc || strcasecmp(wc->val, "off")));
	struct kv *bsz = lun_opt(t, s, "block-size");
	if (bsz) {
		long n = strtol(bsz->val, NULL, 10);
		if (n == 512 || n == 1024 || n == 2048 || n == 4096)
			json_object_object_add(b, "block_size", json_object_new_int64(n));
		else
			tell(g, DROP, &bsz->at, "block-size %s: isertd takes 512, 1024, 2048 or 4096", text_of(&bsz->at, bsz->val));
	}
	struct kv *sn = lun_opt(t, s, "scsi_sn");
	if (sn) {
		bool ok = *sn->val && strlen(sn->val) <= 64;
		for (const char *c = sn->val; ok && *c; c++)
			ok = *c > ' ' && *c < 127;
		if (!ok)
			tell(g, DROP, &sn->at, "scsi_sn %s: isertd's serial is 1-64 printable characters without spaces",
			     text_of(&sn->at, sn->val));
		else if (get(g->serials, sn->val))
			tell(g, DROP, &sn->at, "scsi_sn %s for %s: another LUN has it already (isertd's serials are unique)",
			     text_of(&sn->at, sn->val), text_of(&s->at, s->path));
		else {
			json_object_object_add(b, "serial", json_object_new_string(sn->val));
			json_object_object_add(g->serials, sn->val, json_object_new_boolean(true));
		}
	}
	struct kv *bo = lun_opt(t, s, "bsopts");
	if (bo && rbd) {
		/* conf=FILE;id=USER as tgt's bs_rbd reads them. */
		char *opts = strdup(bo->val), *save = NULL;
		for (char *o = strtok_r(opts, ";", &save); o; o = strtok_r(NULL, ";", &save)) {
			if (!strncmp(o, "conf=", 5))
				json_object_object_add(b, "conf", json_object_new_string(o + 5));
			else if (!strncmp(o, "id=", 3))
				json_object_object_add(b, "client_id", json_object_new_string(o + 3));
			else
				tell(g, DROP, &bo->at, "bsopts %s: not an rbd option isertd takes", text_of(&bo->at, o));
		}
		free(opts);
	} else if (bo) {
		tell(g, DROP, &bo->at, "bsopts %s: no setting", text_of(&bo->at, bo->val));
	}
	json_object_array_add(im->backstores, b);
	return json_object_get_string(get(b, "name"));
}

/* An ACL of initiator with the target's CHAP user c (or none) and mapped LUNs ml, both shared by its ACLs. */
static json_object *acl_of(const char *initiator, json_object *c, json_object *ml)
{
	json_object *a = json_object_new_object();
	json_object_object_add(a, "initiator", json_object_new_string(initiator));
	if (c)
		json_object_object_add(a, "chap", json_object_get(c));
	json_object_object_add(a, "mapped_luns", json_object_get(ml));
	return a;
}

/* Bytes o takes in the document as written (IMPORT_JSON_FLAGS) where it is depth levels deep: its own text, each line
 * after the first indented 2 spaces a level more.  o keeps that text until it is freed. */
static size_t written_bytes(json_object *o, size_t depth)
{
	const char *s = json_object_to_json_string_ext(o, IMPORT_JSON_FLAGS);
	size_t n = strlen(s);
	for (const char *p = s; (p = strchr(p, '\n')); p++)
		n += 2 * depth;
	return n;
}

/* incominguser/outgoinguser of t as a chap object; *locked when credentials were given but none is usable. */
static json_object *chap(struct tgt *g, struct target *t, bool *locked)
{
	json_object *c = NULL;
	struct kv *user = NULL; /* c's line */
	bool any = false;
	const char *pw = NULL;
	for (size_t i = 0; i < t->kv.n; i++) {
		struct kv *k = &t->kv.v[i];
		if (strcmp(k->key, "incominguser"))
			continue;
		any = true;
		/* "USER SECRET": the secret is never shown. */
		char *sp = strchr(k->val, ' ');
		if (!sp) {
			tell(g, DROP, &k->at, "incominguser: expected USER SECRET");
			continue;
		}
		*sp = 0;
		char *secret = trim(sp + 1);
		if (c) {
			tell(g, DROP, &k->at, "incominguser %s: isertd takes one CHAP user per initiator (the first, %s)",
			     text_of(&k->at, k->val), text_of(&user->at, json_object_get_string(get(c, "userid"))));
		} else if (!imp_secret_ok(secret) || strlen(k->val) > 255) {
			tell(g, DROP, &k->at, "incominguser %s: the secret is not 12-255 characters (isertd's rule, docs/config.md)",
			     text_of(&k->at, k->val));
		} else {
			user = k;
			c = json_object_new_object();
			json_object_object_add(c, "userid", json_object_new_string(k->val));
			json_object_object_add(c, "password", json_object_new_string(secret));
			pw = json_object_get_string(get(c, "password"));
		}
		*sp = ' ';
	}
	*locked = any && !c;
	bool first = true;
	for (size_t i = 0; i < t->kv.n; i++) {
		struct kv *k = &t->kv.v[i];
		if (strcmp(k->key, "outgoinguser"))
			continue;
		char *sp = strchr(k->val, ' ');
		if (sp)
			*sp = 0;
		const char *secret = sp ? sp + 1 : "";
		while (*secret == ' ')
			secret++;
		if (!first)
			tell(g, DROP, &k->at, "outgoinguser %s: only one is used (tgt-admin too)", text_of(&k->at, k->val));
		else if (!sp)
			tell(g, DROP, &k->at, "outgoinguser: expected USER SECRET");
		else if (!c)
			tell(g, DROP, &k->at, "outgoinguser %s: mutual CHAP needs a usable incominguser", text_of(&k->at, k->val));
		else if (!imp_secret_ok(secret) || !strcmp(secret, pw) || strlen(k->val) > 255)
			tell(g, DROP, &k->at, "outgoinguser %s: the secret is not 12-255 characters or equals the initiator's",
			     text_of(&k->at, k->val));
		else {
			json_object_object_add(c, "mutual_userid", json_object_new_string(k->val));
			json_object_object_add(c, "mutual_password", json_object_new_string(secret));
		}
		if (sp)
			*sp = ' ';
		first = false;
	}
	return c;
}

/* The portal group's one portal, on every address: iSCSI, or iSER where the target's driver (or the default) says. */
static json_object *target_portals(struct tgt *g, struct target *t, struct kv *driver)
{
	struct kv *drv = find(&t->kv, "driver");
	if (!drv)
		drv = driver;
	const char *d = drv ? drv->val : "iscsi";
	if (strcmp(d, "iscsi") && strcmp(d, "iser"))
		tell(g, DROP, drv == driver ? &t->at : &drv->at, "driver %s: isertd serves iscsi and iser; taken as iscsi",
		     text_of(&drv->at, d));
	json_object *portal = json_object_new_object();
	json_object_object_add(portal, "ip", json_object_new_string("0.0.0.0"));
	json_object_object_add(portal, "port", json_object_new_int(3260));
	if (!strcmp(d, "iser"))
		json_object_object_add(portal, "iser", json_object_new_boolean(true));
	json_object *portals = json_object_new_array();
	json_object_array_add(portals, portal);
	return portals;
}

/*
 * Store s's LUN number as tgt-admin gives it: its own lun (or the target's,
 * for the first without one), else the lowest free from *free_n.  -1: not
 * carried (said).
 */
static long lun_number(struct tgt *g, struct store *s, struct kv *tlun, bool *used, long *free_n)
{
	struct kv *l = find(&s->kv, "lun");
	long n;
	/* A target-level lun numbers the first LUN without its own (tgt-admin: meant for one LUN). */
	if (!l && tlun) {
		long tn = strtol(tlun->val, NULL, 10);
		if (tn < 0 || tn > 16383 || !used[tn])
			l = tlun;
	}
	if (l) {
		char *end;
		n = strtol(l->val, &end, 10);
		if (*end || n < 1 || n > 16383) {
			tell(g, DROP, &l->at, "lun %s: isertd's LUNs are 0-16383 and tgt's LUN 0 is its controller; %s not "
			     "carried", text_of(&l->at, l->val), text_of(&s->at, s->path));
			return -1;
		}
		if (l == tlun && used[n]) {
			tell(g, DROP, &l->at, "lun %ld: taken by another LUN already; %s not carried", n,
			     text_of(&s->at, s->path));
			return -1;
		}
	} else {
		while (*free_n < 16384 && used[*free_n])
			(*free_n)++;
		if (*free_n == 16384) {
			tell(g, DROP, &s->at, "%s: no LUN number left (1-16383 are taken)", text_of(&s->at, s->path));
			return -1;
		}
		n = *free_n;
	}
	used[n] = true;
	return n;
}

/* Store s as LUN n of luns, its backstore made (what is not carried said).  -1: the import is refused. */
static int lun_add(struct tgt *g, struct target *t, struct store *s, long n, json_object *luns)
{
	for (size_t k = 0; k < s->kv.n; k++) {
		struct kv *e = &s->kv.v[k];
		if (listed(lun_dropped, e->key))
			tell(g, DROP, &e->at, "%s %s: no isertd setting (docs/config.md)", text_of(&e->at, e->key),
			     text_of(&e->at, e->val));
		else if (!listed(lun_keys, e->key))
			tell(g, DROP, &e->at, "%s: not a key tgt-admin reads in a %s block", text_of(&e->at, e->key),
			     s->direct ? "direct-store" : "backing-store");
	}
	const char *name = backstore(g, t, s);
	if (!name)
		return g->bad ? -1 : 0;
	if (s->direct)
		tell(g, DROP, &s->at, "direct-store %s: served as a block device; the INQUIRY vendor, product and "
		     "revision tgt-admin copies from it (sg_inq) are isertd's own", text_of(&s->at, s->path));
	struct kv *on = lun_opt(t, s, "online");
	if (on && !truthy(on->val))
		tell(g, DROP, &on->at, "online %s: isertd's LUNs are always online", text_of(&on->at, on->val));
	json_object *x = json_object_new_object();
	json_object_object_add(x, "lun", json_object_new_int64(n));
	json_object_object_add(x, "backstore", json_object_new_string(name));
	struct kv *ro = lun_opt(t, s, "readonly");
	if (ro && truthy(ro->val))
		json_object_object_add(x, "read_only", json_object_new_boolean(true));
	json_object_array_add(luns, x);
	return 0;
}

/* The target's stores as LUNs, numbered as tgt-admin does: explicit numbers reserved, the rest the lowest free from 1. */
static int target_luns(struct tgt *g, struct target *t, json_object *luns)
{
	json_object_put(t->stores); /* its indexes are the order of the lines */
	t->stores = NULL;
	if (t->nst) /* qsort takes no NULL, even for nothing */
		qsort(t->st, t->nst, sizeof(*t->st), cmp_store);
	bool used[16384] = { false };
	long free_n = 1; /* no LUN below it is free: numbers are only ever taken */
	for (size_t i = 0; i < t->nst; i++) {
		struct kv *l = find(&t->st[i].kv, "lun");
		long n = l ? strtol(l->val, NULL, 10) : -1;
		if (n >= 0 && n < 16384)
			used[n] = true;
	}
	struct kv *tlun = find(&t->kv, "lun");
	for (size_t i = 0; i < t->nst; i++) {
		long n = lun_number(g, &t->st[i], tlun, used, &free_n);
		if (n >= 0 && lun_add(g, t, &t->st[i], n, luns))
			return -1;
	}
	return 0;
}

/* Who a target admits, as its lines say. */
struct access {
	json_object *c, *ml;  /* the CHAP user and the mapped LUNs, each shared by the target's ACLs */
	json_object *acls;
	size_t bytes;         /* of an ACL of the target as written, but its initiator's name */
	bool by_addr, named, locked;
};

/* initiator-name k (a valid name) as an ACL mapping every LUN.  -1: past what isertd reads, the import refused. */
static int acl_add(struct tgt *g, struct target *t, struct kv *k, struct access *ac, json_object *luns)
{
	if (json_object_array_length(ac->acls) == IMPORT_MAX_ACLS) {
		imp_fail(k->at.where, "initiator-name %s: the %uth initiator of %s: isertd takes at most %u ACLs "
			 "in a portal group: refused", text_of(&k->at, k->val), IMPORT_MAX_ACLS + 1,
			 text_of(&t->at, t->iqn), IMPORT_MAX_ACLS);
		return -1;
	}
	if (!ac->ml) {
		/* Every ACL maps every LUN at its own number: one array, shared; each ACL's text is counted as
		 * it is added (names x LUNs mapped LUNs once grew iserctl by gigabytes from a small file). */
		ac->ml = json_object_new_array();
		for (size_t m = 0; m < json_object_array_length(luns); m++) {
			json_object *x = json_object_new_object();
			int64_t n = json_object_get_int64(get(json_object_array_get_idx(luns, m), "lun"));
			json_object_object_add(x, "mapped_lun", json_object_new_int64(n));
			json_object_object_add(x, "tpg_lun", json_object_new_int64(n));
			json_object_array_add(ac->ml, x);
		}
		/* ACLs are 6 levels deep (targets[].tpgs[].acls[]); an initiator's name takes its length more,
		 * as an iSCSI name holds nothing JSON escapes. */
		json_object *a = acl_of("", ac->c, ac->ml);
		ac->bytes = written_bytes(a, 6);
		json_object_put(a);
	}
	if (ac->bytes + strlen(k->val) > IMPORT_MAX_DOC - g->acl_bytes) {
		imp_fail(k->at.where, "initiator-name %s: with its ACL (mapping the %zu LUNs of %s, as each "
			 "initiator-name does) the ACLs pass %u MiB as written, the most isertd reads: refused",
			 text_of(&k->at, k->val), json_object_array_length(luns), text_of(&t->at, t->iqn),
			 IMPORT_MAX_DOC >> 20);
		return -1;
	}
	g->acl_bytes += ac->bytes + strlen(k->val);
	json_object_array_add(ac->acls, acl_of(k->val, ac->c, ac->ml));
	return 0;
}

/* A target-level iSCSI parameter k into params, or said not carried. */
static void target_param(struct tgt *g, struct kv *k, json_object *params)
{
	char *end;
	long long n = strtoll(k->val, &end, 10);
	if (!strcmp(k->key, "InitialR2T") || !strcmp(k->key, "ImmediateData")) {
		if (strcasecmp(k->val, "yes") && strcasecmp(k->val, "no"))
			tell(g, DROP, &k->at, "%s %s: expected Yes or No", text_of(&k->at, k->key),
			     text_of(&k->at, k->val));
		else
			json_object_object_add(params, k->key, json_object_new_boolean(!strcasecmp(k->val, "yes")));
	} else if (strstr(k->key, "Digest")) {
		if (strcmp(k->val, "None") && strcmp(k->val, "CRC32C,None") && strcmp(k->val, "None,CRC32C"))
			tell(g, DROP, &k->at, "%s %s: isertd offers None, CRC32C,None or None,CRC32C",
			     text_of(&k->at, k->key), text_of(&k->at, k->val));
		else
			json_object_object_add(params, k->key, json_object_new_string(k->val));
	} else if (!*k->val || *end || n < 0) {
		tell(g, DROP, &k->at, "%s %s: not a number", text_of(&k->at, k->key), text_of(&k->at, k->val));
	} else {
		json_object_object_add(params, k->key, json_object_new_int64(n));
	}
}

/*
 * The target's own lines: access (names become ACLs; addresses isertd
 * cannot check) and parameters; the rest said not carried.  -1: refused.
 */
static int target_keys(struct tgt *g, struct target *t, struct access *ac, json_object *luns, json_object *params)
{
	ac->c = chap(g, t, &ac->locked);
	for (size_t i = 0; i < t->kv.n; i++) {
		struct kv *k = &t->kv.v[i];
		if (!strcmp(k->key, "initiator-address")) {
			ac->by_addr = true;
			tell(g, DROP, &k->at, "initiator-address %s: isertd admits initiators by name (ACLs), not by address",
			     text_of(&k->at, k->val));
		} else if (!strcmp(k->key, "initiator-name") && !ac->locked && !iscsi_name_valid(k->val)) {
			ac->named = true;
			tell(g, DROP, &k->at, "initiator-name %s: not a valid iSCSI name: not carried", text_of(&k->at, k->val));
		} else if (!strcmp(k->key, "initiator-name") && !ac->locked) {
			ac->named = true;
			if (acl_add(g, t, k, ac, luns))
				return -1;
		} else if (listed(target_params, k->key)) {
			target_param(g, k, params);
		} else if (listed(target_params_dropped, k->key)) {
			tell(g, DROP, &k->at, "%s %s: no isertd setting", text_of(&k->at, k->key), text_of(&k->at, k->val));
		} else if (!strcmp(k->key, "backing-store") || !strcmp(k->key, "direct-store")) {
			/* read below (stores) */
		} else if (!strcmp(k->key, "controller_tid") || !strcmp(k->key, "driver") || !strcmp(k->key, "incominguser") ||
			   !strcmp(k->key, "outgoinguser") || !strcmp(k->key, "initiator-name") || listed(lun_keys, k->key)) {
			/* tgt's own numbering, or read above */
		} else if (listed(lun_dropped, k->key)) {
			tell(g, DROP, &k->at, "%s %s: no isertd setting (docs/config.md)", text_of(&k->at, k->key),
			     text_of(&k->at, k->val));
		} else {
			tell(g, DROP, &k->at, "%s: not a key tgt-admin reads in a <target> block", text_of(&k->at, k->key));
		}
	}
	return 0;
}

/* Whom the portal group admits when no ACL came of the lines: everyone (tgt-admin's ALL), or no one, said. */
static void target_admits(struct tgt *g, struct target *t, json_object *tpg, const struct access *ac)
{
	if (ac->locked) {
		tell(g, DROP, &t->at, "%s: no usable incominguser: the target is imported admitting no initiator",
		     text_of(&t->at, t->iqn));
	} else if (!json_object_array_length(ac->acls) && !ac->by_addr && !ac->named) {
		/* tgt-admin binds ALL when the target names no initiator. */
		json_object_object_add(tpg, "demo_mode", json_object_new_boolean(true));
		if (ac->c)
			json_object_object_add(tpg, "demo_chap", json_object_get(ac->c));
	} else if (ac->named && !json_object_array_length(ac->acls)) {
		tell(g, DROP, &t->at, "%s: none of its initiator names was carried: imported admitting no initiator",
		     text_of(&t->at, t->iqn));
	} else if (ac->by_addr && !json_object_array_length(ac->acls)) {
		tell(g, DROP, &t->at, "%s: admitted initiators by address only: imported admitting no initiator "
		     "(add ACLs: iserctl create /iscsi/IQN/tpg1/acls/INITIATOR)", text_of(&t->at, t->iqn));
	}
}

/* Target t; driver: the default-driver line, or NULL (iscsi).  g->bad: the import is refused. */
static void target(struct tgt *g, struct target *t, struct kv *driver)
{
	struct import *im = g->im;
	if (!iscsi_name_valid(t->iqn)) {
		tell(g, DROP, &t->at, "%s: not a valid iSCSI name (docs/config.md): the target is not carried",
		     text_of(&t->at, t->iqn));
		return;
	}
	if (json_object_array_length(im->targets) == IMPORT_MAX_TARGETS) {
		imp_fail(t->at.where, "%s: the %uth target: isertd takes at most %u: refused", text_of(&t->at, t->iqn),
			 IMPORT_MAX_TARGETS + 1, IMPORT_MAX_TARGETS);
		g->bad = true;
		return;
	}
	json_object *to = json_object_new_object(), *tpg = json_object_new_object(), *luns = json_object_new_array(),
		    *params = json_object_new_object(), *tpgs = json_object_new_array();
	struct access ac = { .acls = json_object_new_array() };
	json_object_object_add(to, "iqn", json_object_new_string(t->iqn));
	json_object_object_add(to, "tpgs", tpgs);
	json_object_array_add(tpgs, tpg);
	/* The target-level LUN keys, looked up once: each LUN's lookup in every line of the target was O(n^2). */
	for (size_t i = 0; i < t->kv.n; i++)
		for (size_t k = 0; k < LUN_KEYS; k++)
			if (!strcmp(t->kv.v[i].key, lun_keys[k]))
				t->lun_dflt[k] = &t->kv.v[i];
	json_object_object_add(tpg, "tag", json_object_new_int(1));
	json_object_object_add(tpg, "portals", target_portals(g, t, driver));
	json_object_object_add(tpg, "luns", luns);
	if (target_luns(g, t, luns) || target_keys(g, t, &ac, luns, params)) {
		g->bad = true;
		json_object_put(ac.c);
		json_object_put(ac.ml);
		json_object_put(ac.acls);
		json_object_put(params);
		json_object_put(to);
		return;
	}
	target_admits(g, t, tpg, &ac);
	json_object_put(ac.c);
	json_object_put(ac.ml);
	json_object_object_add(tpg, "acls", ac.acls);
	if (json_object_object_length(params))
		json_object_object_add(tpg, "params", params);
	else
		json_object_put(params);
	json_object_array_add(im->targets, to);
}

/* A simple `backing-store PATH` line is a store without a block of its own. */
static void simple_stores(struct target *t)
{
	for (size_t i = 0; i < t->kv.n; i++) {
		struct kv *k = &t->kv.v[i];
		bool direct = !strcmp(k->key, "direct-store");
		if (direct || !strcmp(k->key, "backing-store"))
			store_named(t, trim(k->val), direct, &k->at);
	}
}

static void discovery_user(struct tgt *g, struct kv *k, bool outgoing)
{
	char *sp = strchr(k->val, ' ');
	if (!sp) {
		tell(g, DROP, &k->at, "%s: expected USER SECRET", k->key);
		return;
	}
	*sp = 0;
	const char *secret = trim(sp + 1);
	json_object *c = get(g->im->discovery, "chap");
	if (!imp_secret_ok(secret) || strlen(k->val) > 255 ||
	    (outgoing && c && !strcmp(secret, json_object_get_string(get(c, "password"))))) {
		tell(g, DROP, &k->at, "%s %s: the secret is not 12-255 characters%s", k->key, text_of(&k->at, k->val),
		     outgoing ? " or equals the initiator's" : "");
	} else if (outgoing && !c) {
		tell(g, DROP, &k->at, "%s %s: mutual CHAP needs a usable incomingdiscoveryuser", k->key, text_of(&k->at, k->val));
	} else if (outgoing) {
		json_object_object_add(c, "mutual_userid", json_object_new_string(k->val));
		json_object_object_add(c, "mutual_password", json_object_new_string(secret));
	} else if (c) {
		tell(g, DROP, &k->at, "%s %s: one discovery CHAP user (the first)", k->key, text_of(&k->at, k->val));
	} else {
		c = json_object_new_object();
		json_object_object_add(c, "userid", json_object_new_string(k->val));
		json_object_object_add(c, "password", json_object_new_string(secret));
		json_object_object_add(g->im->discovery, "chap", c);
		json_object_object_add(g->im->discovery, "auth_required", json_object_new_boolean(true));
	}
	*sp = ' ';
}

int import_tgt(struct import *im, const char *path)
{
	struct tgt g = { .im = im, .iqns = json_object_new_object(), .paths = json_object_new_object(),
			 .serials = json_object_new_object() };
	int rc = parse_file(&g, path, 0);
	if (!rc && (g.cur || g.curst)) {
		imp_fail(g.curst ? g.curst->at.where : g.cur->at.where, "block not closed at the end of the file");
		rc = EX_REFUSED;
	}
	struct kv *driver = NULL;
	bool locked_discovery = false;
	for (size_t i = 0; !rc && i < g.global.n; i++) {
		struct kv *k = &g.global.v[i];
		if (!strcmp(k->key, "default-driver"))
			driver = k;
		else if (!strcmp(k->key, "incomingdiscoveryuser"))
			discovery_user(&g, k, false), locked_discovery |= !get(im->discovery, "chap");
		else if (!strcmp(k->key, "ignore-errors") || !strcmp(k->key, "control-port"))
			; /* how tgt-admin runs tgtadm: nothing an initiator sees */
		else if (strcmp(k->key, "outgoingdiscoveryuser"))
			tell(&g, DROP, &k->at, "%s: %s", text_of(&k->at, k->key),
			     !strncmp(k->key, "iSNS", 4) ? "iSNS is not supported" : "not a global key tgt-admin reads");
	}
	for (size_t i = 0; !rc && i < g.global.n; i++)
		if (!strcmp(g.global.v[i].key, "outgoingdiscoveryuser"))
			discovery_user(&g, &g.global.v[i], true);
	if (!rc && locked_discovery) {
		imp_fail(path, "incomingdiscoveryuser without a usable secret: refused rather than opening discovery");
		rc = EX_REFUSED;
	}
	if (!rc && g.nt)
		imp_note(im, path, "tgtd's portals are on its command line, not in this file: every target is imported "
				   "on 0.0.0.0:3260");
	for (size_t i = 0; !rc && i < g.nt; i++) {
		simple_stores(&g.t[i]);
		target(&g, &g.t[i], driver);
		rc = g.bad ? EX_REFUSED : 0;
	}
	for (size_t i = 0; i < g.nt; i++) {
		for (size_t k = 0; k < g.t[i].nst; k++) {
			free(g.t[i].st[k].path);
			free_kvs(&g.t[i].st[k].kv);
		}
		free(g.t[i].st);
		free(g.t[i].iqn);
		free_kvs(&g.t[i].kv);
		json_object_put(g.t[i].stores);
	}
	free(g.t);
	free_kvs(&g.global);
	json_object_put(g.iqns);
	json_object_put(g.paths);
	json_object_put(g.serials);
	return rc;
}
