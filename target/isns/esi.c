/*
 * The ESI port's connections (RFC 4171 sec. 5.6.5.13): the server connects
 * to each portal's address at the ESI port and asks whether the entity
 * lives (open-isns opens a connection per portal and inquiry, and drops a
 * portal after a few unanswered ones).  The port has no authentication, so
 * anyone who reaches it can take its ISNS_ESI_CONNS slots; a full set must
 * not keep the server out.
 *
 * A new connection takes a free slot, or else the slot of the oldest
 * connection from an address other than the configured server's (the
 * oldest by when it came, not by what it sent: a peer chooses what it
 * sends, not how long ago it came).  One from the server's address, when
 * every slot holds one of the server's, takes the oldest of those; only
 * then is a newcomer from elsewhere refused.  So the server at the address
 * global.isns names is always answered, and a server inquiring from another
 * of its addresses is answered unless newer connections take every slot
 * between its connection and its inquiry.  Admitting the configured
 * address alone would leave such a server unanswered, and isertd cannot
 * know its other addresses (global.isns names one, numerically).
 *
 * Pure like the engine: client.c carries the sockets and the time, the
 * unit tests and tests/fuzz/fuzz_isns.c play the peers.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "target/isns/isns_int.h"

void isns_esi_server(struct isns_esi *s, const char *host)
{
	memset(s->server, 0, sizeof(s->server));
	s->has_server = false;
	if (host && inet_pton(AF_INET, host, s->server + 12) == 1) {
		s->server[10] = s->server[11] = 0xff;
		s->has_server = true;
	} else if (host && inet_pton(AF_INET6, host, s->server) == 1) {
		s->has_server = true;
	}
	for (size_t i = 0; i < ISNS_ESI_CONNS; i++) /* those of a server no longer configured lose its place */
		s->c[i].server = s->c[i].used && s->has_server && !memcmp(s->c[i].peer, s->server, 16);
}

/* The oldest connection held, of the server's (server) or of anyone else's; -1: none. */
static int oldest(const struct isns_esi *s, bool server)
{
	int k = -1;
	for (int i = 0; i < ISNS_ESI_CONNS; i++)
		if (s->c[i].used && s->c[i].server == server && (k < 0 || s->c[i].since < s->c[k].since))
			k = i;
	return k;
}

int isns_esi_admit(struct isns_esi *s, const uint8_t peer[16], uint64_t now, bool *evicted)
{
	char ip[64], old[64];
	bool server = s->has_server && !memcmp(peer, s->server, 16);
	int k = -1;
	for (int i = 0; i < ISNS_ESI_CONNS && k < 0; i++)
		if (!s->c[i].used)
			k = i;
	*evicted = k < 0;
	if (k < 0 && (k = oldest(s, false)) < 0 && server)
		k = oldest(s, true);
	isns_ip_str(peer, ip, sizeof(ip));
	if (k < 0) {
		log_limited(LOG_WARN, "iSNS: ESI port: all %u connections are the server's; one from %s refused",
			    ISNS_ESI_CONNS, ip);
		return -1;
	}
	if (*evicted) {
		log_limited(LOG_WARN, "iSNS: ESI port: %u connections at once; the oldest, from %s, closed for one from %s%s",
			    ISNS_ESI_CONNS, isns_ip_str(s->c[k].peer, old, sizeof(old)), ip, server ? " (the server)" : "");
		isns_esi_drop(s, (size_t)k);
	}
	struct isns_esi_conn *c = &s->c[k];
	c->used = true;
	c->server = server;
	memcpy(c->peer, peer, 16);
	c->since = now;
	return k;
}

int isns_esi_input(struct isns_esi *s, size_t i, const uint8_t *p, size_t n, const char *eid)
{
	struct isns_esi_conn *c = &s->c[i];
	char err[256], ip[64];
	isns_ip_str(c->peer, ip, sizeof(ip));
	for (size_t off = 0; off < n;) {
		struct isns_msg m;
		size_t used;
		int r = isns_rx_feed(&c->rx, p + off, n - off, &used, &m, err, sizeof(err));
		off += used;
		if (r < 0) {
			log_limited(LOG_WARN, "iSNS: ESI from %s: %s; connection closed", ip, err);
			return r;
		}
		if (!r)
			break;
		if (m.func == ISNS_ESI && !c->out.b) {
			if (isns_esi_answer(&m, eid, &c->out))
				isns_out_free(&c->out);
			c->off = 0;
			log_debug("iSNS: ESI from %s answered", ip);
		} else if (m.func != ISNS_ESI) {
			log_limited(LOG_WARN, "iSNS: ESI port: %s from %s ignored", isns_func_name(m.func, err, sizeof(err)), ip);
		}
		isns_msg_free(&m);
	}
	return 0;
}

const uint8_t *isns_esi_output(const struct isns_esi *s, size_t i, size_t *n)
{
	const struct isns_esi_conn *c = &s->c[i];
	*n = c->out.b ? c->out.len - c->off : 0;
	return c->out.b ? c->out.b + c->off : NULL;
}

void isns_esi_sent(struct isns_esi *s, size_t i, size_t n)
{
	struct isns_esi_conn *c = &s->c[i];
	if (c->out.b && (c->off += n) >= c->out.len) {
		isns_out_free(&c->out);
		c->off = 0;
	}
}

void isns_esi_drop(struct isns_esi *s, size_t i)
{
	struct isns_esi_conn *c = &s->c[i];
	isns_rx_reset(&c->rx);
	isns_out_free(&c->out);
	memset(c, 0, sizeof(*c));
}
