#include "common/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

enum log_level log_threshold = LOG_INFO;

static const char *const level_name[] = { "error", "warning", "info", "debug" };

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	if (lvl > log_threshold)
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	/* One fprintf per line so lines from different reactors do not interleave. */
	fprintf(stderr, "isert %s: %s\n", level_name[lvl], line);
}
