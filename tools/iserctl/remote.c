/*
 * iserctl --url: where the HTTPS admin listener is and how iserctl proves
 * who it is (docs/admin-remote-client.md).  Options win over the
 * environment; no secret is taken from the command line: the token comes
 * from a file or $ISERCTL_TOKEN, and a URL that could carry one is refused.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adminrpc.h"
#include "iserctl.h"
#include "token.h"
#include "url.h"

static char token[ADMIN_TOKEN_LEN + 1];
static const char *token_file;

static void wipe_token(void)
{
	OPENSSL_cleanse(token, sizeof(token));
}

/* A variable of the environment, NULL when unset or empty. */
static const char *env(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? v : NULL;
}

__attribute__((format(printf, 1, 2))) static int usage_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "iserctl: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	return EX_USAGE;
}

int remote_setup(const struct remote_args *a, struct admin_endpoint *ep)
{
	const char *url = a->url ? a->url : a->socket_given ? NULL : env("ISERCTL_URL");
	if (a->url && a->socket_given)
		return usage_err("--socket and --url: one or the other (the local socket, or the HTTPS listener)");
	if (!url) {
		const char *lone = a->cacert ? "--cacert" : a->cert ? "--cert" : a->key ? "--key"
				 : a->token_file ? "--token-file" : NULL;
		return lone ? usage_err("%s: only with --url https://HOST:PORT (or $ISERCTL_URL)", lone) : EX_OK;
	}
	struct admin_url u;
	char why[512];
	if (admin_url_parse(url, &u, why, sizeof(why)))
		return usage_err("%s", why);
	ep->url = url;
	ep->cacert = a->cacert ? a->cacert : env("ISERCTL_CACERT");
	ep->cert = a->cert ? a->cert : env("ISERCTL_CERT");
	ep->key = a->key ? a->key : env("ISERCTL_KEY");
	if (!ep->cert != !ep->key)
		return usage_err("--cert and --key go together (a client certificate and its key; $ISERCTL_CERT, "
				 "$ISERCTL_KEY)");
	const char *tok_env = env("ISERCTL_TOKEN");
	token_file = a->token_file;
	if (!token_file && env("ISERCTL_TOKEN_FILE")) {
		if (tok_env)
			return usage_err("both $ISERCTL_TOKEN and $ISERCTL_TOKEN_FILE are set: unset one");
		token_file = env("ISERCTL_TOKEN_FILE");
	}
	if (!token_file && tok_env) {
		if (!admin_token_valid(tok_env, strlen(tok_env)))
			return usage_err("$ISERCTL_TOKEN is not a token (64 lowercase hex characters, as iserctl token "
					 "create writes)");
		ep->token = tok_env;
	}
	return EX_OK;
}

int remote_token(struct admin_endpoint *ep)
{
	if (!ep->url || !token_file || ep->token)
		return EX_OK;
	char why[512];
	if (admin_token_read(token_file, token, why, sizeof(why)))
		return usage_err("%s", why);
	atexit(wipe_token);
	ep->token = token;
	return EX_OK;
}
