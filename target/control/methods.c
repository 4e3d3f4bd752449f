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

#include "common/log.h"
#include "common/utf8.h"
#include "common/util.h"
#include "target/backstore/backstore.h"
#include "target/iscsi/iscsi.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"

#define SAVE_BACKUPS_DEFAULT 10
#define SAVE_BACKUPS_MAX     1000

static const struct rpc_param *param_of(const struct rpc_method *m, const char *name)
{
	for (const struct rpc_param *p = m->params; p->name; p++)
		if (!strcmp(p->name, name))
			return p;
	return NULL;
}

static int unknown_param(struct rpc_call *c, const struct rpc_method *m, const char *k)
{
	char list[256] = "";
	size_t used = 0;
	for (const struct rpc_param *p = m->params; p->name && used < sizeof(list); p++) {
		int n = snprintf(list + used, sizeof(list) - used, "%s%s", used ? ", " : "", p->name);
		used += n > 0 ? (size_t)n : 0;
	}
	return rpc_fail(c, RPC_INVALID_PARAMS, "unknown parameter '%.64s' (this method takes: %s)", k,
			m->params->name ? list : "none");
}

static int check_param(struct rpc_call *c, const struct rpc_param *p, json_object *v)
{
	errno = 0;
	switch (p->type) {
	case RPC_P_STR:
		if (!json_object_is_type(v, json_type_string) || !json_object_get_string_len(v))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be a non-empty string", p->name);
		if (p->max && json_object_get_string_len(v) > p->max)
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: at most %" PRId64 " bytes", p->name, p->max);
		return 0;
	case RPC_P_INT: {
		int64_t x = json_object_get_int64(v);
		if (!json_object_is_type(v, json_type_int) || errno || x < p->min || x > p->max)
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be an integer from %" PRId64 " to %" PRId64,
					p->name, p->min, p->max);
		return 0;
	}
	case RPC_P_BOOL:
		if (!json_object_is_type(v, json_type_boolean))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be true or false", p->name);
		return 0;
	case RPC_P_ARRAY:
		if (!json_object_is_type(v, json_type_array))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be an array", p->name);
		return 0;
	case RPC_P_OBJECT:
		if (!json_object_is_type(v, json_type_object))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: must be an object", p->name);
		return 0;
	case RPC_P_VALUE:
		return 0;
	}
	return 0;
}

int rpc_check_params(const struct rpc_method *m, struct rpc_call *c)
{
	json_object_object_foreach(c->params, k, v)
	{
		(void)v;
		/* A method that takes its object's file keys names what it refuses; the loader checks the rest. */
		if (!param_of(m, k) && !m->doc_keys)
			return unknown_param(c, m, k);
	}
	for (const struct rpc_param *p = m->params; p->name; p++) {
		json_object *v;
		if (!json_object_object_get_ex(c->params, p->name, &v)) {
			if (p->required)
				return rpc_fail(c, RPC_INVALID_PARAMS, "%s: required%s%s", p->name, p->hint ? " " : "",
						p->hint ? p->hint : "");
			continue;
		}
		if (check_param(c, p, v))
			return -1;
	}
	return 0;
}

/* A string parameter, checked by rpc_check_params (NULL when absent). */
static int str_param(struct rpc_call *c, const char *key, bool required, const char **out)
{
	json_object *v;
	*out = NULL;
	if (!json_object_object_get_ex(c->params, key, &v)) {
		if (required)
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: required", key);
		return 0;
	}
	*out = json_object_get_string(v);
	return 0;
}

/*
 * An initiator's name as the answers show it (its shown form, common/utf8.h:
 * "\xNN" for each byte that is not printable UTF-8, and for a backslash),
 * back to the bytes to match; NULL when absent.  buflen exceeds the
 * parameter's bound in its table.
 */
static void name_param(struct rpc_call *c, const char *key, char *buf, const char **out)
{
	str_param(c, key, false, out);
	if (*out) {
		utf8_unshown(*out, buf);
		*out = buf;
	}
}

/* An integer parameter, checked by rpc_check_params; *out unchanged when absent. */
static int int_param(struct rpc_call *c, const char *key, bool required, int64_t *out)
{
	json_object *v;
	if (!json_object_object_get_ex(c->params, key, &v)) {
		if (required)
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: required", key);
		return 0;
	}
	*out = json_object_get_int64(v);
	return 0;
}

static bool in_list(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return true;
	return false;
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

/* ------------------------------------------------------------------------ */

static json_object *param_obj(const struct rpc_param *p)
{
	static const char *const types[] = { [RPC_P_STR] = "string", [RPC_P_INT] = "integer",
					     [RPC_P_BOOL] = "boolean", [RPC_P_ARRAY] = "array",
					     [RPC_P_OBJECT] = "object", [RPC_P_VALUE] = "value" };
	json_object *o = json_object_new_object();
	json_object_object_add(o, "name", json_object_new_string(p->name));
	json_object_object_add(o, "type", json_object_new_string(types[p->type]));
	json_object_object_add(o, "required", json_object_new_boolean(p->required));
	if (p->type == RPC_P_INT) {
		json_object_object_add(o, "min", json_object_new_int64(p->min));
		json_object_object_add(o, "max", json_object_new_int64(p->max));
	} else if (p->type == RPC_P_STR && p->max) {
		json_object_object_add(o, "max_bytes", json_object_new_int64(p->max));
	}
	if (p->secret)
		json_object_object_add(o, "secret", json_object_new_boolean(true));
	return o;
}

static int m_methods(struct rpc_call *c)
{
	json_object *a = json_object_new_array();
	for (const struct rpc_method *m = rpc_methods; m->name; m++) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(m->name));
		json_object_object_add(o, "change", json_object_new_boolean(m->change));
		json_object_object_add(o, "help", json_object_new_string(m->help));
		json_object *ps = json_object_new_array();
		for (const struct rpc_param *p = m->params; p->name; p++)
			json_object_array_add(ps, param_obj(p));
		json_object_object_add(o, "params", ps);
		if (m->doc_keys)
			json_object_object_add(o, "doc_keys", json_object_new_string(m->doc_keys));
		json_object_array_add(a, o);
	}
	c->result = a;
	return 0;
}

static int m_config_get(struct rpc_call *c)
{
	json_object *v;
	bool secrets = json_object_object_get_ex(c->params, "show_secrets", &v) && json_object_get_boolean(v);
	/* isertd's own uid may use the socket when isertd is not root; the secrets are root's only. */
	if (secrets && c->uid != 0)
		return rpc_fail(c, RPC_PERMISSION, "show_secrets: only root may read the secrets (uid %u)",
				(unsigned)c->uid);
	json_object *cfg = config_to_obj(rpc_st.cfg);
	if (!cfg)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	if (!secrets)
		config_redact(cfg);
	c->result = json_object_new_object();
	json_object_object_add(c->result, "generation", json_object_new_uint64(rpc_st.generation));
	json_object_object_add(c->result, "origin", json_object_new_string(rpc_st.cfg->origin));
	json_object_object_add(c->result, "config", cfg);
	return 0;
}

static int m_sessions(struct rpc_call *c)
{
	const char *ini, *tgt;
	char name[1024];
	int64_t tsih = 0;
	name_param(c, "initiator", name, &ini);
	if (str_param(c, "target", false, &tgt) ||
	    int_param(c, "tsih", false, &tsih))
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

static int m_stats(struct rpc_call *c)
{
	static const char *const sections[] = { "luns", "connections", "portals", "rdma_devices", "reactors", NULL };
	struct stats_filter f = { .lun = -1, .luns = true, .connections = true, .portals = true, .rdma_devices = true,
				  .reactors = true };
	int64_t lun = -1, tsih = 0, limit = STATS_PAGE_MAX;
	const char *cursor;
	char name[1024];
	json_object *sec;
	/* The luns section comes in pages (at most STATS_PAGE_MAX rows), so an answer stays bounded. */
	name_param(c, "initiator", name, &f.initiator);
	if (str_param(c, "target", false, &f.target) || int_param(c, "lun", false, &lun) ||
	    int_param(c, "tsih", false, &tsih) || str_param(c, "cursor", false, &cursor) ||
	    int_param(c, "limit", false, &limit))
		return -1;
	f.lun = lun;
	f.tsih = (int)tsih;
	if (json_object_object_get_ex(c->params, "sections", &sec)) {
		f.luns = f.connections = f.portals = f.rdma_devices = f.reactors = false;
		for (size_t i = 0; i < json_object_array_length(sec); i++) {
			const char *s = json_object_get_string(json_object_array_get_idx(sec, i));
			if (!json_object_is_type(json_object_array_get_idx(sec, i), json_type_string) ||
			    !in_list(sections, s))
				return rpc_fail(c, RPC_INVALID_PARAMS, "sections[%zu]: must be one of luns, connections, "
								       "portals, rdma_devices, reactors", i);
			f.luns |= !strcmp(s, "luns");
			f.connections |= !strcmp(s, "connections");
			f.portals |= !strcmp(s, "portals");
			f.rdma_devices |= !strcmp(s, "rdma_devices");
			f.reactors |= !strcmp(s, "reactors");
		}
	}
	char err[160];
	json_object *out = json_object_new_object();
	int rc = stats_collect(out, &f, cursor, (unsigned)limit, err, sizeof(err));
	if (rc) {
		json_object_put(out);
		return rpc_fail(c, rc == -ETIMEDOUT	? RPC_UNAVAILABLE
				: rc == -ENOTSUP	? RPC_REFUSED
				: rc == -EINVAL		? RPC_INVALID_PARAMS
							: RPC_INTERNAL,
				"%s", err);
	}
	c->result = out;
	return 0;
}

static int m_stats_reset(struct rpc_call *c)
{
	char err[160];
	int rc = stats_reset(err, sizeof(err));
	if (rc)
		return rpc_fail(c, rc == -ETIMEDOUT ? RPC_UNAVAILABLE : RPC_INTERNAL, "%s", err);
	c->result = json_object_new_object();
	return 0;
}

static int m_session_close(struct rpc_call *c)
{
	int64_t tsih = 0;
	if (int_param(c, "tsih", true, &tsih))
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
	const char *path;
	int64_t keep = SAVE_BACKUPS_DEFAULT;
	if (str_param(c, "path", false, &path) ||
	    int_param(c, "backups", false, &keep))
		return -1;
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
	const char *name;
	json_object *size;
	if (str_param(c, "name", true, &name))
		return -1;
	json_object_object_get_ex(c->params, "size", &size);
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
	/* A device-sized backstore configured with size 0 keeps following its device. */
	if (!backstore_kind_has(cfg->backstores[i].bs.type, BS_KIND_FOLLOW) || cfg->backstores[i].bs.size)
		cfg->backstores[i].bs.size = now;
	c->result = json_object_new_object();
	json_object_object_add(c->result, "name", json_object_new_string(name));
	json_object_object_add(c->result, "size", json_object_new_uint64(now));
	json_object_object_add(c->result, "was", json_object_new_uint64(before));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Changes made to the document, then applied (target/iscsi/apply.c). */

static bool bool_param(struct rpc_call *c, const char *key)
{
	json_object *v;
	return json_object_object_get_ex(c->params, key, &v) && json_object_get_boolean(v);
}

/* Carry the running configuration to n; the answer is the plan and what followed. */
static int apply_config(struct rpc_call *c, struct config *n, bool dry_run)
{
	struct iscsi_apply_result res = { 0 };
	char err[768] = "";
	dry_run |= rpc_plan_only;
	int rc = iscsi_apply(n, dry_run, &res, err, sizeof(err));
	if (rc) {
		json_object_put(res.plan);
		json_object_put(res.restart);
		return rpc_fail(c, RPC_REFUSED, "%s",
				err[0] ? err : strerror(-rc));
	}
	c->unchanged = dry_run || (!json_object_array_length(res.plan) && !json_object_array_length(res.restart));
	c->result = json_object_new_object();
	json_object_object_add(c->result, "dry_run", json_object_new_boolean(dry_run));
	json_object_object_add(c->result, "plan", res.plan);
	json_object_object_add(c->result, "restart_needed", res.restart);
	if (!dry_run) {
		json_object_object_add(c->result, "sessions_closed", json_object_new_int(res.sessions_closed));
		json_object_object_add(c->result, "sessions_with_new_luns", json_object_new_int(res.maps_changed));
	}
	json_object_object_add(c->result, "generation",
			       json_object_new_uint64(rpc_st.generation + (c->unchanged ? 0 : 1)));
	return 0;
}

typedef int (*edit_fn)(struct rpc_call *c, json_object *doc);

/* The running configuration as JSON, edited, loaded with the file's rules, applied. */
static int change(struct rpc_call *c, edit_fn edit)
{
	json_object *doc = config_to_obj(rpc_st.cfg);
	if (!doc)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	if (edit(c, doc)) {
		json_object_put(doc);
		return -1;
	}
	struct config *n = check_doc(c, doc);
	json_object_put(doc);
	return n ? apply_config(c, n, bool_param(c, "dry_run")) : -1;
}

static json_object *arr(json_object *o, const char *key)
{
	json_object *a;
	if (!json_object_object_get_ex(o, key, &a) || !json_object_is_type(a, json_type_array)) {
		a = json_object_new_array();
		json_object_object_add(o, key, a);
	}
	return a;
}

/* The element of array a whose member key equals the string (or integer) v; its index in *at. */
static json_object *find_elem(json_object *a, const char *key, const char *sv, int64_t iv, size_t *at)
{
	for (size_t i = 0; i < json_object_array_length(a); i++) {
		json_object *e = json_object_array_get_idx(a, i), *k;
		if (!json_object_object_get_ex(e, key, &k))
			continue;
		if (sv ? !strcmp(json_object_get_string(k), sv) : json_object_get_int64(k) == iv) {
			if (at)
				*at = i;
			return e;
		}
	}
	return NULL;
}

static json_object *doc_target(struct rpc_call *c, json_object *doc, const char *iqn, size_t *at)
{
	json_object *t = find_elem(arr(doc, "targets"), "iqn", iqn, 0, at);
	if (!t)
		rpc_fail(c, RPC_NOT_FOUND, "no target %s", iqn);
	return t;
}

/* The TPG named by params target and tag. */
static json_object *doc_tpg(struct rpc_call *c, json_object *doc, size_t *at)
{
	const char *iqn;
	int64_t tag = 0;
	if (str_param(c, "target", true, &iqn) || int_param(c, "tag", true, &tag))
		return NULL;
	json_object *t = doc_target(c, doc, iqn, NULL);
	if (!t)
		return NULL;
	json_object *g = find_elem(arr(t, "tpgs"), "tag", NULL, tag, at);
	if (!g)
		rpc_fail(c, RPC_NOT_FOUND, "target %s has no TPG %" PRId64, iqn, tag);
	return g;
}

/* Copy params (but those named in skip) into o: the loader checks names and values. */
static void merge(json_object *o, json_object *params, const char *const *skip)
{
	json_object_object_foreach(params, k, v)
	{
		if (!strcmp(k, "dry_run") || in_list(skip, k))
			continue;
		json_object_object_add(o, k, json_object_get(v));
	}
}

static const char *const skip_tpg[] = { "target", "tag", NULL };
static const char *const skip_none[] = { NULL };

static int e_backstore_create(struct rpc_call *c, json_object *doc)
{
	const char *name;
	if (str_param(c, "name", true, &name))
		return -1;
	json_object *a = arr(doc, "backstores");
	if (find_elem(a, "name", name, 0, NULL))
		return rpc_fail(c, RPC_REFUSED, "backstore '%s' exists", name);
	json_object *b = json_object_new_object();
	merge(b, c->params, skip_none);
	json_object_array_add(a, b);
	return 0;
}

static int e_backstore_set(struct rpc_call *c, json_object *doc)
{
	const char *name;
	if (str_param(c, "name", true, &name))
		return -1;
	json_object *b = find_elem(arr(doc, "backstores"), "name", name, 0, NULL);
	if (!b)
		return rpc_fail(c, RPC_NOT_FOUND, "no backstore '%s'", name);
	merge(b, c->params, skip_none);
	return 0;
}

/* Where backstore index bi is used, as a path for a message (or NULL). */
static bool backstore_user(json_object *doc, const char *name, char *out, size_t n)
{
	json_object *ts = arr(doc, "targets");
	for (size_t i = 0; i < json_object_array_length(ts); i++) {
		json_object *t = json_object_array_get_idx(ts, i), *iqn, *tags = arr(t, "tpgs");
		json_object_object_get_ex(t, "iqn", &iqn);
		for (size_t j = 0; j < json_object_array_length(tags); j++) {
			json_object *g = json_object_array_get_idx(tags, j), *tag, *luns = arr(g, "luns");
			json_object_object_get_ex(g, "tag", &tag);
			for (size_t k = 0; k < json_object_array_length(luns); k++) {
				json_object *l = json_object_array_get_idx(luns, k), *b, *id;
				if (json_object_object_get_ex(l, "backstore", &b) && !strcmp(json_object_get_string(b), name)) {
					json_object_object_get_ex(l, "lun", &id);
					snprintf(out, n, "/iscsi/%s/tpg%s/lun%s", json_object_get_string(iqn),
						 json_object_get_string(tag), json_object_get_string(id));
					return true;
				}
			}
		}
	}
	return false;
}

static int e_backstore_delete(struct rpc_call *c, json_object *doc)
{
	const char *name;
	size_t at;
	char user[512];
	if (str_param(c, "name", true, &name))
		return -1;
	if (!find_elem(arr(doc, "backstores"), "name", name, 0, &at))
		return rpc_fail(c, RPC_NOT_FOUND, "no backstore '%s'", name);
	if (backstore_user(doc, name, user, sizeof(user)))
		return rpc_fail(c, RPC_REFUSED, "backstore '%s' is used by %s: remove that LUN first", name, user);
	json_object_array_del_idx(arr(doc, "backstores"), at, 1);
	return 0;
}

static int e_target_create(struct rpc_call *c, json_object *doc)
{
	const char *iqn;
	if (str_param(c, "iqn", true, &iqn))
		return -1;
	json_object *a = arr(doc, "targets");
	if (find_elem(a, "iqn", iqn, 0, NULL))
		return rpc_fail(c, RPC_REFUSED, "target %s exists", iqn);
	json_object *t = json_object_new_object();
	merge(t, c->params, skip_none);
	if (!json_object_object_get_ex(t, "tpgs", NULL)) {
		/* As targetcli does: a target comes with TPG 1, enabled, to which portals and LUNs are added. */
		json_object *tpgs = json_object_new_array(), *g = json_object_new_object();
		json_object_object_add(g, "tag", json_object_new_int(1));
		json_object_object_add(g, "enable", json_object_new_boolean(true));
		json_object_array_add(tpgs, g);
		json_object_object_add(t, "tpgs", tpgs);
	}
	json_object_array_add(a, t);
	return 0;
}

static int e_target_delete(struct rpc_call *c, json_object *doc)
{
	const char *iqn;
	size_t at;
	if (str_param(c, "iqn", true, &iqn) || !doc_target(c, doc, iqn, &at))
		return -1;
	json_object_array_del_idx(arr(doc, "targets"), at, 1);
	return 0;
}

/* The "alua" object of target t (iqn) in doc: the running one written out when the document has none. */
static json_object *doc_alua(struct rpc_call *c, json_object *t, const char *iqn)
{
	json_object *a;
	if (json_object_object_get_ex(t, "alua", &a) && json_object_is_type(a, json_type_object))
		return a;
	const struct config *cfg = rpc_st.cfg;
	size_t i = 0;
	while (i < cfg->ntargets && strcmp(cfg->targets[i].iqn, iqn))
		i++;
	if (i == cfg->ntargets)
		return rpc_fail(c, RPC_REFUSED, "target %s is new: give it its ALUA groups once it exists", iqn), NULL;
	if (!(a = config_alua_obj(&cfg->targets[i])))
		return rpc_fail(c, RPC_INTERNAL, "out of memory"), NULL;
	json_object_object_add(t, "alua", a);
	return a;
}

/* The ALUA group id of target t (iqn), or NULL (not found: message set). */
static json_object *doc_alua_group(struct rpc_call *c, json_object *t, const char *iqn, int64_t id)
{
	json_object *a = doc_alua(c, t, iqn), *g;
	if (!a)
		return NULL;
	if (!(g = find_elem(arr(a, "groups"), "id", NULL, id, NULL)))
		rpc_fail(c, RPC_NOT_FOUND, "target %s has no ALUA target port group %" PRId64, iqn, id);
	return g;
}

static int e_tpg_create(struct rpc_call *c, json_object *doc)
{
	static const char *const skip[] = { "target", "tag", "alua_group", NULL };
	const char *iqn;
	int64_t tag = 0, group = 0;
	if (str_param(c, "target", true, &iqn) || int_param(c, "tag", true, &tag) ||
	    int_param(c, "alua_group", false, &group))
		return -1;
	json_object *t = doc_target(c, doc, iqn, NULL);
	if (!t)
		return -1;
	if (find_elem(arr(t, "tpgs"), "tag", NULL, tag, NULL))
		return rpc_fail(c, RPC_REFUSED, "target %s has a TPG %" PRId64 " already", iqn, tag);
	if (group) {
		/* Its relative port joins an ALUA target port group in the same change. */
		json_object *ag = doc_alua_group(c, t, iqn, group);
		if (!ag)
			return -1;
		json_object_array_add(arr(ag, "tpgs"), json_object_new_int64(tag));
	}
	json_object *g = json_object_new_object();
	json_object_object_add(g, "tag", json_object_new_int64(tag));
	merge(g, c->params, skip);
	json_object_array_add(arr(t, "tpgs"), g);
	return 0;
}

static int e_tpg_delete(struct rpc_call *c, json_object *doc)
{
	size_t at;
	if (!doc_tpg(c, doc, &at))
		return -1;
	const char *iqn;
	int64_t tag = 0;
	str_param(c, "target", true, &iqn);
	int_param(c, "tag", true, &tag);
	json_object *t = doc_target(c, doc, iqn, NULL), *a;
	json_object_array_del_idx(arr(t, "tpgs"), at, 1);
	/* Its relative port leaves its ALUA group with it. */
	if (json_object_object_get_ex(t, "alua", &a) && json_object_is_type(a, json_type_object)) {
		json_object *gs = arr(a, "groups");
		for (size_t i = 0; i < json_object_array_length(gs); i++) {
			json_object *ports = arr(json_object_array_get_idx(gs, i), "tpgs");
			for (size_t j = json_object_array_length(ports); j-- > 0;)
				if (json_object_get_int64(json_object_array_get_idx(ports, j)) == tag)
					json_object_array_del_idx(ports, j, 1);
		}
	}
	return 0;
}

static int e_tpg_set(struct rpc_call *c, json_object *doc)
{
	json_object *g = doc_tpg(c, doc, NULL);
	if (!g)
		return -1;
	for (const char *const *k = (const char *const[]){ "portals", "luns", "acls", NULL }; *k; k++)
		if (json_object_object_get_ex(c->params, *k, NULL))
			return rpc_fail(c, RPC_INVALID_PARAMS, "%s: changed with the portal.*, lun.* and acl.* methods", *k);
	json_object *np;
	if (json_object_object_get_ex(c->params, "params", &np) && json_object_is_type(np, json_type_object)) {
		/* Negotiation parameters are merged one by one: the others keep their values. */
		json_object *cur;
		if (!json_object_object_get_ex(g, "params", &cur)) {
			cur = json_object_new_object();
			json_object_object_add(g, "params", cur);
		}
		merge(cur, np, skip_none);
	}
	static const char *const skip[] = { "target", "tag", "params", NULL };
	merge(g, c->params, skip);
	return 0;
}

static int e_tpg_enable(struct rpc_call *c, json_object *doc)
{
	json_object *g;
	if (!(g = doc_tpg(c, doc, NULL)))
		return -1;
	json_object_object_add(g, "enable", json_object_new_boolean(true));
	return 0;
}

static int e_tpg_disable(struct rpc_call *c, json_object *doc)
{
	json_object *g;
	if (!(g = doc_tpg(c, doc, NULL)))
		return -1;
	json_object_object_add(g, "enable", json_object_new_boolean(false));
	return 0;
}

/* The portal named by ip, port (default 3260) and iser (default false) in TPG g's portals. */
static json_object *find_portal(struct rpc_call *c, json_object *g, size_t *at, json_object **made)
{
	const char *ip;
	int64_t port = 3260;
	if (str_param(c, "ip", true, &ip) || int_param(c, "port", false, &port))
		return NULL;
	bool iser = bool_param(c, "iser");
	json_object *ps = arr(g, "portals");
	for (size_t i = 0; i < json_object_array_length(ps); i++) {
		json_object *p = json_object_array_get_idx(ps, i), *v;
		int64_t pp = json_object_object_get_ex(p, "port", &v) ? json_object_get_int64(v) : 3260;
		bool pi = json_object_object_get_ex(p, "iser", &v) && json_object_get_boolean(v);
		if (json_object_object_get_ex(p, "ip", &v) && !strcmp(json_object_get_string(v), ip) && pp == port &&
		    pi == iser) {
			*at = i;
			return p;
		}
	}
	*made = json_object_new_object();
	json_object_object_add(*made, "ip", json_object_new_string(ip));
	json_object_object_add(*made, "port", json_object_new_int64(port));
	json_object_object_add(*made, "iser", json_object_new_boolean(iser));
	return NULL;
}

static int e_portal_add(struct rpc_call *c, json_object *doc)
{
	json_object *g = doc_tpg(c, doc, NULL), *made = NULL;
	size_t at;
	if (!g)
		return -1;
	if (find_portal(c, g, &at, &made))
		return rpc_fail(c, RPC_REFUSED, "the TPG has that portal already");
	if (!made)
		return -1;
	json_object_array_add(arr(g, "portals"), made);
	return 0;
}

static int e_portal_remove(struct rpc_call *c, json_object *doc)
{
	json_object *g = doc_tpg(c, doc, NULL), *made = NULL;
	size_t at;
	if (!g)
		return -1;
	if (!find_portal(c, g, &at, &made)) {
		if (!made)
			return -1;
		json_object_put(made);
		return rpc_fail(c, RPC_NOT_FOUND, "the TPG has no such portal");
	}
	json_object_array_del_idx(arr(g, "portals"), at, 1);
	return 0;
}

/* The running TPG named by params target and tag, its indexes in *ti and *gi; NULL: not found (error set). */
static struct cfg_tpg *running_tpg(struct rpc_call *c, size_t *ti, size_t *gi)
{
	const char *iqn;
	int64_t tag = 0;
	if (str_param(c, "target", true, &iqn) || int_param(c, "tag", true, &tag))
		return NULL;
	struct config *cfg = rpc_st.cfg;
	for (*ti = 0; *ti < cfg->ntargets && strcmp(cfg->targets[*ti].iqn, iqn); (*ti)++)
		;
	if (*ti == cfg->ntargets)
		return rpc_fail(c, RPC_NOT_FOUND, "no target %s", iqn), NULL;
	struct cfg_target *t = &cfg->targets[*ti];
	for (*gi = 0; *gi < t->ntpgs && t->tpgs[*gi].tag != tag; (*gi)++)
		;
	if (*gi == t->ntpgs)
		return rpc_fail(c, RPC_NOT_FOUND, "target %s has no TPG %" PRId64, iqn, tag), NULL;
	return &t->tpgs[*gi];
}

/*
 * lun.add's LUN as an object of the file: the number given, or the lowest
 * free one in g (as targetcli picks), in *lun.  Both ways of carrying out
 * lun.add take it from here.
 */
static json_object *new_lun(struct rpc_call *c, const struct cfg_tpg *g, int64_t *lun)
{
	const char *bs;
	*lun = -1;
	if (str_param(c, "backstore", true, &bs) || int_param(c, "lun", false, lun))
		return NULL;
	uint8_t *used = calloc(16384 / 8, 1);
	if (!used)
		return rpc_fail(c, RPC_INTERNAL, "out of memory"), NULL;
	for (size_t i = 0; i < g->nluns; i++)
		used[g->luns[i].lun / 8] |= (uint8_t)(1u << (g->luns[i].lun % 8));
	bool taken = *lun >= 0 && (used[*lun / 8] & (1u << (*lun % 8)));
	if (*lun < 0)
		for (*lun = 0; *lun < 16384 && (used[*lun / 8] & (1u << (*lun % 8))); (*lun)++)
			;
	free(used);
	if (taken)
		return rpc_fail(c, RPC_REFUSED, "LUN %" PRId64 " exists in this TPG", *lun), NULL;
	json_object *l = json_object_new_object();
	json_object_object_add(l, "lun", json_object_new_int64(*lun));
	json_object_object_add(l, "backstore", json_object_new_string(bs));
	if (json_object_object_get_ex(c->params, "read_only", NULL))
		json_object_object_add(l, "read_only", json_object_new_boolean(bool_param(c, "read_only")));
	return l;
}

/* The document was made from the running configuration just now: the running TPG numbers the LUN. */
static int e_lun_add(struct rpc_call *c, json_object *doc)
{
	json_object *g, *l;
	const struct cfg_tpg *run;
	size_t ti, gi;
	int64_t lun;
	if (!(g = doc_tpg(c, doc, NULL)) || !(run = running_tpg(c, &ti, &gi)) || !(l = new_lun(c, run, &lun)))
		return -1;
	json_object_array_add(arr(g, "luns"), l);
	return 0;
}

/* Mapped LUNs of every ACL pointing at tpg_lun (removing a LUN removes its mappings, as in LIO). */
static void unmap_everywhere(json_object *g, int64_t tpg_lun)
{
	json_object *acls = arr(g, "acls");
	for (size_t i = 0; i < json_object_array_length(acls); i++) {
		json_object *ml = arr(json_object_array_get_idx(acls, i), "mapped_luns");
		size_t at;
		while (find_elem(ml, "tpg_lun", NULL, tpg_lun, &at))
			json_object_array_del_idx(ml, at, 1);
	}
}

static int e_lun_remove(struct rpc_call *c, json_object *doc)
{
	json_object *g;
	int64_t lun = 0;
	size_t at;
	if (!(g = doc_tpg(c, doc, NULL)) || int_param(c, "lun", true, &lun))
		return -1;
	if (!find_elem(arr(g, "luns"), "lun", NULL, lun, &at))
		return rpc_fail(c, RPC_NOT_FOUND, "no LUN %" PRId64 " in this TPG", lun);
	json_object_array_del_idx(arr(g, "luns"), at, 1);
	unmap_everywhere(g, lun);
	return 0;
}

static int e_acl_add(struct rpc_call *c, json_object *doc)
{
	json_object *g = doc_tpg(c, doc, NULL);
	const char *ini;
	if (!g || str_param(c, "initiator", true, &ini))
		return -1;
	json_object *acls = arr(g, "acls");
	if (find_elem(acls, "initiator", ini, 0, NULL))
		return rpc_fail(c, RPC_REFUSED, "the TPG has an ACL for %s already", ini);
	json_object *a = json_object_new_object();
	merge(a, c->params, skip_tpg);
	if (!json_object_object_get_ex(a, "mapped_luns", NULL)) {
		/* Every LUN of the TPG, at its own number (targetcli's auto_add_mapped_luns). */
		json_object *ml = json_object_new_array(), *luns = arr(g, "luns");
		for (size_t i = 0; i < json_object_array_length(luns); i++) {
			json_object *l = json_object_array_get_idx(luns, i), *id, *m = json_object_new_object();
			json_object_object_get_ex(l, "lun", &id);
			json_object_object_add(m, "mapped_lun", json_object_get(id));
			json_object_object_add(m, "tpg_lun", json_object_get(id));
			json_object_array_add(ml, m);
		}
		json_object_object_add(a, "mapped_luns", ml);
	}
	json_object_array_add(acls, a);
	return 0;
}

static json_object *doc_acl(struct rpc_call *c, json_object *doc, size_t *at)
{
	json_object *g = doc_tpg(c, doc, NULL);
	const char *ini;
	if (!g || str_param(c, "initiator", true, &ini))
		return NULL;
	json_object *a = find_elem(arr(g, "acls"), "initiator", ini, 0, at);
	if (!a)
		rpc_fail(c, RPC_NOT_FOUND, "the TPG has no ACL for %s", ini);
	return a;
}

static int e_acl_remove(struct rpc_call *c, json_object *doc)
{
	size_t at;
	if (!doc_acl(c, doc, &at))
		return -1;
	json_object_array_del_idx(arr(doc_tpg(c, doc, NULL), "acls"), at, 1);
	return 0;
}

static int e_acl_set(struct rpc_call *c, json_object *doc)
{
	json_object *a = doc_acl(c, doc, NULL);
	if (!a)
		return -1;
	if (json_object_object_get_ex(c->params, "mapped_luns", NULL))
		return rpc_fail(c, RPC_INVALID_PARAMS, "mapped_luns: changed with mapped_lun.add and mapped_lun.remove");
	static const char *const skip[] = { "target", "tag", "initiator", NULL };
	merge(a, c->params, skip);
	json_object *chap;
	if (json_object_object_get_ex(a, "chap", &chap) && json_object_is_type(chap, json_type_null))
		json_object_object_del(a, "chap"); /* "chap": null turns CHAP off */
	return 0;
}

static int e_mapped_lun_add(struct rpc_call *c, json_object *doc)
{
	json_object *a;
	int64_t m = 0, t = 0;
	if (!(a = doc_acl(c, doc, NULL)) || int_param(c, "mapped_lun", true, &m) ||
	    int_param(c, "tpg_lun", true, &t))
		return -1;
	json_object *ml = arr(a, "mapped_luns");
	if (find_elem(ml, "mapped_lun", NULL, m, NULL))
		return rpc_fail(c, RPC_REFUSED, "mapped LUN %" PRId64 " exists in this ACL", m);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "mapped_lun", json_object_new_int64(m));
	json_object_object_add(o, "tpg_lun", json_object_new_int64(t));
	if (json_object_object_get_ex(c->params, "write_protect", NULL))
		json_object_object_add(o, "write_protect", json_object_new_boolean(bool_param(c, "write_protect")));
	json_object_array_add(ml, o);
	return 0;
}

static int e_mapped_lun_remove(struct rpc_call *c, json_object *doc)
{
	json_object *a;
	int64_t m = 0;
	size_t at;
	if (!(a = doc_acl(c, doc, NULL)) || int_param(c, "mapped_lun", true, &m))
		return -1;
	if (!find_elem(arr(a, "mapped_luns"), "mapped_lun", NULL, m, &at))
		return rpc_fail(c, RPC_NOT_FOUND, "no mapped LUN %" PRId64 " in this ACL", m);
	json_object_array_del_idx(arr(a, "mapped_luns"), at, 1);
	return 0;
}

/* alua.set: a group's state or preference, or the target's mode and transition time. */
static int e_alua_set(struct rpc_call *c, json_object *doc)
{
	const char *iqn;
	int64_t id = 0;
	json_object *t, *v;
	if (str_param(c, "target", true, &iqn) || int_param(c, "group", false, &id) ||
	    !(t = doc_target(c, doc, iqn, NULL)))
		return -1;
	bool per_group = json_object_object_get_ex(c->params, "state", NULL) ||
			 json_object_object_get_ex(c->params, "preferred", NULL);
	bool per_target = json_object_object_get_ex(c->params, "mode", NULL) ||
			  json_object_object_get_ex(c->params, "transition_time", NULL);
	if (!per_group && !per_target)
		return rpc_fail(c, RPC_INVALID_PARAMS, "nothing to set: give group with state or preferred, or mode, "
						       "or transition_time");
	if (per_group && !id)
		return rpc_fail(c, RPC_INVALID_PARAMS, "group: required with state and preferred");
	json_object *a = doc_alua(c, t, iqn);
	if (!a)
		return -1;
	if (per_group) {
		json_object *g = doc_alua_group(c, t, iqn, id);
		if (!g)
			return -1;
		/* The loader checks the values and names the field, as in a file. */
		if (json_object_object_get_ex(c->params, "state", &v))
			json_object_object_add(g, "state", json_object_get(v));
		if (json_object_object_get_ex(c->params, "preferred", &v))
			json_object_object_add(g, "preferred", json_object_get(v));
	}
	if (json_object_object_get_ex(c->params, "mode", &v))
		json_object_object_add(a, "mode", json_object_get(v));
	if (json_object_object_get_ex(c->params, "transition_time", &v))
		json_object_object_add(a, "transition_time", json_object_get(v));
	return 0;
}

static int e_discovery_set(struct rpc_call *c, json_object *doc)
{
	json_object *d;
	if (!json_object_object_get_ex(doc, "discovery", &d)) {
		d = json_object_new_object();
		json_object_object_add(doc, "discovery", d);
	}
	merge(d, c->params, skip_none);
	json_object *chap;
	if (json_object_object_get_ex(d, "chap", &chap) && json_object_is_type(chap, json_type_null))
		json_object_object_del(d, "chap");
	return 0;
}

#define CHANGE_METHOD(name)                                  \
	static int m_##name(struct rpc_call *c)              \
	{                                                    \
		return change(c, e_##name);                  \
	}
CHANGE_METHOD(backstore_delete)
CHANGE_METHOD(backstore_set)
CHANGE_METHOD(target_create)
CHANGE_METHOD(target_delete)
CHANGE_METHOD(tpg_create)
CHANGE_METHOD(tpg_delete)
CHANGE_METHOD(tpg_set)
CHANGE_METHOD(tpg_enable)
CHANGE_METHOD(tpg_disable)
CHANGE_METHOD(portal_add)
CHANGE_METHOD(portal_remove)
CHANGE_METHOD(lun_remove)
CHANGE_METHOD(acl_add)
CHANGE_METHOD(acl_remove)
CHANGE_METHOD(acl_set)
CHANGE_METHOD(mapped_lun_add)
CHANGE_METHOD(mapped_lun_remove)
CHANGE_METHOD(discovery_set)
CHANGE_METHOD(alua_set)

/* alua.show: every target's (or one target's) ALUA groups with their running states. */
static int m_alua_show(struct rpc_call *c)
{
	const char *iqn;
	if (str_param(c, "target", false, &iqn))
		return -1;
	const struct config *cfg = rpc_st.cfg;
	json_object *ts = json_object_new_array();
	for (size_t i = 0; i < cfg->ntargets; i++) {
		const struct cfg_target *t = &cfg->targets[i];
		if (iqn && strcmp(iqn, t->iqn))
			continue;
		json_object *a = config_alua_obj(t), *gs;
		if (!a) {
			json_object_put(ts);
			return rpc_fail(c, RPC_INTERNAL, "out of memory");
		}
		json_object_object_add(a, "target", json_object_new_string(t->iqn));
		json_object_object_add(a, "configured", json_object_new_boolean(t->alua_given));
		json_object_object_get_ex(a, "groups", &gs);
		for (size_t j = 0; j < json_object_array_length(gs); j++)
			json_object_object_add(json_object_array_get_idx(gs, j), "status",
					       json_object_new_string(iscsi_alua_status(t->iqn, t->alua_groups[j].id)));
		json_object_array_add(ts, a);
	}
	if (iqn && !json_object_array_length(ts)) {
		json_object_put(ts);
		return rpc_fail(c, RPC_NOT_FOUND, "no target %s", iqn);
	}
	c->result = json_object_new_object();
	json_object_object_add(c->result, "targets", ts);
	return 0;
}

/*
 * Creating backstores and LUNs one at a time is what scripts do by the
 * thousand, so these two skip the whole-document round trip: the new object
 * is checked as the next element of its array by the loader's own code
 * (config_check_*), opened, and appended under the configuration lock.
 * Creating the 4000th LUN then costs what the first did (tools/bench-admin.py).
 */
static int one_step(struct rpc_call *c, const char *path, int closed, int changed)
{
	c->result = json_object_new_object();
	json_object *plan = json_object_new_array(), *st = json_object_new_object();
	json_object_object_add(st, "op", json_object_new_string("create"));
	json_object_object_add(st, "path", json_object_new_string(path));
	json_object_array_add(plan, st);
	json_object_object_add(c->result, "dry_run", json_object_new_boolean(false));
	json_object_object_add(c->result, "plan", plan);
	json_object_object_add(c->result, "restart_needed", json_object_new_array());
	json_object_object_add(c->result, "sessions_closed", json_object_new_int(closed));
	json_object_object_add(c->result, "sessions_with_new_luns", json_object_new_int(changed));
	json_object_object_add(c->result, "generation", json_object_new_uint64(rpc_st.generation + 1));
	return 0;
}

static int m_backstore_create(struct rpc_call *c)
{
	const char *name;
	if (bool_param(c, "dry_run") || rpc_plan_only)
		return change(c, e_backstore_create);
	if (str_param(c, "name", true, &name))
		return -1;
	json_object *obj = json_object_new_object();
	merge(obj, c->params, skip_none);
	struct cfg_backstore b;
	char err[768] = "", path[320];
	int rc = config_check_backstore(rpc_st.cfg, obj, "the change", &b, err, sizeof(err));
	json_object_put(obj);
	if (rc)
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	if (iscsi_backstore_open(&b, err, sizeof(err))) {
		config_backstore_clear(&b);
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	}
	pthread_rwlock_wrlock(&iscsi_g.cfg_lock);
	rc = config_append_backstore(rpc_st.cfg, &b);
	pthread_rwlock_unlock(&iscsi_g.cfg_lock);
	if (rc) {
		iscsi_backstore_close(&b);
		config_backstore_clear(&b);
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	}
	snprintf(path, sizeof(path), "/backstores/%s", name);
	return one_step(c, path, 0, 0);
}

static int m_lun_add(struct rpc_call *c)
{
	const struct cfg_tpg *g;
	json_object *obj;
	size_t ti, gi;
	int64_t lun;
	if (bool_param(c, "dry_run") || rpc_plan_only)
		return change(c, e_lun_add);
	if (!(g = running_tpg(c, &ti, &gi)) || !(obj = new_lun(c, g, &lun)))
		return -1;
	struct config *cfg = rpc_st.cfg;
	struct cfg_lun l;
	char err[768] = "", path[600];
	int rc = config_check_lun(cfg, ti, gi, obj, "the change", &l, err, sizeof(err));
	json_object_put(obj);
	if (rc)
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	pthread_rwlock_wrlock(&iscsi_g.cfg_lock);
	rc = config_append_lun(cfg, ti, gi, &l);
	pthread_rwlock_unlock(&iscsi_g.cfg_lock);
	if (rc) {
		free(l.backstore);
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	}
	int closed = 0, changed = 0;
	if (admin_refresh_sessions(&closed, &changed, err, sizeof(err)))
		log_warn("after lun.add: %s", err);
	snprintf(path, sizeof(path), "/iscsi/%s/tpg%" PRIu16 "/luns/lun%" PRId64, cfg->targets[ti].iqn, g->tag, lun);
	return one_step(c, path, closed, changed);
}

/* apply: a whole document (a file, or given inline) becomes the running configuration. */
static int m_apply(struct rpc_call *c)
{
	const char *path;
	json_object *inline_cfg = NULL;
	char err[768] = "";
	struct config *n = NULL;
	if (str_param(c, "path", false, &path))
		return -1;
	json_object_object_get_ex(c->params, "config", &inline_cfg);
	if (!path == !inline_cfg)
		return rpc_fail(c, RPC_INVALID_PARAMS, "give path (a file isertd reads) or config (the document)");
	int rc = path ? config_load_file(path, &n, err, sizeof(err))
		      : config_load_string(json_object_to_json_string_ext(inline_cfg, JSON_C_TO_STRING_PLAIN), "config",
					   &n, err, sizeof(err));
	if (rc)
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	return apply_config(c, n, bool_param(c, "dry_run"));
}

/* restore: the file, or only one target or one backstore of it, into the running configuration. */
static int m_restore(struct rpc_call *c)
{
	const char *path, *iqn, *bsname;
	char err[768] = "";
	struct config *f = NULL;
	if (str_param(c, "path", true, &path) || str_param(c, "target", false, &iqn) ||
	    str_param(c, "backstore", false, &bsname))
		return -1;
	if (iqn && bsname)
		return rpc_fail(c, RPC_INVALID_PARAMS, "target or backstore, not both");
	if (config_load_file(path, &f, err, sizeof(err)))
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	if (!iqn && !bsname)
		return apply_config(c, f, bool_param(c, "dry_run"));
	json_object *from = config_to_obj(f), *doc = config_to_obj(rpc_st.cfg);
	config_free(f);
	int rc = -1;
	if (!from || !doc) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		goto out;
	}
	json_object *fb = arr(from, "backstores"), *db = arr(doc, "backstores");
	/* The backstores to take from the file: the one named, or those the target's LUNs use. */
	json_object *want = json_object_new_array();
	if (bsname) {
		json_object *b = find_elem(fb, "name", bsname, 0, NULL);
		if (!b) {
			json_object_put(want);
			rpc_fail(c, RPC_NOT_FOUND, "%s has no backstore '%s'", path, bsname);
			goto out;
		}
		json_object_array_add(want, json_object_get(b));
	} else {
		size_t at;
		json_object *t = find_elem(arr(from, "targets"), "iqn", iqn, 0, NULL);
		if (!t) {
			json_object_put(want);
			rpc_fail(c, RPC_NOT_FOUND, "%s has no target %s", path, iqn);
			goto out;
		}
		json_object *dt = arr(doc, "targets");
		if (find_elem(dt, "iqn", iqn, 0, &at))
			json_object_array_put_idx(dt, at, json_object_get(t));
		else
			json_object_array_add(dt, json_object_get(t));
		json_object *tpgs = arr(t, "tpgs");
		for (size_t j = 0; j < json_object_array_length(tpgs); j++) {
			json_object *luns = arr(json_object_array_get_idx(tpgs, j), "luns");
			for (size_t k = 0; k < json_object_array_length(luns); k++) {
				json_object *bn;
				if (!json_object_object_get_ex(json_object_array_get_idx(luns, k), "backstore", &bn))
					continue;
				json_object *b = find_elem(fb, "name", json_object_get_string(bn), 0, NULL);
				if (b && !find_elem(want, "name", json_object_get_string(bn), 0, NULL))
					json_object_array_add(want, json_object_get(b));
			}
		}
	}
	for (size_t i = 0; i < json_object_array_length(want); i++) {
		json_object *b = json_object_array_get_idx(want, i), *bn;
		size_t at;
		json_object_object_get_ex(b, "name", &bn);
		if (find_elem(db, "name", json_object_get_string(bn), 0, &at))
			json_object_array_put_idx(db, at, json_object_get(b));
		else
			json_object_array_add(db, json_object_get(b));
	}
	json_object_put(want);
	struct config *n = check_doc(c, doc);
	rc = n ? apply_config(c, n, bool_param(c, "dry_run")) : -1;
out:
	json_object_put(from);
	json_object_put(doc);
	return rc;
}

/* Global settings that need a restart: global.set names them in its refusal. */
static const char *const restart_globals[] = { "reactors", "poll_mode", "iser_srq", "admin_socket", "tcp_keepalive",
					       "buffer_pool_mb", "metrics", "state_dir", NULL };

static const struct rpc_method *method_named(const char *name)
{
	const struct rpc_method *m = rpc_methods;
	while (m->name && strcmp(m->name, name))
		m++;
	return m;
}

/* Its table holds the keys that apply at once; a restart key is refused by name, any other as unknown. */
static int m_global_set(struct rpc_call *c)
{
	const struct rpc_method *m = method_named("global.set");
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
		if (!param_of(m, k))
			return unknown_param(c, m, k);
	}
	json_object *doc = config_to_obj(rpc_st.cfg), *glob;
	if (!doc)
		return rpc_fail(c, RPC_INTERNAL, "out of memory");
	json_object_object_get_ex(doc, "global", &glob);
	json_object_object_foreach(c->params, k2, v2)
		json_object_object_add(glob, k2, json_object_get(v2));
	struct config *n = check_doc(c, doc);
	json_object_put(doc);
	return n ? apply_config(c, n, false) : -1;
}

/*
 * The parameter tables (rpc_check_params checks a request against its
 * method's; rpc.methods lists them; tests/integration/test_admin.py holds
 * docs/admin.md's method table to them).
 */
#define P_STR(n, req)        { n, RPC_P_STR, req, 0, 0, false, NULL }
#define P_INT(n, req, lo, hi) { n, RPC_P_INT, req, lo, hi, false, NULL }
#define P_BOOL(n)            { n, RPC_P_BOOL, false, 0, 0, false, NULL }
#define P_VALUE(n)           { n, RPC_P_VALUE, false, 0, 0, false, NULL }
#define P_SECRET(n)          { n, RPC_P_VALUE, false, 0, 0, true, NULL }
#define P_DRY_RUN            P_BOOL("dry_run")
#define P_TPG                P_STR("target", true), P_INT("tag", true, 1, 65535)
#define P_END                { NULL, RPC_P_VALUE, false, 0, 0, false, NULL }
/* An initiator name in its shown form (common/utf8.h): up to 4 bytes of text per byte of a 223-byte name. */
#define P_INITIATOR(req)     { "initiator", RPC_P_STR, req, 0, 1023, false, NULL }

static const struct rpc_param p_none[] = { P_END };
static const struct rpc_param p_config_get[] = { P_BOOL("show_secrets"), P_END };
static const struct rpc_param p_sessions[] = { P_INITIATOR(false), P_STR("target", false),
					       P_INT("tsih", false, 1, 65535), P_END };
static const struct rpc_param p_stats[] = { P_STR("target", false), P_INITIATOR(false),
					    P_INT("lun", false, 0, INT64_MAX), P_INT("tsih", false, 1, 65535),
					    P_STR("cursor", false), P_INT("limit", false, 1, STATS_PAGE_MAX),
					    { "sections", RPC_P_ARRAY, false, 0, 0, false, NULL }, P_END };
static const struct rpc_param p_session_close[] = { P_INT("tsih", true, 1, 65535), P_END };
static const struct rpc_param p_save[] = { P_STR("path", false), P_INT("backups", false, 0, SAVE_BACKUPS_MAX), P_END };
static const struct rpc_param p_apply[] = { P_STR("path", false), { "config", RPC_P_OBJECT, false, 0, 0, false, NULL },
					    P_DRY_RUN, P_END };
static const struct rpc_param p_restore[] = { P_STR("path", true), P_STR("target", false), P_STR("backstore", false),
					      P_DRY_RUN, P_END };
static const struct rpc_param p_name[] = { P_STR("name", true), P_DRY_RUN, P_END };
static const struct rpc_param p_backstore_resize[] = {
	P_STR("name", true),
	{ "size", RPC_P_VALUE, true, 0, 0, false,
	  "(bytes, or a string such as \"20G\"; 0 for a block or nvme backstore: follow the device)" },
	P_END };
static const struct rpc_param p_iqn[] = { P_STR("iqn", true), P_DRY_RUN, P_END };
static const struct rpc_param p_tpg[] = { P_TPG, P_DRY_RUN, P_END };
static const struct rpc_param p_tpg_create[] = { P_TPG, P_INT("alua_group", false, 1, 65535), P_DRY_RUN, P_END };
static const struct rpc_param p_tpg_set[] = { P_TPG, P_SECRET("demo_chap"), P_DRY_RUN, P_END };
static const struct rpc_param p_portal[] = { P_TPG, P_STR("ip", true), P_INT("port", false, 1, 65535), P_BOOL("iser"),
					     P_DRY_RUN, P_END };
static const struct rpc_param p_lun_add[] = { P_TPG, P_STR("backstore", true), P_INT("lun", false, 0, 16383),
					      P_BOOL("read_only"), P_DRY_RUN, P_END };
static const struct rpc_param p_lun_remove[] = { P_TPG, P_INT("lun", true, 0, 16383), P_DRY_RUN, P_END };
static const struct rpc_param p_acl[] = { P_TPG, P_STR("initiator", true), P_DRY_RUN, P_END };
static const struct rpc_param p_acl_chap[] = { P_TPG, P_STR("initiator", true), P_SECRET("chap"), P_DRY_RUN, P_END };
static const struct rpc_param p_mapped_lun_add[] = { P_TPG, P_STR("initiator", true), P_INT("mapped_lun", true, 0, 16383),
						     P_INT("tpg_lun", true, 0, 16383), P_BOOL("write_protect"),
						     P_DRY_RUN, P_END };
static const struct rpc_param p_mapped_lun_remove[] = { P_TPG, P_STR("initiator", true),
							P_INT("mapped_lun", true, 0, 16383), P_DRY_RUN, P_END };
static const struct rpc_param p_discovery_set[] = { P_SECRET("chap"), P_DRY_RUN, P_END };
static const struct rpc_param p_alua_show[] = { P_STR("target", false), P_END };
static const struct rpc_param p_alua_set[] = { P_STR("target", true), P_INT("group", false, 1, 65535), P_VALUE("state"),
					       P_VALUE("preferred"), P_VALUE("mode"), P_VALUE("transition_time"),
					       P_DRY_RUN, P_END };
/* The loader checks their values, as in the file. */
static const struct rpc_param p_global_set[] = { P_VALUE("login_timeout"), P_VALUE("max_connections"),
						 P_VALUE("max_connections_per_portal"), P_VALUE("max_connections_per_host"),
						 P_VALUE("max_sessions"), P_VALUE("shutdown_timeout"), P_END };

const struct rpc_method rpc_methods[] = {
	{ "rpc.methods", m_methods, false, p_none, NULL,
	  "the methods of this socket" },
	{ "config.get", m_config_get, false, p_config_get, NULL,
	  "the running configuration (as --print-config) and its generation; "
	  "CHAP secrets masked unless show_secrets (root only)" },
	{ "sessions", m_sessions, false, p_sessions, NULL,
	  "sessions with their negotiated parameters; filter by tsih, initiator, target" },
	{ "stats", m_stats, false, p_stats, NULL,
	  "statistics (docs/stats.md): luns, connections, portals, rdma_devices, reactors; "
	  "filter by target, initiator, lun, tsih; sections: which of them; luns in pages of "
	  "limit rows (at most 512) from cursor, the answer's cursor while more is true" },
	{ "stats.reset", m_stats_reset, false, p_none, NULL,
	  "zero every statistics counter (gauges stay)" },
	{ "session.close", m_session_close, false, p_session_close, NULL,
	  "close the connection of session tsih (the initiator may log in again)" },
	{ "save", m_save, false, p_save, NULL,
	  "write the running configuration to path (default: the file isertd started with), "
	  "keeping backups (default 10) in backup/ beside it" },
	{ "apply", m_apply, true, p_apply, NULL,
	  "make a whole configuration (path, or config inline) the running one, changing only "
	  "what differs; dry_run: the plan only" },
	{ "restore", m_restore, true, p_restore, NULL,
	  "the configuration in path, or only its target (iqn) or backstore (name), into "
	  "the running one; dry_run" },
	{ "backstore.create", m_backstore_create, true, p_name, "a backstore's keys in the file (type, path, size, ...)",
	  "a backstore (name, type, path, size, ... as in the file)" },
	{ "backstore.delete", m_backstore_delete, true, p_name, NULL,
	  "a backstore no LUN uses (name)" },
	{ "backstore.set", m_backstore_set, true, p_name, "a backstore's keys in the file",
	  "attributes of a backstore (write_cache and size live; the others "
	  "only while no LUN uses it)" },
	{ "backstore.resize", m_backstore_resize, true, p_backstore_resize, NULL,
	  "grow backstore name to size (file, rbd; block, nvme: size 0 follows the device)" },
	{ "target.create", m_target_create, true, p_iqn, "a target's keys in the file (alias, tpgs, alua)",
	  "a target (iqn, alias; with TPG 1 enabled unless tpgs are given)" },
	{ "target.delete", m_target_delete, true, p_iqn, NULL,
	  "a target and its TPGs (iqn); their sessions are closed" },
	{ "tpg.create", m_tpg_create, true, p_tpg_create, "a TPG's keys in the file",
	  "a TPG (target, tag, and its settings as in the file; alua_group: the "
	  "ALUA target port group its port joins)" },
	{ "tpg.delete", m_tpg_delete, true, p_tpg, NULL,
	  "a TPG (target, tag); its sessions are closed" },
	{ "tpg.set", m_tpg_set, true, p_tpg_set, "a TPG's keys in the file but portals, luns and acls; params merged key by key",
	  "settings of a TPG (enable, demo_mode, demo_write_protect, demo_target_reset, "
	  "demo_chap, params)" },
	{ "tpg.enable", m_tpg_enable, true, p_tpg, NULL,
	  "accept logins to TPG tag of target" },
	{ "tpg.disable", m_tpg_disable, true, p_tpg, NULL,
	  "refuse logins to TPG tag of target and close its sessions" },
	{ "portal.add", m_portal_add, true, p_portal, NULL,
	  "a portal (target, tag, ip, port, iser): listening at once" },
	{ "portal.remove", m_portal_remove, true, p_portal, NULL,
	  "a portal; its listener stops when no TPG has it (sessions stay)" },
	{ "lun.add", m_lun_add, true, p_lun_add, NULL,
	  "a LUN (target, tag, backstore, lun: default the lowest free, read_only)" },
	{ "lun.remove", m_lun_remove, true, p_lun_remove, NULL,
	  "a LUN (target, tag, lun) and the ACL mappings to it" },
	{ "acl.add", m_acl_add, true, p_acl_chap, "an ACL's keys in the file (allow_target_reset, mapped_luns)",
	  "an ACL (target, tag, initiator, chap, allow_target_reset; mapped_luns: default "
	  "every LUN of the TPG)" },
	{ "acl.remove", m_acl_remove, true, p_acl, NULL,
	  "an ACL (target, tag, initiator); its sessions are closed" },
	{ "acl.set", m_acl_set, true, p_acl_chap, "an ACL's keys in the file but mapped_luns",
	  "chap (null: off) or allow_target_reset of an ACL" },
	{ "mapped_lun.add", m_mapped_lun_add, true, p_mapped_lun_add, NULL,
	  "map tpg_lun as mapped_lun for an ACL (write_protect)" },
	{ "mapped_lun.remove", m_mapped_lun_remove, true, p_mapped_lun_remove, NULL,
	  "a mapped LUN of an ACL" },
	{ "discovery.set", m_discovery_set, true, p_discovery_set, "the discovery object's keys in the file (auth_required)",
	  "discovery auth_required and chap (null: off)" },
	{ "alua.show", m_alua_show, false, p_alua_show, NULL,
	  "ALUA target port groups of every target (or target): mode, transition_time, "
	  "groups with id, state, status, preferred, tpgs, remote_ports" },
	{ "alua.set", m_alua_set, true, p_alua_set, NULL,
	  "ALUA of a target: state (active_optimized, active_nonoptimized, standby, "
					"unavailable, transitioning) or preferred of group; mode; transition_time" },
	{ "global.set", m_global_set, true, p_global_set, "global keys that need a restart are refused by name",
	  "change global limits that apply at once (login_timeout, max_*, "
	  "shutdown_timeout)" },
	{ NULL, NULL, false, NULL, NULL, NULL },
};
