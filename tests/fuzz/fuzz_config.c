/*
 * Configuration documents.  Any input either loads, or fails with a
 * message and nothing allocated; a document that loads serialises to JSON
 * that loads again and serialises to the same text.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "target/config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config sentinel; /* must be replaced by NULL on failure */
	char *doc, *json, *json2, err[256], tiny[8];
	struct config *c = &sentinel, *c2;
	int r;

	if (size > (1u << 20)) /* the loader's own limit is far above any useful input */
		return 0;
	doc = malloc(size + 1);
	memcpy(doc, data, size);
	doc[size] = '\0';

	memset(err, 'X', sizeof(err));
	r = config_load_string(doc, "fuzz", &c, err, sizeof(err));
	if (r) {
		FUZZ_CHECK(r < 0, "returned %d", r);
		FUZZ_CHECK(c == NULL, "config returned with error %d", r);
		FUZZ_CHECK(memchr(err, '\0', sizeof(err)) && err[0], "no message for %d", r);
		/* A small error buffer is truncated, never overrun. */
		memset(tiny, 'X', sizeof(tiny));
		FUZZ_CHECK(config_load_string(doc, "fuzz", &c, tiny, 4) == r, "second load differs");
		FUZZ_CHECK(memchr(tiny, '\0', 4) && tiny[4] == 'X', "tiny error buffer");
		FUZZ_CHECK(config_load_string(doc, NULL, &c, NULL, 0) == r, "load without error buffer");
		free(doc);
		return 0;
	}
	FUZZ_CHECK(c != NULL, "success without a config");
	json = config_to_json(c);
	FUZZ_CHECK(json != NULL, "config_to_json failed");
	r = config_load_string(json, "reload", &c2, err, sizeof(err));
	FUZZ_CHECK(r == 0, "own JSON does not load: %s\n--- input:\n%s\n--- serialised:\n%s", err, doc, json);
	json2 = config_to_json(c2);
	FUZZ_CHECK(json2 != NULL, "config_to_json of the reload failed");
	FUZZ_CHECK(strcmp(json, json2) == 0, "round trip differs:\n%s\n---\n%s", json, json2);
	free(json2);
	free(json);
	config_free(c2);
	config_free(c);
	free(doc);
	return 0;
}
