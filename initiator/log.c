/*
 * The library's log: one process-wide callback (isc_set_log_cb), none by
 * default, so a program linking the library never finds our lines on its
 * stderr.  The common/ code under the library (transports, reactor) logs
 * through log_msg(); its sink is pointed here when a session is created.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "isc_internal.h"

_Static_assert((int)ISC_LOG_ERR == (int)LOG_ERR && (int)ISC_LOG_WARN == (int)LOG_WARN &&
		       (int)ISC_LOG_INFO == (int)LOG_INFO && (int)ISC_LOG_DEBUG == (int)LOG_DEBUG,
	       "the public log levels are common/log.h's");

static isc_log_cb user_cb;
static void *user_arg;

static void to_user(enum log_level lvl, const char *line)
{
	isc_log_cb cb = user_cb;
	if (cb)
		cb((enum isc_log_level)lvl, line, user_arg);
}

void isc_log_init(void)
{
	log_sink = to_user;
}

void isc_set_log_cb(isc_log_cb cb, void *arg, enum isc_log_level max_level)
{
	user_arg = arg;
	user_cb = cb;
	if (max_level > ISC_LOG_DEBUG)
		max_level = ISC_LOG_DEBUG;
	log_threshold = (enum log_level)max_level;
	isc_log_init();
}

void isc_log(enum isc_log_level lvl, const char *fmt, ...)
{
	static int env = -1;
	if (env < 0)
		env = getenv("ISC_DEBUG") != NULL;
	bool to_stderr = !user_cb && env && lvl <= ISC_LOG_DEBUG;
	if (!to_stderr && (!user_cb || (int)lvl > (int)log_threshold))
		return;
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (to_stderr)
		fprintf(stderr, "isc: %s\n", line);
	else
		to_user((enum log_level)lvl, line);
}
