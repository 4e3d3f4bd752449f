/*
 * iSCSI text: key=value pairs (RFC 7143 sec. 6) and the negotiation engine
 * (RFC 7143 sec. 13 result functions, RFC 7145 sec. 6 iSER keys).  Shared by
 * target and initiator: a side offers with neg_offer(), the other answers with
 * neg_respond(), the first takes the answers with neg_accept().
 */
#ifndef TEXT_H
#define TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TEXT_MAX_KEY_LEN 63
#define TEXT_MAX_VALUE_LEN 8192  /* binary values (CHAP_C/CHAP_R) may be this long */
#define TEXT_MAX_PAIRS 256
#define TEXT_MAX_TOTAL (64 * 1024) /* a whole negotiation sequence */
#define TEXT_MAX_SIMPLE_VALUE_LEN 255 /* values not 0x/0b encoded (RFC 7143 sec. 6.1) */

struct text_pair {
	const char *key;   /* points into the list's own copy of the data */
	const char *value;
};

struct text_list {
	struct text_pair pairs[TEXT_MAX_PAIRS];
	unsigned count;
	char *storage;     /* owned copy of the parsed bytes */
};

/*
 * Parse a NUL-separated key=value data segment (trailing NULs/padding
 * allowed; a final pair without NUL is accepted).  Returns 0, or -EINVAL /
 * -E2BIG with why naming the problem (key too long, no '=', too many pairs).
 */
int text_parse(const uint8_t *data, uint32_t len, struct text_list *out, char *why, size_t whylen);
void text_list_free(struct text_list *l);
/* First value of key, or NULL. */
const char *text_get(const struct text_list *l, const char *key);
/* Index of the first pair whose key appeared earlier in the list, or -1. */
int text_find_duplicate(const struct text_list *l);

/* Growable output buffer of key=value\0 pairs. */
struct text_buf {
	uint8_t *data;
	uint32_t len, cap;
	bool oom;          /* an append failed; the buffer must not be sent */
};
void text_buf_init(struct text_buf *b);
void text_buf_free(struct text_buf *b);
void text_add(struct text_buf *b, const char *key, const char *value);
void text_addf(struct text_buf *b, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Append raw bytes (used to concatenate continuation segments). */
void text_append(struct text_buf *b, const uint8_t *data, uint32_t len);

/* Parse numbers as RFC 7143 sec. 6.1 allows (decimal, 0x hex); false if bad. */
bool text_parse_u64(const char *s, uint64_t *v);

/* The operational parameters a negotiation produces. */
struct neg_params {
	bool header_digest;          /* CRC32C on */
	bool data_digest;
	uint32_t max_connections;
	bool initial_r2t;
	bool immediate_data;
	uint32_t max_recv_dsl;       /* what this side declared it receives */
	uint32_t peer_max_recv_dsl;  /* what the peer declared it receives (we may send) */
	uint32_t max_burst;
	uint32_t first_burst;
	uint32_t time2wait;
	uint32_t time2retain;
	uint32_t max_outstanding_r2t;
	bool data_pdu_in_order;
	bool data_seq_in_order;
	uint32_t erl;
	/* RFC 7145 */
	bool rdma_extensions;
	uint32_t target_recv_dsl;
	uint32_t initiator_recv_dsl;
	uint32_t max_outstanding_unexpected_pdus;
	bool iser_hello_required;
};

/* RFC 7143 defaults (MaxRecvDataSegmentLength 8192 both ways, and so on). */
void neg_params_default(struct neg_params *p);

enum neg_role { NEG_TARGET, NEG_INITIATOR };

struct neg_ctx {
	enum neg_role role;
	bool discovery;               /* SessionType=Discovery: only some keys apply */
	bool leading;                 /* leading connection: session-wide keys allowed */
	struct neg_params local;      /* this side's preferences and limits */
	struct neg_params result;     /* values in force once negotiation ends */
	uint64_t seen;                /* bit per key already received (duplicates are errors) */
	uint64_t sent;                /* bit per key already sent */
};

/* Start a negotiation: result starts at the RFC defaults, local holds our wishes. */
void neg_init(struct neg_ctx *n, enum neg_role role, const struct neg_params *local);

/*
 * True if key is an operational key the engine owns (HeaderDigest,
 * MaxBurstLength, RDMAExtensions, ...).  Login keys (InitiatorName,
 * TargetName, SessionType, AuthMethod, CHAP_*) are the caller's.
 */
bool neg_is_operational_key(const char *key);

/*
 * Answer one key the peer offered: apply the result function, record the
 * result, append our answer to rsp ("NotUnderstood" for unknown keys,
 * "Irrelevant" where the key does not apply, "Reject" for a bad value).
 * Returns 0, or -EPROTO when the peer broke the protocol badly enough that
 * login must fail (duplicate key, a leading-only key on a non-leading
 * connection...), with why filled in.
 */
int neg_respond(struct neg_ctx *n, const char *key, const char *value,
		struct text_buf *rsp, char *why, size_t whylen);

/*
 * Append our own offers/declarations not yet sent (e.g. a target's
 * MaxRecvDataSegmentLength declaration, an initiator's proposals).
 */
void neg_offer(struct neg_ctx *n, struct text_buf *out);

/* Take the peer's answer to a key we offered.  Returns 0 or -EPROTO (why). */
int neg_accept(struct neg_ctx *n, const char *key, const char *value, char *why, size_t whylen);

#endif
