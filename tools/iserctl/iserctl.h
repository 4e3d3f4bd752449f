/* What iserctl.c shares with the commands kept in their own files (stats.c). */
#ifndef ISERCTL_H
#define ISERCTL_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

enum { EX_OK, EX_REFUSED, EX_USAGE, EX_UNREACHABLE, EX_NOTFOUND, EX_STALE, EX_DROPPED };

extern bool as_json;
extern int64_t generation; /* -g N: the change is refused unless still at N; 0 when not given */

/* One method call; result (owned by the caller) or an exit status with the message printed. */
int call(const char *method, json_object *params, json_object **result);
void print_json(json_object *o);
json_object *get(json_object *o, const char *k);
/*
 * What iserctl prints of the target's strings is safe for a terminal
 * (tools/adminrpc/escape.h; a peer's name comes in its shown form already):
 * no string reaches the terminal as an escape sequence.  gets: member k of
 * o shown (dflt when absent);
 * shown_of: a string object shown (both live as long as the object);
 * shown: any text shown (lives until 8 more calls).
 */
const char *gets(json_object *o, const char *k, const char *dflt);
const char *shown_of(json_object *v);
const char *shown(const char *s);
int die_usage(const char *fmt, const char *arg);

/* A change method: its plan and outcome printed (--dry-run, --json honoured); the exit status. */
int run_change(const char *what, const char *method, json_object *params);
/* A change's plan, a step a line, each line begun with indent. */
void print_plan(json_object *plan, const char *indent);
/* A document written with mode 0600 (it may hold CHAP secrets) to out (a temporary file renamed over it), or to
 * stdout when out is NULL; who names the command in its messages; 0 or the exit status. */
int write_doc(const char *who, const char *out, const char *text);

/*
 * value.c: a KEY=VALUE argument's value as JSON: the JSON the whole text is
 * (strict: numbers, true, false, null (NULL), "strings", arrays, objects),
 * else the text as a string.
 */
json_object *arg_value(const char *v);

/* call.c: iserctl call METHOD [JSON-OBJECT | KEY=VALUE...] */
int cmd_call(int argc, char **argv);

/* alua.c */
int cmd_alua(int argc, char **argv);

/* cluster.c */
int cmd_cluster(int argc, char **argv);

/* fleet.c: cluster status|import|export (else cmd_cluster), gateway add|remove|list */
int cmd_cluster_fleet(int argc, char **argv);
int cmd_gateway(int argc, char **argv);
/* A change's "fleet" member (each gateway's plan, or its result): nothing when fleet is NULL. */
void print_fleet(json_object *fleet);

/* import.c: iserctl import lio|tgt FILE (EX_DROPPED: written, some items not carried) */
int cmd_import(int argc, char **argv);

/* remote.c: --url and its options (else the environment's ISERCTL_*), checked once options are read */
struct admin_endpoint;
struct remote_args {
	const char *url, *cacert, *cert, *key, *token_file;
	bool socket_given;
};
/* ep's url, cacert, cert, key and token from a and the environment; EX_OK or EX_USAGE (said why). */
int remote_setup(const struct remote_args *a, struct admin_endpoint *ep);
/* The token of --token-file read (once, at the first call); EX_OK or EX_USAGE (said why). */
int remote_token(struct admin_endpoint *ep);

/* token.c: iserctl token create TOKEN_FILE HASH_FILE | token hash TOKEN_FILE (no isertd needed) */
int cmd_token(int argc, char **argv);

/* stats.c */
int cmd_stats(int argc, char **argv);
int cmd_top(int argc, char **argv);

#endif
