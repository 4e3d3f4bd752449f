/*
 * sd_notify() wrappers (see notify.h).  HAVE_LIBSYSTEMD comes with the
 * libsystemd dependency (top-level meson.build); without it these are no-ops.
 */
#include "target/control/notify.h"

#ifdef HAVE_LIBSYSTEMD
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>

#include "common/log.h"

/* A status longer than this is cut: systemctl shows one line anyway. */
#define NOTIFY_STATUS_MAX 256

/*
 * The protocol is newline-separated assignments: a newline inside a status
 * would start a new (bogus) assignment, so control characters become spaces.
 */
static void one_line(char *out, const char *in)
{
	size_t n = strnlen(in, NOTIFY_STATUS_MAX - 1);
	for (size_t i = 0; i < n; i++)
		out[i] = (unsigned char)in[i] < 0x20 || in[i] == 0x7f ? ' ' : in[i];
	out[n] = '\0';
}

static void send_state(const char *state)
{
	/* 0 keeps NOTIFY_SOCKET in the environment: STATUS and STOPPING follow READY. */
	int rc = sd_notify(0, state);
	if (rc < 0) {
		/* A manager that went away is no reason to stop serving; say it once. */
		static bool warned;
		if (!warned)
			log_warn("sd_notify: %s", strerror(-rc));
		warned = true;
	}
}

void notify_ready(const char *status)
{
	if (!status) {
		send_state("READY=1");
		return;
	}
	char line[NOTIFY_STATUS_MAX], msg[NOTIFY_STATUS_MAX + 32];
	one_line(line, status);
	snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", line);
	send_state(msg);
}

void notify_stopping(void)
{
	send_state("STOPPING=1");
}

void notify_status(const char *status)
{
	char line[NOTIFY_STATUS_MAX], msg[NOTIFY_STATUS_MAX + 16];
	one_line(line, status ? status : "");
	snprintf(msg, sizeof(msg), "STATUS=%s", line);
	send_state(msg);
}

#else

void notify_ready(const char *status)
{
	(void)status;
}

void notify_stopping(void)
{
}

void notify_status(const char *status)
{
	(void)status;
}

#endif
