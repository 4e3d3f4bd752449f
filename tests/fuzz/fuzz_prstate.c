/*
 * APTPL state files (target/scsi/pr/pr_state.c), read back at every start of
 * isertd.  Any input either parses, or fails with a message and nothing
 * allocated; a state that parses keeps its bounds, formats to text that
 * parses again and formats to the same text.
 */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "target/scsi/pr/pr_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pr_state st, st2;
	char err[256], *text, *text2;
	int r;

	memset(err, 'X', sizeof(err));
	r = pr_state_parse((const char *)data, size, &st, err, sizeof(err));
	if (r) {
		FUZZ_CHECK(r == -EINVAL || r == -ENOMEM, "returned %d", r);
		FUZZ_CHECK(st.regs == NULL && st.nregs == 0, "state left after error %d", r);
		FUZZ_CHECK(memchr(err, '\0', sizeof(err)) && err[0], "no message for %d", r);
		return 0;
	}
	FUZZ_CHECK(st.nregs <= PR_STATE_MAX_REGS, "%u registrations", st.nregs);
	FUZZ_CHECK(!st.reserved || st.holder < (int)st.nregs, "holder %d of %u", st.holder, st.nregs);
	for (unsigned i = 0; i < st.nregs; i++) {
		bool isid;
		size_t nl;

		FUZZ_CHECK(st.regs[i].key != 0, "key 0 at %u", i);
		FUZZ_CHECK(pr_state_valid_iport(st.regs[i].iport, &isid, &nl) && nl <= 223, "initiator %u", i);
		FUZZ_CHECK(strlen(st.regs[i].tport) < 256, "target port %u", i);
	}
	text = pr_state_format(&st);
	FUZZ_CHECK(text != NULL, "format failed");
	r = pr_state_parse(text, strlen(text), &st2, err, sizeof(err));
	FUZZ_CHECK(r == 0, "own text does not parse: %s\n%s", err, text);
	text2 = pr_state_format(&st2);
	FUZZ_CHECK(text2 && strcmp(text, text2) == 0, "round trip differs:\n%s\n---\n%s", text, text2);
	free(text2);
	free(text);
	pr_state_clear(&st2);
	pr_state_clear(&st);
	return 0;
}
