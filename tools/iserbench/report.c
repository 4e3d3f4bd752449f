/*
 * iserbench reports: vdbench's interval lines and response-time
 * histogram, and the output folder (summary.txt, flatfile.txt,
 * results.json, report.html with SVG drawn here, parmfile.txt).
 */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ib.h"

/* vdbench's default histogram= buckets, in microseconds. */
#define IB_BOUNDS 20, 40, 60, 80, 100, 200, 400, 600, 800, \
	1000, 2000, 4000, 6000, 8000, 10000, 20000, 40000, 60000, 80000, \
	100000, 200000, 400000, 600000, 800000, 1000000, 2000000
const uint32_t ib_hist_bounds_us[IB_HIST_BUCKETS - 1] = { IB_BOUNDS };

/*
 * The same bounds padded to 32 with values above any uint32_t, so that
 * ib_hist_add is a fixed 5-step branch-light search (it runs once per I/O).
 */
#define IB_PAD (UINT64_C(1) << 32)
static const uint64_t hist_search[32] = { IB_BOUNDS, IB_PAD, IB_PAD, IB_PAD,
					  IB_PAD, IB_PAD, IB_PAD };

/* Bucket i holds [bounds[i-1], bounds[i]); the last one >= 2s. */
void ib_hist_add(struct ib_hist *h, uint32_t us)
{
	unsigned i = 0;

	i += (hist_search[i + 15] <= us) ? 16 : 0;
	i += (hist_search[i + 7] <= us) ? 8 : 0;
	i += (hist_search[i + 3] <= us) ? 4 : 0;
	i += (hist_search[i + 1] <= us) ? 2 : 0;
	i += (hist_search[i] <= us) ? 1 : 0;
	h->count[i]++;
}

void ib_stats_add(struct ib_stats *into, const struct ib_stats *s)
{
	double secs = into->seconds + s->seconds;
	unsigned i;

	if (into->start == 0 || (s->start != 0 && s->start < into->start))
		into->start = s->start;
	/* CPU busy is a percentage: weigh each part by its duration. */
	if (secs > 0) {
		into->cpu_total = (into->cpu_total * into->seconds + s->cpu_total * s->seconds) / secs;
		into->cpu_sys = (into->cpu_sys * into->seconds + s->cpu_sys * s->seconds) / secs;
	}
	into->seconds = secs;
	into->reads += s->reads;
	into->writes += s->writes;
	into->rbytes += s->rbytes;
	into->wbytes += s->wbytes;
	into->rresp_us += s->rresp_us;
	into->wresp_us += s->wresp_us;
	into->resp_sq_us += s->resp_sq_us;
	if (s->resp_max_us > into->resp_max_us)
		into->resp_max_us = s->resp_max_us;
	into->wait_us += s->wait_us;
	if (s->wait_max_us > into->wait_max_us)
		into->wait_max_us = s->wait_max_us;
	into->errors += s->errors;
	for (i = 0; i < IB_HIST_BUCKETS; i++)
		into->hist.count[i] += s->hist.count[i];
	if (s->tgt) {
		into->tgt = true;
		lat_hist_add(&into->tgt_r, &s->tgt_r);
		lat_hist_add(&into->tgt_w, &s->tgt_w);
	}
}

/* ---------------- derived figures ---------------- */

struct derived {
	double rate, mbs, bytes, readpct, resp, rresp, wresp, max, std, qdepth, cpu, sys;
};

static double fin(double v)
{
	return isfinite(v) ? v : 0;
}

/* Every ratio guarded, so an interval without I/O shows zeros, never NaN. */
static struct derived derive(const struct ib_stats *s)
{
	struct derived d = { 0 };
	double ios = (double)s->reads + (double)s->writes;
	double bytes = (double)s->rbytes + (double)s->wbytes;
	double resp = s->rresp_us + s->wresp_us;

	if (s->seconds > 0) {
		d.rate = ios / s->seconds;
		d.mbs = bytes / s->seconds / (1024.0 * 1024.0);
		/* Little's law on the response time (from the start): the mean
		 * number of I/Os in flight, as vdbench's queue depth. */
		d.qdepth = resp / 1e6 / s->seconds;
	}
	if (ios > 0) {
		double mean = resp / ios, var = s->resp_sq_us / ios - mean * mean;

		d.bytes = floor(bytes / ios + 0.5);
		d.readpct = 100.0 * (double)s->reads / ios;
		d.resp = mean / 1000;
		d.std = var > 0 ? sqrt(var) / 1000 : 0;
	}
	if (s->reads)
		d.rresp = s->rresp_us / (double)s->reads / 1000;
	if (s->writes)
		d.wresp = s->wresp_us / (double)s->writes / 1000;
	d.max = s->resp_max_us / 1000;
	d.cpu = s->cpu_total;
	d.sys = s->cpu_sys;
	/* The sums come from the engine: NaN there must not reach a report. */
	d.rate = fin(d.rate); d.mbs = fin(d.mbs); d.bytes = fin(d.bytes);
	d.readpct = fin(d.readpct); d.resp = fin(d.resp); d.rresp = fin(d.rresp);
	d.wresp = fin(d.wresp); d.max = fin(d.max); d.std = fin(d.std);
	d.qdepth = fin(d.qdepth); d.cpu = fin(d.cpu); d.sys = fin(d.sys);
	return d;
}

/* HH:MM:SS.mmm local time of the end of s. */
static void tod(char *buf, size_t len, const struct ib_stats *s)
{
	long long ms = llround(fin(s->start + s->seconds) * 1000);
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms < 0 || !localtime_r(&t, &tm)) {
		snprintf(buf, len, "00:00:00.000");
		return;
	}
	snprintf(buf, len, "%02d:%02d:%02d.%03lld", tm.tm_hour, tm.tm_min, tm.tm_sec, ms % 1000);
}

/* ---------------- target-side figures (--target-stats) ---------------- */

static bool tgt_cols;

void ib_report_target(bool on)
{
	tgt_cols = on;
}

/* The target's read and write latency, average and p99 (upper bound of a log2 bucket), in ms. */
struct tgt_ms {
	double r, w, rp99, wp99;        /* p99: INFINITY beyond the last bucket */
};

static double p99_ms(const struct lat_hist *h)
{
	double us = lat_hist_pct_us(h, 99);
	return us < 0 ? INFINITY : us / 1000;
}

static struct tgt_ms tgt_ms(const struct ib_stats *s)
{
	struct tgt_ms t = { lat_hist_avg_us(&s->tgt_r) / 1000, lat_hist_avg_us(&s->tgt_w) / 1000,
			    p99_ms(&s->tgt_r), p99_ms(&s->tgt_w) };
	return t;
}

/* The target columns of a line: blanks-separated numbers, "-" when this interval has none. */
static void tgt_fields(FILE *f, const struct ib_stats *s, const char *fmt)
{
	if (!tgt_cols)
		return;
	if (!s->tgt) {
		fprintf(f, " %8s %8s %8s %8s", "-", "-", "-", "-");
		return;
	}
	struct tgt_ms t = tgt_ms(s);
	fprintf(f, fmt, t.r, t.w, t.rp99, t.wp99);
}

void ib_report_run_counts(FILE *f, const struct ib_result *r)
{
	double ios = (double)r->avg.reads + (double)r->avg.writes;
	/* A fixed rate's arrivals that waited for a free thread (vdbench counts
	 * its response time from the start, so it would not show). */
	if ((r->target_rate > 0 || r->avg.wait_max_us > 0) && ios > 0)
		fprintf(f, "queue wait (arrival to start): avg %.3f ms, max %.3f ms\n", r->avg.wait_us / ios / 1000,
			r->avg.wait_max_us / 1000);
	if (r->tgt)
		fprintf(f, "target: %llu reads, %llu writes in this run; iserbench completed %llu reads, %llu writes\n",
			(unsigned long long)r->tgt_reads, (unsigned long long)r->tgt_writes,
			(unsigned long long)r->reads_done, (unsigned long long)r->writes_done);
}

/* ---------------- terminal / summary.txt ---------------- */

/* vdbench 5.04's column widths; each field keeps a leading blank so huge
 * values never run into their neighbours (scripts split on whitespace). */
void ib_report_header(FILE *f)
{
	char date[32];
	time_t now = time(NULL);
	struct tm tm;

	if (!localtime_r(&now, &tm) || !strftime(date, sizeof(date), "%b %d, %Y", &tm))
		snprintf(date, sizeof(date), "%12s", "");
	fprintf(f, "%-12s  interval        i/o   MB/sec   bytes   read     resp     read    write"
		"     resp     resp queue  cpu%%  cpu%%%s\n", date, tgt_cols ? "   tgt rd   tgt wr   tgt rd   tgt wr" : "");
	fprintf(f, "%22s       rate  1024**2     i/o    pct     time     resp     resp"
		"      max   stddev depth sys+u   sys%s\n", "", tgt_cols ? "     resp     resp      p99      p99" : "");
}

void ib_report_line(FILE *f, const char *label, const struct ib_stats *s)
{
	struct derived d = derive(s);
	char t[32];

	tod(t, sizeof(t), s);
	fprintf(f, "%s %9s %10.2f %8.2f %7.0f %6.2f %8.3f %8.3f %8.3f %8.3f %8.3f %5.1f %5.1f %5.1f",
		t, label, d.rate, d.mbs, d.bytes, d.readpct, d.resp, d.rresp, d.wresp,
		d.max, d.std, d.qdepth, d.cpu, d.sys);
	tgt_fields(f, s, " %8.3f %8.3f %8.3f %8.3f");
	fputc('\n', f);
}

/* "20us", "1ms", "2s": a bucket bound as vdbench names it. */
static void bound_name(char *buf, size_t len, uint32_t us)
{
	if (us >= 1000000)
		snprintf(buf, len, "%us", us / 1000000);
	else if (us >= 1000)
		snprintf(buf, len, "%ums", us / 1000);
	else
		snprintf(buf, len, "%uus", us);
}

static void bucket_name(char *buf, size_t len, unsigned i)
{
	char lo[16], hi[16];

	if (i == 0) {
		bound_name(hi, sizeof(hi), ib_hist_bounds_us[0]);
		snprintf(buf, len, "< %s", hi);
	} else if (i == IB_HIST_BUCKETS - 1) {
		bound_name(lo, sizeof(lo), ib_hist_bounds_us[i - 1]);
		snprintf(buf, len, ">= %s", lo);
	} else {
		bound_name(lo, sizeof(lo), ib_hist_bounds_us[i - 1]);
		bound_name(hi, sizeof(hi), ib_hist_bounds_us[i]);
		snprintf(buf, len, "%s - %s", lo, hi);
	}
}

static uint64_t hist_total(const struct ib_hist *h)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < IB_HIST_BUCKETS; i++)
		n += h->count[i];
	return n;
}

void ib_report_histogram(FILE *f, const struct ib_hist *h)
{
	uint64_t total = hist_total(h), cum = 0;
	char name[40];

	fprintf(f, "%-16s %14s %8s %8s\n", "response time", "count", "%", "cum%");
	for (unsigned i = 0; i < IB_HIST_BUCKETS; i++) {
		double pct = total ? 100.0 * (double)h->count[i] / (double)total : 0;
		int bar = (int)lround(pct / 2);

		cum += h->count[i];
		bucket_name(name, sizeof(name), i);
		fprintf(f, "%-16s %14llu %8.2f %8.2f ", name, (unsigned long long)h->count[i],
			pct, total ? 100.0 * (double)cum / (double)total : 0);
		for (int b = 0; b < bar; b++)
			fputc('#', f);
		fputc('\n', f);
	}
	fprintf(f, "%-16s %14llu\n", "total", (unsigned long long)total);
}

/* ---------------- run parameters ---------------- */

static const struct ib_rd *run_rd(const struct ib_parm *p, const struct ib_result *r)
{
	return r->run && p && r->run->rd < p->nrd ? &p->rd[r->run->rd] : NULL;
}

static const struct ib_wd *rd_wd(const struct ib_parm *p, const struct ib_rd *rd, unsigned i)
{
	return rd->wd[i] < p->nwd ? &p->wd[rd->wd[i]] : NULL;
}

/*
 * A run parameter as one whitespace-free word: the for-loop value if the
 * run has one, else the WDs' common value, else "mixed".
 */
enum rparam { P_XFER, P_RDPCT, P_SEEK };

static void run_param(char *buf, size_t len, const struct ib_parm *p,
		      const struct ib_result *r, enum rparam which)
{
	const struct ib_run *run = r->run;
	const struct ib_rd *rd = run_rd(p, r);
	bool have = false, mixed = false, eof = false;
	double v = 0;

	if (run && which == P_XFER && run->xfersize) {
		snprintf(buf, len, "%llu", (unsigned long long)run->xfersize);
		return;
	}
	if (run && which == P_RDPCT && run->rdpct >= 0) {
		snprintf(buf, len, "%g", run->rdpct);
		return;
	}
	if (run && which == P_SEEK && run->seek_eof) {
		snprintf(buf, len, "eof");
		return;
	}
	if (run && which == P_SEEK && run->seekpct >= 0) {
		snprintf(buf, len, "%g", run->seekpct);
		return;
	}
	for (unsigned i = 0; rd && i < rd->nwd && i < IB_LIST; i++) {
		const struct ib_wd *wd = rd_wd(p, rd, i);
		double x;

		if (!wd)
			continue;
		if (which == P_XFER && wd->xfer.kind != IB_XFER_FIXED)
			mixed = true;
		x = which == P_XFER ? (double)wd->xfer.size[0] : which == P_RDPCT ? wd->rdpct
			: wd->seek_eof ? -1 : wd->seekpct;
		if (have && x != v)
			mixed = true;
		v = x;
		have = true;
		eof = which == P_SEEK && wd->seek_eof;
	}
	if (!have)
		snprintf(buf, len, "-");
	else if (mixed)
		snprintf(buf, len, "mixed");
	else if (eof)
		snprintf(buf, len, "eof");
	else
		snprintf(buf, len, "%.15g", v);
}

/* rd threads= is per SD; without it each SD's own threads= applies. */
static void run_threads(char *buf, size_t len, const struct ib_parm *p, const struct ib_result *r)
{
	const struct ib_rd *rd = run_rd(p, r);
	const struct ib_wd *wd = rd && rd->nwd ? rd_wd(p, rd, 0) : NULL;

	if (r->run && r->run->threads >= 0)
		snprintf(buf, len, "%d", r->run->threads);
	else if (wd && wd->nsd && wd->sd[0] < p->nsd)
		snprintf(buf, len, "%u", p->sd[wd->sd[0]].threads);
	else
		snprintf(buf, len, "-");
}

static void target_rate(char *buf, size_t len, const struct ib_result *r)
{
	if (r->target_rate > 0)
		snprintf(buf, len, "%.15g", r->target_rate);
	else
		snprintf(buf, len, "max");
}

static void avg_label(char *buf, size_t len, const struct ib_result *r)
{
	snprintf(buf, len, "avg_%u-%u", r->avg_first, r->avg_last);
}

static const char *run_label(const struct ib_result *r)
{
	return r->run ? r->run->label : "";
}

/* ---------------- files ---------------- */

static int fail(char *err, size_t errlen, const char *what, const char *path, int e)
{
	snprintf(err, errlen, "%s '%s': %s", what, path, strerror(e));
	return -1;
}

static int mkdir_fail(char *err, size_t errlen, const char *part, const char *dir, int e)
{
	if (strcmp(part, dir) == 0)
		return fail(err, errlen, "cannot create directory", dir, e);
	snprintf(err, errlen, "cannot create directory '%s': '%s': %s", dir, part, strerror(e));
	return -1;
}

static int mkdir_p(const char *dir, char *err, size_t errlen)
{
	char path[4096];
	size_t len = strlen(dir);
	struct stat st;

	if (len == 0 || len >= sizeof(path)) {
		snprintf(err, errlen, "output directory '%s': %s", dir,
			 len ? "path too long" : "empty name");
		return -1;
	}
	memcpy(path, dir, len + 1);
	for (char *c = path + 1; ; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char save = *c;

		*c = '\0';
		if (mkdir(path, 0777) != 0 && errno != EEXIST)
			return mkdir_fail(err, errlen, path, dir, errno);
		if (stat(path, &st) != 0)
			return mkdir_fail(err, errlen, path, dir, errno);
		if (!S_ISDIR(st.st_mode))
			return mkdir_fail(err, errlen, path, dir, ENOTDIR);
		*c = save;
		if (!save)
			return 0;
	}
}

struct out {
	FILE *f;
	char path[4200];
};

static int out_open(struct out *o, const char *dir, const char *name, char *err, size_t errlen)
{
	if ((size_t)snprintf(o->path, sizeof(o->path), "%s/%s", dir, name) >= sizeof(o->path)) {
		snprintf(err, errlen, "output file in '%s': path too long", dir);
		return -1;
	}
	o->f = fopen(o->path, "w");
	if (!o->f)
		return fail(err, errlen, "cannot create", o->path, errno);
	return 0;
}

static int out_close(struct out *o, char *err, size_t errlen)
{
	int bad = ferror(o->f), e = errno;

	if (fclose(o->f) != 0 && !bad) {
		bad = 1;
		e = errno;
	}
	o->f = NULL;
	return bad ? fail(err, errlen, "cannot write", o->path, e ? e : EIO) : 0;
}

static void write_summary(FILE *f, const struct ib_result *r, unsigned n)
{
	char label[32];

	for (unsigned i = 0; i < n; i++) {
		fprintf(f, "%sRun %u: %s%s\n\n", i ? "\n\n" : "", i + 1, run_label(&r[i]),
			r[i].interrupted ? "  (interrupted by Ctrl-C)" : "");
		ib_report_header(f);
		for (unsigned k = 0; k < r[i].niv; k++) {
			snprintf(label, sizeof(label), "%u", k + 1);
			ib_report_line(f, label, &r[i].iv[k]);
		}
		avg_label(label, sizeof(label), &r[i]);
		ib_report_line(f, label, &r[i].avg);
		if (r[i].validation_errors)
			fprintf(f, "validation errors: %llu\n",
				(unsigned long long)r[i].validation_errors);
		ib_report_run_counts(f, &r[i]);
		fprintf(f, "\nResponse time histogram (%s):\n", label);
		ib_report_histogram(f, &r[i].avg.hist);
	}
}

static void flat_row(FILE *f, const struct ib_parm *p, const struct ib_result *r,
		     unsigned run, const char *label, const struct ib_stats *s)
{
	struct derived d = derive(s);
	char t[32], thr[32], xfer[32], rdpct[32], seek[32], rate[32];

	tod(t, sizeof(t), s);
	run_threads(thr, sizeof(thr), p, r);
	run_param(xfer, sizeof(xfer), p, r, P_XFER);
	run_param(rdpct, sizeof(rdpct), p, r, P_RDPCT);
	run_param(seek, sizeof(seek), p, r, P_SEEK);
	target_rate(rate, sizeof(rate), r);
	fprintf(f, "%s %u %s %.2f %.3f %.0f %.2f %.3f %.3f %.3f %.3f %.3f %.2f %.1f %.1f %llu %s %s %s %s %s",
		t, run, label, d.rate, d.mbs, d.bytes, d.readpct, d.resp, d.rresp, d.wresp,
		d.max, d.std, d.qdepth, d.cpu, d.sys, (unsigned long long)s->errors,
		thr, xfer, rdpct, seek, rate);
	tgt_fields(f, s, " %.3f %.3f %.3f %.3f");
	fputc('\n', f);
}

/* The run column is the run number: labels hold blanks. */
static void write_flatfile(FILE *f, const struct ib_parm *p, const struct ib_result *r, unsigned n)
{
	char label[32];

	fprintf(f, "tod run interval rate MB/sec bytes/io readpct resp read_resp write_resp"
		" resp_max resp_std qdepth cpu_used cpu_sys errors threads xfersize rdpct"
		" seekpct target_rate%s\n", tgt_cols ? " tgt_read_resp tgt_write_resp tgt_read_p99 tgt_write_p99" : "");
	for (unsigned i = 0; i < n; i++) {
		for (unsigned k = 0; k < r[i].niv; k++) {
			snprintf(label, sizeof(label), "%u", k + 1);
			flat_row(f, p, &r[i], i + 1, label, &r[i].iv[k]);
		}
		avg_label(label, sizeof(label), &r[i]);
		flat_row(f, p, &r[i], i + 1, label, &r[i].avg);
	}
}

/* ---------------- results.json ---------------- */

static void jset(json_object *o, const char *k, json_object *v)
{
	json_object_object_add(o, k, v);
}

/* Microsecond resolution is plenty, and 0.1 stays "0.1" in the file. */
static json_object *jnum(double v)
{
	char buf[64];
	size_t n;

	snprintf(buf, sizeof(buf), "%.6f", fin(v));
	n = strlen(buf);
	while (n > 1 && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (buf[n - 1] == '.')
		buf[--n] = '\0';
	return json_object_new_double_s(fin(v), buf);
}

static json_object *jhist(const struct ib_hist *h)
{
	json_object *a = json_object_new_array();

	for (unsigned i = 0; i < IB_HIST_BUCKETS; i++)
		json_object_array_add(a, json_object_new_int64((int64_t)h->count[i]));
	return a;
}

static json_object *jstats(const struct ib_stats *s)
{
	json_object *o = json_object_new_object();
	struct derived d = derive(s);
	char t[32];

	tod(t, sizeof(t), s);
	jset(o, "tod", json_object_new_string(t));
	jset(o, "start", jnum(s->start));
	jset(o, "seconds", jnum(s->seconds));
	jset(o, "reads", json_object_new_int64((int64_t)s->reads));
	jset(o, "writes", json_object_new_int64((int64_t)s->writes));
	jset(o, "read_bytes", json_object_new_int64((int64_t)s->rbytes));
	jset(o, "write_bytes", json_object_new_int64((int64_t)s->wbytes));
	jset(o, "rate", jnum(d.rate));
	jset(o, "mb_sec", jnum(d.mbs));
	jset(o, "bytes_io", jnum(d.bytes));
	jset(o, "read_pct", jnum(d.readpct));
	jset(o, "resp_ms", jnum(d.resp));
	jset(o, "read_resp_ms", jnum(d.rresp));
	jset(o, "write_resp_ms", jnum(d.wresp));
	jset(o, "resp_max_ms", jnum(d.max));
	jset(o, "resp_stddev_ms", jnum(d.std));
	jset(o, "queue_depth", jnum(d.qdepth));
	double ios = (double)s->reads + (double)s->writes;
	jset(o, "queue_wait_ms", jnum(ios > 0 && isfinite(s->wait_us) ? s->wait_us / ios / 1000 : 0));
	jset(o, "queue_wait_max_ms", jnum(s->wait_max_us / 1000));
	jset(o, "cpu_used", jnum(d.cpu));
	jset(o, "cpu_sys", jnum(d.sys));
	jset(o, "errors", json_object_new_int64((int64_t)s->errors));
	jset(o, "histogram", jhist(&s->hist));
	if (s->tgt) {
		/* The target's view: its log2 histograms' p99 is a bucket's upper bound (null: beyond the last). */
		json_object *t = json_object_new_object();
		struct tgt_ms m = tgt_ms(s);
		jset(t, "reads", json_object_new_int64((int64_t)s->tgt_r.count));
		jset(t, "writes", json_object_new_int64((int64_t)s->tgt_w.count));
		jset(t, "read_resp_ms", jnum(m.r));
		jset(t, "write_resp_ms", jnum(m.w));
		jset(t, "read_p99_ms", isfinite(m.rp99) ? jnum(m.rp99) : NULL);
		jset(t, "write_p99_ms", isfinite(m.wp99) ? jnum(m.wp99) : NULL);
		jset(o, "target", t);
	}
	return o;
}

static json_object *jrun(const struct ib_parm *p, const struct ib_result *r)
{
	static const char *const kinds[] = { "max", "fixed", "curve" };
	json_object *o = json_object_new_object(), *iv = json_object_new_array();
	const struct ib_rd *rd = run_rd(p, r);
	char buf[64];

	jset(o, "label", json_object_new_string(run_label(r)));
	jset(o, "rd", json_object_new_string(rd ? rd->name : ""));
	if (r->run) {
		jset(o, "rate_kind", json_object_new_string(kinds[r->run->rate_kind % 3]));
		jset(o, "rate", jnum(r->run->rate));
		if (r->run->rate_kind == IB_RATE_CURVE)
			jset(o, "curve_base", json_object_new_int(r->run->curve_base));
		jset(o, "elapsed", jnum(r->run->elapsed));
		jset(o, "interval", jnum(r->run->interval));
		jset(o, "warmup", jnum(r->run->warmup));
	}
	jset(o, "target_rate", jnum(r->target_rate));
	run_threads(buf, sizeof(buf), p, r);
	jset(o, "threads", json_object_new_string(buf));
	run_param(buf, sizeof(buf), p, r, P_XFER);
	jset(o, "xfersize", json_object_new_string(buf));
	run_param(buf, sizeof(buf), p, r, P_RDPCT);
	jset(o, "rdpct", json_object_new_string(buf));
	run_param(buf, sizeof(buf), p, r, P_SEEK);
	jset(o, "seekpct", json_object_new_string(buf));
	jset(o, "interrupted", json_object_new_boolean(r->interrupted));
	jset(o, "validation_errors", json_object_new_int64((int64_t)r->validation_errors));
	jset(o, "reads_done", json_object_new_int64((int64_t)r->reads_done));
	jset(o, "writes_done", json_object_new_int64((int64_t)r->writes_done));
	if (r->tgt) {
		jset(o, "target_reads", json_object_new_int64((int64_t)r->tgt_reads));
		jset(o, "target_writes", json_object_new_int64((int64_t)r->tgt_writes));
	}
	for (unsigned k = 0; k < r->niv; k++)
		json_object_array_add(iv, jstats(&r->iv[k]));
	jset(o, "intervals", iv);
	avg_label(buf, sizeof(buf), r);
	jset(o, "avg_label", json_object_new_string(buf));
	jset(o, "avg", jstats(&r->avg));
	return o;
}

static int write_json(FILE *f, const struct ib_parm *p, const struct ib_result *r, unsigned n)
{
	json_object *root = json_object_new_object(), *runs = json_object_new_array();
	json_object *bounds = json_object_new_array();
	const char *s;
	int rc;

	for (unsigned i = 0; i < IB_HIST_BUCKETS - 1; i++)
		json_object_array_add(bounds, json_object_new_int64(ib_hist_bounds_us[i]));
	jset(root, "histogram_bounds_us", bounds);
	jset(root, "parmfile", json_object_new_string(p && p->text ? p->text : ""));
	jset(root, "validate", json_object_new_boolean(p && p->validate));
	for (unsigned i = 0; i < n; i++)
		json_object_array_add(runs, jrun(p, &r[i]));
	jset(root, "runs", runs);
	s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	rc = s && fputs(s, f) >= 0 && fputc('\n', f) != EOF ? 0 : -1;
	json_object_put(root);
	return rc;
}

/* ---------------- report.html ---------------- */

static void esc(FILE *f, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&#39;", f); break;
		default: fputc(*s, f);
		}
	}
}

static const char *const colors[] = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
				      "#9467bd", "#8c564b", "#e377c2", "#17becf" };
#define COLOR(i) colors[(i) % (sizeof(colors) / sizeof(colors[0]))]

/* A plot area: data ranges mapped onto a W x H SVG with margins. */
struct chart {
	double x1, y1;                  /* data maxima; minima are 0 */
	double w, h;                    /* plot area */
};
#define CM_L 70.0
#define CM_T 30.0
#define CM_B 62.0
#define CM_R 60.0                       /* room for point labels */

static double cx(const struct chart *c, double x) { return CM_L + x / c->x1 * c->w; }
static double cy(const struct chart *c, double y) { return CM_T + c->h - y / c->y1 * c->h; }

/* The smallest 1, 2 or 5 times a power of ten that is >= v. */
static double nice(double v)
{
	double p;

	if (!(v > 0) || !isfinite(v))
		return 1;
	p = pow(10, floor(log10(v)));
	return v <= p ? p : v <= 2 * p ? 2 * p : v <= 5 * p ? 5 * p : 10 * p;
}

/* Axes, ticks, grid and labels; xmax/ymax are rounded up to a tick. */
static void chart_begin(FILE *f, struct chart *c, double xmax, double ymax, bool xticks,
			const char *title, const char *xlabel, const char *ylabel)
{
	double xs = nice(xmax / 8), ys = nice(ymax / 5);

	c->w = 720;
	c->h = 240;
	c->x1 = ceil(fin(xmax) / xs) * xs;
	c->y1 = ceil(fin(ymax) / ys) * ys;
	if (!(c->x1 > 0))
		c->x1 = xs;
	if (!(c->y1 > 0))
		c->y1 = ys;
	fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
		"font-family=\"sans-serif\" font-size=\"11\">\n", CM_L + c->w + CM_R, CM_T + c->h + CM_B);
	fprintf(f, "<text x=\"%.0f\" y=\"18\" font-size=\"14\" font-weight=\"bold\">", CM_L);
	esc(f, title);
	fprintf(f, "</text>\n");
	for (double y = 0; y <= c->y1 + ys / 2; y += ys)
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.10g</text>\n",
			CM_L, cy(c, y), CM_L + c->w, cy(c, y), CM_L - 5, cy(c, y) + 4, y);
	for (double x = 0; xticks && x <= c->x1 + xs / 2; x += xs)
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.10g</text>\n",
			cx(c, x), CM_T + c->h, cx(c, x), CM_T + c->h + 5, cx(c, x), CM_T + c->h + 17, x);
	fprintf(f, "<path d=\"M%.1f %.1fV%.1fH%.1f\" fill=\"none\" stroke=\"#000\"/>\n",
		CM_L, CM_T, CM_T + c->h, CM_L + c->w);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", CM_L + c->w / 2, CM_T + c->h + CM_B - 8);
	esc(f, xlabel);
	fprintf(f, "</text>\n<text transform=\"translate(16 %.1f) rotate(-90)\" text-anchor=\"middle\">",
		CM_T + c->h / 2);
	esc(f, ylabel);
	fprintf(f, "</text>\n");
}

/* IOPS or response time over time, runs one after another along x. */
static void time_chart(FILE *f, const struct ib_result *r, unsigned n, bool resp)
{
	double tmax = 0, ymax = 0, t = 0;
	struct chart c;

	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < r[i].niv; k++) {
			struct derived d = derive(&r[i].iv[k]);

			tmax += fin(r[i].iv[k].seconds);
			ymax = fmax(ymax, resp ? d.resp : d.rate);
		}
	chart_begin(f, &c, tmax, ymax * 1.05, true, resp ? "Response time over time" : "I/O rate over time",
		    "seconds (runs one after another)", resp ? "resp time (ms)" : "I/O per second");
	for (unsigned i = 0; i < n; i++) {
		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#999\" "
			"stroke-dasharray=\"3 3\"/><text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">%u</text>\n",
			cx(&c, t), CM_T, cx(&c, t), CM_T + c.h, cx(&c, t) + 3, CM_T + 10, COLOR(i), i + 1);
		/* A step per interval: its value held from its start to its end. */
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", COLOR(i));
		for (unsigned k = 0; k < r[i].niv; k++) {
			struct derived d = derive(&r[i].iv[k]);
			double y = cy(&c, resp ? d.resp : d.rate);

			fprintf(f, "%.1f,%.1f ", cx(&c, t), y);
			t += fin(r[i].iv[k].seconds);
			fprintf(f, "%.1f,%.1f ", cx(&c, t), y);
		}
		fprintf(f, "\"><title>run %u</title></polyline>\n", i + 1);
	}
	fprintf(f, "</svg>\n");
}

/*
 * The max run a curve run belongs to: results come one per run in run
 * order, so curve_base indexes r[]; if that does not hold (a run was
 * skipped), the nearest earlier max run of the same rd.
 */
static int curve_base(const struct ib_result *r, unsigned n, unsigned i)
{
	int b = r[i].run->curve_base;

	if (b >= 0 && (unsigned)b < i && r[b].run && r[b].run->rate_kind == IB_RATE_MAX &&
	    r[b].run->rd == r[i].run->rd)
		return b;
	for (b = (int)i - 1; b >= 0; b--)
		if (r[b].run && r[b].run->rate_kind == IB_RATE_MAX && r[b].run->rd == r[i].run->rd)
			return b;
	return -1;
}

static bool is_curve(const struct ib_result *r)
{
	return r->run && r->run->rate_kind == IB_RATE_CURVE;
}

/* Response time vs I/O rate: the max run and its curve runs, by rate. */
static void curve_chart(FILE *f, const struct ib_parm *p, const struct ib_result *r,
			unsigned n, unsigned base)
{
	unsigned *idx = malloc(n * sizeof(*idx)), np = 0;
	double xmax = 0, ymax = 0;
	const struct ib_rd *rd = run_rd(p, &r[base]);
	char title[160];
	struct chart c;

	if (!idx)
		return;
	idx[np++] = base;
	for (unsigned i = base + 1; i < n; i++)
		if (is_curve(&r[i]) && curve_base(r, n, i) == (int)base)
			idx[np++] = i;
	for (unsigned a = 1; a < np; a++)       /* insertion sort by rate */
		for (unsigned b = a; b > 0 && derive(&r[idx[b]].avg).rate < derive(&r[idx[b - 1]].avg).rate; b--) {
			unsigned t = idx[b];

			idx[b] = idx[b - 1];
			idx[b - 1] = t;
		}
	for (unsigned a = 0; a < np; a++) {
		struct derived d = derive(&r[idx[a]].avg);

		xmax = fmax(xmax, d.rate);
		ymax = fmax(ymax, d.resp);
	}
	snprintf(title, sizeof(title), "Curve: rd=%s (run %u and its curve runs)",
		 rd ? rd->name : "?", base + 1);
	chart_begin(f, &c, xmax * 1.05, ymax * 1.1, true, title, "I/O per second", "resp time (ms)");
	fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", COLOR(0));
	for (unsigned a = 0; a < np; a++) {
		struct derived d = derive(&r[idx[a]].avg);

		fprintf(f, "%.1f,%.1f ", cx(&c, d.rate), cy(&c, d.resp));
	}
	fprintf(f, "\"/>\n");
	for (unsigned a = 0; a < np; a++) {
		struct derived d = derive(&r[idx[a]].avg);

		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\"><title>run %u: "
			"%.1f IO/s, %.3f ms</title></circle><text x=\"%.1f\" y=\"%.1f\">",
			cx(&c, d.rate), cy(&c, d.resp), COLOR(0), idx[a] + 1, d.rate, d.resp,
			cx(&c, d.rate) + 5, cy(&c, d.resp) - 6);
		if (is_curve(&r[idx[a]]))
			fprintf(f, "%g%%", r[idx[a]].run->rate);
		else
			fprintf(f, "max");
		fprintf(f, "</text>\n");
	}
	fprintf(f, "</svg>\n");
	free(idx);
}

static void hist_chart(FILE *f, const struct ib_result *r, unsigned i)
{
	uint64_t total = hist_total(&r->avg.hist);
	double ymax = 0, bw;
	char title[64], name[16];
	struct chart c;

	for (unsigned b = 0; b < IB_HIST_BUCKETS; b++)
		ymax = fmax(ymax, total ? 100.0 * (double)r->avg.hist.count[b] / (double)total : 0);
	snprintf(title, sizeof(title), "Run %u: response time histogram", i + 1);
	chart_begin(f, &c, IB_HIST_BUCKETS, ymax, false, title, "response time (upper bound of the bucket)",
		    "% of I/Os");
	bw = c.w / IB_HIST_BUCKETS;
	for (unsigned b = 0; b < IB_HIST_BUCKETS; b++) {
		double pct = total ? 100.0 * (double)r->avg.hist.count[b] / (double)total : 0;

		if (b < IB_HIST_BUCKETS - 1)
			bound_name(name, sizeof(name), ib_hist_bounds_us[b]);
		else
			snprintf(name, sizeof(name), "&gt;2s");
		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
			"<title>%s: %llu (%.2f%%)</title></rect>"
			"<text transform=\"translate(%.1f %.1f) rotate(-45)\" text-anchor=\"end\" "
			"font-size=\"10\">%s</text>\n",
			CM_L + b * bw + 1, cy(&c, pct), bw - 2, CM_T + c.h - cy(&c, pct), COLOR(i), name,
			(unsigned long long)r->avg.hist.count[b], pct,
			CM_L + (b + 0.5) * bw + 3, CM_T + c.h + 10, name);
	}
	fprintf(f, "</svg>\n");
}

static void summary_table(FILE *f, const struct ib_result *r, unsigned n)
{
	fprintf(f, "<table>\n<tr><th>run</th><th>label</th><th>I/O rate</th><th>MB/s</th>"
		"<th>resp ms</th><th>max ms</th><th>stddev ms</th><th>queue depth</th></tr>\n");
	for (unsigned i = 0; i < n; i++) {
		struct derived d = derive(&r[i].avg);

		fprintf(f, "<tr><td>%u</td><td class=\"l\">", i + 1);
		esc(f, run_label(&r[i]));
		if (r[i].interrupted)
			fprintf(f, " <b>(interrupted)</b>");
		if (r[i].validation_errors)
			fprintf(f, " <b>(%llu validation errors)</b>",
				(unsigned long long)r[i].validation_errors);
		fprintf(f, "</td><td>%.1f</td><td>%.2f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td>"
			"<td>%.1f</td></tr>\n", d.rate, d.mbs, d.resp, d.max, d.std, d.qdepth);
	}
	fprintf(f, "</table>\n");
}

static void write_html(FILE *f, const struct ib_parm *p, const struct ib_result *r, unsigned n)
{
	bool curves = false;

	fprintf(f, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>iserbench report</title>\n"
		"<style>body{font-family:sans-serif;margin:1em 2em}table{border-collapse:collapse}"
		"td,th{border:1px solid #bbb;padding:2px 6px;text-align:right}td.l{text-align:left}"
		"svg{display:block;margin:1em 0}pre{background:#f4f4f4;padding:.5em}</style>\n"
		"</head><body>\n<h1>iserbench report</h1>\n<h2>Runs (averages)</h2>\n");
	summary_table(f, r, n);
	fprintf(f, "<h2>Over time</h2>\n");
	time_chart(f, r, n, false);
	time_chart(f, r, n, true);
	for (unsigned i = 0; i < n; i++)
		if (is_curve(&r[i]))
			curves = true;
	if (curves) {
		fprintf(f, "<h2>Curves</h2>\n");
		for (unsigned i = 0; i < n; i++) {
			bool base = false;

			for (unsigned k = i + 1; k < n && !base; k++)
				base = is_curve(&r[k]) && curve_base(r, n, k) == (int)i;
			if (base)
				curve_chart(f, p, r, n, i);
		}
	}
	fprintf(f, "<h2>Response time histograms</h2>\n");
	for (unsigned i = 0; i < n; i++)
		hist_chart(f, &r[i], i);
	fprintf(f, "<h2>Parameter file</h2>\n<pre>");
	esc(f, p && p->text ? p->text : "");
	fprintf(f, "</pre>\n</body></html>\n");
}

int ib_report_write(const char *outdir, const struct ib_parm *p,
		    const struct ib_result *r, unsigned n, char *err, size_t errlen)
{
	static const char *const names[] = { "summary.txt", "flatfile.txt", "results.json",
					      "report.html", "parmfile.txt" };
	struct out o;

	if (mkdir_p(outdir, err, errlen) != 0)
		return -1;
	for (unsigned w = 0; w < sizeof(names) / sizeof(names[0]); w++) {
		if (out_open(&o, outdir, names[w], err, errlen) != 0)
			return -1;
		switch (w) {
		case 0: write_summary(o.f, r, n); break;
		case 1: write_flatfile(o.f, p, r, n); break;
		case 2:
			if (write_json(o.f, p, r, n) != 0) {
				fclose(o.f);
				snprintf(err, errlen, "cannot write '%s': JSON encoding failed", o.path);
				return -1;
			}
			break;
		case 3: write_html(o.f, p, r, n); break;
		case 4: fputs(p && p->text ? p->text : "", o.f); break;
		}
		if (out_close(&o, err, errlen) != 0)
			return -1;
	}
	return 0;
}
