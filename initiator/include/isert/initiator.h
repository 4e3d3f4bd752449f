/*
 * isert initiator library: iSCSI (RFC 7143) sessions from user space.
 *
 * Asynchronous first: a session owns a private event loop whose file
 * descriptor the caller puts in its own poll/epoll/io_uring loop
 * (isc_get_fd(), isc_which_events(), isc_service()); every callback runs
 * inside isc_service() or a synchronous wrapper, on the caller's thread.
 * Every call that blocks ends in _sync (since 1.2: the names it replaced
 * are at the end of this header, deprecated) and runs that loop itself.
 * A session is used by one thread at a time.
 *
 * Error convention, for every function: one returning int returns 0 (or a
 * count / a value >= 0 where stated) on success and a negative errno on
 * failure; one returning a pointer returns NULL with errno set to the
 * (positive) errno; a void function cannot fail.  The errors, and the words
 * for the last one in isc_errmsg():
 *   -ECONNREFUSED, -EHOSTUNREACH, -ETIMEDOUT, -EINVAL(address)  cannot connect
 *   -EACCES   authentication failed (login status 0x0201, or mutual CHAP:
 *             the target's proof was wrong)
 *   -EPERM    login refused by the target (any other status class 2/3)
 *   -EIO      a SCSI status other than GOOD (see struct isc_result)
 *   -ECONNRESET  the connection was lost and could not be re-established
 *   -ECANCELED   the task was aborted or the session is closing
 *   -EPROTO   the target broke the protocol
 *   -ENODEV   iSER: no RDMA stack on this host; -EPROTONOSUPPORT: a build
 *             without rdma-core
 * Nothing in the library aborts the process.
 */
#ifndef ISERT_INITIATOR_H
#define ISERT_INITIATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * ABI and versions: libisert-initiator.so.ISC_API_VERSION_MAJOR.  Within a
 * major version the library only adds: new functions, new enum values, new
 * fields at the end of struct isc_options (see there).  Other structs in
 * this header are filled by the library and keep their layout for the whole
 * major version.  A change that breaks a built program bumps the major (and
 * the soname).  The minor counts additions: compare isc_version() with the
 * macros to learn what the library loaded at run time offers.
 */
#define ISC_API_VERSION_MAJOR 1
#define ISC_API_VERSION_MINOR 2
#define ISC_API_VERSION ((ISC_API_VERSION_MAJOR << 16) | ISC_API_VERSION_MINOR)
/* The library's ISC_API_VERSION (major << 16 | minor). */
unsigned isc_version(void);

/* Marks a name kept only for programs written before it was replaced: the compiler names the new one. */
#if defined(__GNUC__) || defined(__clang__)
#define ISC_DEPRECATED(use) __attribute__((deprecated("use " use)))
#else
#define ISC_DEPRECATED(use)
#endif

/*
 * Logging: the library never writes to stderr or stdout by itself; its
 * messages (connection trouble, bad PDUs from the target, the transport's
 * warnings) go to one process-wide callback, none by default.  Set it
 * before the first session; it may run on any thread that is inside a
 * library call (isc_service(), a *_sync wrapper), concurrently when threads
 * drive different sessions.  msg has no trailing newline.  max_level: the
 * most verbose level delivered.  cb NULL: silent again.  The environment
 * variable ISC_DEBUG, when set and no callback is, sends ISC_LOG_DEBUG
 * connection events to stderr (for debugging a program you cannot change).
 */
enum isc_log_level { ISC_LOG_ERR, ISC_LOG_WARN, ISC_LOG_INFO, ISC_LOG_DEBUG };
typedef void (*isc_log_cb)(enum isc_log_level level, const char *msg, void *arg);
void isc_set_log_cb(isc_log_cb cb, void *arg, enum isc_log_level max_level);

struct isc_session;
struct isc_task;

/* ---- URLs: iscsi://[user[%password]@]host[:port]/target-iqn/lun, iser://... ---- */

#define ISC_NAME_MAX 224
struct isc_url {
	bool iser;
	char host[256];          /* IPv6 literals without brackets */
	uint16_t port;           /* 3260 when absent */
	char target[ISC_NAME_MAX];
	bool has_lun;
	uint64_t lun;
	char user[256];
	char password[256];
};
/* Also accepts a bare portal "host[:port]" when portal_only is true. */
int isc_url_parse(const char *url, bool portal_only, struct isc_url *out, char *err, size_t errlen);

/* ---- session options ---- */

/*
 * The options struct grows at its end from one minor version to the next.
 * Rule: always fill it with isc_options_default() first (it sets
 * struct_size to the size of the struct your program was compiled with),
 * then change fields.  The library reads only struct_size bytes and takes
 * defaults for fields it has and your program does not; it refuses
 * (NULL, errno EINVAL) a struct_size below the first version's or one
 * larger than its own whose extra bytes are not zero (a newer program
 * asking for something this library cannot do).
 */
struct isc_options {
	size_t struct_size;           /* set by isc_options_default() */
	const char *initiator_name;   /* default "iqn.2026-11.org.isert:initiator" */
	const char *initiator_alias;  /* optional */
	const char *user, *password;  /* CHAP: we prove ourselves (URL user%password fills these) */
	const char *target_user, *target_password; /* mutual CHAP: the target proves itself */
	int chap_algs[4];             /* CHAP_A preference, 0-terminated; default 7,6,5 then 8 */
	bool header_digest, data_digest; /* offer CRC32C (the target may refuse) */
	bool immediate_data, initial_r2t;
	uint32_t max_recv_dsl, max_burst, first_burst;
	unsigned nop_interval_s;      /* NOP-Out ping after this idle time; 0: off */
	unsigned nop_timeout_s;       /* no NOP-In within: the connection is dead */
	unsigned reconnect_timeout_s; /* keep retrying login this long; 0: no reconnect */
	unsigned connect_timeout_s;   /* time limit for connecting and logging in */
	bool iser;                    /* connect over iSER (RDMA) instead of TCP (iser:// URLs set it) */
};
void isc_options_default(struct isc_options *o);

/* ---- session and event loop ---- */

/* o NULL: the defaults.  NULL with errno on failure (EINVAL: see struct isc_options). */
struct isc_session *isc_session_new(const struct isc_options *o);
/* Closes the connection without logout; pending tasks complete with -ECANCELED. */
void isc_session_free(struct isc_session *s);

int isc_get_fd(const struct isc_session *s);
int isc_which_events(const struct isc_session *s);  /* POLLIN */
/* Run ready work and callbacks; returns 0 or a negative errno. */
int isc_service(struct isc_session *s, int revents);

/* The last error in words (connection, login status decoded, sense decoded). */
const char *isc_errmsg(const struct isc_session *s);
const char *isc_strerror(int err);

typedef void (*isc_done_cb)(struct isc_session *s, int err, void *arg);

/*
 * Connect to host:port and log in to target (NULL: a discovery session).
 * The async form returns at once (a host name is resolved first, which may
 * block; numeric addresses never do); cb runs from isc_service() when the
 * login is done or failed.
 * isc_connect_url_sync takes host, port, target and user/password from the
 * URL (they override those of isc_session_new()), and the transport
 * (iser:// or iscsi://, whatever isc_options.iser said).  The _sync forms
 * are since 1.2 (before: isc_connect, isc_connect_url, isc_logout).
 */
int isc_connect_async(struct isc_session *s, const char *host, uint16_t port, const char *target,
		      isc_done_cb cb, void *arg);
int isc_connect_sync(struct isc_session *s, const char *host, uint16_t port, const char *target);
int isc_connect_url_sync(struct isc_session *s, const struct isc_url *u);
int isc_logout_async(struct isc_session *s, isc_done_cb cb, void *arg);
int isc_logout_sync(struct isc_session *s);
bool isc_logged_in(const struct isc_session *s);

/* Status class/detail of the last login response (0 if none or success). */
uint16_t isc_login_status(const struct isc_session *s);
/* The same in words ("authentication failure", "target not found"...). */
const char *isc_login_status_str(uint16_t status);

/* Operational parameters in force after login. */
struct isc_params {
	bool header_digest, data_digest, immediate_data, initial_r2t;
	uint32_t max_recv_dsl;       /* we receive */
	uint32_t target_max_recv_dsl; /* we may send */
	uint32_t max_burst, first_burst, max_outstanding_r2t, erl;
	uint32_t time2wait, time2retain;
	uint16_t tsih;
	uint32_t cmd_window;          /* MaxCmdSN - ExpCmdSN + 1 now */
	char target_alias[256];
	const char *auth;             /* "None", "CHAP", "CHAP (mutual)" */
	int chap_alg;                 /* 5 MD5, 6 SHA-1, 7 SHA-256, 8 SHA3-256; 0 without CHAP */
	char portal[272];             /* host:port ([IPv6]:port) we logged in to */
	unsigned reconnects;          /* successful re-logins so far */
	/* iSER (RFC 7145): zero when the session runs over TCP */
	bool iser;
	uint32_t initiator_recv_dsl;  /* control PDU data we receive */
	uint32_t target_recv_dsl;     /* immediate data we may send in a command */
};
int isc_get_params(const struct isc_session *s, struct isc_params *p);

/* ---- registered buffers ---- */

/*
 * Over iSER the target moves data straight in and out of the caller's buffer
 * (RDMA WRITE for reads, RDMA READ for writes), so the buffer must be
 * registered with the RDMA device.  A buffer from isc_buf_alloc() comes from
 * the session's pool, registered once (when the first iSER connection is up,
 * and as the pool grows): a command whose data lies inside one costs no
 * registration.  Any other buffer is registered for the command and
 * deregistered when it completes (pinning its pages each time: see
 * docs/initiator.md for the cost).  Over TCP these are plain memory.
 * Contents are undefined; len from 1 byte to 2 GiB.  NULL with errno set.
 * isc_buf_free() returns -EINVAL for a pointer isc_buf_alloc() did not
 * return; it must not be freed while a task uses it.  Buffers not freed are
 * released by isc_session_free().
 */
void *isc_buf_alloc(struct isc_session *s, size_t len);
int isc_buf_free(struct isc_session *s, void *buf);

/* ---- SCSI tasks ---- */

enum isc_dir { ISC_DIR_NONE, ISC_DIR_READ, ISC_DIR_WRITE };

struct isc_cmd {
	uint64_t lun;
	uint8_t cdb[16];
	uint8_t cdb_len;
	enum isc_dir dir;
	void *data;                  /* the caller's buffer: read into / written from */
	uint32_t len;                /* expected data transfer length */
};

struct isc_sense {
	uint8_t key, asc, ascq;
	bool valid;
	uint8_t raw[252];
	uint32_t len;
};

struct isc_result {
	int err;                     /* 0, -EIO (status not GOOD), or a transport error */
	uint8_t status;              /* SCSI status (0 GOOD, 2 CHECK CONDITION, ...) */
	uint32_t residual;           /* bytes not transferred (underflow) or in excess (overflow) */
	bool underflow, overflow;
	struct isc_sense sense;
};

typedef void (*isc_task_cb)(struct isc_session *s, const struct isc_result *r, void *arg);

/*
 * Submit a task; the callback runs once, from isc_service(), when it
 * completes (also on error).  Returns the task (a handle valid until the
 * callback returns, e.g. for isc_abort_task) or NULL with errno set.
 * The buffer must stay valid until the callback.  Tasks beyond the
 * target's command window wait inside the library.
 */
struct isc_task *isc_submit(struct isc_session *s, const struct isc_cmd *cmd, isc_task_cb cb, void *arg);
int isc_submit_sync(struct isc_session *s, const struct isc_cmd *cmd, struct isc_result *r);
/* Tasks submitted and not yet completed. */
unsigned isc_tasks_pending(const struct isc_session *s);

/* Describe a result ("CHECK CONDITION: ILLEGAL REQUEST, LBA out of range"). */
void isc_result_str(const struct isc_result *r, char *buf, size_t len);
const char *isc_sense_key_str(uint8_t key);
const char *isc_asc_str(uint8_t asc, uint8_t ascq);

/* CDB builders: fill cmd (lun and buffer included). */
void isc_cmd_tur(struct isc_cmd *c, uint64_t lun);
void isc_cmd_inquiry(struct isc_cmd *c, uint64_t lun, bool evpd, uint8_t page, void *buf, uint16_t len);
void isc_cmd_readcap16(struct isc_cmd *c, uint64_t lun, void *buf, uint32_t len);
void isc_cmd_report_luns(struct isc_cmd *c, void *buf, uint32_t len);
void isc_cmd_read16(struct isc_cmd *c, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t block_size,
		    void *buf);
void isc_cmd_write16(struct isc_cmd *c, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t block_size,
		     const void *buf, bool fua);
void isc_cmd_sync_cache16(struct isc_cmd *c, uint64_t lun, uint64_t lba, uint32_t blocks);
/* UNMAP: param (8 + 16 * n bytes) is filled from the ranges by the builder. */
struct isc_range { uint64_t lba; uint32_t blocks; };
int isc_cmd_unmap(struct isc_cmd *c, uint64_t lun, const struct isc_range *r, unsigned n, void *param,
		  uint32_t param_len);
void isc_cmd_write_same16(struct isc_cmd *c, uint64_t lun, uint64_t lba, uint32_t blocks, const void *block,
			  uint32_t block_size, bool unmap);

/* Parsed answers. */
struct isc_inquiry {
	uint8_t peripheral_type, peripheral_qualifier;
	char vendor[9], product[17], revision[5];
};
int isc_parse_inquiry(const void *buf, uint32_t len, struct isc_inquiry *out);
struct isc_capacity { uint64_t blocks; uint32_t block_size; bool thin; };
int isc_parse_readcap16(const void *buf, uint32_t len, struct isc_capacity *out);
/*
 * A REPORT LUNS answer of len bytes (what arrived, not the buffer's size):
 * returns how many LUNs it holds, those its list length names that lie
 * whole within len (may exceed max: the first max are stored), or -EPROTO.
 * Since 1.1; before, the count the list length claimed, even beyond len,
 * so entries up to that count could be left unwritten.
 */
int isc_parse_report_luns(const void *buf, uint32_t len, uint64_t *luns, unsigned max);
/*
 * Since 1.1.  The same answer: *n the LUNs stored in luns (at most max,
 * every one of them from the answer), *truncated true when its list names
 * more (more than max, or more than the answer held).  0 or -EPROTO.
 */
int isc_parse_report_luns2(const void *buf, uint32_t len, uint64_t *luns, unsigned max, unsigned *n,
			   bool *truncated);

/* Synchronous helpers (r may be NULL when only the error code matters). */
int isc_tur_sync(struct isc_session *s, uint64_t lun, struct isc_result *r);
int isc_inquiry_sync(struct isc_session *s, uint64_t lun, struct isc_inquiry *inq, struct isc_result *r);
int isc_vpd_sync(struct isc_session *s, uint64_t lun, uint8_t page, void *buf, uint16_t len,
		 struct isc_result *r);
int isc_readcap16_sync(struct isc_session *s, uint64_t lun, struct isc_capacity *cap, struct isc_result *r);
/*
 * *n: the LUNs stored in luns, at most max and only those the target's
 * answer held (since 1.1; before, the count its list length claimed, which
 * could exceed both).  isc_report_luns2_sync (since 1.1) also sets
 * *truncated when the target's list names LUNs that are not in luns.
 */
int isc_report_luns_sync(struct isc_session *s, uint64_t *luns, unsigned max, unsigned *n,
			 struct isc_result *r);
int isc_report_luns2_sync(struct isc_session *s, uint64_t *luns, unsigned max, unsigned *n, bool *truncated,
			  struct isc_result *r);
int isc_read16_sync(struct isc_session *s, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t block_size,
		    void *buf, struct isc_result *r);
int isc_write16_sync(struct isc_session *s, uint64_t lun, uint64_t lba, uint32_t blocks, uint32_t block_size,
		     const void *buf, bool fua, struct isc_result *r);
int isc_sync_cache_sync(struct isc_session *s, uint64_t lun, struct isc_result *r);
int isc_unmap_sync(struct isc_session *s, uint64_t lun, const struct isc_range *ranges, unsigned n,
		   struct isc_result *r);
int isc_write_same16_sync(struct isc_session *s, uint64_t lun, uint64_t lba, uint32_t blocks,
			  const void *block, uint32_t block_size, bool unmap, struct isc_result *r);

/* ---- task management and keepalive ---- */

/* The target's TMF response (RFC 7143 sec. 11.6.1). */
enum isc_tmf_response {
	ISC_TMF_COMPLETE = 0,          /* function complete */
	ISC_TMF_NO_TASK = 1,           /* task does not exist */
	ISC_TMF_NO_LUN = 2,            /* LUN does not exist */
	ISC_TMF_TASK_ALLEGIANT = 3,    /* task still allegiant */
	ISC_TMF_NO_REASSIGN = 4,       /* task allegiance reassignment not supported */
	ISC_TMF_NOT_SUPPORTED = 5,     /* task management function not supported */
	ISC_TMF_AUTH_FAILED = 6,       /* function authorization failed */
	ISC_TMF_REJECTED = 255,        /* function rejected */
};
/*
 * err 0: response is the target's answer, an enum isc_tmf_response value
 * (an int so that values a newer target sends still fit); err < 0: no
 * answer (the connection was lost...) and response is meaningless.
 */
typedef void (*isc_tmf_cb)(struct isc_session *s, int err, int response, void *arg);
int isc_abort_task_async(struct isc_session *s, struct isc_task *t, isc_tmf_cb cb, void *arg);
int isc_lu_reset_async(struct isc_session *s, uint64_t lun, isc_tmf_cb cb, void *arg);
/* Return the TMF response (an enum isc_tmf_response, >= 0) or a negative errno. */
int isc_abort_task_sync(struct isc_session *s, struct isc_task *t);
int isc_lu_reset_sync(struct isc_session *s, uint64_t lun);
/* A NOP-Out ping; cb when the target answered. */
int isc_nop_async(struct isc_session *s, isc_done_cb cb, void *arg);
int isc_nop_sync(struct isc_session *s);

/* ---- discovery ---- */

struct isc_portal { char addr[64]; uint16_t port; uint16_t tpgt; };
struct isc_target_info {
	char name[ISC_NAME_MAX];
	unsigned nportals;
	struct isc_portal *portals;
};
struct isc_discovery {
	unsigned ntargets;
	struct isc_target_info *targets;
};
/* SendTargets=All on a logged-in discovery session. */
int isc_send_targets_sync(struct isc_session *s, struct isc_discovery **out);
/* Connect, discover, log out: one call (since 1.2; before, isc_discover). */
int isc_discover_sync(const char *host, uint16_t port, const struct isc_options *o, struct isc_discovery **out,
		      char *err, size_t errlen);
void isc_discovery_free(struct isc_discovery *d);

/*
 * ---- names before 1.2 ----
 * The blocking calls that did not end in _sync.  Each is the same function
 * as its _sync name (an alias in the library), kept so that programs built
 * against 1.0 or 1.1 run unchanged; code compiled against this header is
 * told the new name.
 */
ISC_DEPRECATED("isc_connect_sync")
int isc_connect(struct isc_session *s, const char *host, uint16_t port, const char *target);
ISC_DEPRECATED("isc_connect_url_sync") int isc_connect_url(struct isc_session *s, const struct isc_url *u);
ISC_DEPRECATED("isc_logout_sync") int isc_logout(struct isc_session *s);
ISC_DEPRECATED("isc_discover_sync")
int isc_discover(const char *host, uint16_t port, const struct isc_options *o, struct isc_discovery **out,
		 char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
