/*
 * The synchronous wrappers: each starts the asynchronous call with one
 * waiter (struct isc_waiter) as its callback's argument and runs the
 * session's loop until the callback has filled it in.
 */
#include <errno.h>
#include <stdbool.h>

#include "common/reactor.h"
#include "common/util.h"
#include "isc_internal.h"

/* Run the loop until *done (sync wrappers). */
static int isc_wait(struct isc_session *s, const bool *done)
{
	bool was = s->in_service;
	s->in_service = true;
	int rc = 0;
	while (!*done) {
		rc = reactor_poll_once(s->r, 1000);
		if (rc < 0 && rc != -EINTR)
			break;
		rc = 0;
	}
	s->in_service = was;
	return rc;
}

void isc_waiter_done(struct isc_session *s, int err, void *arg)
{
	struct isc_waiter *w = arg;
	(void)s;
	w->done = true;
	w->err = err;
}

static void isc_waiter_tmf(struct isc_session *s, int err, int response, void *arg)
{
	struct isc_waiter *w = arg;
	(void)s;
	w->done = true;
	w->err = err;
	w->response = response;
}

static void isc_waiter_task(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct isc_waiter *w = arg;
	(void)s;
	w->res = *r;
	w->err = r->err;
	w->done = true;
}

int isc_waiter_wait(struct isc_session *s, struct isc_waiter *w, int rc)
{
	if (rc)
		return rc;
	rc = isc_wait(s, &w->done);
	return rc ? rc : w->err;
}

int isc_connect_sync(struct isc_session *s, const char *host, uint16_t port, const char *target)
{
	struct isc_waiter w = { 0 };
	return isc_waiter_wait(s, &w, isc_connect_async(s, host, port, target, isc_waiter_done, &w));
}

/* The name before 1.2 (initiator.h): programs built against 1.0 and 1.1 call it. */
int isc_connect(struct isc_session *s, const char *host, uint16_t port, const char *target)
	__attribute__((alias("isc_connect_sync")));

int isc_logout_sync(struct isc_session *s)
{
	struct isc_waiter w = { 0 };
	int rc = isc_logout_async(s, isc_waiter_done, &w);
	if (rc)
		return rc;
	rc = isc_waiter_wait(s, &w, 0);
	/* Wait for the connection to close as well, so a new connect may follow. */
	for (int i = 0; i < 100 && s->xc; i++)
		reactor_poll_once(s->r, 10);
	return rc;
}

/* The name before 1.2 (initiator.h): programs built against 1.0 and 1.1 call it. */
int isc_logout(struct isc_session *s) __attribute__((alias("isc_logout_sync")));

int isc_nop_sync(struct isc_session *s)
{
	struct isc_waiter w = { 0 };
	return isc_waiter_wait(s, &w, isc_nop_async(s, isc_waiter_done, &w));
}

/* r is the task's own result (deliver() passes &t->res): what Data-In came is beside it. */
static void waiter_task_got(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct isc_waiter *w = arg;
	w->data_in = container_of(r, const struct isc_task, res)->data_in;
	isc_waiter_task(s, r, arg);
}

static int submit_wait(struct isc_session *s, const struct isc_cmd *cmd, struct isc_result *r, isc_task_cb cb,
		       struct isc_waiter *w)
{
	if (!isc_submit(s, cmd, cb, w))
		return -errno;
	int rc = isc_wait(s, &w->done);
	if (r)
		*r = w->res;
	if (rc)
		return rc;
	if (w->res.err == -EIO) {
		char why[256];
		isc_result_str(&w->res, why, sizeof(why));
		isc_seterr(s, "%s", why);
	}
	return w->res.err;
}

int isc_submit_sync(struct isc_session *s, const struct isc_cmd *cmd, struct isc_result *r)
{
	struct isc_waiter w = { 0 };
	return submit_wait(s, cmd, r, isc_waiter_task, &w);
}

int isc_submit_sync_got(struct isc_session *s, const struct isc_cmd *cmd, struct isc_result *r, uint32_t *got)
{
	struct isc_waiter w = { 0 };
	int rc = submit_wait(s, cmd, r, waiter_task_got, &w);
	/*
	 * What the target says it left out (a residual beyond the buffer means
	 * nothing came); over TCP, no more than the Data-In that arrived.  Over
	 * iSER the data came by RDMA WRITE, which only the residual describes.
	 */
	uint32_t n = cmd->len;
	if (w.res.underflow)
		n = w.res.residual < n ? n - w.res.residual : 0;
	if (!s->o.iser)
		n = MIN(n, w.data_in);
	*got = rc ? 0 : n;
	return rc;
}

/* The TMF response, or a negative errno (-EALREADY: the task had completed). */
static int tmf_wait(struct isc_session *s, int rc, struct isc_waiter *w)
{
	if (rc == -EALREADY)
		return ISC_TMF_COMPLETE;
	rc = isc_waiter_wait(s, w, rc);
	return rc ? rc : w->response;
}

int isc_abort_task_sync(struct isc_session *s, struct isc_task *t)
{
	struct isc_waiter w = { 0 };
	return tmf_wait(s, isc_abort_task_async(s, t, isc_waiter_tmf, &w), &w);
}

int isc_lu_reset_sync(struct isc_session *s, uint64_t lun)
{
	struct isc_waiter w = { 0 };
	return tmf_wait(s, isc_lu_reset_async(s, lun, isc_waiter_tmf, &w), &w);
}
