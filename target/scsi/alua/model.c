/*
 * ALUA's one model (SPC-4 5.16): each target's port groups and their
 * access states, its relative ports, and every change to them that is not
 * a SCSI command's or another gateway's own (the configuration's tables,
 * installed whole).  See alua.h for what lives where and which lock guards
 * it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/scsi/alua/alua.h"
#include "target/scsi/alua/alua_int.h"

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct scsi_alua *registry;
/* Running states changed other than by the configuration, every target's together. */
static uint32_t changes;

void alua_changed(void)
{
	__atomic_add_fetch(&changes, 1, __ATOMIC_RELEASE);
}

uint32_t scsi_alua_changes(void)
{
	return __atomic_load_n(&changes, __ATOMIC_ACQUIRE);
}

struct scsi_alua *scsi_alua_get(const char *target_name)
{
	struct scsi_alua *a;

	pthread_mutex_lock(&reg_mu);
	for (a = registry; a; a = a->next)
		if (!strcmp(a->name, target_name))
			break;
	if (!a && (a = calloc(1, sizeof(*a)))) {
		pthread_mutex_init(&a->mu, NULL);
		snprintf(a->name, sizeof(a->name), "%s", target_name);
		a->modes = SCSI_ALUA_IMPLICIT;
		a->next = registry;
		registry = a;
	}
	pthread_mutex_unlock(&reg_mu);
	return a;
}

/* Under a->mu: the group listing port, or NULL. */
static const struct alua_grp *group_of(const struct scsi_alua *a, uint16_t port)
{
	for (size_t i = 0; i < a->ngroups; i++)
		for (size_t j = 0; j < a->groups[i].nports; j++)
			if (a->groups[i].ports[j] == port)
				return &a->groups[i];
	return NULL;
}

static uint32_t port_word(const struct scsi_alua *a, uint16_t port)
{
	const struct alua_grp *g = group_of(a, port);
	return g ? PORT_IN_GROUP | (uint32_t)g->id << 8 | g->state : 0;
}

void alua_ports_update(struct scsi_alua *a)
{
	for (struct scsi_port *p = a->ports; p; p = p->next)
		__atomic_store_n(&p->word, port_word(a, p->rel_port_id), __ATOMIC_RELEASE);
}

struct scsi_port *scsi_alua_port(struct scsi_alua *a, uint16_t rel_port_id)
{
	struct scsi_port *p;

	if (!a)
		return NULL;
	pthread_mutex_lock(&a->mu);
	for (p = a->ports; p; p = p->next)
		if (p->rel_port_id == rel_port_id)
			break;
	if (!p && (p = calloc(1, sizeof(*p)))) {
		p->alua = a;
		p->rel_port_id = rel_port_id;
		p->word = port_word(a, rel_port_id);
		p->next = a->ports;
		a->ports = p;
	}
	pthread_mutex_unlock(&a->mu);
	return p;
}

uint32_t scsi_alua_gen(const struct scsi_port *p)
{
	return p ? __atomic_load_n(&p->alua->gen, __ATOMIC_ACQUIRE) : 0;
}

static void groups_free(struct alua_grp *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(g[i].ports);
	free(g);
}

struct alua_grp *alua_find_grp(struct alua_grp *g, size_t n, uint16_t id)
{
	for (size_t i = 0; i < n; i++)
		if (g[i].id == id)
			return &g[i];
	return NULL;
}

struct scsi_alua_table {
	struct alua_grp *g;
	size_t n;
};

struct scsi_alua_table *scsi_alua_table_new(const struct scsi_alua_group *groups, size_t n, int *err)
{
	struct scsi_alua_table *t = calloc(1, sizeof(*t));
	struct alua_grp *ng = calloc(n ? n : 1, sizeof(*ng));

	*err = -ENOMEM;
	if (!t || !ng) {
		free(t);
		free(ng);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		if (groups[i].nports > SCSI_ALUA_MAX_PORTS || !(ng[i].ports = calloc(groups[i].nports + 1, sizeof(uint16_t)))) {
			*err = groups[i].nports > SCSI_ALUA_MAX_PORTS ? -EINVAL : -ENOMEM;
			groups_free(ng, n);
			free(t);
			return NULL;
		}
		if (groups[i].nports)
			memcpy(ng[i].ports, groups[i].ports, groups[i].nports * sizeof(uint16_t));
		ng[i].nports = (uint16_t)groups[i].nports;
		ng[i].id = groups[i].id;
		ng[i].pref = groups[i].preferred;
		ng[i].state = groups[i].state;
		ng[i].keep = groups[i].keep_state;
	}
	t->g = ng;
	t->n = n;
	*err = 0;
	return t;
}

void scsi_alua_table_free(struct scsi_alua_table *t)
{
	if (t)
		groups_free(t->g, t->n);
	free(t);
}

void scsi_alua_install(struct scsi_alua *a, uint8_t modes, uint8_t transition_time, struct scsi_alua_table *t)
{
	struct alua_grp *ng = t->g;
	size_t n = t->n;
	free(t);
	pthread_mutex_lock(&a->mu);
	bool changed = n != a->ngroups;
	for (size_t i = 0; i < n; i++) {
		const struct alua_grp *o = alua_find_grp(a->groups, a->ngroups, ng[i].id);
		if (o && ng[i].keep)
			ng[i].state = o->state;
		if (o)
			ng[i].status = o->state == ng[i].state ? o->status : ALUA_STATUS_IMPLICIT;
		changed |= !o || o->state != ng[i].state || o->nports != ng[i].nports ||
			   memcmp(o->ports, ng[i].ports, ng[i].nports * sizeof(uint16_t));
	}
	groups_free(a->groups, a->ngroups);
	a->groups = ng;
	a->ngroups = n;
	__atomic_store_n(&a->modes, modes, __ATOMIC_RELAXED);
	__atomic_store_n(&a->ttime, transition_time, __ATOMIC_RELAXED);
	alua_ports_update(a);
	if (changed)
		__atomic_add_fetch(&a->gen, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&a->mu);
}

int scsi_alua_configure(struct scsi_alua *a, uint8_t modes, uint8_t transition_time,
			const struct scsi_alua_group *groups, size_t n)
{
	int err;
	struct scsi_alua_table *t = scsi_alua_table_new(groups, n, &err);
	if (t)
		scsi_alua_install(a, modes, transition_time, t);
	return err;
}

int scsi_alua_group_state(struct scsi_alua *a, uint16_t id, uint8_t *state, uint8_t *status)
{
	int rc = -ENOENT;

	pthread_mutex_lock(&a->mu);
	const struct alua_grp *g = alua_find_grp(a->groups, a->ngroups, id);
	if (g) {
		*state = g->state;
		*status = g->status;
		rc = 0;
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

void scsi_alua_free_all(void)
{
	pthread_mutex_lock(&reg_mu);
	while (registry) {
		struct scsi_alua *a = registry;
		registry = a->next;
		alua_unshare(a);
		while (a->ports) {
			struct scsi_port *p = a->ports;
			a->ports = p->next;
			free(p);
		}
		groups_free(a->groups, a->ngroups);
		pthread_mutex_destroy(&a->mu);
		free(a);
	}
	pthread_mutex_unlock(&reg_mu);
}
