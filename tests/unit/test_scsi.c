/*
 * SCSI layer tests on a thin RAM LU: sense formats, INQUIRY/VPD, MODE
 * SENSE/SELECT, REPORT LUNS, READ CAPACITY, the read/write path with
 * residuals, UNMAP/WRITE SAME/COMPARE AND WRITE/VERIFY, unit attentions.
 * Commands run without a reactor: the RAM backstore completes inline.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/backstore/backstore_impl.h"
#include "target/scsi/scsi_int.h"
#include "sense_check.h"

#include "scsi_harness.h"
#include "unit_run.h"

#define BS 512u
#define NBLK 2048u

static struct backstore *bstore;
static struct scsi_lu *LU;
static struct scsi_nexus NX = { .initiator_name = "iqn.test:i", .initiator_port = "iqn.test:i,i,0x000000000001",
				.target_name = "iqn.test:t", .target_port = "iqn.test:t,t,0x0001",
				.rel_port_id = 1, .id = 1 };
static struct scsi_nexus NX2 = { .initiator_port = "iqn.test:j,i,0x000000000002", .id = 2 };

/* prepare + Data-Out + exec; returns status.  Caller releases. */
static uint8_t run(struct scsi_cmd *c, const void *dout, uint32_t dlen)
{
	sh_ndone = 0;
	if (!sh_prepare(c, dout, dlen))
		return c->status;
	CU_ASSERT(c->dout_len <= c->edtl);
	scsi_cmd_exec(c);
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT(c->din_len <= c->edtl);
	return c->status;
}

static uint8_t simple_n(const uint8_t *cdb, uint32_t len, uint32_t edtl, struct scsi_cmd *c)
{
	sh_cmd_init(c, LU, cdb, len, edtl, edtl > 0, false);
	return run(c, NULL, 0);
}
#define simple(cdb, edtl, c) simple_n(cdb, sizeof(cdb), edtl, c)

static uint8_t rw10(bool wr, uint32_t lba, uint16_t n, uint32_t edtl, void *data, struct scsi_cmd *c)
{
	uint8_t cdb[10] = { wr ? 0x2a : 0x28 };
	put_be32(cdb + 2, lba);
	put_be16(cdb + 7, n);
	sh_cmd_init(c, LU, cdb, 10, edtl, !wr, wr);
	uint8_t st = run(c, data, edtl);
	if (!wr && st == SCSI_GOOD && data && c->din_len)
		memcpy(data, c->buf->data, c->din_len);
	scsi_cmd_release(c);
	return st;
}

static void clear_ua(void)
{
	struct scsi_cmd c;
	uint8_t tur[6] = { 0 };
	for (int i = 0; i < 10 && simple(tur, 0, &c) != SCSI_GOOD; i++)
		scsi_cmd_release(&c);
	scsi_cmd_release(&c);
}

static int setup(void)
{
	struct backstore_cfg cfg = { .name = "r0", .type = BACKSTORE_RAM, .size = (uint64_t)NBLK * BS,
				     .block_size = BS, .thin = true, .write_cache = true };
	char err[256];
	if (sh_pool_open() || backstore_open(&cfg, &bstore, err, sizeof(err)) < 0)
		return -1;
	sh_nexus = &NX;
	struct scsi_lu_params p = { .serial = "SER123", .name = "r0" };
	return scsi_lu_create(bstore, &p, &LU);
}

static int teardown(void)
{
	scsi_lu_destroy(LU);
	backstore_close(bstore);
	return sh_pool_close();
}

/* --- sense --- */

static void test_sense_formats(void)
{
	struct scsi_cmd c;
	uint8_t cdb[16] = { 0xc7 };

	simple(cdb, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
	CU_ASSERT_EQUAL(c.sense[0], 0x70);
	CU_ASSERT_EQUAL(c.sense_len, 18);

	memset(&c, 0, sizeof(c));
	sense_invalid_cdb(&c, 7, 3);
	CU_ASSERT_EQUAL(c.sense[15], 0x80 | 0x40 | 0x08 | 3);
	CU_ASSERT_EQUAL(get_be16(c.sense + 16), 7);
	sense_invalid_param(&c, 20, -1);
	CU_ASSERT_EQUAL(c.sense[15], 0x80);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_PARAM);

	uint8_t d[SCSI_SENSE_LEN];
	uint8_t sks[3] = { 0xc8, 0, 2 };
	uint32_t n = sense_build(d, true, SK_MISCOMPARE, ASC_MISCOMPARE_DURING_VERIFY, true, 0x1234, sks);
	CU_ASSERT_EQUAL(d[0], 0x72);
	CU_ASSERT_EQUAL(d[1], SK_MISCOMPARE);
	CU_ASSERT_EQUAL(d[7], n - 8);
	CU_ASSERT_EQUAL(d[8], 0x00);
	CU_ASSERT_EQUAL(get_be64(d + 12), 0x1234);
	CU_ASSERT_EQUAL(d[20], 0x02);
	CU_ASSERT_EQUAL(d[24], 0xc8);
}

static void test_unsupported_sa(void)
{
	struct scsi_cmd c;
	uint8_t cdb[16] = { 0x9e, 0x05 };
	simple(cdb, 32, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	uint8_t orw[16] = { 0xc0 };   /* vendor specific */
	simple(orw, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
}

/* --- INQUIRY / VPD --- */

static void test_inquiry_standard(void)
{
	struct scsi_cmd c;
	uint8_t cdb[6] = { 0x12, 0, 0, 0x01, 0x04 };

	CU_ASSERT_EQUAL(simple(cdb, 260, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 96);
	CU_ASSERT_EQUAL(c.resid, 260 - 96);
	uint8_t *d = c.buf->data;
	CU_ASSERT_EQUAL(d[0], 0);
	CU_ASSERT_EQUAL(d[2], 6);
	CU_ASSERT_EQUAL(d[3] & 0x0f, 2);
	CU_ASSERT_EQUAL(d[4], c.din_len - 5);
	CU_ASSERT_EQUAL(memcmp(d + 8, "ISERT   ", 8), 0);
	CU_ASSERT_EQUAL(memcmp(d + 16, "RAM ", 4), 0);
	bool sbc3 = false;
	for (int i = 0; i < 8; i++)
		sbc3 |= get_be16(d + 58 + 2 * i) == 0x04c0;
	CU_ASSERT(sbc3);
	scsi_cmd_release(&c);

	/* allocation length 36, EDTL 36: no residual */
	cdb[3] = 0;
	cdb[4] = 36;
	CU_ASSERT_EQUAL(simple(cdb, 36, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 36);
	CU_ASSERT_EQUAL(c.resid, 0);
	scsi_cmd_release(&c);

	/* EDTL smaller than the allocation length: overflow */
	cdb[4] = 96;
	CU_ASSERT_EQUAL(simple(cdb, 20, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 20);
	CU_ASSERT_EQUAL(c.resid, -76);
	scsi_cmd_release(&c);

	/* page code without EVPD */
	uint8_t bad[6] = { 0x12, 0, 0x80, 0, 96 };
	simple(bad, 96, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(c.sense[15], 0x80 | 0x40 | 0x08 | 7);
	CU_ASSERT_EQUAL(get_be16(c.sense + 16), 2);
	CU_ASSERT_EQUAL(c.din_len, 0);
}

static uint8_t *vpd(uint8_t page, struct scsi_cmd *c)
{
	uint8_t cdb[6] = { 0x12, 1, page, 0x04, 0 };
	if (simple(cdb, 1024, c) != SCSI_GOOD)
		return NULL;
	CU_ASSERT_EQUAL(c->din_len, get_be16(c->buf->data + 2) + 4u);
	return c->buf->data;
}

static void test_vpd_pages(void)
{
	struct scsi_cmd c, p;
	uint8_t *d = vpd(0x00, &c);

	CU_ASSERT_PTR_NOT_NULL_FATAL(d);
	for (uint32_t i = 4; i < c.din_len; i++) {
		CU_ASSERT_PTR_NOT_NULL(vpd(d[i], &p));
		scsi_cmd_release(&p);
	}
	CU_ASSERT(memchr(d + 4, 0xb0, c.din_len - 4) != NULL);
	CU_ASSERT(memchr(d + 4, 0xb2, c.din_len - 4) != NULL);
	scsi_cmd_release(&c);

	d = vpd(0x80, &c);
	CU_ASSERT_EQUAL(memcmp(d + 4, "SER123", 6), 0);
	scsi_cmd_release(&c);

	d = vpd(0x83, &c);
	CU_ASSERT_EQUAL(d[4] & 0x0f, 1);       /* binary */
	CU_ASSERT_EQUAL(d[5] & 0x0f, 3);       /* NAA */
	CU_ASSERT_EQUAL(d[7], 16);
	CU_ASSERT_EQUAL(d[8] >> 4, 6);
	uint32_t off = 4;
	bool relport = false, name = false;
	while (off + 4 <= c.din_len) {
		uint8_t type = d[off + 1] & 0x0f;
		if (type == 4)
			relport = get_be16(d + off + 6) == 1;
		if (type == 8 && (d[off + 1] & 0x30) == 0x10)
			name = strcmp((char *)d + off + 4, "iqn.test:t,t,0x0001") == 0 && d[off + 3] % 4 == 0;
		off += 4 + d[off + 3];
	}
	CU_ASSERT_EQUAL(off, c.din_len);
	CU_ASSERT(relport);
	CU_ASSERT(name);
	scsi_cmd_release(&c);

	d = vpd(0xb0, &c);
	CU_ASSERT_EQUAL(d[3], 0x3c);
	CU_ASSERT_EQUAL(get_be32(d + 8), SCSI_MAX_XFER_BYTES / BS);
	CU_ASSERT_EQUAL(get_be32(d + 20), SCSI_MAX_UNMAP_LBAS);
	CU_ASSERT_EQUAL(get_be32(d + 24), SCSI_MAX_UNMAP_DESCS);
	CU_ASSERT_EQUAL(get_be64(d + 36), SCSI_MAX_WS_BLOCKS);
	scsi_cmd_release(&c);

	d = vpd(0xb2, &c);
	CU_ASSERT_EQUAL(d[5] & 0xe4, 0xe4);    /* LBPU LBPWS LBPWS10 LBPRZ */
	CU_ASSERT_EQUAL(d[6] & 7, 2);          /* thin */
	scsi_cmd_release(&c);

	CU_ASSERT_PTR_NULL(vpd(0x42, &c));
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
}

/*
 * --- identities and lists at their configured maxima ---
 * target/config_load.c allows iSCSI names of 223 bytes, serials of 64 and LUNs
 * 0..16383; the session builds "<name>,t,0x<TPGT>" and "<name>,i,0x<ISID>".
 */

#define NAME_MAX_LEN 223

static void long_name(char *dst, const char *prefix, char fill)
{
	size_t n = strlen(prefix);

	memcpy(dst, prefix, n);
	memset(dst + n, fill, NAME_MAX_LEN - n);
	dst[NAME_MAX_LEN] = 0;
}

static void max_nexus(struct scsi_nexus *nx, uint64_t id, unsigned isid)
{
	memset(nx, 0, sizeof(*nx));
	long_name(nx->target_name, "iqn.2026-11.org.test:target.", 't');
	long_name(nx->initiator_name, "iqn.2026-11.org.test:initiator.", 'i');
	snprintf(nx->target_port, sizeof(nx->target_port), "%s,t,0x%04x", nx->target_name, 0xffff);
	snprintf(nx->initiator_port, sizeof(nx->initiator_port), "%s,i,0x%012x", nx->initiator_name, isid);
	nx->rel_port_id = 0xffff;
	nx->id = id;
}

/* A second LU with every identity field at its maximum; LU is swapped in until max_lu_end(). */
static struct scsi_lu *max_lu_begin(struct backstore **b, const char *serial)
{
	struct backstore_cfg cfg = { .name = "rmax", .type = BACKSTORE_RAM, .size = 64 * BS, .block_size = BS,
				     .thin = true };
	struct scsi_lu_params p = { .vendor = "VENDOR78", .product = "PRODUCT890123456", .revision = "REV4",
				    .serial = serial, .name = "rmax" };
	struct scsi_lu *keep = LU;
	char err[128];

	CU_ASSERT_FATAL(backstore_open(&cfg, b, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(*b, &p, &LU) == 0);
	return keep;
}

static void max_lu_end(struct backstore *b, struct scsi_lu *keep)
{
	scsi_lu_destroy(LU);
	backstore_close(b);
	LU = keep;
}

/*
 * APTPL through the LU: the state file is named by the NAA designator VPD
 * 0x83 reports, and a new LU with the same serial and folder restores it.
 */
static void test_aptpl_file_named_by_vpd83(void)
{
	struct backstore_cfg cfg = { .name = "rap", .type = BACKSTORE_RAM, .size = 64 * BS, .block_size = BS };
	char dir[] = "/tmp/test_scsi.XXXXXX", path[128], naa[33];
	struct scsi_lu_params p = { .serial = "APTPL-1", .name = "rap", .state_dir = dir };
	struct scsi_lu *keep = LU;
	struct backstore *b;
	struct scsi_cmd c;
	uint8_t prout[10] = { 0x5f, 0x00 }, prin[10] = { 0x5e, 0x00, 0, 0, 0, 0, 0, 0, 64 };
	uint8_t param[24] = { 0 }, *d;
	char err[128];

	CU_ASSERT_FATAL(mkdtemp(dir) != NULL);
	CU_ASSERT_FATAL(backstore_open(&cfg, &b, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(b, &p, &LU) == 0);
	d = vpd(0x83, &c);
	CU_ASSERT_FATAL(d != NULL && d[7] == 16);
	for (int i = 0; i < 16; i++)
		snprintf(naa + 2 * i, 3, "%02x", d[8 + i]);
	scsi_cmd_release(&c);
	snprintf(path, sizeof(path), "%s/pr-%s.json", dir, naa);
	put_be64(param + 8, 0xfeed);
	param[20] = 0x01; /* APTPL */
	put_be32(prout + 5, 24);
	sh_cmd_init(&c, LU, prout, 10, 24, false, true);
	CU_ASSERT_EQUAL(run(&c, param, 24), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(access(path, F_OK), 0);
	scsi_lu_destroy(LU);
	CU_ASSERT_FATAL(scsi_lu_create(b, &p, &LU) == 0);
	clear_ua();
	sh_cmd_init(&c, LU, prin, 10, 64, true, false);
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(get_be32(c.buf->data + 4), 8);
	CU_ASSERT_EQUAL(get_be64(c.buf->data + 8), 0xfeed);
	scsi_cmd_release(&c);
	scsi_lu_destroy(LU);
	backstore_close(b);
	LU = keep;
	unlink(path);
	rmdir(dir);
}

static uint8_t inquiry_nx(const struct scsi_nexus *nx, uint8_t evpd, uint8_t page, uint16_t alloc, uint32_t edtl,
			  struct scsi_cmd *c)
{
	uint8_t cdb[6] = { 0x12, evpd, page };

	put_be16(cdb + 3, alloc);
	sh_cmd_init(c, LU, cdb, 6, edtl, true, false);
	c->nexus = nx;
	return run(c, NULL, 0);
}

/* The designator of type/association in a VPD 83 page, or NULL. */
static const uint8_t *find_desig(const uint8_t *d, uint32_t len, uint8_t type, uint8_t assoc)
{
	for (uint32_t off = 4; off + 4 <= len; off += 4u + d[off + 3])
		if ((d[off + 1] & 0x0f) == type && ((d[off + 1] >> 4) & 3) == assoc && off + 4u + d[off + 3] <= len)
			return d + off;
	return NULL;
}

/* A SCSI name string designator: NUL terminated, padded to a multiple of four, the whole name. */
static void check_name_desig(const uint8_t *p, const char *name)
{
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p[0] & 0x0f, 3);   /* UTF-8 */
	CU_ASSERT_EQUAL(p[3] % 4, 0);
	CU_ASSERT(p[3] > strlen(name));
	CU_ASSERT_EQUAL(strcmp((const char *)p + 4, name), 0);
}

/* INQUIRY VPD 83h with a 223-byte target name and a 64-byte serial: the page grows past 512 bytes. */
static void test_vpd_max_identities(void)
{
	char serial[65];
	struct scsi_nexus nx;
	struct backstore *b;
	struct scsi_cmd c;

	memset(serial, 'S', 64);
	serial[63] = 'Z';
	serial[64] = 0;
	max_nexus(&nx, 100, 0xabcdef);
	struct scsi_lu *keep = max_lu_begin(&b, serial);

	CU_ASSERT_EQUAL(inquiry_nx(&nx, 1, 0x83, 0xffff, 0xffff, &c), SCSI_GOOD);
	const uint8_t *d = c.buf->data;
	uint32_t page = get_be16(d + 2) + 4u;
	CU_ASSERT(page > 512);
	CU_ASSERT_EQUAL(c.din_len, page);
	CU_ASSERT_EQUAL(c.resid, 0xffff - (int64_t)page);
	uint32_t off = 4;
	while (off + 4 <= c.din_len)
		off += 4u + d[off + 3];
	CU_ASSERT_EQUAL(off, page);
	/* T10 vendor id: the vendor, space padded, then the whole serial */
	const uint8_t *t10 = find_desig(d, c.din_len, 1, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t10);
	CU_ASSERT_EQUAL(t10[3], 8 + 64);
	CU_ASSERT_EQUAL(memcmp(t10 + 4, "VENDOR78", 8), 0);
	CU_ASSERT_EQUAL(memcmp(t10 + 12, serial, 64), 0);
	check_name_desig(find_desig(d, c.din_len, 8, 1), nx.target_port);
	check_name_desig(find_desig(d, c.din_len, 8, 2), nx.target_name);
	uint8_t full[1024];
	memcpy(full, d, page);
	scsi_cmd_release(&c);

	/* cut to the allocation length, then to the EDTL: the page length still says the whole page */
	CU_ASSERT_EQUAL(inquiry_nx(&nx, 1, 0x83, 300, 0xffff, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 300);
	CU_ASSERT_EQUAL(c.resid, 0xffff - 300);
	CU_ASSERT_EQUAL(memcmp(c.buf->data, full, 300), 0);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(inquiry_nx(&nx, 1, 0x83, 0xffff, 3, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 3);
	CU_ASSERT_EQUAL(c.resid, 3 - (int64_t)page);
	CU_ASSERT_EQUAL(memcmp(c.buf->data, full, 3), 0);
	scsi_cmd_release(&c);

	/* the unit serial number page carries all 64 bytes */
	CU_ASSERT_EQUAL(inquiry_nx(&nx, 1, 0x80, 0xffff, 0xffff, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 2), 64);
	CU_ASSERT_EQUAL(memcmp(c.buf->data + 4, serial, 64), 0);
	scsi_cmd_release(&c);

	/* standard INQUIRY with every identity field full */
	CU_ASSERT_EQUAL(inquiry_nx(&nx, 0, 0, 0xffff, 0xffff, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 96);
	CU_ASSERT_EQUAL(memcmp(c.buf->data + 8, "VENDOR78PRODUCT890123456REV4", 28), 0);
	scsi_cmd_release(&c);

	/* every page at every allocation length up to the whole: never more than asked, GOOD */
	for (uint16_t alloc = 0; alloc <= page; alloc++) {
		CU_ASSERT_EQUAL(inquiry_nx(&nx, 1, 0x83, alloc, alloc, &c), SCSI_GOOD);
		CU_ASSERT_EQUAL(c.din_len, alloc);
		CU_ASSERT(memcmp(c.buf->data, full, alloc) == 0);
		scsi_cmd_release(&c);
	}
	max_lu_end(b, keep);
}

/* REPORT LUNS with a map of all 16384 LUNs, whole and cut short. */
static void test_report_luns_max(void)
{
	uint32_t n = 16384, len = 8 + 8 * n;
	uint64_t *luns = calloc(n, sizeof(*luns));
	struct scsi_lun_map map = { .count = n, .luns = luns };
	struct scsi_cmd c;
	uint8_t rl[12] = { 0xa0 };

	CU_ASSERT_PTR_NOT_NULL_FATAL(luns);
	for (uint32_t i = 0; i < n; i++)
		luns[i] = i;
	put_be32(rl + 6, 0xffffffff);
	sh_cmd_init(&c, LU, rl, 12, len + 100, true, false);
	c.lun_map = &map;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, len);
	CU_ASSERT_EQUAL(c.resid, 100);
	CU_ASSERT_EQUAL(get_be32(c.buf->data), 8 * n);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 8 + 8 * 255), 255);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 8 + 8 * 16383), 0x4000 | 16383);
	scsi_cmd_release(&c);

	put_be32(rl + 6, 16);
	sh_cmd_init(&c, LU, rl, 12, len, true, false);
	c.lun_map = &map;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 16);
	CU_ASSERT_EQUAL(c.resid, len - 16);
	CU_ASSERT_EQUAL(get_be32(c.buf->data), 8 * n);
	scsi_cmd_release(&c);
	free(luns);
}

/* --- unmapped LUN --- */

static void test_no_lun(void)
{
	struct scsi_cmd c;
	uint8_t inq[6] = { 0x12, 0, 0, 0, 36 };

	sh_cmd_init(&c, LU, inq, 6, 36, true, false);
	c.lu = NULL;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[0], 0x7f);
	scsi_cmd_release(&c);

	uint8_t tur[6] = { 0 };
	sh_cmd_init(&c, LU, tur, 6, 0, false, false);
	c.lu = NULL;
	run(&c, NULL, 0);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LUN_NOT_SUPPORTED);

	uint8_t rs[6] = { 0x03, 0, 0, 0, 18 };
	sh_cmd_init(&c, LU, rs, 6, 18, true, false);
	c.lu = NULL;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[2] & 0xf, SK_ILLEGAL_REQUEST);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 12), ASC_LUN_NOT_SUPPORTED);
	scsi_cmd_release(&c);

	static const uint64_t luns[] = { 0, 5, 300 };
	struct scsi_lun_map map = { .count = 3, .luns = luns };
	uint8_t rl[12] = { 0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0 };
	sh_cmd_init(&c, LU, rl, 12, 256, true, false);
	c.lu = NULL;
	c.lun_map = &map;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	uint8_t *d = c.buf->data;
	CU_ASSERT_EQUAL(c.din_len, 32);
	CU_ASSERT_EQUAL(c.resid, 256 - 32);
	CU_ASSERT_EQUAL(get_be32(d), 24);
	CU_ASSERT_EQUAL(d[8 + 8 + 1], 5);
	CU_ASSERT_EQUAL(d[8 + 16], 0x41);
	CU_ASSERT_EQUAL(d[8 + 16 + 1], 300 & 0xff);
	scsi_cmd_release(&c);
}

/* --- capacity --- */

static void test_read_capacity(void)
{
	struct scsi_cmd c;
	uint8_t rc10[10] = { 0x25 };
	CU_ASSERT_EQUAL(simple(rc10, 8, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(get_be32(c.buf->data), NBLK - 1);
	CU_ASSERT_EQUAL(get_be32(c.buf->data + 4), BS);
	scsi_cmd_release(&c);

	uint8_t rc16[16] = { 0x9e, 0x10 };
	put_be32(rc16 + 10, 32);
	CU_ASSERT_EQUAL(simple(rc16, 32, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(get_be64(c.buf->data), NBLK - 1);
	CU_ASSERT_EQUAL(c.buf->data[14] & 0xc0, 0xc0);
	scsi_cmd_release(&c);

	/* allocation length shorter than the data */
	put_be32(rc16 + 10, 12);
	CU_ASSERT_EQUAL(simple(rc16, 12, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 12);
	scsi_cmd_release(&c);
}

/* --- read/write path --- */

static void test_rw_roundtrip_and_range(void)
{
	struct scsi_cmd c;
	uint8_t w[4 * BS], r[4 * BS];

	for (size_t i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i * 7);
	CU_ASSERT_EQUAL(rw10(true, 100, 4, sizeof(w), w, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 100, 4, sizeof(r), r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(memcmp(w, r, sizeof(w)), 0);

	/* last block is fine, one past is not */
	CU_ASSERT_EQUAL(rw10(false, NBLK - 1, 1, BS, r, &c), SCSI_GOOD);
	rw10(false, NBLK - 1, 2, 2 * BS, r, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
	rw10(false, 0xffffffff, 1, BS, r, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);

	/* zero blocks: GOOD inside, out of range past the end */
	CU_ASSERT_EQUAL(rw10(false, 0, 0, 0, NULL, &c), SCSI_GOOD);
	rw10(true, NBLK + 1, 0, 0, NULL, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);

	/* READ16 at LBA 2^64-1 */
	uint8_t r16[16] = { 0x88 };
	put_be64(r16 + 2, ~0ull);
	put_be32(r16 + 10, 1);
	simple(r16, BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);

	/* RDPROTECT without protection information */
	uint8_t rp[10] = { 0x28, 0x20 };
	put_be16(rp + 7, 1);
	simple(rp, BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(get_be16(c.sense + 16), 1);

	/* READ6: transfer length 0 means 256 blocks */
	uint8_t r6[6] = { 0x08, 0, 0, 0, 0 };
	CU_ASSERT_EQUAL(simple(r6, 256 * BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 256 * BS);
	scsi_cmd_release(&c);
}

static void test_residuals(void)
{
	struct scsi_cmd c;
	uint8_t buf[10000];

	/* READ10 one block, EDTL 0: nothing moves, overflow of one block */
	CU_ASSERT_EQUAL(rw10(false, 0, 1, 0, buf, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 0);
	CU_ASSERT_EQUAL(c.resid, -(int64_t)BS);
	/* EDTL 10000: one block, underflow */
	CU_ASSERT_EQUAL(rw10(false, 0, 1, 10000, buf, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, BS);
	CU_ASSERT_EQUAL(c.resid, 10000 - BS);
	/* EDTL 200: 200 bytes, overflow */
	CU_ASSERT_EQUAL(rw10(false, 0, 1, 200, buf, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 200);
	CU_ASSERT_EQUAL(c.resid, -(int64_t)(BS - 200));

	/* WRITE10 two blocks, EDTL one block: only the first block is written */
	memset(buf, 'a', sizeof(buf));
	CU_ASSERT_EQUAL(rw10(true, 10, 2, 2 * BS, buf, &c), SCSI_GOOD);
	memset(buf, 'b', sizeof(buf));
	CU_ASSERT_EQUAL(rw10(true, 10, 2, BS, buf, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.resid, -(int64_t)BS);
	/* WRITE10 one block, EDTL two blocks: one block collected, underflow */
	uint8_t cdb[10] = { 0x2a };
	put_be32(cdb + 2, 20);
	put_be16(cdb + 7, 1);
	sh_cmd_init(&c, LU, cdb, 10, 2 * BS, false, true);
	CU_ASSERT_TRUE(scsi_cmd_prepare(&c));
	CU_ASSERT_EQUAL(c.dout_len, BS);
	CU_ASSERT_EQUAL(c.resid, BS);
	scsi_cmd_release(&c);

	CU_ASSERT_EQUAL(rw10(false, 10, 2, 2 * BS, buf, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(buf[0], 'b');
	CU_ASSERT_EQUAL(buf[BS - 1], 'b');
	CU_ASSERT_EQUAL(buf[BS], 'a');
	CU_ASSERT_EQUAL(buf[2 * BS - 1], 'a');

	/* WRITE10 with EDTL 0 */
	CU_ASSERT_EQUAL(rw10(true, 0, 1, 0, NULL, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.resid, -(int64_t)BS);
}

/* --- thin provisioning --- */

static uint8_t lba_status(uint64_t lba, uint64_t *first, uint32_t *n)
{
	struct scsi_cmd c;
	uint8_t cdb[16] = { 0x9e, 0x12 };
	put_be64(cdb + 2, lba);
	put_be32(cdb + 10, 24);
	uint8_t st = simple(cdb, 24, &c);
	uint8_t prov = 0xff;
	if (st == SCSI_GOOD) {
		*first = get_be64(c.buf->data + 8);
		*n = get_be32(c.buf->data + 16);
		prov = c.buf->data[20] & 0x0f;
	}
	scsi_cmd_release(&c);
	return prov;
}

static void test_unmap(void)
{
	struct scsi_cmd c;
	uint8_t w[16 * BS], r[16 * BS];
	uint64_t first;
	uint32_t n;

	memset(w, 0xff, sizeof(w));
	CU_ASSERT_EQUAL(rw10(true, 0, 16, sizeof(w), w, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(lba_status(0, &first, &n), 0);
	CU_ASSERT_EQUAL(first, 0);

	uint8_t plist[8 + 16] = { 0, 22, 0, 16 };
	put_be64(plist + 8, 0);
	put_be32(plist + 16, 16);
	uint8_t cdb[10] = { 0x42 };
	put_be16(cdb + 7, sizeof(plist));
	sh_cmd_init(&c, LU, cdb, 10, sizeof(plist), false, true);
	CU_ASSERT_EQUAL(run(&c, plist, sizeof(plist)), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(rw10(false, 0, 16, sizeof(r), r, &c), SCSI_GOOD);
	memset(w, 0, sizeof(w));
	CU_ASSERT_EQUAL(memcmp(r, w, sizeof(r)), 0);
	CU_ASSERT_EQUAL(lba_status(0, &first, &n), 1);   /* deallocated */

	/* descriptor past the end */
	put_be64(plist + 8, NBLK - 1);
	put_be32(plist + 16, 2);
	sh_cmd_init(&c, LU, cdb, 10, sizeof(plist), false, true);
	run(&c, plist, sizeof(plist));
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
	scsi_cmd_release(&c);

	/* parameter list length 1..7 */
	put_be16(cdb + 7, 4);
	sh_cmd_init(&c, LU, cdb, 10, 4, false, true);
	run(&c, plist, 4);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);

	/* no descriptors at all */
	put_be16(cdb + 7, 8);
	sh_cmd_init(&c, LU, cdb, 10, 8, false, true);
	CU_ASSERT_EQUAL(run(&c, plist, 8), SCSI_GOOD);
	scsi_cmd_release(&c);

	/* GET LBA STATUS beyond the end */
	uint8_t gls[16] = { 0x9e, 0x12 };
	put_be64(gls + 2, NBLK);
	put_be32(gls + 10, 24);
	simple(gls, 24, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
}

static uint8_t ws(uint8_t opc, uint8_t flags, uint64_t lba, uint32_t n, const uint8_t *pat, uint32_t edtl,
		  struct scsi_cmd *c)
{
	uint8_t cdb[16] = { opc, flags };
	if (opc == 0x41) {
		put_be32(cdb + 2, (uint32_t)lba);
		put_be16(cdb + 7, (uint16_t)n);
	} else {
		put_be64(cdb + 2, lba);
		put_be32(cdb + 10, n);
	}
	sh_cmd_init(c, LU, cdb, 16, edtl, false, edtl > 0);
	uint8_t st = run(c, pat, edtl);
	scsi_cmd_release(c);
	return st;
}

static void test_write_same(void)
{
	struct scsi_cmd c;
	uint8_t pat[BS], r[8 * BS];

	memset(pat, 0x5a, sizeof(pat));
	CU_ASSERT_EQUAL(ws(0x41, 0, 50, 8, pat, BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 50, 8, sizeof(r), r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0x5a);
	CU_ASSERT_EQUAL(r[sizeof(r) - 1], 0x5a);

	/* UNMAP bit with a zero block deallocates */
	memset(pat, 0, sizeof(pat));
	CU_ASSERT_EQUAL(ws(0x93, 0x08, 50, 8, pat, BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 50, 8, sizeof(r), r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0);
	CU_ASSERT_EQUAL(r[sizeof(r) - 1], 0);

	/* UNMAP bit deallocates whatever the pattern (LBPRZ: reads return zeroes) */
	memset(pat, 0x77, sizeof(pat));
	CU_ASSERT_EQUAL(ws(0x41, 0, 50, 8, pat, BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(ws(0x41, 0x08, 50, 8, pat, BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 50, 8, sizeof(r), r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0);
	CU_ASSERT_EQUAL(r[sizeof(r) - 1], 0);

	/* NDOB: no Data-Out, zeroes */
	memset(pat, 0x11, sizeof(pat));
	CU_ASSERT_EQUAL(ws(0x41, 0, 60, 1, pat, BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(ws(0x93, 0x01, 60, 1, NULL, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 60, 1, BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[7], 0);

	/* ANCHOR unsupported, wrong Data-Out size, 0 blocks = to the end, beyond the end */
	ws(0x41, 0x10, 0, 1, pat, BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	ws(0x41, 0, 0, 1, pat, 2 * BS, &c);
	CU_ASSERT_EQUAL(c.status, SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(ws(0x41, 0, NBLK - 4, 0, pat, BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, NBLK - 1, 1, BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0x11);
	ws(0x41, 0, NBLK + 1, 0, pat, BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
}

/*
 * --- what reaches the backstore ---
 * The RAM backstore's ops with a recorder in front (test-only: the ops
 * table of the open backstore is swapped), to see FUA and FLUSH.
 */
static struct {
	struct { enum backstore_op op; bool fua; } io[16];
	unsigned n;
} seen;
static const struct bs_ops *real_ops;

static void recording_submit(struct backstore *b, struct bs_io *io)
{
	if (seen.n < ARRAY_SIZE(seen.io)) {
		seen.io[seen.n].op = io->op;
		seen.io[seen.n].fua = io->fua;
	}
	seen.n++;
	real_ops->submit(b, io);
}

static struct bs_ops recording_ops;

static void record_begin(void)
{
	real_ops = bstore->ops;
	recording_ops = *real_ops;
	recording_ops.submit = recording_submit;
	bstore->ops = &recording_ops;
	memset(&seen, 0, sizeof(seen));
}

static void record_end(void)
{
	bstore->ops = real_ops;
}

static uint8_t set_wce(bool wce)
{
	struct scsi_cmd c;
	uint8_t pl[4 + 20] = { 0, 0, 0, 0, 0x08, 0x12, wce ? 0x04 : 0 };
	uint8_t sel[6] = { 0x15, 0x10, 0, 0, sizeof(pl) };

	sh_cmd_init(&c, LU, sel, 6, sizeof(pl), false, true);
	uint8_t st = run(&c, pl, sizeof(pl));
	scsi_cmd_release(&c);
	return st;
}

/* With no volatile cache (WCE=0) GOOD means on stable storage: every write is FUA, deallocation is flushed. */
static void test_wce_off_durability(void)
{
	struct scsi_cmd c;
	uint8_t blk[BS];

	memset(blk, 'D', BS);
	CU_ASSERT_EQUAL_FATAL(set_wce(false), SCSI_GOOD);
	record_begin();

	/* WRITE(6) has no FUA bit: the rule comes from WCE alone, as for WRITE(10) without FUA */
	uint8_t w6[6] = { 0x0a, 0, 0, 40, 1 };
	sh_cmd_init(&c, LU, w6, 6, BS, false, true);
	CU_ASSERT_EQUAL(run(&c, blk, BS), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(seen.n, 1);
	CU_ASSERT_EQUAL(seen.io[0].op, BS_WRITE);
	CU_ASSERT_TRUE(seen.io[0].fua);
	memset(&seen, 0, sizeof(seen));
	CU_ASSERT_EQUAL(rw10(true, 41, 1, BS, blk, &c), SCSI_GOOD);
	CU_ASSERT_TRUE(seen.n == 1 && seen.io[0].op == BS_WRITE && seen.io[0].fua);

	/* UNMAP of two ranges: both deallocated, then a FLUSH, then GOOD */
	uint8_t plist[8 + 32] = { 0, 38, 0, 32 };
	put_be64(plist + 8, 40);
	put_be32(plist + 16, 1);
	put_be64(plist + 24, 44);
	put_be32(plist + 32, 2);
	uint8_t um[10] = { 0x42 };
	put_be16(um + 7, sizeof(plist));
	memset(&seen, 0, sizeof(seen));
	sh_cmd_init(&c, LU, um, 10, sizeof(plist), false, true);
	CU_ASSERT_EQUAL(run(&c, plist, sizeof(plist)), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(seen.n, 3);
	CU_ASSERT_EQUAL(seen.io[0].op, BS_UNMAP);
	CU_ASSERT_EQUAL(seen.io[1].op, BS_UNMAP);
	CU_ASSERT_EQUAL(seen.io[2].op, BS_FLUSH);

	/* WRITE SAME with UNMAP deallocates (LBPRZ): flushed the same way */
	uint8_t zero[BS] = { 0 };
	memset(&seen, 0, sizeof(seen));
	CU_ASSERT_EQUAL(ws(0x93, 0x08, 40, 4, zero, BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(seen.n, 2);
	CU_ASSERT_EQUAL(seen.io[0].op, BS_UNMAP);
	CU_ASSERT_EQUAL(seen.io[seen.n - 1].op, BS_FLUSH);

	/* WCE=1: no FUA asked for, no flush added */
	CU_ASSERT_EQUAL_FATAL(set_wce(true), SCSI_GOOD);
	memset(&seen, 0, sizeof(seen));
	sh_cmd_init(&c, LU, w6, 6, BS, false, true);
	CU_ASSERT_EQUAL(run(&c, blk, BS), SCSI_GOOD);
	scsi_cmd_release(&c);
	sh_cmd_init(&c, LU, um, 10, sizeof(plist), false, true);
	CU_ASSERT_EQUAL(run(&c, plist, sizeof(plist)), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(seen.n, 3);
	CU_ASSERT_FALSE(seen.io[0].fua);
	CU_ASSERT_EQUAL(seen.io[1].op, BS_UNMAP);
	CU_ASSERT_EQUAL(seen.io[2].op, BS_UNMAP);
	record_end();
}

static uint8_t caw(uint64_t lba, uint8_t n, const uint8_t *data, uint32_t edtl, struct scsi_cmd *c)
{
	uint8_t cdb[16] = { 0x89 };
	put_be64(cdb + 2, lba);
	cdb[13] = n;
	sh_cmd_init(c, LU, cdb, 16, edtl, false, true);
	uint8_t st = run(c, data, edtl);
	scsi_cmd_release(c);
	return st;
}

static void test_compare_and_write(void)
{
	struct scsi_cmd c;
	uint8_t blk[BS], d[2 * BS], r[BS];

	memset(blk, 'A', BS);
	CU_ASSERT_EQUAL(rw10(true, 200, 1, BS, blk, &c), SCSI_GOOD);
	memset(d, 'A', BS);
	memset(d + BS, 'B', BS);
	CU_ASSERT_EQUAL(caw(200, 1, d, 2 * BS, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 200, 1, BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 'B');

	/* medium now holds B: compare data of A with one B in the middle miscompares at 0 */
	d[0] = 'B';
	d[1] = 'X';
	caw(200, 1, d, 2 * BS, &c);
	expect_sense(&c, SK_MISCOMPARE, ASC_MISCOMPARE_DURING_VERIFY);
	CU_ASSERT_EQUAL(c.sense[0], 0xf0);   /* VALID */
	CU_ASSERT_EQUAL(get_be32(c.sense + 3), 1);
	CU_ASSERT_EQUAL(rw10(false, 200, 1, BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 'B');

	/* Data-Out size must be exactly 2 * NUMBER OF LOGICAL BLOCKS */
	caw(200, 1, d, 4 * BS, &c);
	CU_ASSERT_EQUAL(c.status, SCSI_CHECK_CONDITION);
	caw(NBLK, 1, d, 2 * BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);

	/* 0 blocks: GOOD without data, refused with data (a 256-block count that wrapped) */
	CU_ASSERT_EQUAL(caw(200, 0, d, 0, &c), SCSI_GOOD);
	caw(200, 0, d, 2 * BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(rw10(false, 200, 1, BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 'B');
}


/* --- ORWRITE, WRITE ATOMIC, READ DEFECT DATA --- */

static uint8_t orwrite(uint64_t lba, uint32_t n, const uint8_t *data, uint32_t edtl, uint8_t b1, struct scsi_cmd *c)
{
	uint8_t cdb[16] = { 0x8b, b1 };
	put_be64(cdb + 2, lba);
	put_be32(cdb + 10, n);
	sh_cmd_init(c, LU, cdb, 16, edtl, false, edtl > 0);
	uint8_t st = run(c, data, edtl);
	scsi_cmd_release(c);
	return st;
}

static void test_orwrite(void)
{
	struct scsi_cmd c;
	uint8_t blk[2 * BS], r[2 * BS];

	memset(blk, 0x0f, sizeof(blk));
	CU_ASSERT_EQUAL(rw10(true, 300, 2, 2 * BS, blk, &c), SCSI_GOOD);
	memset(blk, 0x30, BS);
	memset(blk + BS, 0xc0, BS);
	CU_ASSERT_EQUAL(orwrite(300, 2, blk, 2 * BS, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 300, 2, 2 * BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0x3f);
	CU_ASSERT_EQUAL(r[BS - 1], 0x3f);
	CU_ASSERT_EQUAL(r[BS], 0xcf);
	CU_ASSERT_EQUAL(r[2 * BS - 1], 0xcf);

	/* a short Data-Out ORs whole blocks of it and says the rest in the residual */
	memset(blk, 0xff, BS);
	CU_ASSERT_EQUAL(orwrite(300, 2, blk, BS, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.resid, -(int64_t)BS);
	CU_ASSERT_EQUAL(rw10(false, 300, 2, 2 * BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[BS - 1], 0xff);
	CU_ASSERT_EQUAL(r[BS], 0xcf);

	/* less than a block of Data-Out: received (into a buffer: isertd crashed
	 * here once), nothing ORed, the residual says so */
	memset(blk, 0x01, BS);
	CU_ASSERT_EQUAL(orwrite(300, 1, blk, BS / 2, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.resid, -(int64_t)(BS / 2));
	CU_ASSERT_EQUAL(rw10(false, 300, 1, BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0xff);
	CU_ASSERT_EQUAL(r[BS - 1], 0xff);

	/* ORPROTECT without protection information, range, the transfer limit */
	orwrite(300, 1, blk, BS, 0x20, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	orwrite(NBLK - 1, 2, blk, 2 * BS, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
	orwrite(UINT64_MAX, 1, blk, BS, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
	CU_ASSERT_EQUAL(orwrite(0, 0, NULL, 0, 0, &c), SCSI_GOOD);
	orwrite(NBLK, 0, NULL, 0, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
}

/*
 * A backstore that holds back the first READ it gets: the command that
 * issued it stays in the middle of its read-modify-write.
 */
static struct bs_io *held;
static unsigned held_submits;

static void holding_submit(struct backstore *b, struct bs_io *io)
{
	held_submits++;
	if (!held && io->op == BS_READ) {
		held = io;
		return;
	}
	real_ops->submit(b, io);
}

/* ORWRITE and WRITE ATOMIC wait while a COMPARE AND WRITE is between its read and its write. */
static void test_rmw_serialized(void)
{
	struct scsi_cmd cw, ow, aw, rd;
	uint8_t blk[BS], d[2 * BS], r[BS];
	static struct bs_ops holding_ops;

	memset(blk, 0x01, BS);
	CU_ASSERT_EQUAL(rw10(true, 400, 1, BS, blk, &cw), SCSI_GOOD);

	real_ops = bstore->ops;
	holding_ops = *real_ops;
	holding_ops.submit = holding_submit;
	bstore->ops = &holding_ops;
	held = NULL;
	held_submits = 0;

	/* CAW: compare 0x01, write 0x10; its read is held */
	uint8_t cawcdb[16] = { 0x89 };
	put_be64(cawcdb + 2, 400);
	cawcdb[13] = 1;
	memset(d, 0x01, BS);
	memset(d + BS, 0x10, BS);
	sh_cmd_init(&cw, LU, cawcdb, 16, 2 * BS, false, true);
	CU_ASSERT_FATAL(scsi_cmd_prepare(&cw));
	memcpy(cw.buf->data, d, 2 * BS);
	sh_ndone = 0;
	scsi_cmd_exec(&cw);
	CU_ASSERT_PTR_NOT_NULL_FATAL(held);
	CU_ASSERT_EQUAL(sh_ndone, 0);

	/* ORWRITE 0x02 and WRITE ATOMIC 0x44 of the same block queue behind it: nothing reaches the backstore */
	uint8_t orcdb[16] = { 0x8b };
	put_be64(orcdb + 2, 400);
	put_be32(orcdb + 10, 1);
	sh_cmd_init(&ow, LU, orcdb, 16, BS, false, true);
	CU_ASSERT_FATAL(scsi_cmd_prepare(&ow));
	memset(ow.buf->data, 0x02, BS);
	scsi_cmd_exec(&ow);
	uint8_t acdb[16] = { 0x9c };
	put_be64(acdb + 2, 400);
	put_be16(acdb + 12, 1);
	sh_cmd_init(&aw, LU, acdb, 16, BS, false, true);
	CU_ASSERT_FATAL(scsi_cmd_prepare(&aw));
	memset(aw.buf->data, 0x44, BS);
	scsi_cmd_exec(&aw);
	CU_ASSERT_EQUAL(held_submits, 1);
	CU_ASSERT_EQUAL(sh_ndone, 0);

	/* a plain READ is not held up */
	CU_ASSERT_EQUAL(rw10(false, 400, 1, BS, r, &rd), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0x01);

	/* the CAW's read completes: CAW writes 0x10, then ORWRITE makes 0x12, then the atomic write 0x44 */
	sh_ndone = 0;
	struct bs_io *io = held;
	bstore->ops = real_ops;
	real_ops->submit(bstore, io);
	CU_ASSERT_EQUAL(sh_ndone, 3);
	CU_ASSERT_EQUAL(cw.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(ow.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(aw.status, SCSI_GOOD);
	scsi_cmd_release(&cw);
	scsi_cmd_release(&ow);
	scsi_cmd_release(&aw);
	CU_ASSERT_EQUAL(rw10(false, 400, 1, BS, r, &rd), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0x44);
	CU_ASSERT_PTR_NULL(LU->ser_head);
	held = NULL;
}

static void caw_cmd(struct scsi_cmd *c, uint64_t lba, uint8_t cmp, uint8_t set)
{
	uint8_t cdb[16] = { 0x89 };
	put_be64(cdb + 2, lba);
	cdb[13] = 1;
	sh_cmd_init(c, LU, cdb, 16, 2 * BS, false, true);
	CU_ASSERT_FATAL(scsi_cmd_prepare(c));
	memset(c->buf->data, cmp, BS);
	memset(c->buf->data + BS, set, BS);
}

/*
 * Serialized commands wait only for the ones before them on the same blocks:
 * a heartbeat CAW elsewhere on the LU passes a held one and the ORWRITE
 * queued behind it; one that overlaps a waiter waits in its turn.
 */
static void test_rmw_by_range(void)
{
	struct scsi_cmd held_caw, ow, hb, late, rd;
	uint8_t blk[BS], r[BS];
	static struct bs_ops holding_ops;

	memset(blk, 0x01, BS);
	CU_ASSERT_EQUAL(rw10(true, 500, 1, BS, blk, &rd), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(true, 501, 1, BS, blk, &rd), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(true, 900, 1, BS, blk, &rd), SCSI_GOOD);
	real_ops = bstore->ops;
	holding_ops = *real_ops;
	holding_ops.submit = holding_submit;
	bstore->ops = &holding_ops;
	held = NULL;
	sh_ndone = 0;

	caw_cmd(&held_caw, 500, 0x01, 0x10); /* its read is held */
	scsi_cmd_exec(&held_caw);
	CU_ASSERT_PTR_NOT_NULL_FATAL(held);
	uint8_t orcdb[16] = { 0x8b };
	put_be64(orcdb + 2, 500);
	put_be32(orcdb + 10, 2);                /* blocks 500-501: behind the held CAW */
	sh_cmd_init(&ow, LU, orcdb, 16, 2 * BS, false, true);
	CU_ASSERT_FATAL(scsi_cmd_prepare(&ow));
	memset(ow.buf->data, 0x02, 2 * BS);
	scsi_cmd_exec(&ow);
	caw_cmd(&late, 501, 0x03, 0x30);        /* block 501: behind the waiting ORWRITE */
	scsi_cmd_exec(&late);
	CU_ASSERT_EQUAL(sh_ndone, 0);

	caw_cmd(&hb, 900, 0x01, 0x11);          /* another block: runs now */
	scsi_cmd_exec(&hb);
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT_EQUAL(hb.status, SCSI_GOOD);
	scsi_cmd_release(&hb);

	/* The held read completes: CAW 0x10, ORWRITE 0x12 | 0x03, then the CAW on 501 compares 0x03. */
	struct bs_io *io = held;
	bstore->ops = real_ops;
	real_ops->submit(bstore, io);
	CU_ASSERT_EQUAL(sh_ndone, 4);
	CU_ASSERT_EQUAL(held_caw.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(ow.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(late.status, SCSI_GOOD);
	scsi_cmd_release(&held_caw);
	scsi_cmd_release(&ow);
	scsi_cmd_release(&late);
	CU_ASSERT_EQUAL(rw10(false, 500, 1, BS, r, &rd), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0x12);
	CU_ASSERT_EQUAL(rw10(false, 501, 1, BS, r, &rd), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0x30);
	CU_ASSERT_EQUAL(rw10(false, 900, 1, BS, r, &rd), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[0], 0x11);
	CU_ASSERT_PTR_NULL(LU->ser_head);
	held = NULL;
}

static uint8_t watomic(uint64_t lba, uint16_t n, uint16_t boundary, const uint8_t *data, uint32_t edtl,
		       uint8_t b1, struct scsi_cmd *c)
{
	uint8_t cdb[16] = { 0x9c, b1 };
	put_be64(cdb + 2, lba);
	put_be16(cdb + 10, boundary);
	put_be16(cdb + 12, n);
	sh_cmd_init(c, LU, cdb, 16, edtl, false, edtl > 0);
	uint8_t st = run(c, data, edtl);
	scsi_cmd_release(c);
	return st;
}

static void no_revoke(struct scsi_cmd *c)
{
	(void)c;
	CU_FAIL("a view revoked without a reactor");
}

/*
 * READs from a transport that sends from any memory (TCP) and can be made to
 * let go of a view: 16 KiB and more come as the RAM store's own bytes
 * (cmd.view), the residual as for a copy; smaller ones, and all of them
 * from a transport without view_revoke, are copied.  A WRITE ATOMIC does not
 * end views: the next READ is one again, with the new bytes.
 */
static void test_read_views(void)
{
	struct backstore_cfg cfg = { .name = "rv", .type = BACKSTORE_RAM, .size = 1u << 20, .block_size = BS };
	struct backstore *b;
	struct scsi_lu *keep = LU;
	struct scsi_cmd c;
	uint8_t w[64 * BS], cdb[10] = { 0x28 };
	char err[128];

	CU_ASSERT_FATAL(backstore_open(&cfg, &b, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(b, NULL, &LU) == 0);
	clear_ua();
	for (size_t i = 0; i < sizeof(w); i++)
		w[i] = (uint8_t)(i * 7);
	CU_ASSERT_EQUAL(rw10(true, 8, 64, sizeof(w), w, &c), SCSI_GOOD);

	/* 32 KiB, 20000 bytes asked for: a view, 20000 bytes of it sent, the rest a residual. */
	put_be32(cdb + 2, 8);
	put_be16(cdb + 7, 64);
	sh_cmd_init(&c, LU, cdb, 10, 20000, true, false);
	c.send_any_memory = true;
	c.view_revoke = no_revoke;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_PTR_EQUAL(c.buf, &c.view);
	CU_ASSERT_EQUAL(bs_ram_nviews(b), 1);
	CU_ASSERT_EQUAL(c.din_len, 20000);
	CU_ASSERT_EQUAL(c.resid, (int64_t)20000 - (int64_t)sizeof(w));
	CU_ASSERT_EQUAL(memcmp(c.buf->data, w, 20000), 0);
	scsi_cmd_release(&c);
	CU_ASSERT_PTR_NULL(c.buf);
	CU_ASSERT_EQUAL(bs_ram_nviews(b), 0);
	/* 8 KiB: copied. */
	put_be16(cdb + 7, 16);
	sh_cmd_init(&c, LU, cdb, 10, 16 * BS, true, false);
	c.send_any_memory = true;
	c.view_revoke = no_revoke;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_PTR_NOT_EQUAL(c.buf, &c.view);
	CU_ASSERT_EQUAL(memcmp(c.buf->data, w, 16 * BS), 0);
	scsi_cmd_release(&c);
	/* Not from an RDMA transport, nor from one that cannot let go. */
	put_be16(cdb + 7, 64);
	sh_cmd_init(&c, LU, cdb, 10, sizeof(w), true, false);
	c.view_revoke = no_revoke;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_PTR_NOT_EQUAL(c.buf, &c.view);
	scsi_cmd_release(&c);
	sh_cmd_init(&c, LU, cdb, 10, sizeof(w), true, false);
	c.send_any_memory = true;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_PTR_NOT_EQUAL(c.buf, &c.view);
	scsi_cmd_release(&c);
	/* After a WRITE ATOMIC: a view again, with the new bytes. */
	memset(w, 0xc3, BS);
	CU_ASSERT_EQUAL(watomic(8, 1, 0, w, BS, 0, &c), SCSI_GOOD);
	sh_cmd_init(&c, LU, cdb, 10, sizeof(w), true, false);
	c.send_any_memory = true;
	c.view_revoke = no_revoke;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_PTR_EQUAL(c.buf, &c.view);
	CU_ASSERT_EQUAL(c.buf->data[0], 0xc3);
	CU_ASSERT_EQUAL(c.buf->data[BS], (uint8_t)(BS * 7));
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(bs_ram_nviews(b), 0);

	scsi_lu_destroy(LU);
	backstore_close(b);
	LU = keep;
}

/*
 * On a thick RAM LU of 20 MiB, larger than the 1 MiB an atomic write may be
 * and than MAXIMUM TRANSFER LENGTH (16 MiB), which bounds ORWRITE.
 */
static void test_write_atomic(void)
{
	struct backstore_cfg cfg = { .name = "r2", .type = BACKSTORE_RAM, .size = 20u << 20, .block_size = BS };
	struct backstore *b;
	struct scsi_lu *thin = LU;
	struct scsi_cmd c;
	uint32_t max = (1u << 20) / BS;   /* the RAM backstore's 1 MiB */
	uint32_t nblk = (20u << 20) / BS;
	uint8_t *big = calloc(max + 1, BS), r[BS];
	char err[128];

	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	CU_ASSERT_FATAL(backstore_open(&cfg, &b, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(b, NULL, &LU) == 0);
	clear_ua();
	uint8_t *d = vpd(0xb0, &c);
	CU_ASSERT_EQUAL(get_be32(d + 44), max);   /* MAXIMUM ATOMIC TRANSFER LENGTH */
	CU_ASSERT(get_be32(d + 44) <= get_be32(d + 8));
	CU_ASSERT_EQUAL(get_be32(d + 48), 0);     /* ATOMIC ALIGNMENT */
	CU_ASSERT_EQUAL(get_be32(d + 52), 0);     /* ATOMIC TRANSFER LENGTH GRANULARITY */
	CU_ASSERT_EQUAL(get_be32(d + 60), 0);     /* MAXIMUM ATOMIC BOUNDARY SIZE */
	scsi_cmd_release(&c);

	memset(big, 0x5a, (size_t)max * BS);
	CU_ASSERT_EQUAL(watomic(0, (uint16_t)max, 0, big, max * BS, 0x18, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, max - 1, 1, BS, r, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(r[BS - 1], 0x5a);
	/* one block over the maximum */
	watomic(0, (uint16_t)(max + 1), 0, big, (max + 1) * BS, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	/* an atomic boundary, WRPROTECT, a Data-Out shorter than the blocks named */
	watomic(0, 1, 1, big, BS, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	watomic(0, 1, 0, big, BS, 0x20, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	watomic(0, 2, 0, big, BS, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	/* range */
	watomic(nblk - 1, 2, 0, big, 2 * BS, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
	CU_ASSERT_EQUAL(watomic(nblk - 1, 1, 0, big, BS, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(watomic(0, 0, 0, NULL, 0, 0, &c), SCSI_GOOD);
	watomic(nblk, 0, 0, NULL, 0, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);

	/* ORWRITE: at most MAXIMUM TRANSFER LENGTH blocks (two buffers of that size) */
	uint8_t *d2 = vpd(0xb0, &c);
	uint32_t mtl = get_be32(d2 + 8);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(mtl, (16u << 20) / BS);
	orwrite(0, mtl + 1, big, BS, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(orwrite(0, mtl, big, BS, 0, &c), SCSI_GOOD);   /* one block of Data-Out: one block ORed */
	free(big);
	scsi_lu_destroy(LU);
	backstore_close(b);
	LU = thin;
}

static int io_result;

static void io_res(struct bs_io *io, int res)
{
	*(int *)io->priv = res;
}

/* A file backstore cannot promise atomicity here: WRITE ATOMIC is not offered and VPD B0 says 0. */
static void test_write_atomic_file(void)
{
	char path[] = "/tmp/isert-test-atomic-XXXXXX";
	int fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	struct backstore_cfg cfg = { .name = "f0", .type = BACKSTORE_FILE, .path = path, .size = 64 * BS,
				     .block_size = BS };
	struct backstore *b;
	struct scsi_lu *ram = LU;
	struct scsi_cmd c;
	char err[256];
	uint8_t blk[BS] = { 0 };

	CU_ASSERT_FATAL(backstore_open(&cfg, &b, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(b, NULL, &LU) == 0);
	CU_ASSERT_EQUAL(backstore_atomic_max(b), 0);
	uint8_t *d = vpd(0xb0, &c);
	CU_ASSERT_EQUAL(get_be32(d + 44), 0);
	scsi_cmd_release(&c);
	watomic(0, 1, 0, blk, BS, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
	uint8_t one[12] = { 0xa3, 0x0c, 1, 0x9c };
	put_be32(one + 6, 512);
	CU_ASSERT_EQUAL(simple(one, 512, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[1] & 7, 1);   /* not supported */
	scsi_cmd_release(&c);
	/* the backstore refuses one too */
	struct bs_io io = { .op = BS_WRITE_ATOMIC, .offset = 0, .len = BS, .buf = blk, .cb = io_res, .priv = &io_result };
	io_result = 1;
	backstore_submit(b, &io);
	CU_ASSERT_EQUAL(io_result, -EOPNOTSUPP);
	scsi_lu_destroy(LU);
	backstore_close(b);
	unlink(path);
	LU = ram;
}

static void read_defect(bool twelve, uint8_t req, uint32_t alloc, struct scsi_cmd *c)
{
	uint8_t cdb[12] = { twelve ? 0xb7 : 0x37 };
	if (twelve) {
		cdb[1] = req;
		put_be32(cdb + 6, alloc);
	} else {
		cdb[2] = req;
		put_be16(cdb + 7, (uint16_t)alloc);
	}
	sh_cmd_init(c, LU, cdb, twelve ? 12 : 10, alloc, true, false);
	run(c, NULL, 0);
}

static void test_read_defect(void)
{
	struct scsi_cmd c;

	/* (10): a 4-byte header, PLIST and GLIST valid and empty, format echoed */
	read_defect(false, 0x18 | 0x05, 32, &c);
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 4);
	CU_ASSERT_EQUAL(c.buf->data[1], 0x1d);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 2), 0);
	scsi_cmd_release(&c);
	/* (12): an 8-byte header */
	read_defect(true, 0x08 | 0x03, 64, &c);
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 8);
	CU_ASSERT_EQUAL(c.buf->data[1], 0x0b);
	CU_ASSERT_EQUAL(get_be32(c.buf->data + 4), 0);
	scsi_cmd_release(&c);
	/* the allocation length cuts the header */
	read_defect(true, 0x10, 2, &c);
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 2);
	scsi_cmd_release(&c);
	read_defect(false, 0x10, 0, &c);
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 0);
	scsi_cmd_release(&c);
	/* reserved formats */
	read_defect(false, 0x01, 32, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	scsi_cmd_release(&c);
	read_defect(true, 0x07, 32, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	scsi_cmd_release(&c);
}

static void test_verify(void)
{
	struct scsi_cmd c;
	uint8_t blk[2 * BS];

	memset(blk, 'V', sizeof(blk));
	CU_ASSERT_EQUAL(rw10(true, 300, 2, sizeof(blk), blk, &c), SCSI_GOOD);
	uint8_t cdb[10] = { 0x2f, 0x02 };
	put_be32(cdb + 2, 300);
	put_be16(cdb + 7, 2);
	sh_cmd_init(&c, LU, cdb, 10, sizeof(blk), false, true);
	CU_ASSERT_EQUAL(run(&c, blk, sizeof(blk)), SCSI_GOOD);
	scsi_cmd_release(&c);
	blk[BS + 3] = 'X';
	sh_cmd_init(&c, LU, cdb, 10, sizeof(blk), false, true);
	run(&c, blk, sizeof(blk));
	expect_sense(&c, SK_MISCOMPARE, ASC_MISCOMPARE_DURING_VERIFY);
	CU_ASSERT_EQUAL(get_be32(c.sense + 3), BS + 3);
	scsi_cmd_release(&c);
	/* BYTCHK 0: no data, range only */
	cdb[1] = 0;
	CU_ASSERT_EQUAL(simple(cdb, 0, &c), SCSI_GOOD);
	put_be32(cdb + 2, NBLK);
	simple(cdb, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE);
}

/* --- mode pages --- */

static void test_mode_sense(void)
{
	struct scsi_cmd c;
	uint8_t cdb[6] = { 0x1a, 0, 0x3f, 0, 255 };

	CU_ASSERT_EQUAL(simple(cdb, 255, &c), SCSI_GOOD);
	uint8_t *d = c.buf->data;
	CU_ASSERT_EQUAL(d[0], c.din_len - 1);
	CU_ASSERT_EQUAL(d[2] & 0x80, 0);
	CU_ASSERT_EQUAL(d[3], 8);
	CU_ASSERT_EQUAL(get_be24(d + 4 + 5), BS);
	CU_ASSERT(c.resid > 0);
	/* pages in ascending order, caching page with WCE */
	uint32_t off = 12;
	bool caching = false, control = false;
	while (off < c.din_len) {
		if ((d[off] & 0x3f) == 0x08)
			caching = d[off + 2] & 0x04;
		if ((d[off] & 0x3f) == 0x0a)
			control = true;
		off += 2 + d[off + 1];
	}
	CU_ASSERT_EQUAL(off, c.din_len);
	CU_ASSERT(caching);
	CU_ASSERT(control);
	scsi_cmd_release(&c);

	/* 4 bytes: header only, no residual */
	cdb[4] = 4;
	CU_ASSERT_EQUAL(simple(cdb, 4, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, 4);
	CU_ASSERT_EQUAL(c.resid, 0);
	scsi_cmd_release(&c);

	/* saved values: not supported */
	uint8_t saved[6] = { 0x1a, 0, 0xc0 | 0x0a, 0, 255 };
	simple(saved, 255, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_SAVING_PARAMS_UNSUPPORTED);

	/* unknown page */
	uint8_t unk[6] = { 0x1a, 0x08, 0x2b, 0, 255 };
	simple(unk, 255, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);

	/* MODE SENSE(10), DBD, changeable control page */
	uint8_t ms10[10] = { 0x5a, 0x08, 0x40 | 0x0a, 0, 0, 0, 0, 0, 255 };
	CU_ASSERT_EQUAL(simple(ms10, 255, &c), SCSI_GOOD);
	d = c.buf->data;
	CU_ASSERT_EQUAL(get_be16(d + 6), 0);
	CU_ASSERT_EQUAL(d[8], 0x0a);
	CU_ASSERT_EQUAL(d[10], 0x04);   /* D_SENSE changeable */
	CU_ASSERT_EQUAL(d[12], 0x08);   /* SWP changeable */
	scsi_cmd_release(&c);

	/* WP when mapped read-only */
	sh_cmd_init(&c, LU, cdb, 6, 4, true, false);
	c.read_only = true;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[2] & 0x80, 0x80);
	scsi_cmd_release(&c);
}

static uint8_t set_control(bool d_sense, bool swp, struct scsi_cmd *c)
{
	uint8_t cdb[6] = { 0x1a, 0x08, 0x0a, 0, 255 };
	uint8_t pl[4 + 12];
	uint8_t st = simple(cdb, 255, c);
	if (st != SCSI_GOOD)
		return st;
	memcpy(pl, c->buf->data, sizeof(pl));
	scsi_cmd_release(c);
	pl[0] = 0;
	pl[4 + 2] = (uint8_t)((pl[4 + 2] & ~0x04) | (d_sense ? 0x04 : 0));
	pl[4 + 4] = (uint8_t)((pl[4 + 4] & ~0x08) | (swp ? 0x08 : 0));
	uint8_t sel[6] = { 0x15, 0x10, 0, 0, sizeof(pl) };
	sh_cmd_init(c, LU, sel, 6, sizeof(pl), false, true);
	st = run(c, pl, sizeof(pl));
	scsi_cmd_release(c);
	return st;
}

static void test_mode_select(void)
{
	struct scsi_cmd c;
	uint8_t blk[BS] = { 0 };

	/* D_SENSE: descriptor format sense */
	CU_ASSERT_EQUAL(set_control(true, false, &c), SCSI_GOOD);
	rw10(false, NBLK, 1, BS, blk, &c);
	CU_ASSERT_EQUAL(c.sense[0], 0x72);
	CU_ASSERT_EQUAL(asc(&c), ASC_LBA_OUT_OF_RANGE);
	CU_ASSERT_EQUAL(set_control(false, false, &c), SCSI_GOOD);
	rw10(false, NBLK, 1, BS, blk, &c);
	CU_ASSERT_EQUAL(c.sense[0], 0x70);

	/* SWP: reads work, writes are write protected */
	CU_ASSERT_EQUAL(set_control(false, true, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 0, 1, BS, blk, &c), SCSI_GOOD);
	rw10(true, 0, 1, BS, blk, &c);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	CU_ASSERT_EQUAL(set_control(false, false, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(true, 0, 1, BS, blk, &c), SCSI_GOOD);

	/* changing a non-changeable field is rejected */
	uint8_t pl[4 + 12] = { 0, 0, 0, 0, 0x0a, 0x0a, 0, 0x10, 0xff };
	uint8_t sel[6] = { 0x15, 0x10, 0, 0, sizeof(pl) };
	sh_cmd_init(&c, LU, sel, 6, sizeof(pl), false, true);
	run(&c, pl, sizeof(pl));
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM);
	scsi_cmd_release(&c);
}

static void test_read_only(void)
{
	struct scsi_cmd c;
	uint8_t cdb[10] = { 0x2a };
	put_be16(cdb + 7, 1);
	sh_cmd_init(&c, LU, cdb, 10, BS, false, true);
	c.read_only = true;
	run(&c, NULL, 0);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	uint8_t um[10] = { 0x42, 0, 0, 0, 0, 0, 0, 0, 24 };
	sh_cmd_init(&c, LU, um, 10, 24, false, true);
	c.read_only = true;
	run(&c, NULL, 0);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
}

/* A thick LU advertises no provisioning and refuses UNMAP in every form. */
static void test_thick_lu(void)
{
	struct backstore_cfg cfg = { .name = "r1", .type = BACKSTORE_RAM, .size = 64 * BS, .block_size = BS };
	struct backstore *b;
	struct scsi_lu *thin = LU;
	struct scsi_cmd c;
	char err[128];

	CU_ASSERT_FATAL(backstore_open(&cfg, &b, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(b, NULL, &LU) == 0);
	uint8_t um[10] = { 0x42, 0, 0, 0, 0, 0, 0, 0, 24 };
	sh_cmd_init(&c, LU, um, 10, 24, false, true);
	run(&c, NULL, 0);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
	uint8_t pat[BS] = { 0 };
	ws(0x41, 0x08, 0, 1, pat, BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(ws(0x41, 0, 0, 0, pat, BS, &c), SCSI_GOOD);   /* whole LU */
	uint8_t rc16[16] = { 0x9e, 0x10 };
	put_be32(rc16 + 10, 32);
	CU_ASSERT_EQUAL(simple(rc16, 32, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[14] & 0xc0, 0);
	CU_ASSERT_EQUAL(get_be64(c.buf->data), 63);
	scsi_cmd_release(&c);
	uint8_t *d = vpd(0xb0, &c);
	CU_ASSERT_EQUAL(get_be32(d + 20), 0);
	CU_ASSERT_EQUAL(get_be32(d + 24), 0);
	scsi_cmd_release(&c);
	/* the serial comes from the backstore name when none is given */
	d = vpd(0x80, &c);
	CU_ASSERT(get_be16(d + 2) > 0);
	scsi_cmd_release(&c);
	scsi_lu_destroy(LU);
	backstore_close(b);
	LU = thin;
}

/* WRITE SAME longer than VPD B0 MAXIMUM WRITE SAME LENGTH is refused, also when 0 means "to the end". */
static void test_write_same_limit(void)
{
	uint64_t nblk = (uint64_t)SCSI_MAX_WS_BLOCKS + 2;
	struct backstore_cfg cfg = { .name = "r2", .type = BACKSTORE_RAM, .size = nblk * BS, .block_size = BS,
				     .thin = true };
	struct backstore *b;
	struct scsi_lu *keep = LU;
	struct scsi_cmd c;
	uint8_t pat[BS] = { 0 };
	char err[128];

	CU_ASSERT_FATAL(backstore_open(&cfg, &b, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(b, NULL, &LU) == 0);
	ws(0x93, 0x08, 0, SCSI_MAX_WS_BLOCKS + 1, pat, BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	ws(0x93, 0x08, 0, 0, pat, BS, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(ws(0x93, 0x08, 2, 0, pat, BS, &c), SCSI_GOOD);   /* exactly the limit */
	CU_ASSERT_EQUAL(ws(0x93, 0, 0, SCSI_MAX_WS_BLOCKS, pat, BS, &c), SCSI_GOOD);
	scsi_lu_destroy(LU);
	backstore_close(b);
	LU = keep;
}

/* --- unit attentions, start/stop --- */

static void test_unit_attention(void)
{
	struct scsi_cmd c;
	uint8_t tur[6] = { 0 }, inq[6] = { 0x12, 0, 0, 0, 36 }, rs[6] = { 0x03, 0, 0, 0, 18 };

	clear_ua();
	scsi_lu_event(LU, &NX2, SCSI_EV_LU_RESET, NULL);
	/* INQUIRY runs and leaves the UA in place */
	CU_ASSERT_EQUAL(simple(inq, 36, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	simple(tur, 0, &c);
	expect_sense(&c, SK_UNIT_ATTENTION, ASC_BUS_DEVICE_RESET);
	CU_ASSERT_EQUAL(simple(tur, 0, &c), SCSI_GOOD);

	/* REQUEST SENSE reports and clears */
	scsi_lu_capacity_changed(LU);
	CU_ASSERT_EQUAL(simple(rs, 18, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[2] & 0xf, SK_UNIT_ATTENTION);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 12), ASC_CAPACITY_CHANGED);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(simple(tur, 0, &c), SCSI_GOOD);

	/* MODE SELECT from another nexus: MODE PARAMETERS CHANGED here only */
	sh_cmd_init(&c, LU, tur, 6, 0, false, false);
	c.nexus = &NX2;
	run(&c, NULL, 0);   /* registers NX2 */
	uint8_t pl[4 + 20] = { 0, 0, 0, 0, 0x08, 0x12, 0x04 };
	uint8_t sel[6] = { 0x15, 0x10, 0, 0, sizeof(pl) };
	sh_cmd_init(&c, LU, sel, 6, sizeof(pl), false, true);
	c.nexus = &NX2;
	CU_ASSERT_EQUAL(run(&c, pl, sizeof(pl)), SCSI_GOOD);
	scsi_cmd_release(&c);
	sh_cmd_init(&c, LU, tur, 6, 0, false, false);
	c.nexus = &NX2;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	simple(tur, 0, &c);
	expect_sense(&c, SK_UNIT_ATTENTION, ASC_MODE_PARAMS_CHANGED);
	scsi_lu_event(LU, &NX2, SCSI_EV_NEXUS_LOSS, NULL);
}

/* Holds the LU's mutex on another thread until told to stop or 2 s pass. */
struct mu_holder {
	pthread_t th;
	int held, stop, released;
};

static void *hold_mu(void *arg)
{
	struct mu_holder *h = arg;
	pthread_mutex_lock(&LU->mu);
	__atomic_store_n(&h->held, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 2000 && !__atomic_load_n(&h->stop, __ATOMIC_SEQ_CST); i++)
		usleep(1000);
	__atomic_store_n(&h->released, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&LU->mu);
	return NULL;
}

/* Run cmd (with the I_T_L entry itl) while another thread holds the LU's mutex; did it wait for the mutex? */
static bool waited_for_mutex(struct scsi_cmd *c, struct lu_nexus *itl, const void *dout, uint32_t dlen)
{
	struct mu_holder h = { 0 };
	CU_ASSERT_FATAL(pthread_create(&h.th, NULL, hold_mu, &h) == 0);
	while (!__atomic_load_n(&h.held, __ATOMIC_SEQ_CST))
		usleep(100);
	c->itl = itl;
	run(c, dout, dlen);
	bool waited = __atomic_load_n(&h.released, __ATOMIC_SEQ_CST);
	__atomic_store_n(&h.stop, 1, __ATOMIC_SEQ_CST);
	pthread_join(h.th, NULL);
	return waited;
}

/*
 * The common READ and WRITE of a nexus with its I_T_L entry take no lock
 * (docs/architecture.md): they run while another thread holds the LU's
 * mutex.  With a unit attention pending or a reservation held they take
 * it, and answer as before.
 */
static void test_itl_without_lock(void)
{
	uint8_t data[BS] = { 0x5a }, rd[10] = { 0x28 }, wr[10] = { 0x2a }, tur[6] = { 0 };
	uint8_t reserve6[6] = { 0x16 }, release6[6] = { 0x17 };
	struct scsi_cmd c;

	clear_ua();
	struct lu_nexus *itl = scsi_lu_itl(LU, &NX);
	CU_ASSERT_PTR_NOT_NULL_FATAL(itl);
	CU_ASSERT_PTR_EQUAL(scsi_lu_itl(LU, &NX), itl);   /* one entry per I_T_L */

	put_be16(rd + 7, 1);
	put_be16(wr + 7, 1);
	sh_cmd_init(&c, LU, wr, 10, BS, false, true);
	CU_ASSERT_FALSE(waited_for_mutex(&c, itl, data, BS));
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	scsi_cmd_release(&c);
	sh_cmd_init(&c, LU, rd, 10, BS, true, false);
	CU_ASSERT_FALSE(waited_for_mutex(&c, itl, NULL, 0));
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[0], 0x5a);
	scsi_cmd_release(&c);

	/* A unit attention pending: the locked path reports it. */
	scsi_lu_capacity_changed(LU);
	sh_cmd_init(&c, LU, tur, 6, 0, false, false);
	CU_ASSERT_TRUE(waited_for_mutex(&c, itl, NULL, 0));
	expect_sense(&c, SK_UNIT_ATTENTION, ASC_CAPACITY_CHANGED);
	scsi_cmd_release(&c);

	/* A reservation held (SPC-2, by another nexus): the locked path finds the conflict. */
	sh_cmd_init(&c, LU, reserve6, 6, 0, false, false);
	c.nexus = &NX2;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	scsi_cmd_release(&c);
	sh_cmd_init(&c, LU, rd, 10, BS, true, false);
	CU_ASSERT_TRUE(waited_for_mutex(&c, itl, NULL, 0));
	CU_ASSERT_EQUAL(c.status, SCSI_RESERVATION_CONFLICT);
	scsi_cmd_release(&c);
	sh_cmd_init(&c, LU, release6, 6, 0, false, false);
	c.nexus = &NX2;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	scsi_cmd_release(&c);
	sh_cmd_init(&c, LU, rd, 10, BS, true, false);
	CU_ASSERT_FALSE(waited_for_mutex(&c, itl, NULL, 0));
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	scsi_cmd_release(&c);

	/* A logout releases it before its answer; the I_T_L entry stays until the nexus is lost. */
	sh_cmd_init(&c, LU, reserve6, 6, 0, false, false);
	c.nexus = &NX2;
	CU_ASSERT_EQUAL(run(&c, NULL, 0), SCSI_GOOD);
	scsi_cmd_release(&c);
	struct lu_nexus *itl2 = scsi_lu_itl(LU, &NX2);
	scsi_lu_event(LU, &NX2, SCSI_EV_LOGOUT, NULL);
	CU_ASSERT_PTR_EQUAL(scsi_lu_itl(LU, &NX2), itl2);
	sh_cmd_init(&c, LU, rd, 10, BS, true, false);
	CU_ASSERT_FALSE(waited_for_mutex(&c, itl, NULL, 0));
	CU_ASSERT_EQUAL(c.status, SCSI_GOOD);
	scsi_cmd_release(&c);
	scsi_lu_event(LU, &NX2, SCSI_EV_NEXUS_LOSS, NULL);
}

static void count_done(void *arg)
{
	(*(int *)arg)++;
}

/*
 * A wait (no reactor: the jobs end on the caller's thread) calls done once
 * its last job ends, again after more; dropped with jobs on, it never does
 * (ASan sees it freed with the last).
 */
static void test_wait(void)
{
	int done = 0;
	struct scsi_wait *w = scsi_wait_new(NULL, count_done, &done);
	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	CU_ASSERT_FALSE(scsi_wait_busy(w));
	CU_ASSERT_FALSE(scsi_wait_busy(NULL));
	scsi_wait_hold(w);
	scsi_wait_hold(w);
	CU_ASSERT_TRUE(scsi_wait_busy(w));
	scsi_wait_end(w);
	CU_ASSERT_EQUAL(done, 0);
	scsi_wait_end(w);
	CU_ASSERT_EQUAL(done, 1);
	CU_ASSERT_FALSE(scsi_wait_busy(w));
	scsi_wait_hold(w);
	scsi_wait_end(w);
	CU_ASSERT_EQUAL(done, 2);
	scsi_wait_hold(w);
	scsi_wait_drop(w);
	scsi_wait_end(w);
	CU_ASSERT_EQUAL(done, 2);
	scsi_wait_drop(scsi_wait_new(NULL, count_done, &done)); /* nothing held: freed at once */
	scsi_wait_hold(NULL);
	scsi_wait_end(NULL);
}

/* PERSISTENT RESERVE OUT from nexus nx; p is the 24-byte list, plus TransportIDs when SPEC_I_PT. */
static uint8_t prout(const struct scsi_nexus *nx, uint8_t sa, const uint8_t *p, uint32_t len)
{
	struct scsi_cmd c;
	uint8_t cdb[10] = { 0x5f, sa };
	put_be32(cdb + 5, len);
	sh_cmd_init(&c, LU, cdb, 10, len, false, true);
	c.nexus = nx;
	uint8_t st = run(&c, p, len);
	scsi_cmd_release(&c);
	return st;
}

/*
 * PREEMPT AND ABORT of a registration made through a TransportID naming
 * only the initiator device (in other case): the unit attention reaches the
 * nexus of that initiator name, and its command waiting for Data-Out ends
 * with TASK ABORTED instead of writing.
 */
static void test_pr_preempt_abort_bare_name(void)
{
	static const struct scsi_nexus NX3 = { .initiator_name = "iqn.test:k",
					       .initiator_port = "iqn.test:k,i,0x000000000003", .id = 3 };
	struct scsi_cmd c, w, w2;
	uint8_t tur[6] = { 0 }, blk[BS], p[24 + 4 + 20];

	clear_ua();
	/* NX2 registers key 0xC for itself and, by SPEC_I_PT, for the device IQN.TEST:I */
	memset(p, 0, sizeof(p));
	put_be64(p + 8, 0xC);
	p[20] = 0x08;
	put_be32(p + 24, 20);
	p[28] = 0x05;
	put_be16(p + 30, 16);
	memcpy(p + 32, "IQN.TEST:I", 10);
	CU_ASSERT_EQUAL_FATAL(prout(&NX2, 0x00, p, sizeof(p)), SCSI_GOOD);
	memset(p, 0, sizeof(p));
	put_be64(p + 8, 0xB);
	CU_ASSERT_EQUAL_FATAL(prout(&NX3, 0x00, p, 24), SCSI_GOOD);

	/* a WRITE from NX is prepared (its Data-Out still to come) */
	memset(blk, 'W', BS);
	CU_ASSERT_EQUAL(rw10(true, 400, 1, BS, blk, &c), SCSI_GOOD);
	memset(blk, 'X', BS);
	uint8_t wr[10] = { 0x2a };
	put_be32(wr + 2, 400);
	put_be16(wr + 7, 1);
	sh_cmd_init(&w, LU, wr, 10, BS, false, true);
	CU_ASSERT_FATAL(scsi_cmd_prepare(&w));
	memcpy(w.buf->data, blk, BS);
	/* ... and another with its I_T_L entry, which checks for the abort without the mutex */
	sh_cmd_init(&w2, LU, wr, 10, BS, false, true);
	w2.itl = scsi_lu_itl(LU, &NX);
	CU_ASSERT_FATAL(scsi_cmd_prepare(&w2));
	memcpy(w2.buf->data, blk, BS);

	/* NX3 preempts key 0xC and aborts */
	memset(p, 0, sizeof(p));
	put_be64(p, 0xB);
	put_be64(p + 8, 0xC);
	CU_ASSERT_EQUAL(prout(&NX3, 0x05, p, 24), SCSI_GOOD);

	sh_ndone = 0;
	scsi_cmd_exec(&w);
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT_EQUAL(w.status, SCSI_TASK_ABORTED);
	scsi_cmd_release(&w);
	sh_ndone = 0;
	scsi_cmd_exec(&w2);
	CU_ASSERT_EQUAL(sh_ndone, 1);
	CU_ASSERT_EQUAL(w2.status, SCSI_TASK_ABORTED);
	scsi_cmd_release(&w2);
	CU_ASSERT_EQUAL(rw10(false, 400, 1, BS, blk, &c), SCSI_CHECK_CONDITION);
	expect_sense(&c, SK_UNIT_ATTENTION, ASC_REGISTRATIONS_PREEMPTED);
	CU_ASSERT_EQUAL(rw10(false, 400, 1, BS, blk, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(blk[0], 'W');
	/* the port-named registration of NX2 was told too */
	sh_cmd_init(&c, LU, tur, 6, 0, false, false);
	c.nexus = &NX2;
	run(&c, NULL, 0);
	expect_sense(&c, SK_UNIT_ATTENTION, ASC_REGISTRATIONS_PREEMPTED);
	scsi_cmd_release(&c);
	/* a command prepared after the abort runs */
	CU_ASSERT_EQUAL(rw10(true, 400, 1, BS, blk, &c), SCSI_GOOD);

	/* leave no registration behind */
	memset(p, 0, sizeof(p));
	put_be64(p, 0xB);
	CU_ASSERT_EQUAL(prout(&NX3, 0x03, p, 24), SCSI_GOOD);   /* CLEAR */
	scsi_lu_event(LU, &NX2, SCSI_EV_NEXUS_LOSS, NULL);
	scsi_lu_event(LU, &NX3, SCSI_EV_NEXUS_LOSS, NULL);
	clear_ua();
}

static void test_start_stop(void)
{
	struct scsi_cmd c;
	uint8_t stop[6] = { 0x1b, 0, 0, 0, 0x00 }, start[6] = { 0x1b, 0, 0, 0, 0x01 };
	uint8_t tur[6] = { 0 }, blk[BS];

	clear_ua();
	CU_ASSERT_EQUAL(simple(stop, 0, &c), SCSI_GOOD);
	simple(tur, 0, &c);
	expect_sense(&c, SK_NOT_READY, ASC_LU_NOT_READY_STOPPED);
	rw10(false, 0, 1, BS, blk, &c);
	expect_sense(&c, SK_NOT_READY, ASC_LU_NOT_READY_STOPPED);
	CU_ASSERT_EQUAL(simple(start, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(simple(tur, 0, &c), SCSI_GOOD);

	/* PREVENT blocks an eject */
	uint8_t prevent[6] = { 0x1e, 0, 0, 0, 1 }, allow[6] = { 0x1e };
	uint8_t eject[6] = { 0x1b, 0, 0, 0, 0x02 };
	CU_ASSERT_EQUAL(simple(prevent, 0, &c), SCSI_GOOD);
	simple(eject, 0, &c);
	expect_sense(&c, SK_ILLEGAL_REQUEST, ASC_MEDIUM_REMOVAL_PREVENTED);
	CU_ASSERT_EQUAL(simple(allow, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(simple(eject, 0, &c), SCSI_GOOD);
	simple(tur, 0, &c);
	expect_sense(&c, SK_NOT_READY, ASC_MEDIUM_NOT_PRESENT);
	uint8_t load[6] = { 0x1b, 0, 0, 0, 0x03 };
	CU_ASSERT_EQUAL(simple(load, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(simple(tur, 0, &c), SCSI_GOOD);
}

/*
 * --- a write-protected mapping ---
 * NXRO sees the LU through a read-only mapping, NX read-write.  What NXRO
 * may not do is change what NX sees: mode pages, power state, medium
 * removal, reservations, data.
 */
static const struct scsi_nexus NXRO = { .initiator_name = "iqn.test:ro", .initiator_port = "iqn.test:ro,i,0x000000000005",
					.target_name = "iqn.test:t", .target_port = "iqn.test:t,t,0x0001",
					.rel_port_id = 1, .id = 5 };

static uint8_t run_ro(const uint8_t *cdb, uint32_t len, uint32_t edtl, bool wr, const void *dout, struct scsi_cmd *c)
{
	sh_cmd_init(c, LU, cdb, len, edtl, !wr && edtl, wr);
	c->nexus = &NXRO;
	c->read_only = true;
	uint8_t st = run(c, dout, edtl);
	return st;
}

static void expect_ro_refused(const uint8_t *cdb, uint32_t len, uint32_t edtl, const void *dout)
{
	struct scsi_cmd c;

	run_ro(cdb, len, edtl, edtl > 0, dout, &c);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	if (c.status != SCSI_CHECK_CONDITION || sk(&c) != SK_DATA_PROTECT)
		fprintf(stderr, "opcode %02x from a read-only mapping: status %02x sense %x/%04x\n", cdb[0],
			c.status, sk(&c), asc(&c));
	scsi_cmd_release(&c);
}

static void expect_ro_good(const uint8_t *cdb, uint32_t len, uint32_t edtl)
{
	struct scsi_cmd c;

	CU_ASSERT_EQUAL(run_ro(cdb, len, edtl, false, NULL, &c), SCSI_GOOD);
	if (c.status != SCSI_GOOD)
		fprintf(stderr, "opcode %02x from a read-only mapping: status %02x\n", cdb[0], c.status);
	scsi_cmd_release(&c);
}

/* Current control page byte 4 (SWP) and caching page byte 2 (WCE), as NX sees them. */
static uint8_t mode_byte(uint8_t page, uint32_t byte)
{
	struct scsi_cmd c;
	uint8_t cdb[6] = { 0x1a, 0x08, page, 0, 255 };
	uint8_t v = 0xee;

	if (simple(cdb, 255, &c) == SCSI_GOOD)
		v = c.buf->data[4 + byte];
	scsi_cmd_release(&c);
	return v;
}

static void test_write_protected_mapping(void)
{
	struct scsi_cmd c;
	uint8_t blk[BS], tur[6] = { 0 };

	clear_ua();
	expect_ro_good(tur, 6, 0);   /* NXRO's first command: its power-on state is clean */
	uint8_t swp_before = mode_byte(0x0a, 4), wce_before = mode_byte(0x08, 2);

	/* MODE SELECT: SWP=1 in the control page, WCE=0 in the caching page */
	uint8_t ctl[4 + 12] = { 0, 0, 0, 0, 0x0a, 0x0a, 0, 0x10, 0x08, 0x40, 0, 0, 0xff, 0xff };
	uint8_t sel6[6] = { 0x15, 0x10, 0, 0, sizeof(ctl) };
	expect_ro_refused(sel6, 6, sizeof(ctl), ctl);
	uint8_t cache[8 + 20] = { 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x12 };
	uint8_t sel10[10] = { 0x55, 0x10, 0, 0, 0, 0, 0, 0, sizeof(cache) };
	expect_ro_refused(sel10, 10, sizeof(cache), cache);
	CU_ASSERT_EQUAL(mode_byte(0x0a, 4), swp_before);
	CU_ASSERT_EQUAL(mode_byte(0x08, 2), wce_before);

	/* START STOP UNIT: stop, eject, start */
	uint8_t stop[6] = { 0x1b, 0, 0, 0, 0x00 }, eject[6] = { 0x1b, 0, 0, 0, 0x02 };
	uint8_t start[6] = { 0x1b, 0, 0, 0, 0x01 };
	expect_ro_refused(stop, 6, 0, NULL);
	expect_ro_refused(eject, 6, 0, NULL);
	expect_ro_refused(start, 6, 0, NULL);

	/* PREVENT is refused; ALLOW lifts only this nexus's own prevention and passes */
	uint8_t prevent[6] = { 0x1e, 0, 0, 0, 1 }, allow[6] = { 0x1e };
	expect_ro_refused(prevent, 6, 0, NULL);
	expect_ro_good(allow, 6, 0);

	/* PERSISTENT RESERVE OUT: REGISTER, then RESERVE with the key it would have had */
	uint8_t pl[24] = { 0 };
	uint8_t reg[10] = { 0x5f, 0x00, 0, 0, 0, 0, 0, 0, 24 }, ign[10] = { 0x5f, 0x06, 0, 0, 0, 0, 0, 0, 24 };
	uint8_t res[10] = { 0x5f, 0x01, 0x03, 0, 0, 0, 0, 0, 24 };
	put_be64(pl + 8, 0xabc);
	expect_ro_refused(reg, 10, 24, pl);
	expect_ro_refused(ign, 10, 24, pl);
	memset(pl, 0, sizeof(pl));
	put_be64(pl, 0xabc);
	expect_ro_refused(res, 10, 24, pl);
	uint8_t rk[10] = { 0x5e, 0x00, 0, 0, 0, 0, 0, 0, 64 };
	CU_ASSERT_EQUAL_FATAL(simple(rk, 64, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(get_be32(c.buf->data + 4), 0);   /* no key registered */
	scsi_cmd_release(&c);

	/* RESERVE(6) and RESERVE(10); RELEASE of nothing is harmless */
	uint8_t r6[6] = { 0x16 }, r10[10] = { 0x56 }, rel6[6] = { 0x17 };
	expect_ro_refused(r6, 6, 0, NULL);
	expect_ro_refused(r10, 10, 0, NULL);
	expect_ro_good(rel6, 6, 0);

	/* data: refused as before */
	uint8_t w10[10] = { 0x2a, 0, 0, 0, 0, 9, 0, 0, 1 };
	memset(blk, 'R', BS);
	expect_ro_refused(w10, 10, BS, blk);
	uint8_t orw[16] = { 0x8b, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1 };
	uint8_t wat[16] = { 0x9c, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1 };
	expect_ro_refused(orw, 16, BS, blk);
	expect_ro_refused(wat, 16, BS, blk);

	/* what a read-only initiator does: all of it passes */
	uint8_t inq[6] = { 0x12, 0, 0, 0, 96 }, rl[12] = { 0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0 };
	uint8_t rd[10] = { 0x28, 0, 0, 0, 0, 9, 0, 0, 1 }, rc[10] = { 0x25 }, ms[6] = { 0x1a, 0, 0x3f, 0, 255 };
	uint8_t rs[6] = { 0x03, 0, 0, 0, 18 }, sc[10] = { 0x35 };
	expect_ro_good(inq, 6, 96);
	expect_ro_good(rl, 12, 256);
	expect_ro_good(rd, 10, BS);
	expect_ro_good(rc, 10, 8);
	expect_ro_good(ms, 6, 255);
	expect_ro_good(rs, 6, 18);
	expect_ro_good(rk, 10, 64);
	expect_ro_good(sc, 10, 0);
	expect_ro_good(tur, 6, 0);

	/* NX saw none of it: no unit attention, not stopped, not reserved, still writable */
	CU_ASSERT_EQUAL(simple(tur, 0, &c), SCSI_GOOD);
	memset(blk, 'W', BS);
	CU_ASSERT_EQUAL(rw10(true, 9, 1, BS, blk, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(false, 9, 1, BS, blk, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(blk[0], 'W');

	/* SWP set by NX protects the medium from everyone, and NX can still clear it */
	CU_ASSERT_EQUAL(set_control(false, true, &c), SCSI_GOOD);
	run_ro(tur, 6, 0, false, NULL, &c);
	expect_sense(&c, SK_UNIT_ATTENTION, ASC_MODE_PARAMS_CHANGED);
	expect_ro_refused(sel6, 6, sizeof(ctl), ctl);
	CU_ASSERT_EQUAL(set_control(false, false, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(rw10(true, 9, 1, BS, blk, &c), SCSI_GOOD);
	scsi_lu_event(LU, &NXRO, SCSI_EV_NEXUS_LOSS, NULL);
	clear_ua();
}

/* A read-only backstore protects its LU the same way for every nexus, whatever the mapping. */
static void test_read_only_backstore(void)
{
	struct backstore_cfg cfg = { .name = "rro", .type = BACKSTORE_RAM, .size = 64 * BS, .block_size = BS,
				     .readonly = true };
	struct backstore *b;
	struct scsi_lu *keep = LU;
	struct scsi_cmd c;
	char err[128];

	CU_ASSERT_FATAL(backstore_open(&cfg, &b, err, sizeof(err)) == 0);
	CU_ASSERT_FATAL(scsi_lu_create(b, NULL, &LU) == 0);
	clear_ua();
	uint8_t stop[6] = { 0x1b, 0, 0, 0, 0x00 }, r6[6] = { 0x16 };
	simple(stop, 0, &c);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	simple(r6, 0, &c);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	CU_ASSERT_EQUAL(set_control(false, true, &c), SCSI_CHECK_CONDITION);
	expect_sense(&c, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
	scsi_lu_destroy(LU);
	backstore_close(b);
	LU = keep;
}

/* --- REPORT SUPPORTED OPERATION CODES --- */

static void test_rsoc(void)
{
	struct scsi_cmd c, o;
	uint8_t all[12] = { 0xa3, 0x0c, 0x80 };
	put_be32(all + 6, 65535);

	CU_ASSERT_EQUAL(simple(all, 65535, &c), SCSI_GOOD);
	uint8_t *d = c.buf->data;
	uint32_t len = get_be32(d) + 4, off = 4, count = 0;
	CU_ASSERT_EQUAL(len, c.din_len);
	while (off < len) {
		uint8_t *p = d + off;
		bool sa = p[5] & 1;
		CU_ASSERT_EQUAL(p[5] & 2, 2);
		CU_ASSERT_EQUAL(get_be16(p + 8), 0x0a);
		uint8_t one[12] = { 0xa3, 0x0c, (uint8_t)(sa ? 2 : 1), p[0] };
		put_be16(one + 4, get_be16(p + 2));
		put_be32(one + 6, 512);
		CU_ASSERT_EQUAL(simple(one, 512, &o), SCSI_GOOD);
		CU_ASSERT_EQUAL(o.buf->data[1] & 7, 3);
		CU_ASSERT_EQUAL(get_be16(o.buf->data + 2), get_be16(p + 6));
		CU_ASSERT_EQUAL(o.buf->data[4], p[0]);
		scsi_cmd_release(&o);
		/* the other reporting option fails */
		one[2] = sa ? 1 : 2;
		simple(one, 512, &o);
		expect_sense(&o, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB);
		off += 20;
		count++;
	}
	CU_ASSERT(count > 30);
	scsi_cmd_release(&c);

	/* an unsupported opcode (vendor specific) is reported as such, with GOOD status */
	uint8_t one[12] = { 0xa3, 0x0c, 1, 0xc0 };
	put_be32(one + 6, 512);
	CU_ASSERT_EQUAL(simple(one, 512, &o), SCSI_GOOD);
	CU_ASSERT_EQUAL(o.buf->data[1] & 7, 1);
	scsi_cmd_release(&o);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("scsi", setup, teardown);
	CU_add_test(s, "sense_formats", test_sense_formats);
	CU_add_test(s, "unsupported_sa", test_unsupported_sa);
	CU_add_test(s, "inquiry_standard", test_inquiry_standard);
	CU_add_test(s, "aptpl_file_named_by_vpd83", test_aptpl_file_named_by_vpd83);
	CU_add_test(s, "vpd_pages", test_vpd_pages);
	CU_add_test(s, "vpd_max_identities", test_vpd_max_identities);
	CU_add_test(s, "report_luns_max", test_report_luns_max);
	CU_add_test(s, "no_lun", test_no_lun);
	CU_add_test(s, "read_capacity", test_read_capacity);
	CU_add_test(s, "rw_roundtrip_and_range", test_rw_roundtrip_and_range);
	CU_add_test(s, "residuals", test_residuals);
	CU_add_test(s, "unmap", test_unmap);
	CU_add_test(s, "write_same", test_write_same);
	CU_add_test(s, "wce_off_durability", test_wce_off_durability);
	CU_add_test(s, "compare_and_write", test_compare_and_write);
	CU_add_test(s, "verify", test_verify);
	CU_add_test(s, "orwrite", test_orwrite);
	CU_add_test(s, "rmw_serialized", test_rmw_serialized);
	CU_add_test(s, "rmw_by_range", test_rmw_by_range);
	CU_add_test(s, "read_views", test_read_views);
	CU_add_test(s, "write_atomic", test_write_atomic);
	CU_add_test(s, "write_atomic_file", test_write_atomic_file);
	CU_add_test(s, "read_defect", test_read_defect);
	CU_add_test(s, "mode_sense", test_mode_sense);
	CU_add_test(s, "mode_select", test_mode_select);
	CU_add_test(s, "read_only", test_read_only);
	CU_add_test(s, "thick_lu", test_thick_lu);
	CU_add_test(s, "write_same_limit", test_write_same_limit);
	CU_add_test(s, "unit_attention", test_unit_attention);
	CU_add_test(s, "itl_without_lock", test_itl_without_lock);
	CU_add_test(s, "wait", test_wait);
	CU_add_test(s, "pr_preempt_abort_bare_name", test_pr_preempt_abort_bare_name);
	CU_add_test(s, "start_stop", test_start_stop);
	CU_add_test(s, "write_protected_mapping", test_write_protected_mapping);
	CU_add_test(s, "read_only_backstore", test_read_only_backstore);
	CU_add_test(s, "rsoc", test_rsoc);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
