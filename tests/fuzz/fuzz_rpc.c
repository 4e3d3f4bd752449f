/*
 * Admin socket requests.  Any input gets exactly one answer when it has an
 * id (a notification none), the answer is a JSON-RPC 2.0 object with
 * either a result or an error with a code and a message, and a request that
 * is refused leaves the running configuration as it was.  The target is
 * the real one without reactors: backstores and targets set up from a small
 * configuration, no connection; changes are planned (the loader, the
 * document edits and the plan run), not carried out (rpc_plan_only).
 */
#include <json-c/json.h>
#include <string.h>

#include "fuzz.h"
#include "target/iscsi/iscsi.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"

static const char fuzz_cfg[] =
	"{ \"backstores\": [ { \"name\": \"r0\", \"type\": \"ram\", \"size\": \"1M\" } ],"
	"  \"targets\": [ { \"iqn\": \"iqn.2026-11.org.isert:fuzz\", \"tpgs\": [ { \"tag\": 1, \"enable\": true,"
	"    \"demo_mode\": true, \"portals\": [ { \"ip\": \"127.0.0.1\", \"port\": 3260 } ],"
	"    \"luns\": [ { \"lun\": 0, \"backstore\": \"r0\" } ] } ] } ] }";

static void setup(void)
{
	static struct config *cfg;
	char err[256];
	if (cfg)
		return;
	FUZZ_CHECK(!config_load_string(fuzz_cfg, "fuzz", &cfg, err, sizeof(err)), "%s", err);
	FUZZ_CHECK(!iscsi_setup(cfg, NULL, 0, err, sizeof(err)), "%s", err);
	rpc_plan_only = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > RPC_MAX_REQUEST)
		return 0;
	setup();
	char *before = config_to_json(rt_config());
	uint64_t gen = rpc_st.generation;
	uid_t uid = size && data[0] == ' ' ? 65534 : 0; /* a leading space: an unprivileged peer */
	char *out = rpc_handle((const char *)data, size, uid);
	if (out) {
		json_object *r = json_tokener_parse(out);
		FUZZ_CHECK(r && json_object_is_type(r, json_type_object), "answer is not an object: %s", out);
		json_object *v, *e = NULL;
		FUZZ_CHECK(json_object_object_get_ex(r, "jsonrpc", &v) && !strcmp(json_object_get_string(v), "2.0"),
			   "no jsonrpc 2.0: %s", out);
		FUZZ_CHECK(json_object_object_get_ex(r, "id", &v), "no id: %s", out);
		bool has_result = json_object_object_get_ex(r, "result", &v);
		bool has_error = json_object_object_get_ex(r, "error", &e);
		FUZZ_CHECK(has_result != has_error, "result and error: %s", out);
		if (has_error) {
			json_object *code, *msg;
			FUZZ_CHECK(json_object_object_get_ex(e, "code", &code) && json_object_get_int(code) < 0,
				   "error code: %s", out);
			FUZZ_CHECK(json_object_object_get_ex(e, "message", &msg) && json_object_get_string_len(msg),
				   "error message: %s", out);
			FUZZ_CHECK(gen == rpc_st.generation, "a refusal changed the generation: %s", out);
			char *after = config_to_json(rt_config());
			FUZZ_CHECK(!strcmp(before, after), "a refusal changed the configuration: %s", out);
			free(after);
		}
		FUZZ_CHECK(uid == 0 || !has_result, "an unprivileged peer got a result: %s", out);
		json_object_put(r);
		free(out);
	}
	free(before);
	return 0;
}
