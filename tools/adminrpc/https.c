/* JSON-RPC over HTTPS to isertd's admin listener, with OpenSSL (https.h). */
#include "https.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "adminrpc.h"
#include "fail.h"
#include "token.h"
#include "url.h"

/* A status line and headers longer than this are not the listener's. */
#define HEAD_MAX (16u << 10)

struct conn {
	const struct admin_endpoint *ep;
	struct admin_url u;
	int64_t deadline; /* ms, CLOCK_MONOTONIC */
	int timeout_ms;
	int fd;
	SSL_CTX *ctx;
	SSL *ssl;
	char *err;
	size_t errlen;
	char names[512]; /* the server certificate's names, for a mismatch's message */
};

__attribute__((format(printf, 3, 4))) static int fail(struct conn *c, int e, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	admin_vfail(c->err, c->errlen, e, fmt, ap);
	va_end(ap);
	return -e;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int timed_out(struct conn *c, const char *what)
{
	return fail(c, ETIMEDOUT, "isertd at %s did not answer within %d s (%s)", c->ep->url, c->timeout_ms / 1000,
		    what);
}

/* 0 when fd is ready for events, -ETIMEDOUT past the deadline. */
static int wait_fd(struct conn *c, short events)
{
	for (;;) {
		int64_t left = c->deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pf = { .fd = c->fd, .events = events };
		int r = poll(&pf, 1, left > INT32_MAX ? INT32_MAX : (int)left);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int tcp_connect(struct conn *c)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICSERV | (c->u.ip ? AI_NUMERICHOST : 0) };
	struct addrinfo *res, *ai;
	int g = getaddrinfo(c->u.host, c->u.port, &hints, &res);
	if (g)
		return fail(c, g == EAI_SYSTEM ? errno : EHOSTUNREACH, "cannot reach isertd at %s: %s: %s", c->ep->url,
			    c->u.host, gai_strerror(g));
	int e = ECONNREFUSED;
	for (ai = res; ai && c->fd < 0; ai = ai->ai_next) {
		int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		/* The request goes in two writes (head, body): without this, Nagle holds the second for the
		 * server's delayed ACK, 40 ms a request. */
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		int r = connect(fd, ai->ai_addr, ai->ai_addrlen) ? -errno : 0;
		if (r == -EINPROGRESS && !(r = wait_fd(&(struct conn){ .fd = fd, .deadline = c->deadline }, POLLOUT))) {
			socklen_t sl = sizeof(e);
			if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &sl))
				e = errno;
			r = -e;
		}
		if (!r) {
			c->fd = fd;
			break;
		}
		close(fd);
		e = -r;
		if (e == ETIMEDOUT)
			break; /* the deadline is spent: no time for the next address */
	}
	freeaddrinfo(res);
	if (c->fd >= 0)
		return 0;
	if (e == ETIMEDOUT)
		return fail(c, e, "cannot reach isertd at %s: no connection within %d s", c->ep->url, c->timeout_ms / 1000);
	return fail(c, e, "cannot reach isertd at %s: %s", c->ep->url, strerror(e));
}

/* The OpenSSL error queue's last entry as text, and the queue emptied. */
static const char *ssl_errtext(char *buf, size_t len)
{
	unsigned long e, last = 0;
	while ((e = ERR_get_error()))
		last = e;
	if (!last)
		return "no detail from OpenSSL";
	ERR_error_string_n(last, buf, len);
	return buf;
}

/* The names a certificate is for (its DNS and IP subjectAltNames), for a mismatch's message. */
static void cert_names(X509 *x, char *out, size_t len)
{
	size_t o = 0;
	out[0] = 0;
	GENERAL_NAMES *sans = x ? X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL) : NULL;
	for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans) && o + 1 < len; i++) {
		const GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
		char ip[64] = "";
		const char *s = NULL;
		if (g->type == GEN_DNS) {
			s = (const char *)ASN1_STRING_get0_data(g->d.dNSName);
		} else if (g->type == GEN_IPADD) {
			int l = ASN1_STRING_length(g->d.iPAddress);
			if ((l == 4 || l == 16) && !inet_ntop(l == 4 ? AF_INET : AF_INET6,
							      ASN1_STRING_get0_data(g->d.iPAddress), ip, sizeof(ip)))
				ip[0] = 0;
			s = ip;
		}
		if (!s || !*s)
			continue;
		int n = snprintf(out + o, len - o, "%s", o ? ", " : "");
		o += (size_t)n < len - o ? (size_t)n : len - o - 1;
		/* The server's text: printed only where it is plain. */
		for (; *s && o + 1 < len; s++)
			out[o++] = isprint((unsigned char)*s) ? *s : '?';
		out[o] = 0;
	}
	GENERAL_NAMES_free(sans);
	if (!out[0])
		snprintf(out, len, "none");
}

/* OpenSSL keeps no peer certificate after a failed verification: its names are noted while it is checked. */
static int note_names(int ok, X509_STORE_CTX *xs)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(xs, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct conn *c = ssl ? SSL_get_app_data(ssl) : NULL;
	if (c && X509_STORE_CTX_get_error_depth(xs) == 0)
		cert_names(X509_STORE_CTX_get_current_cert(xs), c->names, sizeof(c->names));
	return ok;
}

static int ctx_setup(struct conn *c)
{
	const struct admin_endpoint *ep = c->ep;
	char why[256];
	c->ctx = SSL_CTX_new(TLS_client_method());
	if (!c->ctx)
		return fail(c, ENOMEM, "TLS: %s", ssl_errtext(why, sizeof(why)));
	SSL_CTX_set_min_proto_version(c->ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(c->ctx, SSL_VERIFY_PEER, NULL);
	/* The listener may close without close_notify after a Content-Length answer; the length delimits it. */
	SSL_CTX_set_options(c->ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
	/* OpenSSL says "system lib" for a file it cannot open: the errno says more. */
	const char *files[][2] = { { "--cacert", ep->cacert }, { "--cert", ep->cert }, { "--key", ep->key } };
	for (size_t i = 0; i < 3; i++)
		if (files[i][1] && access(files[i][1], R_OK))
			return fail(c, EINVAL, "%s %s: %s", files[i][0], files[i][1], strerror(errno));
	if (ep->cacert ? SSL_CTX_load_verify_locations(c->ctx, ep->cacert, NULL) != 1
		       : SSL_CTX_set_default_verify_paths(c->ctx) != 1)
		return fail(c, EINVAL, "%s%s: cannot load the CA certificates: %s", ep->cacert ? "--cacert " : "",
			    ep->cacert ? ep->cacert : "the system's store", ssl_errtext(why, sizeof(why)));
	if (!ep->cert != !ep->key)
		return fail(c, EINVAL, "a client certificate needs both --cert and --key");
	if (ep->cert && SSL_CTX_use_certificate_chain_file(c->ctx, ep->cert) != 1)
		return fail(c, EINVAL, "--cert %s: cannot load a PEM certificate: %s", ep->cert,
			    ssl_errtext(why, sizeof(why)));
	if (ep->key && SSL_CTX_use_PrivateKey_file(c->ctx, ep->key, SSL_FILETYPE_PEM) != 1)
		return fail(c, EINVAL, "--key %s: cannot load a PEM private key: %s", ep->key,
			    ssl_errtext(why, sizeof(why)));
	if (ep->key && SSL_CTX_check_private_key(c->ctx) != 1)
		return fail(c, EINVAL, "--key %s is not the key of --cert %s", ep->key, ep->cert);
	return 0;
}

/* The connection's TLS side, over c->fd. */
static int ssl_setup(struct conn *c)
{
	char why[256];
	c->ssl = SSL_new(c->ctx);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1)
		return fail(c, ENOMEM, "TLS: %s", ssl_errtext(why, sizeof(why)));
	SSL_set_app_data(c->ssl, c);
	SSL_set_verify(c->ssl, SSL_VERIFY_PEER, note_names);
	SSL_set_hostflags(c->ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	/* An address literal is checked against the certificate's IP SANs, and is no server name to send (RFC 6066). */
	int ok = c->u.ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), c->u.host)
			 : SSL_set_tlsext_host_name(c->ssl, c->u.host) == 1 && SSL_set1_host(c->ssl, c->u.host) == 1;
	if (!ok)
		return fail(c, EINVAL, "TLS: cannot check the server's name %s: %s", c->u.host,
			    ssl_errtext(why, sizeof(why)));
	return 0;
}

/* What went wrong in the TLS exchange, said so that the reader knows what to change. */
static int tls_fail(struct conn *c, const char *when)
{
	char why[256];
	long v = SSL_get_verify_result(c->ssl);
	if (v != X509_V_OK) {
		ERR_clear_error();
		if (v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH)
			return fail(c, EPROTO, "the certificate of %s is not for %s (name mismatch; it is for: %s): "
					       "give a URL with one of its names",
				    c->ep->url, c->u.host, c->names[0] ? c->names : "?");
		bool issuer = v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY || v == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT ||
			      v == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN || v == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT ||
			      v == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE;
		return fail(c, EPROTO, "the certificate of %s is not trusted: %s%s", c->ep->url,
			    X509_verify_cert_error_string(v),
			    issuer ? c->ep->cacert ? " (it is not signed by a CA in --cacert: give the CA that signed it)"
						   : " (give the CA that signed it with --cacert FILE)"
				   : "");
	}
	unsigned long e = ERR_peek_last_error();
	int reason = ERR_GET_LIB(e) == ERR_LIB_SSL ? ERR_GET_REASON(e) : 0;
	if (reason > SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) {
		/* An alert the server sent. */
		int alert = reason - SSL_AD_REASON_OFFSET;
		const char *hint = "";
		if (alert == SSL_AD_CERTIFICATE_REQUIRED || alert == SSL_AD_HANDSHAKE_FAILURE)
			hint = c->ep->cert ? ": it refused the client certificate of --cert"
					   : ": does it want a client certificate? give one with --cert FILE --key FILE";
		else if (alert == SSL_AD_BAD_CERTIFICATE || alert == SSL_AD_UNKNOWN_CA || alert == SSL_AD_CERTIFICATE_EXPIRED ||
			 alert == SSL_AD_CERTIFICATE_REVOKED || alert == SSL_AD_CERTIFICATE_UNKNOWN ||
			 alert == SSL_AD_UNSUPPORTED_CERTIFICATE || alert == SSL_AD_ACCESS_DENIED)
			hint = ": it refused the client certificate (--cert): give one signed by a CA the listener trusts";
		else if (alert == SSL_AD_PROTOCOL_VERSION)
			hint = ": no TLS version in common (iserctl speaks TLS 1.2 and 1.3)";
		ERR_clear_error();
		return fail(c, EPROTO, "isertd at %s sent the TLS alert '%s' %s%s", c->ep->url,
			    /* OpenSSL 3.0 has no name for TLS 1.3's alert */
			    alert == SSL_AD_CERTIFICATE_REQUIRED ? "certificate required" : SSL_alert_desc_string_long(alert),
			    when, hint);
	}
	if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
	    reason == SSL_R_RECORD_LENGTH_MISMATCH) {
		ERR_clear_error();
		return fail(c, EPROTO, "%s does not speak TLS (is the port the admin_https listener's, not plain "
				       "HTTP or iSCSI?)", c->ep->url);
	}
	if (!e) {
		int se = errno;
		return fail(c, EPROTO, "isertd at %s closed the connection %s%s%s", c->ep->url, when, se ? ": " : "",
			    se ? strerror(se) : "");
	}
	return fail(c, EPROTO, "TLS with %s failed %s: %s", c->ep->url, when, ssl_errtext(why, sizeof(why)));
}

/* After an SSL call returned r: 0 to call it again (the socket was ready), 1 end of the stream, or -errno. */
static int tls_again(struct conn *c, int r, const char *when)
{
	int se = SSL_get_error(c->ssl, r);
	if (se == SSL_ERROR_ZERO_RETURN)
		return 1;
	if (se != SSL_ERROR_WANT_READ && se != SSL_ERROR_WANT_WRITE)
		return tls_fail(c, when);
	int w = wait_fd(c, se == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT);
	return w == -ETIMEDOUT ? timed_out(c, when) : w ? fail(c, -w, "poll: %s", strerror(-w)) : 0;
}

static int tls_write(struct conn *c, const char *p, size_t len)
{
	size_t off = 0;
	while (off < len) {
		size_t n = 0;
		ERR_clear_error();
		errno = 0;
		int r = SSL_write_ex(c->ssl, p + off, len - off, &n);
		if (r == 1)
			off += n;
		else if ((r = tls_again(c, r, "while iserctl sent the request")))
			return r > 0 ? fail(c, ECONNRESET, "isertd at %s closed the connection before the request was "
							  "sent", c->ep->url)
				     : r;
	}
	return 0;
}

/* Room for want more bytes, the old buffer wiped: an answer may hold secrets (config.get --show-secrets). */
static int grow(struct conn *c, struct https_answer *a, size_t used, size_t want)
{
	if (a->cap - used > want)
		return 0;
	size_t cap = a->cap ? a->cap : 65536;
	while (cap - used <= want)
		cap *= 2;
	char *m = malloc(cap);
	if (!m)
		return fail(c, ENOMEM, "out of memory for the answer");
	if (a->mem) {
		memcpy(m, a->mem, used);
		OPENSSL_cleanse(a->mem, a->cap);
		free(a->mem);
	}
	a->mem = m;
	a->cap = cap;
	return 0;
}

static const char *header(const char *head, const char *name, char *val, size_t len)
{
	size_t nl = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
		if (strncasecmp(l + 2, name, nl) || l[2 + nl] != ':')
			continue;
		const char *v = l + 3 + nl;
		v += strspn(v, " \t");
		size_t n = strcspn(v, "\r");
		while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
			n--;
		snprintf(val, len, "%.*s", (int)n, v);
		return val;
	}
	return NULL;
}

/* The status line and the headers in a->mem[0, head_len): status, reason and the body's length (-1: up to EOF). */
static int parse_head(struct conn *c, struct https_answer *a, int64_t *body_len)
{
	int maj, min, n = 0;
	char val[64];
	if (sscanf(a->mem, "HTTP/%d.%d %3d%n", &maj, &min, &a->status, &n) != 3 || a->status < 100)
		return fail(c, EPROTO, "%s answered something that is not HTTP", c->ep->url);
	const char *r = a->mem + n + strspn(a->mem + n, " ");
	size_t i = 0;
	for (; r[i] && r[i] != '\r' && i + 1 < sizeof(a->reason); i++)
		a->reason[i] = isprint((unsigned char)r[i]) ? r[i] : '?';
	a->reason[i] = 0;
	if (header(a->mem, "Transfer-Encoding", val, sizeof(val)) && strcasecmp(val, "identity"))
		return fail(c, EPROTO, "HTTP %d %s from %s: its body is sent as '%s', which iserctl does not read "
				       "(the admin listener sends a Content-Length)",
			    a->status, a->reason, c->ep->url, val);
	*body_len = -1;
	if (header(a->mem, "Content-Length", val, sizeof(val))) {
		char *end;
		errno = 0;
		unsigned long long l = strtoull(val, &end, 10);
		if (!val[0] || *end || val[0] == '-' || errno)
			return fail(c, EPROTO, "HTTP %d %s from %s: Content-Length '%s' is not a number", a->status,
				    a->reason, c->ep->url, val);
		if (l > HTTPS_ANSWER_MAX)
			return fail(c, EMSGSIZE, "HTTP %d %s from %s: the answer is %llu bytes, more than iserctl reads "
						 "(%u MiB)", a->status, a->reason, c->ep->url, l, HTTPS_ANSWER_MAX >> 20);
		*body_len = (int64_t)l;
	}
	return 0;
}

static int read_answer(struct conn *c, struct https_answer *a)
{
	size_t used = 0, head_len = 0;
	int64_t body_len = -1;
	bool eof = false;
	for (;;) {
		if (head_len && body_len >= 0 && used - head_len >= (size_t)body_len)
			break;
		if (eof) {
			if (!head_len)
				return fail(c, ECONNRESET, "isertd at %s closed the connection without an answer", c->ep->url);
			if (body_len >= 0)
				return fail(c, EPROTO, "HTTP %d %s from %s: the connection closed %zu bytes into a body of "
						       "%lld", a->status, a->reason, c->ep->url, used - head_len,
					    (long long)body_len);
			break;
		}
		int r = grow(c, a, used, 16384);
		if (r)
			return r;
		size_t n = 0;
		ERR_clear_error();
		errno = 0;
		r = SSL_read_ex(c->ssl, a->mem + used, a->cap - used - 1, &n);
		if (r != 1) {
			if ((r = tls_again(c, r, "while iserctl waited for the answer")) < 0)
				return r;
			eof = r > 0;
			continue;
		}
		used += n;
		a->mem[used] = 0;
		if (!head_len) {
			char *end = strstr(a->mem, "\r\n\r\n");
			if (!end && used > HEAD_MAX)
				return fail(c, EPROTO, "%s answered a status line and headers longer than %u KiB", c->ep->url,
					    HEAD_MAX >> 10);
			if (!end)
				continue;
			head_len = (size_t)(end - a->mem) + 4;
			a->mem[head_len - 2] = 0; /* the headers end at their last CRLF */
			if ((r = parse_head(c, a, &body_len)))
				return r;
			a->mem[head_len - 2] = '\r';
		}
		if (used - head_len > HTTPS_ANSWER_MAX)
			return fail(c, EMSGSIZE, "HTTP %d %s from %s: the answer is more than iserctl reads (%u MiB)",
				    a->status, a->reason, c->ep->url, HTTPS_ANSWER_MAX >> 20);
	}
	a->body = a->mem + head_len;
	a->len = body_len >= 0 ? (size_t)body_len : used - head_len;
	a->mem[head_len + a->len] = 0; /* anything past Content-Length is not the answer */
	return 0;
}

static int exchange(struct conn *c, const char *body, size_t len, struct https_answer *a)
{
	/* The files first: a certificate that cannot be used is said even when isertd cannot be reached. */
	int r = ctx_setup(c);
	if (r || (r = tcp_connect(c)) || (r = ssl_setup(c)))
		return r;
	for (;;) {
		ERR_clear_error();
		errno = 0;
		int h = SSL_connect(c->ssl);
		if (h == 1)
			break;
		if ((r = tls_again(c, h, "during the TLS handshake")))
			return r > 0 ? tls_fail(c, "during the TLS handshake") : r;
	}
	const struct admin_endpoint *ep = c->ep;
	char head[512];
	const char *lb = c->u.v6 ? "[" : "", *rb = c->u.v6 ? "]" : "";
	int n = snprintf(head, sizeof(head),
			 "POST /rpc HTTP/1.1\r\nHost: %s%s%s:%s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n%s%s%s\r\n",
			 lb, c->u.host, rb, c->u.port, len, ep->token ? "Authorization: Bearer " : "",
			 ep->token ? ep->token : "", ep->token ? "\r\n" : "");
	if (n < 0 || (size_t)n >= sizeof(head))
		return fail(c, EINVAL, "the request's header is too long");
	r = tls_write(c, head, (size_t)n);
	OPENSSL_cleanse(head, sizeof(head)); /* it held the token */
	if (!r)
		r = tls_write(c, body, len);
	if (!r || r == -ETIMEDOUT)
		return r ? r : read_answer(c, a);
	/*
	 * The server may answer and close before it read the whole request (a 401 or 413 at once; with TLS 1.3
	 * the alert refusing a client certificate comes after the client's handshake ended): what it sent is
	 * still to be read, and says more than the reset.
	 */
	char wrote[512];
	snprintf(wrote, sizeof(wrote), "%s", c->err);
	int rr = read_answer(c, a);
	if (!rr || rr == -EPROTO || rr == -EMSGSIZE)
		return rr;
	snprintf(c->err, c->errlen, "%s", wrote);
	return r;
}

int https_post(const struct admin_endpoint *ep, const char *body, size_t len, int timeout_ms, struct https_answer *a,
	       char *err, size_t errlen)
{
	*a = (struct https_answer){ 0 };
	struct conn c = { .ep = ep, .fd = -1, .timeout_ms = timeout_ms, .err = err, .errlen = errlen };
	int r = admin_url_parse(ep->url, &c.u, err, errlen);
	if (r)
		return r;
	if (ep->token && !admin_token_valid(ep->token, strlen(ep->token)))
		return fail(&c, EINVAL, "the token is not 64 lowercase hex characters (iserctl token create makes one)");
	if (len > HTTPS_REQUEST_MAX)
		return fail(&c, EMSGSIZE, "the request is %zu bytes, more than the admin listener takes (%u MiB)", len,
			    HTTPS_REQUEST_MAX >> 20);
	/*
	 * OpenSSL writes with write(2): a server that closes first would kill the caller with SIGPIPE.  Blocked
	 * here and any pending one taken, so the caller's own handling of SIGPIPE (a closed stdout) is as before.
	 */
	sigset_t pipe, old;
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	bool was_pending = false;
	sigset_t pend;
	if (!sigpending(&pend))
		was_pending = sigismember(&pend, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &old);
	c.deadline = now_ms() + timeout_ms;
	r = exchange(&c, body, len, a);
	if (c.ssl) {
		/* close_notify, without waiting for the server's: the answer is read. */
		if (!r)
			SSL_shutdown(c.ssl);
		SSL_free(c.ssl);
	}
	SSL_CTX_free(c.ctx);
	if (c.fd >= 0)
		close(c.fd);
	if (!was_pending && !sigpending(&pend) && sigismember(&pend, SIGPIPE))
		sigtimedwait(&pipe, NULL, &(struct timespec){ 0 });
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	ERR_clear_error();
	if (r)
		https_answer_free(a);
	return r;
}

void https_answer_free(struct https_answer *a)
{
	if (a->mem) {
		OPENSSL_cleanse(a->mem, a->cap);
		free(a->mem);
	}
	*a = (struct https_answer){ 0 };
}
