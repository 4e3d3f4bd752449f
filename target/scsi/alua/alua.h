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
 */
#ifndef SCSI_ALUA_H
#define SCSI_ALUA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The access state codes (enum scsi_alua_state) and SCSI_ALUA_IMPLICIT/EXPLICIT. */
#include "common/scsi_proto.h"

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
/* At exit. */
void scsi_alua_free_all(void);

/*
 * The target's states kept with every gateway serving it (alua_share.c,
 * docs/cluster.md), in the shared object "alua" of store bs; local: the
 * relative ports this process serves.  Blocking: the admin thread or
 * start-up.  0, or -errno with err (-EEXIST: another live gateway serves
 * one of these ports).  Shared already through bs: nothing to do; through
 * another store: moved.
 */
struct backstore;
struct json_object;
int scsi_alua_share(struct scsi_alua *a, struct backstore *bs, const uint16_t *local, size_t nlocal, char *err,
		    size_t errlen);
void scsi_alua_unshare(struct scsi_alua *a);
/* The store a is shared through, or NULL. */
struct backstore *scsi_alua_shared_on(const struct scsi_alua *a);
/* The admin changed these groups' states: stored and told to every gateway (waited for). */
int scsi_alua_share_set(struct scsi_alua *a, const struct scsi_alua_group *groups, size_t n, char *err, size_t errlen);
/* For the operator: the shared object and its gateways (NULL: not shared). */
struct json_object *scsi_alua_share_json(struct scsi_alua *a);

#endif
