/*
 * Token-based copy (rod.c): the POPULATE TOKEN and WRITE USING TOKEN
 * parameter-list parsers against hostile lists, then whole commands through
 * the SCSI layer against RAM LUs behind a LUN map: tokens made and read
 * back by RECEIVE ROD TOKEN INFORMATION, copies within and across LUs (an
 * offset into the ROD, a ROD shorter than the destination), the block
 * device zero ROD token, every refusal (forged, altered, unknown, expired,
 * cancelled by each kind of write, revoked by a reset, deleted, from another
 * target, of an LU the nexus does not map), the bounds (ranges, tokens per
 * LU, held results), reservations, VPD 8Fh; and, with a backstore that
 * completes when told, a copy aborted, a copy whose token a write cancels,
 * a list identifier still running.  Every buffer must be back in the pool at
 * the end.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/backstore/backstore_impl.h"
#include "target/scsi/copy/copy.h"
#include "target/scsi/copy/rod.h"
#include "target/scsi/scsi_int.h"
#include "sense_check.h"

#include "medium.h"
#include "scsi_harness.h"
#include "unit_run.h"

#define NBLK 16384u   /* 8 MiB of 512-byte blocks */
#define RRTI_HDR_TEST 32u

enum { A, B, C, D, NLU };   /* C has 4096-byte blocks; D is not mapped */
static struct backstore *bstore[NLU];
static struct scsi_lu *lus[NLU];
static struct scsi_nexus NX = { .initiator_name = "iqn.test:i", .initiator_port = "iqn.test:i,i,0x000000000001",
				.target_name = "iqn.test:t", .target_port = "iqn.test:t,t,0x0001", .rel_port_id = 1,
				.id = 1 };
static struct scsi_nexus NX2 = { .initiator_name = "iqn.test:j", .initiator_port = "iqn.test:j,i,0x000000000002",
				 .target_name = "iqn.test:t", .target_port = "iqn.test:t,t,0x0001", .rel_port_id = 1,
				 .id = 2 };
/* The same initiator through another target of this process. */
static struct scsi_nexus NX_OTHER = { .initiator_name = "iqn.test:i", .initiator_port = "iqn.test:i,i,0x000000000001",
				      .target_name = "iqn.test:other", .target_port = "iqn.test:other,t,0x0001",
				      .rel_port_id = 1, .id = 3 };

static const uint64_t map_luns[] = { 0, 1, 2 };
static struct scsi_lu *map_lu_at(const struct scsi_lun_map *m, uint32_t i, bool *ro)
{
	(void)m;
	*ro = false;
	return i < 3 ? lus[i] : NULL;
}
static struct scsi_lun_map MAP = { .count = 3, .luns = map_luns, .lu_at = map_lu_at };
static uint64_t now_ms = 1000000;
static uint64_t fake_clock(void) { return now_ms; }

/* A whole command, done once; returns its status and releases it (sense stays in *c). */
static uint8_t run(struct scsi_cmd *c, const struct scsi_nexus *nx, struct scsi_lu *lu, const uint8_t *cdb,
		   uint32_t edtl, bool rd, const void *dout, uint32_t dlen)
{
	sh_cmd_init(c, lu, cdb, 16, edtl, rd, dout != NULL);
	c->nexus = nx;
	if (sh_start(c, dout, dlen))
		CU_ASSERT_EQUAL(sh_ndone, 1);
	scsi_cmd_release(c);
	if (getenv("ROD_DEBUG") && c->status)
		fprintf(stderr, "  [%02x/%02x: status %02x sense %x/%04x]\n", cdb[0], cdb[1], c->status, sk(c), asc(c));
	return c->status;
}

/* ---- parameter lists ---- */

static uint32_t range(uint8_t *d, uint64_t lba, uint32_t n)
{
	memset(d, 0, 16);
	put_be64(d, lba);
	put_be32(d + 8, n);
	return 16;
}

/* A POPULATE TOKEN list of nr ranges (r[2k] = lba, r[2k+1] = blocks). */
static uint32_t pt_list(uint8_t *p, const uint64_t *r, unsigned nr, uint32_t timeout)
{
	memset(p, 0, 16);
	put_be32(p + 4, timeout);
	for (unsigned i = 0; i < nr; i++)
		range(p + 16 + 16 * i, r[2 * i], (uint32_t)r[2 * i + 1]);
	put_be16(p + 14, (uint16_t)(16 * nr));
	put_be16(p, (uint16_t)(14 + 16 * nr));
	return 16 + 16 * nr;
}

static uint32_t wut_list(uint8_t *p, const uint8_t *token, uint64_t offset, const uint64_t *r, unsigned nr,
			 uint8_t flags)
{
	memset(p, 0, ROD_WUT_HDR);
	p[2] = flags;
	put_be64(p + 8, offset);
	memcpy(p + 16, token, ROD_TOKEN_LEN);
	for (unsigned i = 0; i < nr; i++)
		range(p + ROD_WUT_HDR + 16 * i, r[2 * i], (uint32_t)r[2 * i + 1]);
	put_be16(p + 534, (uint16_t)(16 * nr));
	put_be16(p, (uint16_t)(ROD_WUT_HDR - 2 + 16 * nr));
	return ROD_WUT_HDR + 16 * nr;
}

static void expect_parse_pt(const uint8_t *p, uint32_t len, uint16_t a, int field)
{
	struct rod_pt *pt = malloc(sizeof(*pt));
	struct rod_err e;
	int rc = rod_parse_pt(p, len, NBLK, ROD_MAX_BYTES / 512, pt, &e);
	CU_ASSERT_EQUAL(rc, -1);
	CU_ASSERT_EQUAL(e.key, SK_ILLEGAL_REQUEST);
	CU_ASSERT_EQUAL(e.asc, a);
	if (field >= 0)
		CU_ASSERT_EQUAL(e.field, field);
	if (rc != -1 || e.asc != a || (field >= 0 && e.field != field))
		fprintf(stderr, "  parse: rc %d asc %04x field %u, want %04x field %d\n", rc, e.asc, e.field, a, field);
	free(pt);
}

static void test_parse_pt(void)
{
	static uint8_t p[2048];
	struct rod_pt *pt = malloc(sizeof(*pt));
	struct rod_err e;
	uint64_t r[2 * 66];

	/* a good list */
	uint64_t two[] = { 0, 8, 100, 16 };
	uint32_t len = pt_list(p, two, 2, 30);
	p[2] = 0x03;   /* RTV, IMMED */
	put_be32(p + 8, ROD_TYPE_PIT_VULN);
	CU_ASSERT_EQUAL_FATAL(rod_parse_pt(p, len, NBLK, 1000, pt, &e), 0);
	CU_ASSERT(pt->rtv && pt->immed);
	CU_ASSERT_EQUAL(pt->timeout, 30);
	CU_ASSERT_EQUAL(pt->nranges, 2);
	CU_ASSERT_EQUAL(pt->r[1].lba, 100);
	CU_ASSERT_EQUAL(pt->r[1].n, 16);
	/* too short for a header and one range, or a data length past the list */
	for (uint32_t n = 0; n < 32; n++)
		expect_parse_pt(p, n, ASC_PARAM_LIST_LENGTH_ERROR, -1);
	put_be16(p, (uint16_t)len);
	expect_parse_pt(p, len, ASC_PARAM_LIST_LENGTH_ERROR, -1);
	/* range descriptor length: zero, not a multiple of 16, past the data length, more than 64 */
	len = pt_list(p, two, 2, 0);
	put_be16(p + 14, 0);
	expect_parse_pt(p, len, ASC_INVALID_FIELD_IN_PARAM, 14);
	put_be16(p + 14, 24);
	expect_parse_pt(p, len, ASC_INVALID_FIELD_IN_PARAM, 14);
	put_be16(p + 14, 48);
	expect_parse_pt(p, len, ASC_INVALID_FIELD_IN_PARAM, 14);
	for (unsigned i = 0; i < 65; i++) {
		r[2 * i] = 10 * i;
		r[2 * i + 1] = 1;
	}
	len = pt_list(p, r, 64, 0);
	CU_ASSERT_EQUAL(rod_parse_pt(p, len, NBLK, 1000, pt, &e), 0);
	len = pt_list(p, r, 65, 0);
	expect_parse_pt(p, len, 0x2608, 14);   /* TOO MANY SEGMENT DESCRIPTORS */
	/* past the end of the LU: LOGICAL BLOCK ADDRESS OUT OF RANGE with the LBA; one that wraps */
	uint64_t past[] = { 0, 8, NBLK - 4, 8 };
	len = pt_list(p, past, 2, 0);
	CU_ASSERT_EQUAL(rod_parse_pt(p, len, NBLK, 1000, pt, &e), -1);
	CU_ASSERT_EQUAL(e.asc, ASC_LBA_OUT_OF_RANGE);
	CU_ASSERT(e.info_valid && e.info == NBLK - 4);
	uint64_t wrap[] = { UINT64_MAX - 2, 8 };
	len = pt_list(p, wrap, 1, 0);
	expect_parse_pt(p, len, ASC_LBA_OUT_OF_RANGE, -1);
	/* overlapping ranges: the pointer names the second */
	uint64_t ov[] = { 0, 8, 100, 8, 104, 1 };
	len = pt_list(p, ov, 3, 0);
	expect_parse_pt(p, len, ASC_INVALID_FIELD_IN_PARAM, 16 + 32);
	/* zero-length ranges overlap nothing */
	uint64_t z[] = { 0, 8, 4, 0 };
	len = pt_list(p, z, 2, 0);
	CU_ASSERT_EQUAL(rod_parse_pt(p, len, NBLK, 1000, pt, &e), 0);
	/* more blocks than a token may represent: the NUMBER OF LOGICAL BLOCKS that crossed */
	uint64_t big[] = { 0, 600, 1000, 600 };
	len = pt_list(p, big, 2, 0);
	CU_ASSERT_EQUAL(rod_parse_pt(p, len, NBLK, 1000, pt, &e), -1);
	CU_ASSERT_EQUAL(e.asc, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(e.field, 16 + 16 + 8);
	/* ROD types: persistent, zero, internal, garbage refused; the rest taken */
	static const uint32_t bad[] = { ROD_TYPE_PIT_PERSIST, ROD_TYPE_ZERO, 0, 0x12345678 };
	static const uint32_t good[] = { ROD_TYPE_AUR, ROD_TYPE_PIT_DEFAULT, ROD_TYPE_PIT_VULN, ROD_TYPE_PIT_ANY };
	for (unsigned i = 0; i < 4; i++) {
		len = pt_list(p, two, 2, 0);
		p[2] = 0x02;
		put_be32(p + 8, bad[i]);
		expect_parse_pt(p, len, ASC_INVALID_FIELD_IN_PARAM, 8);
		put_be32(p + 8, good[i]);
		CU_ASSERT_EQUAL(rod_parse_pt(p, len, NBLK, 1000, pt, &e), 0);
		p[2] = 0;   /* without RTV the type is not looked at */
		put_be32(p + 8, bad[i]);
		CU_ASSERT_EQUAL(rod_parse_pt(p, len, NBLK, 1000, pt, &e), 0);
	}
	/* an inactivity timeout past the maximum */
	len = pt_list(p, two, 2, ROD_MAX_TIMEOUT + 1);
	expect_parse_pt(p, len, ASC_INVALID_FIELD_IN_PARAM, 4);
	len = pt_list(p, two, 2, ROD_MAX_TIMEOUT);
	CU_ASSERT_EQUAL(rod_parse_pt(p, len, NBLK, 1000, pt, &e), 0);

	/* random lists never crash the parser nor give counts past the maxima */
	srand(11);
	for (int i = 0; i < 20000; i++) {
		uint32_t n = (uint32_t)rand() % sizeof(p) + 1;
		for (uint32_t k = 0; k < n; k++)
			p[k] = (uint8_t)rand();
		if (i & 1) {   /* plausible lengths, so the walk goes deep */
			put_be16(p, (uint16_t)(n - 2));
			put_be16(p + 14, (uint16_t)(16 * (rand() % 70)));
			for (uint32_t k = 16; k + 16 <= n; k += 16)
				put_be64(p + k, (uint64_t)(rand() % NBLK));
		}
		if (rod_parse_pt(p, n, NBLK, 1000, pt, &e) == 0) {
			CU_ASSERT(pt->nranges >= 1 && pt->nranges <= ROD_MAX_RANGES);
		} else {
			CU_ASSERT(e.key == SK_ILLEGAL_REQUEST);
		}
	}
	free(pt);
}

static void test_parse_wut(void)
{
	static uint8_t p[ROD_MAX_WUT_LIST + 64], tok[ROD_TOKEN_LEN];
	struct rod_wut *w = malloc(sizeof(*w));
	struct rod_err e;
	uint64_t r[] = { 10, 8, 200, 4 };

	memset(tok, 0x5a, sizeof(tok));
	uint32_t len = wut_list(p, tok, 77, r, 2, 0x03);
	CU_ASSERT_EQUAL_FATAL(rod_parse_wut(p, len, NBLK, 1000, w, &e), 0);
	CU_ASSERT(w->immed && w->del_tkn);
	CU_ASSERT_EQUAL(w->offset, 77);
	CU_ASSERT(w->token == p + 16);
	CU_ASSERT_EQUAL(w->nranges, 2);
	CU_ASSERT_EQUAL(w->r[0].lba, 10);
	/* cut anywhere before the first range: PARAMETER LIST LENGTH ERROR */
	for (uint32_t n = 0; n < ROD_WUT_HDR + 16; n += 7) {
		CU_ASSERT_EQUAL(rod_parse_wut(p, n, NBLK, 1000, w, &e), -1);
		CU_ASSERT_EQUAL(e.asc, ASC_PARAM_LIST_LENGTH_ERROR);
	}
	put_be16(p + 534, 0);
	CU_ASSERT_EQUAL(rod_parse_wut(p, len, NBLK, 1000, w, &e), -1);
	CU_ASSERT_EQUAL(e.field, 534);
	uint64_t many[2 * 65];
	for (unsigned i = 0; i < 65; i++) {
		many[2 * i] = 3 * i;
		many[2 * i + 1] = 4;
	}
	len = wut_list(p, tok, 0, many, 65, 0);
	CU_ASSERT_EQUAL(rod_parse_wut(p, len, NBLK, 1000, w, &e), -1);
	CU_ASSERT_EQUAL(e.asc, 0x2608);
	CU_ASSERT_EQUAL(e.field, 534);
	len = wut_list(p, tok, 0, many, 64, 0);
	CU_ASSERT_EQUAL(rod_parse_wut(p, len, NBLK, 1000, w, &e), -1);   /* 3 apart, 4 long: they overlap */
	CU_ASSERT_EQUAL(e.field, ROD_WUT_HDR + 16);
	free(w);
}

/* ---- the SCSI layer ---- */

static bool zeroes(int lu, uint64_t lba, uint32_t n)
{
	uint8_t *x = medium_readback(bstore[lu], lba, n);
	bool z = true;
	for (size_t i = 0; i < (size_t)n * 512; i++)
		z &= !x[i];
	free(x);
	return z;
}

/* A backstore that completes when the test says. */
static struct bs_ops slow_ops;
static struct bs_io *pending[64];
static unsigned npending;

static void slow_submit(struct backstore *bs, struct bs_io *io)
{
	(void)bs;
	if (npending < 64)
		pending[npending++] = io;
}

static bool complete_one(void)
{
	if (!npending)
		return false;
	struct bs_io *io = pending[0];
	memmove(pending, pending + 1, --npending * sizeof(pending[0]));
	bs_ram_ops.submit(io->bs, io);
	return true;
}

static int setup(void)
{
	static const uint32_t bsz[NLU] = { 512, 512, 4096, 512 };
	char err[256], name[8];
	if (sh_pool_open())
		return -1;
	sh_nexus = &NX;
	sh_lun_map = &MAP;
	for (int i = 0; i < NLU; i++) {
		snprintf(name, sizeof(name), "r%d", i);
		struct backstore_cfg cfg = { .name = name, .type = BACKSTORE_RAM, .size = (uint64_t)NBLK * 512,
					     .block_size = bsz[i], .write_cache = true, .thin = true };
		if (backstore_open(&cfg, &bstore[i], err, sizeof(err)) < 0)
			return -1;
		struct scsi_lu_params p = { .name = name };
		if (scsi_lu_create(bstore[i], &p, &lus[i]))
			return -1;
	}
	slow_ops = bs_ram_ops;
	slow_ops.submit = slow_submit;
	rod_clock_ms = fake_clock;
	return 0;
}

static int teardown(void)
{
	for (int i = 0; i < NLU; i++) {
		scsi_lu_destroy(lus[i]);
		backstore_close(bstore[i]);
	}
	return sh_pool_close();
}

static void clear_ua(void)
{
	static const struct scsi_nexus *nxs[] = { &NX, &NX2, &NX_OTHER };
	uint8_t tur[16] = { 0 };
	struct scsi_cmd c;

	for (int l = 0; l < NLU; l++)
		for (unsigned n = 0; n < 3; n++)
			for (int i = 0; i < 6; i++)
				run(&c, nxs[n], lus[l], tur, 0, false, NULL, 0);
}

/* POPULATE TOKEN on lu with list identifier lid; returns the status. */
static uint8_t pt(struct scsi_lu *lu, const struct scsi_nexus *nx, uint32_t lid, const uint64_t *r, unsigned nr,
		  uint32_t timeout, struct scsi_cmd *c)
{
	static uint8_t p[ROD_MAX_PT_LIST + 16];   /* one range past the longest list, to be refused */
	uint8_t cdb[16] = { 0x83, ROD_SA_PT };
	uint32_t len = pt_list(p, r, nr, timeout);
	put_be32(cdb + 6, lid);
	put_be32(cdb + 10, len);
	return run(c, nx, lu, cdb, len, false, p, len);
}

/* RECEIVE ROD TOKEN INFORMATION into rsp (up to 1024 bytes); returns the status. */
static uint8_t rrti(struct scsi_lu *lu, const struct scsi_nexus *nx, uint32_t lid, uint8_t *rsp, uint32_t *got)
{
	struct scsi_cmd c;
	uint8_t cdb[16] = { 0x84, ROD_SA_RRTI };
	put_be32(cdb + 2, lid);
	put_be32(cdb + 10, 1024);
	sh_cmd_init(&c, lu, cdb, 16, 1024, true, false);
	c.nexus = nx;
	int saved = sh_ndone;
	sh_start(&c, NULL, 0);
	if (c.status == SCSI_GOOD && rsp) {
		memcpy(rsp, c.buf->data, c.din_len);
		*got = c.din_len;
	}
	scsi_cmd_release(&c);
	sh_ndone = saved;
	return c.status;
}

/* PT then RRTI: the token in tok. */
static void token(struct scsi_lu *lu, const uint64_t *r, unsigned nr, uint32_t timeout, uint8_t *tok)
{
	struct scsi_cmd c;
	uint8_t rsp[1024];
	uint32_t got = 0;

	CU_ASSERT_EQUAL_FATAL(pt(lu, &NX, 9, r, nr, timeout, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL_FATAL(rrti(lu, &NX, 9, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL_FATAL(got, RRTI_HDR_TEST + 4 + 2 + ROD_TOKEN_LEN);
	memcpy(tok, rsp + RRTI_HDR_TEST + 6, ROD_TOKEN_LEN);
}

/* WRITE USING TOKEN on lu; returns the status (sense in *c). */
static uint8_t wut(struct scsi_lu *lu, const struct scsi_nexus *nx, uint32_t lid, const uint8_t *tok, uint64_t off,
		   const uint64_t *r, unsigned nr, uint8_t flags, struct scsi_cmd *c)
{
	static uint8_t p[ROD_MAX_WUT_LIST];
	uint8_t cdb[16] = { 0x83, ROD_SA_WUT };
	uint32_t len = wut_list(p, tok, off, r, nr, flags);
	put_be32(cdb + 6, lid);
	put_be32(cdb + 10, len);
	return run(c, nx, lu, cdb, len, false, p, len);
}

static void test_vpd(void)
{
	struct scsi_cmd c;

	clear_ua();
	uint8_t inq[16] = { 0x12, 0x01, 0x8f, 0x04, 0x00 };

	sh_cmd_init(&c, lus[A], inq, 6, 1024, true, false);
	CU_ASSERT_FATAL(sh_start(&c, NULL, 0));
	CU_ASSERT_EQUAL_FATAL(c.status, SCSI_GOOD);
	const uint8_t *d = c.buf->data;
	uint32_t plen = get_be16(d + 2), off = 4, seen = 0, last = 0;
	bool first = true;
	while (off + 4 <= plen + 4) {
		uint16_t type = get_be16(d + off), l = get_be16(d + off + 2);
		CU_ASSERT_EQUAL(l % 4, 0);
		CU_ASSERT(first || type > last);   /* ascending */
		first = false;
		last = type;
		const uint8_t *b = d + off;
		if (type == 0x0000) {
			CU_ASSERT_EQUAL(l, 0x20);
			CU_ASSERT_EQUAL(get_be16(b + 10), ROD_MAX_RANGES);
			CU_ASSERT_EQUAL(get_be32(b + 12), ROD_MAX_TIMEOUT);
			CU_ASSERT_EQUAL(get_be32(b + 16), ROD_DEFAULT_TIMEOUT);
			CU_ASSERT_EQUAL(get_be64(b + 20), ROD_MAX_BYTES / 512);
			CU_ASSERT_EQUAL(get_be64(b + 28), ROD_OPTIMAL_BYTES / 512);
			seen |= 1;
		} else if (type == 0x0001) {
			static const uint8_t want[] = { 10, 0x83, 3, 0x00, 0x10, 0x11, 0x84, 3, 0x00, 0x03, 0x07 };
			CU_ASSERT(!memcmp(b + 4, want, sizeof(want)));
			seen |= 2;
		} else if (type == 0x0106) {
			CU_ASSERT_EQUAL(b[4] & 0x0f, 0);   /* no remote tokens */
			CU_ASSERT_EQUAL(get_be32(b + 20), ROD_MAX_LIFETIME);
			CU_ASSERT_EQUAL(get_be32(b + 24), ROD_MAX_TIMEOUT);
			CU_ASSERT_EQUAL(get_be16(b + 46), 48);
			CU_ASSERT_EQUAL(get_be16(b + 48 + 2) + 4, 48);
			CU_ASSERT_EQUAL(get_be64(b + 48 + 8), ROD_MAX_BYTES);
			seen |= 4;
		} else if (type == 0x0108) {
			CU_ASSERT_EQUAL(get_be16(b + 6), 3 * 64);
			CU_ASSERT_EQUAL(get_be32(b + 8), ROD_TYPE_AUR);
			CU_ASSERT_EQUAL(b[8 + 4], 0x03);
			CU_ASSERT_EQUAL(get_be32(b + 8 + 64), ROD_TYPE_PIT_VULN);
			CU_ASSERT_EQUAL(get_be32(b + 8 + 128), ROD_TYPE_ZERO);
			CU_ASSERT_EQUAL(b[8 + 128 + 4], 0x02);   /* token in only */
			seen |= 8;
		}
		off += 4 + l;
	}
	CU_ASSERT_EQUAL(off, plen + 4);
	CU_ASSERT_EQUAL(seen, 15);
	scsi_cmd_release(&c);

	/* VPD B0h agrees: the token counts are whole multiples of its transfer lengths */
	uint8_t bl[16] = { 0x12, 0x01, 0xb0, 0x00, 0x40 };
	sh_cmd_init(&c, lus[A], bl, 6, 64, true, false);
	CU_ASSERT_FATAL(sh_start(&c, NULL, 0));
	d = c.buf->data;
	uint32_t gran = get_be16(d + 6), maxx = get_be32(d + 8), opt = get_be32(d + 12);
	CU_ASSERT(gran && (ROD_OPTIMAL_BYTES / 512) % gran == 0);
	CU_ASSERT(maxx && (ROD_MAX_BYTES / 512) % maxx == 0 && ROD_OPTIMAL_BYTES / 512 >= maxx);
	CU_ASSERT(!opt || (ROD_OPTIMAL_BYTES / 512) % opt == 0);
	scsi_cmd_release(&c);

	/* REPORT SUPPORTED OPERATION CODES knows the three, with their CDB usage */
	static const uint8_t sa[][2] = { { 0x83, 0x10 }, { 0x83, 0x11 }, { 0x84, 0x07 } };
	for (unsigned i = 0; i < 3; i++) {
		uint8_t one[16] = { 0xa3, 0x0c, 2, sa[i][0], 0, sa[i][1] };
		put_be32(one + 6, 64);
		sh_cmd_init(&c, lus[A], one, 12, 64, true, false);
		CU_ASSERT_FATAL(sh_start(&c, NULL, 0));
		CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
		CU_ASSERT_EQUAL(c.buf->data[1] & 7, 3);
		CU_ASSERT_EQUAL(c.buf->data[4 + 1], sa[i][1]);
		CU_ASSERT_EQUAL(get_be32(c.buf->data + 4 + 10), 0xffffffffu);
		scsi_cmd_release(&c);
	}
}

static void test_token_and_rrti(void)
{
	struct scsi_cmd c;
	uint8_t rsp[1024], naa[16];
	uint32_t got;
	uint64_t r[] = { 100, 8, 300, 24 };

	clear_ua();
	CU_ASSERT_EQUAL_FATAL(pt(lus[A], &NX, 257, r, 2, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL_FATAL(rrti(lus[A], &NX, 257, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(got, 32 + 4 + 2 + 512);
	CU_ASSERT_EQUAL(get_be32(rsp), got - 4);
	CU_ASSERT_EQUAL(rsp[4], 0x10);              /* for POPULATE TOKEN */
	CU_ASSERT_EQUAL(rsp[5], 0x01);              /* completed without errors */
	CU_ASSERT_EQUAL(rsp[12], SCSI_GOOD);
	CU_ASSERT_EQUAL(rsp[13], 0);
	CU_ASSERT_EQUAL(rsp[15], 0xf1);             /* logical blocks */
	CU_ASSERT_EQUAL(get_be64(rsp + 16), 32);
	CU_ASSERT_EQUAL(get_be32(rsp + 32), 2 + 512);
	const uint8_t *t = rsp + 38;
	CU_ASSERT_EQUAL(get_be32(t), ROD_TYPE_AUR);
	CU_ASSERT_EQUAL(get_be16(t + 6), 0x1f8);
	CU_ASSERT_EQUAL(t[16], 0xe4);
	lu_naa(lus[A], naa);
	CU_ASSERT(!memcmp(t + 24, naa, 16));        /* the LU's NAA designator */
	CU_ASSERT_EQUAL(get_be24(t + 16 + 29), 512);
	CU_ASSERT_EQUAL(get_be64(t + 48), 0);
	CU_ASSERT_EQUAL(get_be64(t + 56), 32 * 512);
	CU_ASSERT_EQUAL(get_be32(t + 96), 512);
	CU_ASSERT_EQUAL(t[128 + 1], 0xa8);          /* the target's SCSI name */
	CU_ASSERT(!memcmp(t + 132, "iqn.test:t", 10));
	/* reported once */
	CU_ASSERT_EQUAL(rrti(lus[A], &NX, 257, rsp, &got), SCSI_CHECK_CONDITION);
	/* another nexus, another LU, another list identifier see nothing */
	CU_ASSERT_EQUAL(pt(lus[A], &NX, 258, r, 2, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rrti(lus[A], &NX2, 258, rsp, &got), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(rrti(lus[B], &NX, 258, rsp, &got), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(rrti(lus[A], &NX, 259, rsp, &got), SCSI_CHECK_CONDITION);
	/* a point in time type asked for: change vulnerable */
	static uint8_t p[64];
	uint8_t cdb[16] = { 0x83, ROD_SA_PT };
	uint32_t len = pt_list(p, r, 2, 0);
	p[2] = 0x02;
	put_be32(p + 8, ROD_TYPE_PIT_DEFAULT);
	put_be32(cdb + 6, 258);
	put_be32(cdb + 10, len);
	CU_ASSERT_EQUAL(run(&c, &NX, lus[A], cdb, len, false, p, len), SCSI_GOOD);
	CU_ASSERT_EQUAL_FATAL(rrti(lus[A], &NX, 258, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(get_be32(rsp + 38), ROD_TYPE_PIT_VULN);
	/* two tokens of the same ranges differ (the secret) */
	uint8_t t1[512], t2[512];
	token(lus[A], r, 2, 0, t1);
	token(lus[A], r, 2, 0, t2);
	CU_ASSERT(memcmp(t1, t2, 512) != 0);
	CU_ASSERT(memcmp(t1 + 448, t2 + 448, 32) == 0);   /* the same ranges' digest */
	/* the list: too short for a range, too long */
	sh_cmd_init(&c, lus[A], cdb, 16, 20, false, true);
	put_be32(c.cdb + 10, 20);
	CU_ASSERT_FALSE(scsi_cmd_prepare(&c));
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
	scsi_cmd_release(&c);
	put_be32(cdb + 10, ROD_MAX_PT_LIST + 1);
	sh_cmd_init(&c, lus[A], cdb, 16, ROD_MAX_PT_LIST + 1, false, true);
	CU_ASSERT_FALSE(scsi_cmd_prepare(&c));
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
	CU_ASSERT_PTR_NULL(c.buf);
	scsi_cmd_release(&c);
	/* Data-Out shorter than the list */
	put_be32(cdb + 10, len);
	sh_cmd_init(&c, lus[A], cdb, 16, len - 1, false, true);
	sh_start(&c, p, len);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
	scsi_cmd_release(&c);
	/* RRTI without a nexus, and an unknown list: INVALID FIELD IN CDB at the list identifier */
	CU_ASSERT_EQUAL(rrti(lus[A], NULL, 9, NULL, NULL), SCSI_CHECK_CONDITION);
	uint8_t rc[16] = { 0x84, ROD_SA_RRTI };
	put_be32(rc + 2, 4242);
	put_be32(rc + 10, 64);
	run(&c, &NX, lus[A], rc, 64, true, NULL, 0);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(field_ptr(&c), 2);
}

static void test_copy(void)
{
	struct scsi_cmd c;
	uint8_t tok[512], rsp[1024];
	uint32_t got;

	clear_ua();
	medium_fill(bstore[A], 0, 8000, 0x11);
	medium_fill(bstore[B], 0, 8000, 0x22);
	/* within A: two source ranges onto three destination ranges */
	uint64_t src[] = { 0, 3000, 5000, 1000 };
	token(lus[A], src, 2, 0, tok);
	uint64_t dst[] = { 9000, 1500, 11000, 2000, 13000, 500 };
	CU_ASSERT_EQUAL(wut(lus[A], &NX, 300, tok, 0, dst, 3, 0, &c), SCSI_GOOD);
	CU_ASSERT(medium_same(bstore[A], 0, bstore[A], 9000, 1500));
	CU_ASSERT(medium_same(bstore[A], 1500, bstore[A], 11000, 1500));
	CU_ASSERT(medium_same(bstore[A], 5000, bstore[A], 12500, 500));
	CU_ASSERT(medium_same(bstore[A], 5500, bstore[A], 13000, 500));
	CU_ASSERT_EQUAL_FATAL(rrti(lus[A], &NX, 300, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(rsp[4], 0x11);
	CU_ASSERT_EQUAL(rsp[5], 0x01);
	CU_ASSERT_EQUAL(get_be64(rsp + 16), 4000);
	CU_ASSERT_EQUAL(get_be32(rsp + 32), 0);   /* no token */
	/* across LUs, sent to B with A's token, from an offset into the ROD */
	uint64_t d2[] = { 100, 2000 };
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 301, tok, 2500, d2, 1, 0, &c), SCSI_GOOD);
	CU_ASSERT(medium_same(bstore[A], 2500, bstore[B], 100, 500));
	CU_ASSERT(medium_same(bstore[A], 5000, bstore[B], 600, 1000));
	/* ... the ROD ends first: 1000 blocks left of 2000 asked, residual data, TRANSFER COUNT says so */
	CU_ASSERT_EQUAL_FATAL(rrti(lus[B], &NX, 301, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(rsp[5], 0x04);
	CU_ASSERT_EQUAL(get_be64(rsp + 16), 1500);
	/* an offset past the ROD */
	wut(lus[B], &NX, 302, tok, 4001, d2, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(field_ptr(&c), 8);
	/* onto its own source: refused, pointer at the destination range */
	uint64_t onto[] = { 2900, 200 };
	wut(lus[A], &NX, 302, tok, 0, onto, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(field_ptr(&c), ROD_WUT_HDR);
	/* to a 4096-byte LU: the token's block length is not that LU's */
	uint64_t d3[] = { 0, 8 };
	wut(lus[C], &NX, 302, tok, 0, d3, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM);
	/* destination past the end */
	uint64_t d4[] = { NBLK - 4, 8 };
	wut(lus[B], &NX, 302, tok, 0, d4, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
	/* the block device zero ROD token: zeroes, no token needed */
	uint8_t zero[512] = { 0 };
	put_be32(zero, ROD_TYPE_ZERO);
	put_be16(zero + 6, 0x1f8);
	uint64_t zr[] = { 200, 100, 7000, 1000 };
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 303, zero, 12345, zr, 2, 0, &c), SCSI_GOOD);
	CU_ASSERT(zeroes(B, 200, 100) && zeroes(B, 7000, 1000));
	CU_ASSERT(!zeroes(B, 199, 1) && !zeroes(B, 300, 1));
	put_be16(zero + 6, 0x1f0);
	wut(lus[B], &NX, 303, zero, 0, zr, 2, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x230a);   /* INVALID TOKEN LENGTH */
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
}

static void test_refusals(void)
{
	struct scsi_cmd c;
	uint8_t tok[512], bad[512];
	uint64_t src[] = { 1000, 64 }, dst[] = { 4000, 64 };

	clear_ua();
	token(lus[A], src, 1, 0, tok);
	/* forged: random bytes of a supported type, an unknown id */
	memset(bad, 0x77, sizeof(bad));
	put_be32(bad, ROD_TYPE_AUR);
	put_be16(bad + 6, 0x1f8);
	wut(lus[B], &NX, 400, bad, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2304);   /* TOKEN UNKNOWN */
	/* altered: any byte, the secret or the ranges' digest or the LU, and it is refused */
	static const unsigned at[] = { 20, 40, 60, 100, 200, 450, 500, 511 };
	for (unsigned i = 0; i < 8; i++) {
		memcpy(bad, tok, 512);
		bad[at[i]] ^= 0x01;
		wut(lus[B], &NX, 400, bad, 0, dst, 1, 0, &c);
		expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2305);   /* TOKEN CORRUPT */
	}
	/* another type, another length */
	memcpy(bad, tok, 512);
	put_be32(bad, 0x12345678);
	wut(lus[B], &NX, 400, bad, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2301);   /* UNSUPPORTED TOKEN TYPE */
	memcpy(bad, tok, 512);
	put_be16(bad + 6, 0x100);
	wut(lus[B], &NX, 400, bad, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x230a);
	/* used through another target of this process */
	wut(lus[B], &NX_OTHER, 400, tok, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2302);
	/* a token of an LU this nexus does not map (D): it would read what the nexus cannot */
	token(lus[D], src, 1, 0, bad);
	wut(lus[B], &NX, 400, bad, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2300);
	/* the good one still works */
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 400, tok, 0, dst, 1, 0, &c), SCSI_GOOD);
	/* DEL_TKN: used once more, then deleted */
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 400, tok, 0, dst, 1, 0x02, &c), SCSI_GOOD);
	wut(lus[B], &NX, 400, tok, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2309);   /* TOKEN DELETED */
	/* a reservation: another nexus holds EXCLUSIVE ACCESS on A, the source */
	token(lus[A], src, 1, 0, tok);
	uint8_t reg[24] = { 0 }, cdb[16] = { 0x5f, 0x00 };
	put_be64(reg + 8, 0xabc);
	put_be32(cdb + 5, 24);
	CU_ASSERT_EQUAL(run(&c, &NX2, lus[A], cdb, 24, false, reg, 24), SCSI_GOOD);
	memset(reg, 0, sizeof(reg));
	put_be64(reg, 0xabc);
	cdb[1] = 0x01;
	cdb[2] = 0x03;   /* RESERVE, EXCLUSIVE ACCESS */
	CU_ASSERT_EQUAL(run(&c, &NX2, lus[A], cdb, 24, false, reg, 24), SCSI_GOOD);
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 401, tok, 0, dst, 1, 0, &c), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(pt(lus[A], &NX, 402, src, 1, 0, &c), SCSI_RESERVATION_CONFLICT);
	/* WRITE EXCLUSIVE: POPULATE TOKEN reads, so it may; WRITE USING TOKEN into A may not */
	cdb[1] = 0x03;
	cdb[2] = 0;
	CU_ASSERT_EQUAL(run(&c, &NX2, lus[A], cdb, 24, false, reg, 24), SCSI_GOOD);   /* CLEAR */
	put_be64(reg + 8, 0xabc);
	put_be64(reg, 0);
	cdb[1] = 0x00;
	CU_ASSERT_EQUAL(run(&c, &NX2, lus[A], cdb, 24, false, reg, 24), SCSI_GOOD);
	memset(reg, 0, sizeof(reg));
	put_be64(reg, 0xabc);
	cdb[1] = 0x01;
	cdb[2] = 0x01;   /* WRITE EXCLUSIVE */
	CU_ASSERT_EQUAL(run(&c, &NX2, lus[A], cdb, 24, false, reg, 24), SCSI_GOOD);
	CU_ASSERT_EQUAL(pt(lus[A], &NX, 402, src, 1, 0, &c), SCSI_GOOD);
	uint8_t rsp[1024];
	uint32_t got;
	CU_ASSERT_EQUAL(rrti(lus[A], &NX, 402, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(wut(lus[A], &NX, 403, tok, 0, dst, 1, 0, &c), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 403, tok, 0, dst, 1, 0, &c), SCSI_GOOD);
	cdb[1] = 0x03;
	cdb[2] = 0;
	CU_ASSERT_EQUAL(run(&c, &NX2, lus[A], cdb, 24, false, reg, 24), SCSI_GOOD);
	clear_ua();
	/* a read-only mapping (the destination): DATA PROTECT, as a WRITE */
	uint64_t d[] = { 10, 8 };
	uint8_t w[16] = { 0x83, ROD_SA_WUT };
	static uint8_t lst[ROD_MAX_WUT_LIST];
	uint32_t len = wut_list(lst, tok, 0, d, 1, 0);
	put_be32(w + 10, len);
	sh_cmd_init(&c, lus[B], w, 16, len, false, true);
	c.read_only = true;
	CU_ASSERT_FALSE(scsi_cmd_prepare(&c));
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
}

/* Every kind of write that meets a token's ranges cancels it; one beside them does not. */
static void test_invalidation(void)
{
	struct scsi_cmd c;
	uint8_t tok[512], blk[4096] = { 0 };
	uint64_t src[] = { 1000, 64, 2000, 64 }, dst[] = { 6000, 128 };
	struct {
		const char *what;
		uint8_t cdb[16];
		uint32_t dlen;
		uint64_t lba;   /* UNMAP's descriptor */
	} w[] = {
		{ "WRITE(10)", { 0x2a, 0, 0, 0, 0x08, 0x0f, 0, 0, 1 }, 512, 0 },                   /* LBA 2063 */
		{ "WRITE(16)", { 0x8a, 0, 0, 0, 0, 0, 0, 0, 0x03, 0xf2, 0, 0, 0, 2 }, 1024, 0 },     /* 1010-1011 */
		{ "WRITE AND VERIFY(10)", { 0x2e, 0, 0, 0, 0x03, 0xe8, 0, 0, 1 }, 512, 0 },         /* 1000 */
		{ "WRITE SAME(16)", { 0x93, 0, 0, 0, 0, 0, 0, 0, 0x07, 0xc0, 0, 0, 0, 0x20 }, 512, 0 },  /* 1984-2015 */
		{ "UNMAP", { 0x42, 0, 0, 0, 0, 0, 0, 0, 24 }, 24, 1030 },
		{ "COMPARE AND WRITE", { 0x89, 0, 0, 0, 0, 0, 0, 0, 0x03, 0xe8, 0, 0, 0, 1 }, 1024, 0 },
	};

	scsi_lu_event(lus[A], &NX2, SCSI_EV_LU_RESET, NULL);   /* no token of the tests before */
	clear_ua();
	CU_ASSERT_EQUAL(lus[A]->rod_tokens, 0);
	medium_fill(bstore[A], 0, 4000, 0x33);
	for (unsigned i = 0; i < ARRAY_SIZE(w); i++) {
		token(lus[A], src, 2, 0, tok);
		/* beside the ranges: still good */
		uint8_t beside[16] = { 0x2a, 0, 0, 0, 0x04, 0x28, 0, 0, 1 };   /* LBA 1064 */
		CU_ASSERT_EQUAL(run(&c, &NX2, lus[A], beside, 512, false, blk, 512), SCSI_GOOD);
		CU_ASSERT_EQUAL(lus[A]->rod_tokens, 1);
		/* over them, from another nexus */
		uint8_t dout[4096] = { 0 };
		uint32_t dlen = w[i].dlen;
		if (w[i].cdb[0] == 0x42) {
			put_be16(dout, 22);
			put_be16(dout + 2, 16);
			put_be64(dout + 8, w[i].lba);
			put_be32(dout + 16, 4);
		} else if (w[i].cdb[0] == 0x89) {
			medium_rw(bstore[A], BS_READ, 1000, 1, dout);   /* compare what is there: it matches */
		}
		CU_ASSERT_EQUAL(run(&c, &NX2, lus[A], w[i].cdb, dlen, false, dout, dlen), SCSI_GOOD);
		if (c.status != SCSI_GOOD)
			fprintf(stderr, "  %s: %x/%04x\n", w[i].what, sk(&c), asc(&c));
		CU_ASSERT_EQUAL(lus[A]->rod_tokens, 0);
		wut(lus[B], &NX, 500, tok, 0, dst, 1, 0, &c);
		expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2308);   /* TOKEN CANCELLED */
	}
	/* an EXTENDED COPY or a WRITE USING TOKEN writing there cancels it too */
	uint8_t tok2[512];
	token(lus[A], src, 2, 0, tok);
	uint64_t other[] = { 3000, 64 };
	token(lus[A], other, 1, 0, tok2);
	uint64_t over[] = { 1010, 8 };
	CU_ASSERT_EQUAL(wut(lus[A], &NX, 501, tok2, 0, over, 1, 0, &c), SCSI_GOOD);
	wut(lus[B], &NX, 500, tok, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2308);
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 500, tok2, 0, dst, 1, 0, &c), SCSI_GOOD);   /* its own source untouched */
	/* SANITIZE, or anything else that changes the medium the hook does not know: every token of the LU */
	token(lus[A], src, 2, 0, tok);
	struct scsi_cmd s;
	uint8_t sanitize[16] = { 0x48 };
	sh_cmd_init(&s, lus[A], sanitize, 10, 0, false, false);
	rod_cmd_writes(&s);
	wut(lus[B], &NX, 500, tok, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2308);
	/* a reset revokes */
	token(lus[A], src, 2, 0, tok);
	scsi_lu_event(lus[A], &NX2, SCSI_EV_LU_RESET, NULL);
	clear_ua();
	wut(lus[B], &NX, 500, tok, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2306);   /* TOKEN REVOKED */
}

static void test_expiry(void)
{
	struct scsi_cmd c;
	uint8_t tok[512], t2[512];
	uint64_t src[] = { 1000, 64 }, dst[] = { 6000, 64 };

	clear_ua();
	/* inactivity: 2 s asked, used at 1.5 s (which renews it), gone 2 s after that */
	token(lus[A], src, 1, 2, tok);
	now_ms += 1500;
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 600, tok, 0, dst, 1, 0, &c), SCSI_GOOD);
	now_ms += 1900;
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 600, tok, 0, dst, 1, 0, &c), SCSI_GOOD);
	now_ms += 2001;
	wut(lus[B], &NX, 600, tok, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2307);   /* TOKEN EXPIRED */
	/* the default (0) is ROD_DEFAULT_TIMEOUT */
	token(lus[A], src, 1, 0, tok);
	now_ms += ROD_DEFAULT_TIMEOUT * 1000 - 1;
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 600, tok, 0, dst, 1, 0, &c), SCSI_GOOD);
	/* the lifetime, however busy */
	for (unsigned i = 0; i < ROD_MAX_LIFETIME / 500; i++) {
		now_ms += 500 * 1000;
		if (wut(lus[B], &NX, 600, tok, 0, dst, 1, 0, &c) != SCSI_GOOD)
			break;
	}
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2307);
	/* an expired token makes room without being used */
	token(lus[A], src, 1, 1, t2);
	now_ms += 5000;
	CU_ASSERT_EQUAL(lus[A]->rod_tokens, 1);
}

static void test_bounds(void)
{
	struct scsi_cmd c;
	uint8_t first[512], tok[512];
	uint64_t src[] = { 1000, 64 }, dst[] = { 6000, 64 };

	clear_ua();
	/* tokens per LU: the least recently used gives way (revoked); the one just used stays */
	token(lus[A], src, 1, 0, first);
	now_ms += 10;
	uint8_t keep[512];
	token(lus[A], src, 1, 0, keep);
	now_ms += 10;
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 700, first, 0, dst, 1, 0, &c), SCSI_GOOD);   /* first is now the newest */
	for (unsigned i = 0; i < ROD_TOKENS_PER_LU; i++) {
		now_ms += 10;
		CU_ASSERT_EQUAL(pt(lus[A], &NX, 701, src, 1, 0, &c), SCSI_GOOD);
	}
	CU_ASSERT_EQUAL(lus[A]->rod_tokens, ROD_TOKENS_PER_LU);
	wut(lus[B], &NX, 700, keep, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2306);
	wut(lus[B], &NX, 700, first, 0, dst, 1, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2306);   /* it went too, 128 newer ones later */
	/* tokens in all: other LUs' count */
	for (unsigned l = B; l <= D; l++)
		for (unsigned i = 0; i < ROD_TOKENS_PER_LU; i++)
			CU_ASSERT_EQUAL(pt(lus[l], &NX, 702, src, 1, 0, &c), SCSI_GOOD);
	CU_ASSERT(lus[A]->rod_tokens + lus[B]->rod_tokens + lus[C]->rod_tokens + lus[D]->rod_tokens <= ROD_TOKENS_MAX);
	/* held results per nexus: the oldest give way */
	for (uint32_t i = 0; i < ROD_HELD_PER_NEXUS + 3; i++)
		CU_ASSERT_EQUAL(pt(lus[B], &NX, 800 + i, src, 1, 0, &c), SCSI_GOOD);
	uint8_t rsp[1024];
	uint32_t got;
	CU_ASSERT_EQUAL(rrti(lus[B], &NX, 800, rsp, &got), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(rrti(lus[B], &NX, 800 + ROD_HELD_PER_NEXUS + 2, rsp, &got), SCSI_GOOD);
	/* the nexus ends: its held results go */
	CU_ASSERT_EQUAL(rrti(lus[B], &NX, 800 + ROD_HELD_PER_NEXUS + 1, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(pt(lus[B], &NX, 900, src, 1, 0, &c), SCSI_GOOD);
	scsi_lu_event(lus[B], &NX, SCSI_EV_NEXUS_LOSS, NULL);
	CU_ASSERT_EQUAL(rrti(lus[B], &NX, 900, rsp, &got), SCSI_CHECK_CONDITION);
	clear_ua();
	/* too many ranges in a command: TOO MANY SEGMENT DESCRIPTORS */
	uint64_t r[2 * 65];
	for (unsigned i = 0; i < 65; i++) {
		r[2 * i] = 10 * i;
		r[2 * i + 1] = 2;
	}
	pt(lus[A], &NX, 901, r, 65, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);   /* past the longest list */
	token(lus[A], r, 64, 0, tok);
	wut(lus[B], &NX, 901, tok, 0, r, 64, 0, &c);
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
}

/* Copies that take their time: abort, cancel mid-copy, a running list identifier. */
static void test_async(void)
{
	struct scsi_cmd c, s;
	uint8_t tok[512], rsp[1024];
	uint32_t got;
	const struct bs_ops *oa = bstore[A]->ops, *ob = bstore[B]->ops;
	uint64_t src[] = { 0, 12000 }, dst[] = { 0, 12000 };

	clear_ua();
	medium_fill(bstore[A], 0, 12000, 0x44);
	medium_fill(bstore[B], 0, 12000, 0x55);
	token(lus[A], src, 1, 0, tok);
	bstore[A]->ops = &slow_ops;
	bstore[B]->ops = &slow_ops;

	/* running: RRTI says so, the same list identifier is refused, the admin sees A used */
	static uint8_t p[ROD_MAX_WUT_LIST];
	uint8_t cdb[16] = { 0x83, ROD_SA_WUT };
	uint32_t len = wut_list(p, tok, 0, dst, 1, 0);
	put_be32(cdb + 6, 1000);
	put_be32(cdb + 10, len);
	sh_cmd_init(&c, lus[B], cdb, 16, len, false, true);
	npending = 0;
	CU_ASSERT_FATAL(sh_start(&c, p, len));
	CU_ASSERT_EQUAL(sh_ndone, 0);
	CU_ASSERT_EQUAL(npending, COPY_INFLIGHT);
	for (int i = 0; i < 6; i++)
		complete_one();
	CU_ASSERT_EQUAL_FATAL(rrti(lus[B], &NX, 1000, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(rsp[5], 0x11);
	CU_ASSERT_EQUAL(get_be32(rsp + 8), 100);
	CU_ASSERT(get_be64(rsp + 16) > 0 && get_be64(rsp + 16) < 12000);
	CU_ASSERT(scsi_cmd_uses_lu(&c, lus[A]));
	CU_ASSERT_FALSE(scsi_cmd_uses_lu(&c, lus[C]));
	sh_cmd_init(&s, lus[B], cdb, 16, len, false, true);
	int saved = sh_ndone;
	sh_start(&s, p, len);
	expect_sense(&s, SK_ILLEGAL_REQUEST, 0x0016);   /* OPERATION IN PROGRESS */
	scsi_cmd_release(&s);
	sh_ndone = saved;
	/* aborted: what is in flight completes, nothing new starts */
	c.stop = true;
	for (int i = 0; i < 100 && complete_one(); i++)
		;
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT_EQUAL(c.status, SCSI_TASK_ABORTED);
	CU_ASSERT_EQUAL(npending, 0);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
	CU_ASSERT_EQUAL_FATAL(rrti(lus[B], &NX, 1000, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(rsp[5], 0x60);   /* terminated */
	CU_ASSERT_EQUAL(rsp[12], SCSI_TASK_ABORTED);

	/* a write over the source while the copy runs: it stops before the next chunk, COPY ABORTED, TOKEN CANCELLED */
	sh_cmd_init(&c, lus[B], cdb, 16, len, false, true);
	CU_ASSERT_FATAL(sh_start(&c, p, len));
	complete_one();
	bstore[A]->ops = oa;
	uint8_t blk[512] = { 0 }, w10[16] = { 0x2a, 0, 0, 0, 0x20, 0, 0, 0, 1 };   /* LBA 8192 */
	CU_ASSERT_EQUAL(run(&s, &NX2, lus[A], w10, 512, false, blk, 512), SCSI_GOOD);
	sh_ndone = 0;
	bstore[A]->ops = &slow_ops;
	for (int i = 0; i < 100 && complete_one(); i++)
		;
	CU_ASSERT_EQUAL(sh_ndone, 1);
	expect_sense(&c, SK_COPY_ABORTED, 0x2308);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL_FATAL(rrti(lus[B], &NX, 1000, rsp, &got), SCSI_GOOD);
	CU_ASSERT_EQUAL(rsp[5], 0x02);
	CU_ASSERT(rsp[13] >= 18);   /* the sense data, as the command got it */
	CU_ASSERT(get_be64(rsp + 16) < 12000);
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);

	/* the nexus goes while a copy runs: its result is not held afterwards */
	token(lus[A], src, 1, 0, tok);
	len = wut_list(p, tok, 0, dst, 1, 0);
	sh_cmd_init(&c, lus[B], cdb, 16, len, false, true);
	CU_ASSERT_FATAL(sh_start(&c, p, len));
	scsi_lu_event(lus[B], &NX, SCSI_EV_NEXUS_LOSS, NULL);
	c.stop = true;
	for (int i = 0; i < 100 && complete_one(); i++)
		;
	CU_ASSERT_EQUAL(sh_ndone, 1);
	scsi_cmd_release(&c);
	bstore[A]->ops = oa;
	bstore[B]->ops = ob;
	clear_ua();
	CU_ASSERT_EQUAL(rrti(lus[B], &NX, 1000, rsp, &got), SCSI_CHECK_CONDITION);
	/* and the token is free again: a copy runs to the end */
	CU_ASSERT_EQUAL(wut(lus[B], &NX, 1001, tok, 0, dst, 1, 0, &c), SCSI_GOOD);
	CU_ASSERT(medium_same(bstore[A], 0, bstore[B], 0, 12000));
	/* DEL_TKN on a copy whose token is revoked after its last chunk was read: it ends well, nothing stays */
	uint64_t one[] = { 0, 8 };
	uint8_t small[512];
	token(lus[A], one, 1, 0, small);
	bstore[A]->ops = &slow_ops;
	bstore[B]->ops = &slow_ops;
	len = wut_list(p, small, 0, one, 1, 0x02);
	put_be32(cdb + 10, len);
	put_be32(cdb + 6, 1002);
	sh_cmd_init(&s, lus[B], cdb, 16, len, false, true);
	CU_ASSERT_FATAL(sh_start(&s, p, len));
	complete_one();   /* the read: the chunk may be written */
	CU_ASSERT_EQUAL(npending, 1);
	scsi_lu_event(lus[A], &NX2, SCSI_EV_LU_RESET, NULL);
	complete_one();   /* the write */
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT_EQUAL(s.status, SCSI_GOOD);
	scsi_cmd_release(&s);
	bstore[A]->ops = oa;
	bstore[B]->ops = ob;
	clear_ua();
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
}

/* An LU goes (the admin removed it): its tokens go with it. */
static void test_lu_gone(void)
{
	struct scsi_cmd c;
	char err[256];
	struct backstore *bs;
	struct scsi_lu *lu;
	struct backstore_cfg cfg = { .name = "gone", .type = BACKSTORE_RAM, .size = 1 << 20, .block_size = 512 };
	uint64_t src[] = { 0, 8 };

	CU_ASSERT_FATAL(backstore_open(&cfg, &bs, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(bs, NULL, &lu) == 0);
	for (int i = 0; i < 4; i++)
		pt(lu, &NX, 5, src, 1, 0, &c);
	CU_ASSERT(lu->rod_tokens >= 1);   /* the first PTs meet the power-on unit attention */
	scsi_lu_destroy(lu);
	backstore_close(bs);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("rod", setup, teardown);
	CU_add_test(s, "parse_pt", test_parse_pt);
	CU_add_test(s, "parse_wut", test_parse_wut);
	CU_add_test(s, "vpd", test_vpd);
	CU_add_test(s, "token_and_rrti", test_token_and_rrti);
	CU_add_test(s, "copy", test_copy);
	CU_add_test(s, "refusals", test_refusals);
	CU_add_test(s, "invalidation", test_invalidation);
	CU_add_test(s, "expiry", test_expiry);
	CU_add_test(s, "bounds", test_bounds);
	CU_add_test(s, "async", test_async);
	CU_add_test(s, "lu_gone", test_lu_gone);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
