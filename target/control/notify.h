/*
 * Service-manager notification (sd_notify): tells systemd, when isertd runs
 * as a Type=notify service, that the listeners are up, what it is doing and
 * that it is stopping.  Outside systemd (no NOTIFY_SOCKET), and in a build
 * without libsystemd, every call does nothing.
 */
#ifndef NOTIFY_H
#define NOTIFY_H

/* READY=1, with STATUS=status when status is not NULL: after the listeners are up. */
void notify_ready(const char *status);
/* STOPPING=1: at the start of an orderly shutdown (SIGTERM/SIGINT). */
void notify_stopping(void);
/* STATUS=status: a one-line state shown by systemctl status. */
void notify_status(const char *status);

#endif
