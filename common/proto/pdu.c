/* iSCSI PDU helpers: BHS field access, LUN encoding and receive-side checks. */
#include "common/proto/pdu.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

uint32_t pdu_dlen(const void *bhs)
{
	return get_be24((const uint8_t *)bhs + 5);
}

void pdu_set_dlen(void *bhs, uint32_t len)
{
	put_be24((uint8_t *)bhs + 5, len & PDU_MAX_DLEN);
}

uint64_t pdu_lun(const void *bhs)
{
	return get_be64((const uint8_t *)bhs + 8);
}

void pdu_set_lun(void *bhs, uint64_t lun)
{
	put_be64((uint8_t *)bhs + 8, lun);
}

/*
 * SAM-5 single-level LUN: peripheral device addressing (bus 0) below 256 as
 * Linux and every initiator expect, flat space below 16384, and extended flat
 * space (0xD2, 24 bits) above that.
 */
uint64_t pdu_lun_encode(uint64_t lun)
{
	if (lun < 256)
		return lun << 48;
	if (lun < 16384)
		return (0x4000 | lun) << 48;
	if (lun <= 0xffffff)
		return (uint64_t)0xd2 << 56 | lun << 32;
	return PDU_LUN_INVALID;
}

uint64_t pdu_lun_decode(uint64_t raw)
{
	uint8_t b0 = (uint8_t)(raw >> 56);

	switch (b0 >> 6) {
	case 0: /* peripheral: only bus 0, single level */
		if ((b0 & 0x3f) != 0 || (raw & 0xffffffffffffull) != 0)
			return PDU_LUN_INVALID;
		return (raw >> 48) & 0xff;
	case 1: /* flat space */
		if ((raw & 0xffffffffffffull) != 0)
			return PDU_LUN_INVALID;
		return (raw >> 48) & 0x3fff;
	case 3:
		if (b0 == 0xd2 && (raw & 0xffffffffull) == 0)
			return (raw >> 32) & 0xffffff;
		return PDU_LUN_INVALID;
	default: /* logical unit addressing: not used for our LUN numbers */
		return PDU_LUN_INVALID;
	}
}

const char *pdu_opcode_name(uint8_t opcode)
{
	static __thread char unknown[16];

	switch (opcode & PDU_OPCODE_MASK) {
	case PDU_OP_NOP_OUT: return "NOP-Out";
	case PDU_OP_SCSI_CMD: return "SCSI Command";
	case PDU_OP_TMF_REQ: return "Task Management Request";
	case PDU_OP_LOGIN_REQ: return "Login Request";
	case PDU_OP_TEXT_REQ: return "Text Request";
	case PDU_OP_DATA_OUT: return "SCSI Data-Out";
	case PDU_OP_LOGOUT_REQ: return "Logout Request";
	case PDU_OP_SNACK_REQ: return "SNACK Request";
	case PDU_OP_NOP_IN: return "NOP-In";
	case PDU_OP_SCSI_RSP: return "SCSI Response";
	case PDU_OP_TMF_RSP: return "Task Management Response";
	case PDU_OP_LOGIN_RSP: return "Login Response";
	case PDU_OP_TEXT_RSP: return "Text Response";
	case PDU_OP_DATA_IN: return "SCSI Data-In";
	case PDU_OP_LOGOUT_RSP: return "Logout Response";
	case PDU_OP_R2T: return "Ready To Transfer";
	case PDU_OP_ASYNC_MSG: return "Asynchronous Message";
	case PDU_OP_REJECT: return "Reject";
	}
	snprintf(unknown, sizeof(unknown), "unknown 0x%02x", opcode & PDU_OPCODE_MASK);
	return unknown;
}

bool pdu_opcode_from_initiator(uint8_t opcode)
{
	switch (opcode & PDU_OPCODE_MASK) {
	case PDU_OP_NOP_OUT: case PDU_OP_SCSI_CMD: case PDU_OP_TMF_REQ:
	case PDU_OP_LOGIN_REQ: case PDU_OP_TEXT_REQ: case PDU_OP_DATA_OUT:
	case PDU_OP_LOGOUT_REQ: case PDU_OP_SNACK_REQ:
		return true;
	}
	return false;
}

bool pdu_opcode_from_target(uint8_t opcode)
{
	switch (opcode & PDU_OPCODE_MASK) {
	case PDU_OP_NOP_IN: case PDU_OP_SCSI_RSP: case PDU_OP_TMF_RSP:
	case PDU_OP_LOGIN_RSP: case PDU_OP_TEXT_RSP: case PDU_OP_DATA_IN:
	case PDU_OP_LOGOUT_RSP: case PDU_OP_R2T: case PDU_OP_ASYNC_MSG:
	case PDU_OP_REJECT:
		return true;
	}
	return false;
}

bool pdu_opcode_may_carry_data(uint8_t opcode)
{
	switch (opcode & PDU_OPCODE_MASK) {
	case PDU_OP_TMF_REQ: case PDU_OP_LOGOUT_REQ: case PDU_OP_SNACK_REQ:
	case PDU_OP_TMF_RSP: case PDU_OP_LOGOUT_RSP: case PDU_OP_R2T:
		return false;
	}
	return true;
}

static bool vendor_opcode(uint8_t op, bool from_initiator)
{
	/* RFC 7143 sec. 11.2.1.2: 0x1c-0x1e and 0x3c-0x3e are vendor specific. */
	return from_initiator ? (op >= 0x1c && op <= 0x1e) : (op >= 0x3c && op <= 0x3e);
}

static int fail(int reason, char *why, size_t whylen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(int reason, char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	if (why && whylen) {
		va_start(ap, fmt);
		vsnprintf(why, whylen, fmt, ap);
		va_end(ap);
	}
	return reason;
}

int pdu_check_bhs(const void *bhs, bool from_initiator, uint32_t max_dlen, char *why, size_t whylen)
{
	uint8_t op = pdu_opcode(bhs);
	uint32_t dlen = pdu_dlen(bhs);
	uint32_t ahs = pdu_ahs_bytes(bhs);
	bool ok = from_initiator ? pdu_opcode_from_initiator(op) : pdu_opcode_from_target(op);

	if (!ok) {
		if (vendor_opcode(op, from_initiator))
			return fail(PDU_REJECT_CMD_NOT_SUPPORTED, why, whylen,
				    "vendor specific opcode 0x%02x not supported", op);
		return fail(PDU_REJECT_PROTOCOL_ERROR, why, whylen,
			    "opcode 0x%02x (%s) not valid from the %s", op, pdu_opcode_name(op),
			    from_initiator ? "initiator" : "target");
	}
	if (dlen > max_dlen)
		return fail(PDU_REJECT_PROTOCOL_ERROR, why, whylen,
			    "%s data segment %u bytes exceeds the %u declared",
			    pdu_opcode_name(op), dlen, max_dlen);
	if (ahs && op != PDU_OP_SCSI_CMD)
		return fail(PDU_REJECT_INVALID_PDU_FIELD, why, whylen,
			    "%s carries %u bytes of AHS", pdu_opcode_name(op), ahs);
	if (dlen && !pdu_opcode_may_carry_data(op))
		return fail(PDU_REJECT_INVALID_PDU_FIELD, why, whylen,
			    "%s carries a %u byte data segment", pdu_opcode_name(op), dlen);
	return 0;
}

int pdu_parse_cmd_ahs(const struct pdu_scsi_cmd *cmd, const uint8_t *ahs, uint32_t ahs_len,
		      uint8_t *cdb, uint32_t *cdb_len, uint32_t *bidi_read_len)
{
	bool have_ext = false, have_bidi = false;
	uint32_t off = 0;

	memcpy(cdb, cmd->cdb, sizeof(cmd->cdb));
	*cdb_len = sizeof(cmd->cdb);
	*bidi_read_len = 0;
	if (ahs_len != pdu_ahs_bytes(cmd) || ahs_len > PDU_MAX_AHS_LEN || (ahs_len && !ahs))
		return PDU_REJECT_PROTOCOL_ERROR;

	while (off < ahs_len) {
		uint32_t len, total;
		uint8_t type;

		if (ahs_len - off < 4)
			return PDU_REJECT_INVALID_PDU_FIELD;
		/* AHSLength counts the AHS-specific byte and what follows it. */
		len = get_be16(ahs + off);
		type = ahs[off + 2];
		total = (3 + len + 3) & ~3u;
		if (len == 0 || total > ahs_len - off)
			return PDU_REJECT_INVALID_PDU_FIELD;
		switch (type) {
		case PDU_AHS_EXTENDED_CDB:
			if (have_ext || len < 2 || len - 1 > PDU_MAX_EXT_CDB)
				return PDU_REJECT_INVALID_PDU_FIELD;
			memcpy(cdb + 16, ahs + off + 4, len - 1);
			*cdb_len = 16 + len - 1;
			have_ext = true;
			break;
		case PDU_AHS_BIDI_READ_LEN:
			if (have_bidi || len != 5)
				return PDU_REJECT_INVALID_PDU_FIELD;
			*bidi_read_len = get_be32(ahs + off + 4);
			have_bidi = true;
			break;
		default:
			return PDU_REJECT_INVALID_PDU_FIELD;
		}
		off += total;
	}
	return 0;
}
