/*
 * A fleet's changes on the admin thread (docs/fleet.md): every edit method
 * of a gateway in a fleet changes the fleet's document instead of the
 * running configuration alone.  The document the edit makes is planned on
 * every live gateway (each answers from target/fleet/fleet.c), written once
 * by compare-and-set, then applied by each gateway with the same plan and
 * execution as a local change (apply.c); the answer lists every gateway and
 * its result.  Also the fleet's own methods: status, membership, the
 * document, a gateway's configuration to leave with.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "target/config/fleet.h"
#include "target/control/control.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/fleet/fleet.h"
#include "target/runtime/runtime.h"

#define FLEET_APPLY_WAIT_S 30   /* how long an edit waits for every live gateway to run its generation */

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;
	return json_object_is_type(o, json_type_object) && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* This gateway runs doc (its own configuration composed from it): 0, or <0 with err. */
static int apply_doc(json_object *doc, uint64_t gen, char *err, size_t errlen)
{
	json_object *c = NULL;
	struct config *n = NULL;
	struct apply_plan *p = NULL;
	struct apply_result res;
	int rc = config_fleet_compose(doc, fleet_gateway(), &c, err, errlen);
	if (rc == -ENOENT) {
		/* Removed from the fleet: it keeps its own global keys and serves nothing of the fleet's. */
		json_object *now = config_to_obj(rt_config()), *g = get(now, "global");
		c = json_object_new_object();
		json_object_object_add(c, "global", g ? json_object_get(g) : json_object_new_object());
		json_object_put(now);
		log_err("fleet: gateway %s is not in the fleet's document of generation %llu (removed with iserctl "
			"gateway remove): it serves none of the fleet's targets now; give it a file of its own "
			"(iserctl cluster export) or add it to the fleet again", fleet_gateway(), (unsigned long long)gen);
		rc = 0;
	}
	if (!rc)
		fleet_cmdline_into(c);
	char origin[64];
	snprintf(origin, sizeof(origin), "the fleet's generation %llu", (unsigned long long)gen);
	if (!rc)
		rc = config_load_doc(c, origin, &n, err, errlen);
	json_object_put(c);
	if (!rc && !(rc = apply_plan_whole(n, &p, err, errlen)) && !(rc = apply_execute(p, &res, err, errlen))) {
		size_t steps = json_object_array_length(apply_plan_steps(p));
		if (steps)
			rpc_st.generation++;
		log_info("fleet: generation %llu applied (%zu change%s here)%s", (unsigned long long)gen, steps,
			 steps == 1 ? "" : "s", json_object_array_length(apply_plan_restart(p)) ?
			 "; keys that need a restart keep their running values" : "");
	}
	apply_plan_free(p);
	return rc;
}

void fleet_catch_up(void)
{
	json_object *doc = NULL;
	uint64_t gen;
	char err[768] = "";
	int rc = fleet_newer(&doc, &gen, err, sizeof(err));
	if (rc < 0 && rc != -ENOTCONN)
		log_warn("fleet: %s", err);
	if (rc <= 0)
		return;
	rc = apply_doc(doc, gen, err, sizeof(err));
	if (rc)
		log_err("fleet: generation %llu cannot be applied here: %s; this gateway keeps what it runs",
			(unsigned long long)gen, err);
	fleet_applied_set(doc, gen, rc ? err : NULL);
	json_object_put(doc);
}

static json_object *answer_of(json_object *answers, const char *gw)
{
	for (size_t i = 0; answers && i < json_object_array_length(answers); i++) {
		json_object *a = json_object_array_get_idx(answers, i);
		const char *n = json_object_get_string(get(a, "gateway"));
		if (n && !strcmp(n, gw))
			return a;
	}
	return NULL;
}

/* Each gateway of doc with what it answered last (ask), or "not running". */
static json_object *gateways_of(json_object *doc, json_object *answers, uint64_t gen)
{
	json_object *out = json_object_new_array(), *gws = get(doc, "gateways");
	for (size_t i = 0; gws && i < json_object_array_length(gws); i++) {
		const char *n = json_object_get_string(get(json_object_array_get_idx(gws, i), "name"));
		json_object *a = answer_of(answers, n), *o = json_object_new_object();
		json_object_object_add(o, "name", json_object_new_string(n));
		json_object_object_add(o, "running", json_object_new_boolean(a != NULL));
		json_object_object_add(o, "generation", a ? json_object_get(get(a, "generation")) : NULL);
		json_object_object_add(o, "ok", a ? json_object_get(get(a, "ok")) : NULL);
		json_object_object_add(o, "error", a ? json_object_get(get(a, "error")) : NULL);
		json_object_object_add(o, "cached", a ? json_object_get(get(a, "cached")) : NULL);
		json_object_object_add(o, "fenced", json_object_new_boolean(a && json_object_get_boolean(get(a, "fenced"))));
		if (gen) {
			const char *r = !a ? "not running" :
					(uint64_t)json_object_get_int64(get(a, "generation")) >= gen ? "applied" :
					json_object_get_boolean(get(a, "ok")) ? "pending" : "failed";
			json_object_object_add(o, "result", json_object_new_string(r));
		}
		json_object_array_add(out, o);
	}
	return out;
}

/* Ask until every live gateway runs gen, or has failed it, or FLEET_APPLY_WAIT_S passed. */
static json_object *wait_applied(json_object *doc, uint64_t gen)
{
	json_object *list = NULL;
	time_t until = time(NULL) + FLEET_APPLY_WAIT_S;
	/* A gateway applies within milliseconds mostly: ask again soon, then less often. */
	useconds_t pause = 10 * 1000;
	for (;;) {
		struct fleet_answers a;
		char err[256];
		fleet_ask(&a, err, sizeof(err));
		json_object_put(list);
		list = gateways_of(doc, a.answers, gen);
		fleet_answers_free(&a);
		bool pending = false;
		for (size_t i = 0; i < json_object_array_length(list); i++)
			pending |= !strcmp(json_object_get_string(get(json_object_array_get_idx(list, i), "result")),
					   "pending");
		if (!pending || time(NULL) >= until)
			return list;
		usleep(pause);
		pause = pause < 200 * 1000 ? pause * 2 : pause;
	}
}

/* Plan nd on every live gateway, then (unless dry_run) write it and wait for them: the edit's answer in c. */
static int propose(struct rpc_call *c, json_object *nd, bool dry_run)
{
	uint64_t base;
	json_object *old = fleet_applied(&base), *mine = NULL;
	char err[1024] = "";
	int rc = config_fleet_check(nd, err, sizeof(err));
	if (rc) {
		json_object_put(old);
		return rpc_fail(c, RPC_REFUSED, "the fleet's document would be wrong: %s", err);
	}
	if (json_object_equal(old, nd)) {
		json_object_put(old);
		c->unchanged = true;
		c->result = json_object_new_object();
		json_object_object_add(c->result, "dry_run", json_object_new_boolean(dry_run));
		json_object_object_add(c->result, "plan", json_object_new_array());
		json_object_object_add(c->result, "generation", json_object_new_uint64(rpc_st.generation));
		json_object *fo = json_object_new_object();
		json_object_object_add(fo, "generation", json_object_new_uint64(base));
		json_object_object_add(fo, "gateways", json_object_new_array());
		json_object_object_add(c->result, "fleet", fo);
		return 0;
	}
	json_object_put(old);
	struct fleet_answers a;
	if ((rc = fleet_plan(nd, &a, err, sizeof(err))))
		return rpc_fail(c, RPC_UNAVAILABLE, "%s", err);
	/* Every live gateway must accept: the first refusal is the answer. */
	size_t n = 0;
	for (size_t i = 0; i < json_object_array_length(a.answers); i++) {
		json_object *x = json_object_array_get_idx(a.answers, i);
		if (!json_object_get_boolean(get(x, "ok")) && n < sizeof(err))
			n += (size_t)snprintf(err + n, sizeof(err) - n, "%sgateway %s: %s", n ? "; " : "",
					      json_object_get_string(get(x, "gateway")),
					      json_object_get_string(get(x, "error")));
		if (!strcmp(json_object_get_string(get(x, "gateway")), fleet_gateway()))
			mine = get(x, "plan");
	}
	if (a.missed && n < sizeof(err))
		n += (size_t)snprintf(err + n, sizeof(err) - n, "%s%s watch%s the document and did not answer within "
				      "%d s: stopped or hung; once its watch lapses (osd_client_watch_timeout, 30 s by "
				      "default) the fleet goes on without it", n ? "; " : "", a.missed_ids,
				      a.missed > 1 ? "" : "es", FLEET_ANSWER_S);
	if (n) {
		fleet_answers_free(&a);
		return rpc_fail(c, RPC_REFUSED, "the fleet refuses the change: %s", err);
	}
	json_object *plan = json_object_get(mine ? mine : json_object_new_array());
	json_object *fo = json_object_new_object();
	c->result = json_object_new_object();
	json_object_object_add(c->result, "dry_run", json_object_new_boolean(dry_run));
	json_object_object_add(c->result, "plan", plan);
	json_object_object_add(c->result, "fleet", fo);
	if (dry_run) {
		json_object *gws = json_object_new_array();
		for (size_t i = 0; i < json_object_array_length(a.answers); i++) {
			json_object *x = json_object_array_get_idx(a.answers, i), *g = json_object_new_object();
			json_object_object_add(g, "name", json_object_get(get(x, "gateway")));
			json_object_object_add(g, "plan", json_object_get(get(x, "plan")));
			json_object_array_add(gws, g);
		}
		json_object_object_add(fo, "generation", json_object_new_uint64(base));
		json_object_object_add(fo, "gateways", gws);
		json_object_object_add(c->result, "generation", json_object_new_uint64(rpc_st.generation));
		fleet_answers_free(&a);
		c->unchanged = true;
		return 0;
	}
	fleet_answers_free(&a);
	uint64_t now;
	if ((rc = fleet_commit(nd, base, &now, err, sizeof(err)))) {
		json_object_put(c->result);
		c->result = NULL;
		return rpc_fail(c, rc == -ERANGE ? RPC_STALE : RPC_UNAVAILABLE, "%s", err);
	}
	fleet_catch_up(); /* this gateway first: its own answer is part of the edit's */
	json_object_object_add(fo, "generation", json_object_new_uint64(now));
	json_object_object_add(fo, "gateways", wait_applied(nd, now));
	json_object_object_add(c->result, "generation", json_object_new_uint64(rpc_st.generation));
	c->unchanged = true; /* fleet_catch_up counted it */
	char who[160];
	log_info("admin (%s): fleet generation %llu written", rpc_who_label(c, who, sizeof(who)),
		 (unsigned long long)now);
	return 0;
}

int fleet_edit(struct rpc_call *c, json_object *cfg, bool dry_run)
{
	uint64_t base;
	json_object *old = fleet_applied(&base), *nd = NULL;
	char err[768] = "";
	fleet_cmdline_strip(cfg);
	int rc = config_fleet_decompose(old, fleet_gateway(), cfg, &nd, err, sizeof(err));
	json_object_put(old);
	if (rc)
		return rpc_fail(c, RPC_REFUSED, "%s", err);
	rc = propose(c, nd, dry_run);
	json_object_put(nd);
	return rc;
}

static int not_in_fleet(struct rpc_call *c)
{
	return rpc_fail(c, RPC_NOT_FOUND, "this gateway is not in a fleet (isertd --cluster POOL/NAME --gateway GW)");
}

static int m_fleet_status(struct rpc_call *c)
{
	if (!fleet_active())
		return not_in_fleet(c);
	uint64_t gen;
	json_object *doc = fleet_applied(&gen);
	struct fleet_answers a;
	char err[256] = "";
	fleet_ask(&a, err, sizeof(err));
	c->result = fleet_self_json();
	if (!answer_of(a.answers, fleet_gateway())) {
		/* Not asked through the cluster (it cannot be reached): this gateway answers for itself. */
		json_object *me = json_object_new_object(), *s = c->result;
		static const char *const keys[] = { "generation", "cached", "fenced" };
		json_object_object_add(me, "gateway", json_object_new_string(fleet_gateway()));
		for (int k = 0; k < 3; k++)
			json_object_object_add(me, keys[k], json_object_get(get(s, keys[k])));
		json_object_object_add(me, "ok", json_object_get(get(s, "ok")));
		json_object_object_add(me, "error", json_object_get(get(s, "last_error")));
		if (!a.answers)
			a.answers = json_object_new_array();
		json_object_array_add(a.answers, me);
	}
	json_object_object_add(c->result, "gateways", gateways_of(doc, a.answers, 0));
	if (a.missed)
		json_object_object_add(c->result, "not_answering", json_object_new_string(a.missed_ids));
	fleet_answers_free(&a);
	json_object_put(doc);
	return 0;
}

static int membership(struct rpc_call *c, bool add)
{
	if (!fleet_active())
		return not_in_fleet(c);
	fleet_catch_up(); /* the newest generation, as an edit (change.c) */
	uint64_t gen;
	json_object *doc = fleet_applied(&gen), *nd = NULL;
	char err[512];
	json_object_deep_copy(doc, &nd, NULL);
	json_object_put(doc);
	const char *name = rpc_str(c, "name");
	int rc = add ? config_fleet_gateway_add(nd, name, err, sizeof(err))
		     : config_fleet_gateway_remove(nd, name, err, sizeof(err));
	if (rc) {
		json_object_put(nd);
		return rpc_fail(c, rc == -ENOENT ? RPC_NOT_FOUND : RPC_REFUSED, "%s", err);
	}
	rc = propose(c, nd, rpc_bool(c, "dry_run"));
	json_object_put(nd);
	return rc;
}

static int m_gateway_add(struct rpc_call *c)
{
	return membership(c, true);
}

static int m_gateway_remove(struct rpc_call *c)
{
	return membership(c, false);
}

static int m_fleet_document(struct rpc_call *c)
{
	if (!fleet_active())
		return not_in_fleet(c);
	uint64_t gen;
	json_object *doc = fleet_applied(&gen);
	c->result = json_object_new_object();
	json_object_object_add(c->result, "generation", json_object_new_uint64(gen));
	json_object_object_add(c->result, "document", doc);
	return 0;
}

static int m_fleet_export(struct rpc_call *c)
{
	if (!fleet_active())
		return not_in_fleet(c);
	uint64_t gen;
	json_object *doc = fleet_applied(&gen), *cfg = NULL;
	char err[512];
	int rc = config_fleet_compose(doc, rpc_str(c, "gateway"), &cfg, err, sizeof(err));
	json_object_put(doc);
	if (rc)
		return rpc_fail(c, RPC_NOT_FOUND, "%s", err);
	c->result = json_object_new_object();
	json_object_object_add(c->result, "generation", json_object_new_uint64(gen));
	json_object_object_add(c->result, "config", cfg);
	return 0;
}

static const struct rpc_param p_none[] = { P_END };
static const struct rpc_param p_member[] = { P_STR("name", true), P_BOOL("dry_run"), P_END };
static const struct rpc_param p_export[] = { P_STR("gateway", true), P_END };

const struct rpc_method rpc_methods_fleet[] = {
	{ "fleet.status", m_fleet_status, NULL, false, p_none, NULL,
	  "the fleet this gateway is in: its document's place and generation, and each gateway's (running, "
	  "generation applied, last error, fenced) (docs/fleet.md)" },
	{ "fleet.gateway_add", m_gateway_add, NULL, true, p_member, NULL,
	  "add a gateway (by name) to the fleet's document; it then joins with isertd --cluster --gateway NAME" },
	{ "fleet.gateway_remove", m_gateway_remove, NULL, true, p_member, NULL,
	  "remove a gateway and its portal groups from the fleet's document: it stops serving the fleet's targets" },
	{ "fleet.document", m_fleet_document, NULL, false, p_none, NULL,
	  "the fleet's document this gateway runs, and its generation" },
	{ "fleet.export", m_fleet_export, NULL, false, p_export, NULL,
	  "a gateway's configuration as a file's (to leave the fleet: isertd -c FILE)" },
	{ NULL, NULL, NULL, false, NULL, NULL, NULL },
};
