/*
 * Block device backstore (/dev/nvme0n1, /dev/sdb, a loop device): O_DIRECT
 * through the fd engine in fd.c, so buffers must be aligned to the
 * device's logical block size (bufpool buffers are; others go through a
 * bounce buffer).  FUA is RWF_DSYNC on the write, FLUSH is fdatasync.
 *
 * UNMAP on a thin block backstore whose device can discard is a discard
 * (BLKDISCARD): that is what deallocates an NVMe namespace's blocks (DSM
 * deallocate); reads after it are not promised to be zero, so the LU reports
 * LBPRZ=0.  Zeroing (WRITE SAME of zeroes) goes through fallocate() on the
 * device via io_uring instead: PUNCH_HOLE where the device guarantees zeroes,
 * else ZERO_RANGE, else written zeroes.  Without discard, UNMAP zeroes too.
 * The discard ioctl is synchronous on the reactor (the kernel offers no
 * asynchronous discard to this liburing); it is rare and bounded by UNMAP's
 * limits in VPD B0.  With the write cache off an fdatasync follows it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target/backstore/backstore_impl.h"

/* A number from /sys/dev/block/MAJ:MIN/queue/NAME (0 when it cannot be read). */
static unsigned long long queue_attr(const struct stat *st, const char *name)
{
	char path[128];
	unsigned long long v = 0;
	snprintf(path, sizeof(path), "/sys/dev/block/%u:%u/queue/%s", major(st->st_rdev), minor(st->st_rdev), name);
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &v) != 1)
		v = 0;
	fclose(f);
	return v;
}

static int block_fail(struct backstore *bs, int fd, char *err, size_t errlen, const char *path,
		      const char *what)
{
	int e = errno;
	bs_errf(bs, err, errlen, "path '%s': %s: %s", path, what, strerror(e));
	if (fd >= 0)
		close(fd);
	return -e;
}

static int block_open(struct backstore *bs, const struct backstore_cfg *cfg, char *err, size_t errlen)
{
	struct stat st;
	if (stat(cfg->path, &st) < 0) {
		int e = errno;
		bs_errf(bs, err, errlen, "path '%s': %s", cfg->path, strerror(e));
		return -e;
	}
	if (!S_ISBLK(st.st_mode)) {
		bs_errf(bs, err, errlen, "path '%s': not a block device%s", cfg->path,
			S_ISREG(st.st_mode) ? " (a regular file: use type file)" : "");
		return -ENOTBLK;
	}
	/* O_EXCL on a block device: refuse one that is mounted or claimed. */
	int flags = O_CLOEXEC | O_DIRECT | (cfg->readonly ? O_RDONLY : O_RDWR | O_EXCL);
	int fd = open(cfg->path, flags);
	if (fd < 0) {
		int e = errno;
		bs_errf(bs, err, errlen, "path '%s': %s%s", cfg->path, strerror(e),
			e == EBUSY ? " (mounted or in use?)" : "");
		return -e;
	}
	uint64_t devsize = 0;
	int lbs = 0;
	unsigned int opt = 0;
	if (ioctl(fd, BLKGETSIZE64, &devsize) < 0)
		return block_fail(bs, fd, err, errlen, cfg->path, "BLKGETSIZE64");
	if (ioctl(fd, BLKSSZGET, &lbs) < 0)
		return block_fail(bs, fd, err, errlen, cfg->path, "BLKSSZGET");
	if (ioctl(fd, BLKIOOPT, &opt) < 0)
		opt = 0;   /* a hint only */
	if (lbs < 512 || lbs > 4096 || (lbs & (lbs - 1))) {
		bs_errf(bs, err, errlen, "path '%s': unsupported logical block size %d", cfg->path, lbs);
		close(fd);
		return -EINVAL;
	}
	if (!cfg->block_size) {
		bs->block_size = (uint32_t)lbs;
	} else if (cfg->block_size < (uint32_t)lbs) {
		bs_errf(bs, err, errlen, "block_size: %u is smaller than the logical block size %d of '%s'",
			cfg->block_size, lbs, cfg->path);
		close(fd);
		return -EINVAL;
	}
	if (cfg->size) {
		if (cfg->size > devsize) {
			bs_errf(bs, err, errlen, "size: %llu exceeds the size %llu of '%s'",
				(unsigned long long)cfg->size, (unsigned long long)devsize, cfg->path);
			close(fd);
			return -EINVAL;
		}
		if (cfg->size % bs->block_size) {
			bs_errf(bs, err, errlen, "size: %llu is not a multiple of the block size %u",
				(unsigned long long)cfg->size, bs->block_size);
			close(fd);
			return -EINVAL;
		}
		bs->size = cfg->size;
	} else {
		bs->size = devsize - devsize % bs->block_size;
	}
	if (bs->size == 0) {
		bs_errf(bs, err, errlen, "path '%s': device is empty", cfg->path);
		close(fd);
		return -EINVAL;
	}
	struct bs_fd *f = bs_fd(bs);
	f->fd = fd;
	bs->discard = cfg->thin && !cfg->readonly && queue_attr(&st, "discard_max_bytes") > 0;
	f->direct = true;
	f->dio_align = (uint32_t)lbs;
	bs->optimal_io = opt;
	return 0;
}

static void block_submit(struct backstore *bs, struct bs_io *io)
{
	if (io->op != BS_UNMAP || !bs->discard) {
		bs_fd_submit(bs, io);
		return;
	}
	uint64_t range[2] = { io->offset, io->len };
	int rc = ioctl(bs_fd(bs)->fd, BLKDISCARD, range) < 0 ? -errno : 0;
	if (rc == -EOPNOTSUPP) {
		/* The device stopped discarding (a dm table reload, say): zero from now on. */
		bs->discard = false;
		bs_fd_submit(bs, io);
		return;
	}
	/* With the write cache off the discard is durable at completion, as the zeroing paths are (file.c). */
	if (rc == 0 && !backstore_write_cache(bs) && fdatasync(bs_fd(bs)->fd) < 0)
		rc = -errno;
	bs_complete(io, rc);
}

/*
 * SANITIZE BLOCK ERASE on a thin block LU: BLKSECDISCARD where the device
 * does a secure discard (eMMC/SD), else BLKZEROOUT (the kernel's Write
 * Zeroes, or zeroes written: the old blocks are overwritten or unmapped
 * with zeroes guaranteed), never a plain BLKDISCARD, which may leave the old
 * data readable.  Synchronous ioctls on the sanitize worker.
 */
static unsigned block_sanitize_methods(const struct backstore *bs)
{
	return bs->thin ? BS_SANITIZE_BLOCK_ERASE : 0;
}

static _Atomic bool block_no_secdiscard;

static int64_t block_sanitize(struct backstore *bs, unsigned method, uint64_t offset, uint64_t len)
{
	uint64_t range[2] = { offset, len };
	(void)method;
	if (!block_no_secdiscard) {
		if (ioctl(bs_fd(bs)->fd, BLKSECDISCARD, range) == 0)
			return (int64_t)len;
		if (errno != EOPNOTSUPP && errno != ENOTTY && errno != EINVAL)
			return -errno;
		block_no_secdiscard = true;
	}
	if (ioctl(bs_fd(bs)->fd, BLKZEROOUT, range) < 0)
		return -errno;
	return (int64_t)len;
}

static const char *block_sanitize_how(const struct backstore *bs, unsigned method)
{
	(void)bs;
	(void)method;
	return "BLKSECDISCARD where the device supports it, else BLKZEROOUT";
}

/* Its size is the device's: a resize follows the device (lvextend), read here. */
static int block_device_size(struct backstore *bs, uint64_t *bytes, char *err, size_t errlen)
{
	if (ioctl(bs_fd(bs)->fd, BLKGETSIZE64, bytes) < 0) {
		bs_errf(bs, err, errlen, "cannot read the device size: %s", strerror(errno));
		return -errno;
	}
	return 0;
}

/* No cheap way to ask a device what is deallocated: report mapped (lba_status NULL). */
const struct bs_ops bs_block_ops = {
	.size = sizeof(struct bs_fd),
	.open = block_open,
	.close = bs_fd_close,
	.submit = block_submit,
	.lba_status = NULL,
	.device_size = block_device_size,
	.sanitize_methods = block_sanitize_methods,
	.sanitize = block_sanitize,
	.sanitize_how = block_sanitize_how,
};
