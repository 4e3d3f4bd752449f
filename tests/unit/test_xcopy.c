/*
 * Third-party copy: the EXTENDED COPY parameter-list parser against hostile
 * lists, then whole commands through the SCSI layer against RAM LUs behind
 * a LUN map (copies within and across LUs, overlapping ranges, every
 * refusal), RECEIVE COPY RESULTS, VPD 8Fh, and a backstore that completes
 * later (the in-flight window, a second copy of a running list identifier,
 * an abort mid-copy) or fails (COPY ABORTED).  Commands run without a
 * reactor (but one, which checks the copy's yields); every buffer must be
 * back in the pool at the end.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/reactor.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/backstore/backstore_impl.h"
#include "target/scsi/copy/copy.h"
#include "target/scsi/scsi_int.h"
#include "target/scsi/copy/xcopy.h"
#include "sense_check.h"

#include "medium.h"
#include "scsi_harness.h"
#include "unit_run.h"

#define NBLK 16384u   /* 8 MiB of 512-byte blocks */

enum { A, B, C, D, NLU };   /* C has 4096-byte blocks; D is not mapped */
static struct backstore *bstore[NLU];
static struct scsi_lu *lus[NLU];
static uint8_t naa[NLU][16];
static struct scsi_nexus NX = { .initiator_name = "iqn.test:i", .initiator_port = "iqn.test:i,i,0x000000000001",
				.target_name = "iqn.test:t", .target_port = "iqn.test:t,t,0x0001", .rel_port_id = 1,
				.id = 1 };
static struct scsi_nexus NX2 = { .initiator_name = "iqn.test:j", .initiator_port = "iqn.test:j,i,0x000000000002",
				 .id = 2 };

/* The nexus's LUN map: LUN i is lus[i] for A, B, C; map_ro[i] makes it read-only. */
static const uint64_t map_luns[] = { 0, 1, 2 };
static bool map_ro[3];
static struct scsi_lu *map_lu_at(const struct scsi_lun_map *m, uint32_t i, bool *ro)
{
	(void)m;
	*ro = map_ro[i];
	return i < 3 ? lus[i] : NULL;
}
static struct scsi_lun_map MAP = { .count = 3, .luns = map_luns, .lu_at = map_lu_at };

static uint8_t xcopy_on(struct scsi_lu *lu, const uint8_t *list, uint32_t len, struct scsi_cmd *c)
{
	uint8_t cdb[16] = { 0x83 };
	put_be32(cdb + 10, len);
	sh_cmd_init(c, lu, cdb, 16, len, false, len > 0);
	if (sh_start(c, list, len))
		CU_ASSERT_EQUAL(sh_ndone, 1);
	return c->status;
}

/* ---- parameter lists ---- */

static uint32_t tgt(uint8_t *d, int lu)
{
	memset(d, 0, 32);
	d[0] = 0xe4;
	d[4] = 0x01;   /* binary */
	d[5] = 0x03;   /* LU association, NAA */
	d[7] = 16;
	memcpy(d + 8, naa[lu], 16);
	put_be24(d + 29, backstore_block_size(bstore[lu]));
	return 32;
}

static uint32_t seg(uint8_t *d, uint16_t src, uint16_t dst, uint16_t n, uint64_t sl, uint64_t dl)
{
	memset(d, 0, 28);
	d[0] = 0x02;
	put_be16(d + 2, 0x18);
	put_be16(d + 4, src);
	put_be16(d + 6, dst);
	put_be16(d + 10, n);
	put_be64(d + 12, sl);
	put_be64(d + 20, dl);
	return 28;
}

static void hdr(uint8_t *p, uint8_t list_id, uint8_t usage, uint32_t tdl, uint32_t sdl)
{
	memset(p, 0, 16);
	p[0] = list_id;
	p[1] = (uint8_t)(usage << 3);
	put_be16(p + 2, (uint16_t)tdl);
	put_be32(p + 8, sdl);
}

/* A list naming copy targets t[0..nt) and one segment src->dst. */
static uint32_t list1(uint8_t *p, const int *t, int nt, uint16_t src, uint16_t dst, uint16_t n, uint64_t sl,
		      uint64_t dl)
{
	uint32_t off = 16;
	for (int i = 0; i < nt; i++)
		off += tgt(p + off, t[i]);
	uint32_t tdl = off - 16;
	off += seg(p + off, src, dst, n, sl, dl);
	hdr(p, 0, XCOPY_USAGE_NONE, tdl, off - 16 - tdl);
	return off;
}

/* ---- a backstore that completes when the test says (or fails) ---- */

static struct bs_ops slow_ops;
static struct bs_io *pending[64];   /* io->bs says which backstore */
static unsigned npending, max_pending;
static int fail_op = -1, fail_after;   /* fail the fail_after'th request of op fail_op (0 = next) */

static void slow_submit(struct backstore *bs, struct bs_io *io)
{
	if ((int)io->op == fail_op && fail_after-- == 0) {
		fail_op = -1;
		bs_complete(io, -EIO);
		return;
	}
	if (npending < 64)
		pending[npending++] = io;
	if (npending > max_pending)
		max_pending = npending;
	(void)bs;
}

/* Complete the oldest pending request (it may queue more). */
static bool complete_one(int lu)
{
	if (!npending)
		return false;
	struct bs_io *io = pending[0];
	memmove(pending, pending + 1, --npending * sizeof(pending[0]));
	(void)lu;
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
		snprintf(name, sizeof(name), "x%d", i);
		struct backstore_cfg cfg = { .name = name, .type = BACKSTORE_RAM, .size = (uint64_t)NBLK * 512,
					     .block_size = bsz[i], .write_cache = true };
		if (backstore_open(&cfg, &bstore[i], err, sizeof(err)) < 0)
			return -1;
		struct scsi_lu_params p = { .name = name };
		if (scsi_lu_create(bstore[i], &p, &lus[i]))
			return -1;
	}
	slow_ops = bs_ram_ops;
	slow_ops.submit = slow_submit;
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

/* The NAA designator each LU reports in VPD 83h: what an initiator puts in a CSCD descriptor. */
static void test_naa_from_vpd(void)
{
	for (int l = 0; l < NLU; l++) {
		struct scsi_cmd c;
		uint8_t inq[6] = { 0x12, 0x01, 0x83, 0x01, 0x00 };
		bool found = false;
		sh_cmd_init(&c, lus[l], inq, 6, 256, true, false);
		/* A fresh LU has a power-on unit attention for every nexus: INQUIRY runs through it. */
		CU_ASSERT_FATAL(sh_start(&c, NULL, 0));
		CU_ASSERT_EQUAL_FATAL(c.status, SCSI_GOOD);
		const uint8_t *p = c.buf->data;
		for (uint32_t off = 4; off + 4 <= c.din_len; off += 4 + p[off + 3]) {
			if ((p[off + 1] & 0x3f) == 0x03 && p[off + 3] == 16) {
				memcpy(naa[l], p + off + 4, 16);
				found = true;
			}
		}
		CU_ASSERT(found);
		scsi_cmd_release(&c);
		/* Clear the unit attention the LU holds for this nexus. */
		uint8_t tur[6] = { 0 };
		for (int i = 0; i < 4; i++) {
			sh_cmd_init(&c, lus[l], tur, 6, 0, false, false);
			sh_start(&c, NULL, 0);
			scsi_cmd_release(&c);
		}
	}
}

/* ---- the parser alone, with hostile lists ---- */

static void expect_parse(const uint8_t *p, uint32_t len, uint8_t key, uint16_t a, int field)
{
	struct xcopy_list *l = malloc(sizeof(*l));
	struct xcopy_err e = { 0 };
	int rc = xcopy_parse(p, len, l, &e);
	CU_ASSERT_EQUAL(rc, -1);
	CU_ASSERT_EQUAL(e.key, key);
	CU_ASSERT_EQUAL(e.asc, a);
	if (field >= 0)
		CU_ASSERT_EQUAL(e.field, field);
	if (rc != -1 || e.asc != a || (field >= 0 && e.field != field))
		fprintf(stderr, "  parse: rc %d asc %04x field %u, want %04x field %d\n", rc, e.asc, e.field, a, field);
	free(l);
}

static void test_parse_hostile(void)
{
	static uint8_t p[4096];
	struct xcopy_list *l = malloc(sizeof(*l));
	struct xcopy_err e;
	int two[2] = { A, B };
	uint32_t len;

	/* a good list parses */
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	CU_ASSERT_EQUAL(xcopy_parse(p, len, l, &e), 0);
	CU_ASSERT_EQUAL(l->ntgt, 2);
	CU_ASSERT_EQUAL(l->nseg, 1);
	CU_ASSERT_EQUAL(l->seg[0].nblocks, 8);

	/* shorter than the header, or the header's lengths past the list */
	for (uint32_t n = 1; n < 16; n++)
		expect_parse(p, n, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR, -1);
	expect_parse(p, len - 1, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR, -1);
	expect_parse(p, 16 + 63, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR, -1);
	/* lengths that wrap in 32 bits */
	put_be32(p + 8, 0xffffffffu);
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR, -1);
	put_be16(p + 2, 0xffff);
	put_be32(p + 8, 0xffffffffu - 0xfffe);
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR, -1);
	/* descriptors longer than MAXIMUM DESCRIPTOR LIST LENGTH, even in a list that long */
	hdr(p, 0, 3, 32, XCOPY_MAX_DESC_LIST);
	expect_parse(p, sizeof(p), SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR, -1);

	/* zero lengths: no descriptors at all is a valid (empty) list */
	hdr(p, 0, 3, 0, 0);
	CU_ASSERT_EQUAL(xcopy_parse(p, 16, l, &e), 0);
	CU_ASSERT_EQUAL(l->ntgt + l->nseg, 0);

	/* too many CSCD descriptors */
	uint32_t off = 16;
	for (unsigned i = 0; i <= XCOPY_MAX_TGT_DESCS; i++)
		off += tgt(p + off, A);
	uint32_t tdl = off - 16;
	off += seg(p + off, 0, 0, 1, 0, 1);
	hdr(p, 0, 3, tdl, 28);
	expect_parse(p, off, SK_ILLEGAL_REQUEST, 0x2606, 2);

	/* too many segment descriptors */
	off = 16 + tgt(p + 16, A);
	for (unsigned i = 0; i <= XCOPY_MAX_SEG_DESCS; i++)
		off += seg(p + off, 0, 0, 1, 0, 1);
	hdr(p, 0, 3, 32, off - 48);
	expect_parse(p, off, SK_ILLEGAL_REQUEST, 0x2608, 8);

	/* unknown CSCD descriptor types: Fibre Channel (E0h), IPv6 (EAh), garbage */
	static const uint8_t ttypes[] = { 0xe0, 0xea, 0x00, 0xff };
	for (unsigned i = 0; i < sizeof(ttypes); i++) {
		len = list1(p, two, 2, 0, 1, 8, 0, 0);
		p[16 + 32] = ttypes[i];
		expect_parse(p, len, SK_ILLEGAL_REQUEST, 0x2607, 48);
	}
	/* a CSCD list that ends inside a descriptor */
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	put_be16(p + 2, 40);
	put_be32(p + 8, 20);
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 2);
	/* designator longer than the descriptor holds; not a block device */
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	p[16 + 7] = 21;
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 16 + 7);
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	p[16 + 1] = 0x01;
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 16 + 1);

	/* unknown segment descriptor types: stream to stream (03h), block to block with offsets (0Ah), garbage */
	static const uint8_t stypes[] = { 0x03, 0x0a, 0x1f, 0xbe };
	for (unsigned i = 0; i < sizeof(stypes); i++) {
		len = list1(p, two, 2, 0, 1, 8, 0, 0);
		p[80] = stypes[i];
		expect_parse(p, len, SK_ILLEGAL_REQUEST, 0x2609, 80);
	}
	/* a segment descriptor whose length runs past the list, is wrong for its type, or is cut */
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	put_be16(p + 82, 0x19);
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 82);
	put_be16(p + 82, 0xffff);
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 82);
	put_be16(p + 82, 0x10);
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 82);
	put_be16(p + 82, 0x00);
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 82);
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	put_be32(p + 8, 3);   /* a segment list too short for a descriptor header */
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 8);

	/* header fields: reserved LIST ID USAGE, a list identifier with 11b, inline data */
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	p[1] = 1 << 3;
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 1);
	p[1] = 3 << 3;
	p[0] = 7;
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 0);
	p[0] = 0;
	put_be32(p + 12, 4);
	expect_parse(p, len, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 12);

	/* random lists never crash the parser nor give counts past the maxima */
	srand(7);
	for (int i = 0; i < 20000; i++) {
		uint32_t n = (uint32_t)rand() % 800 + 1;
		for (uint32_t k = 0; k < n; k++)
			p[k] = (uint8_t)rand();
		if (i & 1) {   /* plausible lengths, so the walk goes deep */
			put_be16(p + 2, (uint16_t)((rand() % 9) * 32));
			put_be32(p + 8, (uint32_t)(rand() % 500));
			put_be32(p + 12, 0);
			p[1] &= ~0x08;
		}
		if (xcopy_parse(p, n, l, &e) == 0) {
			CU_ASSERT(l->ntgt <= XCOPY_MAX_TGT_DESCS);
			CU_ASSERT(l->nseg <= XCOPY_MAX_SEG_DESCS);
		} else {
			CU_ASSERT(e.key == SK_ILLEGAL_REQUEST);
		}
	}
	free(l);
}

/* ---- copies ---- */

static void test_copy_within_and_across(void)
{
	static uint8_t p[XCOPY_MAX_PARAM_LEN];
	struct scsi_cmd c;
	int one[1] = { A }, two[2] = { A, B };
	uint32_t len;

	medium_fill(bstore[A], 0, 4000, 0x11);
	medium_fill(bstore[B], 0, NBLK, 0x22);
	/* within A: 100 blocks from 0 to 10000 */
	len = list1(p, one, 1, 0, 0, 100, 0, 10000);
	CU_ASSERT_EQUAL(xcopy_on(lus[A], p, len, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT(medium_same(bstore[A], 0, bstore[A], 10000, 100));
	/* across: A to B, several chunks (3.5 MiB), asked of A or of B: either is the copy manager */
	len = list1(p, two, 2, 0, 1, 7168, 0, 9000);
	CU_ASSERT_EQUAL(xcopy_on(lus[A], p, len, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT(medium_same(bstore[A], 0, bstore[B], 9000, 7168));
	medium_fill(bstore[A], 0, 4000, 0x33);
	CU_ASSERT_EQUAL(xcopy_on(lus[B], p, len, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT(medium_same(bstore[A], 0, bstore[B], 9000, 4000));
	/* B to A, the descriptors in the other order, two segments */
	uint32_t off = 16 + tgt(p + 16, B) + tgt(p + 48, A);
	off += seg(p + off, 0, 1, 50, 9000, 12000);
	off += seg(p + off, 0, 1, 0, 0, 0);   /* zero blocks: nothing */
	off += seg(p + off, 0, 1, 3, 9500, 12100);
	hdr(p, 0, 3, 64, off - 80);
	CU_ASSERT_EQUAL(xcopy_on(lus[C], p, off, &c), SCSI_GOOD);   /* C manages, copies nothing of its own */
	scsi_cmd_release(&c);
	CU_ASSERT(medium_same(bstore[B], 9000, bstore[A], 12000, 50));
	CU_ASSERT(medium_same(bstore[B], 9500, bstore[A], 12100, 3));
	/* the whole copy arrived; no buffer is left */
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
	/* parameter list length 0: nothing happens, GOOD */
	CU_ASSERT_EQUAL(xcopy_on(lus[A], p, 0, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
}

/*
 * RAM completes inline, so a copy yields to its reactor every
 * COPY_YIELD_BYTES by itself: 64 MiB take several loop iterations, not one
 * call (pump() re-entering step() after an inline completion once skipped
 * every yield after the first).
 */
static void test_ram_copy_yields(void)
{
	static uint8_t p[XCOPY_MAX_PARAM_LEN];
	struct scsi_cmd c;
	struct reactor *r = reactor_create(0, REACTOR_EVENT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	uint32_t off = 16 + tgt(p + 16, A) + tgt(p + 48, B);
	for (int i = 0; i < 8; i++)
		off += seg(p + off, 0, 1, NBLK, 0, 0);   /* 8 MiB each */
	hdr(p, 0, XCOPY_USAGE_NONE, 64, off - 80);
	uint8_t cdb[16] = { 0x83 };
	put_be32(cdb + 10, off);
	sh_cmd_init(&c, lus[A], cdb, 16, off, false, true);
	c.reactor = r;
	CU_ASSERT_TRUE_FATAL(sh_start(&c, p, off));
	CU_ASSERT_EQUAL(sh_ndone, 0);   /* the first 8 MiB, then a yield */
	int iters = 0;
	while (!sh_ndone && iters < 100) {
		reactor_poll_once(r, 0);
		iters++;
	}
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	CU_ASSERT(iters >= 3);   /* 8 yields; reactor_poll_once() runs two rounds of deferred calls */
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(bufpool_in_use(reactor_bufpool(r)), 0);
	reactor_destroy(r);
}

/* Overlapping ranges of one LU copy as memmove would, in both directions, across chunks. */
static void test_copy_overlap(void)
{
	static uint8_t p[256];
	struct scsi_cmd c;
	int one[1] = { A };
	const uint32_t n = 5000;   /* > 2 chunks of 2048 blocks */

	for (int dir = 0; dir < 2; dir++) {
		uint64_t src = dir ? 3000 : 1000, dst = dir ? 1000 : 3000;
		medium_fill(bstore[A], 0, 9000, (uint8_t)(0x40 + dir));
		uint8_t *want = medium_readback(bstore[A], src, n);
		uint32_t len = list1(p, one, 1, 0, 0, (uint16_t)n, src, dst);
		CU_ASSERT_EQUAL(xcopy_on(lus[A], p, len, &c), SCSI_GOOD);
		scsi_cmd_release(&c);
		uint8_t *got = medium_readback(bstore[A], dst, n);
		CU_ASSERT(!memcmp(want, got, (size_t)n * 512));
		free(want);
		free(got);
	}
}

static void test_refusals(void)
{
	static uint8_t p[XCOPY_MAX_PARAM_LEN + 64];
	struct scsi_cmd c;
	int one[1] = { A }, two[2] = { A, B }, ac[2] = { A, C }, ad[2] = { A, D };
	uint32_t len;

	medium_fill(bstore[B], 0, 100, 0x55);
	uint8_t *before = medium_readback(bstore[B], 0, 100);

	/* a destination mapped read-only, from any copy manager; the source may be read-only */
	map_ro[B] = true;
	len = list1(p, two, 2, 0, 1, 10, 0, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	scsi_cmd_release(&c);
	len = list1(p, two, 2, 1, 0, 10, 0, 5000);
	CU_ASSERT_EQUAL(xcopy_on(lus[B], p, len, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	map_ro[B] = false;
	/* SWP on the destination */
	lu_flag_set(&lus[B]->swp, true);
	len = list1(p, two, 2, 0, 1, 10, 0, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	scsi_cmd_release(&c);
	lu_flag_set(&lus[B]->swp, false);

	/* a copy target another nexus holds a WRITE EXCLUSIVE reservation on: conflict to write, not to read */
	uint8_t reg[24] = { 0 }, cdb[10] = { 0x5f, 0x00 };
	put_be64(reg + 8, 0xabc);
	put_be32(cdb + 5, 24);
	sh_cmd_init(&c, lus[B], cdb, 10, 24, false, true);
	c.nexus = &NX2;
	CU_ASSERT(sh_start(&c, reg, 24));
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	scsi_cmd_release(&c);
	memset(reg, 0, sizeof(reg));
	put_be64(reg, 0xabc);
	cdb[1] = 0x01;
	cdb[2] = 0x01;   /* RESERVE, WRITE EXCLUSIVE */
	sh_cmd_init(&c, lus[B], cdb, 10, 24, false, true);
	c.nexus = &NX2;
	CU_ASSERT(sh_start(&c, reg, 24));
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	scsi_cmd_release(&c);
	len = list1(p, two, 2, 0, 1, 10, 0, 0);
	CU_ASSERT_EQUAL(xcopy_on(lus[A], p, len, &c), SCSI_RESERVATION_CONFLICT);
	scsi_cmd_release(&c);
	len = list1(p, two, 2, 1, 0, 10, 0, 5000);
	CU_ASSERT_EQUAL(xcopy_on(lus[A], p, len, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	memset(reg, 0, sizeof(reg));
	put_be64(reg, 0xabc);
	cdb[1] = 0x03;   /* CLEAR */
	cdb[2] = 0;
	sh_cmd_init(&c, lus[B], cdb, 10, 24, false, true);
	c.nexus = &NX2;
	CU_ASSERT(sh_start(&c, reg, 24));
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	scsi_cmd_release(&c);

	/* past the end of the source, then of the destination: COPY ABORTED, segment 0, the LBA field */
	len = list1(p, two, 2, 0, 1, 10, NBLK - 5, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_COPY_ABORTED, 0x0000);
	CU_ASSERT_EQUAL(c.sense[15], 0x80 | 0x20);   /* SKSV, SD: the pointer is into the segment descriptor */
	CU_ASSERT_EQUAL(field_ptr(&c), 12);
	CU_ASSERT_EQUAL(get_be32(c.sense + 8), 0);
	scsi_cmd_release(&c);
	len = list1(p, two, 2, 0, 1, 10, 0, NBLK - 9);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_COPY_ABORTED, 0x0000);
	CU_ASSERT_EQUAL(field_ptr(&c), 20);
	scsi_cmd_release(&c);
	/* an LBA that wraps with the count */
	len = list1(p, two, 2, 0, 1, 10, UINT64_MAX - 3, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_COPY_ABORTED, 0x0000);
	scsi_cmd_release(&c);
	/* the second segment fails: its number is reported, and the first was not copied either */
	uint32_t off = 16 + tgt(p + 16, A) + tgt(p + 48, B);
	off += seg(p + off, 0, 1, 10, 0, 20);
	off += seg(p + off, 0, 1, 10, NBLK, 0);
	hdr(p, 0, 3, 64, off - 80);
	xcopy_on(lus[A], p, off, &c);
	expect_sense(&c, SK_COPY_ABORTED, 0x0000);
	CU_ASSERT_EQUAL(get_be32(c.sense + 8), 1);
	scsi_cmd_release(&c);

	/* a descriptor index past the CSCD list; an LU not mapped to the nexus; an unknown designator */
	len = list1(p, two, 2, 0, 2, 10, 0, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_COPY_ABORTED, 0x0d02);
	CU_ASSERT_EQUAL(field_ptr(&c), 6);
	scsi_cmd_release(&c);
	len = list1(p, ad, 2, 0, 1, 10, 0, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_COPY_ABORTED, 0x0d02);
	scsi_cmd_release(&c);
	len = list1(p, ad, 2, 1, 0, 10, 0, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_COPY_ABORTED, 0x0d02);
	CU_ASSERT_EQUAL(field_ptr(&c), 4);
	scsi_cmd_release(&c);
	len = list1(p, two, 2, 0, 1, 10, 0, 0);
	p[16 + 32 + 20] ^= 0xff;
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_COPY_ABORTED, 0x0d02);
	scsi_cmd_release(&c);
	/* without a LUN map only the addressed LU is reachable */
	len = list1(p, two, 2, 0, 1, 10, 0, 0);
	sh_cmd_init(&c, lus[A], (uint8_t[16]){ 0x83, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (uint8_t)len }, 16, len, false,
		 true);
	c.lun_map = NULL;
	sh_start(&c, p, len);
	expect_sense(&c, SK_COPY_ABORTED, 0x0d02);
	scsi_cmd_release(&c);

	/* block sizes: 512 to 4096 is refused, and so is a DISK BLOCK LENGTH that is not the LU's */
	len = list1(p, ac, 2, 0, 1, 8, 0, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(field_ptr(&c), 80 + 6);
	scsi_cmd_release(&c);
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	put_be24(p + 48 + 29, 4096);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(field_ptr(&c), 48 + 29);
	scsi_cmd_release(&c);

	/* a segment longer than MAXIMUM SEGMENT LENGTH */
	len = list1(p, two, 2, 0, 1, (uint16_t)(XCOPY_MAX_SEG_BYTES / 512 + 1), 0, 0);
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(field_ptr(&c), 80 + 10);
	scsi_cmd_release(&c);

	/* the parameter list: longer than the maximum (refused before any Data-Out), shorter than announced */
	uint8_t big[16] = { 0x83 };
	put_be32(big + 10, XCOPY_MAX_PARAM_LEN + 1);
	sh_cmd_init(&c, lus[A], big, 16, XCOPY_MAX_PARAM_LEN + 1, false, true);
	CU_ASSERT_FALSE(scsi_cmd_prepare(&c));
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
	CU_ASSERT_PTR_NULL(c.buf);
	scsi_cmd_release(&c);
	len = list1(p, two, 2, 0, 1, 8, 0, 0);
	put_be32(big + 10, len);
	sh_cmd_init(&c, lus[A], big, 16, len - 1, false, true);
	sh_start(&c, p, len);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
	scsi_cmd_release(&c);
	/* an unknown segment type through the whole command */
	len = list1(p, one, 1, 0, 0, 8, 0, 0);
	p[48] = 0x0a;
	xcopy_on(lus[A], p, len, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, 0x2609);
	scsi_cmd_release(&c);
	/* EXTENDED COPY (LID4) is not supported */
	uint8_t lid4[16] = { 0x83, 0x01 };
	sh_cmd_init(&c, lus[A], lid4, 16, 0, false, false);
	CU_ASSERT_FALSE(scsi_cmd_prepare(&c));
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	scsi_cmd_release(&c);

	/* nothing of the refused copies reached B */
	uint8_t *after = medium_readback(bstore[B], 0, 100);
	CU_ASSERT(!memcmp(before, after, 100 * 512));
	free(before);
	free(after);
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
}

/* ---- RECEIVE COPY RESULTS, VPD 8Fh, INQUIRY ---- */

static uint8_t rcr(uint8_t sa, uint8_t list_id, uint32_t alloc, struct scsi_cmd *c)
{
	uint8_t cdb[16] = { 0x84, sa, list_id };
	int saved = sh_ndone;
	put_be32(cdb + 10, alloc);
	sh_cmd_init(c, lus[A], cdb, 16, alloc, true, false);
	if (sh_start(c, NULL, 0))
		CU_ASSERT_EQUAL(sh_ndone, 1);
	sh_ndone = saved;   /* a copy may be running: its completion is what the caller counts */
	return c->status;
}

static void test_receive_copy_results(void)
{
	static uint8_t p[256];
	struct scsi_cmd c;
	int one[1] = { A };

	/* operating parameters: the limits the parser enforces */
	CU_ASSERT_EQUAL_FATAL(rcr(0x03, 0, 512, &c), SCSI_GOOD);
	const uint8_t *d = c.buf->data;
	CU_ASSERT_EQUAL(c.din_len, 46);
	CU_ASSERT_EQUAL(get_be32(d), 42);
	CU_ASSERT_EQUAL(d[4] & 1, 1);
	CU_ASSERT_EQUAL(get_be16(d + 8), XCOPY_MAX_TGT_DESCS);
	CU_ASSERT_EQUAL(get_be16(d + 10), XCOPY_MAX_SEG_DESCS);
	CU_ASSERT_EQUAL(get_be32(d + 12), XCOPY_MAX_DESC_LIST);
	CU_ASSERT_EQUAL(get_be32(d + 16), XCOPY_MAX_SEG_BYTES);
	CU_ASSERT_EQUAL(get_be32(d + 20), 0);
	CU_ASSERT_EQUAL(d[37], 9);
	CU_ASSERT_EQUAL(d[43], 2);
	CU_ASSERT(d[44] == 0x02 && d[45] == 0xe4);
	scsi_cmd_release(&c);
	/* cut by the allocation length, full length still reported */
	CU_ASSERT_EQUAL(rcr(0x03, 0, 10, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 10);
	CU_ASSERT_EQUAL(get_be32(c.buf->data), 42);
	scsi_cmd_release(&c);

	/* copy status: nothing for list 5, then held after a copy that holds (usage 00b) */
	rcr(0x00, 5, 64, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	scsi_cmd_release(&c);
	uint32_t len = list1(p, one, 1, 0, 0, 64, 0, 100);
	p[0] = 5;
	p[1] = XCOPY_USAGE_HOLD << 3;
	CU_ASSERT_EQUAL(xcopy_on(lus[A], p, len, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL_FATAL(rcr(0x00, 5, 64, &c), SCSI_GOOD);
	d = c.buf->data;
	CU_ASSERT_EQUAL(c.din_len, 12);
	CU_ASSERT_EQUAL(get_be32(d), 8);
	CU_ASSERT_EQUAL(d[4], 0x01);              /* completed, GOOD */
	CU_ASSERT_EQUAL(get_be16(d + 5), 1);      /* one segment */
	CU_ASSERT_EQUAL(d[7], 0x00);              /* bytes */
	CU_ASSERT_EQUAL(get_be32(d + 8), 64 * 512);
	scsi_cmd_release(&c);
	/* another nexus does not see it */
	uint8_t cdb[16] = { 0x84, 0x00, 5 };
	put_be32(cdb + 10, 64);
	sh_cmd_init(&c, lus[A], cdb, 16, 64, true, false);
	c.nexus = &NX2;
	sh_start(&c, NULL, 0);
	CU_ASSERT_EQUAL(c.status, SCSI_CHECK_CONDITION);
	scsi_cmd_release(&c);
	/* usage 10b: not held */
	p[0] = 6;
	p[1] = XCOPY_USAGE_NOHOLD << 3;
	CU_ASSERT_EQUAL(xcopy_on(lus[A], p, len, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	rcr(0x00, 6, 64, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	scsi_cmd_release(&c);
	/* more held results than slots: the oldest give way, the newest stay */
	for (int i = 0; i < XCOPY_IDS_MAX + 3; i++) {
		p[0] = (uint8_t)(20 + i);
		p[1] = XCOPY_USAGE_HOLD << 3;
		CU_ASSERT_EQUAL(xcopy_on(lus[A], p, len, &c), SCSI_GOOD);
		scsi_cmd_release(&c);
	}
	CU_ASSERT_EQUAL(rcr(0x00, 20, 64, &c), SCSI_CHECK_CONDITION);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(rcr(0x00, 20 + XCOPY_IDS_MAX + 2, 64, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	/* service actions not implemented: RECEIVE DATA (01h), FAILED SEGMENT DETAILS (04h) */
	rcr(0x01, 0, 64, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	scsi_cmd_release(&c);
	rcr(0x04, 0, 64, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	scsi_cmd_release(&c);
	/* the nexus ends: its held results go with it */
	scsi_lu_event(lus[A], &NX, SCSI_EV_NEXUS_LOSS, NULL);
	CU_ASSERT_EQUAL(rcr(0x00, 20 + XCOPY_IDS_MAX + 2, 64, &c), SCSI_CHECK_CONDITION);
	scsi_cmd_release(&c);
}

static void test_vpd_and_inquiry(void)
{
	struct scsi_cmd c;
	uint8_t inq[6] = { 0x12, 0x00, 0x00, 0x00, 96 };

	sh_cmd_init(&c, lus[A], inq, 6, 96, true, false);
	sh_start(&c, NULL, 0);
	CU_ASSERT_EQUAL_FATAL(c.status, SCSI_GOOD);
	CU_ASSERT(c.buf->data[5] & 0x08);   /* 3PC */
	scsi_cmd_release(&c);

	uint8_t sup[6] = { 0x12, 0x01, 0x00, 0x00, 255 };
	sh_cmd_init(&c, lus[A], sup, 6, 255, true, false);
	sh_start(&c, NULL, 0);
	bool listed = false;
	for (uint32_t i = 4; i < c.din_len; i++)
		listed |= c.buf->data[i] == 0x8f;
	CU_ASSERT(listed);
	scsi_cmd_release(&c);

	uint8_t tpc[6] = { 0x12, 0x01, 0x8f, 0x04, 0x00 };
	sh_cmd_init(&c, lus[A], tpc, 6, 1024, true, false);
	sh_start(&c, NULL, 0);
	CU_ASSERT_EQUAL_FATAL(c.status, SCSI_GOOD);
	const uint8_t *d = c.buf->data;
	uint32_t plen = get_be16(d + 2), off = 4, seen = 0;
	CU_ASSERT_EQUAL(d[1], 0x8f);
	CU_ASSERT_EQUAL(plen + 4, c.din_len);
	while (off + 4 <= plen + 4) {
		uint16_t type = get_be16(d + off), l = get_be16(d + off + 2);
		CU_ASSERT_EQUAL(l % 4, 0);
		if (type == 0x0001) {
			/* EXTENDED COPY 00h (and POPULATE TOKEN, WRITE USING TOKEN); RECEIVE COPY RESULTS 00h and 03h (and 07h) */
			static const uint8_t want[] = { 10, 0x83, 3, 0x00, 0x10, 0x11, 0x84, 3, 0x00, 0x03, 0x07 };
			CU_ASSERT(!memcmp(d + off + 4, want, sizeof(want)));
			seen |= 1;
		} else if (type == 0x0004) {
			CU_ASSERT_EQUAL(get_be16(d + off + 8), XCOPY_MAX_TGT_DESCS);
			CU_ASSERT_EQUAL(get_be16(d + off + 10), XCOPY_MAX_SEG_DESCS);
			CU_ASSERT_EQUAL(get_be32(d + off + 12), XCOPY_MAX_DESC_LIST);
			seen |= 2;
		} else if (type == 0x0008) {
			CU_ASSERT(d[off + 4] == 2 && d[off + 5] == 0x02 && d[off + 6] == 0xe4);
			seen |= 4;
		} else if (type == 0x8001) {
			CU_ASSERT_EQUAL(get_be32(d + off + 12), XCOPY_MAX_SEG_BYTES);
			seen |= 8;
		}
		off += 4 + l;
	}
	CU_ASSERT_EQUAL(off, plen + 4);   /* the descriptors fill the page exactly */
	CU_ASSERT_EQUAL(seen, 15);
	scsi_cmd_release(&c);

	/* REPORT SUPPORTED OPERATION CODES knows EXTENDED COPY with its CDB usage */
	uint8_t one[12] = { 0xa3, 0x0c, 3, 0x83, 0, 0 };
	put_be32(one + 6, 64);
	sh_cmd_init(&c, lus[A], one, 12, 64, true, false);
	sh_start(&c, NULL, 0);
	CU_ASSERT_EQUAL_FATAL(c.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[1] & 7, 3);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 2), 16);
	CU_ASSERT_EQUAL(c.buf->data[4], 0x83);
	CU_ASSERT_EQUAL(get_be32(c.buf->data + 4 + 10), 0xffffffffu);
	scsi_cmd_release(&c);
}

/* ---- copies that take their time ---- */

static void test_async_window_and_abort(void)
{
	static uint8_t p[256];
	struct scsi_cmd c, c2;
	int two[2] = { A, B };
	const struct bs_ops *ops_a = bstore[A]->ops, *ops_b = bstore[B]->ops;

	medium_fill(bstore[A], 0, 16000, 0x66);
	medium_fill(bstore[B], 0, 16000, 0x77);
	bstore[A]->ops = &slow_ops;
	bstore[B]->ops = &slow_ops;

	/* 8 chunks, completed one request at a time: never more than 4 in flight */
	npending = max_pending = 0;
	uint32_t len = list1(p, two, 2, 0, 1, 16384 - 1, 0, 0);
	p[0] = 9;
	p[1] = XCOPY_USAGE_HOLD << 3;
	uint8_t cdb[16] = { 0x83 };
	put_be32(cdb + 10, len);
	sh_cmd_init(&c, lus[A], cdb, 16, len, false, true);
	CU_ASSERT_FATAL(sh_start(&c, p, len));
	CU_ASSERT_EQUAL(sh_ndone, 0);
	CU_ASSERT_EQUAL(npending, COPY_INFLIGHT);
	CU_ASSERT(bufpool_in_use(scsi_test_pool) <= COPY_INFLIGHT);
	/* while it runs: its status says "in progress", the same list identifier is refused */
	struct scsi_cmd s;
	CU_ASSERT_EQUAL_FATAL(rcr(0x00, 9, 64, &s), SCSI_GOOD);
	CU_ASSERT_EQUAL(s.buf->data[4], 0x00);
	scsi_cmd_release(&s);
	sh_cmd_init(&c2, lus[A], cdb, 16, len, false, true);
	sh_start(&c2, p, len);
	expect_sense(&c2, SK_ILLEGAL_REQUEST, 0x0016);
	CU_ASSERT_EQUAL(sh_ndone, 1);   /* c2's, at once */
	scsi_cmd_release(&c2);
	sh_ndone = 0;
	/* and the LU it writes cannot be removed by the admin (it counts as a user of B) */
	CU_ASSERT(scsi_cmd_uses_lu(&c, lus[B]));
	CU_ASSERT_FALSE(scsi_cmd_uses_lu(&c, lus[D]));
	for (int i = 0; i < 1000 && complete_one(A); i++) {
		CU_ASSERT(npending <= COPY_INFLIGHT);
		CU_ASSERT(bufpool_in_use(scsi_test_pool) <= COPY_INFLIGHT);
	}
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	CU_ASSERT(max_pending <= COPY_INFLIGHT);
	CU_ASSERT_FALSE(scsi_cmd_uses_lu(&c, lus[B]));
	scsi_cmd_release(&c);
	bstore[A]->ops = ops_a;
	bstore[B]->ops = ops_b;
	CU_ASSERT(medium_same(bstore[A], 0, bstore[B], 0, 16384 - 1));
	medium_fill(bstore[B], 0, 16000, 0x78);
	bstore[A]->ops = &slow_ops;
	bstore[B]->ops = &slow_ops;

	/* an abort mid-copy: what is in flight completes, nothing new starts, no buffer stays */
	npending = 0;
	sh_cmd_init(&c, lus[A], cdb, 16, len, false, true);
	CU_ASSERT_FATAL(sh_start(&c, p, len));
	for (int i = 0; i < 3; i++)
		complete_one(A);
	c.stop = true;
	for (int i = 0; i < 100 && complete_one(A); i++)
		;
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT_EQUAL(c.status, SCSI_TASK_ABORTED);
	CU_ASSERT_EQUAL(npending, 0);
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL_FATAL(rcr(0x00, 9, 64, &s), SCSI_GOOD);
	CU_ASSERT_EQUAL(s.buf->data[4], 0x02);   /* completed with an error */
	scsi_cmd_release(&s);
	bstore[A]->ops = ops_a;
	bstore[B]->ops = ops_b;
	uint8_t *tail = medium_readback(bstore[B], 16000 - 8, 8), *want = medium_readback(bstore[A], 16000 - 8, 8);
	CU_ASSERT(memcmp(tail, want, 8 * 512) != 0);   /* the last chunk never moved */
	free(tail);
	free(want);

	/* a write fails in the second chunk: COPY ABORTED, THIRD PARTY DEVICE FAILURE, residual of the segment */
	bstore[A]->ops = &slow_ops;
	bstore[B]->ops = &slow_ops;
	npending = 0;
	fail_op = BS_WRITE;
	fail_after = 1;
	len = list1(p, two, 2, 0, 1, 3 * 2048, 0, 0);
	sh_cmd_init(&c, lus[A], cdb, 16, len, false, true);
	put_be32(c.cdb + 10, len);
	CU_ASSERT_FATAL(sh_start(&c, p, len));
	for (int i = 0; i < 100 && complete_one(A); i++)
		;
	CU_ASSERT_EQUAL(sh_ndone, 1);
	expect_sense(&c, SK_COPY_ABORTED, 0x0d01);
	CU_ASSERT(c.sense[0] & 0x80);   /* VALID: INFORMATION is the residual */
	uint32_t resid = get_be32(c.sense + 3);
	CU_ASSERT(resid >= 2048 && resid <= 3 * 2048);
	CU_ASSERT_EQUAL(get_be32(c.sense + 8), 0);   /* segment 0 */
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
	scsi_cmd_release(&c);
	/* and a read error */
	fail_op = BS_READ;
	fail_after = 0;
	sh_cmd_init(&c, lus[A], cdb, 16, len, false, true);
	put_be32(c.cdb + 10, len);
	CU_ASSERT_FATAL(sh_start(&c, p, len));
	for (int i = 0; i < 100 && complete_one(A); i++)
		;
	CU_ASSERT_EQUAL(sh_ndone, 1);
	expect_sense(&c, SK_COPY_ABORTED, 0x0d01);
	CU_ASSERT_EQUAL(bufpool_in_use(scsi_test_pool), 0);
	scsi_cmd_release(&c);
	fail_op = -1;
	bstore[A]->ops = ops_a;
	bstore[B]->ops = ops_b;
}

/* Descriptor format sense (D_SENSE) carries the segment number in a command-specific descriptor. */
static void test_desc_sense(void)
{
	static uint8_t p[256];
	struct scsi_cmd c;
	int two[2] = { A, B };

	lu_flag_set(&lus[A]->d_sense, true);
	uint32_t off = 16 + tgt(p + 16, A) + tgt(p + 48, B);
	off += seg(p + off, 0, 1, 1, 0, 0);
	off += seg(p + off, 0, 1, 1, 0, 0);
	off += seg(p + off, 0, 1, 10, 0, NBLK);
	hdr(p, 0, 3, 64, off - 80);
	(void)two;
	xcopy_on(lus[A], p, off, &c);
	CU_ASSERT_EQUAL(c.sense[0], 0x72);
	CU_ASSERT_EQUAL(c.sense[1], SK_COPY_ABORTED);
	bool found = false;
	for (uint32_t i = 8; i + 2 <= c.sense_len; i += 2 + c.sense[i + 1])
		if (c.sense[i] == 0x01 && c.sense[i + 1] == 0x0a && get_be64(c.sense + i + 4) == 2)
			found = true;
	CU_ASSERT(found);
	CU_ASSERT_EQUAL(c.sense[7] + 8u, c.sense_len);
	scsi_cmd_release(&c);
	lu_flag_set(&lus[A]->d_sense, false);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("xcopy", setup, teardown);
	CU_add_test(s, "naa_from_vpd", test_naa_from_vpd);
	CU_add_test(s, "parse_hostile", test_parse_hostile);
	CU_add_test(s, "copy_within_and_across", test_copy_within_and_across);
	CU_add_test(s, "copy_overlap", test_copy_overlap);
	CU_add_test(s, "ram_copy_yields", test_ram_copy_yields);
	CU_add_test(s, "refusals", test_refusals);
	CU_add_test(s, "receive_copy_results", test_receive_copy_results);
	CU_add_test(s, "vpd_and_inquiry", test_vpd_and_inquiry);
	CU_add_test(s, "async_window_and_abort", test_async_window_and_abort);
	CU_add_test(s, "desc_sense", test_desc_sense);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
