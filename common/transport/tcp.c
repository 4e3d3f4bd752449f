/*
 * TCP transport.  Receives through a staging buffer (few syscalls for small
 * PDUs) and reads large data segments straight into the place the iSCSI
 * layer chose; sends with sendmsg (MSG_NOSIGNAL), batching every PDU queued during one
 * reactor iteration into as few syscalls as possible.
 */
#include "common/transport/transport.h"

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

#include "common/proto/crc32c.h"
#include "common/log.h"
#include "common/netaddr.h"
#include "common/reactor.h"
#include "common/util.h"

#define TCP_STAGING (64 * 1024)
#define TCP_STAGING_MIN 4096         /* a connection in login, or a quiet one, needs no more */
#define TCP_DIRECT_MIN (16 * 1024)   /* read at least this much straight into the destination */
#define TCP_MAX_IOV 64
/* Receive steps per wake-up: bounded work keeps the reactor's other connections served. */
#define TCP_RX_BUDGET 1024
/* A listener that ran out of file descriptors rests this long before accepting again. */
#define TCP_ACCEPT_PAUSE_MS 100
/* Connections the kernel holds for us while we accept: a burst of logins waits here, not in SYN retries. */
#define TCP_BACKLOG 1024

enum rx_state { RX_BHS, RX_AHS, RX_HDIG, RX_DATA, RX_PAD, RX_DDIG };

struct tcp_conn {
	struct xp_conn xc;
	int fd;
	bool flush_scheduled, want_out, rx_more_scheduled;
	/* The last data segment was large: the next ones likely are too, so read
	 * headers without the staging buffer and let data go straight to its place. */
	bool direct_next;
	/* receive; the staging buffer comes with the first byte, small, and grows
	 * to TCP_STAGING once a read fills it (a busy connection) */
	uint8_t *stage;
	uint32_t stage_cap;
	bool stage_full;
	/* A read returned less than it asked: the socket was empty then, so the
	 * next read waits for the next EPOLLIN (level-triggered, nothing is
	 * lost) instead of costing a system call that would say EAGAIN. */
	bool rx_dry;
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
	/* connecting (active side): the addresses not tried yet */
	struct addrinfo *ai, *ai_next;
};

struct xp_listener {
	int fd;
	struct reactor *r;
	struct xp_listen_params lp;
	char name[72];                 /* host:port, for log lines */
	struct reactor_timer *pause;   /* out of memory: accepting again later */
	int spare;                     /* held for the moment descriptors run out (-1: none) */
};

static const uint8_t zero_pad[4];

static void tcp_flush(void *arg);
static void flush_now(struct tcp_conn *c);
static void tcp_on_event(void *arg, uint32_t events);

static void conn_free(struct xp_conn *xc)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
	free(c->stage);
	free(c->own);
	free(c);
}

static void connect_end(struct tcp_conn *c)
{
	xp_connect_timer_stop(&c->xc);
	if (c->ai)
		freeaddrinfo(c->ai);
	c->ai = c->ai_next = NULL;
}

static void fail_queue(struct tcp_conn *c)
{
	c->txt = NULL;
	xp_fail_pdus(&c->txh, -ECONNRESET);
}

static void tcp_close(struct xp_conn *xc)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
	if (!xp_close_begin(xc))
		return;
	connect_end(c);
	if (c->fd >= 0) {
		reactor_del_fd(c->xc.reactor, c->fd);
		close(c->fd);
		c->fd = -1;
	}
	fail_queue(c);
	xp_closed_later(xc);
}

static void fail(struct tcp_conn *c, int err)
{
	if (!c->xc.err)
		c->xc.err = err;
	tcp_close(&c->xc);
}

static void tcp_destroy(struct xp_conn *xc)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
	if (!c)
		return;
	if (!xp_closing(xc))
		tcp_close(xc);
	xp_release(xc);
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
		if (c->rx_dry)
			return 0;
		if (!c->stage || (c->stage_full && c->stage_cap < TCP_STAGING)) {
			uint32_t cap = c->stage ? TCP_STAGING : TCP_STAGING_MIN;
			uint8_t *n = realloc(c->stage, cap);
			if (!n)
				return -ENOMEM;
			c->stage = n;
			c->stage_cap = cap;
		}
		ssize_t r;
		bool direct = p != XP_DISCARD && (want >= TCP_DIRECT_MIN || c->direct_next);
		if (direct)
			r = read(c->fd, p + c->got, want);
		else
			r = read(c->fd, c->stage, c->stage_cap);
		if (r == 0)
			return -ECONNRESET;
		if (r < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : (errno == EINTR ? 0 : -errno);
		XP_STAT_ADD(&c->xc, bytes_in, (uint64_t)r);
		if (direct) {
			c->got += (uint32_t)r;
			c->rx_dry = (uint32_t)r < want;
		} else {
			c->stail = (size_t)r;
			c->stage_full = (size_t)r == c->stage_cap;
			c->rx_dry = !c->stage_full;
		}
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
	XP_STAT_ADD(&c->xc, pdus_in, 1);
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
				XP_STAT_ADD(&c->xc, digest_errors, 1);
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
			XP_STAT_ADD(&c->xc, digest_errors, got != crc);
		}
		deliver(c);
		return 1;
	}
	return -EINVAL;
}

static void rx_more(void *arg);

static void rx_run(struct tcp_conn *c)
{
	/* Bounded work per wake-up keeps other connections on this reactor served. */
	for (int i = 0; i < TCP_RX_BUDGET; i++) {
		if (xp_closing(&c->xc))
			return;
		int rc = rx_step(c);
		if (rc < 0) {
			fail(c, rc);
			return;
		}
		if (rc == 0)
			return;
	}
	/*
	 * Budget spent with input left: what sits in the staging buffer makes
	 * no epoll event (the socket may be empty now), so come back on the
	 * next loop iteration instead of waiting for the peer to send more.
	 */
	if (!c->rx_more_scheduled && !xp_defer(&c->xc, rx_more))
		c->rx_more_scheduled = true;
}

static void rx_more(void *arg)
{
	struct tcp_conn *c = arg;
	if (xp_deferred_gone(&c->xc))
		return;
	c->rx_more_scheduled = false;
	rx_run(c);
}

static void tcp_on_event(void *arg, uint32_t events)
{
	struct tcp_conn *c = arg;
	if (events & EPOLLOUT)
		flush_now(c);
	if (!xp_closing(&c->xc) && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->rx_more_scheduled) {
		c->rx_dry = false;
		rx_run(c);
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
	if (xp_deferred_gone(&c->xc))
		return;
	c->flush_scheduled = false;
	flush_now(c);
}

static void flush_now(struct tcp_conn *c)
{
	while (c->txh && !xp_closing(&c->xc)) {
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
		/* sendmsg, not writev: MSG_NOSIGNAL, because a library must not raise SIGPIPE in its caller
		 * when the peer has reset the connection (isertd ignores SIGPIPE; iserbench did not). */
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
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
		XP_STAT_ADD(&c->xc, bytes_out, (uint64_t)w);
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
			XP_STAT_ADD(&c->xc, pdus_out, 1);
			if (p->done)
				p->done(p, 0);
		}
	}
	if (!xp_closing(&c->xc))
		set_events(c, false);
}

static void tcp_send(struct xp_conn *xc, struct xp_pdu *p)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
	p->next = NULL;
	if (xp_closing(xc)) {
		xp_send_dead(xc, p);
		return;
	}
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
		/* Without a deferred call, the socket's writability flushes it. */
		if (!xp_defer(&c->xc, tcp_flush))
			c->flush_scheduled = true;
		else
			set_events(c, true);
	}
}

static void conn_addrs(struct tcp_conn *c);

static struct tcp_conn *conn_new(int fd)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->fd = fd;
	c->xc.ops = &tcp_transport;
	c->xc.free = conn_free;
	c->xc.state = XP_UP;   /* accepted; tcp_connect says XP_CONNECTING */
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
		netaddr_format((const struct sockaddr *)&ss, c->xc.peer, sizeof(c->xc.peer), c->xc.peer_ip,
			       sizeof(c->xc.peer_ip), NULL);
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

/* Probe a silent peer, and give up on data it never acknowledges. */
static void set_keepalive(int fd, unsigned idle_s)
{
	int one = 1, idle = (int)idle_s, intvl = 10, cnt = 3;
	unsigned user_ms = (idle_s + (unsigned)(intvl * cnt)) * 1000u;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms));
}

static void on_accept(void *arg, uint32_t events);

static void accept_resume(void *arg)
{
	struct xp_listener *l = arg;
	l->pause = NULL;
	reactor_mod_fd(l->r, l->fd, EPOLLIN);
}

/*
 * Out of descriptors, a connection left in the backlog would take the next
 * one freed, ahead of any later login, and the level-triggered listener
 * would wake us for it at once, for ever.  The spare descriptor is given up
 * for a moment to accept it and close it at once; true when that was done.
 */
static bool refuse_with_spare(struct xp_listener *l)
{
	if (l->spare < 0)
		return false;
	close(l->spare);
	int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
	int e = errno;
	if (fd >= 0)
		close(fd);
	l->spare = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return e == EAGAIN || e == EWOULDBLOCK || e == ECONNABORTED;
	log_limited(LOG_WARN, "accept on %s: out of file descriptors; a connection was closed at once", l->name);
	return true;
}

static void on_accept(void *arg, uint32_t events)
{
	struct xp_listener *l = arg;
	(void)events;
	for (;;) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED)
				return;
			if ((errno == EMFILE || errno == ENFILE) && refuse_with_spare(l))
				continue;
			/* Out of memory (or no spare): rest instead of spinning, and say so rarely. */
			log_limited(LOG_WARN, "accept on %s: %s; not accepting for %d ms", l->name, strerror(errno),
				    TCP_ACCEPT_PAUSE_MS);
			if (!l->pause && !reactor_mod_fd(l->r, l->fd, 0))
				l->pause = reactor_timer_add(l->r, TCP_ACCEPT_PAUSE_MS, accept_resume, l);
			return;
		}
		struct tcp_conn *c = conn_new(fd);
		if (!c) {
			close(fd);
			continue;
		}
		if (l->lp.admit && !l->lp.admit(l->lp.arg, &c->xc)) {
			close(fd);
			conn_free(&c->xc);
			continue;
		}
		if (l->lp.keepalive_s)
			set_keepalive(fd, l->lp.keepalive_s);
		l->lp.accept(l->lp.arg, &c->xc);
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

/* IP_TOS (IPv4) or IPV6_TCLASS (IPv6); a listening socket passes it to the sockets it accepts. */
static int sock_set_tos(int fd, int family, uint8_t tos)
{
	int v = tos;
	int rc = family == AF_INET6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &v, sizeof(v))
				    : setsockopt(fd, IPPROTO_IP, IP_TOS, &v, sizeof(v));
	return rc ? -errno : 0;
}

static int tcp_set_tos(struct xp_listener *l, uint8_t tos)
{
	struct sockaddr_storage ss;
	socklen_t n = sizeof(ss);
	if (getsockname(l->fd, (struct sockaddr *)&ss, &n))
		return -errno;
	int rc = sock_set_tos(l->fd, ss.ss_family, tos);
	if (!rc)
		l->lp.tos = tos;
	return rc;
}

static int tcp_listen(const char *host, uint16_t port, struct reactor *r, const struct xp_listen_params *lp,
		      struct xp_listener **out, char *err, size_t errlen)
{
	struct addrinfo *ai;
	char at[NETADDR_LEN];
	netaddr_join(at, sizeof(at), host, port);
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
	if (lp->tos && (rc = sock_set_tos(fd, ai->ai_family, lp->tos))) {
		snprintf(err, errlen, "portal %s: tos %u: %s", at, lp->tos, strerror(-rc));
		close(fd);
		goto out;
	}
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, TCP_BACKLOG)) {
		rc = -errno;
		snprintf(err, errlen, "cannot listen on %s: %s", at, strerror(errno));
		close(fd);
		goto out;
	}
	struct xp_listener *l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		rc = -ENOMEM;
		goto out;
	}
	*l = (struct xp_listener){ .fd = fd, .r = r, .lp = *lp, .spare = open("/dev/null", O_RDONLY | O_CLOEXEC) };
	netaddr_join(l->name, sizeof(l->name), host, port);
	rc = reactor_add_fd(r, fd, EPOLLIN, on_accept, l);
	if (rc) {
		close(fd);
		if (l->spare >= 0)
			close(l->spare);
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
	if (l->pause)
		reactor_timer_cancel(l->r, l->pause);
	reactor_del_fd(l->r, l->fd);
	close(l->fd);
	if (l->spare >= 0)
		close(l->spare);
	free(l);
}

/* ---- active side (initiator) ---- */

static void connect_failed(struct xp_conn *xc, int err, const char *what)
{
	struct tcp_conn *c = (struct tcp_conn *)xc;
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
			connect_failed(&c->xc, -soerr, NULL);
		return;
	}
	connect_end(c);
	conn_addrs(c);
	c->xc.state = XP_UP;
	if (c->xc.up && c->xc.up->connected)
		c->xc.up->connected(&c->xc);
}

static int tcp_connect(const char *host, uint16_t port, struct reactor *r, unsigned timeout_ms, struct xp_conn **out,
		       char *err, size_t errlen)
{
	struct addrinfo *ai;
	char at[NETADDR_HOST_LEN];
	netaddr_join(at, sizeof(at), host, port);
	int rc = resolve(host, port, 0, &ai, err, errlen);
	if (rc)
		return rc;
	struct tcp_conn *c = conn_new(-1);
	if (!c) {
		freeaddrinfo(ai);
		snprintf(err, errlen, "cannot connect to %s: out of memory", at);
		return -ENOMEM;
	}
	c->xc.reactor = r;
	c->xc.state = XP_CONNECTING;
	c->xc.connect_failed = connect_failed;
	netaddr_join(c->xc.peer, sizeof(c->xc.peer), host, port);
	c->ai = c->ai_next = ai;
	rc = connect_next(c);
	if (!rc)
		rc = xp_connect_timer_start(&c->xc, timeout_ms ? timeout_ms : 15000);
	if (rc) {
		snprintf(err, errlen, "cannot connect to %s: %s", at, strerror(-rc));
		connect_end(c);
		if (c->fd >= 0) {
			reactor_del_fd(r, c->fd);
			close(c->fd);
		}
		conn_free(&c->xc);
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
	.set_tos = tcp_set_tos,
	.start = tcp_start,
	.send = tcp_send,
	.close = tcp_close,
	.destroy = tcp_destroy,
	.connect = tcp_connect,
};
