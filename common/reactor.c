/*
 * The reactor loop: epoll for sockets and CQ channels, an eventfd for
 * messages from other threads, io_uring rings for backstore I/O, a
 * deferred-call queue and one-shot timers.  The rings are not in the epoll
 * set: their completions are read from user space on every iteration, and
 * while a ring has requests out the reactor sleeps in that ring rather than
 * in epoll_wait (ring_sleep).
 */
#include "common/reactor.h"

#include <errno.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/log.h"

#define REACTOR_RING_ENTRIES 256
/* The big ring carries passthrough commands only (nvme): fewer, larger entries. */
#define REACTOR_BIG_ENTRIES 128
#define REACTOR_MAX_EVENTS 64

struct reactor_fd {
	int fd;
	bool dead;
	reactor_fd_cb cb;
	void *arg;
	struct reactor_fd *next_dead;
};

struct reactor_call {
	reactor_fn fn;
	void *arg;
};

struct reactor_timer {
	uint64_t deadline;
	reactor_fn fn;
	void *arg;
	struct reactor_timer *next;
};

/*
 * One io_uring ring and what the reactor has out on it.  inflight counts the
 * SQEs handed to callers whose completion is not reaped yet (every request
 * the backstores make completes once); the two polls are the reactor's own,
 * armed when it sleeps in this ring and not counted.
 */
struct reactor_ring {
	struct io_uring u;
	bool ok;
	unsigned pending;    /* SQEs not submitted yet */
	unsigned inflight;
	bool epoll_armed;    /* a one-shot poll on the epoll fd waits in this ring */
	bool peer_armed;     /* ... on the other ring's fd */
	struct reactor_uring_op epoll_op, peer_op;
};

struct reactor_poller {
	int (*poll)(void *arg);
	int (*arm)(void *arg);
	void *arg;
	bool dead;
	struct reactor_poller *next;
};

struct reactor {
	int index;
	enum reactor_poll_mode mode;
	uint64_t spin_ns;            /* adaptive mode polls on this long after its last work */
	int epfd;
	int evfd;
	volatile bool stopping;
	struct reactor_fd **fds;     /* indexed by fd */
	int nfds;
	struct reactor_fd *dead;     /* freed at the end of an iteration */
	struct reactor_poller *pollers; /* dead ones unlinked at the end of an iteration */
	bool pollers_dead;
	/* deferred calls: a growable array, swapped out while running */
	struct reactor_call *defer, *defer_run;
	size_t ndefer, defer_cap, defer_run_cap;
	/* cross-thread messages */
	pthread_mutex_t msg_lock;
	struct reactor_call *msgs;
	size_t nmsgs, msgs_cap;
	struct reactor_timer *timers; /* sorted by deadline */
	struct reactor_ring ring;
	bool registered;     /* in the registry reactor_next() walks (not a private one) */
	/*
	 * The big ring (SQE128 | CQE32) for uring_cmd passthrough, made on the
	 * first reactor_uring_sqe_cmd(): most reactors never need one, and a
	 * ring of 128-byte entries for every reactor would cost memory and a
	 * kernel that lacks the flags a warning at start for nothing.
	 */
	struct reactor_ring big;
	bool big_failed;
	bool epoll_ready;    /* a ring's poll on the epoll fd fired */
	struct bufpool *pool;
	struct reactor_fd ev_entry;
};

static __thread struct reactor *tls_reactor;

/* Every reactor of the process, for round-robin placement of connections. */
#define REACTOR_MAX 256
static struct reactor *all_reactors[REACTOR_MAX];
static unsigned n_reactors, next_reactor;
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;

struct reactor *reactor_next(void)
{
	pthread_mutex_lock(&all_lock);
	struct reactor *r = n_reactors ? all_reactors[next_reactor++ % n_reactors] : NULL;
	pthread_mutex_unlock(&all_lock);
	return r;
}

unsigned reactor_send_all(reactor_fn fn, void *arg)
{
	unsigned n = 0;
	pthread_mutex_lock(&all_lock);
	for (unsigned i = 0; i < n_reactors; i++)
		n += reactor_send(all_reactors[i], fn, arg) == 0;
	pthread_mutex_unlock(&all_lock);
	return n;
}

static void registry_set(struct reactor *r, bool add)
{
	pthread_mutex_lock(&all_lock);
	if (add && n_reactors < REACTOR_MAX) {
		all_reactors[n_reactors++] = r;
	} else if (!add) {
		for (unsigned i = 0; i < n_reactors; i++) {
			if (all_reactors[i] == r) {
				all_reactors[i] = all_reactors[--n_reactors];
				break;
			}
		}
	}
	pthread_mutex_unlock(&all_lock);
}

uint64_t reactor_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct reactor *reactor_self(void) { return tls_reactor; }
int reactor_index(const struct reactor *r) { return r->index; }
struct bufpool *reactor_bufpool(struct reactor *r) { return r->pool; }
struct io_uring *reactor_ring(struct reactor *r) { return r->ring.ok ? &r->ring.u : NULL; }

/* An SQE of q, submitted with the loop's next submission. */
static struct io_uring_sqe *ring_sqe(struct reactor_ring *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->u);
	if (!sqe) {
		/* Ring full: push what is queued and try once more. */
		io_uring_submit(&q->u);
		q->pending = 0;
		sqe = io_uring_get_sqe(&q->u);
	}
	if (sqe)
		q->pending++;
	return sqe;
}

/* An SQE for a caller's request, counted until its completion is reaped. */
static struct io_uring_sqe *ring_request(struct reactor_ring *q)
{
	struct io_uring_sqe *sqe = q->ok ? ring_sqe(q) : NULL;
	if (sqe)
		q->inflight++;
	return sqe;
}

static void ring_submit(struct reactor_ring *q)
{
	if (q->ok && q->pending) {
		io_uring_submit(&q->u);
		q->pending = 0;
	}
}

/*
 * Run the callback of every completion q holds (no system call: the CQ is
 * shared memory); returns how many requests completed.
 */
static int ring_reap(struct reactor *r, struct reactor_ring *q)
{
	struct io_uring_cqe *cqe;
	int n = 0;
	while (q->ok && io_uring_peek_cqe(&q->u, &cqe) == 0) {
		struct reactor_uring_op *op = io_uring_cqe_get_data(cqe);
		int res = cqe->res;
		io_uring_cqe_seen(&q->u, cqe);
		if (op == &q->epoll_op) {
			q->epoll_armed = false;
			r->epoll_ready = true;
		} else if (op == &q->peer_op) {
			q->peer_armed = false;
		} else {
			if (q->inflight)
				q->inflight--;
			n++;
			if (op && op->cb)
				op->cb(op, res);
		}
	}
	return n;
}

static int reap_rings(struct reactor *r)
{
	return ring_reap(r, &r->ring) + ring_reap(r, &r->big);
}

struct io_uring_sqe *reactor_uring_sqe(struct reactor *r)
{
	return ring_request(&r->ring);
}

/* The big ring, reaped and submitted like the main one; false if the kernel refuses it (said once). */
static bool big_ring(struct reactor *r)
{
	if (r->big.ok || r->big_failed)
		return r->big.ok;
	if (!r->ring.ok) {
		/* A private reactor, or io_uring unavailable (already said): callers go synchronous. */
		r->big_failed = true;
		return false;
	}
	int rc = io_uring_queue_init(REACTOR_BIG_ENTRIES, &r->big.u, IORING_SETUP_SQE128 | IORING_SETUP_CQE32);
	if (rc) {
		r->big_failed = true;
		log_warn("reactor %d: io_uring with 128-byte SQEs unavailable (%s; Linux 5.19 or later has them): "
			 "NVMe passthrough runs synchronously on this reactor", r->index, strerror(-rc));
		return false;
	}
	r->big.ok = true;
	return true;
}

struct io_uring_sqe *reactor_uring_sqe_cmd(struct reactor *r)
{
	return big_ring(r) ? ring_request(&r->big) : NULL;
}

/* A one-shot POLLIN on fd in ring q, its completion marked by op; false if q is full. */
static bool ring_arm_poll(struct reactor_ring *q, int fd, struct reactor_uring_op *op, bool *armed)
{
	if (*armed)
		return true;
	struct io_uring_sqe *sqe = ring_sqe(q);
	if (!sqe)
		return false;
	io_uring_prep_poll_add(sqe, fd, POLLIN);
	io_uring_sqe_set_data(sqe, op);
	*armed = true;
	return true;
}

/*
 * Sleep in a ring that has requests out instead of in epoll_wait: the
 * io_uring_enter that submits the request then also waits for it, and its
 * completion wakes the reactor there, one system call where epoll took a
 * second wake-up (a QD1 read on a file LU: 4 calls, not 5).  One-shot polls
 * in the same ring on the epoll fd, and on the other ring's fd if that has
 * requests out too, keep sockets, messages and the other ring waking it.
 * Returns false, having slept not at all, if a poll could not be armed.
 */
static bool ring_sleep(struct reactor *r, int timeout_ms)
{
	struct reactor_ring *w = r->ring.inflight ? &r->ring : &r->big;
	struct reactor_ring *o = w == &r->ring ? &r->big : &r->ring;
	if (!ring_arm_poll(w, r->epfd, &w->epoll_op, &w->epoll_armed) ||
	    (o->inflight && !ring_arm_poll(w, o->u.ring_fd, &w->peer_op, &w->peer_armed)))
		return false;
	ring_submit(o);
	struct __kernel_timespec ts = { .tv_sec = timeout_ms / 1000, .tv_nsec = (timeout_ms % 1000) * 1000000ll };
	struct io_uring_cqe *cqe;
	int rc = io_uring_submit_and_wait_timeout(&w->u, &cqe, 1, timeout_ms >= 0 ? &ts : NULL, NULL);
	w->pending = 0;
	if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
		log_warn("reactor %d: io_uring wait: %s", r->index, strerror(-rc));
	return true;
}

static void drain_msgs(void *arg, uint32_t events)
{
	struct reactor *r = arg;
	uint64_t v;
	(void)events;
	if (read(r->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("reactor %d: eventfd read: %s", r->index, strerror(errno));
	for (;;) {
		pthread_mutex_lock(&r->msg_lock);
		if (!r->nmsgs) {
			pthread_mutex_unlock(&r->msg_lock);
			return;
		}
		struct reactor_call c = r->msgs[0];
		memmove(r->msgs, r->msgs + 1, (r->nmsgs - 1) * sizeof(*r->msgs));
		r->nmsgs--;
		pthread_mutex_unlock(&r->msg_lock);
		c.fn(c.arg);
	}
}

static int epoll_add(struct reactor *r, int fd, uint32_t events, struct reactor_fd *e)
{
	struct epoll_event ev = { .events = events, .data.ptr = e };
	return epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

static struct reactor *create(int index, enum reactor_poll_mode mode, bool private)
{
	struct reactor *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->index = index;
	r->mode = mode;
	r->spin_ns = REACTOR_ADAPTIVE_SPIN_US * 1000ull;
	r->epfd = epoll_create1(EPOLL_CLOEXEC);
	r->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	r->pool = bufpool_create();
	pthread_mutex_init(&r->msg_lock, NULL);
	if (r->epfd < 0 || r->evfd < 0 || !r->pool)
		goto fail;
	r->ev_entry = (struct reactor_fd){ .fd = r->evfd, .cb = drain_msgs, .arg = r };
	if (epoll_add(r, r->evfd, EPOLLIN, &r->ev_entry))
		goto fail;
	if (private)
		return r;
	int rc = io_uring_queue_init(REACTOR_RING_ENTRIES, &r->ring.u, 0);
	r->ring.ok = rc == 0;
	if (!r->ring.ok && index == 0)
		log_warn("io_uring unavailable (%s): file and block I/O fall back to synchronous calls",
			 strerror(-rc));
	registry_set(r, true);
	r->registered = true;
	return r;
fail:
	reactor_destroy(r);
	return NULL;
}

struct reactor *reactor_create(int index, enum reactor_poll_mode mode)
{
	return create(index, mode, false);
}

struct reactor *reactor_create_private(void)
{
	return create(-1, REACTOR_EVENT, true);
}

void reactor_destroy(struct reactor *r)
{
	if (!r)
		return;
	if (r->registered)
		registry_set(r, false);
	if (r->ring.ok)
		io_uring_queue_exit(&r->ring.u);
	if (r->big.ok)
		io_uring_queue_exit(&r->big.u);
	for (int i = 0; i < r->nfds; i++)
		free(r->fds[i]);
	free(r->fds);
	while (r->pollers) {
		struct reactor_poller *p = r->pollers;
		r->pollers = p->next;
		free(p);
	}
	while (r->dead) {
		struct reactor_fd *d = r->dead;
		r->dead = d->next_dead;
		free(d);
	}
	while (r->timers) {
		struct reactor_timer *t = r->timers;
		r->timers = t->next;
		free(t);
	}
	free(r->defer);
	free(r->defer_run);
	free(r->msgs);
	if (r->epfd >= 0)
		close(r->epfd);
	if (r->evfd >= 0)
		close(r->evfd);
	bufpool_destroy(r->pool);
	pthread_mutex_destroy(&r->msg_lock);
	free(r);
}

int reactor_add_fd(struct reactor *r, int fd, uint32_t events, reactor_fd_cb cb, void *arg)
{
	if (fd < 0)
		return -EBADF;
	if (fd >= r->nfds) {
		int n = fd + 64;
		struct reactor_fd **nf = realloc(r->fds, (size_t)n * sizeof(*nf));
		if (!nf)
			return -ENOMEM;
		memset(nf + r->nfds, 0, (size_t)(n - r->nfds) * sizeof(*nf));
		r->fds = nf;
		r->nfds = n;
	}
	if (r->fds[fd])
		return -EEXIST;
	struct reactor_fd *e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = (struct reactor_fd){ .fd = fd, .cb = cb, .arg = arg };
	int rc = epoll_add(r, fd, events, e);
	if (rc) {
		free(e);
		return rc;
	}
	r->fds[fd] = e;
	return 0;
}

int reactor_mod_fd(struct reactor *r, int fd, uint32_t events)
{
	if (fd < 0 || fd >= r->nfds || !r->fds[fd])
		return -ENOENT;
	struct epoll_event ev = { .events = events, .data.ptr = r->fds[fd] };
	return epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev) ? -errno : 0;
}

void reactor_del_fd(struct reactor *r, int fd)
{
	if (fd < 0 || fd >= r->nfds || !r->fds[fd])
		return;
	struct reactor_fd *e = r->fds[fd];
	epoll_ctl(r->epfd, EPOLL_CTL_DEL, fd, NULL);
	r->fds[fd] = NULL;
	/* Events for it may still sit in this iteration's batch. */
	e->dead = true;
	e->next_dead = r->dead;
	r->dead = e;
}

static int push_call(struct reactor_call **arr, size_t *n, size_t *cap, reactor_fn fn, void *arg)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct reactor_call *na = realloc(*arr, nc * sizeof(*na));
		if (!na)
			return -ENOMEM;
		*arr = na;
		*cap = nc;
	}
	(*arr)[(*n)++] = (struct reactor_call){ fn, arg };
	return 0;
}

int reactor_defer(struct reactor *r, reactor_fn fn, void *arg)
{
	return push_call(&r->defer, &r->ndefer, &r->defer_cap, fn, arg);
}

int reactor_send(struct reactor *r, reactor_fn fn, void *arg)
{
	pthread_mutex_lock(&r->msg_lock);
	/*
	 * Only the first message of a batch wakes the reactor: drain_msgs runs
	 * until it finds the queue empty under the lock, so a message pushed
	 * while others wait is taken in the same pass.  Saves a write(2) per
	 * message when they come in bursts (backstore completions from librbd).
	 */
	bool wake = r->nmsgs == 0;
	int rc = push_call(&r->msgs, &r->nmsgs, &r->msgs_cap, fn, arg);
	pthread_mutex_unlock(&r->msg_lock);
	if (rc || !wake)
		return rc;
	uint64_t one = 1;
	if (write(r->evfd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return -errno;
	return 0;
}

struct reactor_timer *reactor_timer_add(struct reactor *r, uint64_t delay_ms, reactor_fn fn, void *arg)
{
	struct reactor_timer *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->deadline = reactor_now_ns() + delay_ms * 1000000ull;
	t->fn = fn;
	t->arg = arg;
	struct reactor_timer **pp = &r->timers;
	while (*pp && (*pp)->deadline <= t->deadline)
		pp = &(*pp)->next;
	t->next = *pp;
	*pp = t;
	return t;
}

void reactor_timer_cancel(struct reactor *r, struct reactor_timer *t)
{
	for (struct reactor_timer **pp = &r->timers; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			free(t);
			return;
		}
	}
}

void reactor_stop(struct reactor *r)
{
	r->stopping = true;
	uint64_t one = 1;
	if (write(r->evfd, &one, sizeof(one)) < 0) {
		/* The flag alone stops the loop at its next wake-up. */
	}
}

static bool run_deferred(struct reactor *r)
{
	if (!r->ndefer)
		return false;
	/* Swap arrays so calls may defer more work for the next round. */
	struct reactor_call *run = r->defer;
	size_t n = r->ndefer, cap = r->defer_cap;
	r->defer = r->defer_run;
	r->defer_cap = r->defer_run_cap;
	r->ndefer = 0;
	r->defer_run = run;
	r->defer_run_cap = cap;
	for (size_t i = 0; i < n; i++)
		run[i].fn(run[i].arg);
	return true;
}

static bool run_timers(struct reactor *r, uint64_t now)
{
	bool any = false;
	while (r->timers && r->timers->deadline <= now) {
		struct reactor_timer *t = r->timers;
		r->timers = t->next;
		reactor_fn fn = t->fn;
		void *arg = t->arg;
		free(t);
		fn(arg);
		any = true;
	}
	return any;
}

struct reactor_poller *reactor_poller_add(struct reactor *r, int (*poll)(void *arg), int (*arm)(void *arg),
					  void *arg)
{
	struct reactor_poller *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	*p = (struct reactor_poller){ .poll = poll, .arm = arm, .arg = arg, .next = r->pollers };
	r->pollers = p;
	return p;
}

/* Safe from inside a poller: the node goes at the end of the iteration. */
void reactor_poller_del(struct reactor *r, struct reactor_poller *p)
{
	if (p) {
		p->dead = true;
		r->pollers_dead = true;
	}
}

enum reactor_poll_mode reactor_mode(const struct reactor *r) { return r->mode; }
void reactor_set_spin_us(struct reactor *r, unsigned us) { r->spin_ns = us * 1000ull; }

static int run_pollers(struct reactor *r, bool arm)
{
	int n = 0;
	for (struct reactor_poller *p = r->pollers; p; p = p->next)
		if (!p->dead)
			n += arm ? p->arm(p->arg) : p->poll(p->arg);
	return n;
}

static void reap_pollers(struct reactor *r)
{
	struct reactor_poller **pp = &r->pollers;
	while (*pp) {
		struct reactor_poller *p = *pp;
		if (p->dead) {
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
	r->pollers_dead = false;
}

/* One iteration of the loop; returns how much work it found. */
static int iterate(struct reactor *r, int max_timeout, uint64_t *last_work)
{
	struct epoll_event evs[REACTOR_MAX_EVENTS];
	bool work = run_deferred(r);
	bool polling = r->mode != REACTOR_EVENT && r->pollers;
	if (polling)
		work |= run_pollers(r, false) > 0;
	work |= reap_rings(r) > 0;
	int timeout = max_timeout;
	uint64_t now = reactor_now_ns();
	if (r->ndefer || r->mode == REACTOR_BUSY_POLL ||
	    (r->mode == REACTOR_ADAPTIVE && (work || now - *last_work < r->spin_ns)))
		timeout = 0;
	else if (r->timers) {
		uint64_t d = r->timers->deadline > now ? r->timers->deadline - now : 0;
		int t = (int)((d + 999999) / 1000000);
		if (timeout < 0 || t < timeout)
			timeout = t;
	}
	/* Going to sleep: pollers turn their notifications back on first. */
	if (timeout != 0 && polling && run_pollers(r, true) > 0) {
		work = true;
		timeout = 0;
	}
	int n;
	r->epoll_ready = false;
	if (timeout != 0 && (r->ring.inflight || r->big.inflight) && ring_sleep(r, timeout)) {
		work |= reap_rings(r) > 0;
		n = r->epoll_ready ? epoll_wait(r->epfd, evs, REACTOR_MAX_EVENTS, 0) : 0;
	} else {
		ring_submit(&r->ring);
		ring_submit(&r->big);
		/* Requests out but no poll armed (a ring full): epoll cannot see their completion, so no sleep. */
		if (r->ring.inflight || r->big.inflight)
			timeout = 0;
		n = epoll_wait(r->epfd, evs, REACTOR_MAX_EVENTS, timeout);
	}
	if (n < 0) {
		if (errno == EINTR)
			return 0;
		log_err("reactor %d: epoll_wait: %s", r->index, strerror(errno));
		return -errno;
	}
	for (int i = 0; i < n; i++) {
		struct reactor_fd *e = evs[i].data.ptr;
		if (!e->dead)
			e->cb(e->arg, evs[i].events);
	}
	work |= n > 0;
	if (r->timers)
		work |= run_timers(r, reactor_now_ns());
	if (r->pollers_dead)
		reap_pollers(r);
	while (r->dead) {
		struct reactor_fd *d = r->dead;
		r->dead = d->next_dead;
		free(d);
	}
	if (work)
		*last_work = reactor_now_ns();
	return n + (work && !n);
}

int reactor_fd(const struct reactor *r)
{
	return r->epfd;
}

int reactor_poll_once(struct reactor *r, int timeout_ms)
{
	struct reactor *prev = tls_reactor;
	uint64_t last = 0;
	tls_reactor = r;
	int rc = iterate(r, timeout_ms, &last);
	/* Work deferred by this iteration runs now: the caller may not poll again soon. */
	run_deferred(r);
	tls_reactor = prev;
	return rc;
}

void reactor_run(struct reactor *r)
{
	uint64_t last_work = reactor_now_ns();
	tls_reactor = r;
	while (!r->stopping)
		if (iterate(r, -1, &last_work) < 0)
			break;
	/* Leave nothing half-done: run what is already queued. */
	run_deferred(r);
	r->stopping = false;
	tls_reactor = NULL;
}
