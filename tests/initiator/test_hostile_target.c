/*
 * The initiator library and iseradm against hostile targets (fake_target.c):
 * a target that stops reading while it pings, floods R2Ts, asks for data
 * outside a write, beyond MaxBurstLength or out of R2TSN order, sends a
 * NOP-In over our MaxRecvDataSegmentLength or a ping echo longer than its
 * own, claims more LUNs than its REPORT LUNS answer holds, or resets the
 * connection while a write's data goes out.  The library
 * must drop such a connection with a reason in its log, stop re-logging in
 * to a target that keeps doing it, keep its memory bounded (VmRSS sampled
 * all along; under ASan the allocator's live bytes), and never hand out
 * LUNs it was not given.
 *
 *   test_hostile_target ISERADM PORT    (uses PORT .. PORT+9 on 127.0.0.1)
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "fake_target.h"
#include "isert/initiator.h"

/* Growth of the process's memory (mem_kib) a hostile target may cause; the library's bounds are ~2 MiB. */
#define MEM_BOUND_KIB (32 * 1024)
/* Logins a hostile target gets: the first, then the re-logins before the library gives up. */
#define MAX_LOGINS 4

/* ---- what the library logs ---- */

static char log_lines[16][1024];
static unsigned log_count;

static void on_log(enum isc_log_level lvl, const char *msg, void *arg)
{
	(void)arg;
	if (lvl > ISC_LOG_WARN)
		return;
	snprintf(log_lines[log_count % 16], sizeof(log_lines[0]), "%s", msg);
	log_count++;
}

/* The first warning since `from` that contains `what` (NULL if none). */
static const char *logged(unsigned from, const char *what)
{
	for (unsigned i = from; i < log_count; i++)
		if (log_count - i <= 16 && strstr(log_lines[i % 16], what))
			return log_lines[i % 16];
	return NULL;
}

static const char *last_log(unsigned from)
{
	return log_count > from ? log_lines[(log_count - 1) % 16] : "(nothing logged)";
}

/* Under ASan, the allocator's live bytes (freed memory sits in its quarantine, which RSS would count). */
extern size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));

static long mem_kib(void)
{
	if (__sanitizer_get_current_allocated_bytes)
		return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- one task against the fake target ---- */

struct outcome {
	bool done;
	int err;
};

static void task_done(struct isc_session *s, const struct isc_result *r, void *arg)
{
	struct outcome *o = arg;
	(void)s;
	o->done = true;
	o->err = r->err;
}

/*
 * Run the session's loop until the task is done or ms pass, sampling memory;
 * stops early once it grew past MEM_BOUND_KIB over base.  Returns the
 * largest growth seen (KiB).
 */
static long run(struct isc_session *s, struct outcome *o, unsigned ms, long base)
{
	long grown = 0;
	uint64_t end = now_ms() + ms;
	while (!o->done && now_ms() < end && grown <= MEM_BOUND_KIB) {
		struct pollfd p = { isc_get_fd(s), isc_which_events(s), 0 };
		if (poll(&p, 1, 20) > 0)
			isc_service(s, p.revents);
		long r = mem_kib() - base;
		if (r > grown)
			grown = r;
	}
	return grown;
}

static struct isc_session *session(uint16_t port, struct ft_stats *st, const char *name, uint32_t max_burst)
{
	struct isc_options o;
	isc_options_default(&o);
	o.reconnect_timeout_s = 30;
	if (max_burst)
		o.max_burst = max_burst;
	struct isc_session *s = isc_session_new(&o);
	int rc = s ? isc_connect_sync(s, "127.0.0.1", port, FT_TARGET) : -ENOMEM;
	char what[160];
	snprintf(what, sizeof(what), "%s: logs in to the fake target", name);
	check(what, rc == 0 && st->logins == 1, "rc %d (%s), %d logins", rc, s ? isc_errmsg(s) : "", st->logins);
	if (rc) {
		isc_session_free(s);
		return NULL;
	}
	return s;
}

struct hostile {
	const char *name;
	struct ft_config cfg;
	uint32_t write_len; /* 0: the task is a TEST UNIT READY */
	const char *reason; /* what the log line must say */
};

/*
 * The target misbehaves on every connection: each is dropped with the
 * reason logged, the library gives up after a few, the task fails with
 * -EPROTO, and memory stays within MEM_BOUND_KIB.
 */
static void hostile(const struct hostile *h)
{
	pid_t pid;
	struct ft_stats *st = ft_start(&h->cfg, &pid);
	if (!st) {
		check(h->name, false, "cannot start the fake target on port %u: %s", h->cfg.port, strerror(errno));
		return;
	}
	uint8_t *buf = NULL;
	if (h->write_len) {
		buf = malloc(h->write_len);
		if (buf)
			memset(buf, 0x5a, h->write_len);
	}
	long base = mem_kib();
	unsigned from = log_count;
	struct isc_session *s = session(h->cfg.port, st, h->name, 0);
	if (!s) {
		free(buf);
		ft_stop(pid, st);
		return;
	}
	struct isc_cmd c;
	if (h->write_len)
		isc_cmd_write16(&c, 0, 0, h->write_len / 512, 512, buf, false);
	else
		isc_cmd_tur(&c, 0);
	struct outcome o = { 0 };
	bool submitted = isc_submit(s, &c, task_done, &o) != NULL;
	long grown = run(s, &o, 20000, base);
	char what[200];
	snprintf(what, sizeof(what), "%s: memory stays bounded", h->name);
	check(what, grown <= MEM_BOUND_KIB, "memory grew by %ld KiB (bound %d KiB); pings %d, R2Ts %d sent", grown,
	      MEM_BOUND_KIB, st->pings_sent, st->r2ts_sent);
	snprintf(what, sizeof(what), "%s: connection dropped, reason logged", h->name);
	check(what, logged(from, h->reason) != NULL, "no warning containing '%s'; last: %s", h->reason,
	      last_log(from));
	snprintf(what, sizeof(what), "%s: the library gives up (task fails with -EPROTO), %d logins at most",
		 h->name, MAX_LOGINS);
	check(what, submitted && o.done && o.err == -EPROTO && st->logins <= MAX_LOGINS,
	      "submitted %d, done %d, err %d, %d logins; %s", submitted, o.done, o.err, st->logins, isc_errmsg(s));
	printf("     memory +%ld KiB at most, %d logins, %d pings and %d R2Ts sent; logged: %s\n", grown, st->logins,
	       st->pings_sent, st->r2ts_sent, logged(from, h->reason) ? logged(from, h->reason) : "-");
	isc_session_free(s);
	ft_stop(pid, st);
	free(buf);
}

/*
 * The target resets the connection while the library sends a write's data
 * (the chaos soak found it: iserbench died of SIGPIPE when isertd closed a
 * session under it).  A library must not raise SIGPIPE in its caller, so
 * this runs in a child with SIGPIPE's default action: it must live, log in
 * again and finish the write (the target serves the second session).
 */
static void reset_mid_write(uint16_t port)
{
	struct ft_config cfg = { .sc = FT_CLOSE_AT_WRITE, .port = port, .mrdsl = 8192, .max_burst = 8 << 20 };
	pid_t pid, child;
	struct ft_stats *st = ft_start(&cfg, &pid);
	if (!st) {
		check("reset during a write's Data-Out", false, "cannot start the fake target: %s", strerror(errno));
		return;
	}
	fflush(stdout);
	child = fork();
	if (child == 0) {
		signal(SIGPIPE, SIG_DFL);
		struct isc_options o;
		isc_options_default(&o);
		o.max_burst = 8 << 20;
		o.reconnect_timeout_s = 3;
		struct isc_session *s = isc_session_new(&o);
		if (!s || isc_connect_sync(s, "127.0.0.1", port, FT_TARGET))
			_exit(3);
		static uint8_t buf[8 << 20];
		int rc = isc_write16_sync(s, 0, 0, sizeof(buf) / 512, 512, buf, false, NULL);
		isc_session_free(s);
		_exit(rc ? 4 : 0);
	}
	int status = 0;
	waitpid(child, &status, 0);
	check("reset during a write's Data-Out: the caller is not killed by SIGPIPE, the write completes "
	      "after a new login", WIFEXITED(status) && WEXITSTATUS(status) == 0 && st->logins == 2,
	      "%s %d (3: no login, 4: the write failed), %d logins", WIFSIGNALED(status) ? "killed by signal" : "exit",
	      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), st->logins);
	ft_stop(pid, st);
}

/* The fake target as a sane one: the failures above are the hostility, not the fake. */
static void sane(uint16_t port)
{
	struct ft_config cfg = { .sc = FT_NORMAL, .port = port, .mrdsl = 8192, .max_burst = 8 << 20 };
	pid_t pid;
	struct ft_stats *st = ft_start(&cfg, &pid);
	struct isc_session *s = st ? session(port, st, "sane target", 8 << 20) : NULL;
	if (!s) {
		ft_stop(pid, st);
		return;
	}
	/* Two R2Ts of 8 MiB, each twice the send queue's bound: its Data-Out waits for room and resumes. */
	static uint8_t buf[16 << 20];
	int rc1 = isc_tur_sync(s, 0, NULL);
	int rc2 = isc_write16_sync(s, 0, 0, sizeof(buf) / 512, 512, buf, false, NULL);
	struct isc_capacity cap;
	int rc3 = isc_readcap16_sync(s, 1, &cap, NULL);
	check("sane target: TUR, a 16 MiB WRITE through two 8 MiB R2Ts, READ CAPACITY",
	      rc1 == 0 && rc2 == 0 && rc3 == 0 && cap.blocks == 2048, "rc %d %d %d: %s", rc1, rc2, rc3,
	      isc_errmsg(s));
	check("sane target: logout", isc_logout_sync(s) == 0, "%s", isc_errmsg(s));
	isc_session_free(s);
	ft_stop(pid, st);
}

/* A ping whose data is longer than the target's MaxRecvDataSegmentLength: the echo is cut to it. */
static void nop_echo(uint16_t port)
{
	struct ft_config cfg = { .sc = FT_NOP_ECHO, .port = port, .mrdsl = 8192, .max_burst = 262144,
				 .len = 65536 };
	pid_t pid;
	struct ft_stats *st = ft_start(&cfg, &pid);
	struct isc_session *s = st ? session(port, st, "ping echo", 0) : NULL;
	if (!s) {
		ft_stop(pid, st);
		return;
	}
	int rc = isc_tur_sync(s, 0, NULL);
	rc = rc ? rc : isc_nop_sync(s); /* the echo went before this ping's answer came */
	check("ping echo: answered, at most the target's MaxRecvDataSegmentLength (8192) of data",
	      rc == 0 && st->echoes == 1 && st->echo_len_max <= cfg.mrdsl, "rc %d, %d echoes, longest %u bytes",
	      rc, st->echoes, st->echo_len_max);
	isc_session_free(s);
	ft_stop(pid, st);
}

/* REPORT LUNS whose list length claims more than the answer holds. */
static void luns_library(uint16_t port)
{
	struct ft_config cfg = { .sc = FT_LUNS_CUT, .port = port, .mrdsl = 262144, .max_burst = 262144 };
	pid_t pid;
	struct ft_stats *st = ft_start(&cfg, &pid);
	struct isc_session *s = st ? session(port, st, "REPORT LUNS cut", 0) : NULL;
	uint64_t *luns = calloc(4096, sizeof(*luns));
	if (!s || !luns) {
		free(luns);
		isc_session_free(s);
		ft_stop(pid, st);
		return;
	}
	unsigned n = 0;
	int rc = isc_report_luns_sync(s, luns, 4096, &n, NULL);
	bool in_order = true;
	for (unsigned i = 0; i < n && i < 4096; i++)
		in_order &= luns[i] == i;
	check("REPORT LUNS cut: isc_report_luns_sync counts the LUNs the answer holds", rc == 0 &&
	      n == FT_LUNS_SENT && in_order, "rc %d, n %u (the target sent %u and claimed %u), in order %d", rc, n,
	      FT_LUNS_SENT, FT_LUNS_CLAIMED, in_order);
#if ISC_API_VERSION_MINOR >= 1 /* the truncation flag came with 1.1 */
	bool cut = false;
	n = 0;
	rc = isc_report_luns2_sync(s, luns, 4096, &n, &cut, NULL);
	check("REPORT LUNS cut: isc_report_luns2_sync says truncated", rc == 0 && n == FT_LUNS_SENT && cut,
	      "rc %d, n %u, truncated %d", rc, n, cut);
	cut = false;
	rc = isc_report_luns2_sync(s, luns, 100, &n, &cut, NULL);
	check("REPORT LUNS cut: at most max stored, truncated", rc == 0 && n == 100 && cut, "rc %d, n %u, truncated %d",
	      rc, n, cut);
#endif
	isc_logout_sync(s);
	isc_session_free(s);
	free(luns);
	ft_stop(pid, st);
}

/* iseradm ls against that target: commands only to the LUNs it was given, and it says the list was cut. */
static void luns_iseradm(const char *iseradm, uint16_t port)
{
	struct ft_config cfg = { .sc = FT_LUNS_CUT, .port = port, .mrdsl = 262144, .max_burst = 262144 };
	pid_t pid;
	struct ft_stats *st = ft_start(&cfg, &pid);
	int out[2];
	if (!st || pipe(out)) {
		check("iseradm ls", false, "cannot start: %s", strerror(errno));
		ft_stop(pid, st);
		return;
	}
	char portal[32];
	snprintf(portal, sizeof(portal), "127.0.0.1:%u", port);
	fflush(NULL);
	pid_t adm = fork();
	if (adm == 0) {
		dup2(out[1], 1);
		dup2(out[1], 2);
		close(out[0]);
		execl(iseradm, iseradm, "ls", portal, (char *)NULL);
		_exit(127);
	}
	close(out[1]);
	static char text[1 << 20];
	size_t got = 0;
	uint64_t end = now_ms() + 60000;
	for (;;) {
		struct pollfd p = { out[0], POLLIN, 0 };
		if (now_ms() > end || poll(&p, 1, 1000) < 0)
			break;
		if (!p.revents)
			continue;
		ssize_t r = read(out[0], text + got, sizeof(text) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	text[got] = 0;
	close(out[0]);
	int status = 0;
	if (now_ms() > end)
		kill(adm, SIGKILL);
	waitpid(adm, &status, 0);
	unsigned lines = 0;
	for (const char *p = text; (p = strstr(p, "LUN ")); p++)
		lines++;
	check("iseradm ls, REPORT LUNS cut: commands only to LUNs the target listed, one LUN line each",
	      WIFEXITED(status) && WEXITSTATUS(status) == 0 && st->unlisted_lun_cmds == 0 &&
		      st->scsi_cmds <= 2 + 3 * (int)FT_LUNS_SENT && lines <= FT_LUNS_SENT + 1,
	      "exit 0x%x, %d SCSI commands (%d to LUNs never listed), %u LUN lines", status, st->scsi_cmds,
	      st->unlisted_lun_cmds, lines);
	check("iseradm ls, REPORT LUNS cut: says the list was cut", strstr(text, "LUN list cut") != NULL, "%.300s",
	      got > 300 ? text + got - 300 : text);
	ft_stop(pid, st);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s ISERADM PORT\n", argv[0]);
		return 2;
	}
	const char *iseradm = argv[1];
	uint16_t port = (uint16_t)atoi(argv[2]);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	isc_set_log_cb(on_log, NULL, ISC_LOG_INFO);

	sane(port + 9);
	/* Each target's MaxRecvDataSegmentLength is 8192 unless said: Data-Out goes in 8 KiB PDUs. */
	const struct hostile cases[] = {
		{ "stops reading, 256 KiB pings",
		  { FT_PING_FLOOD, (uint16_t)(port + 0), 8192, 262144, 1200, 262144 }, 0, "not reading" },
		{ "R2T flood beyond MaxOutstandingR2T=1 (target MaxRecvDataSegmentLength 512)",
		  { FT_R2T_FLOOD, (uint16_t)(port + 1), 512, 1048576, 2000, 0 }, 1048576, "MaxOutstandingR2T" },
		{ "R2T past the end of the write",
		  { FT_R2T_RANGE, (uint16_t)(port + 2), 8192, 1048576, 0, 0 }, 65536, "outside" },
		{ "R2T longer than MaxBurstLength",
		  { FT_R2T_BURST, (uint16_t)(port + 3), 8192, 65536, 0, 0 }, 262144, "MaxBurstLength" },
		{ "R2T out of R2TSN order",
		  { FT_R2T_SN, (uint16_t)(port + 4), 8192, 262144, 0, 0 }, 65536, "R2TSN" },
		{ "NOP-In data over our MaxRecvDataSegmentLength (262144)",
		  { FT_NOP_BIG, (uint16_t)(port + 5), 8192, 262144, 0, 262144 + 4096 }, 0, "NOP-In" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		hostile(&cases[i]);
	nop_echo(port + 6);
	luns_library(port + 7);
	luns_iseradm(iseradm, port + 8);
	reset_mid_write(port + 9);   /* after sane(): its fake target is gone */

	printf("%u passed, %u failed\n", check_passed, check_failed);
	return check_failed ? 1 : 0;
}
