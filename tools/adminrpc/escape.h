/*
 * What iserctl and iserbench print of isertd's answers, made safe for a
 * terminal.  isertd gives a peer's text (an initiator name) in its shown
 * form already (common/utf8.h: \xNN for what is not printable UTF-8 and for
 * a backslash); this is the defence behind it, for any string: what is not
 * printable UTF-8 becomes \xNN, a backslash stays, so a shown form prints
 * as it is.
 */
#ifndef TOOLS_ESCAPE_H
#define TOOLS_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>

/* Does s print as it is? */
bool esc_clean(const char *s);
/* s made safe to print, malloc'd (NULL: out of memory). */
char *esc_dup(const char *s);
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
