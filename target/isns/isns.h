/*
 * isertd's iSNS client (RFC 4171; docs/admin.md "iSNS"): the targets, their
 * portals and portal groups registered with the server global.isns names,
 * kept current as the configuration changes, ESI answered, deregistered
 * when isertd stops.  It runs on a thread of its own and never blocks its
 * callers: they hand it a copy of what to register and return.
 */
#ifndef ISNS_H
#define ISNS_H

struct config;

/* What to register from now on (c->isns NULL: nothing; what was registered goes).  Main, or the admin thread. */
void isns_configure(const struct config *c);
/* Deregister now (isertd is stopping); returns at once.  Reactor 0's signal handler. */
void isns_shutdown(void);
/* Deregister if that is not done, and end the thread: at most ISNS_STOP_MS. */
#define ISNS_STOP_MS 3000
void isns_stop(void);

#endif
