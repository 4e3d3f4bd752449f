/*
 * Target configuration: the JSON document (see docs/config.md) loaded into
 * plain structs.  Loading validates everything a running target relies on
 * (names, ranges, references between objects) and fails with a message that
 * names the file, the JSON path of the field and what is wrong.  The
 * structs are data only: nothing here points at what runs (that is
 * target/runtime/'s, found from the configuration by name and index).
 */
#ifndef CONFIG_H
#define CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/reactor.h"
#include "common/proto/scsi_proto.h"
#include "target/backstore/backstore.h"

struct cfg_chap {
	char *userid;            /* NULL: no CHAP */
	char *password;          /* the secret, from the document or read from password_file */
	char *mutual_userid;     /* NULL: one-way */
	char *mutual_password;
	char *password_file;     /* as the document gives it (NULL: the secret is inline) */
	char *mutual_password_file;
};

struct cfg_backstore {
	struct backstore_cfg bs; /* bs.name and bs.path point at the strings below */
	char *name;
	char *path;
	char *serial;            /* NULL: derived from the name */
};

struct cfg_portal {
	char *host;              /* IPv4, IPv6 or "0.0.0.0"/"::" */
	uint16_t port;
	bool iser;
	uint8_t tos;             /* IP ToS of its connections; 0: the system's default */
};

struct cfg_lun {
	uint64_t lun;
	char *backstore;         /* name of a backstore */
	size_t backstore_index;  /* resolved index into config.backstores */
	bool read_only;
};

struct cfg_mapped_lun {
	uint64_t mapped_lun;     /* what the initiator sees */
	uint64_t tpg_lun;        /* a lun of the portal group */
	bool write_protect;
};

struct cfg_acl {
	char *initiator;         /* initiator IQN/EUI/NAA name */
	struct cfg_chap chap;
	struct cfg_mapped_lun *luns;
	size_t nluns;
	bool allow_target_reset; /* may ask for TARGET WARM/COLD RESET */
};

/* iSCSI parameters a portal group offers (RFC 7143 names in the JSON). */
struct cfg_params {
	uint32_t max_recv_dsl;
	uint32_t max_burst;
	uint32_t first_burst;
	uint32_t max_outstanding_r2t;
	bool initial_r2t;
	bool immediate_data;
	bool header_digest;      /* allow CRC32C (None is always allowed) */
	bool data_digest;
	uint32_t default_time2wait;
	uint32_t default_time2retain;
	uint32_t max_connections;
	uint32_t queue_depth;    /* commands per session (CmdSN window) */
	uint32_t nop_in_interval;/* seconds between target NOP-Ins on idle connections; 0 = off */
	uint32_t max_immediate;  /* immediate commands (and waiting TMF answers) per session */
	uint32_t session_buffer_mb; /* pool buffer memory one session's commands may hold */
};

struct cfg_tpg {
	uint16_t tag;
	bool enable;
	bool demo_mode;          /* admit any initiator, with every LUN mapped */
	bool demo_write_protect;
	bool demo_target_reset;  /* demo-mode initiators may ask for TARGET WARM/COLD RESET */
	struct cfg_chap demo_chap; /* CHAP for demo-mode initiators (NULL userid: none) */
	struct cfg_portal *portals;
	size_t nportals;
	struct cfg_lun *luns;
	size_t nluns;
	struct cfg_acl *acls;
	size_t nacls;
	struct cfg_params params;
	/*
	 * Login redirection (RFC 7143 sec. 11.13.5, docs/config.md "redirect"):
	 * a new normal session is sent to redirect_host:redirect_port, or to the
	 * balance portal with the fewest sessions.  Discovery sessions, and
	 * logins that already arrive on that portal, are not redirected.
	 */
	char *redirect_host;     /* a numeric address; NULL: no fixed redirect */
	uint16_t redirect_port;
	bool redirect_permanent; /* status 0102 "moved permanently" rather than 0101 "temporarily" */
	size_t *balance;         /* indices into portals: spread new sessions over these */
	size_t nbalance;
};

/*
 * ALUA (SPC-4 5.16): target port groups of a target (docs/config.md, "alua").
 * States are SPC-4's asymmetric access state codes, and alua.mode the
 * INQUIRY TPGS bits, both from common/proto/scsi_proto.h: the SCSI layer is
 * handed them as they are.
 */
struct cfg_alua_group {
	uint16_t id;             /* target port group, 1-65535 */
	uint8_t state;           /* enum scsi_alua_state */
	bool preferred;
	uint16_t *tpgs;          /* tags of this target's portal groups (their relative port ids) */
	size_t ntpgs;
	uint16_t *remote_ports;  /* relative port ids this process does not serve (another gateway's) */
	size_t nremote;
};

struct cfg_target {
	char *iqn;
	char *alias;             /* may be NULL */
	struct cfg_tpg *tpgs;
	size_t ntpgs;
	/* ALUA: without "alua" in the document, one group 1, active/optimized, with every portal group. */
	bool alua_given;         /* "alua" was in the document: saved back only then */
	uint8_t alua_modes;      /* SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT */
	uint8_t alua_transition_time; /* seconds, REPORT TARGET PORT GROUPS' implicit transition time */
	struct cfg_alua_group *alua_groups;
	size_t nalua_groups;
};

/* global.isns (docs/config.md "isns"): the iSNS server the targets are registered with (target/isns/). */
struct cfg_isns {
	char *server;            /* as given: "IP[:PORT]" */
	char *host;              /* its address */
	uint16_t port;           /* 3205 when none is given */
	char *entity;            /* Entity Identifier; NULL: the host name */
	unsigned esi_interval_s; /* 0: no ESI (isertd's own queries keep the registration) */
	uint16_t esi_port;       /* 0: a free port the system picks */
	unsigned registration_period_s;
	char *discovery_domain;  /* NULL: none */
};
/* global.isns.server: "IP[:PORT]" / "[V6]:PORT", port 3205 when none is given; 0 or -EINVAL. */
int config_parse_isns_server(const char *s, char **host, uint16_t *port);

/*
 * global.admin_https (docs/admin.md "Remote administration"): the HTTPS
 * door to the admin methods, and who may use it.  A principal is named by
 * exactly one of a client certificate's subject, one of its
 * subjectAltNames, or a bearer token (only its SHA-256 is kept).
 */
enum cfg_role { CFG_ROLE_READER = 1, CFG_ROLE_OPERATOR, CFG_ROLE_ADMIN };
#define CFG_HTTPS_PRINCIPALS_MAX 256
#define CFG_HTTPS_TARGETS_MAX    256  /* a principal's "targets" */
struct cfg_principal {
	char *name;
	enum cfg_role role;
	char *subject;           /* RFC 4514 form, as `openssl x509 -subject -nameopt RFC2253` writes it; or NULL */
	char *san;               /* a DNS name, e-mail address or URI of the certificate's subjectAltName; or NULL */
	char *token_hash_file;   /* a file holding "sha256:HEX" of the token; or NULL */
	uint8_t token_sha256[32];
	char **targets;          /* NULL: every target */
	size_t ntargets;
};
struct cfg_admin_https {
	char *listen;            /* HOST:PORT or PORT (loopback), as global.metrics */
	char *certificate, *key; /* PEM files: the server's chain and its key */
	char *client_ca;         /* PEM file of the CAs client certificates must chain to; NULL: none asked for */
	struct cfg_principal *principals;
	size_t nprincipals;
	unsigned max_connections, max_connections_per_address;
	unsigned request_timeout_s;   /* to send each whole request, from connecting or from the last answer */
};
const char *config_role_name(enum cfg_role r);
/* As the file writes it (NULL: out of memory). */
struct json_object *cfg_admin_https_to_json(const struct cfg_admin_https *h);
/* Each principal's token_hash_file read again (SIGHUP: a token rotated); 0, or -EINVAL with none changed after it. */
int config_reread_token_hashes(struct cfg_admin_https *h, char *err, size_t errlen);

/* A target's "alua" object as the file writes it, the default group included (NULL: out of memory). */
struct json_object;
struct json_object *config_alua_obj(const struct cfg_target *tg);

struct config {
	char *origin;            /* file path or "<embedded default>" */
	struct cfg_backstore *backstores;
	size_t nbackstores;
	struct cfg_target *targets;
	size_t ntargets;
	struct cfg_chap discovery_chap;  /* CHAP for discovery sessions (NULL userid: none) */
	bool discovery_auth_required;
	unsigned reactors;               /* 0 = one per core */
	enum reactor_poll_mode poll_mode;
	unsigned adaptive_spin_us;       /* poll_mode "adaptive": how long a reactor polls on after its last work */
	unsigned iser_srq;               /* receives per reactor and RDMA device, shared; 0: per connection */
	char *admin_socket;              /* may be NULL */
	char *metrics;                   /* Prometheus endpoint HOST:PORT or PORT (target/metrics.h); NULL: off */
	char *state_dir;                 /* APTPL state folder as configured; NULL: the default (config_state_dir) */
	/* What peers may hold (docs/security.md). */
	unsigned login_timeout_s;
	unsigned max_connections, max_connections_per_portal, max_connections_per_host;
	unsigned max_sessions;
	unsigned tcp_keepalive_s;        /* 0 = off */
	/* The process's own (the integer keys in cfg_limit_keys with those above). */
	unsigned buffer_pool_mb;         /* per reactor */
	unsigned shutdown_timeout_s;
	unsigned file_mode;              /* permission bits of the file loaded (0: not a file) */
	struct cfg_isns *isns;           /* global.isns; NULL: no iSNS */
	struct cfg_admin_https *admin_https; /* global.admin_https; NULL: the local socket only */
};

/* global.iser_srq: at least as many receives as one connection posts of its own (RDMA_QUEUE, common/transport/rdma.c). */
#define CFG_ISER_SRQ_MIN 160
#define CFG_ISER_SRQ_MAX 65536

/* The embedded default: one 1 GiB RAM LUN, portal 127.0.0.1:3260, demo mode. */
extern const char config_default_json[];

#define CONFIG_DEFAULT_STATE_DIR "/var/lib/isert"
/* The folder of APTPL state files in effect; NULL when global.state_dir is "none". */
const char *config_state_dir(const struct config *c);
/* Is s a valid global.state_dir ("none" or an absolute path of 1-1024 bytes)? */
bool config_valid_state_dir(const char *s);

int config_load_file(const char *path, struct config **out, char *err, size_t errlen);
/* Does the document hold CHAP secrets (a chap object with an inline password)? */
bool config_has_secrets(const struct config *c);

/*
 * Secrets by their place in the document (config_secret.c): the password and
 * mutual_password of every chap object ("chap" of an ACL and of discovery,
 * "demo_chap" of a portal group).  Whatever prints, logs or returns a
 * document, a part of one or a change's parameters masks them first.
 */
#define CONFIG_REDACTED "********"
/* Mask every secret in o (a document, a part of one, or admin parameters holding one), in place (wiping it). */
struct json_object;
void config_redact(struct json_object *o);
/* A masked copy of v, the value of member key of an object that is itself member parent (NULL: none). */
struct json_object *config_redacted(const char *parent, const char *key, struct json_object *v);
/* Free what c holds, its secrets wiped first. */
void config_chap_free(struct cfg_chap *c);
/*
 * Before a document, a part of one or admin parameters (o) is freed: its
 * secrets (config_redact's places) overwritten in place.  config_redact
 * wipes the secrets it drops.
 */
void config_wipe_secrets(struct json_object *o);
/* Before a JSON text that may hold secrets is freed (ours, or json-c's serialization of an object of ours). */
void config_wipe_text(const char *s);
int config_load_string(const char *json, const char *origin, struct config **out, char *err, size_t errlen);
/* A document given as an object, loaded as config_load_string loads its text; the text is wiped after. */
int config_load_doc(struct json_object *doc, const char *origin, struct config **out, char *err, size_t errlen);
/* Write atomically (temp file, fsync, rename). */
int config_save_file(const struct config *c, const char *path, char *err, size_t errlen);
/* Serialize to a newly allocated JSON string (it holds the inline secrets: config_wipe_text, then free()). */
char *config_to_json(const struct config *c);
/* The same document as a json-c object (config_wipe_secrets, then json_object_put()). */
struct json_object *config_to_obj(const struct config *c);
/*
 * The document for comparing two configurations (apply's plan): a secret
 * read from a file is there as well as the file's name, so a changed file is
 * a change.  Never printed unmasked, never loaded.
 */
struct json_object *config_to_obj_compare(const struct config *c);
void config_free(struct config *c);
/* A backstore as the file writes it (NULL: out of memory). */
struct json_object *config_backstore_obj(const struct cfg_backstore *b);

/*
 * The steps that carry document a to document b (config_to_obj_compare's),
 * appended to the array steps: {"op": "create" | "delete" | "set", "path",
 * "value"}, paths as iserctl names objects, secrets masked (config/diff.c).
 */
void config_diff(struct json_object *steps, struct json_object *a, struct json_object *b);
/* One step appended to steps (value taken; may be NULL). */
void config_step(struct json_object *steps, const char *op, const char *path, struct json_object *value);

/*
 * One object added to a loaded configuration (a change that adds one object
 * and nothing else: no whole-document round trip).  obj is checked as the
 * next element of its array by the loader's own code, so the rules and the
 * messages are the file's; origin starts the message.  The append takes the
 * checked object.
 */
int config_check_backstore(const struct config *c, struct json_object *obj, const char *origin,
			   struct cfg_backstore *out, char *err, size_t errlen);
int config_append_backstore(struct config *c, struct cfg_backstore *b);
void config_backstore_clear(struct cfg_backstore *b);
int config_check_lun(const struct config *c, size_t ti, size_t gi, struct json_object *obj, const char *origin,
		     struct cfg_lun *out, char *err, size_t errlen);
int config_append_lun(struct config *c, size_t ti, size_t gi, struct cfg_lun *l);
/* Replace every TPG's portals by the n HOST:PORT portals given (all TCP, or all iSER). */
int config_set_portals(struct config *c, const char *const *hostports, size_t n, bool iser, char *err,
		       size_t errlen);
/* Replace every TPG's portals by HOST:PORT ("[::1]:3260", "0.0.0.0", ...). */
int config_override_portals(struct config *c, const char *hostport, char *err, size_t errlen);
/* Same, with the iser flag of the new portals chosen (the above uses TCP). */
int config_override_portals_iser(struct config *c, const char *hostport, bool iser,
				 char *err, size_t errlen);
/* Parse "HOST[:PORT]" / "[V6]:PORT"; default port 3260. */
int config_parse_hostport(const char *s, char **host, uint16_t *port);
/* global.metrics: "HOST:PORT" (port required) or "PORT" (then 127.0.0.1); 0 or -EINVAL. */
int config_parse_metrics(const char *s, char **host, uint16_t *port);

#endif
