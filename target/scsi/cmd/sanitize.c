/*
 * SANITIZE (SBC-4 5.30, 4.11): OVERWRITE, BLOCK ERASE, CRYPTO ERASE and
 * EXIT FAILURE MODE.
 *
 * The command is checked on the reactor (CDB, parameter list, the LU's
 * state); the operation then runs on a thread of its own, one per LU at a
 * time, so no reactor waits for a medium being erased.  It writes through
 * the backstore's synchronous path (bs_io without a reactor: pwrite,
 * NVMe passthrough ioctls, librbd waited for) from one buffer of
 * SAN_CHUNK_BYTES, whatever the LU's size, or has the backstore erase
 * range by range (backstore_sanitize).  The operation belongs to the LU,
 * not to the command: an abort, a reset, a logout or a lost connection
 * ends the SANITIZE command (IMMED=0) but not the operation, which stops
 * only when it is done, fails, or the LU is destroyed.
 *
 * While it runs, lu->sanitize is SAN_STATE_RUNNING and the LU refuses all
 * commands but INQUIRY, REPORT LUNS and REQUEST SENSE with NOT READY,
 * SANITIZE IN PROGRESS and the progress indication (SKSV set); REQUEST
 * SENSE returns the same.  If it fails, the LU is in sanitize failure mode
 * (SAN_STATE_FAILED): media access gets MEDIUM ERROR, SANITIZE COMMAND
 * FAILED, until a SANITIZE completes or, where the failed one had AUSE set,
 * EXIT FAILURE MODE.  Where the LU has a state folder (the APTPL one), a
 * marker file is written before the medium is touched and removed when the
 * operation succeeds, so an LU whose isertd died mid-sanitize comes back in
 * failure mode (docs/admin.md).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/log.h"
#include "common/reactor.h"
#include "target/scsi/cmd/sanitize.h"
#include "target/scsi/pr/pr_state.h"
#include "target/scsi/scsi_int.h"

/* An IMMED=0 SANITIZE looks at its stop flag (abort, lost connection) this often. */
#define SAN_POLL_MS 100
/* The worker looks this often for the writes it waits for to have ended, and warns after 10, 20, 40... s. */
#define SAN_DRAIN_POLL_US 1000
#define SAN_DRAIN_WARN_S 10

bool sanitize_inline;

struct san_wait {
	struct scsi_cmd *cmd;
	struct reactor_timer *timer;   /* NULL while none is armed */
	int result;                    /* 0 or -errno: how the operation ended */
};

/* Per LU, made at the first SANITIZE; fields (mu) are under lu->mu. */
struct lu_sanitize {
	pthread_t thread;
	bool joinable;                 /* (mu) a thread was started and not joined yet */
	bool cancel;                   /* (atomic) the LU goes: stop at the next chunk */
	bool ause;                     /* (mu) AUSE of the operation that runs or failed */
	uint8_t sa;                    /* (mu) its service action */
	struct san_wait *waiter;       /* (mu) the IMMED=0 command waiting, or NULL */
	struct san_overwrite ow;       /* the OVERWRITE parameters of the running operation */
	char *marker;                  /* the "sanitize needed" file, or NULL */
};

/* ---- parsing ---- */

static int err_cdb(struct san_err *e, uint16_t field, int bit)
{
	*e = (struct san_err){ .in_cdb = true, .field = field, .bit = (int8_t)bit };
	return -1;
}

static int err_param(struct san_err *e, uint16_t field, int bit)
{
	*e = (struct san_err){ .in_cdb = false, .field = field, .bit = (int8_t)bit };
	return -1;
}

int sanitize_parse_cdb(const uint8_t *cdb, uint32_t block_size, struct san_cdb *c, struct san_err *e)
{
	memset(c, 0, sizeof(*c));
	c->sa = cdb[1] & 0x1f;
	c->immed = cdb[1] & 0x80;
	/*
	 * ZNR (bit 6) is defined for zoned block devices (SBC-4 r7 on): these
	 * LUs are not zoned (VPD B1 ZONED 00b), so there is no write pointer
	 * to reset or keep and the bit changes nothing.  It is not reserved,
	 * so it is not refused either.
	 */
	c->znr = cdb[1] & 0x40;
	c->ause = cdb[1] & 0x20;
	for (int i = 2; i <= 6; i++)
		if (cdb[i])
			return err_cdb(e, (uint16_t)i, -1);
	c->plen = get_be16(cdb + 7);
	/* SBC-4 table 98: OVERWRITE takes 4 < length < block length + 5; the others none. */
	if (c->sa == SAN_OVERWRITE) {
		if (c->plen <= 4 || c->plen >= block_size + 5)
			return err_cdb(e, 7, -1);
	} else if (c->plen) {
		return err_cdb(e, 7, -1);
	}
	return 0;
}

int sanitize_parse_overwrite(const uint8_t *p, uint32_t len, uint32_t block_size, struct san_overwrite *o,
			     struct san_err *e)
{
	memset(o, 0, offsetof(struct san_overwrite, pattern));
	if (len < 4) {
		*e = (struct san_err){ .plle = true };
		return -1;
	}
	o->invert = p[0] & 0x80;
	o->count = p[0] & 0x1f;
	/* TEST (bits 6-5): 00b is the only mode offered; the others are for testing a device's own sanitize. */
	if (p[0] & 0x60)
		return err_param(e, 0, 6);
	if (!o->count)   /* 00h is reserved */
		return err_param(e, 0, 4);
	if (p[1])
		return err_param(e, 1, -1);
	o->ipl = get_be16(p + 2);
	if (!o->ipl || o->ipl > block_size || o->ipl > SAN_PATTERN_MAX)
		return err_param(e, 2, -1);
	/* The list is the header and the pattern, nothing less, nothing more. */
	if (4u + o->ipl != len)
		return err_param(e, 2, -1);
	memcpy(o->pattern, p + 4, o->ipl);
	return 0;
}

void sanitize_fill_block(const struct san_overwrite *o, unsigned pass, uint8_t *block, uint32_t block_size)
{
	/* With INVERT the passes alternate and the last one (count - 1) writes the pattern as given. */
	uint8_t x = o->invert && ((o->count - 1u - pass) & 1) ? 0xff : 0x00;

	for (uint32_t i = 0; i < block_size; i++)
		block[i] = o->pattern[i % o->ipl] ^ x;
}

/* ---- what the LU can do, and what its state refuses ---- */

static unsigned lu_methods(const struct scsi_lu *lu)
{
	/* BLOCK ERASE deallocates: a thin LU's business (LBPME, GET LBA STATUS after it). */
	unsigned m = backstore_sanitize_methods(lu->bs);
	if (!lu->thin)
		m &= ~(unsigned)BS_SANITIZE_BLOCK_ERASE;
	return m;
}

bool sanitize_sa_supported(const struct scsi_lu *lu, uint16_t sa)
{
	if (!lu)
		return true;   /* the opcode table's view without an LU: the command exists */
	switch (sa) {
	case SAN_BLOCK_ERASE:
		return lu_methods(lu) & BS_SANITIZE_BLOCK_ERASE;
	case SAN_CRYPTO_ERASE:
		return lu_methods(lu) & BS_SANITIZE_CRYPTO_ERASE;
	default:
		return true;
	}
}

uint8_t sanitize_vpd_b1(const struct scsi_lu *lu)
{
	unsigned m = lu_methods(lu);
	uint8_t b = 0;

	/* 01b: a read of an LBA after the erase completes without error (zeroes on these stores). */
	if (m & BS_SANITIZE_BLOCK_ERASE)
		b |= 0x40;   /* WABEREQ */
	if (m & BS_SANITIZE_CRYPTO_ERASE)
		b |= 0x10;   /* WACEREQ */
	return b;
}

bool sanitize_check(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t st = __atomic_load_n(&lu->sanitize, __ATOMIC_ACQUIRE);

	if (st == SAN_STATE_NONE)
		return true;
	/* SBC-4 4.11: these go on while a sanitize operation runs or failed. */
	if (op->opcode == SCSI_OP_INQUIRY || op->opcode == SCSI_OP_REPORT_LUNS ||
	    op->opcode == SCSI_OP_REQUEST_SENSE)
		return true;
	/* Failure mode: the medium is not to be trusted until a SANITIZE ends it. */
	if (st == SAN_STATE_FAILED && (op->opcode == SCSI_OP_SANITIZE || !(op->flags & OPF_MEDIUM)))
		return true;
	lu_sanitize_refuse(cmd, st);
	return false;
}

bool sanitize_sense(struct scsi_lu *lu, uint8_t *key, uint16_t *asc, uint8_t sks[3])
{
	uint8_t st = __atomic_load_n(&lu->sanitize, __ATOMIC_ACQUIRE);

	if (st == SAN_STATE_RUNNING) {
		*key = SK_NOT_READY;
		*asc = ASC_SANITIZE_IN_PROGRESS;
		sks[0] = 0x80;
		put_be16(sks + 1, __atomic_load_n(&lu->san_progress, __ATOMIC_RELAXED));
		return true;
	}
	if (st == SAN_STATE_FAILED) {
		*key = SK_MEDIUM_ERROR;
		*asc = ASC_SANITIZE_FAILED;
		return false;   /* no progress: the caller sends it without sense-key specific data */
	}
	return false;
}

/* ---- the marker: an LU whose sanitize did not end comes back needing one ---- */

static char *marker_path(const char *dir, const char *naa)
{
	char *p = NULL;
	if (!dir || !naa || asprintf(&p, "%s/sanitize-%s", dir, naa) < 0)
		return NULL;
	return p;
}

/* On the worker: written and made durable (as the APTPL files are) before the medium is touched. */
static void marker_set(struct lu_sanitize *s, bool ause)
{
	char err[256];

	if (s->marker && pr_state_write(s->marker, ause ? "ause=1\n" : "ause=0\n", err, sizeof(err)) < 0)
		log_warn("sanitize: %s: a restart during the sanitize would not remember it", err);
}

static void marker_clear(struct lu_sanitize *s)
{
	if (s->marker && unlink(s->marker) < 0 && errno != ENOENT)
		log_warn("sanitize: cannot remove %s: %s", s->marker, strerror(errno));
}

static struct lu_sanitize *san_get(struct scsi_lu *lu)
{
	/* Under lu->mu. */
	if (!lu->san) {
		struct lu_sanitize *s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		__atomic_store_n(&lu->san, s, __ATOMIC_RELEASE);
	}
	return lu->san;
}

void sanitize_lu_init(struct scsi_lu *lu, const char *state_dir, const char *naa_hex)
{
	char *path = marker_path(state_dir, naa_hex);
	if (!path)
		return;
	pthread_mutex_lock(&lu->mu);
	struct lu_sanitize *s = san_get(lu);
	if (!s) {
		pthread_mutex_unlock(&lu->mu);
		free(path);
		return;
	}
	s->marker = path;
	char txt[16] = "";
	FILE *f = fopen(path, "r");
	if (f) {
		if (!fgets(txt, sizeof(txt), f))
			txt[0] = 0;
		fclose(f);
		s->ause = strncmp(txt, "ause=1", 6) == 0;
		__atomic_store_n(&lu->sanitize, SAN_STATE_FAILED, __ATOMIC_RELEASE);
		log_warn("LU %s: a sanitize did not finish before isertd stopped (%s): the LU is in sanitize failure "
			 "mode until a SANITIZE completes%s", lu->serial, path,
			 s->ause ? " or EXIT FAILURE MODE" : "");
	}
	pthread_mutex_unlock(&lu->mu);
}

/* ---- the operation (worker thread) ---- */

struct san_job {
	struct scsi_lu *lu;
	struct lu_sanitize *s;
	uint8_t sa;
	bool ause;
};

static bool cancelled(struct lu_sanitize *s)
{
	return __atomic_load_n(&s->cancel, __ATOMIC_ACQUIRE);
}

static void set_progress(struct scsi_lu *lu, uint64_t done, uint64_t total)
{
	uint64_t p = total ? done * 65536 / total : 0;
	__atomic_store_n(&lu->san_progress, (uint16_t)(p > 65535 ? 65535 : p), __ATOMIC_RELAXED);
}

static void sync_done(struct bs_io *io, int res)
{
	*(int *)io->priv = res;
}

/* One synchronous backstore request (no reactor: the store completes before returning). */
static int bs_sync(struct backstore *bs, enum backstore_op op, uint64_t off, uint64_t len, void *buf)
{
	struct bs_io io;
	int res = -EIO;

	memset(&io, 0, sizeof(io));
	io.op = op;
	io.fua = !backstore_write_cache(bs);   /* WCE=0: durable as each chunk completes, as a WRITE would be */
	io.offset = off;
	io.len = len;
	io.buf = buf;
	io.cb = sync_done;
	io.priv = &res;
	backstore_submit(bs, &io);
	return res;
}

static int run_overwrite(struct san_job *j)
{
	struct scsi_lu *lu = j->lu;
	struct backstore *bs = lu->bs;
	uint32_t bsz = lu->block_size;
	uint64_t size = backstore_size(bs), total = size * j->s->ow.count, done = 0;
	uint8_t *buf = NULL;
	int rc = 0;

	if (posix_memalign((void **)&buf, 4096, SAN_CHUNK_BYTES))
		return -ENOMEM;
	for (unsigned pass = 0; pass < j->s->ow.count && !rc; pass++) {
		sanitize_fill_block(&j->s->ow, pass, buf, bsz);
		for (uint32_t o = bsz; o < SAN_CHUNK_BYTES; o += bsz)
			memcpy(buf + o, buf, bsz);
		for (uint64_t off = 0; off < size && !rc; off += SAN_CHUNK_BYTES) {
			if (cancelled(j->s)) {
				rc = -ECANCELED;
				break;
			}
			uint64_t n = MIN((uint64_t)SAN_CHUNK_BYTES, size - off);
			rc = bs_sync(bs, BS_WRITE, off, n, buf);
			done += n;
			set_progress(j->lu, done, total);
		}
	}
	if (!rc)
		rc = bs_sync(bs, BS_FLUSH, 0, 0, NULL);
	free(buf);
	return rc;
}

static int run_erase(struct san_job *j, unsigned method)
{
	struct backstore *bs = j->lu->bs;
	uint64_t size = backstore_size(bs), off = 0;

	while (off < size) {
		if (cancelled(j->s))
			return -ECANCELED;
		int64_t n = backstore_sanitize(bs, method, off, MIN((uint64_t)SAN_ERASE_BYTES, size - off));
		if (n < 0)
			return (int)n;
		if (n == 0)
			return -EIO;
		off += (uint64_t)n;
		set_progress(j->lu, off, size);
	}
	return bs_sync(bs, BS_FLUSH, 0, 0, NULL);
}

/*
 * Every write that began before the state said RUNNING has ended: those in
 * the backstore complete, copies stop at their next chunk (copy.c), new
 * ones are refused.  Only then is the medium touched, or a write that was
 * already running could land after the pass that erased its blocks.
 */
static int drain_writes(struct scsi_lu *lu, struct lu_sanitize *s)
{
	uint64_t t0 = reactor_now_ns(), warn_s = SAN_DRAIN_WARN_S;
	uint32_t n;

	while ((n = lu_writers(lu)) != 0) {
		if (cancelled(s))
			return -ECANCELED;
		uint64_t waited_s = (reactor_now_ns() - t0) / 1000000000u;
		if (waited_s >= warn_s) {
			log_warn("LU %s: SANITIZE waits for %u writes still running after %llu s (a backstore that "
				 "does not answer?)", lu->serial, n, (unsigned long long)waited_s);
			warn_s *= 2;
		}
		usleep(SAN_DRAIN_POLL_US);
	}
	return 0;
}

static void waiter_done(void *arg);

static void *worker(void *arg)
{
	struct san_job *j = arg;
	struct scsi_lu *lu = j->lu;
	struct lu_sanitize *s = j->s;
	int rc;

	marker_set(s, j->ause);
	log_info("LU %s: SANITIZE %s started", lu->serial,
		 j->sa == SAN_OVERWRITE ? "OVERWRITE" : j->sa == SAN_BLOCK_ERASE ? "BLOCK ERASE" : "CRYPTO ERASE");
	rc = drain_writes(lu, s);
	if (!rc && j->sa == SAN_OVERWRITE)
		rc = run_overwrite(j);
	else if (!rc)
		rc = run_erase(j, j->sa == SAN_BLOCK_ERASE ? BS_SANITIZE_BLOCK_ERASE : BS_SANITIZE_CRYPTO_ERASE);
	if (!rc)
		marker_clear(s);
	if (rc == -ECANCELED)
		log_info("LU %s: SANITIZE stopped: the LU is going away", lu->serial);
	else if (rc)
		log_warn("LU %s: SANITIZE failed: %s; the LU is in sanitize failure mode", lu->serial, strerror(-rc));
	else
		log_info("LU %s: SANITIZE completed", lu->serial);

	pthread_mutex_lock(&lu->mu);
	__atomic_store_n(&lu->san_progress, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&lu->sanitize, rc ? SAN_STATE_FAILED : SAN_STATE_NONE, __ATOMIC_RELEASE);
	struct san_wait *w = s->waiter;
	s->waiter = NULL;
	pthread_mutex_unlock(&lu->mu);
	if (w) {
		w->result = rc;
		if (!w->cmd->reactor)
			waiter_done(w);   /* tools, tests: no reactor to go back to */
		else
			while (reactor_send(w->cmd->reactor, waiter_done, w) != 0)
				usleep(1000);   /* the answer must not be lost: wait for memory */
	}
	free(j);
	return NULL;
}

/* ---- the command ---- */

static void set_err(struct scsi_cmd *cmd, const struct san_err *e)
{
	if (e->plle)
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
	else
		sense_set_field(cmd, SK_ILLEGAL_REQUEST, e->in_cdb ? ASC_INVALID_FIELD_IN_CDB : ASC_INVALID_FIELD_IN_PARAM,
				e->in_cdb, e->field, e->bit);
}

bool sanitize_prep(struct scsi_cmd *cmd)
{
	struct san_cdb c;
	struct san_err e;

	if (sanitize_parse_cdb(cmd->cdb, cmd->lu->block_size, &c, &e)) {
		set_err(cmd, &e);
		return false;
	}
	if (!c.plen) {
		scsi_no_xfer(cmd);
		return true;
	}
	return scsi_prep_param_list(cmd, c.plen);
}

static void waiter_done(void *arg)
{
	struct san_wait *w = arg;
	struct scsi_cmd *cmd = w->cmd;

	if (w->timer && cmd->reactor)
		reactor_timer_cancel(cmd->reactor, w->timer);
	if (w->result)
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_SANITIZE_FAILED);
	free(w);
	scsi_cmd_complete(cmd);
}

/* The IMMED=0 command's abort or lost connection ends it; the operation goes on. */
static void waiter_poll(void *arg)
{
	struct san_wait *w = arg;
	struct scsi_cmd *cmd = w->cmd;
	struct scsi_lu *lu = cmd->lu;
	bool mine = false;

	w->timer = NULL;
	if (cmd->stop) {
		pthread_mutex_lock(&lu->mu);
		if (lu->san->waiter == w) {
			lu->san->waiter = NULL;
			mine = true;
		}
		pthread_mutex_unlock(&lu->mu);
		if (mine) {
			free(w);
			cmd->status = SCSI_TASK_ABORTED;
			cmd->sense_len = 0;
			scsi_cmd_complete(cmd);
		}
		return;   /* else the worker took it: waiter_done is on its way */
	}
	w->timer = reactor_timer_add(cmd->reactor, SAN_POLL_MS, waiter_poll, w);
}

void sanitize_exec(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct san_cdb c;
	struct san_err e;
	struct san_overwrite ow;
	struct san_job *j = NULL;
	struct san_wait *w = NULL;

	if (sanitize_parse_cdb(cmd->cdb, lu->block_size, &c, &e)) {
		set_err(cmd, &e);
		goto out;
	}
	if (c.sa == SAN_OVERWRITE) {
		if (!cmd->buf || cmd->dout_len < c.plen) {
			sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
			goto out;
		}
		if (sanitize_parse_overwrite(cmd->buf->data, c.plen, lu->block_size, &ow, &e)) {
			set_err(cmd, &e);
			goto out;
		}
	}
	if (c.sa != SAN_EXIT_FAILURE) {
		j = calloc(1, sizeof(*j));
		if (!c.immed)
			w = calloc(1, sizeof(*w));
		if (!j || (!c.immed && !w)) {
			sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			goto out;
		}
	}

	pthread_mutex_lock(&lu->mu);
	struct lu_sanitize *s = san_get(lu);
	uint8_t st = __atomic_load_n(&lu->sanitize, __ATOMIC_RELAXED);
	if (!s) {
		pthread_mutex_unlock(&lu->mu);
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		goto out;
	}
	if (st == SAN_STATE_RUNNING) {
		/* Another SANITIZE started since prepare looked. */
		pthread_mutex_unlock(&lu->mu);
		lu_sanitize_refuse(cmd, st);
		goto out;
	}
	if (c.sa == SAN_EXIT_FAILURE) {
		/* Restricted completion mode (AUSE=0): only a SANITIZE that completes ends it (SBC-4 5.30.1). */
		if (st == SAN_STATE_FAILED && !s->ause) {
			pthread_mutex_unlock(&lu->mu);
			sense_invalid_cdb(cmd, 1, 4);
			goto out;
		}
		if (st == SAN_STATE_FAILED) {
			__atomic_store_n(&lu->sanitize, SAN_STATE_NONE, __ATOMIC_RELEASE);
			marker_clear(s);   /* a small unlink; the worker is not running */
			log_info("LU %s: EXIT FAILURE MODE: the failed sanitize is left behind", lu->serial);
		}
		pthread_mutex_unlock(&lu->mu);
		goto out;
	}
	/* A failure in restricted mode may not be left for the unrestricted one (T10 04-15 SBC-4 AUSE). */
	if (st == SAN_STATE_FAILED && !s->ause && c.ause) {
		pthread_mutex_unlock(&lu->mu);
		sense_invalid_cdb(cmd, 1, 5);
		goto out;
	}
	if (s->joinable) {
		/* The previous operation's thread has ended (the state is not RUNNING): reap it. */
		pthread_join(s->thread, NULL);
		s->joinable = false;
	}
	if (c.sa == SAN_OVERWRITE)
		s->ow = ow;
	s->sa = c.sa;
	s->ause = c.ause;
	s->cancel = false;
	__atomic_store_n(&lu->san_progress, 0, __ATOMIC_RELAXED);
	j->lu = lu;
	j->s = s;
	j->sa = c.sa;
	j->ause = c.ause;
	if (w) {
		w->cmd = cmd;
		s->waiter = w;
	}
	/* Sequentially consistent: the other half of lu_write_begin's handshake (lu/lu.c). */
	__atomic_store_n(&lu->sanitize, SAN_STATE_RUNNING, __ATOMIC_SEQ_CST);
	if (sanitize_inline) {
		pthread_mutex_unlock(&lu->mu);
		worker(j);   /* ends w's command itself (no reactor) */
		if (w)
			return;
		j = NULL;
		goto out;
	}
	if (pthread_create(&s->thread, NULL, worker, j) != 0) {
		__atomic_store_n(&lu->sanitize, st, __ATOMIC_RELEASE);
		s->waiter = NULL;
		pthread_mutex_unlock(&lu->mu);
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		goto out;
	}
	s->joinable = true;
	j = NULL;   /* the worker's now */
	if (w) {
		/* Armed under the mutex: the worker's answer cannot overtake it (it runs on this reactor). */
		if (cmd->reactor)
			w->timer = reactor_timer_add(cmd->reactor, SAN_POLL_MS, waiter_poll, w);
		pthread_mutex_unlock(&lu->mu);
		return;   /* waiter_done or waiter_poll completes it */
	}
	pthread_mutex_unlock(&lu->mu);
out:
	free(j);
	free(w);
	scsi_cmd_complete(cmd);
}

void sanitize_lu_destroy(struct scsi_lu *lu)
{
	struct lu_sanitize *s = lu->san;

	if (!s)
		return;
	__atomic_store_n(&s->cancel, true, __ATOMIC_RELEASE);
	pthread_mutex_lock(&lu->mu);
	bool join = s->joinable;
	s->joinable = false;
	pthread_mutex_unlock(&lu->mu);
	if (join)
		pthread_join(s->thread, NULL);
	free(s->marker);
	free(s);
	lu->san = NULL;
}
