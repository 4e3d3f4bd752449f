/*
 * Backstore common part: open by type through the per-type ops table,
 * accessors, and the argument checks every type relies on (so a backend
 * never sees an unaligned or out-of-range request).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "target/backstore/backstore_impl.h"

void bs_errf(const struct backstore *bs, char *err, size_t errlen, const char *fmt, ...)
{
	if (!err || errlen == 0)
		return;
	int n = snprintf(err, errlen, "backstore '%s': ", bs && bs->name ? bs->name : "?");
	if (n < 0 || (size_t)n >= errlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
}

#define BS_OPS_ROW(T, name, ...) [BACKSTORE_##T] = &bs_##name##_ops,
static const struct bs_ops *const bs_ops_by_type[] = { BACKSTORE_KINDS(BS_OPS_ROW) };

static const struct bs_ops *bs_ops_for(enum backstore_type t)
{
	return (unsigned)t < ARRAY_SIZE(bs_ops_by_type) ? bs_ops_by_type[t] : NULL;
}

int backstore_open(const struct backstore_cfg *cfg, struct backstore **out, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	*out = NULL;
	if (!cfg->name || !cfg->name[0]) {
		if (err && errlen)
			snprintf(err, errlen, "backstore: name is required");
		return -EINVAL;
	}
	struct backstore tmp = { .name = (char *)cfg->name };
	const struct bs_ops *ops = bs_ops_for(cfg->type);
	if (!ops) {
		bs_errf(&tmp, err, errlen, "type: unknown type %d", (int)cfg->type);
		return -EINVAL;
	}
	char why[96];
	const char *field = backstore_check_geometry(cfg->type, cfg->size, cfg->block_size, why, sizeof(why));
	if (field) {
		bs_errf(&tmp, err, errlen, "%s: %s", field, why);
		return -EINVAL;
	}
	if (backstore_kind_has(cfg->type, BS_KIND_PATH) && (!cfg->path || !cfg->path[0])) {
		bs_errf(&tmp, err, errlen, "path: required for %s%s", backstore_kind(cfg->type)->noun,
			ops->path_hint ? ops->path_hint : "");
		return -EINVAL;
	}
	if ((field = backstore_check_preallocate(cfg->type, cfg->thin, cfg->preallocate, why, sizeof(why)))) {
		bs_errf(&tmp, err, errlen, "%s: %s", field, why);
		return -EINVAL;
	}

	struct backstore *bs = calloc(1, ops->size);
	if (!bs || !(bs->name = strdup(cfg->name))) {
		free(bs);
		bs_errf(&tmp, err, errlen, "out of memory");
		return -ENOMEM;
	}
	bs->type = cfg->type;
	bs->ops = ops;
	bs->thin = cfg->thin;
	bs->write_cache = cfg->write_cache;
	bs->readonly = cfg->readonly;
	bs->block_size = cfg->block_size ? cfg->block_size : 512;
	pthread_mutex_init(&bs->resize_mu, NULL);

	int rc = ops->open(bs, cfg, err, errlen);
	if (rc < 0) {
		pthread_mutex_destroy(&bs->resize_mu);
		free(bs->name);
		free(bs);
		return rc;
	}
	/* A backend that breaks these would let requests past the end. */
	if (bs->size == 0 || bs->size % bs->block_size) {
		bs_errf(bs, err, errlen, "size: %llu is not a positive multiple of the block size %u",
			(unsigned long long)bs->size, bs->block_size);
		backstore_close(bs);
		return -EINVAL;
	}
	*out = bs;
	return 0;
}

void backstore_close(struct backstore *bs)
{
	if (!bs)
		return;
	bs->ops->close(bs);
	pthread_mutex_destroy(&bs->resize_mu);
	free(bs->name);
	free(bs);
}

const char *backstore_name(const struct backstore *bs) { return bs->name; }
enum backstore_type backstore_type(const struct backstore *bs) { return bs->type; }
uint64_t backstore_size(const struct backstore *bs) { return bs->size; }
uint32_t backstore_block_size(const struct backstore *bs) { return bs->block_size; }
bool backstore_readonly(const struct backstore *bs) { return bs->readonly; }
bool backstore_write_cache(const struct backstore *bs) { return __atomic_load_n(&bs->write_cache, __ATOMIC_RELAXED); }
void backstore_set_write_cache(struct backstore *bs, bool on) { __atomic_store_n(&bs->write_cache, on, __ATOMIC_RELAXED); }
bool backstore_thin(const struct backstore *bs) { return bs->thin; }
bool backstore_unmap_zeroes(const struct backstore *bs) { return !bs->discard; }
uint32_t backstore_optimal_io(const struct backstore *bs) { return bs->optimal_io; }
uint32_t backstore_atomic_max(const struct backstore *bs) { return bs->atomic_max; }
uint32_t backstore_compare_write_max(const struct backstore *bs) { return bs->compare_write_max; }

bool backstore_compare_write_fits(const struct backstore *bs, uint64_t offset, uint64_t len)
{
	uint32_t m = bs->compare_write_max;
	return m && len && len <= m && offset % m + len <= m;
}
bool backstore_shared(const struct backstore *bs) { return bs->shared; }
const char *backstore_serial(const struct backstore *bs) { return bs->serial[0] ? bs->serial : NULL; }

/* Shared objects: the store's own, or -ENOTSUP. */
int backstore_shared_open(struct backstore *bs, const char *kind, const char *key, struct bs_shared **out)
{
	*out = NULL;
	return bs->ops->shared ? bs->ops->shared->open(bs, kind, key, out) : -ENOTSUP;
}

void backstore_shared_close(struct bs_shared *o)
{
	if (o)
		o->ops->close(o);
}

int backstore_shared_read(struct bs_shared *o, char **text, size_t *len, uint64_t *version)
{
	return o->ops->read(o, text, len, version);
}

int backstore_shared_write(struct bs_shared *o, const char *text, size_t len, uint64_t version, uint64_t *now)
{
	return o->ops->write(o, text, len, version, now);
}

int backstore_shared_watch(struct bs_shared *o, bs_notify_fn fn, bs_watch_error_fn efn, void *arg)
{
	return o->ops->watch(o, fn, efn, arg);
}

void backstore_shared_unwatch(struct bs_shared *o)
{
	o->ops->unwatch(o);
}

int backstore_shared_notify(struct bs_shared *o, const void *data, size_t len, unsigned timeout_ms,
			    struct bs_notify_result *res)
{
	memset(res, 0, sizeof(*res));
	return o->ops->notify(o, data, len, timeout_ms, res);
}

void backstore_notify_result_free(struct bs_notify_result *res)
{
	free(res->acked);
	free(res->missed);
	memset(res, 0, sizeof(*res));
}

int backstore_shared_ack(struct bs_shared *o, uint64_t notify_id)
{
	return o->ops->ack(o, notify_id);
}

uint64_t backstore_shared_self(const struct bs_shared *o)
{
	return o->ops->self(o);
}

int backstore_shared_join(struct bs_shared *o, const char *desc)
{
	return o->ops->join(o, desc);
}

void backstore_shared_leave(struct bs_shared *o)
{
	o->ops->leave(o);
}

int backstore_shared_sharers(struct bs_shared *o, struct bs_sharer **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	return o->ops->sharers(o, out, n);
}

int backstore_shared_fence(struct bs_shared *o, const struct bs_sharer *s, char *err, size_t errlen)
{
	return o->ops->fence(o, s, err, errlen);
}

const char *backstore_shared_where(const struct bs_shared *o)
{
	return o->ops->where(o);
}

const char *backstore_shared_home(const struct backstore *bs)
{
	return bs->ops->shared && bs->shared_home[0] ? bs->shared_home : NULL;
}

void backstore_on_resize(struct backstore *bs, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&bs->resize_mu);
	bs->resize_fn = fn;
	bs->resize_arg = arg;
	pthread_mutex_unlock(&bs->resize_mu);
}

void bs_size_changed(struct backstore *bs, uint64_t size)
{
	size -= size % bs->block_size;
	pthread_mutex_lock(&bs->resize_mu);
	/* Reactors read the size unlocked; a shrink by another client fails I/O past the new end in the store. */
	uint64_t was = __atomic_exchange_n(&bs->size, size, __ATOMIC_ACQ_REL);
	if (was != size && bs->resize_fn)
		bs->resize_fn(bs->resize_arg);
	pthread_mutex_unlock(&bs->resize_mu);
}

int backstore_resize(struct backstore *bs, uint64_t size, char *err, size_t errlen)
{
	uint64_t have = bs->size;
	const char *noun = backstore_kind(bs->type)->noun;
	if (bs->ops->device_size) {
		/* The device was resized underneath (lvextend, a namespace resize): follow it. */
		uint64_t dev = 0;
		int rc = bs->ops->device_size(bs, &dev, err, errlen);
		if (rc < 0)
			return rc;
		dev -= dev % bs->block_size;
		if (size && size != dev) {
			bs_errf(bs, err, errlen, "size: %s takes its device's size (%llu bytes); "
				"resize the device, then give size 0 to follow it", noun, (unsigned long long)dev);
			return -EINVAL;
		}
		size = dev;
	} else if (!bs->ops->resize) {
		bs_errf(bs, err, errlen, "size: %s cannot be resized while it runs", noun);
		return -EOPNOTSUPP;
	}
	if (!size || size % bs->block_size) {
		bs_errf(bs, err, errlen, "size: %llu is not a positive multiple of the block size %u",
			(unsigned long long)size, bs->block_size);
		return -EINVAL;
	}
	if (size < have) {
		/* An initiator's file system may hold blocks past the new end: shrinking is a restart's decision. */
		bs_errf(bs, err, errlen, "size: %llu is smaller than the current %llu bytes; a LUN is only grown "
			"while it is in use", (unsigned long long)size, (unsigned long long)have);
		return -EINVAL;
	}
	if (bs->ops->resize) {
		if (bs->readonly) {
			bs_errf(bs, err, errlen, "size: the backstore is readonly");
			return -EROFS;
		}
		int rc = bs->ops->resize(bs, size, err, errlen);
		if (rc < 0)
			return rc;
	}
	/* Reactors read the size unlocked; growing only, any value they see is safe. */
	__atomic_store_n(&bs->size, size, __ATOMIC_RELEASE);
	return 0;
}

void bs_complete(struct bs_io *io, int res)
{
	io->err = res;
	io->inflight = 0;
	io->cb(io, res);
}

bool bs_is_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	/* Compare the buffer with itself shifted by one: all equal to p[0]. */
	return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

void *bs_alloc_aligned(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	return p;
}

int bs_fill_bounce(struct bs_io *io, bool zero, uint64_t n)
{
	uint8_t *b = bs_alloc_aligned((size_t)n);
	if (!b)
		return -ENOMEM;
	if (zero) {
		memset(b, 0, (size_t)n);
	} else {
		memcpy(b, io->buf, io->pattern_len);
		for (uint64_t have = io->pattern_len; have < n;) {
			uint64_t c = MIN(have, n - have);
			memcpy(b + have, b, (size_t)c);
			have += c;
		}
	}
	free(io->bounce);
	io->bounce = b;
	io->bounce_len = (uint32_t)n;
	return 0;
}

void bs_finish_bounce(struct bs_io *io)
{
	if (io->op == BS_READ && io->bounce && io->err == 0)
		memcpy(io->buf, io->bounce, (size_t)io->len);
	free(io->bounce);
	io->bounce = NULL;
	io->bounce_len = 0;
	bs_complete(io, io->err);
}

void bs_finish_bounce_deferred(void *io)
{
	bs_finish_bounce(io);
}

/* Range inside the backstore, block aligned, no overflow. */
static bool bs_range_ok(const struct backstore *bs, uint64_t off, uint64_t len)
{
	return off % bs->block_size == 0 && len % bs->block_size == 0 &&
	       off <= bs->size && len <= bs->size - off;
}

static int bs_check(const struct backstore *bs, const struct bs_io *io)
{
	switch (io->op) {
	case BS_FLUSH:
		return 0;
	case BS_READ:
		break;
	case BS_WRITE:
	case BS_UNMAP:
	case BS_WRITE_SAME:
		if (bs->readonly)
			return -EROFS;
		break;
	case BS_WRITE_ATOMIC:
		if (bs->readonly)
			return -EROFS;
		if (io->len > bs->atomic_max)
			return -EOPNOTSUPP;
		break;
	case BS_COMPARE_WRITE:
		if (bs->readonly)
			return -EROFS;
		if (!backstore_compare_write_fits(bs, io->offset, io->len))
			return -EOPNOTSUPP;
		break;
	default:
		return -EINVAL;
	}
	if (!bs_range_ok(bs, io->offset, io->len))
		return -EINVAL;
	if (io->len && !io->buf && io->op != BS_UNMAP)
		return -EINVAL;
	if (io->op == BS_WRITE_SAME && io->len &&
	    (io->pattern_len == 0 || io->pattern_len > (1u << 20) || io->len % io->pattern_len))
		return -EINVAL;
	return 0;
}

const uint8_t *backstore_read_view(struct backstore *bs, struct bs_view *v, uint64_t offset, uint64_t len)
{
	/* A view nobody can revoke could hold an atomic write for ever. */
	if (!bs->ops->view || !v->revoke || !len || !bs_range_ok(bs, offset, len))
		return NULL;
	return bs->ops->view(bs, v, offset, len);
}

void backstore_view_put(struct bs_view *v)
{
	v->bs->ops->view_put(v);
}

struct memreg *backstore_memreg(const struct backstore *bs)
{
	return bs->ops->memreg ? bs->ops->memreg(bs) : NULL;
}

void backstore_submit(struct backstore *bs, struct bs_io *io)
{
	io->done = 0;
	io->err = 0;
	io->inflight = 0;
	io->bs = bs;
	io->bounce = NULL;
	io->bounce_len = 0;
	io->stage = 0;
	int rc = bs_check(bs, io);
	if (rc < 0) {
		bs_complete(io, rc);
		return;
	}
	if (io->len == 0 && io->op != BS_FLUSH) {
		bs_complete(io, 0);
		return;
	}
	bs->ops->submit(bs, io);
}

int backstore_lba_status(struct backstore *bs, uint64_t offset, bool *mapped, uint64_t *run)
{
	if (offset % bs->block_size || offset >= bs->size)
		return -EINVAL;
	if (!bs->thin || !bs->ops->lba_status) {
		*mapped = true;
		*run = bs->size - offset;
		return 0;
	}
	int rc = bs->ops->lba_status(bs, offset, mapped, run);
	if (rc < 0)
		return rc;
	/* Whole blocks, at least one, never past the end. */
	if (*run > bs->size - offset)
		*run = bs->size - offset;
	*run -= *run % bs->block_size;
	if (*run == 0)
		*run = bs->block_size;
	return 0;
}

unsigned backstore_sanitize_methods(const struct backstore *bs)
{
	if (bs->readonly || !bs->ops->sanitize_methods)
		return 0;
	return bs->ops->sanitize_methods(bs);
}

int64_t backstore_sanitize(struct backstore *bs, unsigned method, uint64_t offset, uint64_t len)
{
	if (!(backstore_sanitize_methods(bs) & method) || (method & (method - 1)))
		return -EOPNOTSUPP;
	if (!len || !bs_range_ok(bs, offset, len))
		return -EINVAL;
	return bs->ops->sanitize(bs, method, offset, len);
}

const char *backstore_sanitize_how(const struct backstore *bs, unsigned method)
{
	if (!(backstore_sanitize_methods(bs) & method) || !bs->ops->sanitize_how)
		return "not offered";
	return bs->ops->sanitize_how(bs, method);
}
