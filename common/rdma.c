/*
 * iSER transport (RFC 7145) on rdma-core: rdma_cm connection management,
 * one QP and CQ per connection, Send/Recv for control PDUs (login included:
 * iSER-assisted from the first PDU), RDMA WRITE for Data-In and RDMA READ for
 * Data-Out straight from/into the reactor's registered buffer pool.
 *
 * A connection request arrives on the listener's reactor; its cm_id is moved
 * to an event channel of its own and the connection is set up on the reactor
 * it will live on.  Nothing is registered on the I/O path: receive and send
 * slots are registered per connection at setup, data buffers per pool slab.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/iser.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/reactor.h"
#include "common/transport.h"
#include "common/util.h"

#define RDMA_RX_DATA ISER_TARGET_RECV_DSL
#define RDMA_AHS_ROOM 64       /* an extended-CDB AHS of a 32-byte CDB fits */
#define RDMA_RX_SLOT (ISER_HDR_LEN + PDU_BHS_LEN + RDMA_AHS_ROOM + RDMA_RX_DATA)
#define RDMA_TX_SLOT (ISER_HDR_LEN + PDU_BHS_LEN + 8192) /* login responses carry text */
/* After QP -> error, how long the flushes may take before we stop waiting. */
#define RDMA_FLUSH_WAIT_MS 5000
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

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdma_dev *devs;

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
static _Atomic uint64_t iwarp_destroyed_ns;

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
	struct ibv_send_wr wr;
	struct ibv_sge sge;
};

struct rdma_conn {
	struct xp_conn xc;
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
	bool qp_ready, established, disconnected, in_poll;   /* closing, closed: c->xc.state */
	bool post_scheduled;                     /* post_flush() queued: WRs wait for one ibv_post_send */
	bool signal_writes;                      /* iWARP: see setup_qp */
	bool active;                             /* we connected (initiator side) */
	bool cq_armed;                           /* notification requested, event not yet seen */
	struct reactor_poller *poller;           /* busy/adaptive reactors poll the CQ */
	struct wr_ctx *fly;                      /* signaled READs/WRITEs not yet completed */
	struct reactor_timer *flush_timer;       /* close: give up waiting for flushes */
	bool forced;                             /* torn down without every flush: CQ not read */
	/* active side, while connecting (XP_CONNECTING): the step rdma_cm is at */
	const char *cstep;
	struct reactor_timer *gap_timer;         /* waiting out IWARP_RECONNECT_GAP_MS */
};

struct xp_listener {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct reactor *r;
	struct xp_listen_params lp;
	char name[80];            /* host:port, for messages */
};

static void conn_fail(struct rdma_conn *c, int err);
static void conn_free(struct xp_conn *xc);

static struct rdma_dev *dev_get(struct ibv_context *verbs)
{
	pthread_mutex_lock(&dev_lock);
	struct rdma_dev *d;
	for (d = devs; d; d = d->next)
		if (d->verbs == verbs && !atomic_load(&d->removed))
			goto out;
	d = calloc(1, sizeof(*d));
	if (!d)
		goto out;
	d->verbs = verbs;
	d->pd = ibv_alloc_pd(verbs);
	if (!d->pd || ibv_query_device(verbs, &d->attr)) {
		if (d->pd)
			ibv_dealloc_pd(d->pd);
		free(d);
		d = NULL;
		goto out;
	}
	d->next = devs;
	devs = d;
out:
	pthread_mutex_unlock(&dev_lock);
	return d;
}

/* Registering pool slabs: iWARP RDMA READ sinks need remote write access. */
static int pool_reg(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey, void **handle)
{
	struct rdma_dev *d = ctx;
	struct ibv_mr *mr = ibv_reg_mr(d->pd, addr, len,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		return -errno;
	*lkey = mr->lkey;
	*rkey = mr->rkey;
	*handle = mr;
	return 0;
}

static void pool_dereg(void *ctx, void *handle)
{
	(void)ctx;
	ibv_dereg_mr(handle);
}

/*
 * The reactor's pool registered with the connection's device (lazily, with
 * the first connection on that device there).  The index is the pool's, kept
 * on the connection, so the I/O path picks its keys without a search.
 */
static int pool_attach(struct rdma_conn *c, struct bufpool *p)
{
	struct bufpool_reg_ops ops = { .reg = pool_reg, .dereg = pool_dereg, .ctx = c->dev };
	/*
	 * Checked before registering: the removal's message to this reactor
	 * comes after the flag is set, so a pool that joins now still hears of it.
	 */
	int rc = atomic_load(&c->dev->removed) ? -ENODEV : bufpool_dev_attach(p, &ops);
	if (rc == -E2BIG)
		log_limited(LOG_WARN, "%s: iSER connection on RDMA device %s refused: this reactor's buffer pool is "
				      "registered with %d RDMA devices already, the most it serves",
			    c->xc.peer, ibv_get_device_name(c->id->verbs->device), BUFPOOL_MAX_DEVS);
	else if (rc < 0)
		log_limited(LOG_WARN, "%s: cannot register the buffer pool with RDMA device %s: %s", c->xc.peer,
			    ibv_get_device_name(c->id->verbs->device), strerror(-rc));
	if (rc < 0)
		return rc;
	c->pool = p;
	c->pool_dev = rc;
	return 0;
}

/* On every reactor: its pool lets go of a removed device (now, or with its last connection there). */
static void pool_dev_removed(void *arg)
{
	struct rdma_dev *d = arg;
	struct reactor *r = reactor_self();
	struct bufpool *p = reactor_bufpool(r);
	if (bufpool_dev_gone(p, bufpool_dev_find(p, d)))
		log_info("reactor %d: buffer pool deregistered from RDMA device %s (removed)", reactor_index(r),
			 ibv_get_device_name(d->verbs->device));
}

/*
 * A device went away (a connection's or a listener's DEVICE_REMOVAL, whichever
 * comes first: a connection closed by the peer's disconnect may never see
 * it).  Every reactor's pool hears of it; the PD stays (see
 * docs/architecture.md, "Registered buffers on several devices").  The
 * rdma_dev is never freed: a pool may still name it.
 */
static void dev_removed(struct rdma_dev *d)
{
	if (!d || atomic_exchange(&d->removed, true))
		return;
	log_warn("RDMA device %s removed: its connections close, every buffer pool lets go of it",
		 ibv_get_device_name(d->verbs->device));
	reactor_send_all(pool_dev_removed, d);
}

static struct rdma_dev *dev_find(struct ibv_context *verbs)
{
	pthread_mutex_lock(&dev_lock);
	struct rdma_dev *d = devs;
	while (d && (d->verbs != verbs || atomic_load(&d->removed)))
		d = d->next;
	pthread_mutex_unlock(&dev_lock);
	return d;
}

/* ---- shared receive queues ------------------------------------------- */

/*
 * One shared receive queue per reactor and device (target, srq_depth > 0):
 * receive memory is depth slots per reactor, whatever the number of
 * connections, instead of RDMA_QUEUE slots per connection.  The shares of
 * its connections never add up to more than the depth, so an initiator that
 * keeps to its command window never finds the queue empty (iWARP, having no
 * receiver-not-ready retry, would end the connection).  A share is the
 * window the session last advertised plus RDMA_SRQ_SPARE; each time the
 * session advertises a window, srq_grant() sizes it: at most an equal part
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

static struct rdma_srq *srqs;

static int srq_post(struct rdma_srq *s, struct wr_ctx *w)
{
	struct ibv_sge sge = { .addr = (uintptr_t)w->buf, .length = RDMA_RX_SLOT, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)w, .sg_list = &sge, .num_sge = 1 }, *bad;
	return -ibv_post_srq_recv(s->srq, &wr, &bad);
}

static void srq_free(struct rdma_srq *s)
{
	if (s->srq)
		ibv_destroy_srq(s->srq);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->mem)
		munmap(s->mem, (size_t)s->depth * RDMA_RX_SLOT);
	free(s->ctx);
	free(s);
}

static uint8_t *slots_alloc(size_t len);

/* The shared receive queue of (r, d), made with its first user; NULL when the device has none to give. */
static struct rdma_srq *srq_get(struct reactor *r, struct rdma_dev *d, unsigned depth)
{
	pthread_mutex_lock(&dev_lock);
	struct rdma_srq *s = srqs;
	while (s && (s->r != r || s->dev != d))
		s = s->next;
	pthread_mutex_unlock(&dev_lock);
	if (s)
		return s;
	depth = MIN(depth, (unsigned)d->attr.max_srq_wr);
	if (!d->attr.max_srq || depth < RDMA_SRQ_MIN_SHARE || !(s = calloc(1, sizeof(*s))))
		return NULL;
	*s = (struct rdma_srq){ .r = r, .dev = d, .depth = depth };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = depth, .max_sge = 1 } };
	s->mem = slots_alloc((size_t)depth * RDMA_RX_SLOT);
	s->ctx = calloc(depth, sizeof(*s->ctx));
	if (!s->mem || !s->ctx || !(s->mr = ibv_reg_mr(d->pd, s->mem, (size_t)depth * RDMA_RX_SLOT, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(s->srq = ibv_create_srq(d->pd, &sa))) {
		log_limited(LOG_WARN, "reactor %d: no shared receive queue of %u on RDMA device %s (%s): its connections "
				      "post receives of their own", reactor_index(r), depth,
			    ibv_get_device_name(d->verbs->device), strerror(errno));
		srq_free(s);
		return NULL;
	}
	for (uint32_t i = 0; i < depth; i++) {
		s->ctx[i] = (struct wr_ctx){ .kind = WR_RECV, .slot = i, .buf = s->mem + (size_t)i * RDMA_RX_SLOT };
		if (srq_post(s, &s->ctx[i])) {
			srq_free(s);
			return NULL;
		}
	}
	pthread_mutex_lock(&dev_lock);
	s->next = srqs;
	srqs = s;
	pthread_mutex_unlock(&dev_lock);
	log_info("reactor %d: shared receive queue on RDMA device %s: %u receives, %.1f MiB", reactor_index(r),
		 ibv_get_device_name(d->verbs->device), depth, (double)depth * RDMA_RX_SLOT / (1 << 20));
	return s;
}

/* A new connection takes the smallest share of s; false when even that is promised to others. */
static bool srq_join(struct rdma_srq *s, struct rdma_conn *c)
{
	if (s->depth - s->promised < RDMA_SRQ_MIN_SHARE)
		return false;
	s->promised += RDMA_SRQ_MIN_SHARE;
	s->users++;
	c->srq_share = RDMA_SRQ_MIN_SHARE;
	return true;
}

/* transport_ops.grant: see struct rdma_srq. */
static uint32_t srq_grant(struct xp_conn *xc, uint32_t floor, uint32_t want)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	struct rdma_srq *s = c->srq;
	if (!s)
		return want;
	uint32_t others = s->promised - c->srq_share;
	/* What the others leave; never below our old window, which our old share covered. */
	uint32_t room = s->depth - others - RDMA_SRQ_SPARE;
	uint32_t fair = MAX(s->depth / (s->users + 1), (uint32_t)RDMA_SRQ_MIN_SHARE) - RDMA_SRQ_SPARE;
	uint32_t g = MAX(floor, MIN(want, MIN(fair, room)));
	c->srq_share = MAX(g, (uint32_t)RDMA_SRQ_MIN_WINDOW) + RDMA_SRQ_SPARE;
	s->promised = others + c->srq_share;
	return g;
}

/* A connection gives its share back; the last one takes the queue with it (its QP is gone already). */
static void srq_put(struct rdma_srq *s, uint32_t share)
{
	s->promised -= share;
	if (--s->users)
		return;
	pthread_mutex_lock(&dev_lock);
	struct rdma_srq **pp = &srqs;
	while (*pp != s)
		pp = &(*pp)->next;
	*pp = s->next;
	pthread_mutex_unlock(&dev_lock);
	log_info("reactor %d: shared receive queue on RDMA device %s released with its last connection",
		 reactor_index(s->r), ibv_get_device_name(s->dev->verbs->device));
	srq_free(s);
}

/* ---- posting work requests ------------------------------------------- */

static int post_recv(struct rdma_conn *c, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->rx_mem + (size_t)slot * RDMA_RX_SLOT),
		.length = RDMA_RX_SLOT,
		.lkey = c->rx_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)&c->rx_ctx[slot], .sg_list = &sge, .num_sge = 1 }, *bad;
	int rc = ibv_post_recv(c->id->qp, &wr, &bad);
	if (!rc)
		c->wrs_out++;
	return rc ? -rc : 0;
}

/*
 * A receive's buffer is free again.  A shared one always goes back to its
 * queue (other connections count on it, even while this one closes); one of
 * the connection's own only while the connection lives.
 */
static void recv_done(struct rdma_conn *c, struct wr_ctx *w)
{
	if (c->srq)
		srq_post(c->srq, w);
	else if (!xp_closing(&c->xc))
		post_recv(c, w->slot);
}

static void post_flush(void *arg);

/*
 * Queue a send-queue WR (w NULL: none), and post what waits, as far as
 * there is room and read credit, with one ibv_post_send.  One post is one
 * doorbell: on rxe and siw a system call, on a hardware NIC a write to the
 * device.  So a WR queued while a CQ poll runs waits for the poll's end
 * (poll_cq posts then), and one queued anywhere else (an io_uring
 * completion, an upcall from the iSCSI layer) for a deferred call at the
 * start of the reactor's next iteration, before it sleeps: every WR of one
 * iteration, e.g. the RDMA WRITEs and Sends of 32 reads, goes in one post.
 */
static void post_wr(struct rdma_conn *c, struct wr_ctx *w)
{
	if (w) {
		w->next = NULL;
		if (c->wrq_tail)
			c->wrq_tail->next = w;
		else
			c->wrq_head = w;
		c->wrq_tail = w;
		if (c->in_poll || c->post_scheduled)
			return;
		if (c->xc.reactor && !xp_defer(&c->xc, post_flush)) {
			c->post_scheduled = true;
			return;
		}
	}
	struct wr_ctx *first = NULL, *last = NULL;
	while (c->wrq_head && !xp_closing(&c->xc)) {
		w = c->wrq_head;
		bool read = w->kind == WR_READ;
		/* Keep one entry for a signaled WR that frees the unsignaled ones before it. */
		if (c->sq_free < 2 || (read && c->reads_out >= c->ord))
			break;
		c->wrq_head = w->next;
		if (!c->wrq_head)
			c->wrq_tail = NULL;
		bool signaled = w->kind != WR_WRITE || c->signal_writes || c->unsignaled >= c->sq_size / 2;
		w->wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
		/*
		 * A Send that fits goes inline: the provider copies it at post
		 * time instead of fetching it from the slot later (the small-
		 * message latency win).  The slot could be reused at once, but it
		 * still goes back at the Send's completion, which has to be
		 * signaled anyway for the PDU's done() and the send-queue room.
		 */
		bool inl = w->kind == WR_SEND && w->sge.length <= c->max_inline;
		if (inl)
			w->wr.send_flags |= IBV_SEND_INLINE;
		w->covers = signaled ? c->unsignaled + 1 : 0;
		/*
		 * An unsignaled WR still completes when it fails or is flushed
		 * (rxe and siw both report it): it carries no context (wr_id 0), so
		 * that completion never points at freed memory.
		 */
		if (!signaled)
			w->wr.wr_id = 0;
		w->inl = inl;
		/* Counted as posted now: the send queue's room and read credit are spent. */
		c->sq_free--;
		c->wrs_out += signaled;
		if (signaled)
			c->unsignaled = 0;
		else
			c->unsignaled++;
		if (read)
			c->reads_out++;
		w->wr.next = NULL;
		if (last)
			last->wr.next = &w->wr;
		else
			first = w;
		last = w;
	}
	if (!first)
		return;
	struct ibv_send_wr *bad = NULL;
	int rc = ibv_post_send(c->id->qp, &first->wr, &bad);
	XP_STAT_ADD(&c->xc, send_posts, 1);
	/* Account for what the device took; on a failure, the rest goes back to the queue. */
	struct wr_ctx *rest = NULL, *rest_tail = NULL;
	for (struct ibv_send_wr *x = &first->wr, *nx; x; x = nx) {
		nx = x->next;
		w = container_of(x, struct wr_ctx, wr);
		bool signaled = x->send_flags & IBV_SEND_SIGNALED;
		if (rc && (!bad || x == bad || rest)) {
			c->wrs_out -= signaled;   /* never reaches the CQ */
			w->next = NULL;
			if (rest_tail)
				rest_tail->next = w;
			else
				rest = w;
			rest_tail = w;
			continue;
		}
		if (w->kind == WR_READ) {
			XP_STAT_ADD(&c->xc, rdma_reads, 1);
			XP_STAT_ADD(&c->xc, rdma_read_bytes, w->sge.length);
		} else if (w->kind == WR_WRITE) {
			XP_STAT_ADD(&c->xc, rdma_writes, 1);
			XP_STAT_ADD(&c->xc, rdma_write_bytes, w->sge.length);
		} else {
			XP_STAT_ADD(&c->xc, sends, 1);
			XP_STAT_ADD(&c->xc, inline_sends, w->inl);
			XP_STAT_ADD(&c->xc, pdus_out, w->pdu != NULL); /* not the Hello reply */
			XP_STAT_ADD(&c->xc, bytes_out, w->sge.length);
		}
		/* An unsignaled RDMA WRITE never completes on its own: its context is done. */
		if (!signaled) {
			free(w);
		} else if (w->kind != WR_SEND) {
			w->fprev = NULL;
			w->fnext = c->fly;
			if (c->fly)
				c->fly->fprev = w;
			c->fly = w;
		}
	}
	if (rc) {
		log_warn("%s: ibv_post_send: %s", c->xc.peer, strerror(rc));
		/* Not posted: back at the head of the queue, which fail_queues() empties. */
		if (rest) {
			rest_tail->next = c->wrq_head;
			if (!c->wrq_head)
				c->wrq_tail = rest_tail;
			c->wrq_head = rest;
		}
		conn_fail(c, -rc);
	}
}

static void post_flush(void *arg)
{
	struct rdma_conn *c = arg;
	if (xp_deferred_gone(&c->xc))
		return;
	c->post_scheduled = false;
	post_wr(c, NULL);
}

static void send_pdu_now(struct rdma_conn *c, struct xp_pdu *p)
{
	uint32_t slot = c->tx_free[--c->ntx_free];
	uint8_t *m = c->tx_mem + (size_t)slot * RDMA_TX_SLOT;
	struct iser_hdr *h = (void *)m;
	memset(h, 0, sizeof(*h));
	h->flags = ISER_OP_ISCSI_CTRL;
	/* Only a command of ours names buffers; the target side's PDUs never do. */
	if (c->active && p->read_stag_valid) {
		h->flags |= ISER_RSV;
		h->read_stag = htobe32(p->read_stag);
		h->read_va = htobe64(p->read_va);
	}
	if (c->active && p->write_stag_valid) {
		h->flags |= ISER_WSV;
		h->write_stag = htobe32(p->write_stag);
		h->write_va = htobe64(p->write_va);
	}
	memcpy(m + ISER_HDR_LEN, p->bhs, PDU_BHS_LEN);
	uint32_t len = ISER_HDR_LEN + PDU_BHS_LEN;
	memcpy(m + len, p->ahs, p->ahs_len);
	len += p->ahs_len;
	memcpy(m + len, p->data, p->data_len);
	len += p->data_len;
	struct wr_ctx *w = &c->tx_ctx[slot];
	w->kind = WR_SEND;
	w->slot = slot;
	w->pdu = p;
	w->sge = (struct ibv_sge){ .addr = (uintptr_t)m, .length = len, .lkey = c->tx_mr->lkey };
	w->wr = (struct ibv_send_wr){ .wr_id = (uintptr_t)w, .sg_list = &w->sge, .num_sge = 1,
				      .opcode = IBV_WR_SEND };
	post_wr(c, w);
}

static void pump_tx(struct rdma_conn *c)
{
	while (c->txq_head && c->ntx_free && !xp_closing(&c->xc)) {
		struct xp_pdu *p = c->txq_head;
		c->txq_head = p->next;
		if (!c->txq_head)
			c->txq_tail = NULL;
		send_pdu_now(c, p);
	}
}

static void rdma_send(struct xp_conn *xc, struct xp_pdu *p)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	p->next = NULL;
	if (!xp_closing(&c->xc) && p->ahs_len + p->data_len > RDMA_TX_SLOT - ISER_HDR_LEN - PDU_BHS_LEN) {
		/* Nothing the peer could receive: the connection cannot go on. */
		log_err("%s: PDU of %u bytes does not fit an iSER send slot, closing", c->xc.peer, p->data_len);
		conn_fail(c, -EMSGSIZE);
	}
	if (xp_closing(xc)) {
		xp_send_dead(xc, p);
		return;
	}
	if (c->txq_tail)
		c->txq_tail->next = p;
	else
		c->txq_head = p;
	c->txq_tail = p;
	pump_tx(c);
}

static int rdma_data(struct rdma_conn *c, enum wr_kind kind, struct buf *b, uint32_t off, uint32_t len, uint64_t va,
		     uint32_t stag, void (*cb)(void *arg, int err), void *arg)
{
	if (xp_closing(&c->xc))
		return -ECONNRESET;
	if (!b || (uint64_t)off + len > b->cap || !b->keys)
		return -EINVAL;
	uint32_t lkey = b->keys[c->pool_dev].lkey;
	if (!lkey)
		return -EINVAL;
	struct wr_ctx *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->kind = kind;
	w->cb = cb;
	w->arg = arg;
	w->sge = (struct ibv_sge){ .addr = (uintptr_t)(b->data + off), .length = len, .lkey = lkey };
	w->wr = (struct ibv_send_wr){ .wr_id = (uintptr_t)w, .sg_list = &w->sge, .num_sge = 1,
				      .opcode = kind == WR_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE };
	w->wr.wr.rdma.remote_addr = va;
	w->wr.wr.rdma.rkey = stag;
	post_wr(c, w);
	return 0;
}

static int rdma_write(struct xp_conn *xc, struct buf *b, uint32_t off, uint32_t len, uint64_t va, uint32_t stag,
		      void (*cb)(void *arg, int err), void *arg)
{
	return rdma_data((struct rdma_conn *)xc, WR_WRITE, b, off, len, va, stag, cb, arg);
}

static int rdma_read(struct xp_conn *xc, struct buf *b, uint32_t off, uint32_t len, uint64_t va, uint32_t stag,
		     void (*cb)(void *arg, int err), void *arg)
{
	return rdma_data((struct rdma_conn *)xc, WR_READ, b, off, len, va, stag, cb, arg);
}

/* ---- receiving --------------------------------------------------------- */

static void hello_reply(struct rdma_conn *c, const struct iser_hello *h)
{
	/* We speak iSER version 1 only, and never require Hello ourselves. */
	uint8_t maxv = h->versions >> 4, minv = h->versions & 0x0f;
	if (!c->ntx_free)
		return;
	uint32_t slot = c->tx_free[--c->ntx_free];
	struct iser_hello *r = (void *)(c->tx_mem + (size_t)slot * RDMA_TX_SLOT);
	memset(r, 0, sizeof(*r));
	r->flags = ISER_OP_HELLO_REPLY | (minv > 1 || maxv < 1 ? ISER_HELLO_REJECT : 0);
	r->versions = 1 << 4 | 1;
	r->ird_ord = htobe16((uint16_t)c->ord);
	struct wr_ctx *w = &c->tx_ctx[slot];
	w->kind = WR_SEND;
	w->slot = slot;
	w->pdu = NULL;
	w->sge = (struct ibv_sge){ .addr = (uintptr_t)r, .length = sizeof(*r), .lkey = c->tx_mr->lkey };
	w->wr = (struct ibv_send_wr){ .wr_id = (uintptr_t)w, .sg_list = &w->sge, .num_sge = 1,
				      .opcode = IBV_WR_SEND };
	post_wr(c, w);
}

static void on_recv(struct rdma_conn *c, struct wr_ctx *w, uint32_t byte_len)
{
	uint8_t *m = w->buf;
	const struct iser_hdr *ih = (const void *)m;
	XP_STAT_ADD(&c->xc, recvs, 1);
	XP_STAT_ADD(&c->xc, bytes_in, byte_len);
	if (byte_len < ISER_HDR_LEN) {
		log_info("%s: iSER message of %u bytes, closing", c->xc.peer, byte_len);
		conn_fail(c, -EPROTO);
		return;
	}
	uint8_t op = ih->flags & ISER_OP_MASK;
	if (op == ISER_OP_HELLO) {
		hello_reply(c, (const void *)m);
		return;
	}
	if (op != ISER_OP_ISCSI_CTRL || byte_len < ISER_HDR_LEN + PDU_BHS_LEN) {
		log_info("%s: unexpected iSER message (flags 0x%02x, %u bytes), closing", c->xc.peer, ih->flags,
			 byte_len);
		conn_fail(c, -EPROTO);
		return;
	}
	struct xp_rx rx = { 0 };
	XP_STAT_ADD(&c->xc, pdus_in, 1);
	memcpy(rx.bhs, m + ISER_HDR_LEN, PDU_BHS_LEN);
	rx.ahs_len = pdu_ahs_bytes(rx.bhs);
	rx.data_len = pdu_dlen(rx.bhs);
	uint64_t need = (uint64_t)ISER_HDR_LEN + PDU_BHS_LEN + rx.ahs_len + rx.data_len;
	if (need > byte_len) {
		log_info("%s: PDU claims %llu bytes, message has %u, closing", c->xc.peer, (unsigned long long)need,
			 byte_len);
		conn_fail(c, -EPROTO);
		return;
	}
	rx.ahs = rx.ahs_len ? m + ISER_HDR_LEN + PDU_BHS_LEN : NULL;
	rx.data = rx.data_len ? m + ISER_HDR_LEN + PDU_BHS_LEN + rx.ahs_len : NULL;
	rx.write_stag_valid = ih->flags & ISER_WSV;
	rx.read_stag_valid = ih->flags & ISER_RSV;
	rx.write_stag = be32toh(ih->write_stag);
	rx.write_va = be64toh(ih->write_va);
	rx.read_stag = be32toh(ih->read_stag);
	rx.read_va = be64toh(ih->read_va);
	uint8_t *dest = NULL;
	if (c->xc.up->rx_bhs(&c->xc, rx.bhs, &dest) < 0) {
		conn_fail(c, -EPROTO);
		return;
	}
	if (dest == XP_DISCARD) {
		rx.data = NULL;
		rx.data_len = 0;
	}
	/* Data already sits in our receive slot: never "placed". */
	c->xc.up->rx_pdu(&c->xc, &rx);
}

/* A send slot's PDU is done (once: the slot forgets it, so a forced teardown cannot repeat it). */
static void send_done(struct wr_ctx *w, int err)
{
	struct xp_pdu *p = w->pdu;
	w->pdu = NULL;
	if (p && p->done)
		p->done(p, err);
}

static void fly_unlink(struct rdma_conn *c, struct wr_ctx *w)
{
	if (w->fprev)
		w->fprev->fnext = w->fnext;
	else
		c->fly = w->fnext;
	if (w->fnext)
		w->fnext->fprev = w->fprev;
}

static void complete(struct rdma_conn *c, struct ibv_wc *wc)
{
	struct wr_ctx *w = (struct wr_ctx *)(uintptr_t)wc->wr_id;
	if (!w) {
		/* A failed or flushed unsignaled RDMA WRITE: not counted, nothing to free. */
		if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR && !xp_closing(&c->xc)) {
			log_info("%s: RDMA WRITE failed: %s", c->xc.peer, ibv_wc_status_str(wc->status));
			conn_fail(c, -EIO);
		}
		return;
	}
	/* Flushed: the QP went to error (peer gone or our close), not a fault of this WR. */
	int err = wc->status == IBV_WC_SUCCESS ? 0 : wc->status == IBV_WC_WR_FLUSH_ERR ? -ECONNRESET : -EIO;
	if (w->kind != WR_RECV || !c->srq)
		c->wrs_out--;
	if (err == -EIO && !xp_closing(&c->xc))
		log_info("%s: %s work request failed: %s (vendor error 0x%x)", c->xc.peer,
			 w->kind == WR_RECV ? "receive" : w->kind == WR_SEND ? "send" : w->kind == WR_READ ? "RDMA READ" : "RDMA WRITE",
			 ibv_wc_status_str(wc->status), wc->vendor_err);
	if (w->kind == WR_RECV) {
		if (!err && !xp_closing(&c->xc))
			on_recv(c, w, wc->byte_len);
		else if (err)
			conn_fail(c, err);
		recv_done(c, w);
		return;
	}
	c->sq_free += w->covers;
	if (w->kind == WR_READ)
		c->reads_out--;
	if (w->kind == WR_SEND) {
		c->tx_free[c->ntx_free++] = w->slot;
		send_done(w, err);
	} else {
		fly_unlink(c, w);
		if (w->cb)
			w->cb(w->arg, err);
		free(w);
	}
	if (err)
		conn_fail(c, err);
}

static void maybe_finish(struct rdma_conn *c);

static int poll_cq(struct rdma_conn *c)
{
	struct ibv_wc wc[32];
	int n, total = 0;
	/* After a forced teardown the CQ may still name contexts we freed. */
	if (c->forced)
		return 0;
	c->in_poll = true;
	XP_STAT_ADD(&c->xc, cq_polls, 1);
	while ((n = ibv_poll_cq(c->cq, 32, wc)) > 0) {
		total += n;
		for (int i = 0; i < n; i++)
			complete(c, &wc[i]);
	}
	XP_STAT_ADD(&c->xc, completions, (uint64_t)total);
	XP_STAT_ADD(&c->xc, cq_empty_polls, total == 0);
	if (!xp_closing(&c->xc))
		pump_tx(c);   /* PDUs that waited for a send slot the poll freed: queued, posted below */
	c->in_poll = false;
	if (!xp_closing(&c->xc))
		post_wr(c, NULL);
	maybe_finish(c);
	return total;
}

static void on_cq_event(void *arg, uint32_t events)
{
	struct rdma_conn *c = arg;
	struct ibv_cq *cq;
	void *ctx;
	(void)events;
	if (ibv_get_cq_event(c->cc, &cq, &ctx))
		return;
	ibv_ack_cq_events(cq, 1);
	c->cq_armed = false;
	/* A polling reactor spins now and re-arms only when it goes to sleep. */
	if (!c->poller) {
		ibv_req_notify_cq(cq, 0);
		c->cq_armed = true;
	}
	poll_cq(c);
}

static int cq_poll(void *arg)
{
	return poll_cq(arg);
}

/* Adaptive reactor about to sleep: arm, then catch what came before the arm. */
static int cq_arm(void *arg)
{
	struct rdma_conn *c = arg;
	if (!c->cq_armed) {
		ibv_req_notify_cq(c->cq, 0);
		c->cq_armed = true;
	}
	return poll_cq(c);
}

/* ---- teardown --------------------------------------------------------- */

static void fail_queues(struct rdma_conn *c)
{
	c->txq_tail = NULL;
	xp_fail_pdus(&c->txq_head, -ECONNRESET);
	while (c->wrq_head) {
		struct wr_ctx *w = c->wrq_head;
		c->wrq_head = w->next;
		if (w->kind == WR_SEND) {
			c->tx_free[c->ntx_free++] = w->slot;
			send_done(w, -ECONNRESET);
		} else {
			if (w->cb)
				w->cb(w->arg, -ECONNRESET);
			free(w);
		}
	}
	c->wrq_tail = NULL;
}

/* The upper layer hears of the close once every posted WR has flushed. */
static void maybe_finish(struct rdma_conn *c)
{
	if (c->xc.state != XP_CLOSING || c->in_poll)
		return;
	if (c->wrs_out && c->qp_ready)
		return;
	xp_closed_later(&c->xc);
}

static void conn_fail(struct rdma_conn *c, int err)
{
	/* Flushed work requests after our own close are no error of the connection. */
	if (!c->xc.err && !xp_closing(&c->xc))
		c->xc.err = err;
	c->xc.ops->close(&c->xc);
}

/*
 * The device never flushed some posted WRs.  siw does not flush a WR that a
 * user-space QP posts after the QP went to error (the peer's disconnect can
 * get there first): its completion never comes, and the connection would
 * stay half-closed, holding its QP and 2.6 MiB of slots, for ever.  Destroy
 * the QP (the device stops touching our buffers), then end what was in
 * flight as the flush would have.
 */
static void flush_timeout(void *arg)
{
	struct rdma_conn *c = arg;
	c->flush_timer = NULL;
	if (c->xc.state == XP_CLOSED)
		return;
	log_info("%s: %u work requests not flushed %d ms after the close; freeing the connection anyway",
		 c->xc.peer, c->wrs_out, RDMA_FLUSH_WAIT_MS);
	c->forced = true;
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	for (uint32_t i = 0; i < RDMA_QUEUE; i++)
		send_done(&c->tx_ctx[i], -ECONNRESET);
	while (c->fly) {
		struct wr_ctx *w = c->fly;
		fly_unlink(c, w);
		if (w->cb)
			w->cb(w->arg, -ECONNRESET);
		free(w);
	}
	c->wrs_out = 0;
	xp_closed_now(&c->xc);
}

static void rdma_close(struct xp_conn *xc)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	if (!xp_close_begin(xc))
		return;
	if (c->gap_timer)
		reactor_timer_cancel(c->xc.reactor, c->gap_timer);
	c->gap_timer = NULL;
	fail_queues(c);
	if (c->qp_ready) {
		/* Moving the QP to error flushes every posted WR through the CQ. */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		ibv_modify_qp(c->id->qp, &a, IBV_QP_STATE);
		if (c->xc.reactor)
			c->flush_timer = reactor_timer_add(c->xc.reactor, RDMA_FLUSH_WAIT_MS, flush_timeout, c);
	}
	if (c->established && !c->disconnected)
		rdma_disconnect(c->id);
	maybe_finish(c);
}

static void rdma_destroy(struct xp_conn *xc)
{
	if (xc)
		xp_release(xc);
}

static void conn_free(struct xp_conn *xc)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	if (c->xc.reactor) {
		if (c->flush_timer)
			reactor_timer_cancel(c->xc.reactor, c->flush_timer);
		xp_connect_timer_stop(xc);
		if (c->gap_timer)
			reactor_timer_cancel(c->xc.reactor, c->gap_timer);
		reactor_poller_del(c->xc.reactor, c->poller);
		if (c->cc)
			reactor_del_fd(c->xc.reactor, c->cc->fd);
		if (c->ch)
			reactor_del_fd(c->xc.reactor, c->ch->fd);
	}
	if (c->active && c->signal_writes)
		atomic_store(&iwarp_destroyed_ns, reactor_now_ns());
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	/* Shared receives this QP took whose flush came after the last send's: back to the queue. */
	struct ibv_wc wc;
	while (c->srq && c->cq && !c->forced && ibv_poll_cq(c->cq, 1, &wc) > 0)
		if (wc.wr_id && ((struct wr_ctx *)(uintptr_t)wc.wr_id)->kind == WR_RECV)
			srq_post(c->srq, (struct wr_ctx *)(uintptr_t)wc.wr_id);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cc)
		ibv_destroy_comp_channel(c->cc);
	if (c->srq)
		srq_put(c->srq, c->srq_share);
	if (c->rx_mr)
		ibv_dereg_mr(c->rx_mr);
	if (c->tx_mr)
		ibv_dereg_mr(c->tx_mr);
	if (c->rx_mem)
		munmap(c->rx_mem, (size_t)RDMA_QUEUE * RDMA_RX_SLOT);
	if (c->tx_mem)
		munmap(c->tx_mem, (size_t)RDMA_QUEUE * RDMA_TX_SLOT);
	/* Before the id: a removed device's last id may close its context, and our MRs must go first. */
	if (c->pool && bufpool_dev_detach(c->pool, c->pool_dev))
		log_info("reactor %d: buffer pool deregistered from RDMA device %s (removed) with its last "
			 "connection there", c->xc.reactor ? reactor_index(c->xc.reactor) : -1,
			 ibv_get_device_name(c->dev->verbs->device));
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c);
}

/* ---- connection events ------------------------------------------------ */

static void connect_step(struct rdma_conn *c, enum rdma_cm_event_type type, int status);

static void on_conn_event(void *arg, uint32_t events)
{
	struct rdma_conn *c = arg;
	struct rdma_cm_event *ev;
	(void)events;
	while (rdma_get_cm_event(c->ch, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		int status = ev->status;
		rdma_ack_cm_event(ev);
		if (c->xc.state == XP_CONNECTING) {
			connect_step(c, type, status);
			continue;
		}
		switch (type) {
		case RDMA_CM_EVENT_ESTABLISHED:
			c->established = true;
			log_debug("%s: iSER connection established", c->xc.peer);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			log_limited(LOG_WARN, "%s: RDMA device %s removed, closing the connection", c->xc.peer,
				    ibv_get_device_name(c->id->verbs->device));
			dev_removed(c->dev);
			/* fall through */
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			c->disconnected = true;
			conn_fail(c, -ECONNRESET);
			break;
		default:
			break;
		}
	}
}

struct accept_msg {
	struct rdma_conn *c;
	struct xp_listen_params lp;   /* a copy: the listener may be gone when this runs */
	uint8_t initiator_depth, responder_resources;
};

static uint8_t *slots_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static int setup_qp(struct rdma_conn *c, struct reactor *r, unsigned srq_depth)
{
	c->dev = dev_get(c->id->verbs);
	if (!c->dev)
		return -ENODEV;
	if (srq_depth && (c->srq = srq_get(r, c->dev, srq_depth)) && !srq_join(c->srq, c)) {
		log_limited(LOG_INFO, "%s: the shared receive queue of reactor %d is promised in full: this connection "
				      "posts receives of its own", c->xc.peer, reactor_index(r));
		c->srq = NULL;
	}
	c->xc.shared_rx = c->srq;
	/* The initiator registers its session's pool itself (rdma_pool_register). */
	int rc = c->active ? 0 : pool_attach(c, reactor_bufpool(r));
	if (rc)
		return rc;
	c->cc = ibv_create_comp_channel(c->id->verbs);
	if (!c->cc)
		return -errno;
	c->sq_size = MIN((uint32_t)c->dev->attr.max_qp_wr, 2 * RDMA_QUEUE + 16);
	int cqe = (int)MIN((uint32_t)c->dev->attr.max_cqe, c->sq_size + RDMA_QUEUE + 16);
	c->cq = ibv_create_cq(c->id->verbs, cqe, c, c->cc, 0);
	if (!c->cq)
		return -errno;
	/* A busy reactor never sleeps, so its CQs are never armed. */
	if (reactor_mode(r) != REACTOR_BUSY_POLL) {
		if (ibv_req_notify_cq(c->cq, 0))
			return -EIO;
		c->cq_armed = true;
	}
	if (reactor_mode(r) != REACTOR_EVENT && !(c->poller = reactor_poller_add(r, cq_poll, cq_arm, c)))
		return -ENOMEM;
	static const uint32_t inline_try[] = { RDMA_INLINE_WANT, RDMA_INLINE_MIN, 0 };
	struct ibv_qp_init_attr qa;
	for (size_t i = 0;; i++) {
		qa = (struct ibv_qp_init_attr){
			.send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = c->sq_size, .max_recv_wr = c->srq ? 0 : RDMA_QUEUE, .max_send_sge = 1,
				 .max_recv_sge = 1, .max_inline_data = inline_try[i] },
			.srq = c->srq ? c->srq->srq : NULL,
		};
		if (!rdma_create_qp(c->id, c->dev->pd, &qa))
			break;
		if (errno != EINVAL || i + 1 == ARRAY_SIZE(inline_try))
			return -errno;
	}
	/* What the provider granted (it may round up): the bound on inline Sends. */
	c->max_inline = qa.cap.max_inline_data;
	/*
	 * Said once per device by the target; the initiator's tools keep their
	 * stderr for what the user asked (iseradm map prints the device there).
	 */
	if (c->active)
		log_debug("RDMA device %s: %u bytes of inline data per Send", ibv_get_device_name(c->id->verbs->device),
			  c->max_inline);
	else if (!atomic_exchange(&c->dev->inline_told, true))
		log_info("RDMA device %s: %u bytes of inline data per Send", ibv_get_device_name(c->id->verbs->device),
			 c->max_inline);
	c->sq_size = qa.cap.max_send_wr;
	c->sq_free = c->sq_size;
	/*
	 * siw sends an unsignaled WR of a page or more zero-copy: TCP keeps
	 * references to our pages after the WR is done, so a later signaled
	 * completion (the response Send) does not mean the Data-In left, and
	 * reusing the buffer then changes data still queued in TCP (fio saw
	 * 4 KiB of a read come back wrong).  A signaled WRITE is copied into
	 * the socket before it completes; iWARP devices get every WRITE
	 * signaled, and the buffer is held until the response Send completes.
	 */
	c->signal_writes = c->id->verbs->device->transport_type == IBV_TRANSPORT_IWARP;
	c->qp_ready = true;
	/* mmap, not malloc: these go back to the system when the connection ends. */
	c->tx_mem = slots_alloc((size_t)RDMA_QUEUE * RDMA_TX_SLOT);
	if (!c->tx_mem || !(c->tx_mr = ibv_reg_mr(c->dev->pd, c->tx_mem, (size_t)RDMA_QUEUE * RDMA_TX_SLOT, 0)))
		return c->tx_mem ? -errno : -ENOMEM;
	for (uint32_t i = 0; i < RDMA_QUEUE; i++)
		c->tx_free[i] = RDMA_QUEUE - 1 - i;
	if (!c->srq) {
		c->rx_mem = slots_alloc((size_t)RDMA_QUEUE * RDMA_RX_SLOT);
		if (!c->rx_mem ||
		    !(c->rx_mr = ibv_reg_mr(c->dev->pd, c->rx_mem, (size_t)RDMA_QUEUE * RDMA_RX_SLOT, IBV_ACCESS_LOCAL_WRITE)))
			return c->rx_mem ? -errno : -ENOMEM;
		for (uint32_t i = 0; i < RDMA_QUEUE; i++) {
			c->rx_ctx[i] = (struct wr_ctx){ .kind = WR_RECV, .slot = i,
							.buf = c->rx_mem + (size_t)i * RDMA_RX_SLOT };
			if ((rc = post_recv(c, i)))
				return rc;
		}
	}
	c->ntx_free = RDMA_QUEUE;
	if ((rc = reactor_add_fd(r, c->cc->fd, EPOLLIN, on_cq_event, c)))
		return rc;
	fcntl(c->cc->fd, F_SETFL, fcntl(c->cc->fd, F_GETFL) | O_NONBLOCK);
	return 0;
}

/* On the connection's reactor: QP, buffers, receives, then accept. */
static void accept_on_reactor(void *arg)
{
	struct accept_msg *m = arg;
	struct rdma_conn *c = m->c;
	struct reactor *r = reactor_self();
	c->xc.reactor = r;
	int rc = setup_qp(c, r, m->lp.srq_depth);
	if (!rc) {
		fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK);
		rc = reactor_add_fd(r, c->ch->fd, EPOLLIN, on_conn_event, c);
	}
	if (!rc) {
		c->ord = MIN((uint32_t)c->dev->attr.max_qp_init_rd_atom, MIN(m->responder_resources, RDMA_MAX_RD_ATOM));
		if (!c->ord)
			c->ord = 1;
		struct iser_cm_hdr hdr = { .flags = ISER_CM_ZBVA_NOT_SUPPORTED | ISER_CM_SEND_W_INV_NOT_SUPPORTED };
		struct rdma_conn_param p = {
			.private_data = &hdr, .private_data_len = sizeof(hdr),
			.initiator_depth = (uint8_t)c->ord,
			.responder_resources = (uint8_t)MIN((uint32_t)c->dev->attr.max_qp_rd_atom, m->initiator_depth),
			.rnr_retry_count = 7,
		};
		if (rdma_accept(c->id, &p))
			rc = -errno;
	}
	struct xp_listen_params lp = m->lp;
	free(m);
	if (rc) {
		log_limited(LOG_WARN, "%s: cannot accept iSER connection: %s", c->xc.peer, strerror(-rc));
		rdma_reject(c->id, NULL, 0);
		c->qp_ready = false;
		if (lp.dropped)
			lp.dropped(lp.arg, &c->xc);
		rdma_destroy(&c->xc);
		return;
	}
	/* The iSCSI layer takes it from here: it calls start() (which has nothing left to do). */
	lp.accept(lp.arg, &c->xc);
}

static void on_listen_event(void *arg, uint32_t events)
{
	struct xp_listener *l = arg;
	struct rdma_cm_event *ev;
	(void)events;
	while (rdma_get_cm_event(l->ch, &ev) == 0) {
		if (ev->event == RDMA_CM_EVENT_DEVICE_REMOVAL) {
			/* No connection may be left to hear of it; the listener stays until the portal goes. */
			log_warn("iSER portal %s: RDMA device %s removed", l->name,
				 l->id->verbs ? ibv_get_device_name(l->id->verbs->device) : "?");
			if (l->id->verbs)
				dev_removed(dev_find(l->id->verbs));
		}
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		struct rdma_cm_id *id = ev->id;
		struct accept_msg *m = calloc(1, sizeof(*m));
		errno = 0;
		struct rdma_conn *c = calloc(1, sizeof(*c));
		if (m) {
			m->initiator_depth = ev->param.conn.initiator_depth;
			m->responder_resources = ev->param.conn.responder_resources;
		}
		const struct iser_cm_hdr *ph = ev->param.conn.private_data;
		if (ph && ev->param.conn.private_data_len >= sizeof(*ph))
			log_debug("iSER connect request, private data flags 0x%02x", ph->flags);
		rdma_ack_cm_event(ev);
		if (!m || !c || !(c->ch = rdma_create_event_channel()) || rdma_migrate_id(id, c->ch)) {
			log_warn("cannot take an iSER connection: %s", strerror(errno ? errno : ENOMEM));
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			if (c && c->ch)
				rdma_destroy_event_channel(c->ch);
			free(c);
			free(m);
			continue;
		}
		c->id = id;
		c->xc.ops = &iser_transport;
		c->xc.free = conn_free;
		c->xc.state = XP_UP;   /* accepted: the CM's ESTABLISHED follows (c->established) */
		c->xc.max_ctrl_data = ISER_INITIATOR_RX_SIZE - ISER_HDR_LEN - PDU_BHS_LEN;
		netaddr_format(rdma_get_peer_addr(id), c->xc.peer, sizeof(c->xc.peer), c->xc.peer_ip,
			       sizeof(c->xc.peer_ip), NULL);
		netaddr_format(rdma_get_local_addr(id), c->xc.local, sizeof(c->xc.local), c->xc.local_ip,
		       sizeof(c->xc.local_ip), &c->xc.local_port);
		/* Refused before it costs a queue pair and 2.6 MiB of slots. */
		if (l->lp.admit && !l->lp.admit(l->lp.arg, &c->xc)) {
			rdma_reject(id, NULL, 0);
			rdma_destroy(&c->xc);
			free(m);
			continue;
		}
		m->c = c;
		m->lp = l->lp;
		/* Set up where the connection will live, so its CQ and buffers are that reactor's. */
		if (reactor_send(reactor_next(), accept_on_reactor, m)) {
			rdma_reject(id, NULL, 0);
			if (l->lp.dropped)
				l->lp.dropped(l->lp.arg, &c->xc);
			rdma_destroy(&c->xc);
			free(m);
		}
	}
}

static int rdma_start(struct xp_conn *xc, struct reactor *r)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	/* Everything was set up on the reactor that accepted; a connection does not move. */
	return r == c->xc.reactor ? 0 : -EXDEV;
}

static int addr_lookup(const char *host, uint16_t port, int flags, struct addrinfo **ai, const char *what,
		       char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_flags = flags, .ai_socktype = SOCK_STREAM };
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", port);
	int rc = getaddrinfo(host, ps, &hints, ai);
	if (rc)
		snprintf(err, errlen, "%s %s:%u: %s", what, host, port, gai_strerror(rc));
	return rc;
}

static int rdma_listen_fn(const char *host, uint16_t port, struct reactor *r, const struct xp_listen_params *lp,
			  struct xp_listener **out, char *err, size_t errlen)
{
	struct addrinfo *ai;
	int rc;
	if (addr_lookup(host, port, AI_PASSIVE | AI_NUMERICHOST, &ai, "iSER portal", err, errlen))
		return -EINVAL;
	struct xp_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	l->r = r;
	l->lp = *lp;
	snprintf(l->name, sizeof(l->name), "%s:%u", host, port);
	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s:%u: no RDMA stack (%s)", host, port, strerror(errno));
		goto fail;
	}
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s:%u: rdma_create_id: %s", host, port, strerror(errno));
		goto fail;
	}
	if (rdma_bind_addr(l->id, ai->ai_addr)) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s:%u: %s", host, port,
			 errno == ENODEV || errno == EADDRNOTAVAIL ? "no RDMA device serves this address"
								   : strerror(errno));
		goto fail;
	}
	if (rdma_listen(l->id, 128)) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s:%u: rdma_listen: %s", host, port, strerror(errno));
		goto fail;
	}
	fcntl(l->ch->fd, F_SETFL, fcntl(l->ch->fd, F_GETFL) | O_NONBLOCK);
	if ((rc = reactor_add_fd(r, l->ch->fd, EPOLLIN, on_listen_event, l)))
		goto fail;
	freeaddrinfo(ai);
	*out = l;
	return 0;
fail:
	freeaddrinfo(ai);
	if (l->id)
		rdma_destroy_id(l->id);
	if (l->ch)
		rdma_destroy_event_channel(l->ch);
	free(l);
	return rc;
}

static void rdma_unlisten(struct xp_listener *l)
{
	if (!l)
		return;
	reactor_del_fd(l->r, l->ch->fd);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

/* ---- active side (initiator) ------------------------------------------ */

static void connect_failed(struct xp_conn *xc, int rc, const char *why)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	snprintf(c->xc.why, sizeof(c->xc.why), "iSER connection to %s: %s: %.150s", c->xc.peer, c->cstep, why);
	conn_fail(c, rc);
}

/* An rdma_cm call of the set-up failed at once. */
static void connect_call_failed(struct rdma_conn *c, const char *call)
{
	char why[96];
	int rc = errno ? -errno : -EIO;
	snprintf(why, sizeof(why), "%s: %s", call, strerror(-rc));
	connect_failed(&c->xc, rc, why);
}

/* Route known: the queue pair, then rdma_connect(). */
static void connect_now(void *arg)
{
	struct rdma_conn *c = arg;
	c->gap_timer = NULL;
	int rc = setup_qp(c, c->xc.reactor, 0);
	if (rc) {
		char why[96];
		snprintf(why, sizeof(why), "cannot set up the queue pair: %s", strerror(-rc));
		connect_failed(&c->xc, rc, why);
		return;
	}
	/* We issue no RDMA READ; the target reads our write buffers (our responder resources). */
	c->ord = 1;
	struct iser_cm_hdr hdr = { .flags = ISER_CM_ZBVA_NOT_SUPPORTED | ISER_CM_SEND_W_INV_NOT_SUPPORTED };
	struct rdma_conn_param p = {
		.private_data = &hdr, .private_data_len = sizeof(hdr),
		.initiator_depth = (uint8_t)MIN((uint32_t)c->dev->attr.max_qp_init_rd_atom, 1u),
		.responder_resources = (uint8_t)MIN((uint32_t)c->dev->attr.max_qp_rd_atom, RDMA_MAX_RD_ATOM),
		.retry_count = 7,
		.rnr_retry_count = 7,
	};
	if (rdma_connect(c->id, &p)) {
		/* Name our end: on iWARP it is a TCP port (EADDRNOTAVAIL: it was taken). */
		int e = errno;
		char local[64], call[96];
		netaddr_format(rdma_get_local_addr(c->id), local, sizeof(local), NULL, 0, NULL);
		snprintf(call, sizeof(call), "rdma_connect from %s", local);
		errno = e;
		connect_call_failed(c, call);
	}
}

/*
 * Connecting is a chain of rdma_cm events on the id's channel: address
 * resolved, route resolved, established.  Each step starts the next, on the
 * reactor, so the caller's loop never waits.  Receives are posted before
 * rdma_connect(): the target may answer the login as soon as it is
 * established, and on iWARP our login request is the first message, as the
 * active side must send first.
 */
static void connect_step(struct rdma_conn *c, enum rdma_cm_event_type type, int status)
{
	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		c->cstep = "route resolution";
		if (rdma_resolve_route(c->id, 2000))
			connect_call_failed(c, "rdma_resolve_route");
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		c->cstep = "connect";
		uint64_t since = reactor_now_ns() - atomic_load(&iwarp_destroyed_ns);
		uint64_t gap = (uint64_t)IWARP_RECONNECT_GAP_MS * 1000000ull;
		if (since < gap && (c->gap_timer = reactor_timer_add(c->xc.reactor, (gap - since) / 1000000 + 1,
								     connect_now, c)))
			return;
		connect_now(c);
		return;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		c->xc.state = XP_UP;
		c->established = true;
		xp_connect_timer_stop(&c->xc);
		netaddr_format(rdma_get_peer_addr(c->id), c->xc.peer, sizeof(c->xc.peer), c->xc.peer_ip,
			       sizeof(c->xc.peer_ip), NULL);
		netaddr_format(rdma_get_local_addr(c->id), c->xc.local, sizeof(c->xc.local), c->xc.local_ip,
			       sizeof(c->xc.local_ip), &c->xc.local_port);
		if (c->xc.up && c->xc.up->connected)
			c->xc.up->connected(&c->xc);
		return;
	default:
		break;
	}
	const char *why;
	int rc;
	switch (type) {
	case RDMA_CM_EVENT_ADDR_ERROR:
		rc = -EHOSTUNREACH;
		why = "no RDMA device reaches this address";
		break;
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
		rc = -EHOSTUNREACH;
		why = "peer unreachable over RDMA";
		break;
	case RDMA_CM_EVENT_REJECTED:
		rc = -ECONNREFUSED;
		why = "connection refused (no iSER portal there, or the target rejected it)";
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rc = -ENODEV;
		why = "the RDMA device went away";
		break;
	default:
		rc = -ECONNREFUSED;
		why = "connection failed";
		break;
	}
	char msg[160];
	snprintf(msg, sizeof(msg), "%s (%s, status %d)", why, rdma_event_str(type), status);
	connect_failed(&c->xc, rc, msg);
}

static int rdma_connect_fn(const char *host, uint16_t port, struct reactor *r, unsigned timeout_ms,
			   struct xp_conn **out, char *err, size_t errlen)
{
	struct addrinfo *ai;
	int rc;
	if (addr_lookup(host, port, 0, &ai, "iSER connection to", err, errlen))
		return -EINVAL;
	struct rdma_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "iSER connection to %s:%u: out of memory", host, port);
		return -ENOMEM;
	}
	c->active = true;
	c->xc.state = XP_CONNECTING;
	c->xc.ops = &iser_transport;
	c->xc.free = conn_free;
	c->xc.connect_failed = connect_failed;
	snprintf(c->xc.peer, sizeof(c->xc.peer), "%s:%u", host, port);
	c->ch = rdma_create_event_channel();
	if (!c->ch) {
		rc = -ENODEV;
		snprintf(err, errlen, "iSER connection to %s: no RDMA stack on this host (rdma_cm: %s)", c->xc.peer,
			 strerror(errno));
		goto fail;
	}
	fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_create_id(c->ch, &c->id, c, RDMA_PS_TCP)) {
		rc = -errno;
		snprintf(err, errlen, "iSER connection to %s: rdma_create_id: %s", c->xc.peer, strerror(errno));
		goto fail;
	}
	c->cstep = "address resolution";
	if (rdma_resolve_addr(c->id, NULL, ai->ai_addr, 2000)) {
		rc = errno == ENODEV || errno == EADDRNOTAVAIL ? -EHOSTUNREACH : -errno;
		snprintf(err, errlen, "iSER connection to %s: %s", c->xc.peer,
			 rc == -EHOSTUNREACH ? "no RDMA device reaches this address" : strerror(errno));
		goto fail;
	}
	if ((rc = reactor_add_fd(r, c->ch->fd, EPOLLIN, on_conn_event, c))) {
		snprintf(err, errlen, "iSER connection to %s: %s", c->xc.peer, strerror(-rc));
		goto fail;
	}
	c->xc.reactor = r;
	if ((rc = xp_connect_timer_start(&c->xc, timeout_ms ? timeout_ms : 15000))) {
		snprintf(err, errlen, "iSER connection to %s: out of memory", c->xc.peer);
		goto fail;
	}
	freeaddrinfo(ai);
	*out = &c->xc;
	return 0;
fail:
	freeaddrinfo(ai);
	if (c->ch && c->xc.reactor)
		reactor_del_fd(r, c->ch->fd);
	c->xc.reactor = NULL;
	rdma_destroy(&c->xc);
	return rc;
}

static void *rdma_dev_of(struct xp_conn *xc)
{
	return ((struct rdma_conn *)xc)->dev;
}

static int rdma_pool_register(void *dev, struct bufpool *p)
{
	struct bufpool_reg_ops ops = { .reg = pool_reg, .dereg = pool_dereg, .ctx = dev };
	return atomic_load(&((struct rdma_dev *)dev)->removed) ? -ENODEV : bufpool_dev_attach(p, &ops);
}

/* A write source needs no local write access: it may be read-only memory. */
static int rdma_mem_reg(void *dev, void *addr, size_t len, bool peer_writes, uint32_t *rkey, void **handle)
{
	struct rdma_dev *d = dev;
	int access = peer_writes ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr = ibv_reg_mr(d->pd, addr, len, access);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	*rkey = mr->rkey;
	*handle = mr;
	return 0;
}

static void rdma_mem_dereg(void *handle)
{
	if (handle)
		ibv_dereg_mr(handle);
}

const struct transport_ops iser_transport = {
	.name = "iser",
	.rdma = true,
	.listen = rdma_listen_fn,
	.unlisten = rdma_unlisten,
	.start = rdma_start,
	.send = rdma_send,
	.close = rdma_close,
	.destroy = rdma_destroy,
	.grant = srq_grant,
	.rdma_write = rdma_write,
	.rdma_read = rdma_read,
	.connect = rdma_connect_fn,
	.rdma_dev = rdma_dev_of,
	.pool_register = rdma_pool_register,
	.mem_reg = rdma_mem_reg,
	.mem_dereg = rdma_mem_dereg,
};
