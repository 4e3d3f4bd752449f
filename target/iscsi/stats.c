/*
 * Statistics: the data-path hooks (on the reactor that owns the task), the
 * per-reactor table of LUN x initiator entries, and the reader that asks
 * every reactor for a copy and sums the copies (docs/stats.md).
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
#include "target/control/control.h"
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

/* Every field of these counter structs is a uint64_t: one loop sums any of them. */
_Static_assert(sizeof(struct xp_stats) % sizeof(uint64_t) == 0, "xp_stats: uint64_t fields only");
_Static_assert(sizeof(struct stats_conn) % sizeof(uint64_t) == 0, "stats_conn: uint64_t fields only");
_Static_assert(sizeof(struct stats_portal) % sizeof(uint64_t) == 0, "stats_portal: uint64_t fields only");
_Static_assert(sizeof(struct stats_lun_counters) % sizeof(uint64_t) == 0, "counters: uint64_t fields only");

static void add_counters(void *to, const void *from, size_t size)
{
	uint64_t *d = to;
	const uint64_t *v = from;
	for (size_t i = 0; i < size / sizeof(uint64_t); i++)
		d[i] += v[i];
}

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
	add_counters(&r->c, &e->c, sizeof(e->c));
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
	struct stats_lun_counters *k = &e->c;
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
		hist_add(&k->lat[LAT_READ], lat);
		hist_add(&k->lat[LAT_READ_BACKSTORE], cmd->bs_ns);
	} else {
		if (cmd->status == SCSI_GOOD)
			k->bytes_written += cmd->dout_len;
		hist_add(&k->lat[LAT_WRITE], lat);
		hist_add(&k->lat[LAT_WRITE_BACKSTORE], cmd->bs_ns);
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
		l->st->c.tmf++;
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
	add_counters(&ps->closed, &c->xp->stats, sizeof(c->xp->stats));
	add_counters(&ps->closed_conn, &c->st, sizeof(c->st));
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
/* Reading: every reactor copies what it holds into one request. */

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

struct collect {
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

static void collect_free(void *arg)
{
	struct collect *k = arg;
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

static bool lun_wanted(const struct collect *k, const struct stats_lun *e)
{
	const struct stats_filter *f = &k->f;
	if (e->kind == STATS_OVERFLOW && !e->users && !e->c.commands[STATS_READ] && !e->c.commands[STATS_WRITE] &&
	    !e->c.commands[STATS_OTHER])
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
	struct collect *k;
	struct stats_conn_row *c;
	size_t n, cap;
	struct portal_copy *p;         /* this reactor's share, nportals long */
	bool oom;
};

static void conn_visit(struct iscsi_conn *c, void *arg)
{
	struct conn_walk *w = arg;
	struct collect *k = w->k;
	for (size_t i = 0; i < k->nportals; i++)
		if (w->p[i].p == c->portal) {
			w->p[i].live++;
			add_counters(&w->p[i].sum.closed, &c->xp->stats, sizeof(c->xp->stats));
			add_counters(&w->p[i].sum.closed_conn, &c->st, sizeof(c->st));
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
static void collect_on_reactor(void *arg)
{
	struct collect *k = arg;
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
		add_counters(&d->sum, &s->sum, sizeof(s->sum));
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
static struct collect *collect_new(const struct stats_filter *f)
{
	struct collect *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	pthread_mutex_init(&k->mu, NULL);
	k->f = *f;
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
			collect_free(k);
			return NULL;
		}
	}
	size_t n = 0;
	for (struct iscsi_portal *p = __atomic_load_n(&iscsi_g.portals, __ATOMIC_ACQUIRE); p; p = p->next)
		n++;
	k->portals = calloc(n ? n : 1, sizeof(*k->portals));
	if (!k->portals) {
		collect_free(k);
		return NULL;
	}
	for (struct iscsi_portal *p = __atomic_load_n(&iscsi_g.portals, __ATOMIC_ACQUIRE); p && k->nportals < n;
	     p = p->next)
		if (p->st)
			k->portals[k->nportals++].p = p;
	return k;
}

/* ------------------------------------------------------------------------ */
/* The snapshot */

int stats_row_cmp(const struct stats_row *a, const struct stats_row *b)
{
	int r = strcmp(a->target, b->target);
	if (!r)
		r = (a->tpg > b->tpg) - (a->tpg < b->tpg);
	if (!r)
		r = (a->lun > b->lun) - (a->lun < b->lun);
	if (!r)
		r = strcmp(a->backstore, b->backstore);
	if (!r)
		r = strcmp(a->initiator, b->initiator);
	return r;
}

static int row_ptr_cmp(const void *a, const void *b)
{
	return stats_row_cmp(*(struct stats_row *const *)a, *(struct stats_row *const *)b);
}

/* One sysfs counter file: false when absent or unreadable (left out, never a zero). */
static bool read_counter(const char *path, uint64_t *v)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		return false;
	bool ok = fscanf(fp, "%" SCNu64, v) == 1;
	fclose(fp);
	return ok;
}

static void add_u(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static json_object *counter_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return NULL;
	json_object *o = json_object_new_object();
	struct dirent *de;
	char f[512];
	uint64_t v;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && (size_t)snprintf(f, sizeof(f), "%s/%s", path, de->d_name) < sizeof(f) &&
		    read_counter(f, &v))
			add_u(o, de->d_name, v);
	closedir(d);
	return o;
}

#define SYS_IB "/sys/class/infiniband"

/* The kernel's counters of every RDMA device port. */
static json_object *rdma_devices_json(void)
{
	json_object *a = json_object_new_array();
	DIR *d = opendir(SYS_IB);
	if (!d)
		return a;
	struct dirent *de;
	while ((de = readdir(d))) {
		char path[512];
		if (de->d_name[0] == '.' || (size_t)snprintf(path, sizeof(path), SYS_IB "/%s/ports", de->d_name) >= sizeof(path))
			continue;
		DIR *pd = opendir(path);
		if (!pd)
			continue;
		struct dirent *pe;
		while ((pe = readdir(pd))) {
			char sub[600];
			if (pe->d_name[0] == '.')
				continue;
			json_object *o = json_object_new_object(), *c;
			json_object_object_add(o, "device", json_object_new_string(de->d_name));
			add_u(o, "port", strtoull(pe->d_name, NULL, 10));
			if ((size_t)snprintf(sub, sizeof(sub), "%s/%s/counters", path, pe->d_name) < sizeof(sub) &&
			    (c = counter_dir(sub)))
				json_object_object_add(o, "counters", c);
			if ((size_t)snprintf(sub, sizeof(sub), "%s/%s/hw_counters", path, pe->d_name) < sizeof(sub) &&
			    (c = counter_dir(sub)))
				json_object_object_add(o, "hw_counters", c);
			json_object_array_add(a, o);
		}
		closedir(pd);
	}
	closedir(d);
	return a;
}

void stats_snap_free(struct stats_snap *s)
{
	if (!s)
		return;
	free(s->rows);
	free(s->sorted);
	free(s->conns);
	free(s->portals);
	json_object_put(s->rdma_devices);
	free(s->reactors);
	free(s);
}

/* The copies of k, summed and sorted, into s (k's arrays move over). */
static int snap_build(struct stats_snap *s, struct collect *k)
{
	s->monotonic_ns = reactor_now_ns();
	s->rows = k->rows;
	s->nrows = k->nrows;
	k->rows = NULL;
	s->conns = k->conns;
	s->nconns = k->nconns;
	k->conns = NULL;
	if (s->nrows) {
		s->sorted = malloc(s->nrows * sizeof(*s->sorted));
		if (!s->sorted)
			return -ENOMEM;
		for (size_t i = 0; i < s->nrows; i++)
			s->sorted[i] = &s->rows[i];
		qsort(s->sorted, s->nrows, sizeof(*s->sorted), row_ptr_cmp);
		/* The same key from several reactors (sessions of one initiator, rest and overflow rows): one row. */
		for (size_t i = 0; i < s->nrows;) {
			struct stats_row *r = s->sorted[i];
			size_t j = i + 1;
			for (; j < s->nrows && !stats_row_cmp(r, s->sorted[j]); j++) {
				add_counters(&r->c, &s->sorted[j]->c, sizeof(r->c));
				r->in_flight += s->sorted[j]->in_flight;
			}
			s->sorted[s->nsorted++] = r;
			i = j;
		}
	}
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
	if (k->f.rdma_devices && !(s->rdma_devices = rdma_devices_json()))
		return -ENOMEM;
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

int stats_snapshot(const struct stats_filter *f, struct stats_snap **out, char *err, size_t errlen)
{
	*out = NULL;
#if !ISERT_STATS
	snprintf(err, errlen, "isertd was built without statistics (meson -Dstats=false)");
	return -ENOTSUP;
#endif
	struct collect *k = collect_new(f);
	struct stats_snap *s = calloc(1, sizeof(*s));
	if (!k || !s) {
		if (k)
			collect_free(k);
		free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = admin_on_reactors(collect_on_reactor, k, collect_free, err, errlen);
	if (rc) {
		free(s);
		return rc;
	}
	rc = k->err ? k->err : snap_build(s, k);
	collect_free(k);
	if (rc) {
		stats_snap_free(s);
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	*out = s;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* JSON (the stats method) */

static const char *const sense_names[16] = {
	"no_sense", "recovered_error", "not_ready", "medium_error", "hardware_error", "illegal_request",
	"unit_attention", "data_protect", "blank_check", "vendor_specific", "copy_aborted", "aborted_command",
	"reserved_0c", "volume_overflow", "miscompare", "completed",
};
static const char *const refusal_names[REFUSED_KINDS] = { "acl", "chap", "unknown_target", "resources",
							  "initiator_error" };
static const char *const lat_names[LAT_KINDS] = { "read", "write", "read_backstore", "write_backstore" };
static const char *const kind_names[] = { [STATS_NAMED] = "initiator", [STATS_REST] = "rest",
					  [STATS_OVERFLOW] = "overflow" };

static json_object *hist_json(const struct stats_hist *h)
{
	json_object *o = json_object_new_object(), *b = json_object_new_array_ext(STATS_BUCKETS);
	uint64_t n = 0;
	for (int i = 0; i < STATS_BUCKETS; i++) {
		n += h->n[i];
		json_object_array_add(b, json_object_new_uint64(h->n[i]));
	}
	add_u(o, "count", n);
	add_u(o, "sum_ns", h->sum_ns);
	json_object_object_add(o, "buckets", b);
	return o;
}

static json_object *lun_json(const struct stats_row *e)
{
	const struct stats_lun_counters *c = &e->c;
	json_object *o = json_object_new_object(), *x;
	json_object_object_add(o, "target", json_object_new_string(e->target));
	add_u(o, "tpg", e->tpg);
	add_u(o, "lun", e->lun);
	json_object_object_add(o, "initiator", admin_json_shown(e->initiator));
	json_object_object_add(o, "backstore", json_object_new_string(e->backstore));
	json_object_object_add(o, "row", json_object_new_string(kind_names[e->kind]));
	add_u(o, "in_flight", e->in_flight);
	json_object_object_add(o, "commands", x = json_object_new_object());
	add_u(x, "read", c->commands[STATS_READ]);
	add_u(x, "write", c->commands[STATS_WRITE]);
	add_u(x, "other", c->commands[STATS_OTHER]);
	add_u(o, "bytes_read", c->bytes_read);
	add_u(o, "bytes_written", c->bytes_written);
	json_object_object_add(o, "check_conditions", x = json_object_new_object());
	for (int i = 0; i < 16; i++)
		if (c->check_conditions[i])
			add_u(x, sense_names[i], c->check_conditions[i]);
	add_u(o, "unit_attentions", c->check_conditions[6]);
	json_object_object_add(o, "status", x = json_object_new_object());
	add_u(x, "busy", c->busy);
	add_u(x, "reservation_conflict", c->reservation_conflict);
	add_u(x, "task_set_full", c->task_set_full);
	add_u(o, "task_management", c->tmf);
	json_object_object_add(o, "latency", x = json_object_new_object());
	for (int i = 0; i < LAT_KINDS; i++)
		json_object_object_add(x, lat_names[i], hist_json(&c->lat[i]));
	return o;
}

static void xp_json(json_object *o, const struct xp_stats *s, const struct stats_conn *st, bool rdma)
{
	add_u(o, "pdus_in", s->pdus_in);
	add_u(o, "pdus_out", s->pdus_out);
	add_u(o, "bytes_in", s->bytes_in);
	add_u(o, "bytes_out", s->bytes_out);
	add_u(o, "digest_errors", s->digest_errors);
	add_u(o, "r2ts", st->r2ts);
	add_u(o, "nop_timeouts", st->nop_timeouts);
	if (!rdma)
		return;
	json_object *r = json_object_new_object();
	add_u(r, "reads", s->rdma_reads);
	add_u(r, "read_bytes", s->rdma_read_bytes);
	add_u(r, "writes", s->rdma_writes);
	add_u(r, "write_bytes", s->rdma_write_bytes);
	add_u(r, "sends", s->sends);
	add_u(r, "recvs", s->recvs);
	add_u(r, "inline_sends", s->inline_sends);
	add_u(r, "send_posts", s->send_posts);
	add_u(r, "cq_polls", s->cq_polls);
	add_u(r, "cq_empty_polls", s->cq_empty_polls);
	add_u(r, "completions", s->completions);
	json_object_object_add(o, "rdma", r);
}

static json_object *conn_json(const struct stats_conn_row *c)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "target", json_object_new_string(c->target));
	add_u(o, "tpg", c->tpg);
	json_object_object_add(o, "initiator", admin_json_shown(c->initiator));
	add_u(o, "tsih", c->tsih);
	add_u(o, "cid", c->cid);
	json_object_object_add(o, "portal", json_object_new_string(c->portal));
	json_object_object_add(o, "transport", json_object_new_string(c->transport));
	json_object_object_add(o, "peer", json_object_new_string(c->peer));
	add_u(o, "reactor", (uint64_t)c->reactor);
	xp_json(o, &c->xp, &c->st, c->rdma);
	return o;
}

static json_object *portal_json(const struct stats_portal_row *p)
{
	const struct stats_portal *s = &p->c;
	json_object *o = json_object_new_object(), *l, *r;
	json_object_object_add(o, "portal", json_object_new_string(p->portal));
	json_object_object_add(o, "transport", json_object_new_string(p->iser ? "iser" : "tcp"));
	json_object_object_add(o, "listening", json_object_new_boolean(p->listening));
	add_u(o, "connections", p->connections);
	add_u(o, "connections_refused", s->connections_refused);
	add_u(o, "connections_closed", s->connections_closed);
	json_object_object_add(o, "logins", l = json_object_new_object());
	add_u(l, "accepted", s->logins_accepted);
	add_u(l, "redirected", s->logins_redirected);
	json_object_object_add(l, "refused", r = json_object_new_object());
	for (int i = 0; i < REFUSED_KINDS; i++)
		add_u(r, refusal_names[i], s->logins_refused[i]);
	xp_json(o, &s->closed, &s->closed_conn, p->iser);
	return o;
}

/*
 * The cursor of a page: the key of its last row, as
 * "1.HEX(target).tpg.lun.HEX(backstore).HEX(initiator)".  Hex, because a
 * key holds whatever bytes an initiator named itself with, and the cursor
 * must come back through any JSON client unchanged.
 */
static void hex_put(char **p, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	for (; *s; s++) {
		*(*p)++ = hex[(uint8_t)*s >> 4];
		*(*p)++ = hex[(uint8_t)*s & 15];
	}
}

static char *cursor_of(const struct stats_row *r)
{
	size_t n = 2 * (strlen(r->target) + strlen(r->backstore) + strlen(r->initiator)) + 64;
	char *c = malloc(n), *p = c;
	if (!c)
		return NULL;
	p += sprintf(p, "1.");
	hex_put(&p, r->target);
	p += sprintf(p, ".%u.%" PRIu64 ".", r->tpg, r->lun);
	hex_put(&p, r->backstore);
	*p++ = '.';
	hex_put(&p, r->initiator);
	*p = 0;
	return c;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Hex up to the next '.' (or the end) into out (at most outlen - 1 bytes, no NUL); the text after it, or NULL. */
static const char *hex_get(const char *s, char *out, size_t outlen)
{
	size_t n = 0;
	for (; *s && *s != '.'; s += 2) {
		int hi = hexval(s[0]), lo = hi < 0 ? -1 : hexval(s[1]);
		if (lo < 0 || (hi | lo) == 0 || n + 1 >= outlen)
			return NULL;
		out[n++] = (char)(hi << 4 | lo);
	}
	out[n] = 0;
	return s;
}

/* The key in a cursor: 0, or -EINVAL. */
static int cursor_parse(const char *c, struct stats_row *key, char *target, size_t tlen)
{
	unsigned tpg;
	uint64_t lun;
	int used = 0;
	memset(key, 0, sizeof(*key));
	if (strncmp(c, "1.", 2) || !(c = hex_get(c + 2, target, tlen)) || *c != '.' ||
	    sscanf(c, ".%5u.%20" SCNu64 ".%n", &tpg, &lun, &used) != 2 || !used || tpg > 65535 ||
	    !(c = hex_get(c + used, key->backstore, sizeof(key->backstore))) || *c != '.' ||
	    !(c = hex_get(c + 1, key->initiator, sizeof(key->initiator))) || *c)
		return -EINVAL;
	key->target = target;
	key->tpg = (uint16_t)tpg;
	key->lun = lun;
	return 0;
}

int stats_collect(json_object *out, const struct stats_filter *f, const char *cursor, unsigned limit, char *err,
		  size_t errlen)
{
	struct stats_row key;
	char target[224];
	if (cursor && cursor_parse(cursor, &key, target, sizeof(target))) {
		snprintf(err, errlen, "cursor: not one this method made (pass back the \"cursor\" of an answer)");
		return -EINVAL;
	}
	if (limit < 1 || limit > STATS_PAGE_MAX)
		limit = STATS_PAGE_MAX;
	struct stats_snap *s;
	int rc = stats_snapshot(f, &s, err, errlen);
	if (rc)
		return rc;
	add_u(out, "monotonic_ns", s->monotonic_ns);
	json_object *a = json_object_new_array();
	for (int i = 0; i < STATS_BUCKETS - 1; i++)
		json_object_array_add(a, json_object_new_uint64(1ull << i));
	json_object_object_add(out, "latency_bounds_us", a);
	if (f->luns) {
		/* The first row after the cursor's key: a binary search over the sorted rows. */
		size_t lo = 0, hi = s->nsorted;
		while (cursor && lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (stats_row_cmp(s->sorted[mid], &key) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		size_t end = s->nsorted - lo > limit ? lo + limit : s->nsorted;
		a = json_object_new_array_ext((int)(end - lo));
		for (size_t i = lo; i < end; i++)
			json_object_array_add(a, lun_json(s->sorted[i]));
		json_object_object_add(out, "luns", a);
		json_object_object_add(out, "more", json_object_new_boolean(end < s->nsorted));
		if (end < s->nsorted) {
			char *c = cursor_of(s->sorted[end - 1]);
			json_object_object_add(out, "cursor", c ? json_object_new_string(c) : NULL);
			free(c);
		}
	}
	if (f->connections) {
		a = json_object_new_array();
		for (size_t i = 0; i < s->nconns; i++)
			json_object_array_add(a, conn_json(&s->conns[i]));
		json_object_object_add(out, "connections", a);
	}
	if (f->portals) {
		a = json_object_new_array();
		for (size_t i = 0; i < s->nportals; i++)
			json_object_array_add(a, portal_json(&s->portals[i]));
		json_object_object_add(out, "portals", a);
	}
	if (f->rdma_devices)
		json_object_object_add(out, "rdma_devices", json_object_get(s->rdma_devices));
	if (f->reactors) {
		a = json_object_new_array();
		for (size_t i = 0; i < s->nreactors; i++) {
			const struct stats_reactor_row *r = &s->reactors[i];
			json_object *o = json_object_new_object();
			add_u(o, "reactor", r->reactor);
			add_u(o, "connections", r->connections);
			add_u(o, "buffer_pool_bytes", r->pool_bytes);
			add_u(o, "buffers_in_use", r->pool_in_use);
			json_object_array_add(a, o);
		}
		json_object_object_add(out, "reactors", a);
	}
	stats_snap_free(s);
	return 0;
}

int stats_reset(char *err, size_t errlen)
{
	struct stats_filter f = { .lun = -1 };
	struct collect *k = collect_new(&f);
	if (!k)
		return -ENOMEM;
	k->reset = true;
	int rc = admin_on_reactors(collect_on_reactor, k, collect_free, err, errlen);
	if (!rc)
		collect_free(k);
	return rc;
}
