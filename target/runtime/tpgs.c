/*
 * TPG objects by target name and tag.  Logins and sessions point at them,
 * so one is made the first time its group is configured and kept for the
 * life of the process, found again when a group of the same target and tag
 * comes back.  Readers find them under rt_lock; the admin thread (and
 * start-up) adds them as the writer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/runtime/runtime_int.h"
#include "target/scsi/alua/alua.h"

#define TPG_BUCKETS 256

static struct rt_tpg *buckets[TPG_BUCKETS];

static struct rt_tpg **bucket(const char *iqn, uint16_t tag)
{
	uint32_t h = 2166136261u ^ tag;
	for (const char *p = iqn; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return &buckets[h % TPG_BUCKETS];
}

struct rt_tpg *rt_tpg_find(const char *iqn, uint16_t tag)
{
	for (struct rt_tpg *g = *bucket(iqn, tag); g; g = g->next)
		if (g->tag == tag && !strcmp(g->iqn, iqn))
			return g;
	return NULL;
}

struct rt_tpg *rt_tpg_get(const char *iqn, uint16_t tag)
{
	struct rt_tpg *g = rt_tpg_find(iqn, tag);
	if (g)
		return g;
	if (!(g = calloc(1, sizeof(*g))))
		return NULL;
	snprintf(g->iqn, sizeof(g->iqn), "%s", iqn);
	g->tag = tag;
	g->alua_port = scsi_alua_port(scsi_alua_get(iqn), tag);
	struct rt_tpg **b = bucket(iqn, tag);
	pthread_rwlock_wrlock(&rt_lock);
	g->next = *b;
	*b = g;
	pthread_rwlock_unlock(&rt_lock);
	return g;
}

/* Every group of c's TPG objects points at c's portal group; the others at nothing (under rt_lock as writer). */
void rt_tpgs_point_at(const struct config *c)
{
	for (size_t i = 0; i < TPG_BUCKETS; i++)
		for (struct rt_tpg *g = buckets[i]; g; g = g->next)
			g->cfg = NULL;
	for (size_t i = 0; c && i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++) {
			struct rt_tpg *g = rt_tpg_find(c->targets[i].iqn, c->targets[i].tpgs[j].tag);
			if (g)
				g->cfg = &c->targets[i].tpgs[j];
		}
}

void rt_tpgs_free(void)
{
	for (size_t i = 0; i < TPG_BUCKETS; i++)
		while (buckets[i]) {
			struct rt_tpg *g = buckets[i];
			buckets[i] = g->next;
			free(g);
		}
}
