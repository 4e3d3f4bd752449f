/*
 * Registered memory for iSER: buffers the caller gets from the session's
 * pool (common/bufpool.c, registered with the RDMA device once), and
 * per-task registration of any other caller buffer.
 *
 * Plain caller buffers are registered per task and not cached: a cache keyed
 * by address range would hand out a stale registration after the caller
 * frees the memory and gets the same addresses back with other pages
 * (registration pins the old pages), silently moving data to the wrong
 * place.  Catching that needs memory-release hooks, so callers who care about
 * the cost use isc_buf_alloc() instead.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/reactor.h"
#include "isc_internal.h"

#define ISC_BUF_MAX ((size_t)1 << 31)

/* Index of the last buffer starting at or below p, or -1. */
static long buf_floor(const struct isc_session *s, const uint8_t *p)
{
	long lo = 0, hi = (long)s->nbufs - 1, found = -1;
	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;
		if (s->bufs[mid].start <= p) {
			found = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return found;
}

void *isc_buf_alloc(struct isc_session *s, size_t len)
{
	if (!s || !len || len > ISC_BUF_MAX) {
		errno = EINVAL;
		return NULL;
	}
	if (s->nbufs == s->bufs_cap) {
		size_t n = s->bufs_cap ? s->bufs_cap * 2 : 16;
		struct isc_bufent *nb = realloc(s->bufs, n * sizeof(*nb));
		if (!nb) {
			errno = ENOMEM;
			return NULL;
		}
		s->bufs = nb;
		s->bufs_cap = n;
	}
	struct buf *b = bufpool_get(reactor_bufpool(s->r), len);
	if (!b) {
		errno = ENOMEM;
		return NULL;
	}
	size_t at = (size_t)(buf_floor(s, b->data) + 1);
	memmove(s->bufs + at + 1, s->bufs + at, (s->nbufs - at) * sizeof(*s->bufs));
	s->bufs[at] = (struct isc_bufent){ .start = b->data, .b = b };
	s->nbufs++;
	return b->data;
}

int isc_buf_free(struct isc_session *s, void *p)
{
	if (!s || !p)
		return -EINVAL;
	long i = buf_floor(s, p);
	if (i < 0 || s->bufs[i].start != p)
		return -EINVAL;
	bufpool_put(s->bufs[i].b);
	memmove(s->bufs + i, s->bufs + i + 1, (s->nbufs - (size_t)i - 1) * sizeof(*s->bufs));
	s->nbufs--;
	return 0;
}

void isc_bufs_free_all(struct isc_session *s)
{
	for (size_t i = 0; i < s->nbufs; i++)
		bufpool_put(s->bufs[i].b);
	free(s->bufs);
	s->bufs = NULL;
	s->nbufs = s->bufs_cap = 0;
}

/*
 * A new iSER connection: the pool gets registered with its device.  A
 * reconnect that lands on another device (the other port of a NIC) registers
 * the pool there too, lazily; the session then stops using the first one,
 * whose registrations stay for a reconnect back to it unless that device was
 * removed (bufpool_dev_detach), and otherwise go with the session.
 */
int isc_mem_attach(struct isc_session *s, struct xp_conn *xc)
{
	void *dev = xc->ops->rdma_dev(xc);
	if (dev == s->rdma_dev)
		return 0;
	int rc = xc->ops->pool_register(dev, reactor_bufpool(s->r));
	if (rc == -E2BIG) {
		char at[NETADDR_HOST_LEN];
		isc_seterr(s, "iSER connection to %s: the session's buffer pool is registered with %d RDMA devices "
			      "already, the most it serves",
			   isc_at(s, at, sizeof(at)), BUFPOOL_MAX_DEVS);
		return rc;
	}
	if (rc < 0) {
		isc_seterr(s, "cannot register the session's buffer pool with the RDMA device: %s", strerror(-rc));
		return rc;
	}
	if (s->rdma_dev)
		bufpool_dev_detach(reactor_bufpool(s->r), s->pool_dev);
	s->rdma_dev = dev;
	s->pool_dev = rc;
	return 0;
}

/* The STag the target uses for this task's buffer: the pool's, or a registration of its own. */
int isc_task_map(struct isc_session *s, struct isc_task *t, uint32_t *rkey)
{
	const uint8_t *p = t->cmd.data;
	long i = buf_floor(s, p);
	if (i >= 0) {
		const struct buf *b = s->bufs[i].b;
		uint32_t k = b->keys ? b->keys[s->pool_dev].rkey : 0;
		if ((size_t)(p - b->data) + t->cmd.len <= b->cap && k) {
			*rkey = k;
			return 0;
		}
	}
	if (t->mr && t->mr_dev == s->rdma_dev) {
		*rkey = t->rkey;
		return 0;
	}
	isc_task_unmap(t);
	int rc = s->xops->mem_reg(s->rdma_dev, t->cmd.data, t->cmd.len, t->cmd.dir == ISC_DIR_READ, &t->rkey,
				 &t->mr);
	if (rc) {
		t->mr = NULL;
		s->issue_err_said = true;
		isc_seterr(s, "cannot register the %u-byte %s buffer at %p with the RDMA device: %s", t->cmd.len,
			   t->cmd.dir == ISC_DIR_READ ? "read" : "write", t->cmd.data, strerror(-rc));
		return rc;
	}
	t->mr_dev = s->rdma_dev;
	*rkey = t->rkey;
	return 0;
}

void isc_task_unmap(struct isc_task *t)
{
	if (t->mr)
		iser_transport.mem_dereg(t->mr);
	t->mr = NULL;
}
