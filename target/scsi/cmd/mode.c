/*
 * MODE SENSE / MODE SELECT (SPC-4 6.11-6.14) with the read-write error
 * recovery, caching, control and informational exceptions pages.  Each
 * page has a builder for current/changeable/default values; MODE SELECT
 * accepts a change only where the changeable mask allows it.
 */
#include <string.h>

#include "common/bufpool.h"
#include "target/scsi/scsi_int.h"

enum { PC_CURRENT, PC_CHANGEABLE, PC_DEFAULT, PC_SAVED };

/* Pages are fixed-size: each is laid out in an array at its SPC byte offsets, then written. */
typedef void (*page_fn)(struct scsi_lu *lu, int pc, struct din *d);

static void pg_rw_recovery(struct scsi_lu *lu, int pc, struct din *d)
{
	uint8_t p[12] = { 0x01, 0x0a };

	din_put(d, p, sizeof(p));
}

static void pg_caching(struct scsi_lu *lu, int pc, struct din *d)
{
	uint8_t p[20] = { 0x08, 0x12 };

	if (pc == PC_CHANGEABLE)
		p[2] = 0x04;
	else if (pc == PC_DEFAULT)
		p[2] = backstore_write_cache(lu->bs) ? 0x04 : 0;
	else
		p[2] = lu_flag(&lu->wce) ? 0x04 : 0;
	din_put(d, p, sizeof(p));
}

static void pg_control(struct scsi_lu *lu, int pc, struct din *d)
{
	uint8_t p[12] = { 0x0a, 0x0a };

	if (pc == PC_CHANGEABLE) {
		p[2] = 0x04;   /* D_SENSE */
		p[4] = 0x08;   /* SWP */
	} else {
		if (pc == PC_CURRENT) {
			p[2] = lu_flag(&lu->d_sense) ? 0x04 : 0;
			p[4] = lu_flag(&lu->swp) ? 0x08 : 0;
		}
		p[3] = 0x10;           /* unrestricted reordering */
		p[5] = 0x40;           /* TAS */
		put_be16(p + 8, 0xffff);
	}
	din_put(d, p, sizeof(p));
}

static void pg_iec(struct scsi_lu *lu, int pc, struct din *d)
{
	uint8_t p[12] = { 0x1c, 0x0a };

	if (pc != PC_CHANGEABLE)
		p[2] = 0x08;   /* DEXCPT: no exception reporting */
	din_put(d, p, sizeof(p));
}

static const struct {
	uint8_t code;
	page_fn fn;
} mpages[] = {
	{ 0x01, pg_rw_recovery }, { 0x08, pg_caching }, { 0x0a, pg_control }, { 0x1c, pg_iec },
};

/* Subpage 00h or FFh (all subpages): we have no subpages, so both mean the page itself. */
static bool mode_page_known(uint8_t page, uint8_t sub)
{
	if (sub != 0 && sub != 0xff)
		return false;
	for (size_t i = 0; i < ARRAY_SIZE(mpages); i++)
		if (page == 0x3f || page == mpages[i].code)
			return true;
	return false;
}

static void mode_sense_build(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	struct scsi_lu *lu = cmd->lu;
	bool ten = cmd->cdb[0] == SCSI_OP_MODE_SENSE10;
	bool dbd = cmd->cdb[1] & 0x08, llbaa = ten && (cmd->cdb[1] & 0x10);
	int pc = cmd->cdb[2] >> 6;
	uint8_t page = cmd->cdb[2] & 0x3f;
	uint8_t dsp = 0x10;   /* DPOFUA */
	uint32_t hl = ten ? 8 : 4;

	if (lu_write_protected(cmd))
		dsp |= 0x80;
	/* Header: mode data length and block descriptor length are set at the end. */
	if (ten) {
		din_be16(d, 0);
		din_u8(d, 0);
		din_u8(d, dsp);
		din_u8(d, llbaa && !dbd ? 0x01 : 0);   /* LONGLBA */
		din_zero(d, 3);
	} else {
		din_zero(d, 2);
		din_u8(d, dsp);
		din_u8(d, 0);
	}
	if (!dbd) {
		uint64_t nb = lu_nblocks(lu);
		if (llbaa) {
			din_be64(d, nb);
			din_zero(d, 4);
			din_be32(d, lu->block_size);
		} else {
			din_be32(d, nb > 0xffffffu ? 0xffffffu : (uint32_t)nb);   /* density code 0 */
			din_be32(d, lu->block_size);
		}
	}
	if (ten)
		din_set_be16(d, 6, (uint16_t)(din_pos(d) - hl));
	else
		din_set_u8(d, 3, (uint8_t)(din_pos(d) - hl));
	for (size_t i = 0; i < ARRAY_SIZE(mpages); i++)
		if (page == 0x3f || page == mpages[i].code)
			mpages[i].fn(lu, pc, d);
	if (ten)
		din_set_be16(d, 0, (uint16_t)(din_pos(d) - 2));
	else
		din_set_u8(d, 0, (uint8_t)(din_pos(d) - 1));
}

void mode_sense(struct scsi_cmd *cmd)
{
	bool ten = cmd->cdb[0] == SCSI_OP_MODE_SENSE10;
	int pc = cmd->cdb[2] >> 6;
	uint8_t page = cmd->cdb[2] & 0x3f, sub = cmd->cdb[3];
	uint32_t alloc = ten ? get_be16(cmd->cdb + 7) : cmd->cdb[4];

	if (pc == PC_SAVED)
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_SAVING_PARAMS_UNSUPPORTED);
	else if (!mode_page_known(page, sub) && (sub == 0 || sub == 0xff))
		sense_invalid_cdb(cmd, 2, 5);
	else if (!mode_page_known(page, sub))
		sense_invalid_cdb(cmd, 3, 7);
	else
		din_build(cmd, alloc, mode_sense_build, NULL);
	scsi_cmd_complete(cmd);
}

bool mode_select_prep(struct scsi_cmd *cmd)
{
	bool ten = cmd->cdb[0] == SCSI_OP_MODE_SELECT10;
	uint32_t plen = ten ? get_be16(cmd->cdb + 7) : cmd->cdb[4];

	if (!(cmd->cdb[1] & 0x10)) {
		sense_invalid_cdb(cmd, 1, 4);   /* vendor-specific page format: not supported */
		return false;
	}
	if (cmd->cdb[1] & 0x01) {
		sense_invalid_cdb(cmd, 1, 0);   /* SP: nothing can be saved */
		return false;
	}
	if (plen > 1024) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		return false;
	}
	cmd->state = plen;
	return scsi_prep_param_list(cmd, plen);
}

/* Check every page first, then apply: a rejected list changes nothing. */
static int select_pages(struct scsi_cmd *cmd, const uint8_t *p, uint32_t len, uint32_t base, bool apply)
{
	struct scsi_lu *lu = cmd->lu;
	uint32_t off = 0;

	while (off < len) {
		if (len - off < 2) {
			sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
			return -1;
		}
		const uint8_t *pg = p + off;
		if (pg[0] & 0x40) {
			sense_invalid_param(cmd, (uint16_t)(base + off), 6);   /* no subpages */
			return -1;
		}
		uint8_t code = pg[0] & 0x3f;
		uint32_t plen = 2u + pg[1];
		if (plen > len - off) {
			sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
			return -1;
		}
		size_t i;
		for (i = 0; i < ARRAY_SIZE(mpages) && mpages[i].code != code; i++)
			;
		if (i == ARRAY_SIZE(mpages)) {
			sense_invalid_param(cmd, (uint16_t)(base + off), 5);
			return -1;
		}
		uint8_t cur[32], chg[32];
		struct din dc = din_over(cur, sizeof(cur)), dg = din_over(chg, sizeof(chg));
		mpages[i].fn(lu, PC_CURRENT, &dc);
		mpages[i].fn(lu, PC_CHANGEABLE, &dg);
		uint32_t l = din_pos(&dc);
		if (plen != l || l > sizeof(cur)) {
			sense_invalid_param(cmd, (uint16_t)(base + off + 1), 7);
			return -1;
		}
		for (uint32_t b = 2; b < l; b++) {
			if ((pg[b] ^ cur[b]) & ~chg[b]) {
				sense_invalid_param(cmd, (uint16_t)(base + off + b), -1);
				return -1;
			}
		}
		if (apply) {
			if (code == 0x08)
				lu_flag_set(&lu->wce, pg[2] & 0x04);
			if (code == 0x0a) {
				lu_flag_set(&lu->d_sense, pg[2] & 0x04);
				lu_flag_set(&lu->swp, pg[4] & 0x08);
			}
		}
		off += plen;
	}
	return 0;
}

void mode_select(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	bool ten = cmd->cdb[0] == SCSI_OP_MODE_SELECT10;
	uint32_t hl = ten ? 8 : 4, len = cmd->dout_len, bdl;
	const uint8_t *p = cmd->buf->data;

	if (len < cmd->state || (len && len < hl)) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		goto out;
	}
	if (!len)
		goto out;
	bdl = ten ? get_be16(p + 6) : p[3];
	if (bdl > len - hl) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		goto out;
	}
	/*
	 * A block descriptor may restate the block length, not change it.  Its
	 * length is checked before it is read: a shorter one would be read past
	 * the parameter list.
	 */
	if (bdl) {
		if (bdl != 8 && bdl != 16) {
			sense_invalid_param(cmd, ten ? 6 : 3, -1);
			goto out;
		}
		uint32_t at = bdl == 16 && ten && (p[4] & 1) ? 12 : 5;
		uint32_t blen = at == 12 ? get_be32(p + hl + at) : get_be24(p + hl + at);
		if (blen && blen != lu->block_size) {
			sense_invalid_param(cmd, (uint16_t)(hl + at), -1);
			goto out;
		}
	}
	pthread_mutex_lock(&lu->mu);
	if (select_pages(cmd, p + hl + bdl, len - hl - bdl, hl + bdl, false) == 0) {
		select_pages(cmd, p + hl + bdl, len - hl - bdl, hl + bdl, true);
		lu_ua_all(lu, cmd->nexus, ASC_MODE_PARAMS_CHANGED);
	}
	pthread_mutex_unlock(&lu->mu);
out:
	scsi_cmd_complete(cmd);
}
