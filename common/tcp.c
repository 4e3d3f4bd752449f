/*
 * TCP transport.  Receives through a staging buffer (few syscalls for small
 * PDUs) and reads large data segments straight into the place the iSCSI
 * layer chose; sends with writev, batching every PDU queued during one
 * reactor iteration into as few syscalls as possible.
 */
#include "common/transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/reactor.h"
#include "common/util.h"

#define TCP_STAGING (64 * 1024)
#define TCP_DIRECT_MIN (16 * 1024)   /* read at least this much straight into the destination */
#define TCP_MAX_IOV 64

enum rx_state { RX_BHS, RX_AHS, RX_HDIG, RX_DATA, RX_PAD, RX_DDIG };

struct tcp_conn {
	struct xp_conn xc;
	int fd;
	bool closing, close_notified, flush_scheduled, want_out;
	/* The last data segment was large: the next ones likely are too, so read
	 * headers without the staging buffer and let data go straight to its place. */
	bool direct_next;
	int err;
	/* receive */
	uint8_t *stage;
	size_t shead, stail;
	enum rx_state state;
	uint32_t need, got;
	uint8_t *dest;
	uint8_t *own;            /* transport-owned data buffer */
	uint32_t own_cap;
	uint8_t ahs[PDU_MAX_AHS_LEN];
	uint8_t dig[4];
	uint8_t padbuf[4];
	struct xp_rx rx;
	/* send */
	struct xp_pdu *txh, *txt;
	/* connecting (active side): the addresses not tried yet, the time limit */
	bool destroy_pending;      /* destroyed while the close notification was queued */
	struct addrinfo *ai, *ai_next;
	struct reactor_timer *ctimer;
	unsigned ctimeout_ms;
};

struct xp_listener {
	int fd;
	struct reactor *r;
	xp_accept_fn accept;
	void *arg;
};

static const uint8_t zero_pad[4];

static void tcp_flush(void *arg);
static void tcp_on_event(void *arg, uint32_t events);

static void conn_free(struct tcp_conn *c)
{
	free(c->stage);
	free(c->own);
	free(c);
}

static void notify_closed(void *arg)
{
	struct tcp_conn *c = arg;
	if (c->destroy_pending) {
		/* Destroyed before this deferred call ran: its owner wants no upcall. */
		conn_free(c);
		return;
	}
	if (c->close_notified)
		return;
	c->close_notified = true;
	if (c->xc.up && c->xc.up->closed)
		c->xc.up->closed(&c->xc, c->err);
}

static void connect_end(struct tcp_conn *c)
{
	if (c->ctimer)
		reactor_timer_cancel(c->xc.reactor, c->ctimer);
	c->ctimer = NULL;
	if (c->ai)
		freeaddrinfo(c->ai);
	c->ai = c->ai_next = NULL;
}

static void fail_queue(struct tcp_conn *c)
{
	while (c->txh) {
		struct xp_pdu *p = c->txh;
		c->txh = p->next;
		if (!c->txh)
			c->txt = NULL;
		if (p->done)
			p->done(p, -ECONNRESET);
	}
}

static void tcp_close(struct xp_conn *xc)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
	if (c->closing)
		return;
	c->closing = true;
	connect_end(c);
	if (c->fd >= 0) {
		reactor_del_fd(c->xc.reactor, c->fd);
		close(c->fd);
		c->fd = -1;
	}
	fail_queue(c);
	/* Tell the upper layer from a fresh stack: it may be inside an upcall now. */
	if (!c->xc.reactor || reactor_defer(c->xc.reactor, notify_closed, c))
		notify_closed(c);
}

static void fail(struct tcp_conn *c, int err)
{
	if (!c->err)
		c->err = err;
	tcp_close(&c->xc);
}

static void tcp_destroy(struct xp_conn *xc)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
	if (!c)
		return;
	if (!c->closing)
		tcp_close(xc);
	if (c->xc.reactor && !c->close_notified) {
		c->destroy_pending = true; /* notify_closed() is queued and frees it */
		return;
	}
	conn_free(c);
}

/* Copy up to n bytes into p: from the staging buffer, else from the socket. */
static int rx_fill(struct tcp_conn *c, uint8_t *p, uint32_t n)
{
	while (c->got < n) {
		uint32_t want = n - c->got;
		size_t avail = c->stail - c->shead;
		if (avail) {
			uint32_t k = (uint32_t)MIN(avail, want);
			if (p != XP_DISCARD)
				memcpy(p + c->got, c->stage + c->shead, k);
			c->shead += k;
			c->got += k;
			continue;
		}
		c->shead = c->stail = 0;
		ssize_t r;
		bool direct = p != XP_DISCARD && (want >= TCP_DIRECT_MIN || c->direct_next);
		if (direct)
			r = read(c->fd, p + c->got, want);
		else
			r = read(c->fd, c->stage, TCP_STAGING);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : (errno == EINTR ? 0 : -errno);
		if (direct)
			c->got += (uint32_t)r;
		else
			c->stail = (size_t)r;
		if (r > 0 && (size_t)r < (want >= TCP_DIRECT_MIN ? want : 1))
			continue;
	}
	return 1;
}

static int rx_data_dest(struct tcp_conn *c, uint32_t dlen)
{
	uint8_t *dest = NULL;
	int rc = c->xc.up->rx_bhs(&c->xc, c->rx.bhs, &dest);
	if (rc < 0)
		return rc;
	c->rx.placed = dest && dest != XP_DISCARD;
	if (!dest && dlen) {
		if (c->own_cap < dlen) {
			uint8_t *n = realloc(c->own, dlen);
			if (!n)
				return -ENOMEM;
			c->own = n;
			c->own_cap = dlen;
		}
		dest = c->own;
	}
	c->dest = dest;
	c->rx.data = dest == XP_DISCARD ? NULL : dest;
	return 0;
}

static void deliver(struct tcp_conn *c)
{
	c->direct_next = c->rx.data_len >= TCP_DIRECT_MIN;
	c->state = RX_BHS;
	c->need = PDU_BHS_LEN;
	c->got = 0;
	if (c->dest == XP_DISCARD)
		c->rx.data_len = 0;
	c->xc.up->rx_pdu(&c->xc, &c->rx);
}

/* Advance the receive state machine; returns <0 on error, 0 when it would block. */
static int rx_step(struct tcp_conn *c)
{
	int rc;
	switch (c->state) {
	case RX_BHS:
		if ((rc = rx_fill(c, c->rx.bhs, PDU_BHS_LEN)) <= 0)
			return rc;
		c->rx.ahs_len = pdu_ahs_bytes(c->rx.bhs);
		c->rx.ahs = c->rx.ahs_len ? c->ahs : NULL;
		c->rx.data_len = pdu_dlen(c->rx.bhs);
		c->rx.data = NULL;
		c->rx.data_digest_error = false;
		c->got = 0;
		c->state = RX_AHS;
		return 1;
	case RX_AHS:
		if ((rc = rx_fill(c, c->ahs, c->rx.ahs_len)) <= 0)
			return rc;
		c->got = 0;
		c->state = RX_HDIG;
		return 1;
	case RX_HDIG:
		if (c->xc.header_digest) {
			if ((rc = rx_fill(c, c->dig, 4)) <= 0)
				return rc;
			uint32_t crc = crc32c_update(crc32c_init(), c->rx.bhs, PDU_BHS_LEN);
			crc = crc32c_final(crc32c_update(crc, c->ahs, c->rx.ahs_len));
			uint32_t got;
			memcpy(&got, c->dig, 4);
			if (got != crc) {
				/* Lengths cannot be trusted after a bad header: drop the connection. */
				log_warn("%s: header digest error, closing the connection", c->xc.peer);
				return -EBADMSG;
			}
		}
		if ((rc = rx_data_dest(c, c->rx.data_len)) < 0)
			return rc;
		c->got = 0;
		c->state = RX_DATA;
		return 1;
	case RX_DATA:
		if ((rc = rx_fill(c, c->dest ? c->dest : XP_DISCARD, c->rx.data_len)) <= 0)
			return rc;
		c->got = 0;
		c->state = RX_PAD;
		return 1;
	case RX_PAD:
		if ((rc = rx_fill(c, c->padbuf, pdu_pad(c->rx.data_len))) <= 0)
			return rc;
		c->got = 0;
		if (c->xc.data_digest && c->rx.data_len) {
			c->state = RX_DDIG;
			return 1;
		}
		deliver(c);
		return 1;
	case RX_DDIG:
		if ((rc = rx_fill(c, c->dig, 4)) <= 0)
			return rc;
		if (c->dest != XP_DISCARD) {
			uint32_t crc = crc32c_update(crc32c_init(), c->dest, c->rx.data_len);
			crc = crc32c_final(crc32c_update(crc, c->padbuf, pdu_pad(c->rx.data_len)));
			uint32_t got;
			memcpy(&got, c->dig, 4);
			c->rx.data_digest_error = got != crc;
		}
		deliver(c);
		return 1;
	}
	return -EINVAL;
}

static void tcp_on_event(void *arg, uint32_t events)
{
	struct tcp_conn *c = arg;
	if (events & EPOLLOUT)
		tcp_flush(c);
	if (c->closing)
		return;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		/* Bounded work per wake-up keeps other connections on this reactor served. */
		for (int i = 0; i < 1024 && !c->closing; i++) {
			int rc = rx_step(c);
			if (rc < 0) {
				fail(c, rc);
				return;
			}
			if (rc == 0)
				break;
		}
	}
}

static int set_events(struct tcp_conn *c, bool out)
{
	if (c->want_out == out || c->fd < 0)
		return 0;
	c->want_out = out;
	return reactor_mod_fd(c->xc.reactor, c->fd, EPOLLIN | (out ? EPOLLOUT : 0));
}

static void tcp_flush(void *arg)
{
	struct tcp_conn *c = arg;
	c->flush_scheduled = false;
	while (c->txh && !c->closing) {
		struct iovec iov[TCP_MAX_IOV];
		int n = 0;
		/* Gather as many queued PDUs as fit, skipping what was already sent. */
		for (struct xp_pdu *p = c->txh; p && n + 6 <= TCP_MAX_IOV; p = p->next) {
			const struct { const void *b; uint32_t l; } part[6] = {
				{ p->bhs, PDU_BHS_LEN },
				{ p->ahs, p->ahs_len },
				{ p->hdig, p->hd_on ? 4u : 0u },
				{ p->data, p->data_len },
				{ zero_pad, pdu_pad(p->data_len) },
				{ p->ddig, p->dd_on ? 4u : 0u },
			};
			uint32_t skip = p->sent;
			for (int i = 0; i < 6; i++) {
				if (skip >= part[i].l) {
					skip -= part[i].l;
					continue;
				}
				iov[n].iov_base = (void *)((const uint8_t *)part[i].b + skip);
				iov[n].iov_len = part[i].l - skip;
				skip = 0;
				n++;
			}
		}
		ssize_t w = writev(c->fd, iov, n);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				set_events(c, true);
				return;
			}
			if (errno == EINTR)
				continue;
			fail(c, -errno);
			return;
		}
		size_t left = (size_t)w;
		while (c->txh && left) {
			struct xp_pdu *p = c->txh;
			uint32_t total = PDU_BHS_LEN + p->ahs_len + (p->hd_on ? 4 : 0) + p->data_len +
					 pdu_pad(p->data_len) + (p->dd_on ? 4 : 0);
			uint32_t rest = total - p->sent;
			if (left < rest) {
				p->sent += (uint32_t)left;
				left = 0;
				break;
			}
			left -= rest;
			c->txh = p->next;
			if (!c->txh)
				c->txt = NULL;
			if (p->done)
				p->done(p, 0);
		}
	}
	if (!c->closing)
		set_events(c, false);
}

static int tcp_send(struct xp_conn *xc, struct xp_pdu *p)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
	if (c->closing)
		return -ECONNRESET;
	p->next = NULL;
	p->sent = 0;
	p->hd_on = c->xc.header_digest;
	p->dd_on = c->xc.data_digest && p->data_len;
	if (p->hd_on) {
		uint32_t crc = crc32c_update(crc32c_init(), p->bhs, PDU_BHS_LEN);
		crc = crc32c_final(crc32c_update(crc, p->ahs, p->ahs_len));
		memcpy(p->hdig, &crc, 4);
	}
	if (p->dd_on) {
		uint32_t crc = crc32c_update(crc32c_init(), p->data, p->data_len);
		crc = crc32c_final(crc32c_update(crc, zero_pad, pdu_pad(p->data_len)));
		memcpy(p->ddig, &crc, 4);
	}
	if (c->txt)
		c->txt->next = p;
	else
		c->txh = p;
	c->txt = p;
	if (!c->flush_scheduled && !c->want_out) {
		c->flush_scheduled = true;
		reactor_defer(c->xc.reactor, tcp_flush, c);
	}
	return 0;
}

static void conn_addrs(struct tcp_conn *c);

static struct tcp_conn *conn_new(int fd)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->stage = malloc(TCP_STAGING);
	if (!c->stage) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->xc.ops = &tcp_transport;
	c->need = PDU_BHS_LEN;
	if (fd >= 0)
		conn_addrs(c);
	return c;
}

/* Set on a connected socket: no Nagle, and the addresses for log lines. */
static void conn_addrs(struct tcp_conn *c)
{
	int fd = c->fd, one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
		netaddr_format((const struct sockaddr *)&ss, c->xc.peer, sizeof(c->xc.peer), NULL, 0, NULL);
	sl = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		netaddr_format((const struct sockaddr *)&ss, c->xc.local, sizeof(c->xc.local), c->xc.local_ip, sizeof(c->xc.local_ip),
			 &c->xc.local_port);
}

static int tcp_start(struct xp_conn *xc, struct reactor *r)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
	c->xc.reactor = r;
	int fl = fcntl(c->fd, F_GETFL);
	fcntl(c->fd, F_SETFL, fl | O_NONBLOCK);
	return reactor_add_fd(r, c->fd, EPOLLIN, tcp_on_event, c);
}

static void on_accept(void *arg, uint32_t events)
{
	struct xp_listener *l = arg;
	(void)events;
	for (;;) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		struct tcp_conn *c = conn_new(fd);
		if (!c) {
			close(fd);
			continue;
		}
		l->accept(l->arg, &c->xc);
	}
}

static int resolve(const char *host, uint16_t port, int flags, struct addrinfo **res, char *err, size_t errlen)
{
	char ps[8];
	snprintf(ps, sizeof(ps), "%u", port);
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = flags };
	int rc = getaddrinfo(host, ps, &hints, res);
	if (rc) {
		snprintf(err, errlen, "cannot resolve '%s': %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	return 0;
}

static int tcp_listen(const char *host, uint16_t port, struct reactor *r, xp_accept_fn accept_fn, void *arg,
		      struct xp_listener **out, char *err, size_t errlen)
{
	struct addrinfo *ai;
	int rc = resolve(host, port, AI_PASSIVE | AI_NUMERICHOST, &ai, err, errlen);
	if (rc)
		return rc;
	int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128)) {
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s:%u: %s", host, port, strerror(errno));
		close(fd);
		goto out;
	}
	struct xp_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		rc = -ENOMEM;
		goto out;
	}
	*l = (struct xp_listener){ .fd = fd, .r = r, .accept = accept_fn, .arg = arg };
	rc = reactor_add_fd(r, fd, EPOLLIN, on_accept, l);
	if (rc) {
		close(fd);
		free(l);
		goto out;
	}
	*out = l;
out:
	freeaddrinfo(ai);
	return rc;
}

static void tcp_unlisten(struct xp_listener *l)
{
	if (!l)
		return;
	reactor_del_fd(l->r, l->fd);
	close(l->fd);
	free(l);
}

/* ---- active side (initiator) ---- */

static void connect_failed(struct tcp_conn *c, int err, const char *what)
{
	snprintf(c->xc.why, sizeof(c->xc.why), "cannot connect to %s: %s", c->xc.peer, what ? what : strerror(-err));
	fail(c, err);
}

static void on_connect_event(void *arg, uint32_t events);

/* Start a non-blocking connect to the next address; -errno when none is left. */
static int connect_next(struct tcp_conn *c)
{
	int rc = -ECONNREFUSED;
	while (c->ai_next) {
		struct addrinfo *a = c->ai_next;
		c->ai_next = a->ai_next;
		int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 || errno == EINPROGRESS) {
			/* Writable once connected or failed, even when connect() finished at once. */
			rc = reactor_add_fd(c->xc.reactor, fd, EPOLLOUT, on_connect_event, c);
			if (!rc) {
				c->fd = fd;
				return 0;
			}
		} else {
			rc = -errno;
		}
		close(fd);
	}
	return rc;
}

static void on_connect_event(void *arg, uint32_t events)
{
	struct tcp_conn *c = arg;
	int soerr = 0;
	socklen_t sl = sizeof(soerr);
	(void)events;
	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
		soerr = errno;
	reactor_del_fd(c->xc.reactor, c->fd);
	if (soerr) {
		close(c->fd);
		c->fd = -1;
		int rc = connect_next(c);
		if (rc)
			connect_failed(c, -soerr, NULL);
		return;
	}
	connect_end(c);
	conn_addrs(c);
	if (c->xc.up && c->xc.up->connected)
		c->xc.up->connected(&c->xc);
}

static void connect_timeout(void *arg)
{
	struct tcp_conn *c = arg;
	char what[64];
	c->ctimer = NULL;
	snprintf(what, sizeof(what), "no answer within %u ms", c->ctimeout_ms);
	connect_failed(c, -ETIMEDOUT, what);
}

static int tcp_connect(const char *host, uint16_t port, struct reactor *r, unsigned timeout_ms, struct xp_conn **out,
		       char *err, size_t errlen)
{
	struct addrinfo *ai;
	int rc = resolve(host, port, 0, &ai, err, errlen);
	if (rc)
		return rc;
	struct tcp_conn *c = conn_new(-1);
	if (!c) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "cannot connect to %s:%u: out of memory", host, port);
		return -ENOMEM;
	}
	c->xc.reactor = r;
	snprintf(c->xc.peer, sizeof(c->xc.peer), "%s:%u", host, port);
	c->ai = c->ai_next = ai;
	c->ctimeout_ms = timeout_ms ? timeout_ms : 15000;
	rc = connect_next(c);
	if (!rc && !(c->ctimer = reactor_timer_add(r, c->ctimeout_ms, connect_timeout, c)))
		rc = -ENOMEM;
	if (rc) {
		snprintf(err, errlen, "cannot connect to %s:%u: %s", host, port, strerror(-rc));
		connect_end(c);
		if (c->fd >= 0) {
			reactor_del_fd(r, c->fd);
			close(c->fd);
		}
		conn_free(c);
		return rc;
	}
	*out = &c->xc;
	return 0;
}

const struct transport_ops tcp_transport = {
	.name = "tcp",
	.rdma = false,
	.listen = tcp_listen,
	.unlisten = tcp_unlisten,
	.start = tcp_start,
	.send = tcp_send,
	.close = tcp_close,
	.destroy = tcp_destroy,
	.connect = tcp_connect,
};
