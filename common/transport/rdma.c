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
 *
 * This file: posting and polling work requests, the send and RDMA data
 * ops, teardown and the ops table (rdma_int.h says what the others hold).
 */
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "common/netaddr.h"
#include "common/transport/rdma_int.h"
#include "common/util.h"

/* ---- posting work requests ------------------------------------------- */

int iser_post_recv(struct rdma_conn *c, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->rx_mem + (size_t)slot * RDMA_RX_SLOT),
		.length = RDMA_RX_SLOT,
		.lkey = c->rx_mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)&c->rx_ctx[slot], .sg_list = &sge, .num_sge = 1 }, *bad;
	int rc = ibv_post_recv(c->id->qp, &wr, &bad);
	c->rx_ctx[slot].posted = !rc;
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
		iser_srq_post(c->srq, w);
	else if (!xp_closing(&c->xc))
		iser_post_recv(c, w->slot);
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
void iser_post_wr(struct rdma_conn *c, struct wr_ctx *w)
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
		w->wr.wr_id = signaled ? (uintptr_t)w : 0;
		w->inl = inl;
		w->posted = true;
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
	/*
	 * Account for what the device took; on a failure, bad and what follows
	 * it go back to the queue.  A failure without bad is a doorbell that
	 * failed after the provider had put every WR in the send queue (rxe and
	 * siw: the QP left RTS): the device owns them, and they complete by a
	 * flush or end at the flush time limit.  Taking them back would end
	 * them twice, once here and once at their flush (a double free).
	 */
	struct wr_ctx *rest = NULL, *rest_tail = NULL;
	for (struct ibv_send_wr *x = &first->wr, *nx; x; x = nx) {
		nx = x->next;
		w = container_of(x, struct wr_ctx, wr);
		bool signaled = x->send_flags & IBV_SEND_SIGNALED;
		if (rc && bad && (x == bad || rest)) {
			c->wrs_out -= signaled;   /* never reaches the CQ */
			w->posted = false;
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
		/* Not posted: back at the head of the queue, which iser_fail_queues() empties. */
		if (rest) {
			rest_tail->next = c->wrq_head;
			if (!c->wrq_head)
				c->wrq_tail = rest_tail;
			c->wrq_head = rest;
		}
		iser_conn_fail(c, -rc);
	}
}

static void post_flush(void *arg)
{
	struct rdma_conn *c = arg;
	if (xp_deferred_gone(&c->xc))
		return;
	c->post_scheduled = false;
	iser_post_wr(c, NULL);
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
	if (p->ahs_len)
		memcpy(m + len, p->ahs, p->ahs_len);
	len += p->ahs_len;
	if (p->data_len)   /* a PDU without data may have no data pointer */
		memcpy(m + len, p->data, p->data_len);
	len += p->data_len;
	struct wr_ctx *w = &c->tx_ctx[slot];
	w->kind = WR_SEND;
	w->slot = slot;
	w->pdu = p;
	w->sge = (struct ibv_sge){ .addr = (uintptr_t)m, .length = len, .lkey = c->tx_mr->lkey };
	w->wr = (struct ibv_send_wr){ .wr_id = (uintptr_t)w, .sg_list = &w->sge, .num_sge = 1,
				      .opcode = IBV_WR_SEND };
	iser_post_wr(c, w);
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

void iser_send(struct xp_conn *xc, struct xp_pdu *p)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	p->next = NULL;
	if (!xp_closing(&c->xc) && p->ahs_len + p->data_len > RDMA_TX_SLOT - ISER_HDR_LEN - PDU_BHS_LEN) {
		/* Nothing the peer could receive: the connection cannot go on. */
		log_err("%s: PDU of %u bytes does not fit an iSER send slot, closing", c->xc.peer, p->data_len);
		iser_conn_fail(c, -EMSGSIZE);
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

int iser_data(struct rdma_conn *c, enum wr_kind kind, struct buf *b, uint32_t off, uint32_t len, uint64_t va,
	      uint32_t stag, void (*cb)(void *arg, int err), void *arg)
{
	if (xp_closing(&c->xc))
		return -ECONNRESET;
	if (!b || (uint64_t)off + len > b->cap)
		return -EINVAL;
	uint32_t lkey = b->keys ? b->keys[c->pool_dev].lkey : b->lkey;
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
	iser_post_wr(c, w);
	return 0;
}

static int rdma_write(struct xp_conn *xc, struct buf *b, uint32_t off, uint32_t len, uint64_t va, uint32_t stag,
		      void (*cb)(void *arg, int err), void *arg)
{
	return iser_data((struct rdma_conn *)xc, WR_WRITE, b, off, len, va, stag, cb, arg);
}

static int rdma_read(struct xp_conn *xc, struct buf *b, uint32_t off, uint32_t len, uint64_t va, uint32_t stag,
		     void (*cb)(void *arg, int err), void *arg)
{
	return iser_data((struct rdma_conn *)xc, WR_READ, b, off, len, va, stag, cb, arg);
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
	iser_post_wr(c, w);
}

static void on_recv(struct rdma_conn *c, struct wr_ctx *w, uint32_t byte_len)
{
	uint8_t *m = w->buf;
	const struct iser_hdr *ih = (const void *)m;
	XP_STAT_ADD(&c->xc, recvs, 1);
	XP_STAT_ADD(&c->xc, bytes_in, byte_len);
	if (byte_len < ISER_HDR_LEN) {
		log_info("%s: iSER message of %u bytes, closing", c->xc.peer, byte_len);
		iser_conn_fail(c, -EPROTO);
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
		iser_conn_fail(c, -EPROTO);
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
		iser_conn_fail(c, -EPROTO);
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
		iser_conn_fail(c, -EPROTO);
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

static bool in_array(const struct wr_ctx *w, const struct wr_ctx *a, uint32_t n)
{
	return (uintptr_t)w >= (uintptr_t)a && (uintptr_t)w < (uintptr_t)(a + n);
}

/*
 * Whether a completion's context is one of ours still posted.  The device
 * may report a WR twice: siw (Linux 6.12) flushed an RDMA READ it had
 * already completed when a link flap broke the connection.  The send and
 * receive slots and the shared receives never move, so their posted flag
 * can be read.  A data WR's context is freed at its completion, so it is
 * looked for among those in flight, without reading it; only for an error
 * or on a closing connection, where the second report comes, not on the
 * fast path.
 */
static bool wr_posted(struct rdma_conn *c, struct wr_ctx *w, const struct ibv_wc *wc)
{
	if (in_array(w, c->tx_ctx, RDMA_QUEUE) || in_array(w, c->rx_ctx, RDMA_QUEUE) ||
	    (c->srq && in_array(w, c->srq->ctx, c->srq->depth)))
		return w->posted;
	if (wc->status == IBV_WC_SUCCESS && !xp_closing(&c->xc))
		return true;
	for (struct wr_ctx *f = c->fly; f; f = f->fnext)
		if (f == w)
			return true;
	return false;
}

void iser_complete(struct rdma_conn *c, struct ibv_wc *wc)
{
	struct wr_ctx *w = (struct wr_ctx *)(uintptr_t)wc->wr_id;
	if (!w) {
		/* A failed or flushed unsignaled RDMA WRITE: not counted, nothing to free. */
		if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR && !xp_closing(&c->xc)) {
			log_info("%s: RDMA WRITE failed: %s", c->xc.peer, ibv_wc_status_str(wc->status));
			iser_conn_fail(c, -EIO);
		}
		return;
	}
	if (!wr_posted(c, w, wc)) {
		log_limited(LOG_INFO, "%s: the RDMA device reported a work request that is not posted (%s): ignored",
			    c->xc.peer, ibv_wc_status_str(wc->status));
		return;
	}
	w->posted = false;
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
			iser_conn_fail(c, err);
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
		iser_conn_fail(c, err);
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
			iser_complete(c, &wc[i]);
	}
	XP_STAT_ADD(&c->xc, completions, (uint64_t)total);
	XP_STAT_ADD(&c->xc, cq_empty_polls, total == 0);
	if (!xp_closing(&c->xc))
		pump_tx(c);   /* PDUs that waited for a send slot the poll freed: queued, posted below */
	c->in_poll = false;
	if (!xp_closing(&c->xc))
		iser_post_wr(c, NULL);
	maybe_finish(c);
	return total;
}

void iser_on_cq_event(void *arg, uint32_t events)
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

int iser_cq_poll(void *arg)
{
	return poll_cq(arg);
}

/* Adaptive reactor about to sleep: arm, then catch what came before the arm. */
int iser_cq_arm(void *arg)
{
	struct rdma_conn *c = arg;
	if (!c->cq_armed) {
		ibv_req_notify_cq(c->cq, 0);
		c->cq_armed = true;
	}
	return poll_cq(c);
}

/* ---- teardown --------------------------------------------------------- */

void iser_fail_queues(struct rdma_conn *c)
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

/* The upper layer hears of the close once every posted WR has flushed and no disconnect is held. */
static void maybe_finish(struct rdma_conn *c)
{
	if (c->xc.state != XP_CLOSING || c->in_poll || c->port_timer)
		return;
	if (c->wrs_out && c->st >= ISER_QP_READY)
		return;
	xp_closed_later(&c->xc);
}

void iser_conn_fail(struct rdma_conn *c, int err)
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
	if (!c->port_timer)
		xp_closed_now(&c->xc);
}

static bool port_active(struct rdma_conn *c)
{
	struct ibv_port_attr pa;
	return !c->id->verbs || ibv_query_port(c->id->verbs, c->id->port_num, &pa) || pa.state == IBV_PORT_ACTIVE;
}

static void disconnect_when_port_up(void *arg)
{
	struct rdma_conn *c = arg;
	c->port_timer = NULL;
	if (c->st != ISER_DISCONNECTED && !xp_stopping() && !port_active(c) &&
	    reactor_now_ns() - c->port_down_since_ns < (uint64_t)RDMA_PORT_WAIT_MS * 1000000ull) {
		if (c->st != ISER_PORT_DOWN)
			log_limited(LOG_INFO, "%s: port %u of %s is down: the connection's disconnect waits for it "
				    "(at most %d s)", c->xc.peer, c->id->port_num,
				    ibv_get_device_name(c->id->verbs->device), RDMA_PORT_WAIT_MS / 1000);
		c->st = ISER_PORT_DOWN;
		if ((c->port_timer = reactor_timer_add(c->xc.reactor, RDMA_PORT_POLL_MS, disconnect_when_port_up, c)))
			return;
	}
	if (c->st != ISER_DISCONNECTED) {
		rdma_disconnect(c->id);
		c->st = ISER_DISCONNECTED;
	}
	if (c->forced)
		xp_closed_now(&c->xc);
	else
		maybe_finish(c);
}

/*
 * A connection the device closed (its QP went to error), or closed while
 * its port is down, keeps its CM id, and so sends no DREQ, until the port
 * is up (checked every RDMA_PORT_POLL_MS, at most RDMA_PORT_WAIT_MS).  The
 * DREQ could not reach the peer anyway, and on Soft-RoCE it does lasting
 * harm: the CM sends it on the device's QP1, and with the link down rxe
 * (Linux 6.12) moves QP1 to error for good, so no connection to or from
 * that device, anyone's, can be made until it is re-created (a kernel iSER
 * session never came back from a 1.7 s link flap).  The QP's flush can come
 * before the port reads down, hence the wait even when it reads up.  The
 * peer hears of the close once the port is back, by our DREQ or by its own
 * timeout.
 * A shutdown's forced close (xp_stop_waiting) sends it at once.
 * Only where the CM sends on QP1 (InfiniBand, RoCE): iWARP's disconnect goes
 * on the connection's own TCP stream.  Held on siw too, it went out when the
 * link came back, just as the initiator connected again, which is the race
 * of rdma_int.h's IWARP_RECONNECT_GAP_MS: siw's listener broke (that iSER
 * portal took no connection again, and destroying it hit a kernel BUG).
 */
static bool cm_sends_on_qp1(const struct rdma_conn *c)
{
	return !c->id->verbs || c->id->verbs->device->transport_type != IBV_TRANSPORT_IWARP;
}

static void hold_disconnect(struct rdma_conn *c)
{
	c->port_down_since_ns = reactor_now_ns();
	c->port_timer = c->xc.reactor ? reactor_timer_add(c->xc.reactor, RDMA_PORT_POLL_MS, disconnect_when_port_up, c)
				      : NULL;
	if (!c->port_timer) {
		rdma_disconnect(c->id);
		c->st = ISER_DISCONNECTED;
		return;
	}
	c->st = ISER_DISCONNECT_HELD;
}

static void rdma_close(struct xp_conn *xc)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	if (!xp_close_begin(xc))
		return;
	if (c->gap_timer)
		reactor_timer_cancel(c->xc.reactor, c->gap_timer);
	c->gap_timer = NULL;
	iser_fail_queues(c);
	if (c->st >= ISER_QP_READY) {
		/* Moving the QP to error flushes every posted WR through the CQ. */
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
		ibv_modify_qp(c->id->qp, &a, IBV_QP_STATE);
		if (c->xc.reactor)
			c->flush_timer = reactor_timer_add(c->xc.reactor, RDMA_FLUSH_WAIT_MS, flush_timeout, c);
	}
	if (c->st == ISER_ESTABLISHED) {
		if (!xp_stopping() && cm_sends_on_qp1(c) && (c->xc.err || !port_active(c))) {
			hold_disconnect(c);
		} else {
			rdma_disconnect(c->id);
			c->st = ISER_DISCONNECTED;
		}
	}
	maybe_finish(c);
}

void iser_destroy(struct xp_conn *xc)
{
	if (xc)
		xp_release(xc);
}

void iser_conn_free(struct xp_conn *xc)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	if (c->xc.reactor) {
		if (c->flush_timer)
			reactor_timer_cancel(c->xc.reactor, c->flush_timer);
		xp_connect_timer_stop(xc);
		if (c->gap_timer)
			reactor_timer_cancel(c->xc.reactor, c->gap_timer);
		if (c->port_timer)
			reactor_timer_cancel(c->xc.reactor, c->port_timer);
		reactor_poller_del(c->xc.reactor, c->poller);
		if (c->cc)
			reactor_del_fd(c->xc.reactor, c->cc->fd);
		if (c->ch)
			reactor_del_fd(c->xc.reactor, c->ch->fd);
	}
	if (c->active && c->signal_writes)
		atomic_store(&iser_iwarp_destroyed_ns, reactor_now_ns());
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	/* Shared receives this QP took whose flush came after the last send's: back to the queue. */
	struct ibv_wc wc;
	while (c->srq && c->cq && !c->forced && ibv_poll_cq(c->cq, 1, &wc) > 0) {
		struct wr_ctx *w = (struct wr_ctx *)(uintptr_t)wc.wr_id;
		if (w && in_array(w, c->srq->ctx, c->srq->depth) && w->posted)
			iser_srq_post(c->srq, w);
	}
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->cc)
		ibv_destroy_comp_channel(c->cc);
	if (c->srq)
		iser_srq_put(c->srq, c->srq_share);
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

const struct transport_ops iser_transport = {
	.name = "iser",
	.rdma = true,
	.listen = iser_listen,
	.unlisten = iser_unlisten,
	.start = iser_start,
	.send = iser_send,
	.close = rdma_close,
	.destroy = iser_destroy,
	.grant = iser_srq_grant,
	.rdma_write = rdma_write,
	.rdma_read = rdma_read,
	.connect = iser_connect,
	.rdma_dev = iser_dev_of,
	.pool_register = iser_pool_register,
	.mem_reg = iser_mem_reg,
	.mem_dereg = iser_mem_dereg,
	.mem_reg_local = iser_mem_reg_local,
	.dev_name = iser_dev_name,
};

