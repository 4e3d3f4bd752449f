/*
 * Methods on the configuration as a whole: read it, save it, apply a
 * document or restore part of a file, change the global keys and the
 * discovery settings; where the iSNS registration stands.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "target/control/control.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/isns/isns.h"
#include "target/runtime/runtime.h"

#define SAVE_BACKUPS_DEFAULT 10
#define SAVE_BACKUPS_MAX     1000

static int m_methods(struct rpc_call *c)
{
	c->result = rpc_methods_json();
	return 0;
}

static void put_age(json_object *o, const char *key, int64_t s)
{
	json_object_object_add(o, key, s < 0 ? NULL : json_object_new_int64(s));
}

static int m_isns_status(struct rpc_call *c)
{
	struct isns_report st;
	isns_get_report(&st);
	json_object *o = c->result = json_object_new_object();
	json_object_object_add(o, "configured", json_object_new_boolean(st.running));
	if (!st.running)
		return 0;
	json_object_object_add(o, "server", json_object_new_string(st.server));
	json_object_object_add(o, "entity", json_object_new_string(st.entity));
	json_object_object_add(o, "registered", json_object_new_boolean(st.registered));
	json_object_object_add(o, "targets", json_object_new_uint64(st.targets));
	json_object_object_add(o, "portals", json_object_new_uint64(st.portals));
	json_object_object_add(o, "esi_port", st.esi_port ? json_object_new_int(st.esi_port) : NULL);
	json_object_object_add(o, "failures", json_object_new_uint64(st.failures));
	json_object_object_add(o, "last_error", st.last_error[0] ? json_object_new_string(st.last_error) : NULL);
	put_age(o, "last_error_age_s", st.last_error_age_s);
	put_age(o, "registered_age_s", st.registered_age_s);
	return 0;
}

static int m_config_get(struct rpc_call *c)
{
	bool secrets = rpc_bool(c, "show_secrets");
	/* isertd's own uid may use the socket when isertd is not root; the secrets are root's only, and an admin's. */
	if (secrets && c->who && c->who->principal->role < CFG_ROLE_ADMIN)
		return rpc_fail(c, RPC_PERMISSION, "show_secrets: only a principal with role admin may read the secrets "
				"(%s has role %s)", c->who->name, config_role_name(c->who->principal->role));
	if (secrets && !c->who && c->uid != 0)
		return rpc_fail(c, RPC_PERMISSION, "show_secrets: only root may read the secrets (uid %u)",
				(unsigned)c->uid);
	json_object *cfg = config_to_obj(rt_config());
	if (!cfg)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	if (!secrets)
		config_redact(cfg);
	c->result = json_object_new_object();
	json_object_object_add(c->result, "generation", json_object_new_uint64(rpc_st.generation));
	json_object_object_add(c->result, "origin", json_object_new_string(rt_config()->origin));
	json_object_object_add(c->result, "config", cfg);
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
	const char *path = rpc_str(c, "path");
	int64_t keep = rpc_int(c, "backups", SAVE_BACKUPS_DEFAULT);
	if (!path)
		path = rpc_st.config_path;
	if (!path)
		return rpc_fail(c, RPC_INVALID_PARAMS,
				"path: required: isertd runs the embedded default configuration, not a file");
	if (rpc_plan_only)
		return rpc_fail(c, RPC_REFUSED, "save: writing files is disabled here");
	char made[PATH_MAX + NAME_MAX + 64], err[512] = "";
	if (backup_old(c, path, (unsigned)keep, made, sizeof(made)))
		return -1;
	if (config_save_file(rt_config(), path, err, sizeof(err)))
		return rpc_fail(c, RPC_REFUSED, "save: %s", err[0] ? err : strerror(errno));
	c->result = json_object_new_object();
	json_object_object_add(c->result, "path", json_object_new_string(path));
	json_object_object_add(c->result, "backup", made[0] ? json_object_new_string(made) : NULL);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Whole documents. */

/* apply: a whole document (a file, or given inline) becomes the running configuration. */
static int e_apply(struct rpc_call *c, struct change *ch)
{
	const char *path = rpc_str(c, "path");
	json_object *inline_cfg = NULL;
	char err[768] = "";
	struct config *n = NULL;
	json_object_object_get_ex(c->params, "config", &inline_cfg);
	if (!path == !inline_cfg)
		return rpc_fail(c, RPC_INVALID_PARAMS, "give path (a file isertd reads) or config (the document)");
	int rc = path ? config_load_file(path, &n, err, sizeof(err))
		      : config_load_doc(inline_cfg, "config", &n, err, sizeof(err));
	if (rc)
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	change_whole(ch, n);
	return 0;
}

/* Element e of the named array (by name) into doc's: replacing the one of the same name, or added. */
static void put_named(json_object *doc, const char *array, const char *key, json_object *e)
{
	json_object *a = doc_array(doc, array), *name;
	size_t at;
	json_object_object_get_ex(e, key, &name);
	if (doc_find(a, key, json_object_get_string(name), 0, &at))
		json_object_array_put_idx(a, at, json_object_get(e));
	else
		json_object_array_add(a, json_object_get(e));
}

/* restore: the file, or only one target or one backstore of it, into the running configuration. */
static int e_restore(struct rpc_call *c, struct change *ch)
{
	const char *path = rpc_str(c, "path"), *iqn = rpc_str(c, "target"), *bsname = rpc_str(c, "backstore");
	char err[768] = "";
	struct config *f = NULL;
	if (iqn && bsname)
		return rpc_fail(c, RPC_INVALID_PARAMS, "target or backstore, not both");
	if (config_load_file(path, &f, err, sizeof(err)))
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	if (!iqn && !bsname) {
		change_whole(ch, f);
		return 0;
	}
	json_object *from = config_to_obj(f), *doc = change_doc(c, ch);
	config_free(f);
	if (!from || !doc) {
		config_wipe_secrets(from);
		json_object_put(from);
		return doc ? rpc_fail(c, RPC_INTERNAL, "out of memory") : -1;
	}
	json_object *fb = doc_array(from, "backstores"), *t = NULL;
	size_t t_at = 0;
	int rc = 0;
	if (bsname) {
		json_object *b = doc_find(fb, "name", bsname, 0, NULL);
		if (b)
			put_named(doc, "backstores", "name", b);
		else
			rc = rpc_fail(c, RPC_NOT_FOUND, "%s has no backstore '%s'", path, bsname);
	} else {
		t = doc_find(doc_array(from, "targets"), "iqn", iqn, 0, &t_at);
		if (!t) {
			rc = rpc_fail(c, RPC_NOT_FOUND, "%s has no target %s", path, iqn);
		} else {
			/* The target, and the backstores its LUNs use. */
			put_named(doc, "targets", "iqn", t);
			json_object *tpgs = doc_array(t, "tpgs");
			for (size_t j = 0; j < json_object_array_length(tpgs); j++) {
				json_object *luns = doc_array(json_object_array_get_idx(tpgs, j), "luns");
				for (size_t k = 0; k < json_object_array_length(luns); k++) {
					json_object *bn, *b;
					if (json_object_object_get_ex(json_object_array_get_idx(luns, k), "backstore", &bn) &&
					    (b = doc_find(fb, "name", json_object_get_string(bn), 0, NULL)))
						put_named(doc, "backstores", "name", b);
				}
			}
		}
	}
	/* The target taken lives on in the change (which wipes it); the file's other secrets go now. */
	if (t)
		json_object_array_put_idx(doc_array(from, "targets"), t_at, NULL);
	config_wipe_secrets(from);
	json_object_put(from);
	return rc;
}

/* Its table holds the keys that apply at once; a restart key is refused by name, any other as unknown. */
static int e_global_set(struct rpc_call *c, struct change *ch)
{
	const struct rpc_method *m = rpc_method_named("global.set");
	size_t n = json_object_object_length(c->params) - json_object_object_get_ex(c->params, "dry_run", NULL);
	if (!n) {
		char list[256];
		rpc_param_list(m, false, list, sizeof(list));
		return rpc_fail(c, RPC_INVALID_PARAMS, "nothing to set: give one or more of %s", list);
	}
	json_object_object_foreach(c->params, k, v)
	{
		(void)v;
		if (apply_restart_key(k))
			return rpc_fail(c, RPC_REFUSED, "global.%s cannot change while isertd runs: change the file, "
							"then restart isertd", k);
		if (!rpc_has_param(m, k))
			return rpc_unknown_param(c, m, k);
	}
	json_object *doc = change_doc(c, ch), *glob;
	if (!doc)
		return -1;
	json_object_object_get_ex(doc, "global", &glob);
	/* isns.KEY=VALUE changes that key of global.isns (null removes it); "isns": null turns iSNS off. */
	json_object *isns, *cur;
	bool merged = json_object_object_get_ex(c->params, "isns", &isns) && json_object_is_type(isns, json_type_object) &&
		      json_object_object_get_ex(glob, "isns", &cur) && json_object_is_type(cur, json_type_object);
	if (merged) {
		json_object_object_foreach(isns, k, v)
		{
			if (json_object_is_type(v, json_type_null))
				json_object_object_del(cur, k);
			else
				json_object_object_add(cur, k, json_object_get(v));
		}
	}
	doc_merge(glob, c->params, merged ? (const char *const[]){ "isns", NULL } : (const char *const[]){ NULL });
	return 0;
}

static int e_discovery_set(struct rpc_call *c, struct change *ch)
{
	json_object *doc = change_doc(c, ch), *d, *chap;
	if (!doc)
		return -1;
	if (!json_object_object_get_ex(doc, "discovery", &d)) {
		d = json_object_new_object();
		json_object_object_add(doc, "discovery", d);
	}
	doc_merge(d, c->params, (const char *const[]){ NULL });
	if (json_object_object_get_ex(d, "chap", &chap) && json_object_is_type(chap, json_type_null))
		json_object_object_del(d, "chap"); /* "chap": null turns CHAP off */
	return 0;
}

static const struct rpc_param p_none[] = { P_END };
static const struct rpc_param p_config_get[] = { P_BOOL("show_secrets"), P_END };
static const struct rpc_param p_save[] = { P_STR("path", false), P_INT("backups", false, 0, SAVE_BACKUPS_MAX), P_END };
static const struct rpc_param p_apply[] = { P_STR("path", false), { "config", RPC_P_OBJECT, false, 0, 0, false, NULL },
					    P_END };
static const struct rpc_param p_restore[] = { P_STR("path", true), P_STR("target", false), P_STR("backstore", false),
					      P_END };
/* The loader checks their values, as in the file. */
static const struct rpc_param p_global_set[] = { P_VALUE("login_timeout"), P_VALUE("max_connections"),
						 P_VALUE("max_connections_per_portal"), P_VALUE("max_connections_per_host"),
						 P_VALUE("max_sessions"), P_VALUE("shutdown_timeout"), P_VALUE("isns"),
						 P_VALUE("admin_https"), P_END };
static const struct rpc_param p_discovery_set[] = { P_SECRET("chap"), P_END };

const struct rpc_method rpc_methods_config[] = {
	{ "rpc.methods", m_methods, NULL, false, p_none, NULL,
	  "the methods of this socket" },
	{ "config.get", m_config_get, NULL, false, p_config_get, NULL,
	  "the running configuration (as --print-config) and its generation; "
	  "CHAP secrets masked unless show_secrets (root only)" },
	{ "save", m_save, NULL, false, p_save, NULL,
	  "write the running configuration to path (default: the file isertd started with), "
	  "keeping backups (default 10) in backup/ beside it" },
	{ "apply", NULL, e_apply, true, p_apply, NULL,
	  "make a whole configuration (path, or config inline) the running one, changing only "
	  "what differs; dry_run: the plan only" },
	{ "restore", NULL, e_restore, true, p_restore, NULL,
	  "the configuration in path, or only its target (iqn) or backstore (name), into "
	  "the running one; dry_run" },
	{ "global.set", NULL, e_global_set, true, p_global_set,
	  "global keys that need a restart are refused by name",
	  "change global limits that apply at once (login_timeout, max_*, "
	  "shutdown_timeout), the iSNS registration (isns: an object whose keys are merged, null: off) and the "
	  "HTTPS admin door (admin_https: the whole object, null: off)" },
	{ "isns.status", m_isns_status, NULL, false, p_none, NULL,
	  "where the iSNS registration stands: server, entity, registered, targets and portals, "
	  "esi_port, failures in a row, the last error and how long ago, the last registration's age" },
	{ "discovery.set", NULL, e_discovery_set, true, p_discovery_set,
	  "the discovery object's keys in the file (auth_required)",
	  "discovery auth_required and chap (null: off)" },
	{ NULL, NULL, NULL, false, NULL, NULL, NULL },
};
