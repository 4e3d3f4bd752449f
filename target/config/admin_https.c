/*
 * Target configuration: global.admin_https, the HTTPS door to the admin
 * methods (docs/admin.md "Remote administration"; the server is
 * target/control/https.c).  Only the shape is checked here, and each
 * principal's token hash read (so --check and a live change name a bad
 * file); the certificates are read and checked by the server, with the TLS
 * library that uses them.
 */
#include "target/config/config_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HTTPS_MAX_CONNECTIONS_DEFAULT 32
#define HTTPS_PER_ADDRESS_DEFAULT     4
#define HTTPS_TIMEOUT_DEFAULT         10
#define PRINCIPAL_NAME_MAX            64

static const char *const role_names[] = { [CFG_ROLE_READER] = "reader", [CFG_ROLE_OPERATOR] = "operator",
					  [CFG_ROLE_ADMIN] = "admin" };

const char *config_role_name(enum cfg_role r)
{
	return r >= CFG_ROLE_READER && r <= CFG_ROLE_ADMIN ? role_names[r] : "none";
}

static void principal_free(struct cfg_principal *pr)
{
	free(pr->name);
	free(pr->subject);
	free(pr->san);
	free(pr->token_hash_file);
	for (size_t i = 0; i < pr->ntargets; i++)
		free(pr->targets[i]);
	free(pr->targets);
	explicit_bzero(pr->token_sha256, sizeof(pr->token_sha256));
}

void cfg_admin_https_free(struct cfg_admin_https *h)
{
	if (!h)
		return;
	free(h->listen);
	free(h->certificate);
	free(h->key);
	free(h->client_ca);
	for (size_t i = 0; i < h->nprincipals; i++)
		principal_free(&h->principals[i]);
	free(h->principals);
	free(h);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The file's one line, "sha256:" and 64 lowercase hex digits (what `iserctl token create` writes). */
static int read_token_hash(struct pctx *p, struct cfg_principal *pr)
{
	char *line = NULL;
	int r = cfg_read_secret_file(p, pr->token_hash_file, &line);
	if (r)
		return r;
	bool ok = strlen(line) == 7 + 64 && !strncmp(line, "sha256:", 7);
	for (size_t i = 0; ok && i < 32; i++) {
		int hi = hexval(line[7 + 2 * i]), lo = hexval(line[8 + 2 * i]);
		ok = hi >= 0 && lo >= 0;
		pr->token_sha256[i] = (uint8_t)(hi << 4 | lo);
	}
	explicit_bzero(line, strlen(line));
	free(line);
	if (!ok)
		return cfg_perr(p, "%s: must hold one line \"sha256:\" and 64 lowercase hex digits (the SHA-256 of "
				   "the token; `iserctl token create` or `iserctl token hash` writes it)",
				pr->token_hash_file);
	return 0;
}

int config_reread_token_hashes(struct cfg_admin_https *h, char *err, size_t errlen)
{
	struct pctx p = { .origin = "global.admin_https", .err = err, .errlen = errlen };
	for (size_t i = 0; i < h->nprincipals; i++) {
		struct cfg_principal pr = { .token_hash_file = h->principals[i].token_hash_file };
		if (!pr.token_hash_file)
			continue;
		cfg_push_key(&p, h->principals[i].name);
		if (read_token_hash(&p, &pr))
			return -EINVAL;
		memcpy(h->principals[i].token_sha256, pr.token_sha256, 32);
		explicit_bzero(pr.token_sha256, 32);
		p.plen = 0;
		p.path[0] = 0;
	}
	return 0;
}

static bool name_ok(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
		      strchr("._@-", *s)))
			return false;
	return true;
}

static int parse_principal(struct pctx *p, json_object *v, struct cfg_admin_https *h, size_t idx)
{
	static const char *const keys[] = { "name", "role", "subject", "san", "token_hash_file", "targets", NULL };
	struct cfg_principal *pr = &h->principals[idx];
	char *role = NULL;
	json_object *arr;
	size_t n;
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)) ||
	    (r = cfg_get_str(p, v, "name", true, PRINCIPAL_NAME_MAX, &pr->name)) < 0)
		return r;
	if (!name_ok(pr->name)) {
		cfg_push_key(p, "name");
		return cfg_perr(p, "'%s': use letters, digits and . _ @ - only (it is written in the audit log)",
				pr->name);
	}
	for (size_t i = 0; i < idx; i++)
		if (!strcmp(h->principals[i].name, pr->name)) {
			cfg_push_key(p, "name");
			return cfg_perr(p, "'%s' is also principals[%zu]'s name", pr->name, i);
		}
	if ((r = cfg_get_str(p, v, "role", true, 16, &role)) < 0)
		return r;
	for (enum cfg_role k = CFG_ROLE_READER; k <= CFG_ROLE_ADMIN; k++)
		if (!strcmp(role, role_names[k]))
			pr->role = k;
	if (!pr->role) {
		cfg_push_key(p, "role");
		r = cfg_perr(p, "must be \"reader\", \"operator\" or \"admin\", got \"%s\"", role);
		free(role);
		return r;
	}
	free(role);
	if ((r = cfg_get_str(p, v, "subject", false, 1024, &pr->subject)) < 0 ||
	    (r = cfg_get_str(p, v, "san", false, 1024, &pr->san)) < 0 ||
	    (r = cfg_get_str(p, v, "token_hash_file", false, 4095, &pr->token_hash_file)) < 0)
		return r;
	if (!!pr->subject + !!pr->san + !!pr->token_hash_file != 1)
		return cfg_perr(p, "give exactly one of subject, san (a client certificate's) or token_hash_file "
				   "(a bearer token's)");
	if ((pr->subject || pr->san) && !h->client_ca)
		return cfg_perr(p, "names a client certificate, but admin_https has no client_ca to check "
				   "certificates against");
	if (pr->token_hash_file) {
		size_t mark = cfg_push_key(p, "token_hash_file");
		if ((r = read_token_hash(p, pr)))
			return r;
		cfg_pop(p, mark);
	}
	if ((r = cfg_get_array(p, v, "targets", false, CFG_HTTPS_TARGETS_MAX, &arr, &n)) < 0)
		return r;
	if (r > 0) {
		size_t mark = cfg_push_key(p, "targets");
		if (!n)
			return cfg_perr(p, "is empty: leave it out for every target");
		if (!(pr->targets = calloc(n, sizeof(*pr->targets))))
			return cfg_enomem(p);
		for (size_t i = 0; i < n; i++) {
			json_object *t = json_object_array_get_idx(arr, i);
			size_t im = cfg_push_idx(p, i);
			if (!json_object_is_type(t, json_type_string) || !json_object_get_string_len(t) ||
			    json_object_get_string_len(t) > CFG_MAX_NAME)
				return cfg_perr(p, "must be a target's name (a string of 1-%d bytes)", CFG_MAX_NAME);
			if (!(pr->targets[i] = strdup(json_object_get_string(t))))
				return cfg_enomem(p);
			pr->ntargets++;
			cfg_pop(p, im);
		}
		cfg_pop(p, mark);
	}
	return 0;
}

int cfg_parse_admin_https(struct pctx *p, json_object *g, struct config *c)
{
	static const char *const keys[] = { "listen", "certificate", "key", "client_ca", "principals",
					     "max_connections", "max_connections_per_address", "request_timeout",
					     NULL };
	json_object *v, *arr;
	size_t n, mark;
	uint32_t u;
	int r;

	if (!json_object_object_get_ex(g, "admin_https", &v) || json_object_is_type(v, json_type_null))
		return 0; /* null: off, as if absent (so global.set can turn it off) */
	mark = cfg_push_key(p, "admin_https");
	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	struct cfg_admin_https *h = calloc(1, sizeof(*h));
	if (!h)
		return cfg_enomem(p);
	c->admin_https = h;
	if ((r = cfg_get_str(p, v, "listen", true, 64, &h->listen)) < 0)
		return r;
	char *host = NULL;
	uint16_t port;
	if (config_parse_metrics(h->listen, &host, &port)) {
		cfg_push_key(p, "listen");
		return cfg_perr(p, "must be HOST:PORT with a numeric address (IPv6 in brackets: [::1]:8443) or a "
				   "PORT alone (127.0.0.1), got \"%s\"", h->listen);
	}
	free(host);
	if ((r = cfg_get_str(p, v, "certificate", true, 4095, &h->certificate)) < 0 ||
	    (r = cfg_get_str(p, v, "key", true, 4095, &h->key)) < 0 ||
	    (r = cfg_get_str(p, v, "client_ca", false, 4095, &h->client_ca)) < 0)
		return r;
	u = HTTPS_MAX_CONNECTIONS_DEFAULT;
	if ((r = cfg_get_u32(p, v, "max_connections", false, 1, 1024, &u)) < 0)
		return r;
	h->max_connections = u;
	u = HTTPS_PER_ADDRESS_DEFAULT;
	if ((r = cfg_get_u32(p, v, "max_connections_per_address", false, 1, 1024, &u)) < 0)
		return r;
	h->max_connections_per_address = u;
	u = HTTPS_TIMEOUT_DEFAULT;
	if ((r = cfg_get_u32(p, v, "request_timeout", false, 1, 300, &u)) < 0)
		return r;
	h->request_timeout_s = u;
	if ((r = cfg_get_array(p, v, "principals", true, CFG_HTTPS_PRINCIPALS_MAX, &arr, &n)) < 0)
		return r;
	size_t pm = cfg_push_key(p, "principals");
	if (!n)
		return cfg_perr(p, "is empty: nobody could use the door; name at least one principal");
	if (!(h->principals = calloc(n, sizeof(*h->principals))))
		return cfg_enomem(p);
	for (size_t i = 0; i < n; i++) {
		size_t im = cfg_push_idx(p, i);
		h->nprincipals = i + 1;
		if ((r = parse_principal(p, json_object_array_get_idx(arr, i), h, i)))
			return r;
		cfg_pop(p, im);
	}
	cfg_pop(p, pm);
	cfg_pop(p, mark);
	return 0;
}

json_object *cfg_admin_https_to_json(const struct cfg_admin_https *h)
{
	json_object *o = json_object_new_object(), *ps = json_object_new_array();
	bool ok = o && ps && cfg_put(o, "listen", json_object_new_string(h->listen)) &&
		  cfg_put(o, "certificate", json_object_new_string(h->certificate)) &&
		  cfg_put(o, "key", json_object_new_string(h->key)) &&
		  (!h->client_ca || cfg_put(o, "client_ca", json_object_new_string(h->client_ca))) &&
		  cfg_put(o, "max_connections", json_object_new_int64(h->max_connections)) &&
		  cfg_put(o, "max_connections_per_address", json_object_new_int64(h->max_connections_per_address)) &&
		  cfg_put(o, "request_timeout", json_object_new_int64(h->request_timeout_s));
	for (size_t i = 0; ok && i < h->nprincipals; i++) {
		const struct cfg_principal *pr = &h->principals[i];
		json_object *e = json_object_new_object(), *ts = NULL;
		ok = e && cfg_put(e, "name", json_object_new_string(pr->name)) &&
		     cfg_put(e, "role", json_object_new_string(config_role_name(pr->role))) &&
		     (!pr->subject || cfg_put(e, "subject", json_object_new_string(pr->subject))) &&
		     (!pr->san || cfg_put(e, "san", json_object_new_string(pr->san))) &&
		     (!pr->token_hash_file || cfg_put(e, "token_hash_file", json_object_new_string(pr->token_hash_file)));
		for (size_t k = 0; ok && pr->targets && k < pr->ntargets; k++)
			ok = (ts || (ts = json_object_new_array())) &&
			     !json_object_array_add(ts, json_object_new_string(pr->targets[k]));
		if (ts) {
			ok = ok && cfg_put(e, "targets", json_object_get(ts));
			json_object_put(ts);
		}
		if (ok)
			ok = !json_object_array_add(ps, e);
		else
			json_object_put(e);
	}
	if (ok && cfg_put(o, "principals", json_object_get(ps))) {
		json_object_put(ps);
		return o;
	}
	json_object_put(o);
	json_object_put(ps);
	return NULL;
}
