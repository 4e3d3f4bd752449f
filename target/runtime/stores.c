/*
 * Stores: a backstore open in this process with its logical unit, counted
 * (runtime.h says who holds a reference), and the serials of the LUs open
 * (each LU of one isertd needs its own).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "target/backstore/backstore.h"
#include "target/runtime/runtime.h"
#include "target/scsi/scsi.h"

/*
 * The serials of the LUs this process has open (the loader checks the ones
 * a document decides; an rbd image's or an NVMe namespace's own identity is
 * known only once open).  A backstore of the same name may hold one while
 * its replacement opens (a change).  Admin thread and start-up only, but
 * locked: cheap, and nothing else then needs saying.
 */
struct lu_serial {
	struct lu_serial *next;
	const struct scsi_lu *lu;
	char serial[64], name[65];
};
static struct lu_serial *lu_serials;
static pthread_mutex_t lu_serials_mu = PTHREAD_MUTEX_INITIALIZER;

/* Before the LU is made: its APTPL state file is found by the serial. */
static struct lu_serial *serial_claim(const struct cfg_backstore *b, const char *serial, int *rc, char *err,
				      size_t errlen)
{
	struct lu_serial *e = calloc(1, sizeof(*e));
	*rc = -ENOMEM;
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	snprintf(e->serial, sizeof(e->serial), "%s", serial);
	snprintf(e->name, sizeof(e->name), "%s", b->name);
	pthread_mutex_lock(&lu_serials_mu);
	for (struct lu_serial *o = lu_serials; o; o = o->next)
		if (!strcmp(o->serial, e->serial) && strcmp(o->name, e->name)) {
			pthread_mutex_unlock(&lu_serials_mu);
			snprintf(err, errlen, "backstore '%s': serial '%s'%s is already that of backstore '%s': each LU of "
				 "one isertd needs its own (set \"serial\" to tell them apart)", b->name, e->serial,
				 b->serial ? "" : " (the store's own identity)", o->name);
			free(e);
			*rc = -EEXIST;
			return NULL;
		}
	e->next = lu_serials;
	lu_serials = e;
	pthread_mutex_unlock(&lu_serials_mu);
	*rc = 0;
	return e;
}

static void serial_release(const struct lu_serial *which, const struct scsi_lu *lu)
{
	pthread_mutex_lock(&lu_serials_mu);
	for (struct lu_serial **pp = &lu_serials; *pp; pp = &(*pp)->next)
		if (*pp == which || (lu && (*pp)->lu == lu)) {
			struct lu_serial *e = *pp;
			*pp = e->next;
			free(e);
			break;
		}
	pthread_mutex_unlock(&lu_serials_mu);
}

int rt_store_open(const struct cfg_backstore *b, struct rt_store **out, char *err, size_t errlen)
{
	struct rt_store *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = backstore_open(&b->bs, &s->bs, err, errlen);
	if (rc) {
		free(s);
		return rc;
	}
	/* The configured serial, else the store's own identity (an RBD image, an NVMe
	 * namespace: every target serving it reports the same LU), else the name. */
	char serial[64];
	const char *own = backstore_serial(s->bs);
	snprintf(serial, sizeof(serial), "%s", b->serial ? b->serial : own ? own : b->name);
	/* The running configuration is set before the first store opens; state_dir never changes after. */
	struct scsi_lu_params p = { .serial = serial, .name = b->name, .state_dir = config_state_dir(rt_config()) };
	struct lu_serial *claim = serial_claim(b, serial, &rc, err, errlen);
	if (claim && (rc = scsi_lu_create(s->bs, &p, &s->lu))) {
		snprintf(err, errlen, "backstore '%s': cannot create its logical unit: %s", b->name, strerror(-rc));
		serial_release(claim, NULL);
	}
	if (rc) {
		backstore_close(s->bs);
		free(s);
		return rc;
	}
	claim->lu = s->lu;
	s->refs = 1;
	*out = s;
	return 0;
}

struct rt_store *rt_store_get(struct rt_store *s)
{
	s->refs++;
	return s;
}

void rt_store_put(struct rt_store *s)
{
	if (!s || --s->refs)
		return;
	serial_release(NULL, s->lu);
	scsi_lu_destroy(s->lu);
	backstore_close(s->bs);
	free(s);
}

int rt_share_targets(char *err, size_t errlen)
{
	const struct config *c = rt_config();
	const char **iqns = calloc(c->ntargets ? c->ntargets : 1, sizeof(*iqns));
	int rc = 0;
	if (!iqns) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->nbackstores; i++) {
		struct rt_store *s = rt_store_at(i);
		size_t n = 0;
		if (!s || !s->lu)
			continue;
		for (size_t t = 0; t < c->ntargets; t++) {
			bool maps = false;
			for (size_t j = 0; j < c->targets[t].ntpgs && !maps; j++)
				for (size_t k = 0; k < c->targets[t].tpgs[j].nluns && !maps; k++)
					maps = c->targets[t].tpgs[j].luns[k].backstore_index == i;
			if (maps)
				iqns[n++] = c->targets[t].iqn;
		}
		char e[768];
		int r = scsi_lu_share_targets(s->lu, iqns, n, e, sizeof(e));
		if (r == -EEXIST && !rc) {
			snprintf(err, errlen, "%s", e);
			rc = r;
		} else if (r && r != -EEXIST) {
			log_warn("%s", e);
		}
	}
	free(iqns);
	return rc;
}
