/*
 * The JSON of stats_collect() (docs/stats.md) as the Prometheus text
 * exposition format 0.0.4.  Pure: no I/O, no lock, so the unit test feeds
 * it a document and compares lines.
 *
 * Every family gets its HELP and TYPE even with no sample: the lines of a
 * family must be contiguous (so each family is one pass over its section),
 * and a dashboard query on a family this target has no sample of yet (the
 * RDMA ones on a TCP-only target) still names something that exists.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/util.h"
#include "target/metrics.h"

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

/* A label value: backslash, double quote and newline escaped, as the format asks. */
static void put_label(struct metrics_buf *b, const char *name, const char *val, bool first)
{
	putf(b, "%s%s=\"", first ? "" : ",", name);
	for (const char *s = val; *s; s++) {
		if (*s == '\\')
			puts_(b, "\\\\");
		else if (*s == '"')
			puts_(b, "\\\"");
		else if (*s == '\n')
			puts_(b, "\\n");
		else
			put(b, s, 1);
	}
	puts_(b, "\"");
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;
	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *str(json_object *o, const char *key)
{
	json_object *v = get(o, key);
	return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

/* A counter or gauge value; false when the field is absent (then there is no sample, not a 0). */
static bool num(json_object *o, const char *key, uint64_t *out)
{
	json_object *v = get(o, key);
	if (!v || !json_object_is_type(v, json_type_int))
		return false;
	*out = json_object_get_uint64(v);
	return true;
}

static void family(struct metrics_buf *b, const char *name, const char *type, const char *help)
{
	putf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* The labels naming one entry of a section, without the braces. */
typedef void (*labels_fn)(struct metrics_buf *b, json_object *e);

static void lun_labels(struct metrics_buf *b, json_object *e)
{
	const char *t = str(e, "target"), *i = str(e, "initiator"), *bs = str(e, "backstore");
	uint64_t tpg = 0, lun = 0;
	num(e, "tpg", &tpg);
	num(e, "lun", &lun);
	put_label(b, "target", t ? t : "", true);
	putf(b, ",tpg=\"%" PRIu64 "\",lun=\"%" PRIu64 "\"", tpg, lun);
	put_label(b, "initiator", i ? i : "", false);
	put_label(b, "backstore", bs ? bs : "", false);
}

static void portal_labels(struct metrics_buf *b, json_object *e)
{
	const char *p = str(e, "portal"), *t = str(e, "transport");
	put_label(b, "portal", p ? p : "", true);
	put_label(b, "transport", t ? t : "", false);
}

/* A series' name and labels, left open so a histogram can add le: name+suffix{labels[,xname="xval"] */
static void head(struct metrics_buf *b, const char *name, const char *suffix, labels_fn lf, json_object *e,
		 const char *xname, const char *xval)
{
	putf(b, "%s%s{", name, suffix);
	lf(b, e);
	if (xname)
		put_label(b, xname, xval, false);
}

static void sample(struct metrics_buf *b, const char *name, labels_fn lf, json_object *e, const char *xname,
		   const char *xval, uint64_t v)
{
	head(b, name, "", lf, e, xname, xval);
	putf(b, "} %" PRIu64 "\n", v);
}

/* One sample per entry of arr from its integer field key. */
static void simple(struct metrics_buf *b, json_object *arr, labels_fn lf, const char *name, const char *type,
		   const char *help, const char *key)
{
	family(b, name, type, help);
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *e = json_object_array_get_idx(arr, i);
		uint64_t v;
		if (num(e, key, &v))
			sample(b, name, lf, e, NULL, NULL, v);
	}
}

/* Every integer member of the object at path[0].path[1]... of each entry, labelled xname=member. */
static void by_member(struct metrics_buf *b, json_object *arr, labels_fn lf, const char *name, const char *type,
		      const char *help, const char *xname, const char *const *path)
{
	family(b, name, type, help);
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		json_object *e = json_object_array_get_idx(arr, i), *o = e;
		for (const char *const *p = path; *p && o; p++)
			o = get(o, *p);
		if (!o || !json_object_is_type(o, json_type_object))
			continue;
		json_object_object_foreach(o, k, v)
		{
			if (json_object_is_type(v, json_type_int))
				sample(b, name, lf, e, xname, k, json_object_get_uint64(v));
		}
	}
}

/*
 * One histogram series: cumulative buckets at bounds[i] us (in seconds),
 * +Inf, _sum in seconds, _count.  +Inf and _count are the total of the
 * buckets, so the two can never disagree in the exposition.
 */
static void histogram(struct metrics_buf *b, const char *name, json_object *e, const char *kind,
		      json_object *h, json_object *bounds)
{
	json_object *bk = get(h, "buckets");
	uint64_t sum_ns = 0, cum = 0;
	if (!bk || !json_object_is_type(bk, json_type_array) || !num(h, "sum_ns", &sum_ns))
		return;
	size_t nb = json_object_array_length(bk), nbounds = json_object_array_length(bounds);
	for (size_t i = 0; i < nb; i++) {
		cum += json_object_get_uint64(json_object_array_get_idx(bk, i));
		if (i >= nbounds)
			continue; /* the last bucket (beyond every bound) is only in +Inf */
		head(b, name, "_bucket", lun_labels, e, "kind", kind);
		puts_(b, ",le=\"");
		put_fixed(b, json_object_get_uint64(json_object_array_get_idx(bounds, i)), 6);
		putf(b, "\"} %" PRIu64 "\n", cum);
	}
	head(b, name, "_bucket", lun_labels, e, "kind", kind);
	putf(b, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
	head(b, name, "_sum", lun_labels, e, "kind", kind);
	puts_(b, "} ");
	put_fixed(b, sum_ns, 9);
	puts_(b, "\n");
	head(b, name, "_count", lun_labels, e, "kind", kind);
	putf(b, "} %" PRIu64 "\n", cum);
}

static void histograms(struct metrics_buf *b, json_object *luns, json_object *bounds, const char *name,
		       const char *help, const char *rd, const char *wr)
{
	family(b, name, "histogram", help);
	for (size_t i = 0; i < json_object_array_length(luns); i++) {
		json_object *e = json_object_array_get_idx(luns, i), *lat = get(e, "latency");
		histogram(b, name, e, "read", get(lat, rd), bounds);
		histogram(b, name, e, "write", get(lat, wr), bounds);
	}
}

/* The transport's counters of a portal: JSON key, family, help. */
static const struct {
	const char *key, *name, *help;
} portal_counters[] = {
	{ "connections_refused", "isert_portal_connections_refused_total",
	  "Connections refused by the connection limits before a login." },
	{ "connections_closed", "isert_portal_connections_closed_total", "Connections of this portal that ended." },
	{ "pdus_in", "isert_portal_pdus_received_total", "iSCSI PDUs received." },
	{ "pdus_out", "isert_portal_pdus_sent_total", "iSCSI PDUs sent." },
	{ "bytes_in", "isert_portal_received_bytes_total", "Bytes received (PDUs and data)." },
	{ "bytes_out", "isert_portal_sent_bytes_total", "Bytes sent (PDUs and data)." },
	{ "digest_errors", "isert_portal_digest_errors_total", "Header and data digest errors." },
	{ "r2ts", "isert_portal_r2ts_total", "R2T PDUs sent." },
	{ "nop_timeouts", "isert_portal_nop_timeouts_total", "Connections closed because a NOP-In went unanswered." },
}, rdma_counters[] = {
	{ "reads", "isert_portal_rdma_reads_total", "RDMA READs posted (the Data-Out of writes)." },
	{ "read_bytes", "isert_portal_rdma_read_bytes_total", "Bytes moved by RDMA READ." },
	{ "writes", "isert_portal_rdma_writes_total", "RDMA WRITEs posted (the Data-In of reads)." },
	{ "write_bytes", "isert_portal_rdma_write_bytes_total", "Bytes moved by RDMA WRITE." },
	{ "sends", "isert_portal_rdma_sends_total", "RDMA Sends posted (control PDUs)." },
	{ "recvs", "isert_portal_rdma_recvs_total", "RDMA receives completed." },
	{ "inline_sends", "isert_portal_rdma_inline_sends_total", "RDMA Sends posted inline (IBV_SEND_INLINE)." },
	{ "send_posts", "isert_portal_rdma_send_posts_total", "ibv_post_send calls (doorbells) that posted the READs, WRITEs and Sends." },
	{ "cq_polls", "isert_portal_rdma_cq_polls_total", "Completion queue polls." },
	{ "cq_empty_polls", "isert_portal_rdma_cq_empty_polls_total", "Completion queue polls that found nothing." },
	{ "completions", "isert_portal_rdma_completions_total", "Work completions reaped." },
};

static void lun_families(struct metrics_buf *b, json_object *luns, json_object *bounds)
{
	static const char *const cmd_path[] = { "commands", NULL }, *const cc_path[] = { "check_conditions", NULL },
				 *const st_path[] = { "status", NULL };
	by_member(b, luns, lun_labels, "isert_lun_commands_total", "counter",
		  "SCSI commands that got a status, by kind (medium reads, medium writes, other).", "kind", cmd_path);
	simple(b, luns, lun_labels, "isert_lun_read_bytes_total", "counter", "Data-In bytes of medium reads.",
	       "bytes_read");
	simple(b, luns, lun_labels, "isert_lun_written_bytes_total", "counter",
	       "Data-Out bytes of medium writes that ended GOOD.", "bytes_written");
	by_member(b, luns, lun_labels, "isert_lun_check_conditions_total", "counter",
		  "CHECK CONDITION statuses by sense key.", "sense_key", cc_path);
	by_member(b, luns, lun_labels, "isert_lun_status_total", "counter",
		  "BUSY, RESERVATION CONFLICT and TASK SET FULL statuses.", "status", st_path);
	simple(b, luns, lun_labels, "isert_lun_task_management_total", "counter",
	       "Task management requests naming the LUN.", "task_management");
	simple(b, luns, lun_labels, "isert_lun_commands_in_flight", "gauge",
	       "Commands arrived and not yet finished.", "in_flight");
	histograms(b, luns, bounds, "isert_lun_latency_seconds",
		   "Command latency, from its PDU received to its status handed to the transport.", "read", "write");
	histograms(b, luns, bounds, "isert_lun_backstore_latency_seconds",
		   "Time commands spent in the backstore.", "read_backstore", "write_backstore");
}

static void portal_families(struct metrics_buf *b, json_object *portals)
{
	static const char *const refused[] = { "logins", "refused", NULL };
	simple(b, portals, portal_labels, "isert_portal_connections", "gauge", "Live connections.", "connections");
	/* accepted and the refusals by reason are one family, told apart by result */
	by_member(b, portals, portal_labels, "isert_portal_logins_total", "counter",
		  "Logins, accepted or refused by reason.", "result", refused);
	for (size_t i = 0; i < json_object_array_length(portals); i++) {
		json_object *e = json_object_array_get_idx(portals, i);
		uint64_t v;
		if (num(get(e, "logins"), "accepted", &v))
			sample(b, "isert_portal_logins_total", portal_labels, e, "result", "accepted", v);
	}
	for (size_t k = 0; k < ARRAY_SIZE(portal_counters); k++)
		simple(b, portals, portal_labels, portal_counters[k].name, "counter", portal_counters[k].help,
		       portal_counters[k].key);
	for (size_t k = 0; k < ARRAY_SIZE(rdma_counters); k++) {
		family(b, rdma_counters[k].name, "counter", rdma_counters[k].help);
		for (size_t i = 0; i < json_object_array_length(portals); i++) {
			json_object *e = json_object_array_get_idx(portals, i);
			uint64_t v;
			if (num(get(e, "rdma"), rdma_counters[k].key, &v))
				sample(b, rdma_counters[k].name, portal_labels, e, NULL, NULL, v);
		}
	}
}

static void device_labels(struct metrics_buf *b, json_object *e)
{
	const char *d = str(e, "device");
	uint64_t port = 0;
	num(e, "port", &port);
	put_label(b, "device", d ? d : "", true);
	putf(b, ",port=\"%" PRIu64 "\"", port);
}

static void reactor_labels(struct metrics_buf *b, json_object *e)
{
	uint64_t r = 0;
	num(e, "reactor", &r);
	putf(b, "reactor=\"%" PRIu64 "\"", r);
}

static void reactor_families(struct metrics_buf *b, json_object *reactors)
{
	simple(b, reactors, reactor_labels, "isert_reactor_connections", "gauge",
	       "Live connections the reactor runs.", "connections");
	simple(b, reactors, reactor_labels, "isert_reactor_buffer_pool_bytes", "gauge",
	       "Bytes of data-buffer slabs the reactor's pool holds (registered with its RDMA devices).",
	       "buffer_pool_bytes");
	simple(b, reactors, reactor_labels, "isert_reactor_buffers_in_use", "gauge",
	       "Data buffers of the reactor's pool handed out now.", "buffers_in_use");
}

void metrics_render(json_object *stats, struct metrics_buf *b)
{
	json_object *bounds = get(stats, "latency_bounds_us"), *luns = get(stats, "luns"),
		    *portals = get(stats, "portals"), *devs = get(stats, "rdma_devices"), *reactors = get(stats, "reactors");
	json_object *none = json_object_new_array();
	if (!none) {
		b->oom = true;
		return;
	}
	/* A section the document lacks renders as families with no samples. */
	if (!bounds || !json_object_is_type(bounds, json_type_array))
		bounds = none;
	if (!luns || !json_object_is_type(luns, json_type_array))
		luns = none;
	if (!portals || !json_object_is_type(portals, json_type_array))
		portals = none;
	if (!devs || !json_object_is_type(devs, json_type_array))
		devs = none;
	if (!reactors || !json_object_is_type(reactors, json_type_array))
		reactors = none;
	family(b, "isert_up", "gauge", "1: isertd answered this scrape with its statistics.");
	puts_(b, "isert_up 1\n");
	lun_families(b, luns, bounds);
	portal_families(b, portals);
	static const char *const port_path[] = { "counters", NULL }, *const hw_path[] = { "hw_counters", NULL };
	by_member(b, devs, device_labels, "isert_rdma_port_counters_total", "counter",
		  "The RDMA port's counters (sysfs ports/N/counters), by name.", "counter", port_path);
	by_member(b, devs, device_labels, "isert_rdma_hw_counters_total", "counter",
		  "The RDMA port's hardware counters (sysfs ports/N/hw_counters), by name.", "counter", hw_path);
	reactor_families(b, reactors);
	json_object_put(none);
}
