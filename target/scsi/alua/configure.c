/*
 * The configuration's ALUA target port groups (config.h, "alua" of a
 * target) carried into the running groups (alua.h), and the running states
 * read back: SET TARGET PORT GROUPS (or another gateway) changes a state,
 * the model counts it (scsi_alua_changes), and the admin thread, seeing
 * the count move, copies the states into the running configuration before
 * its next method reads or changes that (so `save` keeps them).
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "target/backstore/backstore.h"
#include "target/config/config.h"
#include "target/scsi/alua/alua.h"
#include "target/scsi/alua/alua_int.h"

static const struct cfg_target *find_target(const struct config *c, const char *iqn)
{
	for (size_t i = 0; c && i < c->ntargets; i++)
		if (!strcmp(c->targets[i].iqn, iqn))
			return &c->targets[i];
	return NULL;
}

static const struct cfg_alua_group *find_group(const struct cfg_target *t, uint16_t id)
{
	for (size_t i = 0; t && i < t->nalua_groups; i++)
		if (t->alua_groups[i].id == id)
			return &t->alua_groups[i];
	return NULL;
}

struct scsi_alua_plan {
	size_t n;
	struct {
		struct scsi_alua *a;
		uint8_t modes, ttime;
		struct scsi_alua_table *t;
	} tg[];
};

void scsi_alua_plan_free(struct scsi_alua_plan *p)
{
	for (size_t i = 0; p && i < p->n; i++)
		scsi_alua_table_free(p->tg[i].t);
	free(p);
}

int scsi_alua_prepare(const struct config *old, const struct config *n, struct scsi_alua_plan **out, char *err,
		      size_t errlen)
{
	struct scsi_alua_plan *p = calloc(1, sizeof(*p) + n->ntargets * sizeof(p->tg[0]));
	int rc = p ? 0 : -ENOMEM;
	if (p)
		p->n = n->ntargets; /* tables not made stay NULL */

	for (size_t i = 0; !rc && i < n->ntargets; i++) {
		const struct cfg_target *t = &n->targets[i], *o = find_target(old, t->iqn);
		struct scsi_alua_group *g = calloc(t->nalua_groups ? t->nalua_groups : 1, sizeof(*g));
		uint16_t *ports = calloc((SCSI_ALUA_MAX_PORTS + 1) * (t->nalua_groups ? t->nalua_groups : 1),
					 sizeof(*ports));
		p->tg[i].a = scsi_alua_get(t->iqn);
		if (!p->tg[i].a || !g || !ports)
			rc = -ENOMEM;
		for (size_t j = 0; !rc && j < t->nalua_groups; j++) {
			const struct cfg_alua_group *c = &t->alua_groups[j], *oc = find_group(o, c->id);
			uint16_t *pp = ports + (SCSI_ALUA_MAX_PORTS + 1) * j;
			if (c->ntpgs + c->nremote > SCSI_ALUA_MAX_PORTS) {
				rc = -EINVAL; /* the loader refuses this; never copied past the slot */
				break;
			}
			if (c->ntpgs)
				memcpy(pp, c->tpgs, c->ntpgs * sizeof(*pp));
			if (c->nremote)
				memcpy(pp + c->ntpgs, c->remote_ports, c->nremote * sizeof(*pp));
			g[j] = (struct scsi_alua_group){ .id = c->id, .state = c->state, .preferred = c->preferred,
							 .ports = pp, .nports = c->ntpgs + c->nremote };
			/* A state the document did not change stays as it runs (SET TARGET PORT GROUPS may have set it). */
			g[j].keep_state = oc && oc->state == c->state;
		}
		if (!rc)
			p->tg[i].t = scsi_alua_table_new(g, t->nalua_groups, &rc);
		p->tg[i].modes = t->alua_modes;
		p->tg[i].ttime = t->alua_transition_time;
		free(g);
		free(ports);
		if (rc)
			snprintf(err, errlen, "target %s: ALUA target port groups: %s", t->iqn,
				 rc == -EINVAL ? "a group has more than 255 ports" : "out of memory");
	}
	if (rc) {
		scsi_alua_plan_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void scsi_alua_commit(struct scsi_alua_plan *p)
{
	for (size_t i = 0; i < p->n; i++)
		scsi_alua_install(p->tg[i].a, p->tg[i].modes, p->tg[i].ttime, p->tg[i].t);
	free(p);
}

void scsi_alua_states_into(struct config *c, pthread_rwlock_t *lock)
{
	for (size_t i = 0; c && i < c->ntargets; i++) {
		struct cfg_target *t = &c->targets[i];
		struct scsi_alua *a = scsi_alua_get(t->iqn);
		for (size_t j = 0; a && j < t->nalua_groups; j++) {
			uint8_t st, status;
			if (scsi_alua_group_state(a, t->alua_groups[j].id, &st, &status) || st == t->alua_groups[j].state)
				continue;
			pthread_rwlock_wrlock(lock);
			t->alua_groups[j].state = st;
			/* The running groups are the document's now: the default group is written out too. */
			t->alua_given = true;
			pthread_rwlock_unlock(lock);
		}
	}
}

const char *scsi_alua_status_name(const char *iqn, uint16_t id)
{
	struct scsi_alua *a = scsi_alua_get(iqn);
	uint8_t st, status;
	if (!a || scsi_alua_group_state(a, id, &st, &status))
		return "none";
	return status == ALUA_STATUS_STPG ? "set_by_initiator" : status == ALUA_STATUS_IMPLICIT ? "set_by_admin" : "none";
}

/*
 * The store a target keeps its ALUA states with (docs/cluster.md): one of
 * the shared stores its LUNs use, the first by where their shared objects
 * live (pool, then namespace), so that every gateway serving the same
 * images picks the same; NULL: none of its LUNs is shared.
 */
static struct backstore *share_store(const struct cfg_target *t, scsi_alua_store_fn *store_at)
{
	struct backstore *best = NULL;
	for (size_t j = 0; j < t->ntpgs; j++)
		for (size_t k = 0; k < t->tpgs[j].nluns; k++) {
			struct backstore *bs = store_at(t->tpgs[j].luns[k].backstore_index);
			const char *home = backstore_shared_home(bs);
			if (home && (!best || strcmp(home, backstore_shared_home(best)) < 0))
				best = bs;
		}
	return best;
}

/* What target t (o in the configuration before) asks of its sharing, into w. */
static void share_want(const struct cfg_target *t, const struct cfg_target *o, scsi_alua_store_fn *store_at,
		       struct alua_share_want *w)
{
	w->bs = share_store(t, store_at);
	w->nlocal = 0;
	for (size_t j = 0; j < t->ntpgs && w->nlocal < 256; j++)
		w->local[w->nlocal++] = t->tpgs[j].tag;
	/* States the admin changed in the document (alua.set): to every gateway. */
	w->nchanged = 0;
	for (size_t j = 0; o && j < t->nalua_groups && w->nchanged < 256; j++) {
		const struct cfg_alua_group *cg = &t->alua_groups[j], *og = find_group(o, cg->id);
		if (og && og->state != cg->state)
			w->changed[w->nchanged++] = (struct scsi_alua_group){ .id = cg->id, .state = cg->state };
	}
}

int scsi_alua_share_config(const struct config *old, const struct config *c, scsi_alua_store_fn *store_at, char *err,
			   size_t errlen)
{
	char e[512];
	/* Targets that left: their states are no longer kept with anyone. */
	for (size_t i = 0; old && i < old->ntargets; i++)
		if (!find_target(c, old->targets[i].iqn))
			alua_share_target(old->targets[i].iqn, NULL, e, sizeof(e));
	int rc = 0;
	struct alua_share_want w;
	for (size_t i = 0; i < c->ntargets; i++) {
		const struct cfg_target *t = &c->targets[i];
		share_want(t, find_target(old, t->iqn), store_at, &w);
		int r = alua_share_target(t->iqn, &w, e, sizeof(e));
		if (r == -EEXIST && !rc) {
			snprintf(err, errlen, "%s", e);
			rc = r;
		} else if (r && r != -EEXIST) {
			log_warn("ALUA states of %s: not shared with the other gateways (%s); each keeps its own", t->iqn, e);
		}
	}
	return rc;
}

void scsi_alua_unshare_config(const struct config *c)
{
	char e[8];
	for (size_t i = 0; c && i < c->ntargets; i++)
		alua_share_target(c->targets[i].iqn, NULL, e, sizeof(e));
}
