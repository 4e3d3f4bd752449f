/*
 * The iSNS registration kept equal to the configuration (RFC 4171).
 *
 * What the server holds is known as `have` (the last registration that
 * completed, wildcard portals resolved to the address the connection to the
 * server is bound to); what is wanted comes from the configuration.  One
 * request is in flight at a time; a change is carried as the difference
 * (DevDereg of the targets and portals that left, DevAttrReg of those that
 * came or changed), a first registration, or one after anything went wrong,
 * as the whole entity with the replace flag, so nothing of a registration
 * the server half-holds survives it.  Portal Groups ride with their objects:
 * a node registered after the portals names every portal (its TPG's tag, or
 * a NULL tag: no path), a portal registered after the nodes names every
 * node, so a server never fills a gap with its default tag 1.
 *
 * Every failure (a refused connection, a lost one, no answer in time, a
 * malformed answer, a status that is not success) is logged with its
 * reason, closes the connection and tries again after a backoff (1 s
 * doubling to 30 s) with a whole registration.  While registered, one node
 * is queried in turn at least once a minute (and every third of the
 * registration period): an answer without it, its entity or its portal
 * groups means the server lost the registration: a failure like the others.
 * A discovery domain's request refused is tried again after the same
 * backoff, the registration kept.  The failures in a row are forgotten only
 * when a query shows the server holds everything (the domain joined as
 * wanted): a server that accepts a registration and refuses what follows
 * cannot bring the pace back to 1 s.
 *
 * Pure: bytes and time come from the caller (client.c, the unit tests, the
 * fuzz harness), connections are asked of its isns_io_ops.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/netaddr.h"
#include "common/util.h"
#include "target/isns/isns_int.h"

/* What is registered: the wanted one with its wildcard portals resolved. */
struct reg {
	char *eid;
	uint32_t esi_interval, reg_period;
	uint16_t esi_port;         /* 0: no ESI */
	struct isns_portal *portals;
	size_t nportals;
	struct isns_node *nodes;
	size_t nnodes;
};

enum req_kind { RK_REG, RK_DEREG, RK_DEREG_ALL, RK_CHECK, RK_DD_FIND, RK_DD_CREATE, RK_DD_ADD, RK_DD_REMOVE };

struct req {
	enum req_kind kind;
	struct isns_out out;
	uint16_t xid;
	char **names;              /* DD members added or removed; the node checked ([0]) */
	size_t nnames;
};

struct isns_eng {
	const struct isns_io_ops *ops;
	void *ctx;
	struct isns_want *want;
	struct reg *resolved;      /* want with the connection's local address, while connected */
	bool stopping, done;

	enum { C_DOWN, C_CONNECTING, C_UP } conn;
	char *conn_host;
	uint16_t conn_port;
	uint8_t local[16];
	uint64_t conn_deadline, retry_at;
	unsigned failures;
	struct isns_rx rx;

	struct req *q;             /* the requests of one step, sent in order */
	size_t nq, qi;
	size_t tx_off;             /* of q[qi].out */
	bool awaiting;
	uint64_t answer_deadline;
	uint16_t xid;
	struct isns_out esi_tx;    /* an ESI answered on this connection (a server may ask here) */
	size_t esi_off;
	struct reg *pending;       /* `have` once the queue is done */

	struct reg *have;
	bool stale;                /* the server may hold other than `have`: the next registration replaces */
	char *have_host;
	uint16_t have_port;
	uint32_t granted_period;
	bool esi_refused, logged_esi_refused;
	char last_error[200];      /* isns.status: the last failure, and when; the last registration */
	uint64_t last_error_ms, registered_ms;
	uint64_t next_check;
	size_t check_idx;

	char *dd_name;             /* the discovery domain joined (or being joined) */
	uint32_t dd_id;            /* 0: not known */
	char **dd_members;
	size_t ndd_members;
	uint64_t dd_retry_at;
};

static uint64_t check_ms(const struct isns_eng *e)
{
	uint64_t period = e->have ? e->have->reg_period : 900;
	if (e->granted_period && e->granted_period < period)
		period = e->granted_period;
	uint64_t ms = period * 1000 / 3;
	return ms < 1000 ? 1000 : ms > ISNS_CHECK_MAX_MS ? ISNS_CHECK_MAX_MS : ms;
}

static void free_names(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void reg_free(struct reg *r)
{
	if (!r)
		return;
	free(r->eid);
	free(r->portals);
	for (size_t i = 0; i < r->nnodes; i++) {
		free(r->nodes[i].name);
		free(r->nodes[i].alias);
		free(r->nodes[i].pgs);
	}
	free(r->nodes);
	free(r);
}

static void queue_clear(struct isns_eng *e)
{
	for (size_t i = 0; i < e->nq; i++) {
		isns_out_free(&e->q[i].out);
		free_names(e->q[i].names, e->q[i].nnames);
	}
	free(e->q);
	e->q = NULL;
	e->nq = e->qi = e->tx_off = 0;
	e->awaiting = false;
	reg_free(e->pending);
	e->pending = NULL;
}

static void dd_clear(struct isns_eng *e)
{
	free(e->dd_name);
	free_names(e->dd_members, e->ndd_members);
	e->dd_name = NULL;
	e->dd_members = NULL;
	e->ndd_members = 0;
	e->dd_id = 0;
}

static const char *server_name(const char *host, uint16_t port, char *buf, size_t n)
{
	netaddr_join(buf, n, host ? host : "?", port);
	return buf;
}

/* ------------------------------------------------------------------------ */
/* Resolving and comparing. */

static const uint8_t v4mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

static struct reg *resolve(const struct isns_eng *e)
{
	const struct isns_want *w = e->want;
	struct reg *r = calloc(1, sizeof(*r));
	long *map = calloc(w->nportals ? w->nportals : 1, sizeof(*map));
	if (!r || !map)
		goto nomem;
	r->eid = strdup(w->eid);
	r->portals = calloc(w->nportals ? w->nportals : 1, sizeof(*r->portals));
	r->nodes = calloc(w->nnodes ? w->nnodes : 1, sizeof(*r->nodes));
	if (!r->eid || !r->portals || !r->nodes)
		goto nomem;
	r->reg_period = w->reg_period;
	if (w->esi_interval && w->esi_port && !e->esi_refused) {
		r->esi_interval = w->esi_interval;
		r->esi_port = w->esi_port;
	}
	bool local_v4 = !memcmp(e->local, v4mapped, 12);
	for (size_t i = 0; i < w->nportals; i++) {
		struct isns_portal p = w->portals[i];
		map[i] = -1;
		if (p.wild) {
			/* A wildcard listens on every address of its family (isertd's "::" is IPv6 only): name the
			 * one the server sees this host by, when it is of that family. */
			if ((p.wild == AF_INET) != local_v4)
				continue;
			memcpy(p.ip, e->local, 16);
			p.wild = 0;
		}
		size_t k;
		for (k = 0; k < r->nportals; k++)
			if (r->portals[k].port == p.port && !memcmp(r->portals[k].ip, p.ip, 16))
				break;
		if (k == r->nportals)
			r->portals[r->nportals++] = p;
		map[i] = (long)k;
	}
	for (size_t i = 0; i < w->nnodes; i++) {
		const struct isns_node *wn = &w->nodes[i];
		struct isns_node *n = &r->nodes[r->nnodes];
		n->name = strdup(wn->name);
		n->alias = wn->alias ? strdup(wn->alias) : NULL;
		n->pgs = calloc(wn->npgs ? wn->npgs : 1, sizeof(*n->pgs));
		r->nnodes++;
		if (!n->name || !n->pgs || (wn->alias && !n->alias))
			goto nomem;
		for (size_t j = 0; j < wn->npgs; j++) {
			long k = map[wn->pgs[j].portal];
			bool dup = k < 0;
			for (size_t m = 0; !dup && m < n->npgs; m++)
				dup = n->pgs[m].portal == (uint32_t)k;
			if (!dup)
				n->pgs[n->npgs++] = (struct isns_pg){ (uint32_t)k, wn->pgs[j].tag };
		}
		if (!n->npgs) { /* its only portals were wildcards of the other family */
			free(n->name);
			free(n->alias);
			free(n->pgs);
			r->nnodes--;
		}
	}
	free(map);
	return r;
nomem:
	free(map);
	reg_free(r);
	log_err("iSNS: out of memory");
	return NULL;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static long find_portal(const struct reg *r, const struct isns_portal *p)
{
	for (size_t i = 0; i < r->nportals; i++)
		if (r->portals[i].port == p->port && !memcmp(r->portals[i].ip, p->ip, 16))
			return (long)i;
	return -1;
}

static const struct isns_node *find_node(const struct reg *r, const char *name)
{
	for (size_t i = 0; i < r->nnodes; i++)
		if (!strcmp(r->nodes[i].name, name))
			return &r->nodes[i];
	return NULL;
}

/* n's tag on portal p of r (0: none). */
static uint16_t tag_on(const struct isns_node *n, uint32_t p)
{
	for (size_t i = 0; i < n->npgs; i++)
		if (n->pgs[i].portal == p)
			return n->pgs[i].tag;
	return 0;
}

static bool same_entity(const struct reg *a, const struct reg *b)
{
	return !strcmp(a->eid, b->eid) && a->esi_interval == b->esi_interval && a->esi_port == b->esi_port &&
	       a->reg_period == b->reg_period;
}

/* Does node n of b (after) differ from its namesake o of a (before) on the portals both have? */
static bool node_changed(const struct reg *a, const struct isns_node *o, const struct reg *b, const struct isns_node *n)
{
	if (!same_str(o->alias, n->alias))
		return true;
	for (size_t p = 0; p < b->nportals; p++) {
		long q = find_portal(a, &b->portals[p]);
		if (q >= 0 && tag_on(o, (uint32_t)q) != tag_on(n, (uint32_t)p))
			return true;
	}
	return false;
}

static bool same_reg(const struct reg *a, const struct reg *b)
{
	if (!same_entity(a, b) || a->nportals != b->nportals || a->nnodes != b->nnodes)
		return false;
	for (size_t i = 0; i < b->nportals; i++)
		if (find_portal(a, &b->portals[i]) < 0)
			return false;
	for (size_t i = 0; i < b->nnodes; i++) {
		const struct isns_node *o = find_node(a, b->nodes[i].name);
		if (!o || node_changed(a, o, b, &b->nodes[i]))
			return false;
	}
	return true;
}

/* ------------------------------------------------------------------------ */
/* Building requests. */

static struct req *req_new(struct isns_eng *e, enum req_kind kind, uint16_t func, uint16_t flags)
{
	struct req *v = realloc(e->q, (e->nq + 1) * sizeof(*v));
	if (!v)
		return NULL;
	e->q = v;
	struct req *r = &v[e->nq];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->xid = ++e->xid;
	if (isns_out_init(&r->out, func, flags, r->xid))
		return NULL;
	e->nq++;
	return r;
}

/* Source, message key (EID, or none), delimiter. */
static void put_prefix(struct isns_out *o, const char *source, const char *eid)
{
	isns_put_str(o, ISNS_T_ISCSI_NAME, source);
	if (eid)
		isns_put_str(o, ISNS_T_EID, eid);
	isns_put_nil(o, ISNS_T_DELIMITER);
}

static void put_port(struct isns_out *o, uint32_t tag, uint16_t port)
{
	isns_put_u32(o, tag, port); /* bit 16 clear: TCP */
}

/* A node, and a PG for each of the portals kept (its tag, or NULL: no path there). */
static void put_node(struct isns_out *o, const struct reg *r, const struct isns_node *n, const struct reg *kept)
{
	isns_put_str(o, ISNS_T_ISCSI_NAME, n->name);
	isns_put_u32(o, ISNS_T_NODE_TYPE, ISNS_NODE_TARGET);
	if (n->alias)
		isns_put_str(o, ISNS_T_ALIAS, n->alias);
	for (size_t p = 0; kept && p < r->nportals; p++) {
		if (find_portal(kept, &r->portals[p]) < 0)
			continue;
		uint16_t tag = tag_on(n, (uint32_t)p);
		if (tag)
			isns_put_u32(o, ISNS_T_PGT, tag);
		else
			isns_put_nil(o, ISNS_T_PGT);
		isns_put_ip(o, ISNS_T_PG_IP, r->portals[p].ip);
		put_port(o, ISNS_T_PG_PORT, r->portals[p].port);
	}
}

/* A portal (with its ESI port), and a PG for each node of r. */
static void put_portal(struct isns_out *o, const struct reg *r, size_t p)
{
	isns_put_ip(o, ISNS_T_PORTAL_IP, r->portals[p].ip);
	put_port(o, ISNS_T_PORTAL_PORT, r->portals[p].port);
	if (r->esi_port) {
		isns_put_u32(o, ISNS_T_ESI_INTERVAL, r->esi_interval);
		isns_put_u32(o, ISNS_T_ESI_PORT, r->esi_port);
	}
	for (size_t i = 0; i < r->nnodes; i++) {
		uint16_t tag = tag_on(&r->nodes[i], (uint32_t)p);
		if (tag)
			isns_put_u32(o, ISNS_T_PGT, tag);
		else
			isns_put_nil(o, ISNS_T_PGT);
		isns_put_str(o, ISNS_T_PG_NAME, r->nodes[i].name);
	}
}

/* Messages of one kind filled item by item: one that is full is sent and the next one begun. */
struct packer {
	struct isns_eng *e;
	enum req_kind kind;
	uint16_t func, flags;
	const char *source, *eid;
	const struct reg *entity;  /* the first message carries the entity's attributes (a whole registration) */
	struct req *cur;
	size_t prefix;             /* the length before the first item */
	bool nomem;
};

static bool pack_begin(struct packer *k)
{
	k->cur = req_new(k->e, k->kind, k->func, k->flags);
	if (!k->cur)
		return !(k->nomem = true);
	put_prefix(&k->cur->out, k->source, k->eid);
	if (k->entity) {
		isns_put_str(&k->cur->out, ISNS_T_EID, k->entity->eid);
		isns_put_u32(&k->cur->out, ISNS_T_ENTITY_PROTOCOL, ISNS_ENTITY_ISCSI);
		isns_put_u32(&k->cur->out, ISNS_T_REG_PERIOD, k->entity->reg_period);
		k->entity = NULL;
	}
	k->flags &= (uint16_t)~ISNS_F_REPLACE; /* only the first of a whole registration replaces */
	k->prefix = k->cur->out.len;
	return true;
}

/* Add one item (put(o, arg) writes it); false when it cannot fit even alone (logged as what). */
static bool pack(struct packer *k, void (*put)(struct isns_out *, const void *), const void *arg, const char *what)
{
	if (k->nomem || (!k->cur && !pack_begin(k)))
		return false;
	size_t mark = k->cur->out.len;
	put(&k->cur->out, arg);
	if (!k->cur->out.full)
		return true;
	k->cur->out.full = false;
	k->cur->out.len = mark;
	if (mark == k->prefix) {
		log_err("iSNS: %s does not fit in one iSNS message (%u bytes): not registered", what, ISNS_MAX_PAYLOAD);
		return false;
	}
	isns_out_finish(&k->cur->out);
	if (!pack_begin(k))
		return false;
	put(&k->cur->out, arg);
	if (k->cur->out.full) {
		k->cur->out.full = false;
		k->cur->out.len = k->prefix;
		log_err("iSNS: %s does not fit in one iSNS message (%u bytes): not registered", what, ISNS_MAX_PAYLOAD);
		return false;
	}
	return true;
}

static void pack_end(struct packer *k)
{
	if (k->cur)
		isns_out_finish(&k->cur->out);
	k->cur = NULL;
}

struct node_item {
	const struct reg *r, *kept;
	const struct isns_node *n;
};
static void put_node_item(struct isns_out *o, const void *arg)
{
	const struct node_item *it = arg;
	put_node(o, it->r, it->n, it->kept);
}

struct portal_item {
	const struct reg *r;
	size_t p;
};
static void put_portal_item(struct isns_out *o, const void *arg)
{
	const struct portal_item *it = arg;
	put_portal(o, it->r, it->p);
}

static void put_name_item(struct isns_out *o, const void *arg)
{
	isns_put_str(o, ISNS_T_ISCSI_NAME, arg);
}

static void put_portal_key_item(struct isns_out *o, const void *arg)
{
	const struct isns_portal *p = arg;
	isns_put_ip(o, ISNS_T_PORTAL_IP, p->ip);
	put_port(o, ISNS_T_PORTAL_PORT, p->port);
}

static void put_member_item(struct isns_out *o, const void *arg)
{
	isns_put_str(o, ISNS_T_DD_MEMBER_NAME, arg);
}

/* The whole entity, replacing what the server has of it: nodes first, then portals naming every node. */
static void build_whole(struct isns_eng *e, const struct reg *r)
{
	struct packer k = { .e = e, .kind = RK_REG, .func = ISNS_DEV_ATTR_REG, .flags = ISNS_F_CLIENT | ISNS_F_REPLACE,
			    .source = r->nodes[0].name, .eid = r->eid, .entity = r };
	char what[300];
	for (size_t i = 0; i < r->nnodes; i++) {
		struct node_item it = { r, NULL, &r->nodes[i] };
		snprintf(what, sizeof(what), "target %s", r->nodes[i].name);
		pack(&k, put_node_item, &it, what);
	}
	for (size_t p = 0; p < r->nportals; p++) {
		struct portal_item it = { r, p };
		char ip[64], at[NETADDR_LEN];
		netaddr_join(at, sizeof(at), isns_ip_str(r->portals[p].ip, ip, sizeof(ip)), r->portals[p].port);
		snprintf(what, sizeof(what), "portal %s with a portal group for each of %zu targets", at, r->nnodes);
		pack(&k, put_portal_item, &it, what);
	}
	pack_end(&k);
}

/* What differs from a to b (same entity, a node in both as the source). */
static void build_diff(struct isns_eng *e, const struct reg *a, const struct reg *b, const char *source)
{
	struct packer k = { .e = e, .kind = RK_DEREG, .func = ISNS_DEV_DEREG, .flags = ISNS_F_CLIENT, .source = source };
	char what[300];
	/* Targets that left, and those whose alias went (an attribute is not removed by an update). */
	for (size_t i = 0; i < a->nnodes; i++) {
		const struct isns_node *n = find_node(b, a->nodes[i].name);
		if (!n || (a->nodes[i].alias && !n->alias))
			pack(&k, put_name_item, a->nodes[i].name, "a name");
	}
	for (size_t p = 0; p < a->nportals; p++)
		if (find_portal(b, &a->portals[p]) < 0)
			pack(&k, put_portal_key_item, &a->portals[p], "a portal");
	pack_end(&k);
	k = (struct packer){ .e = e, .kind = RK_REG, .func = ISNS_DEV_ATTR_REG, .flags = ISNS_F_CLIENT, .source = source,
			     .eid = b->eid };
	for (size_t i = 0; i < b->nnodes; i++) {
		const struct isns_node *o = find_node(a, b->nodes[i].name);
		if (o && !(o->alias && !b->nodes[i].alias) && !node_changed(a, o, b, &b->nodes[i]))
			continue;
		struct node_item it = { b, a, &b->nodes[i] };
		snprintf(what, sizeof(what), "target %s", b->nodes[i].name);
		pack(&k, put_node_item, &it, what);
	}
	for (size_t p = 0; p < b->nportals; p++) {
		if (find_portal(a, &b->portals[p]) >= 0)
			continue;
		struct portal_item it = { b, p };
		snprintf(what, sizeof(what), "a portal with a portal group for each of %zu targets", b->nnodes);
		pack(&k, put_portal_item, &it, what);
	}
	pack_end(&k);
}

static void build_dereg_all(struct isns_eng *e)
{
	struct req *q = req_new(e, RK_DEREG_ALL, ISNS_DEV_DEREG, ISNS_F_CLIENT);
	if (!q)
		return;
	put_prefix(&q->out, e->have->nodes[0].name, NULL);
	isns_put_str(&q->out, ISNS_T_EID, e->have->eid);
	isns_out_finish(&q->out);
}

static void build_check(struct isns_eng *e)
{
	const struct isns_node *n = &e->have->nodes[e->check_idx++ % e->have->nnodes];
	struct req *q = req_new(e, RK_CHECK, ISNS_DEV_ATTR_QRY, ISNS_F_CLIENT);
	if (!q)
		return;
	if ((q->names = calloc(1, sizeof(char *))) && (q->names[0] = strdup(n->name)))
		q->nnames = 1;
	isns_put_str(&q->out, ISNS_T_ISCSI_NAME, n->name);
	isns_put_str(&q->out, ISNS_T_ISCSI_NAME, n->name);
	isns_put_nil(&q->out, ISNS_T_DELIMITER);
	static const uint32_t asked[] = { ISNS_T_EID, ISNS_T_ISCSI_NAME, ISNS_T_PG_NAME, ISNS_T_PG_IP, ISNS_T_PG_PORT,
					  ISNS_T_PGT };
	for (size_t i = 0; i < ARRAY_SIZE(asked); i++)
		isns_put_nil(&q->out, asked[i]);
	isns_out_finish(&q->out);
}

/* ------------------------------------------------------------------------ */
/* Discovery domain: joined by name; its ID found by a query (open-isns shows a domain to its members). */

static bool in_list(char *const *v, size_t n, const char *s)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

static void dd_request(struct isns_eng *e, enum req_kind kind, char **names, size_t n)
{
	const char *src = e->have->nodes[0].name;
	uint16_t func = kind == RK_DD_FIND ? ISNS_DEV_ATTR_QRY : kind == RK_DD_REMOVE ? ISNS_DD_DEREG : ISNS_DD_REG;
	struct req *q = req_new(e, kind, func, ISNS_F_CLIENT);
	if (!q) {
		free_names(names, n);
		return;
	}
	q->names = names;
	q->nnames = n;
	isns_put_str(&q->out, ISNS_T_ISCSI_NAME, src);
	if (kind == RK_DD_FIND)
		isns_put_str(&q->out, ISNS_T_DD_NAME, e->dd_name);
	else if (kind != RK_DD_CREATE)
		isns_put_u32(&q->out, ISNS_T_DD_ID, e->dd_id);
	isns_put_nil(&q->out, ISNS_T_DELIMITER);
	if (kind == RK_DD_FIND) {
		isns_put_nil(&q->out, ISNS_T_DD_ID);
		isns_put_nil(&q->out, ISNS_T_DD_NAME);
	} else if (kind == RK_DD_CREATE) {
		isns_put_str(&q->out, ISNS_T_DD_NAME, e->dd_name);
	}
	/* Thousands of targets: the list is cut where the message is full, a later step takes the rest. */
	for (size_t i = 0; i < n; i++) {
		put_member_item(&q->out, names[i]);
		if (q->out.full) {
			q->out.full = false;
			for (size_t j = i; j < n; j++)
				free(names[j]);
			q->nnames = i;
			break;
		}
	}
	isns_out_finish(&q->out);
}

/* Our targets not yet members (adding), or members that are no longer ours: as many as one message holds. */
static char **names_where(struct isns_eng *e, bool adding, size_t *out_n)
{
	const struct reg *r = e->have;
	size_t cap = adding ? r->nnodes : e->ndd_members, n = 0;
	char **v = calloc(cap ? cap : 1, sizeof(*v));
	/* At most what one message holds: about 250 names of 255 bytes. */
	size_t budget = ISNS_MAX_PAYLOAD - 1024;
	for (size_t i = 0; v && i < cap; i++) {
		const char *s = adding ? r->nodes[i].name : e->dd_members[i];
		bool take = adding ? !in_list(e->dd_members, e->ndd_members, s) : !find_node(r, s);
		size_t need = 8 + ((strlen(s) + 4) & ~(size_t)3);
		if (!take || need > budget)
			continue;
		if (!(v[n] = strdup(s)))
			break;
		budget -= need;
		n++;
	}
	*out_n = n;
	return v;
}

/* The next step towards the domain wanted; false when there is none. */
static bool dd_step(struct isns_eng *e, uint64_t now)
{
	const char *want = e->want ? e->want->dd : NULL;
	if (now < e->dd_retry_at)
		return false;
	if (e->dd_name && !same_str(e->dd_name, want)) {
		/* Leave the one configured before: its members that are ours. */
		if (!e->dd_id || !e->ndd_members) {
			dd_clear(e);
			return dd_step(e, now);
		}
		char **v = calloc(e->ndd_members, sizeof(*v));
		size_t n = 0;
		for (size_t i = 0; v && i < e->ndd_members; i++)
			if ((v[n] = strdup(e->dd_members[i])))
				n++;
		dd_request(e, RK_DD_REMOVE, v, n);
		return true;
	}
	if (!want)
		return false;
	if (!e->dd_name && !(e->dd_name = strdup(want)))
		return false;
	if (!e->dd_id) {
		dd_request(e, RK_DD_FIND, NULL, 0);
		return true;
	}
	size_t n;
	char **v = names_where(e, true, &n);
	if (n) {
		dd_request(e, RK_DD_ADD, v, n);
		return true;
	}
	free(v);
	v = names_where(e, false, &n);
	if (n) {
		dd_request(e, RK_DD_REMOVE, v, n);
		return true;
	}
	free(v);
	return false;
}

/* The domain as wanted: nothing for dd_step to do but wait. */
static bool dd_settled(const struct isns_eng *e)
{
	const char *want = e->want ? e->want->dd : NULL;
	if (!same_str(e->dd_name, want))
		return false;
	if (!want)
		return true;
	if (!e->dd_id || !e->have)
		return false;
	for (size_t i = 0; i < e->have->nnodes; i++)
		if (!in_list(e->dd_members, e->ndd_members, e->have->nodes[i].name))
			return false;
	for (size_t i = 0; i < e->ndd_members; i++)
		if (!find_node(e->have, e->dd_members[i]))
			return false;
	return true;
}

static void dd_members_add(struct isns_eng *e, char **names, size_t n)
{
	char **v = realloc(e->dd_members, (e->ndd_members + n + 1) * sizeof(*v));
	if (!v)
		return;
	e->dd_members = v;
	for (size_t i = 0; i < n; i++)
		if (!in_list(v, e->ndd_members, names[i]) && (v[e->ndd_members] = strdup(names[i])))
			e->ndd_members++;
}

static void dd_members_remove(struct isns_eng *e, char **names, size_t n)
{
	size_t k = 0;
	for (size_t i = 0; i < e->ndd_members; i++) {
		if (in_list(names, n, e->dd_members[i]))
			free(e->dd_members[i]);
		else
			e->dd_members[k++] = e->dd_members[i];
	}
	e->ndd_members = k;
}

/* ------------------------------------------------------------------------ */
/* The connection. */

static void connection_close(struct isns_eng *e)
{
	if (e->conn != C_DOWN)
		e->ops->close(e->ctx);
	e->conn = C_DOWN;
	isns_rx_reset(&e->rx);
	isns_out_free(&e->esi_tx);
	e->esi_off = 0;
	queue_clear(e);
	reg_free(e->resolved);
	e->resolved = NULL;
}

static bool want_nodes(const struct isns_eng *e)
{
	return e->want && e->want->nnodes && !e->stopping;
}

/*
 * `have` must be deregistered first: the configuration dropped it, moved it
 * to another server or another entity (whose registration would be refused
 * while these nodes belong to the old one), or isertd stops.
 */
static bool leaving(const struct isns_eng *e)
{
	return e->have && (!want_nodes(e) || strcmp(e->want->host, e->have_host) || e->want->port != e->have_port ||
			   strcmp(e->want->eid, e->have->eid));
}

static bool target_server(const struct isns_eng *e, const char **host, uint16_t *port)
{
	if (e->conn == C_UP && e->qi < e->nq) {
		/* what was begun is finished there (a registration answered is one to deregister) */
		*host = e->conn_host;
		*port = e->conn_port;
		return true;
	}
	if (leaving(e)) {
		*host = e->have_host;
		*port = e->have_port;
		return true;
	}
	if (!want_nodes(e))
		return false;
	*host = e->want->host;
	*port = e->want->port;
	return true;
}

/*
 * The one path of every failure and every answer not accepted: counted,
 * logged with why (a line per attempt, so the backoff paces the log too),
 * and the time of the next attempt, 1 s doubling to 30 s with the failures
 * in a row.
 */
static uint64_t backoff(struct isns_eng *e, uint64_t now, const char *why)
{
	char srv[96];
	uint64_t delay = ISNS_BACKOFF_MIN_MS;
	for (unsigned i = 0; i < e->failures && delay < ISNS_BACKOFF_MAX_MS; i++)
		delay *= 2;
	delay = MIN(delay, (uint64_t)ISNS_BACKOFF_MAX_MS);
	e->failures++;
	log_warn("iSNS server %s: %s; trying again in %llu s", server_name(e->conn_host, e->conn_port, srv, sizeof(srv)),
		 why, (unsigned long long)(delay / 1000));
	snprintf(e->last_error, sizeof(e->last_error), "%.199s", why);
	e->last_error_ms = now ? now : 1;
	return now + delay;
}

/* A failure of the connection or the registration: closed, and all of it again after the backoff. */
static void fail(struct isns_eng *e, uint64_t now, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(struct isns_eng *e, uint64_t now, const char *fmt, ...)
{
	char why[512], srv[96];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	const char *h = e->conn_host;
	uint16_t p = e->conn_port;
	bool was_leaving = leaving(e) && e->have_host && h && !strcmp(h, e->have_host) && p == e->have_port;
	connection_close(e);
	if (was_leaving) {
		/* Nothing more can be done for a registration left behind: it expires on the server. */
		log_warn("iSNS server %s: %s; entity %s not deregistered there", server_name(h, p, srv, sizeof(srv)), why,
			 e->have->eid);
		reg_free(e->have);
		e->have = NULL;
		e->stale = false;
		dd_clear(e);
		e->retry_at = now;
		return;
	}
	if (e->have)
		e->stale = true;
	e->retry_at = backoff(e, now, why);
}

void isns_eng_connected(struct isns_eng *e, const uint8_t local[16], uint64_t now)
{
	if (e->conn != C_CONNECTING)
		return;
	e->conn = C_UP;
	memcpy(e->local, local, 16);
	char srv[96];
	log_debug("iSNS server %s: connected", server_name(e->conn_host, e->conn_port, srv, sizeof(srv)));
	(void)now;
}

void isns_eng_down(struct isns_eng *e, const char *why, uint64_t now)
{
	if (e->conn == C_DOWN)
		return;
	fail(e, now, "%s", why);
}

/* ------------------------------------------------------------------------ */
/* Answers. */

static void install(struct isns_eng *e, uint64_t now)
{
	char srv[96];
	bool first = !e->have || e->stale;
	reg_free(e->have);
	e->have = e->pending;
	e->pending = NULL;
	e->stale = false;
	free(e->have_host);
	e->have_host = strdup(e->conn_host);
	e->have_port = e->conn_port;
	e->next_check = now + check_ms(e);
	e->registered_ms = now ? now : 1;
	if (first)
		dd_clear(e); /* after a whole registration, the domain is looked up again */
	log_info("iSNS server %s: entity %s registered: %zu target%s, %zu portal%s%s", server_name(e->conn_host,
		 e->conn_port, srv, sizeof(srv)), e->have->eid, e->have->nnodes, e->have->nnodes == 1 ? "" : "s",
		 e->have->nportals, e->have->nportals == 1 ? "" : "s", e->have->esi_port ? ", ESI answered" : "");
}

/* The check's answer: does the server still hold the node, its entity and its portal groups? */
static bool check_holds(struct isns_eng *e, const struct isns_msg *m, const char *name, char *why, size_t n)
{
	const struct isns_node *node = e->have ? find_node(e->have, name) : NULL;
	const char *s;
	bool eid = false, found = false;
	size_t got = 0;
	if (!node) {
		why[0] = 0;
		return true; /* it left meanwhile */
	}
	/* PG objects: name, address, port, tag, in that order (as RFC 4171 lists them). */
	const char *pg_name = NULL;
	uint8_t pg_ip[16];
	uint32_t pg_port = 0, v;
	bool have_ip = false, have_port = false;
	for (size_t i = isns_msg_oper(m); i < m->nattrs; i++) {
		const struct isns_attr *a = &m->attrs[i];
		switch (a->tag) {
		case ISNS_T_EID:
			eid = eid || (isns_attr_str(a, &s) && !strcmp(s, e->have->eid));
			break;
		case ISNS_T_ISCSI_NAME:
			found = found || (isns_attr_str(a, &s) && !strcmp(s, name));
			break;
		case ISNS_T_PG_NAME:
			pg_name = isns_attr_str(a, &s) ? s : NULL;
			have_ip = have_port = false;
			break;
		case ISNS_T_PG_IP:
			have_ip = isns_attr_ip(a, pg_ip);
			break;
		case ISNS_T_PG_PORT:
			have_port = isns_attr_u32(a, &pg_port);
			break;
		case ISNS_T_PGT:
			if (pg_name && !strcmp(pg_name, name) && have_ip && have_port && isns_attr_u32(a, &v) && v &&
			    !(pg_port & ~0xffffu)) {
				struct isns_portal p = { .port = (uint16_t)pg_port };
				memcpy(p.ip, pg_ip, 16);
				long k = find_portal(e->have, &p);
				if (k < 0 || tag_on(node, (uint32_t)k) != v) {
					char ip[64], at[NETADDR_LEN];
					netaddr_join(at, sizeof(at), isns_ip_str(pg_ip, ip, sizeof(ip)), p.port);
					snprintf(why, n, "it has a portal group %s tag %u for %s that isertd did not register", at,
						 v, name);
					return false;
				}
				got++;
			}
			pg_name = NULL;
			break;
		}
	}
	if (!eid || !found)
		snprintf(why, n, "its answer for target %s has %s", name, !found ? "no such node" : "no entity of ours");
	else if (got != node->npgs)
		snprintf(why, n, "it has %zu of the %zu portal groups of target %s", got, node->npgs, name);
	else
		return true;
	return false;
}

/* A discovery domain's request not accepted: the registration stays, the domain's step waits for the backoff. */
static void dd_refused(struct isns_eng *e, uint64_t now, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void dd_refused(struct isns_eng *e, uint64_t now, const char *fmt, ...)
{
	char why[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	e->dd_retry_at = backoff(e, now, why);
}

static void answer(struct isns_eng *e, struct isns_msg *m, uint64_t now)
{
	struct req *q = &e->q[e->qi];
	char st[64], fn[32], why[300];
	uint32_t v;
	if (m->func != (uint16_t)(get_be16(q->out.b + 2) | ISNS_RESPONSE)) {
		fail(e, now, "xid %u answered with %s", m->xid, isns_func_name(m->func, fn, sizeof(fn)));
		return;
	}
	isns_func_name(m->func, fn, sizeof(fn));
	isns_status_name(m->status, st, sizeof(st));
	e->awaiting = false;
	switch (q->kind) {
	case RK_REG:
		/* Once per configuration, and only when ESI was asked: not a failure, no backoff. */
		if (m->status == ISNS_ST_ESI_NOT_AVAILABLE && !e->esi_refused && e->pending && e->pending->esi_port) {
			log_warn("iSNS: the server refuses ESI (%s): portals registered without it; the registration is "
				 "kept by isertd's queries", st);
			e->esi_refused = true;
			queue_clear(e);
			if (e->have)
				e->stale = true;
			reg_free(e->resolved);
			e->resolved = resolve(e);
			return;
		}
		if (m->status) {
			fail(e, now, "%s: %s", fn, st);
			return;
		}
		for (size_t i = isns_msg_oper(m); i < m->nattrs; i++)
			if (m->attrs[i].tag == ISNS_T_REG_PERIOD && isns_attr_u32(&m->attrs[i], &v)) {
				e->granted_period = v;
				break;
			}
		break;
	case RK_DEREG:
		if (m->status && m->status != ISNS_ST_NO_SUCH_ENTRY) {
			fail(e, now, "%s: %s", fn, st);
			return;
		}
		break;
	case RK_DEREG_ALL: {
		char srv[96];
		if (m->status && m->status != ISNS_ST_NO_SUCH_ENTRY)
			log_warn("iSNS server %s: DevDereg of entity %s: %s", server_name(e->conn_host, e->conn_port, srv,
				 sizeof(srv)), e->have->eid, st);
		else
			log_info("iSNS server %s: entity %s deregistered", server_name(e->conn_host, e->conn_port, srv,
				 sizeof(srv)), e->have->eid);
		reg_free(e->have);
		e->have = NULL;
		e->stale = false;
		dd_clear(e);
		break;
	}
	case RK_CHECK:
		if (m->status)
			snprintf(why, sizeof(why), "it answers a query for target %s with %s", q->nnames ? q->names[0] : "?",
				 st);
		if (m->status || (q->nnames && !check_holds(e, m, q->names[0], why, sizeof(why)))) {
			fail(e, now, "this entity's registration is lost (%s)", why);
			return;
		}
		if (dd_settled(e))
			e->failures = 0; /* everything confirmed: the backoff starts from 1 s again */
		e->next_check = now + check_ms(e);
		break;
	case RK_DD_FIND: {
		uint32_t id = 0, found = 0;
		const char *s;
		if (m->status && m->status != ISNS_ST_NO_SUCH_ENTRY) {
			dd_refused(e, now, "%s for discovery domain '%s': %s", fn, e->dd_name, st);
			break;
		}
		for (size_t i = isns_msg_oper(m); !m->status && i < m->nattrs && !found; i++) {
			if (m->attrs[i].tag == ISNS_T_DD_ID && isns_attr_u32(&m->attrs[i], &v))
				id = v;
			else if (m->attrs[i].tag == ISNS_T_DD_NAME && isns_attr_str(&m->attrs[i], &s) &&
				 !strcmp(s, e->dd_name))
				found = id;
		}
		if (found) {
			e->dd_id = found;
			break;
		}
		/* Not a member yet (or no such domain): create it with every target. */
		size_t n;
		char **names = names_where(e, true, &n);
		e->qi++;
		e->tx_off = 0;
		dd_request(e, RK_DD_CREATE, names, n);
		return;
	}
	case RK_DD_CREATE:
		for (size_t i = isns_msg_oper(m); !m->status && i < m->nattrs; i++)
			if (m->attrs[i].tag == ISNS_T_DD_ID && isns_attr_u32(&m->attrs[i], &v) && v) {
				e->dd_id = v;
				break;
			}
		if (m->status || !e->dd_id) {
			dd_refused(e, now, "discovery domain '%s' could not be created (%s)%s", e->dd_name,
				   m->status ? st : "no DD_ID in the answer",
				   m->status == ISNS_ST_INVALID_REGISTRATION ? ": it exists and none of these targets is a "
										"member, so isertd cannot learn its ID; add "
										"one of them to it on the server" : "");
			break;
		}
		dd_members_add(e, q->names, q->nnames);
		log_info("iSNS: discovery domain '%s' created (DD_ID %u) with %zu target%s", e->dd_name, e->dd_id, q->nnames,
			 q->nnames == 1 ? "" : "s");
		break;
	case RK_DD_ADD:
		if (m->status) {
			if (m->status == ISNS_ST_INVALID_REGISTRATION)
				e->dd_id = 0; /* gone (a server that forgot it, an administrator): looked up again */
			dd_refused(e, now, "DDReg of discovery domain '%s': %s", e->dd_name, st);
		} else {
			dd_members_add(e, q->names, q->nnames);
			log_info("iSNS: discovery domain '%s' (DD_ID %u): %zu target%s made members", e->dd_name, e->dd_id,
				 q->nnames, q->nnames == 1 ? "" : "s");
		}
		break;
	case RK_DD_REMOVE:
		if (m->status && m->status != ISNS_ST_NO_SUCH_ENTRY && m->status != ISNS_ST_INVALID_REGISTRATION) {
			dd_refused(e, now, "DDDereg from discovery domain '%s': %s", e->dd_name, st);
			break;
		}
		dd_members_remove(e, q->names, q->nnames);
		if (!same_str(e->dd_name, e->want ? e->want->dd : NULL) && !e->ndd_members)
			dd_clear(e);
		break;
	}
	e->qi++;
	e->tx_off = 0;
}

static void esi_here(struct isns_eng *e, const struct isns_msg *m)
{
	if (e->esi_tx.b)
		return; /* one answer at a time: the server asks again */
	if (isns_esi_answer(m, isns_eng_eid(e), &e->esi_tx))
		isns_out_free(&e->esi_tx);
	e->esi_off = 0;
}

void isns_eng_input(struct isns_eng *e, const uint8_t *p, size_t n, uint64_t now)
{
	char err[256], fn[32];
	while (n && e->conn == C_UP) {
		struct isns_msg m;
		size_t used;
		int r = isns_rx_feed(&e->rx, p, n, &used, &m, err, sizeof(err));
		p += used;
		n -= used;
		if (r < 0) {
			fail(e, now, "%s", err);
			return;
		}
		if (!r)
			return;
		if (m.func == ISNS_ESI)
			esi_here(e, &m);
		else if (!(m.func & ISNS_RESPONSE))
			log_debug("iSNS: %s from the server ignored", isns_func_name(m.func, fn, sizeof(fn)));
		else if (!e->awaiting || e->qi >= e->nq || m.xid != e->q[e->qi].xid)
			log_debug("iSNS: %s xid %u answers no request in flight: ignored",
				  isns_func_name(m.func, fn, sizeof(fn)), m.xid);
		else
			answer(e, &m, now);
		isns_msg_free(&m);
	}
}

/* ------------------------------------------------------------------------ */
/* Steps. */

const uint8_t *isns_eng_output(struct isns_eng *e, size_t *n)
{
	*n = 0;
	if (e->conn != C_UP)
		return NULL;
	if (e->esi_tx.b && (!e->tx_off || e->qi >= e->nq)) {
		*n = e->esi_tx.len - e->esi_off;
		return e->esi_tx.b + e->esi_off;
	}
	if (e->qi >= e->nq || (e->awaiting && e->tx_off >= e->q[e->qi].out.len))
		return NULL;
	*n = e->q[e->qi].out.len - e->tx_off;
	return e->q[e->qi].out.b + e->tx_off;
}

void isns_eng_sent(struct isns_eng *e, size_t n, uint64_t now)
{
	if (e->esi_tx.b && (!e->tx_off || e->qi >= e->nq)) {
		e->esi_off += n;
		if (e->esi_off >= e->esi_tx.len) {
			isns_out_free(&e->esi_tx);
			e->esi_off = 0;
		}
		return;
	}
	if (e->qi >= e->nq)
		return;
	if (!e->awaiting) {
		e->awaiting = true;
		e->answer_deadline = now + ISNS_ANSWER_TIMEOUT_MS;
	}
	e->tx_off += n;
}

/* With the connection up and nothing in flight: the next request, if anything is to be done. */
static void plan(struct isns_eng *e, uint64_t now)
{
	if (e->qi < e->nq) {
		if (!e->awaiting) {
			e->awaiting = true;
			e->answer_deadline = now + ISNS_ANSWER_TIMEOUT_MS;
		}
		return;
	}
	if (e->nq) {
		struct reg *done = e->pending;
		e->pending = NULL;
		queue_clear(e);
		e->pending = done;
		if (e->pending)
			install(e, now);
	}
	if (leaving(e)) {
		build_dereg_all(e);
		plan(e, now);
		return;
	}
	if (!want_nodes(e))
		return;
	if (!e->resolved && !(e->resolved = resolve(e)))
		return;
	if (!e->resolved->nnodes)
		return; /* only wildcards of the other family: nothing to register from this connection */
	bool reg = true;
	if (!e->have || e->stale || !same_entity(e->have, e->resolved)) {
		e->stale = e->stale || e->have;
		build_whole(e, e->resolved);
	} else if (!same_reg(e->have, e->resolved)) {
		const char *source = NULL;
		for (size_t i = 0; i < e->resolved->nnodes && !source; i++)
			if (find_node(e->have, e->resolved->nodes[i].name))
				source = e->resolved->nodes[i].name;
		if (source) {
			build_diff(e, e->have, e->resolved, source);
		} else {
			e->stale = true; /* no target in common to speak for the entity: all of it anew */
			build_whole(e, e->resolved);
		}
	} else {
		reg = false;
		if (!dd_step(e, now) && now >= e->next_check)
			build_check(e);
	}
	if (reg) {
		/* what the server holds once these are answered */
		e->pending = e->resolved;
		e->resolved = NULL;
		if (!e->nq) { /* nothing could be written (too large, out of memory): logged; taken as it is */
			install(e, now);
			return;
		}
	}
	if (e->nq) {
		e->awaiting = true;
		e->answer_deadline = now + ISNS_ANSWER_TIMEOUT_MS;
	}
}

uint64_t isns_eng_tick(struct isns_eng *e, uint64_t now)
{
	const char *host = NULL;
	uint16_t port = 0;
	bool target = target_server(e, &host, &port);
	if (e->conn == C_UP && (!target || strcmp(host, e->conn_host) || port != e->conn_port)) {
		connection_close(e); /* done with this server */
		e->retry_at = now;
	}
	if (e->conn == C_DOWN) {
		if (!target) {
			e->done = e->stopping;
			return now + 3600 * 1000;
		}
		if (now < e->retry_at)
			return e->retry_at;
		free(e->conn_host);
		e->conn_host = strdup(host);
		e->conn_port = port;
		if (!e->conn_host)
			return now + 1000;
		e->conn = C_CONNECTING;
		e->conn_deadline = now + ISNS_CONNECT_TIMEOUT_MS;
		e->ops->connect(e->ctx, e->conn_host, e->conn_port);
		if (e->conn != C_CONNECTING)
			return now; /* refused at once (fail()) or up already: decide again */
	}
	if (e->conn == C_CONNECTING) {
		if (now >= e->conn_deadline) {
			fail(e, now, "no connection within %u s", ISNS_CONNECT_TIMEOUT_MS / 1000);
			return now;
		}
		return e->conn_deadline;
	}
	if (e->awaiting && now >= e->answer_deadline) {
		char fn[32];
		fail(e, now, "no answer to %s within %u s", isns_func_name(get_be16(e->q[e->qi].out.b + 2), fn, sizeof(fn)),
		     ISNS_ANSWER_TIMEOUT_MS / 1000);
		return now;
	}
	if (!e->awaiting)
		plan(e, now);
	if (e->conn != C_UP)
		return now;
	if (e->awaiting)
		return e->answer_deadline;
	if (!e->have && !want_nodes(e)) {
		/* nothing registered, nothing to register: no reason to keep the connection */
		connection_close(e);
		e->done = e->stopping;
		return now + 3600 * 1000;
	}
	uint64_t next = e->next_check;
	if (e->dd_retry_at > now && e->dd_retry_at < next)
		next = e->dd_retry_at;
	return next > now ? next : now + 1000;
}

/* ------------------------------------------------------------------------ */

struct isns_eng *isns_eng_new(const struct isns_io_ops *ops, void *ctx)
{
	struct isns_eng *e = calloc(1, sizeof(*e));
	if (e) {
		e->ops = ops;
		e->ctx = ctx;
	}
	return e;
}

void isns_eng_free(struct isns_eng *e)
{
	if (!e)
		return;
	connection_close(e);
	isns_want_free(e->want);
	reg_free(e->have);
	free(e->have_host);
	free(e->conn_host);
	dd_clear(e);
	free(e);
}

void isns_eng_want(struct isns_eng *e, struct isns_want *w, uint64_t now)
{
	bool esi_changed = !e->want || !w || e->want->esi_interval != w->esi_interval || e->want->esi_port != w->esi_port;
	isns_want_free(e->want);
	e->want = w;
	if (esi_changed)
		e->esi_refused = false; /* asked anew */
	reg_free(e->resolved);
	e->resolved = NULL;
	/* a new configuration is tried soon */
	e->retry_at = MIN(e->retry_at, now + ISNS_BACKOFF_MIN_MS);
	e->dd_retry_at = MIN(e->dd_retry_at, now + ISNS_BACKOFF_MIN_MS);
}

void isns_eng_stop(struct isns_eng *e, uint64_t now)
{
	e->stopping = true;
	if (e->conn != C_UP)
		e->retry_at = now; /* one last attempt, at once */
}

bool isns_eng_done(const struct isns_eng *e)
{
	return e->done;
}

const char *isns_eng_eid(const struct isns_eng *e)
{
	return e->have ? e->have->eid : e->want ? e->want->eid : NULL;
}

void isns_eng_report(const struct isns_eng *e, uint64_t now, struct isns_report *st)
{
	const struct reg *r = e->have ? e->have : e->resolved;
	st->registered = isns_eng_synced(e);
	if (e->conn_host)
		server_name(e->conn_host, e->conn_port, st->server, sizeof(st->server));
	else if (e->want)
		server_name(e->want->host, e->want->port, st->server, sizeof(st->server));
	snprintf(st->entity, sizeof(st->entity), "%s", isns_eng_eid(e) ? isns_eng_eid(e) : "");
	st->targets = r ? r->nnodes : e->want ? e->want->nnodes : 0;
	st->portals = r ? r->nportals : e->want ? e->want->nportals : 0;
	st->esi_port = r ? r->esi_port : 0;
	st->failures = e->failures;
	snprintf(st->last_error, sizeof(st->last_error), "%s", e->last_error);
	st->last_error_age_s = e->last_error_ms ? (int64_t)((now - e->last_error_ms) / 1000) : -1;
	st->registered_age_s = e->registered_ms ? (int64_t)((now - e->registered_ms) / 1000) : -1;
}

bool isns_eng_synced(const struct isns_eng *e)
{
	return e->have && !e->stale && e->conn == C_UP && !e->nq;
}

unsigned isns_eng_failures(const struct isns_eng *e)
{
	return e->failures;
}

int isns_eng_awaiting(const struct isns_eng *e)
{
	return e->awaiting && e->qi < e->nq ? e->q[e->qi].xid : -1;
}
