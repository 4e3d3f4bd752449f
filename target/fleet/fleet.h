/*
 * A gateway of a fleet (docs/fleet.md): its configuration is the fleet's
 * document in the cluster (target/config/fleet.h), which every gateway
 * watches.  A change from any gateway is planned on every live gateway,
 * written once by compare-and-set of the object's version (the fleet's
 * generation) and then applied by each.  This module talks to the
 * cluster and answers the other gateways; the admin thread
 * (target/control/m_fleet.c) makes the changes and applies them.
 */
#ifndef ISERT_FLEET_H
#define ISERT_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;
struct config;

/* A gateway answers a plan or a question within this (it takes milliseconds), or is not answering. */
#define FLEET_ANSWER_S 5

struct fleet_opts {
	const char *cluster;   /* "POOL/NAME" */
	const char *gateway;   /* this gateway's name in the document */
	const char *conf, *id, *keyring; /* the Ceph client: ceph.conf, client id (admin), keyring */
	const char *state_dir; /* where the last applied document is kept (NULL: the default); as global.state_dir */
	const char *metrics;   /* --metrics, as global.metrics */
};

/* Checked before anything is opened: 0, or -EINVAL with err naming the option. */
int fleet_opts_check(const struct fleet_opts *o, char *err, size_t errlen);

/*
 * Join: the current generation's configuration for this gateway (*out, the
 * file's format), read from the cluster, or from the copy kept in the
 * state folder when the cluster cannot be reached (said in the log and in
 * fleet_status_json).  Before anything listens.
 */
int fleet_start(const struct fleet_opts *o, struct json_object **out, char *err, size_t errlen);
/* Watch the document from now on (a thread of its own reconnects); wake(): the admin thread should catch up. */
void fleet_run(void (*wake)(void));
void fleet_stop(void);
bool fleet_active(void);
/*
 * What the command line sets in this gateway's global keys (--state-dir,
 * --metrics): put into each configuration composed for it, and taken out
 * of one an edit made, so that it never goes into the document.
 */
void fleet_cmdline_into(struct json_object *cfg);
void fleet_cmdline_strip(struct json_object *cfg);
const char *fleet_gateway(void);

/* The document this gateway runs, its generation (a new reference; NULL when not in a fleet). */
struct json_object *fleet_applied(uint64_t *generation);

/*
 * The newest document in the cluster (*doc, a new reference) if it is newer
 * than the one applied: 1; 0 when it is not; <0 when it cannot be read.
 */
int fleet_newer(struct json_object **doc, uint64_t *generation, char *err, size_t errlen);
/* This gateway now runs doc at generation (kept in the state folder), or failed to (err). */
void fleet_applied_set(struct json_object *doc, uint64_t generation, const char *err);

/* What each live gateway answered to a plan or a question: one object per gateway. */
struct fleet_answers {
	struct json_object *answers;  /* array of {"gateway", ...} */
	size_t missed;                /* watchers that did not answer in time */
	char missed_ids[256];         /* their Ceph client ids */
};
/* Ask every live gateway (this one too) whether it can run doc: answers {"gateway","ok","error","plan"}. */
int fleet_plan(struct json_object *doc, struct fleet_answers *a, char *err, size_t errlen);
/* Write doc as the generation after base (-ERANGE: another change was written first); *now its generation. */
int fleet_commit(struct json_object *doc, uint64_t base, uint64_t *now, char *err, size_t errlen);
/* Ask every live gateway where it stands: {"gateway","generation","ok","error","cached","fenced"}. */
int fleet_ask(struct fleet_answers *a, char *err, size_t errlen);
void fleet_answers_free(struct fleet_answers *a);

/* fleet.status: this gateway's view (the cluster, its generation, cached or not, the last error). */
struct json_object *fleet_self_json(void);

#endif
