/*
 * Token-based copy (ODX, rod.h).
 *
 * POPULATE TOKEN makes a 512-byte ROD token for block ranges of the LU it
 * is sent to; WRITE USING TOKEN writes the data the token represents (from
 * an offset into it) to ranges of its own LU, which may be another LU of
 * the same target, through the copy engine EXTENDED COPY uses; RECEIVE ROD
 * TOKEN INFORMATION returns, by list identifier, the result of either, and
 * the token a POPULATE TOKEN made.
 *
 * A token is a capability only this process can have issued: its bytes
 * name the LU (NAA designator, block length), the target device (its SCSI
 * name), the ranges (a SHA-256 of the range descriptors) and end with 256
 * random bits; the table keeps the whole 512 bytes and a token is used only
 * when every byte matches (compared in constant time).  A token is
 * "change vulnerable": any command about to change blocks of its ranges
 * (WRITE and WRITE AND VERIFY, WRITE SAME, UNMAP, COMPARE AND WRITE,
 * ORWRITE, WRITE ATOMIC, SANITIZE and any other command that changes the
 * medium, an EXTENDED COPY or WRITE USING TOKEN chunk written there) cancels
 * it before the write is issued, so a WRITE USING TOKEN that succeeds
 * copied the data as it was at POPULATE TOKEN; a copy running on a token
 * that gets cancelled stops before it writes another chunk.  Tokens expire
 * after their inactivity timeout (and ROD_MAX_LIFETIME after they were
 * made), are revoked by an LU or target reset, deleted by DEL_TKN, and
 * evicted (least recently used first) when a new one needs room.
 *
 * One mutex guards the table and the held results; a write to an LU that
 * has no token pays one atomic load (rod_will_write).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "common/bufpool.h"
#include "common/proto/chap.h"
#include "target/scsi/copy/copy.h"
#include "target/scsi/copy/rod.h"

#define ASC_OPERATION_IN_PROGRESS      0x0016
#define ASC_COPY_TARGET_NOT_REACHABLE  0x0d02
#define ASC_THIRD_PARTY_DEVICE_FAILURE 0x0d01
#define ASC_TOO_MANY_SEGMENT_DESCS     0x2608
#define ASC_INSUFFICIENT_RESOURCES     0x5503
#define ASC_NO_RESOURCES_FOR_TOKEN     0x550d
/* INVALID TOKEN OPERATION (23h): the ASCQ says why. */
#define ASC_TOKEN(q)                   (0x2300 | (q))
enum {
	TOK_CAUSE_NOT_REPORTABLE = 0x00, TOK_UNSUPPORTED_TYPE = 0x01, TOK_REMOTE = 0x02, TOK_UNKNOWN = 0x04,
	TOK_CORRUPT = 0x05, TOK_REVOKED = 0x06, TOK_EXPIRED = 0x07, TOK_CANCELLED = 0x08, TOK_DELETED = 0x09,
	TOK_BAD_LENGTH = 0x0a,
};
#define TOK_LIVE 0xff

/* COPY OPERATION STATUS (SPC-4 6.19.2). */
enum { COS_GOOD = 0x01, COS_ERROR = 0x02, COS_RESIDUAL = 0x04, COS_RUNNING = 0x11, COS_TERMINATED = 0x60 };
#define TC_UNITS_BLOCKS 0xf1
#define RRTI_HDR 32u
/* ESTIMATED STATUS UPDATE DELAY (ms) while a copy runs. */
#define RRTI_POLL_MS 100u

/* Byte offsets in the tokens this target makes. */
enum {
	T_TYPE = 0, T_LEN = 6, T_ID = 8, T_CREATOR = 16, T_BYTES = 48, T_DEVSPEC = 96, T_TARGET = 128,
	T_RANGES_SHA = 448, T_SECRET = 480,
};
#define SECRET_LEN 32u

static uint64_t clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

uint64_t (*rod_clock_ms)(void) = clock_ms;

/* ---- parameter lists ---- */

static int perr(struct rod_err *e, uint8_t key, uint16_t asc, uint32_t field, int bit)
{
	memset(e, 0, sizeof(*e));
	e->key = key;
	e->asc = asc;
	e->field = (uint16_t)field;
	e->bit = (int8_t)bit;
	return -1;
}

static int plle(struct rod_err *e)
{
	perr(e, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR, 0, -1);
	e->no_sks = true;
	return -1;
}

/*
 * The header's data length (at 0) and range descriptor length (at dl_off),
 * then the descriptors from hdr on: within the LU, not overlapping, at most
 * max_blocks together.
 */
static int parse_ranges(const uint8_t *p, uint32_t len, uint32_t hdr, uint32_t dl_off, uint64_t nblocks,
			uint64_t max_blocks, struct rod_range *r, uint32_t *nr, struct rod_err *e)
{
	if (len < hdr + ROD_RANGE_LEN)
		return plle(e);
	uint32_t dl = get_be16(p) + 2u;
	if (dl > len)
		return plle(e);
	uint32_t rl = get_be16(p + dl_off);
	if (!rl || rl % ROD_RANGE_LEN)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, dl_off, -1);
	if (rl / ROD_RANGE_LEN > ROD_MAX_RANGES)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_TOO_MANY_SEGMENT_DESCS, dl_off, -1);
	if (hdr + rl > dl)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, dl_off, -1);
	uint64_t total = 0;
	*nr = rl / ROD_RANGE_LEN;
	for (uint32_t k = 0; k < *nr; k++) {
		uint32_t off = hdr + k * ROD_RANGE_LEN;
		r[k].lba = get_be64(p + off);
		r[k].n = get_be32(p + off + 8);
		if (r[k].lba > nblocks || r[k].n > nblocks - r[k].lba) {
			perr(e, SK_ILLEGAL_REQUEST, ASC_LBA_OUT_OF_RANGE, 0, -1);
			e->no_sks = true;
			e->info_valid = true;
			e->info = r[k].lba;
			return -1;
		}
		total += r[k].n;
		if (total > max_blocks)
			return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, off + 8, -1);
		for (uint32_t i = 0; i < k && r[k].n; i++)
			if (r[i].n && r[i].lba < r[k].lba + r[k].n && r[k].lba < r[i].lba + r[i].n)
				return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, off, -1);
	}
	return 0;
}

int rod_parse_pt(const uint8_t *p, uint32_t len, uint64_t nblocks, uint64_t max_blocks, struct rod_pt *pt,
		 struct rod_err *e)
{
	memset(pt, 0, offsetof(struct rod_pt, r));
	if (parse_ranges(p, len, ROD_PT_HDR, 14, nblocks, max_blocks, pt->r, &pt->nranges, e))
		return -1;
	pt->immed = p[2] & 0x01;
	pt->rtv = p[2] & 0x02;
	pt->timeout = get_be32(p + 4);
	pt->rod_type = get_be32(p + 8);
	if (pt->rtv && pt->rod_type != ROD_TYPE_AUR && pt->rod_type != ROD_TYPE_PIT_DEFAULT &&
	    pt->rod_type != ROD_TYPE_PIT_VULN && pt->rod_type != ROD_TYPE_PIT_ANY)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 8, -1);
	if (pt->timeout > ROD_MAX_TIMEOUT)
		return perr(e, SK_ILLEGAL_REQUEST, ASC_INVALID_FIELD_IN_PARAM, 4, -1);
	return 0;
}

int rod_parse_wut(const uint8_t *p, uint32_t len, uint64_t nblocks, uint64_t max_blocks, struct rod_wut *w,
		  struct rod_err *e)
{
	memset(w, 0, offsetof(struct rod_wut, r));
	if (parse_ranges(p, len, ROD_WUT_HDR, 534, nblocks, max_blocks, w->r, &w->nranges, e))
		return -1;
	w->immed = p[2] & 0x01;
	w->del_tkn = p[2] & 0x02;
	w->offset = get_be64(p + 8);
	w->token = p + 16;
	return 0;
}

static void set_err(struct scsi_cmd *cmd, const struct rod_err *e)
{
	if (e->info_valid)
		sense_set_info(cmd, e->key, e->asc, e->info);
	else if (e->no_sks)
		sense_set(cmd, e->key, e->asc);
	else
		sense_set_field(cmd, e->key, e->asc, false, e->field, e->bit);
}

/* ---- the table ---- */

struct rod_job;

struct rod_token {
	struct rod_token *next;       /* every token (rod.all) */
	struct rod_token *lu_next;    /* the LU's live tokens (lu->rod_list) */
	struct scsi_lu *lu;
	uint64_t id;
	uint64_t made, used;          /* ms */
	uint32_t timeout_ms;
	uint32_t busy;                /* WRITE USING TOKEN commands copying from it */
	uint8_t state;                /* TOK_LIVE, or why it died (read without the mutex by copies) */
	uint64_t lo, hi;              /* every range lies in [lo, hi) */
	uint64_t blocks;
	char target[224];
	uint8_t bytes[ROD_TOKEN_LEN];
	uint32_t nranges;
	struct rod_range r[];
};

struct rod_gone {
	uint64_t id;
	uint8_t secret[SECRET_LEN];
	uint8_t why;
};

/* A result held for RECEIVE ROD TOKEN INFORMATION, or a copy still running (job). */
struct rod_held {
	struct rod_held *next;
	struct scsi_lu *lu;
	uint64_t nexus;
	uint32_t list_id;
	uint32_t seq;
	struct rod_job *job;          /* running; its progress is the job's */
	bool orphan;                  /* its nexus went while it ran: forgotten when it ends */
	uint8_t sa, cos, status, sense_len;
	uint64_t count;               /* TRANSFER COUNT, logical blocks */
	uint8_t sense[SCSI_SENSE_LEN];
	bool has_token;
	uint8_t token[ROD_TOKEN_LEN];
};

static struct {
	pthread_mutex_t mu;
	struct rod_token *all;
	uint32_t ntokens;
	uint64_t next_id;
	struct rod_gone gone[ROD_GONE_MAX];
	uint32_t gone_next;
	struct rod_held *held;
	uint32_t nheld;
	uint32_t seq;
} rod = { .mu = PTHREAD_MUTEX_INITIALIZER };

static void lu_tokens_set(struct scsi_lu *lu, uint32_t n)
{
	__atomic_store_n(&lu->rod_tokens, n, __ATOMIC_RELEASE);
}

static void tok_free(struct rod_token *t)
{
	for (struct rod_token **pp = &rod.all; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	rod.ntokens--;
	free(t);
}

/* The token dies for reason why: no longer usable, remembered by id; freed once no copy uses it. */
static void tok_kill(struct rod_token *t, uint8_t why)
{
	if (t->state != TOK_LIVE)
		return;
	for (struct rod_token **pp = &t->lu->rod_list; *pp; pp = &(*pp)->lu_next) {
		if (*pp == t) {
			*pp = t->lu_next;
			break;
		}
	}
	lu_tokens_set(t->lu, t->lu->rod_tokens - 1);
	__atomic_store_n(&t->state, why, __ATOMIC_RELEASE);
	struct rod_gone *g = &rod.gone[rod.gone_next++ % ROD_GONE_MAX];
	g->id = t->id;
	memcpy(g->secret, t->bytes + T_SECRET, SECRET_LEN);
	g->why = why;
	if (!t->busy)
		tok_free(t);
}

static bool tok_expired(const struct rod_token *t, uint64_t now)
{
	return !t->busy && (now - t->used > t->timeout_ms || now - t->made > ROD_MAX_LIFETIME * 1000ull);
}

static void sweep_expired(uint64_t now)
{
	for (struct rod_token *t = rod.all, *n; t; t = n) {
		n = t->next;
		if (t->state == TOK_LIVE && tok_expired(t, now))
			tok_kill(t, TOK_EXPIRED);
	}
}

/* The least recently used token of lu's list (lu) or of all (NULL) that no copy uses. */
static struct rod_token *lru(struct scsi_lu *lu)
{
	struct rod_token *v = NULL;

	/* Ties (the same millisecond) go to the older: ids grow. */
	for (struct rod_token *t = lu ? lu->rod_list : rod.all; t; t = lu ? t->lu_next : t->next)
		if (t->state == TOK_LIVE && !t->busy &&
		    (!v || t->used < v->used || (t->used == v->used && (int64_t)(t->id - v->id) < 0)))
			v = t;
	return v;
}

/* Room for one more token on lu: expired ones go, then the least recently used. */
static bool make_room(struct scsi_lu *lu, uint64_t now)
{
	if (lu->rod_tokens >= ROD_TOKENS_PER_LU || rod.ntokens >= ROD_TOKENS_MAX)
		sweep_expired(now);
	while (lu->rod_tokens >= ROD_TOKENS_PER_LU) {
		struct rod_token *v = lru(lu);
		if (!v)
			return false;
		tok_kill(v, TOK_REVOKED);
	}
	while (rod.ntokens >= ROD_TOKENS_MAX) {
		struct rod_token *v = lru(NULL);
		if (!v)
			return false;
		tok_kill(v, TOK_REVOKED);
	}
	return true;
}

/* Does [lba, end) meet one of the ranges? */
static bool ranges_overlap(const struct rod_range *r, uint32_t n, uint64_t lba, uint64_t end)
{
	for (uint32_t i = 0; i < n; i++)
		if (r[i].n && r[i].lba < end && lba < r[i].lba + r[i].n)
			return true;
	return false;
}

void rod_invalidate(struct scsi_lu *lu, uint64_t lba, uint64_t n)
{
	uint64_t end = lba + n < lba ? UINT64_MAX : lba + n;   /* an UNMAP list exec has not checked yet */

	pthread_mutex_lock(&rod.mu);
	for (struct rod_token *t = lu->rod_list, *next; t; t = next) {
		next = t->lu_next;
		if (t->lo < end && lba < t->hi && ranges_overlap(t->r, t->nranges, lba, end))
			tok_kill(t, TOK_CANCELLED);
	}
	pthread_mutex_unlock(&rod.mu);
}

static void lu_tokens_kill(struct scsi_lu *lu, uint8_t why)
{
	pthread_mutex_lock(&rod.mu);
	while (lu->rod_list)
		tok_kill(lu->rod_list, why);
	pthread_mutex_unlock(&rod.mu);
}

void rod_lu_reset(struct scsi_lu *lu)
{
	lu_tokens_kill(lu, TOK_REVOKED);
}

static void held_free(struct rod_held *h)
{
	for (struct rod_held **pp = &rod.held; *pp; pp = &(*pp)->next) {
		if (*pp == h) {
			*pp = h->next;
			break;
		}
	}
	rod.nheld--;
	free(h);
}

void rod_lu_gone(struct scsi_lu *lu)
{
	lu_tokens_kill(lu, TOK_REVOKED);
	pthread_mutex_lock(&rod.mu);
	/* No copy runs here any more (the admin waited for every command using lu). */
	for (struct rod_held *h = rod.held, *n; h; h = n) {
		n = h->next;
		if (h->lu == lu && !h->job)
			held_free(h);
	}
	pthread_mutex_unlock(&rod.mu);
}

void rod_nexus_gone(struct scsi_lu *lu, uint64_t nexus_id)
{
	pthread_mutex_lock(&rod.mu);
	for (struct rod_held *h = rod.held, *n; h; h = n) {
		n = h->next;
		if (h->lu != lu || h->nexus != nexus_id)
			continue;
		if (h->job)
			h->orphan = true;
		else
			held_free(h);
	}
	pthread_mutex_unlock(&rod.mu);
}

/*
 * Under the mutex: the slot for a command with list identifier list_id of
 * this nexus at its LU, or NULL with sense set.  A result held under the
 * same identifier is replaced; a running one refuses the command.  Full:
 * the nexus's oldest held result gives way, else the oldest of all.
 */
static struct rod_held *held_take(struct scsi_cmd *cmd, uint32_t list_id, uint8_t sa)
{
	struct rod_held *same = NULL, *oldest = NULL, *h;
	uint32_t mine = 0;

	for (h = rod.held; h; h = h->next) {
		if (h->lu != cmd->lu || h->nexus != cmd->nexus->id)
			continue;
		mine++;
		if (h->list_id == list_id)
			same = h;
		if (!h->job && (!oldest || (int32_t)(h->seq - oldest->seq) < 0))
			oldest = h;
	}
	if (same && same->job) {
		sense_set_field(cmd, SK_ILLEGAL_REQUEST, ASC_OPERATION_IN_PROGRESS, true, 6, -1);
		return NULL;
	}
	if (same) {
		h = same;
	} else {
		if (mine >= ROD_HELD_PER_NEXUS) {
			if (!oldest)
				goto full;
			held_free(oldest);
		}
		if (rod.nheld >= ROD_HELD_MAX) {
			oldest = NULL;
			for (h = rod.held; h; h = h->next)
				if (!h->job && (!oldest || (int32_t)(h->seq - oldest->seq) < 0))
					oldest = h;
			if (!oldest)
				goto full;
			held_free(oldest);
		}
		h = malloc(sizeof(*h));
		if (!h) {
			sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			return NULL;
		}
		h->next = rod.held;
		rod.held = h;
		rod.nheld++;
	}
	struct rod_held *next = h->next;
	memset(h, 0, sizeof(*h));
	h->next = next;
	h->lu = cmd->lu;
	h->nexus = cmd->nexus->id;
	h->list_id = list_id;
	h->sa = sa;
	h->seq = ++rod.seq;
	return h;
full:
	sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_INSUFFICIENT_RESOURCES);
	return NULL;
}

/* The command's outcome into a held result. */
static void held_result(struct rod_held *h, const struct scsi_cmd *cmd, uint8_t cos, uint64_t count)
{
	h->cos = cos;
	h->status = cmd->status;
	h->count = count;
	h->sense_len = (uint8_t)MIN(cmd->sense_len, (uint32_t)sizeof(h->sense));
	memcpy(h->sense, cmd->sense, h->sense_len);
}

bool rod_supported(const struct scsi_lu *lu)
{
	return !backstore_shared(lu->bs);
}

/* ---- POPULATE TOKEN ---- */

static bool prep_list(struct scsi_cmd *cmd, uint32_t min, uint32_t max)
{
	uint32_t plen = get_be32(cmd->cdb + 10);

	if (plen < min || plen > max) {
		cmd->resid = (int64_t)cmd->edtl - plen;
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		return false;
	}
	cmd->state = plen;
	return scsi_prep_param_list(cmd, plen);
}

bool rod_prep_pt(struct scsi_cmd *cmd)
{
	return prep_list(cmd, ROD_PT_HDR + ROD_RANGE_LEN, ROD_MAX_PT_LIST);
}

static uint64_t max_blocks(const struct scsi_lu *lu)
{
	return ROD_MAX_BYTES >> lu->block_shift;
}

static void ranges_sha(const struct rod_range *r, uint32_t n, uint8_t out[32])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t d[ROD_RANGE_LEN] = { 0 };
	unsigned int olen = 0;
	bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);

	for (uint32_t i = 0; ok && i < n; i++) {
		put_be64(d, r[i].lba);
		put_be32(d + 8, r[i].n);
		ok = EVP_DigestUpdate(ctx, d, sizeof(d));
	}
	if (!ok || !EVP_DigestFinal_ex(ctx, out, &olen))
		memset(out, 0, 32);   /* the secret still makes the token unforgeable */
	EVP_MD_CTX_free(ctx);
}

/* The token's bytes (SPC-4 table 118, SBC-3's block device specific data); false: no randomness. */
static bool tok_bytes(struct rod_token *t, const struct scsi_cmd *cmd, uint32_t type)
{
	struct scsi_lu *lu = cmd->lu;
	uint8_t *b = t->bytes;

	memset(b, 0, ROD_TOKEN_LEN);
	put_be32(b + T_TYPE, type);
	put_be16(b + T_LEN, ROD_TOKEN_LEN_FIELD);
	put_be64(b + T_ID, t->id);
	/* CREATOR LOGICAL UNIT DESCRIPTOR: an identification CSCD descriptor (E4h) with the LU's NAA designator. */
	uint8_t *c = b + T_CREATOR;
	c[0] = 0xe4;
	c[4] = 0x01;   /* binary */
	c[5] = 0x03;   /* LU association, NAA */
	c[7] = 16;
	lu_naa(lu, c + 8);
	put_be24(c + 29, lu->block_size);
	put_be64(b + T_BYTES + 8, t->blocks << lu->block_shift);
	/* Device type specific data: READ CAPACITY (16) parameter data from byte 8 on. */
	put_be32(b + T_DEVSPEC, lu->block_size);
	if (lu->thin)
		b[T_DEVSPEC + 6] = 0x80 | (backstore_unmap_zeroes(lu->bs) ? 0x40 : 0);
	/* TARGET DEVICE DESCRIPTOR: the target's SCSI name string, as VPD 83h reports it. */
	size_t l = strnlen(t->target, sizeof(t->target) - 1);
	if (l) {
		b[T_TARGET] = 0x53;          /* iSCSI, UTF-8 */
		b[T_TARGET + 1] = 0xa8;      /* PIV, target device, SCSI name string */
		b[T_TARGET + 3] = (uint8_t)((l + 4) & ~(size_t)3);
		memcpy(b + T_TARGET + 4, t->target, l);
	}
	ranges_sha(t->r, t->nranges, b + T_RANGES_SHA);
	return chap_random(b + T_SECRET, SECRET_LEN) == 0;
}

void rod_pt(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	struct rod_pt *pt = malloc(sizeof(*pt));
	struct rod_token *t = NULL;
	struct rod_err e;
	uint32_t plen = cmd->state;

	if (!pt) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		goto done;
	}
	if (cmd->dout_len < plen) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		goto done;
	}
	if (rod_parse_pt(cmd->buf->data, plen, lu_nblocks(lu), max_blocks(lu), pt, &e)) {
		set_err(cmd, &e);
		goto done;
	}
	t = calloc(1, sizeof(*t) + pt->nranges * sizeof(t->r[0]));
	if (!t) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		goto done;
	}
	t->lu = lu;
	t->nranges = pt->nranges;
	t->lo = UINT64_MAX;
	for (uint32_t i = 0; i < pt->nranges; i++) {
		t->r[i] = pt->r[i];
		t->blocks += pt->r[i].n;
		if (pt->r[i].n) {
			t->lo = MIN(t->lo, pt->r[i].lba);
			t->hi = MAX(t->hi, pt->r[i].lba + pt->r[i].n);
		}
	}
	t->timeout_ms = (pt->timeout ? pt->timeout : ROD_DEFAULT_TIMEOUT) * 1000u;
	if (cmd->nexus)
		snprintf(t->target, sizeof(t->target), "%s", cmd->nexus->target_name);
	uint64_t now = rod_clock_ms();
	t->made = t->used = now;
	t->state = TOK_LIVE;

	pthread_mutex_lock(&rod.mu);
	struct rod_held *h = NULL;
	if (cmd->nexus && !(h = held_take(cmd, get_be32(cmd->cdb + 6), ROD_SA_PT))) {
		pthread_mutex_unlock(&rod.mu);
		goto done;
	}
	if (!rod.next_id && chap_random(&rod.next_id, sizeof(rod.next_id)))
		rod.next_id = now;
	t->id = rod.next_id++;
	/* Point-in-time types asked for get one of ours: change vulnerable; otherwise access upon reference. */
	uint32_t type = pt->rtv && pt->rod_type != ROD_TYPE_AUR ? ROD_TYPE_PIT_VULN : ROD_TYPE_AUR;
	if (!make_room(lu, now) || !tok_bytes(t, cmd, type)) {
		if (h)
			held_free(h);
		pthread_mutex_unlock(&rod.mu);
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_NO_RESOURCES_FOR_TOKEN);
		goto done;
	}
	t->next = rod.all;
	rod.all = t;
	rod.ntokens++;
	t->lu_next = lu->rod_list;
	lu->rod_list = t;
	lu_tokens_set(lu, lu->rod_tokens + 1);
	if (h) {
		held_result(h, cmd, COS_GOOD, t->blocks);
		h->has_token = true;
		memcpy(h->token, t->bytes, ROD_TOKEN_LEN);
	}
	t = NULL;
	pthread_mutex_unlock(&rod.mu);
done:
	free(t);
	free(pt);
	scsi_cmd_complete(cmd);
}

/* ---- WRITE USING TOKEN ---- */

struct rod_job {
	struct copy_job c;            /* first: the engine's part */
	struct rod_token *tok;        /* NULL: the block device zero ROD token */
	struct rod_held *held;
	bool del_tkn;
	uint64_t want;                /* blocks the destination ranges ask for */
	uint32_t nseg;
	struct copy_seg seg[2 * ROD_MAX_RANGES];
};

bool rod_prep_wut(struct scsi_cmd *cmd)
{
	return prep_list(cmd, ROD_WUT_HDR + ROD_RANGE_LEN, ROD_MAX_WUT_LIST);
}

/* The LU is one this nexus sees (its LUN map; without one only the addressed LU). */
static bool lu_mapped(const struct scsi_cmd *cmd, const struct scsi_lu *lu)
{
	const struct scsi_lun_map *m = cmd->lun_map;

	if (lu == cmd->lu)
		return true;
	if (!m || !m->lu_at)
		return false;
	for (uint32_t i = 0; i < m->count; i++) {
		bool ro;
		if (m->lu_at(m, i, &ro) == lu)
			return true;
	}
	return false;
}

static void token_err(struct scsi_cmd *cmd, uint8_t why)
{
	sense_set_field(cmd, SK_ILLEGAL_REQUEST, ASC_TOKEN(why), false, 16, -1);
}

/*
 * Under the mutex: the table's token for these 512 bytes, usable by this
 * command, or NULL with sense set.
 */
static struct rod_token *tok_find(struct scsi_cmd *cmd, const uint8_t *b, uint64_t now)
{
	uint64_t id = get_be64(b + T_ID);
	struct rod_token *t;

	for (t = rod.all; t && !(t->id == id && t->state == TOK_LIVE); t = t->next)
		;
	if (!t) {
		/* Gone: say why, if the secret says it is that token. */
		for (uint32_t i = 0; i < ROD_GONE_MAX; i++) {
			const struct rod_gone *g = &rod.gone[i];
			if (g->why && g->id == id) {
				token_err(cmd, chap_equal(g->secret, b + T_SECRET, SECRET_LEN) ? g->why : TOK_CORRUPT);
				return NULL;
			}
		}
		token_err(cmd, TOK_UNKNOWN);
		return NULL;
	}
	if (!chap_equal(t->bytes, b, ROD_TOKEN_LEN)) {
		token_err(cmd, TOK_CORRUPT);
		return NULL;
	}
	if (tok_expired(t, now)) {
		tok_kill(t, TOK_EXPIRED);
		token_err(cmd, TOK_EXPIRED);
		return NULL;
	}
	if (strcmp(t->target, cmd->nexus ? cmd->nexus->target_name : "")) {
		token_err(cmd, TOK_REMOTE);   /* made through another target of this process */
		return NULL;
	}
	/* A token reads only what this nexus could read itself. */
	if (!lu_mapped(cmd, t->lu)) {
		token_err(cmd, TOK_CAUSE_NOT_REPORTABLE);
		return NULL;
	}
	if (t->lu->block_size != cmd->lu->block_size) {
		sense_invalid_param(cmd, T_CREATOR + 16 + 29, 7);   /* its DISK BLOCK LENGTH is not ours */
		return NULL;
	}
	return t;
}

/* The copy's segments: the ROD from offset on, onto the destination ranges, as far as both go. */
static bool plan(struct rod_job *j, const struct rod_wut *w, struct scsi_cmd *cmd)
{
	const struct rod_token *t = j->tok;
	uint32_t s = 0, d = 0;
	uint64_t soff = w->offset, doff = 0;

	for (uint32_t i = 0; i < w->nranges; i++)
		j->want += w->r[i].n;
	if (!t) {
		for (d = 0; d < w->nranges; d++)
			if (w->r[d].n)
				j->seg[j->nseg++] = (struct copy_seg){ .dst = cmd->lu, .dst_lba = w->r[d].lba,
								       .nblocks = w->r[d].n };
		return true;
	}
	if (w->offset > t->blocks) {
		sense_invalid_param(cmd, 8, 7);
		return false;
	}
	/* Skip the offset. */
	while (s < t->nranges && soff >= t->r[s].n)
		soff -= t->r[s++].n;
	while (s < t->nranges && d < w->nranges) {
		uint64_t n = MIN(t->r[s].n - soff, w->r[d].n - doff);
		if (n) {
			struct copy_seg *g = &j->seg[j->nseg++];
			*g = (struct copy_seg){ .src = t->lu, .dst = cmd->lu, .src_lba = t->r[s].lba + soff,
						.dst_lba = w->r[d].lba + doff, .nblocks = n };
			/* Writing over its own source would change the data it copies. */
			if (t->lu == cmd->lu && ranges_overlap(t->r, t->nranges, g->dst_lba, g->dst_lba + n)) {
				sense_invalid_param(cmd, ROD_WUT_HDR + d * ROD_RANGE_LEN, -1);
				return false;
			}
		}
		soff += n;
		doff += n;
		if (soff == t->r[s].n) {
			s++;
			soff = 0;
		}
		if (doff == w->r[d].n) {
			d++;
			doff = 0;
		}
	}
	return true;
}

static bool wseg(struct copy_job *c, uint32_t k, struct copy_seg *s)
{
	const struct rod_job *j = (const struct rod_job *)c;

	if (k >= j->nseg)
		return false;
	*s = j->seg[k];
	return true;
}

static bool wmay_write(struct copy_job *c)
{
	const struct rod_job *j = (const struct rod_job *)c;

	return !j->tok || __atomic_load_n(&j->tok->state, __ATOMIC_ACQUIRE) == TOK_LIVE;
}

static bool wuses(const struct copy_job *c, const struct scsi_lu *lu)
{
	const struct rod_job *j = (const struct rod_job *)c;

	return j->tok && j->tok->lu == lu;
}

/* Under the mutex: the copy no longer uses its token (deleted on request after a copy that went well). */
static void tok_release(struct rod_token *t, bool del)
{
	if (!t)
		return;
	t->busy--;
	t->used = rod_clock_ms();
	if (t->state == TOK_LIVE) {
		if (del)
			tok_kill(t, TOK_DELETED);   /* freed there unless another copy still reads it */
	} else if (!t->busy) {
		tok_free(t);                     /* died while copies read it: the last one frees it */
	}
}

static void wend(struct copy_job *c)
{
	struct rod_job *j = (struct rod_job *)c;
	struct scsi_cmd *cmd = c->cmd;
	uint8_t cos = COS_ERROR;

	if (cmd->stop) {
		cmd->status = SCSI_TASK_ABORTED;
		cmd->sense_len = 0;
		cos = COS_TERMINATED;
	} else if (c->vetoed) {
		/* The token died under the copy: cancelled by a write, revoked by a reset. */
		sense_set(cmd, SK_COPY_ABORTED, ASC_TOKEN(__atomic_load_n(&j->tok->state, __ATOMIC_ACQUIRE)));
	} else if (c->unready == cmd->lu) {
		/* This LU is being sanitized: what any command to it gets (SBC-4 4.11). */
		lu_sanitize_refuse(cmd, c->unready_state);
	} else if (c->unready) {
		sense_set(cmd, SK_COPY_ABORTED, ASC_COPY_TARGET_NOT_REACHABLE);   /* the token's LU */
	} else if (c->failed) {
		sense_set(cmd, SK_COPY_ABORTED, ASC_THIRD_PARTY_DEVICE_FAILURE);
	} else if (c->nomem) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
	} else {
		cos = c->blocks_done < j->want ? COS_RESIDUAL : COS_GOOD;
	}
	pthread_mutex_lock(&rod.mu);
	tok_release(j->tok, j->del_tkn && cos != COS_ERROR && cos != COS_TERMINATED);
	struct rod_held *h = j->held;
	if (h) {
		h->job = NULL;
		if (h->orphan)
			held_free(h);
		else
			held_result(h, cmd, cos, c->blocks_done);
	}
	pthread_mutex_unlock(&rod.mu);
	free(j);
	scsi_cmd_complete(cmd);
}

static const struct copy_ops wut_ops = { .seg = wseg, .may_write = wmay_write, .end = wend, .uses_lu = wuses };

void rod_wut(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;
	uint32_t plen = cmd->state;
	struct rod_wut *w = malloc(sizeof(*w));
	struct rod_job *j = calloc(1, sizeof(*j));
	struct rod_err e;

	if (!w || !j) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		goto refused;
	}
	if (cmd->dout_len < plen) {
		sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
		goto refused;
	}
	if (rod_parse_wut(cmd->buf->data, plen, lu_nblocks(lu), max_blocks(lu), w, &e)) {
		set_err(cmd, &e);
		goto refused;
	}
	j->c.cmd = cmd;
	j->c.ops = &wut_ops;
	j->del_tkn = w->del_tkn;
	const uint8_t *b = w->token;
	uint32_t type = get_be32(b + T_TYPE);
	if (type != ROD_TYPE_ZERO && type != ROD_TYPE_AUR && type != ROD_TYPE_PIT_VULN) {
		token_err(cmd, TOK_UNSUPPORTED_TYPE);
		goto refused;
	}
	if (get_be16(b + T_LEN) != ROD_TOKEN_LEN_FIELD) {
		token_err(cmd, TOK_BAD_LENGTH);
		goto refused;
	}
	pthread_mutex_lock(&rod.mu);
	if (type != ROD_TYPE_ZERO && !(j->tok = tok_find(cmd, b, rod_clock_ms()))) {
		pthread_mutex_unlock(&rod.mu);
		goto refused;
	}
	if (!plan(j, w, cmd)) {
		pthread_mutex_unlock(&rod.mu);
		goto refused;
	}
	if (j->tok) {
		j->tok->busy++;
		j->tok->used = rod_clock_ms();
	}
	pthread_mutex_unlock(&rod.mu);

	/* The source as a READ from this nexus would find it (the destination was checked as a write). */
	struct scsi_lu *src = j->tok ? j->tok->lu : NULL;
	if (src && src != lu && copy_lu_unready(src)) {
		sense_set(cmd, SK_COPY_ABORTED, ASC_COPY_TARGET_NOT_REACHABLE);
		goto release;
	}
	if (src && src != lu && copy_pr_blocks(src, cmd->nexus, SCSI_OP_READ16)) {
		cmd->status = SCSI_RESERVATION_CONFLICT;
		cmd->sense_len = 0;
		goto release;
	}
	if (cmd->nexus) {
		pthread_mutex_lock(&rod.mu);
		j->held = held_take(cmd, get_be32(cmd->cdb + 6), ROD_SA_WUT);
		if (j->held)
			j->held->job = j;
		pthread_mutex_unlock(&rod.mu);
		if (!j->held)
			goto release;
	}
	free(w);
	/* The Data-Out buffer is not needed any more: the pool gets it back before the copy takes chunks. */
	bufpool_put(cmd->buf);
	cmd->buf = NULL;
	copy_start(&j->c);
	return;
release:
	pthread_mutex_lock(&rod.mu);
	tok_release(j->tok, false);
	pthread_mutex_unlock(&rod.mu);
refused:
	free(w);
	free(j);
	scsi_cmd_complete(cmd);
}

/* ---- RECEIVE ROD TOKEN INFORMATION ---- */

void rod_rrti(struct scsi_cmd *cmd)
{
	uint32_t alloc = get_be32(cmd->cdb + 10), list_id = get_be32(cmd->cdb + 2);
	struct rod_held *copy = malloc(sizeof(*copy)), *h = NULL;

	if (!copy) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		scsi_cmd_complete(cmd);
		return;
	}
	pthread_mutex_lock(&rod.mu);
	for (h = cmd->nexus ? rod.held : NULL; h; h = h->next)
		if (h->lu == cmd->lu && h->nexus == cmd->nexus->id && h->list_id == list_id)
			break;
	if (h) {
		*copy = *h;
		if (h->job) {
			copy->cos = COS_RUNNING;
			copy->count = __atomic_load_n(&h->job->c.blocks_done, __ATOMIC_RELAXED);
		} else {
			held_free(h);   /* reported once */
		}
	}
	pthread_mutex_unlock(&rod.mu);
	if (!h) {
		/* No operation of that list identifier runs or is held for this nexus. */
		sense_invalid_cdb(cmd, 2, 7);
		free(copy);
		scsi_cmd_complete(cmd);
		return;
	}
	uint32_t tok = copy->has_token ? 2 + ROD_TOKEN_LEN : 0;
	uint32_t len = RRTI_HDR + copy->sense_len + 4 + tok;
	uint8_t *d = calloc(1, len);
	if (!d) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
	} else {
		put_be32(d, len - 4);
		d[4] = copy->sa;
		d[5] = copy->cos;
		put_be32(d + 8, copy->job ? RRTI_POLL_MS : 0);
		d[12] = copy->job ? 0 : copy->status;
		d[13] = copy->sense_len;
		d[14] = copy->sense_len;
		d[15] = TC_UNITS_BLOCKS;
		put_be64(d + 16, copy->count);
		memcpy(d + RRTI_HDR, copy->sense, copy->sense_len);
		put_be32(d + RRTI_HDR + copy->sense_len, tok);
		if (tok)
			memcpy(d + RRTI_HDR + copy->sense_len + 4 + 2, copy->token, ROD_TOKEN_LEN);
		scsi_cmd_din(cmd, d, len, alloc);
	}
	free(d);
	free(copy);
	scsi_cmd_complete(cmd);
}

/* ---- hooks ---- */

void rod_cmd_writes_slow(struct scsi_cmd *cmd)
{
	struct scsi_lu *lu = cmd->lu;

	switch (cmd->cdb[0]) {
	case SCSI_OP_WRITE6: case SCSI_OP_WRITE10: case SCSI_OP_WRITE12: case SCSI_OP_WRITE16:
	case SCSI_OP_WRITE_VERIFY10: case SCSI_OP_WRITE_VERIFY12: case SCSI_OP_WRITE_VERIFY16:
	case SCSI_OP_WRITE_SAME10: case SCSI_OP_WRITE_SAME16: case SCSI_OP_COMPARE_AND_WRITE:
	case SCSI_OP_ORWRITE16: case SCSI_OP_WRITE_ATOMIC16:
		/* prepare left the blocks it writes in lba and nblocks. */
		rod_will_write(lu, cmd->lba, cmd->nblocks);
		return;
	case SCSI_OP_EXTENDED_COPY:
		return;   /* the copy engine cancels as it writes each chunk */
	case SCSI_OP_UNMAP:
		if (cmd->buf && cmd->dout_len >= 8) {
			uint32_t count = MIN((uint32_t)get_be16(cmd->buf->data + 2), cmd->dout_len - 8) / 16;
			for (uint32_t i = 0; i < count; i++) {
				const uint8_t *d = cmd->buf->data + 8 + 16 * i;
				rod_will_write(lu, get_be64(d), get_be32(d + 8));
			}
		}
		return;
	default:
		/* SANITIZE, and whatever else changes the medium: all of it. */
		rod_will_write(lu, 0, UINT64_MAX);
		return;
	}
}

/* ---- VPD 8Fh ---- */

void rod_vpd_limits(struct scsi_cmd *cmd, struct din *d)
{
	const struct scsi_lu *lu = cmd->lu;

	if (!rod_supported(lu))
		return;
	din_be16(d, 0x0000);   /* Block Device ROD Token Limits (SBC-3 6.6.x) */
	din_be16(d, 0x20);
	din_zero(d, 6);
	din_be16(d, ROD_MAX_RANGES);
	din_be32(d, ROD_MAX_TIMEOUT);
	din_be32(d, ROD_DEFAULT_TIMEOUT);
	din_be64(d, ROD_MAX_BYTES >> lu->block_shift);      /* MAXIMUM TOKEN TRANSFER SIZE */
	din_be64(d, ROD_OPTIMAL_BYTES >> lu->block_shift);  /* OPTIMAL TRANSFER COUNT */
}

void rod_vpd_features(struct scsi_cmd *cmd, struct din *d)
{
	static const struct {
		uint32_t type;
		uint8_t flags;   /* TOKEN_IN (1), TOKEN_OUT (0) */
	} types[] = { { ROD_TYPE_AUR, 0x03 }, { ROD_TYPE_PIT_VULN, 0x03 }, { ROD_TYPE_ZERO, 0x02 } };

	if (!rod_supported(cmd->lu))
		return;
	/* ROD Token Features (SPC-4 7.8.17.x): no remote tokens; one block device descriptor. */
	din_be16(d, 0x0106);
	din_be16(d, 44 + 48);
	din_u8(d, 0);                      /* REMOTE TOKENS: none */
	din_zero(d, 11);
	din_be32(d, 1);                    /* MINIMUM TOKEN LIFETIME */
	din_be32(d, ROD_MAX_LIFETIME);     /* MAXIMUM TOKEN LIFETIME */
	din_be32(d, ROD_MAX_TIMEOUT);      /* MAXIMUM TOKEN INACTIVITY TIMEOUT */
	din_zero(d, 18);
	din_be16(d, 48);                   /* ROD DEVICE TYPE SPECIFIC FEATURES DESCRIPTORS LENGTH */
	din_u8(d, 0x00);                   /* block device */
	din_u8(d, 0);
	din_be16(d, 44);
	din_zero(d, 2);
	din_be16(d, 1);                    /* OPTIMAL BLOCK ROD LENGTH GRANULARITY (VPD B0h's granularity) */
	din_be64(d, ROD_MAX_BYTES);        /* MAXIMUM BYTES IN BLOCK ROD */
	din_be64(d, ROD_OPTIMAL_BYTES);    /* OPTIMAL BYTES IN BLOCK ROD TRANSFER */
	din_be64(d, ROD_MAX_BYTES);        /* OPTIMAL BYTES TO TOKEN PER SEGMENT: a token costs no copy */
	din_be64(d, ROD_OPTIMAL_BYTES);    /* OPTIMAL BYTES FROM TOKEN PER SEGMENT */
	din_zero(d, 8);

	/* Supported ROD Types. */
	din_be16(d, 0x0108);
	din_be16(d, (uint16_t)(4 + 64 * ARRAY_SIZE(types)));
	din_zero(d, 2);
	din_be16(d, (uint16_t)(64 * ARRAY_SIZE(types)));
	for (size_t i = 0; i < ARRAY_SIZE(types); i++) {
		din_be32(d, types[i].type);
		din_u8(d, types[i].flags);
		din_u8(d, 0);
		din_be16(d, 0);                /* PREFERENCE INDICATION */
		din_zero(d, 56);
	}
}
