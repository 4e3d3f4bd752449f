/* What the files of tools/adminrpc share and do not show their users. */
#ifndef TOOLS_ADMINRPC_INT_H
#define TOOLS_ADMINRPC_INT_H

#include <stdarg.h>
#include <stddef.h>

/* err filled from fmt; returns -e, so a failure is one statement. */
__attribute__((format(printf, 4, 0))) int admin_vfail(char *err, size_t errlen, int e, const char *fmt, va_list ap);
__attribute__((format(printf, 4, 5))) int admin_fail(char *err, size_t errlen, int e, const char *fmt, ...);

#endif
