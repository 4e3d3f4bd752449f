/*
 * isc-example: the smallest useful program over libisert-initiator.
 * Connects to an iSCSI URL, reads the LUN's capacity and its first block,
 * prints both.  Copy it into your project and build it with
 *
 *   cc isc-example.c -o isc-example $(pkg-config --cflags --libs isert-initiator)
 *
 * usage: isc-example iscsi://host[:port]/target-iqn/lun
 * Exit status 0 on success, 1 on any error (printed on stderr).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <isert/initiator.h>

/* The library is silent unless given a log callback: take its warnings. */
static void on_log(enum isc_log_level level, const char *msg, void *arg)
{
	(void)arg;
	fprintf(stderr, "isc-example: library %s: %s\n", level == ISC_LOG_ERR ? "error" : "warning", msg);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s iscsi://host[:port]/target-iqn/lun\n", argv[0]);
		return 1;
	}
	unsigned v = isc_version();
	if (v >> 16 != ISC_API_VERSION_MAJOR) {
		fprintf(stderr, "isc-example: library API %u.%u, built for %d.%d\n", v >> 16, v & 0xffff,
			ISC_API_VERSION_MAJOR, ISC_API_VERSION_MINOR);
		return 1;
	}
	isc_set_log_cb(on_log, NULL, ISC_LOG_WARN);

	struct isc_url url;
	char err[256];
	if (isc_url_parse(argv[1], false, &url, err, sizeof(err)) < 0 || !url.target[0]) {
		fprintf(stderr, "isc-example: %s\n", url.target[0] ? err : "the URL names no target");
		return 1;
	}

	/* Defaults first, then changes: the options struct may grow. */
	struct isc_options o;
	isc_options_default(&o);
	o.reconnect_timeout_s = 0; /* one-shot program: a lost connection is an error */
	struct isc_session *s = isc_session_new(&o);
	if (!s) {
		fprintf(stderr, "isc-example: isc_session_new: %s\n", isc_strerror(-errno));
		return 1;
	}

	int rc = isc_connect_url_sync(s, &url);
	if (rc < 0) {
		fprintf(stderr, "isc-example: login: %s\n", isc_errmsg(s));
		isc_session_free(s);
		return 1;
	}
	struct isc_capacity cap;
	struct isc_result res = { 0 };
	rc = isc_readcap16_sync(s, url.lun, &cap, &res);
	if (rc < 0) {
		char why[256];
		isc_result_str(&res, why, sizeof(why));
		fprintf(stderr, "isc-example: READ CAPACITY: %s (%s)\n", isc_strerror(rc), why);
		goto out;
	}
	printf("capacity: %llu blocks of %u bytes\n", (unsigned long long)cap.blocks, cap.block_size);

	unsigned char *block = malloc(cap.block_size);
	if (!block) {
		rc = -ENOMEM;
		goto out;
	}
	rc = isc_read16_sync(s, url.lun, 0, 1, cap.block_size, block, &res);
	if (rc < 0) {
		fprintf(stderr, "isc-example: READ: %s\n", isc_errmsg(s));
	} else {
		printf("block 0:");
		for (unsigned i = 0; i < 16 && i < cap.block_size; i++)
			printf(" %02x", block[i]);
		printf("\n");
	}
	free(block);
	if (rc == 0)
		isc_logout_sync(s);
out:
	isc_session_free(s);
	return rc < 0 ? 1 : 0;
}
