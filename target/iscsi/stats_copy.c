/*
 * Each reactor's copy of the statistics it holds, for a reader
 * (target/control/stats_snap.c sums the copies): its rows, its live
 * connections, its share of every portal's counters, its buffer pool.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/netaddr.h"
#include "common/reactor.h"
#include "target/iscsi/iscsi.h"
#include "target/iscsi/stats.h"

/* What one reactor holds now (the reactors section). */
struct reactor_copy {
	bool seen;
	unsigned connections;
	uint64_t pool_bytes, pool_in_use;
};

struct portal_copy {
	struct iscsi_portal *p;
	unsigned live;                 /* connections now */
	struct stats_portal sum;       /* ended connections and logins, plus the live ones' counters */
};

struct stats_copy {
	pthread_mutex_t mu;
	struct stats_filter f;
	char target[224], initiator[224];
	bool reset;
	struct stats_row *rows;        /* room for every row all reactors may keep: never grown under the lock */
	size_t nrows, caprow;
	struct stats_conn_row *conns;
	size_t nconns, capconn;
	struct portal_copy *portals;
	size_t nportals;
	struct reactor_copy *reactors; /* indexed by reactor_index() */
	size_t nreactors, capreactor;
	int err;                       /* out of memory on a reactor */
};

void stats_copy_free(void *arg)
{
	struct stats_copy *k = arg;
	free(k->rows);
	free(k->conns);
	free(k->portals);
	free(k->reactors);
	pthread_mutex_destroy(&k->mu);
	free(k);
}

static bool grow(void **a, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap * 2 : 64;
	while (n < need)
		n *= 2;
	void *p = realloc(*a, n * size);
	if (!p)
		return false;
	*a = p;
	*cap = n;
	return true;
}

static bool lun_wanted(const struct stats_copy *k, const struct stats_lun *e)
{
	const struct stats_filter *f = &k->f;
	const uint64_t *n = e->c.n.commands;
	if (e->kind == STATS_OVERFLOW && !e->users && !n[STATS_READ] && !n[STATS_WRITE] && !n[STATS_OTHER])
		return false; /* the overflow row, never used */
	if (f->target && (!e->tpg || strcmp(e->tpg->iqn, f->target)))
		return false;
	if (f->initiator && strcmp(e->initiator, f->initiator))
		return false;
	return f->lun < 0 || (e->tpg && e->lun == (uint64_t)f->lun);
}

static void row_of(struct stats_row *r, const struct stats_lun *e)
{
	r->target = e->tpg ? e->tpg->iqn : "*";
	r->tpg = e->tpg ? e->tpg->tag : 0;
	r->kind = e->kind;
	r->lun = e->lun;
	memcpy(r->initiator, e->initiator, sizeof(r->initiator));
	memcpy(r->backstore, e->backstore, sizeof(r->backstore));
	r->in_flight = e->in_flight;
	r->c = e->c;
}

/* Under k->mu. */
static void row_visit(struct stats_lun *e, void *arg)
{
	struct stats_copy *k = arg;
	if (k->reset) {
		memset(&e->c, 0, sizeof(e->c));
		return;
	}
	if (!lun_wanted(k, e))
		return;
	if (k->nrows >= k->caprow) {
		k->err = -EOVERFLOW; /* more rows than the caps allow: cannot happen */
		return;
	}
	row_of(&k->rows[k->nrows++], e);
}

struct conn_walk {
	struct stats_copy *k;
	struct stats_conn_row *c;
	size_t n, cap;
	struct portal_copy *p;         /* this reactor's share, nportals long */
	bool oom;
};

static void conn_visit(struct iscsi_conn *c, void *arg)
{
	struct conn_walk *w = arg;
	struct stats_copy *k = w->k;
	for (size_t i = 0; i < k->nportals; i++)
		if (w->p[i].p == c->portal) {
			w->p[i].live++;
			stats_add_counters(&w->p[i].sum.closed, &c->xp->stats, sizeof(c->xp->stats));
			stats_add_counters(&w->p[i].sum.closed_conn, &c->st, sizeof(c->st));
		}
	if (k->reset) {
		memset(&c->xp->stats, 0, sizeof(c->xp->stats));
		memset(&c->st, 0, sizeof(c->st));
		return;
	}
	const struct iscsi_session *s = c->sess;
	const struct stats_filter *f = &k->f;
	if (!f->connections || c->state != CONN_FULL || !s)
		return;
	if ((f->target && (!s->tpg || strcmp(s->tpg->iqn, f->target))) ||
	    (f->initiator && strcmp(s->initiator, f->initiator)) || (f->tsih && s->tsih != f->tsih))
		return;
	if (!grow((void **)&w->c, &w->cap, w->n + 1, sizeof(*w->c))) {
		w->oom = true;
		return;
	}
	struct stats_conn_row *o = &w->c[w->n++];
	memset(o, 0, sizeof(*o));
	o->target = s->tpg ? s->tpg->iqn : "";
	o->tpg = s->tpg ? s->tpg->tag : 0;
	snprintf(o->initiator, sizeof(o->initiator), "%s", s->initiator);
	snprintf(o->portal, sizeof(o->portal), "%s", c->portal ? c->portal->name : "");
	snprintf(o->peer, sizeof(o->peer), "%s", c->xp->peer);
	o->transport = c->xp->ops->name;
	o->tsih = s->tsih;
	o->cid = c->cid;
	o->reactor = reactor_index(c->r);
	o->rdma = c->xp->ops->rdma;
	o->xp = c->xp->stats;
	o->st = c->st;
}

/* On each reactor: copy (or, for stats.reset, zero) what it holds. */
void stats_copy_on_reactor(void *arg)
{
	struct stats_copy *k = arg;
	int idx = reactor_index(reactor_self());
	struct conn_walk w = { .k = k };
	w.p = calloc(k->nportals ? k->nportals : 1, sizeof(*w.p));
	if (!w.p) {
		pthread_mutex_lock(&k->mu);
		k->err = -ENOMEM;
		pthread_mutex_unlock(&k->mu);
		return;
	}
	for (size_t i = 0; i < k->nportals; i++) {
		struct stats_portal *ps = &k->portals[i].p->st[idx];
		w.p[i].p = k->portals[i].p;
		if (k->reset)
			memset(ps, 0, sizeof(*ps));
		else
			w.p[i].sum = *ps;
	}
	conn_foreach(conn_visit, &w);
	pthread_mutex_lock(&k->mu);
	unsigned live = 0;
	for (size_t i = 0; i < k->nportals; i++) {
		struct portal_copy *d = &k->portals[i], *s = &w.p[i];
		d->live += s->live;
		live += s->live;
		stats_add_counters(&d->sum, &s->sum, sizeof(s->sum));
	}
	if (k->f.reactors && idx >= 0) {
		size_t old = k->capreactor;
		if (grow((void **)&k->reactors, &k->capreactor, (size_t)idx + 1, sizeof(*k->reactors))) {
			memset(k->reactors + old, 0, (k->capreactor - old) * sizeof(*k->reactors));
			struct bufpool *bp = reactor_bufpool(reactor_self());
			struct reactor_copy *rc = &k->reactors[idx];
			rc->seen = true;
			rc->connections = live;
			rc->pool_bytes = bp ? bufpool_bytes(bp) : 0;
			rc->pool_in_use = bp ? bufpool_in_use(bp) : 0;
			if ((size_t)idx + 1 > k->nreactors)
				k->nreactors = (size_t)idx + 1;
		} else {
			k->err = -ENOMEM;
		}
	}
	if (w.n && grow((void **)&k->conns, &k->capconn, k->nconns + w.n, sizeof(*k->conns))) {
		memcpy(k->conns + k->nconns, w.c, w.n * sizeof(*w.c));
		k->nconns += w.n;
	} else if (w.n || w.oom) {
		k->err = -ENOMEM;
	}
	if (k->f.luns || k->reset)
		stats_rows_foreach(row_visit, k);
	pthread_mutex_unlock(&k->mu);
	free(w.c);
	free(w.p);
}

/* A request with every portal made so far (they live as long as the process). */
struct stats_copy *stats_copy_new(const struct stats_filter *f, bool reset)
{
	struct stats_copy *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	pthread_mutex_init(&k->mu, NULL);
	k->f = *f;
	k->reset = reset;
	/* The filter's strings are the caller's: copies, since a late reactor may still read them. */
	if (f->target)
		k->f.target = strncpy(k->target, f->target, sizeof(k->target) - 1);
	if (f->initiator)
		k->f.initiator = strncpy(k->initiator, f->initiator, sizeof(k->initiator) - 1);
	if (f->luns) {
		/* malloc, not calloc: only the rows copied touch memory. */
		k->caprow = stats_rows_max();
		k->rows = malloc(k->caprow * sizeof(*k->rows));
		if (!k->rows) {
			stats_copy_free(k);
			return NULL;
		}
	}
	size_t n = 0;
	for (struct iscsi_portal *p = __atomic_load_n(&iscsi_g.portals, __ATOMIC_ACQUIRE); p; p = p->next)
		n++;
	k->portals = calloc(n ? n : 1, sizeof(*k->portals));
	if (!k->portals) {
		stats_copy_free(k);
		return NULL;
	}
	for (struct iscsi_portal *p = __atomic_load_n(&iscsi_g.portals, __ATOMIC_ACQUIRE); p && k->nportals < n;
	     p = p->next)
		if (p->st)
			k->portals[k->nportals++].p = p;
	return k;
}

int stats_copy_take(struct stats_copy *k, struct stats_snap *s)
{
	if (k->err)
		return k->err;
	s->rows = k->rows;
	s->nrows = k->nrows;
	k->rows = NULL;
	s->conns = k->conns;
	s->nconns = k->nconns;
	k->conns = NULL;
	if (k->f.portals) {
		s->portals = calloc(k->nportals ? k->nportals : 1, sizeof(*s->portals));
		if (!s->portals)
			return -ENOMEM;
		for (size_t i = 0; i < k->nportals; i++) {
			const struct portal_copy *pc = &k->portals[i];
			struct stats_portal_row *o = &s->portals[s->nportals++];
			netaddr_join(o->portal, sizeof(o->portal), pc->p->host, pc->p->port);
			o->iser = pc->p->iser;
			o->listening = __atomic_load_n(&pc->p->l, __ATOMIC_RELAXED) != NULL;
			o->connections = pc->live;
			o->c = pc->sum;
		}
	}
	if (k->f.reactors && k->nreactors) {
		s->reactors = calloc(k->nreactors, sizeof(*s->reactors));
		if (!s->reactors)
			return -ENOMEM;
		for (size_t i = 0; i < k->nreactors; i++) {
			const struct reactor_copy *rc = &k->reactors[i];
			if (!rc->seen)
				continue;
			s->reactors[s->nreactors++] = (struct stats_reactor_row){ .reactor = (unsigned)i,
										  .connections = rc->connections,
										  .pool_bytes = rc->pool_bytes,
										  .pool_in_use = rc->pool_in_use };
		}
	}
	return 0;
}
