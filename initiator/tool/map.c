/*
 * iseradm map: one LUN as /dev/ublkbN.  Each ublk queue is served by its own
 * thread with its own session to the LUN and its own io_uring, which carries
 * both the ublk I/O commands and a poll on the session's event fd, so a
 * thread sleeps in one place.  A ublk request becomes one SCSI command whose
 * data buffer is the tag's buffer from the session's pool: registered with
 * the RDMA device once, so over iSER the target moves the data straight in
 * and out of it (the ublk driver copies between it and the request's pages).
 *
 * The session's own reconnect is the replacement timeout: commands wait
 * while it logs in again and are re-issued; past the timeout they fail
 * (EIO) and the thread keeps trying to log in every few seconds, so the
 * device comes back with the target, as open-iscsi's does.
 *
 * State of every map: a JSON file per device in MAP_STATE_DIR, read by
 * `iseradm maps` and `iseradm unmap`.
 */
#include "map.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/netaddr.h"
#include "common/reactor.h"
#include "common/util.h"
#include "ua.h"
#include "ublk.h"

#define MAP_STATE_DIR "/run/isert/maps"
#define RELOGIN_EVERY_S 5     /* a failed path's login, a standby path's TEST UNIT READY */
#define UD_POLL (1ull << 32)  /* | path: the poll on that path's session fd */
#define UD_WAKE (2ull << 32)  /* the main thread asks the queue to look at `stopping` */
#define UD_TICK (3ull << 32)  /* once a second: deadlines, retries */

enum path_state { PATH_CONNECTING, PATH_UP, PATH_RECONNECTING, PATH_FAILED, PATH_CLOSED };
static const char *const path_state_str[] = { "connecting", "up", "reconnecting", "failed", "closed" };

/* What the LUN offers, read once before the device is created. */
struct lun_info {
	uint64_t blocks;
	uint32_t block_size;
	unsigned phys_shift;       /* physical block = block << phys_shift */
	bool read_only, wce, fua;
	bool unmap, write_same;
	uint32_t max_xfer_blocks;  /* 0: no limit */
	uint32_t max_unmap_blocks; /* 0: no limit */
	uint32_t max_ws_blocks;    /* 0: no limit */
	char id[80];               /* VPD 83h NAA/EUI designator, hex */
};

struct map_dev;

struct tag {
	struct queue *q;
	uint16_t tag;
	void *buf;
	bool busy;                 /* a command of ours runs for it */
	uint8_t ua_left;
	int path;                  /* where its command went */
	uint64_t deadline_ns;      /* waiting for a path: fails (EIO) after this */
	struct tag *wnext;
};

/* One queue's session on one path (URL). */
struct qpath {
	struct queue *q;
	struct isc_session *s;
	bool relogin_pending, probing;
	_Atomic int state;         /* enum path_state, for the state file */
	_Atomic bool standby;      /* ALUA: the LU refused a command here (standby, unavailable, transitioning) */
	_Atomic unsigned reconnects;
};

struct queue {
	struct map_dev *d;
	unsigned id;
	pthread_t thread;
	struct qpath p[MAP_MAX_PATHS];
	unsigned rr;               /* round-robin: the next path to try first */
	struct tag *wait_head, *wait_tail; /* waiting for a usable path */
	struct io_uring ring;
	struct ublksrv_io_desc *descs;
	struct tag *tags;
	unsigned busy, aborted;
	int wake_fd;
	unsigned ticks;
	struct __kernel_timespec tick_ts;
	int err;                   /* setup: 0 or why the queue could not start */
	char errmsg[300];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ready;
};

struct map_path {
	struct isc_url u;
	char url[600];
};

struct map_dev {
	struct map_path paths[MAP_MAX_PATHS];
	unsigned npaths;
	struct isc_options o;
	struct map_opts mo;
	struct lun_info li;
	uint32_t dev_id;
	int cdev;
	unsigned max_io;
	struct queue *qs;
	_Atomic bool stopping;     /* no new logins, no re-arming */
	_Atomic bool dev_stopped;  /* STOP_DEV has returned: queues exit once idle */
	_Atomic unsigned running;  /* queue threads still serving */
	/* The target reported CAPACITY DATA HAS CHANGED: ublk before Linux 6.16 cannot resize a started device. */
	_Atomic bool capacity_changed;
};

static void state_path(uint32_t dev_id, char *p, size_t n)
{
	snprintf(p, n, MAP_STATE_DIR "/ublkb%u.json", dev_id);
}

static int mkdirs(void)
{
	if (mkdir("/run/isert", 0755) && errno != EEXIST)
		return -errno;
	if (mkdir(MAP_STATE_DIR, 0755) && errno != EEXIST)
		return -errno;
	return 0;
}

static json_object *map_json(struct map_dev *d)
{
	char dev[32];
	snprintf(dev, sizeof(dev), "/dev/ublkb%u", d->dev_id);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "device", json_object_new_string(dev));
	json_object_object_add(o, "dev_id", json_object_new_int64(d->dev_id));
	json_object_object_add(o, "pid", json_object_new_int64(getpid()));
	json_object_object_add(o, "url", json_object_new_string(d->paths[0].url));
	json_object_object_add(o, "transport", json_object_new_string(d->paths[0].u.iser ? "iser" : "tcp"));
	json_object_object_add(o, "policy", json_object_new_string(d->mo.round_robin ? "round-robin" : "failover"));
	json_object_object_add(o, "lun_id", json_object_new_string(d->li.id));
	json_object_object_add(o, "block_size", json_object_new_int64(d->li.block_size));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)(d->li.blocks * d->li.block_size)));
	json_object_object_add(o, "read_only", json_object_new_boolean(d->li.read_only));
	json_object_object_add(o, "capacity_changed", json_object_new_boolean(atomic_load(&d->capacity_changed)));
	json_object_object_add(o, "queues", json_object_new_int64(d->mo.queues));
	json_object_object_add(o, "depth", json_object_new_int64(d->mo.depth));
	json_object_object_add(o, "timeout_s", json_object_new_int64(d->mo.timeout_s));
	json_object *paths = json_object_new_array();
	for (unsigned i = 0; i < d->mo.queues; i++)
		for (unsigned k = 0; k < d->npaths; k++) {
			const struct qpath *qp = &d->qs[i].p[k];
			json_object *p = json_object_new_object();
			json_object_object_add(p, "queue", json_object_new_int64(i));
			json_object_object_add(p, "path", json_object_new_int64(k));
			json_object_object_add(p, "url", json_object_new_string(d->paths[k].url));
			json_object_object_add(p, "transport", json_object_new_string(d->paths[k].u.iser ? "iser" : "tcp"));
			int st = atomic_load(&qp->state);
			json_object_object_add(p, "state", json_object_new_string(
				st == PATH_UP && atomic_load(&qp->standby) ? "standby" : path_state_str[st]));
			json_object_object_add(p, "reconnects", json_object_new_int64(atomic_load(&qp->reconnects)));
			json_object_array_add(paths, p);
		}
	json_object_object_add(o, "paths", paths);
	return o;
}

/* What the state file says of the paths, folded (FNV-1a): it is rewritten when this changes. */
static uint64_t paths_digest(struct map_dev *d)
{
	uint64_t h = 14695981039346656037ull ^ atomic_load(&d->capacity_changed);
	for (unsigned i = 0; i < d->mo.queues; i++)
		for (unsigned k = 0; k < d->npaths; k++) {
			const struct qpath *qp = &d->qs[i].p[k];
			uint64_t v = (uint64_t)atomic_load(&qp->state) | (uint64_t)atomic_load(&qp->standby) << 8 |
				     (uint64_t)atomic_load(&qp->reconnects) << 16;
			h = (h ^ v) * 1099511628211ull;
		}
	return h;
}

/* Written to a temporary name and renamed: a reader never sees half a file. */
static void state_write(struct map_dev *d)
{
	char p[128], tmp[160];
	state_path(d->dev_id, p, sizeof(p));
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	json_object *o = map_json(d);
	if (json_object_to_file_ext(tmp, o, JSON_C_TO_STRING_PRETTY) == 0)
		rename(tmp, p);
	json_object_put(o);
}

/* ---- what the LUN offers ---- */

static void hex(const uint8_t *p, unsigned n, char *out, size_t outlen)
{
	size_t k = 0;
	for (unsigned i = 0; i < n && k + 3 <= outlen; i++)
		k += (size_t)snprintf(out + k, outlen - k, "%02x", p[i]);
}

static int probe_lun(struct isc_session *s, uint64_t lun, struct lun_info *li)
{
	struct isc_result r;
	int rc;
	clear_unit_attentions(s, lun);
	struct isc_capacity cap;
	uint8_t rc16[32] = { 0 };
	struct isc_cmd c;
	isc_cmd_readcap16(&c, lun, rc16, sizeof(rc16));
	rc = isc_submit_sync(s, &c, &r);
	if (!rc && isc_parse_readcap16(rc16, sizeof(rc16), &cap))
		rc = -EPROTO;
	if (rc)
		return rc;
	if (cap.block_size < 512 || cap.block_size > 4096 || (cap.block_size & (cap.block_size - 1)) ||
	    !cap.blocks) {
		fprintf(stderr, "iseradm map: the LUN reports %" PRIu64 " blocks of %u bytes; ublk takes 512 to "
			"4096-byte blocks\n", cap.blocks, cap.block_size);
		return -EINVAL;
	}
	li->blocks = cap.blocks;
	li->block_size = cap.block_size;
	li->phys_shift = rc16[13] & 0x0f; /* LOGICAL BLOCKS PER PHYSICAL BLOCK EXPONENT */
	if (li->phys_shift > 3 || (cap.block_size << li->phys_shift) > 4096)
		li->phys_shift = 0;
	/* MODE SENSE(6), caching page: WP and DPOFUA in the header, WCE in the page. */
	uint8_t ms[64] = { 0 };
	c = (struct isc_cmd){ .lun = lun, .cdb = { 0x1a, 0x08, 0x08, 0, sizeof(ms), 0 }, .cdb_len = 6,
			      .dir = ISC_DIR_READ, .data = ms, .len = sizeof(ms) };
	if (isc_submit_sync(s, &c, &r) == 0) {
		li->read_only = ms[2] & 0x80;
		li->fua = ms[2] & 0x10;
		unsigned off = 4 + ms[3];
		if (off + 3 <= sizeof(ms) && (ms[off] & 0x3f) == 0x08)
			li->wce = ms[off + 2] & 0x04;
	}
	uint8_t vpd[256];
	memset(vpd, 0, sizeof(vpd));
	if (isc_vpd_sync(s, lun, 0xb0, vpd, sizeof(vpd), NULL) == 0 && vpd[1] == 0xb0) {
		li->max_xfer_blocks = get_be32(&vpd[8]);
		li->max_unmap_blocks = get_be32(&vpd[20]);
		uint64_t ws = get_be64(&vpd[36]);
		li->max_ws_blocks = ws > UINT32_MAX ? UINT32_MAX : (uint32_t)ws;
	}
	memset(vpd, 0, sizeof(vpd));
	if (cap.thin && isc_vpd_sync(s, lun, 0xb2, vpd, sizeof(vpd), NULL) == 0 && vpd[1] == 0xb2) {
		li->unmap = vpd[5] & 0x80;     /* LBPU */
		li->write_same = vpd[5] & 0x40; /* LBPWS */
	}
	if (li->max_ws_blocks)
		li->write_same = true; /* WRITE SAME without UNMAP: any LU with a limit */
	memset(vpd, 0, sizeof(vpd));
	if (isc_vpd_sync(s, lun, 0x83, vpd, sizeof(vpd), NULL) == 0 && vpd[1] == 0x83) {
		unsigned len = 4 + get_be16(&vpd[2]);
		for (unsigned i = 4; i + 4 <= len && i + 4 <= sizeof(vpd);) {
			unsigned dl = vpd[i + 3], type = vpd[i + 1] & 0x0f, assoc = (vpd[i + 1] >> 4) & 3;
			if (i + 4 + dl > sizeof(vpd))
				break;
			if (assoc == 0 && (type == 3 || type == 2)) { /* NAA or EUI-64 of the LU */
				hex(&vpd[i + 4], dl, li->id, sizeof(li->id));
				break;
			}
			i += 4 + dl;
		}
	}
	return 0;
}

/* ---- a queue: ublk requests to SCSI commands ---- */

static void arm_poll(struct queue *q, unsigned i)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	io_uring_prep_poll_add(sqe, isc_get_fd(q->p[i].s), POLLIN);
	sqe->user_data = UD_POLL | i;
}

static void arm_wake(struct queue *q)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	io_uring_prep_poll_add(sqe, q->wake_fd, POLLIN);
	sqe->user_data = UD_WAKE;
}

static void arm_tick(struct queue *q)
{
	q->tick_ts = (struct __kernel_timespec){ .tv_sec = 1 };
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	io_uring_prep_timeout(sqe, &q->tick_ts, 0, 0);
	sqe->user_data = UD_TICK;
}

static void commit(struct queue *q, struct tag *t, int32_t res)
{
	t->busy = false;
	t->deadline_ns = 0;
	q->busy--;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	ublk_prep_io(sqe, q->d->cdev, UBLK_IO_COMMIT_AND_FETCH_REQ, (uint16_t)q->id, t->tag, res, t->buf);
}

static bool usable(const struct qpath *p)
{
	return atomic_load(&p->state) == PATH_UP && !atomic_load(&p->standby);
}

/* The path for the next command: the first usable one (failover) or the next in turn (round-robin). */
static int pick_path(struct queue *q)
{
	unsigned n = q->d->npaths;
	for (unsigned k = 0; k < n; k++) {
		unsigned i = q->d->mo.round_robin ? (q->rr + k) % n : k;
		if (usable(&q->p[i])) {
			q->rr = i + 1;
			return (int)i;
		}
	}
	/* One path: the session itself holds commands while it logs in again, or fails them. */
	return n == 1 ? 0 : -1;
}

static void wait_push(struct queue *q, struct tag *t)
{
	if (!t->deadline_ns)
		t->deadline_ns = reactor_now_ns() + (uint64_t)q->d->mo.timeout_s * 1000000000ull;
	t->wnext = NULL;
	if (q->wait_tail)
		q->wait_tail->wnext = t;
	else
		q->wait_head = t;
	q->wait_tail = t;
}

static void dispatch(struct queue *q, struct tag *t);

static void io_done(struct isc_session *s, const struct isc_result *r, void *arg)
{
	(void)s;
	struct tag *t = arg;
	struct queue *q = t->q;
	struct qpath *p = &q->p[t->path];
	const struct ublksrv_io_desc *iod = &q->descs[t->tag];
	bool stopping = atomic_load(&q->d->stopping);
	if (is_unit_attention(r->err, r) && t->ua_left && !stopping) {
		t->ua_left--; /* a unit attention (reset, capacity, LUN or ALUA changes): the command did not run */
		if (r->sense.asc == 0x2a && r->sense.ascq == 0x09 && !atomic_exchange(&q->d->capacity_changed, true))
			fprintf(stderr, "iseradm map: /dev/ublkb%u: the LUN's capacity changed on the target; the device "
				"keeps its size (this kernel's ublk cannot resize a started device): iseradm unmap "
				"and map again to use the new size\n", q->d->dev_id);
		if (r->sense.asc == 0x2a && r->sense.ascq == 0x06)
			for (unsigned i = 0; i < q->d->npaths; i++)
				atomic_store(&q->p[i].standby, false); /* access states changed: try them all again */
		dispatch(q, t);
		return;
	}
	bool lost = r->err == -ECONNRESET || r->err == -ECANCELED || r->err == -ENOTCONN;
	/* ALUA: LOGICAL UNIT NOT ACCESSIBLE, transitioning (0Ah), standby (0Bh), unavailable (0Ch). */
	bool refused = r->err == -EIO && r->sense.valid && r->sense.key == 2 && r->sense.asc == 0x04 &&
		       r->sense.ascq >= 0x0a && r->sense.ascq <= 0x0c;
	if (lost)
		atomic_store(&p->state, PATH_FAILED);
	if (refused)
		atomic_store(&p->standby, true);
	if ((lost || refused) && q->d->npaths > 1 && !stopping) {
		dispatch(q, t); /* another path, or wait for one within the replacement timeout */
		return;
	}
	int32_t res;
	if (r->err == 0)
		res = ublksrv_get_op(iod) <= UBLK_IO_OP_WRITE ? (int32_t)((uint64_t)iod->nr_sectors << 9) : 0;
	else if (r->err == -EIO && r->sense.valid && r->sense.key == 5 && r->sense.asc == 0x20)
		res = -EOPNOTSUPP; /* INVALID COMMAND OPERATION CODE */
	else if (r->err == -EIO && r->sense.valid && r->sense.key == 7)
		res = -EROFS;      /* DATA PROTECT */
	else
		res = -EIO;
	commit(q, t, res);
}

static void dispatch(struct queue *q, struct tag *t)
{
	struct map_dev *d = q->d;
	int pi = pick_path(q);
	if (pi < 0) {
		wait_push(q, t);
		return;
	}
	t->path = pi;
	const struct ublksrv_io_desc *iod = &q->descs[t->tag];
	uint32_t bs = d->li.block_size;
	uint64_t lba = (iod->start_sector << 9) / bs;
	uint32_t blocks = (uint32_t)(((uint64_t)iod->nr_sectors << 9) / bs);
	uint64_t lun = d->paths[pi].u.lun;
	struct isc_cmd c;
	switch (ublksrv_get_op(iod)) {
	case UBLK_IO_OP_READ:
		isc_cmd_read16(&c, lun, lba, blocks, bs, t->buf);
		break;
	case UBLK_IO_OP_WRITE:
		isc_cmd_write16(&c, lun, lba, blocks, bs, t->buf, iod->op_flags & UBLK_IO_F_FUA);
		break;
	case UBLK_IO_OP_FLUSH:
		isc_cmd_sync_cache16(&c, lun, 0, 0);
		break;
	case UBLK_IO_OP_DISCARD: {
		struct isc_range rg = { lba, blocks };
		if (isc_cmd_unmap(&c, lun, &rg, 1, t->buf, 24)) {
			commit(q, t, -EINVAL);
			return;
		}
		break;
	}
	case UBLK_IO_OP_WRITE_ZEROES:
		/* The buffer's first block is zeroes; no UNMAP bit: reads after it must return zeroes. */
		memset(t->buf, 0, bs);
		isc_cmd_write_same16(&c, lun, lba, blocks, t->buf, bs, false);
		break;
	default:
		commit(q, t, -EOPNOTSUPP);
		return;
	}
	if (isc_submit(q->p[pi].s, &c, io_done, t))
		return;
	/* Not logged in and not logging in again: the path has failed. */
	atomic_store(&q->p[pi].state, PATH_FAILED);
	if (d->npaths > 1)
		wait_push(q, t);
	else
		commit(q, t, -EIO);
}

/* Commands waiting for a path: to one that works now, or failed past their deadline. */
static void drain_wait(struct queue *q, bool expire)
{
	uint64_t now = expire ? reactor_now_ns() : 0;
	struct tag *t = q->wait_head, *keep = NULL, *keep_tail = NULL;
	q->wait_head = q->wait_tail = NULL;
	while (t) {
		struct tag *next = t->wnext;
		if (expire && now >= t->deadline_ns) {
			commit(q, t, -EIO);
		} else if (pick_path(q) >= 0) {
			dispatch(q, t);
		} else {
			t->wnext = NULL;
			if (keep_tail)
				keep_tail->wnext = t;
			else
				keep = t;
			keep_tail = t;
		}
		t = next;
	}
	/* dispatch() may have queued some again meanwhile: keep both. */
	if (keep) {
		keep_tail->wnext = q->wait_head;
		if (!q->wait_head)
			q->wait_tail = keep_tail;
		q->wait_head = keep;
	}
}

static void on_fetch(struct queue *q, struct io_uring_cqe *cqe)
{
	struct tag *t = &q->tags[cqe->user_data];
	if (cqe->res != UBLK_IO_RES_OK) {
		/* UBLK_IO_RES_ABORT: the device is going away; the tag is not fetched again. */
		q->aborted++;
		return;
	}
	t->busy = true;
	q->busy++;
	t->ua_left = UA_RETRIES;
	t->deadline_ns = 0;
	dispatch(q, t);
}

static void relogin_done(struct isc_session *s, int err, void *arg)
{
	(void)s;
	struct qpath *p = arg;
	p->relogin_pending = false;
	if (!err) {
		atomic_store(&p->state, PATH_UP);
		atomic_fetch_add(&p->reconnects, 1);
	}
}

static void probe_done(struct isc_session *s, const struct isc_result *r, void *arg)
{
	(void)s;
	struct qpath *p = arg;
	p->probing = false;
	if (r->err == 0)
		atomic_store(&p->standby, false);
}

/* Every few seconds: log in again where a session gave up; ask standby paths whether they serve again. */
static void paths_retry(struct queue *q)
{
	if (atomic_load(&q->d->stopping))
		return;
	for (unsigned i = 0; i < q->d->npaths; i++) {
		struct qpath *p = &q->p[i];
		const struct isc_url *u = &q->d->paths[i].u;
		if (atomic_load(&p->state) == PATH_FAILED && !isc_logged_in(p->s) && !p->relogin_pending) {
			if (isc_connect_async(p->s, u->host, u->port, u->target, relogin_done, p) == 0)
				p->relogin_pending = true;
		} else if (atomic_load(&p->standby) && !p->probing && isc_logged_in(p->s)) {
			struct isc_cmd c;
			isc_cmd_tur(&c, u->lun);
			if (isc_submit(p->s, &c, probe_done, p))
				p->probing = true;
		}
	}
}

static void update_state(struct queue *q)
{
	for (unsigned i = 0; i < q->d->npaths; i++) {
		struct qpath *p = &q->p[i];
		int st = atomic_load(&p->state);
		if (isc_logged_in(p->s)) {
			if (st != PATH_UP)
				atomic_store(&p->state, PATH_UP);
			struct isc_params prm;
			if (isc_get_params(p->s, &prm) == 0 && prm.reconnects > atomic_load(&p->reconnects))
				atomic_store(&p->reconnects, prm.reconnects);
		} else if (st == PATH_UP) {
			/* One path: the session logs in again itself; several: paths_retry() does. */
			atomic_store(&p->state, q->d->npaths == 1 ? PATH_RECONNECTING : PATH_FAILED);
		}
	}
}

static void queue_setup_done(struct queue *q, int err)
{
	pthread_mutex_lock(&q->lock);
	q->err = err;
	q->ready = true;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

static void queue_free_sessions(struct queue *q)
{
	for (unsigned i = 0; i < q->d->npaths; i++) {
		if (q->p[i].s && isc_logged_in(q->p[i].s))
			isc_logout_sync(q->p[i].s);
		isc_session_free(q->p[i].s);
		q->p[i].s = NULL;
	}
}

static void *queue_main(void *arg)
{
	struct queue *q = arg;
	struct map_dev *d = q->d;
	int rc = 0;
	for (unsigned i = 0; i < d->npaths; i++) {
		struct qpath *p = &q->p[i];
		p->q = q;
		p->s = isc_session_new(&d->o);
		if (!p->s) {
			rc = -errno;
			snprintf(q->errmsg, sizeof(q->errmsg), "cannot create a session: %s", strerror(errno));
			goto fail;
		}
		rc = isc_connect_url_sync(p->s, &d->paths[i].u);
		if (rc) {
			snprintf(q->errmsg, sizeof(q->errmsg), "%s: %s", d->paths[i].url, isc_errmsg(p->s));
			goto fail;
		}
		clear_unit_attentions(p->s, d->paths[i].u.lun);
		atomic_store(&p->state, PATH_UP);
	}
	/*
	 * Completions run as task work when this thread next waits on the ring,
	 * not by interrupting it: otherwise they interrupt whatever it is in, and
	 * a relogin's rdma_connect() on siw is a blocking TCP connect in this
	 * thread.  Interrupted (ERESTARTSYS), siw drops the half-made connection,
	 * and the target's siw listener takes that close for its own and dies
	 * (Linux 6.12: the portal refuses every connection from then on, and
	 * destroying it is a kernel BUG).  Linux 6.1 or later; before, as it was.
	 */
	unsigned entries = 2 * d->mo.depth + 8 + 2 * d->npaths;
	rc = io_uring_queue_init(entries, &q->ring, IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(entries, &q->ring, 0);
	if (rc) {
		snprintf(q->errmsg, sizeof(q->errmsg), "io_uring: %s", strerror(-rc));
		goto fail;
	}
	size_t dlen = ublk_desc_len(d->mo.depth);
	q->descs = mmap(NULL, dlen, PROT_READ, MAP_SHARED | MAP_POPULATE, d->cdev, ublk_desc_offset(q->id));
	if (q->descs == MAP_FAILED) {
		rc = -errno;
		q->descs = NULL;
		snprintf(q->errmsg, sizeof(q->errmsg), "mmap of the queue's descriptors: %s", strerror(-rc));
		goto fail_ring;
	}
	q->tags = calloc(d->mo.depth, sizeof(*q->tags));
	if (!q->tags) {
		rc = -ENOMEM;
		goto fail_ring;
	}
	for (unsigned i = 0; i < d->mo.depth; i++) {
		/* From the first path's pool: registered there; another path registers it per command. */
		q->tags[i] = (struct tag){ .q = q, .tag = (uint16_t)i, .buf = isc_buf_alloc(q->p[0].s, d->max_io) };
		if (!q->tags[i].buf) {
			rc = -ENOMEM;
			snprintf(q->errmsg, sizeof(q->errmsg), "%u I/O buffers of %u KiB: %s", d->mo.depth,
				 d->max_io >> 10, strerror(ENOMEM));
			goto fail_ring;
		}
		ublk_prep_io(io_uring_get_sqe(&q->ring), d->cdev, UBLK_IO_FETCH_REQ, (uint16_t)q->id, (uint16_t)i, 0,
			     q->tags[i].buf);
	}
	for (unsigned i = 0; i < d->npaths; i++)
		arm_poll(q, i);
	arm_wake(q);
	arm_tick(q);
	rc = io_uring_submit(&q->ring);
	if (rc < 0) {
		snprintf(q->errmsg, sizeof(q->errmsg), "submitting the queue's fetch commands: %s", strerror(-rc));
		goto fail_ring;
	}
	queue_setup_done(q, 0);

	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	/* Serve until the device is stopped and nothing is ours, or every tag was aborted. */
	while (q->aborted < d->mo.depth && !(atomic_load(&d->dev_stopped) && !q->busy)) {
		rc = io_uring_submit_and_wait(&q->ring, 1);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
			break;
		struct io_uring_cqe *cqe;
		unsigned head, n = 0;
		uint32_t polled = 0; /* paths whose fd was ready */
		bool tick = false;
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			n++;
			uint64_t kind = cqe->user_data & ~0xffffffffull;
			if (kind == UD_POLL) {
				polled |= 1u << (cqe->user_data & 0xff);
			} else if (kind == UD_WAKE) {
				uint64_t v;
				if (read(q->wake_fd, &v, sizeof(v)) < 0) {
					/* nothing to drain */
				}
				arm_wake(q);
			} else if (kind == UD_TICK) {
				tick = true;
			} else {
				on_fetch(q, cqe);
			}
		}
		io_uring_cq_advance(&q->ring, n);
		/* Service after every batch: submissions may have left work in the sessions' loops. */
		for (unsigned i = 0; i < d->npaths; i++) {
			isc_service(q->p[i].s, (polled >> i) & 1 ? POLLIN : 0);
			if ((polled >> i) & 1)
				arm_poll(q, i);
		}
		update_state(q);
		if (tick) {
			if (++q->ticks % RELOGIN_EVERY_S == 0)
				paths_retry(q);
			if (!atomic_load(&d->stopping))
				arm_tick(q);
		}
		if (q->wait_head)
			drain_wait(q, tick || atomic_load(&d->stopping));
	}
	for (unsigned i = 0; i < d->npaths; i++)
		atomic_store(&q->p[i].state, PATH_CLOSED);
	queue_free_sessions(q);
	munmap(q->descs, dlen);
	io_uring_queue_exit(&q->ring);
	free(q->tags);
	atomic_fetch_sub(&d->running, 1);
	return NULL;

fail_ring:
	if (q->descs)
		munmap(q->descs, ublk_desc_len(d->mo.depth));
	io_uring_queue_exit(&q->ring);
	free(q->tags);
	q->tags = NULL;
fail:
	queue_free_sessions(q);
	queue_setup_done(q, rc ? rc : -EIO);
	return NULL;
}

/* ---- the device ---- */

void map_opts_default(struct map_opts *mo)
{
	*mo = (struct map_opts){ .queues = 1, .depth = 64, .max_io_kib = 512, .timeout_s = 120, .recover_id = -1 };
}

static unsigned ilog2u(uint32_t v)
{
	unsigned s = 0;
	while (v > 1) {
		v >>= 1;
		s++;
	}
	return s;
}

static int set_params(struct ublk_ctrl *c, struct map_dev *d)
{
	const struct lun_info *li = &d->li;
	struct ublk_params p = { .len = sizeof(p), .types = UBLK_PARAM_TYPE_BASIC };
	p.basic.logical_bs_shift = (uint8_t)ilog2u(li->block_size);
	p.basic.physical_bs_shift = (uint8_t)(p.basic.logical_bs_shift + li->phys_shift);
	p.basic.io_min_shift = p.basic.physical_bs_shift;
	p.basic.io_opt_shift = p.basic.physical_bs_shift;
	p.basic.max_sectors = d->max_io >> 9;
	p.basic.dev_sectors = li->blocks * li->block_size >> 9;
	if (li->read_only)
		p.basic.attrs |= UBLK_ATTR_READ_ONLY;
	if (li->wce)
		p.basic.attrs |= UBLK_ATTR_VOLATILE_CACHE | (li->fua ? UBLK_ATTR_FUA : 0);
	if ((li->unmap || li->write_same) && !li->read_only) {
		uint32_t spb = li->block_size >> 9;
		uint64_t ws = li->max_ws_blocks ? li->max_ws_blocks : 65535;
		uint64_t um = li->max_unmap_blocks && li->max_unmap_blocks != UINT32_MAX ? li->max_unmap_blocks
											    : (1u << 22);
		p.types |= UBLK_PARAM_TYPE_DISCARD;
		p.discard.discard_granularity = li->block_size;
		p.discard.max_discard_segments = 1;
		p.discard.max_discard_sectors = li->unmap ? (uint32_t)(um * spb > UINT32_MAX >> 1 ? UINT32_MAX >> 1
												 : um * spb)
							  : 0;
		p.discard.max_write_zeroes_sectors =
			li->write_same ? (uint32_t)(ws * spb > UINT32_MAX >> 1 ? UINT32_MAX >> 1 : ws * spb) : 0;
	}
	return ublk_ctrl_cmd(c, UBLK_CMD_SET_PARAMS, d->dev_id, &p, sizeof(p), 0);
}

static int open_cdev(uint32_t dev_id)
{
	char p[64];
	snprintf(p, sizeof(p), "/dev/ublkc%u", dev_id);
	/* devtmpfs creates the node as the driver adds it; udev may still be changing it. */
	for (int i = 0; i < 100; i++) {
		int fd = open(p, O_RDWR | O_CLOEXEC);
		if (fd >= 0 || errno != ENOENT)
			return fd >= 0 ? fd : -errno;
		usleep(50000);
	}
	return -ENOENT;
}

/* DEL_DEV waits until nobody holds /dev/ublkcN open or mapped: close it first. */
static void remove_dev(struct ublk_ctrl *c, uint32_t dev_id)
{
	ublk_ctrl_cmd(c, UBLK_CMD_STOP_DEV, dev_id, NULL, 0, 0);
	ublk_ctrl_cmd(c, UBLK_CMD_DEL_DEV, dev_id, NULL, 0, 0);
	char p[128];
	state_path(dev_id, p, sizeof(p));
	unlink(p);
}

static void wake_queues(struct map_dev *d)
{
	uint64_t one = 1;
	for (unsigned i = 0; i < d->mo.queues; i++)
		if (d->qs[i].wake_fd >= 0 && write(d->qs[i].wake_fd, &one, sizeof(one)) < 0) {
			/* the queue sees `stopping` at its next event anyway */
		}
}

/*
 * --recover N: the device of a killed `iseradm map --recoverable` keeps its
 * geometry and queues; its I/O waits in the kernel.  Take it over with the
 * same LUN (same capacity and block size).
 */
static int recover_start(struct ublk_ctrl *c, struct map_dev *d)
{
	struct ublksrv_ctrl_dev_info info;
	d->dev_id = (uint32_t)d->mo.recover_id;
	int rc = ublk_ctrl_cmd(c, UBLK_CMD_GET_DEV_INFO, d->dev_id, &info, sizeof(info), 0);
	if (rc < 0) {
		fprintf(stderr, "iseradm map --recover: ublk device %u: %s\n", d->dev_id, strerror(-rc));
		return rc;
	}
	if (!(info.flags & UBLK_F_USER_RECOVERY)) {
		fprintf(stderr, "iseradm map --recover: /dev/ublkb%u was not mapped with --recoverable\n", d->dev_id);
		return -EINVAL;
	}
	struct ublk_params p = { .len = sizeof(p) };
	rc = ublk_ctrl_cmd(c, UBLK_CMD_GET_PARAMS, d->dev_id, &p, sizeof(p), 0);
	if (rc < 0) {
		fprintf(stderr, "iseradm map --recover: parameters of ublk device %u: %s\n", d->dev_id, strerror(-rc));
		return rc;
	}
	if (p.basic.dev_sectors != d->li.blocks * d->li.block_size >> 9 ||
	    p.basic.logical_bs_shift != ilog2u(d->li.block_size)) {
		fprintf(stderr, "iseradm map --recover: /dev/ublkb%u has %llu sectors of %u bytes, the LUN %" PRIu64
			" blocks of %u bytes: not the same LUN\n", d->dev_id, (unsigned long long)p.basic.dev_sectors,
			1u << p.basic.logical_bs_shift, d->li.blocks, d->li.block_size);
		return -EINVAL;
	}
	d->mo.queues = info.nr_hw_queues;
	d->mo.depth = info.queue_depth;
	d->max_io = info.max_io_buf_bytes;
	rc = ublk_ctrl_cmd(c, UBLK_CMD_START_USER_RECOVERY, d->dev_id, NULL, 0, 0);
	if (rc < 0)
		fprintf(stderr, "iseradm map --recover: /dev/ublkb%u: %s%s\n", d->dev_id, strerror(-rc),
			rc == -EBUSY ? " (its iseradm map still runs?)" : "");
	return rc;
}

/* --daemon: the parent waits for the child to say the device is up, prints, exits. */
static int report_fd = -1;

static void report(int err, const char *line)
{
	if (report_fd < 0)
		return;
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "%d %s", err, line);
	if (write(report_fd, buf, (size_t)n) < 0) {
		/* the parent is gone: nobody to tell */
	}
	close(report_fd);
	report_fd = -1;
}

static int daemonize(void)
{
	int p[2];
	if (pipe(p))
		return -errno;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		char buf[256] = { 0 };
		ssize_t n = 0, k;
		while ((k = read(p[0], buf + n, sizeof(buf) - 1 - (size_t)n)) > 0)
			n += k;
		int err = -EIO;
		char *line = NULL;
		if (n > 0) {
			err = (int)strtol(buf, &line, 10);
			if (line && *line == ' ')
				line++;
		}
		if (err == 0 && line)
			printf("%s\n", line);
		fflush(stdout);
		_exit(n > 0 && err == 0 ? 0 : 6);
	}
	close(p[0]);
	report_fd = p[1];
	setsid();
	return 0;
}

/* The device as the URLs and options describe it: nothing probed or opened yet. */
static struct map_dev *map_dev_new(const struct isc_url *urls, unsigned nurls, const struct isc_options *o,
				   const struct map_opts *mo)
{
	struct map_dev *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->npaths = nurls;
	for (unsigned i = 0; i < nurls; i++) {
		const struct isc_url *u = &urls[i];
		d->paths[i].u = *u;
		char at[NETADDR_HOST_LEN];
		netaddr_join(at, sizeof(at), u->host, u->port);
		snprintf(d->paths[i].url, sizeof(d->paths[i].url), "%s://%s/%s/%" PRIu64, u->iser ? "iser" : "iscsi", at,
			 u->target, u->lun);
	}
	d->o = *o;
	d->mo = *mo;
	d->cdev = -1;
	/*
	 * One path: the session's own reconnect is the replacement timeout.  Several: a lost
	 * connection fails its commands at once, they go to another path (or wait for one up
	 * to the timeout), and paths_retry() logs the path in again.
	 */
	d->o.reconnect_timeout_s = nurls == 1 ? mo->timeout_s : 0;
	if (!d->o.nop_interval_s) {
		d->o.nop_interval_s = 5; /* notice a dead target without waiting for I/O */
		d->o.nop_timeout_s = 5;
	}
	return d;
}

/* SIGINT/SIGTERM/SIGHUP are taken by sigtimedwait in serve() (the threads inherit the mask). */
static void block_stop_signals(sigset_t *ss)
{
	sigemptyset(ss);
	sigaddset(ss, SIGINT);
	sigaddset(ss, SIGTERM);
	sigaddset(ss, SIGHUP);
	pthread_sigmask(SIG_BLOCK, ss, NULL);
}

/* Log in on each path once and read its LU (d->li); several URLs must reach one LU.  0 or -errno. */
static int probe_paths(struct map_dev *d, const struct isc_url *urls)
{
	int rc;
	for (unsigned i = 0; i < d->npaths; i++) {
		struct lun_info li = { 0 };
		struct isc_session *ps = isc_session_new(&d->o);
		if (!ps)
			return -errno;
		rc = isc_connect_url_sync(ps, &urls[i]);
		if (!rc)
			rc = probe_lun(ps, urls[i].lun, &li);
		if (rc) {
			if (rc != -EINVAL) /* probe_lun() said what it refuses */
				fprintf(stderr, "iseradm map: %s: %s\n", d->paths[i].url, isc_errmsg(ps));
			isc_session_free(ps);
			return rc;
		}
		isc_logout_sync(ps);
		isc_session_free(ps);
		/* Several URLs must reach one LU: the same VPD 83h designator, capacity and block size. */
		if (i && (strcmp(li.id, d->li.id) || !li.id[0] || li.blocks != d->li.blocks ||
			  li.block_size != d->li.block_size)) {
			fprintf(stderr, "iseradm map: %s is not the LU of %s (VPD 83h '%s' vs '%s', %" PRIu64 " vs %"
				PRIu64 " blocks of %u vs %u bytes)\n", d->paths[i].url, d->paths[0].url, li.id, d->li.id,
				li.blocks, d->li.blocks, li.block_size, d->li.block_size);
			return -EINVAL;
		}
		if (!i)
			d->li = li;
		else
			d->li.read_only |= li.read_only;
	}
	return 0;
}

/* The largest I/O: what was asked, within the LU's maximum transfer, at least a page. */
static void set_max_io(struct map_dev *d)
{
	d->max_io = d->mo.max_io_kib << 10;
	if (d->li.max_xfer_blocks && (uint64_t)d->li.max_xfer_blocks * d->li.block_size < d->max_io)
		d->max_io = d->li.max_xfer_blocks * d->li.block_size;
	if (d->max_io < 4096)
		d->max_io = 4096;
}

/* A new ublk device with the LU's parameters; one added but not set up is removed again.  0 or -errno. */
static int dev_add(struct ublk_ctrl *c, struct map_dev *d, const struct map_opts *mo)
{
	struct ublksrv_ctrl_dev_info info = {
		.nr_hw_queues = (uint16_t)mo->queues,
		.queue_depth = (uint16_t)mo->depth,
		.max_io_buf_bytes = d->max_io,
		.dev_id = UBLK_DEV_NEW,
		.ublksrv_pid = getpid(),
		/* Re-issued after recovery: requests the dead server had taken (SCSI writes repeat safely). */
		.flags = mo->recoverable ? UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE : 0,
	};
	int rc = ublk_ctrl_cmd(c, UBLK_CMD_ADD_DEV, UBLK_DEV_NEW, &info, sizeof(info), 0);
	if (rc < 0) {
		fprintf(stderr, "iseradm map: adding a ublk device (%u queues of depth %u): %s%s\n",
			mo->queues, mo->depth, strerror(-rc),
			rc == -EINVAL ? " (--queues at most the number of CPUs)" : "");
		return rc;
	}
	d->dev_id = info.dev_id;
	rc = set_params(c, d);
	if (rc < 0) {
		fprintf(stderr, "iseradm map: setting the device's parameters: %s\n", strerror(-rc));
		remove_dev(c, d->dev_id);
	}
	return rc;
}

/*
 * A thread per queue (d->qs allocated), each then waited for until it has
 * its ring or failed; *started says how many run.  0 or the first -errno.
 */
static int queues_start(struct map_dev *d, unsigned *started)
{
	int rc = 0;
	for (unsigned i = 0; i < d->mo.queues; i++) {
		struct queue *q = &d->qs[i];
		q->d = d;
		q->id = i;
		q->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		pthread_mutex_init(&q->lock, NULL);
		pthread_cond_init(&q->cond, NULL);
		atomic_fetch_add(&d->running, 1);
		if (pthread_create(&q->thread, NULL, queue_main, q)) {
			atomic_fetch_sub(&d->running, 1);
			rc = -EAGAIN;
			break;
		}
		(*started)++;
	}
	for (unsigned i = 0; i < *started; i++) {
		struct queue *q = &d->qs[i];
		pthread_mutex_lock(&q->lock);
		while (!q->ready)
			pthread_cond_wait(&q->cond, &q->lock);
		pthread_mutex_unlock(&q->lock);
		if (q->err && !rc) {
			rc = q->err;
			fprintf(stderr, "iseradm map: queue %u: %s\n", i, q->errmsg);
		}
	}
	return rc;
}

/* The started queue threads told to stop at once and joined (the device did not start). */
static void queues_abort(struct map_dev *d, unsigned started)
{
	atomic_store(&d->stopping, true);
	atomic_store(&d->dev_stopped, true);
	wake_queues(d);
	for (unsigned i = 0; i < started; i++)
		pthread_join(d->qs[i].thread, NULL);
}

/* The device is up: its state file written, its name (or JSON) said to the user or the waiting parent. */
static void announce(struct map_dev *d)
{
	int mk = mkdirs();
	if (mk)
		fprintf(stderr, "iseradm map: %s: %s (iseradm maps will not list the device)\n", MAP_STATE_DIR,
			strerror(-mk));
	state_write(d);
	char line[200];
	if (d->mo.json) {
		json_object *jo = map_json(d);
		snprintf(line, sizeof(line), "%s", json_object_to_json_string_ext(jo, JSON_C_TO_STRING_PLAIN));
		json_object_put(jo);
	} else {
		snprintf(line, sizeof(line), "/dev/ublkb%u", d->dev_id);
	}
	if (d->mo.daemon) {
		report(0, line);
		int null = open("/dev/null", O_RDWR);
		if (null >= 0) {
			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			close(null);
		}
	} else {
		printf("%s\n", line);
		fflush(stdout);
	}
}

/* Until told to stop (or the device is removed under us): keep the state file current. */
static void serve(struct map_dev *d, const sigset_t *ss)
{
	struct timespec tick = { .tv_sec = 1 };
	uint64_t last = paths_digest(d);
	while (atomic_load(&d->running) == d->mo.queues) {
		if (sigtimedwait(ss, NULL, &tick) > 0)
			break;
		uint64_t now = paths_digest(d);
		if (now != last) {
			last = now;
			state_write(d);
		}
	}
}

/* The queues serve what is in flight until STOP_DEV returns (it drains the device), then end. */
static void dev_stop(struct ublk_ctrl *c, struct map_dev *d)
{
	atomic_store(&d->stopping, true);
	wake_queues(d);
	ublk_ctrl_cmd(c, UBLK_CMD_STOP_DEV, d->dev_id, NULL, 0, 0);
	atomic_store(&d->dev_stopped, true);
	wake_queues(d);
	for (unsigned i = 0; i < d->mo.queues; i++)
		pthread_join(d->qs[i].thread, NULL);
}

static void map_dev_free(struct map_dev *d, struct ublk_ctrl *c)
{
	if (d->qs)
		for (unsigned i = 0; i < d->mo.queues; i++)
			if (d->qs[i].wake_fd > 0)
				close(d->qs[i].wake_fd);
	free(d->qs);
	if (d->cdev >= 0)
		close(d->cdev);
	ublk_ctrl_close(c);
	free(d);
}

int map_run(const struct isc_url *urls, unsigned nurls, const struct isc_options *o, const struct map_opts *mo)
{
	if (!nurls || nurls > MAP_MAX_PATHS)
		return -EINVAL;
	struct map_dev *d = map_dev_new(urls, nurls, o, mo);
	if (!d)
		return -ENOMEM;
	int rc;
	struct ublk_ctrl c = { .fd = -1 };
	if (mo->daemon && (rc = daemonize()) < 0) {
		fprintf(stderr, "iseradm map: cannot detach: %s\n", strerror(-rc));
		free(d);
		return rc;
	}
	sigset_t ss;
	block_stop_signals(&ss);
	rc = probe_paths(d, urls);
	if (rc)
		goto out;
	set_max_io(d);
	rc = ublk_ctrl_open(&c);
	if (rc) {
		fprintf(stderr, "iseradm map: %s: %s%s\n", UBLK_CONTROL, strerror(-rc),
			rc == -ENOENT ? " (load the ublk_drv module: modprobe ublk_drv)" : "");
		goto out;
	}
	bool recover = mo->recover_id >= 0;
	rc = recover ? recover_start(&c, d) : dev_add(&c, d, mo);
	if (rc < 0)
		goto out;
	d->cdev = open_cdev(d->dev_id);
	if (d->cdev < 0) {
		rc = d->cdev;
		fprintf(stderr, "iseradm map: /dev/ublkc%u: %s\n", d->dev_id, strerror(-rc));
		goto out_del;
	}
	d->qs = calloc(d->mo.queues, sizeof(*d->qs));
	if (!d->qs) {
		rc = -ENOMEM;
		goto out_del;
	}
	unsigned started = 0;
	rc = queues_start(d, &started);
	if (!rc) {
		/* Waits until every queue has fetched all its tags. */
		rc = ublk_ctrl_cmd(&c, recover ? UBLK_CMD_END_USER_RECOVERY : UBLK_CMD_START_DEV, d->dev_id, NULL, 0,
				   (uint64_t)getpid());
		if (rc < 0)
			fprintf(stderr, "iseradm map: %s /dev/ublkb%u: %s\n", recover ? "recovering" : "starting",
				d->dev_id, strerror(-rc));
	}
	if (rc < 0) {
		queues_abort(d, started);
		if (recover)
			goto out; /* the device stays for another try, or for unmap */
		goto out_del;
	}
	announce(d);
	serve(d, &ss);
	dev_stop(&c, d);
	rc = 0;
out_del:
	if (d->cdev >= 0)
		close(d->cdev);
	d->cdev = -1;
	remove_dev(&c, d->dev_id);
out:
	if (rc < 0)
		report(rc, "");
	map_dev_free(d, &c);
	return rc;
}

/* ---- unmap, maps ---- */

static int parse_dev(const char *dev, uint32_t *id)
{
	const char *p = dev;
	if (!strncmp(p, "/dev/", 5))
		p += 5;
	if (!strncmp(p, "ublkb", 5) || !strncmp(p, "ublkc", 5))
		p += 5;
	char *end;
	unsigned long v = strtoul(p, &end, 10);
	if (!*p || *end || v >= UINT32_MAX)
		return -EINVAL;
	*id = (uint32_t)v;
	return 0;
}

static json_object *state_read(uint32_t id)
{
	char p[128];
	state_path(id, p, sizeof(p));
	struct stat st;
	if (stat(p, &st) || st.st_size > 65536) /* ours are small: a big one is not ours */
		return NULL;
	return json_object_from_file(p);
}

static pid_t state_pid(json_object *o)
{
	json_object *v;
	return o && json_object_object_get_ex(o, "pid", &v) ? (pid_t)json_object_get_int64(v) : 0;
}

static bool alive(pid_t pid)
{
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int map_unmap(const char *dev, bool json)
{
	uint32_t id;
	if (parse_dev(dev, &id)) {
		fprintf(stderr, "iseradm unmap: '%s' is not a ublk device (/dev/ublkbN or N)\n", dev);
		return -EINVAL;
	}
	json_object *o = state_read(id);
	pid_t pid = state_pid(o);
	json_object *v;
	/* Commands waiting for a re-login hold the device until the replacement timeout. */
	int wait_s = 30 + (o && json_object_object_get_ex(o, "timeout_s", &v) ? json_object_get_int(v) : 120);
	json_object_put(o);
	if (alive(pid)) {
		/* The map process stops the device, logs out and deletes it. */
		kill(pid, SIGTERM);
		for (int i = 0; i < wait_s * 20 && alive(pid); i++)
			usleep(50000);
		if (alive(pid))
			fprintf(stderr, "iseradm unmap: iseradm map (pid %d) did not stop within %d s; removing the "
				"device under it\n", (int)pid, wait_s);
	}
	/* The process is gone (or was killed): the device may still exist. */
	struct ublk_ctrl c = { .fd = -1 };
	int rc = ublk_ctrl_open(&c);
	if (rc) {
		fprintf(stderr, "iseradm unmap: %s: %s\n", UBLK_CONTROL, strerror(-rc));
		return rc;
	}
	struct ublksrv_ctrl_dev_info info;
	rc = ublk_ctrl_cmd(&c, UBLK_CMD_GET_DEV_INFO, id, &info, sizeof(info), 0);
	if (rc >= 0) {
		remove_dev(&c, id);
		rc = 0;
	} else if (rc == -ENODEV && alive(pid) == false && pid) {
		rc = 0; /* the map process removed it */
	} else if (rc == -ENODEV) {
		fprintf(stderr, "iseradm unmap: no ublk device %u\n", id);
	} else {
		fprintf(stderr, "iseradm unmap: ublk device %u: %s\n", id, strerror(-rc));
	}
	char p[128];
	state_path(id, p, sizeof(p));
	unlink(p);
	ublk_ctrl_close(&c);
	if (!rc && !json)
		printf("Unmapped /dev/ublkb%u\n", id);
	else if (!rc)
		printf("{\"device\":\"/dev/ublkb%u\",\"unmapped\":true}\n", id);
	return rc;
}

int map_list(bool json)
{
	json_object *all = json_object_new_array();
	struct ublk_ctrl c = { .fd = -1 };
	bool have_ctrl = ublk_ctrl_open(&c) == 0;
	for (uint32_t id = 0; id < 1024; id++) {
		json_object *o = state_read(id);
		if (!o)
			continue;
		pid_t pid = state_pid(o);
		const char *st = "mapped";
		struct ublksrv_ctrl_dev_info info;
		int irc = have_ctrl ? ublk_ctrl_cmd(&c, UBLK_CMD_GET_DEV_INFO, id, &info, sizeof(info), 0) : -ENOENT;
		if (irc == -ENODEV)
			st = "gone: no such ublk device";
		else if (!alive(pid) && irc >= 0 && (info.flags & UBLK_F_USER_RECOVERY))
			st = "dead: its I/O waits (iseradm map --recover N URL takes over, iseradm unmap removes it)";
		else if (!alive(pid))
			st = "dead: iseradm map is gone (iseradm unmap removes the device)";
		json_object_object_add(o, "status", json_object_new_string(st));
		json_object_array_add(all, o);
	}
	ublk_ctrl_close(&c);
	if (json) {
		printf("%s\n", json_object_to_json_string_ext(all, JSON_C_TO_STRING_PRETTY));
	} else {
		size_t n = json_object_array_length(all);
		if (!n)
			printf("No mapped devices\n");
		for (size_t i = 0; i < n; i++) {
			json_object *o = json_object_array_get_idx(all, i), *v, *paths;
#define S(k) (json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : "?")
			bool ro = json_object_object_get_ex(o, "read_only", &v) && json_object_get_boolean(v);
			bool grown = json_object_object_get_ex(o, "capacity_changed", &v) && json_object_get_boolean(v);
			printf("%s  %s  %s  %s bytes, %s-byte blocks%s  pid %s  %s\n", S("device"), S("url"),
			       S("transport"), S("bytes"), S("block_size"), ro ? ", read-only" : "", S("pid"), S("status"));
			if (grown)
				printf("  capacity changed on the target: unmap and map again to use the new size\n");
			if (json_object_object_get_ex(o, "paths", &paths))
				for (size_t k = 0; k < json_object_array_length(paths); k++) {
					json_object *p = json_object_array_get_idx(paths, k);
					json_object *qv, *pv, *uv, *sv, *rv;
					json_object_object_get_ex(p, "queue", &qv);
					json_object_object_get_ex(p, "path", &pv);
					json_object_object_get_ex(p, "url", &uv);
					json_object_object_get_ex(p, "state", &sv);
					json_object_object_get_ex(p, "reconnects", &rv);
					printf("  queue %s path %s %s: %s, %s reconnects\n", json_object_get_string(qv),
					       json_object_get_string(pv), json_object_get_string(uv),
					       json_object_get_string(sv), json_object_get_string(rv));
				}
#undef S
		}
	}
	json_object_put(all);
	return 0;
}
