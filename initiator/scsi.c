/* SCSI helpers: CDB builders, parsers of common answers, synchronous wrappers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto/scsi_proto.h"
#include "common/util.h"
#include "isc_internal.h"

/* The largest REPORT LUNS answer isc_report_luns_sync asks for (2 Mi LUNs). */
#define ISC_REPORT_LUNS_MAX (16u << 20)

static void cmd_init(struct isc_cmd *c, uint64_t lun, uint8_t cdb_len, enum isc_dir dir, void *data,
		     uint32_t len)
{
	memset(c, 0, sizeof(*c));
	c->lun = lun;
	c->cdb_len = cdb_len;
	c->dir = len ? dir : ISC_DIR_NONE;
	c->data = data;
	c->len = len;
}

void isc_cmd_tur(struct isc_cmd *c, uint64_t lun)
{
	cmd_init(c, lun, 6, ISC_DIR_NONE, NULL, 0);
	c->cdb[0] = SCSI_OP_TEST_UNIT_READY;
}

void isc_cmd_inquiry(struct isc_cmd *c, uint64_t lun, bool evpd, uint8_t page, void *buf, uint16_t len)
{
	cmd_init(c, lun, 6, ISC_DIR_READ, buf, len);
	c->cdb[0] = SCSI_OP_INQUIRY;
	c->cdb[1] = evpd ? 1 : 0;
	c->cdb[2] = evpd ? page : 0;
	put_be16(c->cdb + 3, len);
}

void isc_cmd_readcap16(struct isc_cmd *c, uint64_t lun, void *buf, uint32_t len)
{
	cmd_init(c, lun, 16, ISC_DIR_READ, buf, len);
	c->cdb[0] = SCSI_OP_SERVICE_ACTION_IN16;
	c->cdb[1] = SCSI_SAI_READ_CAPACITY16;
	put_be32(c->cdb + 10, len);
}

void isc_cmd_report_luns(struct isc_cmd *c, void *buf, uint32_t len)
{
	cmd_init(c, 0, 12, ISC_DIR_READ, buf, len);
	c->cdb[0] = SCSI_OP_REPORT_LUNS;
	put_be32(c->cdb + 6, len);
}

static void rw16(struct isc_cmd *c, uint8_t op, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t bs,
		 enum isc_dir dir, void *buf, bool fua)
{
	cmd_init(c, lun, 16, dir, buf, blocks * bs);
	c->cdb[0] = op;
	c->cdb[1] = fua ? 0x08 : 0;
	put_be64(c->cdb + 2, lba);
	put_be32(c->cdb + 10, blocks);
}

void isc_cmd_read16(struct isc_cmd *c, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t block_size,
		    void *buf)
{
	rw16(c, SCSI_OP_READ16, lun, lba, blocks, block_size, ISC_DIR_READ, buf, false);
}

void isc_cmd_write16(struct isc_cmd *c, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t block_size,
		     const void *buf, bool fua)
{
	rw16(c, SCSI_OP_WRITE16, lun, lba, blocks, block_size, ISC_DIR_WRITE, (void *)buf, fua);
}

void isc_cmd_sync_cache16(struct isc_cmd *c, uint64_t lun, uint64_t lba, uint32_t blocks)
{
	cmd_init(c, lun, 16, ISC_DIR_NONE, NULL, 0);
	c->cdb[0] = SCSI_OP_SYNC_CACHE16;
	put_be64(c->cdb + 2, lba);
	put_be32(c->cdb + 10, blocks);
}

int isc_cmd_unmap(struct isc_cmd *c, uint64_t lun, const struct isc_range *r, unsigned n, void *param,
		  uint32_t param_len)
{
	if (!n || n > 4095 || param_len < 8 + 16 * n)
		return -EINVAL;
	uint8_t *p = param;
	uint32_t len = 8 + 16 * n;
	memset(p, 0, len);
	put_be16(p, (uint16_t)(len - 2));
	put_be16(p + 2, (uint16_t)(16 * n));
	for (unsigned i = 0; i < n; i++) {
		put_be64(p + 8 + 16 * i, r[i].lba);
		put_be32(p + 16 + 16 * i, r[i].blocks);
	}
	cmd_init(c, lun, 10, ISC_DIR_WRITE, param, len);
	c->cdb[0] = SCSI_OP_UNMAP;
	put_be16(c->cdb + 7, (uint16_t)len);
	return 0;
}

void isc_cmd_write_same16(struct isc_cmd *c, uint64_t lun, uint64_t lba, uint32_t blocks, const void *block,
			  uint32_t block_size, bool unmap)
{
	cmd_init(c, lun, 16, ISC_DIR_WRITE, (void *)block, block_size);
	c->cdb[0] = SCSI_OP_WRITE_SAME16;
	c->cdb[1] = unmap ? 0x08 : 0;
	put_be64(c->cdb + 2, lba);
	put_be32(c->cdb + 10, blocks);
}

static void copy_trim(char *dst, const uint8_t *src, size_t n)
{
	memcpy(dst, src, n);
	dst[n] = 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)dst[i] < 0x20 || (unsigned char)dst[i] > 0x7e)
			dst[i] = ' ';
	while (n && dst[n - 1] == ' ')
		dst[--n] = 0;
}

int isc_parse_inquiry(const void *buf, uint32_t len, struct isc_inquiry *out)
{
	const uint8_t *p = buf;
	memset(out, 0, sizeof(*out));
	if (len < 36)
		return -EPROTO;
	out->peripheral_type = p[0] & 0x1f;
	out->peripheral_qualifier = p[0] >> 5;
	copy_trim(out->vendor, p + 8, 8);
	copy_trim(out->product, p + 16, 16);
	copy_trim(out->revision, p + 32, 4);
	return 0;
}

int isc_parse_readcap16(const void *buf, uint32_t len, struct isc_capacity *out)
{
	const uint8_t *p = buf;
	memset(out, 0, sizeof(*out));
	if (len < 32)
		return -EPROTO;
	out->blocks = get_be64(p) + 1;
	out->block_size = get_be32(p + 8);
	out->thin = p[14] & 0x80;
	return 0;
}

/*
 * The LUNs of a REPORT LUNS answer of len bytes: those its list length
 * names that lie whole within len (a target may claim more than it sent).
 * Stores at most max; *stored says how many, *cut whether the list names
 * more than that.  Returns how many the answer holds, or -EPROTO.
 */
static int report_luns_parse(const void *buf, uint32_t len, uint64_t *luns, unsigned max, unsigned *stored,
			     bool *cut)
{
	const uint8_t *p = buf;
	*stored = 0;
	*cut = false;
	if (len < 8)
		return -EPROTO;
	uint32_t list = get_be32(p);
	if (list % 8)
		return -EPROTO;
	uint32_t claimed = list / 8, held = MIN(claimed, (len - 8) / 8);
	unsigned n = MIN(held, max);
	for (unsigned i = 0; i < n; i++)
		luns[i] = pdu_lun_decode(get_be64(p + 8 + 8 * i));
	*stored = n;
	*cut = claimed > n;
	return (int)held;
}

int isc_parse_report_luns(const void *buf, uint32_t len, uint64_t *luns, unsigned max)
{
	unsigned n;
	bool cut;
	return report_luns_parse(buf, len, luns, max, &n, &cut);
}

int isc_parse_report_luns2(const void *buf, uint32_t len, uint64_t *luns, unsigned max, unsigned *n,
			   bool *truncated)
{
	int rc = report_luns_parse(buf, len, luns, max, n, truncated);
	return rc < 0 ? rc : 0;
}

/* ---- synchronous helpers ---- */

static int run(struct isc_session *s, const struct isc_cmd *c, struct isc_result *r)
{
	struct isc_result tmp;
	return isc_submit_sync(s, c, r ? r : &tmp);
}

int isc_tur_sync(struct isc_session *s, uint64_t lun, struct isc_result *r)
{
	struct isc_cmd c;
	isc_cmd_tur(&c, lun);
	return run(s, &c, r);
}

int isc_inquiry_sync(struct isc_session *s, uint64_t lun, struct isc_inquiry *inq, struct isc_result *r)
{
	uint8_t buf[96];
	struct isc_cmd c;
	struct isc_result res;
	memset(buf, 0, sizeof(buf));
	isc_cmd_inquiry(&c, lun, false, 0, buf, sizeof(buf));
	int rc = run(s, &c, &res);
	if (r)
		*r = res;
	if (rc)
		return rc;
	return isc_parse_inquiry(buf, sizeof(buf) - (res.underflow ? MIN(res.residual, sizeof(buf)) : 0), inq);
}

int isc_vpd_sync(struct isc_session *s, uint64_t lun, uint8_t page, void *buf, uint16_t len,
		 struct isc_result *r)
{
	struct isc_cmd c;
	isc_cmd_inquiry(&c, lun, true, page, buf, len);
	return run(s, &c, r);
}

int isc_readcap16_sync(struct isc_session *s, uint64_t lun, struct isc_capacity *cap, struct isc_result *r)
{
	uint8_t buf[32] = { 0 };
	struct isc_cmd c;
	isc_cmd_readcap16(&c, lun, buf, sizeof(buf));
	int rc = run(s, &c, r);
	return rc ? rc : isc_parse_readcap16(buf, sizeof(buf), cap);
}

int isc_report_luns2_sync(struct isc_session *s, uint64_t *luns, unsigned max, unsigned *n, bool *truncated,
			  struct isc_result *r)
{
	struct isc_result tmp;
	uint32_t len = 8 + 8 * 256;
	*n = 0;
	*truncated = false;
	for (int pass = 0; pass < 2; pass++) {
		uint8_t *buf = calloc(1, len);
		if (!buf)
			return -ENOMEM;
		struct isc_cmd c;
		uint32_t got;
		isc_cmd_report_luns(&c, buf, len);
		int rc = isc_submit_sync_got(s, &c, r ? r : &tmp, &got);
		if (rc) {
			free(buf);
			return rc;
		}
		/* A longer list: ask once more with room for all of it. */
		uint64_t need = got >= 4 ? 8 + (uint64_t)get_be32(buf) : 0;
		if (pass == 0 && need > len && need <= ISC_REPORT_LUNS_MAX) {
			free(buf);
			len = (uint32_t)need;
			continue;
		}
		/* Only what arrived: the buffer beyond it was never written by the target. */
		rc = report_luns_parse(buf, got, luns, max, n, truncated);
		free(buf);
		if (rc < 0)
			isc_seterr(s, "REPORT LUNS: an answer of %u bytes is not a LUN list", got);
		return rc < 0 ? rc : 0;
	}
	return -EPROTO;
}

int isc_report_luns_sync(struct isc_session *s, uint64_t *luns, unsigned max, unsigned *n,
			 struct isc_result *r)
{
	bool truncated;
	return isc_report_luns2_sync(s, luns, max, n, &truncated, r);
}

int isc_read16_sync(struct isc_session *s, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t block_size,
		    void *buf, struct isc_result *r)
{
	struct isc_cmd c;
	isc_cmd_read16(&c, lun, lba, blocks, block_size, buf);
	return run(s, &c, r);
}

int isc_write16_sync(struct isc_session *s, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t block_size,
		     const void *buf, bool fua, struct isc_result *r)
{
	struct isc_cmd c;
	isc_cmd_write16(&c, lun, lba, blocks, block_size, buf, fua);
	return run(s, &c, r);
}

int isc_sync_cache_sync(struct isc_session *s, uint64_t lun, struct isc_result *r)
{
	struct isc_cmd c;
	isc_cmd_sync_cache16(&c, lun, 0, 0);
	return run(s, &c, r);
}

int isc_unmap_sync(struct isc_session *s, uint64_t lun, const struct isc_range *ranges, unsigned n,
		   struct isc_result *r)
{
	if (!n || n > 4095)
		return -EINVAL;
	uint32_t len = 8 + 16 * n;
	uint8_t *p = malloc(len);
	if (!p)
		return -ENOMEM;
	struct isc_cmd c;
	int rc = isc_cmd_unmap(&c, lun, ranges, n, p, len);
	if (!rc)
		rc = run(s, &c, r);
	free(p);
	return rc;
}

int isc_write_same16_sync(struct isc_session *s, uint64_t lun, uint64_t lba, uint32_t blocks,
			  const void *block, uint32_t block_size, bool unmap, struct isc_result *r)
{
	struct isc_cmd c;
	isc_cmd_write_same16(&c, lun, lba, blocks, block, block_size, unmap);
	return run(s, &c, r);
}
