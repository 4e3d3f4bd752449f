/* Secrets' files read by one rule (secret_file.h). */
#include "common/secret_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int secret_file_read(const char *path, bool group_ok, const char *owner, char *buf, size_t cap, size_t *len,
		     char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0) {
		int e = errno;
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
		return -e;
	}
	struct stat st;
	ssize_t n = 0;
	int rc = 0;
	if (fstat(fd, &st)) {
		rc = -errno;
		snprintf(err, errlen, "%s: stat: %s", path, strerror(-rc));
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
	} else if (st.st_uid != 0 && st.st_uid != geteuid()) {
		rc = -EPERM;
		snprintf(err, errlen, "%s: owned by uid %u: a secret's file belongs to root or to %s (uid %u)", path,
			 (unsigned)st.st_uid, owner, (unsigned)geteuid());
	} else if (st.st_mode & (group_ok ? 0007 : 0077)) {
		rc = -EPERM;
		snprintf(err, errlen, "%s: mode %04o lets %s read it: chmod 600 it", path,
			 (unsigned)(st.st_mode & 07777), group_ok || !(st.st_mode & 0070) ? "others" : "its group");
	} else {
		while ((size_t)n < cap) {
			ssize_t r = read(fd, buf + n, cap - (size_t)n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				rc = -errno;
				snprintf(err, errlen, "%s: read: %s", path, strerror(-rc));
			}
			if (r <= 0)
				break;
			n += r;
		}
	}
	close(fd);
	*len = rc ? 0 : (size_t)n;
	return rc;
}
