/*
 * iserctl import's readers (tools/iserctl/import_lio.c, import_tgt.c): the
 * first byte picks LIO's saveconfig.json ('L', or even) or tgt's
 * targets.conf; the rest is the file.  Any input is refused with a message
 * (EX_REFUSED) or gives a document, and a document is a configuration
 * isertd loads (import_doc checks it with the loader before anything is
 * written; checked again here so that the property outlives a change there).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "import.h"
#include "iserctl.h"
#include "target/config/config.h"

/* iserctl.c's member lookup, which the readers use (the harness links the readers, not iserctl.c). */
json_object *get(json_object *o, const char *k)
{
	json_object *v = NULL;
	return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static char path[64];

static void remove_input(void)
{
	unlink(path);
	*strrchr(path, '/') = 0;
	rmdir(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int quiet = -1;
	if (!path[0]) {
		/* A folder of its own: a tgt input may include relative names. */
		char dir[] = "/tmp/fuzz-import-XXXXXX";
		FUZZ_CHECK(mkdtemp(dir), "mkdtemp");
		snprintf(path, sizeof(path), "%s/input", dir);
		atexit(remove_input);
		quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
	}
	if (!size)
		return 0;
	const char *kind = data[0] == 'L' || (data[0] != 'T' && !(data[0] & 1)) ? "lio" : "tgt";
	FILE *f = fopen(path, "w");
	FUZZ_CHECK(f && fwrite(data + 1, 1, size - 1, f) == size - 1 && !fclose(f), "writing %s", path);

	/* The readers' messages go to stderr: kept off it, which the harness's own checks use. */
	fflush(stderr);
	int saved = dup(2);
	dup2(quiet, 2);
	int rc;
	unsigned dropped;
	json_object *doc = import_doc(kind, path, &rc, &dropped);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);

	FUZZ_CHECK(rc == 0 || rc == EX_REFUSED, "%s reader returned %d", kind, rc);
	if (!rc) {
		const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
		struct config *c = NULL;
		char err[512] = "";
		int r = config_load_string(text, "import", &c, err, sizeof(err));
		FUZZ_CHECK(r == 0, "%s: the document it wrote does not load: %s\n%s", kind, err, text);
		config_free(c);
	}
	json_object_put(doc);
	return 0;
}
