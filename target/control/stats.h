/*
 * Reading the statistics (docs/stats.md): the snapshot every exporter
 * reads (stats_snap.c), and the stats method's answer made of it
 * (stats_json.c).  From any thread but a reactor.
 */
#ifndef CONTROL_STATS_H
#define CONTROL_STATS_H

#include <stddef.h>

#include "target/iscsi/stats.h"

struct json_object;

/* Row order: target, TPG, LUN, backstore, initiator; so the rows of one LUN are together. */
int stats_row_cmp(const struct stats_row *a, const struct stats_row *b);

/*
 * The statistics f asks for, summed over the reactors.  0 with *out
 * (stats_snap_free it), or -errno with err filled (a reactor that did not
 * answer within 5 s, out of memory, statistics compiled out).  At most
 * STATS_MAX_NAMED + STATS_MAX_REST + 2 x reactors rows (before the
 * reactors' copies of one key are summed).
 */
int stats_snapshot(const struct stats_filter *f, struct stats_snap **out, char *err, size_t errlen);
void stats_snap_free(struct stats_snap *s);

/*
 * The `stats` method's answer (docs/stats.md): the sections f asks for, the
 * luns section one page long.  A page starts after cursor (NULL: at the
 * first row) and holds at most limit rows (1..STATS_PAGE_MAX); when rows
 * are left, "more" is true and "cursor" says where the next page starts.
 * 0, or -errno with err filled (-EINVAL: a cursor this did not make).
 */
#define STATS_PAGE_MAX 512
int stats_collect(struct json_object *out, const struct stats_filter *f, const char *cursor, unsigned limit,
		  char *err, size_t errlen);
/* Zero every counter (gauges stay); 0 or -errno with err filled. */
int stats_reset(char *err, size_t errlen);

/* The names both exporters give (stats_json.c): sense keys, login refusals, command kinds. */
extern const char *const stats_sense_names[16];
extern const char *const stats_refusal_names[REFUSED_KINDS];
extern const char *const stats_kind_names[STATS_KINDS];

#endif
