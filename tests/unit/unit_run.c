/* The end of every CUnit test program: see unit_run.h. */
#include "unit_run.h"

int unit_run(void)
{
	CU_basic_run_tests();
	unsigned fails = CU_get_number_of_failures() + CU_get_number_of_suites_failed();
	CU_cleanup_registry();
	return fails ? 1 : 0;
}
