/*
 * Backstore internals shared by backstore.c and the per-type files; not for
 * users of backstore.h.
 */
#ifndef BACKSTORE_IMPL_H
#define BACKSTORE_IMPL_H

#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>

#include "common/util.h"
#include "target/backstore/backstore.h"

/*
 * A backstore kind's operations: its file (NAME.c, named in BACKSTORE_KINDS)
 * defines bs_NAME_ops with designated initializers; a NULL operation is one
 * the kind does not offer, and backstore.c says what that means for each.
 * What the kind offers beyond (atomic writes, compare-and-write, discard,
 * sharing, its serial) its open sets in struct backstore.
 */
struct bs_ops {
	/* The kind's struct, which begins with struct backstore: sizeof(struct bs_fd), ... */
	size_t size;
	/* Fill bs (size, block_size, fd/priv, ...) from cfg; 0 or -errno with err written. */
	int (*open)(struct backstore *bs, const struct backstore_cfg *cfg, char *err, size_t errlen);
	void (*close)(struct backstore *bs);
	/* Arguments are already checked; must end with io->cb. */
	void (*submit)(struct backstore *bs, struct bs_io *io);
	/* offset already checked; NULL means everything is mapped. */
	int (*lba_status)(struct backstore *bs, uint64_t offset, bool *mapped, uint64_t *run);
	/*
	 * Resizing while it runs (backstore_resize()), the kind's rules in which of these it has:
	 * device_size, a kind that follows its device (BS_KIND_FOLLOW): the device's size now, which
	 * backstore_resize() then takes; resize, a kind that grows (BS_KIND_GROW): grow the store to
	 * size (already checked: a positive block multiple, not smaller, not readonly).  Neither: the
	 * kind cannot be resized while it runs.
	 */
	int (*device_size)(struct backstore *bs, uint64_t *bytes, char *err, size_t errlen);
	int (*resize)(struct backstore *bs, uint64_t size, char *err, size_t errlen);
	/* SANITIZE's erase methods (backstore.h); NULL: none.  sanitize gets checked arguments, on a worker thread. */
	unsigned (*sanitize_methods)(const struct backstore *bs);
	int64_t (*sanitize)(struct backstore *bs, unsigned method, uint64_t offset, uint64_t len);
	const char *(*sanitize_how)(const struct backstore *bs, unsigned method);
	/* backstore_read_view() with checked arguments, and its put; NULL: the store gives no views. */
	const uint8_t *(*view)(struct backstore *bs, struct bs_view *v, uint64_t offset, uint64_t len);
	void (*view_put)(struct bs_view *v);
	/* backstore_memreg(); NULL: none. */
	struct memreg *(*memreg)(const struct backstore *bs);
	/* Shared objects (backstore.h), where the store has them: NULL elsewhere. */
	const struct bs_shared_ops *shared;
	/* Appended to "path: required for a ... backstore" when path is missing; NULL: nothing. */
	const char *path_hint;
};

/* backstore_shared_*() call these, one for one; an object's implementation starts with struct bs_shared. */
struct bs_shared {
	const struct bs_shared_ops *ops;
};
struct bs_shared_ops {
	int (*open)(struct backstore *bs, const char *kind, const char *key, struct bs_shared **out);
	void (*close)(struct bs_shared *o);
	int (*read)(struct bs_shared *o, char **text, size_t *len, uint64_t *version);
	int (*write)(struct bs_shared *o, const char *text, size_t len, uint64_t version, uint64_t *now);
	int (*watch)(struct bs_shared *o, bs_notify_fn fn, bs_watch_error_fn efn, void *arg);
	void (*unwatch)(struct bs_shared *o);
	int (*notify)(struct bs_shared *o, const void *data, size_t len, unsigned timeout_ms,
		      struct bs_notify_result *res);
	int (*ack)(struct bs_shared *o, uint64_t notify_id);
	uint64_t (*self)(const struct bs_shared *o);
	int (*join)(struct bs_shared *o, const char *desc);
	void (*leave)(struct bs_shared *o);
	int (*sharers)(struct bs_shared *o, struct bs_sharer **out, size_t *n);
	int (*fence)(struct bs_shared *o, const struct bs_sharer *s, char *err, size_t errlen);
	const char *(*where)(const struct bs_shared *o);
};

struct backstore {
	char *name;
	enum backstore_type type;
	const struct bs_ops *ops;
	uint64_t size;
	uint32_t block_size;
	uint32_t optimal_io;
	uint32_t atomic_max;     /* BS_WRITE_ATOMIC bytes at most; 0: not offered */
	bool thin;
	bool write_cache;
	bool readonly;
	/* block, nvme: UNMAP is a device discard (reads after it are undefined); atomic: a reactor
	 * clears it when the device turns out to refuse discards, others read it */
	_Atomic bool discard;
	uint32_t compare_write_max;  /* BS_COMPARE_WRITE unit (bytes); 0: not offered */
	bool shared;             /* other targets may serve the same blocks */
	char shared_home[256];   /* where its shared objects live (rbd: "pool/namespace"); "" if none */
	char serial[64];         /* the store's identity for the LU serial; "" if none */
	/* backstore_on_resize()'s fn: set under resize_mu and called under it by bs_size_changed() (a
	 * change made underneath); backstore_resize() never calls it, its caller tells the LU */
	pthread_mutex_t resize_mu;
	void (*resize_fn)(void *arg);
	void *resize_arg;
};

/*
 * A kind's own store begins with struct backstore: backstore_open()
 * allocates the kind's ops->size bytes, zeroed, fills the common part and
 * calls its open; the kind gets its struct back with bs_kind_of().
 */
#define bs_kind_of(b, type) container_of((b), type, bs)

/* The fd engine's store (fd.c): file and block are one. */
struct bs_fd {
	struct backstore bs;
	int fd;
	bool direct;             /* fd is O_DIRECT: buffers must be aligned to dio_align */
	uint32_t dio_align;
	bool short_zeroes;       /* a read past the end (a file truncated behind our back) reads zeroes; else -EIO */
	/* Learned at run time, shared by reactors: only ever set to true. */
	_Atomic bool no_punch;   /* FALLOC_FL_PUNCH_HOLE unsupported */
	_Atomic bool no_zero;    /* FALLOC_FL_ZERO_RANGE unsupported */
};
static inline struct bs_fd *bs_fd(const struct backstore *bs)
{
	return bs_kind_of((struct backstore *)bs, struct bs_fd);
}

/* bs_ram_ops, bs_file_ops, ...: one per line of BACKSTORE_KINDS (rbd's without librbd: open explains how to get it). */
#define BS_OPS_DECLARE(T, name, ...) extern const struct bs_ops bs_##name##_ops;
BACKSTORE_KINDS(BS_OPS_DECLARE)

/* What tests and the fuzzer look at inside a ram store: its views out, whether an atomic write is
 * under way, its memory; and the bound of an atomic write's wait for views (RAM_VIEW_WAIT_MAX_MS). */
unsigned bs_ram_nviews(const struct backstore *bs);
bool bs_ram_atomics_idle(const struct backstore *bs);
const uint8_t *bs_ram_mem(const struct backstore *bs);
void bs_ram_set_view_wait(struct backstore *bs, uint32_t max_ms);

/* "backstore 'NAME': " + fmt into err. */
void bs_errf(const struct backstore *bs, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The size changed underneath: store it (rounded down to a block) and, if it differs, tell
 * backstore_on_resize()'s fn (any thread). */
void bs_size_changed(struct backstore *bs, uint64_t size);

/* Complete io with res (sets io->err). */
void bs_complete(struct bs_io *io, int res);

/* The fd engine (fd.c), shared by file and block. */
void bs_fd_submit(struct backstore *bs, struct bs_io *io);
void bs_fd_close(struct backstore *bs);

/* True if the whole buffer is zero. */
bool bs_is_zero(const void *buf, size_t len);
/* A 4096-aligned buffer (every logical block size O_DIRECT and NVMe take); NULL: out of memory. */
void *bs_alloc_aligned(size_t len);
/*
 * io->bounce becomes n bytes of zeroes, or of io->buf's pattern_len-byte
 * pattern repeated (n a multiple of pattern_len): the buffer a WRITE SAME or
 * zeroing writes again and again.  0 or -ENOMEM.
 */
int bs_fill_bounce(struct bs_io *io, bool zero, uint64_t n);
/*
 * End a request of the fd engine or the nvme backstore: a read done through
 * the bounce buffer is copied out, the bounce freed, io completed with
 * io->err.  bs_finish_bounce_deferred is the same as a reactor_defer() call.
 */
void bs_finish_bounce(struct bs_io *io);
void bs_finish_bounce_deferred(void *io);

#endif
