/*
 * iserctl's fleet commands (docs/cluster.md): gateways configured as one
 * through a document in the cluster (isertd --cluster POOL/NAME --gateway
 * GW).  cluster status and gateway list show the fleet.status method,
 * gateway add|remove edit the document's membership as any edit is made,
 * cluster export asks a gateway for another's configuration (fleet.export),
 * and cluster import makes the document from the gateways' own files
 * without a socket (config_fleet_import): the admin stores it with rados
 * put.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/config/config.h"
#include "target/config/fleet.h"
#include "import.h"
#include "iserctl.h"

void print_fleet(json_object *fleet)
{
	json_object *gws = get(fleet, "gateways");
	size_t n = gws ? json_object_array_length(gws) : 0;
	/* No gateway: nothing changed, so nothing was asked of the fleet. */
	if (!n)
		return;
	/* A dry run answers each gateway's plan, a change each gateway's result. */
	bool plans = get(json_object_array_get_idx(gws, 0), "plan") != NULL;
	printf("fleet %s generation %s:\n", plans ? "plan, on" : "at", gets(fleet, "generation", "?"));
	for (size_t i = 0; i < n; i++) {
		json_object *g = json_object_array_get_idx(gws, i), *plan = get(g, "plan");
		if (plans) {
			size_t k = plan ? json_object_array_length(plan) : 0;
			printf("  gateway %s: %zu change%s\n", gets(g, "name", "?"), k, k == 1 ? "" : "s");
			print_plan(plan, "    ");
			continue;
		}
		printf("  gateway %s: %s", gets(g, "name", "?"), gets(g, "result", "?"));
		if (get(g, "generation"))
			printf(" (generation %s)", gets(g, "generation", "?"));
		if (get(g, "error"))
			printf(": %s", gets(g, "error", "?"));
		printf("\n");
	}
}

/* A JSON boolean or null as the table shows it. */
static const char *yes_no(json_object *v, const char *yes, const char *no)
{
	return !v ? "-" : json_object_get_boolean(v) ? yes : no;
}

/* cluster status, gateway list: the fleet as this gateway sees it. */
static int status(int argc, char **argv, const char *what)
{
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--json") && strcmp(argv[i], "-j"))
			return die_usage(what, argv[i]);
		as_json = true;
	}
	json_object *res;
	int rc = call("fleet.status", NULL, &res);
	if (rc)
		return rc;
	if (as_json) {
		print_json(res);
		json_object_put(res);
		return 0;
	}
	printf("fleet %s, this gateway %s at generation %s%s\n", gets(res, "cluster", "?"), gets(res, "gateway", "?"),
	       gets(res, "generation", "?"), json_object_get_boolean(get(res, "fenced")) ? ", THIS GATEWAY IS FENCED" : "");
	json_object *reachable = get(res, "reachable");
	if (json_object_get_boolean(get(res, "cached")))
		printf("SERVING THE CACHED COPY: cluster unreachable: %s\n", gets(res, "last_error", "?"));
	else if (reachable && !json_object_get_boolean(reachable))
		printf("cluster unreachable: %s (this gateway runs the generation it applied)\n",
		       gets(res, "last_error", "?"));
	else if (get(res, "last_error"))
		printf("last error: %s\n", gets(res, "last_error", "?"));
	json_object *gws = get(res, "gateways");
	printf("%-20s %-7s %-10s %-6s %s\n", "GATEWAY", "RUNNING", "GENERATION", "RESULT", "FENCED");
	for (size_t i = 0; gws && i < json_object_array_length(gws); i++) {
		json_object *g = json_object_array_get_idx(gws, i);
		printf("%-20s %-7s %-10s %-6s %s\n", gets(g, "name", "?"), yes_no(get(g, "running"), "yes", "no"),
		       gets(g, "generation", "-"), yes_no(get(g, "ok"), "ok", "failed"),
		       yes_no(get(g, "fenced"), "FENCED", "no"));
		/* Under its line: an error is as long as it is, and the table stays a table. */
		if (get(g, "error"))
			printf("  %s: %s\n", gets(g, "name", "?"), gets(g, "error", "?"));
		if (json_object_get_boolean(get(g, "cached")))
			printf("  %s: serving its cached copy (it cannot reach the cluster)\n", gets(g, "name", "?"));
	}
	if (get(res, "not_answering"))
		printf("watching the document but not answering (stopped or hung): %s\n", gets(res, "not_answering", "?"));
	json_object_put(res);
	return 0;
}

/* cluster import --gateway NAME=FILE... [-o OUT]: the fleet's document from each gateway's file, here. */
static int import(int argc, char **argv)
{
	const char *names[FLEET_MAX_GATEWAYS], *out = NULL;
	json_object *cfgs[FLEET_MAX_GATEWAYS];
	size_t n = 0;
	char err[1024];
	int rc = 0;
	for (int i = 0; i < argc && !rc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc) {
			out = argv[++i];
			continue;
		}
		char *eq = i + 1 < argc && !strcmp(argv[i], "--gateway") ? strchr(argv[++i], '=') : NULL;
		if (!eq) {
			rc = die_usage("cluster import: unexpected '%s' (expected --gateway NAME=FILE... [-o OUT])",
				       argv[i]);
			break;
		}
		*eq = 0;
		if (!config_fleet_name_ok(argv[i])) {
			rc = die_usage("cluster import: '%s' is not a gateway name (1-63 of A-Z a-z 0-9 . _ -)",
				       argv[i]);
		} else if (n == FLEET_MAX_GATEWAYS) {
			rc = die_usage("cluster import: more than %s gateways", "64");
		} else {
			struct config *c;
			int e = config_load_file(eq + 1, &c, err, sizeof(err));
			if (e) {
				fprintf(stderr, "iserctl cluster import: gateway %s: %s\n", shown(argv[i]), shown(err));
				rc = EX_REFUSED;
				break;
			}
			cfgs[n] = config_to_obj(c);
			names[n++] = argv[i];
			config_free(c);
			if (!cfgs[n - 1]) {
				fprintf(stderr, "iserctl cluster import: out of memory\n");
				rc = EX_REFUSED;
			}
		}
	}
	if (!rc && !n)
		rc = die_usage("cluster import: expected --gateway NAME=FILE, once for each gateway%s", "");
	json_object *doc = NULL;
	if (!rc && config_fleet_import(cfgs, names, n, &doc, err, sizeof(err))) {
		fprintf(stderr, "iserctl cluster import: %s\n", shown(err));
		rc = EX_REFUSED;
	}
	if (!rc)
		rc = write_doc("cluster import", out, json_object_to_json_string_ext(doc, IMPORT_JSON_FLAGS));
	json_object_put(doc);
	for (size_t i = 0; i < n; i++) {
		/* The files may hold CHAP secrets: not left in freed memory. */
		config_wipe_secrets(cfgs[i]);
		json_object_put(cfgs[i]);
	}
	return rc;
}

/* cluster export --gateway GW [-o OUT]: GW's configuration as its own file, to leave the fleet with. */
static int export(int argc, char **argv)
{
	const char *gw = NULL, *out = NULL;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--gateway") && i + 1 < argc && !gw)
			gw = argv[++i];
		else
			return die_usage("cluster export: unexpected '%s' (expected --gateway GW [-o OUT])", argv[i]);
	}
	if (!gw)
		return die_usage("cluster export: expected --gateway GW%s", "");
	json_object *params = json_object_new_object(), *res;
	json_object_object_add(params, "gateway", json_object_new_string(gw));
	int rc = call("fleet.export", params, &res);
	if (rc)
		return rc;
	json_object *cfg = get(res, "config");
	if (!cfg) {
		fprintf(stderr, "iserctl cluster export: the answer has no configuration\n");
		rc = EX_REFUSED;
	} else {
		const char *text = json_object_to_json_string_ext(cfg, IMPORT_JSON_FLAGS);
		rc = write_doc("cluster export", out, text);
		/* A configuration may hold CHAP secrets: not left in freed memory. */
		config_wipe_text(text);
		config_wipe_secrets(cfg);
	}
	json_object_put(res);
	return rc;
}

int cmd_cluster_fleet(int argc, char **argv)
{
	if (!strcmp(argv[0], "status"))
		return status(argc - 1, argv + 1, "cluster status: unexpected '%s' (cluster status [--json])");
	if (!strcmp(argv[0], "import"))
		return import(argc - 1, argv + 1);
	if (!strcmp(argv[0], "export"))
		return export(argc - 1, argv + 1);
	/* cluster with anything else is cluster.show's, which says what it takes. */
	return cmd_cluster(argc, argv);
}

int cmd_gateway(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "list"))
		return status(argc - 1, argv + 1, "gateway list: unexpected '%s' (gateway list [--json])");
	bool add = argc >= 1 && !strcmp(argv[0], "add"), del = argc >= 1 && !strcmp(argv[0], "remove");
	if (!(add || del) || argc != 2)
		return die_usage("gateway: expected add NAME, remove NAME or list%s", "");
	json_object *params = json_object_new_object();
	json_object_object_add(params, "name", json_object_new_string(argv[1]));
	char what[96];
	snprintf(what, sizeof(what), "gateway %s", argv[1]);
	return run_change(what, add ? "fleet.gateway_add" : "fleet.gateway_remove", params);
}
