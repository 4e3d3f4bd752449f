/* Between the admin socket's server (rpc.c) and its methods (rpc_methods.c). */
#ifndef RPC_INT_H
#define RPC_INT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "target/config.h"

struct rpc_call {
	json_object *params;     /* an object (empty when the request had none) */
	json_object *result;     /* set by the method on success */
	int code;                /* RPC_* on failure */
	bool unchanged;          /* a change method that changed nothing (dry run, or nothing differed) */
	uid_t uid;               /* of the peer: root or isertd's own */
	char msg[768];
};

struct rpc_method {
	const char *name;
	int (*fn)(struct rpc_call *c); /* 0, or -1 with code and msg set */
	bool change;             /* changes the running configuration: takes "generation" */
	const char *help;
};

extern const struct rpc_method rpc_methods[];

/* What the methods work on; set by rpc_start (or the fuzzer). */
struct rpc_state {
	struct config *cfg;      /* the running configuration */
	char *config_path;       /* the file isertd was started with, or NULL */
	uint64_t generation;     /* changes applied so far + 1 */
	bool stopping;
};
extern struct rpc_state rpc_st;

/* Fill c's error (returns -1). */
int rpc_fail(struct rpc_call *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
