/*
 * Unit attentions for iseradm's commands.  A command that meets one did not
 * run (SAM-5 5.14): retrying it is right.  A new nexus starts with some
 * (power on, reset; tgtd greets every new nexus), and one is queued per
 * condition, so a few tries clear them.
 */
#ifndef ISERADM_UA_H
#define ISERADM_UA_H

#include <errno.h>
#include <stdbool.h>

#include "isert/initiator.h"

#define UA_RETRIES 8

static inline bool is_unit_attention(int rc, const struct isc_result *r)
{
	return rc == -EIO && r->sense.valid && r->sense.key == 6;
}

/* TEST UNIT READY until it meets no unit attention (at most UA_RETRIES); its last result. */
static inline int clear_unit_attentions(struct isc_session *s, uint64_t lun)
{
	struct isc_result r;
	int rc = 0;
	for (int i = 0; i < UA_RETRIES; i++)
		if (!is_unit_attention(rc = isc_tur_sync(s, lun, &r), &r))
			break;
	return rc;
}

#endif
