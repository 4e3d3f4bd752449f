/* Unit tests for tools/iserbench/report.c: histogram, statistics, interval
 * lines and the output folder. */
#include <CUnit/Basic.h>
#include <ctype.h>
#include <ftw.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ib.h"

#include "unit_run.h"

static char tmpdir[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static unsigned bucket_of(uint32_t us)
{
	struct ib_hist h = { { 0 } };
	unsigned hit = IB_HIST_BUCKETS, n = 0;

	ib_hist_add(&h, us);
	for (unsigned i = 0; i < IB_HIST_BUCKETS; i++) {
		n += (unsigned)h.count[i];
		if (h.count[i])
			hit = i;
	}
	return n == 1 ? hit : IB_HIST_BUCKETS;
}

static void test_hist(void)
{
	static const uint32_t want[] = { 20, 40, 60, 80, 100, 200, 400, 600, 800,
		1000, 2000, 4000, 6000, 8000, 10000, 20000, 40000, 60000, 80000,
		100000, 200000, 400000, 600000, 800000, 1000000, 2000000 };

	CU_ASSERT_EQUAL_FATAL(sizeof(want) / sizeof(want[0]), IB_HIST_BUCKETS - 1);
	CU_ASSERT_EQUAL(memcmp(want, ib_hist_bounds_us, sizeof(want)), 0);
	CU_ASSERT_EQUAL(bucket_of(0), 0);
	CU_ASSERT_EQUAL(bucket_of(19), 0);
	CU_ASSERT_EQUAL(bucket_of(20), 1);
	CU_ASSERT_EQUAL(bucket_of(39), 1);
	CU_ASSERT_EQUAL(bucket_of(40), 2);
	CU_ASSERT_EQUAL(bucket_of(799), 8);
	CU_ASSERT_EQUAL(bucket_of(999), 9);
	CU_ASSERT_EQUAL(bucket_of(1000), 10);
	CU_ASSERT_EQUAL(bucket_of(150000), 20);
	CU_ASSERT_EQUAL(bucket_of(1999999), 25);
	CU_ASSERT_EQUAL(bucket_of(2000000), 26);
	CU_ASSERT_EQUAL(bucket_of(3000000), 26);
	CU_ASSERT_EQUAL(bucket_of(UINT32_MAX), 26);
	/* Every value lands in the bucket whose bounds hold it. */
	for (unsigned i = 0; i < IB_HIST_BUCKETS - 1; i++) {
		CU_ASSERT_EQUAL(bucket_of(ib_hist_bounds_us[i] - 1), i);
		CU_ASSERT_EQUAL(bucket_of(ib_hist_bounds_us[i]), i + 1);
	}
}

static void test_stats_add(void)
{
	struct ib_stats a = { 0 }, b = { 0 }, sum = { 0 };

	a.start = 1000;  a.seconds = 1;  a.reads = 10;  a.writes = 5;
	a.rbytes = 40960; a.wbytes = 20480; a.rresp_us = 1000; a.wresp_us = 500;
	a.resp_sq_us = 12345; a.resp_max_us = 300; a.cpu_total = 10; a.cpu_sys = 2;
	a.errors = 1; a.hist.count[3] = 15;
	b.start = 1001;  b.seconds = 3;  b.reads = 7;  b.writes = 0;
	b.rbytes = 7 * 4096; b.rresp_us = 700; b.resp_sq_us = 100;
	b.resp_max_us = 900; b.cpu_total = 30; b.cpu_sys = 6; b.hist.count[3] = 2;
	b.hist.count[26] = 5;

	ib_stats_add(&sum, &a);
	CU_ASSERT_EQUAL(memcmp(&sum, &a, sizeof(a)), 0);
	ib_stats_add(&sum, &b);
	CU_ASSERT_DOUBLE_EQUAL(sum.start, 1000, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(sum.seconds, 4, 1e-9);
	CU_ASSERT_EQUAL(sum.reads, 17);
	CU_ASSERT_EQUAL(sum.writes, 5);
	CU_ASSERT_EQUAL(sum.rbytes, 40960 + 7 * 4096);
	CU_ASSERT_EQUAL(sum.wbytes, 20480);
	CU_ASSERT_DOUBLE_EQUAL(sum.rresp_us, 1700, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(sum.wresp_us, 500, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(sum.resp_sq_us, 12445, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(sum.resp_max_us, 900, 1e-9);
	CU_ASSERT_DOUBLE_EQUAL(sum.cpu_total, 25, 1e-9);     /* (10*1 + 30*3) / 4 */
	CU_ASSERT_DOUBLE_EQUAL(sum.cpu_sys, 5, 1e-9);
	CU_ASSERT_EQUAL(sum.errors, 1);
	CU_ASSERT_EQUAL(sum.hist.count[3], 17);
	CU_ASSERT_EQUAL(sum.hist.count[26], 5);
	/* An earlier interval added later still gives the earliest start. */
	b.start = 900;
	ib_stats_add(&sum, &b);
	CU_ASSERT_DOUBLE_EQUAL(sum.start, 900, 1e-9);
}

/* Print one line into a buffer. */
static char *line_of(const char *label, const struct ib_stats *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	ib_report_line(f, label, s);
	fclose(f);
	return buf;
}

static void test_line(void)
{
	struct ib_stats s = { 0 };
	char tod[32], lab[32], want[16];
	double v[12];
	time_t t;
	struct tm tm;
	char *line, *hdr = NULL;
	size_t hlen = 0;
	FILE *f;

	s.start = 1700000000.25;
	s.seconds = 2;
	s.reads = 1500;
	s.writes = 500;
	s.rbytes = 1500 * 4096;
	s.wbytes = 500 * 8192;
	s.rresp_us = 1500 * 200.0;          /* reads 0.2 ms each */
	s.wresp_us = 500 * 1000.0;          /* writes 1 ms each */
	s.resp_sq_us = 1500 * 200.0 * 200 + 500 * 1000.0 * 1000;
	s.resp_max_us = 5000;
	s.cpu_total = 12.5;
	s.cpu_sys = 3.5;
	line = line_of("avg_2-10", &s);
	CU_ASSERT_EQUAL_FATAL(sscanf(line, "%31s %31s %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf",
				     tod, lab, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
				     &v[7], &v[8], &v[9], &v[10], &v[11]), 14);
	t = 1700000002;
	localtime_r(&t, &tm);
	strftime(want, sizeof(want), "%H:%M:%S.250", &tm);
	CU_ASSERT_STRING_EQUAL(tod, want);
	CU_ASSERT_STRING_EQUAL(lab, "avg_2-10");
	CU_ASSERT_DOUBLE_EQUAL(v[0], 1000, 0.01);          /* i/o rate */
	CU_ASSERT_DOUBLE_EQUAL(v[1], 4.88, 0.001);         /* MB/sec: 10240000 / 2 / 2^20 */
	CU_ASSERT_DOUBLE_EQUAL(v[2], 5120, 0.1);           /* bytes/io */
	CU_ASSERT_DOUBLE_EQUAL(v[3], 75, 0.001);           /* read pct */
	CU_ASSERT_DOUBLE_EQUAL(v[4], 0.4, 0.0001);         /* resp */
	CU_ASSERT_DOUBLE_EQUAL(v[5], 0.2, 0.0001);         /* read resp */
	CU_ASSERT_DOUBLE_EQUAL(v[6], 1.0, 0.0001);         /* write resp */
	CU_ASSERT_DOUBLE_EQUAL(v[7], 5.0, 0.0001);         /* resp max */
	CU_ASSERT_DOUBLE_EQUAL(v[8], 0.346, 0.0006);       /* stddev: sqrt(120000) us */
	CU_ASSERT_DOUBLE_EQUAL(v[9], 0.4, 0.0001);         /* queue depth: 0.8 s busy / 2 s */
	CU_ASSERT_DOUBLE_EQUAL(v[10], 12.5, 0.0001);
	CU_ASSERT_DOUBLE_EQUAL(v[11], 3.5, 0.0001);
	/* The columns line up under vdbench's two heading lines. */
	f = open_memstream(&hdr, &hlen);
	ib_report_header(f);
	fclose(f);
	CU_ASSERT_PTR_NOT_NULL_FATAL(strstr(hdr, "\n"));
	CU_ASSERT_EQUAL(strchr(hdr, '\n') - hdr, (long)strlen(line) - 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(hdr, "interval        i/o   MB/sec   bytes   read     resp"));
	CU_ASSERT_PTR_NOT_NULL(strstr(hdr, "stddev depth sys+u   sys"));
	free(hdr);
	free(line);
}

static bool has_nan(const char *s)
{
	for (; *s; s++)
		if (!strncasecmp(s, "nan", 3) || !strncasecmp(s, "inf", 3))
			return true;
	return false;
}

static void test_zero_line(void)
{
	struct ib_stats s = { 0 };
	char tod[32], lab[32];
	double v[12];
	char *line;

	for (int pass = 0; pass < 3; pass++) {
		s.seconds = pass == 0 ? 1 : 0;
		s.cpu_total = pass == 2 ? NAN : 0;
		line = line_of("7", &s);
		CU_ASSERT_FALSE(has_nan(line));
		CU_ASSERT_EQUAL(sscanf(line, "%31s %31s %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf %lf",
				       tod, lab, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
				       &v[7], &v[8], &v[9], &v[10], &v[11]), 14);
		for (int i = 0; i < 12; i++)
			CU_ASSERT_EQUAL(v[i], 0);
		free(line);
	}
}

static void test_histogram_print(void)
{
	struct ib_hist h = { { 0 } };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	h.count[0] = 1;
	h.count[9] = 3;
	h.count[26] = 4;
	ib_report_histogram(f, &h);
	fclose(f);
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "< 20us"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "1ms - 2ms"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, ">= 2s"));
	/* 4 of 8: 50%, cumulative 100%, a 25-character bar. */
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "4    50.00   100.00 #########################\n"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "3    37.50    50.00 ###"));
	CU_ASSERT_PTR_NOT_NULL(strstr(buf, "total"));
	free(buf);
}

/* ---------------- the output folder ---------------- */

#define NRES 4
static const unsigned niv[NRES] = { 3, 4, 5, 2 };

static void make_results(struct ib_parm *p, struct ib_sd *sd, struct ib_wd *wd, struct ib_rd *rd,
			 struct ib_run *runs, struct ib_result *res)
{
	static const double pct[NRES] = { 0, 50, 80, 100 };

	memset(p, 0, sizeof(*p));
	memset(sd, 0, sizeof(*sd));
	memset(wd, 0, sizeof(*wd));
	memset(rd, 0, sizeof(*rd));
	strcpy(sd->name, "sd1");
	strcpy(sd->lun, "iscsi://127.0.0.1/iqn.x/0");
	sd->threads = 8;
	strcpy(wd->name, "wd1");
	wd->nsd = 1;
	wd->rdpct = 70;
	wd->seekpct = 100;
	wd->xfer.kind = IB_XFER_FIXED;
	wd->xfer.n = 1;
	wd->xfer.size[0] = 4096;
	strcpy(rd->name, "r1");
	rd->nwd = 1;
	rd->iorate = IB_IORATE_CURVE;
	p->sd = sd; p->nsd = 1;
	p->wd = wd; p->nwd = 1;
	p->rd = rd; p->nrd = 1;
	p->text = "sd=sd1,lun=iscsi://127.0.0.1/iqn.x/0\nwd=wd1,sd=sd1,rdpct=70\n"
		  "rd=r1,wd=wd1,iorate=curve,curve=(50,80,100) * <b>&</b>\n";
	for (unsigned i = 0; i < NRES; i++) {
		struct ib_run *run = &runs[i];
		struct ib_result *r = &res[i];

		memset(run, 0, sizeof(*run));
		memset(r, 0, sizeof(*r));
		run->rate_kind = i ? IB_RATE_CURVE : IB_RATE_MAX;
		run->rate = pct[i];
		run->curve_base = 0;
		run->threads = -1;
		run->rdpct = -1;
		run->seekpct = -1;
		run->elapsed = niv[i];
		run->interval = 1;
		if (i == 0)
			snprintf(run->label, sizeof(run->label), "rd=r1,iorate=max <&> test");
		else
			snprintf(run->label, sizeof(run->label), "rd=r1,iorate=curve(%g%%)", pct[i]);
		r->run = run;
		r->target_rate = i ? 20000 * pct[i] / 100 : 0;
		r->niv = niv[i];
		r->iv = calloc(niv[i], sizeof(*r->iv));
		r->avg_first = 2;
		r->avg_last = niv[i];
		r->interrupted = i == 2;
		for (unsigned k = 0; k < niv[i]; k++) {
			struct ib_stats *s = &r->iv[k];
			uint64_t ios = i ? 200 * (uint64_t)pct[i] : 20000;

			s->start = 1700000000 + 100 * i + k;
			s->seconds = 1;
			s->reads = ios * 7 / 10;
			s->writes = ios - s->reads;
			s->rbytes = s->reads * 4096;
			s->wbytes = s->writes * 4096;
			s->rresp_us = (double)s->reads * (100 + 50 * i);
			s->wresp_us = (double)s->writes * (300 + 50 * i);
			s->resp_max_us = 2000;
			for (uint64_t n = 0; n < ios; n++)
				ib_hist_add(&s->hist, (uint32_t)(n % 400));
			if (k + 1 >= r->avg_first)
				ib_stats_add(&r->avg, s);
		}
	}
}

static char *slurp(const char *dir, const char *name)
{
	char path[512];
	FILE *f;
	char *buf;
	long len;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)len + 1);
	if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static unsigned count(const char *hay, const char *needle)
{
	unsigned n = 0;

	for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
		n++;
	return n;
}

static unsigned words(const char *line, size_t len)
{
	unsigned n = 0;

	for (size_t i = 0; i < len; i++)
		if (!isspace((unsigned char)line[i]) && (i == 0 || isspace((unsigned char)line[i - 1])))
			n++;
	return n;
}

static void check_json(const char *dir)
{
	char path[512];
	json_object *root, *runs, *run, *o;

	snprintf(path, sizeof(path), "%s/results.json", dir);
	root = json_object_from_file(path);
	CU_ASSERT_PTR_NOT_NULL_FATAL(root);
	CU_ASSERT_TRUE_FATAL(json_object_object_get_ex(root, "runs", &runs));
	CU_ASSERT_EQUAL_FATAL(json_object_array_length(runs), NRES);
	for (unsigned i = 0; i < NRES; i++) {
		run = json_object_array_get_idx(runs, i);
		CU_ASSERT_TRUE_FATAL(json_object_object_get_ex(run, "intervals", &o));
		CU_ASSERT_EQUAL(json_object_array_length(o), niv[i]);
		CU_ASSERT_TRUE_FATAL(json_object_object_get_ex(run, "avg", &o));
		CU_ASSERT_TRUE_FATAL(json_object_object_get_ex(o, "histogram", &o));
		CU_ASSERT_EQUAL(json_object_array_length(o), IB_HIST_BUCKETS);
	}
	run = json_object_array_get_idx(runs, 0);
	CU_ASSERT_TRUE(json_object_object_get_ex(run, "label", &o));
	CU_ASSERT_STRING_EQUAL(json_object_get_string(o), "rd=r1,iorate=max <&> test");
	CU_ASSERT_TRUE(json_object_object_get_ex(run, "xfersize", &o));
	CU_ASSERT_STRING_EQUAL(json_object_get_string(o), "4096");
	CU_ASSERT_TRUE(json_object_object_get_ex(run, "avg", &o));
	CU_ASSERT_TRUE(json_object_object_get_ex(o, "rate", &o));
	CU_ASSERT_DOUBLE_EQUAL(json_object_get_double(o), 20000, 0.01);
	run = json_object_array_get_idx(runs, 2);
	CU_ASSERT_TRUE(json_object_object_get_ex(run, "interrupted", &o));
	CU_ASSERT_TRUE(json_object_get_boolean(o));
	CU_ASSERT_TRUE(json_object_object_get_ex(root, "parmfile", &o));
	CU_ASSERT_PTR_NOT_NULL(strstr(json_object_get_string(o), "iorate=curve"));
	json_object_put(root);
}

static void test_write(void)
{
	struct ib_parm p;
	struct ib_sd sd;
	struct ib_wd wd;
	struct ib_rd rd;
	struct ib_run runs[NRES];
	struct ib_result res[NRES];
	char dir[256], err[512];
	char *html, *flat, *sum, *parm, *nl;
	unsigned rows = 0, hdrwords, want_rows = 0;

	make_results(&p, &sd, &wd, &rd, runs, res);
	snprintf(dir, sizeof(dir), "%s/out/deeper", tmpdir);      /* mkdir -p */
	CU_ASSERT_EQUAL_FATAL(ib_report_write(dir, &p, res, NRES, err, sizeof(err)), 0);
	/* Writing again over an existing folder works too. */
	CU_ASSERT_EQUAL_FATAL(ib_report_write(dir, &p, res, NRES, err, sizeof(err)), 0);

	check_json(dir);

	html = slurp(dir, "report.html");
	CU_ASSERT_PTR_NOT_NULL_FATAL(html);
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "<svg"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "rd=r1,iorate=max &lt;&amp;&gt; test"));
	CU_ASSERT_PTR_NULL(strstr(html, "<&>"));
	CU_ASSERT_PTR_NULL(strstr(html, "<b>&</b>"));           /* the parmfile text, escaped */
	/* Nothing fetched: no scripts, links, images or imports. */
	CU_ASSERT_PTR_NULL(strstr(html, "src="));
	CU_ASSERT_PTR_NULL(strstr(html, "href"));
	CU_ASSERT_PTR_NULL(strstr(html, "<script"));
	CU_ASSERT_PTR_NULL(strstr(html, "<link"));
	CU_ASSERT_PTR_NULL(strstr(html, "url("));
	CU_ASSERT_PTR_NULL(strstr(html, "@import"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "Curve: rd=r1"));
	CU_ASSERT_EQUAL(count(html, "<circle"), NRES);          /* max + 3 curve points */
	/* IOPS, response time, one curve, a histogram per run. */
	CU_ASSERT_EQUAL(count(html, "<svg"), 2 + 1 + NRES);
	CU_ASSERT_EQUAL(count(html, "<svg"), count(html, "</svg>"));
	CU_ASSERT_PTR_NOT_NULL(strstr(html, "(interrupted)"));
	free(html);

	flat = slurp(dir, "flatfile.txt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(flat);
	CU_ASSERT_EQUAL(strncmp(flat, "tod run interval rate MB/sec bytes/io readpct resp", 50), 0);
	nl = strchr(flat, '\n');
	CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
	hdrwords = words(flat, (size_t)(nl - flat));
	CU_ASSERT_EQUAL(hdrwords, 21);
	for (char *l = nl + 1; *l; l = nl + 1) {
		nl = strchr(l, '\n');
		CU_ASSERT_PTR_NOT_NULL_FATAL(nl);
		CU_ASSERT_EQUAL(words(l, (size_t)(nl - l)), hdrwords);
		rows++;
	}
	for (unsigned i = 0; i < NRES; i++)
		want_rows += niv[i] + 1;                        /* intervals + avg */
	CU_ASSERT_EQUAL(rows, want_rows);
	CU_ASSERT_EQUAL(count(flat, " avg_2-"), NRES);
	CU_ASSERT_PTR_NOT_NULL(strstr(flat, " 8 4096 70 100 max\n"));   /* run parameters */
	CU_ASSERT_PTR_NOT_NULL(strstr(flat, " 8 4096 70 100 10000\n"));
	free(flat);

	sum = slurp(dir, "summary.txt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(sum);
	CU_ASSERT_EQUAL(count(sum, "Run "), NRES);
	CU_ASSERT_EQUAL(count(sum, "interrupted"), 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(sum, "avg_2-5"));
	CU_ASSERT_EQUAL(count(sum, "response time "), NRES);      /* a histogram each */
	CU_ASSERT_FALSE(has_nan(sum));
	free(sum);

	parm = slurp(dir, "parmfile.txt");
	CU_ASSERT_PTR_NOT_NULL_FATAL(parm);
	CU_ASSERT_STRING_EQUAL(parm, p.text);
	free(parm);

	for (unsigned i = 0; i < NRES; i++)
		free(res[i].iv);
}

static void test_write_errors(void)
{
	struct ib_parm p = { 0 };
	char file[128], dir[256], jpath[300], err[1024];
	FILE *f;

	snprintf(file, sizeof(file), "%s/plainfile", tmpdir);
	f = fopen(file, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fclose(f);

	/* A folder under a regular file. */
	snprintf(dir, sizeof(dir), "%s/out", file);
	err[0] = '\0';
	CU_ASSERT_EQUAL(ib_report_write(dir, &p, NULL, 0, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, dir));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, strerror(ENOTDIR)));

	/* The folder itself is a regular file. */
	err[0] = '\0';
	CU_ASSERT_EQUAL(ib_report_write(file, &p, NULL, 0, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, file));

	/* A file that cannot be created: results.json is a directory. */
	snprintf(dir, sizeof(dir), "%s/blocked", tmpdir);
	CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0777), 0);
	snprintf(jpath, sizeof(jpath), "%s/results.json", dir);
	CU_ASSERT_EQUAL_FATAL(mkdir(jpath, 0777), 0);
	err[0] = '\0';
	CU_ASSERT_EQUAL(ib_report_write(dir, &p, NULL, 0, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, jpath));

	/* No runs at all still makes a complete, valid folder. */
	snprintf(dir, sizeof(dir), "%s/empty", tmpdir);
	CU_ASSERT_EQUAL(ib_report_write(dir, &p, NULL, 0, err, sizeof(err)), 0);
	snprintf(jpath, sizeof(jpath), "%s/results.json", dir);
	{
		json_object *root = json_object_from_file(jpath), *runs;

		CU_ASSERT_PTR_NOT_NULL_FATAL(root);
		CU_ASSERT_TRUE(json_object_object_get_ex(root, "runs", &runs));
		CU_ASSERT_EQUAL(json_object_array_length(runs), 0);
		json_object_put(root);
	}
}

int main(void)
{
	CU_pSuite s;

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_ib_report.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("report", NULL, NULL);
	CU_add_test(s, "histogram buckets", test_hist);
	CU_add_test(s, "stats add", test_stats_add);
	CU_add_test(s, "interval line", test_line);
	CU_add_test(s, "zero-I/O line", test_zero_line);
	CU_add_test(s, "histogram table", test_histogram_print);
	CU_add_test(s, "output folder", test_write);
	CU_add_test(s, "output folder errors", test_write_errors);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	int rc = unit_run();
	nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	return rc;
}
