#include "common/utf8.h"

#include <stdbool.h>
#include <string.h>

size_t utf8_seq_len(const unsigned char *p, size_t n)
{
	if (!n)
		return 0;
	unsigned c = p[0];
	if (c < 0x80)
		return 1;
	size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
	if (!len || len > n)
		return 0;
	for (size_t i = 1; i < len; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f) || /* overlong; UTF-16 surrogates */
	    (c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f))    /* overlong; past U+10FFFF */
		return 0;
	return len;
}

size_t utf8_printable_len(const unsigned char *p, size_t n)
{
	size_t len = utf8_seq_len(p, n);
	if (len == 1 && (p[0] < 0x20 || p[0] == 0x7f))
		return 0;
	if (len == 2 && p[0] == 0xc2 && p[1] < 0xa0)
		return 0;
	return len;
}

static size_t escape(const char *in, char *out, size_t outlen, bool backslash)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)in;
	size_t left = strlen(in), n = 0, o = 0;
	bool full = !outlen;
	while (left) {
		size_t len = utf8_printable_len(s, left);
		char e[4] = { '\\', 'x', hex[*s >> 4], hex[*s & 15] };
		const char *from = (const char *)s;
		if (!len || (backslash && *s == '\\')) {
			from = e;
			len = 4;
			s++;
			left--;
		} else {
			s += len;
			left -= len;
		}
		/* Whole units only: a cut never leaves half an escape or half a character. */
		if (!full && o + len < outlen) {
			memcpy(out + o, from, len);
			o += len;
		} else {
			full = true;
		}
		n += len;
	}
	if (outlen)
		out[o] = '\0';
	return n;
}

size_t utf8_shown(const char *in, char *out, size_t outlen)
{
	return escape(in, out, outlen, true);
}

size_t utf8_printable(const char *in, char *out, size_t outlen)
{
	return escape(in, out, outlen, false);
}

static int hexval(char c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

void utf8_unshown(const char *in, char *out)
{
	while (*in) {
		int hi, lo;
		if (in[0] == '\\' && in[1] == 'x' && (hi = hexval(in[2])) >= 0 && (lo = hexval(in[3])) >= 0 && (hi | lo)) {
			*out++ = (char)(hi << 4 | lo);
			in += 4;
		} else {
			*out++ = *in++;
		}
	}
	*out = '\0';
}
