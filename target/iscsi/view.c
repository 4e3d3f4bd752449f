/*
 * What the control plane (target/control/fanout.c) asks of a connection,
 * on the connection's reactor: a view of it and its session, its LUN map
 * taken again after a change, the tasks that still use an LU.  Here, so
 * that no struct of this layer is read outside it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/reactor.h"
#include "target/iscsi/iscsi.h"

void conn_view(const struct iscsi_conn *c, struct iscsi_conn_view *v)
{
	const struct iscsi_session *s = c->sess;
	memset(v, 0, sizeof(*v));
	v->full = c->state == CONN_FULL;
	v->closing = c->state == CONN_CLOSING;
	v->cid = c->cid;
	v->transport = c->xp->ops->name;
	v->rdma = c->xp->ops->rdma;
	v->shared_rx = c->xp->shared_rx;
	v->portal = c->portal ? c->portal->name : "";
	v->local = c->xp->local;
	v->peer = c->xp->peer;
	v->reactor = reactor_index(c->r);
	v->tasks = c->ntasks;
	v->params = &c->params;
	v->initiator = "";
	if (!s)
		return;
	v->session = true;
	v->gone = s->gone;
	v->discovery = s->discovery;
	v->tsih = s->tsih;
	memcpy(v->isid, s->isid, sizeof(v->isid));
	v->initiator = s->initiator;
	v->tpg = s->tpg;
	v->nluns = s->nluns;
	v->queue_depth = s->queue_depth;
	v->active = s->active;
	v->exp_cmdsn = s->exp_cmdsn;
	v->max_cmdsn = s->max_cmdsn;
	v->buf_bytes = s->buf_bytes;
}

void conn_view_lun(const struct iscsi_conn *c, size_t i, uint64_t *lun, const struct scsi_lu **lu, bool *read_only)
{
	const struct iscsi_lun *l = &c->sess->luns[i];
	*lun = l->lun;
	*lu = l->lu;
	*read_only = l->read_only;
}

static bool same_map(const struct iscsi_session *s, const struct iscsi_lun *luns, size_t n)
{
	if (s->nluns != n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s->luns[i].lun != luns[i].lun || s->luns[i].lu != luns[i].lu ||
		    s->luns[i].read_only != luns[i].read_only)
			return false;
	return true;
}

static bool map_has_lu(const struct iscsi_lun *luns, size_t n, const struct scsi_lu *lu)
{
	for (size_t i = 0; i < n; i++)
		if (luns[i].lu == lu)
			return true;
	return false;
}

int conn_refresh_map(struct iscsi_conn *c)
{
	struct iscsi_session *s = c->sess;
	if (c->state != CONN_FULL || !s || s->discovery || s->gone)
		return 0;
	struct iscsi_lun *luns;
	uint64_t *ids;
	size_t n;
	pthread_rwlock_rdlock(&rt_lock);
	int rc = session_lun_map(s, &luns, &ids, &n);
	pthread_rwlock_unlock(&rt_lock);
	char who[160];
	log_escape(s->initiator, who, sizeof(who));
	if (rc == -EACCES) {
		log_info("%s: session TSIH %u of '%s' closed: the changed configuration no longer admits it", c->xp->peer,
			 s->tsih, who);
		conn_close(c);
		return -EACCES;
	}
	if (rc)
		return rc; /* out of memory: the old map stays, and so does the LU it names (apply.c waits for it) */
	if (same_map(s, luns, n)) {
		free(luns);
		free(ids);
		return 0;
	}
	/* LUs it can no longer reach: as if its nexus ended there (reservations, unit attentions go). */
	for (size_t i = 0; i < s->nluns; i++)
		if (!map_has_lu(luns, n, s->luns[i].lu))
			session_nexus_lost(c, s->luns[i].lu);
	session_set_lun_map(s, luns, ids, n);
	for (size_t i = 0; i < n; i++)
		scsi_lu_luns_changed(luns[i].lu, &s->nexus);
	log_info("%s: session TSIH %u of '%s': LUN map changed (%zu LUN%s)", c->xp->peer, s->tsih, who, n,
		 n == 1 ? "" : "s");
	return 1;
}

int conn_lu_users(const struct iscsi_conn *c, struct scsi_lu *const *lus, size_t nlus)
{
	int n = 0;
	for (const struct iscsi_task *t = c->tasks; t; t = t->lnext)
		for (size_t i = 0; i < nlus; i++)
			n += scsi_cmd_uses_lu(&t->cmd, lus[i]);
	for (size_t i = 0; c->sess && i < c->sess->nluns; i++)
		for (size_t j = 0; j < nlus; j++)
			n += c->sess->luns[i].lu == lus[j]; /* a map not refreshed (out of memory) */
	return n;
}
