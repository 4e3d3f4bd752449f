/*
 * The Prometheus renderer (target/metrics_text.c): a known stats document
 * in, exact exposition lines out; global.metrics parsing and its errors.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "target/config.h"
#include "target/metrics.h"

/* Three bounds (1 us, 2 us, 1.5 s), so four buckets; an initiator name with every character to escape. */
static const char doc[] =
	"{ \"monotonic_ns\": 1, \"latency_bounds_us\": [1, 2, 1500000],"
	"  \"luns\": [ { \"target\": \"iqn.2024-01.org.x:d\", \"tpg\": 1, \"lun\": 3,"
	"    \"initiator\": \"a\\\\b\\\"c\\nd\", \"backstore\": \"ram0\", \"in_flight\": 2,"
	"    \"commands\": { \"read\": 6, \"write\": 0, \"other\": 12 },"
	"    \"bytes_read\": 24576, \"bytes_written\": 0,"
	"    \"check_conditions\": { \"unit_attention\": 1 }, \"unit_attentions\": 1,"
	"    \"status\": { \"busy\": 0, \"reservation_conflict\": 4, \"task_set_full\": 0 },"
	"    \"task_management\": 5,"
	"    \"latency\": { \"read\": { \"count\": 6, \"sum_ns\": 1234500000, \"buckets\": [1, 0, 2, 3] },"
	"                   \"write\": { \"count\": 0, \"sum_ns\": 0, \"buckets\": [0, 0, 0, 0] },"
	"                   \"read_backstore\": { \"count\": 6, \"sum_ns\": 7000, \"buckets\": [6, 0, 0, 0] },"
	"                   \"write_backstore\": { \"count\": 0, \"sum_ns\": 0, \"buckets\": [0, 0, 0, 0] } } } ],"
	"  \"portals\": [ { \"portal\": \"127.0.0.1:3260\", \"transport\": \"tcp\", \"listening\": true,"
	"    \"connections\": 1, \"connections_refused\": 7, \"connections_closed\": 3,"
	"    \"logins\": { \"accepted\": 4, \"refused\": { \"acl\": 0, \"chap\": 1 } },"
	"    \"pdus_in\": 10, \"pdus_out\": 11, \"bytes_in\": 12, \"bytes_out\": 13, \"digest_errors\": 0,"
	"    \"r2ts\": 2, \"nop_timeouts\": 0 },"
	"    { \"portal\": \"[::1]:3260\", \"transport\": \"iser\", \"connections\": 0,"
	"      \"rdma\": { \"reads\": 8, \"read_bytes\": 32768, \"writes\": 9, \"write_bytes\": 36864, \"sends\": 1,"
	"                  \"recvs\": 2, \"inline_sends\": 1, \"send_posts\": 7, \"cq_polls\": 30, \"cq_empty_polls\": 20, \"completions\": 10 } } ],"
	"  \"rdma_devices\": [ { \"device\": \"rxe0\", \"port\": 1, \"counters\": { \"port_xmit_data\": 100 },"
	"    \"hw_counters\": { \"retry_exceeded_err\": 0, \"rcvd_seq_err\": 5 } } ],"
	"  \"reactors\": [ { \"reactor\": 0, \"connections\": 2, \"buffer_pool_bytes\": 8388608,"
	"    \"buffers_in_use\": 3 }, { \"reactor\": 1, \"connections\": 0, \"buffer_pool_bytes\": 0,"
	"    \"buffers_in_use\": 0 } ] }";

#define LUN "target=\"iqn.2024-01.org.x:d\",tpg=\"1\",lun=\"3\",initiator=\"a\\\\b\\\"c\\nd\",backstore=\"ram0\""

static char *render(const char *json)
{
	json_object *o = json_tokener_parse(json);
	struct metrics_buf b = { 0 };
	CU_ASSERT_PTR_NOT_NULL_FATAL(o);
	metrics_render(o, &b);
	json_object_put(o);
	CU_ASSERT_FALSE(b.oom);
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

static void test_lun_counters(void)
{
	char *t = render(doc);
	LINE(t, "isert_up 1");
	LINE(t, "# TYPE isert_lun_commands_total counter");
	LINE(t, "isert_lun_commands_total{" LUN ",kind=\"read\"} 6");
	LINE(t, "isert_lun_commands_total{" LUN ",kind=\"other\"} 12");
	LINE(t, "isert_lun_read_bytes_total{" LUN "} 24576");
	LINE(t, "isert_lun_check_conditions_total{" LUN ",sense_key=\"unit_attention\"} 1");
	LINE(t, "isert_lun_status_total{" LUN ",status=\"reservation_conflict\"} 4");
	LINE(t, "isert_lun_task_management_total{" LUN "} 5");
	LINE(t, "# TYPE isert_lun_commands_in_flight gauge");
	LINE(t, "isert_lun_commands_in_flight{" LUN "} 2");
	CU_ASSERT_PTR_NULL(strstr(t, "unit_attentions")); /* the same count as the sense key's: not twice */
	free(t);
}

static void test_histogram(void)
{
	char *t = render(doc);
	LINE(t, "# TYPE isert_lun_latency_seconds histogram");
	/* cumulative: 1, 1+0, 1+0+2, then +Inf with the last bucket (beyond 1.5 s) */
	LINE(t, "isert_lun_latency_seconds_bucket{" LUN ",kind=\"read\",le=\"0.000001\"} 1");
	LINE(t, "isert_lun_latency_seconds_bucket{" LUN ",kind=\"read\",le=\"0.000002\"} 1");
	LINE(t, "isert_lun_latency_seconds_bucket{" LUN ",kind=\"read\",le=\"1.5\"} 3");
	LINE(t, "isert_lun_latency_seconds_bucket{" LUN ",kind=\"read\",le=\"+Inf\"} 6");
	LINE(t, "isert_lun_latency_seconds_sum{" LUN ",kind=\"read\"} 1.2345");
	LINE(t, "isert_lun_latency_seconds_count{" LUN ",kind=\"read\"} 6");
	LINE(t, "isert_lun_latency_seconds_sum{" LUN ",kind=\"write\"} 0");
	LINE(t, "isert_lun_backstore_latency_seconds_sum{" LUN ",kind=\"read\"} 0.000007");
	LINE(t, "isert_lun_backstore_latency_seconds_bucket{" LUN ",kind=\"read\",le=\"+Inf\"} 6");
	free(t);
}

static void test_portals_devices(void)
{
	char *t = render(doc);
	const char *p = "portal=\"127.0.0.1:3260\",transport=\"tcp\"", *q = "portal=\"[::1]:3260\",transport=\"iser\"";
	char l[256];
#define PL(fmt, who) (snprintf(l, sizeof(l), fmt, who), l)
	LINE(t, PL("isert_portal_connections{%s} 1", p));
	LINE(t, PL("isert_portal_logins_total{%s,result=\"accepted\"} 4", p));
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
	/* a TCP portal has no rdma object: no RDMA sample for it, not a 0 */
	CU_ASSERT_PTR_NULL(strstr(t, PL("isert_portal_rdma_reads_total{%s}", p)));
	free(t);
}

/* HELP and TYPE once per family, the family's samples together (what the format and promtool ask). */
static void test_families_once(void)
{
	char *t = render(doc), *save = NULL, seen[64][64];
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

/* A document without sections (a filter, an older core): every family announced, no sample, no crash. */
static void test_empty(void)
{
	char *t = render("{}");
	LINE(t, "# TYPE isert_lun_commands_total counter");
	LINE(t, "# TYPE isert_rdma_hw_counters_total counter");
	CU_ASSERT_PTR_NULL(strstr(t, "isert_lun_commands_total{"));
	free(t);
	t = render("{\"luns\": [ { \"latency\": { \"read\": { \"buckets\": 3 } }, \"commands\": 5 } ], \"portals\": 1}");
	CU_ASSERT_PTR_NULL(strstr(t, "_bucket{"));
	free(t);
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
	unsigned fails;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("metrics", NULL, NULL);
	CU_add_test(s, "LUN counters and labels", test_lun_counters);
	CU_add_test(s, "histograms", test_histogram);
	CU_add_test(s, "portals and RDMA devices", test_portals_devices);
	CU_add_test(s, "families once, contiguous", test_families_once);
	CU_add_test(s, "missing sections", test_empty);
	CU_add_test(s, "global.metrics syntax", test_parse_addr);
	CU_add_test(s, "global.metrics in the configuration", test_config_key);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
