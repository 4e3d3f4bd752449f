/* The TCP listeners of the control plane's HTTP doors (metrics.c, https.c): opened by us, so a failure says why. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/netaddr.h"
#include "target/config/config.h"
#include "target/control/control.h"

int control_listen(const char *field, const char *addr, char *shown, size_t shownlen, char *err, size_t errlen)
{
	struct sockaddr_storage ss = { 0 };
	char *host = NULL;
	uint16_t port;
	socklen_t sl;
	if (config_parse_metrics(addr, &host, &port)) {
		snprintf(err, errlen, "%s: '%s' is not HOST:PORT or PORT", field, addr);
		return -EINVAL;
	}
	struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons(port);
		sl = sizeof(*v4);
	} else {
		inet_pton(AF_INET6, host, &v6->sin6_addr); /* config_parse_metrics checked it is one */
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(port);
		sl = sizeof(*v6);
	}
	netaddr_join(shown, shownlen, host, port);
	free(host);
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 64)) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot listen on %s: %s", field, shown, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	return fd;
}
