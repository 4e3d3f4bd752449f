/* Logging: one line per event on stderr, with a level and a module tag. */
#ifndef LOG_H
#define LOG_H

enum log_level { LOG_ERR, LOG_WARN, LOG_INFO, LOG_DEBUG };

extern enum log_level log_threshold;

void log_msg(enum log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...)   log_msg(LOG_ERR, __VA_ARGS__)
#define log_warn(...)  log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_threshold >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
