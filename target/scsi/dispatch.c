/*
 * The opcode table and the command flow: every CDB is looked up once, the
 * entry says what may run with a unit attention pending, without a LUN,
 * with the medium stopped or write protected, or from a read-only mapping;
 * REPORT SUPPORTED OPERATION CODES is generated from the same entries.
 */
#include <string.h>

#include "common/bufpool.h"
#include "target/scsi/alua/alua.h"
#include "target/scsi/cmd/sanitize.h"
#include "target/scsi/copy/rod.h"
#include "target/scsi/pr/pr.h"
#include "target/scsi/scsi_int.h"

#define F0 0xff
#define LBA4 F0, F0, F0, F0
#define LBA8 LBA4, LBA4

/* CDB usage data (SPC-4 6.35.3) starts with the opcode: OP() puts it there. */
#define OP(opc, sa, len, flags, prep, exec, ...) { opc, sa, len, flags, prep, exec, { opc, __VA_ARGS__ } }

/* What runs in each ALUA state that is not active (SPC-4 5.16.2.4.4-6). */
#define ALUA_ALL     (OPF_STANDBY_OK | OPF_UNAVAILABLE_OK | OPF_TRANSITIONING_OK)
#define ALUA_STANDBY OPF_STANDBY_OK

/* REPORT SUPPORTED OPERATION CODES: built from the table below (the table names it). */
static void rsoc(struct scsi_cmd *cmd);

static const struct scsi_op ops[] = {
	OP(SCSI_OP_TEST_UNIT_READY, 0, 6, OPF_MEDIUM, NULL, spc_tur, 0, 0, 0, 0, 0),
	OP(SCSI_OP_REQUEST_SENSE, 0, 6, OPF_UA_OK | OPF_NO_LU | ALUA_ALL, spc_prep_din, spc_request_sense, 0x01, 0, 0, F0, 0),
	OP(SCSI_OP_READ6, 0, 6, OPF_MEDIUM, sbc_prep_rw, sbc_read, 0x1f, F0, F0, F0, 0),
	OP(SCSI_OP_WRITE6, 0, 6, OPF_MEDIUM | OPF_WRITE, sbc_prep_rw, sbc_write, 0x1f, F0, F0, F0, 0),
	OP(SCSI_OP_INQUIRY, 0, 6, OPF_UA_OK | OPF_NO_LU | ALUA_ALL, spc_prep_din, spc_inquiry, 0x01, F0, F0, F0, 0),
	OP(SCSI_OP_MODE_SELECT6, 0, 6, OPF_SHARED | ALUA_STANDBY, mode_select_prep, mode_select, 0x11, 0, 0, F0, 0),
	OP(SCSI_OP_RESERVE6, 0, 6, OPF_SHARED | OPF_RESERVATION, NULL, spc_reserve, 0, 0, 0, 0, 0),
	OP(SCSI_OP_RELEASE6, 0, 6, OPF_RESERVATION, NULL, spc_release, 0, 0, 0, 0, 0),
	OP(SCSI_OP_MODE_SENSE6, 0, 6, ALUA_STANDBY, spc_prep_din, mode_sense, 0x08, F0, F0, F0, 0),
	OP(SCSI_OP_START_STOP_UNIT, 0, 6, OPF_SHARED, NULL, spc_start_stop, 0x01, 0, 0x0f, 0xf7, 0),
	OP(SCSI_OP_PREVENT_ALLOW, 0, 6, OPF_SHARED, NULL, spc_prevent_allow, 0, 0, 0, 0x03, 0),
	OP(SCSI_OP_READ_CAPACITY10, 0, 10, OPF_MEDIUM, spc_prep_din, sbc_read_capacity10, 0, LBA4, 0, 0, 0x01, 0),
	OP(SCSI_OP_READ10, 0, 10, OPF_MEDIUM, sbc_prep_rw, sbc_read, 0x1a, LBA4, 0, F0, F0, 0),
	OP(SCSI_OP_WRITE10, 0, 10, OPF_MEDIUM | OPF_WRITE, sbc_prep_rw, sbc_write, 0x1a, LBA4, 0, F0, F0, 0),
	OP(SCSI_OP_WRITE_VERIFY10, 0, 10, OPF_MEDIUM | OPF_WRITE, sbc_prep_rw, sbc_write, 0x12, LBA4, 0, F0, F0, 0),
	OP(SCSI_OP_VERIFY10, 0, 10, OPF_MEDIUM, sbc_prep_verify, sbc_verify, 0x16, LBA4, 0, F0, F0, 0),
	OP(SCSI_OP_PREFETCH10, 0, 10, OPF_MEDIUM, sbc_prep_prefetch, sbc_nop, 0x02, LBA4, 0, F0, F0, 0),
	OP(SCSI_OP_SYNC_CACHE10, 0, 10, OPF_MEDIUM, sbc_prep_sync, sbc_sync, 0x02, LBA4, 0, F0, F0, 0),
	OP(SCSI_OP_WRITE_SAME10, 0, 10, OPF_MEDIUM | OPF_WRITE, sbc_prep_ws, sbc_ws, 0x08, LBA4, 0, F0, F0, 0),
	OP(SCSI_OP_UNMAP, 0, 10, OPF_MEDIUM | OPF_WRITE | OPF_THIN, sbc_prep_unmap, sbc_unmap,
	   0, 0, 0, 0, 0, 0, F0, F0, 0),
	OP(SCSI_OP_MODE_SELECT10, 0, 10, OPF_SHARED | ALUA_STANDBY, mode_select_prep, mode_select, 0x11, 0, 0, 0, 0, 0, F0, F0, 0),
	OP(SCSI_OP_RESERVE10, 0, 10, OPF_SHARED | OPF_RESERVATION, NULL, spc_reserve, 0, 0, 0, 0, 0, 0, 0, 0, 0),
	OP(SCSI_OP_RELEASE10, 0, 10, OPF_RESERVATION, NULL, spc_release, 0, 0, 0, 0, 0, 0, 0, 0, 0),
	OP(SCSI_OP_MODE_SENSE10, 0, 10, ALUA_STANDBY, spc_prep_din, mode_sense, 0x18, F0, F0, 0, 0, 0, F0, F0, 0),
#define PRIN(sa) OP(SCSI_OP_PR_IN, sa, 10, OPF_SA | OPF_RESERVATION | ALUA_STANDBY, spc_prep_din, spc_pr_in, sa, 0, 0, 0, 0, 0, F0, F0, 0)
	PRIN(SCSI_PRIN_READ_KEYS), PRIN(SCSI_PRIN_READ_RESERVATION),
	PRIN(SCSI_PRIN_REPORT_CAPABILITIES), PRIN(SCSI_PRIN_READ_FULL_STATUS),
#define PROUT(sa) OP(SCSI_OP_PR_OUT, sa, 10, OPF_SA | OPF_SHARED | OPF_RESERVATION | ALUA_STANDBY, spc_prep_pr_out, spc_pr_out, \
		     sa, F0, 0, 0, F0, F0, F0, F0, 0)
	PROUT(SCSI_PROUT_REGISTER), PROUT(SCSI_PROUT_RESERVE), PROUT(SCSI_PROUT_RELEASE),
	PROUT(SCSI_PROUT_CLEAR), PROUT(SCSI_PROUT_PREEMPT), PROUT(SCSI_PROUT_PREEMPT_ABORT),
	PROUT(SCSI_PROUT_REGISTER_IGNORE), PROUT(SCSI_PROUT_REGISTER_MOVE),
	/* Third-party copy (xcopy.c): EXTENDED COPY (LID1); RECEIVE COPY RESULTS COPY STATUS, OPERATING PARAMETERS. */
	OP(SCSI_OP_EXTENDED_COPY, 0x00, 16, OPF_MEDIUM | OPF_SA, xcopy_prep, xcopy_exec,
	   0x00, 0, 0, 0, 0, 0, 0, 0, 0, LBA4, 0, 0),
	/* Token-based copy (rod.c): POPULATE TOKEN, WRITE USING TOKEN; RECEIVE ROD TOKEN INFORMATION below. */
	OP(SCSI_OP_EXTENDED_COPY, ROD_SA_PT, 16, OPF_MEDIUM | OPF_SA | OPF_TOKEN, rod_prep_pt, rod_pt,
	   ROD_SA_PT, 0, 0, 0, 0, LBA4, LBA4, 0, 0),
	OP(SCSI_OP_EXTENDED_COPY, ROD_SA_WUT, 16, OPF_MEDIUM | OPF_SA | OPF_WRITE | OPF_TOKEN, rod_prep_wut, rod_wut,
	   ROD_SA_WUT, 0, 0, 0, 0, LBA4, LBA4, 0, 0),
	OP(SCSI_OP_RECEIVE_COPY_RESULTS, 0x00, 16, OPF_SA, spc_prep_din, xcopy_receive_results,
	   0x00, F0, 0, 0, 0, 0, 0, 0, 0, LBA4, 0, 0),
	OP(SCSI_OP_RECEIVE_COPY_RESULTS, 0x03, 16, OPF_SA, spc_prep_din, xcopy_receive_results,
	   0x03, 0, 0, 0, 0, 0, 0, 0, 0, LBA4, 0, 0),
	OP(SCSI_OP_RECEIVE_COPY_RESULTS, ROD_SA_RRTI, 16, OPF_SA | OPF_TOKEN, spc_prep_din, rod_rrti,
	   ROD_SA_RRTI, LBA4, 0, 0, 0, 0, LBA4, 0, 0),
	/* SANITIZE (sanitize.c): IMMED, ZNR, AUSE; PARAMETER LIST LENGTH for OVERWRITE only. */
#define SANITIZE(sa, flags, pl) OP(SCSI_OP_SANITIZE, sa, 10, OPF_SA | OPF_MEDIUM | (flags), sanitize_prep, sanitize_exec, \
				   0xe0 | (sa), 0, 0, 0, 0, 0, pl, pl, 0)
	SANITIZE(SAN_OVERWRITE, OPF_WRITE, F0), SANITIZE(SAN_BLOCK_ERASE, OPF_WRITE | OPF_SANITIZE, 0),
	SANITIZE(SAN_CRYPTO_ERASE, OPF_WRITE | OPF_SANITIZE, 0), SANITIZE(SAN_EXIT_FAILURE, OPF_SHARED, 0),
	OP(SCSI_OP_READ16, 0, 16, OPF_MEDIUM, sbc_prep_rw, sbc_read, 0x1a, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_COMPARE_AND_WRITE, 0, 16, OPF_MEDIUM | OPF_WRITE, sbc_prep_caw, sbc_caw,
	   0x18, LBA8, 0, 0, 0, F0, 0, 0),
	OP(SCSI_OP_WRITE16, 0, 16, OPF_MEDIUM | OPF_WRITE, sbc_prep_rw, sbc_write, 0x1a, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_ORWRITE16, 0, 16, OPF_MEDIUM | OPF_WRITE, sbc_prep_orwrite, sbc_orwrite, 0x1a, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_WRITE_VERIFY16, 0, 16, OPF_MEDIUM | OPF_WRITE, sbc_prep_rw, sbc_write, 0x12, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_VERIFY16, 0, 16, OPF_MEDIUM, sbc_prep_verify, sbc_verify, 0x16, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_PREFETCH16, 0, 16, OPF_MEDIUM, sbc_prep_prefetch, sbc_nop, 0x02, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_SYNC_CACHE16, 0, 16, OPF_MEDIUM, sbc_prep_sync, sbc_sync, 0x02, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_WRITE_SAME16, 0, 16, OPF_MEDIUM | OPF_WRITE, sbc_prep_ws, sbc_ws, 0x09, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_WRITE_ATOMIC16, 0, 16, OPF_MEDIUM | OPF_WRITE | OPF_ATOMIC, sbc_prep_atomic, sbc_atomic,
	   0x18, LBA8, 0, 0, F0, F0, 0, 0),
	OP(SCSI_OP_SERVICE_ACTION_IN16, SCSI_SAI_READ_CAPACITY16, 16, OPF_MEDIUM | OPF_SA, spc_prep_din,
	   sbc_read_capacity16, SCSI_SAI_READ_CAPACITY16, LBA8, LBA4, 0x01, 0),
	OP(SCSI_OP_SERVICE_ACTION_IN16, SCSI_SAI_GET_LBA_STATUS, 16, OPF_MEDIUM | OPF_SA, sbc_prep_get_lba_status,
	   sbc_get_lba_status, SCSI_SAI_GET_LBA_STATUS, LBA8, LBA4, 0, 0),
	OP(SCSI_OP_REPORT_LUNS, 0, 12, OPF_UA_OK | OPF_NO_LU | ALUA_ALL, spc_prep_din, spc_report_luns,
	   0, F0, 0, 0, 0, LBA4, 0, 0),
	OP(SCSI_OP_MAINTENANCE_IN, SCSI_MI_REPORT_TPGS, 12, OPF_SA | ALUA_ALL, spc_prep_din, alua_report_tpgs,
	   0xe0 | SCSI_MI_REPORT_TPGS, 0, 0, 0, 0, LBA4, 0, 0),
	OP(SCSI_OP_MAINTENANCE_IN, SCSI_MI_REPORT_SUPPORTED_OPCODES, 12, OPF_SA, spc_prep_din, rsoc,
	   SCSI_MI_REPORT_SUPPORTED_OPCODES, 0x87, F0, F0, F0, LBA4, 0, 0),
	OP(SCSI_OP_MAINTENANCE_OUT, SCSI_MO_SET_TPGS, 12,
	   OPF_SA | OPF_SHARED | OPF_EXPLICIT_ALUA | OPF_STANDBY_OK | OPF_UNAVAILABLE_OK,
	   alua_prep_stpg, alua_set_tpgs, SCSI_MO_SET_TPGS, 0, 0, 0, 0, LBA4, 0, 0),
	OP(SCSI_OP_READ12, 0, 12, OPF_MEDIUM, sbc_prep_rw, sbc_read, 0x1a, LBA4, LBA4, 0, 0),
	OP(SCSI_OP_WRITE12, 0, 12, OPF_MEDIUM | OPF_WRITE, sbc_prep_rw, sbc_write, 0x1a, LBA4, LBA4, 0, 0),
	OP(SCSI_OP_WRITE_VERIFY12, 0, 12, OPF_MEDIUM | OPF_WRITE, sbc_prep_rw, sbc_write, 0x12, LBA4, LBA4, 0, 0),
	OP(SCSI_OP_READ_DEFECT10, 0, 10, OPF_MEDIUM, spc_prep_din, sbc_read_defect, 0, 0x1f, 0, 0, 0, 0, F0, F0, 0),
	OP(SCSI_OP_READ_DEFECT12, 0, 12, OPF_MEDIUM, spc_prep_din, sbc_read_defect, 0x1f, LBA4, LBA4, 0, 0),
	OP(SCSI_OP_VERIFY12, 0, 12, OPF_MEDIUM, sbc_prep_verify, sbc_verify, 0x16, LBA4, LBA4, 0, 0),
};

/* opcode -> first table index + 1 (0: unsupported); built once. */
static uint8_t op_index[256];
static pthread_once_t op_once = PTHREAD_ONCE_INIT;

static void op_index_build(void)
{
	for (size_t i = ARRAY_SIZE(ops); i-- > 0;)
		op_index[ops[i].opcode] = (uint8_t)(i + 1);
}

size_t scsi_op_count(void)
{
	return ARRAY_SIZE(ops);
}

const struct scsi_op *scsi_op_at(size_t i)
{
	return i < ARRAY_SIZE(ops) ? &ops[i] : NULL;
}

bool scsi_op_supported(const struct scsi_cmd *cmd, const struct scsi_op *op)
{
	const struct scsi_lu *lu = cmd->lu;

	if ((op->flags & OPF_ATOMIC) && !(lu && sbc_atomic_max_blocks(lu)))
		return false;
	if ((op->flags & OPF_EXPLICIT_ALUA) && !(alua_tpgs(cmd->nexus) & SCSI_ALUA_EXPLICIT))
		return false;
	if ((op->flags & OPF_RESERVATION) && lu && backstore_shared(lu->bs) && !lu->share)
		return false;
	if ((op->flags & OPF_TOKEN) && !(lu && rod_supported(lu)))
		return false;
	if ((op->flags & OPF_SANITIZE) && !sanitize_sa_supported(lu, op->sa))
		return false;
	return !(op->flags & OPF_THIN) || (lu && lu->thin);
}

/* The entry for opcode (and sa if it has service actions); *sa_bad when only the SA is unknown. */
const struct scsi_op *scsi_op_find(uint8_t opcode, uint16_t sa, bool *sa_bad)
{
	pthread_once(&op_once, op_index_build);
	*sa_bad = false;
	unsigned i = op_index[opcode];
	if (!i)
		return NULL;
	const struct scsi_op *op = &ops[i - 1];
	if (!(op->flags & OPF_SA))
		return op;
	for (; op < ops + ARRAY_SIZE(ops) && op->opcode == opcode; op++)
		if (op->sa == sa)
			return op;
	*sa_bad = true;
	return NULL;
}

/* REPORT SUPPORTED OPERATION CODES (SPC-4 6.35). */
static void rsoc_timeouts(struct din *d)
{
	din_be16(d, 0x0a);
	din_zero(d, 2);
	din_be32(d, 30);   /* nominal, seconds */
	din_be32(d, 60);   /* recommended */
}

static void rsoc_all(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	bool rctd = cmd->cdb[2] & 0x80;

	din_be32(d, 0);    /* command data length, below */
	for (size_t i = 0; i < scsi_op_count(); i++) {
		const struct scsi_op *op = scsi_op_at(i);
		if (!scsi_op_supported(cmd, op))
			continue;
		din_u8(d, op->opcode);
		din_u8(d, 0);
		din_be16(d, op->sa);
		din_u8(d, 0);
		din_u8(d, (rctd ? 0x02 : 0) | ((op->flags & OPF_SA) ? 0x01 : 0));
		din_be16(d, op->cdb_len);
		if (rctd)
			rsoc_timeouts(d);
	}
	din_set_be32(d, 0, din_pos(d) - 4);
}

/* One command's descriptor; arg: its entry, NULL when not supported. */
static void rsoc_one(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	const struct scsi_op *op = arg;
	bool rctd = cmd->cdb[2] & 0x80;

	din_u8(d, 0);
	if (!op) {
		din_u8(d, 0x01);   /* not supported */
		din_zero(d, 2);
		return;
	}
	din_u8(d, 0x03 | (rctd ? 0x80 : 0));
	din_be16(d, op->cdb_len);
	din_put(d, op->usage, MIN((size_t)op->cdb_len, sizeof(op->usage)));
	if (rctd)
		rsoc_timeouts(d);
}

/* The opcode (and service action) asked for, NULL when unsupported; false: sense set. */
static bool rsoc_find(struct scsi_cmd *cmd, uint8_t opt, const struct scsi_op **out)
{
	uint8_t opcode = cmd->cdb[3];
	uint16_t sa = get_be16(cmd->cdb + 4);
	const struct scsi_op *op;
	bool sa_bad, has_sa;

	/* Does the opcode have service actions at all? */
	op = scsi_op_find(opcode, sa, &sa_bad);
	has_sa = (op && (op->flags & OPF_SA)) || sa_bad;
	if ((opt == 1 && has_sa) || (opt == 2 && !has_sa && op)) {
		sense_invalid_cdb(cmd, 2, 2);
		return false;
	}
	if (op && !scsi_op_supported(cmd, op))
		op = NULL;
	if (opt == 2 && !has_sa)
		op = NULL;
	*out = op;
	return true;
}

static void rsoc(struct scsi_cmd *cmd)
{
	uint8_t opt = cmd->cdb[2] & 0x07;
	uint32_t alloc = get_be32(cmd->cdb + 6);

	const struct scsi_op *op;

	if (opt == 0)
		din_build(cmd, alloc, rsoc_all, NULL);
	else if (opt > 3)
		sense_invalid_cdb(cmd, 2, 2);
	else if (rsoc_find(cmd, opt, &op))
		din_build(cmd, alloc, rsoc_one, op);
	scsi_cmd_complete(cmd);
}

static void cmd_reset(struct scsi_cmd *cmd)
{
	cmd->dout_len = 0;
	cmd->buf = NULL;
	cmd->buf2 = NULL;
	cmd->din_len = 0;
	cmd->resid = 0;
	cmd->status = SCSI_GOOD;
	cmd->sense_len = 0;
	cmd->lba = 0;
	cmd->nblocks = 0;
	cmd->flags = 0;
	cmd->state = 0;
	cmd->scratch = NULL;
	cmd->san_writing = false;
}

/* The op for this command, found again at exec from the CDB (nothing keeps it in between). */
static const struct scsi_op *cmd_op(const struct scsi_cmd *cmd)
{
	bool bad;
	uint8_t sa = cmd->cdb[1] & 0x1f;

	return scsi_op_find(cmd->cdb[0], sa, &bad);
}

/* OPF_SHARED, but for ALLOW MEDIUM REMOVAL: it lifts only the issuing nexus's own prevention. */
static bool changes_shared(const struct scsi_cmd *cmd, const struct scsi_op *op)
{
	if (!(op->flags & OPF_SHARED))
		return false;
	return op->opcode != SCSI_OP_PREVENT_ALLOW || (cmd->cdb[4] & 0x03);
}

/*
 * The common case, read without the LU's mutex: no unit attention pending
 * for this I_T_L, no ALUA change it has not heard of, no reservation held on
 * the LU.  Each of these is set under the mutex, so a command that races a
 * change is ordered either before it or after it, as with the mutex.
 */
static bool itl_quiet(const struct lu_nexus *n, const struct scsi_nexus *nx, const struct scsi_lu *lu)
{
	if (__atomic_load_n(&n->n_ua, __ATOMIC_ACQUIRE) || pr_active(lu->pr))
		return false;
	return !nx->port || (n->alua_seen && __atomic_load_n(&n->alua_gen, __ATOMIC_ACQUIRE) == scsi_alua_gen(nx->port));
}

/* Unit attention, reservation conflict: the LU's shared state, under its mutex unless all is quiet. */
static bool check_shared(struct scsi_cmd *cmd, const struct scsi_op *op)
{
	struct scsi_lu *lu = cmd->lu;
	struct lu_nexus *n = cmd->itl;
	uint16_t asc;
	bool ok = true;

	if (n && cmd->nexus && itl_quiet(n, cmd->nexus, lu)) {
		cmd->flags |= (uint32_t)__atomic_load_n(&n->abort_gen, __ATOMIC_ACQUIRE) << CMD_GEN_SHIFT;
		return true;
	}
	pthread_mutex_lock(&lu->mu);
	n = lu_nexus_get(lu, cmd->nexus);
	if (n)
		cmd->flags |= (uint32_t)n->abort_gen << CMD_GEN_SHIFT;
	alua_ua_sync(n, cmd->nexus);
	if (n && n->n_ua && !(op && (op->flags & OPF_UA_OK)) && lu_ua_pop(n, &asc)) {
		sense_set(cmd, SK_UNIT_ATTENTION, asc);
		ok = false;
	} else if (op && cmd->nexus && pr_conflict(lu->pr, cmd->nexus, cmd->cdb)) {
		cmd->status = SCSI_RESERVATION_CONFLICT;
		ok = false;
	}
	pthread_mutex_unlock(&lu->mu);
	return ok;
}

bool scsi_cmd_prepare(struct scsi_cmd *cmd)
{
	const struct scsi_op *op;
	bool sa_bad;

	cmd_reset(cmd);
	op = scsi_op_find(cmd->cdb[0], cmd->cdb[1] & 0x1f, &sa_bad);
	if (op && !scsi_op_supported(cmd, op)) {
		sa_bad = op->flags & (OPF_SANITIZE | OPF_TOKEN);   /* the opcode is there, not this service action */
		op = NULL;
	}
	if (!cmd->lu && !(op && (op->flags & OPF_NO_LU))) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_LUN_NOT_SUPPORTED);
		return false;
	}
	if (cmd->lu && !check_shared(cmd, op))
		return false;
	if (cmd->lu && op && !alua_check(cmd, op))
		return false;
	if (!op) {
		if (sa_bad)
			sense_invalid_cdb(cmd, 1, 4);
		else
			sense_set_field(cmd, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE, true, 0, 7);
		return false;
	}
	if (cmd->cdb_len < op->cdb_len) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
		return false;
	}
	if (cmd->lu && !sanitize_check(cmd, op))
		return false;
	if (cmd->lu && (op->flags & OPF_MEDIUM)) {
		bool stopped = __atomic_load_n(&cmd->lu->stopped, __ATOMIC_RELAXED);
		bool ejected = __atomic_load_n(&cmd->lu->ejected, __ATOMIC_RELAXED);
		if (ejected) {
			sense_set(cmd, SK_NOT_READY, ASC_MEDIUM_NOT_PRESENT);
			return false;
		}
		if (stopped) {
			sense_set(cmd, SK_NOT_READY, ASC_LU_NOT_READY_STOPPED);
			return false;
		}
	}
	if (cmd->lu && (((op->flags & OPF_WRITE) && lu_write_protected(cmd)) ||
			(changes_shared(cmd, op) && lu_mapping_ro(cmd)))) {
		sense_set(cmd, SK_DATA_PROTECT, ASC_WRITE_PROTECTED);
		return false;
	}
	if (op->prepare)
		return op->prepare(cmd);
	scsi_no_xfer(cmd);
	return true;
}

/* Did a PREEMPT AND ABORT of its nexus overtake cmd since prepare?  Without the mutex when it has its entry. */
static bool cmd_aborted(const struct scsi_cmd *cmd)
{
	bool aborted;

	if (!cmd->lu || !__atomic_load_n(&cmd->lu->pr_aborts, __ATOMIC_ACQUIRE))
		return false;
	if (cmd->itl)
		return (uint16_t)(cmd->flags >> CMD_GEN_SHIFT) != __atomic_load_n(&cmd->itl->abort_gen, __ATOMIC_ACQUIRE);
	pthread_mutex_lock(&cmd->lu->mu);
	aborted = lu_cmd_aborted(cmd->lu, cmd);
	pthread_mutex_unlock(&cmd->lu->mu);
	return aborted;
}

void scsi_cmd_exec(struct scsi_cmd *cmd)
{
	const struct scsi_op *op = cmd_op(cmd);

	if (!op) {
		/* prepare accepted it; cannot happen unless the CDB changed in between */
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_INVALID_OPCODE);
		scsi_cmd_complete(cmd);
		return;
	}
	if (cmd_aborted(cmd)) {
		cmd->status = SCSI_TASK_ABORTED;
		cmd->sense_len = 0;
		cmd->din_len = 0;
		cmd->resid = (int64_t)cmd->edtl;
		scsi_cmd_complete(cmd);
		return;
	}
	/*
	 * A SANITIZE started while this one's Data-Out came in: its blocks are
	 * not to be touched now.  A write is counted until it completes, so a
	 * SANITIZE that comes later waits for it before it overwrites.
	 */
	if (cmd->lu && (op->flags & OPF_WRITE) && op->opcode != SCSI_OP_SANITIZE) {
		uint8_t st = lu_write_begin(cmd->lu, cmd->reactor);
		if (st != SAN_STATE_NONE) {
			lu_sanitize_refuse(cmd, st);
			scsi_cmd_complete(cmd);
			return;
		}
		cmd->san_writing = true;
	} else if (cmd->lu && (op->flags & OPF_MEDIUM) && op->opcode != SCSI_OP_SANITIZE && !sanitize_check(cmd, op)) {
		scsi_cmd_complete(cmd);
		return;
	}
	/* What it is about to change cancels the ROD tokens of those blocks (rod.c). */
	if (op->flags & OPF_WRITE)
		rod_cmd_writes(cmd);
	op->exec(cmd);
}

void scsi_cmd_release(struct scsi_cmd *cmd)
{
	if (cmd->buf == &cmd->view) {
		backstore_view_put(&cmd->view_h);
		cmd->buf = NULL;
	} else if (cmd->buf) {
		bufpool_put(cmd->buf);
		cmd->buf = NULL;
	}
	if (cmd->buf2) {
		bufpool_put(cmd->buf2);
		cmd->buf2 = NULL;
	}
}
