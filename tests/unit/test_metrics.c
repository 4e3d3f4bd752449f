/*
 * The Prometheus renderer (target/metrics_text.c): a known statistics
 * snapshot in, exact exposition lines out; names as labels (valid UTF-8,
 * control bytes escaped); the text the same whatever the reads' sizes;
 * global.metrics parsing and its errors.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "common/utf8.h"
#include "common/util.h"
#include "target/config/config.h"
#include "target/control/metrics.h"
#include "target/control/stats.h"

#include "unit_run.h"

#define TGT "iqn.2024-01.org.x:d"
/* An initiator name with every character the format escapes, and a control byte. */
#define INI "a\\b\"c\nd"

static struct stats_row *add_row(struct stats_snap *s, const char *target, uint16_t tpg, uint64_t lun,
				 const char *ini, const char *bs)
{
	struct stats_row *r = &s->rows[s->nrows++];
	memset(r, 0, sizeof(*r));
	r->target = target;
	r->tpg = tpg;
	r->lun = lun;
	r->kind = !strcmp(ini, STATS_REST_NAME) ? STATS_REST : STATS_NAMED;
	snprintf(r->initiator, sizeof(r->initiator), "%s", ini);
	snprintf(r->backstore, sizeof(r->backstore), "%s", bs);
	return r;
}

static int row_ptr_cmp(const void *a, const void *b)
{
	return stats_row_cmp(*(struct stats_row *const *)a, *(struct stats_row *const *)b);
}

/* The rows in the order stats_snapshot gives them. */
static void sort_rows(struct stats_snap *s)
{
	s->sorted = calloc(s->nrows + 1, sizeof(*s->sorted));
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->sorted);
	for (size_t i = 0; i < s->nrows; i++)
		s->sorted[i] = &s->rows[i];
	qsort(s->sorted, s->nrows, sizeof(*s->sorted), row_ptr_cmp);
	s->nsorted = s->nrows;
}

static struct stats_snap *snap_new(size_t maxrows)
{
	struct stats_snap *s = calloc(1, sizeof(*s));
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	s->rows = calloc(maxrows ? maxrows : 1, sizeof(*s->rows));
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->rows);
	return s;
}

/*
 * One LUN used by one initiator (6 reads: 1 of at most 1 us, 2 of at most
 * 4 us, 3 beyond the last bound), two portals (TCP and iSER), a device, two
 * reactors.
 */
static struct stats_snap *known(void)
{
	struct stats_snap *s = snap_new(1);
	struct stats_row *r = add_row(s, TGT, 1, 3, INI, "ram0");
	r->in_flight = 2;
	r->c.n.commands[STATS_READ] = 6;
	r->c.n.commands[STATS_OTHER] = 12;
	r->c.n.bytes_read = 24576;
	r->c.n.check_conditions[6] = 1;
	r->c.n.reservation_conflict = 4;
	r->c.n.tmf = 5;
	r->c.lat[LAT_READ].n[0] = 1;
	r->c.lat[LAT_READ].n[2] = 2;
	r->c.lat[LAT_READ].n[STATS_BUCKETS - 1] = 3;
	r->c.lat[LAT_READ].sum_ns = 1234500000;
	r->c.lat[LAT_READ_BACKSTORE].n[0] = 6;
	r->c.lat[LAT_READ_BACKSTORE].sum_ns = 7000;
	sort_rows(s);
	s->portals = calloc(2, sizeof(*s->portals));
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->portals);
	s->nportals = 2;
	struct stats_portal_row *p = &s->portals[0], *q = &s->portals[1];
	snprintf(p->portal, sizeof(p->portal), "127.0.0.1:3260");
	p->listening = true;
	p->connections = 1;
	p->c.connections_refused = 7;
	p->c.connections_closed = 3;
	p->c.logins_accepted = 4;
	p->c.logins_redirected = 3;
	p->c.logins_refused[REFUSED_CHAP] = 1;
	p->c.closed = (struct xp_stats){ .pdus_in = 10, .pdus_out = 11, .bytes_in = 12, .bytes_out = 13 };
	p->c.closed_conn.r2ts = 2;
	snprintf(q->portal, sizeof(q->portal), "[::1]:3260");
	q->iser = true;
	q->c.closed = (struct xp_stats){ .rdma_reads = 8, .rdma_read_bytes = 32768, .rdma_writes = 9,
					 .rdma_write_bytes = 36864, .sends = 1, .recvs = 2, .inline_sends = 1,
					 .send_posts = 7, .cq_polls = 30, .cq_empty_polls = 20, .completions = 10 };
	s->rdma_devices = json_tokener_parse("[ { \"device\": \"rxe0\", \"port\": 1, \"counters\": { \"port_xmit_data\": 100 },"
					     "  \"hw_counters\": { \"retry_exceeded_err\": 0, \"rcvd_seq_err\": 5 } } ]");
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->rdma_devices);
	s->reactors = calloc(2, sizeof(*s->reactors));
	CU_ASSERT_PTR_NOT_NULL_FATAL(s->reactors);
	s->nreactors = 2;
	s->reactors[0] = (struct stats_reactor_row){ .reactor = 0, .connections = 2, .pool_bytes = 8388608,
						     .pool_in_use = 3 };
	s->reactors[1] = (struct stats_reactor_row){ .reactor = 1 };
	return s;
}

/* The labels of the row: INI shown as a\x5cb"c\x0ad, then the format's escapes of \ and ". */
#define LUN "target=\"" TGT "\",tpg=\"1\",lun=\"3\",initiator=\"a\\\\x5cb\\\"c\\\\x0ad\",backstore=\"ram0\""
/* A LUN's histogram: no initiator. */
#define HL "target=\"" TGT "\",tpg=\"1\",lun=\"3\",backstore=\"ram0\""

static char *render(struct stats_snap *s)
{
	struct metrics_buf b = { 0 };
	metrics_render(s, &b);
	CU_ASSERT_FALSE(b.oom);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b.p);
	return b.p;
}

/* line is one whole line of text. */
static int has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return 1;
	return 0;
}

#define LINE(t, l) \
	do { \
		if (!has_line(t, l)) \
			fprintf(stderr, "\nmissing line: %s\n", l); \
		CU_ASSERT_TRUE(has_line(t, l)); \
	} while (0)

static int count_lines(const char *text, const char *prefix)
{
	int n = 0;
	size_t k = strlen(prefix);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		n += !strncmp(p, prefix, k);
	return n;
}

static void test_lun_counters(void)
{
	char *t = render(known());
	LINE(t, "isert_up 1");
	LINE(t, "# TYPE isert_lun_commands_total counter");
	LINE(t, "isert_lun_commands_total{" LUN ",kind=\"read\"} 6");
	LINE(t, "isert_lun_commands_total{" LUN ",kind=\"write\"} 0");
	LINE(t, "isert_lun_commands_total{" LUN ",kind=\"other\"} 12");
	LINE(t, "isert_lun_read_bytes_total{" LUN "} 24576");
	LINE(t, "isert_lun_check_conditions_total{" LUN ",sense_key=\"unit_attention\"} 1");
	CU_ASSERT_EQUAL(count_lines(t, "isert_lun_check_conditions_total{"), 1); /* only the keys seen */
	LINE(t, "isert_lun_status_total{" LUN ",status=\"reservation_conflict\"} 4");
	LINE(t, "isert_lun_status_total{" LUN ",status=\"busy\"} 0");
	LINE(t, "isert_lun_task_management_total{" LUN "} 5");
	LINE(t, "# TYPE isert_lun_commands_in_flight gauge");
	LINE(t, "isert_lun_commands_in_flight{" LUN "} 2");
	CU_ASSERT_PTR_NULL(strstr(t, "unit_attentions")); /* the same count as the sense key's: not twice */
	free(t);
}

static void test_histogram(void)
{
	char *t = render(known());
	LINE(t, "# TYPE isert_lun_latency_seconds histogram");
	/* cumulative: 1, 1+0, 1+0+2, ... the last bound, then +Inf with the bucket beyond it */
	LINE(t, "isert_lun_latency_seconds_bucket{" HL ",kind=\"read\",le=\"0.000001\"} 1");
	LINE(t, "isert_lun_latency_seconds_bucket{" HL ",kind=\"read\",le=\"0.000002\"} 1");
	LINE(t, "isert_lun_latency_seconds_bucket{" HL ",kind=\"read\",le=\"0.000004\"} 3");
	LINE(t, "isert_lun_latency_seconds_bucket{" HL ",kind=\"read\",le=\"1.048576\"} 3");
	LINE(t, "isert_lun_latency_seconds_bucket{" HL ",kind=\"read\",le=\"67.108864\"} 3");
	LINE(t, "isert_lun_latency_seconds_bucket{" HL ",kind=\"read\",le=\"+Inf\"} 6");
	LINE(t, "isert_lun_latency_seconds_sum{" HL ",kind=\"read\"} 1.2345");
	LINE(t, "isert_lun_latency_seconds_count{" HL ",kind=\"read\"} 6");
	LINE(t, "isert_lun_latency_seconds_sum{" HL ",kind=\"write\"} 0");
	LINE(t, "isert_lun_backstore_latency_seconds_sum{" HL ",kind=\"read\"} 0.000007");
	LINE(t, "isert_lun_backstore_latency_seconds_bucket{" HL ",kind=\"read\",le=\"+Inf\"} 6");
	/* 27 bounds + Inf + sum + count, 2 kinds, 2 families: 120 lines a LUN */
	CU_ASSERT_EQUAL(count_lines(t, "isert_lun_latency_seconds_") + count_lines(t, "isert_lun_backstore_latency_seconds_"),
			120);
	free(t);
}

static void test_portals_devices(void)
{
	char *t = render(known());
	const char *p = "portal=\"127.0.0.1:3260\",transport=\"tcp\"", *q = "portal=\"[::1]:3260\",transport=\"iser\"";
	char l[256];
#define PL(fmt, who) (snprintf(l, sizeof(l), fmt, who), l)
	LINE(t, PL("isert_portal_connections{%s} 1", p));
	LINE(t, PL("isert_portal_logins_total{%s,result=\"accepted\"} 4", p));
	LINE(t, PL("isert_portal_logins_total{%s,result=\"redirected\"} 3", p));
	LINE(t, PL("isert_portal_logins_total{%s,result=\"chap\"} 1", p));
	LINE(t, PL("isert_portal_connections_refused_total{%s} 7", p));
	LINE(t, PL("isert_portal_pdus_received_total{%s} 10", p));
	LINE(t, PL("isert_portal_sent_bytes_total{%s} 13", p));
	LINE(t, PL("isert_portal_r2ts_total{%s} 2", p));
	LINE(t, PL("isert_portal_rdma_read_bytes_total{%s} 32768", q));
	LINE(t, PL("isert_portal_rdma_cq_empty_polls_total{%s} 20", q));
	LINE(t, PL("isert_portal_rdma_inline_sends_total{%s} 1", q));
	LINE(t, PL("isert_portal_rdma_send_posts_total{%s} 7", q));
	LINE(t, "isert_rdma_port_counters_total{device=\"rxe0\",port=\"1\",counter=\"port_xmit_data\"} 100");
	LINE(t, "isert_rdma_hw_counters_total{device=\"rxe0\",port=\"1\",counter=\"rcvd_seq_err\"} 5");
	LINE(t, "isert_reactor_connections{reactor=\"0\"} 2");
	LINE(t, "isert_reactor_buffer_pool_bytes{reactor=\"0\"} 8388608");
	LINE(t, "isert_reactor_buffers_in_use{reactor=\"0\"} 3");
	LINE(t, "isert_reactor_buffer_pool_bytes{reactor=\"1\"} 0");
	/* a TCP portal has no RDMA counters: no RDMA sample for it, not a 0 */
	CU_ASSERT_PTR_NULL(strstr(t, PL("isert_portal_rdma_reads_total{%s}", p)));
	free(t);
}

/* HELP and TYPE once per family, the family's samples together (what the format and promtool ask). */
static void test_families_once(void)
{
	char *t = render(known()), *save = NULL, seen[64][64];
	unsigned n = 0;
	char last[64] = "";
	for (char *s = strtok_r(t, "\n", &save); s; s = strtok_r(NULL, "\n", &save)) {
		char fam[64];
		if (sscanf(s, "# TYPE %63s", fam) == 1) {
			for (unsigned i = 0; i < n; i++)
				CU_ASSERT_STRING_NOT_EQUAL(seen[i], fam);
			if (n < 64)
				strcpy(seen[n++], fam);
			strcpy(last, fam);
		} else if (s[0] != '#') {
			CU_ASSERT_EQUAL(strncmp(s, last, strlen(last)), 0); /* a sample of the family announced last */
		}
	}
	CU_ASSERT(n >= 30);
	free(t);
}

/* A snapshot without rows or sections: every family announced, no sample, no crash. */
static void test_empty(void)
{
	char *t = render(snap_new(0));
	LINE(t, "# TYPE isert_lun_commands_total counter");
	LINE(t, "# TYPE isert_lun_latency_seconds histogram");
	LINE(t, "# TYPE isert_rdma_hw_counters_total counter");
	CU_ASSERT_PTR_NULL(strstr(t, "isert_lun_commands_total{"));
	CU_ASSERT_PTR_NULL(strstr(t, "_bucket{"));
	free(t);
}

/* ------------------------------------------------------------------------ */
/* Names as labels */

static const char *shown(const char *in)
{
	static char out[1024];
	size_t n = utf8_shown(in, out, sizeof(out));
	CU_ASSERT_EQUAL(n, strlen(out));
	return out;
}

static void test_escape(void)
{
	CU_ASSERT_STRING_EQUAL(shown("iqn.1994-05.com.redhat:host1"), "iqn.1994-05.com.redhat:host1");
	CU_ASSERT_STRING_EQUAL(shown("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	CU_ASSERT_STRING_EQUAL(shown("a\x1b[31mb"), "a\\x1b[31mb");     /* ESC */
	CU_ASSERT_STRING_EQUAL(shown("a\rb\nc\td"), "a\\x0db\\x0ac\\x09d");
	CU_ASSERT_STRING_EQUAL(shown("\x7f"), "\\x7f");                   /* DEL */
	CU_ASSERT_STRING_EQUAL(shown("a\\b"), "a\\x5cb");                 /* so every \ starts a \xNN */
	CU_ASSERT_STRING_EQUAL(shown("\"q\""), "\"q\"");                  /* the format escapes it, not this */
	CU_ASSERT_STRING_EQUAL(shown("\xc2\x9b" "2J"), "\\xc2\\x9b2J");   /* C1 CSI, as UTF-8 */
	CU_ASSERT_STRING_EQUAL(shown("\xc2\xa0"), "\xc2\xa0");            /* U+00A0 is not a control */
	CU_ASSERT_STRING_EQUAL(shown("\x9b" "2J"), "\\x9b2J");            /* C1 CSI as a byte: not UTF-8 */
	CU_ASSERT_STRING_EQUAL(shown("\xff\xfe"), "\\xff\\xfe");
	CU_ASSERT_STRING_EQUAL(shown("x\xe2\x82"), "x\\xe2\\x82");        /* cut short at the end */
	CU_ASSERT_STRING_EQUAL(shown("\xe2\x82x"), "\\xe2\\x82x");        /* cut short before a byte */
	CU_ASSERT_STRING_EQUAL(shown("\xc0\x80"), "\\xc0\\x80");          /* overlong NUL */
	CU_ASSERT_STRING_EQUAL(shown("\xe0\x80\xaf"), "\\xe0\\x80\\xaf"); /* overlong / */
	CU_ASSERT_STRING_EQUAL(shown("\xed\xa0\x80"), "\\xed\\xa0\\x80"); /* a surrogate */
	CU_ASSERT_STRING_EQUAL(shown("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80"); /* past U+10FFFF */
	CU_ASSERT_STRING_EQUAL(shown("\xf4\x8f\xbf\xbf"), "\xf4\x8f\xbf\xbf");     /* U+10FFFF itself */
	/* Cut to the buffer at a whole escape or character, the whole length still told. */
	char small[6];
	CU_ASSERT_EQUAL(utf8_shown("ab\x1b" "cd", small, sizeof(small)), 8);
	CU_ASSERT_STRING_EQUAL(small, "ab");
	char seven[7];
	CU_ASSERT_EQUAL(utf8_shown("ab\x1b" "cd", seven, sizeof(seven)), 8);
	CU_ASSERT_STRING_EQUAL(seven, "ab\\x1b");
	CU_ASSERT_EQUAL(utf8_shown("abc", NULL, 0), 3);
}

/* Strict UTF-8 (as the text format requires) with no control character but the newline ending each line. */
static int valid_text(const unsigned char *s)
{
	while (*s) {
		unsigned char c = *s;
		size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
		if (!n || (n == 1 && ((c < 0x20 && c != '\n') || c == 0x7f)))
			return 0;
		uint32_t cp = n == 1 ? c : c & (0x7f >> n);
		for (size_t i = 1; i < n; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0x80 && cp < 0xa0))
			return 0;
		s += n;
	}
	return 1;
}

/* Every name a peer may send: the exposition stays valid UTF-8 with no control byte, each label escaped. */
static void test_hostile_labels(void)
{
	static const char *const names[] = {
		"iqn.x:\x1b]0;owned\x07", "iqn.x:cr\rlf\n", "iqn.x:\xff\xfe\x80", "iqn.x:q\"u\\o", "iqn.x:\xc2\x9b" "31m",
		"iqn.x:\xed\xa0\x80", "iqn.x:\xe2\x82", "iqn.x:caf\xc3\xa9",
	};
	struct stats_snap *s = snap_new(ARRAY_SIZE(names));
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		add_row(s, TGT, 1, 0, names[i], "ram0")->c.n.commands[STATS_READ] = i + 1;
	sort_rows(s);
	char *t = render(s);
	CU_ASSERT_TRUE(valid_text((const unsigned char *)t));
	LINE(t, "isert_lun_commands_total{target=\"" TGT "\",tpg=\"1\",lun=\"0\",initiator=\"iqn.x:\\\\x1b]0;owned\\\\x07\","
		"backstore=\"ram0\",kind=\"read\"} 1");
	LINE(t, "isert_lun_commands_total{target=\"" TGT "\",tpg=\"1\",lun=\"0\",initiator=\"iqn.x:q\\\"u\\\\x5co\","
		"backstore=\"ram0\",kind=\"read\"} 4");
	LINE(t, "isert_lun_commands_total{target=\"" TGT "\",tpg=\"1\",lun=\"0\",initiator=\"iqn.x:caf\xc3\xa9\","
		"backstore=\"ram0\",kind=\"read\"} 8");
	/* One LUN, eight rows: one histogram, every read in it. */
	LINE(t, "isert_lun_latency_seconds_count{target=\"" TGT "\",tpg=\"1\",lun=\"0\",backstore=\"ram0\",kind=\"read\"} 0");
	CU_ASSERT_EQUAL(count_lines(t, "isert_lun_latency_seconds_count{"), 2);
	free(t);
}

/* A LUN's rows (named, rest) make one histogram, their sum; the overflow row is a LUN of its own. */
static void test_rows_of_a_lun(void)
{
	struct stats_snap *s = snap_new(4);
	struct stats_row *a = add_row(s, TGT, 1, 0, "iqn.x:a", "r0"), *b = add_row(s, TGT, 1, 0, STATS_REST_NAME, "r0"),
			 *o = add_row(s, "*", 0, 0, STATS_REST_NAME, "*"), *c = add_row(s, TGT, 1, 1, "iqn.x:a", "r1");
	o->kind = STATS_OVERFLOW;
	a->c.lat[LAT_WRITE].n[3] = 2;
	a->c.lat[LAT_WRITE].sum_ns = 10000;
	b->c.lat[LAT_WRITE].n[3] = 5;
	b->c.lat[LAT_WRITE].sum_ns = 25000;
	c->c.lat[LAT_WRITE].n[0] = 1;
	o->c.n.commands[STATS_OTHER] = 9;
	sort_rows(s);
	char *t = render(s);
	LINE(t, "isert_lun_latency_seconds_count{target=\"" TGT "\",tpg=\"1\",lun=\"0\",backstore=\"r0\",kind=\"write\"} 7");
	LINE(t, "isert_lun_latency_seconds_sum{target=\"" TGT "\",tpg=\"1\",lun=\"0\",backstore=\"r0\",kind=\"write\"} 0.000035");
	LINE(t, "isert_lun_latency_seconds_count{target=\"" TGT "\",tpg=\"1\",lun=\"1\",backstore=\"r1\",kind=\"write\"} 1");
	LINE(t, "isert_lun_commands_total{target=\"" TGT "\",tpg=\"1\",lun=\"0\",initiator=\"*\",backstore=\"r0\",kind=\"read\"} 0");
	LINE(t, "isert_lun_commands_total{target=\"*\",tpg=\"0\",lun=\"0\",initiator=\"*\",backstore=\"*\",kind=\"other\"} 9");
	CU_ASSERT_EQUAL(count_lines(t, "isert_lun_latency_seconds_count{"), 6); /* 3 LUNs x 2 kinds */
	free(t);
}

/* More LUNs than METRICS_HIST_LUNS: counters for every row, histograms for the first LUNs only. */
static void test_hist_cap(void)
{
	const size_t n = METRICS_HIST_LUNS + 40;
	struct stats_snap *s = snap_new(n);
	for (size_t i = 0; i < n; i++)
		add_row(s, TGT, 1, i, "iqn.x:a", "r0")->c.n.commands[STATS_WRITE] = 1;
	sort_rows(s);
	char *t = render(s);
	CU_ASSERT_EQUAL(count_lines(t, "isert_lun_commands_total{"), (int)(3 * n));
	CU_ASSERT_EQUAL(count_lines(t, "isert_lun_latency_seconds_count{"), 2 * METRICS_HIST_LUNS);
	LINE(t, "isert_lun_latency_seconds_count{target=\"" TGT "\",tpg=\"1\",lun=\"0\",backstore=\"r0\",kind=\"read\"} 0");
	CU_ASSERT_PTR_NULL(strstr(t, "isert_lun_latency_seconds_count{target=\"" TGT "\",tpg=\"1\",lun=\"551\""));
	free(t);
}

/* The text is the same read 7 bytes at a time as read at once (MHD asks for what its buffer holds). */
static void test_pieces(void)
{
	char *whole = render(known());
	struct metrics_gen *g = metrics_gen_new(known());
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	struct metrics_buf b = { 0 };
	char piece[7];
	ssize_t n;
	bool short_read = false;
	while ((n = metrics_gen_read(g, piece, sizeof(piece))) > 0) {
		CU_ASSERT_FALSE(short_read); /* less than asked only at the end */
		short_read = (size_t)n < sizeof(piece);
		b.p = realloc(b.p, b.len + (size_t)n + 1);
		memcpy(b.p + b.len, piece, (size_t)n);
		b.len += (size_t)n;
		b.p[b.len] = 0;
	}
	CU_ASSERT_EQUAL(n, 0);
	CU_ASSERT_STRING_EQUAL(b.p, whole);
	metrics_gen_free(g);
	metrics_buf_free(&b);
	free(whole);
}

static void test_parse_addr(void)
{
	char *h = NULL;
	uint16_t port = 0;
	CU_ASSERT_EQUAL(config_parse_metrics("9100", &h, &port), 0);
	CU_ASSERT_STRING_EQUAL(h, "127.0.0.1");
	CU_ASSERT_EQUAL(port, 9100);
	free(h);
	CU_ASSERT_EQUAL(config_parse_metrics("0.0.0.0:9200", &h, &port), 0);
	CU_ASSERT_STRING_EQUAL(h, "0.0.0.0");
	CU_ASSERT_EQUAL(port, 9200);
	free(h);
	CU_ASSERT_EQUAL(config_parse_metrics("[::1]:9100", &h, &port), 0);
	CU_ASSERT_STRING_EQUAL(h, "::1");
	free(h);
	const char *bad[] = { "", "127.0.0.1", "::1", "[::1]", "host:9100", "127.0.0.1:", "127.0.0.1:0", "70000",
			      "127.0.0.1:65536", "1.2.3.4:9x", NULL };
	for (const char **b = bad; *b; b++)
		CU_ASSERT_EQUAL(config_parse_metrics(*b, &h, &port), -EINVAL);
}

static void test_config_key(void)
{
	struct config *c = NULL;
	char err[512];
	int rc = config_load_string("{\"global\":{\"metrics\":\"9100\"}}", NULL, &c, err, sizeof(err));
	if (rc)
		fprintf(stderr, "\n%s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_STRING_EQUAL(c->metrics, "9100");
	char *j = config_to_json(c);
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"metrics\": \"9100\"")); /* saved, and printed by --print-config */
	free(j);
	config_free(c);
	CU_ASSERT_EQUAL(config_load_string("{\"global\":{\"metrics\":\"\"}}", NULL, &c, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NULL(c->metrics); /* "" is off, as if absent */
	config_free(c);
	CU_ASSERT_EQUAL(config_load_string("{}", NULL, &c, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NULL(c->metrics); /* off by default */
	config_free(c);
	CU_ASSERT_NOT_EQUAL(config_load_string("{\"global\":{\"metrics\":\"localhost:9100\"}}", NULL, &c, err,
					       sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "global.metrics"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "localhost:9100"));
	CU_ASSERT_NOT_EQUAL(config_load_string("{\"global\":{\"metrics\":9100}}", NULL, &c, err, sizeof(err)), 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "global.metrics"));
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("metrics", NULL, NULL);
	CU_add_test(s, "LUN counters and labels", test_lun_counters);
	CU_add_test(s, "histograms", test_histogram);
	CU_add_test(s, "portals and RDMA devices", test_portals_devices);
	CU_add_test(s, "families once, contiguous", test_families_once);
	CU_add_test(s, "missing sections", test_empty);
	CU_add_test(s, "names shown: UTF-8, controls as \\xNN", test_escape);
	CU_add_test(s, "hostile initiator names as labels", test_hostile_labels);
	CU_add_test(s, "a LUN's rows, rest and overflow rows", test_rows_of_a_lun);
	CU_add_test(s, "histograms for METRICS_HIST_LUNS LUNs", test_hist_cap);
	CU_add_test(s, "the same text in pieces", test_pieces);
	CU_add_test(s, "global.metrics syntax", test_parse_addr);
	CU_add_test(s, "global.metrics in the configuration", test_config_key);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
