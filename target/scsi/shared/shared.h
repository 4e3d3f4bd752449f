/*
 * State that several targets keep together through a shared object of
 * their store (backstore.h): an LU's reservations (share.c), a target's
 * ALUA states (alua/share.c).  Private to target/scsi.
 *
 * Each target keeps a copy under its owner's lock, which everything reads
 * as it would the state of one process.  A change runs on the commit
 * thread:
 *
 *   1. tried by the kind (change()) on a copy of the owner's state; a
 *      refusal, or nothing changed, is answered at once;
 *   2. stored only if the stored state is still the version the copy came
 *      from (compare-and-set); if another target wrote first, its state is
 *      installed and the change tried again on it, so every result is that
 *      of one serial order;
 *   3. every target notified, with the kind's notes (the unit attentions
 *      and aborts the change raises); each installs the new state, delivers
 *      the notes to its own nexuses, then acknowledges;
 *   4. a target that joined and did not acknowledge within SHARED_NOTIFY_MS
 *      (or no longer watches) is fenced: its access to the cluster is cut,
 *      so nothing it still sends can land; the kind hears of it (fenced());
 *   5. only then is the change answered.
 *
 * The notify thread answers the other targets' notifications and never
 * waits for one, so two targets changing a state at once never wait for
 * each other.  The commit thread takes the objects with changes waiting in
 * turn, one change each, so a change waits for at most one change of each
 * other object with changes waiting; each object takes at most
 * SHARED_QUEUE_MAX commands (the next is TASK SET FULL or BUSY).  The
 * heartbeat thread asks every target of every object at least every
 * SHARED_HEARTBEAT_MS (any question counts), on its own clock whatever the
 * changes: one that died is fenced within SHARED_HEARTBEAT_MS +
 * 2 x SHARED_NOTIFY_MS (its first question not answered waits
 * SHARED_NOTIFY_MS and fences it, which cuts it off every object; the
 * question of another object asked meanwhile waits as long at most).
 *
 * Locks: the engine's own (queues, the list of objects) may be taken under
 * an owner's lock, never the other way round.
 */
#ifndef SCSI_SHARED_H
#define SCSI_SHARED_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/backstore/backstore.h"
#include "target/scsi/scsi.h"

#define SHARED_NOTIFY_MS    5000  /* a target acknowledges within this, or is fenced */
#define SHARED_HEARTBEAT_MS 5000  /* every target is asked at least this often */
#define SHARED_QUEUE_MAX    32    /* commands waiting for a change of one object, or being made */

struct shared;

/* A change for the commit thread. */
struct shared_job {
	int op;                       /* the kind's */
	struct scsi_cmd *cmd;         /* a command, answered on its reactor; NULL: none */
	uint8_t cdb[16];
	struct scsi_nexus nexus;      /* a copy: the session may end while the job waits */
	bool has_nexus;
	bool flag;                    /* the kind's */
	bool remote_only;             /* the notes are for the other targets only (this one has them) */
	uint8_t *params;              /* the command's parameter list, a copy */
	uint32_t plen;
	void *arg;                    /* the kind's (free()d with the job) */
	/* The answer. */
	uint8_t status;
	uint8_t sense[SCSI_SENSE_LEN];
	uint32_t sense_len;
};

struct shared_kind {
	const char *what;             /* for the log: "reservations", "ALUA states" */
	/* Under the owner's lock: take text as the owner's state; 0, or -EINVAL/-ENOMEM with err. */
	int (*install)(void *owner, const char *text, size_t len, char *err, size_t errlen);
	/*
	 * The change of j tried (no lock held: the kind takes its owner's),
	 * from the owner's state: the new text (malloc'd), or NULL when refused
	 * (j's answer set) or when there is nothing to change; the notes for
	 * every target in *notes (a JSON text, malloc'd), or NULL.
	 */
	char *(*change)(void *owner, struct shared_job *j, char **notes);
	/* Under the owner's lock: a change's notes (this target's own, or another's). NULL: none kept. */
	void (*deliver)(void *owner, const char *notes);
	/* A sharer was fenced (no lock held): what follows from it, or NULL. */
	void (*fenced)(void *owner, struct shared *s, const struct bs_sharer *who);
	/*
	 * Before this target joins (no lock held): may it, beside the live
	 * sharers (the dead ones fenced already)?  0, or -EEXIST with err
	 * saying who is in the way.  NULL: always.
	 */
	int (*admit)(void *owner, const struct bs_sharer *live, size_t n, char *err, size_t errlen);
	/* After a change was made, stored and told, before its answer (commit thread; no lock held), or NULL. */
	void (*done)(void *owner, struct shared_job *j);
};

/*
 * The owner's state kept with the store's shared object kind/key (blocking:
 * never on a reactor): the stored state installed (init_text stored first
 * when there is none), watched, and this target on the list of sharers with
 * desc (a JSON object).  0, or -errno with err written.
 */
int shared_open(struct backstore *bs, const char *obj_kind, const char *key, const struct shared_kind *kind,
		void *owner, pthread_mutex_t *mu, const char *name, const char *init_text, const char *desc,
		struct shared **out, char *err, size_t errlen);
/* Off the list, unwatched; changes not yet made dropped, those being made finished. */
void shared_close(struct shared *s);
/* A command's change: answered on the command's reactor once made (scsi_cmd_complete). */
void shared_submit_cmd(struct shared *s, int op, struct scsi_cmd *cmd);
/* A change without a command (arg taken; flag and nexus, NULL: none, for the kind); w waits for it. */
void shared_submit(struct shared *s, int op, const struct scsi_nexus *nexus, bool flag, void *arg,
		   struct scsi_wait *w);
/* The same, waited for (not on a reactor): 0, or -EIO when it failed or was refused (err says why). */
int shared_run(struct shared *s, int op, void *arg, char *err, size_t errlen);
/* j's answer: CHECK CONDITION with this sense (in the owner's sense format: lu may be NULL). */
void shared_answer_sense(struct shared_job *j, const struct scsi_lu *lu, uint8_t key, uint16_t asc);
/* A sharer's description to start from: {"gateway": "isertd PID on HOST"} (NULL: no memory). */
struct json_object *shared_desc_new(void);
/*
 * The other targets on the list (blocking: never on a reactor), those that
 * no longer answer fenced first: *list malloc'd; 0 or -errno.
 */
int shared_others(struct shared *s, struct bs_sharer **list, size_t *n);
/* This target's description on the list, replaced (blocking): 0 or -errno. */
int shared_describe(struct shared *s, const char *desc);
/* The others fenced this target. */
bool shared_fenced(struct shared *s);
/* The others fenced this gateway for some object (its Ceph client is blocklisted): any thread. */
bool shared_fenced_any(void);
/* Its place, version, state and the sharers as last listed, for the operator (JSON object; NULL: no memory). */
struct json_object *shared_json(struct shared *s);

#endif
