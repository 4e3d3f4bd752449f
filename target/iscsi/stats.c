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
#include "target/iscsi/iscsi.h"
#include "target/iscsi/stats.h"

#define HASH_SIZE 4096

/* One reactor's LUN x initiator entries (only that reactor touches them). */
struct stats_table {
	struct stats_table *next;       /* every table, for stats_free */
	struct stats_lun *hash[HASH_SIZE];
	unsigned count;
	struct stats_lun overflow;      /* what no entry could be made for (STATS_MAX_LUNS, memory) */
};

static __thread struct stats_table *tab;
static pthread_mutex_t tables_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stats_table *tables;

#if ISERT_STATS
static uint32_t key_hash(const struct iscsi_tpg *tpg, uint64_t lun, const char *ini)
{
	uint32_t h = 2166136261u ^ (uint32_t)(uintptr_t)tpg ^ (uint32_t)lun * 0x9e3779b1u;
	for (const char *p = ini; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h % HASH_SIZE;
}

/* An entry nothing points at (no LUN map, no command), to reuse past STATS_MAX_LUNS. */
static struct stats_lun *unused_entry(void)
{
	for (unsigned i = 0; i < HASH_SIZE; i++)
		for (struct stats_lun **pp = &tab->hash[i]; *pp; pp = &(*pp)->hnext)
			if (!(*pp)->users && !(*pp)->in_flight) {
				struct stats_lun *e = *pp;
				*pp = e->hnext;
				return e;
			}
	return NULL;
}

static struct stats_lun *lun_entry(const struct iscsi_session *s, const struct iscsi_lun *l)
{
	if (!tab) {
		tab = calloc(1, sizeof(*tab));
		if (!tab)
			return NULL;
		snprintf(tab->overflow.initiator, sizeof(tab->overflow.initiator), "*");
		snprintf(tab->overflow.backstore, sizeof(tab->overflow.backstore), "*");
		pthread_mutex_lock(&tables_lock);
		tab->next = tables;
		tables = tab;
		pthread_mutex_unlock(&tables_lock);
	}
	const char *bs = backstore_name(scsi_lu_backstore(l->lu));
	uint32_t h = key_hash(s->tpg, l->lun, s->initiator);
	for (struct stats_lun *e = tab->hash[h]; e; e = e->hnext)
		if (e->tpg == s->tpg && e->lun == l->lun && !strcmp(e->initiator, s->initiator) &&
		    !strcmp(e->backstore, bs)) {
			e->users++;
			return e;
		}
	struct stats_lun *e = NULL;
	if (tab->count >= STATS_MAX_LUNS)
		e = unused_entry();
	if (!e) {
		if (tab->count >= STATS_MAX_LUNS || !(e = malloc(sizeof(*e)))) {
			tab->overflow.users++;
			return &tab->overflow;
		}
		tab->count++;
	}
	memset(e, 0, sizeof(*e));
	e->tpg = s->tpg;
	e->lun = l->lun;
	snprintf(e->initiator, sizeof(e->initiator), "%s", s->initiator);
	snprintf(e->backstore, sizeof(e->backstore), "%s", bs);
	e->users = 1;
	e->hnext = tab->hash[h];
	tab->hash[h] = e;
	return e;
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
	if (t->st)
		t->st->in_flight--;
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

struct conn_copy {
	const struct iscsi_tpg *tpg;
	char initiator[224];
	char portal[72];
	char peer[64];
	const char *transport;         /* a transport's static name */
	uint16_t tsih, cid;
	int reactor;
	bool rdma;
	struct xp_stats xp;
	struct stats_conn st;
};

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
	struct stats_lun *luns;
	size_t nluns, caplun;
	struct conn_copy *conns;
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
	free(k->luns);
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
	if (!e->tpg && !e->users && !e->c.commands[STATS_READ] && !e->c.commands[STATS_WRITE] &&
	    !e->c.commands[STATS_OTHER])
		return false; /* the overflow entry, never used */
	if (f->target && (!e->tpg || strcmp(e->tpg->iqn, f->target)))
		return false;
	if (f->initiator && strcmp(e->initiator, f->initiator))
		return false;
	return f->lun < 0 || (e->tpg && e->lun == (uint64_t)f->lun);
}

struct conn_walk {
	struct collect *k;
	struct conn_copy *c;
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
	struct conn_copy *o = &w->c[w->n++];
	memset(o, 0, sizeof(*o));
	o->tpg = s->tpg;
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
			if (!grow((void **)&k->luns, &k->caplun, k->nluns + 1, sizeof(*k->luns))) {
				k->err = -ENOMEM;
				break;
			}
			k->luns[k->nluns++] = *e;
		}
	pthread_mutex_unlock(&k->mu);
	free(w.c);
	free(w.p);
}

/* ------------------------------------------------------------------------ */
/* JSON */

static const char *const sense_names[16] = {
	"no_sense", "recovered_error", "not_ready", "medium_error", "hardware_error", "illegal_request",
	"unit_attention", "data_protect", "blank_check", "vendor_specific", "copy_aborted", "aborted_command",
	"reserved_0c", "volume_overflow", "miscompare", "completed",
};
static const char *const refusal_names[REFUSED_KINDS] = { "acl", "chap", "unknown_target", "resources",
							  "initiator_error" };
static const char *const lat_names[LAT_KINDS] = { "read", "write", "read_backstore", "write_backstore" };

static void add_u(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static const char *tpg_iqn(const struct iscsi_tpg *t)
{
	return t ? t->iqn : "*";
}

static int lun_cmp(const void *a, const void *b)
{
	const struct stats_lun *x = a, *y = b;
	int r = strcmp(tpg_iqn(x->tpg), tpg_iqn(y->tpg));
	if (!r)
		r = (x->tpg ? x->tpg->tag : 0) - (y->tpg ? y->tpg->tag : 0);
	if (!r)
		r = x->lun < y->lun ? -1 : x->lun > y->lun;
	if (!r)
		r = strcmp(x->initiator, y->initiator);
	if (!r)
		r = strcmp(x->backstore, y->backstore);
	return r;
}


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

static json_object *lun_json(const struct stats_lun *e)
{
	const struct stats_lun_counters *c = &e->c;
	json_object *o = json_object_new_object(), *x;
	json_object_object_add(o, "target", json_object_new_string(tpg_iqn(e->tpg)));
	add_u(o, "tpg", e->tpg ? e->tpg->tag : 0);
	add_u(o, "lun", e->lun);
	json_object_object_add(o, "initiator", json_object_new_string(e->initiator));
	json_object_object_add(o, "backstore", json_object_new_string(e->backstore));
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

static json_object *conn_json(const struct conn_copy *c)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "target", json_object_new_string(c->tpg ? c->tpg->iqn : ""));
	add_u(o, "tpg", c->tpg ? c->tpg->tag : 0);
	json_object_object_add(o, "initiator", json_object_new_string(c->initiator));
	add_u(o, "tsih", c->tsih);
	add_u(o, "cid", c->cid);
	json_object_object_add(o, "portal", json_object_new_string(c->portal));
	json_object_object_add(o, "transport", json_object_new_string(c->transport));
	json_object_object_add(o, "peer", json_object_new_string(c->peer));
	add_u(o, "reactor", (uint64_t)c->reactor);
	xp_json(o, &c->xp, &c->st, c->rdma);
	return o;
}

static json_object *portal_json(const struct portal_copy *pc)
{
	const struct stats_portal *s = &pc->sum;
	json_object *o = json_object_new_object(), *l, *r;
	char name[72];
	snprintf(name, sizeof(name), "%s:%u", pc->p->host, pc->p->port);
	json_object_object_add(o, "portal", json_object_new_string(name));
	json_object_object_add(o, "transport", json_object_new_string(pc->p->iser ? "iser" : "tcp"));
	json_object_object_add(o, "listening",
			       json_object_new_boolean(__atomic_load_n(&pc->p->l, __ATOMIC_RELAXED) != NULL));
	add_u(o, "connections", pc->live);
	add_u(o, "connections_refused", s->connections_refused);
	add_u(o, "connections_closed", s->connections_closed);
	json_object_object_add(o, "logins", l = json_object_new_object());
	add_u(l, "accepted", s->logins_accepted);
	json_object_object_add(l, "refused", r = json_object_new_object());
	for (int i = 0; i < REFUSED_KINDS; i++)
		add_u(r, refusal_names[i], s->logins_refused[i]);
	xp_json(o, &s->closed, &s->closed_conn, pc->p->iser);
	return o;
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

int stats_collect(json_object *out, const struct stats_filter *f, char *err, size_t errlen)
{
#if !ISERT_STATS
	snprintf(err, errlen, "isertd was built without statistics (meson -Dstats=false)");
	return -ENOTSUP;
#endif
	struct collect *k = collect_new(f);
	if (!k)
		return -ENOMEM;
	int rc = admin_on_reactors(collect_on_reactor, k, collect_free, err, errlen);
	if (rc)
		return rc;
	if (k->err) {
		snprintf(err, errlen, "out of memory");
		collect_free(k);
		return -ENOMEM;
	}
	add_u(out, "monotonic_ns", reactor_now_ns());
	json_object *a = json_object_new_array();
	for (int i = 0; i < STATS_BUCKETS - 1; i++)
		json_object_array_add(a, json_object_new_uint64(1ull << i));
	json_object_object_add(out, "latency_bounds_us", a);
	if (f->luns) {
		/* The same LUN x initiator from several reactors: one entry. */
		if (k->nluns) /* qsort may not be given NULL, even for nothing */
			qsort(k->luns, k->nluns, sizeof(*k->luns), lun_cmp);
		a = json_object_new_array();
		for (size_t i = 0; i < k->nluns;) {
			size_t j = i + 1;
			for (; j < k->nluns && !lun_cmp(&k->luns[i], &k->luns[j]); j++) {
				add_counters(&k->luns[i].c, &k->luns[j].c, sizeof(k->luns[j].c));
				k->luns[i].in_flight += k->luns[j].in_flight;
			}
			json_object_array_add(a, lun_json(&k->luns[i]));
			i = j;
		}
		json_object_object_add(out, "luns", a);
	}
	if (f->connections) {
		a = json_object_new_array();
		for (size_t i = 0; i < k->nconns; i++)
			json_object_array_add(a, conn_json(&k->conns[i]));
		json_object_object_add(out, "connections", a);
	}
	if (f->portals) {
		a = json_object_new_array();
		for (size_t i = 0; i < k->nportals; i++)
			json_object_array_add(a, portal_json(&k->portals[i]));
		json_object_object_add(out, "portals", a);
	}
	if (f->rdma_devices)
		json_object_object_add(out, "rdma_devices", rdma_devices_json());
	if (f->reactors) {
		a = json_object_new_array();
		for (size_t i = 0; i < k->nreactors; i++) {
			const struct reactor_copy *rc = &k->reactors[i];
			if (!rc->seen)
				continue;
			json_object *o = json_object_new_object();
			add_u(o, "reactor", i);
			add_u(o, "connections", rc->connections);
			add_u(o, "buffer_pool_bytes", rc->pool_bytes);
			add_u(o, "buffers_in_use", rc->pool_in_use);
			json_object_array_add(a, o);
		}
		json_object_object_add(out, "reactors", a);
	}
	collect_free(k);
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
