/*
 * iserctl cluster: what this gateway keeps with the other gateways serving
 * the same stores (the cluster.show method, docs/cluster.md): for each
 * shared LU its reservations, for each shared target its ALUA states, each
 * with the RADOS object, its version and the gateways (which answered the
 * last question, and which one is this).
 */
#include <stdio.h>
#include <string.h>

#include "iserctl.h"

static void print_gateways(json_object *o)
{
	json_object *gws = get(o, "gateways");
	printf("  %-17s %-5s %-8s %-30s %s\n", "GATEWAY", "SELF", "ANSWERED", "ADDRESS", "WHO");
	for (size_t i = 0; gws && i < json_object_array_length(gws); i++) {
		json_object *g = json_object_array_get_idx(gws, i), *d = get(g, "desc"), *ps = get(d, "ports");
		char who[200];
		int n = snprintf(who, sizeof(who), "%s", gets(d, "gateway", "?"));
		for (size_t k = 0; ps && k < json_object_array_length(ps) && n > 0 && (size_t)n < sizeof(who); k++)
			n += snprintf(who + n, sizeof(who) - (size_t)n, "%s%s", k ? "," : ", ports ",
				      shown_of(json_object_array_get_idx(ps, k)));
		printf("  %-17s %-5s %-8s %-30s %s\n", gets(g, "id", "?"),
		       json_object_get_boolean(get(g, "self")) ? "yes" : "", json_object_get_boolean(get(g, "answered")) ?
		       "yes" : "no", gets(g, "addr", "?"), who);
	}
	if (!gws)
		printf("  (not asked yet: the first heartbeat comes within 5 s)\n");
}

static void print_object(json_object *o, const char *what, const char *name)
{
	printf("%s of %s: %s, version %s%s\n", what, name, gets(o, "object", "?"), gets(o, "version", "?"),
	       json_object_get_boolean(get(o, "fenced")) ? ", THIS GATEWAY IS FENCED" : "");
	print_gateways(o);
}

static void print_reservations(json_object *o)
{
	json_object *st = get(o, "state"), *regs = get(st, "registrations"), *res = get(st, "reservation");
	printf("  PR generation %s, %zu registration%s", gets(st, "generation", "?"),
	       regs ? json_object_array_length(regs) : 0, regs && json_object_array_length(regs) == 1 ? "" : "s");
	if (res)
		printf(", reserved: type %s by %s\n", gets(res, "type", "?"),
		       get(res, "holder") ? gets(res, "holder", "?") : "every registrant");
	else
		printf(", no persistent reservation\n");
	for (size_t i = 0; regs && i < json_object_array_length(regs); i++) {
		json_object *r = json_object_array_get_idx(regs, i);
		printf("  [%zu] key %s  %s  through %s (relative port %s)\n", i, gets(r, "key", "?"),
		       gets(r, "initiator", "?"), gets(r, "target_port", "?"), gets(r, "relative_port", "?"));
	}
	json_object *r2 = get(st, "spc2_reservation");
	if (r2)
		printf("  SPC-2 reservation: %s through %s\n", gets(r2, "initiator", "?"), gets(r2, "target_port", "?"));
}

static void print_alua(json_object *o)
{
	static const char *const names[] = { "active_optimized", "active_nonoptimized", "standby", "unavailable" };
	json_object *gs = get(get(o, "state"), "groups");
	for (size_t i = 0; gs && i < json_object_array_length(gs); i++) {
		json_object *g = json_object_array_get_idx(gs, i);
		int st = json_object_get_int(get(g, "state"));
		printf("  group %s: %s\n", gets(g, "id", "?"), st >= 0 && st < 4 ? names[st] : st == 15 ?
		       "transitioning" : "?");
	}
}

int cmd_cluster(int argc, char **argv)
{
	json_object *res;
	if (argc)
		return die_usage("cluster: unexpected '%s'", argv[0]);
	int rc = call("cluster.show", NULL, &res);
	if (rc)
		return rc;
	if (as_json) {
		print_json(res);
		json_object_put(res);
		return 0;
	}
	json_object *lus = get(res, "reservations"), *tgts = get(res, "alua");
	if (!json_object_array_length(lus) && !json_object_array_length(tgts))
		printf("nothing is shared with other gateways (no backstore keeps shared state)\n");
	for (size_t i = 0; i < json_object_array_length(lus); i++) {
		json_object *o = json_object_array_get_idx(lus, i);
		print_object(o, "reservations", gets(o, "backstore", "?"));
		print_reservations(o);
	}
	for (size_t i = 0; i < json_object_array_length(tgts); i++) {
		json_object *o = json_object_array_get_idx(tgts, i);
		print_object(o, "ALUA states", gets(o, "target", "?"));
		print_alua(o);
	}
	json_object_put(res);
	return 0;
}
