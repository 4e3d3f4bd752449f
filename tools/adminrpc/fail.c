/* A failure said in the caller's buffer (fail.h). */
#include "fail.h"

#include <stdio.h>

int admin_vfail(char *err, size_t errlen, int e, const char *fmt, va_list ap)
{
	vsnprintf(err, errlen, fmt, ap);
	return -e;
}

int admin_fail(char *err, size_t errlen, int e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	admin_vfail(err, errlen, e, fmt, ap);
	va_end(ap);
	return -e;
}
