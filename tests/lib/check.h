/*
 * What the C test programs share (tests/initiator, tests/vm): one line a
 * check, "ok - WHAT" or "not ok - WHAT: WHY", and their count.  The guest's
 * scripts print the same lines (tests/vm/lib.sh) and look for "not ok" in
 * them.
 */
#ifndef TESTS_CHECK_H
#define TESTS_CHECK_H

#include <stdbool.h>

extern unsigned check_passed, check_failed;

/* "ok - WHAT", or "not ok - WHAT" with ": " and fmt's text when fmt is not
 * NULL; counted.  stdout is flushed: a crash after it loses no line. */
void check(const char *what, bool ok, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
