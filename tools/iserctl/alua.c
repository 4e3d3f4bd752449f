/*
 * iserctl alua: the ALUA target port groups of the running targets and
 * their access states (the alua.show and alua.set methods, docs/admin.md).
 * Scripts flip a group to standby and back with `iserctl alua set IQN
 * GROUP standby`; the exit status says whether it was done.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iserctl.h"

static void print_ports(json_object *a)
{
	size_t n = a ? json_object_array_length(a) : 0;
	for (size_t i = 0; i < n; i++)
		printf("%s%s", i ? "," : "", shown_of(json_object_array_get_idx(a, i)));
	if (!n)
		printf("-");
}

static int show(const char *iqn)
{
	json_object *params = json_object_new_object(), *res;
	if (iqn)
		json_object_object_add(params, "target", json_object_new_string(iqn));
	int rc = call("alua.show", params, &res);
	if (rc)
		return rc;
	json_object *ts = get(res, "targets");
	if (as_json) {
		print_json(ts);
		json_object_put(res);
		return 0;
	}
	for (size_t i = 0; i < json_object_array_length(ts); i++) {
		json_object *t = json_object_array_get_idx(ts, i), *gs = get(t, "groups");
		printf("%s: mode %s, transition time %s s%s\n", gets(t, "target", "?"), gets(t, "mode", "?"),
		       gets(t, "transition_time", "?"),
		       json_object_get_boolean(get(t, "configured")) ? "" : " (default: one group)");
		printf("  %-6s %-20s %-17s %-9s %-16s %s\n", "GROUP", "STATE", "STATUS", "PREFERRED", "TPGS",
		       "REMOTE PORTS");
		for (size_t j = 0; j < json_object_array_length(gs); j++) {
			json_object *g = json_object_array_get_idx(gs, j);
			printf("  %-6s %-20s %-17s %-9s ", gets(g, "id", "?"), gets(g, "state", "?"), gets(g, "status", "?"),
			       json_object_get_boolean(get(g, "preferred")) ? "yes" : "no");
			char tp[64];
			json_object *a = get(g, "tpgs");
			size_t used = 0;
			tp[0] = 0;
			for (size_t k = 0; a && k < json_object_array_length(a) && used < sizeof(tp) - 8; k++) {
				int w = snprintf(tp + used, sizeof(tp) - used, "%s%s", k ? "," : "",
						 shown_of(json_object_array_get_idx(a, k)));
				used += w > 0 ? (size_t)w : 0;
			}
			printf("%-16s ", used ? tp : "-");
			print_ports(get(g, "remote_ports"));
			printf("\n");
		}
	}
	json_object_put(res);
	return 0;
}

static int set(int argc, char **argv)
{
	if (argc < 2)
		return die_usage("alua set: expected IQN, then GROUP STATE or KEY=VALUE...%s", "");
	json_object *params = json_object_new_object();
	json_object_object_add(params, "target", json_object_new_string(argv[0]));
	int i = 1;
	char *end;
	long g = strtol(argv[1], &end, 10);
	if (!*end) {
		if (g < 1 || g > 65535)
			return json_object_put(params), die_usage("alua set: group '%s': expected 1-65535", argv[1]);
		json_object_object_add(params, "group", json_object_new_int((int)g));
		i = 2;
		/* GROUP STATE: the short form scripts use. */
		if (i < argc && !strchr(argv[i], '='))
			json_object_object_add(params, "state", json_object_new_string(argv[i++]));
	}
	for (; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i])
			return json_object_put(params), die_usage("alua set: '%s' is not KEY=VALUE", argv[i]);
		char key[32];
		snprintf(key, sizeof(key), "%.*s", (int)(eq - argv[i]), argv[i]);
		json_object_object_add(params, key, arg_value(eq + 1));
	}
	char what[320];
	snprintf(what, sizeof(what), "/iscsi/%s/alua", argv[0]);
	return run_change(what, "alua.set", params);
}

int cmd_alua(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "set"))
		return set(argc - 1, argv + 1);
	if (argc > 1)
		return die_usage("alua: unexpected '%s' (alua [IQN] | alua set IQN GROUP STATE)", argv[1]);
	return show(argc ? argv[0] : NULL);
}
