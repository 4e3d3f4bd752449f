/* TCP transport (RFC 7143): PDUs over a stream socket, with CRC32C digests. */
#ifndef TCP_H
#define TCP_H

#include "common/transport.h"

/* Connect to host:port (initiator side); the socket is non-blocking once connected. */
int tcp_connect(const char *host, uint16_t port, struct xp_conn **out, char *err, size_t errlen);

#endif
