/*
 * The iSNS client (target/isns/) against a hostile server and hostile ESI
 * peers (FUZZ_ISNS_TRACE=1 prints the engine's log).  The first byte
 * picks one of two layouts:
 *
 *  - odd: the bytes after the first two are a stream from a server, cut in
 *    pieces of 1..64 bytes (the second byte): isns_rx_feed either takes
 *    every message whole or stops with an error and a message; what it
 *    gives keeps its bounds (attributes within the payload, at most
 *    ISNS_MAX_ATTRS of at most ISNS_MAX_ATTR_LEN bytes, a message of at most
 *    ISNS_MAX_MSG bytes); an ESI in it gets an answer that parses again.
 *
 *  - even: the engine (target/isns/engine.c) registers a small
 *    configuration (the second byte: ESI, a discovery domain, a wildcard
 *    portal, a second target, an alias) over a connection the harness
 *    plays, driven by events read from the rest: [op][operands]...
 *      0 T        time passes (T * 100 ms; 255: to the engine's deadline)
 *      1 N ...    N raw bytes from the server
 *      2 S A (t v)*A  an answer to the request in flight, with its xid and
 *                 function: status S (0 below 200), A attributes, each a
 *                 tag and a value picked from what the engine knows (its
 *                 entity, targets, portals, tags, domain) or raw
 *      3          the connection is lost
 *      4 V        the configuration changes (V as the second byte)
 *      5 E        the server sends an ESI on the connection (E odd: ours)
 *      6          isertd stops
 *      7 B        a pending connection is made (B even) or refused
 *    and, on the ESI port (target/isns/esi.c, its ISNS_ESI_CONNS slots):
 *      8 P        a peer connects: from the configured server's address (P
 *                 odd), or from one of three others
 *      9 K N ...  the peer in slot K sends N raw bytes
 *      10 K E     the peer in slot K sends an ESI (E odd: naming our entity)
 *      11 K B     the peer in slot K reads B bytes of its answer (255: it
 *                 closes the connection)
 *    Every PDU the engine sends parses with the client's own reader, has the
 *    client flags, and a request awaited is the last one sent; after the
 *    input, isertd stops and the engine must be done within ISNS_STOP_MS of
 *    answers that never come (its time limits, not the input, end it).  On
 *    the ESI port: the configured server's address always gets a slot;
 *    another address never takes one of the server's, and is refused only
 *    when every slot is the server's; a slot taken from a connection is the
 *    oldest of its kind; what is sent back parses as an ESIRsp; a
 *    connection is closed ISNS_ESI_IDLE_MS after it came (as client.c).
 */
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "fuzz.h"
#include "target/isns/isns_int.h"

static const char *const names[] = { "iqn.2026-11.org.isert:fuzz1", "iqn.2026-11.org.isert:fuzz2" };
static const char eid[] = "fuzz-entity", dd[] = "fuzz-dd";

static void quiet(enum log_level lvl, const char *line)
{
	(void)lvl;
	(void)line;
}

static void check_msg(const struct isns_msg *m)
{
	FUZZ_CHECK(m->len <= ISNS_MAX_MSG, "message of %zu bytes", m->len);
	FUZZ_CHECK(m->nattrs <= ISNS_MAX_ATTRS, "%zu attributes", m->nattrs);
	for (size_t i = 0; i < m->nattrs; i++) {
		const struct isns_attr *a = &m->attrs[i];
		FUZZ_CHECK(a->len <= ISNS_MAX_ATTR_LEN && a->len % 4 == 0, "attribute %zu of %u bytes", i, a->len);
		FUZZ_CHECK(a->v >= m->payload && a->v + a->len <= m->payload + m->len, "attribute %zu outside", i);
	}
}

/* Our own answer to an ESI parses, is an ESIRsp with the inquiry's xid. */
static void check_esi(const struct isns_msg *m)
{
	struct isns_out o = { 0 };
	if (isns_esi_answer(m, eid, &o)) {
		FUZZ_CHECK(m->func != ISNS_ESI || !o.b, "no answer to an ESI");
		return;
	}
	struct isns_rx rx = { 0 };
	struct isns_msg r;
	size_t used;
	char err[256];
	int rc = isns_rx_feed(&rx, o.b, o.len, &used, &r, err, sizeof(err));
	FUZZ_CHECK(rc == 1 && used == o.len, "our ESIRsp does not parse: %s", rc < 0 ? err : "incomplete");
	FUZZ_CHECK(r.func == (ISNS_ESI | ISNS_RESPONSE) && r.xid == m->xid, "ESIRsp 0x%x xid %u", r.func, r.xid);
	isns_msg_free(&r);
	isns_rx_reset(&rx);
	isns_out_free(&o);
}

static void parse_stream(const uint8_t *p, size_t n, size_t piece)
{
	struct isns_rx rx = { 0 };
	char err[256];
	for (size_t off = 0; off < n;) {
		size_t take = MIN(piece, n - off), used;
		struct isns_msg m;
		memset(err, 'X', sizeof(err));
		int rc = isns_rx_feed(&rx, p + off, take, &used, &m, err, sizeof(err));
		FUZZ_CHECK(used <= take, "used %zu of %zu", used, take);
		if (rc < 0) {
			FUZZ_CHECK(memchr(err, 0, sizeof(err)) && err[0], "an error without a message");
			break;
		}
		FUZZ_CHECK(rc == 1 || used == take, "need more with bytes left");
		FUZZ_CHECK(rx.mcap <= ISNS_MAX_MSG, "buffer of %zu", rx.mcap);
		off += used;
		if (rc == 1) {
			check_msg(&m);
			if (m.func == ISNS_ESI)
				check_esi(&m);
			isns_msg_free(&m);
		}
	}
	isns_rx_reset(&rx);
}

/* ------------------------------------------------------------------------ */
/* The engine against a server made of the input. */

static struct {
	struct isns_eng *e;
	bool connecting, up, instant;
	uint64_t now;
	struct isns_rx rx;       /* what the engine sends, read back */
	uint16_t last_func, last_xid;
	bool sent_any;
	struct isns_esi esi;     /* the ESI port */
	struct isns_rx esi_rx[ISNS_ESI_CONNS]; /* what each ESI peer is sent, read back */
	bool server_v4;          /* the configured server: 127.0.0.1, or 192.0.2.7 */
} h;

static void fake_connect(void *ctx, const char *host, uint16_t port)
{
	(void)ctx;
	FUZZ_CHECK(host && port, "connect to nothing");
	FUZZ_CHECK(!h.connecting && !h.up, "connect while connected");
	h.connecting = true;
	if (h.instant) {
		static const uint8_t local[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1 };
		h.connecting = false;
		h.up = true;
		isns_eng_connected(h.e, local, h.now);
	}
}

static void fake_close(void *ctx)
{
	(void)ctx;
	h.connecting = h.up = false;
	isns_rx_reset(&h.rx);
}

static const struct isns_io_ops fake_ops = { fake_connect, fake_close };

static void ip4(uint8_t ip[16], uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	memset(ip, 0, 16);
	ip[10] = ip[11] = 0xff;
	ip[12] = a;
	ip[13] = b;
	ip[14] = c;
	ip[15] = d;
}

static char *dup(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = malloc(n);
	FUZZ_CHECK(d, "out of memory");
	memcpy(d, s, n);
	return d;
}

static struct isns_want *want_of(uint8_t v)
{
	h.server_v4 = !(v & 0x80);
	struct isns_want *w = calloc(1, sizeof(*w));
	FUZZ_CHECK(w, "out of memory");
	w->host = dup(v & 0x80 ? "192.0.2.7" : "127.0.0.1");
	w->port = 3205;
	w->eid = dup(eid);
	w->reg_period = 3 + (v & 0x40 ? 900 : 3);
	if (v & 1) {
		w->esi_interval = 2;
		w->esi_port = 40000;
	}
	if (v & 2)
		w->dd = dup(dd);
	w->portals = calloc(3, sizeof(*w->portals));
	w->nodes = calloc(2, sizeof(*w->nodes));
	FUZZ_CHECK(w->portals && w->nodes, "out of memory");
	ip4(w->portals[0].ip, 127, 0, 0, 1);
	w->portals[0].port = 3260;
	ip4(w->portals[1].ip, 127, 0, 0, 2);
	w->portals[1].port = 3261;
	w->nportals = 2;
	if (v & 4) {
		w->portals[2].wild = 2; /* AF_INET */
		w->portals[2].ip[10] = w->portals[2].ip[11] = 0xff;
		w->portals[2].port = 3262;
		w->nportals = 3;
	}
	size_t nn = v & 8 ? 2 : 1;
	for (size_t i = 0; i < nn; i++) {
		struct isns_node *n = &w->nodes[i];
		n->name = dup(names[i]);
		n->alias = v & 0x10 ? dup("alias") : NULL;
		n->pgs = calloc(3, sizeof(*n->pgs));
		FUZZ_CHECK(n->pgs, "out of memory");
		n->pgs[n->npgs++] = (struct isns_pg){ (uint32_t)i, (uint16_t)(1 + i) };
		if (w->nportals == 3)
			n->pgs[n->npgs++] = (struct isns_pg){ 2, 7 };
	}
	w->nnodes = nn;
	if (v & 0x20) { /* no target: nothing to register */
		for (size_t i = 0; i < nn; i++) {
			free(w->nodes[i].name);
			free(w->nodes[i].alias);
			free(w->nodes[i].pgs);
		}
		w->nnodes = 0;
	}
	return w;
}

/* Read back what the engine sent: each PDU a valid client message. */
static void drain(void)
{
	for (int rounds = 0; rounds < 64 && h.up; rounds++) {
		size_t n;
		const uint8_t *p = isns_eng_output(h.e, &n);
		if (!p || !n)
			return;
		size_t take = n > 700 ? n / 2 : n; /* partial sends too */
		size_t off = 0;
		while (off < take) {
			struct isns_msg m;
			size_t used;
			char err[256];
			int rc = isns_rx_feed(&h.rx, p + off, take - off, &used, &m, err, sizeof(err));
			FUZZ_CHECK(rc >= 0, "the engine sent a malformed PDU: %s", err);
			off += used;
			if (rc == 1) {
				FUZZ_CHECK(m.flags & ISNS_F_CLIENT, "a PDU without the client flag");
				check_msg(&m);
				if (!(m.func & ISNS_RESPONSE)) {
					h.last_func = m.func;
					h.last_xid = m.xid;
					h.sent_any = true;
				}
				isns_msg_free(&m);
			}
		}
		isns_eng_sent(h.e, take, h.now);
	}
}

static void put_value(struct isns_out *o, uint32_t tag, uint8_t v)
{
	uint8_t ip[16];
	switch (v % 12) {
	case 0: isns_put_str(o, tag, eid); break;
	case 1: isns_put_str(o, tag, names[0]); break;
	case 2: isns_put_str(o, tag, names[1]); break;
	case 3: isns_put_str(o, tag, dd); break;
	case 4: isns_put_nil(o, tag); break;
	case 5: ip4(ip, 127, 0, 0, 1); isns_put_ip(o, tag, ip); break;
	case 6: ip4(ip, 127, 0, 0, 2); isns_put_ip(o, tag, ip); break;
	case 7: isns_put_u32(o, tag, 3260 + (v >> 6)); break;
	case 8: isns_put_u32(o, tag, v >> 4); break;
	case 9: isns_put_u32(o, tag, 0x10000u | 3260); break;
	case 10: isns_put_raw(o, tag, (const uint8_t *)"\xff\xfe\xfd", 3); break;
	default: isns_put_raw(o, tag, (const uint8_t *)"no-nul-at-all!!!", 16); break;
	}
}

static const uint32_t tags[] = { ISNS_T_DELIMITER, ISNS_T_EID, ISNS_T_REG_PERIOD, ISNS_T_ISCSI_NAME, ISNS_T_PG_NAME,
				  ISNS_T_PG_IP, ISNS_T_PG_PORT, ISNS_T_PGT, ISNS_T_DD_ID, ISNS_T_DD_NAME, ISNS_T_ESI_INTERVAL,
				  ISNS_T_PORTAL_IP, ISNS_T_PORTAL_PORT, 0xffffffffu };

static void feed(const uint8_t *p, size_t n)
{
	if (h.up)
		isns_eng_input(h.e, p, n, h.now);
}

static void answer(struct fuzz_in *in)
{
	uint8_t s = fuzz_u8(in), na = fuzz_u8(in) % 24;
	struct isns_out o;
	int xid = isns_eng_awaiting(h.e);
	FUZZ_CHECK(!isns_out_init(&o, (uint16_t)(h.last_func | ISNS_RESPONSE), ISNS_F_SERVER,
				  (uint16_t)(xid >= 0 ? xid : h.last_xid)), "out of memory");
	put_be32(o.b + o.len, s < 200 ? 0 : s - 200u); /* the status */
	o.len += 4;
	for (unsigned i = 0; i < na; i++) {
		uint8_t t = fuzz_u8(in), v = fuzz_u8(in);
		put_value(&o, tags[t % ARRAY_SIZE(tags)], v);
	}
	isns_out_finish(&o);
	feed(o.b, o.len);
	isns_out_free(&o);
}

/* An ESI as open-isns sends it: time stamp, EID (e odd: ours), portal. */
static void inquiry(struct isns_out *o, uint16_t xid, uint8_t e)
{
	uint8_t ip[16];
	FUZZ_CHECK(!isns_out_init(o, ISNS_ESI, ISNS_F_SERVER, xid), "out of memory");
	isns_put_raw(o, ISNS_T_TIMESTAMP, (const uint8_t *)"\0\0\0\0\0\0\0\1", 8);
	isns_put_str(o, ISNS_T_EID, e & 1 ? eid : "someone-else");
	ip4(ip, 127, 0, 0, 1);
	isns_put_ip(o, ISNS_T_PORTAL_IP, ip);
	isns_put_u32(o, ISNS_T_PORTAL_PORT, 3260);
	isns_out_finish(o);
}

static void esi(uint8_t e)
{
	struct isns_out o;
	inquiry(&o, 77, e);
	feed(o.b, o.len);
	isns_out_free(&o);
}

/* ------------------------------------------------------------------------ */
/* The ESI port's peers. */

static void esi_drop(size_t k)
{
	isns_esi_drop(&h.esi, k);
	isns_rx_reset(&h.esi_rx[k]);
}

static void esi_connect(uint8_t b)
{
	uint8_t peer[16];
	bool server = b & 1;
	if (server)
		ip4(peer, h.server_v4 ? 127 : 192, 0, h.server_v4 ? 0 : 2, h.server_v4 ? 1 : 7);
	else
		ip4(peer, 10, 9, 8, (uint8_t)(1 + (b >> 1) % 3));
	struct isns_esi before = h.esi;
	int free_slots = 0, others = 0;
	uint64_t oldest_other = UINT64_MAX, oldest_server = UINT64_MAX;
	for (size_t i = 0; i < ISNS_ESI_CONNS; i++) {
		const struct isns_esi_conn *c = &before.c[i];
		free_slots += !c->used;
		others += c->used && !c->server;
		if (c->used && !c->server)
			oldest_other = MIN(oldest_other, c->since);
		if (c->used && c->server)
			oldest_server = MIN(oldest_server, c->since);
	}
	bool evicted;
	int k = isns_esi_admit(&h.esi, peer, h.now, &evicted);
	FUZZ_CHECK(k >= 0 || (!server && !free_slots && !others), "refused with %d free, %d others' (server %d)", free_slots,
		   others, server);
	if (k < 0)
		return;
	const struct isns_esi_conn *was = &before.c[k];
	FUZZ_CHECK(k < ISNS_ESI_CONNS && h.esi.c[k].used && h.esi.c[k].server == server, "slot %d", k);
	FUZZ_CHECK(evicted == was->used && (was->used || free_slots), "slot %d: evicted %d", k, evicted);
	if (evicted) {
		FUZZ_CHECK(!free_slots, "a connection closed with %d slots free", free_slots);
		FUZZ_CHECK(server || !was->server, "another address took the server's slot");
		FUZZ_CHECK(was->since == (was->server ? oldest_server : oldest_other) && (!was->server || !others),
			   "slot %d taken is not the oldest of its kind", k);
		isns_rx_reset(&h.esi_rx[k]);
	}
}

static void esi_send_inquiry(size_t k, uint8_t e)
{
	struct isns_out o;
	inquiry(&o, (uint16_t)(100 + k), e);
	if (isns_esi_input(&h.esi, k, o.b, o.len, isns_eng_eid(h.e)))
		esi_drop(k);
	isns_out_free(&o);
}

/* The peer in slot k reads up to n bytes of what it is sent: each message whole an ESIRsp. */
static void esi_read(size_t k, size_t n)
{
	size_t len;
	const uint8_t *p = isns_esi_output(&h.esi, k, &len);
	len = MIN(len, n);
	for (size_t off = 0; off < len;) {
		struct isns_msg m;
		size_t used;
		char err[256];
		int rc = isns_rx_feed(&h.esi_rx[k], p + off, len - off, &used, &m, err, sizeof(err));
		FUZZ_CHECK(rc >= 0, "our ESI answer does not parse: %s", err);
		off += used;
		if (rc == 1) {
			check_msg(&m);
			FUZZ_CHECK(m.func == (ISNS_ESI | ISNS_RESPONSE) && (m.flags & ISNS_F_CLIENT) &&
				   (m.status == 0 || m.status == ISNS_ST_NO_SUCH_ENTRY), "ESI answer 0x%x status %u", m.func,
				   m.status);
			isns_msg_free(&m);
		}
	}
	if (len)
		isns_esi_sent(&h.esi, k, len);
}

static void esi_op(uint8_t op, struct fuzz_in *in)
{
	uint8_t a = fuzz_u8(in);
	size_t k = a % ISNS_ESI_CONNS;
	if (op == 8) {
		esi_connect(a);
		return;
	}
	if (op == 9) {
		size_t n = fuzz_u8(in); /* not inside MIN(), which reads it twice */
		n = MIN(n, in->n);
		if (h.esi.c[k].used && isns_esi_input(&h.esi, k, in->p, n, isns_eng_eid(h.e)))
			esi_drop(k);
		in->p += n;
		in->n -= n;
		return;
	}
	uint8_t b = fuzz_u8(in);
	if (!h.esi.c[k].used)
		return;
	if (op == 10)
		esi_send_inquiry(k, b);
	else if (b == 255)
		esi_drop(k);
	else
		esi_read(k, (size_t)b * 16 + 1);
}

static void tick(void)
{
	/* client.c closes an ESI connection ISNS_ESI_IDLE_MS after it came, whatever its peer does */
	for (size_t k = 0; k < ISNS_ESI_CONNS; k++) {
		FUZZ_CHECK(!h.esi.c[k].used || h.esi.c[k].since <= h.now, "slot %zu from the future", k);
		FUZZ_CHECK(h.esi.c[k].rx.mcap <= ISNS_MAX_MSG, "slot %zu holds %zu bytes", k, h.esi.c[k].rx.mcap);
		if (h.esi.c[k].used && h.now >= h.esi.c[k].since + ISNS_ESI_IDLE_MS)
			esi_drop(k);
	}
	uint64_t next = isns_eng_tick(h.e, h.now);
	FUZZ_CHECK(next >= h.now || !h.up, "a deadline in the past: %llu < %llu", (unsigned long long)next,
		   (unsigned long long)h.now);
	drain();
	int xid = isns_eng_awaiting(h.e);
	FUZZ_CHECK(xid < 0 || !h.sent_any || (uint16_t)xid == h.last_xid || !h.up, "awaiting xid %d, last sent %u",
		   xid, h.last_xid);
}

static void run_engine(struct fuzz_in *in)
{
	memset(&h, 0, sizeof(h));
	h.now = 1000000;
	uint8_t v = fuzz_u8(in);
	h.instant = !(v & 0x40);
	h.e = isns_eng_new(&fake_ops, NULL);
	FUZZ_CHECK(h.e, "out of memory");
	isns_eng_want(h.e, want_of(v), h.now);
	isns_esi_server(&h.esi, h.server_v4 ? "127.0.0.1" : "192.0.2.7");
	tick(); /* connects */
	tick(); /* the first request */
	for (unsigned steps = 0; in->n && steps < 2000; steps++) {
		uint8_t op = fuzz_u8(in) % 12, b;
		switch (op) {
		case 0:
			b = fuzz_u8(in);
			if (b == 255) {
				uint64_t next = isns_eng_tick(h.e, h.now);
				h.now = next > h.now ? next : h.now + 1;
			} else {
				h.now += (uint64_t)b * 100;
			}
			break;
		case 1: {
			size_t n = fuzz_u8(in);
			n = MIN(n, in->n);
			feed(in->p, n);
			in->p += n;
			in->n -= n;
			break;
		}
		case 2:
			answer(in);
			break;
		case 3:
			if (h.up || h.connecting) {
				h.up = h.connecting = false;
				isns_rx_reset(&h.rx);
				isns_eng_down(h.e, "lost", h.now);
			}
			break;
		case 4:
			isns_eng_want(h.e, want_of(fuzz_u8(in)), h.now);
			isns_esi_server(&h.esi, h.server_v4 ? "127.0.0.1" : "192.0.2.7");
			break;
		case 5:
			esi(fuzz_u8(in));
			break;
		case 6:
			isns_eng_stop(h.e, h.now);
			break;
		case 7:
			b = fuzz_u8(in);
			if (h.connecting) {
				h.connecting = false;
				if (b & 1) {
					isns_eng_down(h.e, "refused", h.now);
				} else {
					static const uint8_t local[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 9 };
					h.up = true;
					isns_eng_connected(h.e, local, h.now);
				}
			}
			break;
		default:
			esi_op(op, in);
			break;
		}
		tick();
	}
	/* isertd stops; no answer comes any more: the engine's own limits must end it. */
	isns_eng_stop(h.e, h.now);
	bool done = false;
	for (int i = 0; i < 200 && !done; i++) {
		h.now += 1000;
		if (h.connecting && (i & 1)) {
			h.connecting = false;
			isns_eng_down(h.e, "refused", h.now);
		}
		tick();
		done = isns_eng_done(h.e);
	}
	FUZZ_CHECK(done, "not done 200 s after the stop");
	for (size_t k = 0; k < ISNS_ESI_CONNS; k++)
		esi_drop(k);
	isns_eng_free(h.e);
	isns_rx_reset(&h.rx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* FUZZ_ISNS_TRACE=1: the engine's log on stderr (what an input makes it do). */
	static int trace = -1;
	if (trace < 0)
		trace = getenv("FUZZ_ISNS_TRACE") != NULL;
	log_sink = trace ? NULL : quiet;
	log_threshold = LOG_DEBUG;
	if (size < 2)
		return 0;
	struct fuzz_in in = { data + 1, size - 1 };
	if (data[0] & 1) {
		uint8_t piece = fuzz_u8(&in);
		parse_stream(in.p, in.n, 1 + piece % 64);
		return 0;
	}
	run_engine(&in);
	return 0;
}
