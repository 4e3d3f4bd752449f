/* Reservations: SPC-2 RESERVE/RELEASE and SPC-4 persistent reservations. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/util.h"
#include "target/scsi/pr/pr.h"
#include "target/scsi/pr/pr_state.h"
#include "target/scsi/scsi.h"
#include "target/scsi/lu/sense.h"

#include "unit_run.h"

enum { WE = 1, EA = 3, WE_RO = 5, EA_RO = 6, WE_AR = 7, EA_AR = 8 };
enum { REG, RES, REL, CLR, PRE, PRE_ABORT, REG_IGN, REG_MOVE };
enum { RKEYS, RRES, RCAPS, RFULL };
static const uint8_t all_types[] = { WE, EA, WE_RO, EA_RO, WE_AR, EA_AR };

/* Three initiator ports (two of them on one initiator) behind target port 1. */
static struct scsi_nexus nx[5];

static void mk_nexus(struct scsi_nexus *n, const char *iname, const char *isid, uint16_t tpgt, uint64_t id)
{
	memset(n, 0, sizeof(*n));
	snprintf(n->initiator_name, sizeof(n->initiator_name), "%s", iname);
	snprintf(n->initiator_port, sizeof(n->initiator_port), "%s,i,0x%s", iname, isid);
	snprintf(n->target_name, sizeof(n->target_name), "iqn.2024-01.test:tgt");
	snprintf(n->target_port, sizeof(n->target_port), "iqn.2024-01.test:tgt,t,0x%04x", tpgt);
	n->rel_port_id = tpgt;
	n->id = id;
}

/* Unit attentions and aborts the module asked for. */
static struct {
	char port[256];
	uint16_t asc;
} uas[64];
static int nua;
static char aborted[8][256];
static int naborted;

static void ua_cb(void *ctx, const char *port, uint16_t asc)
{
	(void)ctx;
	if (nua < 64) {
		snprintf(uas[nua].port, sizeof(uas[nua].port), "%s", port);
		uas[nua].asc = asc;
	}
	nua++;
}

static void abort_cb(void *ctx, const char *port)
{
	(void)ctx;
	if (naborted < 8)
		snprintf(aborted[naborted], sizeof(aborted[0]), "%s", port);
	naborted++;
}

static bool got_ua(const struct scsi_nexus *n, uint16_t asc)
{
	for (int i = 0; i < nua && i < 64; i++)
		if (uas[i].asc == asc && strcmp(uas[i].port, n->initiator_port) == 0)
			return true;
	return false;
}

/* Outcome of the last command. */
static struct {
	uint8_t status, key;
	uint16_t asc;
	uint8_t sks[3];
	uint8_t data[65536];
	uint32_t len;
} last;

static void run(struct scsi_pr *pr, void (*fn)(struct scsi_pr *, struct scsi_cmd *),
		const struct scsi_nexus *n, const uint8_t *cdb, uint32_t cdb_len,
		const uint8_t *param, uint32_t plen)
{
	struct scsi_cmd *c = calloc(1, sizeof(*c));
	struct buf *b = calloc(1, sizeof(*b));

	CU_ASSERT_FATAL(c && b);
	b->data = calloc(1, 65536);
	CU_ASSERT_FATAL(b->data != NULL);
	b->cap = 65536;
	b->len = plen;
	if (plen)
		memcpy(b->data, param, plen);
	c->buf = b;
	c->dout_len = plen;
	c->nexus = n;
	memcpy(c->cdb, cdb, cdb_len);
	c->cdb_len = cdb_len;
	c->edtl = plen ? plen : 65536;
	c->dir_read = plen == 0;
	c->dir_write = plen != 0;
	fn(pr, c);
	memset(&last, 0, sizeof(last));
	last.status = c->status;
	if (c->sense_len >= 18) {
		last.key = c->sense[2] & 0x0f;
		last.asc = (uint16_t)(c->sense[12] << 8 | c->sense[13]);
		memcpy(last.sks, c->sense + 15, 3);
	}
	CU_ASSERT(c->buf == b); /* our buffer is large enough to be reused */
	last.len = MIN(c->din_len, (uint32_t)sizeof(last.data));
	memcpy(last.data, c->buf->data, last.len);
	free(c->buf->data);
	free(c->buf);
	free(c);
}

static uint8_t prout_raw(struct scsi_pr *pr, const struct scsi_nexus *n, uint8_t sa, uint8_t scope_type,
			 const uint8_t *param, uint32_t plen)
{
	uint8_t cdb[10] = { 0x5f, sa, scope_type };

	put_be32(cdb + 5, plen);
	run(pr, pr_out, n, cdb, 10, param, plen);
	return last.status;
}

static uint8_t prout(struct scsi_pr *pr, const struct scsi_nexus *n, uint8_t sa, uint8_t type,
		     uint64_t rk, uint64_t sark, uint8_t flags)
{
	uint8_t p[24] = { 0 };

	put_be64(p, rk);
	put_be64(p + 8, sark);
	p[20] = flags;
	return prout_raw(pr, n, sa, type, p, 24);
}

static uint8_t prin(struct scsi_pr *pr, const struct scsi_nexus *n, uint8_t sa, uint16_t alloc)
{
	uint8_t cdb[10] = { 0x5e, sa };

	put_be16(cdb + 7, alloc);
	run(pr, pr_in, n, cdb, 10, NULL, 0);
	return last.status;
}

static uint8_t reserve6(struct scsi_pr *pr, const struct scsi_nexus *n, uint8_t op)
{
	uint8_t cdb[10] = { op };

	run(pr, (op == 0x16 || op == 0x56) ? pr_reserve : pr_release, n, cdb, op < 0x20 ? 6 : 10, NULL, 0);
	return last.status;
}

static uint32_t generation(struct scsi_pr *pr)
{
	prin(pr, &nx[0], RKEYS, 8192);
	return get_be32(last.data);
}

static uint32_t nkeys(struct scsi_pr *pr)
{
	prin(pr, &nx[0], RKEYS, 8192);
	return get_be32(last.data + 4) / 8;
}

static bool has_key(struct scsi_pr *pr, uint64_t key)
{
	uint32_t n = nkeys(pr);

	for (uint32_t i = 0; i < n; i++)
		if (get_be64(last.data + 8 + 8 * i) == key)
			return true;
	return false;
}

/* READ RESERVATION: true when reserved, with key/type. */
static bool reservation(struct scsi_pr *pr, uint64_t *key, uint8_t *type)
{
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RRES, 8192), SCSI_GOOD);
	if (get_be32(last.data + 4) == 0) {
		CU_ASSERT_EQUAL(last.len, 8);
		return false;
	}
	CU_ASSERT_EQUAL(get_be32(last.data + 4), 16);
	CU_ASSERT_EQUAL(last.len, 24);
	*key = get_be64(last.data + 8);
	*type = last.data[21];
	return true;
}

static bool conflicts(struct scsi_pr *pr, const struct scsi_nexus *n, uint8_t op)
{
	uint8_t cdb[16] = { op };

	if (op == 0x1b)
		cdb[4] = 0x01; /* START STOP UNIT: START=1 */
	return pr_conflict(pr, n, cdb);
}

static struct scsi_pr *new_pr(void)
{
	struct scsi_pr *pr = pr_create(ua_cb, NULL);

	CU_ASSERT_FATAL(pr != NULL);
	pr_set_abort(pr, abort_cb, NULL);
	nua = 0;
	naborted = 0;
	return pr;
}

static void test_register(void)
{
	struct scsi_pr *pr = new_pr();

	CU_ASSERT_EQUAL(generation(pr), 0);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG_IGN, 0, 0, 0xa1, 0), SCSI_GOOD);
	CU_ASSERT(has_key(pr, 0xa1));
	CU_ASSERT_EQUAL(generation(pr), 1);
	/* Re-registering with a wrong reservation key conflicts and changes nothing. */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 0xa2, 0), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(generation(pr), 1);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0xa1, 0xa2, 0), SCSI_GOOD);
	CU_ASSERT(has_key(pr, 0xa2) && !has_key(pr, 0xa1));
	CU_ASSERT_EQUAL(generation(pr), 2);
	/* REGISTER AND IGNORE EXISTING KEY ignores the key. */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG_IGN, 0, 0x1234, 0xa3, 0), SCSI_GOOD);
	CU_ASSERT(has_key(pr, 0xa3));
	CU_ASSERT_EQUAL(nkeys(pr), 1);
	/* Unregistered nexus: a nonzero reservation key conflicts; zero/zero is a no-op. */
	CU_ASSERT_EQUAL(prout(pr, &nx[1], REG, 0, 5, 6, 0), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], REG, 0, 0, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(generation(pr), 3);
	/* A second nexus of the same initiator is its own registration. */
	CU_ASSERT_EQUAL(prout(pr, &nx[3], REG, 0, 0, 0xa3, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(nkeys(pr), 2);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0xa3, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(nkeys(pr), 1);
	CU_ASSERT_EQUAL(generation(pr), 5);
	/* Non-register service actions from an unregistered nexus conflict. */
	for (uint8_t sa = RES; sa <= PRE_ABORT; sa++)
		CU_ASSERT_EQUAL(prout(pr, &nx[0], sa, EA, 0, 0xa3, 0), SCSI_RESERVATION_CONFLICT);
	pr_destroy(pr);
}

static void test_read_keys_truncate(void)
{
	struct scsi_pr *pr = new_pr();

	prout(pr, &nx[0], REG_IGN, 0, 0, 0x11, 0);
	prout(pr, &nx[1], REG_IGN, 0, 0, 0x22, 0);
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RKEYS, 8), SCSI_GOOD);
	CU_ASSERT_EQUAL(last.len, 8);
	CU_ASSERT_EQUAL(get_be32(last.data + 4), 16); /* not cut to the allocation length */
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RKEYS, 100), SCSI_GOOD);
	CU_ASSERT_EQUAL(last.len, 24);
	CU_ASSERT_EQUAL(get_be64(last.data + 8), 0x11);
	CU_ASSERT_EQUAL(get_be64(last.data + 16), 0x22);
	pr_destroy(pr);
}

static void test_prin_service_actions(void)
{
	struct scsi_pr *pr = new_pr();

	for (uint8_t sa = 0; sa < 4; sa++)
		CU_ASSERT_EQUAL(prin(pr, &nx[0], sa, 8192), SCSI_GOOD);
	for (uint8_t sa = 4; sa < 0x20; sa++) {
		CU_ASSERT_EQUAL(prin(pr, &nx[0], sa, 8192), SCSI_CHECK_CONDITION);
		CU_ASSERT_EQUAL(last.key, SK_ILLEGAL_REQUEST);
		CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_CDB);
		CU_ASSERT_EQUAL(last.sks[0], 0x80 | 0x40 | 0x08 | 4); /* CDB byte 1 bit 4 */
		CU_ASSERT_EQUAL(get_be16(last.sks + 1), 1);
	}
	pr_destroy(pr);
}

static void test_report_caps(void)
{
	struct scsi_pr *pr = new_pr();

	CU_ASSERT_EQUAL(prin(pr, &nx[0], RCAPS, 8192), SCSI_GOOD);
	CU_ASSERT_EQUAL(last.len, 8);
	CU_ASSERT_EQUAL(get_be16(last.data), 8);
	CU_ASSERT_EQUAL(last.data[2] & 0x01, 0);    /* PTPL_C: APTPL is not offered */
	CU_ASSERT_EQUAL(last.data[2] & 0x1c, 0x1c); /* CRH, SIP_C, ATP_C */
	CU_ASSERT(last.data[3] & 0x80);             /* TMV */
	CU_ASSERT(((last.data[3] >> 4) & 7) <= 5);
	CU_ASSERT_EQUAL(last.data[4], 0xea);
	CU_ASSERT_EQUAL(last.data[5], 0x01);
	pr_destroy(pr);
}

static void test_reserve_release_types(void)
{
	for (size_t i = 0; i < sizeof(all_types); i++) {
		struct scsi_pr *pr = new_pr();
		uint8_t t = all_types[i], rt = 0;
		uint64_t key = 0;
		uint32_t gen;

		prout(pr, &nx[0], REG_IGN, 0, 0, 0x77, 0);
		gen = generation(pr);
		CU_ASSERT_FALSE(reservation(pr, &key, &rt));
		CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, t, 0x77, 0, 0), SCSI_GOOD);
		CU_ASSERT(reservation(pr, &key, &rt));
		CU_ASSERT_EQUAL(rt, t);
		CU_ASSERT_EQUAL(key, (t == WE_AR || t == EA_AR) ? 0 : 0x77);
		/* Same type again is fine; another type conflicts; RESERVE/RELEASE bump nothing. */
		CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, t, 0x77, 0, 0), SCSI_GOOD);
		CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, t == WE ? EA : WE, 0x77, 0, 0), SCSI_RESERVATION_CONFLICT);
		/* Releasing with the wrong type is an invalid release. */
		CU_ASSERT_EQUAL(prout(pr, &nx[0], REL, t == WE ? EA : WE, 0x77, 0, 0), SCSI_CHECK_CONDITION);
		CU_ASSERT_EQUAL(last.asc, 0x2604);
		CU_ASSERT_EQUAL(prout(pr, &nx[0], REL, t, 0x78, 0, 0), SCSI_RESERVATION_CONFLICT);
		CU_ASSERT_EQUAL(prout(pr, &nx[0], REL, t, 0x77, 0, 0), SCSI_GOOD);
		CU_ASSERT_FALSE(reservation(pr, &key, &rt));
		CU_ASSERT_EQUAL(generation(pr), gen);
		CU_ASSERT_EQUAL(nua, 0);
		pr_destroy(pr);
	}
}

/* What libiscsi's ProutReserve.Access* expects: reads/writes of a second initiator. */
static void test_access(void)
{
	static const struct {
		uint8_t type;
		bool reg_read, reg_write, unreg_read, unreg_write;
	} tab[] = {
		{ EA, 0, 0, 0, 0 },    { WE, 1, 0, 1, 0 },    { EA_RO, 1, 1, 0, 0 },
		{ WE_RO, 1, 1, 1, 0 }, { EA_AR, 1, 1, 0, 0 }, { WE_AR, 1, 1, 1, 0 },
	};

	for (size_t i = 0; i < ARRAY_SIZE(tab); i++) {
		struct scsi_pr *pr = new_pr();
		bool we = tab[i].type == WE || tab[i].type == WE_RO || tab[i].type == WE_AR;

		prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
		prout(pr, &nx[1], REG_IGN, 0, 0, 2, 0);
		CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, tab[i].type, 1, 0, 0), SCSI_GOOD);
		CU_ASSERT_FALSE(conflicts(pr, &nx[0], 0x28));
		CU_ASSERT_FALSE(conflicts(pr, &nx[0], 0x2a));
		CU_ASSERT_EQUAL(!conflicts(pr, &nx[1], 0x28), tab[i].reg_read);
		CU_ASSERT_EQUAL(!conflicts(pr, &nx[1], 0x2a), tab[i].reg_write);
		CU_ASSERT_EQUAL(!conflicts(pr, &nx[1], 0x88), tab[i].reg_read);
		CU_ASSERT_EQUAL(!conflicts(pr, &nx[1], 0x8a), tab[i].reg_write);
		CU_ASSERT_EQUAL(prout(pr, &nx[1], REG, 0, 2, 0, 0), SCSI_GOOD); /* REGISTER passes */
		CU_ASSERT_EQUAL(!conflicts(pr, &nx[1], 0x28), tab[i].unreg_read);
		CU_ASSERT_EQUAL(!conflicts(pr, &nx[1], 0x2a), tab[i].unreg_write);
		CU_ASSERT_EQUAL(!conflicts(pr, &nx[1], 0x35), false); /* SYNCHRONIZE CACHE */
		/* Table 63 rows that do not depend on the type. */
		static const uint8_t always[] = { 0x12, 0x00, 0x03, 0xa0, 0x25, 0x4d, 0x5e, 0x5f, 0x1b };
		for (size_t k = 0; k < sizeof(always); k++)
			CU_ASSERT_FALSE(conflicts(pr, &nx[1], always[k]));
		CU_ASSERT_EQUAL(conflicts(pr, &nx[1], 0x1a), !we); /* MODE SENSE */
		CU_ASSERT_TRUE(conflicts(pr, &nx[1], 0x15));        /* MODE SELECT */
		CU_ASSERT_TRUE(conflicts(pr, &nx[1], 0x42));        /* UNMAP */
		/* A different port of the holder's initiator is a different nexus. */
		CU_ASSERT_TRUE(conflicts(pr, &nx[3], 0x2a));
		CU_ASSERT_EQUAL(prout(pr, &nx[0], REL, tab[i].type, 1, 0, 0), SCSI_GOOD);
		CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0x2a));
		pr_destroy(pr);
	}
}

/* ProutReserve.Ownership*: the holder unregisters. */
static void test_ownership(void)
{
	for (size_t i = 0; i < sizeof(all_types); i++) {
		struct scsi_pr *pr = new_pr();
		uint8_t t = all_types[i], rt;
		bool ar = t == WE_AR || t == EA_AR, ro = t == WE_RO || t == EA_RO;
		uint64_t key;

		prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
		prout(pr, &nx[1], REG_IGN, 0, 0, 2, 0);
		CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, t, 1, 0, 0), SCSI_GOOD);
		CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 1, 0, 0), SCSI_GOOD);
		CU_ASSERT_EQUAL(reservation(pr, &key, &rt), ar);
		CU_ASSERT_EQUAL(got_ua(&nx[1], ASC_RESERVATIONS_RELEASED), ro);
		if (ar) {
			CU_ASSERT_EQUAL(key, 0);
			CU_ASSERT_EQUAL(rt, t);
			/* nx[0] is no longer registered, so no longer a holder. */
			CU_ASSERT_EQUAL(conflicts(pr, &nx[0], 0x2a), true);
			CU_ASSERT_EQUAL(prout(pr, &nx[1], REL, t, 2, 0, 0), SCSI_GOOD);
			CU_ASSERT_FALSE(reservation(pr, &key, &rt));
			/* Releasing an all-registrants reservation tells the other registrants; none left. */
		}
		/* The last all-registrants registrant leaving takes the reservation along. */
		CU_ASSERT_EQUAL(prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0), SCSI_GOOD);
		CU_ASSERT_EQUAL(prout(pr, &nx[1], RES, t, 2, 0, 0), SCSI_GOOD);
		CU_ASSERT_EQUAL(prout(pr, &nx[1], REG, 0, 2, 0, 0), SCSI_GOOD);
		CU_ASSERT_EQUAL(reservation(pr, &key, &rt), ar);
		CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 1, 0, 0), SCSI_GOOD);
		CU_ASSERT_FALSE(reservation(pr, &key, &rt));
		pr_destroy(pr);
	}
}

static void test_release_ua(void)
{
	for (size_t i = 0; i < sizeof(all_types); i++) {
		struct scsi_pr *pr = new_pr();
		uint8_t t = all_types[i];

		prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
		prout(pr, &nx[1], REG_IGN, 0, 0, 2, 0);
		prout(pr, &nx[0], RES, t, 1, 0, 0);
		/* A registered non-holder's RELEASE does nothing. */
		if (t != WE_AR && t != EA_AR) {
			CU_ASSERT_EQUAL(prout(pr, &nx[1], REL, t, 2, 0, 0), SCSI_GOOD);
			CU_ASSERT_TRUE(conflicts(pr, &nx[2], 0x2a));
		}
		CU_ASSERT_EQUAL(prout(pr, &nx[0], REL, t, 1, 0, 0), SCSI_GOOD);
		CU_ASSERT_EQUAL(got_ua(&nx[1], ASC_RESERVATIONS_RELEASED), t != WE && t != EA);
		CU_ASSERT_FALSE(got_ua(&nx[0], ASC_RESERVATIONS_RELEASED));
		pr_destroy(pr);
	}
}

static void test_clear(void)
{
	struct scsi_pr *pr = new_pr();
	uint64_t key;
	uint8_t rt;
	uint32_t gen;

	prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
	prout(pr, &nx[1], REG_IGN, 0, 0, 2, 0);
	gen = generation(pr);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, EA, 1, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], CLR, 0, 3, 0, 0), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], CLR, 0, 2, 0, 0), SCSI_GOOD); /* any registrant may clear */
	CU_ASSERT_FALSE(reservation(pr, &key, &rt));
	CU_ASSERT_EQUAL(nkeys(pr), 0);
	CU_ASSERT_EQUAL(generation(pr), gen + 1);
	CU_ASSERT_TRUE(got_ua(&nx[0], ASC_RESERVATIONS_PREEMPTED));
	CU_ASSERT_FALSE(got_ua(&nx[1], ASC_RESERVATIONS_PREEMPTED));
	CU_ASSERT_FALSE(conflicts(pr, &nx[2], 0x2a));
	pr_destroy(pr);
}

/* ProutPreempt.RemoveRegistration: no reservation, drop another key. */
static void test_preempt_registration(void)
{
	struct scsi_pr *pr = new_pr();
	uint32_t gen;

	prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
	prout(pr, &nx[1], REG_IGN, 0, 0, 2, 0);
	gen = generation(pr);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], PRE, EA, 2, 9, 0), SCSI_RESERVATION_CONFLICT); /* no such key */
	CU_ASSERT_EQUAL(prout(pr, &nx[1], PRE, EA, 2, 0, 0), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(generation(pr), gen);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], PRE, EA, 2, 1, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(generation(pr), gen + 1);
	CU_ASSERT_EQUAL(nkeys(pr), 1);
	CU_ASSERT(has_key(pr, 2));
	CU_ASSERT_TRUE(got_ua(&nx[0], ASC_REGISTRATIONS_PREEMPTED));
	CU_ASSERT_FALSE(got_ua(&nx[1], ASC_REGISTRATIONS_PREEMPTED));
	CU_ASSERT_EQUAL(naborted, 0);
	pr_destroy(pr);
}

static void test_preempt_holder(void)
{
	struct scsi_pr *pr = new_pr();
	uint64_t key;
	uint8_t rt;

	prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
	prout(pr, &nx[1], REG_IGN, 0, 0, 2, 0);
	prout(pr, &nx[2], REG_IGN, 0, 0, 3, 0);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, EA, 1, 0, 0), SCSI_GOOD);
	/* A non-holder may not RESERVE. */
	CU_ASSERT_EQUAL(prout(pr, &nx[1], RES, EA, 2, 0, 0), SCSI_RESERVATION_CONFLICT);
	/* Preempting the holder with an invalid type fails first. */
	CU_ASSERT_EQUAL(prout(pr, &nx[1], PRE_ABORT, 2, 2, 1, 0), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], PRE_ABORT, WE_RO, 2, 1, 0), SCSI_GOOD);
	CU_ASSERT(reservation(pr, &key, &rt));
	CU_ASSERT_EQUAL(key, 2);
	CU_ASSERT_EQUAL(rt, WE_RO);
	CU_ASSERT_FALSE(has_key(pr, 1));
	CU_ASSERT_TRUE(got_ua(&nx[0], ASC_REGISTRATIONS_PREEMPTED));
	/* The type changed: the remaining registrant hears its reservation went. */
	CU_ASSERT_TRUE(got_ua(&nx[2], ASC_RESERVATIONS_RELEASED));
	CU_ASSERT_FALSE(got_ua(&nx[1], ASC_RESERVATIONS_RELEASED));
	CU_ASSERT_EQUAL(naborted, 1);
	CU_ASSERT_STRING_EQUAL(aborted[0], nx[0].initiator_port);
	CU_ASSERT_TRUE(conflicts(pr, &nx[0], 0x2a));
	CU_ASSERT_FALSE(conflicts(pr, &nx[2], 0x2a)); /* registrants-only now */
	/* The holder may preempt itself to change type; others keep registrations. */
	nua = 0;
	CU_ASSERT_EQUAL(prout(pr, &nx[1], PRE, EA, 2, 2, 0), SCSI_GOOD);
	CU_ASSERT(reservation(pr, &key, &rt));
	CU_ASSERT_EQUAL(rt, EA);
	CU_ASSERT(has_key(pr, 3));
	CU_ASSERT_TRUE(got_ua(&nx[2], ASC_RESERVATIONS_RELEASED));
	pr_destroy(pr);
}

static void test_preempt_all_registrants(void)
{
	struct scsi_pr *pr = new_pr();
	uint64_t key;
	uint8_t rt;

	prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
	prout(pr, &nx[1], REG_IGN, 0, 0, 2, 0);
	prout(pr, &nx[2], REG_IGN, 0, 0, 3, 0);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, EA_AR, 1, 0, 0), SCSI_GOOD);
	/* A nonzero key only removes that registration; the reservation stays. */
	CU_ASSERT_EQUAL(prout(pr, &nx[2], PRE, EA_AR, 3, 2, 0), SCSI_GOOD);
	CU_ASSERT(reservation(pr, &key, &rt));
	CU_ASSERT_EQUAL(rt, EA_AR);
	CU_ASSERT_EQUAL(nkeys(pr), 2);
	/* Key zero preempts everyone else and takes a new reservation. */
	CU_ASSERT_EQUAL(prout(pr, &nx[2], PRE, WE, 3, 0, 0), SCSI_GOOD);
	CU_ASSERT(reservation(pr, &key, &rt));
	CU_ASSERT_EQUAL(rt, WE);
	CU_ASSERT_EQUAL(key, 3);
	CU_ASSERT_EQUAL(nkeys(pr), 1);
	CU_ASSERT_TRUE(got_ua(&nx[0], ASC_REGISTRATIONS_PREEMPTED));
	CU_ASSERT_TRUE(got_ua(&nx[1], ASC_REGISTRATIONS_PREEMPTED));
	pr_destroy(pr);
}

static uint32_t put_tid(uint8_t *p, const char *s, bool isid)
{
	size_t n = strlen(s) + 1;
	uint32_t padded = (uint32_t)((n + 3) & ~(size_t)3);

	if (padded < 20)
		padded = 20;
	memset(p, 0, 4 + padded);
	p[0] = (uint8_t)((isid ? 0x40 : 0) | 5);
	put_be16(p + 2, (uint16_t)padded);
	memcpy(p + 4, s, n);
	return 4 + padded;
}

static void test_register_and_move(void)
{
	struct scsi_pr *pr = new_pr();
	uint8_t p[512] = { 0 };
	uint32_t tl;
	uint64_t key;
	uint8_t rt;

	prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, WE, 1, 0, 0), SCSI_GOOD);
	put_be64(p, 1);
	put_be64(p + 8, 0x55);
	p[17] = 0x02; /* UNREG */
	put_be16(p + 18, nx[1].rel_port_id);
	tl = put_tid(p + 24, nx[1].initiator_port, true);
	put_be32(p + 20, tl);
	/* The list is shorter than the TransportID it announces. */
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG_MOVE, WE, p, 24 + tl - 4), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_PARAM_LIST_LENGTH_ERROR);
	/* Only the holder may move. */
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[1], REG_MOVE, WE, p, 24 + tl), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG_MOVE, WE, p, 24 + tl), SCSI_GOOD);
	CU_ASSERT(reservation(pr, &key, &rt));
	CU_ASSERT_EQUAL(key, 0x55);
	CU_ASSERT_EQUAL(rt, WE);
	CU_ASSERT_EQUAL(nkeys(pr), 1);
	CU_ASSERT_TRUE(conflicts(pr, &nx[0], 0x2a));
	CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0x2a));
	/* A bad TransportID (not iSCSI) is an invalid parameter. */
	put_be64(p, 0x55);
	p[24] = 0x40 | 0x1;
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[1], REG_MOVE, WE, p, 24 + tl), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_PARAM);
	/* Moving to oneself is refused. */
	p[24] = 0x40 | 0x5;
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[1], REG_MOVE, WE, p, 24 + tl), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_PARAM);
	pr_destroy(pr);
}

static void test_spec_i_pt_and_full_status(void)
{
	struct scsi_pr *pr = new_pr();
	uint8_t p[512] = { 0 };
	uint32_t tl = 0, off, n = 0;

	put_be64(p + 8, 0x99);
	p[20] = 0x08; /* SPEC_I_PT */
	tl += put_tid(p + 28 + tl, nx[1].initiator_port, true);
	tl += put_tid(p + 28 + tl, nx[2].initiator_name, false);
	put_be32(p + 24, tl);
	/* SPEC_I_PT is only for REGISTER. */
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG_IGN, 0, p, 28 + tl), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG, 0, p, 27), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_PARAM_LIST_LENGTH_ERROR);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG, 0, p, 28 + tl), SCSI_GOOD);
	CU_ASSERT_EQUAL(nkeys(pr), 3);
	CU_ASSERT_EQUAL(generation(pr), 1);
	/* Each named initiator is registered: its reservation key works. */
	CU_ASSERT_EQUAL(prout(pr, &nx[1], RES, WE, 0x99, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[2], PRE, EA, 0x99, 0x99, 0), SCSI_GOOD);

	CU_ASSERT_EQUAL(prin(pr, &nx[0], RFULL, 8192), SCSI_GOOD);
	CU_ASSERT_EQUAL(get_be32(last.data + 4) + 8, last.len);
	for (off = 8; off < last.len; n++) {
		const uint8_t *d = last.data + off;
		uint32_t dl = get_be32(d + 20);
		const char *name = (const char *)d + 28;

		CU_ASSERT_EQUAL(get_be64(d), 0x99);
		CU_ASSERT_EQUAL(dl % 4, 0);
		CU_ASSERT(dl >= 24);
		CU_ASSERT_EQUAL(d[24] & 0x0f, 5);
		if (strcmp(name, nx[2].initiator_name) == 0) {
			/* The preempting initiator holds now; it was named without an ISID. */
			CU_ASSERT_EQUAL(d[24] >> 6, 0);
			CU_ASSERT_EQUAL(d[12] & 1, 1);
			CU_ASSERT_EQUAL(d[13], EA);
		} else {
			CU_ASSERT_EQUAL(d[24] >> 6, 1);
			CU_ASSERT_EQUAL(d[12] & 1, 0);
		}
		CU_ASSERT_EQUAL(get_be16(d + 18), 1);
		off += 24 + dl;
	}
	CU_ASSERT_EQUAL(off, last.len);
	CU_ASSERT_EQUAL(n, 1); /* PREEMPT with the shared key removed the other two */
	pr_destroy(pr);
}

/*
 * PR IN at the registration maximum (PR_MAX_REGS in pr.c), every initiator
 * port name as long as an iSCSI name allows (223 bytes + ",i,0x" + ISID):
 * READ FULL STATUS is far longer than any allocation length can ask for.
 */
#define REGS_MAX 1024

static void test_prin_at_maximum(void)
{
	static struct scsi_nexus big[REGS_MAX + 1];
	struct scsi_pr *pr = new_pr();
	char iname[224], isid[13];
	uint32_t port_len = 223 + 5 + 12, tid = 4 + ((port_len + 1 + 3) & ~3u), desc = 24 + tid;

	for (unsigned i = 0; i <= REGS_MAX; i++) {
		memset(iname, 'n', 223);
		memcpy(iname, "iqn.2026-11.org.test:", 21);
		snprintf(iname + 223 - 4, 5, "%04x", i);
		snprintf(isid, sizeof(isid), "%012x", 0x400000u + i);
		mk_nexus(&big[i], iname, isid, 1, 1000 + i);
		CU_ASSERT_EQUAL_FATAL(strlen(big[i].initiator_port), port_len);
	}
	for (unsigned i = 0; i < REGS_MAX; i++)
		CU_ASSERT_EQUAL_FATAL(prout(pr, &big[i], REG, 0, 0, 0x1000 + i, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &big[REGS_MAX], REG, 0, 0, 0x1, 0), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INSUFFICIENT_REG_RESOURCES);
	CU_ASSERT_EQUAL(prout(pr, &big[7], RES, WE, 0x1007, 0, 0), SCSI_GOOD);

	CU_ASSERT_EQUAL(prin(pr, &big[0], RKEYS, 0xffff), SCSI_GOOD);
	CU_ASSERT_EQUAL(last.len, 8 + 8 * REGS_MAX);
	CU_ASSERT_EQUAL(get_be32(last.data + 4), 8 * REGS_MAX);
	CU_ASSERT_EQUAL(get_be64(last.data + 8 + 8 * (REGS_MAX - 1)), 0x1000 + REGS_MAX - 1);

	CU_ASSERT_EQUAL(prin(pr, &big[0], RFULL, 0xffff), SCSI_GOOD);
	CU_ASSERT_EQUAL(last.len, 0xffff);
	CU_ASSERT_EQUAL(get_be32(last.data + 4), REGS_MAX * desc);
	unsigned n = 0;
	for (uint32_t off = 8; off + desc <= last.len; off += desc, n++) {
		const uint8_t *d = last.data + off;

		CU_ASSERT_EQUAL(get_be64(d), 0x1000 + n);
		CU_ASSERT_EQUAL(d[12] & 1, n == 7);
		CU_ASSERT_EQUAL(get_be32(d + 20), tid);
		CU_ASSERT_EQUAL(get_be16(d + 26), tid - 4);
		CU_ASSERT_EQUAL(strcmp((const char *)d + 28, big[n].initiator_port), 0);
	}
	CU_ASSERT_EQUAL(n, (0xffff - 8) / desc);
	/* a short allocation length: the header still counts every descriptor */
	CU_ASSERT_EQUAL(prin(pr, &big[0], RFULL, 10), SCSI_GOOD);
	CU_ASSERT_EQUAL(last.len, 10);
	CU_ASSERT_EQUAL(get_be32(last.data + 4), REGS_MAX * desc);
	pr_destroy(pr);
}

static void test_all_tg_pt(void)
{
	struct scsi_pr *pr = new_pr();
	struct scsi_nexus other_port;

	mk_nexus(&other_port, nx[0].initiator_name, "000000000001", 2, 10);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 5, 0), SCSI_GOOD);
	/* Without ALL_TG_PT the other target port is another nexus. */
	CU_ASSERT_EQUAL(prout(pr, &other_port, REG, 0, 0, 6, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(nkeys(pr), 2);
	CU_ASSERT_EQUAL(prout(pr, &other_port, REG, 0, 6, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 5, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 5, 0x04), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &other_port, REG, 0, 0, 6, 0), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(prout(pr, &other_port, RES, EA, 5, 0, 0), SCSI_GOOD);
	CU_ASSERT_FALSE(conflicts(pr, &nx[0], 0x2a));
	CU_ASSERT_TRUE(conflicts(pr, &nx[1], 0x2a));
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RFULL, 8192), SCSI_GOOD);
	CU_ASSERT_EQUAL(last.data[8 + 12], 0x03); /* ALL_TG_PT, R_HOLDER */
	pr_destroy(pr);
}

static void test_param_errors(void)
{
	struct scsi_pr *pr = new_pr();
	uint8_t p[32] = { 0 };

	put_be64(p + 8, 7);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG, 0, p, 23), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.key, SK_ILLEGAL_REQUEST);
	CU_ASSERT_EQUAL(last.asc, ASC_PARAM_LIST_LENGTH_ERROR);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG, 0, p, 25), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_PARAM_LIST_LENGTH_ERROR);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG, 0, p, 0), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_PARAM_LIST_LENGTH_ERROR);
	/* The CDB claims more than arrived. */
	{
		uint8_t cdb[10] = { 0x5f, REG, 0 };

		put_be32(cdb + 5, 24);
		run(pr, pr_out, &nx[0], cdb, 10, p, 16);
		CU_ASSERT_EQUAL(last.asc, ASC_PARAM_LIST_LENGTH_ERROR);
	}
	for (uint8_t sa = 8; sa < 0x20; sa++) {
		CU_ASSERT_EQUAL(prout(pr, &nx[0], sa, 0, 0, 7, 0), SCSI_CHECK_CONDITION);
		CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_CDB);
		CU_ASSERT_EQUAL(get_be16(last.sks + 1), 1);
	}
	/* APTPL is not offered (PTPL_C=0). */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 7, 0x01), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_PARAM);
	CU_ASSERT_EQUAL(last.sks[0], 0x80 | 0x08 | 0);
	CU_ASSERT_EQUAL(get_be16(last.sks + 1), 20);
	CU_ASSERT_EQUAL(nkeys(pr), 0);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 7, 0), SCSI_GOOD);
	/* Scope other than LU_SCOPE, unknown types. */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, 0x10 | WE, 7, 0, 0), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_CDB);
	CU_ASSERT_EQUAL(get_be16(last.sks + 1), 2);
	for (uint8_t t = 0; t < 16; t++) {
		if (t == WE || t == EA || (t >= WE_RO && t <= EA_AR))
			continue;
		CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, t, 7, 0, 0), SCSI_CHECK_CONDITION);
		CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_CDB);
	}
	/* A wrong key conflicts on every service action that checks it. */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, WE, 8, 0, 0), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], CLR, 0, 8, 0, 0), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(nkeys(pr), 1);
	pr_destroy(pr);
}

/* Malformed TransportID lists are refused whole, never read past the list. */
static void test_bad_tids(void)
{
	struct scsi_pr *pr = new_pr();
	uint8_t p[128];
	uint32_t seed = 12345;

	/* Announced length beyond the list, no terminating NUL, bad ISID, empty name. */
	static const struct {
		uint8_t hdr[4];
		const char *s;
	} bad[] = {
		{ { 0x45, 0, 0, 60 }, "iqn.x,i,0x000000000001" },
		{ { 0x05, 0, 0, 4 }, "iqn." },
		{ { 0x45, 0, 0, 24 }, "iqn.x,i,0x0001" },
		{ { 0x45, 0, 0, 24 }, "iqn.x,i,0xzz0000000001" },
		{ { 0x05, 0, 0, 20 }, "" },
		{ { 0x85, 0, 0, 20 }, "iqn.x" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(p, 0, sizeof(p));
		put_be64(p + 8, 4);
		p[20] = 0x08;
		memcpy(p + 28, bad[i].hdr, 4);
		memcpy(p + 32, bad[i].s, strlen(bad[i].s));
		put_be32(p + 24, 28);
		CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG, 0, p, 56), SCSI_CHECK_CONDITION);
		CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_PARAM);
		CU_ASSERT_EQUAL(nkeys(pr), 0);
	}
	/* Random lists: whatever happens, the state stays consistent. */
	for (int round = 0; round < 3000; round++) {
		uint32_t len = 28 + (seed % 64);

		for (size_t i = 0; i < sizeof(p); i++) {
			seed = seed * 1103515245u + 12345u;
			p[i] = (uint8_t)(seed >> 16);
		}
		memset(p, 0, 20);
		put_be64(p + 8, 4);
		p[20] = 0x08;
		p[28] = (seed & 1) ? 0x45 : 0x05;
		put_be32(p + 24, len - 28 + (seed % 3) - 1);
		uint8_t st = prout_raw(pr, &nx[0], REG, 0, p, len);
		CU_ASSERT(st == SCSI_GOOD || st == SCSI_CHECK_CONDITION);
		if (st == SCSI_GOOD) {
			CU_ASSERT(nkeys(pr) >= 1);
			CU_ASSERT_EQUAL(prout(pr, &nx[0], CLR, 0, 4, 0, 0), SCSI_GOOD);
		}
		CU_ASSERT_EQUAL(nkeys(pr), 0);
	}
	pr_destroy(pr);
}

/* Reserve6.*: SPC-2 reservations. */
static void test_spc2(void)
{
	struct scsi_pr *pr = new_pr();

	CU_ASSERT_EQUAL(reserve6(pr, &nx[0], 0x16), SCSI_GOOD);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[0], 0x16), SCSI_GOOD);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x16), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_TRUE(conflicts(pr, &nx[1], 0x16));
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x17), SCSI_GOOD); /* no-op */
	CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0x17));
	CU_ASSERT_FALSE(conflicts(pr, &nx[0], 0x1a));
	CU_ASSERT_TRUE(conflicts(pr, &nx[1], 0x1a));
	CU_ASSERT_TRUE(conflicts(pr, &nx[1], 0x00));
	CU_ASSERT_TRUE(conflicts(pr, &nx[3], 0x28)); /* the same initiator through another port */
	CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0x12));
	CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0xa0));
	CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0x03));
	/* PR IN/OUT conflict with an SPC-2 reservation, from anyone. */
	CU_ASSERT_TRUE(conflicts(pr, &nx[0], 0x5e));
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RKEYS, 100), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], REG, 0, 0, 1, 0), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[0], 0x17), SCSI_GOOD);
	CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0x1a));
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x56), SCSI_GOOD); /* RESERVE(10) */
	/* Nexus loss of another nexus keeps it; its own loss drops it. */
	pr_reset(pr, &nx[0], true);
	CU_ASSERT_TRUE(conflicts(pr, &nx[0], 0x28));
	pr_reset(pr, &nx[1], true);
	CU_ASSERT_FALSE(conflicts(pr, &nx[0], 0x28));
	/* LU reset from anyone drops it. */
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x16), SCSI_GOOD);
	pr_reset(pr, &nx[0], false);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[0], 0x16), SCSI_GOOD);
	pr_reset(pr, NULL, false);
	/* Unsupported forms: extents, third-party. */
	{
		uint8_t cdb6[6] = { 0x16, 0x01 }, cdb10[10] = { 0x56, 0x10 };

		run(pr, pr_reserve, &nx[0], cdb6, 6, NULL, 0);
		CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_CDB);
		run(pr, pr_reserve, &nx[0], cdb10, 10, NULL, 0);
		CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_CDB);
	}
	CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0x2a));
	pr_destroy(pr);
}

/* SPC-4 5.13.3: RESERVE/RELEASE next to registrations (CRH=1). */
static void test_spc2_with_pr(void)
{
	struct scsi_pr *pr = new_pr();

	prout(pr, &nx[0], REG_IGN, 0, 0, 1, 0);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x16), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[0], 0x16), SCSI_RESERVATION_CONFLICT); /* registered, no PR */
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x17), SCSI_RESERVATION_CONFLICT);
	prout(pr, &nx[0], RES, WE, 1, 0, 0);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[0], 0x16), SCSI_GOOD); /* holder: no effect */
	CU_ASSERT_EQUAL(reserve6(pr, &nx[0], 0x17), SCSI_GOOD);
	CU_ASSERT_FALSE(conflicts(pr, &nx[1], 0x28)); /* still only the WE reservation */
	CU_ASSERT_EQUAL(prin(pr, &nx[1], RKEYS, 100), SCSI_GOOD);
	/* Under a registrants-only reservation any registrant gets the no-op too. */
	prout(pr, &nx[1], REG_IGN, 0, 0, 2, 0);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x16), SCSI_RESERVATION_CONFLICT); /* WE: not a holder */
	prout(pr, &nx[0], REL, WE, 1, 0, 0);
	prout(pr, &nx[0], RES, WE_RO, 1, 0, 0);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x16), SCSI_GOOD);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[1], 0x57), SCSI_GOOD);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[2], 0x16), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_FALSE(conflicts(pr, &nx[2], 0x28));
	CU_ASSERT_TRUE(conflicts(pr, &nx[2], 0x2a));
	pr_destroy(pr);
}

/* ---- APTPL: the state file (pr_state.c) and its restore ---- */

#define NAA_HEX "6a000004bb4a9ec2f3a2f2d1e66d0b3c"
static char state_dir[64];

static void state_path(char *out, size_t n)
{
	snprintf(out, n, "%s/pr-%s.json", state_dir, NAA_HEX);
}

static bool state_exists(void)
{
	char path[128];

	state_path(path, sizeof(path));
	return access(path, F_OK) == 0;
}

static struct scsi_pr *new_pr_at(const char *dir, const char *serial)
{
	struct scsi_pr *pr = new_pr();

	CU_ASSERT_EQUAL_FATAL(pr_persist_init(pr, dir, serial, NAA_HEX, "bs0"), 0);
	return pr;
}

static void write_state(const char *text)
{
	char path[128];
	FILE *f;

	state_path(path, sizeof(path));
	f = fopen(path, "w");
	CU_ASSERT_FATAL(f != NULL);
	fputs(text, f);
	fclose(f);
}

static void ptpl_bits(struct scsi_pr *pr, bool *c, bool *a)
{
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RCAPS, 8), SCSI_GOOD);
	*c = last.data[2] & 0x01;
	*a = last.data[3] & 0x01;
}

/* READ FULL STATUS without the generation: what a restart must give back. */
static uint32_t full_status(struct scsi_pr *pr, uint8_t *out)
{
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RFULL, 8192), SCSI_GOOD);
	memcpy(out, last.data + 4, last.len - 4);
	return last.len - 4;
}

static void test_aptpl_save_restore(void)
{
	struct scsi_pr *pr = new_pr_at(state_dir, "SER1"), *pr2;
	uint8_t p[512] = { 0 }, fs1[8192], fs2[8192];
	uint32_t tl = 0, n1, n2;
	uint64_t key;
	uint8_t rt;
	bool c, a;

	ptpl_bits(pr, &c, &a);
	CU_ASSERT_TRUE(c);
	CU_ASSERT_FALSE(a);
	/* Without APTPL nothing is written. */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 0xa, 0), SCSI_GOOD);
	CU_ASSERT_FALSE(state_exists());
	/* APTPL=1: nx[0] changes its key, and registers nx[2] by bare name (SPEC_I_PT) on all ports. */
	put_be64(p, 0xa);
	put_be64(p + 8, 0xaa);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG, 0, p, 24), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0xaa, 0xa, 0x01), SCSI_GOOD);
	CU_ASSERT_TRUE(state_exists());
	memset(p, 0, sizeof(p));
	put_be64(p + 8, 0xc);
	p[20] = 0x08 | 0x04 | 0x01; /* SPEC_I_PT, ALL_TG_PT, APTPL */
	tl += put_tid(p + 28 + tl, nx[2].initiator_name, false);
	put_be32(p + 24, tl);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[1], REG, 0, p, 28 + tl), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, WE_RO, 0xa, 0, 0), SCSI_GOOD);
	ptpl_bits(pr, &c, &a);
	CU_ASSERT_TRUE(a);
	CU_ASSERT_EQUAL(nkeys(pr), 3);
	CU_ASSERT(generation(pr) > 0);
	n1 = full_status(pr, fs1);

	/* "Restart": a new LU object reads the file. */
	pr2 = new_pr_at(state_dir, "SER1");
	CU_ASSERT_EQUAL(generation(pr2), 0); /* SPC-4: a power on sets it to zero */
	n2 = full_status(pr2, fs2);
	CU_ASSERT_EQUAL(n1, n2);
	CU_ASSERT_EQUAL(memcmp(fs1, fs2, n1), 0);
	CU_ASSERT(reservation(pr2, &key, &rt));
	CU_ASSERT_EQUAL(key, 0xa);
	CU_ASSERT_EQUAL(rt, WE_RO);
	ptpl_bits(pr2, &c, &a);
	CU_ASSERT_TRUE(c && a);
	/* The reservation is enforced at once: registrants write, others only read. */
	CU_ASSERT_FALSE(conflicts(pr2, &nx[0], 0x2a));
	CU_ASSERT_FALSE(conflicts(pr2, &nx[1], 0x2a));
	CU_ASSERT_FALSE(conflicts(pr2, &nx[2], 0x2a)); /* registered by name, on every port */
	mk_nexus(&nx[4], "iqn.2024-01.test:d", "000000000004", 1, 5);
	CU_ASSERT_TRUE(conflicts(pr2, &nx[4], 0x2a));
	CU_ASSERT_FALSE(conflicts(pr2, &nx[4], 0x28));
	/* The restored registrations work: the holder's key releases, a wrong key conflicts. */
	CU_ASSERT_EQUAL(prout(pr2, &nx[1], RES, WE_RO, 0xa, 0, 0), SCSI_RESERVATION_CONFLICT);
	CU_ASSERT_EQUAL(prout(pr2, &nx[0], REL, WE_RO, 0xa, 0, 0), SCSI_GOOD);
	CU_ASSERT_FALSE(reservation(pr2, &key, &rt));
	pr_destroy(pr2);
	/* ... and that change was written too. */
	pr2 = new_pr_at(state_dir, "SER1");
	CU_ASSERT_FALSE(reservation(pr2, &key, &rt));
	CU_ASSERT_EQUAL(nkeys(pr2), 3);
	/* The LU's serial changed (same file name here): the old state is not applied. */
	pr_destroy(pr);
	pr = new_pr_at(state_dir, "SER2");
	CU_ASSERT_EQUAL(nkeys(pr), 0);
	pr_destroy(pr);
	/* APTPL=0 in a later registration: the file goes, a restart restores nothing. */
	CU_ASSERT_EQUAL(prout(pr2, &nx[1], REG, 0, 0xc, 0xd, 0), SCSI_GOOD);
	CU_ASSERT_FALSE(state_exists());
	ptpl_bits(pr2, &c, &a);
	CU_ASSERT_TRUE(c && !a);
	/* Other service actions do not touch APTPL, nor write while it is off. */
	CU_ASSERT_EQUAL(prout(pr2, &nx[0], RES, WE, 0xa, 0, 0x01), SCSI_GOOD);
	CU_ASSERT_FALSE(state_exists());
	pr_destroy(pr2);
	pr = new_pr_at(state_dir, "SER1");
	CU_ASSERT_EQUAL(nkeys(pr), 0);
	/* REGISTER AND MOVE carries APTPL in byte 17. */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 0x1, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, WE, 0x1, 0, 0), SCSI_GOOD);
	memset(p, 0, sizeof(p));
	put_be64(p, 0x1);
	put_be64(p + 8, 0x2);
	p[17] = 0x01;
	put_be16(p + 18, 1);
	tl = put_tid(p + 24, nx[1].initiator_port, true);
	put_be32(p + 20, tl);
	CU_ASSERT_EQUAL(prout_raw(pr, &nx[0], REG_MOVE, WE, p, 24 + tl), SCSI_GOOD);
	CU_ASSERT_TRUE(state_exists());
	pr2 = new_pr_at(state_dir, "SER1");
	CU_ASSERT(reservation(pr2, &key, &rt));
	CU_ASSERT_EQUAL(key, 0x2);
	CU_ASSERT_FALSE(conflicts(pr2, &nx[1], 0x2a));
	CU_ASSERT_TRUE(conflicts(pr2, &nx[0], 0x2a));
	/* CLEAR with APTPL on leaves an empty state on disk. */
	CU_ASSERT_EQUAL(prout(pr2, &nx[1], CLR, 0, 0x2, 0, 0), SCSI_GOOD);
	pr_destroy(pr2);
	pr_destroy(pr);
	pr = new_pr_at(state_dir, "SER1");
	CU_ASSERT_EQUAL(nkeys(pr), 0);
	ptpl_bits(pr, &c, &a);
	CU_ASSERT_TRUE(a);
	pr_destroy(pr);
}

/* A damaged file: logged, moved aside to .bad, the LU starts without reservations; never a crash. */
static void test_aptpl_damaged(void)
{
	char path[128], bad[140];
	struct scsi_pr *pr;

	state_path(path, sizeof(path));
	snprintf(bad, sizeof(bad), "%s.bad", path);
	write_state("{\"format\":\"isert-pr\",\"version\":1,\"serial\":\"SER1\",\"naa\":\"" NAA_HEX "\","
		    "\"generation\":1,\"aptpl\":true,\"registrations\":[{\"key\":\"0x1\"");
	pr = new_pr_at(state_dir, "SER1");
	CU_ASSERT_EQUAL(nkeys(pr), 0);
	CU_ASSERT_FALSE(state_exists());
	CU_ASSERT_EQUAL(access(bad, F_OK), 0);
	/* It keeps working: the next APTPL registration writes a good file. */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 0x5, 0x01), SCSI_GOOD);
	pr_destroy(pr);
	pr = new_pr_at(state_dir, "SER1");
	CU_ASSERT(has_key(pr, 0x5));
	pr_destroy(pr);
	unlink(bad);
	/* A folder in the file's place cannot be read: logged, left alone, no reservations. */
	CU_ASSERT_EQUAL(prout(pr = new_pr_at(state_dir, "SER1"), &nx[0], REG, 0, 0x5, 0, 0), SCSI_GOOD);
	pr_destroy(pr);
	CU_ASSERT_EQUAL(mkdir(path, 0700), 0);
	pr = new_pr_at(state_dir, "SER1");
	CU_ASSERT_EQUAL(nkeys(pr), 0);
	pr_destroy(pr);
	CU_ASSERT_EQUAL(rmdir(path), 0);
	/* A FIFO there must not hang the start. */
	CU_ASSERT_EQUAL(mkfifo(path, 0600), 0);
	pr = new_pr_at(state_dir, "SER1");
	CU_ASSERT_EQUAL(nkeys(pr), 0);
	pr_destroy(pr);
	CU_ASSERT_EQUAL(unlink(path), 0);
}

/* The write fails: the command fails and changes nothing, not even APTPL or a unit attention. */
static void test_aptpl_write_fails(void)
{
	char blocker[96], path[128], tmp[140];
	struct scsi_pr *pr;
	uint64_t key;
	uint8_t rt;
	FILE *f;
	bool c, a;

	/* The folder is a file. */
	snprintf(blocker, sizeof(blocker), "%s/not-a-folder", state_dir);
	f = fopen(blocker, "w");
	CU_ASSERT_FATAL(f != NULL);
	fclose(f);
	pr = new_pr_at(blocker, "SER1");
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 0x7, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], REG, 0, 0, 0x8, 0x01), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.key, SK_ILLEGAL_REQUEST);
	CU_ASSERT_EQUAL(last.asc, ASC_INSUFFICIENT_REG_RESOURCES);
	CU_ASSERT_EQUAL(nkeys(pr), 1);
	CU_ASSERT_EQUAL(generation(pr), 1);
	ptpl_bits(pr, &c, &a);
	CU_ASSERT_FALSE(a);
	pr_destroy(pr);
	unlink(blocker);

	/* APTPL is on, then the temp file cannot be created (a folder has its name). */
	pr = new_pr_at(state_dir, "SER1");
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 0x7, 0x01), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[1], REG, 0, 0, 0x8, 0x01), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, EA, 0x7, 0, 0), SCSI_GOOD);
	state_path(path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	CU_ASSERT_EQUAL_FATAL(mkdir(tmp, 0700), 0);
	nua = naborted = 0;
	CU_ASSERT_EQUAL(prout(pr, &nx[1], PRE_ABORT, WE, 0x8, 0x7, 0), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INSUFFICIENT_REG_RESOURCES);
	CU_ASSERT_EQUAL(nua, 0);
	CU_ASSERT_EQUAL(naborted, 0);
	CU_ASSERT(reservation(pr, &key, &rt));
	CU_ASSERT_EQUAL(key, 0x7);
	CU_ASSERT_EQUAL(rt, EA);
	CU_ASSERT_EQUAL(nkeys(pr), 2);
	CU_ASSERT_EQUAL(generation(pr), 2);
	CU_ASSERT_TRUE(conflicts(pr, &nx[1], 0x28));
	/* Turning APTPL off needs nothing written: it works, and removes the file. */
	CU_ASSERT_EQUAL(prout(pr, &nx[1], REG, 0, 0x8, 0x8, 0), SCSI_GOOD);
	CU_ASSERT_FALSE(state_exists());
	rmdir(tmp);
	pr_destroy(pr);
}

/* ---- the parser against hostile files ---- */

static int parse(const char *text, char *err, size_t n)
{
	struct pr_state st;
	int rc = pr_state_parse(text, strlen(text), &st, err, n);

	pr_state_clear(&st);
	return rc;
}

#define DOC(regs, res) "{\"format\":\"isert-pr\",\"version\":1,\"serial\":\"S\",\"naa\":\"" NAA_HEX "\"," \
		       "\"generation\":3,\"aptpl\":true,\"registrations\":[" regs "],\"reservation\":" res "}"
#define REG_A "{\"key\":\"0x1\",\"initiator\":\"iqn.2024-01.t:a,i,0x400001370000\"," \
	      "\"target_port\":\"iqn.2024-01.t:t,t,0x0001\",\"relative_port\":1,\"all_target_ports\":false}"
#define REG_B "{\"key\":\"0xffffffffffffffff\",\"initiator\":\"iqn.2024-01.t:b\"," \
	      "\"target_port\":\"iqn.2024-01.t:t,t,0x0001\",\"relative_port\":1,\"all_target_ports\":true}"

static void expect_bad(const char *text, const char *words)
{
	char err[256] = "";

	CU_ASSERT_EQUAL(parse(text, err, sizeof(err)), -EINVAL);
	if (!strstr(err, words))
		fprintf(stderr, "\n  message \"%s\" lacks \"%s\"\n", err, words);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, words));
}

static void test_state_parser(void)
{
	char err[256];
	struct pr_state st;
	char *big, *text;
	size_t n;

	CU_ASSERT_EQUAL(parse(DOC(REG_A "," REG_B, "{\"type\":5,\"holder\":0}"), err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(parse(DOC(REG_A "," REG_B, "{\"type\":8}"), err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(parse(DOC("", "null"), err, sizeof(err)), 0);
	/* Round trip. */
	CU_ASSERT_EQUAL_FATAL(pr_state_parse(DOC(REG_A "," REG_B, "{\"type\":1,\"holder\":1}"),
					     strlen(DOC(REG_A "," REG_B, "{\"type\":1,\"holder\":1}")), &st, err,
					     sizeof(err)), 0);
	CU_ASSERT_EQUAL(st.nregs, 2);
	CU_ASSERT_EQUAL(st.holder, 1);
	CU_ASSERT_EQUAL(st.regs[1].key, UINT64_MAX);
	CU_ASSERT_TRUE(st.regs[1].all_tg_pt);
	text = pr_state_format(&st);
	pr_state_clear(&st);
	CU_ASSERT_EQUAL(parse(text, err, sizeof(err)), 0);
	free(text);

	expect_bad("", "not valid JSON");
	expect_bad("[]", "JSON object");
	expect_bad(DOC(REG_A, "null") "x", "text after");
	expect_bad("{\"format\":\"isert-pr\",\"version\":2}", "version 2");
	expect_bad("{\"format\":\"other\",\"version\":1}", "format must be");
	expect_bad(DOC(REG_A, "{\"type\":5,\"holder\":1}"), "reservation.holder");
	expect_bad(DOC(REG_A, "{\"type\":5,\"holder\":-1}"), "reservation.holder");
	expect_bad(DOC(REG_A, "{\"type\":5}"), "reservation.holder is missing");
	expect_bad(DOC(REG_A, "{\"type\":7,\"holder\":0}"), "must be absent");
	expect_bad(DOC("", "{\"type\":8}"), "without registrations");
	expect_bad(DOC(REG_A, "{\"type\":2,\"holder\":0}"), "not a persistent reservation type");
	expect_bad(DOC(REG_A, "{\"type\":\"5\",\"holder\":0}"), "wrong type");
	expect_bad(DOC(REG_A "," REG_A, "null"), "again");
	expect_bad(DOC("{\"key\":\"0x0\",\"initiator\":\"iqn.2024-01.t:a\",\"target_port\":\"t\","
		       "\"relative_port\":1,\"all_target_ports\":false}", "null"), "key must be");
	expect_bad(DOC("{\"key\":\"0x10000000000000000\",\"initiator\":\"iqn.2024-01.t:a\",\"target_port\":\"t\","
		       "\"relative_port\":1,\"all_target_ports\":false}", "null"), "key");
	expect_bad(DOC("{\"key\":1,\"initiator\":\"iqn.2024-01.t:a\",\"target_port\":\"t\","
		       "\"relative_port\":1,\"all_target_ports\":false}", "null"), "key has the wrong type");
	expect_bad(DOC("{\"key\":\"0x1\",\"initiator\":\"iqn.2024-01.t:a,i,0x12\",\"target_port\":\"t\","
		       "\"relative_port\":1,\"all_target_ports\":false}", "null"), "initiator must be");
	expect_bad(DOC("{\"key\":\"0x1\",\"initiator\":\"iqn.2024-01.t:a\",\"target_port\":\"t\","
		       "\"relative_port\":65536,\"all_target_ports\":false}", "null"), "relative_port must be");
	expect_bad(DOC("{\"key\":\"0x1\",\"initiator\":\"iqn.2024-01.t:a\",\"target_port\":\"t\","
		       "\"relative_port\":1}", "null"), "all_target_ports is missing");
	/* Names are the initiator's bytes (any but NUL): escaped control characters come back. */
	CU_ASSERT_EQUAL(parse(DOC("{\"key\":\"0x1\",\"initiator\":\"iqn.2024-01.t:\\u0001\\\"\",\"target_port\":\"t\","
				  "\"relative_port\":1,\"all_target_ports\":false}", "null"), err, sizeof(err)), 0);
	expect_bad(DOC("{\"key\":\"0x1\",\"initiator\":\"iqn.2024-01.t:\\u0000x\",\"target_port\":\"t\","
		       "\"relative_port\":1,\"all_target_ports\":false}", "null"), "none of them NUL");
	expect_bad("{\"format\":\"isert-pr\",\"version\":1,\"serial\":\"S\\u0001\",\"naa\":\"" NAA_HEX "\","
		   "\"generation\":1,\"aptpl\":true,\"registrations\":[]}", "serial must be at most 64 printable");
	expect_bad(DOC("7", "null"), "registrations[0] must be an object");
	expect_bad("{\"format\":\"isert-pr\",\"version\":1,\"serial\":\"S\",\"naa\":\"xyz\",\"generation\":1,"
		   "\"aptpl\":true,\"registrations\":[]}", "naa must be");
	expect_bad("{\"format\":\"isert-pr\",\"version\":1,\"serial\":\"S\",\"naa\":\"" NAA_HEX "\","
		   "\"generation\":4294967296,\"aptpl\":true,\"registrations\":[]}", "generation must be");

	/* Names one byte longer than an iSCSI name allows. */
	big = malloc(8192);
	CU_ASSERT_FATAL(big != NULL);
	n = (size_t)snprintf(big, 8192, DOC("{\"key\":\"0x1\",\"initiator\":\"%0224d\",\"target_port\":\"t\","
					    "\"relative_port\":1,\"all_target_ports\":false}", "null"), 0);
	CU_ASSERT(n < 8192);
	expect_bad(big, "initiator must be");
	snprintf(big, 8192, DOC("{\"key\":\"0x1\",\"initiator\":\"a\",\"target_port\":\"%0256d\","
				"\"relative_port\":1,\"all_target_ports\":false}", "null"), 0);
	expect_bad(big, "target_port must be at most 255");
	free(big);

	/* Deep nesting stops at the tokenizer's depth limit. */
	big = malloc(200001);
	CU_ASSERT_FATAL(big != NULL);
	memset(big, '[', 100000);
	memset(big + 100000, ']', 100000);
	big[200000] = 0;
	expect_bad(big, "not valid JSON");
	free(big);

	/* One registration over the cap, and a file over the size cap. */
	size_t cap = 1100 * 200 + 1024;
	big = malloc(cap);
	CU_ASSERT_FATAL(big != NULL);
	n = (size_t)snprintf(big, cap, "{\"format\":\"isert-pr\",\"version\":1,\"serial\":\"S\",\"naa\":\"%s\","
				       "\"generation\":1,\"aptpl\":true,\"registrations\":[", NAA_HEX);
	for (int i = 0; i <= PR_STATE_MAX_REGS; i++)
		n += (size_t)snprintf(big + n, cap - n, "%s{\"key\":\"0x1\",\"initiator\":\"iqn.2024-01.t:%d\","
					  "\"target_port\":\"t\",\"relative_port\":1,\"all_target_ports\":false}",
				      i ? "," : "", i);
	snprintf(big + n, cap - n, "]}");
	expect_bad(big, "at most 1024 are allowed");
	free(big);
	big = malloc(PR_STATE_MAX_BYTES + 2);
	CU_ASSERT_FATAL(big != NULL);
	memset(big, ' ', PR_STATE_MAX_BYTES + 1);
	big[PR_STATE_MAX_BYTES + 1] = 0;
	memcpy(big, DOC("", "null"), strlen(DOC("", "null")));
	expect_bad(big, "at most 4194304");
	/* The same through the file reader. */
	{
		char path[128];
		FILE *f;

		state_path(path, sizeof(path));
		f = fopen(path, "w");
		CU_ASSERT_FATAL(f != NULL);
		fwrite(big, 1, PR_STATE_MAX_BYTES + 1, f);
		fclose(f);
		CU_ASSERT_EQUAL(pr_state_read(path, &st, err, sizeof(err)), -EINVAL);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "at most 4194304"));
		CU_ASSERT_EQUAL(st.regs, NULL);
		unlink(path);
		CU_ASSERT_EQUAL(pr_state_read(path, &st, err, sizeof(err)), -ENOENT);
	}
	free(big);
	/* A NUL byte inside. */
	CU_ASSERT_EQUAL(pr_state_parse("{\"a\":\0}", 7, &st, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "NUL"));
}

/*
 * The registration maximum with initiator names as long as allowed and
 * made of bytes JSON must escape: the file stays under its cap and the
 * whole state comes back.
 */
static void test_aptpl_at_maximum(void)
{
	static struct scsi_nexus big[REGS_MAX];
	struct scsi_pr *pr = new_pr_at(state_dir, "SER1"), *pr2;
	char iname[224], isid[13], path[128];
	uint8_t *fs1 = malloc(65536), *fs2 = malloc(65536);
	struct stat sb;

	CU_ASSERT_FATAL(fs1 && fs2);
	for (unsigned i = 0; i < REGS_MAX; i++) {
		memset(iname, 0x01, 223);
		iname[223] = 0;
		memcpy(iname, "iqn.2026-11.\"\\\xff:", 16);
		snprintf(iname + 223 - 4, 5, "%04x", i);
		snprintf(isid, sizeof(isid), "%012x", 0x400000u + i);
		mk_nexus(&big[i], iname, isid, 1, 1000 + i);
		/* APTPL on the last one only: one write of everything, not 1024 growing ones. */
		CU_ASSERT_EQUAL_FATAL(prout(pr, &big[i], REG, 0, 0, 0x1000 + i, i == REGS_MAX - 1), SCSI_GOOD);
	}
	CU_ASSERT_TRUE(state_exists());
	CU_ASSERT_EQUAL(prout(pr, &big[7], RES, EA_RO, 0x1007, 0, 0), SCSI_GOOD);
	state_path(path, sizeof(path));
	CU_ASSERT_EQUAL(stat(path, &sb), 0);
	CU_ASSERT(sb.st_size > REGS_MAX * 200 * 6 && sb.st_size <= PR_STATE_MAX_BYTES); /* 202 escaped bytes a name */
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RFULL, 0xffff), SCSI_GOOD);
	memcpy(fs1, last.data + 4, last.len - 4);
	pr2 = new_pr_at(state_dir, "SER1");
	CU_ASSERT_EQUAL(nkeys(pr2), REGS_MAX);
	CU_ASSERT_EQUAL(prin(pr2, &nx[0], RFULL, 0xffff), SCSI_GOOD);
	memcpy(fs2, last.data + 4, last.len - 4);
	CU_ASSERT_EQUAL(memcmp(fs1, fs2, last.len - 4), 0);
	CU_ASSERT_FALSE(conflicts(pr2, &big[REGS_MAX - 1], 0x28));
	CU_ASSERT_TRUE(conflicts(pr2, &nx[0], 0x28));
	CU_ASSERT_EQUAL(prout(pr2, &big[7], CLR, 0, 0x1007, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr2, &big[7], REG, 0, 0, 0, 0), SCSI_GOOD); /* APTPL off: the file goes */
	CU_ASSERT_FALSE(state_exists());
	pr_destroy(pr2);
	pr_destroy(pr);
	free(fs1);
	free(fs2);
}

static void test_aptpl_without_folder(void)
{
	/* Without a state folder APTPL is not offered (PTPL_C=0) and refused. */
	struct scsi_pr *pr = new_pr();
	bool c, a;

	ptpl_bits(pr, &c, &a);
	CU_ASSERT_FALSE(c || a);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], REG, 0, 0, 7, 0x01), SCSI_CHECK_CONDITION);
	CU_ASSERT_EQUAL(last.asc, ASC_INVALID_FIELD_IN_PARAM);
	pr_destroy(pr);
}

/*
 * A state shared between targets (share.c): the text round-trips with the
 * SPC-2 reservation, a change tried on a copy keeps its notes for the copy's
 * owner to send, and they reach the callbacks of the LU they are delivered to.
 */
static void test_shared_state(void)
{
	static const char naa[] = "600140500000000000000000000000ab";
	struct scsi_pr *pr = new_pr(), *other = new_pr();
	char err[256];
	uint64_t key;
	uint8_t rt;

	pr_set_shared(pr, "SERIAL", naa, "disk-a");
	pr_set_shared(other, "SERIAL", naa, "disk-b");
	prout(pr, &nx[0], REG, 0, 0, 0x11, 0);
	prout(pr, &nx[1], REG, 0, 0, 0x22, 0x01); /* APTPL without a folder: kept, the state is shared */
	CU_ASSERT_EQUAL(last.status, SCSI_GOOD);
	CU_ASSERT_EQUAL(prout(pr, &nx[0], RES, WE, 0x11, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(prin(pr, &nx[0], RCAPS, 8), SCSI_GOOD);
	CU_ASSERT(last.data[2] & 0x01);     /* PTPL_C */
	CU_ASSERT(last.data[3] & 0x01);     /* PTPL_A */
	char *t = pr_text(pr);
	CU_ASSERT_FATAL(t != NULL);
	CU_ASSERT_PTR_NULL(strstr(t, "disk-a")); /* each gateway names its backstore as it likes */
	CU_ASSERT_EQUAL(pr_load(other, t, strlen(t), err, sizeof(err)), 0);
	char *t2 = pr_text(other);
	CU_ASSERT_STRING_EQUAL(t, t2); /* the same state is the same text */
	free(t2);
	CU_ASSERT(reservation(other, &key, &rt));
	CU_ASSERT_EQUAL(key, 0x11);
	CU_ASSERT_TRUE(conflicts(other, &nx[1], 0x2a));
	CU_ASSERT_EQUAL(generation(other), generation(pr));

	/* A change on a copy: the LU it came from is untouched and hears nothing yet. */
	struct scsi_pr *copy = pr_copy(other);
	CU_ASSERT_FATAL(copy != NULL);
	nua = naborted = 0;
	CU_ASSERT_EQUAL(prout(copy, &nx[1], PRE_ABORT, WE, 0x22, 0x11, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(nua, 0);
	CU_ASSERT_EQUAL(naborted, 0);
	CU_ASSERT(reservation(other, &key, &rt) && key == 0x11);
	struct pr_note *notes;
	unsigned n = pr_take_notes(copy, &notes);
	CU_ASSERT(n >= 1);
	char *t3 = pr_text(copy);
	CU_ASSERT_FATAL(t3 != NULL);
	CU_ASSERT_EQUAL(pr_load(other, t3, strlen(t3), err, sizeof(err)), 0);
	pr_deliver(other, notes, n);
	CU_ASSERT_TRUE(got_ua(&nx[0], ASC_REGISTRATIONS_PREEMPTED));
	CU_ASSERT_EQUAL(naborted, 1);
	CU_ASSERT(reservation(other, &key, &rt) && key == 0x22);
	free(notes);
	free(t3);
	pr_destroy(copy);

	/* The SPC-2 reservation travels too, with its nexus. */
	CU_ASSERT_EQUAL(prout(pr, &nx[0], CLR, 0, 0x11, 0, 0), SCSI_GOOD);
	CU_ASSERT_EQUAL(reserve6(pr, &nx[2], 0x16), SCSI_GOOD);
	free(t);
	t = pr_text(pr);
	CU_ASSERT_PTR_NOT_NULL(strstr(t, "spc2_reservation"));
	CU_ASSERT_EQUAL(pr_load(other, t, strlen(t), err, sizeof(err)), 0);
	CU_ASSERT_TRUE(conflicts(other, &nx[0], 0x28));
	CU_ASSERT_FALSE(conflicts(other, &nx[2], 0x28));
	pr_reset(other, &nx[2], true);
	CU_ASSERT_FALSE(conflicts(other, &nx[0], 0x28));

	/* Another LU's state is refused, naming it; a damaged one too, and nothing changes. */
	static const char naa2[] = "600140500000000000000000000000cd";
	struct scsi_pr *third = new_pr();
	pr_set_shared(third, "SERIAL", naa2, "disk-c");
	CU_ASSERT_EQUAL(pr_load(third, t, strlen(t), err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not of this one"));
	CU_ASSERT_EQUAL(pr_load(other, "{\"format\": 1}", 14, err, sizeof(err)), -EINVAL);
	CU_ASSERT_FALSE(conflicts(other, &nx[0], 0x28));
	free(t);
	pr_destroy(third);
	pr_destroy(other);
	pr_destroy(pr);
}

int main(void)
{
	CU_pSuite s;

	mk_nexus(&nx[0], "iqn.2024-01.test:a", "000000000001", 1, 1);
	mk_nexus(&nx[1], "iqn.2024-01.test:b", "000000000002", 1, 2);
	mk_nexus(&nx[2], "iqn.2024-01.test:c", "00023d000001", 1, 3);
	mk_nexus(&nx[3], "iqn.2024-01.test:a", "000000000009", 1, 4);
	snprintf(state_dir, sizeof(state_dir), "/tmp/test_pr.XXXXXX");
	if (!mkdtemp(state_dir))
		return 1;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("pr", NULL, NULL);
	CU_add_test(s, "register", test_register);
	CU_add_test(s, "read_keys_truncate", test_read_keys_truncate);
	CU_add_test(s, "prin_service_actions", test_prin_service_actions);
	CU_add_test(s, "report_caps", test_report_caps);
	CU_add_test(s, "reserve_release_types", test_reserve_release_types);
	CU_add_test(s, "access", test_access);
	CU_add_test(s, "ownership", test_ownership);
	CU_add_test(s, "release_ua", test_release_ua);
	CU_add_test(s, "clear", test_clear);
	CU_add_test(s, "preempt_registration", test_preempt_registration);
	CU_add_test(s, "preempt_holder", test_preempt_holder);
	CU_add_test(s, "preempt_all_registrants", test_preempt_all_registrants);
	CU_add_test(s, "register_and_move", test_register_and_move);
	CU_add_test(s, "spec_i_pt_full_status", test_spec_i_pt_and_full_status);
	CU_add_test(s, "prin_at_maximum", test_prin_at_maximum);
	CU_add_test(s, "all_tg_pt", test_all_tg_pt);
	CU_add_test(s, "param_errors", test_param_errors);
	CU_add_test(s, "bad_tids", test_bad_tids);
	CU_add_test(s, "spc2", test_spc2);
	CU_add_test(s, "spc2_with_pr", test_spc2_with_pr);
	CU_add_test(s, "aptpl_save_restore", test_aptpl_save_restore);
	CU_add_test(s, "aptpl_damaged", test_aptpl_damaged);
	CU_add_test(s, "aptpl_write_fails", test_aptpl_write_fails);
	CU_add_test(s, "aptpl_without_folder", test_aptpl_without_folder);
	CU_add_test(s, "aptpl_at_maximum", test_aptpl_at_maximum);
	CU_add_test(s, "state_parser", test_state_parser);
	CU_add_test(s, "shared_state", test_shared_state);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	int rc = unit_run();
	rmdir(state_dir); /* empty unless a test failed half-way: then it stays for a look */
	return rc;
}
