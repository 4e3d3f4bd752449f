/*
 * How a CUnit test program ends: its suites run, the registry freed, and
 * the exit status that says whether all of it held.
 */
#ifndef UNIT_RUN_H
#define UNIT_RUN_H

#include <CUnit/Basic.h>

/* Runs the registered suites (in the mode the program set with
 * CU_basic_set_mode) and frees the registry: 0 if every test passed and
 * every suite's set-up and clean-up did, else 1.
 * CU_get_number_of_failures() alone counts neither a suite whose set-up
 * failed (none of its tests ran) nor one whose clean-up did (where the
 * SCSI tests check that every buffer came back). */
int unit_run(void);

#endif
