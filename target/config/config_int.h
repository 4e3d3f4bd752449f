/*
 * Target configuration, internal: what the config_*.c files share with each
 * other and nothing else includes (target/config.h is the public header).
 * The code is split by direction: config_json.c reads JSON values (the parse
 * context, the typed getters), config_load.c turns a document into a struct
 * config, config_save.c turns one back into JSON, config_change.c changes a
 * loaded one with the loader's own checks.  The format is documented in
 * docs/config.md; keep the two in step.
 */
#ifndef CONFIG_INT_H
#define CONFIG_INT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "target/config/config.h"

#define CFG_MAX_FILE       (16u << 20)
#define CFG_MAX_NAME       223      /* RFC 7143 sec. 4.2.7.1: iSCSI names up to 223 bytes */
#define CFG_MAX_LUN        16383
#define CFG_MAX_BACKSTORES 4096
#define CFG_MAX_TARGETS    1024
/* A target port group (ALUA) reports at most 255 ports: REPORT TARGET PORT GROUPS' count is one
 * byte (SCSI_ALUA_MAX_PORTS).  Without "alua" one group holds every portal group, so that is the
 * limit on portal groups per target too: one limit, whatever the alua section says. */
#define CFG_MAX_ALUA_PORTS 255
#define CFG_MAX_TPGS       CFG_MAX_ALUA_PORTS
#define CFG_MAX_PORTALS    64
#define CFG_MAX_ACLS       4096
#define CFG_CHAP_MIN       12       /* RFC 7143 sec. 12.1.3: at least 96 bits */
#define CFG_CHAP_MAX       255
#define CFG_DEFAULT_PORT   3260

/* ------------------------------------------------------------------------ */
/* config_json.c: the parse context and typed field access. */

/* Write a message into err (if any): for what has no JSON path. */
void cfg_seterr(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

struct bs_key;  /* config_load.c: the backstore name index */

/* Parse context: where we are, for messages that name the JSON path. */
struct pctx {
	const char *origin;
	char *err;
	size_t errlen;
	char path[512];
	size_t plen;
	struct bs_key *bs_names;  /* sorted by name once the backstores are read */
	size_t nbs_names;
};

/* "origin: path: message" into p->err; returns -EINVAL. */
int cfg_perr(struct pctx *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int cfg_enomem(struct pctx *p);
/* Append .key or [i] to the path; the mark they return goes to cfg_pop. */
size_t cfg_push_key(struct pctx *p, const char *key);
size_t cfg_push_idx(struct pctx *p, size_t i);
void cfg_pop(struct pctx *p, size_t mark);
/* A short rendering of v for "got ..." (masked where p's path is inside a secret's holder). */
const char *cfg_jdesc(struct pctx *p, json_object *v, char *buf, size_t n);

/* Each returns 1 if the key is present and valid, 0 if absent (output
 * untouched), negative errno on error (message written). */
int cfg_lookup(struct pctx *p, json_object *o, const char *key, bool required, json_object **v);
int cfg_get_str(struct pctx *p, json_object *o, const char *key, bool required,
		size_t maxlen, char **out);
int cfg_get_bool(struct pctx *p, json_object *o, const char *key, bool *out);
int cfg_get_u64(struct pctx *p, json_object *o, const char *key, bool required,
		uint64_t min, uint64_t max, uint64_t *out);
int cfg_get_u32(struct pctx *p, json_object *o, const char *key, bool required,
		uint32_t min, uint32_t max, uint32_t *out);
int cfg_get_array(struct pctx *p, json_object *o, const char *key, bool required,
		  size_t maxn, json_object **arr, size_t *n);
/* These return 0 or negative errno (message written). */
int cfg_expect_object(struct pctx *p, json_object *v);
int cfg_check_keys(struct pctx *p, json_object *o, const char *const *allowed);
int cfg_json_to_u64(struct pctx *p, json_object *v, uint64_t min, uint64_t max, uint64_t *out);

/* config_secret.c: is the loader's path inside a secret's holder ("...chap.password")? */
bool cfg_path_secret(const char *path);
/* The secret in file name (absolute, or a systemd credential's name): checked, one line, 0 or -errno. */
int cfg_read_secret_file(struct pctx *p, const char *name, char **out);

/* Value syntaxes. */
bool cfg_valid_ip(const char *s, int *family, unsigned char bin[16]);
int cfg_parse_size_str(const char *s, uint64_t *out);

/* ------------------------------------------------------------------------ */
/* config_load.c: what config_save.c and config_change.c take from the loader. */

struct lunmap { uint8_t bits[(CFG_MAX_LUN + 1) / 8]; };

bool cfg_lunmap_test_set(struct lunmap *m, uint64_t lun);
int cfg_parse_backstore(struct pctx *p, json_object *v, struct cfg_backstore *b);
int cfg_parse_one_lun(struct pctx *p, json_object *el, const struct config *c,
		      struct cfg_tpg *t, size_t i, struct lunmap *luns);
/* Also leaves the sorted name index in p->bs_names (the caller frees it). */
int cfg_check_backstore_dups(struct pctx *p, struct config *c);

/* config_save.c: o[key] = v, taking v; false (v freed) when v is NULL (out of memory) or the add fails,
 * so a writer can chain every member of an object with && and free the object once. */
bool cfg_put(json_object *o, const char *key, json_object *v);

/* config_alua.c: a target's "alua" (after its tpgs), and back to JSON (nothing added without "alua"). */
int cfg_parse_alua(struct pctx *p, json_object *target, struct cfg_target *tg);
bool cfg_alua_to_json(json_object *target, const struct cfg_target *tg);
void cfg_alua_free(struct cfg_target *tg);

/* config_isns.c: global.isns (a member of the global object g), and back to JSON. */
#define CFG_ISNS_PERIOD_DEFAULT 900
#define CFG_ISNS_PERIOD_MIN     3
#define CFG_ISNS_PERIOD_MAX     86400
int cfg_parse_isns(struct pctx *p, json_object *g, struct config *c);
json_object *cfg_isns_to_json(const struct cfg_isns *s);
void cfg_isns_free(struct cfg_isns *s);

/* admin_https.c: global.admin_https (a member of the global object g), and back to JSON. */
int cfg_parse_admin_https(struct pctx *p, json_object *g, struct config *c);
void cfg_admin_https_free(struct cfg_admin_https *h);

/* What peers may hold: defaults (docs/security.md) and ranges. */
struct limit_key {
	const char *key;
	size_t off;
	uint32_t def, min, max;
};
extern const struct limit_key cfg_limit_keys[];
extern const size_t cfg_nlimit_keys;
unsigned *cfg_limit_field(struct config *c, const struct limit_key *k);

#endif
