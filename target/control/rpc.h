/*
 * The admin socket: JSON-RPC 2.0 over a unix stream socket (docs/admin.md).
 * It runs on its own thread; whatever it needs from connections and
 * sessions it asks the reactors for by message, so no request ever blocks
 * the data path.
 */
#ifndef RPC_H
#define RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "target/config/config.h"

#define RPC_DEFAULT_SOCKET "/run/isertd.sock"
#define RPC_MAX_REQUEST    (1u << 20)  /* bytes of one request */
#define RPC_MAX_CLIENTS    16          /* admin connections at once */
#define RPC_IDLE_MS        60000       /* an admin connection that sends nothing is closed */

/* JSON-RPC error codes: the spec's, then ours. */
enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL = -32603,
	RPC_REFUSED = -32000,        /* the change breaks a rule of the configuration */
	RPC_PERMISSION = -32001,     /* the peer may not administer isertd */
	RPC_STALE = -32002,          /* the change was based on an older generation */
	RPC_NOT_FOUND = -32003,      /* no such object */
	RPC_UNAVAILABLE = -32004,    /* shutting down, or the reactors did not answer */
};

/*
 * Start serving at path (NULL: the configuration's admin_socket, else the
 * default).  A path another live isertd serves is an error when it was asked
 * for, and a warning (no admin socket) when it was only the default.
 * config_path: the file isertd was started with (NULL: the embedded default).
 */
int rpc_start(struct config *cfg, const char *path, const char *config_path, char *err, size_t errlen);
/* SIGHUP (any thread): the admin thread applies the file isertd was started with. */
void rpc_reload(void);
void rpc_fleet_wake(void);
/* SIGTERM: refuse further requests (the socket stays until rpc_stop). */
void rpc_shutdown(void);
/* Stop the thread, remove the socket. */
void rpc_stop(void);

/* One request (a JSON text) from a peer with uid; the response text (malloc'd), or NULL for a notification. */
char *rpc_handle(const char *req, size_t len, uid_t uid);

/*
 * Who sends a request through the HTTPS door (https.c): a principal of
 * global.admin_https, and where from.  principal is read only before the
 * method runs (a change may free it); name and from outlive it.
 */
struct cfg_principal;
struct rpc_who {
	const struct cfg_principal *principal;
	const char *name;        /* the principal's name */
	const char *from;        /* the client's address, [IP]:PORT */
};
/* As rpc_handle, for who; *code is the answer's JSON-RPC error code (0: a result, or no answer). */
char *rpc_handle_as(const char *req, size_t len, const struct rpc_who *who, int *code);
/* A JSON-RPC error answer with id null (malloc'd; NULL: out of memory). */
char *rpc_error_text(int code, const char *msg);

/* For the fuzzer: nothing outside memory changes (save refuses, changes are planned, not carried out). */
extern bool rpc_plan_only;

#endif
