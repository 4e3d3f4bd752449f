/*
 * A gateway of a fleet (fleet.h): the document in RADOS, watched; what
 * this gateway answers when another one plans a change, commits it or
 * asks where it stands; the copy of the last document applied.
 *
 * The document is the object isert_config.NAME in the pool named; its
 * object version is the fleet's generation.  It is written only by a
 * write op asserting that version (as the shared reservation state,
 * docs/cluster.md), so of two changes planned on one generation one is
 * written and the other is told.  Every gateway watches it; one
 * notification carries each step, and each gateway's acknowledgement
 * carries its answer (librados notify replies):
 *
 *   {"op": "plan", "doc": ...}   -> {"gateway", "ok", "error", "plan": [steps]}
 *   {"op": "commit"}             -> {"gateway", "received": true}, then it applies the document (admin thread)
 *   {"op": "ask"}                -> {"gateway", "generation", "ok", "error", "cached", "fenced"}
 *
 * Answers are made on librados' thread from this module's copy of what
 * runs (never from the running configuration, which the admin thread
 * changes), so a gateway answers while its own admin thread waits for the
 * others: two admins planning at once through two gateways never wait for
 * each other.
 */
#include "target/fleet/fleet.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "target/config/config.h"
#include "target/config/fleet.h"
#include "target/scsi/shared/shared.h"

#define FLEET_NOTIFY_MS    (FLEET_ANSWER_S * 1000)
#define FLEET_RETRY_S      5      /* reconnecting, watching again */
#define FLEET_RECHECK_S    30     /* the admin thread reads the document again, in case a notification was lost */
#define FLEET_CONNECT_S    "10"   /* rados_connect: how long the monitors may take unless ceph.conf says */

int fleet_opts_check(const struct fleet_opts *o, char *err, size_t errlen)
{
	const char *slash = o->cluster ? strchr(o->cluster, '/') : NULL;
	if (!slash || slash == o->cluster || !config_fleet_name_ok(slash + 1) || slash - o->cluster > 255) {
		snprintf(err, errlen, "--cluster: expected POOL/NAME (NAME: 1-%d characters of A-Z a-z 0-9 . _ -), "
			 "got '%s'", FLEET_NAME_MAX, o->cluster ? o->cluster : "");
		return -EINVAL;
	}
	if (!o->gateway || !config_fleet_name_ok(o->gateway)) {
		snprintf(err, errlen, "--gateway: expected this gateway's name in the fleet (1-%d characters of "
			 "A-Z a-z 0-9 . _ -), got '%s'", FLEET_NAME_MAX, o->gateway ? o->gateway : "(none)");
		return -EINVAL;
	}
	if (o->state_dir && !config_valid_state_dir(o->state_dir)) {
		snprintf(err, errlen, "--state-dir: expected an absolute path or none, got '%s'", o->state_dir);
		return -EINVAL;
	}
	return 0;
}

#if ISERT_RBD
#include "target/backstore/rbd_int.h"

static struct {
	pthread_mutex_t mu;
	bool active, stop, connected, watching, cached, fenced;
	bool watched;           /* cookie is a watch librados holds (broken or not): unwatched before the next */
	char pool[256], name[FLEET_NAME_MAX + 1], gw[FLEET_NAME_MAX + 1], obj[96], where[360];
	char conf[PATH_MAX], id[64], keyring[PATH_MAX], cache[PATH_MAX];
	char *state_dir, *metrics; /* from the command line, or NULL */
	rados_t rados;
	rados_ioctx_t io;
	uint64_t cookie;
	json_object *doc;       /* applied */
	uint64_t generation;
	char last_error[512];   /* the last thing that went wrong: reaching the cluster, or applying */
	bool apply_failed;      /* the newest generation could not be applied here */
	pthread_t th;
	bool th_running;
	void (*wake)(void);
	/* Who answered before, by Ceph client id: one that no longer answers is named (admin thread only). */
	struct {
		uint64_t id;
		char name[FLEET_NAME_MAX + 1];
	} seen[2 * FLEET_MAX_GATEWAYS];
	unsigned nseen;
} f = { .mu = PTHREAD_MUTEX_INITIALIZER };

bool fleet_active(void)
{
	return f.active;
}

const char *fleet_gateway(void)
{
	return f.active ? f.gw : NULL;
}

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...)
{
	va_list ap;
	pthread_mutex_lock(&f.mu);
	va_start(ap, fmt);
	vsnprintf(f.last_error, sizeof(f.last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&f.mu);
}

/* ------------------------------------------------------------------------ */
/* The cluster. */

static int connect_cluster(char *err, size_t errlen)
{
	char name[80];
	rados_t r;
	snprintf(name, sizeof(name), "client.%s", f.id[0] ? f.id : "admin");
	int rc = rados_create2(&r, "ceph", name, 0);
	if (rc < 0) {
		snprintf(err, errlen, "Ceph client %s: %s", name, strerror(-rc));
		return rc;
	}
	char v[64];
	if ((rc = rados_conf_read_file(r, f.conf[0] ? f.conf : NULL)) < 0)
		snprintf(err, errlen, "--ceph-conf %.256s: cannot read it: %s", f.conf[0] ? f.conf : "(librados' search)",
			 strerror(-rc));
	else if (f.keyring[0] && (rc = rados_conf_set(r, "keyring", f.keyring)) < 0)
		snprintf(err, errlen, "--keyring %.256s: %s", f.keyring, strerror(-rc));
	else if ((rados_conf_get(r, "client_mount_timeout", v, sizeof(v)) || strtod(v, NULL) == 300) &&
		 (rc = rados_conf_set(r, "client_mount_timeout", FLEET_CONNECT_S)) < 0)
		snprintf(err, errlen, "client_mount_timeout: %s", strerror(-rc));
	else if ((rc = rados_connect(r)) < 0)
		snprintf(err, errlen, "cannot connect to the cluster as %s (conf %.256s): %s", name,
			 f.conf[0] ? f.conf : "by librados' search", strerror(-rc));
	else if ((rc = rados_ioctx_create(r, f.pool, &f.io)) < 0)
		snprintf(err, errlen, "pool '%s': %s", f.pool, rc == -ENOENT ? "no such pool" : strerror(-rc));
	if (rc < 0) {
		rados_shutdown(r);
		return rc;
	}
	f.rados = r;
	f.connected = true;
	return 0;
}

/* The document's text and its version (*text malloc'd); -ENOENT when there is none. */
static int read_doc(char **text, uint64_t *version)
{
	uint64_t size;
	int rc;
	*text = NULL;
	for (int tries = 0; tries < 4; tries++) {
		if ((rc = rados_stat(f.io, f.obj, &size, NULL)) < 0)
			return rc;
		if (size > FLEET_DOC_MAX)
			return -EFBIG;
		char *buf = malloc(size + 2);
		if (!buf)
			return -ENOMEM;
		/* A read of one byte more that fills it saw the object grow between the two: read again. */
		rados_read_op_t op = rados_create_read_op();
		size_t got = 0;
		int prval = 0;
		rados_read_op_assert_exists(op);
		rados_read_op_read(op, 0, size + 1, buf, &got, &prval);
		rc = rados_read_op_operate(op, f.io, f.obj, 0);
		rados_release_read_op(op);
		if (rc == 0 && prval == 0 && got <= size) {
			buf[got] = 0;
			*text = buf;
			*version = rados_get_last_version(f.io);
			return 0;
		}
		free(buf);
		if (rc < 0)
			return rc;
	}
	return -EAGAIN;
}

static json_object *parse(const char *text, size_t len)
{
	json_tokener *tok = len <= FLEET_DOC_MAX ? json_tokener_new_ex(64) : NULL;
	if (tok) /* as the configuration loader reads a file */
		json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	json_object *o = tok ? json_tokener_parse_ex(tok, text, (int)len) : NULL;
	if (tok && json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		o = NULL;
	}
	if (tok)
		json_tokener_free(tok);
	return o;
}

/* The document as it is in the cluster, checked: 0, -ENOENT, or <0 (err). */
static int fetch(json_object **doc, uint64_t *version, char *err, size_t errlen)
{
	char *text;
	int rc = read_doc(&text, version);
	if (rc == -ENOENT) {
		snprintf(err, errlen, "the fleet's document %s does not exist: make it (iserctl cluster import) and "
			 "store it (rados -p %s put %s FILE)", f.where, f.pool, f.obj);
		return rc;
	}
	if (rc == -EFBIG) {
		snprintf(err, errlen, "%s is larger than the %u bytes a fleet's document may be", f.where, FLEET_DOC_MAX);
		return -EINVAL; /* what the cluster says is wrong: no kept copy stands in for it */
	}
	if (rc < 0) {
		snprintf(err, errlen, "reading %s: %s", f.where, strerror(-rc));
		return rc;
	}
	json_object *o = parse(text, strlen(text));
	free(text);
	char e[512];
	if (!o) {
		snprintf(err, errlen, "%s (generation %llu): not JSON", f.where, (unsigned long long)*version);
		return -EINVAL;
	}
	if ((rc = config_fleet_check(o, e, sizeof(e)))) {
		snprintf(err, errlen, "%s (generation %llu): %s", f.where, (unsigned long long)*version, e);
		json_object_put(o);
		return rc;
	}
	*doc = o;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* The copy kept in the state folder (0600: a gateway's configuration may name its secret files). */

static int cache_write(json_object *doc, uint64_t generation)
{
	if (!f.cache[0])
		return 0;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "format", json_object_new_string("isert-fleet-copy"));
	char cluster[sizeof(f.pool) + sizeof(f.name) + 1];
	snprintf(cluster, sizeof(cluster), "%s/%s", f.pool, f.name);
	json_object_object_add(o, "cluster", json_object_new_string(cluster));
	json_object_object_add(o, "object", json_object_new_string(f.where));
	json_object_object_add(o, "generation", json_object_new_uint64(generation));
	json_object_object_add(o, "document", json_object_get(doc));
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.new", f.cache);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), rc = 0;
	size_t len = strlen(s);
	if (fd < 0 || write(fd, s, len) != (ssize_t)len || fsync(fd) || rename(tmp, f.cache))
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc) {
		unlink(tmp);
		log_warn("fleet: cannot keep generation %llu in %s: %s (a restart without the cluster will serve "
			 "an older copy, or none)", (unsigned long long)generation, f.cache, strerror(-rc));
	}
	json_object_put(o);
	return rc;
}

static int cache_read(json_object **doc, uint64_t *generation, char *err, size_t errlen)
{
	if (!f.cache[0]) {
		snprintf(err, errlen, "no copy is kept (state folder none)");
		return -ENOENT;
	}
	json_object *o = json_object_from_file(f.cache), *d, *g;
	char e[512];
	int rc = -EINVAL;
	if (!o)
		snprintf(err, errlen, "no copy in %.256s: %s", f.cache, access(f.cache, F_OK) ? "none kept yet" : "not JSON");
	else if (!json_object_object_get_ex(o, "document", &d) || !json_object_object_get_ex(o, "generation", &g))
		snprintf(err, errlen, "%.256s: not a copy of a fleet's document", f.cache);
	else if (config_fleet_check(d, e, sizeof(e)))
		snprintf(err, errlen, "%.256s: %.200s", f.cache, e);
	else
		rc = 0;
	if (!rc) {
		*doc = json_object_get(d);
		*generation = (uint64_t)json_object_get_int64(g);
	}
	json_object_put(o);
	return rc;
}

/* ------------------------------------------------------------------------ */
/* What this gateway answers. */

/* Can this host serve the portal?  A specific address must be one of its own (bound to port 0 to find out). */
static int portal_here(json_object *p, char *err, size_t errlen)
{
	json_object *ip = NULL, *iser = NULL;
	json_object_object_get_ex(p, "ip", &ip);
	json_object_object_get_ex(p, "iser", &iser);
	const char *a = json_object_get_string(ip);
	if (json_object_get_boolean(iser)) {
		DIR *d = opendir("/sys/class/infiniband");
		struct dirent *e;
		bool any = false;
		while (d && (e = readdir(d)))
			any |= e->d_name[0] != '.';
		if (d)
			closedir(d);
		if (!any) {
			snprintf(err, errlen, "portal %s is iSER and this host has no RDMA device (/sys/class/infiniband "
				 "is empty)", a ? a : "?");
			return -ENODEV;
		}
	}
	struct sockaddr_storage ss = { 0 };
	socklen_t sl;
	if (a && inet_pton(AF_INET, a, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		ss.ss_family = AF_INET;
		sl = sizeof(struct sockaddr_in);
	} else if (a && inet_pton(AF_INET6, a, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		ss.ss_family = AF_INET6;
		sl = sizeof(struct sockaddr_in6);
	} else {
		return 0; /* the loader names what is wrong with it */
	}
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;
	if (fd >= 0 && bind(fd, (struct sockaddr *)&ss, sl) && errno == EADDRNOTAVAIL) {
		snprintf(err, errlen, "portal %s: no such address on this host", a);
		rc = -EADDRNOTAVAIL;
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Gateway gw's configuration in doc, loaded with the file's rules, as the plan compares it (NULL: err). */
static json_object *loaded(json_object *doc, struct config **cfg, char *err, size_t errlen)
{
	json_object *c = NULL;
	int rc = config_fleet_compose(doc, f.gw, &c, err, errlen);
	if (!rc) {
		fleet_cmdline_into(c);
		rc = config_load_doc(c, "the fleet's change", cfg, err, errlen);
	}
	if (rc) {
		json_object_put(c);
		return NULL;
	}
	return c;
}

static json_object *answer_plan(json_object *doc)
{
	json_object *a = json_object_new_object(), *steps = json_object_new_array();
	char err[768] = "";
	struct config *n = NULL, *cur = NULL;
	json_object_object_add(a, "gateway", json_object_new_string(f.gw));
	json_object *c = NULL;
	if (config_fleet_check(doc, err, sizeof(err))) { /* the planning gateway checked it; this one reads it anyway */
		json_object_object_add(a, "ok", json_object_new_boolean(false));
		json_object_object_add(a, "error", json_object_new_string(err));
		json_object_object_add(a, "plan", steps);
		return a;
	}
	if (config_fleet_compose(doc, f.gw, &c, err, sizeof(err)) == -ENOENT) {
		/* Removed from the fleet: it leaves (fleet_catch_up), which it always can. */
		config_step(steps, "leave", "/", NULL);
		json_object_object_add(a, "ok", json_object_new_boolean(true));
		json_object_object_add(a, "plan", steps);
		return a;
	}
	json_object_put(c);
	c = loaded(doc, &n, err, sizeof(err));
	int rc = c ? 0 : -EINVAL;
	json_object *tg = NULL;
	if (!rc && json_object_object_get_ex(c, "targets", &tg))
		for (size_t i = 0; !rc && i < json_object_array_length(tg); i++) {
			json_object *tpgs = NULL, *t = json_object_array_get_idx(tg, i);
			json_object_object_get_ex(t, "tpgs", &tpgs);
			for (size_t k = 0; !rc && tpgs && k < json_object_array_length(tpgs); k++) {
				json_object *ps = NULL;
				json_object_object_get_ex(json_object_array_get_idx(tpgs, k), "portals", &ps);
				for (size_t j = 0; !rc && ps && j < json_object_array_length(ps); j++)
					rc = portal_here(json_object_array_get_idx(ps, j), err, sizeof(err));
			}
		}
	if (!rc) {
		/* What it changes here: the configuration it runs against the new one. */
		pthread_mutex_lock(&f.mu);
		json_object *od = json_object_get(f.doc);
		pthread_mutex_unlock(&f.mu);
		char e2[512];
		json_object *oc = od ? loaded(od, &cur, e2, sizeof(e2)) : NULL;
		json_object *ja = cur ? config_to_obj_compare(cur) : json_object_new_object(), *jb = config_to_obj_compare(n);
		config_diff(steps, ja, jb);
		config_wipe_secrets(ja);
		config_wipe_secrets(jb);
		json_object_put(ja);
		json_object_put(jb);
		json_object_put(oc);
		json_object_put(od);
	}
	json_object_put(c);
	config_free(n);
	config_free(cur);
	json_object_object_add(a, "ok", json_object_new_boolean(!rc));
	json_object_object_add(a, "error", rc ? json_object_new_string(err) : NULL);
	json_object_object_add(a, "plan", steps);
	return a;
}

static json_object *answer_ask(void)
{
	json_object *a = json_object_new_object();
	pthread_mutex_lock(&f.mu);
	json_object_object_add(a, "gateway", json_object_new_string(f.gw));
	json_object_object_add(a, "generation", json_object_new_uint64(f.generation));
	json_object_object_add(a, "ok", json_object_new_boolean(!f.apply_failed));
	json_object_object_add(a, "error", f.last_error[0] ? json_object_new_string(f.last_error) : NULL);
	json_object_object_add(a, "cached", json_object_new_boolean(f.cached));
	json_object_object_add(a, "fenced", json_object_new_boolean(f.fenced || shared_fenced_any()));
	json_object_object_add(a, "pid", json_object_new_int((int)getpid()));
	pthread_mutex_unlock(&f.mu);
	return a;
}

static void on_notify(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier, void *data, size_t len)
{
	(void)arg;
	(void)handle;
	(void)notifier;
	json_object *m = parse(data, len), *op = NULL, *doc = NULL, *a = NULL;
	json_object_object_get_ex(m, "op", &op);
	const char *o = json_object_get_string(op);
	if (o && !strcmp(o, "plan") && json_object_object_get_ex(m, "doc", &doc)) {
		a = answer_plan(doc);
	} else if (o && !strcmp(o, "commit")) {
		a = json_object_new_object();
		json_object_object_add(a, "gateway", json_object_new_string(f.gw));
		json_object_object_add(a, "received", json_object_new_boolean(true));
		if (f.wake)
			f.wake();
	} else if (o && !strcmp(o, "ask")) {
		a = answer_ask();
	}
	const char *s = a ? json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN) : "";
	rados_notify_ack(f.io, f.obj, notify_id, f.cookie, s, (int)strlen(s));
	json_object_put(a);
	json_object_put(m);
}

static void on_watch_error(void *arg, uint64_t cookie, int err)
{
	(void)arg;
	(void)cookie;
	pthread_mutex_lock(&f.mu);
	f.watching = false;
	/* A blocklisted client's watch ends with ESHUTDOWN (EBLOCKLISTED): this gateway was fenced. */
	if (err == -ESHUTDOWN)
		f.fenced = true;
	pthread_mutex_unlock(&f.mu);
	log_warn("fleet: the watch of %s broke (%s)%s; watching it again", f.where, strerror(-err),
		 err == -ESHUTDOWN ? ": this gateway's Ceph client is blocklisted (fenced)" : "");
}

/* ------------------------------------------------------------------------ */
/* Joining, and staying joined. */

int fleet_start(const struct fleet_opts *o, json_object **out, char *err, size_t errlen)
{
	int rc = fleet_opts_check(o, err, errlen);
	if (rc)
		return rc;
	const char *slash = strchr(o->cluster, '/');
	snprintf(f.pool, sizeof(f.pool), "%.*s", (int)(slash - o->cluster), o->cluster);
	snprintf(f.name, sizeof(f.name), "%s", slash + 1);
	snprintf(f.gw, sizeof(f.gw), "%s", o->gateway);
	snprintf(f.obj, sizeof(f.obj), "isert_config.%s", f.name);
	snprintf(f.where, sizeof(f.where), "%s/%s", f.pool, f.obj);
	snprintf(f.conf, sizeof(f.conf), "%s", o->conf ? o->conf : "");
	snprintf(f.id, sizeof(f.id), "%s", o->id ? o->id : "");
	snprintf(f.keyring, sizeof(f.keyring), "%s", o->keyring ? o->keyring : "");
	const char *dir = o->state_dir ? o->state_dir : CONFIG_DEFAULT_STATE_DIR;
	if (strcmp(dir, "none"))
		snprintf(f.cache, sizeof(f.cache), "%s/fleet-%s.json", dir, f.name);
	f.state_dir = o->state_dir ? strdup(o->state_dir) : NULL;
	f.metrics = o->metrics ? strdup(o->metrics) : NULL;
	f.active = true;

	json_object *doc = NULL;
	uint64_t gen = 0;
	char why[512] = "";
	rc = connect_cluster(why, sizeof(why));
	if (!rc) {
		rc = fetch(&doc, &gen, err, errlen);
		if (rc == -ENOENT || rc == -EINVAL)
			return rc; /* the cluster answered: no copy stands in for what it says */
		if (rc)
			snprintf(why, sizeof(why), "%s", err);
	}
	if (rc) {
		char e2[512];
		if (cache_read(&doc, &gen, e2, sizeof(e2))) {
			snprintf(err, errlen, "fleet %s: %s; and %s", f.where, why, e2);
			return rc;
		}
		f.cached = true;
		set_error("%s", why);
		log_warn("fleet %s: %s: serving the copy of generation %llu kept in %s until the cluster answers",
			 f.where, why, (unsigned long long)gen, f.cache);
	}
	json_object *c = NULL;
	if ((rc = config_fleet_compose(doc, f.gw, &c, err, errlen))) {
		json_object_put(doc);
		return rc;
	}
	f.doc = doc;
	f.generation = gen;
	if (!f.cached)
		cache_write(doc, gen);
	*out = c;
	log_info("fleet %s: gateway %s joins at generation %llu%s", f.where, f.gw, (unsigned long long)gen,
		 f.cached ? " (the kept copy)" : "");
	return 0;
}

static void *fleet_thread(void *arg)
{
	(void)arg;
	unsigned tick = 0;
	for (;; tick++) {
		pthread_mutex_lock(&f.mu);
		bool stop = f.stop, connected = f.connected, watching = f.watching;
		pthread_mutex_unlock(&f.mu);
		if (stop)
			break;
		if (!connected && tick % FLEET_RETRY_S == 0) {
			char err[512];
			if (connect_cluster(err, sizeof(err)) == 0) {
				log_info("fleet %s: the cluster answers again", f.where);
				connected = true;
			} else {
				set_error("%s", err);
			}
		}
		if (connected && !watching && tick % FLEET_RETRY_S == 0) {
			if (f.watched)
				rados_unwatch2(f.io, f.cookie); /* the broken one */
			int rc = rados_watch2(f.io, f.obj, &f.cookie, on_notify, on_watch_error, NULL);
			pthread_mutex_lock(&f.mu);
			f.watching = f.watched = rc == 0;
			pthread_mutex_unlock(&f.mu);
			if (rc)
				set_error("watching %s: %s", f.where, strerror(-rc));
			else if (f.wake)
				f.wake(); /* what changed while it was not watching */
		} else if (connected && tick % FLEET_RECHECK_S == 0 && f.wake) {
			f.wake();
		}
		sleep(1);
	}
	return NULL;
}

void fleet_run(void (*wake)(void))
{
	if (!f.active)
		return;
	f.wake = wake;
	if (f.connected) {
		int rc = rados_watch2(f.io, f.obj, &f.cookie, on_notify, on_watch_error, NULL);
		f.watching = f.watched = rc == 0;
		if (rc)
			log_warn("fleet: watching %s: %s; trying again every %d s", f.where, strerror(-rc), FLEET_RETRY_S);
	}
	f.th_running = pthread_create(&f.th, NULL, fleet_thread, NULL) == 0;
}

void fleet_stop(void)
{
	if (!f.active)
		return;
	pthread_mutex_lock(&f.mu);
	f.stop = true;
	pthread_mutex_unlock(&f.mu);
	if (f.th_running)
		pthread_join(f.th, NULL);
	if (f.watched)
		rados_unwatch2(f.io, f.cookie);
	if (f.connected) {
		rados_watch_flush(f.rados);
		rados_ioctx_destroy(f.io);
		rados_shutdown(f.rados);
	}
	json_object_put(f.doc);
	f.doc = NULL;
	free(f.state_dir);
	free(f.metrics);
	f.state_dir = f.metrics = NULL;
	f.active = f.connected = f.watching = f.watched = false;
}

static json_object *global_of(json_object *cfg)
{
	json_object *g = NULL;
	if (!json_object_object_get_ex(cfg, "global", &g) || !json_object_is_type(g, json_type_object)) {
		g = json_object_new_object();
		json_object_object_add(cfg, "global", g);
	}
	return g;
}

void fleet_cmdline_into(json_object *cfg)
{
	if (f.state_dir)
		json_object_object_add(global_of(cfg), "state_dir", json_object_new_string(f.state_dir));
	if (f.metrics)
		json_object_object_add(global_of(cfg), "metrics", json_object_new_string(f.metrics));
}

void fleet_cmdline_strip(json_object *cfg)
{
	if (f.state_dir)
		json_object_object_del(global_of(cfg), "state_dir");
	if (f.metrics)
		json_object_object_del(global_of(cfg), "metrics");
}

json_object *fleet_applied(uint64_t *generation)
{
	pthread_mutex_lock(&f.mu);
	json_object *d = json_object_get(f.doc);
	*generation = f.generation;
	pthread_mutex_unlock(&f.mu);
	return d;
}

int fleet_newer(json_object **doc, uint64_t *generation, char *err, size_t errlen)
{
	if (!f.connected) {
		snprintf(err, errlen, "the cluster cannot be reached: %s", f.last_error);
		return -ENOTCONN;
	}
	int rc = fetch(doc, generation, err, errlen);
	if (rc == -ESHUTDOWN) {
		pthread_mutex_lock(&f.mu);
		f.fenced = true;
		pthread_mutex_unlock(&f.mu);
	}
	if (rc)
		return rc;
	pthread_mutex_lock(&f.mu);
	bool newer = *generation != f.generation || f.cached;
	pthread_mutex_unlock(&f.mu);
	if (!newer) {
		json_object_put(*doc);
		*doc = NULL;
	}
	return newer;
}

void fleet_applied_set(json_object *doc, uint64_t generation, const char *err)
{
	pthread_mutex_lock(&f.mu);
	if (err) {
		snprintf(f.last_error, sizeof(f.last_error), "generation %llu: %s", (unsigned long long)generation, err);
		f.apply_failed = true;
	} else {
		json_object_put(f.doc);
		f.doc = json_object_get(doc);
		f.generation = generation;
		f.cached = false;
		f.last_error[0] = 0;
		f.apply_failed = false;
	}
	pthread_mutex_unlock(&f.mu);
	if (!err)
		cache_write(doc, generation);
}

/* ------------------------------------------------------------------------ */
/* Asking the others. */

void fleet_answers_free(struct fleet_answers *a)
{
	json_object_put(a->answers);
	a->answers = NULL;
}

static void remember(uint64_t id, const char *name)
{
	unsigned n = sizeof(f.seen) / sizeof(f.seen[0]), i;
	for (i = 0; i < f.nseen && i < n && f.seen[i].id != id; i++)
		;
	if (i == n)
		i = f.nseen++ % n; /* full: the oldest goes */
	else if (i == f.nseen)
		f.nseen++;
	f.seen[i].id = id;
	snprintf(f.seen[i].name, sizeof(f.seen[i].name), "%s", name);
}

static const char *known_as(uint64_t id)
{
	unsigned n = sizeof(f.seen) / sizeof(f.seen[0]);
	for (unsigned i = 0; i < f.nseen && i < n; i++)
		if (f.seen[i].id == id)
			return f.seen[i].name;
	return NULL;
}

static int notify(json_object *msg, struct fleet_answers *a, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	if (!f.connected) {
		snprintf(err, errlen, "the cluster cannot be reached from this gateway: %s", f.last_error);
		return -ENOTCONN;
	}
	const char *s = json_object_to_json_string_ext(msg, JSON_C_TO_STRING_PLAIN);
	struct notify_ack_t *acks;
	struct notify_timeout_t *tos;
	size_t nacks, ntos;
	int rc = rbd_notify(f.io, f.obj, s, strlen(s), FLEET_NOTIFY_MS, &acks, &nacks, &tos, &ntos);
	if (rc < 0) {
		snprintf(err, errlen, "asking the gateways through %s: %s", f.where, strerror(-rc));
		return rc;
	}
	a->answers = json_object_new_array();
	for (size_t i = 0; i < nacks; i++) {
		json_object *o = acks[i].payload_len ? parse(acks[i].payload, acks[i].payload_len) : NULL, *g = NULL;
		if (!o)
			continue;
		json_object_array_add(a->answers, o);
		if (json_object_object_get_ex(o, "gateway", &g) && json_object_is_type(g, json_type_string))
			remember(acks[i].notifier_id, json_object_get_string(g));
	}
	size_t n = 0;
	for (size_t i = 0; i < ntos; i++) {
		const char *name = known_as(tos[i].notifier_id);
		int w = snprintf(a->missed_ids + n, sizeof(a->missed_ids) - n, "%s%s%sclient.%llu%s", i ? ", " : "",
				 name ? name : "", name ? " (" : "", (unsigned long long)tos[i].notifier_id, name ? ")" : "");
		if (w > 0 && (size_t)w < sizeof(a->missed_ids) - n)
			n += (size_t)w;
	}
	a->missed = ntos;
	rados_free_notify_response(acks, nacks, tos);
	return 0;
}

int fleet_plan(json_object *doc, struct fleet_answers *a, char *err, size_t errlen)
{
	json_object *m = json_object_new_object();
	json_object_object_add(m, "op", json_object_new_string("plan"));
	json_object_object_add(m, "from", json_object_new_string(f.gw));
	json_object_object_add(m, "doc", json_object_get(doc));
	int rc = notify(m, a, err, errlen);
	json_object_put(m);
	return rc;
}

int fleet_ask(struct fleet_answers *a, char *err, size_t errlen)
{
	json_object *m = json_object_new_object();
	json_object_object_add(m, "op", json_object_new_string("ask"));
	int rc = notify(m, a, err, errlen);
	json_object_put(m);
	return rc;
}

int fleet_commit(json_object *doc, uint64_t base, uint64_t *now, char *err, size_t errlen)
{
	if (!f.connected) {
		snprintf(err, errlen, "the cluster cannot be reached from this gateway: %s", f.last_error);
		return -ENOTCONN;
	}
	const char *s = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
	size_t len = strlen(s);
	if (len > FLEET_DOC_MAX) {
		snprintf(err, errlen, "the document would be %zu bytes, more than the %u a fleet's document may be", len,
			 FLEET_DOC_MAX);
		return -EFBIG;
	}
	rados_write_op_t op = rados_create_write_op();
	if (!op)
		return -ENOMEM;
	rados_write_op_assert_version(op, base);
	rados_write_op_write_full(op, s, len);
	int rc = rados_write_op_operate(op, f.io, f.obj, NULL, 0);
	if (rc == 0)
		*now = rados_get_last_version(f.io);
	rados_release_write_op(op);
	if (rc == -ERANGE || rc == -EOVERFLOW) {
		snprintf(err, errlen, "the fleet's configuration moved past generation %llu meanwhile (another change "
			 "was made first): nothing of this one was applied; read it again and make the change again",
			 (unsigned long long)base);
		return -ERANGE;
	}
	if (rc < 0) {
		snprintf(err, errlen, "writing %s: %s", f.where, strerror(-rc));
		return rc;
	}
	json_object *m = json_object_new_object();
	struct fleet_answers a;
	char e2[256];
	json_object_object_add(m, "op", json_object_new_string("commit"));
	json_object_object_add(m, "generation", json_object_new_uint64(*now));
	if (notify(m, &a, e2, sizeof(e2)))
		log_warn("fleet: generation %llu written, but the gateways were not told (%s): each reads it within "
			 "%d s", (unsigned long long)*now, e2, FLEET_RECHECK_S);
	fleet_answers_free(&a);
	json_object_put(m);
	return 0;
}

json_object *fleet_self_json(void)
{
	json_object *o = json_object_new_object();
	pthread_mutex_lock(&f.mu);
	json_object_object_add(o, "cluster", json_object_new_string(f.where));
	json_object_object_add(o, "gateway", json_object_new_string(f.gw));
	json_object_object_add(o, "generation", json_object_new_uint64(f.generation));
	json_object_object_add(o, "reachable", json_object_new_boolean(f.connected && f.watching));
	json_object_object_add(o, "cached", json_object_new_boolean(f.cached));
	json_object_object_add(o, "fenced", json_object_new_boolean(f.fenced || shared_fenced_any()));
	json_object_object_add(o, "ok", json_object_new_boolean(!f.apply_failed));
	json_object_object_add(o, "last_error", f.last_error[0] ? json_object_new_string(f.last_error) : NULL);
	json_object_object_add(o, "copy", f.cache[0] ? json_object_new_string(f.cache) : NULL);
	pthread_mutex_unlock(&f.mu);
	return o;
}

#else /* without librados: --cluster is refused */

bool fleet_active(void)
{
	return false;
}

const char *fleet_gateway(void)
{
	return NULL;
}

int fleet_start(const struct fleet_opts *o, json_object **out, char *err, size_t errlen)
{
	(void)o;
	(void)out;
	snprintf(err, errlen, "--cluster: this isertd is built without librados (librbd-dev, librados-dev)");
	return -ENOTSUP;
}

void fleet_run(void (*wake)(void))
{
	(void)wake;
}

void fleet_cmdline_into(json_object *cfg)
{
	(void)cfg;
}

void fleet_cmdline_strip(json_object *cfg)
{
	(void)cfg;
}

void fleet_stop(void)
{
}

json_object *fleet_applied(uint64_t *generation)
{
	*generation = 0;
	return NULL;
}

int fleet_newer(json_object **doc, uint64_t *generation, char *err, size_t errlen)
{
	(void)doc;
	(void)generation;
	snprintf(err, errlen, "not in a fleet");
	return -ENOTSUP;
}

void fleet_applied_set(json_object *doc, uint64_t generation, const char *err)
{
	(void)doc;
	(void)generation;
	(void)err;
}

int fleet_plan(json_object *doc, struct fleet_answers *a, char *err, size_t errlen)
{
	(void)doc;
	memset(a, 0, sizeof(*a));
	snprintf(err, errlen, "not in a fleet");
	return -ENOTSUP;
}

int fleet_commit(json_object *doc, uint64_t base, uint64_t *now, char *err, size_t errlen)
{
	(void)doc;
	(void)base;
	(void)now;
	snprintf(err, errlen, "not in a fleet");
	return -ENOTSUP;
}

int fleet_ask(struct fleet_answers *a, char *err, size_t errlen)
{
	memset(a, 0, sizeof(*a));
	snprintf(err, errlen, "not in a fleet");
	return -ENOTSUP;
}

void fleet_answers_free(struct fleet_answers *a)
{
	json_object_put(a->answers);
	a->answers = NULL;
}

json_object *fleet_self_json(void)
{
	return NULL;
}

#endif
