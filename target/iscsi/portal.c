/*
 * Start-up of the iSCSI layer from a loaded configuration: backstores and
 * their logical units, targets and portal groups, and one listener per
 * portal (accepting on the first reactor, handing connections round-robin
 * to all reactors).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/reactor.h"
#include "target/backstore/backstore.h"
#include "target/iscsi/iscsi.h"

struct iscsi_globals iscsi_g = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int open_backstores(struct config *cfg, char *err, size_t errlen)
{
	iscsi_g.bss = calloc(cfg->nbackstores ? cfg->nbackstores : 1, sizeof(*iscsi_g.bss));
	iscsi_g.lus = calloc(cfg->nbackstores ? cfg->nbackstores : 1, sizeof(*iscsi_g.lus));
	if (!iscsi_g.bss || !iscsi_g.lus)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->nbackstores; i++) {
		struct cfg_backstore *b = &cfg->backstores[i];
		int rc = backstore_open(&b->bs, &iscsi_g.bss[i], err, errlen);
		if (rc)
			return rc;
		char serial[64];
		snprintf(serial, sizeof(serial), "%s", b->serial ? b->serial : b->name);
		struct scsi_lu_params p = { .serial = serial, .name = b->name };
		rc = scsi_lu_create(iscsi_g.bss[i], &p, &iscsi_g.lus[i]);
		if (rc) {
			snprintf(err, errlen, "backstore '%s': cannot create its logical unit: %s", b->name, strerror(-rc));
			return rc;
		}
	}
	return 0;
}

static int build_targets(struct config *cfg)
{
	iscsi_g.targets = calloc(cfg->ntargets ? cfg->ntargets : 1, sizeof(*iscsi_g.targets));
	if (!iscsi_g.targets)
		return -ENOMEM;
	iscsi_g.ntargets = cfg->ntargets;
	for (size_t i = 0; i < cfg->ntargets; i++) {
		struct iscsi_target *t = &iscsi_g.targets[i];
		t->cfg = &cfg->targets[i];
		t->ntpgs = t->cfg->ntpgs;
		t->tpgs = calloc(t->ntpgs ? t->ntpgs : 1, sizeof(*t->tpgs));
		if (!t->tpgs)
			return -ENOMEM;
		for (size_t j = 0; j < t->ntpgs; j++) {
			struct iscsi_tpg *g = &t->tpgs[j];
			g->target = t;
			g->cfg = &t->cfg->tpgs[j];
			g->nluns = g->cfg->nluns;
			g->luns = calloc(g->nluns ? g->nluns : 1, sizeof(*g->luns));
			if (!g->luns)
				return -ENOMEM;
			for (size_t k = 0; k < g->nluns; k++) {
				const struct cfg_lun *l = &g->cfg->luns[k];
				g->luns[k].lun = l->lun;
				g->luns[k].lu = iscsi_g.lus[l->backstore_index];
				g->luns[k].read_only = l->read_only;
			}
		}
	}
	return 0;
}

static int open_listeners(struct config *cfg, char *err, size_t errlen)
{
	size_t n = 0;
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++)
			n += cfg->targets[i].tpgs[j].nportals;
	iscsi_g.listeners = calloc(n ? n : 1, sizeof(*iscsi_g.listeners));
	if (!iscsi_g.listeners)
		return -ENOMEM;
	for (size_t i = 0; i < cfg->ntargets; i++) {
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++) {
			const struct cfg_tpg *g = &cfg->targets[i].tpgs[j];
			for (size_t k = 0; k < g->nportals; k++) {
				const struct cfg_portal *p = &g->portals[k];
				bool dup = false;
				/* Several portal groups may share a portal: one listener serves them all. */
				for (size_t a = 0; a <= i && !dup; a++)
					for (size_t b = 0; b < cfg->targets[a].ntpgs && !dup; b++) {
						const struct cfg_tpg *h = &cfg->targets[a].tpgs[b];
						if (h == g)
							break;
						for (size_t c = 0; c < h->nportals && !dup; c++)
							dup = h->portals[c].port == p->port && h->portals[c].iser == p->iser &&
							      !strcmp(h->portals[c].host, p->host);
					}
				for (size_t c = 0; c < k && !dup; c++)
					dup = g->portals[c].port == p->port && g->portals[c].iser == p->iser &&
					      !strcmp(g->portals[c].host, p->host);
				if (dup)
					continue;
				if (p->iser) {
					log_warn("portal %s:%u has iser=true; the iSER transport is not built yet, portal skipped",
						 p->host, p->port);
					continue;
				}
				int rc = tcp_transport.listen(p->host, p->port, iscsi_g.reactors[0], conn_accept, NULL,
							      &iscsi_g.listeners[iscsi_g.nlisteners], err, errlen);
				if (rc)
					return rc;
				iscsi_g.nlisteners++;
				log_info("listening on %s:%u (tcp) for %s, TPG %u", p->host, p->port,
					 cfg->targets[i].iqn, g->tag);
			}
		}
	}
	return 0;
}

int iscsi_start(struct config *cfg, struct reactor **reactors, unsigned nreactors, char *err, size_t errlen)
{
	iscsi_g.cfg = cfg;
	iscsi_g.reactors = reactors;
	iscsi_g.nreactors = nreactors;
	int rc = open_backstores(cfg, err, errlen);
	if (!rc)
		rc = build_targets(cfg);
	if (!rc)
		rc = open_listeners(cfg, err, errlen);
	if (rc && !err[0])
		snprintf(err, errlen, "%s", strerror(-rc));
	return rc;
}

void iscsi_stop(void)
{
	for (size_t i = 0; i < iscsi_g.nlisteners; i++)
		tcp_transport.unlisten(iscsi_g.listeners[i]);
	free(iscsi_g.listeners);
	iscsi_g.listeners = NULL;
	iscsi_g.nlisteners = 0;
}

/* After the reactors stopped: nothing runs any more, free everything. */
void iscsi_free(void)
{
	for (size_t i = 0; i < iscsi_g.ntargets; i++) {
		for (size_t j = 0; j < iscsi_g.targets[i].ntpgs; j++)
			free(iscsi_g.targets[i].tpgs[j].luns);
		free(iscsi_g.targets[i].tpgs);
	}
	free(iscsi_g.targets);
	iscsi_g.targets = NULL;
	if (iscsi_g.cfg) {
		for (size_t i = 0; i < iscsi_g.cfg->nbackstores; i++) {
			if (iscsi_g.lus && iscsi_g.lus[i])
				scsi_lu_destroy(iscsi_g.lus[i]);
			if (iscsi_g.bss && iscsi_g.bss[i])
				backstore_close(iscsi_g.bss[i]);
		}
	}
	free(iscsi_g.lus);
	free(iscsi_g.bss);
	iscsi_g.lus = NULL;
	iscsi_g.bss = NULL;
}
