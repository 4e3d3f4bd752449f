#include "check.h"

#include <stdarg.h>
#include <stdio.h>

unsigned check_passed, check_failed;

void check(const char *what, bool ok, const char *fmt, ...)
{
	if (ok) {
		check_passed++;
		printf("ok - %s\n", what);
	} else {
		check_failed++;
		printf("not ok - %s", what);
		if (fmt) {
			va_list ap;
			va_start(ap, fmt);
			printf(": ");
			vprintf(fmt, ap);
			va_end(ap);
		}
		printf("\n");
	}
	fflush(stdout);
}
