/*
 * Target URLs in libiscsi's syntax:
 *   iscsi://[user[%password]@]host[:port]/target-iqn/lun   (iser:// the same)
 * IPv6 hosts in brackets.  A portal alone ("host[:port]", or a URL without
 * the target part) is accepted where only a portal is wanted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "isc_internal.h"

static int bad(char *err, size_t errlen, const char *url, const char *why)
{
	snprintf(err, errlen, "bad URL '%s': %s", url, why);
	return -EINVAL;
}

static bool parse_num(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	if (!n)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > max)
			return false;
	}
	*out = v;
	return true;
}

int isc_url_parse(const char *url, bool portal_only, struct isc_url *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	out->port = 3260;
	if (!url || !*url)
		return bad(err, errlen, "", "empty");
	const char *p = url;
	bool scheme = false;
	if (!strncmp(p, "iscsi://", 8)) {
		p += 8;
		scheme = true;
	} else if (!strncmp(p, "iser://", 7)) {
		p += 7;
		scheme = true;
		out->iser = true;
	} else if (!portal_only) {
		return bad(err, errlen, url, "must start with iscsi:// or iser://");
	}
	/* user[%password]@ : the last '@' before the first '/' ends it */
	const char *slash = strchr(p, '/');
	const char *end = slash ? slash : p + strlen(p);
	const char *at = NULL;
	for (const char *q = p; q < end; q++)
		if (*q == '@')
			at = q;
	if (at) {
		const char *pct = memchr(p, '%', (size_t)(at - p));
		size_t ulen = (size_t)((pct ? pct : at) - p);
		if (!ulen || ulen >= sizeof(out->user))
			return bad(err, errlen, url, "bad user name");
		memcpy(out->user, p, ulen);
		if (pct) {
			size_t plen = (size_t)(at - pct - 1);
			if (plen >= sizeof(out->password))
				return bad(err, errlen, url, "password too long");
			memcpy(out->password, pct + 1, plen);
		}
		p = at + 1;
	}
	/* host[:port] */
	const char *hend;
	if (*p == '[') {
		const char *rb = memchr(p, ']', (size_t)(end - p));
		if (!rb)
			return bad(err, errlen, url, "missing ']' after IPv6 address");
		if ((size_t)(rb - p - 1) >= sizeof(out->host) || rb == p + 1)
			return bad(err, errlen, url, "bad host");
		memcpy(out->host, p + 1, (size_t)(rb - p - 1));
		hend = rb + 1;
	} else {
		hend = memchr(p, ':', (size_t)(end - p));
		if (!hend)
			hend = end;
		if (hend == p || (size_t)(hend - p) >= sizeof(out->host))
			return bad(err, errlen, url, "missing or bad host");
		memcpy(out->host, p, (size_t)(hend - p));
	}
	if (hend < end) {
		uint64_t port;
		if (*hend != ':' || !parse_num(hend + 1, (size_t)(end - hend - 1), 65535, &port) || !port)
			return bad(err, errlen, url, "bad port");
		out->port = (uint16_t)port;
	}
	if (!slash || !slash[1]) {
		if (portal_only)
			return 0;
		return bad(err, errlen, url, "missing /target-iqn/lun");
	}
	if (portal_only && !scheme)
		return bad(err, errlen, url, "a portal is host[:port]");
	const char *t = slash + 1;
	const char *lslash = strrchr(t, '/');
	size_t tlen = lslash ? (size_t)(lslash - t) : strlen(t);
	if (!tlen || tlen >= sizeof(out->target))
		return bad(err, errlen, url, "bad target name");
	memcpy(out->target, t, tlen);
	if (lslash && lslash[1]) {
		uint64_t lun;
		if (!parse_num(lslash + 1, strlen(lslash + 1), 16383ull * 1024 * 1024, &lun))
			return bad(err, errlen, url, "bad LUN");
		out->lun = lun;
		out->has_lun = true;
	} else if (!portal_only) {
		return bad(err, errlen, url, "missing LUN (iscsi://host/target-iqn/LUN)");
	}
	return 0;
}
