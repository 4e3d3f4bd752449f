/*
 * isertd: the iSCSI/iSER target daemon.  Runs in the foreground; with no
 * arguments it serves the embedded default configuration (one RAM LUN on
 * 127.0.0.1:3260, any initiator admitted).  SIGTERM/SIGINT stop it in
 * order: no new connections, commands already taken finish (at most
 * shutdown_timeout seconds, then what is left is closed), backstores are
 * flushed, and the exit status says whether all of it went well.
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/reactor.h"
#include "target/config/config.h"
#include "target/control/control.h"
#include "target/control/https.h"
#include "target/control/metrics.h"
#include "target/control/notify.h"
#include "target/control/rpc.h"
#include "target/fleet/fleet.h"
#include "target/iscsi/iscsi.h"
#include "target/isns/isns.h"
#include "version.h"

/* After the forced close, how long connections get to be freed before we give up on them. */
#define FORCED_FREE_MS 3000

static struct reactor **reactors;
static unsigned nreactors;
static struct config *cfg;
static int exit_status;
static uint64_t stop_deadline_ns, forced_ns;

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: isertd [OPTIONS]\n"
		"Serve iSCSI LUNs over TCP (and iSER).\n\n"
		"  -c, --config FILE      load the JSON configuration FILE (see docs/config.md);\n"
		"                         without it the embedded default is served:\n"
		"                         a 1 GiB RAM LUN on 127.0.0.1:3260, any initiator admitted\n"
		"  -p, --portal HOST:PORT listen here instead of the configured portals\n"
		"                         (repeat for several; [v6addr]:port for IPv6)\n"
		"  -r, --reactors N       worker threads (default: from the config, else one per core)\n"
		"  -a, --admin-socket PATH  serve the JSON-RPC admin socket (iserctl) at PATH\n"
		"                         (default: global.admin_socket, else " RPC_DEFAULT_SOCKET "; none: off)\n"
		"      --metrics HOST:PORT  serve Prometheus metrics at http://HOST:PORT/metrics\n"
		"                         (PORT alone: 127.0.0.1; default: global.metrics, else off)\n"
		"      --state-dir DIR    keep persistent reservations (APTPL) in DIR\n"
		"                         (default: global.state_dir, else " CONFIG_DEFAULT_STATE_DIR "; none: off)\n"
		"      --cluster POOL/NAME  serve this gateway's part of the fleet whose document is\n"
		"                         the RADOS object isert_config.NAME in POOL (docs/fleet.md),\n"
		"                         instead of a file; with --gateway\n"
		"      --gateway NAME     this gateway's name in the fleet's document\n"
		"      --ceph-conf FILE   the fleet's ceph.conf (default: librados' search, $CEPH_CONF)\n"
		"      --ceph-id ID       the Ceph client id (default: admin)\n"
		"      --keyring FILE     the Ceph client's keyring (default: ceph.conf's)\n"
		"      --check            validate the configuration and exit\n"
		"      --print-config     print the configuration in effect as JSON and exit\n"
		"                         (CHAP secrets masked as " CONFIG_REDACTED ")\n"
		"      --show-secrets     with --print-config: print the CHAP secrets too\n"
		"      --core-dumps       stay dumpable, for debugging: a crash leaves a core, and\n"
		"                         isertd's uid may trace it (both then hold the CHAP secrets)\n"
		"  -d, --debug            verbose logging\n"
		"  -h, --help             this help\n"
		"      --version          print isertd's version and exit\n");
}

/*
 * Copies of the CHAP secrets outlive their use where isertd cannot wipe them
 * (json-c's parser buffers, freed heap), so nothing that reads the process
 * whole may have it: not dumpable, the kernel writes no core (nor pipes one
 * to systemd-coredump), and only CAP_SYS_PTRACE (root) may trace it or read
 * /proc/PID/mem.  Before the configuration is read.
 */
static int not_dumpable(void)
{
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)) {
		fprintf(stderr, "isertd: cannot keep the CHAP secrets out of core dumps: prctl: %s\n", strerror(errno));
		return -errno;
	}
	return 0;
}

static void *reactor_thread(void *arg)
{
	reactor_run(arg);
	return NULL;
}

static void force_close(void)
{
	if (forced_ns)
		return;
	forced_ns = reactor_now_ns();
	iscsi_force_close();
	xp_stop_waiting();
}

/* On reactor 0 while stopping: wait for every connection to be gone, then stop the reactors. */
static void stop_tick(void *arg)
{
	(void)arg;
	unsigned left = conn_count();
	uint64_t now = reactor_now_ns();
	if (left && !forced_ns && now >= stop_deadline_ns) {
		log_warn("%u connection%s still busy after %u s, closing %s", left, left > 1 ? "s" : "",
			 rt_shutdown_timeout_s(), left > 1 ? "them" : "it");
		force_close();
	}
	if (left && forced_ns && now - forced_ns >= FORCED_FREE_MS * 1000000ull) {
		/* Something still holds them: a bug worth a failing exit status, not a hang. */
		log_err("%u connection%s could not be freed; exiting anyway", left, left > 1 ? "s" : "");
		exit_status = 1;
		left = 0;
	}
	if (left) {
		reactor_timer_add(reactors[0], 10, stop_tick, NULL);
		return;
	}
	for (unsigned i = 0; i < nreactors; i++)
		reactor_stop(reactors[i]);
}

static void on_signal(void *arg, uint32_t events)
{
	int fd = *(int *)arg;
	struct signalfd_siginfo si;
	(void)events;
	if (read(fd, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGHUP) {
		if (!iscsi_stopping())
			rpc_reload(); /* on the admin thread: an apply waits for the reactors, this is one */
		return;
	}
	if (iscsi_stopping()) {
		log_info("signal %d again: closing every connection now", (int)si.ssi_signo);
		force_close();
		return;
	}
	log_info("signal %d: shutting down: no new connections, in-flight commands finish (at most %u s)",
		 (int)si.ssi_signo, rt_shutdown_timeout_s());
	notify_stopping();
	iscsi_stop();
	rpc_shutdown();
	metrics_shutdown();
	isns_shutdown();
	stop_deadline_ns = reactor_now_ns() + (uint64_t)rt_shutdown_timeout_s() * 1000000000ull;
	for (unsigned i = 0; i < nreactors; i++)
		reactor_send(reactors[i], conn_drain_all, reactors[i]);
	stop_tick(NULL);
}

/* Descriptors: one per connection; the default soft limit (1024) is far below max_connections. */
static void raise_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* Once everything of isertd's own is open: how many connections the descriptors leave room for. */
static void check_fd_budget(unsigned max_connections)
{
	unsigned reserve;
	unsigned long long limit;
	unsigned cap = admit_fd_budget(admin_fd_reserve(rt_config()), &reserve, &limit);
	if (cap < max_connections)
		log_warn("open file limit %llu leaves room for %u connections (%u descriptors kept for isertd's own "
			 "files, the admin socket and metrics), below max_connections (%u): connections past %u are "
			 "accepted and closed at once (raise the limit with ulimit -n or LimitNOFILE=)",
			 limit, cap, reserve, max_connections, cap);
}

static void warn_exposed_secrets(void)
{
	unsigned m = cfg->file_mode;
	if (!(m & 0044) || !config_has_secrets(cfg))
		return;
	log_warn("%s holds CHAP secrets and is readable by %s: chmod 600 it", cfg->origin,
		 (m & 0004) && (m & 0040) ? "group and others" : (m & 0004) ? "others" : "its group");
}

/* The command line, as main() acts on it. */
struct args {
	const char *config_path, *admin_socket, *metrics, *state_dir;
	struct fleet_opts fleet;
	const char *portals[64];
	unsigned nportals, nr;
	bool check, print, secrets, core_dumps;
};

/* -1: go on; else the exit status (0 after --help or --version, 2 for a command line refused, as said on stderr). */
static int parse_args(int argc, char **argv, struct args *a)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "portal", required_argument, NULL, 'p' },
		{ "reactors", required_argument, NULL, 'r' }, { "check", no_argument, NULL, 'C' },
		{ "admin-socket", required_argument, NULL, 'a' }, { "metrics", required_argument, NULL, 'M' },
		{ "state-dir", required_argument, NULL, 'S' },
		{ "print-config", no_argument, NULL, 'P' },   { "show-secrets", no_argument, NULL, 'X' },
		{ "core-dumps", no_argument, NULL, 'D' },     { "debug", no_argument, NULL, 'd' },
		{ "cluster", required_argument, NULL, 'F' },  { "gateway", required_argument, NULL, 'G' },
		{ "ceph-conf", required_argument, NULL, 'K' }, { "ceph-id", required_argument, NULL, 'I' },
		{ "keyring", required_argument, NULL, 'R' },
		{ "help", no_argument, NULL, 'h' },	      { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	int o;
	while ((o = getopt_long(argc, argv, "c:p:r:a:dh", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			a->config_path = optarg;
			break;
		case 'p':
			if (a->nportals == 64) {
				fprintf(stderr, "isertd: at most 64 --portal options\n");
				return 2;
			}
			a->portals[a->nportals++] = optarg;
			break;
		case 'r': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > 256) {
				fprintf(stderr, "isertd: --reactors: expected 1-256, got '%s'\n", optarg);
				return 2;
			}
			a->nr = (unsigned)v;
			break;
		}
		case 'a':
			a->admin_socket = optarg;
			break;
		case 'M':
			a->metrics = optarg;
			break;
		case 'S':
			if (!config_valid_state_dir(optarg)) {
				fprintf(stderr, "isertd: --state-dir: expected an absolute path (at most 1024 bytes) "
						"or none, got '%s'\n", optarg);
				return 2;
			}
			a->state_dir = optarg;
			break;
		case 'C':
			a->check = true;
			break;
		case 'P':
			a->print = true;
			break;
		case 'X':
			a->secrets = true;
			break;
		case 'D':
			a->core_dumps = true;
			break;
		case 'F':
			a->fleet.cluster = optarg;
			break;
		case 'G':
			a->fleet.gateway = optarg;
			break;
		case 'K':
			a->fleet.conf = optarg;
			break;
		case 'I':
			a->fleet.id = optarg;
			break;
		case 'R':
			a->fleet.keyring = optarg;
			break;
		case 'd':
			log_threshold = LOG_DEBUG;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			puts("isertd " ISERT_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "isertd: unexpected argument '%s' (try --help)\n", argv[optind]);
		return 2;
	}
	if ((a->fleet.gateway || a->fleet.conf || a->fleet.id || a->fleet.keyring) && !a->fleet.cluster) {
		fprintf(stderr, "isertd: --gateway, --ceph-conf, --ceph-id and --keyring go with --cluster\n");
		return 2;
	}
	if (a->fleet.cluster) {
		char err[512];
		if (a->config_path) {
			fprintf(stderr, "isertd: --cluster and --config: a gateway of a fleet runs the fleet's document, "
					"not a file (iserctl cluster export makes one to leave the fleet)\n");
			return 2;
		}
		if (a->nportals) {
			fprintf(stderr, "isertd: --portal and --cluster: a gateway's portals are in the fleet's document\n");
			return 2;
		}
		a->fleet.state_dir = a->state_dir;
		a->fleet.metrics = a->metrics;
		if (fleet_opts_check(&a->fleet, err, sizeof(err))) {
			fprintf(stderr, "isertd: %s\n", err);
			return 2;
		}
	}
	if (a->secrets && !a->print) {
		fprintf(stderr, "isertd: --show-secrets goes with --print-config\n");
		return 2;
	}
	return -1;
}

/*
 * cfg: the file (or the embedded default) with what the command line puts
 * in its place.  -1: loaded; else the exit status (1, 2), said on stderr.
 */
static int load_config(const struct args *a)
{
	char err[768] = "";
	int rc;
	if (a->fleet.cluster) {
		json_object *doc = NULL;
		char origin[400];
		snprintf(origin, sizeof(origin), "the fleet %s (gateway %s)", a->fleet.cluster, a->fleet.gateway);
		rc = fleet_start(&a->fleet, &doc, err, sizeof(err));
		if (!rc)
			rc = config_load_doc(doc, origin, &cfg, err, sizeof(err));
		json_object_put(doc);
	} else {
		rc = a->config_path ? config_load_file(a->config_path, &cfg, err, sizeof(err))
				    : config_load_string(config_default_json, "<embedded default>", &cfg, err, sizeof(err));
	}
	if (rc) {
		fprintf(stderr, "isertd: %s\n", err);
		fleet_stop();
		return 1;
	}
	if (a->nportals) {
		rc = config_set_portals(cfg, a->portals, a->nportals, false, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "isertd: --portal: %s\n", err);
			config_free(cfg);
			return 2;
		}
	}
	if (a->metrics) {
		/* as global.metrics, so --check and --print-config show it and a reload keeps it */
		char *host = NULL;
		uint16_t port;
		if (*a->metrics && config_parse_metrics(a->metrics, &host, &port)) {
			fprintf(stderr, "isertd: --metrics: expected HOST:PORT or PORT, got '%s'\n", a->metrics);
			config_free(cfg);
			return 2;
		}
		free(host);
		free(cfg->metrics);
		cfg->metrics = *a->metrics ? strdup(a->metrics) : NULL;
	}
	if (a->state_dir) {
		/* as global.state_dir, so --print-config shows it */
		free(cfg->state_dir);
		cfg->state_dir = strdup(a->state_dir);
		if (!cfg->state_dir) {
			fprintf(stderr, "isertd: out of memory\n");
			config_free(cfg);
			return 1;
		}
	}
	return -1;
}

/* --check, --print-config: say so, or print cfg (secrets masked unless asked), and let it go. */
static void check_or_print(bool print, bool secrets)
{
	if (print) {
		json_object *j = config_to_obj(cfg);
		if (j && !secrets)
			config_redact(j);
		if (j)
			puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
								       JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(j);
	} else {
		printf("%s: configuration is valid\n", cfg->origin);
	}
	config_free(cfg);
}

/* -r, else the configuration's reactors, else one per core. */
static unsigned reactor_count(unsigned nr)
{
	if (!nr)
		nr = cfg->reactors;
	if (!nr) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		nr = n > 0 ? (unsigned)n : 1;
	}
	return nr;
}

/* SIGINT, SIGTERM and SIGHUP blocked (the reactor threads inherit it) and read from a signalfd, returned. */
static int signals_to_fd(void)
{
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &mask, NULL); /* inherited by the reactor threads */
	signal(SIGPIPE, SIG_IGN);
	return signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* The nr reactors in reactors[] (nreactors counts them).  0 or -EIO, said on stderr. */
static int reactors_create(unsigned nr)
{
	for (unsigned i = 0; i < nr; i++) {
		reactors[i] = reactor_create((int)i, cfg->poll_mode);
		if (!reactors[i]) {
			fprintf(stderr, "isertd: cannot create reactor %u\n", i);
			return -EIO;
		}
		reactor_set_spin_us(reactors[i], cfg->adaptive_spin_us);
		nreactors++;
	}
	return 0;
}

/* Reactor 0 on this thread, the others on threads of their own, until stop_tick() stops them. */
static void reactors_run(unsigned nr)
{
	pthread_t *th = calloc(nr, sizeof(*th));
	for (unsigned i = 1; i < nr; i++)
		pthread_create(&th[i], NULL, reactor_thread, reactors[i]);
	reactor_run(reactors[0]);
	for (unsigned i = 1; i < nr; i++)
		pthread_join(th[i], NULL);
	free(th);
}

int main(int argc, char **argv)
{
	struct args a = { 0 };
	int rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	if (!a.core_dumps && not_dumpable())
		return 1;
	/* Before any thread starts (a fleet's librados client starts some in load_config): each inherits the mask. */
	int sfd = signals_to_fd();
	if ((rc = load_config(&a)) >= 0)
		return rc;
	if (a.check || a.print) {
		char herr[512];
		if (a.check && https_check(cfg, herr, sizeof(herr))) {
			/* the HTTPS door's certificate, key and CA: what start-up would refuse, a check refuses */
			fprintf(stderr, "isertd: %s\n", herr);
			config_free(cfg);
			fleet_stop();
			return 1;
		}
		if (a.check)
			warn_exposed_secrets(); /* what start-up would warn of, a check says too */
		check_or_print(a.print, a.secrets);
		fleet_stop();
		return 0;
	}
	warn_exposed_secrets();
	raise_fd_limit();
	unsigned nr = reactor_count(a.nr);
	reactors = calloc(nr, sizeof(*reactors));
	if (!reactors || sfd < 0) {
		fprintf(stderr, "isertd: out of resources\n");
		return 1;
	}
	if (reactors_create(nr))
		return 1;
	/* The running target takes cfg: once the admin socket runs, a change may replace it. */
	char status[160];
	snprintf(status, sizeof(status), "serving %.100s with %u reactor%s", cfg->origin, nr, nr > 1 ? "s" : "");
	unsigned max_connections = cfg->max_connections;
	char err[512] = "";
	rc = iscsi_start(cfg, reactors, nr, err, sizeof(err));
	if (!rc)
		rc = metrics_start(cfg->metrics, err, sizeof(err));
	if (!rc)
		isns_configure(cfg); /* before the admin socket: a change there may replace cfg */
	if (!rc)
		rc = rpc_start(cfg, a.admin_socket, a.config_path, err, sizeof(err));
	cfg = NULL;
	if (rc) {
		fprintf(stderr, "isertd: %s\n", err);
		/* Leave cleanly what was joined (the gateways sharing a store would otherwise wait for this one). */
		rpc_stop();
		fleet_stop();
		isns_stop();
		metrics_stop();
		iscsi_free();
		return 1;
	}
	fleet_run(rpc_fleet_wake); /* from now on another gateway's change is applied here */
	reactor_add_fd(reactors[0], sfd, EPOLLIN, on_signal, &sfd);
	check_fd_budget(max_connections);
	log_info("isertd %s", status);
	notify_ready(status);
	reactors_run(nr);
	metrics_stop(); /* before iscsi_free: a scrape may still be inside stats_collect() */
	rpc_stop();
	fleet_stop();
	isns_stop();
	/* Nothing runs any more: what a write cache holds goes to stable storage now. */
	if (iscsi_flush())
		exit_status = 1;
	apply_free();
	iscsi_free();
	for (unsigned i = 0; i < nr; i++)
		reactor_destroy(reactors[i]);
	free(reactors);
	close(sfd);
	log_info("stopped%s", exit_status ? " with errors" : "");
	return exit_status;
}
