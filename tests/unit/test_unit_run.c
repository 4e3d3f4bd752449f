/*
 * unit_run's verdict: a program whose suite set-up or clean-up fails ends
 * with 1 though no test failed (test_iscsi passed with none of its tests
 * run when its set-up failed); one whose suites all held ends with 0.
 * Checks of tests/lib/check.h: what is tested is the CUnit runner itself.
 */
#include "check.h"
#include "unit_run.h"

static int ok(void)
{
	return 0;
}

static int fail(void)
{
	return -1;
}

static void passes(void)
{
	CU_ASSERT(1);
}

/* unit_run's status for one suite with this set-up and clean-up and one passing test. */
static int verdict(CU_InitializeFunc init, CU_CleanupFunc clean)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return -1;
	CU_pSuite s = CU_add_suite("runner", init, clean);
	CU_add_test(s, "passes", passes);
	CU_basic_set_mode(CU_BRM_SILENT);
	return unit_run();
}

int main(void)
{
	struct {
		const char *what;
		CU_InitializeFunc init;
		CU_CleanupFunc clean;
		int want;
	} cases[] = {
		{ "set-up and clean-up held: 0", ok, ok, 0 },
		{ "set-up failed (no test ran): 1", fail, ok, 1 },
		{ "clean-up failed: 1", ok, fail, 1 },
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = verdict(cases[i].init, cases[i].clean);
		check(cases[i].what, got == cases[i].want, "got %d", got);
	}
	return check_failed ? 1 : 0;
}
