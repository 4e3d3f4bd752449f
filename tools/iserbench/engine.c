/*
 * iserbench engine: drives the runs against the SDs from one thread and one
 * ppoll() loop over every LUN's fd (initiator sessions, io_uring rings).
 *
 * Each SD has threads= slots (preallocated I/O descriptors and aligned
 * buffers).  iorate=max: a slot that completes is refilled at once with an
 * I/O of a WD picked by skew among the run's WDs on that SD.  A fixed rate
 * (or a WD's own iorate=): arrivals are scheduled with the run's
 * distribution, queue on their SD and start when a slot is free.  The
 * response time counts from the start, as vdbench's does (its I/O threads
 * time the read or write call, not the arrival); the time an arrival waited
 * is counted apart as the queue wait, so a target that cannot keep up still
 * shows it (no coordinated omission hidden).  Arrivals start on ticks of
 * ENG_BATCH_NS: the ones due since the last tick start together, leave in
 * one write and come back together, so a paced run wakes about once per
 * batch (as a max run does) instead of once per I/O, a wake-up costing ten
 * times an I/O.  Nothing is allocated per I/O.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <time.h>

#include "ib.h"
#include "lun.h"
#include "validate.h"

#define ENG_QCAP 65536u               /* arrivals waiting for a slot, per SD */
#define ENG_BUF_MAX (4ull << 30)      /* all slot buffers of one SD */
#define ENG_DRAIN_S 30                /* give up on I/Os that do not complete */
#define ENG_ERR_PRINT 5               /* I/O error messages per SD and run */
#define ENG_BATCH_NS 300000ull        /* arrivals started together: at most this late */

struct arrival {
	uint64_t t_ns;
	unsigned wd, pos;
};

/* A WD on one of its SDs during a run. */
struct wdsd {
	unsigned sd;                  /* index into eng.sd */
	uint64_t lo, hi;              /* byte range in the LUN */
	uint64_t seq;                 /* next sequential offset */
	bool done;                    /* seekpct=eof: reached hi */
};

struct eng_wd {
	const struct ib_wd *def;
	double rdpct, seekpct;
	bool eof;
	uint64_t fixed;               /* run's xfersize override, 0: def->xfer */
	double weight;                /* skew, normalised over the run */
	double rate;                  /* own iorate=, 0: none */
	uint64_t next_ns;             /* own stream's next arrival */
	unsigned nws;
	struct wdsd *ws;
};

/* A WD eligible for iorate=max refills on one SD. */
struct maxwd {
	unsigned wd, pos;
	double cum;
};

struct eng_sd {
	const struct ib_sd *def;
	struct eng *e;
	struct ib_lun lun;
	bool open, used;
	uint64_t base, size;          /* offset= and size= within the LUN */
	uint64_t maxlen;              /* the largest transfer: the slot buffer size */
	uint32_t gran;                /* power of two dividing every size and offset */
	unsigned nslots, limit, busy;
	struct ib_io *slots, *free;
	uint8_t *bufs;
	bool validating;
	struct ib_val val;
	struct arrival *q;
	unsigned qhead, qlen;
	bool qwarned;
	unsigned nmax;
	struct maxwd *mx;
	unsigned errs_printed;
};

struct eng {
	const struct ib_parm *p;
	const struct ib_opts *o;
	struct eng_sd *sd;
	unsigned nsd;
	struct eng_wd *wd;            /* the current run's */
	unsigned nwd;
	double *gcum;                 /* skew cumulative over WDs without own rate */
	bool fixed;                   /* the run has a global arrival stream */
	double rate;
	enum ib_dist dist;
	uint64_t next_ns;
	uint64_t tick0;               /* arrivals start on ticks of ENG_BATCH_NS from here */
	bool issuing, counting;
	bool timed;                   /* arrivals are scheduled (fixed rate or a WD's own iorate=) */
	unsigned eof_left;
	struct ib_stats cur;
	struct ib_result *res;
	uint64_t run_errors, io_errors, val_errors;
	uint64_t rng;
	struct pollfd *pfd;
	struct eng_sd **pfd_sd;
	unsigned npfd;
	unsigned lines;               /* interval lines since the last header */
	struct ib_tgt_snap tgt_run0, tgt_iv0; /* --target-stats: at the run's and the interval's start */
	bool tgt_warned;
};

/* ---------------- small helpers ---------------- */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double wall(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rnd(struct eng *e)
{
	/* xorshift64*: cheap, and good enough for offsets and coin flips. */
	e->rng ^= e->rng >> 12;
	e->rng ^= e->rng << 25;
	e->rng ^= e->rng >> 27;
	return e->rng * 0x2545f4914f6cdd1dull;
}

static double rnd01(struct eng *e)
{
	return (double)(rnd(e) >> 11) * 0x1.0p-53;
}

static uint64_t lowbit(uint64_t v)
{
	return v & -v;
}

/* Host CPU busy, total and system, from /proc/stat. */
struct cpu { uint64_t total, idle, sys; };
static void cpu_read(struct cpu *c)
{
	memset(c, 0, sizeof(*c));
	FILE *f = fopen("/proc/stat", "re");
	if (!f)
		return;
	unsigned long long v[8] = { 0 };
	if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
		   &v[7]) >= 4) {
		for (int i = 0; i < 8; i++)
			c->total += v[i];
		c->idle = v[3] + v[4];
		c->sys = v[2] + v[5] + v[6];
	}
	fclose(f);
}

static void cpu_pct(const struct cpu *a, const struct cpu *b, double *total, double *sys)
{
	double dt = (double)(b->total - a->total);
	*total = dt > 0 ? 100.0 * (dt - (double)(b->idle - a->idle)) / dt : 0;
	*sys = dt > 0 ? 100.0 * (double)(b->sys - a->sys) / dt : 0;
}

static const struct ib_rd *run_rd(const struct eng *e, const struct ib_run *r)
{
	return &e->p->rd[r->rd];
}

static uint64_t xfer_max(const struct ib_xfersize *x)
{
	uint64_t m = 0;
	switch (x->kind) {
	case IB_XFER_FIXED:
		return x->size[0];
	case IB_XFER_DIST:
		for (unsigned i = 0; i < x->n; i++)
			if (x->size[i] > m)
				m = x->size[i];
		return m;
	case IB_XFER_RANGE:
		return x->max;
	}
	return 0;
}

/* OR of every size in play: its lowest bit is the largest power of two dividing them all. */
static uint64_t xfer_bits(const struct ib_xfersize *x)
{
	uint64_t b = 0;
	switch (x->kind) {
	case IB_XFER_FIXED:
		return x->size[0];
	case IB_XFER_DIST:
		for (unsigned i = 0; i < x->n; i++)
			b |= x->size[i];
		return b;
	case IB_XFER_RANGE:
		return x->min | x->max | x->align;
	}
	return 0;
}

static uint32_t xfer_pick(struct eng *e, const struct eng_wd *w)
{
	if (w->fixed)
		return (uint32_t)w->fixed;
	const struct ib_xfersize *x = &w->def->xfer;
	switch (x->kind) {
	case IB_XFER_FIXED:
		break;
	case IB_XFER_DIST: {
		double r = rnd01(e) * 100, c = 0;
		for (unsigned i = 0; i < x->n; i++) {
			c += x->pct[i];
			if (r < c)
				return (uint32_t)x->size[i];
		}
		return (uint32_t)x->size[x->n - 1];
	}
	case IB_XFER_RANGE: {
		uint64_t al = x->align ? x->align : 512;
		uint64_t n = (x->max - x->min) / al + 1;
		return (uint32_t)(x->min + (rnd(e) % n) * al);
	}
	}
	return (uint32_t)x->size[0];
}

static bool wd_uses_sd(const struct ib_wd *w, unsigned sd)
{
	for (unsigned i = 0; i < w->nsd; i++)
		if (w->sd[i] == sd)
			return true;
	return false;
}

/* ---------------- opening the SDs ---------------- */

static void io_done(struct ib_io *io, int err, const char *why);

/* Every SD used by some run: slots for the most threads and the largest transfer any run asks. */
static int sds_open(struct eng *e, const struct ib_run *runs, unsigned nruns, char *err, size_t errlen)
{
	const struct ib_parm *p = e->p;
	bool validate = e->o->validate || p->validate;
	for (unsigned i = 0; i < p->nsd; i++) {
		struct eng_sd *s = &e->sd[i];
		s->def = &p->sd[i];
		s->e = e;
		uint64_t bits = s->def->offset | s->def->align;
		for (unsigned r = 0; r < nruns; r++) {
			const struct ib_rd *rd = run_rd(e, &runs[r]);
			for (unsigned k = 0; k < rd->nwd; k++) {
				const struct ib_wd *w = &p->wd[rd->wd[k]];
				if (!wd_uses_sd(w, i))
					continue;
				s->used = true;
				uint64_t len = runs[r].xfersize ? runs[r].xfersize : xfer_max(&w->xfer);
				bits |= runs[r].xfersize ? runs[r].xfersize : xfer_bits(&w->xfer);
				if (len > s->maxlen)
					s->maxlen = len;
				unsigned th = runs[r].threads > 0 ? (unsigned)runs[r].threads
								  : (s->def->threads ? s->def->threads : 8);
				if (th > s->nslots)
					s->nslots = th;
			}
		}
		if (!s->used)
			continue;
		if (!s->maxlen || s->maxlen > UINT32_MAX) {
			snprintf(err, errlen, "sd=%s: transfer size %" PRIu64 " out of range", s->def->name, s->maxlen);
			return -2;
		}
		if ((uint64_t)s->nslots * s->maxlen > ENG_BUF_MAX) {
			snprintf(err, errlen, "sd=%s: %u threads of %" PRIu64 " bytes need more than 4 GiB of buffers",
				 s->def->name, s->nslots, s->maxlen);
			return -2;
		}
		s->gran = (uint32_t)(lowbit(bits) > s->maxlen ? s->maxlen : lowbit(bits));
		int rc = ib_lun_open(&s->lun, s->def->lun, s->nslots, s->def->size, io_done, err, errlen);
		if (rc) {
			char tmp[1200];
			snprintf(tmp, sizeof(tmp), "sd=%s (line %d): %s", s->def->name, s->def->line, err);
			snprintf(err, errlen, "%s", tmp);
			return -1;
		}
		s->open = true;
		uint32_t bs = s->lun.block_size;
		if (s->gran < bs || s->gran % bs) {
			snprintf(err, errlen, "sd=%s (line %d): offset=, align= and every xfersize must be multiples of "
				 "the LUN's %u-byte block size", s->def->name, s->def->line, bs);
			return -2;
		}
		s->base = s->def->offset;
		if (s->base >= s->lun.size) {
			snprintf(err, errlen, "sd=%s (line %d): offset=%" PRIu64 " is beyond the LUN's %" PRIu64 " bytes",
				 s->def->name, s->def->line, s->base, s->lun.size);
			return -1;
		}
		s->size = s->def->size ? s->def->size : s->lun.size - s->base;
		if (s->base + s->size > s->lun.size) {
			snprintf(err, errlen, "sd=%s (line %d): size=%" PRIu64 " (offset %" PRIu64 ") is larger than the LUN "
				 "(%" PRIu64 " bytes, %s)", s->def->name, s->def->line, s->size, s->base, s->lun.size,
				 s->def->lun);
			return -1;
		}
		if (validate) {
			uint32_t unit = s->gran < 512 ? 512 : s->gran;
			if (ib_val_init(&s->val, s->def->name, s->def->lun, s->base + s->size, unit, bs, err, errlen))
				return -1;
			s->validating = true;
		}
		s->slots = calloc(s->nslots, sizeof(*s->slots));
		if (s->slots)
			s->bufs = ib_lun_buf_alloc(&s->lun, (size_t)s->nslots * s->maxlen);
		if (!s->slots || !s->bufs) {
			snprintf(err, errlen, "sd=%s: out of memory for %u slots", s->def->name, s->nslots);
			return -1;
		}
		/* Not zeros: some targets and devices shortcut zero blocks. */
		for (size_t b = 0; b + 8 <= s->nslots * s->maxlen; b += 8) {
			uint64_t v = rnd(e);
			memcpy(s->bufs + b, &v, 8);
		}
		for (unsigned k = 0; k < s->nslots; k++) {
			struct ib_io *io = &s->slots[k];
			io->lun = &s->lun;
			io->buf = s->bufs + (size_t)k * s->maxlen;
			io->next_free = s->free;
			s->free = io;
		}
	}
	return 0;
}

static void sds_close(struct eng *e)
{
	for (unsigned i = 0; i < e->nsd; i++) {
		struct eng_sd *s = &e->sd[i];
		if (s->open) {
			ib_lun_buf_free(&s->lun, s->bufs);
			ib_lun_close(&s->lun);
		}
		if (s->validating)
			ib_val_free(&s->val);
		free(s->slots);
		free(s->q);
		free(s->mx);
	}
}

/* ---------------- issuing ---------------- */

static uint64_t pick_random(struct eng *e, uint64_t lo, uint64_t hi, uint64_t align, uint32_t len)
{
	uint64_t n = (hi - lo - len) / align + 1;
	return lo + (rnd(e) % n) * align;
}

/* The offset of the next I/O of WD w on its pos'th SD; false at eof. */
static bool pick_offset(struct eng *e, struct eng_wd *w, struct wdsd *x, struct eng_sd *s, bool rd,
			uint32_t len, uint64_t *off)
{
	uint64_t align = s->def->align ? s->def->align : len;
	double hit = rd ? w->def->rhpct : w->def->whpct;
	if (hit > 0 && rnd01(e) * 100 < hit) {
		uint64_t hi = x->lo + w->def->hitarea;
		if (hi > x->hi)
			hi = x->hi;
		if (hi - x->lo >= len) {
			*off = pick_random(e, x->lo, hi, align, len);
			return true;
		}
	}
	if (w->eof || (w->seekpct < 100 && rnd01(e) * 100 >= w->seekpct)) {
		if (x->seq + len > x->hi) {
			if (w->eof) {
				if (!x->done) {
					x->done = true;
					e->eof_left--;
				}
				return false;
			}
			x->seq = x->lo;
		}
		*off = x->seq;
		x->seq += len;
		return true;
	}
	*off = pick_random(e, x->lo, x->hi, align, len);
	return true;
}

static void io_error(struct eng_sd *s, const struct ib_io *io, int err, const char *why)
{
	struct eng *e = s->e;
	e->io_errors++;
	e->run_errors++;
	if (e->counting)
		e->cur.errors++;
	if (s->errs_printed++ < ENG_ERR_PRINT)
		fprintf(stderr, "iserbench: sd=%s lun=%s: %s of %" PRIu32 " bytes at byte offset %" PRIu64 " failed: %s\n",
			s->def->name, s->def->lun, io->write ? "write" : "read", io->len, io->off, why);
	else if (s->errs_printed == ENG_ERR_PRINT + 1)
		fprintf(stderr, "iserbench: sd=%s: more I/O errors, not printed\n", s->def->name);
}

/*
 * Start one I/O of WD wdi on its pos'th SD s, arrived at t: 1 started, 0 not
 * now (no slot, validation collisions), -1 never (eof, LUN lost).
 */
static int issue(struct eng_sd *s, unsigned wdi, unsigned pos, uint64_t t, uint64_t now)
{
	struct eng *e = s->e;
	struct eng_wd *w = &e->wd[wdi];
	struct wdsd *x = &w->ws[pos];
	if (x->done || s->lun.dead)
		return -1;
	if (!s->free)
		return 0;
	bool rd = w->rdpct >= 100 || (w->rdpct > 0 && rnd01(e) * 100 < w->rdpct);
	uint32_t len = xfer_pick(e, w);
	uint64_t off = 0;
	bool ok = false;
	/* Validating: never two I/Os on one unit; try a few other offsets. */
	for (int tries = 0; tries < 8 && !ok; tries++) {
		if (!pick_offset(e, w, x, s, rd, len, &off))
			return -1;
		ok = !s->validating || ib_val_claim(&s->val, off, len);
	}
	if (!ok)
		return 0;
	struct ib_io *io = s->free;
	s->free = io->next_free;
	io->off = off;
	io->len = len;
	io->write = !rd;
	io->wd = wdi;
	io->arrival_ns = t;
	io->start_ns = now;
	io->counted = e->counting;
	if (s->validating && io->write)
		ib_val_fill(&s->val, io->buf, off, len);
	int rc = ib_lun_submit(&s->lun, io);
	if (rc) {
		char why[128];
		snprintf(why, sizeof(why), "cannot submit: %s", strerror(-rc));
		io_error(s, io, rc, why);
		if (s->validating) {
			if (io->write)
				ib_val_forget(&s->val, off, len);
			ib_val_release(&s->val, off, len);
		}
		io->next_free = s->free;
		s->free = io;
		return -1;
	}
	s->busy++;
	return 1;
}

/* Keep s's slots busy: queued arrivals first, then iorate=max work. */
static void refill(struct eng_sd *s, uint64_t now)
{
	struct eng *e = s->e;
	if (!e->issuing)
		return;
	while (s->busy < s->limit && s->free) {
		if (s->qlen) {
			struct arrival *a = &s->q[s->qhead];
			if (issue(s, a->wd, a->pos, a->t_ns, now) == 0)
				return;
			s->qhead = (s->qhead + 1) % ENG_QCAP;
			s->qlen--;
			continue;
		}
		if (!s->nmax || e->fixed)
			return;
		unsigned k = 0;
		if (s->nmax > 1) {
			double r = rnd01(e) * s->mx[s->nmax - 1].cum;
			while (k + 1 < s->nmax && r >= s->mx[k].cum)
				k++;
		}
		if (issue(s, s->mx[k].wd, s->mx[k].pos, now, now) <= 0) {
			/* eof on this WD, or a validation collision: let the others try. */
			bool any = false;
			for (unsigned j = 0; j < s->nmax && !any; j++)
				if (j != k && issue(s, s->mx[j].wd, s->mx[j].pos, now, now) > 0)
					any = true;
			if (!any)
				return;
		}
	}
}

static void arrive(struct eng *e, unsigned wdi, uint64_t t, uint64_t now)
{
	struct eng_wd *w = &e->wd[wdi];
	unsigned pos = w->nws > 1 ? (unsigned)(rnd(e) % w->nws) : 0;
	struct eng_sd *s = &e->sd[w->ws[pos].sd];
	if (s->lun.dead)
		return;
	if (s->qlen == ENG_QCAP) {
		if (!s->qwarned)
			fprintf(stderr, "iserbench: sd=%s cannot keep up with the requested I/O rate: %u I/Os waiting, "
				"dropping arrivals\n", s->def->name, ENG_QCAP);
		s->qwarned = true;
		return;
	}
	s->q[(s->qhead + s->qlen) % ENG_QCAP] = (struct arrival){ t, wdi, pos };
	s->qlen++;
	refill(s, now);
}

static uint64_t gap_ns(struct eng *e, double rate)
{
	double g;
	switch (e->dist) {
	case IB_DIST_UNIFORM:
		g = 2.0 * rnd01(e) / rate;
		break;
	case IB_DIST_DETERMINISTIC:
		g = 1.0 / rate;
		break;
	default:
		g = -log(1.0 - rnd01(e)) / rate;
		break;
	}
	return (uint64_t)(g * 1e9);
}

/* The last tick at or before t: arrivals due since the one before start together. */
static uint64_t tick_floor(const struct eng *e, uint64_t t)
{
	return t < e->tick0 ? t : t - (t - e->tick0) % ENG_BATCH_NS;
}

/* Start every arrival due by the last tick; a stalled loop catches up, bounded. */
static void arrivals(struct eng *e, uint64_t now)
{
	unsigned budget = 1u << 20;
	uint64_t tick = tick_floor(e, now);
	if (e->fixed && e->nwd && e->gcum[e->nwd - 1] > 0) {
		while (e->next_ns <= tick && budget--) {
			double r = rnd01(e) * e->gcum[e->nwd - 1];
			unsigned k = 0;
			while (k + 1 < e->nwd && r >= e->gcum[k])
				k++;
			arrive(e, k, e->next_ns, now);
			e->next_ns += gap_ns(e, e->rate);
		}
	}
	for (unsigned i = 0; i < e->nwd; i++) {
		struct eng_wd *w = &e->wd[i];
		while (w->rate > 0 && w->next_ns <= tick && budget--) {
			arrive(e, i, w->next_ns, now);
			w->next_ns += gap_ns(e, w->rate);
		}
	}
	if (!budget) {
		e->next_ns = now;
		for (unsigned i = 0; i < e->nwd; i++)
			if (e->wd[i].rate > 0)
				e->wd[i].next_ns = now;
	}
}

/* ---------------- completion ---------------- */

static void io_done(struct ib_io *io, int err, const char *why)
{
	struct eng_sd *s = (struct eng_sd *)((char *)io->lun - offsetof(struct eng_sd, lun));
	struct eng *e = s->e;
	uint64_t now = now_ns();
	if (s->validating) {
		if (!err && !io->write) {
			unsigned bad = ib_val_check(&s->val, io->buf, io->off, io->len);
			if (bad) {
				e->val_errors += bad;
				if (e->res)
					e->res->validation_errors += bad;
				if (e->counting && io->counted)
					e->cur.errors += bad;
			}
		}
		if (err && io->write)
			ib_val_forget(&s->val, io->off, io->len);
		ib_val_release(&s->val, io->off, io->len);
	}
	if (!err && e->res)
		*(io->write ? &e->res->writes_done : &e->res->reads_done) += 1;
	if (err) {
		io_error(s, io, err, why);
	} else if (io->counted && e->counting) {
		struct ib_stats *c = &e->cur;
		double us = (double)(now - io->start_ns) / 1000.0;
		double wait = (double)(io->start_ns - io->arrival_ns) / 1000.0;
		c->wait_us += wait;
		if (wait > c->wait_max_us)
			c->wait_max_us = wait;
		if (io->write) {
			c->writes++;
			c->wbytes += io->len;
			c->wresp_us += us;
		} else {
			c->reads++;
			c->rbytes += io->len;
			c->rresp_us += us;
		}
		c->resp_sq_us += us * us;
		if (us > c->resp_max_us)
			c->resp_max_us = us;
		ib_hist_add(&c->hist, us > 4e9 ? UINT32_MAX : (uint32_t)us);
	}
	s->busy--;
	io->next_free = s->free;
	s->free = io;
	/* Start due arrivals from here too: a submit inside the library's
	 * callback costs no wake-up of its event loop, one from outside does. */
	if (e->issuing && e->timed)
		arrivals(e, now);
	refill(s, now);
}

/* ---------------- the loop ---------------- */

/* Wait for completions until deadline (or one round if deadline is 0). */
static void poll_once(struct eng *e, uint64_t deadline)
{
	for (unsigned i = 0; i < e->npfd; i++)
		ib_lun_flush(&e->pfd_sd[i]->lun);
	uint64_t now = now_ns();
	struct timespec ts = { 0, 0 };
	if (deadline > now) {
		uint64_t d = deadline - now;
		ts.tv_sec = (time_t)(d / 1000000000ull);
		ts.tv_nsec = (long)(d % 1000000000ull);
	}
	int n = ppoll(e->pfd, e->npfd, &ts, NULL);
	if (n <= 0)
		return;
	for (unsigned i = 0; i < e->npfd; i++)
		if (e->pfd[i].revents) {
			struct eng_sd *s = e->pfd_sd[i];
			ib_lun_service(&s->lun, e->pfd[i].revents);
			/* The session may have been lost with work still queued. */
			if (s->lun.dead && s->qlen)
				s->qlen = 0;
		}
}

static unsigned busy_total(const struct eng *e)
{
	unsigned n = 0;
	for (unsigned i = 0; i < e->nsd; i++)
		if (e->sd[i].open && !e->sd[i].lun.dead)
			n += e->sd[i].busy;
	return n;
}

/* Build the run's WDs and each SD's iorate=max table; -2 with err on a parameter problem. */
static int run_setup(struct eng *e, const struct ib_run *run, char *err, size_t errlen)
{
	const struct ib_rd *rd = run_rd(e, run);
	e->nwd = rd->nwd;
	e->wd = calloc(rd->nwd ? rd->nwd : 1, sizeof(*e->wd));
	e->gcum = calloc(rd->nwd ? rd->nwd : 1, sizeof(*e->gcum));
	if (!e->wd || !e->gcum) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	double skewed = 0;
	unsigned unskewed = 0;
	for (unsigned i = 0; i < rd->nwd; i++) {
		const struct ib_wd *d = &e->p->wd[rd->wd[i]];
		if (d->skew > 0)
			skewed += d->skew;
		else
			unskewed++;
	}
	e->eof_left = 0;
	for (unsigned i = 0; i < rd->nwd; i++) {
		struct eng_wd *w = &e->wd[i];
		const struct ib_wd *d = &e->p->wd[rd->wd[i]];
		w->def = d;
		w->rdpct = run->rdpct >= 0 ? run->rdpct : d->rdpct;
		w->eof = run->seek_eof || (run->seekpct < 0 && d->seek_eof);
		w->seekpct = run->seekpct >= 0 ? run->seekpct : d->seekpct;
		w->fixed = run->xfersize;
		w->weight = d->skew > 0 ? d->skew : (skewed < 100 && unskewed ? (100 - skewed) / unskewed : 0);
		w->rate = d->iorate;
		w->nws = d->nsd;
		w->ws = calloc(d->nsd ? d->nsd : 1, sizeof(*w->ws));
		if (!w->ws) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		uint64_t len = w->fixed ? w->fixed : xfer_max(&d->xfer);
		for (unsigned k = 0; k < d->nsd; k++) {
			struct wdsd *x = &w->ws[k];
			struct eng_sd *s = &e->sd[d->sd[k]];
			x->sd = d->sd[k];
			/* SD range= first, the WD's range= within it. */
			double a = s->def->range[0] / 100, b = s->def->range[1] / 100;
			double c = a + (b - a) * d->range[0] / 100, f = a + (b - a) * d->range[1] / 100;
			uint64_t g = s->gran;
			x->lo = s->base + ((uint64_t)(c * (double)s->size) + g - 1) / g * g;
			x->hi = s->base + (uint64_t)(f * (double)s->size) / g * g;
			if (x->hi > s->base + s->size)
				x->hi = (s->base + s->size) / g * g;
			if (x->hi < x->lo || x->hi - x->lo < len) {
				snprintf(err, errlen, "wd=%s (line %d) on sd=%s: the range (%" PRIu64 " bytes) is smaller than "
					 "the %" PRIu64 "-byte transfer size", d->name, d->line, s->def->name,
					 x->hi > x->lo ? x->hi - x->lo : 0, len);
				return -2;
			}
			x->seq = x->lo;
			if (w->eof)
				e->eof_left++;
		}
	}
	double c = 0;
	for (unsigned i = 0; i < rd->nwd; i++) {
		c += e->wd[i].rate > 0 ? 0 : e->wd[i].weight;
		e->gcum[i] = c;
	}
	if (c <= 0) { /* all skews zero: equal shares */
		c = 0;
		for (unsigned i = 0; i < rd->nwd; i++) {
			c += e->wd[i].rate > 0 ? 0 : 1;
			e->gcum[i] = c;
		}
	}
	for (unsigned i = 0; i < e->nsd; i++) {
		struct eng_sd *s = &e->sd[i];
		s->nmax = 0;
		s->qhead = s->qlen = 0;
		s->qwarned = false;
		s->errs_printed = 0;
		if (!s->open)
			continue;
		s->limit = run->threads > 0 ? (unsigned)run->threads : (s->def->threads ? s->def->threads : 8);
		if (s->limit > s->nslots)
			s->limit = s->nslots;
		if (!s->mx)
			s->mx = calloc(IB_LIST > e->p->nwd ? IB_LIST : e->p->nwd, sizeof(*s->mx));
		if (!s->mx) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		double cum = 0;
		for (unsigned k = 0; k < e->nwd; k++) {
			struct eng_wd *w = &e->wd[k];
			if (w->rate > 0)
				continue;
			for (unsigned j = 0; j < w->nws; j++)
				if (w->ws[j].sd == i) {
					cum += w->weight > 0 ? w->weight : 1e-9;
					s->mx[s->nmax++] = (struct maxwd){ k, j, cum };
					break;
				}
		}
	}
	bool own = false;
	for (unsigned k = 0; k < e->nwd; k++)
		own |= e->wd[k].rate > 0;
	e->timed = e->fixed || own;
	if (e->timed)
		for (unsigned i = 0; i < e->nsd; i++)
			if (e->sd[i].open && !e->sd[i].q && !(e->sd[i].q = calloc(ENG_QCAP, sizeof(struct arrival)))) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
	return 0;
}

static void run_teardown(struct eng *e)
{
	for (unsigned i = 0; i < e->nwd; i++)
		free(e->wd[i].ws);
	free(e->wd);
	free(e->gcum);
	e->wd = NULL;
	e->gcum = NULL;
	e->nwd = 0;
}

static void hhmmss(char *buf, size_t len, double t)
{
	time_t tt = (time_t)t;
	struct tm tm;
	localtime_r(&tt, &tm);
	strftime(buf, len, "%H:%M:%S", &tm);
}

/* --target-stats: the target's counters now; a failure is told once per run and leaves figures out. */
static void tgt_sample(struct eng *e, struct ib_tgt_snap *s)
{
	char err[600];
	if (!e->o->target_stats)
		return;
	if (ib_tgt_sample(e->o->target_stats, s, err, sizeof(err)) && !e->tgt_warned) {
		fprintf(stderr, "iserbench: --target-stats: %s; target-side figures left out\n", err);
		e->tgt_warned = true;
	}
}

/* Close the interval that started at t0 (monotonic) / w0 (wall clock) and print its line. */
static int interval_close(struct eng *e, struct ib_result *r, uint64_t t0, uint64_t t1, double w0,
			  const struct cpu *c0, const struct cpu *c1)
{
	struct ib_stats *iv = realloc(r->iv, (r->niv + 1) * sizeof(*iv));
	if (!iv)
		return -1;
	r->iv = iv;
	e->cur.start = w0;
	e->cur.seconds = (double)(t1 - t0) / 1e9;
	cpu_pct(c0, c1, &e->cur.cpu_total, &e->cur.cpu_sys);
	if (e->o->target_stats) {
		struct ib_tgt_snap now;
		tgt_sample(e, &now);
		ib_tgt_interval(&e->cur, &now, &e->tgt_iv0);
		e->tgt_iv0 = now;
	}
	r->iv[r->niv++] = e->cur;
	if (e->lines && e->lines % 30 == 0)
		ib_report_header(stdout);
	char label[16];
	snprintf(label, sizeof(label), "%u", r->niv);
	ib_report_line(stdout, label, &e->cur);
	fflush(stdout);
	e->lines++;
	memset(&e->cur, 0, sizeof(e->cur));
	return 0;
}

/* A run's reporting intervals: their length, how many, and the length in ns. */
struct run_plan {
	double interval;
	unsigned nint;
	uint64_t iv_ns;
};

static struct run_plan plan_of(const struct ib_run *run)
{
	struct run_plan p;
	p.interval = run->interval > 0 ? run->interval : 1;
	double total = run->elapsed > 0 ? run->elapsed : 30;
	/* warmup= is part of elapsed=, unless that would leave nothing to report. */
	if (run->warmup >= total)
		total += run->warmup;
	p.nint = (unsigned)llround(total / p.interval);
	if (!p.nint)
		p.nint = 1;
	p.iv_ns = (uint64_t)(p.interval * 1e9);
	return p;
}

/* "Starting RD=..." and the report's header; the run's lines and figures counted from here. */
static void run_announce(struct eng *e, const struct ib_run *run, double target, const struct run_plan *p)
{
	char rate[64], ends[16];
	if (target > 0)
		snprintf(rate, sizeof(rate), "%.0f", target);
	else
		snprintf(rate, sizeof(rate), "Uncontrolled MAX");
	hhmmss(ends, sizeof(ends), wall() + p->nint * p->interval);
	const char *lab = !strncasecmp(run->label, "rd=", 3) ? run->label + 3 : run->label;
	printf("\nStarting RD=%s", lab);
	if (!strstr(lab, "I/O rate"))
		printf("; I/O rate: %s; elapsed=%.0f", rate, p->nint * p->interval);
	else if (run->rate_kind == IB_RATE_CURVE)
		printf("; target %s I/O per second", rate);
	printf("; ends about %s\n\n", ends);
	ib_report_header(stdout);
	e->lines = 0;
	memset(&e->cur, 0, sizeof(e->cur));
	e->tgt_warned = false;
	tgt_sample(e, &e->tgt_run0);
	e->tgt_iv0 = e->tgt_run0;
}

/* From t0: I/O issued and counted, the first arrivals due, every open SD's slots filled. */
static void run_start(struct eng *e, uint64_t t0)
{
	e->issuing = e->counting = true;
	e->tick0 = t0;
	e->next_ns = t0 + (e->fixed ? gap_ns(e, e->rate) : 0);
	for (unsigned i = 0; i < e->nwd; i++)
		if (e->wd[i].rate > 0)
			e->wd[i].next_ns = t0 + gap_ns(e, e->wd[i].rate);
	for (unsigned i = 0; i < e->nsd; i++)
		if (e->sd[i].open)
			refill(&e->sd[i], t0);
}

/* seekpct=eof: every range a WD with it reads in order has been covered (none left): the run ends. */
static bool seek_eof(const struct eng *e)
{
	if (e->eof_left != 0 || !e->wd || !e->nwd)
		return false;
	bool any_eof = false;
	for (unsigned i = 0; i < e->nwd; i++)
		any_eof |= e->wd[i].eof;
	return any_eof;
}

static bool any_sd_alive(const struct eng *e)
{
	bool alive = false;
	for (unsigned i = 0; i < e->nsd; i++)
		alive |= e->sd[i].open && !e->sd[i].lun.dead;
	return alive;
}

/* When the loop next wakes, at the latest at deadline (the interval's end). */
static uint64_t wake_at(struct eng *e, uint64_t now, uint64_t deadline)
{
	/* With every slot busy an arrival could not start anyway: sleep until a
	 * completion instead of waking up for each arrival (cheap at high rates). */
	bool room = false;
	for (unsigned i = 0; i < e->nsd && !room; i++)
		room = e->sd[i].open && !e->sd[i].lun.dead && e->sd[i].busy < e->sd[i].limit;
	uint64_t due = UINT64_MAX;
	if (room && e->fixed)
		due = e->next_ns;
	for (unsigned i = 0; room && i < e->nwd; i++)
		if (e->wd[i].rate > 0 && e->wd[i].next_ns < due)
			due = e->wd[i].next_ns;
	/* Wake for the next arrival on the tick that starts it (see the top). */
	if (due != UINT64_MAX) {
		due = tick_floor(e, due + ENG_BATCH_NS - 1);
		if (due < deadline)
			deadline = due;
	}
	/* Slots idle with nothing queued (validation collisions): try again soon. */
	if (!e->fixed && busy_total(e) == 0 && deadline > now + 1000000)
		deadline = now + 1000000;
	return deadline;
}

/* Issuing stopped: what is in flight has ENG_DRAIN_S to complete; an SD still busy then is given up. */
static void run_drain(struct eng *e)
{
	e->issuing = e->counting = false;
	uint64_t dl = now_ns() + ENG_DRAIN_S * 1000000000ull;
	while (busy_total(e) && now_ns() < dl)
		poll_once(e, now_ns() + 100000000ull);
	for (unsigned i = 0; i < e->nsd; i++) {
		struct eng_sd *s = &e->sd[i];
		if (s->open && s->busy && !s->lun.dead) {
			fprintf(stderr, "iserbench: sd=%s: %u I/Os did not complete in %d s; giving up on this SD\n",
				s->def->name, s->busy, ENG_DRAIN_S);
			s->lun.dead = true;
			e->run_errors++;
		}
	}
}

/* --target-stats: the target's count of the run's commands. */
static void run_tgt_counts(struct eng *e, struct ib_result *r)
{
	if (!e->tgt_run0.ok)
		return;
	/* After the drain: every command of the run has had its status. */
	struct ib_tgt_snap end;
	tgt_sample(e, &end);
	if (end.ok) {
		r->tgt = true;
		/* Less than at the start: stats.reset during the run, count from it. */
		r->tgt_reads = end.reads - (end.reads >= e->tgt_run0.reads ? e->tgt_run0.reads : 0);
		r->tgt_writes = end.writes - (end.writes >= e->tgt_run0.writes ? e->tgt_run0.writes : 0);
	}
}

/* The average of the intervals past the warmup (from the second at least), its histogram, the run's counts. */
static void run_summary(struct ib_result *r, const struct ib_run *run, double interval, bool eof)
{
	if (r->niv) {
		unsigned warm = (unsigned)ceil(run->warmup / interval - 1e-9);
		unsigned first = warm + 1 > 2 ? warm + 1 : 2;
		if (first > r->niv)
			first = r->niv > 1 ? 2 : 1;
		if (r->niv == 1)
			first = 1;
		r->avg_first = first;
		r->avg_last = r->niv;
		for (unsigned i = first - 1; i < r->niv; i++)
			ib_stats_add(&r->avg, &r->iv[i]);
		char label[32];
		snprintf(label, sizeof(label), "avg_%u-%u", r->avg_first, r->avg_last);
		ib_report_line(stdout, label, &r->avg);
		printf("\n");
		ib_report_histogram(stdout, &r->avg.hist);
	}
	ib_report_run_counts(stdout, r);
	if (r->interrupted)
		printf("Run interrupted (Ctrl-C).\n");
	if (eof)
		printf("seekpct=eof: every SD covered, run ended.\n");
	fflush(stdout);
}

static int run_one(struct eng *e, const struct ib_run *run, double target, struct ib_result *r, char *err,
		   size_t errlen)
{
	memset(r, 0, sizeof(*r));
	r->run = run;
	r->target_rate = target;
	e->res = r;
	e->fixed = target > 0;
	e->rate = target;
	e->dist = run->distribution;
	int rc = run_setup(e, run, err, errlen);
	if (rc)
		return rc;
	struct run_plan p = plan_of(run);
	run_announce(e, run, target, &p);

	uint64_t t0 = now_ns(), tiv = t0;
	double wiv = wall();
	struct cpu c0, c1;
	cpu_read(&c0);
	run_start(e, t0);
	bool eof = false;
	for (;;) {
		uint64_t now = now_ns();
		if (*e->o->stop) {
			r->interrupted = true;
			break;
		}
		arrivals(e, now);
		if (now >= tiv + p.iv_ns) {
			cpu_read(&c1);
			if (interval_close(e, r, tiv, tiv + p.iv_ns, wiv, &c0, &c1))
				break;
			c0 = c1;
			tiv += p.iv_ns;
			wiv += p.interval;
			if (r->niv >= p.nint)
				break;
			continue;
		}
		if (seek_eof(e)) {
			eof = true;
			break;
		}
		if (!any_sd_alive(e))
			break;
		poll_once(e, wake_at(e, now, tiv + p.iv_ns));
		if (!e->fixed && busy_total(e) == 0)
			for (unsigned i = 0; i < e->nsd; i++)
				if (e->sd[i].open)
					refill(&e->sd[i], now_ns());
	}
	/* A partial last interval (Ctrl-C, eof, lost LUN) is kept if it is worth a line. */
	uint64_t tend = now_ns();
	if ((r->interrupted || eof || r->niv < p.nint) &&
	    (tend - tiv >= p.iv_ns / 10 || (eof && e->cur.reads + e->cur.writes))) {
		cpu_read(&c1);
		interval_close(e, r, tiv, tend, wiv, &c0, &c1);
	}
	run_drain(e);
	run_tgt_counts(e, r);
	run_teardown(e);
	run_summary(r, run, p.interval, eof);
	e->res = NULL;
	return 0;
}

/* ---------------- entry ---------------- */

static double avg_rate(const struct ib_stats *s)
{
	return s->seconds > 0 ? (double)(s->reads + s->writes) / s->seconds : 0;
}

static double avg_resp_ms(const struct ib_stats *s)
{
	uint64_t n = s->reads + s->writes;
	return n ? (s->rresp_us + s->wresp_us) / (double)n / 1000 : 0;
}

int ib_engine_run(const struct ib_parm *p, const struct ib_run *runs, unsigned nruns, const struct ib_opts *o,
		  struct ib_result **res, unsigned *nres, char *err, size_t errlen)
{
	static volatile int never;
	struct ib_opts opts = *o;
	if (!opts.stop)
		opts.stop = &never;
	struct eng e = { .p = p, .o = &opts, .nsd = p->nsd };
	/* Fixed rates need wake-ups on time, not 50 us late (the default slack). */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
	e.rng = 0x9e3779b97f4a7c15ull ^ now_ns();
	*res = NULL;
	*nres = 0;
	err[0] = 0;
	e.sd = calloc(p->nsd ? p->nsd : 1, sizeof(*e.sd));
	struct ib_result *out = calloc(nruns ? nruns : 1, sizeof(*out));
	/* Which runs were left out: curve runs after stopcurve= tripped. */
	bool *skip = calloc(nruns ? nruns : 1, sizeof(*skip));
	/* results are indexed by run so curve runs can find their max run. */
	int *at = calloc(nruns ? nruns : 1, sizeof(*at));
	int rc = 0;
	if (!e.sd || !out || !skip || !at) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
		goto done;
	}
	rc = sds_open(&e, runs, nruns, err, errlen);
	if (rc)
		goto done;
	e.pfd = calloc(p->nsd ? p->nsd : 1, sizeof(*e.pfd));
	e.pfd_sd = calloc(p->nsd ? p->nsd : 1, sizeof(*e.pfd_sd));
	if (!e.pfd || !e.pfd_sd) {
		snprintf(err, errlen, "out of memory");
		rc = -1;
		goto done;
	}
	for (unsigned i = 0; i < p->nsd; i++)
		if (e.sd[i].open) {
			e.pfd[e.npfd] = (struct pollfd){ .fd = ib_lun_fd(&e.sd[i].lun), .events = ib_lun_events(&e.sd[i].lun) };
			e.pfd_sd[e.npfd++] = &e.sd[i];
		}
	for (unsigned i = 0; i < nruns && !*opts.stop; i++) {
		const struct ib_run *run = &runs[i];
		at[i] = -1;
		if (skip[i])
			continue;
		double target = 0;
		if (run->rate_kind == IB_RATE_FIXED) {
			target = run->rate;
		} else if (run->rate_kind == IB_RATE_CURVE) {
			int b = run->curve_base;
			if (b < 0 || (unsigned)b >= i || at[b] < 0 || avg_rate(&out[at[b]].avg) <= 0) {
				fprintf(stderr, "iserbench: %s: skipped, its max run gave no rate\n", run->label);
				continue;
			}
			target = ib_curve_rate(avg_rate(&out[at[b]].avg), run->rate);
			if (target <= 0)
				continue;
		}
		e.run_errors = 0;
		int r1 = run_one(&e, run, target, &out[*nres], err, errlen);
		if (r1 == -2 || r1 == -1) {
			free(out[*nres].iv);
			rc = r1;
			run_teardown(&e);
			break;
		}
		at[i] = (int)*nres;
		struct ib_result *r = &out[(*nres)++];
		if (e.run_errors)
			fprintf(stderr, "iserbench: %s: %" PRIu64 " I/O errors\n", run->label, e.run_errors);
		if (r->validation_errors)
			fprintf(stderr, "iserbench: %s: %" PRIu64 " validation errors\n", run->label, r->validation_errors);
		if (run->rate_kind == IB_RATE_CURVE && run->stopcurve > 0 && avg_resp_ms(&r->avg) > run->stopcurve) {
			printf("stopcurve=%g: response time %.3f ms exceeds it; the rest of this curve is skipped\n",
			       run->stopcurve, avg_resp_ms(&r->avg));
			for (unsigned j = i + 1; j < nruns; j++)
				if (runs[j].rate_kind == IB_RATE_CURVE && runs[j].curve_base == run->curve_base)
					skip[j] = true;
		}
		if (r->interrupted)
			break;
	}
	if (!rc && e.val_errors) {
		snprintf(err, errlen, "%" PRIu64 " data validation errors", e.val_errors);
		rc = -1;
	} else if (!rc && e.io_errors) {
		snprintf(err, errlen, "%" PRIu64 " I/O errors", e.io_errors);
		rc = -1;
	}
	for (unsigned i = 0; i < e.nsd && !rc; i++)
		if (e.sd[i].open && e.sd[i].lun.dead) {
			snprintf(err, errlen, "sd=%s: the LUN was lost", e.sd[i].def->name);
			rc = -1;
		}
done:
	sds_close(&e);
	free(e.sd);
	free(e.pfd);
	free(e.pfd_sd);
	free(skip);
	free(at);
	*res = out;
	return rc;
}
