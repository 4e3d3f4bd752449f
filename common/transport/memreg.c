/*
 * Memory registered on demand with each RDMA device (memreg.h).  The fast
 * path is a scan of at most BUFPOOL_MAX_DEVS entries without a lock: an entry
 * is filled under the mutex before the count that publishes it grows, and
 * its lkey turns from 0 to the key once, when its thread is done.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/bufpool.h"
#include "common/log.h"
#include "common/transport/memreg.h"
#include "common/transport/transport.h"

struct memreg_dev {
	void *dev;                       /* the transport's device (rdma_dev()) */
	const struct transport_ops *ops;
	_Atomic uint32_t lkey;           /* 0 until registered */
	void *handle;                    /* the registration, written by its thread (read after the join) */
	pthread_t thr;
	bool thr_started;
	struct memreg *m;
};

struct memreg {
	void *addr;
	size_t len;
	char what[64];
	pthread_mutex_t mu;              /* adding an entry */
	_Atomic unsigned ndevs;
	bool full_told;
	struct memreg_dev devs[BUFPOOL_MAX_DEVS];   /* as many devices as a buffer pool serves */
};

struct memreg *memreg_create(void *addr, size_t len, const char *what)
{
	struct memreg *m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->addr = addr;
	m->len = len;
	snprintf(m->what, sizeof(m->what), "%s", what);
	pthread_mutex_init(&m->mu, NULL);
	return m;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *reg_thread(void *arg)
{
	struct memreg_dev *d = arg;
	struct memreg *m = d->m;
	const char *dev = d->ops->dev_name(d->dev);
	double t0 = now_s();
	uint32_t lkey = 0;
	void *h = NULL;
	int rc = d->ops->mem_reg_local(d->dev, m->addr, m->len, &lkey, &h);
	if (rc == 0 && !lkey) {
		d->ops->mem_dereg(h);   /* 0 means "not registered" here: never seen, but not trusted */
		h = NULL;
		rc = -EINVAL;
	}
	if (rc) {
		log_warn("%s: cannot register its %zu MiB with RDMA device %s: %s; iSER reads from it copy into "
			 "buffers instead%s",
			 m->what, m->len >> 20, dev, strerror(-rc),
			 rc == -ENOMEM || rc == -EAGAIN || rc == -EPERM
				 ? " (pinning needs RLIMIT_MEMLOCK this large, LimitMEMLOCK= under systemd)"
				 : "");
		return NULL;
	}
	d->handle = h;
	atomic_store_explicit(&d->lkey, lkey, memory_order_release);
	log_info("%s: registered with RDMA device %s in %.2f s (%zu MiB): iSER reads are sent from it", m->what, dev,
		 now_s() - t0, m->len >> 20);
	return NULL;
}

/* The entry for dev among the first n published, or NULL. */
static const struct memreg_dev *find(const struct memreg *m, const void *dev, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (m->devs[i].dev == dev)
			return &m->devs[i];
	return NULL;
}

uint32_t memreg_lkey(struct memreg *m, struct xp_conn *xc)
{
	const struct transport_ops *ops = xc->ops;
	if (!ops->rdma_dev || !ops->mem_reg_local)
		return 0;
	void *dev = ops->rdma_dev(xc);
	unsigned n = atomic_load_explicit(&m->ndevs, memory_order_acquire);
	const struct memreg_dev *e = find(m, dev, n);
	if (e)
		return atomic_load_explicit(&e->lkey, memory_order_acquire);

	pthread_mutex_lock(&m->mu);
	n = atomic_load_explicit(&m->ndevs, memory_order_relaxed);
	if ((e = find(m, dev, n))) {   /* added by another reactor since the scan above */
		pthread_mutex_unlock(&m->mu);
		return atomic_load_explicit(&e->lkey, memory_order_acquire);
	}
	if (n == BUFPOOL_MAX_DEVS) {
		if (!m->full_told)
			log_warn("%s: registered with %d RDMA devices already, the most it is: iSER reads on others copy "
				 "into buffers", m->what, BUFPOOL_MAX_DEVS);
		m->full_told = true;
		pthread_mutex_unlock(&m->mu);
		return 0;
	}
	struct memreg_dev *d = &m->devs[n];
	*d = (struct memreg_dev){ .dev = dev, .ops = ops, .m = m };
	int rc = pthread_create(&d->thr, NULL, reg_thread, d);
	d->thr_started = rc == 0;
	if (rc)
		log_warn("%s: cannot start registering it with RDMA device %s: %s; iSER reads from it copy into buffers",
			 m->what, ops->dev_name(dev), strerror(rc));
	/* Published even when the thread could not start: the device is not asked again. */
	atomic_store_explicit(&m->ndevs, n + 1, memory_order_release);
	pthread_mutex_unlock(&m->mu);
	return 0;
}

void memreg_destroy(struct memreg *m)
{
	if (!m)
		return;
	unsigned n = atomic_load(&m->ndevs);
	for (unsigned i = 0; i < n; i++) {
		struct memreg_dev *d = &m->devs[i];
		if (d->thr_started)
			pthread_join(d->thr, NULL);
		if (d->handle)
			d->ops->mem_dereg(d->handle);
	}
	pthread_mutex_destroy(&m->mu);
	free(m);
}
