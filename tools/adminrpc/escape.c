/* Peer text made safe to print (escape.h): the same rules as target/metrics_text.c's metrics_escape. */
#include "escape.h"

#include <stdlib.h>
#include <string.h>

/*
 * The length of the UTF-8 sequence at s (RFC 3629: no overlong forms, no
 * surrogates, nothing past U+10FFFF), or 0 when s does not start one.  s
 * is NUL-terminated, and a NUL fails every continuation test before the
 * next byte is read.
 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		unsigned char lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		unsigned char lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 && (s[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

/* How many bytes at s are written as \xNN (0: the sequence of len bytes prints as it is). */
static size_t escaped(const unsigned char *s, size_t len)
{
	if (len == 1)
		return *s < 0x20 || *s == 0x7f || *s == '\\';
	if (len == 2 && s[0] == 0xc2 && s[1] < 0xa0)
		return 2; /* C1: U+0080..U+009F */
	return len ? 0 : 1;
}

bool esc_clean(const char *in)
{
	for (const unsigned char *s = (const unsigned char *)in; *s;) {
		size_t len = utf8_len(s);
		if (escaped(s, len))
			return false;
		s += len;
	}
	return true;
}

size_t esc_text(const char *in, char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)in;
	size_t n = 0;
	while (*s) {
		size_t len = utf8_len(s), esc = escaped(s, len);
		if (!esc) {
			for (size_t i = 0; i < len; i++, n++)
				if (n + 1 < outlen)
					out[n] = (char)s[i];
			s += len;
			continue;
		}
		for (size_t i = 0; i < esc; i++, s++) {
			const char e[4] = { '\\', 'x', hex[*s >> 4], hex[*s & 15] };
			for (size_t j = 0; j < 4; j++, n++)
				if (n + 1 < outlen)
					out[n] = e[j];
		}
	}
	if (outlen)
		out[n < outlen ? n : outlen - 1] = '\0';
	return n;
}

char *esc_dup(const char *s)
{
	size_t n = esc_text(s, NULL, 0);
	char *out = malloc(n + 1);
	if (out)
		esc_text(s, out, n + 1);
	return out;
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

char *esc_undo(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;
	if (!out)
		return NULL;
	while (*s) {
		int hi, lo;
		/* A NUL cannot be in a name: \x00 stays as it is written. */
		if (s[0] == '\\' && s[1] == 'x' && (hi = hexval(s[2])) >= 0 && (lo = hexval(s[3])) >= 0 && (hi | lo)) {
			*o++ = (char)(hi << 4 | lo);
			s += 4;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
	return out;
}

char *esc_json(const char *json)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)json;
	char *out = malloc(6 * strlen(json) + 1), *o = out;
	if (!out)
		return NULL;
	while (*s) {
		size_t len = utf8_len(s);
		unsigned cp = len == 1 && *s == 0x7f ? 0x7f : len == 2 && s[0] == 0xc2 && s[1] < 0xa0 ? s[1]
			    : !len && *s >= 0x80 && *s < 0xa0 ? *s : 0;
		if (cp) {
			memcpy(o, "\\u00", 4);
			o[4] = hex[cp >> 4];
			o[5] = hex[cp & 15];
			o += 6;
			s += len ? len : 1;
			continue;
		}
		for (size_t i = 0; i < (len ? len : 1); i++)
			*o++ = (char)*s++;
	}
	*o = '\0';
	return out;
}
