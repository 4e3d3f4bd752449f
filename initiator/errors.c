/* Errors in words: login status class/detail, SCSI status, sense data. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/proto/pdu.h"
#include "common/util.h"
#include "isc_internal.h"

const char *isc_login_status_str(uint16_t st)
{
	switch (st) {
	case PDU_LOGIN_SUCCESS: return "success";
	case PDU_LOGIN_REDIRECT_TEMP: return "target moved temporarily (redirect)";
	case PDU_LOGIN_REDIRECT_PERM: return "target moved permanently (redirect)";
	case PDU_LOGIN_INITIATOR_ERROR: return "initiator error";
	case PDU_LOGIN_AUTH_FAILED: return "authentication failure";
	case PDU_LOGIN_FORBIDDEN: return "authorization failure (initiator not allowed)";
	case PDU_LOGIN_NOT_FOUND: return "target not found";
	case PDU_LOGIN_TARGET_REMOVED: return "target removed";
	case PDU_LOGIN_UNSUPPORTED_VERSION: return "unsupported iSCSI version";
	case PDU_LOGIN_TOO_MANY_CONNECTIONS: return "too many connections";
	case PDU_LOGIN_MISSING_PARAMETER: return "missing parameter";
	case PDU_LOGIN_CANT_INCLUDE_IN_SESSION: return "cannot include in session";
	case PDU_LOGIN_SESSION_TYPE_UNSUPPORTED: return "session type not supported";
	case PDU_LOGIN_SESSION_DOES_NOT_EXIST: return "session does not exist";
	case PDU_LOGIN_INVALID_DURING_LOGIN: return "invalid request during login";
	case PDU_LOGIN_TARGET_ERROR: return "target error";
	case PDU_LOGIN_SERVICE_UNAVAILABLE: return "service unavailable";
	case PDU_LOGIN_OUT_OF_RESOURCES: return "target out of resources";
	}
	switch (st >> 8) {
	case 1: return "redirection";
	case 2: return "initiator error (unknown detail)";
	case 3: return "target error (unknown detail)";
	}
	return "unknown status class";
}

const char *isc_strerror(int err)
{
	switch (err) {
	case 0: return "success";
	case -EACCES: return "authentication failed";
	case -EPERM: return "login refused by the target";
	case -EIO: return "SCSI command failed";
	case -ECONNRESET: return "connection lost";
	case -ECANCELED: return "task aborted";
	case -EPROTO: return "protocol error from the target";
	case -ENOTCONN: return "not logged in";
	}
	return strerror(err < 0 ? -err : err);
}

void isc_sense_parse(const uint8_t *p, uint32_t len, struct isc_sense *out)
{
	memset(out, 0, sizeof(*out));
	if (!len)
		return;
	out->len = MIN(len, (uint32_t)sizeof(out->raw));
	memcpy(out->raw, p, out->len);
	uint8_t code = p[0] & 0x7f;
	if ((code == 0x70 || code == 0x71) && len >= 14) {
		out->key = p[2] & 0x0f;
		out->asc = p[12];
		out->ascq = p[13];
		out->valid = true;
	} else if ((code == 0x72 || code == 0x73) && len >= 4) {
		out->key = p[1] & 0x0f;
		out->asc = p[2];
		out->ascq = p[3];
		out->valid = true;
	}
}

const char *isc_sense_key_str(uint8_t key)
{
	static const char *const names[16] = {
		"NO SENSE", "RECOVERED ERROR", "NOT READY", "MEDIUM ERROR", "HARDWARE ERROR",
		"ILLEGAL REQUEST", "UNIT ATTENTION", "DATA PROTECT", "BLANK CHECK", "VENDOR SPECIFIC",
		"COPY ABORTED", "ABORTED COMMAND", "RESERVED", "VOLUME OVERFLOW", "MISCOMPARE", "COMPLETED",
	};
	return names[key & 15];
}

const char *isc_asc_str(uint8_t asc, uint8_t ascq)
{
	static const struct { uint8_t asc, ascq; const char *s; } t[] = {
		{ 0x00, 0x00, "no additional sense information" },
		{ 0x04, 0x00, "logical unit not ready" },
		{ 0x0c, 0x00, "write error" },
		{ 0x11, 0x00, "unrecovered read error" },
		{ 0x1a, 0x00, "parameter list length error" },
		{ 0x20, 0x00, "invalid command operation code" },
		{ 0x21, 0x00, "logical block address out of range" },
		{ 0x24, 0x00, "invalid field in CDB" },
		{ 0x25, 0x00, "logical unit not supported" },
		{ 0x26, 0x00, "invalid field in parameter list" },
		{ 0x27, 0x00, "write protected" },
		{ 0x28, 0x00, "not ready to ready change, medium may have changed" },
		{ 0x29, 0x00, "power on, reset, or bus device reset occurred" },
		{ 0x29, 0x01, "power on occurred" },
		{ 0x29, 0x03, "bus device reset function occurred" },
		{ 0x29, 0x07, "I_T nexus loss occurred" },
		{ 0x2a, 0x01, "mode parameters changed" },
		{ 0x2a, 0x09, "capacity data has changed" },
		{ 0x3a, 0x00, "medium not present" },
		{ 0x3f, 0x0e, "reported LUNs data has changed" },
		{ 0x47, 0x00, "SCSI parity error" },
		{ 0x55, 0x03, "insufficient resources" },
	};
	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		if (t[i].asc == asc && t[i].ascq == ascq)
			return t[i].s;
	for (size_t i = 0; i < ARRAY_SIZE(t); i++)
		if (t[i].asc == asc && t[i].ascq == 0)
			return t[i].s;
	return NULL;
}

static const char *status_str(uint8_t st)
{
	switch (st) {
	case 0x00: return "GOOD";
	case 0x02: return "CHECK CONDITION";
	case 0x04: return "CONDITION MET";
	case 0x08: return "BUSY";
	case 0x18: return "RESERVATION CONFLICT";
	case 0x28: return "TASK SET FULL";
	case 0x30: return "ACA ACTIVE";
	case 0x40: return "TASK ABORTED";
	}
	return "unknown status";
}

void isc_result_str(const struct isc_result *r, char *buf, size_t len)
{
	if (r->err && r->err != -EIO) {
		snprintf(buf, len, "%s", isc_strerror(r->err));
		return;
	}
	if (r->status == 0x02 && r->sense.valid) {
		const char *a = isc_asc_str(r->sense.asc, r->sense.ascq);
		if (a)
			snprintf(buf, len, "CHECK CONDITION: %s, %s (ASC/ASCQ 0x%02x/0x%02x)",
				 isc_sense_key_str(r->sense.key), a, r->sense.asc, r->sense.ascq);
		else
			snprintf(buf, len, "CHECK CONDITION: %s, ASC/ASCQ 0x%02x/0x%02x",
				 isc_sense_key_str(r->sense.key), r->sense.asc, r->sense.ascq);
		return;
	}
	snprintf(buf, len, "%s (status 0x%02x)", status_str(r->status), r->status);
}
