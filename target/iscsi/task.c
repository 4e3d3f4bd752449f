/*
 * Task lifetime: the ITT table of a connection, references (the task
 * itself + PDUs in flight + Data-Out still owed), and what a task holds of
 * its session's bounded resources -- a CmdSN slot, pool buffer bytes, PDUs
 * kept while it waits to start -- given back exactly once.  Everything here
 * runs on the connection's reactor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "target/iscsi/iscsi.h"

struct iscsi_task *task_find(struct iscsi_conn *c, uint32_t itt)
{
	for (struct iscsi_task *t = c->itt_hash[itt & 255]; t; t = t->hnext)
		if (t->itt == itt)
			return t;
	return NULL;
}

struct iscsi_task *task_new(struct iscsi_conn *c, const struct pdu_scsi_cmd *h)
{
	struct iscsi_task *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->conn = c;
	t->refs = 1;
	t->itt = be32toh(h->itt);
	t->cmdsn = be32toh(h->cmdsn);
	t->immediate = pdu_immediate(h);
	t->edtl = be32toh(h->edtl);
	t->hnext = c->itt_hash[t->itt & 255];
	c->itt_hash[t->itt & 255] = t;
	t->lnext = c->tasks;
	if (c->tasks)
		c->tasks->lprev = t;
	c->tasks = t;
	c->ntasks++;
	if (t->immediate && c->sess)
		c->sess->immediate++;
	return t;
}

static void task_unhash(struct iscsi_task *t)
{
	struct iscsi_conn *c = t->conn;
	for (struct iscsi_task **pp = &c->itt_hash[t->itt & 255]; *pp; pp = &(*pp)->hnext) {
		if (*pp == t) {
			*pp = t->hnext;
			return;
		}
	}
}

void task_slot_release(struct iscsi_task *t)
{
	struct iscsi_session *s = t->conn->sess;
	if (!t->slot)
		return;
	t->slot = false;
	if (s && s->active)
		s->active--;
}

static size_t bufs_of(const struct scsi_cmd *cmd)
{
	return (cmd->buf ? cmd->buf->cap : 0) + (cmd->buf2 ? cmd->buf2->cap : 0);
}

void task_bufs_account(struct iscsi_task *t)
{
	struct iscsi_session *s = t->conn->sess;
	size_t now = bufs_of(&t->cmd);
	if (s)
		s->buf_bytes = s->buf_bytes - t->buf_bytes + now;
	t->buf_bytes = now;
}

/* Drop the buffers of a task whose data no longer matters (aborted before execution). */
static void task_bufs_drop(struct iscsi_task *t)
{
	scsi_cmd_release(&t->cmd);
	task_bufs_account(t);
	if (t->conn->sess)
		session_bufs_freed(t->conn->sess);
}

int task_stash(struct iscsi_task *t, const uint8_t *bhs, const uint8_t *data, uint32_t len, bool bounded)
{
	struct iscsi_session *s = t->conn->sess;
	/* A command's own PDU is never refused: what it carries is bounded by the window. */
	if (bounded && s && s->stash_bytes + len > s->buf_budget)
		return -ENOBUFS;
	struct stash *st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	memcpy(st->bhs, bhs, PDU_BHS_LEN);
	if (len) {
		st->data = malloc(len);
		if (!st->data) {
			free(st);
			return -ENOMEM;
		}
		memcpy(st->data, data, len);
		st->len = len;
	}
	struct stash **pp = &t->stash;
	while (*pp)
		pp = &(*pp)->next;
	*pp = st;
	t->stash_bytes += len;
	if (s)
		s->stash_bytes += len;
	return 0;
}

struct stash *task_unstash(struct iscsi_task *t)
{
	struct stash *st = t->stash;
	if (st)
		t->stash = st->next;
	return st;
}

void task_stash_free(struct iscsi_task *t, struct stash *st)
{
	struct iscsi_session *s = t->conn->sess;
	t->stash_bytes -= st->len;
	if (s)
		s->stash_bytes -= st->len;
	free(st->data);
	free(st);
}

/*
 * An answered or aborted task whose Data-Out is still owed keeps its ITT
 * (and a reference) until that data is in or a new command reuses the ITT.
 * No buffer is kept for it: the data is read and dropped.  A connection
 * keeps at most QueueDepth such tasks; past that the oldest is forgotten
 * and its late data gets a Reject like any unknown task's.
 */
void task_absorb(struct iscsi_task *t)
{
	struct iscsi_conn *c = t->conn;
	if (t->absorbing)
		return;
	uint32_t cap = c->sess ? c->sess->queue_depth : 1;
	if (c->nabsorbing >= cap) {
		struct iscsi_task *old = NULL;
		for (struct iscsi_task *o = c->tasks; o; o = o->lnext)
			if (o->absorbing)
				old = o; /* the list is newest first: the last one is the oldest */
		if (old)
			task_absorb_end(old);
	}
	t->absorbing = true;
	t->refs++;
	c->nabsorbing++;
	task_bufs_drop(t);
}

void task_absorb_end(struct iscsi_task *t)
{
	if (!t->absorbing)
		return;
	t->absorbing = false;
	t->conn->nabsorbing--;
	task_put(t);
}

/* Data-Out the initiator still has to send: unsolicited data, or the rest of an R2T's sequence. */
bool task_data_owed(const struct iscsi_task *t)
{
	/* iSER moves it by RDMA READ: the initiator sends no Data-Out. */
	if (t->conn->xp->ops->rdma)
		return false;
	return !t->unsol_done || (t->r2t_outstanding && t->seq_got < t->seq_len);
}

void task_put(struct iscsi_task *t)
{
	if (--t->refs > 0)
		return;
	struct iscsi_conn *c = t->conn;
	struct iscsi_session *s = c->sess;
	task_unhash(t);
	if (t->lprev)
		t->lprev->lnext = t->lnext;
	else
		c->tasks = t->lnext;
	if (t->lnext)
		t->lnext->lprev = t->lprev;
	while (t->stash)
		task_stash_free(t, task_unstash(t));
	task_slot_release(t);
	if (t->immediate && s && s->immediate)
		s->immediate--;
	scsi_cmd_release(&t->cmd);
	task_bufs_account(t);
	stats_cmd_freed(t);
	free(t);
	c->ntasks--;
	if (s)
		session_bufs_freed(s);
	if (c->task_gone)
		c->task_gone(c);
}
