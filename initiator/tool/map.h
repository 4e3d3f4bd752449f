/* iseradm map / unmap / maps: a LUN as a local block device through ublk. */
#ifndef ISERADM_MAP_H
#define ISERADM_MAP_H

#include <stdbool.h>

#include "isert/initiator.h"

#define MAP_MAX_PATHS 8 /* URLs (portals) of one LUN */

struct map_opts {
	unsigned queues;        /* ublk queues = threads = sessions to the LUN */
	unsigned depth;         /* ublk queue depth (tags per queue) */
	unsigned max_io_kib;    /* largest request the block layer sends */
	unsigned timeout_s;     /* replacement timeout: I/O waits this long for a re-login */
	bool daemon;            /* detach once the device is up */
	bool round_robin;       /* several paths: spread commands (default: failover, the first usable) */
	bool recoverable;       /* ublk user recovery: a killed map leaves the device for --recover */
	int recover_id;         /* >= 0: take over this device of a killed map (its I/O waits meanwhile) */
	bool json;
};
void map_opts_default(struct map_opts *mo);

/* Each prints what went wrong and returns 0 or a negative errno. */
/* urls: the paths (portals) of one LU, in order of preference. */
int map_run(const struct isc_url *urls, unsigned nurls, const struct isc_options *o, const struct map_opts *mo);
int map_unmap(const char *dev, bool json);
int map_list(bool json);

#endif
