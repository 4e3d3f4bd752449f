/* The admin listener's URL (url.h). */
#include "url.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "fail.h"

static bool dns_name(const char *h, size_t n)
{
	if (!n || n > 253 || h[0] == '.' || h[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(h[i] >= 'a' && h[i] <= 'z') && !(h[i] >= 'A' && h[i] <= 'Z') && !(h[i] >= '0' && h[i] <= '9') &&
		    h[i] != '-' && h[i] != '.')
			return false;
	return true;
}

int admin_url_parse(const char *url, struct admin_url *u, char *err, size_t errlen)
{
	static const char https[] = "https://";
	*u = (struct admin_url){ 0 };
	if (strncasecmp(url, https, sizeof(https) - 1))
		/* Not echoed: "http://user:password@host" would print the password. */
		return admin_fail(err, errlen, EINVAL, "only https:// URLs; the local socket is --socket");
	const char *a = url + sizeof(https) - 1;
	size_t alen = strcspn(a, "/?#");
	const char *rest = a + alen;
	/* Checked before the rest, so the message is about the secret, not about a port that is not a number. */
	if (memchr(a, '@', alen))
		return admin_fail(err, errlen, EINVAL,
				  "the URL has user-info (NAME[:PASSWORD]@): a secret in a URL is seen in ps and shell "
				  "history; give a token with --token-file FILE or $ISERCTL_TOKEN, or a client "
				  "certificate with --cert/--key");
	if (strpbrk(rest, "?#"))
		return admin_fail(err, errlen, EINVAL,
				  "the URL has a %s: iserctl sends nothing in one, and a secret in a URL is seen in ps "
				  "and shell history; give https://HOST:PORT, the token with --token-file FILE or "
				  "$ISERCTL_TOKEN",
				  strchr(rest, '?') && (!strchr(rest, '#') || strchr(rest, '?') < strchr(rest, '#'))
					  ? "query (?...)" : "fragment (#...)");
	if (*rest && strcmp(rest, "/") && strcmp(rest, "/rpc"))
		return admin_fail(err, errlen, EINVAL, "%s: the admin listener has one path, /rpc: give https://HOST:PORT",
				  url);
	const char *h = a, *port = NULL;
	size_t hlen;
	if (*a == '[') {
		const char *rb = memchr(a, ']', alen);
		if (!rb)
			return admin_fail(err, errlen, EINVAL, "%s: '[' without ']' (an IPv6 address: https://[::1]:PORT)",
					  url);
		h = a + 1;
		hlen = (size_t)(rb - h);
		if (rb + 1 < a + alen) {
			if (rb[1] != ':')
				return admin_fail(err, errlen, EINVAL, "%s: expected ':PORT' after ']'", url);
			port = rb + 2;
		}
		u->ip = u->v6 = true;
	} else {
		const char *colon = memchr(a, ':', alen);
		hlen = colon ? (size_t)(colon - a) : alen;
		port = colon ? colon + 1 : NULL;
		if (colon && memchr(port, ':', (size_t)(a + alen - port)))
			return admin_fail(err, errlen, EINVAL, "%s: an IPv6 address goes in brackets: https://[::1]:PORT",
					  url);
	}
	if (!hlen || hlen >= sizeof(u->host))
		return admin_fail(err, errlen, EINVAL, "%s: %s host name", url, hlen ? "too long a" : "no");
	memcpy(u->host, h, hlen);
	unsigned char addr[16];
	if (u->v6 && inet_pton(AF_INET6, u->host, addr) != 1)
		return admin_fail(err, errlen, EINVAL, "%s: '%s' is not an IPv6 address", url, u->host);
	if (!u->v6 && inet_pton(AF_INET, u->host, addr) == 1)
		u->ip = true;
	else if (!u->v6 && !dns_name(u->host, hlen))
		return admin_fail(err, errlen, EINVAL,
				  "%s: '%s' is neither a host name nor an IP address (IPv6 in brackets: https://[::1]:PORT)",
				  url, u->host);
	if (!port) {
		snprintf(u->port, sizeof(u->port), "%s", ADMIN_URL_DEFAULT_PORT);
		return 0;
	}
	size_t plen = (size_t)(a + alen - port);
	char *end;
	char digits[8] = "";
	if (plen && plen < sizeof(digits))
		memcpy(digits, port, plen);
	unsigned long p = strtoul(digits, &end, 10);
	if (!plen || plen >= sizeof(digits) || *end || digits[0] < '0' || digits[0] > '9' || !p || p > 65535)
		return admin_fail(err, errlen, EINVAL, "%s: the port is not a number in 1-65535", url);
	snprintf(u->port, sizeof(u->port), "%lu", p);
	return 0;
}
