/*
 * A small file that holds a secret: a CHAP password_file, a token's hash
 * (global.admin_https), iserctl's token file.  One rule for all of them
 * (docs/security.md, "Secrets"): a regular file, not a symbolic link, owned
 * by root or by this process's user, that its group and others cannot read.
 */
#ifndef COMMON_SECRET_FILE_H
#define COMMON_SECRET_FILE_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Read path into buf (at most cap bytes: a longer file gives *len == cap,
 * for the caller to refuse).  group_ok: only others may not read it (a
 * systemd credential, whose group systemd sets).  owner names who besides
 * root may own it, for the message ("isertd's user").  0, or -errno with err
 * "PATH: what is wrong, and what to do"; buf is the caller's to wipe.
 */
int secret_file_read(const char *path, bool group_ok, const char *owner, char *buf, size_t cap, size_t *len,
		     char *err, size_t errlen);

#endif
