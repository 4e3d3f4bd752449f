/*
 * The kernel's ublk driver (userspace block devices) driven through liburing:
 * control commands on /dev/ublk-control (128-byte SQEs: the command is 32
 * bytes inline) and the per-queue I/O commands on /dev/ublkcN.  Debian 12's
 * headers know only the legacy opcodes; kernels keep them unless built
 * without CONFIG_BLKDEV_UBLK_LEGACY_OPCODES (Debian's have it).
 */
#ifndef ISERADM_UBLK_H
#define ISERADM_UBLK_H

#include <liburing.h>
#include <linux/ublk_cmd.h>
#include <stdint.h>
#include <sys/types.h>

#define UBLK_CONTROL "/dev/ublk-control"
#define UBLK_DEV_NEW UINT32_MAX /* ADD_DEV: the kernel picks the number */

struct ublk_ctrl {
	int fd;
	struct io_uring ring;
};

/* 0 or a negative errno (-ENOENT: the ublk_drv module is not loaded). */
int ublk_ctrl_open(struct ublk_ctrl *c);
void ublk_ctrl_close(struct ublk_ctrl *c);
/* One control command, waited for: the CQE's result (>= 0) or a negative errno. */
int ublk_ctrl_cmd(struct ublk_ctrl *c, uint32_t op, uint32_t dev_id, void *buf, uint16_t len, uint64_t data0);

/* Queue q's descriptor array in /dev/ublkcN: offset and length to mmap. */
off_t ublk_desc_offset(unsigned q);
size_t ublk_desc_len(unsigned depth);

/* FETCH_REQ or COMMIT_AND_FETCH_REQ for one tag; user_data is the tag. */
void ublk_prep_io(struct io_uring_sqe *sqe, int cdev, uint32_t op, uint16_t q, uint16_t tag, int32_t result,
		  void *buf);

#endif
