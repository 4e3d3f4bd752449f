/*
 * Target configuration: changing a loaded configuration.  The admin socket
 * adds one backstore or LUN without a whole-document round trip, checked by
 * the loader's own code (config_load.c) as the next element of its array, so
 * the rules and messages are the file's; isertd's --portal replaces the
 * portals of every portal group.
 */
#include "target/config/config_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* One object added to a loaded configuration, checked by the same code as the file. */

void config_backstore_clear(struct cfg_backstore *b)
{
	struct backstore_rbd_cfg *r = &b->bs.rbd;
	free(b->name);
	free(b->path);
	free(b->serial);
	free(r->pool);
	free(r->image);
	free(r->ns);
	free(r->cluster);
	free(r->client_id);
	free(r->conf);
	free(r->keyring);
	memset(b, 0, sizeof(*b));
}

int config_check_backstore(const struct config *c, json_object *obj, const char *origin, struct cfg_backstore *out,
			   char *err, size_t errlen)
{
	struct pctx p = { .origin = origin, .err = err, .errlen = errlen };
	size_t n = c->nbackstores;
	memset(out, 0, sizeof(*out));
	if (n >= CFG_MAX_BACKSTORES) {
		cfg_push_key(&p, "backstores");
		return cfg_perr(&p, "at most %u entries", CFG_MAX_BACKSTORES);
	}
	/* As element n of the array: the names and paths of all are checked together, as in a file. */
	struct config view = *c;
	view.backstores = malloc((n + 1) * sizeof(*view.backstores));
	if (!view.backstores)
		return cfg_enomem(&p);
	memcpy(view.backstores, c->backstores, n * sizeof(*view.backstores));
	memset(&view.backstores[n], 0, sizeof(view.backstores[n]));
	size_t mark = cfg_push_key(&p, "backstores");
	cfg_push_idx(&p, n);
	int r = cfg_parse_backstore(&p, obj, &view.backstores[n]);
	cfg_pop(&p, mark);
	if (!r) {
		view.nbackstores = n + 1;
		r = cfg_check_backstore_dups(&p, &view);
		free(p.bs_names);
	}
	if (r)
		config_backstore_clear(&view.backstores[n]);
	else
		*out = view.backstores[n];
	free(view.backstores);
	return r;
}

int config_append_backstore(struct config *c, struct cfg_backstore *b)
{
	struct cfg_backstore *v = realloc(c->backstores, (c->nbackstores + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	c->backstores = v;
	v[c->nbackstores++] = *b;
	memset(b, 0, sizeof(*b));
	return 0;
}

int config_check_lun(const struct config *c, size_t ti, size_t gi, json_object *obj, const char *origin,
		     struct cfg_lun *out, char *err, size_t errlen)
{
	struct pctx p = { .origin = origin, .err = err, .errlen = errlen };
	const struct cfg_tpg *g = &c->targets[ti].tpgs[gi];
	struct lunmap *seen = calloc(1, sizeof(*seen));
	struct cfg_tpg view = *g;
	memset(out, 0, sizeof(*out));
	view.luns = calloc(g->nluns + 1, sizeof(*view.luns));
	int r = seen && view.luns ? 0 : cfg_enomem(&p);
	for (size_t i = 0; !r && i < g->nluns; i++)
		cfg_lunmap_test_set(seen, g->luns[i].lun);
	/* The backstore names, sorted as when a file is read (parse_lun looks them up there). */
	struct config names = *c;
	if (!r)
		r = cfg_check_backstore_dups(&p, &names);
	if (!r) {
		size_t m = cfg_push_key(&p, "targets");
		cfg_push_idx(&p, ti);
		cfg_push_key(&p, "tpgs");
		cfg_push_idx(&p, gi);
		cfg_push_key(&p, "luns");
		cfg_push_idx(&p, g->nluns);
		r = cfg_parse_one_lun(&p, obj, c, &view, g->nluns, seen);
		cfg_pop(&p, m);
	}
	if (!r)
		*out = view.luns[g->nluns];
	else if (view.luns)
		free(view.luns[g->nluns].backstore);
	free(p.bs_names);
	free(view.luns);
	free(seen);
	return r;
}

int config_append_lun(struct config *c, size_t ti, size_t gi, struct cfg_lun *l)
{
	struct cfg_tpg *g = &c->targets[ti].tpgs[gi];
	struct cfg_lun *v = realloc(g->luns, (g->nluns + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	g->luns = v;
	v[g->nluns++] = *l;
	memset(l, 0, sizeof(*l));
	return 0;
}

int config_set_portals(struct config *c, const char *const *hostports, size_t n, bool iser, char *err,
		       size_t errlen)
{
	size_t ntpg = 0;

	if (!c || !n || n > CFG_MAX_PORTALS) {
		cfg_seterr(err, errlen, "from 1 to %u portals", CFG_MAX_PORTALS);
		return -EINVAL;
	}
	for (size_t i = 0; i < c->ntargets; i++)
		ntpg += c->targets[i].ntpgs;
	if (!ntpg) {
		cfg_seterr(err, errlen, "%s: the configuration has no portal group to listen for", c->origin);
		return -ENOENT;
	}
	/* Parse and allocate everything first so a failure leaves the config untouched. */
	struct cfg_portal *parsed = calloc(n, sizeof(*parsed));
	struct cfg_portal **fresh = calloc(ntpg, sizeof(*fresh));
	int r = parsed && fresh ? 0 : -ENOMEM;
	for (size_t i = 0; !r && i < n; i++) {
		r = config_parse_hostport(hostports[i], &parsed[i].host, &parsed[i].port);
		parsed[i].iser = iser;
		if (r) {
			cfg_seterr(err, errlen, "%s: expected ADDRESS[:PORT] or [IPV6]:PORT with a numeric address, port 1-65535",
				   hostports[i] ? hostports[i] : "(null)");
			goto out;
		}
		for (size_t j = 0; j < i; j++)
			if (parsed[j].port == parsed[i].port && !strcmp(parsed[j].host, parsed[i].host)) {
				cfg_seterr(err, errlen, "%s: given twice", hostports[i]);
				r = -EINVAL;
				goto out;
			}
	}
	for (size_t k = 0; !r && k < ntpg; k++) {
		fresh[k] = calloc(n, sizeof(**fresh));
		if (!fresh[k])
			r = -ENOMEM;
		for (size_t i = 0; !r && i < n; i++) {
			fresh[k][i] = parsed[i];
			if (!(fresh[k][i].host = strdup(parsed[i].host)))
				r = -ENOMEM;
		}
	}
	if (r) {
		cfg_seterr(err, errlen, "out of memory");
		goto out;
	}
	size_t k = 0;
	for (size_t i = 0; i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++) {
			struct cfg_tpg *t = &c->targets[i].tpgs[j];
			for (size_t m = 0; m < t->nportals; m++)
				free(t->portals[m].host);
			free(t->portals);
			t->portals = fresh[k];
			fresh[k++] = NULL;
			t->nportals = n;
			/* redirect_balance named the portals just replaced */
			free(t->balance);
			t->balance = NULL;
			t->nbalance = 0;
		}
out:
	for (size_t k2 = 0; fresh && k2 < ntpg; k2++) {
		for (size_t i = 0; fresh[k2] && i < n; i++)
			free(fresh[k2][i].host);
		free(fresh[k2]);
	}
	for (size_t i = 0; parsed && i < n; i++)
		free(parsed[i].host);
	free(fresh);
	free(parsed);
	return r;
}

int config_override_portals_iser(struct config *c, const char *hostport, bool iser, char *err, size_t errlen)
{
	return config_set_portals(c, &hostport, 1, iser, err, errlen);
}

int config_override_portals(struct config *c, const char *hostport, char *err, size_t errlen)
{
	return config_set_portals(c, &hostport, 1, false, err, errlen);
}
