/*
 * Data buffers for commands, per reactor.  Buffers come in power-of-two size
 * classes carved from large slabs; a transport that needs them registered
 * (RDMA) registers each slab once through the hook, never a buffer on the
 * I/O path.  Requests larger than a slab get a slab of their own, so there
 * is no size cap per buffer.  A pool may have a byte limit (a peer cannot
 * make it grow without bound) and a warm size: slabs beyond the warm size go
 * back to the system as soon as every buffer in them is free.
 */
#ifndef BUFPOOL_H
#define BUFPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bufpool;
struct slab;

struct buf {
	uint8_t *data;
	size_t len;        /* bytes requested */
	size_t cap;        /* bytes available */
	uint32_t lkey;     /* RDMA local key of the slab (0 without RDMA) */
	uint32_t rkey;
	struct bufpool *pool;
	struct buf *next;  /* caller's chaining while handed out */
	struct slab *slab; /* private */
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
/*
 * Limits: max_bytes caps the slabs the pool holds (0: no cap); slabs held
 * beyond keep_bytes are unmapped once all their buffers are free (keep_bytes
 * >= max_bytes, or SIZE_MAX: slabs are kept for the pool's life).
 */
void bufpool_set_limits(struct bufpool *p, size_t max_bytes, size_t keep_bytes);
/* Register existing and future slabs with a transport (e.g. an RDMA PD). */
int bufpool_set_reg(struct bufpool *p, const struct bufpool_reg_ops *ops);
/* A buffer of at least len bytes (len may be 0); NULL when out of memory or at the cap. */
struct buf *bufpool_get(struct bufpool *p, size_t len);
void bufpool_put(struct buf *b);
/* Bytes a buffer for len takes (its size class); 0 if len is too large for any class. */
size_t bufpool_buf_size(size_t len);
/* Could bufpool_get(p, len) succeed without passing the cap? */
bool bufpool_has_room(const struct bufpool *p, size_t len);
/* Buffers currently handed out (for leak checks), and bytes of slabs held. */
size_t bufpool_in_use(const struct bufpool *p);
size_t bufpool_bytes(const struct bufpool *p);

#endif
