/*
 * A statistics snapshot (docs/stats.md) as the Prometheus text exposition
 * format 0.0.4, produced piece by piece.  Pure: no I/O, no lock, so the
 * unit test feeds it a snapshot and compares lines.
 *
 * What a scrape costs is bounded by the rows a snapshot can hold
 * (STATS_MAX_NAMED + STATS_MAX_REST, docs/security.md), not by how many
 * initiators ever came: per row, its counters only (at most 26 lines); the
 * latency histograms per LUN, summed over the LUN's rows, for at most
 * METRICS_HIST_LUNS LUNs.  The snapshot is compacted to that (about 250
 * bytes a row plus its names) and the text is made as the client reads it.
 *
 * Every family gets its HELP and TYPE even with no sample: the lines of a
 * family must be contiguous (so each family is one pass over its section),
 * and a dashboard query on a family this target has no sample of yet (the
 * RDMA ones on a TCP-only target) still names something that exists.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/utf8.h"
#include "common/util.h"
#include "target/control/metrics.h"
#include "target/control/stats.h"
#include "target/control/https.h"
#include "target/fleet/fleet.h"

/* ------------------------------------------------------------------------ */
/* Text */

static void put(struct metrics_buf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 16384;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void puts_(struct metrics_buf *b, const char *s)
{
	put(b, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3))) putf(struct metrics_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	put(b, tmp, n < 0 ? 0 : (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

void metrics_buf_free(struct metrics_buf *b)
{
	free(b->p);
	*b = (struct metrics_buf){ 0 };
}

/* v / 10^dec in decimal, exactly (no float rounding), trailing zeros dropped: 1500 us -> "0.0015". */
static void put_fixed(struct metrics_buf *b, uint64_t v, unsigned dec)
{
	uint64_t div = 1;
	for (unsigned i = 0; i < dec; i++)
		div *= 10;
	uint64_t frac = v % div;
	putf(b, "%" PRIu64, v / div);
	if (!frac)
		return;
	while (frac % 10 == 0) {
		frac /= 10;
		dec--;
	}
	putf(b, ".%0*" PRIu64, (int)dec, frac);
}

/* text with the format's own escapes of \ and ", in runs (a label is written for every line of its row). */
static void put_quoted(struct metrics_buf *b, const char *text)
{
	while (*text) {
		size_t run = strcspn(text, "\\\"");
		put(b, text, run);
		text += run;
		if (*text) {
			put(b, *text == '\\' ? "\\\\" : "\\\"", 2);
			text++;
		}
	}
}

/* A label: the value's shown form (utf8_shown), quoted as the format asks. */
static void put_label(struct metrics_buf *b, const char *name, const char *val, bool first)
{
	char shown[4 * 256 + 1];
	putf(b, "%s%s=\"", first ? "" : ",", name);
	size_t n = utf8_shown(val, shown, sizeof(shown));
	if (n < sizeof(shown)) {
		put_quoted(b, shown);
	} else { /* longer than any name isertd keeps (223 bytes): from the heap */
		char *big = malloc(n + 1);
		if (!big) {
			b->oom = true;
			return;
		}
		utf8_shown(val, big, n + 1);
		put_quoted(b, big);
		free(big);
	}
	put(b, "\"", 1);
}

static void family(struct metrics_buf *b, const char *name, const char *type, const char *help)
{
	putf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ------------------------------------------------------------------------ */
/* The compact snapshot */

/* A row's counters, without its histograms (those are its LUN's). */
struct mrow {
	const char *target, *initiator, *backstore;
	uint16_t tpg;
	uint64_t lun, in_flight;
	struct stats_counts n;
};

/* A LUN (target, TPG, LUN, backstore): the histograms of its rows, summed. */
struct mlun {
	const char *target, *backstore;
	uint16_t tpg;
	uint64_t lun;
	struct stats_hist lat[LAT_KINDS];
};

struct metrics_gen {
	struct mrow *rows;
	size_t nrows;
	struct mlun *luns;
	size_t nluns;
	char *names;                    /* the rows' initiator and backstore names, packed */
	struct stats_portal_row *portals;
	size_t nportals;
	json_object *devs;
	struct stats_reactor_row *reactors;
	size_t nreactors;
	unsigned fam;                   /* the family being written (families[]) */
	size_t idx;                     /* its next element */
	struct metrics_buf out;         /* text made, not yet read */
	size_t off;                     /* read up to here */
};

static bool same_lun(const struct stats_row *a, const struct stats_row *b)
{
	return !strcmp(a->target, b->target) && a->tpg == b->tpg && a->lun == b->lun &&
	       !strcmp(a->backstore, b->backstore);
}

static char *pack(char **at, const char *s)
{
	size_t n = strlen(s) + 1;
	char *p = memcpy(*at, s, n);
	*at += n;
	return p;
}

struct metrics_gen *metrics_gen_new(struct stats_snap *s)
{
	struct metrics_gen *g = calloc(1, sizeof(*g));
	size_t bytes = 1, nl = 0;
	for (size_t i = 0; i < s->nsorted; i++) {
		bytes += strlen(s->sorted[i]->initiator) + strlen(s->sorted[i]->backstore) + 2;
		nl += nl < METRICS_HIST_LUNS && (!i || !same_lun(s->sorted[i - 1], s->sorted[i]));
	}
	if (!g || !(g->names = malloc(bytes)) || !(g->rows = calloc(s->nsorted + 1, sizeof(*g->rows))) ||
	    !(g->luns = calloc(nl + 1, sizeof(*g->luns)))) {
		metrics_gen_free(g);
		stats_snap_free(s);
		return NULL;
	}
	char *at = g->names;
	struct mlun *l = NULL;
	for (size_t i = 0; i < s->nsorted; i++) {
		const struct stats_row *r = s->sorted[i];
		const struct stats_lun_counters *c = &r->c;
		struct mrow *m = &g->rows[g->nrows++];
		m->target = r->target; /* a TPG's IQN, which lives as long as the process */
		m->initiator = pack(&at, r->initiator);
		m->backstore = pack(&at, r->backstore);
		m->tpg = r->tpg;
		m->lun = r->lun;
		m->in_flight = r->in_flight;
		m->n = c->n;
		/* Rows of one LUN are together (stats_row_cmp): a new LUN starts where the key changes. */
		if (!i || !same_lun(s->sorted[i - 1], r))
			l = g->nluns < nl ? &g->luns[g->nluns++] : NULL;
		if (l && !l->target) {
			l->target = m->target;
			l->backstore = m->backstore;
			l->tpg = m->tpg;
			l->lun = m->lun;
		}
		if (l)
			stats_add_counters(l->lat, c->lat, sizeof(l->lat));
	}
	/* The small sections move over; the rows' full copies go. */
	g->portals = s->portals;
	g->nportals = s->nportals;
	g->devs = s->rdma_devices;
	g->reactors = s->reactors;
	g->nreactors = s->nreactors;
	s->portals = NULL;
	s->rdma_devices = NULL;
	s->reactors = NULL;
	stats_snap_free(s);
	return g;
}

void metrics_gen_free(struct metrics_gen *g)
{
	if (!g)
		return;
	free(g->rows);
	free(g->luns);
	free(g->names);
	free(g->portals);
	json_object_put(g->devs);
	free(g->reactors);
	metrics_buf_free(&g->out);
	free(g);
}

/* ------------------------------------------------------------------------ */
/* Families: each writes one element (a row, a LUN, a whole small section) per call. */

static void lun_labels(struct metrics_buf *b, const struct mrow *r)
{
	put_label(b, "target", r->target, true);
	putf(b, ",tpg=\"%u\",lun=\"%" PRIu64 "\"", r->tpg, r->lun);
	put_label(b, "initiator", r->initiator, false);
	put_label(b, "backstore", r->backstore, false);
}

static void row_sample(struct metrics_buf *b, const char *name, const struct mrow *r, const char *xname,
		       const char *xval, uint64_t v)
{
	putf(b, "%s{", name);
	lun_labels(b, r);
	if (xname)
		put_label(b, xname, xval, false);
	putf(b, "} %" PRIu64 "\n", v);
}

struct family;
typedef size_t (*count_fn)(const struct metrics_gen *g);
typedef void (*one_fn)(struct metrics_gen *g, size_t i, const struct family *f);

struct family {
	const char *name, *type, *help;
	count_fn count;
	one_fn one;
	size_t off;                     /* a field of struct mrow or struct stats_portal_row, for the simple ones */
};

static size_t n_rows(const struct metrics_gen *g) { return g->nrows; }
static size_t n_luns(const struct metrics_gen *g) { return g->nluns; }
static size_t n_once(const struct metrics_gen *g) { (void)g; return 1; }

static uint64_t field(const void *base, size_t off)
{
	uint64_t v;
	memcpy(&v, (const char *)base + off, sizeof(v));
	return v;
}

static void up_one(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i, (void)f;
	puts_(&g->out, "isert_up 1\n");
}

static void row_simple(struct metrics_gen *g, size_t i, const struct family *f)
{
	row_sample(&g->out, f->name, &g->rows[i], NULL, NULL, field(&g->rows[i], f->off));
}

static void row_commands(struct metrics_gen *g, size_t i, const struct family *f)
{
	for (int k = 0; k < STATS_KINDS; k++)
		row_sample(&g->out, f->name, &g->rows[i], "kind", stats_kind_names[k], g->rows[i].n.commands[k]);
}

/* Only the sense keys seen: 16 series a row for what is nearly always 0 or 1 of them would be waste. */
static void row_sense(struct metrics_gen *g, size_t i, const struct family *f)
{
	for (int k = 0; k < 16; k++)
		if (g->rows[i].n.check_conditions[k])
			row_sample(&g->out, f->name, &g->rows[i], "sense_key", stats_sense_names[k],
				   g->rows[i].n.check_conditions[k]);
}

static void row_status(struct metrics_gen *g, size_t i, const struct family *f)
{
	const struct mrow *r = &g->rows[i];
	row_sample(&g->out, f->name, r, "status", "busy", r->n.busy);
	row_sample(&g->out, f->name, r, "status", "reservation_conflict", r->n.reservation_conflict);
	row_sample(&g->out, f->name, r, "status", "task_set_full", r->n.task_set_full);
}

/* One LUN's histogram series: name+suffix{target,tpg,lun,backstore,kind[,le]}. */
static void hist_head(struct metrics_buf *b, const char *name, const char *suffix, const struct mlun *l,
		      const char *kind)
{
	putf(b, "%s%s{", name, suffix);
	put_label(b, "target", l->target, true);
	putf(b, ",tpg=\"%u\",lun=\"%" PRIu64 "\"", l->tpg, l->lun);
	put_label(b, "backstore", l->backstore, false);
	put_label(b, "kind", kind, false);
}

/*
 * One histogram: cumulative buckets at 2^i us (in seconds), +Inf, _sum in
 * seconds, _count.  +Inf and _count are the total of the buckets, so the
 * two can never disagree in the exposition.
 */
static void histogram(struct metrics_buf *b, const char *name, const struct mlun *l, const char *kind,
		      const struct stats_hist *h)
{
	uint64_t cum = 0;
	for (int i = 0; i < STATS_BUCKETS; i++) {
		cum += h->n[i];
		if (i == STATS_BUCKETS - 1)
			break; /* the last bucket (beyond every bound) is only in +Inf */
		hist_head(b, name, "_bucket", l, kind);
		puts_(b, ",le=\"");
		put_fixed(b, 1ull << i, 6);
		putf(b, "\"} %" PRIu64 "\n", cum);
	}
	hist_head(b, name, "_bucket", l, kind);
	putf(b, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
	hist_head(b, name, "_sum", l, kind);
	puts_(b, "} ");
	put_fixed(b, h->sum_ns, 9);
	puts_(b, "\n");
	hist_head(b, name, "_count", l, kind);
	putf(b, "} %" PRIu64 "\n", cum);
}

static void lun_latency(struct metrics_gen *g, size_t i, const struct family *f)
{
	histogram(&g->out, f->name, &g->luns[i], "read", &g->luns[i].lat[LAT_READ]);
	histogram(&g->out, f->name, &g->luns[i], "write", &g->luns[i].lat[LAT_WRITE]);
}

static void lun_backstore_latency(struct metrics_gen *g, size_t i, const struct family *f)
{
	histogram(&g->out, f->name, &g->luns[i], "read", &g->luns[i].lat[LAT_READ_BACKSTORE]);
	histogram(&g->out, f->name, &g->luns[i], "write", &g->luns[i].lat[LAT_WRITE_BACKSTORE]);
}

static void portal_head(struct metrics_buf *b, const char *name, const struct stats_portal_row *p)
{
	putf(b, "%s{", name);
	put_label(b, "portal", p->portal, true);
	put_label(b, "transport", p->iser ? "iser" : "tcp", false);
}

static void portal_simple(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	for (size_t k = 0; k < g->nportals; k++) {
		const struct stats_portal_row *p = &g->portals[k];
		portal_head(&g->out, f->name, p);
		putf(&g->out, "} %" PRIu64 "\n", field(p, f->off));
	}
}

static void portal_live(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	for (size_t k = 0; k < g->nportals; k++) {
		portal_head(&g->out, f->name, &g->portals[k]);
		putf(&g->out, "} %u\n", g->portals[k].connections);
	}
}

/* A transport counter of the iSER portals only: a TCP portal has none, so no sample rather than a 0. */
static void portal_rdma(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	for (size_t k = 0; k < g->nportals; k++)
		if (g->portals[k].iser) {
			portal_head(&g->out, f->name, &g->portals[k]);
			putf(&g->out, "} %" PRIu64 "\n", field(&g->portals[k], f->off));
		}
}

/* accepted, redirected and the refusals by reason are one family, told apart by result */
static void portal_logins(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	for (size_t k = 0; k < g->nportals; k++) {
		const struct stats_portal_row *p = &g->portals[k];
		portal_head(&g->out, f->name, p);
		putf(&g->out, ",result=\"accepted\"} %" PRIu64 "\n", p->c.logins_accepted);
		portal_head(&g->out, f->name, p);
		putf(&g->out, ",result=\"redirected\"} %" PRIu64 "\n", p->c.logins_redirected);
		for (int r = 0; r < REFUSED_KINDS; r++) {
			portal_head(&g->out, f->name, p);
			putf(&g->out, ",result=\"%s\"} %" PRIu64 "\n", stats_refusal_names[r], p->c.logins_refused[r]);
		}
	}
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;
	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* Every integer member of each device's object at key (counters, hw_counters), labelled counter=member. */
static void device_counters(struct metrics_gen *g, const struct family *f, const char *key)
{
	for (size_t i = 0; g->devs && i < json_object_array_length(g->devs); i++) {
		json_object *e = json_object_array_get_idx(g->devs, i), *o = get(e, key), *d = get(e, "device"),
			    *port = get(e, "port");
		if (!o || !json_object_is_type(o, json_type_object))
			continue;
		json_object_object_foreach(o, k, v)
		{
			if (!json_object_is_type(v, json_type_int))
				continue;
			putf(&g->out, "%s{", f->name);
			put_label(&g->out, "device", d ? json_object_get_string(d) : "", true);
			putf(&g->out, ",port=\"%" PRIu64 "\"", port ? (uint64_t)json_object_get_uint64(port) : 0);
			put_label(&g->out, "counter", k, false);
			putf(&g->out, "} %" PRIu64 "\n", (uint64_t)json_object_get_uint64(v));
		}
	}
}

static void dev_port(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	device_counters(g, f, "counters");
}

static void dev_hw(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	device_counters(g, f, "hw_counters");
}

static void reactor_connections(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	for (size_t k = 0; k < g->nreactors; k++)
		putf(&g->out, "%s{reactor=\"%u\"} %u\n", f->name, g->reactors[k].reactor, g->reactors[k].connections);
}

static void reactor_pool(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	for (size_t k = 0; k < g->nreactors; k++)
		putf(&g->out, "%s{reactor=\"%u\"} %" PRIu64 "\n", f->name, g->reactors[k].reactor,
		     field(&g->reactors[k], f->off));
}

/* A gateway of a fleet (docs/fleet.md): one sample each, read from the fleet's own state under its lock. */
static size_t n_fleet(const struct metrics_gen *g)
{
	(void)g;
	return fleet_active();
}

static void fleet_one(struct metrics_gen *g, size_t i, const struct family *f)
{
	static const char *const keys[] = { "generation", "cached", "reachable" };
	(void)i;
	json_object *o = fleet_self_json(), *v = NULL;
	json_object_object_get_ex(o, keys[f->off], &v);
	putf(&g->out, "%s %" PRIu64 "\n", f->name,
	     json_object_is_type(v, json_type_boolean) ? (uint64_t)json_object_get_boolean(v) :
							 (uint64_t)json_object_get_uint64(v));
	json_object_put(o);
}

/* The HTTPS admin door's refusals (target/control/https.h), counted on the admin thread. */
static void https_refusals(struct metrics_gen *g, size_t i, const struct family *f)
{
	(void)i;
	for (enum https_refusal r = 0; r < HTTPS_NREFUSALS; r++)
		putf(&g->out, "%s{reason=\"%s\"} %" PRIu64 "\n", f->name, https_refusal_name(r), https_refused(r));
}

#define ROW(f) offsetof(struct mrow, f)
#define PORTAL(f) offsetof(struct stats_portal_row, c.f)

static const struct family families[] = {
	{ "isert_up", "gauge", "1: isertd answered this scrape with its statistics.", n_once, up_one, 0 },
	{ "isert_lun_commands_total", "counter",
	  "SCSI commands that got a status, by kind (medium reads, medium writes, other).", n_rows, row_commands, 0 },
	{ "isert_lun_read_bytes_total", "counter", "Data-In bytes of medium reads.", n_rows, row_simple,
	  ROW(n.bytes_read) },
	{ "isert_lun_written_bytes_total", "counter", "Data-Out bytes of medium writes that ended GOOD.", n_rows,
	  row_simple, ROW(n.bytes_written) },
	{ "isert_lun_check_conditions_total", "counter", "CHECK CONDITION statuses by sense key.", n_rows, row_sense,
	  0 },
	{ "isert_lun_status_total", "counter", "BUSY, RESERVATION CONFLICT and TASK SET FULL statuses.", n_rows,
	  row_status, 0 },
	{ "isert_lun_task_management_total", "counter", "Task management requests naming the LUN.", n_rows,
	  row_simple, ROW(n.tmf) },
	{ "isert_lun_commands_in_flight", "gauge", "Commands arrived and not yet finished.", n_rows, row_simple,
	  ROW(in_flight) },
	{ "isert_lun_latency_seconds", "histogram",
	  "Command latency, from its PDU received to its status handed to the transport, per LUN.", n_luns,
	  lun_latency, 0 },
	{ "isert_lun_backstore_latency_seconds", "histogram", "Time commands spent in the backstore, per LUN.",
	  n_luns, lun_backstore_latency, 0 },
	{ "isert_portal_connections", "gauge", "Live connections.", n_once, portal_live, 0 },
	{ "isert_portal_logins_total", "counter", "Logins, accepted or refused by reason.", n_once, portal_logins, 0 },
	{ "isert_portal_connections_refused_total", "counter",
	  "Connections refused by the connection limits before a login.", n_once, portal_simple,
	  PORTAL(connections_refused) },
	{ "isert_portal_connections_closed_total", "counter", "Connections of this portal that ended.", n_once,
	  portal_simple, PORTAL(connections_closed) },
	{ "isert_portal_pdus_received_total", "counter", "iSCSI PDUs received.", n_once, portal_simple,
	  PORTAL(closed.pdus_in) },
	{ "isert_portal_pdus_sent_total", "counter", "iSCSI PDUs sent.", n_once, portal_simple,
	  PORTAL(closed.pdus_out) },
	{ "isert_portal_received_bytes_total", "counter", "Bytes received (PDUs and data).", n_once, portal_simple,
	  PORTAL(closed.bytes_in) },
	{ "isert_portal_sent_bytes_total", "counter", "Bytes sent (PDUs and data).", n_once, portal_simple,
	  PORTAL(closed.bytes_out) },
	{ "isert_portal_digest_errors_total", "counter", "Header and data digest errors.", n_once, portal_simple,
	  PORTAL(closed.digest_errors) },
	{ "isert_portal_r2ts_total", "counter", "R2T PDUs sent.", n_once, portal_simple, PORTAL(closed_conn.r2ts) },
	{ "isert_portal_nop_timeouts_total", "counter", "Connections closed because a NOP-In went unanswered.",
	  n_once, portal_simple, PORTAL(closed_conn.nop_timeouts) },
	{ "isert_portal_rdma_reads_total", "counter", "RDMA READs posted (the Data-Out of writes).", n_once,
	  portal_rdma, PORTAL(closed.rdma_reads) },
	{ "isert_portal_rdma_read_bytes_total", "counter", "Bytes moved by RDMA READ.", n_once, portal_rdma,
	  PORTAL(closed.rdma_read_bytes) },
	{ "isert_portal_rdma_writes_total", "counter", "RDMA WRITEs posted (the Data-In of reads).", n_once,
	  portal_rdma, PORTAL(closed.rdma_writes) },
	{ "isert_portal_rdma_write_bytes_total", "counter", "Bytes moved by RDMA WRITE.", n_once, portal_rdma,
	  PORTAL(closed.rdma_write_bytes) },
	{ "isert_portal_rdma_sends_total", "counter", "RDMA Sends posted (control PDUs).", n_once, portal_rdma,
	  PORTAL(closed.sends) },
	{ "isert_portal_rdma_recvs_total", "counter", "RDMA receives completed.", n_once, portal_rdma,
	  PORTAL(closed.recvs) },
	{ "isert_portal_rdma_inline_sends_total", "counter", "RDMA Sends posted inline (IBV_SEND_INLINE).", n_once,
	  portal_rdma, PORTAL(closed.inline_sends) },
	{ "isert_portal_rdma_send_posts_total", "counter",
	  "ibv_post_send calls (doorbells) that posted the READs, WRITEs and Sends.", n_once, portal_rdma,
	  PORTAL(closed.send_posts) },
	{ "isert_portal_rdma_cq_polls_total", "counter", "Completion queue polls.", n_once, portal_rdma,
	  PORTAL(closed.cq_polls) },
	{ "isert_portal_rdma_cq_empty_polls_total", "counter", "Completion queue polls that found nothing.", n_once,
	  portal_rdma, PORTAL(closed.cq_empty_polls) },
	{ "isert_portal_rdma_completions_total", "counter", "Work completions reaped.", n_once, portal_rdma,
	  PORTAL(closed.completions) },
	{ "isert_rdma_port_counters_total", "counter", "The RDMA port's counters (sysfs ports/N/counters), by name.",
	  n_once, dev_port, 0 },
	{ "isert_rdma_hw_counters_total", "counter",
	  "The RDMA port's hardware counters (sysfs ports/N/hw_counters), by name.", n_once, dev_hw, 0 },
	{ "isert_reactor_connections", "gauge", "Live connections the reactor runs.", n_once, reactor_connections, 0 },
	{ "isert_reactor_buffer_pool_bytes", "gauge",
	  "Bytes of data-buffer slabs the reactor's pool holds (registered with its RDMA devices).", n_once,
	  reactor_pool, offsetof(struct stats_reactor_row, pool_bytes) },
	{ "isert_reactor_buffers_in_use", "gauge", "Data buffers of the reactor's pool handed out now.", n_once,
	  reactor_pool, offsetof(struct stats_reactor_row, pool_in_use) },
	{ "isert_admin_https_refused_total", "counter",
	  "Requests to the HTTPS admin door refused, by reason (authentication, backoff, role).", n_once,
	  https_refusals, 0 },
	{ "isert_fleet_generation", "gauge", "The fleet's generation this gateway runs (docs/fleet.md).", n_fleet,
	  fleet_one, 0 },
	{ "isert_fleet_cached", "gauge", "1: this gateway serves the copy it kept, the cluster not reached.", n_fleet,
	  fleet_one, 1 },
	{ "isert_fleet_reachable", "gauge", "1: this gateway watches the fleet's document in the cluster.", n_fleet,
	  fleet_one, 2 },
};

/* The next piece of text into g->out: false when everything was written. */
static bool step(struct metrics_gen *g)
{
	if (g->fam >= ARRAY_SIZE(families))
		return false;
	const struct family *f = &families[g->fam];
	size_t n = f->count(g);
	if (!g->idx)
		family(&g->out, f->name, f->type, f->help);
	if (g->idx < n)
		f->one(g, g->idx++, f);
	if (g->idx >= n) {
		g->fam++;
		g->idx = 0;
	}
	return true;
}

ssize_t metrics_gen_read(struct metrics_gen *g, char *buf, size_t max)
{
	size_t n = 0;
	while (n < max) {
		if (g->off == g->out.len) {
			g->out.len = g->off = 0; /* keep the buffer: it is as large as the largest piece */
			if (!step(g))
				break;
			if (g->out.oom)
				return -1;
			continue;
		}
		size_t k = MIN(max - n, g->out.len - g->off);
		memcpy(buf + n, g->out.p + g->off, k);
		n += k;
		g->off += k;
	}
	return (ssize_t)n;
}

void metrics_render(struct stats_snap *s, struct metrics_buf *b)
{
	struct metrics_gen *g = metrics_gen_new(s);
	char chunk[65536];
	ssize_t n;
	if (!g) {
		b->oom = true;
		return;
	}
	while ((n = metrics_gen_read(g, chunk, sizeof(chunk))) > 0)
		put(b, chunk, (size_t)n);
	if (n < 0)
		b->oom = true;
	metrics_gen_free(g);
}
