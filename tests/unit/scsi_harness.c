/* The SCSI unit harness: see scsi_harness.h. */
#include "scsi_harness.h"

#include <CUnit/CUnit.h>
#include <string.h>

#include "common/bufpool.h"
#include "common/util.h"

int sh_ndone;
const struct scsi_nexus *sh_nexus;
const struct scsi_lun_map *sh_lun_map;

int sh_pool_open(void)
{
	scsi_test_pool = bufpool_create();
	return scsi_test_pool ? 0 : -1;
}

int sh_pool_close(void)
{
	size_t leak = bufpool_in_use(scsi_test_pool);
	bufpool_destroy(scsi_test_pool);
	return leak ? -1 : 0;
}

static void sh_done(struct scsi_cmd *cmd)
{
	(void)cmd;
	__atomic_add_fetch(&sh_ndone, 1, __ATOMIC_RELEASE);
}

void sh_cmd_init(struct scsi_cmd *c, struct scsi_lu *lu, const uint8_t *cdb, uint32_t cdb_len, uint32_t edtl,
		 bool rd, bool wr)
{
	memset(c, 0, sizeof(*c));
	memcpy(c->cdb, cdb, cdb_len);
	c->cdb_len = 16;
	c->lu = lu;
	c->nexus = sh_nexus;
	c->lun_map = sh_lun_map;
	c->edtl = edtl;
	c->dir_read = rd;
	c->dir_write = wr;
	c->done = sh_done;
}

bool sh_prepare(struct scsi_cmd *c, const void *dout, uint32_t dlen)
{
	if (!scsi_cmd_prepare(c))
		return false;
	if (c->dout_len) {
		CU_ASSERT_PTR_NOT_NULL_FATAL(c->buf);
		memcpy(c->buf->data, dout, MIN(dlen, c->dout_len));
	}
	return true;
}

bool sh_start(struct scsi_cmd *c, const void *dout, uint32_t dlen)
{
	__atomic_store_n(&sh_ndone, 0, __ATOMIC_RELEASE);
	if (!sh_prepare(c, dout, dlen))
		return false;
	scsi_cmd_exec(c);
	return true;
}
