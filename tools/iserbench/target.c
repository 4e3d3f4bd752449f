/*
 * --target-stats: isertd's view of the run next to iserbench's own.  The
 * target's `stats` (docs/stats.md) for our initiator name, LUNs section
 * only, is sampled at each interval's end; the differences of its latency
 * histograms are what the target spent on the interval's commands, from
 * their arrival to their status, so client minus target is the network and
 * the initiator.
 */
#include <json-c/json.h>
#include <string.h>

#include "ib.h"
#include "lun.h"

/* The engine waits for the answer: keep it short, a missed sample only leaves an interval without figures. */
#define TGT_TIMEOUT_MS 2000

/* One page's rows of the luns section into s. */
static void add_page(struct ib_tgt_snap *s, json_object *luns)
{
	json_object *v;
	for (size_t i = 0; i < json_object_array_length(luns); i++) {
		json_object *l = json_object_array_get_idx(luns, i), *c, *lat = NULL;
		if (json_object_object_get_ex(l, "commands", &c)) {
			if (json_object_object_get_ex(c, "read", &v))
				s->reads += (uint64_t)json_object_get_uint64(v);
			if (json_object_object_get_ex(c, "write", &v))
				s->writes += (uint64_t)json_object_get_uint64(v);
		}
		json_object_object_get_ex(l, "latency", &lat);
		if (lat && json_object_object_get_ex(lat, "read", &v))
			lat_hist_add_json(&s->r, v);
		if (lat && json_object_object_get_ex(lat, "write", &v))
			lat_hist_add_json(&s->w, v);
	}
}

int ib_tgt_sample(const char *sock, struct ib_tgt_snap *s, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	json_object *p = json_object_new_object(), *secs = json_object_new_array(), *rsp, *res, *luns, *e;
	json_object_array_add(secs, json_object_new_string("luns"));
	json_object_object_add(p, "sections", secs);
	json_object_object_add(p, "initiator", json_object_new_string(ib_lun_initiator()));
	/* The luns section comes in pages (docs/admin.md); one initiator's rows are nearly always one. */
	for (json_object *next = json_object_get(p); next; next = admin_stats_next(p, res), json_object_put(rsp)) {
		if (admin_rpc(sock, "stats", next, TGT_TIMEOUT_MS, &rsp, err, errlen)) {
			json_object_put(p);
			return -1;
		}
		if (!json_object_object_get_ex(rsp, "result", &res) || !json_object_object_get_ex(res, "luns", &luns)) {
			json_object *msg = NULL;
			if (json_object_object_get_ex(rsp, "error", &e))
				json_object_object_get_ex(e, "message", &msg);
			snprintf(err, errlen, "isertd at %s: stats: %s", sock,
				 msg ? json_object_get_string(msg) : "no luns in the answer");
			json_object_put(rsp);
			json_object_put(p);
			return -1;
		}
		add_page(s, luns);
	}
	json_object_put(p);
	s->ok = true;
	return 0;
}

void ib_tgt_interval(struct ib_stats *st, const struct ib_tgt_snap *now, const struct ib_tgt_snap *before)
{
	if (!now->ok || !before->ok)
		return;
	st->tgt = true;
	lat_hist_delta(&st->tgt_r, &now->r, &before->r);
	lat_hist_delta(&st->tgt_w, &now->w, &before->w);
}
