/*
 * Data buffers for commands, per reactor.  Buffers come in power-of-two size
 * classes carved from large slabs allocated once; a transport that needs
 * them registered (RDMA) registers the slabs once through the hook, never a
 * buffer on the I/O path.  Requests larger than the largest class get a slab
 * of their own (registered the same way), so there is no size cap.
 */
#ifndef BUFPOOL_H
#define BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

struct bufpool;

struct buf {
	uint8_t *data;
	size_t len;        /* bytes requested */
	size_t cap;        /* bytes available */
	uint32_t lkey;     /* RDMA local key of the slab (0 without RDMA) */
	uint32_t rkey;
	struct bufpool *pool;
	struct buf *next;  /* free list / caller's chaining */
	uint8_t klass;
};

/* Called for each new slab so a transport can register it (0 or -errno). */
struct bufpool_reg_ops {
	int (*reg)(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey, void **handle);
	void (*dereg)(void *ctx, void *handle);
	void *ctx;
};

struct bufpool *bufpool_create(void);
void bufpool_destroy(struct bufpool *p);
/* Register existing and future slabs with a transport (e.g. an RDMA PD). */
int bufpool_set_reg(struct bufpool *p, const struct bufpool_reg_ops *ops);
/* A buffer of at least len bytes (len may be 0); NULL on out of memory. */
struct buf *bufpool_get(struct bufpool *p, size_t len);
void bufpool_put(struct buf *b);
/* Buffers currently handed out (for leak checks). */
size_t bufpool_in_use(const struct bufpool *p);

#endif
