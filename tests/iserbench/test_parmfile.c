/*
 * Unit tests for tools/iserbench/parmfile.c: the vdbench-style files in
 * parm/ (run from tests/iserbench), the runs they expand to, the curve
 * rounding, the bad files' messages, and truncated or garbled copies.
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib.h"

#include "unit_run.h"

#define KB 1024ull
#define MB (1024ull * 1024)
#define GB (1024ull * 1024 * 1024)

static char err[512];

static int load(const char *file, char *const *vars, unsigned nvars, struct ib_parm *p)
{
	char path[256];
	int rc;

	snprintf(path, sizeof(path), "parm/%s", file);
	rc = ib_parm_load(path, vars, nvars, p, err, sizeof(err));
	if (rc)
		fprintf(stderr, "\n%s: %s\n", file, err);
	return rc;
}

static int expand(const struct ib_parm *p, struct ib_run **r, unsigned *n)
{
	int rc = ib_runs_expand(p, r, n, err, sizeof(err));

	if (rc)
		fprintf(stderr, "\nexpand: %s\n", err);
	return rc;
}

static void test_simple(void)
{
	struct ib_parm p;
	struct ib_run *r;
	unsigned n;

	CU_ASSERT_EQUAL_FATAL(load("simple-max.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL_FATAL(p.nsd, 1);
	CU_ASSERT_STRING_EQUAL(p.sd[0].name, "sd1");
	CU_ASSERT_STRING_EQUAL(p.sd[0].lun, "/tmp/iserbench-simple.img");
	CU_ASSERT_EQUAL(p.sd[0].size, 64 * MB);
	CU_ASSERT_EQUAL(p.sd[0].threads, 4);
	CU_ASSERT_EQUAL(p.sd[0].offset, 0);
	CU_ASSERT_EQUAL(p.sd[0].range[0], 0);
	CU_ASSERT_EQUAL(p.sd[0].range[1], 100);
	CU_ASSERT_EQUAL(p.sd[0].line, 2);
	CU_ASSERT_EQUAL_FATAL(p.nwd, 1);
	CU_ASSERT_EQUAL(p.wd[0].nsd, 1);
	CU_ASSERT_EQUAL(p.wd[0].sd[0], 0);
	CU_ASSERT_EQUAL(p.wd[0].xfer.kind, IB_XFER_FIXED);
	CU_ASSERT_EQUAL(p.wd[0].xfer.size[0], 4096);
	CU_ASSERT_EQUAL(p.wd[0].rdpct, 100);
	CU_ASSERT_EQUAL(p.wd[0].seekpct, 100);
	CU_ASSERT_FALSE(p.wd[0].seek_eof);
	CU_ASSERT_EQUAL(p.wd[0].hitarea, MB);
	CU_ASSERT_EQUAL_FATAL(p.nrd, 1);
	CU_ASSERT_EQUAL(p.rd[0].iorate, IB_IORATE_MAX);
	CU_ASSERT_EQUAL(p.rd[0].elapsed, 10);
	CU_ASSERT_EQUAL(p.rd[0].interval, 1);
	CU_ASSERT_EQUAL(p.rd[0].warmup, 0);
	CU_ASSERT_EQUAL(p.rd[0].ncurve, 6);
	CU_ASSERT_FALSE(p.validate);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p.text);
	CU_ASSERT_PTR_NOT_NULL(strstr(p.text, "* The simplest vdbench test"));
	CU_ASSERT_PTR_NOT_NULL(strstr(p.text, "rd=rd1,wd=wd1,iorate=max"));

	CU_ASSERT_EQUAL_FATAL(expand(&p, &r, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(r[0].rd, 0);
	CU_ASSERT_EQUAL(r[0].rate_kind, IB_RATE_MAX);
	CU_ASSERT_EQUAL(r[0].threads, -1);
	CU_ASSERT_EQUAL(r[0].xfersize, 0);
	CU_ASSERT(r[0].rdpct < 0);
	CU_ASSERT(r[0].seekpct < 0);
	CU_ASSERT_EQUAL(r[0].elapsed, 10);
	CU_ASSERT_STRING_EQUAL(r[0].label,
			       "RD=rd1; I/O rate: Uncontrolled MAX; elapsed=10; For loops: None");
	free(r);
	ib_parm_free(&p);
	CU_ASSERT_PTR_NULL(p.sd);
	CU_ASSERT_PTR_NULL(p.text);
}

static void test_curve(void)
{
	struct ib_parm p;
	struct ib_run *r;
	unsigned n, i;
	static const double dflt[] = { 10, 50, 70, 80, 90, 100 };

	CU_ASSERT_EQUAL_FATAL(load("curve.parm", NULL, 0, &p), 0);
	CU_ASSERT_STRING_EQUAL(p.sd[0].lun, "iscsi://127.0.0.1:3260/iqn.2024-01.org.example:t1/0");
	CU_ASSERT_EQUAL(p.sd[0].threads, 32);
	CU_ASSERT_EQUAL(p.wd[0].rdpct, 70);
	CU_ASSERT_EQUAL(p.wd[0].xfer.size[0], 8 * KB);
	CU_ASSERT_EQUAL_FATAL(p.nrd, 2);
	CU_ASSERT_EQUAL(p.rd[0].iorate, IB_IORATE_CURVE);
	CU_ASSERT_EQUAL(p.rd[0].ncurve, 3);
	CU_ASSERT_EQUAL(p.rd[0].curve[2], 95);
	CU_ASSERT_EQUAL(p.rd[0].stopcurve, 5);
	CU_ASSERT_EQUAL(p.rd[0].warmup, 4);
	CU_ASSERT_EQUAL(p.rd[1].ncurve, 6);

	CU_ASSERT_EQUAL_FATAL(expand(&p, &r, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 11);
	CU_ASSERT_EQUAL(r[0].rate_kind, IB_RATE_MAX);
	CU_ASSERT_STRING_EQUAL(r[0].label, "RD=rd_curve; I/O rate: Uncontrolled curve; "
			       "elapsed=20 warmup=4; For loops: None");
	CU_ASSERT_EQUAL(r[1].rate_kind, IB_RATE_CURVE);
	CU_ASSERT_EQUAL(r[1].rate, 20);
	CU_ASSERT_EQUAL(r[2].rate, 60);
	CU_ASSERT_EQUAL(r[3].rate, 95);
	for (i = 1; i <= 3; i++) {
		CU_ASSERT_EQUAL(r[i].curve_base, 0);
		CU_ASSERT_EQUAL(r[i].stopcurve, 5);
		CU_ASSERT_EQUAL(r[i].interval, 2);
	}
	CU_ASSERT_STRING_EQUAL(r[1].label, "RD=rd_curve; I/O rate: curve 20%; "
			       "elapsed=20 warmup=4; For loops: None");
	CU_ASSERT_EQUAL(r[4].rd, 1);
	CU_ASSERT_EQUAL(r[4].rate_kind, IB_RATE_MAX);
	for (i = 0; i < 6; i++) {
		CU_ASSERT_EQUAL(r[5 + i].rate_kind, IB_RATE_CURVE);
		CU_ASSERT_EQUAL(r[5 + i].rate, dflt[i]);
		CU_ASSERT_EQUAL(r[5 + i].curve_base, 4);
		CU_ASSERT_EQUAL(r[5 + i].rd, 1);
	}
	free(r);
	ib_parm_free(&p);
}

static void test_curve_rate(void)
{
	/* (int) max * (int) pct / 100, then up to 10s, or 100s above 1000 */
	CU_ASSERT_EQUAL(ib_curve_rate(1234, 10), 130);
	CU_ASSERT_EQUAL(ib_curve_rate(1234, 50), 620);
	CU_ASSERT_EQUAL(ib_curve_rate(1234.9, 100), 1300);
	CU_ASSERT_EQUAL(ib_curve_rate(12345, 70), 8700);
	CU_ASSERT_EQUAL(ib_curve_rate(12345, 100), 12400);
	CU_ASSERT_EQUAL(ib_curve_rate(1000.9, 100), 1000);
	CU_ASSERT_EQUAL(ib_curve_rate(1001, 100), 1100);
	CU_ASSERT_EQUAL(ib_curve_rate(1000, 99.9), 990);
	CU_ASSERT_EQUAL(ib_curve_rate(15, 10), 10);
	CU_ASSERT_EQUAL(ib_curve_rate(5, 10), 0);      /* vdbench stops the curve */
	CU_ASSERT_EQUAL(ib_curve_rate(0.5, 50), 0);
	CU_ASSERT_EQUAL(ib_curve_rate(NAN, 50), 0);
	CU_ASSERT_EQUAL(ib_curve_rate(1e12, 50), 5e11);
}

static void test_forloops(void)
{
	struct ib_parm p;
	struct ib_run *r;
	unsigned n, i;
	static const int thr[] = { 1, 2, 4, 8 };

	CU_ASSERT_EQUAL_FATAL(load("forloops.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL_FATAL(p.nrd, 3);
	CU_ASSERT_EQUAL(p.rd[0].nthreads, 4);
	CU_ASSERT_EQUAL(p.rd[0].threads[3], 8);
	CU_ASSERT_EQUAL(p.rd[0].nfor, 3);
	CU_ASSERT_EQUAL(p.rd[0].for_order[0], IB_FOR_THREADS);
	CU_ASSERT_EQUAL(p.rd[0].for_order[2], IB_FOR_RDPCT);
	CU_ASSERT_EQUAL(p.rd[1].nfor, 2);
	CU_ASSERT_EQUAL(p.rd[1].for_order[0], IB_FOR_SEEKPCT);
	CU_ASSERT_EQUAL(p.rd[1].for_order[1], IB_FOR_XFERSIZE);
	CU_ASSERT_EQUAL(p.rd[1].nxfersize, 3);
	CU_ASSERT_EQUAL(p.rd[1].seekpct[1], -1);
	CU_ASSERT_EQUAL(p.rd[2].nxfersize, 3);
	CU_ASSERT_EQUAL(p.rd[2].xfersize[0], 64 * KB);
	CU_ASSERT_EQUAL(p.rd[2].xfersize[2], 16 * KB);

	CU_ASSERT_EQUAL_FATAL(expand(&p, &r, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 16 + 6 + 3);
	/* rd1: threads outermost, then xfersize, rdpct innermost */
	for (i = 0; i < 16; i++) {
		CU_ASSERT_EQUAL(r[i].rd, 0);
		CU_ASSERT_EQUAL(r[i].threads, thr[i / 4]);
		CU_ASSERT_EQUAL(r[i].xfersize, (i / 2) % 2 ? 64 * KB : 4 * KB);
		CU_ASSERT_EQUAL(r[i].rdpct, i % 2 ? 100 : 0);
		CU_ASSERT_EQUAL(r[i].rate_kind, IB_RATE_MAX);
	}
	CU_ASSERT_STRING_EQUAL(r[0].label, "RD=rd1; I/O rate: Uncontrolled MAX; elapsed=4; "
			       "For loops: threads=1 xfersize=4k rdpct=0");
	CU_ASSERT_STRING_EQUAL(r[15].label, "RD=rd1; I/O rate: Uncontrolled MAX; elapsed=4; "
			       "For loops: threads=8 xfersize=64k rdpct=100");
	/* rd2: seekpct outer, the re-given xfersize inner */
	CU_ASSERT_EQUAL(r[16].seekpct, 0);
	CU_ASSERT_EQUAL(r[16].xfersize, 8 * KB);
	CU_ASSERT_EQUAL(r[17].xfersize, 16 * KB);
	CU_ASSERT_EQUAL(r[18].xfersize, 32 * KB);
	CU_ASSERT_TRUE(r[19].seek_eof);
	CU_ASSERT(r[19].seekpct < 0);
	CU_ASSERT_EQUAL(r[19].xfersize, 8 * KB);
	CU_ASSERT_FALSE(r[16].seek_eof);
	CU_ASSERT_EQUAL(r[16].threads, -1);
	CU_ASSERT_STRING_EQUAL(r[21].label, "RD=rd2; I/O rate: Uncontrolled MAX; elapsed=4; "
			       "For loops: seekpct=eof xfersize=32k");
	/* rd3: halving range, threads= as a one-value loop, a fixed rate */
	CU_ASSERT_EQUAL(r[22].xfersize, 64 * KB);
	CU_ASSERT_EQUAL(r[24].xfersize, 16 * KB);
	CU_ASSERT_EQUAL(r[24].threads, 12);
	CU_ASSERT_EQUAL(r[24].rate_kind, IB_RATE_FIXED);
	CU_ASSERT_EQUAL(r[24].rate, 1000);
	CU_ASSERT_EQUAL(r[24].interval, 2);
	CU_ASSERT_STRING_EQUAL(r[22].label, "RD=rd3; I/O rate: 1000; elapsed=4; "
			       "For loops: xfersize=64k threads=12");
	free(r);
	ib_parm_free(&p);
}

static void test_xfersize(void)
{
	struct ib_parm p;

	CU_ASSERT_EQUAL_FATAL(load("xfersize.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL_FATAL(p.nwd, 4);
	CU_ASSERT_EQUAL(p.wd[0].xfer.kind, IB_XFER_FIXED);
	CU_ASSERT_EQUAL(p.wd[0].xfer.size[0], 128 * KB);
	CU_ASSERT_EQUAL(p.wd[0].seekpct, 0);
	CU_ASSERT_EQUAL(p.wd[1].xfer.kind, IB_XFER_DIST);
	CU_ASSERT_EQUAL(p.wd[1].xfer.n, 3);
	CU_ASSERT_EQUAL(p.wd[1].xfer.size[0], 4 * KB);
	CU_ASSERT_EQUAL(p.wd[1].xfer.size[2], 64 * KB);
	CU_ASSERT_EQUAL(p.wd[1].xfer.pct[0], 50);
	CU_ASSERT_EQUAL(p.wd[1].xfer.pct[2], 25);
	CU_ASSERT_EQUAL(p.wd[1].rdpct, 70);
	CU_ASSERT_EQUAL(p.wd[1].line, 4);
	CU_ASSERT_EQUAL(p.wd[2].xfer.kind, IB_XFER_RANGE);
	CU_ASSERT_EQUAL(p.wd[2].xfer.min, 4 * KB);
	CU_ASSERT_EQUAL(p.wd[2].xfer.max, 128 * KB);
	CU_ASSERT_EQUAL(p.wd[2].xfer.align, 4 * KB);
	CU_ASSERT_EQUAL(p.wd[3].xfer.kind, IB_XFER_DIST);
	CU_ASSERT_EQUAL(p.wd[3].xfer.size[0], 1536);
	CU_ASSERT_DOUBLE_EQUAL(p.wd[3].xfer.pct[1], 66.7, 1e-9);
	CU_ASSERT_EQUAL(p.rd[0].nwd, 4);
	CU_ASSERT_EQUAL(p.sd[0].size, GB);
	ib_parm_free(&p);
}

static void test_skew(void)
{
	struct ib_parm p;
	struct ib_run *r;
	unsigned n;

	CU_ASSERT_EQUAL_FATAL(load("skew.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL(p.wd[0].skew, 60);
	CU_ASSERT_EQUAL(p.wd[1].skew, 40);
	CU_ASSERT_EQUAL(p.wd[1].rdpct, 0);
	CU_ASSERT_EQUAL(p.wd[2].skew, 0);
	CU_ASSERT_EQUAL(p.wd[4].nsd, 2);
	CU_ASSERT_EQUAL(p.rd[0].nwd, 2);
	CU_ASSERT_EQUAL_FATAL(p.rd[1].nwd, 3);
	CU_ASSERT_EQUAL(p.rd[1].wd[0], 2);
	CU_ASSERT_EQUAL(p.rd[1].wd[2], 4);
	CU_ASSERT_EQUAL_FATAL(expand(&p, &r, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_EQUAL(r[0].rate_kind, IB_RATE_FIXED);
	CU_ASSERT_EQUAL(r[0].rate, 1000);
	CU_ASSERT_STRING_EQUAL(r[1].label,
			       "RD=rd2; I/O rate: Controlled MAX; elapsed=10; For loops: None");
	free(r);

	/* a hand-made parm breaking the rule is caught at expansion too */
	p.wd[2].skew = 70;
	CU_ASSERT_EQUAL(ib_runs_expand(&p, &r, &n, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "rd=rd2"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "keyword 'skew'"));
	ib_parm_free(&p);
}

static void test_wildcard(void)
{
	struct ib_parm p;

	CU_ASSERT_EQUAL_FATAL(load("wildcard.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL_FATAL(p.nsd, 5);
	CU_ASSERT_EQUAL(p.wd[0].nsd, 4);
	CU_ASSERT_EQUAL(p.wd[0].sd[3], 3);
	CU_ASSERT_EQUAL_FATAL(p.wd[1].nsd, 2);
	CU_ASSERT_EQUAL(p.wd[1].sd[0], 0);
	CU_ASSERT_EQUAL(p.wd[1].sd[1], 2);
	CU_ASSERT_EQUAL_FATAL(p.wd[2].nsd, 3);
	CU_ASSERT_EQUAL(p.wd[2].sd[0], 1);
	CU_ASSERT_EQUAL(p.wd[2].sd[2], 3);
	CU_ASSERT_EQUAL(p.wd[3].nsd, 5);
	CU_ASSERT_EQUAL(p.rd[0].nwd, 2);
	CU_ASSERT_EQUAL(p.rd[1].nwd, 4);
	ib_parm_free(&p);
}

static void test_include(void)
{
	char *vars[] = { "lun=/dev/loop7", "lun2=/tmp/two.img", "size=16m", "xfer=64k", "el=6" };
	char *vars2[] = { "lun=/dev/loop7", "size=16m", "xfer=64k", "el=6" };
	struct ib_parm p;

	CU_ASSERT_EQUAL_FATAL(load("include.parm", vars, 5, &p), 0);
	CU_ASSERT_EQUAL_FATAL(p.nsd, 2);
	CU_ASSERT_STRING_EQUAL(p.sd[0].lun, "/dev/loop7");
	CU_ASSERT_STRING_EQUAL(p.sd[1].lun, "/tmp/two.img");
	CU_ASSERT_EQUAL(p.sd[1].size, 16 * MB);
	CU_ASSERT_EQUAL(p.sd[1].line, 3);        /* the included file's line */
	CU_ASSERT_EQUAL(p.wd[0].nsd, 2);
	CU_ASSERT_EQUAL(p.wd[0].xfer.size[0], 64 * KB);
	CU_ASSERT_EQUAL(p.rd[0].elapsed, 6);
	CU_ASSERT_PTR_NOT_NULL(strstr(p.text, "sd=sd2,lun=/tmp/two.img,size=16m"));
	CU_ASSERT_PTR_NOT_NULL(strstr(p.text, "* include=inc/sds.inc"));
	ib_parm_free(&p);

	/* vdbench replaces the text "$lun" inside "$lun2" when only lun= is given */
	CU_ASSERT_EQUAL_FATAL(load("include.parm", vars2, 4, &p), 0);
	CU_ASSERT_STRING_EQUAL(p.sd[1].lun, "/dev/loop72");
	ib_parm_free(&p);

	CU_ASSERT_EQUAL(ib_parm_load("parm/include.parm", NULL, 0, &p, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "parm/inc/sds.inc:2:"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "keyword 'lun'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "$lun"));
	CU_ASSERT_PTR_NULL(p.sd);
}

static void test_defaults(void)
{
	struct ib_parm p;
	struct ib_run *r;
	unsigned n;

	CU_ASSERT_EQUAL_FATAL(load("defaults.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL_FATAL(p.nsd, 2);
	CU_ASSERT_EQUAL(p.sd[0].threads, 16);
	CU_ASSERT_EQUAL(p.sd[0].size, GB);
	CU_ASSERT_EQUAL(p.sd[1].threads, 2);
	CU_ASSERT_EQUAL(p.sd[1].size, GB);
	CU_ASSERT_EQUAL(p.sd[1].offset, 4 * KB);
	CU_ASSERT_EQUAL(p.sd[1].align, 8 * KB);
	CU_ASSERT_EQUAL(p.sd[1].range[0], 10);
	CU_ASSERT_EQUAL(p.sd[1].range[1], 90);
	CU_ASSERT_EQUAL_FATAL(p.nwd, 2);
	CU_ASSERT_EQUAL(p.wd[0].xfer.size[0], 8 * KB);
	CU_ASSERT_EQUAL(p.wd[0].rdpct, 70);
	CU_ASSERT_EQUAL(p.wd[0].nsd, 1);
	CU_ASSERT_EQUAL(p.wd[0].sd[0], 0);
	CU_ASSERT_EQUAL(p.wd[0].hitarea, 2 * MB);
	CU_ASSERT_EQUAL(p.wd[1].sd[0], 1);
	CU_ASSERT_EQUAL(p.wd[1].rdpct, 30);
	CU_ASSERT_EQUAL(p.wd[1].xfer.size[0], 8 * KB);
	CU_ASSERT_EQUAL_FATAL(p.nrd, 2);
	CU_ASSERT_EQUAL(p.rd[0].elapsed, 60);
	CU_ASSERT_EQUAL(p.rd[0].interval, 5);
	CU_ASSERT_EQUAL(p.rd[0].warmup, 10);
	CU_ASSERT_EQUAL(p.rd[0].iorate, IB_IORATE_MAX);
	CU_ASSERT_EQUAL(p.rd[1].iorate, IB_IORATE_FIXED);
	CU_ASSERT_EQUAL(p.rd[1].rate[0], 500);
	CU_ASSERT_EQUAL(p.rd[1].distribution, IB_DIST_UNIFORM);
	CU_ASSERT_EQUAL(p.rd[0].distribution, IB_DIST_EXPONENTIAL);
	CU_ASSERT_EQUAL_FATAL(expand(&p, &r, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 2);
	CU_ASSERT_STRING_EQUAL(r[0].label, "RD=rd1; I/O rate: Uncontrolled MAX; "
			       "elapsed=60 warmup=10; For loops: None");
	CU_ASSERT_EQUAL(r[1].rate, 500);
	CU_ASSERT_EQUAL(r[1].distribution, IB_DIST_UNIFORM);
	CU_ASSERT_EQUAL(r[1].warmup, 10);
	free(r);
	ib_parm_free(&p);
}

static void test_prefixes(void)
{
	struct ib_parm p;

	CU_ASSERT_EQUAL_FATAL(load("prefixes.parm", NULL, 0, &p), 0);
	CU_ASSERT_STRING_EQUAL(p.sd[0].lun, "/tmp/p.img");
	CU_ASSERT_EQUAL(p.sd[0].threads, 6);
	CU_ASSERT_EQUAL(p.sd[0].size, 32 * MB);
	CU_ASSERT_EQUAL(p.wd[0].xfer.size[0], 16 * KB);
	CU_ASSERT_EQUAL(p.wd[0].rdpct, 25);
	CU_ASSERT_EQUAL(p.wd[0].seekpct, 0);
	CU_ASSERT_EQUAL(p.wd[0].skew, 100);
	CU_ASSERT_EQUAL(p.wd[1].rdpct, 60);     /* wr= is writepct */
	CU_ASSERT_EQUAL(p.wd[1].range[1], 50);
	CU_ASSERT_EQUAL(p.rd[0].elapsed, 60);   /* el=1m: minutes for time keywords */
	CU_ASSERT_EQUAL(p.rd[0].interval, 30);
	CU_ASSERT_EQUAL(p.rd[0].distribution, IB_DIST_DETERMINISTIC);
	ib_parm_free(&p);
}

static void test_comments(void)
{
	struct ib_parm p;

	CU_ASSERT_EQUAL_FATAL(load("comments.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL(p.nsd, 1);
	CU_ASSERT_STRING_EQUAL(p.sd[0].lun, "/tmp/c.img");
	CU_ASSERT_EQUAL_FATAL(p.nwd, 2);
	CU_ASSERT_EQUAL(p.wd[0].xfer.size[0], 4 * KB);
	CU_ASSERT_EQUAL(p.wd[1].xfer.size[0], 8 * KB);
	CU_ASSERT_EQUAL(p.wd[1].line, 9);
	CU_ASSERT_EQUAL(p.nrd, 1);              /* nothing after eof */
	CU_ASSERT_PTR_NULL(strstr(p.text, "never"));
	ib_parm_free(&p);
}

static void test_hitarea(void)
{
	struct ib_parm p;

	CU_ASSERT_EQUAL_FATAL(load("hitarea.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL(p.wd[0].hitarea, 2 * MB);
	CU_ASSERT_EQUAL(p.wd[0].rhpct, 50);
	CU_ASSERT_EQUAL(p.wd[0].whpct, 10);
	CU_ASSERT_EQUAL(p.wd[1].hitarea, 512 * KB);
	CU_ASSERT_EQUAL(p.wd[1].rhpct, 20);
	CU_ASSERT_EQUAL(p.wd[2].hitarea, MB);
	ib_parm_free(&p);
}

static void test_iorate_list(void)
{
	struct ib_parm p;
	struct ib_run *r;
	unsigned n;

	CU_ASSERT_EQUAL_FATAL(load("iorate-list.parm", NULL, 0, &p), 0);
	CU_ASSERT_EQUAL(p.rd[0].iorate, IB_IORATE_FIXED);
	CU_ASSERT_EQUAL(p.rd[0].nrate, 3);
	CU_ASSERT_EQUAL(p.rd[2].nforiorate, 3);
	CU_ASSERT_EQUAL(p.rd[2].foriorate[2], 300);
	CU_ASSERT_EQUAL_FATAL(expand(&p, &r, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 3 + 4 + 3);
	CU_ASSERT_EQUAL(r[0].rate, 100);
	CU_ASSERT_EQUAL(r[1].rate, 200);
	CU_ASSERT_EQUAL(r[2].rate, 500);
	CU_ASSERT_EQUAL(r[2].rate_kind, IB_RATE_FIXED);
	CU_ASSERT_STRING_EQUAL(r[0].label, "RD=rd1; I/O rate: 100; elapsed=2; For loops: iorate=100");
	/* the rate list turns inside forthreads */
	CU_ASSERT_EQUAL(r[3].threads, 1);
	CU_ASSERT_EQUAL(r[3].rate, 1024);
	CU_ASSERT_EQUAL(r[4].threads, 1);
	CU_ASSERT_EQUAL(r[4].rate, 2048);
	CU_ASSERT_EQUAL(r[5].threads, 4);
	CU_ASSERT_EQUAL(r[5].rate, 1024);
	CU_ASSERT_STRING_EQUAL(r[6].label, "RD=rd2; I/O rate: 2048; elapsed=2; "
			       "For loops: threads=4 iorate=2048");
	/* foriorate= overrides iorate=max */
	CU_ASSERT_EQUAL(r[7].rate_kind, IB_RATE_FIXED);
	CU_ASSERT_EQUAL(r[7].rate, 100);
	CU_ASSERT_EQUAL(r[9].rate, 300);
	free(r);
	ib_parm_free(&p);
}

static void test_seek(void)
{
	struct ib_parm p;
	struct ib_run *r;
	unsigned n;

	CU_ASSERT_EQUAL_FATAL(load("seek.parm", NULL, 0, &p), 0);
	CU_ASSERT_TRUE(p.wd[0].seek_eof);
	CU_ASSERT_EQUAL(p.wd[0].xfer.size[0], MB);
	CU_ASSERT_FALSE(p.wd[1].seek_eof);
	CU_ASSERT_EQUAL(p.wd[1].seekpct, 0);
	CU_ASSERT_EQUAL(p.wd[2].seekpct, 100);
	CU_ASSERT_EQUAL(p.wd[3].seekpct, 30);
	CU_ASSERT_EQUAL_FATAL(expand(&p, &r, &n), 0);
	CU_ASSERT_EQUAL_FATAL(n, 4);
	CU_ASSERT_EQUAL(r[1].seekpct, 0);
	CU_ASSERT_EQUAL(r[2].seekpct, 50);
	CU_ASSERT_TRUE(r[3].seek_eof);
	CU_ASSERT_FALSE(r[2].seek_eof);
	free(r);
	ib_parm_free(&p);
}

static void test_validate(void)
{
	struct ib_parm p;

	CU_ASSERT_EQUAL_FATAL(load("validate.parm", NULL, 0, &p), 0);
	CU_ASSERT_TRUE(p.validate);
	CU_ASSERT_EQUAL(p.wd[0].xfer.kind, IB_XFER_RANGE);
	CU_ASSERT_EQUAL(p.wd[0].xfer.max, 8 * KB);
	CU_ASSERT_EQUAL(p.wd[0].rdpct, 50);
	ib_parm_free(&p);
}

static const struct bad {
	const char *file;
	int line;
	const char *kw;
	const char *why;        /* also in the message */
} bad[] = {
	{ "bad-unknown.parm", 3, "bogus", "unknown keyword" },
	{ "bad-ambiguous.parm", 4, "fo", "ambiguous" },
	{ "bad-unsupported.parm", 2, "openflags", "not supported by iserbench" },
	{ "bad-xfer-sum.parm", 3, "xfersize", "90" },
	{ "bad-xfer-512.parm", 3, "xfersize", "512" },
	{ "bad-xfer-range.parm", 3, "xfersize", "min" },
	{ "bad-rdpct.parm", 3, "rdpct", "150" },
	{ "bad-threads.parm", 2, "threads", "out of range" },
	{ "bad-threads-big.parm", 4, "forthreads", "2000" },
	{ "bad-elapsed.parm", 4, "elapsed", "above 0" },
	{ "bad-interval.parm", 3, "interval", "above 0" },
	{ "bad-elapsed-multiple.parm", 4, "elapsed", "multiple" },
	{ "bad-list-long.parm", 4, "forthreads", "longer than 64" },
	{ "bad-var.parm", 2, "lun", "$nolun" },
	{ "bad-skew.parm", 5, "skew", "110" },
	{ "bad-paren.parm", 3, "xfersize", "missing ')'" },
	{ "bad-include.parm", 2, "include", "no-such-file.inc" },
	{ "bad-include-self.parm", 2, "include", "nested more than 8 deep" },
	{ "bad-sd-missing.parm", 3, "sd", "nosuch*" },
	{ "bad-range-nostep.parm", 4, "forthreads", "step" },
	{ "bad-dup.parm", 3, "sd", "twice" },
	{ "bad-norate.parm", 4, "iorate", "no iorate" },
	{ "bad-nolun.parm", 2, "lun", "no lun" },
	{ "bad-seekpct.parm", 2, "seekpct", "sideways" },
	{ "bad-short-kw.parm", 2, "x", "2 characters" },
};

static void test_bad(void)
{
	unsigned i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct ib_parm p;
		char path[128], where[160], kw[80];
		int rc;

		snprintf(path, sizeof(path), "parm/%s", bad[i].file);
		snprintf(where, sizeof(where), "%s:%d: ", path, bad[i].line);
		snprintf(kw, sizeof(kw), "keyword '%s'", bad[i].kw);
		err[0] = '\0';
		rc = ib_parm_load(path, NULL, 0, &p, err, sizeof(err));
		CU_ASSERT_EQUAL(rc, -1);
		if (rc == 0) {
			fprintf(stderr, "\n%s: loaded\n", bad[i].file);
			ib_parm_free(&p);
			continue;
		}
		CU_ASSERT_PTR_NULL(p.sd);
		CU_ASSERT_PTR_NULL(p.text);
		if (!strstr(err, where) || !strstr(err, kw) || !strstr(err, bad[i].why)) {
			fprintf(stderr, "\n%s: got \"%s\", want %s / %s / %s\n", bad[i].file, err,
				where, kw, bad[i].why);
			CU_FAIL("error message");
		}
	}
}

/* Missing files, a tiny error buffer, and an empty file. */
static void test_edges(void)
{
	struct ib_parm p;
	char small[8];
	char tmpl[] = "/tmp/ib-parm-empty-XXXXXX";
	int fd;

	CU_ASSERT_EQUAL(ib_parm_load("parm/no-such.parm", NULL, 0, &p, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "parm/no-such.parm"));
	CU_ASSERT_EQUAL(ib_parm_load("parm/bad-unknown.parm", NULL, 0, &p, small, sizeof(small)), -1);
	CU_ASSERT_EQUAL(strlen(small), sizeof(small) - 1);
	CU_ASSERT_EQUAL(ib_parm_load("parm/bad-unknown.parm", NULL, 0, &p, NULL, 0), -1);
	CU_ASSERT_EQUAL(ib_parm_load("parm", NULL, 0, &p, err, sizeof(err)), -1);
	fd = mkstemp(tmpl);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	CU_ASSERT_EQUAL(ib_parm_load(tmpl, NULL, 0, &p, err, sizeof(err)), -1);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "no rd="));
	unlink(tmpl);
}

static const char *const good[] = {
	"simple-max.parm", "curve.parm", "forloops.parm", "xfersize.parm", "skew.parm",
	"wildcard.parm", "include.parm", "defaults.parm", "prefixes.parm", "comments.parm",
	"hitarea.parm", "iorate-list.parm", "seek.parm", "validate.parm", "inc/sds.inc",
};

static char *slurp(const char *file, size_t *len)
{
	char path[128];
	FILE *f;
	char *b;

	snprintf(path, sizeof(path), "parm/%s", file);
	f = fopen(path, "rb");
	if (!f)
		return NULL;
	b = malloc(65536);
	*len = b ? fread(b, 1, 65536, f) : 0;
	fclose(f);
	return b;
}

static void try_bytes(const char *path, const char *b, size_t n)
{
	char *vars[] = { "lun=/x", "lun2=/y", "size=1m", "xfer=4k", "el=2" };
	struct ib_parm p;
	struct ib_run *r;
	unsigned nr, i;
	FILE *f = fopen(path, "wb");

	if (!f)
		return;
	fwrite(b, 1, n, f);
	fclose(f);
	if (ib_parm_load(path, vars, 5, &p, err, sizeof(err)) == 0) {
		if (ib_runs_expand(&p, &r, &nr, err, sizeof(err)) == 0) {
			for (i = 0; i < nr; i++)
				CU_ASSERT(r[i].rd < p.nrd);
			free(r);
		}
		ib_parm_free(&p);
	} else {
		CU_ASSERT(err[0] != '\0');
	}
}

/* Truncated and garbled copies of the good files: errors, never crashes. */
static void test_fuzz(void)
{
	static const char junk[] = "(),=\"$-*#/ \n\tdk0123456789{}";
	char tmpl[] = "/tmp/ib-parm-fuzz-XXXXXX";
	unsigned i, k;
	int fd = mkstemp(tmpl);

	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	srand(6);
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		size_t n = 0, cut;
		char *b = slurp(good[i], &n), *g;

		CU_ASSERT_PTR_NOT_NULL_FATAL(b);
		for (cut = 0; cut < n; cut++)
			try_bytes(tmpl, b, cut);
		g = malloc(n + 1);
		for (k = 0; k < 300; k++) {
			unsigned m, flips = 1 + (unsigned)rand() % 4;

			memcpy(g, b, n);
			for (m = 0; m < flips && n; m++) {
				size_t at = (size_t)rand() % n;

				g[at] = rand() % 4 ? junk[rand() % (int)(sizeof(junk) - 1)]
						   : (char)(rand() % 256);
			}
			try_bytes(tmpl, g, n);
		}
		free(g);
		free(b);
	}
	unlink(tmpl);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("parmfile", NULL, NULL);
	CU_add_test(s, "simple max run", test_simple);
	CU_add_test(s, "curve", test_curve);
	CU_add_test(s, "curve rate rounding", test_curve_rate);
	CU_add_test(s, "for-loops", test_forloops);
	CU_add_test(s, "xfersize forms", test_xfersize);
	CU_add_test(s, "skew", test_skew);
	CU_add_test(s, "wildcards", test_wildcard);
	CU_add_test(s, "include and $var", test_include);
	CU_add_test(s, "defaults", test_defaults);
	CU_add_test(s, "keyword prefixes", test_prefixes);
	CU_add_test(s, "comments and eof", test_comments);
	CU_add_test(s, "hit areas", test_hitarea);
	CU_add_test(s, "iorate lists", test_iorate_list);
	CU_add_test(s, "seekpct", test_seek);
	CU_add_test(s, "validate", test_validate);
	CU_add_test(s, "bad files", test_bad);
	CU_add_test(s, "edges", test_edges);
	CU_add_test(s, "fuzz", test_fuzz);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
