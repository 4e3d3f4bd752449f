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
 */
#include <ctype.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/iscsi_name.h"
#include "import.h"
#include "iserctl.h"

#define LINE_MAX_BYTES 4096   /* one line, continuation lines joined */
#define INCLUDE_DEPTH  8      /* include within include ...: deeper is a loop */
#define INCLUDE_FILES  256    /* files read in all */

struct kv {
	char *key, *val;
	char where[160];        /* FILE:LINE */
};
struct kvs {
	struct kv *v;
	size_t n;
};
struct store {
	char *path;
	bool direct;
	struct kvs kv;
	char where[160];
};
struct target {
	char *iqn;
	struct kvs kv;
	struct store *st;
	size_t nst;
	char where[160];
};

struct tgt {
	struct import *im;
	struct kvs global;
	struct target *t;
	size_t nt;
	struct target *cur;     /* inside <target> */
	struct store *curst;    /* inside <backing-store>/<direct-store> */
	size_t used, files;     /* bytes and files read */
	bool bad;
};

static void add_kv(struct kvs *k, const char *key, const char *val, const char *where)
{
	k->v = realloc(k->v, (k->n + 1) * sizeof(*k->v));
	struct kv *e = &k->v[k->n++];
	e->key = strdup(key);
	e->val = strdup(val);
	snprintf(e->where, sizeof(e->where), "%s", where);
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
static void include(struct tgt *g, const char *pat, const char *from, const char *where, int depth)
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
		imp_drop(g->im, where, "include %s: no such file: nothing included", imp_shown(pat));
	} else if (r == 0) {
		for (size_t i = 0; i < gl.gl_pathc && !g->bad; i++)
			if (!stat(gl.gl_pathv[i], &st) && S_ISREG(st.st_mode))
				parse_file(g, gl.gl_pathv[i], depth + 1);
	}
	globfree(&gl);
}

static struct target *target_named(struct tgt *g, const char *iqn, const char *where)
{
	/* tgt-admin merges blocks of one name (-MergeDuplicateBlocks). */
	for (size_t i = 0; i < g->nt; i++)
		if (!strcmp(g->t[i].iqn, iqn))
			return &g->t[i];
	g->t = realloc(g->t, (g->nt + 1) * sizeof(*g->t));
	struct target *t = &g->t[g->nt++];
	memset(t, 0, sizeof(*t));
	t->iqn = strdup(iqn);
	snprintf(t->where, sizeof(t->where), "%s", where);
	return t;
}

static struct store *store_named(struct target *t, const char *path, bool direct, const char *where)
{
	for (size_t i = 0; i < t->nst; i++)
		if (!strcmp(t->st[i].path, path) && t->st[i].direct == direct)
			return &t->st[i];
	t->st = realloc(t->st, (t->nst + 1) * sizeof(*t->st));
	struct store *s = &t->st[t->nst++];
	memset(s, 0, sizeof(*s));
	s->path = strdup(path);
	s->direct = direct;
	snprintf(s->where, sizeof(s->where), "%s", where);
	return s;
}

static void line(struct tgt *g, char *s, const char *file, const char *where, int depth)
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
			include(g, trim(s + 9), file, where, depth);
			return;
		}
		imp_fail(where, "%s: here-documents are not read", imp_shown(s));
		g->bad = true;
		return;
	}
	if (s[0] == '<') {
		size_t n = strlen(s);
		if (s[n - 1] != '>') {
			imp_fail(where, "%s: a block line must end with >", imp_shown(s));
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
				imp_fail(where, "</%s> closes no open block", imp_shown(name));
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
			g->cur = target_named(g, arg, where);
		} else if (g->cur && !g->curst && *arg &&
			   (!strcasecmp(name, "backing-store") || !strcasecmp(name, "direct-store"))) {
			g->curst = store_named(g->cur, arg, !strcasecmp(name, "direct-store"), where);
		} else {
			imp_fail(where, "<%s%s%s>: %s", imp_shown(name), *arg ? " " : "", *arg ? imp_shown(arg) : "",
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
		include(g, v, file, where, depth);
		return;
	}
	add_kv(g->curst ? &g->curst->kv : g->cur ? &g->cur->kv : &g->global, s, v, where);
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
	if (memchr(text, 0, len) || !imp_text(path, text, len)) {
		if (memchr(text, 0, len))
			imp_fail(path, "contains a NUL byte: not a targets.conf");
		g->bad = true;
		free(text);
		return EX_REFUSED;
	}
	char buf[LINE_MAX_BYTES + 1], where[160];
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
			snprintf(where, sizeof(where), "%s:%u", path, lineno);
			imp_fail(where, "line longer than %d bytes: refused", LINE_MAX_BYTES);
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
		snprintf(where, sizeof(where), "%s:%u", path, first);
		line(g, buf, path, where, depth);
		have = 0;
	}
	free(text);
	return g->bad ? EX_REFUSED : 0;
}

/* ---- the configuration ------------------------------------------------------ */

/* Keys a LUN takes (in its block, or for every LUN at target level), with what becomes of them. */
static const char *const lun_dropped[] = {
	"vendor_id", "product_id", "product_rev", "scsi_id", "removable", "sense_format", "mode_page", "params",
	"lbppbe", "la_lba", "optimal_xfer_gran", "optimal_xfer_len", "path", "bsoflags", NULL,
};
static const char *const lun_keys[] = {
	"lun", "scsi_sn", "write-cache", "readonly", "online", "device-type", "bs-type", "bsopts", "block-size",
	"allow-in-use", NULL,
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

/* The LUN's value of key: its own, else the target's (tgt-admin's "global" LUN parameters). */
static struct kv *lun_opt(struct target *t, struct store *s, const char *key)
{
	struct kv *v = find(&s->kv, key);
	return v ? v : find(&t->kv, key);
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

/* The backstore for store s of target t (one per path, shared by the targets that list it), or NULL. */
static const char *backstore(struct tgt *g, struct target *t, struct store *s)
{
	struct import *im = g->im;
	struct kv *bst = lun_opt(t, s, "bs-type"), *dt = lun_opt(t, s, "device-type");
	const char *bs = bst ? bst->val : "rdwr";
	if (dt && strcmp(dt->val, "disk")) {
		imp_drop(im, dt->where, "device-type %s: isertd serves disks only; LUN %s not carried", imp_shown(dt->val),
			 imp_shown(s->path));
		return NULL;
	}
	bool rbd = !strcmp(bs, "rbd");
	if (strcmp(bs, "rdwr") && strcmp(bs, "aio") && !rbd) {
		imp_drop(im, bst->where, "bs-type %s has no isertd backstore (rdwr, aio and rbd do); LUN %s not carried",
			 imp_shown(bs), imp_shown(s->path));
		return NULL;
	}
	char rbd_pool[256] = "rbd", rbd_image[256];
	if (rbd) {
		/* tgt's rbd path: [pool/]image[@snapshot]. */
		const char *slash = strchr(s->path, '/');
		if (strchr(s->path, '@') || strlen(s->path) >= sizeof(rbd_image) || (slash && strchr(slash + 1, '/'))) {
			imp_drop(im, s->where, "rbd %s: a snapshot or a name isertd does not take; LUN not carried",
				 imp_shown(s->path));
			return NULL;
		}
		if (slash)
			snprintf(rbd_pool, sizeof(rbd_pool), "%.*s", (int)(slash - s->path), s->path);
		snprintf(rbd_image, sizeof(rbd_image), "%s", slash ? slash + 1 : s->path);
	} else if (s->path[0] != '/') {
		imp_drop(im, s->where, "%s: not an absolute path; LUN not carried", imp_shown(s->path));
		return NULL;
	}
	/* One backstore per path: isertd refuses two on one path, tgt lets targets share a device. */
	for (size_t i = 0; i < json_object_array_length(im->backstores); i++) {
		json_object *b = json_object_array_get_idx(im->backstores, i);
		const char *p = json_object_get_string(get(b, "path"));
		char rp[600];
		snprintf(rp, sizeof(rp), "%s/%s", json_object_get_string(get(b, "pool")), json_object_get_string(get(b, "image")));
		if ((!rbd && p && !strcmp(p, s->path)) || (rbd && get(b, "pool") && !strcmp(rp, s->path))) {
			/* Settings of a later LUN on the same store that differ from the first's are not carried. */
			struct kv *wc = lun_opt(t, s, "write-cache"), *sn = lun_opt(t, s, "scsi_sn");
			bool wce = !wc || strcasecmp(wc->val, "off");
			const char *have = json_object_get_string(get(b, "serial"));
			if (wce != json_object_get_boolean(get(b, "write_cache")))
				imp_drop(im, wc ? wc->where : s->where, "write-cache of %s: the backstore is shared with an earlier "
					 "LUN, whose setting (%s) it keeps", imp_shown(s->path), wce ? "off" : "on");
			if (sn && (!have || strcmp(have, sn->val)))
				imp_drop(im, sn->where, "scsi_sn %s of %s: the backstore is shared with an earlier LUN, whose serial "
					 "it keeps", imp_shown(sn->val), imp_shown(s->path));
			return json_object_get_string(get(b, "name"));
		}
	}
	const char *base = rbd ? rbd_image : strrchr(s->path, '/') + 1;
	char *name = imp_backstore_name(im, base);
	json_object *b = json_object_new_object();
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
			imp_note(im, s->where, "%s does not exist here: taken as a %s", imp_shown(s->path), blk ? "block device" : "file");
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
			imp_drop(im, bsz->where, "block-size %s: isertd takes 512, 1024, 2048 or 4096", imp_shown(bsz->val));
	}
	struct kv *sn = lun_opt(t, s, "scsi_sn");
	if (sn) {
		bool ok = *sn->val && strlen(sn->val) <= 64;
		for (const char *c = sn->val; ok && *c; c++)
			ok = *c > ' ' && *c < 127;
		bool dup = false;
		for (size_t i = 0; ok && i < json_object_array_length(im->backstores); i++) {
			const char *o = json_object_get_string(get(json_object_array_get_idx(im->backstores, i), "serial"));
			dup |= o && !strcmp(o, sn->val);
		}
		if (!ok)
			imp_drop(im, sn->where, "scsi_sn %s: isertd's serial is 1-64 printable characters without spaces",
				 imp_shown(sn->val));
		else if (dup)
			imp_drop(im, sn->where, "scsi_sn %s for %s: another LUN has it already (isertd's serials are unique)",
				 imp_shown(sn->val), imp_shown(s->path));
		else
			json_object_object_add(b, "serial", json_object_new_string(sn->val));
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
				imp_drop(im, bo->where, "bsopts %s: not an rbd option isertd takes", imp_shown(o));
		}
		free(opts);
	} else if (bo) {
		imp_drop(im, bo->where, "bsopts %s: no setting", imp_shown(bo->val));
	}
	json_object_array_add(im->backstores, b);
	return json_object_get_string(get(b, "name"));
}

/* incominguser/outgoinguser of t as a chap object; *locked when credentials were given but none is usable. */
static json_object *chap(struct tgt *g, struct target *t, bool *locked)
{
	json_object *c = NULL;
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
			imp_drop(g->im, k->where, "incominguser: expected USER SECRET");
			continue;
		}
		*sp = 0;
		char *secret = trim(sp + 1);
		if (c) {
			imp_drop(g->im, k->where, "incominguser %s: isertd takes one CHAP user per initiator (the first, %s)",
				 imp_shown(k->val), imp_shown(json_object_get_string(get(c, "userid"))));
		} else if (!imp_secret_ok(secret) || strlen(k->val) > 255) {
			imp_drop(g->im, k->where, "incominguser %s: the secret is not 12-255 characters (isertd's rule, docs/config.md)",
				 imp_shown(k->val));
		} else {
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
			imp_drop(g->im, k->where, "outgoinguser %s: only one is used (tgt-admin too)", imp_shown(k->val));
		else if (!sp)
			imp_drop(g->im, k->where, "outgoinguser: expected USER SECRET");
		else if (!c)
			imp_drop(g->im, k->where, "outgoinguser %s: mutual CHAP needs a usable incominguser", imp_shown(k->val));
		else if (!imp_secret_ok(secret) || !strcmp(secret, pw) || strlen(k->val) > 255)
			imp_drop(g->im, k->where, "outgoinguser %s: the secret is not 12-255 characters or equals the initiator's",
				 imp_shown(k->val));
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

static void target(struct tgt *g, struct target *t, const char *driver)
{
	struct import *im = g->im;
	if (!iscsi_name_valid(t->iqn)) {
		imp_drop(im, t->where, "%s: not a valid iSCSI name (docs/config.md): the target is not carried",
			 imp_shown(t->iqn));
		return;
	}
	json_object *to = json_object_new_object(), *tpg = json_object_new_object(), *luns = json_object_new_array(),
		    *acls = json_object_new_array(), *params = json_object_new_object();
	json_object_object_add(to, "iqn", json_object_new_string(t->iqn));
	struct kv *drv = find(&t->kv, "driver");
	const char *d = drv ? drv->val : driver;
	if (strcmp(d, "iscsi") && strcmp(d, "iser"))
		imp_drop(im, drv ? drv->where : t->where, "driver %s: isertd serves iscsi and iser; taken as iscsi", imp_shown(d));
	json_object *portal = json_object_new_object();
	json_object_object_add(portal, "ip", json_object_new_string("0.0.0.0"));
	json_object_object_add(portal, "port", json_object_new_int(3260));
	if (!strcmp(d, "iser"))
		json_object_object_add(portal, "iser", json_object_new_boolean(true));
	json_object *portals = json_object_new_array();
	json_object_array_add(portals, portal);
	json_object_object_add(tpg, "tag", json_object_new_int(1));
	json_object_object_add(tpg, "portals", portals);

	/* LUN numbers as tgt-admin gives them: explicit ones reserved, the rest the lowest free from 1. */
	if (t->nst) /* qsort takes no NULL, even for nothing */
		qsort(t->st, t->nst, sizeof(*t->st), cmp_store);
	bool used[16384] = { false };
	for (size_t i = 0; i < t->nst; i++) {
		struct kv *l = find(&t->st[i].kv, "lun");
		long n = l ? strtol(l->val, NULL, 10) : -1;
		if (n >= 0 && n < 16384)
			used[n] = true;
	}
	struct kv *tlun = find(&t->kv, "lun");
	for (size_t i = 0; i < t->nst; i++) {
		struct store *s = &t->st[i];
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
				imp_drop(im, l->where, "lun %s: isertd's LUNs are 0-16383 and tgt's LUN 0 is its controller; %s not carried",
					 imp_shown(l->val), imp_shown(s->path));
				continue;
			}
			if (l == tlun && used[n]) {
				imp_drop(im, l->where, "lun %ld: taken by another LUN already; %s not carried", n, imp_shown(s->path));
				continue;
			}
		} else {
			for (n = 1; n < 16384 && used[n]; n++)
				;
		}
		used[n] = true;
		for (size_t k = 0; k < s->kv.n; k++) {
			struct kv *e = &s->kv.v[k];
			if (listed(lun_dropped, e->key))
				imp_drop(im, e->where, "%s %s: no isertd setting (docs/config.md)", e->key, imp_shown(e->val));
			else if (!listed(lun_keys, e->key))
				imp_drop(im, e->where, "%s: not a key tgt-admin reads in a %s block", imp_shown(e->key),
					 s->direct ? "direct-store" : "backing-store");
		}
		const char *name = backstore(g, t, s);
		if (!name)
			continue;
		if (s->direct)
			imp_drop(im, s->where, "direct-store %s: served as a block device; the INQUIRY vendor, product and "
					       "revision tgt-admin copies from it (sg_inq) are isertd's own",
				 imp_shown(s->path));
		struct kv *on = lun_opt(t, s, "online");
		if (on && !truthy(on->val))
			imp_drop(im, on->where, "online %s: isertd's LUNs are always online", imp_shown(on->val));
		json_object *x = json_object_new_object();
		json_object_object_add(x, "lun", json_object_new_int64(n));
		json_object_object_add(x, "backstore", json_object_new_string(name));
		struct kv *ro = lun_opt(t, s, "readonly");
		if (ro && truthy(ro->val))
			json_object_object_add(x, "read_only", json_object_new_boolean(true));
		json_object_array_add(luns, x);
	}
	json_object_object_add(tpg, "luns", luns);

	/* Access: names become ACLs; addresses isertd cannot check. */
	bool by_addr = false, named = false, locked;
	json_object *c = chap(g, t, &locked);
	for (size_t i = 0; i < t->kv.n; i++) {
		struct kv *k = &t->kv.v[i];
		if (!strcmp(k->key, "initiator-address")) {
			by_addr = true;
			imp_drop(im, k->where, "initiator-address %s: isertd admits initiators by name (ACLs), not by address",
				 imp_shown(k->val));
		} else if (!strcmp(k->key, "initiator-name") && !locked && !iscsi_name_valid(k->val)) {
			named = true;
			imp_drop(im, k->where, "initiator-name %s: not a valid iSCSI name: not carried", imp_shown(k->val));
		} else if (!strcmp(k->key, "initiator-name") && !locked) {
			named = true;
			json_object *a = json_object_new_object(), *ml = json_object_new_array();
			json_object_object_add(a, "initiator", json_object_new_string(k->val));
			if (c)
				json_object_object_add(a, "chap", json_object_get(c));
			for (size_t m = 0; m < json_object_array_length(luns); m++) {
				json_object *x = json_object_new_object();
				int64_t n = json_object_get_int64(get(json_object_array_get_idx(luns, m), "lun"));
				json_object_object_add(x, "mapped_lun", json_object_new_int64(n));
				json_object_object_add(x, "tpg_lun", json_object_new_int64(n));
				json_object_array_add(ml, x);
			}
			json_object_object_add(a, "mapped_luns", ml);
			json_object_array_add(acls, a);
		} else if (listed(target_params, k->key)) {
			char *end;
			long long n = strtoll(k->val, &end, 10);
			if (!strcmp(k->key, "InitialR2T") || !strcmp(k->key, "ImmediateData")) {
				if (strcasecmp(k->val, "yes") && strcasecmp(k->val, "no"))
					imp_drop(im, k->where, "%s %s: expected Yes or No", k->key, imp_shown(k->val));
				else
					json_object_object_add(params, k->key, json_object_new_boolean(!strcasecmp(k->val, "yes")));
			} else if (strstr(k->key, "Digest")) {
				if (strcmp(k->val, "None") && strcmp(k->val, "CRC32C,None") && strcmp(k->val, "None,CRC32C"))
					imp_drop(im, k->where, "%s %s: isertd offers None, CRC32C,None or None,CRC32C", k->key, imp_shown(k->val));
				else
					json_object_object_add(params, k->key, json_object_new_string(k->val));
			} else if (!*k->val || *end || n < 0) {
				imp_drop(im, k->where, "%s %s: not a number", k->key, imp_shown(k->val));
			} else {
				json_object_object_add(params, k->key, json_object_new_int64(n));
			}
		} else if (listed(target_params_dropped, k->key)) {
			imp_drop(im, k->where, "%s %s: no isertd setting", k->key, imp_shown(k->val));
		} else if (!strcmp(k->key, "backing-store") || !strcmp(k->key, "direct-store")) {
			/* read below (stores) */
		} else if (!strcmp(k->key, "controller_tid") || !strcmp(k->key, "driver") || !strcmp(k->key, "incominguser") ||
			   !strcmp(k->key, "outgoinguser") || !strcmp(k->key, "initiator-name") || listed(lun_keys, k->key)) {
			/* tgt's own numbering, or read above */
		} else if (listed(lun_dropped, k->key)) {
			imp_drop(im, k->where, "%s %s: no isertd setting (docs/config.md)", k->key, imp_shown(k->val));
		} else {
			imp_drop(im, k->where, "%s: not a key tgt-admin reads in a <target> block", imp_shown(k->key));
		}
	}
	if (locked) {
		imp_drop(im, t->where, "%s: no usable incominguser: the target is imported admitting no initiator",
			 imp_shown(t->iqn));
	} else if (!json_object_array_length(acls) && !by_addr && !named) {
		/* tgt-admin binds ALL when the target names no initiator. */
		json_object_object_add(tpg, "demo_mode", json_object_new_boolean(true));
		if (c)
			json_object_object_add(tpg, "demo_chap", json_object_get(c));
	} else if (named && !json_object_array_length(acls)) {
		imp_drop(im, t->where, "%s: none of its initiator names was carried: imported admitting no initiator",
			 imp_shown(t->iqn));
	} else if (by_addr && !json_object_array_length(acls)) {
		imp_drop(im, t->where, "%s: admitted initiators by address only: imported admitting no initiator "
				       "(add ACLs: iserctl create /iscsi/IQN/tpg1/acls/INITIATOR)",
			 imp_shown(t->iqn));
	}
	json_object_put(c);
	json_object_object_add(tpg, "acls", acls);
	if (json_object_object_length(params))
		json_object_object_add(tpg, "params", params);
	else
		json_object_put(params);
	json_object *tpgs = json_object_new_array();
	json_object_array_add(tpgs, tpg);
	json_object_object_add(to, "tpgs", tpgs);
	json_object_array_add(im->targets, to);
}

/* A simple `backing-store PATH` line is a store without a block of its own. */
static void simple_stores(struct target *t)
{
	for (size_t i = 0; i < t->kv.n; i++) {
		struct kv *k = &t->kv.v[i];
		bool direct = !strcmp(k->key, "direct-store");
		if (direct || !strcmp(k->key, "backing-store"))
			store_named(t, trim(k->val), direct, k->where);
	}
}

static void discovery_user(struct tgt *g, struct kv *k, bool outgoing)
{
	char *sp = strchr(k->val, ' ');
	if (!sp) {
		imp_drop(g->im, k->where, "%s: expected USER SECRET", k->key);
		return;
	}
	*sp = 0;
	const char *secret = trim(sp + 1);
	json_object *c = get(g->im->discovery, "chap");
	if (!imp_secret_ok(secret) || strlen(k->val) > 255 ||
	    (outgoing && c && !strcmp(secret, json_object_get_string(get(c, "password"))))) {
		imp_drop(g->im, k->where, "%s %s: the secret is not 12-255 characters%s", k->key, imp_shown(k->val),
			 outgoing ? " or equals the initiator's" : "");
	} else if (outgoing && !c) {
		imp_drop(g->im, k->where, "%s %s: mutual CHAP needs a usable incomingdiscoveryuser", k->key, imp_shown(k->val));
	} else if (outgoing) {
		json_object_object_add(c, "mutual_userid", json_object_new_string(k->val));
		json_object_object_add(c, "mutual_password", json_object_new_string(secret));
	} else if (c) {
		imp_drop(g->im, k->where, "%s %s: one discovery CHAP user (the first)", k->key, imp_shown(k->val));
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
	struct tgt g = { .im = im };
	int rc = parse_file(&g, path, 0);
	if (!rc && (g.cur || g.curst)) {
		imp_fail(g.curst ? g.curst->where : g.cur->where, "block not closed at the end of the file");
		rc = EX_REFUSED;
	}
	const char *driver = "iscsi";
	bool locked_discovery = false;
	for (size_t i = 0; !rc && i < g.global.n; i++) {
		struct kv *k = &g.global.v[i];
		if (!strcmp(k->key, "default-driver"))
			driver = k->val;
		else if (!strcmp(k->key, "incomingdiscoveryuser"))
			discovery_user(&g, k, false), locked_discovery |= !get(im->discovery, "chap");
		else if (!strcmp(k->key, "ignore-errors") || !strcmp(k->key, "control-port"))
			; /* how tgt-admin runs tgtadm: nothing an initiator sees */
		else if (strcmp(k->key, "outgoingdiscoveryuser"))
			imp_drop(im, k->where, "%s: %s", imp_shown(k->key),
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
	}
	for (size_t i = 0; i < g.nt; i++) {
		for (size_t k = 0; k < g.t[i].nst; k++) {
			free(g.t[i].st[k].path);
			free_kvs(&g.t[i].st[k].kv);
		}
		free(g.t[i].st);
		free(g.t[i].iqn);
		free_kvs(&g.t[i].kv);
	}
	free(g.t);
	free_kvs(&g.global);
	return rc;
}
