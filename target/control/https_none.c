/* isertd built without libmicrohttpd or GnuTLS: global.admin_https is refused, naming the packages. */
#include <errno.h>
#include <stdio.h>

#include "target/config/config.h"
#include "target/control/https.h"

const char *https_refusal_name(enum https_refusal r)
{
	(void)r;
	return "?";
}

uint64_t https_refused(enum https_refusal r)
{
	(void)r;
	return 0;
}

int https_prepare(const struct config *c, char *err, size_t errlen)
{
	if (!c->admin_https)
		return 0;
	snprintf(err, errlen, "global.admin_https: isertd was built without the HTTPS admin door (it needs "
		 "libmicrohttpd-dev and libgnutls28-dev at build time)");
	return -ENOTSUP;
}

int https_check(const struct config *c, char *err, size_t errlen)
{
	return https_prepare(c, err, errlen);
}

void https_commit(void) {}
void https_reload(void) {}
int https_fd(void)
{
	return -1;
}
int https_timeout_ms(int max)
{
	return max;
}
void https_run(void) {}
void https_stop(void) {}
