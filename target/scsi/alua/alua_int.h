/* Private to target/scsi/alua/: the target's groups and ports as they run. */
#ifndef SCSI_ALUA_INT_H
#define SCSI_ALUA_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/scsi/alua/alua.h"

struct backstore;
struct shared;

/* scsi_port.word: state (bits 0-7), group id (8-23), PORT_IN_GROUP when a group lists the port. */
#define PORT_IN_GROUP (1u << 24)

struct alua_grp {
	uint16_t id;
	uint8_t state, status;
	bool pref;
	bool keep;                   /* scsi_alua_install: keep the running state of the group of this id */
	uint16_t nports;
	uint16_t *ports;
};

struct scsi_alua {
	struct scsi_alua *next;
	pthread_mutex_t mu;
	char name[224];
	uint8_t modes, ttime;        /* written under mu, read atomically */
	uint32_t gen;                /* written under mu, read atomically */
	struct alua_grp *groups;     /* (mu) */
	size_t ngroups;              /* (mu) */
	struct scsi_port *ports;     /* (mu) the ports made so far; never freed before exit */
	/* Its states kept with the other gateways serving the target (share.c), or NULL. */
	struct shared *share;
	struct backstore *share_bs;  /* the store it is shared through */
	uint16_t local[256];         /* the relative ports this process serves, for the failover */
	size_t nlocal;
};

struct scsi_port {
	struct scsi_port *next;
	struct scsi_alua *alua;
	uint16_t rel_port_id;
	uint32_t word;               /* written under alua->mu, read atomically */
};

/* Under a->mu: every port's word from the table. */
void alua_ports_update(struct scsi_alua *a);
/* The group id of g (n of them), or NULL. */
struct alua_grp *alua_find_grp(struct alua_grp *g, size_t n, uint16_t id);
/* Is the list valid for SET TARGET PORT GROUPS (under a->mu)?  False: cmd's sense set. */
struct scsi_cmd;
bool alua_stpg_check(struct scsi_cmd *cmd, struct scsi_alua *a, const uint8_t *p, uint32_t n);
/* share.c: SET TARGET PORT GROUPS of a shared target, answered once every gateway has it. */
void alua_share_stpg(struct scsi_alua *a, struct scsi_cmd *cmd);
/* What a target's configuration asks of its sharing (configure.c), carried out by share.c. */
struct alua_share_want {
	struct backstore *bs;                  /* the store its states are kept with; NULL: none, kept alone */
	uint16_t local[256];                   /* the relative ports this process serves */
	size_t nlocal;
	struct scsi_alua_group changed[256];   /* the states the admin changed (alua.set) */
	size_t nchanged;
};
/*
 * share.c: target iqn shared as w asks (NULL: kept alone), blocking (the
 * admin thread or start-up); 0, or -errno with err (-EEXIST: another live
 * gateway serves one of its ports).  A failure to tell the others of
 * changed states is logged: the change is made here.
 */
int alua_share_target(const char *iqn, const struct alua_share_want *w, char *err, size_t errlen);
/* share.c: a's states kept alone (again). */
void alua_unshare(struct scsi_alua *a);
/* model.c: a running state changed other than by the configuration (scsi_alua_changes). */
void alua_changed(void);

#endif
