/*
 * SPC commands of a block LU: INQUIRY, REPORT LUNS, TEST UNIT READY,
 * REQUEST SENSE, START STOP UNIT, PREVENT ALLOW MEDIUM REMOVAL, and the
 * hand-off to reservations.  REPORT SUPPORTED OPERATION CODES is
 * dispatch.c's: it is read off the opcode table, which names these.
 */

#include "common/bufpool.h"
#include "target/scsi/cmd/sanitize.h"
#include "target/scsi/pr/pr.h"
#include "target/scsi/scsi_int.h"

/* Data-In only commands: nothing to collect; residual is set when the data is built. */
bool spc_prep_din(struct scsi_cmd *cmd)
{
	scsi_no_xfer(cmd);
	return true;
}

static void inquiry_std(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	static const uint16_t versions[] = { 0x00a0 /* SAM-5 */, 0x0960 /* iSCSI */,
					     0x0460 /* SPC-4 */, 0x04c0 /* SBC-3 */ };
	struct scsi_lu *lu = cmd->lu;

	din_u8(d, lu ? 0x00 : 0x7f);  /* PQ 011b + type 1Fh: no LU at this LUN */
	din_u8(d, 0);
	din_u8(d, 0x06);              /* SPC-4 */
	din_u8(d, 0x12);              /* HISUP, response data format 2 */
	din_u8(d, 0);                 /* additional length, below */
	din_u8(d, (uint8_t)(alua_tpgs(cmd->nexus) << 4 | 0x08));  /* TPGS; 3PC: EXTENDED COPY */
	din_u8(d, 0x10);              /* MULTIP */
	din_u8(d, 0x02);              /* CMDQUE */
	din_ascii(d, lu ? lu->vendor : "ISERT", 8);
	din_ascii(d, lu ? lu->product : "", 16);
	din_ascii(d, lu ? lu->revision : "", 4);
	din_zero(d, 58 - din_pos(d));
	for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
		din_be16(d, versions[i]);
	din_zero(d, 96 - din_pos(d));
	din_set_u8(d, 4, (uint8_t)(din_pos(d) - 5));
}

void spc_inquiry(struct scsi_cmd *cmd)
{
	uint32_t alloc = get_be16(cmd->cdb + 3);
	uint8_t evpd = cmd->cdb[1] & 1;
	uint8_t page = cmd->cdb[2];

	if (cmd->cdb[1] & 0x02) {
		sense_invalid_cdb(cmd, 1, 1);   /* CMDDT is obsolete */
	} else if (!evpd) {
		if (page)
			sense_invalid_cdb(cmd, 2, 7);
		else
			din_build(cmd, alloc, inquiry_std, NULL);
	} else if (!cmd->lu) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_LUN_NOT_SUPPORTED);
	} else if (!vpd_page(cmd, page, alloc)) {
		sense_invalid_cdb(cmd, 2, 7);
	}
	scsi_cmd_complete(cmd);
}

/* SAM-5 single level LUN: peripheral addressing below 256, flat space up to 16383. */
static void lun_encode(struct din *d, uint64_t lun)
{
	if (lun < 256) {
		din_be16(d, (uint16_t)lun);
	} else {
		din_u8(d, 0x40 | (uint8_t)((lun >> 8) & 0x3f));
		din_u8(d, (uint8_t)lun);
	}
	din_zero(d, 6);
}

static void report_luns(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	const uint32_t *n = arg;

	din_be32(d, 8 * *n);
	din_zero(d, 4);
	for (uint32_t i = 0; i < *n; i++)
		lun_encode(d, cmd->lun_map->luns[i]);
}

void spc_report_luns(struct scsi_cmd *cmd)
{
	uint32_t alloc = get_be32(cmd->cdb + 6);
	uint8_t sel = cmd->cdb[2];
	uint32_t n = 0;

	if (sel > 2 && (sel < 0x10 || sel > 0x12)) {
		sense_invalid_cdb(cmd, 2, 7);
		goto out;
	}
	/* Only well known LUNs (none here) for select 01h/11h. */
	if (cmd->lun_map && sel != 1 && sel != 0x11)
		n = cmd->lun_map->count;
	if (n > 16384)
		n = 16384;
	din_build(cmd, alloc, report_luns, &n);
out:
	scsi_cmd_complete(cmd);
}

void spc_tur(struct scsi_cmd *cmd)
{
	scsi_cmd_complete(cmd);
}

void spc_request_sense(struct scsi_cmd *cmd)
{
	uint8_t d[SCSI_SENSE_LEN];
	bool desc = cmd->cdb[1] & 1;
	uint32_t alloc = cmd->cdb[4];
	uint16_t asc = 0;
	uint8_t key = SK_NO_SENSE;
	uint8_t sks[3];
	bool has_sks = false;
	struct scsi_lu *lu = cmd->lu;

	if (!lu) {
		key = SK_ILLEGAL_REQUEST;
		asc = ASC_LUN_NOT_SUPPORTED;
	} else {
		pthread_mutex_lock(&lu->mu);
		struct lu_nexus *n = lu_nexus_get(lu, cmd->nexus);
		if (lu_ua_pop(n, &asc))
			key = SK_UNIT_ATTENTION;
		else if (lu->sanitize)
			has_sks = sanitize_sense(lu, &key, &asc, sks);   /* with its progress while it runs */
		else if (lu->ejected)
			key = SK_NOT_READY, asc = ASC_MEDIUM_NOT_PRESENT;
		else if (lu->stopped)
			key = SK_NOT_READY, asc = ASC_LU_NOT_READY_STOPPED;
		else if (alua_not_ready_asc(cmd->nexus))
			key = SK_NOT_READY, asc = alua_not_ready_asc(cmd->nexus);
		pthread_mutex_unlock(&lu->mu);
	}
	uint32_t len = sense_build(d, desc, key, asc, false, 0, has_sks ? sks : NULL);
	scsi_cmd_din(cmd, d, len, alloc);
	scsi_cmd_complete(cmd);
}

void spc_start_stop(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t pc = cmd->cdb[4] >> 4;
	bool loej = cmd->cdb[4] & 0x02, start = cmd->cdb[4] & 0x01;

	if (cmd->cdb[3] & 0xf0) {
		sense_invalid_cdb(cmd, 3, 3);
		goto out;
	}
	/* Power conditions other than START_VALID change nothing we model. */
	if (pc)
		goto out;
	pthread_mutex_lock(&lu->mu);
	if (!start && loej) {
		bool prevented = false;
		for (struct lu_nexus *n = lu->nexuses; n; n = n->next)
			prevented |= n->prevent;
		if (prevented) {
			pthread_mutex_unlock(&lu->mu);
			sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_MEDIUM_REMOVAL_PREVENTED);
			goto out;
		}
	}
	__atomic_store_n(&lu->stopped, !start, __ATOMIC_RELAXED);
	if (loej)
		__atomic_store_n(&lu->ejected, !start, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&lu->mu);
out:
	scsi_cmd_complete(cmd);
}

void spc_prevent_allow(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t prevent = cmd->cdb[4] & 0x03;

	if (prevent > 1) {
		sense_invalid_cdb(cmd, 4, 1);
	} else {
		pthread_mutex_lock(&lu->mu);
		struct lu_nexus *n = lu_nexus_get(lu, cmd->nexus);
		if (n)
			n->prevent = prevent;
		pthread_mutex_unlock(&lu->mu);
	}
	scsi_cmd_complete(cmd);
}

/* Reservations: pr.c does the work under the LU mutex (share.c: on a copy, then stored). */
bool spc_prep_pr_out(struct scsi_cmd *cmd)
{
	uint32_t plen = get_be32(cmd->cdb + 5);

	if (plen > SCSI_PR_OUT_MAX) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		return false;
	}
	return scsi_prep_param_list(cmd, plen);
}

void spc_pr_in(struct scsi_cmd *cmd)
{
	pthread_mutex_lock(&cmd->lu->mu);
	pr_in(cmd->lu->pr, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	scsi_cmd_complete(cmd);
}

/* Changes go through the LU's state operations: here (pr/local.c), or shared with the other targets (shared/share.c). */
void spc_pr_out(struct scsi_cmd *cmd)
{
	cmd->lu->state->pr_out(cmd);
}

void spc_reserve(struct scsi_cmd *cmd)
{
	cmd->lu->state->reserve(cmd);
}

void spc_release(struct scsi_cmd *cmd)
{
	cmd->lu->state->release(cmd);
}
