/*
 * Initiator session, the public lifecycle: options (defaults and the
 * struct_size rule), session new/free, the caller's event loop entry
 * points, the error message and what the login negotiated.  The connection
 * is conn.c, the login login.c, the synchronous wrappers sync.c.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/proto/chap.h"
#include "common/reactor.h"
#include "common/util.h"
#include "isc_internal.h"

unsigned isc_version(void)
{
	return ISC_API_VERSION;
}

void isc_options_default(struct isc_options *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->initiator_name = "iqn.2026-11.org.isert:initiator";
	o->chap_algs[0] = CHAP_SHA256;
	o->chap_algs[1] = CHAP_SHA1;
	o->chap_algs[2] = CHAP_MD5;
	o->chap_algs[3] = CHAP_SHA3_256;
	o->immediate_data = true;
	o->initial_r2t = false;
	o->max_recv_dsl = 262144;
	o->max_burst = 1048576;
	o->first_burst = 262144;
	o->nop_interval_s = 10;
	o->nop_timeout_s = 10;
	o->reconnect_timeout_s = 60;
	o->connect_timeout_s = 15;
}

void isc_seterr(struct isc_session *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
	va_end(ap);
}

const char *isc_errmsg(const struct isc_session *s)
{
	return s->errmsg[0] ? s->errmsg : "no error";
}

/* Replace the session's owned copy of option string i (s->strs[i]); returns it. */
static char *isc_dup_opt(struct isc_session *s, int i, const char *v)
{
	free(s->strs[i]);
	s->strs[i] = v ? strdup(v) : NULL;
	return s->strs[i];
}

/* The end of the last field of version 1.0 of struct isc_options. */
#define ISC_OPTIONS_V1_SIZE (offsetof(struct isc_options, iser) + sizeof(bool))

/* Copy the caller's options by the rule in initiator.h (struct_size). */
static int copy_options(struct isc_options *dst, const struct isc_options *o)
{
	isc_options_default(dst);
	if (!o)
		return 0;
	size_t n = o->struct_size;
	if (n < ISC_OPTIONS_V1_SIZE)
		return -EINVAL;
	if (n > sizeof(*dst)) {
		for (size_t i = sizeof(*dst); i < n; i++)
			if (((const unsigned char *)o)[i])
				return -EINVAL;
		n = sizeof(*dst);
	}
	memcpy(dst, o, n);
	dst->struct_size = sizeof(*dst);
	return 0;
}

struct isc_session *isc_session_new(const struct isc_options *o)
{
	isc_log_init();
	struct isc_session *s = calloc(1, sizeof(*s));
	if (!s) {
		errno = ENOMEM;
		return NULL;
	}
	if (copy_options(&s->o, o)) {
		free(s);
		errno = EINVAL;
		return NULL;
	}
	if (!s->o.initiator_name)
		s->o.initiator_name = "iqn.2026-11.org.isert:initiator";
	s->o.initiator_name = isc_dup_opt(s, 0, s->o.initiator_name);
	s->o.initiator_alias = isc_dup_opt(s, 1, s->o.initiator_alias);
	s->o.user = isc_dup_opt(s, 2, s->o.user);
	s->o.password = isc_dup_opt(s, 3, s->o.password);
	s->o.target_user = isc_dup_opt(s, 4, s->o.target_user);
	s->o.target_password = isc_dup_opt(s, 5, s->o.target_password);
	s->tfd = -1;
	/* Event mode, no io_uring ring, outside the target's reactor registry. */
	s->r = reactor_create_private();
	if (!s->r || !s->o.initiator_name)
		goto fail;
	s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (s->tfd < 0 || reactor_add_fd(s->r, s->tfd, EPOLLIN, isc_on_tick, s))
		goto fail;
	/* ISID type 0x80 (random): kept for the session's life so a re-login reinstates it. */
	chap_random(s->isid, sizeof(s->isid));
	s->isid[0] = 0x80 | (s->isid[0] & 0x3f);
	s->xops = &tcp_transport;
	return s;
fail:
	isc_session_free(s);
	errno = ENOMEM; /* out of memory or of file descriptors */
	return NULL;
}

static void drop_conn(struct isc_session *s)
{
	if (!s->xc)
		return;
	struct xp_conn *xc = s->xc;
	s->xc = NULL;
	xc->upper = NULL;
	xc->ops->destroy(xc);
}

void isc_session_free(struct isc_session *s)
{
	if (!s)
		return;
	s->state = ISC_S_FREEING;
	if (s->xc) {
		s->xc->ops->close(s->xc);
		/* Let the transport finish: its queued PDUs complete, then closed() runs. */
		/* iSER: flushed work requests come back through the CQ's event, not at once. */
		for (int i = 0; i < 100 && s->xc; i++)
			reactor_poll_once(s->r, 10);
		drop_conn(s);
	}
	isc_tasks_fail_all(s, -ECANCELED);
	if (s->r)
		while (reactor_poll_once(s->r, 0) > 0)
			;
	isc_tasks_free_all(s);
	isc_bufs_free_all(s);
	if (s->tfd >= 0) {
		if (s->r)
			reactor_del_fd(s->r, s->tfd);
		close(s->tfd);
	}
	if (s->r)
		reactor_destroy(s->r);
	isc_login_end(s);
	for (size_t i = 0; i < ARRAY_SIZE(s->strs); i++)
		free(s->strs[i]);
	free(s->slots);
	free(s->free_slots);
	free(s);
}

int isc_get_fd(const struct isc_session *s) { return reactor_fd(s->r); }
int isc_which_events(const struct isc_session *s) { (void)s; return POLLIN; }

int isc_service(struct isc_session *s, int revents)
{
	(void)revents;
	bool was = s->in_service;
	s->in_service = true;
	int rc = reactor_poll_once(s->r, 0);
	s->in_service = was;
	return rc < 0 ? rc : 0;
}

int isc_connect_url_sync(struct isc_session *s, const struct isc_url *u)
{
	s->o.iser = u->iser;
	if (u->user[0]) {
		s->o.user = isc_dup_opt(s, 2, u->user);
		s->o.password = isc_dup_opt(s, 3, u->password);
	}
	return isc_connect_sync(s, u->host, u->port, u->target[0] ? u->target : NULL);
}

/* The name before 1.2 (initiator.h): programs built against 1.0 and 1.1 call it. */
int isc_connect_url(struct isc_session *s, const struct isc_url *u) __attribute__((alias("isc_connect_url_sync")));

bool isc_logged_in(const struct isc_session *s) { return s->state == ISC_S_FFP; }
uint16_t isc_login_status(const struct isc_session *s) { return s->login_status; }

int isc_get_params(const struct isc_session *s, struct isc_params *p)
{
	memset(p, 0, sizeof(*p));
	const struct neg_params *n = &s->params;
	p->header_digest = n->header_digest;
	p->data_digest = n->data_digest;
	p->immediate_data = n->immediate_data;
	p->initial_r2t = n->initial_r2t;
	p->max_recv_dsl = n->max_recv_dsl;
	p->target_max_recv_dsl = n->peer_max_recv_dsl;
	p->max_burst = n->max_burst;
	p->first_burst = n->first_burst;
	p->max_outstanding_r2t = n->max_outstanding_r2t;
	p->erl = n->erl;
	p->time2wait = n->time2wait;
	p->time2retain = n->time2retain;
	p->tsih = s->tsih;
	p->cmd_window = s->max_cmdsn - s->exp_cmdsn + 1;
	snprintf(p->target_alias, sizeof(p->target_alias), "%s", s->target_alias);
	p->auth = !s->chap_alg ? "None" : s->mutual ? "CHAP (mutual)" : "CHAP";
	p->chap_alg = s->chap_alg;
	isc_at(s, p->portal, sizeof(p->portal));
	p->reconnects = s->reconnects;
	if (s->o.iser) {
		p->iser = true;
		p->initiator_recv_dsl = n->initiator_recv_dsl;
		p->target_recv_dsl = n->target_recv_dsl;
	}
	return s->state == ISC_S_FFP ? 0 : -ENOTCONN;
}

