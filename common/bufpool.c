/*
 * Size-classed buffer pool.  Class k holds buffers of 4 KiB << k.  Small
 * classes are carved from 4 MiB slabs; a buffer larger than a slab gets a
 * slab of its own.  Each slab keeps its own free list, and each class the
 * slabs that have a free buffer, so a slab whose buffers all came back can
 * be unmapped (and deregistered) in O(1) when the pool is above its warm
 * size.  Below it the I/O path never allocates or registers memory.
 */
#include "common/bufpool.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BUF_MIN_SHIFT 12                /* 4 KiB */
#define BUF_CLASSES 20                  /* up to 2 GiB */
#define SLAB_SIZE (4u << 20)

struct slab {
	void *mem;
	size_t len;
	struct buf_keys keys[BUFPOOL_MAX_DEVS];   /* what every buffer of the slab points at */
	void *reg_handle[BUFPOOL_MAX_DEVS];
	struct buf *bufs;
	size_t nbufs;
	struct buf *free;          /* this slab's free buffers */
	size_t nfree;
	uint8_t klass;
	struct slab *next, *prev;  /* every slab of the pool */
	struct slab *pnext, *pprev; /* the class's slabs with a free buffer */
	bool partial;
};

struct bufpool {
	struct slab *partial[BUF_CLASSES];
	struct slab *slabs;
	size_t in_use;
	size_t bytes;
	size_t max_bytes, keep_bytes;
	struct pool_dev {
		struct bufpool_reg_ops reg;
		unsigned users;
		bool used;   /* slabs are registered with it */
		bool gone;   /* the device went away: deregister with the last user */
	} dev[BUFPOOL_MAX_DEVS];
};

static int size_class(size_t len)
{
	int k = 0;
	while (k < BUF_CLASSES - 1 && ((size_t)1 << (BUF_MIN_SHIFT + k)) < len)
		k++;
	return ((size_t)1 << (BUF_MIN_SHIFT + k)) >= len ? k : -1;
}

static size_t slab_len(int k)
{
	size_t bsize = (size_t)1 << (BUF_MIN_SHIFT + k);
	return bsize > SLAB_SIZE ? bsize : SLAB_SIZE;
}

size_t bufpool_buf_size(size_t len)
{
	int k = size_class(len ? len : 1);
	return k < 0 ? 0 : (size_t)1 << (BUF_MIN_SHIFT + k);
}

struct bufpool *bufpool_create(void)
{
	struct bufpool *p = calloc(1, sizeof(struct bufpool));
	if (p)
		p->keep_bytes = SIZE_MAX;
	return p;
}

void bufpool_set_limits(struct bufpool *p, size_t max_bytes, size_t keep_bytes)
{
	p->max_bytes = max_bytes;
	p->keep_bytes = keep_bytes;
}

static void slab_dereg(struct bufpool *p, struct slab *s, int d)
{
	if (s->reg_handle[d])
		p->dev[d].reg.dereg(p->dev[d].reg.ctx, s->reg_handle[d]);
	s->reg_handle[d] = NULL;
	s->keys[d] = (struct buf_keys){ 0 };
}

static int slab_reg(struct bufpool *p, struct slab *s, int d)
{
	const struct bufpool_reg_ops *o = &p->dev[d].reg;
	struct buf_keys k;
	void *h = NULL;
	int rc = o->reg(o->ctx, s->mem, s->len, &k.lkey, &k.rkey, &h);
	if (rc)
		return rc;
	s->keys[d] = k;
	s->reg_handle[d] = h;
	return 0;
}

/* A new slab: registered with every device of the pool, or with none. */
static int slab_register(struct bufpool *p, struct slab *s)
{
	for (int d = 0; d < BUFPOOL_MAX_DEVS; d++) {
		if (!p->dev[d].used)
			continue;
		int rc = slab_reg(p, s, d);
		if (rc) {
			while (--d >= 0)
				if (p->dev[d].used)
					slab_dereg(p, s, d);
			return rc;
		}
	}
	return 0;
}

static void partial_add(struct bufpool *p, struct slab *s)
{
	s->pprev = NULL;
	s->pnext = p->partial[s->klass];
	if (s->pnext)
		s->pnext->pprev = s;
	p->partial[s->klass] = s;
	s->partial = true;
}

static void partial_del(struct bufpool *p, struct slab *s)
{
	if (s->pprev)
		s->pprev->pnext = s->pnext;
	else
		p->partial[s->klass] = s->pnext;
	if (s->pnext)
		s->pnext->pprev = s->pprev;
	s->partial = false;
}

static void slab_free(struct bufpool *p, struct slab *s)
{
	if (s->partial)
		partial_del(p, s);
	if (s->prev)
		s->prev->next = s->next;
	else
		p->slabs = s->next;
	if (s->next)
		s->next->prev = s->prev;
	for (int d = 0; d < BUFPOOL_MAX_DEVS; d++)
		if (p->dev[d].used)
			slab_dereg(p, s, d);
	munmap(s->mem, s->len);
	p->bytes -= s->len;
	free(s->bufs);
	free(s);
}

void bufpool_destroy(struct bufpool *p)
{
	if (!p)
		return;
	while (p->slabs)
		slab_free(p, p->slabs);
	free(p);
}

/* Deregister every slab from device d and free its index. */
static void dev_drop(struct bufpool *p, int d)
{
	for (struct slab *s = p->slabs; s; s = s->next)
		slab_dereg(p, s, d);
	p->dev[d] = (struct pool_dev){ 0 };
}

int bufpool_dev_attach(struct bufpool *p, const struct bufpool_reg_ops *ops)
{
	int d, spare = -1;
	/* Connection setup only, never the I/O path: a short scan. */
	for (d = 0; d < BUFPOOL_MAX_DEVS; d++) {
		struct pool_dev *pd = &p->dev[d];
		if (pd->used && !pd->gone && pd->reg.ctx == ops->ctx && pd->reg.reg == ops->reg) {
			pd->users++;
			return d;
		}
		if (!pd->used && spare < 0)
			spare = d;
	}
	if (spare < 0)
		return -E2BIG;
	d = spare;
	p->dev[d] = (struct pool_dev){ .reg = *ops, .used = true, .users = 1 };
	for (struct slab *s = p->slabs; s; s = s->next) {
		int rc = slab_reg(p, s, d);
		if (rc) {
			dev_drop(p, d);
			return rc;
		}
	}
	return d;
}

bool bufpool_dev_detach(struct bufpool *p, int d)
{
	if (d < 0 || d >= BUFPOOL_MAX_DEVS || !p->dev[d].used || !p->dev[d].users)
		return false;
	if (--p->dev[d].users || !p->dev[d].gone)
		return false;
	dev_drop(p, d);
	return true;
}

bool bufpool_dev_gone(struct bufpool *p, int d)
{
	if (d < 0 || d >= BUFPOOL_MAX_DEVS || !p->dev[d].used || p->dev[d].gone)
		return false;
	p->dev[d].gone = true;
	if (p->dev[d].users)
		return false;
	dev_drop(p, d);
	return true;
}

int bufpool_dev_find(const struct bufpool *p, const void *ctx)
{
	for (int d = 0; d < BUFPOOL_MAX_DEVS; d++)
		if (p->dev[d].used && !p->dev[d].gone && p->dev[d].reg.ctx == ctx)
			return d;
	return -1;
}

unsigned bufpool_ndevs(const struct bufpool *p)
{
	unsigned n = 0;
	for (int d = 0; d < BUFPOOL_MAX_DEVS; d++)
		n += p->dev[d].used;
	return n;
}

static int grow(struct bufpool *p, int k)
{
	size_t bsize = (size_t)1 << (BUF_MIN_SHIFT + k);
	size_t len = slab_len(k);
	if (p->max_bytes && p->bytes + len > p->max_bytes)
		return -ENOBUFS;
	struct slab *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->nbufs = len / bsize;
	s->bufs = calloc(s->nbufs, sizeof(*s->bufs));
	/* mmap: page aligned (O_DIRECT) and untouched pages cost nothing. */
	s->mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!s->bufs || s->mem == MAP_FAILED) {
		if (s->mem != MAP_FAILED && s->mem)
			munmap(s->mem, len);
		free(s->bufs);
		free(s);
		return -ENOMEM;
	}
	s->len = len;
	s->klass = (uint8_t)k;
	for (size_t i = 0; i < s->nbufs; i++) {
		struct buf *b = &s->bufs[i];
		b->data = (uint8_t *)s->mem + i * bsize;
		b->cap = bsize;
		b->pool = p;
		b->slab = s;
		b->keys = s->keys;
		b->klass = (uint8_t)k;
		b->next = s->free;
		s->free = b;
	}
	s->nfree = s->nbufs;
	s->next = p->slabs;
	if (s->next)
		s->next->prev = s;
	p->slabs = s;
	p->bytes += len;
	partial_add(p, s);
	int rc = slab_register(p, s);
	if (rc)
		slab_free(p, s);
	return rc;
}

bool bufpool_has_room(const struct bufpool *p, size_t len)
{
	int k = size_class(len ? len : 1);
	if (k < 0)
		return false;
	return p->partial[k] || !p->max_bytes || p->bytes + slab_len(k) <= p->max_bytes;
}

struct buf *bufpool_get(struct bufpool *p, size_t len)
{
	int k = size_class(len ? len : 1);
	if (k < 0)
		return NULL;
	if (!p->partial[k] && grow(p, k))
		return NULL;
	struct slab *s = p->partial[k];
	struct buf *b = s->free;
	s->free = b->next;
	if (--s->nfree == 0)
		partial_del(p, s);
	b->next = NULL;
	b->len = len;
	p->in_use++;
	return b;
}

void bufpool_put(struct buf *b)
{
	if (!b)
		return;
	struct bufpool *p = b->pool;
	struct slab *s = b->slab;
	b->next = s->free;
	s->free = b;
	p->in_use--;
	if (s->nfree++ == 0)
		partial_add(p, s);
	/* Above the warm size, a slab whose buffers all came back goes back to the system. */
	if (s->nfree == s->nbufs && p->bytes > p->keep_bytes)
		slab_free(p, s);
}

size_t bufpool_in_use(const struct bufpool *p)
{
	return p->in_use;
}

size_t bufpool_bytes(const struct bufpool *p)
{
	return p->bytes;
}
