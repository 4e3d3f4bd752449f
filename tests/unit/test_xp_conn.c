/*
 * The connection lifecycle transports share (common/transport/xp_conn.c), on a real
 * reactor with a connection of no transport: a deferred call outlives
 * destroy() and frees it, a PDU sent after the close hears back from a
 * deferred call and never inside send(), closed() comes once, and the
 * connect time limit fails the connection with its words.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <string.h>

#include "common/reactor.h"
#include "common/transport/transport.h"

#include "unit_run.h"

static int freed, closed_calls, closed_err, done_calls, done_err, failed_err, ran;
static bool in_send;
static char failed_why[64];

static void on_free(struct xp_conn *xc)
{
	(void)xc;
	freed++;
}

static void on_closed(struct xp_conn *xc, int err)
{
	(void)xc;
	closed_calls++;
	closed_err = err;
}

static const struct xp_upcalls up = { .closed = on_closed };

static void on_done(struct xp_pdu *p, int err)
{
	(void)p;
	CU_ASSERT_FALSE(in_send);
	done_calls++;
	done_err = err;
}

static void on_connect_failed(struct xp_conn *xc, int err, const char *why)
{
	(void)xc;
	failed_err = err;
	snprintf(failed_why, sizeof(failed_why), "%s", why);
}

static void call(void *arg)
{
	if (!xp_deferred_gone(arg))
		ran++;
}

static struct xp_conn conn(struct reactor *r)
{
	freed = closed_calls = closed_err = done_calls = done_err = failed_err = ran = 0;
	return (struct xp_conn){ .reactor = r, .up = &up, .free = on_free, .state = XP_UP };
}

static void drain(struct reactor *r)
{
	for (int i = 0; i < 5; i++)
		reactor_poll_once(r, 0);
}

static void test_defer_outlives_destroy(void)
{
	struct reactor *r = reactor_create(0, REACTOR_EVENT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	struct xp_conn c = conn(r);
	CU_ASSERT_EQUAL(xp_defer(&c, call), 0);
	CU_ASSERT_EQUAL(xp_defer(&c, call), 0);
	xp_release(&c);
	CU_ASSERT_EQUAL(freed, 0);          /* two calls still queued with it */
	CU_ASSERT_TRUE(c.destroy_pending);
	drain(r);
	CU_ASSERT_EQUAL(ran, 0);            /* they saw it gone */
	CU_ASSERT_EQUAL(freed, 1);          /* and the last one freed it, once */
	c = conn(r);
	xp_release(&c);                     /* nothing queued: freed at once */
	CU_ASSERT_EQUAL(freed, 1);
	reactor_destroy(r);
}

static void test_dead_and_closed(void)
{
	struct reactor *r = reactor_create(0, REACTOR_EVENT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	struct xp_conn c = conn(r);
	struct xp_pdu p1 = { .done = on_done }, p2 = { .done = on_done };
	CU_ASSERT_TRUE(xp_close_begin(&c));
	CU_ASSERT_EQUAL(c.state, XP_CLOSING);
	CU_ASSERT_FALSE(xp_close_begin(&c));   /* a second close() does nothing */
	c.err = -EPIPE;
	in_send = true;
	xp_send_dead(&c, &p1);
	xp_send_dead(&c, &p2);
	in_send = false;
	CU_ASSERT_EQUAL(done_calls, 0);
	xp_closed_later(&c);
	xp_closed_later(&c);
	CU_ASSERT_EQUAL(closed_calls, 0);   /* from a fresh stack, not inside the caller */
	drain(r);
	CU_ASSERT_EQUAL(done_calls, 2);
	CU_ASSERT_EQUAL(done_err, -ECONNRESET);
	CU_ASSERT_EQUAL(closed_calls, 1);   /* once */
	CU_ASSERT_EQUAL(closed_err, -EPIPE);
	CU_ASSERT_EQUAL(c.state, XP_CLOSED);
	/* Destroyed with a PDU still dead and its fail call queued: it hears back, and the call frees. */
	c = conn(r);
	c.state = XP_CLOSING;
	xp_send_dead(&c, &p1);
	xp_release(&c);
	CU_ASSERT_EQUAL(done_calls, 1);
	CU_ASSERT_EQUAL(freed, 0);
	drain(r);
	CU_ASSERT_EQUAL(freed, 1);
	reactor_destroy(r);
}

static void test_connect_timer(void)
{
	struct reactor *r = reactor_create(0, REACTOR_EVENT);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r);
	struct xp_conn c = conn(r);
	c.state = XP_CONNECTING;
	c.connect_failed = on_connect_failed;
	CU_ASSERT_EQUAL_FATAL(xp_connect_timer_start(&c, 20), 0);
	for (int i = 0; i < 50 && !failed_err; i++)
		reactor_poll_once(r, 10);
	CU_ASSERT_EQUAL(failed_err, -ETIMEDOUT);
	CU_ASSERT_STRING_EQUAL(failed_why, "no answer within 20 ms");
	CU_ASSERT_PTR_NULL(c.connect_timer);
	/* Stopped in time: it never fires. */
	c = conn(r);
	c.connect_failed = on_connect_failed;
	CU_ASSERT_EQUAL_FATAL(xp_connect_timer_start(&c, 20), 0);
	xp_connect_timer_stop(&c);
	for (int i = 0; i < 5; i++)
		reactor_poll_once(r, 10);
	CU_ASSERT_EQUAL(failed_err, 0);
	reactor_destroy(r);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("xp_conn", NULL, NULL);
	CU_add_test(s, "deferred calls outlive destroy", test_defer_outlives_destroy);
	CU_add_test(s, "PDUs after the close, closed once", test_dead_and_closed);
	CU_add_test(s, "connect time limit", test_connect_timer);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
