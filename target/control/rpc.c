/*
 * The admin socket's server: a unix stream socket (mode 0600), peers
 * checked with SO_PEERCRED (root or isertd's own uid), requests read as a
 * stream of JSON texts (each up to RPC_MAX_REQUEST bytes, nothing between
 * them but white space), one response per request, each followed by a
 * newline.  Requests are handled one at a time on this thread; a method
 * that needs the reactors asks them by message (fanout.c).
 */
#include "target/control/rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/utf8.h"
#include "target/runtime/runtime.h"
#include "target/scsi/alua/alua.h"
#include "target/control/rpc_int.h"
#include "target/control/https.h"
#include "target/fleet/fleet.h"

struct client {
	int fd;
	uid_t uid;
	json_tokener *tok;
	size_t req_bytes;        /* of the request being read */
	char *out;               /* response not yet written */
	size_t out_len, out_off;
	uint64_t last_ms;
	bool close_after;        /* once out is written */
	size_t discarded;        /* after a refusal that ends the connection: what is still read, and dropped */
	char in[16384];          /* read, not yet parsed (waits while an answer is being written) */
	size_t in_len;
};

static struct {
	int lfd, wakefd, reloadfd, fleetfd;
	char path[108];
	pthread_t th;
	bool running;
	struct client clients[RPC_MAX_CLIENTS];
	unsigned nclients;
} srv = { .lfd = -1, .wakefd = -1, .reloadfd = -1, .fleetfd = -1 };

/* scsi_alua_changes() when the running configuration last took the ALUA states (admin thread). */
static uint32_t alua_seen;

struct rpc_state rpc_st = { .generation = 1 };
bool rpc_plan_only;

int rpc_fail(struct rpc_call *c, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
	va_end(ap);
	c->code = code;
	return -1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * An answer as text.  JSON is UTF-8, but json-c passes a string's bytes
 * through as they are, and some strings are a peer's (an InitiatorName may
 * hold any byte but NUL): a byte that is not valid UTF-8 is written as the
 * text \xNN (the logs' escape), so every answer parses.  Such bytes can only
 * be inside strings: json-c writes everything else in ASCII.
 */
static char *answer_text(json_object *r)
{
	const unsigned char *t = (const unsigned char *)json_object_to_json_string_ext(
		r, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
	if (!t)
		return NULL;
	size_t n = strlen((const char *)t), bad = 0;
	for (size_t i = 0; i < n;) {
		size_t l = utf8_seq_len(t + i, n - i);
		bad += !l;
		i += l ? l : 1;
	}
	char *out = malloc(n + 4 * bad + 1), *o = out;
	for (size_t i = 0; out && i < n;) {
		size_t l = utf8_seq_len(t + i, n - i);
		if (l) {
			memcpy(o, t + i, l);
			o += l;
			i += l;
		} else {
			o += sprintf(o, "\\\\x%02x", t[i++]);
		}
	}
	if (out)
		*o = 0;
	config_wipe_text((const char *)t); /* json-c's copy (config.get with show_secrets holds them) */
	return out;
}

static char *error_text(json_object *id, int code, const char *msg)
{
	json_object *r = json_object_new_object(), *e = json_object_new_object();
	json_object_object_add(r, "jsonrpc", json_object_new_string("2.0"));
	json_object_object_add(e, "code", json_object_new_int(code));
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(r, "error", e);
	json_object_object_add(r, "id", id ? json_object_get(id) : NULL);
	char *s = answer_text(r);
	json_object_put(r);
	return s;
}

/* The methods by kind of object, each table beside its methods (m_*.c). */
static const struct rpc_method *const method_tables[] = { rpc_methods_config, rpc_methods_backstore,
							  rpc_methods_target, rpc_methods_acl,
							  rpc_methods_alua,   rpc_methods_session,
							  rpc_methods_cluster, rpc_methods_fleet };

static const struct rpc_method *table_end(const struct rpc_method *m)
{
	while (m->name)
		m++;
	return m;
}

const struct rpc_method *rpc_method_next(const struct rpc_method *m)
{
	size_t t = 0, n = sizeof(method_tables) / sizeof(method_tables[0]);
	if (m) {
		if ((++m)->name)
			return m;
		while (t < n && table_end(method_tables[t]) != m)
			t++;
		t++;
	}
	for (; t < n; t++)
		if (method_tables[t]->name)
			return method_tables[t];
	return NULL;
}

const struct rpc_method *rpc_method_named(const char *name)
{
	for (const struct rpc_method *m = rpc_method_next(NULL); m; m = rpc_method_next(m))
		if (!strcmp(m->name, name))
			return m;
	return NULL;
}

/* Methods whose role is not the one their kind gives (rpc_method_role). */
static const struct {
	const char *method;
	enum cfg_role role;
} role_of[] = {
	{ "stats.reset", CFG_ROLE_OPERATOR },   { "session.close", CFG_ROLE_OPERATOR },
	{ "alua.set", CFG_ROLE_OPERATOR },      { "save", CFG_ROLE_ADMIN }, /* writes a file of isertd's host */
};

enum cfg_role rpc_method_role(const struct rpc_method *m)
{
	for (size_t i = 0; i < sizeof(role_of) / sizeof(role_of[0]); i++)
		if (!strcmp(role_of[i].method, m->name))
			return role_of[i].role;
	return RPC_CHANGES(m) ? CFG_ROLE_ADMIN : CFG_ROLE_READER;
}

const char *rpc_who_label(const struct rpc_call *c, char *buf, size_t n)
{
	if (c->who)
		snprintf(buf, n, "principal %s from %s", c->who->name, c->who->from);
	else
		snprintf(buf, n, "uid %u", (unsigned)c->uid);
	return buf;
}

/* The target a request names: params target (most methods) or iqn (target.create, target.delete); NULL: none. */
static const char *named_target(const struct rpc_method *m, json_object *params)
{
	static const char *const keys[] = { "target", "iqn" };
	for (size_t i = 0; i < 2; i++) {
		json_object *v;
		if (rpc_has_param(m, keys[i]) && params && json_object_object_get_ex(params, keys[i], &v) &&
		    json_object_is_type(v, json_type_string))
			return json_object_get_string(v);
	}
	return NULL;
}

/* May who call m with params?  0, or -1 with msg filled. */
static int allowed(const struct rpc_who *who, const struct rpc_method *m, json_object *params, char *msg, size_t n)
{
	const struct cfg_principal *p = who->principal;
	enum cfg_role need = rpc_method_role(m);
	if (p->role < need) {
		snprintf(msg, n, "permission denied: principal %s has role %s, and %s needs %s", who->name,
			 config_role_name(p->role), m->name, config_role_name(need));
		return -1;
	}
	if (!p->targets || !strcmp(m->name, "rpc.methods"))
		return 0;
	const char *t = named_target(m, params);
	for (size_t i = 0; t && i < p->ntargets; i++)
		if (!strcmp(p->targets[i], t))
			return 0;
	if (t)
		snprintf(msg, n, "permission denied: principal %s may administer only its targets (%zu), and %.223s "
			 "is not one of them", who->name, p->ntargets, t);
	else
		snprintf(msg, n, "permission denied: principal %s may administer only its targets: %s must name one "
			 "(%s)", who->name, m->name, rpc_has_param(m, "target") || rpc_has_param(m, "iqn") ?
			 "give its target" : "it names no target, so it is not open to a principal limited to targets");
	return -1;
}

/* The audit line of a request that is more than a reader's (docs/security.md "Audit"). */
static void audit(const struct rpc_call *c, const struct rpc_method *m, json_object *params, int rc)
{
	char who[160], result[900];
	if (rc)
		snprintf(result, sizeof(result), "refused (%d): %s", c->code, c->msg);
	else if (RPC_CHANGES(m) && c->unchanged)
		snprintf(result, sizeof(result), "done, nothing changed, generation %llu",
			 (unsigned long long)rpc_st.generation);
	else
		snprintf(result, sizeof(result), "done, generation %llu", (unsigned long long)rpc_st.generation);
	json_object *shown = config_redacted(NULL, "params", params);
	/* The socket's words stay as they were ("admin (uid 0): ..."): scripts read them. */
	log_info("%s (%s): %s %.200s: %s", c->who ? "audit https" : "admin", rpc_who_label(c, who, sizeof(who)),
		 m->name, json_object_to_json_string_ext(shown, JSON_C_TO_STRING_PLAIN), result);
	json_object_put(shown);
}

/* A parsed request object -> response text (NULL: a notification, no answer); *code: the error's, or 0. */
static char *handle_obj(json_object *req, uid_t uid, const struct rpc_who *who, int *code)
{
	*code = 0;
	json_object *id = NULL, *v, *params = NULL;
	*code = RPC_INVALID_REQUEST; /* until the request is one */
	if (!json_object_is_type(req, json_type_object))
		return error_text(NULL, RPC_INVALID_REQUEST,
				  json_object_is_type(req, json_type_array) ? "batch requests are not supported: send one "
									      "request object at a time"
									    : "a request must be a JSON object");
	bool has_id = json_object_object_get_ex(req, "id", &id);
	if (has_id && id && !json_object_is_type(id, json_type_int) && !json_object_is_type(id, json_type_string))
		return error_text(NULL, RPC_INVALID_REQUEST, "id: must be a number or a string");
	if (!json_object_object_get_ex(req, "jsonrpc", &v) || !json_object_is_type(v, json_type_string) ||
	    strcmp(json_object_get_string(v), "2.0"))
		return error_text(id, RPC_INVALID_REQUEST, "jsonrpc: must be \"2.0\"");
	json_object_object_foreach(req, key, val)
	{
		(void)val;
		if (strcmp(key, "jsonrpc") && strcmp(key, "id") && strcmp(key, "method") && strcmp(key, "params")) {
			char m[128];
			snprintf(m, sizeof(m), "unknown member '%.40s' (a request has jsonrpc, method, params, id)", key);
			return error_text(id, RPC_INVALID_REQUEST, m);
		}
	}
	if (!json_object_object_get_ex(req, "method", &v) || !json_object_is_type(v, json_type_string))
		return error_text(id, RPC_INVALID_REQUEST, "method: must be a string");
	const char *name = json_object_get_string(v);
	if (json_object_object_get_ex(req, "params", &params) && !json_object_is_type(params, json_type_object))
		return error_text(id, *code = RPC_INVALID_PARAMS, "params: must be an object (named parameters)");
	*code = 0;
	const struct rpc_method *m = rpc_method_named(name);
	char *out = NULL;
	if (!m) {
		char msg[160];
		snprintf(msg, sizeof(msg), "unknown method '%.64s' (rpc.methods lists them)", name);
		out = error_text(id, *code = RPC_METHOD_NOT_FOUND, msg);
		goto done;
	}
	if (!who && uid != 0 && uid != geteuid()) {
		char msg[160];
		snprintf(msg, sizeof(msg), "permission denied: uid %u is neither root nor isertd's uid %u", (unsigned)uid,
			 (unsigned)geteuid());
		out = error_text(id, *code = RPC_PERMISSION, msg);
		goto done;
	}
	struct rpc_call c = { .params = params ? json_object_get(params) : json_object_new_object(), .uid = uid,
			      .who = who };
	if (who && allowed(who, m, params, c.msg, sizeof(c.msg))) {
		c.code = *code = RPC_PERMISSION;
		if (rpc_method_role(m) > CFG_ROLE_READER)
			audit(&c, m, c.params, -1);
		out = error_text(id, RPC_PERMISSION, c.msg);
		json_object_put(c.params);
		goto done;
	}
	if (__atomic_load_n(&rpc_st.stopping, __ATOMIC_RELAXED)) {
		json_object_put(c.params);
		out = error_text(id, *code = RPC_UNAVAILABLE, "isertd is shutting down");
		goto done;
	}
	int rc = 0;
	if (RPC_CHANGES(m) && json_object_object_get_ex(c.params, "generation", &v)) {
		int64_t g = json_object_get_int64(v);
		if (!json_object_is_type(v, json_type_int) || g < 1)
			rc = rpc_fail(&c, RPC_INVALID_PARAMS, "generation: must be a positive integer");
		else if ((uint64_t)g != rpc_st.generation)
			rc = rpc_fail(&c, RPC_STALE,
				      "stale generation %lld: the running configuration is at generation %llu; "
				      "read it again (config.get) and redo the change",
				      (long long)g, (unsigned long long)rpc_st.generation);
		json_object_object_del(c.params, "generation");
	}
	/* What SET TARGET PORT GROUPS or another gateway changed is part of the running configuration the method sees. */
	uint32_t alua = scsi_alua_changes();
	if (alua != alua_seen) {
		alua_seen = alua; /* read first: a change while copying is copied next time */
		scsi_alua_states_into(rt_config(), &rt_lock);
	}
	if (!rc)
		rc = rpc_check_params(m, &c);
	if (!rc)
		rc = m->edit ? rpc_change(m, &c) : m->fn(&c);
	if (!rc && RPC_CHANGES(m) && !c.unchanged) {
		rpc_st.generation++;
	}
	/* Every change and every operator's action, done or refused; the socket's, as before, when done. */
	if (rpc_method_role(m) > CFG_ROLE_READER && (who || (!rc && RPC_CHANGES(m) && !c.unchanged)))
		audit(&c, m, params ? params : c.params, rc);
	*code = rc ? c.code : 0;
	if (!has_id) {
		config_wipe_secrets(c.result);
		json_object_put(c.result);
	} else if (rc) {
		out = error_text(id, c.code, c.msg);
		json_object_put(c.result);
	} else {
		json_object *r = json_object_new_object();
		json_object_object_add(r, "jsonrpc", json_object_new_string("2.0"));
		json_object_object_add(r, "result", c.result ? c.result : json_object_new_object());
		json_object_object_add(r, "id", json_object_get(id));
		out = answer_text(r);
		config_wipe_secrets(r);
		json_object_put(r);
	}
	json_object_put(c.params);
	return out;
done:
	return has_id ? out : (free(out), NULL);
}

char *rpc_error_text(int code, const char *msg)
{
	return error_text(NULL, code, msg);
}

static char *handle_text(const char *req, size_t len, uid_t uid, const struct rpc_who *who, int *code);

char *rpc_handle(const char *req, size_t len, uid_t uid)
{
	int code;
	return handle_text(req, len, uid, NULL, &code);
}

char *rpc_handle_as(const char *req, size_t len, const struct rpc_who *who, int *code)
{
	return handle_text(req, len, geteuid(), who, code);
}

static char *handle_text(const char *req, size_t len, uid_t uid, const struct rpc_who *who, int *code)
{
	json_tokener *tok = json_tokener_new_ex(32);
	if (!tok)
		return error_text(NULL, RPC_INTERNAL, "out of memory");
	json_object *o = json_tokener_parse_ex(tok, req, (int)len);
	enum json_tokener_error e = json_tokener_get_error(tok);
	char *out;
	if (!o || (e != json_tokener_success)) {
		char msg[160];
		snprintf(msg, sizeof(msg), "not JSON: %s", e == json_tokener_continue ? "the text ends early"
											: json_tokener_error_desc(e));
		out = error_text(NULL, *code = RPC_PARSE_ERROR, msg);
	} else {
		out = handle_obj(o, uid, who, code);
	}
	config_wipe_secrets(o);
	json_object_put(o);
	json_tokener_free(tok);
	return out;
}

/* ------------------------------------------------------------------------ */
/* The socket. */

/* An answer may hold secrets (config.get with show_secrets). */
static void free_text(char *s, size_t len)
{
	if (s)
		explicit_bzero(s, len);
	free(s);
}

static void client_close(unsigned i)
{
	struct client *c = &srv.clients[i];
	close(c->fd);
	json_tokener_free(c->tok);
	free_text(c->out, c->out_len);
	srv.clients[i] = srv.clients[--srv.nclients];
	/* The slot kept what the last client's requests were (and the one moved, a copy of its own). */
	explicit_bzero(&srv.clients[srv.nclients], sizeof(srv.clients[0]));
}

static void client_queue(struct client *c, char *text)
{
	size_t n = strlen(text);
	char *o = malloc(n + 1);
	if (!o) {
		c->close_after = true;
		free_text(text, n);
		return;
	}
	memcpy(o, text, n);
	o[n] = '\n';
	free_text(text, n);
	c->out = o;
	c->out_len = n + 1;
	c->out_off = 0;
}

/* Feed what arrived to the tokener; at most one complete request is handled (its answer then goes out first). */
static size_t client_parse(struct client *c, const char *buf, size_t len)
{
	size_t used = 0;
	if (!c->req_bytes)
		while (used < len && strchr(" \t\r\n", buf[used]))
			used++;
	if (used == len)
		return used;
	size_t room = RPC_MAX_REQUEST - c->req_bytes, n = len - used;
	bool too_big = n > room;
	if (too_big)
		n = room;
	json_object *o = json_tokener_parse_ex(c->tok, buf + used, (int)n);
	enum json_tokener_error e = json_tokener_get_error(c->tok);
	if (e == json_tokener_continue) {
		c->req_bytes += n;
		if (too_big || c->req_bytes >= RPC_MAX_REQUEST) {
			char m[96];
			snprintf(m, sizeof(m), "request larger than %u bytes", RPC_MAX_REQUEST);
			client_queue(c, error_text(NULL, RPC_INVALID_REQUEST, m));
			c->close_after = true;
		}
		return used + n;
	}
	size_t end = json_tokener_get_parse_end(c->tok);
	json_tokener_reset(c->tok);
	c->req_bytes = 0;
	if (e != json_tokener_success || !o) {
		char m[128];
		snprintf(m, sizeof(m), "not JSON: %s", json_tokener_error_desc(e));
		client_queue(c, error_text(NULL, RPC_PARSE_ERROR, m));
		c->close_after = true; /* where the next request starts is unknown */
		return len;
	}
	int code;
	char *text = handle_obj(o, c->uid, NULL, &code);
	config_wipe_secrets(o); /* the request's (acl.add, apply with a document, ...) */
	json_object_put(o);
	if (text)
		client_queue(c, text);
	return used + end;
}

static void client_accept(void)
{
	int fd = accept4(srv.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (srv.nclients == RPC_MAX_CLIENTS) {
		char *t = error_text(NULL, RPC_UNAVAILABLE, "too many admin connections at once; try again");
		if (t && write(fd, t, strlen(t)) < 0) {
			/* closing anyway */
		}
		free(t);
		close(fd);
		return;
	}
	struct ucred cr;
	socklen_t sl = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &sl)) {
		close(fd);
		return;
	}
	struct client *c = &srv.clients[srv.nclients];
	*c = (struct client){ .fd = fd, .uid = cr.uid, .tok = json_tokener_new_ex(32), .last_ms = now_ms() };
	if (!c->tok) {
		close(fd);
		return;
	}
	srv.nclients++;
}

/* Handle what was read, up to the first request that has an answer to write. */
static void client_pump(struct client *c)
{
	size_t off = 0;
	while (off < c->in_len && !c->out && !c->close_after)
		off += client_parse(c, c->in + off, c->in_len - off);
	if (c->close_after)
		off = c->in_len;
	memmove(c->in, c->in + off, c->in_len - off);
	c->in_len -= off;
	/* What was handled (a request may carry a secret) is not left behind the rest. */
	explicit_bzero(c->in + c->in_len, off);
}

/* Write, then read and answer; false when the client is done. */
static bool client_io(struct client *c, short revents)
{
	if (c->out) {
		ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return false;
		if (n > 0) {
			c->out_off += (size_t)n;
			c->last_ms = now_ms();
		}
		if (c->out_off < c->out_len)
			return true;
		free_text(c->out, c->out_len);
		c->out = NULL;
		if (c->close_after) {
			/* Read what the peer still sends (bounded) so closing does not reset the answer away. */
			shutdown(c->fd, SHUT_WR);
			c->discarded = 1;
			return true;
		}
		/* Requests sent behind the one just answered. */
		client_pump(c);
		return !(c->close_after && !c->out);
	}
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return true;
	ssize_t n = read(c->fd, c->in, sizeof(c->in));
	if (c->discarded) {
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		explicit_bzero(c->in, (size_t)n);
		c->discarded += (size_t)n;
		return n > 0 && c->discarded < 4 * RPC_MAX_REQUEST;
	}
	if (n == 0 && c->req_bytes) {
		/* The peer stopped sending in the middle of a request: say so before closing. */
		client_queue(c, error_text(NULL, RPC_PARSE_ERROR, "not JSON: the text ends early"));
		c->close_after = true;
		return c->out != NULL;
	}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		return false;
	if (n < 0)
		return true;
	c->last_ms = now_ms();
	c->in_len = (size_t)n;
	client_pump(c);
	return !(c->close_after && !c->out);
}

/* SIGHUP: the file isertd was started with becomes the running configuration (as apply). */
static void reload(void)
{
	https_reload(); /* certificates and token hashes, whatever the configuration does */
	if (fleet_active()) {
		log_info("SIGHUP: reading the fleet's document again");
		fleet_catch_up();
		return;
	}
	if (!rpc_st.config_path) {
		log_warn("SIGHUP: isertd runs the embedded default configuration, there is no file to apply");
		return;
	}
	char req[4200];
	json_object *p = json_object_new_string(rpc_st.config_path);
	snprintf(req, sizeof(req), "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"apply\",\"params\":{\"path\":%s}}",
		 json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(p);
	char *out = rpc_handle(req, strlen(req), geteuid());
	json_object *r = out ? json_tokener_parse(out) : NULL, *e, *m;
	if (r && json_object_object_get_ex(r, "error", &e) && json_object_object_get_ex(e, "message", &m))
		log_err("SIGHUP: %s not applied: %s", rpc_st.config_path, json_object_get_string(m));
	else
		log_info("SIGHUP: %s applied", rpc_st.config_path);
	json_object_put(r);
	free(out);
}

void rpc_reload(void)
{
	uint64_t one = 1;
	if (srv.reloadfd < 0 || write(srv.reloadfd, &one, sizeof(one)) != sizeof(one))
		log_warn("SIGHUP: the admin thread is not running; nothing reloaded");
}

/* Another gateway of the fleet wrote a new generation (or one may have been missed): apply it here. */
void rpc_fleet_wake(void)
{
	uint64_t one = 1;
	if (srv.fleetfd < 0 || write(srv.fleetfd, &one, sizeof(one)) != sizeof(one))
		log_warn("fleet: the admin thread is not running; the new generation is applied once it is");
}

#define FIXED_FDS 5 /* wake, listen, reload, fleet, the HTTPS door's */

static void *rpc_thread(void *arg)
{
	(void)arg;
	struct pollfd pf[RPC_MAX_CLIENTS + FIXED_FDS];
	for (;;) {
		pf[0] = (struct pollfd){ .fd = srv.wakefd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = srv.lfd, .events = POLLIN }; /* -1 (ignored): no socket */
		pf[2] = (struct pollfd){ .fd = srv.reloadfd, .events = POLLIN };
		pf[3] = (struct pollfd){ .fd = srv.fleetfd, .events = POLLIN };
		pf[4] = (struct pollfd){ .fd = https_fd(), .events = POLLIN };
		for (unsigned i = 0; i < srv.nclients; i++)
			pf[i + FIXED_FDS] = (struct pollfd){ .fd = srv.clients[i].fd,
						     .events = srv.clients[i].out ? POLLOUT : POLLIN };
		unsigned n = srv.nclients;
		int rc = poll(pf, n + FIXED_FDS, https_timeout_ms(1000));
		if (rc < 0 && errno != EINTR)
			break;
		if (pf[0].revents)
			break;
		if (rc > 0 && pf[2].revents) {
			uint64_t v;
			if (read(srv.reloadfd, &v, sizeof(v)) == sizeof(v))
				reload();
		}
		if (rc > 0 && pf[3].revents) {
			uint64_t v;
			if (read(srv.fleetfd, &v, sizeof(v)) == sizeof(v))
				fleet_catch_up();
		}
		uint64_t now = now_ms();
		for (unsigned i = n; i-- > 0;) {
			struct client *c = &srv.clients[i];
			bool keep = rc > 0 && pf[i + FIXED_FDS].revents ? client_io(c, pf[i + FIXED_FDS].revents) : true;
			if (keep && c->last_ms + RPC_IDLE_MS < now)
				keep = false;
			if (!keep)
				client_close(i);
		}
		if (rc > 0 && (pf[1].revents & POLLIN))
			client_accept();
		https_run(); /* its timers too: MHD's, and each connection's deadline */
	}
	while (srv.nclients)
		client_close(srv.nclients - 1);
	https_stop();
	return NULL;
}

/* 0: free to bind (a stale socket file was removed); -EADDRINUSE: a live server answers there. */
static int claim_path(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st)) {
		if (errno == ENOENT)
			return 0;
		snprintf(err, errlen, "admin socket %s: %s", path, strerror(errno));
		return -errno;
	}
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "admin socket %s: exists and is not a socket", path);
		return -EEXIST;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	int rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	if (fd >= 0)
		close(fd);
	if (!rc) {
		snprintf(err, errlen, "admin socket %s: another isertd serves it", path);
		return -EADDRINUSE;
	}
	if (e != ECONNREFUSED) {
		snprintf(err, errlen, "admin socket %s: %s", path, strerror(e));
		return -e;
	}
	unlink(path); /* left by a process that is gone */
	return 0;
}

static int start_thread(char *err, size_t errlen)
{
	srv.wakefd = eventfd(0, EFD_CLOEXEC);
	srv.reloadfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	srv.fleetfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv.wakefd < 0 || srv.reloadfd < 0 || srv.fleetfd < 0 || pthread_create(&srv.th, NULL, rpc_thread, NULL)) {
		snprintf(err, errlen, "admin socket: cannot start its thread");
		rpc_stop();
		return -ENOMEM;
	}
	srv.running = true;
	return 0;
}

int rpc_start(struct config *cfg, const char *path, const char *config_path, char *err, size_t errlen)
{
	int hrc = https_prepare(cfg, err, errlen);
	if (hrc)
		return hrc;
	https_commit(); /* the admin thread starts it */
	bool asked = path || cfg->admin_socket;
	if (!path)
		path = cfg->admin_socket ? cfg->admin_socket : RPC_DEFAULT_SOCKET;
	rpc_st.config_path = config_path ? realpath(config_path, NULL) : NULL;
	if (!*path || !strcmp(path, "none"))
		return start_thread(err, errlen); /* SIGHUP still applies the file */
	if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		snprintf(err, errlen, "admin socket %s: longer than 107 bytes", path);
		return -ENAMETOOLONG;
	}
	int rc = claim_path(path, err, errlen);
	if (rc && !asked) {
		log_warn("%s; running without an admin socket (give another with --admin-socket)", err);
		err[0] = 0;
		return start_thread(err, errlen);
	}
	if (rc)
		return rc;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	srv.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (srv.lfd < 0) {
		snprintf(err, errlen, "admin socket: %s", strerror(errno));
		return -errno;
	}
	mode_t old = umask(0177); /* the socket is born 0600: no window where others could connect */
	rc = bind(srv.lfd, (struct sockaddr *)&sa, sizeof(sa));
	int e = errno;
	umask(old);
	if (rc || listen(srv.lfd, 16)) {
		e = rc ? e : errno;
		snprintf(err, errlen, "admin socket %s: %s", path, strerror(e));
		close(srv.lfd);
		srv.lfd = -1;
		return -e;
	}
	snprintf(srv.path, sizeof(srv.path), "%s", path);
	rc = start_thread(err, errlen);
	if (!rc)
		log_info("admin socket %s", path);
	return rc;
}

void rpc_shutdown(void)
{
	__atomic_store_n(&rpc_st.stopping, true, __ATOMIC_RELAXED);
}

void rpc_stop(void)
{
	if (srv.running) {
		uint64_t one = 1;
		if (write(srv.wakefd, &one, sizeof(one)) < 0)
			log_warn("admin socket: cannot wake its thread: %s", strerror(errno));
		pthread_join(srv.th, NULL);
		srv.running = false;
	}
	if (srv.lfd >= 0) {
		close(srv.lfd);
		unlink(srv.path);
		srv.lfd = -1;
	}
	if (srv.wakefd >= 0)
		close(srv.wakefd);
	if (srv.reloadfd >= 0)
		close(srv.reloadfd);
	if (srv.fleetfd >= 0)
		close(srv.fleetfd);
	srv.wakefd = srv.reloadfd = srv.fleetfd = -1;
	https_stop(); /* when the thread never ran */
	free(rpc_st.config_path);
	rpc_st.config_path = NULL;
}
