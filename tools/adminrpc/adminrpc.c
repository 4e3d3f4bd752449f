/* The admin socket's and HTTPS listener's client side, shared by iserctl and iserbench (adminrpc.h). */
#include "adminrpc.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fail.h"
#include "https.h"

#define REPLY_MAX (256u << 20)

static int connect_unix(const char *sock, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(sock) >= sizeof(sa.sun_path))
		return admin_fail(err, errlen, ENAMETOOLONG, "%s: socket path too long", sock);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return admin_fail(err, errlen, e, "cannot reach isertd at %s: %s", sock, strerror(e));
	}
	return fd;
}

/* One request on the socket: it reads one per line, answers one JSON value. */
static int rpc_unix(const char *sock, const char *text, size_t len, int timeout_ms, json_object **reply, char *err,
		    size_t errlen)
{
	int fd = connect_unix(sock, err, errlen);
	if (fd < 0)
		return fd;
	size_t off = 0;
	int rc = 0;
	while (off < len && !rc) {
		ssize_t n = write(fd, text + off, len - off);
		if (n <= 0)
			rc = admin_fail(err, errlen, errno ? errno : EIO, "writing to %s: %s", sock, strerror(errno));
		else
			off += (size_t)n;
	}
	json_tokener *tok = json_tokener_new();
	size_t got = 0;
	char buf[65536];
	while (!rc && !*reply) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		int ready = poll(&pf, 1, timeout_ms);
		if (ready < 0 && errno == EINTR)
			continue; /* a signal the caller handles (iserctl top's quit): the answer is near */
		if (ready <= 0) {
			rc = admin_fail(err, errlen, ETIMEDOUT, "isertd did not answer within %d s", timeout_ms / 1000);
			break;
		}
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n <= 0) {
			rc = admin_fail(err, errlen, ECONNRESET, "isertd closed the connection without an answer");
			break;
		}
		got += (size_t)n;
		*reply = json_tokener_parse_ex(tok, buf, (int)n);
		enum json_tokener_error e = json_tokener_get_error(tok);
		if (!*reply && (e != json_tokener_continue || got > REPLY_MAX))
			rc = admin_fail(err, errlen, EPROTO, "the answer is not JSON: %s", json_tokener_error_desc(e));
	}
	explicit_bzero(buf, sizeof(buf));
	json_tokener_free(tok);
	close(fd);
	return rc;
}

/* One request over HTTPS: the body is the answer whatever the status, when it is JSON. */
static int rpc_https(const struct admin_endpoint *ep, const char *text, size_t len, int timeout_ms,
		     json_object **reply, char *err, size_t errlen)
{
	struct https_answer a;
	int rc = https_post(ep, text, len, timeout_ms, &a, err, errlen);
	if (rc)
		return rc;
	json_tokener *tok = json_tokener_new();
	*reply = tok && a.len <= INT_MAX ? json_tokener_parse_ex(tok, a.body, (int)a.len) : NULL;
	/* One JSON value and nothing after it but white space. */
	size_t end = *reply ? json_tokener_get_parse_end(tok) : 0;
	if (*reply && a.body[end + strspn(a.body + end, " \t\r\n")]) {
		json_object_put(*reply);
		*reply = NULL;
	}
	if (!*reply)
		rc = admin_fail(err, errlen, EPROTO, "HTTP %d %s from %s: the answer is not JSON-RPC (not JSON)",
				a.status, a.reason, ep->url);
	json_tokener_free(tok);
	https_answer_free(&a);
	return rc;
}

int admin_rpc_to(const struct admin_endpoint *ep, const char *method, json_object *params, int timeout_ms,
		 json_object **reply, char *err, size_t errlen)
{
	*reply = NULL;
	json_object *req = json_object_new_object();
	json_object_object_add(req, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(req, "id", json_object_new_int(1));
	json_object_object_add(req, "method", json_object_new_string(method));
	if (params)
		json_object_object_add(req, "params", params);
	/* PLAIN: the socket reads one request per line, so no newline inside. */
	const char *text = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	size_t len = strlen(text);
	int rc = ep->url ? rpc_https(ep, text, len, timeout_ms, reply, err, errlen)
			 : rpc_unix(ep->sock, text, len, timeout_ms, reply, err, errlen);
	/*
	 * json-c's own buffer for the text, ours.  Not the strings of params: a caller may hold them still (import
	 * plans, then applies the same document) and wipes its secrets itself once done.
	 */
	explicit_bzero((char *)text, len);
	json_object_put(req);
	return rc;
}

int admin_rpc(const char *sock, const char *method, json_object *params, int timeout_ms, json_object **reply,
	      char *err, size_t errlen)
{
	return admin_rpc_to(&(struct admin_endpoint){ .sock = sock }, method, params, timeout_ms, reply, err, errlen);
}

json_object *admin_stats_next(json_object *params, json_object *result)
{
	json_object *more, *cursor;
	if (!json_object_object_get_ex(result, "more", &more) || !json_object_get_boolean(more) ||
	    !json_object_object_get_ex(result, "cursor", &cursor))
		return NULL;
	json_object *p = json_object_new_object(), *secs = json_object_new_array();
	json_object_object_foreach(params, k, v)
	{
		if (strcmp(k, "sections") && strcmp(k, "cursor"))
			json_object_object_add(p, k, json_object_get(v));
	}
	json_object_array_add(secs, json_object_new_string("luns"));
	json_object_object_add(p, "sections", secs);
	json_object_object_add(p, "cursor", json_object_get(cursor));
	return p;
}

void lat_hist_add_json(struct lat_hist *h, json_object *o)
{
	json_object *v;
	if (!o)
		return;
	if (json_object_object_get_ex(o, "count", &v))
		h->count += (uint64_t)json_object_get_uint64(v);
	if (json_object_object_get_ex(o, "sum_ns", &v))
		h->sum_ns += (uint64_t)json_object_get_uint64(v);
	if (!json_object_object_get_ex(o, "buckets", &v) || !json_object_is_type(v, json_type_array))
		return;
	size_t n = json_object_array_length(v);
	if (n > LAT_BUCKETS_MAX)
		n = LAT_BUCKETS_MAX; /* beyond 2^63 us: cannot happen with the documented 28 */
	for (size_t i = 0; i < n; i++)
		h->b[i] += (uint64_t)json_object_get_uint64(json_object_array_get_idx(v, i));
	if (h->nb < n)
		h->nb = (unsigned)n;
}

void lat_hist_add(struct lat_hist *into, const struct lat_hist *h)
{
	into->count += h->count;
	into->sum_ns += h->sum_ns;
	for (unsigned i = 0; i < h->nb; i++)
		into->b[i] += h->b[i];
	if (into->nb < h->nb)
		into->nb = h->nb;
}

static uint64_t sub(uint64_t now, uint64_t before)
{
	return now >= before ? now - before : now;
}

void lat_hist_delta(struct lat_hist *d, const struct lat_hist *now, const struct lat_hist *before)
{
	/* Reset in between: the whole of now is newer than before. */
	bool reset = now->count < before->count;
	d->count = reset ? now->count : now->count - before->count;
	d->sum_ns = reset ? now->sum_ns : sub(now->sum_ns, before->sum_ns);
	d->nb = now->nb;
	for (unsigned i = 0; i < now->nb; i++)
		d->b[i] = reset ? now->b[i] : sub(now->b[i], before->b[i]);
}

double lat_hist_avg_us(const struct lat_hist *h)
{
	return h->count ? (double)h->sum_ns / (double)h->count / 1000.0 : 0;
}

double lat_hist_pct_us(const struct lat_hist *h, double pct)
{
	uint64_t total = 0, cum = 0;
	for (unsigned i = 0; i < h->nb; i++)
		total += h->b[i];
	if (!total)
		return 0;
	/* The smallest bucket whose cumulative count reaches pct % of the total. */
	double need = total * pct / 100.0;
	for (unsigned i = 0; i < h->nb; i++) {
		cum += h->b[i];
		if ((double)cum >= need)
			return i + 1 < h->nb ? (double)(1ull << i) : -1;
	}
	return -1;
}
