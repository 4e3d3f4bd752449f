/*
 * Sense data, fixed (70h) or descriptor (72h) format as the LU's D_SENSE
 * bit selects.
 */
#include <string.h>

#include "target/scsi/lu/lu.h"

bool sense_desc_format(const struct scsi_cmd *cmd)
{
	return cmd->lu && lu_flag(&cmd->lu->d_sense);
}

uint32_t sense_build(uint8_t *out, bool desc, uint8_t key, uint16_t asc,
		     bool info_valid, uint64_t info, const uint8_t *sks)
{
	memset(out, 0, SCSI_SENSE_LEN);
	if (!desc) {
		out[0] = 0x70 | (info_valid ? 0x80 : 0);
		out[2] = key & 0x0f;
		if (info_valid)
			put_be32(out + 3, (uint32_t)info);
		out[7] = 10;
		out[12] = (uint8_t)(asc >> 8);
		out[13] = (uint8_t)asc;
		if (sks)
			memcpy(out + 15, sks, 3);
		return 18;
	}
	uint32_t n = 8;
	out[0] = 0x72;
	out[1] = key & 0x0f;
	out[2] = (uint8_t)(asc >> 8);
	out[3] = (uint8_t)asc;
	if (info_valid) {
		out[n] = 0x00;
		out[n + 1] = 0x0a;
		out[n + 2] = 0x80;
		put_be64(out + n + 4, info);
		n += 12;
	}
	if (sks) {
		out[n] = 0x02;
		out[n + 1] = 0x06;
		memcpy(out + n + 4, sks, 3);
		n += 8;
	}
	out[7] = (uint8_t)(n - 8);
	return n;
}

static void sense_fill(struct scsi_cmd *cmd, uint8_t key, uint16_t asc, bool iv,
		       uint64_t info, const uint8_t *sks)
{
	cmd->status = SCSI_CHECK_CONDITION;
	cmd->sense_len = sense_build(cmd->sense, sense_desc_format(cmd), key, asc, iv, info, sks);
	/* A failed command transfers nothing. */
	cmd->din_len = 0;
}

void sense_set(struct scsi_cmd *cmd, uint8_t key, uint16_t asc)
{
	sense_fill(cmd, key, asc, false, 0, NULL);
}

void sense_set_field(struct scsi_cmd *cmd, uint8_t key, uint16_t asc, bool cdb, uint16_t field, int bit)
{
	uint8_t sks[3];

	sks[0] = 0x80 | (cdb ? 0x40 : 0);
	if (bit >= 0)
		sks[0] |= 0x08 | (uint8_t)(bit & 7);
	put_be16(sks + 1, field);
	sense_fill(cmd, key, asc, false, 0, sks);
}

void sense_set_info(struct scsi_cmd *cmd, uint8_t key, uint16_t asc, uint64_t info)
{
	sense_fill(cmd, key, asc, true, info, NULL);
}

void sense_invalid_cdb(struct scsi_cmd *cmd, uint16_t byte, int bit)
{
	sense_set_field(cmd, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_CDB, true, byte, bit);
}

void sense_invalid_param(struct scsi_cmd *cmd, uint16_t byte, int bit)
{
	sense_set_field(cmd, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, false, byte, bit);
}
