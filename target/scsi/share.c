/*
 * Reservations shared by every target serving the same store (the design's
 * seam 8, "in the cluster"; docs/cluster.md): an RBD image behind several
 * gateways is one LU with one reservation state, whichever gateway a
 * command comes through.
 *
 * The state lives in the store's shared state (backstore.h: an object
 * changed by compare-and-set, watched by every sharer).  Each gateway keeps
 * a copy in its LU's struct scsi_pr, which PR IN, the conflict check of
 * every command and the I/O path read as for any LU: nothing per I/O goes
 * to the cluster.  A change (PERSISTENT RESERVE OUT, RESERVE, RELEASE, the
 * release a reset or a lost nexus makes) runs on this file's commit thread:
 *
 *   1. tried on a copy of the LU's state (pr.c, unchanged: the same rules
 *      as an LU of one process); no change, or a refusal: answered at once;
 *   2. the new state written if the stored one is still the version the
 *      copy came from; if another gateway wrote first, its state is read
 *      and the command tried again on it (every result is that of one
 *      serial order);
 *   3. every gateway notified, with the unit attentions and aborts the
 *      change raises; each reads the new state into its copy, delivers
 *      them to its own nexuses, then acknowledges;
 *   4. a gateway that did not acknowledge within SHARE_NOTIFY_MS (or whose
 *      watch is gone) is fenced: its access to the cluster is cut, so no
 *      write it still admits can land;
 *   5. only then is the command answered.
 *
 * The notify thread answers the other gateways' notifications; it never
 * waits for one, so two gateways changing the state at once never wait for
 * each other.  The commit thread also asks every gateway at least every
 * SHARE_HEARTBEAT_MS (a notification with nothing in it): a gateway that
 * died is fenced within SHARE_HEARTBEAT_MS + SHARE_NOTIFY_MS.
 *
 * Locks: g.mu (the queues, the list of shares) may be taken under an LU's
 * mutex, never the other way round.
 */
#include <errno.h>
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/log.h"
#include "common/reactor.h"
#include "target/scsi/pr_state.h"
#include "target/scsi/scsi_int.h"

#define SHARE_NOTIFY_MS    5000   /* a gateway acknowledges within this, or is fenced */
#define SHARE_HEARTBEAT_MS 5000   /* every gateway is asked at least this often */
#define SHARE_RETRIES      64     /* another gateway wrote first this often in a row: BUSY */
#define SHARE_PARAMS_MAX   4096   /* spc_prep_pr_out's bound on a parameter list */

struct lu_share {
	struct scsi_lu *lu;
	struct backstore *bs;
	char name[64];
	char naa[33];                /* the LU's, as its state records it */
	uint64_t self;               /* this gateway's id among the sharers */
	uint64_t version;            /* of the state lu->pr holds (lu->mu) */
	char *text;                  /* that state as stored (lu->mu) */
	bool fenced;                 /* the others cut this gateway off (lu->mu) */
	/* g.mu: */
	struct lu_share *next;       /* every share */
	unsigned jobs;               /* queued or running */
	bool detaching;
	uint64_t beat_ns;            /* last asked the others */
};

enum job_kind { JOB_PR_OUT, JOB_RESERVE, JOB_RELEASE, JOB_RESET, JOB_NOTIFY, JOB_REWATCH };

struct job {
	struct job *next;
	enum job_kind kind;
	struct lu_share *sh;
	/* A command's change (PR OUT, RESERVE, RELEASE), answered on its reactor; NULL for a reset. */
	struct scsi_cmd *cmd;
	int64_t resid;
	uint8_t cdb[16];
	struct scsi_nexus nexus;     /* a copy; has_nexus false: a reset of every nexus */
	bool has_nexus, loss_only;
	uint8_t *params;
	uint32_t plen;
	/* A notification to answer. */
	uint64_t notify_id, notifier;
	char *payload;
	size_t payload_len;
	/* The answer. */
	uint8_t status;
	uint8_t sense[SCSI_SENSE_LEN];
	uint32_t sense_len;
};

struct worker {
	pthread_t th;
	pthread_cond_t cv;
	struct job *head, *tail;
	bool running;
};

static struct {
	pthread_mutex_t mu;
	pthread_cond_t idle;         /* a share's jobs went to 0 */
	struct worker commit, notify;
	struct lu_share *shares;
	bool stop;
} g = { .mu = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER };

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void job_free(struct job *j)
{
	free(j->params);
	free(j->payload);
	free(j);
}

/* Under g.mu. */
static void push(struct worker *w, struct job *j)
{
	j->next = NULL;
	if (w->tail)
		w->tail->next = j;
	else
		w->head = j;
	w->tail = j;
	j->sh->jobs++;
	pthread_cond_signal(&w->cv);
}

static void job_done(struct lu_share *sh)
{
	pthread_mutex_lock(&g.mu);
	if (--sh->jobs == 0)
		pthread_cond_broadcast(&g.idle);
	pthread_mutex_unlock(&g.mu);
}

/* ------------------------------------------------------------------------ */
/* The state: read into the LU's copy, written by compare-and-set. */

/*
 * The cluster says this gateway is blocklisted (-ESHUTDOWN: librados'
 * EBLOCKLISTED): the others fenced it.  Said once; it changes nothing more.
 */
static void fenced(struct lu_share *sh)
{
	pthread_mutex_lock(&sh->lu->mu);
	bool first = !sh->fenced;
	sh->fenced = true;
	pthread_mutex_unlock(&sh->lu->mu);
	if (first)
		log_err("reservations of %s: this gateway was fenced (blocklisted) by the others; its I/O to the image "
			"fails from now on: restart isertd once the cause is found", sh->name);
}

/* Take text (version v) as the LU's state; false: damaged (logged). Under lu->mu. */
static bool install(struct lu_share *sh, char *text, size_t len, uint64_t v)
{
	char err[256];
	if (pr_load(sh->lu->pr, text, len, err, sizeof(err))) {
		log_err("reservations of %s: the shared state (version %llu) is not usable: %s", sh->name,
			(unsigned long long)v, err);
		free(text);
		return false;
	}
	free(sh->text);
	sh->text = text;
	sh->version = v;
	return true;
}

/* Read the stored state into the LU's copy when it moved; 0 or -errno. */
static int refresh(struct lu_share *sh)
{
	char *text = NULL;
	size_t len = 0;
	uint64_t v = 0;
	int rc = backstore_state_read(sh->bs, &text, &len, &v);
	if (rc == -ENOENT) {
		/* Removed underneath: an empty state, written afresh by the next change. */
		struct scsi_pr *empty = pr_create(NULL, NULL);
		if (empty)
			pr_set_shared(empty, sh->lu->serial, sh->naa, sh->name);
		text = empty ? pr_text(empty) : NULL;
		pr_destroy(empty);
		if (!text)
			return -ENOMEM;
		len = strlen(text);
		rc = 0;
	}
	if (rc == -ESHUTDOWN)
		fenced(sh);
	else if (rc)
		log_err("reservations of %s: reading the shared state: %s", sh->name, strerror(-rc));
	if (rc)
		return rc;
	bool ok = true;
	pthread_mutex_lock(&sh->lu->mu);
	if (v == sh->version && sh->text)
		free(text); /* what the LU holds already */
	else
		ok = install(sh, text, len, v);
	pthread_mutex_unlock(&sh->lu->mu);
	return ok ? 0 : -EINVAL;
}

/* ------------------------------------------------------------------------ */
/* Telling the others, and fencing those that do not answer. */

/* The notification of a change: its version and the unit attentions and aborts it raised. */
static char *payload_of(uint64_t version, const struct pr_note *notes, unsigned n)
{
	json_object *o = json_object_new_object(), *a = json_object_new_array();
	char *out = NULL;
	if (o && a) {
		json_object_object_add(o, "version", json_object_new_uint64(version));
		for (unsigned i = 0; i < n; i++) {
			json_object *e = json_object_new_object();
			json_object_object_add(e, "port", json_object_new_string(notes[i].port));
			json_object_object_add(e, "asc", json_object_new_int(notes[i].asc));
			json_object_object_add(e, "abort", json_object_new_boolean(notes[i].abort));
			json_object_array_add(a, e);
		}
		json_object_object_add(o, "notes", a);
		a = NULL;
		const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
		out = s ? strdup(s) : NULL;
	}
	json_object_put(a);
	json_object_put(o);
	return out;
}

/* A notification's version and notes (*notes malloc'd); false: not one of ours (a heartbeat, or bad). */
static bool payload_parse(const char *p, size_t len, uint64_t *version, struct pr_note **notes, unsigned *n)
{
	json_tokener *tok = json_tokener_new_ex(4);
	json_object *o = tok && len ? json_tokener_parse_ex(tok, p, (int)len) : NULL, *v, *a;
	bool ok = o && json_object_object_get_ex(o, "version", &v) && json_object_object_get_ex(o, "notes", &a) &&
		  json_object_is_type(a, json_type_array) && json_object_array_length(a) <= 4 * PR_STATE_MAX_REGS;
	*notes = NULL;
	*n = 0;
	if (ok) {
		size_t k = json_object_array_length(a);
		*version = json_object_get_uint64(v);
		*notes = calloc(k ? k : 1, sizeof(**notes));
		ok = *notes != NULL;
		for (size_t i = 0; ok && i < k; i++) {
			json_object *e = json_object_array_get_idx(a, i), *port, *asc, *ab;
			if (!json_object_object_get_ex(e, "port", &port) || !json_object_object_get_ex(e, "asc", &asc))
				continue;
			struct pr_note *nt = &(*notes)[(*n)++];
			snprintf(nt->port, sizeof(nt->port), "%s", json_object_get_string(port));
			nt->asc = (uint16_t)json_object_get_int(asc);
			nt->abort = json_object_object_get_ex(e, "abort", &ab) && json_object_get_boolean(ab);
		}
	}
	json_object_put(o);
	if (tok)
		json_tokener_free(tok);
	return ok;
}

static bool in(const uint64_t *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == id)
			return true;
	return false;
}

/*
 * Notify every gateway and wait for them; fence each one that joined and
 * did not acknowledge (it timed out, or its watch is gone).  The list is
 * read first: a gateway watches before it joins, so each one on it was
 * watching when the notification went out.  0: every gateway left has the
 * change; -EIO: one could not be fenced.
 */
static int tell_sharers(struct lu_share *sh, const char *payload)
{
	struct bs_notify_result res;
	struct bs_sharer *list = NULL;
	size_t n = 0;
	int rc = backstore_state_sharers(sh->bs, &list, &n);
	if (rc) {
		log_err("reservations of %s: reading the list of gateways: %s", sh->name, strerror(-rc));
		return -EIO;
	}
	if ((rc = backstore_state_notify(sh->bs, payload, strlen(payload), SHARE_NOTIFY_MS, &res))) {
		log_err("reservations of %s: notifying the other gateways: %s", sh->name, strerror(-rc));
		free(list);
		return -EIO;
	}
	for (size_t i = 0; i < n; i++) {
		const struct bs_sharer *s = &list[i];
		if (s->id == sh->self || in(res.acked, res.nacked, s->id))
			continue;
		char err[256];
		bool timed_out = in(res.missed, res.nmissed, s->id);
		if (backstore_state_fence(sh->bs, s, err, sizeof(err))) {
			log_err("reservations of %s: gateway %016llx (%s, %s) %s, and cannot be fenced: %s", sh->name,
				(unsigned long long)s->id, s->desc, s->addr,
				timed_out ? "did not acknowledge a change" : "no longer watches the state", err);
			rc = -EIO;
		} else {
			log_warn("reservations of %s: gateway %016llx (%s, %s) %s within %u ms: fenced (blocklisted)",
				 sh->name, (unsigned long long)s->id, s->desc, s->addr,
				 timed_out ? "did not acknowledge a change" : "no longer watched the state",
				 SHARE_NOTIFY_MS);
		}
	}
	free(list);
	backstore_notify_result_free(&res);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* The commit thread. */

static void answer_on_reactor(void *arg)
{
	struct job *j = arg;
	struct scsi_cmd *cmd = j->cmd;
	cmd->status = j->status;
	memcpy(cmd->sense, j->sense, sizeof(cmd->sense));
	cmd->sense_len = j->sense_len;
	cmd->din_len = 0;
	if (cmd->status == SCSI_GOOD)
		cmd->resid = j->resid;
	job_free(j);
	scsi_cmd_complete(cmd);
}

/* The command's answer goes back to the reactor that runs it (the job with it). */
static void answer(struct job *j)
{
	job_done(j->sh);
	if (!j->cmd) {
		job_free(j);
		return;
	}
	if (!j->cmd->reactor) {
		answer_on_reactor(j); /* no reactor (tests) */
		return;
	}
	/* Only an allocation failure stops the hand-off; the answer must not be lost, so wait for memory. */
	while (reactor_send(j->cmd->reactor, answer_on_reactor, j) != 0)
		usleep(1000);
}

static void answer_sense(struct job *j, uint8_t key, uint16_t asc)
{
	struct scsi_cmd fake = { .lu = j->sh->lu };
	sense_set(&fake, key, asc);
	j->status = fake.status;
	memcpy(j->sense, fake.sense, sizeof(j->sense));
	j->sense_len = fake.sense_len;
}

/* Run the job's change on pr, its answer in the job. */
static void run_change(struct job *j, struct scsi_pr *pr)
{
	struct buf params = { .data = j->params, .len = j->plen, .cap = j->plen };
	struct scsi_cmd fake = { .lu = j->sh->lu, .nexus = j->has_nexus ? &j->nexus : NULL,
				 .buf = j->plen ? &params : NULL, .dout_len = j->plen, .status = SCSI_GOOD };
	memcpy(fake.cdb, j->cdb, sizeof(j->cdb));
	switch (j->kind) {
	case JOB_PR_OUT: pr_out(pr, &fake); break;
	case JOB_RESERVE: pr_reserve(pr, &fake); break;
	case JOB_RELEASE: pr_release(pr, &fake); break;
	case JOB_RESET: pr_reset(pr, fake.nexus, j->loss_only); break;
	default: break;
	}
	j->status = fake.status;
	memcpy(j->sense, fake.sense, sizeof(j->sense));
	j->sense_len = fake.sense_len;
}

static void commit(struct job *j)
{
	struct lu_share *sh = j->sh;
	struct scsi_lu *lu = sh->lu;
	for (unsigned attempt = 0;; attempt++) {
		pthread_mutex_lock(&lu->mu);
		bool cut = sh->fenced;
		struct scsi_pr *copy = cut ? NULL : pr_copy(lu->pr);
		uint64_t version = sh->version;
		char *before = sh->text ? strdup(sh->text) : NULL;
		pthread_mutex_unlock(&lu->mu);
		if (cut || !copy || !before) {
			pr_destroy(copy);
			free(before);
			if (cut)
				log_err("reservations of %s: refused: the other gateways fenced this one", sh->name);
			answer_sense(j, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			break;
		}
		run_change(j, copy);
		char *after = j->status == SCSI_GOOD ? pr_text(copy) : NULL;
		bool same = !after || !strcmp(after, before);
		free(before);
		if (j->status != SCSI_GOOD || same) {
			if (j->status == SCSI_GOOD && !after)
				answer_sense(j, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			pr_destroy(copy);
			free(after);
			break;
		}
		uint64_t now;
		int rc = backstore_state_write(sh->bs, after, strlen(after), version, &now);
		if (rc == -ERANGE && attempt < SHARE_RETRIES) {
			/* Another gateway changed it first: the command again, on its state. */
			pr_destroy(copy);
			free(after);
			if (refresh(sh)) {
				answer_sense(j, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
				break;
			}
			continue;
		}
		if (rc == -ESHUTDOWN)
			fenced(sh);
		if (rc) {
			log_err("reservations of %s: storing a change: %s", sh->name,
				rc == -ERANGE ? "other gateways kept changing it first" : strerror(-rc));
			pr_destroy(copy);
			free(after);
			if (rc == -ERANGE) {
				j->status = SCSI_BUSY;
				j->sense_len = 0;
			} else {
				answer_sense(j, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			}
			break;
		}
		pthread_mutex_lock(&lu->mu);
		install(sh, after, strlen(after), now);
		pthread_mutex_unlock(&lu->mu);
		struct pr_note *notes;
		unsigned nn = pr_take_notes(copy, &notes);
		pr_destroy(copy);
		char *payload = payload_of(now, notes, nn);
		/* Stored: the others are told, and whoever cannot be is fenced, before the answer. */
		if (!payload || tell_sharers(sh, payload))
			answer_sense(j, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		free(payload);
		pthread_mutex_lock(&lu->mu);
		pr_deliver(lu->pr, notes, nn);
		pthread_mutex_unlock(&lu->mu);
		free(notes);
		pthread_mutex_lock(&g.mu);
		sh->beat_ns = now_ns();
		pthread_mutex_unlock(&g.mu);
		break;
	}
	answer(j);
}

/* Ask every gateway of each share whose last question is older than the heartbeat (under g.mu). */
static void heartbeats(void)
{
	uint64_t t = now_ns();
	for (struct lu_share *sh = g.shares; sh; sh = sh->next) {
		if (sh->detaching || t - sh->beat_ns < SHARE_HEARTBEAT_MS * 1000000ull)
			continue;
		sh->beat_ns = t;
		sh->jobs++;
		pthread_mutex_unlock(&g.mu);
		tell_sharers(sh, "{}");
		pthread_mutex_lock(&g.mu);
		if (--sh->jobs == 0)
			pthread_cond_broadcast(&g.idle);
		return; /* the list may have changed: one at a time, the next on the next turn */
	}
}

static void *commit_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.mu);
	while (!g.stop) {
		struct job *j = g.commit.head;
		if (!j) {
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_nsec += 200 * 1000000;
			if (dl.tv_nsec >= 1000000000) {
				dl.tv_sec++;
				dl.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&g.commit.cv, &g.mu, &dl);
			heartbeats();
			continue;
		}
		if (!(g.commit.head = j->next))
			g.commit.tail = NULL;
		pthread_mutex_unlock(&g.mu);
		commit(j);
		pthread_mutex_lock(&g.mu);
	}
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The notify thread: the other gateways' changes, taken and acknowledged. */

static void on_notify(void *arg, uint64_t notify_id, uint64_t notifier, const void *data, size_t len);
static void on_watch_error(void *arg, int err);

static void take_notification(struct job *j)
{
	struct lu_share *sh = j->sh;
	struct pr_note *notes = NULL;
	unsigned nn = 0;
	uint64_t version;
	if (j->kind == JOB_REWATCH) {
		/* Changes may have been missed while it was broken: watch, then read. */
		int rc = backstore_state_watch(sh->bs, on_notify, on_watch_error, sh);
		if (rc == -ESHUTDOWN)
			fenced(sh);
		else if (rc || refresh(sh))
			log_err("reservations of %s: watching the shared state again: %s", sh->name,
				rc ? strerror(-rc) : "the state could not be read");
		job_done(sh);
		job_free(j);
		return;
	}
	if (j->notifier != sh->self && payload_parse(j->payload, j->payload_len, &version, &notes, &nn)) {
		pthread_mutex_lock(&sh->lu->mu);
		bool moved = version != sh->version;
		pthread_mutex_unlock(&sh->lu->mu);
		/* Acknowledged even when the read fails: not acknowledging would only get this gateway fenced. */
		if (moved)
			refresh(sh);
		pthread_mutex_lock(&sh->lu->mu);
		pr_deliver(sh->lu->pr, notes, nn);
		pthread_mutex_unlock(&sh->lu->mu);
		free(notes);
	}
	backstore_state_ack(sh->bs, j->notify_id, NULL, 0);
	job_done(sh);
	job_free(j);
}

static void *notify_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.mu);
	while (!g.stop) {
		struct job *j = g.notify.head;
		if (!j) {
			pthread_cond_wait(&g.notify.cv, &g.mu);
			continue;
		}
		if (!(g.notify.head = j->next))
			g.notify.tail = NULL;
		pthread_mutex_unlock(&g.mu);
		take_notification(j);
		pthread_mutex_lock(&g.mu);
	}
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

/* On the store's thread: queue it, never wait here. */
static void on_notify(void *arg, uint64_t notify_id, uint64_t notifier, const void *data, size_t len)
{
	struct lu_share *sh = arg;
	struct job *j = calloc(1, sizeof(*j));
	if (j && len && !(j->payload = malloc(len))) {
		free(j);
		j = NULL;
	}
	if (!j) {
		/* No memory to queue it: acknowledge now, without the change, rather than be fenced for silence. */
		backstore_state_ack(sh->bs, notify_id, NULL, 0);
		return;
	}
	j->kind = JOB_NOTIFY;
	j->sh = sh;
	j->notify_id = notify_id;
	j->notifier = notifier;
	memcpy(j->payload, data, len);
	j->payload_len = len;
	pthread_mutex_lock(&g.mu);
	push(&g.notify, j);
	pthread_mutex_unlock(&g.mu);
}

static void on_watch_error(void *arg, int err)
{
	struct lu_share *sh = arg;
	if (err == -ESHUTDOWN) {
		fenced(sh);
		return;
	}
	log_warn("reservations of %s: the watch on the shared state broke (%s); watching it again", sh->name,
		 strerror(-err));
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->kind = JOB_REWATCH;
	j->sh = sh;
	j->notifier = sh->self;
	pthread_mutex_lock(&g.mu);
	push(&g.notify, j);
	pthread_mutex_unlock(&g.mu);
}

/* ------------------------------------------------------------------------ */
/* The LU's state operations, shared (lu.c has the local ones). */

static void submit(struct scsi_cmd *cmd, enum job_kind kind)
{
	struct job *j = calloc(1, sizeof(*j));
	uint32_t plen = cmd->buf && cmd->buf->data ? (uint32_t)MIN((size_t)cmd->dout_len, cmd->buf->len) : 0;
	if (j && plen && plen <= SHARE_PARAMS_MAX && (j->params = malloc(plen)))
		memcpy(j->params, cmd->buf->data, plen);
	if (!j || (plen && !j->params)) {
		free(j);
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		scsi_cmd_complete(cmd);
		return;
	}
	j->kind = kind;
	j->sh = cmd->lu->share;
	j->cmd = cmd;
	j->resid = cmd->resid;
	j->plen = plen;
	memcpy(j->cdb, cmd->cdb, MIN(sizeof(j->cdb), (size_t)SCSI_MAX_CDB));
	j->nexus = *cmd->nexus;
	j->has_nexus = true;
	pthread_mutex_lock(&g.mu);
	push(&g.commit, j);
	pthread_mutex_unlock(&g.mu);
}

static void shared_pr_out(struct scsi_cmd *cmd)
{
	submit(cmd, JOB_PR_OUT);
}

static void shared_reserve(struct scsi_cmd *cmd)
{
	submit(cmd, JOB_RESERVE);
}

static void shared_release(struct scsi_cmd *cmd)
{
	submit(cmd, JOB_RELEASE);
}

/*
 * Under lu->mu: an SPC-2 reservation a reset or a lost nexus releases.
 * Released here at once (the next command through this gateway must not
 * meet it), then everywhere: the commit compares the LU's copy with the
 * stored state, which still holds it.
 */
static void shared_reset(struct scsi_lu *lu, const struct scsi_nexus *nexus, bool nexus_loss_only)
{
	if (!pr_active(lu->pr))
		return; /* nothing a reset releases */
	pr_reset(lu->pr, nexus, nexus_loss_only);
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		log_err("reservations of %s: out of memory releasing an SPC-2 reservation after a reset",
			lu->share->name);
		return;
	}
	j->kind = JOB_RESET;
	j->sh = lu->share;
	j->loss_only = nexus_loss_only;
	if (nexus) {
		j->nexus = *nexus;
		j->has_nexus = true;
	}
	pthread_mutex_lock(&g.mu);
	push(&g.commit, j);
	pthread_mutex_unlock(&g.mu);
}

const struct lu_state_ops lu_state_shared = {
	.pr_out = shared_pr_out,
	.reserve = shared_reserve,
	.release = shared_release,
	.reset = shared_reset,
};

/* ------------------------------------------------------------------------ */
/* Attaching an LU to its store's shared state, and detaching it. */

static pthread_once_t cv_once = PTHREAD_ONCE_INIT;

static void cv_init(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g.commit.cv, &ca);
	pthread_cond_init(&g.notify.cv, &ca);
	pthread_condattr_destroy(&ca);
}

/* Under g.mu: the threads run while a share is attached. */
static int workers_start(void)
{
	pthread_once(&cv_once, cv_init);
	if (g.commit.running)
		return 0;
	g.stop = false;
	if (pthread_create(&g.commit.th, NULL, commit_thread, NULL))
		return -EAGAIN;
	g.commit.running = true;
	if (pthread_create(&g.notify.th, NULL, notify_thread, NULL))
		return -EAGAIN;
	g.notify.running = true;
	return 0;
}

/* Called with g.mu held and no share left; returns with it held. */
static void workers_stop(void)
{
	g.stop = true;
	pthread_cond_signal(&g.commit.cv);
	pthread_cond_signal(&g.notify.cv);
	pthread_mutex_unlock(&g.mu);
	if (g.commit.running)
		pthread_join(g.commit.th, NULL);
	if (g.notify.running)
		pthread_join(g.notify.th, NULL);
	pthread_mutex_lock(&g.mu);
	g.commit.running = g.notify.running = false;
}

int share_attach(struct scsi_lu *lu, const char *name, const char *naa)
{
	struct lu_share *sh = calloc(1, sizeof(*sh));
	char desc[160], host[64] = "";
	int rc;
	if (!sh)
		return -ENOMEM;
	sh->lu = lu;
	sh->bs = lu->bs;
	snprintf(sh->name, sizeof(sh->name), "%s", name);
	snprintf(sh->naa, sizeof(sh->naa), "%s", naa);
	sh->self = backstore_state_self(lu->bs);
	/* The threads first: a notification may come as soon as the watch is set. */
	pthread_mutex_lock(&g.mu);
	rc = workers_start();
	if (rc && !g.shares)
		workers_stop();
	pthread_mutex_unlock(&g.mu);
	if (rc) {
		log_warn("reservations of %s: cannot start the threads that share them; PERSISTENT RESERVE, RESERVE "
			 "and RELEASE are refused on it", name);
		free(sh);
		return rc;
	}
	pr_set_shared(lu->pr, lu->serial, naa, name);
	gethostname(host, sizeof(host) - 1);
	snprintf(desc, sizeof(desc), "isertd %d on %s", (int)getpid(), host);
	/* The object must exist to be watched: the first gateway writes the empty state. */
	char *text = NULL;
	size_t len;
	uint64_t v, now;
	rc = backstore_state_read(lu->bs, &text, &len, &v);
	free(text);
	if (rc == -ENOENT && (text = pr_text(lu->pr))) {
		rc = backstore_state_write(lu->bs, text, strlen(text), 0, &now);
		free(text);
		if (rc == -ERANGE)
			rc = 0; /* another gateway wrote it first */
	}
	/*
	 * Watch, then join (from then on a gateway that stops answering is
	 * fenced: one on the list was watching when a notification went out),
	 * then read: no change can fall between the watch and the read.
	 */
	if (!rc)
		rc = backstore_state_watch(lu->bs, on_notify, on_watch_error, sh);
	if (!rc)
		rc = backstore_state_join(lu->bs, desc);
	if (!rc)
		rc = refresh(sh);
	if (rc) {
		log_warn("reservations of %s: its shared state cannot be kept (%s); PERSISTENT RESERVE, RESERVE and "
			 "RELEASE are refused on it", name, strerror(-rc));
		backstore_state_unwatch(lu->bs);
		backstore_state_leave(lu->bs);
		pthread_mutex_lock(&g.mu);
		while (sh->jobs) /* notifications that came meanwhile */
			pthread_cond_wait(&g.idle, &g.mu);
		if (!g.shares)
			workers_stop();
		pthread_mutex_unlock(&g.mu);
		free(sh->text);
		free(sh);
		return rc;
	}
	pthread_mutex_lock(&g.mu);
	sh->beat_ns = now_ns();
	sh->next = g.shares;
	g.shares = sh;
	pthread_mutex_unlock(&g.mu);
	lu->share = sh;
	lu->state = &lu_state_shared;
	log_info("reservations of %s: shared with every gateway serving its image (state version %llu)", name,
		 (unsigned long long)sh->version);
	return 0;
}

void share_detach(struct scsi_lu *lu)
{
	struct lu_share *sh = lu->share;
	if (!sh)
		return;
	/* Out of the list first: a gateway gone from it is not fenced for ignoring what follows. */
	backstore_state_leave(sh->bs);
	backstore_state_unwatch(sh->bs);
	pthread_mutex_lock(&g.mu);
	sh->detaching = true;
	for (struct lu_share **pp = &g.shares; *pp; pp = &(*pp)->next)
		if (*pp == sh) {
			*pp = sh->next;
			break;
		}
	/* Resets not yet stored are dropped (the LU goes); notifications are still answered, then its jobs end. */
	struct job **pp = &g.commit.head, *last = NULL;
	while (*pp) {
		struct job *j = *pp;
		if (j->sh == sh && !j->cmd) {
			*pp = j->next;
			sh->jobs--;
			job_free(j);
		} else {
			last = j;
			pp = &j->next;
		}
	}
	g.commit.tail = last;
	while (sh->jobs)
		pthread_cond_wait(&g.idle, &g.mu);
	if (!g.shares)
		workers_stop();
	pthread_mutex_unlock(&g.mu);
	lu->share = NULL;
	lu->state = &lu_state_local;
	free(sh->text);
	free(sh);
}
