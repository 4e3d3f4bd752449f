/*
 * isc-bench: the same read workload through the isert initiator library or
 * through libiscsi, from one poll() loop, reporting IOPS, MiB/s and the
 * initiator's CPU time per I/O (getrusage), so the two can be compared.
 *
 * usage: isc-bench --lib isc|libiscsi [--bs BYTES] [--qd N] [--seconds S] [--random] URL
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "isert/initiator.h"

static uint32_t bs = 4096, qd = 32, block_size = 512;
static int seconds = 10;
static bool rnd;
static uint64_t nblocks, next_lba, ios, errors;
static bool stopping;
static unsigned inflight;
static uint64_t rng = 88172645463325252ull;

static uint64_t xorshift(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static uint64_t pick_lba(void)
{
	uint64_t per = bs / block_size, slots = nblocks / per;
	if (rnd)
		return (xorshift() % slots) * per;
	uint64_t l = next_lba;
	next_lba += per;
	if (next_lba + per > nblocks)
		next_lba = 0;
	return l;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec / 1e6;
}

/* ---- isc ---- */

struct slot { uint8_t *buf; };
static struct isc_session *is;
static uint64_t lun;

static void isc_issue(struct slot *sl);

static void isc_done(struct isc_session *s, const struct isc_result *r, void *arg)
{
	(void)s;
	inflight--;
	if (r->err)
		errors++;
	ios++;
	if (!stopping)
		isc_issue(arg);
}

static void isc_issue(struct slot *sl)
{
	struct isc_cmd c;
	isc_cmd_read16(&c, lun, pick_lba(), bs / block_size, block_size, sl->buf);
	if (isc_submit(is, &c, isc_done, sl))
		inflight++;
	else
		errors++;
}

static int run_isc(const char *url_s)
{
	struct isc_url u;
	char err[300];
	if (isc_url_parse(url_s, false, &u, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct isc_options o;
	isc_options_default(&o);
	o.nop_interval_s = 0;
	is = isc_session_new(&o);
	if (!is || isc_connect_url_sync(is, &u)) {
		fprintf(stderr, "isc: %s\n", is ? isc_errmsg(is) : "no memory");
		isc_session_free(is);
		return 1;
	}
	lun = u.lun;
	struct isc_result r;
	isc_tur_sync(is, lun, &r);
	struct isc_capacity cap;
	if (isc_readcap16_sync(is, lun, &cap, &r)) {
		fprintf(stderr, "isc: %s\n", isc_errmsg(is));
		isc_session_free(is);
		return 1;
	}
	nblocks = cap.blocks;
	block_size = cap.block_size;
	struct slot *slots = calloc(qd, sizeof(*slots));
	for (uint32_t i = 0; i < qd; i++)
		slots[i].buf = malloc(bs);
	double t0 = now_s(), c0 = cpu_s();
	for (uint32_t i = 0; i < qd; i++)
		isc_issue(&slots[i]);
	while (inflight) {
		struct pollfd p = { .fd = isc_get_fd(is), .events = (short)isc_which_events(is) };
		if (poll(&p, 1, 1000) < 0)
			break;
		isc_service(is, p.revents);
		if (!stopping && now_s() - t0 >= seconds)
			stopping = true;
	}
	double el = now_s() - t0, cpu = cpu_s() - c0;
	printf("isc       %10.0f IOPS %9.1f MiB/s  cpu %.2f s  %.2f us/IO  %.0f IOPS per CPU-second  errors %" PRIu64 "\n",
	       ios / el, ios * (double)bs / el / 1048576, cpu, cpu * 1e6 / (double)ios, ios / cpu, errors);
	isc_logout_sync(is);
	isc_session_free(is);
	for (uint32_t i = 0; i < qd; i++)
		free(slots[i].buf);
	free(slots);
	return 0;
}

/* ---- libiscsi ---- */

static struct iscsi_context *ic;
static int ilun;

static void lib_issue(void);

static void lib_done(struct iscsi_context *c, int status, void *data, void *priv)
{
	(void)c;
	(void)priv;
	inflight--;
	if (status != SCSI_STATUS_GOOD)
		errors++;
	ios++;
	if (data)
		scsi_free_scsi_task(data);
	if (!stopping)
		lib_issue();
}

static void lib_issue(void)
{
	if (iscsi_read16_task(ic, ilun, pick_lba(), bs, (int)block_size, 0, 0, 0, 0, 0, lib_done, NULL))
		inflight++;
	else
		errors++;
}

static int run_libiscsi(const char *url_s)
{
	ic = iscsi_create_context("iqn.2026-11.org.isert:bench");
	struct iscsi_url *u = ic ? iscsi_parse_full_url(ic, url_s) : NULL;
	if (!u) {
		fprintf(stderr, "libiscsi: bad URL\n");
		return 1;
	}
	iscsi_set_targetname(ic, u->target);
	iscsi_set_session_type(ic, ISCSI_SESSION_NORMAL);
	iscsi_set_header_digest(ic, ISCSI_HEADER_DIGEST_NONE);
	ilun = u->lun;
	if (iscsi_full_connect_sync(ic, u->portal, u->lun)) {
		fprintf(stderr, "libiscsi: %s\n", iscsi_get_error(ic));
		return 1;
	}
	iscsi_destroy_url(u);
	struct scsi_task *t = iscsi_testunitready_sync(ic, ilun);
	if (t)
		scsi_free_scsi_task(t);
	t = iscsi_readcapacity16_sync(ic, ilun);
	struct scsi_readcapacity16 *rc16 = t ? scsi_datain_unmarshall(t) : NULL;
	if (!rc16) {
		fprintf(stderr, "libiscsi: READ CAPACITY failed\n");
		return 1;
	}
	nblocks = rc16->returned_lba + 1;
	block_size = rc16->block_length;
	scsi_free_scsi_task(t);
	double t0 = now_s(), c0 = cpu_s();
	for (uint32_t i = 0; i < qd; i++)
		lib_issue();
	while (inflight) {
		struct pollfd p = { .fd = iscsi_get_fd(ic), .events = (short)iscsi_which_events(ic) };
		if (poll(&p, 1, 1000) < 0)
			break;
		if (iscsi_service(ic, p.revents) < 0)
			break;
		if (!stopping && now_s() - t0 >= seconds)
			stopping = true;
	}
	double el = now_s() - t0, cpu = cpu_s() - c0;
	printf("libiscsi  %10.0f IOPS %9.1f MiB/s  cpu %.2f s  %.2f us/IO  %.0f IOPS per CPU-second  errors %" PRIu64 "\n",
	       ios / el, ios * (double)bs / el / 1048576, cpu, cpu * 1e6 / (double)ios, ios / cpu, errors);
	iscsi_logout_sync(ic);
	iscsi_destroy_context(ic);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "lib", required_argument, NULL, 'l' }, { "bs", required_argument, NULL, 'b' },
		{ "qd", required_argument, NULL, 'q' }, { "seconds", required_argument, NULL, 's' },
		{ "random", no_argument, NULL, 'r' }, { 0 },
	};
	const char *lib = "isc";
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'l': lib = optarg; break;
		case 'b': bs = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'q': qd = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 's': seconds = atoi(optarg); break;
		case 'r': rnd = true; break;
		default:
			fprintf(stderr, "usage: isc-bench --lib isc|libiscsi [--bs B] [--qd N] [--seconds S] [--random] URL\n");
			return 2;
		}
	}
	if (optind >= argc || !bs || bs % 512 || !qd) {
		fprintf(stderr, "usage: isc-bench --lib isc|libiscsi [--bs B] [--qd N] [--seconds S] [--random] URL\n");
		return 2;
	}
	return !strcmp(lib, "libiscsi") ? run_libiscsi(argv[optind]) : run_isc(argv[optind]);
}
