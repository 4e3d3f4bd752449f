/*
 * Vital product data pages (SPC-4 7.8, SBC-3 6.6), one builder per page,
 * table-driven so page 00h lists exactly what is answered.  Builders write
 * through the bounded Data-In writer: the device identification page holds
 * the target's names, which alone can pass 500 bytes.
 */
#include <string.h>

#include "target/scsi/cmd/sanitize.h"
#include "target/scsi/scsi_int.h"

typedef void (*vpd_fn)(struct scsi_cmd *cmd, struct din *d);

static void vpd_supported(struct scsi_cmd *cmd, struct din *d);

static void vpd_serial(struct scsi_cmd *cmd, struct din *d)
{
	din_put(d, cmd->lu->serial, strlen(cmd->lu->serial));
}

/* One designation descriptor header; the caller writes the len bytes of designator. */
static void desig_head(struct din *d, uint8_t proto_cs, uint8_t piv_assoc_type, uint8_t len)
{
	din_u8(d, proto_cs);
	din_u8(d, piv_assoc_type);
	din_u8(d, 0);
	din_u8(d, len);
}

static void desig(struct din *d, uint8_t proto_cs, uint8_t piv_assoc_type, const void *id, uint8_t len)
{
	desig_head(d, proto_cs, piv_assoc_type, len);
	din_put(d, id, len);
}

/*
 * SCSI name string: null terminated, padded to a multiple of four (SPC-4
 * 7.8.6.11), in a one-byte length.  iSCSI names (223 bytes) and ports
 * ("<name>,t,0x<TPGT>") always fit; 251 characters is what the length allows.
 */
static void name_desig(struct din *d, uint8_t assoc, const char *name)
{
	size_t l = strnlen(name, 251);
	size_t padded = (l + 4) & ~(size_t)3;

	desig_head(d, 0x50 | 0x03, 0x80 | assoc | 0x08, (uint8_t)padded);
	din_put(d, name, l);
	din_zero(d, padded - l);
}

static void vpd_devid(struct scsi_cmd *cmd, struct din *d)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t id[16];
	size_t sl = strlen(lu->serial);

	lu_naa(lu, id);
	desig(d, 0x01, 0x03, id, 16);

	/* T10 vendor id: vendor, space padded, then the whole serial (64 at most). */
	desig_head(d, 0x02, 0x01, (uint8_t)(8 + sl));
	din_ascii(d, lu->vendor, 8);
	din_put(d, lu->serial, sl);

	if (cmd->nexus) {
		uint8_t v[4] = { 0 };
		put_be16(v + 2, cmd->nexus->rel_port_id);
		desig(d, 0x51, 0x94, v, 4);   /* relative target port */
		put_be16(v + 2, alua_group_id(cmd->nexus));
		desig(d, 0x51, 0x95, v, 4);   /* target port group */
		if (cmd->nexus->target_port[0])
			name_desig(d, 0x10, cmd->nexus->target_port);
		if (cmd->nexus->target_name[0])
			name_desig(d, 0x20, cmd->nexus->target_name);
	}
}

/* The fixed-size pages are laid out at their SPC/SBC byte offsets; the writer takes them after the header. */

static void vpd_extended(struct scsi_cmd *cmd, struct din *d)
{
	uint8_t p[64] = { 0 };

	p[5] = 0x07;   /* HEADSUP, ORDSUP, SIMPSUP */
	p[6] = 0x01;   /* V_SUP: the volatile cache can be flushed */
	din_put(d, p + 4, sizeof(p) - 4);
}

static void vpd_block_limits(struct scsi_cmd *cmd, struct din *d)
{
	struct scsi_lu *lu = cmd->lu;
	uint32_t opt = backstore_optimal_io(lu->bs) >> lu->block_shift;
	uint8_t p[64] = { 0 };

	p[5] = SCSI_MAX_CAW_BLOCKS;
	put_be16(p + 6, 1);
	put_be32(p + 8, SCSI_MAX_XFER_BYTES >> lu->block_shift);
	put_be32(p + 12, opt);
	put_be32(p + 16, SCSI_MAX_XFER_BYTES >> lu->block_shift);
	if (lu->thin) {
		put_be32(p + 20, SCSI_MAX_UNMAP_LBAS);
		put_be32(p + 24, SCSI_MAX_UNMAP_DESCS);
		put_be32(p + 28, 1);
	}
	put_be64(p + 36, SCSI_MAX_WS_BLOCKS);   /* MAXIMUM WRITE SAME LENGTH */
	/* MAXIMUM ATOMIC TRANSFER LENGTH (0: no WRITE ATOMIC); alignment, granularity, boundaries: none. */
	put_be32(p + 44, sbc_atomic_max_blocks(lu));
	din_put(d, p + 4, sizeof(p) - 4);
}

static void vpd_bdc(struct scsi_cmd *cmd, struct din *d)
{
	uint8_t p[64] = { 0 };

	/* MEDIUM ROTATION RATE: 1 = non-rotating, 0 = not reported. */
	put_be16(p + 4, backstore_kind_has(backstore_type(cmd->lu->bs), BS_KIND_NONROTATING) ? 1 : 0);
	p[7] = sanitize_vpd_b1(cmd->lu);   /* WABEREQ, WACEREQ */
	din_put(d, p + 4, sizeof(p) - 4);
}

static void vpd_lbp(struct scsi_cmd *cmd, struct din *d)
{
	uint8_t p[8] = { 0 };

	if (cmd->lu->thin) {
		p[5] = 0x80 | 0x40 | 0x20;          /* LBPU, LBPWS, LBPWS10 */
		if (backstore_unmap_zeroes(cmd->lu->bs))
			p[5] |= 0x04;                /* LBPRZ */
		p[6] = 0x02;                        /* thin provisioned */
	}
	din_put(d, p + 4, sizeof(p) - 4);
}

static const struct vpd_page {
	uint8_t page;
	vpd_fn fn;
} pages[] = {
	{ 0x00, vpd_supported }, { 0x80, vpd_serial }, { 0x83, vpd_devid }, { 0x86, vpd_extended },
	{ 0x8f, xcopy_vpd },
	{ 0xb0, vpd_block_limits }, { 0xb1, vpd_bdc }, { 0xb2, vpd_lbp },
};

static void vpd_supported(struct scsi_cmd *cmd, struct din *d)
{
	for (size_t i = 0; i < ARRAY_SIZE(pages); i++)
		din_u8(d, pages[i].page);
}

static void vpd_build(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	const struct vpd_page *pg = arg;

	din_u8(d, 0x00);   /* PQ 0, direct access block device */
	din_u8(d, pg->page);
	din_be16(d, 0);
	pg->fn(cmd, d);
	din_set_be16(d, 2, (uint16_t)(din_pos(d) - 4));
}

bool vpd_page(struct scsi_cmd *cmd, uint8_t page, uint32_t alloc)
{
	for (size_t i = 0; i < ARRAY_SIZE(pages); i++) {
		if (pages[i].page == page) {
			din_build(cmd, alloc, vpd_build, &pages[i]);
			return true;
		}
	}
	return false;
}
