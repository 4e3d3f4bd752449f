/* What the initiator test programs share: "ok"/"FAIL" lines and their count. */
#ifndef TESTS_INITIATOR_CHECKS_H
#define TESTS_INITIATOR_CHECKS_H

#include <stdbool.h>

extern int passed, failed;

/* "ok   NAME", or "FAIL NAME: (fmt...)"; counted. */
void check(const char *name, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
