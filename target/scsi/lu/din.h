/*
 * Data-In of emulated commands (INQUIRY and its VPD pages, MODE SENSE,
 * REPORT LUNS, PERSISTENT RESERVE IN, ...), built through a bounded writer.
 *
 * A builder writes its whole response as if there were room for all of it:
 * what does not fit the writer's buffer is counted and dropped, never
 * written, so a builder cannot overrun whatever names, serials or lists it
 * is given.  The length fields SPC defines report the full length; the
 * transfer is cut to the allocation length and the EDTL (SPC-4 4.2.5.6).
 */
#ifndef SCSI_DIN_H
#define SCSI_DIN_H

#include <stddef.h>
#include <stdint.h>

struct scsi_cmd;

struct din {
	uint8_t *p;     /* NULL while measuring */
	uint32_t cap;   /* bytes p holds */
	uint32_t len;   /* bytes produced, those past cap included (saturates at UINT32_MAX) */
};

/* A writer over buf (cap bytes), for builders whose output stays in memory. */
static inline struct din din_over(void *buf, uint32_t cap)
{
	return (struct din){ .p = buf, .cap = cap, .len = 0 };
}

static inline uint32_t din_pos(const struct din *d) { return d->len; }

void din_put(struct din *d, const void *src, size_t n);
void din_zero(struct din *d, size_t n);
void din_u8(struct din *d, uint8_t v);
void din_be16(struct din *d, uint16_t v);
void din_be32(struct din *d, uint32_t v);
void din_be64(struct din *d, uint64_t v);
/* An ASCII field of n bytes: src, cut or padded with spaces (SPC-4 4.4.1). */
void din_ascii(struct din *d, const char *src, size_t n);
/* Overwrite bytes already produced at off (a length known only at the end); nothing past cap. */
void din_set_u8(struct din *d, uint32_t off, uint8_t v);
void din_set_be16(struct din *d, uint32_t off, uint16_t v);
void din_set_be32(struct din *d, uint32_t off, uint32_t v);

/*
 * Build cmd's Data-In with fn: once to measure, once into cmd->buf sized
 * for min(length, alloc, EDTL).  Sets din_len and the residual (against the
 * full length cut to alloc).  fn may end the command with sense instead
 * (then nothing is sent).  Returns 0, or -ENOMEM with CHECK CONDITION set.
 */
typedef void (*din_fn)(struct scsi_cmd *cmd, struct din *d, const void *arg);
int din_build(struct scsi_cmd *cmd, uint32_t alloc, din_fn fn, const void *arg);

/* Data-In from a response already in memory (len bytes at data). */
int scsi_cmd_din(struct scsi_cmd *cmd, const void *data, uint32_t len, uint32_t alloc);

#endif
