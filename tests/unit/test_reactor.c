/*
 * Unit tests for common/reactor.c pollers: who polls and who arms in each
 * poll mode, with a fake completion queue (an eventfd stands for the
 * notification channel, a counter for pending completions); the private
 * reactor; the big ring.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/reactor.h"

#include "unit_run.h"

struct fake_cq {
	int pending;            /* completions waiting to be polled */
	int polled, polls, arms, events;
	bool armed;
	int efd;
};

static int fake_poll(void *arg)
{
	struct fake_cq *q = arg;
	int n = q->pending;
	q->polls++;
	q->polled += n;
	q->pending = 0;
	return n;
}

static int fake_arm(void *arg)
{
	struct fake_cq *q = arg;
	q->arms++;
	q->armed = true;
	return fake_poll(q);
}

static void fake_event(void *arg, uint32_t ev)
{
	struct fake_cq *q = arg;
	uint64_t v;
	(void)ev;
	if (read(q->efd, &v, sizeof(v)) == sizeof(v))
		q->events++;
	q->armed = false;
	fake_poll(q);
}

/* A completion arrives: it notifies only if the queue was armed. */
static void complete_one(struct fake_cq *q)
{
	uint64_t one = 1;
	q->pending++;
	if (q->armed && write(q->efd, &one, sizeof(one)) != sizeof(one))
		CU_FAIL("eventfd write");
}

static struct reactor *setup(enum reactor_poll_mode mode, struct fake_cq *q, struct reactor_poller **p)
{
	struct reactor *r = reactor_create(0, mode);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	*q = (struct fake_cq){ .efd = eventfd(0, EFD_NONBLOCK) };
	CU_ASSERT_EQUAL(reactor_add_fd(r, q->efd, EPOLLIN, fake_event, q), 0);
	*p = reactor_poller_add(r, fake_poll, fake_arm, q);
	CU_ASSERT_PTR_NOT_NULL_FATAL(*p);
	return r;
}

static void teardown(struct reactor *r, struct fake_cq *q, struct reactor_poller *p)
{
	reactor_poller_del(r, p);
	reactor_del_fd(r, q->efd);
	reactor_poll_once(r, 0);
	close(q->efd);
	reactor_destroy(r);
}

static void test_event_mode(void)
{
	struct fake_cq q;
	struct reactor_poller *p;
	struct reactor *r = setup(REACTOR_EVENT, &q, &p);
	q.armed = true;
	complete_one(&q);
	CU_ASSERT(reactor_poll_once(r, 100) > 0);
	/* Only the notification delivered it: the poller never ran. */
	CU_ASSERT_EQUAL(q.events, 1);
	CU_ASSERT_EQUAL(q.polled, 1);
	CU_ASSERT_EQUAL(q.arms, 0);
	teardown(r, &q, p);
}

static void test_busy_mode(void)
{
	struct fake_cq q;
	struct reactor_poller *p;
	struct reactor *r = setup(REACTOR_BUSY_POLL, &q, &p);
	for (int i = 0; i < 5; i++) {
		complete_one(&q);
		reactor_poll_once(r, -1);   /* must not sleep: it spins */
	}
	CU_ASSERT_EQUAL(q.polled, 5);
	CU_ASSERT(q.polls >= 5);
	CU_ASSERT_EQUAL(q.arms, 0);
	CU_ASSERT_EQUAL(q.events, 0);
	teardown(r, &q, p);
}

static void test_adaptive_mode(void)
{
	struct fake_cq q;
	struct reactor_poller *p;
	struct reactor *r = setup(REACTOR_ADAPTIVE, &q, &p);
	/* Idle: about to sleep, the poller is armed; then an event wakes the loop. */
	reactor_poll_once(r, 10);
	CU_ASSERT_EQUAL(q.arms, 1);
	CU_ASSERT_TRUE(q.armed);
	complete_one(&q);
	reactor_poll_once(r, 100);
	CU_ASSERT_EQUAL(q.polled, 1);
	/* Work found by the arm itself (a completion that raced it) prevents the sleep. */
	q.armed = false;
	q.pending = 3;
	reactor_poll_once(r, 1000);
	CU_ASSERT_EQUAL(q.polled, 4);
	/* A deleted poller is not called again. */
	int polls = q.polls;
	reactor_poller_del(r, p);
	reactor_poll_once(r, 0);
	reactor_poll_once(r, 0);
	CU_ASSERT_EQUAL(q.polls, polls);
	reactor_del_fd(r, q.efd);
	reactor_poll_once(r, 0);
	close(q.efd);
	reactor_destroy(r);
}

static void deferred(void *arg)
{
	(*(int *)arg)++;
}

/* What a running adaptive reactor did between two messages (read on its own thread). */
struct window_probe {
	struct fake_cq *q;
	int arms, polls;
};

static void probe(void *arg)
{
	struct window_probe *p = arg;
	p->arms = p->q->arms;
	p->polls = p->q->polls;
}

static void *run_reactor(void *arg)
{
	reactor_run(arg);
	return NULL;
}

/*
 * adaptive_spin_us: after a piece of work a running adaptive reactor polls
 * on for the window before it arms its pollers and sleeps; with a window
 * of 0 it arms at once.
 */
static void adaptive_window(unsigned spin_us, bool expect_spin)
{
	struct fake_cq q;
	struct reactor_poller *p;
	struct reactor *r = setup(REACTOR_ADAPTIVE, &q, &p);
	reactor_set_spin_us(r, spin_us);
	pthread_t t;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, run_reactor, r), 0);
	struct window_probe a = { .q = &q, .arms = -1 }, b = { .q = &q, .arms = -1 };
	usleep(20000);
	CU_ASSERT_EQUAL(reactor_send(r, probe, &a), 0);   /* the work the window counts from */
	usleep(50000);
	CU_ASSERT_EQUAL(reactor_send(r, probe, &b), 0);
	usleep(20000);
	reactor_stop(r);
	pthread_join(t, NULL);
	CU_ASSERT(a.arms >= 0 && b.arms >= 0);
	if (expect_spin) {
		CU_ASSERT_EQUAL(b.arms, a.arms);   /* still polling 50 ms later: never armed */
		CU_ASSERT(b.polls > a.polls + 10);
	} else {
		CU_ASSERT(b.arms > a.arms);        /* armed and slept right after the message */
		CU_ASSERT(b.polls < a.polls + 10);
	}
	teardown(r, &q, p);
}

static void test_adaptive_window(void)
{
	adaptive_window(10 * 1000 * 1000, true);
	adaptive_window(0, false);
}

/* The initiator's reactor: no io_uring ring, never handed out by reactor_next(). */
static void test_private(void)
{
	struct reactor *pub = reactor_create(0, REACTOR_EVENT);
	struct reactor *priv = reactor_create_private();
	CU_ASSERT_PTR_NOT_NULL_FATAL(pub);
	CU_ASSERT_PTR_NOT_NULL_FATAL(priv);
	CU_ASSERT_PTR_NULL(reactor_ring(priv));
	CU_ASSERT_EQUAL(reactor_index(priv), -1);
	for (int i = 0; i < 8; i++)
		CU_ASSERT_PTR_EQUAL(reactor_next(), pub);
	/* It still runs deferred calls and messages. */
	int n = 0;
	reactor_defer(priv, deferred, &n);
	CU_ASSERT_EQUAL(reactor_send(priv, deferred, &n), 0);
	for (int i = 0; i < 5 && n < 2; i++)
		reactor_poll_once(priv, 100);
	CU_ASSERT_EQUAL(n, 2);
	reactor_destroy(priv);
	CU_ASSERT_PTR_EQUAL(reactor_next(), pub);
	reactor_destroy(pub);
	/* Destroying a private reactor left the registry alone: empty now. */
	CU_ASSERT_PTR_NULL(reactor_next());
}

struct big_op {
	struct reactor_uring_op op;
	int done, res;
};

static void big_cb(struct reactor_uring_op *op, int res)
{
	struct big_op *b = (struct big_op *)op;
	b->done++;
	b->res = res;
}

/*
 * The big ring (NVMe passthrough's): made on first use with 128-byte SQEs,
 * its completions reaped by the loop like the main ring's, submitted by the
 * loop too; none on a private reactor.
 */
static void test_big_ring(void)
{
	struct reactor *priv = reactor_create_private();
	CU_ASSERT_PTR_NOT_NULL_FATAL(priv);
	CU_ASSERT_PTR_NULL(reactor_uring_sqe_cmd(priv));
	reactor_destroy(priv);

	struct reactor *r = reactor_create(0, REACTOR_EVENT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	if (!reactor_ring(r)) {
		reactor_destroy(r);
		return;   /* no io_uring here: nothing to test */
	}
	struct big_op a = { .op.cb = big_cb }, b = { .op.cb = big_cb };
	struct io_uring_sqe *s1 = reactor_uring_sqe_cmd(r);
	struct io_uring_sqe *s2 = reactor_uring_sqe_cmd(r);
	if (!s1) {
		reactor_destroy(r);   /* kernel without SQE128 (before 5.19): said in the log */
		return;
	}
	CU_ASSERT_PTR_NOT_NULL_FATAL(s2);
	CU_ASSERT_EQUAL((char *)s2 - (char *)s1, 128);
	io_uring_prep_nop(s1);
	io_uring_sqe_set_data(s1, &a.op);
	io_uring_prep_nop(s2);
	io_uring_sqe_set_data(s2, &b.op);
	for (int i = 0; i < 20 && (a.done < 1 || b.done < 1); i++)
		reactor_poll_once(r, 100);
	CU_ASSERT_EQUAL(a.done, 1);
	CU_ASSERT_EQUAL(b.done, 1);
	CU_ASSERT_EQUAL(a.res, 0);
	reactor_destroy(r);
}

/*
 * A request that completes after ms milliseconds (an io_uring timeout), on
 * the main or the big ring; false if there is no such ring here.
 */
static bool sleep_op(struct reactor *r, bool big, struct big_op *b, struct __kernel_timespec *ts, long ms)
{
	*b = (struct big_op){ .op.cb = big_cb };
	*ts = (struct __kernel_timespec){ .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000l };
	struct io_uring_sqe *sqe = big ? reactor_uring_sqe_cmd(r) : reactor_uring_sqe(r);
	if (!sqe)
		return false;
	io_uring_prep_timeout(sqe, ts, 0, 0);
	io_uring_sqe_set_data(sqe, &b->op);
	return true;
}

static int sent;

static void *send_later(void *arg)
{
	usleep(20000);
	reactor_send(arg, deferred, &sent);
	return NULL;
}

/*
 * With a request out the reactor sleeps in its ring, not in epoll_wait:
 * the completion wakes it, and so do a ready fd, a message from another
 * thread, the other ring's completion and the timeout it was given, each
 * before the long request completes.
 */
static void test_ring_sleep(void)
{
	struct reactor *r = reactor_create(0, REACTOR_EVENT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	if (!reactor_ring(r)) {
		reactor_destroy(r);
		return;
	}
	struct big_op quick, slow, other;
	struct __kernel_timespec tq, ts, to;

	CU_ASSERT_TRUE_FATAL(sleep_op(r, false, &quick, &tq, 10));
	for (int i = 0; i < 5 && !quick.done; i++)
		reactor_poll_once(r, -1);   /* would hang if the completion did not wake it */
	CU_ASSERT_EQUAL(quick.done, 1);
	CU_ASSERT_EQUAL(quick.res, -ETIME);

	CU_ASSERT_TRUE_FATAL(sleep_op(r, false, &slow, &ts, 60000));
	/* An fd already readable when the reactor goes to sleep. */
	struct fake_cq q = { .efd = eventfd(0, EFD_NONBLOCK) };
	CU_ASSERT_EQUAL(reactor_add_fd(r, q.efd, EPOLLIN, fake_event, &q), 0);
	q.armed = true;
	complete_one(&q);
	for (int i = 0; i < 5 && !q.events; i++)
		reactor_poll_once(r, -1);
	CU_ASSERT_EQUAL(q.events, 1);
	/* A message from another thread while it sleeps. */
	pthread_t t;
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, send_later, r), 0);
	for (int i = 0; i < 5 && !sent; i++)
		reactor_poll_once(r, -1);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(sent, 1);
	/* The big ring's completion, while the main ring's request is out (none before Linux 5.19). */
	if (sleep_op(r, true, &other, &to, 20)) {
		for (int i = 0; i < 5 && !other.done; i++)
			reactor_poll_once(r, -1);
		CU_ASSERT_EQUAL(other.done, 1);
		CU_ASSERT_EQUAL(other.res, -ETIME);
	}
	/* The timeout it was given. */
	CU_ASSERT_EQUAL(reactor_poll_once(r, 30), 0);
	CU_ASSERT_EQUAL(slow.done, 0);
	reactor_del_fd(r, q.efd);
	close(q.efd);
	reactor_destroy(r);   /* the slow request is cancelled with the ring */
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("reactor", NULL, NULL);
	CU_add_test(s, "event mode: notifications only", test_event_mode);
	CU_add_test(s, "busy mode: polled, never armed", test_busy_mode);
	CU_add_test(s, "adaptive mode: polled, armed before sleeping", test_adaptive_mode);
	CU_add_test(s, "adaptive mode: polls on for its window after work, then sleeps", test_adaptive_window);
	CU_add_test(s, "private reactor: no ring, not in the registry", test_private);
	CU_add_test(s, "big ring: SQE128, made on first use, reaped by the loop", test_big_ring);
	CU_add_test(s, "ring sleep: woken by its completion, fds, messages, the big ring, the timeout", test_ring_sleep);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
