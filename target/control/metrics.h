/*
 * The Prometheus endpoint (docs/stats.md, "Prometheus"): GET /metrics on
 * global.metrics, served by libmicrohttpd's own thread.  A scrape takes one
 * stats_snapshot() (a message to every reactor, at most 5 s), keeps a
 * compact copy of it, and streams the text exposition format 0.0.4 from
 * that copy as the client reads.  No reactor ever waits on it.
 */
#ifndef TARGET_METRICS_H
#define TARGET_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stats_snap;

/*
 * Latency histograms are per LUN (summed over its initiators), for at most
 * this many LUNs per scrape: the first in row order.  Each is 120 series.
 */
#define METRICS_HIST_LUNS 512

/* A growing text buffer; oom is sticky, so a render checks once at the end. */
struct metrics_buf {
	char *p;
	size_t len, cap;
	bool oom;
};
void metrics_buf_free(struct metrics_buf *b);

/* Connections the endpoint serves at once (descriptors isertd keeps for them: iscsi/admit.c). */
#define METRICS_MAX_CONNECTIONS 16

/*
 * The exposition of one snapshot, produced piece by piece (a row of a
 * family, a LUN's histogram) as it is read, so its text is never whole in
 * memory.  metrics_gen_new takes s (frees it, also on failure) and keeps
 * only what the exposition shows; NULL when out of memory.
 */
struct metrics_gen;
struct metrics_gen *metrics_gen_new(struct stats_snap *s);
/* Up to max bytes of the text into buf: how many (less than max only at the end; 0: the end), -1 out of memory. */
ssize_t metrics_gen_read(struct metrics_gen *g, char *buf, size_t max);
void metrics_gen_free(struct metrics_gen *g);

/* The whole exposition of s into b (the unit test); takes s as metrics_gen_new does. */
void metrics_render(struct stats_snap *s, struct metrics_buf *b);


/* Listen on addr (global.metrics, config_parse_metrics) and serve; 0, or -errno with err filled. */
int metrics_start(const char *addr, char *err, size_t errlen);
/* At a signal, on reactor 0: stop taking scrapes (the listener closes), without waiting. */
void metrics_shutdown(void);
/* Once the reactors stopped: join the thread and free everything (no-op if not started). */
void metrics_stop(void);

#endif
