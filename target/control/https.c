/*
 * The HTTPS door to the admin methods: POST /rpc, one JSON-RPC request per
 * HTTP request, answered by the same dispatcher as the local socket
 * (rpc_handle_as).  libmicrohttpd runs without a thread of its own: the
 * admin thread polls its epoll descriptor and runs it, so a request's method
 * runs on the admin thread like a socket's, one at a time.
 *
 * TLS is GnuTLS, through libmicrohttpd (the only stack it has; the metrics
 * endpoint uses the same library): TLS 1.2 and 1.3, ECDHE key exchange and
 * AEAD ciphers only.  Client certificates are asked for when client_ca is
 * set, and checked here, per request, against it.
 *
 * Bounds (docs/security.md): max_connections in all and per address, a
 * request body of RPC_MAX_REQUEST bytes (refused from its Content-Length
 * before it is read), request_timeout to send each whole request (from the
 * connection or the last answer, the TLS handshake included: a client that
 * trickles bytes is cut at the deadline however often it sends), and a
 * backoff per address after failed authentications.
 */
#include "target/control/https.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include "common/log.h"
#include "common/netaddr.h"
#include "target/config/config.h"
#include "target/control/control.h"
#include "target/control/rpc.h"
#include "target/runtime/runtime.h"

/* GnuTLS's priority string: the floor the issue and docs/security.md state. */
#define HTTPS_PRIORITIES                                                                                   \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-256-GCM:+AES-128-GCM:+CHACHA20-POLY1305:" \
	"-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:"       \
	"+GROUP-SECP384R1:+GROUP-X448:+GROUP-SECP521R1:-SIGN-RSA-SHA1:-SIGN-ECDSA-SHA1:-SIGN-DSA-SHA1:"     \
	"%SERVER_PRECEDENCE"
#define PEM_MAX         (1u << 20)  /* a certificate chain, key or CA file */
#define HTTPS_CONN_MEMORY (32u << 10) /* what libmicrohttpd gives a connection for its headers and buffers */
#define BACKOFF_SLOTS   256         /* addresses remembered after a failed authentication */
#define BACKOFF_FREE    5           /* failures before an address must wait */
#define BACKOFF_MAX_S   60
#define BACKOFF_FORGET_MS (10 * 60 * 1000) /* failures older than this are forgotten */

static const char *const refusal_names[HTTPS_NREFUSALS] = {
	[HTTPS_NO_CREDENTIALS] = "no_credentials", [HTTPS_BAD_TOKEN] = "bad_token",
	[HTTPS_CERT_UNTRUSTED] = "certificate_untrusted", [HTTPS_CERT_EXPIRED] = "certificate_expired",
	[HTTPS_CERT_UNKNOWN] = "certificate_unknown", [HTTPS_BACKOFF] = "backoff", [HTTPS_FORBIDDEN] = "forbidden",
};
static uint64_t refused[HTTPS_NREFUSALS];

/* What a listener is made from: compared to know whether a change or SIGHUP needs a new one. */
struct material {
	char listen[72];
	char *cert, *key, *ca;   /* PEM text, NUL-terminated; ca NULL: no client certificates */
	unsigned max_conns, per_addr, timeout_s;
	int lfd;                 /* the listening socket (-1: take the running one's) */
	char shown[NETADDR_LEN];
};

/* A connection, from accept to close. */
struct hconn {
	int fd;
	uint64_t deadline_ms;    /* to have sent its next whole request */
	char from[NETADDR_LEN];
	unsigned char addr[16];  /* the address alone, for the backoff (IPv4 as ::ffff:a.b.c.d) */
	struct hconn *prev, *next;
};

/* A request being read: who sent it (authenticated from its headers), its body so far. */
struct hreq {
	int status;              /* != 0: refused before the body, answered at its end */
	char *refusal;           /* that answer's text */
	char name[72];
	const struct cfg_principal *principal;
	char *body;
	size_t len, cap;
	bool too_big;
};

static struct {
	struct MHD_Daemon *d;
	struct material run, next;
	bool prepared, stop_prepared;  /* by https_prepare, for https_commit */
	bool next_ready, stop_asked;   /* committed: done at the admin thread's next turn */
	struct hconn *conns;
	struct backoff {
		unsigned char addr[16];
		unsigned fails;
		uint64_t last_ms, until_ms;
	} bo[BACKOFF_SLOTS];
} hs = { .run.lfd = -1, .next.lfd = -1 };

const char *https_refusal_name(enum https_refusal r)
{
	return r < HTTPS_NREFUSALS ? refusal_names[r] : "?";
}

uint64_t https_refused(enum https_refusal r)
{
	return r < HTTPS_NREFUSALS ? __atomic_load_n(&refused[r], __ATOMIC_RELAXED) : 0;
}

static void count(enum https_refusal r)
{
	__atomic_fetch_add(&refused[r], 1, __ATOMIC_RELAXED);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void wipe_free(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

static void wipe_free_cb(void *s)
{
	wipe_free(s);
}

static void material_free(struct material *m)
{
	free(m->cert);
	wipe_free(m->key);
	free(m->ca);
	m->cert = m->key = m->ca = NULL;
	if (m->lfd >= 0)
		close(m->lfd);
	m->lfd = -1;
}

/* ------------------------------------------------------------------------ */
/* Preparing a listener. */

/* A PEM file into memory (NUL-terminated); the key must be 0600 or less and root's or isertd's. */
static int read_pem(const char *field, const char *path, bool secret, char **out, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0) {
		snprintf(err, errlen, "global.admin_https.%s: %s: cannot open: %s", field, path, strerror(errno));
		return -errno;
	}
	int rc = 0;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > PEM_MAX) {
		snprintf(err, errlen, "global.admin_https.%s: %s: not a regular file of at most %u bytes", field, path,
			 PEM_MAX);
		rc = -EINVAL;
	} else if (secret && (st.st_mode & 0077)) {
		snprintf(err, errlen, "global.admin_https.%s: %s: mode %04o lets %s read the private key: chmod 600 it",
			 field, path, (unsigned)(st.st_mode & 07777), st.st_mode & 0070 ? "its group" : "others");
		rc = -EPERM;
	} else if (secret && st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(err, errlen, "global.admin_https.%s: %s: owned by uid %u: a private key belongs to root or "
			 "to isertd's user", field, path, (unsigned)st.st_uid);
		rc = -EPERM;
	}
	char *b = rc ? NULL : calloc(1, (size_t)st.st_size + 1);
	if (!rc && !b)
		rc = -ENOMEM;
	size_t got = 0;
	while (!rc && got < (size_t)st.st_size) {
		ssize_t n = read(fd, b + got, (size_t)st.st_size - got);
		if (n <= 0) {
			snprintf(err, errlen, "global.admin_https.%s: %s: read: %s", field, path,
				 n ? strerror(errno) : "shorter than its size");
			rc = -EIO;
		}
		got += n > 0 ? (size_t)n : 0;
	}
	close(fd);
	if (rc) {
		if (b)
			explicit_bzero(b, (size_t)st.st_size);
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

/* The certificate, key and CA as GnuTLS will take them: the key matching the certificate, the CA parsing. */
static int check_tls(const struct material *m, char *err, size_t errlen)
{
	gnutls_certificate_credentials_t cr;
	if (gnutls_certificate_allocate_credentials(&cr) < 0) {
		snprintf(err, errlen, "global.admin_https: out of memory");
		return -ENOMEM;
	}
	gnutls_datum_t c = { (unsigned char *)m->cert, (unsigned)strlen(m->cert) },
		       k = { (unsigned char *)m->key, (unsigned)strlen(m->key) };
	int r = gnutls_certificate_set_x509_key_mem(cr, &c, &k, GNUTLS_X509_FMT_PEM), rc = 0;
	if (r < 0) {
		snprintf(err, errlen, "global.admin_https: certificate and key: %s (both PEM, the key unencrypted and "
			 "the certificate's)", gnutls_strerror(r));
		rc = -EINVAL;
	}
	if (!rc && m->ca) {
		gnutls_datum_t a = { (unsigned char *)m->ca, (unsigned)strlen(m->ca) };
		r = gnutls_certificate_set_x509_trust_mem(cr, &a, GNUTLS_X509_FMT_PEM);
		if (r <= 0) {
			snprintf(err, errlen, "global.admin_https.client_ca: %s", r ? gnutls_strerror(r) :
				 "holds no PEM certificate");
			rc = -EINVAL;
		}
	}
	gnutls_certificate_free_credentials(cr);
	return rc;
}

static int open_listener(struct material *m, char *err, size_t errlen)
{
	int fd = control_listen("global.admin_https.listen", m->listen, m->shown, sizeof(m->shown), err, errlen);
	if (fd < 0)
		return fd;
	m->lfd = fd;
	return 0;
}

static bool same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool same_material(const struct material *a, const struct material *b)
{
	return !strcmp(a->listen, b->listen) && same_str(a->cert, b->cert) && same_str(a->key, b->key) &&
	       same_str(a->ca, b->ca) && a->max_conns == b->max_conns && a->per_addr == b->per_addr &&
	       a->timeout_s == b->timeout_s;
}

/* h's files read into m and checked as GnuTLS will take them. */
static int load_material(const struct cfg_admin_https *h, struct material *m, char *err, size_t errlen)
{
	snprintf(m->listen, sizeof(m->listen), "%s", h->listen);
	m->max_conns = h->max_connections;
	m->per_addr = h->max_connections_per_address;
	m->timeout_s = h->request_timeout_s;
	int rc = read_pem("certificate", h->certificate, false, &m->cert, err, errlen);
	if (!rc)
		rc = read_pem("key", h->key, true, &m->key, err, errlen);
	if (!rc && h->client_ca)
		rc = read_pem("client_ca", h->client_ca, false, &m->ca, err, errlen);
	return rc ? rc : check_tls(m, err, errlen);
}

int https_check(const struct config *c, char *err, size_t errlen)
{
	struct material m = { .lfd = -1 };
	int rc = c->admin_https ? load_material(c->admin_https, &m, err, errlen) : 0;
	material_free(&m);
	return rc;
}

int https_prepare(const struct config *c, char *err, size_t errlen)
{
	const struct cfg_admin_https *h = c->admin_https;
	/* One committed and not taken yet (two changes in one turn) is dropped: the new one is compared with what runs. */
	material_free(&hs.next);
	hs.prepared = hs.stop_prepared = hs.next_ready = hs.stop_asked = false;
	memset(&hs.next, 0, sizeof(hs.next));
	hs.next.lfd = -1;
	if (!h) {
		hs.stop_prepared = hs.d != NULL;
		return 0;
	}
	struct material *m = &hs.next;
	int rc = load_material(h, m, err, errlen);
	if (!rc && hs.d && same_material(m, &hs.run)) {
		material_free(m); /* nothing to do */
		return 0;
	}
	if (!rc && hs.d && !strcmp(m->listen, hs.run.listen))
		snprintf(m->shown, sizeof(m->shown), "%s", hs.run.shown); /* the running socket is taken over */
	else if (!rc)
		rc = open_listener(m, err, errlen);
	if (rc) {
		material_free(m);
		return rc;
	}
	hs.prepared = true;
	return 0;
}

/* Taken in https_run: this may run inside a request the running daemon is answering. */
void https_commit(void)
{
	hs.next_ready |= hs.prepared;
	hs.stop_asked |= hs.stop_prepared;
	hs.prepared = hs.stop_prepared = false;
}

/* ------------------------------------------------------------------------ */
/* Authentication. */

/* The address as the log writes it, and alone (IPv4 as ::ffff:a.b.c.d) as the backoff's key. */
static void peer_of(const struct sockaddr *sa, char *out, size_t n, unsigned char key[16])
{
	memset(key, 0, 16);
	netaddr_format(sa, out, n, NULL, 0, NULL);
	if (sa && sa->sa_family == AF_INET) {
		key[10] = key[11] = 0xff;
		memcpy(key + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

static struct backoff *backoff_of(const unsigned char addr[16], bool make)
{
	struct backoff *oldest = &hs.bo[0];
	uint64_t now = now_ms();
	for (size_t i = 0; i < BACKOFF_SLOTS; i++) {
		struct backoff *b = &hs.bo[i];
		if (b->fails && b->last_ms + BACKOFF_FORGET_MS < now && b->until_ms < now)
			b->fails = 0;
		if (b->fails && !memcmp(b->addr, addr, 16))
			return b;
		if (!b->fails || b->last_ms < oldest->last_ms || !oldest->fails)
			oldest = !oldest->fails ? oldest : b;
	}
	if (!make)
		return NULL;
	memset(oldest, 0, sizeof(*oldest));
	memcpy(oldest->addr, addr, 16);
	return oldest;
}

/* A failed authentication from addr: after BACKOFF_FREE of them, it waits 1 s, then 2, 4 ... up to a minute. */
static void failed(const unsigned char addr[16])
{
	struct backoff *b = backoff_of(addr, true);
	uint64_t now = now_ms();
	b->fails++;
	b->last_ms = now;
	if (b->fails >= BACKOFF_FREE) {
		unsigned s = 1u << (b->fails - BACKOFF_FREE < 6 ? b->fails - BACKOFF_FREE : 6);
		b->until_ms = now + 1000ull * (s < BACKOFF_MAX_S ? s : BACKOFF_MAX_S);
	}
}

static bool same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t d = 0;
	for (size_t i = 0; i < n; i++)
		d |= a[i] ^ b[i];
	return !d;
}

/* The principal a bearer token names (NULL: none); the token is checked as 64 lowercase hex digits. */
static const struct cfg_principal *by_token(const struct cfg_admin_https *h, const char *auth)
{
	if (strncasecmp(auth, "Bearer ", 7))
		return NULL;
	const char *t = auth + 7;
	if (strlen(t) != 64 || strspn(t, "0123456789abcdef") != 64)
		return NULL;
	uint8_t sum[32];
	if (gnutls_hash_fast(GNUTLS_DIG_SHA256, t, 64, sum) < 0)
		return NULL;
	const struct cfg_principal *found = NULL;
	for (size_t i = 0; i < h->nprincipals; i++)
		if (h->principals[i].token_hash_file && same_bytes(sum, h->principals[i].token_sha256, 32) && !found)
			found = &h->principals[i];
	explicit_bzero(sum, sizeof(sum));
	return found;
}

/* The certificate the client gave, checked against client_ca: 0 none, 1 valid (*crt set), -refusal-1. */
static int peer_cert(struct MHD_Connection *c, gnutls_x509_crt_t *crt)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (!ci || !ci->tls_session)
		return 0;
	gnutls_session_t s = (gnutls_session_t)ci->tls_session;
	unsigned n = 0, status = 0;
	const gnutls_datum_t *certs = gnutls_certificate_get_peers(s, &n);
	if (!certs || !n)
		return 0;
	if (gnutls_certificate_verify_peers2(s, &status) < 0)
		return -HTTPS_CERT_UNTRUSTED - 1;
	if (status & (GNUTLS_CERT_EXPIRED | GNUTLS_CERT_NOT_ACTIVATED))
		return -HTTPS_CERT_EXPIRED - 1;
	if (status)
		return -HTTPS_CERT_UNTRUSTED - 1;
	if (gnutls_x509_crt_init(crt) < 0)
		return -HTTPS_CERT_UNTRUSTED - 1;
	if (gnutls_x509_crt_import(*crt, &certs[0], GNUTLS_X509_FMT_DER) < 0) {
		gnutls_x509_crt_deinit(*crt);
		return -HTTPS_CERT_UNTRUSTED - 1;
	}
	return 1;
}

/* The principal a valid certificate names: its subject (RFC 4514) or one of its subjectAltNames. */
static const struct cfg_principal *by_cert(const struct cfg_admin_https *h, gnutls_x509_crt_t crt)
{
	gnutls_datum_t dn = { 0 };
	const struct cfg_principal *found = NULL;
	if (gnutls_x509_crt_get_dn3(crt, &dn, 0) >= 0)
		for (size_t i = 0; !found && i < h->nprincipals; i++)
			if (h->principals[i].subject && !strcmp(h->principals[i].subject, (const char *)dn.data))
				found = &h->principals[i];
	gnutls_free(dn.data);
	for (unsigned k = 0; !found && k < 64; k++) {
		char san[1024];
		size_t sz = sizeof(san) - 1;
		int t = gnutls_x509_crt_get_subject_alt_name(crt, k, san, &sz, NULL);
		if (t == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			break;
		if (t != GNUTLS_SAN_DNSNAME && t != GNUTLS_SAN_RFC822NAME && t != GNUTLS_SAN_URI)
			continue;
		san[sz] = 0;
		for (size_t i = 0; !found && i < h->nprincipals; i++)
			if (h->principals[i].san && !strcmp(h->principals[i].san, san))
				found = &h->principals[i];
	}
	return found;
}

/*
 * Who sent the request on c: the principal, or NULL with *why and the text
 * for the client.  A certificate that is offered must be valid: a client
 * with a bad certificate is refused even with a good token.
 */
static const struct cfg_principal *authenticate(struct MHD_Connection *c, enum https_refusal *why,
						const char **text)
{
	const struct cfg_admin_https *h = rt_config()->admin_https;
	const struct cfg_principal *p = NULL;
	gnutls_x509_crt_t crt;
	int v = h ? peer_cert(c, &crt) : 0;
	if (v < 0) {
		*why = (enum https_refusal)(-v - 1);
		*text = *why == HTTPS_CERT_EXPIRED ? "the client certificate has expired or is not valid yet"
						   : "the client certificate is not signed by admin_https.client_ca";
		return NULL;
	}
	if (v > 0) {
		p = by_cert(h, crt);
		gnutls_x509_crt_deinit(crt);
		if (p)
			return p;
	}
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (h && auth && (p = by_token(h, auth)))
		return p;
	*why = auth ? HTTPS_BAD_TOKEN : v > 0 ? HTTPS_CERT_UNKNOWN : HTTPS_NO_CREDENTIALS;
	*text = auth ? "the bearer token is not a principal's (it may have been revoked)"
		: v > 0 ? "the client certificate is valid but no principal names its subject or subjectAltName"
			: "authentication required: a client certificate or an Authorization: Bearer token";
	return NULL;
}

/* ------------------------------------------------------------------------ */
/* Requests. */

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, char *body, unsigned retry_after)
{
	if (!body)
		return MHD_NO;
	/* An answer may hold secrets (config.get with show_secrets): wiped when libmicrohttpd is done with it. */
	struct MHD_Response *r = MHD_create_response_from_buffer_with_free_callback(strlen(body), body, wipe_free_cb);
	if (!r) {
		wipe_free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"isertd\"");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "POST");
	if (retry_after) {
		char s[16];
		snprintf(s, sizeof(s), "%u", retry_after);
		MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, s);
	}
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result refuse(struct MHD_Connection *c, unsigned status, int code, const char *msg,
			      unsigned retry_after)
{
	return answer(c, status, rpc_error_text(code, msg), retry_after);
}

static struct hconn *conn_of(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* The headers are in: refuse what is refused (answered once the body is read and dropped), or keep who. */
static struct hreq *request_start(struct MHD_Connection *c, struct hconn *hc, const char *url, const char *method)
{
	struct hreq *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	char msg[200];
	const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	struct backoff *b = backoff_of(hc->addr, false);
	uint64_t now = now_ms();
	enum https_refusal why;
	const char *text;
	if (strcmp(url, "/rpc")) {
		q->status = MHD_HTTP_NOT_FOUND;
		q->refusal = rpc_error_text(RPC_INVALID_REQUEST, "not found: the admin methods are at POST /rpc");
	} else if (strcmp(method, MHD_HTTP_METHOD_POST)) {
		q->status = MHD_HTTP_METHOD_NOT_ALLOWED;
		q->refusal = rpc_error_text(RPC_INVALID_REQUEST, "only POST: one JSON-RPC request per HTTP request");
	} else if (b && b->until_ms > now) {
		count(HTTPS_BACKOFF);
		q->status = MHD_HTTP_TOO_MANY_REQUESTS;
		snprintf(msg, sizeof(msg), "too many failed authentications from this address: try again in %llu s",
			 (unsigned long long)((b->until_ms - now + 999) / 1000));
		q->refusal = rpc_error_text(RPC_PERMISSION, msg);
	} else if (len && strtoull(len, NULL, 10) > RPC_MAX_REQUEST) {
		q->status = MHD_HTTP_CONTENT_TOO_LARGE;
		snprintf(msg, sizeof(msg), "request larger than %u bytes", RPC_MAX_REQUEST);
		q->refusal = rpc_error_text(RPC_INVALID_REQUEST, msg);
	} else if (!(q->principal = authenticate(c, &why, &text))) {
		count(why);
		failed(hc->addr);
		log_limited(LOG_WARN, "admin https: %s refused (%s): %s", hc->from, https_refusal_name(why), text);
		q->status = MHD_HTTP_UNAUTHORIZED;
		q->refusal = rpc_error_text(RPC_PERMISSION, text);
	} else {
		if (b)
			b->fails = 0;
		snprintf(q->name, sizeof(q->name), "%s", q->principal->name);
	}
	if (q->status && !q->refusal) {
		free(q);
		return NULL;
	}
	return q;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_len, void **state)
{
	(void)cls, (void)version;
	struct hconn *hc = conn_of(c);
	struct hreq *q = *state;
	if (!hc)
		return MHD_NO;
	if (!q) {
		if (!(*state = q = request_start(c, hc, url, method)))
			return MHD_NO;
		/* A refusal goes out at once: no body is read from whom it refuses. */
		if (q->status) {
			char *t = q->refusal;
			q->refusal = NULL;
			return answer(c, (unsigned)q->status, t,
				      q->status == MHD_HTTP_TOO_MANY_REQUESTS ? BACKOFF_MAX_S : 0);
		}
		return MHD_YES;
	}
	if (*upload_len) {
		size_t n = *upload_len;
		*upload_len = 0;
		if (q->too_big || q->len + n > RPC_MAX_REQUEST) {
			q->too_big = true; /* a body without a Content-Length that grows past the bound */
			return MHD_YES;
		}
		if (q->len + n + 1 > q->cap) {
			size_t cap = q->cap ? q->cap : 4096;
			while (cap < q->len + n + 1)
				cap *= 2;
			char *b = malloc(cap);
			if (!b)
				return MHD_NO;
			if (q->body) {
				memcpy(b, q->body, q->len);
				explicit_bzero(q->body, q->len);
				free(q->body);
			}
			q->body = b;
			q->cap = cap;
		}
		memcpy(q->body + q->len, upload, n);
		q->len += n;
		return MHD_YES;
	}
	if (q->too_big) {
		char msg[64];
		snprintf(msg, sizeof(msg), "request larger than %u bytes", RPC_MAX_REQUEST);
		return refuse(c, MHD_HTTP_CONTENT_TOO_LARGE, RPC_INVALID_REQUEST, msg, 0);
	}
	/* The whole request: the answer may take long (a change), and the client then has its time to read it. */
	struct rpc_who who = { .principal = q->principal, .name = q->name, .from = hc->from };
	int code = 0;
	char *out = rpc_handle_as(q->body ? q->body : "", q->len, &who, &code);
	hc->deadline_ms = now_ms() + 1000ull * hs.run.timeout_s;
	if (code == RPC_PERMISSION)
		count(HTTPS_FORBIDDEN);
	if (!out) { /* a notification: no answer but the status */
		struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		enum MHD_Result ret = r ? MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r) : MHD_NO;
		if (r)
			MHD_destroy_response(r);
		return ret;
	}
	return answer(c, code == RPC_PERMISSION ? MHD_HTTP_FORBIDDEN : MHD_HTTP_OK, out, 0);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode toe)
{
	(void)cls, (void)toe;
	struct hreq *q = *state;
	struct hconn *hc = conn_of(c);
	if (hc)
		hc->deadline_ms = now_ms() + 1000ull * hs.run.timeout_s; /* for the next request */
	if (!q)
		return;
	if (q->body)
		explicit_bzero(q->body, q->len); /* a request may carry a CHAP secret */
	free(q->body);
	free(q->refusal);
	free(q);
	*state = NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	(void)cls;
	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		struct hconn *hc = *socket_context;
		if (!hc)
			return;
		if (hc->prev)
			hc->prev->next = hc->next;
		else
			hs.conns = hc->next;
		if (hc->next)
			hc->next->prev = hc->prev;
		free(hc);
		*socket_context = NULL;
		return;
	}
	struct hconn *hc = calloc(1, sizeof(*hc));
	const union MHD_ConnectionInfo *fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD),
				       *ad = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (!hc)
		return; /* conn_of finds nothing: its requests are dropped */
	hc->fd = fd ? fd->connect_fd : -1;
	hc->deadline_ms = now_ms() + 1000ull * hs.run.timeout_s;
	peer_of(ad ? ad->client_addr : NULL, hc->from, sizeof(hc->from), hc->addr);
	hc->next = hs.conns;
	if (hs.conns)
		hs.conns->prev = hc;
	hs.conns = hc;
	*socket_context = hc;
}

/* ------------------------------------------------------------------------ */
/* The admin thread's turn. */

static void stop_daemon(bool keep_fd)
{
	if (!hs.d)
		return;
	int fd = MHD_quiesce_daemon(hs.d); /* the listener is ours: MHD hands it back */
	MHD_stop_daemon(hs.d);
	hs.d = NULL;
	if (!keep_fd && fd >= 0)
		close(fd);
	hs.run.lfd = keep_fd ? fd : -1;
}

/* The prepared listener replaces the running one. */
static void take_next(void)
{
	hs.next_ready = false;
	bool reuse = hs.next.lfd < 0;
	stop_daemon(reuse);
	if (reuse) {
		hs.next.lfd = hs.run.lfd;
		hs.run.lfd = -1;
	}
	material_free(&hs.run);
	hs.run = hs.next;
	memset(&hs.next, 0, sizeof(hs.next));
	hs.next.lfd = -1;
	struct material *m = &hs.run;
	unsigned flags = MHD_USE_TLS | MHD_USE_EPOLL;
	if (m->ca)
		hs.d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_LISTEN_SOCKET, m->lfd,
					MHD_OPTION_HTTPS_MEM_CERT, m->cert, MHD_OPTION_HTTPS_MEM_KEY, m->key,
					MHD_OPTION_HTTPS_MEM_TRUST, m->ca, MHD_OPTION_HTTPS_PRIORITIES,
					HTTPS_PRIORITIES, MHD_OPTION_CONNECTION_LIMIT, m->max_conns,
					MHD_OPTION_PER_IP_CONNECTION_LIMIT, m->per_addr,
					MHD_OPTION_CONNECTION_TIMEOUT, m->timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
					on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
					MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTPS_CONN_MEMORY, MHD_OPTION_END);
	else
		hs.d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_LISTEN_SOCKET, m->lfd,
					MHD_OPTION_HTTPS_MEM_CERT, m->cert, MHD_OPTION_HTTPS_MEM_KEY, m->key,
					MHD_OPTION_HTTPS_PRIORITIES, HTTPS_PRIORITIES, MHD_OPTION_CONNECTION_LIMIT,
					m->max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT, m->per_addr,
					MHD_OPTION_CONNECTION_TIMEOUT, m->timeout_s, MHD_OPTION_NOTIFY_COMPLETED,
					on_completed, NULL, MHD_OPTION_NOTIFY_CONNECTION, on_connection, NULL,
					MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTPS_CONN_MEMORY, MHD_OPTION_END);
	if (!hs.d) {
		log_err("admin https: cannot start the HTTPS server on %s; no remote administration until the next "
			"change or SIGHUP", m->shown);
		material_free(m);
		return;
	}
	log_info("admin https: serving the admin methods at https://%s/rpc (%s client certificates)", m->shown,
		 m->ca ? "with" : "without");
}

int https_fd(void)
{
	const union MHD_DaemonInfo *i = hs.d ? MHD_get_daemon_info(hs.d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	return i ? i->epoll_fd : -1;
}

int https_timeout_ms(int max)
{
	if (hs.next_ready || hs.stop_asked)
		return 0;
	if (!hs.d)
		return max;
	MHD_UNSIGNED_LONG_LONG t;
	uint64_t now = now_ms();
	int ms = max;
	if (MHD_get_timeout(hs.d, &t) == MHD_YES && t < (MHD_UNSIGNED_LONG_LONG)ms)
		ms = (int)t;
	for (struct hconn *c = hs.conns; c; c = c->next)
		if (c->deadline_ms <= now)
			return 0;
		else if (c->deadline_ms - now < (uint64_t)ms)
			ms = (int)(c->deadline_ms - now);
	return ms;
}

void https_run(void)
{
	if (hs.stop_asked) {
		hs.stop_asked = false;
		stop_daemon(false);
		material_free(&hs.run);
		log_info("admin https: stopped (global.admin_https removed)");
	}
	if (hs.next_ready)
		take_next();
	if (!hs.d)
		return;
	MHD_run(hs.d);
	/* Past its deadline: cut.  MHD sees the connection end at its next run and frees it. */
	uint64_t now = now_ms();
	bool cut = false;
	for (struct hconn *c = hs.conns; c; c = c->next)
		if (c->deadline_ms <= now && c->fd >= 0) {
			shutdown(c->fd, SHUT_RDWR);
			c->deadline_ms = UINT64_MAX;
			cut = true;
		}
	if (cut)
		MHD_run(hs.d);
}

void https_reload(void)
{
	char err[512];
	struct config *c = rt_config();
	if (!c->admin_https)
		return;
	if (config_reread_token_hashes(c->admin_https, err, sizeof(err)))
		log_err("SIGHUP: admin https: %s", err);
	if (https_prepare(c, err, sizeof(err))) {
		log_err("SIGHUP: admin https keeps its certificates: %s", err);
		return;
	}
	https_commit();
	if (hs.next_ready)
		log_info("SIGHUP: admin https takes its certificate files again");
}

void https_stop(void)
{
	stop_daemon(false);
	material_free(&hs.run);
	material_free(&hs.next);
	hs.prepared = hs.stop_prepared = hs.next_ready = hs.stop_asked = false;
}
