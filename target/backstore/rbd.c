/*
 * RBD backstore: a LUN in a Ceph RBD image, through librbd's asynchronous
 * API.  librbd completes on its own threads; the completion callback only
 * hands the bs_io back to the reactor that submitted it (reactor_send), so
 * every step of a request and io->cb run there, never a reactor blocked.
 *
 * The image is the truth: its size is the LU's (a resize by any client is
 * followed through librbd's update watch), its id the LU's serial, so every
 * isertd serving it reports the same VPD 0x83 identifier.  Several gateways
 * may serve one image; writes stay correct between them because librbd's
 * exclusive lock moves the image between writers, COMPARE AND WRITE is
 * librbd's own (atomic on the OSDs, not per process), and the LU's
 * reservations are kept in RADOS beside the image (rbd_state.c), shared by
 * every gateway.  Which gateway takes writes is ALUA's business
 * (docs/rbd.md).
 *
 * Caching: without write_cache librbd's cache is off and a write completes
 * when the OSDs have it (WCE=0 promises that); with it, rbd_cache is on,
 * FUA is a flush after the write and SYNCHRONIZE CACHE is rbd_aio_flush.
 *
 * One rados connection is shared by every image opened with the same
 * cluster, client, conf, keyring and cache setting: a connection costs a
 * dozen threads and a monitor session, many LUNs should not each pay them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "target/backstore/backstore_impl.h"

#if ISERT_RBD
#include <rados/librados.h>
#include <rbd/librbd.h>

#include "target/backstore/rbd_int.h"

/* rados_connect() waits this long for the monitors unless ceph.conf says (librados' default is 300 s). */
#define RBD_CONNECT_TIMEOUT "20"

struct rbd_conn {
	struct rbd_conn *next;
	char *key;
	rados_t rados;
	char fsid[37];
	int refs;
};

static pthread_mutex_t conn_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rbd_conn *conns;

struct rbd_bs {
	struct backstore bs;
	struct rbd_conn *conn;
	rados_ioctx_t ioctx;
	rbd_image_t image;
	uint64_t watch;
	bool watching;
	bool cache;            /* rbd_cache on: writes need a flush to be durable */
	char *pool, *ns;       /* where it is, for its shared objects (rbd_state.c) */
	char id[32];
};

static struct rbd_bs *rbd_of(const struct backstore *bs)
{
	return bs_kind_of((struct backstore *)bs, struct rbd_bs);
}

void rbd_place(const struct backstore *bs, rados_t *rados, const char **pool, const char **ns, const char **id)
{
	const struct rbd_bs *r = rbd_of(bs);
	*rados = r->conn->rados;
	*pool = r->pool;
	*ns = r->ns;
	*id = r->id;
}

enum rbd_stage { RS_OP, RS_FLUSH };

static const char *or_default(const char *s, const char *d)
{
	return s && *s ? s : d;
}

static void conn_put(struct rbd_conn *c)
{
	pthread_mutex_lock(&conn_mu);
	if (--c->refs == 0) {
		struct rbd_conn **pp = &conns;
		while (*pp != c)
			pp = &(*pp)->next;
		*pp = c->next;
	} else {
		c = NULL;
	}
	pthread_mutex_unlock(&conn_mu);
	if (c) {
		rados_shutdown(c->rados);
		free(c->key);
		free(c);
	}
}

static int conn_set(struct backstore *bs, rados_t r, const char *opt, const char *val, char *err, size_t errlen)
{
	int rc = rados_conf_set(r, opt, val);
	if (rc < 0)
		bs_errf(bs, err, errlen, "ceph option %s=%s: %s", opt, val, strerror(-rc));
	return rc;
}

/* Has ceph.conf set opt (to something other than librados' default dflt)? */
static bool conf_given(rados_t r, const char *opt, double dflt)
{
	char v[64];
	return rados_conf_get(r, opt, v, sizeof(v)) == 0 && strtod(v, NULL) != dflt;
}

/* The connection for cfg's cluster and client, made on first use. */
static int conn_get(struct backstore *bs, const struct backstore_rbd_cfg *rc_, bool cache, struct rbd_conn **out,
		    char *err, size_t errlen)
{
	const char *cluster = or_default(rc_->cluster, "ceph"), *id = or_default(rc_->client_id, "admin");
	char name[128];
	char *key = NULL;
	int rc;

	snprintf(name, sizeof(name), "client.%s", id);
	if (asprintf(&key, "%s\n%s\n%s\n%s\n%d", cluster, name, or_default(rc_->conf, ""),
		     or_default(rc_->keyring, ""), cache) < 0) {
		bs_errf(bs, err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Held while connecting: two LUNs on one cluster wait for one connection, not two. */
	pthread_mutex_lock(&conn_mu);
	for (struct rbd_conn *c = conns; c; c = c->next) {
		if (!strcmp(c->key, key)) {
			c->refs++;
			pthread_mutex_unlock(&conn_mu);
			free(key);
			*out = c;
			return 0;
		}
	}
	struct rbd_conn *c = calloc(1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		bs_errf(bs, err, errlen, "out of memory");
		goto fail;
	}
	rc = rados_create2(&c->rados, cluster, name, 0);
	if (rc < 0) {
		bs_errf(bs, err, errlen, "cluster '%s', client '%s': %s", cluster, name, strerror(-rc));
		goto fail;
	}
	rc = rados_conf_read_file(c->rados, rc_->conf);
	if (rc < 0) {
		if (rc_->conf)
			bs_errf(bs, err, errlen, "conf '%s': cannot read it: %s", rc_->conf, strerror(-rc));
		else
			bs_errf(bs, err, errlen, "conf: no ceph.conf found ($CEPH_CONF, /etc/ceph/%s.conf): %s; "
				"give \"conf\"", cluster, strerror(-rc));
		goto fail_rados;
	}
	/* UNMAP must read back as zeroes (LBPRZ): partial-object discards zero instead of being skipped. */
	if ((rc = conn_set(bs, c->rados, "rbd_skip_partial_discard", "false", err, errlen)) < 0 ||
	    (rc = conn_set(bs, c->rados, "rbd_cache", cache ? "true" : "false", err, errlen)) < 0 ||
	    (!conf_given(c->rados, "client_mount_timeout", 300) &&
	     (rc = conn_set(bs, c->rados, "client_mount_timeout", RBD_CONNECT_TIMEOUT, err, errlen)) < 0) ||
	    (rc_->keyring && (rc = conn_set(bs, c->rados, "keyring", rc_->keyring, err, errlen)) < 0))
		goto fail_rados;
	rc = rados_connect(c->rados);
	if (rc < 0) {
		bs_errf(bs, err, errlen, "cannot connect to cluster '%s' as %s (conf %s): %s%s", cluster, name,
			or_default(rc_->conf, "by librados' search"), strerror(-rc),
			rc == -ETIMEDOUT ? " (no monitor answered within client_mount_timeout)" :
			rc == -ENOENT || rc == -EACCES || rc == -EPERM ? " (check client_id and keyring)" : "");
		goto fail_rados;
	}
	rados_cluster_fsid(c->rados, c->fsid, sizeof(c->fsid));
	c->key = key;
	c->refs = 1;
	c->next = conns;
	conns = c;
	pthread_mutex_unlock(&conn_mu);
	*out = c;
	return 0;
fail_rados:
	rados_shutdown(c->rados);
fail:
	pthread_mutex_unlock(&conn_mu);
	free(c);
	free(key);
	return rc;
}

/* librbd's update watch (its own thread): the header changed, maybe the size. */
static void rbd_watch_cb(void *arg)
{
	struct backstore *bs = arg;
	struct rbd_bs *r = rbd_of(bs);
	uint64_t size;

	if (rbd_get_size(r->image, &size) == 0 && size)
		bs_size_changed(bs, size);
}

static void rbd_free(struct backstore *bs)
{
	struct rbd_bs *r = rbd_of(bs);
	if (r->watching)
		rbd_update_unwatch(r->image, r->watch);
	r->watching = false;
	free(r->pool);
	free(r->ns);
	r->pool = r->ns = NULL;
	if (r->image)
		rbd_close(r->image);
	r->image = NULL;
	if (r->ioctx)
		rados_ioctx_destroy(r->ioctx);
	r->ioctx = NULL;
	if (r->conn)
		conn_put(r->conn);
	r->conn = NULL;
}

static int rbd_open_bs(struct backstore *bs, const struct backstore_cfg *cfg, char *err, size_t errlen)
{
	const struct backstore_rbd_cfg *rc_ = &cfg->rbd;
	struct rbd_bs *r = rbd_of(bs);
	int rc;

	if (!rc_->pool || !rc_->image) {
		bs_errf(bs, err, errlen, "%s: required for an rbd backstore", rc_->pool ? "image" : "pool");
		return -EINVAL;
	}
	r->cache = cfg->write_cache;
	if ((rc = conn_get(bs, rc_, r->cache, &r->conn, err, errlen)) < 0)
		goto fail;
	rc = rados_ioctx_create(r->conn->rados, rc_->pool, &r->ioctx);
	if (rc < 0) {
		bs_errf(bs, err, errlen, "pool '%s': %s", rc_->pool, rc == -ENOENT ? "no such pool" : strerror(-rc));
		goto fail;
	}
	if (rc_->ns)
		rados_ioctx_set_namespace(r->ioctx, rc_->ns);
	rc = cfg->readonly ? rbd_open_read_only(r->ioctx, rc_->image, &r->image, NULL) :
			     rbd_open(r->ioctx, rc_->image, &r->image, NULL);
	if (rc < 0) {
		bs_errf(bs, err, errlen, "image '%s/%s%s%s': %s", rc_->pool, rc_->ns ? rc_->ns : "", rc_->ns ? "/" : "",
			rc_->image, rc == -ENOENT ? "no such image (create it with rbd create)" : strerror(-rc));
		r->image = NULL;
		goto fail;
	}
	rbd_image_info_t info;
	char id[32];
	if ((rc = rbd_stat(r->image, &info, sizeof(info))) < 0 || (rc = rbd_get_id(r->image, id, sizeof(id))) < 0) {
		bs_errf(bs, err, errlen, "image '%s': cannot read its header: %s", rc_->image, strerror(-rc));
		goto fail;
	}
	/* size grows the image, never shrinks it: the LU is always the whole image, as on every gateway. */
	if (cfg->size > info.size) {
		if (cfg->readonly) {
			bs_errf(bs, err, errlen, "size: %llu is larger than the readonly image '%s' (%llu bytes)",
				(unsigned long long)cfg->size, rc_->image, (unsigned long long)info.size);
			rc = -EINVAL;
			goto fail;
		}
		if ((rc = rbd_resize(r->image, cfg->size)) < 0) {
			bs_errf(bs, err, errlen, "size: cannot grow the image '%s' to %llu bytes: %s", rc_->image,
				(unsigned long long)cfg->size, strerror(-rc));
			goto fail;
		}
		info.size = cfg->size;
	}
	bs->size = info.size - info.size % bs->block_size;
	/* One object is librbd's natural unit: larger requests are split, smaller ones cost the same trip. */
	bs->optimal_io = info.obj_size <= (1u << 30) ? (uint32_t)info.obj_size : 0;
	/* fsid prefix: image ids are unique per cluster only. */
	char fsid8[9] = "";
	for (size_t i = 0, n = 0; r->conn->fsid[i] && n < 8; i++)
		if (r->conn->fsid[i] != '-')
			fsid8[n++] = r->conn->fsid[i];
	snprintf(bs->serial, sizeof(bs->serial), "%s%s", fsid8, id);
	/* librbd compares and writes within one 512-byte sector only (larger: -EINVAL). */
	bs->compare_write_max = 512;
	bs->shared = true;
	snprintf(r->id, sizeof(r->id), "%s", id);
	snprintf(bs->shared_home, sizeof(bs->shared_home), "%s/%s", rc_->pool, rc_->ns ? rc_->ns : "");
	if (!(r->pool = strdup(rc_->pool)) || (rc_->ns && !(r->ns = strdup(rc_->ns)))) {
		bs_errf(bs, err, errlen, "out of memory");
		rc = -ENOMEM;
		goto fail;
	}
	rc = rbd_update_watch(r->image, &r->watch, rbd_watch_cb, bs);
	if (rc < 0) {
		bs_errf(bs, err, errlen, "image '%s': cannot watch it for resizes: %s", rc_->image, strerror(-rc));
		goto fail;
	}
	r->watching = true;
	return 0;
fail:
	rbd_free(bs);
	return rc;
}

static void rbd_close_bs(struct backstore *bs)
{
	rbd_free(bs);
}

static void rbd_issue(struct backstore *bs, struct bs_io *io);

static bool rbd_needs_flush(const struct backstore *bs, const struct bs_io *io)
{
	const struct rbd_bs *r = rbd_of(bs);
	bool writes = io->op == BS_WRITE || io->op == BS_WRITE_SAME || io->op == BS_UNMAP ||
		      io->op == BS_COMPARE_WRITE;
	return r->cache && writes && (io->fua || !backstore_write_cache(bs));
}

/* One librbd request ended with res (on the submitting reactor, or inline without one). */
static void rbd_step(struct bs_io *io, int res)
{
	struct backstore *bs = io->bs;

	if (res > 0)   /* reads return the byte count */
		res = 0;
	if (res == 0 && io->stage == RS_OP && rbd_needs_flush(bs, io)) {
		io->stage = RS_FLUSH;
		rbd_issue(bs, io);
		return;
	}
	if (res == -EILSEQ && io->op == BS_COMPARE_WRITE && io->miscompare >= io->offset)
		io->miscompare -= io->offset;   /* librbd reports the image offset */
	bs_complete(io, res);
}

static void rbd_on_reactor(void *arg)
{
	struct bs_io *io = arg;
	rbd_step(io, io->err);
}

/* librbd's thread: hand the result to the submitting reactor. */
static void rbd_done(rbd_completion_t c, void *arg)
{
	struct bs_io *io = arg;
	if (!io->reactor)
		return;   /* rbd_issue waits for it */
	io->err = (int)rbd_aio_get_return_value(c);
	rbd_aio_release(c);
	/* Only an allocation failure stops the hand-off; the result must not be lost, so wait for memory. */
	while (reactor_send(io->reactor, rbd_on_reactor, io) != 0)
		usleep(1000);
}

static int rbd_start(struct backstore *bs, struct bs_io *io, rbd_completion_t c)
{
	rbd_image_t img = rbd_of(bs)->image;

	if (io->stage == RS_FLUSH)
		return rbd_aio_flush(img, c);
	switch (io->op) {
	case BS_READ:
		return rbd_aio_read(img, io->offset, io->len, io->buf, c);
	case BS_WRITE:
		return rbd_aio_write(img, io->offset, io->len, io->buf, c);
	case BS_FLUSH:
		return rbd_aio_flush(img, c);
	case BS_UNMAP:
		return rbd_aio_discard(img, io->offset, io->len, c);
	case BS_WRITE_SAME:
		if (bs_is_zero(io->buf, io->pattern_len))
			return rbd_aio_write_zeroes(img, io->offset, io->len, c, 0, 0);
		return rbd_aio_writesame(img, io->offset, io->len, io->buf, io->pattern_len, c, 0);
	case BS_COMPARE_WRITE:
		return rbd_aio_compare_and_write(img, io->offset, io->len, io->buf, (char *)io->buf + io->len, c,
						 &io->miscompare, 0);
	case BS_WRITE_ATOMIC:
		break;   /* atomic_max is 0: backstore_submit refuses it first */
	}
	return -EOPNOTSUPP;
}

static void rbd_issue(struct backstore *bs, struct bs_io *io)
{
	rbd_completion_t c;
	int rc = rbd_aio_create_completion(io, rbd_done, &c);

	if (rc == 0) {
		io->inflight = 1;
		rc = rbd_start(bs, io, c);
		if (rc < 0) {
			io->inflight = 0;
			rbd_aio_release(c);
		} else if (!io->reactor) {
			/* No reactor (tools, tests): synchronous. */
			rbd_aio_wait_for_complete(c);
			rc = (int)rbd_aio_get_return_value(c);
			rbd_aio_release(c);
			rbd_step(io, rc);
			return;
		} else {
			return;
		}
	}
	/* Refused before it started: complete on the reactor, never inside backstore_submit's caller. */
	io->err = rc;
	if (!io->reactor || reactor_defer(io->reactor, rbd_on_reactor, io) != 0)
		rbd_step(io, rc);
}

static void rbd_submit(struct backstore *bs, struct bs_io *io)
{
	io->stage = RS_OP;
	io->miscompare = 0;
	rbd_issue(bs, io);
}

struct rbd_extent {
	uint64_t want;      /* first byte asked about */
	bool found;         /* an allocated extent at or after want was seen */
	uint64_t off, len;  /* the first one */
};

static int rbd_extent_cb(uint64_t off, size_t len, int exists, void *arg)
{
	struct rbd_extent *e = arg;
	if (!exists || e->found)
		return 0;
	e->found = true;
	e->off = off;
	e->len = len;
	return 1;   /* stop: only the first allocated extent matters */
}

/* GET LBA STATUS: the allocated extents from librbd's diff against nothing (synchronous, rare). */
static int rbd_lba_status(struct backstore *bs, uint64_t offset, bool *mapped, uint64_t *run)
{
	struct rbd_bs *r = rbd_of(bs);
	struct rbd_extent e = { .want = offset };
	uint64_t len = bs->size - offset;

	int rc = rbd_diff_iterate2(r->image, NULL, offset, len, 1, 0, rbd_extent_cb, &e);
	if (rc < 0 && rc != 1 && !e.found)
		return rc;
	if (!e.found || e.off > offset) {
		*mapped = false;
		*run = e.found ? e.off - offset : len;
	} else {
		*mapped = true;
		*run = e.off + e.len - offset;
	}
	return 0;
}

static int rbd_resize_bs(struct backstore *bs, uint64_t size, char *err, size_t errlen)
{
	struct rbd_bs *r = rbd_of(bs);
	int rc = rbd_resize(r->image, size);
	if (rc < 0)
		bs_errf(bs, err, errlen, "cannot resize the image to %llu bytes: %s", (unsigned long long)size,
			strerror(-rc));
	return rc;
}

/*
 * SANITIZE BLOCK ERASE on an RBD LU (thin by nature): rbd_discard, which
 * removes whole objects and zeroes partial ones (rbd_skip_partial_discard
 * is off on our connections), synchronous on the sanitize worker.
 */
static unsigned rbd_sanitize_methods(const struct backstore *bs)
{
	return bs->thin ? BS_SANITIZE_BLOCK_ERASE : 0;
}

static int64_t rbd_sanitize(struct backstore *bs, unsigned method, uint64_t offset, uint64_t len)
{
	struct rbd_bs *r = rbd_of(bs);
	(void)method;
	int rc = rbd_discard(r->image, offset, len);
	return rc < 0 ? rc : (int64_t)len;
}

static const char *rbd_sanitize_how(const struct backstore *bs, unsigned method)
{
	(void)bs;
	(void)method;
	return "rbd_discard (objects removed, partial ones zeroed)";
}

const struct bs_ops bs_rbd_ops = {
	.size = sizeof(struct rbd_bs),
	.open = rbd_open_bs,
	.close = rbd_close_bs,
	.submit = rbd_submit,
	.lba_status = rbd_lba_status,
	.resize = rbd_resize_bs,
	.shared = &rbd_shared_ops,
	.sanitize_methods = rbd_sanitize_methods,
	.sanitize = rbd_sanitize,
	.sanitize_how = rbd_sanitize_how,
};

#else /* !ISERT_RBD */

static int rbd_unavailable(struct backstore *bs, const struct backstore_cfg *cfg, char *err, size_t errlen)
{
	(void)cfg;
	bs_errf(bs, err, errlen, "type: this isertd was built without librbd; install librbd-dev "
		"(apt-get install librbd-dev) and rebuild");
	return -EOPNOTSUPP;
}

static void rbd_nothing(struct backstore *bs)
{
	(void)bs;
}

static void rbd_refuse(struct backstore *bs, struct bs_io *io)
{
	(void)bs;
	bs_complete(io, -EOPNOTSUPP);
}

/* Never reached (open refuses); there so that the kind's ops say what its rules say (BS_KIND_GROW). */
static int rbd_resize_unavailable(struct backstore *bs, uint64_t size, char *err, size_t errlen)
{
	(void)size;
	return rbd_unavailable(bs, NULL, err, errlen);
}

const struct bs_ops bs_rbd_ops = {
	.size = sizeof(struct backstore),
	.open = rbd_unavailable,
	.close = rbd_nothing,
	.submit = rbd_refuse,
	.resize = rbd_resize_unavailable,
};

#endif
