/*
 * The fleet's configuration document (docs/fleet.md): what every gateway
 * of a fleet serves alike, and one section per gateway, in one JSON
 * document kept in the cluster.  This is the document as data: a
 * gateway's own configuration made from it (in the configuration file's
 * format, docs/config.md), the document made again from a gateway's
 * configuration once an edit changed it, and the rules no single gateway's
 * configuration can check (a relative port served by two gateways).
 * Nothing here talks to the cluster (target/fleet/ does).
 *
 *   {"format": "isert-fleet",
 *    "global": {the keys every gateway shares},
 *    "discovery": {...},
 *    "backstores": [stores every gateway opens (rbd)],
 *    "targets": [{"iqn", "alias", "alua": {... "groups": [{"id", "state", "tpgs": [relative ports]}]},
 *                 "tpg": {what each of the target's portal groups holds: luns, acls, params, ...}}],
 *    "gateways": [{"name", "global": {reactors, poll_mode, admin_socket, ...},
 *                  "backstores": [its own stores],
 *                  "tpgs": [{"target", "tag", "portals"}]}]}
 */
#ifndef ISERT_CONFIG_FLEET_H
#define ISERT_CONFIG_FLEET_H

#include <stdbool.h>
#include <stddef.h>

struct json_object;

#define FLEET_FORMAT       "isert-fleet"
#define FLEET_MAX_GATEWAYS 64
#define FLEET_NAME_MAX     63      /* a gateway's name: [A-Za-z0-9._-], 1-63 characters */
#define FLEET_DOC_MAX      (4u << 20) /* bytes of the document's text */

/* Is name a gateway name the document takes? */
bool config_fleet_name_ok(const char *name);

/*
 * The document's shape and the fleet's own rules, and each gateway's
 * configuration made and loaded with the file's rules: 0, or -EINVAL with
 * err naming the gateway and the field.
 */
int config_fleet_check(struct json_object *doc, char *err, size_t errlen);

/* Gateway gw's configuration (*out, the file's format): -ENOENT when the document has no such gateway. */
int config_fleet_compose(struct json_object *doc, const char *gw, struct json_object **out, char *err,
			 size_t errlen);

/*
 * The document once gateway gw's configuration is cfg (what an edit made
 * of the configuration composed for it): shared parts from cfg, gw's
 * section from cfg, the other gateways' sections kept.  -EINVAL (err
 * says why) for what a fleet cannot hold: a secret written in the
 * document, two portal groups of one target on gw with different LUNs or
 * ACLs.
 */
int config_fleet_decompose(struct json_object *doc, const char *gw, struct json_object *cfg,
			   struct json_object **out, char *err, size_t errlen);

/* A new gateway (no portal group yet), or one removed with its portal groups; -EEXIST, -ENOENT. */
int config_fleet_gateway_add(struct json_object *doc, const char *gw, char *err, size_t errlen);
int config_fleet_gateway_remove(struct json_object *doc, const char *gw, char *err, size_t errlen);

/*
 * The document made from n gateways' configurations (cfgs[i], the file's
 * format, already loaded and written back by the configuration code, so
 * defaults agree) named names[i]: -EINVAL when what they must share
 * differs, err showing the first difference and the two gateways.
 */
int config_fleet_import(struct json_object *const *cfgs, const char *const *names, size_t n,
			struct json_object **out, char *err, size_t errlen);

#endif
