/*
 * iserctl import's readers (tools/iserctl/import_lio.c, import_tgt.c): the
 * first byte picks LIO's saveconfig.json ('L', or even) or tgt's
 * targets.conf; the rest is the file.  Any input is refused with a message
 * (EX_REFUSED) or gives a document, and a document is a configuration
 * isertd loads (import_doc checks it with the loader before anything is
 * written; checked again here so that the property outlives a change there).
 * What the readers print is safe for a terminal: every line is one
 * "iserctl import: " line of printable UTF-8, whatever names the input
 * holds.  A tgt input may include "secret", a file beside it whose text no
 * message may show (an included file is named by file and line only).  The
 * readers' member lookups are counted: work that grows faster than the
 * input (each new backstore name checked against every earlier one) fails
 * here, not as a slow run.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/utf8.h"
#include "fuzz.h"
#include "import.h"
#include "iserctl.h"
#include "target/config/config.h"

/* In the included file "secret" only, never in a message unless the input itself holds it. */
#define SECRET_MARK "hushhush"

/* Lookups allowed for an input of n bytes: a few per byte (about 0.1 are made); n names alike once took n^3 / 3. */
#define LOOKUP_CAP(n) (4096 + 2 * (unsigned long)(n))

static unsigned long lookups, lookup_cap;
static int saved_stderr = -1; /* while the readers run, stderr is the messages file */

/* iserctl.c's member lookup, which the readers use (the harness links the readers, not iserctl.c). */
json_object *get(json_object *o, const char *k)
{
	if (++lookups > lookup_cap) {
		fflush(stderr);
		dup2(saved_stderr, 2);
		FUZZ_CHECK(lookups <= lookup_cap, "more than %lu member lookups for this input: the readers' work grows "
			   "faster than it", lookup_cap);
	}
	json_object *v = NULL;
	return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static char dir[] = "/tmp/fuzz-import-XXXXXX";
static char path[64], secret[64];

static void remove_input(void)
{
	unlink(path);
	unlink(secret);
	rmdir(dir);
}

/* Every line of the readers' messages (in fd) starts with "iserctl import: " and is printable UTF-8; none shows the
 * text of the file "secret". */
static void check_messages(int fd, const uint8_t *data, size_t size)
{
	off_t len = lseek(fd, 0, SEEK_END);
	FUZZ_CHECK(len >= 0, "messages: lseek");
	char *text = malloc((size_t)len + 1);
	FUZZ_CHECK(text && pread(fd, text, (size_t)len, 0) == len, "messages: reading %lld bytes", (long long)len);
	text[len] = 0;
	FUZZ_CHECK(strlen(text) == (size_t)len, "a NUL byte in the messages");
	char shown[300]; /* a failing line as it can be printed here */
	bool may_show = memmem(data, size, SECRET_MARK, strlen(SECRET_MARK)); /* the input holds it itself */
	for (char *line = text; *line;) {
		char *end = strchr(line, '\n');
		if (end)
			*end = 0;
		utf8_printable(line, shown, sizeof(shown));
		FUZZ_CHECK(end, "a message without its line end: %s", shown);
		FUZZ_CHECK(!strncmp(line, "iserctl import: ", 16), "a line that is not a message: %s", shown);
		for (const unsigned char *p = (const unsigned char *)line; p < (const unsigned char *)end;) {
			size_t n = utf8_printable_len(p, (size_t)((const unsigned char *)end - p));
			FUZZ_CHECK(n, "a message with a byte a terminal would take as a control (0x%02x): %s", *p, shown);
			p += n;
		}
		FUZZ_CHECK(may_show || !strstr(line, SECRET_MARK), "a message shows the text of an included file: %s", shown);
		line = end + 1;
	}
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int msgs = -1;
	if (!path[0]) {
		/* A folder of its own: a tgt input may include relative names. */
		FUZZ_CHECK(mkdtemp(dir), "mkdtemp");
		snprintf(path, sizeof(path), "%s/input", dir);
		snprintf(secret, sizeof(secret), "%s/secret", dir);
		atexit(remove_input);
		/* Lines a targets.conf may hold, at top level or in a block, each marked (a usable CHAP user too). */
		FILE *s = fopen(secret, "w");
		FUZZ_CHECK(s && fputs("root:$6$" SECRET_MARK "$x:19700:0:99999:7:::\n"
				      "default-driver " SECRET_MARK "-driver\n"
				      "backing-store /" SECRET_MARK "/disk\n"
				      "device-type " SECRET_MARK "-type\n"
				      "incominguser " SECRET_MARK "-user " SECRET_MARK "-secret\n", s) >= 0 && !fclose(s),
			   "writing %s", secret);
		/* Not in the folder: an input's include cannot read the messages while they are written. */
		FILE *m = tmpfile();
		FUZZ_CHECK(m, "tmpfile");
		msgs = fileno(m);
	}
	if (!size)
		return 0;
	const char *kind = data[0] == 'L' || (data[0] != 'T' && !(data[0] & 1)) ? "lio" : "tgt";
	FILE *f = fopen(path, "w");
	FUZZ_CHECK(f && fwrite(data + 1, 1, size - 1, f) == size - 1 && !fclose(f), "writing %s", path);

	/* The readers' messages go to stderr: kept off it, which the harness's own checks use. */
	fflush(stderr);
	FUZZ_CHECK(!ftruncate(msgs, 0) && !lseek(msgs, 0, SEEK_SET), "messages: emptying");
	saved_stderr = dup(2);
	dup2(msgs, 2);
	int rc;
	unsigned dropped;
	lookups = 0;
	lookup_cap = LOOKUP_CAP(size);
	json_object *doc = import_doc(kind, path, &rc, &dropped);
	fflush(stderr);
	dup2(saved_stderr, 2);
	close(saved_stderr);
	lookup_cap = -1UL; /* the loader below is not the readers */

	FUZZ_CHECK(rc == 0 || rc == EX_REFUSED, "%s reader returned %d", kind, rc);
	check_messages(msgs, data, size);
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
