/*
 * Moved to target/scsi/shared/shared.h; this name stays only for
 * alua_share.c, whose include the ALUA rewrite changes (then this goes).
 */
#include "target/scsi/shared/shared.h"
