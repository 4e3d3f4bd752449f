/*
 * Data buffers for commands, per reactor.  Buffers come in power-of-two size
 * classes carved from large slabs; a transport that needs them registered
 * (RDMA) registers each slab once through the hook, never a buffer on the
 * I/O path.  Requests larger than a slab get a slab of their own, so there
 * is no size cap per buffer.  A pool may have a byte limit (a peer cannot
 * make it grow without bound) and a warm size: slabs beyond the warm size go
 * back to the system as soon as every buffer in them is free.
 *
 * A pool may serve several RDMA devices (each port of a dual-port NIC is
 * one): every slab is registered with each device attached to the pool, and
 * a work request takes the keys of its connection's device by that device's
 * index in the pool, an array lookup.
 */
#ifndef BUFPOOL_H
#define BUFPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bufpool;
struct slab;

/* Devices one pool registers its slabs with at most (bufpool_dev_attach). */
#define BUFPOOL_MAX_DEVS 8

struct buf_keys {
	uint32_t lkey, rkey;       /* 0 where the slab is not registered with that device */
};

struct buf {
	uint8_t *data;
	size_t len;        /* bytes requested */
	size_t cap;        /* bytes available */
	/* The slab's RDMA keys, indexed by the device's index in the pool (BUFPOOL_MAX_DEVS entries). */
	const struct buf_keys *keys;
	/* keys NULL (no pool's buffer: a store's view): the lkey of the memory on the connection's device, or 0 */
	uint32_t lkey;
	struct bufpool *pool;
	struct buf *next;  /* caller's chaining while handed out */
	struct slab *slab; /* private */
	uint8_t klass;
};

/* Called for each slab and device so a transport can register it (0 or -errno). */
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
/*
 * A connection on a device (ops->ctx names it, e.g. its RDMA PD) needs the
 * pool registered there: the first attach of a device registers every
 * existing slab with it (and every later slab is registered with all
 * attached devices); later attaches of the same ctx only count a user.
 * Returns the device's index (keys[index] in every buffer), -E2BIG past
 * BUFPOOL_MAX_DEVS devices, or the registration's -errno (nothing stays
 * registered with that device then).
 */
int bufpool_dev_attach(struct bufpool *p, const struct bufpool_reg_ops *ops);
/*
 * A user of device idx is done.  Registrations stay for the next connection
 * on the device, unless it went away (bufpool_dev_gone): then the last user's
 * detach deregisters every slab from it and frees the index.
 */
bool bufpool_dev_detach(struct bufpool *p, int idx);
/* Device idx went away: its registrations go with its last user (now, if it has none). */
bool bufpool_dev_gone(struct bufpool *p, int idx);
/* (Both return true when they deregistered the device's slabs just now.) */
/* The index of the device ctx names (not one gone), or -1. */
int bufpool_dev_find(const struct bufpool *p, const void *ctx);
/* Devices attached (registered, or with users); for tests and checks. */
unsigned bufpool_ndevs(const struct bufpool *p);
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
