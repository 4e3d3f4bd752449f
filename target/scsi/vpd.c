/*
 * Vital product data pages (SPC-4 7.8, SBC-3 6.6), one builder per page,
 * table-driven so page 00h lists exactly what is answered.
 */
#include <string.h>

#include "target/scsi/scsi_int.h"

typedef int (*vpd_fn)(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap);

static int vpd_supported(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap);

static int vpd_serial(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap)
{
	size_t n = strlen(cmd->lu->serial);

	memcpy(d + 4, cmd->lu->serial, n);
	return (int)(4 + n);
}

/* One designation descriptor; returns bytes used. */
static uint32_t desig(uint8_t *p, uint8_t proto_cs, uint8_t piv_assoc_type, const void *id, uint32_t len)
{
	p[0] = proto_cs;
	p[1] = piv_assoc_type;
	p[2] = 0;
	p[3] = (uint8_t)len;
	memcpy(p + 4, id, len);
	return 4 + len;
}

static uint32_t name_desig(uint8_t *p, uint8_t assoc, const char *name)
{
	uint8_t s[256] = { 0 };
	size_t l = strnlen(name, 250);

	memcpy(s, name, l);
	/* Null terminated, padded to a multiple of four (SPC-4 7.8.6.11). */
	l = (l + 4) & ~(size_t)3;
	return desig(p, 0x50 | 0x03, 0x80 | assoc | 0x08, s, (uint32_t)l);
}

static int vpd_devid(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t id[64];
	uint32_t n = 4;

	/* NAA 6 (IEEE Registered Extended): locally administered OUI, 100 bits from the serial. */
	id[0] = 0x60 | 0x0a;
	id[1] = 0x00;
	id[2] = 0x00;
	id[3] = (uint8_t)(0x00 | ((lu->naa_hi >> 32) & 0x0f));
	put_be32(id + 4, (uint32_t)lu->naa_hi);
	put_be64(id + 8, lu->naa_lo);
	n += desig(d + n, 0x01, 0x03, id, 16);

	/* T10 vendor id: vendor + serial. */
	size_t sl = strlen(lu->serial);
	memset(id, ' ', 8);
	memcpy(id, lu->vendor, strlen(lu->vendor));
	memcpy(id + 8, lu->serial, MIN(sl, sizeof(id) - 8));
	n += desig(d + n, 0x02, 0x01, id, (uint32_t)(8 + MIN(sl, sizeof(id) - 8)));

	if (cmd->nexus) {
		uint8_t v[4] = { 0 };
		put_be16(v + 2, cmd->nexus->rel_port_id);
		n += desig(d + n, 0x51, 0x94, v, 4);   /* relative target port */
		put_be16(v + 2, 1);
		n += desig(d + n, 0x51, 0x95, v, 4);   /* target port group 1 */
		if (cmd->nexus->target_port[0])
			n += name_desig(d + n, 0x10, cmd->nexus->target_port);
		if (cmd->nexus->target_name[0])
			n += name_desig(d + n, 0x20, cmd->nexus->target_name);
	}
	return (int)n;
}

static int vpd_extended(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap)
{
	memset(d + 4, 0, 60);
	d[5] = 0x07;   /* HEADSUP, ORDSUP, SIMPSUP */
	d[6] = 0x01;   /* V_SUP: the volatile cache can be flushed */
	return 64;
}

static int vpd_block_limits(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap)
{
	struct scsi_lu *lu = cmd->lu;
	uint32_t opt = backstore_optimal_io(lu->bs) >> lu->block_shift;

	memset(d + 4, 0, 60);
	d[5] = SCSI_MAX_CAW_BLOCKS;
	put_be16(d + 6, 1);
	put_be32(d + 8, SCSI_MAX_XFER_BYTES >> lu->block_shift);
	put_be32(d + 12, opt);
	put_be32(d + 16, SCSI_MAX_XFER_BYTES >> lu->block_shift);
	if (lu->thin) {
		put_be32(d + 20, SCSI_MAX_UNMAP_LBAS);
		put_be32(d + 24, SCSI_MAX_UNMAP_DESCS);
		put_be32(d + 28, 1);
	}
	put_be64(d + 36, SCSI_MAX_WS_BLOCKS);   /* MAXIMUM WRITE SAME LENGTH */
	return 64;
}

static int vpd_bdc(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap)
{
	memset(d + 4, 0, 60);
	put_be16(d + 4, backstore_type(cmd->lu->bs) == BACKSTORE_RAM ? 1 : 0);
	return 64;
}

static int vpd_lbp(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap)
{
	memset(d + 4, 0, 4);
	if (cmd->lu->thin) {
		d[5] = 0x80 | 0x40 | 0x20;          /* LBPU, LBPWS, LBPWS10 */
		if (backstore_unmap_zeroes(cmd->lu->bs))
			d[5] |= 0x04;                /* LBPRZ */
		d[6] = 0x02;                        /* thin provisioned */
	}
	return 8;
}

static const struct {
	uint8_t page;
	vpd_fn fn;
} pages[] = {
	{ 0x00, vpd_supported }, { 0x80, vpd_serial }, { 0x83, vpd_devid }, { 0x86, vpd_extended },
	{ 0xb0, vpd_block_limits }, { 0xb1, vpd_bdc }, { 0xb2, vpd_lbp },
};

static int vpd_supported(struct scsi_cmd *cmd, uint8_t *d, uint32_t cap)
{
	for (size_t i = 0; i < ARRAY_SIZE(pages); i++)
		d[4 + i] = pages[i].page;
	return (int)(4 + ARRAY_SIZE(pages));
}

int vpd_page(struct scsi_cmd *cmd, uint8_t page, uint8_t *out, uint32_t cap)
{
	for (size_t i = 0; i < ARRAY_SIZE(pages); i++) {
		if (pages[i].page != page)
			continue;
		memset(out, 0, 4);
		int n = pages[i].fn(cmd, out, cap);
		out[0] = 0x00;   /* PQ 0, direct access block device */
		out[1] = page;
		put_be16(out + 2, (uint16_t)(n - 4));
		return n;
	}
	return -1;
}
