/*
 * iSER wire structures (RFC 7145 sec. 9) as the Linux initiator (ib_iser),
 * libiscsi, LIO and tgt exchange them.
 */
#ifndef ISER_H
#define ISER_H

#include <stdint.h>

#define ISER_HDR_LEN 28

/* Opcodes in the high nibble of the first byte. */
#define ISER_OP_MASK 0xf0
#define ISER_OP_ISCSI_CTRL 0x10
#define ISER_OP_HELLO 0x20
#define ISER_OP_HELLO_REPLY 0x30
/* Flags of ISCSI_CTRL. */
#define ISER_WSV 0x08 /* write STag valid: the target may RDMA READ from it */
#define ISER_RSV 0x04 /* read STag valid: the target RDMA WRITEs to it */
#define ISER_HELLO_REJECT 0x01

struct iser_hdr {
	uint8_t flags;
	uint8_t rsvd[3];
	uint32_t write_stag;
	uint64_t write_va;
	uint32_t read_stag;
	uint64_t read_va;
} __attribute__((packed));
_Static_assert(sizeof(struct iser_hdr) == ISER_HDR_LEN, "iSER header size");

/* Hello / HelloReply (RFC 7145 sec. 9.3, 9.4). */
struct iser_hello {
	uint8_t flags;      /* opcode; HelloReply: reject bit */
	uint8_t versions;   /* MaxVer << 4 | MinVer (Hello), MaxVer << 4 | CurrVer (reply) */
	uint16_t ird_ord;   /* Hello: initiator's IRD; reply: target's ORD */
	uint8_t rsvd[24];
} __attribute__((packed));

/* rdma_cm private data (RFC 7145 sec. 5.1.3). */
struct iser_cm_hdr {
	uint8_t flags;
	uint8_t rsvd[3];
} __attribute__((packed));
#define ISER_CM_ZBVA_NOT_SUPPORTED 0x80
#define ISER_CM_SEND_W_INV_NOT_SUPPORTED 0x40

/* Data segment our receive buffers hold: TargetRecvDataSegmentLength and,
 * over iSER, the MaxRecvDataSegmentLength the target declares. */
#define ISER_TARGET_RECV_DSL 8192
/* Commands in flight per iSER session: the Linux initiator posts 128
 * receives; keep room for NOP-In and Async messages. */
#define ISER_MAX_QUEUE_DEPTH 120

/*
 * Our initiator keeps its login-sized receive buffers after login (160 are
 * posted per connection, common/transport/rdma.c): SCSI commands in flight are capped
 * below that so every response has a buffer, and the rest is what it
 * declares in MaxOutstandingUnexpectedPDUs (NOP-In pings, Async, Reject)
 * with room left for immediate requests (NOP-Out, TMF, Text, Logout).
 */
#define ISER_INITIATOR_QUEUE_DEPTH 128
#define ISER_INITIATOR_UNEXPECTED 16
/* Data segment an initiator's Send may carry (immediate data, login text). */
#define ISER_INITIATOR_SEND_DSL 8192

/* Receive buffers the Linux and libiscsi initiators post after login. */
#define ISER_INITIATOR_RX_SIZE 128

#endif
