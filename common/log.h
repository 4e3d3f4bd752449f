/* Logging: one line per event on stderr, with a level and a module tag. */
#ifndef LOG_H
#define LOG_H

#include <stddef.h>
#include <stdint.h>

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;
/*
 * Where lines go instead of stderr (the initiator library hands them to
 * its caller's callback); NULL: stderr.  line has no level prefix and no
 * newline.
 */
typedef void (*log_sink_fn)(enum log_level lvl, const char *line);
extern log_sink_fn log_sink;

void log_msg(enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_threshold >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

/*
 * For lines a peer can cause (bad PDUs, refused logins, timeouts): each call
 * site prints at most LOG_LIMIT_BURST lines every LOG_LIMIT_INTERVAL_S
 * seconds; the next line after a quiet spell says how many were dropped.
 */
#define LOG_LIMIT_BURST 10
#define LOG_LIMIT_INTERVAL_S 5
struct log_limit {
	uint64_t window_ns;
	unsigned printed, dropped;
};
void log_limited_msg(struct log_limit *ll, enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
#define log_limited(lvl, ...) \
	do { \
		static struct log_limit log_ll_; \
		if ((lvl) <= log_threshold) \
			log_limited_msg(&log_ll_, (lvl), __VA_ARGS__); \
	} while (0)

/*
 * Text from a peer (initiator names, CHAP_N, keys) in its shown form
 * (common/utf8.h: controls, what is not UTF-8 and backslashes as \xNN, as
 * the admin socket and the metrics show it), cut to fit out (with "..."
 * when cut).  Returns out.
 */
const char *log_escape(const char *in, char *out, size_t outlen);

#endif
