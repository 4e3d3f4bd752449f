/*
 * SANITIZE: the CDB and OVERWRITE parameter-list parsers field by field
 * (every refusal with its sense-key specific pointer), the pattern of each
 * pass (restarted at every block, INVERT alternating so the last pass is
 * the pattern), then whole commands through the SCSI layer on RAM LUs whose
 * backstore the test holds back or fails at will: NOT READY, SANITIZE IN
 * PROGRESS with a progress indication while it runs (REQUEST SENSE too),
 * what still answers, failure mode and its exits (AUSE), the service
 * actions each LU lists, a WRITE still in the backstore when the SANITIZE
 * comes (the overwrite waits for it), and an LU destroyed mid-sanitize.  Commands run
 * without a reactor; the operation runs on its own thread as in isertd.
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
#include "target/scsi/cmd/sanitize.h"
#include "target/scsi/scsi_int.h"
#include "sense_check.h"

#include "scsi_harness.h"
#include "unit_run.h"

#define NBLK 8192u   /* 4 MiB of 512-byte blocks: four chunks of the worker */

static struct scsi_nexus NX = { .initiator_name = "iqn.test:i", .initiator_port = "iqn.test:i,i,0x000000000001",
				.target_name = "iqn.test:t", .target_port = "iqn.test:t,t,0x0001", .rel_port_id = 1,
				.id = 1 };

/* ---- parsers ---- */

static void cdb_of(uint8_t *cdb, uint8_t byte1, uint16_t plen)
{
	memset(cdb, 0, 10);
	cdb[0] = 0x48;
	cdb[1] = byte1;
	put_be16(cdb + 7, plen);
}

static void expect_cdb_err(const uint8_t *cdb, uint16_t field)
{
	struct san_cdb c;
	struct san_err e = { 0 };
	CU_ASSERT_EQUAL(sanitize_parse_cdb(cdb, 512, &c, &e), -1);
	CU_ASSERT(e.in_cdb);
	CU_ASSERT_EQUAL(e.field, field);
}

static void test_parse_cdb(void)
{
	uint8_t cdb[10];
	struct san_cdb c;
	struct san_err e;

	cdb_of(cdb, 0x80 | 0x20 | SAN_OVERWRITE, 516);
	CU_ASSERT_EQUAL(sanitize_parse_cdb(cdb, 512, &c, &e), 0);
	CU_ASSERT(c.immed && c.ause && !c.znr);
	CU_ASSERT_EQUAL(c.sa, SAN_OVERWRITE);
	CU_ASSERT_EQUAL(c.plen, 516);
	/* OVERWRITE: 4 < length < block length + 5. */
	for (uint16_t bad = 0; bad <= 4; bad++) {
		cdb_of(cdb, SAN_OVERWRITE, bad);
		expect_cdb_err(cdb, 7);
	}
	cdb_of(cdb, SAN_OVERWRITE, 517);
	expect_cdb_err(cdb, 7);
	cdb_of(cdb, SAN_OVERWRITE, 5);
	CU_ASSERT_EQUAL(sanitize_parse_cdb(cdb, 512, &c, &e), 0);
	/* The others take no parameter list. */
	for (uint8_t sa = SAN_BLOCK_ERASE; sa <= SAN_CRYPTO_ERASE; sa++) {
		cdb_of(cdb, sa, 8);
		expect_cdb_err(cdb, 7);
		cdb_of(cdb, sa, 0);
		CU_ASSERT_EQUAL(sanitize_parse_cdb(cdb, 512, &c, &e), 0);
	}
	cdb_of(cdb, SAN_EXIT_FAILURE, 1);
	expect_cdb_err(cdb, 7);
	/* Reserved bytes 2-6. */
	for (int i = 2; i <= 6; i++) {
		cdb_of(cdb, SAN_BLOCK_ERASE, 0);
		cdb[i] = 0x01;
		expect_cdb_err(cdb, (uint16_t)i);
	}
	/* ZNR: defined (zoned devices), changes nothing here, not refused. */
	cdb_of(cdb, 0x40 | SAN_BLOCK_ERASE, 0);
	CU_ASSERT_EQUAL(sanitize_parse_cdb(cdb, 512, &c, &e), 0);
	CU_ASSERT(c.znr);
	/* 4096-byte blocks: up to 4100 bytes of list. */
	cdb_of(cdb, SAN_OVERWRITE, 4100);
	CU_ASSERT_EQUAL(sanitize_parse_cdb(cdb, 4096, &c, &e), 0);
	cdb_of(cdb, SAN_OVERWRITE, 4101);
	CU_ASSERT_EQUAL(sanitize_parse_cdb(cdb, 4096, &c, &e), -1);
}

static uint32_t list_of(uint8_t *p, uint8_t byte0, uint16_t ipl, uint8_t fill)
{
	p[0] = byte0;
	p[1] = 0;
	put_be16(p + 2, ipl);
	memset(p + 4, fill, ipl);
	return 4u + ipl;
}

static void expect_param_err(const uint8_t *p, uint32_t len, uint32_t bsz, uint16_t field, int bit)
{
	static struct san_overwrite o;
	struct san_err e = { 0 };
	CU_ASSERT_EQUAL(sanitize_parse_overwrite(p, len, bsz, &o, &e), -1);
	CU_ASSERT(!e.in_cdb && !e.plle);
	CU_ASSERT_EQUAL(e.field, field);
	CU_ASSERT_EQUAL(e.bit, bit);
}

static void test_parse_overwrite(void)
{
	static uint8_t p[4200];
	static struct san_overwrite o;
	struct san_err e;
	uint32_t n;

	n = list_of(p, 0x80 | 3, 512, 0xaa);
	CU_ASSERT_EQUAL(sanitize_parse_overwrite(p, n, 512, &o, &e), 0);
	CU_ASSERT(o.invert);
	CU_ASSERT_EQUAL(o.count, 3);
	CU_ASSERT_EQUAL(o.ipl, 512);
	CU_ASSERT_EQUAL(o.pattern[511], 0xaa);
	n = list_of(p, 0, 512, 0);
	expect_param_err(p, n, 512, 0, 4);          /* OVERWRITE COUNT 0 is reserved */
	n = list_of(p, 0x20 | 1, 16, 0);
	expect_param_err(p, n, 512, 0, 6);          /* TEST 01b */
	n = list_of(p, 0x40 | 1, 16, 0);
	expect_param_err(p, n, 512, 0, 6);          /* TEST 10b */
	n = list_of(p, 1, 16, 0);
	p[1] = 0x80;
	expect_param_err(p, n, 512, 1, -1);         /* reserved byte 1 */
	n = list_of(p, 1, 0, 0);
	expect_param_err(p, n + 4, 512, 2, -1);     /* INITIALIZATION PATTERN LENGTH 0 */
	n = list_of(p, 1, 516, 0);
	expect_param_err(p, n, 512, 2, -1);         /* longer than a block */
	n = list_of(p, 1, 8, 0);
	expect_param_err(p, n + 1, 512, 2, -1);     /* the list holds more than the pattern */
	expect_param_err(p, n - 1, 512, 2, -1);     /* ... or less */
	CU_ASSERT_EQUAL(sanitize_parse_overwrite(p, 3, 512, &o, &e), -1);
	CU_ASSERT(e.plle);
	n = list_of(p, 31, 4096, 0x5a);
	CU_ASSERT_EQUAL(sanitize_parse_overwrite(p, n, 4096, &o, &e), 0);
	CU_ASSERT_EQUAL(o.count, 31);
}

static void test_fill_block(void)
{
	static struct san_overwrite o;
	uint8_t b[512];

	memset(&o, 0, sizeof(o));
	memcpy(o.pattern, "abcde", 5);
	o.ipl = 5;
	o.count = 1;
	sanitize_fill_block(&o, 0, b, sizeof(b));
	CU_ASSERT(memcmp(b, "abcdeabcde", 10) == 0);
	CU_ASSERT_EQUAL(b[510], 'a');   /* 510 = 5 * 102: the pattern goes on to the block's end ... */
	CU_ASSERT_EQUAL(b[511], 'b');   /* ... cut there, and the next block starts it again */
	/* INVERT: the last pass writes the pattern as given. */
	o.invert = true;
	o.count = 2;
	sanitize_fill_block(&o, 0, b, sizeof(b));
	CU_ASSERT_EQUAL(b[0], (uint8_t)~'a');
	sanitize_fill_block(&o, 1, b, sizeof(b));
	CU_ASSERT_EQUAL(b[0], 'a');
	o.count = 3;
	sanitize_fill_block(&o, 0, b, sizeof(b));
	CU_ASSERT_EQUAL(b[0], 'a');
	sanitize_fill_block(&o, 1, b, sizeof(b));
	CU_ASSERT_EQUAL(b[0], (uint8_t)~'a');
	sanitize_fill_block(&o, 2, b, sizeof(b));
	CU_ASSERT_EQUAL(b[0], 'a');
}

/* ---- whole commands on a RAM LU whose writes the test holds back or fails ---- */

static struct backstore *bs_thick, *bs_thin;
static struct scsi_lu *lu_thick, *lu_thin;
static struct bs_ops gated_ops;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open = 1 << 30;   /* writes that may pass before the gate holds them */
static int fail_writes;           /* fail writes with -EIO */
static int held;                  /* a write waits at the gate */
static bool hold_ab;              /* keep back a command's WRITE of 0xAB bytes ... */
static struct bs_io *held_ab;     /* ... here, as a backstore that has not finished it yet */
static int worker_writes;         /* the sanitize worker's writes that reached the store */

static void gated_submit(struct backstore *bs, struct bs_io *io)
{
	if (io->op == BS_WRITE && hold_ab && ((const uint8_t *)io->buf)[0] == 0xab) {
		__atomic_store_n(&held_ab, io, __ATOMIC_RELEASE);
		return;
	}
	if (io->op == BS_WRITE && !io->reactor) {   /* the sanitize worker's */
		__atomic_add_fetch(&worker_writes, 1, __ATOMIC_RELAXED);
		pthread_mutex_lock(&gate_mu);
		while (gate_open <= 0) {
			held = 1;
			pthread_cond_wait(&gate_cv, &gate_mu);
		}
		held = 0;
		gate_open--;
		bool fail = fail_writes;
		pthread_mutex_unlock(&gate_mu);
		if (fail) {
			bs_complete(io, -EIO);
			return;
		}
	}
	bs_ram_ops.submit(bs, io);
}

static void gate(int n)
{
	pthread_mutex_lock(&gate_mu);
	gate_open = n;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_mu);
}

static void wait_held(void)
{
	for (int i = 0; i < 5000; i++) {
		pthread_mutex_lock(&gate_mu);
		int h = held;
		pthread_mutex_unlock(&gate_mu);
		if (h)
			return;
		usleep(1000);
	}
	CU_FAIL("the sanitize never reached the gate");
}

static void wait_state(struct scsi_lu *lu, uint8_t st)
{
	for (int i = 0; i < 5000 && __atomic_load_n(&lu->sanitize, __ATOMIC_ACQUIRE) != st; i++)
		usleep(1000);
	CU_ASSERT_EQUAL(__atomic_load_n(&lu->sanitize, __ATOMIC_ACQUIRE), st);
}

/* A whole command; returns its status (sense in c).  The caller releases. */
static uint8_t run(struct scsi_cmd *c, const void *dout, uint32_t dlen)
{
	int before = __atomic_load_n(&sh_ndone, __ATOMIC_ACQUIRE);
	if (!sh_prepare(c, dout, dlen))
		return c->status;
	scsi_cmd_exec(c);
	for (int i = 0; i < 10000 && __atomic_load_n(&sh_ndone, __ATOMIC_ACQUIRE) == before; i++)
		usleep(1000);
	CU_ASSERT_NOT_EQUAL(__atomic_load_n(&sh_ndone, __ATOMIC_ACQUIRE), before);
	return c->status;
}

static uint8_t sanitize_cmd(struct scsi_lu *lu, uint8_t byte1, const uint8_t *list, uint32_t len, struct scsi_cmd *c)
{
	uint8_t cdb[16] = { 0 };
	cdb_of(cdb, byte1, (uint16_t)len);
	sh_cmd_init(c, lu, cdb, 16, len, false, len > 0);
	uint8_t st = run(c, list, len);
	scsi_cmd_release(c);
	return st;
}

static uint8_t simple(struct scsi_lu *lu, const uint8_t *cdb6_16, uint32_t edtl, struct scsi_cmd *c)
{
	sh_cmd_init(c, lu, cdb6_16, 16, edtl, edtl > 0, false);
	uint8_t st = run(c, NULL, 0);
	return st;
}

/* The power-on unit attention, taken (in setup: no CUnit assertion here, TEST UNIT READY completes inline). */
static void flush_ua(struct scsi_lu *lu)
{
	static const uint8_t tur[16] = { 0 };
	struct scsi_cmd c;
	for (int i = 0; i < 4; i++) {
		sh_cmd_init(&c, lu, tur, 16, 0, false, false);
		if (scsi_cmd_prepare(&c))
			scsi_cmd_exec(&c);
		scsi_cmd_release(&c);
	}
}

static int setup(void)
{
	char err[256];
	if (sh_pool_open())
		return -1;
	sh_nexus = &NX;
	gated_ops = bs_ram_ops;
	gated_ops.submit = gated_submit;
	struct backstore_cfg cfg = { .name = "thick", .type = BACKSTORE_RAM, .size = (uint64_t)NBLK * 512 };
	if (backstore_open(&cfg, &bs_thick, err, sizeof(err)) < 0)
		return -1;
	cfg.name = "thin";
	cfg.thin = true;
	if (backstore_open(&cfg, &bs_thin, err, sizeof(err)) < 0)
		return -1;
	bs_thick->ops = &gated_ops;
	bs_thin->ops = &gated_ops;
	struct scsi_lu_params p = { .name = "thick" };
	if (scsi_lu_create(bs_thick, &p, &lu_thick))
		return -1;
	p.name = "thin";
	if (scsi_lu_create(bs_thin, &p, &lu_thin))
		return -1;
	flush_ua(lu_thick);
	flush_ua(lu_thin);
	return 0;
}

static int teardown(void)
{
	scsi_lu_destroy(lu_thick);
	scsi_lu_destroy(lu_thin);
	bs_thick->ops = &bs_ram_ops;
	bs_thin->ops = &bs_ram_ops;
	backstore_close(bs_thick);
	backstore_close(bs_thin);
	return sh_pool_close();
}

static void test_rsoc_and_unsupported(void)
{
	struct scsi_cmd c;
	uint8_t cdb[16] = { 0 };

	/* BLOCK ERASE only on the thin LU; CRYPTO ERASE on neither (RAM has no key). */
	CU_ASSERT(sanitize_sa_supported(lu_thin, SAN_BLOCK_ERASE));
	CU_ASSERT(!sanitize_sa_supported(lu_thick, SAN_BLOCK_ERASE));
	CU_ASSERT(!sanitize_sa_supported(lu_thin, SAN_CRYPTO_ERASE));
	CU_ASSERT_EQUAL(sanitize_vpd_b1(lu_thin), 0x40);
	CU_ASSERT_EQUAL(sanitize_vpd_b1(lu_thick), 0x00);
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, SAN_BLOCK_ERASE, NULL, 0, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(sk(&c), SK_ILLEGAL_REQUEST);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(c.sense[15], 0x80 | 0x40 | 0x08 | 4);   /* SKSV, C/D, BPV, bit 4 */
	CU_ASSERT_EQUAL(get_be16(c.sense + 16), 1);
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thin, SAN_CRYPTO_ERASE, NULL, 0, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thin, 0x04, NULL, 0, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_CDB);
	/* REPORT SUPPORTED OPERATION CODES, one command: SANITIZE BLOCK ERASE supported on thin, not thick. */
	cdb[0] = SCSI_OP_MAINTENANCE_IN;
	cdb[1] = SCSI_MI_REPORT_SUPPORTED_OPCODES;
	cdb[2] = 2;
	cdb[3] = SCSI_OP_SANITIZE;
	put_be16(cdb + 4, SAN_BLOCK_ERASE);
	put_be32(cdb + 6, 64);
	CU_ASSERT_EQUAL(simple(lu_thin, cdb, 64, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[1] & 7, 3);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 2), 10);
	CU_ASSERT_EQUAL(c.buf->data[4], SCSI_OP_SANITIZE);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(simple(lu_thick, cdb, 64, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[1] & 7, 1);
	scsi_cmd_release(&c);
}

static void test_running_and_done(void)
{
	static uint8_t list[4 + 512];
	struct scsi_cmd c;
	uint8_t read10[16] = { 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0 };
	uint8_t inq[16] = { 0x12, 0, 0, 0, 36, 0 };
	uint8_t rs[16] = { 0x03, 0, 0, 0, 32, 0 };

	uint32_t n = list_of(list, 1, 3, 0x77);
	gate(2);   /* two chunks of the four, then hold */
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, 0x80 | SAN_OVERWRITE, list, n, &c), SCSI_GOOD);   /* IMMED */
	wait_held();
	CU_ASSERT_EQUAL(simple(lu_thick, read10, 512, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(sk(&c), SK_NOT_READY);
	CU_ASSERT_EQUAL(asc(&c), ASC_SANITIZE_IN_PROGRESS);
	CU_ASSERT_EQUAL(c.sense[15], 0x80);
	CU_ASSERT_EQUAL(get_be16(c.sense + 16), 32768);   /* half of it written */
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(simple(lu_thick, rs, 32, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[2] & 0xf, SK_NOT_READY);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 12), ASC_SANITIZE_IN_PROGRESS);
	CU_ASSERT_EQUAL(c.buf->data[15], 0x80);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 16), 32768);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(simple(lu_thick, inq, 36, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, SAN_EXIT_FAILURE, NULL, 0, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_SANITIZE_IN_PROGRESS);
	/* Another LU is not concerned. */
	CU_ASSERT_EQUAL(simple(lu_thin, read10, 512, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	gate(1 << 30);
	wait_state(lu_thick, SAN_STATE_NONE);
	CU_ASSERT_EQUAL(simple(lu_thick, read10, 512, &c), SCSI_GOOD);
	CU_ASSERT(c.buf->data[0] == 0x77 && c.buf->data[511] == 0x77);
	scsi_cmd_release(&c);
	/* IMMED=0: the command ends with the operation. */
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thin, SAN_BLOCK_ERASE, NULL, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(__atomic_load_n(&lu_thin->sanitize, __ATOMIC_ACQUIRE), SAN_STATE_NONE);
}

static void test_failure_mode(void)
{
	static uint8_t list[4 + 512];
	struct scsi_cmd c;
	uint8_t read10[16] = { 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0 };
	uint8_t rs[16] = { 0x03, 0, 0, 0, 32, 0 };
	uint8_t modesense[16] = { 0x1a, 0, 0x3f, 0, 255, 0 };
	uint32_t n = list_of(list, 1, 4, 0x11);

	fail_writes = 1;
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, SAN_OVERWRITE, list, n, &c), SCSI_CHECK_CONDITION);   /* AUSE=0 */
	CU_ASSERT_EQUAL(sk(&c), SK_MEDIUM_ERROR);
	CU_ASSERT_EQUAL(asc(&c), ASC_SANITIZE_FAILED);
	fail_writes = 0;
	CU_ASSERT_EQUAL(simple(lu_thick, read10, 512, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(sk(&c), SK_MEDIUM_ERROR);
	CU_ASSERT_EQUAL(asc(&c), ASC_SANITIZE_FAILED);
	CU_ASSERT_EQUAL(simple(lu_thick, rs, 32, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[2] & 0xf, SK_MEDIUM_ERROR);
	CU_ASSERT_EQUAL(get_be16(c.buf->data + 12), ASC_SANITIZE_FAILED);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(simple(lu_thick, modesense, 255, &c), SCSI_GOOD);   /* no medium access: answered */
	scsi_cmd_release(&c);
	/* Restricted completion: EXIT FAILURE MODE refused, and so is a SANITIZE asking for AUSE=1. */
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, SAN_EXIT_FAILURE, NULL, 0, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, 0x20 | SAN_OVERWRITE, list, n, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(get_be16(c.sense + 16), 1);
	/* A SANITIZE that completes ends it. */
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, SAN_OVERWRITE, list, n, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(simple(lu_thick, read10, 512, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[0], 0x11);
	scsi_cmd_release(&c);
	/* Unrestricted (AUSE=1): EXIT FAILURE MODE ends it. */
	fail_writes = 1;
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, 0x20 | SAN_OVERWRITE, list, n, &c), SCSI_CHECK_CONDITION);
	fail_writes = 0;
	CU_ASSERT_EQUAL(__atomic_load_n(&lu_thick->sanitize, __ATOMIC_ACQUIRE), SAN_STATE_FAILED);
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, SAN_EXIT_FAILURE, NULL, 0, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(simple(lu_thick, read10, 512, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
}

static void test_waits_for_writes(void)
{
	static uint8_t list[4 + 512];
	struct scsi_cmd w, w2, c;
	uint8_t write10[16] = { 0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0 };
	uint8_t read10[16] = { 0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0 };

	/* A WRITE of LBA 0 that the backstore holds: it has begun, it has not ended. */
	hold_ab = true;
	sh_cmd_init(&w, lu_thick, write10, 16, 512, false, true);
	CU_ASSERT_FATAL(scsi_cmd_prepare(&w));
	memset(w.buf->data, 0xab, 512);
	int before = __atomic_load_n(&sh_ndone, __ATOMIC_ACQUIRE);
	scsi_cmd_exec(&w);
	CU_ASSERT_PTR_NOT_NULL_FATAL(__atomic_load_n(&held_ab, __ATOMIC_ACQUIRE));
	CU_ASSERT_EQUAL(__atomic_load_n(&sh_ndone, __ATOMIC_ACQUIRE), before);

	/* SANITIZE (IMMED): accepted, RUNNING, but nothing is overwritten while the WRITE is out. */
	__atomic_store_n(&worker_writes, 0, __ATOMIC_RELAXED);
	uint32_t n = list_of(list, 1, 3, 0x77);
	CU_ASSERT_EQUAL(sanitize_cmd(lu_thick, 0x80 | SAN_OVERWRITE, list, n, &c), SCSI_GOOD);
	usleep(200 * 1000);
	CU_ASSERT_EQUAL(__atomic_load_n(&worker_writes, __ATOMIC_RELAXED), 0);
	CU_ASSERT_EQUAL(__atomic_load_n(&lu_thick->sanitize, __ATOMIC_ACQUIRE), SAN_STATE_RUNNING);
	/* A WRITE that comes now is refused, with the progress (none yet). */
	sh_cmd_init(&w2, lu_thick, write10, 16, 512, false, true);
	CU_ASSERT_FATAL(scsi_cmd_prepare(&w2) == false);
	CU_ASSERT_EQUAL(sk(&w2), SK_NOT_READY);
	CU_ASSERT_EQUAL(asc(&w2), ASC_SANITIZE_IN_PROGRESS);
	CU_ASSERT_EQUAL(get_be16(w2.sense + 16), 0);
	scsi_cmd_release(&w2);

	/* The store finishes the WRITE: then, and only then, the overwrite runs, over it. */
	before = __atomic_load_n(&sh_ndone, __ATOMIC_ACQUIRE);   /* the SANITIZE itself ended */
	hold_ab = false;
	bs_ram_ops.submit(bs_thick, held_ab);
	held_ab = NULL;
	for (int i = 0; i < 5000 && __atomic_load_n(&sh_ndone, __ATOMIC_ACQUIRE) == before; i++)
		usleep(1000);
	CU_ASSERT_EQUAL(__atomic_load_n(&sh_ndone, __ATOMIC_ACQUIRE), before + 1);
	CU_ASSERT_EQUAL(w.status, SCSI_GOOD);
	scsi_cmd_release(&w);
	wait_state(lu_thick, SAN_STATE_NONE);
	CU_ASSERT(__atomic_load_n(&worker_writes, __ATOMIC_RELAXED) > 0);
	CU_ASSERT_EQUAL(simple(lu_thick, read10, 512, &c), SCSI_GOOD);
	CU_ASSERT(c.buf->data[0] == 0x77 && c.buf->data[511] == 0x77);
	scsi_cmd_release(&c);
}

static void test_destroy_while_running(void)
{
	static uint8_t list[4 + 512];
	struct backstore *bs;
	struct scsi_lu *lu;
	struct scsi_cmd c;
	char err[256];
	struct backstore_cfg cfg = { .name = "gone", .type = BACKSTORE_RAM, .size = 64u << 20 };

	CU_ASSERT_FATAL(backstore_open(&cfg, &bs, err, sizeof(err)) == 0);
	struct scsi_lu_params p = { .name = "gone" };
	CU_ASSERT_FATAL(scsi_lu_create(bs, &p, &lu) == 0);
	flush_ua(lu);
	uint32_t n = list_of(list, 31, 512, 0x33);   /* 31 passes of 64 MiB: long enough to be stopped */
	CU_ASSERT_EQUAL(sanitize_cmd(lu, 0x80 | SAN_OVERWRITE, list, n, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(__atomic_load_n(&lu->sanitize, __ATOMIC_ACQUIRE), SAN_STATE_RUNNING);
	scsi_lu_destroy(lu);   /* stops it at its next chunk and joins its thread */
	backstore_close(bs);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("sanitize", setup, teardown);
	CU_add_test(s, "parse_cdb", test_parse_cdb);
	CU_add_test(s, "parse_overwrite", test_parse_overwrite);
	CU_add_test(s, "fill_block", test_fill_block);
	CU_add_test(s, "rsoc_and_unsupported", test_rsoc_and_unsupported);
	CU_add_test(s, "running_and_done", test_running_and_done);
	CU_add_test(s, "failure_mode", test_failure_mode);
	CU_add_test(s, "waits_for_writes", test_waits_for_writes);
	CU_add_test(s, "destroy_while_running", test_destroy_while_running);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
