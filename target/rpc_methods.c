/*
 * The admin socket's methods (docs/admin.md).  A change is checked the way
 * the file is: the running configuration as JSON, the change made to that
 * document, and the result loaded by the configuration loader, so a refusal
 * names the same field with the same words as an error in the file would.
 * Only once the whole request passed is anything changed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/iscsi/iscsi.h"
#include "target/rpc.h"
#include "target/rpc_int.h"

#define SAVE_BACKUPS_DEFAULT 10
#define SAVE_BACKUPS_MAX     1000

/* Every key of params is one of keys (NULL-terminated)? */
static int only_keys(struct rpc_call *c, const char *const *keys)
{
	json_object_object_foreach(c->params, k, v)
	{
		(void)v;
		const char *const *a = keys;
		while (*a && strcmp(*a, k))
			a++;
		if (!*a) {
			char list[256] = "";
			size_t used = 0;
			for (a = keys; *a && used < sizeof(list); a++) {
				int n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", *a);
				used += n > 0 ? (size_t)n : 0;
			}
			return rpc_fail(c, RPC_INVALID_PARAMS, "unknown parameter '%.64s' (this method takes: %s)", k,
					*keys ? list : "none");
		}
	}
	return 0;
}

/* A string parameter (NULL when absent and not required). */
static int str_param(struct rpc_call *c, const char *key, bool required, const char **out)
{
	json_object *v;
	*out = NULL;
	if (!json_object_object_get_ex(c->params, key, &v)) {
		if (required)
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: required", key);
		return 0;
	}
	if (!json_object_is_type(v, json_type_string) || !json_object_get_string_len(v))
		return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be a non-empty string", key);
	*out = json_object_get_string(v);
	return 0;
}

static int int_param(struct rpc_call *c, const char *key, bool required, int64_t min, int64_t max, int64_t *out)
{
	json_object *v;
	if (!json_object_object_get_ex(c->params, key, &v)) {
		if (required)
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: required", key);
		return 0;
	}
	errno = 0;
	int64_t x = json_object_get_int64(v);
	if (!json_object_is_type(v, json_type_int) || errno || x < min || x > max)
		return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be an integer from %" PRId64 " to %" PRId64, key, min,
				max);
	*out = x;
	return 0;
}

/* Load doc (the running configuration with a change made) with the file's rules. */
static struct config *check_doc(struct rpc_call *c, json_object *doc)
{
	struct config *n = NULL;
	char err[512] = "";
	const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	if (config_load_string(text, "the change", &n, err, sizeof(err))) {
		rpc_fail(c, RPC_REFUSED, "%s", err);
		return NULL;
	}
	return n;
}

static struct cfg_tpg *find_tpg(struct rpc_call *c, const char *iqn, int64_t tag, size_t *ti, size_t *gi)
{
	struct config *cfg = rpc_st.cfg;
	for (size_t i = 0; i < cfg->ntargets; i++) {
		if (strcmp(cfg->targets[i].iqn, iqn))
			continue;
		for (size_t j = 0; j < cfg->targets[i].ntpgs; j++)
			if (cfg->targets[i].tpgs[j].tag == tag) {
				*ti = i;
				*gi = j;
				return &cfg->targets[i].tpgs[j];
			}
		rpc_fail(c, RPC_NOT_FOUND, "target %s has no TPG %" PRId64, iqn, tag);
		return NULL;
	}
	rpc_fail(c, RPC_NOT_FOUND, "no target %s", iqn);
	return NULL;
}

/* ------------------------------------------------------------------------ */

static int m_methods(struct rpc_call *c)
{
	static const char *const keys[] = { NULL };
	if (only_keys(c, keys))
		return -1;
	json_object *a = json_object_new_array();
	for (const struct rpc_method *m = rpc_methods; m->name; m++) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(m->name));
		json_object_object_add(o, "change", json_object_new_boolean(m->change));
		json_object_object_add(o, "help", json_object_new_string(m->help));
		json_object_array_add(a, o);
	}
	c->result = a;
	return 0;
}

static int m_config_get(struct rpc_call *c)
{
	static const char *const keys[] = { NULL };
	if (only_keys(c, keys))
		return -1;
	json_object *cfg = config_to_obj(rpc_st.cfg);
	if (!cfg)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	c->result = json_object_new_object();
	json_object_object_add(c->result, "generation", json_object_new_uint64(rpc_st.generation));
	json_object_object_add(c->result, "origin", json_object_new_string(rpc_st.cfg->origin));
	json_object_object_add(c->result, "config", cfg);
	return 0;
}

static int m_sessions(struct rpc_call *c)
{
	static const char *const keys[] = { "tsih", "initiator", "target", NULL };
	const char *ini, *tgt;
	int64_t tsih = 0;
	if (only_keys(c, keys) || str_param(c, "initiator", false, &ini) || str_param(c, "target", false, &tgt) ||
	    int_param(c, "tsih", false, 1, 65535, &tsih))
		return -1;
	json_object *a = json_object_new_array();
	char err[160];
	if (admin_sessions(a, (uint16_t)tsih, ini, tgt, err, sizeof(err))) {
		json_object_put(a);
		return rpc_fail(c, RPC_UNAVAILABLE, "%s", err);
	}
	if (tsih && !json_object_array_length(a)) {
		json_object_put(a);
		return rpc_fail(c, RPC_NOT_FOUND, "no session with TSIH %" PRId64, tsih);
	}
	c->result = json_object_new_object();
	json_object_object_add(c->result, "sessions", a);
	return 0;
}

static int m_session_close(struct rpc_call *c)
{
	static const char *const keys[] = { "tsih", NULL };
	int64_t tsih = 0;
	if (only_keys(c, keys) || int_param(c, "tsih", true, 1, 65535, &tsih))
		return -1;
	char err[160];
	int n = admin_close_sessions((uint16_t)tsih, NULL, -1, "closed by the admin", err, sizeof(err));
	if (n < 0)
		return rpc_fail(c, RPC_UNAVAILABLE, "%s", err);
	if (!n)
		return rpc_fail(c, RPC_NOT_FOUND, "no session with TSIH %" PRId64, tsih);
	c->result = json_object_new_object();
	json_object_object_add(c->result, "closed", json_object_new_int(n));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* save */

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Remove the oldest backups of base beyond keep (names sort by their time stamps). */
static void prune_backups(const char *dir, const char *base, unsigned keep)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	char **names = NULL;
	size_t n = 0, cap = 0, blen = strlen(base);
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t l = strlen(e->d_name);
		if (l <= blen + 6 || strncmp(e->d_name, base, blen) || e->d_name[blen] != '-' ||
		    strcmp(e->d_name + l - 5, ".json"))
			continue;
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 32;
			char **nn = realloc(names, nc * sizeof(*nn));
			if (!nn)
				break;
			names = nn;
			cap = nc;
		}
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		if (i + keep < n) {
			char p[PATH_MAX + NAME_MAX + 2];
			if (snprintf(p, sizeof(p), "%s/%s", dir, names[i]) < (int)sizeof(p))
				unlink(p);
		}
		free(names[i]);
	}
	free(names);
}

/* Keep the file about to be replaced as DIR/backup/BASE-YYYYMMDD-HHMMSS[-N].json (a hard link: no copy). */
static int backup_old(struct rpc_call *c, const char *path, unsigned keep, char *made, size_t madelen)
{
	made[0] = 0;
	struct stat st;
	if (!keep || stat(path, &st))
		return 0; /* nothing to keep */
	char dir[PATH_MAX], base[NAME_MAX + 1];
	const char *slash = strrchr(path, '/');
	if (slash)
		snprintf(dir, sizeof(dir), "%.*s/backup", (int)(slash > path ? slash - path : 1), path);
	else
		snprintf(dir, sizeof(dir), "backup");
	snprintf(base, sizeof(base), "%s", slash ? slash + 1 : path);
	size_t bl = strlen(base);
	if (bl > 5 && !strcmp(base + bl - 5, ".json"))
		base[bl - 5] = 0;
	if (mkdir(dir, 0700) && errno != EEXIST)
		return rpc_fail(c, RPC_REFUSED, "save: cannot create the backup folder %s: %s", dir, strerror(errno));
	char stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	for (int i = 0; i < 100; i++) {
		if (i)
			snprintf(made, madelen, "%s/%s-%s-%02d.json", dir, base, stamp, i);
		else
			snprintf(made, madelen, "%s/%s-%s.json", dir, base, stamp);
		if (!link(path, made))
			break;
		if (errno != EEXIST) {
			int e = errno;
			made[0] = 0;
			return rpc_fail(c, RPC_REFUSED, "save: cannot keep a backup of %s in %s: %s", path, dir,
					strerror(e));
		}
		made[0] = 0;
	}
	prune_backups(dir, base, keep);
	return 0;
}

static int m_save(struct rpc_call *c)
{
	static const char *const keys[] = { "path", "backups", NULL };
	const char *path;
	int64_t keep = SAVE_BACKUPS_DEFAULT;
	if (only_keys(c, keys) || str_param(c, "path", false, &path) ||
	    int_param(c, "backups", false, 0, SAVE_BACKUPS_MAX, &keep))
		return -1;
	if (!path)
		path = rpc_st.config_path;
	if (!path)
		return rpc_fail(c, RPC_INVALID_PARAMS,
				"path: required: isertd runs the embedded default configuration, not a file");
	if (rpc_no_files)
		return rpc_fail(c, RPC_REFUSED, "save: writing files is disabled here");
	char made[PATH_MAX + NAME_MAX + 64], err[512] = "";
	if (backup_old(c, path, (unsigned)keep, made, sizeof(made)))
		return -1;
	if (config_save_file(rpc_st.cfg, path, err, sizeof(err)))
		return rpc_fail(c, RPC_REFUSED, "save: %s", err[0] ? err : strerror(errno));
	c->result = json_object_new_object();
	json_object_object_add(c->result, "path", json_object_new_string(path));
	json_object_object_add(c->result, "backup", made[0] ? json_object_new_string(made) : NULL);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* changes */

static int m_backstore_resize(struct rpc_call *c)
{
	static const char *const keys[] = { "name", "size", NULL };
	const char *name;
	json_object *size;
	if (only_keys(c, keys) || str_param(c, "name", true, &name))
		return -1;
	if (!json_object_object_get_ex(c->params, "size", &size))
		return rpc_fail(c, RPC_INVALID_PARAMS, "size: required (bytes, or a string such as \"20G\"; 0 for a "
						       "block backstore: follow the device)");
	struct config *cfg = rpc_st.cfg;
	size_t i = 0;
	while (i < cfg->nbackstores && strcmp(cfg->backstores[i].name, name))
		i++;
	if (i == cfg->nbackstores)
		return rpc_fail(c, RPC_NOT_FOUND, "no backstore '%s'", name);
	json_object *doc = config_to_obj(cfg), *bss, *b;
	if (!doc)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	json_object_object_get_ex(doc, "backstores", &bss);
	b = json_object_array_get_idx(bss, i);
	json_object_object_add(b, "size", json_object_get(size));
	struct config *n = check_doc(c, doc);
	json_object_put(doc);
	if (!n)
		return -1;
	uint64_t want = n->backstores[i].bs.size;
	config_free(n);
	char err[512] = "";
	struct backstore *bs = cfg->backstores[i].rt_bs;
	uint64_t before = backstore_size(bs);
	if (backstore_resize(bs, want, err, sizeof(err)))
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	uint64_t now = backstore_size(bs);
	if (now != before)
		scsi_lu_capacity_changed(cfg->backstores[i].rt_lu);
	if (cfg->backstores[i].bs.type != BACKSTORE_BLOCK || cfg->backstores[i].bs.size)
		cfg->backstores[i].bs.size = now;
	c->result = json_object_new_object();
	json_object_object_add(c->result, "name", json_object_new_string(name));
	json_object_object_add(c->result, "size", json_object_new_uint64(now));
	json_object_object_add(c->result, "was", json_object_new_uint64(before));
	return 0;
}

static int tpg_set_enable(struct rpc_call *c, bool enable)
{
	static const char *const keys[] = { "target", "tag", NULL };
	const char *iqn;
	int64_t tag = 0;
	size_t ti, gi;
	if (only_keys(c, keys) || str_param(c, "target", true, &iqn) || int_param(c, "tag", true, 1, 65535, &tag))
		return -1;
	struct cfg_tpg *g = find_tpg(c, iqn, tag, &ti, &gi);
	if (!g)
		return -1;
	/* Logins read it on the reactors: from now on they are refused (or taken again). */
	__atomic_store_n(&g->enable, enable, __ATOMIC_RELEASE);
	int closed = 0;
	if (!enable) {
		char err[160];
		closed = admin_close_sessions(0, iqn, (int)tag, "its TPG was disabled by the admin", err, sizeof(err));
		if (closed < 0)
			return rpc_fail(c, RPC_UNAVAILABLE, "TPG disabled, but its sessions may not all be closed: %s",
					err);
	}
	c->result = json_object_new_object();
	json_object_object_add(c->result, "target", json_object_new_string(iqn));
	json_object_object_add(c->result, "tag", json_object_new_int64(tag));
	json_object_object_add(c->result, "enable", json_object_new_boolean(enable));
	json_object_object_add(c->result, "sessions_closed", json_object_new_int(closed));
	return 0;
}

static int m_tpg_enable(struct rpc_call *c)
{
	return tpg_set_enable(c, true);
}

static int m_tpg_disable(struct rpc_call *c)
{
	return tpg_set_enable(c, false);
}

/* Global settings a running isertd takes at once; the others need a restart. */
static const char *const live_globals[] = { "login_timeout", "max_connections", "max_connections_per_portal",
					    "max_connections_per_host", "max_sessions", "shutdown_timeout", NULL };
static const char *const restart_globals[] = { "reactors", "poll_mode", "admin_socket", "tcp_keepalive",
					       "buffer_pool_mb", NULL };

static bool in_list(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return true;
	return false;
}

static int m_global_set(struct rpc_call *c)
{
	if (!json_object_object_length(c->params))
		return rpc_fail(c, RPC_INVALID_PARAMS, "nothing to set: give one or more of login_timeout, "
						       "max_connections, max_connections_per_portal, "
						       "max_connections_per_host, max_sessions, shutdown_timeout");
	json_object_object_foreach(c->params, k, v)
	{
		(void)v;
		if (in_list(restart_globals, k))
			return rpc_fail(c, RPC_REFUSED, "global.%s cannot change while isertd runs: change the file, "
							"then restart isertd",
					k);
		if (!in_list(live_globals, k))
			return only_keys(c, live_globals);
	}
	json_object *doc = config_to_obj(rpc_st.cfg), *glob;
	if (!doc)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	json_object_object_get_ex(doc, "global", &glob);
	json_object_object_foreach(c->params, k2, v2)
		json_object_object_add(glob, k2, json_object_get(v2));
	struct config *n = check_doc(c, doc);
	json_object_put(doc);
	if (!n)
		return -1;
	struct config *cfg = rpc_st.cfg;
	admit_set_limits(n->max_connections, n->max_connections_per_portal, n->max_connections_per_host,
			 n->max_sessions);
	__atomic_store_n(&cfg->login_timeout_s, n->login_timeout_s, __ATOMIC_RELAXED);
	__atomic_store_n(&cfg->shutdown_timeout_s, n->shutdown_timeout_s, __ATOMIC_RELAXED);
	config_free(n);
	c->result = json_object_new_object();
	json_object_object_foreach(c->params, k3, v3)
		json_object_object_add(c->result, k3, json_object_get(v3));
	return 0;
}

const struct rpc_method rpc_methods[] = {
	{ "rpc.methods", m_methods, false, "the methods of this socket" },
	{ "config.get", m_config_get, false, "the running configuration (as --print-config) and its generation" },
	{ "sessions", m_sessions, false, "sessions with their negotiated parameters; filter by tsih, initiator, target" },
	{ "session.close", m_session_close, false, "close the connection of session tsih (the initiator may log in again)" },
	{ "save", m_save, false, "write the running configuration to path (default: the file isertd started with), "
				 "keeping backups (default 10) in backup/ beside it" },
	{ "backstore.resize", m_backstore_resize, true, "grow backstore name to size (file; block: follow the device)" },
	{ "tpg.enable", m_tpg_enable, true, "accept logins to TPG tag of target" },
	{ "tpg.disable", m_tpg_disable, true, "refuse logins to TPG tag of target and close its sessions" },
	{ "global.set", m_global_set, true, "change global limits that apply at once (login_timeout, max_*, "
					    "shutdown_timeout)" },
	{ NULL, NULL, false, NULL },
};
