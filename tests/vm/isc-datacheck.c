/*
 * isc-datacheck [options] URL: data written with the isert initiator library
 * reads back the same, over iscsi:// or iser:// (used by
 * t-initiator-iser.sh).  For each size a pattern is written and read back
 * into a poisoned buffer, from three kinds of memory: a pool buffer
 * (isc_buf_alloc, registered once), a pointer 512 bytes inside one, and
 * plain malloc'd memory (registered per command over iSER); a write from
 * read-only memory; then QD commands in flight at once, each with its own
 * buffer.  With --verify-url every region is read again through a second
 * session (e.g. over TCP), so the data is known to be on the target and not
 * only in our buffers.  Prints "ok"/"not ok" lines; exits 0 when all passed.
 *
 * options: -i INITIATOR-NAME  -s SIZES (e.g. 4k,128k,1m)  -q QD  -b QD-BLOCK-SIZE
 *          --lba START  --verify-url URL
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "isert/initiator.h"
#include "isc-check.h"

#define MAX_REGIONS 256

struct region { uint64_t lba; uint32_t len; uint32_t seed; };

static struct region regions[MAX_REGIONS];
static unsigned nregions;
static struct isc_capacity cap;
static uint64_t next_lba;
static struct isc_url url;

static struct region *region_new(uint32_t len)
{
	uint32_t blocks = (len + cap.block_size - 1) / cap.block_size;
	if (nregions == MAX_REGIONS || next_lba + blocks > cap.blocks)
		return NULL;
	struct region *r = &regions[nregions];
	r->lba = next_lba;
	r->len = blocks * cap.block_size;
	r->seed = 0x5eed0000u + nregions;
	next_lba += blocks;
	nregions++;
	return r;
}

static const char *human(uint32_t len, char *buf, size_t n)
{
	if (len >= 1048576 && len % 1048576 == 0)
		snprintf(buf, n, "%u MiB", len >> 20);
	else if (len >= 1024 && len % 1024 == 0)
		snprintf(buf, n, "%u KiB", len >> 10);
	else
		snprintf(buf, n, "%u bytes", len);
	return buf;
}

/* Write src to a new region and read it back into dst (poisoned first). */
static void roundtrip(struct isc_session *s, uint8_t *src, uint8_t *dst, uint32_t len, const char *kind)
{
	char what[160], why[512], h[32];
	snprintf(what, sizeof(what), "%s, %s: written and read back", human(len, h, sizeof(h)), kind);
	struct region *r = region_new(len);
	if (!r || r->len != len) {
		check(what, false, "the LUN is too small or the size is not a multiple of the block size");
		return;
	}
	struct isc_result res;
	int rc = isc_write16_sync(s, url.lun, r->lba, len / cap.block_size, cap.block_size, src, false, &res);
	if (rc) {
		snprintf(why, sizeof(why), "WRITE: %s", isc_errmsg(s));
		check(what, false, "%s", why);
		return;
	}
	memset(dst, 0xa5, len);
	rc = isc_read16_sync(s, url.lun, r->lba, len / cap.block_size, cap.block_size, dst, &res);
	if (rc) {
		snprintf(why, sizeof(why), "READ: %s", isc_errmsg(s));
		check(what, false, "%s", why);
		return;
	}
	check(what, !pattern_compare(dst, len, r->seed, why, sizeof(why)), "%s", why);
}

static void sizes_check(struct isc_session *s, uint32_t len)
{
	/* Pool buffers: registered once. */
	uint8_t *a = isc_buf_alloc(s, len), *b = isc_buf_alloc(s, len);
	if (!a || !b) {
		check("isc_buf_alloc", false, "%s", strerror(errno));
		return;
	}
	pattern_fill(a, len, 0x5eed0000u + nregions);
	roundtrip(s, a, b, len, "pool buffers (isc_buf_alloc)");
	isc_buf_free(s, a);
	isc_buf_free(s, b);
	/* A command's data starting inside a pool buffer. */
	a = isc_buf_alloc(s, len + 4096);
	b = isc_buf_alloc(s, len + 4096);
	if (a && b) {
		pattern_fill(a + 512, len, 0x5eed0000u + nregions);
		roundtrip(s, a + 512, b + 512, len, "512 bytes into pool buffers");
	}
	isc_buf_free(s, a);
	isc_buf_free(s, b);
	/* Plain memory: registered for each command over iSER. */
	a = malloc(len);
	b = malloc(len);
	if (a && b) {
		pattern_fill(a, len, 0x5eed0000u + nregions);
		roundtrip(s, a, b, len, "malloc'd buffers (registered per command)");
	}
	free(a);
	free(b);
}

/* The source of a WRITE may be read-only memory: the target only reads it. */
static void readonly_check(struct isc_session *s, uint32_t len)
{
	uint8_t *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = malloc(len);
	if (a == MAP_FAILED || !b) {
		check("read-only source", false, "out of memory");
		return;
	}
	pattern_fill(a, len, 0x5eed0000u + nregions);
	mprotect(a, len, PROT_READ);
	roundtrip(s, a, b, len, "write from read-only memory");
	munmap(a, len);
	free(b);
}

struct inflight { unsigned done, failed; char why[256]; };

static void qd_cb(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct inflight *f = arg;
	f->done++;
	if (r->err) {
		f->failed++;
		isc_result_str(r, f->why, sizeof(f->why));
		if (r->err != -EIO)
			snprintf(f->why, sizeof(f->why), "%s (%s)", isc_strerror(r->err), isc_errmsg(s));
	}
}

static int run_all(struct isc_session *s, struct inflight *f, unsigned n)
{
	while (f->done < n) {
		struct pollfd p = { .fd = isc_get_fd(s), .events = (short)isc_which_events(s) };
		if (poll(&p, 1, 1000) < 0 && errno != EINTR)
			return -errno;
		int rc = isc_service(s, p.revents);
		if (rc)
			return rc;
	}
	return 0;
}

/* qd commands in flight at once, each with a buffer of its own. */
static void qd_check(struct isc_session *s, unsigned qd, uint32_t len)
{
	char what[160], why[512], h[32];
	snprintf(what, sizeof(what), "%u commands of %s in flight at once, each its own pool buffer", qd,
		 human(len, h, sizeof(h)));
	uint8_t **src = calloc(qd, sizeof(*src)), **dst = calloc(qd, sizeof(*dst));
	struct region **rg = calloc(qd, sizeof(*rg));
	if (!src || !dst || !rg)
		goto out;
	for (unsigned i = 0; i < qd; i++) {
		src[i] = isc_buf_alloc(s, len);
		dst[i] = isc_buf_alloc(s, len);
		rg[i] = region_new(len);
		if (!src[i] || !dst[i] || !rg[i]) {
			check(what, false, "no memory or LUN too small");
			goto out;
		}
		pattern_fill(src[i], len, rg[i]->seed);
		memset(dst[i], 0xa5, len);
	}
	struct inflight f = { 0 };
	for (unsigned i = 0; i < qd; i++) {
		struct isc_cmd c;
		isc_cmd_write16(&c, url.lun, rg[i]->lba, len / cap.block_size, cap.block_size, src[i], false);
		if (!isc_submit(s, &c, qd_cb, &f)) {
			check(what, false, "%s", strerror(errno));
			goto out;
		}
	}
	if (run_all(s, &f, qd) || f.failed) {
		snprintf(why, sizeof(why), "WRITE: %s", f.why[0] ? f.why : isc_errmsg(s));
		check(what, false, "%s", why);
		goto out;
	}
	f = (struct inflight){ 0 };
	for (unsigned i = 0; i < qd; i++) {
		struct isc_cmd c;
		isc_cmd_read16(&c, url.lun, rg[i]->lba, len / cap.block_size, cap.block_size, dst[i]);
		if (!isc_submit(s, &c, qd_cb, &f)) {
			check(what, false, "%s", strerror(errno));
			goto out;
		}
	}
	if (run_all(s, &f, qd) || f.failed) {
		snprintf(why, sizeof(why), "READ: %s", f.why[0] ? f.why : isc_errmsg(s));
		check(what, false, "%s", why);
		goto out;
	}
	int bad = 0;
	for (unsigned i = 0; i < qd && !bad; i++)
		bad = pattern_compare(dst[i], len, rg[i]->seed, why, sizeof(why));
	check(what, !bad, "%s", why);
out:
	for (unsigned i = 0; src && dst && i < qd; i++) {
		if (src[i])
			isc_buf_free(s, src[i]);
		if (dst[i])
			isc_buf_free(s, dst[i]);
	}
	free(src);
	free(dst);
	free(rg);
}

/* Every region again through another session (another transport). */
static void verify_elsewhere(const struct isc_options *o, const char *vurl)
{
	struct isc_url v;
	char err[300], what[600];
	snprintf(what, sizeof(what), "all %u regions read back identical through %s", nregions, vurl);
	if (isc_url_parse(vurl, false, &v, err, sizeof(err))) {
		check(what, false, "%s", err);
		return;
	}
	struct isc_session *s = isc_session_new(o);
	if (!s || isc_connect_url_sync(s, &v)) {
		check(what, false, "%s", s ? isc_errmsg(s) : "out of memory");
		isc_session_free(s);
		return;
	}
	int bad = 0;
	for (unsigned i = 0; i < nregions && !bad; i++) {
		uint8_t *b = malloc(regions[i].len);
		if (!b)
			bad = 1;
		else if (isc_read16_sync(s, v.lun, regions[i].lba, regions[i].len / cap.block_size, cap.block_size, b,
					 NULL)) {
			snprintf(err, sizeof(err), "READ: %s", isc_errmsg(s));
			bad = 1;
		} else {
			bad = pattern_compare(b, regions[i].len, regions[i].seed, err, sizeof(err));
		}
		free(b);
	}
	check(what, !bad, "%s", err);
	isc_logout_sync(s);
	isc_session_free(s);
}

int main(int argc, char **argv)
{
	struct isc_options o;
	isc_options_default(&o);
	const char *sizes = "4k,128k,1m", *vurl = NULL, *u = NULL;
	unsigned qd = 16;
	uint32_t qd_len = 65536;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-i") && v)
			o.initiator_name = argv[++i];
		else if (!strcmp(a, "-s") && v)
			sizes = argv[++i];
		else if (!strcmp(a, "-q") && v)
			qd = (unsigned)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(a, "-b") && v)
			qd_len = parse_size(argv[++i]);
		else if (!strcmp(a, "--lba") && v)
			next_lba = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(a, "--verify-url") && v)
			vurl = argv[++i];
		else if (a[0] != '-' && !u)
			u = a;
		else {
			fprintf(stderr, "usage: isc-datacheck [-i IQN] [-s 4k,128k,1m] [-q QD] [-b SIZE] [--lba N] "
					"[--verify-url URL] URL\n");
			return 2;
		}
	}
	char err[300];
	if (!u || isc_url_parse(u, false, &url, err, sizeof(err))) {
		fprintf(stderr, "isc-datacheck: %s\n", u ? err : "URL missing");
		return 2;
	}
	if (!qd || qd > 128 || !qd_len) {
		fprintf(stderr, "isc-datacheck: -q 1..128 and -b a size please\n");
		return 2;
	}
	struct isc_session *s = check_login(&o, &url);
	if (!s)
		return 1;
	struct isc_params p;
	isc_get_params(s, &p);
	printf("# transport %s, InitiatorRecvDataSegmentLength %u, TargetRecvDataSegmentLength %u, ImmediateData %s\n",
	       p.iser ? "iser" : "tcp", p.initiator_recv_dsl, p.target_recv_dsl, p.immediate_data ? "Yes" : "No");
	/* A new I_T nexus may first get UNIT ATTENTION (tgtd: power on); TEST UNIT READY takes it. */
	for (int i = 0; i < 3 && isc_tur_sync(s, url.lun, NULL); i++)
		;
	int rc = isc_readcap16_sync(s, url.lun, &cap, NULL);
	check("READ CAPACITY (16)", !rc, "%s", isc_errmsg(s));
	if (rc)
		return 1;
	printf("# LUN %" PRIu64 ": %" PRIu64 " blocks of %u bytes\n", url.lun, cap.blocks, cap.block_size);
	char *list = strdup(sizes);
	for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
		uint32_t len = parse_size(tok);
		if (!len || len % cap.block_size) {
			fprintf(stderr, "isc-datacheck: bad size '%s' (a multiple of %u)\n", tok, cap.block_size);
			return 2;
		}
		sizes_check(s, len);
	}
	free(list);
	readonly_check(s, 131072);
	qd_check(s, qd, qd_len);
	rc = isc_logout_sync(s);
	check("logout", !rc, "%s", isc_errmsg(s));
	isc_session_free(s);
	if (vurl)
		verify_elsewhere(&o, vurl);
	printf("# %u failed\n", check_failed);
	return check_failed ? 1 : 0;
}
