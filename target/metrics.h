/*
 * The Prometheus endpoint (docs/stats.md, "Prometheus"): GET /metrics on
 * global.metrics, served by libmicrohttpd's own thread.  A scrape calls
 * stats_collect(), which asks the reactors by message (at most 5 s), and
 * renders the JSON as the text exposition format 0.0.4.  No reactor ever
 * waits on it.
 */
#ifndef TARGET_METRICS_H
#define TARGET_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_object;

/* A growing text buffer; oom is sticky, so a render checks once at the end. */
struct metrics_buf {
	char *p;
	size_t len, cap;
	bool oom;
};

/* Append the exposition of a stats_collect() document to b (pure: a unit test feeds it JSON). */
void metrics_render(struct json_object *stats, struct metrics_buf *b);
void metrics_buf_free(struct metrics_buf *b);

/* Connections the endpoint serves at once (descriptors isertd keeps for them: iscsi/admit.c). */
#define METRICS_MAX_CONNECTIONS 16

/* Listen on addr (global.metrics, config_parse_metrics) and serve; 0, or -errno with err filled. */
int metrics_start(const char *addr, char *err, size_t errlen);
/* At a signal, on reactor 0: stop taking scrapes (the listener closes), without waiting. */
void metrics_shutdown(void);
/* Once the reactors stopped: join the thread and free everything (no-op if not started). */
void metrics_stop(void);

#endif
