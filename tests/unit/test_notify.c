/*
 * CUnit tests for target/notify.c: what reaches the socket NOTIFY_SOCKET
 * names (the service manager's end is played by a datagram socket here),
 * and that nothing happens, and nothing fails, without one.
 */
#include <CUnit/Basic.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "target/control/notify.h"

#include "unit_run.h"

static char dir[] = "/tmp/test_notify.XXXXXX";
static char path[sizeof(dir) + 16];
static int sock = -1;

static int setup(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/notify", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0 || bind(sock, (struct sockaddr *)&sa, sizeof(sa)))
		return -1;
	return setenv("NOTIFY_SOCKET", path, 1);
}

static int teardown(void)
{
	if (sock >= 0)
		close(sock);
	unlink(path);
	rmdir(dir);
	return 0;
}

/* The next datagram within 1 s, or "" when none came. */
static __attribute__((unused)) const char *next_msg(void)
{
	static char buf[1024];
	struct pollfd p = { .fd = sock, .events = POLLIN };
	buf[0] = '\0';
	if (poll(&p, 1, 1000) == 1) {
		ssize_t n = recv(sock, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
	}
	return buf;
}

static bool nothing_pending(void)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	return poll(&p, 1, 0) == 0;
}

#ifdef HAVE_LIBSYSTEMD

static void test_ready(void)
{
	notify_ready("serving 2 portals");
	CU_ASSERT_STRING_EQUAL(next_msg(), "READY=1\nSTATUS=serving 2 portals");
	notify_ready(NULL);
	CU_ASSERT_STRING_EQUAL(next_msg(), "READY=1");
	/* NOTIFY_SOCKET stays set for what follows READY. */
	CU_ASSERT_PTR_NOT_NULL(getenv("NOTIFY_SOCKET"));
}

static void test_status_stopping(void)
{
	notify_status("3 sessions");
	CU_ASSERT_STRING_EQUAL(next_msg(), "STATUS=3 sessions");
	notify_stopping();
	CU_ASSERT_STRING_EQUAL(next_msg(), "STOPPING=1");
	notify_status(NULL);
	CU_ASSERT_STRING_EQUAL(next_msg(), "STATUS=");
}

/* A newline would start another assignment ("STATUS=x\nREADY=1" must not make it ready). */
static void test_one_line(void)
{
	notify_status("x\nREADY=1\tand\x7f more");
	CU_ASSERT_STRING_EQUAL(next_msg(), "STATUS=x READY=1 and  more");
	notify_ready("a\nSTOPPING=1");
	CU_ASSERT_STRING_EQUAL(next_msg(), "READY=1\nSTATUS=a STOPPING=1");
}

static void test_long_status(void)
{
	char big[1000];
	memset(big, 's', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	notify_status(big);
	const char *m = next_msg();
	CU_ASSERT_EQUAL(strlen(m), strlen("STATUS=") + 255);
	CU_ASSERT_EQUAL(strncmp(m, "STATUS=sss", 10), 0);
}

#endif

/* No manager listening (the socket is gone) or none at all: calls return, nothing is sent. */
static void test_no_manager(void)
{
	char gone[sizeof(path) + 8];
	snprintf(gone, sizeof(gone), "%s.gone", path);
	setenv("NOTIFY_SOCKET", gone, 1);
	notify_ready("x");
	notify_status("y");
	notify_stopping();
	unsetenv("NOTIFY_SOCKET");
	notify_ready("x");
	notify_status("y");
	notify_stopping();
	CU_ASSERT_TRUE(nothing_pending());
	setenv("NOTIFY_SOCKET", path, 1);
}

#ifndef HAVE_LIBSYSTEMD
/* Built without libsystemd: even with a manager listening nothing is sent. */
static void test_noop(void)
{
	notify_ready("x");
	notify_status("y");
	notify_stopping();
	CU_ASSERT_TRUE(nothing_pending());
}
#endif

int main(void)
{
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("notify", setup, teardown);
#ifdef HAVE_LIBSYSTEMD
	CU_add_test(s, "ready", test_ready);
	CU_add_test(s, "status and stopping", test_status_stopping);
	CU_add_test(s, "one line", test_one_line);
	CU_add_test(s, "long status", test_long_status);
#else
	CU_add_test(s, "no-op build", test_noop);
#endif
	CU_add_test(s, "no manager", test_no_manager);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
