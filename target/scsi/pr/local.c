/*
 * The LU's reservation changes where they are this process's alone
 * (lu/lu.h's lu_state_ops; shared/share.c has the other kind): pr.c
 * under the LU's mutex, answered at once.
 */
#include "target/scsi/lu/lu.h"
#include "target/scsi/pr/pr.h"

static void local_pr_out(struct scsi_cmd *cmd)
{
	int64_t resid = cmd->resid;

	pthread_mutex_lock(&cmd->lu->mu);
	pr_out(cmd->lu->pr, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	if (cmd->status == SCSI_GOOD)
		cmd->resid = resid;
	scsi_cmd_complete(cmd);
}

static void local_reserve(struct scsi_cmd *cmd)
{
	pthread_mutex_lock(&cmd->lu->mu);
	pr_reserve(cmd->lu->pr, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	scsi_cmd_complete(cmd);
}

static void local_release(struct scsi_cmd *cmd)
{
	pthread_mutex_lock(&cmd->lu->mu);
	pr_release(cmd->lu->pr, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	scsi_cmd_complete(cmd);
}

static void local_reset(struct scsi_lu *lu, const struct scsi_nexus *nexus, bool nexus_loss_only, uint16_t ua,
			struct scsi_wait *w)
{
	(void)ua; /* the caller gives it to every nexus there is: here */
	(void)w;  /* nothing left to do elsewhere */
	pr_reset(lu->pr, nexus, nexus_loss_only);
}

const struct lu_state_ops lu_state_local = {
	.pr_out = local_pr_out,
	.reserve = local_reserve,
	.release = local_release,
	.reset = local_reset,
};
