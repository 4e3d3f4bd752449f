/*
 * UTF-8 as text that is shown to people and parsers: logs, JSON answers,
 * metric labels, terminals.  A peer's text (an InitiatorName may hold any
 * byte but NUL) is shown in one form everywhere: its shown form.
 */
#ifndef UTF8_H
#define UTF8_H

#include <stddef.h>

/*
 * Bytes in the UTF-8 sequence at p (n bytes left): 1-4, or 0 when p does
 * not start a valid one (a stray continuation byte, overlong, a surrogate,
 * past U+10FFFF, cut short) or n == 0.
 */
size_t utf8_seq_len(const unsigned char *p, size_t n);
/* The same, but 0 for a control character too (C0, DEL, C1: 0x9b is CSI to a terminal). */
size_t utf8_printable_len(const unsigned char *p, size_t n);

/*
 * The shown form of a peer's text, as the log, the admin socket's answers,
 * metric labels and iserctl give it: printable UTF-8 as it is; each byte of
 * a control character, of what is not UTF-8, and each backslash as \xNN
 * (two lowercase hex digits).  Valid UTF-8 without controls, and replacing
 * every \xNN by its byte (utf8_unshown) gives the text back.  Writes into
 * out whole characters and escapes only, as many as fit in outlen - 1 bytes,
 * and a NUL (out may be NULL with outlen 0); returns the length of the
 * whole shown form (at most 4 x the input).
 */
size_t utf8_shown(const char *in, char *out, size_t outlen);
/* As utf8_shown, but a backslash stays: safe to print, not reversible (a log line, a terminal). */
size_t utf8_printable(const char *in, char *out, size_t outlen);
/* A shown form back to its bytes (out: strlen(in) + 1 bytes); \x00 stays as it is written. */
void utf8_unshown(const char *in, char *out);

#endif
