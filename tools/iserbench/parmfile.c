/*
 * vdbench parameter files: text -> tokens -> sd=/wd=/rd= definitions, and
 * the runs an rd= expands to.  The rules follow vdbench 5.04's own parser
 * (Vdb_scan.java, Var_parms.java, SD_entry/WD_entry/RD_entry.java,
 * For_loop.java); where iserbench is stricter it says so.
 *
 * The file is a stream of keyword=value tokens, not of lines: a line break
 * separates tokens like a comma does, a definition runs until the next
 * sd=, wd= or rd=, and the sections come in vdbench's order (general
 * parameters, sd=, wd=, rd=).  That order gives sd= and wd= two meanings:
 * after the first wd=, "sd=" is a workload's SD list, after the first rd=,
 * "wd=" is a run's WD list.
 */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "ib.h"

#define MAX_TEXT   (4u << 20)     /* bytes of parameter text, includes too */
#define MAX_LINE   65536
#define MAX_TOKENS 200000
#define MAX_DEFS   4096           /* of each of sd=, wd=, rd= */
#define MAX_DEPTH  8              /* include= nesting */
#define MAX_RUNS   100000
#define MAX_ITEMS  (2 * IB_LIST)  /* xfersize distributions hold pairs */
#define ITEM_LEN   1024

struct tok {
	char *kw;                   /* lower case */
	char *val;                  /* as written, quotes kept */
	const char *file;
	int line;
};

/* What a definition needs beyond ib.h until the file is resolved. */
struct sdx { const char *file; uint64_t hitarea; bool hitarea_set; };
struct wdx { const char *file; int sd_tok; bool hitarea_set; };
struct rdx { const char *file; int wd_tok; bool iorate_set; };

struct items {                      /* one value split, ranges expanded */
	unsigned n;
	bool quoted[MAX_ITEMS];
	char v[MAX_ITEMS][ITEM_LEN];
};

struct ld {
	struct ib_parm *p;
	char *err;
	size_t errlen;
	bool failed;
	char *const *vars;
	unsigned nvars;

	char *text; size_t tlen, tcap;
	char **files; unsigned nfiles;
	struct tok *tok; unsigned ntok, tokcap;

	/* the token being read: a value in parentheses may span lines */
	char *cur; size_t clen, ccap;
	int cdepth; bool cquote;
	const char *cfile; int cline;

	struct sdx *sdx; struct wdx *wdx; struct rdx *rdx;
	unsigned sdcap, wdcap, rdcap;       /* of p->sd, p->wd, p->rd */
	unsigned sdxcap, wdxcap, rdxcap;
	struct ib_sd dsd; struct sdx dsdx;
	struct ib_wd dwd; struct wdx dwdx;
	struct ib_rd drd; struct rdx drdx;
	bool rd_wd_here;            /* the current rd= gave wd= itself */

	struct items it;
};

/* ---------------- errors ---------------- */

static int verr(struct ld *l, const char *file, int line, const char *kw,
		const char *fmt, va_list ap)
{
	char why[512];
	int n;

	if (l->failed)
		return -1;
	l->failed = true;
	vsnprintf(why, sizeof(why), fmt, ap);
	if (file && line > 0)
		n = snprintf(l->err, l->errlen, "%s:%d: ", file, line);
	else if (file)
		n = snprintf(l->err, l->errlen, "%s: ", file);
	else
		n = 0;
	if (n < 0 || (size_t)n >= l->errlen)
		return -1;
	if (kw)
		snprintf(l->err + n, l->errlen - n, "keyword '%s': %s", kw, why);
	else
		snprintf(l->err + n, l->errlen - n, "%s", why);
	return -1;
}

static int lerr(struct ld *l, const char *file, int line, const char *kw, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int lerr(struct ld *l, const char *file, int line, const char *kw, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(l, file, line, kw, fmt, ap);
	va_end(ap);
	return -1;
}

static int terr(struct ld *l, const struct tok *t, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int terr(struct ld *l, const struct tok *t, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	verr(l, t->file, t->line, t->kw, fmt, ap);
	va_end(ap);
	return -1;
}

/* ---------------- growing buffers ---------------- */

/* Room for need elements: the (maybe moved) array, or NULL with p kept. */
static void *grow(void *p, unsigned *cap, unsigned need, size_t elem, unsigned max)
{
	unsigned n;
	void *q;

	if (need <= *cap)
		return p;
	if (need > max)
		return NULL;
	n = *cap ? *cap * 2 : 8;
	if (n < need)
		n = need;
	if (n > max)
		n = max;
	q = realloc(p, (size_t)n * elem);
	if (!q)
		return NULL;
	memset((char *)q + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
	*cap = n;
	return q;
}

/* Room for one more definition and its loader extras (same capacity). */
#define GROW_DEF(l, arr, x, n, cap, xcap) __extension__ ({			\
	unsigned c1 = (cap), c2 = (xcap);					\
	void *a = grow((arr), &c1, (n) + 1, sizeof(*(arr)), MAX_DEFS);		\
	if (a) { (arr) = a; (cap) = c1; }					\
	void *b = a ? grow((x), &c2, (n) + 1, sizeof(*(x)), MAX_DEFS) : NULL;	\
	if (b) { (x) = b; (xcap) = c2; }					\
	a && b; })

static int text_add(struct ld *l, const char *s, size_t n)
{
	if (l->tlen + n + 2 > MAX_TEXT)
		return lerr(l, NULL, 0, NULL, "parameter text longer than %u bytes", MAX_TEXT);
	if (l->tlen + n + 2 > l->tcap) {
		size_t c = l->tcap ? l->tcap : 4096;
		char *q;

		while (c < l->tlen + n + 2)
			c *= 2;
		q = realloc(l->text, c);
		if (!q)
			return lerr(l, NULL, 0, NULL, "out of memory");
		l->text = q;
		l->tcap = c;
	}
	memcpy(l->text + l->tlen, s, n);
	l->tlen += n;
	l->text[l->tlen] = '\0';
	return 0;
}

static int cur_add(struct ld *l, char c)
{
	if (l->clen + 2 > l->ccap) {
		size_t c2 = l->ccap ? l->ccap * 2 : 256;
		char *q;

		if (c2 > MAX_TEXT)
			return lerr(l, l->cfile, l->cline, NULL, "parameter longer than %u bytes", MAX_TEXT);
		q = realloc(l->cur, c2);
		if (!q)
			return lerr(l, NULL, 0, NULL, "out of memory");
		l->cur = q;
		l->ccap = c2;
	}
	l->cur[l->clen++] = c;
	l->cur[l->clen] = '\0';
	return 0;
}

/* ---------------- numbers and values ---------------- */

/*
 * vdbench's numbers: k, m, g, t multiply by powers of 1024 (kb, mb... too);
 * for the time keywords (elapsed, interval, warmup) m is minutes and h
 * hours, as Vdb_scan.not_numeric() does.  Plain decimals only: no sign,
 * exponent, hex, inf or nan.
 */
static int parse_num(const char *s, bool time, double *out)
{
	char buf[72];
	size_t n = strlen(s), i;
	double mult = 1;
	bool dot = false, digit = false;

	if (n == 0 || n >= sizeof(buf))
		return -1;
	for (i = 0; i < n; i++)
		buf[i] = (char)tolower((unsigned char)s[i]);
	buf[n] = '\0';
	if (n > 2 && buf[n - 1] == 'b' && strchr("kmgt", buf[n - 2]))
		buf[--n] = '\0';
	switch (buf[n - 1]) {
	case 'k': mult = 1024.0; break;
	case 'm': mult = time ? 60.0 : 1048576.0; break;
	case 'g': mult = 1073741824.0; break;
	case 't': mult = 1099511627776.0; break;
	case 'h': mult = time ? 3600.0 : 0; break;
	default: break;
	}
	if (mult == 0)
		return -1;
	if (mult != 1)
		buf[--n] = '\0';
	for (i = 0; i < n; i++) {
		if (buf[i] == '.' && !dot)
			dot = true;
		else if (isdigit((unsigned char)buf[i]))
			digit = true;
		else
			return -1;
	}
	if (!digit)
		return -1;
	*out = strtod(buf, NULL) * mult;
	return isfinite(*out) ? 0 : -1;
}

static int item_add(struct ld *l, const struct tok *t, struct items *it, const char *s,
		    size_t n, bool quoted)
{
	if (it->n >= MAX_ITEMS)
		return terr(l, t, "more than %d values", MAX_ITEMS);
	if (n >= ITEM_LEN)
		return terr(l, t, "value longer than %d characters", ITEM_LEN - 1);
	memcpy(it->v[it->n], s, n);
	it->v[it->n][n] = '\0';
	it->quoted[it->n++] = quoted;
	return 0;
}

static void fmt_num(char *buf, size_t len, double v)
{
	snprintf(buf, len, "%.17g", v);
}

/*
 * A numeric range inside parentheses, from Var_parms.handle_num():
 * (from-to,step) counts up by step, (from-to,d) doubles (or halves when
 * from > to).  vdbench reads past its list for a range with no step;
 * iserbench says so instead.
 */
static int num_range(struct ld *l, const struct tok *t, struct items *it, bool time,
		     const char *a, const char *b, const char *step)
{
	double from, to, st = 0, v;
	char buf[64];
	bool dbl;

	if (parse_num(a, time, &from) || parse_num(b, time, &to))
		return terr(l, t, "bad range '%s-%s'", a, b);
	if (!step)
		return terr(l, t, "range '%s-%s' needs a step: (from-to,step) or (from-to,d)", a, b);
	dbl = !strcmp(step, "d");
	if (!dbl && (parse_num(step, time, &st) || st <= 0))
		return terr(l, t, "range '%s-%s': bad step '%s'", a, b, step);
	if (dbl && from <= 0)
		return terr(l, t, "range '%s-%s,d': doubling needs a start above 0", a, b);
	if (!dbl && to < from)
		return terr(l, t, "range '%s-%s': the end is below the start", a, b);
	for (v = from;;) {
		if (it->n >= MAX_ITEMS)
			return terr(l, t, "range '%s-%s' gives more than %d values", a, b, MAX_ITEMS);
		fmt_num(buf, sizeof(buf), v);
		if (item_add(l, t, it, buf, strlen(buf), false))
			return -1;
		if (dbl && from <= to) {
			v *= 2;
			if (v > to)
				break;
		} else if (dbl) {
			v /= 2;
			if (v < to)
				break;
		} else {
			v += st;
			if (v > to * (1 + 1e-12))
				break;
		}
	}
	return 0;
}

/* An alphanumeric range, (sd1-sd8): same prefix, increasing numbers. */
static int alpha_range(struct ld *l, const struct tok *t, struct items *it,
		       const char *a, const char *b)
{
	size_t pa = strlen(a), pb = strlen(b);
	long va, vb, i;
	char buf[ITEM_LEN + 24];

	while (pa > 0 && isdigit((unsigned char)a[pa - 1]))
		pa--;
	while (pb > 0 && isdigit((unsigned char)b[pb - 1]))
		pb--;
	if (pa == strlen(a) || pb == strlen(b) || strlen(a) - pa > 9 || strlen(b) - pb > 9)
		return terr(l, t, "range '%s-%s' must be name-number ranges like sd1-sd8 "
			    "(quote the value if it is not a range)", a, b);
	if (pa != pb || strncmp(a, b, pa))
		return terr(l, t, "range '%s-%s': the names differ", a, b);
	va = strtol(a + pa, NULL, 10);
	vb = strtol(b + pb, NULL, 10);
	if (va >= vb)
		return terr(l, t, "range '%s-%s' must count up", a, b);
	if (vb - va >= MAX_ITEMS)
		return terr(l, t, "range '%s-%s' gives more than %d values", a, b, MAX_ITEMS);
	for (i = va; i <= vb; i++) {
		int n = snprintf(buf, sizeof(buf), "%.*s%ld", (int)pa, a, i);

		if (item_add(l, t, it, buf, (size_t)n, false))
			return -1;
	}
	return 0;
}

/* Copy one element without its quotes; *quoted says whether it had any. */
static int unquote(struct ld *l, const struct tok *t, const char *s, size_t n,
		   char *out, bool *quoted)
{
	size_t i, o = 0;

	*quoted = false;
	for (i = 0; i < n; i++) {
		if (s[i] == '"') {
			*quoted = true;
			continue;
		}
		if (o + 1 >= ITEM_LEN)
			return terr(l, t, "value longer than %d characters", ITEM_LEN - 1);
		out[o++] = s[i];
	}
	out[o] = '\0';
	return 0;
}

/*
 * Split a value: "x" is one item, "(a,b,c)" a list whose unquoted
 * elements may be ranges "from-to" (Vdb_scan.parms_split() only looks for
 * ranges inside parentheses, so lun=/dev/sd-x stays whole).
 */
static int split_value(struct ld *l, const struct tok *t, bool time, struct items *it)
{
	const char *s = t->val;
	size_t n = strlen(s), i, start;
	char (*el)[ITEM_LEN];
	bool *elq;
	unsigned nel = 0, k;
	bool q = false;
	int rc = -1;

	it->n = 0;
	if (s[0] != '(') {
		char one[ITEM_LEN];
		bool quoted;

		for (i = 0; i < n; i++) {
			if (s[i] == '"')
				q = !q;
			else if (!q && (s[i] == '(' || s[i] == ')'))
				return terr(l, t, "unexpected '%c' in '%s'", s[i], s);
		}
		if (unquote(l, t, s, n, one, &quoted))
			return -1;
		return item_add(l, t, it, one, strlen(one), quoted);
	}
	if (n < 2 || s[n - 1] != ')')
		return terr(l, t, "missing ')' in '%s'", s);
	el = malloc(sizeof(*el) * MAX_ITEMS);
	elq = malloc(sizeof(*elq) * MAX_ITEMS);
	if (!el || !elq) {
		lerr(l, NULL, 0, NULL, "out of memory");
		goto out;
	}
	start = 1;
	for (i = 1; i < n; i++) {
		if (s[i] == '"' ) {
			q = !q;
			continue;
		}
		if (q)
			continue;
		if (s[i] == '(' || (s[i] == ')' && i != n - 1)) {
			terr(l, t, "nested or extra parentheses in '%s'", s);
			goto out;
		}
		if (s[i] == ',' || i == n - 1) {
			if (i > start) {
				if (nel >= MAX_ITEMS) {
					terr(l, t, "more than %d values", MAX_ITEMS);
					goto out;
				}
				if (unquote(l, t, s + start, i - start, el[nel], &elq[nel]))
					goto out;
				nel++;
			}
			start = i + 1;
		}
	}
	if (nel == 0) {
		terr(l, t, "empty list '%s'", s);
		goto out;
	}
	for (k = 0; k < nel; k++) {
		char *dash = elq[k] || !el[k][0] ? NULL : strchr(el[k] + 1, '-');
		double dummy;

		if (!dash) {
			if (item_add(l, t, it, el[k], strlen(el[k]), elq[k]))
				goto out;
			continue;
		}
		*dash = '\0';
		if (parse_num(el[k], time, &dummy) == 0) {
			const char *step = k + 1 < nel ? el[k + 1] : NULL;

			if (num_range(l, t, it, time, el[k], dash + 1, step))
				goto out;
			k++;
		} else if (alpha_range(l, t, it, el[k], dash + 1)) {
			goto out;
		}
	}
	rc = 0;
out:
	free(el);
	free(elq);
	return rc;
}

static int one_str(struct ld *l, const struct tok *t, char *out, size_t size)
{
	if (split_value(l, t, false, &l->it))
		return -1;
	if (l->it.n != 1)
		return terr(l, t, "takes one value, not %u", l->it.n);
	if (strlen(l->it.v[0]) >= size)
		return terr(l, t, "'%s' is longer than %zu characters", l->it.v[0], size - 1);
	strcpy(out, l->it.v[0]);
	return 0;
}

/* Numbers between lo and hi; max of them; all integers if whole. */
static int nums(struct ld *l, const struct tok *t, bool time, double *v, unsigned *n,
		unsigned max, double lo, double hi, bool whole)
{
	unsigned i;

	if (split_value(l, t, time, &l->it))
		return -1;
	if (l->it.n > max)
		return max == 1 ? terr(l, t, "takes one value, not %u", l->it.n)
				: terr(l, t, "list of %u values is longer than %u", l->it.n, max);
	for (i = 0; i < l->it.n; i++) {
		if (l->it.quoted[i] || parse_num(l->it.v[i], time, &v[i]))
			return terr(l, t, "'%s' is not a number", l->it.v[i]);
		if (v[i] < lo || v[i] > hi)
			return terr(l, t, "%s is out of range (%g to %g)", l->it.v[i], lo, hi);
		if (whole && v[i] != floor(v[i]))
			return terr(l, t, "%s is not a whole number", l->it.v[i]);
	}
	*n = l->it.n;
	return 0;
}

static int one_num(struct ld *l, const struct tok *t, bool time, double *v,
		   double lo, double hi, bool whole)
{
	unsigned n;

	return nums(l, t, time, v, &n, 1, lo, hi, whole);
}

#define BYTES_MAX 1.8e19

/* A byte count: nonzero if nz, a multiple of 512 if b512. */
static int check_bytes(struct ld *l, const struct tok *t, double v, bool nz, bool b512)
{
	if (nz && v < 1)
		return terr(l, t, "must not be 0");
	if (v != floor(v))
		return terr(l, t, "%g is not a whole number of bytes", v);
	if (b512 && fmod(v, 512) != 0)
		return terr(l, t, "%.0f is not a multiple of 512", v);
	return 0;
}

static int byte_val(struct ld *l, const struct tok *t, uint64_t *out, bool nz, bool b512)
{
	double v;

	if (one_num(l, t, false, &v, 0, BYTES_MAX, true) || check_bytes(l, t, v, nz, b512))
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static int range_val(struct ld *l, const struct tok *t, double r[2])
{
	double v[2];
	unsigned n;

	if (nums(l, t, false, v, &n, 2, 0, 100, false))
		return -1;
	if (n != 2)
		return terr(l, t, "needs two values: range=(from,to) in percent");
	if (v[0] >= v[1])
		return terr(l, t, "(%g,%g): the start must be below the end", v[0], v[1]);
	r[0] = v[0];
	r[1] = v[1];
	return 0;
}

/* seekpct: a percentage, seq/sequential, random or eof (WD_entry.parseSeekpct). */
static int seek_word(const char *s, double *v)
{
	size_t n = strlen(s);

	if (n && !strncasecmp("sequential", s, n)) {
		*v = 0;
		return 0;
	}
	if (n && !strncasecmp("random", s, n)) {
		*v = 100;
		return 0;
	}
	if (!strcasecmp(s, "eof")) {
		*v = -1;
		return 0;
	}
	if (parse_num(s, false, v) == 0 && *v <= 100)
		return 0;
	return -1;
}

/* ---------------- keywords ---------------- */

enum {
	K_UNSUP = -1,
	/* general */
	K_DATA_ERRORS, K_VALIDATE,
	/* sd= */
	K_LUN, K_SIZE, K_SD_THREADS, K_OFFSET, K_ALIGN, K_SD_RANGE, K_SD_HITAREA,
	/* wd= */
	K_SKEW, K_WD_XFER, K_WD_RDPCT, K_WD_WRPCT, K_WD_RANGE, K_WD_SEEK, K_WD_IORATE,
	K_RHPCT, K_WHPCT, K_WD_HITAREA,
	/* rd= */
	K_IORATE, K_CURVE, K_STOPCURVE, K_ELAPSED, K_INTERVAL, K_WARMUP, K_DIST,
	K_FORTHREADS, K_FORXFER, K_FORRDPCT, K_FORSEEK, K_FORIORATE,
};

struct kwent { const char *name; int id; };

/*
 * Keyword names, including vdbench's that iserbench does not implement so
 * that those get "not supported" rather than "unknown".  vdbench takes the
 * first keyword in its if-chain that starts with what was written;
 * iserbench takes an exact name, else the one implemented keyword it is
 * a prefix of, and calls a prefix of two different keywords ambiguous.
 */
static const struct kwent kw_gen[] = {
	{ "data_errors", K_DATA_ERRORS }, { "dataerrors", K_DATA_ERRORS },
	{ "validate", K_VALIDATE },
	{ "compratio", K_UNSUP }, { "dedupratio", K_UNSUP }, { "dedupunit", K_UNSUP },
	{ "dedupsets", K_UNSUP }, { "messagescan", K_UNSUP }, { "histogram", K_UNSUP },
	{ "report", K_UNSUP }, { "concatenatesds", K_UNSUP }, { "debug", K_UNSUP },
	{ "port", K_UNSUP }, { "pattern", K_UNSUP }, { "journal", K_UNSUP },
	{ "create_anchors", K_UNSUP }, { "formatsds", K_UNSUP }, { "formatxfersize", K_UNSUP },
	{ "showlba", K_UNSUP }, { "loop", K_UNSUP }, { "startcmd", K_UNSUP },
	{ "endcmd", K_UNSUP }, { "hd", K_UNSUP }, { "host", K_UNSUP }, { "fsd", K_UNSUP },
	{ "fwd", K_UNSUP }, { "compression", K_UNSUP }, { "force_error_after", K_UNSUP },
};

static const struct kwent kw_sd[] = {
	{ "lun", K_LUN }, { "size", K_SIZE }, { "threads", K_SD_THREADS },
	{ "offset", K_OFFSET }, { "align", K_ALIGN }, { "range", K_SD_RANGE },
	{ "hitarea", K_SD_HITAREA },
	{ "host", K_UNSUP }, { "hd", K_UNSUP }, { "count", K_UNSUP }, { "kstat", K_UNSUP },
	{ "instance", K_UNSUP }, { "replay", K_UNSUP }, { "journal", K_UNSUP },
	{ "resetlun", K_UNSUP }, { "resetbus", K_UNSUP }, { "openflags", K_UNSUP },
	{ "dedupratio", K_UNSUP }, { "streams", K_UNSUP },
};

static const struct kwent kw_wd[] = {
	{ "skew", K_SKEW }, { "xfersize", K_WD_XFER }, { "rdpct", K_WD_RDPCT },
	{ "readpct", K_WD_RDPCT }, { "wrpct", K_WD_WRPCT }, { "writepct", K_WD_WRPCT },
	{ "range", K_WD_RANGE }, { "seekpct", K_WD_SEEK }, { "iorate", K_WD_IORATE },
	{ "rhpct", K_RHPCT }, { "whpct", K_WHPCT }, { "hitarea", K_WD_HITAREA },
	{ "hotband", K_UNSUP }, { "stride", K_UNSUP }, { "priority", K_UNSUP },
	{ "host", K_UNSUP }, { "hd", K_UNSUP }, { "openflags", K_UNSUP }, { "user", K_UNSUP },
	{ "threads", K_UNSUP }, { "streams", K_UNSUP },
};

/* rd= takes xfersize=, threads=... as one-value for-loops (For_loop.checkForLoop). */
static const struct kwent kw_rd[] = {
	{ "iorate", K_IORATE }, { "curve", K_CURVE }, { "stopcurve", K_STOPCURVE },
	{ "elapsed", K_ELAPSED }, { "interval", K_INTERVAL }, { "warmup", K_WARMUP },
	{ "distribution", K_DIST },
	{ "forthreads", K_FORTHREADS }, { "threads", K_FORTHREADS },
	{ "forxfersize", K_FORXFER }, { "xfersize", K_FORXFER },
	{ "forrdpct", K_FORRDPCT }, { "rdpct", K_FORRDPCT },
	{ "forseekpct", K_FORSEEK }, { "seekpct", K_FORSEEK },
	{ "foriorate", K_FORIORATE },
	{ "sd", K_UNSUP }, { "fsd", K_UNSUP }, { "fwd", K_UNSUP }, { "fwdrate", K_UNSUP },
	{ "operations", K_UNSUP }, { "foroperations", K_UNSUP }, { "format", K_UNSUP },
	{ "maxdata", K_UNSUP }, { "pause", K_UNSUP }, { "replay", K_UNSUP },
	{ "startcmd", K_UNSUP }, { "start_cmd", K_UNSUP }, { "endcmd", K_UNSUP },
	{ "end_cmd", K_UNSUP }, { "openflags", K_UNSUP }, { "mount", K_UNSUP },
	{ "forrhpct", K_UNSUP }, { "forwhpct", K_UNSUP }, { "forhitarea", K_UNSUP },
	{ "forcompratio", K_UNSUP }, { "forcompression", K_UNSUP }, { "fordepth", K_UNSUP },
	{ "forwidth", K_UNSUP }, { "forfiles", K_UNSUP }, { "forsizes", K_UNSUP },
	{ "fortotalsize", K_UNSUP }, { "forwss", K_UNSUP }, { "rhpct", K_UNSUP },
	{ "whpct", K_UNSUP }, { "hitarea", K_UNSUP }, { "compratio", K_UNSUP },
};

#define NKW(t) (sizeof(t) / sizeof((t)[0]))

static int kw_find(struct ld *l, const struct tok *t, const struct kwent *tab, size_t n,
		   const char *what)
{
	size_t len = strlen(t->kw), i;
	int found = K_UNSUP;
	bool unsup = false;
	char names[256] = "";

	for (i = 0; i < n; i++)
		if (!strcmp(tab[i].name, t->kw)) {
			if (tab[i].id == K_UNSUP)
				return terr(l, t, "vdbench's %s keyword is not supported by iserbench", what);
			return tab[i].id;
		}
	for (i = 0; i < n; i++) {
		if (strncmp(tab[i].name, t->kw, len))
			continue;
		if (tab[i].id == K_UNSUP) {
			unsup = true;
			continue;
		}
		if (strlen(names) + strlen(tab[i].name) + 3 < sizeof(names)) {
			if (names[0])
				strcat(names, ", ");
			strcat(names, tab[i].name);
		}
		if (found != K_UNSUP && found != tab[i].id)
			found = -2;
		else if (found != -2)
			found = tab[i].id;
	}
	if (found == -2)
		return terr(l, t, "ambiguous abbreviation in %s: %s", what, names);
	if (found != K_UNSUP)
		return found;
	if (unsup)
		return terr(l, t, "vdbench's %s keyword is not supported by iserbench", what);
	return terr(l, t, "unknown keyword in %s", what);
}

/* ---------------- definitions ---------------- */

static int def_name(struct ld *l, const struct tok *t, char *name)
{
	if (one_str(l, t, name, IB_NAME))
		return -1;
	if (!name[0] || strpbrk(name, "*?[]"))
		return terr(l, t, "bad name '%s'", name);
	return 0;
}

static void sd_defaults(struct ib_sd *sd)
{
	memset(sd, 0, sizeof(*sd));
	sd->threads = 8;
	sd->range[1] = 100;
}

static void wd_defaults(struct ib_wd *wd)
{
	memset(wd, 0, sizeof(*wd));
	wd->rdpct = 100;
	wd->seekpct = 100;
	wd->xfer.kind = IB_XFER_FIXED;
	wd->xfer.n = 1;
	wd->xfer.size[0] = 4096;
	wd->range[1] = 100;
	wd->hitarea = 1 << 20;
}

static const double curve_default[] = { 10, 50, 70, 80, 90, 100 };

static void rd_defaults(struct ib_rd *rd)
{
	unsigned i;

	memset(rd, 0, sizeof(*rd));
	rd->iorate = IB_IORATE_MAX;
	rd->ncurve = sizeof(curve_default) / sizeof(curve_default[0]);
	for (i = 0; i < rd->ncurve; i++)
		rd->curve[i] = curve_default[i];
	rd->elapsed = 30;
	rd->interval = 1;
	rd->distribution = IB_DIST_EXPONENTIAL;
}

/* The three kinds of definition, each with its table in ib_parm and its side table in ld. */
enum def_kind { DEF_SD, DEF_WD, DEF_RD };

/* Where one kind's definitions are, as bytes: new_def() works on every kind alike. */
struct def_table {
	const char *kw;                 /* "sd", "wd", "rd" */
	char *arr, *x;                  /* p->sd and l->sdx, ... (moved by def_grow) */
	unsigned *n;                    /* p->nsd, ... */
	size_t size, xsize;             /* of one element of each */
	size_t name_off, line_off, file_off;
	const void *dflt, *dx;          /* the kind's default= definition, which a new one starts from */
};

static struct def_table def_table(struct ld *l, enum def_kind k)
{
	struct ib_parm *p = l->p;

	switch (k) {
	case DEF_SD:
		return (struct def_table){ "sd", (char *)p->sd, (char *)l->sdx, &p->nsd, sizeof(*p->sd),
					   sizeof(*l->sdx), offsetof(struct ib_sd, name),
					   offsetof(struct ib_sd, line), offsetof(struct sdx, file), &l->dsd,
					   &l->dsdx };
	case DEF_WD:
		return (struct def_table){ "wd", (char *)p->wd, (char *)l->wdx, &p->nwd, sizeof(*p->wd),
					   sizeof(*l->wdx), offsetof(struct ib_wd, name),
					   offsetof(struct ib_wd, line), offsetof(struct wdx, file), &l->dwd,
					   &l->dwdx };
	default:
		return (struct def_table){ "rd", (char *)p->rd, (char *)l->rdx, &p->nrd, sizeof(*p->rd),
					   sizeof(*l->rdx), offsetof(struct ib_rd, name),
					   offsetof(struct ib_rd, line), offsetof(struct rdx, file), &l->drd,
					   &l->drdx };
	}
}

/* Room for one more definition of kind k (GROW_DEF needs the typed arrays). */
static bool def_grow(struct ld *l, enum def_kind k)
{
	struct ib_parm *p = l->p;

	if (k == DEF_SD)
		return GROW_DEF(l, p->sd, l->sdx, p->nsd, l->sdcap, l->sdxcap);
	if (k == DEF_WD)
		return GROW_DEF(l, p->wd, l->wdx, p->nwd, l->wdcap, l->wdxcap);
	return GROW_DEF(l, p->rd, l->rdx, p->nrd, l->rdcap, l->rdxcap);
}

/*
 * sd=, wd= or rd= (k) NAME at token ti: a new definition that starts as the
 * kind's default= one.  Returns its index, -1 for NAME "default" (the
 * keywords that follow change the default), or -2 on error.
 */
static int new_def(struct ld *l, int ti, enum def_kind k)
{
	const struct tok *t = &l->tok[ti];
	struct def_table d = def_table(l, k);
	char name[IB_NAME], *e, *x;
	unsigned i;
	int line;

	if (def_name(l, t, name))
		return -2;
	if (!strcmp(name, "default"))
		return -1;
	for (i = 0; i < *d.n; i++) {
		e = d.arr + i * d.size;
		if (!strcmp(e + d.name_off, name)) {
			memcpy(&line, e + d.line_off, sizeof(line));
			return terr(l, t, "%s=%s is defined twice (also line %d)", d.kw, name, line), -2;
		}
	}
	if (!def_grow(l, k))
		return terr(l, t, "more than %d %s= definitions", MAX_DEFS, d.kw), -2;
	d = def_table(l, k);
	e = d.arr + *d.n * d.size;
	x = d.x + *d.n * d.xsize;
	memcpy(e, d.dflt, d.size);
	memcpy(x, d.dx, d.xsize);
	strcpy(e + d.name_off, name);
	memcpy(e + d.line_off, &t->line, sizeof(t->line));
	memcpy(x + d.file_off, &t->file, sizeof(t->file));
	return (int)(*d.n)++;
}

static int gen_kw(struct ld *l, const struct tok *t)
{
	char v[ITEM_LEN];
	int id = kw_find(l, t, kw_gen, NKW(kw_gen), "the general parameters (before sd=)");

	if (id < 0)
		return -1;
	if (id == K_DATA_ERRORS) {
		/* data_errors= is a Data Validation parameter: it asks for DV. */
		if (split_value(l, t, false, &l->it))
			return -1;
		l->p->validate = true;
		return 0;
	}
	if (one_str(l, t, v, sizeof(v)))
		return -1;
	if (!strcasecmp(v, "yes") || !strcasecmp(v, "y"))
		l->p->validate = true;
	else if (!strcasecmp(v, "no") || !strcasecmp(v, "n"))
		l->p->validate = false;
	else
		return terr(l, t, "validate=%s is not supported by iserbench (yes or no)", v);
	return 0;
}

static int sd_kw(struct ld *l, const struct tok *t, struct ib_sd *sd, struct sdx *x, bool dflt)
{
	int id = kw_find(l, t, kw_sd, NKW(kw_sd), "sd=");
	double v;

	switch (id) {
	case K_LUN:
		if (dflt)
			return terr(l, t, "lun= is not allowed for sd=default");
		return one_str(l, t, sd->lun, sizeof(sd->lun));
	case K_SIZE:
		return byte_val(l, t, &sd->size, false, true);
	case K_SD_THREADS:
		if (one_num(l, t, false, &v, 1, 1024, true))
			return -1;
		sd->threads = (unsigned)v;
		return 0;
	case K_OFFSET:
		return byte_val(l, t, &sd->offset, false, true);
	case K_ALIGN:
		return byte_val(l, t, &sd->align, true, true);
	case K_SD_RANGE:
		return range_val(l, t, sd->range);
	case K_SD_HITAREA:
		x->hitarea_set = true;
		return byte_val(l, t, &x->hitarea, true, true);
	default:
		return -1;
	}
}

/*
 * xfersize=: one size, (size,pct,...) pairs summing to 100, or
 * (min,max,align) -- WD_entry.parseXfersize() tells the last two apart by
 * count: three values are always a range.
 */
static int xfer_kw(struct ld *l, const struct tok *t, struct ib_xfersize *x)
{
	double v[MAX_ITEMS], sum = 0;
	unsigned n, i;

	if (nums(l, t, false, v, &n, MAX_ITEMS, 0, BYTES_MAX, false))
		return -1;
	memset(x, 0, sizeof(*x));
	if (n == 3) {
		if (check_bytes(l, t, v[0], true, false) || check_bytes(l, t, v[1], true, false) ||
		    check_bytes(l, t, v[2], true, true))
			return -1;
		if (v[0] >= v[1])
			return terr(l, t, "(min,max,align): min %.0f is not below max %.0f", v[0], v[1]);
		x->kind = IB_XFER_RANGE;
		x->min = (uint64_t)v[0];
		x->max = (uint64_t)v[1];
		x->align = (uint64_t)v[2];
		return 0;
	}
	if (n == 1) {
		if (check_bytes(l, t, v[0], true, true))
			return -1;
		x->kind = IB_XFER_FIXED;
		x->n = 1;
		x->size[0] = (uint64_t)v[0];
		return 0;
	}
	if (n % 2)
		return terr(l, t, "a distribution takes pairs (size,pct,size,pct...), not %u values", n);
	if (n / 2 > IB_LIST)
		return terr(l, t, "a distribution of more than %d sizes", IB_LIST);
	for (i = 0; i < n; i += 2) {
		if (check_bytes(l, t, v[i], true, true))
			return -1;
		if (v[i + 1] > 100)
			return terr(l, t, "percentage %g is above 100", v[i + 1]);
		x->size[i / 2] = (uint64_t)v[i];
		x->pct[i / 2] = v[i + 1];
		sum += v[i + 1];
	}
	/* vdbench compares Math.round(sum) with 100. */
	if (lround(sum) != 100)
		return terr(l, t, "the percentages add up to %g, not 100", sum);
	x->kind = IB_XFER_DIST;
	x->n = n / 2;
	return 0;
}

static int wd_kw(struct ld *l, int ti, struct ib_wd *wd, struct wdx *x)
{
	const struct tok *t = &l->tok[ti];
	double v;
	int id;

	if (!strcmp(t->kw, "sd")) {
		x->sd_tok = ti;             /* resolved when every sd= is known */
		return split_value(l, t, false, &l->it);
	}
	id = kw_find(l, t, kw_wd, NKW(kw_wd), "wd=");
	switch (id) {
	case K_SKEW:
		return one_num(l, t, false, &wd->skew, 0, 100, false);
	case K_WD_XFER:
		return xfer_kw(l, t, &wd->xfer);
	case K_WD_RDPCT:
		return one_num(l, t, false, &wd->rdpct, 0, 100, false);
	case K_WD_WRPCT:
		if (one_num(l, t, false, &v, 0, 100, false))
			return -1;
		wd->rdpct = 100 - v;
		return 0;
	case K_WD_RANGE:
		return range_val(l, t, wd->range);
	case K_WD_SEEK:
		if (split_value(l, t, false, &l->it))
			return -1;
		if (l->it.n != 1)
			return terr(l, t, "takes one value, not %u", l->it.n);
		if (seek_word(l->it.v[0], &v))
			return terr(l, t, "'%s' is not a percentage, seq, random or eof", l->it.v[0]);
		wd->seek_eof = v < 0;
		wd->seekpct = v < 0 ? 0 : v;
		return 0;
	case K_WD_IORATE:
		return one_num(l, t, false, &wd->iorate, 0, 1e9, false);
	case K_RHPCT:
		return one_num(l, t, false, &wd->rhpct, 0, 100, false);
	case K_WHPCT:
		return one_num(l, t, false, &wd->whpct, 0, 100, false);
	case K_WD_HITAREA:
		x->hitarea_set = true;
		return byte_val(l, t, &wd->hitarea, true, true);
	default:
		return -1;
	}
}

/* A for-loop given again replaces the old one and moves to the end (For_loop()). */
static void for_add(struct ib_rd *rd, enum ib_for f)
{
	unsigned i, o = 0;

	for (i = 0; i < rd->nfor; i++)
		if (rd->for_order[i] != f)
			rd->for_order[o++] = rd->for_order[i];
	rd->for_order[o++] = f;
	rd->nfor = o;
}

static int rd_kw(struct ld *l, int ti, struct ib_rd *rd, struct rdx *x)
{
	const struct tok *t = &l->tok[ti];
	double v[IB_LIST];
	unsigned n, i;
	int id;

	if (!strcmp(t->kw, "wd")) {
		/* RD_entry.addWD(): once per rd= */
		if (l->rd_wd_here)
			return terr(l, t, "wd= given twice for one rd=; list them: wd=(w1,w2)");
		l->rd_wd_here = true;
		x->wd_tok = ti;
		return split_value(l, t, false, &l->it);
	}
	id = kw_find(l, t, kw_rd, NKW(kw_rd), "rd=");
	switch (id) {
	case K_IORATE:
		if (split_value(l, t, false, &l->it))
			return -1;
		x->iorate_set = true;
		if (l->it.n == 1 && !strcasecmp(l->it.v[0], "max")) {
			rd->iorate = IB_IORATE_MAX;
			rd->nrate = 0;
			return 0;
		}
		if (l->it.n == 1 && !strcasecmp(l->it.v[0], "curve")) {
			rd->iorate = IB_IORATE_CURVE;
			rd->nrate = 0;
			return 0;
		}
		if (nums(l, t, false, v, &n, IB_LIST, 0, 1e9, false))
			return -1;
		for (i = 0; i < n; i++) {
			if (v[i] <= 0)
				return terr(l, t, "a rate must be above 0 (iorate=max for no limit)");
			rd->rate[i] = v[i];
		}
		rd->iorate = IB_IORATE_FIXED;
		rd->nrate = n;
		return 0;
	case K_CURVE:
		if (nums(l, t, false, v, &n, IB_LIST, 0, 100, false))
			return -1;
		for (i = 0; i < n; i++) {
			if (v[i] <= 0)
				return terr(l, t, "a curve point must be above 0 percent");
			rd->curve[i] = v[i];
		}
		rd->ncurve = n;
		return 0;
	case K_STOPCURVE:
		if (one_num(l, t, false, &rd->stopcurve, 0, 1e9, false))
			return -1;
		return rd->stopcurve > 0 ? 0 : terr(l, t, "must be above 0 (milliseconds)");
	case K_ELAPSED:
		if (one_num(l, t, true, &rd->elapsed, 0, 1e9, false))
			return -1;
		return rd->elapsed > 0 ? 0 : terr(l, t, "must be above 0 seconds");
	case K_INTERVAL:
		if (one_num(l, t, true, &rd->interval, 0, 1e9, false))
			return -1;
		return rd->interval > 0 ? 0 : terr(l, t, "must be above 0 seconds");
	case K_WARMUP:
		return one_num(l, t, true, &rd->warmup, 0, 1e9, false);
	case K_DIST: {
		char s[ITEM_LEN];
		size_t len;

		if (one_str(l, t, s, sizeof(s)))
			return -1;
		len = strlen(s);
		if (len && !strncasecmp("exponential", s, len))
			rd->distribution = IB_DIST_EXPONENTIAL;
		else if (len && !strncasecmp("uniform", s, len))
			rd->distribution = IB_DIST_UNIFORM;
		else if (len && !strncasecmp("deterministic", s, len))
			rd->distribution = IB_DIST_DETERMINISTIC;
		else if (len && !strncasecmp("variable", s, len))
			return terr(l, t, "distribution=variable is not supported by iserbench");
		else
			return terr(l, t, "'%s': exponential, uniform or deterministic", s);
		return 0;
	}
	case K_FORTHREADS:
		if (nums(l, t, false, v, &n, IB_LIST, 1, 1024, true))
			return -1;
		for (i = 0; i < n; i++)
			rd->threads[i] = (unsigned)v[i];
		rd->nthreads = n;
		for_add(rd, IB_FOR_THREADS);
		return 0;
	case K_FORXFER:
		if (nums(l, t, false, v, &n, IB_LIST, 0, BYTES_MAX, false))
			return -1;
		for (i = 0; i < n; i++) {
			if (check_bytes(l, t, v[i], true, true))
				return -1;
			rd->xfersize[i] = (uint64_t)v[i];
		}
		rd->nxfersize = n;
		for_add(rd, IB_FOR_XFERSIZE);
		return 0;
	case K_FORRDPCT:
		if (nums(l, t, false, rd->rdpct, &rd->nrdpct, IB_LIST, 0, 100, false))
			return -1;
		for_add(rd, IB_FOR_RDPCT);
		return 0;
	case K_FORSEEK:
		/* vdbench takes only numbers here; seq/random/eof as in wd= too */
		if (split_value(l, t, false, &l->it))
			return -1;
		if (l->it.n > IB_LIST)
			return terr(l, t, "list of %u values is longer than %u", l->it.n, IB_LIST);
		for (i = 0; i < l->it.n; i++)
			if (seek_word(l->it.v[i], &rd->seekpct[i]))
				return terr(l, t, "'%s' is not a percentage, seq, random or eof",
					    l->it.v[i]);
		rd->nseekpct = l->it.n;
		for_add(rd, IB_FOR_SEEKPCT);
		return 0;
	case K_FORIORATE:
		if (nums(l, t, false, v, &n, IB_LIST, 0, 1e9, false))
			return -1;
		for (i = 0; i < n; i++) {
			if (v[i] <= 0)
				return terr(l, t, "a rate must be above 0");
			rd->foriorate[i] = v[i];
		}
		rd->nforiorate = n;
		for_add(rd, IB_FOR_IORATE);
		return 0;
	default:
		return -1;
	}
}

/* ---------------- reading the file ---------------- */

static int add_tok(struct ld *l, const char *s, const char *file, int line)
{
	const char *eq = strchr(s, '=');
	struct tok *t;
	size_t kl, i;

	if (!eq || eq == s)
		return lerr(l, file, line, NULL, "'%.80s': expecting keyword=value", s);
	kl = (size_t)(eq - s);
	for (i = 0; i < kl; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return lerr(l, file, line, NULL, "'%.80s': expecting keyword=value", s);
	if (kl < 2 || !eq[1]) {
		char kb[8];

		snprintf(kb, sizeof(kb), "%.*s", (int)kl, s);
		return lerr(l, file, line, kb, kl < 2 ? "a keyword has at least 2 characters"
			    : "no value");
	}
	t = grow(l->tok, &l->tokcap, l->ntok + 1, sizeof(*l->tok), MAX_TOKENS);
	if (!t)
		return lerr(l, file, line, NULL, "more than %d parameters", MAX_TOKENS);
	l->tok = t;
	t = &l->tok[l->ntok];
	t->kw = strndup(s, kl);
	t->val = strdup(eq + 1);
	t->file = file;
	t->line = line;
	if (!t->kw || !t->val) {
		free(t->kw);
		free(t->val);
		return lerr(l, NULL, 0, NULL, "out of memory");
	}
	for (i = 0; i < kl; i++)
		t->kw[i] = (char)tolower((unsigned char)t->kw[i]);
	l->ntok++;
	return 0;
}

static int flush_cur(struct ld *l)
{
	int rc = 0;

	if (l->clen)
		rc = add_tok(l, l->cur, l->cfile, l->cline);
	l->clen = 0;
	if (l->cur)
		l->cur[0] = '\0';
	return rc;
}

/*
 * One line's parameters.  Commas outside parentheses and quotes separate
 * tokens; a line ending inside parentheses carries the value on to the
 * next line (vdbench joins lines that end with a comma; inside a list that
 * is the only place it matters).
 */
static int feed_line(struct ld *l, const char *s, const char *file, int line)
{
	for (; *s; s++) {
		char c = *s;

		if (l->clen == 0 && !l->cquote && c == ',' && l->cdepth == 0)
			continue;
		if (l->clen == 0) {
			l->cfile = file;
			l->cline = line;
		}
		if (c == '"')
			l->cquote = !l->cquote;
		else if (!l->cquote && c == '(')
			l->cdepth++;
		else if (!l->cquote && c == ')' && --l->cdepth < 0)
			return lerr(l, file, line, NULL, "unmatched ')' in '%.80s'", l->cur ? l->cur : "");
		else if (!l->cquote && c == ',' && l->cdepth == 0) {
			if (flush_cur(l))
				return -1;
			continue;
		}
		if (cur_add(l, c))
			return -1;
	}
	if (l->cdepth == 0 && !l->cquote)
		return flush_cur(l);
	return 0;
}

/* The keyword a value in progress belongs to, for messages. */
static const char *cur_kw(struct ld *l, char *buf, size_t len)
{
	const char *eq = l->cur ? strchr(l->cur, '=') : NULL;

	if (!eq)
		return "?";
	snprintf(buf, len, "%.*s", (int)(eq - l->cur), l->cur);
	return buf;
}

static const char *var_get(struct ld *l, const char *name, size_t n, bool prefix, size_t *used)
{
	const char *best = NULL;
	size_t bestlen = 0;
	unsigned i;

	for (i = 0; i < l->nvars; i++) {
		const char *v = l->vars[i], *eq = v ? strchr(v, '=') : NULL;
		size_t kl;

		if (!eq)
			continue;
		kl = (size_t)(eq - v);
		if (kl == 0 || kl > n || strncmp(v, name, kl))
			continue;
		if ((kl == n || prefix) && kl > bestlen) {
			best = eq + 1;
			bestlen = kl;
		}
	}
	*used = bestlen;
	return best;
}

/*
 * $name and ${name} from the command line (InsertHosts.substituteLine()).
 * vdbench replaces the text "$key" wherever it appears, so "$lun2" with
 * only lun= given is the value of lun followed by "2": the longest given
 * name the text starts with wins.  A $name that nothing matches is an error.
 */
/* The keyword whose value holds line[pos], for messages; NULL if none. */
static const char *kw_at(const char *line, size_t pos, char *buf, size_t len)
{
	size_t eq = pos, st;

	while (eq > 0 && line[eq] != '=')
		eq--;
	if (line[eq] != '=')
		return NULL;
	st = eq;
	while (st > 0 && line[st - 1] != ',' && line[st - 1] != '(')
		st--;
	if (st == eq)
		return NULL;
	snprintf(buf, len, "%.*s", (int)(eq - st), line + st);
	return buf;
}

static int substitute(struct ld *l, const char *in, char *out, size_t outlen,
		      const char *file, int line)
{
	const char *start = in;
	char kb[64];
	size_t o = 0;

	while (*in) {
		const char *val = NULL;
		size_t skip = 1, used = 0, vl;

		if (in[0] == '$' && in[1] == '{') {
			const char *end = strchr(in + 2, '}');

			if (!end)
				return lerr(l, file, line, NULL, "'${' without '}'");
			val = var_get(l, in + 2, (size_t)(end - in - 2), false, &used);
			if (!val)
				return lerr(l, file, line, kw_at(start, (size_t)(in - start), kb, sizeof(kb)),
					    "variable '${%.*s}' is not set: give %.*s=VALUE after the "
					    "parameter file", (int)(end - in - 2), in + 2,
					    (int)(end - in - 2), in + 2);
			skip = (size_t)(end - in) + 1;
		} else if (in[0] == '$' && (isalnum((unsigned char)in[1]) || in[1] == '_')) {
			size_t n = 1;

			while (isalnum((unsigned char)in[n]) || in[n] == '_')
				n++;
			val = var_get(l, in + 1, n - 1, true, &used);
			if (!val)
				return lerr(l, file, line, kw_at(start, (size_t)(in - start), kb, sizeof(kb)),
					    "variable '$%.*s' is not set: give %.*s=VALUE after the "
					    "parameter file", (int)(n - 1), in + 1, (int)(n - 1), in + 1);
			skip = used + 1;
		}
		if (val) {
			vl = strlen(val);
			if (o + vl + 1 > outlen)
				return lerr(l, file, line, NULL, "line longer than %zu characters", outlen);
			memcpy(out + o, val, vl);
			o += vl;
			in += skip;
			continue;
		}
		if (o + 2 > outlen)
			return lerr(l, file, line, NULL, "line longer than %zu characters", outlen);
		out[o++] = *in++;
	}
	out[o] = '\0';
	return 0;
}

static const char *keep_name(struct ld *l, const char *path)
{
	char **f = realloc(l->files, sizeof(*f) * (l->nfiles + 1));

	if (!f)
		return NULL;
	l->files = f;
	f[l->nfiles] = strdup(path);
	return f[l->nfiles] ? f[l->nfiles++] : NULL;
}

static int read_file(struct ld *l, const char *path, int depth, const char *from, int fline);

/*
 * include=FILE: a relative name is looked for next to the including file,
 * then in the current directory (Vdb_scan.readIncludeFile() does so for a
 * name without a '/'; iserbench for any relative name).
 * vdbench refuses an include inside an include; iserbench allows nesting
 * up to MAX_DEPTH, which also stops a file including itself.
 */
static int do_include(struct ld *l, const char *line, const char *file, int lineno, int depth)
{
	char name[ITEM_LEN], path[2 * ITEM_LEN];
	const char *v = line + strlen("include="), *slash;
	size_t n = strlen(v);
	struct stat st;
	char buf[64];

	if (l->clen || l->cdepth)
		return lerr(l, l->cfile, l->cline, cur_kw(l, buf, sizeof(buf)), "missing ')'");
	if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
		v++;
		n -= 2;
	}
	if (n == 0 || n >= sizeof(name))
		return lerr(l, file, lineno, "include", "bad file name");
	memcpy(name, v, n);
	name[n] = '\0';
	slash = strrchr(file, '/');
	if (name[0] != '/' && slash)
		snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - file), file, name);
	else
		snprintf(path, sizeof(path), "%s", name);
	if (stat(path, &st) != 0 && stat(name, &st) == 0)
		snprintf(path, sizeof(path), "%s", name);
	if (depth + 1 > MAX_DEPTH)
		return lerr(l, file, lineno, "include", "%s: includes nested more than %d deep",
			    name, MAX_DEPTH);
	if (text_add(l, "* include=", 10) || text_add(l, name, strlen(name)) ||
	    text_add(l, " follows\n", 9))
		return -1;
	if (read_file(l, path, depth + 1, file, lineno))
		return -1;
	return text_add(l, "* end of include\n", 17);
}

/* Cut a line at the first blank outside quotes: vdbench ignores the rest. */
static int cut_comment(struct ld *l, char *s, const char *file, int line)
{
	bool q = false;

	for (; *s; s++) {
		if (*s == '"')
			q = !q;
		else if (!q && (*s == ' ' || *s == '\t')) {
			*s = '\0';
			return 0;
		}
	}
	return q ? lerr(l, file, line, NULL, "unterminated '\"'") : 0;
}

static int read_file(struct ld *l, const char *path, int depth, const char *from, int fline)
{
	FILE *f;
	const char *fname;
	char *line = NULL, *sub = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0, rc = -1;
	char buf[64];
	struct stat st;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		errno = EISDIR, f = NULL;
	else
		f = fopen(path, "r");
	if (!f) {
		if (from)
			return lerr(l, from, fline, "include", "%s: %s", path, strerror(errno));
		return lerr(l, path, 0, NULL, "cannot open: %s", strerror(errno));
	}
	fname = keep_name(l, path);
	sub = malloc(MAX_LINE + 1);
	if (!fname || !sub) {
		lerr(l, NULL, 0, NULL, "out of memory");
		goto out;
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		char *s = line;

		lineno++;
		if ((size_t)n > MAX_LINE) {
			lerr(l, fname, lineno, NULL, "line longer than %d characters", MAX_LINE);
			goto out;
		}
		if (memchr(line, '\0', (size_t)n)) {
			lerr(l, fname, lineno, NULL, "NUL byte: not a text file");
			goto out;
		}
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		while (*s == ' ' || *s == '\t')
			s++;
		if (!strncmp(s, "eof", 3) && (!s[3] || isspace((unsigned char)s[3])))
			break;
		if (!*s || *s == '*' || *s == '#' || *s == '/') {
			if (text_add(l, line, (size_t)n) || text_add(l, "\n", 1))
				goto out;
			continue;
		}
		if (substitute(l, s, sub, MAX_LINE + 1, fname, lineno) ||
		    text_add(l, sub, strlen(sub)) || text_add(l, "\n", 1) ||
		    cut_comment(l, sub, fname, lineno))
			goto out;
		if (!strncasecmp(sub, "include=", 8)) {
			if (do_include(l, sub, fname, lineno, depth))
				goto out;
			continue;
		}
		if (feed_line(l, sub, fname, lineno))
			goto out;
	}
	if (l->clen || l->cdepth || l->cquote) {
		lerr(l, l->cfile, l->cline, cur_kw(l, buf, sizeof(buf)),
		     l->cquote ? "unterminated '\"'" : "missing ')'");
		goto out;
	}
	rc = 0;
out:
	free(line);
	free(sub);
	fclose(f);
	return rc;
}

/* ---------------- resolving names and checks ---------------- */

static int resolve_sds(struct ld *l, unsigned w)
{
	struct ib_parm *p = l->p;
	struct ib_wd *wd = &p->wd[w];
	const struct tok *t;
	unsigned i, j, k;

	if (l->wdx[w].sd_tok < 0)
		return lerr(l, l->wdx[w].file, wd->line, "sd", "wd=%s names no sd=", wd->name);
	t = &l->tok[l->wdx[w].sd_tok];
	if (split_value(l, t, false, &l->it))
		return -1;
	wd->nsd = 0;
	for (i = 0; i < l->it.n; i++) {
		bool hit = false;

		for (j = 0; j < p->nsd; j++) {
			if (fnmatch(l->it.v[i], p->sd[j].name, 0))
				continue;
			hit = true;
			for (k = 0; k < wd->nsd; k++)
				if (wd->sd[k] == j)
					return terr(l, t, "wd=%s asks for sd=%s twice", wd->name,
						    p->sd[j].name);
			if (wd->nsd >= IB_LIST)
				return terr(l, t, "wd=%s: more than %d SDs", wd->name, IB_LIST);
			wd->sd[wd->nsd++] = j;
		}
		if (!hit)
			return terr(l, t, "wd=%s: no sd= matches '%s'", wd->name, l->it.v[i]);
	}
	/* vdbench keeps hitarea= per SD; a WD takes its first SD's. */
	if (!l->wdx[w].hitarea_set && l->sdx[wd->sd[0]].hitarea_set)
		wd->hitarea = l->sdx[wd->sd[0]].hitarea;
	if (wd->skew > 0 && wd->iorate > 0)
		return lerr(l, l->wdx[w].file, wd->line, "skew",
			    "wd=%s: skew= and iorate= exclude each other", wd->name);
	return 0;
}

/* Skews of an rd's WDs: at most 100, exactly 100 if every WD has one. */
static int check_skew(const struct ib_parm *p, const struct ib_rd *rd, char *why, size_t len)
{
	double sum = 0;
	unsigned i, nskew = 0;
	const char *free_wd = NULL;

	for (i = 0; i < rd->nwd; i++) {
		const struct ib_wd *wd = &p->wd[rd->wd[i]];

		if (wd->skew > 0) {
			sum += wd->skew;
			nskew++;
		} else if (!free_wd) {
			free_wd = wd->name;
		}
	}
	if (nskew == 0)
		return 0;
	if (sum > 100 + 1e-6) {
		snprintf(why, len, "rd=%s: the skews of its WDs total %g, more than 100",
			 rd->name, sum);
		return -1;
	}
	if (!free_wd && fabs(sum - 100) > 0.01) {
		snprintf(why, len, "rd=%s: the skews of its WDs total %g, not 100", rd->name, sum);
		return -1;
	}
	if (free_wd && sum > 100 - 1e-6) {
		snprintf(why, len, "rd=%s: the skews total 100, leaving nothing for wd=%s",
			 rd->name, free_wd);
		return -1;
	}
	return 0;
}

/* x is a whole multiple of y (both positive), allowing for rounding. */
static bool multiple(double x, double y)
{
	double r = x / y;

	return fabs(r - round(r)) < 1e-9 * (r > 1 ? r : 1);
}

static int finish_rd(struct ld *l, unsigned r)
{
	struct ib_parm *p = l->p;
	struct ib_rd *rd = &p->rd[r];
	const char *file = l->rdx[r].file;
	const struct tok *t;
	char why[256];
	unsigned i, j, k;

	if (l->rdx[r].wd_tok < 0)
		return lerr(l, file, rd->line, "wd", "rd=%s names no wd=", rd->name);
	t = &l->tok[l->rdx[r].wd_tok];
	if (split_value(l, t, false, &l->it))
		return -1;
	rd->nwd = 0;
	for (i = 0; i < l->it.n; i++) {
		bool hit = false;

		for (j = 0; j < p->nwd; j++) {
			if (fnmatch(l->it.v[i], p->wd[j].name, 0))
				continue;
			hit = true;
			for (k = 0; k < rd->nwd && rd->wd[k] != j; k++)
				;
			if (k < rd->nwd)
				continue;
			if (rd->nwd >= IB_LIST)
				return terr(l, t, "rd=%s: more than %d WDs", rd->name, IB_LIST);
			rd->wd[rd->nwd++] = j;
		}
		if (!hit)
			return terr(l, t, "rd=%s: no wd= matches '%s'", rd->name, l->it.v[i]);
	}
	if (!l->rdx[r].iorate_set && rd->nforiorate == 0)
		return lerr(l, file, rd->line, "iorate", "rd=%s has no iorate= (max, curve or a rate)",
			    rd->name);
	if (rd->nforiorate && rd->iorate == IB_IORATE_CURVE)
		return lerr(l, file, rd->line, "foriorate",
			    "rd=%s: foriorate= and iorate=curve exclude each other", rd->name);
	if (rd->nforiorate && rd->iorate == IB_IORATE_FIXED && rd->nrate > 1)
		return lerr(l, file, rd->line, "foriorate",
			    "rd=%s: foriorate= and an iorate= list exclude each other", rd->name);
	/* RD_entry.parserCleanup()'s checks */
	if (rd->elapsed / rd->interval < 2 - 1e-9)
		return lerr(l, file, rd->line, "elapsed",
			    "rd=%s: elapsed=%g must be at least twice interval=%g", rd->name,
			    rd->elapsed, rd->interval);
	if (!multiple(rd->elapsed, rd->interval))
		return lerr(l, file, rd->line, "elapsed",
			    "rd=%s: elapsed=%g is not a multiple of interval=%g", rd->name,
			    rd->elapsed, rd->interval);
	if (rd->warmup > 0 && !multiple(rd->warmup, rd->interval))
		return lerr(l, file, rd->line, "warmup",
			    "rd=%s: warmup=%g is not a multiple of interval=%g", rd->name,
			    rd->warmup, rd->interval);
	if (rd->warmup >= rd->elapsed)
		return lerr(l, file, rd->line, "warmup",
			    "rd=%s: warmup=%g leaves nothing of elapsed=%g", rd->name,
			    rd->warmup, rd->elapsed);
	if (check_skew(p, rd, why, sizeof(why)))
		return lerr(l, file, rd->line, "skew", "%s", why);
	return 0;
}

static int parse_tokens(struct ld *l)
{
	enum { SEC_GEN, SEC_SD, SEC_WD, SEC_RD } sec = SEC_GEN;
	struct ib_parm *p = l->p;
	int cur = -1;
	unsigned i;

	for (i = 0; i < l->ntok && !l->failed; i++) {
		const struct tok *t = &l->tok[i];

		if (!strcmp(t->kw, "sd") && sec <= SEC_SD) {
			sec = SEC_SD;
			cur = new_def(l, (int)i, DEF_SD);
		} else if (!strcmp(t->kw, "wd") && sec <= SEC_WD) {
			sec = SEC_WD;
			cur = new_def(l, (int)i, DEF_WD);
		} else if (!strcmp(t->kw, "rd")) {
			sec = SEC_RD;
			l->rd_wd_here = false; /* wd= once per rd= (default= included): rd_kw() */
			cur = new_def(l, (int)i, DEF_RD);
		} else if (sec == SEC_GEN) {
			gen_kw(l, t);
		} else if (sec == SEC_SD) {
			sd_kw(l, t, cur < 0 ? &l->dsd : &p->sd[cur], cur < 0 ? &l->dsdx : &l->sdx[cur],
			      cur < 0);
		} else if (sec == SEC_WD) {
			wd_kw(l, (int)i, cur < 0 ? &l->dwd : &p->wd[cur], cur < 0 ? &l->dwdx : &l->wdx[cur]);
		} else {
			rd_kw(l, (int)i, cur < 0 ? &l->drd : &p->rd[cur], cur < 0 ? &l->drdx : &l->rdx[cur]);
		}
		if (cur == -2)
			break;
	}
	if (l->failed)
		return -1;
	for (i = 0; i < p->nsd; i++)
		if (!p->sd[i].lun[0])
			return lerr(l, l->sdx[i].file, p->sd[i].line, "lun", "sd=%s has no lun=",
				    p->sd[i].name);
	for (i = 0; i < p->nwd; i++)
		if (resolve_sds(l, i))
			return -1;
	for (i = 0; i < p->nrd; i++)
		if (finish_rd(l, i))
			return -1;
	return 0;
}

int ib_parm_load(const char *path, char *const *vars, unsigned nvars,
		 struct ib_parm *p, char *err, size_t errlen)
{
	struct ld *l;
	char dummy[1];
	unsigned i;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	err[0] = '\0';
	l = calloc(1, sizeof(*l));
	if (!l) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	l->p = p;
	l->err = err;
	l->errlen = errlen;
	l->vars = vars;
	l->nvars = vars ? nvars : 0;
	sd_defaults(&l->dsd);
	wd_defaults(&l->dwd);
	rd_defaults(&l->drd);
	l->dsdx.hitarea = 1 << 20;
	l->dwdx.sd_tok = -1;
	l->drdx.wd_tok = -1;

	if (read_file(l, path, 0, NULL, 0) == 0 && parse_tokens(l) == 0) {
		if (p->nrd == 0)
			lerr(l, path, 0, NULL, "no rd= (run definition) in the file");
		else
			rc = 0;
	}
	if (rc == 0) {
		p->text = l->text ? l->text : strdup("");
		l->text = NULL;
		if (!p->text)
			rc = lerr(l, NULL, 0, NULL, "out of memory");
	}
	for (i = 0; i < l->ntok; i++) {
		free(l->tok[i].kw);
		free(l->tok[i].val);
	}
	for (i = 0; i < l->nfiles; i++)
		free(l->files[i]);
	free(l->files);
	free(l->tok);
	free(l->text);
	free(l->cur);
	free(l->sdx);
	free(l->wdx);
	free(l->rdx);
	free(l);
	if (rc)
		ib_parm_free(p);
	return rc;
}

void ib_parm_free(struct ib_parm *p)
{
	if (!p)
		return;
	free(p->sd);
	free(p->wd);
	free(p->rd);
	free(p->text);
	memset(p, 0, sizeof(*p));
}

/* ---------------- runs ---------------- */

/*
 * vdbench's curve points (For_loop.for_add_curve(), RD_entry.set_iorate()):
 * (int) max * (int) pct / 100 in integer arithmetic, then rounded up to a
 * multiple of 100 above 1000, else to a multiple of 10.  vdbench stops the
 * curve at a point that comes out below 10; that is a 0 here.
 */
double ib_curve_rate(double max_rate, double pct)
{
	int64_t m, r;

	if (!(max_rate >= 1) || !(pct > 0) || max_rate > 1e15 || pct > 1e6)
		return 0;
	m = (int64_t)max_rate;
	r = m * (int64_t)pct / 100;
	if (r > 1000)
		r = (r + 99) / 100 * 100;
	else
		r = (r + 9) / 10 * 10;
	return r < 10 ? 0 : (double)r;
}

static void app(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void app(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/* FileAnchor.whatSize()-like: 4k, 1m, 512. */
static void app_size(char *buf, size_t len, double v)
{
	static const char suf[] = "tgmk";
	double unit = 1099511627776.0;
	unsigned i;

	for (i = 0; i < 4; i++, unit /= 1024)
		if (v >= unit && fmod(v, unit) == 0) {
			app(buf, len, "%.0f%c", v / unit, suf[i]);
			return;
		}
	app(buf, len, "%g", v);
}

static unsigned loop_count(const struct ib_rd *rd, int f)
{
	switch (f) {
	case IB_FOR_THREADS: return rd->nthreads;
	case IB_FOR_XFERSIZE: return rd->nxfersize;
	case IB_FOR_RDPCT: return rd->nrdpct;
	case IB_FOR_SEEKPCT: return rd->nseekpct;
	case IB_FOR_IORATE: return rd->nforiorate;
	default: return rd->nrate;      /* IB_FOR_N: the iorate= list */
	}
}

struct runs { struct ib_run *r; unsigned n, cap; };

static struct ib_run *run_add(struct runs *rs)
{
	struct ib_run *r = grow(rs->r, &rs->cap, rs->n + 1, sizeof(*rs->r), MAX_RUNS);

	if (!r)
		return NULL;
	rs->r = r;
	return &rs->r[rs->n++];
}

/* "RD=r1; I/O rate: Uncontrolled MAX; elapsed=30 warmup=5; For loops: threads=8"
 * as vdbench's "Starting RD=..." line (RD_entry.display_run()) has it. */
static void run_label(struct ib_run *run, const struct ib_rd *rd, const char *rate,
		      const char *loops)
{
	run->label[0] = '\0';
	app(run->label, sizeof(run->label), "RD=%s; I/O rate: %s; elapsed=%g", rd->name, rate,
	    rd->elapsed);
	if (rd->warmup > 0)
		app(run->label, sizeof(run->label), " warmup=%g", rd->warmup);
	app(run->label, sizeof(run->label), "; For loops: %s", loops[0] ? loops : "None");
}

int ib_runs_expand(const struct ib_parm *p, struct ib_run **runs, unsigned *nruns,
		   char *err, size_t errlen)
{
	struct runs rs = { 0 };
	unsigned r;
	char dummy[1];

	if (!err || !errlen) {
		err = dummy;
		errlen = sizeof(dummy);
	}
	*runs = NULL;
	*nruns = 0;
	for (r = 0; r < p->nrd; r++) {
		const struct ib_rd *rd = &p->rd[r];
		int loops[IB_FOR_N + 1];
		unsigned idx[IB_FOR_N + 1] = { 0 }, nl = 0, i, c;
		bool controlled = false, done = false;
		char why[256];

		if (rd->nwd == 0 || rd->elapsed <= 0 || rd->interval <= 0) {
			snprintf(err, errlen, "rd=%s (line %d): no wd=, elapsed= or interval=",
				 rd->name, rd->line);
			goto fail;
		}
		if (check_skew(p, rd, why, sizeof(why))) {
			snprintf(err, errlen, "rd=%s (line %d): keyword 'skew': %s", rd->name,
				 rd->line, why);
			goto fail;
		}
		for (i = 0; i < rd->nwd; i++)
			if (p->wd[rd->wd[i]].skew > 0 || p->wd[rd->wd[i]].iorate > 0)
				controlled = true;
		for (i = 0; i < rd->nfor && i < IB_FOR_N; i++)
			if (loop_count(rd, rd->for_order[i]))
				loops[nl++] = rd->for_order[i];
		/* An iorate= list runs inside every forxxx= loop (parserCleanup()). */
		if (rd->iorate == IB_IORATE_FIXED && rd->nrate > 1 && !rd->nforiorate)
			loops[nl++] = IB_FOR_N;
		while (!done) {
			char text[200] = "", rate[64];
			struct ib_run base, *run;
			double frate = -1;

			memset(&base, 0, sizeof(base));
			base.rd = r;
			base.threads = -1;
			base.rdpct = -1;
			base.seekpct = -1;
			base.elapsed = rd->elapsed;
			base.interval = rd->interval;
			base.warmup = rd->warmup;
			base.distribution = rd->distribution;
			base.stopcurve = rd->stopcurve;
			base.curve_base = -1;
			for (i = 0; i < nl; i++) {
				unsigned k = idx[i];

				if (text[0])
					app(text, sizeof(text), " ");
				switch (loops[i]) {
				case IB_FOR_THREADS:
					base.threads = (int)rd->threads[k];
					app(text, sizeof(text), "threads=%u", rd->threads[k]);
					break;
				case IB_FOR_XFERSIZE:
					base.xfersize = rd->xfersize[k];
					app(text, sizeof(text), "xfersize=");
					app_size(text, sizeof(text), (double)rd->xfersize[k]);
					break;
				case IB_FOR_RDPCT:
					base.rdpct = rd->rdpct[k];
					app(text, sizeof(text), "rdpct=%g", rd->rdpct[k]);
					break;
				case IB_FOR_SEEKPCT:
					if (rd->seekpct[k] < 0) {
						base.seek_eof = true;
						app(text, sizeof(text), "seekpct=eof");
					} else {
						base.seekpct = rd->seekpct[k];
						app(text, sizeof(text), "seekpct=%g", rd->seekpct[k]);
					}
					break;
				case IB_FOR_IORATE:
					frate = rd->foriorate[k];
					app(text, sizeof(text), "iorate=%g", frate);
					break;
				default:
					frate = rd->rate[k];
					app(text, sizeof(text), "iorate=%g", frate);
					break;
				}
			}
			if (frate < 0 && rd->iorate == IB_IORATE_FIXED && rd->nrate >= 1)
				frate = rd->rate[0];

			if (!(run = run_add(&rs)))
				goto toomany;
			*run = base;
			if (frate > 0) {
				run->rate_kind = IB_RATE_FIXED;
				run->rate = frate;
				snprintf(rate, sizeof(rate), "%g", frate);
			} else {
				run->rate_kind = IB_RATE_MAX;
				snprintf(rate, sizeof(rate), "%s %s",
					 controlled ? "Controlled" : "Uncontrolled",
					 rd->iorate == IB_IORATE_CURVE ? "curve" : "MAX");
			}
			run_label(run, rd, rate, text);
			if (frate <= 0 && rd->iorate == IB_IORATE_CURVE) {
				int maxrun = (int)rs.n - 1;

				for (c = 0; c < rd->ncurve; c++) {
					if (!(run = run_add(&rs)))
						goto toomany;
					*run = base;
					run->rate_kind = IB_RATE_CURVE;
					run->rate = rd->curve[c];
					run->curve_base = maxrun;
					snprintf(rate, sizeof(rate), "curve %g%%", rd->curve[c]);
					run_label(run, rd, rate, text);
				}
			}

			/* next combination: the last loop turns fastest */
			for (i = nl; i > 0; i--) {
				if (++idx[i - 1] < loop_count(rd, loops[i - 1]))
					break;
				idx[i - 1] = 0;
			}
			done = i == 0;
		}
	}
	*runs = rs.r;
	*nruns = rs.n;
	return 0;
toomany:
	snprintf(err, errlen, "more than %d runs", MAX_RUNS);
fail:
	free(rs.r);
	return -1;
}
