/*
 * Between the admin socket's server (rpc.c), its dispatcher's helpers
 * (params.c, change.c, doc.c) and the methods (m_*.c, one file per kind of
 * object).  Admin thread only.
 *
 * A method is one of three kinds, and the dispatcher does what is common
 * to each once:
 *   - a reader (fn): answers from what runs;
 *   - an action (fn, change): acts on what runs (backstore.resize);
 *   - an edit (edit): changes the document only, through a struct change;
 *     the dispatcher plans the change (apply.c), answers the plan when
 *     dry_run is given and carries it out otherwise.
 * Every request is checked against its method's parameter table before
 * the method runs; "generation" (changes) and "dry_run" (edits) are the
 * dispatcher's, never in a table.
 */
#ifndef RPC_INT_H
#define RPC_INT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "target/config/config.h"
#include "target/control/rpc.h"

struct rpc_call {
	json_object *params;     /* an object (empty when the request had none) */
	json_object *result;     /* set by the method on success */
	int code;                /* RPC_* on failure */
	bool unchanged;          /* a change method that changed nothing (dry run, or nothing differed) */
	uid_t uid;               /* of the peer: root or isertd's own (isertd's own for HTTPS) */
	const struct rpc_who *who; /* HTTPS: its principal; NULL: the local socket */
	char msg[768];
};
/* Who made a request, for the log: "uid 0" or "principal NAME from [IP]:PORT" (lives as long as c). */
const char *rpc_who_label(const struct rpc_call *c, char *buf, size_t n);
/*
 * The least role that may call m over HTTPS (docs/admin.md "Roles"): a
 * reader's methods answer from what runs; operators also reset statistics,
 * close sessions and set ALUA states; everything else that changes isertd
 * is an admin's.
 */
struct rpc_method;
enum cfg_role rpc_method_role(const struct rpc_method *m);

/*
 * One named parameter of a method: unknown names, required ones, types
 * and integer bounds are refused by the dispatcher with the same words
 * every time; rpc.methods lists the tables and a test holds docs/admin.md
 * to them.  A method reads its parameters already checked (params.c).
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
	int64_t min, max;        /* RPC_P_INT; RPC_P_STR: max bytes (0: no bound but the request's) */
	bool secret;             /* holds a CHAP secret: masked wherever it is shown (config/secret.c) */
	const char *hint;        /* said after "required", or NULL */
};
#define P_STR(n, req)         { n, RPC_P_STR, req, 0, 0, false, NULL }
#define P_INT(n, req, lo, hi) { n, RPC_P_INT, req, lo, hi, false, NULL }
#define P_BOOL(n)             { n, RPC_P_BOOL, false, 0, 0, false, NULL }
#define P_VALUE(n)            { n, RPC_P_VALUE, false, 0, 0, false, NULL }
#define P_SECRET(n)           { n, RPC_P_VALUE, false, 0, 0, true, NULL }
#define P_TPG                 P_STR("target", true), P_INT("tag", true, 1, 65535)
#define P_END                 { NULL, RPC_P_VALUE, false, 0, 0, false, NULL }
/* An initiator name in its shown form (common/utf8.h): up to 4 bytes of text per byte of a 223-byte name. */
#define P_INITIATOR(req)      { "initiator", RPC_P_STR, req, 0, 1023, false, NULL }

struct change;
struct rpc_method {
	const char *name;
	int (*fn)(struct rpc_call *c);                      /* a reader or an action: 0, or -1 with code and msg set */
	int (*edit)(struct rpc_call *c, struct change *ch); /* an edit: 0, or -1 with code and msg set */
	bool change;             /* an action that changes the running configuration (edits always do) */
	const struct rpc_param *params;  /* ends with a NULL name */
	/*
	 * Also takes the keys its object has in the configuration file (a
	 * backstore's, a TPG's, ...): the loader checks those, and the method
	 * names what it refuses.
	 */
	const char *doc_keys;
	const char *help;
};
#define RPC_CHANGES(m) ((m)->edit || (m)->change)

/* The methods, one table per file of them, each ending with a NULL name. */
extern const struct rpc_method rpc_methods_config[], rpc_methods_backstore[], rpc_methods_target[],
	rpc_methods_acl[], rpc_methods_alua[], rpc_methods_session[], rpc_methods_cluster[], rpc_methods_fleet[];
/* Every method in turn: m = rpc_method_next(NULL) first, NULL after the last. */
const struct rpc_method *rpc_method_next(const struct rpc_method *m);
const struct rpc_method *rpc_method_named(const char *name);

/* params.c: check c->params against m's table (0, or -1 with c's error set); the answer to rpc.methods. */
int rpc_check_params(const struct rpc_method *m, struct rpc_call *c);
int rpc_unknown_param(struct rpc_call *c, const struct rpc_method *m, const char *k);
/* m's parameter names, comma-separated (and the dispatcher's it takes, when dispatcher_too). */
void rpc_param_list(const struct rpc_method *m, bool dispatcher_too, char *buf, size_t n);
bool rpc_has_param(const struct rpc_method *m, const char *name);
json_object *rpc_methods_json(void);
/* A parameter the table checked: NULL / dflt / false when absent. */
const char *rpc_str(const struct rpc_call *c, const char *key);
int64_t rpc_int(const struct rpc_call *c, const char *key, int64_t dflt);
bool rpc_bool(const struct rpc_call *c, const char *key);
/*
 * An initiator's name as the answers show it (its shown form, common/utf8.h:
 * "\xNN" for each byte that is not printable UTF-8, and for a backslash),
 * back to the bytes to match, in buf (1024 bytes: more than P_INITIATOR's
 * bound); NULL when absent.
 */
const char *rpc_initiator(const struct rpc_call *c, char buf[1024]);

/*
 * change.c: what an edit method changes, and the dispatcher's plan, dry
 * run and execution of it.  An edit either edits the running document
 * (change_doc: made on first use), or gives a whole configuration
 * (change_whole: apply, restore of a file), or adds one object and nothing
 * else (change_add_*): then the plan checks that object alone with the
 * loader's own code and appends it, so adding the 4000th LUN costs what the
 * first did; any other edit folds it into the document.
 */
json_object *change_doc(struct rpc_call *c, struct change *ch);    /* NULL: out of memory (error set) */
void change_whole(struct change *ch, struct config *n);            /* takes n */
void change_add_backstore(struct change *ch, json_object *b);      /* takes b */
void change_add_lun(struct change *ch, size_t ti, size_t gi, json_object *l); /* takes l */
int rpc_change(const struct rpc_method *m, struct rpc_call *c);

/*
 * m_fleet.c: in a fleet, an edit's configuration (cfg, the file's format)
 * becomes the fleet's document, planned on every gateway and committed
 * (or only planned: dry_run); the admin thread applies a newer document
 * when woken (rpc_fleet_wake).
 */
int fleet_edit(struct rpc_call *c, json_object *cfg, bool dry_run);
void fleet_catch_up(void);

/* doc.c: objects of a document (the running one, edited) found and changed. */
json_object *doc_array(json_object *o, const char *key);   /* o[key], made an empty array if missing */
/* The element of array a whose member key equals the string sv (or, sv NULL, the integer iv); index in *at. */
json_object *doc_find(json_object *a, const char *key, const char *sv, int64_t iv, size_t *at);
/* Target iqn of the change's document (NULL: none, or out of memory; error set). */
json_object *doc_target(struct rpc_call *c, struct change *ch, const char *iqn, size_t *at);
/* The TPG named by params target and tag in the change's document (NULL: error set). */
json_object *doc_tpg(struct rpc_call *c, struct change *ch, size_t *at);
/* Copy params but dry_run and those named in skip (NULL-terminated) into o: the loader checks them. */
void doc_merge(json_object *o, json_object *params, const char *const *skip);
bool doc_in_list(const char *const *l, const char *k);
/* The "alua" object of target t (iqn) in a document: the running one written out when t has none. */
json_object *doc_alua(struct rpc_call *c, json_object *t, const char *iqn);
/* ALUA group id of target t (iqn), or NULL (not found: error set). */
json_object *doc_alua_group(struct rpc_call *c, json_object *t, const char *iqn, int64_t id);
/* The running TPG named by params target and tag, its place in *ti, *gi (NULL: error set). */
const struct cfg_tpg *running_tpg(struct rpc_call *c, size_t *ti, size_t *gi);

/* What the methods share; set by rpc_start (or the fuzzer). */
struct rpc_state {
	char *config_path;       /* the file isertd was started with, or NULL */
	uint64_t generation;     /* changes applied so far + 1 */
	bool stopping;
};
extern struct rpc_state rpc_st;

/* Fill c's error (returns -1). */
int rpc_fail(struct rpc_call *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
