/*
 * NVMe passthrough backstore: a namespace through its generic char device
 * (/dev/ngXnY), NVMe commands sent as IORING_OP_URING_CMD on the submitting
 * reactor's big ring (reactor_uring_sqe_cmd: SQE128 | CQE32), skipping the
 * block layer's scheduler and bio splitting.  Without a reactor or a big
 * ring the same commands go through NVME_IOCTL_IO_CMD synchronously.
 * What each request becomes is nvme_cmd.c's (pure, unit-tested); this
 * file opens the namespace and runs the pieces one after the other, like
 * the fd engine (fd.c): a request larger than the controller's MDTS (or
 * the queue's limits) is several commands, each issued when the last one
 * completed.
 *
 * Open: Identify Controller and Identify Namespace through the admin
 * passthrough ioctl (CAP_SYS_ADMIN before Linux 6.2; since then these
 * Identify pages pass without it, as do I/O commands on a descriptor open
 * for writing), then the namespace's block device (/dev/nvmeXnY, when it
 * exists) is held with O_EXCL so that nobody mounts it or serves it as a
 * block backstore while we write underneath.  Every other admin command
 * (SANITIZE's Format NVM and Sanitize) still needs CAP_SYS_ADMIN: open asks
 * the kernel once (nv_probe_admin) and offers those erases only if it said
 * yes.
 *
 * Mapping: READ and WRITE are Read and Write (FUA when asked or when the LU
 * has no write cache: WCE=0 promises durability at completion); FLUSH is
 * Flush, or nothing when the controller has no volatile write cache.
 * UNMAP on a thin backstore: Write Zeroes with DEAC where the namespace
 * says deallocated blocks read as zeroes and Write Zeroes may deallocate
 * (DLFEAT 001b + bit 3), so LBPRZ=1 holds; else Dataset Management with
 * AD, one range per command, and LBPRZ=0, because a deallocate is
 * advisory (the controller may keep any block, which then reads its old
 * data, whatever DLFEAT says); else zeroing.  With the LU's write cache
 * off, a Flush follows each deallocation or Write Zeroes (see nv_result).  WRITE SAME of zeroes is Write
 * Zeroes where ONCS has it, else Writes from a zeroed buffer; another
 * pattern is always Writes from a buffer of whole patterns.  A controller
 * that refuses Write Zeroes or DSM as unsupported is remembered (per
 * backstore) and the request continues with the fall-back.
 *
 * COMPARE AND WRITE is not offered (backstore_compare_write_max() 0): a
 * fused Compare + Write must sit in adjacent slots of one NVMe submission
 * queue, and the kernel places passthrough commands itself: both
 * NVME_IOCTL_IO_CMD and NVME_URING_CMD_IO refuse any nonzero flags byte
 * (where FUSE lives) with -EINVAL (drivers/nvme/host/ioctl.c since
 * Linux 4.5 for the ioctl, since 5.19 for uring_cmd), and IOSQE_IO_LINK
 * only orders the two, it does not make them adjacent or atomic.  The SCSI
 * layer then reads, compares and writes under the LU's lock: atomic for
 * this target only, which is all a namespace held with O_EXCL needs.
 *
 * Buffers: pool buffers are handed to the kernel as they are (no copy); a
 * buffer not aligned to 4 bytes (NVMe's dword rule) goes through a bounce
 * buffer, as file.c does for O_DIRECT.  NVMe status -> errno: nvme_cmd.c's
 * table; the first error of a backstore is logged in full, later ones
 * rate-limited.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "target/backstore/backstore_impl.h"
#include "target/backstore/nvme_cmd.h"
#include "target/backstore/nvme_int.h"

#define NV_FILL_MAX (1u << 20)   /* WRITE SAME / zero-write buffer */
#define NV_ADMIN_IDENTIFY 0x06

static struct nvme_bs *nv(const struct backstore *bs)
{
	return bs_kind_of((struct backstore *)bs, struct nvme_bs);
}

/* --- open --- */

/* One admin command through the passthrough ioctl: 0, the NVMe status (> 0), or the kernel's -errno. */
static int nv_admin_cmd(int fd, uint8_t opcode, uint32_t nsid, uint32_t cdw10, void *buf, uint32_t len,
			uint32_t timeout_ms)
{
	struct nvme_admin_cmd c = {
		.opcode = opcode,
		.nsid = nsid,
		.addr = (uint64_t)(uintptr_t)buf,
		.data_len = len,
		.cdw10 = cdw10,
		.timeout_ms = timeout_ms,
	};
	int rc = ioctl(fd, NVME_IOCTL_ADMIN_CMD, &c);
	return rc < 0 ? -errno : rc;
}

static int nv_identify(int fd, uint32_t nsid, uint32_t cns, uint8_t *page)
{
	return nv_admin_cmd(fd, NV_ADMIN_IDENTIFY, nsid, cns, page, NVME_ID_SIZE, 0);
}

/* The identify failure said so that the admin knows what to do. */
static int nv_identify_fail(struct backstore *bs, const char *path, const char *what, int rc, char *err,
			    size_t errlen)
{
	char s[96];
	if (rc == -EACCES || rc == -EPERM)
		bs_errf(bs, err, errlen, "path '%s': %s refused (%s): NVMe passthrough needs CAP_SYS_ADMIN before "
			"Linux 6.2; give isertd the capability (isertd.service leaves it out: docs/config.md, "
			"\"block or nvme\"), or use type block", path, what, strerror(-rc));
	else if (rc < 0)
		bs_errf(bs, err, errlen, "path '%s': %s: %s", path, what, strerror(-rc));
	else
		bs_errf(bs, err, errlen, "path '%s': %s failed: %s", path, what, nvme_status_str(rc, s, sizeof(s)));
	return rc < 0 ? rc : -EIO;
}

bool nv_block_name(const char *path, char *out, size_t outlen)
{
	const char *b = strrchr(path, '/');
	unsigned ctrl, ns;
	char tail;
	b = b ? b + 1 : path;
	if (sscanf(b, "ng%un%u%c", &ctrl, &ns, &tail) != 2)
		return false;
	snprintf(out, outlen, "nvme%un%u", ctrl, ns);
	return true;
}

static uint32_t nv_sysfs_u32(const char *blk, const char *attr)
{
	char p[128];
	unsigned long v = 0;
	snprintf(p, sizeof(p), "/sys/block/%s/queue/%s", blk, attr);
	FILE *f = fopen(p, "r");
	if (!f)
		return 0;
	if (fscanf(f, "%lu", &v) != 1 || v > UINT32_MAX)
		v = 0;
	fclose(f);
	return (uint32_t)v;
}

/*
 * Hold the namespace's block device with O_EXCL: refuses it when mounted
 * or served as a block backstore, and keeps it so while we serve it.  Only
 * where the name says which one it is and NVME_IOCTL_ID agrees.
 */
static int nv_claim(struct backstore *bs, const char *path, const char *blk, uint32_t nsid, char *err,
		    size_t errlen)
{
	char dev[64];
	snprintf(dev, sizeof(dev), "/dev/%s", blk);
	int fd = open(dev, O_RDONLY | O_EXCL | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EBUSY) {
			bs_errf(bs, err, errlen, "path '%s': the namespace's block device %s is in use (mounted, a "
				"partition, dm/md, or a block backstore on it); stop using it first", path, dev);
			return -EBUSY;
		}
		return 0;   /* no block device node (native multipath names it otherwise): nothing to hold */
	}
	int id = ioctl(fd, NVME_IOCTL_ID);
	if (id < 0 || (uint32_t)id != nsid) {
		close(fd);
		return 0;
	}
	nv(bs)->claim_fd = fd;
	return 0;
}

static int nv_fail(struct backstore *bs, int rc)
{
	struct nvme_bs *n = nv(bs);
	if (n->claim_fd >= 0)
		close(n->claim_fd);
	n->claim_fd = -1;
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
	return rc;
}

/* Identify Controller and Namespace into n; the LBA size checked against what is asked. */
static int nv_identify_all(struct backstore *bs, const char *path, int fd, uint32_t nsid, struct nvme_ctrl_id *c,
			   struct nvme_ns_id *ns, char *err, size_t errlen)
{
	uint8_t *page = NULL;
	char why[256];
	int rc;
	if (posix_memalign((void **)&page, 4096, NVME_ID_SIZE)) {
		bs_errf(bs, err, errlen, "out of memory");
		return -ENOMEM;
	}
	memset(page, 0, NVME_ID_SIZE);
	if ((rc = nv_identify(fd, 0, 1, page)) != 0) {
		rc = nv_identify_fail(bs, path, "Identify Controller", rc, err, errlen);
		goto out;
	}
	/* CAP.MPSMIN is a register the kernel does not show us: 4 KiB, the smallest it can be. */
	if ((rc = nvme_parse_ctrl(page, 4096, c, why, sizeof(why))) < 0) {
		bs_errf(bs, err, errlen, "path '%s': Identify Controller: %s", path, why);
		goto out;
	}
	/* Controllers before NVMe 2.0 refuse CNS 6: no Write Zeroes limit then but NLB's. */
	memset(page, 0, NVME_ID_SIZE);
	if (nv_identify(fd, 0, 6, page) == 0)
		nvme_parse_ctrl_nvm(page, 4096, c);
	memset(page, 0, NVME_ID_SIZE);
	if ((rc = nv_identify(fd, nsid, 0, page)) != 0) {
		rc = nv_identify_fail(bs, path, "Identify Namespace", rc, err, errlen);
		goto out;
	}
	if ((rc = nvme_parse_ns(page, ns, why, sizeof(why))) < 0)
		bs_errf(bs, err, errlen, "path '%s': namespace %u: %s", path, nsid, why);
out:
	free(page);
	return rc;
}

/*
 * Does the kernel pass this process's admin commands (other than the
 * Identify pages of open) to the controller?  SANITIZE's erases need it, and
 * without CAP_SYS_ADMIN (the packaged unit leaves it out) they would be
 * offered, then fail and leave the LU in sanitize failure mode.  Asked the
 * only honest way: the ioctl the erase uses, on the same descriptor, with a
 * command that changes nothing (Get Log Page of SMART / Health Information,
 * mandatory in every NVMe version, RAE set so that no event is cleared).  A
 * status from the controller still means the kernel let it through.
 * 0, or the -errno the kernel refused it with.
 */
int nv_probe_admin(int fd)
{
	uint8_t *page = bs_alloc_aligned(512);
	if (!page)
		return -ENOMEM;
	/* NUMDL 127: the page's 128 dwords. */
	int rc = nv_admin_cmd(fd, NVME_ADMIN_GET_LOG_PAGE, 0xffffffffu, NVME_SMART_LOG | NVME_LOG_RAE | 127u << 16,
			      page, 512, 0);
	free(page);
	return rc < 0 ? rc : 0;
}

const char *nv_erase_word(const struct backstore *bs, bool crypto)
{
	const struct nvme_bs *n = nv(bs);
	struct nvme_erase e;

	nvme_erase_plan(&n->ctrl, &n->ns, n->geo.nsid, bs->size == n->ns.nsze * n->ns.lba_size, crypto, &e);
	if (e.how != NVME_ERASE_NONE && n->admin < 0)
		return "not offered (admin commands refused, below)";
	return e.how == NVME_ERASE_SANITIZE ? "by NVMe Sanitize" : e.how == NVME_ERASE_FORMAT ? "by Format NVM" :
	       "not offered";
}

static int nv_open(struct backstore *bs, const struct backstore_cfg *cfg, char *err, size_t errlen)
{
	struct stat st;
	if (stat(cfg->path, &st) < 0) {
		int e = errno;
		bs_errf(bs, err, errlen, "path '%s': %s", cfg->path, strerror(e));
		return -e;
	}
	if (!S_ISCHR(st.st_mode)) {
		bs_errf(bs, err, errlen, "path '%s': not a character device; type nvme takes a namespace's generic "
			"char device (/dev/ngXnY)%s", cfg->path,
			S_ISBLK(st.st_mode) ? " (a block device: use type block for /dev/nvme0n1)" :
			S_ISREG(st.st_mode) ? " (a regular file: use type file)" : "");
		return -ENODEV;
	}
	struct nvme_bs *n = nv(bs);
	n->claim_fd = -1;
	n->fd = open(cfg->path, O_CLOEXEC | (cfg->readonly ? O_RDONLY : O_RDWR));
	if (n->fd < 0) {
		int e = errno;
		bs_errf(bs, err, errlen, "path '%s': %s%s", cfg->path, strerror(e),
			e == EACCES || e == EPERM ? " (NVMe passthrough needs root)" : "");
		return nv_fail(bs, -e);
	}
	int id = ioctl(n->fd, NVME_IOCTL_ID);
	if (id <= 0) {
		int e = id < 0 ? errno : EINVAL;
		bs_errf(bs, err, errlen, "path '%s': not an NVMe namespace's generic char device (NVME_IOCTL_ID: %s); "
			"give /dev/ngXnY, or use type block", cfg->path, id < 0 ? strerror(e) : "no namespace");
		return nv_fail(bs, -e);
	}
	uint32_t nsid = (uint32_t)id;
	int rc = nv_identify_all(bs, cfg->path, n->fd, nsid, &n->ctrl, &n->ns, err, errlen);
	if (rc < 0)
		return nv_fail(bs, rc);
	uint32_t lbs = n->ns.lba_size;
	if (cfg->block_size && cfg->block_size != lbs) {
		bs_errf(bs, err, errlen, "block_size: %u differs from the LBA size %u of namespace %u at '%s'; give "
			"%u (or leave block_size out), or reformat the namespace", cfg->block_size, lbs, nsid,
			cfg->path, lbs);
		return nv_fail(bs, -EINVAL);
	}
	bs->block_size = lbs;
	uint64_t nsbytes = n->ns.nsze * lbs;
	if (cfg->size) {
		if (cfg->size > nsbytes) {
			bs_errf(bs, err, errlen, "size: %llu exceeds the size %llu of namespace %u at '%s'",
				(unsigned long long)cfg->size, (unsigned long long)nsbytes, nsid, cfg->path);
			return nv_fail(bs, -EINVAL);
		}
		if (cfg->size % lbs) {
			bs_errf(bs, err, errlen, "size: %llu is not a multiple of the LBA size %u",
				(unsigned long long)cfg->size, lbs);
			return nv_fail(bs, -EINVAL);
		}
		bs->size = cfg->size;
	} else {
		bs->size = nsbytes;
	}
	char blk[32];
	uint32_t qmax = 0, qsegs = 0;
	if (nv_block_name(cfg->path, blk, sizeof(blk))) {
		/* The namespace's queue limits bind passthrough too (blk_rq_map_user). */
		qmax = nv_sysfs_u32(blk, "max_hw_sectors_kb");
		qmax = qmax > UINT32_MAX / 1024 ? 0 : qmax * 1024;
		qsegs = nv_sysfs_u32(blk, "max_segments");
		if (!cfg->readonly && (rc = nv_claim(bs, cfg->path, blk, nsid, err, errlen)) < 0)
			return nv_fail(bs, rc);
	}
	while ((1u << n->geo.lba_shift) < lbs)
		n->geo.lba_shift++;
	n->geo.nsid = nsid;
	n->geo.max_io = nvme_max_io(n->ctrl.max_xfer, qmax, qsegs, lbs);
	n->geo.max_wz = n->ctrl.max_wz;
	bool wz = n->ctrl.oncs & NVME_ONCS_WRITE_ZEROES;
	if (wz && (n->ns.dlfeat & NVME_DLFEAT_WZ_DEAC) &&
	    (n->ns.dlfeat & NVME_DLFEAT_READ_MASK) == NVME_DLFEAT_READ_ZERO)
		n->unmap = NVME_STEP_WZ_DEAC;
	else if (n->ctrl.oncs & NVME_ONCS_DSM)
		n->unmap = NVME_STEP_DSM;
	else
		n->unmap = NVME_STEP_WZ;
	/* UNMAP reads back zeroes (LBPRZ) unless it is an advisory DSM deallocate. */
	bs->discard = cfg->thin && !cfg->readonly && n->unmap == NVME_STEP_DSM;
	bs->compare_write_max = 0;   /* see the header: fused commands cannot be passed through */
	nvme_serial(&n->ctrl, &n->ns, nsid, bs->serial, sizeof(bs->serial));
	if (!cfg->readonly && nv_sanitize_plans(bs))
		n->admin = nv_probe_admin(n->fd);
	log_info("backstore '%s': %s namespace %u (%s, serial %s, identity %s): %llu blocks of %u bytes, "
		 "%u bytes per command, write cache %s, UNMAP as %s, SANITIZE block erase %s, crypto erase %s",
		 bs->name, cfg->path, nsid, n->ctrl.model,
		 n->ctrl.serial, bs->serial,
		 (unsigned long long)n->ns.nsze, lbs, n->geo.max_io, n->ctrl.vwc ? "present" : "absent",
		 !cfg->thin ? "zeroes (not thin)" : n->unmap == NVME_STEP_WZ_DEAC ? "Write Zeroes with deallocate" :
		 n->unmap == NVME_STEP_DSM ? "DSM deallocate" : "zeroes (no DSM)",
		 nv_erase_word(bs, false), nv_erase_word(bs, true));
	if (n->admin < 0)
		log_warn("backstore '%s': SANITIZE BLOCK ERASE and CRYPTO ERASE not offered: the kernel refuses this "
			 "process NVMe admin commands (%s); Format NVM and Sanitize need CAP_SYS_ADMIN (docs/admin.md, "
			 "\"Sanitizing a LU\")", bs->name, strerror(-n->admin));
	return 0;
}

static void nv_close(struct backstore *bs)
{
	nv_fail(bs, 0);
}

/* The namespace's size now (Identify Namespace again): a resize follows it. */
static int nv_device_size(struct backstore *bs, uint64_t *bytes, char *err, size_t errlen)
{
	struct nvme_bs *n = nv(bs);
	struct nvme_ctrl_id c;
	struct nvme_ns_id ns;
	int rc = nv_identify_all(bs, "(open)", n->fd, n->geo.nsid, &c, &ns, err, errlen);
	if (rc < 0)
		return rc;
	if (ns.lba_size != bs->block_size) {
		bs_errf(bs, err, errlen, "the namespace was reformatted to %u-byte blocks (was %u); restart to serve it",
			ns.lba_size, bs->block_size);
		return -EINVAL;
	}
	*bytes = ns.nsze * ns.lba_size;
	return 0;
}

/* --- I/O --- */

bool nv_fua(const struct backstore *bs, const struct bs_io *io)
{
	return io->fua || !backstore_write_cache(bs);
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* The FILL buffer: whole patterns (or zeroes), a multiple of the block size too. */
static int nv_fill_buf(struct backstore *bs, struct bs_io *io, bool zero)
{
	uint64_t pat = zero ? bs->block_size : io->pattern_len;
	uint64_t unit = pat / gcd(pat, bs->block_size) * bs->block_size;
	if (unit > 4 * NV_FILL_MAX)
		return -EINVAL;
	uint64_t n = MAX(unit, NV_FILL_MAX / unit * unit);
	n = MIN(n, io->len);   /* io->len is a multiple of both, so of unit */
	int rc = bs_fill_bounce(io, zero, n);
	if (rc == 0)
		io->stage = NVME_STEP_FILL;
	return rc;
}

/* Zero [offset, offset+len): Write Zeroes, or Writes of a zeroed buffer. */
static int nv_zero_stage(struct backstore *bs, struct bs_io *io)
{
	struct nvme_bs *n = nv(bs);
	if ((n->ctrl.oncs & NVME_ONCS_WRITE_ZEROES) && !n->no_wz) {
		io->stage = NVME_STEP_WZ;
		return 0;
	}
	return nv_fill_buf(bs, io, true);
}

static int nv_unmap_stage(struct backstore *bs, struct bs_io *io)
{
	struct nvme_bs *n = nv(bs);
	if (!bs->thin || n->unmap == NVME_STEP_WZ || (n->unmap == NVME_STEP_WZ_DEAC && n->no_wz) ||
	    (n->unmap == NVME_STEP_DSM && n->no_dsm))
		return nv_zero_stage(bs, io);
	io->stage = n->unmap;
	if (n->unmap == NVME_STEP_DSM) {
		io->bounce = bs_alloc_aligned(sizeof(struct nvme_dsm_range));
		if (!io->bounce)
			return -ENOMEM;
	}
	return 0;
}

int nv_start(struct backstore *bs, struct bs_io *io)
{
	switch (io->op) {
	case BS_READ:
	case BS_WRITE:
		io->stage = io->op == BS_READ ? NVME_STEP_READ : NVME_STEP_WRITE;
		if ((uintptr_t)io->buf % 4) {
			io->bounce = bs_alloc_aligned((size_t)io->len);
			if (!io->bounce)
				return -ENOMEM;
			if (io->op == BS_WRITE)
				memcpy(io->bounce, io->buf, (size_t)io->len);
		}
		return 0;
	case BS_FLUSH:
		io->stage = NVME_STEP_FLUSH;
		/* Without a volatile write cache every completed write is already durable. */
		return nv(bs)->ctrl.vwc ? 0 : 1;
	case BS_UNMAP:
		return nv_unmap_stage(bs, io);
	case BS_WRITE_SAME:
		if (bs_is_zero(io->buf, io->pattern_len))
			return nv_zero_stage(bs, io);
		return nv_fill_buf(bs, io, false);
	case BS_WRITE_ATOMIC:
	case BS_COMPARE_WRITE:
		return -EOPNOTSUPP;   /* not offered: backstore_submit refuses them first */
	}
	return -EINVAL;
}

static void nv_plan(struct backstore *bs, struct bs_io *io, struct nvme_plan *p)
{
	*p = (struct nvme_plan){
		.step = (enum nvme_step)io->stage,
		.offset = io->offset,
		.len = io->len,
		.buf = io->bounce ? io->bounce : io->buf,
		.fill_len = io->bounce_len,
		.pattern_len = io->op == BS_WRITE_SAME ? io->pattern_len : bs->block_size,
		.fua = nv_fua(bs, io),
		.range = io->stage == NVME_STEP_DSM ? io->bounce : NULL,
	};
}

/* The command for the next piece; its length in *piece (0 for FLUSH). */
static void nv_next(struct backstore *bs, struct bs_io *io, struct nvme_uring_cmd *cmd, uint64_t *piece)
{
	struct nvme_plan p;
	nv_plan(bs, io, &p);
	*piece = nvme_build(&nv(bs)->geo, &p, io->done, cmd);
}

static void nv_log(struct backstore *bs, const struct nvme_uring_cmd *cmd, int res)
{
	char s[112];
	const char *what = res > 0 ? nvme_status_str(res, s, sizeof(s)) : strerror(-res);
	unsigned long long slba = (uint64_t)cmd->cdw11 << 32 | cmd->cdw10;
	if (!atomic_exchange_explicit(&nv(bs)->logged, true, memory_order_relaxed))
		log_warn("backstore '%s': NVMe opcode 0x%02x (LBA %llu) failed: %s", bs->name, cmd->opcode, slba, what);
	else
		log_limited(LOG_WARN, "backstore '%s': NVMe opcode 0x%02x (LBA %llu) failed: %s", bs->name,
			    cmd->opcode, slba, what);
}

int nv_result(struct backstore *bs, struct bs_io *io, int res)
{
	struct nvme_bs *n = nv(bs);
	struct nvme_uring_cmd cmd;
	uint64_t piece;
	enum nvme_step st = (enum nvme_step)io->stage;

	/*
	 * -EAGAIN: the ring could not take it now, so again.  Not -EINTR: from
	 * passthrough that is a command the driver cancelled (timeout, reset),
	 * and sending it again could wait out the timeout for ever.
	 */
	if (res == -EAGAIN)
		return 1;
	if (res > 0 && nvme_status_unsupported(res) &&
	    (st == NVME_STEP_WZ || st == NVME_STEP_WZ_DEAC || st == NVME_STEP_DSM)) {
		/* Not supported after all: fall back from here on, for this backstore. */
		int rc;
		if (st == NVME_STEP_DSM) {
			n->no_dsm = true;
			bs->discard = false;   /* UNMAP zeroes now: LBPRZ holds */
		} else {
			n->no_wz = true;
		}
		free(io->bounce);
		io->bounce = NULL;
		io->bounce_len = 0;
		rc = nv_zero_stage(bs, io);
		if (rc < 0) {
			io->err = rc;
			return 0;
		}
		return 1;
	}
	nv_next(bs, io, &cmd, &piece);
	if (res != 0) {
		nv_log(bs, &cmd, res);
		io->err = res < 0 ? res : nvme_status_errno(res);
		return 0;
	}
	io->done += piece;
	if ((st == NVME_STEP_DSM || st == NVME_STEP_WZ || st == NVME_STEP_WZ_DEAC) && io->done >= io->len &&
	    n->ctrl.vwc && nv_fua(bs, io)) {
		/*
		 * With the LU's write cache off (or FUA asked), a deallocate or
		 * zeroing is followed by a Flush before the command completes, like
		 * the file engine's punched holes: Dataset Management has no FUA bit,
		 * and Linux's NVMe target (nvmet) drops Write Zeroes' FUA.  Without
		 * it they may stay in the controller's cache past later FUA writes:
		 * the crash-consistency replay (tests/crash) found XFS's mkfs
		 * zeroing replayed over its journal.
		 */
		io->stage = NVME_STEP_FLUSH;
		return 1;
	}
	if (st == NVME_STEP_FLUSH || io->done >= io->len) {
		io->err = 0;
		return 0;
	}
	return 1;
}

static int nv_exec_sync(struct backstore *bs, const struct nvme_uring_cmd *c)
{
	struct nvme_passthru_cmd pc = {
		.opcode = c->opcode, .flags = c->flags, .nsid = c->nsid, .cdw2 = c->cdw2, .cdw3 = c->cdw3,
		.metadata = c->metadata, .addr = c->addr, .metadata_len = c->metadata_len, .data_len = c->data_len,
		.cdw10 = c->cdw10, .cdw11 = c->cdw11, .cdw12 = c->cdw12, .cdw13 = c->cdw13, .cdw14 = c->cdw14,
		.cdw15 = c->cdw15, .timeout_ms = c->timeout_ms,
	};
	int rc = ioctl(nv(bs)->fd, NVME_IOCTL_IO_CMD, &pc);
	return rc < 0 ? -errno : rc;
}

static void nv_prep(struct backstore *bs, struct bs_io *io, const struct nvme_uring_cmd *cmd,
		    struct io_uring_sqe *sqe)
{
	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, nv(bs)->fd, NULL, 0, 0);
	sqe->cmd_op = NVME_URING_CMD_IO;   /* after prep: it shares sqe->off */
	/* The command runs on into the SQE's second half (SQE128): address it past the declared field. */
	_Static_assert(sizeof(*cmd) <= 2 * sizeof(*sqe) - offsetof(struct io_uring_sqe, cmd), "nvme_uring_cmd fits");
	memcpy((uint8_t *)sqe + offsetof(struct io_uring_sqe, cmd), cmd, sizeof(*cmd));
	io_uring_sqe_set_data(sqe, &io->uop);
}

static void nv_cqe(struct reactor_uring_op *op, int res);

/* Issue the next piece (see fd_issue in fd.c: the same shape). */
static void nv_issue(struct backstore *bs, struct bs_io *io, bool in_submit)
{
	for (;;) {
		struct nvme_uring_cmd cmd;
		uint64_t piece;
		nv_next(bs, io, &cmd, &piece);
		if (!piece && io->stage != NVME_STEP_FLUSH) {
			io->err = -EINVAL;   /* a FILL buffer that cannot hold one block: cannot happen */
		} else {
			struct io_uring_sqe *sqe = io->reactor ? reactor_uring_sqe_cmd(io->reactor) : NULL;
			if (sqe) {
				io->uop.cb = nv_cqe;
				io->inflight = 1;
				nv_prep(bs, io, &cmd, sqe);
				return;
			}
			if (nv_result(bs, io, nv_exec_sync(bs, &cmd)))
				continue;
		}
		if (in_submit && io->reactor && reactor_defer(io->reactor, bs_finish_bounce_deferred, io) == 0)
			return;
		bs_finish_bounce(io);
		return;
	}
}

static void nv_cqe(struct reactor_uring_op *op, int res)
{
	struct bs_io *io = container_of(op, struct bs_io, uop);
	io->inflight = 0;
	if (nv_result(io->bs, io, res))
		nv_issue(io->bs, io, false);
	else
		bs_finish_bounce(io);
}

static void nv_submit(struct backstore *bs, struct bs_io *io)
{
	int rc = nv_start(bs, io);
	if (rc != 0) {
		io->err = rc < 0 ? rc : 0;
		bs_finish_bounce(io);
		return;
	}
	nv_issue(bs, io, true);
}

/*
 * SANITIZE's BLOCK ERASE and CRYPTO ERASE (target/scsi/cmd/sanitize.c): the
 * controller's own, where it has them for this namespace (nvme_erase_plan:
 * NVMe Sanitize when SANICAP has the action and this is the controller's
 * only namespace, else Format NVM with Secure Erase Settings in the current
 * LBA format), and only when the LU is the whole namespace: either command
 * erases all of it.  Admin commands, synchronous on the sanitize worker; a
 * Sanitize is then followed in its log page until it ends.
 */
static bool nv_whole(const struct backstore *bs)
{
	const struct nvme_bs *n = nv(bs);
	return bs->size == n->ns.nsze * n->ns.lba_size;
}

unsigned nv_sanitize_plans(const struct backstore *bs)
{
	const struct nvme_bs *n = nv(bs);
	struct nvme_erase e;
	unsigned m = 0;

	nvme_erase_plan(&n->ctrl, &n->ns, n->geo.nsid, nv_whole(bs), false, &e);
	if (e.how != NVME_ERASE_NONE)
		m |= BS_SANITIZE_BLOCK_ERASE;
	nvme_erase_plan(&n->ctrl, &n->ns, n->geo.nsid, nv_whole(bs), true, &e);
	if (e.how != NVME_ERASE_NONE)
		m |= BS_SANITIZE_CRYPTO_ERASE;
	return m;
}

static unsigned nv_sanitize_methods(const struct backstore *bs)
{
	return nv(bs)->admin < 0 ? 0 : nv_sanitize_plans(bs);
}

static int nv_admin(struct backstore *bs, uint8_t opcode, uint32_t nsid, uint32_t cdw10, void *buf, uint32_t len)
{
	/* A Format NVM of a large namespace takes its time: an hour. */
	int rc = nv_admin_cmd(nv(bs)->fd, opcode, nsid, cdw10, buf, len, 3600u * 1000u);
	if (rc < 0)
		return rc;
	if (rc > 0) {
		char s[112];
		log_warn("backstore '%s': NVMe admin opcode 0x%02x failed: %s", bs->name, opcode,
			 nvme_status_str(rc, s, sizeof(s)));
		return nvme_status_errno(rc);
	}
	return 0;
}

static int64_t nv_sanitize(struct backstore *bs, unsigned method, uint64_t offset, uint64_t len)
{
	struct nvme_bs *n = nv(bs);
	struct nvme_erase e;
	(void)len;

	nvme_erase_plan(&n->ctrl, &n->ns, n->geo.nsid, nv_whole(bs), method == BS_SANITIZE_CRYPTO_ERASE, &e);
	if (e.how == NVME_ERASE_NONE)
		return -EOPNOTSUPP;
	int rc = nv_admin(bs, e.opcode, e.nsid, e.cdw10, NULL, 0);
	if (rc < 0)
		return rc;
	if (e.how == NVME_ERASE_SANITIZE) {
		uint8_t *page = bs_alloc_aligned(512);
		uint16_t prog;
		if (!page)
			return -ENOMEM;
		/* Get Log Page, Sanitize Status: 128 dwords (NUMDL 127). */
		while ((rc = nv_admin(bs, NVME_ADMIN_GET_LOG_PAGE, 0xffffffffu, NVME_SANITIZE_LOG | 127u << 16, page,
				      512)) == 0 &&
		       (rc = nvme_sanitize_status(page, &prog)) == 0)
			sleep(1);
		free(page);
		if (rc < 0)
			return rc;
	}
	log_info("backstore '%s': namespace %u erased by %s", bs->name, n->geo.nsid,
		 e.how == NVME_ERASE_SANITIZE ? "NVMe Sanitize" : "Format NVM with Secure Erase Settings");
	return (int64_t)(bs->size - offset);   /* all of it at once */
}

static const char *nv_sanitize_how(const struct backstore *bs, unsigned method)
{
	const struct nvme_bs *n = nv(bs);
	struct nvme_erase e;

	nvme_erase_plan(&n->ctrl, &n->ns, n->geo.nsid, nv_whole(bs), method == BS_SANITIZE_CRYPTO_ERASE, &e);
	return e.how == NVME_ERASE_SANITIZE ? "NVMe Sanitize" : "Format NVM with Secure Erase Settings";
}

/* No cheap way to ask which blocks are deallocated (Get LBA Status is optional): report mapped. */
const struct bs_ops bs_nvme_ops = {
	.size = sizeof(struct nvme_bs),
	.open = nv_open,
	.close = nv_close,
	.submit = nv_submit,
	.lba_status = NULL,
	.device_size = nv_device_size,
	.sanitize_methods = nv_sanitize_methods,
	.sanitize = nv_sanitize,
	.sanitize_how = nv_sanitize_how,
	.path_hint = ": give the namespace's generic char device (/dev/ngXnY)",
};
