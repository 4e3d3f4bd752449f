/*
 * iserctl stats and iserctl top: the `stats` method (docs/stats.md) as a
 * readable summary, and as a live per-LUN or per-initiator view computed
 * from the differences of two samples, as iostat -x does.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "adminrpc.h"
#include "escape.h"
#include "iserctl.h"

#define MB (1024.0 * 1024.0) /* as iostat's and vdbench's MB */

static uint64_t u64(json_object *o, const char *k)
{
	return (uint64_t)json_object_get_uint64(get(o, k));
}

static json_object *lat(json_object *lun, const char *kind)
{
	return get(get(lun, "latency"), kind);
}

/* "avg 53.0 p99<=128" of a histogram, in microseconds; "-" without samples. */
static void lat_text(char *buf, size_t n, const struct lat_hist *h)
{
	double p = lat_hist_pct_us(h, 99);
	if (!h->count)
		snprintf(buf, n, "-");
	else if (p < 0)
		snprintf(buf, n, "avg %.1f p99 beyond the last bucket", lat_hist_avg_us(h));
	else
		snprintf(buf, n, "avg %.1f p99<=%.0f", lat_hist_avg_us(h), p);
}

static void lun_name(char *buf, size_t n, json_object *l)
{
	snprintf(buf, n, "%s/tpg%s/lun%s", gets(l, "target", "?"), gets(l, "tpg", "?"), gets(l, "lun", "?"));
}

/*
 * `stats` and its later pages (the luns section comes at most 512 rows an
 * answer): each answer to each(page, arg) in turn, *first the first one
 * (with the other sections; the caller puts it, also after an error).
 * 0, or the exit status of a call that failed.
 */
static int stats_pages(json_object *params, json_object **first, void (*each)(json_object *page, void *arg),
		       void *arg)
{
	json_object *page;
	*first = NULL;
	int rc = call("stats", json_object_get(params), &page);
	if (rc)
		return rc;
	*first = json_object_get(page);
	while (page) {
		each(page, arg);
		json_object *next = admin_stats_next(params, page);
		json_object_put(page);
		page = NULL;
		if (next && (rc = call("stats", next, &page)))
			break;
	}
	return rc;
}

/* ---------------- iserctl stats ---------------- */

static void print_luns(json_object *luns)
{
	size_t n = luns ? json_object_array_length(luns) : 0;
	for (size_t i = 0; i < n; i++) {
		json_object *l = json_object_array_get_idx(luns, i), *c = get(l, "commands");
		char name[600], r[96], w[96];
		lun_name(name, sizeof(name), l);
		const char *row = gets(l, "row", "initiator");
		printf("  %s (%s) from %s%s\n", name, gets(l, "backstore", "?"), gets(l, "initiator", "?"),
		       !strcmp(row, "rest")	  ? " (initiators without a row of their own)"
		       : !strcmp(row, "overflow") ? " (past every cap: no LUN)"
						  : "");
		printf("    commands   read %" PRIu64 ", write %" PRIu64 ", other %" PRIu64 "; in flight %" PRIu64 "\n",
		       u64(c, "read"), u64(c, "write"), u64(c, "other"), u64(l, "in_flight"));
		printf("    data       %.1f MB read, %.1f MB written\n", u64(l, "bytes_read") / MB,
		       u64(l, "bytes_written") / MB);
		static const char *const kinds[][3] = { { "latency us", "read", "write" },
							{ "backstore", "read_backstore", "write_backstore" } };
		for (int k = 0; k < 2; k++) {
			struct lat_hist hr = { 0 }, hw = { 0 };
			lat_hist_add_json(&hr, lat(l, kinds[k][1]));
			lat_hist_add_json(&hw, lat(l, kinds[k][2]));
			lat_text(r, sizeof(r), &hr);
			lat_text(w, sizeof(w), &hw);
			printf("    %-10s read %s; write %s\n", kinds[k][0], r, w);
		}
		json_object *cc = get(l, "check_conditions"), *st = get(l, "status");
		printf("    errors     check conditions:");
		bool any = false;
		json_object_object_foreach(cc, key, val)
		{
			printf("%s %s %" PRIu64, any ? "," : "", shown(key), (uint64_t)json_object_get_uint64(val));
			any = true;
		}
		printf("%s; busy %" PRIu64 ", reservation conflicts %" PRIu64 ", task set full %" PRIu64
		       "; task management %" PRIu64 "\n",
		       any ? "" : " none", u64(st, "busy"), u64(st, "reservation_conflict"), u64(st, "task_set_full"),
		       u64(l, "task_management"));
	}
}

static void print_rdma(const char *indent, json_object *r)
{
	if (!r)
		return;
	uint64_t polls = u64(r, "cq_polls"), done = u64(r, "completions");
	printf("%srdma: RDMA READ %" PRIu64 " (%.1f MB), RDMA WRITE %" PRIu64 " (%.1f MB), sends %" PRIu64
	       ", recvs %" PRIu64 ", %.2f completions per CQ poll, %.0f%% empty polls\n",
	       indent, u64(r, "reads"), u64(r, "read_bytes") / MB, u64(r, "writes"), u64(r, "write_bytes") / MB,
	       u64(r, "sends"), u64(r, "recvs"), polls ? (double)done / polls : 0,
	       polls ? 100.0 * u64(r, "cq_empty_polls") / polls : 0);
}

static void print_traffic(json_object *o)
{
	printf("PDUs %" PRIu64 " in, %" PRIu64 " out; %.1f MB in, %.1f MB out; R2Ts %" PRIu64 ", digest errors %" PRIu64
	       ", NOP timeouts %" PRIu64 "\n",
	       u64(o, "pdus_in"), u64(o, "pdus_out"), u64(o, "bytes_in") / MB, u64(o, "bytes_out") / MB, u64(o, "r2ts"),
	       u64(o, "digest_errors"), u64(o, "nop_timeouts"));
}

static void print_connections(json_object *cs)
{
	size_t n = cs ? json_object_array_length(cs) : 0;
	printf("Connections [%zu]\n", n);
	for (size_t i = 0; i < n; i++) {
		json_object *c = json_object_array_get_idx(cs, i);
		printf("  tsih %s cid %s: %s -> %s tpg%s (%s, %s from %s, reactor %s)\n    ", gets(c, "tsih", "?"),
		       gets(c, "cid", "?"), gets(c, "initiator", "?"), gets(c, "target", "(discovery)"), gets(c, "tpg", "?"),
		       gets(c, "transport", "?"), gets(c, "portal", "?"), gets(c, "peer", "?"), gets(c, "reactor", "?"));
		print_traffic(c);
		print_rdma("    ", get(c, "rdma"));
	}
}

static void print_portals(json_object *ps)
{
	size_t n = ps ? json_object_array_length(ps) : 0;
	printf("Portals [%zu]\n", n);
	for (size_t i = 0; i < n; i++) {
		json_object *p = json_object_array_get_idx(ps, i), *lg = get(p, "logins"), *rf = get(lg, "refused");
		uint64_t refused = 0;
		json_object_object_foreach(rf, k0, v0)
		{
			(void)k0;
			refused += (uint64_t)json_object_get_uint64(v0);
		}
		printf("  %s %s%s: connections %" PRIu64 " live, %" PRIu64 " closed, %" PRIu64
		       " refused before login; logins %" PRIu64 " accepted, %" PRIu64 " redirected, %" PRIu64 " refused",
		       gets(p, "portal", "?"), gets(p, "transport", "?"),
		       json_object_get_boolean(get(p, "listening")) ? "" : " (not listening)", u64(p, "connections"),
		       u64(p, "connections_closed"), u64(p, "connections_refused"), u64(lg, "accepted"),
		       u64(lg, "redirected"), refused);
		const char *sep = " (";
		json_object_object_foreach(rf, key, val)
		{
			if (json_object_get_uint64(val)) {
				printf("%s%s %" PRIu64, sep, shown(key), (uint64_t)json_object_get_uint64(val));
				sep = ", ";
			}
		}
		printf("%s\n    ", *sep == ',' ? ")" : "");
		print_traffic(p);
		print_rdma("    ", get(p, "rdma"));
	}
}

/* Counters as "name value" pairs, wrapped under the device. */
static void print_counters(const char *what, json_object *o)
{
	if (!o)
		return;
	int col = printf("    %s:", what);
	json_object_object_foreach(o, key, val)
	{
		if (col > 90)
			col = printf("\n     ") - 1;
		col += printf(" %s %s", shown(key), shown_of(val));
	}
	printf("\n");
}

static void print_rdma_devices(json_object *ds)
{
	size_t n = ds ? json_object_array_length(ds) : 0;
	printf("RDMA devices [%zu]\n", n);
	for (size_t i = 0; i < n; i++) {
		json_object *d = json_object_array_get_idx(ds, i);
		printf("  %s port %s\n", gets(d, "device", "?"), gets(d, "port", "?"));
		print_counters("counters", get(d, "counters"));
		print_counters("hw_counters", get(d, "hw_counters"));
	}
}

static void print_reactors(json_object *rs)
{
	size_t n = rs ? json_object_array_length(rs) : 0;
	printf("Reactors [%zu]\n", n);
	for (size_t i = 0; i < n; i++) {
		json_object *r = json_object_array_get_idx(rs, i);
		printf("  reactor %s: %s connections, buffer pool %.1f MB held, %s buffers in use\n",
		       gets(r, "reactor", "?"), gets(r, "connections", "?"),
		       json_object_get_uint64(get(r, "buffer_pool_bytes")) / 1048576.0, gets(r, "buffers_in_use", "?"));
	}
}

static int parse_u64(const char *opt, const char *v, uint64_t max, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(v, &end, 0);
	if (!*v || *end || errno || x > max || *v == '-') {
		fprintf(stderr, "iserctl: %s: '%s' is not a number 0-%" PRIu64 " (try iserctl --help)\n", opt, v, max);
		return -1;
	}
	*out = x;
	return 0;
}

/* One page of `stats`: its rows printed (text), or added to the first page's (--json). */
struct stats_out {
	json_object *first;
	json_object *all;               /* --json: the first page's luns, which every later page's join */
	size_t rows;
};

static void stats_page(json_object *page, void *arg)
{
	struct stats_out *o = arg;
	json_object *luns = get(page, "luns");
	size_t n = luns ? json_object_array_length(luns) : 0;
	o->rows += n;
	if (!as_json) {
		if (o->rows == n)
			printf("LUNs by initiator\n");
		print_luns(luns);
	} else if (!o->all) {
		o->all = luns;
	} else {
		for (size_t i = 0; i < n; i++)
			json_object_array_add(o->all, json_object_get(json_object_array_get_idx(luns, i)));
	}
}

/* stats [reset] [--target IQN] [--initiator IQN] [--lun N] [--tsih N] [--json] */
int cmd_stats(int argc, char **argv)
{
	json_object *p = json_object_new_object(), *res;
	bool reset = argc >= 1 && !strcmp(argv[0], "reset");
	for (int i = reset; i < argc; i++) {
		const char *a = argv[i];
		uint64_t v;
		if (!strcmp(a, "--json") || !strcmp(a, "-j")) {
			as_json = true;
		} else if (reset || i + 1 >= argc) {
			json_object_put(p);
			return die_usage("stats: unexpected '%s'", a);
		} else if (!strcmp(a, "--target") || !strcmp(a, "--initiator")) {
			/* As iserctl shows names (their shown form): isertd reads each \xNN as its byte. */
			json_object_object_add(p, a + 2, json_object_new_string(argv[++i]));
		} else if (!strcmp(a, "--lun") || !strcmp(a, "--tsih")) {
			if (parse_u64(a, argv[++i], a[2] == 'l' ? 0xffffffffffffull : 65535, &v))
				return json_object_put(p), EX_USAGE;
			json_object_object_add(p, a + 2, json_object_new_int64((int64_t)v));
		} else {
			json_object_put(p);
			return die_usage("stats: unexpected '%s'", a);
		}
	}
	if (reset) {
		json_object_put(p);
		int rc = call("stats.reset", NULL, &res);
		if (!rc)
			as_json ? print_json(res) : (void)printf("statistics reset\n");
		json_object_put(res);
		return rc;
	}
	struct stats_out o = { 0 };
	int rc = stats_pages(p, &res, stats_page, &o);
	json_object_put(p);
	if (!rc && as_json) {
		json_object_object_del(res, "more");
		json_object_object_del(res, "cursor");
		print_json(res);
	} else if (!rc) {
		printf("  %zu row%s\n", o.rows, o.rows == 1 ? "" : "s");
		print_connections(get(res, "connections"));
		print_portals(get(res, "portals"));
		print_rdma_devices(get(res, "rdma_devices"));
		print_reactors(get(res, "reactors"));
	}
	json_object_put(res);
	return rc;
}

/* ---------------- iserctl top ---------------- */

/* One line of the view: a LUN (summed over its initiators) or an initiator (over its LUNs). */
struct row {
	char name[600];
	uint64_t reads, writes, bytes_r, bytes_w, in_flight;
	struct lat_hist r, w;
};

struct sample {
	uint64_t ns;                    /* the target's monotonic clock */
	struct row *rows;
	size_t n;
};

static bool by_initiator;

static struct row *row_of(struct sample *s, const char *name)
{
	/* The rows come in LUN order: a LUN's initiators one after the other, so its row is nearly always the last. */
	if (s->n && !strcmp(s->rows[s->n - 1].name, name))
		return &s->rows[s->n - 1];
	for (size_t i = 0; i < s->n; i++)
		if (!strcmp(s->rows[i].name, name))
			return &s->rows[i];
	struct row *r = realloc(s->rows, (s->n + 1) * sizeof(*r));
	if (!r)
		return NULL;
	s->rows = r;
	r = &r[s->n++];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	return r;
}

/* One page of the luns section into the sample's rows. */
static void sample_page(json_object *page, void *arg)
{
	struct sample *s = arg;
	json_object *luns = get(page, "luns");
	s->ns = u64(page, "monotonic_ns"); /* the last page's: the time most of the rows were read at */
	for (size_t i = 0; luns && i < json_object_array_length(luns); i++) {
		json_object *l = json_object_array_get_idx(luns, i), *c = get(l, "commands");
		char name[600];
		if (by_initiator)
			snprintf(name, sizeof(name), "%s", gets(l, "initiator", "?"));
		else
			lun_name(name, sizeof(name), l);
		struct row *r = row_of(s, name);
		if (!r)
			break;
		r->reads += u64(c, "read");
		r->writes += u64(c, "write");
		r->bytes_r += u64(l, "bytes_read");
		r->bytes_w += u64(l, "bytes_written");
		r->in_flight += u64(l, "in_flight");
		lat_hist_add_json(&r->r, lat(l, "read"));
		lat_hist_add_json(&r->w, lat(l, "write"));
	}
}

static int take_sample(struct sample *s)
{
	json_object *p = json_object_new_object(), *secs = json_object_new_array(), *first;
	json_object_array_add(secs, json_object_new_string("luns"));
	json_object_object_add(p, "sections", secs);
	free(s->rows);
	memset(s, 0, sizeof(*s));
	int rc = stats_pages(p, &first, sample_page, s);
	json_object_put(first);
	json_object_put(p);
	return rc;
}

/* What happened between two samples, per second. */
struct rate {
	const struct row *now;
	double rs, ws, rmb, wmb;
	struct lat_hist r, w;
};

static uint64_t minus(uint64_t a, uint64_t b)
{
	return a >= b ? a - b : a; /* less than before: stats.reset in between */
}

static int by_iops(const void *a, const void *b)
{
	const struct rate *x = a, *y = b;
	double d = (y->rs + y->ws) - (x->rs + x->ws);
	return d > 0 ? 1 : d < 0 ? -1 : strcmp(x->now->name, y->now->name);
}

static void pct_col(char *buf, size_t n, const struct lat_hist *h)
{
	double p = lat_hist_pct_us(h, 99);
	snprintf(buf, n, p < 0 ? "inf" : "%.0f", p);
}

/* How many bytes of s fit in width columns without cutting a UTF-8 sequence (names are shown forms: UTF-8). */
static int fit(const char *s, int width)
{
	int n = 0;
	while (s[n] && n < width)
		n++;
	while (n > 0 && s[n] && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/* One frame: the header with time and totals, then a line per row sorted by IOPS; at most max_rows rows. */
static void frame(const struct sample *a, const struct sample *b, double d_s, int width, size_t max_rows)
{
	double secs = b->ns > a->ns ? (double)(b->ns - a->ns) / 1e9 : 0;
	struct rate *v = calloc(b->n ? b->n : 1, sizeof(*v)), tot = { 0 };
	uint64_t qd = 0;
	for (size_t i = 0; v && i < b->n; i++) {
		const struct row *now = &b->rows[i], *was = NULL;
		/* Samples list their rows in the same order: the same place first, then a search. */
		if (i < a->n && !strcmp(a->rows[i].name, now->name))
			was = &a->rows[i];
		for (size_t k = 0; k < a->n && !was; k++)
			if (!strcmp(a->rows[k].name, now->name))
				was = &a->rows[k];
		struct row zero = { 0 };
		if (!was)
			was = &zero; /* new since the last sample: all of it is new */
		struct rate *x = &v[i];
		x->now = now;
		if (secs > 0) {
			x->rs = minus(now->reads, was->reads) / secs;
			x->ws = minus(now->writes, was->writes) / secs;
			x->rmb = minus(now->bytes_r, was->bytes_r) / secs / MB;
			x->wmb = minus(now->bytes_w, was->bytes_w) / secs / MB;
		}
		lat_hist_delta(&x->r, &now->r, &was->r);
		lat_hist_delta(&x->w, &now->w, &was->w);
		tot.rs += x->rs, tot.ws += x->ws, tot.rmb += x->rmb, tot.wmb += x->wmb;
		qd += now->in_flight;
	}
	if (v)
		qsort(v, b->n, sizeof(*v), by_iops);
	char tod[16];
	time_t t = time(NULL);
	strftime(tod, sizeof(tod), "%H:%M:%S", localtime(&t));
	printf("iserctl top - %s, every %.1f s, %zu %s%s; total %.1f r/s, %.1f w/s, %.2f rMB/s, %.2f wMB/s, "
	       "%" PRIu64 " in flight\n\n",
	       tod, d_s, b->n, by_initiator ? "initiator" : "LUN", b->n == 1 ? "" : "s", tot.rs, tot.ws, tot.rmb, tot.wmb, qd);
	char head[160];
	snprintf(head, sizeof(head), "%s  %s",
		 "     r/s      w/s    rMB/s    wMB/s  r_avg_us r_p99_us  w_avg_us w_p99_us    qd",
		 by_initiator ? "INITIATOR" : "TARGET/tpgN/lunM");
	printf("%.*s\n", fit(head, width), head);
	for (size_t i = 0; v && i < b->n && i < max_rows; i++) {
		char line[1024], rp[24], wp[24];
		pct_col(rp, sizeof(rp), &v[i].r);
		pct_col(wp, sizeof(wp), &v[i].w);
		snprintf(line, sizeof(line), "%8.1f %8.1f %8.2f %8.2f %9.1f %8s %9.1f %8s %5" PRIu64 "  %s", v[i].rs,
			 v[i].ws, v[i].rmb, v[i].wmb, lat_hist_avg_us(&v[i].r), rp, lat_hist_avg_us(&v[i].w), wp,
			 v[i].now->in_flight, v[i].now->name);
		printf("%.*s\n", fit(line, width), line);
	}
	free(v);
}

static volatile sig_atomic_t quit;
static struct termios saved_tty;
static bool tty_raw;

static void on_signal(int sig)
{
	/* SIGWINCH only interrupts the wait: the next frame takes the new size. */
	if (sig != SIGWINCH)
		quit = 1;
}

/* Back to the terminal as it was: its mode, the cursor shown. */
static void tty_restore(void)
{
	if (!tty_raw)
		return;
	tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tty);
	printf("\033[?25h");
	fflush(stdout);
	tty_raw = false;
}

/* Keys one by one without echo; ISIG stays so Ctrl-C is a SIGINT, caught to restore the mode. */
static void tty_setup(void)
{
	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tty))
		return;
	struct termios t = saved_tty;
	t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	t.c_cc[VMIN] = 0;
	t.c_cc[VTIME] = 0;
	if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &t))
		return;
	tty_raw = true;
	atexit(tty_restore);
	printf("\033[?25l");
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Wait until deadline (ms) or a quit: 'q' in interactive mode, a signal. */
static void wait_until(uint64_t deadline, bool keys)
{
	while (!quit) {
		uint64_t now = mono_ms();
		if (now >= deadline)
			return;
		struct pollfd pf = { .fd = STDIN_FILENO, .events = POLLIN };
		int n = poll(&pf, keys ? 1 : 0, (int)(deadline - now));
		if (n > 0) {
			char c;
			if (read(STDIN_FILENO, &c, 1) != 1)
				keys = false; /* end of input: nothing more to read, keep showing */
			else if (c == 'q' || c == 'Q')
				quit = 1;
		}
	}
}

/* top [-d SECONDS] [-n ITERATIONS] [-b] [--by lun|initiator] */
int cmd_top(int argc, char **argv)
{
	double d = 2;
	uint64_t frames = 0;
	bool batch = false;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-b")) {
			batch = true;
		} else if (i + 1 >= argc) {
			return die_usage("top: unexpected '%s'", a);
		} else if (!strcmp(a, "-d")) {
			char *end;
			d = strtod(argv[++i], &end);
			if (*end || !(d >= 0.1 && d <= 3600))
				return die_usage("top: -d '%s': expected seconds, 0.1-3600", argv[i]);
		} else if (!strcmp(a, "-n")) {
			if (parse_u64(a, argv[++i], 1000000000, &frames))
				return EX_USAGE;
		} else if (!strcmp(a, "--by") && (!strcmp(argv[i + 1], "lun") || !strcmp(argv[i + 1], "initiator"))) {
			by_initiator = argv[++i][0] == 'i';
		} else {
			return die_usage("top: unexpected '%s' (-d SECONDS, -n ITERATIONS, -b, --by lun|initiator)", a);
		}
	}
	/* Not on a terminal (a pipe, a file): plain frames, as top -b. */
	if (!isatty(STDOUT_FILENO))
		batch = true;
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART: poll() returns to see the flag */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (!batch)
		sigaction(SIGWINCH, &sa, NULL);
	struct sample prev = { 0 }, cur = { 0 };
	int rc = take_sample(&prev);
	if (rc)
		return rc;
	if (!batch) {
		tty_setup();
		printf("\033[H\033[2J(iserctl top: the first figures in %.1f s; q quits)\n", d);
		fflush(stdout);
	}
	uint64_t next = mono_ms();
	for (uint64_t f = 0; !quit && (!frames || f < frames); f++) {
		next += (uint64_t)(d * 1000);
		wait_until(next, !batch && tty_raw);
		if (quit || (rc = take_sample(&cur)))
			break;
		int width = 1023;
		size_t rows = (size_t)-1;
		struct winsize ws;
		if (!batch && !ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) && ws.ws_col && ws.ws_row) {
			width = ws.ws_col < 1023 ? ws.ws_col : 1023;
			rows = ws.ws_row > 4 ? ws.ws_row - 4u : 1;
		}
		if (batch && f)
			printf("\n");
		if (!batch)
			printf("\033[H\033[2J");
		frame(&prev, &cur, d, width, rows);
		fflush(stdout);
		struct sample t = prev;
		prev = cur;
		cur = t;
	}
	tty_restore();
	free(prev.rows);
	free(cur.rows);
	return rc;
}
