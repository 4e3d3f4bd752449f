/*
 * GET /metrics over HTTP, on libmicrohttpd's own thread.  A scrape costs
 * one stats_snapshot() (a message to every reactor, at most 5 s); its text
 * is made from a compact copy as the client reads it (metrics_text.c), so
 * what a connection holds is bounded by the rows a snapshot can have, not
 * by the text.  The reactors never wait on this thread.  Bounded like
 * every other peer-facing door (docs/security.md): 16 connections, at most
 * 4 from one address, 10 s idle.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "common/log.h"
#include "common/netaddr.h"
#include "target/config/config.h"
#include "target/control/control.h"
#include "target/control/metrics.h"
#include "target/control/stats.h"

#define METRICS_PER_IP_LIMIT 4  /* so one address that holds its connections open leaves 12 to the others */
#define METRICS_TIMEOUT_S 10
#define METRICS_BLOCK (64 * 1024) /* text made per read of the body */

static struct MHD_Daemon *daemon_;
static int listen_fd = -1;     /* ours: MHD is given it, and hands it back at quiesce */
static bool quiesced;
static char shown[NETADDR_LEN]; /* HOST:PORT as it listens, for the log and errors */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned code, char *body, size_t len,
			      const char *type)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ret = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result answer_text(struct MHD_Connection *c, unsigned code, const char *msg)
{
	char *s = strdup(msg);
	return s ? answer(c, code, s, strlen(s), "text/plain; charset=utf-8") : MHD_NO;
}

/* The body, as the client reads it: metrics_gen_read's next piece. */
static ssize_t body_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	ssize_t n = metrics_gen_read(cls, buf, max);
	return n < 0 ? MHD_CONTENT_READER_END_WITH_ERROR : n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void body_free(void *cls)
{
	metrics_gen_free(cls);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_len, void **state)
{
	(void)cls, (void)version, (void)upload, (void)upload_len, (void)state;
	if (strcmp(url, "/metrics"))
		return answer_text(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");

	/* Every section but the connections: per-connection series would churn; the portals sum them. */
	const struct stats_filter f = { .lun = -1, .luns = true, .portals = true, .rdma_devices = true,
					.reactors = true };
	struct stats_snap *snap;
	char err[256] = "", msg[300];
	int rc = stats_snapshot(&f, &snap, err, sizeof(err));
	struct metrics_gen *g = rc ? NULL : metrics_gen_new(snap);
	if (!rc && !g)
		rc = -ENOMEM;
	if (rc) {
		snprintf(msg, sizeof(msg), "statistics unavailable: %s\n", err[0] ? err : strerror(-rc));
		log_limited(LOG_WARN, "metrics: %.*s", (int)strlen(msg) - 1, msg);
		return answer_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, msg);
	}
	/* Length unknown until the end: chunked for HTTP/1.1, closed at the end for 1.0. */
	struct MHD_Response *r =
		MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, METRICS_BLOCK, body_read, g, body_free);
	if (!r) {
		metrics_gen_free(g);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

int metrics_start(const char *addr, char *err, size_t errlen)
{
	if (!addr || !*addr)
		return 0;
	int fd = control_listen("global.metrics", addr, shown, sizeof(shown), err, errlen);
	if (fd < 0)
		return fd;
	/*
	 * MHD_USE_AUTO picks epoll: select() would fail on a descriptor past
	 * 1024, and isertd holds one per connection.  MHD_USE_ITC lets
	 * metrics_shutdown() quiesce it from another thread.
	 */
	daemon_ = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC, 0, NULL, NULL,
				   on_request, NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
				   (unsigned)METRICS_MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				   (unsigned)METRICS_PER_IP_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
				   (unsigned)METRICS_TIMEOUT_S, MHD_OPTION_END);
	if (!daemon_) {
		close(fd);
		snprintf(err, errlen, "global.metrics: cannot start the HTTP server on %s", shown);
		return -EIO;
	}
	listen_fd = fd;
	quiesced = false;
	log_info("metrics: Prometheus endpoint at http://%s/metrics", shown);
	return 0;
}

void metrics_shutdown(void)
{
	if (!daemon_ || quiesced)
		return;
	quiesced = true;
	/* MHD gives the listener back: closing it refuses new scrapes while the reactors drain. */
	if (MHD_quiesce_daemon(daemon_) >= 0)
		close(listen_fd);
}

void metrics_stop(void)
{
	if (!daemon_)
		return;
	metrics_shutdown();
	MHD_stop_daemon(daemon_);
	daemon_ = NULL;
	listen_fd = -1;
}
