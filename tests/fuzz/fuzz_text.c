/*
 * Text segments and negotiation.  The input is a header (HDR_LEN bytes: a
 * mode byte, then parameter bytes for each side) then a key=value segment:
 *  - text_parse() of the segment, with the list's invariants;
 *  - a target and an initiator negotiation context (local limits drawn
 *    from the header, within what the configuration allows) fed the parsed
 *    pairs through neg_respond()/neg_accept(), then checked for results a
 *    session could not live with;
 *  - a clean initiator <-> target exchange with those limits, after which
 *    both sides must agree on every negotiated value.
 */
#include <errno.h>
#include <string.h>

#include "common/proto/text.h"
#include "fuzz.h"

/* mode byte, then the target's and the initiator's local parameters */
#define PARAMS_LEN 45
#define HDR_LEN (1 + 2 * PARAMS_LEN)
#define MAX_DSL 0xffffffu

static void draw_params(struct fuzz_in *in, struct neg_params *p)
{
	uint8_t bits = fuzz_u8(in);

	neg_params_default(p);
	p->header_digest = bits & 1;
	p->data_digest = bits & 2;
	p->initial_r2t = bits & 4;
	p->immediate_data = bits & 8;
	p->rdma_extensions = bits & 16;
	p->iser_hello_required = bits & 32;
	p->max_recv_dsl = fuzz_range(in, 512, MAX_DSL);
	p->max_burst = fuzz_range(in, 512, MAX_DSL);
	p->first_burst = fuzz_range(in, 512, MAX_DSL);
	p->max_outstanding_r2t = fuzz_range(in, 1, 65535);
	p->target_recv_dsl = fuzz_range(in, 512, MAX_DSL);
	p->initiator_recv_dsl = fuzz_range(in, 512, MAX_DSL);
	p->time2wait = fuzz_range(in, 0, 3600);
	p->time2retain = fuzz_range(in, 0, 3600);
	p->max_outstanding_unexpected_pdus = (bits & 64) ? 0 : fuzz_range(in, 2, 4096);
}

static void check_result(const struct neg_ctx *n)
{
	const struct neg_params *r = &n->result;

	FUZZ_CHECK(r->first_burst <= r->max_burst, "FirstBurstLength %u > MaxBurstLength %u",
		   r->first_burst, r->max_burst);
	FUZZ_CHECK(r->max_recv_dsl >= 512 && r->max_recv_dsl <= MAX_DSL, "max_recv_dsl %u", r->max_recv_dsl);
	FUZZ_CHECK(r->max_recv_dsl == n->local.max_recv_dsl, "our declaration %u became %u",
		   n->local.max_recv_dsl, r->max_recv_dsl);
	FUZZ_CHECK(r->peer_max_recv_dsl >= 512 && r->peer_max_recv_dsl <= MAX_DSL,
		   "peer_max_recv_dsl %u", r->peer_max_recv_dsl);
	FUZZ_CHECK(r->max_burst >= 512 && r->max_burst <= MAX_DSL, "max_burst %u", r->max_burst);
	FUZZ_CHECK(r->first_burst >= 512, "first_burst %u", r->first_burst);
	FUZZ_CHECK(r->max_connections >= 1 && r->max_connections <= 65535, "max_connections %u",
		   r->max_connections);
	FUZZ_CHECK(r->max_outstanding_r2t >= 1 && r->max_outstanding_r2t <= 65535,
		   "max_outstanding_r2t %u", r->max_outstanding_r2t);
	FUZZ_CHECK(r->erl <= 2, "erl %u", r->erl);
	FUZZ_CHECK(r->time2wait <= 3600 && r->time2retain <= 3600, "time2wait %u time2retain %u",
		   r->time2wait, r->time2retain);
	FUZZ_CHECK(r->target_recv_dsl >= 512 && r->target_recv_dsl <= MAX_DSL, "target_recv_dsl %u",
		   r->target_recv_dsl);
	FUZZ_CHECK(r->initiator_recv_dsl >= 512 && r->initiator_recv_dsl <= MAX_DSL,
		   "initiator_recv_dsl %u", r->initiator_recv_dsl);
	FUZZ_CHECK(r->max_outstanding_unexpected_pdus != 1, "MaxOutstandingUnexpectedPDUs=1");
	/* We never agree to more than we asked for. */
	FUZZ_CHECK(r->max_burst <= n->local.max_burst || r->max_burst == 262144,
		   "max_burst %u above our %u", r->max_burst, n->local.max_burst);
	FUZZ_CHECK(!r->header_digest || n->local.header_digest, "HeaderDigest on against our wish");
	FUZZ_CHECK(!r->data_digest || n->local.data_digest, "DataDigest on against our wish");
	if (r->rdma_extensions)
		FUZZ_CHECK(!r->header_digest && !r->data_digest, "digests on under iSER");
}

/* What we send must itself be a valid text segment. */
static void check_sendable(const struct text_buf *b)
{
	struct text_list l;
	char why[128];

	FUZZ_CHECK(b->len <= TEXT_MAX_TOTAL, "%u bytes built", b->len);
	if (b->oom || !b->len)
		return;
	FUZZ_CHECK(b->data[b->len - 1] == '\0', "built segment not NUL-terminated");
	FUZZ_CHECK(text_parse(b->data, b->len, &l, why, sizeof(why)) == 0, "own output unparsable: %s", why);
	text_list_free(&l);
}

static void check_list(const struct text_list *l, const uint8_t *data, uint32_t len)
{
	FUZZ_CHECK(l->count <= TEXT_MAX_PAIRS, "%u pairs", l->count);
	for (unsigned i = 0; i < l->count; i++) {
		const char *k = l->pairs[i].key, *v = l->pairs[i].value;
		size_t kl = strlen(k), vl = strlen(v);

		FUZZ_CHECK(kl >= 1 && kl <= TEXT_MAX_KEY_LEN, "key length %zu", kl);
		FUZZ_CHECK(vl <= TEXT_MAX_VALUE_LEN, "value length %zu", vl);
		FUZZ_CHECK(k >= l->storage && v + vl <= l->storage + len, "pair outside storage");
		FUZZ_CHECK(memcmp(data + (k - l->storage), k, kl) == 0, "key differs from input");
	}
	if (l->count) {
		FUZZ_CHECK(text_get(l, l->pairs[0].key) == l->pairs[0].value, "text_get misses first key");
		int d = text_find_duplicate(l);

		FUZZ_CHECK(d == -1 || (d > 0 && (unsigned)d < l->count), "duplicate index %d", d);
	}
}

/* Hostile peer: every pair of the input goes to one side's engine. */
static void feed(const struct text_list *l, enum neg_role role, const struct neg_params *local,
		 uint8_t mode)
{
	struct neg_ctx n;
	struct text_buf rsp;
	char why[64];

	neg_init(&n, role, local);
	n.discovery = mode & 1;
	n.leading = !(mode & 2);
	text_buf_init(&rsp);
	if (role == NEG_INITIATOR || (mode & 4))
		neg_offer(&n, &rsp); /* an initiator offers first; a target may declare early */
	for (unsigned i = 0; i < l->count; i++) {
		const char *k = l->pairs[i].key, *v = l->pairs[i].value;
		int r;

		if (!neg_is_operational_key(k))
			continue;
		if (role == NEG_INITIATOR && (mode & 8))
			r = neg_accept(&n, k, v, why, sizeof(why));
		else
			r = neg_respond(&n, k, v, &rsp, why, sizeof(why));
		FUZZ_CHECK(r == 0 || r == -EPROTO || r == -EINVAL, "returned %d", r);
		if (r) {
			FUZZ_CHECK(memchr(why, '\0', sizeof(why)) && why[0], "no reason for %d", r);
			break; /* the login fails here */
		}
	}
	neg_offer(&n, &rsp);
	check_result(&n);
	check_sendable(&rsp);
	text_buf_free(&rsp);
}

/* Feed every pair of buf to one side; 0 or the first error. */
static int deliver(struct neg_ctx *to, const struct text_buf *buf, struct text_buf *rsp)
{
	struct text_list l;
	char why[64];
	int r;

	if (!buf->len)
		return 0;
	r = text_parse(buf->data, buf->len, &l, why, sizeof(why));
	FUZZ_CHECK(r == 0, "engine output unparsable: %s", why);
	for (unsigned i = 0; i < l.count && !r; i++) {
		r = neg_respond(to, l.pairs[i].key, l.pairs[i].value, rsp, why, sizeof(why));
		if (r)
			fprintf(stderr, "negotiation between our own engines failed: %s\n", why);
	}
	text_list_free(&l);
	return r;
}

/* Two well-behaved engines must converge on the same values. */
static void loopback(const struct neg_params *tl, const struct neg_params *il, uint8_t mode)
{
	struct neg_ctx t, i;
	struct text_buf to_target, to_initiator;
	int r, round;

	neg_init(&t, NEG_TARGET, tl);
	neg_init(&i, NEG_INITIATOR, il);
	t.discovery = i.discovery = mode & 1;
	text_buf_init(&to_target);
	neg_offer(&i, &to_target);
	/* Exchange until neither side has anything left to say, as a login does. */
	for (round = 0; round < 8 && to_target.len; round++) {
		check_sendable(&to_target);
		text_buf_init(&to_initiator);
		r = deliver(&t, &to_target, &to_initiator);
		FUZZ_CHECK(r == 0, "target refused our own initiator (round %d)", round);
		neg_offer(&t, &to_initiator);
		check_sendable(&to_initiator);
		text_buf_free(&to_target);
		r = deliver(&i, &to_initiator, &to_target);
		FUZZ_CHECK(r == 0, "initiator refused our own target (round %d)", round);
		neg_offer(&i, &to_target);
		text_buf_free(&to_initiator);
	}
	FUZZ_CHECK(round < 8, "negotiation does not settle");
	text_buf_free(&to_target);
	check_result(&t);
	check_result(&i);

	FUZZ_CHECK(t.result.peer_max_recv_dsl == i.local.max_recv_dsl, "target thinks initiator takes %u, it said %u",
		   t.result.peer_max_recv_dsl, i.local.max_recv_dsl);
	FUZZ_CHECK(i.result.peer_max_recv_dsl == t.local.max_recv_dsl, "initiator thinks target takes %u, it said %u",
		   i.result.peer_max_recv_dsl, t.local.max_recv_dsl);
#define SAME(f) FUZZ_CHECK(t.result.f == i.result.f, #f ": target %u initiator %u", \
			   (unsigned)t.result.f, (unsigned)i.result.f)
	SAME(header_digest);
	SAME(data_digest);
	SAME(rdma_extensions);
	if (!t.discovery) {
		SAME(max_burst);
		SAME(first_burst);
		SAME(initial_r2t);
		SAME(immediate_data);
		SAME(max_connections);
		SAME(max_outstanding_r2t);
		SAME(erl);
		SAME(time2wait);
		SAME(time2retain);
		SAME(data_pdu_in_order);
		SAME(data_seq_in_order);
	}
#undef SAME
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t hdr = size < HDR_LEN ? size : HDR_LEN;
	struct fuzz_in tin = { data + (hdr ? 1 : 0), hdr > PARAMS_LEN ? PARAMS_LEN : (hdr ? hdr - 1 : 0) };
	struct fuzz_in iin = { data + 1 + PARAMS_LEN, hdr > 1 + PARAMS_LEN ? hdr - 1 - PARAMS_LEN : 0 };
	struct neg_params tl, il;
	struct text_list *l = malloc(sizeof(*l));
	char why[128];
	uint8_t mode = hdr ? data[0] : 0;
	uint32_t len = (uint32_t)(size - hdr);
	int r;

	draw_params(&tin, &tl);
	draw_params(&iin, &il);
	loopback(&tl, &il, mode);

	r = text_parse(data + hdr, len, l, why, sizeof(why));
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -E2BIG, "text_parse returned %d", r);
	if (r == 0) {
		check_list(l, data + hdr, len);
		feed(l, NEG_TARGET, &tl, mode);
		feed(l, NEG_INITIATOR, &il, mode);
		text_list_free(l);
	} else {
		FUZZ_CHECK(why[0] && memchr(why, '\0', sizeof(why)), "no reason");
		FUZZ_CHECK(l->storage == NULL && l->count == 0, "list not freed on error");
	}
	free(l);
	return 0;
}
