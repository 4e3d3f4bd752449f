/*
 * A change in two steps: the plan, then its execution.
 *
 * The plan says what a change does and refuses what it may not do, from
 * the documents and the sizes of the stores alone: nothing is opened,
 * nothing listens, no reactor is asked.  A dry run is the plan only (and
 * tests/unit/test_apply.c plans without reactors).
 *
 * The execution carries a whole new configuration out in the order that
 * keeps every failure harmless: everything that can fail first (stores
 * that are new or replaced are opened, new portals listen, the ALUA tables
 * are made, files that grow are grown); then, in one step under rt_lock,
 * the new document and its stores become the running ones
 * (target/runtime/); then what follows from it: listeners of portals that
 * left stop, every session takes its LUN map again (REPORTED LUNS DATA HAS
 * CHANGED where it changed, closed where its initiator is no longer
 * admitted), stores that left are closed once no task and no map uses
 * them.  Objects that did not change keep their sessions untouched.  One
 * object added (backstore.create, lun.add) is appended instead, with no
 * switch at all.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/control/control.h"
#include "target/iscsi/iscsi.h"
#include "target/control/https.h"
#include "target/isns/isns.h"
#include "target/scsi/alua/alua.h"

#define DRAIN_TIMEOUT_MS 30000

/* Stores whose users did not go within DRAIN_TIMEOUT_MS: kept (a reference each), never freed under them. */
struct retired {
	struct retired *next;
	struct rt_store *s;
};
static struct retired *retired;

struct apply_plan {
	json_object *steps;            /* what differs, as targetcli-like paths */
	json_object *restart;          /* global keys that differ and need a restart (kept as they run) */
	/* A whole configuration to switch to, and where each of its backstores comes from: */
	struct config *next;
	long *from;                    /* the running store it keeps (its index), or -1: opened anew */
	/* Or one object appended to the running configuration: */
	enum { ADD_NONE, ADD_BACKSTORE, ADD_LUN } add;
	struct cfg_backstore bs;
	struct cfg_lun lun;
	size_t ti, gi;
};

void apply_plan_free(struct apply_plan *p)
{
	if (!p)
		return;
	json_object_put(p->steps);
	json_object_put(p->restart);
	config_free(p->next);
	free(p->from);
	config_backstore_clear(&p->bs);
	free(p->lun.backstore);
	free(p);
}

json_object *apply_plan_steps(const struct apply_plan *p)
{
	return p->steps;
}

json_object *apply_plan_restart(const struct apply_plan *p)
{
	return p->restart;
}

static struct apply_plan *plan_new(char *err, size_t errlen)
{
	struct apply_plan *p = calloc(1, sizeof(*p));
	if (p && (p->steps = json_object_new_array()) && (p->restart = json_object_new_array()))
		return p;
	apply_plan_free(p);
	snprintf(err, errlen, "out of memory");
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The plan of a whole configuration. */

/* Global keys a running isertd cannot take (docs/admin.md): they stay as they run, and the answer says so. */
static const struct restart_key {
	const char *key;
	size_t off, size;              /* a number (size bytes), or size 0: a string (char *) */
} restart_keys[] = {
	{ "reactors", offsetof(struct config, reactors), sizeof(unsigned) },
	{ "poll_mode", offsetof(struct config, poll_mode), sizeof(enum reactor_poll_mode) },
	{ "adaptive_spin_us", offsetof(struct config, adaptive_spin_us), sizeof(unsigned) },
	{ "iser_srq", offsetof(struct config, iser_srq), sizeof(unsigned) },
	{ "tcp_keepalive", offsetof(struct config, tcp_keepalive_s), sizeof(unsigned) },
	{ "buffer_pool_mb", offsetof(struct config, buffer_pool_mb), sizeof(unsigned) },
	{ "admin_socket", offsetof(struct config, admin_socket), 0 },
	{ "state_dir", offsetof(struct config, state_dir), 0 },
	{ "metrics", offsetof(struct config, metrics), 0 },
};

bool apply_restart_key(const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(restart_keys); i++)
		if (!strcmp(restart_keys[i].key, key))
			return true;
	return false;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* n keeps r's value of every restart key, each one that differed named in restart (0, or -ENOMEM). */
static int keep_restart_keys(const struct config *r, struct config *n, json_object *restart)
{
	for (size_t i = 0; i < ARRAY_SIZE(restart_keys); i++) {
		const struct restart_key *k = &restart_keys[i];
		const char *rv = (const char *)r + k->off;
		char *nv = (char *)n + k->off;
		if (k->size) {
			if (!memcmp(rv, nv, k->size))
				continue;
			memcpy(nv, rv, k->size);
		} else {
			char *const *rs = (char *const *)(const void *)rv, **ns = (char **)(void *)nv;
			if (same_str(*rs, *ns))
				continue;
			free(*ns);
			if (!(*ns = *rs ? strdup(*rs) : NULL) && *rs)
				return -ENOMEM;
		}
		json_object_array_add(restart, json_object_new_string(k->key));
	}
	return 0;
}

/* Is backstore idx used by a LUN of c? */
static bool bs_in_use(const struct config *c, size_t idx)
{
	for (size_t i = 0; i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++)
			for (size_t k = 0; k < c->targets[i].tpgs[j].nluns; k++)
				if (c->targets[i].tpgs[j].luns[k].backstore_index == idx)
					return true;
	return false;
}

/*
 * Can the running backstore a serve as b?  Every key but size and
 * write_cache (which change in place) must be the same: the first that
 * differs goes to key (false), "" when a document could not be made.
 */
static bool same_identity(const struct cfg_backstore *a, const struct cfg_backstore *b, char *key, size_t keylen)
{
	json_object *ja = config_backstore_obj(a), *jb = config_backstore_obj(b);
	bool same = ja && jb;
	key[0] = 0;
	for (int pass = 0; same && pass < 2; pass++) {
		json_object *x = pass ? jb : ja, *y = pass ? ja : jb;
		json_object_object_foreach(x, k, v)
		{
			json_object *w;
			if (!strcmp(k, "size") || !strcmp(k, "write_cache"))
				continue;
			if (!json_object_object_get_ex(y, k, &w) || !json_object_equal(v, w)) {
				snprintf(key, keylen, "%s", k);
				same = false;
				break;
			}
		}
	}
	json_object_put(ja);
	json_object_put(jb);
	return same;
}

struct bs_name {
	const char *name;
	size_t idx;
};

static int cmp_bs_name(const void *a, const void *b)
{
	return strcmp(((const struct bs_name *)a)->name, ((const struct bs_name *)b)->name);
}

/* The running configuration's backstores by name: a configuration of thousands plans in milliseconds. */
static struct bs_name *index_bs(const struct config *c)
{
	struct bs_name *v = calloc(c->nbackstores ? c->nbackstores : 1, sizeof(*v));
	for (size_t i = 0; v && i < c->nbackstores; i++)
		v[i] = (struct bs_name){ c->backstores[i].name, i };
	if (v)
		qsort(v, c->nbackstores, sizeof(*v), cmp_bs_name);
	return v;
}

/* Where each backstore of n comes from (p->from), refusing what may not change while it runs. */
static int plan_backstores(struct apply_plan *p, const struct config *r, char *err, size_t errlen)
{
	const struct config *n = p->next;
	struct bs_name *names = index_bs(r);
	p->from = calloc(n->nbackstores ? n->nbackstores : 1, sizeof(*p->from));
	if (!names || !p->from) {
		free(names);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = 0;
	for (size_t i = 0; !rc && i < n->nbackstores; i++) {
		const struct cfg_backstore *b = &n->backstores[i];
		struct bs_name k = { b->name, 0 };
		const struct bs_name *f = bsearch(&k, names, r->nbackstores, sizeof(k), cmp_bs_name);
		char key[64], why[160];
		p->from[i] = -1;
		if (!f)
			continue;
		const struct cfg_backstore *o = &r->backstores[f->idx];
		if (same_identity(o, b, key, sizeof(key))) {
			if (backstore_resize_rule(b->bs.type, o->bs.size, b->bs.size, backstore_size(rt_store_at(f->idx)->bs),
						  why, sizeof(why)) == BS_RESIZE_REFUSED) {
				snprintf(err, errlen, "backstore '%s': size: %s", b->name, why);
				rc = -EINVAL;
			}
			p->from[i] = (long)f->idx;
		} else if (bs_in_use(r, f->idx) && bs_in_use(n, i)) {
			snprintf(err, errlen, "backstore '%s': %s cannot change while LUNs use it: remove its LUNs first",
				 b->name, key[0] ? key : "it");
			rc = -EBUSY;
		}
	}
	free(names);
	return rc;
}

int apply_plan_whole(struct config *n, struct apply_plan **out, char *err, size_t errlen)
{
	const struct config *r = rt_config();
	struct apply_plan *p = plan_new(err, errlen);
	if (!p) {
		config_free(n);
		return -ENOMEM;
	}
	p->next = n;
	/* What the running configuration is called stays. */
	free(n->origin);
	n->origin = strdup(r->origin);
	n->file_mode = r->file_mode;
	int rc = n->origin && !keep_restart_keys(r, n, p->restart) ? 0 : -ENOMEM;
	json_object *ja = config_to_obj_compare(r), *jb = config_to_obj_compare(n);
	if (!rc && ja && jb)
		config_diff(p->steps, ja, jb);
	else if (!rc)
		rc = -ENOMEM;
	/* Compared, they hold every secret, those from files too. */
	config_wipe_secrets(ja);
	config_wipe_secrets(jb);
	json_object_put(ja);
	json_object_put(jb);
	if (rc)
		snprintf(err, errlen, "out of memory");
	else
		rc = plan_backstores(p, r, err, errlen);
	if (rc) {
		apply_plan_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The plan of one object added: checked alone, by the loader's own code, as the next of its array. */

int apply_plan_backstore(json_object *obj, struct apply_plan **out, char *err, size_t errlen)
{
	struct apply_plan *p = plan_new(err, errlen);
	if (!p)
		return -ENOMEM;
	int rc = config_check_backstore(rt_config(), obj, "the change", &p->bs, err, errlen);
	if (rc) {
		apply_plan_free(p);
		return rc;
	}
	char path[320];
	snprintf(path, sizeof(path), "/backstores/%s", p->bs.name);
	config_step(p->steps, "create", path, NULL);
	p->add = ADD_BACKSTORE;
	*out = p;
	return 0;
}

int apply_plan_lun(size_t ti, size_t gi, json_object *obj, struct apply_plan **out, char *err, size_t errlen)
{
	const struct config *r = rt_config();
	struct apply_plan *p = plan_new(err, errlen);
	if (!p)
		return -ENOMEM;
	int rc = config_check_lun(r, ti, gi, obj, "the change", &p->lun, err, errlen);
	if (rc) {
		apply_plan_free(p);
		return rc;
	}
	char path[600];
	snprintf(path, sizeof(path), "/iscsi/%s/tpg%u/luns/lun%llu", r->targets[ti].iqn,
		 (unsigned)r->targets[ti].tpgs[gi].tag, (unsigned long long)p->lun.lun);
	config_step(p->steps, "create", path, NULL);
	p->add = ADD_LUN;
	p->ti = ti;
	p->gi = gi;
	*out = p;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Execution. */

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Drop the n stores of a configuration that ran: those kept go on; those that left close once unused. */
static void drop_stores(struct rt_store **st, size_t n)
{
	size_t nleft = 0;
	for (size_t i = 0; i < n; i++)
		if (st[i]->refs > 1)
			rt_store_put(st[i]); /* the running configuration has its own reference: kept */
		else
			st[nleft++] = st[i]; /* it left the configuration */
	struct scsi_lu **lus = calloc(nleft ? nleft : 1, sizeof(*lus));
	for (size_t i = 0; lus && i < nleft; i++)
		lus[i] = st[i]->lu;
	char err[160] = "";
	int users = lus ? -1 : -ENOMEM;
	for (uint64_t t0 = ms_now(); nleft && lus && ms_now() - t0 < DRAIN_TIMEOUT_MS && !iscsi_stopping();) {
		users = admin_lu_users(lus, nleft, err, sizeof(err));
		if (users <= 0)
			break; /* none left, or the reactors could not be asked: then they stay open */
		struct timespec d = { 0, 20 * 1000000 };
		nanosleep(&d, NULL);
	}
	free(lus);
	for (size_t i = 0; i < nleft; i++) {
		const char *name = backstore_name(st[i]->bs);
		if (users == 0) {
			log_info("backstore '%s' closed: it left the configuration", name);
			rt_store_put(st[i]);
			continue;
		}
		log_warn("backstore '%s' left the configuration but %s; it stays open until isertd exits", name,
			 users < 0 ? (err[0] ? err : "out of memory") : "commands still use it");
		struct retired *r = calloc(1, sizeof(*r));
		if (!r)
			continue; /* never freed rather than freed under its users */
		r->s = st[i];
		r->next = retired;
		retired = r;
	}
}

void apply_free(void)
{
	while (retired) {
		struct retired *r = retired;
		retired = r->next;
		rt_store_put(r->s);
		free(r);
	}
}

/*
 * What the running configuration keeps with other gateways, after a change
 * (old: the configuration before it): the ALUA states of targets with
 * shared stores, the target names of shared LUs.  A disagreement found only
 * now is logged: the change is made.
 */
static void share_after(const struct config *old)
{
	char err[768];
	if (scsi_alua_share_config(old, rt_config(), rt_backstore_at, err, sizeof(err)) == -EEXIST)
		log_err("after the change: %s", err);
	if (rt_share_targets(err, sizeof(err)) == -EEXIST)
		log_err("after the change: %s", err);
}

/* Does n keep r's global.admin_https?  (Else its files are read and checked: an unrelated change never reads them.) */
static bool same_admin_https(const struct config *r, const struct config *n)
{
	if (!r->admin_https || !n->admin_https)
		return !r->admin_https && !n->admin_https;
	json_object *a = cfg_admin_https_to_json(r->admin_https), *b = cfg_admin_https_to_json(n->admin_https);
	bool same = a && b && json_object_equal(a, b);
	json_object_put(a);
	json_object_put(b);
	return same;
}

static int execute_whole(struct apply_plan *p, struct apply_result *res, char *err, size_t errlen)
{
	struct config *n = p->next, *r = rt_config();
	size_t nb = n->nbackstores, nstarted = 0, nportals = 0;
	struct rt_store **st = calloc(nb ? nb : 1, sizeof(*st));
	struct scsi_alua_plan *alua = NULL;
	for (size_t i = 0; i < n->ntargets; i++)
		for (size_t j = 0; j < n->targets[i].ntpgs; j++)
			nportals += n->targets[i].tpgs[j].nportals;
	struct iscsi_portal **started = calloc(nportals ? nportals : 1, sizeof(*started));
	int rc = st && started ? 0 : -ENOMEM;
	if (rc)
		snprintf(err, errlen, "out of memory");
	/* Stores: kept (a reference for the new configuration), or opened anew. */
	for (size_t i = 0; !rc && i < nb; i++)
		if (p->from[i] >= 0)
			st[i] = rt_store_get(rt_store_at((size_t)p->from[i]));
		else
			rc = rt_store_open(&n->backstores[i], &st[i], err, errlen);
	/* Portals: new ones listen now (TCP refusing is an error; iSER as at start). */
	for (size_t i = 0; !rc && i < n->ntargets; i++)
		for (size_t j = 0; !rc && j < n->targets[i].ntpgs; j++)
			for (size_t k = 0; !rc && k < n->targets[i].tpgs[j].nportals; k++) {
				const struct cfg_portal *cp = &n->targets[i].tpgs[j].portals[k];
				struct iscsi_portal *ip;
				if (iscsi_portal_listening(cp))
					continue;
				rc = iscsi_portal_listen(n, cp, &ip, err, errlen);
				if (rc && cp->iser) {
					log_err("%s; this portal is not served, the others are", err);
					err[0] = 0;
					rc = 0;
				} else if (!rc) {
					started[nstarted++] = ip;
				}
			}
	/* TPG objects for every portal group (found again or made). */
	for (size_t i = 0; !rc && i < n->ntargets; i++)
		for (size_t j = 0; !rc && j < n->targets[i].ntpgs; j++)
			if (!rt_tpg_get(n->targets[i].iqn, n->targets[i].tpgs[j].tag)) {
				snprintf(err, errlen, "out of memory");
				rc = -ENOMEM;
			}
	/* The ALUA groups, made now: after the switch they are only installed, which cannot fail. */
	if (!rc)
		rc = scsi_alua_prepare(r, n, &alua, err, errlen);
	/* The HTTPS door's certificates and address, checked now: a change cannot leave it unable to start. */
	if (!rc && !same_admin_https(r, n))
		rc = https_prepare(n, err, errlen);
	/* Growing last: a file grown stays grown, the one thing not undone when a later step fails. */
	for (size_t i = 0; !rc && i < nb; i++) {
		if (p->from[i] < 0)
			continue;
		const struct cfg_backstore *b = &n->backstores[i], *o = &r->backstores[p->from[i]];
		if (b->bs.write_cache != o->bs.write_cache) {
			backstore_set_write_cache(st[i]->bs, b->bs.write_cache);
			scsi_lu_set_write_cache(st[i]->lu, b->bs.write_cache);
		}
		uint64_t have = backstore_size(st[i]->bs);
		char why[160];
		if (backstore_resize_rule(b->bs.type, o->bs.size, b->bs.size, have, why, sizeof(why)) != BS_RESIZE_DO)
			continue;
		if ((rc = backstore_resize(st[i]->bs, b->bs.size, err, errlen)))
			break;
		if (backstore_size(st[i]->bs) != have) {
			scsi_lu_capacity_changed(st[i]->lu);
			log_info("backstore '%s' grown from %llu to %llu bytes", b->name, (unsigned long long)have,
				 (unsigned long long)backstore_size(st[i]->bs));
		}
	}
	if (rc) {
		scsi_alua_plan_free(alua);
		for (size_t i = 0; st && i < nb; i++)
			rt_store_put(st[i]); /* those kept go on; those opened here were never used */
		for (size_t i = 0; i < nstarted; i++)
			if (!iscsi_portal_in(r, started[i]))
				iscsi_portal_unlisten(started[i]);
		free(st);
		free(started);
		return rc;
	}

	/* The switch: p->next and st hold what ran before afterwards. */
	rt_switch(&p->next, &st);
	r = rt_config();
	admit_set_limits(r);
	admit_fd_budget(admin_fd_reserve(rt_config()), NULL, NULL); /* stores and portals may have come or gone */

	/* What follows from it. */
	iscsi_portal_unlisten_gone(r);
	iscsi_portal_retos(r);
	char ferr[160] = "";
	if (admin_refresh_sessions(&res->sessions_closed, &res->maps_changed, ferr, sizeof(ferr)))
		log_warn("after the change: %s; sessions there keep their LUN maps until they log in again", ferr);
	scsi_alua_commit(alua);
	/* Before the stores that left close: a target may keep its ALUA states with one of them. */
	share_after(p->next);
	isns_configure(r); /* targets, portals, TPGs or global.isns may have changed: its thread registers the difference */
	https_commit();
	drop_stores(st, p->next->nbackstores);
	free(st);
	free(started);
	return 0;
}

int apply_execute(struct apply_plan *p, struct apply_result *res, char *err, size_t errlen)
{
	struct rt_store *s;
	int rc;
	res->sessions_closed = res->maps_changed = 0;
	switch (p->add) {
	case ADD_BACKSTORE:
		if ((rc = rt_store_open(&p->bs, &s, err, errlen)))
			return rc;
		if ((rc = rt_add_backstore(&p->bs, s))) {
			rt_store_put(s);
			snprintf(err, errlen, "out of memory");
			return rc;
		}
		admit_fd_budget(admin_fd_reserve(rt_config()), NULL, NULL);
		return 0;
	case ADD_LUN:
		if ((rc = rt_add_lun(p->ti, p->gi, &p->lun))) {
			snprintf(err, errlen, "out of memory");
			return rc;
		}
		if (admin_refresh_sessions(&res->sessions_closed, &res->maps_changed, err, errlen))
			log_warn("after lun.add: %s", err);
		err[0] = 0;
		share_after(rt_config()); /* the target's first shared LU, or another target name for one */
		return 0;
	case ADD_NONE:
		break;
	}
	return execute_whole(p, res, err, errlen);
}
