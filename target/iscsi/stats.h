/*
 * Statistics (docs/stats.md).  Every counter is written by one reactor only
 * and read on that reactor: the admin thread (or the metrics thread) sends
 * every reactor a message, each copies what it holds (stats_copy_*), and
 * the reader sums the copies (target/control/stats.h).  Nothing on the I/O
 * path takes a lock or an atomic.
 *
 * Built with -Dstats=false, the hot-path hooks compile to nothing (the cost
 * comparison in tools/bench-stats.sh) and `stats` answers an error.
 */
#ifndef ISCSI_STATS_H
#define ISCSI_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ISERT_STATS (on unless the build says -Dstats=false) is defined once, there. */
#include "common/transport/transport.h"

struct json_object;
struct iscsi_conn;
struct iscsi_lun;
struct iscsi_portal;
struct iscsi_session;
struct iscsi_task;
struct rt_tpg;

/* Latency histograms: bucket i counts latencies <= 2^i us (i < STATS_BUCKETS - 1), the last one the rest. */
#define STATS_BUCKETS 28 /* 1 us .. 2^26 us (67 s), then beyond */
struct stats_hist {
	uint64_t n[STATS_BUCKETS];
	uint64_t sum_ns;
};

enum stats_kind { STATS_READ, STATS_WRITE, STATS_OTHER, STATS_KINDS };
enum stats_lat { LAT_READ, LAT_WRITE, LAT_READ_BACKSTORE, LAT_WRITE_BACKSTORE, LAT_KINDS };

/* The counter structs below hold uint64_t fields only: stats_add_counters sums them as arrays. */

/* What a LUN x initiator pair did, but for its latencies: what each row of /metrics carries as well. */
struct stats_counts {
	uint64_t commands[STATS_KINDS];
	uint64_t bytes_read, bytes_written;
	uint64_t check_conditions[16];  /* by sense key */
	uint64_t busy, reservation_conflict, task_set_full;
	uint64_t tmf;                   /* task management requests naming this LUN */
};

/* What a LUN x initiator pair did (reset by stats.reset). */
struct stats_lun_counters {
	struct stats_counts n;
	struct stats_hist lat[LAT_KINDS];
};

/*
 * The rows a reactor keeps (docs/stats.md, "How they are kept").  A named
 * row is one LUN as one initiator uses it from this reactor (all its
 * sessions here share it), made at the first command.  Named rows are
 * capped (STATS_MAX_NAMED over all reactors) so that what a reader copies
 * and what a scrape carries stay bounded however many initiators come; the
 * LUN's rest row (initiator STATS_REST_NAME) counts for initiators past the
 * cap, and takes in the counters of named rows no session uses when their
 * place is needed (folded, oldest idle first), so a LUN's totals stay
 * exact and no counter goes down.  Rest rows are capped too
 * (STATS_MAX_REST); past both, the overflow row (no target) counts.
 */
#define STATS_MAX_NAMED 4096            /* named rows in all: each reactor keeps STATS_MAX_NAMED / reactors */
#define STATS_MAX_REST 4096             /* rest rows in all, shared out the same way */
#define STATS_REST_NAME "*"             /* a rest row's initiator; an initiator of that name counts there too */

enum stats_row_kind { STATS_NAMED, STATS_REST, STATS_OVERFLOW };

struct stats_table;
struct stats_lun {
	struct stats_lun *hnext;        /* the reactor's hash chain */
	struct stats_lun *iprev, *inext; /* its table's idle list (named, no user, nothing in flight), oldest first */
	struct stats_table *tab;        /* its reactor's table */
	const struct rt_tpg *tpg;    /* lives as long as the process; NULL for the overflow row */
	uint64_t lun;
	char initiator[224];
	char backstore[65];
	uint8_t kind;                   /* enum stats_row_kind */
	bool idle;                      /* on the idle list */
	unsigned users;                 /* session LUN maps pointing here */
	uint64_t in_flight;             /* commands arrived, not yet freed */
	struct stats_lun_counters c;
};

/* The iSCSI layer's counters of a connection (the transport's are in xp_conn.stats). */
struct stats_conn {
	uint64_t r2ts;
	uint64_t nop_timeouts;
};

/* Why a login was refused (the login status, grouped). */
enum stats_refusal {
	REFUSED_ACL,            /* 0x0202: the initiator is not allowed */
	REFUSED_CHAP,           /* 0x0201: authentication failed */
	REFUSED_UNKNOWN_TARGET, /* 0x0203, 0x0204: no such target here (or it left) */
	REFUSED_RESOURCES,      /* 0x0206, 0x03xx: limits, out of resources, target errors */
	REFUSED_INITIATOR,      /* other 0x02xx: the initiator's mistake */
	REFUSED_KINDS
};

/* A portal's counters on one reactor: its logins, and the sum of its connections that ended. */
struct stats_portal {
	uint64_t logins_accepted;
	uint64_t logins_redirected;     /* answered with a redirection (status class 01h) */
	uint64_t logins_refused[REFUSED_KINDS];
	uint64_t connections_refused;   /* at admission (limits), before any login */
	uint64_t connections_closed;
	struct xp_stats closed;
	struct stats_conn closed_conn;
};

#if ISERT_STATS
/* Hot path, on the task's reactor. */
void stats_cmd_arrived(struct iscsi_task *t, struct iscsi_session *s, struct iscsi_lun *l);
void stats_cmd_status(struct iscsi_task *t);  /* its status is handed to the transport */
void stats_cmd_freed(struct iscsi_task *t);
void stats_tmf(struct iscsi_session *s, struct iscsi_lun *l); /* l: the LUN it names, NULL if none */
#define STATS_INC(x) ((x)++)
#else
static inline void stats_cmd_arrived(struct iscsi_task *t, struct iscsi_session *s, struct iscsi_lun *l) {}
static inline void stats_cmd_status(struct iscsi_task *t) {}
static inline void stats_cmd_freed(struct iscsi_task *t) {}
static inline void stats_tmf(struct iscsi_session *s, struct iscsi_lun *l) {}
#define STATS_INC(x) ((void)0)
#endif

/* A session's LUN map is dropped (replaced or the session ends): its entries lose a user. */
void stats_map_dropped(struct iscsi_lun *luns, size_t n);
/* Login accepted (status 0) or refused, on the connection's reactor. */
void stats_login(struct iscsi_conn *c, uint16_t status);
/* A connection refused at admission, on the listener's reactor. */
void stats_conn_refused(struct iscsi_portal *p);
/* A connection ends: its counters go into its portal's totals. */
void stats_conn_closed(struct iscsi_conn *c);
/* The per-reactor slots of a new portal (0 or -ENOMEM). */
int stats_portal_init(struct iscsi_portal *p, unsigned nreactors);
/* At exit, on no reactor: every reactor's tables. */
void stats_free(void);
/* On a reactor, for stats_copy.c: fn(row) for each row it keeps, its overflow row last. */
void stats_rows_foreach(void (*fn)(struct stats_lun *e, void *arg), void *arg);
/* The rows all reactors may keep at most: each one's shares of both caps and its overflow row. */
size_t stats_rows_max(void);

/* What `stats` reports; NULL/-1 fields match everything. */
struct stats_filter {
	const char *target;
	const char *initiator;
	int64_t lun;                    /* -1: any */
	int tsih;                       /* 0: any (connections) */
	bool luns, connections, portals, rdma_devices, reactors; /* sections wanted */
};

/* ------------------------------------------------------------------------ */
/* Reading: one snapshot that every exporter (the admin socket, /metrics) reads. */

/* A row of the luns section, summed over the reactors that keep one for the same key. */
struct stats_row {
	const char *target;             /* its TPG's IQN (TPGs live as long as the process); "*" for overflow */
	uint16_t tpg;                   /* 0 for overflow */
	uint8_t kind;                   /* enum stats_row_kind */
	uint64_t lun;
	char initiator[224];            /* STATS_REST_NAME for rest and overflow rows */
	char backstore[65];             /* "*" for overflow */
	uint64_t in_flight;
	struct stats_lun_counters c;
};

/* A live connection of a full-feature session (the connections section). */
struct stats_conn_row {
	const char *target;             /* "" for discovery */
	uint16_t tpg, tsih, cid;
	char initiator[224];
	char portal[72];
	char peer[64];
	const char *transport;          /* a transport's static name */
	int reactor;
	bool rdma;
	struct xp_stats xp;
	struct stats_conn st;
};

/* A portal: its logins, and the traffic of its ended and live connections. */
struct stats_portal_row {
	char portal[72];                /* HOST:PORT */
	bool iser, listening;
	unsigned connections;           /* live now */
	struct stats_portal c;
};

struct stats_reactor_row {
	unsigned reactor, connections;
	uint64_t pool_bytes, pool_in_use;
};

struct stats_snap {
	uint64_t monotonic_ns;
	struct stats_row *rows;         /* storage, in no order */
	struct stats_row **sorted;      /* one per key, in stats_row_cmp order */
	size_t nrows, nsorted;
	struct stats_conn_row *conns;
	size_t nconns;
	struct stats_portal_row *portals;
	size_t nportals;
	struct json_object *rdma_devices; /* the sysfs counters as the stats method shows them; NULL unless asked */
	struct stats_reactor_row *reactors;
	size_t nreactors;
};

static inline void stats_add_counters(void *to, const void *from, size_t size)
{
	uint64_t *d = to;
	const uint64_t *v = from;
	for (size_t i = 0; i < size / sizeof(uint64_t); i++)
		d[i] += v[i];
}

/*
 * One read of what the reactors hold: made from the reading thread (the
 * portals made so far, room for every row f may match), run on every
 * reactor (each copies its rows, its connections and its share of the
 * portals' counters; with reset, zeroes them instead), then taken: the
 * rows and connections as copied, in no order, the portals and reactors
 * as their rows, into s.  stats_copy_take returns 0, or -errno (out of
 * memory on a reactor or here).  stats_copy_free once no reactor holds it.
 */
struct stats_copy;
struct stats_copy *stats_copy_new(const struct stats_filter *f, bool reset);
void stats_copy_on_reactor(void *k);
int stats_copy_take(struct stats_copy *k, struct stats_snap *s);
void stats_copy_free(void *k);

#endif
