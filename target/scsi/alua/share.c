/*
 * A target's ALUA states kept with every gateway serving it
 * (docs/cluster.md): after SET TARGET PORT GROUPS through one gateway, or
 * alua.set on one, every gateway reports the same states (ESXi and
 * dm-multipath expect one REPORT TARGET PORT GROUPS answer from every
 * path).  The states are the shared object "alua" (key: the target's name)
 * of one of the target's stores (shared.h: stored by compare-and-set,
 * every gateway told before the answer).  The groups, their ports and
 * preferences stay each gateway's configuration; only the states travel.
 *
 * When a gateway is fenced (it died, or stopped answering), the groups of
 * its ports become unavailable and, if no group is left active, those of
 * the gateway that fenced it active/optimized: the initiators' multipath
 * moves over without waiting for a SET TARGET PORT GROUPS of its own.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/log.h"
#include "target/scsi/alua/alua.h"
#include "target/scsi/alua/alua_int.h"
#include "target/scsi/scsi_int.h"
#include "target/scsi/shared/shared.h"

#define ALUA_FORMAT "isert-alua"

enum { OP_STPG, OP_SET, OP_FAILOVER };

/* A group's state as it travels. */
struct gstate {
	uint16_t id;
	uint8_t state, status;
};

/* OP_SET's and OP_FAILOVER's argument. */
struct garg {
	size_t n;
	struct gstate g[];           /* OP_FAILOVER: only the ids, the fenced gateway's ports */
};

static char *text_of(const char *target, const struct gstate *g, size_t n)
{
	json_object *o = json_object_new_object(), *a = json_object_new_array();
	char *out = NULL;
	if (o && a) {
		for (size_t i = 0; i < n; i++) {
			json_object *e = json_object_new_object();
			json_object_object_add(e, "id", json_object_new_int(g[i].id));
			json_object_object_add(e, "state", json_object_new_int(g[i].state));
			json_object_object_add(e, "status", json_object_new_int(g[i].status));
			json_object_array_add(a, e);
		}
		json_object_object_add(o, "format", json_object_new_string(ALUA_FORMAT));
		json_object_object_add(o, "version", json_object_new_int(1));
		json_object_object_add(o, "target", json_object_new_string(target));
		json_object_object_add(o, "groups", a);
		a = NULL;
		out = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	}
	json_object_put(a);
	json_object_put(o);
	return out;
}

/* Under a->mu: the running states (*out malloc'd). */
static size_t snapshot(const struct scsi_alua *a, struct gstate **out)
{
	*out = calloc(a->ngroups ? a->ngroups : 1, sizeof(**out));
	for (size_t i = 0; *out && i < a->ngroups; i++)
		(*out)[i] = (struct gstate){ a->groups[i].id, a->groups[i].state, a->groups[i].status };
	return *out ? a->ngroups : 0;
}

static int alua_install(void *owner, const char *text, size_t len, char *err, size_t errlen)
{
	struct scsi_alua *a = owner;
	json_tokener *tok = json_tokener_new_ex(4);
	json_object *o = tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL, *f, *gs;
	int rc = 0;
	if (!o || !json_object_object_get_ex(o, "format", &f) || !json_object_is_type(f, json_type_string) ||
	    strcmp(json_object_get_string(f), ALUA_FORMAT) ||
	    !json_object_object_get_ex(o, "groups", &gs) || !json_object_is_type(gs, json_type_array) ||
	    json_object_array_length(gs) > 65535) {
		snprintf(err, errlen, "not an %s document", ALUA_FORMAT);
		rc = -EINVAL;
	}
	bool changed = false;
	for (size_t i = 0; !rc && i < json_object_array_length(gs); i++) {
		json_object *e = json_object_array_get_idx(gs, i), *id, *st, *ss;
		if (!json_object_object_get_ex(e, "id", &id) || !json_object_object_get_ex(e, "state", &st))
			continue;
		int sv = json_object_get_int(st);
		/* Groups this gateway does not configure are another's business; bad states are not taken. */
		struct alua_grp *g = alua_find_grp(a->groups, a->ngroups, (uint16_t)json_object_get_int(id));
		if (!g || sv < 0 || sv > ALUA_TRANSITIONING || (sv > ALUA_UNAVAILABLE && sv != ALUA_TRANSITIONING))
			continue;
		changed |= g->state != sv;
		g->state = (uint8_t)sv;
		if (json_object_object_get_ex(e, "status", &ss))
			g->status = (uint8_t)json_object_get_int(ss);
	}
	if (!rc && changed) {
		alua_ports_update(a);
		__atomic_add_fetch(&a->gen, 1, __ATOMIC_RELEASE);
		alua_changed();
	}
	json_object_put(o);
	if (tok)
		json_tokener_free(tok);
	return rc;
}

static struct gstate *find(struct gstate *g, size_t n, uint16_t id)
{
	for (size_t i = 0; i < n; i++)
		if (g[i].id == id)
			return &g[i];
	return NULL;
}

static bool listed(const uint16_t *v, size_t n, uint16_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

/* Under a->mu: the groups of ports gone unavailable, and this gateway's active if no group is. */
static void failover(const struct scsi_alua *a, struct gstate *g, size_t n, const struct garg *gone)
{
	uint16_t ports[256];
	size_t np = 0;
	for (size_t i = 0; i < gone->n && np < 256; i++)
		ports[np++] = gone->g[i].id;
	bool active = false;
	for (size_t i = 0; i < a->ngroups; i++) {
		const struct alua_grp *ag = &a->groups[i];
		bool theirs = ag->nports > 0;
		for (size_t j = 0; j < ag->nports; j++)
			theirs &= listed(ports, np, ag->ports[j]);
		struct gstate *s = find(g, n, ag->id);
		if (theirs && s->state != ALUA_UNAVAILABLE) {
			s->state = ALUA_UNAVAILABLE;
			s->status = ALUA_STATUS_IMPLICIT;
		}
		active |= s->state == ALUA_ACTIVE_OPTIMIZED || s->state == ALUA_ACTIVE_NONOPTIMIZED;
	}
	for (size_t i = 0; !active && i < a->ngroups; i++) {
		const struct alua_grp *ag = &a->groups[i];
		bool ours = false;
		for (size_t j = 0; j < ag->nports; j++)
			ours |= listed(a->local, a->nlocal, ag->ports[j]);
		if (ours) {
			struct gstate *s = find(g, n, ag->id);
			s->state = ALUA_ACTIVE_OPTIMIZED;
			s->status = ALUA_STATUS_IMPLICIT;
		}
	}
}

static char *alua_change(void *owner, struct shared_job *j, char **notes)
{
	struct scsi_alua *a = owner;
	const struct garg *arg = j->arg;
	struct gstate *g;
	*notes = NULL; /* every nexus hears of a change by the target's generation, on every gateway */
	pthread_mutex_lock(&a->mu);
	size_t n = snapshot(a, &g);
	if (!g) {
		pthread_mutex_unlock(&a->mu);
		shared_answer_sense(j, j->cmd ? j->cmd->lu : NULL, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		return NULL;
	}
	if (j->op == OP_STPG) {
		struct scsi_cmd fake = { .lu = j->cmd->lu, .status = SCSI_GOOD };
		uint32_t k = (j->plen - 4) / 4;
		if (alua_stpg_check(&fake, a, j->params, k)) {
			for (uint32_t i = 0; i < k; i++) {
				struct gstate *s = find(g, n, get_be16(j->params + 4 + 4 * i + 2));
				s->state = j->params[4 + 4 * i] & 0x0f;
				s->status = ALUA_STATUS_STPG;
			}
		}
		j->status = fake.status;
		memcpy(j->sense, fake.sense, sizeof(j->sense));
		j->sense_len = fake.sense_len;
	} else if (j->op == OP_SET) {
		for (size_t i = 0; i < arg->n; i++) {
			struct gstate *s = find(g, n, arg->g[i].id);
			if (s) {
				s->state = arg->g[i].state;
				s->status = ALUA_STATUS_IMPLICIT;
			}
		}
	} else {
		failover(a, g, n, arg);
	}
	pthread_mutex_unlock(&a->mu);
	char *text = j->status == SCSI_GOOD ? text_of(a->name, g, n) : NULL;
	free(g);
	if (j->status == SCSI_GOOD && !text)
		shared_answer_sense(j, j->cmd ? j->cmd->lu : NULL, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
	return text;
}

/* SPC-4 5.16.2.6: every I_T nexus hears of it but the one that asked (for the LU it asked through). */
static void alua_done(void *owner, struct shared_job *j)
{
	struct scsi_alua *a = owner;
	if (j->op != OP_STPG)
		return;
	struct scsi_cmd *cmd = j->cmd;
	uint32_t gen = __atomic_load_n(&a->gen, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&cmd->lu->mu);
	struct lu_nexus *ln = lu_nexus_get(cmd->lu, cmd->nexus);
	if (ln && ln->alua_gen + 1 == gen)
		__atomic_store_n(&ln->alua_gen, gen, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cmd->lu->mu);
}

/* The relative ports a sharer's description lists (at most max). */
static size_t ports_of(const struct bs_sharer *who, uint16_t *out, size_t max)
{
	json_object *d = json_tokener_parse(who->desc), *ps;
	size_t n = 0;
	if (d && json_object_object_get_ex(d, "ports", &ps) && json_object_is_type(ps, json_type_array))
		for (size_t i = 0; i < json_object_array_length(ps) && n < max; i++)
			out[n++] = (uint16_t)json_object_get_int(json_object_array_get_idx(ps, i));
	json_object_put(d);
	return n;
}

static void alua_fenced(void *owner, struct shared *s, const struct bs_sharer *who)
{
	struct scsi_alua *a = owner;
	uint16_t ports[256];
	size_t n = ports_of(who, ports, 256);
	struct garg *arg = calloc(1, sizeof(*arg) + (n ? n : 1) * sizeof(arg->g[0]));
	if (!arg) {
		log_err("ALUA states of %s: out of memory: the groups of the fenced gateway keep their states", a->name);
		return;
	}
	arg->n = n;
	for (size_t i = 0; i < n; i++)
		arg->g[i].id = ports[i];
	shared_submit(s, OP_FAILOVER, NULL, false, arg, NULL);
}

/* Two gateways serving one relative port would make an I_T nexus ambiguous: the second is refused. */
static int alua_admit(void *owner, const struct bs_sharer *live, size_t n, char *err, size_t errlen)
{
	struct scsi_alua *a = owner;
	for (size_t i = 0; i < n; i++) {
		uint16_t ports[256];
		size_t np = ports_of(&live[i], ports, 256);
		for (size_t k = 0; k < np; k++)
			if (listed(a->local, a->nlocal, ports[k])) {
				snprintf(err, errlen, "relative port %u of target %s is served by gateway %s (%s) already: "
					 "give this gateway's portal group another tag", ports[k], a->name, live[i].desc,
					 live[i].addr);
				return -EEXIST;
			}
	}
	return 0;
}

static const struct shared_kind alua_kind = {
	.what = "ALUA states",
	.install = alua_install,
	.change = alua_change,
	.fenced = alua_fenced,
	.admit = alua_admit,
	.done = alua_done,
};

void alua_share_stpg(struct scsi_alua *a, struct scsi_cmd *cmd)
{
	shared_submit_cmd(a->share, OP_STPG, cmd);
}

/*
 * The target's states kept in the shared object "alua" of store bs; local:
 * the relative ports this process serves.  Blocking: the admin thread or
 * start-up.  0, or -errno with err (-EEXIST: another live gateway serves
 * one of these ports).  Shared already through bs: nothing to do; through
 * another store: moved.
 */
static int share_on(struct scsi_alua *a, struct backstore *bs, const uint16_t *local, size_t nlocal, char *err,
		    size_t errlen)
{
	char *desc = NULL, *init;
	struct gstate *g;
	struct shared *s = NULL;
	if (a->share && a->share_bs == bs)
		return 0;
	alua_unshare(a);
	if (nlocal > 256)
		nlocal = 256;
	json_object *d = shared_desc_new(), *ps = json_object_new_array();
	for (size_t i = 0; ps && i < nlocal; i++)
		json_object_array_add(ps, json_object_new_int(local[i]));
	if (d && ps) {
		json_object_object_add(d, "target", json_object_new_string(a->name));
		json_object_object_add(d, "ports", ps);
		ps = NULL;
		desc = strdup(json_object_to_json_string_ext(d, JSON_C_TO_STRING_PLAIN));
	}
	json_object_put(ps);
	json_object_put(d);
	pthread_mutex_lock(&a->mu);
	memcpy(a->local, local, nlocal * sizeof(*local));
	a->nlocal = nlocal;
	size_t n = snapshot(a, &g);
	pthread_mutex_unlock(&a->mu);
	init = g ? text_of(a->name, g, n) : NULL;
	free(g);
	int rc = desc && init ? shared_open(bs, "alua", a->name, &alua_kind, a, &a->mu, a->name, init, desc, &s, err,
					    errlen)
			      : -ENOMEM;
	if (rc == -ENOMEM && !desc)
		snprintf(err, errlen, "out of memory");
	free(desc);
	free(init);
	if (rc)
		return rc;
	a->share_bs = bs;
	__atomic_store_n(&a->share, s, __ATOMIC_RELEASE);
	log_info("ALUA states of %s: shared with every gateway serving it", a->name);
	return 0;
}

void alua_unshare(struct scsi_alua *a)
{
	struct shared *s = __atomic_exchange_n(&a->share, NULL, __ATOMIC_ACQ_REL);
	a->share_bs = NULL;
	shared_close(s);
}

/* The admin changed these groups' states: stored and told to every gateway (waited for). */
static int share_set(struct scsi_alua *a, const struct scsi_alua_group *groups, size_t n, char *err, size_t errlen)
{
	if (!a->share || !n)
		return 0;
	struct garg *arg = calloc(1, sizeof(*arg) + n * sizeof(arg->g[0]));
	if (!arg) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	arg->n = n;
	for (size_t i = 0; i < n; i++)
		arg->g[i] = (struct gstate){ groups[i].id, groups[i].state, ALUA_STATUS_IMPLICIT };
	return shared_run(a->share, OP_SET, arg, err, errlen);
}

struct json_object *scsi_alua_share_json(struct scsi_alua *a)
{
	struct shared *s = __atomic_load_n(&a->share, __ATOMIC_ACQUIRE);
	return s ? shared_json(s) : NULL;
}

int alua_share_target(const char *iqn, const struct alua_share_want *w, char *err, size_t errlen)
{
	struct scsi_alua *a = scsi_alua_get(iqn);
	if (!a)
		return 0;
	if (!w || !w->bs) {
		alua_unshare(a);
		return 0;
	}
	int rc = share_on(a, w->bs, w->local, w->nlocal, err, errlen);
	char e[512];
	if (!rc && w->nchanged && share_set(a, w->changed, w->nchanged, e, sizeof(e)))
		log_err("ALUA states of %s: the change is made here but not stored for the other gateways: %s", iqn, e);
	return rc;
}
