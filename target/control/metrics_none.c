/* isertd built without libmicrohttpd (-Dmetrics=disabled or not found): global.metrics is refused. */
#include <errno.h>
#include <stdio.h>

#include "target/control/metrics.h"

int metrics_start(const char *addr, char *err, size_t errlen)
{
	if (!addr || !*addr)
		return 0;
	snprintf(err, errlen, "global.metrics: isertd was built without libmicrohttpd (no Prometheus endpoint); "
			      "remove global.metrics or rebuild with libmicrohttpd-dev installed");
	return -ENOTSUP;
}

void metrics_shutdown(void)
{
}

void metrics_stop(void)
{
}
