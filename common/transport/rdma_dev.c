/*
 * iSER transport: RDMA devices (one PD each, shared by every reactor),
 * shared receive queues, and registering the reactors' buffer pools and
 * other memory with them.
 */
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"
#include "common/netaddr.h"
#include "common/transport/rdma_int.h"
#include "common/util.h"

static pthread_mutex_t dev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rdma_dev *devs;

struct rdma_dev *iser_dev_get(struct ibv_context *verbs)
{
	pthread_mutex_lock(&dev_lock);
	struct rdma_dev *d;
	for (d = devs; d; d = d->next)
		if (d->verbs == verbs && !atomic_load(&d->removed))
			goto out;
	d = calloc(1, sizeof(*d));
	if (!d)
		goto out;
	d->verbs = verbs;
	d->pd = ibv_alloc_pd(verbs);
	if (!d->pd || ibv_query_device(verbs, &d->attr)) {
		if (d->pd)
			ibv_dealloc_pd(d->pd);
		free(d);
		d = NULL;
		goto out;
	}
	d->next = devs;
	devs = d;
out:
	pthread_mutex_unlock(&dev_lock);
	return d;
}

/* Registering pool slabs: iWARP RDMA READ sinks need remote write access. */
static int pool_reg(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey, void **handle)
{
	struct rdma_dev *d = ctx;
	struct ibv_mr *mr = ibv_reg_mr(d->pd, addr, len,
				       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr)
		return -errno;
	*lkey = mr->lkey;
	*rkey = mr->rkey;
	*handle = mr;
	return 0;
}

static void pool_dereg(void *ctx, void *handle)
{
	(void)ctx;
	ibv_dereg_mr(handle);
}

/*
 * The reactor's pool registered with the connection's device (lazily, with
 * the first connection on that device there).  The index is the pool's, kept
 * on the connection, so the I/O path picks its keys without a search.
 */
int iser_pool_attach(struct rdma_conn *c, struct bufpool *p)
{
	struct bufpool_reg_ops ops = { .reg = pool_reg, .dereg = pool_dereg, .ctx = c->dev };
	/*
	 * Checked before registering: the removal's message to this reactor
	 * comes after the flag is set, so a pool that joins now still hears of it.
	 */
	int rc = atomic_load(&c->dev->removed) ? -ENODEV : bufpool_dev_attach(p, &ops);
	if (rc == -E2BIG)
		log_limited(LOG_WARN, "%s: iSER connection on RDMA device %s refused: this reactor's buffer pool is "
				      "registered with %d RDMA devices already, the most it serves",
			    c->xc.peer, ibv_get_device_name(c->id->verbs->device), BUFPOOL_MAX_DEVS);
	else if (rc < 0)
		log_limited(LOG_WARN, "%s: cannot register the buffer pool with RDMA device %s: %s", c->xc.peer,
			    ibv_get_device_name(c->id->verbs->device), strerror(-rc));
	if (rc < 0)
		return rc;
	c->pool = p;
	c->pool_dev = rc;
	return 0;
}

/* On every reactor: its pool lets go of a removed device (now, or with its last connection there). */
static void pool_dev_removed(void *arg)
{
	struct rdma_dev *d = arg;
	struct reactor *r = reactor_self();
	struct bufpool *p = reactor_bufpool(r);
	if (bufpool_dev_gone(p, bufpool_dev_find(p, d)))
		log_info("reactor %d: buffer pool deregistered from RDMA device %s (removed)", reactor_index(r),
			 ibv_get_device_name(d->verbs->device));
}

/*
 * A device went away (a connection's or a listener's DEVICE_REMOVAL, whichever
 * comes first: a connection closed by the peer's disconnect may never see
 * it).  Every reactor's pool hears of it; the PD stays (see
 * docs/architecture.md, "Registered buffers on several devices").  The
 * rdma_dev is never freed: a pool may still name it.
 */
void iser_dev_removed(struct rdma_dev *d)
{
	if (!d || atomic_exchange(&d->removed, true))
		return;
	log_warn("RDMA device %s removed: its connections close, every buffer pool lets go of it",
		 ibv_get_device_name(d->verbs->device));
	reactor_send_all(pool_dev_removed, d);
}

struct rdma_dev *iser_dev_find(struct ibv_context *verbs)
{
	pthread_mutex_lock(&dev_lock);
	struct rdma_dev *d = devs;
	while (d && (d->verbs != verbs || atomic_load(&d->removed)))
		d = d->next;
	pthread_mutex_unlock(&dev_lock);
	return d;
}

/* ---- shared receive queues (struct rdma_srq: rdma_int.h) ---------------- */

static struct rdma_srq *srqs;

int iser_srq_post(struct rdma_srq *s, struct wr_ctx *w)
{
	struct ibv_sge sge = { .addr = (uintptr_t)w->buf, .length = RDMA_RX_SLOT, .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = (uintptr_t)w, .sg_list = &sge, .num_sge = 1 }, *bad;
	int rc = ibv_post_srq_recv(s->srq, &wr, &bad);
	w->posted = !rc;
	return -rc;
}

static void srq_free(struct rdma_srq *s)
{
	if (s->srq)
		ibv_destroy_srq(s->srq);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->mem)
		munmap(s->mem, (size_t)s->depth * RDMA_RX_SLOT);
	free(s->ctx);
	free(s);
}


/* The shared receive queue of (r, d), made with its first user; NULL when the device has none to give. */
struct rdma_srq *iser_srq_get(struct reactor *r, struct rdma_dev *d, unsigned depth)
{
	pthread_mutex_lock(&dev_lock);
	struct rdma_srq *s = srqs;
	while (s && (s->r != r || s->dev != d))
		s = s->next;
	pthread_mutex_unlock(&dev_lock);
	if (s)
		return s;
	depth = MIN(depth, (unsigned)d->attr.max_srq_wr);
	if (!d->attr.max_srq || depth < RDMA_SRQ_MIN_SHARE || !(s = calloc(1, sizeof(*s))))
		return NULL;
	*s = (struct rdma_srq){ .r = r, .dev = d, .depth = depth };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = depth, .max_sge = 1 } };
	s->mem = iser_slots_alloc((size_t)depth * RDMA_RX_SLOT);
	s->ctx = calloc(depth, sizeof(*s->ctx));
	if (!s->mem || !s->ctx || !(s->mr = ibv_reg_mr(d->pd, s->mem, (size_t)depth * RDMA_RX_SLOT, IBV_ACCESS_LOCAL_WRITE)) ||
	    !(s->srq = ibv_create_srq(d->pd, &sa))) {
		log_limited(LOG_WARN, "reactor %d: no shared receive queue of %u on RDMA device %s (%s): its connections "
				      "post receives of their own", reactor_index(r), depth,
			    ibv_get_device_name(d->verbs->device), strerror(errno));
		srq_free(s);
		return NULL;
	}
	for (uint32_t i = 0; i < depth; i++) {
		s->ctx[i] = (struct wr_ctx){ .kind = WR_RECV, .slot = i, .buf = s->mem + (size_t)i * RDMA_RX_SLOT };
		if (iser_srq_post(s, &s->ctx[i])) {
			srq_free(s);
			return NULL;
		}
	}
	pthread_mutex_lock(&dev_lock);
	s->next = srqs;
	srqs = s;
	pthread_mutex_unlock(&dev_lock);
	log_info("reactor %d: shared receive queue on RDMA device %s: %u receives, %.1f MiB", reactor_index(r),
		 ibv_get_device_name(d->verbs->device), depth, (double)depth * RDMA_RX_SLOT / (1 << 20));
	return s;
}

/* A new connection takes the smallest share of s; false when even that is promised to others. */
bool iser_srq_join(struct rdma_srq *s, struct rdma_conn *c)
{
	if (s->depth - s->promised < RDMA_SRQ_MIN_SHARE)
		return false;
	s->promised += RDMA_SRQ_MIN_SHARE;
	s->users++;
	c->srq_share = RDMA_SRQ_MIN_SHARE;
	return true;
}

/* transport_ops.grant: see struct rdma_srq. */
uint32_t iser_srq_grant(struct xp_conn *xc, uint32_t floor, uint32_t want)
{
	struct rdma_conn *c = (struct rdma_conn *)xc;
	struct rdma_srq *s = c->srq;
	if (!s)
		return want;
	uint32_t others = s->promised - c->srq_share;
	/* What the others leave; never below our old window, which our old share covered. */
	uint32_t room = s->depth - others - RDMA_SRQ_SPARE;
	uint32_t fair = MAX(s->depth / (s->users + 1), (uint32_t)RDMA_SRQ_MIN_SHARE) - RDMA_SRQ_SPARE;
	uint32_t g = MAX(floor, MIN(want, MIN(fair, room)));
	c->srq_share = MAX(g, (uint32_t)RDMA_SRQ_MIN_WINDOW) + RDMA_SRQ_SPARE;
	s->promised = others + c->srq_share;
	return g;
}

/* A connection gives its share back; the last one takes the queue with it (its QP is gone already). */
void iser_srq_put(struct rdma_srq *s, uint32_t share)
{
	s->promised -= share;
	if (--s->users)
		return;
	pthread_mutex_lock(&dev_lock);
	struct rdma_srq **pp = &srqs;
	while (*pp != s)
		pp = &(*pp)->next;
	*pp = s->next;
	pthread_mutex_unlock(&dev_lock);
	log_info("reactor %d: shared receive queue on RDMA device %s released with its last connection",
		 reactor_index(s->r), ibv_get_device_name(s->dev->verbs->device));
	srq_free(s);
}

uint8_t *iser_slots_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

void *iser_dev_of(struct xp_conn *xc)
{
	return ((struct rdma_conn *)xc)->dev;
}

int iser_pool_register(void *dev, struct bufpool *p)
{
	struct bufpool_reg_ops ops = { .reg = pool_reg, .dereg = pool_dereg, .ctx = dev };
	return atomic_load(&((struct rdma_dev *)dev)->removed) ? -ENODEV : bufpool_dev_attach(p, &ops);
}

/* A write source needs no local write access: it may be read-only memory. */
int iser_mem_reg(void *dev, void *addr, size_t len, bool peer_writes, uint32_t *rkey, void **handle)
{
	struct rdma_dev *d = dev;
	int access = peer_writes ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *mr = ibv_reg_mr(d->pd, addr, len, access);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	*rkey = mr->rkey;
	*handle = mr;
	return 0;
}

/* Access 0: local reads only.  The peer never learns its rkey, but it could not use one either. */
int iser_mem_reg_local(void *dev, void *addr, size_t len, uint32_t *lkey, void **handle)
{
	struct rdma_dev *d = dev;
	if (atomic_load(&d->removed))
		return -ENODEV;
	struct ibv_mr *mr = ibv_reg_mr(d->pd, addr, len, 0);
	if (!mr)
		return errno ? -errno : -ENOMEM;
	*lkey = mr->lkey;
	*handle = mr;
	return 0;
}

const char *iser_dev_name(void *dev)
{
	return ibv_get_device_name(((struct rdma_dev *)dev)->verbs->device);
}

void iser_mem_dereg(void *handle)
{
	if (handle)
		ibv_dereg_mr(handle);
}

