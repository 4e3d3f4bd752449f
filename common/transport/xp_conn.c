/*
 * The connection lifecycle every transport shares: deferred calls that
 * outlive destroy(), PDUs sent after the close, the one closed() upcall
 * and the connect time limit.  tcp.c and rdma.c keep only what is their
 * own (sockets and staging; CM ids, QPs and flushes).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>

#include "common/reactor.h"
#include "common/transport/transport.h"

bool xp_close_begin(struct xp_conn *xc)
{
	if (xp_closing(xc))
		return false;
	xc->state = XP_CLOSING;
	xp_connect_timer_stop(xc);
	return true;
}

int xp_defer(struct xp_conn *xc, void (*fn)(void *arg))
{
	int rc = reactor_defer(xc->reactor, fn, xc);
	if (!rc)
		xc->calls++;
	return rc;
}

bool xp_deferred_gone(struct xp_conn *xc)
{
	xc->calls--;
	if (!xc->destroy_pending)
		return false;
	if (!xc->calls)
		xc->free(xc);
	return true;
}

void xp_closed_now(struct xp_conn *xc)
{
	if (xc->state == XP_CLOSED)
		return;
	xc->state = XP_CLOSED;
	if (xc->up && xc->up->closed)
		xc->up->closed(xc, xc->err);
}

static void closed_deferred(void *arg)
{
	struct xp_conn *xc = arg;
	/* Destroyed before this ran: its owner wants no upcall. */
	if (!xp_deferred_gone(xc))
		xp_closed_now(xc);
}

void xp_closed_later(struct xp_conn *xc)
{
	if (!xc->reactor || xp_defer(xc, closed_deferred))
		xp_closed_now(xc);
}

static void fail_dead(void *arg)
{
	struct xp_conn *xc = arg;
	if (xp_deferred_gone(xc))
		return;
	xc->fail_scheduled = false;
	xp_fail_pdus(&xc->dead, -ECONNRESET);
}

void xp_send_dead(struct xp_conn *xc, struct xp_pdu *p)
{
	p->next = xc->dead;
	xc->dead = p;
	if (!xc->fail_scheduled && xc->reactor && !xp_defer(xc, fail_dead))
		xc->fail_scheduled = true;
}

void xp_release(struct xp_conn *xc)
{
	/* The contract: every PDU given to send() hears back, even now. */
	xp_fail_pdus(&xc->dead, -ECONNRESET);
	if (xc->calls) {
		xc->destroy_pending = true;
		return;
	}
	xc->free(xc);
}

static void connect_timeout(void *arg)
{
	struct xp_conn *xc = arg;
	char why[64];
	xc->connect_timer = NULL;
	snprintf(why, sizeof(why), "no answer within %u ms", xc->connect_ms);
	xc->connect_failed(xc, -ETIMEDOUT, why);
}

int xp_connect_timer_start(struct xp_conn *xc, unsigned ms)
{
	xc->connect_ms = ms;
	xc->connect_timer = reactor_timer_add(xc->reactor, ms, connect_timeout, xc);
	return xc->connect_timer ? 0 : -ENOMEM;
}

void xp_connect_timer_stop(struct xp_conn *xc)
{
	if (xc->connect_timer)
		reactor_timer_cancel(xc->reactor, xc->connect_timer);
	xc->connect_timer = NULL;
}

static atomic_bool stop_waiting;

void xp_stop_waiting(void)
{
	atomic_store(&stop_waiting, true);
}

bool xp_stopping(void)
{
	return atomic_load(&stop_waiting);
}
