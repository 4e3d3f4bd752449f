/*
 * The stats method's answer (docs/stats.md): a snapshot as JSON, its luns
 * section one page long, with the cursor that names where the next starts.
 */
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/control/control.h"
#include "target/control/stats.h"
#include "target/iscsi/stats.h"

static void add_u(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

/* JSON (the stats method) */

const char *const stats_sense_names[16] = {
	"no_sense", "recovered_error", "not_ready", "medium_error", "hardware_error", "illegal_request",
	"unit_attention", "data_protect", "blank_check", "vendor_specific", "copy_aborted", "aborted_command",
	"reserved_0c", "volume_overflow", "miscompare", "completed",
};
const char *const stats_refusal_names[REFUSED_KINDS] = { "acl", "chap", "unknown_target", "resources",
							 "initiator_error" };
const char *const stats_kind_names[STATS_KINDS] = { "read", "write", "other" };
static const char *const lat_names[LAT_KINDS] = { "read", "write", "read_backstore", "write_backstore" };
static const char *const row_names[] = { [STATS_NAMED] = "initiator", [STATS_REST] = "rest",
					 [STATS_OVERFLOW] = "overflow" };

static json_object *hist_json(const struct stats_hist *h)
{
	json_object *o = json_object_new_object(), *b = json_object_new_array_ext(STATS_BUCKETS);
	uint64_t n = 0;
	for (int i = 0; i < STATS_BUCKETS; i++) {
		n += h->n[i];
		json_object_array_add(b, json_object_new_uint64(h->n[i]));
	}
	add_u(o, "count", n);
	add_u(o, "sum_ns", h->sum_ns);
	json_object_object_add(o, "buckets", b);
	return o;
}

static json_object *lun_json(const struct stats_row *e)
{
	const struct stats_counts *c = &e->c.n;
	json_object *o = json_object_new_object(), *x;
	json_object_object_add(o, "target", json_object_new_string(e->target));
	add_u(o, "tpg", e->tpg);
	add_u(o, "lun", e->lun);
	json_object_object_add(o, "initiator", admin_json_shown(e->initiator));
	json_object_object_add(o, "backstore", json_object_new_string(e->backstore));
	json_object_object_add(o, "row", json_object_new_string(row_names[e->kind]));
	add_u(o, "in_flight", e->in_flight);
	json_object_object_add(o, "commands", x = json_object_new_object());
	for (int i = 0; i < STATS_KINDS; i++)
		add_u(x, stats_kind_names[i], c->commands[i]);
	add_u(o, "bytes_read", c->bytes_read);
	add_u(o, "bytes_written", c->bytes_written);
	json_object_object_add(o, "check_conditions", x = json_object_new_object());
	for (int i = 0; i < 16; i++)
		if (c->check_conditions[i])
			add_u(x, stats_sense_names[i], c->check_conditions[i]);
	add_u(o, "unit_attentions", c->check_conditions[6]);
	json_object_object_add(o, "status", x = json_object_new_object());
	add_u(x, "busy", c->busy);
	add_u(x, "reservation_conflict", c->reservation_conflict);
	add_u(x, "task_set_full", c->task_set_full);
	add_u(o, "task_management", c->tmf);
	json_object_object_add(o, "latency", x = json_object_new_object());
	for (int i = 0; i < LAT_KINDS; i++)
		json_object_object_add(x, lat_names[i], hist_json(&e->c.lat[i]));
	return o;
}

static void xp_json(json_object *o, const struct xp_stats *s, const struct stats_conn *st, bool rdma)
{
	add_u(o, "pdus_in", s->pdus_in);
	add_u(o, "pdus_out", s->pdus_out);
	add_u(o, "bytes_in", s->bytes_in);
	add_u(o, "bytes_out", s->bytes_out);
	add_u(o, "digest_errors", s->digest_errors);
	add_u(o, "r2ts", st->r2ts);
	add_u(o, "nop_timeouts", st->nop_timeouts);
	if (!rdma)
		return;
	json_object *r = json_object_new_object();
	add_u(r, "reads", s->rdma_reads);
	add_u(r, "read_bytes", s->rdma_read_bytes);
	add_u(r, "writes", s->rdma_writes);
	add_u(r, "write_bytes", s->rdma_write_bytes);
	add_u(r, "sends", s->sends);
	add_u(r, "recvs", s->recvs);
	add_u(r, "inline_sends", s->inline_sends);
	add_u(r, "send_posts", s->send_posts);
	add_u(r, "cq_polls", s->cq_polls);
	add_u(r, "cq_empty_polls", s->cq_empty_polls);
	add_u(r, "completions", s->completions);
	json_object_object_add(o, "rdma", r);
}

static json_object *conn_json(const struct stats_conn_row *c)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "target", json_object_new_string(c->target));
	add_u(o, "tpg", c->tpg);
	json_object_object_add(o, "initiator", admin_json_shown(c->initiator));
	add_u(o, "tsih", c->tsih);
	add_u(o, "cid", c->cid);
	json_object_object_add(o, "portal", json_object_new_string(c->portal));
	json_object_object_add(o, "transport", json_object_new_string(c->transport));
	json_object_object_add(o, "peer", json_object_new_string(c->peer));
	add_u(o, "reactor", (uint64_t)c->reactor);
	xp_json(o, &c->xp, &c->st, c->rdma);
	return o;
}

static json_object *portal_json(const struct stats_portal_row *p)
{
	const struct stats_portal *s = &p->c;
	json_object *o = json_object_new_object(), *l, *r;
	json_object_object_add(o, "portal", json_object_new_string(p->portal));
	json_object_object_add(o, "transport", json_object_new_string(p->iser ? "iser" : "tcp"));
	json_object_object_add(o, "listening", json_object_new_boolean(p->listening));
	add_u(o, "connections", p->connections);
	add_u(o, "connections_refused", s->connections_refused);
	add_u(o, "connections_closed", s->connections_closed);
	json_object_object_add(o, "logins", l = json_object_new_object());
	add_u(l, "accepted", s->logins_accepted);
	add_u(l, "redirected", s->logins_redirected);
	json_object_object_add(l, "refused", r = json_object_new_object());
	for (int i = 0; i < REFUSED_KINDS; i++)
		add_u(r, stats_refusal_names[i], s->logins_refused[i]);
	xp_json(o, &s->closed, &s->closed_conn, p->iser);
	return o;
}

/*
 * The cursor of a page: the key of its last row, as
 * "1.HEX(target).tpg.lun.HEX(backstore).HEX(initiator)".  Hex, because a
 * key holds whatever bytes an initiator named itself with, and the cursor
 * must come back through any JSON client unchanged.
 */
static void hex_put(char **p, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	for (; *s; s++) {
		*(*p)++ = hex[(uint8_t)*s >> 4];
		*(*p)++ = hex[(uint8_t)*s & 15];
	}
}

static char *cursor_of(const struct stats_row *r)
{
	size_t n = 2 * (strlen(r->target) + strlen(r->backstore) + strlen(r->initiator)) + 64;
	char *c = malloc(n), *p = c;
	if (!c)
		return NULL;
	p += sprintf(p, "1.");
	hex_put(&p, r->target);
	p += sprintf(p, ".%u.%" PRIu64 ".", r->tpg, r->lun);
	hex_put(&p, r->backstore);
	*p++ = '.';
	hex_put(&p, r->initiator);
	*p = 0;
	return c;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Hex up to the next '.' (or the end) into out (at most outlen - 1 bytes, no NUL); the text after it, or NULL. */
static const char *hex_get(const char *s, char *out, size_t outlen)
{
	size_t n = 0;
	for (; *s && *s != '.'; s += 2) {
		int hi = hexval(s[0]), lo = hi < 0 ? -1 : hexval(s[1]);
		if (lo < 0 || (hi | lo) == 0 || n + 1 >= outlen)
			return NULL;
		out[n++] = (char)(hi << 4 | lo);
	}
	out[n] = 0;
	return s;
}

/* The key in a cursor: 0, or -EINVAL. */
static int cursor_parse(const char *c, struct stats_row *key, char *target, size_t tlen)
{
	unsigned tpg;
	uint64_t lun;
	int used = 0;
	memset(key, 0, sizeof(*key));
	if (strncmp(c, "1.", 2) || !(c = hex_get(c + 2, target, tlen)) || *c != '.' ||
	    sscanf(c, ".%5u.%20" SCNu64 ".%n", &tpg, &lun, &used) != 2 || !used || tpg > 65535 ||
	    !(c = hex_get(c + used, key->backstore, sizeof(key->backstore))) || *c != '.' ||
	    !(c = hex_get(c + 1, key->initiator, sizeof(key->initiator))) || *c)
		return -EINVAL;
	key->target = target;
	key->tpg = (uint16_t)tpg;
	key->lun = lun;
	return 0;
}

int stats_collect(json_object *out, const struct stats_filter *f, const char *cursor, unsigned limit, char *err,
		  size_t errlen)
{
	struct stats_row key;
	char target[224];
	if (cursor && cursor_parse(cursor, &key, target, sizeof(target))) {
		snprintf(err, errlen, "cursor: not one this method made (pass back the \"cursor\" of an answer)");
		return -EINVAL;
	}
	if (limit < 1 || limit > STATS_PAGE_MAX)
		limit = STATS_PAGE_MAX;
	struct stats_snap *s;
	int rc = stats_snapshot(f, &s, err, errlen);
	if (rc)
		return rc;
	add_u(out, "monotonic_ns", s->monotonic_ns);
	json_object *a = json_object_new_array();
	for (int i = 0; i < STATS_BUCKETS - 1; i++)
		json_object_array_add(a, json_object_new_uint64(1ull << i));
	json_object_object_add(out, "latency_bounds_us", a);
	if (f->luns) {
		/* The first row after the cursor's key: a binary search over the sorted rows. */
		size_t lo = 0, hi = s->nsorted;
		while (cursor && lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (stats_row_cmp(s->sorted[mid], &key) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		size_t end = s->nsorted - lo > limit ? lo + limit : s->nsorted;
		a = json_object_new_array_ext((int)(end - lo));
		for (size_t i = lo; i < end; i++)
			json_object_array_add(a, lun_json(s->sorted[i]));
		json_object_object_add(out, "luns", a);
		json_object_object_add(out, "more", json_object_new_boolean(end < s->nsorted));
		if (end < s->nsorted) {
			char *c = cursor_of(s->sorted[end - 1]);
			json_object_object_add(out, "cursor", c ? json_object_new_string(c) : NULL);
			free(c);
		}
	}
	if (f->connections) {
		a = json_object_new_array();
		for (size_t i = 0; i < s->nconns; i++)
			json_object_array_add(a, conn_json(&s->conns[i]));
		json_object_object_add(out, "connections", a);
	}
	if (f->portals) {
		a = json_object_new_array();
		for (size_t i = 0; i < s->nportals; i++)
			json_object_array_add(a, portal_json(&s->portals[i]));
		json_object_object_add(out, "portals", a);
	}
	if (f->rdma_devices)
		json_object_object_add(out, "rdma_devices", json_object_get(s->rdma_devices));
	if (f->reactors) {
		a = json_object_new_array();
		for (size_t i = 0; i < s->nreactors; i++) {
			const struct stats_reactor_row *r = &s->reactors[i];
			json_object *o = json_object_new_object();
			add_u(o, "reactor", r->reactor);
			add_u(o, "connections", r->connections);
			add_u(o, "buffer_pool_bytes", r->pool_bytes);
			add_u(o, "buffers_in_use", r->pool_in_use);
			json_object_array_add(a, o);
		}
		json_object_object_add(out, "reactors", a);
	}
	stats_snap_free(s);
	return 0;
}
