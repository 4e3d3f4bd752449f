/* ublk control and I/O commands over liburing (see ublk.h). */
#include "ublk.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int ublk_ctrl_open(struct ublk_ctrl *c)
{
	c->fd = open(UBLK_CONTROL, O_RDWR | O_CLOEXEC);
	if (c->fd < 0)
		return -errno;
	int rc = io_uring_queue_init(4, &c->ring, IORING_SETUP_SQE128);
	if (rc) {
		close(c->fd);
		c->fd = -1;
	}
	return rc;
}

void ublk_ctrl_close(struct ublk_ctrl *c)
{
	if (c->fd < 0)
		return;
	io_uring_queue_exit(&c->ring);
	close(c->fd);
	c->fd = -1;
}

int ublk_ctrl_cmd(struct ublk_ctrl *c, uint32_t op, uint32_t dev_id, void *buf, uint16_t len, uint64_t data0)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&c->ring);
	if (!sqe)
		return -EBUSY;
	memset(sqe, 0, 2 * sizeof(*sqe)); /* a 128-byte SQE */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = c->fd;
	sqe->cmd_op = op;
	struct ublksrv_ctrl_cmd *cmd = (struct ublksrv_ctrl_cmd *)sqe->cmd;
	cmd->dev_id = dev_id;
	cmd->queue_id = (uint16_t)-1;
	cmd->addr = (uint64_t)(uintptr_t)buf;
	cmd->len = len;
	cmd->data[0] = data0;
	int rc = io_uring_submit(&c->ring);
	if (rc < 0)
		return rc;
	struct io_uring_cqe *cqe;
	do
		rc = io_uring_wait_cqe(&c->ring, &cqe);
	while (rc == -EINTR);
	if (rc)
		return rc;
	rc = cqe->res;
	io_uring_cqe_seen(&c->ring, cqe);
	return rc;
}

static size_t page_round(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	return (n + pg - 1) / pg * pg;
}

off_t ublk_desc_offset(unsigned q)
{
	/* The driver lays the queues out at their largest possible size. */
	return UBLKSRV_CMD_BUF_OFFSET +
	       (off_t)q * (off_t)page_round(UBLK_MAX_QUEUE_DEPTH * sizeof(struct ublksrv_io_desc));
}

size_t ublk_desc_len(unsigned depth)
{
	return page_round(depth * sizeof(struct ublksrv_io_desc));
}

void ublk_prep_io(struct io_uring_sqe *sqe, int cdev, uint32_t op, uint16_t q, uint16_t tag, int32_t result,
		  void *buf)
{
	memset(sqe, 0, sizeof(*sqe));
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = cdev;
	sqe->cmd_op = op;
	sqe->user_data = tag;
	/* The 16-byte I/O command sits in the SQE's command area. */
	struct ublksrv_io_cmd *cmd = (struct ublksrv_io_cmd *)&sqe->addr3;
	cmd->q_id = q;
	cmd->tag = tag;
	cmd->result = result;
	cmd->addr = (uint64_t)(uintptr_t)buf;
}
