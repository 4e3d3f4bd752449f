/*
 * Carrying the running configuration to another one while sessions run.
 * Everything that can fail is done first, before anything is visible:
 * backstores that are new (or replaced) are opened, portals that are new
 * start listening, files that grow are grown.  Then, under the
 * configuration lock, the new document takes the running one's place in
 * one step (logins and discovery read it under that lock).  Then what
 * follows from it: listeners of portals that left stop, every session
 * takes its LUN map again (REPORTED LUNS DATA HAS CHANGED where it
 * changed, closed where its initiator is no longer admitted), LUs whose
 * backstore left are freed once no task and no map points at them.
 * Objects that did not change keep their sessions untouched.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/iscsi/iscsi.h"

#define DRAIN_TIMEOUT_MS 30000

/* LUs whose users did not go within DRAIN_TIMEOUT_MS: kept, never freed under them; freed at exit. */
struct retired {
	struct retired *next;
	struct cfg_backstore b;        /* only rt_bs and rt_lu are used */
};
static struct retired *retired;

/* ------------------------------------------------------------------------ */
/* The plan: what differs between two documents, as targetcli-like paths. */

static void step(json_object *plan, const char *op, const char *path, json_object *value)
{
	json_object *s = json_object_new_object();
	json_object_object_add(s, "op", json_object_new_string(op));
	json_object_object_add(s, "path", json_object_new_string(path));
	if (value)
		json_object_object_add(s, "value", value);
	json_object_array_add(plan, s);
}

/* The name an element of array `key` has in a path, or NULL when the array is a plain value. */
static bool elem_name(const char *key, json_object *e, char *out, size_t n)
{
	json_object *v, *w, *x;
	if (!json_object_is_type(e, json_type_object))
		return false;
	if (!strcmp(key, "backstores") && json_object_object_get_ex(e, "name", &v))
		snprintf(out, n, "%s", json_object_get_string(v));
	else if (!strcmp(key, "targets") && json_object_object_get_ex(e, "iqn", &v))
		snprintf(out, n, "%s", json_object_get_string(v));
	else if (!strcmp(key, "tpgs") && json_object_object_get_ex(e, "tag", &v))
		snprintf(out, n, "tpg%s", json_object_get_string(v));
	else if (!strcmp(key, "luns") && json_object_object_get_ex(e, "lun", &v))
		snprintf(out, n, "lun%s", json_object_get_string(v));
	else if (!strcmp(key, "mapped_luns") && json_object_object_get_ex(e, "mapped_lun", &v))
		snprintf(out, n, "mapped_lun%s", json_object_get_string(v));
	else if (!strcmp(key, "groups") && json_object_object_get_ex(e, "id", &v))
		snprintf(out, n, "group%s", json_object_get_string(v));
	else if (!strcmp(key, "acls") && json_object_object_get_ex(e, "initiator", &v))
		snprintf(out, n, "%s", json_object_get_string(v));
	else if (!strcmp(key, "portals") && json_object_object_get_ex(e, "ip", &v) &&
		 json_object_object_get_ex(e, "port", &w) && json_object_object_get_ex(e, "iser", &x))
		snprintf(out, n, "%s:%s%s", json_object_get_string(v), json_object_get_string(w),
			 json_object_get_boolean(x) ? "(iser)" : "");
	else
		return false;
	return true;
}

/* key: a's and b's name in their parent object, itself named parent (secrets are masked by their place). */
static void diff(json_object *plan, const char *path, const char *parent, const char *key, json_object *a,
		 json_object *b);

struct named {
	char name[300];
	json_object *e;
};

static int cmp_named(const void *x, const void *y)
{
	return strcmp(((const struct named *)x)->name, ((const struct named *)y)->name);
}

/* The elements of arr by name, sorted (NULL: an element without a name, or out of memory). */
static struct named *index_named(const char *key, json_object *arr, size_t *n)
{
	*n = json_object_array_length(arr);
	struct named *v = calloc(*n ? *n : 1, sizeof(*v));
	for (size_t i = 0; v && i < *n; i++) {
		v[i].e = json_object_array_get_idx(arr, i);
		if (!elem_name(key, v[i].e, v[i].name, sizeof(v[i].name))) {
			free(v);
			return NULL;
		}
	}
	if (v)
		qsort(v, *n, sizeof(*v), cmp_named);
	return v;
}

static json_object *find_named(const struct named *v, size_t n, const char *name)
{
	struct named k;
	snprintf(k.name, sizeof(k.name), "%s", name);
	const struct named *f = bsearch(&k, v, n, sizeof(*v), cmp_named);
	return f ? f->e : NULL;
}

/* Arrays of named objects (backstores, targets, LUNs, ...) are compared element by element,
 * matched by name (sorted: a configuration of thousands of LUNs diffs in milliseconds). */
static void diff_array(json_object *plan, const char *path, const char *key, json_object *a, json_object *b)
{
	char p[1024];
	size_t na, nb;
	struct named *va = index_named(key, a, &na), *vb = va ? index_named(key, b, &nb) : NULL;
	if (!va || !vb) {
		if (!json_object_equal(a, b))
			step(plan, "set", path, config_redacted(NULL, key, b));
		free(va);
		free(vb);
		return;
	}
	for (size_t i = 0; i < na; i++) {
		snprintf(p, sizeof(p), "%s/%s", path, va[i].name);
		json_object *f = find_named(vb, nb, va[i].name);
		if (!f)
			step(plan, "delete", p, NULL);
		else
			diff(plan, p, key, key, va[i].e, f);
	}
	for (size_t i = 0; i < nb; i++)
		if (!find_named(va, na, vb[i].name)) {
			snprintf(p, sizeof(p), "%s/%s", path, vb[i].name);
			step(plan, "create", p, NULL);
		}
	free(va);
	free(vb);
}

static void diff(json_object *plan, const char *path, const char *parent, const char *key, json_object *a,
		 json_object *b)
{
	char p[1024];
	if (json_object_is_type(a, json_type_object) && json_object_is_type(b, json_type_object)) {
		json_object_object_foreach(a, k, va)
		{
			json_object *vb;
			/* Paths as iserctl names objects: /iscsi/IQN/tpg1/acls/INI/mapped_lun0. */
			if ((!strcmp(k, "tpgs") && !strstr(path, "/alua/")) || !strcmp(k, "mapped_luns"))
				snprintf(p, sizeof(p), "%s", path);
			else
				snprintf(p, sizeof(p), "%s/%s", path, !strcmp(k, "targets") && !*path ? "iscsi" : k);
			if (!json_object_object_get_ex(b, k, &vb))
				step(plan, "delete", p, NULL);
			else
				diff(plan, p, key, k, va, vb);
		}
		json_object_object_foreach(b, k2, vb2)
		{
			json_object *va2;
			if (!json_object_object_get_ex(a, k2, &va2)) {
				snprintf(p, sizeof(p), "%s/%s", path, k2);
				step(plan, "set", p, config_redacted(key, k2, vb2));
			}
		}
		return;
	}
	if (json_object_is_type(a, json_type_array) && json_object_is_type(b, json_type_array)) {
		diff_array(plan, path, key, a, b);
		return;
	}
	if (!json_object_equal(a, b))
		step(plan, "set", path, config_redacted(parent, key, b));
}

/* ------------------------------------------------------------------------ */

struct bs_name {
	const char *name;
	size_t idx;
};

static int cmp_bs_name(const void *a, const void *b)
{
	return strcmp(((const struct bs_name *)a)->name, ((const struct bs_name *)b)->name);
}

/* c's backstores sorted by name (NULL: out of memory). */
static struct bs_name *index_bs(const struct config *c)
{
	struct bs_name *v = calloc(c->nbackstores ? c->nbackstores : 1, sizeof(*v));
	for (size_t i = 0; v && i < c->nbackstores; i++)
		v[i] = (struct bs_name){ c->backstores[i].name, i };
	if (v)
		qsort(v, c->nbackstores, sizeof(*v), cmp_bs_name);
	return v;
}

static struct cfg_backstore *find_bs(const struct config *c, const struct bs_name *v, const char *name,
				     size_t *idx)
{
	struct bs_name k = { name, 0 };
	const struct bs_name *f = bsearch(&k, v, c->nbackstores, sizeof(k), cmp_bs_name);
	if (!f)
		return NULL;
	*idx = f->idx;
	return &c->backstores[f->idx];
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Can the running backstore a serve as b (size and write_cache aside, which change in place)? */
static bool same_identity(const struct cfg_backstore *a, const struct cfg_backstore *b)
{
	return a->bs.type == b->bs.type && same_str(a->path, b->path) && a->bs.block_size == b->bs.block_size &&
	       a->bs.readonly == b->bs.readonly && a->bs.thin == b->bs.thin && same_str(a->serial, b->serial);
}

static bool bs_in_use(const struct config *c, size_t idx)
{
	for (size_t i = 0; i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++)
			for (size_t k = 0; k < c->targets[i].tpgs[j].nluns; k++)
				if (c->targets[i].tpgs[j].luns[k].backstore_index == idx)
					return true;
	return false;
}

/* Global keys a running isertd cannot take: they stay as they run, and the answer says so. */
static void keep_restart_keys(struct config *r, struct config *n, json_object *restart)
{
	if (n->reactors != r->reactors) {
		json_object_array_add(restart, json_object_new_string("reactors"));
		n->reactors = r->reactors;
	}
	if (n->poll_mode != r->poll_mode) {
		json_object_array_add(restart, json_object_new_string("poll_mode"));
		n->poll_mode = r->poll_mode;
	}
	if (n->iser_srq != r->iser_srq) {
		json_object_array_add(restart, json_object_new_string("iser_srq"));
		n->iser_srq = r->iser_srq;
	}
	if (n->tcp_keepalive_s != r->tcp_keepalive_s) {
		json_object_array_add(restart, json_object_new_string("tcp_keepalive"));
		n->tcp_keepalive_s = r->tcp_keepalive_s;
	}
	if (n->buffer_pool_mb != r->buffer_pool_mb) {
		json_object_array_add(restart, json_object_new_string("buffer_pool_mb"));
		n->buffer_pool_mb = r->buffer_pool_mb;
	}
	if (!same_str(n->admin_socket, r->admin_socket)) {
		json_object_array_add(restart, json_object_new_string("admin_socket"));
		free(n->admin_socket);
		n->admin_socket = r->admin_socket ? strdup(r->admin_socket) : NULL;
	}
	if (!same_str(n->state_dir, r->state_dir)) {
		json_object_array_add(restart, json_object_new_string("state_dir"));
		free(n->state_dir);
		n->state_dir = r->state_dir ? strdup(r->state_dir) : NULL;
	}
	if (!same_str(n->metrics, r->metrics)) {
		json_object_array_add(restart, json_object_new_string("metrics"));
		free(n->metrics);
		n->metrics = r->metrics ? strdup(r->metrics) : NULL;
	}
}

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Free the LUs of o's backstores that left, once nothing uses them (or keep them, retired). */
static void drain_and_close(struct config *o)
{
	size_t n = 0;
	struct scsi_lu **lus = calloc(o->nbackstores ? o->nbackstores : 1, sizeof(*lus));
	for (size_t i = 0; lus && i < o->nbackstores; i++)
		if (o->backstores[i].rt_lu)
			lus[n++] = o->backstores[i].rt_lu;
	if (!n) {
		free(lus);
		return;
	}
	char err[160] = "";
	int users = -1;
	for (uint64_t t0 = ms_now(); ms_now() - t0 < DRAIN_TIMEOUT_MS && !iscsi_g.stopping;) {
		users = admin_lu_users(lus, n, err, sizeof(err));
		if (users <= 0)
			break; /* none left, or the reactors could not be asked: then they stay open */
		struct timespec d = { 0, 20 * 1000000 };
		nanosleep(&d, NULL);
	}
	free(lus);
	for (size_t i = 0; i < o->nbackstores; i++) {
		struct cfg_backstore *b = &o->backstores[i];
		if (!b->rt_lu)
			continue;
		if (users == 0) {
			log_info("backstore '%s' closed: it left the configuration", b->name);
			iscsi_backstore_close(b);
			continue;
		}
		struct retired *r = calloc(1, sizeof(*r));
		log_warn("backstore '%s' left the configuration but %s; it stays open until isertd exits", b->name,
			 users < 0 ? err : "commands still use it");
		if (r) {
			r->b.rt_bs = b->rt_bs;
			r->b.rt_lu = b->rt_lu;
			r->next = retired;
			retired = r;
		}
		b->rt_bs = NULL;
		b->rt_lu = NULL;
	}
}

void iscsi_apply_free(void)
{
	while (retired) {
		struct retired *r = retired;
		retired = r->next;
		iscsi_backstore_close(&r->b);
		free(r);
	}
}

int iscsi_apply(struct config *n, bool dry_run, struct iscsi_apply_result *res, char *err, size_t errlen)
{
	struct config *r = iscsi_g.cfg;
	size_t nb = n->nbackstores;
	int rc = 0;
	res->plan = json_object_new_array();
	res->restart = json_object_new_array();
	res->sessions_closed = res->maps_changed = 0;
	keep_restart_keys(r, n, res->restart);
	json_object *ja = config_to_obj_compare(r), *jb = config_to_obj_compare(n);
	if (ja && jb)
		diff(res->plan, "", NULL, "", ja, jb);
	json_object_put(ja);
	json_object_put(jb);

	/* Backstores: carried over (same name and identity), grown, or opened anew. */
	long *from = calloc(nb ? nb : 1, sizeof(*from)); /* index in r, or -1: opened here */
	struct bs_name *rnames = index_bs(r);
	struct iscsi_portal **started = NULL;
	struct iscsi_alua_plan *alua = NULL;
	size_t nstarted = 0;
	if (!from || !rnames) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto undo;
	}
	for (size_t i = 0; i < nb; i++) {
		struct cfg_backstore *b = &n->backstores[i];
		size_t j;
		struct cfg_backstore *o = find_bs(r, rnames, b->name, &j);
		from[i] = -1;
		if (o && same_identity(o, b)) {
			char why[160];
			if (backstore_resize_rule(b->bs.type, o->bs.size, b->bs.size, backstore_size(o->rt_bs), why,
						  sizeof(why)) == BS_RESIZE_REFUSED) {
				snprintf(err, errlen, "backstore '%s': size: %s", b->name, why);
				rc = -EINVAL;
				goto undo;
			}
			from[i] = (long)j;
			continue;
		}
		if (o && bs_in_use(r, j) && bs_in_use(n, i)) {
			snprintf(err, errlen, "backstore '%s': its type, path, block_size, readonly, thin or serial cannot "
				 "change while LUNs use it: remove its LUNs first", b->name);
			rc = -EBUSY;
			goto undo;
		}
		if (!dry_run && (rc = iscsi_backstore_open(b, err, errlen)))
			goto undo;
	}
	/* Portals: new ones listen now (TCP refusing is an error; iSER as at start). */
	size_t nportals = 0;
	for (size_t i = 0; i < n->ntargets; i++)
		for (size_t j = 0; j < n->targets[i].ntpgs; j++)
			nportals += n->targets[i].tpgs[j].nportals;
	started = calloc(nportals ? nportals : 1, sizeof(*started));
	if (!started) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto undo;
	}
	for (size_t i = 0; !dry_run && i < n->ntargets; i++)
		for (size_t j = 0; j < n->targets[i].ntpgs; j++)
			for (size_t k = 0; k < n->targets[i].tpgs[j].nportals; k++) {
				const struct cfg_portal *p = &n->targets[i].tpgs[j].portals[k];
				struct iscsi_portal *ip = iscsi_g.portals;
				while (ip && !(ip->port == p->port && ip->iser == p->iser && !strcmp(ip->host, p->host)))
					ip = ip->next;
				if (ip && ip->l)
					continue;
				rc = iscsi_portal_listen(n, p, &ip, err, errlen);
				if (rc && p->iser) {
					log_err("%s; this portal is not served, the others are", err);
					err[0] = 0;
					rc = 0;
					continue;
				}
				if (rc)
					goto undo;
				started[nstarted++] = ip;
			}
	/* TPG objects for every portal group (found again or made). */
	for (size_t i = 0; !dry_run && i < n->ntargets; i++)
		for (size_t j = 0; j < n->targets[i].ntpgs; j++)
			if (!(n->targets[i].tpgs[j].rt = iscsi_tpg_get(n->targets[i].iqn, n->targets[i].tpgs[j].tag))) {
				snprintf(err, errlen, "out of memory");
				rc = -ENOMEM;
				goto undo;
			}
	if (dry_run)
		goto undo; /* nothing was opened; the plan is the answer */
	/* The ALUA groups, made now: after the switch they are only installed, which cannot fail. */
	if ((rc = iscsi_alua_prepare(r, n, &alua, err, errlen)))
		goto undo;
	/* Growing last: a file grown stays grown, the one thing not undone when a later step fails. */
	for (size_t i = 0; i < nb; i++) {
		if (from[i] < 0)
			continue;
		struct cfg_backstore *b = &n->backstores[i], *o = &r->backstores[from[i]];
		if (b->bs.write_cache != o->bs.write_cache) {
			backstore_set_write_cache(o->rt_bs, b->bs.write_cache);
			scsi_lu_set_write_cache(o->rt_lu, b->bs.write_cache);
		}
		uint64_t have = backstore_size(o->rt_bs);
		char why[160];
		if (backstore_resize_rule(b->bs.type, o->bs.size, b->bs.size, have, why, sizeof(why)) != BS_RESIZE_DO)
			continue;
		if ((rc = backstore_resize(o->rt_bs, b->bs.size, err, errlen)))
			goto undo;
		if (backstore_size(o->rt_bs) != have) {
			scsi_lu_capacity_changed(o->rt_lu);
			log_info("backstore '%s' grown from %llu to %llu bytes", b->name, (unsigned long long)have,
				 (unsigned long long)backstore_size(o->rt_bs));
		}
	}

	/* The switch. */
	pthread_rwlock_wrlock(&iscsi_g.cfg_lock);
	for (size_t i = 0; i < nb; i++)
		if (from[i] >= 0) {
			struct cfg_backstore *o = &r->backstores[from[i]];
			n->backstores[i].rt_bs = o->rt_bs;
			n->backstores[i].rt_lu = o->rt_lu;
			o->rt_bs = NULL;
			o->rt_lu = NULL;
		}
	for (size_t i = 0; i < r->ntargets; i++)
		for (size_t j = 0; j < r->targets[i].ntpgs; j++)
			if (r->targets[i].tpgs[j].rt)
				r->targets[i].tpgs[j].rt->cfg = NULL;
	for (size_t i = 0; i < n->ntargets; i++)
		for (size_t j = 0; j < n->targets[i].ntpgs; j++)
			n->targets[i].tpgs[j].rt->cfg = &n->targets[i].tpgs[j];
	struct config tmp = *r;
	*r = *n;
	*n = tmp;
	/* What the running configuration is called stays. */
	char *origin = r->origin;
	r->origin = n->origin;
	n->origin = origin;
	unsigned mode = r->file_mode;
	r->file_mode = n->file_mode;
	n->file_mode = mode;
	pthread_rwlock_unlock(&iscsi_g.cfg_lock);
	admit_set_limits(r->max_connections, r->max_connections_per_portal, r->max_connections_per_host,
			 r->max_sessions);
	admit_fd_budget(NULL, NULL); /* backstores and portals may have come or gone */

	/* What follows from it; n now holds what ran before. */
	for (struct iscsi_portal *ip = iscsi_g.portals; ip; ip = ip->next)
		if (ip->l && !config_has_portal(r, ip))
			iscsi_portal_unlisten(ip);
	char ferr[160] = "";
	if (admin_refresh_sessions(&res->sessions_closed, &res->maps_changed, ferr, sizeof(ferr)))
		log_warn("after the change: %s; sessions there keep their LUN maps until they log in again", ferr);
	iscsi_alua_commit(alua);
	drain_and_close(n);
	config_free(n);
	free(from);
	free(rnames);
	free(started);
	return 0;

undo:
	iscsi_alua_plan_free(alua);
	for (size_t i = 0; from && i < nb; i++)
		if (from[i] < 0)
			iscsi_backstore_close(&n->backstores[i]);
	for (size_t i = 0; i < nstarted; i++)
		if (!config_has_portal(r, started[i]))
			iscsi_portal_unlisten(started[i]);
	config_free(n);
	free(from);
	free(rnames);
	free(started);
	return rc;
}
