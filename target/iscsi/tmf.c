/*
 * Task management (RFC 7143 sec. 11.5): ABORT TASK, ABORT TASK SET, CLEAR
 * TASK SET, LOGICAL UNIT RESET, TARGET WARM/COLD RESET.  Aborted tasks end
 * silently; a TMF response goes out once every task it aborted has left the
 * SCSI layer, so the initiator may reuse their ITTs at once.  Answers wait
 * in order, at most MaxImmediateCommands of them.  Target resets reach
 * beyond the caller's tasks, so only initiators the portal group allows
 * (allow_target_reset on the ACL, demo_target_reset in demo mode) may ask;
 * others get "function authorization failed" (sec. 11.6.1).  On an LU
 * shared with other gateways, a reset's unit attentions and a released
 * reservation reach them after the event here: the answer (and a Logout's)
 * also waits until they have.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/proto/serial.h"
#include "target/iscsi/iscsi.h"

struct tmf_pending {
	struct tmf_pending *next;
	uint8_t bhs[PDU_BHS_LEN];
};

static bool task_in_tmf_scope(const struct iscsi_task *t, int fn, uint64_t lun)
{
	if (fn == PDU_TMF_TARGET_WARM_RESET || fn == PDU_TMF_TARGET_COLD_RESET)
		return true;
	return t->cmd.lun == lun;
}

/*
 * Abort: tasks waiting for their turn or for data end now; running ones when
 * the SCSI layer returns.  Data-Out the initiator still owes (the rest of an
 * R2T's sequence, unsolicited data) is taken quietly afterwards: RFC 7143
 * sec. 11.6.2 has the initiator go on answering R2Ts after the TMF, while
 * Linux's default FastAbort sends nothing more.  So the answer does not wait
 * for that data (it could wait for ever), and the data gets no Reject; the
 * ITT is free again once the data is in or a new command reuses it.
 */
static void tmf_abort_task(struct iscsi_conn *c, struct iscsi_task *t)
{
	(void)c;
	if (t->aborted)
		return;
	t->aborted = true;
	t->cmd.stop = true;
	task_slot_release(t);
	/* A queued task stays queued: its CmdSN still counts when its turn comes. */
	if (t->state == TASK_DATA_OUT) {
		if (task_data_owed(t))
			task_absorb(t);
		task_put(t);
	}
}

/*
 * Aborted tasks the answer waits for: those in the SCSI layer, and over
 * iSER those whose RDMA READ of the initiator's write buffer is still in
 * flight.  The initiator takes the answer as the end of the task and may
 * drop that buffer's registration: a READ still reading it then breaks the
 * connection (Soft-iWARP: TERMINATE, invalid STag).  rdma_read_done() puts
 * the task, and task_gone brings the answer when the last one is done.
 */
static unsigned tasks_aborted_pending(struct iscsi_conn *c)
{
	unsigned n = 0;
	for (struct iscsi_task *t = c->tasks; t; t = t->lnext)
		if (t->aborted && (t->state == TASK_EXEC || (t->r2t_outstanding && c->xp->ops->rdma)))
			n++;
	return n;
}

/*
 * Send the answers held (the one before closing last), in order, once no aborted task
 * is left in the SCSI layer and the other gateways heard.
 */
static void tmf_flush(struct iscsi_conn *c)
{
	if ((!c->tmf_head && !c->close_held) || tasks_aborted_pending(c) || scsi_wait_busy(c->lu_wait))
		return;
	c->task_gone = NULL;
	while (c->tmf_head) {
		struct tmf_pending *p = c->tmf_head;
		c->tmf_head = p->next;
		conn_fill_sn(c, p->bhs, true);
		conn_send_simple(c, p->bhs, NULL, 0);
		free(p);
	}
	c->tmf_tail = NULL;
	c->ntmf = 0;
	if (c->close_held) {
		c->close_held = false;
		conn_fill_sn(c, c->close_rsp, true);
		conn_send_then_close(c, c->close_rsp);
	}
}

/* The events' work elsewhere is done (on c's reactor). */
static void lu_waited(void *arg)
{
	tmf_flush(arg);
}

/* What the events of c wait for (made on first need; NULL without memory: then nothing waits). */
static struct scsi_wait *lu_wait(struct iscsi_conn *c)
{
	if (!c->lu_wait)
		c->lu_wait = scsi_wait_new(c->r, lu_waited, c);
	return c->lu_wait;
}

/* The last answer of c (a Logout's, a TARGET COLD RESET's), after those held; then c closes. */
static void answer_then_close(struct iscsi_conn *c, void *rsp)
{
	c->state = CONN_LOGOUT;
	if (c->tmf_head || tasks_aborted_pending(c) || scsi_wait_busy(c->lu_wait)) {
		memcpy(c->close_rsp, rsp, PDU_BHS_LEN);
		c->close_held = true; /* tmf_flush() sends it */
		c->task_gone = tmf_flush;
		return;
	}
	conn_fill_sn(c, rsp, true);
	conn_send_then_close(c, rsp);
}

/*
 * A logout ends the session (MaxConnections=1): what the loss of its nexus
 * releases (an SPC-2 reservation) is released before the answer, so the
 * initiator's next command through another gateway does not meet it.
 */
void tmf_logout(struct iscsi_conn *c, void *rsp)
{
	if (c->sess && !c->sess->discovery)
		session_lu_event(c->sess, SCSI_EV_LOGOUT, lu_wait(c));
	answer_then_close(c, rsp);
}

void tmf_free(struct iscsi_conn *c)
{
	scsi_wait_drop(c->lu_wait);
	c->lu_wait = NULL;
	c->close_held = false;
	while (c->tmf_head) {
		struct tmf_pending *p = c->tmf_head;
		c->tmf_head = p->next;
		free(p);
	}
	c->tmf_tail = NULL;
	c->ntmf = 0;
}

/* The LUs of the caller's session, each once, or only one. */
static void lu_event_all(struct iscsi_conn *c, int fn, const struct scsi_lu *only)
{
	enum scsi_lu_event ev = fn == PDU_TMF_LU_RESET	       ? SCSI_EV_LU_RESET
				: fn == PDU_TMF_TARGET_WARM_RESET ? SCSI_EV_TARGET_WARM_RESET
				: fn == PDU_TMF_TARGET_COLD_RESET ? SCSI_EV_TARGET_COLD_RESET
								  : SCSI_EV_CLEAR_TASK_SET;
	if (only)
		scsi_lu_event((struct scsi_lu *)only, &c->sess->nexus, ev, lu_wait(c));
	else
		session_lu_event(c->sess, ev, lu_wait(c));
}

/* TARGET COLD RESET ends every session of the target, of every initiator (RFC 7143 sec. 11.5.1). */
static void close_target_sessions(const struct iscsi_session *s)
{
	pthread_mutex_lock(&iscsi_g.lock);
	for (struct iscsi_session *o = iscsi_g.sessions; o; o = o->next)
		if (o != s && !o->gone && o->tpg && !strcmp(o->tpg->iqn, s->tpg->iqn))
			session_close_async(o);
	pthread_mutex_unlock(&iscsi_g.lock);
}

static bool target_reset_allowed(const struct iscsi_session *s)
{
	const struct cfg_acl *acl = NULL;
	pthread_rwlock_rdlock(&rt_lock);
	bool ok = tpg_initiator_allowed(s->tpg, s->initiator, &acl) &&
		  (acl ? acl->allow_target_reset : s->tpg->cfg->demo_target_reset);
	pthread_rwlock_unlock(&rt_lock);
	return ok;
}

static void tmf_answer(struct iscsi_conn *c, struct pdu_tmf_rsp *rsp)
{
	if (!c->tmf_head && !tasks_aborted_pending(c) && !scsi_wait_busy(c->lu_wait)) {
		conn_fill_sn(c, rsp, true);
		conn_send_simple(c, rsp, NULL, 0);
		return;
	}
	struct tmf_pending *p = calloc(1, sizeof(*p));
	if (!p) {
		conn_close(c);
		return;
	}
	memcpy(p->bhs, rsp, PDU_BHS_LEN);
	if (c->tmf_tail)
		c->tmf_tail->next = p;
	else
		c->tmf_head = p;
	c->tmf_tail = p;
	c->ntmf++;
	c->task_gone = tmf_flush;
}

void tmf_rx(struct iscsi_conn *c, struct xp_rx *rx)
{
	const struct pdu_tmf_req *req = (const void *)rx->bhs;
	struct iscsi_session *s = c->sess;
	if (!session_check_cmdsn(c, rx->bhs))
		return;
	int fn = req->function & 0x7f;
	uint64_t lun = pdu_lun_decode(pdu_lun(req));
	const struct iscsi_lun *l = session_lun(s, lun);
	if (fn >= PDU_TMF_ABORT_TASK && fn <= PDU_TMF_LU_RESET) /* the functions that name a LUN */
		stats_tmf(s, (struct iscsi_lun *)l);
	struct pdu_tmf_rsp rsp = { 0 };
	rsp.opcode = PDU_OP_TMF_RSP;
	rsp.flags = PDU_FLAG_FINAL;
	rsp.itt = req->itt;
	rsp.response = PDU_TMF_RSP_COMPLETE;
	if (c->ntmf >= s->max_immediate) {
		/* Answers already waiting for as many aborts as immediate commands may be alive. */
		log_limited(LOG_INFO, "%s: %u task management requests still waiting, function %d rejected",
			    c->xp->peer, c->ntmf, fn);
		/* At once: queueing it would grow the very list that is full. */
		rsp.response = PDU_TMF_RSP_REJECTED;
		conn_fill_sn(c, &rsp, true);
		conn_send_simple(c, &rsp, NULL, 0);
		return;
	}
	switch (fn) {
	case PDU_TMF_ABORT_TASK: {
		struct iscsi_task *t = task_find(c, be32toh(req->ref_itt));
		if (!t || t->state == TASK_SENDING) {
			/* Answered already (or never seen): the initiator gets or got its status. */
			rsp.response = PDU_TMF_RSP_NO_TASK;
		} else if (t->cmd.lun != lun) {
			rsp.response = PDU_TMF_RSP_NO_TASK;
		} else {
			tmf_abort_task(c, t);
		}
		break;
	}
	case PDU_TMF_TARGET_WARM_RESET:
	case PDU_TMF_TARGET_COLD_RESET:
		if (!target_reset_allowed(s)) {
			char who[160];
			log_limited(LOG_WARN, "%s: TARGET %s RESET from '%s' refused: not allowed for this initiator "
				    "(allow_target_reset in its ACL, demo_target_reset in demo mode)", c->xp->peer,
				    fn == PDU_TMF_TARGET_WARM_RESET ? "WARM" : "COLD",
				    log_escape(s->initiator, who, sizeof(who)));
			rsp.response = PDU_TMF_RSP_AUTH_FAILED;
			break;
		}
		/* fall through */
	case PDU_TMF_ABORT_TASK_SET:
	case PDU_TMF_CLEAR_TASK_SET:
	case PDU_TMF_LU_RESET:
		if (fn != PDU_TMF_TARGET_WARM_RESET && fn != PDU_TMF_TARGET_COLD_RESET && !l) {
			rsp.response = PDU_TMF_RSP_NO_LUN;
			break;
		}
		for (struct iscsi_task *t = c->tasks, *n; t; t = n) {
			t->refs++; /* keep t (and so t->lnext) valid across the abort */
			if (task_in_tmf_scope(t, fn, lun))
				tmf_abort_task(c, t);
			n = t->lnext;
			task_put(t);
		}
		if (fn != PDU_TMF_ABORT_TASK_SET)
			lu_event_all(c, fn, fn == PDU_TMF_LU_RESET || fn == PDU_TMF_CLEAR_TASK_SET ? l->lu : NULL);
		log_info("%s: task management function %d on LUN %llu", c->xp->peer, fn, (unsigned long long)lun);
		if (fn == PDU_TMF_TARGET_COLD_RESET) {
			/* A cold reset ends every session of the target; the asking one after the answer. */
			close_target_sessions(s);
			answer_then_close(c, &rsp);
			return;
		}
		break;
	case PDU_TMF_CLEAR_ACA:
	case PDU_TMF_TASK_REASSIGN:
		rsp.response = PDU_TMF_RSP_NOT_SUPPORTED;
		break;
	default:
		rsp.response = PDU_TMF_RSP_REJECTED;
		break;
	}
	tmf_answer(c, &rsp);
}
