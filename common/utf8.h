/* UTF-8 as text that is shown to people and parsers: logs, JSON answers, metric labels, terminals. */
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

#endif
