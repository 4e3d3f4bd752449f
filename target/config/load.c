/*
 * Target configuration: loading, JSON -> struct config.  The format is
 * documented in docs/config.md; keep the two in step.  Loading is strict on
 * purpose: an unknown key is far more often a typo than a feature, and a
 * silently ignored "acl" instead of "acls" would expose every LUN.
 * Also here: the defaults, config_free, the syntaxes the rest of the target
 * checks too (iSCSI names, HOST:PORT) and the backstore name index that
 * config_change.c's one-object checks use as well.
 */
#include "target/config/config_int.h"
#include "common/netaddr.h"
#include "common/proto/iscsi_name.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

const char config_default_json[] =
	"{\n"
	"  \"backstores\": [\n"
	"    { \"name\": \"ram0\", \"type\": \"ram\", \"size\": \"1G\", \"block_size\": 512 }\n"
	"  ],\n"
	"  \"targets\": [\n"
	"    {\n"
	"      \"iqn\": \"iqn.2026-11.org.isert:default\",\n"
	"      \"tpgs\": [\n"
	"        {\n"
	"          \"tag\": 1,\n"
	"          \"enable\": true,\n"
	"          \"demo_mode\": true,\n"
	"          \"demo_write_protect\": false,\n"
	"          \"portals\": [ { \"ip\": \"127.0.0.1\", \"port\": 3260, \"iser\": false } ],\n"
	"          \"luns\": [ { \"lun\": 0, \"backstore\": \"ram0\" } ]\n"
	"        }\n"
	"      ]\n"
	"    }\n"
	"  ]\n"
	"}\n";

/* ------------------------------------------------------------------------ */
/* Value syntaxes. */

static bool names_equal(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;   /* eui./naa. hex compares case-blind */
}

int config_parse_hostport(const char *s, char **host, uint16_t *port)
{
	char h[INET6_ADDRSTRLEN];
	const char *hs, *ps = NULL;
	size_t hlen;
	bool bracketed = false;
	int family;

	if (!s || !*s || !host || !port)
		return -EINVAL;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close)
			return -EINVAL;
		hs = s + 1;
		hlen = (size_t)(close - hs);
		if (close[1] == ':')
			ps = close + 2;
		else if (close[1])
			return -EINVAL;
		bracketed = true;
	} else {
		const char *first = strchr(s, ':'), *last = strrchr(s, ':');
		hs = s;
		if (first && first == last) {
			hlen = (size_t)(first - s);
			ps = first + 1;
		} else {
			/* no colon, or several: a bare IPv6 address, never with a port */
			hlen = strlen(s);
		}
	}
	if (hlen == 0 || hlen >= sizeof(h))
		return -EINVAL;
	memcpy(h, hs, hlen);
	h[hlen] = '\0';
	if (!cfg_valid_ip(h, &family, NULL) || (bracketed && family != AF_INET6))
		return -EINVAL;
	unsigned long pv = CFG_DEFAULT_PORT;
	if (ps) {
		if (!*ps || strlen(ps) > 5)
			return -EINVAL;
		pv = 0;
		for (const char *c = ps; *c; c++) {
			if (*c < '0' || *c > '9')
				return -EINVAL;
			pv = pv * 10 + (unsigned long)(*c - '0');
		}
		if (pv < 1 || pv > 65535)
			return -EINVAL;
	}
	*host = strdup(h);
	if (!*host)
		return -ENOMEM;
	*port = (uint16_t)pv;
	return 0;
}

int config_parse_metrics(const char *s, char **host, uint16_t *port)
{
	size_t n = s ? strspn(s, "0123456789") : 0;
	if (s && n && !s[n]) {
		/* a bare port: loopback, so turning it on exposes nothing beyond this host */
		char buf[32];
		snprintf(buf, sizeof(buf), "127.0.0.1:%s", s);
		return config_parse_hostport(buf, host, port);
	}
	/* HOST:PORT with the port spelled out (config_parse_hostport would default a bare host to 3260) */
	const char *colon = s ? strrchr(s, ':') : NULL;
	if (!colon || (s[0] != '[' && strchr(s, ':') != colon) || (s[0] == '[' && colon[-1] != ']'))
		return -EINVAL;
	return config_parse_hostport(s, host, port);
}

/* ------------------------------------------------------------------------ */
/* Sections. */

/* A secret given inline (key) or in a file (key_file): exactly one of them when required. */
static int get_secret(struct pctx *p, json_object *v, const char *key, bool required, char **secret, char **file)
{
	char fkey[32];
	snprintf(fkey, sizeof(fkey), "%s_file", key);
	bool inline_ = json_object_object_get_ex(v, key, NULL), infile = json_object_object_get_ex(v, fkey, NULL);
	int r;
	if (inline_ && infile) {
		cfg_push_key(p, fkey);
		return cfg_perr(p, "give %s or %s, not both", key, fkey);
	}
	if (required && !inline_ && !infile) {
		cfg_push_key(p, key);
		return cfg_perr(p, "required field missing (or %s)", fkey);
	}
	if (infile) {
		if ((r = cfg_get_str(p, v, fkey, true, 4095, file)) < 0)
			return r;
		size_t mark = cfg_push_key(p, fkey);
		if ((r = cfg_read_secret_file(p, *file, secret)))
			return r;
		cfg_pop(p, mark);
	} else if ((r = cfg_get_str(p, v, key, required, CFG_CHAP_MAX, secret)) <= 0) {
		return r;
	} else if (!strcmp(*secret, CONFIG_REDACTED)) {
		cfg_push_key(p, key);
		return cfg_perr(p, "is the mask '%s' that config.get, iserctl config and plans show in a secret's "
				   "place, not a secret: give the secret, or %s (iserctl config --show-secrets "
				   "prints the running ones)", CONFIG_REDACTED, fkey);
	}
	if (strlen(*secret) < CFG_CHAP_MIN) {
		cfg_push_key(p, infile ? fkey : key);
		return cfg_perr(p, "CHAP secret must be at least %d characters (RFC 7143 sec. 12.1.3), got %zu",
				CFG_CHAP_MIN, strlen(*secret));
	}
	return 1;
}

static int parse_chap(struct pctx *p, json_object *v, struct cfg_chap *c)
{
	static const char *const keys[] = { "userid", "password", "password_file", "mutual_userid",
					    "mutual_password", "mutual_password_file", NULL };
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if (!json_object_object_get_ex(v, "userid", NULL) &&
	    !json_object_object_get_ex(v, "password", NULL) &&
	    !json_object_object_get_ex(v, "password_file", NULL) &&
	    (json_object_object_get_ex(v, "mutual_userid", NULL) ||
	     json_object_object_get_ex(v, "mutual_password", NULL) ||
	     json_object_object_get_ex(v, "mutual_password_file", NULL)))
		return cfg_perr(p, "mutual CHAP requires one-way CHAP: set userid and password too");
	if ((r = cfg_get_str(p, v, "userid", true, CFG_CHAP_MAX, &c->userid)) < 0 ||
	    (r = get_secret(p, v, "password", true, &c->password, &c->password_file)) < 0 ||
	    (r = cfg_get_str(p, v, "mutual_userid", false, CFG_CHAP_MAX, &c->mutual_userid)) < 0 ||
	    (r = get_secret(p, v, "mutual_password", false, &c->mutual_password, &c->mutual_password_file)) < 0)
		return r;
	if (!c->mutual_userid != !c->mutual_password)
		return cfg_perr(p, "mutual CHAP needs both mutual_userid and mutual_password (or mutual_password_file)");
	if (c->mutual_password && !strcmp(c->mutual_password, c->password)) {
		cfg_push_key(p, c->mutual_password_file ? "mutual_password_file" : "mutual_password");
		return cfg_perr(p, "must differ from password (RFC 7143 sec. 12.1.3 forbids reusing a secret in both directions)");
	}
	return 0;
}

static int get_chap(struct pctx *p, json_object *o, const char *key, struct cfg_chap *c)
{
	json_object *v;
	size_t mark;
	int r = cfg_lookup(p, o, key, false, &v);

	if (r <= 0)
		return r;
	mark = cfg_push_key(p, key);
	r = parse_chap(p, v, c);
	if (r)
		return r;
	cfg_pop(p, mark);
	return 1;
}

static bool valid_bs_name(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '_' || *s == '-' || *s == '.'))
			return false;
	return true;
}

/* An rbd backstore's image: pool and image required there, every key refused elsewhere. */
static int parse_rbd(struct pctx *p, json_object *v, bool rbd, struct backstore_rbd_cfg *c)
{
	static const struct { const char *key; size_t max; bool required; size_t off; } f[] = {
		/* Ceph's own limits: pool and namespace names, image names (RBD_MAX_IMAGE_NAME_SIZE 96). */
		{ "pool", 255, true, offsetof(struct backstore_rbd_cfg, pool) },
		{ "image", 95, true, offsetof(struct backstore_rbd_cfg, image) },
		{ "namespace", 255, false, offsetof(struct backstore_rbd_cfg, ns) },
		{ "cluster", 63, false, offsetof(struct backstore_rbd_cfg, cluster) },
		{ "client_id", 63, false, offsetof(struct backstore_rbd_cfg, client_id) },
		{ "conf", PATH_MAX - 1, false, offsetof(struct backstore_rbd_cfg, conf) },
		{ "keyring", PATH_MAX - 1, false, offsetof(struct backstore_rbd_cfg, keyring) },
	};
	for (size_t i = 0; i < ARRAY_SIZE(f); i++) {
		char **dst = (char **)((char *)c + f[i].off);
		int r;
		if (!rbd) {
			if (json_object_object_get_ex(v, f[i].key, NULL)) {
				cfg_push_key(p, f[i].key);
				return cfg_perr(p, "only for an rbd backstore");
			}
			continue;
		}
		if ((r = cfg_get_str(p, v, f[i].key, f[i].required, f[i].max, dst)) < 0)
			return r;
		if (*dst && (f[i].off == offsetof(struct backstore_rbd_cfg, conf) ||
			     f[i].off == offsetof(struct backstore_rbd_cfg, keyring)) && (*dst)[0] != '/') {
			cfg_push_key(p, f[i].key);
			return cfg_perr(p, "must be an absolute path, got \"%s\"", *dst);
		}
		if (*dst && f[i].off != offsetof(struct backstore_rbd_cfg, conf) &&
		    f[i].off != offsetof(struct backstore_rbd_cfg, keyring) && strpbrk(*dst, "/@ ")) {
			cfg_push_key(p, f[i].key);
			return cfg_perr(p, "must not contain '/', '@' or spaces, got \"%s\"", *dst);
		}
	}
	return 0;
}

int cfg_parse_backstore(struct pctx *p, json_object *v, struct cfg_backstore *b)
{
	static const char *const keys[] = { "name", "type", "path", "size", "block_size",
					    "thin", "write_cache", "readonly", "preallocate", "serial", "pool", "image",
					    "namespace", "cluster", "client_id", "conf", "keyring", NULL };
	char *type = NULL;
	json_object *sv;
	char d[48];
	size_t mark;
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_str(p, v, "name", true, 64, &b->name)) < 0)
		return r;
	if (!valid_bs_name(b->name)) {
		cfg_push_key(p, "name");
		return cfg_perr(p, "may hold only letters, digits, '_', '-' and '.', got \"%s\"", b->name);
	}
	if ((r = cfg_get_str(p, v, "type", true, 16, &type)) < 0)
		return r;
	const struct backstore_kind *kind = backstore_kind_named(type);
	if (!kind) {
		cfg_push_key(p, "type");
		char names[128];
		r = cfg_perr(p, "must be %s, got \"%s\"", backstore_kind_names(names, sizeof(names)), type);
		free(type);
		return r;
	}
	free(type);
	b->bs.type = kind->type;

	bool image = kind->caps & BS_KIND_IMAGE;
	if ((r = cfg_get_str(p, v, "path", kind->caps & BS_KIND_PATH, PATH_MAX - 1, &b->path)) < 0)
		return r;
	if (b->path && !(kind->caps & BS_KIND_PATH)) {
		cfg_push_key(p, "path");
		return cfg_perr(p, "not allowed for %s%s", kind->noun, image ? " (give pool and image)" : "");
	}
	if ((r = parse_rbd(p, v, image, &b->bs.rbd)) < 0)
		return r;
	/* RBD allocates on write and UNMAP deallocates: thin unless told otherwise. */
	b->bs.thin = image;
	if (b->path && b->path[0] != '/') {
		cfg_push_key(p, "path");
		return cfg_perr(p, "must be an absolute path, got \"%s\"", b->path);
	}

	if ((r = cfg_get_u32(p, v, "block_size", false, 0, 4096, &b->bs.block_size)) < 0)
		return r;
	r = cfg_lookup(p, v, "size", kind->caps & BS_KIND_SIZE, &sv);
	if (r < 0)
		return r;
	if (r == 1) {
		mark = cfg_push_key(p, "size");
		if (json_object_is_type(sv, json_type_string)) {
			int e = cfg_parse_size_str(json_object_get_string(sv), &b->bs.size);
			if (e == -ERANGE || (!e && b->bs.size > INT64_MAX))
				return cfg_perr(p, "too large, got %s", cfg_jdesc(p, sv, d, sizeof(d)));
			if (e)
				return cfg_perr(p, "must be a byte count or a number with a K, M, G or T suffix (powers of 1024), got %s",
						cfg_jdesc(p, sv, d, sizeof(d)));
		} else if ((r = cfg_json_to_u64(p, sv, 0, INT64_MAX, &b->bs.size))) {
			return r;
		}
		cfg_pop(p, mark);
	}
	/* The block size and size rules are the backstore's own, in one place. */
	char why[96];
	const char *field = backstore_check_geometry(b->bs.type, b->bs.size, b->bs.block_size, why, sizeof(why));
	if (field) {
		cfg_push_key(p, field);
		return cfg_perr(p, "%s", why);
	}
	if ((r = cfg_get_bool(p, v, "thin", &b->bs.thin)) < 0 ||
	    (r = cfg_get_bool(p, v, "write_cache", &b->bs.write_cache)) < 0 ||
	    (r = cfg_get_bool(p, v, "readonly", &b->bs.readonly)) < 0 ||
	    (r = cfg_get_bool(p, v, "preallocate", &b->bs.preallocate)) < 0)
		return r;
	if ((field = backstore_check_preallocate(b->bs.type, b->bs.thin, b->bs.preallocate, why, sizeof(why)))) {
		cfg_push_key(p, field);
		return cfg_perr(p, "%s", why);
	}
	if ((r = cfg_get_str(p, v, "serial", false, 64, &b->serial)) < 0)
		return r;
	if (b->serial && strchr(b->serial, ' ')) {
		cfg_push_key(p, "serial");
		return cfg_perr(p, "must not contain spaces");
	}
	if (b->serial) {
		for (const char *c = b->serial; *c; c++)
			if ((unsigned char)*c >= 0x80) {
				cfg_push_key(p, "serial");
				return cfg_perr(p, "must be printable ASCII");
			}
	}
	b->bs.name = b->name;
	b->bs.path = b->path;
	return 0;
}

static int parse_portal(struct pctx *p, json_object *v, struct cfg_portal *pt)
{
	static const char *const keys[] = { "ip", "port", "iser", "tos", NULL };
	uint32_t port = CFG_DEFAULT_PORT, tos = 0;
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_str(p, v, "ip", true, INET6_ADDRSTRLEN - 1, &pt->host)) < 0)
		return r;
	if (!cfg_valid_ip(pt->host, NULL, NULL)) {
		cfg_push_key(p, "ip");
		return cfg_perr(p, "must be a numeric IPv4 or IPv6 address (host names are not resolved), got \"%s\"",
				pt->host);
	}
	if ((r = cfg_get_u32(p, v, "port", false, 1, 65535, &port)) < 0)
		return r;
	pt->port = (uint16_t)port;
	if ((r = cfg_get_bool(p, v, "iser", &pt->iser)) < 0)
		return r;
	if ((r = cfg_get_u32(p, v, "tos", false, 0, 255, &tos)) < 0)
		return r;
	pt->tos = (uint8_t)tos;
	return 0;
}

static bool portal_same(const struct cfg_portal *a, const struct cfg_portal *b)
{
	unsigned char ba[16], bb[16];
	int fa = 0, fb = 0;

	if (a->port != b->port || a->iser != b->iser)
		return false;
	cfg_valid_ip(a->host, &fa, ba);
	cfg_valid_ip(b->host, &fb, bb);
	return fa == fb && !memcmp(ba, bb, 16);
}

static int get_yesno(struct pctx *p, json_object *o, const char *key, bool *out)
{
	json_object *v;
	char d[48];
	int r = cfg_lookup(p, o, key, false, &v);

	if (r <= 0)
		return r;
	if (json_object_is_type(v, json_type_boolean)) {
		*out = json_object_get_boolean(v);
		return 1;
	}
	if (json_object_is_type(v, json_type_string)) {
		if (!strcmp(json_object_get_string(v), "Yes")) {
			*out = true;
			return 1;
		}
		if (!strcmp(json_object_get_string(v), "No")) {
			*out = false;
			return 1;
		}
	}
	cfg_push_key(p, key);
	return cfg_perr(p, "must be true, false, \"Yes\" or \"No\", got %s", cfg_jdesc(p, v, d, sizeof(d)));
}

/* Digest offer: a list of CRC32C and None; None must be in it. */
static int get_digest(struct pctx *p, json_object *o, const char *key, bool *out)
{
	json_object *v;
	char d[48];
	size_t mark;
	int r = cfg_lookup(p, o, key, false, &v);

	if (r <= 0)
		return r;
	mark = cfg_push_key(p, key);
	if (!json_object_is_type(v, json_type_string))
		return cfg_perr(p, "must be a string such as \"CRC32C,None\", got %s", cfg_jdesc(p, v, d, sizeof(d)));
	const char *s = json_object_get_string(v);
	if (!strcmp(s, "None"))
		*out = false;
	else if (!strcmp(s, "CRC32C,None") || !strcmp(s, "None,CRC32C"))
		*out = true;
	else if (!strcmp(s, "CRC32C"))
		return cfg_perr(p, "must include None (a CRC32C-only offer is not supported), got \"CRC32C\"");
	else
		return cfg_perr(p, "must be \"CRC32C,None\" or \"None\", got %s", cfg_jdesc(p, v, d, sizeof(d)));
	cfg_pop(p, mark);
	return 1;
}

static void params_default(struct cfg_params *pr)
{
	pr->max_recv_dsl = 262144;
	pr->max_burst = 1048576;
	pr->first_burst = 65536;
	pr->max_outstanding_r2t = 1;
	pr->initial_r2t = false;
	pr->immediate_data = true;
	pr->header_digest = true;
	pr->data_digest = true;
	pr->default_time2wait = 2;
	pr->default_time2retain = 20;
	pr->max_connections = 1;
	pr->queue_depth = 128;
	pr->nop_in_interval = 0;
	pr->max_immediate = 16;
	pr->session_buffer_mb = 64;
}

static int parse_params(struct pctx *p, json_object *v, struct cfg_params *pr)
{
	static const char *const keys[] = {
		"MaxRecvDataSegmentLength", "MaxBurstLength", "FirstBurstLength",
		"MaxOutstandingR2T", "InitialR2T", "ImmediateData", "HeaderDigest",
		"DataDigest", "DefaultTime2Wait", "DefaultTime2Retain", "MaxConnections",
		"QueueDepth", "NopInInterval", "MaxImmediateCommands", "SessionBufferMB", NULL };
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	/* Ranges from RFC 7143 sec. 13; the last four keys are ours. */
	if ((r = cfg_get_u32(p, v, "MaxRecvDataSegmentLength", false, 512, 16777215, &pr->max_recv_dsl)) < 0 ||
	    (r = cfg_get_u32(p, v, "MaxBurstLength", false, 512, 16777215, &pr->max_burst)) < 0 ||
	    (r = cfg_get_u32(p, v, "FirstBurstLength", false, 512, 16777215, &pr->first_burst)) < 0 ||
	    (r = cfg_get_u32(p, v, "MaxOutstandingR2T", false, 1, 65535, &pr->max_outstanding_r2t)) < 0 ||
	    (r = get_yesno(p, v, "InitialR2T", &pr->initial_r2t)) < 0 ||
	    (r = get_yesno(p, v, "ImmediateData", &pr->immediate_data)) < 0 ||
	    (r = get_digest(p, v, "HeaderDigest", &pr->header_digest)) < 0 ||
	    (r = get_digest(p, v, "DataDigest", &pr->data_digest)) < 0 ||
	    (r = cfg_get_u32(p, v, "DefaultTime2Wait", false, 0, 3600, &pr->default_time2wait)) < 0 ||
	    (r = cfg_get_u32(p, v, "DefaultTime2Retain", false, 0, 3600, &pr->default_time2retain)) < 0 ||
	    (r = cfg_get_u32(p, v, "MaxConnections", false, 1, 65535, &pr->max_connections)) < 0 ||
	    (r = cfg_get_u32(p, v, "QueueDepth", false, 1, 65535, &pr->queue_depth)) < 0 ||
	    (r = cfg_get_u32(p, v, "NopInInterval", false, 0, 3600, &pr->nop_in_interval)) < 0 ||
	    (r = cfg_get_u32(p, v, "MaxImmediateCommands", false, 1, 1024, &pr->max_immediate)) < 0 ||
	    (r = cfg_get_u32(p, v, "SessionBufferMB", false, 1, 65536, &pr->session_buffer_mb)) < 0)
		return r;
	if (pr->first_burst > pr->max_burst) {
		cfg_push_key(p, "FirstBurstLength");
		return cfg_perr(p, "must not exceed MaxBurstLength (%" PRIu32 "), got %" PRIu32,
				pr->max_burst, pr->first_burst);
	}
	return 0;
}

bool cfg_lunmap_test_set(struct lunmap *m, uint64_t lun)
{
	bool was = m->bits[lun / 8] & (1u << (lun % 8));

	m->bits[lun / 8] |= (uint8_t)(1u << (lun % 8));
	return was;
}

/* A backstore's name (or path) and its index: sorted, for lookups in thousands of LUNs. */
struct bs_key {
	const char *key;
	size_t idx;
};

static int cmp_bs_key(const void *a, const void *b)
{
	const struct bs_key *x = a, *y = b;
	int r = strcmp(x->key, y->key);
	return r ? r : (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_bs_name(const void *a, const void *b)
{
	return strcmp(((const struct bs_key *)a)->key, ((const struct bs_key *)b)->key);
}

/*
 * The serial an LU will report, where the document decides it: the
 * configured one, else the name (ram, file, block).  rbd and nvme without
 * one report the store's own identity, known once it is open
 * (rt_store_open checks those).
 */
static const char *known_serial(const struct cfg_backstore *b)
{
	if (b->serial)
		return b->serial;
	return backstore_kind_has(b->bs.type, BS_KIND_OWN_ID) ? NULL : b->name;
}

/*
 * Two LUs of one process with one serial would share an NAA id (an
 * initiator's multipath would merge them), an APTPL state file and an
 * EXTENDED COPY identity.  Gateways of one image share a serial on purpose;
 * they are separate processes.
 */
static int check_serial_dups(struct pctx *p, const struct config *c)
{
	size_t n = 0, bad = SIZE_MAX, first = 0;
	struct bs_key *v = calloc(c->nbackstores ? c->nbackstores : 1, sizeof(*v));
	if (!v)
		return cfg_enomem(p);
	for (size_t i = 0; i < c->nbackstores; i++)
		if (known_serial(&c->backstores[i]))
			v[n++] = (struct bs_key){ known_serial(&c->backstores[i]), i };
	qsort(v, n, sizeof(*v), cmp_bs_key);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(v[i].key, v[i - 1].key)) {
			/* Name the one whose serial is configured (a name is the other's serial). */
			size_t a = v[i - 1].idx, b = v[i].idx, at = c->backstores[b].serial ? b : a;
			if (at < bad) {
				bad = at;
				first = at == b ? a : b;
			}
		}
	free(v);
	if (bad == SIZE_MAX)
		return 0;
	const struct cfg_backstore *o = &c->backstores[first];
	size_t mark = cfg_push_key(p, "backstores");
	cfg_push_idx(p, bad);
	cfg_push_key(p, "serial");
	int r = cfg_perr(p, "\"%s\" is already the serial of backstores[%zu] (\"%s\"%s): each LU of one isertd needs "
			    "its own (its NAA id, its APTPL state file); only gateways in other processes share one",
			 c->backstores[bad].serial, first, o->name, o->serial ? "" : ", whose serial is its name");
	cfg_pop(p, mark);
	return r;
}

/*
 * Backstore names and paths must be unique.  Sorted, so that a
 * configuration of thousands stays fast; the error names the first
 * backstore (in document order) that repeats an earlier one, as a check
 * element by element would.
 */
int cfg_check_backstore_dups(struct pctx *p, struct config *c)
{
	size_t n = c->nbackstores, np = 0, bad = SIZE_MAX, first = 0;
	bool by_path = false;
	struct bs_key *names = calloc(n ? n : 1, sizeof(*names)), *paths = calloc(n ? n : 1, sizeof(*paths));
	if (!names || !paths) {
		free(names);
		free(paths);
		return cfg_enomem(p);
	}
	for (size_t i = 0; i < n; i++) {
		names[i] = (struct bs_key){ c->backstores[i].name, i };
		if (c->backstores[i].path)
			paths[np++] = (struct bs_key){ c->backstores[i].path, i };
	}
	qsort(names, n, sizeof(*names), cmp_bs_key);
	qsort(paths, np, sizeof(*paths), cmp_bs_key);
	for (size_t i = 1; i < n; i++)
		if (!strcmp(names[i].key, names[i - 1].key) && (i < 2 || strcmp(names[i - 1].key, names[i - 2].key)) &&
		    names[i].idx < bad) {
			bad = names[i].idx;
			first = names[i - 1].idx;
		}
	for (size_t i = 1; i < np; i++)
		if (!strcmp(paths[i].key, paths[i - 1].key) && paths[i].idx < bad) {
			bad = paths[i].idx;
			first = paths[i - 1].idx;
			by_path = true;
		}
	free(paths);
	p->bs_names = names;
	p->nbs_names = n;
	if (bad == SIZE_MAX)
		return check_serial_dups(p, c);
	/* A name repeated at the same index beats a path (the element check looked at the name first). */
	for (size_t j = 0; by_path && j < bad; j++)
		if (!strcmp(c->backstores[j].name, c->backstores[bad].name)) {
			by_path = false;
			first = j;
		}
	size_t mark = cfg_push_key(p, "backstores");
	cfg_push_idx(p, bad);
	cfg_push_key(p, by_path ? "path" : "name");
	int r = by_path ? cfg_perr(p, "\"%s\" is already used by backstores[%zu]", c->backstores[bad].path, first)
			: cfg_perr(p, "duplicate backstore name \"%s\", also in backstores[%zu]", c->backstores[bad].name,
				   first);
	cfg_pop(p, mark);
	return r;
}

static int parse_lun(struct pctx *p, json_object *v, const struct config *c, struct cfg_lun *l)
{
	static const char *const keys[] = { "lun", "backstore", "read_only", NULL };
	size_t i;
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_u64(p, v, "lun", true, 0, CFG_MAX_LUN, &l->lun)) < 0 ||
	    (r = cfg_get_str(p, v, "backstore", true, 64, &l->backstore)) < 0 ||
	    (r = cfg_get_bool(p, v, "read_only", &l->read_only)) < 0)
		return r;
	struct bs_key k = { .key = l->backstore }, *f = NULL;
	if (p->bs_names)
		f = bsearch(&k, p->bs_names, p->nbs_names, sizeof(k), cmp_bs_name);
	i = f ? f->idx : c->nbackstores;
	if (i == c->nbackstores) {
		cfg_push_key(p, "backstore");
		return cfg_perr(p, "no backstore named \"%s\"", l->backstore);
	}
	l->backstore_index = i;
	return 0;
}

static int parse_mapped_lun(struct pctx *p, json_object *v, const struct lunmap *tpg_luns,
			    struct cfg_mapped_lun *m)
{
	static const char *const keys[] = { "mapped_lun", "tpg_lun", "write_protect", NULL };
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_u64(p, v, "mapped_lun", true, 0, CFG_MAX_LUN, &m->mapped_lun)) < 0 ||
	    (r = cfg_get_u64(p, v, "tpg_lun", true, 0, CFG_MAX_LUN, &m->tpg_lun)) < 0 ||
	    (r = cfg_get_bool(p, v, "write_protect", &m->write_protect)) < 0)
		return r;
	if (!(tpg_luns->bits[m->tpg_lun / 8] & (1u << (m->tpg_lun % 8)))) {
		cfg_push_key(p, "tpg_lun");
		return cfg_perr(p, "the portal group has no LUN %" PRIu64, m->tpg_lun);
	}
	return 0;
}

static int parse_acl(struct pctx *p, json_object *v, const struct lunmap *tpg_luns,
		     struct cfg_acl *a)
{
	static const char *const keys[] = { "initiator", "chap", "mapped_luns", "allow_target_reset", NULL };
	json_object *arr;
	size_t n, mark;
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_str(p, v, "initiator", true, CFG_MAX_NAME, &a->initiator)) < 0)
		return r;
	if (!iscsi_name_valid(a->initiator)) {
		cfg_push_key(p, "initiator");
		return cfg_perr(p, "not a valid iSCSI name (iqn.yyyy-mm.reversed.domain[:id], eui.<16 hex>, naa.<16|32 hex>), got \"%s\"",
				a->initiator);
	}
	if ((r = get_chap(p, v, "chap", &a->chap)) < 0 ||
	    (r = cfg_get_bool(p, v, "allow_target_reset", &a->allow_target_reset)) < 0)
		return r;
	if ((r = cfg_get_array(p, v, "mapped_luns", false, CFG_MAX_LUN + 1, &arr, &n)) < 0)
		return r;
	if (r == 0)
		return 0;
	a->luns = calloc(n ? n : 1, sizeof(*a->luns));
	if (!a->luns)
		return cfg_enomem(p);
	a->nluns = n;
	struct lunmap *seen = calloc(1, sizeof(*seen));
	if (!seen)
		return cfg_enomem(p);
	mark = cfg_push_key(p, "mapped_luns");
	for (size_t i = 0; i < n; i++) {
		size_t m2 = cfg_push_idx(p, i);
		r = parse_mapped_lun(p, json_object_array_get_idx(arr, i), tpg_luns, &a->luns[i]);
		if (!r && cfg_lunmap_test_set(seen, a->luns[i].mapped_lun)) {
			cfg_push_key(p, "mapped_lun");
			r = cfg_perr(p, "duplicate mapped LUN %" PRIu64, a->luns[i].mapped_lun);
		}
		if (r) {
			free(seen);
			return r;
		}
		cfg_pop(p, m2);
	}
	free(seen);
	cfg_pop(p, mark);
	return 0;
}

/* Parse array key of o into a freshly allocated *items of *n elements. */
#define PARSE_ARRAY(p, o, key, maxn, items, n, PARSE_ONE)                          \
	do {                                                                       \
		json_object *arr_;                                                 \
		size_t cnt_, mark_;                                                \
		int r_ = cfg_get_array(p, o, key, false, maxn, &arr_, &cnt_);      \
		if (r_ < 0)                                                        \
			return r_;                                                 \
		if (r_ == 0)                                                       \
			break;                                                     \
		(items) = calloc(cnt_ ? cnt_ : 1, sizeof(*(items)));               \
		if (!(items))                                                      \
			return cfg_enomem(p);                                      \
		(n) = cnt_;                                                        \
		mark_ = cfg_push_key(p, key);                                      \
		for (size_t i = 0; i < cnt_; i++) {                                \
			size_t m_ = cfg_push_idx(p, i);                            \
			json_object *el = json_object_array_get_idx(arr_, i);      \
			r_ = PARSE_ONE;                                            \
			if (r_)                                                    \
				return r_;                                         \
			cfg_pop(p, m_);                                            \
		}                                                                  \
		cfg_pop(p, mark_);                                                 \
	} while (0)

static int parse_one_portal(struct pctx *p, json_object *el, struct cfg_tpg *t, size_t i)
{
	int r = parse_portal(p, el, &t->portals[i]);

	if (r)
		return r;
	for (size_t j = 0; j < i; j++)
		if (portal_same(&t->portals[j], &t->portals[i])) {
			char at[NETADDR_LEN];
			netaddr_join(at, sizeof(at), t->portals[i].host, t->portals[i].port);
			return cfg_perr(p, "duplicate portal %s (iser %s), same as portals[%zu]", at,
					t->portals[i].iser ? "true" : "false", j);
		}
	return 0;
}

int cfg_parse_one_lun(struct pctx *p, json_object *el, const struct config *c,
		      struct cfg_tpg *t, size_t i, struct lunmap *luns)
{
	int r = parse_lun(p, el, c, &t->luns[i]);

	if (r)
		return r;
	if (cfg_lunmap_test_set(luns, t->luns[i].lun)) {
		cfg_push_key(p, "lun");
		return cfg_perr(p, "duplicate LUN %" PRIu64, t->luns[i].lun);
	}
	return 0;
}

static int parse_one_acl(struct pctx *p, json_object *el, struct cfg_tpg *t, size_t i,
			 const struct lunmap *luns)
{
	int r = parse_acl(p, el, luns, &t->acls[i]);

	if (r)
		return r;
	for (size_t j = 0; j < i; j++)
		if (names_equal(t->acls[j].initiator, t->acls[i].initiator)) {
			cfg_push_key(p, "initiator");
			return cfg_perr(p, "duplicate initiator \"%s\", also in acls[%zu]",
					t->acls[i].initiator, j);
		}
	return 0;
}

static bool wildcard_ip(const char *h)
{
	unsigned char b[16] = { 0 }, zero[16] = { 0 };
	return cfg_valid_ip(h, NULL, b) && !memcmp(b, zero, sizeof(b));
}

/* One "IP[:PORT]" of redirect or redirect_balance (port 3260 when none is given). */
static int parse_redirect_addr(struct pctx *p, const char *s, char **host, uint16_t *port)
{
	if (config_parse_hostport(s, host, port))
		return cfg_perr(p, "must be IP[:PORT] with a numeric address (IPv6 in brackets: [fd00::1]:3260), got \"%s\"",
				s);
	if (wildcard_ip(*host))
		return cfg_perr(p, "must name one address an initiator can connect to, not the wildcard %s", *host);
	return 0;
}

static int parse_balance_one(struct pctx *p, json_object *el, struct cfg_tpg *t, size_t i)
{
	char d[48], *host = NULL;
	uint16_t port;
	if (!json_object_is_type(el, json_type_string))
		return cfg_perr(p, "must be a string IP[:PORT], got %s", cfg_jdesc(p, el, d, sizeof(d)));
	int r = parse_redirect_addr(p, json_object_get_string(el), &host, &port);
	if (r)
		return r;
	/* Only this TPG's own portals: their session counts are known here, and they serve the target. */
	struct cfg_portal want = { .host = host, .port = port };
	size_t k;
	for (k = 0; k < t->nportals; k++) {
		want.iser = t->portals[k].iser;
		if (portal_same(&t->portals[k], &want))
			break;
	}
	free(host);
	if (k == t->nportals)
		return cfg_perr(p, "\"%s\" is not one of this TPG's portals (a wildcard portal cannot be balanced to)",
				json_object_get_string(el));
	for (size_t j = 0; j < i; j++)
		if (t->balance[j] == k)
			return cfg_perr(p, "\"%s\" is listed twice", json_object_get_string(el));
	t->balance[i] = k;
	return 0;
}

/* redirect, redirect_type, redirect_balance (after portals: the balance list names them). */
static int parse_redirect(struct pctx *p, json_object *v, struct cfg_tpg *t)
{
	char *s = NULL, *type = NULL;
	size_t mark;
	int r = cfg_get_str(p, v, "redirect", false, 64, &s);
	if (r == 1) {
		mark = cfg_push_key(p, "redirect");
		r = parse_redirect_addr(p, s, &t->redirect_host, &t->redirect_port);
		if (!r)
			cfg_pop(p, mark);
	}
	free(s);
	if (r < 0 || (r = cfg_get_str(p, v, "redirect_type", false, 16, &type)) < 0)
		return r;
	if (r == 1) {
		t->redirect_permanent = !strcmp(type, "permanent");
		bool known = t->redirect_permanent || !strcmp(type, "temporary");
		free(type);
		if (!known) {
			cfg_push_key(p, "redirect_type");
			return cfg_perr(p, "must be \"temporary\" or \"permanent\"");
		}
		if (!t->redirect_host) {
			cfg_push_key(p, "redirect_type");
			return cfg_perr(p, "applies to \"redirect\", which is not set");
		}
	}
	PARSE_ARRAY(p, v, "redirect_balance", CFG_MAX_PORTALS, t->balance, t->nbalance,
		    parse_balance_one(p, el, t, i));
	if (t->balance && t->redirect_host) {
		cfg_push_key(p, "redirect_balance");
		return cfg_perr(p, "a TPG redirects to one portal (\"redirect\") or balances (\"redirect_balance\"), "
				   "not both");
	}
	return 0;
}

static int parse_tpg_body(struct pctx *p, json_object *v, const struct config *c,
			  struct cfg_tpg *t, struct lunmap *luns)
{
	static const char *const keys[] = { "tag", "enable", "demo_mode", "demo_write_protect",
					    "demo_target_reset", "demo_chap", "portals", "luns", "acls",
					    "params", "redirect", "redirect_type", "redirect_balance", NULL };
	json_object *pv;
	uint32_t tag = 0;
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_u32(p, v, "tag", true, 1, 65535, &tag)) < 0)
		return r;
	t->tag = (uint16_t)tag;
	t->enable = true;
	if ((r = cfg_get_bool(p, v, "enable", &t->enable)) < 0 ||
	    (r = cfg_get_bool(p, v, "demo_mode", &t->demo_mode)) < 0 ||
	    (r = cfg_get_bool(p, v, "demo_write_protect", &t->demo_write_protect)) < 0 ||
	    (r = cfg_get_bool(p, v, "demo_target_reset", &t->demo_target_reset)) < 0 ||
	    (r = get_chap(p, v, "demo_chap", &t->demo_chap)) < 0)
		return r;
	PARSE_ARRAY(p, v, "portals", CFG_MAX_PORTALS, t->portals, t->nportals,
		    parse_one_portal(p, el, t, i));
	if ((r = parse_redirect(p, v, t)) < 0)
		return r;
	PARSE_ARRAY(p, v, "luns", CFG_MAX_LUN + 1, t->luns, t->nluns,
		    cfg_parse_one_lun(p, el, c, t, i, luns));
	PARSE_ARRAY(p, v, "acls", CFG_MAX_ACLS, t->acls, t->nacls,
		    parse_one_acl(p, el, t, i, luns));
	params_default(&t->params);
	r = cfg_lookup(p, v, "params", false, &pv);
	if (r == 1) {
		size_t mark = cfg_push_key(p, "params");
		if ((r = parse_params(p, pv, &t->params)))
			return r;
		cfg_pop(p, mark);
	}
	return r < 0 ? r : 0;
}

static int parse_tpg(struct pctx *p, json_object *v, const struct config *c, struct cfg_tpg *t)
{
	struct lunmap *luns = calloc(1, sizeof(*luns));
	int r;

	if (!luns)
		return cfg_enomem(p);
	r = parse_tpg_body(p, v, c, t, luns);
	free(luns);
	return r;
}

static int parse_one_tpg(struct pctx *p, json_object *el, const struct config *c,
			 struct cfg_target *tg, size_t i)
{
	int r = parse_tpg(p, el, c, &tg->tpgs[i]);

	if (r)
		return r;
	for (size_t j = 0; j < i; j++)
		if (tg->tpgs[j].tag == tg->tpgs[i].tag) {
			cfg_push_key(p, "tag");
			return cfg_perr(p, "duplicate portal group tag %u, also in tpgs[%zu]",
					tg->tpgs[i].tag, j);
		}
	return 0;
}

static int parse_target(struct pctx *p, json_object *v, const struct config *c,
			struct cfg_target *tg)
{
	static const char *const keys[] = { "iqn", "alias", "tpgs", "alua", NULL };
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_str(p, v, "iqn", true, CFG_MAX_NAME, &tg->iqn)) < 0)
		return r;
	if (!iscsi_name_valid(tg->iqn)) {
		cfg_push_key(p, "iqn");
		return cfg_perr(p, "not a valid iSCSI name (iqn.yyyy-mm.reversed.domain[:id], eui.<16 hex>, naa.<16|32 hex>), got \"%s\"",
				tg->iqn);
	}
	if ((r = cfg_get_str(p, v, "alias", false, 255, &tg->alias)) < 0)
		return r;
	json_object *tpgs;
	if (json_object_object_get_ex(v, "tpgs", &tpgs) && json_object_is_type(tpgs, json_type_array) &&
	    json_object_array_length(tpgs) > CFG_MAX_TPGS) {
		cfg_push_key(p, "tpgs");
		return cfg_perr(p, "at most %d portal groups per target, got %zu: an ALUA target port group reports at "
				   "most %d ports (REPORT TARGET PORT GROUPS counts them in one byte), and without "
				   "\"alua\" one group holds them all", CFG_MAX_TPGS, json_object_array_length(tpgs),
				CFG_MAX_ALUA_PORTS);
	}
	PARSE_ARRAY(p, v, "tpgs", CFG_MAX_TPGS, tg->tpgs, tg->ntpgs,
		    parse_one_tpg(p, el, c, tg, i));
	return cfg_parse_alua(p, v, tg);
}

static int parse_one_target(struct pctx *p, json_object *el, struct config *c, size_t i)
{
	int r = parse_target(p, el, c, &c->targets[i]);

	if (r)
		return r;
	for (size_t j = 0; j < i; j++)
		if (names_equal(c->targets[j].iqn, c->targets[i].iqn)) {
			cfg_push_key(p, "iqn");
			return cfg_perr(p, "duplicate target \"%s\", also in targets[%zu]",
					c->targets[i].iqn, j);
		}
	return 0;
}

static int parse_one_backstore(struct pctx *p, json_object *el, struct config *c, size_t i)
{
	struct cfg_backstore *b = &c->backstores[i];
	int r = cfg_parse_backstore(p, el, b);

	(void)i; /* names and paths are checked together afterwards (cfg_check_backstore_dups) */
	return r;
}

static int parse_discovery(struct pctx *p, json_object *v, struct config *c)
{
	static const char *const keys[] = { "auth_required", "chap", NULL };
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_bool(p, v, "auth_required", &c->discovery_auth_required)) < 0 ||
	    (r = get_chap(p, v, "chap", &c->discovery_chap)) < 0)
		return r;
	if (c->discovery_auth_required && !c->discovery_chap.userid) {
		cfg_push_key(p, "auth_required");
		return cfg_perr(p, "is true but no discovery chap is configured");
	}
	return 0;
}

/*
 * The global integer keys with a default and a range (config_save.c writes
 * them too): most are what peers may hold (docs/security.md); buffer_pool_mb,
 * shutdown_timeout and adaptive_spin_us are the process's own.
 */
const struct limit_key cfg_limit_keys[] = {
	{ "login_timeout", offsetof(struct config, login_timeout_s), 15, 1, 3600 },
	{ "max_connections", offsetof(struct config, max_connections), 4096, 1, 1048576 },
	{ "max_connections_per_portal", offsetof(struct config, max_connections_per_portal), 4096, 1, 1048576 },
	{ "max_connections_per_host", offsetof(struct config, max_connections_per_host), 256, 1, 1048576 },
	{ "max_sessions", offsetof(struct config, max_sessions), 4096, 1, 1048576 },
	{ "tcp_keepalive", offsetof(struct config, tcp_keepalive_s), 30, 0, 3600 },
	{ "buffer_pool_mb", offsetof(struct config, buffer_pool_mb), 2048, 16, 1048576 },
	{ "shutdown_timeout", offsetof(struct config, shutdown_timeout_s), 10, 1, 3600 },
	{ "adaptive_spin_us", offsetof(struct config, adaptive_spin_us), REACTOR_ADAPTIVE_SPIN_US, 0, 100000 },
};
const size_t cfg_nlimit_keys = ARRAY_SIZE(cfg_limit_keys);

unsigned *cfg_limit_field(struct config *c, const struct limit_key *k)
{
	return (unsigned *)((char *)c + k->off);
}

static void limits_default(struct config *c)
{
	for (size_t i = 0; i < ARRAY_SIZE(cfg_limit_keys); i++)
		*cfg_limit_field(c, &cfg_limit_keys[i]) = cfg_limit_keys[i].def;
}

/* global.metrics: "HOST:PORT" or "PORT" (loopback); "" is off, as if absent. */
static int parse_metrics(struct pctx *p, json_object *v, struct config *c)
{
	json_object *m;
	char *host = NULL;
	uint16_t port;
	if (json_object_object_get_ex(v, "metrics", &m) && json_object_is_type(m, json_type_string) &&
	    !json_object_get_string_len(m))
		return 0; /* cfg_get_str refuses "" */
	int r = cfg_get_str(p, v, "metrics", false, 64, &c->metrics);
	if (r <= 0)
		return r;
	if (config_parse_metrics(c->metrics, &host, &port)) {
		cfg_push_key(p, "metrics");
		return cfg_perr(p, "must be \"HOST:PORT\" ([v6addr]:PORT for IPv6) or \"PORT\" (on 127.0.0.1), "
				"got \"%s\"", c->metrics);
	}
	free(host);
	return 0;
}

const char *config_state_dir(const struct config *c)
{
	if (!c->state_dir)
		return CONFIG_DEFAULT_STATE_DIR;
	return strcmp(c->state_dir, "none") ? c->state_dir : NULL;
}

bool config_valid_state_dir(const char *s)
{
	size_t n = strlen(s);

	return !strcmp(s, "none") || (s[0] == '/' && n <= 1024);
}

/* global.state_dir: where APTPL reservations live (docs/reservations.md). */
static int parse_state_dir(struct pctx *p, json_object *v, struct config *c)
{
	int r = cfg_get_str(p, v, "state_dir", false, 1024, &c->state_dir);

	if (r <= 0)
		return r;
	if (!config_valid_state_dir(c->state_dir)) {
		cfg_push_key(p, "state_dir");
		return cfg_perr(p, "must be an absolute path (at most 1024 bytes) or \"none\", got \"%s\"",
				c->state_dir);
	}
	return 0;
}

static int parse_global(struct pctx *p, json_object *v, struct config *c)
{
	static const char *const keys[] = { "reactors", "poll_mode", "iser_srq", "admin_socket", "login_timeout",
					    "max_connections", "max_connections_per_portal",
					    "max_connections_per_host", "max_sessions", "tcp_keepalive",
					    "buffer_pool_mb", "shutdown_timeout", "adaptive_spin_us", "metrics", "state_dir",
					    "isns", "admin_https", NULL };
	char *mode = NULL;
	uint32_t n = 0;
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	for (size_t i = 0; i < ARRAY_SIZE(cfg_limit_keys); i++) {
		const struct limit_key *k = &cfg_limit_keys[i];
		uint32_t val = k->def;
		if ((r = cfg_get_u32(p, v, k->key, false, k->min, k->max, &val)) < 0)
			return r;
		*cfg_limit_field(c, k) = val;
	}
	if ((r = cfg_get_u32(p, v, "reactors", false, 0, 1024, &n)) < 0)
		return r;
	c->reactors = n;
	n = 0;
	if ((r = cfg_get_u32(p, v, "iser_srq", false, 0, CFG_ISER_SRQ_MAX, &n)) < 0)
		return r;
	if (n && n < CFG_ISER_SRQ_MIN) {
		cfg_push_key(p, "iser_srq");
		return cfg_perr(p, "must be 0 (each connection posts its own receives) or %u-%u, got %u",
				CFG_ISER_SRQ_MIN, CFG_ISER_SRQ_MAX, n);
	}
	c->iser_srq = n;
	if ((r = cfg_get_str(p, v, "poll_mode", false, 16, &mode)) < 0)
		return r;
	if (mode) {
		if (!strcmp(mode, "event"))
			c->poll_mode = REACTOR_EVENT;
		else if (!strcmp(mode, "busy"))
			c->poll_mode = REACTOR_BUSY_POLL;
		else if (!strcmp(mode, "adaptive"))
			c->poll_mode = REACTOR_ADAPTIVE;
		else {
			cfg_push_key(p, "poll_mode");
			r = cfg_perr(p, "must be \"event\", \"busy\" or \"adaptive\", got \"%s\"", mode);
			free(mode);
			return r;
		}
		free(mode);
	}
	/* sun_path holds 108 bytes with the terminator */
	if ((r = cfg_get_str(p, v, "admin_socket", false, 107, &c->admin_socket)) < 0)
		return r;
	if ((r = parse_state_dir(p, v, c)) || (r = cfg_parse_isns(p, v, c)) || (r = cfg_parse_admin_https(p, v, c)))
		return r;
	return parse_metrics(p, v, c);
}

static int parse_section(struct pctx *p, json_object *root, const char *key, struct config *c,
			 int (*fn)(struct pctx *, json_object *, struct config *))
{
	json_object *v;
	size_t mark;
	int r = cfg_lookup(p, root, key, false, &v);

	if (r <= 0)
		return r;
	mark = cfg_push_key(p, key);
	if ((r = fn(p, v, c)))
		return r;
	cfg_pop(p, mark);
	return 0;
}

/* Portals of several TPGs with one address, port and transport are one
 * listener, and a listener's connections have one ToS. */
static int check_portal_tos(struct pctx *p, const struct config *c)
{
	for (size_t i = 0; i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++)
			for (size_t k = 0; k < c->targets[i].tpgs[j].nportals; k++) {
				const struct cfg_portal *a = &c->targets[i].tpgs[j].portals[k];
				for (size_t i2 = 0; i2 <= i; i2++)
					for (size_t j2 = 0; j2 < (i2 < i ? c->targets[i2].ntpgs : j); j2++)
						for (size_t k2 = 0; k2 < c->targets[i2].tpgs[j2].nportals; k2++) {
							const struct cfg_portal *b = &c->targets[i2].tpgs[j2].portals[k2];
							if (a->tos != b->tos && a->port == b->port && a->iser == b->iser &&
							    !strcmp(a->host, b->host))
								return cfg_perr(p, "targets[%zu].tpgs[%zu].portals[%zu].tos: %u, but "
										   "targets[%zu].tpgs[%zu].portals[%zu] has %u: "
										   "they are one listener, with one ToS",
										i, j, k, a->tos, i2, j2, k2, b->tos);
						}
			}
	return 0;
}

static int parse_root(struct pctx *p, json_object *root, struct config *c)
{
	static const char *const keys[] = { "backstores", "targets", "discovery", "global", NULL };
	int r;

	if (!json_object_is_type(root, json_type_object))
		return cfg_perr(p, "the document must be a JSON object");
	if ((r = cfg_check_keys(p, root, keys)))
		return r;
	PARSE_ARRAY(p, root, "backstores", CFG_MAX_BACKSTORES, c->backstores, c->nbackstores,
		    parse_one_backstore(p, el, c, i));
	/* Two backstores over one file would corrupt each other; names must be unique for LUNs. */
	if ((r = cfg_check_backstore_dups(p, c)))
		return r;
	PARSE_ARRAY(p, root, "targets", CFG_MAX_TARGETS, c->targets, c->ntargets,
		    parse_one_target(p, el, c, i));
	if ((r = check_portal_tos(p, c)))
		return r;
	if ((r = parse_section(p, root, "discovery", c, parse_discovery)) ||
	    (r = parse_section(p, root, "global", c, parse_global)))
		return r;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Loading. */

static void offset_to_linecol(const char *s, size_t off, unsigned *line, unsigned *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && s[i]; i++) {
		if (s[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)s[i] & 0xc0) != 0x80) {
			(*col)++;   /* count characters, not UTF-8 continuation bytes */
		}
	}
}

static int load_buf(const char *json, size_t len, const char *origin, struct config **out,
		    char *err, size_t errlen)
{
	struct pctx p = { .origin = origin ? origin : "<string>", .err = err, .errlen = errlen };
	struct json_tokener *tok;
	json_object *root;
	struct config *c;
	int r;

	*out = NULL;
	if (err && errlen)
		err[0] = '\0';
	if (strlen(json) != len)
		return cfg_perr(&p, "the document contains a NUL byte");
	if (len > CFG_MAX_FILE)
		return cfg_perr(&p, "the document is larger than %u bytes", CFG_MAX_FILE);
	tok = json_tokener_new();
	if (!tok)
		return cfg_enomem(&p);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	/* Passing the terminator too makes json-c finish a trailing number. */
	root = json_tokener_parse_ex(tok, json, (int)len + 1);
	enum json_tokener_error jerr = json_tokener_get_error(tok);
	if (!root || jerr != json_tokener_success) {
		unsigned line, col;
		size_t off = json_tokener_get_parse_end(tok);
		offset_to_linecol(json, off, &line, &col);
		if (jerr == json_tokener_success || jerr == json_tokener_continue ||
		    jerr == json_tokener_error_parse_eof)
			r = cfg_perr(&p, "line %u, column %u: JSON syntax error: unexpected end of document", line, col);
		else
			r = cfg_perr(&p, "line %u, column %u: JSON syntax error: %s", line, col,
				     json_tokener_error_desc(jerr));
		config_wipe_secrets(root);
		json_object_put(root);
		json_tokener_free(tok);
		return r;
	}
	json_tokener_free(tok);

	c = calloc(1, sizeof(*c));
	if (!c) {
		config_wipe_secrets(root);
		json_object_put(root);
		return cfg_enomem(&p);
	}
	c->poll_mode = REACTOR_EVENT;
	limits_default(c);
	c->origin = strdup(p.origin);
	r = c->origin ? parse_root(&p, root, c) : cfg_enomem(&p);
	free(p.bs_names);
	config_wipe_secrets(root);
	json_object_put(root);
	if (r) {
		config_free(c);
		return r;
	}
	*out = c;
	return 0;
}

int config_load_string(const char *json, const char *origin, struct config **out,
		       char *err, size_t errlen)
{
	if (!json || !out)
		return -EINVAL;
	return load_buf(json, strlen(json), origin, out, err, errlen);
}

int config_load_doc(json_object *doc, const char *origin, struct config **out, char *err, size_t errlen)
{
	const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	if (!text) {
		cfg_seterr(err, errlen, "out of memory");
		return -ENOMEM;
	}
	/* Through the text, so an admin's document meets the file's rules (strict JSON, UTF-8). */
	int r = config_load_string(text, origin, out, err, errlen);
	config_wipe_text(text);
	return r;
}

int config_load_file(const char *path, struct config **out, char *err, size_t errlen)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd, r;

	if (!path || !out)
		return -EINVAL;
	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		cfg_seterr(err, errlen, "%s: cannot open: %s", path, strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		cfg_seterr(err, errlen, "%s: stat: %s", path, strerror(-r));
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)CFG_MAX_FILE) {
		r = S_ISREG(st.st_mode) ? -EFBIG : -EINVAL;
		cfg_seterr(err, errlen, "%s: %s", path,
			   r == -EFBIG ? "larger than 16 MiB" : "not a regular file");
		close(fd);
		return r;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		cfg_seterr(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			cfg_seterr(err, errlen, "%s: read: %s", path, strerror(-r));
			explicit_bzero(buf, got);
			free(buf);
			close(fd);
			return r;
		}
		if (n == 0)
			break;   /* shrank under us: parse what we have */
		got += (size_t)n;
	}
	close(fd);
	buf[got] = '\0';
	r = load_buf(buf, got, path, out, err, errlen);
	explicit_bzero(buf, got); /* the file's text holds its inline secrets */
	free(buf);
	if (!r)
		(*out)->file_mode = st.st_mode & 07777;
	return r;
}

/* ------------------------------------------------------------------------ */

static void tpg_free(struct cfg_tpg *t)
{
	for (size_t i = 0; i < t->nportals; i++)
		free(t->portals[i].host);
	free(t->portals);
	free(t->redirect_host);
	free(t->balance);
	for (size_t i = 0; i < t->nluns; i++)
		free(t->luns[i].backstore);
	free(t->luns);
	for (size_t i = 0; i < t->nacls; i++) {
		free(t->acls[i].initiator);
		config_chap_free(&t->acls[i].chap);
		free(t->acls[i].luns);
	}
	free(t->acls);
	config_chap_free(&t->demo_chap);
}

void config_free(struct config *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nbackstores; i++)
		config_backstore_clear(&c->backstores[i]);
	free(c->backstores);
	for (size_t i = 0; i < c->ntargets; i++) {
		struct cfg_target *tg = &c->targets[i];
		free(tg->iqn);
		free(tg->alias);
		for (size_t j = 0; j < tg->ntpgs; j++)
			tpg_free(&tg->tpgs[j]);
		free(tg->tpgs);
		cfg_alua_free(tg);
	}
	free(c->targets);
	config_chap_free(&c->discovery_chap);
	free(c->admin_socket);
	free(c->metrics);
	free(c->state_dir);
	cfg_isns_free(c->isns);
	cfg_admin_https_free(c->admin_https);
	free(c->origin);
	free(c);
}
