/*
 * PDU receive checks: pdu_check_bhs() in both directions with any
 * max_dlen, pdu_parse_cmd_ahs() over an AHS area of exactly the declared
 * size, and the LUN encode/decode properties.
 *
 * Input: [flags][max_dlen:4][BHS:48][AHS...]; missing bytes read as 0.
 */
#include <errno.h>
#include <string.h>

#include "common/proto/pdu.h"
#include "fuzz.h"

static void check_bhs(const uint8_t *bhs, bool from_initiator, uint32_t max_dlen, size_t whylen)
{
	char why[128];
	uint8_t op = pdu_opcode(bhs);
	uint32_t dlen = pdu_dlen(bhs), ahs = pdu_ahs_bytes(bhs);
	int r;

	memset(why, 'X', sizeof(why));
	r = pdu_check_bhs(bhs, from_initiator, max_dlen, whylen ? why : NULL, whylen);
	FUZZ_CHECK(r >= 0 && r <= PDU_REJECT_WAITING_FOR_LOGOUT, "reason %d", r);
	if (whylen && r)
		FUZZ_CHECK(memchr(why, '\0', whylen) != NULL, "why not terminated within %zu", whylen);
	if (whylen < sizeof(why))
		FUZZ_CHECK(why[whylen] == 'X', "why written past %zu", whylen);
	if (r)
		return;
	/* What an accepted BHS guarantees to the code that uses its lengths. */
	FUZZ_CHECK(dlen <= max_dlen, "dlen %u > max %u accepted", dlen, max_dlen);
	FUZZ_CHECK(from_initiator ? pdu_opcode_from_initiator(op) : pdu_opcode_from_target(op),
		   "opcode 0x%02x accepted from the wrong side", op);
	FUZZ_CHECK(ahs == 0 || op == PDU_OP_SCSI_CMD, "AHS on opcode 0x%02x accepted", op);
	FUZZ_CHECK(dlen == 0 || pdu_opcode_may_carry_data(op), "data on opcode 0x%02x accepted", op);
	FUZZ_CHECK(pdu_opcode_name(op) != NULL, "no name");
}

static void check_ahs(const uint8_t *bhs_in, const uint8_t *rest, size_t nrest, uint8_t flags)
{
	struct pdu_scsi_cmd cmd;
	uint32_t ahs_len = (uint32_t)(nrest / 4 > 255 ? 255 : nrest / 4) * 4;
	uint32_t cdb_len = 0xdead, bidi = 0xdead;
	uint8_t *ahs = NULL, *cdb = malloc(PDU_MAX_CDB);
	int r;

	memcpy(&cmd, bhs_in, sizeof(cmd));
	cmd.ahs_len = (uint8_t)(ahs_len / 4);
	if (flags & 0x80) /* sometimes lie about the length: the parser must notice */
		cmd.ahs_len ^= 1;
	if (ahs_len) {
		ahs = malloc(ahs_len);
		memcpy(ahs, rest, ahs_len);
	}
	r = pdu_parse_cmd_ahs(&cmd, ahs, ahs_len, cdb, &cdb_len, &bidi);
	FUZZ_CHECK(r >= 0 && r <= PDU_REJECT_WAITING_FOR_LOGOUT, "reason %d", r);
	if (pdu_ahs_bytes(&cmd) != ahs_len)
		FUZZ_CHECK(r != 0, "AHS length %u accepted while the BHS says %u", ahs_len,
			   pdu_ahs_bytes(&cmd));
	if (r == 0) {
		FUZZ_CHECK(cdb_len >= 16 && cdb_len <= PDU_MAX_CDB, "cdb_len %u", cdb_len);
		FUZZ_CHECK(memcmp(cdb, cmd.cdb, 16) == 0, "BHS CDB bytes not copied");
		FUZZ_CHECK(cdb_len == 16 || ahs_len >= cdb_len - 16 + 4, "cdb_len %u from %u AHS bytes",
			   cdb_len, ahs_len);
		if (ahs_len == 0)
			FUZZ_CHECK(cdb_len == 16 && bidi == 0, "no AHS but cdb_len %u bidi %u", cdb_len, bidi);
	}
	free(ahs);
	free(cdb);
}

static void check_lun(const uint8_t *b)
{
	uint64_t raw = 0, d, e;
	uint8_t bhs[PDU_BHS_LEN] = { 0 };

	for (int i = 0; i < 8; i++)
		raw = raw << 8 | b[i];
	d = pdu_lun_decode(raw);
	if (d != PDU_LUN_INVALID) {
		FUZZ_CHECK(d <= 0xffffff, "decoded LUN %llu", (unsigned long long)d);
		e = pdu_lun_encode(d);
		FUZZ_CHECK(e != PDU_LUN_INVALID, "LUN %llu decodes but does not encode", (unsigned long long)d);
		FUZZ_CHECK(pdu_lun_decode(e) == d, "LUN %llu round trip", (unsigned long long)d);
	}
	/* Any number: encodes iff it fits 24 bits, and decodes back to itself. */
	for (int shift = 0; shift < 64; shift += 24) {
		uint64_t n = raw >> shift;

		e = pdu_lun_encode(n);
		if (n <= 0xffffff) {
			FUZZ_CHECK(e != PDU_LUN_INVALID, "LUN %llu does not encode", (unsigned long long)n);
			FUZZ_CHECK(pdu_lun_decode(e) == n, "LUN %llu -> %016llx -> %llu", (unsigned long long)n,
				   (unsigned long long)e, (unsigned long long)pdu_lun_decode(e));
		} else {
			FUZZ_CHECK(e == PDU_LUN_INVALID, "LUN %llu encoded", (unsigned long long)n);
		}
	}
	pdu_set_lun(bhs, raw);
	FUZZ_CHECK(pdu_lun(bhs) == raw, "set/get LUN");
	pdu_set_dlen(bhs, (uint32_t)raw);
	FUZZ_CHECK(pdu_dlen(bhs) == ((uint32_t)raw & PDU_MAX_DLEN), "set/get dlen");
	FUZZ_CHECK(pdu_lun(bhs) == raw, "set_dlen touched the LUN");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = { data, size };
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	uint8_t flags = fuzz_u8(&in);
	uint32_t max_dlen = fuzz_u32(&in);
	size_t n = in.n < PDU_BHS_LEN ? in.n : PDU_BHS_LEN;

	memcpy(bhs, in.p, n);
	in.p += n;
	in.n -= n;
	/* Most runs use a realistic limit, so the data-length path is reached both ways. */
	if (flags & 1)
		max_dlen &= 0xffffff;
	if (flags & 2)
		max_dlen = 8192;

	check_bhs(bhs, true, max_dlen, sizeof(char[128]));
	check_bhs(bhs, false, max_dlen, sizeof(char[128]));
	check_bhs(bhs, flags & 4, max_dlen, (flags >> 3) & 7); /* tiny why buffers, or none */
	check_ahs(bhs, in.p, in.n, flags);
	check_lun(bhs + 8);
	check_lun(bhs + 40);
	return 0;
}
