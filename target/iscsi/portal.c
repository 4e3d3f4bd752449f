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
#include "common/util.h"
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

static bool same_portal(const struct cfg_portal *a, const struct cfg_portal *b)
{
	return a->port == b->port && a->iser == b->iser && !strcmp(a->host, b->host);
}

static bool wildcard_host(const char *h)
{
	return !strcmp(h, "0.0.0.0") || !strcmp(h, "::") || !strcmp(h, "[::]");
}

/* A TCP portal whose port space an iSER portal would share on iWARP, or NULL. */
static const struct cfg_portal *tcp_clash(const struct config *cfg, const struct cfg_portal *ip)
{
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++)
			for (size_t k = 0; k < cfg->targets[i].tpgs[j].nportals; k++) {
				const struct cfg_portal *p = &cfg->targets[i].tpgs[j].portals[k];
				if (!p->iser && p->port == ip->port &&
				    (!strcmp(p->host, ip->host) || wildcard_host(p->host) || wildcard_host(ip->host)))
					return p;
			}
	return NULL;
}

/* Every distinct portal of the configuration, TCP first, then iSER, in turn. */
static int each_portal(struct config *cfg, bool iser,
		       int (*fn)(struct config *, const struct cfg_target *, const struct cfg_tpg *,
				 const struct cfg_portal *, char *, size_t),
		       char *err, size_t errlen)
{
	const struct cfg_portal *seen[256];
	size_t nseen = 0;
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++) {
			const struct cfg_tpg *g = &cfg->targets[i].tpgs[j];
			for (size_t k = 0; k < g->nportals; k++) {
				const struct cfg_portal *p = &g->portals[k];
				bool dup = p->iser != iser;
				/* Several portal groups may share a portal: one listener serves them all. */
				for (size_t d = 0; d < nseen && !dup; d++)
					dup = same_portal(seen[d], p);
				if (dup)
					continue;
				if (nseen < ARRAY_SIZE(seen))
					seen[nseen++] = p;
				int rc = fn(cfg, &cfg->targets[i], g, p, err, errlen);
				if (rc)
					return rc;
			}
		}
	return 0;
}

static int open_one(struct config *cfg, const struct cfg_target *t, const struct cfg_tpg *g,
		    const struct cfg_portal *p, char *err, size_t errlen)
{
	const struct transport_ops *xp = p->iser ? &iser_transport : &tcp_transport;
	const struct cfg_portal *clash = p->iser ? tcp_clash(cfg, p) : NULL;
	if (clash)
		log_warn("iSER portal %s:%u and TCP portal %s:%u share a port: fine on RoCE and InfiniBand, "
			 "but on iWARP the RDMA listener uses the TCP port space and cannot coexist",
			 p->host, p->port, clash->host, clash->port);
	struct iscsi_portal *ip = &iscsi_g.portals[iscsi_g.nportals];
	*ip = (struct iscsi_portal){ .ops = xp };
	snprintf(ip->name, sizeof(ip->name), "%s:%u (%s)", p->host, p->port, xp->name);
	struct xp_listen_params lp = {
		.admit = admit_conn, .accept = conn_accept, .dropped = admit_dropped, .arg = ip,
		.keepalive_s = cfg->tcp_keepalive_s,
	};
	int rc = xp->listen(p->host, p->port, iscsi_g.reactors[0], &lp, &ip->l, err, errlen);
	if (rc && p->iser) {
		/* No RDMA for this portal: say so once and keep serving the others. */
		if (rc == -EADDRINUSE && clash)
			log_err("iSER portal %s:%u cannot listen: TCP portal %s:%u holds the port (iWARP shares "
				"TCP's port space); move one of them to another address or port",
				p->host, p->port, clash->host, clash->port);
		else
			log_err("%s; this portal is not served, the others are", err);
		err[0] = 0;
		return 0;
	}
	if (rc)
		return rc;
	iscsi_g.nportals++;
	log_info("listening on %s:%u (%s) for %s, TPG %u", p->host, p->port, xp->name, t->iqn, g->tag);
	return 0;
}

int iscsi_listen(char *err, size_t errlen)
{
	struct config *cfg = iscsi_g.cfg;
	size_t n = 0;
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++)
			n += cfg->targets[i].tpgs[j].nportals;
	iscsi_g.portals = calloc(n ? n : 1, sizeof(*iscsi_g.portals));
	if (!iscsi_g.portals)
		return -ENOMEM;
	/* TCP first: on iWARP a TCP and an RDMA listener cannot share an address and port. */
	int rc = each_portal(cfg, false, open_one, err, errlen);
	rc = rc ? rc : each_portal(cfg, true, open_one, err, errlen);
	if (rc && !err[0])
		snprintf(err, errlen, "%s", strerror(-rc));
	return rc;
}

int iscsi_setup(struct config *cfg, struct reactor **reactors, unsigned nreactors, char *err, size_t errlen)
{
	iscsi_g.cfg = cfg;
	iscsi_g.reactors = reactors;
	iscsi_g.nreactors = nreactors;
	/* A reactor's pool holds at most buffer_pool_mb; what is beyond a quarter of it is given back when free. */
	size_t cap = (size_t)cfg->buffer_pool_mb << 20;
	for (unsigned i = 0; i < nreactors; i++)
		bufpool_set_limits(reactor_bufpool(reactors[i]), cap, cap / 4);
	int rc = open_backstores(cfg, err, errlen);
	if (!rc)
		rc = build_targets(cfg);
	if (rc && !err[0])
		snprintf(err, errlen, "%s", strerror(-rc));
	return rc;
}

int iscsi_start(struct config *cfg, struct reactor **reactors, unsigned nreactors, char *err, size_t errlen)
{
	int rc = iscsi_setup(cfg, reactors, nreactors, err, errlen);
	return rc ? rc : iscsi_listen(err, errlen);
}

void iscsi_stop(void)
{
	iscsi_g.stopping = true;
	for (size_t i = 0; i < iscsi_g.nportals; i++)
		iscsi_g.portals[i].ops->unlisten(iscsi_g.portals[i].l);
	iscsi_g.nportals = 0;
	/* The portal records stay: connections still point at them until they are freed. */
}

static void flush_done(struct bs_io *io, int res)
{
	*(int *)io->priv = res;
}

/* After the reactors stopped: write caches to stable storage (synchronous I/O). */
int iscsi_flush(void)
{
	int failed = 0;
	for (size_t i = 0; iscsi_g.cfg && iscsi_g.bss && i < iscsi_g.cfg->nbackstores; i++) {
		struct backstore *bs = iscsi_g.bss[i];
		if (!bs || backstore_readonly(bs))
			continue;
		int res = -EINPROGRESS;
		struct bs_io io = { .op = BS_FLUSH, .cb = flush_done, .priv = &res };
		backstore_submit(bs, &io);
		if (res) {
			log_err("backstore '%s': flush at shutdown failed: %s", backstore_name(bs), strerror(-res));
			failed++;
		}
	}
	return failed;
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
	free(iscsi_g.portals);
	iscsi_g.lus = NULL;
	iscsi_g.bss = NULL;
	iscsi_g.portals = NULL;
}
