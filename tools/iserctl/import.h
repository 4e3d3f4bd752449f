/*
 * iserctl import lio|tgt FILE: another target's configuration made an isertd
 * configuration (docs/admin.md, "Migrating from LIO and tgt").  What shared
 * between the two readers (import.c) and each reader's entry point.
 */
#ifndef ISERCTL_IMPORT_H
#define ISERCTL_IMPORT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

/* An input (a file, or all of tgt's included files together) larger than this is refused. */
#define IMPORT_MAX_BYTES (16u << 20)

/* isertd's loader refuses a document past one of these (target/config/config_int.h, CFG_MAX_*): a reader stops at
 * the item that passes one, before building more of a document that could not be used. */
#define IMPORT_MAX_TARGETS    1024
#define IMPORT_MAX_BACKSTORES 4096
#define IMPORT_MAX_ACLS       4096          /* of a portal group */
#define IMPORT_MAX_DOC        (16u << 20)   /* bytes of the document as written (CFG_MAX_FILE: isertd reads no more) */

/* The document as it is written (-o, stdout), and as isertd saves its own (target/config/save.c). */
#define IMPORT_JSON_FLAGS (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)

struct import {
	const char *file;       /* as given, for messages */
	json_object *backstores, *targets, *discovery, *global;
	unsigned dropped;       /* items not carried, each reported */
	json_object *names;     /* backstore names taken -> the next suffix to try after one (imp_backstore_name) */
};

/* An item not carried (counted: the exit status says so): "iserctl import: WHERE: WHY". */
void imp_drop(struct import *im, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Information that changes nothing carried (a renamed backstore, an assumed portal); not counted. */
void imp_note(struct import *im, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Bad input: the message, naming where; the reader then stops with EX_REFUSED. */
void imp_fail(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A value from the input as a message may show it: at most 64 characters, safe for a terminal. Lives until 8 more calls. */
const char *imp_shown(const char *s);

/* A file read whole, at most IMPORT_MAX_BYTES - *used bytes (*used grows by its size); NUL-terminated, malloc'd. */
char *imp_read(const char *path, size_t *len, size_t *used);

/* The backstore name made of base (only A-Z a-z 0-9 _ - ., at most 64, unique among im's backstores), taken at
 * once: the caller adds the backstore. malloc'd. */
char *imp_backstore_name(struct import *im, const char *base);

/* Is text (len bytes) UTF-8 without control characters but tabs and line ends? If not, the message names
 * file, line and byte, and the byte's value unless the file was included (its text is not shown). */
bool imp_text(const char *file, const char *text, size_t len, bool included);

/* Is s a CHAP secret isertd takes (12-255 characters)? */
bool imp_secret_ok(const char *s);

/* The document made of FILE read as kind ("lio" or "tgt"); *rc: 0, or EX_REFUSED with the message printed;
 * *dropped: items not carried. */
json_object *import_doc(const char *kind, const char *file, int *rc, unsigned *dropped);

/* The readers: 0, or EX_REFUSED with the message printed.  They fill im. */
int import_lio(struct import *im, const char *text, size_t len);
int import_tgt(struct import *im, const char *path);

#endif
