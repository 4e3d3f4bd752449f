/*
 * The SCSI layer through its public seam: random CDBs and Data-Out from
 * several nexuses against a RAM LU whose identity (target and initiator
 * names, serial, vendor strings, LUN map) comes from the input, up to the
 * configured maxima (names 223 bytes, serial 64, 16384 LUNs); thin or
 * thick, 512- or 4096-byte blocks, read-only mappings and backstores, unit
 * attentions and reservations carried from command to command.
 *
 * Input:
 *   setup, 12 bytes:
 *     [0] LU: bit0 thin, bit1 4096-byte blocks, bit2 read-only backstore,
 *         bit3 write cache, bit4 serial derived from the name
 *     [1] bits 0-1: nexuses - 1; bits 2-5: nexus i mapped read-only;
 *         bit 6: nexuses 0 and 1 are two ports of one initiator; bit 7: ALUA
 *         explicit mode too (SET TARGET PORT GROUPS accepted).  Nexuses 0 and 2
 *         are port tag (group 1, active/optimized), 1 and 3 port tag + 1
 *         (group 2, active/non-optimized, with remote port 300).
 *     [2] target name length, [3] initiator name length (% 224; 0 = short names)
 *     [4] serial length (% 65), [5] vendor/product/revision lengths
 *     [6-7] LUN map count (LE, % 16385), [8] character seed for names,
 *     [9] LU size: 8 + n % 121 blocks, [10-11] target portal group tag (LE)
 *   then commands, until the input ends (at most 64):
 *     [0] bits 0-1: nexus; bit 2: unmapped LUN (lu NULL); bit 3: defer (prepare,
 *         run the next command whole, then execute); bit 4: instead of a command,
 *         a task management event (cdb[0] % 6 picks it); bit 5: the transport
 *         sends from any memory (TCP: READs of 16 KiB or more as views)
 *     [1] bit 0: R, bit 1: W, bits 2-4: EDTL class, bits 5-6: CDB length 16/6/10/12
 *     [2-5] EDTL (LE, cut by its class), [6-21] CDB, [22-23] n (LE),
 *     then n bytes of Data-Out, taken whatever happens to the command (so one
 *     command's fate does not shift the next): the first dout_len of them go
 *     to the buffer, zeroes after them.  A WRITE USING TOKEN whose ROD TOKEN
 *     field starts FF 'R' 'P' 'L' gets the last token a RECEIVE ROD TOKEN
 *     INFORMATION returned in this input instead (the input cannot know its
 *     random part), one bit flipped at token byte 2 * n % 512 when the
 *     field's byte 4 is n > 0: the copy and the refusal of an altered token.
 *
 * Invariants besides "no crash, leak or hang" (ASan sees each buffer at
 * exactly the size asked for: this file is the buffer pool, one malloc each):
 * done is called once after exec and never after a refused prepare; status
 * is one the layer may return; CHECK CONDITION carries well-formed sense and
 * nothing else does; Data-Out and Data-In stay within the EDTL, the
 * direction bits and the buffer, Data-In within the allocation length; the
 * length field of an emulated answer is at least what went out and exactly
 * that when nothing cut it, and the residual agrees; a whole answer's
 * descriptors and pages fill it exactly; READ returns the medium
 * and WRITE lands on it; a read-only mapping or backstore (or SWP when the
 * command began) never reaches the medium with a write, nor changes the LU's
 * mode, power or medium state; with WCE=0 every write is FUA and a
 * deallocation is followed by a FLUSH; every buffer is back after release.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "fuzz.h"
#include "target/scsi/alua/alua.h"
#include "target/scsi/cmd/sanitize.h"
#include "target/backstore/backstore_impl.h"
#include "target/scsi/scsi_int.h"

#define MAX_NEXUS 4
#define MAX_CMDS 64
#define MAX_LUNS 16384

extern struct bufpool *scsi_test_pool;

/* ---- the buffer pool: one exact-size malloc per buffer ---- */

struct bufpool {
	size_t in_use;
};

struct bufpool *bufpool_create(void)
{
	return calloc(1, sizeof(struct bufpool));
}

void bufpool_destroy(struct bufpool *p)
{
	free(p);
}

int bufpool_dev_attach(struct bufpool *p, const struct bufpool_reg_ops *ops)
{
	return -ENOTSUP;
}

bool bufpool_dev_detach(struct bufpool *p, int idx)
{
	return false;
}

bool bufpool_dev_gone(struct bufpool *p, int idx)
{
	return false;
}

int bufpool_dev_find(const struct bufpool *p, const void *ctx)
{
	return -1;
}

struct buf *bufpool_get(struct bufpool *p, size_t len)
{
	struct buf *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->data = malloc(len ? len : 1);
	if (!b->data) {
		free(b);
		return NULL;
	}
	b->len = b->cap = len;
	b->pool = p;
	p->in_use++;
	return b;
}

void bufpool_put(struct buf *b)
{
	if (!b)
		return;
	b->pool->in_use--;
	free(b->data);
	free(b);
}

size_t bufpool_in_use(const struct bufpool *p)
{
	return p->in_use;
}

/* ---- what reaches the backstore during one command ---- */

static struct {
	unsigned writes, unfua_writes, unmaps, flushes;
	unsigned last_unmap, last_flush, n;
} seen;
static const struct bs_ops *ram_ops;
static struct bs_ops recording_ops;

static void recording_submit(struct backstore *bs, struct bs_io *io)
{
	seen.n++;
	switch (io->op) {
	case BS_WRITE:
	case BS_WRITE_SAME:
	case BS_WRITE_ATOMIC:
	case BS_COMPARE_WRITE:
		seen.writes++;
		seen.unfua_writes += !io->fua;
		break;
	case BS_UNMAP:
		seen.unmaps++;
		seen.last_unmap = seen.n;
		break;
	case BS_FLUSH:
		seen.flushes++;
		seen.last_flush = seen.n;
		break;
	case BS_READ:
		break;
	}
	ram_ops->submit(bs, io);
}

/* ---- input ---- */

struct world {
	struct scsi_alua *alua;
	struct backstore *bs;
	struct scsi_lu *lu;
	struct scsi_nexus nx[MAX_NEXUS];
	bool ro[MAX_NEXUS];
	unsigned nnx;
	struct scsi_lun_map map;
};

static uint64_t all_luns[MAX_LUNS];

/* A name of len characters (at least a short one), from a small alphabet. */
static void make_name(char *dst, size_t len, const char *prefix, uint8_t seed)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz0123456789.-:";
	size_t n = strlen(prefix);

	if (len < n + 1)
		len = n + 1;
	memcpy(dst, prefix, n);
	for (size_t i = n; i < len; i++)
		dst[i] = abc[(seed + i * 7) % (sizeof(abc) - 1)];
	dst[len] = 0;
}

static bool world_make(struct world *w, struct fuzz_in *in)
{
	uint8_t lf = fuzz_u8(in), nf = fuzz_u8(in);
	uint8_t tlen = fuzz_u8(in) % 224, ilen = fuzz_u8(in) % 224, slen = fuzz_u8(in) % 65;
	uint8_t vlen = fuzz_u8(in);
	uint32_t nluns = (fuzz_u8(in) | (uint32_t)fuzz_u8(in) << 8) % (MAX_LUNS + 1);
	uint8_t seed = fuzz_u8(in), size = fuzz_u8(in);
	uint16_t tpgt = (uint16_t)(fuzz_u8(in) | fuzz_u8(in) << 8);
	char serial[65], vendor[9], product[17], revision[5], tname[224], iname[224], err[128];
	uint32_t bsz = (lf & 2) ? 4096 : 512;
	struct backstore_cfg cfg = { .name = "fuzz", .type = BACKSTORE_RAM, .block_size = bsz,
				     .size = (uint64_t)(8 + size % 121) * bsz, .thin = lf & 1,
				     .readonly = lf & 4, .write_cache = lf & 8 };

	memset(w, 0, sizeof(*w));
	for (uint32_t i = all_luns[1] ? MAX_LUNS : 0; i < MAX_LUNS; i++)
		all_luns[i] = i;
	if (backstore_open(&cfg, &w->bs, err, sizeof(err)) < 0)
		return false;
	ram_ops = w->bs->ops;
	recording_ops = *ram_ops;
	recording_ops.submit = recording_submit;
	w->bs->ops = &recording_ops;

	make_name(serial, slen, "", seed);
	make_name(vendor, vlen & 7 ? (vlen & 7) + 1u : 8, "", seed + 1);
	make_name(product, (vlen >> 3) & 15 ? ((vlen >> 3) & 15) + 1u : 16, "", seed + 2);
	make_name(revision, (vlen >> 7) ? 4 : 1, "", seed + 3);
	struct scsi_lu_params p = { .vendor = vendor, .product = product, .revision = revision,
				    .serial = (lf & 16) ? NULL : serial, .name = "fuzz" };
	if (scsi_lu_create(w->bs, &p, &w->lu) < 0) {
		backstore_close(w->bs);
		return false;
	}

	make_name(tname, tlen, "iqn.2026-11.org.fuzz:", seed);
	/* ALUA: two target port groups, states as configured at every input (STPG changes them). */
	uint16_t g1[] = { tpgt }, g2[] = { (uint16_t)(tpgt + 1), 300 };
	struct scsi_alua_group groups[] = {
		{ .id = 1, .state = ALUA_ACTIVE_OPTIMIZED, .preferred = true, .ports = g1, .nports = 1 },
		{ .id = 2, .state = ALUA_ACTIVE_NONOPTIMIZED, .ports = g2, .nports = tpgt + 1u == 300 ? 1 : 2 },
	};
	w->alua = scsi_alua_get("iqn.2026-11.org.fuzz:alua");
	if (!w->alua || scsi_alua_configure(w->alua, SCSI_ALUA_IMPLICIT | ((nf & 0x80) ? SCSI_ALUA_EXPLICIT : 0), 3,
					    groups, 2)) {
		scsi_lu_destroy(w->lu);
		backstore_close(w->bs);
		return false;
	}
	w->nnx = (nf & 3) + 1u;
	for (unsigned i = 0; i < w->nnx; i++) {
		struct scsi_nexus *n = &w->nx[i];
		unsigned who = (nf & 0x40) && i == 1 ? 0 : i;   /* two ports of one initiator */

		make_name(iname, ilen > who ? ilen - who : 0, "iqn.2026-11.org.fuzz:i", (uint8_t)(seed + 16 * who));
		snprintf(n->initiator_name, sizeof(n->initiator_name), "%s", iname);
		snprintf(n->initiator_port, sizeof(n->initiator_port), "%s,i,0x%012x", iname, 0x23d000u + i);
		snprintf(n->target_name, sizeof(n->target_name), "%s", tname);
		snprintf(n->target_port, sizeof(n->target_port), "%s,t,0x%04x", tname, tpgt);
		n->rel_port_id = (uint16_t)(tpgt + (i & 1));
		n->port = scsi_alua_port(w->alua, n->rel_port_id);
		n->alua_gen = scsi_alua_gen(n->port);
		n->id = i + 1;
		w->ro[i] = nf & (4u << i);
	}
	w->map.count = nluns;
	w->map.luns = all_luns;
	return true;
}

static void world_free(struct world *w)
{
	scsi_lu_destroy(w->lu);
	backstore_close(w->bs);
}

static uint32_t edtl_of(uint8_t cls, uint32_t raw)
{
	static const uint32_t cut[] = { 1, 64, 600, 8192, 70000, 1u << 20, 0, 4096 };

	return cls == 6 ? raw : raw % cut[cls];
}

/* ---- invariants ---- */

static void check_sense(const struct scsi_cmd *c)
{
	const uint8_t *s = c->sense;
	uint8_t key;
	uint16_t asc;

	FUZZ_CHECK(c->sense_len >= 8 && c->sense_len <= SCSI_SENSE_LEN, "sense length %u", c->sense_len);
	if ((s[0] & 0x7f) == 0x70) {
		FUZZ_CHECK(c->sense_len == 18 && s[7] == 10, "fixed sense of %u bytes, additional %u",
			   c->sense_len, s[7]);
		key = s[2] & 0x0f;
		asc = get_be16(s + 12);
	} else {
		FUZZ_CHECK(s[0] == 0x72, "sense response code %02x", s[0]);
		FUZZ_CHECK(c->sense_len == 8u + s[7], "descriptor sense of %u bytes, additional %u",
			   c->sense_len, s[7]);
		for (uint32_t off = 8; off < c->sense_len; off += 2u + s[off + 1])
			FUZZ_CHECK(off + 2 <= c->sense_len && off + 2u + s[off + 1] <= c->sense_len,
				   "sense descriptor at %u runs past %u", off, c->sense_len);
		key = s[1] & 0x0f;
		asc = get_be16(s + 2);
	}
	FUZZ_CHECK(key != SK_NO_SENSE && key <= SK_MISCOMPARE, "sense key %x", key);
	/* EXTENDED COPY's segment errors say where in the segment pointer; their ASC may be 00h/00h. */
	FUZZ_CHECK(asc != 0 || key == SK_COPY_ABORTED, "ASC 0 with key %x", key);
}

/*
 * The allocation length of an emulated Data-In command and where its full
 * length is written (header bytes needed, value); 0 when not an emulated read.
 */
static uint32_t din_alloc(const struct scsi_cmd *c, uint32_t *hdr, uint64_t *full)
{
	const uint8_t *cdb = c->cdb, *d = c->buf ? c->buf->data : NULL;
	uint32_t alloc = 0, h = 0;
	uint64_t f = 0;
	uint8_t sa = cdb[1] & 0x1f;

	switch (cdb[0]) {
	case SCSI_OP_INQUIRY:
		alloc = get_be16(cdb + 3);
		h = (cdb[1] & 1) ? 4 : 5;
		if (d && c->din_len >= h)
			f = (cdb[1] & 1) ? get_be16(d + 2) + 4u : d[4] + 5u;
		break;
	case SCSI_OP_REQUEST_SENSE:
		alloc = cdb[4];
		h = 8;
		if (d && c->din_len >= h)
			f = d[7] + 8u;
		break;
	case SCSI_OP_MODE_SENSE6:
		alloc = cdb[4];
		h = 1;
		if (d && c->din_len >= h)
			f = d[0] + 1u;
		break;
	case SCSI_OP_MODE_SENSE10:
		alloc = get_be16(cdb + 7);
		h = 2;
		if (d && c->din_len >= h)
			f = get_be16(d) + 2u;
		break;
	case SCSI_OP_REPORT_LUNS:
		alloc = get_be32(cdb + 6);
		h = 4;
		if (d && c->din_len >= h)
			f = get_be32(d) + 8ull;
		break;
	case SCSI_OP_PR_IN:
		alloc = get_be16(cdb + 7);
		h = sa == SCSI_PRIN_REPORT_CAPABILITIES ? 2 : 8;
		if (d && c->din_len >= h)
			f = sa == SCSI_PRIN_REPORT_CAPABILITIES ? get_be16(d) : get_be32(d + 4) + 8ull;
		break;
	case SCSI_OP_MAINTENANCE_IN:
		alloc = get_be32(cdb + 6);
		h = 4;
		if (d && c->din_len >= h)
			f = (cdb[2] & 7) ? 4u + get_be16(d + 2) + ((d[1] & 0x80) ? 12u : 0)
					 : get_be32(d) + 4ull;
		if ((cdb[2] & 7) && d && c->din_len >= 2 && (d[1] & 7) == 1)
			f = 4;   /* not supported: no CDB usage data */
		if (sa == SCSI_MI_REPORT_TPGS && d && c->din_len >= h)
			f = get_be32(d) + 4ull;   /* REPORT TARGET PORT GROUPS: RETURN DATA LENGTH */
		break;
	case SCSI_OP_SERVICE_ACTION_IN16:
		alloc = get_be32(cdb + 10);
		if (sa == SCSI_SAI_GET_LBA_STATUS) {
			h = 4;
			if (d && c->din_len >= h)
				f = get_be32(d) + 4ull;
		}
		break;
	case SCSI_OP_READ_CAPACITY10:
		alloc = 8;
		break;
	case SCSI_OP_RECEIVE_COPY_RESULTS:   /* every service action: AVAILABLE DATA first */
		alloc = get_be32(cdb + 10);
		h = 4;
		if (d && c->din_len >= h)
			f = get_be32(d) + 4ull;
		break;
	default:
		return 0;
	}
	*hdr = h;
	*full = f;
	return alloc;
}

static bool is_emulated_din(uint8_t op)
{
	switch (op) {
	case SCSI_OP_INQUIRY: case SCSI_OP_REQUEST_SENSE: case SCSI_OP_MODE_SENSE6:
	case SCSI_OP_MODE_SENSE10: case SCSI_OP_REPORT_LUNS: case SCSI_OP_PR_IN:
	case SCSI_OP_MAINTENANCE_IN: case SCSI_OP_SERVICE_ACTION_IN16: case SCSI_OP_READ_CAPACITY10:
	case SCSI_OP_RECEIVE_COPY_RESULTS:
		return true;
	default:
		return false;
	}
}

static bool is_read(uint8_t op)
{
	return op == SCSI_OP_READ6 || op == SCSI_OP_READ10 || op == SCSI_OP_READ12 || op == SCSI_OP_READ16;
}

static bool is_write(uint8_t op)
{
	return op == SCSI_OP_WRITE6 || op == SCSI_OP_WRITE10 || op == SCSI_OP_WRITE12 || op == SCSI_OP_WRITE16 ||
	       op == SCSI_OP_WRITE_VERIFY10 || op == SCSI_OP_WRITE_VERIFY12 || op == SCSI_OP_WRITE_VERIFY16;
}

/* Records of `each` bytes plus a length at len_at (width 1 or 4, plus extra) fill [off, end) exactly. */
static void check_records(const struct scsi_cmd *c, const uint8_t *d, uint32_t off, uint32_t end, uint32_t head,
			  uint32_t len_at, int width)
{
	while (off < end) {
		FUZZ_CHECK(off + head <= end, "opcode %02x: record at %u runs past %u", c->cdb[0], off, end);
		off += head + (width == 1 ? d[off + len_at] : get_be32(d + off + len_at));
	}
	FUZZ_CHECK(off == end, "opcode %02x: records end at %u, the answer at %u", c->cdb[0], off, end);
}

/* The structure of a whole emulated answer: descriptors and pages fill it exactly. */
static void check_layout(const struct scsi_cmd *c, const uint8_t *d, uint32_t len)
{
	const uint8_t *cdb = c->cdb;

	switch (cdb[0]) {
	case SCSI_OP_INQUIRY:
		if ((cdb[1] & 1) && cdb[2] == 0x83)
			check_records(c, d, 4, len, 4, 3, 1);   /* designation descriptors */
		break;
	case SCSI_OP_MODE_SENSE6:
		if (len >= 4)
			check_records(c, d, 4u + d[3], len, 2, 1, 1);   /* mode pages after the block descriptors */
		break;
	case SCSI_OP_MODE_SENSE10:
		if (len >= 8)
			check_records(c, d, 8u + get_be16(d + 6), len, 2, 1, 1);
		break;
	case SCSI_OP_MAINTENANCE_IN:
		if ((cdb[1] & 0x1f) == SCSI_MI_REPORT_TPGS) {
			/* Target port group descriptors: 8 bytes and 4 per port (count in byte 7). */
			uint32_t off = (cdb[1] >> 5) == 1 ? 8 : 4;
			FUZZ_CHECK(off == 4 || (len >= 8 && d[4] == 0x10), "RTPG: extended header format type");
			while (off + 8 <= len)
				off += 8u + 4u * d[off + 7];
			FUZZ_CHECK(off == len, "RTPG: descriptors end at %u, the answer at %u", off, len);
		}
		break;
	case SCSI_OP_PR_IN:
		if ((cdb[1] & 0x1f) == SCSI_PRIN_READ_FULL_STATUS)
			check_records(c, d, 8, len, 24, 20, 4);   /* status descriptors with their TransportIDs */
		break;
	case SCSI_OP_REPORT_LUNS:
		/* The harness maps LUNs 0..n-1: each is found at its place, single level. */
		for (uint32_t i = 0; 8 + 8 * (i + 1) <= len; i++) {
			const uint8_t *l = d + 8 + 8 * i;
			FUZZ_CHECK((get_be16(l) & 0x3fff) == i && (i < 256 ? l[0] == 0 : l[0] >> 6 == 1) &&
				   get_be32(l + 4) == 0 && get_be16(l + 2) == 0, "LUN %u reported as %016llx", i,
				   (unsigned long long)get_be64(l));
		}
		break;
	case SCSI_OP_SERVICE_ACTION_IN16:
		/* GET LBA STATUS: contiguous descriptors from the LBA asked for. */
		if ((cdb[1] & 0x1f) == SCSI_SAI_GET_LBA_STATUS) {
			uint64_t next = get_be64(cdb + 2);
			for (uint32_t off = 8; off + 16 <= len; off += 16) {
				FUZZ_CHECK(get_be64(d + off) == next && get_be32(d + off + 8) > 0,
					   "LBA status descriptor at %u: %llu+%u, %llu expected", off,
					   (unsigned long long)get_be64(d + off), get_be32(d + off + 8),
					   (unsigned long long)next);
				next += get_be32(d + off + 8);
			}
		}
		break;
	}
}

static void check_din(const struct world *w, const struct scsi_cmd *c)
{
	uint32_t hdr = 0;
	uint64_t full = 0;

	FUZZ_CHECK(c->din_len <= c->edtl, "Data-In %u > EDTL %u (opcode %02x)", c->din_len, c->edtl, c->cdb[0]);
	if (!c->din_len)
		return;
	FUZZ_CHECK(c->dir_read, "Data-In %u without the R bit (opcode %02x)", c->din_len, c->cdb[0]);
	FUZZ_CHECK(c->buf && c->din_len <= c->buf->len, "Data-In %u past the buffer", c->din_len);
	if (is_read(c->cdb[0])) {
		const uint8_t *m = bs_ram_mem(w->bs) + (c->lba << w->lu->block_shift);
		FUZZ_CHECK(memcmp(c->buf->data, m, c->din_len) == 0, "READ at %llu is not the medium",
			   (unsigned long long)c->lba);
		return;
	}
	if (!is_emulated_din(c->cdb[0]))
		return;
	uint32_t alloc = din_alloc(c, &hdr, &full);
	FUZZ_CHECK(c->din_len <= alloc, "Data-In %u > allocation length %u (opcode %02x)", c->din_len, alloc,
		   c->cdb[0]);
	if (!hdr || c->din_len < hdr)
		return;
	/* The length field counts the whole answer; only alloc and EDTL cut what goes out. */
	uint64_t limit = MIN(alloc, c->edtl);
	FUZZ_CHECK(full >= c->din_len, "opcode %02x says %llu bytes, sent %u", c->cdb[0],
		   (unsigned long long)full, c->din_len);
	if (c->din_len < limit)
		FUZZ_CHECK(full == c->din_len, "opcode %02x says %llu bytes, sent %u of up to %llu", c->cdb[0],
			   (unsigned long long)full, c->din_len, (unsigned long long)limit);
	FUZZ_CHECK(c->resid == (int64_t)c->edtl - (int64_t)MIN(full, (uint64_t)alloc),
		   "opcode %02x residual %lld for %llu bytes, alloc %u, EDTL %u", c->cdb[0], (long long)c->resid,
		   (unsigned long long)full, alloc, c->edtl);
	if (full == c->din_len)
		check_layout(c, c->buf->data, c->din_len);
}

/* LU state a read-only mapping must not change. */
struct lu_state {
	bool wce, d_sense, swp, stopped, ejected;
};

static struct lu_state lu_state(const struct scsi_lu *lu)
{
	return (struct lu_state){ lu->wce, lu->d_sense, lu->swp, lu->stopped, lu->ejected };
}

/* ---- one command ---- */

/* The last ROD token RECEIVE ROD TOKEN INFORMATION returned in this input (see the layout above). */
static struct {
	bool have;
	uint8_t tok[512];
} replay;

static void replay_keep(const struct scsi_cmd *c)
{
	const uint8_t *d = c->buf ? c->buf->data : NULL;

	if (c->cdb[0] != SCSI_OP_RECEIVE_COPY_RESULTS || (c->cdb[1] & 0x1f) != 0x07 || c->status != SCSI_GOOD ||
	    !d || c->din_len < 32)
		return;
	uint32_t off = 32u + d[13];
	if (c->din_len >= off + 6 + 512 && get_be32(d + off) == 514) {
		memcpy(replay.tok, d + off + 6, 512);
		replay.have = true;
	}
}

static void replay_use(struct scsi_cmd *c)
{
	uint8_t *t = c->buf->data + 16;

	if (c->cdb[0] != SCSI_OP_EXTENDED_COPY || (c->cdb[1] & 0x1f) != 0x11 || c->dout_len < 16 + 512 ||
	    !replay.have || memcmp(t, "\xffRPL", 4))
		return;
	uint8_t flip = t[4];
	memcpy(t, replay.tok, 512);
	if (flip)
		t[2u * flip % 512] ^= 1;
}

struct run {
	struct scsi_cmd c;
	int ndone;
	struct lu_state before;
	bool mapping_ro, swp, wce;   /* when prepared */
};

static void on_done(struct scsi_cmd *c)
{
	struct run *r = c->priv;

	r->ndone++;
}

static void never_revoked(struct scsi_cmd *c)
{
	FUZZ_CHECK(false, "a view revoked (opcode %02x) with no reactor", c->cdb[0]);
}

/* FUZZ_SCSI_TRACE=1: one line per command, to read what an input does. */
static void trace(const struct scsi_cmd *c, const char *what)
{
	static int on = -1;

	if (on < 0)
		on = getenv("FUZZ_SCSI_TRACE") != NULL;
	if (!on)
		return;
	fprintf(stderr, "nexus %llu%s op %02x/%02x edtl %u %s: status %02x sense %02x %02x%02x%02x din %u resid %lld\n",
		(unsigned long long)c->nexus->id, c->read_only ? " (ro)" : "", c->cdb[0], c->cdb[1], c->edtl, what,
		c->status, c->sense_len ? c->sense[0] : 0, c->sense[0] == 0x72 ? c->sense[1] : c->sense[2],
		c->sense[0] == 0x72 ? c->sense[2] : c->sense[12], c->sense[0] == 0x72 ? c->sense[3] : c->sense[13],
		c->din_len, (long long)c->resid);
}

/* Parse, prepare and fill Data-Out; false when the command ended in prepare (checked and released). */
static bool cmd_start(struct world *w, struct fuzz_in *in, struct run *r, uint8_t who, uint8_t f)
{
	static const uint32_t cdb_lens[] = { 16, 6, 10, 12 };
	struct scsi_cmd *c = &r->c;
	uint32_t raw = fuzz_u32(in);
	unsigned nx = who & 3;
	struct fuzz_in data, *dout = &data;

	memset(r, 0, sizeof(*r));
	for (int i = 0; i < 16; i++)
		c->cdb[i] = fuzz_u8(in);
	data.n = fuzz_u8(in);
	data.n |= (size_t)fuzz_u8(in) << 8;
	data.n = MIN(data.n, in->n);
	data.p = in->p;
	in->p += data.n;
	in->n -= data.n;
	c->cdb_len = cdb_lens[(f >> 5) & 3];
	nx = nx < w->nnx ? nx : 0;
	c->nexus = &w->nx[nx];
	c->lu = (who & 4) ? NULL : w->lu;
	c->lun = 0;
	c->lun_map = &w->map;
	c->read_only = w->ro[nx];
	c->edtl = edtl_of((f >> 2) & 7, raw);
	c->dir_read = f & 1;
	c->dir_write = f & 2;
	c->done = on_done;
	c->priv = r;
	c->send_any_memory = who & 0x20;   /* as TCP: large READs may come as views of the store */
	c->view_revoke = never_revoked;    /* no reactor: atomic writes wait for no view */
	r->mapping_ro = c->lu && (c->read_only || backstore_readonly(w->bs));
	r->swp = w->lu->swp;
	r->wce = w->lu->wce;

	if (!scsi_cmd_prepare(c)) {
		trace(c, "refused");
		FUZZ_CHECK(r->ndone == 0, "done called by a refused prepare");
		FUZZ_CHECK(c->status == SCSI_CHECK_CONDITION || c->status == SCSI_RESERVATION_CONFLICT,
			   "prepare refused with status %02x", c->status);
		if (c->status == SCSI_CHECK_CONDITION)
			check_sense(c);
		else
			FUZZ_CHECK(c->sense_len == 0, "sense with status %02x", c->status);
		FUZZ_CHECK(c->din_len == 0, "Data-In from a refused prepare");
		scsi_cmd_release(c);
		return false;
	}
	FUZZ_CHECK(c->dout_len <= c->edtl, "Data-Out %u > EDTL %u (opcode %02x)", c->dout_len, c->edtl, c->cdb[0]);
	if (c->dout_len) {
		FUZZ_CHECK(c->dir_write, "Data-Out %u without the W bit (opcode %02x)", c->dout_len, c->cdb[0]);
		FUZZ_CHECK(c->buf && c->buf->len >= c->dout_len, "Data-Out %u past the buffer", c->dout_len);
		size_t n = MIN(dout->n, (size_t)c->dout_len);
		memcpy(c->buf->data, dout->p, n);
		memset(c->buf->data + n, 0, c->dout_len - n);
		replay_use(c);
	}
	return true;
}

static void cmd_finish(struct world *w, struct run *r, bool deferred)
{
	struct scsi_cmd *c = &r->c;

	memset(&seen, 0, sizeof(seen));
	r->before = lu_state(w->lu);
	scsi_cmd_exec(c);
	trace(c, deferred ? "deferred" : "done");
	FUZZ_CHECK(r->ndone == 1, "done called %d times (opcode %02x)", r->ndone, c->cdb[0]);
	FUZZ_CHECK(c->status == SCSI_GOOD || c->status == SCSI_CHECK_CONDITION ||
		   c->status == SCSI_RESERVATION_CONFLICT || c->status == SCSI_TASK_ABORTED,
		   "status %02x (opcode %02x)", c->status, c->cdb[0]);
	if (c->status == SCSI_CHECK_CONDITION) {
		check_sense(c);
		/* RAM never fails: a medium error is a request the backstore refused (range, read-only). */
		uint8_t key = c->sense[0] == 0x72 ? c->sense[1] & 0x0f : c->sense[2] & 0x0f;
		FUZZ_CHECK(key != SK_MEDIUM_ERROR, "MEDIUM ERROR from a RAM LU (opcode %02x)", c->cdb[0]);
	} else {
		FUZZ_CHECK(c->sense_len == 0, "sense with status %02x", c->status);
	}
	if (c->status != SCSI_GOOD)
		FUZZ_CHECK(c->din_len == 0, "Data-In %u with status %02x", c->din_len, c->status);
	check_din(w, c);
	replay_keep(c);

	/* SWP as prepare saw it: a write prepared before SWP was set may still run. */
	if (r->mapping_ro || r->swp)
		FUZZ_CHECK(seen.writes == 0 && seen.unmaps == 0, "opcode %02x wrote a write-protected LU",
			   c->cdb[0]);
	if (r->mapping_ro) {
		struct lu_state now = lu_state(w->lu);
		FUZZ_CHECK(memcmp(&now, &r->before, sizeof(now)) == 0,
			   "opcode %02x from a read-only mapping changed the LU's state", c->cdb[0]);
	}
	if (!r->wce && !deferred) {
		FUZZ_CHECK(seen.unfua_writes == 0, "opcode %02x wrote without FUA with WCE=0", c->cdb[0]);
		if (c->status == SCSI_GOOD && seen.unmaps)
			FUZZ_CHECK(seen.last_flush > seen.last_unmap, "opcode %02x deallocated with WCE=0, no FLUSH",
				   c->cdb[0]);
	}
	if (c->status == SCSI_GOOD && is_write(c->cdb[0]) && c->nblocks) {
		const uint8_t *m = bs_ram_mem(w->bs) + (c->lba << w->lu->block_shift);
		FUZZ_CHECK(memcmp(c->buf->data, m, (size_t)c->nblocks << w->lu->block_shift) == 0,
			   "WRITE at %llu is not on the medium", (unsigned long long)c->lba);
	}
	scsi_cmd_release(c);
}

/* After a command ended and was released: only the command still waiting holds buffers (or a view of the store). */
static void check_buffers(const struct world *w, const struct run *pending, uint8_t opcode)
{
	bool view = pending && pending->c.buf == &pending->c.view;
	size_t held = pending ? (pending->c.buf != NULL && !view) + (pending->c.buf2 != NULL) : 0;

	FUZZ_CHECK(bufpool_in_use(scsi_test_pool) == held, "%zu buffers in use after opcode %02x, %zu expected",
		   bufpool_in_use(scsi_test_pool), opcode, held);
	FUZZ_CHECK(bs_ram_nviews(w->bs) == (unsigned)view, "%u views out after opcode %02x, %u expected",
		   bs_ram_nviews(w->bs), opcode, (unsigned)view);
}

static void lu_event(struct world *w, uint8_t who, uint8_t which)
{
	static const enum scsi_lu_event evs[] = { SCSI_EV_LU_RESET, SCSI_EV_TARGET_WARM_RESET,
						  SCSI_EV_TARGET_COLD_RESET, SCSI_EV_NEXUS_LOSS,
						  SCSI_EV_CLEAR_TASK_SET, SCSI_EV_LOGOUT };
	unsigned nx = (who & 3) < w->nnx ? (who & 3) : 0;

	if (which % 7 == 6)
		scsi_lu_capacity_changed(w->lu);
	else
		scsi_lu_event(w->lu, &w->nx[nx], evs[which % 7], NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct run runs[2];
	struct fuzz_in in = { data, size };
	struct world w;
	struct run *pending = NULL;

	if (!scsi_test_pool)
		scsi_test_pool = bufpool_create();
	sanitize_inline = true;   /* SANITIZE ends before exec returns, as every command here must */
	if (size < 12 || !world_make(&w, &in))
		return 0;
	replay.have = false;
	for (int k = 0; k < MAX_CMDS && in.n >= 6; k++) {
		uint8_t who = fuzz_u8(&in), f = fuzz_u8(&in);
		struct run *r = pending == &runs[0] ? &runs[1] : &runs[0];

		if (who & 0x10) {
			lu_event(&w, who, fuzz_u8(&in));
		} else if (cmd_start(&w, &in, r, who, f)) {
			if ((who & 8) && !pending) {
				pending = r;
				continue;
			}
			cmd_finish(&w, r, false);
		}
		check_buffers(&w, pending, r->c.cdb[0]);
		if (pending) {
			cmd_finish(&w, pending, true);
			check_buffers(&w, NULL, pending->c.cdb[0]);
			pending = NULL;
		}
	}
	if (pending)
		cmd_finish(&w, pending, true);
	world_free(&w);
	FUZZ_CHECK(bufpool_in_use(scsi_test_pool) == 0, "buffers left");
	return 0;
}
