/*
 * ALUA in the SCSI layer (target/scsi/alua/): which commands each access
 * state lets through (every opcode table entry against SPC-4 5.16.2.4's
 * lists, written out here independently of the table's flags), the unit
 * attention a change leaves for every nexus, REPORT TARGET PORT GROUPS
 * bytes, SET TARGET PORT GROUPS and its refusals, and configure keeping a
 * running state.  A RAM LU, two ports in two groups, no reactor.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/config/config.h"
#include "target/scsi/alua/alua.h"
#include "target/scsi/scsi_int.h"

#include "scsi_harness.h"
#include "unit_run.h"

static struct backstore *bstore;
static struct scsi_lu *LU;
static struct scsi_alua *A;
static struct scsi_nexus NX1 = { .initiator_name = "iqn.test:i", .initiator_port = "iqn.test:i,i,0x000000000001",
				 .target_name = "iqn.test:t", .target_port = "iqn.test:t,t,0x0001",
				 .rel_port_id = 1, .id = 1 };
static struct scsi_nexus NX2 = { .initiator_name = "iqn.test:i", .initiator_port = "iqn.test:i,i,0x000000000002",
				 .target_name = "iqn.test:t", .target_port = "iqn.test:t,t,0x0002",
				 .rel_port_id = 2, .id = 2 };
static const uint16_t P10[] = { 1 }, P20[] = { 2, 300 };

static uint8_t run(const struct scsi_nexus *nx, const uint8_t *cdb, uint32_t edtl, bool wr, const void *dout,
		   struct scsi_cmd *c)
{
	sh_cmd_init(c, LU, cdb, 16, edtl, !wr && edtl, wr);
	c->nexus = nx;
	if (!sh_prepare(c, dout, UINT32_MAX))   /* dout holds what the command asks for */
		return c->status;
	scsi_cmd_exec(c);
	return c->status;
}

static uint16_t asc(const struct scsi_cmd *c)
{
	return get_be16(c->sense + 12);   /* fixed format: D_SENSE is off */
}

static uint8_t key(const struct scsi_cmd *c)
{
	return c->sense[2] & 0xf;
}

static void configure(uint8_t modes, uint8_t s10, uint8_t s20, bool keep)
{
	struct scsi_alua_group g[] = {
		{ .id = 10, .state = s10, .preferred = true, .keep_state = keep, .ports = P10, .nports = 1 },
		{ .id = 20, .state = s20, .keep_state = keep, .ports = P20, .nports = 2 },
	};
	CU_ASSERT_EQUAL(scsi_alua_configure(A, modes, 7, g, 2), 0);
}

/* Commands until one is not a unit attention; how many ASYMMETRIC ACCESS STATE CHANGED were seen. */
static int drain_ua(const struct scsi_nexus *nx)
{
	uint8_t inq[16] = { 0x12, 0, 0, 0, 96 };
	uint8_t tur[16] = { 0 };
	struct scsi_cmd c;
	int n = 0;
	run(nx, inq, 96, false, NULL, &c); /* INQUIRY keeps it: still there afterwards */
	scsi_cmd_release(&c);
	for (int i = 0; i < 8; i++) {
		uint8_t st = run(nx, tur, 0, false, NULL, &c);
		bool ua = st == SCSI_CHECK_CONDITION && key(&c) == SK_UNIT_ATTENTION;
		if (ua && asc(&c) == ASC_ALUA_STATE_CHANGED)
			n++;
		scsi_cmd_release(&c);
		if (!ua)
			break;
	}
	return n;
}

static int setup(void)
{
	struct backstore_cfg cfg = { .name = "r0", .type = BACKSTORE_RAM, .size = 1 << 20, .block_size = 512 };
	char err[256];
	if (sh_pool_open() || backstore_open(&cfg, &bstore, err, sizeof(err)) < 0)
		return -1;
	struct scsi_lu_params p = { .serial = "S1", .name = "r0" };
	if (scsi_lu_create(bstore, &p, &LU))
		return -1;
	A = scsi_alua_get("iqn.test:t");
	NX1.port = scsi_alua_port(A, 1);
	NX2.port = scsi_alua_port(A, 2);
	if (!A || !NX1.port || !NX2.port || scsi_alua_get("iqn.test:t") != A || scsi_alua_port(A, 1) != NX1.port)
		return -1;
	struct scsi_alua_group g[] = {
		{ .id = 10, .state = ALUA_ACTIVE_OPTIMIZED, .preferred = true, .ports = P10, .nports = 1 },
		{ .id = 20, .state = ALUA_ACTIVE_NONOPTIMIZED, .ports = P20, .nports = 2 },
	};
	if (scsi_alua_configure(A, SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT, 7, g, 2))
		return -1;
	NX1.alua_gen = scsi_alua_gen(NX1.port);   /* as at login */
	NX2.alua_gen = scsi_alua_gen(NX2.port);
	return 0;
}

static int teardown(void)
{
	scsi_lu_destroy(LU);
	backstore_close(bstore);
	scsi_alua_free_all();
	return sh_pool_close();
}

/* SPC-4 5.16.2.4.4-6, written out: may op run in state st? */
static bool spc_allows(uint8_t st, const struct scsi_op *op)
{
	uint8_t o = op->opcode;
	bool everywhere = o == SCSI_OP_INQUIRY || o == SCSI_OP_REPORT_LUNS || o == SCSI_OP_REQUEST_SENSE ||
			  (o == SCSI_OP_MAINTENANCE_IN && op->sa == SCSI_MI_REPORT_TPGS);
	bool stpg = o == SCSI_OP_MAINTENANCE_OUT && op->sa == SCSI_MO_SET_TPGS;
	switch (st) {
	case ALUA_ACTIVE_OPTIMIZED:
	case ALUA_ACTIVE_NONOPTIMIZED:
		return true;
	case ALUA_STANDBY:
		return everywhere || stpg || o == SCSI_OP_MODE_SENSE6 || o == SCSI_OP_MODE_SENSE10 ||
		       o == SCSI_OP_MODE_SELECT6 || o == SCSI_OP_MODE_SELECT10 || o == SCSI_OP_PR_IN ||
		       o == SCSI_OP_PR_OUT || o == SCSI_OP_LOG_SENSE || o == SCSI_OP_RECEIVE_DIAGNOSTIC;
	case ALUA_UNAVAILABLE:
		return everywhere || stpg;
	default:
		return everywhere;
	}
}

static void test_gating_table(void)
{
	static const struct {
		uint8_t st;
		uint16_t asc;
	} states[] = {
		{ ALUA_ACTIVE_OPTIMIZED, 0 },
		{ ALUA_ACTIVE_NONOPTIMIZED, 0 },
		{ ALUA_STANDBY, ASC_LU_NOT_ACCESSIBLE_STANDBY },
		{ ALUA_UNAVAILABLE, ASC_LU_NOT_ACCESSIBLE_UNAVAILABLE },
		{ ALUA_TRANSITIONING, ASC_LU_NOT_ACCESSIBLE_TRANSITION },
	};
	for (size_t s = 0; s < ARRAY_SIZE(states); s++) {
		configure(SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT, states[s].st, ALUA_ACTIVE_OPTIMIZED, false);
		CU_ASSERT_EQUAL(alua_not_ready_asc(&NX1), states[s].asc);
		CU_ASSERT_EQUAL(alua_not_ready_asc(&NX2), 0);
		for (size_t i = 0; i < scsi_op_count(); i++) {
			const struct scsi_op *op = scsi_op_at(i);
			struct scsi_cmd c;
			memset(&c, 0, sizeof(c));
			c.nexus = &NX1;
			bool ok = alua_check(&c, op);
			if (ok != spc_allows(states[s].st, op))
				fprintf(stderr, "\nstate %#x: opcode %#x sa %#x %s\n", states[s].st, op->opcode, op->sa,
					ok ? "runs" : "refused");
			CU_ASSERT_EQUAL(ok, spc_allows(states[s].st, op));
			if (!ok) {
				CU_ASSERT_EQUAL(c.status, SCSI_CHECK_CONDITION);
				CU_ASSERT_EQUAL(key(&c), SK_NOT_READY);
				CU_ASSERT_EQUAL(asc(&c), states[s].asc);
			}
			/* The other group's port is active: everything runs there. */
			c.nexus = &NX2;
			CU_ASSERT_TRUE(alua_check(&c, op));
		}
	}
	/* A nexus without an ALUA port (no target object): active. */
	struct scsi_nexus bare = { .id = 9 };
	CU_ASSERT_EQUAL(alua_not_ready_asc(&bare), 0);
	CU_ASSERT_EQUAL(alua_group_id(&bare), 1);
	CU_ASSERT_EQUAL(alua_group_id(&NX1), 10);
	CU_ASSERT_EQUAL(alua_group_id(&NX2), 20);
	configure(SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT, ALUA_ACTIVE_OPTIMIZED, ALUA_ACTIVE_NONOPTIMIZED, false);
	drain_ua(&NX1);
	drain_ua(&NX2);
}

static void test_commands_in_standby(void)
{
	uint8_t rd[16] = { 0x28, 0, 0, 0, 0, 0, 0, 0, 1 }, inq[16] = { 0x12, 0, 0, 0, 96 };
	struct scsi_cmd c;
	configure(SCSI_ALUA_IMPLICIT, ALUA_STANDBY, ALUA_ACTIVE_NONOPTIMIZED, false);
	CU_ASSERT_EQUAL(drain_ua(&NX1), 1);
	CU_ASSERT_EQUAL(drain_ua(&NX2), 1);
	CU_ASSERT_EQUAL(run(&NX1, rd, 512, false, NULL, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(key(&c), SK_NOT_READY);
	CU_ASSERT_EQUAL(asc(&c), ASC_LU_NOT_ACCESSIBLE_STANDBY);
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(run(&NX1, inq, 96, false, NULL, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.buf->data[5] & 0x30, 0x10);   /* TPGS: implicit */
	scsi_cmd_release(&c);
	CU_ASSERT_EQUAL(run(&NX2, rd, 512, false, NULL, &c), SCSI_GOOD);
	scsi_cmd_release(&c);
	/* No change, no unit attention: the same document applied again. */
	configure(SCSI_ALUA_IMPLICIT, ALUA_STANDBY, ALUA_ACTIVE_NONOPTIMIZED, false);
	CU_ASSERT_EQUAL(drain_ua(&NX1), 0);
	/* keep_state: a group that exists keeps what runs whatever the document says. */
	configure(SCSI_ALUA_IMPLICIT, ALUA_ACTIVE_OPTIMIZED, ALUA_ACTIVE_OPTIMIZED, true);
	uint8_t st, status;
	CU_ASSERT_EQUAL(scsi_alua_group_state(A, 10, &st, &status), 0);
	CU_ASSERT_EQUAL(st, ALUA_STANDBY);
	CU_ASSERT_EQUAL(status, ALUA_STATUS_IMPLICIT);
	CU_ASSERT_EQUAL(scsi_alua_group_state(A, 99, &st, &status), -ENOENT);
	CU_ASSERT_EQUAL(drain_ua(&NX1), 0);
	configure(SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT, ALUA_ACTIVE_OPTIMIZED, ALUA_ACTIVE_NONOPTIMIZED, false);
	CU_ASSERT_EQUAL(drain_ua(&NX1), 1);
	CU_ASSERT_EQUAL(drain_ua(&NX2), 1);
}

static void test_rtpg(void)
{
	uint8_t cdb[16] = { 0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 1, 0 };
	static const uint8_t want[] = {
		0, 0, 0, 28,
		0x80, 0x8f, 0, 10, 0, 2, 0, 1, 0, 0, 0, 1,
		0x01, 0x8f, 0, 20, 0, 2, 0, 2, 0, 0, 0, 2, 0, 0, 0x01, 0x2c,
	};
	struct scsi_cmd c;
	CU_ASSERT_EQUAL(run(&NX1, cdb, 256, false, NULL, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, sizeof(want));
	CU_ASSERT_EQUAL(memcmp(c.buf->data, want, sizeof(want)), 0);
	scsi_cmd_release(&c);
	cdb[1] = 0x20 | 0x0a;   /* extended header */
	CU_ASSERT_EQUAL(run(&NX2, cdb, 256, false, NULL, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(c.din_len, sizeof(want) + 4);
	CU_ASSERT_EQUAL(get_be32(c.buf->data), 32);
	CU_ASSERT_EQUAL(c.buf->data[4], 0x10);
	CU_ASSERT_EQUAL(c.buf->data[5], 7);
	CU_ASSERT_EQUAL(memcmp(c.buf->data + 8, want + 4, sizeof(want) - 4), 0);
	scsi_cmd_release(&c);
	cdb[1] = 0x40 | 0x0a;   /* format 2: reserved */
	CU_ASSERT_EQUAL(run(&NX1, cdb, 256, false, NULL, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_CDB);
	scsi_cmd_release(&c);
}

static uint8_t stpg(const struct scsi_nexus *nx, uint32_t plen, const uint8_t *list, uint32_t len, struct scsi_cmd *c)
{
	uint8_t cdb[16] = { 0xa4, 0x0a };
	put_be32(cdb + 6, plen);
	uint8_t st = run(nx, cdb, len, len > 0, list, c);
	scsi_cmd_release(c);
	return st;
}

/* REPORT SUPPORTED OPERATION CODES for SET TARGET PORT GROUPS: the SUPPORT field. */
static int rsoc_stpg_support(const struct scsi_nexus *nx)
{
	uint8_t cdb[16] = { 0xa3, 0x0c, 0x02, 0xa4, 0x00, 0x0a, 0, 0, 0, 64 };
	struct scsi_cmd c;
	int support = -1;

	if (run(nx, cdb, 64, false, NULL, &c) == SCSI_GOOD && c.din_len >= 2)
		support = c.buf->data[1] & 0x7;
	scsi_cmd_release(&c);
	return support;
}

static void test_stpg(void)
{
	uint8_t list[12] = { 0, 0, 0, 0, ALUA_STANDBY, 0, 0, 10, ALUA_ACTIVE_OPTIMIZED, 0, 0, 20 };
	uint8_t st, status;
	struct scsi_cmd c;

	CU_ASSERT_EQUAL(stpg(&NX2, 12, list, 12, &c), SCSI_GOOD);
	CU_ASSERT_EQUAL(scsi_alua_group_state(A, 10, &st, &status), 0);
	CU_ASSERT_EQUAL(st, ALUA_STANDBY);
	CU_ASSERT_EQUAL(status, ALUA_STATUS_STPG);
	CU_ASSERT_EQUAL(drain_ua(&NX2), 0);   /* the nexus that asked */
	CU_ASSERT_EQUAL(drain_ua(&NX1), 1);
	CU_ASSERT_EQUAL(alua_not_ready_asc(&NX1), ASC_LU_NOT_ACCESSIBLE_STANDBY);

	/* Refusals: nothing changes. */
	uint8_t bad[12];
	memcpy(bad, list, 12);
	bad[4] = 0x0e;   /* offline */
	CU_ASSERT_EQUAL(stpg(&NX2, 12, bad, 12, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(c.sense[15], 0x80 | 0x08 | 3);
	CU_ASSERT_EQUAL(get_be16(c.sense + 16), 4);
	memcpy(bad, list, 12);
	bad[11] = 21;    /* no group 21 */
	CU_ASSERT_EQUAL(stpg(&NX2, 12, bad, 12, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(get_be16(c.sense + 16), 10);
	memcpy(bad, list, 12);
	bad[11] = 10;    /* group 10 twice */
	CU_ASSERT_EQUAL(stpg(&NX2, 12, bad, 12, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(stpg(&NX2, 6, list, 6, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_PARAM_LIST_LENGTH_ERROR);
	CU_ASSERT_EQUAL(stpg(&NX2, 2, list, 2, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_PARAM_LIST_LENGTH_ERROR);
	CU_ASSERT_EQUAL(stpg(&NX2, 0xffffffff, list, 12, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_PARAM_LIST_LENGTH_ERROR);
	/* Fewer bytes than the list length says (the EDTL cut it). */
	CU_ASSERT_EQUAL(stpg(&NX2, 12, list, 8, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(asc(&c), ASC_PARAM_LIST_LENGTH_ERROR);
	CU_ASSERT_EQUAL(scsi_alua_group_state(A, 20, &st, &status), 0);
	CU_ASSERT_EQUAL(st, ALUA_ACTIVE_OPTIMIZED);
	CU_ASSERT_EQUAL(drain_ua(&NX1), 0);
	/* Zero length: GOOD, no change. */
	CU_ASSERT_EQUAL(stpg(&NX1, 0, NULL, 0, &c), SCSI_GOOD);
	/* Implicit only: not supported. */
	configure(SCSI_ALUA_IMPLICIT, ALUA_ACTIVE_OPTIMIZED, ALUA_ACTIVE_NONOPTIMIZED, false);
	drain_ua(&NX1);
	drain_ua(&NX2);
	CU_ASSERT_EQUAL(stpg(&NX1, 12, list, 12, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(key(&c), SK_ILLEGAL_REQUEST);
	CU_ASSERT_EQUAL(asc(&c), ASC_INVALID_OPCODE);
	CU_ASSERT_EQUAL(scsi_alua_group_state(A, 10, &st, &status), 0);
	CU_ASSERT_EQUAL(st, ALUA_ACTIVE_OPTIMIZED);
	/* ... and REPORT SUPPORTED OPERATION CODES says so (SUPPORT 001b), and 011b with explicit mode back. */
	CU_ASSERT_EQUAL(rsoc_stpg_support(&NX1), 1);
	configure(SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT, ALUA_ACTIVE_OPTIMIZED, ALUA_ACTIVE_NONOPTIMIZED, false);
	drain_ua(&NX1);
	drain_ua(&NX2);
	CU_ASSERT_EQUAL(rsoc_stpg_support(&NX1), 3);
}

/*
 * The running configuration's copy of the states follows the model by its
 * count of changes: SET TARGET PORT GROUPS moves it, a refused one or the
 * configuration's own groups do not, and the copy takes what runs.
 */
static void test_states_copied(void)
{
	struct cfg_alua_group cg[] = { { .id = 10, .state = ALUA_ACTIVE_OPTIMIZED },
				       { .id = 20, .state = ALUA_ACTIVE_NONOPTIMIZED } };
	struct cfg_target ct = { .iqn = "iqn.test:t", .alua_groups = cg, .nalua_groups = 2 };
	struct config cfg = { .targets = &ct, .ntargets = 1 };
	pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
	uint8_t list[8] = { 0, 0, 0, 0, ALUA_STANDBY, 0, 0, 20 };
	struct scsi_cmd c;

	configure(SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT, ALUA_ACTIVE_OPTIMIZED, ALUA_ACTIVE_NONOPTIMIZED, false);
	drain_ua(&NX1);
	drain_ua(&NX2);
	uint32_t n = scsi_alua_changes();
	configure(SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT, ALUA_ACTIVE_OPTIMIZED, ALUA_ACTIVE_NONOPTIMIZED, false);
	CU_ASSERT_EQUAL(scsi_alua_changes(), n);
	list[4] = 0x0e;  /* offline: refused */
	CU_ASSERT_EQUAL(stpg(&NX1, 8, list, 8, &c), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(scsi_alua_changes(), n);
	list[4] = ALUA_STANDBY;
	CU_ASSERT_EQUAL(stpg(&NX1, 8, list, 8, &c), SCSI_GOOD);
	CU_ASSERT_NOT_EQUAL(scsi_alua_changes(), n);
	scsi_alua_states_into(&cfg, &lock);
	CU_ASSERT_EQUAL(cg[0].state, ALUA_ACTIVE_OPTIMIZED);
	CU_ASSERT_EQUAL(cg[1].state, ALUA_STANDBY);
	CU_ASSERT_TRUE(ct.alua_given);
	CU_ASSERT_STRING_EQUAL(scsi_alua_status_name("iqn.test:t", 20), "set_by_initiator");
	configure(SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT, ALUA_ACTIVE_OPTIMIZED, ALUA_ACTIVE_NONOPTIMIZED, false);
	drain_ua(&NX1);
	drain_ua(&NX2);
}

static void test_vpd83(void)
{
	uint8_t cdb[16] = { 0x12, 1, 0x83, 0, 255 };
	struct scsi_cmd c;
	CU_ASSERT_EQUAL(run(&NX2, cdb, 255, false, NULL, &c), SCSI_GOOD);
	const uint8_t *d = c.buf->data;
	bool port = false, group = false;
	for (uint32_t off = 4; off + 4 <= c.din_len; off += 4 + d[off + 3]) {
		if (d[off + 1] == 0x94)
			port = get_be32(d + off + 4) == 2;
		if (d[off + 1] == 0x95)
			group = get_be32(d + off + 4) == 20;
	}
	CU_ASSERT_TRUE(port);
	CU_ASSERT_TRUE(group);
	scsi_cmd_release(&c);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("alua", setup, teardown);
	CU_add_test(s, "gating_table", test_gating_table);
	CU_add_test(s, "commands_in_standby", test_commands_in_standby);
	CU_add_test(s, "rtpg", test_rtpg);
	CU_add_test(s, "stpg", test_stpg);
	CU_add_test(s, "vpd83", test_vpd83);
	CU_add_test(s, "states_copied", test_states_copied);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
