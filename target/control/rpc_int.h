/* Between the admin socket's server (rpc.c) and its methods (rpc_methods.c). */
#ifndef RPC_INT_H
#define RPC_INT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "target/config/config.h"

struct rpc_call {
	json_object *params;     /* an object (empty when the request had none) */
	json_object *result;     /* set by the method on success */
	int code;                /* RPC_* on failure */
	bool unchanged;          /* a change method that changed nothing (dry run, or nothing differed) */
	uid_t uid;               /* of the peer: root or isertd's own */
	char msg[768];
};

/*
 * One named parameter of a method.  The dispatcher checks every request
 * against its method's table before the method runs (rpc_check_params):
 * unknown names, required ones, types and integer bounds, with the same
 * words every time; rpc.methods lists the tables and a test holds
 * docs/admin.md to them.  A method reads its parameters already checked.
 */
enum rpc_ptype {
	RPC_P_STR,     /* a non-empty string */
	RPC_P_INT,     /* an integer from min to max */
	RPC_P_BOOL,    /* true or false */
	RPC_P_ARRAY,   /* an array (the method checks its elements) */
	RPC_P_OBJECT,  /* an object */
	RPC_P_VALUE,   /* any JSON value: the configuration loader checks it where it goes in the document */
};
struct rpc_param {
	const char *name;
	enum rpc_ptype type;
	bool required;
	int64_t min, max;        /* RPC_P_INT */
	bool secret;             /* holds a CHAP secret: masked wherever it is shown (config_secret.c) */
	const char *hint;        /* said after "required", or NULL */
};

struct rpc_method {
	const char *name;
	int (*fn)(struct rpc_call *c); /* 0, or -1 with code and msg set */
	bool change;             /* changes the running configuration: takes "generation" */
	const struct rpc_param *params;  /* ends with a NULL name */
	/*
	 * Also takes the keys its object has in the configuration file (a
	 * backstore's, a TPG's, ...): the loader checks those, and the method
	 * names what it refuses.
	 */
	const char *doc_keys;
	const char *help;
};

/* Check c->params against m's table: 0, or -1 with c's error set. */
int rpc_check_params(const struct rpc_method *m, struct rpc_call *c);

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
