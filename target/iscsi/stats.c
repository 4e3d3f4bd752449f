/*
 * Statistics: the data-path hooks (on the reactor that owns the task), the
 * per-reactor table of LUN x initiator entries, and each reactor's copy of
 * what it holds for a reader (docs/stats.md).  Summing the copies, and
 * what the exporters make of them, is the control plane's
 * (target/control/stats_snap.c).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/log.h"
#include "common/reactor.h"
#include "common/scsi_proto.h"
#include "target/backstore/backstore.h"
#include "target/iscsi/iscsi.h"
#include "target/iscsi/stats.h"

#define HASH_SIZE 4096

/* One reactor's rows (only that reactor touches them; stats_map_dropped may run after the reactors stopped). */
struct stats_table {
	struct stats_table *next;       /* every table, for stats_free */
	struct stats_lun *hash[HASH_SIZE];
	unsigned named, rest;           /* rows made of each kind */
	unsigned named_max, rest_max;   /* this reactor's share of STATS_MAX_NAMED and STATS_MAX_REST */
	struct stats_lun *idle_head, *idle_tail; /* named rows no session uses, the longest unused first */
	struct stats_lun overflow;      /* what no row could be made for (both caps, memory) */
};

static __thread struct stats_table *tab;
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stats_table *tables;

/* An equal share of total for each reactor, at least 1: the rows of all reactors stay within total. */
static unsigned share(unsigned total, unsigned nreactors)
{
	unsigned n = total / (nreactors ? nreactors : 1);
	return n ? n : 1;
}

/* Every field of these counter structs is a uint64_t: stats_add_counters sums any of them. */
_Static_assert(sizeof(struct xp_stats) % sizeof(uint64_t) == 0, "xp_stats: uint64_t fields only");
_Static_assert(sizeof(struct stats_conn) % sizeof(uint64_t) == 0, "stats_conn: uint64_t fields only");
_Static_assert(sizeof(struct stats_portal) % sizeof(uint64_t) == 0, "stats_portal: uint64_t fields only");
_Static_assert(sizeof(struct stats_lun_counters) % sizeof(uint64_t) == 0, "counters: uint64_t fields only");

static void idle_add(struct stats_lun *e)
{
	struct stats_table *t = e->tab;
	e->idle = true;
	e->inext = NULL;
	e->iprev = t->idle_tail;
	if (t->idle_tail)
		t->idle_tail->inext = e;
	else
		t->idle_head = e;
	t->idle_tail = e;
}

/* A named row nothing points at any more (no LUN map, no command) may be folded when its place is needed. */
static void maybe_idle(struct stats_lun *e)
{
	if (e->kind == STATS_NAMED && !e->users && !e->in_flight && !e->idle && e->tab)
		idle_add(e);
}

#if ISERT_STATS
static void idle_del(struct stats_lun *e)
{
	struct stats_table *t = e->tab;
	if (!e->idle)
		return;
	if (e->iprev)
		e->iprev->inext = e->inext;
	else
		t->idle_head = e->inext;
	if (e->inext)
		e->inext->iprev = e->iprev;
	else
		t->idle_tail = e->iprev;
	e->idle = false;
	e->iprev = e->inext = NULL;
}

static uint32_t key_hash(const struct rt_tpg *tpg, uint64_t lun, const char *ini)
{
	uint32_t h = 2166136261u ^ (uint32_t)(uintptr_t)tpg ^ (uint32_t)lun * 0x9e3779b1u;
	for (const char *p = ini; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h % HASH_SIZE;
}

static struct stats_table *table(void)
{
	if (tab)
		return tab;
	tab = calloc(1, sizeof(*tab));
	if (!tab)
		return NULL;
	tab->named_max = share(STATS_MAX_NAMED, iscsi_g.nreactors);
	tab->rest_max = share(STATS_MAX_REST, iscsi_g.nreactors);
	tab->overflow.kind = STATS_OVERFLOW;
	tab->overflow.tab = tab;
	snprintf(tab->overflow.initiator, sizeof(tab->overflow.initiator), STATS_REST_NAME);
	snprintf(tab->overflow.backstore, sizeof(tab->overflow.backstore), "*");
	pthread_mutex_lock(&tables_lock);
	tab->next = tables;
	tables = tab;
	pthread_mutex_unlock(&tables_lock);
	return tab;
}

static struct stats_lun *find(struct stats_table *t, uint32_t h, uint8_t kind, const struct rt_tpg *tpg,
			      uint64_t lun, const char *ini, const char *bs)
{
	for (struct stats_lun *e = t->hash[h]; e; e = e->hnext)
		if (e->kind == kind && e->tpg == tpg && e->lun == lun && !strcmp(e->initiator, ini) &&
		    !strcmp(e->backstore, bs))
			return e;
	return NULL;
}

static void hash_del(struct stats_lun *e)
{
	struct stats_lun **pp = &e->tab->hash[key_hash(e->tpg, e->lun, e->initiator)];
	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
}

/* e (zeroed or reused memory) as a new row of t under key, in the hash. */
static void row_init(struct stats_table *t, struct stats_lun *e, uint32_t h, uint8_t kind,
		     const struct rt_tpg *tpg, uint64_t lun, const char *ini, const char *bs)
{
	memset(e, 0, sizeof(*e));
	e->tab = t;
	e->kind = kind;
	e->tpg = tpg;
	e->lun = lun;
	snprintf(e->initiator, sizeof(e->initiator), "%s", ini);
	snprintf(e->backstore, sizeof(e->backstore), "%s", bs);
	e->hnext = t->hash[h];
	t->hash[h] = e;
}

/* The LUN's rest row on this reactor, made if the cap allows (NULL: none, the overflow row counts). */
static struct stats_lun *rest_row(struct stats_table *t, const struct rt_tpg *tpg, uint64_t lun, const char *bs)
{
	uint32_t h = key_hash(tpg, lun, STATS_REST_NAME);
	struct stats_lun *r = find(t, h, STATS_REST, tpg, lun, STATS_REST_NAME, bs);
	if (r || t->rest >= t->rest_max || !(r = malloc(sizeof(*r))))
		return r;
	row_init(t, r, h, STATS_REST, tpg, lun, STATS_REST_NAME, bs);
	t->rest++;
	return r;
}

/*
 * An idle named row's counters into its LUN's rest row, and the row out of
 * the table (its memory is the caller's).  Only idle rows fold: no LUN map
 * or task points at them, and their in_flight is 0.
 */
static void fold(struct stats_lun *e)
{
	struct stats_table *t = e->tab;
	idle_del(e);
	hash_del(e);
	t->named--;
	struct stats_lun *r = rest_row(t, e->tpg, e->lun, e->backstore);
	if (!r)
		r = &t->overflow;
	stats_add_counters(&r->c, &e->c, sizeof(e->c));
}

/*
 * The row a session's LUN counts in: its own named row; past the cap, the
 * place of the longest-idle named row (folded first); else the LUN's rest
 * row; else the overflow row.  NULL only without a table (out of memory).
 */
static struct stats_lun *lun_entry(const struct iscsi_session *s, const struct iscsi_lun *l)
{
	struct stats_table *t = table();
	if (!t)
		return NULL;
	const char *bs = backstore_name(scsi_lu_backstore(l->lu));
	/* An initiator named like the rest rows would make two rows with one key: it counts in the rest. */
	if (strcmp(s->initiator, STATS_REST_NAME)) {
		uint32_t h = key_hash(s->tpg, l->lun, s->initiator);
		struct stats_lun *e = find(t, h, STATS_NAMED, s->tpg, l->lun, s->initiator, bs);
		if (e) {
			idle_del(e);
			e->users++;
			return e;
		}
		if (t->named >= t->named_max && t->idle_head) {
			e = t->idle_head;
			fold(e);
		} else if (t->named < t->named_max) {
			e = malloc(sizeof(*e));
		}
		if (e) {
			row_init(t, e, h, STATS_NAMED, s->tpg, l->lun, s->initiator, bs);
			t->named++;
			e->users = 1;
			return e;
		}
	}
	struct stats_lun *r = rest_row(t, s->tpg, l->lun, bs);
	if (!r)
		r = &t->overflow;
	r->users++;
	return r;
}

static enum stats_kind cmd_kind(uint8_t op)
{
	switch (op) {
	case SCSI_OP_READ6: case SCSI_OP_READ10: case SCSI_OP_READ12: case SCSI_OP_READ16:
		return STATS_READ;
	case SCSI_OP_WRITE6: case SCSI_OP_WRITE10: case SCSI_OP_WRITE12: case SCSI_OP_WRITE16:
	case SCSI_OP_WRITE_VERIFY10: case SCSI_OP_WRITE_VERIFY12: case SCSI_OP_WRITE_VERIFY16:
	case SCSI_OP_COMPARE_AND_WRITE: case SCSI_OP_ORWRITE16: case SCSI_OP_WRITE_ATOMIC16:
		return STATS_WRITE;
	default:
		return STATS_OTHER;
	}
}

static void hist_add(struct stats_hist *h, uint64_t ns)
{
	uint64_t us = (ns + 999) / 1000;
	unsigned b = us <= 1 ? 0 : 64 - (unsigned)__builtin_clzll(us - 1);
	h->n[b < STATS_BUCKETS ? b : STATS_BUCKETS - 1]++;
	h->sum_ns += ns;
}

void stats_cmd_arrived(struct iscsi_task *t, struct iscsi_session *s, struct iscsi_lun *l)
{
	t->t_arrive = reactor_now_ns();
	if (!l)
		return;
	if (!l->st)
		l->st = lun_entry(s, l);
	t->st = l->st;
	if (t->st)
		t->st->in_flight++;
}

void stats_cmd_status(struct iscsi_task *t)
{
	struct stats_lun *e = t->st;
	if (!e)
		return;
	struct stats_counts *k = &e->c.n;
	const struct scsi_cmd *cmd = &t->cmd;
	enum stats_kind kind = cmd_kind(cmd->cdb[0]);
	k->commands[kind]++;
	switch (cmd->status) {
	case SCSI_CHECK_CONDITION: {
		/* Fixed (0x70/0x71) or descriptor (0x72/0x73) format. */
		uint8_t key = cmd->sense_len < 3 ? 0 : (cmd->sense[0] & 0x7f) >= 0x72 ? cmd->sense[1] : cmd->sense[2];
		k->check_conditions[key & 0x0f]++;
		break;
	}
	case SCSI_BUSY: k->busy++; break;
	case SCSI_RESERVATION_CONFLICT: k->reservation_conflict++; break;
	case SCSI_TASK_SET_FULL: k->task_set_full++; break;
	default: break;
	}
	if (kind == STATS_OTHER)
		return;
	uint64_t lat = reactor_now_ns() - t->t_arrive;
	if (kind == STATS_READ) {
		if (cmd->buf)
			k->bytes_read += cmd->din_len;
		hist_add(&e->c.lat[LAT_READ], lat);
		hist_add(&e->c.lat[LAT_READ_BACKSTORE], cmd->bs_ns);
	} else {
		if (cmd->status == SCSI_GOOD)
			k->bytes_written += cmd->dout_len;
		hist_add(&e->c.lat[LAT_WRITE], lat);
		hist_add(&e->c.lat[LAT_WRITE_BACKSTORE], cmd->bs_ns);
	}
}

void stats_cmd_freed(struct iscsi_task *t)
{
	if (t->st && !--t->st->in_flight)
		maybe_idle(t->st);
}

void stats_tmf(struct iscsi_session *s, uint64_t lun)
{
	struct iscsi_lun *l = (struct iscsi_lun *)session_lun(s, lun);
	if (!l)
		return;
	if (!l->st)
		l->st = lun_entry(s, l);
	if (l->st)
		l->st->c.n.tmf++;
}
#endif

/* ------------------------------------------------------------------------ */
/* Portals and connections */

void stats_map_dropped(struct iscsi_lun *luns, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (luns[i].st) {
			luns[i].st->users--;
			maybe_idle(luns[i].st);
			luns[i].st = NULL;
		}
}

int stats_portal_init(struct iscsi_portal *p, unsigned nreactors)
{
	p->st = calloc(nreactors ? nreactors : 1, sizeof(*p->st));
	return p->st ? 0 : -ENOMEM;
}

static struct stats_portal *portal_slot(struct iscsi_portal *p)
{
	struct reactor *r = reactor_self();
	return p && p->st && r ? &p->st[reactor_index(r)] : NULL;
}

void stats_login(struct iscsi_conn *c, uint16_t status)
{
	struct stats_portal *ps = portal_slot(c->portal);
	if (!ps)
		return;
	enum stats_refusal why;
	if (!status) {
		ps->logins_accepted++;
		return;
	}
	if (status >> 8 == PDU_LOGIN_CLASS_REDIRECT) {
		ps->logins_redirected++;
		return;
	}
	switch (status) {
	case PDU_LOGIN_FORBIDDEN: why = REFUSED_ACL; break;
	case PDU_LOGIN_AUTH_FAILED: why = REFUSED_CHAP; break;
	case PDU_LOGIN_NOT_FOUND: case PDU_LOGIN_TARGET_REMOVED: why = REFUSED_UNKNOWN_TARGET; break;
	case PDU_LOGIN_TOO_MANY_CONNECTIONS: why = REFUSED_RESOURCES; break;
	default: why = status >> 8 == 2 ? REFUSED_INITIATOR : REFUSED_RESOURCES; break;
	}
	ps->logins_refused[why]++;
}

void stats_conn_refused(struct iscsi_portal *p)
{
	struct stats_portal *ps = portal_slot(p);
	if (ps)
		ps->connections_refused++;
}

void stats_conn_closed(struct iscsi_conn *c)
{
	struct stats_portal *ps = portal_slot(c->portal);
	if (!ps)
		return;
	ps->connections_closed++;
	stats_add_counters(&ps->closed, &c->xp->stats, sizeof(c->xp->stats));
	stats_add_counters(&ps->closed_conn, &c->st, sizeof(c->st));
}

void stats_free(void)
{
	pthread_mutex_lock(&tables_lock);
	while (tables) {
		struct stats_table *t = tables;
		tables = t->next;
		for (unsigned i = 0; i < HASH_SIZE; i++)
			while (t->hash[i]) {
				struct stats_lun *e = t->hash[i];
				t->hash[i] = e->hnext;
				free(e);
			}
		free(t);
	}
	pthread_mutex_unlock(&tables_lock);
}

/* ------------------------------------------------------------------------ */
/* Reading: every reactor copies what it holds into one request (stats_copy). */

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
	for (unsigned i = 0; tab && i <= HASH_SIZE && (k->f.luns || k->reset); i++)
		for (struct stats_lun *e = i < HASH_SIZE ? tab->hash[i] : &tab->overflow; e;
		     e = i < HASH_SIZE ? e->hnext : NULL) {
			if (k->reset) {
				memset(&e->c, 0, sizeof(e->c));
				continue;
			}
			if (!lun_wanted(k, e))
				continue;
			if (k->nrows >= k->caprow) {
				k->err = -EOVERFLOW; /* more rows than the caps allow: cannot happen */
				break;
			}
			row_of(&k->rows[k->nrows++], e);
		}
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
		/*
		 * Every row any reactor may keep: its shares of both caps and its
		 * overflow row.  malloc, not calloc: only the rows copied touch memory.
		 */
		unsigned n = iscsi_g.nreactors ? iscsi_g.nreactors : 1;
		k->caprow = (size_t)n * (share(STATS_MAX_NAMED, n) + share(STATS_MAX_REST, n) + 1);
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
			snprintf(o->portal, sizeof(o->portal), "%s:%u", pc->p->host, pc->p->port);
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
