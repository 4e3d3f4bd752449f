/*
 * SCSI layer: CDB parsing and emulation for a block device (SPC-4, SBC-3),
 * written once for every transport.  The iSCSI layer hands in a struct
 * scsi_cmd per command; this layer decides how much Data-Out it needs,
 * executes (asynchronously, through the backstore) and leaves status,
 * sense, Data-In and the residual in the command.
 *
 * A struct scsi_lu is shared by every session that maps it, and sessions run
 * on different reactors: the LU's shared state (reservations, persistent
 * reservations, unit attentions, mode pages) is guarded by the LU's mutex.
 * Data I/O runs on the caller's reactor with no lock.
 */
#ifndef SCSI_H
#define SCSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/bufpool.h"
#include "target/backstore/backstore.h"   /* struct bs_view, held in a command */

struct reactor;
struct scsi_lu;
struct xp_conn;

#define SCSI_MAX_CDB 260
#define SCSI_SENSE_LEN 96  /* fixed or descriptor format; D_SENSE in the control page picks */

enum scsi_status {
	SCSI_GOOD = 0x00,
	SCSI_CHECK_CONDITION = 0x02,
	SCSI_CONDITION_MET = 0x04,
	SCSI_BUSY = 0x08,
	SCSI_RESERVATION_CONFLICT = 0x18,
	SCSI_TASK_SET_FULL = 0x28,
	SCSI_ACA_ACTIVE = 0x30,
	SCSI_TASK_ABORTED = 0x40,
};

/* Identity of an I_T nexus, kept by the session for its life. */
struct scsi_nexus {
	char initiator_name[224];  /* iSCSI name, e.g. iqn.1994-05.com.redhat:host */
	char initiator_port[256];  /* "<initiator_name>,i,0x<ISID 12 hex>" */
	char target_name[224];
	char target_port[256];     /* "<target_name>,t,0x<TPGT 4 hex>" */
	uint16_t rel_port_id;      /* relative target port identifier (TPGT) */
	uint64_t id;               /* unique for the process lifetime */
	struct scsi_port *port;    /* its ALUA port (alua.h), NULL: active/optimized in group 1 */
	uint32_t alua_gen;         /* the port's ALUA generation at login */
};

/*
 * The I_T_L entry: one nexus's state at one LU (unit attentions, PREVENT,
 * copy list identifiers).  Private to target/scsi; the transport holds a
 * pointer per mapped LUN (scsi_lu_itl) so the common command needs no lock.
 */
struct lu_nexus;

/* LUNs the nexus sees, for REPORT LUNS (ascending). */
struct scsi_lun_map {
	uint32_t count;
	const uint64_t *luns;
	/*
	 * The LU at luns[i] and whether this nexus maps it read-only: EXTENDED
	 * COPY finds its copy targets here.  NULL (tools, tests): only the
	 * addressed LU can be a copy target.
	 */
	struct scsi_lu *(*lu_at)(const struct scsi_lun_map *map, uint32_t i, bool *read_only);
};

struct scsi_lu_params {
	const char *vendor;     /* 8 chars max, default "ISERT" */
	const char *product;    /* 16 max, default "<backstore type>" */
	const char *revision;   /* 4 max */
	const char *serial;     /* unit serial (VPD 80) and source of the NAA id (VPD 83) */
	const char *name;       /* backstore name, for logs */
	/*
	 * Folder of the APTPL state files (docs/reservations.md); NULL: APTPL is
	 * not offered.  The LU's saved reservations are restored at creation.
	 */
	const char *state_dir;
};

struct scsi_cmd {
	/* Set by the transport layer before scsi_cmd_prepare(). */
	uint8_t cdb[SCSI_MAX_CDB];
	uint32_t cdb_len;
	struct scsi_lu *lu;                 /* NULL: no such LUN for this nexus */
	uint64_t lun;                       /* as addressed */
	const struct scsi_nexus *nexus;
	/* scsi_lu_itl(lu, nexus), or NULL: prepare looks the entry up under the LU's mutex. */
	struct lu_nexus *itl;
	const struct scsi_lun_map *lun_map;
	bool read_only;                     /* LUN mapped read-only for this nexus */
	uint32_t edtl;                      /* Expected Data Transfer Length from the initiator */
	bool dir_read, dir_write;           /* initiator's R and W bits */
	uint8_t task_attr;                  /* SIMPLE, ORDERED, HEAD OF QUEUE, ACA */
	struct reactor *reactor;            /* the reactor running this command */
	void (*done)(struct scsi_cmd *cmd); /* called once, on that reactor */
	void *priv;                         /* caller's */
	/* Set by the transport when the task is aborted or its connection ends, even during exec: a long command (EXTENDED COPY) stops early. */
	bool stop;
	/* The transport sends Data-In from any memory (TCP), not only from pool buffers (RDMA's
	 * registered slabs): a large READ of a store that gives views sends from the store itself. */
	bool send_any_memory;
	/* RDMA (NULL over TCP): the connection, whose device a store's registered memory
	 * (backstore_memreg) must be on for a large READ to send from the store. */
	struct xp_conn *rdma_xc;
	/*
	 * Sending from the store (above) needs this too: called on the command's reactor when a
	 * WRITE ATOMIC of the READ's blocks has waited the store's bound for it (the reader stopped
	 * taking its data), it makes the transport stop sending from the store soon (it closes the
	 * connection), so the command is released.  NULL: READs are copied.
	 */
	void (*view_revoke)(struct scsi_cmd *cmd);

	/* Set by this layer. */
	uint32_t dout_len;     /* Data-Out bytes to collect into buf before exec (<= edtl) */
	struct buf *buf;       /* Data-Out lands here; Data-In is produced here */
	uint32_t din_len;      /* Data-In bytes in buf to send (<= edtl) */
	int64_t resid;         /* residual: > 0 underflow, < 0 overflow */
	uint8_t status;
	uint8_t sense[SCSI_SENSE_LEN];
	uint32_t sense_len;
	uint64_t bs_ns;        /* time spent in the backstore (statistics) */

	/* Private to target/scsi. */
	uint64_t lba;
	uint32_t nblocks;
	uint32_t flags;
	uint32_t state;
	void *scratch;
	struct scsi_cmd *ser_next;          /* the LU's serialized commands (sbc.c) */
	struct scsi_cmd *ser_start;         /* ... those one completion lets start */
	bool ser_running;
	bool san_writing;                   /* counted in lu->writers until it completes (sanitize.c) */
	struct buf *buf2;
	struct buf view;                    /* buf == &view: the store's own bytes (backstore_read_view) */
	struct bs_view view_h;              /* ... held from the store, put at release */
	uint64_t bs_t0;                     /* statistics: the backstore request in flight began */
	void (*bs_cb)(struct bs_io *io, int res); /* ... and completes here */
	uint8_t io[256] __attribute__((aligned(8))); /* room for struct bs_io */
};

/* Logical units. */
int scsi_lu_create(struct backstore *bs, const struct scsi_lu_params *p, struct scsi_lu **out);
void scsi_lu_destroy(struct scsi_lu *lu);
struct backstore *scsi_lu_backstore(const struct scsi_lu *lu);
/* The backstore's size changed: CAPACITY DATA HAS CHANGED to every nexus. */
void scsi_lu_capacity_changed(struct scsi_lu *lu);
/*
 * For the operator: where the LU's reservations are kept with the other
 * gateways serving its store, their state and the gateways (JSON object),
 * or NULL: kept here only.
 */
struct json_object;
struct json_object *scsi_lu_share_json(struct scsi_lu *lu);
/*
 * The targets this gateway serves a shared LU through (blocking: not on a
 * reactor; iqns sorted in place): told to the other gateways, and -EEXIST
 * with err when one of them serves it under other names.  0 for an LU kept
 * here only.
 */
int scsi_lu_share_targets(struct scsi_lu *lu, const char **iqns, size_t n, char *err, size_t errlen);
/* The admin turned the volatile write cache on or off: WCE follows, MODE PARAMETERS CHANGED to all. */
void scsi_lu_set_write_cache(struct scsi_lu *lu, bool on);
/*
 * The I_T_L entry of nexus nx at lu, made if it is new (NULL: no memory).
 * The transport resolves it when it installs a session's LUN map and sets
 * cmd->itl from it; it stays valid until SCSI_EV_NEXUS_LOSS of nx at lu or
 * scsi_lu_destroy(), so a command whose map changed since it arrived must
 * not carry it.
 */
struct lu_nexus *scsi_lu_itl(struct scsi_lu *lu, const struct scsi_nexus *nx);
/* REPORTED LUNS DATA HAS CHANGED for nexus nx (its LUN inventory changed). */
void scsi_lu_luns_changed(struct scsi_lu *lu, const struct scsi_nexus *nx);

enum scsi_lu_event {
	SCSI_EV_LU_RESET,           /* LOGICAL UNIT RESET from nexus */
	SCSI_EV_TARGET_WARM_RESET,
	SCSI_EV_TARGET_COLD_RESET,
	SCSI_EV_LOGOUT,             /* the session of nexus logs out: what its loss releases goes now */
	SCSI_EV_NEXUS_LOSS,         /* the session of nexus ended */
	SCSI_EV_CLEAR_TASK_SET,     /* tasks of all nexuses aborted by nexus */
};

/*
 * What the caller waits for before it answers an event: on a shared LU the
 * other gateways hear of a reset or a release after scsi_lu_event()
 * returns.  The caller makes one (on its reactor, with done(arg) to call
 * there), passes it to the events, and answers once scsi_wait_busy() is
 * false or done() came.  Reactor thread only.
 */
struct scsi_wait;
struct scsi_wait *scsi_wait_new(struct reactor *r, void (*done)(void *arg), void *arg);
bool scsi_wait_busy(const struct scsi_wait *w);
/* The waiter is gone (its connection ended): done() no more; freed once nothing holds it. */
void scsi_wait_drop(struct scsi_wait *w);

/* State changes and unit attentions for a task management event or nexus loss; w may be NULL. */
void scsi_lu_event(struct scsi_lu *lu, const struct scsi_nexus *nexus, enum scsi_lu_event ev, struct scsi_wait *w);

/*
 * Parse and check the CDB (LUN, unit attention, reservations, LBA range,
 * write protection, data lengths against edtl).  Returns true when the
 * command goes on: cmd->dout_len bytes of Data-Out must be collected into
 * cmd->buf (allocated here from the reactor's pool) and then
 * scsi_cmd_exec() called.  Returns false when the command already ended:
 * status/sense are set and cmd->done is NOT called.
 */
bool scsi_cmd_prepare(struct scsi_cmd *cmd);
/* Execute; ends by calling cmd->done(cmd) (possibly before returning). */
void scsi_cmd_exec(struct scsi_cmd *cmd);
/* Free what prepare/exec allocated (buffers, scratch).  Safe after either. */
void scsi_cmd_release(struct scsi_cmd *cmd);
/* Does cmd use lu: it is addressed to lu, or it is an EXTENDED COPY with lu as a copy target. */
bool scsi_cmd_uses_lu(const struct scsi_cmd *cmd, const struct scsi_lu *lu);

#endif
