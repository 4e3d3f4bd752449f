/*
 * Shared objects of an RBD image (backstore.h, "state kept together"), in
 * RADOS beside the image (its pool and namespace), for kind K and key Y
 * (the image id unless given):
 *
 *   isert_K.Y          the state's text; its object version is the state's
 *                      version; every gateway sharing it watches it, and
 *                      notifies through it
 *   isert_K_sharers.Y  its omap lists the gateways: key the rados instance
 *                      id (16 hex digits), value {"addr": ..., "desc": ...}
 *
 * Compare-and-set is a write op asserting the object version (created
 * exclusively when there is none), which RADOS applies atomically on the
 * primary OSD: no lock object, no class method beyond what every OSD has.
 * Fencing blocklists the gateway's rados client address through the
 * monitors (rados_blocklist_add), as librbd's exclusive lock does to a dead
 * lock holder.
 */
#include "target/backstore/backstore_impl.h"

#if ISERT_RBD
#include <errno.h>
#include <limits.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/backstore/rbd_int.h"

/* A state larger than this is refused: it is an LU's reservations (1024 registrations at most). */
#define STATE_MAX (8u << 20)
#define SHARERS_MAX 1024

struct rbd_state {
	struct bs_shared base;
	rados_t rados;
	rados_ioctx_t io;          /* its own: rados_get_last_version() answers for the last op on it */
	pthread_mutex_t mu;        /* one read or write (and its version) at a time on io */
	char obj[320], sharers[320], where[400];
	uint64_t cookie;
	bool watching;
	bs_notify_fn fn;
	bs_watch_error_fn efn;
	void *arg;
	char addr[128];            /* this client's, for the list of sharers */
};

static struct rbd_state *state_of(const struct bs_shared *o)
{
	return (struct rbd_state *)o;
}

static int st_open(struct backstore *bs, const char *kind, const char *key, struct bs_shared **out)
{
	rados_t rados;
	const char *pool, *ns, *id;
	rbd_place(bs, &rados, &pool, &ns, &id);
	struct rbd_state *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->base.ops = &rbd_shared_ops;
	int rc = rados_ioctx_create(rados, pool, &st->io);
	if (rc < 0) {
		free(st);
		return rc;
	}
	if (ns)
		rados_ioctx_set_namespace(st->io, ns);
	st->rados = rados;
	pthread_mutex_init(&st->mu, NULL);
	snprintf(st->obj, sizeof(st->obj), "isert_%s.%s", kind, key ? key : id);
	snprintf(st->sharers, sizeof(st->sharers), "isert_%s_sharers.%s", kind, key ? key : id);
	snprintf(st->where, sizeof(st->where), "%s/%s%s%s", pool, ns ? ns : "", ns ? "/" : "", st->obj);
	/* One address per client: "[v2:IP:PORT/NONCE,v1:...]" or "IP:PORT/NONCE"; the blocklist takes one entry. */
	char *addrs = NULL;
	if (rados_getaddrs(rados, &addrs) == 0 && addrs) {
		const char *a = addrs + (addrs[0] == '[');
		if (!strncmp(a, "v2:", 3) || !strncmp(a, "v1:", 3))
			a += 3;
		snprintf(st->addr, sizeof(st->addr), "%.*s", (int)strcspn(a, ",]"), a);
		free(addrs);
	}
	*out = &st->base;
	return 0;
}

static void st_close(struct bs_shared *o)
{
	struct rbd_state *st = state_of(o);
	if (st->watching) {
		rados_unwatch2(st->io, st->cookie);
		rados_watch_flush(st->rados);
	}
	rados_ioctx_destroy(st->io);
	pthread_mutex_destroy(&st->mu);
	free(st);
}

static int st_read(struct bs_shared *o, char **text, size_t *len, uint64_t *version)
{
	struct rbd_state *st = state_of(o);
	uint64_t size;
	int rc;

	*text = NULL;
	pthread_mutex_lock(&st->mu);
	for (int tries = 0; tries < 4; tries++) {
		if ((rc = rados_stat(st->io, st->obj, &size, NULL)) < 0)
			break;
		if (size > STATE_MAX) {
			rc = -EFBIG;
			break;
		}
		/* One byte more than its size: a read that fills it saw the object grow, and reads again. */
		char *buf = malloc(size + 2);
		if (!buf) {
			rc = -ENOMEM;
			break;
		}
		rc = rados_read(st->io, st->obj, buf, size + 1, 0);
		if (rc >= 0 && (uint64_t)rc <= size) {
			buf[rc] = 0;
			*text = buf;
			*len = (size_t)rc;
			*version = rados_get_last_version(st->io);
			rc = 0;
			break;
		}
		free(buf);
		if (rc < 0)
			break;
		rc = -EAGAIN;
	}
	pthread_mutex_unlock(&st->mu);
	return rc;
}

static int st_write(struct bs_shared *o, const char *text, size_t len, uint64_t version, uint64_t *now)
{
	struct rbd_state *st = state_of(o);
	rados_write_op_t op = rados_create_write_op();
	if (!op)
		return -ENOMEM;
	if (version)
		rados_write_op_assert_version(op, version);
	else
		rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
	rados_write_op_write_full(op, text, len);
	pthread_mutex_lock(&st->mu);
	int rc = rados_write_op_operate(op, st->io, st->obj, NULL, 0);
	if (rc == 0)
		*now = rados_get_last_version(st->io);
	pthread_mutex_unlock(&st->mu);
	rados_release_write_op(op);
	/* Another gateway wrote first (the version moved), or created it first. */
	return rc == -ERANGE || rc == -EOVERFLOW || rc == -EEXIST ? -ERANGE : rc;
}

static void st_watch_cb(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier, void *data, size_t len)
{
	struct rbd_state *st = arg;
	(void)handle;
	st->fn(st->arg, notify_id, notifier, data, len);
}

static void st_watch_err(void *arg, uint64_t cookie, int err)
{
	struct rbd_state *st = arg;
	(void)cookie;
	if (st->efn)
		st->efn(st->arg, err);
}

static int st_watch(struct bs_shared *o, bs_notify_fn fn, bs_watch_error_fn efn, void *arg)
{
	struct rbd_state *st = state_of(o);
	if (st->watching) {
		rados_unwatch2(st->io, st->cookie);
		st->watching = false;
	}
	st->fn = fn;
	st->efn = efn;
	st->arg = arg;
	int rc = rados_watch2(st->io, st->obj, &st->cookie, st_watch_cb, st_watch_err, st);
	st->watching = rc == 0;
	return rc;
}

static void st_unwatch(struct bs_shared *o)
{
	struct rbd_state *st = state_of(o);
	if (!st->watching)
		return;
	rados_unwatch2(st->io, st->cookie);
	/* No callback runs after this: the LU it points at may go next. */
	rados_watch_flush(st->rados);
	st->watching = false;
}

int rbd_notify(rados_ioctx_t io, const char *obj, const void *data, size_t len, unsigned timeout_ms,
	       struct notify_ack_t **acks, size_t *nacks, struct notify_timeout_t **tos, size_t *ntos)
{
	char *reply = NULL;
	size_t reply_len = 0;
	/* -ETIMEDOUT when a watcher did not acknowledge: the reply still says who did and who did not. */
	int rc = rados_notify2(io, obj, data, (int)len, timeout_ms, &reply, &reply_len);
	if (rc < 0 && rc != -ETIMEDOUT) {
		rados_buffer_free(reply);
		return rc;
	}
	*acks = NULL;
	*tos = NULL;
	*nacks = *ntos = 0;
	rc = reply ? rados_decode_notify_response(reply, reply_len, acks, nacks, tos, ntos) : -EIO;
	rados_buffer_free(reply);
	return rc < 0 ? rc : 0;
}

static int st_notify(struct bs_shared *o, const void *data, size_t len, unsigned timeout_ms,
		     struct bs_notify_result *res)
{
	struct rbd_state *st = state_of(o);
	struct notify_ack_t *acks;
	struct notify_timeout_t *tos;
	size_t nacks, ntos;
	int rc = rbd_notify(st->io, st->obj, data, len, timeout_ms, &acks, &nacks, &tos, &ntos);
	if (rc < 0)
		return rc;
	res->acked = calloc(nacks ? nacks : 1, sizeof(*res->acked));
	res->missed = calloc(ntos ? ntos : 1, sizeof(*res->missed));
	if (!res->acked || !res->missed) {
		rados_free_notify_response(acks, nacks, tos);
		backstore_notify_result_free(res);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nacks; i++)
		res->acked[res->nacked++] = acks[i].notifier_id;
	for (size_t i = 0; i < ntos; i++)
		res->missed[res->nmissed++] = tos[i].notifier_id;
	rados_free_notify_response(acks, nacks, tos);
	return 0;
}

static int st_ack(struct bs_shared *o, uint64_t notify_id)
{
	struct rbd_state *st = state_of(o);
	return rados_notify_ack(st->io, st->obj, notify_id, st->cookie, NULL, 0);
}

static uint64_t st_self(const struct bs_shared *o)
{
	return rados_get_instance_id(state_of(o)->rados);
}

static const char *st_where(const struct bs_shared *o)
{
	return state_of(o)->where;
}

static void key_of(uint64_t id, char key[17])
{
	snprintf(key, 17, "%016llx", (unsigned long long)id);
}

static int st_join(struct bs_shared *o, const char *desc)
{
	struct rbd_state *st = state_of(o);
	json_object *v = json_object_new_object();
	char key[17];
	if (!v)
		return -ENOMEM;
	json_object_object_add(v, "addr", json_object_new_string(st->addr));
	json_object_object_add(v, "desc", json_object_new_string(desc));
	const char *val = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
	const char *keys[1] = { key }, *vals[1] = { val };
	size_t lens[1] = { strlen(val) };
	key_of(st_self(o), key);
	rados_write_op_t op = rados_create_write_op();
	int rc = -ENOMEM;
	if (op) {
		rados_write_op_create(op, 0, NULL);
		rados_write_op_omap_set(op, keys, vals, lens, 1);
		rc = rados_write_op_operate(op, st->io, st->sharers, NULL, 0);
		rados_release_write_op(op);
	}
	json_object_put(v);
	return rc;
}

static int remove_sharer(struct rbd_state *st, uint64_t id)
{
	char key[17];
	const char *keys[1] = { key };
	key_of(id, key);
	rados_write_op_t op = rados_create_write_op();
	if (!op)
		return -ENOMEM;
	rados_write_op_omap_rm_keys(op, keys, 1);
	int rc = rados_write_op_operate(op, st->io, st->sharers, NULL, 0);
	rados_release_write_op(op);
	return rc;
}

static void st_leave(struct bs_shared *o)
{
	struct rbd_state *st = state_of(o);
	remove_sharer(st, st_self(o));
}

static int st_sharers(struct bs_shared *o, struct bs_sharer **out, size_t *n)
{
	struct rbd_state *st = state_of(o);
	rados_read_op_t op = rados_create_read_op();
	rados_omap_iter_t it = NULL;
	unsigned char more = 0;
	int prval = 0;
	if (!op)
		return -ENOMEM;
	rados_read_op_omap_get_vals2(op, "", "", SHARERS_MAX, &it, &more, &prval);
	int rc = rados_read_op_operate(op, st->io, st->sharers, 0);
	if (rc == 0)
		rc = prval;
	struct bs_sharer *v = rc == 0 ? calloc(SHARERS_MAX, sizeof(*v)) : NULL;
	if (rc == 0 && !v)
		rc = -ENOMEM;
	size_t k = 0;
	char *key, *val;
	size_t klen, vlen;
	while (rc == 0 && k < SHARERS_MAX && rados_omap_get_next2(it, &key, &val, &klen, &vlen) == 0 && key) {
		char kbuf[17], *end;
		json_object *o = NULL, *a, *d;
		snprintf(kbuf, sizeof(kbuf), "%.*s", (int)klen, key);
		v[k].id = strtoull(kbuf, &end, 16);
		if (*end || klen != 16)
			continue; /* not ours */
		/* The value is vlen bytes, not a C string. */
		json_tokener *tok = val && vlen <= INT_MAX ? json_tokener_new_ex(4) : NULL;
		o = tok ? json_tokener_parse_ex(tok, val, (int)vlen) : NULL;
		if (tok)
			json_tokener_free(tok);
		if (json_object_object_get_ex(o, "addr", &a) && json_object_is_type(a, json_type_string))
			snprintf(v[k].addr, sizeof(v[k].addr), "%s", json_object_get_string(a));
		if (json_object_object_get_ex(o, "desc", &d) && json_object_is_type(d, json_type_string))
			snprintf(v[k].desc, sizeof(v[k].desc), "%s", json_object_get_string(d));
		json_object_put(o);
		k++;
	}
	if (it)
		rados_omap_get_end(it);
	rados_release_read_op(op);
	if (rc == -ENOENT)
		rc = 0; /* nobody joined yet */
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n = k;
	return 0;
}

static int st_fence(struct bs_shared *o, const struct bs_sharer *s, char *err, size_t errlen)
{
	struct rbd_state *st = state_of(o);
	char addr[sizeof(s->addr)];
	snprintf(addr, sizeof(addr), "%s", s->addr);
	if (!addr[0]) {
		snprintf(err, errlen, "gateway %016llx left no address to blocklist", (unsigned long long)s->id);
		return -EINVAL;
	}
	/* 0: the cluster's default expiry (mon_osd_blocklist_default_expire, an hour). */
	int rc = rados_blocklist_add(st->rados, addr, 0);
	if (rc < 0) {
		snprintf(err, errlen, "blocklisting %s: %s (the client needs the monitors' \"osd blocklist\" "
			 "capability, as librbd's exclusive lock does)", addr, strerror(-rc));
		return rc;
	}
	remove_sharer(st, s->id);
	return 0;
}

const struct bs_shared_ops rbd_shared_ops = {
	.open = st_open,
	.close = st_close,
	.read = st_read,
	.write = st_write,
	.watch = st_watch,
	.unwatch = st_unwatch,
	.notify = st_notify,
	.ack = st_ack,
	.self = st_self,
	.join = st_join,
	.leave = st_leave,
	.sharers = st_sharers,
	.fence = st_fence,
	.where = st_where,
};

#endif
