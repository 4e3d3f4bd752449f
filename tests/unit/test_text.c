/* Unit tests for common/proto/text.c: key=value parsing/building and the negotiation engine. */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto/text.h"

#include "unit_run.h"

static int parse_str(const char *s, size_t len, struct text_list *l)
{
	char why[128];

	return text_parse((const uint8_t *)s, (uint32_t)len, l, why, sizeof(why));
}

static void test_parse_basic(void)
{
	static const char d[] = "HeaderDigest=None\0MaxBurstLength=262144\0\0\0";
	struct text_list l;

	CU_ASSERT_EQUAL(parse_str(d, sizeof(d) - 1, &l), 0);
	CU_ASSERT_EQUAL(l.count, 2);
	CU_ASSERT_STRING_EQUAL(l.pairs[0].key, "HeaderDigest");
	CU_ASSERT_STRING_EQUAL(l.pairs[0].value, "None");
	CU_ASSERT_STRING_EQUAL(text_get(&l, "MaxBurstLength"), "262144");
	CU_ASSERT_PTR_NULL(text_get(&l, "DataDigest"));
	CU_ASSERT_EQUAL(text_find_duplicate(&l), -1);
	text_list_free(&l);
	CU_ASSERT_PTR_NULL(l.storage);

	/* Last pair without its NUL, '=' inside a value, an empty value. */
	{
		static const char d2[] = "A=1\0TargetAddress=10.0.0.1:3260,1\0B=x=y\0C=";

		CU_ASSERT_EQUAL(parse_str(d2, sizeof(d2) - 1, &l), 0);
	}
	CU_ASSERT_EQUAL_FATAL(l.count, 4);
	CU_ASSERT_STRING_EQUAL(text_get(&l, "B"), "x=y");
	CU_ASSERT_STRING_EQUAL(text_get(&l, "C"), "");
	text_list_free(&l);

	CU_ASSERT_EQUAL(parse_str("", 0, &l), 0);
	CU_ASSERT_EQUAL(l.count, 0);
	text_list_free(&l);

	CU_ASSERT_EQUAL(parse_str("A=1\0B=2\0A=3", 11, &l), 0);
	CU_ASSERT_EQUAL(text_find_duplicate(&l), 2);
	CU_ASSERT_STRING_EQUAL(text_get(&l, "A"), "1");
	text_list_free(&l);
}

static void test_parse_errors(void)
{
	struct text_list l;
	char buf[20000];
	size_t n;

	CU_ASSERT_EQUAL(parse_str("NoEquals\0", 9, &l), -EINVAL);
	CU_ASSERT_EQUAL(parse_str("=value", 6, &l), -EINVAL);
	CU_ASSERT_EQUAL(parse_str("Bad Key=1", 9, &l), -EINVAL);
	CU_ASSERT_EQUAL(parse_str("Bad\x01Key=1", 9, &l), -EINVAL);
	CU_ASSERT_EQUAL(parse_str("X#vendor.key=1", 14, &l), 0);
	text_list_free(&l);

	/* Key: 63 bytes fine, 64 too long. */
	memset(buf, 'K', 63);
	strcpy(buf + 63, "=1");
	CU_ASSERT_EQUAL(parse_str(buf, 65, &l), 0);
	text_list_free(&l);
	memset(buf, 'K', 64);
	strcpy(buf + 64, "=1");
	CU_ASSERT_EQUAL(parse_str(buf, 66, &l), -EINVAL);

	/* Simple value: 255 fine, 256 too long. */
	strcpy(buf, "K=");
	memset(buf + 2, 'v', 255);
	CU_ASSERT_EQUAL(parse_str(buf, 257, &l), 0);
	text_list_free(&l);
	memset(buf + 2, 'v', 256);
	CU_ASSERT_EQUAL(parse_str(buf, 258, &l), -EINVAL);

	/* Binary value (0x...): up to TEXT_MAX_VALUE_LEN characters. */
	strcpy(buf, "CHAP_C=0x");
	memset(buf + 9, 'a', TEXT_MAX_VALUE_LEN - 2);
	CU_ASSERT_EQUAL(parse_str(buf, 7 + TEXT_MAX_VALUE_LEN, &l), 0);
	CU_ASSERT_EQUAL(strlen(text_get(&l, "CHAP_C")), TEXT_MAX_VALUE_LEN);
	text_list_free(&l);
	memset(buf + 9, 'a', TEXT_MAX_VALUE_LEN - 1);
	CU_ASSERT_EQUAL(parse_str(buf, 8 + TEXT_MAX_VALUE_LEN, &l), -EINVAL);

	/* Pair count: TEXT_MAX_PAIRS fine, one more refused. */
	n = 0;
	for (int i = 0; i < TEXT_MAX_PAIRS; i++)
		n += (size_t)sprintf(buf + n, "K%d=1", i) + 1;
	CU_ASSERT_EQUAL(parse_str(buf, n, &l), 0);
	CU_ASSERT_EQUAL(l.count, TEXT_MAX_PAIRS);
	text_list_free(&l);
	n += (size_t)sprintf(buf + n, "Kx=1") + 1;
	CU_ASSERT_EQUAL(parse_str(buf, n, &l), -E2BIG);

	/* Whole sequence longer than TEXT_MAX_TOTAL. */
	{
		uint8_t *big = calloc(1, TEXT_MAX_TOTAL + 1);
		char why[128] = "";

		CU_ASSERT_PTR_NOT_NULL_FATAL(big);
		CU_ASSERT_EQUAL(text_parse(big, TEXT_MAX_TOTAL + 1, &l, why, sizeof(why)), -E2BIG);
		CU_ASSERT_NOT_EQUAL(why[0], '\0');
		free(big);
	}
}

static void test_buf(void)
{
	struct text_buf b;
	struct text_list l;
	char longv[600];

	text_buf_init(&b);
	text_add(&b, "A", "1");
	text_addf(&b, "MaxBurstLength", "%u", 262144u);
	CU_ASSERT_EQUAL(b.len, 4 + 22);
	CU_ASSERT_EQUAL(memcmp(b.data, "A=1\0MaxBurstLength=262144\0", b.len), 0);
	memset(longv, 'z', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	text_addf(&b, "Long", "0x%s", longv);
	text_append(&b, (const uint8_t *)"Z=9", 4);
	CU_ASSERT_FALSE(b.oom);
	CU_ASSERT_EQUAL(text_parse(b.data, b.len, &l, NULL, 0), 0);
	CU_ASSERT_EQUAL(l.count, 4);
	CU_ASSERT_EQUAL(strlen(text_get(&l, "Long")), 601);
	CU_ASSERT_STRING_EQUAL(text_get(&l, "Z"), "9");
	text_list_free(&l);

	/* Growing past a whole negotiation's worth is refused and flagged. */
	while (!b.oom)
		text_addf(&b, "Fill", "%s", longv);
	CU_ASSERT_TRUE(b.len <= TEXT_MAX_TOTAL);
	text_buf_free(&b);
	CU_ASSERT_PTR_NULL(b.data);
	CU_ASSERT_EQUAL(b.len, 0);
}

static void test_u64(void)
{
	uint64_t v = 7;

	CU_ASSERT_TRUE(text_parse_u64("0", &v));
	CU_ASSERT_EQUAL(v, 0);
	CU_ASSERT_TRUE(text_parse_u64("8192", &v));
	CU_ASSERT_EQUAL(v, 8192);
	CU_ASSERT_TRUE(text_parse_u64("0x2000", &v));
	CU_ASSERT_EQUAL(v, 8192);
	CU_ASSERT_TRUE(text_parse_u64("0XfF", &v));
	CU_ASSERT_EQUAL(v, 255);
	CU_ASSERT_TRUE(text_parse_u64("18446744073709551615", &v));
	CU_ASSERT_EQUAL(v, UINT64_MAX);
	CU_ASSERT_TRUE(text_parse_u64("0xffffffffffffffff", &v));
	CU_ASSERT_EQUAL(v, UINT64_MAX);
	v = 7;
	CU_ASSERT_FALSE(text_parse_u64("18446744073709551616", &v));
	CU_ASSERT_FALSE(text_parse_u64("0x10000000000000000", &v));
	CU_ASSERT_FALSE(text_parse_u64("", &v));
	CU_ASSERT_FALSE(text_parse_u64(NULL, &v));
	CU_ASSERT_FALSE(text_parse_u64("0x", &v));
	CU_ASSERT_FALSE(text_parse_u64("-1", &v));
	CU_ASSERT_FALSE(text_parse_u64("+1", &v));
	CU_ASSERT_FALSE(text_parse_u64(" 1", &v));
	CU_ASSERT_FALSE(text_parse_u64("12a", &v));
	CU_ASSERT_FALSE(text_parse_u64("0x1g", &v));
	CU_ASSERT_FALSE(text_parse_u64("Yes", &v));
	CU_ASSERT_EQUAL(v, 7);
}

/* ---- negotiation ---- */

static struct text_buf rsp;
static char answer[300];

/* Respond to one key; answer holds our reply for it ("" when none). */
static int respond(struct neg_ctx *n, const char *key, const char *value)
{
	struct text_list l;
	char why[128] = "";
	int r;

	text_buf_free(&rsp);
	r = neg_respond(n, key, value, &rsp, why, sizeof(why));
	if (r)
		CU_ASSERT_NOT_EQUAL(why[0], '\0');
	answer[0] = '\0';
	if (text_parse(rsp.data, rsp.len, &l, NULL, 0) == 0) {
		const char *a = text_get(&l, key);

		if (a)
			snprintf(answer, sizeof(answer), "%s", a);
		text_list_free(&l);
	}
	return r;
}

static void target_ctx(struct neg_ctx *n)
{
	struct neg_params p;

	neg_params_default(&p);
	p.max_recv_dsl = 65536;
	p.max_burst = 1048576;
	p.first_burst = 65536;
	p.initial_r2t = false;
	p.immediate_data = true;
	neg_init(n, NEG_TARGET, &p);
}

static void test_defaults(void)
{
	struct neg_params p;
	struct neg_ctx n;

	neg_params_default(&p);
	CU_ASSERT_FALSE(p.header_digest);
	CU_ASSERT_FALSE(p.data_digest);
	CU_ASSERT_EQUAL(p.max_connections, 1);
	CU_ASSERT_TRUE(p.initial_r2t);
	CU_ASSERT_TRUE(p.immediate_data);
	CU_ASSERT_EQUAL(p.max_recv_dsl, 8192);
	CU_ASSERT_EQUAL(p.peer_max_recv_dsl, 8192);
	CU_ASSERT_EQUAL(p.max_burst, 262144);
	CU_ASSERT_EQUAL(p.first_burst, 65536);
	CU_ASSERT_EQUAL(p.time2wait, 2);
	CU_ASSERT_EQUAL(p.time2retain, 20);
	CU_ASSERT_EQUAL(p.max_outstanding_r2t, 1);
	CU_ASSERT_TRUE(p.data_pdu_in_order);
	CU_ASSERT_TRUE(p.data_seq_in_order);
	CU_ASSERT_EQUAL(p.erl, 0);
	CU_ASSERT_FALSE(p.rdma_extensions);
	CU_ASSERT_EQUAL(p.target_recv_dsl, 8192);
	CU_ASSERT_EQUAL(p.initiator_recv_dsl, 8192);
	CU_ASSERT_EQUAL(p.max_outstanding_unexpected_pdus, 0);
	CU_ASSERT_FALSE(p.iser_hello_required);

	target_ctx(&n);
	CU_ASSERT_TRUE(n.leading);
	CU_ASSERT_EQUAL(n.result.max_recv_dsl, 65536);      /* our declaration */
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 8192);  /* until the peer declares */
	CU_ASSERT_EQUAL(n.result.max_burst, 262144);        /* RFC default, not our wish */
}

static void test_target_login(void)
{
	struct neg_ctx n;

	target_ctx(&n);
	CU_ASSERT_EQUAL(respond(&n, "HeaderDigest", "None"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "None");
	CU_ASSERT_EQUAL(respond(&n, "MaxConnections", "4"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "1");
	CU_ASSERT_EQUAL(respond(&n, "InitialR2T", "No"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "No");
	CU_ASSERT_FALSE(n.result.initial_r2t);
	CU_ASSERT_EQUAL(respond(&n, "ImmediateData", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Yes");
	CU_ASSERT_EQUAL(respond(&n, "MaxRecvDataSegmentLength", "262144"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "65536"); /* our own declaration, sent once */
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 262144);
	CU_ASSERT_EQUAL(n.result.max_recv_dsl, 65536);
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "16776192"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "1048576");
	CU_ASSERT_EQUAL(respond(&n, "FirstBurstLength", "262144"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "65536");
	CU_ASSERT_EQUAL(respond(&n, "DefaultTime2Wait", "0"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "2"); /* Maximum */
	CU_ASSERT_EQUAL(respond(&n, "DefaultTime2Retain", "0"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "0"); /* Minimum */
	CU_ASSERT_EQUAL(respond(&n, "MaxOutstandingR2T", "0x10"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "1");
	CU_ASSERT_EQUAL(respond(&n, "DataPDUInOrder", "No"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Yes"); /* OR with our Yes */
	CU_ASSERT_EQUAL(respond(&n, "DataSequenceInOrder", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Yes");
	CU_ASSERT_EQUAL(respond(&n, "ErrorRecoveryLevel", "2"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "0");
	CU_ASSERT_EQUAL(n.result.max_burst, 1048576);
	CU_ASSERT_EQUAL(n.result.first_burst, 65536);
	CU_ASSERT_EQUAL(n.result.time2wait, 2);
	CU_ASSERT_EQUAL(n.result.time2retain, 0);
	CU_ASSERT_TRUE(n.result.immediate_data);
	CU_ASSERT_TRUE(n.result.data_pdu_in_order);

	/* The declaration went out with the answer: nothing left to offer. */
	text_buf_free(&rsp);
	neg_offer(&n, &rsp);
	CU_ASSERT_EQUAL(rsp.len, 0);
	text_buf_free(&rsp);
}

static void test_target_offer(void)
{
	struct neg_ctx n;
	struct text_list l;

	target_ctx(&n);
	neg_offer(&n, &rsp);
	CU_ASSERT_EQUAL_FATAL(text_parse(rsp.data, rsp.len, &l, NULL, 0), 0);
	CU_ASSERT_EQUAL(l.count, 1);
	CU_ASSERT_STRING_EQUAL(text_get(&l, "MaxRecvDataSegmentLength"), "65536");
	text_list_free(&l);
	/* A later declaration by the initiator is not answered a second time. */
	CU_ASSERT_EQUAL(respond(&n, "MaxRecvDataSegmentLength", "8192"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "");
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 8192);
	text_buf_free(&rsp);
	neg_offer(&n, &rsp);
	CU_ASSERT_EQUAL(rsp.len, 0);
	text_buf_free(&rsp);
}

static void test_digests(void)
{
	struct neg_ctx n;
	struct neg_params p;

	neg_params_default(&p);
	p.header_digest = true;
	neg_init(&n, NEG_TARGET, &p);
	CU_ASSERT_EQUAL(respond(&n, "HeaderDigest", "CRC32C,None"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "CRC32C");
	CU_ASSERT_TRUE(n.result.header_digest);
	CU_ASSERT_EQUAL(respond(&n, "DataDigest", "None,CRC32C"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "None"); /* the offerer's order wins */
	CU_ASSERT_FALSE(n.result.data_digest);

	neg_init(&n, NEG_TARGET, NULL);
	CU_ASSERT_EQUAL(respond(&n, "HeaderDigest", "CRC32C"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_FALSE(n.result.header_digest);
	CU_ASSERT_EQUAL(respond(&n, "DataDigest", "MD5,CRC32C,None"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "None"); /* unknown values are skipped */

	neg_init(&n, NEG_TARGET, &p);
	CU_ASSERT_EQUAL(respond(&n, "HeaderDigest", "Bogus"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "DataDigest", ""), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
}

static void test_bad_values(void)
{
	struct neg_ctx n;

	target_ctx(&n);
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "511"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(n.result.max_burst, 262144);
	CU_ASSERT_EQUAL(respond(&n, "FirstBurstLength", "16777216"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(n.result.first_burst, 65536);
	CU_ASSERT_EQUAL(respond(&n, "MaxConnections", "0"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "ErrorRecoveryLevel", "3"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "DefaultTime2Wait", "3601"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "DefaultTime2Retain", "lots"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "MaxOutstandingR2T", "65536"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "ImmediateData", "yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_TRUE(n.result.immediate_data);
	/* A bad declaration cannot be negotiated down: login fails. */
	CU_ASSERT_EQUAL(respond(&n, "MaxRecvDataSegmentLength", "100"), -EPROTO);
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 8192);
	/* A reserved constant is not an offer: no answer, default kept. */
	CU_ASSERT_EQUAL(respond(&n, "InitialR2T", "Irrelevant"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "");
	CU_ASSERT_TRUE(n.result.initial_r2t);
	/* Ranges at their edges are fine. */
	target_ctx(&n);
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "512"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "512");
	CU_ASSERT_EQUAL(respond(&n, "MaxRecvDataSegmentLength", "16777215"), 0);
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 16777215);
	CU_ASSERT_EQUAL(respond(&n, "DefaultTime2Wait", "3600"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "3600");
}

static void test_burst_rule(void)
{
	struct neg_ctx n;
	struct neg_params p;

	/* Our FirstBurstLength wish above our MaxBurstLength is capped. */
	neg_params_default(&p);
	p.max_burst = 65536;
	p.first_burst = 262144;
	neg_init(&n, NEG_TARGET, &p);
	CU_ASSERT_EQUAL(respond(&n, "FirstBurstLength", "262144"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "65536");
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "262144"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "65536");
	CU_ASSERT_TRUE(n.result.first_burst <= n.result.max_burst);

	/* MaxBurstLength first: FirstBurstLength stays below its result. */
	neg_params_default(&p);
	p.max_burst = 1048576;
	p.first_burst = 1048576;
	neg_init(&n, NEG_TARGET, &p);
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "131072"), 0);
	CU_ASSERT_EQUAL(respond(&n, "FirstBurstLength", "262144"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "131072");

	/* An initiator offering FirstBurst > MaxBurst still leaves a consistent result. */
	neg_init(&n, NEG_TARGET, &p);
	CU_ASSERT_EQUAL(respond(&n, "FirstBurstLength", "262144"), 0);
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "8192"), 0);
	CU_ASSERT_EQUAL(n.result.max_burst, 8192);
	CU_ASSERT_EQUAL(n.result.first_burst, 8192);
}

static void test_protocol_errors(void)
{
	struct neg_ctx n;

	target_ctx(&n);
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "65536"), 0);
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "65536"), -EPROTO);
	CU_ASSERT_EQUAL(respond(&n, "IFMarker", "No"), 0);
	CU_ASSERT_EQUAL(respond(&n, "IFMarker", "No"), -EPROTO);

	target_ctx(&n);
	n.leading = false;
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "65536"), -EPROTO);
	CU_ASSERT_EQUAL(respond(&n, "ErrorRecoveryLevel", "0"), -EPROTO);
	CU_ASSERT_EQUAL(respond(&n, "RDMAExtensions", "Yes"), -EPROTO);
	CU_ASSERT_EQUAL(respond(&n, "HeaderDigest", "None"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "None");
	CU_ASSERT_EQUAL(respond(&n, "MaxRecvDataSegmentLength", "4096"), 0);
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 4096);

	/* Login keys are the caller's, not the engine's. */
	target_ctx(&n);
	CU_ASSERT_EQUAL(respond(&n, "InitiatorName", "iqn.x"), -EINVAL);
	CU_ASSERT_EQUAL(respond(&n, "CHAP_A", "5"), -EINVAL);
	CU_ASSERT_FALSE(neg_is_operational_key("TargetName"));
	CU_ASSERT_FALSE(neg_is_operational_key("SessionType"));
	CU_ASSERT_FALSE(neg_is_operational_key("AuthMethod"));
	CU_ASSERT_FALSE(neg_is_operational_key("CHAP_R"));
	CU_ASSERT_FALSE(neg_is_operational_key("SendTargets"));
	CU_ASSERT_TRUE(neg_is_operational_key("MaxBurstLength"));
	CU_ASSERT_TRUE(neg_is_operational_key("RDMAExtensions"));
	CU_ASSERT_TRUE(neg_is_operational_key("X-com.example.Foo"));
}

static void test_unknown_and_obsolete(void)
{
	struct neg_ctx n;

	target_ctx(&n);
	CU_ASSERT_EQUAL(respond(&n, "FooBar", "1"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "NotUnderstood");
	CU_ASSERT_EQUAL(respond(&n, "X-com.example.Feature", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "NotUnderstood");
	CU_ASSERT_EQUAL(respond(&n, "X#vendor", "1"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "NotUnderstood");
	CU_ASSERT_EQUAL(respond(&n, "IFMarker", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "No");
	CU_ASSERT_EQUAL(respond(&n, "OFMarker", "No"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "No");
	CU_ASSERT_EQUAL(respond(&n, "IFMarkInt", "2048~8192"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "OFMarkInt", "1"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "TaskReporting", "ResponseFence,RFC3720"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "RFC3720");
	target_ctx(&n);
	CU_ASSERT_EQUAL(respond(&n, "TaskReporting", "FastAbort"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
}

static void test_discovery(void)
{
	struct neg_ctx n;

	target_ctx(&n);
	n.discovery = true;
	CU_ASSERT_EQUAL(respond(&n, "MaxBurstLength", "65536"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(n.result.max_burst, 262144);
	CU_ASSERT_EQUAL(respond(&n, "InitialR2T", "No"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(respond(&n, "ImmediateData", "No"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(respond(&n, "MaxConnections", "1"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(respond(&n, "FirstBurstLength", "512"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(respond(&n, "MaxOutstandingR2T", "1"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(respond(&n, "DataPDUInOrder", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(respond(&n, "DataSequenceInOrder", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(respond(&n, "TaskReporting", "RFC3720"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	/* These still apply to a discovery session. */
	CU_ASSERT_EQUAL(respond(&n, "HeaderDigest", "None"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "None");
	CU_ASSERT_EQUAL(respond(&n, "ErrorRecoveryLevel", "0"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "0");
	CU_ASSERT_EQUAL(respond(&n, "DefaultTime2Wait", "5"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "5");
	CU_ASSERT_EQUAL(respond(&n, "MaxRecvDataSegmentLength", "32768"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "65536");
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 32768);
}

static void test_iser_target(void)
{
	struct neg_ctx n;
	struct neg_params p;

	neg_params_default(&p);
	p.rdma_extensions = true;
	p.header_digest = true;
	p.target_recv_dsl = 65536;
	p.initiator_recv_dsl = 262144;
	p.max_outstanding_unexpected_pdus = 32;
	neg_init(&n, NEG_TARGET, &p);
	/* Digests offered before RDMAExtensions are already settled to None. */
	CU_ASSERT_EQUAL(respond(&n, "HeaderDigest", "CRC32C,None"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "None");
	CU_ASSERT_EQUAL(respond(&n, "DataDigest", "CRC32C"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(respond(&n, "RDMAExtensions", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Yes");
	CU_ASSERT_TRUE(n.result.rdma_extensions);
	CU_ASSERT_FALSE(n.result.header_digest);
	CU_ASSERT_FALSE(n.result.data_digest);
	CU_ASSERT_EQUAL(respond(&n, "TargetRecvDataSegmentLength", "131072"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "65536");
	CU_ASSERT_EQUAL(n.result.target_recv_dsl, 65536);
	CU_ASSERT_EQUAL(respond(&n, "InitiatorRecvDataSegmentLength", "8192"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "8192");
	CU_ASSERT_EQUAL(n.result.initiator_recv_dsl, 8192);
	/* Declared both ways even under iSER: Linux initiators size immediate data from it. */
	CU_ASSERT_EQUAL(respond(&n, "MaxRecvDataSegmentLength", "262144"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "8192");
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 262144);
	CU_ASSERT_EQUAL(respond(&n, "iSERHelloRequired", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "");
	CU_ASSERT_TRUE(n.result.iser_hello_required);
	text_buf_free(&rsp);
	neg_offer(&n, &rsp);
	{
		struct text_list l;

		CU_ASSERT_EQUAL_FATAL(text_parse(rsp.data, rsp.len, &l, NULL, 0), 0);
		/* MaxRecvDataSegmentLength went out with the answers; our iSER declaration remains. */
		CU_ASSERT_EQUAL(l.count, 1);
		CU_ASSERT_STRING_EQUAL(text_get(&l, "MaxOutstandingUnexpectedPDUs"), "32");
		text_list_free(&l);
	}

	neg_init(&n, NEG_TARGET, &p);
	CU_ASSERT_EQUAL(respond(&n, "MaxOutstandingUnexpectedPDUs", "0"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "32"); /* our declaration */
	CU_ASSERT_EQUAL(n.result.max_outstanding_unexpected_pdus, 0);
	CU_ASSERT_EQUAL(respond(&n, "MaxOutstandingUnexpectedPDUs", "0"), -EPROTO); /* twice */
	neg_init(&n, NEG_TARGET, &p);
	CU_ASSERT_EQUAL(respond(&n, "MaxOutstandingUnexpectedPDUs", "1"), -EPROTO);
	CU_ASSERT_EQUAL(respond(&n, "iSERHelloRequired", "maybe"), -EPROTO);
	CU_ASSERT_EQUAL(respond(&n, "MaxOutstandingUnexpectedPDUs", "0xffffffff"), -EPROTO);
	neg_init(&n, NEG_TARGET, &p);
	CU_ASSERT_EQUAL(respond(&n, "MaxOutstandingUnexpectedPDUs", "0xffffffff"), 0);
	CU_ASSERT_EQUAL(n.result.max_outstanding_unexpected_pdus, 0xffffffffu);
	CU_ASSERT_EQUAL(respond(&n, "TargetRecvDataSegmentLength", "256"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Reject");
	CU_ASSERT_EQUAL(n.result.target_recv_dsl, 8192);

	/* On a TCP portal the iSER keys do not apply. */
	neg_init(&n, NEG_TARGET, NULL);
	CU_ASSERT_EQUAL(respond(&n, "RDMAExtensions", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "No");
	CU_ASSERT_FALSE(n.result.rdma_extensions);
	CU_ASSERT_EQUAL(respond(&n, "TargetRecvDataSegmentLength", "65536"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_EQUAL(respond(&n, "iSERHelloRequired", "Yes"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "Irrelevant");
	CU_ASSERT_FALSE(n.result.iser_hello_required);
	CU_ASSERT_EQUAL(respond(&n, "MaxRecvDataSegmentLength", "262144"), 0);
	CU_ASSERT_STRING_EQUAL(answer, "8192");
}

static int accept_(struct neg_ctx *n, const char *k, const char *v)
{
	char why[128] = "";
	int r = neg_accept(n, k, v, why, sizeof(why));

	if (r)
		CU_ASSERT_NOT_EQUAL(why[0], '\0');
	return r;
}

static void initiator_ctx(struct neg_ctx *n, bool discovery, bool leading)
{
	struct neg_params p;

	neg_params_default(&p);
	p.max_recv_dsl = 262144;
	p.max_burst = 16776192;
	p.first_burst = 262144;
	p.initial_r2t = false;
	p.immediate_data = true;
	p.time2wait = 0;
	p.time2retain = 0;
	neg_init(n, NEG_INITIATOR, &p);
	n->discovery = discovery;
	n->leading = leading;
}

static void test_initiator_offer(void)
{
	struct neg_ctx n;
	struct text_buf b;
	struct text_list l;

	initiator_ctx(&n, false, true);
	text_buf_init(&b);
	neg_offer(&n, &b);
	CU_ASSERT_EQUAL_FATAL(text_parse(b.data, b.len, &l, NULL, 0), 0);
	CU_ASSERT_EQUAL(text_find_duplicate(&l), -1);
	CU_ASSERT_STRING_EQUAL(text_get(&l, "HeaderDigest"), "None");
	CU_ASSERT_STRING_EQUAL(text_get(&l, "MaxRecvDataSegmentLength"), "262144");
	CU_ASSERT_STRING_EQUAL(text_get(&l, "MaxBurstLength"), "16776192");
	CU_ASSERT_STRING_EQUAL(text_get(&l, "FirstBurstLength"), "262144");
	CU_ASSERT_STRING_EQUAL(text_get(&l, "InitialR2T"), "No");
	CU_ASSERT_STRING_EQUAL(text_get(&l, "ErrorRecoveryLevel"), "0");
	CU_ASSERT_PTR_NULL(text_get(&l, "RDMAExtensions"));
	text_list_free(&l);
	/* Offers go out once. */
	text_buf_free(&b);
	neg_offer(&n, &b);
	CU_ASSERT_EQUAL(b.len, 0);
	text_buf_free(&b);

	initiator_ctx(&n, true, true);
	neg_offer(&n, &b);
	CU_ASSERT_EQUAL_FATAL(text_parse(b.data, b.len, &l, NULL, 0), 0);
	CU_ASSERT_EQUAL(l.count, 3); /* digests and MaxRecvDataSegmentLength */
	CU_ASSERT_PTR_NULL(text_get(&l, "MaxBurstLength"));
	text_list_free(&l);
	text_buf_free(&b);

	initiator_ctx(&n, false, false);
	neg_offer(&n, &b);
	CU_ASSERT_EQUAL_FATAL(text_parse(b.data, b.len, &l, NULL, 0), 0);
	CU_ASSERT_PTR_NULL(text_get(&l, "MaxBurstLength"));
	CU_ASSERT_PTR_NULL(text_get(&l, "ErrorRecoveryLevel"));
	CU_ASSERT_PTR_NOT_NULL(text_get(&l, "MaxRecvDataSegmentLength"));
	text_list_free(&l);
	text_buf_free(&b);
}

static void test_initiator_accept(void)
{
	struct neg_ctx n;
	struct text_buf b;

	text_buf_init(&b);
	initiator_ctx(&n, false, true);
	neg_offer(&n, &b);
	text_buf_free(&b);
	CU_ASSERT_EQUAL(accept_(&n, "MaxBurstLength", "1048576"), 0);
	CU_ASSERT_EQUAL(n.result.max_burst, 1048576);
	CU_ASSERT_EQUAL(accept_(&n, "MaxBurstLength", "1048576"), -EPROTO); /* twice */
	CU_ASSERT_EQUAL(accept_(&n, "FirstBurstLength", "524288"), -EPROTO); /* above offer */
	CU_ASSERT_EQUAL(accept_(&n, "HeaderDigest", "CRC32C"), -EPROTO);      /* not offered */
	CU_ASSERT_EQUAL(accept_(&n, "DataDigest", "None"), 0);
	CU_ASSERT_EQUAL(accept_(&n, "ImmediateData", "No"), 0);
	CU_ASSERT_FALSE(n.result.immediate_data);
	CU_ASSERT_EQUAL(accept_(&n, "InitialR2T", "Yes"), 0);
	CU_ASSERT_TRUE(n.result.initial_r2t);
	CU_ASSERT_EQUAL(accept_(&n, "DefaultTime2Wait", "2"), 0);
	CU_ASSERT_EQUAL(n.result.time2wait, 2);
	CU_ASSERT_EQUAL(accept_(&n, "MaxRecvDataSegmentLength", "65536"), 0);
	CU_ASSERT_EQUAL(n.result.peer_max_recv_dsl, 65536);
	CU_ASSERT_EQUAL(n.result.max_recv_dsl, 262144);
	CU_ASSERT_EQUAL(accept_(&n, "MaxConnections", "NotUnderstood"), 0);
	CU_ASSERT_EQUAL(n.result.max_connections, 1);
	CU_ASSERT_EQUAL(accept_(&n, "MaxOutstandingR2T", "2"), -EPROTO);
	CU_ASSERT_EQUAL(accept_(&n, "ErrorRecoveryLevel", "x"), -EPROTO);
	CU_ASSERT_EQUAL(accept_(&n, "TaskReporting", "RFC3720"), -EPROTO); /* never offered */
	CU_ASSERT_EQUAL(accept_(&n, "Unheard", "1"), -EPROTO);
	CU_ASSERT_EQUAL(accept_(&n, "iSERHelloRequired", "Yes"), -EPROTO);

	/* Boolean rules: AND cannot turn our No into Yes, OR cannot turn our Yes into No. */
	initiator_ctx(&n, false, true);
	n.local.immediate_data = false;
	n.local.initial_r2t = true;
	n.local.time2wait = 10;
	neg_offer(&n, &b);
	text_buf_free(&b);
	CU_ASSERT_EQUAL(accept_(&n, "ImmediateData", "Yes"), -EPROTO);
	CU_ASSERT_EQUAL(accept_(&n, "InitialR2T", "No"), -EPROTO);
	CU_ASSERT_EQUAL(accept_(&n, "DefaultTime2Wait", "9"), -EPROTO);
	CU_ASSERT_EQUAL(accept_(&n, "MaxRecvDataSegmentLength", "100"), -EPROTO);
}

/*
 * Run one whole exchange: initiator offers, target answers, initiator takes the
 * answers.  Returns what the initiator had to say back (0 bytes when settled).
 */
static uint32_t exchange(struct neg_ctx *ini, struct neg_ctx *tgt, char *last_key, size_t klen)
{
	struct text_buf offer, ans, back;
	struct text_list lo, la;
	uint32_t back_len;
	char why[128];

	text_buf_init(&offer);
	text_buf_init(&ans);
	text_buf_init(&back);
	last_key[0] = '\0';
	neg_offer(ini, &offer);
	CU_ASSERT_EQUAL_FATAL(text_parse(offer.data, offer.len, &lo, NULL, 0), 0);
	for (unsigned i = 0; i < lo.count; i++)
		CU_ASSERT_EQUAL(neg_respond(tgt, lo.pairs[i].key, lo.pairs[i].value, &ans, why,
					    sizeof(why)), 0);
	neg_offer(tgt, &ans);
	CU_ASSERT_EQUAL_FATAL(text_parse(ans.data, ans.len, &la, NULL, 0), 0);
	CU_ASSERT_EQUAL(text_find_duplicate(&la), -1);
	for (unsigned i = 0; i < la.count; i++) {
		uint32_t before = back.len;

		/* neg_respond hands answers to our own offers over to neg_accept. */
		CU_ASSERT_EQUAL(neg_respond(ini, la.pairs[i].key, la.pairs[i].value, &back, why,
					    sizeof(why)), 0);
		if (back.len != before)
			snprintf(last_key, klen, "%s", la.pairs[i].key);
	}
	back_len = back.len;
	text_list_free(&lo);
	text_list_free(&la);
	text_buf_free(&offer);
	text_buf_free(&ans);
	text_buf_free(&back);
	return back_len;
}

static void same_session(const struct neg_params *a, const struct neg_params *b)
{
	CU_ASSERT_EQUAL(a->header_digest, b->header_digest);
	CU_ASSERT_EQUAL(a->data_digest, b->data_digest);
	CU_ASSERT_EQUAL(a->max_connections, b->max_connections);
	CU_ASSERT_EQUAL(a->initial_r2t, b->initial_r2t);
	CU_ASSERT_EQUAL(a->immediate_data, b->immediate_data);
	CU_ASSERT_EQUAL(a->max_burst, b->max_burst);
	CU_ASSERT_EQUAL(a->first_burst, b->first_burst);
	CU_ASSERT_EQUAL(a->time2wait, b->time2wait);
	CU_ASSERT_EQUAL(a->time2retain, b->time2retain);
	CU_ASSERT_EQUAL(a->max_outstanding_r2t, b->max_outstanding_r2t);
	CU_ASSERT_EQUAL(a->data_pdu_in_order, b->data_pdu_in_order);
	CU_ASSERT_EQUAL(a->data_seq_in_order, b->data_seq_in_order);
	CU_ASSERT_EQUAL(a->erl, b->erl);
	CU_ASSERT_EQUAL(a->rdma_extensions, b->rdma_extensions);
	CU_ASSERT_EQUAL(a->target_recv_dsl, b->target_recv_dsl);
	CU_ASSERT_EQUAL(a->initiator_recv_dsl, b->initiator_recv_dsl);
	CU_ASSERT_EQUAL(a->iser_hello_required, b->iser_hello_required);
	CU_ASSERT_TRUE(a->first_burst <= a->max_burst);
}

static void test_round_trip_tcp(void)
{
	struct neg_ctx ini, tgt;
	char key[64];

	initiator_ctx(&ini, false, true);
	ini.local.header_digest = true;
	target_ctx(&tgt);
	tgt.local.header_digest = true;
	tgt.local.max_burst = 65536;
	CU_ASSERT_EQUAL(exchange(&ini, &tgt, key, sizeof(key)), 0);
	same_session(&ini.result, &tgt.result);
	CU_ASSERT_TRUE(ini.result.header_digest);
	CU_ASSERT_FALSE(ini.result.data_digest);
	CU_ASSERT_EQUAL(ini.result.max_burst, 65536);
	CU_ASSERT_EQUAL(ini.result.first_burst, 65536);
	CU_ASSERT_FALSE(ini.result.initial_r2t);
	/* Each side sends at most what the other declared. */
	CU_ASSERT_EQUAL(tgt.result.peer_max_recv_dsl, ini.local.max_recv_dsl);
	CU_ASSERT_EQUAL(ini.result.peer_max_recv_dsl, tgt.local.max_recv_dsl);
}

static void test_round_trip_iser(void)
{
	struct neg_ctx ini, tgt;
	char key[64];

	initiator_ctx(&ini, false, true);
	ini.local.rdma_extensions = true;
	ini.local.header_digest = true;
	ini.local.initiator_recv_dsl = 262144;
	ini.local.target_recv_dsl = 262144;
	ini.local.iser_hello_required = true;
	target_ctx(&tgt);
	tgt.local.rdma_extensions = true;
	tgt.local.target_recv_dsl = 65536;
	tgt.local.initiator_recv_dsl = 262144;
	CU_ASSERT_EQUAL(exchange(&ini, &tgt, key, sizeof(key)), 0);
	same_session(&ini.result, &tgt.result);
	CU_ASSERT_TRUE(tgt.result.rdma_extensions);
	CU_ASSERT_FALSE(tgt.result.header_digest);
	CU_ASSERT_EQUAL(tgt.result.target_recv_dsl, 65536);
	CU_ASSERT_EQUAL(tgt.result.initiator_recv_dsl, 262144);
	CU_ASSERT_TRUE(tgt.result.iser_hello_required);
	CU_ASSERT_EQUAL(tgt.result.peer_max_recv_dsl, 262144);
	CU_ASSERT_EQUAL(ini.result.peer_max_recv_dsl, 65536);

	/* A target on a TCP portal turns iSER down; the initiator sees RDMAExtensions=No. */
	initiator_ctx(&ini, false, true);
	ini.local.rdma_extensions = true;
	target_ctx(&tgt);
	CU_ASSERT_EQUAL(exchange(&ini, &tgt, key, sizeof(key)), 0);
	CU_ASSERT_FALSE(ini.result.rdma_extensions);
	CU_ASSERT_EQUAL(ini.result.peer_max_recv_dsl, 65536);
	CU_ASSERT_FALSE(tgt.result.rdma_extensions);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("text", NULL, NULL);
	CU_add_test(s, "parse", test_parse_basic);
	CU_add_test(s, "parse limits and errors", test_parse_errors);
	CU_add_test(s, "buffer", test_buf);
	CU_add_test(s, "numbers", test_u64);
	CU_add_test(s, "defaults", test_defaults);
	CU_add_test(s, "target login answers", test_target_login);
	CU_add_test(s, "target declarations", test_target_offer);
	CU_add_test(s, "digest lists", test_digests);
	CU_add_test(s, "bad values", test_bad_values);
	CU_add_test(s, "FirstBurstLength <= MaxBurstLength", test_burst_rule);
	CU_add_test(s, "protocol errors", test_protocol_errors);
	CU_add_test(s, "unknown and obsolete keys", test_unknown_and_obsolete);
	CU_add_test(s, "discovery session", test_discovery);
	CU_add_test(s, "iSER keys (target)", test_iser_target);
	CU_add_test(s, "initiator offers", test_initiator_offer);
	CU_add_test(s, "initiator accepts", test_initiator_accept);
	CU_add_test(s, "round trip TCP", test_round_trip_tcp);
	CU_add_test(s, "round trip iSER", test_round_trip_iser);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	int rc = unit_run();
	text_buf_free(&rsp);
	return rc;
}
