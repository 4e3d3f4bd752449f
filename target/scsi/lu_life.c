/*
 * An LU's life: made from a backstore with what keeps state on it
 * attached (reservations and their APTPL file, the sanitize marker, the
 * state shared with other gateways), told of task management and nexus
 * loss, and destroyed.  Above every room of target/scsi, so none of them
 * calls up for it; the LU itself is lu/lu.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "target/scsi/cmd/sanitize.h"
#include "target/scsi/copy/rod.h"
#include "target/scsi/pr/pr.h"
#include "target/scsi/scsi_int.h"

static void copy_id(char *dst, size_t cap, const char *src, const char *def)
{
	size_t i, n = 0;

	if (!src || !*src)
		src = def;
	/* SPC-4 4.4.1: printable ASCII only. */
	for (i = 0; src[i] && n + 1 < cap; i++)
		if (src[i] >= 0x20 && src[i] <= 0x7e)
			dst[n++] = src[i];
	dst[n] = 0;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * pr.c names a port as "<name>,i,0x<ISID>", or by the bare initiator name
 * when a TransportID named only the device: then every port of it.  iSCSI
 * names compare case-insensitively (ISID hex too).
 */
static bool nexus_named(const struct lu_nexus *n, const char *who)
{
	if (strcasestr(who, ",i,0x"))
		return strcasecmp(n->initiator_port, who) == 0;
	return strcasecmp(n->initiator_name, who) == 0;
}

static void lu_pr_ua(void *ctx, const char *initiator_port, uint16_t asc)
{
	struct scsi_lu *lu = ctx;

	/* Called by pr.c with lu->mu held. */
	for (struct lu_nexus *n = lu->nexuses; n; n = n->next)
		if (nexus_named(n, initiator_port))
			lu_ua_add(n, asc);
}

/*
 * PREEMPT AND ABORT: commands of the preempted nexuses that have not started
 * executing end with TASK ABORTED (TAS is 1 in the control page).  Commands
 * already in the backstore finish; they were ahead of the PERSISTENT RESERVE OUT.
 */
static void lu_pr_abort(void *ctx, const char *initiator_port)
{
	struct scsi_lu *lu = ctx;

	for (struct lu_nexus *n = lu->nexuses; n; n = n->next)
		if (nexus_named(n, initiator_port))
			__atomic_store_n(&n->abort_gen, (uint16_t)(n->abort_gen + 1), __ATOMIC_RELEASE);
	__atomic_add_fetch(&lu->pr_aborts, 1, __ATOMIC_RELEASE);
}

/* The NAA designator in hex: it names the LU's APTPL state file. */
static const char *lu_naa_hex(const struct scsi_lu *lu, char out[33])
{
	uint8_t id[16];

	lu_naa(lu, id);
	for (int i = 0; i < 16; i++)
		snprintf(out + 2 * i, 3, "%02x", id[i]);
	return out;
}

/* The store was resized by someone else (an RBD image): every nexus hears of it. */
static void lu_resized(void *arg)
{
	scsi_lu_capacity_changed(arg);
}

int scsi_lu_create(struct backstore *bs, const struct scsi_lu_params *p, struct scsi_lu **out)
{
	struct scsi_lu_params none = { 0 };
	struct scsi_lu *lu;
	uint32_t bsz;

	if (!bs || !out)
		return -EINVAL;
	if (!p)
		p = &none;
	bsz = backstore_block_size(bs);
	if (bsz < 512 || (bsz & (bsz - 1)))
		return -EINVAL;
	lu = calloc(1, sizeof(*lu));
	if (!lu)
		return -ENOMEM;
	lu->pr = pr_create(lu_pr_ua, lu);
	if (!lu->pr) {
		free(lu);
		return -ENOMEM;
	}
	pr_set_abort(lu->pr, lu_pr_abort, lu);
	pthread_mutex_init(&lu->mu, NULL);
	lu->bs = bs;
	lu->block_size = bsz;
	while ((1u << lu->block_shift) < bsz)
		lu->block_shift++;
	lu->thin = backstore_thin(bs);
	lu->wce = backstore_write_cache(bs);
	const struct backstore_kind *kind = backstore_kind(backstore_type(bs));
	copy_id(lu->vendor, sizeof(lu->vendor), p->vendor, "ISERT");
	copy_id(lu->product, sizeof(lu->product), p->product, kind ? kind->product : "DISK");
	copy_id(lu->revision, sizeof(lu->revision), p->revision, "0001");
	if (p->serial && *p->serial) {
		copy_id(lu->serial, sizeof(lu->serial), p->serial, "0");
	} else if (backstore_serial(bs)) {
		/* The store's own identity: every target serving it reports the same LU. */
		copy_id(lu->serial, sizeof(lu->serial), backstore_serial(bs), "0");
	} else {
		/* A stable serial from the backstore name, so the NAA id survives restarts. */
		const char *nm = p->name ? p->name : backstore_name(bs);
		snprintf(lu->serial, sizeof(lu->serial), "%016llx",
			 (unsigned long long)fnv1a(nm ? nm : "", 0xcbf29ce484222325ull));
	}
	lu->naa_hi = fnv1a(lu->serial, 0xcbf29ce484222325ull);
	lu->naa_lo = fnv1a(lu->serial, 0x84222325cbf29ce4ull);
	lu->state = &lu_state_local;
	if (backstore_shared(bs)) {
		/* The reservations live where every target serving the store sees them (APTPL is implicit). */
		char naa[33];
		share_attach(lu, p->name ? p->name : backstore_name(bs), lu_naa_hex(lu, naa));
	} else if (p->state_dir) {
		char naa[33];
		int rc = pr_persist_init(lu->pr, p->state_dir, lu->serial, lu_naa_hex(lu, naa),
					 p->name ? p->name : backstore_name(bs));

		if (rc) {
			scsi_lu_destroy(lu);
			return rc;
		}
	}
	if (!backstore_shared(bs) && p->state_dir && !backstore_kind_has(backstore_type(bs), BS_KIND_VOLATILE)) {
		char naa[33];
		sanitize_lu_init(lu, p->state_dir, lu_naa_hex(lu, naa));
	}
	backstore_on_resize(bs, lu_resized, lu);
	*out = lu;
	return 0;
}

void scsi_lu_destroy(struct scsi_lu *lu)
{
	struct lu_nexus *n, *next;

	if (!lu)
		return;
	backstore_on_resize(lu->bs, NULL, NULL);
	rod_lu_gone(lu);
	sanitize_lu_destroy(lu);
	share_detach(lu);
	for (n = lu->nexuses; n; n = next) {
		next = n->next;
		free(n);
	}
	pr_destroy(lu->pr);
	pthread_mutex_destroy(&lu->mu);
	free(lu);
}

struct lu_nexus *scsi_lu_itl(struct scsi_lu *lu, const struct scsi_nexus *nx)
{
	pthread_mutex_lock(&lu->mu);
	struct lu_nexus *n = lu_nexus_get(lu, nx);
	/* Taken now, so the first command finds alua_gen set and needs no lock either. */
	alua_ua_sync(n, nx);
	pthread_mutex_unlock(&lu->mu);
	return n;
}

static void lu_clear_prevent(struct scsi_lu *lu)
{
	struct lu_nexus *n;

	for (n = lu->nexuses; n; n = n->next)
		n->prevent = false;
}

void scsi_lu_event(struct scsi_lu *lu, const struct scsi_nexus *nexus, enum scsi_lu_event ev, struct scsi_wait *w)
{
	struct lu_nexus *n, **pp;

	pthread_mutex_lock(&lu->mu);
	switch (ev) {
	case SCSI_EV_LU_RESET:
		lu->state->reset(lu, nexus, false, ASC_BUS_DEVICE_RESET, w);
		lu_clear_prevent(lu);
		lu_ua_all(lu, NULL, ASC_BUS_DEVICE_RESET);
		break;
	case SCSI_EV_TARGET_WARM_RESET:
		lu->state->reset(lu, nexus, false, ASC_BUS_RESET, w);
		lu_clear_prevent(lu);
		lu_ua_all(lu, NULL, ASC_BUS_RESET);
		break;
	case SCSI_EV_TARGET_COLD_RESET:
		lu->state->reset(lu, nexus, false, ASC_POWER_ON_RESET, w);
		lu_clear_prevent(lu);
		/* prepare reads these without the mutex */
		__atomic_store_n(&lu->stopped, false, __ATOMIC_RELAXED);
		__atomic_store_n(&lu->ejected, false, __ATOMIC_RELAXED);
		lu_ua_all(lu, NULL, ASC_POWER_ON_RESET);
		break;
	case SCSI_EV_LOGOUT:
		if (nexus)
			lu->state->reset(lu, nexus, true, 0, w);
		break;
	case SCSI_EV_NEXUS_LOSS:
		if (!nexus)
			break;
		lu->state->reset(lu, nexus, true, 0, w);
		rod_nexus_gone(lu, nexus->id);
		for (pp = &lu->nexuses; (n = *pp); pp = &n->next) {
			if (n->id == nexus->id) {
				*pp = n->next;
				free(n);
				break;
			}
		}
		break;
	case SCSI_EV_CLEAR_TASK_SET:
		lu_ua_all(lu, nexus, ASC_COMMANDS_CLEARED_BY_OTHER);
		break;
	}
	pthread_mutex_unlock(&lu->mu);
	/* A reset revokes the LU's ROD tokens (a copy reading one stops). */
	if (ev == SCSI_EV_LU_RESET || ev == SCSI_EV_TARGET_WARM_RESET || ev == SCSI_EV_TARGET_COLD_RESET)
		rod_lu_reset(lu);
}
