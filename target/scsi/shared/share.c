/*
 * Reservations shared by every target serving the same store (the design's
 * seam 8, "in the cluster"; docs/cluster.md): an RBD image behind several
 * gateways is one LU with one reservation state, whichever gateway a
 * command comes through.  The state is the store's shared object "state"
 * (shared.h: stored by compare-and-set, every gateway told); here is what
 * reservations make of it: a change is pr.c's, unchanged, tried on a copy
 * of the LU's state, and its unit attentions and aborts (pr.c's notes) go
 * to every gateway's nexuses.  PR IN, the conflict check of each command
 * and the I/O path read the LU's copy as for any LU.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/log.h"
#include "target/scsi/pr/pr.h"
#include "target/scsi/pr/pr_state.h"
#include "target/scsi/scsi_int.h"
#include "target/scsi/shared/shared.h"

enum { OP_PR_OUT, OP_RESERVE, OP_RELEASE, OP_RESET };

static int pr_install(void *owner, const char *text, size_t len, char *err, size_t errlen)
{
	struct scsi_lu *lu = owner;
	return pr_load(lu->pr, text, len, err, errlen);
}

/* The notes a change raised, as JSON: [{"port", "asc", "abort"}]. */
static char *notes_json(const struct pr_note *notes, unsigned n)
{
	json_object *a = json_object_new_array();
	char *out = NULL;
	for (unsigned i = 0; a && i < n; i++) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "port", json_object_new_string(notes[i].port));
		json_object_object_add(e, "asc", json_object_new_int(notes[i].asc));
		json_object_object_add(e, "abort", json_object_new_boolean(notes[i].abort));
		json_object_array_add(a, e);
	}
	if (a)
		out = strdup(json_object_to_json_string_ext(a, JSON_C_TO_STRING_PLAIN));
	json_object_put(a);
	return out;
}

static char *pr_change(void *owner, struct shared_job *j, char **notes)
{
	struct scsi_lu *lu = owner;
	pthread_mutex_lock(&lu->mu);
	struct scsi_pr *copy = pr_copy(lu->pr);
	pthread_mutex_unlock(&lu->mu);
	if (!copy) {
		shared_answer_sense(j, lu, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		return NULL;
	}
	struct buf params = { .data = j->params, .len = j->plen, .cap = j->plen };
	struct scsi_cmd fake = { .lu = lu, .nexus = j->has_nexus ? &j->nexus : NULL,
				 .buf = j->plen ? &params : NULL, .dout_len = j->plen, .status = SCSI_GOOD };
	memcpy(fake.cdb, j->cdb, sizeof(j->cdb));
	switch (j->op) {
	case OP_PR_OUT: pr_out(copy, &fake); break;
	case OP_RESERVE: pr_reserve(copy, &fake); break;
	case OP_RELEASE: pr_release(copy, &fake); break;
	case OP_RESET: pr_reset(copy, fake.nexus, j->flag); break;
	}
	j->status = fake.status;
	memcpy(j->sense, fake.sense, sizeof(j->sense));
	j->sense_len = fake.sense_len;
	char *text = NULL;
	if (j->status == SCSI_GOOD) {
		struct pr_note *n;
		unsigned nn = pr_take_notes(copy, &n);
		if (j->op == OP_RESET && j->arg) {
			/* A reset raises no note of pr.c's: its unit attention (and aborts), for every nexus of the others. */
			struct pr_note all = { .port = "*", .asc = *(uint16_t *)j->arg, .abort = !j->flag };
			*notes = notes_json(&all, 1);
			nn = 1;
			j->remote_only = true;
		} else {
			*notes = nn ? notes_json(n, nn) : NULL;
		}
		free(n);
		text = pr_text(copy);
		if (!text || (nn && !*notes)) {
			free(text);
			free(*notes);
			*notes = NULL;
			text = NULL;
			shared_answer_sense(j, lu, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		}
	}
	pr_destroy(copy);
	return text;
}

/* Another gateway's (or this one's) notes to this LU's nexuses ("*": every one): bounded, malformed skipped. */
static void pr_deliver_notes(void *owner, const char *text)
{
	struct scsi_lu *lu = owner;
	json_tokener *tok = json_tokener_new_ex(4);
	json_object *a = tok ? json_tokener_parse_ex(tok, text, (int)strlen(text)) : NULL;
	size_t k = json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
	struct pr_note *notes = k && k <= 4 * PR_STATE_MAX_REGS ? calloc(k, sizeof(*notes)) : NULL;
	unsigned n = 0;
	for (size_t i = 0; notes && i < k; i++) {
		json_object *e = json_object_array_get_idx(a, i), *port, *asc, *ab;
		if (!json_object_object_get_ex(e, "port", &port) || !json_object_is_type(port, json_type_string) ||
		    !json_object_object_get_ex(e, "asc", &asc))
			continue;
		snprintf(notes[n].port, sizeof(notes[n].port), "%s", json_object_get_string(port));
		notes[n].asc = (uint16_t)json_object_get_int(asc);
		notes[n].abort = json_object_object_get_ex(e, "abort", &ab) && json_object_get_boolean(ab);
		n++;
	}
	unsigned kept = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!strcmp(notes[i].port, "*"))
			lu_everyone(lu, notes[i].asc, notes[i].abort);
		else
			notes[kept++] = notes[i];
	}
	pr_deliver(lu->pr, notes, kept);
	free(notes);
	json_object_put(a);
	if (tok)
		json_tokener_free(tok);
}

static const struct shared_kind pr_kind = {
	.what = "reservations",
	.install = pr_install,
	.change = pr_change,
	.deliver = pr_deliver_notes,
};

/* ------------------------------------------------------------------------ */
/* The LU's state operations, shared (pr/local.c has the local ones). */

static void shared_pr_out(struct scsi_cmd *cmd)
{
	shared_submit_cmd(cmd->lu->share, OP_PR_OUT, cmd);
}

static void shared_reserve(struct scsi_cmd *cmd)
{
	shared_submit_cmd(cmd->lu->share, OP_RESERVE, cmd);
}

static void shared_release(struct scsi_cmd *cmd)
{
	shared_submit_cmd(cmd->lu->share, OP_RELEASE, cmd);
}

/*
 * Under lu->mu: an SPC-2 reservation a reset or a lost nexus releases, and
 * a reset's unit attention (SAM-5: every I_T nexus of the LU, through every
 * gateway) and its aborts.  Here at once (the next command through this
 * gateway must not meet the reservation; the caller gives the unit
 * attention to this gateway's nexuses), then everywhere: the change
 * compares the LU's copy with the stored state, which still holds it, and
 * tells the other gateways.
 */
static void shared_reset(struct scsi_lu *lu, const struct scsi_nexus *nexus, bool nexus_loss_only, uint16_t ua,
			 struct scsi_wait *w)
{
	bool held = pr_active(lu->pr);
	if (!held && !ua)
		return;
	uint16_t *arg = NULL;
	if (ua && (arg = malloc(sizeof(*arg))))
		*arg = ua;
	if (held)
		pr_reset(lu->pr, nexus, nexus_loss_only);
	shared_submit(lu->share, OP_RESET, nexus, nexus_loss_only, arg, w);
}

const struct lu_state_ops lu_state_shared = {
	.pr_out = shared_pr_out,
	.reserve = shared_reserve,
	.release = shared_release,
	.reset = shared_reset,
};

int share_attach(struct scsi_lu *lu, const char *name, const char *naa)
{
	char desc[400], err[512];
	json_object *d = shared_desc_new();
	if (d) {
		snprintf(desc, sizeof(desc), "%s", json_object_to_json_string_ext(d, JSON_C_TO_STRING_PLAIN));
		json_object_put(d);
	}
	pr_set_shared(lu->pr, lu->serial, naa, name);
	char *init = pr_text(lu->pr);
	int rc = d && init ? shared_open(lu->bs, "state", NULL, &pr_kind, lu, &lu->mu, name, init, desc, &lu->share,
					 err, sizeof(err))
			   : -ENOMEM;
	free(init);
	if (rc) {
		log_warn("reservations of %s: their shared state cannot be kept (%s); PERSISTENT RESERVE, RESERVE and "
			 "RELEASE are refused on it", name, rc == -ENOMEM ? "out of memory" : err);
		return rc;
	}
	lu->state = &lu_state_shared;
	log_info("reservations of %s: shared with every gateway serving it", name);
	return 0;
}

/* The target names a sharer's description lists, as one JSON text ("[]" when it lists none). */
static const char *targets_of(json_object *desc)
{
	json_object *ts;
	if (!json_object_object_get_ex(desc, "targets", &ts) || !json_object_is_type(ts, json_type_array))
		return "[]";
	return json_object_to_json_string_ext(ts, JSON_C_TO_STRING_PLAIN);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Every gateway of an image must serve it under the same target name(s):
 * the LU's relative port ids and its ALUA states are those of one SCSI
 * target, and a second name would make a second target with the same LU.
 * The names go into this gateway's description on the list of sharers,
 * and a gateway that lists others is in the way (the dead ones were fenced
 * and left the list first).  Names as last written are not asked about
 * again: a live change that leaves them costs the cluster nothing.
 */
int scsi_lu_share_targets(struct scsi_lu *lu, const char **iqns, size_t n, char *err, size_t errlen)
{
	if (!lu->share)
		return 0;
	qsort(iqns, n, sizeof(*iqns), by_name);
	json_object *d = shared_desc_new(), *ts = json_object_new_array();
	for (size_t i = 0; ts && i < n; i++)
		if (!i || strcmp(iqns[i], iqns[i - 1]))
			json_object_array_add(ts, json_object_new_string(iqns[i]));
	if (!d || !ts) {
		json_object_put(ts);
		json_object_put(d);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	json_object_object_add(d, "targets", ts);
	const char *desc = json_object_to_json_string_ext(d, JSON_C_TO_STRING_PLAIN);
	if (lu->share_desc && !strcmp(lu->share_desc, desc)) {
		json_object_put(d);
		return 0;
	}
	const char *what = backstore_name(lu->bs);
	struct bs_sharer *live = NULL;
	size_t nl = 0;
	int rc = n ? shared_others(lu->share, &live, &nl) : 0;
	if (rc)
		snprintf(err, errlen, "backstore %s: reading the list of gateways: %s", what, strerror(-rc));
	if (!rc && n) {
		const char *mine = targets_of(d);
		for (size_t i = 0; i < nl && !rc; i++) {
			json_object *o = json_tokener_parse(live[i].desc);
			const char *theirs = o ? targets_of(o) : "[]";
			if (strcmp(theirs, "[]") && strcmp(theirs, mine)) {
				snprintf(err, errlen, "backstore %s: its image is served as target %s by gateway %s (%s) "
					 "already, here as %s: every gateway of an image must serve it under the same "
					 "target name", what, theirs, live[i].desc, live[i].addr, mine);
				rc = -EEXIST;
			}
			json_object_put(o);
		}
		free(live);
	}
	if (!rc && (rc = shared_describe(lu->share, desc)))
		snprintf(err, errlen, "backstore %s: telling the other gateways which targets serve it: %s", what,
			 strerror(-rc));
	if (!rc) {
		free(lu->share_desc);
		lu->share_desc = strdup(desc); /* NULL without memory: asked again next time */
	}
	json_object_put(d);
	return rc;
}

struct json_object *scsi_lu_share_json(struct scsi_lu *lu)
{
	return lu->share ? shared_json(lu->share) : NULL;
}

void share_detach(struct scsi_lu *lu)
{
	if (!lu->share)
		return;
	shared_close(lu->share);
	lu->share = NULL;
	free(lu->share_desc);
	lu->share_desc = NULL;
	lu->state = &lu_state_local;
}
