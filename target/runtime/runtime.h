/*
 * The running target: the configuration in effect and the objects this
 * process made from it.  The configuration (target/config/) is data only,
 * with no pointer into what runs; what runs is found here, from it:
 *
 *   - stores: each backstore open with its logical unit (stores.c), store
 *     i being the running configuration's backstores[i];
 *   - TPG objects (tpgs.c), by target name and tag: logins and sessions
 *     point at them, and each points at its portal group in the running
 *     configuration (NULL once the group left it);
 *   - the running ALUA groups made from the configuration's (their model,
 *     target/scsi/alua/, is told of each configuration: rt_start here,
 *     target/control/apply.c for a change).
 *
 * The lock, rt_lock (read-write), and its rule:
 *   - one writer, the admin thread (a change: target/control/), which holds
 *     it only for the moment the running configuration and its stores are
 *     swapped or added to; the admin thread reads both without it;
 *   - readers elsewhere: logins, discovery, task management and a session
 *     taking its LUN map, on the reactors; never the I/O path (a session
 *     keeps its LUN map, a command carries its LU);
 *   - the numbers read without the lock (the login and shutdown time
 *     limits) are copied out at start and at every change (rt_limits).
 */
#ifndef RUNTIME_H
#define RUNTIME_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/config/config.h"

struct backstore;
struct scsi_lu;
struct scsi_port;

extern pthread_rwlock_t rt_lock;

/* The running configuration: the admin thread at any time, others under rt_lock as readers. */
struct config *rt_config(void);

/*
 * A backstore open in this process, and its logical unit.  Counted
 * references (admin thread only): the running configuration holds one, a
 * change holds one for each store it opened or keeps until it is carried
 * out, the list of stores kept past their drain holds one.  The last
 * rt_store_put closes it: whoever drops a store that sessions may still use
 * waits for the reactors to let go of it first (target/control/apply.c).
 */
struct rt_store {
	struct backstore *bs;
	struct scsi_lu *lu;
	unsigned refs;
};

/* Store i of the running configuration (its backstores[i]); rt_config's rules. */
struct rt_store *rt_store_at(size_t i);
/* Its backstore (for the ALUA model's choice of the store a target shares through). */
struct backstore *rt_backstore_at(size_t i);
/* The running store of backstore name (admin thread), or NULL. */
struct rt_store *rt_store_named(const char *name, size_t *index);
/* Open b's backstore and make its LU: one reference, the caller's; 0 or -errno with err filled. */
int rt_store_open(const struct cfg_backstore *b, struct rt_store **out, char *err, size_t errlen);
struct rt_store *rt_store_get(struct rt_store *s);
void rt_store_put(struct rt_store *s);
/*
 * The targets each shared LU is served through, told to the other gateways
 * of its store (blocking): -EEXIST with err when one serves it under other
 * target names (scsi_lu_share_targets); other failures are logged.
 */
int rt_share_targets(char *err, size_t errlen);

/* A portal group as logins and sessions know it: made once, kept for the life of the process. */
struct rt_tpg {
	struct rt_tpg *next;
	const struct cfg_tpg *cfg;     /* in the running configuration (rt_lock); NULL once it left it */
	char iqn[224];
	uint16_t tag;
	struct scsi_port *alua_port;   /* its relative target port in the SCSI layer's ALUA groups */
};
/* The TPG object of (iqn, tag): found, or made (NULL: out of memory).  Admin thread or start-up. */
struct rt_tpg *rt_tpg_get(const char *iqn, uint16_t tag);
/* Found only; rt_config's rules (NULL: none, or not made yet). */
struct rt_tpg *rt_tpg_find(const char *iqn, uint16_t tag);

/* The numbers read without the lock: the running configuration's, copied at every change. */
unsigned rt_login_timeout_s(void);
unsigned rt_shutdown_timeout_s(void);

/*
 * Start: cfg (taken) becomes the running configuration, every backstore is
 * opened, the TPG objects and the ALUA groups made.  0 or -errno with err.
 */
int rt_start(struct config *cfg, char *err, size_t errlen);

/*
 * A change carried out (admin thread): next becomes the running
 * configuration with stores[i] as its backstore i (the references are the
 * running configuration's now), in one step under the lock; the TPG objects
 * point at next's groups.  What ran before comes back in *next and *stores
 * (the caller drops both; nothing points at them any more but sessions'
 * LUN maps and tasks, which the caller drains).
 */
void rt_switch(struct config **next, struct rt_store ***stores);
/* One backstore (taken, cleared) with its open store (the reference taken) appended to the running configuration. */
int rt_add_backstore(struct cfg_backstore *b, struct rt_store *s);
/* One LUN (taken, cleared) appended to TPG gi of target ti of the running configuration. */
int rt_add_lun(size_t ti, size_t gi, struct cfg_lun *l);

/* After the reactors stopped: every writable store flushed (synchronously); returns the failures. */
int rt_flush(void);
/* At exit: the stores, the TPG objects, the ALUA groups and the running configuration freed. */
void rt_free(void);

#endif
