/*
 * The transport seam: one ops table per transport (TCP, iSER).  Login,
 * negotiation, sequencing and SCSI handling live above it and are written
 * once.  A transport moves PDUs; an RDMA transport (ops->rdma_write set)
 * also moves data with RDMA WRITE/READ, and the iSCSI layer then sends no
 * Data-In, R2T or Data-Out PDUs (RFC 7145).
 */
#ifndef TRANSPORT_H
#define TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto/pdu.h"

struct buf;
struct bufpool;
struct reactor;
struct reactor_timer;
struct xp_conn;
struct xp_listener;

/*
 * A PDU to send.  The caller keeps it (and data) alive until done() runs:
 * exactly once for every PDU given to send(), see there.
 */
struct xp_pdu {
	uint8_t bhs[PDU_BHS_LEN];
	const uint8_t *ahs;
	uint32_t ahs_len;
	const uint8_t *data;
	uint32_t data_len;
	void (*done)(struct xp_pdu *pdu, int err); /* may be NULL */
	void *priv;
	/* iSER, initiator side (RFC 7145 sec. 9.2): the buffers of a SCSI
	 * command the target may RDMA WRITE into (read) / RDMA READ from (write).
	 * Ignored by TCP and by the target side. */
	bool read_stag_valid, write_stag_valid;
	uint32_t read_stag, write_stag;
	uint64_t read_va, write_va;
	/* transport private */
	struct xp_pdu *next;
	uint32_t sent;
	uint8_t hdig[4], ddig[4];
	bool hd_on, dd_on;     /* digests as they were when queued */
};

/* A received PDU, valid during the rx_pdu() upcall only. */
struct xp_rx {
	uint8_t bhs[PDU_BHS_LEN];
	uint8_t *ahs;
	uint32_t ahs_len;
	uint8_t *data;         /* data segment, data_len bytes (no padding) */
	uint32_t data_len;
	bool placed;           /* data went where rx_bhs() asked */
	bool data_digest_error;
	/* iSER (RFC 7145 sec. 9.2): the initiator's buffers of a SCSI command. */
	bool read_stag_valid, write_stag_valid;
	uint32_t read_stag, write_stag;
	uint64_t read_va, write_va;
};

#define XP_DISCARD ((uint8_t *)1)

/* Calls from a transport up to the iSCSI layer, on the connection's reactor. */
struct xp_upcalls {
	/*
	 * A BHS arrived.  Return 0 and set *dest to where the data segment goes
	 * (NULL: a transport buffer; XP_DISCARD: read and drop it), or a
	 * negative errno to close the connection.
	 */
	int (*rx_bhs)(struct xp_conn *c, const uint8_t *bhs, uint8_t **dest);
	void (*rx_pdu)(struct xp_conn *c, struct xp_rx *rx);
	/* The connection is gone (peer closed, error, or xp_close()). Last upcall. */
	void (*closed)(struct xp_conn *c, int err);
	/* Active side: a connection from ops->connect() is up. */
	void (*connected)(struct xp_conn *c);
};

typedef void (*xp_accept_fn)(void *arg, struct xp_conn *c);

/*
 * What a listener does with a connection.  admit() runs first, on the
 * listener's reactor, as soon as the peer's and our address are known and
 * before the connection costs anything (iSER: before its QP and buffers):
 * false refuses it.  An admitted connection then reaches accept() once it
 * is set up, or dropped() if setting it up failed.  admit and dropped may
 * be NULL (everyone admitted).
 */
struct xp_listen_params {
	bool (*admit)(void *arg, const struct xp_conn *c);
	xp_accept_fn accept;
	void (*dropped)(void *arg, const struct xp_conn *c);
	void *arg;
	/* TCP: seconds a connection may stay silent before keepalive probes
	 * start (then 3 probes 10 s apart, and unacknowledged data gives up
	 * after the same total); 0: off. */
	unsigned keepalive_s;
	/* iSER: receives each reactor shares among its connections on one
	 * device (a shared receive queue); 0: each connection posts its own. */
	unsigned srq_depth;
	/* The IP ToS of the connections (DSCP << 2 | ECN); 0: the system's
	 * default.  TCP: the listening socket's IP_TOS / IPV6_TCLASS, which
	 * accepted sockets inherit.  iSER: the listener's RDMA CM ToS
	 * (RDMA_OPTION_ID_TOS), taken when it starts listening. */
	uint8_t tos;
};

struct transport_ops {
	const char *name;
	bool rdma;
	/* Listen on host:port (on reactor r); connections go through lp (copied). */
	int (*listen)(const char *host, uint16_t port, struct reactor *r, const struct xp_listen_params *lp,
		      struct xp_listener **out, char *err, size_t errlen);
	void (*unlisten)(struct xp_listener *l);
	/* Optional: a listening listener's ToS for the connections it accepts
	 * from now on (-errno: not done).  Without it, a new ToS means a new
	 * listener. */
	int (*set_tos)(struct xp_listener *l, uint8_t tos);
	/* Begin receiving on the connection's reactor (after xp_conn fields are set). */
	int (*start)(struct xp_conn *c, struct reactor *r);
	/*
	 * Queue a PDU.  It never fails on the spot: pdu->done(pdu, err) runs
	 * exactly once for every PDU given to send(), on the connection's
	 * reactor and never from inside send() -- with 0 once the PDU left
	 * (TCP: written to the socket; iSER: its Send completed), or -errno if
	 * the connection closed first (also when it was closed already) or the
	 * PDU cannot be carried (iSER: larger than a send slot, -EMSGSIZE).
	 */
	void (*send)(struct xp_conn *c, struct xp_pdu *pdu);
	/* Close: pending sends complete with an error, then closed() runs. */
	void (*close)(struct xp_conn *c);
	void (*destroy)(struct xp_conn *c);
	/*
	 * Optional, target side: the upper layer is about to tell the peer it
	 * may send `want` commands beyond the last one taken (a command window);
	 * returns how many the connection's receives can take now, never fewer
	 * than `floor` (the window already granted, which cannot be taken back).
	 */
	uint32_t (*grant)(struct xp_conn *c, uint32_t floor, uint32_t want);
	/*
	 * RDMA only: move len bytes at offset off of a pool buffer to/from the
	 * peer's buffer (remote VA/STag).  A write needs no completion: a Send
	 * posted after it is delivered after it, so cb may be NULL.  A read
	 * calls cb (on the connection's reactor) once the data is in place.
	 */
	int (*rdma_write)(struct xp_conn *c, struct buf *b, uint32_t off, uint32_t len, uint64_t va,
			  uint32_t stag, void (*cb)(void *arg, int err), void *arg);
	int (*rdma_read)(struct xp_conn *c, struct buf *b, uint32_t off, uint32_t len, uint64_t va,
			 uint32_t stag, void (*cb)(void *arg, int err), void *arg);
	/*
	 * Active side (initiator): start connecting to host:port on reactor r
	 * and return at once.  0: *out is a connection still being set up; the
	 * caller sets its up/upper fields before it returns to the reactor.
	 * Later, on r, the transport calls up->connected() when the connection
	 * is ready for start() and send(), or up->closed() with the error (and
	 * the connection's why[] in words) when it fails or timeout_ms passes.
	 * -errno with err saying why when it cannot even begin (a name that
	 * does not resolve, no RDMA stack).  Name resolution itself blocks:
	 * give numeric addresses to a loop that must never wait.
	 */
	int (*connect)(const char *host, uint16_t port, struct reactor *r, unsigned timeout_ms,
		       struct xp_conn **out, char *err, size_t errlen);
	/*
	 * RDMA, initiator side: memory the target reads or writes must be
	 * registered with the device (its protection domain) a connection runs
	 * on.  rdma_dev() names that device; it outlives the connection, so
	 * registrations survive a reconnect to the same device.
	 * pool_register() registers a buffer pool's slabs with the device, now
	 * and as it grows, and returns the device's index in the pool (a
	 * buffer's keys[index]) or -errno (bufpool_dev_attach).
	 * mem_reg() registers one caller buffer: the peer may write it
	 * (peer_writes: a READ's sink) or only read it (a WRITE's source, which
	 * may be read-only memory).
	 */
	void *(*rdma_dev)(struct xp_conn *c);
	int (*pool_register)(void *dev, struct bufpool *p);
	int (*mem_reg)(void *dev, void *addr, size_t len, bool peer_writes, uint32_t *rkey, void **handle);
	void (*mem_dereg)(void *handle);
	/*
	 * RDMA, target side: registers memory that only the device's own work
	 * requests read (an RDMA WRITE's source; no remote access), for its
	 * lkey (common/transport/memreg.h); freed with mem_dereg().  dev_name() names a
	 * device in messages.
	 */
	int (*mem_reg_local)(void *dev, void *addr, size_t len, uint32_t *lkey, void **handle);
	const char *(*dev_name)(void *dev);
};

/*
 * What a connection moved, counted by its transport on the connection's
 * reactor (read there too: docs/stats.md).  PDUs and bytes are iSCSI PDUs
 * as carried (TCP: header, data, padding and digests; iSER: the messages);
 * RDMA data moves are counted apart.
 */
struct xp_stats {
	uint64_t pdus_in, pdus_out, bytes_in, bytes_out;
	uint64_t digest_errors;            /* TCP: header and data digests that did not match */
	uint64_t rdma_reads, rdma_read_bytes, rdma_writes, rdma_write_bytes; /* iSER: posted */
	uint64_t sends, recvs;             /* iSER: Sends posted, receives completed */
	uint64_t inline_sends;             /* iSER: of the Sends, those posted inline (IBV_SEND_INLINE) */
	uint64_t send_posts;               /* iSER: ibv_post_send calls (doorbells) for those WRs */
	uint64_t cq_polls, cq_empty_polls, completions; /* iSER: CQ polls, those that found nothing */
};

/*
 * Statistics in the data path, on unless meson's -Dstats=false passes
 * -DISERT_STATS=0.  The one definition: the target's stats.h and the SCSI
 * layer include this header for it (common/ cannot include target/).
 */
#ifndef ISERT_STATS
#define ISERT_STATS 1
#endif
#if ISERT_STATS
#define XP_STAT_ADD(xc, field, n) ((xc)->stats.field += (n))
#else
#define XP_STAT_ADD(xc, field, n) ((void)0)
#endif

/* The transport-independent part of a connection, first in every transport's struct. */
/*
 * A connection's life, the same for every transport (common/transport/xp_conn.c):
 * an active connection starts XP_CONNECTING, an accepted one XP_UP;
 * close() makes it XP_CLOSING, and it is XP_CLOSED once the upper layer
 * has heard closed() (after the transport let go of every buffer of it).
 */
enum xp_state { XP_CONNECTING, XP_UP, XP_CLOSING, XP_CLOSED };

struct xp_conn {
	const struct transport_ops *ops;
	struct reactor *reactor;
	/* The lifecycle (xp_conn.c); the transport's own state is in its struct. */
	enum xp_state state;
	int err;                 /* what closed it: the first error, 0 for a close asked for */
	unsigned calls;          /* deferred calls queued with it as their argument */
	bool destroy_pending;    /* destroyed meanwhile: the last of those calls frees it */
	bool fail_scheduled;
	struct xp_pdu *dead;     /* given to send() after the close: failed from a deferred call */
	void (*free)(struct xp_conn *xc);  /* the transport's: frees it and what it holds */
	/* Active side: the time limit of connecting, and how the transport fails it. */
	struct reactor_timer *connect_timer;
	unsigned connect_ms;
	void (*connect_failed)(struct xp_conn *xc, int err, const char *why);
	const struct xp_upcalls *up;
	void *upper;             /* the iSCSI connection */
	bool header_digest;      /* in force after login */
	bool data_digest;
	char peer[64];           /* "addr:port" */
	char peer_ip[48];        /* the peer's address alone */
	char local[64];
	char local_ip[48];
	uint16_t local_port;
	/* Largest data segment a control PDU we send may carry (iSER: the
	 * initiator's 128-byte receive buffers after login); 0: no limit. */
	uint32_t max_ctrl_data;
	/* iSER target: its receives come from a shared queue, where unsolicited
	 * Data-Out Sends would go beyond what grant() promised: the login insists
	 * on InitialR2T=Yes (the data then comes by RDMA READ). */
	bool shared_rx;
	char why[256];           /* why an active connection failed to come up */
	struct xp_stats stats;
};

/* For transports: end every PDU of a list with err (done() may queue more elsewhere). */
static inline void xp_fail_pdus(struct xp_pdu **head, int err)
{
	while (*head) {
		struct xp_pdu *p = *head;
		*head = p->next;
		if (p->done)
			p->done(p, err);
	}
}

/*
 * The shared lifecycle, for transports (xp_conn.c).  Deferred calls take the
 * connection itself as their argument and begin with xp_deferred_gone().
 */
static inline bool xp_closing(const struct xp_conn *xc) { return xc->state >= XP_CLOSING; }
/* close() begins: false when it had begun already; else XP_CLOSING, the connect time limit stopped. */
bool xp_close_begin(struct xp_conn *xc);
/* Run fn(xc) on its reactor soon; xc stays allocated until it ran.  0 or -errno. */
int xp_defer(struct xp_conn *xc, void (*fn)(void *arg));
/* First thing in a deferred call: true when xc was destroyed meanwhile (and maybe freed now). */
bool xp_deferred_gone(struct xp_conn *xc);
/* The upper layer hears closed() once: now, or from a fresh stack (it may be inside an upcall). */
void xp_closed_now(struct xp_conn *xc);
void xp_closed_later(struct xp_conn *xc);
/* A PDU sent after the close: its done() runs from a deferred call, never inside send(). */
void xp_send_dead(struct xp_conn *xc, struct xp_pdu *p);
/* destroy(): fail what send() still holds; free now, or leave it to the last deferred call. */
void xp_release(struct xp_conn *xc);
/* Active side: fail with -ETIMEDOUT ("no answer within MS ms") unless connected by then.  0 or -ENOMEM. */
int xp_connect_timer_start(struct xp_conn *xc, unsigned ms);
/* Connected, or closing: the time limit no longer applies. */
void xp_connect_timer_stop(struct xp_conn *xc);
/*
 * The process is force-closing every connection (isertd's shutdown_timeout
 * passed): a closing connection waits for nothing but its transport's own
 * flushes (an iSER disconnect held for a down port goes out at once).
 */
void xp_stop_waiting(void);
bool xp_stopping(void);

extern const struct transport_ops tcp_transport;
extern const struct transport_ops iser_transport; /* NULL ops when built without rdma-core */

#endif
