/*
 * The target's iSCSI layer (RFC 7143), written once above the transport
 * seam: portals, login and negotiation, sessions, command ordering, data
 * movement (R2T/Data-Out/Data-In over TCP, RDMA over iSER), task
 * management and discovery.  Internal to target/.
 */
#ifndef ISCSI_H
#define ISCSI_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/bufpool.h"
#include "common/proto/pdu.h"
#include "common/proto/text.h"
#include "common/transport/transport.h"
#include "target/config/config.h"
#include "target/iscsi/stats.h"
#include "target/runtime/runtime.h"
#include "target/scsi/scsi.h"

struct reactor;
struct iscsi_session;
struct iscsi_conn;

/* A LUN as a session sees it. */
struct iscsi_lun {
	uint64_t lun;
	struct scsi_lu *lu;
	bool read_only;
	struct lu_nexus *itl;          /* scsi_lu_itl(lu, the session's nexus); NULL: no memory */
	struct stats_lun *st;          /* made at the first command (stats.c) */
};

/* A portal (listener), with its share of the connection limits (admit.c); kept for the life of the process. */
struct iscsi_portal {
	struct iscsi_portal *next;     /* iscsi_g.portals */
	const struct transport_ops *ops;
	struct xp_listener *l;         /* NULL when not listening */
	char host[64];
	uint16_t port;
	bool iser;
	uint8_t tos;                   /* its listener's (cfg_portal.tos) */
	char name[72];                 /* host:port (tcp|iser), for log lines */
	unsigned nconns;               /* under admit's lock */
	struct stats_portal *st;       /* one per reactor, each written by its reactor only */
};

/* The iSCSI layer's process-wide state (what runs of the configuration is target/runtime/'s). */
struct iscsi_globals {
	struct reactor **reactors;
	unsigned nreactors;
	struct iscsi_portal *portals;  /* every portal made so far (listening or not) */
	_Atomic bool stopping;         /* SIGTERM: no new connections, sessions drain */
	_Atomic bool force_close;      /* the drain took too long: close whatever is left */
	/* Sessions of all reactors, for reinstatement and TSIH allocation. */
	pthread_mutex_t lock;
	struct iscsi_session *sessions;
	uint16_t next_tsih;
	uint64_t next_nexus_id;
};

extern struct iscsi_globals iscsi_g;

/* portal.c */
/* The reactors, and the running target made from cfg (taken: runtime.h), no listeners yet. */
int iscsi_setup(struct config *cfg, struct reactor **reactors, unsigned nreactors, char *err, size_t errlen);
/* The portal object for p: found, or made; listening afterwards (0), or -errno with err filled. */
int iscsi_portal_listen(const struct config *cfg, const struct cfg_portal *p, struct iscsi_portal **out, char *err,
			size_t errlen);
void iscsi_portal_unlisten(struct iscsi_portal *ip);
/* Is the portal of p's address and transport listening already? */
bool iscsi_portal_listening(const struct cfg_portal *p);
/* Every listening portal that cfg no longer has stops listening (the connections it took stay). */
void iscsi_portal_unlisten_gone(const struct config *cfg);
/* Is p among cfg's portals? */
bool iscsi_portal_in(const struct config *cfg, const struct iscsi_portal *p);
/* After a change: listening portals whose ToS changed take the new one (TCP at once, iSER
 * by listening again); failures are logged. */
void iscsi_portal_retos(const struct config *cfg);
/* iscsi_setup, then every portal of the running configuration listens. */
int iscsi_start(struct config *cfg, struct reactor **reactors, unsigned nreactors, char *err, size_t errlen);
/* Stop listening (the first step of a shutdown). */
void iscsi_stop(void);
/* Has the shutdown begun (SIGTERM)? */
bool iscsi_stopping(void);
/* The drain took too long: each reactor closes what it has left at its next drain tick. */
void iscsi_force_close(void);
/* The reactors iscsi_setup was given: how many, and the array in *out. */
unsigned iscsi_reactors(struct reactor ***out);
/* Flush every writable backstore, synchronously, once the reactors stopped; returns the failures. */
int iscsi_flush(void);
/* The running target and the portals freed. */
void iscsi_free(void);

enum task_state {
	TASK_QUEUED,      /* not started: waiting for its CmdSN turn, or for buffer memory */
	TASK_DATA_OUT,    /* collecting Data-Out */
	TASK_EXEC,        /* in the SCSI layer */
	TASK_SENDING,     /* response PDUs in flight */
};

struct iscsi_task {
	struct scsi_cmd cmd;
	struct iscsi_conn *conn;
	struct iscsi_task *hnext;       /* ITT hash chain */
	struct iscsi_task *qnext;       /* CmdSN queue */
	struct iscsi_task *lnext, *lprev; /* all tasks of the connection */
	enum task_state state;
	uint32_t itt, cmdsn;
	bool immediate;
	bool aborted;                   /* answer nothing when it ends */
	bool absorbing;                 /* ended early or aborted; owed Data-Out still coming (holds a ref) */
	bool slot;                      /* holds one of the session's QueueDepth CmdSN slots */
	int refs;                       /* PDUs in flight + the task itself */
	/* PDUs kept while it is not started (its own, with immediate data, then Data-Out) */
	struct stash *stash;
	uint32_t stash_bytes;
	uint32_t imm_len;               /* immediate data that came with the command */
	size_t buf_bytes;               /* pool buffer bytes counted against the session */
	/* Data-Out */
	uint32_t dout_total;            /* bytes to collect: cmd.dout_len */
	uint32_t dout_got;
	uint32_t unsol_expected;        /* unsolicited bytes the initiator will send (incl. immediate) */
	uint32_t unsol_got;
	uint32_t unsol_datasn;
	bool unsol_done;
	uint32_t r2t_next_offset;       /* next offset to solicit */
	uint32_t r2t_sn;
	uint32_t r2t_outstanding;
	uint32_t ttt;
	uint32_t seq_offset, seq_len, seq_got, seq_datasn; /* the current solicited sequence */
	uint32_t edtl;
	bool cmd_final;                 /* F bit of the command: no unsolicited Data-Out follows */
	/* iSER: the initiator's buffers (RFC 7145 sec. 9.2) */
	uint64_t read_va, write_va;
	uint32_t read_stag, write_stag;
	bool read_stag_valid, write_stag_valid;
	/* Data-In */
	uint32_t datasn;
	struct xp_pdu rsp;              /* the SCSI Response */
	uint64_t t_arrive;              /* ns: its PDU was received (statistics) */
	struct stats_lun *st;           /* where it counts, or NULL */
	uint8_t rspbuf[2 + SCSI_SENSE_LEN];
};

struct stash {
	struct stash *next;
	uint8_t bhs[PDU_BHS_LEN];
	uint8_t *data;
	uint32_t len;
};

struct login_state;
struct tmf_pending;

struct iscsi_conn {
	struct xp_conn *xp;
	struct reactor *r;
	struct iscsi_conn *rnext, *rprev; /* this reactor's connections (for shutdown) */
	struct iscsi_portal *portal;    /* where it arrived (admit.c counts it there) */
	struct iscsi_session *sess;
	enum { CONN_LOGIN, CONN_FULL, CONN_LOGOUT, CONN_CLOSING } state;
	struct login_state *login;
	struct neg_params params;
	uint32_t statsn;
	uint16_t cid;
	uint32_t next_ttt;
	struct iscsi_task *tasks;       /* all live tasks */
	struct iscsi_task *itt_hash[256];
	unsigned ntasks;
	unsigned nabsorbing;            /* aborted tasks waiting for Data-Out that may never come */
	void (*task_gone)(struct iscsi_conn *c); /* hook: a task was freed (tmf.c waits with it) */
	bool kick_scheduled;            /* session_resume() is queued on the reactor */
	bool draining;                  /* shutting down: no new commands, close when idle */
	struct reactor_timer *login_timer;
	struct xp_pdu *pdu_free;        /* recycled PDUs */
	unsigned pdus_out;
	size_t reply_bytes;             /* control replies queued, not yet sent (the peer may not read) */
	struct reactor_timer *nop_timer;
	uint32_t nop_ttt;
	bool nop_outstanding;           /* our NOP-In ping awaits its NOP-Out */
	uint32_t nop_interval_ms;
	struct tmf_pending *tmf_head, *tmf_tail; /* answers held until the tasks they aborted left */
	unsigned ntmf;
	/* Resets and the logout of shared LUs: answered once the other gateways heard (tmf.c). */
	struct scsi_wait *lu_wait;
	uint8_t close_rsp[PDU_BHS_LEN]; /* the answer after which c closes (Logout, TARGET COLD RESET), held */
	bool close_held;
	struct stats_conn st;
};

struct iscsi_session {
	struct iscsi_session *next;     /* iscsi_g.sessions, under iscsi_g.lock */
	struct iscsi_conn *conn;        /* MaxConnections=1 */
	struct reactor *r;
	const struct rt_tpg *tpg;    /* NULL for discovery */
	bool discovery;
	uint8_t isid[6];
	uint16_t tsih;
	char initiator[224];
	struct scsi_nexus nexus;
	uint32_t exp_cmdsn;
	uint32_t queue_depth;           /* CmdSN slots: the window is queue_depth - active */
	uint32_t max_cmdsn;             /* the last MaxCmdSN sent: it never goes back */
	uint32_t active;                /* slots held: commands taken in order and not yet answered */
	uint32_t max_immediate;         /* immediate commands alive at once */
	uint32_t immediate;
	size_t buf_budget, buf_bytes;   /* pool buffer memory of its commands: cap, held */
	size_t stash_bytes;             /* Data-Out kept for commands not started */
	struct iscsi_task *cmdq;        /* out-of-order commands, sorted */
	struct iscsi_task *bufq, *bufq_tail; /* started in order, waiting for buffer memory */
	/* LUN map of this nexus */
	struct iscsi_lun *luns;
	size_t nluns;
	uint64_t *lun_ids;
	struct scsi_lun_map lun_map;
	bool gone;
	bool counted;                   /* in admit's session count */
	/* Where its login arrived (the local address, not a wildcard): redirect_balance counts these. */
	char portal_ip[48];
	uint16_t portal_port;
	bool portal_iser;
};

/*
 * redirect.c: login redirection.  0 (log in here), or PDU_LOGIN_REDIRECT_TEMP
 * or _PERM with the TargetAddress value in addr.  Call with rt_lock held.
 */
uint16_t redirect_login(const struct rt_tpg *tpg, const struct xp_conn *xp, char *addr, size_t n);

/* admit.c: connection and session limits, login timeout */
bool admit_conn(void *arg, const struct xp_conn *xp);
void admit_dropped(void *arg, const struct xp_conn *xp);
void admit_conn_gone(struct iscsi_conn *c);
/* 0 (counted), or a login status refusing one more session (why filled). */
uint16_t admit_session(char *why, size_t whylen);
void admit_session_gone(void);
/* The limits of c (at start, and after each change: existing connections and sessions stay). */
void admit_set_limits(const struct config *c);
/*
 * Connections past what the open file limit leaves room for are refused at
 * accept, like those past max_connections: a connection left in the listen
 * backlog would take the next descriptor freed, ahead of a later login.  The
 * reserve is what is open but connections when counted, others (the admin
 * socket's and the metrics endpoint's connections: control.h's
 * admin_fd_reserve) and ADMIT_FD_FILES files opened while isertd runs (a
 * save, a state file).  Counted at start and after each change; returns the
 * cap (UINT_MAX: none), with the reserve and the limit.
 */
#define ADMIT_FD_FILES 4
unsigned admit_fd_budget(unsigned others, unsigned *reserve, unsigned long long *limit);

/* conn.c */
void conn_accept(void *arg, struct xp_conn *xp);
struct xp_pdu *conn_pdu_get(struct iscsi_conn *c);
void conn_pdu_put(struct iscsi_conn *c, struct xp_pdu *p);
/* Fill the StatSN/ExpCmdSN/MaxCmdSN of a target PDU; status_pdu advances StatSN. */
void conn_fill_sn(struct iscsi_conn *c, void *bhs, bool status_pdu);
void conn_send(struct iscsi_conn *c, struct xp_pdu *p);
/* Login finished (or the connection closes): the login time limit no longer applies. */
void conn_login_done(struct iscsi_conn *c);
void conn_send_reject(struct iscsi_conn *c, const uint8_t *bad_bhs, uint8_t reason);
void conn_close(struct iscsi_conn *c);
/* Send a control PDU (BHS only), then close the connection. */
int conn_send_then_close(struct iscsi_conn *c, const void *bhs);
/* Start the target's NOP-In pings (nop_in_interval of the portal group). */
void conn_start_nop(struct iscsi_conn *c, uint32_t interval_s);
/* A PDU's done() saw an error: the connection cannot go on. */
void conn_pdu_failed(struct iscsi_conn *c, int err);
/* Shutdown (on each reactor): refuse new commands, close connections once idle. */
void conn_drain_all(void *arg);
/* Connections alive in the process (all reactors). */
unsigned conn_count(void);
/* On a reactor: call fn for each of its connections (fn may close the one it is given). */
void conn_foreach(void (*fn)(struct iscsi_conn *c, void *arg), void *arg);
/* Send a simple control PDU whose BHS is given (copied), with optional data (copied). */
int conn_send_simple(struct iscsi_conn *c, const void *bhs, const void *data, uint32_t len);
/* The same, taking ownership of malloc'd data; optionally close once it is sent. */
int conn_send_owned(struct iscsi_conn *c, const void *bhs, void *data, uint32_t len, bool close_after);

/*
 * view.c: what the control plane may know of a connection and do to it
 * (the only way in from outside this layer), on the connection's reactor,
 * inside conn_foreach.
 */
struct iscsi_conn_view {
	bool full, closing;             /* in full feature phase; closing */
	bool session;                   /* it has a session: the fields from gone on are 0 without one */
	uint16_t cid;
	const char *transport;          /* a transport's static name */
	bool rdma, shared_rx;
	const char *portal, *local, *peer; /* c's: valid until its reactor returns */
	int reactor;
	unsigned tasks;
	const struct neg_params *params;
	const char *initiator;          /* "" without a session */
	bool gone, discovery;
	uint16_t tsih;
	uint8_t isid[6];
	const struct rt_tpg *tpg;       /* NULL for discovery */
	size_t nluns;                   /* its LUN map: conn_view_lun */
	uint32_t queue_depth, active, exp_cmdsn, max_cmdsn;
	size_t buf_bytes;
};
void conn_view(const struct iscsi_conn *c, struct iscsi_conn_view *v);
/* Entry i (< nluns) of the LUN map of c's session. */
void conn_view_lun(const struct iscsi_conn *c, size_t i, uint64_t *lun, const struct scsi_lu **lu, bool *read_only);
/*
 * After a change: c's session (full feature, not discovery) takes its LUN
 * map again, with REPORTED LUNS DATA HAS CHANGED where it changed.  1: it
 * changed; 0: no change, or nothing to take; -EACCES: no longer admitted,
 * c closes; another -errno: the old map stays.
 */
int conn_refresh_map(struct iscsi_conn *c);
/* How many of c's tasks (in any state) and of its session's LUN map entries point at one of lus. */
int conn_lu_users(const struct iscsi_conn *c, struct scsi_lu *const *lus, size_t n);

/* login.c */
void login_rx(struct iscsi_conn *c, struct xp_rx *rx);
void login_free(struct iscsi_conn *c);

/* task.c */
struct iscsi_task *task_new(struct iscsi_conn *c, const struct pdu_scsi_cmd *h);
struct iscsi_task *task_find(struct iscsi_conn *c, uint32_t itt);
void task_put(struct iscsi_task *t);
/* Keep a PDU (and a copy of its data) until the task starts; -ENOBUFS over the session's limit. */
int task_stash(struct iscsi_task *t, const uint8_t *bhs, const uint8_t *data, uint32_t len, bool bounded);
/* Take the oldest stashed PDU (caller frees it with task_stash_free). */
struct stash *task_unstash(struct iscsi_task *t);
void task_stash_free(struct iscsi_task *t, struct stash *st);
/* The command's CmdSN slot comes back: its status is on its way, or it was aborted. */
void task_slot_release(struct iscsi_task *t);
/* Count the task's pool buffers (after the SCSI layer allocated or swapped them). */
void task_bufs_account(struct iscsi_task *t);
bool task_data_owed(const struct iscsi_task *t);
/* Keep an ended task while the Data-Out it is owed comes in (bounded per connection). */
void task_absorb(struct iscsi_task *t);
void task_absorb_end(struct iscsi_task *t);

/* session.c */
void session_scsi_cmd(struct iscsi_conn *c, struct xp_rx *rx);
int session_data_out_dest(struct iscsi_conn *c, const uint8_t *bhs, uint8_t **dest);
void session_data_out(struct iscsi_conn *c, struct xp_rx *rx);
/* Buffer memory came back: start commands that waited for it (deferred). */
void session_bufs_freed(struct iscsi_session *s);
/* MaxCmdSN for a PDU about to go out: the window the slots allow, as far as the transport can take it. */
uint32_t session_next_max_cmdsn(struct iscsi_session *s);
void session_conn_gone(struct iscsi_conn *c);
/* A non-SCSI PDU with a CmdSN (NOP-Out, TMF, Text, Logout): update ExpCmdSN. Returns false to drop it. */
bool session_check_cmdsn(struct iscsi_conn *c, const void *bhs);
int session_register(struct iscsi_session *s, char *why, size_t whylen);
void session_free(struct iscsi_session *s);
/* Close a session that may live on another reactor; call with iscsi_g.lock held. */
void session_close_async(struct iscsi_session *o);
const struct iscsi_lun *session_lun(const struct iscsi_session *s, uint64_t lun);
/*
 * The LUNs s sees in the configuration now (rt_lock held), and an array of
 * as many ids for the SCSI layer: -EACCES when it is no longer admitted.
 */
int session_lun_map(const struct iscsi_session *s, struct iscsi_lun **out, uint64_t **ids, size_t *count);
/* Install a LUN map (both arrays from session_lun_map, taken), with its I_T_L entries. */
void session_set_lun_map(struct iscsi_session *s, struct iscsi_lun *luns, uint64_t *ids, size_t n);
/*
 * The nexus of c's session ends at lu (the map dropped it, or the session
 * ends): its tasks there forget their I_T_L entry, which goes with it.
 */
void session_nexus_lost(struct iscsi_conn *c, struct scsi_lu *lu);
/* Event ev at every LU of s, each once (one LU may be at two LUNs); w may be NULL. */
void session_lu_event(struct iscsi_session *s, enum scsi_lu_event ev, struct scsi_wait *w);

/* discovery.c */
void discovery_text(struct iscsi_conn *c, struct xp_rx *rx);
bool tpg_initiator_allowed(const struct rt_tpg *tpg, const char *initiator, const struct cfg_acl **acl);
bool tpg_has_portal(const struct rt_tpg *tpg, const struct xp_conn *xp);

/* tmf.c */
void tmf_rx(struct iscsi_conn *c, struct xp_rx *rx);
void tmf_free(struct iscsi_conn *c);
/* The Logout answer (a BHS) of c, sent and c closed once its LUs' events are done everywhere. */
void tmf_logout(struct iscsi_conn *c, void *rsp);

#endif
