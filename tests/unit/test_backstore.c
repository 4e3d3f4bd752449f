/*
 * Backstore tests: ram, file (io_uring and synchronous paths) and block (on
 * a loop device when the host allows one).  fd_int.h reaches the fd
 * engine's short-I/O bookkeeping directly.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/bufpool.h"
#include "common/transport/memreg.h"
#include "common/reactor.h"
#include "common/transport/transport.h"
#include "target/backstore/backstore_impl.h"
#include "target/backstore/fd_int.h"

#include "unit_run.h"

static struct reactor *R;
static char tmpdir[] = "/tmp/test_backstore.XXXXXX";

/* --- helpers --- */

static int ncomp;
static int last_res;
static bool waiting;
static bool timed_out;

static void io_cb(struct bs_io *io, int res)
{
	(void)io;
	last_res = res;
	ncomp++;
	if (waiting)
		reactor_stop(R);
}

static void watchdog(void *arg)
{
	(void)arg;
	timed_out = true;
	reactor_stop(R);
}

/* Run the reactor until ncomp reaches want (or a 10 s watchdog fires). */
static void wait_for(int want)
{
	while (ncomp < want && !timed_out) {
		struct reactor_timer *t = reactor_timer_add(R, 10000, watchdog, NULL);
		waiting = true;
		reactor_run(R);
		waiting = false;
		if (!timed_out)
			reactor_timer_cancel(R, t);
	}
	CU_ASSERT_FALSE(timed_out);
}

static int do_io_on(struct backstore *bs, struct reactor *r, enum backstore_op op, uint64_t off,
		    uint64_t len, void *buf, bool fua)
{
	struct bs_io io = { .op = op, .offset = off, .len = len, .buf = buf, .fua = fua,
			    .reactor = r, .cb = io_cb };
	if (op == BS_WRITE_SAME)
		io.pattern_len = backstore_block_size(bs);
	ncomp = 0;
	last_res = 1;
	backstore_submit(bs, &io);
	if (r)
		wait_for(1);
	CU_ASSERT_EQUAL(ncomp, 1);
	return last_res;
}

static int do_io(struct backstore *bs, enum backstore_op op, uint64_t off, uint64_t len, void *buf, bool fua)
{
	return do_io_on(bs, R, op, off, len, buf, fua);
}

static void *abuf(size_t len)
{
	void *p = NULL;
	if (posix_memalign(&p, 4096, len) != 0 || !p)
		abort();
	return p;
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static bool all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static void path_in_tmp(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", tmpdir, name);
}

static struct backstore *open_ok(const struct backstore_cfg *cfg)
{
	struct backstore *bs = NULL;
	char err[256];
	int rc = backstore_open(cfg, &bs, err, sizeof(err));
	if (rc)
		fprintf(stderr, "open failed: %s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	return bs;
}

/* --- WRITE ATOMIC on RAM: a concurrent read sees all old or all new --- */

struct atomic_run {
	struct backstore *bs;
	size_t len;
	_Atomic bool stop;
	unsigned writes;
};

static void res_cb(struct bs_io *io, int res)
{
	*(int *)io->priv = res;
}

static int ram_io(struct backstore *bs, enum backstore_op op, uint64_t off, uint64_t len, void *buf)
{
	int res = 1;
	struct bs_io io = { .op = op, .offset = off, .len = len, .buf = buf, .cb = res_cb, .priv = &res };
	backstore_submit(bs, &io);
	return res;
}

/* Atomic writes of one byte value over the whole range, a new value each time. */
static void *atomic_writer(void *arg)
{
	struct atomic_run *a = arg;
	uint8_t *w = abuf(a->len);
	for (unsigned i = 1; !atomic_load(&a->stop); i++) {
		memset(w, (int)(i & 0xff), a->len);
		if (ram_io(a->bs, BS_WRITE_ATOMIC, 4096, a->len, w) != 0)
			break;
		a->writes++;
	}
	free(w);
	return NULL;
}

static void test_ram_atomic(void)
{
	struct backstore_cfg c = { .name = "ram", .type = BACKSTORE_RAM, .size = 4u << 20, .block_size = 512 };
	struct backstore *bs = open_ok(&c);
	struct atomic_run a = { .bs = bs, .len = 1u << 20 };
	uint8_t *r = abuf((1u << 20) + 4096);
	pthread_t t;

	CU_ASSERT_EQUAL(backstore_atomic_max(bs), 1u << 20);
	CU_ASSERT_EQUAL(ram_io(bs, BS_WRITE_ATOMIC, 0, (1u << 20) + 512, r), -EOPNOTSUPP);

	/* Reads race the writer for a while: none may see two values. */
	CU_ASSERT_FATAL(pthread_create(&t, NULL, atomic_writer, &a) == 0);
	unsigned mixed = 0, reads = 0, changed = 0;
	uint8_t last = 0;
	uint64_t t0 = reactor_now_ns();
	while (reactor_now_ns() - t0 < 300000000ull || a.writes < 50) {
		CU_ASSERT_EQUAL(ram_io(bs, BS_READ, 4096, a.len, r), 0);
		reads++;
		for (size_t i = 1; i < a.len; i++) {
			if (r[i] != r[0]) {
				mixed++;
				break;
			}
		}
		changed += r[0] != last;
		last = r[0];
		if (reactor_now_ns() - t0 > 5000000000ull)
			break;
	}
	atomic_store(&a.stop, true);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(mixed, 0);
	CU_ASSERT(a.writes >= 50);
	CU_ASSERT(changed > 1);   /* the reads did overlap the writes */
	free(r);
	backstore_close(bs);

	/* a file backstore offers none, nor views (ram only) */
	char path[512];
	path_in_tmp(path, sizeof(path), "atomic.img");
	struct backstore_cfg fc = { .name = "f", .type = BACKSTORE_FILE, .path = path, .size = 1u << 20,
				    .block_size = 512 };
	bs = open_ok(&fc);
	CU_ASSERT_EQUAL(backstore_atomic_max(bs), 0);
	struct bs_view fv = { .reactor = R, .revoke = (void (*)(struct bs_view *))abort };
	CU_ASSERT_PTR_NULL(backstore_read_view(bs, &fv, 0, 65536));
	uint8_t blk[512] = { 0 };
	CU_ASSERT_EQUAL(ram_io(bs, BS_WRITE_ATOMIC, 0, 512, blk), -EOPNOTSUPP);
	backstore_close(bs);
	unlink(path);
}

/*
 * --- views: a READ sent from the store's own bytes; a WRITE ATOMIC of their blocks waits for them, at most
 * the store's bound, then has them revoked; one of other blocks does not wait ---
 */

static const uint8_t *view_p;
static int view_ncomp_at_put = -1;
static uint8_t view_at_put[2];   /* its first and last byte when it was put */
static int revokes;
static uint64_t revoked_at;

static void put_view(void *arg)
{
	view_ncomp_at_put = ncomp;
	view_at_put[0] = view_p[0];
	view_at_put[1] = view_p[65535];
	backstore_view_put(arg);
}

/* What a transport does: the connection closes, the READ is released, its view put. */
static void revoke_view(struct bs_view *v)
{
	revokes++;
	revoked_at = reactor_now_ns();
	put_view(v);
}

static void stop_now(void *arg)
{
	*(bool *)arg = true;
}

static void test_ram_views(void)
{
	struct backstore_cfg c = { .name = "ram", .type = BACKSTORE_RAM, .size = 1u << 20, .block_size = 512 };
	struct backstore *bs = open_ok(&c);
	uint8_t *w = abuf(65536), *r = abuf(65536);
	struct bs_view v = { .reactor = R, .revoke = revoke_view }, v2 = v;

	memset(w, 0xa5, 65536);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 65536, 65536, w, false), 0);
	view_p = backstore_read_view(bs, &v, 65536, 65536);
	CU_ASSERT_PTR_NOT_NULL_FATAL(view_p);
	CU_ASSERT_EQUAL(memcmp(view_p, w, 65536), 0);
	CU_ASSERT_EQUAL(bs_ram_nviews(bs), 1);
	/* Checked as a READ is; and nobody could make a holder without revoke let go. */
	CU_ASSERT_PTR_NULL(backstore_read_view(bs, &v2, 100, 512));
	CU_ASSERT_PTR_NULL(backstore_read_view(bs, &v2, 65536, 100));
	CU_ASSERT_PTR_NULL(backstore_read_view(bs, &v2, 0, 0));
	CU_ASSERT_PTR_NULL(backstore_read_view(bs, &v2, 1u << 20, 512));
	CU_ASSERT_PTR_NULL(backstore_read_view(bs, &v2, 512, 1u << 20));
	struct bs_view nobody = { .reactor = R };
	CU_ASSERT_PTR_NULL(backstore_read_view(bs, &nobody, 0, 512));
	CU_ASSERT_EQUAL(bs_ram_nviews(bs), 1);

	/* An atomic write of other blocks does not wait for it. */
	memset(w, 0x3c, 65536);
	CU_ASSERT_EQUAL(do_io_on(bs, NULL, BS_WRITE, 0, 65536, w, false), 0);
	struct bs_io io = { .op = BS_WRITE_ATOMIC, .offset = 0, .len = 65536, .buf = w, .reactor = R, .cb = io_cb };
	ncomp = 0;
	last_res = 1;
	backstore_submit(bs, &io);
	CU_ASSERT_EQUAL(ncomp, 1);
	CU_ASSERT_EQUAL(last_res, 0);

	/* One over it waits until the view is put: its sender reads the old bytes to the end. */
	memset(w, 0x5a, 65536);
	io = (struct bs_io){ .op = BS_WRITE_ATOMIC, .offset = 65536, .len = 65536, .buf = w, .reactor = R,
			     .cb = io_cb };
	ncomp = 0;
	last_res = 1;
	revokes = 0;
	reactor_timer_add(R, 30, put_view, &v);
	backstore_submit(bs, &io);
	CU_ASSERT_EQUAL(ncomp, 0);
	/* Meanwhile no view of its blocks is given (that READ copies), one of others is. */
	CU_ASSERT_PTR_NULL(backstore_read_view(bs, &v2, 65536 + 512, 512));
	CU_ASSERT_PTR_NOT_NULL(backstore_read_view(bs, &v2, 131072, 512));
	wait_for(1);
	CU_ASSERT_EQUAL(last_res, 0);
	CU_ASSERT_EQUAL(view_ncomp_at_put, 0);
	CU_ASSERT(view_at_put[0] == 0xa5 && view_at_put[1] == 0xa5);
	CU_ASSERT_EQUAL(revokes, 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 65536, 65536, r, false), 0);
	CU_ASSERT_EQUAL(memcmp(r, w, 65536), 0);
	backstore_view_put(&v2);
	CU_ASSERT_EQUAL(bs_ram_nviews(bs), 0);

	/* After it, views are given again. */
	view_p = backstore_read_view(bs, &v, 65536, 65536);
	CU_ASSERT_PTR_NOT_NULL_FATAL(view_p);

	/* A view never put: past the bound, the atomic write has it revoked (on its reactor), then runs. */
	bs_ram_set_view_wait(bs, 50);
	memset(w, 0xa5, 65536);
	ncomp = 0;
	last_res = 1;
	view_ncomp_at_put = -1;
	uint64_t t0 = reactor_now_ns();
	backstore_submit(bs, &io);
	CU_ASSERT_EQUAL(ncomp, 0);
	wait_for(1);
	CU_ASSERT_EQUAL(last_res, 0);
	CU_ASSERT_EQUAL(revokes, 1);
	CU_ASSERT(revoked_at - t0 >= 50 * 1000000ull);
	CU_ASSERT_EQUAL(view_ncomp_at_put, 0);
	CU_ASSERT(view_at_put[0] == 0x5a && view_at_put[1] == 0x5a);   /* the write before's, whole */
	CU_ASSERT_EQUAL(bs_ram_nviews(bs), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 65536, 65536, r, false), 0);
	CU_ASSERT_EQUAL(memcmp(r, w, 65536), 0);

	/* A view put before its revoke arrives: the revoke finds it gone and calls nobody. */
	bs_ram_set_view_wait(bs, 0);
	view_p = backstore_read_view(bs, &v, 65536, 65536);
	CU_ASSERT_PTR_NOT_NULL_FATAL(view_p);
	ncomp = 0;
	revokes = 0;
	backstore_submit(bs, &io);   /* past its bound at once: the revoke is sent now */
	CU_ASSERT_EQUAL(ncomp, 0);
	CU_ASSERT_TRUE(v.revoked);
	backstore_view_put(&v);
	wait_for(1);
	CU_ASSERT_EQUAL(last_res, 0);
	CU_ASSERT_EQUAL(revokes, 0);

	/* Stopped (aborted) while it waits: -ECANCELED at the next look, nothing written, the view untouched. */
	bs_ram_set_view_wait(bs, 10000);
	view_p = backstore_read_view(bs, &v, 65536, 65536);
	CU_ASSERT_PTR_NOT_NULL_FATAL(view_p);
	bool stop = false;
	memset(w, 0x11, 65536);
	io.stop = &stop;
	ncomp = 0;
	last_res = 1;
	reactor_timer_add(R, 20, stop_now, &stop);
	backstore_submit(bs, &io);
	wait_for(1);
	CU_ASSERT_EQUAL(last_res, -ECANCELED);
	CU_ASSERT_EQUAL(revokes, 0);
	CU_ASSERT_EQUAL(bs_ram_nviews(bs), 1);
	CU_ASSERT_EQUAL(view_p[0], 0xa5);
	CU_ASSERT_TRUE(bs_ram_atomics_idle(bs));
	backstore_view_put(&v);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 65536, 65536, r, false), 0);
	CU_ASSERT_EQUAL(r[0], 0xa5);
	backstore_close(bs);
	free(w);
	free(r);
}

/*
 * A preallocated RAM store: every page resident after open, and its memory
 * registered on demand with each device of a stand-in RDMA transport (the
 * real one runs in the VM suite: tests/vm/t-isertd-iser.sh).
 */
static int dev_a, dev_b;                  /* two devices: a registers (slowly), b fails */
static _Atomic int nreg, ndereg;
static void *fake_dev(struct xp_conn *xc) { return xc->reactor ? &dev_b : &dev_a; }
static int fake_reg_local(void *dev, void *addr, size_t len, uint32_t *lkey, void **handle)
{
	(void)addr;
	(void)len;
	nreg++;
	usleep(100 * 1000);
	if (dev == &dev_b)
		return -ENOMEM;
	*lkey = 0x1234;
	*handle = dev;
	return 0;
}
static void fake_dereg(void *handle) { CU_ASSERT_PTR_EQUAL(handle, &dev_a); ndereg++; }
static const char *fake_dev_name(void *dev) { return dev == &dev_a ? "fake_a" : "fake_b"; }

static uint32_t lkey_within(struct memreg *m, struct xp_conn *xc, int ms)
{
	uint32_t k = 0;
	for (int i = 0; i < ms / 10 && !(k = memreg_lkey(m, xc)); i++)
		usleep(10 * 1000);
	return k;
}

static void test_ram_preallocate(void)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), len = 4u << 20;
	struct backstore_cfg c = { .name = "pre", .type = BACKSTORE_RAM, .size = len, .preallocate = true };
	struct backstore *bs = open_ok(&c);
	unsigned char *vec = calloc(len / pg, 1);
	CU_ASSERT_EQUAL(mincore((void *)bs_ram_mem(bs), len, vec), 0);
	size_t resident = 0;
	for (size_t i = 0; i < len / pg; i++)
		resident += vec[i] & 1;
	CU_ASSERT_EQUAL(resident, len / pg);
	free(vec);

	struct memreg *m = backstore_memreg(bs);
	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	struct transport_ops tcp_like = { .name = "tcp" };
	struct transport_ops rdma = { .name = "fake", .rdma = true, .rdma_dev = fake_dev,
				      .mem_reg_local = fake_reg_local, .mem_dereg = fake_dereg,
				      .dev_name = fake_dev_name };
	struct xp_conn tcp = { .ops = &tcp_like }, a1 = { .ops = &rdma }, a2 = { .ops = &rdma },
		       b = { .ops = &rdma, .reactor = R };
	CU_ASSERT_EQUAL(memreg_lkey(m, &tcp), 0);
	/* The first asks start the registration and do not wait for it. */
	CU_ASSERT_EQUAL(memreg_lkey(m, &a1), 0);
	CU_ASSERT_EQUAL(memreg_lkey(m, &b), 0);
	CU_ASSERT_EQUAL(lkey_within(m, &a2, 5000), 0x1234);
	CU_ASSERT_EQUAL(memreg_lkey(m, &a1), 0x1234);
	/* A failed device stays failed, and is not asked again. */
	usleep(200 * 1000);
	CU_ASSERT_EQUAL(memreg_lkey(m, &b), 0);
	CU_ASSERT_EQUAL(nreg, 2);
	backstore_close(bs);
	CU_ASSERT_EQUAL(ndereg, 1);

	/* Closed while a registration is under way: the close waits for it, then deregisters. */
	bs = open_ok(&c);
	CU_ASSERT_EQUAL(memreg_lkey(backstore_memreg(bs), &a1), 0);
	backstore_close(bs);
	CU_ASSERT_EQUAL(nreg, 3);
	CU_ASSERT_EQUAL(ndereg, 2);

	/* A store that is not preallocated has nothing to register: RDMA reads copy. */
	c.preallocate = false;
	bs = open_ok(&c);
	CU_ASSERT_PTR_NULL(backstore_memreg(bs));
	backstore_close(bs);
}

/* --- common argument checks and open errors --- */

/* kinds.c: every type described once, and the one resize rule apply and the admin methods follow. */
static void test_kinds(void)
{
	static const enum backstore_type all[] = { BACKSTORE_RAM, BACKSTORE_FILE, BACKSTORE_BLOCK, BACKSTORE_RBD,
						   BACKSTORE_NVME };
	char why[160] = "";
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		const struct backstore_kind *k = backstore_kind(all[i]);
		CU_ASSERT_PTR_NOT_NULL_FATAL(k);
		CU_ASSERT_PTR_EQUAL(backstore_kind_named(k->name), k);
		CU_ASSERT(strstr(k->noun, k->name) != NULL);
		/* exactly one way to say where the blocks are: a path, an image, or memory (a size) */
		CU_ASSERT_EQUAL(!!(k->caps & BS_KIND_PATH) + !!(k->caps & BS_KIND_IMAGE) + !!(k->caps & BS_KIND_SIZE), 1);
	}
	CU_ASSERT_PTR_NULL(backstore_kind_named("tape"));
	CU_ASSERT_STRING_EQUAL(backstore_kind(BACKSTORE_RAM)->product, "RAM");
	/* Every kind, in the list's order: "a", "b", ... or "z" (test_config holds the loader's message to its bytes). */
#define KIND_NAME(T, name, ...) #name,
	static const char *const listed[] = { BACKSTORE_KINDS(KIND_NAME) };
#undef KIND_NAME
	char names[128], want[128] = "";
	for (size_t i = 0; i < ARRAY_SIZE(listed); i++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s\"%s\"",
			 !i ? "" : i + 1 < ARRAY_SIZE(listed) ? ", " : " or ", listed[i]);
	CU_ASSERT_STRING_EQUAL(backstore_kind_names(names, sizeof(names)), want);
	CU_ASSERT_STRING_EQUAL(backstore_kind_names(names, 12), "\"ram\", \"fil");   /* cut, still a string */
	/* The configuration's resize rule (caps) and the running store's (which ops its file has) agree. */
#define KIND_RESIZES_AS_SAID(T, name, noun, product, caps)                                          \
	CU_ASSERT_EQUAL(!!((caps) & BS_KIND_GROW), bs_##name##_ops.resize != NULL);               \
	CU_ASSERT_EQUAL(!!((caps) & BS_KIND_FOLLOW), bs_##name##_ops.device_size != NULL);
	BACKSTORE_KINDS(KIND_RESIZES_AS_SAID)
#undef KIND_RESIZES_AS_SAID

	/* ram: any change refused, no change nothing to do */
	CU_ASSERT_EQUAL(backstore_resize_rule(BACKSTORE_RAM, 1 << 20, 1 << 20, 1 << 20, why, sizeof(why)), BS_RESIZE_NONE);
	CU_ASSERT_EQUAL(backstore_resize_rule(BACKSTORE_RAM, 1 << 20, 2 << 20, 1 << 20, why, sizeof(why)),
			BS_RESIZE_REFUSED);
	CU_ASSERT_STRING_EQUAL(why, "a ram backstore cannot be resized while it runs");
	/* file, rbd: grown, never shrunk; 0 or the size it has is nothing to do */
	for (int t = 0; t < 2; t++) {
		enum backstore_type ty = t ? BACKSTORE_RBD : BACKSTORE_FILE;
		CU_ASSERT_EQUAL(backstore_resize_rule(ty, 0, 0, 4096, why, sizeof(why)), BS_RESIZE_NONE);
		CU_ASSERT_EQUAL(backstore_resize_rule(ty, 0, 4096, 4096, why, sizeof(why)), BS_RESIZE_NONE);
		CU_ASSERT_EQUAL(backstore_resize_rule(ty, 4096, 8192, 4096, why, sizeof(why)), BS_RESIZE_DO);
		CU_ASSERT_EQUAL(backstore_resize_rule(ty, 8192, 4096, 8192, why, sizeof(why)), BS_RESIZE_REFUSED);
		CU_ASSERT(strstr(why, "4096 is smaller than the current 8192 bytes") != NULL);
		/* grown underneath (rbd resize by another client): an unchanged document leaves it */
		CU_ASSERT_EQUAL(backstore_resize_rule(ty, 4096, 4096, 8192, why, sizeof(why)), BS_RESIZE_NONE);
	}
	/* block, nvme: a changed size (0 too) reads the device again */
	CU_ASSERT_EQUAL(backstore_resize_rule(BACKSTORE_BLOCK, 0, 0, 4096, why, sizeof(why)), BS_RESIZE_NONE);
	CU_ASSERT_EQUAL(backstore_resize_rule(BACKSTORE_NVME, 4096, 0, 4096, why, sizeof(why)), BS_RESIZE_DO);
	CU_ASSERT_EQUAL(backstore_resize_rule(BACKSTORE_BLOCK, 0, 8192, 4096, why, sizeof(why)), BS_RESIZE_DO);
}

static void test_open_errors(void)
{
	struct backstore *bs = (void *)1;
	char err[256], p[256];

	struct backstore_cfg c = { .name = "r1", .type = BACKSTORE_RAM };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NULL(bs);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'r1'"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "size"));

	c = (struct backstore_cfg){ .name = "r2", .type = BACKSTORE_RAM, .size = 1 << 20, .block_size = 1000 };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "block_size"));

	c = (struct backstore_cfg){ .name = "r3", .type = BACKSTORE_RAM, .size = 1000 };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);

	c = (struct backstore_cfg){ .type = BACKSTORE_RAM, .size = 1 << 20 };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "name"));

	/* preallocate: ram only, never thin, and never more than the system has available */
	c = (struct backstore_cfg){ .name = "r4", .type = BACKSTORE_RAM, .size = 1 << 20, .thin = true,
				    .preallocate = true };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "backstore 'r4': preallocate: not with thin: a preallocated ram backstore keeps "
				    "its pages");
	c = (struct backstore_cfg){ .name = "r5", .type = BACKSTORE_RAM, .size = 1ull << 50, .preallocate = true };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -ENOMEM);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'r5': preallocate: 1125899906842624 bytes asked for, but the "
					   "system has "));
	c = (struct backstore_cfg){ .name = "f0", .type = BACKSTORE_FILE, .path = "/nonexistent", .preallocate = true };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(err, "backstore 'f0': preallocate: not for a file backstore (only ram)");

	/* file: missing, no size given -> not created */
	path_in_tmp(p, sizeof(p), "missing.img");
	c = (struct backstore_cfg){ .name = "f1", .type = BACKSTORE_FILE, .path = p };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -ENOENT);
	char want[512];
	snprintf(want, sizeof(want), "backstore 'f1': path '%s': No such file or directory", p);
	CU_ASSERT_STRING_EQUAL(err, want);
	CU_ASSERT_EQUAL(access(p, F_OK), -1);

	c = (struct backstore_cfg){ .name = "f2", .type = BACKSTORE_FILE };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'f2': path"));

	/* file: a directory */
	c = (struct backstore_cfg){ .name = "f3", .type = BACKSTORE_FILE, .path = tmpdir, .readonly = true };
	CU_ASSERT(backstore_open(&c, &bs, err, sizeof(err)) < 0);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'f3': path"));

	/* block: missing device, regular file */
	c = (struct backstore_cfg){ .name = "disk1", .type = BACKSTORE_BLOCK, .path = "/dev/nvme9n1" };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -ENOENT);
	CU_ASSERT_STRING_EQUAL(err, "backstore 'disk1': path '/dev/nvme9n1': No such file or directory");

	path_in_tmp(p, sizeof(p), "regular.img");
	int fd = open(p, O_CREAT | O_RDWR, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(ftruncate(fd, 1 << 20), 0);
	close(fd);
	c = (struct backstore_cfg){ .name = "disk2", .type = BACKSTORE_BLOCK, .path = p };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -ENOTBLK);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'disk2': path '"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a block device"));

	/* file: readonly and smaller than size */
	c = (struct backstore_cfg){ .name = "f4", .type = BACKSTORE_FILE, .path = p, .size = 2 << 20, .readonly = true };
	CU_ASSERT_EQUAL(backstore_open(&c, &bs, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'f4': size"));
	unlink(p);
}

static void test_ram_args(void)
{
	struct backstore_cfg c = { .name = "ram", .type = BACKSTORE_RAM, .size = 1 << 20 };
	struct backstore *bs = open_ok(&c);
	uint8_t *b = abuf(8192);
	CU_ASSERT_EQUAL(backstore_size(bs), 1 << 20);
	CU_ASSERT_EQUAL(backstore_block_size(bs), 512);
	CU_ASSERT_STRING_EQUAL(backstore_name(bs), "ram");
	CU_ASSERT_EQUAL(backstore_type(bs), BACKSTORE_RAM);

	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 1, 512, b, false), -EINVAL);         /* offset */
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 0, 100, b, false), -EINVAL);         /* len */
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, (1 << 20) - 512, 1024, b, false), -EINVAL);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 1 << 20, 512, b, false), -EINVAL);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, UINT64_MAX - 511, 1024, b, false), -EINVAL); /* wraps */
	CU_ASSERT_EQUAL(do_io(bs, BS_UNMAP, 512, UINT64_MAX - 511, NULL, false), -EINVAL);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 0, 512, NULL, false), -EINVAL);
	CU_ASSERT_EQUAL(do_io(bs, (enum backstore_op)99, 0, 512, b, false), -EINVAL);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, (1 << 20) - 512, 512, b, false), 0);  /* last block */
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 1 << 20, 0, b, false), 0);            /* empty at end */

	struct bs_io io = { .op = BS_WRITE_SAME, .offset = 0, .len = 1536, .buf = b,
			    .pattern_len = 1024, .cb = io_cb };
	ncomp = 0;
	backstore_submit(bs, &io);
	CU_ASSERT_EQUAL(ncomp, 1);
	CU_ASSERT_EQUAL(last_res, -EINVAL);   /* len not a multiple of the pattern */

	bool mapped;
	uint64_t run;
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 1 << 20, &mapped, &run), -EINVAL);
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 3, &mapped, &run), -EINVAL);
	/* thick: all mapped */
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 4096, &mapped, &run), 0);
	CU_ASSERT_TRUE(mapped);
	CU_ASSERT_EQUAL(run, (1 << 20) - 4096);
	backstore_close(bs);

	c.readonly = true;
	bs = open_ok(&c);
	CU_ASSERT_TRUE(backstore_readonly(bs));
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 0, 512, b, false), -EROFS);
	CU_ASSERT_EQUAL(do_io(bs, BS_UNMAP, 0, 512, NULL, false), -EROFS);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE_SAME, 0, 512, b, false), -EROFS);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 0, 512, b, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_FLUSH, 0, 0, NULL, false), 0);
	backstore_close(bs);
	free(b);
}

/* --- ram --- */

static void test_ram_io(void)
{
	/* 64 GiB: reserved, not committed, so this must not cost 64 GiB. */
	struct backstore_cfg c = { .name = "ram", .type = BACKSTORE_RAM, .size = 64ull << 30,
				   .block_size = 4096, .thin = true };
	struct backstore *bs = open_ok(&c);
	CU_ASSERT_TRUE(backstore_thin(bs));
	size_t n = 256 << 10;
	uint8_t *w = abuf(n), *r = abuf(n);
	fill(w, n, 1);
	uint64_t off = (40ull << 30) + 8192;

	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, off, n, w, true), 0);
	memset(r, 0xee, n);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, off, n, r, false), 0);
	CU_ASSERT_EQUAL(memcmp(w, r, n), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_FLUSH, 0, 0, NULL, false), 0);

	bool mapped;
	uint64_t run;
	CU_ASSERT_EQUAL(backstore_lba_status(bs, off, &mapped, &run), 0);
	CU_ASSERT_TRUE(mapped);
	CU_ASSERT_EQUAL(run, n);
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 0, &mapped, &run), 0);
	CU_ASSERT_FALSE(mapped);

	/* unmap the middle: zeroes, deallocated, edges kept */
	CU_ASSERT_EQUAL(do_io(bs, BS_UNMAP, off + 4096, 16384, NULL, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, off, n, r, false), 0);
	CU_ASSERT_EQUAL(memcmp(r, w, 4096), 0);
	CU_ASSERT_TRUE(all_zero(r + 4096, 16384));
	CU_ASSERT_EQUAL(memcmp(r + 20480, w + 20480, n - 20480), 0);
	CU_ASSERT_EQUAL(backstore_lba_status(bs, off + 4096, &mapped, &run), 0);
	CU_ASSERT_FALSE(mapped);
	CU_ASSERT_EQUAL(run, 16384);
	CU_ASSERT_EQUAL(backstore_lba_status(bs, off, &mapped, &run), 0);
	CU_ASSERT_TRUE(mapped);
	CU_ASSERT_EQUAL(run, 4096);

	/* write same: a pattern block repeated */
	uint8_t *pat = abuf(4096);
	fill(pat, 4096, 9);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE_SAME, off, 5 * 4096, pat, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, off, n, r, false), 0);
	for (int i = 0; i < 5; i++)
		CU_ASSERT_EQUAL(memcmp(r + i * 4096, pat, 4096), 0);
	CU_ASSERT_EQUAL(memcmp(r + 5 * 4096, w + 5 * 4096, n - 5 * 4096), 0);
	/* zero write same on thin deallocates */
	memset(pat, 0, 4096);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE_SAME, off, n, pat, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, off, n, r, false), 0);
	CU_ASSERT_TRUE(all_zero(r, n));
	CU_ASSERT_EQUAL(backstore_lba_status(bs, off, &mapped, &run), 0);
	CU_ASSERT_FALSE(mapped);
	backstore_close(bs);
	free(pat);
	free(w);
	free(r);
}

/* --- file --- */

static struct backstore *open_file(const char *name, uint64_t size, bool thin, bool wce)
{
	char p[256];
	path_in_tmp(p, sizeof(p), name);
	struct backstore_cfg c = { .name = name, .type = BACKSTORE_FILE, .path = p, .size = size,
				   .thin = thin, .write_cache = wce };
	return open_ok(&c);
}

static uint64_t file_blocks(const char *name)
{
	char p[256];
	struct stat st;
	path_in_tmp(p, sizeof(p), name);
	CU_ASSERT_FATAL(stat(p, &st) == 0);
	return (uint64_t)st.st_blocks;
}

static void test_file_create(void)
{
	char p[256];
	struct stat st;
	struct backstore *bs = open_file("create.img", 8 << 20, false, true);
	path_in_tmp(p, sizeof(p), "create.img");
	CU_ASSERT_EQUAL(stat(p, &st), 0);
	CU_ASSERT_EQUAL(st.st_size, 8 << 20);
	CU_ASSERT_EQUAL(backstore_size(bs), 8 << 20);
	backstore_close(bs);

	/* reopen without size: takes the file's; bigger size extends */
	struct backstore_cfg c = { .name = "again", .type = BACKSTORE_FILE, .path = p };
	bs = open_ok(&c);
	CU_ASSERT_EQUAL(backstore_size(bs), 8 << 20);
	backstore_close(bs);
	c.size = 16 << 20;
	bs = open_ok(&c);
	CU_ASSERT_EQUAL(backstore_size(bs), 16 << 20);
	CU_ASSERT_EQUAL(stat(p, &st), 0);
	CU_ASSERT_EQUAL(st.st_size, 16 << 20);
	backstore_close(bs);
	/* smaller size: exposes a prefix, leaves the file alone */
	c.size = 1 << 20;
	bs = open_ok(&c);
	CU_ASSERT_EQUAL(backstore_size(bs), 1 << 20);
	CU_ASSERT_EQUAL(stat(p, &st), 0);
	CU_ASSERT_EQUAL(st.st_size, 16 << 20);
	backstore_close(bs);
	unlink(p);
}

static void file_rw_checks(struct reactor *r)
{
	struct backstore *bs = open_file("rw.img", 8 << 20, false, true);
	size_t n = 1 << 20;
	uint8_t *w = abuf(n), *rd = abuf(n);
	fill(w, n, 2);
	CU_ASSERT_EQUAL(do_io_on(bs, r, BS_WRITE, 4096, n, w, false), 0);
	CU_ASSERT_EQUAL(do_io_on(bs, r, BS_WRITE, 4096 + n, 512, w, true), 0);   /* FUA */
	CU_ASSERT_EQUAL(do_io_on(bs, r, BS_FLUSH, 0, 0, NULL, false), 0);
	memset(rd, 0xaa, n);
	CU_ASSERT_EQUAL(do_io_on(bs, r, BS_READ, 4096, n, rd, false), 0);
	CU_ASSERT_EQUAL(memcmp(w, rd, n), 0);
	CU_ASSERT_EQUAL(do_io_on(bs, r, BS_READ, 4096 + n, 512, rd, false), 0);
	CU_ASSERT_EQUAL(memcmp(w, rd, 512), 0);
	/* what the file holds, read behind the backstore */
	char p[256];
	path_in_tmp(p, sizeof(p), "rw.img");
	int fd = open(p, O_RDONLY);
	CU_ASSERT_EQUAL(pread(fd, rd, n, 4096), (ssize_t)n);
	CU_ASSERT_EQUAL(memcmp(w, rd, n), 0);
	close(fd);
	CU_ASSERT_EQUAL(do_io_on(bs, r, BS_WRITE, 8 << 20, 512, w, false), -EINVAL);
	backstore_close(bs);
	unlink(p);
	free(w);
	free(rd);
}

static void test_file_rw_async(void)
{
	file_rw_checks(R);
}

static void test_file_rw_sync(void)
{
	/* No reactor: the synchronous path completes before submit returns. */
	file_rw_checks(NULL);
}

static void test_file_completes_later(void)
{
	struct backstore *bs = open_file("later.img", 1 << 20, false, true);
	uint8_t *b = abuf(4096);
	struct bs_io io = { .op = BS_READ, .offset = 0, .len = 4096, .buf = b, .reactor = R, .cb = io_cb };
	ncomp = 0;
	backstore_submit(bs, &io);
	CU_ASSERT_EQUAL(ncomp, 0);   /* through the ring, not inline */
	wait_for(1);
	CU_ASSERT_EQUAL(last_res, 0);
	CU_ASSERT_TRUE(all_zero(b, 4096));

	/* many in flight at once, each with its own io */
	enum { N = 16 };
	struct bs_io ios[N];
	uint8_t *w = abuf(N * 4096), *rd = abuf(N * 4096);
	fill(w, N * 4096, 3);
	ncomp = 0;
	for (int i = 0; i < N; i++) {
		ios[i] = (struct bs_io){ .op = BS_WRITE, .offset = (uint64_t)i * 4096, .len = 4096,
					 .buf = w + i * 4096, .reactor = R, .cb = io_cb };
		backstore_submit(bs, &ios[i]);
	}
	wait_for(N);
	CU_ASSERT_EQUAL(ncomp, N);
	for (int i = 0; i < N; i++)
		CU_ASSERT_EQUAL(ios[i].err, 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 0, N * 4096, rd, false), 0);
	CU_ASSERT_EQUAL(memcmp(w, rd, N * 4096), 0);
	backstore_close(bs);
	free(b);
	free(w);
	free(rd);
}

static void test_file_unmap_thin(void)
{
	struct backstore *bs = open_file("thin.img", 16 << 20, true, true);
	CU_ASSERT_TRUE(backstore_thin(bs));
	size_t n = 4 << 20;
	uint8_t *w = abuf(n), *rd = abuf(n);
	fill(w, n, 4);
	bool mapped;
	uint64_t run;
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 0, &mapped, &run), 0);
	CU_ASSERT_FALSE(mapped);
	CU_ASSERT_EQUAL(run, 16 << 20);

	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 1 << 20, n, w, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_FLUSH, 0, 0, NULL, false), 0);
	uint64_t before = file_blocks("thin.img");
	CU_ASSERT(before * 512 >= n);
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 0, &mapped, &run), 0);
	CU_ASSERT_FALSE(mapped);
	CU_ASSERT_EQUAL(run, 1 << 20);
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 1 << 20, &mapped, &run), 0);
	CU_ASSERT_TRUE(mapped);
	CU_ASSERT_EQUAL(run, n);

	/* unmap 2 MiB in the middle */
	CU_ASSERT_EQUAL(do_io(bs, BS_UNMAP, 2 << 20, 2 << 20, NULL, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 1 << 20, n, rd, false), 0);
	CU_ASSERT_EQUAL(memcmp(rd, w, 1 << 20), 0);
	CU_ASSERT_TRUE(all_zero(rd + (1 << 20), 2 << 20));
	CU_ASSERT_EQUAL(memcmp(rd + (3 << 20), w + (3 << 20), 1 << 20), 0);
	uint64_t after = file_blocks("thin.img");
	CU_ASSERT(after + (2 << 20) / 512 <= before);   /* the hole is real */
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 2 << 20, &mapped, &run), 0);
	CU_ASSERT_FALSE(mapped);
	CU_ASSERT_EQUAL(run, 2 << 20);
	CU_ASSERT_EQUAL(lseek(bs_fd(bs)->fd, 2 << 20, SEEK_HOLE), 2 << 20);

	/* zero WRITE SAME on thin punches too */
	uint8_t *z = abuf(512);
	memset(z, 0, 512);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE_SAME, 4 << 20, 1 << 20, z, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 4 << 20, 1 << 20, rd, false), 0);
	CU_ASSERT_TRUE(all_zero(rd, 1 << 20));
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 4 << 20, &mapped, &run), 0);
	CU_ASSERT_FALSE(mapped);
	CU_ASSERT_EQUAL(file_blocks("thin.img") + (1 << 20) / 512, after);
	backstore_close(bs);
	free(w);
	free(rd);
	free(z);
}

static void test_file_unmap_thick(void)
{
	struct backstore *bs = open_file("thick.img", 4 << 20, false, false);
	CU_ASSERT_FALSE(backstore_thin(bs));
	CU_ASSERT_FALSE(backstore_write_cache(bs));
	size_t n = 2 << 20;
	uint8_t *w = abuf(n), *rd = abuf(n);
	fill(w, n, 5);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 0, n, w, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_UNMAP, 512, 8192, NULL, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 0, n, rd, false), 0);
	CU_ASSERT_EQUAL(memcmp(rd, w, 512), 0);
	CU_ASSERT_TRUE(all_zero(rd + 512, 8192));
	CU_ASSERT_EQUAL(memcmp(rd + 8704, w + 8704, n - 8704), 0);
	bool mapped;
	uint64_t run;
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 512, &mapped, &run), 0);
	CU_ASSERT_TRUE(mapped);   /* thick reports mapped */
	CU_ASSERT_EQUAL(run, (4 << 20) - 512);

	/* the zero-writing fallback, as on a file system without ZERO_RANGE */
	bs_fd(bs)->no_zero = true;
	CU_ASSERT_EQUAL(do_io(bs, BS_UNMAP, 1 << 20, 3 << 20, NULL, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 0, n, rd, false), 0);
	CU_ASSERT_TRUE(all_zero(rd + (1 << 20), 1 << 20));
	CU_ASSERT_EQUAL(memcmp(rd + 8704, w + 8704, (1 << 20) - 8704), 0);
	backstore_close(bs);
	free(w);
	free(rd);
}

static void test_file_write_same(void)
{
	/* 3 MiB + 3 blocks: several fill chunks plus a partial one */
	struct backstore *bs = open_file("ws.img", 8 << 20, false, true);
	uint64_t len = (3 << 20) + 3 * 512;
	uint8_t *pat = abuf(512), *rd = abuf(len + 1024), *w = abuf(512);
	fill(pat, 512, 6);
	fill(w, 512, 7);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 512, 512, w, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 1024 + len, 512, w, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE_SAME, 1024, len, pat, true), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 512, len + 1024, rd, false), 0);
	CU_ASSERT_EQUAL(memcmp(rd, w, 512), 0);
	bool ok = true;
	for (uint64_t i = 0; i < len; i += 512)
		ok &= memcmp(rd + 512 + i, pat, 512) == 0;
	CU_ASSERT_TRUE(ok);
	CU_ASSERT_EQUAL(memcmp(rd + 512 + len, w, 512), 0);
	backstore_close(bs);
	free(pat);
	free(rd);
	free(w);
}

/* The engine's bookkeeping after partial results, step by step. */
static void test_short_io_bookkeeping(void)
{
	struct bs_fd f = { .bs = { .type = BACKSTORE_FILE, .block_size = 512, .write_cache = true }, .fd = -1,
			  .short_zeroes = true };
	struct backstore *bs = &f.bs;
	uint8_t *buf = abuf(8192);
	struct bs_io io = { .op = BS_READ, .offset = 4096, .len = 8192, .buf = buf };
	struct fd_req rq;
	CU_ASSERT_EQUAL(fd_start(bs, &io), 0);
	fd_next(bs, &io, &rq);
	CU_ASSERT_EQUAL(rq.kind, RQ_READ);
	CU_ASSERT_EQUAL(rq.pos, 4096);
	CU_ASSERT_EQUAL(rq.len, 8192);
	CU_ASSERT_EQUAL(fd_result(bs, &io, 3000), 1);    /* short: more to do */
	fd_next(bs, &io, &rq);
	CU_ASSERT_EQUAL(rq.pos, 4096 + 3000);
	CU_ASSERT_EQUAL(rq.len, 8192 - 3000);
	CU_ASSERT_PTR_EQUAL(rq.buf, buf + 3000);
	CU_ASSERT_EQUAL(fd_result(bs, &io, -EINTR), 1);  /* retried, no progress */
	CU_ASSERT_EQUAL(io.done, 3000);
	CU_ASSERT_EQUAL(fd_result(bs, &io, 8192 - 3000), 0);
	CU_ASSERT_EQUAL(io.err, 0);

	/* a short write of WRITE SAME resumes mid-pattern */
	uint8_t *pat = abuf(512);
	fill(pat, 512, 8);
	io = (struct bs_io){ .op = BS_WRITE_SAME, .offset = 0, .len = 4096, .buf = pat, .pattern_len = 512, .fua = true };
	CU_ASSERT_EQUAL(fd_start(bs, &io), 0);
	CU_ASSERT_EQUAL(io.stage, ST_FILL);
	CU_ASSERT_EQUAL(io.bounce_len, 4096);
	fd_next(bs, &io, &rq);
	CU_ASSERT_EQUAL(rq.rwf, RWF_DSYNC);
	CU_ASSERT_EQUAL(fd_result(bs, &io, 700), 1);
	fd_next(bs, &io, &rq);
	CU_ASSERT_EQUAL(rq.pos, 700);
	CU_ASSERT_EQUAL(rq.len, 4096 - 700);
	CU_ASSERT_EQUAL(((uint8_t *)rq.buf)[0], pat[700 % 512]);
	CU_ASSERT_EQUAL(fd_result(bs, &io, -EIO), 0);
	CU_ASSERT_EQUAL(io.err, -EIO);
	free(io.bounce);

	/* a write that makes no progress fails instead of looping */
	io = (struct bs_io){ .op = BS_WRITE, .offset = 0, .len = 512, .buf = buf };
	CU_ASSERT_EQUAL(fd_start(bs, &io), 0);
	CU_ASSERT_EQUAL(fd_result(bs, &io, 0), 0);
	CU_ASSERT_EQUAL(io.err, -EIO);

	/* no write cache: plain writes become FUA */
	bs->write_cache = false;
	io = (struct bs_io){ .op = BS_WRITE, .offset = 0, .len = 512, .buf = buf };
	CU_ASSERT_EQUAL(fd_start(bs, &io), 0);
	fd_next(bs, &io, &rq);
	CU_ASSERT_EQUAL(rq.rwf, RWF_DSYNC);

	/* punch refused: falls back to ZERO_RANGE, then to writes */
	bs->thin = true;
	io = (struct bs_io){ .op = BS_UNMAP, .offset = 0, .len = 4096 };
	CU_ASSERT_EQUAL(fd_start(bs, &io), 0);
	CU_ASSERT_EQUAL(io.stage, ST_PUNCH);
	CU_ASSERT_EQUAL(fd_result(bs, &io, -EOPNOTSUPP), 1);
	CU_ASSERT_TRUE(f.no_punch);
	CU_ASSERT_EQUAL(io.stage, ST_ZERO);
	CU_ASSERT_EQUAL(fd_result(bs, &io, -EOPNOTSUPP), 1);
	CU_ASSERT_EQUAL(io.stage, ST_FILL);
	CU_ASSERT_TRUE(all_zero(io.bounce, io.bounce_len));
	free(io.bounce);

	/* zeroing by fallocate without a write cache ends with a data sync */
	f.no_punch = false;
	f.no_zero = false;
	io = (struct bs_io){ .op = BS_UNMAP, .offset = 0, .len = 4096 };
	CU_ASSERT_EQUAL(fd_start(bs, &io), 0);
	CU_ASSERT_EQUAL(fd_result(bs, &io, 0), 1);
	CU_ASSERT_EQUAL(io.stage, ST_SYNC_AFTER);
	fd_next(bs, &io, &rq);
	CU_ASSERT_EQUAL(rq.kind, RQ_FSYNC);
	CU_ASSERT_EQUAL(fd_result(bs, &io, 0), 0);
	CU_ASSERT_EQUAL(io.err, 0);
	free(buf);
	free(pat);
}

/* End to end: a file truncated behind the backstore gives short reads, then EOF. */
static void test_short_read_file(void)
{
	struct backstore *bs = open_file("short.img", 64 << 10, false, true);
	uint8_t *w = abuf(64 << 10), *rd = abuf(64 << 10);
	fill(w, 64 << 10, 10);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 0, 64 << 10, w, false), 0);
	CU_ASSERT_EQUAL(ftruncate(bs_fd(bs)->fd, 5000), 0);
	memset(rd, 0xcc, 64 << 10);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 4096, 8192, rd, false), 0);
	CU_ASSERT_EQUAL(memcmp(rd, w + 4096, 5000 - 4096), 0);
	CU_ASSERT_TRUE(all_zero(rd + (5000 - 4096), 8192 - (5000 - 4096)));
	backstore_close(bs);
	free(w);
	free(rd);
}

/* --- block, on a loop device if this host lets us make one --- */

static int loop_attach(const char *img, char *dev, size_t n)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return -1;
	int ffd = open(img, O_RDWR | O_CLOEXEC);
	for (int tries = 0; tries < 5 && ffd >= 0; tries++) {
		int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (nr < 0)
			break;
		snprintf(dev, n, "/dev/loop%d", nr);
		int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			break;
		if (ioctl(lfd, LOOP_SET_FD, ffd) == 0) {
			close(ffd);
			close(ctl);
			return lfd;
		}
		close(lfd);   /* lost a race for this one: try the next */
	}
	if (ffd >= 0)
		close(ffd);
	close(ctl);
	return -1;
}

static void test_block_loop(void)
{
	char img[256], dev[64];
	path_in_tmp(img, sizeof(img), "loop.img");
	int fd = open(img, O_CREAT | O_RDWR, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(ftruncate(fd, 16 << 20), 0);
	close(fd);
	int lfd = loop_attach(img, dev, sizeof(dev));
	if (lfd < 0) {
		fprintf(stderr, "\n  (no loop device here: block I/O is left to the VM harness)\n");
		unlink(img);
		return;
	}

	struct backstore_cfg c = { .name = "loopdisk", .type = BACKSTORE_BLOCK, .path = dev, .thin = true };
	struct backstore *bs = open_ok(&c);
	CU_ASSERT_EQUAL(backstore_size(bs), 16 << 20);
	CU_ASSERT_EQUAL(backstore_block_size(bs), 512);
	CU_ASSERT_TRUE(bs_fd(bs)->direct);

	/* the device is claimed: a second read-write open is refused, naming the path */
	struct backstore *bs2 = NULL;
	char err[256];
	c.name = "again";
	CU_ASSERT_EQUAL(backstore_open(&c, &bs2, err, sizeof(err)), -EBUSY);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, dev));
	c.size = 32 << 20;
	c.readonly = true;
	CU_ASSERT_EQUAL(backstore_open(&c, &bs2, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "size"));

	struct bufpool *bp = bufpool_create();
	CU_ASSERT_FATAL(bp != NULL);
	struct buf *wb = bufpool_get(bp, 1 << 20), *rb = bufpool_get(bp, 1 << 20);
	CU_ASSERT_FATAL(wb && rb);
	fill(wb->data, 1 << 20, 11);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 8192, 1 << 20, wb->data, true), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_FLUSH, 0, 0, NULL, false), 0);
	memset(rb->data, 0, 1 << 20);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 8192, 1 << 20, rb->data, false), 0);
	CU_ASSERT_EQUAL(memcmp(wb->data, rb->data, 1 << 20), 0);

	/* misaligned buffers go through a bounce buffer */
	uint8_t *raw = malloc(8192 + 8);
	uint8_t *mis = raw + 8;
	fill(mis, 8192, 12);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE, 4 << 20, 8192, mis, false), 0);
	memset(mis, 0, 8192);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 8192, 8192, mis, false), 0);
	CU_ASSERT_EQUAL(memcmp(mis, wb->data, 8192), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 4 << 20, 4096, rb->data, false), 0);
	fill(mis, 8192, 12);
	CU_ASSERT_EQUAL(memcmp(rb->data, mis, 4096), 0);

	/* unmap reads back zeroes, whichever way the device managed it */
	CU_ASSERT_EQUAL(do_io(bs, BS_UNMAP, 8192 + 4096, 65536, NULL, false), 0);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 8192, 1 << 20, rb->data, false), 0);
	CU_ASSERT_EQUAL(memcmp(rb->data, wb->data, 4096), 0);
	CU_ASSERT_TRUE(all_zero(rb->data + 4096, 65536));
	CU_ASSERT_EQUAL(memcmp(rb->data + 4096 + 65536, wb->data + 4096 + 65536, (1 << 20) - 4096 - 65536), 0);

	/* write same with a pattern */
	fill(mis, 512, 13);
	CU_ASSERT_EQUAL(do_io(bs, BS_WRITE_SAME, 2 << 20, (1 << 20) + 1024, mis, false), 0);
	bool ok = true;
	for (uint64_t off = 0; off < (1 << 20) + 1024; off += 1 << 20) {
		uint64_t l = (1 << 20) + 1024 - off < (1 << 20) ? (1 << 20) + 1024 - off : (1 << 20);
		CU_ASSERT_EQUAL(do_io(bs, BS_READ, (2 << 20) + off, l, rb->data, false), 0);
		for (uint64_t i = 0; i < l; i += 512)
			ok &= memcmp(rb->data + i, mis, 512) == 0;
	}
	CU_ASSERT_TRUE(ok);
	bool mapped;
	uint64_t run;
	CU_ASSERT_EQUAL(backstore_lba_status(bs, 0, &mapped, &run), 0);
	CU_ASSERT_TRUE(mapped);
	CU_ASSERT_EQUAL(do_io(bs, BS_READ, 16 << 20, 512, rb->data, false), -EINVAL);

	bufpool_put(wb);
	bufpool_put(rb);
	bufpool_destroy(bp);
	free(raw);
	backstore_close(bs);
	ioctl(lfd, LOOP_CLR_FD);
	close(lfd);
	unlink(img);
}

static int suite_init(void)
{
	if (!mkdtemp(tmpdir))
		return -1;
	R = reactor_create(0, REACTOR_EVENT);
	return R ? 0 : -1;
}

static int suite_clean(void)
{
	reactor_destroy(R);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("backstore", suite_init, suite_clean);
	CU_add_test(s, "kinds", test_kinds);
	CU_add_test(s, "open errors", test_open_errors);
	CU_add_test(s, "argument checks (ram)", test_ram_args);
	CU_add_test(s, "ram io", test_ram_io);
	CU_add_test(s, "ram atomic write", test_ram_atomic);
	CU_add_test(s, "ram views and atomic writes: only their blocks wait, bounded, abortable", test_ram_views);
	CU_add_test(s, "ram preallocated, registered on demand", test_ram_preallocate);
	CU_add_test(s, "file create/extend", test_file_create);
	CU_add_test(s, "file rw io_uring", test_file_rw_async);
	CU_add_test(s, "file rw sync", test_file_rw_sync);
	CU_add_test(s, "file completes later", test_file_completes_later);
	CU_add_test(s, "file unmap thin", test_file_unmap_thin);
	CU_add_test(s, "file unmap thick", test_file_unmap_thick);
	CU_add_test(s, "file write same", test_file_write_same);
	CU_add_test(s, "short io bookkeeping", test_short_io_bookkeeping);
	CU_add_test(s, "short read file", test_short_read_file);
	CU_add_test(s, "block loop", test_block_loop);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
