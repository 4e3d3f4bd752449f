/*
 * The tools' side of isertd's admin socket (docs/admin.md) and of its
 * HTTPS admin listener, shared by iserctl and iserbench: one JSON-RPC
 * call, and the latency histograms of
 * the `stats` method (docs/stats.md) as numbers to subtract and rank.
 */
#ifndef TOOLS_ADMINRPC_H
#define TOOLS_ADMINRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

/*
 * Send {"jsonrpc":"2.0","id":1,"method":METHOD,"params":PARAMS} (params may
 * be NULL; it is consumed either way) and read one answer within timeout_ms.
 * 0 with *reply the whole answer (it holds "result" or "error"; the caller
 * puts it), or -errno with err filled: -ENAMETOOLONG for a socket path
 * sockaddr_un cannot hold, the connect() errno for a socket nobody serves,
 * -EPROTO for an answer that is not JSON, -ETIMEDOUT, -ECONNRESET.
 */
int admin_rpc(const char *sock, const char *method, struct json_object *params, int timeout_ms,
	      struct json_object **reply, char *err, size_t errlen);

/*
 * Where isertd is administered: its local socket, or its HTTPS admin
 * listener (docs/admin-remote-client.md).  Every member is borrowed.
 */
struct admin_endpoint {
	const char *sock;       /* the admin socket, used when url is NULL */
	const char *url;        /* https://HOST[:PORT] (url.h); IPv6 in brackets */
	const char *cacert;     /* PEM file of the CAs the server's certificate is checked against; NULL: the system's */
	const char *cert, *key; /* the client certificate (PEM, with its chain) and its key: both or neither */
	const char *token;      /* the bearer token, 64 lowercase hex characters (token.h), or NULL */
};

/*
 * admin_rpc to ep: over its socket, or over HTTPS (POST /rpc, one request
 * per connection; timeout_ms covers connect, TLS handshake, write and
 * read).  Over HTTPS the answer's body is the reply whatever the HTTP
 * status (401, 403, 413, 429 come with a JSON-RPC error object); a body
 * that is not JSON is -EPROTO with err "HTTP <status> <reason>: ...".
 * More -errno: -EINVAL a URL, certificate, key or token that cannot be used
 * (err says which and why); -EPROTO a TLS failure (an untrusted
 * certificate, a name mismatch, an alert from the server); -EMSGSIZE a
 * request past 1 MiB or an answer past 64 MiB.  The request's text and
 * what was read are wiped before they are freed.
 */
int admin_rpc_to(const struct admin_endpoint *ep, const char *method, struct json_object *params, int timeout_ms,
		 struct json_object **reply, char *err, size_t errlen);

/*
 * `stats` answers its luns section in pages (docs/admin.md): the
 * parameters that ask for the page after result (params' filters, the
 * luns section only, result's cursor), a new object; NULL when result says
 * there is no more.  params is not changed.
 */
struct json_object *admin_stats_next(struct json_object *params, struct json_object *result);

/*
 * A `latency` histogram of `stats`: buckets[i] counts latencies of at most
 * 2^i us, the last bucket everything beyond the last bound.
 */
#define LAT_BUCKETS_MAX 64
struct lat_hist {
	uint64_t count, sum_ns;
	unsigned nb;                    /* buckets in use */
	uint64_t b[LAT_BUCKETS_MAX];
};

/* Add the histogram object o ({count, sum_ns, buckets}; NULL adds nothing) into h. */
void lat_hist_add_json(struct lat_hist *h, struct json_object *o);
void lat_hist_add(struct lat_hist *into, const struct lat_hist *h);
/* d = now - before; a counter that went down (stats.reset in between) counts from zero. */
void lat_hist_delta(struct lat_hist *d, const struct lat_hist *now, const struct lat_hist *before);
/* Mean latency in us (0 without samples). */
double lat_hist_avg_us(const struct lat_hist *h);
/*
 * The pct-th percentile as the upper bound of the bucket where the
 * cumulative count reaches pct % (so an upper bound of the true value, at
 * most twice it); 0 without samples, -1 when it falls in the last, unbounded
 * bucket.
 */
double lat_hist_pct_us(const struct lat_hist *h, double pct);

#endif
