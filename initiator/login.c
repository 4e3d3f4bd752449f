/*
 * Initiator login (RFC 7143 sec. 6.3): security stage with AuthMethod None
 * or CHAP (one-way or mutual, CHAP_A 5/6/7/8), then the operational stage
 * through the shared negotiation engine (common/proto/text.h, role NEG_INITIATOR).
 * The login's own state (struct isc_login) lives from isc_login_start() to
 * the end of the login: done, refused, or the connection closed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto/chap.h"
#include "common/log.h"
#include "common/transport/iser.h"
#include "common/reactor.h"
#include "common/proto/serial.h"
#include "common/util.h"
#include "isc_internal.h"

static int send_login(struct isc_session *s, int csg, int nsg, bool transit, struct text_buf *tb)
{
	struct isc_login *l = s->login;
	if (tb && tb->oom)
		return -ENOMEM;
	uint8_t bhs[PDU_BHS_LEN] = { 0 };
	struct pdu_login_req *q = (void *)bhs;
	q->opcode = PDU_OP_LOGIN_REQ | PDU_FLAG_IMMEDIATE;
	q->flags = (uint8_t)(csg << 2) | (transit ? PDU_LOGIN_TRANSIT | (uint8_t)nsg : 0);
	memcpy(q->isid, s->isid, 6);
	q->tsih = htobe16(s->tsih);
	q->itt = htobe32(l->itt);
	q->cid = htobe16(s->cid);
	q->cmdsn = htobe32(s->cmdsn);
	l->csg = (uint8_t)csg;
	return isc_send_bhs(s, bhs, tb ? tb->data : NULL, tb ? tb->len : 0, ISC_TX_COPY, NULL);
}

void isc_login_end(struct isc_session *s)
{
	struct isc_login *l = s->login;
	if (!l)
		return;
	s->login = NULL;
	text_buf_free(&l->pending_answers);
	text_buf_free(&l->rsp_text);
	free(l);
}

static bool want_chap(const struct isc_session *s)
{
	return s->o.user && s->o.user[0] && s->o.password;
}

static int send_operational(struct isc_session *s)
{
	struct isc_login *l = s->login;
	struct text_buf tb;
	text_buf_init(&tb);
	if (l->pending_answers.len)
		text_append(&tb, l->pending_answers.data, l->pending_answers.len);
	l->pending_answers.len = 0;
	neg_offer(&l->neg, &tb);
	l->step = LS_OP;
	int rc = send_login(s, PDU_STAGE_OPERATIONAL, PDU_STAGE_FULL_FEATURE, true, &tb);
	text_buf_free(&tb);
	return rc;
}

int isc_login_start(struct isc_session *s)
{
	struct neg_params local;
	neg_params_default(&local);
	local.header_digest = s->o.header_digest;
	local.data_digest = s->o.data_digest;
	local.immediate_data = s->o.immediate_data;
	local.initial_r2t = s->o.initial_r2t;
	local.max_recv_dsl = s->o.max_recv_dsl ? s->o.max_recv_dsl : 262144;
	local.max_burst = s->o.max_burst ? s->o.max_burst : 1048576;
	local.first_burst = s->o.first_burst ? s->o.first_burst : 262144;
	if (s->o.iser) {
		/*
		 * RFC 7145 sec. 6: our receive slots (common/transport/rdma.c) hold 8 KiB of
		 * data, and a Send of ours carries at most that much immediate data.
		 * MaxRecvDataSegmentLength is declared as well, the same size: it is
		 * what a target that ignores the iSER keys goes by.
		 */
		local.rdma_extensions = true;
		local.max_recv_dsl = ISER_TARGET_RECV_DSL;
		local.initiator_recv_dsl = ISER_TARGET_RECV_DSL;
		local.target_recv_dsl = ISER_INITIATOR_SEND_DSL;
		local.max_outstanding_unexpected_pdus = ISER_INITIATOR_UNEXPECTED;
		local.header_digest = local.data_digest = false;
		/*
		 * We send no unsolicited Data-Out over iSER (immediate data only,
		 * the target RDMA READs the rest).  Saying so with InitialR2T=Yes
		 * (an OR: the result is Yes) keeps targets that expect unsolicited
		 * data up to FirstBurstLength whenever InitialR2T=No, F bit or not,
		 * from waiting for data that never comes.
		 */
		local.initial_r2t = true;
	}
	isc_login_end(s);
	struct isc_login *l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	s->login = l;
	neg_init(&l->neg, NEG_INITIATOR, &local);
	l->neg.discovery = s->discovery;
	text_buf_init(&l->pending_answers);
	text_buf_init(&l->rsp_text);
	s->login_status = 0;
	s->login_err = 0;
	s->chap_alg = 0;
	s->mutual = false;
	s->target_alias[0] = 0;
	s->exp_statsn = 0;
	l->itt = ++s->login_itt;
	l->step = LS_SEC_START;

	struct text_buf tb;
	text_buf_init(&tb);
	text_add(&tb, "InitiatorName", s->o.initiator_name);
	if (s->o.initiator_alias)
		text_add(&tb, "InitiatorAlias", s->o.initiator_alias);
	text_add(&tb, "SessionType", s->discovery ? "Discovery" : "Normal");
	if (!s->discovery)
		text_add(&tb, "TargetName", s->target);
	int rc;
	if (want_chap(s) || (s->o.target_user && s->o.target_password)) {
		text_add(&tb, "AuthMethod", "CHAP,None");
		rc = send_login(s, PDU_STAGE_SECURITY, PDU_STAGE_OPERATIONAL, false, &tb);
	} else {
		/*
		 * No authentication wanted: start in the operational stage, as
		 * open-iscsi does (RFC 7143 sec. 6.3 allows it).  tgtd's iSER login
		 * cannot leave the security stage for the operational one, and a
		 * target that requires CHAP refuses this login with 0x0201 as it
		 * would refuse AuthMethod=None.
		 */
		neg_offer(&l->neg, &tb);
		l->step = LS_OP;
		rc = send_login(s, PDU_STAGE_OPERATIONAL, PDU_STAGE_FULL_FEATURE, true, &tb);
	}
	text_buf_free(&tb);
	return rc;
}

static void login_fail(struct isc_session *s, int err, const char *fmt, const char *arg)
{
	char msg[400];
	snprintf(msg, sizeof(msg), fmt, arg ? arg : "");
	char at[NETADDR_HOST_LEN];
	isc_seterr(s, "login to %s failed: %s", isc_at(s, at, sizeof(at)), msg);
	s->login_err = err;
	isc_conn_lost(s, err, NULL);
}

static void send_chap_a(struct isc_session *s)
{
	struct isc_login *l = s->login;
	char list[32] = "";
	size_t n = 0;
	for (int i = 0; i < 4 && s->o.chap_algs[i]; i++)
		if (chap_alg_supported(s->o.chap_algs[i]))
			n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%d", n ? "," : "", s->o.chap_algs[i]);
	if (!n)
		snprintf(list, sizeof(list), "7,6,5");
	struct text_buf tb;
	text_buf_init(&tb);
	text_add(&tb, "CHAP_A", list);
	l->step = LS_CHAP_A;
	int rc = send_login(s, PDU_STAGE_SECURITY, PDU_STAGE_OPERATIONAL, false, &tb);
	text_buf_free(&tb);
	if (rc)
		login_fail(s, rc, "cannot send CHAP_A%s", NULL);
}

static void send_chap_r(struct isc_session *s, const struct text_list *kv)
{
	struct isc_login *l = s->login;
	const char *a = text_get(kv, "CHAP_A"), *i = text_get(kv, "CHAP_I"), *c = text_get(kv, "CHAP_C");
	uint64_t alg, id;
	if (!a || !i || !c) {
		login_fail(s, -EACCES, "target did not send CHAP_A/CHAP_I/CHAP_C%s", NULL);
		return;
	}
	bool offered = false;
	if (text_parse_u64(a, &alg))
		for (int k = 0; k < 4 && s->o.chap_algs[k]; k++)
			offered |= (uint64_t)s->o.chap_algs[k] == alg;
	if (!offered || !chap_alg_supported((int)alg)) {
		login_fail(s, -EACCES, "target chose CHAP_A=%s, which we did not offer", a);
		return;
	}
	if (!text_parse_u64(i, &id) || id > 255) {
		login_fail(s, -EPROTO, "bad CHAP_I '%s'", i);
		return;
	}
	uint8_t chal[CHAP_MAX_BINARY], rsp[CHAP_MAX_DIGEST];
	int clen = chap_decode(c, chal, sizeof(chal));
	if (clen <= 0) {
		login_fail(s, -EPROTO, "bad CHAP_C%s", NULL);
		return;
	}
	s->chap_alg = (int)alg;
	if (chap_response((enum chap_alg)alg, (uint8_t)id, s->o.password, chal, (size_t)clen, rsp)) {
		login_fail(s, -EACCES, "cannot compute the CHAP response%s", NULL);
		return;
	}
	char hex[2 * CHAP_MAX_DIGEST + 3];
	chap_encode_hex(rsp, chap_digest_len((enum chap_alg)alg), hex, sizeof(hex));
	struct text_buf tb;
	text_buf_init(&tb);
	text_add(&tb, "CHAP_N", s->o.user);
	text_add(&tb, "CHAP_R", hex);
	if (s->o.target_user && s->o.target_password) {
		s->mutual = true;
		/* Without randomness the challenge would be guessable: give up instead. */
		if (chap_random(&l->mutual_id, 1) || chap_random(l->mutual_chal, sizeof(l->mutual_chal))) {
			text_buf_free(&tb);
			login_fail(s, -EIO, "no random bytes for the mutual CHAP challenge%s", NULL);
			return;
		}
		/* A challenge equal to the target's would let it reflect our answer back. */
		if ((size_t)clen == sizeof(l->mutual_chal) && !memcmp(chal, l->mutual_chal, (size_t)clen))
			l->mutual_chal[0] ^= 0xff;
		char chex[2 * sizeof(l->mutual_chal) + 3];
		chap_encode_hex(l->mutual_chal, sizeof(l->mutual_chal), chex, sizeof(chex));
		text_addf(&tb, "CHAP_I", "%u", l->mutual_id);
		text_add(&tb, "CHAP_C", chex);
	}
	l->step = LS_CHAP_R;
	int rc = send_login(s, PDU_STAGE_SECURITY, PDU_STAGE_OPERATIONAL, true, &tb);
	text_buf_free(&tb);
	if (rc)
		login_fail(s, rc, "cannot send CHAP_R%s", NULL);
}

static bool check_mutual(struct isc_session *s, const struct text_list *kv)
{
	struct isc_login *l = s->login;
	const char *n = text_get(kv, "CHAP_N"), *r = text_get(kv, "CHAP_R");
	if (!n || !r) {
		login_fail(s, -EACCES, "target did not answer the mutual CHAP challenge%s", NULL);
		return false;
	}
	if (strcmp(n, s->o.target_user)) {
		login_fail(s, -EACCES, "mutual CHAP: target named itself '%s'", n);
		return false;
	}
	uint8_t got[CHAP_MAX_BINARY], want[CHAP_MAX_DIGEST];
	int glen = chap_decode(r, got, sizeof(got));
	if (chap_response((enum chap_alg)s->chap_alg, l->mutual_id, s->o.target_password, l->mutual_chal,
			  sizeof(l->mutual_chal), want) ||
	    glen != (int)chap_digest_len((enum chap_alg)s->chap_alg) || !chap_equal(got, want, (size_t)glen)) {
		login_fail(s, -EACCES, "mutual CHAP: the target's response is wrong (target secret mismatch)%s",
			   NULL);
		return false;
	}
	return true;
}

static void login_done(struct isc_session *s, const struct pdu_login_rsp *r)
{
	struct isc_login *l = s->login;
	/* Without RDMAExtensions=Yes the target would move data with Data-In/R2T PDUs, which iSER cannot carry. */
	if (s->o.iser && !s->discovery && !l->neg.result.rdma_extensions) {
		login_fail(s, -EPROTO, "the target did not accept RDMAExtensions=Yes on an iSER connection%s", NULL);
		return;
	}
	s->tsih = be16toh(r->tsih);
	s->exp_cmdsn = be32toh(r->exp_cmdsn);
	s->max_cmdsn = be32toh(r->max_cmdsn);
	/*
	 * The first command carries the login's CmdSN (login requests are
	 * immediate and do not advance it), whatever ExpCmdSN the response
	 * says: tgtd's iSER login answers ExpCmdSN = CmdSN + 1 but waits for
	 * CmdSN, as open-iscsi sends it.
	 */
	s->xc->header_digest = l->neg.result.header_digest;
	s->xc->data_digest = l->neg.result.data_digest;
	s->params = l->neg.result;
	isc_login_end(s);
	s->state = ISC_S_FFP;
	s->login_status = 0;
	s->last_rx_ns = reactor_now_ns();
	isc_arm_timer(s);
	/*
	 * A window closed at login opens only with a PDU from the target: ask
	 * for one with a ping (immediate) rather than wait for the keepalive.
	 */
	if (!s->discovery && serial_gt(s->cmdsn, s->max_cmdsn))
		isc_nop_async(s, NULL, NULL);
	isc_task_pump(s);
	isc_done_cb cb = s->login_cb;
	s->login_cb = NULL;
	if (cb)
		cb(s, 0, s->login_arg);
}

/* "host[:port][,tag]", host an address, a [v6] one or a name: into s->redir_*, 0 or -1. */
static int parse_target_address(struct isc_session *s, const char *v)
{
	char buf[sizeof(s->redir_host) + 16];
	if (!v || strlen(v) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", v);
	char *host = buf, *port = NULL, *end;
	if (*host == '[') {
		end = strchr(host, ']');
		if (!end)
			return -1;
		*end++ = 0;
		host++;
	} else {
		end = host + strcspn(host, ":,");
	}
	if (*end == ':') {
		*end++ = 0;
		port = end;
		end += strspn(end, "0123456789");
	}
	if (*end && *end != ',')
		return -1;
	*end = 0;
	unsigned long p = port ? strtoul(port, NULL, 10) : 3260;
	if (!*host || strlen(host) >= sizeof(s->redir_host) || (port && (!*port || strlen(port) > 5)) || !p ||
	    p > 65535)
		return -1;
	for (const char *c = host; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return -1;
	snprintf(s->redir_host, sizeof(s->redir_host), "%s", host);
	s->redir_port = (uint16_t)p;
	return 0;
}

/*
 * Status class 01h (RFC 7143 sec. 11.13.5): log in again at TargetAddress.
 * The connection closes; up_closed() opens the next one there.  A permanent
 * move also moves where reconnects start.
 */
static void redirected(struct isc_session *s, struct xp_rx *rx, uint16_t status)
{
	struct text_list kv;
	char why[128], esc[300];
	s->login_status = status;
	if (text_parse(rx->data, rx->data ? rx->data_len : 0, &kv, why, sizeof(why))) {
		login_fail(s, -EPROTO, "a redirection with bad text: %s", why);
		return;
	}
	const char *a = text_get(&kv, "TargetAddress");
	int bad = parse_target_address(s, a);
	snprintf(esc, sizeof(esc), "%s", a ? a : "");
	text_list_free(&kv);
	if (bad) {
		s->redir_port = 0;
		login_fail(s, -EPROTO, "a redirection without a usable TargetAddress (\"%.200s\")",
			   log_escape(esc, why, sizeof(why)));
		return;
	}
	if (++s->redirects > ISC_REDIRECTS_MAX) {
		s->redir_port = 0;
		char msg[200];
		snprintf(msg, sizeof(msg), "more than %d redirections, the last to %s", ISC_REDIRECTS_MAX,
			 log_escape(esc, why, sizeof(why)));
		login_fail(s, -ELOOP, "%s", msg);
		return;
	}
	char at[NETADDR_HOST_LEN], to[NETADDR_HOST_LEN];
	netaddr_join(to, sizeof(to), s->redir_host, s->redir_port);
	isc_log(ISC_LOG_INFO, "%s: login redirected (%s) to %s", isc_at(s, at, sizeof(at)),
		status == PDU_LOGIN_REDIRECT_PERM ? "moved permanently" : "moved temporarily", to);
	if (status == PDU_LOGIN_REDIRECT_PERM) {
		snprintf(s->home_host, sizeof(s->home_host), "%s", s->redir_host);
		s->home_port = s->redir_port;
	}
	isc_conn_lost(s, 0, NULL);
}

void isc_login_rx(struct isc_session *s, struct xp_rx *rx)
{
	const struct pdu_login_rsp *r = (const void *)rx->bhs;
	struct isc_login *l = s->login;
	if (s->state != ISC_S_LOGIN || !l) {
		isc_conn_lost(s, -EPROTO, "target sent a Login Response outside login");
		return;
	}
	uint32_t statsn = be32toh(r->statsn);
	s->exp_statsn = statsn + 1;
	uint16_t status = (uint16_t)(r->status_class << 8 | r->status_detail);
	if (status >> 8 == PDU_LOGIN_CLASS_REDIRECT) {
		redirected(s, rx, status);
		return;
	}
	if (status) {
		s->login_status = status;
		char msg[300];
		snprintf(msg, sizeof(msg), "target refused the login: %s (status 0x%04x)",
			 isc_login_status_str(status), status);
		login_fail(s, status == PDU_LOGIN_AUTH_FAILED ? -EACCES : -EPERM, "%s", msg);
		return;
	}
	if (be32toh(r->itt) != l->itt || memcmp(r->isid, s->isid, 6)) {
		login_fail(s, -EPROTO, "Login Response for another request (ITT/ISID)%s", NULL);
		return;
	}
	if (rx->data && rx->data_len)
		text_append(&l->rsp_text, rx->data, rx->data_len);
	if (l->rsp_text.len > TEXT_MAX_TOTAL) {
		login_fail(s, -EPROTO, "login text too long%s", NULL);
		return;
	}
	if (r->flags & PDU_LOGIN_CONTINUE) {
		/* Partial text: an empty request fetches the rest. */
		send_login(s, l->csg, 0, false, NULL);
		return;
	}
	struct text_list kv;
	char why[200];
	int rc = text_parse(l->rsp_text.data, l->rsp_text.len, &kv, why, sizeof(why));
	l->rsp_text.len = 0;
	if (rc) {
		login_fail(s, -EPROTO, "bad login text: %s", why);
		return;
	}
	bool transit = r->flags & PDU_LOGIN_TRANSIT;
	int nsg = PDU_LOGIN_NSG(r->flags);
	for (unsigned i = 0; i < kv.count; i++) {
		const char *k = kv.pairs[i].key, *v = kv.pairs[i].value;
		if (!strcmp(k, "TargetAlias")) {
			snprintf(s->target_alias, sizeof(s->target_alias), "%s", v);
		} else if (neg_is_operational_key(k)) {
			if (neg_respond(&l->neg, k, v, &l->pending_answers, why, sizeof(why))) {
				text_list_free(&kv);
				login_fail(s, -EPROTO, "negotiation: %s", why);
				return;
			}
		}
	}
	const char *am = text_get(&kv, "AuthMethod");
	switch (l->step) {
	case LS_SEC_START:
		if (am && !strcmp(am, "CHAP")) {
			send_chap_a(s);
			break;
		}
		if (am && strcmp(am, "None")) {
			login_fail(s, -EACCES, "no common AuthMethod (target answered %s)", am);
			break;
		}
		if (s->o.target_user && s->o.target_password) {
			login_fail(s, -EACCES, "target did not authenticate, mutual CHAP was required%s", NULL);
			break;
		}
		if (!transit) {
			/* We offered CHAP,None and the target took None: move on. */
			send_login(s, PDU_STAGE_SECURITY, PDU_STAGE_OPERATIONAL, true, NULL);
			break;
		}
		if (nsg == PDU_STAGE_FULL_FEATURE) {
			login_done(s, r);
			break;
		}
		if (send_operational(s))
			login_fail(s, -ENOMEM, "cannot send the operational offer%s", NULL);
		break;
	case LS_CHAP_A:
		send_chap_r(s, &kv);
		break;
	case LS_CHAP_R:
		if (s->mutual && !check_mutual(s, &kv))
			break;
		if (!transit) {
			send_login(s, PDU_STAGE_SECURITY, PDU_STAGE_OPERATIONAL, true, NULL);
			break;
		}
		if (send_operational(s))
			login_fail(s, -ENOMEM, "cannot send the operational offer%s", NULL);
		break;
	case LS_OP:
		if (transit && nsg == PDU_STAGE_FULL_FEATURE) {
			login_done(s, r);
			break;
		}
		if (send_operational(s))
			login_fail(s, -ENOMEM, "cannot send the operational offer%s", NULL);
		break;
	}
	text_list_free(&kv);
}
