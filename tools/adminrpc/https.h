/*
 * One JSON-RPC request over HTTPS to isertd's admin listener: POST /rpc,
 * HTTP/1.1 in TLS 1.2 or 1.3, one request per connection
 * (docs/admin-remote-client.md).  adminrpc.c's transport for an endpoint
 * with a URL.
 */
#ifndef TOOLS_HTTPS_H
#define TOOLS_HTTPS_H

#include <stddef.h>

struct admin_endpoint;

/* The listener takes a request body of at most 1 MiB. */
#define HTTPS_REQUEST_MAX (1u << 20)
/* config.get of a large configuration is big; an answer past this is refused, not read. */
#define HTTPS_ANSWER_MAX (64u << 20)

struct https_answer {
	int status;          /* the status line's code */
	char reason[64];     /* its reason phrase, made printable */
	const char *body;    /* inside mem, len bytes, NUL-terminated */
	size_t len;
	char *mem;           /* what was read, wiped by https_answer_free */
	size_t cap;
};

/*
 * POST body (len bytes) to ep->url within timeout_ms (connect, handshake,
 * write and read together).  0 with *a filled (any status), or -errno with
 * err saying what failed and what to do: -EINVAL a URL, certificate or key
 * that cannot be used; the connect errno (-ECONNREFUSED, ...);
 * -ETIMEDOUT; -EPROTO a TLS failure (an untrusted certificate or name, an
 * alert from the server) or an answer that is not HTTP or not readable;
 * -EMSGSIZE a request or an answer past its bound.
 */
int https_post(const struct admin_endpoint *ep, const char *body, size_t len, int timeout_ms, struct https_answer *a,
	       char *err, size_t errlen);
/* Wipes and frees what https_post read. */
void https_answer_free(struct https_answer *a);

#endif
