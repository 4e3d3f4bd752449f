/*
 * Memory that a connection's own RDMA work requests read (the source of an
 * RDMA WRITE), registered with each RDMA device at its first use there: a
 * preallocated RAM store sends iSER Data-In straight from its pages.  The
 * registration runs on a thread of its own (pinning a large region takes
 * long, and no reactor must wait for it); until it is done, and where it
 * failed, memreg_lkey() says 0 and the caller copies into a pool buffer as
 * before.  Shared by every reactor; the region must stay mapped and must not
 * change its pages (no MADV_DONTNEED, no mremap) until memreg_destroy().
 */
#ifndef MEMREG_H
#define MEMREG_H

#include <stddef.h>
#include <stdint.h>

struct memreg;
struct xp_conn;

/* what names the region in messages ("backstore ram0"); NULL when out of memory. */
struct memreg *memreg_create(void *addr, size_t len, const char *what);
/* Waits for registrations under way, then deregisters from every device.  No work request may still use it. */
void memreg_destroy(struct memreg *m);
/*
 * The region's lkey on the device xc runs on: 0 when xc is no RDMA
 * connection, while the registration there is under way (the first call
 * for a device starts it) and when it failed (logged once per device).
 */
uint32_t memreg_lkey(struct memreg *m, struct xp_conn *xc);

#endif
