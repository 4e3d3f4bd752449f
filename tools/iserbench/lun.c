/*
 * iserbench LUN drivers (see lun.h): iscsi:// and iser:// through the
 * initiator library's asynchronous API, files and block devices through
 * io_uring with O_DIRECT so the page cache does not flatter the baseline.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isert/initiator.h"
#include "lun.h"

static bool is_url(const char *spec)
{
	return !strncmp(spec, "iscsi://", 8) || !strncmp(spec, "iser://", 7);
}

static const char *initiator;

void ib_lun_set_initiator(const char *iqn)
{
	initiator = iqn;
}

const char *ib_lun_initiator(void)
{
	if (initiator)
		return initiator;
	struct isc_options o;
	isc_options_default(&o);
	return o.initiator_name;
}

static int open_isc(struct ib_lun *l, const char *spec, char *err, size_t errlen)
{
	struct isc_url u;
	char why[300];
	if (isc_url_parse(spec, false, &u, why, sizeof(why))) {
		snprintf(err, errlen, "lun=%s: %s", spec, why);
		return -EINVAL;
	}
	if (!u.has_lun) {
		snprintf(err, errlen, "lun=%s: the URL names no LUN (.../target-iqn/LUN)", spec);
		return -EINVAL;
	}
	struct isc_options o;
	isc_options_default(&o);
	if (initiator)
		o.initiator_name = initiator;
	/* A benchmark should fail soon when the target is gone, not retry for a minute. */
	o.reconnect_timeout_s = 10;
	l->s = isc_session_new(&o);
	if (!l->s) {
		snprintf(err, errlen, "lun=%s: out of memory", spec);
		return -ENOMEM;
	}
	int rc = isc_connect_url_sync(l->s, &u);
	if (rc == -EPROTONOSUPPORT) {
		snprintf(err, errlen, "lun=%s: iSER is not supported by this build of the initiator library "
			 "(use iscsi:// for TCP)", spec);
		return rc;
	}
	if (rc) {
		snprintf(err, errlen, "lun=%s: cannot connect: %s", spec, isc_errmsg(l->s));
		return rc;
	}
	l->lunid = u.lun;
	struct isc_result r;
	isc_tur_sync(l->s, l->lunid, &r);  /* clears a pending unit attention */
	struct isc_capacity cap;
	rc = isc_readcap16_sync(l->s, l->lunid, &cap, &r);
	if (rc) {
		char d[256];
		isc_result_str(&r, d, sizeof(d));
		snprintf(err, errlen, "lun=%s: READ CAPACITY(16) failed: %s", spec, rc == -EIO ? d : isc_errmsg(l->s));
		return rc;
	}
	l->size = cap.blocks * cap.block_size;
	l->block_size = cap.block_size;
	return 0;
}

static int open_uring(struct ib_lun *l, const char *spec, unsigned qd, uint64_t create_size, char *err,
		      size_t errlen)
{
	int flags = O_RDWR | O_DIRECT | O_CLOEXEC;
	struct stat st;
	if (stat(spec, &st) && errno == ENOENT && create_size)
		flags |= O_CREAT;
	l->fd = open(spec, flags, 0644);
	if (l->fd < 0 && errno == EINVAL) {
		/* tmpfs and some others refuse O_DIRECT: still usable, but cached. */
		fprintf(stderr, "iserbench: lun=%s: O_DIRECT not supported here, using buffered I/O\n", spec);
		l->fd = open(spec, flags & ~O_DIRECT, 0644);
	}
	if (l->fd < 0) {
		snprintf(err, errlen, "lun=%s: cannot open: %s", spec, strerror(errno));
		return -errno;
	}
	if (fstat(l->fd, &st)) {
		snprintf(err, errlen, "lun=%s: fstat: %s", spec, strerror(errno));
		return -errno;
	}
	l->block_size = 512;
	if (S_ISBLK(st.st_mode)) {
		int bs = 512;
		if (ioctl(l->fd, BLKGETSIZE64, &l->size) || ioctl(l->fd, BLKSSZGET, &bs)) {
			snprintf(err, errlen, "lun=%s: cannot read the device size: %s", spec, strerror(errno));
			return -errno;
		}
		l->block_size = (uint32_t)bs;
	} else if (S_ISREG(st.st_mode)) {
		if (flags & O_CREAT) {
			if (ftruncate(l->fd, (off_t)create_size)) {
				snprintf(err, errlen, "lun=%s: cannot size the new file: %s", spec, strerror(errno));
				return -errno;
			}
			st.st_size = (off_t)create_size;
		}
		l->size = (uint64_t)st.st_size;
	} else {
		snprintf(err, errlen, "lun=%s: neither a regular file nor a block device", spec);
		return -EINVAL;
	}
	unsigned entries = 1;
	while (entries < qd)
		entries <<= 1;
	int rc = io_uring_queue_init(entries, &l->ring, 0);
	if (rc) {
		snprintf(err, errlen, "lun=%s: io_uring_queue_init(%u): %s", spec, entries, strerror(-rc));
		return rc;
	}
	l->ring_ok = true;
	return 0;
}

int ib_lun_open(struct ib_lun *l, const char *spec, unsigned qd, uint64_t create_size, ib_io_done_fn done,
		char *err, size_t errlen)
{
	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->done = done;
	snprintf(l->spec, sizeof(l->spec), "%s", spec);
	int rc;
	if (is_url(spec)) {
		l->kind = IB_LUN_ISC;
		rc = open_isc(l, spec, err, errlen);
	} else {
		l->kind = IB_LUN_URING;
		rc = open_uring(l, spec, qd, create_size, err, errlen);
	}
	if (rc)
		ib_lun_close(l);
	return rc;
}

void ib_lun_close(struct ib_lun *l)
{
	if (l->s) {
		if (isc_logged_in(l->s))
			isc_logout_sync(l->s);
		isc_session_free(l->s);
		l->s = NULL;
	}
	if (l->ring_ok)
		io_uring_queue_exit(&l->ring);
	l->ring_ok = false;
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

static void isc_done(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct ib_io *io = arg;
	struct ib_lun *l = io->lun;
	(void)s;
	l->inflight--;
	if (!r->err && !r->underflow && !r->overflow) {
		l->done(io, 0, NULL);
		return;
	}
	char why[512];
	int err = r->err ? r->err : -EIO;
	if (r->err == -EIO || !r->err) {
		isc_result_str(r, why, sizeof(why));
		if (!r->err)
			snprintf(why + strlen(why), sizeof(why) - strlen(why), " (residual %" PRIu32 " bytes)",
				 r->residual);
	} else {
		snprintf(why, sizeof(why), "%s: %s", isc_strerror(r->err), isc_errmsg(l->s));
	}
	if (err == -ECONNRESET || err == -ECANCELED || err == -ENOTCONN)
		l->dead = true;
	l->done(io, err, why);
}

int ib_lun_submit(struct ib_lun *l, struct ib_io *io)
{
	if (l->dead)
		return -ENOTCONN;
	if (l->kind == IB_LUN_ISC) {
		struct isc_cmd c;
		uint64_t lba = io->off / l->block_size;
		uint32_t blocks = io->len / l->block_size;
		if (io->write)
			isc_cmd_write16(&c, l->lunid, lba, blocks, l->block_size, io->buf, false);
		else
			isc_cmd_read16(&c, l->lunid, lba, blocks, l->block_size, io->buf);
		if (!isc_submit(l->s, &c, isc_done, io)) {
			int err = errno ? -errno : -EIO;
			if (!isc_logged_in(l->s))
				l->dead = true;
			return err;
		}
	} else {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&l->ring);
		if (!sqe) {
			/* More slots than ring entries cannot happen; flush and retry once anyway. */
			io_uring_submit(&l->ring);
			l->queued = 0;
			sqe = io_uring_get_sqe(&l->ring);
			if (!sqe)
				return -EAGAIN;
		}
		if (io->write)
			io_uring_prep_write(sqe, l->fd, io->buf, io->len, io->off);
		else
			io_uring_prep_read(sqe, l->fd, io->buf, io->len, io->off);
		io_uring_sqe_set_data(sqe, io);
		l->queued++;
	}
	l->inflight++;
	return 0;
}

void ib_lun_flush(struct ib_lun *l)
{
	if (l->kind == IB_LUN_URING && l->queued) {
		io_uring_submit(&l->ring);
		l->queued = 0;
	}
}

int ib_lun_fd(const struct ib_lun *l)
{
	return l->kind == IB_LUN_ISC ? isc_get_fd(l->s) : l->ring.ring_fd;
}

short ib_lun_events(const struct ib_lun *l)
{
	return l->kind == IB_LUN_ISC ? (short)isc_which_events(l->s) : POLLIN;
}

int ib_lun_service(struct ib_lun *l, short revents)
{
	if (l->kind == IB_LUN_ISC) {
		int rc = isc_service(l->s, revents);
		if (rc < 0 && rc != -EINTR && rc != -EAGAIN && !isc_logged_in(l->s))
			l->dead = true;
		return rc;
	}
	struct io_uring_cqe *cqe;
	unsigned head, n = 0;
	/* Callbacks may queue new SQEs but never reap, so iterating is safe. */
	io_uring_for_each_cqe(&l->ring, head, cqe) {
		struct ib_io *io = io_uring_cqe_get_data(cqe);
		int res = cqe->res;
		n++;
		l->inflight--;
		if (res == (int)io->len) {
			l->done(io, 0, NULL);
		} else {
			char why[128];
			if (res < 0)
				snprintf(why, sizeof(why), "%s", strerror(-res));
			else
				snprintf(why, sizeof(why), "short %s: %d of %" PRIu32 " bytes", io->write ? "write" : "read",
					 res, io->len);
			l->done(io, res < 0 ? res : -EIO, why);
		}
	}
	io_uring_cq_advance(&l->ring, n);
	return 0;
}

void *ib_lun_buf_alloc(struct ib_lun *l, size_t len)
{
	if (l->kind == IB_LUN_ISC)
		return isc_buf_alloc(l->s, len);
	void *p;
	return posix_memalign(&p, 4096, len) ? NULL : p;
}

void ib_lun_buf_free(struct ib_lun *l, void *buf)
{
	if (!buf)
		return;
	if (l->kind == IB_LUN_ISC)
		isc_buf_free(l->s, buf);
	else
		free(buf);
}
