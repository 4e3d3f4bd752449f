/* Socket addresses as text, for logs and for matching portals. */
#ifndef NETADDR_H
#define NETADDR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* Room for "[v6]:port"; NETADDR_HOST_LEN: for a host name of up to 255 bytes and its port. */
#define NETADDR_LEN 56
#define NETADDR_HOST_LEN 264

/*
 * "host:port", or "[host]:port" for an IPv6 host (a ':' in it, not bracketed
 * yet): the one form an address and port is written in, for a human or an
 * answer, as the configuration takes it.  Inline so that what links no
 * common/ (libconfig, iserctl) writes it too.
 */
static inline void netaddr_join(char *out, size_t len, const char *host, unsigned port)
{
	snprintf(out, len, strchr(host, ':') && host[0] != '[' ? "[%s]:%u" : "%s:%u", host, port);
}

/*
 * "a.b.c.d:port" or "[v6]:port" into out; the bare address into ip and the
 * port into *port when those are given.  Unknown families print "?".
 */
void netaddr_format(const struct sockaddr *sa, char *out, size_t len, char *ip, size_t iplen, uint16_t *port);

#endif
