/*
 * The running configuration and its stores (runtime.h: who reads and who
 * writes them, under which lock): set at start, swapped whole by a change,
 * added to by the admin socket's one-object additions.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "target/backstore/backstore.h"
#include "target/runtime/runtime_int.h"
#include "target/scsi/alua/alua.h"

pthread_rwlock_t rt_lock = PTHREAD_RWLOCK_INITIALIZER;

static struct config *running;
static struct rt_store **stores;   /* stores[i]: running->backstores[i]'s */
static size_t stores_cap;
static _Atomic unsigned login_timeout_s, shutdown_timeout_s;

struct config *rt_config(void)
{
	return running;
}

struct rt_store *rt_store_at(size_t i)
{
	return stores[i];
}

struct backstore *rt_backstore_at(size_t i)
{
	return rt_store_at(i)->bs;
}

struct rt_store *rt_store_named(const char *name, size_t *index)
{
	for (size_t i = 0; running && i < running->nbackstores; i++)
		if (!strcmp(running->backstores[i].name, name)) {
			if (index)
				*index = i;
			return stores[i];
		}
	return NULL;
}

unsigned rt_login_timeout_s(void)
{
	return atomic_load_explicit(&login_timeout_s, memory_order_relaxed);
}

unsigned rt_shutdown_timeout_s(void)
{
	return atomic_load_explicit(&shutdown_timeout_s, memory_order_relaxed);
}

static void copy_limits(const struct config *c)
{
	atomic_store_explicit(&login_timeout_s, c->login_timeout_s, memory_order_relaxed);
	atomic_store_explicit(&shutdown_timeout_s, c->shutdown_timeout_s, memory_order_relaxed);
}

int rt_start(struct config *cfg, char *err, size_t errlen)
{
	running = cfg;
	copy_limits(cfg);
	stores_cap = cfg->nbackstores;
	if (!(stores = calloc(stores_cap ? stores_cap : 1, sizeof(*stores)))) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < cfg->nbackstores; i++) {
		int rc = rt_store_open(&cfg->backstores[i], &stores[i], err, errlen);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < cfg->ntargets; i++)
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++)
			if (!rt_tpg_get(cfg->targets[i].iqn, cfg->targets[i].tpgs[j].tag)) {
				snprintf(err, errlen, "out of memory");
				return -ENOMEM;
			}
	pthread_rwlock_wrlock(&rt_lock);
	rt_tpgs_point_at(cfg);
	pthread_rwlock_unlock(&rt_lock);
	struct scsi_alua_plan *plan;
	int rc = scsi_alua_prepare(NULL, cfg, &plan, err, errlen);
	if (!rc) {
		scsi_alua_commit(plan);
		rc = scsi_alua_share_config(NULL, cfg, rt_backstore_at, err, errlen);
	}
	if (!rc)
		rc = rt_share_targets(err, errlen);
	return rc;
}

void rt_switch(struct config **next, struct rt_store ***st)
{
	struct config *c = running;
	struct rt_store **s = stores;
	pthread_rwlock_wrlock(&rt_lock);
	running = *next;
	stores = *st;
	stores_cap = running->nbackstores;
	rt_tpgs_point_at(running);
	pthread_rwlock_unlock(&rt_lock);
	copy_limits(running);
	*next = c;
	*st = s;
}

int rt_add_backstore(struct cfg_backstore *b, struct rt_store *s)
{
	size_t n = running->nbackstores;
	int rc = 0;
	pthread_rwlock_wrlock(&rt_lock);
	if (n == stores_cap) {
		size_t cap = stores_cap ? 2 * stores_cap : 16;
		struct rt_store **v = realloc(stores, cap * sizeof(*v));
		if (v) {
			stores = v;
			stores_cap = cap;
		}
	}
	if (n == stores_cap || (rc = config_append_backstore(running, b)))
		rc = -ENOMEM;
	else
		stores[n] = s;
	pthread_rwlock_unlock(&rt_lock);
	return rc;
}

int rt_add_lun(size_t ti, size_t gi, struct cfg_lun *l)
{
	pthread_rwlock_wrlock(&rt_lock);
	int rc = config_append_lun(running, ti, gi, l);
	pthread_rwlock_unlock(&rt_lock);
	return rc;
}

static void flush_done(struct bs_io *io, int res)
{
	*(int *)io->priv = res;
}

int rt_flush(void)
{
	int failed = 0;
	for (size_t i = 0; running && i < running->nbackstores; i++) {
		struct backstore *bs = stores[i] ? stores[i]->bs : NULL;
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

void rt_free(void)
{
	scsi_alua_unshare_config(running);
	for (size_t i = 0; running && stores && i < running->nbackstores; i++)
		rt_store_put(stores[i]);
	free(stores);
	stores = NULL;
	stores_cap = 0;
	scsi_alua_free_all();
	rt_tpgs_free();
	config_free(running);
	running = NULL;
}
