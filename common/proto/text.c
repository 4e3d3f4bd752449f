/* iSCSI text key=value parsing and building (RFC 7143 sec. 6). */
#include "common/proto/text.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int text_fail(int err, char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int text_fail(int err, char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return err;
}

/* RFC 7143 sec. 6.1 key-name characters, plus '#' for "X#" vendor keys. */
static bool key_char_ok(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '-' || c == '+' || c == '@' || c == '_' || c == '#';
}

static bool value_is_binary(const char *v)
{
	return v[0] == '0' && (v[1] == 'x' || v[1] == 'X' || v[1] == 'b' || v[1] == 'B');
}

int text_parse(const uint8_t *data, uint32_t len, struct text_list *out, char *why, size_t whylen)
{
	char *p, *end;
	int err;

	memset(out, 0, sizeof(*out));
	if (len > TEXT_MAX_TOTAL)
		return text_fail(-E2BIG, why, whylen, "text data of %u bytes exceeds %u", len,
				 TEXT_MAX_TOTAL);
	out->storage = malloc((size_t)len + 1);
	if (!out->storage)
		return text_fail(-ENOMEM, why, whylen, "out of memory");
	if (len)
		memcpy(out->storage, data, len);
	out->storage[len] = '\0';
	p = out->storage;
	end = out->storage + len;

	while (p < end) {
		size_t n = strlen(p), klen, vlen;
		char *eq;

		if (n == 0) { /* padding or an empty string between pairs */
			p++;
			continue;
		}
		eq = memchr(p, '=', n);
		if (!eq) {
			err = text_fail(-EINVAL, why, whylen, "pair \"%.32s\" has no '='", p);
			goto bad;
		}
		klen = (size_t)(eq - p);
		vlen = n - klen - 1;
		if (klen == 0) {
			err = text_fail(-EINVAL, why, whylen, "empty key");
			goto bad;
		}
		if (klen > TEXT_MAX_KEY_LEN) {
			err = text_fail(-EINVAL, why, whylen, "key \"%.32s...\" longer than %d bytes",
					p, TEXT_MAX_KEY_LEN);
			goto bad;
		}
		for (size_t i = 0; i < klen; i++) {
			if (!key_char_ok(p[i])) {
				err = text_fail(-EINVAL, why, whylen, "bad character 0x%02x in key",
						(unsigned char)p[i]);
				goto bad;
			}
		}
		*eq = '\0';
		if (vlen > (value_is_binary(eq + 1) ? TEXT_MAX_VALUE_LEN : TEXT_MAX_SIMPLE_VALUE_LEN)) {
			err = text_fail(-EINVAL, why, whylen, "value of %s is %zu bytes long", p, vlen);
			goto bad;
		}
		if (out->count == TEXT_MAX_PAIRS) {
			err = text_fail(-E2BIG, why, whylen, "more than %d keys", TEXT_MAX_PAIRS);
			goto bad;
		}
		out->pairs[out->count].key = p;
		out->pairs[out->count].value = eq + 1;
		out->count++;
		p += n + 1;
	}
	return 0;
bad:
	text_list_free(out);
	return err;
}

void text_list_free(struct text_list *l)
{
	free(l->storage);
	l->storage = NULL;
	l->count = 0;
}

const char *text_get(const struct text_list *l, const char *key)
{
	for (unsigned i = 0; i < l->count; i++)
		if (strcmp(l->pairs[i].key, key) == 0)
			return l->pairs[i].value;
	return NULL;
}

int text_find_duplicate(const struct text_list *l)
{
	for (unsigned i = 1; i < l->count; i++)
		for (unsigned j = 0; j < i; j++)
			if (strcmp(l->pairs[i].key, l->pairs[j].key) == 0)
				return (int)i;
	return -1;
}

void text_buf_init(struct text_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void text_buf_free(struct text_buf *b)
{
	free(b->data);
	text_buf_init(b);
}

static bool text_reserve(struct text_buf *b, size_t more)
{
	size_t need, cap;
	uint8_t *d;

	if (b->oom)
		return false;
	need = (size_t)b->len + more;
	if (need > TEXT_MAX_TOTAL) {
		b->oom = true;
		return false;
	}
	if (need <= b->cap)
		return true;
	cap = b->cap ? b->cap : 256;
	while (cap < need)
		cap *= 2;
	d = realloc(b->data, cap);
	if (!d) {
		b->oom = true;
		return false;
	}
	b->data = d;
	b->cap = (uint32_t)cap;
	return true;
}

void text_append(struct text_buf *b, const uint8_t *data, uint32_t len)
{
	if (!len || !text_reserve(b, len))
		return;
	memcpy(b->data + b->len, data, len);
	b->len += len;
}

void text_add(struct text_buf *b, const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value);

	if (!text_reserve(b, kl + vl + 2))
		return;
	memcpy(b->data + b->len, key, kl);
	b->data[b->len + kl] = '=';
	memcpy(b->data + b->len + kl + 1, value, vl);
	b->data[b->len + kl + 1 + vl] = '\0';
	b->len += (uint32_t)(kl + vl + 2);
}

void text_addf(struct text_buf *b, const char *key, const char *fmt, ...)
{
	char small[256], *v = small;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->oom = true;
		return;
	}
	if ((size_t)n >= sizeof(small)) {
		v = malloc((size_t)n + 1);
		if (!v) {
			b->oom = true;
			return;
		}
		va_start(ap, fmt);
		vsnprintf(v, (size_t)n + 1, fmt, ap);
		va_end(ap);
	}
	text_add(b, key, v);
	if (v != small)
		free(v);
}

bool text_parse_u64(const char *s, uint64_t *v)
{
	uint64_t r = 0;

	if (!s || !*s)
		return false;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		s += 2;
		if (!*s)
			return false;
		for (; *s; s++) {
			unsigned d;

			if (*s >= '0' && *s <= '9')
				d = (unsigned)(*s - '0');
			else if (*s >= 'a' && *s <= 'f')
				d = (unsigned)(*s - 'a' + 10);
			else if (*s >= 'A' && *s <= 'F')
				d = (unsigned)(*s - 'A' + 10);
			else
				return false;
			if (r >> 60)
				return false;
			r = r << 4 | d;
		}
	} else {
		for (; *s; s++) {
			unsigned d;

			if (*s < '0' || *s > '9')
				return false;
			d = (unsigned)(*s - '0');
			if (r > (UINT64_MAX - d) / 10)
				return false;
			r = r * 10 + d;
		}
	}
	*v = r;
	return true;
}

/*
 * Negotiation engine.  One table row per key RFC 7143 sec. 13 and RFC 7145
 * sec. 6 define; the row says how the result is computed and when the key
 * does not apply.
 */
enum neg_kind {
	NK_DIGEST,   /* list: first of the offerer's values we accept */
	NK_TASKREP,  /* list: we only do RFC3720 task reporting */
	NK_AND, NK_OR,
	NK_MIN, NK_MAX,
	NK_DECL,     /* declarative number: each side states its own */
	NK_DECL_BOOL,
	NK_MARKER,   /* obsolete IFMarker/OFMarker: markers are always off */
	NK_MARKINT,  /* obsolete IFMarkInt/OFMarkInt */
};

#define NF_LO 0x01        /* leading connection only */
#define NF_DISC_IRR 0x02  /* Irrelevant when SessionType=Discovery */
#define NF_ISER 0x04      /* Irrelevant when RDMAExtensions=No */
#define NF_INIT_ONLY 0x08 /* only an initiator sends it */
#define NF_BOOL 0x10      /* the neg_params field is a bool */
#define NF_NOT_ONE 0x20   /* 1 is outside the range (MaxOutstandingUnexpectedPDUs) */

struct neg_key {
	const char *name;
	uint8_t kind, flags;
	uint32_t lo, hi;
	int res_off;   /* field in result (-1: none) */
	int loc_off;   /* field in local holding our value */
};

#define NP(f) (int)offsetof(struct neg_params, f)
#define MAX_DSL 0xffffffu

enum {
	K_HEADER_DIGEST, K_DATA_DIGEST, K_MAX_CONN, K_INITIAL_R2T, K_IMMEDIATE, K_MRDSL,
	K_MAX_BURST, K_FIRST_BURST, K_T2W, K_T2R, K_MAX_R2T, K_PDU_ORDER, K_SEQ_ORDER,
	K_ERL, K_TASK_REPORTING, K_IFMARKER, K_OFMARKER, K_IFMARKINT, K_OFMARKINT,
	K_RDMA, K_TRDSL, K_IRDSL, K_MOUP, K_HELLO, K_COUNT
};

static const struct neg_key neg_keys[K_COUNT] = {
	[K_HEADER_DIGEST] = { "HeaderDigest", NK_DIGEST, NF_BOOL, 0, 0, NP(header_digest), NP(header_digest) },
	[K_DATA_DIGEST] = { "DataDigest", NK_DIGEST, NF_BOOL, 0, 0, NP(data_digest), NP(data_digest) },
	[K_MAX_CONN] = { "MaxConnections", NK_MIN, NF_LO | NF_DISC_IRR, 1, 65535,
			 NP(max_connections), NP(max_connections) },
	[K_INITIAL_R2T] = { "InitialR2T", NK_OR, NF_LO | NF_DISC_IRR | NF_BOOL, 0, 0,
			    NP(initial_r2t), NP(initial_r2t) },
	[K_IMMEDIATE] = { "ImmediateData", NK_AND, NF_LO | NF_DISC_IRR | NF_BOOL, 0, 0,
			  NP(immediate_data), NP(immediate_data) },
	[K_MRDSL] = { "MaxRecvDataSegmentLength", NK_DECL, 0, 512, MAX_DSL,
		      NP(peer_max_recv_dsl), NP(max_recv_dsl) },
	[K_MAX_BURST] = { "MaxBurstLength", NK_MIN, NF_LO | NF_DISC_IRR, 512, MAX_DSL,
			  NP(max_burst), NP(max_burst) },
	[K_FIRST_BURST] = { "FirstBurstLength", NK_MIN, NF_LO | NF_DISC_IRR, 512, MAX_DSL,
			    NP(first_burst), NP(first_burst) },
	[K_T2W] = { "DefaultTime2Wait", NK_MAX, NF_LO, 0, 3600, NP(time2wait), NP(time2wait) },
	[K_T2R] = { "DefaultTime2Retain", NK_MIN, NF_LO, 0, 3600, NP(time2retain), NP(time2retain) },
	[K_MAX_R2T] = { "MaxOutstandingR2T", NK_MIN, NF_LO | NF_DISC_IRR, 1, 65535,
			NP(max_outstanding_r2t), NP(max_outstanding_r2t) },
	[K_PDU_ORDER] = { "DataPDUInOrder", NK_OR, NF_LO | NF_DISC_IRR | NF_BOOL, 0, 0,
			  NP(data_pdu_in_order), NP(data_pdu_in_order) },
	[K_SEQ_ORDER] = { "DataSequenceInOrder", NK_OR, NF_LO | NF_DISC_IRR | NF_BOOL, 0, 0,
			  NP(data_seq_in_order), NP(data_seq_in_order) },
	[K_ERL] = { "ErrorRecoveryLevel", NK_MIN, NF_LO, 0, 2, NP(erl), NP(erl) },
	[K_TASK_REPORTING] = { "TaskReporting", NK_TASKREP, NF_LO | NF_DISC_IRR, 0, 0, -1, -1 },
	[K_IFMARKER] = { "IFMarker", NK_MARKER, 0, 0, 0, -1, -1 },
	[K_OFMARKER] = { "OFMarker", NK_MARKER, 0, 0, 0, -1, -1 },
	[K_IFMARKINT] = { "IFMarkInt", NK_MARKINT, 0, 0, 0, -1, -1 },
	[K_OFMARKINT] = { "OFMarkInt", NK_MARKINT, 0, 0, 0, -1, -1 },
	[K_RDMA] = { "RDMAExtensions", NK_AND, NF_LO | NF_BOOL, 0, 0,
		     NP(rdma_extensions), NP(rdma_extensions) },
	[K_TRDSL] = { "TargetRecvDataSegmentLength", NK_MIN, NF_ISER, 512, MAX_DSL,
		      NP(target_recv_dsl), NP(target_recv_dsl) },
	[K_IRDSL] = { "InitiatorRecvDataSegmentLength", NK_MIN, NF_ISER, 512, MAX_DSL,
		      NP(initiator_recv_dsl), NP(initiator_recv_dsl) },
	[K_MOUP] = { "MaxOutstandingUnexpectedPDUs", NK_DECL, NF_LO | NF_ISER | NF_NOT_ONE, 0, UINT32_MAX,
		     NP(max_outstanding_unexpected_pdus), NP(max_outstanding_unexpected_pdus) },
	[K_HELLO] = { "iSERHelloRequired", NK_DECL_BOOL, NF_LO | NF_ISER | NF_INIT_ONLY | NF_BOOL, 0, 0,
		      NP(iser_hello_required), NP(iser_hello_required) },
};

_Static_assert(K_COUNT <= 64, "seen/sent masks are 64 bits");

static uint32_t pget(const struct neg_params *p, const struct neg_key *k, int off)
{
	const char *base = (const char *)p + off;
	uint32_t v;

	if (k->flags & NF_BOOL)
		return *(const bool *)base;
	memcpy(&v, base, sizeof(v));
	return v;
}

static void pset(struct neg_params *p, const struct neg_key *k, uint32_t v)
{
	char *base = (char *)p + k->res_off;

	if (k->flags & NF_BOOL)
		*(bool *)base = v != 0;
	else
		memcpy(base, &v, sizeof(v));
}

void neg_params_default(struct neg_params *p)
{
	memset(p, 0, sizeof(*p));
	p->header_digest = false;
	p->data_digest = false;
	p->max_connections = 1;
	p->initial_r2t = true;
	p->immediate_data = true;
	p->max_recv_dsl = 8192;
	p->peer_max_recv_dsl = 8192;
	p->max_burst = 262144;
	p->first_burst = 65536;
	p->time2wait = 2;
	p->time2retain = 20;
	p->max_outstanding_r2t = 1;
	p->data_pdu_in_order = true;
	p->data_seq_in_order = true;
	p->erl = 0;
	p->rdma_extensions = false;
	p->target_recv_dsl = 8192;
	p->initiator_recv_dsl = 8192;
	p->max_outstanding_unexpected_pdus = 0;
	p->iser_hello_required = false;
}

void neg_init(struct neg_ctx *n, enum neg_role role, const struct neg_params *local)
{
	memset(n, 0, sizeof(*n));
	n->role = role;
	n->leading = true;
	if (local)
		n->local = *local;
	else
		neg_params_default(&n->local);
	neg_params_default(&n->result);
	/* Our own declaration is in force as soon as it is sent. */
	n->result.max_recv_dsl = n->local.max_recv_dsl;
}

static int find_key(const char *key)
{
	for (int i = 0; i < K_COUNT; i++)
		if (strcmp(neg_keys[i].name, key) == 0)
			return i;
	return -1;
}

static bool is_login_key(const char *key)
{
	static const char *const names[] = {
		"InitiatorName", "InitiatorAlias", "TargetName", "TargetAlias", "TargetAddress",
		"TargetPortalGroupTag", "SessionType", "AuthMethod", "SendTargets",
	};
	static const char *const prefixes[] = { "CHAP_", "SRP_", "KRB_", "SPKM_" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(key, names[i]) == 0)
			return true;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(key, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

bool neg_is_operational_key(const char *key)
{
	return !is_login_key(key);
}

static bool is_reserved_value(const char *v)
{
	return strcmp(v, "NotUnderstood") == 0 || strcmp(v, "Irrelevant") == 0 ||
	       strcmp(v, "Reject") == 0;
}

static bool parse_bool(const char *v, bool *b)
{
	if (strcmp(v, "Yes") == 0)
		*b = true;
	else if (strcmp(v, "No") == 0)
		*b = false;
	else
		return false;
	return true;
}

static bool parse_num(const struct neg_key *k, const char *v, uint32_t *out)
{
	uint64_t x;

	if (!text_parse_u64(v, &x) || x < k->lo || x > k->hi)
		return false;
	if ((k->flags & NF_NOT_ONE) && x == 1)
		return false;
	*out = (uint32_t)x;
	return true;
}

/* Is RDMAExtensions=Yes in force, or, before it is settled, what we want? */
static bool rdma_on(const struct neg_ctx *n)
{
	if ((n->seen | n->sent) & (1ull << K_RDMA))
		return n->result.rdma_extensions;
	return n->local.rdma_extensions;
}

/* Keep cross-key rules true whatever order the keys came in. */
static void neg_fixup(struct neg_ctx *n)
{
	if (n->result.first_burst > n->result.max_burst)
		n->result.first_burst = n->result.max_burst;
	if (n->result.rdma_extensions) {
		/* RFC 7145 sec. 6: iSER carries no iSCSI digests. */
		n->result.header_digest = false;
		n->result.data_digest = false;
	}
}

static bool list_has(const char *list, const char *item)
{
	size_t il = strlen(item);

	for (const char *p = list; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);

		if (l == il && memcmp(p, item, l) == 0)
			return true;
		if (!c)
			break;
		p = c + 1;
	}
	return false;
}

/* First item of the offered list we accept, or NULL. */
static const char *pick_digest(const struct neg_ctx *n, const struct neg_key *k, const char *offer)
{
	bool crc_ok = pget(&n->local, k, k->loc_off) && !rdma_on(n);

	for (const char *p = offer; *p;) {
		const char *c = strchr(p, ',');
		size_t l = c ? (size_t)(c - p) : strlen(p);

		if (l == 6 && memcmp(p, "CRC32C", 6) == 0 && crc_ok)
			return "CRC32C";
		if (l == 4 && memcmp(p, "None", 4) == 0)
			return "None";
		if (!c)
			break;
		p = c + 1;
	}
	return NULL;
}

static int neg_fail(char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int neg_fail(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return -EPROTO;
}

static uint32_t first_burst_cap(const struct neg_ctx *n)
{
	uint32_t cap = n->local.max_burst;

	if ((n->seen | n->sent) & (1ull << K_MAX_BURST) && n->result.max_burst < cap)
		cap = n->result.max_burst;
	return cap;
}

int neg_respond(struct neg_ctx *n, const char *key, const char *value,
		struct text_buf *rsp, char *why, size_t whylen)
{
	int idx = find_key(key);
	const struct neg_key *k;
	uint64_t bit;
	uint32_t v, mine;
	bool b;

	if (idx < 0) {
		if (is_login_key(key)) {
			if (why && whylen)
				snprintf(why, whylen, "%s is not an operational key", key);
			return -EINVAL;
		}
		/* Unknown keys, including X- and X# vendor keys. */
		text_add(rsp, key, "NotUnderstood");
		return 0;
	}
	k = &neg_keys[idx];
	bit = 1ull << idx;

	/* The peer answering something we offered (declarations need no answer). */
	if ((n->sent & bit) && !(n->seen & bit) && k->kind != NK_DECL && k->kind != NK_DECL_BOOL)
		return neg_accept(n, key, value, why, whylen);

	if (n->seen & bit)
		return neg_fail(why, whylen, "key %s sent twice", key);
	n->seen |= bit;
	if ((k->flags & NF_LO) && !n->leading)
		return neg_fail(why, whylen, "leading-only key %s on a non-leading connection", key);
	if (is_reserved_value(value))
		return 0; /* not an offer: nothing to answer, the default stays */
	if ((k->flags & NF_INIT_ONLY) && n->role == NEG_INITIATOR)
		return neg_fail(why, whylen, "%s may only be sent by an initiator", key);
	if ((n->discovery && (k->flags & NF_DISC_IRR)) || ((k->flags & NF_ISER) && !rdma_on(n))) {
		text_add(rsp, key, "Irrelevant");
		return 0;
	}

	switch (k->kind) {
	case NK_DIGEST: {
		const char *pick = pick_digest(n, k, value);

		text_add(rsp, key, pick ? pick : "Reject");
		pset(&n->result, k, pick && strcmp(pick, "CRC32C") == 0);
		break;
	}
	case NK_TASKREP:
		text_add(rsp, key, list_has(value, "RFC3720") ? "RFC3720" : "Reject");
		break;
	case NK_AND:
	case NK_OR:
		if (!parse_bool(value, &b)) {
			text_add(rsp, key, "Reject");
			break;
		}
		mine = pget(&n->local, k, k->loc_off);
		b = k->kind == NK_AND ? (b && mine) : (b || mine);
		pset(&n->result, k, b);
		text_add(rsp, key, b ? "Yes" : "No");
		break;
	case NK_MIN:
	case NK_MAX:
		if (!parse_num(k, value, &v)) {
			text_add(rsp, key, "Reject");
			break;
		}
		mine = pget(&n->local, k, k->loc_off);
		if (idx == K_FIRST_BURST && mine > first_burst_cap(n))
			mine = first_burst_cap(n);
		if (k->kind == NK_MIN)
			v = v < mine ? v : mine;
		else
			v = v > mine ? v : mine;
		pset(&n->result, k, v);
		text_addf(rsp, key, "%u", v);
		break;
	case NK_DECL:
		/* A declaration has no fallback to negotiate: a bad one fails the login. */
		if (!parse_num(k, value, &v))
			return neg_fail(why, whylen, "%s=%.32s out of range", key, value);
		pset(&n->result, k, v);
		/*
		 * Declare our own value right away.  RFC 7145 calls
		 * MaxRecvDataSegmentLength irrelevant under iSER, but Linux iSER
		 * initiators size immediate data from it, so it is declared anyway.
		 */
		if (!(n->sent & bit)) {
			text_addf(rsp, key, "%u", pget(&n->local, k, k->loc_off));
			n->sent |= bit;
		}
		break;
	case NK_DECL_BOOL:
		if (!parse_bool(value, &b))
			return neg_fail(why, whylen, "%s=%.32s is not Yes/No", key, value);
		pset(&n->result, k, b);
		break;
	case NK_MARKER:
		/* RFC 7143 sec. 13.25 allows "No" in place of Reject; markers stay off. */
		text_add(rsp, key, "No");
		break;
	case NK_MARKINT:
		/* RFC 7143 sec. 13.25: MUST answer Reject (never NotUnderstood). */
		text_add(rsp, key, "Reject");
		break;
	}
	neg_fixup(n);
	return 0;
}

static void offer_num(struct neg_ctx *n, struct text_buf *out, int idx)
{
	const struct neg_key *k = &neg_keys[idx];
	/* The peer's declaration does not replace ours; its offer does get our answer. */
	uint64_t done = k->kind == NK_DECL ? n->sent : n->sent | n->seen;

	if (done & (1ull << idx))
		return;
	text_addf(out, k->name, "%u", pget(&n->local, k, k->loc_off));
	n->sent |= 1ull << idx;
}

static void offer_bool(struct neg_ctx *n, struct text_buf *out, int idx)
{
	const struct neg_key *k = &neg_keys[idx];

	if ((n->sent | n->seen) & (1ull << idx))
		return;
	text_add(out, k->name, pget(&n->local, k, k->loc_off) ? "Yes" : "No");
	n->sent |= 1ull << idx;
}

static void offer_digest(struct neg_ctx *n, struct text_buf *out, int idx)
{
	const struct neg_key *k = &neg_keys[idx];

	if ((n->sent | n->seen) & (1ull << idx))
		return;
	text_add(out, k->name, pget(&n->local, k, k->loc_off) ? "CRC32C,None" : "None");
	n->sent |= 1ull << idx;
}

void neg_offer(struct neg_ctx *n, struct text_buf *out)
{
	bool rdma = rdma_on(n);

	if (n->role == NEG_TARGET) {
		offer_num(n, out, K_MRDSL);
		if (rdma && n->result.rdma_extensions && n->local.max_outstanding_unexpected_pdus)
			offer_num(n, out, K_MOUP);
		return;
	}

	if (!rdma) {
		offer_digest(n, out, K_HEADER_DIGEST);
		offer_digest(n, out, K_DATA_DIGEST);
	}
	offer_num(n, out, K_MRDSL);
	if (n->leading && n->local.rdma_extensions)
		offer_bool(n, out, K_RDMA);
	if (rdma) {
		offer_num(n, out, K_TRDSL);
		offer_num(n, out, K_IRDSL);
		if (n->leading && n->local.max_outstanding_unexpected_pdus)
			offer_num(n, out, K_MOUP);
		if (n->leading && n->local.iser_hello_required && !(n->sent & (1ull << K_HELLO))) {
			offer_bool(n, out, K_HELLO);
			n->result.iser_hello_required = true;
		}
	}
	if (n->discovery || !n->leading)
		return;
	offer_num(n, out, K_MAX_CONN);
	offer_bool(n, out, K_INITIAL_R2T);
	offer_bool(n, out, K_IMMEDIATE);
	offer_num(n, out, K_MAX_BURST);
	if (n->local.first_burst > n->local.max_burst)
		n->local.first_burst = n->local.max_burst;
	offer_num(n, out, K_FIRST_BURST);
	offer_num(n, out, K_T2W);
	offer_num(n, out, K_T2R);
	offer_num(n, out, K_MAX_R2T);
	offer_bool(n, out, K_PDU_ORDER);
	offer_bool(n, out, K_SEQ_ORDER);
	offer_num(n, out, K_ERL);
}

int neg_accept(struct neg_ctx *n, const char *key, const char *value, char *why, size_t whylen)
{
	int idx = find_key(key);
	const struct neg_key *k;
	uint64_t bit;
	uint32_t v, mine;
	bool b;

	if (idx < 0)
		return neg_fail(why, whylen, "answer for key %s that was not offered", key);
	k = &neg_keys[idx];
	bit = 1ull << idx;
	if (n->seen & bit)
		return neg_fail(why, whylen, "key %s sent twice", key);

	if (k->kind == NK_DECL || k->kind == NK_DECL_BOOL) {
		n->seen |= bit;
		/* "Irrelevant" (iSER off) or "NotUnderstood" answers any key, initiator-only ones too. */
		if (is_reserved_value(value))
			return 0;
		if (k->flags & NF_INIT_ONLY && n->role == NEG_INITIATOR)
			return neg_fail(why, whylen, "%s may only be sent by an initiator", key);
		if (k->kind == NK_DECL_BOOL) {
			if (!parse_bool(value, &b))
				return neg_fail(why, whylen, "%s=%.32s is not Yes/No", key, value);
			pset(&n->result, k, b);
			return 0;
		}
		if (!parse_num(k, value, &v))
			return neg_fail(why, whylen, "%s=%.32s out of range", key, value);
		pset(&n->result, k, v);
		return 0;
	}
	if (!(n->sent & bit))
		return neg_fail(why, whylen, "answer for key %s that was not offered", key);
	n->seen |= bit;
	/* NotUnderstood, Irrelevant or Reject: the default stays in force. */
	if (is_reserved_value(value))
		return 0;

	mine = k->loc_off >= 0 ? pget(&n->local, k, k->loc_off) : 0;
	switch (k->kind) {
	case NK_DIGEST:
		if (strcmp(value, "None") == 0)
			pset(&n->result, k, 0);
		else if (strcmp(value, "CRC32C") == 0 && mine)
			pset(&n->result, k, 1);
		else
			return neg_fail(why, whylen, "%s=%.32s was not offered", key, value);
		break;
	case NK_AND:
	case NK_OR:
		if (!parse_bool(value, &b))
			return neg_fail(why, whylen, "%s=%.32s is not Yes/No", key, value);
		if (k->kind == NK_AND && b && !mine)
			return neg_fail(why, whylen, "%s=Yes answers our No", key);
		if (k->kind == NK_OR && !b && mine)
			return neg_fail(why, whylen, "%s=No answers our Yes", key);
		pset(&n->result, k, b);
		break;
	case NK_MIN:
	case NK_MAX:
		if (!parse_num(k, value, &v))
			return neg_fail(why, whylen, "%s=%.32s out of range", key, value);
		if (k->kind == NK_MIN && v > mine)
			return neg_fail(why, whylen, "%s=%u above the %u offered", key, v, mine);
		if (k->kind == NK_MAX && v < mine)
			return neg_fail(why, whylen, "%s=%u below the %u offered", key, v, mine);
		pset(&n->result, k, v);
		break;
	default: /* list keys and markers we never offer */
		break;
	}
	neg_fixup(n);
	return 0;
}
