/*
 * Statistics: the data-path hooks (on the reactor that owns the task), the
 * per-reactor table of LUN x initiator entries (docs/stats.md).  Each
 * reactor's copy for a reader is stats_copy.c's; summing the copies, and
 * what the exporters make of them, the control plane's
 * (target/control/stats_snap.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/reactor.h"
#include "common/proto/scsi_proto.h"
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

void stats_tmf(struct iscsi_session *s, struct iscsi_lun *l)
{
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

size_t stats_rows_max(void)
{
	unsigned n = iscsi_g.nreactors ? iscsi_g.nreactors : 1;
	return (size_t)n * (share(STATS_MAX_NAMED, n) + share(STATS_MAX_REST, n) + 1);
}

void stats_rows_foreach(void (*fn)(struct stats_lun *e, void *arg), void *arg)
{
	for (unsigned i = 0; tab && i < HASH_SIZE; i++)
		for (struct stats_lun *e = tab->hash[i]; e; e = e->hnext)
			fn(e, arg);
	if (tab)
		fn(&tab->overflow, arg);
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
