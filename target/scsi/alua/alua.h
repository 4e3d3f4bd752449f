/*
 * ALUA, asymmetric logical unit access (SPC-4 5.16): the target port groups
 * of one SCSI target (an iSCSI target name) and their access states, as the
 * SCSI layer serves them (REPORT/SET TARGET PORT GROUPS, INQUIRY TPGS, the
 * designators of VPD page 83h, commands refused per state).
 *
 * One struct scsi_alua per target name and one struct scsi_port per
 * relative target port live for the whole process, like the iSCSI layer's
 * portal group objects, so a session's nexus may point at its port for
 * ever.  A port's group and state are one atomic word that the I/O path
 * reads without a lock; the group table (for REPORT TARGET PORT GROUPS)
 * and every change are under the target's mutex.  Each state change bumps
 * the target's generation: a nexus that saw an older one gets ASYMMETRIC
 * ACCESS STATE CHANGED with its next command to each LU.
 *
 * The one model of a target's ALUA state, in this room (target/scsi/alua/),
 * changed by events only: a configuration applied or a LUN added
 * (configure.c: prepare and commit, then scsi_alua_share_config: the store
 * its states are kept with, alua.set's states told to the other gateways,
 * carried out by share.c), SET TARGET PORT GROUPS (commands.c), another
 * gateway's update or a failover (share.c).  The running configuration
 * keeps a copy of the states for `save` and the admin methods, taken when
 * scsi_alua_changes moves.
 */
#ifndef SCSI_ALUA_H
#define SCSI_ALUA_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The access state codes (enum scsi_alua_state) and SCSI_ALUA_IMPLICIT/EXPLICIT. */
#include "common/proto/scsi_proto.h"

struct scsi_alua;
struct scsi_port;

/* REPORT TARGET PORT GROUPS status codes: why the state is what it is. */
enum { ALUA_STATUS_NONE = 0, ALUA_STATUS_STPG = 1, ALUA_STATUS_IMPLICIT = 2 };

struct scsi_alua_group {
	uint16_t id;
	uint8_t state;
	bool preferred;
	bool keep_state;          /* scsi_alua_install: a group that exists keeps its running state */
	uint8_t status;           /* scsi_alua_group_state: ALUA_STATUS_* */
	const uint16_t *ports;    /* relative target port ids (local or not) */
	size_t nports;
};

/* The target's object, found or made (NULL: out of memory). */
struct scsi_alua *scsi_alua_get(const char *target_name);
/* Its port rel_port_id, found or made (NULL: out of memory). */
struct scsi_port *scsi_alua_port(struct scsi_alua *a, uint16_t rel_port_id);
/* The generation a nexus starts from (at login). */
uint32_t scsi_alua_gen(const struct scsi_port *p);
/* REPORT TARGET PORT GROUPS' TARGET PORT COUNT is one byte. */
#define SCSI_ALUA_MAX_PORTS 255
/*
 * Replace the target's groups and modes; states that change are implicit
 * transitions.  In two steps where a change must not fail half-way: the
 * table is made first (NULL with *err -ENOMEM, or -EINVAL for a group over
 * SCSI_ALUA_MAX_PORTS), then installed, which cannot fail and takes it.
 */
struct scsi_alua_table;
struct scsi_alua_table *scsi_alua_table_new(const struct scsi_alua_group *groups, size_t n, int *err);
void scsi_alua_table_free(struct scsi_alua_table *t);
void scsi_alua_install(struct scsi_alua *a, uint8_t modes, uint8_t transition_time, struct scsi_alua_table *t);
/* Both steps at once: 0, -ENOMEM or -EINVAL. */
int scsi_alua_configure(struct scsi_alua *a, uint8_t modes, uint8_t transition_time,
			const struct scsi_alua_group *groups, size_t n);
/* The running state and status of group id: 0, or -ENOENT. */
int scsi_alua_group_state(struct scsi_alua *a, uint16_t id, uint8_t *state, uint8_t *status);
/*
 * How many times a running state changed other than by the configuration
 * (SET TARGET PORT GROUPS, another gateway's update, a failover): the
 * running configuration's copy of the states (scsi_alua_states_into) is
 * stale when this moved since it was made.
 */
uint32_t scsi_alua_changes(void);
/* At exit. */
void scsi_alua_free_all(void);

/*
 * configure.c: the configuration's ALUA groups made running, in two steps so
 * that a change never half happens: prepare (what can fail: 0, or
 * -ENOMEM/-EINVAL with err written) before the configuration is switched,
 * commit (cannot fail; takes the plan) after.  States equal in old and n
 * keep what runs (SET TARGET PORT GROUPS may have set them).
 */
struct config;
struct scsi_alua_plan;
int scsi_alua_prepare(const struct config *old, const struct config *n, struct scsi_alua_plan **out, char *err,
		      size_t errlen);
void scsi_alua_commit(struct scsi_alua_plan *p);
void scsi_alua_plan_free(struct scsi_alua_plan *p);
/*
 * The running states into c where they differ, each write under lock (c's
 * write lock): c's one writer, when scsi_alua_changes moved.
 */
void scsi_alua_states_into(struct config *c, pthread_rwlock_t *lock);
/* Why group id of target iqn is in its state: "none", "set_by_initiator", "set_by_admin". */
const char *scsi_alua_status_name(const char *iqn, uint16_t id);
/*
 * After start, a change or lun.add (old: the configuration before, NULL
 * at start; c: the one now, its store i at store_at(i)): the ALUA states
 * of each target with a shared store kept with every gateway serving it,
 * states the admin changed told to them, targets without one (or gone)
 * kept alone again.  -EEXIST with err when another live gateway serves one of a
 * target's relative ports (a configuration the gateways disagree on);
 * other failures are logged and leave that target's states its own.
 */
struct backstore;
typedef struct backstore *scsi_alua_store_fn(size_t backstore_index);
int scsi_alua_share_config(const struct config *old, const struct config *c, scsi_alua_store_fn *store_at, char *err,
			   size_t errlen);
/* Before the stores close: no target of c keeps its states with the others any more. */
void scsi_alua_unshare_config(const struct config *c);

/* share.c (docs/cluster.md): for the operator, the shared object and its gateways (NULL: not shared). */
struct json_object;
struct json_object *scsi_alua_share_json(struct scsi_alua *a);

#endif
