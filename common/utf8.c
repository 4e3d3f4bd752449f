#include "common/utf8.h"

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
