/*
 * Target configuration: saving, struct config -> JSON.  The document written
 * loads again to the same configuration (the unit and fuzz tests check the
 * round trip); config_save_file replaces the file atomically.  Apart from the
 * limits table (config_load.c), nothing here shares code with the loader.
 */
#include "common/netaddr.h"
#include "target/config/config_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------ */
/* Serialising: every field written explicitly, so a saved file documents the
 * effective values; optional strings only when set. */

bool cfg_put(json_object *o, const char *key, json_object *v)
{
	if (!v)
		return false;
	if (json_object_object_add(o, key, v)) {
		json_object_put(v);
		return false;
	}
	return true;
}

static bool put_str(json_object *o, const char *key, const char *s)
{
	return !s || cfg_put(o, key, json_object_new_string(s));
}

static bool arr_add(json_object *a, json_object *v)
{
	if (!v)
		return false;
	if (json_object_array_add(a, v)) {
		json_object_put(v);
		return false;
	}
	return true;
}

/* A secret from a file is saved as the file's name; compare (config_to_obj_compare) adds the secret. */
static json_object *chap_to_json(const struct cfg_chap *c, bool compare)
{
	json_object *o = json_object_new_object();
	bool ok = o && put_str(o, "userid", c->userid) &&
		  put_str(o, "password", c->password_file && !compare ? NULL : c->password) &&
		  put_str(o, "password_file", c->password_file) &&
		  put_str(o, "mutual_userid", c->mutual_userid) &&
		  put_str(o, "mutual_password", c->mutual_password_file && !compare ? NULL : c->mutual_password) &&
		  put_str(o, "mutual_password_file", c->mutual_password_file);

	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

json_object *config_backstore_obj(const struct cfg_backstore *b)
{
	json_object *o = json_object_new_object();
	bool ok = o && put_str(o, "name", b->name) &&
		  cfg_put(o, "type", json_object_new_string(backstore_kind(b->bs.type)->name)) &&
		  put_str(o, "path", b->path) &&
		  put_str(o, "pool", b->bs.rbd.pool) &&
		  put_str(o, "image", b->bs.rbd.image) &&
		  put_str(o, "namespace", b->bs.rbd.ns) &&
		  put_str(o, "cluster", b->bs.rbd.cluster) &&
		  put_str(o, "client_id", b->bs.rbd.client_id) &&
		  put_str(o, "conf", b->bs.rbd.conf) &&
		  put_str(o, "keyring", b->bs.rbd.keyring) &&
		  ((backstore_kind_has(b->bs.type, BS_KIND_IMAGE) && !b->bs.size) ||
		   cfg_put(o, "size", json_object_new_uint64(b->bs.size))) &&
		  (!b->bs.block_size || cfg_put(o, "block_size", json_object_new_int64(b->bs.block_size))) &&
		  cfg_put(o, "thin", json_object_new_boolean(b->bs.thin)) &&
		  cfg_put(o, "write_cache", json_object_new_boolean(b->bs.write_cache)) &&
		  cfg_put(o, "readonly", json_object_new_boolean(b->bs.readonly)) &&
		  (!b->bs.preallocate || cfg_put(o, "preallocate", json_object_new_boolean(true))) &&
		  put_str(o, "serial", b->serial);

	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *params_to_json(const struct cfg_params *pr)
{
	json_object *o = json_object_new_object();
	bool ok = o &&
		cfg_put(o, "MaxRecvDataSegmentLength", json_object_new_int64(pr->max_recv_dsl)) &&
		cfg_put(o, "MaxBurstLength", json_object_new_int64(pr->max_burst)) &&
		cfg_put(o, "FirstBurstLength", json_object_new_int64(pr->first_burst)) &&
		cfg_put(o, "MaxOutstandingR2T", json_object_new_int64(pr->max_outstanding_r2t)) &&
		cfg_put(o, "InitialR2T", json_object_new_boolean(pr->initial_r2t)) &&
		cfg_put(o, "ImmediateData", json_object_new_boolean(pr->immediate_data)) &&
		cfg_put(o, "HeaderDigest", json_object_new_string(pr->header_digest ? "CRC32C,None" : "None")) &&
		cfg_put(o, "DataDigest", json_object_new_string(pr->data_digest ? "CRC32C,None" : "None")) &&
		cfg_put(o, "DefaultTime2Wait", json_object_new_int64(pr->default_time2wait)) &&
		cfg_put(o, "DefaultTime2Retain", json_object_new_int64(pr->default_time2retain)) &&
		cfg_put(o, "MaxConnections", json_object_new_int64(pr->max_connections)) &&
		cfg_put(o, "QueueDepth", json_object_new_int64(pr->queue_depth)) &&
		cfg_put(o, "NopInInterval", json_object_new_int64(pr->nop_in_interval)) &&
		cfg_put(o, "MaxImmediateCommands", json_object_new_int64(pr->max_immediate)) &&
		cfg_put(o, "SessionBufferMB", json_object_new_int64(pr->session_buffer_mb));

	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *acl_to_json(const struct cfg_acl *a, bool compare)
{
	json_object *o = json_object_new_object();
	json_object *ml = json_object_new_array();
	bool ok = o && ml;

	for (size_t i = 0; ok && i < a->nluns; i++) {
		json_object *m = json_object_new_object();
		ok = m && cfg_put(m, "mapped_lun", json_object_new_uint64(a->luns[i].mapped_lun)) &&
		     cfg_put(m, "tpg_lun", json_object_new_uint64(a->luns[i].tpg_lun)) &&
		     cfg_put(m, "write_protect", json_object_new_boolean(a->luns[i].write_protect));
		if (!ok)
			json_object_put(m);
		else
			ok = arr_add(ml, m);
	}
	ok = ok && put_str(o, "initiator", a->initiator) &&
	     (!a->chap.userid || cfg_put(o, "chap", chap_to_json(&a->chap, compare))) &&
	     cfg_put(o, "allow_target_reset", json_object_new_boolean(a->allow_target_reset));
	if (ok) {
		ok = cfg_put(o, "mapped_luns", ml);
		ml = NULL;
	}
	json_object_put(ml);
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

/* "IP:PORT", "[IPv6]:PORT": the form redirect and redirect_balance are written in. */
static const char *hostport(char *buf, size_t n, const char *host, uint16_t port)
{
	netaddr_join(buf, n, host, port);
	return buf;
}

static json_object *tpg_to_json(const struct cfg_tpg *t, bool compare)
{
	json_object *o = json_object_new_object();
	json_object *ps = json_object_new_array(), *ls = json_object_new_array(),
		    *as = json_object_new_array();
	bool ok = o && ps && ls && as;

	for (size_t i = 0; ok && i < t->nportals; i++) {
		json_object *e = json_object_new_object();
		ok = e && cfg_put(e, "ip", json_object_new_string(t->portals[i].host)) &&
		     cfg_put(e, "port", json_object_new_int64(t->portals[i].port)) &&
		     cfg_put(e, "iser", json_object_new_boolean(t->portals[i].iser)) &&
		     (!t->portals[i].tos || cfg_put(e, "tos", json_object_new_int64(t->portals[i].tos)));
		ok = ok ? arr_add(ps, e) : (json_object_put(e), false);
	}
	for (size_t i = 0; ok && i < t->nluns; i++) {
		json_object *e = json_object_new_object();
		ok = e && cfg_put(e, "lun", json_object_new_uint64(t->luns[i].lun)) &&
		     cfg_put(e, "backstore", json_object_new_string(t->luns[i].backstore)) &&
		     cfg_put(e, "read_only", json_object_new_boolean(t->luns[i].read_only));
		ok = ok ? arr_add(ls, e) : (json_object_put(e), false);
	}
	for (size_t i = 0; ok && i < t->nacls; i++)
		ok = arr_add(as, acl_to_json(&t->acls[i], compare));
	ok = ok && cfg_put(o, "tag", json_object_new_int64(t->tag)) &&
	     cfg_put(o, "enable", json_object_new_boolean(t->enable)) &&
	     cfg_put(o, "demo_mode", json_object_new_boolean(t->demo_mode)) &&
	     cfg_put(o, "demo_write_protect", json_object_new_boolean(t->demo_write_protect)) &&
	     cfg_put(o, "demo_target_reset", json_object_new_boolean(t->demo_target_reset)) &&
	     (!t->demo_chap.userid || cfg_put(o, "demo_chap", chap_to_json(&t->demo_chap, compare)));
	if (ok) {
		ok = cfg_put(o, "portals", ps);
		ps = NULL;
	}
	if (ok) {
		ok = cfg_put(o, "luns", ls);
		ls = NULL;
	}
	if (ok) {
		ok = cfg_put(o, "acls", as);
		as = NULL;
	}
	ok = ok && cfg_put(o, "params", params_to_json(&t->params));
	if (ok && t->redirect_host) {
		char a[80];
		ok = cfg_put(o, "redirect", json_object_new_string(hostport(a, sizeof(a), t->redirect_host,
									       t->redirect_port))) &&
		     (!t->redirect_permanent || cfg_put(o, "redirect_type", json_object_new_string("permanent")));
	}
	if (ok && t->nbalance) {
		json_object *b = json_object_new_array();
		ok = b && cfg_put(o, "redirect_balance", b);
		for (size_t i = 0; ok && i < t->nbalance; i++) {
			const struct cfg_portal *pt = &t->portals[t->balance[i]];
			char a[80];
			ok = arr_add(b, json_object_new_string(hostport(a, sizeof(a), pt->host, pt->port)));
		}
	}
	json_object_put(ps);
	json_object_put(ls);
	json_object_put(as);
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static json_object *target_to_json(const struct cfg_target *tg, bool compare)
{
	json_object *o = json_object_new_object();
	json_object *ts = json_object_new_array();
	bool ok = o && ts;

	for (size_t i = 0; ok && i < tg->ntpgs; i++)
		ok = arr_add(ts, tpg_to_json(&tg->tpgs[i], compare));
	ok = ok && put_str(o, "iqn", tg->iqn) && put_str(o, "alias", tg->alias);
	if (ok) {
		ok = cfg_put(o, "tpgs", ts);
		ts = NULL;
	}
	ok = ok && cfg_alua_to_json(o, tg);
	json_object_put(ts);
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static const char *poll_mode_name(enum reactor_poll_mode m)
{
	switch (m) {
	case REACTOR_EVENT: return "event";
	case REACTOR_BUSY_POLL: return "busy";
	case REACTOR_ADAPTIVE: return "adaptive";
	}
	return "event";
}

static json_object *to_obj(const struct config *c, bool compare)
{
	json_object *root = json_object_new_object();
	json_object *bs = json_object_new_array(), *ts = json_object_new_array();
	json_object *disc = json_object_new_object(), *glob = json_object_new_object();
	bool ok = root && bs && ts && disc && glob;

	for (size_t i = 0; ok && i < c->nbackstores; i++)
		ok = arr_add(bs, config_backstore_obj(&c->backstores[i]));
	for (size_t i = 0; ok && i < c->ntargets; i++)
		ok = arr_add(ts, target_to_json(&c->targets[i], compare));
	ok = ok && cfg_put(disc, "auth_required", json_object_new_boolean(c->discovery_auth_required)) &&
	     (!c->discovery_chap.userid || cfg_put(disc, "chap", chap_to_json(&c->discovery_chap, compare))) &&
	     cfg_put(glob, "reactors", json_object_new_int64(c->reactors)) &&
	     cfg_put(glob, "poll_mode", json_object_new_string(poll_mode_name(c->poll_mode))) &&
	     cfg_put(glob, "iser_srq", json_object_new_int64(c->iser_srq)) &&
	     put_str(glob, "admin_socket", c->admin_socket) && put_str(glob, "metrics", c->metrics) &&
	     put_str(glob, "state_dir", c->state_dir) &&
	     (!c->isns || cfg_put(glob, "isns", cfg_isns_to_json(c->isns))) &&
	     (!c->admin_https || cfg_put(glob, "admin_https", cfg_admin_https_to_json(c->admin_https)));
	for (size_t i = 0; ok && i < cfg_nlimit_keys; i++)
		ok = cfg_put(glob, cfg_limit_keys[i].key,
			 json_object_new_int64(*cfg_limit_field((struct config *)c, &cfg_limit_keys[i])));
	json_object *parts[] = { bs, ts, disc, glob };
	const char *names[] = { "backstores", "targets", "discovery", "global" };
	for (size_t i = 0; i < 4; i++) {
		if (ok)
			ok = cfg_put(root, names[i], parts[i]);
		else
			json_object_put(parts[i]);
	}
	if (!ok) {
		json_object_put(root);
		return NULL;
	}
	return root;
}

json_object *config_to_obj(const struct config *c)
{
	return to_obj(c, false);
}

json_object *config_to_obj_compare(const struct config *c)
{
	return to_obj(c, true);
}

char *config_to_json(const struct config *c)
{
	json_object *o;
	const char *s;
	char *out = NULL;

	if (!c)
		return NULL;
	o = config_to_obj(c);
	if (!o)
		return NULL;
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
					   JSON_C_TO_STRING_NOSLASHESCAPE);
	if (s) {
		size_t n = strlen(s);
		out = malloc(n + 2);
		if (out) {
			memcpy(out, s, n);
			out[n] = '\n';
			out[n + 1] = '\0';
		}
	}
	config_wipe_text(s);
	config_wipe_secrets(o);
	json_object_put(o);
	return out;
}

/* ------------------------------------------------------------------------ */
/* Atomic save: a crash leaves either the old file or the new one. */

static int write_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		s += w;
		n -= (size_t)w;
	}
	return 0;
}

int config_save_file(const struct config *c, const char *path, char *err, size_t errlen)
{
	char *json, *tmp = NULL, *dir = NULL;
	const char *slash;
	int fd = -1, dfd, r;

	if (!c || !path || !*path)
		return -EINVAL;
	json = config_to_json(c);
	if (!json) {
		cfg_seterr(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	slash = strrchr(path, '/');
	if (slash)
		dir = slash == path ? strdup("/") : strndup(path, (size_t)(slash - path));
	else
		dir = strdup(".");
	if (!dir || asprintf(&tmp, "%s/.%s.tmpXXXXXX", dir, slash ? slash + 1 : path) < 0) {
		tmp = NULL;
		r = -ENOMEM;
		cfg_seterr(err, errlen, "%s: out of memory", path);
		goto out;
	}
	/* mkstemp creates 0600: the file holds CHAP secrets. */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		cfg_seterr(err, errlen, "%s: cannot create temporary file in %s: %s", path, dir, strerror(-r));
		free(tmp);
		tmp = NULL;
		goto out;
	}
	if ((r = write_all(fd, json, strlen(json))) ||
	    (fsync(fd) < 0 && (r = -errno))) {
		cfg_seterr(err, errlen, "%s: write %s: %s", path, tmp, strerror(-r));
		goto out;
	}
	if (close(fd) < 0) {
		fd = -1;
		r = -errno;
		cfg_seterr(err, errlen, "%s: close %s: %s", path, tmp, strerror(-r));
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) < 0) {
		r = -errno;
		cfg_seterr(err, errlen, "%s: rename from %s: %s", path, tmp, strerror(-r));
		goto out;
	}
	free(tmp);
	tmp = NULL;
	/* The rename is durable only once the directory is. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) < 0) {
		r = -errno;
		cfg_seterr(err, errlen, "%s: fsync directory %s: %s", path, dir, strerror(-r));
		if (dfd >= 0)
			close(dfd);
		goto out;
	}
	close(dfd);
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	if (tmp) {
		unlink(tmp);
		free(tmp);
	}
	free(dir);
	config_wipe_text(json);
	free(json);
	return r;
}

static bool inline_secret(const struct cfg_chap *c)
{
	return (c->password && !c->password_file) || (c->mutual_password && !c->mutual_password_file);
}

bool config_has_secrets(const struct config *c)
{
	if (inline_secret(&c->discovery_chap))
		return true;
	for (size_t i = 0; i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++) {
			const struct cfg_tpg *t = &c->targets[i].tpgs[j];
			if (inline_secret(&t->demo_chap))
				return true;
			for (size_t k = 0; k < t->nacls; k++)
				if (inline_secret(&t->acls[k].chap))
					return true;
		}
	return false;
}
