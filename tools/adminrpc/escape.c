/* Text made safe to print (escape.h), and JSON for a terminal. */
#include "escape.h"

#include "common/utf8.h"

#include <stdlib.h>
#include <string.h>

bool esc_clean(const char *s)
{
	return utf8_printable(s, NULL, 0) == strlen(s);
}

char *esc_dup(const char *s)
{
	size_t n = utf8_printable(s, NULL, 0);
	char *out = malloc(n + 1);
	if (out)
		utf8_printable(s, out, n + 1);
	return out;
}

char *esc_json(const char *json)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)json;
	size_t left = strlen(json);
	char *out = malloc(6 * left + 1), *o = out;
	if (!out)
		return NULL;
	while (*s) {
		size_t len = utf8_seq_len(s, left);
		left -= len ? len : 1;
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
