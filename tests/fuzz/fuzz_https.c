/*
 * The HTTPS admin door (target/control/https.c): the input is what a
 * client sends inside TLS (request line, headers, body, or several
 * requests), over a real TLS connection on loopback to the real server,
 * which runs here on the harness's own thread (https_run: the admin
 * thread's turn) in front of the real dispatcher.  Changes are planned,
 * not carried out (rpc_plan_only), as in fuzz_rpc.
 *
 * The configuration has two principals with tokens the dictionary holds:
 * an admin (64 'a') and a reader limited to one target (64 'b'), so inputs
 * reach the methods through both.  Asserted: every answer is an HTTP
 * response; each with a JSON body is a JSON-RPC object with an error or a
 * result; a 200 comes only to a request that carried a principal's token;
 * the reader never gets a change's result; a refusal (401, 403, 413, 429,
 * an error) leaves the running configuration as it was.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "fuzz.h"
#include "target/control/https.h"
#include "target/control/rpc.h"
#include "target/control/rpc_int.h"
#include "target/iscsi/iscsi.h"

#define TOKEN_ADMIN  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define TOKEN_READER "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define ANSWER_MAX   (4u << 20)

static char dir[] = "/tmp/isert-fuzz-https-XXXXXX";
static uint16_t port;

static void write_file(const char *name, const void *data, size_t len)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	FUZZ_CHECK(fd >= 0 && write(fd, data, len) == (ssize_t)len, "%s: %s", path, strerror(errno));
	close(fd);
}

/* A self-signed ECDSA certificate and its key, made once. */
static void make_cert(void)
{
	gnutls_x509_privkey_t key;
	gnutls_x509_crt_t crt;
	gnutls_datum_t out;
	FUZZ_CHECK(gnutls_x509_privkey_init(&key) >= 0 && gnutls_x509_crt_init(&crt) >= 0, "gnutls init");
	FUZZ_CHECK(gnutls_x509_privkey_generate(key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1),
						0) >= 0, "key");
	unsigned char serial = 1;
	time_t now = time(NULL);
	FUZZ_CHECK(gnutls_x509_crt_set_version(crt, 3) >= 0 && gnutls_x509_crt_set_serial(crt, &serial, 1) >= 0 &&
			   gnutls_x509_crt_set_activation_time(crt, now - 3600) >= 0 &&
			   gnutls_x509_crt_set_expiration_time(crt, now + 86400) >= 0 &&
			   gnutls_x509_crt_set_dn(crt, "CN=localhost", NULL) >= 0 &&
			   gnutls_x509_crt_set_key(crt, key) >= 0 &&
			   gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0) >= 0,
		   "certificate");
	FUZZ_CHECK(gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &out) >= 0, "export");
	write_file("cert.pem", out.data, out.size);
	gnutls_free(out.data);
	FUZZ_CHECK(gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &out) >= 0, "export key");
	write_file("key.pem", out.data, out.size);
	gnutls_free(out.data);
	gnutls_x509_crt_deinit(crt);
	gnutls_x509_privkey_deinit(key);
}

static void write_hash(const char *name, const char *token)
{
	uint8_t sum[32];
	char line[80];
	FUZZ_CHECK(gnutls_hash_fast(GNUTLS_DIG_SHA256, token, 64, sum) >= 0, "hash");
	int n = snprintf(line, sizeof(line), "sha256:");
	for (int i = 0; i < 32; i++)
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%02x", sum[i]);
	line[n++] = '\n';
	write_file(name, line, (size_t)n);
}

/* A port nothing listens on now (the server binds it next). */
static uint16_t free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	FUZZ_CHECK(fd >= 0 && !bind(fd, (struct sockaddr *)&sa, sizeof(sa)) &&
			   !getsockname(fd, (struct sockaddr *)&sa, &sl),
		   "port: %s", strerror(errno));
	close(fd);
	return ntohs(sa.sin_port);
}

static void setup(void)
{
	static struct config *cfg;
	char err[512], doc[4096];
	if (cfg)
		return;
	FUZZ_CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	make_cert();
	write_hash("admin.sha256", TOKEN_ADMIN);
	write_hash("reader.sha256", TOKEN_READER);
	port = free_port();
	snprintf(doc, sizeof(doc),
		 "{ \"global\": { \"admin_https\": { \"listen\": \"127.0.0.1:%u\", \"certificate\": \"%s/cert.pem\","
		 "  \"key\": \"%s/key.pem\", \"request_timeout\": 5, \"principals\": ["
		 "  { \"name\": \"admin\", \"role\": \"admin\", \"token_hash_file\": \"%s/admin.sha256\" },"
		 "  { \"name\": \"reader\", \"role\": \"reader\", \"token_hash_file\": \"%s/reader.sha256\","
		 "    \"targets\": [ \"iqn.2026-11.org.isert:fuzz\" ] } ] } },"
		 "  \"backstores\": [ { \"name\": \"r0\", \"type\": \"ram\", \"size\": \"1M\" } ],"
		 "  \"targets\": [ { \"iqn\": \"iqn.2026-11.org.isert:fuzz\", \"tpgs\": [ { \"tag\": 1, \"enable\": true,"
		 "    \"demo_mode\": true, \"portals\": [ { \"ip\": \"127.0.0.1\", \"port\": 3260 } ],"
		 "    \"luns\": [ { \"lun\": 0, \"backstore\": \"r0\" } ] } ] } ] }",
		 port, dir, dir, dir, dir);
	FUZZ_CHECK(!config_load_string(doc, "fuzz", &cfg, err, sizeof(err)), "%s", err);
	FUZZ_CHECK(!iscsi_setup(cfg, NULL, 0, err, sizeof(err)), "%s", err);
	FUZZ_CHECK(!https_prepare(cfg, err, sizeof(err)), "%s", err);
	https_commit();
	https_run();
	FUZZ_CHECK(https_fd() >= 0, "the HTTPS server did not start");
	rpc_plan_only = true;
}

/* The server's turn, once it or the client (cfd) has something to do, or after 1 ms. */
static void turn(int cfd)
{
	struct pollfd p[2] = { { .fd = https_fd(), .events = POLLIN }, { .fd = cfd, .events = POLLIN } };
	poll(p, 2, https_timeout_ms(1));
	https_run();
}

static int connect_tls(gnutls_session_t *s, gnutls_certificate_credentials_t cr)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	FUZZ_CHECK(fd >= 0, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) && errno != EINPROGRESS)
		FUZZ_CHECK(0, "connect: %s", strerror(errno));
	gnutls_init(s, GNUTLS_CLIENT | GNUTLS_NONBLOCK);
	gnutls_set_default_priority(*s);
	gnutls_credentials_set(*s, GNUTLS_CRD_CERTIFICATE, cr);
	gnutls_transport_set_int(*s, fd);
	int r, tries = 0;
	do {
		turn(fd);
		r = gnutls_handshake(*s);
	} while (r < 0 && !gnutls_error_is_fatal(r) && ++tries < 2000);
	FUZZ_CHECK(r >= 0, "handshake: %s", gnutls_strerror(r));
	return fd;
}

/* Each response in buf (HTTP/1.1, a Content-Length each): checked; how many. */
static unsigned check_answers(const char *buf, size_t len, bool admin, bool reader, const char *before,
			      uint64_t gen)
{
	unsigned n = 0;
	while (buf && len) {
		FUZZ_CHECK(len >= 12 && !memcmp(buf, "HTTP/1.", 7), "not an HTTP response: %.*s", (int)(len < 200 ? len : 200),
			   buf);
		int status = atoi(buf + 9);
		const char *end = memmem(buf, len, "\r\n\r\n", 4);
		if (!end)
			break; /* cut by the connection's end */
		size_t head = (size_t)(end + 4 - buf), body = 0;
		const char *cl = memmem(buf, head, "Content-Length: ", 16);
		/* Without a Content-Length the body runs to the connection's end (libmicrohttpd's own errors). */
		body = cl ? strtoul(cl + 16, NULL, 10) : len - head;
		if (head + body > len)
			break;
		n++;
		FUZZ_CHECK(status != 200 || admin || reader, "200 without a principal's token: %.*s", (int)head, buf);
		/* What is not HTTP gets libmicrohttpd's own answer (HTML): an error status, never a method's result. */
		bool json = memmem(buf, head, "Content-Type: application/json", 30) != NULL;
		FUZZ_CHECK(json || status >= 400, "status %d without a JSON body: %.*s", status, (int)head, buf);
		if (!json)
			return n + 1; /* libmicrohttpd closes after it (0.9.75 may send its head twice): nothing more to read */
		if (body && json) {
			json_tokener *tok = json_tokener_new();
			json_object *r = json_tokener_parse_ex(tok, buf + head, (int)body), *v, *e;
			FUZZ_CHECK(r && json_object_is_type(r, json_type_object), "body not a JSON object: %.*s",
				   (int)body, buf + head);
			FUZZ_CHECK(json_object_object_get_ex(r, "jsonrpc", &v), "no jsonrpc: %.*s", (int)body, buf + head);
			bool res = json_object_object_get_ex(r, "result", &v), err = json_object_object_get_ex(r, "error", &e);
			FUZZ_CHECK(res != err, "result and error: %.*s", (int)body, buf + head);
			FUZZ_CHECK(!res || status == 200, "a result with status %d", status);
			if (err) {
				FUZZ_CHECK(gen == rpc_st.generation, "a refusal changed the generation");
				char *after = config_to_json(rt_config());
				FUZZ_CHECK(!strcmp(before, after), "a refusal changed the configuration: %.*s", (int)body,
					   buf + head);
				free(after);
			}
			json_object_put(r);
			json_tokener_free(tok);
		}
		buf += head + body;
		len -= head + body;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static gnutls_certificate_credentials_t cr;
	if (size > (1u << 20) + 4096)
		return 0;
	setup();
	if (!cr)
		gnutls_certificate_allocate_credentials(&cr); /* the client trusts anything: the server is ours */
	bool admin = memmem(data, size, TOKEN_ADMIN, 64) != NULL, reader = memmem(data, size, TOKEN_READER, 64) != NULL;
	char *before = config_to_json(rt_config());
	uint64_t gen = rpc_st.generation;
	gnutls_session_t s;
	int fd = connect_tls(&s, cr);
	size_t sent = 0;
	char *in = malloc(ANSWER_MAX);
	FUZZ_CHECK(in, "out of memory");
	size_t got = 0;
	bool closed = false;
	bool bye = false;
	/* Until the server closes, or is quiet for 200 turns once all is sent (it may wait for a body never sent). */
	for (int i = 0, quiet = 0; i < 4000 && !closed && quiet < 200; i++) {
		if (sent < size) {
			ssize_t w = gnutls_record_send(s, data + sent, size - sent);
			if (w > 0)
				sent += (size_t)w;
			else if (w < 0 && gnutls_error_is_fatal((int)w))
				break; /* the server closed while we sent (a refusal it answered first) */
		} else if (!bye) {
			/* All sent: close_notify, so the server answers what is whole and closes, not waits for more. */
			bye = gnutls_bye(s, GNUTLS_SHUT_WR) != GNUTLS_E_AGAIN;
		}
		turn(fd);
		ssize_t r = gnutls_record_recv(s, in + got, ANSWER_MAX - got);
		if (r > 0)
			got += (size_t)r;
		else if (r == 0 || gnutls_error_is_fatal((int)r))
			closed = true;
		quiet = r > 0 || sent < size ? 0 : quiet + 1;
	}
	if (getenv("FUZZ_HTTPS_TRACE")) /* the server's answers, as they came */
		fwrite(in, 1, got, stderr);
	check_answers(in, got, admin, reader, before, gen);
	gnutls_deinit(s);
	close(fd);
	for (int i = 0; i < 5; i++)
		turn(-1); /* the server sees the close */
	free(in);
	free(before);
	return 0;
}
