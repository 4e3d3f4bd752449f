/*
 * Login (RFC 7143 sec. 6.3, 11.12-11.13): security stage with CHAP
 * (one-way and mutual), operational stage through the shared negotiation
 * engine, then full feature phase.  The same code serves TCP and iSER.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto/chap.h"
#include "common/transport/iser.h"
#include "common/log.h"
#include "common/reactor.h"
#include "common/util.h"
#include "target/iscsi/iscsi.h"

enum auth_state { AUTH_NONE_YET, AUTH_WAIT_A, AUTH_WAIT_R, AUTH_DONE };

struct login_state {
	bool started;
	uint8_t isid[6];
	uint16_t tsih;
	uint32_t itt;
	uint32_t cmdsn;
	int stage;
	struct text_buf acc;       /* request text gathered over C-bit PDUs */
	struct neg_ctx neg;
	bool neg_ready;
	char initiator[224];
	char target[224];
	bool discovery;
	const struct rt_tpg *tpg;
	const struct cfg_chap *chap;  /* credentials required (&chap_copy), or NULL */
	struct cfg_chap chap_copy;    /* the configuration may change between PDUs */
	enum auth_state auth;
	bool auth_method_chosen;
	int alg;
	uint8_t chap_id;
	uint8_t challenge[CHAP_CHALLENGE_LEN];
	bool tpgt_sent;
	char redirect[80];            /* TargetAddress of a redirection */
};

static const int chap_algs_allowed[] = { CHAP_SHA3_256, CHAP_SHA256, CHAP_SHA1, CHAP_MD5 };

void login_free(struct iscsi_conn *c)
{
	if (!c->login)
		return;
	text_buf_free(&c->login->acc);
	config_chap_free(&c->login->chap_copy);
	free(c->login);
	c->login = NULL;
}

/* A copy of the credentials for the rest of the login (NULL when out of memory: the login fails). */
static const struct cfg_chap *keep_chap(struct login_state *ls, const struct cfg_chap *from)
{
	struct cfg_chap *k = &ls->chap_copy;
	k->userid = strdup(from->userid);
	k->password = strdup(from->password ? from->password : "");
	k->mutual_userid = from->mutual_userid ? strdup(from->mutual_userid) : NULL;
	k->mutual_password = from->mutual_password ? strdup(from->mutual_password) : NULL;
	if (!k->userid || !k->password || (from->mutual_userid && !k->mutual_userid) ||
	    (from->mutual_password && !k->mutual_password))
		return NULL;
	return k;
}

static void login_reply(struct iscsi_conn *c, uint8_t flags, uint16_t status, struct text_buf *tb)
{
	struct login_state *ls = c->login;
	struct pdu_login_rsp r = { 0 };
	r.opcode = PDU_OP_LOGIN_RSP;
	r.flags = flags;
	memcpy(r.isid, ls->isid, 6);
	r.tsih = htobe16(ls->tsih);
	r.itt = htobe32(ls->itt);
	r.statsn = htobe32(c->statsn++);
	r.exp_cmdsn = htobe32(ls->cmdsn);
	/* Before the session exists the window is exactly the login's CmdSN. */
	r.max_cmdsn = htobe32(c->sess ? session_next_max_cmdsn(c->sess) : ls->cmdsn);
	r.status_class = (uint8_t)(status >> 8);
	r.status_detail = (uint8_t)status;
	void *data = NULL;
	uint32_t len = 0;
	if (tb && tb->len && (!status || status >> 8 == PDU_LOGIN_CLASS_REDIRECT)) {
		data = tb->data;
		len = tb->len;
		tb->data = NULL;
		tb->len = tb->cap = 0;
	}
	/* A failed or redirected login closes the connection once its answer is out. */
	conn_send_owned(c, &r, data, len, status != 0);
}

static void login_fail(struct iscsi_conn *c, uint16_t status, const char *why)
{
	struct login_state *ls = c->login;
	char who[160], what[160], reason[320];
	bool redirect = status >> 8 == PDU_LOGIN_CLASS_REDIRECT;
	/* Names and the reason (it may quote keys) come from the peer: no control characters into the log. */
	log_limited(LOG_INFO, "%s: login of '%s' to '%s' %s (status 0x%04x): %s", c->xp->peer,
		    ls->initiator[0] ? log_escape(ls->initiator, who, sizeof(who)) : "?",
		    ls->target[0] ? log_escape(ls->target, what, sizeof(what)) : (ls->discovery ? "discovery" : "?"),
		    redirect ? "redirected" : "refused", status, log_escape(why, reason, sizeof(reason)));
	struct text_buf tb;
	text_buf_init(&tb);
	if (redirect)
		text_add(&tb, "TargetAddress", ls->redirect);
	login_reply(c, 0, status, &tb);
	text_buf_free(&tb);
	stats_login(c, status);
	c->state = CONN_LOGOUT; /* ignore anything more until the close */
}

static const struct rt_tpg *find_tpg(struct iscsi_conn *c, const char *name, bool *exists)
{
	const struct config *cfg = rt_config();
	*exists = false;
	for (size_t i = 0; i < cfg->ntargets; i++) {
		const struct cfg_target *t = &cfg->targets[i];
		if (strcmp(t->iqn, name))
			continue;
		*exists = true;
		for (size_t j = 0; j < t->ntpgs; j++) {
			const struct rt_tpg *g = rt_tpg_find(t->iqn, t->tpgs[j].tag);
			if (t->tpgs[j].enable && g && tpg_has_portal(g, c->xp))
				return g;
		}
	}
	return NULL;
}

static void neg_local_from_tpg(struct neg_params *p, const struct cfg_params *cp)
{
	neg_params_default(p);
	p->max_recv_dsl = cp->max_recv_dsl;
	p->max_burst = cp->max_burst;
	p->first_burst = cp->first_burst;
	p->max_outstanding_r2t = cp->max_outstanding_r2t;
	p->initial_r2t = cp->initial_r2t;
	p->immediate_data = cp->immediate_data;
	p->header_digest = cp->header_digest;
	p->data_digest = cp->data_digest;
	p->time2wait = cp->default_time2wait;
	p->time2retain = cp->default_time2retain;
	p->max_connections = cp->max_connections;
	p->erl = 0;
}

/* Whether this login goes elsewhere (RFC 7143 sec. 11.13.5): its status, 0 to stay. */
static uint16_t login_redirect(struct iscsi_conn *c, char *why, size_t wl)
{
	struct login_state *ls = c->login;
	uint16_t status = redirect_login(ls->tpg, c->xp, ls->redirect, sizeof(ls->redirect));
	if (status)
		snprintf(why, wl, "to %s (redirect%s of TPG %u)", ls->redirect,
			 ls->tpg->cfg->redirect_host ? "" : "_balance", ls->tpg->cfg->tag);
	return status;
}

/* First PDU: who is logging in, to what, and must they authenticate? */
static int login_identify(struct iscsi_conn *c, const struct text_list *kv, char *why, size_t wl, uint16_t *status)
{
	struct login_state *ls = c->login;
	const char *iname = text_get(kv, "InitiatorName");
	const char *stype = text_get(kv, "SessionType");
	const char *tname = text_get(kv, "TargetName");
	if (!iname || !*iname) {
		*status = PDU_LOGIN_MISSING_PARAMETER;
		snprintf(why, wl, "InitiatorName missing");
		return -1;
	}
	if (strlen(iname) >= sizeof(ls->initiator)) {
		*status = PDU_LOGIN_INITIATOR_ERROR;
		snprintf(why, wl, "InitiatorName too long");
		return -1;
	}
	snprintf(ls->initiator, sizeof(ls->initiator), "%s", iname);
	if (stype && strcmp(stype, "Discovery") && strcmp(stype, "Normal")) {
		*status = PDU_LOGIN_SESSION_TYPE_UNSUPPORTED;
		snprintf(why, wl, "SessionType=%s", stype);
		return -1;
	}
	ls->discovery = stype && !strcmp(stype, "Discovery");
	struct neg_params local;
	if (ls->discovery) {
		static const struct cfg_params dparams = {
			.max_recv_dsl = 32768, .max_burst = 262144, .first_burst = 65536,
			.max_outstanding_r2t = 1, .immediate_data = true, .header_digest = true,
			.data_digest = true, .default_time2wait = 2, .default_time2retain = 0, .max_connections = 1,
		};
		neg_local_from_tpg(&local, &dparams);
		struct config *cfg = rt_config();
		if (cfg->discovery_auth_required || cfg->discovery_chap.userid)
			ls->chap = cfg->discovery_chap.userid ? keep_chap(ls, &cfg->discovery_chap) : NULL;
		if (cfg->discovery_chap.userid && !ls->chap) {
			*status = PDU_LOGIN_OUT_OF_RESOURCES;
			snprintf(why, wl, "out of memory");
			return -1;
		}
		if (cfg->discovery_auth_required && !ls->chap) {
			*status = PDU_LOGIN_AUTH_FAILED;
			snprintf(why, wl, "discovery authentication required but no discovery CHAP configured");
			return -1;
		}
	} else {
		if (!tname || !*tname) {
			*status = PDU_LOGIN_MISSING_PARAMETER;
			snprintf(why, wl, "TargetName missing");
			return -1;
		}
		snprintf(ls->target, sizeof(ls->target), "%s", tname);
		bool exists;
		ls->tpg = find_tpg(c, tname, &exists);
		if (!ls->tpg) {
			*status = PDU_LOGIN_NOT_FOUND;
			snprintf(why, wl, exists ? "target not served on portal %s" : "no such target", c->xp->local);
			return -1;
		}
		const struct cfg_acl *acl = NULL;
		if (!tpg_initiator_allowed(ls->tpg, iname, &acl)) {
			*status = PDU_LOGIN_FORBIDDEN;
			snprintf(why, wl, "initiator has no ACL on this target");
			return -1;
		}
		if (acl && acl->chap.userid)
			ls->chap = keep_chap(ls, &acl->chap);
		else if (!acl && ls->tpg->cfg->demo_chap.userid)
			ls->chap = keep_chap(ls, &ls->tpg->cfg->demo_chap);
		if (((acl && acl->chap.userid) || (!acl && ls->tpg->cfg->demo_chap.userid)) && !ls->chap) {
			*status = PDU_LOGIN_OUT_OF_RESOURCES;
			snprintf(why, wl, "out of memory");
			return -1;
		}
		/*
		 * After the ACL, so an initiator refused there learns no other address.  One that must
		 * pass CHAP learns it only once it has, as the security stage ends (login_rx_locked).
		 */
		if (!ls->chap && (*status = login_redirect(c, why, wl)))
			return -1;
		neg_local_from_tpg(&local, &ls->tpg->cfg->params);
	}
	if (c->xp->ops->rdma) {
		/* iSER: our receive buffers bound what the initiator may send in one PDU. */
		local.rdma_extensions = true;
		local.target_recv_dsl = ISER_TARGET_RECV_DSL;
		local.max_recv_dsl = ISER_TARGET_RECV_DSL;
		/* Receives from a shared queue: no unsolicited Data-Out Sends beyond the command window. */
		if (c->xp->shared_rx)
			local.initial_r2t = true;
	}
	neg_init(&ls->neg, NEG_TARGET, &local);
	ls->neg.discovery = ls->discovery;
	ls->neg.leading = true;
	ls->neg_ready = true;
	return 0;
}

static bool list_has(const char *list, const char *item)
{
	size_t n = strlen(item);
	for (const char *p = list; p && *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == n && !strncmp(p, item, n))
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

/* CHAP_N/CHAP_R check and the mutual answer. */
static int chap_verify(struct iscsi_conn *c, const struct text_list *kv, struct text_buf *rsp, char *why, size_t wl)
{
	struct login_state *ls = c->login;
	const char *n = text_get(kv, "CHAP_N"), *r = text_get(kv, "CHAP_R");
	if (!n || !r) {
		snprintf(why, wl, "CHAP_N/CHAP_R missing");
		return -1;
	}
	uint8_t got[CHAP_MAX_BINARY], want[CHAP_MAX_DIGEST];
	int gl = chap_decode(r, got, sizeof(got));
	size_t dl = chap_digest_len(ls->alg);
	if (strcmp(n, ls->chap->userid)) {
		char esc[96];
		snprintf(why, wl, "CHAP_N '%s' is not the configured user", log_escape(n, esc, sizeof(esc)));
		return -1;
	}
	if (gl != (int)dl || chap_response(ls->alg, ls->chap_id, ls->chap->password, ls->challenge,
					   sizeof(ls->challenge), want) ||
	    !chap_equal(got, want, dl)) {
		snprintf(why, wl, "CHAP response does not match (wrong secret?)");
		return -1;
	}
	const char *mi = text_get(kv, "CHAP_I"), *mc = text_get(kv, "CHAP_C");
	if (!mi && !mc)
		return 0;
	if (!mi || !mc || !ls->chap->mutual_userid) {
		snprintf(why, wl, ls->chap->mutual_userid ? "mutual CHAP needs CHAP_I and CHAP_C"
							  : "mutual CHAP requested but not configured");
		return -1;
	}
	uint64_t id;
	uint8_t ch[CHAP_MAX_BINARY];
	int cl = chap_decode(mc, ch, sizeof(ch));
	if (!text_parse_u64(mi, &id) || id > 255 || cl <= 0) {
		snprintf(why, wl, "bad CHAP_I/CHAP_C");
		return -1;
	}
	/* A short challenge makes our answer easy to precompute for a dictionary attack. */
	if (cl < CHAP_MIN_CHALLENGE) {
		snprintf(why, wl, "mutual CHAP challenge of %d bytes (at least %d required)", cl, CHAP_MIN_CHALLENGE);
		return -1;
	}
	/* A challenge equal to ours would let the initiator reflect our own answer. */
	if ((size_t)cl == sizeof(ls->challenge) && !memcmp(ch, ls->challenge, (size_t)cl)) {
		snprintf(why, wl, "mutual CHAP challenge reflects the target's");
		return -1;
	}
	uint8_t out[CHAP_MAX_DIGEST];
	char hex[2 * CHAP_MAX_DIGEST + 3];
	chap_response(ls->alg, (uint8_t)id, ls->chap->mutual_password, ch, (size_t)cl, out);
	chap_encode_hex(out, dl, hex, sizeof(hex));
	text_add(rsp, "CHAP_N", ls->chap->mutual_userid);
	text_add(rsp, "CHAP_R", hex);
	return 0;
}

static int security_keys(struct iscsi_conn *c, const struct text_list *kv, struct text_buf *rsp, char *why, size_t wl)
{
	struct login_state *ls = c->login;
	const char *am = text_get(kv, "AuthMethod");
	if (am) {
		if (ls->chap) {
			if (!list_has(am, "CHAP")) {
				snprintf(why, wl, "CHAP required, initiator offered AuthMethod=%s", am);
				return -1;
			}
			text_add(rsp, "AuthMethod", "CHAP");
			ls->auth = AUTH_WAIT_A;
		} else if (list_has(am, "None")) {
			text_add(rsp, "AuthMethod", "None");
			ls->auth = AUTH_DONE;
		} else {
			text_add(rsp, "AuthMethod", "Reject");
			snprintf(why, wl, "no acceptable AuthMethod in '%s'", am);
			return -1;
		}
		ls->auth_method_chosen = true;
	}
	const char *a = text_get(kv, "CHAP_A");
	if (a) {
		if (ls->auth != AUTH_WAIT_A) {
			snprintf(why, wl, "CHAP_A out of sequence");
			return -1;
		}
		int alg = chap_pick_alg(a, chap_algs_allowed, ARRAY_SIZE(chap_algs_allowed));
		if (alg < 0) {
			text_add(rsp, "CHAP_A", "Reject");
			snprintf(why, wl, "no supported CHAP algorithm in '%s'", a);
			return -1;
		}
		ls->alg = alg;
		/* A challenge that is not random (all zeroes) could be answered from a table: refuse instead. */
		if (chap_random(&ls->chap_id, 1) || chap_random(ls->challenge, sizeof(ls->challenge))) {
			snprintf(why, wl, "no random bytes for the CHAP challenge");
			return -2;
		}
		char hex[2 * CHAP_CHALLENGE_LEN + 3];
		chap_encode_hex(ls->challenge, sizeof(ls->challenge), hex, sizeof(hex));
		text_addf(rsp, "CHAP_A", "%d", alg);
		text_addf(rsp, "CHAP_I", "%u", ls->chap_id);
		text_add(rsp, "CHAP_C", hex);
		ls->auth = AUTH_WAIT_R;
		return 0;
	}
	if (text_get(kv, "CHAP_R") || text_get(kv, "CHAP_N")) {
		if (ls->auth != AUTH_WAIT_R) {
			snprintf(why, wl, "CHAP_R out of sequence");
			return -1;
		}
		if (chap_verify(c, kv, rsp, why, wl))
			return -1;
		ls->auth = AUTH_DONE;
	}
	return 0;
}

static bool is_login_key(const char *k)
{
	return !strcmp(k, "InitiatorName") || !strcmp(k, "TargetName") || !strcmp(k, "SessionType") ||
	       !strcmp(k, "InitiatorAlias") || !strcmp(k, "AuthMethod") || !strncmp(k, "CHAP_", 5);
}

static void enter_full_feature(struct iscsi_conn *c)
{
	struct login_state *ls = c->login;
	c->params = ls->neg.result;
	if (c->params.rdma_extensions) {
		/* RFC 7145: these replace MaxRecvDataSegmentLength in each direction. */
		c->params.max_recv_dsl = MIN(c->params.target_recv_dsl, c->params.max_recv_dsl);
		c->params.peer_max_recv_dsl = c->params.initiator_recv_dsl;
	}
	c->xp->header_digest = c->params.header_digest;
	c->xp->data_digest = c->params.data_digest;
	c->state = CONN_FULL;
	conn_login_done(c);
	if (ls->tpg)
		conn_start_nop(c, ls->tpg->cfg->params.nop_in_interval);
	char who[160];
	log_info("%s: %s session of '%s'%s%s logged in (TSIH %u)", c->xp->peer,
		 ls->discovery ? "discovery" : "normal", log_escape(ls->initiator, who, sizeof(who)),
		 ls->discovery ? "" : " to ", ls->discovery ? "" : ls->target, ls->tsih);
	login_free(c);
}

static struct iscsi_session *session_new(struct iscsi_conn *c)
{
	struct login_state *ls = c->login;
	struct iscsi_session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->conn = c;
	s->r = c->r;
	s->tpg = ls->tpg;
	s->discovery = ls->discovery;
	snprintf(s->portal_ip, sizeof(s->portal_ip), "%s", c->xp->local_ip);
	s->portal_port = c->xp->local_port;
	s->portal_iser = c->xp->ops->rdma;
	memcpy(s->isid, ls->isid, 6);
	snprintf(s->initiator, sizeof(s->initiator), "%s", ls->initiator);
	s->exp_cmdsn = ls->cmdsn;
	s->max_cmdsn = ls->cmdsn - 1; /* nothing sent yet */
	const struct cfg_params *p = ls->tpg ? &ls->tpg->cfg->params : NULL;
	/* Discovery sessions carry text requests only: small bounds. */
	s->queue_depth = p ? p->queue_depth : 16;
	/*
	 * Before the last login answer carries MaxCmdSN: a window is never taken
	 * back (RFC 7143 3.2.2.1).  iSER: what the connection's receives can take
	 * (with a shared receive queue, the transport's grant() cuts it further).
	 */
	if (c->xp->ops->rdma && s->queue_depth > ISER_MAX_QUEUE_DEPTH)
		s->queue_depth = ISER_MAX_QUEUE_DEPTH;
	s->max_immediate = p ? p->max_immediate : 4;
	s->buf_budget = (size_t)(p ? p->session_buffer_mb : 1) << 20;
	return s;
}

static void login_rx_locked(struct iscsi_conn *c, struct xp_rx *rx);

/* The configuration is read throughout a login PDU: it must not change underneath. */
void login_rx(struct iscsi_conn *c, struct xp_rx *rx)
{
	pthread_rwlock_rdlock(&rt_lock);
	login_rx_locked(c, rx);
	pthread_rwlock_unlock(&rt_lock);
}

/* A login PDU's header against the login so far (the first one starts it).  false: the login failed. */
static bool login_header_ok(struct iscsi_conn *c, const struct pdu_login_req *req)
{
	struct login_state *ls = c->login;
	int csg = PDU_LOGIN_CSG(req->flags), nsg = PDU_LOGIN_NSG(req->flags);
	bool transit = req->flags & PDU_LOGIN_TRANSIT, cont = req->flags & PDU_LOGIN_CONTINUE;
	if (!ls->started) {
		ls->started = true;
		memcpy(ls->isid, req->isid, 6);
		ls->tsih = be16toh(req->tsih);
		ls->itt = be32toh(req->itt);
		ls->cmdsn = be32toh(req->cmdsn);
		c->cid = be16toh(req->cid);
		c->statsn = be32toh(req->exp_statsn);
		ls->stage = csg;
		if (req->version_min > 0) {
			login_fail(c, PDU_LOGIN_UNSUPPORTED_VERSION, "iSCSI version not supported");
			return false;
		}
	} else {
		ls->itt = be32toh(req->itt);
		if (memcmp(ls->isid, req->isid, 6) || csg != ls->stage) {
			login_fail(c, PDU_LOGIN_INITIATOR_ERROR, "ISID or stage changed during login");
			return false;
		}
		if (ls->tpg && (!ls->tpg->cfg || !ls->tpg->cfg->enable)) {
			login_fail(c, PDU_LOGIN_TARGET_REMOVED, "the portal group was removed or disabled during the login");
			return false;
		}
	}
	if (transit && cont) {
		login_fail(c, PDU_LOGIN_INITIATOR_ERROR, "T and C bits both set");
		return false;
	}
	if (csg == 2 || (transit && (nsg == 2 || nsg <= csg))) {
		login_fail(c, PDU_LOGIN_INITIATOR_ERROR, "invalid stage transition");
		return false;
	}
	return true;
}

/*
 * The PDU's text added to what came before.  0: the text is whole, parsed
 * into kv; 1: more is coming (acknowledged); -1: the login failed.
 */
static int login_text(struct iscsi_conn *c, const struct xp_rx *rx, int csg, bool cont, struct text_list *kv)
{
	struct login_state *ls = c->login;
	char why[256] = "";
	if (ls->acc.len + rx->data_len > TEXT_MAX_TOTAL) {
		login_fail(c, PDU_LOGIN_OUT_OF_RESOURCES, "login text too long");
		return -1;
	}
	if (rx->data_len)
		text_append(&ls->acc, rx->data, rx->data_len);
	if (cont) {
		/* Partial text: acknowledge and wait for the rest. */
		login_reply(c, (uint8_t)(csg << 2), 0, NULL);
		return 1;
	}
	if (text_parse(ls->acc.data, ls->acc.len, kv, why, sizeof(why))) {
		login_fail(c, PDU_LOGIN_INITIATOR_ERROR, why);
		return -1;
	}
	ls->acc.len = 0;
	return 0;
}

/*
 * The whole text's keys answered in rsp: who logs in to what (once), the
 * security stage's, then the operational ones.  0, or -1 with *status and why.
 */
static int login_keys(struct iscsi_conn *c, const struct text_list *kv, int csg, struct text_buf *rsp, char *why,
		      size_t wl, uint16_t *status)
{
	struct login_state *ls = c->login;
	if (!ls->neg_ready && login_identify(c, kv, why, wl, status))
		return -1;
	if (ls->tsih) {
		/* Adding a connection to a session: MaxConnections is 1. */
		*status = PDU_LOGIN_SESSION_DOES_NOT_EXIST;
		snprintf(why, wl, "TSIH %u: connections cannot be added to sessions", ls->tsih);
		return -1;
	}
	if (!ls->tpgt_sent && !ls->discovery) {
		text_addf(rsp, "TargetPortalGroupTag", "%u", ls->tpg->cfg->tag);
		ls->tpgt_sent = true;
	}
	if (csg == PDU_STAGE_SECURITY) {
		int rc = security_keys(c, kv, rsp, why, wl);
		if (rc) {
			*status = rc == -2 ? PDU_LOGIN_TARGET_ERROR : PDU_LOGIN_AUTH_FAILED;
			return -1;
		}
	} else if (ls->chap && ls->auth != AUTH_DONE) {
		*status = PDU_LOGIN_AUTH_FAILED;
		snprintf(why, wl, "authentication required, initiator skipped the security stage");
		return -1;
	}
	for (unsigned i = 0; i < kv->count; i++) {
		const char *k = kv->pairs[i].key;
		if (is_login_key(k)) {
			if (!strncmp(k, "CHAP_", 5) && csg != PDU_STAGE_SECURITY) {
				*status = PDU_LOGIN_INITIATOR_ERROR;
				snprintf(why, wl, "%s outside the security stage", k);
				return -1;
			}
			continue;
		}
		if (neg_respond(&ls->neg, k, kv->pairs[i].value, rsp, why, wl)) {
			*status = PDU_LOGIN_INITIATOR_ERROR;
			return -1;
		}
	}
	return 0;
}

/*
 * Whether the initiator's transit stands (*transit): out of the security
 * stage only once CHAP passed, or AuthMethod agreed where no CHAP is asked;
 * authenticated, it may learn where to go.  0, or -1 with *status and why.
 */
static int login_transit(struct iscsi_conn *c, int csg, bool *transit, char *why, size_t wl, uint16_t *status)
{
	struct login_state *ls = c->login;
	if (*transit && csg == PDU_STAGE_SECURITY && ls->auth != AUTH_DONE) {
		if (ls->chap || !ls->auth_method_chosen) {
			/* Stay in the security stage until CHAP finished (or AuthMethod agreed). */
			if (ls->chap && ls->auth == AUTH_NONE_YET) {
				*status = PDU_LOGIN_AUTH_FAILED;
				snprintf(why, wl, "authentication required, no AuthMethod offered");
				return -1;
			}
			if (!ls->chap)
				ls->auth = AUTH_DONE;
			else
				*transit = false;
		}
	}
	/* Authenticated (transit is kept only once CHAP passed): now it may learn where to go. */
	if (*transit && csg == PDU_STAGE_SECURITY && ls->chap && ls->tpg && (*status = login_redirect(c, why, wl)))
		return -1;
	return 0;
}

/*
 * The login's last answer: the session admitted, made and registered, the
 * reply sent, the connection in full feature.  0, or -1 with *status and why.
 */
static int login_to_full_feature(struct iscsi_conn *c, uint8_t flags, struct text_buf *rsp, char *why, size_t wl,
				 uint16_t *status)
{
	if ((*status = admit_session(why, wl)))
		return -1;
	struct iscsi_session *s = session_new(c);
	if (!s) {
		admit_session_gone();
		*status = PDU_LOGIN_OUT_OF_RESOURCES;
		snprintf(why, wl, "out of memory");
		return -1;
	}
	s->counted = true;
	int rc = session_register(s, why, wl);
	if (rc) {
		session_free(s);
		*status = rc == -EACCES ? PDU_LOGIN_FORBIDDEN : PDU_LOGIN_OUT_OF_RESOURCES;
		return -1;
	}
	c->sess = s;
	c->login->tsih = s->tsih;
	login_reply(c, flags, 0, rsp);
	stats_login(c, 0);
	enter_full_feature(c);
	return 0;
}

static void login_rx_locked(struct iscsi_conn *c, struct xp_rx *rx)
{
	const struct pdu_login_req *req = (const void *)rx->bhs;
	if (!c->login) {
		c->login = calloc(1, sizeof(*c->login));
		if (!c->login) {
			conn_close(c);
			return;
		}
		text_buf_init(&c->login->acc);
	}
	struct login_state *ls = c->login;
	int csg = PDU_LOGIN_CSG(req->flags), nsg = PDU_LOGIN_NSG(req->flags);
	bool transit = req->flags & PDU_LOGIN_TRANSIT, cont = req->flags & PDU_LOGIN_CONTINUE;
	struct text_list kv;
	if (!login_header_ok(c, req) || login_text(c, rx, csg, cont, &kv))
		return;
	char why[256] = "";
	uint16_t status = 0;
	struct text_buf rsp;
	text_buf_init(&rsp);
	if (login_keys(c, &kv, csg, &rsp, why, sizeof(why), &status) ||
	    login_transit(c, csg, &transit, why, sizeof(why), &status))
		goto fail;
	uint8_t flags = (uint8_t)(csg << 2);
	if (transit) {
		flags |= PDU_LOGIN_TRANSIT | (uint8_t)nsg;
		if (nsg == PDU_STAGE_FULL_FEATURE)
			neg_offer(&ls->neg, &rsp);
	}
	if (csg == PDU_STAGE_OPERATIONAL && !transit)
		neg_offer(&ls->neg, &rsp);
	if (rsp.oom) {
		status = PDU_LOGIN_OUT_OF_RESOURCES;
		snprintf(why, sizeof(why), "out of memory");
		goto fail;
	}
	if (transit && nsg == PDU_STAGE_FULL_FEATURE) {
		if (login_to_full_feature(c, flags, &rsp, why, sizeof(why), &status))
			goto fail;
	} else {
		if (transit)
			ls->stage = nsg;
		login_reply(c, flags, 0, &rsp);
	}
	text_buf_free(&rsp);
	text_list_free(&kv);
	return;
fail:
	text_buf_free(&rsp);
	text_list_free(&kv);
	login_fail(c, status, why);
}
