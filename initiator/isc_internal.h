/* Internal state of the initiator library; not installed. */
#ifndef ISC_INTERNAL_H
#define ISC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/netaddr.h"
#include "common/proto/pdu.h"
#include "common/proto/text.h"
#include "common/transport/transport.h"
#include "isert/initiator.h"

struct reactor;
struct isc_seq;

/*
 * What a target can make the library hold (docs/security.md, "The
 * initiator's bounds").  The send queue is the bytes (BHS + data) handed to
 * the transport and not yet sent: SCSI Commands and Data-Out wait in the
 * library while it holds ISC_SENDQ_BYTES (they point into the caller's
 * buffers; only one more PDU goes past it).  Answers the target asks for
 * (NOP-Out echoes of its pings, requests for the rest of a Text Response)
 * are copies: past ISC_REPLY_BYTES of them unsent (allocation included)
 * the target is not reading, and the connection is dropped.  A target that
 * breaks the protocol on ISC_PROTO_DROPS_MAX connections in a row, with no
 * SCSI status in between, is not logged in to again.  A login follows at
 * most ISC_REDIRECTS_MAX redirections (a loop between portals ends).
 */
#ifndef ISC_SENDQ_BYTES /* (tests/fuzz builds with smaller bounds, to reach them) */
#define ISC_SENDQ_BYTES (4u << 20)
#endif
#ifndef ISC_REPLY_BYTES
#define ISC_REPLY_BYTES (1u << 20)
#endif
#define ISC_PROTO_DROPS_MAX 3
#define ISC_REDIRECTS_MAX 5

enum isc_kind { ISC_K_SCSI, ISC_K_NOP, ISC_K_TMF, ISC_K_TEXT, ISC_K_LOGOUT };

struct isc_task {
	struct isc_session *s;
	enum isc_kind kind;
	struct isc_cmd cmd;
	uint32_t itt;
	uint32_t cmdsn;
	bool issued;         /* on the wire on the current connection */
	bool completed;      /* the response arrived (or it failed) */
	bool immediate;
	bool carried;        /* queued or in flight when the connection was lost */
	uint8_t ua_retries;  /* re-issued after a unit attention the reconnect caused */
	unsigned pdus;       /* PDUs of ours still queued in the transport */
	uint32_t next_datasn;
	uint32_t data_in;    /* Data-In bytes received */
	uint32_t next_r2tsn; /* the R2TSN the next R2T must carry */
	uint32_t r2t_out;    /* R2Ts whose last Data-Out has not left yet (MaxOutstandingR2T) */
	unsigned nseq;       /* Data-Out sequences of this task waiting in the session's queue */
	uint8_t bhs[PDU_BHS_LEN]; /* TMF/NOP/Text/Logout request to (re)send */
	uint8_t *out_data;   /* their data segment (owned) */
	uint32_t out_len;
	struct isc_result res;
	isc_task_cb cb;
	isc_tmf_cb tmf_cb;
	isc_done_cb done_cb;
	void *arg;
	bool has_ref;              /* ABORT TASK: the task to abort, by ITT (it may be gone) */
	uint32_t ref_itt;
	int tmf_response;
	struct text_buf text;      /* Text: response accumulated over continuations */
	struct text_buf *text_sink; /* where the whole text goes when the task ends */
	struct isc_task *prev, *next; /* queue: waiting or in flight */
	/* iSER: the caller's buffer registered for this task (not a pool buffer) */
	void *mr;
	void *mr_dev;
	uint32_t rkey;
};

/* A buffer isc_buf_alloc() handed out (sorted by address for lookups). */
struct isc_bufent {
	uint8_t *start;
	struct buf *b;
};

enum isc_state {
	ISC_S_IDLE, ISC_S_CONNECT, ISC_S_LOGIN, ISC_S_FFP, ISC_S_LOGOUT, ISC_S_RECONNECT, ISC_S_FAILED, ISC_S_FREEING
};

enum isc_login_step { LS_SEC_START, LS_CHAP_A, LS_CHAP_R, LS_OP };

/* One login's state: from isc_login_start() to isc_login_end(). */
struct isc_login {
	enum isc_login_step step;
	struct neg_ctx neg;
	struct text_buf pending_answers; /* our answers to keys the target offered */
	struct text_buf rsp_text;        /* continuation of login responses */
	uint32_t itt;
	uint8_t csg;
	uint8_t mutual_id;
	uint8_t mutual_chal[16];
};

struct isc_session {
	struct reactor *r;
	struct xp_conn *xc;
	const struct transport_ops *xops;
	struct isc_options o;
	char *strs[7];          /* owned copies of the option strings */
	char errmsg[512];
	enum isc_state state;
	bool discovery, in_service, kicked, user_logout;
	char host[256];
	uint16_t port;          /* where the connection goes (a redirection changes it for one login) */
	char home_host[256];
	uint16_t home_port;     /* the portal given, or one the target moved to permanently: reconnects go there */
	char redir_host[256];
	uint16_t redir_port;    /* nonzero: the login was redirected there; the next connection goes there */
	unsigned redirects;     /* redirections followed by this login */
	char target[ISC_NAME_MAX];
	uint8_t isid[6];
	uint16_t tsih;
	uint16_t cid;
	/* login: the one in progress, and what the last one left */
	struct isc_login *login; /* NULL outside a login */
	struct neg_params params; /* negotiated: in force since the last login */
	uint16_t login_status;
	int login_err;          /* why the login failed (-EACCES, -EPERM, -EPROTO) */
	bool reconnecting;
	uint32_t login_itt;     /* the last login's ITT (each login takes the next) */
	int chap_alg;
	bool mutual;
	char target_alias[256];
	uint64_t deadline_ns;   /* connect + login, or logout, must end by then */
	isc_done_cb login_cb;
	void *login_arg;
	/* sequencing */
	uint32_t cmdsn, exp_cmdsn, max_cmdsn, exp_statsn;
	/* tasks */
	struct isc_task **slots;
	uint32_t nslots, slot_gen;
	uint32_t *free_slots;
	uint32_t nfree;
	struct isc_task *wait_head, *wait_tail; /* not yet issued (window, reconnect) */
	struct isc_task *fly_head, *fly_tail;   /* issued on this connection */
	unsigned ntasks;
	bool issue_err_said;    /* issuing a task failed and errmsg already says why */
	unsigned nfly_scsi;     /* SCSI tasks in flight (iSER: bounded by our receives) */
	/* iSER: registered buffers */
	void *rdma_dev;         /* device of the session's connection (its pool is registered there) */
	int pool_dev;           /* that device's index in the pool: buffers' keys[pool_dev] */
	struct isc_bufent *bufs;
	size_t nbufs, bufs_cap;
	/* the send queue (ISC_SENDQ_BYTES, ISC_REPLY_BYTES) and Data-Out waiting for room in it */
	size_t sendq;           /* BHS + data bytes handed to the transport, not yet sent */
	size_t reply_mem;       /* memory of queued answers to the target */
	bool resume_pending;    /* a deferred call resumes sending once the queue drained */
	struct isc_seq *seq_head, *seq_tail;
	uint32_t conn_gen;      /* counts connections: a PDU's completion knows its own */
	int drop_err;           /* -EPROTO once the target broke the protocol on this connection */
	unsigned proto_drops;   /* connections in a row lost that way (ISC_PROTO_DROPS_MAX) */
	/* timers */
	int tfd;
	uint64_t last_rx_ns;
	struct isc_task *ping;
	uint64_t ping_sent_ns;
	/* reconnect */
	uint64_t reconnect_start_ns, reconnect_next_ns;
	unsigned backoff_ms;
	unsigned reconnects;
};

/*
 * Everything below is the library's own business: hidden, so that the
 * shared library's version script (isc_* global) exports only what
 * include/isert/initiator.h declares.
 */
#pragma GCC visibility push(hidden)

/* log.c */
void isc_log_init(void);
void isc_log(enum isc_log_level lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3), nonnull(2)));

/* session.c */
void isc_seterr(struct isc_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Where the connection goes, as messages write it: host:port, [IPv6]:port (common/netaddr.h); buf of NETADDR_HOST_LEN. */
static inline const char *isc_at(const struct isc_session *s, char *buf, size_t n)
{
	netaddr_join(buf, n, s->host, s->port);
	return buf;
}

/* conn.c */
void isc_on_tick(void *arg, uint32_t events);
/* isc_send_pdu flags: copy the data; the PDU ends the Data-Out sequence of an R2T. */
enum { ISC_TX_COPY = 1, ISC_TX_R2T_END = 2 };
int isc_send_bhs(struct isc_session *s, const uint8_t *bhs, const uint8_t *data, uint32_t len, unsigned flags,
		 struct isc_task *t);
/* The same with iSER buffer descriptors (its *_stag* fields) taken from iser. */
int isc_send_pdu(struct isc_session *s, const uint8_t *bhs, const uint8_t *data, uint32_t len, unsigned flags,
		 struct isc_task *t, const struct xp_pdu *iser);
/* An answer the target asked for (copied); past ISC_REPLY_BYTES unsent it drops the connection. */
int isc_send_reply(struct isc_session *s, const uint8_t *bhs, const uint8_t *data, uint32_t len,
		   struct isc_task *t);
/* Commands and Data-Out wait while this is true. */
bool isc_sendq_full(const struct isc_session *s);
/* The largest data segment a PDU of ours may carry (the target's receive length). */
uint32_t isc_send_dsl(const struct isc_session *s);
void isc_update_sn(struct isc_session *s, uint32_t exp_cmdsn, uint32_t max_cmdsn);
/* why NULL: the session's error says it already.  -EPROTO: logged as a protocol violation. */
void isc_conn_lost(struct isc_session *s, int err, const char *why);
/*
 * The target broke the protocol: the reason goes to the session's error and
 * the log.  isc_proto_fail() leaves the closing to its caller (a transport
 * upcall returning -EPROTO) and returns -EPROTO; isc_proto_drop() closes.
 */
int isc_proto_fail(struct isc_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void isc_proto_drop(struct isc_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void isc_arm_timer(struct isc_session *s);

/* sync.c: one waiter for every synchronous wrapper */
struct isc_waiter {
	bool done;
	int err;
	int response;             /* TMF */
	struct isc_result res;    /* SCSI task */
	uint32_t data_in;         /* its Data-In bytes (TCP) */
};
void isc_waiter_done(struct isc_session *s, int err, void *arg);  /* an isc_done_cb */
/* rc: what starting the asynchronous call returned; then the loop runs until w is done. */
int isc_waiter_wait(struct isc_session *s, struct isc_waiter *w, int rc);
/* isc_submit_sync, and *got: the bytes of a read that arrived (at most cmd->len). */
int isc_submit_sync_got(struct isc_session *s, const struct isc_cmd *cmd, struct isc_result *r, uint32_t *got);

/* login.c */
int isc_login_start(struct isc_session *s);
void isc_login_rx(struct isc_session *s, struct xp_rx *rx);
/* Free the login's state (done, refused, connection closed, session freed). */
void isc_login_end(struct isc_session *s);

/* task.c */
struct isc_task *isc_task_alloc(struct isc_session *s, enum isc_kind kind);
void isc_task_queue(struct isc_session *s, struct isc_task *t);
void isc_task_pump(struct isc_session *s);
void isc_task_finish(struct isc_session *s, struct isc_task *t, int err);
void isc_task_pdu_done(struct isc_session *s, struct isc_task *t);
struct isc_task *isc_task_by_itt(struct isc_session *s, uint32_t itt);
int isc_task_rx_bhs(struct isc_session *s, const uint8_t *bhs, uint8_t **dest);
void isc_task_rx(struct isc_session *s, struct xp_rx *rx);
void isc_tasks_requeue(struct isc_session *s);
void isc_tasks_fail_all(struct isc_session *s, int err);
void isc_tasks_free_all(struct isc_session *s);

/* dataout.c: Data-Out sequences (unsolicited, or one per R2T) sent as the send queue has room */
int isc_dout_add(struct isc_session *s, struct isc_task *t, uint32_t ttt, uint32_t off, uint32_t len, bool r2t);
void isc_dout_pump(struct isc_session *s);
void isc_dout_drop(struct isc_session *s, struct isc_task *t);
void isc_dout_drop_all(struct isc_session *s);
void isc_r2t_rx(struct isc_session *s, struct xp_rx *rx);

/* buffers.c */
int isc_mem_attach(struct isc_session *s, struct xp_conn *xc);
int isc_task_map(struct isc_session *s, struct isc_task *t, uint32_t *rkey);
void isc_task_unmap(struct isc_task *t);
void isc_bufs_free_all(struct isc_session *s);

/* errors.c */
void isc_sense_parse(const uint8_t *p, uint32_t len, struct isc_sense *out);

#pragma GCC visibility pop

#endif
