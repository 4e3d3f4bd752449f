/*
 * SPC commands of a block LU: INQUIRY, REPORT LUNS, TEST UNIT READY,
 * REQUEST SENSE, REPORT SUPPORTED OPERATION CODES, START STOP UNIT,
 * PREVENT ALLOW MEDIUM REMOVAL, and the hand-off to reservations.
 */
#include <stdlib.h>
#include <string.h>

#include "common/bufpool.h"
#include "target/scsi/scsi_int.h"

/* Data-In only commands: nothing to collect; residual is set when the data is built. */
bool spc_prep_din(struct scsi_cmd *cmd)
{
	scsi_no_xfer(cmd);
	return true;
}

static void pad_copy(uint8_t *dst, const char *src, size_t n)
{
	size_t l = strlen(src);

	memset(dst, ' ', n);
	memcpy(dst, src, MIN(l, n));
}

static void inquiry_std(struct scsi_cmd *cmd, uint32_t alloc)
{
	static const uint16_t versions[] = { 0x00a0 /* SAM-5 */, 0x0960 /* iSCSI */,
					     0x0460 /* SPC-4 */, 0x04c0 /* SBC-3 */ };
	uint8_t d[96] = { 0 };
	struct scsi_lu *lu = cmd->lu;

	d[0] = lu ? 0x00 : 0x7f;  /* PQ 011b + type 1Fh: no LU at this LUN */
	d[2] = 0x06;              /* SPC-4 */
	d[3] = 0x12;              /* HISUP, response data format 2 */
	d[4] = sizeof(d) - 5;
	d[6] = 0x10;              /* MULTIP */
	d[7] = 0x02;              /* CMDQUE */
	pad_copy(d + 8, lu ? lu->vendor : "ISERT", 8);
	pad_copy(d + 16, lu ? lu->product : "", 16);
	pad_copy(d + 32, lu ? lu->revision : "", 4);
	for (size_t i = 0; i < ARRAY_SIZE(versions); i++)
		put_be16(d + 58 + 2 * i, versions[i]);
	scsi_cmd_din(cmd, d, sizeof(d), alloc);
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
			inquiry_std(cmd, alloc);
	} else if (!cmd->lu) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_LUN_NOT_SUPPORTED);
	} else {
		uint8_t d[512];
		int n = vpd_page(cmd, page, d, sizeof(d));
		if (n < 0)
			sense_invalid_cdb(cmd, 2, 7);
		else
			scsi_cmd_din(cmd, d, (uint32_t)n, alloc);
	}
	scsi_cmd_complete(cmd);
}

/* SAM-5 single level LUN: peripheral addressing below 256, flat space up to 16383. */
static void lun_encode(uint8_t *p, uint64_t lun)
{
	memset(p, 0, 8);
	if (lun < 256) {
		p[1] = (uint8_t)lun;
	} else {
		p[0] = 0x40 | (uint8_t)((lun >> 8) & 0x3f);
		p[1] = (uint8_t)lun;
	}
}

void spc_report_luns(struct scsi_cmd *cmd)
{
	uint32_t alloc = get_be32(cmd->cdb + 6);
	uint8_t sel = cmd->cdb[2];
	uint32_t n = 0, len;
	uint8_t *d;

	if (sel > 2 && (sel < 0x10 || sel > 0x12)) {
		sense_invalid_cdb(cmd, 2, 7);
		goto out;
	}
	/* Only well known LUNs (none here) for select 01h/11h. */
	if (cmd->lun_map && sel != 1 && sel != 0x11)
		n = cmd->lun_map->count;
	if (n > 16384)
		n = 16384;
	len = 8 + 8 * n;
	d = calloc(1, len);
	if (!d) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		goto out;
	}
	put_be32(d, 8 * n);
	for (uint32_t i = 0; i < n; i++)
		lun_encode(d + 8 + 8 * i, cmd->lun_map->luns[i]);
	scsi_cmd_din(cmd, d, len, alloc);
	free(d);
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
	struct scsi_lu *lu = cmd->lu;

	if (!lu) {
		key = SK_ILLEGAL_REQUEST;
		asc = ASC_LUN_NOT_SUPPORTED;
	} else {
		pthread_mutex_lock(&lu->mu);
		struct lu_nexus *n = lu_nexus_get(lu, cmd->nexus);
		if (lu_ua_pop(n, &asc))
			key = SK_UNIT_ATTENTION;
		else if (lu->ejected)
			key = SK_NOT_READY, asc = ASC_MEDIUM_NOT_PRESENT;
		else if (lu->stopped)
			key = SK_NOT_READY, asc = ASC_LU_NOT_READY_STOPPED;
		pthread_mutex_unlock(&lu->mu);
	}
	uint32_t len = sense_build(d, desc, key, asc, false, 0, NULL);
	scsi_cmd_din(cmd, d, len, alloc);
	scsi_cmd_complete(cmd);
}

/* REPORT SUPPORTED OPERATION CODES (SPC-4 6.35). */
static uint32_t rsoc_timeouts(uint8_t *p)
{
	memset(p, 0, 12);
	put_be16(p, 0x0a);
	put_be32(p + 4, 30);   /* nominal, seconds */
	put_be32(p + 8, 60);   /* recommended */
	return 12;
}

static void rsoc_all(struct scsi_cmd *cmd, bool rctd, uint32_t alloc)
{
	uint32_t per = rctd ? 20 : 8;
	uint32_t cap = 4 + per * (uint32_t)scsi_op_count();
	uint8_t *d = calloc(1, cap);
	uint32_t n = 4;

	if (!d) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		return;
	}
	for (size_t i = 0; i < scsi_op_count(); i++) {
		const struct scsi_op *op = scsi_op_at(i);
		if (!scsi_op_supported(cmd->lu, op))
			continue;
		uint8_t *p = d + n;
		p[0] = op->opcode;
		put_be16(p + 2, op->sa);
		p[5] = (rctd ? 0x02 : 0) | ((op->flags & OPF_SA) ? 0x01 : 0);
		put_be16(p + 6, op->cdb_len);
		n += 8;
		if (rctd)
			n += rsoc_timeouts(d + n);
	}
	put_be32(d, n - 4);
	scsi_cmd_din(cmd, d, n, alloc);
	free(d);
}

static void rsoc_one(struct scsi_cmd *cmd, uint8_t opt, bool rctd, uint32_t alloc)
{
	uint8_t opcode = cmd->cdb[3];
	uint16_t sa = get_be16(cmd->cdb + 4);
	uint8_t d[4 + 16 + 12] = { 0 };
	const struct scsi_op *op = NULL;
	bool sa_bad, has_sa;
	uint32_t n = 4;

	/* Does the opcode have service actions at all? */
	op = scsi_op_find(opcode, sa, &sa_bad);
	has_sa = (op && (op->flags & OPF_SA)) || sa_bad;
	if (opt == 1 && has_sa) {
		sense_invalid_cdb(cmd, 2, 2);
		return;
	}
	if (opt == 2 && !has_sa && op) {
		sense_invalid_cdb(cmd, 2, 2);
		return;
	}
	if (opt == 1 || (opt == 3 && !has_sa))
		sa = 0;
	if (op && !scsi_op_supported(cmd->lu, op))
		op = NULL;
	if (!op || (opt == 2 && !has_sa)) {
		d[1] = 0x01;   /* not supported */
	} else {
		d[1] = 0x03 | (rctd ? 0x80 : 0);
		put_be16(d + 2, op->cdb_len);
		memcpy(d + 4, op->usage, op->cdb_len);
		n += op->cdb_len;
		if (rctd)
			n += rsoc_timeouts(d + n);
	}
	scsi_cmd_din(cmd, d, n, alloc);
}

void spc_rsoc(struct scsi_cmd *cmd)
{
	uint8_t opt = cmd->cdb[2] & 0x07;
	bool rctd = cmd->cdb[2] & 0x80;
	uint32_t alloc = get_be32(cmd->cdb + 6);

	if (opt == 0)
		rsoc_all(cmd, rctd, alloc);
	else if (opt <= 3)
		rsoc_one(cmd, opt, rctd, alloc);
	else
		sense_invalid_cdb(cmd, 2, 2);
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

/* Reservations: pr.c does the work under the LU mutex. */
bool spc_prep_pr_out(struct scsi_cmd *cmd)
{
	uint32_t plen = get_be32(cmd->cdb + 5);

	if (plen > 4096) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		return false;
	}
	cmd->dout_len = cmd->dir_write ? MIN(plen, cmd->edtl) : 0;
	cmd->resid = (int64_t)cmd->edtl - plen;
	cmd->buf = scsi_buf_get(cmd, cmd->dout_len ? cmd->dout_len : 1);
	if (!cmd->buf) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		return false;
	}
	return true;
}

void spc_pr_in(struct scsi_cmd *cmd)
{
	pthread_mutex_lock(&cmd->lu->mu);
	pr_in(cmd->lu->pr, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	scsi_cmd_complete(cmd);
}

void spc_pr_out(struct scsi_cmd *cmd)
{
	int64_t resid = cmd->resid;

	pthread_mutex_lock(&cmd->lu->mu);
	pr_out(cmd->lu->pr, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	if (cmd->status == SCSI_GOOD)
		cmd->resid = resid;
	scsi_cmd_complete(cmd);
}

void spc_reserve(struct scsi_cmd *cmd)
{
	pthread_mutex_lock(&cmd->lu->mu);
	pr_reserve(cmd->lu->pr, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	scsi_cmd_complete(cmd);
}

void spc_release(struct scsi_cmd *cmd)
{
	pthread_mutex_lock(&cmd->lu->mu);
	pr_release(cmd->lu->pr, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	scsi_cmd_complete(cmd);
}
