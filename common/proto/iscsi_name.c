/*
 * iSCSI names checked by one rule wherever they are taken: isertd's
 * configuration and iserctl import (which never writes a name isertd would
 * refuse).
 */
#include <string.h>

#include "common/proto/iscsi_name.h"

static bool is_hex(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
			return false;
	}
	return true;
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/*
 * RFC 7143 sec. 4.2.7 / RFC 3722.  Names are stringprep-normalised, so an iqn
 * carries no upper-case ASCII; the hex of eui./naa. is accepted in either
 * case since RFC 7143's own examples use upper case.  Non-ASCII bytes are let
 * through in the unique part without checking the full nameprep profile.
 * '_' is tolerated there too: deployed initiators use it.
 */
bool iscsi_name_valid(const char *n)
{
	size_t len;
	const char *s;

	if (!n)
		return false;
	len = strlen(n);
	if (len == 0 || len > ISCSI_NAME_MAX)
		return false;
	if (!strncmp(n, "eui.", 4))
		return len == 20 && is_hex(n + 4, 16);
	if (!strncmp(n, "naa.", 4))
		return (len == 20 || len == 36) && is_hex(n + 4, len - 4);
	if (strncmp(n, "iqn.", 4))
		return false;
	s = n + 4;
	/* yyyy-mm. */
	for (int i = 0; i < 4; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	if (s[4] != '-' || s[5] < '0' || s[5] > '1' || s[6] < '0' || s[6] > '9')
		return false;
	int month = (s[5] - '0') * 10 + (s[6] - '0');
	if (month < 1 || month > 12 || s[7] != '.')
		return false;
	s += 8;
	/* reversed domain: labels of [a-z0-9-] separated by single dots */
	size_t label = 0;
	for (; *s && *s != ':'; s++) {
		if (*s == '.') {
			if (label == 0)
				return false;
			label = 0;
		} else if (is_lower_alnum(*s) || *s == '-') {
			label++;
		} else {
			return false;
		}
	}
	if (label == 0)
		return false;
	if (*s == ':') {
		s++;
		if (!*s)
			return false;
		for (; *s; s++) {
			unsigned char c = (unsigned char)*s;
			if (!(is_lower_alnum((char)c) || c == '-' || c == '.' || c == ':' ||
			      c == '_' || c >= 0x80))
				return false;
		}
	}
	return true;
}
