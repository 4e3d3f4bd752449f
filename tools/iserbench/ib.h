/*
 * iserbench: a vdbench-style load generator.  Shared types of its three
 * parts, each in its own file:
 *   parmfile.c  vdbench parameter files -> struct ib_parm, runs expanded
 *   report.c    interval lines, histograms, the output folder (summary,
 *               flat file, JSON, HTML with SVG plots)
 *   engine.c    drives the runs against the storage definitions (lun.c:
 *               iscsi:// and iser:// through the initiator library, files
 *               and block devices through io_uring; validate.c: -v)
 *   target.c    --target-stats: isertd's own view of the run (its `stats`)
 *   main.c      the command line: iserbench -f PARMFILE [-o OUTDIR] [-v]
 *               [var=value ...]
 * Prefix ib_.  Sizes are bytes, times seconds unless a name says _us/_ms.
 */
#ifndef ISERBENCH_IB_H
#define ISERBENCH_IB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "adminrpc.h"

#define IB_NAME 64
#define IB_LIST 64            /* longest list or distribution a keyword takes */

/* ---------------- parameter file ---------------- */

enum ib_xfer_kind { IB_XFER_FIXED, IB_XFER_DIST, IB_XFER_RANGE };
struct ib_xfersize {
	enum ib_xfer_kind kind;
	unsigned n;                 /* FIXED: 1; DIST: pairs */
	uint64_t size[IB_LIST];
	double pct[IB_LIST];        /* DIST: sums to 100 */
	uint64_t min, max, align;   /* RANGE: (min,max,align) */
};

struct ib_sd {                      /* sd= */
	char name[IB_NAME];
	char lun[1024];             /* iscsi:// or iser:// URL, file or block device */
	uint64_t size;              /* 0: the whole LUN */
	unsigned threads;           /* max outstanding I/Os; default 8 */
	uint64_t offset;            /* bytes skipped at the start; default 0 */
	uint64_t align;             /* 0: align on the transfer size */
	double range[2];            /* percent of the SD; default 0,100 */
	int line;                   /* where it was defined, for messages */
};

struct ib_wd {                      /* wd= */
	char name[IB_NAME];
	unsigned nsd;
	unsigned sd[IB_LIST];       /* indices into ib_parm.sd, wildcards resolved */
	double rdpct;               /* default 100 */
	double seekpct;             /* percent random: 0 sequential, 100 (default) random */
	bool seek_eof;              /* seekpct=eof: sequential, ends the run at end of SD */
	struct ib_xfersize xfer;    /* default 4k */
	double skew;                /* percent of the run's I/O; 0: share the rest */
	double iorate;              /* this WD's own rate; 0: none */
	double range[2];            /* percent of the SD; default 0,100 */
	double rhpct, whpct;        /* read/write hit percentages; default 0 */
	uint64_t hitarea;           /* default 1m */
	int line;
};

enum ib_iorate { IB_IORATE_MAX, IB_IORATE_CURVE, IB_IORATE_FIXED };
/* The for-loops of an rd=, for the order they nest in. */
enum ib_for { IB_FOR_THREADS, IB_FOR_XFERSIZE, IB_FOR_RDPCT, IB_FOR_SEEKPCT,
	      IB_FOR_IORATE, IB_FOR_N };
enum ib_dist { IB_DIST_EXPONENTIAL, IB_DIST_UNIFORM, IB_DIST_DETERMINISTIC };

struct ib_rd {                      /* rd= */
	char name[IB_NAME];
	unsigned nwd;
	unsigned wd[IB_LIST];       /* indices into ib_parm.wd */
	enum ib_iorate iorate;
	unsigned nrate;
	double rate[IB_LIST];       /* FIXED: the list given (a run each) */
	unsigned ncurve;
	double curve[IB_LIST];      /* percents; default 10,50,70,80,90,100 */
	double stopcurve;           /* ms; 0: none */
	double elapsed;             /* default 30 */
	double interval;            /* default 1 */
	double warmup;              /* default 0 */
	enum ib_dist distribution;  /* default exponential */
	/* for-loops; n == 0: not given.  threads= is a one-value forthreads. */
	unsigned nthreads;     unsigned threads[IB_LIST];
	unsigned nxfersize;    uint64_t xfersize[IB_LIST];
	unsigned nrdpct;       double rdpct[IB_LIST];
	unsigned nseekpct;     double seekpct[IB_LIST];   /* -1: eof */
	unsigned nforiorate;   double foriorate[IB_LIST];
	/* The loops given, in parameter order: vdbench nests them so, the
	 * first given outermost.  An iorate= list is a loop inside them all. */
	unsigned nfor;         enum ib_for for_order[IB_FOR_N];
	int line;
};

struct ib_parm {
	struct ib_sd *sd;  unsigned nsd;
	struct ib_wd *wd;  unsigned nwd;
	struct ib_rd *rd;  unsigned nrd;
	bool validate;              /* data_errors= / validate=yes in the file, or -v */
	char *text;                 /* the file after include= and $var, for the report */
};

/*
 * Parse a parameter file.  vars: "name=value" strings from the command
 * line for $name.  On error returns -1 with "FILE:LINE: keyword 'x': why"
 * in err.
 */
int ib_parm_load(const char *path, char *const *vars, unsigned nvars,
		 struct ib_parm *p, char *err, size_t errlen);
void ib_parm_free(struct ib_parm *p);

/* One run: an rd= with one value of each for-loop chosen. */
enum ib_rate_kind { IB_RATE_MAX, IB_RATE_FIXED, IB_RATE_CURVE };
struct ib_run {
	unsigned rd;                /* index into ib_parm.rd */
	char label[256];            /* vdbench-like: "rd=r1,iorate=max,elapsed=30,interval=1 For loops: threads=8 xfersize=4k" */
	enum ib_rate_kind rate_kind;
	double rate;                /* FIXED: I/Os per second; CURVE: percent of the max run */
	int curve_base;             /* CURVE: index of the max run it is a percentage of */
	int threads;                /* -1: each SD's threads= */
	uint64_t xfersize;          /* 0: the WDs' xfersize= */
	double rdpct;               /* < 0: the WDs' rdpct= */
	double seekpct;             /* < 0 and not eof: the WDs' seekpct= */
	bool seek_eof;
	double elapsed, interval, warmup;
	enum ib_dist distribution;
	double stopcurve;           /* ms */
};
/* Every run of every rd=, in order; *runs is malloc'd. */
int ib_runs_expand(const struct ib_parm *p, struct ib_run **runs, unsigned *nruns,
		   char *err, size_t errlen);
/* The I/O rate of a curve point, rounded as vdbench rounds it. */
double ib_curve_rate(double max_rate, double pct);

/* ---------------- statistics ---------------- */

/* vdbench's default response-time buckets: <20us ... 2s, then >2s. */
#define IB_HIST_BUCKETS 27
extern const uint32_t ib_hist_bounds_us[IB_HIST_BUCKETS - 1];
struct ib_hist {
	uint64_t count[IB_HIST_BUCKETS];
};
void ib_hist_add(struct ib_hist *h, uint32_t resp_us);

struct ib_stats {                   /* one interval, or a sum of them */
	double start;               /* wall clock (unix seconds) at the start */
	double seconds;             /* how long */
	uint64_t reads, writes;
	uint64_t rbytes, wbytes;
	double rresp_us, wresp_us;  /* sums of response times */
	double resp_sq_us;          /* sum of squares, for the stddev */
	double resp_max_us;
	/* Fixed rates: time from an arrival to its start (waiting for a free
	 * thread, or for the loop's next batch), summed over counted I/Os. */
	double wait_us, wait_max_us;
	double cpu_total, cpu_sys;  /* host CPU busy percent (all CPUs) */
	uint64_t errors;            /* I/O errors and validation errors */
	struct ib_hist hist;
	/* --target-stats: the target's latency of the same interval (its reads
	 * and writes of this initiator, summed over LUNs); tgt false: none. */
	bool tgt;
	struct lat_hist tgt_r, tgt_w;
};
void ib_stats_add(struct ib_stats *into, const struct ib_stats *s);

struct ib_result {                  /* one run's outcome */
	const struct ib_run *run;
	double target_rate;         /* 0: max */
	struct ib_stats *iv;        /* every interval, warmup included */
	unsigned niv;
	unsigned avg_first, avg_last; /* 1-based intervals averaged: avg_2-N skips
					 the first and the warmup */
	struct ib_stats avg;
	bool interrupted;           /* Ctrl-C ended it */
	uint64_t validation_errors;
	/* Every read and write that completed without error, those drained
	 * after the last interval included; with --target-stats (tgt), what the
	 * target counted from before the first I/O to after the drain. */
	uint64_t reads_done, writes_done;
	bool tgt;
	uint64_t tgt_reads, tgt_writes;
};

/* ---------------- report ---------------- */

/* Add the target-side columns (--target-stats) to what follows. */
void ib_report_target(bool on);
/* The two heading lines of vdbench's interval report. */
void ib_report_header(FILE *f);
/* One interval line; label is the interval number or "avg_2-N". */
void ib_report_line(FILE *f, const char *label, const struct ib_stats *s);
void ib_report_histogram(FILE *f, const struct ib_hist *h);
/* With --target-stats: the target's read and write counts of the run beside iserbench's. */
void ib_report_run_counts(FILE *f, const struct ib_result *r);
/*
 * The output folder: summary.txt (what the terminal showed, per run, with
 * histograms), flatfile.txt (a row per interval with a header), results.json
 * (everything), report.html (self-contained, SVG plots: IOPS and response
 * time over time, the curve as response time vs IOPS, histograms),
 * parmfile.txt.
 */
int ib_report_write(const char *outdir, const struct ib_parm *p,
		    const struct ib_result *r, unsigned n, char *err, size_t errlen);

/* ---------------- engine ---------------- */

struct ib_opts {
	bool validate;
	volatile int *stop;         /* set by SIGINT: end the current run, skip the rest */
	const char *target_stats;   /* isertd's admin socket, or NULL */
};
/* Run everything; fills *res (malloc'd, one per run that ran: curve runs
 * skipped by stopcurve= and runs after Ctrl-C are left out).  Returns 0, -1
 * with err set (cannot open an SD, I/O or validation errors: *res still
 * holds the runs done), or -2 for a parameter the LUN cannot honour
 * (xfersize not a multiple of its block size, a range smaller than xfersize). */
int ib_engine_run(const struct ib_parm *p, const struct ib_run *runs, unsigned nruns,
		  const struct ib_opts *o, struct ib_result **res, unsigned *nres,
		  char *err, size_t errlen);

/* ---------------- target statistics (--target-stats) ---------------- */

/* The target's counters of our initiator at one moment, summed over LUNs. */
struct ib_tgt_snap {
	bool ok;
	uint64_t reads, writes;
	struct lat_hist r, w;
};
/* Ask isertd at sock; 0, or -1 with err set (and s->ok false). */
int ib_tgt_sample(const char *sock, struct ib_tgt_snap *s, char *err, size_t errlen);
/* The interval between two good samples into st (st->tgt set), else nothing. */
void ib_tgt_interval(struct ib_stats *st, const struct ib_tgt_snap *now, const struct ib_tgt_snap *before);

#endif
