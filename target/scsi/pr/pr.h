/*
 * Reservations of one LU: SPC-2 RESERVE/RELEASE and SPC-4 persistent
 * reservations (all PERSISTENT RESERVE IN/OUT service actions and types).
 * Called by the LU with its mutex held; never blocks, except that a PR OUT
 * with APTPL on waits for its state file to reach the disk (pr_persist_init).
 */
#ifndef SCSI_PR_H
#define SCSI_PR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct scsi_cmd;
struct scsi_nexus;
struct scsi_pr;

/*
 * Establish a unit attention for every nexus of initiator_port (the LU owns UA queues).
 * initiator_port is "<name>,i,0x<ISID>", or a bare iSCSI name (no ",i,0x") for a
 * registration made through a TransportID that named only the initiator device:
 * then every port of that initiator.
 */
typedef void (*pr_ua_fn)(void *ctx, const char *initiator_port, uint16_t asc);
/* Abort every task of initiator_port's nexuses on this LU (PREEMPT AND ABORT); same naming. */
typedef void (*pr_abort_fn)(void *ctx, const char *initiator_port);

struct scsi_pr *pr_create(pr_ua_fn ua, void *ua_ctx);
void pr_destroy(struct scsi_pr *pr);
/* Optional: without it PREEMPT AND ABORT acts as PREEMPT. */
void pr_set_abort(struct scsi_pr *pr, pr_abort_fn abort, void *ctx);

/*
 * Offer APTPL: the state lives in <dir>/pr-<naa>.json (naa: the LU's NAA
 * designator in hex, as VPD 0x83 reports it).  Restores what the file holds
 * when it was written for this serial; a damaged file is logged and moved
 * to <file>.bad, an unreadable one logged: the LU then starts without
 * persistent reservations.  name: the backstore's, for logs.  Call before
 * the LU serves commands.  0, or -ENOMEM / -ENAMETOOLONG.
 */
int pr_persist_init(struct scsi_pr *pr, const char *dir, const char *serial, const char *naa, const char *name);

/*
 * Would the reservation state conflict with this CDB from nexus?  (SPC-4
 * table 63 for persistent reservations; SPC-2 reservations: everything but
 * the commands SPC-2 allows conflicts.)
 */
bool pr_conflict(struct scsi_pr *pr, const struct scsi_nexus *nexus, const uint8_t *cdb);
/*
 * Is a reservation (persistent or SPC-2) held?  Without one pr_conflict()
 * is false for every CDB, so the I/O path asks this without the LU's mutex.
 */
bool pr_active(const struct scsi_pr *pr);

/* PERSISTENT RESERVE IN: fill cmd->buf / din_len, or sense. */
void pr_in(struct scsi_pr *pr, struct scsi_cmd *cmd);
/* PERSISTENT RESERVE OUT: parameter list in cmd->buf (cmd->dout_len bytes). */
void pr_out(struct scsi_pr *pr, struct scsi_cmd *cmd);
/* RESERVE(6/10), RELEASE(6/10). */
void pr_reserve(struct scsi_pr *pr, struct scsi_cmd *cmd);
void pr_release(struct scsi_pr *pr, struct scsi_cmd *cmd);

/* LU reset, target reset, nexus loss: SPC-2 reservations go away, PRs stay. */
void pr_reset(struct scsi_pr *pr, const struct scsi_nexus *nexus, bool nexus_loss_only);

/*
 * A state shared with the other targets serving the same store (share.c):
 * the whole state as text (pr_state's format, with the SPC-2 reservation),
 * a change tried on a copy, and the unit attentions and aborts a change
 * raises, handed from the copy to every target's LU.
 */
struct pr_note {
	char port[256];          /* initiator port, or a bare name: every port of it */
	uint16_t asc;
	bool abort;              /* PREEMPT AND ABORT: its commands end too */
};
/* The LU's identity, and APTPL offered without a file: the shared state persists anyway. */
void pr_set_shared(struct scsi_pr *pr, const char *serial, const char *naa, const char *name);
/* The state as text (malloc'd; NULL without memory). */
char *pr_text(const struct scsi_pr *pr);
/* Take text's state, all or nothing: 0, or -EINVAL (err names the field) / -ENOMEM. */
int pr_load(struct scsi_pr *pr, const char *text, size_t len, char *err, size_t errlen);
/* A copy of pr's state without callbacks; a change on it keeps its notes for pr_take_notes. */
struct scsi_pr *pr_copy(const struct scsi_pr *pr);
/* The notes a copy collected (moved to *out, malloc'd; returns the count). */
unsigned pr_take_notes(struct scsi_pr *pr, struct pr_note **out);
/* Deliver notes through pr's callbacks. */
void pr_deliver(struct scsi_pr *pr, const struct pr_note *notes, unsigned n);

#endif
