/*
 * The fleet's document (target/config/fleet.c): any input is refused with
 * a message, or is a document whose every gateway's configuration loads
 * (but for the secret files each gateway reads itself);
 * each of those, written back by the configuration code and decomposed
 * again, is a document that passes the same check; the import of two of
 * them agrees with itself.
 */
#include <errno.h>
#include <json-c/json.h>
#include <string.h>

#include "fuzz.h"
#include "target/config/config.h"
#include "target/config/fleet.h"

static const char *gateway_name(json_object *doc, size_t i)
{
	json_object *gws = NULL, *n = NULL;
	json_object_object_get_ex(doc, "gateways", &gws);
	json_object_object_get_ex(json_object_array_get_idx(gws, i), "name", &n);
	return json_object_get_string(n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[512];
	if (size > FLEET_DOC_MAX)
		return 0;
	json_tokener *tok = json_tokener_new_ex(64);
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8); /* as target/fleet/fleet.c reads it */
	json_object *doc = json_tokener_parse_ex(tok, (const char *)data, (int)size);
	bool parsed = json_tokener_get_error(tok) == json_tokener_success;
	json_tokener_free(tok);
	if (!parsed) {
		json_object_put(doc);
		return 0;
	}
	memset(err, 'X', sizeof(err));
	int rc = config_fleet_check(doc, err, sizeof(err));
	if (rc) {
		FUZZ_CHECK(rc < 0 && memchr(err, '\0', sizeof(err)) && err[0], "refused (%d) without a message", rc);
		json_object_put(doc);
		return 0;
	}
	json_object *gws = NULL;
	json_object_object_get_ex(doc, "gateways", &gws);
	for (size_t i = 0; i < json_object_array_length(gws); i++) {
		const char *gw = gateway_name(doc, i);
		json_object *c = NULL, *back = NULL, *nd = NULL;
		struct config *cfg = NULL;
		FUZZ_CHECK(config_fleet_compose(doc, gw, &c, err, sizeof(err)) == 0, "a checked document's gateway %s: %s",
			   gw, err);
		/* The check stood in for secret files (each gateway reads its own): only those may fail here. */
		if (config_load_doc(c, gw, &cfg, err, sizeof(err))) {
			FUZZ_CHECK(strstr(err, "password_file"), "gateway %s does not load: %s", gw, err);
			json_object_put(c);
			continue;
		}
		back = config_to_obj(cfg);
		rc = config_fleet_decompose(doc, gw, back, &nd, err, sizeof(err));
		/* Refused only for what the check lets through but an edit may not write: a password given inline. */
		if (rc == 0) {
			FUZZ_CHECK(config_fleet_check(nd, err, sizeof(err)) == 0, "decomposed from %s, refused: %s", gw, err);
			json_object_put(nd);
		} else {
			FUZZ_CHECK(strstr(err, "password"), "decomposing %s refused: %s", gw, err);
		}
		if (i == 0 && json_object_array_length(gws) > 1) {
			/* Two gateways' configurations as files, imported: what they share agrees by construction. */
			json_object *c2 = NULL, *cfgs[2] = { back, NULL }, *imp = NULL;
			struct config *cfg2 = NULL;
			const char *names[2] = { gw, gateway_name(doc, 1) };
			if (config_fleet_compose(doc, names[1], &c2, err, sizeof(err)) == 0 &&
			    config_load_doc(c2, names[1], &cfg2, err, sizeof(err)) == 0) {
				cfgs[1] = config_to_obj(cfg2);
				if (config_fleet_import(cfgs, names, 2, &imp, err, sizeof(err)) == 0)
					FUZZ_CHECK(config_fleet_check(imp, err, sizeof(err)) == 0, "an import refused: %s", err);
				json_object_put(imp);
				json_object_put(cfgs[1]);
			}
			config_free(cfg2);
			json_object_put(c2);
		}
		json_object_put(back);
		config_free(cfg);
		json_object_put(c);
	}
	json_object_put(doc);
	return 0;
}
