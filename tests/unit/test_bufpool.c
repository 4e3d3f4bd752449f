/*
 * Unit tests for common/bufpool.c: size classes, the byte cap a peer cannot
 * push the pool past, slabs beyond the warm size given back once free, the
 * registration hook called once per slab and device (never per buffer), and
 * several devices: lazy registration of existing slabs, the device cap, a
 * device that went away, registration failures.
 */
#include <CUnit/Basic.h>
#include <errno.h>
#include <stdint.h>

#include "common/bufpool.h"

#include "unit_run.h"

static int regs, deregs;

static int reg(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey, void **handle)
{
	regs++;
	*lkey = *rkey = 7;
	*handle = addr;
	return 0;
}

static void dereg(void *ctx, void *handle)
{
	deregs++;
}

static void test_classes(void)
{
	CU_ASSERT_EQUAL(bufpool_buf_size(0), 4096);
	CU_ASSERT_EQUAL(bufpool_buf_size(4097), 8192);
	CU_ASSERT_EQUAL(bufpool_buf_size(1 << 20), 1 << 20);
	CU_ASSERT_EQUAL(bufpool_buf_size((size_t)1 << 40), 0);
	struct bufpool *p = bufpool_create();
	struct buf *b = bufpool_get(p, 5000);
	CU_ASSERT_FATAL(b != NULL);
	CU_ASSERT_EQUAL(b->cap, 8192);
	CU_ASSERT_EQUAL(bufpool_in_use(p), 1);
	bufpool_put(b);
	CU_ASSERT_EQUAL(bufpool_in_use(p), 0);
	CU_ASSERT_PTR_NULL(bufpool_get(p, (size_t)1 << 40));
	bufpool_destroy(p);
}

/* The cap: past it bufpool_get fails and bufpool_has_room says so first. */
static void test_cap(void)
{
	struct bufpool *p = bufpool_create();
	bufpool_set_limits(p, 16u << 20, SIZE_MAX);
	struct buf *b[8];
	for (int i = 0; i < 4; i++) {
		CU_ASSERT(bufpool_has_room(p, 4u << 20));
		b[i] = bufpool_get(p, 4u << 20);
		CU_ASSERT_FATAL(b[i] != NULL);
	}
	CU_ASSERT_EQUAL(bufpool_bytes(p), 16u << 20);
	CU_ASSERT_FALSE(bufpool_has_room(p, 4096));
	CU_ASSERT_PTR_NULL(bufpool_get(p, 4096));
	bufpool_put(b[0]);
	/* A free 4 MiB buffer is room for its class, not for a new slab of another. */
	CU_ASSERT(bufpool_has_room(p, 4u << 20));
	CU_ASSERT_FALSE(bufpool_has_room(p, 4096));
	for (int i = 1; i < 4; i++)
		bufpool_put(b[i]);
	bufpool_destroy(p);
}

/* Beyond the warm size a slab whose buffers all came back is unmapped and deregistered. */
static void test_give_back(void)
{
	struct bufpool *p = bufpool_create();
	struct bufpool_reg_ops ops = { .reg = reg, .dereg = dereg };
	regs = deregs = 0;
	bufpool_set_limits(p, 64u << 20, 8u << 20);
	CU_ASSERT_EQUAL(bufpool_dev_attach(p, &ops), 0);
	struct buf *b[6];
	for (int i = 0; i < 6; i++) {
		b[i] = bufpool_get(p, 2u << 20); /* two per 4 MiB slab */
		CU_ASSERT_FATAL(b[i] != NULL);
		CU_ASSERT_EQUAL(b[i]->keys[0].lkey, 7);
	}
	CU_ASSERT_EQUAL(regs, 3);
	CU_ASSERT_EQUAL(bufpool_bytes(p), 12u << 20);
	for (int i = 0; i < 6; i++)
		bufpool_put(b[i]);
	/* 12 MiB held, 8 warm: the first slab to empty went; the rest stay for the next burst. */
	CU_ASSERT_EQUAL(bufpool_bytes(p), 8u << 20);
	CU_ASSERT_EQUAL(deregs, 1);
	struct buf *again = bufpool_get(p, 2u << 20);
	CU_ASSERT_EQUAL(regs, 3); /* warm: no new registration */
	bufpool_put(again);
	bufpool_destroy(p);
	CU_ASSERT_EQUAL(deregs, 3);
}

/*
 * A fake RDMA device: keys say which device and which registration they
 * came from; live counts what is registered now; fail_at makes the n-th
 * registration from now fail.
 */
struct fake_dev {
	uint32_t id;
	unsigned regs, live;
	int fail_at;
};

static int fake_reg(void *ctx, void *addr, size_t len, uint32_t *lkey, uint32_t *rkey, void **handle)
{
	struct fake_dev *d = ctx;
	if (d->fail_at && --d->fail_at == 0)
		return -EIO;
	d->regs++;
	d->live++;
	*lkey = d->id << 16 | d->regs;
	*rkey = *lkey | 0x8000;
	*handle = d;
	return 0;
}

static void fake_dereg(void *ctx, void *handle)
{
	struct fake_dev *d = ctx;
	CU_ASSERT_PTR_EQUAL(handle, d);
	CU_ASSERT_FATAL(d->live > 0);
	d->live--;
}

static int attach(struct bufpool *p, struct fake_dev *d)
{
	struct bufpool_reg_ops ops = { .reg = fake_reg, .dereg = fake_dereg, .ctx = d };
	return bufpool_dev_attach(p, &ops);
}

/* Device index d's keys on b, registered with device dev. */
static bool keys_of(const struct buf *b, int d, const struct fake_dev *dev)
{
	return b->keys[d].lkey >> 16 == dev->id && b->keys[d].rkey == (b->keys[d].lkey | 0x8000);
}

/*
 * Slabs made before a device came are registered when it attaches; later
 * slabs are registered with every device; each buffer carries each device's
 * keys at that device's index.
 */
static void test_devices_lazy(void)
{
	struct fake_dev a = { .id = 1 }, b = { .id = 2 };
	struct bufpool *p = bufpool_create();
	struct buf *x = bufpool_get(p, 4096), *y = bufpool_get(p, 1u << 20);
	CU_ASSERT_FATAL(x && y);
	CU_ASSERT_EQUAL(x->keys[0].lkey, 0);
	CU_ASSERT_EQUAL(bufpool_ndevs(p), 0);
	CU_ASSERT_EQUAL(attach(p, &a), 0);
	CU_ASSERT_EQUAL(a.regs, 2); /* both existing slabs, at once */
	CU_ASSERT(keys_of(x, 0, &a) && keys_of(y, 0, &a));
	CU_ASSERT_EQUAL(attach(p, &a), 0); /* the same device again: no new registration */
	CU_ASSERT_EQUAL(a.regs, 2);
	struct buf *z = bufpool_get(p, 64u << 10);
	CU_ASSERT_FATAL(z != NULL);
	CU_ASSERT_EQUAL(a.regs, 3);
	CU_ASSERT(keys_of(z, 0, &a));
	CU_ASSERT_EQUAL(attach(p, &b), 1);
	CU_ASSERT_EQUAL(b.regs, 3);
	CU_ASSERT_EQUAL(bufpool_ndevs(p), 2);
	CU_ASSERT(keys_of(x, 1, &b) && keys_of(y, 1, &b) && keys_of(z, 1, &b));
	CU_ASSERT(keys_of(x, 0, &a)); /* the first device's keys untouched */
	struct buf *w = bufpool_get(p, 2u << 20);
	CU_ASSERT_FATAL(w != NULL);
	CU_ASSERT_EQUAL(a.regs, 4);
	CU_ASSERT_EQUAL(b.regs, 4);
	CU_ASSERT(keys_of(w, 0, &a) && keys_of(w, 1, &b));
	/* A buffer of an existing slab: no registration at all. */
	struct buf *v = bufpool_get(p, 4096);
	CU_ASSERT(keys_of(v, 0, &a) && keys_of(v, 1, &b));
	CU_ASSERT_EQUAL(a.regs + b.regs, 8);
	bufpool_put(v);
	bufpool_put(w);
	bufpool_put(z);
	bufpool_put(y);
	bufpool_put(x);
	bufpool_destroy(p);
	CU_ASSERT_EQUAL(a.live, 0);
	CU_ASSERT_EQUAL(b.live, 0);
}

/* BUFPOOL_MAX_DEVS devices, then -E2BIG with nothing registered for the next one. */
static void test_device_cap(void)
{
	struct fake_dev d[BUFPOOL_MAX_DEVS + 1];
	struct bufpool *p = bufpool_create();
	struct buf *x = bufpool_get(p, 4096);
	for (int i = 0; i <= BUFPOOL_MAX_DEVS; i++)
		d[i] = (struct fake_dev){ .id = (uint32_t)i + 1 };
	for (int i = 0; i < BUFPOOL_MAX_DEVS; i++)
		CU_ASSERT_EQUAL(attach(p, &d[i]), i);
	CU_ASSERT_EQUAL(attach(p, &d[BUFPOOL_MAX_DEVS]), -E2BIG);
	CU_ASSERT_EQUAL(d[BUFPOOL_MAX_DEVS].regs, 0);
	CU_ASSERT_EQUAL(bufpool_ndevs(p), BUFPOOL_MAX_DEVS);
	/* A known device still attaches at the cap. */
	CU_ASSERT_EQUAL(attach(p, &d[3]), 3);
	for (int i = 0; i < BUFPOOL_MAX_DEVS; i++)
		CU_ASSERT(keys_of(x, i, &d[i]));
	bufpool_put(x);
	bufpool_destroy(p);
	for (int i = 0; i < BUFPOOL_MAX_DEVS; i++)
		CU_ASSERT_EQUAL(d[i].live, 0);
}

/*
 * Detaching keeps the registrations for the next connection; a device that
 * went away is deregistered with its last user, and its index is reused.
 */
static void test_device_gone(void)
{
	struct fake_dev a = { .id = 1 }, b = { .id = 2 }, c = { .id = 3 };
	struct bufpool *p = bufpool_create();
	struct buf *x = bufpool_get(p, 4096), *y = bufpool_get(p, 1u << 20);
	CU_ASSERT_EQUAL(attach(p, &a), 0);
	CU_ASSERT_EQUAL(attach(p, &a), 0);
	CU_ASSERT_EQUAL(attach(p, &b), 1);
	CU_ASSERT_FALSE(bufpool_dev_detach(p, 1));
	CU_ASSERT_EQUAL(b.live, 2); /* no user, still registered */
	CU_ASSERT_EQUAL(bufpool_dev_find(p, &b), 1);
	CU_ASSERT_EQUAL(bufpool_dev_find(p, &c), -1);
	CU_ASSERT_EQUAL(attach(p, &b), 1);
	CU_ASSERT_EQUAL(b.regs, 2);
	CU_ASSERT_FALSE(bufpool_dev_gone(p, 0));
	CU_ASSERT_EQUAL(a.live, 2); /* two users left */
	CU_ASSERT_EQUAL(bufpool_dev_find(p, &a), -1); /* gone: not found any more */
	/* A new connection on the same ctx does not join a device that went away. */
	CU_ASSERT_EQUAL(attach(p, &a), 2);
	CU_ASSERT_EQUAL(a.live, 4);
	bufpool_dev_detach(p, 2);
	bufpool_dev_gone(p, 2);
	CU_ASSERT_EQUAL(a.live, 2);
	CU_ASSERT_FALSE(bufpool_dev_detach(p, 0));
	CU_ASSERT_EQUAL(a.live, 2);
	CU_ASSERT_TRUE(bufpool_dev_detach(p, 0));
	CU_ASSERT_EQUAL(a.live, 0);
	CU_ASSERT_EQUAL(x->keys[0].lkey, 0);
	CU_ASSERT_EQUAL(y->keys[0].rkey, 0);
	CU_ASSERT(keys_of(x, 1, &b));
	CU_ASSERT_EQUAL(bufpool_ndevs(p), 1);
	CU_ASSERT_FALSE(bufpool_dev_detach(p, 0)); /* once too often: ignored */
	CU_ASSERT_FALSE(bufpool_dev_detach(p, 7));
	CU_ASSERT_FALSE(bufpool_dev_detach(p, -1));
	CU_ASSERT_FALSE(bufpool_dev_gone(p, -1)); /* bufpool_dev_find's "none" */
	CU_ASSERT_EQUAL(attach(p, &c), 0); /* index 0 free again */
	CU_ASSERT(keys_of(x, 0, &c) && keys_of(y, 0, &c));
	/* Gone with no user: deregistered at once. */
	bufpool_dev_detach(p, 1);
	CU_ASSERT_TRUE(bufpool_dev_gone(p, 1));
	CU_ASSERT_EQUAL(b.live, 0);
	CU_ASSERT_FALSE(bufpool_dev_gone(p, 1)); /* once only */
	CU_ASSERT_EQUAL(x->keys[1].lkey, 0);
	bufpool_put(x);
	bufpool_put(y);
	bufpool_destroy(p);
	CU_ASSERT_EQUAL(c.live, 0);
	CU_ASSERT_EQUAL(a.live + b.live, 0);
}

/*
 * A device whose registration fails is not attached and keeps nothing; a new
 * slab that one device cannot register is given back whole (no buffer, no
 * registration left with the others).
 */
static void test_reg_failure(void)
{
	struct fake_dev a = { .id = 1 }, b = { .id = 2 };
	struct bufpool *p = bufpool_create();
	struct buf *x = bufpool_get(p, 4096), *y = bufpool_get(p, 1u << 20), *z = bufpool_get(p, 2u << 20);
	CU_ASSERT_EQUAL(attach(p, &a), 0);
	b.fail_at = 2; /* the second of three slabs */
	CU_ASSERT_EQUAL(attach(p, &b), -EIO);
	CU_ASSERT_EQUAL(b.live, 0);
	CU_ASSERT_EQUAL(bufpool_ndevs(p), 1);
	for (int i = 0; i < 3; i++) {
		struct buf *q = i == 0 ? x : i == 1 ? y : z;
		CU_ASSERT_EQUAL(q->keys[1].lkey, 0);
		CU_ASSERT(keys_of(q, 0, &a));
	}
	CU_ASSERT_EQUAL(attach(p, &b), 1); /* it works the next time */
	CU_ASSERT_EQUAL(b.live, 3);
	size_t bytes = bufpool_bytes(p);
	b.fail_at = 1;
	CU_ASSERT_PTR_NULL(bufpool_get(p, 64u << 10)); /* a new slab: b refuses it */
	CU_ASSERT_EQUAL(bufpool_bytes(p), bytes);
	CU_ASSERT_EQUAL(a.live, 3);
	CU_ASSERT_EQUAL(b.live, 3);
	CU_ASSERT_EQUAL(bufpool_in_use(p), 3);
	struct buf *w = bufpool_get(p, 64u << 10);
	CU_ASSERT_FATAL(w != NULL);
	CU_ASSERT(keys_of(w, 0, &a) && keys_of(w, 1, &b));
	bufpool_put(w);
	bufpool_put(x);
	bufpool_put(y);
	bufpool_put(z);
	bufpool_destroy(p);
	CU_ASSERT_EQUAL(a.live + b.live, 0);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("bufpool", NULL, NULL);
	CU_add_test(s, "size classes", test_classes);
	CU_add_test(s, "byte cap", test_cap);
	CU_add_test(s, "slabs beyond the warm size given back", test_give_back);
	CU_add_test(s, "several devices, existing slabs registered lazily", test_devices_lazy);
	CU_add_test(s, "device cap", test_device_cap);
	CU_add_test(s, "a device that went away is deregistered with its last user", test_device_gone);
	CU_add_test(s, "registration failures leave nothing registered", test_reg_failure);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
