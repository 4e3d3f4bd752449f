/*
 * iSCSI PDU layout (RFC 7143 sec. 11): the 48-byte Basic Header Segment of
 * every opcode as a packed big-endian struct, plus decode/validation of a
 * whole PDU (BHS, AHS, data segment, padding, digests).
 *
 * Multi-byte fields are in network order: use be32toh()/htobe32() or the
 * pdu_* accessors.  Structs are views of the same 48 bytes (struct pdu_bhs).
 */
#ifndef PDU_H
#define PDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PDU_BHS_LEN 48
#define PDU_DIGEST_LEN 4
#define PDU_MAX_AHS_LEN (255 * 4)
#define PDU_MAX_DLEN 0xffffffu

enum pdu_opcode {
	/* initiator -> target */
	PDU_OP_NOP_OUT = 0x00,
	PDU_OP_SCSI_CMD = 0x01,
	PDU_OP_TMF_REQ = 0x02,
	PDU_OP_LOGIN_REQ = 0x03,
	PDU_OP_TEXT_REQ = 0x04,
	PDU_OP_DATA_OUT = 0x05,
	PDU_OP_LOGOUT_REQ = 0x06,
	PDU_OP_SNACK_REQ = 0x10,
	/* target -> initiator */
	PDU_OP_NOP_IN = 0x20,
	PDU_OP_SCSI_RSP = 0x21,
	PDU_OP_TMF_RSP = 0x22,
	PDU_OP_LOGIN_RSP = 0x23,
	PDU_OP_TEXT_RSP = 0x24,
	PDU_OP_DATA_IN = 0x25,
	PDU_OP_LOGOUT_RSP = 0x26,
	PDU_OP_R2T = 0x31,
	PDU_OP_ASYNC_MSG = 0x32,
	PDU_OP_REJECT = 0x3f,
};

#define PDU_OPCODE_MASK 0x3f
#define PDU_FLAG_IMMEDIATE 0x40 /* byte 0 */
#define PDU_FLAG_FINAL 0x80     /* byte 1 */

/* SCSI Command flags (byte 1) */
#define PDU_CMD_READ 0x40
#define PDU_CMD_WRITE 0x20
#define PDU_CMD_ATTR_MASK 0x07
enum pdu_task_attr { PDU_ATTR_UNTAGGED = 0, PDU_ATTR_SIMPLE = 1, PDU_ATTR_ORDERED = 2,
		     PDU_ATTR_HEAD_OF_QUEUE = 3, PDU_ATTR_ACA = 4 };

/* SCSI Response / Data-In flags (byte 1) */
#define PDU_RSP_BIDI_OVERFLOW 0x10
#define PDU_RSP_BIDI_UNDERFLOW 0x08
#define PDU_RSP_OVERFLOW 0x04
#define PDU_RSP_UNDERFLOW 0x02
#define PDU_DATAIN_ACK 0x40
#define PDU_DATAIN_STATUS 0x01

/* SCSI Response byte 2 */
#define PDU_RESPONSE_COMPLETED 0x00
#define PDU_RESPONSE_TARGET_FAILURE 0x01

/* Login flags (byte 1) */
#define PDU_LOGIN_TRANSIT 0x80
#define PDU_LOGIN_CONTINUE 0x40
#define PDU_LOGIN_CSG(f) (((f) >> 2) & 3)
#define PDU_LOGIN_NSG(f) ((f) & 3)
enum pdu_login_stage { PDU_STAGE_SECURITY = 0, PDU_STAGE_OPERATIONAL = 1, PDU_STAGE_FULL_FEATURE = 3 };

/* Login status class/detail (RFC 7143 sec. 11.13.5) */
#define PDU_LOGIN_SUCCESS 0x0000
#define PDU_LOGIN_REDIRECT_TEMP 0x0101
#define PDU_LOGIN_REDIRECT_PERM 0x0102
#define PDU_LOGIN_CLASS_REDIRECT 0x01  /* status class: the initiator goes to TargetAddress */
#define PDU_LOGIN_INITIATOR_ERROR 0x0200
#define PDU_LOGIN_AUTH_FAILED 0x0201
#define PDU_LOGIN_FORBIDDEN 0x0202
#define PDU_LOGIN_NOT_FOUND 0x0203
#define PDU_LOGIN_TARGET_REMOVED 0x0204
#define PDU_LOGIN_UNSUPPORTED_VERSION 0x0205
#define PDU_LOGIN_TOO_MANY_CONNECTIONS 0x0206
#define PDU_LOGIN_MISSING_PARAMETER 0x0207
#define PDU_LOGIN_CANT_INCLUDE_IN_SESSION 0x0208
#define PDU_LOGIN_SESSION_TYPE_UNSUPPORTED 0x0209
#define PDU_LOGIN_SESSION_DOES_NOT_EXIST 0x020a
#define PDU_LOGIN_INVALID_DURING_LOGIN 0x020b
#define PDU_LOGIN_TARGET_ERROR 0x0300
#define PDU_LOGIN_SERVICE_UNAVAILABLE 0x0301
#define PDU_LOGIN_OUT_OF_RESOURCES 0x0302

/* TMF functions (byte 1 & 0x7f) and responses (byte 2) */
enum pdu_tmf_func {
	PDU_TMF_ABORT_TASK = 1, PDU_TMF_ABORT_TASK_SET = 2, PDU_TMF_CLEAR_ACA = 3,
	PDU_TMF_CLEAR_TASK_SET = 4, PDU_TMF_LU_RESET = 5, PDU_TMF_TARGET_WARM_RESET = 6,
	PDU_TMF_TARGET_COLD_RESET = 7, PDU_TMF_TASK_REASSIGN = 8,
};
enum pdu_tmf_response {
	PDU_TMF_RSP_COMPLETE = 0, PDU_TMF_RSP_NO_TASK = 1, PDU_TMF_RSP_NO_LUN = 2,
	PDU_TMF_RSP_TASK_ALLEGIANT = 3, PDU_TMF_RSP_NO_FAILOVER = 4, PDU_TMF_RSP_NOT_SUPPORTED = 5,
	PDU_TMF_RSP_AUTH_FAILED = 6, PDU_TMF_RSP_REJECTED = 255,
};

/* Logout reason (byte 1 & 0x7f) and response (byte 2) */
enum pdu_logout_reason { PDU_LOGOUT_SESSION = 0, PDU_LOGOUT_CONNECTION = 1, PDU_LOGOUT_RECOVERY = 2 };
enum pdu_logout_response { PDU_LOGOUT_RSP_OK = 0, PDU_LOGOUT_RSP_NO_CID = 1,
		      PDU_LOGOUT_RSP_NO_RECOVERY = 2, PDU_LOGOUT_RSP_CLEANUP_FAILED = 3 };

/* Reject reasons (RFC 7143 sec. 11.17.1) */
enum pdu_reject_reason {
	PDU_REJECT_DIGEST_ERROR = 0x02, PDU_REJECT_SNACK_REJECT = 0x03,
	PDU_REJECT_PROTOCOL_ERROR = 0x04, PDU_REJECT_CMD_NOT_SUPPORTED = 0x05,
	PDU_REJECT_IMMEDIATE_CMD_REJECT = 0x06, PDU_REJECT_TASK_IN_PROGRESS = 0x07,
	PDU_REJECT_INVALID_DATA_ACK = 0x08, PDU_REJECT_INVALID_PDU_FIELD = 0x09,
	PDU_REJECT_LONG_OP_REJECT = 0x0a, PDU_REJECT_DEPRECATED = 0x0b,
	PDU_REJECT_WAITING_FOR_LOGOUT = 0x0c,
};

/* Async event codes */
enum pdu_async_event { PDU_ASYNC_SCSI = 0, PDU_ASYNC_LOGOUT_REQUEST = 1, PDU_ASYNC_DROP_CONNECTION = 2,
		       PDU_ASYNC_DROP_SESSION = 3, PDU_ASYNC_NEGOTIATE = 4, PDU_ASYNC_TASK_TERMINATION = 5 };

#define PDU_RESERVED_TAG 0xffffffffu

/* Generic view: fields at the same place in every BHS. */
struct pdu_bhs {
	uint8_t opcode;     /* I bit + opcode */
	uint8_t flags;      /* F bit + opcode specific */
	uint8_t rsvd2[2];
	uint8_t ahs_len;    /* TotalAHSLength in 4-byte words */
	uint8_t dlen[3];    /* DataSegmentLength, bytes, no padding */
	uint8_t lun[8];
	uint32_t itt;
	uint32_t ttt;       /* or other opcode specific field */
	uint32_t sn1;       /* CmdSN (initiator) / StatSN (target) */
	uint32_t sn2;       /* ExpStatSN (initiator) / ExpCmdSN (target) */
	uint32_t sn3;       /* MaxCmdSN (target) */
	uint8_t rest[12];
} __attribute__((packed));

struct pdu_scsi_cmd {
	uint8_t opcode, flags, rsvd2[2], ahs_len, dlen[3], lun[8];
	uint32_t itt, edtl, cmdsn, exp_statsn;
	uint8_t cdb[16];
} __attribute__((packed));

struct pdu_scsi_rsp {
	uint8_t opcode, flags, response, status, ahs_len, dlen[3], rsvd8[8];
	uint32_t itt, snack_tag, statsn, exp_cmdsn, max_cmdsn, exp_datasn;
	uint32_t bidi_resid, resid;
} __attribute__((packed));

struct pdu_data_in {
	uint8_t opcode, flags, rsvd2, status, ahs_len, dlen[3], lun[8];
	uint32_t itt, ttt, statsn, exp_cmdsn, max_cmdsn, datasn, offset, resid;
} __attribute__((packed));

struct pdu_data_out {
	uint8_t opcode, flags, rsvd2[2], ahs_len, dlen[3], lun[8];
	uint32_t itt, ttt, rsvd24, exp_statsn, rsvd32, datasn, offset, rsvd44;
} __attribute__((packed));

struct pdu_r2t {
	uint8_t opcode, flags, rsvd2[2], ahs_len, dlen[3], lun[8];
	uint32_t itt, ttt, statsn, exp_cmdsn, max_cmdsn, r2tsn, offset, length;
} __attribute__((packed));

struct pdu_nop {
	uint8_t opcode, flags, rsvd2[2], ahs_len, dlen[3], lun[8];
	uint32_t itt, ttt, sn1, sn2, max_cmdsn; /* out: CmdSN, ExpStatSN; in: StatSN, ExpCmdSN */
	uint8_t rsvd36[12];
} __attribute__((packed));

struct pdu_tmf_req {
	uint8_t opcode, function, rsvd2[2], ahs_len, dlen[3], lun[8];
	uint32_t itt, ref_itt, cmdsn, exp_statsn, ref_cmdsn, exp_datasn;
	uint8_t rsvd40[8];
} __attribute__((packed));

struct pdu_tmf_rsp {
	uint8_t opcode, flags, response, rsvd3, ahs_len, dlen[3], rsvd8[8];
	uint32_t itt, rsvd20, statsn, exp_cmdsn, max_cmdsn;
	uint8_t rsvd36[12];
} __attribute__((packed));

struct pdu_login_req {
	uint8_t opcode, flags, version_max, version_min, ahs_len, dlen[3];
	uint8_t isid[6];
	uint16_t tsih;
	uint32_t itt;
	uint16_t cid, rsvd22;
	uint32_t cmdsn, exp_statsn;
	uint8_t rsvd32[16];
} __attribute__((packed));

struct pdu_login_rsp {
	uint8_t opcode, flags, version_max, version_active, ahs_len, dlen[3];
	uint8_t isid[6];
	uint16_t tsih;
	uint32_t itt, rsvd20, statsn, exp_cmdsn, max_cmdsn;
	uint8_t status_class, status_detail, rsvd38[10];
} __attribute__((packed));

struct pdu_text {
	uint8_t opcode, flags, rsvd2[2], ahs_len, dlen[3], lun[8];
	uint32_t itt, ttt, sn1, sn2, max_cmdsn; /* req: CmdSN, ExpStatSN; rsp: StatSN, ExpCmdSN */
	uint8_t rsvd36[12];
} __attribute__((packed));
#define PDU_TEXT_CONTINUE 0x40

struct pdu_logout_req {
	uint8_t opcode, reason, rsvd2[2], ahs_len, dlen[3], rsvd8[8];
	uint32_t itt;
	uint16_t cid, rsvd22;
	uint32_t cmdsn, exp_statsn;
	uint8_t rsvd32[16];
} __attribute__((packed));

struct pdu_logout_rsp {
	uint8_t opcode, flags, response, rsvd3, ahs_len, dlen[3], rsvd8[8];
	uint32_t itt, rsvd20, statsn, exp_cmdsn, max_cmdsn, rsvd36;
	uint16_t time2wait, time2retain;
	uint32_t rsvd44;
} __attribute__((packed));

struct pdu_snack {
	uint8_t opcode, flags, rsvd2[2], ahs_len, dlen[3], lun[8];
	uint32_t itt, ttt, rsvd24, exp_statsn;
	uint8_t rsvd32[8];
	uint32_t begrun, runlength;
} __attribute__((packed));

struct pdu_async {
	uint8_t opcode, flags, rsvd2[2], ahs_len, dlen[3], lun[8];
	uint32_t ffffffff, rsvd20, statsn, exp_cmdsn, max_cmdsn;
	uint8_t event, vcode;
	uint16_t param1, param2, param3;
	uint8_t rsvd44[4];
} __attribute__((packed));

struct pdu_reject {
	uint8_t opcode, flags, reason, rsvd3, ahs_len, dlen[3], rsvd8[8];
	uint32_t ffffffff, rsvd20, statsn, exp_cmdsn, max_cmdsn, datasn_r2tsn;
	uint8_t rsvd40[8];
} __attribute__((packed));

_Static_assert(sizeof(struct pdu_bhs) == PDU_BHS_LEN, "BHS size");
_Static_assert(sizeof(struct pdu_login_rsp) == PDU_BHS_LEN, "login rsp size");
_Static_assert(sizeof(struct pdu_async) == PDU_BHS_LEN, "async size");

/* AHS types (RFC 7143 sec. 11.2.2) */
#define PDU_AHS_EXTENDED_CDB 1
#define PDU_AHS_BIDI_READ_LEN 2
#define PDU_MAX_EXT_CDB 244 /* CDB bytes beyond the 16 in the BHS */
#define PDU_MAX_CDB (16 + PDU_MAX_EXT_CDB)

/* Accessors over the raw 48 bytes. */
static inline uint8_t pdu_opcode(const void *bhs) { return ((const uint8_t *)bhs)[0] & PDU_OPCODE_MASK; }
static inline bool pdu_immediate(const void *bhs) { return ((const uint8_t *)bhs)[0] & PDU_FLAG_IMMEDIATE; }
static inline bool pdu_final(const void *bhs) { return ((const uint8_t *)bhs)[1] & PDU_FLAG_FINAL; }
static inline uint32_t pdu_ahs_bytes(const void *bhs) { return (uint32_t)((const uint8_t *)bhs)[4] * 4; }
uint32_t pdu_dlen(const void *bhs);
void pdu_set_dlen(void *bhs, uint32_t len);
uint64_t pdu_lun(const void *bhs);           /* 8-byte LUN field, raw SAM encoding */
void pdu_set_lun(void *bhs, uint64_t lun);
/* Padding needed after a data segment of len bytes. */
static inline uint32_t pdu_pad(uint32_t len) { return (4 - (len & 3)) & 3; }
/* SAM LUN encoding <-> flat LUN number (peripheral and flat addressing). */
uint64_t pdu_lun_encode(uint64_t lun);
uint64_t pdu_lun_decode(uint64_t raw);
/* pdu_lun_decode() of an addressing method we do not map; pdu_lun_encode() of lun > 2^24-1. */
#define PDU_LUN_INVALID UINT64_MAX

/* Name of an opcode for logs ("SCSI Command", "unknown 0x1a"). */
const char *pdu_opcode_name(uint8_t opcode);
/* True if the opcode is one an initiator may send (resp. a target). */
bool pdu_opcode_from_initiator(uint8_t opcode);
bool pdu_opcode_from_target(uint8_t opcode);
/* False for opcodes whose DataSegmentLength must be 0 (TMF, Logout, SNACK, R2T). */
bool pdu_opcode_may_carry_data(uint8_t opcode);

/*
 * Check a BHS received from the peer before any of its lengths are used.
 * from_initiator: the receiver is a target.  max_dlen: the largest data
 * segment this side declared it will receive (MaxRecvDataSegmentLength during
 * full feature phase, 8192 during login).  Returns 0, or a Reject reason
 * (enum pdu_reject_reason, > 0) with a human reason in why.
 */
int pdu_check_bhs(const void *bhs, bool from_initiator, uint32_t max_dlen, char *why, size_t whylen);

/*
 * Parse the AHS area of a SCSI Command: extended CDB and bidirectional read
 * length.  Returns 0 or PDU_REJECT_* on malformed AHS.  cdb (16 + 244 bytes
 * max) receives the whole CDB; *cdb_len its length.
 */
int pdu_parse_cmd_ahs(const struct pdu_scsi_cmd *cmd, const uint8_t *ahs, uint32_t ahs_len,
		      uint8_t *cdb, uint32_t *cdb_len, uint32_t *bidi_read_len);

#endif
