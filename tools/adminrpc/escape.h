/*
 * Text from a peer (initiator names, aliases, addresses) made safe to
 * print, the way isertd's /metrics shows it in labels (target/metrics.h,
 * metrics_escape; docs/stats.md "Names"): printable UTF-8 as it is; each
 * byte of a control character (C0, DEL, C1), of a sequence that is not
 * UTF-8, and each backslash as \xNN.  A terminal then gets no escape
 * sequence, and every \xNN stands for one byte, so the name can be given
 * back (esc_undo).
 */
#ifndef TOOLS_ESCAPE_H
#define TOOLS_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Does s print as it is? */
bool esc_clean(const char *s);
/* The shown form of s into out (at most outlen - 1 bytes and a NUL); the length of the whole shown form. */
size_t esc_text(const char *s, char *out, size_t outlen);
/* The shown form of s, malloc'd (NULL: out of memory). */
char *esc_dup(const char *s);
/* A shown form back to the bytes it stands for: each \xNN (two hex digits) its byte, the rest as it is; malloc'd. */
char *esc_undo(const char *s);
/*
 * JSON text (json-c's, which writes C0 controls as \u00NN already) made
 * safe for a terminal and kept exact where JSON can say it: DEL and C1
 * characters as \u007f, \u0080..\u009f; a byte 0x80..0x9F that is not
 * part of UTF-8 (a C1 control to an 8-bit terminal) as \u00NN, the only
 * change of a value.  Other bytes stay, so a file name in Latin-1 comes
 * out as it is.  malloc'd.
 */
char *esc_json(const char *json);

#endif
