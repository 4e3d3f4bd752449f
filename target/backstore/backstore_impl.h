/*
 * Backstore internals shared by backstore.c and the per-type files; not for
 * users of backstore.h.
 */
#ifndef BACKSTORE_IMPL_H
#define BACKSTORE_IMPL_H

#include <stdarg.h>
#include <pthread.h>
#include <stdatomic.h>

#include "target/backstore/backstore.h"

struct bs_ops {
	/* Fill bs (size, block_size, fd/priv, ...) from cfg; 0 or -errno with err written. */
	int (*open)(struct backstore *bs, const struct backstore_cfg *cfg, char *err, size_t errlen);
	void (*close)(struct backstore *bs);
	/* Arguments are already checked; must end with io->cb. */
	void (*submit)(struct backstore *bs, struct bs_io *io);
	/* offset already checked; NULL means everything is mapped. */
	int (*lba_status)(struct backstore *bs, uint64_t offset, bool *mapped, uint64_t *run);
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
	bool discard;            /* block: UNMAP is a device discard (reads after it are undefined) */
	/* file, block */
	int fd;
	bool direct;             /* fd is O_DIRECT: buffers must be aligned to dio_align */
	uint32_t dio_align;
	/* Learned at run time, shared by reactors: only ever set to true. */
	_Atomic bool no_punch;   /* FALLOC_FL_PUNCH_HOLE unsupported */
	_Atomic bool no_zero;    /* FALLOC_FL_ZERO_RANGE unsupported */
	/* ram */
	uint8_t *mem;
	_Atomic uint64_t *ram_map;   /* thin: one bit per page, set while written */
	/* BS_WRITE_ATOMIC: odd while one copies (ram_seq), one at a time (ram_atomic_mu). */
	_Atomic uint64_t ram_seq;
	pthread_mutex_t ram_atomic_mu;
};

extern const struct bs_ops bs_ram_ops;
extern const struct bs_ops bs_file_ops;
extern const struct bs_ops bs_block_ops;

/* "backstore 'NAME': " + fmt into err. */
void bs_errf(const struct backstore *bs, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Complete io with res (sets io->err). */
void bs_complete(struct bs_io *io, int res);

/* The fd engine (file.c), shared by file and block. */
void bs_fd_submit(struct backstore *bs, struct bs_io *io);
void bs_fd_close(struct backstore *bs);

/* True if the whole buffer is zero. */
bool bs_is_zero(const void *buf, size_t len);

#endif
