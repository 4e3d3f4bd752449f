/*
 * What the two readers of iserctl import (import_lio.c, import_tgt.c) share,
 * and the document made of their result (import_cmd.c is the command).
 * Every item of the input that is not carried is reported on stderr, naming
 * where it was.  No message shows a CHAP secret (docs/security.md): the
 * readers name a secret's place, never its value.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/utf8.h"
#include "escape.h"
#include "import.h"
#include "iserctl.h"
#include "target/config/config.h"

static void vsay(const char *where, const char *kind, const char *fmt, va_list ap)
{
	/* The whole line in its printable form (escape.h), as common/log.c writes every log line: names and paths from
	 * the input (a JSON key json-c decoded from \u001b, an included file's name) cannot move the admin's terminal or
	 * start a line, whichever argument carried them. */
	char *msg = NULL, *line = NULL, *safe = NULL;
	if (vasprintf(&msg, fmt, ap) >= 0 && asprintf(&line, "%s: %s%s", where, kind, msg) >= 0)
		safe = esc_dup(line);
	fprintf(stderr, "iserctl import: %s\n", safe ? safe : "(out of memory)");
	free(safe);
	free(line);
	free(msg);
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
	/* A suffix keeps names unique: LIO's names are per plugin, tgt has none (a file's base name is used).  Each
	 * name taken keeps the next suffix to try after it, so n names alike cost O(n) lookups in all (a scan of every
	 * backstore per suffix tried cost O(n^3): 1000 storage objects named alike took 4 s). */
	json_object *next = get(im->names, name);
	if (next) {
		int k = json_object_get_int(next);
		do
			snprintf(name + n, sizeof(name) - n, "-%d", k++);
		while (get(im->names, name));
		json_object_set_int(next, k);
	}
	json_object_object_add(im->names, name, json_object_new_int(2));
	return strdup(name);
}

bool imp_text(const char *file, const char *text, size_t len, bool included)
{
	unsigned line = 1;
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)text[i];
		size_t n = utf8_seq_len((const unsigned char *)text + i, len - i);
		if (!n || (c < 0x20 && !strchr("\t\r\n", c)) || c == 0x7f) {
			char where[300];
			snprintf(where, sizeof(where), "%s:%u", file, line);
			if (n && included)
				imp_fail(where, "a control character (byte %zu): not a configuration file", i);
			else if (n)
				imp_fail(where, "a control character (0x%02x, byte %zu): not a configuration file", c, i);
			else
				imp_fail(where, "not UTF-8 text (byte %zu): isertd's configuration is UTF-8", i);
			return false;
		}
		line += c == '\n';
		i += n;
	}
	return true;
}

bool imp_secret_ok(const char *s)
{
	size_t n = strlen(s);
	return n >= 12 && n <= 255 && strcmp(s, "********");
}

json_object *import_doc(const char *kind, const char *file, int *rc, unsigned *dropped)
{
	struct import im = { .file = file };
	im.backstores = json_object_new_array();
	im.targets = json_object_new_array();
	im.discovery = json_object_new_object();
	im.global = json_object_new_object();
	im.names = json_object_new_object();
	if (!strcmp(kind, "lio")) {
		size_t len, used = 0;
		char *text = imp_read(file, &len, &used);
		*rc = text ? import_lio(&im, text, len) : EX_REFUSED;
		free(text);
	} else {
		*rc = import_tgt(&im, file);
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
	*dropped = im.dropped;
	json_object_put(im.names);
	/* isertd reads no configuration file over 16 MiB, and saves its own as this is written (with a line end): a
	 * larger document would be written by -o, or saved after --apply, and never read back. */
	size_t n = *rc ? 0 : strlen(json_object_to_json_string_ext(doc, IMPORT_JSON_FLAGS)) + 1;
	if (n > IMPORT_MAX_DOC) {
		imp_fail(file, "the configuration made of it is %zu bytes as written, and isertd reads at most %u MiB: refused",
			 n, IMPORT_MAX_DOC >> 20);
		*rc = EX_REFUSED;
	}
	/* Never written or applied unless isertd takes it: the loader itself says so (a value that passed the
	 * reader's checks, a control character escaped in LIO's JSON). */
	struct config *c = NULL;
	char err[1024];
	if (!*rc && config_load_string(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN), "the result", &c, err,
				       sizeof(err))) {
		imp_fail(file, "isertd would refuse the configuration made of it: %s", err);
		*rc = EX_REFUSED;
	}
	config_free(c);
	return doc;
}
