/*
 * Between the iSER transport's files (RFC 7145 on rdma-core):
 *   rdma.c      posting and polling work requests, send and RDMA data ops,
 *               teardown, the ops table;
 *   rdma_dev.c  devices and their PDs, shared receive queues, registering
 *               the pools and memory;
 *   rdma_cm.c   the connection manager: listen, accept and set up a QP,
 *               connect (active side), CM events.
 * Everything here runs on the connection's reactor unless it says otherwise.
 */
#ifndef RDMA_INT_H
#define RDMA_INT_H

#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/bufpool.h"
#include "common/transport/iser.h"
#include "common/reactor.h"
#include "common/transport/transport.h"

#define RDMA_RX_DATA ISER_TARGET_RECV_DSL
#define RDMA_AHS_ROOM 64       /* an extended-CDB AHS of a 32-byte CDB fits */
#define RDMA_RX_SLOT (ISER_HDR_LEN + PDU_BHS_LEN + RDMA_AHS_ROOM + RDMA_RX_DATA)
#define RDMA_TX_SLOT (ISER_HDR_LEN + PDU_BHS_LEN + 8192) /* login responses carry text */
/* After QP -> error, how long the flushes may take before we stop waiting. */
#define RDMA_FLUSH_WAIT_MS 5000
/* A close the device caused waits for its port before it disconnects (hold_disconnect() in rdma.c). */
#define RDMA_PORT_POLL_MS 250
#define RDMA_PORT_WAIT_MS 30000
/*
 * With a shared receive queue a connection holds a share of it: its command
 * window plus RDMA_SRQ_SPARE for what comes outside the window (immediate
 * commands and requests: NOP-Out, TMF, Text, Logout; the Hello).  A share
 * never drops below RDMA_SRQ_MIN_WINDOW + RDMA_SRQ_SPARE, so every session
 * can make progress; a connection that cannot get that much when it
 * arrives posts receives of its own instead.
 */
#define RDMA_SRQ_SPARE 8
#define RDMA_SRQ_MIN_WINDOW 16
#define RDMA_SRQ_MIN_SHARE (RDMA_SRQ_MIN_WINDOW + RDMA_SRQ_SPARE)
#define RDMA_QUEUE 160         /* receives posted / send slots per connection */
/*
 * Inline data asked for at QP creation: a target's largest full-feature
 * control PDU is what the initiator's 128-byte receive takes (a SCSI
 * Response with sense, a NOP-In with ping data); our initiator's command
 * with an extended-CDB AHS is 28 + 48 + 64.  Providers differ (siw allows
 * 80 bytes, rxe more) and refuse a QP that asks for more than they have, so
 * a refusal is retried with the iSER header and BHS alone (every status
 * without sense), then with none.
 */
#define RDMA_INLINE_WANT (ISER_HDR_LEN + PDU_BHS_LEN + RDMA_AHS_ROOM)
#define RDMA_INLINE_MIN (ISER_HDR_LEN + PDU_BHS_LEN)
#define RDMA_MAX_RD_ATOM 16

/* One PD per device, shared by every reactor (verbs objects are thread safe). */
struct rdma_dev {
	struct ibv_context *verbs;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	_Atomic bool removed;     /* DEVICE_REMOVAL seen: no new user, pools let go of it */
	_Atomic bool inline_told; /* its inline size logged (once: every QP gets the same) */
	struct rdma_dev *next;
};


/*
 * siw (Soft-iWARP, Linux 6.12) races a connect against the teardown of a
 * connection between the same two ends that just ended: the connect failed
 * with EADDRNOTAVAIL, siw's listener on the target was broken from then on,
 * and destroying it hit a kernel BUG.  `iseradm ls` (discovery, then a login
 * at once) did it within 4-49 rounds; with 50 ms between the two, never in
 * 120.  So a connect within IWARP_RECONNECT_GAP_MS of the end of one of our
 * iWARP connections waits out the rest before rdma_connect().
 */
#define IWARP_RECONNECT_GAP_MS 50
extern _Atomic uint64_t iser_iwarp_destroyed_ns;

enum wr_kind { WR_RECV, WR_SEND, WR_READ, WR_WRITE };

/* What a work request completion refers to (wr_id points here). */
struct wr_ctx {
	enum wr_kind kind;
	uint32_t covers;          /* send-queue entries this completion frees */
	uint32_t slot;            /* RECV/SEND: slot index */
	uint8_t *buf;             /* RECV: the slot's memory */
	struct xp_pdu *pdu;       /* SEND */
	void (*cb)(void *arg, int err);
	void *arg;
	struct wr_ctx *next;      /* waiting for send-queue room */
	struct wr_ctx *fprev, *fnext; /* READ/WRITE posted and signaled: on rdma_conn.fly */
	bool inl;                 /* SEND: posted inline */
	bool posted;              /* handed to the device, its completion not yet seen */
	struct ibv_send_wr wr;
	struct ibv_sge sge;
};

/*
 * What rdma_cm and the QP have reached (rdma_conn.st), beside the shared
 * lifecycle in xc.state (connecting, up, closing, closed).  It only moves
 * forward, one way per side:
 *   active:  ADDR_RESOLVING -> ROUTE_RESOLVING -> ROUTE_RESOLVED -> QP_READY
 *   passive: ACCEPTING -> QP_READY
 *   then:    QP_READY -> ESTABLISHED -> (closed, the port down:
 *            DISCONNECT_HELD -> PORT_DOWN ->) DISCONNECTED
 * The order is read: from QP_READY on there is a QP whose posted WRs a close
 * flushes through the CQ.  Only an established connection is owed a DREQ,
 * so the CM's end of one before ESTABLISHED leaves st where it is.
 */
enum iser_state {
	ISER_ADDR_RESOLVING,      /* active: rdma_resolve_addr() asked */
	ISER_ROUTE_RESOLVING,     /* active: rdma_resolve_route() asked */
	ISER_ROUTE_RESOLVED,      /* active: the iWARP gap, then the QP and rdma_connect() */
	ISER_ACCEPTING,           /* passive: taken from the listener, its QP not made yet */
	ISER_QP_READY,            /* QP made (active: rdma_connect() follows; passive: rdma_accept()) */
	ISER_ESTABLISHED,         /* the CM's ESTABLISHED: a close disconnects */
	ISER_DISCONNECT_HELD,     /* closed: our DREQ waits for the port (hold_disconnect() in rdma.c) */
	ISER_PORT_DOWN,           /* the same, the port seen down and said so (once) */
	ISER_DISCONNECTED,        /* our DREQ sent, or the CM's disconnect or error heard */
};

struct rdma_conn {
	struct xp_conn xc;
	enum iser_state st;
	struct rdma_cm_id *id;
	struct rdma_event_channel *ch;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct rdma_dev *dev;
	struct bufpool *pool;                    /* attached to pool_dev's registrations (target side) */
	int pool_dev;                            /* our device's index in pool: buf keys[pool_dev] */
	uint8_t *rx_mem, *tx_mem;
	struct ibv_mr *rx_mr, *tx_mr;
	struct rdma_srq *srq;                    /* receives come from it (rx_mem unused) */
	uint32_t srq_share;                      /* receives of it promised to this connection (srq_grant) */
	struct wr_ctx rx_ctx[RDMA_QUEUE];
	struct wr_ctx tx_ctx[RDMA_QUEUE];
	uint32_t tx_free[RDMA_QUEUE];
	uint32_t ntx_free;
	struct xp_pdu *txq_head, *txq_tail;      /* waiting for a send slot */
	struct wr_ctx *wrq_head, *wrq_tail;      /* waiting for send-queue room / read credits */
	uint32_t sq_size, sq_free, unsignaled;
	uint32_t max_inline;                     /* granted at QP creation: Sends this long go inline */
	uint32_t ord, reads_out;                 /* RDMA READs we may have in flight */
	uint32_t wrs_out;                        /* posted, not yet completed (incl. recvs) */
	bool in_poll;                            /* inside poll_cq(): WRs wait for its end */
	bool post_scheduled;                     /* post_flush() queued: WRs wait for one ibv_post_send */
	bool signal_writes;                      /* iWARP: see setup_qp */
	bool active;                             /* we connected (initiator side) */
	bool cq_armed;                           /* notification requested, event not yet seen */
	struct reactor_poller *poller;           /* busy/adaptive reactors poll the CQ */
	struct wr_ctx *fly;                      /* signaled READs/WRITEs not yet completed */
	struct reactor_timer *flush_timer;       /* close: give up waiting for flushes */
	/*
	 * Torn down without every flush: CQ not read.  Not a state of st: the
	 * flush ends on its own clock, whatever the disconnect is at (a held
	 * one outlasts RDMA_FLUSH_WAIT_MS).
	 */
	bool forced;
	/* Set while a held disconnect waits (see hold_disconnect()): the close waits with it. */
	struct reactor_timer *port_timer;
	uint64_t port_down_since_ns;
	struct reactor_timer *gap_timer;         /* waiting out IWARP_RECONNECT_GAP_MS */
};

/*
 * One shared receive queue per reactor and device (target, srq_depth > 0):
 * receive memory is depth slots per reactor, whatever the number of
 * connections, instead of RDMA_QUEUE slots per connection.  The shares of
 * its connections never add up to more than the depth, so an initiator that
 * keeps to its command window never finds the queue empty (iWARP, having no
 * receiver-not-ready retry, would end the connection).  A share is the
 * window the session last advertised plus RDMA_SRQ_SPARE; each time the
 * session advertises a window, iser_srq_grant() sizes it: at most an equal part
 * of the depth as if one more connection were there (so a newcomer finds
 * room), within what the other connections leave, never below what the
 * initiator already has.  So windows shrink as connections arrive (as
 * ExpCmdSN moves up to a MaxCmdSN that stays) and grow as they leave.
 * Used only on its reactor; the list is under dev_lock.
 */
struct rdma_srq {
	struct reactor *r;
	struct rdma_dev *dev;
	struct ibv_srq *srq;
	uint8_t *mem;
	struct ibv_mr *mr;
	struct wr_ctx *ctx;
	uint32_t depth, promised;
	unsigned users;
	struct rdma_srq *next;
};

/* rdma.c */
int iser_post_recv(struct rdma_conn *c, uint32_t slot);
int iser_cq_poll(void *arg);
int iser_cq_arm(void *arg);
void iser_on_cq_event(void *arg, uint32_t events);
void iser_conn_fail(struct rdma_conn *c, int err);
void iser_conn_free(struct xp_conn *xc);
void iser_destroy(struct xp_conn *xc);
/* rdma.c's work-request path, declared for tests/unit/test_rdma.c, which drives it with a QP
 * whose post_send is its own; everything else reaches it through the transport ops. */
void iser_send(struct xp_conn *xc, struct xp_pdu *p);
int iser_data(struct rdma_conn *c, enum wr_kind kind, struct buf *b, uint32_t off, uint32_t len, uint64_t va,
	      uint32_t stag, void (*cb)(void *arg, int err), void *arg);
void iser_post_wr(struct rdma_conn *c, struct wr_ctx *w);
void iser_complete(struct rdma_conn *c, struct ibv_wc *wc);
void iser_fail_queues(struct rdma_conn *c);

/* rdma_dev.c */
struct rdma_dev *iser_dev_get(struct ibv_context *verbs);
struct rdma_dev *iser_dev_find(struct ibv_context *verbs);
void iser_dev_removed(struct rdma_dev *d);
int iser_pool_attach(struct rdma_conn *c, struct bufpool *p);
uint8_t *iser_slots_alloc(size_t len);
struct rdma_srq *iser_srq_get(struct reactor *r, struct rdma_dev *d, unsigned depth);
bool iser_srq_join(struct rdma_srq *s, struct rdma_conn *c);
int iser_srq_post(struct rdma_srq *s, struct wr_ctx *w);
void iser_srq_put(struct rdma_srq *s, uint32_t share);
uint32_t iser_srq_grant(struct xp_conn *xc, uint32_t floor, uint32_t want);
void *iser_dev_of(struct xp_conn *xc);
int iser_pool_register(void *dev, struct bufpool *p);
int iser_mem_reg(void *dev, void *addr, size_t len, bool peer_writes, uint32_t *rkey, void **handle);
void iser_mem_dereg(void *handle);
int iser_mem_reg_local(void *dev, void *addr, size_t len, uint32_t *lkey, void **handle);
const char *iser_dev_name(void *dev);

/* rdma_cm.c */
int iser_listen(const char *host, uint16_t port, struct reactor *r, const struct xp_listen_params *lp,
		struct xp_listener **out, char *err, size_t errlen);
void iser_unlisten(struct xp_listener *l);
int iser_start(struct xp_conn *xc, struct reactor *r);
int iser_connect(const char *host, uint16_t port, struct reactor *r, unsigned timeout_ms, struct xp_conn **out,
		 char *err, size_t errlen);

#endif
