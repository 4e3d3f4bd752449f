/*
 * iserctl: the admin CLI of isertd, a thin client of its JSON-RPC admin
 * socket (docs/admin.md), or of its HTTPS admin listener with --url
 * (docs/admin-remote-client.md).  Objects are named by targetcli-like paths:
 * /backstores/NAME, /iscsi/IQN/tpgN, /global.  Exit status: 0 done,
 * 1 refused (the message names the object and the rule), 2 usage,
 * 3 isertd cannot be reached, 4 no such object, 5 stale generation,
 * 6 (import) a configuration written with items not carried.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adminrpc.h"
#include "escape.h"
#include "iserctl.h"
#include "common/netaddr.h"
#include "version.h"

#define DEFAULT_SOCKET "/run/isertd.sock"
#define TIMEOUT_MS     30000
/* A change in a fleet is planned on every gateway (at most 5 s) and answered once each applied it (at most 30 s
 * more, docs/fleet.md): within TIMEOUT_MS iserctl would say isertd did not answer a change it then made. */
#define CHANGE_TIMEOUT_MS 60000

static struct admin_endpoint endpoint = { .sock = DEFAULT_SOCKET };
static int timeout_ms = TIMEOUT_MS;
bool as_json;
int64_t generation;   /* 0: not given */

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: iserctl [OPTIONS] COMMAND [ARGS]\n"
		"Administer a running isertd through its admin socket, or its HTTPS admin listener (--url).\n\n"
		"Commands:\n"
		"  ls                          the object tree: backstores, targets, TPGs, portals, LUNs,\n"
		"                              ACLs with mapped LUNs, and sessions\n"
		"  paths                       every object path, one per line (scripts, completion)\n"
		"  sessions [TSIH]             sessions (with TSIH: one, with its negotiated parameters)\n"
		"  sessions close TSIH         close a session's connection\n"
		"  config [--show-secrets]     the running configuration, as JSON; CHAP secrets\n"
		"                              masked unless --show-secrets (root only)\n"
		"  save [FILE] [--backups N]   write the running configuration (default: the file isertd\n"
		"                              started with), keeping N backups (default 10) in backup/\n"
		"  create PATH [KEY=VALUE...]  make an object:\n"
		"      /backstores/NAME type=file|block|ram path=P size=S [block_size= thin= write_cache= readonly= serial=]\n"
		"      /iscsi/IQN [alias=A]          (comes with tpg1, enabled)\n"
		"      /iscsi/IQN/tpgN [enable= demo_mode= ... alua_group=G (its ALUA target port group)]\n"
		"      /iscsi/IQN/tpgN/portals/IP[:PORT] [iser=true]\n"
		"      /iscsi/IQN/tpgN/luns[/lunM] backstore=NAME [read_only=true]\n"
		"      /iscsi/IQN/tpgN/acls/INITIATOR [chap.userid=U chap.password=P ...]  (maps every LUN)\n"
		"      /iscsi/IQN/tpgN/acls/INITIATOR/mapped_lunM tpg_lun=K [write_protect=true]\n"
		"  delete PATH                 remove an object (sessions it admitted are closed)\n"
		"  set PATH KEY=VALUE...       change settings:\n"
		"      /backstores/NAME size=SIZE   grow a LUN (block: size=0 follows the device)\n"
		"      /backstores/NAME write_cache=true|false\n"
		"      /iscsi/IQN/tpgN enable=false demo_mode=true params.MaxBurstLength=262144 ...\n"
		"      /iscsi/IQN/tpgN redirect=IP:PORT [redirect_type=permanent]   (redirect=null: none)\n"
		"      /iscsi/IQN/tpgN redirect_balance='[\"IP:PORT\",...]'   (a VALUE that is JSON is that JSON)\n"
		"      /iscsi/IQN/tpgN/acls/INITIATOR chap.userid=U chap.password=P (chap=null: off)\n"
		"      /discovery auth_required=true chap.userid=U chap.password=P\n"
		"      /global login_timeout=N max_connections=N max_sessions=N ...\n"
		"      /global isns.server=IP[:PORT] isns.esi_interval=N ...  (iSNS; isns=null: off)\n"
		"  apply FILE [--dry-run]      make FILE the running configuration, changing only what differs\n"
		"  restore FILE [--target IQN | --backstore NAME] [--dry-run]\n"
		"                              FILE, or one target or backstore of it, into the running one\n"
		"  call METHOD [JSON-OBJECT | KEY=VALUE...]\n"
		"                              any method of the socket (iserctl call rpc.methods lists\n"
		"                              them), its parameters as one JSON object or as KEY=VALUE,\n"
		"                              each typed as the method's table in rpc.methods says\n"
		"  stats [--target IQN] [--initiator IQN] [--lun N] [--tsih N] [--json]\n"
		"                              counters: per LUN and initiator (commands, MB, latency avg\n"
		"                              and p99), per connection, per portal, RDMA devices\n"
		"  stats reset                 zero every counter\n"
		"  alua [IQN]                  ALUA target port groups: state, status, preferred, ports\n"
		"  alua set IQN GROUP STATE    active_optimized|active_nonoptimized|standby|unavailable|\n"
		"                              transitioning (initiators get ASYMMETRIC ACCESS STATE CHANGED)\n"
		"  alua set IQN [GROUP] KEY=VALUE...  preferred=true|false (with GROUP), mode=implicit|\n"
		"                              explicit|both, transition_time=SECONDS\n"
		"  cluster                     what is kept with the other gateways serving the same stores:\n"
		"                              reservations, ALUA states, the gateways (docs/cluster.md)\n"
		"  cluster status [--json]     the fleet this gateway is in (docs/fleet.md): per gateway\n"
		"                              whether it runs, the generation it applied, its result, fenced\n"
		"  cluster import --gateway NAME=FILE... [-o OUT]\n"
		"                              the fleet's document made from each gateway's file (no socket;\n"
		"                              refused where they differ, showing the difference), on stdout\n"
		"                              or in OUT; then store it in the cluster, in the gateways'\n"
		"                              POOL/FLEET: rados put isert_config.FLEET OUT, in pool POOL\n"
		"  cluster export --gateway GW [-o OUT]\n"
		"                              GW's configuration from the fleet, as a file of its own (to\n"
		"                              leave the fleet with)\n"
		"  gateway add|remove NAME     a gateway into or out of the fleet's document\n"
		"  gateway list [--json]       the fleet's gateways, as cluster status\n"
		"  top [-d SECONDS] [-n ITERATIONS] [-b] [--by lun|initiator]\n"
		"                              live per-LUN (or per-initiator) IOPS, MB/s, latency, queue\n"
		"                              depth every -d seconds (default 2), -n frames, -b plain text\n"
		"                              frames (batch); q or Ctrl-C quits\n"
		"  import lio|tgt FILE [-o OUT] [--apply | --dry-run]\n"
		"                              LIO's saveconfig.json or tgt's targets.conf as an isertd\n"
		"                              configuration (stdout, or OUT); what is not carried is listed\n"
		"                              on stderr; --apply makes it the running one (plan first),\n"
		"                              --dry-run shows only the plan\n"
		"  token create TOKEN_FILE HASH_FILE\n"
		"                              a bearer token for --url (no isertd needed): TOKEN_FILE for\n"
		"                              the client, HASH_FILE (sha256:HEX) for isertd's principal\n"
		"                              (token_hash_file); both new, mode 0600\n"
		"  token hash TOKEN_FILE       the sha256: line of an existing token\n\n"
		"Options:\n"
		"  -s, --socket PATH     the admin socket (default " DEFAULT_SOCKET ")\n"
		"  --url https://HOST:PORT  isertd's HTTPS admin listener instead ($ISERCTL_URL; IPv6:\n"
		"                        https://[::1]:PORT); no user-info, query or fragment in it\n"
		"  --cacert FILE         the CAs the listener's certificate is checked against\n"
		"                        ($ISERCTL_CACERT; default: the system's)\n"
		"  --cert FILE --key FILE  a client certificate and its key ($ISERCTL_CERT, $ISERCTL_KEY)\n"
		"  --token-file FILE     the bearer token, a file of mode 0600 ($ISERCTL_TOKEN_FILE, or the\n"
		"                        token itself in $ISERCTL_TOKEN; never on the command line)\n"
		"  -j, --json            print the answer as JSON\n"
		"  -g, --generation N    refuse the change unless the configuration is still at generation N\n"
		"  -n, --dry-run         show what a change would do, do nothing\n"
		"  -h, --help            this help\n"
		"      --version         print iserctl's version and exit\n\n"
		"Exit status: 0 done, 1 refused, 2 usage, 3 isertd not reachable, 4 no such object,\n"
		"5 stale generation, 6 imported with items not carried.\n");
}

int die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "iserctl: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (try iserctl --help)\n");
	return EX_USAGE;
}

/* Send one request, read one answer; result (owned by the caller) or exit status with the message printed. */
int call(const char *method, json_object *params, json_object **result)
{
	*result = NULL;
	if (params && generation)
		json_object_object_add(params, "generation", json_object_new_int64(generation));
	json_object *rsp;
	char why[512];
	int e = remote_token(&endpoint);
	if (e) {
		json_object_put(params);
		return e;
	}
	e = admin_rpc_to(&endpoint, method, params, timeout_ms, &rsp, why, sizeof(why));
	if (e && endpoint.url) {
		fprintf(stderr, "iserctl: %s%s\n", why,
			e == -ECONNREFUSED ? " (is admin_https in isertd's configuration, on that address and port?)" : "");
		return e == -EINVAL ? EX_USAGE : EX_UNREACHABLE;
	}
	if (e) {
		fprintf(stderr, "iserctl: %s%s\n", why,
			e == -ENOENT || e == -ECONNREFUSED ? " (is isertd running with an admin socket, --admin-socket? "
							     "see --socket)"
			: e == -EACCES			   ? " (the socket is for root and isertd's user)"
							   : "");
		return e == -ENAMETOOLONG ? EX_USAGE : EX_UNREACHABLE;
	}
	json_object *err, *res;
	if (json_object_object_get_ex(rsp, "error", &err) && err) {
		json_object *code = NULL, *msg = NULL;
		json_object_object_get_ex(err, "code", &code);
		json_object_object_get_ex(err, "message", &msg);
		int c = json_object_get_int(code);
		if (as_json)
			printf("%s\n", json_object_to_json_string_ext(err, JSON_C_TO_STRING_PRETTY));
		fprintf(stderr, "iserctl: %s\n", msg ? shown(json_object_get_string(msg)) : "error without a message");
		json_object_put(rsp);
		return c == -32003 ? EX_NOTFOUND : c == -32002 ? EX_STALE : c == -32004 ? EX_UNREACHABLE : EX_REFUSED;
	}
	if (!json_object_object_get_ex(rsp, "result", &res)) {
		fprintf(stderr, "iserctl: the answer has neither result nor error\n");
		json_object_put(rsp);
		return EX_UNREACHABLE;
	}
	*result = json_object_get(res);
	json_object_put(rsp);
	return EX_OK;
}

void print_json(json_object *o)
{
	char *safe = esc_json(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
									 JSON_C_TO_STRING_NOSLASHESCAPE));
	printf("%s\n", safe ? safe : "null");
	free(safe);
}

json_object *get(json_object *o, const char *k)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static void free_shown(json_object *o, void *shown)
{
	(void)o;
	free(shown);
}

const char *shown_of(json_object *v)
{
	const char *raw = json_object_get_string(v);
	if (!v || !json_object_is_type(v, json_type_string) || esc_clean(raw))
		return raw;
	/* Kept with the string (freed with it), so every caller prints without freeing. */
	char *safe = json_object_get_userdata(v);
	if (!safe && (safe = esc_dup(raw)))
		json_object_set_userdata(v, safe, free_shown);
	return safe ? safe : "(out of memory)";
}

const char *gets(json_object *o, const char *k, const char *dflt)
{
	json_object *v = get(o, k);
	return v ? shown_of(v) : dflt;
}

const char *shown(const char *s)
{
	/* A few at once (one printf may show several); each lives until 8 more were made. */
	static char *ring[8];
	static unsigned next;
	if (!s || esc_clean(s))
		return s;
	unsigned i = next++ % 8;
	free(ring[i]);
	ring[i] = esc_dup(s);
	return ring[i] ? ring[i] : "(out of memory)";
}

static void human_size(uint64_t b, char *out, size_t n)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)b;
	int i = 0;
	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}

/* A portal of the configuration as ls and paths write it: IP:PORT, [IPv6]:PORT (the port 3260 when not given). */
static const char *portal_of(json_object *p, char *buf, size_t n)
{
	json_object *port = get(p, "port");
	netaddr_join(buf, n, gets(p, "ip", "?"), port ? (unsigned)json_object_get_int(port) : 3260);
	return buf;
}

/* ls: the tree targetcli users expect, with sizes, states and who is logged in. */
static int cmd_ls(void)
{
	json_object *cfgres, *sres;
	int rc = call("config.get", NULL, &cfgres);
	if (rc)
		return rc;
	rc = call("sessions", NULL, &sres);
	if (rc) {
		json_object_put(cfgres);
		return rc;
	}
	if (as_json) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "config", json_object_get(get(cfgres, "config")));
		json_object_object_add(o, "generation", json_object_get(get(cfgres, "generation")));
		json_object_object_add(o, "sessions", json_object_get(get(sres, "sessions")));
		print_json(o);
		json_object_put(o);
		json_object_put(cfgres);
		json_object_put(sres);
		return 0;
	}
	json_object *cfg = get(cfgres, "config"), *sessions = get(sres, "sessions");
	printf("o- / (generation %s, %s)\n", gets(cfgres, "generation", "?"), gets(cfgres, "origin", "?"));
	json_object *bss = get(cfg, "backstores");
	size_t nb = bss ? json_object_array_length(bss) : 0;
	printf("  o- backstores [%zu]\n", nb);
	for (size_t i = 0; i < nb; i++) {
		json_object *b = json_object_array_get_idx(bss, i);
		char sz[32] = "device size";
		uint64_t s = (uint64_t)json_object_get_uint64(get(b, "size"));
		if (s)
			human_size(s, sz, sizeof(sz));
		const char *path = gets(b, "path", NULL);
		printf("  | o- %s [%s, %s%s%s, %s-byte blocks%s]\n", gets(b, "name", "?"), gets(b, "type", "?"),
		       path ? path : "", path ? ", " : "", sz, gets(b, "block_size", "512"),
		       json_object_get_boolean(get(b, "readonly")) ? ", readonly" : "");
	}
	json_object *ts = get(cfg, "targets");
	size_t nt = ts ? json_object_array_length(ts) : 0;
	size_t ns = sessions ? json_object_array_length(sessions) : 0;
	printf("  o- iscsi [%zu target%s]\n", nt, nt == 1 ? "" : "s");
	for (size_t i = 0; i < nt; i++) {
		json_object *t = json_object_array_get_idx(ts, i);
		const char *iqn = gets(t, "iqn", "?");
		printf("    o- %s\n", iqn);
		json_object *tpgs = get(t, "tpgs");
		for (size_t j = 0; tpgs && j < json_object_array_length(tpgs); j++) {
			json_object *g = json_object_array_get_idx(tpgs, j);
			int64_t tag = json_object_get_int64(get(g, "tag"));
			unsigned nsess = 0;
			for (size_t k = 0; k < ns; k++) {
				json_object *s = json_object_array_get_idx(sessions, k);
				nsess += !strcmp(gets(s, "target", ""), iqn) && json_object_get_int64(get(s, "tpg")) == tag;
			}
			char redir[96] = "";
			if (get(g, "redirect"))
				snprintf(redir, sizeof(redir), ", redirect %s %s", gets(g, "redirect_type", "temporary"),
					 gets(g, "redirect", "?"));
			else if (get(g, "redirect_balance"))
				snprintf(redir, sizeof(redir), ", redirect_balance over %zu portals",
					 json_object_array_length(get(g, "redirect_balance")));
			printf("    | o- tpg%" PRId64 " [%s%s%s, %u session%s]\n", tag,
			       json_object_get_boolean(get(g, "enable")) ? "enabled" : "disabled",
			       json_object_get_boolean(get(g, "demo_mode")) ? ", demo mode" : "", redir, nsess,
			       nsess == 1 ? "" : "s");
			json_object *ps = get(g, "portals"), *ls = get(g, "luns"), *as = get(g, "acls");
			printf("    |   o- portals\n");
			for (size_t k = 0; ps && k < json_object_array_length(ps); k++) {
				json_object *p = json_object_array_get_idx(ps, k);
				char at[NETADDR_LEN];
				printf("    |   | o- %s [%s%s%s]\n", portal_of(p, at, sizeof(at)),
				       json_object_get_boolean(get(p, "iser")) ? "iser" : "tcp", get(p, "tos") ? ", tos " : "",
				       get(p, "tos") ? gets(p, "tos", "") : "");
			}
			printf("    |   o- luns\n");
			for (size_t k = 0; ls && k < json_object_array_length(ls); k++) {
				json_object *l = json_object_array_get_idx(ls, k);
				printf("    |   | o- lun%s -> /backstores/%s%s\n", gets(l, "lun", "?"),
				       gets(l, "backstore", "?"),
				       json_object_get_boolean(get(l, "read_only")) ? " [read-only]" : "");
			}
			printf("    |   o- acls\n");
			for (size_t k = 0; as && k < json_object_array_length(as); k++) {
				json_object *a = json_object_array_get_idx(as, k), *ml = get(a, "mapped_luns");
				printf("    |   | o- %s%s\n", gets(a, "initiator", "?"), get(a, "chap") ? " [chap]" : "");
				for (size_t m = 0; ml && m < json_object_array_length(ml); m++) {
					json_object *x = json_object_array_get_idx(ml, m);
					printf("    |   |   o- mapped_lun%s -> lun%s%s\n", gets(x, "mapped_lun", "?"),
					       gets(x, "tpg_lun", "?"),
					       json_object_get_boolean(get(x, "write_protect")) ? " [write-protected]" : "");
				}
			}
			printf("    |   o- sessions\n");
			for (size_t k = 0; k < ns; k++) {
				json_object *s = json_object_array_get_idx(sessions, k);
				if (strcmp(gets(s, "target", ""), iqn) || json_object_get_int64(get(s, "tpg")) != tag)
					continue;
				printf("    |     o- tsih %s: %s from %s [%s]\n", gets(s, "tsih", "?"), gets(s, "initiator", "?"),
				       gets(s, "peer", "?"), gets(s, "transport", "?"));
			}
		}
	}
	json_object_put(cfgres);
	json_object_put(sres);
	return 0;
}

/* paths: every object path, one per line (for scripts and shell completion). */
static int cmd_paths(void)
{
	json_object *res;
	int rc = call("config.get", NULL, &res);
	if (rc)
		return rc;
	json_object *cfg = get(res, "config"), *bss = get(cfg, "backstores"), *ts = get(cfg, "targets");
	printf("/backstores\n/iscsi\n/discovery\n/global\n");
	for (size_t i = 0; bss && i < json_object_array_length(bss); i++)
		printf("/backstores/%s\n", gets(json_object_array_get_idx(bss, i), "name", "?"));
	for (size_t i = 0; ts && i < json_object_array_length(ts); i++) {
		json_object *t = json_object_array_get_idx(ts, i), *tpgs = get(t, "tpgs");
		const char *iqn = gets(t, "iqn", "?");
		printf("/iscsi/%s\n", iqn);
		for (size_t j = 0; tpgs && j < json_object_array_length(tpgs); j++) {
			json_object *g = json_object_array_get_idx(tpgs, j), *ps = get(g, "portals"), *ls = get(g, "luns"),
				    *as = get(g, "acls");
			const char *tag = gets(g, "tag", "?");
			printf("/iscsi/%s/tpg%s\n/iscsi/%s/tpg%s/luns\n", iqn, tag, iqn, tag);
			for (size_t k = 0; ps && k < json_object_array_length(ps); k++) {
				char at[NETADDR_LEN];
				printf("/iscsi/%s/tpg%s/portals/%s\n", iqn, tag,
				       portal_of(json_object_array_get_idx(ps, k), at, sizeof(at)));
			}
			for (size_t k = 0; ls && k < json_object_array_length(ls); k++)
				printf("/iscsi/%s/tpg%s/luns/lun%s\n", iqn, tag, gets(json_object_array_get_idx(ls, k), "lun", "?"));
			for (size_t k = 0; as && k < json_object_array_length(as); k++) {
				json_object *a = json_object_array_get_idx(as, k), *ml = get(a, "mapped_luns");
				const char *ini = gets(a, "initiator", "?");
				printf("/iscsi/%s/tpg%s/acls/%s\n", iqn, tag, ini);
				for (size_t m = 0; ml && m < json_object_array_length(ml); m++)
					printf("/iscsi/%s/tpg%s/acls/%s/mapped_lun%s\n", iqn, tag, ini,
					       gets(json_object_array_get_idx(ml, m), "mapped_lun", "?"));
			}
		}
	}
	json_object_put(res);
	return 0;
}

static int cmd_sessions(int argc, char **argv)
{
	json_object *params = json_object_new_object(), *res;
	if (argc >= 1 && !strcmp(argv[0], "close")) {
		char *end;
		long t = argc == 2 ? strtol(argv[1], &end, 0) : 0;
		if (argc != 2 || *end || t < 1 || t > 65535) {
			json_object_put(params);
			return die_usage("sessions close: expected a TSIH (1-65535)%s", "");
		}
		json_object_object_add(params, "tsih", json_object_new_int((int)t));
		int rc = call("session.close", params, &res);
		if (!rc) {
			if (as_json)
				print_json(res);
			else
				printf("closed session TSIH %ld\n", t);
		}
		json_object_put(res);
		return rc;
	}
	if (argc > 1)
		return json_object_put(params), die_usage("sessions: unexpected '%s'", argv[1]);
	if (argc == 1) {
		char *end;
		long t = strtol(argv[0], &end, 0);
		if (*end || t < 1 || t > 65535)
			return json_object_put(params), die_usage("sessions: '%s' is not a TSIH (1-65535)", argv[0]);
		json_object_object_add(params, "tsih", json_object_new_int((int)t));
	}
	int rc = call("sessions", params, &res);
	if (rc)
		return rc;
	json_object *a = get(res, "sessions");
	if (as_json || argc == 1) {
		print_json(argc == 1 ? json_object_array_get_idx(a, 0) : a);
	} else {
		printf("%-6s %-9s %-40s %-48s %-22s %s\n", "TSIH", "TRANSPORT", "INITIATOR", "TARGET", "PEER", "LUNS");
		for (size_t i = 0; i < json_object_array_length(a); i++) {
			json_object *s = json_object_array_get_idx(a, i);
			printf("%-6s %-9s %-40s %-48s %-22s %zu\n", gets(s, "tsih", "?"), gets(s, "transport", "?"),
			       gets(s, "initiator", "?"), gets(s, "target", "(discovery)"), gets(s, "peer", "?"),
			       get(s, "luns") ? json_object_array_length(get(s, "luns")) : 0);
		}
	}
	json_object_put(res);
	return 0;
}

/* KEY=VALUE arguments into o; a dotted key (chap.userid, params.MaxBurstLength) makes nested objects. */
static int add_kv(json_object *o, int argc, char **argv)
{
	for (int i = 0; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (!eq || eq == argv[i])
			return die_usage("'%s' is not KEY=VALUE", argv[i]);
		*eq = 0;
		json_object *at = o;
		char *key = argv[i], *dot;
		while ((dot = strchr(key, '.'))) {
			*dot = 0;
			json_object *sub;
			if (!json_object_object_get_ex(at, key, &sub) || !json_object_is_type(sub, json_type_object)) {
				sub = json_object_new_object();
				json_object_object_add(at, key, sub);
			}
			at = sub;
			key = dot + 1;
		}
		json_object_object_add(at, key, arg_value(eq + 1));
	}
	return 0;
}

/* An object path, split: /backstores/NAME, /iscsi/IQN[/tpgN[/portals/IP[:PORT]|/luns[/lunN]|/acls/INI[/mapped_lunN]]],
 * /discovery, /global. */
struct opath {
	const char *kind;        /* "backstore", "target", "tpg", "portal", "lun", "acl", "mapped_lun", "discovery", "global" */
	char name[256], iqn[256], initiator[256], portal[128];
	long tag, lun;           /* -1 absent */
};

static int parse_path(const char *path, struct opath *o)
{
	char buf[1024], *part[8];
	int n = 0;
	memset(o, 0, sizeof(*o));
	o->tag = o->lun = -1;
	if (strlen(path) >= sizeof(buf) || path[0] != '/')
		return -1;
	strcpy(buf, path);
	for (char *save = NULL, *t = strtok_r(buf, "/", &save); t && n < 8; t = strtok_r(NULL, "/", &save))
		part[n++] = t;
	char *end;
	if (n == 1 && (!strcmp(part[0], "discovery") || !strcmp(part[0], "global"))) {
		o->kind = !strcmp(part[0], "global") ? "global" : "discovery";
		return 0;
	}
	if (n == 2 && !strcmp(part[0], "backstores")) {
		o->kind = "backstore";
		snprintf(o->name, sizeof(o->name), "%s", part[1]);
		return 0;
	}
	if (n < 2 || strcmp(part[0], "iscsi"))
		return -1;
	snprintf(o->iqn, sizeof(o->iqn), "%s", part[1]);
	o->kind = "target";
	if (n == 2)
		return 0;
	if (strncmp(part[2], "tpg", 3) || (o->tag = strtol(part[2] + 3, &end, 10)) < 1 || *end)
		return -1;
	o->kind = "tpg";
	if (n == 3)
		return 0;
	if (!strcmp(part[3], "portals") && n == 5) {
		o->kind = "portal";
		snprintf(o->portal, sizeof(o->portal), "%s", part[4]);
		return 0;
	}
	if (!strcmp(part[3], "luns") && (n == 4 || n == 5)) {
		o->kind = "lun";
		if (n == 5 && (strncmp(part[4], "lun", 3) || (o->lun = strtol(part[4] + 3, &end, 10)) < 0 || *end))
			return -1;
		return 0;
	}
	if (!strcmp(part[3], "acls") && (n == 5 || n == 6)) {
		o->kind = "acl";
		snprintf(o->initiator, sizeof(o->initiator), "%s", part[4]);
		if (n == 6) {
			o->kind = "mapped_lun";
			if (strncmp(part[5], "mapped_lun", 10) || (o->lun = strtol(part[5] + 10, &end, 10)) < 0 || *end)
				return -1;
		}
		return 0;
	}
	return -1;
}

static bool dry_run;

void print_plan(json_object *plan, const char *indent)
{
	for (size_t i = 0; plan && i < json_object_array_length(plan); i++) {
		json_object *st = json_object_array_get_idx(plan, i), *v = get(st, "value");
		char *value = v ? esc_json(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN)) : NULL;
		printf("%s%-7s %s%s%s\n", indent, gets(st, "op", "?"), gets(st, "path", "?"), v ? " = " : "",
		       value ? value : "");
		free(value);
	}
}

/* The answer of a change: its plan, what needs a restart, and what happened to sessions. */
static void print_change(const char *what, json_object *res)
{
	if (as_json) {
		print_json(res);
		return;
	}
	json_object *plan = get(res, "plan"), *restart = get(res, "restart_needed");
	size_t n = plan ? json_object_array_length(plan) : 0;
	print_plan(plan, "  ");
	for (size_t i = 0; restart && i < json_object_array_length(restart); i++)
		printf("  not applied: global.%s needs a restart\n", shown_of(json_object_array_get_idx(restart, i)));
	if (dry_run || json_object_get_boolean(get(res, "dry_run"))) {
		print_fleet(get(res, "fleet"));
		printf("%s: %zu change%s planned, nothing done (dry run)\n", what, n, n == 1 ? "" : "s");
		return;
	}
	/* In a fleet a change may leave this gateway's part as it was (another gateway's removed): the gateways say. */
	json_object *fgws = get(get(res, "fleet"), "gateways");
	bool fleet_changed = fgws && json_object_array_length(fgws);
	printf("%s: %s", what, n || fleet_changed ? "done" : "nothing to change");
	json_object *closed = get(res, "sessions_closed"), *maps = get(res, "sessions_with_new_luns");
	if (closed && json_object_get_int(closed))
		printf(", %d session%s closed", json_object_get_int(closed), json_object_get_int(closed) == 1 ? "" : "s");
	if (maps && json_object_get_int(maps))
		printf(", %d session%s told their LUNs changed", json_object_get_int(maps),
		       json_object_get_int(maps) == 1 ? "" : "s");
	printf(" (generation %s)\n", gets(res, "generation", "?"));
	print_fleet(get(res, "fleet"));
}

int run_change(const char *what, const char *method, json_object *params)
{
	if (dry_run)
		json_object_object_add(params, "dry_run", json_object_new_boolean(true));
	json_object *res;
	timeout_ms = CHANGE_TIMEOUT_MS;
	int rc = call(method, params, &res);
	timeout_ms = TIMEOUT_MS;
	if (!rc && res && json_object_object_get_ex(res, "plan", NULL))
		print_change(what, res);
	else if (!rc && as_json)
		print_json(res);
	else if (!rc) {
		printf("%s: done\n", what);
		print_fleet(get(res, "fleet"));
	}
	json_object_put(res);
	return rc;
}

static void put_tpg(json_object *p, const struct opath *o)
{
	json_object_object_add(p, "target", json_object_new_string(o->iqn));
	json_object_object_add(p, "tag", json_object_new_int((int)o->tag));
}

/* create|delete|set PATH [KEY=VALUE...] */
static int cmd_object(const char *verb, int argc, char **argv)
{
	struct opath o;
	if (argc < 1 || parse_path(argv[0], &o))
		return die_usage("%s: expected an object path such as /backstores/NAME, /iscsi/IQN/tpg1/luns/lun0, "
				 "/iscsi/IQN/tpg1/portals/IP:PORT, /iscsi/IQN/tpg1/acls/INITIATOR, /global",
				 verb);
	json_object *p = json_object_new_object();
	if (add_kv(p, argc - 1, argv + 1)) {
		json_object_put(p);
		return EX_USAGE;
	}
	bool create = !strcmp(verb, "create"), del = !strcmp(verb, "delete"), set = !strcmp(verb, "set");
	const char *method = NULL;
	if (!strcmp(o.kind, "backstore")) {
		json_object_object_add(p, "name", json_object_new_string(o.name));
		method = create ? "backstore.create" : del ? "backstore.delete" : "backstore.set";
		if (set && json_object_object_get_ex(p, "size", NULL) && json_object_object_length(p) == 2)
			method = "backstore.resize"; /* size=0 of a block backstore: follow the device */
	} else if (!strcmp(o.kind, "target")) {
		json_object_object_add(p, "iqn", json_object_new_string(o.iqn));
		method = create ? "target.create" : del ? "target.delete" : NULL;
	} else if (!strcmp(o.kind, "tpg")) {
		put_tpg(p, &o);
		method = create ? "tpg.create" : del ? "tpg.delete" : "tpg.set";
	} else if (!strcmp(o.kind, "portal")) {
		put_tpg(p, &o);
		char host[128];
		snprintf(host, sizeof(host), "%s", o.portal);
		char *colon = strrchr(host, ':'), *rb = strrchr(host, ']');
		if (colon && (!rb || colon > rb) && (host[0] == '[' || strchr(host, ':') == colon)) {
			*colon = 0;
			json_object_object_add(p, "port", json_object_new_int(atoi(colon + 1)));
		}
		if (host[0] == '[' && host[strlen(host) - 1] == ']') {
			host[strlen(host) - 1] = 0;
			memmove(host, host + 1, strlen(host));
		}
		json_object_object_add(p, "ip", json_object_new_string(host));
		method = create ? "portal.add" : del ? "portal.remove" : NULL;
	} else if (!strcmp(o.kind, "lun")) {
		put_tpg(p, &o);
		if (o.lun >= 0)
			json_object_object_add(p, "lun", json_object_new_int64(o.lun));
		method = create ? "lun.add" : del && o.lun >= 0 ? "lun.remove" : NULL;
	} else if (!strcmp(o.kind, "acl")) {
		put_tpg(p, &o);
		json_object_object_add(p, "initiator", json_object_new_string(o.initiator));
		method = create ? "acl.add" : del ? "acl.remove" : "acl.set";
	} else if (!strcmp(o.kind, "mapped_lun")) {
		put_tpg(p, &o);
		json_object_object_add(p, "initiator", json_object_new_string(o.initiator));
		json_object_object_add(p, "mapped_lun", json_object_new_int64(o.lun));
		method = create ? "mapped_lun.add" : del ? "mapped_lun.remove" : NULL;
	} else if (!strcmp(o.kind, "discovery")) {
		method = set ? "discovery.set" : NULL;
	} else if (!strcmp(o.kind, "global")) {
		method = set ? "global.set" : NULL;
	}
	if (!method) {
		json_object_put(p);
		return die_usage("%s: this verb does not apply to that path (see iserctl --help)", verb);
	}
	return run_change(argv[0], method, p);
}

/* apply FILE / restore FILE [--target IQN | --backstore NAME] */
static int cmd_apply(const char *verb, int argc, char **argv)
{
	json_object *p = json_object_new_object();
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--dry-run")) {
			dry_run = true;
		} else if (!strcmp(verb, "restore") && (!strcmp(argv[i], "--target") || !strcmp(argv[i], "--backstore")) &&
			   i + 1 < argc) {
			json_object_object_add(p, argv[i][2] == 't' ? "target" : "backstore", json_object_new_string(argv[i + 1]));
			i++;
		} else if (argv[i][0] != '-' && !get(p, "path")) {
			/* isertd opens the file itself: give it a path that means the same there. */
			char *abs = realpath(argv[i], NULL);
			json_object_object_add(p, "path", json_object_new_string(abs ? abs : argv[i]));
			free(abs);
		} else {
			json_object_put(p);
			return die_usage("unexpected '%s'", argv[i]);
		}
	}
	if (!get(p, "path")) {
		json_object_put(p);
		return die_usage("%s: expected a configuration file", verb);
	}
	return run_change(verb, verb, p);
}

static int cmd_save(int argc, char **argv)
{
	json_object *params = json_object_new_object(), *res;
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--backups") && i + 1 < argc) {
			char *end;
			long n = strtol(argv[++i], &end, 10);
			if (*end || n < 0 || n > 1000)
				return json_object_put(params), die_usage("save: --backups %s: expected 0-1000", argv[i]);
			json_object_object_add(params, "backups", json_object_new_int((int)n));
		} else if (argv[i][0] != '-' && !get(params, "path")) {
			json_object_object_add(params, "path", json_object_new_string(argv[i]));
		} else {
			json_object_put(params);
			return die_usage("save: unexpected '%s'", argv[i]);
		}
	}
	int rc = call("save", params, &res);
	if (!rc) {
		if (as_json)
			print_json(res);
		else if (get(res, "backup"))
			printf("saved %s (the previous one kept as %s)\n", gets(res, "path", "?"), gets(res, "backup", "?"));
		else
			printf("saved %s\n", gets(res, "path", "?"));
	}
	json_object_put(res);
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },     { "json", no_argument, NULL, 'j' },
		{ "generation", required_argument, NULL, 'g' }, { "help", no_argument, NULL, 'h' },
		{ "dry-run", no_argument, NULL, 'n' },          { "url", required_argument, NULL, 'U' },
		{ "cacert", required_argument, NULL, 'A' },     { "cert", required_argument, NULL, 'C' },
		{ "key", required_argument, NULL, 'K' },        { "token-file", required_argument, NULL, 'T' },
		{ "version", no_argument, NULL, 'V' },          { NULL, 0, NULL, 0 },
	};
	struct remote_args remote = { 0 };
	int o, rc;
	while ((o = getopt_long(argc, argv, "+s:jg:nh", opts, NULL)) != -1) {
		switch (o) {
		case 's':
			endpoint.sock = optarg;
			remote.socket_given = true;
			break;
		case 'U':
			remote.url = optarg;
			break;
		case 'A':
			remote.cacert = optarg;
			break;
		case 'C':
			remote.cert = optarg;
			break;
		case 'K':
			remote.key = optarg;
			break;
		case 'T':
			remote.token_file = optarg;
			break;
		case 'j':
			as_json = true;
			break;
		case 'g': {
			char *end;
			generation = strtoll(optarg, &end, 10);
			if (*end || generation < 1)
				return die_usage("--generation: '%s' is not a positive integer", optarg);
			break;
		}
		case 'n':
			dry_run = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			puts("iserctl " ISERT_VERSION);
			return 0;
		default:
			usage(stderr);
			return EX_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EX_USAGE;
	}
	if ((rc = remote_setup(&remote, &endpoint)))
		return rc;
	const char *cmd = argv[optind];
	int n = argc - optind - 1;
	char **args = argv + optind + 1;
	json_object *res;
	if (!strcmp(cmd, "ls") && !n)
		return cmd_ls();
	if (!strcmp(cmd, "paths") && !n)
		return cmd_paths();
	if (!strcmp(cmd, "sessions"))
		return cmd_sessions(n, args);
	if (!strcmp(cmd, "set") || !strcmp(cmd, "create") || !strcmp(cmd, "delete"))
		return cmd_object(cmd, n, args);
	if (!strcmp(cmd, "apply") || !strcmp(cmd, "restore"))
		return cmd_apply(cmd, n, args);
	if (!strcmp(cmd, "save"))
		return cmd_save(n, args);
	if (!strcmp(cmd, "stats"))
		return cmd_stats(n, args);
	if (!strcmp(cmd, "top"))
		return cmd_top(n, args);
	if (!strcmp(cmd, "alua"))
		return cmd_alua(n, args);
	if (!strcmp(cmd, "import"))
		return cmd_import(n, args);
	if (!strcmp(cmd, "cluster"))
		return n ? cmd_cluster_fleet(n, args) : cmd_cluster(n, args);
	if (!strcmp(cmd, "gateway"))
		return cmd_gateway(n, args);
	if (!strcmp(cmd, "config") && (!n || (n == 1 && !strcmp(args[0], "--show-secrets")))) {
		json_object *params = NULL;
		if (n) {
			params = json_object_new_object();
			json_object_object_add(params, "show_secrets", json_object_new_boolean(true));
		}
		rc = call("config.get", params, &res);
		if (!rc)
			print_json(get(res, "config"));
		json_object_put(res);
		return rc;
	}
	if (!strcmp(cmd, "call") && n >= 1)
		return cmd_call(n, args);
	if (!strcmp(cmd, "token"))
		return cmd_token(n, args);
	return die_usage("'%s': unknown command or wrong arguments", cmd);
}
