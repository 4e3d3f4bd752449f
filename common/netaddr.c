#include "common/netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

void netaddr_format(const struct sockaddr *sa, char *out, size_t len, char *ip, size_t iplen, uint16_t *port)
{
	char host[INET6_ADDRSTRLEN] = "?";
	uint16_t p = 0;
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)sa;
		inet_ntop(AF_INET, &s->sin_addr, host, sizeof(host));
		p = ntohs(s->sin_port);
		netaddr_join(out, len, host, p);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const void *)sa;
		inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof(host));
		p = ntohs(s->sin6_port);
		netaddr_join(out, len, host, p);
	} else {
		snprintf(out, len, "?");
	}
	if (ip)
		snprintf(ip, iplen, "%s", host);
	if (port)
		*port = p;
}
