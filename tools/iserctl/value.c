/*
 * The value of a KEY=VALUE argument, one rule for every command that takes
 * them (set, create, delete, call, alua set): whatever isertd's loader
 * checks then, the command line does not decide a type of its own.
 */
#include <json-c/json.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "iserctl.h"

json_object *arg_value(const char *v)
{
	struct json_tokener *tok = json_tokener_new();
	size_t len = strlen(v);
	json_object *o = NULL;
	bool whole = false;
	if (tok) {
		json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
		o = json_tokener_parse_ex(tok, v, (int)len + 1);
		whole = json_tokener_get_error(tok) == json_tokener_success && json_tokener_get_parse_end(tok) == len;
		json_tokener_free(tok);
	}
	/* NaN and Infinity are no JSON to send. */
	if (whole && !(json_object_is_type(o, json_type_double) && !isfinite(json_object_get_double(o))))
		return o; /* NULL for null */
	json_object_put(o);
	return json_object_new_string(v);
}
