#include "check.h"

#include <stdarg.h>
#include <stdio.h>

int passed, failed;

void check(const char *name, bool ok, const char *fmt, ...)
{
	if (ok) {
		passed++;
		printf("ok   %s\n", name);
		return;
	}
	failed++;
	printf("FAIL %s", name);
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		printf(": ");
		vprintf(fmt, ap);
		va_end(ap);
	}
	printf("\n");
	fflush(stdout);
}
