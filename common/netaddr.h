/* Socket addresses as text, for logs and for matching portals. */
#ifndef NETADDR_H
#define NETADDR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * "a.b.c.d:port" or "[v6]:port" into out; the bare address into ip and the
 * port into *port when those are given.  Unknown families print "?".
 */
void netaddr_format(const struct sockaddr *sa, char *out, size_t len, char *ip, size_t iplen, uint16_t *port);

#endif
