/*
 * A fake iSCSI target for tests of the initiator library: a child process
 * on a loopback port that logs initiators in (discovery and normal
 * sessions, one connection at a time, again after every close), answers a
 * few commands, and misbehaves the way its scenario says.  What it saw is
 * counted in memory shared with the parent.
 */
#ifndef FAKE_TARGET_H
#define FAKE_TARGET_H

#include <stdint.h>
#include <sys/types.h>

#define FT_TARGET "iqn.2026-11.org.isert:hostile"

enum ft_scenario {
	FT_NORMAL,     /* TEST UNIT READY, INQUIRY, READ CAPACITY, REPORT LUNS (2 LUNs), one-R2T WRITEs */
	FT_PING_FLOOD, /* after login: stops reading, sends `count` NOP-In pings of `len` bytes */
	FT_R2T_FLOOD,  /* at a WRITE: stops reading, `count` R2Ts for the first burst, R2TSN counting up */
	FT_R2T_RANGE,  /* at a WRITE: an R2T that ends 512 bytes past the write */
	FT_R2T_BURST,  /* at a WRITE: an R2T twice MaxBurstLength long (inside the write) */
	FT_R2T_SN,     /* at a WRITE: the first R2T carries R2TSN 3 */
	FT_NOP_BIG,    /* after login: a NOP-In ping with `len` bytes of data */
	FT_NOP_ECHO,   /* after login: a NOP-In ping with `len` bytes; its echo is measured */
	FT_LUNS_CUT,   /* REPORT LUNS: 260 LUNs in the data, the list length says 260 then 3000 */
	FT_CLOSE_AT_WRITE, /* first login's first WRITE: its R2T, then the connection closed unread (a reset) */
};

struct ft_config {
	enum ft_scenario sc;
	uint16_t port;
	uint32_t mrdsl;     /* the target's MaxRecvDataSegmentLength (declared at login) */
	uint32_t max_burst; /* the MaxBurstLength it answers */
	uint32_t count;     /* pings or R2Ts of the flood scenarios */
	uint32_t len;       /* data bytes of each ping */
};

/* Counted by the child, read by the parent. */
struct ft_stats {
	volatile int logins, discovery_logins;
	volatile int scsi_cmds;         /* SCSI Commands, REPORT LUNS included */
	volatile int report_luns;
	volatile int unlisted_lun_cmds; /* commands to a LUN the report did not list */
	volatile int echoes;            /* NOP-Outs answering our pings */
	volatile uint32_t echo_len_max; /* their longest data segment */
	volatile int pings_sent, r2ts_sent;
};

/* LUNs FT_LUNS_CUT puts in its answer (the rest of the list it claims never comes). */
#define FT_LUNS_SENT 260u
#define FT_LUNS_CLAIMED 3000u

/* Listen, fork the target; NULL on failure (errno). */
struct ft_stats *ft_start(const struct ft_config *cfg, pid_t *pid);
/* Kill the child, wait for it, unmap the counters. */
void ft_stop(pid_t pid, struct ft_stats *st);

#endif
