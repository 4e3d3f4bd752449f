/*
 * The URL of isertd's HTTPS admin listener as iserctl takes it
 * (docs/admin-remote-client.md): https://HOST[:PORT][/ or /rpc], HOST a DNS
 * name, an IPv4 address or an IPv6 address in brackets.  Nothing that could
 * carry a secret (user-info, a query, a fragment) is accepted: a URL is seen
 * in ps, shell history and logs.
 */
#ifndef TOOLS_URL_H
#define TOOLS_URL_H

#include <stdbool.h>
#include <stddef.h>

#define ADMIN_URL_DEFAULT_PORT "443"

struct admin_url {
	char host[256]; /* without the brackets of an IPv6 literal */
	char port[6];   /* decimal, 1-65535 */
	bool ip;        /* host is an address literal (no SNI, the certificate names it as an IP SAN) */
	bool v6;
};

/* 0, or -EINVAL with err saying what is wrong and what to give instead. */
int admin_url_parse(const char *url, struct admin_url *u, char *err, size_t errlen);

#endif
