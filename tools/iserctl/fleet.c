/*
 * iserctl's fleet commands (docs/cluster.md): gateways configured as one
 * through a document in the cluster (isertd --cluster POOL/NAME --gateway
 * GW).  cluster status and gateway list show the fleet.status method,
 * gateway add|remove edit the document's membership as any edit is made,
 * cluster export asks a gateway for another's configuration (fleet.export),
 * and cluster import makes the document from the gateways' own files
 * without a socket: the admin stores it with rados put.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/config/config.h"
#include "import.h"
#include "iserctl.h"

void print_fleet(json_object *fleet)
{
	json_object *gws = get(fleet, "gateways");
	if (!fleet || !gws)
		return;
	if (get(fleet, "generation"))
		printf("fleet at generation %s:\n", gets(fleet, "generation", "?"));
	else
		printf("fleet plan:\n");
	for (size_t i = 0; i < json_object_array_length(gws); i++) {
		json_object *g = json_object_array_get_idx(gws, i), *plan = get(g, "plan");
		if (get(g, "plan") || !get(g, "result")) {
			size_t n = plan ? json_object_array_length(plan) : 0;
			printf("  gateway %s: %zu change%s\n", gets(g, "name", "?"), n, n == 1 ? "" : "s");
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
	printf("fleet %s, this gateway %s at generation %s\n", gets(res, "cluster", "?"), gets(res, "gateway", "?"),
	       gets(res, "generation", "?"));
	if (json_object_get_boolean(get(res, "cached")))
		printf("SERVING THE CACHED COPY: cluster unreachable: %s\n", gets(res, "last_error", "?"));
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
	}
	json_object_put(res);
	return 0;
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
		rc = write_doc("cluster export", out, json_object_to_json_string_ext(cfg, IMPORT_JSON_FLAGS));
	}
	config_wipe_secrets(res);
	json_object_put(res);
	return rc;
}

int cmd_cluster_fleet(int argc, char **argv)
{
	if (!strcmp(argv[0], "status"))
		return status(argc - 1, argv + 1, "cluster status: unexpected '%s' (cluster status [--json])");
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
