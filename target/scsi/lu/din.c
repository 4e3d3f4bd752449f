/*
 * The bounded Data-In writer and the helper that sizes a command's buffer
 * for what a builder produces (see din.h).
 */
#include "target/scsi/lu/din.h"

#include <errno.h>
#include <string.h>

#include "common/bufpool.h"
#include "target/scsi/lu/lu.h"

static void din_advance(struct din *d, size_t n)
{
	d->len = n > UINT32_MAX - d->len ? UINT32_MAX : d->len + (uint32_t)n;
}

/* Bytes of an n-byte write at off that land inside the buffer. */
static size_t din_room(const struct din *d, uint32_t off, size_t n)
{
	return off < d->cap ? MIN(n, (size_t)(d->cap - off)) : 0;
}

void din_put(struct din *d, const void *src, size_t n)
{
	size_t k = din_room(d, d->len, n);

	if (k)
		memcpy(d->p + d->len, src, k);
	din_advance(d, n);
}

void din_zero(struct din *d, size_t n)
{
	size_t k = din_room(d, d->len, n);

	if (k)
		memset(d->p + d->len, 0, k);
	din_advance(d, n);
}

void din_u8(struct din *d, uint8_t v)
{
	din_put(d, &v, 1);
}

void din_be16(struct din *d, uint16_t v)
{
	uint8_t b[2];

	put_be16(b, v);
	din_put(d, b, sizeof(b));
}

void din_be32(struct din *d, uint32_t v)
{
	uint8_t b[4];

	put_be32(b, v);
	din_put(d, b, sizeof(b));
}

void din_be64(struct din *d, uint64_t v)
{
	uint8_t b[8];

	put_be64(b, v);
	din_put(d, b, sizeof(b));
}

void din_ascii(struct din *d, const char *src, size_t n)
{
	size_t l = strnlen(src, n);

	din_put(d, src, l);
	while (l++ < n)
		din_u8(d, ' ');
}

static void din_set(struct din *d, uint32_t off, const uint8_t *src, size_t n)
{
	size_t k = din_room(d, off, n);

	if (k)
		memcpy(d->p + off, src, k);
}

void din_set_u8(struct din *d, uint32_t off, uint8_t v)
{
	din_set(d, off, &v, 1);
}

void din_set_be16(struct din *d, uint32_t off, uint16_t v)
{
	uint8_t b[2];

	put_be16(b, v);
	din_set(d, off, b, sizeof(b));
}

void din_set_be32(struct din *d, uint32_t off, uint32_t v)
{
	uint8_t b[4];

	put_be32(b, v);
	din_set(d, off, b, sizeof(b));
}

int din_build(struct scsi_cmd *cmd, uint32_t alloc, din_fn fn, const void *arg)
{
	struct din d = { 0 };
	uint32_t room = cmd->dir_read ? cmd->edtl : 0, n;

	/* Measure first: the buffer is as large as what goes out, never as large as a peer asks. */
	fn(cmd, &d, arg);
	if (cmd->status != SCSI_GOOD)
		return 0;
	n = MIN(MIN(d.len, alloc), room);
	if (!cmd->buf || cmd->buf->cap < n) {
		if (cmd->buf)
			bufpool_put(cmd->buf);
		cmd->buf = scsi_buf_get(cmd, n ? n : 1);
		if (!cmd->buf) {
			sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			return -ENOMEM;
		}
	}
	d = din_over(cmd->buf->data, n);
	fn(cmd, &d, arg);
	if (cmd->status != SCSI_GOOD)
		return 0;
	/* The second pass may differ (thin LBA status changing underneath): its own length counts. */
	cmd->din_len = MIN(d.len, n);
	cmd->resid = (int64_t)cmd->edtl - MIN(d.len, alloc);
	return 0;
}

struct din_copy {
	const void *data;
	uint32_t len;
};

static void din_copy(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	const struct din_copy *c = arg;

	din_put(d, c->data, c->len);
}

int scsi_cmd_din(struct scsi_cmd *cmd, const void *data, uint32_t len, uint32_t alloc)
{
	struct din_copy c = { data, len };

	return din_build(cmd, alloc, din_copy, &c);
}
