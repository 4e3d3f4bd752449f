/*
 * The logical unit every room of target/scsi works on: its I_T nexus
 * entries and their unit attention queues, a command's buffers and its
 * completion, the count of writes in flight that a SANITIZE waits for,
 * and what its identity and mode pages say.  Its life (create, events,
 * destroy) is ../lu_life.c, which attaches what keeps state on it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/reactor.h"
#include "target/scsi/lu/lu.h"

/* Unit tests run without reactors: they point this at a pool of their own. */
struct bufpool *scsi_test_pool;

struct buf *scsi_buf_get(struct scsi_cmd *cmd, size_t len)
{
	struct bufpool *p = cmd->reactor ? reactor_bufpool(cmd->reactor) : scsi_test_pool;

	return p ? bufpool_get(p, len) : NULL;
}

void scsi_cmd_complete(struct scsi_cmd *cmd)
{
	if (cmd->san_writing) {
		cmd->san_writing = false;
		lu_write_end(cmd->lu, cmd->reactor);
	}
	cmd->done(cmd);
}

/* The writes a SANITIZE waits for (cmd/sanitize.c), counted where every command ends. */

static uint32_t *writer_count(struct scsi_lu *lu, const struct reactor *r)
{
	int i = r ? reactor_index(r) : 0;
	return &lu->writers[(unsigned)(i < 0 ? 0 : i) % SAN_WRITER_STRIPES].n;
}

uint8_t lu_write_begin(struct scsi_lu *lu, const struct reactor *r)
{
	uint32_t *n = writer_count(lu, r);
	/*
	 * The count goes up before the state is read, and sanitize_exec sets
	 * the state before the worker reads the counts, all sequentially
	 * consistent: either this write sees the SANITIZE and stays out, or the
	 * SANITIZE sees this write and waits for it.  No lock on the I/O path.
	 */
	__atomic_fetch_add(n, 1, __ATOMIC_SEQ_CST);
	uint8_t st = __atomic_load_n(&lu->sanitize, __ATOMIC_SEQ_CST);
	if (st != SAN_STATE_NONE)
		__atomic_fetch_sub(n, 1, __ATOMIC_RELEASE);
	return st;
}

void lu_write_end(struct scsi_lu *lu, const struct reactor *r)
{
	/* Release: what the write stored (a RAM LU's bytes) is seen by the worker that reads the count. */
	__atomic_fetch_sub(writer_count(lu, r), 1, __ATOMIC_RELEASE);
}

uint32_t lu_writers(struct scsi_lu *lu)
{
	uint32_t sum = 0;

	for (unsigned i = 0; i < SAN_WRITER_STRIPES; i++)
		sum += __atomic_load_n(&lu->writers[i].n, __ATOMIC_SEQ_CST);
	return sum;   /* wraps back: a write may end on another stripe than it began on */
}

void lu_sanitize_refuse(struct scsi_cmd *cmd, uint8_t state)
{
	if (state == SAN_STATE_RUNNING) {
		uint8_t sks[3] = { 0x80 };

		put_be16(sks + 1, __atomic_load_n(&cmd->lu->san_progress, __ATOMIC_RELAXED));
		cmd->status = SCSI_CHECK_CONDITION;
		cmd->din_len = 0;
		cmd->sense_len = sense_build(cmd->sense, sense_desc_format(cmd), SK_NOT_READY,
					     ASC_SANITIZE_IN_PROGRESS, false, 0, sks);
	} else {
		sense_set(cmd, SK_MEDIUM_ERROR, ASC_SANITIZE_FAILED);
	}
}

uint64_t lu_nblocks(const struct scsi_lu *lu)
{
	return backstore_size(lu->bs) >> lu->block_shift;
}

bool lu_mapping_ro(const struct scsi_cmd *cmd)
{
	return cmd->read_only || backstore_readonly(cmd->lu->bs);
}

bool lu_write_protected(const struct scsi_cmd *cmd)
{
	return lu_mapping_ro(cmd) || lu_flag(&cmd->lu->swp);
}

static void ua_add(struct lu_nexus *n, uint16_t asc)
{
	uint32_t i;

	for (i = 0; i < n->n_ua; i++)
		if (n->ua[i] == asc)
			return;
	if (n->n_ua < SCSI_UA_MAX) {
		n->ua[n->n_ua] = asc;
		__atomic_store_n(&n->n_ua, n->n_ua + 1, __ATOMIC_RELEASE);
	}
}

void lu_ua_add(struct lu_nexus *n, uint16_t asc)
{
	ua_add(n, asc);
}

bool lu_cmd_aborted(struct scsi_lu *lu, const struct scsi_cmd *cmd)
{
	const struct lu_nexus *n;

	if (!cmd->nexus)
		return false;
	for (n = lu->nexuses; n; n = n->next)
		if (n->id == cmd->nexus->id)
			return (uint16_t)(cmd->flags >> CMD_GEN_SHIFT) != n->abort_gen;
	return false;
}

void lu_naa(const struct scsi_lu *lu, uint8_t id[16])
{
	id[0] = 0x60 | 0x0a;
	id[1] = 0x00;
	id[2] = 0x00;
	id[3] = (uint8_t)((lu->naa_hi >> 32) & 0x0f);
	put_be32(id + 4, (uint32_t)lu->naa_hi);
	put_be64(id + 8, lu->naa_lo);
}

bool scsi_prep_param_list(struct scsi_cmd *cmd, uint32_t plen)
{
	cmd->dout_len = cmd->dir_write ? MIN(plen, cmd->edtl) : 0;
	cmd->resid = (int64_t)cmd->edtl - plen;
	cmd->buf = scsi_buf_get(cmd, cmd->dout_len ? cmd->dout_len : 1);
	if (!cmd->buf) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		return false;
	}
	return true;
}

struct backstore *scsi_lu_backstore(const struct scsi_lu *lu)
{
	return lu->bs;
}

struct lu_nexus *lu_nexus_get(struct scsi_lu *lu, const struct scsi_nexus *nx)
{
	struct lu_nexus *n;

	if (!nx)
		return NULL;
	for (n = lu->nexuses; n; n = n->next)
		if (n->id == nx->id)
			return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->id = nx->id;
	snprintf(n->initiator_name, sizeof(n->initiator_name), "%s", nx->initiator_name);
	snprintf(n->initiator_port, sizeof(n->initiator_port), "%s", nx->initiator_port);
	n->next = lu->nexuses;
	lu->nexuses = n;
	return n;
}

void lu_ua_all(struct scsi_lu *lu, const struct scsi_nexus *skip, uint16_t asc)
{
	struct lu_nexus *n;

	for (n = lu->nexuses; n; n = n->next)
		if (!skip || n->id != skip->id)
			ua_add(n, asc);
}

void lu_everyone(struct scsi_lu *lu, uint16_t asc, bool abort)
{
	for (struct lu_nexus *n = lu->nexuses; n; n = n->next) {
		ua_add(n, asc);
		if (abort)
			__atomic_store_n(&n->abort_gen, (uint16_t)(n->abort_gen + 1), __ATOMIC_RELEASE);
	}
	if (abort)
		__atomic_add_fetch(&lu->pr_aborts, 1, __ATOMIC_RELEASE);
}

bool lu_ua_pop(struct lu_nexus *n, uint16_t *asc)
{
	if (!n || !n->n_ua)
		return false;
	*asc = n->ua[0];
	memmove(n->ua, n->ua + 1, (n->n_ua - 1) * sizeof(n->ua[0]));
	__atomic_store_n(&n->n_ua, n->n_ua - 1, __ATOMIC_RELEASE);
	return true;
}

void scsi_lu_luns_changed(struct scsi_lu *lu, const struct scsi_nexus *nx)
{
	pthread_mutex_lock(&lu->mu);
	struct lu_nexus *n = lu_nexus_get(lu, nx);
	if (n)
		ua_add(n, ASC_REPORTED_LUNS_CHANGED);
	pthread_mutex_unlock(&lu->mu);
}

void scsi_lu_set_write_cache(struct scsi_lu *lu, bool on)
{
	pthread_mutex_lock(&lu->mu);
	if (lu_flag(&lu->wce) != on) {
		lu_flag_set(&lu->wce, on);
		lu_ua_all(lu, NULL, ASC_MODE_PARAMS_CHANGED);
	}
	pthread_mutex_unlock(&lu->mu);
}

void scsi_lu_capacity_changed(struct scsi_lu *lu)
{
	pthread_mutex_lock(&lu->mu);
	lu_ua_all(lu, NULL, ASC_CAPACITY_CHANGED);
	pthread_mutex_unlock(&lu->mu);
}
