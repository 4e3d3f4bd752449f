/*
 * What the admin socket asks of the reactors.  Connections and sessions
 * belong to the reactor that runs them, so the admin thread never reads
 * them itself: it sends one message to every reactor, each answers for its
 * own connections, and the admin thread waits (bounded) for all answers.
 * The request is reference counted so that a reactor answering after the
 * admin thread gave up touches nothing freed.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/reactor.h"
#include "common/utf8.h"
#include "target/backstore/backstore.h"
#include "target/control/control.h"
#include "target/iscsi/iscsi.h"

#define FANOUT_TIMEOUT_MS 5000

struct fanout {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned pending, refs;
	void (*each)(struct iscsi_conn *c, void *arg); /* on the reactor, for each connection */
	/* what to match */
	uint16_t tsih;
	int tag;                       /* -1: any */
	char initiator[224], target[224];
	char why[96];
	struct scsi_lu **lus;          /* count_tasks (a copy, freed with the request) */
	size_t nlus;
	/* what the reactors found (under mu) */
	json_object *out;
	int count;
	int changed;                   /* refresh_session: LUN maps that changed */
	/* admin_on_reactors: fn(ctx) once on each reactor; ctx_free(ctx) with the last reference */
	void (*fn)(void *ctx);
	void *ctx;
	void (*ctx_free)(void *ctx);
};

json_object *admin_json_shown(const char *s)
{
	char buf[4 * 224];
	size_t n = utf8_shown(s, buf, sizeof(buf));
	if (n < sizeof(buf))
		return json_object_new_string(buf);
	char *big = malloc(n + 1);
	if (!big)
		return json_object_new_string("(out of memory)");
	utf8_shown(s, big, n + 1);
	json_object *o = json_object_new_string(big);
	free(big);
	return o;
}

static void fanout_put(struct fanout *f)
{
	pthread_mutex_lock(&f->mu);
	bool last = --f->refs == 0;
	pthread_mutex_unlock(&f->mu);
	if (!last)
		return;
	json_object_put(f->out);
	free(f->lus);
	if (f->ctx_free)
		f->ctx_free(f->ctx);
	pthread_cond_destroy(&f->cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

static void fanout_on_reactor(void *arg)
{
	struct fanout *f = arg;
	if (f->each)
		conn_foreach(f->each, f);
	if (f->fn)
		f->fn(f->ctx);
	pthread_mutex_lock(&f->mu);
	f->pending--;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	fanout_put(f);
}

static struct fanout *fanout_new(void (*each)(struct iscsi_conn *, void *))
{
	struct fanout *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
	f->each = each;
	f->tag = -1;
	f->refs = 1;
	return f;
}

/* Run f on every reactor and wait for all of them; 0, or -ETIMEDOUT with err filled. */
static int fanout_run(struct fanout *f, char *err, size_t errlen)
{
	struct reactor **reactors;
	unsigned nreactors = iscsi_reactors(&reactors);
	pthread_mutex_lock(&f->mu);
	for (unsigned i = 0; i < nreactors; i++) {
		f->pending++;
		f->refs++;
		if (reactor_send(reactors[i], fanout_on_reactor, f)) {
			f->pending--;
			f->refs--;
		}
	}
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += FANOUT_TIMEOUT_MS / 1000;
	int rc = 0;
	while (f->pending && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&f->cv, &f->mu, &dl);
	unsigned left = f->pending;
	pthread_mutex_unlock(&f->mu);
	if (left) {
		snprintf(err, errlen, "%u reactor%s did not answer within %u ms", left, left > 1 ? "s" : "",
			 FANOUT_TIMEOUT_MS);
		return -ETIMEDOUT;
	}
	return 0;
}

int admin_on_reactors(void (*fn)(void *ctx), void *ctx, void (*ctx_free)(void *ctx), char *err, size_t errlen)
{
	struct fanout *f = fanout_new(NULL);
	if (!f) {
		ctx_free(ctx);
		return -ENOMEM;
	}
	f->fn = fn;
	f->ctx = ctx;
	f->ctx_free = ctx_free;
	int rc = fanout_run(f, err, errlen);
	/* Every reactor answered: none touches ctx again, the caller keeps it. */
	if (!rc)
		f->ctx_free = NULL;
	fanout_put(f);
	return rc;
}

static bool session_matches(const struct fanout *f, const struct iscsi_conn_view *v)
{
	if (!v->session || v->gone)
		return false;
	if (f->tsih && v->tsih != f->tsih)
		return false;
	if (f->initiator[0] && strcmp(v->initiator, f->initiator))
		return false;
	if (f->target[0] && (!v->tpg || strcmp(v->tpg->iqn, f->target)))
		return false;
	if (f->tag >= 0 && (!v->tpg || v->tpg->tag != f->tag))
		return false;
	return true;
}

static void add_u(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static json_object *params_json(const struct neg_params *p, bool iser)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "HeaderDigest", json_object_new_string(p->header_digest ? "CRC32C" : "None"));
	json_object_object_add(o, "DataDigest", json_object_new_string(p->data_digest ? "CRC32C" : "None"));
	json_object_object_add(o, "InitialR2T", json_object_new_boolean(p->initial_r2t));
	json_object_object_add(o, "ImmediateData", json_object_new_boolean(p->immediate_data));
	add_u(o, "MaxRecvDataSegmentLength", p->max_recv_dsl);
	add_u(o, "InitiatorMaxRecvDataSegmentLength", p->peer_max_recv_dsl);
	add_u(o, "MaxBurstLength", p->max_burst);
	add_u(o, "FirstBurstLength", p->first_burst);
	add_u(o, "MaxOutstandingR2T", p->max_outstanding_r2t);
	add_u(o, "DefaultTime2Wait", p->time2wait);
	add_u(o, "DefaultTime2Retain", p->time2retain);
	add_u(o, "ErrorRecoveryLevel", p->erl);
	add_u(o, "MaxConnections", p->max_connections);
	if (iser) {
		json_object_object_add(o, "RDMAExtensions", json_object_new_boolean(p->rdma_extensions));
		add_u(o, "TargetRecvDataSegmentLength", p->target_recv_dsl);
		add_u(o, "InitiatorRecvDataSegmentLength", p->initiator_recv_dsl);
		add_u(o, "MaxOutstandingUnexpectedPDUs", p->max_outstanding_unexpected_pdus);
	}
	return o;
}

static void describe_session(struct iscsi_conn *c, void *arg)
{
	struct fanout *f = arg;
	struct iscsi_conn_view v;
	conn_view(c, &v);
	if (!v.full || !session_matches(f, &v))
		return;
	json_object *o = json_object_new_object();
	char isid[16];
	snprintf(isid, sizeof(isid), "%02x%02x%02x%02x%02x%02x", v.isid[0], v.isid[1], v.isid[2], v.isid[3],
		 v.isid[4], v.isid[5]);
	add_u(o, "tsih", v.tsih);
	json_object_object_add(o, "isid", json_object_new_string(isid));
	json_object_object_add(o, "initiator", admin_json_shown(v.initiator));
	json_object_object_add(o, "type", json_object_new_string(v.discovery ? "discovery" : "normal"));
	if (v.tpg) {
		json_object_object_add(o, "target", json_object_new_string(v.tpg->iqn));
		add_u(o, "tpg", v.tpg->tag);
	}
	json_object_object_add(o, "transport", json_object_new_string(v.transport));
	json_object_object_add(o, "portal", json_object_new_string(v.portal));
	json_object_object_add(o, "local", json_object_new_string(v.local));
	json_object_object_add(o, "peer", json_object_new_string(v.peer));
	add_u(o, "cid", v.cid);
	add_u(o, "reactor", (uint64_t)v.reactor);
	json_object *luns = json_object_new_array();
	for (size_t i = 0; i < v.nluns; i++) {
		uint64_t lun;
		const struct scsi_lu *lu;
		bool ro;
		conn_view_lun(c, i, &lun, &lu, &ro);
		json_object *l = json_object_new_object();
		add_u(l, "lun", lun);
		json_object_object_add(l, "backstore", json_object_new_string(backstore_name(scsi_lu_backstore(lu))));
		json_object_object_add(l, "read_only", json_object_new_boolean(ro));
		json_object_array_add(luns, l);
	}
	json_object_object_add(o, "luns", luns);
	add_u(o, "queue_depth", v.queue_depth);
	add_u(o, "commands_active", v.active);
	add_u(o, "tasks", v.tasks);
	add_u(o, "exp_cmdsn", v.exp_cmdsn);
	add_u(o, "max_cmdsn", v.max_cmdsn);
	if (v.rdma)
		json_object_object_add(o, "shared_receives", json_object_new_boolean(v.shared_rx));
	add_u(o, "buffer_bytes", v.buf_bytes);
	json_object_object_add(o, "params", params_json(v.params, v.rdma));
	pthread_mutex_lock(&f->mu);
	json_object_array_add(f->out, o);
	f->count++;
	pthread_mutex_unlock(&f->mu);
}

int admin_sessions(json_object *out, uint16_t tsih, const char *initiator, const char *target, char *err,
		   size_t errlen)
{
	struct fanout *f = fanout_new(describe_session);
	if (!f)
		return -ENOMEM;
	f->tsih = tsih;
	snprintf(f->initiator, sizeof(f->initiator), "%s", initiator ? initiator : "");
	snprintf(f->target, sizeof(f->target), "%s", target ? target : "");
	f->out = json_object_new_array();
	int rc = fanout_run(f, err, errlen);
	if (!rc) {
		pthread_mutex_lock(&f->mu);
		size_t n = json_object_array_length(f->out);
		for (size_t i = 0; i < n; i++)
			json_object_array_add(out, json_object_get(json_object_array_get_idx(f->out, i)));
		pthread_mutex_unlock(&f->mu);
	}
	fanout_put(f);
	return rc;
}

static void close_session(struct iscsi_conn *c, void *arg)
{
	struct fanout *f = arg;
	struct iscsi_conn_view v;
	conn_view(c, &v);
	if (v.closing || !session_matches(f, &v))
		return;
	char who[160];
	log_info("%s: session TSIH %u of '%s' closed: %s", v.peer, v.tsih, log_escape(v.initiator, who, sizeof(who)),
		 f->why);
	conn_close(c);
	pthread_mutex_lock(&f->mu);
	f->count++;
	pthread_mutex_unlock(&f->mu);
}

int admin_close_sessions(uint16_t tsih, const char *target, int tag, const char *why, char *err, size_t errlen)
{
	struct fanout *f = fanout_new(close_session);
	if (!f)
		return -ENOMEM;
	f->tsih = tsih;
	f->tag = tag;
	snprintf(f->target, sizeof(f->target), "%s", target ? target : "");
	snprintf(f->why, sizeof(f->why), "%s", why);
	int rc = fanout_run(f, err, errlen);
	pthread_mutex_lock(&f->mu);
	int n = f->count;
	pthread_mutex_unlock(&f->mu);
	fanout_put(f);
	return rc ? rc : n;
}

/* ------------------------------------------------------------------------ */
/* After a configuration change: every session takes its LUN map again. */

static void refresh_session(struct iscsi_conn *c, void *arg)
{
	struct fanout *f = arg;
	int rc = conn_refresh_map(c);
	if (rc != -EACCES && rc != 1)
		return;
	pthread_mutex_lock(&f->mu);
	if (rc == 1)
		f->changed++;
	else
		f->count++;
	pthread_mutex_unlock(&f->mu);
}

int admin_refresh_sessions(int *closed, int *changed, char *err, size_t errlen)
{
	struct fanout *f = fanout_new(refresh_session);
	if (!f)
		return -ENOMEM;
	int rc = fanout_run(f, err, errlen);
	pthread_mutex_lock(&f->mu);
	*closed = f->count;
	*changed = f->changed;
	pthread_mutex_unlock(&f->mu);
	fanout_put(f);
	return rc;
}

/* Tasks that still point at one of the LUs in f->lus (in any state, on any connection). */
static void count_tasks(struct iscsi_conn *c, void *arg)
{
	struct fanout *f = arg;
	int n = conn_lu_users(c, f->lus, f->nlus);
	pthread_mutex_lock(&f->mu);
	f->count += n;
	pthread_mutex_unlock(&f->mu);
}

int admin_lu_users(struct scsi_lu *const *lus, size_t n, char *err, size_t errlen)
{
	struct fanout *f = fanout_new(count_tasks);
	if (!f)
		return -ENOMEM;
	f->lus = malloc((n ? n : 1) * sizeof(*f->lus));
	if (!f->lus) {
		fanout_put(f);
		return -ENOMEM;
	}
	memcpy(f->lus, lus, n * sizeof(*lus));
	f->nlus = n;
	int rc = fanout_run(f, err, errlen);
	pthread_mutex_lock(&f->mu);
	int users = f->count;
	pthread_mutex_unlock(&f->mu);
	fanout_put(f);
	return rc ? rc : users;
}
