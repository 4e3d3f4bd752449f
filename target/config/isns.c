/*
 * Target configuration: global.isns, the iSNS server isertd registers its
 * targets with (RFC 4171; docs/config.md "isns"; the client is
 * target/isns/).  Read and written here; what is registered comes from the
 * targets, portal groups and portals of the same document.
 */
#include "target/config/config_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ISNS_DEFAULT_PORT 3205

void cfg_isns_free(struct cfg_isns *s)
{
	if (!s)
		return;
	free(s->server);
	free(s->host);
	free(s->entity);
	free(s->discovery_domain);
	free(s);
}

int config_parse_isns_server(const char *s, char **host, uint16_t *port)
{
	/* config_parse_hostport's default port is iSCSI's: give iSNS's where none is written */
	bool has_port = s && (s[0] == '[' ? strstr(s, "]:") != NULL
					  : strchr(s, ':') && strchr(s, ':') == strrchr(s, ':'));
	int r = config_parse_hostport(s, host, port);
	if (!r && !has_port)
		*port = ISNS_DEFAULT_PORT;
	return r;
}

int cfg_parse_isns(struct pctx *p, json_object *g, struct config *c)
{
	static const char *const keys[] = { "server", "entity", "esi_interval", "esi_port", "registration_period",
					    "discovery_domain", NULL };
	json_object *v;
	size_t mark;
	uint32_t n;
	int r;

	if (!json_object_object_get_ex(g, "isns", &v) || json_object_is_type(v, json_type_null))
		return 0; /* null: off, as if absent (so global.set can turn it off) */
	mark = cfg_push_key(p, "isns");
	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	struct cfg_isns *s = calloc(1, sizeof(*s));
	if (!s)
		return cfg_enomem(p);
	c->isns = s;
	s->registration_period_s = CFG_ISNS_PERIOD_DEFAULT;
	if ((r = cfg_get_str(p, v, "server", true, 64, &s->server)) < 0)
		return r;
	if (config_parse_isns_server(s->server, &s->host, &s->port)) {
		cfg_push_key(p, "server");
		return cfg_perr(p, "must be IP[:PORT] with a numeric address (IPv6 in brackets: [fd00::1]:3205; "
				   "port 3205 when none is given), got \"%s\"", s->server);
	}
	/* The Entity Identifier is an iSNS string of at most 255 bytes with its terminator. */
	if ((r = cfg_get_str(p, v, "entity", false, 254, &s->entity)) < 0 ||
	    (r = cfg_get_str(p, v, "discovery_domain", false, 254, &s->discovery_domain)) < 0)
		return r;
	n = 0;
	if ((r = cfg_get_u32(p, v, "esi_interval", false, 0, 3600, &n)) < 0)
		return r;
	s->esi_interval_s = n;
	n = 0;
	if ((r = cfg_get_u32(p, v, "esi_port", false, 0, 65535, &n)) < 0)
		return r;
	s->esi_port = (uint16_t)n;
	if (n && !s->esi_interval_s) {
		cfg_push_key(p, "esi_port");
		return cfg_perr(p, "is set but esi_interval is 0 (no ESI): give esi_interval too");
	}
	n = s->registration_period_s;
	if ((r = cfg_get_u32(p, v, "registration_period", false, CFG_ISNS_PERIOD_MIN, CFG_ISNS_PERIOD_MAX, &n)) < 0)
		return r;
	s->registration_period_s = n;
	cfg_pop(p, mark);
	return 0;
}

json_object *cfg_isns_to_json(const struct cfg_isns *s)
{
	json_object *o = json_object_new_object();
	bool ok = o && cfg_put(o, "server", json_object_new_string(s->server)) &&
		  (!s->entity || cfg_put(o, "entity", json_object_new_string(s->entity))) &&
		  cfg_put(o, "esi_interval", json_object_new_int64(s->esi_interval_s)) &&
		  (!s->esi_port || cfg_put(o, "esi_port", json_object_new_int64(s->esi_port))) &&
		  cfg_put(o, "registration_period", json_object_new_int64(s->registration_period_s)) &&
		  (!s->discovery_domain || cfg_put(o, "discovery_domain", json_object_new_string(s->discovery_domain)));
	if (!ok) {
		json_object_put(o);
		return NULL;
	}
	return o;
}
