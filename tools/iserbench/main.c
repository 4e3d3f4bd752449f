/*
 * iserbench: the command line, as vdbench's so habits and scripts carry over:
 *   iserbench -f PARMFILE [-o OUTDIR] [-v] [--target-stats SOCKET] [var=value ...]
 * Exit codes: 0 ok, 1 usage or parameter error, 2 data validation error,
 * 3 I/O error or an SD cannot be opened, 130 interrupted (Ctrl-C).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ib.h"
#include "lun.h"
#include "version.h"

static volatile int stop;

static void on_sigint(int sig)
{
	(void)sig;
	/* A second Ctrl-C kills at once, for a target that hangs the drain. */
	if (stop)
		_exit(130);
	stop = 1;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: iserbench -f PARMFILE [-o OUTDIR] [-v] [-i INITIATOR-IQN] [--target-stats SOCKET]\n"
		"                 [var=value ...]\n"
		"  -f PARMFILE  vdbench parameter file (sd=, wd=, rd=)\n"
		"  -o OUTDIR    output folder (default ./output): summary.txt, flatfile.txt,\n"
		"               results.json, report.html, parmfile.txt\n"
		"  -v           data validation: writes carry a self-describing pattern and\n"
		"               every read of a unit written in this session is checked\n"
		"  -i IQN       initiator name for iscsi:// and iser:// LUNs (as iscsi-perf -i)\n"
		"  --target-stats SOCKET  isertd's admin socket: sample the target's statistics\n"
		"               each interval and report its read/write latency (avg, p99)\n"
		"               beside iserbench's own\n"
		"  var=value    replaces $var in the parameter file\n"
		"  -h           this help\n"
		"  --version    print iserbench's version and the initiator library's, and exit\n"
		"SD lun= takes iscsi://host[:port]/target-iqn/LUN, iser://..., a file or a block device.\n"
		"Exit codes: 0 ok, 1 usage or parameter error, 2 data validation error,\n"
		"3 I/O error or an SD cannot be opened, 130 interrupted.\n");
}

static double run_seconds(const struct ib_run *r)
{
	double t = r->elapsed > 0 ? r->elapsed : 30;
	return r->warmup >= t ? t + r->warmup : t;
}

/* vars: room for argc pointers, owned by main() so every return frees it. */
static int run(int argc, char **argv, char **vars)
{
	const char *parm = NULL, *outdir = "output", *target_stats = NULL;
	bool validate = false;
	unsigned nvars = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(a, "--version")) {
			puts("iserbench " ISERT_VERSION " (libisert-initiator " ISC_LIB_VERSION ")");
			return 0;
		} else if (!strcmp(a, "-v")) {
			validate = true;
		} else if (!strcmp(a, "--target-stats") || !strncmp(a, "--target-stats=", 15)) {
			if (!a[14] && i + 1 >= argc) {
				fprintf(stderr, "iserbench: %s needs isertd's admin socket\n", a);
				usage(stderr);
				return 1;
			}
			target_stats = a[14] ? a + 15 : argv[++i];
		} else if (!strcmp(a, "-f") || !strcmp(a, "-o") || !strcmp(a, "-i")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "iserbench: %s needs a value\n", a);
				usage(stderr);
				return 1;
			}
			if (a[1] == 'f')
				parm = argv[++i];
			else if (a[1] == 'i')
				ib_lun_set_initiator(argv[++i]);
			else
				outdir = argv[++i];
		} else if (a[0] != '-' && strchr(a, '=') && a[0] != '=') {
			vars[nvars++] = argv[i];
		} else {
			fprintf(stderr, "iserbench: unknown argument '%s'\n", a);
			usage(stderr);
			return 1;
		}
	}
	if (!parm) {
		fprintf(stderr, "iserbench: no parameter file (-f PARMFILE)\n");
		usage(stderr);
		return 1;
	}

	char err[2048];
	struct ib_parm p;
	memset(&p, 0, sizeof(p));
	if (ib_parm_load(parm, vars, nvars, &p, err, sizeof(err))) {
		fprintf(stderr, "iserbench: %s\n", err);
		return 1;
	}
	struct ib_run *runs = NULL;
	unsigned nruns = 0;
	if (ib_runs_expand(&p, &runs, &nruns, err, sizeof(err))) {
		fprintf(stderr, "iserbench: %s\n", err);
		ib_parm_free(&p);
		return 1;
	}
	double secs = 0;
	for (unsigned i = 0; i < nruns; i++)
		secs += run_seconds(&runs[i]);
	long s = (long)(secs + 0.5);
	printf("iserbench: %u run%s, about %ld:%02ld:%02ld%s\n", nruns, nruns == 1 ? "" : "s", s / 3600, s / 60 % 60,
	       s % 60, validate || p.validate ? ", data validation on" : "");
	fflush(stdout);

	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: the engine's ppoll() must return to see the flag. */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	struct ib_opts o = { .validate = validate, .stop = &stop, .target_stats = target_stats };
	ib_report_target(target_stats != NULL);
	struct ib_result *res = NULL;
	unsigned nres = 0;
	int rc = ib_engine_run(&p, runs, nruns, &o, &res, &nres, err, sizeof(err));
	int code = 0;
	uint64_t verr = 0;
	for (unsigned i = 0; i < nres; i++)
		verr += res[i].validation_errors;
	if (rc) {
		fprintf(stderr, "iserbench: %s\n", err);
		code = verr ? 2 : rc == -2 ? 1 : 3;
	} else if (stop) {
		code = 130;
	}
	if (nres) {
		char rerr[1024];
		if (ib_report_write(outdir, &p, res, nres, rerr, sizeof(rerr))) {
			fprintf(stderr, "iserbench: report: %s\n", rerr);
			if (!code)
				code = 3;
		} else {
			printf("report: %s/report.html\n", outdir);
		}
	}
	if (stop)
		printf("iserbench: interrupted\n");
	for (unsigned i = 0; i < nres; i++)
		free(res[i].iv);
	free(res);
	free(runs);
	ib_parm_free(&p);
	return code;
}

int main(int argc, char **argv)
{
	char **vars = calloc((size_t)argc, sizeof(*vars));
	if (!vars)
		return 1;
	int code = run(argc, argv, vars);
	free(vars);
	return code;
}
