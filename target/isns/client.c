/*
 * The iSNS client's thread: the engine's connection to the server, the ESI
 * port, and the hand-over of what to register.  Its own thread (like the
 * metrics endpoint's), so a server that is slow, gone or hostile costs a
 * reactor and the admin socket nothing: the admin thread copies what the
 * configuration asks for (isns_want_from_config) and returns.  Everything
 * here is nonblocking under one poll(); ESI connections are few
 * (ISNS_ESI_CONNS), short (ISNS_ESI_IDLE_MS), admitted so the server always
 * gets one (esi.c), and read through the same bounded parser as the
 * server's answers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "target/config/config.h"
#include "target/isns/isns.h"
#include "target/isns/isns_int.h"

static struct {
	pthread_mutex_t lock;
	pthread_t th;
	bool running;
	int wakefd;
	struct isns_want *next;  /* handed over, not yet taken */
	bool next_set, stop;
	struct isns_report report; /* the thread's view, copied after each step */
	bool configured;         /* the last configuration has global.isns */
} g = { .lock = PTHREAD_MUTEX_INITIALIZER, .wakefd = -1 };

/* The thread's own. */
static struct {
	struct isns_eng *eng;
	int fd;                  /* to the server */
	bool connecting;
	int esi_lfd;
	uint16_t esi_port;       /* bound */
	uint16_t esi_asked;      /* as configured (0: any) */
	struct isns_esi esi;     /* its connections' state; their sockets: */
	int esi_fd[ISNS_ESI_CONNS];
} t = { .fd = -1, .esi_lfd = -1 };

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void wake(void)
{
	uint64_t one = 1;
	if (g.wakefd >= 0 && write(g.wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("iSNS: cannot wake its thread: %s", strerror(errno));
}

/* ------------------------------------------------------------------------ */
/* The server connection (the engine's isns_io_ops). */

/* An address as iSNS has it: IPv4-mapped for IPv4. */
static void ip_of(const struct sockaddr_storage *ss, uint8_t ip[16])
{
	memset(ip, 0, 16);
	if (ss->ss_family == AF_INET) {
		ip[10] = ip[11] = 0xff;
		memcpy(ip + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(ip, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	}
}

static void local_of(int fd, uint8_t ip[16])
{
	struct sockaddr_storage ss = { .ss_family = AF_UNSPEC };
	socklen_t l = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &l))
		ss.ss_family = AF_UNSPEC;
	ip_of(&ss, ip);
}

static void io_close(void *ctx)
{
	(void)ctx;
	if (t.fd >= 0)
		close(t.fd);
	t.fd = -1;
	t.connecting = false;
}

static void io_connect(void *ctx, const char *host, uint16_t port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		len = sizeof(*s4);
	} else if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		len = sizeof(*s6);
	} else {
		isns_eng_down(t.eng, "not a numeric address", now_ms());
		return;
	}
	io_close(ctx);
	t.fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (t.fd < 0 || (connect(t.fd, (struct sockaddr *)&ss, len) && errno != EINPROGRESS)) {
		char why[128];
		snprintf(why, sizeof(why), "cannot connect: %s", strerror(errno));
		isns_eng_down(t.eng, why, now_ms());
		return;
	}
	t.connecting = true;
}

static const struct isns_io_ops io_ops = { .connect = io_connect, .close = io_close };

static void server_events(short re)
{
	uint64_t now = now_ms();
	if (t.connecting) {
		int e = 0;
		socklen_t l = sizeof(e);
		if (!(re & (POLLOUT | POLLERR | POLLHUP)))
			return;
		if (getsockopt(t.fd, SOL_SOCKET, SO_ERROR, &e, &l) || e) {
			char why[128];
			snprintf(why, sizeof(why), "cannot connect: %s", strerror(e ? e : errno));
			isns_eng_down(t.eng, why, now);
			return;
		}
		t.connecting = false;
		uint8_t local[16];
		local_of(t.fd, local);
		isns_eng_connected(t.eng, local, now);
		return;
	}
	if (re & (POLLIN | POLLERR | POLLHUP)) {
		uint8_t buf[16384];
		ssize_t n = recv(t.fd, buf, sizeof(buf), 0);
		if (n > 0) {
			isns_eng_input(t.eng, buf, (size_t)n, now);
		} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			char why[128];
			snprintf(why, sizeof(why), "%s", n == 0 ? "the server closed the connection" : strerror(errno));
			isns_eng_down(t.eng, why, now);
			return;
		}
	}
	size_t n;
	const uint8_t *p = t.fd >= 0 ? isns_eng_output(t.eng, &n) : NULL;
	if (p && n) {
		ssize_t w = send(t.fd, p, n, MSG_NOSIGNAL);
		if (w > 0) {
			isns_eng_sent(t.eng, (size_t)w, now);
		} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
			char why[128];
			snprintf(why, sizeof(why), "send: %s", strerror(errno));
			isns_eng_down(t.eng, why, now);
		}
	}
}

/* ------------------------------------------------------------------------ */
/* ESI: the server asks whether the entity lives; the answer echoes it. */

static void esi_close(size_t i)
{
	if (t.esi_fd[i] >= 0)
		close(t.esi_fd[i]);
	t.esi_fd[i] = -1;
	isns_esi_drop(&t.esi, i);
}

static void esi_listen_close(void)
{
	if (t.esi_lfd >= 0)
		close(t.esi_lfd);
	t.esi_lfd = -1;
	t.esi_port = 0;
	for (size_t i = 0; i < ISNS_ESI_CONNS; i++)
		esi_close(i);
}

/* Every address (the server reaches each portal's address at the ESI port), IPv6 and IPv4 when it can. */
static int esi_listen(uint16_t port)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_ANY) };
	int one = 1, zero = 0;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&s6, sizeof(s6))) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&s4, sizeof(s4))) {
			int e = errno;
			close(fd);
			return -e;
		}
	}
	struct sockaddr_storage ss;
	socklen_t l = sizeof(ss);
	if (listen(fd, 8) || getsockname(fd, (struct sockaddr *)&ss, &l)) {
		int e = errno;
		close(fd);
		return -e;
	}
	t.esi_lfd = fd;
	t.esi_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
						    : ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

/* The ESI port w asks for: opened, kept, or closed; w->esi_port becomes the one listened on (0: none). */
static void esi_setup(struct isns_want *w)
{
	isns_esi_server(&t.esi, w ? w->host : NULL);
	if (!w || !w->esi_interval) {
		if (t.esi_lfd >= 0)
			log_info("iSNS: ESI port %u closed", t.esi_port);
		esi_listen_close();
		if (w)
			w->esi_port = 0;
		return;
	}
	if (t.esi_lfd < 0 || w->esi_port != t.esi_asked) {
		esi_listen_close();
		int r = esi_listen(w->esi_port);
		if (r) {
			log_err("iSNS: ESI port %u: %s; portals registered without ESI", w->esi_port, strerror(-r));
			w->esi_port = 0;
			return;
		}
		t.esi_asked = w->esi_port;
		log_info("iSNS: answering ESI on port %u", t.esi_port);
	}
	w->esi_port = t.esi_port;
}

static void esi_accept(void)
{
	struct sockaddr_storage ss = { .ss_family = AF_UNSPEC };
	socklen_t l = sizeof(ss);
	int fd = accept4(t.esi_lfd, (struct sockaddr *)&ss, &l, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	uint8_t peer[16];
	bool evicted;
	ip_of(&ss, peer);
	int i = isns_esi_admit(&t.esi, peer, now_ms(), &evicted);
	if (i < 0) {
		close(fd);
		return;
	}
	if (evicted && t.esi_fd[i] >= 0)
		close(t.esi_fd[i]);
	t.esi_fd[i] = fd;
}

static void esi_events(size_t i, short re)
{
	if (re & (POLLIN | POLLERR | POLLHUP)) {
		uint8_t buf[4096];
		ssize_t n = recv(t.esi_fd[i], buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) ||
		    (n > 0 && isns_esi_input(&t.esi, i, buf, (size_t)n, isns_eng_eid(t.eng)))) {
			esi_close(i);
			return;
		}
	}
	size_t n;
	const uint8_t *p = isns_esi_output(&t.esi, i, &n);
	if (n) {
		ssize_t w = send(t.esi_fd[i], p, n, MSG_NOSIGNAL);
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			esi_close(i);
			return;
		}
		if (w > 0)
			isns_esi_sent(&t.esi, i, (size_t)w);
	}
}

/* ------------------------------------------------------------------------ */

static void *isns_thread(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < ISNS_ESI_CONNS; i++)
		t.esi_fd[i] = -1;
	bool stopping = false;
	uint64_t stop_deadline = 0;
	for (;;) {
		uint64_t now = now_ms();
		pthread_mutex_lock(&g.lock);
		bool set = g.next_set, stop = g.stop;
		struct isns_want *w = g.next;
		g.next = NULL;
		g.next_set = false;
		pthread_mutex_unlock(&g.lock);
		if (set && !stopping) {
			esi_setup(w);
			isns_eng_want(t.eng, w, now);
		} else {
			isns_want_free(w);
		}
		if (stop && !stopping) {
			stopping = true;
			stop_deadline = now + ISNS_STOP_MS;
			isns_eng_stop(t.eng, now);
		}
		uint64_t next = isns_eng_tick(t.eng, now);
		struct isns_report st = { .running = true };
		isns_eng_report(t.eng, now, &st);
		pthread_mutex_lock(&g.lock);
		g.report = st;
		pthread_mutex_unlock(&g.lock);
		if (stopping && (isns_eng_done(t.eng) || now >= stop_deadline))
			break;
		struct pollfd pf[3 + ISNS_ESI_CONNS];
		size_t np = 0;
		pf[np++] = (struct pollfd){ .fd = g.wakefd, .events = POLLIN };
		size_t out_len = 0;
		if (t.fd >= 0 && !t.connecting)
			isns_eng_output(t.eng, &out_len);
		pf[np++] = (struct pollfd){ .fd = t.fd, .events = (short)(t.connecting || out_len ? POLLOUT : 0) |
								(t.connecting ? 0 : POLLIN) };
		pf[np++] = (struct pollfd){ .fd = t.esi_lfd, .events = POLLIN };
		for (size_t i = 0; i < ISNS_ESI_CONNS; i++) {
			size_t n;
			isns_esi_output(&t.esi, i, &n);
			pf[np++] = (struct pollfd){ .fd = t.esi_fd[i], .events = (short)(POLLIN | (n ? POLLOUT : 0)) };
			if (t.esi_fd[i] >= 0 && t.esi.c[i].since + ISNS_ESI_IDLE_MS < next)
				next = t.esi.c[i].since + ISNS_ESI_IDLE_MS;
		}
		if (stopping && stop_deadline < next)
			next = stop_deadline;
		int timeout = next <= now ? 0 : next - now > 60000 ? 60000 : (int)(next - now);
		int rc = poll(pf, np, timeout);
		if (rc < 0 && errno != EINTR)
			break;
		if (rc <= 0)
			goto timers;
		if (pf[0].revents) {
			uint64_t v;
			if (read(g.wakefd, &v, sizeof(v)) < 0 && errno != EAGAIN)
				log_debug("iSNS: wake: %s", strerror(errno));
		}
		if (t.fd >= 0 && pf[1].fd == t.fd && pf[1].revents)
			server_events(pf[1].revents);
		if (t.esi_lfd >= 0 && pf[2].fd == t.esi_lfd && (pf[2].revents & POLLIN))
			esi_accept();
		for (size_t i = 0; i < ISNS_ESI_CONNS; i++)
			if (t.esi_fd[i] >= 0 && pf[3 + i].fd == t.esi_fd[i] && pf[3 + i].revents)
				esi_events(i, pf[3 + i].revents);
timers:
		now = now_ms();
		for (size_t i = 0; i < ISNS_ESI_CONNS; i++)
			if (t.esi_fd[i] >= 0 && now >= t.esi.c[i].since + ISNS_ESI_IDLE_MS)
				esi_close(i);
	}
	isns_eng_free(t.eng);
	t.eng = NULL;
	esi_listen_close();
	return NULL;
}

static bool start(void)
{
	if (g.running)
		return true;
	g.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	t.eng = isns_eng_new(&io_ops, NULL);
	if (g.wakefd < 0 || !t.eng || pthread_create(&g.th, NULL, isns_thread, NULL)) {
		log_err("iSNS: cannot start its thread: %s", strerror(errno));
		if (g.wakefd >= 0)
			close(g.wakefd);
		g.wakefd = -1;
		isns_eng_free(t.eng);
		t.eng = NULL;
		return false;
	}
	g.running = true;
	return true;
}

void isns_get_report(struct isns_report *st)
{
	pthread_mutex_lock(&g.lock);
	*st = g.report;
	/* The thread runs on after global.isns went (it deregisters): nothing is served then. */
	st->running = g.running && !g.stop && g.configured;
	if (!st->running)
		*st = (struct isns_report){ 0 };
	pthread_mutex_unlock(&g.lock);
}

void isns_configure(const struct config *c)
{
	char err[128];
	struct isns_want *w = isns_want_from_config(c, err, sizeof(err));
	if (!w && err[0]) {
		log_err("iSNS: %s; the registration is left as it was", err);
		return;
	}
	pthread_mutex_lock(&g.lock);
	if (!g.running && !w) {
		pthread_mutex_unlock(&g.lock);
		return; /* never configured: no thread */
	}
	if (g.stop || !start()) {
		pthread_mutex_unlock(&g.lock);
		isns_want_free(w);
		return;
	}
	isns_want_free(g.next);
	g.next = w;
	g.next_set = true;
	g.configured = w != NULL;
	pthread_mutex_unlock(&g.lock);
	/* Said when it changes, not at every change of the configuration. */
	static char said[400];
	char line[400];
	if (w)
		snprintf(line, sizeof(line), "iSNS: server %s, entity %s%s: %zu target%s to register", c->isns->server,
			 w->eid, c->isns->entity ? "" : " (the host name)", w->nnodes, w->nnodes == 1 ? "" : "s");
	else
		snprintf(line, sizeof(line), "iSNS: off (no global.isns)");
	if (strcmp(line, said)) {
		log_info("%s", line);
		snprintf(said, sizeof(said), "%s", line);
	}
	wake();
}

void isns_shutdown(void)
{
	pthread_mutex_lock(&g.lock);
	g.stop = true;
	pthread_mutex_unlock(&g.lock);
	wake();
}

void isns_stop(void)
{
	isns_shutdown();
	if (!g.running)
		return;
	pthread_join(g.th, NULL);
	g.running = false;
	close(g.wakefd);
	g.wakefd = -1;
	isns_want_free(g.next);
	g.next = NULL;
}
