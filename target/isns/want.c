/*
 * What a configuration asks the iSNS server to hold: one Network Entity,
 * every portal of an enabled portal group (TCP and iSER alike: iSNS names
 * an address and a TCP port, not a transport), every target with such a
 * portal group as a Storage Node of type target, and a Portal Group per
 * target and portal with its TPG's tag.  A copy: the client thread owns it,
 * nothing points back into the configuration.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "target/config/config.h"
#include "target/isns/isns_int.h"

void isns_want_free(struct isns_want *w)
{
	if (!w)
		return;
	free(w->host);
	free(w->eid);
	free(w->dd);
	free(w->portals);
	for (size_t i = 0; i < w->nnodes; i++) {
		free(w->nodes[i].name);
		free(w->nodes[i].alias);
		free(w->nodes[i].pgs);
	}
	free(w->nodes);
	free(w);
}

char *isns_default_eid(void)
{
	char h[256] = "";
	if (gethostname(h, sizeof(h) - 1) || !h[0])
		snprintf(h, sizeof(h), "isertd");
	return strdup(h);
}

/* A configured portal's address: IPv4-mapped, or IPv6; a wildcard marked by its family. */
static bool portal_of(const struct cfg_portal *cp, struct isns_portal *out)
{
	char h[64];
	size_t n = strlen(cp->host);
	static const uint8_t zero[16];
	memset(out, 0, sizeof(*out));
	out->port = cp->port;
	if (n >= 2 && cp->host[0] == '[' && cp->host[n - 1] == ']' && n - 2 < sizeof(h)) {
		memcpy(h, cp->host + 1, n - 2);
		h[n - 2] = 0;
	} else {
		snprintf(h, sizeof(h), "%s", cp->host);
	}
	if (inet_pton(AF_INET, h, out->ip + 12) == 1) {
		out->ip[10] = out->ip[11] = 0xff;
		if (!memcmp(out->ip + 12, zero, 4))
			out->wild = AF_INET;
		return true;
	}
	if (inet_pton(AF_INET6, h, out->ip) == 1) {
		if (!memcmp(out->ip, zero, 16))
			out->wild = AF_INET6;
		return true;
	}
	return false;
}

static long portal_index(struct isns_want *w, const struct isns_portal *p, size_t cap)
{
	for (size_t i = 0; i < w->nportals; i++)
		if (w->portals[i].port == p->port && w->portals[i].wild == p->wild && !memcmp(w->portals[i].ip, p->ip, 16))
			return (long)i;
	if (w->nportals == cap)
		return -1;
	w->portals[w->nportals] = *p;
	return (long)w->nportals++;
}

static int add_target(struct isns_want *w, const struct cfg_target *t, size_t portal_cap)
{
	size_t npg = 0;
	for (size_t j = 0; j < t->ntpgs; j++)
		npg += t->tpgs[j].enable ? t->tpgs[j].nportals : 0;
	if (!npg)
		return 0; /* no enabled portal group: nothing to reach it by */
	struct isns_node *n = &w->nodes[w->nnodes];
	memset(n, 0, sizeof(*n));
	n->pgs = calloc(npg, sizeof(*n->pgs));
	n->name = strdup(t->iqn);
	n->alias = t->alias ? strdup(t->alias) : NULL;
	if (!n->pgs || !n->name || (t->alias && !n->alias))
		goto nomem;
	for (size_t j = 0; j < t->ntpgs; j++) {
		const struct cfg_tpg *g = &t->tpgs[j];
		for (size_t k = 0; g->enable && k < g->nportals; k++) {
			struct isns_portal p;
			if (!portal_of(&g->portals[k], &p))
				continue; /* the loader checked it: cannot happen */
			long idx = portal_index(w, &p, portal_cap);
			bool dup = idx < 0;
			for (size_t m = 0; !dup && m < n->npgs; m++)
				dup = n->pgs[m].portal == (uint32_t)idx; /* one PG per node and portal: the first TPG's */
			if (!dup)
				n->pgs[n->npgs++] = (struct isns_pg){ (uint32_t)idx, g->tag };
		}
	}
	w->nnodes++;
	return 0;
nomem:
	free(n->pgs);
	free(n->name);
	free(n->alias);
	return -ENOMEM;
}

struct isns_want *isns_want_from_config(const struct config *c, char *err, size_t errlen)
{
	err[0] = 0;
	if (!c->isns)
		return NULL;
	const struct cfg_isns *s = c->isns;
	size_t nportals = 0;
	for (size_t i = 0; i < c->ntargets; i++)
		for (size_t j = 0; j < c->targets[i].ntpgs; j++)
			nportals += c->targets[i].tpgs[j].nportals;
	struct isns_want *w = calloc(1, sizeof(*w));
	if (!w)
		goto nomem;
	w->portals = calloc(nportals ? nportals : 1, sizeof(*w->portals));
	w->nodes = calloc(c->ntargets ? c->ntargets : 1, sizeof(*w->nodes));
	w->host = strdup(s->host);
	w->eid = s->entity ? strdup(s->entity) : isns_default_eid();
	w->dd = s->discovery_domain ? strdup(s->discovery_domain) : NULL;
	if (!w->portals || !w->nodes || !w->host || !w->eid || (s->discovery_domain && !w->dd))
		goto nomem;
	w->port = s->port;
	w->esi_interval = s->esi_interval_s;
	w->esi_port = s->esi_port;
	w->reg_period = s->registration_period_s;
	for (size_t i = 0; i < c->ntargets; i++)
		if (add_target(w, &c->targets[i], nportals))
			goto nomem;
	return w;
nomem:
	isns_want_free(w);
	snprintf(err, errlen, "out of memory");
	return NULL;
}
