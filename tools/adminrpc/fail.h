/* How the files of tools/adminrpc say a failure: in the caller's err buffer, returning -errno. */
#ifndef TOOLS_FAIL_H
#define TOOLS_FAIL_H

#include <stdarg.h>
#include <stddef.h>

/* err filled from fmt; returns -e, so a failure is one statement. */
__attribute__((format(printf, 4, 0))) int admin_vfail(char *err, size_t errlen, int e, const char *fmt, va_list ap);
__attribute__((format(printf, 4, 5))) int admin_fail(char *err, size_t errlen, int e, const char *fmt, ...);

#endif
