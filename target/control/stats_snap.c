/*
 * The snapshot of the statistics that every exporter reads (the admin
 * socket's stats method, /metrics): a request every reactor fills with a
 * copy of what it holds (target/iscsi/stats.c), then summed and sorted
 * here, with the kernel's RDMA port counters from sysfs (docs/stats.md).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/reactor.h"
#include "target/control/control.h"
#include "target/control/stats.h"
#include "target/iscsi/stats.h"

/* The snapshot */

int stats_row_cmp(const struct stats_row *a, const struct stats_row *b)
{
	int r = strcmp(a->target, b->target);
	if (!r)
		r = (a->tpg > b->tpg) - (a->tpg < b->tpg);
	if (!r)
		r = (a->lun > b->lun) - (a->lun < b->lun);
	if (!r)
		r = strcmp(a->backstore, b->backstore);
	if (!r)
		r = strcmp(a->initiator, b->initiator);
	return r;
}

static int row_ptr_cmp(const void *a, const void *b)
{
	return stats_row_cmp(*(struct stats_row *const *)a, *(struct stats_row *const *)b);
}

/* One sysfs counter file: false when absent or unreadable (left out, never a zero). */
static bool read_counter(const char *path, uint64_t *v)
{
	FILE *fp = fopen(path, "r");
	if (!fp)
		return false;
	bool ok = fscanf(fp, "%" SCNu64, v) == 1;
	fclose(fp);
	return ok;
}

static void add_u(json_object *o, const char *k, uint64_t v)
{
	json_object_object_add(o, k, json_object_new_uint64(v));
}

static json_object *counter_dir(const char *path)
{
	DIR *d = opendir(path);
	if (!d)
		return NULL;
	json_object *o = json_object_new_object();
	struct dirent *de;
	char f[512];
	uint64_t v;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && (size_t)snprintf(f, sizeof(f), "%s/%s", path, de->d_name) < sizeof(f) &&
		    read_counter(f, &v))
			add_u(o, de->d_name, v);
	closedir(d);
	return o;
}

#define SYS_IB "/sys/class/infiniband"

/* The kernel's counters of every RDMA device port. */
static json_object *rdma_devices_json(void)
{
	json_object *a = json_object_new_array();
	DIR *d = opendir(SYS_IB);
	if (!d)
		return a;
	struct dirent *de;
	while ((de = readdir(d))) {
		char path[512];
		if (de->d_name[0] == '.' || (size_t)snprintf(path, sizeof(path), SYS_IB "/%s/ports", de->d_name) >= sizeof(path))
			continue;
		DIR *pd = opendir(path);
		if (!pd)
			continue;
		struct dirent *pe;
		while ((pe = readdir(pd))) {
			char sub[600];
			if (pe->d_name[0] == '.')
				continue;
			json_object *o = json_object_new_object(), *c;
			json_object_object_add(o, "device", json_object_new_string(de->d_name));
			add_u(o, "port", strtoull(pe->d_name, NULL, 10));
			if ((size_t)snprintf(sub, sizeof(sub), "%s/%s/counters", path, pe->d_name) < sizeof(sub) &&
			    (c = counter_dir(sub)))
				json_object_object_add(o, "counters", c);
			if ((size_t)snprintf(sub, sizeof(sub), "%s/%s/hw_counters", path, pe->d_name) < sizeof(sub) &&
			    (c = counter_dir(sub)))
				json_object_object_add(o, "hw_counters", c);
			json_object_array_add(a, o);
		}
		closedir(pd);
	}
	closedir(d);
	return a;
}

void stats_snap_free(struct stats_snap *s)
{
	if (!s)
		return;
	free(s->rows);
	free(s->sorted);
	free(s->conns);
	free(s->portals);
	json_object_put(s->rdma_devices);
	free(s->reactors);
	free(s);
}

/* What the reactors copied (stats_copy_take), the rows summed and sorted, and the sysfs counters, into s. */
static int snap_build(struct stats_snap *s, struct stats_copy *k, const struct stats_filter *f)
{
	s->monotonic_ns = reactor_now_ns();
	int rc = stats_copy_take(k, s);
	if (rc)
		return rc;
	if (s->nrows) {
		s->sorted = malloc(s->nrows * sizeof(*s->sorted));
		if (!s->sorted)
			return -ENOMEM;
		for (size_t i = 0; i < s->nrows; i++)
			s->sorted[i] = &s->rows[i];
		qsort(s->sorted, s->nrows, sizeof(*s->sorted), row_ptr_cmp);
		/* The same key from several reactors (sessions of one initiator, rest and overflow rows): one row. */
		for (size_t i = 0; i < s->nrows;) {
			struct stats_row *r = s->sorted[i];
			size_t j = i + 1;
			for (; j < s->nrows && !stats_row_cmp(r, s->sorted[j]); j++) {
				stats_add_counters(&r->c, &s->sorted[j]->c, sizeof(r->c));
				r->in_flight += s->sorted[j]->in_flight;
			}
			s->sorted[s->nsorted++] = r;
			i = j;
		}
	}
	if (f->rdma_devices && !(s->rdma_devices = rdma_devices_json()))
		return -ENOMEM;
	return 0;
}

int stats_snapshot(const struct stats_filter *f, struct stats_snap **out, char *err, size_t errlen)
{
	*out = NULL;
#if !ISERT_STATS
	snprintf(err, errlen, "isertd was built without statistics (meson -Dstats=false)");
	return -ENOTSUP;
#endif
	struct stats_copy *k = stats_copy_new(f, false);
	struct stats_snap *s = calloc(1, sizeof(*s));
	if (!k || !s) {
		if (k)
			stats_copy_free(k);
		free(s);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	int rc = admin_on_reactors(stats_copy_on_reactor, k, stats_copy_free, err, errlen);
	if (rc) {
		free(s);
		return rc;
	}
	rc = snap_build(s, k, f);
	stats_copy_free(k);
	if (rc) {
		stats_snap_free(s);
		snprintf(err, errlen, "out of memory");
		return rc;
	}
	*out = s;
	return 0;
}

/* Zeroing is a copy that writes: every reactor zeroes what it holds. */
int stats_reset(char *err, size_t errlen)
{
	struct stats_filter f = { .lun = -1 };
	struct stats_copy *k = stats_copy_new(&f, true);
	if (!k)
		return -ENOMEM;
	int rc = admin_on_reactors(stats_copy_on_reactor, k, stats_copy_free, err, errlen);
	if (!rc)
		stats_copy_free(k);
	return rc;
}
