/*
 * nvme backstore tests without an NVMe device: Identify parsing from
 * hand-built pages (hostile ones too), every dword of the command each
 * request piece becomes, splitting, status to errno, and the engine's
 * choice of commands and its fall-backs on a backstore filled in by hand
 * (nvme_int.h reaches them; no system call is made).  The device
 * path is tests/vm/t-isertd-nvme.sh's.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target/backstore/nvme_int.h"

#include "unit_run.h"

static uint8_t page[NVME_ID_SIZE];
static char why[256];

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }

static void ctrl_page(uint8_t mdts, uint16_t oncs, uint16_t fuses, uint8_t vwc)
{
	memset(page, 0, sizeof(page));
	memcpy(page + 4, "S1234   XYZ         ", 20);
	memcpy(page + 24, "QEMU NVMe Ctrl                          ", 40);
	page[77] = mdts;
	put16(page + 520, oncs);
	put16(page + 522, fuses);
	page[525] = vwc;
}

/* NSZE blocks; FLBAS selects format idx, whose LBADS and MS are given; formats 0..nlbaf. */
static void ns_page(uint64_t nsze, uint8_t nlbaf, uint8_t flbas, unsigned idx, uint8_t lbads, uint16_t ms)
{
	memset(page, 0, sizeof(page));
	put64(page, nsze);
	page[25] = nlbaf;
	page[26] = flbas;
	for (unsigned i = 0; i <= nlbaf && i < 64; i++)
		put32(page + 128 + 4 * i, 9u << 16);   /* every other format: 512 bytes, no metadata */
	if (idx < 64)
		put32(page + 128 + 4 * idx, (uint32_t)lbads << 16 | ms);
}

static void test_parse_ctrl(void)
{
	struct nvme_ctrl_id c;
	ctrl_page(5, NVME_ONCS_COMPARE | NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES | NVME_ONCS_VERIFY, 1, 1);
	CU_ASSERT_EQUAL_FATAL(nvme_parse_ctrl(page, 4096, &c, why, sizeof(why)), 0);
	CU_ASSERT_STRING_EQUAL(c.serial, "S1234___XYZ");   /* inner spaces kept visible, trailing cut */
	CU_ASSERT_STRING_EQUAL(c.model, "QEMU_NVMe_Ctrl");
	CU_ASSERT_EQUAL(c.max_xfer, 128 * 1024);
	CU_ASSERT_EQUAL(c.oncs, 0x8d);
	CU_ASSERT_EQUAL(c.fuses, 1);
	CU_ASSERT_TRUE(c.vwc);

	ctrl_page(0, 0, 0, 0);
	CU_ASSERT_EQUAL(nvme_parse_ctrl(page, 4096, &c, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(c.max_xfer, 0);   /* no limit */
	CU_ASSERT_FALSE(c.vwc);
	/* A huge MDTS is capped, not shifted out of range. */
	ctrl_page(255, 0, 0, 0);
	CU_ASSERT_EQUAL(nvme_parse_ctrl(page, 4096, &c, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(c.max_xfer, 1u << 31);
	/* MDTS counts in CAP.MPSMIN pages. */
	ctrl_page(1, 0, 0, 0);
	CU_ASSERT_EQUAL(nvme_parse_ctrl(page, 65536, &c, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(c.max_xfer, 131072);
	CU_ASSERT_EQUAL(nvme_parse_ctrl(page, 1000, &c, why, sizeof(why)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "MPSMIN"));

	/* The NVM command set's page: WZSL (byte 1) in MPSMIN pages, as a power of two; 0 is no limit. */
	memset(page, 0, sizeof(page));
	page[1] = 3;
	nvme_parse_ctrl_nvm(page, 4096, &c);
	CU_ASSERT_EQUAL(c.max_wz, 32768);
	page[1] = 0;
	nvme_parse_ctrl_nvm(page, 4096, &c);
	CU_ASSERT_EQUAL(c.max_wz, 0);
	page[1] = 255;
	nvme_parse_ctrl_nvm(page, 4096, &c);
	CU_ASSERT_EQUAL(c.max_wz, 1u << 31);
}

/* SANITIZE's erase: which admin command, with which dwords, and when none may be sent. */
static void test_erase_plan(void)
{
	struct nvme_ctrl_id c;
	struct nvme_ns_id ns = { .nsze = 1000, .lba_size = 512, .lbaf = 0x13 };
	struct nvme_erase e;
	uint16_t prog;
	uint8_t log[512] = { 0 };

	/* The Identify Controller fields it reads: OACS 256, SANICAP 328, NN 516, FNA 524. */
	ctrl_page(5, 0, 0, 0);
	page[256] = 0x02;
	page[328] = 0x03;
	page[516] = 1;
	page[524] = 0x04;
	CU_ASSERT_EQUAL_FATAL(nvme_parse_ctrl(page, 4096, &c, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(c.oacs, 2);
	CU_ASSERT_EQUAL(c.sanicap, 3);
	CU_ASSERT_EQUAL(c.nn, 1);
	CU_ASSERT_EQUAL(c.fna, 4);
	/* SANICAP has both, one namespace: Sanitize, SANACT block (010b) / crypto (100b), NSID 0. */
	nvme_erase_plan(&c, &ns, 1, true, false, &e);
	CU_ASSERT(e.how == NVME_ERASE_SANITIZE && e.opcode == 0x84 && e.cdw10 == 2 && e.nsid == 0);
	nvme_erase_plan(&c, &ns, 1, true, true, &e);
	CU_ASSERT(e.how == NVME_ERASE_SANITIZE && e.cdw10 == 4);
	/* Never for a part of the namespace. */
	nvme_erase_plan(&c, &ns, 1, false, false, &e);
	CU_ASSERT_EQUAL(e.how, NVME_ERASE_NONE);
	/* Two namespaces: Sanitize would erase both; Format NVM of this one, SES 001b, LBAF 0x13 kept. */
	c.nn = 2;
	nvme_erase_plan(&c, &ns, 7, true, false, &e);
	CU_ASSERT(e.how == NVME_ERASE_FORMAT && e.opcode == 0x80 && e.nsid == 7);
	CU_ASSERT_EQUAL(e.cdw10, 0x3u | 1u << 12 | 1u << 9);
	nvme_erase_plan(&c, &ns, 7, true, true, &e);   /* FNA bit 2: crypto erase by format, SES 010b */
	CU_ASSERT(e.how == NVME_ERASE_FORMAT && (e.cdw10 >> 9 & 7) == 2);
	c.fna = 0x02;                                  /* secure erase reaches every namespace: none */
	nvme_erase_plan(&c, &ns, 7, true, false, &e);
	CU_ASSERT_EQUAL(e.how, NVME_ERASE_NONE);
	c.fna = 0;                                     /* no crypto erase by format */
	c.sanicap = 0;
	nvme_erase_plan(&c, &ns, 7, true, true, &e);
	CU_ASSERT_EQUAL(e.how, NVME_ERASE_NONE);
	c.oacs = 0;                                    /* no Format NVM at all */
	nvme_erase_plan(&c, &ns, 7, true, false, &e);
	CU_ASSERT_EQUAL(e.how, NVME_ERASE_NONE);
	/* The Sanitize Status log: SPROG, SSTAT 2 in progress, 1 done, 3 failed. */
	log[0] = 0x00;
	log[1] = 0x80;
	log[2] = 2;
	CU_ASSERT_EQUAL(nvme_sanitize_status(log, &prog), 0);
	CU_ASSERT_EQUAL(prog, 0x8000);
	log[2] = 1;
	CU_ASSERT_EQUAL(nvme_sanitize_status(log, &prog), 1);
	log[2] = 4;
	CU_ASSERT_EQUAL(nvme_sanitize_status(log, &prog), 1);
	log[2] = 3;
	CU_ASSERT_EQUAL(nvme_sanitize_status(log, &prog), -EIO);
}

static void test_parse_ns(void)
{
	struct nvme_ns_id n;
	ns_page(1u << 21, 1, 1, 1, 12, 0);
	page[33] = 0x09;
	for (int i = 0; i < 16; i++)
		page[104 + i] = (uint8_t)(0xa0 + i);
	for (int i = 0; i < 8; i++)
		page[120 + i] = (uint8_t)(0x10 + i);
	CU_ASSERT_EQUAL_FATAL(nvme_parse_ns(page, &n, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(n.nsze, 1u << 21);
	CU_ASSERT_EQUAL(n.lba_size, 4096);
	CU_ASSERT_EQUAL(n.lbaf, 1);
	CU_ASSERT_EQUAL(n.dlfeat, 0x09);
	CU_ASSERT_EQUAL(n.nguid[0], 0xa0);
	CU_ASSERT_EQUAL(n.eui64[7], 0x17);

	/* FLBAS bit 4 (metadata at the end of the LBA) does not change the index. */
	ns_page(100, 0, 0x10, 0, 9, 0);
	CU_ASSERT_EQUAL(nvme_parse_ns(page, &n, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(n.lba_size, 512);
	/* More than 16 formats: FLBAS bits 6:5 are the index's bits 5:4. */
	ns_page(100, 40, 0x20 | 0x03, 19, 12, 0);
	CU_ASSERT_EQUAL(nvme_parse_ns(page, &n, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(n.lbaf, 19);
	CU_ASSERT_EQUAL(n.lba_size, 4096);
	/* ... but not with 16 or fewer: the bits are reserved and ignored. */
	ns_page(100, 15, 0x20 | 0x03, 3, 12, 0);
	CU_ASSERT_EQUAL(nvme_parse_ns(page, &n, why, sizeof(why)), 0);
	CU_ASSERT_EQUAL(n.lbaf, 3);
}

/* Hostile pages: each refused with a message naming the field. */
static void test_parse_ns_hostile(void)
{
	struct nvme_ns_id n;
	static const struct { uint64_t nsze; uint8_t nlbaf, flbas; unsigned idx; uint8_t lbads; uint16_t ms;
			      const char *want; } bad[] = {
		{ 0, 0, 0, 0, 9, 0, "NSZE is 0" },
		{ 100, 0, 0, 0, 8, 0, "LBADS 8" },
		{ 100, 0, 0, 0, 13, 0, "LBADS 13" },
		{ 100, 0, 0, 0, 0, 0, "LBADS 0" },
		{ 100, 0, 0, 0, 255, 0, "LBADS 255" },
		{ 100, 1, 2, 2, 9, 0, "FLBAS selects LBA format 2, but NLBAF says there are only 2" },
		{ 100, 3, 0x0f, 15, 9, 0, "FLBAS selects LBA format 15" },
		{ 100, 0, 0, 0, 9, 8, "8 bytes of metadata" },
		{ 100, 0, 0x10, 0, 12, 64, "64 bytes of metadata" },
		{ 100, 64, 0, 0, 9, 0, "NLBAF 64" },
		{ UINT64_MAX / 512 + 1, 0, 0, 0, 9, 0, "overflows" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *want = bad[i].want ? bad[i].want : "";   /* never NULL; GCC with ASan cannot tell */
		ns_page(bad[i].nsze, bad[i].nlbaf, bad[i].flbas, bad[i].idx, bad[i].lbads, bad[i].ms);
		why[0] = 0;
		CU_ASSERT_EQUAL(nvme_parse_ns(page, &n, why, sizeof(why)), -EINVAL);
		if (!strstr(why, want))
			fprintf(stderr, "\ncase %zu: wanted \"%s\", got \"%s\"\n", i, want, why);
		CU_ASSERT_PTR_NOT_NULL(strstr(why, want));
	}
	/* Noise everywhere but valid fields parses without reading past the page. */
	for (int seed = 1; seed < 200; seed++) {
		srand((unsigned)seed);
		for (size_t i = 0; i < sizeof(page); i++)
			page[i] = (uint8_t)rand();
		int rc = nvme_parse_ns(page, &n, why, sizeof(why));
		CU_ASSERT(rc == 0 || rc == -EINVAL);
		if (rc == 0)
			CU_ASSERT(n.lba_size >= 512 && n.lba_size <= 4096 && n.nsze);
	}
}

static void test_serial(void)
{
	struct nvme_ctrl_id c = { .serial = "S1 2" };
	struct nvme_ns_id n = { 0 };
	char s[64];
	for (int i = 0; i < 16; i++)
		n.nguid[i] = (uint8_t)(i * 17);
	n.eui64[0] = 0xee;
	nvme_serial(&c, &n, 1, s, sizeof(s));
	CU_ASSERT_STRING_EQUAL(s, "00112233445566778899aabbccddeeff");
	memset(n.nguid, 0, sizeof(n.nguid));
	nvme_serial(&c, &n, 1, s, sizeof(s));
	CU_ASSERT_STRING_EQUAL(s, "ee00000000000000");
	memset(n.eui64, 0, sizeof(n.eui64));
	nvme_serial(&c, &n, 7, s, sizeof(s));
	CU_ASSERT_STRING_EQUAL(s, "S1 2-7");
	/* From a page: the controller's spaces become '_' (a serial has none, as the config's). */
	ctrl_page(0, 0, 0, 0);
	CU_ASSERT_EQUAL(nvme_parse_ctrl(page, 4096, &c, why, sizeof(why)), 0);
	nvme_serial(&c, &n, 3, s, sizeof(s));
	CU_ASSERT_STRING_EQUAL(s, "S1234___XYZ-3");
	/* Cut to fit, terminated. */
	n.nguid[15] = 1;
	nvme_serial(&c, &n, 3, s, 9);
	CU_ASSERT_STRING_EQUAL(s, "00000000");
}

static void test_max_io(void)
{
	CU_ASSERT_EQUAL(nvme_max_io(128 * 1024, 0, 0, 512), 128 * 1024);
	/* The queue's limits unknown: the kernel's may be below MDTS (segments of scattered pages). */
	CU_ASSERT_EQUAL(nvme_max_io(2u << 20, 0, 0, 512), NVME_DEFAULT_MAX_IO);
	CU_ASSERT_EQUAL(nvme_max_io(0, 0, 0, 512), NVME_DEFAULT_MAX_IO);
	CU_ASSERT_EQUAL(nvme_max_io(2u << 20, 4u << 20, 0, 512), 2u << 20);    /* MDTS below the queue's */
	CU_ASSERT_EQUAL(nvme_max_io(0, 512 * 1024, 0, 4096), 512 * 1024);   /* the queue's limit */
	CU_ASSERT_EQUAL(nvme_max_io(1u << 20, 512 * 1024, 0, 512), 512 * 1024);
	CU_ASSERT_EQUAL(nvme_max_io(1u << 20, 1u << 20, 33, 512), 128 * 1024);   /* 32 pages + one unaligned */
	CU_ASSERT_EQUAL(nvme_max_io(1u << 31, 1u << 31, 0, 512), 65536 * 512);      /* NLB's 16 bits */
	CU_ASSERT_EQUAL(nvme_max_io(1u << 31, 1u << 31, 0, 4096), 1u << 28);
	CU_ASSERT_EQUAL(nvme_max_io(4096, 0, 0, 4096), 4096);
	CU_ASSERT_EQUAL(nvme_max_io(1000, 0, 0, 512), 512);                 /* whole blocks */
	CU_ASSERT_EQUAL(nvme_max_io(4096, 0, 1, 4096), 4096);               /* at least one block */
}

static const struct nvme_geo G512 = { .nsid = 3, .lba_shift = 9, .max_io = 128 * 1024 };

/* Every field but those named is zero. */
static void check_rest_zero(const struct nvme_uring_cmd *c)
{
	CU_ASSERT_EQUAL(c->flags, 0);   /* FUSE and PSDT: the kernel refuses anything else */
	CU_ASSERT_EQUAL(c->rsvd1, 0);
	CU_ASSERT_EQUAL(c->cdw2, 0);
	CU_ASSERT_EQUAL(c->cdw3, 0);
	CU_ASSERT_EQUAL(c->metadata, 0);
	CU_ASSERT_EQUAL(c->metadata_len, 0);
	CU_ASSERT_EQUAL(c->cdw13, 0);
	CU_ASSERT_EQUAL(c->cdw14, 0);
	CU_ASSERT_EQUAL(c->cdw15, 0);
	CU_ASSERT_EQUAL(c->timeout_ms, 0);
	CU_ASSERT_EQUAL(c->rsvd2, 0);
}

static void test_build_rw(void)
{
	static uint8_t buf[8192];
	struct nvme_uring_cmd c;
	uint64_t off = (5ull << 32) * 512 + 4096;   /* an SLBA with bits in cdw11 */
	struct nvme_plan p = { .step = NVME_STEP_READ, .offset = off, .len = 4096, .buf = buf };
	memset(&c, 0xff, sizeof(c));
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0, &c), 4096);
	CU_ASSERT_EQUAL(c.opcode, 0x02);
	CU_ASSERT_EQUAL(c.nsid, 3);
	CU_ASSERT_EQUAL(c.addr, (uint64_t)(uintptr_t)buf);
	CU_ASSERT_EQUAL(c.data_len, 4096);
	CU_ASSERT_EQUAL(c.cdw10, 8);
	CU_ASSERT_EQUAL(c.cdw11, 5);
	CU_ASSERT_EQUAL(c.cdw12, 7);   /* NLB zero-based, no FUA */
	check_rest_zero(&c);
	/* Nothing left. */
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 4096, &c), 0);

	p.step = NVME_STEP_WRITE;
	p.offset = 512;
	p.len = 512;
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0, &c), 512);
	CU_ASSERT_EQUAL(c.opcode, 0x01);
	CU_ASSERT_EQUAL(c.cdw10, 1);
	CU_ASSERT_EQUAL(c.cdw11, 0);
	CU_ASSERT_EQUAL(c.cdw12, 0);
	check_rest_zero(&c);
	p.fua = true;
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0, &c), 512);
	CU_ASSERT_EQUAL(c.cdw12, 1u << 30);
	/* FUA never on a read. */
	p.step = NVME_STEP_READ;
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0, &c), 512);
	CU_ASSERT_EQUAL(c.cdw12, 0);
}

/* A request larger than max_io goes in pieces, each at the right LBA and buffer offset. */
static void test_build_split(void)
{
	static uint8_t buf[1 << 20];
	struct nvme_uring_cmd c;
	struct nvme_plan p = { .step = NVME_STEP_WRITE, .offset = 1 << 20, .len = (1 << 20) - 4096, .buf = buf,
			       .fua = true };
	uint64_t done = 0, piece;
	int n = 0;
	while ((piece = nvme_build(&G512, &p, done, &c)) != 0) {
		CU_ASSERT_EQUAL(c.cdw10, (uint32_t)((p.offset + done) >> 9));
		CU_ASSERT_EQUAL(c.addr, (uint64_t)(uintptr_t)(buf + done));
		CU_ASSERT_EQUAL(c.data_len, piece);
		CU_ASSERT_EQUAL(c.cdw12, (uint32_t)(piece / 512 - 1) | 1u << 30);
		CU_ASSERT(piece <= G512.max_io);
		done += piece;
		n++;
	}
	CU_ASSERT_EQUAL(done, p.len);
	CU_ASSERT_EQUAL(n, 8);
	CU_ASSERT_EQUAL(c.data_len, 0);   /* the last call wrote an empty command */
	/* 65536 blocks exactly: NLB-1 = 0xffff, nothing spills into bit 16. */
	struct nvme_geo big = { .nsid = 1, .lba_shift = 9, .max_io = 65536 * 512 };
	p.len = 65536ull * 512;
	p.fua = false;
	CU_ASSERT_EQUAL(nvme_build(&big, &p, 0, &c), p.len);
	CU_ASSERT_EQUAL(c.cdw12, 0xffff);
}

static void test_build_flush_wz(void)
{
	struct nvme_uring_cmd c;
	struct nvme_plan p = { .step = NVME_STEP_FLUSH };
	memset(&c, 0xff, sizeof(c));
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0, &c), 0);
	CU_ASSERT_EQUAL(c.opcode, 0x00);
	CU_ASSERT_EQUAL(c.nsid, 3);
	CU_ASSERT_EQUAL(c.addr, 0);
	CU_ASSERT_EQUAL(c.data_len, 0);
	CU_ASSERT_EQUAL(c.cdw10, 0);
	CU_ASSERT_EQUAL(c.cdw11, 0);
	CU_ASSERT_EQUAL(c.cdw12, 0);
	check_rest_zero(&c);

	/* Write Zeroes: no data, 65536 blocks per command whatever max_io says. */
	p = (struct nvme_plan){ .step = NVME_STEP_WZ, .offset = 1024, .len = 70000ull * 512 };
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0, &c), 65536ull * 512);
	CU_ASSERT_EQUAL(c.opcode, 0x08);
	CU_ASSERT_EQUAL(c.cdw10, 2);
	CU_ASSERT_EQUAL(c.cdw11, 0);
	CU_ASSERT_EQUAL(c.cdw12, 0xffff);
	CU_ASSERT_EQUAL(c.addr, 0);
	CU_ASSERT_EQUAL(c.data_len, 0);
	check_rest_zero(&c);
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 65536ull * 512, &c), (70000ull - 65536) * 512);
	CU_ASSERT_EQUAL(c.cdw10, 2 + 65536);
	CU_ASSERT_EQUAL(c.cdw12, 70000 - 65536 - 1);
	/* DEAC and FUA. */
	p.step = NVME_STEP_WZ_DEAC;
	p.fua = true;
	p.len = 512;
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0, &c), 512);
	CU_ASSERT_EQUAL(c.cdw12, (1u << 25) | (1u << 30));
	/* WZSL: no Write Zeroes past the controller's limit, in whole blocks. */
	struct nvme_geo g = G512;
	g.max_wz = 32768;
	p = (struct nvme_plan){ .step = NVME_STEP_WZ, .offset = 0, .len = 1 << 20 };
	CU_ASSERT_EQUAL(nvme_build(&g, &p, 0, &c), 32768);
	CU_ASSERT_EQUAL(c.cdw12, 63);
	CU_ASSERT_EQUAL(nvme_build(&g, &p, (1 << 20) - 32768, &c), 32768);
	g.max_wz = 1000;   /* under one 512-byte block twice: one block per command */
	CU_ASSERT_EQUAL(nvme_build(&g, &p, 0, &c), 512);
}

static void test_build_dsm(void)
{
	struct nvme_uring_cmd c;
	struct nvme_dsm_range r;
	uint8_t raw[16];
	uint64_t blocks = (1ull << 32) + 10;
	struct nvme_plan p = { .step = NVME_STEP_DSM, .offset = 7ull * 512, .len = blocks * 512, .range = &r };
	memset(&c, 0xff, sizeof(c));
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0, &c), 0xffffffffull * 512);
	CU_ASSERT_EQUAL(c.opcode, 0x09);
	CU_ASSERT_EQUAL(c.nsid, 3);
	CU_ASSERT_EQUAL(c.cdw10, 0);          /* NR: one range */
	CU_ASSERT_EQUAL(c.cdw11, 1u << 2);    /* AD */
	CU_ASSERT_EQUAL(c.cdw12, 0);
	CU_ASSERT_EQUAL(c.addr, (uint64_t)(uintptr_t)&r);
	CU_ASSERT_EQUAL(c.data_len, 16);
	check_rest_zero(&c);
	/* The range on the wire: context attributes, length in blocks, starting LBA, little-endian. */
	memcpy(raw, &r, 16);
	static const uint8_t want1[16] = { 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 7, 0, 0, 0, 0, 0, 0, 0 };
	CU_ASSERT_EQUAL(memcmp(raw, want1, 16), 0);
	/* The rest: 11 blocks from 7 + 0xffffffff. */
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, 0xffffffffull * 512, &c), 11 * 512);
	memcpy(raw, &r, 16);
	static const uint8_t want2[16] = { 0, 0, 0, 0, 11, 0, 0, 0, 6, 0, 0, 0, 1, 0, 0, 0 };
	CU_ASSERT_EQUAL(memcmp(raw, want2, 16), 0);
	CU_ASSERT_EQUAL(nvme_build(&G512, &p, p.len, &c), 0);
}

/* WRITE SAME from a buffer of whole patterns: pieces never cut a block, resume mid-pattern. */
static void test_build_fill(void)
{
	static uint8_t fill[3 * 1536];
	struct nvme_uring_cmd c;
	struct nvme_geo g = { .nsid = 1, .lba_shift = 9, .max_io = 2048 };
	struct nvme_plan p = { .step = NVME_STEP_FILL, .offset = 0, .len = 6 * 1536, .buf = fill,
			       .fill_len = sizeof(fill), .pattern_len = 1536, .fua = true };
	uint64_t done = 0, piece;
	while ((piece = nvme_build(&g, &p, done, &c)) != 0) {
		uint64_t phase = done % 1536;
		CU_ASSERT_EQUAL(c.opcode, 0x01);
		CU_ASSERT_EQUAL(c.addr, (uint64_t)(uintptr_t)(fill + phase));
		CU_ASSERT(phase + piece <= sizeof(fill));
		CU_ASSERT_EQUAL(piece % 512, 0);
		CU_ASSERT(c.cdw12 & (1u << 30));
		done += piece;
	}
	CU_ASSERT_EQUAL(done, p.len);
}

static void test_status(void)
{
	static const struct { int status, err; } t[] = {
		{ 0x0000, 0 }, { 0x0001, -EOPNOTSUPP }, { 0x4002, -EINVAL }, { 0x0080, -EINVAL }, { 0x0081, -ENOSPC },
		{ 0x0020, -EROFS }, { 0x0083, -EBADE }, { 0x0006, -EIO }, { 0x0004, -EIO }, { 0x0082, -EBUSY },
		{ 0x0182, -EROFS }, { 0x0280, -EIO }, { 0x0281, -EIO }, { 0x0282, -EIO }, { 0x0285, -EILSEQ },
		{ 0x4285, -EILSEQ }, { 0x0286, -EACCES }, { 0x0287, -ENODATA }, { 0x0300, -EIO }, { 0x0701, -EIO },
		{ 0x00ff, -EIO }, { -ENOMEM, -ENOMEM },
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (nvme_status_errno(t[i].status) != t[i].err)
			fprintf(stderr, "\nstatus 0x%x: got %d want %d\n", t[i].status, nvme_status_errno(t[i].status),
				t[i].err);
		CU_ASSERT_EQUAL(nvme_status_errno(t[i].status), t[i].err);
	}
	CU_ASSERT_TRUE(nvme_status_unsupported(0x0001));
	CU_ASSERT_TRUE(nvme_status_unsupported(0x4002));
	CU_ASSERT_FALSE(nvme_status_unsupported(0x0080));
	CU_ASSERT_FALSE(nvme_status_unsupported(0x0102));
	CU_ASSERT_FALSE(nvme_status_unsupported(-EINVAL));
	char s[112];
	CU_ASSERT_STRING_EQUAL(nvme_status_str(0x4285, s, sizeof(s)),
			       "status 0x4285: SCT 2h SC 85h (Compare Failure), do not retry");
	CU_ASSERT_PTR_NOT_NULL(strstr(nvme_status_str(0x0181, s, sizeof(s)), "Invalid Protection Information"));
}

/* --- the engine's choices, on a backstore filled in by hand (no device, no system call) --- */

static struct nvme_bs NB;
#define BS (NB.bs)   /* the store nvme.c's functions take: NB's own */

static void fake_bs(uint16_t oncs, uint8_t dlfeat, bool vwc, bool thin, enum nvme_step unmap)
{
	memset(&NB, 0, sizeof(NB));
	NB.geo = G512;
	NB.ctrl.oncs = oncs;
	NB.ctrl.vwc = vwc;
	NB.ns.dlfeat = dlfeat;
	NB.unmap = unmap;
	NB.claim_fd = -1;
	BS.name = "nv";
	BS.type = BACKSTORE_NVME;
	BS.block_size = 512;
	BS.size = 1 << 30;
	BS.thin = thin;
	BS.write_cache = true;
	NB.fd = -1;
}

static struct bs_io io_of(enum backstore_op op, uint64_t off, uint64_t len, void *buf)
{
	return (struct bs_io){ .op = op, .offset = off, .len = len, .buf = buf, .pattern_len = 512, .bs = &BS };
}

static void test_engine_stages(void)
{
	static uint8_t zero[512], pat[512] = { 1 };
	uint8_t *odd = malloc(4096 + 2);
	struct bs_io io;

	fake_bs(NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES, 0, true, true, NVME_STEP_DSM);
	io = io_of(BS_UNMAP, 0, 4096, NULL);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_DSM);
	CU_ASSERT_PTR_NOT_NULL(io.bounce);   /* the range */
	CU_ASSERT_EQUAL((uintptr_t)io.bounce % 4, 0);
	free(io.bounce);
	/* Not thin: UNMAP zeroes, by Write Zeroes. */
	BS.thin = false;
	io = io_of(BS_UNMAP, 0, 4096, NULL);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_WZ);
	/* WRITE SAME of zeroes: Write Zeroes; of a pattern: Writes from a buffer of patterns. */
	io = io_of(BS_WRITE_SAME, 0, 8192, zero);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_WZ);
	io = io_of(BS_WRITE_SAME, 0, 8192, pat);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_FILL);
	CU_ASSERT_EQUAL(io.bounce_len, 8192);
	CU_ASSERT_EQUAL(((uint8_t *)io.bounce)[512], 1);
	free(io.bounce);
	/* Without Write Zeroes: zeroes are written. */
	fake_bs(0, 0, true, true, NVME_STEP_WZ);
	io = io_of(BS_UNMAP, 0, 4096, NULL);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_FILL);
	CU_ASSERT_TRUE(bs_is_zero(io.bounce, io.bounce_len));
	free(io.bounce);
	/* FLUSH: nothing to send without a volatile write cache. */
	fake_bs(0, 0, false, true, NVME_STEP_WZ);
	io = io_of(BS_FLUSH, 0, 0, NULL);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 1);
	fake_bs(0, 0, true, true, NVME_STEP_WZ);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_FLUSH);
	/* A buffer off the dword rule goes through a bounce buffer; an aligned one does not. */
	io = io_of(BS_WRITE, 0, 4096, odd + 2);
	odd[2] = 0x5a;
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_PTR_NOT_NULL(io.bounce);
	CU_ASSERT_EQUAL(((uint8_t *)io.bounce)[0], 0x5a);
	free(io.bounce);
	io = io_of(BS_READ, 0, 4096, odd);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_PTR_NULL(io.bounce);
	/* FUA: asked, or the LU has no write cache. */
	io = io_of(BS_WRITE, 0, 4096, odd);
	CU_ASSERT_FALSE(nv_fua(&BS, &io));
	io.fua = true;
	CU_ASSERT_TRUE(nv_fua(&BS, &io));
	io.fua = false;
	backstore_set_write_cache(&BS, false);
	CU_ASSERT_TRUE(nv_fua(&BS, &io));
	free(odd);
}

/* Results: pieces counted, errors mapped, unsupported Write Zeroes / DSM fall back and are remembered. */
static void test_engine_results(void)
{
	static uint8_t buf[256 * 1024];
	struct bs_io io;

	fake_bs(NVME_ONCS_DSM | NVME_ONCS_WRITE_ZEROES, 0, true, true, NVME_STEP_DSM);
	io = io_of(BS_WRITE, 0, sizeof(buf), buf);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0), 1);
	CU_ASSERT_EQUAL(io.done, 128 * 1024);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, -EAGAIN), 1);   /* the same piece again */
	CU_ASSERT_EQUAL(io.done, 128 * 1024);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0), 0);
	CU_ASSERT_EQUAL(io.err, 0);
	CU_ASSERT_EQUAL(io.done, sizeof(buf));

	io = io_of(BS_READ, 0, 4096, buf);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0x0281), 0);   /* Unrecovered Read Error */
	CU_ASSERT_EQUAL(io.err, -EIO);
	CU_ASSERT_TRUE(NB.logged);
	io = io_of(BS_WRITE, 0, 4096, buf);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0x0020), 0);
	CU_ASSERT_EQUAL(io.err, -EROFS);
	io = io_of(BS_WRITE, 0, 4096, buf);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, -ENODEV), 0);
	CU_ASSERT_EQUAL(io.err, -ENODEV);
	/* Cancelled by the driver (timeout, reset): an error, not sent again. */
	io = io_of(BS_WRITE, 0, 4096, buf);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, -EINTR), 0);
	CU_ASSERT_EQUAL(io.err, -EINTR);

	/* DSM refused as an invalid opcode: this UNMAP goes on as Write Zeroes, later ones start there. */
	BS.discard = true;
	io = io_of(BS_UNMAP, 0, 8192, NULL);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_DSM);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0x0001), 1);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_WZ);
	CU_ASSERT_TRUE(NB.no_dsm);
	CU_ASSERT_FALSE(BS.discard);   /* LBPRZ holds now */
	/* Write Zeroes refused too: written zeroes. */
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0x4002), 1);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_FILL);
	CU_ASSERT_TRUE(NB.no_wz);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0), 0);
	CU_ASSERT_EQUAL(io.err, 0);
	free(io.bounce);
	io = io_of(BS_UNMAP, 0, 8192, NULL);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(io.stage, NVME_STEP_FILL);
	free(io.bounce);
	/* An unsupported status on a Write is an error, not a fall-back. */
	io = io_of(BS_WRITE, 0, 4096, buf);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0x0001), 0);
	CU_ASSERT_EQUAL(io.err, -EOPNOTSUPP);
	/* A FLUSH is one command. */
	io = io_of(BS_FLUSH, 0, 0, NULL);
	CU_ASSERT_EQUAL(nv_start(&BS, &io), 0);
	CU_ASSERT_EQUAL(nv_result(&BS, &io, 0), 0);
	CU_ASSERT_EQUAL(io.err, 0);
}

/*
 * SANITIZE's erases are offered only when the kernel passes this process's
 * admin commands (nv_probe_admin at open): a process without CAP_SYS_ADMIN
 * must not be offered a BLOCK ERASE that fails and leaves the LU in
 * sanitize failure mode.
 */
static void test_erase_withheld(void)
{
	const unsigned both = BS_SANITIZE_BLOCK_ERASE | BS_SANITIZE_CRYPTO_ERASE;

	fake_bs(0, 0, true, true, NVME_STEP_WZ);
	BS.ops = &bs_nvme_ops;
	NB.ctrl.oacs = NVME_OACS_FORMAT;   /* Format NVM, with crypto erase, one namespace: both erases planned */
	NB.ctrl.fna = NVME_FNA_CRYPTO;
	NB.ctrl.nn = 1;
	NB.ns.nsze = BS.size / 512;
	NB.ns.lba_size = 512;
	CU_ASSERT_EQUAL(nv_sanitize_plans(&BS), both);
	CU_ASSERT_EQUAL(backstore_sanitize_methods(&BS), both);
	CU_ASSERT_STRING_EQUAL(nv_erase_word(&BS, false), "by Format NVM");

	/* The probe reports what the kernel said to the ioctl: here a descriptor that is no NVMe device. */
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(nv_probe_admin(fd), -ENOTTY);
	close(fd);

	/* Refused (EACCES: no CAP_SYS_ADMIN): nothing offered, nothing sent, the log line says so. */
	NB.admin = -EACCES;
	CU_ASSERT_EQUAL(nv_sanitize_plans(&BS), both);
	CU_ASSERT_EQUAL(backstore_sanitize_methods(&BS), 0);
	CU_ASSERT_EQUAL(backstore_sanitize(&BS, BS_SANITIZE_BLOCK_ERASE, 0, BS.size), -EOPNOTSUPP);
	CU_ASSERT_EQUAL(backstore_sanitize(&BS, BS_SANITIZE_CRYPTO_ERASE, 0, BS.size), -EOPNOTSUPP);
	CU_ASSERT_STRING_EQUAL(backstore_sanitize_how(&BS, BS_SANITIZE_BLOCK_ERASE), "not offered");
	CU_ASSERT_STRING_EQUAL(nv_erase_word(&BS, false), "not offered (admin commands refused, below)");
	CU_ASSERT_STRING_EQUAL(nv_erase_word(&BS, true), "not offered (admin commands refused, below)");
	/* A read-only backstore is offered none either way. */
	NB.admin = 0;
	BS.readonly = true;
	CU_ASSERT_EQUAL(backstore_sanitize_methods(&BS), 0);
}

/* Open refuses what is not a namespace's generic char device, saying what to use. */
static void test_open_refused(void)
{
	struct backstore *bs = NULL;
	char err[512];
	char tmp[] = "/tmp/test_nvme.XXXXXX";
	int fd = mkstemp(tmp);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(ftruncate(fd, 1 << 20), 0);
	close(fd);

	struct backstore_cfg c = { .name = "n", .type = BACKSTORE_NVME, .path = tmp };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -ENODEV);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "use type file"));
	c.path = "/dev/null";
	CU_ASSERT(backstore_open(&c, &bs, err, sizeof(err)) < 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not an NVMe namespace's generic char device"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "/dev/null"));
	c.path = "/nonexistent/ng0n1";
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "path '/nonexistent/ng0n1'"));
	c.path = NULL;
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "path: required for an nvme backstore: give the namespace's generic char device (/dev/ngXnY)"));
	CU_ASSERT_PTR_NULL(bs);
	unlink(tmp);

	/* A block device, where the host has one. */
	static const char *const blk[] = { "/dev/loop0", "/dev/sda", "/dev/vda", "/dev/nvme0n1" };
	for (size_t i = 0; i < sizeof(blk) / sizeof(blk[0]); i++) {
		struct stat st;
		if (stat(blk[i], &st) || !S_ISBLK(st.st_mode))
			continue;
		c.path = blk[i];
		CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -ENODEV);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "use type block for /dev/nvme0n1"));
		break;
	}
}

static void test_block_name(void)
{
	char b[32];
	CU_ASSERT_TRUE(nv_block_name("/dev/ng0n1", b, sizeof(b)));
	CU_ASSERT_STRING_EQUAL(b, "nvme0n1");
	CU_ASSERT_TRUE(nv_block_name("/dev/ng12n345", b, sizeof(b)));
	CU_ASSERT_STRING_EQUAL(b, "nvme12n345");
	CU_ASSERT_FALSE(nv_block_name("/dev/ng0n1p1", b, sizeof(b)));
	CU_ASSERT_FALSE(nv_block_name("/dev/nvme0n1", b, sizeof(b)));
	CU_ASSERT_FALSE(nv_block_name("/dev/disk/by-id/nvme-x", b, sizeof(b)));
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("nvme", NULL, NULL);
	CU_add_test(s, "Identify Controller", test_parse_ctrl);
	CU_add_test(s, "Identify Namespace", test_parse_ns);
	CU_add_test(s, "SANITIZE: NVMe Sanitize or Format NVM", test_erase_plan);
	CU_add_test(s, "SANITIZE: erases withheld without admin commands", test_erase_withheld);
	CU_add_test(s, "Identify Namespace: hostile pages", test_parse_ns_hostile);
	CU_add_test(s, "serial: NGUID, EUI64, SN-nsid", test_serial);
	CU_add_test(s, "bytes per command", test_max_io);
	CU_add_test(s, "Read and Write commands", test_build_rw);
	CU_add_test(s, "split by max_io", test_build_split);
	CU_add_test(s, "Flush and Write Zeroes", test_build_flush_wz);
	CU_add_test(s, "Dataset Management", test_build_dsm);
	CU_add_test(s, "WRITE SAME from a pattern buffer", test_build_fill);
	CU_add_test(s, "status to errno", test_status);
	CU_add_test(s, "engine: commands chosen", test_engine_stages);
	CU_add_test(s, "engine: results and fall-backs", test_engine_results);
	CU_add_test(s, "open refuses what is not /dev/ngXnY", test_open_refused);
	CU_add_test(s, "block device of a namespace", test_block_name);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
