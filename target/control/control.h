/*
 * The control plane's parts that the admin socket's methods and isertd's
 * start and end share: what the reactors are asked (fanout.c) and carrying
 * a change out (apply.c).  Admin thread only.
 */
#ifndef CONTROL_H
#define CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/config/config.h"
#include "target/control/metrics.h"
#include "target/control/rpc.h"

struct json_object;
struct scsi_lu;

/*
 * listen.c: a non-blocking TCP listener on addr ("HOST:PORT" or "PORT",
 * config_parse_metrics) for an HTTP door: the descriptor, or -errno with err
 * naming field; shown gets the address as the log writes it.
 */
int control_listen(const char *field, const char *addr, char *shown, size_t shownlen, char *err, size_t errlen);

/* fanout.c: what the admin socket asks of the reactors (from its own thread) */
/* A peer's text (an initiator name) as the admin socket gives it: its shown form (common/utf8.h). */
struct json_object *admin_json_shown(const char *s);
/* Every session (filtered by tsih, initiator, target when non-zero/non-NULL) as JSON objects. */
int admin_sessions(struct json_object *out, uint16_t tsih, const char *initiator, const char *target,
		   char *err, size_t errlen);
/* Close the connections of matching sessions (tsih, or every session of target/tag); returns how many. */
int admin_close_sessions(uint16_t tsih, const char *target, int tag, const char *why, char *err, size_t errlen);
/* After a change: each session takes its LUN map again (REPORTED LUNS DATA HAS CHANGED where it
 * changed), sessions no longer admitted are closed. */
int admin_refresh_sessions(int *closed, int *changed, char *err, size_t errlen);
/*
 * Run fn(ctx) on every reactor and wait (5 s at most).  0: all ran, ctx is
 * the caller's again.  Otherwise -errno with err filled, and ctx belongs to
 * the request: ctx_free(ctx) runs once the last reactor let go of it.
 */
int admin_on_reactors(void (*fn)(void *ctx), void *ctx, void (*ctx_free)(void *ctx), char *err, size_t errlen);
/* How many tasks and LUN maps still point at one of lus (a negative errno when reactors did not answer). */
int admin_lu_users(struct scsi_lu *const *lus, size_t n, char *err, size_t errlen);

/*
 * apply.c: a change planned (what it does, what it may not do: nothing
 * opened, no reactor asked), then carried out.  A whole configuration
 * (taken), or one backstore or one LUN added to the running one (obj: its
 * object as in the file, checked by the loader's own code).
 */
struct apply_plan;
int apply_plan_whole(struct config *n, struct apply_plan **out, char *err, size_t errlen);
int apply_plan_backstore(struct json_object *obj, struct apply_plan **out, char *err, size_t errlen);
int apply_plan_lun(size_t ti, size_t gi, struct json_object *obj, struct apply_plan **out, char *err, size_t errlen);
/* The plan's steps ({op, path, value}) and the global keys that need a restart (both the plan's). */
struct json_object *apply_plan_steps(const struct apply_plan *p);
struct json_object *apply_plan_restart(const struct apply_plan *p);
struct apply_result {
	int sessions_closed, maps_changed;
};
int apply_execute(struct apply_plan *p, struct apply_result *res, char *err, size_t errlen);
void apply_plan_free(struct apply_plan *p);
/* Is key a global key that needs a restart? */
bool apply_restart_key(const char *key);
/* At exit: the stores whose last users never went (kept rather than freed under them). */
void apply_free(void);

/* The descriptors the admin socket's and the metrics endpoint's connections may take (admit_fd_budget's others). */
static inline unsigned admin_fd_reserve(const struct config *c)
{
	return RPC_MAX_CLIENTS + (c->metrics ? METRICS_MAX_CONNECTIONS : 0);
}

#endif
