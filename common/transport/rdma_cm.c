/*
 * iSER transport: the connection manager.  A connection request arrives on
 * the listener's reactor; its cm_id is moved to an event channel of its own
 * and the connection is set up on the reactor it will live on (QP, CQ, the
 * receive and send slots).  The active side (initiator) resolves, connects
 * and waits for ESTABLISHED within its time limit.
 */
#include <arpa/inet.h>
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

_Atomic uint64_t iser_iwarp_destroyed_ns;

struct xp_listener {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct reactor *r;
	struct xp_listen_params lp;
	char name[80];            /* host:port, for messages */
};

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
			if (c->st == ISER_QP_READY)
				c->st = ISER_ESTABLISHED;
			log_debug("%s: iSER connection established", c->xc.peer);
			break;
		case RDMA_CM_EVENT_DEVICE_REMOVAL:
			log_limited(LOG_WARN, "%s: RDMA device %s removed, closing the connection", c->xc.peer,
				    ibv_get_device_name(c->id->verbs->device));
			iser_dev_removed(c->dev);
			/* fall through */
		case RDMA_CM_EVENT_DISCONNECTED:
		case RDMA_CM_EVENT_TIMEWAIT_EXIT:
		case RDMA_CM_EVENT_CONNECT_ERROR:
		case RDMA_CM_EVENT_UNREACHABLE:
		case RDMA_CM_EVENT_REJECTED:
			if (c->st >= ISER_ESTABLISHED)
				c->st = ISER_DISCONNECTED;
			iser_conn_fail(c, -ECONNRESET);
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

static int setup_qp(struct rdma_conn *c, struct reactor *r, unsigned srq_depth)
{
	c->dev = iser_dev_get(c->id->verbs);
	if (!c->dev)
		return -ENODEV;
	if (srq_depth && (c->srq = iser_srq_get(r, c->dev, srq_depth)) && !iser_srq_join(c->srq, c)) {
		log_limited(LOG_INFO, "%s: the shared receive queue of reactor %d is promised in full: this connection "
				      "posts receives of its own", c->xc.peer, reactor_index(r));
		c->srq = NULL;
	}
	c->xc.shared_rx = c->srq;
	/* The initiator registers its session's pool itself (iser_pool_register). */
	int rc = c->active ? 0 : iser_pool_attach(c, reactor_bufpool(r));
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
	if (reactor_mode(r) != REACTOR_EVENT && !(c->poller = reactor_poller_add(r, iser_cq_poll, iser_cq_arm, c)))
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
	c->st = ISER_QP_READY;
	/* mmap, not malloc: these go back to the system when the connection ends. */
	c->tx_mem = iser_slots_alloc((size_t)RDMA_QUEUE * RDMA_TX_SLOT);
	if (!c->tx_mem || !(c->tx_mr = ibv_reg_mr(c->dev->pd, c->tx_mem, (size_t)RDMA_QUEUE * RDMA_TX_SLOT, 0)))
		return c->tx_mem ? -errno : -ENOMEM;
	for (uint32_t i = 0; i < RDMA_QUEUE; i++)
		c->tx_free[i] = RDMA_QUEUE - 1 - i;
	if (!c->srq) {
		c->rx_mem = iser_slots_alloc((size_t)RDMA_QUEUE * RDMA_RX_SLOT);
		if (!c->rx_mem ||
		    !(c->rx_mr = ibv_reg_mr(c->dev->pd, c->rx_mem, (size_t)RDMA_QUEUE * RDMA_RX_SLOT, IBV_ACCESS_LOCAL_WRITE)))
			return c->rx_mem ? -errno : -ENOMEM;
		for (uint32_t i = 0; i < RDMA_QUEUE; i++) {
			c->rx_ctx[i] = (struct wr_ctx){ .kind = WR_RECV, .slot = i,
							.buf = c->rx_mem + (size_t)i * RDMA_RX_SLOT };
			if ((rc = iser_post_recv(c, i)))
				return rc;
		}
	}
	c->ntx_free = RDMA_QUEUE;
	if ((rc = reactor_add_fd(r, c->cc->fd, EPOLLIN, iser_on_cq_event, c)))
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
		if (lp.dropped)
			lp.dropped(lp.arg, &c->xc);
		iser_destroy(&c->xc);
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
				iser_dev_removed(iser_dev_find(l->id->verbs));
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
		c->xc.free = iser_conn_free;
		c->xc.state = XP_UP;   /* accepted: the CM's ESTABLISHED follows (ISER_ESTABLISHED) */
		c->st = ISER_ACCEPTING;
		c->xc.max_ctrl_data = ISER_INITIATOR_RX_SIZE - ISER_HDR_LEN - PDU_BHS_LEN;
		netaddr_format(rdma_get_peer_addr(id), c->xc.peer, sizeof(c->xc.peer), c->xc.peer_ip,
			       sizeof(c->xc.peer_ip), NULL);
		netaddr_format(rdma_get_local_addr(id), c->xc.local, sizeof(c->xc.local), c->xc.local_ip,
		       sizeof(c->xc.local_ip), &c->xc.local_port);
		/* Refused before it costs a queue pair and 2.6 MiB of slots. */
		if (l->lp.admit && !l->lp.admit(l->lp.arg, &c->xc)) {
			rdma_reject(id, NULL, 0);
			iser_destroy(&c->xc);
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
			iser_destroy(&c->xc);
			free(m);
		}
	}
}

int iser_start(struct xp_conn *xc, struct reactor *r)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	/* Everything was set up on the reactor that accepted; a connection does not move. */
	return r == c->xc.reactor ? 0 : -EXDEV;
}

static int addr_lookup(const char *host, uint16_t port, int flags, struct addrinfo **ai, const char *what,
		       char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_flags = flags, .ai_socktype = SOCK_STREAM };
	char ps[8], at[NETADDR_HOST_LEN];
	snprintf(ps, sizeof(ps), "%u", port);
	int rc = getaddrinfo(host, ps, &hints, ai);
	netaddr_join(at, sizeof(at), host, port);
	if (rc)
		snprintf(err, errlen, "%s %s: %s", what, at, gai_strerror(rc));
	return rc;
}

int iser_listen(const char *host, uint16_t port, struct reactor *r, const struct xp_listen_params *lp,
		struct xp_listener **out, char *err, size_t errlen)
{
	struct addrinfo *ai;
	int rc;
	char at[NETADDR_LEN];
	netaddr_join(at, sizeof(at), host, port);
	if (addr_lookup(host, port, AI_PASSIVE | AI_NUMERICHOST, &ai, "iSER portal", err, errlen))
		return -EINVAL;
	struct xp_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		freeaddrinfo(ai);
		return -ENOMEM;
	}
	l->r = r;
	l->lp = *lp;
	netaddr_join(l->name, sizeof(l->name), host, port);
	l->ch = rdma_create_event_channel();
	if (!l->ch) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s: no RDMA stack (%s)", at, strerror(errno));
		goto fail;
	}
	if (rdma_create_id(l->ch, &l->id, l, RDMA_PS_TCP)) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s: rdma_create_id: %s", at, strerror(errno));
		goto fail;
	}
	/* Before listening: rdma_cm hands the listener's ToS to each device's listen id then. */
	if (lp->tos && rdma_set_option(l->id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, (void *)&lp->tos, sizeof(lp->tos))) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s: tos %u: %s", at, lp->tos, strerror(errno));
		goto fail;
	}
	if (rdma_bind_addr(l->id, ai->ai_addr)) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s: %s", at,
			 errno == ENODEV || errno == EADDRNOTAVAIL ? "no RDMA device serves this address"
								   : strerror(errno));
		goto fail;
	}
	if (rdma_listen(l->id, 128)) {
		rc = -errno;
		snprintf(err, errlen, "iSER portal %s: rdma_listen: %s", at, strerror(errno));
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

void iser_unlisten(struct xp_listener *l)
{
	if (!l)
		return;
	reactor_del_fd(l->r, l->ch->fd);
	rdma_destroy_id(l->id);
	rdma_destroy_event_channel(l->ch);
	free(l);
}

/* ---- active side (initiator) ------------------------------------------ */

/* The step rdma_cm is at while connecting (XP_CONNECTING), as a failure names it. */
static const char *connect_step_name(enum iser_state st)
{
	switch (st) {
	case ISER_ADDR_RESOLVING:
		return "address resolution";
	case ISER_ROUTE_RESOLVING:
		return "route resolution";
	default:
		return "connect";
	}
}

static void connect_failed(struct xp_conn *xc, int rc, const char *why)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	snprintf(c->xc.why, sizeof(c->xc.why), "iSER connection to %s: %s: %.150s", c->xc.peer,
		 connect_step_name(c->st), why);
	iser_conn_fail(c, rc);
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
		c->st = ISER_ROUTE_RESOLVING;
		if (rdma_resolve_route(c->id, 2000))
			connect_call_failed(c, "rdma_resolve_route");
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		c->st = ISER_ROUTE_RESOLVED;
		uint64_t since = reactor_now_ns() - atomic_load(&iser_iwarp_destroyed_ns);
		uint64_t gap = (uint64_t)IWARP_RECONNECT_GAP_MS * 1000000ull;
		if (since < gap && (c->gap_timer = reactor_timer_add(c->xc.reactor, (gap - since) / 1000000 + 1,
								     connect_now, c)))
			return;
		connect_now(c);
		return;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		c->xc.state = XP_UP;
		c->st = ISER_ESTABLISHED;
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

int iser_connect(const char *host, uint16_t port, struct reactor *r, unsigned timeout_ms,
		 struct xp_conn **out, char *err, size_t errlen)
{
	struct addrinfo *ai;
	int rc;
	char at[NETADDR_HOST_LEN];
	netaddr_join(at, sizeof(at), host, port);
	if (addr_lookup(host, port, 0, &ai, "iSER connection to", err, errlen))
		return -EINVAL;
	struct rdma_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "iSER connection to %s: out of memory", at);
		return -ENOMEM;
	}
	c->active = true;
	c->xc.state = XP_CONNECTING;
	c->xc.ops = &iser_transport;
	c->xc.free = iser_conn_free;
	c->xc.connect_failed = connect_failed;
	netaddr_join(c->xc.peer, sizeof(c->xc.peer), host, port);
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
	c->st = ISER_ADDR_RESOLVING;
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
	iser_destroy(&c->xc);
	return rc;
}

