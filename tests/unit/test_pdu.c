/* Unit tests for common/proto/pdu.c: BHS layouts, accessors, LUNs, header checks, AHS. */
#include <CUnit/Basic.h>
#include <endian.h>
#include <stddef.h>
#include <string.h>

#include "common/proto/pdu.h"
#include "common/util.h"

#include "unit_run.h"

/* A BHS whose byte i holds i: every field then reads a known pattern. */
static uint8_t raw[PDU_BHS_LEN];

static void fill_pattern(void)
{
	for (int i = 0; i < PDU_BHS_LEN; i++)
		raw[i] = (uint8_t)i;
}

#define OFF(s, f, o) CU_ASSERT_EQUAL(offsetof(struct s, f), (size_t)(o))
/* Field f of struct s sits at o and decodes as big-endian there. */
#define BE32(s, f, o) do { OFF(s, f, o); \
	CU_ASSERT_EQUAL(be32toh(((struct s *)raw)->f), get_be32(raw + (o))); } while (0)
#define BE16(s, f, o) do { OFF(s, f, o); \
	CU_ASSERT_EQUAL(be16toh(((struct s *)raw)->f), get_be16(raw + (o))); } while (0)
#define U8(s, f, o) do { OFF(s, f, o); CU_ASSERT_EQUAL(((struct s *)raw)->f, (o)); } while (0)

static void test_layouts(void)
{
	fill_pattern();
	CU_ASSERT_EQUAL(sizeof(struct pdu_bhs), 48);
	U8(pdu_bhs, opcode, 0); U8(pdu_bhs, flags, 1); U8(pdu_bhs, ahs_len, 4);
	OFF(pdu_bhs, dlen, 5); OFF(pdu_bhs, lun, 8);
	BE32(pdu_bhs, itt, 16); BE32(pdu_bhs, ttt, 20); BE32(pdu_bhs, sn1, 24);
	BE32(pdu_bhs, sn2, 28); BE32(pdu_bhs, sn3, 32); OFF(pdu_bhs, rest, 36);

	CU_ASSERT_EQUAL(sizeof(struct pdu_scsi_cmd), 48);
	U8(pdu_scsi_cmd, flags, 1); U8(pdu_scsi_cmd, ahs_len, 4); OFF(pdu_scsi_cmd, lun, 8);
	BE32(pdu_scsi_cmd, itt, 16); BE32(pdu_scsi_cmd, edtl, 20);
	BE32(pdu_scsi_cmd, cmdsn, 24); BE32(pdu_scsi_cmd, exp_statsn, 28);
	OFF(pdu_scsi_cmd, cdb, 32);
	CU_ASSERT_EQUAL(((struct pdu_scsi_cmd *)raw)->cdb[15], 47);

	CU_ASSERT_EQUAL(sizeof(struct pdu_scsi_rsp), 48);
	U8(pdu_scsi_rsp, response, 2); U8(pdu_scsi_rsp, status, 3);
	BE32(pdu_scsi_rsp, itt, 16); BE32(pdu_scsi_rsp, snack_tag, 20);
	BE32(pdu_scsi_rsp, statsn, 24); BE32(pdu_scsi_rsp, exp_cmdsn, 28);
	BE32(pdu_scsi_rsp, max_cmdsn, 32); BE32(pdu_scsi_rsp, exp_datasn, 36);
	BE32(pdu_scsi_rsp, bidi_resid, 40); BE32(pdu_scsi_rsp, resid, 44);

	CU_ASSERT_EQUAL(sizeof(struct pdu_data_in), 48);
	U8(pdu_data_in, flags, 1); U8(pdu_data_in, status, 3); OFF(pdu_data_in, lun, 8);
	BE32(pdu_data_in, itt, 16); BE32(pdu_data_in, ttt, 20); BE32(pdu_data_in, statsn, 24);
	BE32(pdu_data_in, exp_cmdsn, 28); BE32(pdu_data_in, max_cmdsn, 32);
	BE32(pdu_data_in, datasn, 36); BE32(pdu_data_in, offset, 40); BE32(pdu_data_in, resid, 44);

	CU_ASSERT_EQUAL(sizeof(struct pdu_data_out), 48);
	OFF(pdu_data_out, lun, 8); BE32(pdu_data_out, itt, 16); BE32(pdu_data_out, ttt, 20);
	BE32(pdu_data_out, exp_statsn, 28); BE32(pdu_data_out, datasn, 36);
	BE32(pdu_data_out, offset, 40);

	CU_ASSERT_EQUAL(sizeof(struct pdu_r2t), 48);
	OFF(pdu_r2t, lun, 8); BE32(pdu_r2t, itt, 16); BE32(pdu_r2t, ttt, 20);
	BE32(pdu_r2t, statsn, 24); BE32(pdu_r2t, exp_cmdsn, 28); BE32(pdu_r2t, max_cmdsn, 32);
	BE32(pdu_r2t, r2tsn, 36); BE32(pdu_r2t, offset, 40); BE32(pdu_r2t, length, 44);

	CU_ASSERT_EQUAL(sizeof(struct pdu_nop), 48);
	OFF(pdu_nop, lun, 8); BE32(pdu_nop, itt, 16); BE32(pdu_nop, ttt, 20);
	BE32(pdu_nop, sn1, 24); BE32(pdu_nop, sn2, 28); BE32(pdu_nop, max_cmdsn, 32);

	CU_ASSERT_EQUAL(sizeof(struct pdu_tmf_req), 48);
	U8(pdu_tmf_req, function, 1); OFF(pdu_tmf_req, lun, 8);
	BE32(pdu_tmf_req, itt, 16); BE32(pdu_tmf_req, ref_itt, 20); BE32(pdu_tmf_req, cmdsn, 24);
	BE32(pdu_tmf_req, exp_statsn, 28); BE32(pdu_tmf_req, ref_cmdsn, 32);
	BE32(pdu_tmf_req, exp_datasn, 36);

	CU_ASSERT_EQUAL(sizeof(struct pdu_tmf_rsp), 48);
	U8(pdu_tmf_rsp, response, 2); BE32(pdu_tmf_rsp, itt, 16); BE32(pdu_tmf_rsp, statsn, 24);
	BE32(pdu_tmf_rsp, exp_cmdsn, 28); BE32(pdu_tmf_rsp, max_cmdsn, 32);

	CU_ASSERT_EQUAL(sizeof(struct pdu_login_req), 48);
	U8(pdu_login_req, version_max, 2); U8(pdu_login_req, version_min, 3);
	OFF(pdu_login_req, isid, 8); BE16(pdu_login_req, tsih, 14); BE32(pdu_login_req, itt, 16);
	BE16(pdu_login_req, cid, 20); BE32(pdu_login_req, cmdsn, 24);
	BE32(pdu_login_req, exp_statsn, 28);

	CU_ASSERT_EQUAL(sizeof(struct pdu_login_rsp), 48);
	U8(pdu_login_rsp, version_max, 2); U8(pdu_login_rsp, version_active, 3);
	OFF(pdu_login_rsp, isid, 8); BE16(pdu_login_rsp, tsih, 14); BE32(pdu_login_rsp, itt, 16);
	BE32(pdu_login_rsp, statsn, 24); BE32(pdu_login_rsp, exp_cmdsn, 28);
	BE32(pdu_login_rsp, max_cmdsn, 32);
	U8(pdu_login_rsp, status_class, 36); U8(pdu_login_rsp, status_detail, 37);

	CU_ASSERT_EQUAL(sizeof(struct pdu_text), 48);
	OFF(pdu_text, lun, 8); BE32(pdu_text, itt, 16); BE32(pdu_text, ttt, 20);
	BE32(pdu_text, sn1, 24); BE32(pdu_text, sn2, 28); BE32(pdu_text, max_cmdsn, 32);

	CU_ASSERT_EQUAL(sizeof(struct pdu_logout_req), 48);
	U8(pdu_logout_req, reason, 1); BE32(pdu_logout_req, itt, 16); BE16(pdu_logout_req, cid, 20);
	BE32(pdu_logout_req, cmdsn, 24); BE32(pdu_logout_req, exp_statsn, 28);

	CU_ASSERT_EQUAL(sizeof(struct pdu_logout_rsp), 48);
	U8(pdu_logout_rsp, response, 2); BE32(pdu_logout_rsp, itt, 16);
	BE32(pdu_logout_rsp, statsn, 24); BE32(pdu_logout_rsp, exp_cmdsn, 28);
	BE32(pdu_logout_rsp, max_cmdsn, 32); BE16(pdu_logout_rsp, time2wait, 40);
	BE16(pdu_logout_rsp, time2retain, 42);

	CU_ASSERT_EQUAL(sizeof(struct pdu_snack), 48);
	OFF(pdu_snack, lun, 8); BE32(pdu_snack, itt, 16); BE32(pdu_snack, ttt, 20);
	BE32(pdu_snack, exp_statsn, 28); BE32(pdu_snack, begrun, 40); BE32(pdu_snack, runlength, 44);

	CU_ASSERT_EQUAL(sizeof(struct pdu_async), 48);
	OFF(pdu_async, lun, 8); BE32(pdu_async, ffffffff, 16); BE32(pdu_async, statsn, 24);
	BE32(pdu_async, exp_cmdsn, 28); BE32(pdu_async, max_cmdsn, 32);
	U8(pdu_async, event, 36); U8(pdu_async, vcode, 37); BE16(pdu_async, param1, 38);
	BE16(pdu_async, param2, 40); BE16(pdu_async, param3, 42);

	CU_ASSERT_EQUAL(sizeof(struct pdu_reject), 48);
	U8(pdu_reject, reason, 2); BE32(pdu_reject, ffffffff, 16); BE32(pdu_reject, statsn, 24);
	BE32(pdu_reject, exp_cmdsn, 28); BE32(pdu_reject, max_cmdsn, 32);
	BE32(pdu_reject, datasn_r2tsn, 36);
}

/* Building through the structs yields the RFC byte image. */
static void test_encode_fields(void)
{
	uint8_t b[PDU_BHS_LEN] = { 0 };
	struct pdu_login_rsp *lr = (struct pdu_login_rsp *)b;
	struct pdu_scsi_cmd *c = (struct pdu_scsi_cmd *)b;

	lr->opcode = PDU_OP_LOGIN_RSP;
	lr->flags = PDU_LOGIN_TRANSIT | (PDU_STAGE_OPERATIONAL << 2) | PDU_STAGE_FULL_FEATURE;
	lr->tsih = htobe16(0x1234);
	lr->itt = htobe32(0xdeadbeef);
	lr->status_class = 2;
	lr->status_detail = 1;
	pdu_set_dlen(b, 300);
	CU_ASSERT_EQUAL(b[0], 0x23);
	CU_ASSERT_EQUAL(b[1], 0x87);
	CU_ASSERT_EQUAL(PDU_LOGIN_CSG(b[1]), PDU_STAGE_OPERATIONAL);
	CU_ASSERT_EQUAL(PDU_LOGIN_NSG(b[1]), PDU_STAGE_FULL_FEATURE);
	CU_ASSERT_EQUAL(b[14], 0x12);
	CU_ASSERT_EQUAL(b[15], 0x34);
	CU_ASSERT_EQUAL(get_be32(b + 16), 0xdeadbeef);
	CU_ASSERT_EQUAL(b[36], 2);
	CU_ASSERT_EQUAL(b[37], 1);
	CU_ASSERT_EQUAL(get_be24(b + 5), 300);

	memset(b, 0, sizeof(b));
	c->opcode = PDU_OP_SCSI_CMD | PDU_FLAG_IMMEDIATE;
	c->flags = PDU_FLAG_FINAL | PDU_CMD_READ | PDU_ATTR_SIMPLE;
	c->edtl = htobe32(4096);
	c->cdb[0] = 0x28;
	CU_ASSERT_EQUAL(pdu_opcode(b), PDU_OP_SCSI_CMD);
	CU_ASSERT_TRUE(pdu_immediate(b));
	CU_ASSERT_TRUE(pdu_final(b));
	CU_ASSERT_EQUAL(b[1] & PDU_CMD_ATTR_MASK, PDU_ATTR_SIMPLE);
	CU_ASSERT_EQUAL(get_be32(b + 20), 4096);
	CU_ASSERT_EQUAL(b[32], 0x28);
}

static void test_accessors(void)
{
	uint8_t b[PDU_BHS_LEN] = { 0 };

	pdu_set_dlen(b, 0x123456);
	CU_ASSERT_EQUAL(b[5], 0x12);
	CU_ASSERT_EQUAL(b[6], 0x34);
	CU_ASSERT_EQUAL(b[7], 0x56);
	CU_ASSERT_EQUAL(b[4], 0);
	CU_ASSERT_EQUAL(b[8], 0);
	CU_ASSERT_EQUAL(pdu_dlen(b), 0x123456);
	pdu_set_dlen(b, PDU_MAX_DLEN);
	CU_ASSERT_EQUAL(pdu_dlen(b), PDU_MAX_DLEN);
	CU_ASSERT_EQUAL(b[4], 0);

	pdu_set_lun(b, 0x0102030405060708ull);
	CU_ASSERT_EQUAL(b[8], 1);
	CU_ASSERT_EQUAL(b[15], 8);
	CU_ASSERT_EQUAL(pdu_lun(b), 0x0102030405060708ull);
	CU_ASSERT_EQUAL(pdu_dlen(b), PDU_MAX_DLEN);

	b[4] = 3;
	CU_ASSERT_EQUAL(pdu_ahs_bytes(b), 12);
	CU_ASSERT_EQUAL(pdu_pad(0), 0);
	CU_ASSERT_EQUAL(pdu_pad(1), 3);
	CU_ASSERT_EQUAL(pdu_pad(2), 2);
	CU_ASSERT_EQUAL(pdu_pad(3), 1);
	CU_ASSERT_EQUAL(pdu_pad(4), 0);
	CU_ASSERT_EQUAL(pdu_pad(8193), 3);
}

static void test_lun(void)
{
	CU_ASSERT_EQUAL(pdu_lun_encode(0), 0);
	CU_ASSERT_EQUAL(pdu_lun_encode(5), 0x0005000000000000ull);
	CU_ASSERT_EQUAL(pdu_lun_encode(255), 0x00ff000000000000ull);
	CU_ASSERT_EQUAL(pdu_lun_encode(256), 0x4100000000000000ull);
	CU_ASSERT_EQUAL(pdu_lun_encode(16383), 0x7fff000000000000ull);
	CU_ASSERT_EQUAL(pdu_lun_encode(16384), 0xd200400000000000ull);
	CU_ASSERT_EQUAL(pdu_lun_encode(0x1000000), PDU_LUN_INVALID);

	for (uint64_t l = 0; l < 20000; l += 7)
		CU_ASSERT_EQUAL(pdu_lun_decode(pdu_lun_encode(l)), l);
	CU_ASSERT_EQUAL(pdu_lun_decode(pdu_lun_encode(0xffffff)), 0xffffff);
	/* Flat space encoding of a small LUN decodes to the same number. */
	CU_ASSERT_EQUAL(pdu_lun_decode(0x4005000000000000ull), 5);
	/* Peripheral addressing on bus 1, a second level, LU addressing: unmapped. */
	CU_ASSERT_EQUAL(pdu_lun_decode(0x0105000000000000ull), PDU_LUN_INVALID);
	CU_ASSERT_EQUAL(pdu_lun_decode(0x0005000100000000ull), PDU_LUN_INVALID);
	CU_ASSERT_EQUAL(pdu_lun_decode(0x8005000000000000ull), PDU_LUN_INVALID);
	CU_ASSERT_EQUAL(pdu_lun_decode(0xc000000000000000ull), PDU_LUN_INVALID);
}

static void test_opcodes(void)
{
	static const uint8_t ini[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x10 };
	static const uint8_t tgt[] = { 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x31, 0x32, 0x3f };
	unsigned ni = 0, nt = 0;

	for (unsigned op = 0; op < 64; op++) {
		ni += pdu_opcode_from_initiator((uint8_t)op);
		nt += pdu_opcode_from_target((uint8_t)op);
		CU_ASSERT_FALSE(pdu_opcode_from_initiator((uint8_t)op) && pdu_opcode_from_target((uint8_t)op));
	}
	CU_ASSERT_EQUAL(ni, sizeof(ini));
	CU_ASSERT_EQUAL(nt, sizeof(tgt));
	for (size_t i = 0; i < sizeof(ini); i++)
		CU_ASSERT_TRUE(pdu_opcode_from_initiator(ini[i]));
	for (size_t i = 0; i < sizeof(tgt); i++)
		CU_ASSERT_TRUE(pdu_opcode_from_target(tgt[i]));
	/* The immediate bit is not part of the opcode. */
	CU_ASSERT_TRUE(pdu_opcode_from_initiator(0x40 | PDU_OP_NOP_OUT));
	CU_ASSERT_STRING_EQUAL(pdu_opcode_name(PDU_OP_SCSI_CMD), "SCSI Command");
	CU_ASSERT_STRING_EQUAL(pdu_opcode_name(PDU_OP_REJECT), "Reject");
	CU_ASSERT_STRING_EQUAL(pdu_opcode_name(PDU_OP_R2T), "Ready To Transfer");
	CU_ASSERT_STRING_EQUAL(pdu_opcode_name(0x1a), "unknown 0x1a");
	CU_ASSERT_FALSE(pdu_opcode_may_carry_data(PDU_OP_TMF_REQ));
	CU_ASSERT_FALSE(pdu_opcode_may_carry_data(PDU_OP_R2T));
	CU_ASSERT_TRUE(pdu_opcode_may_carry_data(PDU_OP_DATA_OUT));
	CU_ASSERT_TRUE(pdu_opcode_may_carry_data(PDU_OP_REJECT));
}

static int check(uint8_t op, uint8_t ahs_words, uint32_t dlen, bool from_ini, uint32_t max)
{
	uint8_t b[PDU_BHS_LEN] = { 0 };
	char why[128] = "";
	int r;

	b[0] = op;
	b[4] = ahs_words;
	pdu_set_dlen(b, dlen);
	r = pdu_check_bhs(b, from_ini, max, why, sizeof(why));
	if (r)
		CU_ASSERT_NOT_EQUAL(why[0], '\0');
	return r;
}

static void test_check_bhs(void)
{
	CU_ASSERT_EQUAL(check(PDU_OP_SCSI_CMD, 0, 512, true, 8192), 0);
	CU_ASSERT_EQUAL(check(PDU_OP_SCSI_CMD | PDU_FLAG_IMMEDIATE, 0, 0, true, 8192), 0);
	CU_ASSERT_EQUAL(check(PDU_OP_SCSI_CMD, 5, 0, true, 8192), 0);
	CU_ASSERT_EQUAL(check(PDU_OP_DATA_OUT, 0, 8192, true, 8192), 0);
	CU_ASSERT_EQUAL(check(PDU_OP_DATA_OUT, 0, 8193, true, 8192), PDU_REJECT_PROTOCOL_ERROR);
	CU_ASSERT_EQUAL(check(PDU_OP_LOGIN_REQ, 0, PDU_MAX_DLEN, true, 8192), PDU_REJECT_PROTOCOL_ERROR);
	/* Wrong direction and unknown opcodes. */
	CU_ASSERT_EQUAL(check(PDU_OP_SCSI_RSP, 0, 0, true, 8192), PDU_REJECT_PROTOCOL_ERROR);
	CU_ASSERT_EQUAL(check(PDU_OP_SCSI_CMD, 0, 0, false, 8192), PDU_REJECT_PROTOCOL_ERROR);
	CU_ASSERT_EQUAL(check(0x1f, 0, 0, true, 8192), PDU_REJECT_PROTOCOL_ERROR);
	CU_ASSERT_EQUAL(check(0x07, 0, 0, true, 8192), PDU_REJECT_PROTOCOL_ERROR);
	CU_ASSERT_EQUAL(check(0x1c, 0, 0, true, 8192), PDU_REJECT_CMD_NOT_SUPPORTED);
	CU_ASSERT_EQUAL(check(0x3d, 0, 0, false, 8192), PDU_REJECT_CMD_NOT_SUPPORTED);
	/* AHS only on SCSI Command. */
	CU_ASSERT_EQUAL(check(PDU_OP_NOP_OUT, 1, 0, true, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	CU_ASSERT_EQUAL(check(PDU_OP_DATA_OUT, 2, 0, true, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	CU_ASSERT_EQUAL(check(PDU_OP_SCSI_RSP, 1, 0, false, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	/* Data where the opcode carries none. */
	CU_ASSERT_EQUAL(check(PDU_OP_TMF_REQ, 0, 4, true, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	CU_ASSERT_EQUAL(check(PDU_OP_LOGOUT_REQ, 0, 1, true, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	CU_ASSERT_EQUAL(check(PDU_OP_SNACK_REQ, 0, 8, true, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	CU_ASSERT_EQUAL(check(PDU_OP_R2T, 0, 8, false, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	CU_ASSERT_EQUAL(check(PDU_OP_TMF_RSP, 0, 8, false, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	CU_ASSERT_EQUAL(check(PDU_OP_LOGOUT_RSP, 0, 8, false, 8192), PDU_REJECT_INVALID_PDU_FIELD);
	CU_ASSERT_EQUAL(check(PDU_OP_TMF_REQ, 0, 0, true, 8192), 0);
	CU_ASSERT_EQUAL(check(PDU_OP_REJECT, 0, 48, false, 8192), 0);
	CU_ASSERT_EQUAL(check(PDU_OP_NOP_OUT, 0, 100, true, 8192), 0);
	/* why may be NULL. */
	{
		uint8_t b[PDU_BHS_LEN] = { PDU_OP_NOP_IN };

		CU_ASSERT_EQUAL(pdu_check_bhs(b, true, 8192, NULL, 0), PDU_REJECT_PROTOCOL_ERROR);
	}
}

/* One AHS at ahs+off: AHSLength, type, then payload bytes. */
static uint32_t put_ahs(uint8_t *ahs, uint32_t off, uint16_t len, uint8_t type, const uint8_t *payload,
			uint32_t plen)
{
	put_be16(ahs + off, len);
	ahs[off + 2] = type;
	ahs[off + 3] = 0;
	if (plen)
		memcpy(ahs + off + 4, payload, plen);
	return off + ((3u + len + 3u) & ~3u);
}

static int parse(struct pdu_scsi_cmd *c, const uint8_t *ahs, uint32_t len, uint8_t *cdb,
		 uint32_t *cdb_len, uint32_t *bidi)
{
	c->ahs_len = (uint8_t)(len / 4);
	return pdu_parse_cmd_ahs(c, ahs, len, cdb, cdb_len, bidi);
}

static void test_cmd_ahs(void)
{
	struct pdu_scsi_cmd c;
	uint8_t ahs[PDU_MAX_AHS_LEN] = { 0 }, cdb[PDU_MAX_CDB], ext[PDU_MAX_EXT_CDB + 4];
	uint8_t rl[4] = { 0x00, 0x01, 0x00, 0x00 };
	uint32_t cdb_len = 0, bidi = 99, len;

	memset(&c, 0, sizeof(c));
	for (int i = 0; i < 16; i++)
		c.cdb[i] = (uint8_t)(0xa0 + i);
	for (size_t i = 0; i < sizeof(ext); i++)
		ext[i] = (uint8_t)i;

	CU_ASSERT_EQUAL(parse(&c, NULL, 0, cdb, &cdb_len, &bidi), 0);
	CU_ASSERT_EQUAL(cdb_len, 16);
	CU_ASSERT_EQUAL(bidi, 0);
	CU_ASSERT_EQUAL(memcmp(cdb, c.cdb, 16), 0);

	/* 32-byte CDB: AHSLength = 32 - 15, 20 bytes on the wire. */
	len = put_ahs(ahs, 0, 17, PDU_AHS_EXTENDED_CDB, ext, 16);
	CU_ASSERT_EQUAL(len, 20);
	CU_ASSERT_EQUAL(parse(&c, ahs, len, cdb, &cdb_len, &bidi), 0);
	CU_ASSERT_EQUAL(cdb_len, 32);
	CU_ASSERT_EQUAL(memcmp(cdb, c.cdb, 16), 0);
	CU_ASSERT_EQUAL(memcmp(cdb + 16, ext, 16), 0);

	/* Extended CDB plus bidirectional read length. */
	len = put_ahs(ahs, len, 5, PDU_AHS_BIDI_READ_LEN, rl, 4);
	CU_ASSERT_EQUAL(len, 28);
	CU_ASSERT_EQUAL(parse(&c, ahs, len, cdb, &cdb_len, &bidi), 0);
	CU_ASSERT_EQUAL(bidi, 65536);
	CU_ASSERT_EQUAL(cdb_len, 32);

	/* Largest CDB (260 bytes) and one byte too many. */
	len = put_ahs(ahs, 0, PDU_MAX_EXT_CDB + 1, PDU_AHS_EXTENDED_CDB, ext, PDU_MAX_EXT_CDB);
	CU_ASSERT_EQUAL(parse(&c, ahs, len, cdb, &cdb_len, &bidi), 0);
	CU_ASSERT_EQUAL(cdb_len, PDU_MAX_CDB);
	CU_ASSERT_EQUAL(cdb[PDU_MAX_CDB - 1], ext[PDU_MAX_EXT_CDB - 1]);
	len = put_ahs(ahs, 0, PDU_MAX_EXT_CDB + 2, PDU_AHS_EXTENDED_CDB, ext, PDU_MAX_EXT_CDB + 1);
	CU_ASSERT_EQUAL(parse(&c, ahs, len, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);

	/* Malformed: zero length, no CDB bytes, overrun, wrong bidi size, unknown, duplicate. */
	len = put_ahs(ahs, 0, 0, PDU_AHS_EXTENDED_CDB, NULL, 0);
	CU_ASSERT_EQUAL(parse(&c, ahs, 4, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);
	put_ahs(ahs, 0, 1, PDU_AHS_EXTENDED_CDB, NULL, 0);
	CU_ASSERT_EQUAL(parse(&c, ahs, 4, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);
	put_ahs(ahs, 0, 17, PDU_AHS_EXTENDED_CDB, ext, 16);
	CU_ASSERT_EQUAL(parse(&c, ahs, 16, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);
	put_ahs(ahs, 0, 0xffff, PDU_AHS_EXTENDED_CDB, NULL, 0);
	CU_ASSERT_EQUAL(parse(&c, ahs, 8, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);
	put_ahs(ahs, 0, 4, PDU_AHS_BIDI_READ_LEN, rl, 4);
	CU_ASSERT_EQUAL(parse(&c, ahs, 8, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);
	put_ahs(ahs, 0, 5, 3, rl, 4);
	CU_ASSERT_EQUAL(parse(&c, ahs, 8, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);
	len = put_ahs(ahs, 0, 5, PDU_AHS_BIDI_READ_LEN, rl, 4);
	len = put_ahs(ahs, len, 5, PDU_AHS_BIDI_READ_LEN, rl, 4);
	CU_ASSERT_EQUAL(parse(&c, ahs, len, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);
	len = put_ahs(ahs, 0, 2, PDU_AHS_EXTENDED_CDB, ext, 1);
	len = put_ahs(ahs, len, 2, PDU_AHS_EXTENDED_CDB, ext, 1);
	CU_ASSERT_EQUAL(parse(&c, ahs, len, cdb, &cdb_len, &bidi), PDU_REJECT_INVALID_PDU_FIELD);
	/* Trailing bytes too short for another AHS header cannot occur (4-byte units), but
	 * an AHS area that disagrees with TotalAHSLength is refused. */
	len = put_ahs(ahs, 0, 5, PDU_AHS_BIDI_READ_LEN, rl, 4);
	c.ahs_len = 1;
	CU_ASSERT_EQUAL(pdu_parse_cmd_ahs(&c, ahs, len, cdb, &cdb_len, &bidi), PDU_REJECT_PROTOCOL_ERROR);
}

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("pdu", NULL, NULL);
	CU_add_test(s, "struct layouts", test_layouts);
	CU_add_test(s, "encode fields", test_encode_fields);
	CU_add_test(s, "accessors", test_accessors);
	CU_add_test(s, "lun encoding", test_lun);
	CU_add_test(s, "opcodes", test_opcodes);
	CU_add_test(s, "check bhs", test_check_bhs);
	CU_add_test(s, "command ahs", test_cmd_ahs);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
