/*
 * The iSNS client's parts (docs/admin.md "iSNS"), between its files and
 * its tests: the wire format (proto.c), what the configuration asks to be
 * registered (want.c) and the engine that keeps the server's copy equal to
 * it (engine.c).  None of them touches a socket or a clock: the client
 * thread (client.c) carries bytes and time to the engine, so the unit
 * tests and the fuzz harness drive the same code with their own.
 */
#ifndef ISNS_INT_H
#define ISNS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/isns/isns.h"

/* ------------------------------------------------------------------------ */
/* proto.c: RFC 4171 PDUs and their attributes (TLVs). */

#define ISNS_HDR_LEN      12
#define ISNS_VERSION      1
/* A PDU's payload: the 16-bit length field, a multiple of 4. */
#define ISNS_MAX_PAYLOAD  65532
/* What one message may add up to over several PDUs (open-isns sends one PDU per message). */
#define ISNS_MAX_MSG      (256u << 10)
#define ISNS_MAX_PDUS     64
/* Bounds on what a message may carry: attributes, and one attribute's value. */
#define ISNS_MAX_ATTRS    8192
#define ISNS_MAX_ATTR_LEN 4096

#define ISNS_F_CLIENT  0x8000
#define ISNS_F_SERVER  0x4000
#define ISNS_F_AUTH    0x2000
#define ISNS_F_REPLACE 0x1000
#define ISNS_F_LAST    0x0800
#define ISNS_F_FIRST   0x0400

#define ISNS_RESPONSE 0x8000
enum isns_func {
	ISNS_DEV_ATTR_REG = 0x0001,
	ISNS_DEV_ATTR_QRY = 0x0002,
	ISNS_DEV_GET_NEXT = 0x0003,
	ISNS_DEV_DEREG = 0x0004,
	ISNS_SCN_REG = 0x0005,
	ISNS_SCN_DEREG = 0x0006,
	ISNS_SCN_EVENT = 0x0007,
	ISNS_SCN = 0x0008,
	ISNS_DD_REG = 0x0009,
	ISNS_DD_DEREG = 0x000a,
	ISNS_DDS_REG = 0x000b,
	ISNS_DDS_DEREG = 0x000c,
	ISNS_ESI = 0x000d,
	ISNS_HEARTBEAT = 0x000e,
};

enum isns_status {
	ISNS_OK = 0,
	ISNS_ST_INVALID_REGISTRATION = 3,
	ISNS_ST_SOURCE_UNKNOWN = 6,
	ISNS_ST_NO_SUCH_ENTRY = 9,
	ISNS_ST_ESI_NOT_AVAILABLE = 21,
};

enum isns_tag {
	ISNS_T_DELIMITER = 0,
	ISNS_T_EID = 1,
	ISNS_T_ENTITY_PROTOCOL = 2,
	ISNS_T_TIMESTAMP = 4,
	ISNS_T_REG_PERIOD = 6,
	ISNS_T_PORTAL_IP = 16,
	ISNS_T_PORTAL_PORT = 17,
	ISNS_T_PORTAL_NAME = 18,
	ISNS_T_ESI_INTERVAL = 19,
	ISNS_T_ESI_PORT = 20,
	ISNS_T_ISCSI_NAME = 32,
	ISNS_T_NODE_TYPE = 33,
	ISNS_T_ALIAS = 34,
	ISNS_T_PG_NAME = 48,
	ISNS_T_PG_IP = 49,
	ISNS_T_PG_PORT = 50,
	ISNS_T_PGT = 51,
	ISNS_T_DD_ID = 2065,
	ISNS_T_DD_NAME = 2066,
	ISNS_T_DD_MEMBER_NAME = 2068,
};
#define ISNS_ENTITY_ISCSI 2
#define ISNS_NODE_TARGET  0x00000001u

/* RFC 4171 sec. 6.1's names ("Invalid Registration"), for the log; "status N" for others (buf). */
const char *isns_status_name(uint32_t status, char *buf, size_t n);
const char *isns_func_name(uint16_t func, char *buf, size_t n);

struct isns_attr {
	uint32_t tag, len;
	const uint8_t *v;        /* into the message's payload */
};

/* A message: a request from the server (ESI) or a response to one of ours. */
struct isns_msg {
	uint16_t func, flags, xid;
	uint32_t status;         /* a response's */
	uint8_t *payload;        /* owned */
	size_t len;
	struct isns_attr *attrs; /* every attribute after the status, the delimiter included */
	size_t nattrs;
};
void isns_msg_free(struct isns_msg *m);
/* The index of the first operating attribute (after the delimiter; nattrs when there is none). */
size_t isns_msg_oper(const struct isns_msg *m);

bool isns_attr_u32(const struct isns_attr *a, uint32_t *v);
bool isns_attr_ip(const struct isns_attr *a, uint8_t ip[16]);
/* A NUL-terminated string in the value (its padding after the NUL). */
bool isns_attr_str(const struct isns_attr *a, const char **s);

/*
 * PDUs in, messages out: header checks, reassembly of several PDUs of one
 * message (at most ISNS_MAX_PDUS, ISNS_MAX_MSG bytes), then the payload's
 * attributes (at most ISNS_MAX_ATTRS, each at most ISNS_MAX_ATTR_LEN bytes,
 * 4-byte aligned).  Memory held: the message being assembled.
 */
struct isns_rx {
	uint8_t hdr[ISNS_HDR_LEN];
	size_t hlen;
	uint8_t *msg;            /* payload assembled so far */
	size_t mlen, mcap;
	size_t pdu_left;         /* payload bytes of the current PDU still to come */
	bool in_pdu, in_msg;
	uint16_t func, flags, xid, seq;
	unsigned npdus;
};
/*
 * Feed n bytes; *used says how many were taken.  1: a message is in *out
 * (isns_msg_free it); 0: all taken, more needed; <0: the stream is broken,
 * the reason in err (the connection should close).
 */
int isns_rx_feed(struct isns_rx *rx, const uint8_t *p, size_t n, size_t *used, struct isns_msg *out, char *err,
		 size_t errlen);
void isns_rx_reset(struct isns_rx *rx);
/* A whole payload's attributes (after the status when response), the checks above; 0 or -EPROTO (err). */
int isns_msg_parse(struct isns_msg *m, char *err, size_t errlen);

/* A message being built: one PDU, its payload at most ISNS_MAX_PAYLOAD. */
struct isns_out {
	uint8_t *b;
	size_t len;
	bool full;               /* something did not fit (nothing of it was written) */
};
int isns_out_init(struct isns_out *o, uint16_t func, uint16_t flags, uint16_t xid);
void isns_out_free(struct isns_out *o);
void isns_put_u32(struct isns_out *o, uint32_t tag, uint32_t v);
void isns_put_str(struct isns_out *o, uint32_t tag, const char *s);
void isns_put_ip(struct isns_out *o, uint32_t tag, const uint8_t ip[16]);
void isns_put_nil(struct isns_out *o, uint32_t tag);
void isns_put_raw(struct isns_out *o, uint32_t tag, const uint8_t *v, uint32_t len);
/* The header's length field set; the PDU is o->b, o->len bytes. */
void isns_out_finish(struct isns_out *o);

/*
 * The answer to an ESI (RFC 4171 sec. 5.6.5.13): ESIRsp with the inquiry's
 * attributes echoed, status 0 when it names entity eid, "No Such Entry"
 * otherwise.  0, or -EINVAL when req is not an ESI.
 */
int isns_esi_answer(const struct isns_msg *req, const char *eid, struct isns_out *out);

/* "a.b.c.d" / "v6" of a 16-byte iSNS address (IPv4-mapped for IPv4). */
const char *isns_ip_str(const uint8_t ip[16], char *buf, size_t n);

/* ------------------------------------------------------------------------ */
/* esi.c: the ESI port's connections, which are admitted and what each is answered. */

#define ISNS_ESI_CONNS   4
#define ISNS_ESI_IDLE_MS 10000   /* a connection is closed then after it came, whatever its peer does */

struct isns_esi_conn {
	bool used, server;       /* server: from the configured server's address */
	uint8_t peer[16];        /* IPv4-mapped for IPv4 */
	uint64_t since;          /* when it came (ms) */
	struct isns_rx rx;
	struct isns_out out;     /* the answer being sent */
	size_t off;
};
struct isns_esi {
	struct isns_esi_conn c[ISNS_ESI_CONNS];
	uint8_t server[16];
	bool has_server;
};
/* The configured server's address: a numeric host as global.isns.server has it (NULL: none). */
void isns_esi_server(struct isns_esi *s, const char *host);
/*
 * A slot for a new connection from peer (IPv4-mapped for IPv4): its index,
 * or -1: refuse it.  *evicted: the slot's connection was taken from it (the
 * caller closes that one's socket).
 */
int isns_esi_admit(struct isns_esi *s, const uint8_t peer[16], uint64_t now, bool *evicted);
/* Bytes from slot i's peer: 0, an inquiry answered (isns_esi_output); or -EPROTO (logged): close it. */
int isns_esi_input(struct isns_esi *s, size_t i, const uint8_t *p, size_t n, const char *eid);
/* What to send on slot i (n 0: nothing), and how much went. */
const uint8_t *isns_esi_output(const struct isns_esi *s, size_t i, size_t *n);
void isns_esi_sent(struct isns_esi *s, size_t i, size_t n);
/* Slot i's connection is closed: the slot is free. */
void isns_esi_drop(struct isns_esi *s, size_t i);

/* ------------------------------------------------------------------------ */
/* want.c: what the configuration asks the server to hold. */

struct isns_pg {
	uint32_t portal;         /* index into the portals */
	uint16_t tag;
};
struct isns_node {
	char *name, *alias;      /* alias may be NULL */
	struct isns_pg *pgs;     /* the portals it is reached through, each with its TPG's tag */
	size_t npgs;
};
struct isns_portal {
	uint8_t ip[16];          /* IPv4-mapped for IPv4 */
	uint16_t port;
	uint8_t wild;            /* 0, or AF_INET / AF_INET6: a wildcard, registered as the local address */
};
struct isns_want {
	char *host;              /* the server */
	uint16_t port;
	char *eid;
	uint32_t esi_interval;   /* 0: no ESI */
	uint16_t esi_port;       /* as configured (0: any); the one listened on, set by the client thread */
	uint32_t reg_period;
	char *dd;                /* discovery domain, or NULL */
	struct isns_portal *portals;
	size_t nportals;
	struct isns_node *nodes;
	size_t nnodes;
};
struct config;
/* NULL with *err empty: no global.isns; NULL with err: out of memory.  Enabled portal groups only. */
struct isns_want *isns_want_from_config(const struct config *c, char *err, size_t errlen);
void isns_want_free(struct isns_want *w);
/* The default Entity Identifier: the host name. */
char *isns_default_eid(void);

/* ------------------------------------------------------------------------ */
/* engine.c: the registration kept equal to what is wanted. */

/* What the engine asks of whoever carries its bytes (client.c, or a test). */
struct isns_io_ops {
	/* Start connecting to host:port (the answer comes by isns_eng_connected or isns_eng_down). */
	void (*connect)(void *ctx, const char *host, uint16_t port);
	/* Close the connection (no isns_eng_down follows). */
	void (*close)(void *ctx);
};

#define ISNS_CONNECT_TIMEOUT_MS 5000
#define ISNS_ANSWER_TIMEOUT_MS  10000
#define ISNS_BACKOFF_MIN_MS     1000
#define ISNS_BACKOFF_MAX_MS     30000
/* Never longer between two checks of the registration (a query of one of the nodes, in turn). */
#define ISNS_CHECK_MAX_MS       60000

struct isns_eng;
struct isns_eng *isns_eng_new(const struct isns_io_ops *ops, void *ctx);
void isns_eng_free(struct isns_eng *e);
/* What to register from now on (taken; NULL: nothing, everything registered goes). */
void isns_eng_want(struct isns_eng *e, struct isns_want *w, uint64_t now_ms);
/* Deregister everything and stop; isns_eng_done says when nothing is left to do. */
void isns_eng_stop(struct isns_eng *e, uint64_t now_ms);
bool isns_eng_done(const struct isns_eng *e);
/* The connection is up (local: the address it is bound to, IPv4-mapped), or lost / refused (why). */
void isns_eng_connected(struct isns_eng *e, const uint8_t local[16], uint64_t now_ms);
void isns_eng_down(struct isns_eng *e, const char *why, uint64_t now_ms);
/* Bytes from the server. */
void isns_eng_input(struct isns_eng *e, const uint8_t *p, size_t n, uint64_t now_ms);
/* Bytes to send (n 0: none); isns_eng_sent says how many went. */
const uint8_t *isns_eng_output(struct isns_eng *e, size_t *n);
void isns_eng_sent(struct isns_eng *e, size_t n, uint64_t now_ms);
/* Timers and the next step; returns when to be called again (ms, absolute). */
uint64_t isns_eng_tick(struct isns_eng *e, uint64_t now_ms);
/* The entity being served (ESI answers name it), or NULL. */
const char *isns_eng_eid(const struct isns_eng *e);
/* For the tests: registered (the server holds what is wanted), failures in a row, the xid awaited (-1: none). */
bool isns_eng_synced(const struct isns_eng *e);
/* Its state for isns.status (running is the caller's). */
void isns_eng_report(const struct isns_eng *e, uint64_t now_ms, struct isns_report *st);
unsigned isns_eng_failures(const struct isns_eng *e);
int isns_eng_awaiting(const struct isns_eng *e);

#endif
