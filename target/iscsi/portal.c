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
#include "target/scsi/alua.h"

struct iscsi_globals iscsi_g = { .lock = PTHREAD_MUTEX_INITIALIZER, .cfg_lock = PTHREAD_RWLOCK_INITIALIZER };

/*
 * The serials of the LUs this process has open (the loader checks the ones
 * a document decides; an rbd image's or an NVMe namespace's own identity is
 * known only once open).  A backstore of the same name may hold one while
 * its replacement opens (apply).  Admin thread and start-up only.
 */
struct lu_serial {
	struct lu_serial *next;
	const struct scsi_lu *lu;
	char serial[64], name[65];
};
static struct lu_serial *lu_serials;
static pthread_mutex_t lu_serials_mu = PTHREAD_MUTEX_INITIALIZER;

/* Before the LU is made: its APTPL state file is found by the serial. */
static struct lu_serial *serial_claim(const struct cfg_backstore *b, const char *serial, int *rc, char *err,
				      size_t errlen)
{
	struct lu_serial *e = calloc(1, sizeof(*e));
	*rc = -ENOMEM;
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(e->serial, sizeof(e->serial), "%s", serial);
	snprintf(e->name, sizeof(e->name), "%s", b->name);
	pthread_mutex_lock(&lu_serials_mu);
	for (struct lu_serial *o = lu_serials; o; o = o->next)
		if (!strcmp(o->serial, e->serial) && strcmp(o->name, e->name)) {
			pthread_mutex_unlock(&lu_serials_mu);
			snprintf(err, errlen, "backstore '%s': serial '%s'%s is already that of backstore '%s': each LU of "
				 "one isertd needs its own (set \"serial\" to tell them apart)", b->name, e->serial,
				 b->serial ? "" : " (the store's own identity)", o->name);
			free(e);
			*rc = -EEXIST;
			return NULL;
		}
	e->next = lu_serials;
	lu_serials = e;
	pthread_mutex_unlock(&lu_serials_mu);
	*rc = 0;
	return e;
}

static void serial_release(const struct lu_serial *which, const struct scsi_lu *lu)
{
	pthread_mutex_lock(&lu_serials_mu);
	for (struct lu_serial **pp = &lu_serials; *pp; pp = &(*pp)->next)
		if (*pp == which || (lu && (*pp)->lu == lu)) {
			struct lu_serial *e = *pp;
			*pp = e->next;
			free(e);
			break;
		}
	pthread_mutex_unlock(&lu_serials_mu);
}

int iscsi_backstore_open(struct cfg_backstore *b, char *err, size_t errlen)
{
	int rc = backstore_open(&b->bs, &b->rt_bs, err, errlen);
	if (rc)
		return rc;
	/* The configured serial, else the store's own identity (an RBD image, an NVMe
	 * namespace: every target serving it reports the same LU), else the name. */
	char serial[64];
	const char *own = backstore_serial(b->rt_bs);
	snprintf(serial, sizeof(serial), "%s", b->serial ? b->serial : own ? own : b->name);
	/* iscsi_setup sets iscsi_g.cfg before the first backstore opens; state_dir never changes after. */
	struct scsi_lu_params p = { .serial = serial, .name = b->name, .state_dir = config_state_dir(iscsi_g.cfg) };
	struct lu_serial *claim = serial_claim(b, serial, &rc, err, errlen);
	if (claim && (rc = scsi_lu_create(b->rt_bs, &p, &b->rt_lu))) {
		snprintf(err, errlen, "backstore '%s': cannot create its logical unit: %s", b->name, strerror(-rc));
		serial_release(claim, NULL);
	}
	if (claim && !rc)
		claim->lu = b->rt_lu;
	if (rc) {
		b->rt_lu = NULL;
		backstore_close(b->rt_bs);
		b->rt_bs = NULL;
	}
	return rc;
}

void iscsi_backstore_close(struct cfg_backstore *b)
{
	if (b->rt_lu) {
		serial_release(NULL, b->rt_lu);
		scsi_lu_destroy(b->rt_lu);
	}
	if (b->rt_bs)
		backstore_close(b->rt_bs);
	b->rt_lu = NULL;
	b->rt_bs = NULL;
}

static int open_backstores(struct config *cfg, char *err, size_t errlen)
{
	for (size_t i = 0; i < cfg->nbackstores; i++) {
		int rc = iscsi_backstore_open(&cfg->backstores[i], err, errlen);
		if (rc)
			return rc;
	}
	return 0;
}

struct iscsi_tpg *iscsi_tpg_get(const char *iqn, uint16_t tag)
{
	for (struct iscsi_tpg *g = iscsi_g.tpgs; g; g = g->next)
		if (g->tag == tag && !strcmp(g->iqn, iqn))
			return g;
	struct iscsi_tpg *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	snprintf(g->iqn, sizeof(g->iqn), "%s", iqn);
	g->tag = tag;
	g->alua_port = scsi_alua_port(scsi_alua_get(iqn), tag);
	g->next = iscsi_g.tpgs;
	iscsi_g.tpgs = g;
	return g;
}

static int build_targets(struct config *cfg, char *err, size_t errlen)
{
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++) {
			struct cfg_tpg *t = &cfg->targets[i].tpgs[j];
			t->rt = iscsi_tpg_get(cfg->targets[i].iqn, t->tag);
			if (!t->rt)
				return -ENOMEM;
			t->rt->cfg = t;
		}
	struct iscsi_alua_plan *plan;
	int rc = iscsi_alua_prepare(NULL, cfg, &plan, err, errlen);
	if (rc)
		return rc;
	iscsi_alua_commit(plan);
	return 0;
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

bool config_has_portal(const struct config *cfg, const struct iscsi_portal *ip)
{
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++)
			for (size_t k = 0; k < cfg->targets[i].tpgs[j].nportals; k++) {
				const struct cfg_portal *p = &cfg->targets[i].tpgs[j].portals[k];
				if (p->port == ip->port && p->iser == ip->iser && !strcmp(p->host, ip->host))
					return true;
			}
	return false;
}

int iscsi_portal_listen(const struct config *cfg, const struct cfg_portal *p, struct iscsi_portal **out, char *err,
			size_t errlen)
{
	struct iscsi_portal *ip = iscsi_g.portals;
	while (ip && !(ip->port == p->port && ip->iser == p->iser && !strcmp(ip->host, p->host)))
		ip = ip->next;
	if (!ip) {
		if (strlen(p->host) >= sizeof(ip->host)) {
			snprintf(err, errlen, "portal %s: address too long", p->host);
			return -EINVAL;
		}
		ip = calloc(1, sizeof(*ip));
		if (!ip)
			return -ENOMEM;
		ip->ops = p->iser ? &iser_transport : &tcp_transport;
		snprintf(ip->host, sizeof(ip->host), "%s", p->host);
		ip->port = p->port;
		ip->iser = p->iser;
		snprintf(ip->name, sizeof(ip->name), "%s:%u (%s)", p->host, p->port, ip->ops->name);
		if (stats_portal_init(ip, iscsi_g.nreactors)) {
			free(ip);
			return -ENOMEM;
		}
		ip->next = iscsi_g.portals;
		/* Published whole: statistics readers walk the list from other threads. */
		__atomic_store_n(&iscsi_g.portals, ip, __ATOMIC_RELEASE);
	}
	*out = ip;
	if (ip->l)
		return 0;
	const struct cfg_portal *clash = p->iser ? tcp_clash(cfg, p) : NULL;
	if (clash)
		log_warn("iSER portal %s:%u and TCP portal %s:%u share a port: fine on RoCE and InfiniBand, "
			 "but on iWARP the RDMA listener uses the TCP port space and cannot coexist",
			 p->host, p->port, clash->host, clash->port);
	struct xp_listen_params lp = {
		.admit = admit_conn, .accept = conn_accept, .dropped = admit_dropped, .arg = ip,
		.keepalive_s = cfg->tcp_keepalive_s,
		.srq_depth = cfg->iser_srq,
	};
	int rc = ip->ops->listen(p->host, p->port, iscsi_g.reactors[0], &lp, &ip->l, err, errlen);
	if (rc) {
		ip->l = NULL;
		if (rc == -EADDRINUSE && clash)
			snprintf(err, errlen, "iSER portal %s:%u cannot listen: TCP portal %s:%u holds the port (iWARP "
				 "shares TCP's port space); move one of them to another address or port",
				 p->host, p->port, clash->host, clash->port);
		return rc;
	}
	log_info("listening on %s", ip->name);
	return 0;
}

void iscsi_portal_unlisten(struct iscsi_portal *ip)
{
	if (!ip->l)
		return;
	ip->ops->unlisten(ip->l);
	ip->l = NULL;
	log_info("%s: no longer listening (connections it took stay)", ip->name);
}

/* Listen on every portal of cfg not listening yet: TCP first (on iWARP a TCP and an RDMA
 * listener cannot share an address and port).  An iSER portal that cannot listen is logged
 * and left out (a host without RDMA still serves TCP); a TCP one is an error. */
static int iscsi_listen_all(const struct config *cfg, char *err, size_t errlen)
{
	for (int iser = 0; iser < 2; iser++)
		for (size_t i = 0; i < cfg->ntargets; i++)
			for (size_t j = 0; j < cfg->targets[i].ntpgs; j++) {
				const struct cfg_tpg *g = &cfg->targets[i].tpgs[j];
				for (size_t k = 0; k < g->nportals; k++) {
					const struct cfg_portal *p = &g->portals[k];
					struct iscsi_portal *ip;
					if (p->iser != (bool)iser)
						continue;
					int rc = iscsi_portal_listen(cfg, p, &ip, err, errlen);
					if (rc && p->iser) {
						log_err("%s; this portal is not served, the others are", err);
						err[0] = 0;
					} else if (rc) {
						if (!err[0])
							snprintf(err, errlen, "%s:%u: %s", p->host, p->port, strerror(-rc));
						return rc;
					}
				}
			}
	return 0;
}

/* Listen on every portal of the running configuration. */
static int iscsi_listen(char *err, size_t errlen)
{
	return iscsi_listen_all(iscsi_g.cfg, err, errlen);
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
		rc = build_targets(cfg, err, errlen);
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
	for (struct iscsi_portal *ip = iscsi_g.portals; ip; ip = ip->next)
		if (ip->l) {
			ip->ops->unlisten(ip->l);
			ip->l = NULL;
		}
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
	for (size_t i = 0; iscsi_g.cfg && i < iscsi_g.cfg->nbackstores; i++) {
		struct backstore *bs = iscsi_g.cfg->backstores[i].rt_bs;
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
	for (size_t i = 0; iscsi_g.cfg && i < iscsi_g.cfg->nbackstores; i++)
		iscsi_backstore_close(&iscsi_g.cfg->backstores[i]);
	iscsi_apply_free();
	stats_free();
	scsi_alua_free_all();
	while (iscsi_g.tpgs) {
		struct iscsi_tpg *g = iscsi_g.tpgs;
		iscsi_g.tpgs = g->next;
		free(g);
	}
	while (iscsi_g.portals) {
		struct iscsi_portal *p = iscsi_g.portals;
		iscsi_g.portals = p->next;
		free(p->st);
		free(p);
	}
}
