/*
 * ALUA's SCSI commands (SPC-4 5.16): REPORT TARGET PORT GROUPS, SET TARGET
 * PORT GROUPS, the commands each state refuses (the OPF_*_OK flags of the
 * opcode table say which run) and the unit attention that tells every
 * nexus about a change, read from the model (model.c) as alua.h says.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "target/scsi/alua/alua.h"
#include "target/scsi/alua/alua_int.h"
#include "target/scsi/scsi_int.h"

/* A SET TARGET PORT GROUPS parameter list: the header and one descriptor per group at most. */
#define STPG_MAX_LEN (4u + 4u * 256u)
_Static_assert(STPG_MAX_LEN <= SCSI_PR_OUT_MAX, "a shared STPG's list fits what shared.c carries");

/* The I/O path: what the nexus's port may do, read without a lock. */

static uint32_t nexus_word(const struct scsi_nexus *nx)
{
	return nx && nx->port ? __atomic_load_n(&nx->port->word, __ATOMIC_ACQUIRE) : 0;
}

/* A port no group lists (no ALUA object: unit tests) is active/optimized in group 1. */
uint16_t alua_group_id(const struct scsi_nexus *nx)
{
	uint32_t w = nexus_word(nx);
	return w & PORT_IN_GROUP ? (uint16_t)(w >> 8) : 1;
}

uint8_t alua_tpgs(const struct scsi_nexus *nx)
{
	return nx && nx->port ? __atomic_load_n(&nx->port->alua->modes, __ATOMIC_RELAXED) & 3 : SCSI_ALUA_IMPLICIT;
}

/* NOT READY's ASC for the nexus's state, 0 when active. */
uint16_t alua_not_ready_asc(const struct scsi_nexus *nx)
{
	uint32_t w = nexus_word(nx);
	if (!(w & PORT_IN_GROUP))
		return 0;
	switch (w & 0xff) {
	case ALUA_STANDBY: return ASC_LU_NOT_ACCESSIBLE_STANDBY;
	case ALUA_UNAVAILABLE: return ASC_LU_NOT_ACCESSIBLE_UNAVAILABLE;
	case ALUA_TRANSITIONING: return ASC_LU_NOT_ACCESSIBLE_TRANSITION;
	default: return 0;
	}
}

/* SPC-4 5.16.2.4: in standby, unavailable and transitioning only the commands flagged for it run. */
bool alua_check(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	uint16_t asc = alua_not_ready_asc(cmd->nexus);
	uint16_t ok = asc == ASC_LU_NOT_ACCESSIBLE_STANDBY	? OPF_STANDBY_OK
		      : asc == ASC_LU_NOT_ACCESSIBLE_UNAVAILABLE ? OPF_UNAVAILABLE_OK
								 : OPF_TRANSITIONING_OK;
	if (!asc || (op->flags & ok))
		return true;
	sense_set(cmd, SK_NOT_READY, asc);
	return false;
}

/* Under lu->mu: a nexus that has not seen the target's latest state change gets the unit attention. */
void alua_ua_sync(struct lu_nexus *n, const struct scsi_nexus *nx)
{
	if (!n || !nx || !nx->port)
		return;
	uint32_t gen = scsi_alua_gen(nx->port);
	if (!n->alua_seen) {
		n->alua_seen = true;
		__atomic_store_n(&n->alua_gen, nx->alua_gen, __ATOMIC_RELEASE);   /* what it knew at login */
	}
	if (n->alua_gen != gen) {
		/* The unit attention first: a reader without the mutex that sees the new gen sees it queued. */
		lu_ua_add(n, ASC_ALUA_STATE_CHANGED);
		__atomic_store_n(&n->alua_gen, gen, __ATOMIC_RELEASE);
	}
}

/* ------------------------------------------------------------------------ */
/* REPORT TARGET PORT GROUPS (SPC-4 6.27). */

/* Supported states (T_SUP, U_SUP, S_SUP, AN_SUP, AO_SUP): what a group can be put in. */
#define ALUA_SUP 0x8f

static void rtpg_build(struct din *d, const struct scsi_alua *a, const struct scsi_nexus *nx, bool ext)
{
	din_be32(d, 0);
	if (ext) {
		din_u8(d, 0x10);   /* FORMAT TYPE 001b */
		din_u8(d, a ? a->ttime : 0);
		din_zero(d, 2);
	}
	if (!a) {
		/* No ALUA object (unit tests): the nexus's own port, active/optimized in group 1. */
		din_u8(d, ALUA_ACTIVE_OPTIMIZED);
		din_u8(d, ALUA_SUP);
		din_be16(d, 1);
		din_zero(d, 3);
		din_u8(d, 1);
		din_zero(d, 2);
		din_be16(d, nx ? nx->rel_port_id : 1);
	}
	for (size_t i = 0; a && i < a->ngroups; i++) {
		const struct alua_grp *g = &a->groups[i];
		din_u8(d, (uint8_t)((g->pref ? 0x80 : 0) | g->state));
		din_u8(d, ALUA_SUP);
		din_be16(d, g->id);
		din_u8(d, 0);
		din_u8(d, g->status);
		din_u8(d, 0);
		din_u8(d, (uint8_t)g->nports);
		for (size_t j = 0; j < g->nports; j++) {
			din_zero(d, 2);
			din_be16(d, g->ports[j]);
		}
	}
	din_set_be32(d, 0, din_pos(d) - 4);
}

void alua_report_tpgs(struct scsi_cmd *cmd)
{
	uint8_t fmt = cmd->cdb[1] >> 5;
	uint32_t alloc = get_be32(cmd->cdb + 6);
	struct scsi_alua *a = cmd->nexus && cmd->nexus->port ? cmd->nexus->port->alua : NULL;

	if (fmt > 1) {
		sense_invalid_cdb(cmd, 1, 7);
		scsi_cmd_complete(cmd);
		return;
	}
	/* Built once under the lock, then sent: a change meanwhile cannot make the two passes differ. */
	if (a)
		pthread_mutex_lock(&a->mu);
	struct din m = din_over(NULL, 0);
	rtpg_build(&m, a, cmd->nexus, fmt == 1);
	uint8_t *data = malloc(din_pos(&m));
	if (data) {
		struct din d = din_over(data, din_pos(&m));
		rtpg_build(&d, a, cmd->nexus, fmt == 1);
	}
	if (a)
		pthread_mutex_unlock(&a->mu);
	if (data)
		scsi_cmd_din(cmd, data, din_pos(&m), alloc);
	else
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
	free(data);
	scsi_cmd_complete(cmd);
}

/* ------------------------------------------------------------------------ */
/* SET TARGET PORT GROUPS (SPC-4 6.42). */

bool alua_prep_stpg(struct scsi_cmd *cmd)
{
	uint32_t plen = get_be32(cmd->cdb + 6);

	/* With alua.mode "implicit" the opcode table (OPF_EXPLICIT_ALUA) refuses it as unsupported. */
	if (plen > STPG_MAX_LEN || (plen && (plen < 4 || (plen - 4) % 4))) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		return false;
	}
	return scsi_prep_param_list(cmd, plen);
}

/* Check every descriptor before changing anything: the list is carried out whole or not at all. */
bool alua_stpg_check(struct scsi_cmd *cmd, struct scsi_alua *a, const uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		const uint8_t *e = p + 4 + 4 * i;
		uint8_t st = e[0] & 0x0f;
		uint16_t id = get_be16(e + 2);
		if (st > ALUA_UNAVAILABLE) {
			/* Transitioning, offline and LBA dependent are not for an initiator to ask. */
			sense_invalid_param(cmd, (uint16_t)(4 + 4 * i), 3);
			return false;
		}
		if (!alua_find_grp(a->groups, a->ngroups, id)) {
			sense_invalid_param(cmd, (uint16_t)(4 + 4 * i + 2), 7);
			return false;
		}
		for (uint32_t j = 0; j < i; j++)
			if (get_be16(p + 4 + 4 * j + 2) == id) {
				sense_invalid_param(cmd, (uint16_t)(4 + 4 * i + 2), 7);
				return false;
			}
	}
	return true;
}

void alua_set_tpgs(struct scsi_cmd *cmd)
{
	uint32_t plen = get_be32(cmd->cdb + 6);
	struct scsi_alua *a = cmd->nexus->port ? cmd->nexus->port->alua : NULL;
	const uint8_t *p = cmd->buf->data;
	int64_t resid = cmd->resid;

	if (!plen)
		goto out;   /* SPC-4: no data, no change */
	if (cmd->dout_len < plen) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		goto out;
	}
	if (!a) {
		sense_invalid_param(cmd, 4 + 2, 7);
		goto out;
	}
	if (__atomic_load_n(&a->share, __ATOMIC_ACQUIRE)) {
		alua_share_stpg(a, cmd); /* kept with the other gateways: answered once they have it */
		return;
	}
	uint32_t n = (plen - 4) / 4, gen = 0;
	pthread_mutex_lock(&a->mu);
	if (alua_stpg_check(cmd, a, p, n)) {
		bool changed = false;
		for (uint32_t i = 0; i < n; i++) {
			struct alua_grp *g = alua_find_grp(a->groups, a->ngroups, get_be16(p + 4 + 4 * i + 2));
			uint8_t st = p[4 + 4 * i] & 0x0f;
			changed |= g->state != st;
			g->state = st;
			g->status = ALUA_STATUS_STPG;
		}
		if (changed) {
			alua_ports_update(a);
			gen = __atomic_add_fetch(&a->gen, 1, __ATOMIC_RELEASE);
		}
	}
	pthread_mutex_unlock(&a->mu);
	if (gen) {
		alua_changed();
		/* SPC-4 5.16.2.6: every I_T nexus hears of it but the one that asked (for this LU). */
		pthread_mutex_lock(&cmd->lu->mu);
		struct lu_nexus *ln = lu_nexus_get(cmd->lu, cmd->nexus);
		if (ln && ln->alua_gen + 1 == gen)
			__atomic_store_n(&ln->alua_gen, gen, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&cmd->lu->mu);
	}
out:
	if (cmd->status == SCSI_GOOD)
		cmd->resid = resid;
	scsi_cmd_complete(cmd);
}
