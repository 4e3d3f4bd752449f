/*
 * The file kind: a regular file, buffered I/O through the fd engine (fd.c).
 * Grows while it runs (the file extended); thin: UNMAP punches holes and
 * GET LBA STATUS reads them back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target/backstore/backstore_impl.h"

static int file_open(struct backstore *bs, const struct backstore_cfg *cfg, char *err, size_t errlen)
{
	int flags = O_CLOEXEC | (cfg->readonly ? O_RDONLY : O_RDWR);
	if (!cfg->readonly && cfg->size)
		flags |= O_CREAT;
	int fd = open(cfg->path, flags, 0600);
	if (fd < 0) {
		int e = errno;
		bs_errf(bs, err, errlen, "path '%s': %s", cfg->path, strerror(e));
		return -e;
	}
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		bs_errf(bs, err, errlen, "path '%s': %s", cfg->path, strerror(e));
		close(fd);
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		bs_errf(bs, err, errlen, "path '%s': not a regular file%s", cfg->path,
			S_ISBLK(st.st_mode) ? " (a block device: use type block)" : "");
		close(fd);
		return -EINVAL;
	}
	uint64_t have = (uint64_t)st.st_size;
	if (cfg->size) {
		/* a multiple of the block size: backstore_check_geometry() */
		if (have < cfg->size) {
			if (cfg->readonly) {
				bs_errf(bs, err, errlen, "size: %llu is larger than the readonly file '%s' (%llu bytes)",
					(unsigned long long)cfg->size, cfg->path, (unsigned long long)have);
				close(fd);
				return -EINVAL;
			}
			if (ftruncate(fd, (off_t)cfg->size) < 0) {
				int e = errno;
				bs_errf(bs, err, errlen, "path '%s': cannot extend to %llu bytes: %s",
					cfg->path, (unsigned long long)cfg->size, strerror(e));
				close(fd);
				return -e;
			}
		}
		bs->size = cfg->size;
	} else {
		bs->size = have - have % bs->block_size;
		if (bs->size == 0) {
			bs_errf(bs, err, errlen, "size: file '%s' is smaller than one block and no size is given",
				cfg->path);
			close(fd);
			return -EINVAL;
		}
	}
	struct bs_fd *f = bs_fd(bs);
	f->fd = fd;
	f->direct = false;
	f->dio_align = 1;
	f->short_zeroes = true;
	return 0;
}

/* Thin only: SEEK_DATA/SEEK_HOLE give the extent around offset. */
static int file_lba_status(struct backstore *bs, uint64_t offset, bool *mapped, uint64_t *run)
{
	off_t d = lseek(bs_fd(bs)->fd, (off_t)offset, SEEK_DATA);
	if (d < 0) {
		if (errno != ENXIO)
			return -errno;
		*mapped = false;   /* nothing but hole up to the end of the file */
		*run = bs->size - offset;
		return 0;
	}
	if ((uint64_t)d > offset) {
		*mapped = false;
		*run = (uint64_t)d - offset;
		return 0;
	}
	off_t h = lseek(bs_fd(bs)->fd, (off_t)offset, SEEK_HOLE);
	if (h < 0)
		return -errno;
	*mapped = true;
	*run = (uint64_t)h > offset ? (uint64_t)h - offset : bs->block_size;
	return 0;
}

/*
 * SANITIZE BLOCK ERASE on a thin file LU: holes punched (the file system
 * frees the blocks; they read as zeroes), made durable with fdatasync once
 * the whole range is done (the caller's BS_FLUSH).  Where the file system
 * cannot punch holes the LU does not offer it.
 */
static unsigned file_sanitize_methods(const struct backstore *bs)
{
	return bs->thin && !bs_fd(bs)->no_punch ? BS_SANITIZE_BLOCK_ERASE : 0;
}

static int64_t file_sanitize(struct backstore *bs, unsigned method, uint64_t offset, uint64_t len)
{
	(void)method;
	if (fallocate(bs_fd(bs)->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)len) < 0) {
		int e = errno;
		if (e == EOPNOTSUPP || e == ENOSYS)
			bs_fd(bs)->no_punch = true;
		return -e;
	}
	return (int64_t)len;
}

static const char *file_sanitize_how(const struct backstore *bs, unsigned method)
{
	(void)bs;
	(void)method;
	return "holes punched (fallocate PUNCH_HOLE), then fdatasync";
}

/* Grown by extending the file (backstore_resize() checked size); never shrunk. */
static int file_resize(struct backstore *bs, uint64_t size, char *err, size_t errlen)
{
	int fd = bs_fd(bs)->fd;
	struct stat st;
	if (fstat(fd, &st) < 0 || ((uint64_t)st.st_size < size && ftruncate(fd, (off_t)size) < 0)) {
		int e = errno;
		bs_errf(bs, err, errlen, "cannot extend the file to %llu bytes: %s", (unsigned long long)size,
			strerror(e));
		return -e;
	}
	return 0;
}

const struct bs_ops bs_file_ops = {
	.size = sizeof(struct bs_fd),
	.open = file_open,
	.close = bs_fd_close,
	.submit = bs_fd_submit,
	.lba_status = file_lba_status,
	.resize = file_resize,
	.sanitize_methods = file_sanitize_methods,
	.sanitize = file_sanitize,
	.sanitize_how = file_sanitize_how,
};
