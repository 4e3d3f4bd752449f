/*
 * NVMe for the nvme backstore without I/O: Identify parsing, commands per
 * request piece, status to errno.  See nvme_cmd.h; nvme.c's header says
 * how the pieces are sent.
 *
 * NVMe status (the kernel's cqe->res > 0: SC in bits 7:0, SCT in 10:8,
 * CRD/More/DNR above, ignored here) to -errno:
 *
 *   SCT SC   meaning                                  errno
 *   0   01h  Invalid Command Opcode                   -EOPNOTSUPP (Write Zeroes, DSM: fall back)
 *   0   02h  Invalid Field in Command                 -EINVAL     (Write Zeroes, DSM: fall back)
 *   0   0Bh  Invalid Namespace or Format              -ENODEV
 *   0   15h  Operation Denied                         -EPERM
 *   0   20h  Namespace is Write Protected             -EROFS
 *   0   21h  Command Interrupted                      -EBUSY
 *   0   22h  Transient Transport Error                -EBUSY
 *   0   80h  LBA Out of Range                         -EINVAL
 *   0   81h  Capacity Exceeded                        -ENOSPC
 *   0   82h  Namespace Not Ready                      -EBUSY
 *   0   83h  Reservation Conflict                     -EBADE (as the kernel's block layer)
 *   0   84h  Format In Progress                       -EBUSY
 *   1   80h  Conflicting Attributes (DSM)             -EINVAL
 *   1   81h  Invalid Protection Information           -EINVAL
 *   1   82h  Attempted Write to Read Only Range       -EROFS
 *   2   80h  Write Fault                              -EIO
 *   2   81h  Unrecovered Read Error                   -EIO
 *   2   82h-84h End-to-end Guard/Application/Reference Tag Check Error  -EIO
 *   2   85h  Compare Failure                          -EILSEQ (the SCSI layer's MISCOMPARE)
 *   2   86h  Access Denied                            -EACCES
 *   2   87h  Deallocated or Unwritten Logical Block   -ENODATA
 *   anything else (Data Transfer Error, Internal Error, path errors...)  -EIO
 *
 * The SCSI layer turns every error but -EILSEQ into a MEDIUM ERROR; the
 * errno is for the log line and for the fall-backs.
 */
#include "target/backstore/nvme_cmd.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16; }
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* An ASCII field of Identify Controller: trailing spaces cut, anything unprintable as '_'. */
static void id_str(char *dst, const uint8_t *src, size_t n)
{
	size_t end = n;
	while (end && (src[end - 1] == ' ' || src[end - 1] == 0))
		end--;
	for (size_t i = 0; i < end; i++)
		dst[i] = src[i] > 0x20 && src[i] < 0x7f ? (char)src[i] : '_';
	dst[end] = 0;
}

int nvme_parse_ctrl(const uint8_t *id, uint32_t page_size, struct nvme_ctrl_id *c, char *why, size_t whylen)
{
	memset(c, 0, sizeof(*c));
	id_str(c->serial, id + 4, 20);
	id_str(c->model, id + 24, 40);
	uint8_t mdts = id[77];
	if (page_size < 4096 || (page_size & (page_size - 1))) {
		snprintf(why, whylen, "CAP.MPSMIN page size %u is not a power of two of at least 4096", page_size);
		return -EINVAL;
	}
	/* MDTS counts in pages as a power of two; past 2 GiB it is no limit worth keeping. */
	if (mdts) {
		uint64_t m = (uint64_t)page_size << (mdts < 20 ? mdts : 20);
		c->max_xfer = m > (1u << 31) ? (1u << 31) : (uint32_t)m;
	}
	c->oacs = le16(id + 256);
	c->sanicap = le32(id + 328);
	c->nn = le32(id + 516);
	c->fna = id[524];
	c->oncs = le16(id + 520);
	c->fuses = le16(id + 522);
	c->vwc = id[525] & 1;
	return 0;
}

/* WZSL counts in CAP.MPSMIN pages as a power of two, as MDTS does; 0 is no limit. */
void nvme_parse_ctrl_nvm(const uint8_t *id, uint32_t page_size, struct nvme_ctrl_id *c)
{
	uint8_t wzsl = id[1];
	c->max_wz = 0;
	if (wzsl) {
		uint64_t m = (uint64_t)page_size << (wzsl < 20 ? wzsl : 20);
		c->max_wz = m > (1u << 31) ? (1u << 31) : (uint32_t)m;
	}
}

int nvme_parse_ns(const uint8_t *id, struct nvme_ns_id *n, char *why, size_t whylen)
{
	memset(n, 0, sizeof(*n));
	n->nsze = le64(id);
	uint8_t nlbaf = id[25], flbas = id[26];
	if (n->nsze == 0) {
		snprintf(why, whylen, "NSZE is 0: the namespace has no blocks (is it attached to this controller "
			 "and formatted? see nvme list-ns)");
		return -EINVAL;
	}
	if (nlbaf > 63) {
		snprintf(why, whylen, "NLBAF %u is past the 64 LBA formats Identify Namespace holds", nlbaf);
		return -EINVAL;
	}
	/* Past 16 formats, FLBAS bits 6:5 are the index's high bits (NVMe 2.0). */
	unsigned idx = flbas & 0x0f;
	if (nlbaf > 15)
		idx |= (unsigned)((flbas >> 5) & 3) << 4;
	if (idx > nlbaf) {
		snprintf(why, whylen, "FLBAS selects LBA format %u, but NLBAF says there are only %u", idx,
			 nlbaf + 1u);
		return -EINVAL;
	}
	uint32_t lbaf = le32(id + 128 + 4 * idx);
	unsigned ms = lbaf & 0xffff, lbads = (lbaf >> 16) & 0xff;
	if (ms) {
		snprintf(why, whylen, "LBA format %u has %u bytes of metadata per block, which this backstore cannot "
			 "carry; format the namespace with a format without metadata (nvme id-ns -H lists them)",
			 idx, ms);
		return -EINVAL;
	}
	if (lbads < 9 || lbads > 12) {
		snprintf(why, whylen, "LBA format %u has LBADS %u (blocks of 2^%u bytes); only 512 to 4096-byte "
			 "blocks are served", idx, lbads, lbads);
		return -EINVAL;
	}
	if (n->nsze > UINT64_MAX >> lbads) {
		snprintf(why, whylen, "NSZE %llu blocks of %u bytes overflows 64 bits", (unsigned long long)n->nsze,
			 1u << lbads);
		return -EINVAL;
	}
	n->lba_size = 1u << lbads;
	n->lbaf = (uint8_t)idx;
	n->dlfeat = id[33];
	memcpy(n->nguid, id + 104, 16);
	memcpy(n->eui64, id + 120, 8);
	return 0;
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static void hex(char *out, size_t outlen, const uint8_t *p, size_t n)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 3 <= outlen; i++, o += 2)
		snprintf(out + o, 3, "%02x", p[i]);
	if (outlen)
		out[o < outlen ? o : outlen - 1] = 0;
}

void nvme_serial(const struct nvme_ctrl_id *c, const struct nvme_ns_id *n, uint32_t nsid, char *out, size_t outlen)
{
	/* NGUID and EUI64 are the namespace's own, the same through any controller or host. */
	if (!all_zero(n->nguid, sizeof(n->nguid)))
		hex(out, outlen, n->nguid, sizeof(n->nguid));
	else if (!all_zero(n->eui64, sizeof(n->eui64)))
		hex(out, outlen, n->eui64, sizeof(n->eui64));
	else
		snprintf(out, outlen, "%s-%u", c->serial[0] ? c->serial : "nvme", nsid);
}

uint32_t nvme_max_io(uint32_t mdts_bytes, uint32_t queue_max_bytes, uint32_t queue_max_segments,
		     uint32_t lba_size)
{
	uint64_t m = mdts_bytes ? mdts_bytes : UINT32_MAX;
	if (queue_max_bytes)
		m = m < queue_max_bytes ? m : queue_max_bytes;
	/* A buffer not page aligned touches one page more than its length in pages. */
	if (queue_max_segments > 1 && (uint64_t)(queue_max_segments - 1) * 4096 < m)
		m = (uint64_t)(queue_max_segments - 1) * 4096;
	/*
	 * The queue's limits unknown: the kernel's may be below MDTS (its own
	 * transfer cap, a segment per scattered page), and a command past them
	 * fails; stay under what any NVMe queue takes.
	 */
	if (!queue_max_bytes && !queue_max_segments && m > NVME_DEFAULT_MAX_IO)
		m = NVME_DEFAULT_MAX_IO;
	if (m > (uint64_t)NVME_MAX_NLB * lba_size)
		m = (uint64_t)NVME_MAX_NLB * lba_size;
	m -= m % lba_size;
	return m ? (uint32_t)m : lba_size;
}

/* Starting LBA and NLB-1 of [off, off+len). */
static void lba_range(struct nvme_uring_cmd *cmd, const struct nvme_geo *g, uint64_t off, uint64_t len)
{
	uint64_t slba = off >> g->lba_shift;
	cmd->cdw10 = (uint32_t)slba;
	cmd->cdw11 = (uint32_t)(slba >> 32);
	cmd->cdw12 = (uint32_t)((len >> g->lba_shift) - 1) & 0xffff;
}

static void data(struct nvme_uring_cmd *cmd, const void *buf, uint64_t len)
{
	cmd->addr = (uint64_t)(uintptr_t)buf;
	cmd->data_len = (uint32_t)len;
}

uint64_t nvme_build(const struct nvme_geo *g, const struct nvme_plan *p, uint64_t done, struct nvme_uring_cmd *cmd)
{
	uint64_t left = p->len > done ? p->len - done : 0;
	uint64_t piece = 0, bsz = 1ull << g->lba_shift;

	memset(cmd, 0, sizeof(*cmd));
	cmd->nsid = g->nsid;
	switch (p->step) {
	case NVME_STEP_FLUSH:
		cmd->opcode = NVME_OPC_FLUSH;
		return 0;
	case NVME_STEP_READ:
	case NVME_STEP_WRITE:
		piece = left < g->max_io ? left : g->max_io;
		if (!piece)
			return 0;
		cmd->opcode = p->step == NVME_STEP_READ ? NVME_OPC_READ : NVME_OPC_WRITE;
		lba_range(cmd, g, p->offset + done, piece);
		data(cmd, p->buf + done, piece);
		if (p->step == NVME_STEP_WRITE && p->fua)
			cmd->cdw12 |= NVME_RW_FUA;
		return piece;
	case NVME_STEP_FILL: {
		/* Each piece starts where the pattern stands: the buffer holds whole patterns from its start. */
		uint64_t phase = p->pattern_len ? done % p->pattern_len : 0;
		uint64_t avail = p->fill_len > phase ? p->fill_len - phase : 0;
		piece = left < g->max_io ? left : g->max_io;
		piece = piece < avail ? piece : avail;
		piece -= piece % bsz;
		if (!piece)
			return 0;
		cmd->opcode = NVME_OPC_WRITE;
		lba_range(cmd, g, p->offset + done, piece);
		data(cmd, p->buf + phase, piece);
		if (p->fua)
			cmd->cdw12 |= NVME_RW_FUA;
		return piece;
	}
	case NVME_STEP_WZ:
	case NVME_STEP_WZ_DEAC: {
		uint64_t most = (uint64_t)NVME_MAX_NLB * bsz;
		if (g->max_wz && g->max_wz < most)
			most = g->max_wz >= bsz ? g->max_wz - g->max_wz % bsz : bsz;
		piece = left < most ? left : most;
		if (!piece)
			return 0;
		cmd->opcode = NVME_OPC_WRITE_ZEROES;
		lba_range(cmd, g, p->offset + done, piece);
		if (p->step == NVME_STEP_WZ_DEAC)
			cmd->cdw12 |= NVME_WZ_DEAC;
		if (p->fua)
			cmd->cdw12 |= NVME_RW_FUA;
		return piece;
	}
	case NVME_STEP_DSM: {
		piece = left < (uint64_t)NVME_DSM_MAX_NLB * bsz ? left : (uint64_t)NVME_DSM_MAX_NLB * bsz;
		if (!piece)
			return 0;
		uint64_t slba = (p->offset + done) >> g->lba_shift;
		p->range->cattr = 0;
		p->range->nlb = htole32((uint32_t)(piece >> g->lba_shift));
		p->range->slba = htole64(slba);
		cmd->opcode = NVME_OPC_DSM;
		cmd->cdw10 = 0;               /* NR: one range (zero-based) */
		cmd->cdw11 = NVME_DSM_AD;
		data(cmd, p->range, sizeof(*p->range));
		return piece;
	}
	}
	return 0;
}

static int sct_of(int status) { return (status >> 8) & 7; }
static int sc_of(int status) { return status & 0xff; }

int nvme_status_errno(int status)
{
	int sct = sct_of(status), sc = sc_of(status);
	if (status <= 0)
		return status;
	switch (sct) {
	case 0:
		switch (sc) {
		case 0x00: return 0;
		case 0x01: return -EOPNOTSUPP;
		case 0x02: return -EINVAL;
		case 0x0b: return -ENODEV;
		case 0x15: return -EPERM;
		case 0x20: return -EROFS;
		case 0x21: case 0x22: return -EBUSY;
		case 0x80: return -EINVAL;
		case 0x81: return -ENOSPC;
		case 0x82: return -EBUSY;
		case 0x83: return -EBADE;
		case 0x84: return -EBUSY;
		}
		break;
	case 1:
		switch (sc) {
		case 0x80: case 0x81: return -EINVAL;
		case 0x82: return -EROFS;
		}
		break;
	case 2:
		switch (sc) {
		case 0x85: return -EILSEQ;
		case 0x86: return -EACCES;
		case 0x87: return -ENODATA;
		}
		break;
	}
	return -EIO;
}

bool nvme_status_unsupported(int status)
{
	return status > 0 && sct_of(status) == 0 && (sc_of(status) == 0x01 || sc_of(status) == 0x02);
}

const char *nvme_status_str(int status, char *buf, size_t len)
{
	static const struct { int sct, sc; const char *name; } names[] = {
		{ 0, 0x01, "Invalid Command Opcode" }, { 0, 0x02, "Invalid Field in Command" },
		{ 0, 0x04, "Data Transfer Error" }, { 0, 0x06, "Internal Error" },
		{ 0, 0x0b, "Invalid Namespace or Format" }, { 0, 0x15, "Operation Denied" },
		{ 0, 0x20, "Namespace is Write Protected" }, { 0, 0x21, "Command Interrupted" },
		{ 0, 0x22, "Transient Transport Error" }, { 0, 0x80, "LBA Out of Range" },
		{ 0, 0x81, "Capacity Exceeded" }, { 0, 0x82, "Namespace Not Ready" },
		{ 0, 0x83, "Reservation Conflict" }, { 0, 0x84, "Format In Progress" },
		{ 1, 0x80, "Conflicting Attributes" }, { 1, 0x81, "Invalid Protection Information" },
		{ 1, 0x82, "Attempted Write to Read Only Range" },
		{ 2, 0x80, "Write Fault" }, { 2, 0x81, "Unrecovered Read Error" },
		{ 2, 0x82, "End-to-end Guard Check Error" }, { 2, 0x83, "End-to-end Application Tag Check Error" },
		{ 2, 0x84, "End-to-end Reference Tag Check Error" }, { 2, 0x85, "Compare Failure" },
		{ 2, 0x86, "Access Denied" }, { 2, 0x87, "Deallocated or Unwritten Logical Block" },
	};
	const char *name = "?";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].sct == sct_of(status) && names[i].sc == sc_of(status))
			name = names[i].name;
	snprintf(buf, len, "status 0x%x: SCT %xh SC %02xh (%s)%s", (unsigned)status, (unsigned)sct_of(status),
		 (unsigned)sc_of(status), name, status & 0x4000 ? ", do not retry" : "");
	return buf;
}

void nvme_erase_plan(const struct nvme_ctrl_id *c, const struct nvme_ns_id *ns, uint32_t nsid, bool whole,
		     bool crypto, struct nvme_erase *e)
{
	memset(e, 0, sizeof(*e));
	if (!whole)
		return;   /* both commands act on the whole namespace at least: never on a part of it */
	if ((c->sanicap & (crypto ? NVME_SANICAP_CES : NVME_SANICAP_BES)) && c->nn == 1) {
		e->how = NVME_ERASE_SANITIZE;
		e->opcode = NVME_ADMIN_SANITIZE;
		e->cdw10 = crypto ? 0x4 : 0x2;   /* SANACT: 100b crypto erase, 010b block erase */
		return;
	}
	if (!(c->oacs & NVME_OACS_FORMAT) || (crypto && !(c->fna & NVME_FNA_CRYPTO)))
		return;
	if ((c->fna & (NVME_FNA_FORMAT_ALL | NVME_FNA_SECERASE_ALL)) && c->nn != 1)
		return;   /* it would erase the other namespaces too */
	e->how = NVME_ERASE_FORMAT;
	e->opcode = NVME_ADMIN_FORMAT_NVM;
	e->nsid = nsid;
	/* LBAF bits 3:0 and 5:4 (in 13:12), no metadata, no PI; SES 001b user data erase, 010b crypto. */
	e->cdw10 = (ns->lbaf & 0x0fu) | (uint32_t)(ns->lbaf >> 4 & 3) << 12 | (crypto ? 2u : 1u) << 9;
}

int nvme_sanitize_status(const uint8_t *log, uint16_t *progress)
{
	*progress = le16(log);
	switch (le16(log + 2) & 7) {
	case 1:   /* completed */
	case 4:   /* completed, no deallocation */
		return 1;
	case 2:
		return 0;
	case 3:
		return -EIO;
	default:  /* never sanitized: the command did not start one */
		return -EIO;
	}
}
