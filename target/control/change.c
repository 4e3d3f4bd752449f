/*
 * An edit method's change, planned, then answered (dry_run) or carried
 * out: the one path of every change to the configuration (rpc_int.h says
 * what an edit may give).  A refusal names the same field with the same
 * words as an error in the file would: the document edited is loaded by
 * the configuration loader, an object added is checked by its code.
 */
#include <errno.h>
#include <string.h>

#include "common/log.h"
#include "target/control/control.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/fleet/fleet.h"
#include "target/runtime/runtime.h"

struct change {
	json_object *doc;              /* the running document, edited */
	struct config *whole;          /* or a whole configuration */
	enum { ADD_NONE, ADD_BACKSTORE, ADD_LUN } add; /* or one object added, and nothing else */
	json_object *obj;
	size_t ti, gi;
};

/* Put the object added where it goes in the document. */
static void fold_addition(struct change *ch)
{
	if (ch->add == ADD_BACKSTORE) {
		json_object_array_add(doc_array(ch->doc, "backstores"), ch->obj);
	} else if (ch->add == ADD_LUN) {
		const struct config *r = rt_config();
		json_object *t = doc_find(doc_array(ch->doc, "targets"), "iqn", r->targets[ch->ti].iqn, 0, NULL);
		json_object *g = doc_find(doc_array(t, "tpgs"), "tag", NULL, r->targets[ch->ti].tpgs[ch->gi].tag, NULL);
		json_object_array_add(doc_array(g, "luns"), ch->obj);
	}
	ch->add = ADD_NONE;
	ch->obj = NULL;
}

json_object *change_doc(struct rpc_call *c, struct change *ch)
{
	if (!ch->doc && !(ch->doc = config_to_obj(rt_config()))) {
		rpc_fail(c, RPC_INTERNAL, "out of memory");
		return NULL;
	}
	fold_addition(ch);
	return ch->doc;
}

void change_whole(struct change *ch, struct config *n)
{
	config_free(ch->whole);
	ch->whole = n;
}

static void change_add(struct change *ch, int what, size_t ti, size_t gi, json_object *obj)
{
	ch->add = what;
	ch->obj = obj;
	ch->ti = ti;
	ch->gi = gi;
	if (ch->doc)
		fold_addition(ch);
}

void change_add_backstore(struct change *ch, json_object *b)
{
	change_add(ch, ADD_BACKSTORE, 0, 0, b);
}

void change_add_lun(struct change *ch, size_t ti, size_t gi, json_object *l)
{
	change_add(ch, ADD_LUN, ti, gi, l);
}

static void change_clear(struct change *ch)
{
	config_wipe_secrets(ch->doc); /* the running document's secrets, and those the change brought */
	json_object_put(ch->doc);
	json_object_put(ch->obj);
	config_free(ch->whole);
}

/* The plan of what the edit gave (0, or -1 with c's error set). */
static int plan(struct rpc_call *c, struct change *ch, struct apply_plan **p)
{
	char err[768] = "";
	int rc;
	if (ch->add == ADD_BACKSTORE) {
		rc = apply_plan_backstore(ch->obj, p, err, sizeof(err));
	} else if (ch->add == ADD_LUN) {
		rc = apply_plan_lun(ch->ti, ch->gi, ch->obj, p, err, sizeof(err));
	} else if (ch->whole) {
		rc = apply_plan_whole(ch->whole, p, err, sizeof(err));
		ch->whole = NULL;
	} else {
		/* The document edited, loaded with the file's rules. */
		struct config *n = NULL;
		json_object *doc = change_doc(c, ch);
		if (!doc)
			return -1;
		rc = config_load_doc(doc, "the change", &n, err, sizeof(err));
		if (rc)
			return rpc_fail(c, rc == -ENOMEM ? RPC_INTERNAL : RPC_REFUSED, "%s", err);
		rc = apply_plan_whole(n, p, err, sizeof(err));
	}
	if (rc)
		return rpc_fail(c, rc == -ENOMEM ? RPC_INTERNAL : RPC_REFUSED, "%s", err[0] ? err : strerror(-rc));
	return 0;
}

int rpc_change(const struct rpc_method *m, struct rpc_call *c)
{
	struct change ch = { 0 };
	struct apply_plan *p = NULL;
	struct apply_result res = { 0 };
	bool dry_run = rpc_bool(c, "dry_run") || rpc_plan_only;
	char err[768] = "";
	/*
	 * In a fleet the edit changes the fleet's document (an ALUA state is
	 * shared already, docs/cluster.md), made on the newest generation: one
	 * this gateway has not applied yet would refuse it.
	 */
	bool fleet = fleet_active() && strcmp(m->name, "alua.set");
	if (fleet)
		fleet_catch_up();
	int rc = m->edit(c, &ch);
	if (!rc && fleet) {
		json_object *cfg = ch.whole ? config_to_obj(ch.whole) : json_object_get(change_doc(c, &ch));
		rc = cfg ? fleet_edit(c, cfg, dry_run) : rpc_fail(c, RPC_INTERNAL, "out of memory");
		json_object_put(cfg);
		change_clear(&ch);
		return rc;
	}
	if (!rc)
		rc = plan(c, &ch, &p);
	change_clear(&ch);
	if (!rc && !dry_run && (rc = apply_execute(p, &res, err, sizeof(err))))
		rc = rpc_fail(c, RPC_REFUSED, "%s", err[0] ? err : strerror(-rc));
	if (rc) {
		apply_plan_free(p);
		return -1;
	}
	json_object *steps = json_object_get(apply_plan_steps(p)), *restart = json_object_get(apply_plan_restart(p));
	apply_plan_free(p);
	c->unchanged = dry_run || (!json_object_array_length(steps) && !json_object_array_length(restart));
	c->result = json_object_new_object();
	json_object_object_add(c->result, "dry_run", json_object_new_boolean(dry_run));
	json_object_object_add(c->result, "plan", steps);
	json_object_object_add(c->result, "restart_needed", restart);
	if (!dry_run) {
		json_object_object_add(c->result, "sessions_closed", json_object_new_int(res.sessions_closed));
		json_object_object_add(c->result, "sessions_with_new_luns", json_object_new_int(res.maps_changed));
	}
	json_object_object_add(c->result, "generation",
			       json_object_new_uint64(rpc_st.generation + (c->unchanged ? 0 : 1)));
	return 0;
}
