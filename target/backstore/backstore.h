/*
 * Backstore: where a LUN's blocks live.  CDB parsing and emulation stay in
 * target/scsi/; a backstore only moves bytes.  Every operation is
 * asynchronous and completes on the reactor that submitted it (through that
 * reactor's io_uring for file and block), by calling io->cb.  The callback
 * may run before backstore_submit() returns (ram does so).
 */
#ifndef BACKSTORE_H
#define BACKSTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/reactor.h"

struct reactor;
struct backstore;
struct memreg;

/*
 * Every backstore kind, one line each: X(TYPE, name, noun, product, caps).
 * TYPE names BACKSTORE_TYPE; name is the configuration's "type" and the
 * kind's file (target/backstore/NAME.c), which defines bs_NAME_ops
 * (backstore_impl.h).  noun, product and caps (BS_KIND_*, below) are what
 * the configuration and the SCSI layer ask of a kind before anything is
 * opened: they sit here, not in the kind's file, so that the configuration
 * library (also iserctl's) links them without the I/O code.  The order is
 * the order the configuration's error message lists them in.
 */
#define BACKSTORE_KINDS(X)                                                                                        \
	X(RAM, ram, "a ram backstore", "RAM", BS_KIND_SIZE | BS_KIND_NONROTATING | BS_KIND_VOLATILE | BS_KIND_PREALLOC) \
	X(FILE, file, "a file backstore", "FILE", BS_KIND_PATH | BS_KIND_GROW)                                     \
	X(BLOCK, block, "a block backstore", "BLOCK", BS_KIND_PATH | BS_KIND_FOLLOW)                               \
	X(NVME, nvme, "an nvme backstore", "NVME", BS_KIND_PATH | BS_KIND_FOLLOW | BS_KIND_OWN_ID)                 \
	X(RBD, rbd, "an rbd backstore", "RBD", BS_KIND_IMAGE | BS_KIND_GROW | BS_KIND_OWN_ID)

#define BACKSTORE_TYPE_ENUM(T, ...) BACKSTORE_##T,
enum backstore_type { BACKSTORE_KINDS(BACKSTORE_TYPE_ENUM) BACKSTORE_NTYPES };

/* Where an rbd backstore's image lives (rbd.c); NULL fields take librados' defaults. */
struct backstore_rbd_cfg {
	char *pool;            /* required */
	char *image;           /* required */
	char *ns;              /* RBD namespace in the pool; NULL: the default one */
	char *cluster;         /* cluster name (NULL: "ceph") */
	char *client_id;       /* cephx user without "client." (NULL: "admin") */
	char *conf;            /* ceph.conf path (NULL: librados' search: $CEPH_CONF, /etc/ceph/...) */
	char *keyring;         /* keyring path (NULL: as ceph.conf says) */
};

struct backstore_cfg {
	const char *name;
	enum backstore_type type;
	const char *path;      /* file, block, nvme (the namespace's generic char device /dev/ngXnY) */
	uint64_t size;         /* bytes; ram: required; file: creates/extends if the file is smaller; block, nvme: 0 = device size;
	                          rbd: grows the image if smaller, 0 = the image size */
	uint32_t block_size;   /* 512 or 4096; 0 = default (512, or the device's logical block size; nvme: must be the LBA size) */
	bool thin;             /* file: UNMAP punches holes; block: UNMAP discards (if the device can); nvme: deallocates */
	bool write_cache;      /* report a volatile write cache (WCE); FUA and flush are honoured anyway */
	bool readonly;         /* open read-only */
	bool preallocate;      /* ram: every page allocated at open, and iSER reads sent from them (not with thin) */
	struct backstore_rbd_cfg rbd;  /* rbd */
};

enum backstore_op {
	BS_READ,        /* buf <- [offset, offset+len) */
	BS_WRITE,       /* buf -> [offset, offset+len); fua: durable before completion */
	BS_FLUSH,       /* everything written is durable */
	BS_UNMAP,       /* deallocate [offset, offset+len): reads back zeroes afterwards */
	BS_WRITE_SAME,  /* repeat buf (pattern_len bytes, one block) over [offset, offset+len) */
	/*
	 * BS_WRITE, all or nothing: a concurrent BS_READ of the range sees all
	 * of the old data or all of the new, never a mix.  Only where
	 * backstore_atomic_max() is not 0, and len at most that (else -EOPNOTSUPP).
	 */
	BS_WRITE_ATOMIC,
	/*
	 * COMPARE AND WRITE done by the store itself, atomic against every
	 * client of the store (other gateways too): buf holds len bytes to
	 * compare, then len bytes to write.  A mismatch completes with
	 * -EILSEQ and io->miscompare set to the offset of the first differing
	 * byte.  Only ranges within one aligned unit of
	 * backstore_compare_write_max() bytes (else -EOPNOTSUPP).
	 */
	BS_COMPARE_WRITE,
};

struct bs_io {
	enum backstore_op op;
	uint64_t offset;       /* bytes, multiple of block size */
	uint64_t len;          /* bytes */
	void *buf;
	uint32_t pattern_len;  /* BS_WRITE_SAME */
	bool fua;
	struct reactor *reactor;                /* where to complete: the caller's */
	void (*cb)(struct bs_io *io, int res);  /* res: 0 or -errno */
	void *priv;                             /* caller's */
	/* BS_WRITE_ATOMIC: while it waits for views of its blocks (backstore_read_view), *stop (read on
	 * io->reactor) true ends it with -ECANCELED, nothing written; NULL: never. */
	const bool *stop;
	/* backend private state */
	uint64_t done;
	int inflight;
	int err;
	struct reactor_uring_op uop;  /* the one SQE in flight (file, block) */
	struct backstore *bs;
	void *bounce;                 /* O_DIRECT bounce or WRITE_SAME pattern buffer */
	uint32_t bounce_len;
	int stage;
	uint64_t miscompare;          /* BS_COMPARE_WRITE: offset of the first differing byte */
	uint64_t until_ns;            /* ram BS_WRITE_ATOMIC: when the views it waits for are revoked */
	struct bs_io *next;           /* ram BS_WRITE_ATOMIC: the store's list of those under way */
};

/*
 * A backstore type: what its configuration needs and what it can do
 * (kinds.c).  Nothing outside target/backstore/ switches on the type; it
 * asks its kind (tests/docs/check-backstore-types.sh checks).
 */
enum {
	BS_KIND_PATH        = 1u << 0,  /* needs "path" (and refuses pool/image) */
	BS_KIND_SIZE        = 1u << 1,  /* needs a "size" greater than 0 */
	BS_KIND_IMAGE       = 1u << 2,  /* an RBD image: "pool" and "image", no path; thin by default; size 0 = the image's */
	BS_KIND_GROW        = 1u << 3,  /* a larger configured size grows it while it runs */
	BS_KIND_FOLLOW      = 1u << 4,  /* its size is its device's: a changed size reads the device again */
	BS_KIND_OWN_ID      = 1u << 5,  /* the store has an identity of its own: the LU's serial unless one is configured */
	BS_KIND_NONROTATING = 1u << 6,  /* reported as a non-rotating medium (VPD B1) */
	BS_KIND_VOLATILE    = 1u << 7,  /* its blocks do not outlive the process (nothing to sanitize after a crash) */
	BS_KIND_PREALLOC    = 1u << 8,  /* may be "preallocate"d: its memory allocated at open (not thin) */
};
struct backstore_kind {
	enum backstore_type type;
	const char *name;       /* in the configuration: "ram" */
	const char *noun;       /* in messages: "a ram backstore" */
	const char *product;    /* INQUIRY's product unless one is configured */
	unsigned caps;          /* BS_KIND_* */
};
const struct backstore_kind *backstore_kind(enum backstore_type type);
/* NULL: no such type. */
const struct backstore_kind *backstore_kind_named(const char *name);
/* Every kind's name, for a message: "\"ram\", \"file\", ... or \"rbd\"" (truncated to buflen). */
const char *backstore_kind_names(char *buf, size_t buflen);
/* Has type any of caps? */
bool backstore_kind_has(enum backstore_type type, unsigned caps);

/*
 * A running backstore's configured size changes from was to want while it
 * has have bytes: nothing to do, backstore_resize(want), or refused (why
 * filled: "... cannot be resized while it runs", "... is smaller than ...").
 */
enum bs_resize { BS_RESIZE_NONE, BS_RESIZE_DO, BS_RESIZE_REFUSED };
enum bs_resize backstore_resize_rule(enum backstore_type type, uint64_t was, uint64_t want, uint64_t have,
				     char *why, size_t whylen);

/*
 * The rules on block_size and size that hold before anything is opened (the
 * configuration loader and backstore_open both ask here): NULL, or the
 * field that breaks one, with why filled ("must be ..., got ...").
 */
const char *backstore_check_geometry(enum backstore_type type, uint64_t size, uint32_t block_size, char *why,
				     size_t whylen);
/* The same for preallocate: only where the kind has BS_KIND_PREALLOC, never with thin. */
const char *backstore_check_preallocate(enum backstore_type type, bool thin, bool preallocate, char *why,
					size_t whylen);
/* Open per cfg; on failure returns -errno and writes a message naming the field/path to err. */
int backstore_open(const struct backstore_cfg *cfg, struct backstore **out, char *err, size_t errlen);
void backstore_close(struct backstore *bs);
/*
 * Grow to size bytes, never shrink (file: extends the file; rbd: resizes the image; block, nvme:
 * size 0 or the device's size, to follow the device); ram refuses.  backstore_on_resize()'s fn is
 * not called: the caller tells the LU (scsi_lu_capacity_changed).
 */
int backstore_resize(struct backstore *bs, uint64_t size, char *err, size_t errlen);

const char *backstore_name(const struct backstore *bs);
enum backstore_type backstore_type(const struct backstore *bs);
uint64_t backstore_size(const struct backstore *bs);        /* bytes, multiple of block size */
uint32_t backstore_block_size(const struct backstore *bs);
bool backstore_readonly(const struct backstore *bs);
bool backstore_write_cache(const struct backstore *bs);
/* Live change by the admin (the LU's WCE follows: scsi_lu_set_write_cache). */
void backstore_set_write_cache(struct backstore *bs, bool on);
bool backstore_thin(const struct backstore *bs);            /* UNMAP deallocates */
/* After BS_UNMAP, do reads return zeroes?  (LBPRZ; false for a block device's discard.) */
bool backstore_unmap_zeroes(const struct backstore *bs);
/* Optimal/maximum I/O hints for VPD B0 (bytes, 0 = no preference). */
uint32_t backstore_optimal_io(const struct backstore *bs);
/* Largest BS_WRITE_ATOMIC in bytes; 0: atomic writes are not offered. */
uint32_t backstore_atomic_max(const struct backstore *bs);
/*
 * BS_COMPARE_WRITE's unit in bytes: a range fits if it lies within one
 * aligned unit of this size (librbd: one 512-byte sector); 0: not offered.
 */
uint32_t backstore_compare_write_max(const struct backstore *bs);
/* Does [offset, offset+len) fit one BS_COMPARE_WRITE? */
bool backstore_compare_write_fits(const struct backstore *bs, uint64_t offset, uint64_t len);
/*
 * Can other targets serve the same blocks (an RBD image behind two
 * gateways)?  State kept in this process only (persistent reservations)
 * would then be silently wrong: the SCSI layer keeps it in the store's
 * shared state below, or refuses it where the store has none.
 */
bool backstore_shared(const struct backstore *bs);

/*
 * State kept together by every target serving the same store (the
 * sharers, one per process, each known by an id), in shared objects beside
 * the store: each is changed only by compare-and-set of its version, is
 * watched by every sharer (through it one notifies the others and waits
 * for each one's acknowledgement), and has its list of sharers with the
 * address that fences one (its access cut, so nothing it still sends can
 * land).  An LU's reservations are the object "state" of its store; a
 * target's ALUA states the object "alua" of the store it names.  rbd keeps
 * them in RADOS beside the image (rbd_state.c).  Every call blocks on the
 * cluster: never call one on a reactor.  -ENOTSUP where the store has no
 * shared objects.
 */
struct bs_shared;
struct bs_sharer {
	uint64_t id;
	char addr[128];          /* what fencing it cuts off */
	char desc[512];          /* who it is (JSON its own joiner wrote), for the operator and its peers */
};
struct bs_notify_result {
	uint64_t *acked;         /* sharers that acknowledged */
	size_t nacked;
	uint64_t *missed;        /* sharers watching that did not acknowledge in time */
	size_t nmissed;
};
/* Called on the store's thread for each notification (notifier: the sharer that sent it). */
typedef void (*bs_notify_fn)(void *arg, uint64_t notify_id, uint64_t notifier, const void *data, size_t len);
/* The watch broke (err): notifications may have been missed until it is made again. */
typedef void (*bs_watch_error_fn)(void *arg, int err);

/* The store's shared object kind (key: a name within the kind; NULL: the store's own identity). */
int backstore_shared_open(struct backstore *bs, const char *kind, const char *key, struct bs_shared **out);
/* Unwatched, and no callback running, once this returns. */
void backstore_shared_close(struct bs_shared *o);
/* The state and its version (*text malloc'd); -ENOENT while none was ever written. */
int backstore_shared_read(struct bs_shared *o, char **text, size_t *len, uint64_t *version);
/* Write text if the state is still at version (0: none yet): the new version, or -ERANGE when it moved. */
int backstore_shared_write(struct bs_shared *o, const char *text, size_t len, uint64_t version, uint64_t *now);
int backstore_shared_watch(struct bs_shared *o, bs_notify_fn fn, bs_watch_error_fn efn, void *arg);
void backstore_shared_unwatch(struct bs_shared *o);
/* Notify every watcher (this sharer too) and wait at most timeout_ms for the acknowledgements. */
int backstore_shared_notify(struct bs_shared *o, const void *data, size_t len, unsigned timeout_ms,
			    struct bs_notify_result *res);
void backstore_notify_result_free(struct bs_notify_result *res);
int backstore_shared_ack(struct bs_shared *o, uint64_t notify_id);
/* This process's id among the sharers. */
uint64_t backstore_shared_self(const struct bs_shared *o);
/* Join the sharers (desc: who this is, as JSON), leave them, list them (*out malloc'd). */
int backstore_shared_join(struct bs_shared *o, const char *desc);
void backstore_shared_leave(struct bs_shared *o);
int backstore_shared_sharers(struct bs_shared *o, struct bs_sharer **out, size_t *n);
/* Fence a sharer (its address cut off from the cluster) and remove it from the list. */
int backstore_shared_fence(struct bs_shared *o, const struct bs_sharer *s, char *err, size_t errlen);
/* Where the object is, for the operator ("rbd/isert_state.1234"). */
const char *backstore_shared_where(const struct bs_shared *o);
/* Where the store's shared objects live ("pool/namespace"), for choosing one store among several; NULL: none. */
const char *backstore_shared_home(const struct backstore *bs);
/* The store's own stable identity for the LU's serial (rbd: the image id), or NULL. */
const char *backstore_serial(const struct backstore *bs);
/*
 * fn(arg) runs, on any thread, after the size changed underneath (an RBD
 * image resized by another client); NULL stops it.  Once this returns with
 * NULL, fn is not running and will not run.
 */
void backstore_on_resize(struct backstore *bs, void (*fn)(void *arg), void *arg);

/*
 * Submit an operation; always ends with io->cb (maybe before returning).
 * Argument errors (offset/len not block multiples or past the end, a
 * readonly backstore written, a bad WRITE_SAME pattern_len) complete with
 * -EINVAL/-EROFS before returning.  io->reactor may be NULL: file, block and
 * nvme then do the I/O synchronously and complete before returning (tools,
 * tests).  Close only with no I/O in flight.
 */
void backstore_submit(struct backstore *bs, struct bs_io *io);

/*
 * A read without a copy: the store's own bytes [offset, offset+len) for a
 * reader to send from directly (ram only; NULL: read by backstore_submit()
 * into a buffer).  Checked like a BS_READ.  v is the caller's (it fills
 * reactor and revoke) and stays the store's until backstore_view_put(v);
 * until then the bytes stay valid and a BS_WRITE_ATOMIC overlapping them
 * waits, so it still reaches the reader all or nothing.  That wait is
 * bounded: past the store's bound (ram: RAM_VIEW_WAIT_MAX_MS) it calls
 * v->revoke(v) on v->reactor, which must make the reader let go of the
 * bytes and put v soon (a transport closes the connection).  Views are
 * not given for blocks a BS_WRITE_ATOMIC is under way on (NULL: copy).
 * Plain writes racing a view's reader may show in what it sends, as they
 * may in a copy racing them.
 */
struct bs_view {
	/* caller's: where revoke runs (NULL: never; only for a caller, a tool or a test, whose atomic
	 * writes have no reactor either, so wait for no view) */
	struct reactor *reactor;
	void (*revoke)(struct bs_view *v);   /* caller's; required */
	/* the store's */
	struct backstore *bs;
	uint64_t offset, len;
	struct bs_view *prev, *next;
	bool revoked;                        /* revoke asked for */
	struct bs_revoke *ticket;            /* ... and on its way to reactor */
};
const uint8_t *backstore_read_view(struct backstore *bs, struct bs_view *v, uint64_t offset, uint64_t len);
void backstore_view_put(struct bs_view *v);
/*
 * Where views may also go out over RDMA: the store's memory, registered
 * with each RDMA device on demand (common/transport/memreg.h; a preallocated ram
 * store), or NULL.
 */
struct memreg *backstore_memreg(const struct backstore *bs);

/*
 * GET LBA STATUS: is the range starting at offset mapped?  *run receives the
 * length in bytes of the extent with the same state (at least one block).
 * Thick backstores report everything mapped.  Synchronous: cheap lseek().
 */
int backstore_lba_status(struct backstore *bs, uint64_t offset, bool *mapped, uint64_t *run);

/*
 * SANITIZE (target/scsi/cmd/sanitize.c): the erase methods the store does
 * itself.  OVERWRITE needs none: it is BS_WRITE of the pattern, chunk by
 * chunk.  BLOCK ERASE deallocates (thin stores only: reads return zeroes
 * afterwards, GET LBA STATUS reports deallocated where the store can
 * tell); CRYPTO ERASE only where the device changes its media key (nvme).
 */
enum { BS_SANITIZE_BLOCK_ERASE = 1u << 0, BS_SANITIZE_CRYPTO_ERASE = 1u << 1 };
unsigned backstore_sanitize_methods(const struct backstore *bs);
/*
 * Erase [offset, offset+len) with one method of backstore_sanitize_methods().
 * Blocking (ioctls, admin commands, librbd's synchronous calls): a sanitize
 * worker only, never a reactor.  Returns the bytes erased from offset on
 * (a device that erases itself whole at once returns all that is left), or
 * -errno.  What it does on each store: backstore_sanitize_how().
 */
int64_t backstore_sanitize(struct backstore *bs, unsigned method, uint64_t offset, uint64_t len);
/* For the log and the documentation: "holes punched", "NVMe Sanitize (block erase)", ... */
const char *backstore_sanitize_how(const struct backstore *bs, unsigned method);

#endif
