/*
 * Inside the nvme backstore (nvme.c), for its unit test: the store's own
 * fields and the engine's steps, so that a backstore filled in by hand is
 * driven without a device or a system call.  The SCSI layer and the other
 * kinds know bs_nvme_ops only (backstore_impl.h).
 */
#ifndef NVME_INT_H
#define NVME_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "target/backstore/backstore_impl.h"
#include "target/backstore/nvme_cmd.h"

struct nvme_bs {
	struct backstore bs;
	int fd;                  /* the namespace's generic char device */
	struct nvme_geo geo;
	struct nvme_ctrl_id ctrl;
	struct nvme_ns_id ns;
	enum nvme_step unmap;    /* UNMAP on a thin backstore: NVME_STEP_DSM, _WZ_DEAC, or zeroing (_WZ) */
	int claim_fd;            /* the namespace's block device, held O_EXCL; -1 if none */
	int admin;               /* nv_probe_admin at open: 0, or -errno (SANITIZE's erases withheld) */
	/* Learned at run time, shared by reactors: only ever set to true. */
	_Atomic bool no_wz, no_dsm, logged;
};

/* "/dev/ng0n1" -> "nvme0n1", the block device of the same namespace (without native multipath). */
bool nv_block_name(const char *path, char *out, size_t outlen);
/* Does the kernel pass this process's admin commands to the controller?  0, or the -errno it refused them with. */
int nv_probe_admin(int fd);
/* For the open log line: how SANITIZE would erase, or why not. */
const char *nv_erase_word(const struct backstore *bs, bool crypto);
/* The erases the controller has for this LU, whether or not the kernel lets us send them. */
unsigned nv_sanitize_plans(const struct backstore *bs);

/* Is this write FUA: asked for, or the LU has no write cache? */
bool nv_fua(const struct backstore *bs, const struct bs_io *io);
/* Stage and buffers of a new request; 1: nothing to send (done), 0: go, <0: error. */
int nv_start(struct backstore *bs, struct bs_io *io);
/* One command ended with res: 1 = issue the next, 0 = finished (io->err set). */
int nv_result(struct backstore *bs, struct bs_io *io, int res);

#endif
