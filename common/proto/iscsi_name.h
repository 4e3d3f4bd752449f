#ifndef ISCSI_NAME_H
#define ISCSI_NAME_H

#include <stdbool.h>

/* RFC 7143 sec. 4.2.7.1: an iSCSI name is at most 223 bytes. */
#define ISCSI_NAME_MAX 223

/* Is n a valid iqn., eui. or naa. name (common/proto/iscsi_name.c says how strict)? */
bool iscsi_name_valid(const char *n);

#endif
