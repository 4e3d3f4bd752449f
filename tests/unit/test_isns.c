/*
 * CUnit tests for target/isns/: the PDU reader's bounds, what a
 * configuration registers (want.c), and the engine's messages against a
 * server played here: a first registration replaces the entity and links
 * each target to its own portals only (other pairs get a NULL tag), a
 * change is sent as its difference, a server that lost the entity gets it
 * whole again, failures back off 1 s doubling to 30 s, a server that
 * refuses any kind of request with any status is asked no faster, a stop
 * deregisters; and the ESI port's slots, where the server always gets one.
 */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "target/config/config.h"
#include "target/isns/isns_int.h"

#include "unit_run.h"

static void quiet(enum log_level lvl, const char *line)
{
	(void)lvl;
	(void)line;
}

/* ------------------------------------------------------------------------ */
/* The reader. */

static size_t pdu(uint8_t *b, uint16_t func, uint16_t flags, uint16_t xid, uint16_t seq, const uint8_t *pl, size_t n)
{
	put_be16(b, 1);
	put_be16(b + 2, func);
	put_be16(b + 4, (uint16_t)n);
	put_be16(b + 6, flags);
	put_be16(b + 8, xid);
	put_be16(b + 10, seq);
	memcpy(b + 12, pl, n);
	return 12 + n;
}

static int feed_all(const uint8_t *b, size_t n, struct isns_msg *m, char *err)
{
	struct isns_rx rx = { 0 };
	size_t off = 0, used;
	int r = 0;
	while (off < n && !r) {
		r = isns_rx_feed(&rx, b + off, 1, &used, m, err, 256); /* a byte at a time */
		off += used;
	}
	isns_rx_reset(&rx);
	return r;
}

static void test_reader(void)
{
	uint8_t pl[64], b[256];
	char err[256];
	struct isns_msg m;
	/* status 0, then an EID "e" */
	memset(pl, 0, sizeof(pl));
	put_be32(pl + 4, ISNS_T_EID);
	put_be32(pl + 8, 4);
	pl[12] = 'e';
	size_t n = pdu(b, 0x8001, 0x4c00, 7, 0, pl, 16);
	CU_ASSERT_EQUAL(feed_all(b, n, &m, err), 1);
	CU_ASSERT_EQUAL(m.status, 0);
	CU_ASSERT_EQUAL(m.nattrs, 1);
	const char *s;
	CU_ASSERT_TRUE(isns_attr_str(&m.attrs[0], &s) && !strcmp(s, "e"));
	isns_msg_free(&m);
	/* the same over two PDUs */
	n = pdu(b, 0x8001, 0x4400, 7, 0, pl, 8);
	n += pdu(b + n, 0x8001, 0x4800, 7, 1, pl + 8, 8);
	CU_ASSERT_EQUAL(feed_all(b, n, &m, err), 1);
	CU_ASSERT_EQUAL(m.nattrs, 1);
	isns_msg_free(&m);
	/* a value longer than what is left */
	put_be32(pl + 8, 16);
	n = pdu(b, 0x8001, 0x4c00, 7, 0, pl, 16);
	CU_ASSERT_EQUAL(feed_all(b, n, &m, err), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "only 4 left"));
	/* a value over the cap */
	put_be32(pl + 8, ISNS_MAX_ATTR_LEN + 4);
	n = pdu(b, 0x8001, 0x4c00, 7, 0, pl, 16);
	CU_ASSERT_EQUAL(feed_all(b, n, &m, err), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "more than 4096"));
	/* an authentication block, a version 2, a PDU out of sequence */
	put_be32(pl + 8, 4);
	n = pdu(b, 0x8001, 0x6c00, 7, 0, pl, 16);
	CU_ASSERT_EQUAL(feed_all(b, n, &m, err), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "authentication"));
	n = pdu(b, 0x8001, 0x4c00, 7, 0, pl, 16);
	put_be16(b, 2);
	CU_ASSERT_EQUAL(feed_all(b, n, &m, err), -EPROTO);
	n = pdu(b, 0x8001, 0x4400, 7, 0, pl, 8);
	n += pdu(b + n, 0x8001, 0x4800, 7, 2, pl + 8, 8);
	CU_ASSERT_EQUAL(feed_all(b, n, &m, err), -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "seq 2"));
}

/* More PDUs than ISNS_MAX_PDUS in one message: refused, memory bounded by what came. */
static void test_reader_pdus(void)
{
	uint8_t b[16];
	char err[256];
	struct isns_rx rx = { 0 };
	struct isns_msg m;
	size_t used;
	int r = 0;
	for (unsigned i = 0; i <= ISNS_MAX_PDUS && !r; i++) {
		size_t n = pdu(b, 0x8002, i ? 0x4000 : 0x4400, 1, (uint16_t)i, (const uint8_t *)"\0\0\0\0", 4);
		r = isns_rx_feed(&rx, b, n, &used, &m, err, sizeof(err));
	}
	CU_ASSERT_EQUAL(r, -EPROTO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "PDUs"));
	isns_rx_reset(&rx);
}

/* ------------------------------------------------------------------------ */
/* What a configuration registers. */

static const char cfg_json[] =
	"{ \"backstores\": [ { \"name\": \"r\", \"type\": \"ram\", \"size\": \"1M\" } ],"
	"  \"targets\": ["
	"    { \"iqn\": \"iqn.2026-11.org.isert:a\", \"alias\": \"A\", \"tpgs\": ["
	"      { \"tag\": 1, \"portals\": [ { \"ip\": \"127.0.0.1\", \"port\": 3260 }, { \"ip\": \"0.0.0.0\", \"port\": 3262 } ] },"
	"      { \"tag\": 2, \"portals\": [ { \"ip\": \"127.0.0.1\", \"port\": 3261, \"iser\": true } ] } ] },"
	"    { \"iqn\": \"iqn.2026-11.org.isert:b\", \"tpgs\": ["
	"      { \"tag\": 1, \"enable\": false, \"portals\": [ { \"ip\": \"127.0.0.1\", \"port\": 3263 } ] } ] },"
	"    { \"iqn\": \"iqn.2026-11.org.isert:c\", \"tpgs\": ["
	"      { \"tag\": 7, \"portals\": [ { \"ip\": \"127.0.0.1\", \"port\": 3260 } ] } ] } ],"
	"  \"global\": { \"isns\": { \"server\": \"[::1]\", \"esi_interval\": 30, \"discovery_domain\": \"dd\" } } }";

static struct isns_want *want_of(const char *json)
{
	struct config *c = NULL;
	char err[256];
	if (config_load_string(json, "test", &c, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return NULL;
	}
	struct isns_want *w = isns_want_from_config(c, err, sizeof(err));
	config_free(c);
	return w;
}

static void test_want(void)
{
	struct isns_want *w = want_of(cfg_json);
	CU_ASSERT_PTR_NOT_NULL_FATAL(w);
	CU_ASSERT_STRING_EQUAL(w->host, "::1");
	CU_ASSERT_EQUAL(w->port, 3205);
	char *h = isns_default_eid();
	CU_ASSERT_STRING_EQUAL(w->eid, h); /* no entity: the host name */
	free(h);
	CU_ASSERT_EQUAL(w->esi_interval, 30);
	CU_ASSERT_STRING_EQUAL(w->dd, "dd");
	CU_ASSERT_EQUAL(w->reg_period, 900);
	/* 3260, 3262 (wildcard), 3261: the disabled group's 3263 is not registered, nor its target */
	CU_ASSERT_EQUAL(w->nportals, 3);
	CU_ASSERT_EQUAL(w->portals[1].wild, AF_INET);
	CU_ASSERT_EQUAL_FATAL(w->nnodes, 2);
	CU_ASSERT_STRING_EQUAL(w->nodes[0].name, "iqn.2026-11.org.isert:a");
	CU_ASSERT_STRING_EQUAL(w->nodes[0].alias, "A");
	CU_ASSERT_EQUAL(w->nodes[0].npgs, 3);
	CU_ASSERT_EQUAL(w->nodes[0].pgs[2].tag, 2);
	CU_ASSERT_STRING_EQUAL(w->nodes[1].name, "iqn.2026-11.org.isert:c");
	CU_ASSERT_EQUAL(w->nodes[1].npgs, 1);
	CU_ASSERT_EQUAL(w->nodes[1].pgs[0].portal, 0); /* the portal it shares with a */
	CU_ASSERT_EQUAL(w->nodes[1].pgs[0].tag, 7);
	isns_want_free(w);
	struct config *c = NULL;
	char err[256];
	CU_ASSERT_EQUAL(config_load_string("{ \"global\": { \"isns\": null } }", "t", &c, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NULL(isns_want_from_config(c, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(err, "");
	config_free(c);
}

/* ------------------------------------------------------------------------ */
/* The engine against a server played here. */

static struct {
	struct isns_eng *e;
	int connects, closes;
	bool refuse;
	uint64_t now;
	struct isns_msg req[16];  /* the requests of a step, read back */
	size_t nreq;
	struct isns_rx rx;
} t;

static const uint8_t local[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3 };

static void fake_connect(void *ctx, const char *host, uint16_t port)
{
	(void)ctx;
	(void)host;
	(void)port;
	t.connects++;
	if (t.refuse)
		isns_eng_down(t.e, "refused", t.now);
	else
		isns_eng_connected(t.e, local, t.now);
}

static void fake_close(void *ctx)
{
	(void)ctx;
	t.closes++;
	isns_rx_reset(&t.rx);
}

static const struct isns_io_ops ops = { fake_connect, fake_close };

static void clear_reqs(void)
{
	for (size_t i = 0; i < t.nreq; i++)
		isns_msg_free(&t.req[i]);
	t.nreq = 0;
}

/* Run the engine: each request it sends is kept and answered with status (attrs after the delimiter). */
static void serve(uint32_t status, int rounds)
{
	char err[256];
	for (int i = 0; i < rounds; i++) {
		isns_eng_tick(t.e, t.now);
		size_t n;
		const uint8_t *p = isns_eng_output(t.e, &n);
		if (!p || !n)
			continue;
		struct isns_msg m;
		size_t used;
		CU_ASSERT_EQUAL_FATAL(isns_rx_feed(&t.rx, p, n, &used, &m, err, sizeof(err)), 1);
		isns_eng_sent(t.e, n, t.now);
		uint8_t b[64], st[4];
		put_be32(st, status);
		pdu(b, m.func | ISNS_RESPONSE, 0x4c00, m.xid, 0, st, 4);
		if (t.nreq < ARRAY_SIZE(t.req))
			t.req[t.nreq++] = m;
		else
			isns_msg_free(&m);
		isns_eng_input(t.e, b, 16, t.now);
	}
}

static const struct isns_attr *find(const struct isns_msg *m, uint32_t tag, size_t from)
{
	for (size_t i = from; i < m->nattrs; i++)
		if (m->attrs[i].tag == tag)
			return &m->attrs[i];
	return NULL;
}

static bool has_str(const struct isns_msg *m, uint32_t tag, const char *v)
{
	const char *s;
	for (size_t i = isns_msg_oper(m); i < m->nattrs; i++)
		if (m->attrs[i].tag == tag && isns_attr_str(&m->attrs[i], &s) && !strcmp(s, v))
			return true;
	return false;
}

static const char two_json[] =
	"{ \"backstores\": [ { \"name\": \"r\", \"type\": \"ram\", \"size\": \"1M\" } ],"
	"  \"targets\": ["
	"    { \"iqn\": \"iqn.2026-11.org.isert:a\", \"tpgs\": [ { \"tag\": 1, \"portals\": [ { \"ip\": \"10.0.0.1\" } ] } ] },"
	"    { \"iqn\": \"iqn.2026-11.org.isert:b\", \"tpgs\": [ { \"tag\": 4, \"portals\": [ { \"ip\": \"0.0.0.0\", \"port\": 3261 } ] } ] }"
	"    %s ],"
	"  \"global\": { \"isns\": { \"server\": \"127.0.0.1:3620\", \"entity\": \"ent\", \"registration_period\": 30 } } }";

static struct isns_want *two(const char *extra)
{
	char json[2048];
	snprintf(json, sizeof(json), two_json, extra);
	return want_of(json);
}

static void start(void)
{
	memset(&t, 0, sizeof(t));
	t.now = 100000;
	t.e = isns_eng_new(&ops, NULL);
	isns_eng_want(t.e, two(""), t.now);
}

static void finish(void)
{
	clear_reqs();
	isns_eng_free(t.e);
	isns_rx_reset(&t.rx);
}

/* ------------------------------------------------------------------------ */
/* A good server, for the configuration below (two targets, a domain or not): what it answers each kind of request. */

enum hostile_kind { HK_REG, HK_CHECK, HK_DD_FIND, HK_DD_CREATE, HK_DD_ADD, HK_DD_DEREG, HK_DEV_DEREG, HK_N };
static const char *const hk_name[] = { "DevAttrReg", "DevAttrQry (check)", "DevAttrQry (domain)", "DDReg (create)",
				       "DDReg (add)", "DDDereg", "DevDereg" };

static const char hostile_json[] =
	"{ \"backstores\": [ { \"name\": \"r\", \"type\": \"ram\", \"size\": \"1M\" } ],"
	"  \"targets\": ["
	"    { \"iqn\": \"iqn.2026-11.org.isert:a\", \"tpgs\": [ { \"tag\": 1, \"portals\": [ { \"ip\": \"10.0.0.1\" } ] } ] }%s"
	"  ], \"global\": { \"isns\": { \"server\": \"127.0.0.1:3620\", \"entity\": \"ent\", \"registration_period\": 30%s } } }";
static const char hostile_b[] =
	", { \"iqn\": \"iqn.2026-11.org.isert:b\", \"tpgs\": [ { \"tag\": 4, \"portals\": [ { \"ip\": \"0.0.0.0\", \"port\": 3261 } ] } ] }";
static const char hostile_dd[] = ", \"discovery_domain\": \"dd\"";

static struct isns_want *hostile_want(bool b, bool dd)
{
	char json[2048];
	snprintf(json, sizeof(json), hostile_json, b ? hostile_b : "", dd ? hostile_dd : "");
	return want_of(json);
}

static enum hostile_kind kind_of(const struct isns_msg *m)
{
	switch (m->func) {
	case ISNS_DEV_ATTR_REG: return HK_REG;
	case ISNS_DEV_DEREG: return HK_DEV_DEREG;
	case ISNS_DD_DEREG: return HK_DD_DEREG;
	case ISNS_DD_REG: return find(m, ISNS_T_DD_ID, 0) && find(m, ISNS_T_DD_ID, 0) < &m->attrs[isns_msg_oper(m)] ?
				 HK_DD_ADD : HK_DD_CREATE;
	default: return find(m, ISNS_T_DD_NAME, 0) ? HK_DD_FIND : HK_CHECK;
	}
}

/* A good server's answer to m (the "hostile" configuration's targets and portals). */
static void good_answer(const struct isns_msg *m, enum hostile_kind k, bool *dd_exists, struct isns_out *o)
{
	static const uint8_t ip_a[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1 };
	const char *name = "";
	switch (k) {
	case HK_CHECK:
		if (m->nattrs > 1)
			isns_attr_str(&m->attrs[1], &name);
		isns_put_str(o, ISNS_T_ISCSI_NAME, name);
		isns_put_nil(o, ISNS_T_DELIMITER);
		isns_put_str(o, ISNS_T_EID, "ent");
		isns_put_str(o, ISNS_T_ISCSI_NAME, name);
		isns_put_str(o, ISNS_T_PG_NAME, name);
		bool a = !strcmp(name, "iqn.2026-11.org.isert:a");
		isns_put_ip(o, ISNS_T_PG_IP, a ? ip_a : local);
		isns_put_u32(o, ISNS_T_PG_PORT, a ? 3260 : 3261);
		isns_put_u32(o, ISNS_T_PGT, a ? 1 : 4);
		break;
	case HK_DD_CREATE:
		*dd_exists = true;
		/* fall through */
	case HK_DD_FIND:
		isns_put_nil(o, ISNS_T_DELIMITER);
		if (*dd_exists) {
			isns_put_u32(o, ISNS_T_DD_ID, 5);
			isns_put_str(o, ISNS_T_DD_NAME, "dd");
		}
		break;
	default:
		break;
	}
}

/* Answer m: status st and nothing more, or (well) what a good server says. */
static void reply(const struct isns_msg *m, uint32_t st, bool well, bool *dd_exists)
{
	struct isns_out o;
	CU_ASSERT_EQUAL_FATAL(isns_out_init(&o, m->func | ISNS_RESPONSE, ISNS_F_SERVER, m->xid), 0);
	put_be32(o.b + o.len, st);
	o.len += 4;
	if (well)
		good_answer(m, kind_of(m), dd_exists, &o);
	isns_out_finish(&o);
	isns_eng_input(t.e, o.b, o.len, t.now);
	isns_out_free(&o);
}

/* Run the engine against the good server. */
static void serve_well(int rounds)
{
	char err[256];
	bool dd_exists = false;
	for (int i = 0; i < rounds; i++) {
		isns_eng_tick(t.e, t.now);
		size_t n, used;
		const uint8_t *p = isns_eng_output(t.e, &n);
		if (!p || !n)
			continue;
		struct isns_msg m;
		CU_ASSERT_EQUAL_FATAL(isns_rx_feed(&t.rx, p, n, &used, &m, err, sizeof(err)), 1);
		isns_eng_sent(t.e, n, t.now);
		reply(&m, 0, true, &dd_exists);
		isns_msg_free(&m);
	}
}

static void test_register(void)
{
	start();
	serve(0, 4);
	CU_ASSERT_EQUAL(t.connects, 1);
	CU_ASSERT_TRUE(isns_eng_synced(t.e));
	CU_ASSERT_EQUAL_FATAL(t.nreq, 1);
	const struct isns_msg *m = &t.req[0];
	CU_ASSERT_EQUAL(m->func, ISNS_DEV_ATTR_REG);
	CU_ASSERT_TRUE(m->flags & ISNS_F_REPLACE);
	const char *s;
	/* Source: the first target; key: the entity; then the entity's attributes */
	CU_ASSERT_TRUE(m->attrs[0].tag == ISNS_T_ISCSI_NAME && isns_attr_str(&m->attrs[0], &s) &&
		       !strcmp(s, "iqn.2026-11.org.isert:a"));
	CU_ASSERT_TRUE(m->attrs[1].tag == ISNS_T_EID && isns_attr_str(&m->attrs[1], &s) && !strcmp(s, "ent"));
	CU_ASSERT_EQUAL(m->attrs[2].tag, ISNS_T_DELIMITER);
	uint32_t v;
	CU_ASSERT_TRUE(isns_attr_u32(find(m, ISNS_T_REG_PERIOD, 3), &v) && v == 30);
	CU_ASSERT_TRUE(has_str(m, ISNS_T_ISCSI_NAME, "iqn.2026-11.org.isert:b"));
	CU_ASSERT_PTR_NULL(find(m, ISNS_T_ESI_PORT, 0)); /* no ESI asked */
	/* The portals, the wildcard as the local address, each naming both targets: its tag or NULL. */
	size_t i = isns_msg_oper(m);
	const struct isns_attr *ip1 = find(m, ISNS_T_PORTAL_IP, i);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ip1);
	size_t k = (size_t)(ip1 - m->attrs);
	uint8_t a[16];
	CU_ASSERT_TRUE(isns_attr_ip(ip1, a) && a[12] == 10 && a[15] == 1);
	CU_ASSERT_TRUE(isns_attr_u32(&m->attrs[k + 1], &v) && v == 3260);
	CU_ASSERT_TRUE(m->attrs[k + 2].tag == ISNS_T_PGT && isns_attr_u32(&m->attrs[k + 2], &v) && v == 1);
	CU_ASSERT_TRUE(m->attrs[k + 3].tag == ISNS_T_PG_NAME && isns_attr_str(&m->attrs[k + 3], &s) &&
		       !strcmp(s, "iqn.2026-11.org.isert:a"));
	CU_ASSERT_TRUE(m->attrs[k + 4].tag == ISNS_T_PGT && m->attrs[k + 4].len == 0); /* b is not reached here */
	const struct isns_attr *ip2 = find(m, ISNS_T_PORTAL_IP, k + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ip2);
	CU_ASSERT_TRUE(isns_attr_ip(ip2, a) && !memcmp(a, local, 16));
	k = (size_t)(ip2 - m->attrs);
	CU_ASSERT_TRUE(m->attrs[k + 2].tag == ISNS_T_PGT && m->attrs[k + 2].len == 0);
	CU_ASSERT_TRUE(m->attrs[k + 4].tag == ISNS_T_PGT && isns_attr_u32(&m->attrs[k + 4], &v) && v == 4);
	finish();
}

static void test_diff(void)
{
	start();
	serve(0, 4);
	clear_reqs();
	/* a target added: one DevAttrReg, no replace, that node with a PG per portal the server has */
	isns_eng_want(t.e, two(", { \"iqn\": \"iqn.2026-11.org.isert:c\", \"alias\": \"C\", \"tpgs\": [ { \"tag\": 9, "
			       "\"portals\": [ { \"ip\": \"10.0.0.1\" } ] } ] }"), t.now);
	serve(0, 4);
	CU_ASSERT_EQUAL_FATAL(t.nreq, 1);
	const struct isns_msg *m = &t.req[0];
	CU_ASSERT_EQUAL(m->func, ISNS_DEV_ATTR_REG);
	CU_ASSERT_FALSE(m->flags & ISNS_F_REPLACE);
	CU_ASSERT_TRUE(has_str(m, ISNS_T_ISCSI_NAME, "iqn.2026-11.org.isert:c"));
	CU_ASSERT_TRUE(has_str(m, ISNS_T_ALIAS, "C"));
	CU_ASSERT_FALSE(has_str(m, ISNS_T_ISCSI_NAME, "iqn.2026-11.org.isert:a"));
	CU_ASSERT_PTR_NULL(find(m, ISNS_T_PORTAL_IP, 0));
	uint32_t v;
	CU_ASSERT_TRUE(isns_attr_u32(find(m, ISNS_T_PGT, 0), &v) && v == 9);
	CU_ASSERT_EQUAL(t.connects, 1);
	clear_reqs();
	/* back: c deregistered */
	isns_eng_want(t.e, two(""), t.now);
	serve(0, 4);
	CU_ASSERT_EQUAL_FATAL(t.nreq, 1);
	CU_ASSERT_EQUAL(t.req[0].func, ISNS_DEV_DEREG);
	CU_ASSERT_TRUE(has_str(&t.req[0], ISNS_T_ISCSI_NAME, "iqn.2026-11.org.isert:c"));
	CU_ASSERT_TRUE(isns_eng_synced(t.e));
	finish();
}

static void test_lost(void)
{
	start();
	serve(0, 4);
	clear_reqs();
	t.now += ISNS_CHECK_MAX_MS; /* a check is due: the server answers that it knows no such node */
	serve(ISNS_ST_NO_SUCH_ENTRY, 1);
	CU_ASSERT_EQUAL_FATAL(t.nreq, 1);
	CU_ASSERT_EQUAL(t.req[0].func, ISNS_DEV_ATTR_QRY);
	clear_reqs();
	/* a failure like the others: the connection closed, all of it again after the backoff */
	CU_ASSERT_EQUAL(t.closes, 1);
	CU_ASSERT_EQUAL(isns_eng_failures(t.e), 1);
	serve(0, 4);
	CU_ASSERT_EQUAL(t.nreq, 0);
	t.now += ISNS_BACKOFF_MIN_MS;
	serve(0, 4);
	CU_ASSERT_TRUE_FATAL(t.nreq >= 1);
	CU_ASSERT_EQUAL(t.req[0].func, ISNS_DEV_ATTR_REG);
	CU_ASSERT_TRUE(t.req[0].flags & ISNS_F_REPLACE);
	CU_ASSERT_TRUE(isns_eng_synced(t.e));
	finish();
}

static void test_backoff(void)
{
	start();
	t.refuse = true;
	static const unsigned want[] = { 1, 2, 4, 8, 16, 30, 30 };
	uint64_t next = isns_eng_tick(t.e, t.now); /* refused at once */
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		next = isns_eng_tick(t.e, t.now);
		CU_ASSERT_EQUAL(next - t.now, want[i] * 1000u);
		t.now = next;
		isns_eng_tick(t.e, t.now);
	}
	CU_ASSERT_EQUAL(isns_eng_failures(t.e), ARRAY_SIZE(want) + 1);
	/* the server is back: registered; the failures are forgotten once a check finds everything there */
	t.refuse = false;
	t.now += 30000;
	serve_well(4);
	CU_ASSERT_TRUE(isns_eng_synced(t.e));
	CU_ASSERT_EQUAL(isns_eng_failures(t.e), ARRAY_SIZE(want) + 1);
	t.now += 10000; /* a third of the registration period */
	serve_well(2);
	CU_ASSERT_TRUE(isns_eng_synced(t.e));
	CU_ASSERT_EQUAL(isns_eng_failures(t.e), 0);
	finish();
}

/* A status that is not success, a malformed answer: the connection closes and a retry follows. */
static void test_refused_answer(void)
{
	start();
	serve(ISNS_ST_INVALID_REGISTRATION, 2); /* connects, then the registration */
	CU_ASSERT_EQUAL(t.closes, 1);
	CU_ASSERT_EQUAL(isns_eng_failures(t.e), 1);
	CU_ASSERT_FALSE(isns_eng_synced(t.e));
	t.now += 1000;
	serve(0, 4);
	CU_ASSERT_TRUE(isns_eng_synced(t.e));
	CU_ASSERT_EQUAL(t.connects, 2);
	finish();
}

static void test_stop(void)
{
	start();
	serve(0, 4);
	clear_reqs();
	isns_eng_stop(t.e, t.now);
	serve(0, 4);
	CU_ASSERT_EQUAL_FATAL(t.nreq, 1);
	CU_ASSERT_EQUAL(t.req[0].func, ISNS_DEV_DEREG);
	const char *s;
	const struct isns_attr *a = find(&t.req[0], ISNS_T_EID, 0);
	CU_ASSERT_TRUE(a && isns_attr_str(a, &s) && !strcmp(s, "ent"));
	CU_ASSERT_TRUE(isns_eng_done(t.e));
	finish();
}

/* ------------------------------------------------------------------------ */
/* A server that refuses one kind of request with a status and answers every other one well. */

struct hostile_run {
	unsigned requests, refused, kind_seen;
	uint64_t ms;               /* of the engine's time: the run stops at HOSTILE_RUN_MS, or after too many steps */
	uint64_t gap_ms;           /* the first gap between two refusals shorter than the backoff allows (0: none) */
	unsigned gap_at;           /* ... and which refusal came too early */
};

#define HOSTILE_RUN_MS 600000u

/*
 * Ten minutes of the engine against a server that answers every request of
 * kind k with status st (and no attribute: status 0 then means an empty
 * answer) and every other one well.  A DevDereg and a DDDereg come of a
 * change: 20 s in, the configuration loses target b, or the domain.
 */
static struct hostile_run run_hostile(enum hostile_kind k, uint32_t st)
{
	struct hostile_run r = { 0 };
	bool dd = k >= HK_DD_FIND && k <= HK_DD_DEREG, dd_exists = k == HK_DD_ADD || k == HK_DD_DEREG;
	bool changed = k != HK_DD_DEREG && k != HK_DEV_DEREG; /* those come of a change */
	memset(&t, 0, sizeof(t));
	t.now = 100000;
	uint64_t end = t.now + HOSTILE_RUN_MS, change_at = t.now + 20000, last = 0, min_gap = ISNS_BACKOFF_MIN_MS;
	t.e = isns_eng_new(&ops, NULL);
	isns_eng_want(t.e, hostile_want(true, dd), t.now);
	char err[256];
	/* Bounded steps: a loop at one instant shows as a count, a tick that wakes for nothing as a run cut short. */
	for (unsigned steps = 0; t.now < end && steps < 200000; steps++) {
		if (!changed && t.now >= change_at) {
			isns_eng_want(t.e, hostile_want(k != HK_DEV_DEREG, k != HK_DD_DEREG), t.now);
			changed = true;
		}
		uint64_t next = isns_eng_tick(t.e, t.now);
		size_t n;
		const uint8_t *p = isns_eng_output(t.e, &n);
		if (!p || !n) {
			uint64_t until = !changed && change_at < next ? change_at : next;
			t.now = until > t.now ? until : t.now + 1;
			continue;
		}
		struct isns_msg m;
		size_t used;
		CU_ASSERT_EQUAL_FATAL(isns_rx_feed(&t.rx, p, n, &used, &m, err, sizeof(err)), 1);
		isns_eng_sent(t.e, n, t.now);
		r.requests++;
		if (kind_of(&m) == k) {
			r.kind_seen++;
			/* Refusals come no faster than 1 s doubling to 30 s (docs/admin.md, "iSNS"). */
			if (r.refused && !r.gap_ms && t.now - last < min_gap) {
				r.gap_ms = t.now - last + 1;
				r.gap_at = r.refused + 1;
			}
			if (r.refused)
				min_gap = MIN(min_gap * 2, (uint64_t)ISNS_BACKOFF_MAX_MS);
			r.refused++;
			last = t.now;
			reply(&m, st, false, &dd_exists);
		} else {
			reply(&m, 0, true, &dd_exists);
		}
		isns_msg_free(&m);
	}
	r.ms = t.now - (end - HOSTILE_RUN_MS);
	isns_eng_free(t.e);
	isns_rx_reset(&t.rx);
	return r;
}

/*
 * Whatever a server answers, isertd asks no faster than the backoff: every
 * kind of request refused with every status the engine names (and an
 * empty success), for ten minutes of the engine's time.  At most: the
 * attempts 1 s doubling to 30 s allow in that time, a few requests each
 * (a registration, the domain's lookup and join), and a check every third
 * of the registration period.
 */
static void test_hostile_statuses(void)
{
	unsigned attempts = 0;
	for (uint64_t at = 0, d = ISNS_BACKOFF_MIN_MS; at <= HOSTILE_RUN_MS; at += d, d = MIN(d * 2, ISNS_BACKOFF_MAX_MS))
		attempts++;
	const unsigned most = attempts * 4 + HOSTILE_RUN_MS / (30000 / 3) + 1; /* registration_period 30 */
	for (int k = 0; k < HK_N; k++) {
		for (uint32_t st = 0; st <= 24; st++) { /* RFC 4171 names 0-23 */
			struct hostile_run r = run_hostile((enum hostile_kind)k, st);
			bool ok = r.kind_seen && r.requests <= most && !r.gap_ms && r.ms >= HOSTILE_RUN_MS;
			if (!ok)
				printf("\n  %s answered with status %u: %u requests in %llu s (at most %u in %u s), %u refused%s",
				       hk_name[k], st, r.requests, (unsigned long long)r.ms / 1000, most, HOSTILE_RUN_MS / 1000,
				       r.refused, r.kind_seen ? "" : ", never asked");
			if (r.gap_ms)
				printf("; refusal %u came %llu ms after the one before", r.gap_at,
				       (unsigned long long)r.gap_ms - 1);
			CU_ASSERT_TRUE(ok);
		}
	}
}

static void test_esi_answer(void)
{
	uint8_t pl[64], b[128];
	char err[256];
	struct isns_msg m;
	memset(pl, 0, sizeof(pl));
	put_be32(pl, ISNS_T_EID);
	put_be32(pl + 4, 4);
	memcpy(pl + 8, "ent", 4);
	size_t n = pdu(b, ISNS_ESI, 0x4c00, 42, 0, pl, 12);
	CU_ASSERT_EQUAL_FATAL(feed_all(b, n, &m, err), 1);
	struct isns_out o;
	CU_ASSERT_EQUAL(isns_esi_answer(&m, "ent", &o), 0);
	struct isns_msg r;
	CU_ASSERT_EQUAL(feed_all(o.b, o.len, &r, err), 1);
	CU_ASSERT_EQUAL(r.func, ISNS_ESI | ISNS_RESPONSE);
	CU_ASSERT_EQUAL(r.xid, 42);
	CU_ASSERT_EQUAL(r.status, 0);
	CU_ASSERT_TRUE(r.nattrs == 1 && r.attrs[0].tag == ISNS_T_EID);
	isns_msg_free(&r);
	isns_out_free(&o);
	CU_ASSERT_EQUAL(isns_esi_answer(&m, "another", &o), 0); /* not ours: No Such Entry */
	CU_ASSERT_EQUAL(feed_all(o.b, o.len, &r, err), 1);
	CU_ASSERT_EQUAL(r.status, ISNS_ST_NO_SUCH_ENTRY);
	isns_msg_free(&r);
	isns_out_free(&o);
	isns_msg_free(&m);
}

/* The ESI port's slots: the configured server's address always gets one; anyone else the oldest other's. */
static void test_esi_admit(void)
{
	static const uint8_t srv[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1 };
	static const uint8_t other[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2 };
	struct isns_esi s;
	bool ev;
	memset(&s, 0, sizeof(s));
	isns_esi_server(&s, "127.0.0.1");
	for (int i = 0; i < ISNS_ESI_CONNS; i++) {
		CU_ASSERT_EQUAL(isns_esi_admit(&s, other, 1000 + (uint64_t)i, &ev), i);
		CU_ASSERT_FALSE(ev);
	}
	/* Four idle connections from another address: the server takes the oldest one's slot. */
	CU_ASSERT_EQUAL(isns_esi_admit(&s, srv, 2000, &ev), 0);
	CU_ASSERT_TRUE(ev);
	CU_ASSERT_TRUE(s.c[0].server);
	/* Another newcomer takes the oldest of the others (slot 1, since 1001), never the server's. */
	CU_ASSERT_EQUAL(isns_esi_admit(&s, other, 2001, &ev), 1);
	/* The server's: slots 2 and 3 (the oldest others), then 1. */
	CU_ASSERT_EQUAL(isns_esi_admit(&s, srv, 2002, &ev), 2);
	CU_ASSERT_EQUAL(isns_esi_admit(&s, srv, 2003, &ev), 3);
	CU_ASSERT_EQUAL(isns_esi_admit(&s, srv, 2004, &ev), 1);
	/* All four the server's: another address is refused, the server's newcomer takes its oldest. */
	CU_ASSERT_EQUAL(isns_esi_admit(&s, other, 2005, &ev), -1);
	CU_ASSERT_EQUAL(isns_esi_admit(&s, srv, 2006, &ev), 0);
	/* An inquiry on a slot: answered, naming the entity. */
	uint8_t pl[16], b[64];
	char err[256];
	memset(pl, 0, sizeof(pl));
	put_be32(pl, ISNS_T_EID);
	put_be32(pl + 4, 4);
	memcpy(pl + 8, "ent", 4);
	size_t n = pdu(b, ISNS_ESI, 0x4c00, 9, 0, pl, 12);
	CU_ASSERT_EQUAL(isns_esi_input(&s, 2, b, n, "ent"), 0);
	const uint8_t *p = isns_esi_output(&s, 2, &n);
	struct isns_msg r;
	CU_ASSERT_EQUAL_FATAL(feed_all(p, n, &r, err), 1);
	CU_ASSERT_TRUE(r.func == (ISNS_ESI | ISNS_RESPONSE) && r.xid == 9 && r.status == 0);
	isns_msg_free(&r);
	isns_esi_sent(&s, 2, n);
	isns_esi_output(&s, 2, &n);
	CU_ASSERT_EQUAL(n, 0);
	/* A broken stream closes it. */
	put_be16(b, 7);
	CU_ASSERT_EQUAL(isns_esi_input(&s, 2, b, ISNS_HDR_LEN, "ent"), -EPROTO);
	isns_esi_drop(&s, 2);
	/* No server configured (or not numeric): every address is another's, those held included. */
	isns_esi_server(&s, NULL);
	CU_ASSERT_EQUAL(isns_esi_admit(&s, srv, 3000, &ev), 2);
	CU_ASSERT_FALSE(ev);
	CU_ASSERT_EQUAL(isns_esi_admit(&s, other, 3001, &ev), 3); /* the oldest: 2003 */
	CU_ASSERT_TRUE(ev);
	CU_ASSERT_FALSE(s.c[0].server);
	for (size_t i = 0; i < ISNS_ESI_CONNS; i++)
		isns_esi_drop(&s, i);
	/* IPv6 */
	isns_esi_server(&s, "fd00::5");
	static const uint8_t v6[16] = { 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5 };
	CU_ASSERT_EQUAL(isns_esi_admit(&s, v6, 1, &ev), 0);
	CU_ASSERT_TRUE(s.c[0].server);
	isns_esi_drop(&s, 0);
}

int main(void)
{
	CU_pSuite s;

	log_sink = quiet;
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("isns", NULL, NULL);
	CU_add_test(s, "reader: messages, and its bounds", test_reader);
	CU_add_test(s, "reader: PDUs per message", test_reader_pdus);
	CU_add_test(s, "what a configuration registers", test_want);
	CU_add_test(s, "a first registration", test_register);
	CU_add_test(s, "changes as their difference", test_diff);
	CU_add_test(s, "a server that lost the entity", test_lost);
	CU_add_test(s, "backoff", test_backoff);
	CU_add_test(s, "a refused registration", test_refused_answer);
	CU_add_test(s, "stop deregisters", test_stop);
	CU_add_test(s, "a server refusing any request with any status: no faster than the backoff", test_hostile_statuses);
	CU_add_test(s, "ESI answer", test_esi_answer);
	CU_add_test(s, "ESI port: the server always gets a slot", test_esi_admit);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
