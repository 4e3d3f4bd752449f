/*
 * Target configuration: a target's ALUA target port groups ("alua" in a
 * target, docs/config.md), read and written.  A target without "alua" gets
 * one group 1, active/optimized, holding every portal group; that default
 * is not written back, so portal groups added later join it by themselves.
 * With "alua", every portal group must be in exactly one group: a port no
 * group names would have no access state to report.
 */
#include "target/config/config_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define CFG_MAX_ALUA_GROUPS 256

static const struct {
	const char *name;
	uint8_t code;
} alua_states[] = {
	{ "active_optimized", ALUA_ACTIVE_OPTIMIZED },
	{ "active_nonoptimized", ALUA_ACTIVE_NONOPTIMIZED },
	{ "standby", ALUA_STANDBY },
	{ "unavailable", ALUA_UNAVAILABLE },
	{ "transitioning", ALUA_TRANSITIONING },
};

/* "active_optimized", ... for a state code (NULL: none); the code for a name (-1: none). */
static const char *config_alua_state_name(uint8_t state)
{
	for (size_t i = 0; i < sizeof(alua_states) / sizeof(alua_states[0]); i++)
		if (alua_states[i].code == state)
			return alua_states[i].name;
	return NULL;
}

static int config_alua_state_parse(const char *name)
{
	for (size_t i = 0; name && i < sizeof(alua_states) / sizeof(alua_states[0]); i++)
		if (!strcmp(alua_states[i].name, name))
			return alua_states[i].code;
	return -1;
}

void cfg_alua_free(struct cfg_target *tg)
{
	for (size_t i = 0; i < tg->nalua_groups; i++) {
		free(tg->alua_groups[i].tpgs);
		free(tg->alua_groups[i].remote_ports);
	}
	free(tg->alua_groups);
	tg->alua_groups = NULL;
	tg->nalua_groups = 0;
}

static bool has_tag(const struct cfg_target *tg, uint32_t tag)
{
	for (size_t i = 0; i < tg->ntpgs; i++)
		if (tg->tpgs[i].tag == tag)
			return true;
	return false;
}

/* Where relative port id port was listed before (group index, or SIZE_MAX). */
static size_t port_owner(const struct cfg_target *tg, size_t upto, uint16_t port)
{
	for (size_t g = 0; g < upto; g++) {
		const struct cfg_alua_group *a = &tg->alua_groups[g];
		for (size_t i = 0; i < a->ntpgs; i++)
			if (a->tpgs[i] == port)
				return g;
		for (size_t i = 0; i < a->nremote; i++)
			if (a->remote_ports[i] == port)
				return g;
	}
	return SIZE_MAX;
}

/* An array of relative port ids into *out; local: they must be tags of tg, remote: they must not. */
static int parse_ports(struct pctx *p, json_object *v, const char *key, struct cfg_target *tg, size_t gi,
		       bool local, uint16_t **out, size_t *n)
{
	json_object *arr;
	size_t cnt;
	int r = cfg_get_array(p, v, key, false, CFG_MAX_ALUA_PORTS, &arr, &cnt);
	if (r <= 0)
		return r;
	*out = calloc(cnt ? cnt : 1, sizeof(**out));
	if (!*out)
		return cfg_enomem(p);
	size_t mark = cfg_push_key(p, key);
	for (size_t i = 0; i < cnt; i++) {
		uint64_t id;
		size_t m = cfg_push_idx(p, i);
		if ((r = cfg_json_to_u64(p, json_object_array_get_idx(arr, i), 1, 65535, &id)))
			return r;
		if (local && !has_tag(tg, (uint32_t)id))
			return cfg_perr(p, "the target has no portal group with tag %u", (unsigned)id);
		if (!local && has_tag(tg, (uint32_t)id))
			return cfg_perr(p, "%u is the tag of one of this target's portal groups: list it in tpgs",
					(unsigned)id);
		for (size_t j = 0; j < i; j++)
			if ((*out)[j] == id)
				return cfg_perr(p, "%u is listed twice", (unsigned)id);
		/* The group being read counts too: a port in tpgs and remote_ports of one group. */
		size_t owner = port_owner(tg, gi + 1, (uint16_t)id);
		if (owner != SIZE_MAX)
			return cfg_perr(p, "relative port %u is already in groups[%zu]", (unsigned)id, owner);
		(*out)[i] = (uint16_t)id;
		*n = i + 1;
		cfg_pop(p, m);
	}
	cfg_pop(p, mark);
	return 0;
}

static int parse_group(struct pctx *p, json_object *v, struct cfg_target *tg, size_t gi)
{
	static const char *const keys[] = { "id", "state", "preferred", "tpgs", "remote_ports", NULL };
	struct cfg_alua_group *g = &tg->alua_groups[gi];
	uint32_t id;
	char *state = NULL;
	int r;

	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	if ((r = cfg_get_u32(p, v, "id", true, 1, 65535, &id)) < 0)
		return r;
	g->id = (uint16_t)id;
	for (size_t j = 0; j < gi; j++)
		if (tg->alua_groups[j].id == g->id) {
			cfg_push_key(p, "id");
			return cfg_perr(p, "duplicate target port group id %u, also in groups[%zu]", g->id, j);
		}
	g->state = ALUA_ACTIVE_OPTIMIZED;
	if ((r = cfg_get_str(p, v, "state", false, 32, &state)) < 0)
		return r;
	if (state) {
		int s = config_alua_state_parse(state);
		if (s < 0) {
			cfg_push_key(p, "state");
			r = cfg_perr(p, "must be \"active_optimized\", \"active_nonoptimized\", \"standby\", "
					"\"unavailable\" or \"transitioning\", got \"%s\"", state);
			free(state);
			return r;
		}
		g->state = (uint8_t)s;
		free(state);
	}
	if ((r = cfg_get_bool(p, v, "preferred", &g->preferred)) < 0 ||
	    (r = parse_ports(p, v, "tpgs", tg, gi, true, &g->tpgs, &g->ntpgs)) < 0 ||
	    (r = parse_ports(p, v, "remote_ports", tg, gi, false, &g->remote_ports, &g->nremote)) < 0)
		return r;
	if (g->ntpgs + g->nremote > CFG_MAX_ALUA_PORTS)
		return cfg_perr(p, "at most %u ports (tpgs and remote_ports together), got %zu", CFG_MAX_ALUA_PORTS,
				g->ntpgs + g->nremote);
	return 0;
}

static int alua_default(struct pctx *p, struct cfg_target *tg)
{
	tg->alua_modes = SCSI_ALUA_IMPLICIT;
	tg->alua_groups = calloc(1, sizeof(*tg->alua_groups));
	if (!tg->alua_groups)
		return cfg_enomem(p);
	tg->nalua_groups = 1;
	struct cfg_alua_group *g = &tg->alua_groups[0];
	g->id = 1;
	g->state = ALUA_ACTIVE_OPTIMIZED;
	g->tpgs = calloc(tg->ntpgs ? tg->ntpgs : 1, sizeof(*g->tpgs));
	if (!g->tpgs)
		return cfg_enomem(p);
	for (size_t i = 0; i < tg->ntpgs; i++)
		g->tpgs[i] = tg->tpgs[i].tag;
	g->ntpgs = tg->ntpgs;
	return 0;
}

int cfg_parse_alua(struct pctx *p, json_object *target, struct cfg_target *tg)
{
	static const char *const keys[] = { "mode", "transition_time", "groups", NULL };
	json_object *v, *arr;
	char *mode = NULL;
	uint32_t tt = 0;
	size_t n;
	int r = cfg_lookup(p, target, "alua", false, &v);

	if (r < 0)
		return r;
	if (r == 0)
		return alua_default(p, tg);
	tg->alua_given = true;
	size_t mark = cfg_push_key(p, "alua");
	if ((r = cfg_expect_object(p, v)) || (r = cfg_check_keys(p, v, keys)))
		return r;
	tg->alua_modes = SCSI_ALUA_IMPLICIT;
	if ((r = cfg_get_str(p, v, "mode", false, 16, &mode)) < 0)
		return r;
	if (mode) {
		if (!strcmp(mode, "implicit"))
			tg->alua_modes = SCSI_ALUA_IMPLICIT;
		else if (!strcmp(mode, "explicit"))
			tg->alua_modes = SCSI_ALUA_EXPLICIT;
		else if (!strcmp(mode, "both"))
			tg->alua_modes = SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT;
		else {
			cfg_push_key(p, "mode");
			r = cfg_perr(p, "must be \"implicit\", \"explicit\" or \"both\", got \"%s\"", mode);
			free(mode);
			return r;
		}
		free(mode);
	}
	if ((r = cfg_get_u32(p, v, "transition_time", false, 0, 255, &tt)) < 0)
		return r;
	tg->alua_transition_time = (uint8_t)tt;
	if ((r = cfg_get_array(p, v, "groups", true, CFG_MAX_ALUA_GROUPS, &arr, &n)) < 0)
		return r;
	if (!n) {
		cfg_push_key(p, "groups");
		return cfg_perr(p, "at least one target port group is needed");
	}
	tg->alua_groups = calloc(n, sizeof(*tg->alua_groups));
	if (!tg->alua_groups)
		return cfg_enomem(p);
	size_t gmark = cfg_push_key(p, "groups");
	for (size_t i = 0; i < n; i++) {
		size_t m = cfg_push_idx(p, i);
		tg->nalua_groups = i + 1;
		if ((r = parse_group(p, json_object_array_get_idx(arr, i), tg, i)))
			return r;
		cfg_pop(p, m);
	}
	cfg_pop(p, gmark);
	for (size_t i = 0; i < tg->ntpgs; i++)
		if (port_owner(tg, n, tg->tpgs[i].tag) == SIZE_MAX) {
			cfg_push_key(p, "groups");
			return cfg_perr(p, "portal group tag %u (tpgs[%zu]) is in no target port group: add it to the "
					"tpgs of one", tg->tpgs[i].tag, i);
		}
	cfg_pop(p, mark);
	return 0;
}

static json_object *ports_json(const uint16_t *v, size_t n)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; a && i < n; i++)
		if (json_object_array_add(a, json_object_new_int(v[i]))) {
			json_object_put(a);
			return NULL;
		}
	return a;
}

/* "implicit", "explicit" or "both". */
static const char *config_alua_mode_name(uint8_t modes)
{
	static const char *const names[] = { "implicit", "implicit", "explicit", "both" };
	return names[modes & 3];
}

json_object *config_alua_obj(const struct cfg_target *tg)
{
	json_object *o = json_object_new_object(), *gs = json_object_new_array();
	bool ok = o && gs && cfg_put(o, "mode", json_object_new_string(config_alua_mode_name(tg->alua_modes))) &&
		  cfg_put(o, "transition_time", json_object_new_int(tg->alua_transition_time));
	for (size_t i = 0; ok && i < tg->nalua_groups; i++) {
		const struct cfg_alua_group *g = &tg->alua_groups[i];
		json_object *e = json_object_new_object();
		ok = e && cfg_put(e, "id", json_object_new_int(g->id)) &&
		     cfg_put(e, "state", json_object_new_string(config_alua_state_name(g->state))) &&
		     cfg_put(e, "preferred", json_object_new_boolean(g->preferred)) &&
		     cfg_put(e, "tpgs", ports_json(g->tpgs, g->ntpgs)) &&
		     cfg_put(e, "remote_ports", ports_json(g->remote_ports, g->nremote));
		if (ok)
			ok = !json_object_array_add(gs, e);
		if (!ok)
			json_object_put(e);
	}
	if (ok) {
		ok = cfg_put(o, "groups", gs);
		gs = NULL;
	}
	json_object_put(gs);
	if (ok)
		return o;
	json_object_put(o);
	return NULL;
}

bool cfg_alua_to_json(json_object *target, const struct cfg_target *tg)
{
	return !tg->alua_given || cfg_put(target, "alua", config_alua_obj(tg));
}
