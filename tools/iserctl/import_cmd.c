/*
 * iserctl import lio|tgt FILE [-o OUT] [--apply | --dry-run]: another
 * target's configuration as an isertd one (docs/config.md), written out or
 * applied; the exit status says whether an item was not carried
 * (EX_DROPPED).  The readers are import_lio.c and import_tgt.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "escape.h"
#include "import.h"
#include "iserctl.h"

int write_doc(const char *who, const char *out, const char *text)
{
	if (!out) {
		/* Likely a terminal: json-c writes DEL and C1 controls (U+009B is CSI) as they are; esc_json writes them as
		 * \u00NN, the same document. */
		char *safe = esc_json(text);
		if (!safe) {
			fprintf(stderr, "iserctl %s: out of memory\n", who);
			return EX_REFUSED;
		}
		puts(safe);
		free(safe);
		return fflush(stdout) ? EX_REFUSED : 0;
	}
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", out) >= sizeof(tmp))
		return die_usage("-o %s: name too long", out);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "iserctl %s: %s: %s\n", who, out, strerror(errno));
		return EX_REFUSED;
	}
	size_t n = strlen(text);
	bool ok = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && !fsync(fd);
	ok = !close(fd) && ok && !rename(tmp, out);
	if (!ok) {
		fprintf(stderr, "iserctl %s: %s: %s\n", who, out, strerror(errno));
		unlink(tmp);
		return EX_REFUSED;
	}
	return 0;
}

/* apply of the document inline (isertd need not read a file of ours): the plan first, then for real. */
static int apply_doc(json_object *doc, bool dry)
{
	json_object *p = json_object_new_object();
	json_object_object_add(p, "config", json_object_get(doc));
	json_object_object_add(p, "dry_run", json_object_new_boolean(true));
	int rc = run_change("import (plan)", "apply", p);
	if (rc || dry)
		return rc;
	p = json_object_new_object();
	json_object_object_add(p, "config", json_object_get(doc));
	return run_change("import", "apply", p);
}

int cmd_import(int argc, char **argv)
{
	const char *kind = argc > 0 ? argv[0] : "", *file = NULL, *out = NULL;
	bool apply = false, dry = false;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc)
			out = argv[++i];
		else if (!strcmp(argv[i], "--apply"))
			apply = true;
		else if (!strcmp(argv[i], "--dry-run"))
			dry = true;
		else if (argv[i][0] != '-' && !file)
			file = argv[i];
		else
			return die_usage("import: unexpected '%s'", argv[i]);
	}
	if ((strcmp(kind, "lio") && strcmp(kind, "tgt")) || !file)
		return die_usage("import: expected lio FILE or tgt FILE%s", "");
	int rc;
	unsigned dropped;
	json_object *doc = import_doc(kind, file, &rc, &dropped);
	if (!rc && (out || !(apply || dry)))
		rc = write_doc("import", out, json_object_to_json_string_ext(doc, IMPORT_JSON_FLAGS));
	if (!rc && (apply || dry))
		rc = apply_doc(doc, dry);
	json_object_put(doc);
	if (!rc && dropped) {
		fprintf(stderr, "iserctl import: %u item%s not carried (listed above)\n", dropped,
			dropped == 1 ? "" : "s");
		rc = EX_DROPPED;
	}
	return rc;
}
