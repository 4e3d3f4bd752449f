/*
 * Statistics (docs/stats.md).  Every counter is written by one reactor only
 * and read on that reactor: the admin thread (or the metrics thread) sends
 * every reactor a message, each copies what it holds, and the reader sums
 * the copies.  Nothing on the I/O path takes a lock or an atomic.
 *
 * Built with -Dstats=false, the hot-path hooks compile to nothing (the cost
 * comparison in tools/bench-stats.sh) and `stats` answers an error.
 */
#ifndef ISCSI_STATS_H
#define ISCSI_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/transport.h"

#ifndef ISERT_STATS
#define ISERT_STATS 1
#endif

struct json_object;
struct iscsi_conn;
struct iscsi_lun;
struct iscsi_portal;
struct iscsi_session;
struct iscsi_task;
struct iscsi_tpg;

/* Latency histograms: bucket i counts latencies <= 2^i us (i < STATS_BUCKETS - 1), the last one the rest. */
#define STATS_BUCKETS 28 /* 1 us .. 2^26 us (67 s), then beyond */
struct stats_hist {
	uint64_t n[STATS_BUCKETS];
	uint64_t sum_ns;
};

enum stats_kind { STATS_READ, STATS_WRITE, STATS_OTHER, STATS_KINDS };
enum stats_lat { LAT_READ, LAT_WRITE, LAT_READ_BACKSTORE, LAT_WRITE_BACKSTORE, LAT_KINDS };

/* The counter structs below hold uint64_t fields only: stats.c sums them as arrays. */

/* What a LUN x initiator pair did (reset by stats.reset). */
struct stats_lun_counters {
	uint64_t commands[STATS_KINDS];
	uint64_t bytes_read, bytes_written;
	uint64_t check_conditions[16];  /* by sense key */
	uint64_t busy, reservation_conflict, task_set_full;
	uint64_t tmf;                   /* task management requests naming this LUN */
	struct stats_hist lat[LAT_KINDS];
};

/*
 * One LUN as one initiator uses it from one reactor (all its sessions there
 * share it).  Made at the first command; kept after the sessions end so
 * counters only grow, up to STATS_MAX_LUNS per reactor (then entries no
 * session uses are reused).
 */
#define STATS_MAX_LUNS 16384
struct stats_lun {
	struct stats_lun *hnext;        /* the reactor's hash chain */
	const struct iscsi_tpg *tpg;    /* lives as long as the process */
	uint64_t lun;
	char initiator[224];
	char backstore[65];
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
void stats_tmf(struct iscsi_session *s, uint64_t lun);
#define STATS_INC(x) ((x)++)
#else
static inline void stats_cmd_arrived(struct iscsi_task *t, struct iscsi_session *s, struct iscsi_lun *l) {}
static inline void stats_cmd_status(struct iscsi_task *t) {}
static inline void stats_cmd_freed(struct iscsi_task *t) {}
static inline void stats_tmf(struct iscsi_session *s, uint64_t lun) {}
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

/* What `stats` reports; NULL/-1 fields match everything. */
struct stats_filter {
	const char *target;
	const char *initiator;
	int64_t lun;                    /* -1: any */
	int tsih;                       /* 0: any (connections) */
	bool luns, connections, portals, rdma_devices, reactors; /* sections wanted */
};

/*
 * From any thread but a reactor: the statistics as JSON (docs/stats.md),
 * summed over the reactors.  0, or -errno with err filled (a reactor that
 * did not answer within 5 s, or statistics compiled out).
 */
int stats_collect(struct json_object *out, const struct stats_filter *f, char *err, size_t errlen);
/* Zero every counter (gauges stay); 0 or -errno with err filled. */
int stats_reset(char *err, size_t errlen);

#endif
