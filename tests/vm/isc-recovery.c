/*
 * isc-recovery [options] MODE URL: error recovery of the isert initiator
 * library on real RDMA (used by t-initiator-iser.sh).  The same checks as
 * tests/initiator/test_initiator.c's test_reconnect and test_abort run over
 * loopback TCP; here they run over iser:// on Soft-RoCE and Soft-iWARP.
 *
 * reconnect  -n writes (default 1024) of -b bytes (32k), each to a region of
 *            its own with a pattern of its own, -q (16) in flight; half come
 *            from a pool buffer, half from malloc'd memory (registered per
 *            command, kept over a reconnect).  After --kill-after
 *            completions (256) the target (--kill-pid) gets SIGKILL with
 *            writes in flight; the caller restarts it.  Every write must
 *            complete once without error, the session must have reconnected,
 *            and every region must read back.
 * abort      -r times (4) ABORT TASK of a -s byte READ (8m) just submitted:
 *            the task's callback runs once, the TMF is answered "function
 *            complete" or "task does not exist", a READ that still ended
 *            GOOD has the right data, and data written and read afterwards
 *            on the same session matches.  The READ's buffer is malloc'd
 *            (registered for the command), with --pool from the pool.
 * lu-reset   LOGICAL UNIT RESET with -q (32) commands of -b bytes (256k) in
 *            flight, half WRITEs, half READs of regions written before: each
 *            command completes once (GOOD, aborted, or a SCSI error status),
 *            those that ended GOOD moved the right data, then I/O works again.
 *            Half the buffers are malloc'd, half from the pool; --pool: all.
 *
 * Prints "ok"/"not ok" lines and "# N failed"; exits 0 when all passed.
 * options (before or after MODE): -i INITIATOR-NAME  -n N  -q QD  -b SIZE
 *          -s SIZE  -r N  --pool  --lba START  --kill-pid PID  --kill-after N
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "isert/initiator.h"
#include "isc-check.h"

static uint32_t salt;           /* differs per run: data left by an earlier run cannot pass for ours */
static struct isc_url url;
static struct isc_capacity cap;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The run's salt in the upper half: data left by an earlier run cannot pass for ours. */
static void fill(uint8_t *p, uint32_t len, uint32_t seed)
{
	pattern_fill(p, len, seed ^ (uint64_t)salt << 32);
}

static bool same(const uint8_t *got, uint32_t len, uint32_t seed)
{
	char why[128];
	return pattern_compare(got, len, seed ^ (uint64_t)salt << 32, why, sizeof(why)) == 0;
}

/* One round of the caller's poll loop. */
static int pump(struct isc_session *s, int ms)
{
	struct pollfd p = { .fd = isc_get_fd(s), .events = (short)isc_which_events(s) };
	if (poll(&p, 1, ms) < 0 && errno != EINTR)
		return -errno;
	return isc_service(s, p.revents);
}

static void describe(struct isc_session *s, const struct isc_result *r, char *buf, size_t len)
{
	if (r->err == -EIO)
		isc_result_str(r, buf, len);
	else
		snprintf(buf, len, "%s (%s)", isc_strerror(r->err), isc_errmsg(s));
}

/* A new I_T nexus or a reset leaves a UNIT ATTENTION (tgtd: power on); TEST UNIT READY takes it. */
static int tur(struct isc_session *s)
{
	int rc = 0;
	for (int i = 0; i < 3 && (rc = isc_tur_sync(s, url.lun, NULL)); i++)
		;
	return rc;
}

/* ---- reconnect ---- */

struct wjob {
	struct isc_session *s;
	uint8_t *pool, *heap;        /* sources: even writes from the pool, odd from malloc'd memory */
	uint32_t len, n, qd, issued, done, errors;
	uint64_t lba0;
	unsigned *ncb;               /* callbacks per write: must end at exactly 1 */
	char why[300];
};

struct warg { struct wjob *j; uint32_t i; };

static void wjob_next(struct wjob *j);

static void wjob_cb(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct warg *a = arg;
	struct wjob *j = a->j;
	j->ncb[a->i]++;
	j->done++;
	if (r->err && !j->errors++)
		describe(s, r, j->why, sizeof(j->why));
	free(a);
	wjob_next(j);
}

static uint8_t *wjob_src(const struct wjob *j, uint32_t i)
{
	return (i % 2 ? j->heap : j->pool) + (size_t)(i / 2) * j->len;
}

static void wjob_next(struct wjob *j)
{
	while (j->issued < j->n && j->issued - j->done < j->qd) {
		uint32_t i = j->issued++, bl = j->len / cap.block_size;
		struct isc_cmd c;
		isc_cmd_write16(&c, url.lun, j->lba0 + (uint64_t)i * bl, bl, cap.block_size, wjob_src(j, i), false);
		struct warg *a = malloc(sizeof(*a));
		if (a)
			*a = (struct warg){ j, i };
		if (!a || !isc_submit(j->s, &c, wjob_cb, a)) {
			if (!j->errors++)
				snprintf(j->why, sizeof(j->why), "submit: %s", strerror(errno));
			free(a);
			j->ncb[i]++;
			j->done++;
		}
	}
}

static int do_reconnect(struct isc_session *s, uint32_t n, uint32_t qd, uint32_t len, uint64_t lba0,
			pid_t victim, uint32_t kill_after)
{
	char what[200], why[400], kill_err[100] = "";
	uint32_t bl = len / cap.block_size;
	if (!victim || !n || kill_after >= n || len % cap.block_size || lba0 + (uint64_t)n * bl > cap.blocks) {
		fprintf(stderr, "isc-recovery: reconnect needs --kill-pid, --kill-after < -n, and -n x -b on the LUN\n");
		return 2;
	}
	/* Static: tasks still pending at logout complete after this function returned. */
	static struct wjob j;
	j = (struct wjob){ .s = s, .len = len, .n = n, .qd = qd, .lba0 = lba0 };
	size_t half = (size_t)(n + 1) / 2 * len;
	j.pool = isc_buf_alloc(s, half);
	j.heap = malloc(half);
	j.ncb = calloc(n, sizeof(*j.ncb));
	if (!j.pool || !j.heap || !j.ncb) {
		check("reconnect: buffers", false, "%s", strerror(errno));
		return 1;
	}
	for (uint32_t i = 0; i < n; i++)
		fill(wjob_src(&j, i), len, 0xc0de0000u + i);
	struct isc_params p;
	uint64_t t0 = now_ms(), deadline = t0 + 90000, t_kill = 0, t_relogin = 0, t_first = 0;
	uint32_t done_at_kill = 0, flying_at_kill = 0;
	wjob_next(&j);
	while (j.done < n && now_ms() < deadline) {
		int rc = pump(s, 100);
		if (rc) {
			snprintf(j.why, sizeof(j.why), "isc_service: %s (%s)", isc_strerror(rc), isc_errmsg(s));
			break;
		}
		if (!t_kill && j.done >= kill_after) {
			/* Now, not from the script: the library has writes outstanding this instant. */
			done_at_kill = j.done;
			flying_at_kill = j.issued - j.done;
			if (kill(victim, SIGKILL)) {
				snprintf(kill_err, sizeof(kill_err), "kill %d: %s", (int)victim, strerror(errno));
				break;
			}
			t_kill = now_ms();
			printf("# SIGKILL to pid %d after %u of %u writes (%.1f s), %u in flight\n", (int)victim, j.done,
			       n, (double)(t_kill - t0) / 1000, flying_at_kill);
			fflush(stdout);
		}
		if (t_kill && !t_relogin && !isc_get_params(s, &p) && p.reconnects)
			t_relogin = now_ms();
		if (t_kill && !t_first && j.done > done_at_kill)
			t_first = now_ms();
	}
	isc_get_params(s, &p);
	if (t_kill)
		printf("# first completion %.1f s after the kill, re-login after %.1f s, all done after %.1f s; "
		       "%u reconnect(s)\n",
		       t_first ? (double)(t_first - t_kill) / 1000 : -1.0,
		       t_relogin ? (double)(t_relogin - t_kill) / 1000 : -1.0, (double)(now_ms() - t_kill) / 1000,
		       p.reconnects);
	if (kill_err[0])
		snprintf(why, sizeof(why), "%s", kill_err);
	else
		snprintf(why, sizeof(why), "%u of %u done when killed (need at least 1 in flight and more to issue)",
			 done_at_kill, n);
	check("reconnect: target killed with writes in flight", t_kill && flying_at_kill > 0 && done_at_kill < n, "%s", why);
	unsigned dup = 0, lost = 0;
	for (uint32_t i = 0; i < n; i++) {
		dup += j.ncb[i] > 1;
		lost += j.ncb[i] < 1;
	}
	snprintf(what, sizeof(what), "reconnect: all %u writes of %u KiB completed exactly once, without error", n,
		 len >> 10);
	snprintf(why, sizeof(why), "%u completed, %u twice, %u never, %u errors%s%s", j.done, dup, lost, j.errors,
		 j.why[0] ? ", first: " : "", j.why);
	check(what, j.done == n && !dup && !lost && !j.errors, "%s", why);
	snprintf(why, sizeof(why), "reconnects %u, logged in %s (%s)", p.reconnects, isc_logged_in(s) ? "yes" : "no",
		 isc_errmsg(s));
	check("reconnect: the session re-logged in (isc_get_params: reconnects >= 1)",
	      p.reconnects >= 1 && isc_logged_in(s), "%s", why);
	/* Read every region back through the reconnected session, 1 MiB at a time into a poisoned buffer. */
	int rc = tur(s);
	uint32_t per = len >= (1u << 20) ? 1 : (1u << 20) / len, bad = 0;
	uint8_t *rb = isc_buf_alloc(s, (size_t)per * len);
	why[0] = 0;
	for (uint32_t i = 0; rb && i < n && !rc && !bad; i += per) {
		uint32_t k = n - i < per ? n - i : per;
		memset(rb, 0xa5, (size_t)k * len);
		rc = isc_read16_sync(s, url.lun, lba0 + (uint64_t)i * bl, k * bl, cap.block_size, rb, NULL);
		for (uint32_t m = 0; m < k && !rc && !bad; m++)
			if (!same(rb + (size_t)m * len, len, 0xc0de0000u + i + m)) {
				bad = 1;
				snprintf(why, sizeof(why), "write %u (LBA %" PRIu64 ") reads back different", i + m,
					 lba0 + (uint64_t)(i + m) * bl);
			}
	}
	if (!rb)
		snprintf(why, sizeof(why), "isc_buf_alloc: %s", strerror(errno));
	else if (rc)
		snprintf(why, sizeof(why), "%s", isc_errmsg(s));
	snprintf(what, sizeof(what), "reconnect: all %u regions read back after the restart", n);
	check(what, rb && !rc && !bad, "%s", why);
	if (j.done == n) {
		free(j.heap);
		free(j.ncb);
	}
	return 0;
}

/* ---- ABORT TASK ---- */

struct tmf_seen { int runs, err, response; };

static void tmf_cb(struct isc_session *s, int err, int response, void *arg)
{
	struct tmf_seen *t = arg;
	(void)s;
	t->runs++;
	t->err = err;
	t->response = response;
}

struct task_seen { int runs; struct isc_result res; };

static void task_cb(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct task_seen *t = arg;
	(void)s;
	t->runs++;
	t->res = *r;
}

/* 256 KiB: tgtd takes at most 512 KiB in one command. */
#define USABLE_LEN (256u << 10)

/* The session still moves data: a fresh pattern written and read back, pool and malloc'd buffers. */
static void usable_check(struct isc_session *s, const char *after, uint64_t lba, uint32_t seed)
{
	char what[200], why[400] = "";
	uint32_t len = USABLE_LEN, bl = len / cap.block_size;
	snprintf(what, sizeof(what), "%s: the session still works (TEST UNIT READY, 256 KiB written and read back)",
		 after);
	uint8_t *a = isc_buf_alloc(s, len), *b = malloc(len);
	int rc = a && b ? tur(s) : -ENOMEM;
	if (!rc) {
		fill(a, len, seed);
		memset(b, 0xa5, len);
		rc = isc_write16_sync(s, url.lun, lba, bl, cap.block_size, a, false, NULL);
		rc = rc ? rc : isc_read16_sync(s, url.lun, lba, bl, cap.block_size, b, NULL);
		if (!rc && !same(b, len, seed))
			snprintf(why, sizeof(why), "the data read back differs");
	}
	if (rc)
		snprintf(why, sizeof(why), "%s (%s)", isc_strerror(rc), isc_errmsg(s));
	struct isc_params p;
	isc_get_params(s, &p);
	if (!why[0] && p.reconnects)
		snprintf(why, sizeof(why), "the connection was lost and re-established (%u reconnects)", p.reconnects);
	check(what, !why[0], "%s", why);
	if (a)
		isc_buf_free(s, a);
	free(b);
}

static int do_abort(struct isc_session *s, uint32_t len, uint64_t lba, unsigned rounds, bool pool)
{
	char what[200], why[400] = "";
	uint32_t bl = len / cap.block_size;
	if (!len || !rounds || len % cap.block_size || lba + bl + USABLE_LEN / cap.block_size > cap.blocks) {
		fprintf(stderr, "isc-recovery: abort: -s a multiple of the block size that fits the LUN, -r >= 1\n");
		return 2;
	}
	/* A known pattern: a READ that ends GOOD in spite of the abort must still bring the right data. */
	uint8_t *src = isc_buf_alloc(s, len);
	int rc = src ? 0 : -ENOMEM;
	if (src) {
		fill(src, len, 0xab0b0000u);
		rc = isc_write16_sync(s, url.lun, lba, bl, cap.block_size, src, false, NULL);
		isc_buf_free(s, src);
	}
	if (rc) {
		snprintf(why, sizeof(why), "%s (%s)", isc_strerror(rc), isc_errmsg(s));
		check("ABORT TASK: the region written beforehand", false, "%s", why);
		return 1;
	}
	static struct task_seen ts;
	static struct tmf_seen tm;
	unsigned complete = 0, no_task = 0, unsent = 0;
	for (unsigned r = 0; r < rounds && !why[0]; r++) {
		/*
		 * malloc'd like test_abort: its registration goes when the task
		 * ends, so RDMA after that breaks the connection and shows.
		 * --pool: a pool buffer, which stays registered.
		 */
		uint8_t *buf = pool ? isc_buf_alloc(s, len) : malloc(len);
		ts = (struct task_seen){ 0 };
		tm = (struct tmf_seen){ 0 };
		struct isc_cmd c;
		if (buf)
			memset(buf, 0xa5, len);
		isc_cmd_read16(&c, url.lun, lba, bl, cap.block_size, buf);
		struct isc_task *t = buf ? isc_submit(s, &c, task_cb, &ts) : NULL;
		rc = t ? isc_abort_task_async(s, t, tmf_cb, &tm) : -ENOMEM;
		uint64_t deadline = now_ms() + 20000;
		while ((ts.runs < 1 || (rc == 0 && tm.runs < 1)) && now_ms() < deadline && !pump(s, 50))
			;
		/* A NOP round trip lets anything still on its way for the task arrive before counting. */
		int nop = isc_nop_sync(s);
		char res[300] = "";
		if (ts.runs && ts.res.err)
			describe(s, &ts.res, res, sizeof(res));
		printf("# READ of %u KiB: abort rc %d (%s); task callbacks %d, err %d %s; TMF answers %d, err %d, "
		       "response %d; NOP after: %d\n",
		       len >> 10, rc, rc ? isc_strerror(rc) : "sent", ts.runs, ts.res.err, res, tm.runs, tm.err,
		       tm.response, nop);
		/*
		 * -EALREADY: the READ had not left the library.  Otherwise the
		 * target answers 0 "function complete" (the task ends
		 * -ECANCELED) or 1 "task does not exist" (it had answered
		 * already: the READ ends GOOD, or -ECANCELED if the library
		 * took the answer for the end of it first).
		 */
		bool ok = rc == -EALREADY ? tm.runs == 0 && ts.res.err == -ECANCELED
					  : rc == 0 && tm.runs == 1 && !tm.err && tm.response <= 1 &&
						    (ts.res.err == 0 || ts.res.err == -ECANCELED);
		if (ts.runs != 1 || !ok || nop)
			snprintf(why, sizeof(why),
				 "round %u: abort rc %d, task callbacks %d (err %d), TMF answers %d (err %d, response %d), "
				 "NOP %d",
				 r + 1, rc, ts.runs, ts.res.err, tm.runs, tm.err, tm.response, nop);
		else if (!ts.res.err && !same(buf, len, 0xab0b0000u))
			snprintf(why, sizeof(why), "round %u: the READ ended GOOD with wrong data", r + 1);
		unsent += rc == -EALREADY;
		complete += rc == 0 && tm.response == 0;
		no_task += rc == 0 && tm.response == 1;
		/*
		 * A task that never ended may still own the buffer: leak it
		 * rather than reuse it.  Pool buffers stay until the session
		 * ends: a late RDMA WRITE must not land in the next user's data.
		 */
		if (ts.runs && !pool)
			free(buf);
	}
	snprintf(what, sizeof(what),
		 "ABORT TASK of a READ in flight x%u: one callback each, TMF answered (%u function complete, %u no task, "
		 "%u not sent yet)",
		 rounds, complete, no_task, unsent);
	check(what, !why[0], "%s", why);
	usable_check(s, "after ABORT TASK", lba + bl, 0xab0b7000u);
	return 0;
}

/* ---- LOGICAL UNIT RESET ---- */

struct qjob { unsigned *ncb; struct isc_result *res; unsigned done; };
struct qarg { struct qjob *j; uint32_t i; };

static void q_cb(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct qarg *a = arg;
	(void)s;
	a->j->ncb[a->i]++;
	a->j->res[a->i] = *r;
	a->j->done++;
}

static int do_lu_reset(struct isc_session *s, uint32_t qd, uint32_t len, uint64_t lba0, bool pool)
{
	char what[200], why[500];
	uint32_t bl = len / cap.block_size;
	if (qd < 2 || len % cap.block_size || lba0 + (uint64_t)qd * bl + USABLE_LEN / cap.block_size > cap.blocks) {
		fprintf(stderr, "isc-recovery: lu-reset: -q >= 2, and -q x -b on the LUN\n");
		return 2;
	}
	/* Command i uses region i: even ones WRITE it, odd ones READ what was written before. */
	static struct qjob j;
	j = (struct qjob){ calloc(qd, sizeof(unsigned)), calloc(qd, sizeof(struct isc_result)), 0 };
	struct qarg *args = calloc(qd, sizeof(*args));
	uint8_t **buf = calloc(qd, sizeof(*buf));
	bool pooled[128] = { 0 };
	if (!j.ncb || !j.res || !args || !buf || qd > 128) {
		check("LU RESET: set-up", false, "out of memory or -q over 128");
		return 1;
	}
	int rc = 0;
	for (uint32_t i = 0; i < qd && !rc; i++) {
		/* Half from the pool, half malloc'd (registered per command); --pool: all from the pool. */
		pooled[i] = pool || i % 4 < 2;
		buf[i] = pooled[i] ? isc_buf_alloc(s, len) : malloc(len);
		if (!buf[i]) {
			rc = -ENOMEM;
			break;
		}
		fill(buf[i], len, 0x7e5e0000u + i);
		if (i % 2)
			rc = isc_write16_sync(s, url.lun, lba0 + (uint64_t)i * bl, bl, cap.block_size, buf[i], false, NULL);
	}
	if (rc) {
		snprintf(why, sizeof(why), "%s (%s)", isc_strerror(rc), isc_errmsg(s));
		check("LU RESET: regions for the READs written beforehand", false, "%s", why);
		return 1;
	}
	for (uint32_t i = 0; i < qd; i++) {
		struct isc_cmd c;
		if (i % 2) {
			memset(buf[i], 0xa5, len);
			isc_cmd_read16(&c, url.lun, lba0 + (uint64_t)i * bl, bl, cap.block_size, buf[i]);
		} else {
			fill(buf[i], len, 0x7e5f0000u + i);
			isc_cmd_write16(&c, url.lun, lba0 + (uint64_t)i * bl, bl, cap.block_size, buf[i], false);
		}
		args[i] = (struct qarg){ &j, i };
		if (!isc_submit(s, &c, q_cb, &args[i])) {
			snprintf(why, sizeof(why), "submit: %s", strerror(errno));
			check("LU RESET: commands submitted", false, "%s", why);
			return 1;
		}
	}
	static struct tmf_seen tm;
	unsigned pending = isc_tasks_pending(s);
	rc = isc_lu_reset_async(s, url.lun, tmf_cb, &tm);
	uint64_t t0 = now_ms(), deadline = t0 + 30000;
	while ((j.done < qd || (!rc && tm.runs < 1)) && now_ms() < deadline && !pump(s, 50))
		;
	uint64_t took = now_ms() - t0;
	int nop = isc_nop_sync(s);
	unsigned good = 0, canceled = 0, scsi_err = 0, other = 0, dup = 0, lost = 0, baddata = 0;
	char first_other[200] = "", first_scsi[200] = "";
	for (uint32_t i = 0; i < qd; i++) {
		dup += j.ncb[i] > 1;
		lost += j.ncb[i] < 1;
		if (j.ncb[i] < 1)
			continue;
		int e = j.res[i].err;
		if (!e) {
			good++;
			if (i % 2 && !same(buf[i], len, 0x7e5e0000u + i))
				baddata++;
		} else if (e == -ECANCELED) {
			canceled++;
		} else if (e == -EIO) {
			if (!scsi_err++)
				describe(s, &j.res[i], first_scsi, sizeof(first_scsi));
		} else if (!other++) {
			describe(s, &j.res[i], first_other, sizeof(first_other));
		}
	}
	printf("# LU RESET with %u commands pending: rc %d, TMF answers %d (err %d, response %d) after %" PRIu64
	       " ms; commands: %u GOOD, %u aborted, %u SCSI errors%s%s, %u other%s%s; NOP after: %d\n",
	       pending, rc, tm.runs, tm.err, tm.response, took, good, canceled, scsi_err, scsi_err ? ", first: " : "",
	       first_scsi, other, other ? ", first: " : "", first_other, nop);
	snprintf(why, sizeof(why), "rc %d, TMF answers %d, err %d, response %d", rc, tm.runs, tm.err, tm.response);
	check("LU RESET with commands in flight: function complete", !rc && tm.runs == 1 && !tm.err && tm.response == 0,
	      "%s", why);
	/*
	 * Aborted tasks end -ECANCELED; a target may also have finished some
	 * before the reset (GOOD) or fail later ones with a unit attention
	 * (-EIO).  A transport error means the connection broke: not allowed.
	 */
	snprintf(what, sizeof(what), "LU RESET: all %u commands completed exactly once, GOOD, aborted or a SCSI status",
		 qd);
	snprintf(why, sizeof(why), "%u completed, %u twice, %u never, %u transport errors%s%s", j.done, dup, lost,
		 other, other ? ", first: " : "", first_other);
	check(what, j.done == qd && !dup && !lost && !other, "%s", why);
	/* Data of the WRITEs that ended GOOD is on the LUN; READs that ended GOOD got the right data. */
	uint8_t *rb = malloc(len);
	unsigned wgood = 0;
	for (uint32_t i = 0; rb && i < qd; i += 2) {
		if (j.ncb[i] != 1 || j.res[i].err)
			continue;
		wgood++;
		memset(rb, 0xa5, len);
		if ((rc = isc_read16_sync(s, url.lun, lba0 + (uint64_t)i * bl, bl, cap.block_size, rb, NULL)) && rc != -EIO)
			break;
		/* A pending unit attention fails the first read: once more. */
		if (rc == -EIO)
			rc = isc_read16_sync(s, url.lun, lba0 + (uint64_t)i * bl, bl, cap.block_size, rb, NULL);
		if (rc)
			break;
		if (!same(rb, len, 0x7e5f0000u + i))
			baddata++;
	}
	snprintf(why, sizeof(why), "%u regions wrong, rc %d (%s)", baddata, rc, rc ? isc_errmsg(s) : "");
	snprintf(what, sizeof(what), "LU RESET: the %u WRITEs and %u READs that ended GOOD moved the right data",
		 wgood, good - wgood);
	check(what, rb && !baddata && !rc, "%s", why);
	free(rb);
	/*
	 * A command that never ended may still own its buffer and argument:
	 * leak those rather than reuse them.  Pool buffers stay until the
	 * session ends: a late RDMA transfer must not meet the next user's data.
	 */
	for (uint32_t i = 0; i < qd; i++)
		if (j.ncb[i] && !pooled[i])
			free(buf[i]);
	free(buf);
	if (!lost) {
		free(args);
		free(j.ncb);
		free(j.res);
	}
	usable_check(s, "after LU RESET", lba0 + (uint64_t)qd * bl, 0x7e5e7000u);
	return 0;
}

int main(int argc, char **argv)
{
	struct isc_options o;
	isc_options_default(&o);
	const char *mode = NULL, *u = NULL;
	uint32_t n = 1024, qd = 0, len = 0, size = 8u << 20, kill_after = 256, rounds = 4;
	uint64_t lba = 0;
	pid_t victim = 0;
	bool pool = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-i") && v)
			o.initiator_name = argv[++i];
		else if (!strcmp(a, "-n") && v)
			n = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(a, "-q") && v)
			qd = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(a, "-b") && v)
			len = parse_size(argv[++i]);
		else if (!strcmp(a, "-s") && v)
			size = parse_size(argv[++i]);
		else if (!strcmp(a, "-r") && v)
			rounds = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(a, "--pool"))
			pool = true;
		else if (!strcmp(a, "--lba") && v)
			lba = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(a, "--kill-pid") && v)
			victim = (pid_t)strtol(argv[++i], NULL, 10);
		else if (!strcmp(a, "--kill-after") && v)
			kill_after = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (a[0] != '-' && !mode)
			mode = a;
		else if (a[0] != '-' && !u)
			u = a;
		else
			u = NULL, i = argc;
	}
	if (!mode)
		mode = "";
	bool rec = !strcmp(mode, "reconnect"), ab = !strcmp(mode, "abort"), lr = !strcmp(mode, "lu-reset");
	char err[300];
	if (!(rec || ab || lr) || !u || (qd > 128)) {
		fprintf(stderr, "usage: isc-recovery [-i IQN] [-n N] [-q QD] [-b SIZE] [-s SIZE] [-r N] [--pool] [--lba N] "
				"[--kill-pid PID] [--kill-after N] reconnect|abort|lu-reset URL\n");
		return 2;
	}
	if (isc_url_parse(u, false, &url, err, sizeof(err))) {
		fprintf(stderr, "isc-recovery: %s\n", err);
		return 2;
	}
	if (rec) {
		/* As test_reconnect: a dead target is noticed within 3 s even without a disconnect event. */
		o.reconnect_timeout_s = 30;
		o.nop_interval_s = 1;
		o.nop_timeout_s = 2;
	} else {
		/* A connection that breaks under a TMF must show, not be mended silently. */
		o.reconnect_timeout_s = 0;
	}
	salt = (uint32_t)getpid() ^ (uint32_t)now_ms();
	struct isc_session *s = check_login(&o, &url);
	if (!s)
		return 1;
	tur(s);
	int rc = isc_readcap16_sync(s, url.lun, &cap, NULL);
	check("READ CAPACITY (16)", !rc, "%s", isc_errmsg(s));
	if (rc)
		return 1;
	if (rec)
		rc = do_reconnect(s, n, qd ? qd : 16, len ? len : 32768, lba, victim, kill_after);
	else if (ab)
		rc = do_abort(s, size, lba, rounds, pool);
	else
		rc = do_lu_reset(s, qd ? qd : 32, len ? len : 262144, lba, pool);
	if (rc == 2)
		return 2;
	rc = isc_logout_sync(s);
	check("logout", !rc, "%s", isc_errmsg(s));
	isc_session_free(s);
	printf("# %u failed\n", check_failed);
	return check_failed ? 1 : 0;
}
