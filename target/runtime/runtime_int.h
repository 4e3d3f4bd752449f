/* Between the files of target/runtime/ only. */
#ifndef RUNTIME_INT_H
#define RUNTIME_INT_H

#include "target/runtime/runtime.h"

/* tpgs.c: every TPG object points at its portal group in c, or at nothing (under rt_lock as writer). */
void rt_tpgs_point_at(const struct config *c);
void rt_tpgs_free(void);

#endif
