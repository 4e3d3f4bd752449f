/*
 * The engine of state kept together by several targets (shared.h says
 * what it does; docs/cluster.md why): the commit, notify and heartbeat
 * threads, the compare-and-set loop, notifications and fencing.
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
#include "common/util.h"
#include "target/scsi/scsi_int.h"
#include "target/scsi/shared/shared.h"

#define SHARED_RETRIES    64      /* another target wrote first this often in a row: BUSY */
#define SHARED_BEAT_TICK_MS 200   /* how often the heartbeat thread looks for an object due */

struct queue {
	struct job *head, *tail;
};

struct shared {
	struct bs_shared *obj;
	const struct shared_kind *kind;
	void *owner;
	pthread_mutex_t *mu;         /* the owner's: guards version, text, fenced */
	char name[96];
	uint64_t self;               /* this target's id among the sharers */
	uint64_t version;            /* of the state the owner holds (mu) */
	char *text;                  /* that state as stored (mu) */
	bool fenced;                 /* the others cut this target off (mu) */
	/* g.mu: */
	struct shared *next;         /* every open object */
	unsigned jobs;               /* queued or running, changes and notifications */
	struct queue changes;        /* waiting for the commit thread */
	struct job *running;         /* the change the commit thread is making, or NULL */
	unsigned cmds;               /* commands among changes and running: at most SHARED_QUEUE_MAX */
	struct shared *next_ready;   /* on g.ready: changes waiting, none running */
	bool ready;
	bool closing;
	uint64_t beat_ns;            /* last asked the others */
	json_object *last_sharers;   /* as the last notification found them: for the operator */
};

enum { JOB_CHANGE, JOB_NOTIFY, JOB_REWATCH };

struct job {
	struct shared_job j;         /* first: the kinds see this part */
	struct job *next;
	int type;
	struct shared *s;
	int64_t resid;               /* a command's, restored when it succeeds */
	struct scsi_wait *wait;      /* a change without a command: who answers once it is made */
	/* A notification to answer. */
	uint64_t notify_id, notifier;
	char *payload;
	size_t payload_len;
	/* shared_run's: the waiter. */
	pthread_cond_t *done_cv;
	bool *done;
	int *rc;
	char *err;
	size_t errlen;
};

struct worker {
	pthread_t th;
	pthread_cond_t cv;
	bool running;
};

/*
 * Three threads serve every object: the commit thread makes changes, one
 * at a time, taking the objects with changes waiting in turn (g.ready), so
 * an object flooded with changes delays another's by at most the one
 * change it has in progress; the notify thread answers the others; the
 * heartbeat thread asks the others on its own clock, so no change ever
 * delays it.
 */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t idle;         /* an object's jobs went to 0, or a shared_run job ended */
	struct worker commit, notify, beat;
	struct shared *ready, *ready_tail; /* objects with changes waiting and none running, in turn */
	struct queue notifications;
	struct shared *all;
	bool stop;
	bool cut;                    /* this gateway was fenced for some object (atomic) */
} g = { .mu = PTHREAD_MUTEX_INITIALIZER, .idle = PTHREAD_COND_INITIALIZER };

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void job_free(struct job *j)
{
	scsi_wait_end(j->wait);
	free(j->j.params);
	free(j->j.arg);
	free(j->payload);
	free(j);
}

static void enqueue(struct queue *q, struct job *j)
{
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
}

static struct job *dequeue(struct queue *q)
{
	struct job *j = q->head;
	if (j && !(q->head = j->next))
		q->tail = NULL;
	return j;
}

/* Under g.mu: s's turn comes after every object waiting already. */
static void make_ready(struct shared *s)
{
	s->ready = true;
	s->next_ready = NULL;
	if (g.ready_tail)
		g.ready_tail->next_ready = s;
	else
		g.ready = s;
	g.ready_tail = s;
	pthread_cond_signal(&g.commit.cv);
}

/* Under g.mu: a notification to answer. */
static void push_notification(struct job *j)
{
	enqueue(&g.notifications, j);
	j->s->jobs++;
	pthread_cond_signal(&g.notify.cv);
}

/* Under g.mu: a change for the commit thread. */
static void push_change(struct job *j)
{
	struct shared *s = j->s;
	enqueue(&s->changes, j);
	s->jobs++;
	if (j->j.cmd)
		s->cmds++;
	if (!s->ready && !s->running)
		make_ready(s);
}

static void job_done(struct shared *s)
{
	pthread_mutex_lock(&g.mu);
	if (--s->jobs == 0)
		pthread_cond_broadcast(&g.idle);
	pthread_mutex_unlock(&g.mu);
}

/* ------------------------------------------------------------------------ */
/* The state: installed into the owner's copy, written by compare-and-set. */

/* The cluster says this target is blocklisted (-ESHUTDOWN: librados' EBLOCKLISTED): the others fenced it. */
static void cut_off(struct shared *s)
{
	pthread_mutex_lock(s->mu);
	bool first = !s->fenced;
	s->fenced = true;
	pthread_mutex_unlock(s->mu);
	__atomic_store_n(&g.cut, true, __ATOMIC_RELAXED);
	if (first)
		log_err("%s of %s: this gateway was fenced (blocklisted) by the others; its I/O to the store fails "
			"from now on: restart isertd once the cause is found", s->kind->what, s->name);
}

/* Under s->mu: take text (version v, taken) as the owner's state; false: damaged (logged). */
static bool install(struct shared *s, char *text, size_t len, uint64_t v)
{
	char err[256];
	if (s->kind->install(s->owner, text, len, err, sizeof(err))) {
		log_err("%s of %s: the shared state (version %llu, %s) is not usable: %s", s->kind->what, s->name,
			(unsigned long long)v, backstore_shared_where(s->obj), err);
		free(text);
		return false;
	}
	free(s->text);
	s->text = text;
	s->version = v;
	return true;
}

/* Read the stored state into the owner's copy when it moved; 0 or -errno. */
static int refresh(struct shared *s)
{
	char *text = NULL;
	size_t len = 0;
	uint64_t v = 0;
	int rc = backstore_shared_read(s->obj, &text, &len, &v);
	if (rc == -ESHUTDOWN)
		cut_off(s);
	else if (rc)
		log_err("%s of %s: reading the shared state %s: %s", s->kind->what, s->name,
			backstore_shared_where(s->obj), strerror(-rc));
	if (rc)
		return rc;
	bool ok = true;
	pthread_mutex_lock(s->mu);
	if (v == s->version && s->text)
		free(text); /* what the owner holds already */
	else
		ok = install(s, text, len, v);
	pthread_mutex_unlock(s->mu);
	return ok ? 0 : -EINVAL;
}

/* ------------------------------------------------------------------------ */
/* Telling the others, and fencing those that do not answer. */

static bool in(const uint64_t *v, size_t n, uint64_t id)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == id)
			return true;
	return false;
}

/* The sharers for the operator: each with whether it answered the last notification. */
static json_object *sharers_json(const struct bs_sharer *list, size_t n, const struct bs_notify_result *res,
				 uint64_t self)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; a && i < n; i++) {
		json_object *o = json_object_new_object(), *d = json_tokener_parse(list[i].desc);
		char id[17];
		snprintf(id, sizeof(id), "%016llx", (unsigned long long)list[i].id);
		json_object_object_add(o, "id", json_object_new_string(id));
		json_object_object_add(o, "addr", json_object_new_string(list[i].addr));
		json_object_object_add(o, "self", json_object_new_boolean(list[i].id == self));
		json_object_object_add(o, "answered", json_object_new_boolean(in(res->acked, res->nacked, list[i].id)));
		json_object_object_add(o, "desc", d);
		json_object_array_add(a, o);
	}
	return a;
}

/*
 * Notify every target and wait for them; fence each one that joined and
 * did not acknowledge (it timed out, or its watch is gone).  The list is
 * read first: a target watches before it joins, so each one on it was
 * watching when the notification went out.  0: every target left has the
 * change; -EIO: one could not be fenced, or the notification failed.
 */
static int tell_sharers(struct shared *s, const char *payload)
{
	struct bs_notify_result res;
	struct bs_sharer *list = NULL;
	size_t n = 0;
	/* Every question asks what the heartbeat would: the heartbeat's next one is due a period from now. */
	pthread_mutex_lock(&g.mu);
	s->beat_ns = now_ns();
	pthread_mutex_unlock(&g.mu);
	int rc = backstore_shared_sharers(s->obj, &list, &n);
	if (rc == -ESHUTDOWN)
		cut_off(s);
	if (rc) {
		log_err("%s of %s: reading the list of gateways: %s", s->kind->what, s->name, strerror(-rc));
		return -EIO;
	}
	if ((rc = backstore_shared_notify(s->obj, payload, strlen(payload), SHARED_NOTIFY_MS, &res))) {
		if (rc == -ESHUTDOWN)
			cut_off(s);
		log_err("%s of %s: notifying the other gateways: %s", s->kind->what, s->name, strerror(-rc));
		free(list);
		return -EIO;
	}
	json_object *view = sharers_json(list, n, &res, s->self);
	pthread_mutex_lock(&g.mu);
	json_object_put(s->last_sharers);
	s->last_sharers = view;
	pthread_mutex_unlock(&g.mu);
	for (size_t i = 0; i < n; i++) {
		const struct bs_sharer *who = &list[i];
		if (who->id == s->self || in(res.acked, res.nacked, who->id))
			continue;
		char err[256];
		bool timed_out = in(res.missed, res.nmissed, who->id);
		if (backstore_shared_fence(s->obj, who, err, sizeof(err))) {
			log_err("%s of %s: gateway %016llx (%s, %s) %s, and cannot be fenced: %s", s->kind->what, s->name,
				(unsigned long long)who->id, who->desc, who->addr,
				timed_out ? "did not acknowledge a change" : "no longer watches the state", err);
			rc = -EIO;
			continue;
		}
		log_warn("%s of %s: gateway %016llx (%s, %s) %s within %u ms: fenced (blocklisted)", s->kind->what,
			 s->name, (unsigned long long)who->id, who->desc, who->addr,
			 timed_out ? "did not acknowledge a change" : "no longer watched the state", SHARED_NOTIFY_MS);
		if (s->kind->fenced)
			s->kind->fenced(s->owner, s, who);
	}
	free(list);
	backstore_notify_result_free(&res);
	return rc;
}

/* A notification's version and notes (the JSON text of its "notes", malloc'd); false: a heartbeat, or bad. */
static bool payload_parse(const char *p, size_t len, uint64_t *version, char **notes)
{
	json_tokener *tok = json_tokener_new_ex(8);
	json_object *o = tok && len ? json_tokener_parse_ex(tok, p, (int)len) : NULL, *v, *n;
	bool ok = o && json_object_object_get_ex(o, "version", &v);
	*notes = NULL;
	if (ok) {
		*version = json_object_get_uint64(v);
		if (json_object_object_get_ex(o, "notes", &n) && !json_object_is_type(n, json_type_null))
			*notes = strdup(json_object_to_json_string_ext(n, JSON_C_TO_STRING_PLAIN));
	}
	json_object_put(o);
	if (tok)
		json_tokener_free(tok);
	return ok;
}

/* The notification of a change: its version and the kind's notes. */
static char *payload_of(uint64_t version, const char *notes)
{
	char *out = NULL;
	if (asprintf(&out, "{\"version\":%llu,\"notes\":%s}", (unsigned long long)version, notes ? notes : "null") < 0)
		return NULL;
	return out;
}

/* ------------------------------------------------------------------------ */
/* The commit thread. */

static void answer_on_reactor(void *arg)
{
	struct job *j = arg;
	struct scsi_cmd *cmd = j->j.cmd;
	cmd->status = j->j.status;
	memcpy(cmd->sense, j->j.sense, sizeof(cmd->sense));
	cmd->sense_len = j->j.sense_len;
	cmd->din_len = 0;
	if (cmd->status == SCSI_GOOD)
		cmd->resid = j->resid;
	job_free(j);
	scsi_cmd_complete(cmd);
}

/*
 * s's running change j is made: s's next one waits its turn behind the
 * other objects'.  The answer goes to whoever waits: the command's
 * reactor, a shared_run caller, or no one.  s may be gone once g.mu is
 * let go (a closer waits for its last job).
 */
static void answer(struct job *j)
{
	struct shared *s = j->s;
	pthread_mutex_lock(&g.mu);
	s->running = NULL;
	if (j->j.cmd)
		s->cmds--;
	if (s->changes.head)
		make_ready(s);
	if (--s->jobs == 0)
		pthread_cond_broadcast(&g.idle);
	if (j->done) {
		*j->rc = j->j.status == SCSI_GOOD ? 0 : -EIO;
		*j->done = true;
		pthread_cond_broadcast(j->done_cv);
	}
	pthread_mutex_unlock(&g.mu);
	if (j->done) {
		job_free(j);
		return;
	}
	if (!j->j.cmd) {
		job_free(j);
	} else if (!j->j.cmd->reactor) {
		answer_on_reactor(j); /* no reactor (tests) */
	} else {
		/* Only an allocation failure stops the hand-off; the answer must not be lost, so wait for memory. */
		while (reactor_send(j->j.cmd->reactor, answer_on_reactor, j) != 0)
			usleep(1000);
	}
}

void shared_answer_sense(struct shared_job *j, const struct scsi_lu *lu, uint8_t key, uint16_t asc)
{
	struct scsi_cmd fake = { .lu = (struct scsi_lu *)lu };
	sense_set(&fake, key, asc);
	j->status = fake.status;
	memcpy(j->sense, fake.sense, sizeof(j->sense));
	j->sense_len = fake.sense_len;
}

/* For a waiting shared_run caller: why the change failed. */
static void why(struct job *j, const char *fmt, const char *detail)
{
	if (j->err)
		snprintf(j->err, j->errlen, fmt, detail);
}

static void commit(struct job *j)
{
	struct shared *s = j->s;
	const struct scsi_lu *lu = j->j.cmd ? j->j.cmd->lu : NULL;
	for (unsigned attempt = 0;; attempt++) {
		pthread_mutex_lock(s->mu);
		bool cut = s->fenced;
		uint64_t version = s->version;
		char *before = s->text ? strdup(s->text) : NULL;
		pthread_mutex_unlock(s->mu);
		if (cut || !before) {
			free(before);
			why(j, "%s", cut ? "the other gateways fenced this one" : "out of memory");
			shared_answer_sense(&j->j, lu, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			break;
		}
		char *notes = NULL;
		j->j.status = SCSI_GOOD;
		j->j.sense_len = 0;
		char *after = s->kind->change(s->owner, &j->j, &notes);
		if (!after || !strcmp(after, before)) {
			if (j->j.status != SCSI_GOOD)
				why(j, "%s", "refused");
			free(before);
			free(after);
			/* Nothing to store, but news for the other targets all the same (a reset's unit attention). */
			char *payload = notes && j->j.status == SCSI_GOOD ? payload_of(version, notes) : NULL;
			if (payload && tell_sharers(s, payload))
				why(j, "%s", "a gateway could not be told, nor fenced");
			free(payload);
			free(notes);
			break;
		}
		free(before);
		uint64_t now;
		int rc = backstore_shared_write(s->obj, after, strlen(after), version, &now);
		if (rc == -ERANGE && attempt < SHARED_RETRIES) {
			/* Another target changed it first: the change again, on its state. */
			free(after);
			free(notes);
			if (refresh(s)) {
				why(j, "%s", "the shared state could not be read");
				shared_answer_sense(&j->j, lu, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
				break;
			}
			continue;
		}
		if (rc == -ESHUTDOWN)
			cut_off(s);
		if (rc) {
			const char *e = rc == -ERANGE ? "other gateways kept changing it first" : strerror(-rc);
			log_err("%s of %s: storing a change: %s", s->kind->what, s->name, e);
			why(j, "storing it: %s", e);
			free(after);
			free(notes);
			if (rc == -ERANGE) {
				j->j.status = SCSI_BUSY;
				j->j.sense_len = 0;
			} else {
				shared_answer_sense(&j->j, lu, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			}
			break;
		}
		pthread_mutex_lock(s->mu);
		install(s, after, strlen(after), now);
		pthread_mutex_unlock(s->mu);
		char *payload = payload_of(now, notes);
		/* Stored: the others are told, and whoever cannot be is fenced, before the answer. */
		if (!payload || tell_sharers(s, payload)) {
			why(j, "%s", "a gateway could not be told, nor fenced");
			shared_answer_sense(&j->j, lu, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		}
		free(payload);
		if (notes && !j->j.remote_only && s->kind->deliver) {
			pthread_mutex_lock(s->mu);
			s->kind->deliver(s->owner, notes);
			pthread_mutex_unlock(s->mu);
		}
		free(notes);
		if (j->j.status == SCSI_GOOD && s->kind->done)
			s->kind->done(s->owner, &j->j);
		break;
	}
	answer(j);
}

static void *commit_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.mu);
	while (!g.stop) {
		struct shared *s = g.ready;
		if (!s) {
			pthread_cond_wait(&g.commit.cv, &g.mu);
			continue;
		}
		if (!(g.ready = s->next_ready))
			g.ready_tail = NULL;
		s->ready = false;
		struct job *j = s->running = dequeue(&s->changes);
		pthread_mutex_unlock(&g.mu);
		commit(j);
		pthread_mutex_lock(&g.mu);
	}
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The heartbeat thread: every object's sharers asked at least every SHARED_HEARTBEAT_MS. */

/* Under g.mu: the open object asked longest ago, if that was a heartbeat period ago or more; else NULL. */
static struct shared *beat_due(void)
{
	uint64_t t = now_ns();
	struct shared *due = NULL;
	for (struct shared *s = g.all; s; s = s->next)
		if (!s->closing && t - s->beat_ns >= SHARED_HEARTBEAT_MS * 1000000ull &&
		    (!due || s->beat_ns < due->beat_ns))
			due = s;
	return due;
}

static void *beat_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.mu);
	while (!g.stop) {
		struct shared *s = beat_due();
		if (!s) {
			struct timespec dl;
			clock_gettime(CLOCK_MONOTONIC, &dl);
			dl.tv_nsec += SHARED_BEAT_TICK_MS * 1000000l;
			if (dl.tv_nsec >= 1000000000) {
				dl.tv_sec++;
				dl.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&g.beat.cv, &g.mu, &dl);
			continue;
		}
		s->jobs++; /* held open while asked */
		pthread_mutex_unlock(&g.mu);
		tell_sharers(s, "{}");
		pthread_mutex_lock(&g.mu);
		if (--s->jobs == 0)
			pthread_cond_broadcast(&g.idle);
	}
	pthread_mutex_unlock(&g.mu);
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* The notify thread: the other targets' changes, taken and acknowledged. */

static void on_notify(void *arg, uint64_t notify_id, uint64_t notifier, const void *data, size_t len);
static void on_watch_error(void *arg, int err);

static void take_notification(struct job *j)
{
	struct shared *s = j->s;
	char *notes = NULL;
	uint64_t version;
	if (j->type == JOB_REWATCH) {
		/* Changes may have been missed while it was broken: watch, then read. */
		int rc = backstore_shared_watch(s->obj, on_notify, on_watch_error, s);
		if (rc == -ESHUTDOWN)
			cut_off(s);
		else if (rc || refresh(s))
			log_err("%s of %s: watching the shared state again: %s", s->kind->what, s->name,
				rc ? strerror(-rc) : "the state could not be read");
	} else if (j->notifier != s->self && payload_parse(j->payload, j->payload_len, &version, &notes)) {
		pthread_mutex_lock(s->mu);
		bool moved = version != s->version;
		pthread_mutex_unlock(s->mu);
		/* Acknowledged even when the read fails: not acknowledging would only get this target fenced. */
		if (moved)
			refresh(s);
		if (notes && s->kind->deliver) {
			pthread_mutex_lock(s->mu);
			s->kind->deliver(s->owner, notes);
			pthread_mutex_unlock(s->mu);
		}
		free(notes);
	}
	if (j->type == JOB_NOTIFY)
		backstore_shared_ack(s->obj, j->notify_id);
	job_done(s);
	job_free(j);
}

static void *notify_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&g.mu);
	while (!g.stop) {
		struct job *j = dequeue(&g.notifications);
		if (!j) {
			pthread_cond_wait(&g.notify.cv, &g.mu);
			continue;
		}
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
	struct shared *s = arg;
	struct job *j = calloc(1, sizeof(*j));
	if (j && len && !(j->payload = malloc(len))) {
		free(j);
		j = NULL;
	}
	if (!j) {
		/* No memory to queue it: acknowledge now, without the change, rather than be fenced for silence. */
		backstore_shared_ack(s->obj, notify_id);
		return;
	}
	j->type = JOB_NOTIFY;
	j->s = s;
	j->notify_id = notify_id;
	j->notifier = notifier;
	memcpy(j->payload, data, len);
	j->payload_len = len;
	pthread_mutex_lock(&g.mu);
	push_notification(j);
	pthread_mutex_unlock(&g.mu);
}

static void on_watch_error(void *arg, int err)
{
	struct shared *s = arg;
	if (err == -ESHUTDOWN) {
		cut_off(s);
		return;
	}
	log_warn("%s of %s: the watch on the shared state broke (%s); watching it again", s->kind->what, s->name,
		 strerror(-err));
	struct job *j = calloc(1, sizeof(*j));
	if (!j)
		return;
	j->type = JOB_REWATCH;
	j->s = s;
	pthread_mutex_lock(&g.mu);
	push_notification(j);
	pthread_mutex_unlock(&g.mu);
}

/* ------------------------------------------------------------------------ */
/* Changes submitted. */

/* Under g.mu: has the I_T nexus id a command of its own waiting on s, or being made? */
static bool nexus_waits(const struct shared *s, uint64_t id)
{
	if (s->running && s->running->j.cmd && s->running->j.nexus.id == id)
		return true;
	for (const struct job *j = s->changes.head; j; j = j->next)
		if (j->j.cmd && j->j.nexus.id == id)
			return true;
	return false;
}

static struct job *job_new(struct shared *s, int op, const struct scsi_nexus *nexus, bool flag, void *arg)
{
	struct job *j = calloc(1, sizeof(*j));
	if (!j) {
		free(arg);
		return NULL;
	}
	j->type = JOB_CHANGE;
	j->s = s;
	j->j.op = op;
	j->j.flag = flag;
	j->j.arg = arg;
	if (nexus) {
		j->j.nexus = *nexus;
		j->j.has_nexus = true;
	}
	return j;
}

void shared_submit_cmd(struct shared *s, int op, struct scsi_cmd *cmd)
{
	uint32_t plen = cmd->buf && cmd->buf->data ? (uint32_t)MIN((size_t)cmd->dout_len, cmd->buf->len) : 0;
	struct job *j = job_new(s, op, cmd->nexus, false, NULL);
	if (j && plen && plen <= SCSI_PR_OUT_MAX && (j->j.params = malloc(plen)))
		memcpy(j->j.params, cmd->buf->data, plen);
	if (!j || (plen && !j->j.params)) {
		free(j);
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		scsi_cmd_complete(cmd);
		return;
	}
	j->j.cmd = cmd;
	j->j.plen = plen;
	j->resid = cmd->resid;
	memcpy(j->j.cdb, cmd->cdb, sizeof(j->j.cdb));
	pthread_mutex_lock(&g.mu);
	if (s->cmds < SHARED_QUEUE_MAX) {
		push_change(j);
		pthread_mutex_unlock(&g.mu);
		return;
	}
	/*
	 * Each change waiting costs the others a whole write and notification:
	 * past the cap the command is not taken.  SAM-5 5.3.1: TASK SET FULL to
	 * a nexus with commands of its own waiting (its initiator lowers its
	 * queue depth), BUSY to one without (it tries again later).  Not a
	 * CHECK CONDITION: the command is not wrong, and a cluster would take
	 * a failed PERSISTENT RESERVE OUT for a lost arbitration.
	 */
	bool own = cmd->nexus && nexus_waits(s, cmd->nexus->id);
	pthread_mutex_unlock(&g.mu);
	job_free(j);
	char who[160];
	log_limited(LOG_WARN, "%s of %s: %d changes wait already: a command of %s is answered %s", s->kind->what,
		    s->name, SHARED_QUEUE_MAX, cmd->nexus ? log_escape(cmd->nexus->initiator_port, who, sizeof(who)) : "-",
		    own ? "TASK SET FULL" : "BUSY");
	cmd->status = own ? SCSI_TASK_SET_FULL : SCSI_BUSY;
	cmd->sense_len = 0;
	scsi_cmd_complete(cmd);
}

void shared_submit(struct shared *s, int op, const struct scsi_nexus *nexus, bool flag, void *arg,
		   struct scsi_wait *w)
{
	struct job *j = job_new(s, op, nexus, flag, arg);
	if (!j) {
		log_err("%s of %s: out of memory: a change is lost", s->kind->what, s->name);
		return;
	}
	scsi_wait_hold(w);
	j->wait = w;
	pthread_mutex_lock(&g.mu);
	push_change(j);
	pthread_mutex_unlock(&g.mu);
}

int shared_run(struct shared *s, int op, void *arg, char *err, size_t errlen)
{
	pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
	bool done = false;
	int rc = -EIO;
	struct job *j = job_new(s, op, NULL, false, arg);
	if (!j) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	err[0] = 0;
	j->done_cv = &cv;
	j->done = &done;
	j->rc = &rc;
	j->err = err;
	j->errlen = errlen;
	pthread_mutex_lock(&g.mu);
	push_change(j);
	while (!done)
		pthread_cond_wait(&cv, &g.mu);
	pthread_mutex_unlock(&g.mu);
	pthread_cond_destroy(&cv);
	return rc;
}

json_object *shared_desc_new(void)
{
	char host[64] = "", who[128];
	gethostname(host, sizeof(host) - 1);
	snprintf(who, sizeof(who), "isertd %d on %s", (int)getpid(), host);
	json_object *d = json_object_new_object();
	if (d)
		json_object_object_add(d, "gateway", json_object_new_string(who));
	return d;
}

int shared_others(struct shared *s, struct bs_sharer **list, size_t *n)
{
	*list = NULL;
	*n = 0;
	tell_sharers(s, "{}"); /* the dead fenced, and so off the list */
	int rc = backstore_shared_sharers(s->obj, list, n);
	if (rc)
		return rc;
	for (size_t i = 0; i < *n; i++)
		if ((*list)[i].id == s->self) {
			(*list)[i] = (*list)[--*n];
			break;
		}
	return 0;
}

int shared_describe(struct shared *s, const char *desc)
{
	return backstore_shared_join(s->obj, desc);
}

bool shared_fenced_any(void)
{
	return __atomic_load_n(&g.cut, __ATOMIC_RELAXED);
}

bool shared_fenced(struct shared *s)
{
	pthread_mutex_lock(s->mu);
	bool f = s->fenced;
	pthread_mutex_unlock(s->mu);
	return f;
}

json_object *shared_json(struct shared *s)
{
	json_object *o = json_object_new_object();
	if (!o)
		return NULL;
	pthread_mutex_lock(s->mu);
	uint64_t v = s->version;
	bool f = s->fenced;
	json_object *state = s->text ? json_tokener_parse(s->text) : NULL;
	pthread_mutex_unlock(s->mu);
	char self[17];
	snprintf(self, sizeof(self), "%016llx", (unsigned long long)s->self);
	json_object_object_add(o, "object", json_object_new_string(backstore_shared_where(s->obj)));
	json_object_object_add(o, "version", json_object_new_uint64(v));
	json_object_object_add(o, "self", json_object_new_string(self));
	json_object_object_add(o, "fenced", json_object_new_boolean(f));
	json_object_object_add(o, "state", state);
	pthread_mutex_lock(&g.mu);
	json_object_object_add(o, "gateways", s->last_sharers ? json_object_get(s->last_sharers) : NULL);
	pthread_mutex_unlock(&g.mu);
	return o;
}

/* ------------------------------------------------------------------------ */
/* Objects opened and closed, and the threads that serve them while any is open. */

static pthread_once_t cv_once = PTHREAD_ONCE_INIT;

static void cv_init(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g.commit.cv, &ca);
	pthread_cond_init(&g.notify.cv, &ca);
	pthread_cond_init(&g.beat.cv, &ca);
	pthread_condattr_destroy(&ca);
}

/* Under g.mu. */
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
	if (pthread_create(&g.beat.th, NULL, beat_thread, NULL))
		return -EAGAIN;
	g.beat.running = true;
	return 0;
}

/* Under g.mu, no object open; returns with it held. */
static void workers_stop(void)
{
	g.stop = true;
	pthread_cond_signal(&g.commit.cv);
	pthread_cond_signal(&g.notify.cv);
	pthread_cond_signal(&g.beat.cv);
	pthread_mutex_unlock(&g.mu);
	if (g.commit.running)
		pthread_join(g.commit.th, NULL);
	if (g.notify.running)
		pthread_join(g.notify.th, NULL);
	if (g.beat.running)
		pthread_join(g.beat.th, NULL);
	pthread_mutex_lock(&g.mu);
	g.commit.running = g.notify.running = g.beat.running = false;
}

/* Under g.mu: wait for s's jobs, stop the threads if nothing else is open. */
static void drain(struct shared *s)
{
	while (s->jobs)
		pthread_cond_wait(&g.idle, &g.mu);
	if (!g.all)
		workers_stop();
}

int shared_open(struct backstore *bs, const char *obj_kind, const char *key, const struct shared_kind *kind,
		void *owner, pthread_mutex_t *mu, const char *name, const char *init_text, const char *desc,
		struct shared **out, char *err, size_t errlen)
{
	struct shared *s = calloc(1, sizeof(*s));
	int rc;
	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	s->kind = kind;
	s->owner = owner;
	s->mu = mu;
	snprintf(s->name, sizeof(s->name), "%s", name);
	if ((rc = backstore_shared_open(bs, obj_kind, key, &s->obj))) {
		snprintf(err, errlen, "%s", rc == -ENOTSUP ? "the store keeps no shared state" : strerror(-rc));
		free(s);
		return rc;
	}
	s->self = backstore_shared_self(s->obj);
	/* The threads first: a notification may come as soon as the watch is set. */
	pthread_mutex_lock(&g.mu);
	rc = workers_start();
	pthread_mutex_unlock(&g.mu);
	/* The object must exist to be watched: the first target writes the initial state. */
	char *text = NULL;
	size_t len;
	uint64_t v, now;
	if (!rc)
		rc = backstore_shared_read(s->obj, &text, &len, &v);
	free(text);
	if (rc == -ENOENT) {
		rc = backstore_shared_write(s->obj, init_text, strlen(init_text), 0, &now);
		if (rc == -ERANGE)
			rc = 0; /* another target wrote it first */
	}
	/*
	 * Watch, then join (from then on a target that stops answering is
	 * fenced: one on the list was watching when a notification went out),
	 * then read: no change can fall between the watch and the read.
	 */
	if (!rc)
		rc = backstore_shared_watch(s->obj, on_notify, on_watch_error, s);
	if (!rc && kind->admit) {
		/* Who is alive besides: the dead are fenced (and leave the list) by asking everyone first. */
		struct bs_sharer *live = NULL;
		size_t n = 0;
		tell_sharers(s, "{}");
		if (!(rc = backstore_shared_sharers(s->obj, &live, &n)))
			rc = kind->admit(owner, live, n, err, errlen);
		else
			snprintf(err, errlen, "reading the list of gateways: %s", strerror(-rc));
		free(live);
		if (rc) {
			backstore_shared_unwatch(s->obj);
			pthread_mutex_lock(&g.mu);
			drain(s);
			pthread_mutex_unlock(&g.mu);
			backstore_shared_close(s->obj);
			json_object_put(s->last_sharers);
			free(s);
			return rc;
		}
	}
	if (!rc)
		rc = backstore_shared_join(s->obj, desc);
	if (!rc && refresh(s))
		rc = -EINVAL;
	if (rc) {
		snprintf(err, errlen, "%s: %s", backstore_shared_where(s->obj),
			 rc == -EINVAL ? "its state is not usable (see the log)" : strerror(-rc));
		backstore_shared_leave(s->obj);
		backstore_shared_unwatch(s->obj);
		pthread_mutex_lock(&g.mu);
		drain(s); /* notifications that came meanwhile */
		pthread_mutex_unlock(&g.mu);
		backstore_shared_close(s->obj);
		json_object_put(s->last_sharers);
		free(s->text);
		free(s);
		return rc;
	}
	pthread_mutex_lock(&g.mu);
	/* The list asked before joining lacks this target: the operator sees the next one. */
	json_object_put(s->last_sharers);
	s->last_sharers = NULL;
	s->beat_ns = now_ns();
	s->next = g.all;
	g.all = s;
	pthread_mutex_unlock(&g.mu);
	*out = s;
	return 0;
}

void shared_close(struct shared *s)
{
	if (!s)
		return;
	/* Off the list first: a target gone from it is not fenced for ignoring what follows. */
	backstore_shared_leave(s->obj);
	backstore_shared_unwatch(s->obj);
	pthread_mutex_lock(&g.mu);
	s->closing = true;
	for (struct shared **pp = &g.all; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	/* Changes not yet made and answered by no one are dropped; notifications are still answered. */
	struct job **pp = &s->changes.head, *last = NULL;
	while (*pp) {
		struct job *j = *pp;
		if (!j->j.cmd && !j->done) {
			*pp = j->next;
			s->jobs--;
			job_free(j);
		} else {
			last = j;
			pp = &j->next;
		}
	}
	s->changes.tail = last;
	if (!s->changes.head && s->ready) {
		struct shared **rp = &g.ready, *prev = NULL;
		while (*rp != s) {
			prev = *rp;
			rp = &(*rp)->next_ready;
		}
		*rp = s->next_ready;
		if (g.ready_tail == s)
			g.ready_tail = prev;
		s->ready = false;
	}
	drain(s);
	json_object_put(s->last_sharers);
	pthread_mutex_unlock(&g.mu);
	backstore_shared_close(s->obj);
	free(s->text);
	free(s);
}
