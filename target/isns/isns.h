/*
 * isertd's iSNS client (RFC 4171; docs/admin.md "iSNS"): the targets, their
 * portals and portal groups registered with the server global.isns names,
 * kept current as the configuration changes, ESI answered, deregistered
 * when isertd stops.  It runs on a thread of its own and never blocks its
 * callers: they hand it a copy of what to register and return.
 */
#ifndef ISNS_H
#define ISNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;

/* Where the registration stands, as its thread last saw it (the isns.status method). */
struct isns_report {
	bool running;            /* a server is configured and its thread runs */
	bool registered;         /* the server holds what is wanted */
	char server[80];         /* host:port being served, or "" */
	char entity[256];
	size_t targets, portals; /* registered, or to register */
	uint16_t esi_port;       /* 0: no ESI */
	unsigned failures;       /* in a row, until a check finds the server holds everything */
	char last_error[200];    /* the last failure (cut at 199 bytes), or "" */
	int64_t last_error_age_s, registered_age_s; /* seconds since then; -1: never */
};
void isns_get_report(struct isns_report *st);

/* What to register from now on (c->isns NULL: nothing; what was registered goes).  Main, or the admin thread. */
void isns_configure(const struct config *c);
/* Deregister now (isertd is stopping); returns at once.  Reactor 0's signal handler. */
void isns_shutdown(void);
/* Deregister if that is not done, and end the thread: at most ISNS_STOP_MS. */
#define ISNS_STOP_MS 3000
void isns_stop(void);

#endif
