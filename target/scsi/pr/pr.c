/*
 * Reservations of one LU (SPC-2 RESERVE/RELEASE, SPC-4 persistent
 * reservations).  Registrations are per I_T nexus, named by the initiator
 * port and target port strings of struct scsi_nexus, so they survive the
 * session that made them (iSCSI keeps the I_T nexus across reconnects).
 *
 * Choices a reader should know:
 * - APTPL (PTPL_C=1) when the LU has a state file (pr_persist_init): while
 *   the last APTPL bit received is 1, every PR OUT that succeeds rewrites the
 *   file before it completes, under the LU mutex, so no initiator ever sees a
 *   state that is not on disk; a failed write undoes the command.  Without a
 *   state file APTPL=1 is refused (INVALID FIELD IN PARAMETER LIST).
 *   The generation restarts at 0 (SPC-4: set to zero by a power on).
 * - CRH=1: RESERVE/RELEASE from a PR holder (or a registrant under a
 *   registrants-only / all-registrants reservation) succeed without effect.
 * - SIP_C and ATP_C are supported.
 */
#include "target/scsi/pr/pr.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/bufpool.h"
#include "common/log.h"
#include "common/proto/scsi_proto.h"
#include "common/util.h"
#include "target/scsi/lu/din.h"
#include "target/scsi/lu/sense.h"
#include "target/scsi/pr/pr_state.h"
#include "target/scsi/scsi.h"

#define PR_MAX_REGS PR_STATE_MAX_REGS
#define PR_ASC_INVALID_RELEASE 0x2604 /* INVALID RELEASE OF PERSISTENT RESERVATION */
#define PR_BASIC_LEN 24
#define PR_TID_ISCSI 0x5

enum { PR_WE = 1, PR_EA = 3, PR_WE_RO = 5, PR_EA_RO = 6, PR_WE_AR = 7, PR_EA_AR = 8 };

/* Parameter list flag bits (byte 20 of the basic list, byte 17 of REGISTER AND MOVE). */
#define PR_SPEC_I_PT 0x08
#define PR_ALL_TG_PT 0x04
#define PR_APTPL 0x01
#define PR_UNREG 0x02

struct pr_reg {
	struct pr_reg *next;
	uint64_t key;
	char iport[256]; /* initiator port; the bare name when !has_isid */
	char iname[224];
	char tport[256];
	uint16_t rtpi;
	bool all_tg_pt;
	bool has_isid;
};

/* An initiator named by a TransportID. */
struct pr_it {
	char iport[256];
	char iname[224];
	bool has_isid;
};

struct scsi_pr {
	pr_ua_fn ua;
	void *ua_ctx;
	pr_abort_fn abort;
	void *abort_ctx;

	struct pr_reg *regs; /* in registration order, which READ KEYS reports */
	unsigned nregs;
	uint32_t generation;

	bool reserved;
	uint8_t type;
	struct pr_reg *holder; /* NULL for all-registrants types: every registrant holds */

	bool res2; /* SPC-2 reservation */
	/* reserved || res2, written with them and read without the LU's mutex (pr_active). */
	bool active;
	char res2_iport[256];
	char res2_tport[256];

	/* Unit attentions collected during one command, sent once the state is final. */
	struct pr_note *notes;
	unsigned nnotes, notes_cap;

	/* A copy a change is tried on: notes stay for pr_take_notes instead of going out. */
	bool keep_notes;
	/* The state is shared, and persistent where it is kept (share.c): APTPL without a file. */
	bool shared;

	/* APTPL: the state file (NULL: APTPL not offered), the LU's identity it records. */
	char *state_path;
	char serial[65], naa[33], name[64];
	bool aptpl;            /* the last APTPL bit of a REGISTER / REGISTER AND MOVE that succeeded */
	char *saved;           /* the text last written, to skip rewriting an unchanged state */
};

struct scsi_pr *pr_create(pr_ua_fn ua, void *ua_ctx)
{
	struct scsi_pr *pr = calloc(1, sizeof(*pr));

	if (!pr)
		return NULL;
	pr->ua = ua;
	pr->ua_ctx = ua_ctx;
	return pr;
}

static void pr_free_regs(struct scsi_pr *pr)
{
	while (pr->regs) {
		struct pr_reg *r = pr->regs;

		pr->regs = r->next;
		free(r);
	}
	pr->nregs = 0;
	pr->holder = NULL;
}

void pr_destroy(struct scsi_pr *pr)
{
	if (!pr)
		return;
	pr_free_regs(pr);
	free(pr->notes);
	free(pr->state_path);
	free(pr->saved);
	free(pr);
}

void pr_set_abort(struct scsi_pr *pr, pr_abort_fn abort, void *ctx)
{
	pr->abort = abort;
	pr->abort_ctx = ctx;
}

/* ---- registrations ---- */

static bool pr_type_valid(uint8_t t)
{
	return t == PR_WE || t == PR_EA || t == PR_WE_RO || t == PR_EA_RO || t == PR_WE_AR || t == PR_EA_AR;
}

static bool pr_type_ar(uint8_t t) { return t == PR_WE_AR || t == PR_EA_AR; }
static bool pr_type_ro(uint8_t t) { return t == PR_WE_RO || t == PR_EA_RO; }
static bool pr_type_we(uint8_t t) { return t == PR_WE || t == PR_WE_RO || t == PR_WE_AR; }

static bool pr_reg_matches(const struct pr_reg *r, const struct scsi_nexus *n)
{
	bool init = r->has_isid ? strcasecmp(r->iport, n->initiator_port) == 0
				: strcasecmp(r->iname, n->initiator_name) == 0;

	return init && (r->all_tg_pt || strcasecmp(r->tport, n->target_port) == 0);
}

static struct pr_reg *pr_find(const struct scsi_pr *pr, const struct scsi_nexus *n)
{
	for (struct pr_reg *r = pr->regs; r; r = r->next)
		if (pr_reg_matches(r, n))
			return r;
	return NULL;
}

static bool pr_is_holder(const struct scsi_pr *pr, const struct pr_reg *r)
{
	return r && pr->reserved && (pr_type_ar(pr->type) || pr->holder == r);
}

static void pr_active_sync(struct scsi_pr *pr)
{
	__atomic_store_n(&pr->active, pr->reserved || pr->res2, __ATOMIC_RELEASE);
}

bool pr_active(const struct scsi_pr *pr)
{
	return __atomic_load_n(&pr->active, __ATOMIC_ACQUIRE);
}

static void pr_set_reservation(struct scsi_pr *pr, struct pr_reg *r, uint8_t type)
{
	pr->reserved = true;
	pr_active_sync(pr);
	pr->type = type;
	pr->holder = pr_type_ar(type) ? NULL : r;
}

static void pr_clear_reservation(struct scsi_pr *pr)
{
	pr->reserved = false;
	pr_active_sync(pr);
	pr->type = 0;
	pr->holder = NULL;
}

static struct pr_reg *pr_add(struct scsi_pr *pr, const struct pr_it *it, const struct scsi_nexus *n,
			     uint64_t key, bool all_tg_pt)
{
	struct pr_reg *r = calloc(1, sizeof(*r)), **tail;

	if (!r)
		return NULL;
	r->key = key;
	snprintf(r->iport, sizeof(r->iport), "%s", it->iport);
	snprintf(r->iname, sizeof(r->iname), "%s", it->iname);
	r->has_isid = it->has_isid;
	snprintf(r->tport, sizeof(r->tport), "%s", n->target_port);
	r->rtpi = n->rel_port_id;
	r->all_tg_pt = all_tg_pt;
	for (tail = &pr->regs; *tail; tail = &(*tail)->next)
		;
	*tail = r;
	pr->nregs++;
	return r;
}

/*
 * Unlink and free.  A reservation never outlives its holder: losing the
 * holder (or the last all-registrants registrant) releases it; callers
 * that move or preempt set the new reservation afterwards.
 */
static void pr_unlink(struct scsi_pr *pr, struct pr_reg *r)
{
	for (struct pr_reg **pp = &pr->regs; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			pr->nregs--;
			break;
		}
	}
	if (pr->holder == r)
		pr_clear_reservation(pr);
	free(r);
	if (pr->reserved && pr_type_ar(pr->type) && pr->nregs == 0)
		pr_clear_reservation(pr);
}

static void pr_it_from_nexus(struct pr_it *it, const struct scsi_nexus *n)
{
	snprintf(it->iport, sizeof(it->iport), "%s", n->initiator_port);
	snprintf(it->iname, sizeof(it->iname), "%s", n->initiator_name);
	it->has_isid = true;
}

/* ---- unit attentions ---- */

static void pr_note(struct scsi_pr *pr, const struct pr_reg *r, const struct scsi_nexus *issuer,
		    uint16_t asc, bool abort)
{
	struct pr_note *nt;

	if (issuer && pr_reg_matches(r, issuer))
		return;
	for (unsigned i = 0; i < pr->nnotes; i++) {
		nt = &pr->notes[i];
		if (nt->asc == asc && strcasecmp(nt->port, r->iport) == 0) {
			nt->abort |= abort;
			return;
		}
	}
	if (pr->nnotes == pr->notes_cap) {
		unsigned cap = pr->notes_cap ? pr->notes_cap * 2 : 8;
		struct pr_note *p = realloc(pr->notes, cap * sizeof(*p));

		if (!p) {
			/* Better a duplicate unit attention than a lost one. */
			if (abort && pr->abort)
				pr->abort(pr->abort_ctx, r->iport);
			if (pr->ua)
				pr->ua(pr->ua_ctx, r->iport, asc);
			return;
		}
		pr->notes = p;
		pr->notes_cap = cap;
	}
	nt = &pr->notes[pr->nnotes++];
	snprintf(nt->port, sizeof(nt->port), "%s", r->iport);
	nt->asc = asc;
	nt->abort = abort;
}

static void pr_note_all(struct scsi_pr *pr, const struct scsi_nexus *issuer, uint16_t asc)
{
	for (struct pr_reg *r = pr->regs; r; r = r->next)
		pr_note(pr, r, issuer, asc, false);
}

void pr_deliver(struct scsi_pr *pr, const struct pr_note *notes, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (notes[i].abort && pr->abort)
			pr->abort(pr->abort_ctx, notes[i].port);
		if (pr->ua)
			pr->ua(pr->ua_ctx, notes[i].port, notes[i].asc);
	}
}

static void pr_flush_notes(struct scsi_pr *pr)
{
	if (pr->keep_notes)
		return;
	pr_deliver(pr, pr->notes, pr->nnotes);
	pr->nnotes = 0;
}

/* ---- TransportIDs (iSCSI only, SPC-4 7.6.4.6) ---- */

/* Parse one TransportID at t (len bytes available); returns its length or -1. */
static int pr_parse_tid(const uint8_t *t, uint32_t len, struct pr_it *it)
{
	uint32_t total;
	size_t n;
	const char *s, *sep;

	if (len < 4 || (t[0] & 0x0f) != PR_TID_ISCSI || (t[0] >> 6) > 1)
		return -1;
	total = 4u + get_be16(t + 2);
	if (total > len || total <= 4)
		return -1;
	s = (const char *)t + 4;
	n = strnlen(s, total - 4);
	if (n == 0 || n == total - 4 || n >= sizeof(it->iport))
		return -1;
	memset(it, 0, sizeof(*it));
	memcpy(it->iport, s, n);
	if ((t[0] >> 6) == 0) {
		if (n >= sizeof(it->iname))
			return -1;
		memcpy(it->iname, s, n);
		it->has_isid = false;
		return (int)total;
	}
	sep = strcasestr(it->iport, ",i,0x");
	if (!sep || sep == it->iport || (size_t)(sep - it->iport) >= sizeof(it->iname))
		return -1;
	if (strlen(sep + 5) != 12 || strspn(sep + 5, "0123456789abcdefABCDEF") != 12)
		return -1;
	memcpy(it->iname, it->iport, (size_t)(sep - it->iport));
	it->has_isid = true;
	return (int)total;
}

/* r's TransportID (SPC-4 7.6.4.6), at least the 24 bytes the format requires; returns its length. */
static uint32_t pr_put_tid(struct din *d, const struct pr_reg *r)
{
	const char *s = r->has_isid ? r->iport : r->iname;
	size_t n = strlen(s) + 1;
	uint32_t padded = (uint32_t)((n + 3) & ~(size_t)3);

	if (padded < 20)
		padded = 20;
	din_u8(d, (uint8_t)((r->has_isid ? 0x40 : 0x00) | PR_TID_ISCSI));
	din_u8(d, 0);
	din_be16(d, (uint16_t)padded);
	din_put(d, s, n - 1);
	din_zero(d, padded - (n - 1));
	return 4 + padded;
}

/* ---- common outcomes ---- */

static void pr_conflict_status(struct scsi_cmd *cmd)
{
	cmd->status = SCSI_RESERVATION_CONFLICT;
	cmd->sense_len = 0;
}

static void pr_plle(struct scsi_cmd *cmd)
{
	sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_PARAM_LIST_LENGTH_ERROR);
}

static bool pr_res2_is(const struct scsi_pr *pr, const struct scsi_nexus *n)
{
	return pr->res2 && strcasecmp(pr->res2_iport, n->initiator_port) == 0 &&
	       strcasecmp(pr->res2_tport, n->target_port) == 0;
}

/* ---- conflicts (SPC-4 table 63, SBC-3 table 13; SPC-2 5.5.1) ---- */

enum pr_class { PRC_ALLOWED, PRC_READ, PRC_WRITE, PRC_OWN };

static enum pr_class pr_classify(const uint8_t *cdb)
{
	switch (cdb[0]) {
	case SCSI_OP_TEST_UNIT_READY:
	case SCSI_OP_REQUEST_SENSE:
	case SCSI_OP_INQUIRY:
	case SCSI_OP_READ_CAPACITY10:
	case SCSI_OP_LOG_SENSE:
	case SCSI_OP_ACCESS_CONTROL_IN:
	case SCSI_OP_ACCESS_CONTROL_OUT:
	case SCSI_OP_REPORT_LUNS:
		return PRC_ALLOWED;
	case SCSI_OP_PR_IN:
	case SCSI_OP_PR_OUT: /* table 64 is applied by pr_out */
	case SCSI_OP_RESERVE6: case SCSI_OP_RESERVE10:
	case SCSI_OP_RELEASE6: case SCSI_OP_RELEASE10: /* CRH rules in pr_reserve/pr_release */
		return PRC_OWN;
	case SCSI_OP_PREVENT_ALLOW: /* only PREVENT=0 passes */
		return (cdb[4] & 0x03) ? PRC_WRITE : PRC_ALLOWED;
	case SCSI_OP_START_STOP_UNIT: /* only START=1 with no power condition passes */
		return ((cdb[4] & 0x01) && !(cdb[4] & 0xf0)) ? PRC_ALLOWED : PRC_WRITE;
	case SCSI_OP_SERVICE_ACTION_IN16:
		switch (cdb[1] & 0x1f) {
		case SCSI_SAI_READ_CAPACITY16: return PRC_ALLOWED;
		case SCSI_SAI_GET_LBA_STATUS:
		case SCSI_SAI_REPORT_REFERRALS: return PRC_READ;
		default: return PRC_WRITE;
		}
	case SCSI_OP_SERVICE_ACTION_IN12:
		return (cdb[1] & 0x1f) == SCSI_SAI12_READ_MEDIA_SERIAL ? PRC_ALLOWED : PRC_WRITE;
	case SCSI_OP_MAINTENANCE_IN:
		switch (cdb[1] & 0x1f) {
		case SCSI_MI_REPORT_IDENTIFYING_INFO: case SCSI_MI_REPORT_TPGS:
		case SCSI_MI_REPORT_ALIASES: case SCSI_MI_REPORT_PRIORITY:
		case SCSI_MI_REPORT_TIMESTAMP:
			return PRC_ALLOWED;
		case SCSI_MI_REPORT_SUPPORTED_OPCODES: case SCSI_MI_REPORT_SUPPORTED_TMFS:
		case SCSI_MI_MANAGEMENT_PROTOCOL_IN:
			return PRC_READ;
		default:
			return PRC_WRITE;
		}
	case SCSI_OP_READ6: case SCSI_OP_READ10: case SCSI_OP_READ12: case SCSI_OP_READ16:
	case SCSI_OP_VERIFY10: case SCSI_OP_VERIFY12: case SCSI_OP_VERIFY16:
	case SCSI_OP_PREFETCH10: case SCSI_OP_PREFETCH16:
	case SCSI_OP_MODE_SENSE6: case SCSI_OP_MODE_SENSE10:
	case SCSI_OP_READ_BUFFER:
	case SCSI_OP_RECEIVE_DIAGNOSTIC:
	case SCSI_OP_READ_ATTRIBUTE:
	case SCSI_OP_SECURITY_PROTOCOL_IN:
	case SCSI_OP_READ_DEFECT10: case SCSI_OP_READ_DEFECT12:
		return PRC_READ;
	case SCSI_OP_EXTENDED_COPY:   /* POPULATE TOKEN reads; the other service actions write */
		return (cdb[1] & 0x1f) == 0x10 ? PRC_READ : PRC_WRITE;
	case SCSI_OP_RECEIVE_COPY_RESULTS:   /* RECEIVE ROD TOKEN INFORMATION: the nexus's own results */
		return (cdb[1] & 0x1f) == 0x07 ? PRC_ALLOWED : PRC_WRITE;
	case SCSI_OP_VARIABLE_LENGTH:
		if (get_be16(cdb + 8) == SCSI_VL_READ32 || get_be16(cdb + 8) == SCSI_VL_VERIFY32)
			return PRC_READ;
		return PRC_WRITE;
	default:
		/* Writes and anything unknown: only holders (and registrants where the type allows). */
		return PRC_WRITE;
	}
}

static bool pr_conflict_spc2(const struct scsi_pr *pr, const struct scsi_nexus *n, const uint8_t *cdb)
{
	switch (cdb[0]) {
	case SCSI_OP_PR_IN:
	case SCSI_OP_PR_OUT:
		/* SPC-2 5.5.1: PR IN/OUT conflict with a RESERVE from any nexus. */
		return true;
	case SCSI_OP_INQUIRY:
	case SCSI_OP_REQUEST_SENSE:
	case SCSI_OP_REPORT_LUNS:
	case SCSI_OP_RELEASE6: case SCSI_OP_RELEASE10: /* RELEASE from a non-holder is a no-op */
		return false;
	default:
		return !pr_res2_is(pr, n);
	}
}

bool pr_conflict(struct scsi_pr *pr, const struct scsi_nexus *nexus, const uint8_t *cdb)
{
	enum pr_class c;
	struct pr_reg *r;

	if (pr->res2)
		return pr_conflict_spc2(pr, nexus, cdb);
	if (!pr->reserved)
		return false;
	c = pr_classify(cdb);
	if (c == PRC_ALLOWED || c == PRC_OWN)
		return false;
	r = pr_find(pr, nexus);
	if (pr_is_holder(pr, r))
		return false;
	/* Registrants share access under registrants-only and all-registrants types. */
	if (r && (pr_type_ro(pr->type) || pr_type_ar(pr->type)))
		return false;
	if (c == PRC_READ && pr_type_we(pr->type))
		return false;
	return true;
}

/* ---- PERSISTENT RESERVE IN ---- */

/* PR IN builders (SPC-4 6.15). */

static void pr_in_read_keys(const struct scsi_pr *pr, struct din *d)
{
	din_be32(d, pr->generation);
	din_be32(d, 0);   /* additional length, below */
	for (const struct pr_reg *r = pr->regs; r; r = r->next)
		din_be64(d, r->key);
	din_set_be32(d, 4, din_pos(d) - 8);
}

static void pr_in_read_reservation(const struct scsi_pr *pr, struct din *d)
{
	din_be32(d, pr->generation);
	if (!pr->reserved) {
		din_be32(d, 0);
		return;
	}
	din_be32(d, 16);
	/* All-registrants reservations report key zero (SPC-4 6.15.3). */
	din_be64(d, pr->holder ? pr->holder->key : 0);
	din_zero(d, 5);
	din_u8(d, pr->type);   /* scope LU_SCOPE (0) in the high nibble */
	din_zero(d, 2);
}

static void pr_in_report_caps(const struct scsi_pr *pr, struct din *d)
{
	din_be16(d, 8);
	/* CRH, SIP_C, ATP_C, PTPL_C */
	din_u8(d, (uint8_t)(0x10 | 0x08 | 0x04 | (pr->state_path || pr->shared ? 0x01 : 0)));
	/* TMV; ALLOW COMMANDS 001b: TEST UNIT READY passes; PTPL_A */
	din_u8(d, (uint8_t)(0x80 | (1 << 4) | (pr->aptpl ? 0x01 : 0)));
	din_u8(d, 0x80 | 0x40 | 0x20 | 0x08 | 0x02); /* WR_EX_AR EX_AC_RO WR_EX_RO EX_AC WR_EX */
	din_u8(d, 0x01);                             /* EX_AC_AR */
	din_zero(d, 2);
}

static void pr_in_full_status(const struct scsi_pr *pr, struct din *d)
{
	din_be32(d, pr->generation);
	din_be32(d, 0);   /* additional length, below */
	for (const struct pr_reg *r = pr->regs; r; r = r->next) {
		uint32_t at = din_pos(d);
		bool holder = pr_is_holder(pr, r);

		din_be64(d, r->key);
		din_zero(d, 4);
		din_u8(d, (uint8_t)((r->all_tg_pt ? 0x02 : 0) | (holder ? 0x01 : 0)));
		din_u8(d, holder ? pr->type : 0);
		din_zero(d, 4);
		din_be16(d, r->rtpi);
		din_be32(d, 0);   /* additional descriptor length, below */
		din_set_be32(d, at + 20, pr_put_tid(d, r));
	}
	din_set_be32(d, 4, din_pos(d) - 8);
}

static void pr_in_build(struct scsi_cmd *cmd, struct din *d, const void *arg)
{
	const struct scsi_pr *pr = arg;

	switch (cmd->cdb[1] & 0x1f) {
	case SCSI_PRIN_READ_KEYS: pr_in_read_keys(pr, d); break;
	case SCSI_PRIN_READ_RESERVATION: pr_in_read_reservation(pr, d); break;
	case SCSI_PRIN_REPORT_CAPABILITIES: pr_in_report_caps(pr, d); break;
	default: pr_in_full_status(pr, d); break;
	}
}

void pr_in(struct scsi_pr *pr, struct scsi_cmd *cmd)
{
	uint8_t sa = cmd->cdb[1] & 0x1f;

	if (sa > SCSI_PRIN_READ_FULL_STATUS) {
		sense_invalid_cdb(cmd, 1, 4);
		return;
	}
	if (pr->res2) {
		pr_conflict_status(cmd);
		return;
	}
	cmd->status = SCSI_GOOD;
	din_build(cmd, get_be16(cmd->cdb + 7), pr_in_build, pr);
}

/* ---- APTPL: the state as a file ---- */

static int pr_export(const struct scsi_pr *pr, struct pr_state *st)
{
	unsigned i = 0;

	memset(st, 0, sizeof(*st));
	st->holder = -1;
	st->regs = pr->nregs ? calloc(pr->nregs, sizeof(*st->regs)) : NULL;
	if (pr->nregs && !st->regs)
		return -ENOMEM;
	snprintf(st->serial, sizeof(st->serial), "%s", pr->serial);
	snprintf(st->naa, sizeof(st->naa), "%s", pr->naa);
	snprintf(st->backstore, sizeof(st->backstore), "%s", pr->name);
	st->generation = pr->generation;
	st->aptpl = pr->aptpl;
	st->reserved = pr->reserved;
	st->type = pr->type;
	for (const struct pr_reg *r = pr->regs; r; r = r->next, i++) {
		struct pr_state_reg *o = &st->regs[i];

		o->key = r->key;
		snprintf(o->iport, sizeof(o->iport), "%s", r->has_isid ? r->iport : r->iname);
		snprintf(o->tport, sizeof(o->tport), "%s", r->tport);
		o->rtpi = r->rtpi;
		o->all_tg_pt = r->all_tg_pt;
		if (r == pr->holder)
			st->holder = (int)i;
	}
	st->nregs = i;
	return 0;
}

/* Replace registrations and reservation by st's (checked by pr_state_parse); all or nothing. */
static int pr_import(struct scsi_pr *pr, const struct pr_state *st)
{
	struct pr_reg *head = NULL, **tail = &head, *holder = NULL;

	for (unsigned i = 0; i < st->nregs; i++) {
		const struct pr_state_reg *o = &st->regs[i];
		struct pr_reg *r = calloc(1, sizeof(*r));
		size_t nl;

		if (!r || !pr_state_valid_iport(o->iport, &r->has_isid, &nl)) {
			free(r);
			while (head) {
				r = head;
				head = r->next;
				free(r);
			}
			return -ENOMEM;
		}
		r->key = o->key;
		snprintf(r->iport, sizeof(r->iport), "%s", o->iport);
		snprintf(r->iname, sizeof(r->iname), "%.*s", (int)nl, o->iport);
		snprintf(r->tport, sizeof(r->tport), "%s", o->tport);
		r->rtpi = o->rtpi;
		r->all_tg_pt = o->all_tg_pt;
		if ((int)i == st->holder)
			holder = r;
		*tail = r;
		tail = &r->next;
	}
	pr_free_regs(pr);
	pr->regs = head;
	pr->nregs = st->nregs;
	pr->generation = st->generation;
	pr_clear_reservation(pr);
	if (st->reserved)
		pr_set_reservation(pr, holder, st->type);
	return 0;
}

/* After a PR OUT that succeeded with APTPL on (or just turned off): the file follows. */
static int pr_persist(struct scsi_pr *pr)
{
	struct pr_state st;
	char err[PATH_MAX + 160] = "", *text;
	int rc;

	if (!pr->aptpl) {
		rc = pr_state_remove(pr->state_path, err, sizeof(err));
		if (rc)
			log_err("reservations of %s: APTPL state %s: %s", pr->name, pr->state_path, err);
		else {
			free(pr->saved);
			pr->saved = NULL;
		}
		return rc;
	}
	if (pr_export(pr, &st) < 0)
		return -ENOMEM;
	text = pr_state_format(&st);
	pr_state_clear(&st);
	if (!text)
		return -ENOMEM;
	if (strlen(text) > PR_STATE_MAX_BYTES) {
		/* Never write what the next start would refuse to read. */
		log_err("reservations of %s: APTPL state %s would be %zu bytes, more than %u", pr->name,
			pr->state_path, strlen(text), PR_STATE_MAX_BYTES);
		free(text);
		return -EFBIG;
	}
	if (pr->saved && !strcmp(pr->saved, text)) {
		free(text);
		return 0;
	}
	rc = pr_state_write(pr->state_path, text, err, sizeof(err));
	if (rc) {
		log_err("reservations of %s: APTPL state %s: %s", pr->name, pr->state_path, err);
		free(text);
		return rc;
	}
	free(pr->saved);
	pr->saved = text;
	return 0;
}

/*
 * What the state folder held when the first LU looked (backstore name,
 * serial, file), so that an LU without a file of its own can say whether its
 * backstore was saved under another serial.  Read once per process and
 * folder: every LU of a large configuration reading every file would make
 * the start quadratic.  Files written later are for identities in use, not
 * old ones.
 */
#define PR_SCAN_MAX 4096
struct pr_seen {
	char name[64], serial[65], file[48];
};
static pthread_mutex_t pr_scan_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pr_seen *pr_scan;
static unsigned pr_nscan;
static char *pr_scan_dir;

static void pr_scan_folder(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	unsigned seen = 0;

	free(pr_scan);
	pr_scan = NULL;
	pr_nscan = 0;
	if (!d)
		return;
	while ((e = readdir(d)) && seen++ < PR_SCAN_MAX) {
		struct pr_state st;
		char path[PATH_MAX], err[160];
		size_t n = strlen(e->d_name);

		if (strncmp(e->d_name, "pr-", 3) || n < 8 || n >= sizeof(pr_scan->file) ||
		    strcmp(e->d_name + n - 5, ".json") ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path))
			continue;
		if (pr_state_read(path, &st, err, sizeof(err)) == 0 && st.backstore[0]) {
			struct pr_seen *p = realloc(pr_scan, (pr_nscan + 1) * sizeof(*p));

			if (p) {
				pr_scan = p;
				p += pr_nscan++;
				snprintf(p->name, sizeof(p->name), "%s", st.backstore);
				snprintf(p->serial, sizeof(p->serial), "%s", st.serial);
				snprintf(p->file, sizeof(p->file), "%s", e->d_name);
			}
		}
		pr_state_clear(&st);
	}
	closedir(d);
}

/* No state file for this identity: say so if one of this backstore was saved under another serial. */
static void pr_find_moved(const struct scsi_pr *pr, const char *dir)
{
	pthread_mutex_lock(&pr_scan_mu);
	if (!pr_scan_dir || strcmp(pr_scan_dir, dir)) {
		free(pr_scan_dir);
		pr_scan_dir = strdup(dir);
		pr_scan_folder(dir);
	}
	for (unsigned i = 0; i < pr_nscan; i++)
		if (!strcmp(pr_scan[i].name, pr->name) && strcmp(pr_scan[i].serial, pr->serial))
			log_warn("reservations of %s: APTPL state %s/%s was saved for serial \"%s\"; this LU's "
				 "serial is now \"%s\" (a new identity): not applied, the LU starts without "
				 "persistent reservations", pr->name, dir, pr_scan[i].file, pr_scan[i].serial,
				 pr->serial);
	pthread_mutex_unlock(&pr_scan_mu);
}

int pr_persist_init(struct scsi_pr *pr, const char *dir, const char *serial, const char *naa, const char *name)
{
	struct pr_state st;
	char path[PATH_MAX], err[PATH_MAX + 160] = "";
	int rc;

	snprintf(pr->serial, sizeof(pr->serial), "%s", serial);
	snprintf(pr->naa, sizeof(pr->naa), "%s", naa);
	snprintf(pr->name, sizeof(pr->name), "%s", name ? name : serial);
	if ((size_t)snprintf(path, sizeof(path), "%s/pr-%s.json", dir, naa) >= sizeof(path) - 8)
		return -ENAMETOOLONG;
	pr->state_path = strdup(path);
	if (!pr->state_path)
		return -ENOMEM;
	rc = pr_state_read(path, &st, err, sizeof(err));
	if (rc == -ENOENT) {
		pr_find_moved(pr, dir);
		return 0;
	}
	if (rc == -ENOMEM)
		return rc;
	if (rc == -EINVAL) {
		char bad[PATH_MAX + 8];

		snprintf(bad, sizeof(bad), "%s.bad", path);
		log_err("reservations of %s: APTPL state %s is damaged (%s): moved to %s%s; the LU starts "
			"without persistent reservations", pr->name, path, err, bad,
			rename(path, bad) ? " (failed: it stays)" : "");
		return 0;
	}
	if (rc) {
		log_err("reservations of %s: APTPL state %s: %s; the LU starts without persistent reservations",
			pr->name, path, err);
		return 0;
	}
	if (strcmp(st.serial, serial) || strcasecmp(st.naa, naa)) {
		log_warn("reservations of %s: APTPL state %s was saved for serial \"%s\" (NAA %s), this LU is "
			 "serial \"%s\" (NAA %s): not applied, the LU starts without persistent reservations",
			 pr->name, path, st.serial, st.naa, serial, naa);
	} else if (!st.aptpl) {
		log_warn("reservations of %s: APTPL state %s says APTPL is off: not applied", pr->name, path);
	} else if ((rc = pr_import(pr, &st)) == 0) {
		/* SPC-4: a power on sets the generation to zero, whatever APTPL says. */
		pr->generation = 0;
		pr->aptpl = true;
		log_info("reservations of %s: restored %u registration%s%s from %s", pr->name, st.nregs,
			 st.nregs == 1 ? "" : "s", st.reserved ? " and the reservation" : "", path);
	}
	pr_state_clear(&st);
	return rc;
}

/* ---- PERSISTENT RESERVE OUT ---- */

struct pr_out_args {
	struct scsi_cmd *cmd;
	const struct scsi_nexus *n;
	struct pr_reg *reg;   /* the issuer's registration, or NULL */
	const uint8_t *p;     /* parameter list */
	uint32_t plen;
	uint64_t rk, sark;
	uint8_t sa, scope, type;
};

/* Is the initiator named by it already registered on the issuer's target port? */
static bool pr_it_registered(const struct scsi_pr *pr, const struct pr_it *it, const struct scsi_nexus *n)
{
	struct scsi_nexus dn = *n;

	snprintf(dn.initiator_port, sizeof(dn.initiator_port), "%s", it->has_isid ? it->iport : "");
	snprintf(dn.initiator_name, sizeof(dn.initiator_name), "%s", it->iname);
	return pr_find(pr, &dn) != NULL;
}

/* SPEC_I_PT: parse the TransportIDs into *out (caller frees); -1 with sense set. */
static int pr_parse_tids(struct scsi_pr *pr, struct pr_out_args *a, struct pr_it **out, unsigned *count)
{
	uint32_t tlen = get_be32(a->p + 24), off = 0;
	struct pr_it *its = NULL, it;
	unsigned n = 0, cap = 0;

	*out = NULL;
	*count = 0;
	while (off < tlen) {
		int used = pr_parse_tid(a->p + 28 + off, tlen - off, &it);
		bool dup = false;

		if (used < 0)
			goto bad;
		off += (uint32_t)used;
		/* The issuer is registered anyway; naming it again is harmless. */
		if (it.has_isid && strcasecmp(it.iport, a->n->initiator_port) == 0)
			continue;
		for (unsigned i = 0; i < n && !dup; i++)
			dup = its[i].has_isid == it.has_isid && strcasecmp(its[i].iport, it.iport) == 0;
		if (dup || pr_it_registered(pr, &it, a->n))
			goto bad;
		if (n == cap) {
			struct pr_it *p;

			if (pr->nregs + 1 + n >= PR_MAX_REGS) {
				sense_set(a->cmd, SK_ILLEGAL_REQUEST, ASC_INSUFFICIENT_REG_RESOURCES);
				free(its);
				return -1;
			}
			cap = cap ? cap * 2 : 4;
			p = realloc(its, cap * sizeof(*p));
			if (!p) {
				sense_set(a->cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
				free(its);
				return -1;
			}
			its = p;
		}
		its[n++] = it;
	}
	*out = its;
	*count = n;
	return 0;
bad:
	sense_invalid_param(a->cmd, (uint16_t)MIN(28u + off, 0xffffu), -1);
	free(its);
	return -1;
}

/* Register the issuer and, with SPEC_I_PT, every TransportID too: all or nothing. */
static void pr_register_new(struct scsi_pr *pr, struct pr_out_args *a)
{
	bool atp = a->p[20] & PR_ALL_TG_PT;
	struct pr_it self, *its = NULL;
	unsigned nits = 0, i;

	pr_it_from_nexus(&self, a->n);
	if ((a->p[20] & PR_SPEC_I_PT) && pr_parse_tids(pr, a, &its, &nits) < 0)
		return;
	if (pr->nregs + 1 + nits > PR_MAX_REGS) {
		sense_set(a->cmd, SK_ILLEGAL_REQUEST, ASC_INSUFFICIENT_REG_RESOURCES);
		free(its);
		return;
	}
	for (i = 0; i <= nits; i++) {
		if (!pr_add(pr, i ? &its[i - 1] : &self, a->n, a->sark, atp)) {
			/* Undo the partial registration: all or nothing. */
			while (i--) {
				struct pr_reg *last = pr->regs;

				while (last->next)
					last = last->next;
				pr_unlink(pr, last);
			}
			sense_set(a->cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			free(its);
			return;
		}
	}
	pr->generation++;
	free(its);
}

static void pr_unregister(struct scsi_pr *pr, struct pr_out_args *a)
{
	struct pr_reg *r = a->reg;

	bool ro_holder = pr_is_holder(pr, r) && pr_type_ro(pr->type);

	pr_unlink(pr, r);
	if (ro_holder)
		pr_note_all(pr, a->n, ASC_RESERVATIONS_RELEASED);
}

static void pr_do_register(struct scsi_pr *pr, struct pr_out_args *a)
{
	bool ignore = a->sa == SCSI_PROUT_REGISTER_IGNORE;

	if ((a->p[20] & PR_APTPL) && !pr->state_path && !pr->shared) {
		sense_invalid_param(a->cmd, 20, 0);
		return;
	}
	if (!a->reg) {
		if (!ignore && a->rk != 0) {
			pr_conflict_status(a->cmd);
			return;
		}
		if (a->sark == 0)
			return; /* nothing to register, nothing changed */
		pr_register_new(pr, a);
		return;
	}
	if (!ignore && a->rk != a->reg->key) {
		pr_conflict_status(a->cmd);
		return;
	}
	if (a->p[20] & PR_SPEC_I_PT) {
		sense_invalid_param(a->cmd, 20, 3);
		return;
	}
	if (a->sark == 0)
		pr_unregister(pr, a);
	else
		a->reg->key = a->sark;
	pr->generation++;
}

static void pr_do_reserve(struct scsi_pr *pr, struct pr_out_args *a)
{
	if (pr->reserved) {
		/* Re-reserving the same type is a no-op; anything else conflicts. */
		if (!pr_is_holder(pr, a->reg) || pr->type != a->type)
			pr_conflict_status(a->cmd);
		return;
	}
	pr_set_reservation(pr, a->reg, a->type);
}

static void pr_do_release(struct scsi_pr *pr, struct pr_out_args *a)
{
	uint8_t t = pr->type;

	if (!pr_is_holder(pr, a->reg))
		return; /* GOOD, nothing to release */
	if (a->type != pr->type) {
		sense_set(a->cmd, SK_ILLEGAL_REQUEST, PR_ASC_INVALID_RELEASE);
		return;
	}
	pr_clear_reservation(pr);
	if (pr_type_ro(t) || pr_type_ar(t))
		pr_note_all(pr, a->n, ASC_RESERVATIONS_RELEASED);
}

static void pr_do_clear(struct scsi_pr *pr, struct pr_out_args *a)
{
	pr_note_all(pr, a->n, ASC_RESERVATIONS_PREEMPTED);
	pr_clear_reservation(pr);
	pr_free_regs(pr);
	pr->generation++;
}

/* Remove registrations with key, except keep (may be NULL); returns how many. */
static unsigned pr_remove_key(struct scsi_pr *pr, struct pr_out_args *a, uint64_t key,
			      const struct pr_reg *keep, bool abort)
{
	unsigned n = 0;
	struct pr_reg *r = pr->regs, *next;

	for (; r; r = next) {
		next = r->next;
		if (r->key != key || r == keep)
			continue;
		pr_note(pr, r, a->n, ASC_REGISTRATIONS_PREEMPTED, abort);
		pr_unlink(pr, r);
		n++;
	}
	return n;
}

static bool pr_check_scope_type(struct pr_out_args *a)
{
	if (a->scope != 0) {
		sense_invalid_cdb(a->cmd, 2, 7);
		return false;
	}
	if (!pr_type_valid(a->type)) {
		sense_invalid_cdb(a->cmd, 2, 3);
		return false;
	}
	return true;
}

static void pr_do_preempt(struct scsi_pr *pr, struct pr_out_args *a)
{
	bool abort = a->sa == SCSI_PROUT_PREEMPT_ABORT;
	bool all = pr->reserved && pr_type_ar(pr->type);
	bool of_holder = pr->reserved &&
			 ((all && a->sark == 0) || (!all && pr->holder && pr->holder->key == a->sark));

	if (of_holder) {
		/* Preempt the reservation: the issuer becomes the holder (SPC-4 5.13.11.2.4). */
		uint8_t old = pr->type;

		if (!pr_check_scope_type(a))
			return;
		if (all) {
			struct pr_reg *r = pr->regs, *next;

			for (; r; r = next) {
				next = r->next;
				if (r == a->reg)
					continue;
				pr_note(pr, r, a->n, ASC_REGISTRATIONS_PREEMPTED, abort);
				pr_unlink(pr, r);
			}
		} else {
			pr_remove_key(pr, a, a->sark, a->reg, abort);
		}
		pr_set_reservation(pr, a->reg, a->type);
		if (old != a->type)
			pr_note_all(pr, a->n, ASC_RESERVATIONS_RELEASED);
		pr->generation++;
		return;
	}
	/* Only remove registrations; scope and type are ignored (SPC-4 5.13.11.2.3). */
	if (a->sark == 0) {
		sense_invalid_param(a->cmd, 8, -1);
		return;
	}
	if (pr_remove_key(pr, a, a->sark, NULL, abort) == 0) {
		pr_conflict_status(a->cmd);
		return;
	}
	pr->generation++;
}

static void pr_do_move(struct scsi_pr *pr, struct pr_out_args *a)
{
	const uint8_t *p = a->p;
	uint32_t tlen = get_be32(p + 20);
	uint16_t rtpi = get_be16(p + 18);
	struct scsi_nexus dn = *a->n;
	struct pr_it it;
	struct pr_reg *dest;
	int used;

	if ((p[17] & PR_APTPL) && !pr->state_path && !pr->shared) {
		sense_invalid_param(a->cmd, 17, 0);
		return;
	}
	if (!pr->reserved || pr_type_ar(pr->type) || !pr_is_holder(pr, a->reg)) {
		pr_conflict_status(a->cmd);
		return;
	}
	if (a->sark == 0) {
		sense_invalid_param(a->cmd, 8, -1);
		return;
	}
	used = pr_parse_tid(p + 24, tlen, &it);
	if (used < 0) {
		sense_invalid_param(a->cmd, 24, -1);
		return;
	}
	snprintf(dn.initiator_port, sizeof(dn.initiator_port), "%s", it.has_isid ? it.iport : "");
	snprintf(dn.initiator_name, sizeof(dn.initiator_name), "%s", it.iname);
	if (rtpi != a->n->rel_port_id) {
		/* Target port names follow "<target>,t,0x<TPGT>" with TPGT = relative port id. */
		snprintf(dn.target_port, sizeof(dn.target_port), "%s,t,0x%04x", a->n->target_name, rtpi);
		dn.rel_port_id = rtpi;
	}
	if (it.has_isid && strcasecmp(dn.initiator_port, a->n->initiator_port) == 0 &&
	    strcasecmp(dn.target_port, a->n->target_port) == 0) {
		sense_invalid_param(a->cmd, 24, -1); /* moving to itself */
		return;
	}
	dest = pr_find(pr, &dn);
	if (!dest) {
		if (pr->nregs + 1 > PR_MAX_REGS) {
			sense_set(a->cmd, SK_ILLEGAL_REQUEST, ASC_INSUFFICIENT_REG_RESOURCES);
			return;
		}
		dest = pr_add(pr, &it, &dn, a->sark, false);
		if (!dest) {
			sense_set(a->cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
			return;
		}
	}
	dest->key = a->sark;
	pr_set_reservation(pr, dest, pr->type);
	if (p[17] & PR_UNREG)
		pr_unlink(pr, a->reg);
	pr->generation++;
}

/* Parameter list length rules of SPC-4 6.16.3; false when sense was set. */
static bool pr_out_check_len(struct pr_out_args *a, uint32_t avail)
{
	if (a->plen > avail || a->plen < PR_BASIC_LEN) {
		pr_plle(a->cmd);
		return false;
	}
	if (a->sa == SCSI_PROUT_REGISTER_MOVE) {
		if ((uint64_t)PR_BASIC_LEN + get_be32(a->p + 20) > a->plen) {
			pr_plle(a->cmd);
			return false;
		}
		return true;
	}
	if (a->p[20] & PR_SPEC_I_PT) {
		if (a->sa != SCSI_PROUT_REGISTER) {
			sense_invalid_param(a->cmd, 20, 3);
			return false;
		}
		if (a->plen < PR_BASIC_LEN + 4 ||
		    (uint64_t)PR_BASIC_LEN + 4 + get_be32(a->p + 24) > a->plen) {
			pr_plle(a->cmd);
			return false;
		}
		return true;
	}
	if (a->plen != PR_BASIC_LEN) {
		pr_plle(a->cmd);
		return false;
	}
	return true;
}

void pr_out(struct scsi_pr *pr, struct scsi_cmd *cmd)
{
	struct pr_out_args a = { .cmd = cmd, .n = cmd->nexus };
	uint32_t avail = 0;

	a.sa = cmd->cdb[1] & 0x1f;
	a.scope = cmd->cdb[2] >> 4;
	a.type = cmd->cdb[2] & 0x0f;
	a.plen = get_be32(cmd->cdb + 5);
	cmd->status = SCSI_GOOD;
	cmd->din_len = 0;
	if (a.sa > SCSI_PROUT_REGISTER_MOVE) {
		sense_invalid_cdb(cmd, 1, 4);
		return;
	}
	if (cmd->buf && cmd->buf->data)
		avail = (uint32_t)MIN((size_t)cmd->dout_len, cmd->buf->len);
	a.p = avail ? cmd->buf->data : NULL;
	if (!pr_out_check_len(&a, avail))
		return;
	if (pr->res2) {
		pr_conflict_status(cmd);
		return;
	}
	if ((a.sa == SCSI_PROUT_RESERVE || a.sa == SCSI_PROUT_RELEASE) && !pr_check_scope_type(&a))
		return;
	a.rk = get_be64(a.p);
	a.sark = get_be64(a.p + 8);
	a.reg = pr_find(pr, a.n);
	if (a.sa != SCSI_PROUT_REGISTER && a.sa != SCSI_PROUT_REGISTER_IGNORE &&
	    (!a.reg || a.reg->key != a.rk)) {
		pr_conflict_status(cmd);
		return;
	}
	/* The APTPL bit counts only in the register service actions; the others ignore it (SPC-4). */
	int aptpl = a.sa == SCSI_PROUT_REGISTER_MOVE ? (a.p[17] & PR_APTPL)
		    : (a.sa == SCSI_PROUT_REGISTER || a.sa == SCSI_PROUT_REGISTER_IGNORE) ? (a.p[20] & PR_APTPL)
		    : -1;
	bool persist = pr->state_path && (pr->aptpl || aptpl > 0);
	struct pr_state before;

	if (persist && pr_export(pr, &before) < 0) {
		sense_set(cmd, SK_HARDWARE_ERROR, ASC_INTERNAL_TARGET_FAILURE);
		return;
	}
	switch (a.sa) {
	case SCSI_PROUT_REGISTER:
	case SCSI_PROUT_REGISTER_IGNORE: pr_do_register(pr, &a); break;
	case SCSI_PROUT_RESERVE: pr_do_reserve(pr, &a); break;
	case SCSI_PROUT_RELEASE: pr_do_release(pr, &a); break;
	case SCSI_PROUT_CLEAR: pr_do_clear(pr, &a); break;
	case SCSI_PROUT_PREEMPT:
	case SCSI_PROUT_PREEMPT_ABORT: pr_do_preempt(pr, &a); break;
	default: pr_do_move(pr, &a); break;
	}
	if (pr->shared && cmd->status == SCSI_GOOD && aptpl >= 0)
		pr->aptpl = aptpl > 0; /* kept where the shared state is kept, no file */
	if (persist) {
		bool old = pr->aptpl;

		if (cmd->status == SCSI_GOOD && aptpl >= 0)
			pr->aptpl = aptpl > 0;
		if (cmd->status == SCSI_GOOD && pr_persist(pr) < 0) {
			/* Not durable: the command did nothing, its unit attentions go too. */
			if (pr_import(pr, &before) < 0)
				log_err("reservations of %s: out of memory undoing a PERSISTENT RESERVE OUT", pr->name);
			pr->aptpl = old;
			pr->nnotes = 0;
			sense_set(cmd, SK_ILLEGAL_REQUEST, ASC_INSUFFICIENT_REG_RESOURCES);
		}
		pr_state_clear(&before);
	}
	/* Only paths that changed state queued notes. */
	pr_flush_notes(pr);
}

/* ---- SPC-2 RESERVE / RELEASE ---- */

/* Compatible reservation handling (SPC-4 5.13.3): 1 no-op, -1 conflict, 0 SPC-2 rules. */
static int pr_crh(const struct scsi_pr *pr, const struct scsi_nexus *n)
{
	const struct pr_reg *r;

	if (!pr->regs)
		return 0;
	r = pr_find(pr, n);
	if (pr_is_holder(pr, r))
		return 1;
	if (r && pr->reserved && (pr_type_ro(pr->type) || pr_type_ar(pr->type)))
		return 1;
	return -1;
}

/* Third-party and extent reservations are not supported. */
static bool pr_spc2_cdb_ok(struct scsi_cmd *cmd)
{
	bool ten = cmd->cdb[0] == SCSI_OP_RESERVE10 || cmd->cdb[0] == SCSI_OP_RELEASE10;

	if (ten && (cmd->cdb[1] & 0x12)) {
		sense_invalid_cdb(cmd, 1, (cmd->cdb[1] & 0x10) ? 4 : 1);
		return false;
	}
	if (!ten && (cmd->cdb[1] & 0x01)) {
		sense_invalid_cdb(cmd, 1, 0);
		return false;
	}
	return true;
}

/* The start RESERVE and RELEASE share: the CDB, then the CRH rule.  False: answered already. */
static bool pr_spc2_begin(struct scsi_pr *pr, struct scsi_cmd *cmd)
{
	int crh;

	cmd->status = SCSI_GOOD;
	cmd->din_len = 0;
	if (!pr_spc2_cdb_ok(cmd))
		return false;
	crh = pr_crh(pr, cmd->nexus);
	if (crh) {
		if (crh < 0)
			pr_conflict_status(cmd);
		return false;
	}
	return true;
}

void pr_reserve(struct scsi_pr *pr, struct scsi_cmd *cmd)
{
	const struct scsi_nexus *n = cmd->nexus;

	if (!pr_spc2_begin(pr, cmd))
		return;
	if (pr->res2 && !pr_res2_is(pr, n)) {
		pr_conflict_status(cmd);
		return;
	}
	pr->res2 = true;
	pr_active_sync(pr);
	snprintf(pr->res2_iport, sizeof(pr->res2_iport), "%s", n->initiator_port);
	snprintf(pr->res2_tport, sizeof(pr->res2_tport), "%s", n->target_port);
}

void pr_release(struct scsi_pr *pr, struct scsi_cmd *cmd)
{
	const struct scsi_nexus *n = cmd->nexus;

	if (!pr_spc2_begin(pr, cmd))
		return;
	/* A RELEASE from a nexus that holds nothing succeeds and does nothing (SPC-2 7.17). */
	if (pr_res2_is(pr, n)) {
		pr->res2 = false;
		pr_active_sync(pr);
	}
}

void pr_reset(struct scsi_pr *pr, const struct scsi_nexus *nexus, bool nexus_loss_only)
{
	if (!nexus_loss_only || (nexus && pr_res2_is(pr, nexus))) {
		pr->res2 = false;
		pr_active_sync(pr);
	}
}

/* ---- a state shared with other targets (share.c) ---- */

void pr_set_shared(struct scsi_pr *pr, const char *serial, const char *naa, const char *name)
{
	pr->shared = true;
	snprintf(pr->serial, sizeof(pr->serial), "%s", serial);
	snprintf(pr->naa, sizeof(pr->naa), "%s", naa);
	snprintf(pr->name, sizeof(pr->name), "%s", name ? name : "");
}

char *pr_text(const struct scsi_pr *pr)
{
	struct pr_state st;
	char *text;

	if (pr_export(pr, &st) < 0)
		return NULL;
	/* Each gateway names its backstore as it likes: the shared text names none, so the same state is the same text. */
	st.backstore[0] = 0;
	st.res2 = pr->res2;
	if (pr->res2) {
		snprintf(st.res2_iport, sizeof(st.res2_iport), "%s", pr->res2_iport);
		snprintf(st.res2_tport, sizeof(st.res2_tport), "%s", pr->res2_tport);
	}
	text = pr_state_format(&st);
	pr_state_clear(&st);
	return text;
}

int pr_load(struct scsi_pr *pr, const char *text, size_t len, char *err, size_t errlen)
{
	struct pr_state st;
	int rc = pr_state_parse(text, len, &st, err, errlen);

	if (rc)
		return rc;
	if (pr->naa[0] && strcasecmp(st.naa, pr->naa)) {
		snprintf(err, errlen, "it is the state of LU %s, not of this one (%s)", st.naa, pr->naa);
		pr_state_clear(&st);
		return -EINVAL;
	}
	rc = pr_import(pr, &st);
	if (rc) {
		snprintf(err, errlen, "out of memory");
	} else {
		pr->aptpl = st.aptpl;
		pr->res2 = st.res2;
		snprintf(pr->res2_iport, sizeof(pr->res2_iport), "%s", st.res2_iport);
		snprintf(pr->res2_tport, sizeof(pr->res2_tport), "%s", st.res2_tport);
		pr_active_sync(pr);
	}
	pr_state_clear(&st);
	return rc;
}

struct scsi_pr *pr_copy(const struct scsi_pr *pr)
{
	struct scsi_pr *c = pr_create(NULL, NULL);
	char *text = pr_text(pr), err[160];

	if (c)
		pr_set_shared(c, pr->serial, pr->naa, pr->name);
	if (!c || !text || pr_load(c, text, strlen(text), err, sizeof(err))) {
		pr_destroy(c);
		free(text);
		return NULL;
	}
	free(text);
	c->keep_notes = true;
	return c;
}

unsigned pr_take_notes(struct scsi_pr *pr, struct pr_note **out)
{
	unsigned n = pr->nnotes;

	*out = pr->notes;
	pr->notes = NULL;
	pr->nnotes = pr->notes_cap = 0;
	return n;
}
