/*
 * RAM backstore.  One anonymous MAP_NORESERVE mapping for the whole LUN:
 * the kernel backs a page only when it is first written (reads of untouched
 * pages map the shared zero page), so a large sparse RAM LUN costs memory
 * only where written.  Thin UNMAP gives pages back with MADV_DONTNEED, which
 * keeps the mapping valid for other reactors reading concurrently (freeing
 * per-chunk allocations would not).  Thin LUNs keep a bitmap of written
 * pages for GET LBA STATUS: mincore() cannot tell a written page from one
 * merely read (reads map the zero page).  Bits are set and cleared with
 * atomics since LUNs are shared by reactors.  Everything completes inline.
 *
 * BS_WRITE_ATOMIC (WRITE ATOMIC): a sequence lock.  An atomic write makes
 * seq odd, copies, makes it even again; a read that saw it change copies
 * again, and after two tries copies under the writers' mutex, so a reader
 * is never starved and waits at most one atomic copy (RAM_ATOMIC_MAX).  A
 * read overlapping an atomic write thus returns all old or all new data.
 * Plain writes do not take part: a plain WRITE racing an atomic write of the
 * same blocks may leave a mix of the two (the SCSI layer serializes atomic
 * writes against COMPARE AND WRITE and ORWRITE only).
 *
 * Views (backstore_read_view): a large READ over TCP sends straight from the
 * mapping, no copy into a pool buffer.  Its sender reads the bytes until the
 * last PDU is written, outside the sequence lock, so an atomic write must
 * not run over them meanwhile.  The store keeps the views out and the
 * atomic writes under way in two lists under view_mu: an atomic write
 * enters its list first, from then on no view of its blocks is given (those
 * reads copy under the sequence lock), and it copies once no view of its
 * blocks is left, looking again every RAM_VIEW_WAIT_MS on a timer of its
 * own reactor.  Views of other blocks never hold it.  A reader that stopped
 * taking its data (a peer that no longer reads its socket keeps its views
 * for as long as its connection lives: with tcp_keepalive 0, for ever)
 * holds it RAM_VIEW_WAIT_MAX_MS at most: then each view still in its way is
 * revoked on its holder's reactor, where the transport closes that
 * connection, which puts the view.  The connection that does not read pays,
 * not the writer nor the readers of other blocks.  Its abort (*io->stop)
 * ends the wait at the next look, nothing written.
 *
 * Preallocated (cfg "preallocate"): the mapping is committed memory, every
 * page written at open, and registered with each RDMA device on its first
 * large iSER READ there (common/transport/memreg.h), after which views go out as
 * RDMA WRITEs too.  A registration holds the pages it saw for good, which
 * is why a preallocated store is never thin: MADV_DONTNEED would leave the
 * device reading pages the store no longer uses.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/transport/memreg.h"
#include "common/util.h"
#include "target/backstore/backstore_impl.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14 */
#endif

/* Largest atomic write: bounds how long a reader can wait for one (a 1 MiB copy). */
#define RAM_ATOMIC_MAX (1u << 20)
/* How often an atomic write waiting for views looks again (and at its stop flag). */
#define RAM_VIEW_WAIT_MS 1
/*
 * The longest an atomic write waits for the views of its blocks before their
 * holders are told to let go.  Each view then has had this long to send what
 * is left of a READ of at most 16 MiB; the write stays well inside an
 * initiator's command timeout (30 s on Linux).
 */
#define RAM_VIEW_WAIT_MAX_MS 5000

struct ram_store {
	struct backstore bs;
	uint8_t *mem;
	_Atomic uint64_t *map;       /* thin: one bit per page, set while written */
	/* BS_WRITE_ATOMIC: odd while one copies (seq), one at a time (atomic_mu). */
	_Atomic uint64_t seq;
	pthread_mutex_t atomic_mu;
	/* Views out (backstore_read_view) and the BS_WRITE_ATOMICs under way, which wait for the
	 * views of their blocks and keep new ones off them; under view_mu. */
	pthread_mutex_t view_mu;
	struct bs_view *views;
	unsigned nviews;
	struct bs_io *atomics;
	uint32_t view_wait_max_ms;   /* RAM_VIEW_WAIT_MAX_MS (unit tests shorten it: bs_ram_set_view_wait) */
	struct memreg *reg;          /* preallocated: the mapping registered with RDMA devices on demand */
};

static struct ram_store *ram(const struct backstore *bs)
{
	return bs_kind_of((struct backstore *)bs, struct ram_store);
}

static size_t ram_page(void)
{
	long p = sysconf(_SC_PAGESIZE);
	return p > 0 ? (size_t)p : 4096;
}

/* MemAvailable in bytes, or UINT64_MAX when /proc/meminfo does not say. */
static uint64_t ram_available(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb = 0;
	bool found = false;
	char line[128];
	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "MemAvailable: %llu kB", &kb) == 1;
	if (f)
		fclose(f);
	return found && kb < UINT64_MAX / 1024 ? kb * 1024 : UINT64_MAX;
}

/* Every page of the mapping allocated now, or a message saying why not. */
static int ram_preallocate(struct backstore *bs, char *err, size_t errlen)
{
	struct ram_store *r = ram(bs);
	if (madvise(r->mem, (size_t)bs->size, MADV_POPULATE_WRITE) < 0) {
		int e = errno;
		if (e != EINVAL) {
			bs_errf(bs, err, errlen, "preallocate: cannot allocate %llu bytes: %s",
				(unsigned long long)bs->size, strerror(e));
			return -e;
		}
		/* A kernel before 5.14: a write to each page does the same. */
		for (size_t off = 0; off < bs->size; off += ram_page())
			((volatile uint8_t *)r->mem)[off] = 0;
	}
	char what[96];
	snprintf(what, sizeof(what), "backstore %s", bs->name);
	r->reg = memreg_create(r->mem, (size_t)bs->size, what);
	if (!r->reg) {
		bs_errf(bs, err, errlen, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

static int ram_open(struct backstore *bs, const struct backstore_cfg *cfg, char *err, size_t errlen)
{
	struct ram_store *r = ram(bs);
	/* size > 0 and a multiple of the block size: backstore_check_geometry() */
	if (cfg->size > SIZE_MAX / 2) {
		bs_errf(bs, err, errlen, "size: %llu is too large", (unsigned long long)cfg->size);
		return -EINVAL;
	}
	uint64_t avail = cfg->preallocate ? ram_available() : UINT64_MAX;
	if (cfg->size > avail) {
		bs_errf(bs, err, errlen, "preallocate: %llu bytes asked for, but the system has %llu available",
			(unsigned long long)cfg->size, (unsigned long long)avail);
		return -ENOMEM;
	}
	/* Preallocated memory is committed (counted against the overcommit limit); a lazy store's is not. */
	void *m = mmap(NULL, (size_t)cfg->size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (cfg->preallocate ? 0 : MAP_NORESERVE), -1, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		bs_errf(bs, err, errlen, "size: cannot reserve %llu bytes: %s",
			(unsigned long long)cfg->size, strerror(e));
		return -e;
	}
	r->mem = m;
	bs->size = cfg->size;
	bs->atomic_max = RAM_ATOMIC_MAX;
	r->view_wait_max_ms = RAM_VIEW_WAIT_MAX_MS;
	pthread_mutex_init(&r->atomic_mu, NULL);
	pthread_mutex_init(&r->view_mu, NULL);
	if (cfg->preallocate) {
		int rc = ram_preallocate(bs, err, errlen);
		if (rc) {
			munmap(m, (size_t)cfg->size);
			pthread_mutex_destroy(&r->atomic_mu);
			pthread_mutex_destroy(&r->view_mu);
			r->mem = NULL;
			return rc;
		}
	}
	if (bs->thin) {
		size_t pages = (size_t)((cfg->size + ram_page() - 1) / ram_page());
		r->map = calloc((pages + 63) / 64, sizeof(*r->map));
		if (!r->map) {
			munmap(m, (size_t)cfg->size);
			r->mem = NULL;
			bs_errf(bs, err, errlen, "out of memory");
			return -ENOMEM;
		}
	}
	return 0;
}

static void ram_close(struct backstore *bs)
{
	struct ram_store *r = ram(bs);
	/* Deregistered first: a device must not hold pages the process gives back. */
	memreg_destroy(r->reg);
	r->reg = NULL;
	if (r->mem) {
		munmap(r->mem, (size_t)bs->size);
		pthread_mutex_destroy(&r->atomic_mu);
		pthread_mutex_destroy(&r->view_mu);
	}
	r->mem = NULL;
	free(r->map);
	r->map = NULL;
}

/* Mark pages [first, end) written (set) or deallocated (clear). */
static void ram_mark(struct backstore *bs, uint64_t first, uint64_t end, bool set)
{
	struct ram_store *r = ram(bs);
	if (!r->map)
		return;
	for (uint64_t p = first; p < end;) {
		uint64_t w = p / 64, bit = p % 64;
		uint64_t n = MIN(64 - bit, end - p);
		uint64_t mask = (n == 64 ? ~0ull : ((1ull << n) - 1)) << bit;
		if (set)
			atomic_fetch_or(&r->map[w], mask);
		else
			atomic_fetch_and(&r->map[w], ~mask);
		p += n;
	}
}

static bool ram_bit(const struct backstore *bs, uint64_t p)
{
	return atomic_load(&ram(bs)->map[p / 64]) >> (p % 64) & 1;
}

/* Byte range [off, off+len) written: every page it touches is mapped. */
static void ram_written(struct backstore *bs, uint64_t off, uint64_t len)
{
	size_t pg = ram_page();
	ram_mark(bs, off / pg, (off + len + pg - 1) / pg, true);
}

/* Zero [off, off+len); thin gives whole pages back to the kernel. */
static void ram_zero(struct backstore *bs, uint64_t off, uint64_t len)
{
	struct ram_store *r = ram(bs);
	uint8_t *p = r->mem + off;
	if (!bs->thin) {
		memset(p, 0, (size_t)len);
		return;
	}
	size_t pg = ram_page();
	uint64_t a = (off + pg - 1) / pg * pg;      /* first whole page */
	uint64_t b = (off + len) / pg * pg;         /* end of last whole page */
	if (a >= b) {
		memset(p, 0, (size_t)len);
		return;
	}
	memset(p, 0, (size_t)(a - off));
	memset(r->mem + b, 0, (size_t)(off + len - b));
	/* MADV_DONTNEED on private anonymous memory reads back zero-filled. */
	if (madvise(r->mem + a, (size_t)(b - a), MADV_DONTNEED) < 0)
		memset(r->mem + a, 0, (size_t)(b - a));
	ram_mark(bs, a / pg, b / pg, false);
}

static void ram_fill(uint8_t *dst, uint64_t len, const uint8_t *pat, uint32_t plen)
{
	memcpy(dst, pat, plen);
	uint64_t have = plen;
	/* Double the filled prefix each step: log2(len/plen) memcpy calls. */
	while (have < len) {
		uint64_t n = MIN(have, len - have);
		memcpy(dst + have, dst, (size_t)n);
		have += n;
	}
}

/* A read: all of an atomic write it overlaps, or none of it (the sequence lock above). */
static void ram_read(struct backstore *bs, void *dst, const uint8_t *src, size_t len)
{
	struct ram_store *r = ram(bs);
	for (int tries = 0; tries < 2; tries++) {
		uint64_t s = atomic_load_explicit(&r->seq, memory_order_acquire);
		if (s & 1)
			continue;
		memcpy(dst, src, len);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&r->seq, memory_order_relaxed) == s)
			return;
	}
	pthread_mutex_lock(&r->atomic_mu);
	memcpy(dst, src, len);
	pthread_mutex_unlock(&r->atomic_mu);
}

static void ram_write_atomic(struct backstore *bs, uint8_t *dst, const void *src, size_t len)
{
	struct ram_store *r = ram(bs);
	pthread_mutex_lock(&r->atomic_mu);
	uint64_t s = atomic_load_explicit(&r->seq, memory_order_relaxed);
	atomic_store_explicit(&r->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(dst, src, len);
	atomic_store_explicit(&r->seq, s + 2, memory_order_release);
	pthread_mutex_unlock(&r->atomic_mu);
}

static bool ram_overlap(uint64_t off, uint64_t len, uint64_t off2, uint64_t len2)
{
	return off < off2 + len2 && off2 < off + len;
}

static const uint8_t *ram_view(struct backstore *bs, struct bs_view *v, uint64_t offset, uint64_t len)
{
	struct ram_store *r = ram(bs);
	pthread_mutex_lock(&r->view_mu);
	for (const struct bs_io *w = r->atomics; w; w = w->next)
		if (ram_overlap(offset, len, w->offset, w->len)) {
			pthread_mutex_unlock(&r->view_mu);
			return NULL;
		}
	v->bs = bs;
	v->offset = offset;
	v->len = len;
	v->revoked = false;
	v->ticket = NULL;
	v->prev = NULL;
	v->next = r->views;
	if (v->next)
		v->next->prev = v;
	r->views = v;
	r->nviews++;
	pthread_mutex_unlock(&r->view_mu);
	return r->mem + offset;
}

/*
 * A revoke on its way to the view's reactor.  Only that reactor puts the
 * view, so there the ticket tells whether the view is still out (v) or was
 * put first (NULL), and nothing else of the store is touched: it may be gone.
 */
struct bs_revoke {
	struct bs_view *v;
};

static void ram_view_put(struct bs_view *v)
{
	struct backstore *bs = v->bs;
	struct ram_store *r = ram(bs);
	pthread_mutex_lock(&r->view_mu);
	if (v->prev)
		v->prev->next = v->next;
	else
		r->views = v->next;
	if (v->next)
		v->next->prev = v->prev;
	r->nviews--;
	if (v->ticket)
		v->ticket->v = NULL;
	pthread_mutex_unlock(&r->view_mu);
}

/* On the view's reactor. */
static void ram_revoke_run(void *arg)
{
	struct bs_revoke *t = arg;
	struct bs_view *v = t->v;
	if (v) {
		pthread_mutex_lock(&ram(v->bs)->view_mu);
		v->ticket = NULL;
		pthread_mutex_unlock(&ram(v->bs)->view_mu);
	}
	free(t);
	if (v)
		v->revoke(v);   /* may put v */
}

/* Under view_mu: are views of io's blocks out?  Past its wait, revoke those not revoked yet. */
static bool ram_views_in_way(struct backstore *bs, struct bs_io *io, bool revoke)
{
	bool held = false;
	for (struct bs_view *v = ram(bs)->views; v; v = v->next) {
		if (!ram_overlap(io->offset, io->len, v->offset, v->len))
			continue;
		held = true;
		if (!revoke || v->revoked || !v->reactor)
			continue;
		struct bs_revoke *t = malloc(sizeof(*t));
		if (!t)
			continue;   /* the next look tries again */
		t->v = v;
		v->ticket = t;
		if (reactor_send(v->reactor, ram_revoke_run, t)) {
			v->ticket = NULL;
			free(t);
			continue;
		}
		v->revoked = true;
	}
	return held;
}

/* The atomic write leaves the list: views of its blocks are given again. */
static void ram_atomic_end(struct bs_io *io, int res)
{
	struct backstore *bs = io->bs;
	struct ram_store *r = ram(bs);
	pthread_mutex_lock(&r->view_mu);
	struct bs_io **pp = &r->atomics;
	while (*pp != io)
		pp = &(*pp)->next;
	*pp = io->next;
	pthread_mutex_unlock(&r->view_mu);
	bs_complete(io, res);
}

/* An atomic write: now if no view of its blocks is out, else again in RAM_VIEW_WAIT_MS. */
static void ram_atomic_wait(void *arg)
{
	struct bs_io *io = arg;
	struct backstore *bs = io->bs;
	struct ram_store *r = ram(bs);
	if (io->stop && *io->stop) {
		ram_atomic_end(io, -ECANCELED);
		return;
	}
	pthread_mutex_lock(&r->view_mu);
	/* Without a reactor (tools, unit tests) nothing can wait: such callers hold no views. */
	bool held = io->reactor && ram_views_in_way(bs, io, reactor_now_ns() >= io->until_ns);
	pthread_mutex_unlock(&r->view_mu);
	if (held) {
		if (!reactor_timer_add(io->reactor, RAM_VIEW_WAIT_MS, ram_atomic_wait, io))
			ram_atomic_end(io, -ENOMEM);
		return;
	}
	ram_write_atomic(bs, r->mem + io->offset, io->buf, (size_t)io->len);
	ram_written(bs, io->offset, io->len);
	io->done = io->len;
	ram_atomic_end(io, 0);
}

static void ram_atomic_start(struct backstore *bs, struct bs_io *io)
{
	struct ram_store *r = ram(bs);
	io->until_ns = reactor_now_ns() + (uint64_t)r->view_wait_max_ms * 1000000;
	pthread_mutex_lock(&r->view_mu);
	io->next = r->atomics;
	r->atomics = io;
	pthread_mutex_unlock(&r->view_mu);
	ram_atomic_wait(io);
}

static void ram_submit(struct backstore *bs, struct bs_io *io)
{
	uint8_t *p = ram(bs)->mem + io->offset;
	switch (io->op) {
	case BS_READ:
		ram_read(bs, io->buf, p, (size_t)io->len);
		break;
	case BS_WRITE_ATOMIC:
		ram_atomic_start(bs, io);
		return;
	case BS_WRITE:
		memcpy(p, io->buf, (size_t)io->len);
		ram_written(bs, io->offset, io->len);
		break;
	case BS_FLUSH:
		break;
	case BS_UNMAP:
		ram_zero(bs, io->offset, io->len);
		break;
	case BS_WRITE_SAME:
		if (bs_is_zero(io->buf, io->pattern_len))
			ram_zero(bs, io->offset, io->len);
		else {
			ram_fill(p, io->len, io->buf, io->pattern_len);
			ram_written(bs, io->offset, io->len);
		}
		break;
	case BS_COMPARE_WRITE:
		bs_complete(io, -EOPNOTSUPP);   /* not offered: backstore_submit refuses it first */
		return;
	}
	io->done = io->len;
	bs_complete(io, 0);
}

/* Thin only: a page is mapped from its first write until unmapped whole. */
static int ram_lba_status(struct backstore *bs, uint64_t offset, bool *mapped, uint64_t *run)
{
	size_t pg = ram_page();
	uint64_t first = offset / pg;
	uint64_t npages = (bs->size + pg - 1) / pg;
	bool state = ram_bit(bs, first);
	uint64_t p = first + 1;
	while (p < npages) {
		uint64_t word = atomic_load(&ram(bs)->map[p / 64]);
		/* Skip whole words that match. */
		if (p % 64 == 0 && word == (state ? ~0ull : 0) && p + 64 <= npages) {
			p += 64;
			continue;
		}
		if ((bool)(word >> (p % 64) & 1) != state)
			break;
		p++;
	}
	*mapped = state;
	*run = MIN(p * pg, bs->size) - offset;
	return 0;
}

/* SANITIZE BLOCK ERASE on a thin RAM LU: its pages go back to the kernel (they read as zeroes). */
static unsigned ram_sanitize_methods(const struct backstore *bs)
{
	return bs->thin ? BS_SANITIZE_BLOCK_ERASE : 0;
}

static int64_t ram_sanitize(struct backstore *bs, unsigned method, uint64_t offset, uint64_t len)
{
	(void)method;
	ram_zero(bs, offset, len);
	return (int64_t)len;
}

static const char *ram_sanitize_how(const struct backstore *bs, unsigned method)
{
	(void)bs;
	(void)method;
	return "pages given back to the kernel (MADV_DONTNEED): they read as zeroes";
}

static struct memreg *ram_memreg(const struct backstore *bs)
{
	return ram(bs)->reg;
}

/* Unlocked, as the tests read them once the store is quiet. */
unsigned bs_ram_nviews(const struct backstore *bs)
{
	return ram(bs)->nviews;
}

bool bs_ram_atomics_idle(const struct backstore *bs)
{
	return !ram(bs)->atomics;
}

void bs_ram_set_view_wait(struct backstore *bs, uint32_t max_ms)
{
	ram(bs)->view_wait_max_ms = max_ms;
}

const uint8_t *bs_ram_mem(const struct backstore *bs)
{
	return ram(bs)->mem;
}

const struct bs_ops bs_ram_ops = {
	.size = sizeof(struct ram_store),
	.open = ram_open,
	.close = ram_close,
	.submit = ram_submit,
	.lba_status = ram_lba_status,
	.sanitize_methods = ram_sanitize_methods,
	.sanitize = ram_sanitize,
	.sanitize_how = ram_sanitize_how,
	.view = ram_view,
	.view_put = ram_view_put,
	.memreg = ram_memreg,
};
