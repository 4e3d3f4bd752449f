/*
 * Admission: how much of isertd one peer, one portal or everyone together
 * may hold -- connections (in all, per portal, per initiator address) and
 * sessions.  A connection is counted when the listener admits it, before it
 * costs anything (for iSER, before its queue pair and buffers), and counted
 * out when it is freed.  The counts change only when connections come and
 * go, never on the I/O path, so one mutex guards them.
 */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "common/log.h"
#include "target/iscsi/iscsi.h"

#define HOST_BUCKETS 256

/* Connections from one initiator address (entries exist while n > 0). */
struct host_count {
	struct host_count *next;
	unsigned n;
	char ip[48];
};

static pthread_mutex_t admit_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned nconns, nsessions;
/* The running configuration's limits, copied at start and at each change (admit_set_limits). */
static unsigned max_conns, max_per_portal, max_per_host, max_sessions;
/* Connections the open file limit leaves room for (admit_fd_budget); UINT_MAX: no limit counted yet. */
static unsigned fd_cap = UINT_MAX;
static unsigned long long fd_limit;
static struct host_count *hosts[HOST_BUCKETS];

static struct host_count **host_slot(const char *ip)
{
	unsigned h = 5381;
	for (const char *p = ip; *p; p++)
		h = h * 33 + (unsigned char)*p;
	struct host_count **pp = &hosts[h % HOST_BUCKETS];
	while (*pp && strcmp((*pp)->ip, ip))
		pp = &(*pp)->next;
	return pp;
}

bool admit_conn(void *arg, const struct xp_conn *xp)
{
	struct iscsi_portal *p = arg;
	char why[96] = "";
	pthread_mutex_lock(&admit_lock);
	struct host_count **hp = host_slot(xp->peer_ip);
	unsigned from_host = *hp ? (*hp)->n : 0;
	if (iscsi_g.stopping)
		snprintf(why, sizeof(why), "shutting down");
	else if (nconns >= max_conns)
		snprintf(why, sizeof(why), "max_connections (%u) reached", max_conns);
	else if (nconns >= fd_cap)
		snprintf(why, sizeof(why), "%u connections are what the open file limit (%llu) leaves room for", fd_cap,
			 fd_limit);
	else if (p && p->nconns >= max_per_portal)
		snprintf(why, sizeof(why), "max_connections_per_portal (%u) reached", max_per_portal);
	else if (from_host >= max_per_host)
		snprintf(why, sizeof(why), "max_connections_per_host (%u) reached for %s", max_per_host, xp->peer_ip);
	else if (!*hp && !(*hp = calloc(1, sizeof(**hp))))
		snprintf(why, sizeof(why), "out of memory");
	if (!why[0]) {
		snprintf((*hp)->ip, sizeof((*hp)->ip), "%s", xp->peer_ip);
		(*hp)->n++;
		nconns++;
		if (p)
			p->nconns++;
	}
	pthread_mutex_unlock(&admit_lock);
	if (why[0]) {
		log_limited(LOG_WARN, "connection from %s to %s refused: %s", xp->peer, p ? p->name : xp->local, why);
		stats_conn_refused(p);
	}
	return !why[0];
}

void admit_dropped(void *arg, const struct xp_conn *xp)
{
	struct iscsi_portal *p = arg;
	pthread_mutex_lock(&admit_lock);
	struct host_count **hp = host_slot(xp->peer_ip);
	if (*hp && --(*hp)->n == 0) {
		struct host_count *h = *hp;
		*hp = h->next;
		free(h);
	}
	nconns--;
	if (p)
		p->nconns--;
	pthread_mutex_unlock(&admit_lock);
}

void admit_conn_gone(struct iscsi_conn *c)
{
	admit_dropped(c->portal, c->xp);
}

uint16_t admit_session(char *why, size_t whylen)
{
	uint16_t status = 0;
	pthread_mutex_lock(&admit_lock);
	if (nsessions >= max_sessions) {
		snprintf(why, whylen, "max_sessions (%u) reached", max_sessions);
		status = PDU_LOGIN_OUT_OF_RESOURCES;
	} else {
		nsessions++;
	}
	pthread_mutex_unlock(&admit_lock);
	return status;
}

void admit_session_gone(void)
{
	pthread_mutex_lock(&admit_lock);
	nsessions--;
	pthread_mutex_unlock(&admit_lock);
}

/* Descriptors open now. */
static unsigned open_fds(void)
{
	unsigned n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n > 3 ? n - 3 : 0; /* ".", ".." and the directory's own descriptor */
}

unsigned admit_fd_budget(unsigned others, unsigned *reserve, unsigned long long *limit)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl))
		rl.rlim_cur = RLIM_INFINITY;
	unsigned open = open_fds();
	pthread_mutex_lock(&admit_lock);
	/* What is open but connections, and what the admin socket and the metrics endpoint may still open. */
	unsigned r = (open > nconns ? open - nconns : 0) + others + ADMIT_FD_FILES;
	fd_limit = rl.rlim_cur;
	if (rl.rlim_cur == RLIM_INFINITY)
		fd_cap = UINT_MAX;
	else if (rl.rlim_cur <= r)
		fd_cap = 0;
	else
		fd_cap = rl.rlim_cur - r > UINT_MAX ? UINT_MAX : (unsigned)(rl.rlim_cur - r);
	unsigned cap = fd_cap;
	pthread_mutex_unlock(&admit_lock);
	if (reserve)
		*reserve = r;
	if (limit)
		*limit = rl.rlim_cur;
	return cap;
}

void admit_set_limits(const struct config *c)
{
	pthread_mutex_lock(&admit_lock);
	max_conns = c->max_connections;
	max_per_portal = c->max_connections_per_portal;
	max_per_host = c->max_connections_per_host;
	max_sessions = c->max_sessions;
	pthread_mutex_unlock(&admit_lock);
}
