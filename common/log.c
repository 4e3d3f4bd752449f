#include "common/log.h"
#include "common/utf8.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

enum log_level log_threshold = LOG_INFO;
log_sink_fn log_sink;

static const char *const level_name[] = { "error", "warning", "info", "debug" };

/*
 * Every line is escaped here, whatever its arguments: a peer's string that
 * reached a format without log_escape() still cannot start a line of its
 * own (newline), move a terminal's cursor (ESC) or make the line invalid
 * UTF-8 for the journal.  What is not printable UTF-8 becomes \xNN.
 */
static void vlog(enum log_level lvl, const char *suffix, const char *fmt, va_list ap)
{
	char raw[1024], line[1024];
	vsnprintf(raw, sizeof(raw), fmt, ap);
	utf8_printable(raw, line, sizeof(line));
	if (log_sink) {
		char full[1024 + 80];
		snprintf(full, sizeof(full), "%s%s", line, suffix);
		log_sink(lvl, full);
		return;
	}
	/* One fprintf per line so lines from different reactors do not interleave. */
	fprintf(stderr, "isert %s: %s%s\n", level_name[lvl], line, suffix);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	if (lvl > log_threshold)
		return;
	va_list ap;
	va_start(ap, fmt);
	vlog(lvl, "", fmt, ap);
	va_end(ap);
}

static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;

void log_limited_msg(struct log_limit *ll, enum log_level lvl, const char *fmt, ...)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	unsigned dropped = 0;
	/* Reactors share call sites; the lock is taken only on these rare lines. */
	pthread_mutex_lock(&limit_lock);
	if (!ll->window_ns || now - ll->window_ns >= LOG_LIMIT_INTERVAL_S * 1000000000ull) {
		dropped = ll->dropped;
		ll->window_ns = now;
		ll->printed = ll->dropped = 0;
	}
	bool print = ll->printed < LOG_LIMIT_BURST;
	if (print)
		ll->printed++;
	else
		ll->dropped++;
	pthread_mutex_unlock(&limit_lock);
	if (!print)
		return;
	char suffix[80] = "";
	if (dropped)
		snprintf(suffix, sizeof(suffix), " (%u more like this in the last %d s not shown)", dropped,
			 LOG_LIMIT_INTERVAL_S);
	va_list ap;
	va_start(ap, fmt);
	vlog(lvl, suffix, fmt, ap);
	va_end(ap);
}

const char *log_escape(const char *in, char *out, size_t outlen)
{
	if (outlen < 4) {
		if (outlen)
			out[0] = 0;
		return out;
	}
	/* Room left for "..." when it is cut (whole escapes only, so the cut is clean). */
	if (utf8_shown(in, out, outlen - 3) >= outlen - 3)
		strcat(out, "...");
	return out;
}
