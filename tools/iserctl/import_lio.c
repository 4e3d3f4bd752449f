/*
 * iserctl import lio: targetcli's saveconfig.json (rtslib-fb's
 * RTSRoot.dump(): storage_objects, targets, fabric_modules) as an isertd
 * configuration.  Items are named by their JSON path in the input
 * (targets[0].tpgs[1].attributes.default_erl).  A value at LIO's default is
 * LIO's choice, not the admin's: where isertd has its own default for it
 * (MaxRecvDataSegmentLength, InitialR2T, the CmdSN depth), isertd's stays;
 * a value the admin changed is carried where isertd has the setting and
 * reported where it has not.  Access is never widened: an ACL or a demo
 * mode that LIO would not admit anyone through is not carried.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto/iscsi_name.h"
#include "import.h"
#include "iserctl.h"

#define PATHLEN 256

struct lio {
	struct import *im;
	bool bad;               /* a type error was reported: stop */
	json_object *map;       /* "/backstores/PLUGIN/NAME" -> our backstore name (string) */
	json_object *sos;       /* the same keys -> the storage object (its alua_tpgs) */
	json_object *gps;       /* the same keys -> {group name -> the storage object's first ALUA group of that name} */
	json_object *used_gps;  /* the same keys -> {name of an ALUA group carried -> true} */
	bool login_timeout_set;
};

static const char *at(char *buf, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *at(char *buf, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, PATHLEN, fmt, ap);
	va_end(ap);
	return buf;
}

static const char *type_name(json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null: return "null";
	case json_type_boolean: return "a boolean";
	case json_type_double: return "a number with a fraction";
	case json_type_int: return "an integer";
	case json_type_object: return "an object";
	case json_type_array: return "an array";
	default: return "a string";
	}
}

/* Member k of o, of type t (json_type_null: any), or NULL when absent; a wrong type is bad input. */
static json_object *member(struct lio *l, json_object *o, const char *path, const char *k, json_type t, bool required)
{
	char p[PATHLEN];
	json_object *v = NULL;
	bool present = o && json_object_object_get_ex(o, k, &v);
	if (!present && !required)
		return NULL;
	if (!present) {
		imp_fail(at(p, "%s%s%s", path, *path ? "." : "", k), "missing (required)");
		l->bad = true;
		return NULL;
	}
	/* rtslib writes booleans as true/false, but configfs numbers 0/1 appear too: take both. */
	bool ok = t == json_type_null || json_object_is_type(v, t) ||
		  (t == json_type_boolean && json_object_is_type(v, json_type_int));
	if (!ok) {
		imp_fail(at(p, "%s%s%s", path, *path ? "." : "", k), "expected %s, got %s",
			 t == json_type_int ? "an integer" : t == json_type_boolean ? "a boolean" : t == json_type_string ? "a string" : t == json_type_array ? "an array" : "an object",
			 type_name(v));
		l->bad = true;
		return NULL;
	}
	return v;
}

static const char *str(struct lio *l, json_object *o, const char *path, const char *k, bool required)
{
	json_object *v = member(l, o, path, k, json_type_string, required);
	return v ? json_object_get_string(v) : NULL;
}

/* An integer member; dflt when absent.  Attributes may be strings of digits (configfs text). */
static int64_t num(struct lio *l, json_object *o, const char *path, const char *k, int64_t dflt)
{
	json_object *v = get(o, k);
	if (!v)
		return dflt;
	if (json_object_is_type(v, json_type_string)) {
		char *end;
		const char *s = json_object_get_string(v);
		long long n = strtoll(s, &end, 10);
		if (*s && !*end)
			return n;
	}
	if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_boolean)) {
		char p[PATHLEN];
		imp_fail(at(p, "%s.%s", path, k), "expected an integer, got %s", type_name(v));
		l->bad = true;
		return dflt;
	}
	return json_object_get_int64(v);
}

static bool flag(struct lio *l, json_object *o, const char *path, const char *k)
{
	json_object *v = member(l, o, path, k, json_type_boolean, false);
	return v && json_object_get_int64(v) != 0;
}

/* Attributes with no isertd equivalent, and LIO's default: reported only when changed from it. */
struct attr_default {
	const char *name;
	int64_t dflt;
	const char *why;
};

static const struct attr_default so_attrs[] = {
	{ "emulate_3pc", 1, "EXTENDED COPY is always offered" },
	{ "emulate_caw", 1, "COMPARE AND WRITE is always offered" },
	{ "emulate_dpo", 1, "no setting" },
	{ "emulate_fua_read", 1, "no setting" },
	{ "emulate_fua_write", 1, "FUA is always honoured" },
	{ "emulate_model_alias", 0, "no setting (INQUIRY product is isertd's)" },
	{ "emulate_pr", 1, "persistent reservations are always offered" },
	{ "emulate_rest_reord", 0, "no setting" },
	{ "emulate_rsoc", 1, "REPORT SUPPORTED OPERATION CODES is always offered" },
	{ "emulate_tas", 1, "no setting" },
	{ "emulate_ua_intlck_ctrl", 0, "no setting" },
	{ "enforce_pr_isids", 1, "no setting" },
	{ "force_pr_aptpl", 0, "no setting (APTPL is the initiator's choice)" },
	{ "pi_prot_format", 0, "no protection information" },
	{ "pi_prot_type", 0, "no protection information" },
	{ "pi_prot_verify", 0, "no protection information" },
	{ NULL, 0, NULL },
};

/* What the device itself decides (limits, rotation, queue): isertd finds its own, so these are not items. */
static const char *const so_device_attrs[] = {
	"is_nonrot", "max_unmap_block_desc_count", "max_unmap_lba_count", "max_write_same_len", "optimal_sectors",
	"queue_depth", "unmap_granularity", "unmap_granularity_alignment", "unmap_zeroes_data", "submit_type",
	"alua_support", "pgr_support", "hw_block_size", "hw_max_sectors", "hw_pi_prot_type", "hw_queue_depth",
	"complete_type", NULL,
};

static const struct attr_default tpg_attrs[] = {
	{ "default_erl", 0, "error recovery level 0 only" },
	{ "demo_mode_discovery", 1, "no setting (discovery lists every target a portal serves)" },
	{ "fabric_prot_type", 0, "no protection information" },
	{ "t10_pi", 0, "no protection information" },
	{ "login_keys_workaround", 1, "no setting" },
	{ "netif_timeout", 2, "no setting" },
	{ "tpg_enabled_sendtargets", 1, "no setting (SendTargets lists every enabled portal group)" },
	{ NULL, 0, NULL },
};

static const struct attr_default acl_attrs[] = {
	{ "dataout_timeout", 3, "no setting (ERL 0: a lost Data-Out ends the connection)" },
	{ "dataout_timeout_retries", 5, "no setting" },
	{ "default_erl", 0, "error recovery level 0 only" },
	{ "nopin_response_timeout", 30, "no per-initiator setting" },
	{ "nopin_timeout", 15, "no per-initiator setting (params.NopInInterval is per portal group)" },
	{ "random_datain_pdu_offsets", 0, "no setting" },
	{ "random_datain_seq_offsets", 0, "no setting" },
	{ "random_r2t_offsets", 0, "no setting" },
	{ NULL, 0, NULL },
};

static bool in_list(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return true;
	return false;
}

/* Attributes of o not handled by the caller (handled: NULL-terminated): report those changed from LIO's default. */
static void other_attrs(struct lio *l, json_object *attrs, const char *path, const struct attr_default *table,
			const char *const *handled)
{
	if (!attrs)
		return;
	json_object_object_foreach(attrs, k, v)
	{
		(void)v;
		if (in_list(handled, k))
			continue;
		char p[PATHLEN];
		at(p, "%s.attributes.%s", path, k);
		const struct attr_default *a = table;
		while (a->name && strcmp(a->name, k))
			a++;
		if (!a->name) {
			imp_drop(l->im, p, "unknown attribute (value %s)", imp_shown(json_object_get_string(v)));
			continue;
		}
		int64_t n = num(l, attrs, p, k, a->dflt);
		if (n != a->dflt)
			imp_drop(l->im, p, "%" PRId64 " (LIO's default %" PRId64 "): %s", n, a->dflt, a->why);
	}
}

/* ---- storage objects ------------------------------------------------------ */

static void storage_object(struct lio *l, json_object *so, size_t i)
{
	char path[PATHLEN], p[PATHLEN];
	at(path, "storage_objects[%zu]", i);
	const char *name = str(l, so, path, "name", true), *plugin = str(l, so, path, "plugin", true);
	if (!name || !plugin)
		return;
	/* LUNs name their storage object by the plugin's directory; rd_mcp and iblock are older spellings.  The key is
	 * whole: cut, two names alike in their first 240 characters were one, and a LUN got the other's backstore. */
	const char *dir = !strcmp(plugin, "rd_mcp") ? "ramdisk" : !strcmp(plugin, "iblock") ? "block" : plugin;
	char *key;
	if (asprintf(&key, "/backstores/%s/%s", dir, name) < 0) {
		imp_fail(path, "out of memory");
		l->bad = true;
		return;
	}
	json_object_object_add(l->sos, key, json_object_get(so));
	const char *type = !strcmp(dir, "fileio") ? "file" : !strcmp(dir, "block") ? "block" : !strcmp(dir, "ramdisk") ? "ram" : NULL;
	if (!type) {
		imp_drop(l->im, at(p, "%s (%s)", path, imp_shown(key)),
			 "plugin %s has no isertd backstore (file, block and ram do); its LUNs are not carried either",
			 imp_shown(plugin));
		goto out;
	}
	if (!strcmp(type, "ram") && flag(l, so, path, "nullio")) {
		imp_drop(l->im, at(p, "%s.nullio", path), "a null device (no data kept) has no isertd backstore; its LUNs are not carried either");
		goto out;
	}
	json_object *attrs = member(l, so, path, "attributes", json_type_object, false);
	const char *dev = NULL;
	if (strcmp(type, "ram")) {
		dev = str(l, so, path, "dev", false);
		if (!dev || dev[0] != '/') {
			imp_drop(l->im, at(p, "%s.dev", path), "no absolute path of the %s (%s): not carried, nor its LUNs",
				 !strcmp(type, "file") ? "file" : "device", dev ? imp_shown(dev) : "absent");
			goto out;
		}
	}
	char *ours = imp_backstore_name(l->im, name);
	if (strcmp(ours, name))
		imp_note(l->im, at(p, "%s.name", path), "%s is the backstore %s here (names are unique across types)",
			 imp_shown(name), ours);
	json_object *b = json_object_new_object();
	json_object_object_add(b, "name", json_object_new_string(ours));
	json_object_object_add(b, "type", json_object_new_string(type));
	if (dev)
		json_object_object_add(b, "path", json_object_new_string(dev));
	int64_t size = num(l, so, path, "size", 0);
	if (size < 0)
		size = 0;
	if (strcmp(type, "block") && size)
		json_object_object_add(b, "size", json_object_new_int64(size));
	int64_t bs = num(l, attrs, at(p, "%s.attributes", path), "block_size", 512);
	/* A block device's LIO block size is the device's, which isertd reads itself. */
	if (bs != 512 && strcmp(type, "block")) {
		if (bs == 1024 || bs == 2048 || bs == 4096)
			json_object_object_add(b, "block_size", json_object_new_int64(bs));
		else
			imp_drop(l->im, at(p, "%s.attributes.block_size", path), "%" PRId64 ": isertd takes 512, 1024, 2048 or 4096", bs);
	}
	if (num(l, attrs, p, "emulate_tpu", 0) || num(l, attrs, p, "emulate_tpws", 0))
		json_object_object_add(b, "thin", json_object_new_boolean(true));
	if (flag(l, so, path, "write_back") || num(l, attrs, p, "emulate_write_cache", 0))
		json_object_object_add(b, "write_cache", json_object_new_boolean(true));
	if (flag(l, so, path, "readonly"))
		json_object_object_add(b, "readonly", json_object_new_boolean(true));
	const char *wwn = str(l, so, path, "wwn", false);
	if (wwn && *wwn) {
		/* LIO's unit serial (VPD 80h): kept, so the LU keeps the serial its initiators know. */
		bool ok = strlen(wwn) <= 64;
		for (const char *c = wwn; ok && *c; c++)
			ok = *c > ' ' && *c < 127;
		if (ok)
			json_object_object_add(b, "serial", json_object_new_string(wwn));
		else
			imp_drop(l->im, at(p, "%s.wwn", path), "%s: isertd's serial is 1-64 printable characters without spaces",
				 imp_shown(wwn));
	}
	json_object_array_add(l->im->backstores, b);
	json_object_object_add(l->map, key, json_object_new_string(ours));
	free(ours);
	static const char *const handled[] = { "block_size", "emulate_tpu", "emulate_tpws", "emulate_write_cache", NULL };
	json_object *rest = json_object_new_object();
	if (attrs) {
		json_object_object_foreach(attrs, k, v)
		{
			if (!in_list(so_device_attrs, k))
				json_object_object_add(rest, k, json_object_get(v));
		}
	}
	other_attrs(l, rest, path, so_attrs, handled);
	json_object_put(rest);
	/* aio, the LIO I/O engine of fileio, has no meaning here. */
	static const char *const known[] = { "name", "plugin", "attributes", "dev", "size", "write_back", "readonly",
					     "wwn", "aio", "alua_tpgs", "nullio", NULL };
	json_object_object_foreach(so, k2, v2)
	{
		(void)v2;
		if (!in_list(known, k2))
			imp_drop(l->im, at(p, "%s.%s", path, k2), "unknown key");
	}
out:
	free(key);
}

/* ---- ALUA: LIO's groups belong to a storage object and its LUNs join one; isertd's belong to the target
 * and its portal groups join one.  A portal group's group is the one its LUNs are in. */

static const char *alua_state(int64_t s)
{
	switch (s) {
	case 0: return "active_optimized";
	case 1: return "active_nonoptimized";
	case 2: return "standby";
	case 3: return "unavailable";
	case 15: return "transitioning";
	default: return NULL;
	}
}

/* The ALUA group named gp of the storage object key, or NULL. */
static json_object *so_group(struct lio *l, const char *key, const char *gp)
{
	return get(get(l->gps, key), gp);
}

/* l->gps made of l->sos, once: a scan of a storage object's groups for each LUN naming one was O(n^2). */
static void index_groups(struct lio *l)
{
	json_object_object_foreach(l->sos, key, so)
	{
		json_object *gs = get(so, "alua_tpgs"), *by_name = json_object_new_object();
		for (size_t i = 0; gs && json_object_is_type(gs, json_type_array) && i < json_object_array_length(gs); i++) {
			json_object *g = json_object_array_get_idx(gs, i), *n = get(g, "name");
			if (n && json_object_is_type(n, json_type_string) && !get(by_name, json_object_get_string(n)))
				json_object_object_add(by_name, json_object_get_string(n), json_object_get(g));
		}
		json_object_object_add(l->gps, key, by_name);
	}
}

/* tpg_groups: per carried portal group, {tag, group name, a storage object key with it}. */
static void target_alua(struct lio *l, json_object *t, json_object *tpg_groups, const char *tpath)
{
	bool named = false;
	for (size_t i = 0; i < json_object_array_length(tpg_groups); i++)
		named |= strcmp(json_object_get_string(get(json_object_array_get_idx(tpg_groups, i), "gp")), "default_tg_pt_gp") != 0;
	if (!named)
		return; /* isertd's default: one group, active/optimized, every portal group in it */
	json_object *alua = json_object_new_object(), *groups = json_object_new_array();
	json_object *by_name = json_object_new_object(); /* LIO's group name -> ours */
	int64_t mode = -1, trans = 0;
	char p[PATHLEN];
	for (size_t i = 0; i < json_object_array_length(tpg_groups); i++) {
		json_object *e = json_object_array_get_idx(tpg_groups, i);
		const char *gp = json_object_get_string(get(e, "gp")), *key = json_object_get_string(get(e, "so"));
		json_object *g = get(by_name, gp);
		if (!g) {
			json_object *lg = so_group(l, key, gp), *used = get(l->used_gps, key);
			if (!used)
				json_object_object_add(l->used_gps, key, used = json_object_new_object());
			json_object_object_add(used, gp, json_object_new_boolean(true));
			at(p, "%s (ALUA group %s of %s)", tpath, imp_shown(gp), imp_shown(key));
			int64_t id = num(l, lg, p, "tg_pt_gp_id", 0), st = num(l, lg, p, "alua_access_state", 0);
			g = json_object_new_object();
			json_object_object_add(by_name, gp, json_object_get(g));
			json_object_object_add(g, "id", json_object_new_int64(id));
			const char *s = alua_state(st);
			if (!s) {
				imp_drop(l->im, p, "access state %" PRId64 " (LBA dependent or offline) has no isertd state: active_optimized", st);
				s = "active_optimized";
			}
			json_object_object_add(g, "state", json_object_new_string(s));
			if (num(l, lg, p, "preferred", 0))
				json_object_object_add(g, "preferred", json_object_new_boolean(true));
			json_object_object_add(g, "tpgs", json_object_new_array());
			json_object_array_add(groups, g);
			int64_t type = num(l, lg, p, "alua_access_type", 3);
			if (mode < 0)
				mode = type;
			else if (type != mode)
				imp_drop(l->im, p, "access type %" PRId64 " differs from the target's other groups (%" PRId64 "): isertd's mode is per target", type, mode);
			int64_t ts = num(l, lg, p, "implicit_trans_secs", 0);
			trans = ts > trans ? ts : trans;
			if (num(l, lg, p, "trans_delay_msecs", 0))
				imp_drop(l->im, p, "trans_delay_msecs: no setting");
		}
		json_object_array_add(get(g, "tpgs"), json_object_get(get(e, "tag")));
	}
	json_object_put(by_name);
	/* LIO's default_tg_pt_gp has id 0; isertd's ids are 1-65535: it takes the lowest free one.  The ids taken are
	 * a set, and the lowest free one only grows: a scan of every group for each id tried was O(n^3). */
	json_object *ids = json_object_new_object();
	char n[24];
	for (size_t k = 0; k < json_object_array_length(groups); k++) {
		snprintf(n, sizeof(n), "%" PRId64, json_object_get_int64(get(json_object_array_get_idx(groups, k), "id")));
		json_object_object_add(ids, n, json_object_new_boolean(true));
	}
	int64_t id = 1;
	for (size_t k = 0; k < json_object_array_length(groups); k++) {
		json_object *g = json_object_array_get_idx(groups, k);
		if (json_object_get_int64(get(g, "id")) > 0)
			continue;
		while (snprintf(n, sizeof(n), "%" PRId64, id), get(ids, n))
			id++;
		json_object_object_add(ids, n, json_object_new_boolean(true));
		json_object_object_add(g, "id", json_object_new_int64(id));
	}
	json_object_put(ids);
	if (mode == 0 || mode == 1 || mode < 0)
		json_object_object_add(alua, "mode", json_object_new_string("implicit"));
	else
		json_object_object_add(alua, "mode", json_object_new_string(mode == 2 ? "explicit" : "both"));
	if (mode == 0)
		imp_drop(l->im, tpath, "ALUA access type 0 (none): isertd always reports implicit ALUA");
	if (trans > 255) {
		imp_drop(l->im, tpath, "implicit_trans_secs %" PRId64 ": at most 255", trans);
		trans = 255;
	}
	if (trans)
		json_object_object_add(alua, "transition_time", json_object_new_int64(trans));
	json_object_object_add(alua, "groups", groups);
	json_object_object_add(t, "alua", alua);
}

/* ---- targets -------------------------------------------------------------- */

/* TPG parameters (iSCSI keys, strings in LIO) that isertd negotiates too, with LIO's defaults. */
static const struct {
	const char *name, *lio_default;
	bool boolean, digest;
} params[] = {
	{ "MaxRecvDataSegmentLength", "8192", false, false }, { "MaxBurstLength", "262144", false, false },
	{ "FirstBurstLength", "65536", false, false },        { "MaxOutstandingR2T", "1", false, false },
	{ "InitialR2T", "Yes", true, false },                 { "ImmediateData", "Yes", true, false },
	{ "HeaderDigest", "CRC32C,None", false, true },       { "DataDigest", "CRC32C,None", false, true },
	{ "DefaultTime2Wait", "2", false, false },            { "DefaultTime2Retain", "20", false, false },
	{ "MaxConnections", "1", false, false },
};
/* Those isertd has no setting for: reported when changed. */
static const struct {
	const char *name, *lio_default, *why;
} fixed_params[] = {
	{ "MaxXmitDataSegmentLength", "262144", "isertd sends what the initiator's MaxRecvDataSegmentLength allows" },
	{ "DataPDUInOrder", "Yes", "always Yes" },
	{ "DataSequenceInOrder", "Yes", "always Yes" },
	{ "ErrorRecoveryLevel", "0", "error recovery level 0 only" },
	{ "IFMarker", "No", "no markers" },
	{ "OFMarker", "No", "no markers" },
	{ "IFMarkInt", "Reject", "no markers" },
	{ "OFMarkInt", "Reject", "no markers" },
};

static void tpg_params(struct lio *l, json_object *tpg, json_object *g, json_object *t, const char *path)
{
	char pp[PATHLEN], p[PATHLEN];
	at(pp, "%s.parameters", path);
	json_object *ps = member(l, tpg, path, "parameters", json_type_object, false), *out = json_object_new_object();
	if (!ps)
		ps = out; /* empty */
	json_object_object_foreach(ps, k, v)
	{
		at(p, "%s.%s", pp, k);
		if (!json_object_is_type(v, json_type_string) && !json_object_is_type(v, json_type_int)) {
			imp_fail(p, "expected a string, got %s", type_name(v));
			l->bad = true;
			break;
		}
		const char *s = json_object_get_string(v);
		size_t i;
		for (i = 0; i < sizeof(params) / sizeof(params[0]) && strcmp(params[i].name, k); i++)
			;
		if (i < sizeof(params) / sizeof(params[0])) {
			if (!strcmp(s, params[i].lio_default))
				continue; /* LIO's default: isertd's own stays */
			if (params[i].boolean) {
				if (strcmp(s, "Yes") && strcmp(s, "No"))
					imp_drop(l->im, p, "%s: expected Yes or No", imp_shown(s));
				else
					json_object_object_add(out, k, json_object_new_boolean(!strcmp(s, "Yes")));
			} else if (params[i].digest) {
				if (strcmp(s, "None") && strcmp(s, "CRC32C,None") && strcmp(s, "None,CRC32C"))
					imp_drop(l->im, p, "%s: isertd offers None, CRC32C,None or None,CRC32C (None must be allowed)", imp_shown(s));
				else
					json_object_object_add(out, k, json_object_new_string(s));
			} else {
				char *end;
				long long n = strtoll(s, &end, 10);
				if (!*s || *end || n < 0)
					imp_drop(l->im, p, "%s: not a number", imp_shown(s));
				else
					json_object_object_add(out, k, json_object_new_int64(n));
			}
			continue;
		}
		if (!strcmp(k, "TargetAlias")) {
			/* LIO's alias is per portal group, isertd's per target: the first one that is not LIO's default. */
			if (strcmp(s, "LIO Target") && !get(t, "alias"))
				json_object_object_add(t, "alias", json_object_new_string(s));
			else if (strcmp(s, "LIO Target") && strcmp(s, json_object_get_string(get(t, "alias"))))
				imp_drop(l->im, p, "%s: the target's alias is %s already (one per target)", imp_shown(s),
					 imp_shown(json_object_get_string(get(t, "alias"))));
			continue;
		}
		if (!strcmp(k, "AuthMethod"))
			continue; /* what CHAP is required follows the authentication attribute and the credentials */
		for (i = 0; i < sizeof(fixed_params) / sizeof(fixed_params[0]) && strcmp(fixed_params[i].name, k); i++)
			;
		if (i == sizeof(fixed_params) / sizeof(fixed_params[0]))
			imp_drop(l->im, p, "%s: unknown parameter", imp_shown(s));
		else if (strcmp(s, fixed_params[i].lio_default))
			imp_drop(l->im, p, "%s (LIO's default %s): %s", imp_shown(s), fixed_params[i].lio_default, fixed_params[i].why);
	}
	if (json_object_object_length(out))
		json_object_object_add(g, "params", out);
	else
		json_object_put(out);
}

/* chap_* members of o (an ACL or a TPG) as a chap object, or NULL: secrets checked, never shown. */
static json_object *chap_of(struct lio *l, json_object *o, const char *path, const char *what, bool *refused)
{
	char p[PATHLEN];
	const char *u = str(l, o, path, "chap_userid", false), *pw = str(l, o, path, "chap_password", false),
		   *mu = str(l, o, path, "chap_mutual_userid", false), *mpw = str(l, o, path, "chap_mutual_password", false);
	*refused = false;
	if (!u || !*u || !pw || !*pw)
		return NULL;
	if (!imp_secret_ok(pw) || strlen(u) > 255) {
		imp_drop(l->im, at(p, "%s.chap_password", path),
			 "the secret of CHAP user %s is not 12-255 characters (isertd's rule, docs/config.md): %s not carried",
			 imp_shown(u), what);
		*refused = true;
		return NULL;
	}
	json_object *c = json_object_new_object();
	json_object_object_add(c, "userid", json_object_new_string(u));
	json_object_object_add(c, "password", json_object_new_string(pw));
	if (mu && *mu && mpw && *mpw) {
		if (!imp_secret_ok(mpw) || !strcmp(mpw, pw) || strlen(mu) > 255)
			imp_drop(l->im, at(p, "%s.chap_mutual_password", path),
				 "the mutual secret of %s is not 12-255 characters or equals the initiator's: mutual CHAP not carried "
				 "(initiators that ask for it will refuse the target)",
				 imp_shown(mu));
		else {
			json_object_object_add(c, "mutual_userid", json_object_new_string(mu));
			json_object_object_add(c, "mutual_password", json_object_new_string(mpw));
		}
	}
	return c;
}

/* carried: the portal group's LUN numbers carried. */
static void node_acl(struct lio *l, json_object *a, const char *path, json_object *g, int64_t tpg_auth, bool prod_wp,
		     const bool *carried)
{
	char p[PATHLEN];
	const char *wwn = str(l, a, path, "node_wwn", true);
	if (!wwn)
		return;
	if (!iscsi_name_valid(wwn)) {
		imp_drop(l->im, at(p, "%s.node_wwn", path), "%s: not a valid iSCSI name: the ACL is not carried",
			 imp_shown(wwn));
		return;
	}
	json_object *attrs = member(l, a, path, "attributes", json_type_object, false);
	int64_t auth = num(l, attrs, at(p, "%s.attributes", path), "authentication", -1);
	if (auth < 0)
		auth = tpg_auth; /* -1: the portal group's */
	bool refused;
	json_object *chap = chap_of(l, a, path, "the ACL is", &refused);
	if (refused)
		return;
	if (auth && !chap) {
		imp_drop(l->im, path, "%s has no CHAP credentials while authentication is on: LIO refuses its login; "
				      "not carried", imp_shown(wwn));
		return;
	}
	if (!auth && chap)
		imp_drop(l->im, at(p, "%s.chap_userid", path),
			 "authentication is off: LIO let %s log in without CHAP too; isertd requires the CHAP it has",
			 imp_shown(wwn));
	json_object *acl = json_object_new_object(), *ml = json_object_new_array();
	json_object_object_add(acl, "initiator", json_object_new_string(wwn));
	if (chap)
		json_object_object_add(acl, "chap", chap);
	json_object *mls = member(l, a, path, "mapped_luns", json_type_array, false);
	for (size_t i = 0; mls && i < json_object_array_length(mls); i++) {
		json_object *m = json_object_array_get_idx(mls, i);
		char mp[PATHLEN];
		at(mp, "%s.mapped_luns[%zu]", path, i);
		if (!json_object_is_type(m, json_type_object)) {
			imp_fail(mp, "expected an object, got %s", type_name(m));
			l->bad = true;
			break;
		}
		int64_t idx = num(l, m, mp, "index", -1), tl = num(l, m, mp, "tpg_lun", -1);
		if (l->bad)
			break;
		if (idx < 0 || idx > 16383 || tl < 0) {
			imp_fail(mp, "index must be 0-16383 and tpg_lun a LUN number");
			l->bad = true;
			break;
		}
		if (tl > 16383 || !carried[tl]) {
			imp_drop(l->im, mp, "its TPG LUN %" PRId64 " is not carried", tl);
			continue;
		}
		json_object *x = json_object_new_object();
		json_object_object_add(x, "mapped_lun", json_object_new_int64(idx));
		json_object_object_add(x, "tpg_lun", json_object_new_int64(tl));
		/* prod_mode_write_protect: every LUN read-only for ACL initiators. */
		if (flag(l, m, mp, "write_protect") || prod_wp)
			json_object_object_add(x, "write_protect", json_object_new_boolean(true));
		json_object_array_add(ml, x);
	}
	json_object_object_add(acl, "mapped_luns", ml);
	json_object_array_add(get(g, "acls"), acl);
	static const char *const handled[] = { "authentication", NULL };
	other_attrs(l, attrs, path, acl_attrs, handled);
	if (get(a, "tag"))
		imp_drop(l->im, at(p, "%s.tag", path), "ACL groups (tags) have no equivalent");
	/* parameters of an ACL (none are writable in today's LIO) are reported if any. */
	json_object *aps = member(l, a, path, "parameters", json_type_object, false);
	if (!aps)
		return;
	json_object_object_foreach(aps, k, v)
	{
		(void)v;
		imp_drop(l->im, at(p, "%s.parameters.%s", path, k), "no per-initiator parameter");
	}
}

/* generate_node_acls: demo mode carried, with the TPG's CHAP, where LIO would admit someone with it. */
static void tpg_demo(struct lio *l, json_object *tpgo, json_object *g, const char *path, bool auth, bool demo_wp)
{
	char p[PATHLEN];
	bool refused;
	json_object *chap = chap_of(l, tpgo, path, "demo mode is", &refused);
	if (refused) {
		/* nothing: demo mode not carried */
	} else if (auth && !chap) {
		imp_drop(l->im, at(p, "%s.attributes.generate_node_acls", path),
			 "demo mode with authentication on and no TPG CHAP credentials admits no one in LIO: not carried");
	} else {
		json_object_object_add(g, "demo_mode", json_object_new_boolean(true));
		if (demo_wp)
			json_object_object_add(g, "demo_write_protect", json_object_new_boolean(true));
		if (chap) {
			if (!auth)
				imp_drop(l->im, at(p, "%s.chap_userid", path),
					 "authentication is off: LIO admitted demo-mode initiators without CHAP too; isertd requires the CHAP it has");
			json_object_object_add(g, "demo_chap", chap);
		}
	}
}

/* login_timeout is per portal group in LIO, global here: the first one changed is taken. */
static void tpg_login_timeout(struct lio *l, const char *path, int64_t lt)
{
	char p[PATHLEN];
	if (lt < 1 || lt > 3600 || l->login_timeout_set)
		imp_drop(l->im, at(p, "%s.attributes.login_timeout", path), "%" PRId64 ": global.login_timeout is one value, 1-3600%s",
			 lt, l->login_timeout_set ? ", set by an earlier portal group" : "");
	else {
		json_object_object_add(l->im->global, "login_timeout", json_object_new_int64(lt));
		l->login_timeout_set = true;
	}
}

/* LIO's CmdSN depth is isertd's QueueDepth (the CmdSN window). */
static void tpg_cmdsn_depth(struct lio *l, json_object *g, const char *path, int64_t depth)
{
	char p[PATHLEN];
	json_object *ps = get(g, "params");
	if (!ps)
		json_object_object_add(g, "params", ps = json_object_new_object());
	if (depth >= 1 && depth <= 65535)
		json_object_object_add(ps, "QueueDepth", json_object_new_int64(depth));
	else
		imp_drop(l->im, at(p, "%s.attributes.default_cmdsn_depth", path), "%" PRId64 ": QueueDepth is 1-65535", depth);
}

static void tpg_portals(struct lio *l, json_object *tpgo, json_object *g, const char *path)
{
	char p[PATHLEN];
	json_object *portals = json_object_new_array(), *ps = member(l, tpgo, path, "portals", json_type_array, false);
	for (size_t i = 0; ps && i < json_object_array_length(ps) && !l->bad; i++) {
		json_object *po = json_object_array_get_idx(ps, i);
		char pp[PATHLEN];
		at(pp, "%s.portals[%zu]", path, i);
		const char *ip = str(l, po, pp, "ip_address", true);
		int64_t port = num(l, po, pp, "port", 3260);
		if (!ip || l->bad)
			break;
		char addr[64];
		size_t n = strlen(ip);
		if (n >= sizeof(addr) || port < 1 || port > 65535) {
			imp_fail(pp, "ip_address must be a numeric address and port 1-65535");
			l->bad = true;
			break;
		}
		/* rtslib writes IPv6 bare; bracketed forms from older versions lose their brackets. */
		if (ip[0] == '[' && n > 2 && ip[n - 1] == ']')
			snprintf(addr, sizeof(addr), "%.*s", (int)n - 2, ip + 1);
		else
			snprintf(addr, sizeof(addr), "%s", ip);
		json_object *x = json_object_new_object();
		json_object_object_add(x, "ip", json_object_new_string(addr));
		json_object_object_add(x, "port", json_object_new_int64(port));
		if (flag(l, po, pp, "iser"))
			json_object_object_add(x, "iser", json_object_new_boolean(true));
		if (flag(l, po, pp, "offload"))
			imp_drop(l->im, at(p, "%s.offload", pp), "hardware offload (cxgbit) has no equivalent: a TCP portal");
		json_object_array_add(portals, x);
	}
	json_object_object_add(g, "portals", portals);
}

/*
 * A TPG LUN's index and storage object (*so), and the object's key in
 * l->map (rd_mcp and iblock under their present names; to be freed).
 * NULL: the LUNs are not read further (l->bad when it was refused).
 */
static char *tpg_lun_key(struct lio *l, json_object *lo, const char *lp, int64_t *idx, const char **so)
{
	char p[PATHLEN];
	if (!json_object_is_type(lo, json_type_object)) {
		imp_fail(lp, "expected an object, got %s", type_name(lo));
		l->bad = true;
		return NULL;
	}
	*idx = num(l, lo, lp, "index", -1);
	*so = str(l, lo, lp, "storage_object", true);
	if (l->bad || !*so)
		return NULL;
	if (*idx < 0 || *idx > 16383) {
		imp_fail(at(p, "%s.index", lp), "must be 0-16383");
		l->bad = true;
		return NULL;
	}
	/* rtslib writes /backstores/PLUGIN/NAME; rd_mcp and iblock are the older directories. */
	const char *dir = "", *rest = *so;
	if (!strncmp(*so, "/backstores/rd_mcp/", 19))
		dir = "/backstores/ramdisk/", rest = *so + 19;
	else if (!strncmp(*so, "/backstores/iblock/", 19))
		dir = "/backstores/block/", rest = *so + 19;
	char *key;
	if (asprintf(&key, "%s%s", dir, rest) < 0) {
		imp_fail(lp, "out of memory");
		l->bad = true;
		return NULL;
	}
	return key;
}

/*
 * The LUNs whose storage object is carried (carried[] says which numbers),
 * and the portal group's ALUA group into tpg_groups: the first LUN's that
 * is not LIO's default group, else the default one.  Two passes: the group
 * is known before any LUN is told it is in another.
 */
static void tpg_luns(struct lio *l, json_object *tpgo, json_object *g, const char *path, int64_t tag,
		     json_object *tpg_groups, bool *carried)
{
	char p[PATHLEN];
	json_object *luns = json_object_new_array(), *ls = member(l, tpgo, path, "luns", json_type_array, false);
	const char *gp0 = NULL;
	char *key0 = NULL;
	for (size_t pass = 0; pass < 2; pass++) {
		for (size_t i = 0; ls && i < json_object_array_length(ls) && !l->bad; i++) {
			char lp[PATHLEN];
			at(lp, "%s.luns[%zu]", path, i);
			json_object *lo = json_object_array_get_idx(ls, i);
			int64_t idx;
			const char *so;
			char *key = tpg_lun_key(l, lo, lp, &idx, &so);
			if (!key)
				break;
			json_object *ours = get(l->map, key);
			const char *gp = str(l, lo, lp, "alua_tg_pt_gp_name", false);
			if (!gp || !*gp)
				gp = "default_tg_pt_gp";
			if (pass == 0) {
				if (ours && (!gp0 || (!strcmp(gp0, "default_tg_pt_gp") && strcmp(gp, gp0)))) {
					gp0 = gp;
					free(key0);
					key0 = key;
				} else {
					free(key);
				}
				continue;
			}
			if (!ours) {
				imp_drop(l->im, at(p, "%s.storage_object", lp), "%s is not carried%s", imp_shown(so),
					 get(l->sos, key) ? "" : " (no such storage object)");
				free(key);
				continue;
			}
			json_object *x = json_object_new_object();
			json_object_object_add(x, "lun", json_object_new_int64(idx));
			json_object_object_add(x, "backstore", json_object_get(ours));
			json_object_array_add(luns, x);
			carried[idx] = true;
			if (strcmp(gp, gp0))
				imp_drop(l->im, at(p, "%s.alua_tg_pt_gp_name", lp),
					 "%s: isertd's ALUA groups hold portal groups, and this one is in %s: taken as %s",
					 imp_shown(gp), imp_shown(gp0), imp_shown(gp0));
			else if (strcmp(gp, "default_tg_pt_gp") && !so_group(l, key, gp))
				imp_drop(l->im, at(p, "%s.alua_tg_pt_gp_name", lp), "%s: no such group on %s", imp_shown(gp), imp_shown(key));
			free(key);
		}
	}
	if (gp0 && !l->bad) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "tag", json_object_new_int64(tag));
		json_object_object_add(e, "gp", json_object_new_string(gp0));
		json_object_object_add(e, "so", json_object_new_string(key0));
		json_object_array_add(tpg_groups, e);
	}
	free(key0);
	json_object_object_add(g, "luns", luns);
}

static void tpg_acls(struct lio *l, json_object *tpgo, json_object *g, const char *path, int64_t auth, bool prod_wp,
		     const bool *carried)
{
	json_object_object_add(g, "acls", json_object_new_array());
	json_object *as = member(l, tpgo, path, "node_acls", json_type_array, false);
	for (size_t i = 0; as && i < json_object_array_length(as) && !l->bad; i++) {
		char ap[PATHLEN];
		at(ap, "%s.node_acls[%zu]", path, i);
		json_object *a = json_object_array_get_idx(as, i);
		if (!json_object_is_type(a, json_type_object)) {
			imp_fail(ap, "expected an object, got %s", type_name(a));
			l->bad = true;
			break;
		}
		node_acl(l, a, ap, g, auth, prod_wp, carried);
	}
}

/* Keys of a portal group that are not read, and the mutual CHAP LIO ignores outside demo mode. */
static void tpg_other_keys(struct lio *l, json_object *tpgo, const char *path, bool demo)
{
	char p[PATHLEN];
	static const char *const known[] = { "tag", "enable", "attributes", "parameters", "portals", "luns", "node_acls",
					     "chap_userid", "chap_password", "chap_mutual_userid", "chap_mutual_password", NULL };
	json_object_object_foreach(tpgo, k, v)
	{
		(void)v;
		if (!in_list(known, k))
			imp_drop(l->im, at(p, "%s.%s", path, k), "unknown key");
		else if (!strncmp(k, "chap_mutual", 11) && !demo)
			imp_drop(l->im, at(p, "%s.%s", path, k), "TPG CHAP credentials outside demo mode are not used by LIO either");
	}
}

static void tpg(struct lio *l, json_object *t, json_object *tpgo, const char *path, json_object *tpg_groups)
{
	char p[PATHLEN];
	int64_t tag = num(l, tpgo, path, "tag", -1);
	if (l->bad)
		return;
	if (tag < 1 || tag > 65535) {
		imp_fail(at(p, "%s.tag", path), "must be 1-65535");
		l->bad = true;
		return;
	}
	json_object *g = json_object_new_object();
	json_object_object_add(g, "tag", json_object_new_int64(tag));
	if (get(tpgo, "enable") && !flag(l, tpgo, path, "enable"))
		json_object_object_add(g, "enable", json_object_new_boolean(false));
	json_object *attrs = member(l, tpgo, path, "attributes", json_type_object, false);
	at(p, "%s.attributes", path);
	int64_t auth = num(l, attrs, p, "authentication", 0), demo = num(l, attrs, p, "generate_node_acls", 0),
		demo_wp = num(l, attrs, p, "demo_mode_write_protect", 1), prod_wp = num(l, attrs, p, "prod_mode_write_protect", 0),
		depth = num(l, attrs, p, "default_cmdsn_depth", 64), lt = num(l, attrs, p, "login_timeout", 15);
	if (demo)
		tpg_demo(l, tpgo, g, path, auth, demo_wp);
	else if (get(tpgo, "chap_userid"))
		imp_drop(l->im, at(p, "%s.chap_userid", path), "TPG CHAP credentials outside demo mode are not used by LIO either");
	if (lt != 15)
		tpg_login_timeout(l, path, lt);
	static const char *const handled[] = { "authentication", "generate_node_acls", "demo_mode_write_protect",
					       "prod_mode_write_protect", "default_cmdsn_depth", "login_timeout",
					       "cache_dynamic_acls", NULL };
	other_attrs(l, attrs, path, tpg_attrs, handled);
	tpg_params(l, tpgo, g, t, path);
	if (depth != 64)
		tpg_cmdsn_depth(l, g, path, depth);
	tpg_portals(l, tpgo, g, path);
	bool carried[16384] = { false }; /* LUN numbers in luns, for the ACLs' mapped LUNs */
	tpg_luns(l, tpgo, g, path, tag, tpg_groups, carried);
	tpg_acls(l, tpgo, g, path, auth, prod_wp != 0, carried);
	tpg_other_keys(l, tpgo, path, demo);
	json_object_array_add(get(t, "tpgs"), g);
}

static void target(struct lio *l, json_object *to, size_t i)
{
	char path[PATHLEN], p[PATHLEN];
	at(path, "targets[%zu]", i);
	const char *wwn = str(l, to, path, "wwn", true), *fabric = str(l, to, path, "fabric", true);
	if (!wwn || !fabric)
		return;
	if (strcmp(fabric, "iscsi")) {
		imp_drop(l->im, at(p, "%s (%s)", path, imp_shown(wwn)), "fabric %s: isertd serves iSCSI only", imp_shown(fabric));
		return;
	}
	if (strlen(wwn) > ISCSI_NAME_MAX) {
		imp_fail(at(p, "%s.wwn", path), "longer than 223 bytes (RFC 7143's bound for an iSCSI name)");
		l->bad = true;
		return;
	}
	if (!iscsi_name_valid(wwn)) {
		imp_drop(l->im, at(p, "%s.wwn", path), "%s: not a valid iSCSI name (docs/config.md): the target is not carried",
			 imp_shown(wwn));
		return;
	}
	json_object *t = json_object_new_object();
	json_object_object_add(t, "iqn", json_object_new_string(wwn));
	json_object_object_add(t, "tpgs", json_object_new_array());
	json_object *tpg_groups = json_object_new_array();
	json_object *ts = member(l, to, path, "tpgs", json_type_array, false);
	for (size_t k = 0; ts && k < json_object_array_length(ts) && !l->bad; k++) {
		char tp[PATHLEN];
		at(tp, "%s.tpgs[%zu]", path, k);
		json_object *g = json_object_array_get_idx(ts, k);
		if (!json_object_is_type(g, json_type_object)) {
			imp_fail(tp, "expected an object, got %s", type_name(g));
			l->bad = true;
			break;
		}
		tpg(l, t, g, tp, tpg_groups);
	}
	if (!l->bad)
		target_alua(l, t, tpg_groups, path);
	json_object_put(tpg_groups);
	json_object_array_add(l->im->targets, t);
	json_object_object_foreach(to, k, v)
	{
		if (!strcmp(k, "parameters") && json_object_is_type(v, json_type_object)) {
			/* Target-wide settings of the fabric (completion CPU affinity): -1 is LIO's default. */
			json_object_object_foreach(v, pk, pv)
			{
				const char *s = json_object_get_string(pv);
				if (strcmp(pk, "cmd_completion_affinity") || !s || strcmp(s, "-1"))
					imp_drop(l->im, at(p, "%s.parameters.%s", path, pk), "%s: no setting", imp_shown(s));
			}
		} else if (strcmp(k, "wwn") && strcmp(k, "fabric") && strcmp(k, "tpgs")) {
			imp_drop(l->im, at(p, "%s.%s", path, k), "unknown key");
		}
	}
}

/* fabric_modules: the iscsi module's discovery authentication. */
static void fabric(struct lio *l, json_object *f, size_t i)
{
	char path[PATHLEN], p[PATHLEN];
	at(path, "fabric_modules[%zu]", i);
	const char *name = str(l, f, path, "name", true);
	if (!name)
		return;
	if (strcmp(name, "iscsi")) {
		imp_drop(l->im, path, "fabric %s: isertd serves iSCSI only", imp_shown(name));
		return;
	}
	const char *u = str(l, f, path, "discovery_userid", false), *pw = str(l, f, path, "discovery_password", false),
		   *mu = str(l, f, path, "discovery_mutual_userid", false), *mpw = str(l, f, path, "discovery_mutual_password", false);
	bool on = flag(l, f, path, "discovery_enable_auth");
	if (u && *u && pw && *pw) {
		if (!imp_secret_ok(pw) || strlen(u) > 255) {
			imp_drop(l->im, at(p, "%s.discovery_password", path), "the secret of %s is not 12-255 characters: "
				 "discovery is imported requiring CHAP no one can pass", imp_shown(u));
			/* Never open what LIO kept closed: discovery stays refused (auth_required without a usable chap fails the check). */
		} else {
			json_object *c = json_object_new_object();
			json_object_object_add(c, "userid", json_object_new_string(u));
			json_object_object_add(c, "password", json_object_new_string(pw));
			if (mu && *mu && mpw && *mpw) {
				if (!imp_secret_ok(mpw) || !strcmp(mpw, pw))
					imp_drop(l->im, at(p, "%s.discovery_mutual_password", path), "not 12-255 characters or equal to the initiator's: mutual CHAP not carried");
				else {
					json_object_object_add(c, "mutual_userid", json_object_new_string(mu));
					json_object_object_add(c, "mutual_password", json_object_new_string(mpw));
				}
			}
			json_object_object_add(l->im->discovery, "chap", c);
		}
	}
	if (on) {
		json_object_object_add(l->im->discovery, "auth_required", json_object_new_boolean(true));
		if (!get(l->im->discovery, "chap")) {
			imp_fail(at(p, "%s.discovery_enable_auth", path), "discovery authentication without usable credentials: "
				 "refused rather than opening discovery");
			l->bad = true;
		}
	}
}

/* fn on each element of the top-level array arr (named name), which must be objects. */
static void each_object(struct lio *l, json_object *arr, const char *name,
			void (*fn)(struct lio *, json_object *, size_t))
{
	for (size_t i = 0; arr && i < json_object_array_length(arr) && !l->bad; i++) {
		json_object *o = json_object_array_get_idx(arr, i);
		char p[PATHLEN];
		if (!json_object_is_type(o, json_type_object)) {
			imp_fail(at(p, "%s[%zu]", name, i), "expected an object, got %s", type_name(o));
			l->bad = true;
		} else {
			fn(l, o, i);
		}
	}
}

int import_lio(struct import *im, const char *text, size_t len)
{
	if (memchr(text, 0, len)) {
		imp_fail(im->file, "contains a NUL byte: not a saveconfig.json");
		return EX_REFUSED;
	}
	if (!imp_text(im->file, text, len, false))
		return EX_REFUSED;
	/* Depth bounded: a saveconfig.json is 6 levels deep; a deeper one is not one. */
	json_tokener *tok = json_tokener_new_ex(32);
	json_object *root = json_tokener_parse_ex(tok, text, (int)len);
	enum json_tokener_error e = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!root || e != json_tokener_success) {
		unsigned line = 1, col = 1;
		for (size_t i = 0; i < end && i < len; i++)
			text[i] == '\n' ? (line++, col = 1) : col++;
		char w[PATHLEN];
		imp_fail(at(w, "%s: line %u, column %u", im->file, line, col), "not JSON: %s",
			 e == json_tokener_continue ? "the document ends early (truncated?)" : json_tokener_error_desc(e));
		json_object_put(root);
		return EX_REFUSED;
	}
	for (size_t i = end; i < len; i++)
		if (!strchr(" \t\r\n", text[i])) {
			imp_fail(im->file, "text after the JSON document (byte %zu)", i);
			json_object_put(root);
			return EX_REFUSED;
		}
	if (!json_object_is_type(root, json_type_object)) {
		imp_fail(im->file, "expected a JSON object (saveconfig.json), got %s", type_name(root));
		json_object_put(root);
		return EX_REFUSED;
	}
	struct lio l = { .im = im, .map = json_object_new_object(), .sos = json_object_new_object(),
			 .gps = json_object_new_object(), .used_gps = json_object_new_object() };
	json_object *sos = member(&l, root, "", "storage_objects", json_type_array, false),
		    *ts = member(&l, root, "", "targets", json_type_array, false),
		    *fs = member(&l, root, "", "fabric_modules", json_type_array, false);
	each_object(&l, sos, "storage_objects", storage_object);
	index_groups(&l);
	each_object(&l, ts, "targets", target);
	each_object(&l, fs, "fabric_modules", fabric);
	/* ALUA groups of storage objects that no carried LUN is in: not carried. */
	json_object_object_foreach(l.sos, key, so)
	{
		json_object *gs = get(so, "alua_tpgs");
		for (size_t i = 0; !l.bad && gs && json_object_is_type(gs, json_type_array) && i < json_object_array_length(gs); i++) {
			json_object *g = json_object_array_get_idx(gs, i), *n = get(g, "name");
			const char *name = n && json_object_is_type(n, json_type_string) ? json_object_get_string(n) : "";
			if (!strcmp(name, "default_tg_pt_gp"))
				continue;
			char w[PATHLEN];
			if (!get(get(l.used_gps, key), name))
				imp_drop(im, at(w, "%s", key), "ALUA group %s: no carried portal group's LUNs are in it",
					 imp_shown(name));
		}
	}
	json_object_object_foreach(root, k, v)
	{
		(void)v;
		if (strcmp(k, "storage_objects") && strcmp(k, "targets") && strcmp(k, "fabric_modules"))
			imp_drop(im, k, "unknown key");
	}
	json_object_put(l.map);
	json_object_put(l.sos);
	json_object_put(l.gps);
	json_object_put(l.used_gps);
	json_object_put(root);
	return l.bad ? EX_REFUSED : 0;
}
