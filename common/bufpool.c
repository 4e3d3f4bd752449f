/*
 * Size-classed buffer pool.  Class k holds buffers of 4 KiB << k.  Small
 * classes are carved from 4 MiB slabs; a buffer larger than a slab gets a
 * slab of its own.  Slabs are kept (and stay registered) for the pool's
 * life, so the I/O path never allocates memory or registers it once warm.
 */
#include "common/bufpool.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BUF_MIN_SHIFT 12                /* 4 KiB */
#define BUF_CLASSES 20                  /* up to 2 GiB */
#define SLAB_SIZE (4u << 20)

struct slab {
	void *mem;
	size_t len;
	void *reg_handle;
	uint32_t lkey, rkey;
	struct buf *bufs;
	struct slab *next;
};

struct bufpool {
	struct buf *free[BUF_CLASSES];
	struct slab *slabs;
	size_t in_use;
	struct bufpool_reg_ops reg;
	bool have_reg;
};

static int size_class(size_t len)
{
	int k = 0;
	while (k < BUF_CLASSES - 1 && ((size_t)1 << (BUF_MIN_SHIFT + k)) < len)
		k++;
	return ((size_t)1 << (BUF_MIN_SHIFT + k)) >= len ? k : -1;
}

struct bufpool *bufpool_create(void)
{
	return calloc(1, sizeof(struct bufpool));
}

static int slab_register(struct bufpool *p, struct slab *s)
{
	if (!p->have_reg)
		return 0;
	int rc = p->reg.reg(p->reg.ctx, s->mem, s->len, &s->lkey, &s->rkey, &s->reg_handle);
	if (rc)
		return rc;
	/* Every buffer of the slab carries the slab's keys. */
	size_t nb = s->bufs ? s->len / s->bufs[0].cap : 0;
	for (size_t i = 0; i < nb; i++) {
		s->bufs[i].lkey = s->lkey;
		s->bufs[i].rkey = s->rkey;
	}
	return 0;
}

void bufpool_destroy(struct bufpool *p)
{
	if (!p)
		return;
	while (p->slabs) {
		struct slab *s = p->slabs;
		p->slabs = s->next;
		if (p->have_reg && s->reg_handle)
			p->reg.dereg(p->reg.ctx, s->reg_handle);
		munmap(s->mem, s->len);
		free(s->bufs);
		free(s);
	}
	free(p);
}

int bufpool_set_reg(struct bufpool *p, const struct bufpool_reg_ops *ops)
{
	p->reg = *ops;
	p->have_reg = true;
	for (struct slab *s = p->slabs; s; s = s->next) {
		int rc = slab_register(p, s);
		if (rc)
			return rc;
	}
	return 0;
}

static int grow(struct bufpool *p, int k)
{
	size_t bsize = (size_t)1 << (BUF_MIN_SHIFT + k);
	size_t len = bsize > SLAB_SIZE ? bsize : SLAB_SIZE;
	size_t nb = len / bsize;
	struct slab *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->bufs = calloc(nb, sizeof(*s->bufs));
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
	for (size_t i = 0; i < nb; i++) {
		struct buf *b = &s->bufs[i];
		b->data = (uint8_t *)s->mem + i * bsize;
		b->cap = bsize;
		b->pool = p;
		b->klass = (uint8_t)k;
		b->next = p->free[k];
		p->free[k] = b;
	}
	int rc = slab_register(p, s);
	s->next = p->slabs;
	p->slabs = s;
	return rc;
}

struct buf *bufpool_get(struct bufpool *p, size_t len)
{
	int k = size_class(len ? len : 1);
	if (k < 0)
		return NULL;
	if (!p->free[k] && grow(p, k))
		return NULL;
	struct buf *b = p->free[k];
	p->free[k] = b->next;
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
	b->next = p->free[b->klass];
	p->free[b->klass] = b;
	p->in_use--;
}

size_t bufpool_in_use(const struct bufpool *p)
{
	return p->in_use;
}
