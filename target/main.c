/*
 * isertd: the iSCSI/iSER target daemon.  Runs in the foreground; with no
 * arguments it serves the embedded default configuration (one RAM LUN on
 * 127.0.0.1:3260, any initiator admitted).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "common/log.h"
#include "common/reactor.h"
#include "target/config.h"
#include "target/iscsi/iscsi.h"

static struct reactor **reactors;
static unsigned nreactors;

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
		"      --check            validate the configuration and exit\n"
		"      --print-config     print the configuration in effect as JSON and exit\n"
		"  -d, --debug            verbose logging\n"
		"  -h, --help             this help\n");
}

static void *reactor_thread(void *arg)
{
	reactor_run(arg);
	return NULL;
}

static void on_signal(void *arg, uint32_t events)
{
	int fd = *(int *)arg;
	struct signalfd_siginfo si;
	(void)events;
	if (read(fd, &si, sizeof(si)) != sizeof(si))
		return;
	log_info("signal %d: shutting down", (int)si.ssi_signo);
	iscsi_stop();
	for (unsigned i = 0; i < nreactors; i++)
		reactor_stop(reactors[i]);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' }, { "portal", required_argument, NULL, 'p' },
		{ "reactors", required_argument, NULL, 'r' }, { "check", no_argument, NULL, 'C' },
		{ "print-config", no_argument, NULL, 'P' },   { "debug", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },	      { NULL, 0, NULL, 0 },
	};
	const char *config_path = NULL;
	const char *portals[16];
	unsigned nportals = 0, nr = 0;
	bool check = false, print = false;
	int o;
	while ((o = getopt_long(argc, argv, "c:p:r:dh", opts, NULL)) != -1) {
		switch (o) {
		case 'c':
			config_path = optarg;
			break;
		case 'p':
			if (nportals == 16) {
				fprintf(stderr, "isertd: at most 16 --portal options\n");
				return 2;
			}
			portals[nportals++] = optarg;
			break;
		case 'r': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v < 1 || v > 256) {
				fprintf(stderr, "isertd: --reactors: expected 1-256, got '%s'\n", optarg);
				return 2;
			}
			nr = (unsigned)v;
			break;
		}
		case 'C':
			check = true;
			break;
		case 'P':
			print = true;
			break;
		case 'd':
			log_threshold = LOG_DEBUG;
			break;
		case 'h':
			usage(stdout);
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
	char err[512] = "";
	struct config *cfg = NULL;
	int rc = config_path ? config_load_file(config_path, &cfg, err, sizeof(err))
			     : config_load_string(config_default_json, "<embedded default>", &cfg, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "isertd: %s\n", err);
		return 1;
	}
	if (nportals) {
		/* The first --portal replaces the configured ones; more are added. */
		for (unsigned i = 0; i < nportals; i++) {
			rc = config_override_portals(cfg, portals[i], err, sizeof(err));
			if (rc) {
				fprintf(stderr, "isertd: --portal %s: %s\n", portals[i], err);
				config_free(cfg);
				return 2;
			}
		}
	}
	if (check || print) {
		if (print) {
			char *j = config_to_json(cfg);
			if (j)
				puts(j);
			free(j);
		} else {
			printf("%s: configuration is valid\n", cfg->origin);
		}
		config_free(cfg);
		return 0;
	}
	if (!nr)
		nr = cfg->reactors;
	if (!nr) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		nr = n > 0 ? (unsigned)n : 1;
	}
	sigset_t mask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &mask, NULL); /* inherited by the reactor threads */
	signal(SIGPIPE, SIG_IGN);
	int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	reactors = calloc(nr, sizeof(*reactors));
	if (!reactors || sfd < 0) {
		fprintf(stderr, "isertd: out of resources\n");
		return 1;
	}
	for (unsigned i = 0; i < nr; i++) {
		reactors[i] = reactor_create((int)i, cfg->poll_mode);
		if (!reactors[i]) {
			fprintf(stderr, "isertd: cannot create reactor %u\n", i);
			return 1;
		}
		nreactors++;
	}
	rc = iscsi_start(cfg, reactors, nr, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "isertd: %s\n", err);
		return 1;
	}
	reactor_add_fd(reactors[0], sfd, EPOLLIN, on_signal, &sfd);
	log_info("isertd serving %s with %u reactor%s", cfg->origin, nr, nr > 1 ? "s" : "");
	pthread_t *th = calloc(nr, sizeof(*th));
	for (unsigned i = 1; i < nr; i++)
		pthread_create(&th[i], NULL, reactor_thread, reactors[i]);
	reactor_run(reactors[0]);
	for (unsigned i = 1; i < nr; i++)
		pthread_join(th[i], NULL);
	free(th);
	iscsi_free();
	for (unsigned i = 0; i < nr; i++)
		reactor_destroy(reactors[i]);
	free(reactors);
	close(sfd);
	config_free(cfg);
	log_info("stopped");
	return 0;
}
