/*
 * iSNS PDUs (RFC 4171 sec. 5): a 12-byte header, then attributes as
 * tag-length-value, a response's status first.  What arrives is bounded
 * before anything is kept: a PDU's length by its 16-bit field, a message
 * by ISNS_MAX_PDUS and ISNS_MAX_MSG, its attributes by count and by
 * length, every length checked against what is left.  A broken stream is
 * an error with a message that names the field; never a read past the
 * bytes received.  tests/fuzz/fuzz_isns.c feeds it the worst.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "target/isns/isns_int.h"

static const char *const status_names[] = {
	"Successful", "Unknown Error", "Message Format Error", "Invalid Registration", "Reserved",
	"Invalid Query", "Source Unknown", "Source Absent", "Source Unauthorized", "No Such Entry",
	"Version Not Supported", "Internal Error", "Busy", "Option Not Understood", "Invalid Update",
	"Message (FUNCTION_ID) Not Supported", "SCN Event Rejected", "SCN Registration Rejected",
	"Attribute Not Implemented", "FC_DOMAIN_ID Not Available", "FC_DOMAIN_ID Not Allocated",
	"ESI Not Available", "Invalid Deregistration", "Registration Feature Not Supported",
};

const char *isns_status_name(uint32_t status, char *buf, size_t n)
{
	if (status < ARRAY_SIZE(status_names))
		snprintf(buf, n, "%s (status %u)", status_names[status], status);
	else
		snprintf(buf, n, "status %u", status);
	return buf;
}

static const char *const func_names[] = {
	NULL, "DevAttrReg", "DevAttrQry", "DevGetNext", "DevDereg", "SCNReg", "SCNDereg", "SCNEvent", "SCN",
	"DDReg", "DDDereg", "DDSReg", "DDSDereg", "ESI", "Heartbeat",
};

const char *isns_func_name(uint16_t func, char *buf, size_t n)
{
	uint16_t f = func & (uint16_t)~ISNS_RESPONSE;
	if (f && f < ARRAY_SIZE(func_names))
		snprintf(buf, n, "%s%s", func_names[f], func & ISNS_RESPONSE ? "Rsp" : "");
	else
		snprintf(buf, n, "function 0x%04x", func);
	return buf;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EPROTO;
}

/* ------------------------------------------------------------------------ */
/* Reading. */

void isns_msg_free(struct isns_msg *m)
{
	free(m->payload);
	free(m->attrs);
	memset(m, 0, sizeof(*m));
}

size_t isns_msg_oper(const struct isns_msg *m)
{
	for (size_t i = 0; i < m->nattrs; i++)
		if (m->attrs[i].tag == ISNS_T_DELIMITER)
			return i + 1;
	return m->nattrs;
}

bool isns_attr_u32(const struct isns_attr *a, uint32_t *v)
{
	if (a->len != 4)
		return false;
	*v = get_be32(a->v);
	return true;
}

bool isns_attr_ip(const struct isns_attr *a, uint8_t ip[16])
{
	if (a->len != 16)
		return false;
	memcpy(ip, a->v, 16);
	return true;
}

bool isns_attr_str(const struct isns_attr *a, const char **s)
{
	if (!a->len || !memchr(a->v, 0, a->len))
		return false;
	*s = (const char *)a->v;
	return true;
}

void isns_rx_reset(struct isns_rx *rx)
{
	free(rx->msg);
	memset(rx, 0, sizeof(*rx));
}

int isns_msg_parse(struct isns_msg *m, char *err, size_t errlen)
{
	size_t off = 0, count = 0;
	char fn[32];
	if (m->func & ISNS_RESPONSE) {
		if (m->len < 4)
			return fail(err, errlen, "%s of %zu bytes: no room for its status",
				    isns_func_name(m->func, fn, sizeof(fn)), m->len);
		m->status = get_be32(m->payload);
		off = 4;
	}
	/* Counted first, so the array is exactly as long as the checked attributes. */
	for (size_t o = off; o < m->len; count++) {
		if (m->len - o < 8)
			return fail(err, errlen, "attribute %zu: %zu bytes left, less than a tag and a length", count,
				    m->len - o);
		uint32_t tag = get_be32(m->payload + o), len = get_be32(m->payload + o + 4);
		if (count >= ISNS_MAX_ATTRS)
			return fail(err, errlen, "more than %u attributes", ISNS_MAX_ATTRS);
		if (len > ISNS_MAX_ATTR_LEN)
			return fail(err, errlen, "attribute %zu (tag %u): a value of %u bytes, more than %u", count, tag,
				    len, ISNS_MAX_ATTR_LEN);
		if (len % 4)
			return fail(err, errlen, "attribute %zu (tag %u): a length of %u, not a multiple of 4", count, tag,
				    len);
		if (len > m->len - o - 8)
			return fail(err, errlen, "attribute %zu (tag %u): a value of %u bytes, only %zu left", count, tag,
				    len, m->len - o - 8);
		o += 8 + len;
	}
	m->attrs = calloc(count ? count : 1, sizeof(*m->attrs));
	if (!m->attrs)
		return fail(err, errlen, "out of memory");
	m->nattrs = count;
	for (size_t i = 0, o = off; i < count; i++) {
		m->attrs[i].tag = get_be32(m->payload + o);
		m->attrs[i].len = get_be32(m->payload + o + 4);
		m->attrs[i].v = m->payload + o + 8;
		o += 8 + m->attrs[i].len;
	}
	return 0;
}

static int header(struct isns_rx *rx, char *err, size_t errlen)
{
	uint16_t ver = get_be16(rx->hdr), func = get_be16(rx->hdr + 2), len = get_be16(rx->hdr + 4),
		 flags = get_be16(rx->hdr + 6), xid = get_be16(rx->hdr + 8), seq = get_be16(rx->hdr + 10);
	char fn[32];
	if (ver != ISNS_VERSION)
		return fail(err, errlen, "a PDU of version %u (iSNS is version %u)", ver, ISNS_VERSION);
	if (flags & ISNS_F_AUTH)
		return fail(err, errlen, "%s with an authentication block (isertd does not sign nor check iSNS "
					 "messages: run the server without authentication)",
			    isns_func_name(func, fn, sizeof(fn)));
	if (len % 4)
		return fail(err, errlen, "%s: a PDU length of %u, not a multiple of 4", isns_func_name(func, fn, sizeof(fn)),
			    len);
	if (flags & ISNS_F_FIRST) {
		if (rx->in_msg)
			return fail(err, errlen, "%s: a new message before the last PDU of xid %u",
				    isns_func_name(func, fn, sizeof(fn)), rx->xid);
		if (seq != 0)
			return fail(err, errlen, "%s: the first PDU of a message with sequence id %u",
				    isns_func_name(func, fn, sizeof(fn)), seq);
		rx->func = func;
		rx->xid = xid;
		rx->flags = flags;
		rx->seq = 0;
		rx->npdus = 0;
		rx->in_msg = true;
	} else {
		if (!rx->in_msg)
			return fail(err, errlen, "%s: a PDU of no message (no \"first PDU\" flag before it)",
				    isns_func_name(func, fn, sizeof(fn)));
		if (func != rx->func || xid != rx->xid || seq != (uint16_t)(rx->seq + 1))
			return fail(err, errlen, "%s xid %u seq %u in the middle of %s xid %u (seq %u expected)",
				    isns_func_name(func, fn, sizeof(fn)), xid, seq,
				    isns_func_name(rx->func, (char[32]){ 0 }, 32), rx->xid, rx->seq + 1u);
		rx->seq = seq;
		rx->flags |= flags & ISNS_F_LAST;
	}
	if (++rx->npdus > ISNS_MAX_PDUS)
		return fail(err, errlen, "a message of more than %u PDUs", ISNS_MAX_PDUS);
	if (rx->mlen + len > ISNS_MAX_MSG)
		return fail(err, errlen, "a message of more than %u bytes", ISNS_MAX_MSG);
	if (rx->mlen + len > rx->mcap) {
		size_t cap = rx->mcap ? rx->mcap : 512;
		while (cap < rx->mlen + len)
			cap *= 2;
		cap = MIN(cap, (size_t)ISNS_MAX_MSG);
		uint8_t *b = realloc(rx->msg, cap);
		if (!b)
			return fail(err, errlen, "out of memory");
		rx->msg = b;
		rx->mcap = cap;
	}
	rx->pdu_left = len;
	rx->in_pdu = true;
	return 0;
}

int isns_rx_feed(struct isns_rx *rx, const uint8_t *p, size_t n, size_t *used, struct isns_msg *out, char *err,
		 size_t errlen)
{
	size_t off = 0;
	int r;
	*used = 0;
	while (off < n) {
		if (!rx->in_pdu) {
			size_t take = MIN(ISNS_HDR_LEN - rx->hlen, n - off);
			memcpy(rx->hdr + rx->hlen, p + off, take);
			rx->hlen += take;
			off += take;
			if (rx->hlen < ISNS_HDR_LEN)
				break;
			if ((r = header(rx, err, errlen)))
				return r;
		}
		size_t take = MIN(rx->pdu_left, n - off);
		if (take)
			memcpy(rx->msg + rx->mlen, p + off, take);
		rx->mlen += take;
		rx->pdu_left -= take;
		off += take;
		if (rx->pdu_left)
			break;
		/* A PDU complete. */
		rx->in_pdu = false;
		rx->hlen = 0;
		if (!(get_be16(rx->hdr + 6) & ISNS_F_LAST))
			continue;
		memset(out, 0, sizeof(*out));
		out->func = rx->func;
		out->flags = rx->flags;
		out->xid = rx->xid;
		out->payload = rx->msg;
		out->len = rx->mlen;
		rx->msg = NULL;
		rx->mlen = rx->mcap = 0;
		rx->in_msg = false;
		*used = off;
		if ((r = isns_msg_parse(out, err, errlen))) {
			isns_msg_free(out);
			return r;
		}
		return 1;
	}
	*used = off;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Writing. */

int isns_out_init(struct isns_out *o, uint16_t func, uint16_t flags, uint16_t xid)
{
	o->b = malloc(ISNS_HDR_LEN + ISNS_MAX_PAYLOAD);
	o->len = ISNS_HDR_LEN;
	o->full = false;
	if (!o->b)
		return -ENOMEM;
	put_be16(o->b, ISNS_VERSION);
	put_be16(o->b + 2, func);
	put_be16(o->b + 4, 0);
	put_be16(o->b + 6, flags | ISNS_F_FIRST | ISNS_F_LAST);
	put_be16(o->b + 8, xid);
	put_be16(o->b + 10, 0);
	return 0;
}

void isns_out_free(struct isns_out *o)
{
	free(o->b);
	o->b = NULL;
	o->len = 0;
}

void isns_put_raw(struct isns_out *o, uint32_t tag, const uint8_t *v, uint32_t len)
{
	uint32_t padded = (len + 3) & ~3u;
	if (!o->b || o->full || padded > ISNS_MAX_PAYLOAD || o->len - ISNS_HDR_LEN + 8 + padded > ISNS_MAX_PAYLOAD) {
		o->full = true;
		return;
	}
	put_be32(o->b + o->len, tag);
	put_be32(o->b + o->len + 4, padded);
	if (len)
		memcpy(o->b + o->len + 8, v, len);
	memset(o->b + o->len + 8 + len, 0, padded - len);
	o->len += 8 + padded;
}

void isns_put_u32(struct isns_out *o, uint32_t tag, uint32_t v)
{
	uint8_t b[4];
	put_be32(b, v);
	isns_put_raw(o, tag, b, 4);
}

void isns_put_str(struct isns_out *o, uint32_t tag, const char *s)
{
	/* The terminator counts, and at least one NUL pads (RFC 4171 sec. 5.5: null-terminated). */
	isns_put_raw(o, tag, (const uint8_t *)s, (uint32_t)strlen(s) + 1);
}

void isns_put_ip(struct isns_out *o, uint32_t tag, const uint8_t ip[16])
{
	isns_put_raw(o, tag, ip, 16);
}

void isns_put_nil(struct isns_out *o, uint32_t tag)
{
	isns_put_raw(o, tag, NULL, 0);
}

void isns_out_finish(struct isns_out *o)
{
	put_be16(o->b + 4, (uint16_t)(o->len - ISNS_HDR_LEN));
}

int isns_esi_answer(const struct isns_msg *req, const char *eid, struct isns_out *out)
{
	const char *s = NULL;
	if (req->func != ISNS_ESI)
		return -EINVAL;
	for (size_t i = 0; i < req->nattrs && !s; i++)
		if (req->attrs[i].tag == ISNS_T_EID && !isns_attr_str(&req->attrs[i], &s))
			break;
	bool ours = s && eid && !strcmp(s, eid);
	if (isns_out_init(out, ISNS_ESI | ISNS_RESPONSE, ISNS_F_CLIENT, req->xid))
		return -ENOMEM;
	uint8_t st[4];
	put_be32(st, ours ? ISNS_OK : ISNS_ST_NO_SUCH_ENTRY);
	memcpy(out->b + out->len, st, 4);
	out->len += 4;
	/* Echoed: time stamp, EID, portal address and port; nothing a hostile inquiry could make large. */
	for (size_t i = 0; i < req->nattrs && i < 8; i++)
		isns_put_raw(out, req->attrs[i].tag, req->attrs[i].v, req->attrs[i].len);
	isns_out_finish(out);
	return 0;
}

const char *isns_ip_str(const uint8_t ip[16], char *buf, size_t n)
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (!memcmp(ip, mapped, 12))
		inet_ntop(AF_INET, ip + 12, buf, (socklen_t)n);
	else
		inet_ntop(AF_INET6, ip, buf, (socklen_t)n);
	return buf;
}
