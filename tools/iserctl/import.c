/*
 * iserctl import lio|tgt FILE [-o OUT] [--apply | --dry-run]: the command,
 * and what its two readers (import_lio.c, import_tgt.c) share.  The result
 * is an isertd configuration (docs/config.md); every item of the input that
 * it does not carry is reported on stderr, naming where it was, and the exit
 * status says whether any was (EX_DROPPED).  No message shows a CHAP secret
 * (docs/security.md): the readers name a secret's place, never its value.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "escape.h"
#include "import.h"
#include "iserctl.h"

static void vsay(const char *where, const char *kind, const char *fmt, va_list ap)
{
	fprintf(stderr, "iserctl import: %s: %s", where, kind);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void imp_drop(struct import *im, const char *where, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(where, "not carried: ", fmt, ap);
	va_end(ap);
	im->dropped++;
}

void imp_note(struct import *im, const char *where, const char *fmt, ...)
{
	(void)im;
	va_list ap;
	va_start(ap, fmt);
	vsay(where, "note: ", fmt, ap);
	va_end(ap);
}

void imp_fail(const char *where, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsay(where, "", fmt, ap);
	va_end(ap);
}

const char *imp_shown(const char *s)
{
	/* Input can hold anything: a megabyte-long name or escape sequences must not reach the terminal whole. */
	char cut[72];
	if (!s)
		s = "null";
	size_t n = strlen(s);
	if (n > 64) {
		memcpy(cut, s, 61);
		strcpy(cut + 61, "...");
		s = cut;
	}
	static char *ring[8];
	static unsigned next;
	unsigned i = next++ % 8;
	free(ring[i]);
	ring[i] = esc_dup(s);
	return ring[i] ? ring[i] : "(out of memory)";
}

char *imp_read(const char *path, size_t *len, size_t *used)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st)) {
		imp_fail(path, "cannot read: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		imp_fail(path, "not a regular file");
		close(fd);
		return NULL;
	}
	size_t room = IMPORT_MAX_BYTES - *used;
	/* Read at most one byte past the room: a file that grows while read is bounded too. */
	char *buf = malloc(room + 2);
	size_t n = 0;
	ssize_t r = 0;
	while (buf && n <= room && (r = read(fd, buf + n, room + 1 - n)) > 0)
		n += (size_t)r;
	close(fd);
	if (!buf || r < 0) {
		imp_fail(path, "cannot read: %s", buf ? strerror(errno) : "out of memory");
		free(buf);
		return NULL;
	}
	if (n > room) {
		imp_fail(path, "larger than %u MiB%s: refused", IMPORT_MAX_BYTES >> 20,
			 *used ? " with the files included before it" : "");
		free(buf);
		return NULL;
	}
	buf[n] = 0;
	*len = n;
	*used += n;
	return buf;
}

json_object *imp_backstore(struct import *im, const char *name)
{
	for (size_t i = 0; i < json_object_array_length(im->backstores); i++) {
		json_object *b = json_object_array_get_idx(im->backstores, i);
		if (!strcmp(json_object_get_string(get(b, "name")), name))
			return b;
	}
	return NULL;
}

char *imp_backstore_name(struct import *im, const char *base)
{
	char name[65];
	size_t n = 0;
	for (const char *p = base; *p && n < 56; p++)
		name[n++] = (strchr("_-.", *p) || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			     (*p >= '0' && *p <= '9'))
				    ? *p
				    : '_';
	if (!n)
		name[n++] = 'b';
	name[n] = 0;
	/* A suffix keeps names unique: LIO's names are per plugin, tgt has none (a file's base name is used). */
	for (unsigned k = 2; imp_backstore(im, name); k++)
		snprintf(name + n, sizeof(name) - n, "-%u", k);
	return strdup(name);
}

bool imp_secret_ok(const char *s)
{
	size_t n = strlen(s);
	return n >= 12 && n <= 255 && strcmp(s, "********");
}

/* The document written with mode 0600 (it may hold CHAP secrets), through a temporary file renamed over OUT. */
static int write_out(const char *out, const char *text)
{
	if (!out) {
		fputs(text, stdout);
		fputc('\n', stdout);
		return fflush(stdout) ? EX_REFUSED : 0;
	}
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmpXXXXXX", out) >= sizeof(tmp))
		return die_usage("-o %s: name too long", out);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		fprintf(stderr, "iserctl import: %s: %s\n", out, strerror(errno));
		return EX_REFUSED;
	}
	size_t n = strlen(text);
	bool ok = write(fd, text, n) == (ssize_t)n && write(fd, "\n", 1) == 1 && !fsync(fd);
	ok = !close(fd) && ok && !rename(tmp, out);
	if (!ok) {
		fprintf(stderr, "iserctl import: %s: %s\n", out, strerror(errno));
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
	struct import im = { .file = file };
	im.backstores = json_object_new_array();
	im.targets = json_object_new_array();
	im.discovery = json_object_new_object();
	im.global = json_object_new_object();
	int rc;
	if (!strcmp(kind, "lio")) {
		size_t len, used = 0;
		char *text = imp_read(file, &len, &used);
		rc = text ? import_lio(&im, text, len) : EX_REFUSED;
		free(text);
	} else {
		rc = import_tgt(&im, file);
	}
	json_object *doc = json_object_new_object();
	json_object_object_add(doc, "backstores", im.backstores);
	json_object_object_add(doc, "targets", im.targets);
	if (json_object_object_length(im.discovery))
		json_object_object_add(doc, "discovery", im.discovery);
	else
		json_object_put(im.discovery);
	if (json_object_object_length(im.global))
		json_object_object_add(doc, "global", im.global);
	else
		json_object_put(im.global);
	if (!rc && (out || !(apply || dry)))
		rc = write_out(out, json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
										 JSON_C_TO_STRING_NOSLASHESCAPE));
	if (!rc && (apply || dry))
		rc = apply_doc(doc, dry);
	json_object_put(doc);
	if (!rc && im.dropped) {
		fprintf(stderr, "iserctl import: %u item%s not carried (listed above)\n", im.dropped,
			im.dropped == 1 ? "" : "s");
		rc = EX_DROPPED;
	}
	return rc;
}
