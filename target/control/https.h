/*
 * The HTTPS door to the admin methods (docs/admin.md "Remote
 * administration"): global.admin_https, served by libmicrohttpd with
 * GnuTLS on the admin thread itself, so every request goes through the same
 * dispatcher (rpc.c) as the local socket's, one at a time.  Clients are
 * principals: a client certificate or a bearer token, each with a role.
 */
#ifndef TARGET_HTTPS_H
#define TARGET_HTTPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;

/* Refused authentications, by reason (the metrics' isert_admin_auth_refused_total). */
enum https_refusal {
	HTTPS_NO_CREDENTIALS,      /* neither a certificate nor a token */
	HTTPS_BAD_TOKEN,           /* not a token, or no principal's */
	HTTPS_CERT_UNTRUSTED,      /* not signed by client_ca, or otherwise invalid */
	HTTPS_CERT_EXPIRED,        /* expired, or not yet valid */
	HTTPS_CERT_UNKNOWN,        /* valid, but no principal names it */
	HTTPS_BACKOFF,             /* the address failed too often: refused unread for a while */
	HTTPS_FORBIDDEN,           /* authenticated, but the role or targets do not allow the method */
	HTTPS_NREFUSALS
};
const char *https_refusal_name(enum https_refusal r);
uint64_t https_refused(enum https_refusal r);  /* any thread */

/* isertd --check: c's admin_https files read and checked as at start (nothing listens); 0, or -errno with err. */
int https_check(const struct config *c, char *err, size_t errlen);
/*
 * Check what c's admin_https needs (its files, its address) and keep it
 * for https_commit; nothing changes yet.  0, or -errno with err naming the
 * field.  The apply of a change calls it before its switch.
 */
int https_prepare(const struct config *c, char *err, size_t errlen);
/* The prepared listener replaces the running one (at the admin thread's next turn: not inside a request). */
void https_commit(void);
/* SIGHUP: read the certificates and token hashes again (admin thread). */
void https_reload(void);

/* The admin thread's loop: the descriptor to poll (-1: none), how long it may wait, and the work when due. */
int https_fd(void);
int https_timeout_ms(int max);
void https_run(void);
void https_stop(void);

#endif
