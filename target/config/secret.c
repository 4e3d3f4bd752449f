/*
 * Target configuration: secrets.  Where they are in the document (the
 * password and mutual_password of every chap object: an ACL's and the
 * discovery section's "chap", a portal group's "demo_chap"), the masking
 * every printed, logged or returned document and change goes through, the
 * wiping of every copy isertd is done with, and secrets kept out of the
 * document in files (password_file, a systemd credential).
 * docs/security.md states the rules.
 */
#include "target/config/config_int.h"

#include "common/secret_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const holders[] = { "chap", "demo_chap", NULL };
static const char *const members[] = { "password", "mutual_password", NULL };

static bool in(const char *const *l, const char *k)
{
	for (; *l; l++)
		if (!strcmp(*l, k))
			return true;
	return false;
}

/*
 * Every string in v overwritten in place.  json-c hands out its own storage
 * (the object is ours and about to be freed), and frees it without wiping.
 */
static void wipe_strings(json_object *v)
{
	if (json_object_is_type(v, json_type_string)) {
		explicit_bzero((char *)json_object_get_string(v), (size_t)json_object_get_string_len(v));
	} else if (json_object_is_type(v, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(v); i++)
			wipe_strings(json_object_array_get_idx(v, i));
	} else if (json_object_is_type(v, json_type_object)) {
		json_object_object_foreach(v, k, m)
		{
			(void)k;
			wipe_strings(m);
		}
	}
}

/* What stands where a chap object belongs: its secrets, or all of it when it is not an object (as masked). */
static void wipe_holder(json_object *v)
{
	if (!json_object_is_type(v, json_type_object)) {
		wipe_strings(v);
		return;
	}
	json_object_object_foreach(v, k, m)
		if (in(members, k))
			wipe_strings(m);
}

void config_wipe_secrets(json_object *o)
{
	if (json_object_is_type(o, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(o); i++)
			config_wipe_secrets(json_object_array_get_idx(o, i));
		return;
	}
	if (!json_object_is_type(o, json_type_object))
		return;
	json_object_object_foreach(o, k, v)
	{
		if (in(holders, k))
			wipe_holder(v);
		else
			config_wipe_secrets(v);
	}
}

void config_wipe_text(const char *s)
{
	/* Our own buffer, or json-c's serialization of an object of ours that is about to be freed. */
	if (s)
		explicit_bzero((char *)s, strlen(s));
}

/* A chap object with its secrets masked (never copied); anything else where a chap object belongs is masked whole. */
static json_object *masked_holder(json_object *v)
{
	if (!v || json_object_is_type(v, json_type_null))
		return json_object_get(v);
	if (!json_object_is_type(v, json_type_object))
		return json_object_new_string(CONFIG_REDACTED);
	json_object *o = json_object_new_object();
	json_object_object_foreach(v, k, m)
	{
		json_object *c = NULL;
		if (!o)
			break;
		if (in(members, k))
			c = json_object_new_string(CONFIG_REDACTED);
		else if (m && json_object_deep_copy(m, &c, NULL))
			c = json_object_new_string(CONFIG_REDACTED);
		json_object_object_add(o, k, c);
	}
	return o ? o : json_object_new_string(CONFIG_REDACTED);
}

void config_redact(json_object *o)
{
	if (json_object_is_type(o, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(o); i++)
			config_redact(json_object_array_get_idx(o, i));
		return;
	}
	if (!json_object_is_type(o, json_type_object))
		return;
	json_object_object_foreach(o, k, v)
	{
		if (in(holders, k)) {
			json_object *m = masked_holder(v);
			wipe_holder(v);
			json_object_object_add(o, k, m); /* replaces v: the walk is done with it */
		} else {
			config_redact(v);
		}
	}
}

json_object *config_redacted(const char *parent, const char *key, json_object *v)
{
	if (parent && in(holders, parent) && in(members, key) && v && !json_object_is_type(v, json_type_null))
		return json_object_new_string(CONFIG_REDACTED);
	if (in(holders, key))
		return masked_holder(v);
	json_object *o = NULL;
	if (json_object_deep_copy(v, &o, NULL) || !o)
		return json_object_new_string(CONFIG_REDACTED); /* out of memory: show nothing rather than the value */
	config_redact(o);
	return o;
}

bool cfg_path_secret(const char *path)
{
	/* path is the loader's: "targets[0].tpgs[1].acls[2].chap.password" */
	for (const char *s = path; *s;) {
		size_t n = strcspn(s, ".[");
		for (const char *const *h = holders; *h; h++)
			if (strlen(*h) == n && !strncmp(s, *h, n))
				return true;
		s += n;
		s += strspn(s, ".[]0123456789");
	}
	return false;
}

/* Wiped before the memory goes back: a freed secret is not left for a core dump or the next malloc. */
static void free_secret(char *s)
{
	if (s)
		explicit_bzero(s, strlen(s));
	free(s);
}

void config_chap_free(struct cfg_chap *c)
{
	free(c->userid);
	free_secret(c->password);
	free(c->mutual_userid);
	free_secret(c->mutual_password);
	free(c->password_file);
	free(c->mutual_password_file);
	*c = (struct cfg_chap){ 0 };
}

/* ------------------------------------------------------------------------ */
/* Secrets in files. */

/* One line; its newline (as echo and editors leave it) is not part of the secret. */
static int one_line_secret(struct pctx *p, const char *path, const char *buf, size_t len, char **out)
{
	if (len && buf[len - 1] == '\n')
		len--;
	if (len && buf[len - 1] == '\r')
		len--;
	if (len > CFG_CHAP_MAX)
		return cfg_perr(p, "%s: longer than %d characters", path, CFG_CHAP_MAX);
	if (!len)
		return cfg_perr(p, "%s: is empty", path);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			return cfg_perr(p, "%s: holds a control character (a CHAP secret is one line of text)", path);
	*out = strndup(buf, len);
	return *out ? 0 : cfg_enomem(p);
}

int cfg_read_secret_file(struct pctx *p, const char *name, char **out)
{
	char path[4096];
	const char *dir = getenv("CREDENTIALS_DIRECTORY");
	bool credential = name[0] != '/';
	if (credential) {
		/* A relative name is a systemd credential (LoadCredential=NAME:PATH in the unit). */
		if (!dir || !*dir)
			return cfg_perr(p, "'%s' is not an absolute path, so it names a systemd credential, but "
					   "$CREDENTIALS_DIRECTORY is not set: give the file's absolute path, or "
					   "LoadCredential=%s:PATH in isertd's unit", name, name);
		if (strchr(name, '/'))
			return cfg_perr(p, "'%s': a credential name has no '/'", name);
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
			return cfg_perr(p, "'%s': $CREDENTIALS_DIRECTORY/%s is too long", name, name);
	} else if ((size_t)snprintf(path, sizeof(path), "%s", name) >= sizeof(path)) {
		return cfg_perr(p, "longer than %zu bytes", sizeof(path) - 1);
	}
	char buf[CFG_CHAP_MAX + 3], why[4200];
	size_t n;
	int r = secret_file_read(path, credential, "isertd's user", buf, sizeof(buf), &n, why, sizeof(why));
	if (r)
		r = cfg_perr(p, "%s", why);
	else
		r = one_line_secret(p, path, buf, n, out);
	/* The file's text, refused or not: only the copy the CHAP code keeps outlives this call. */
	explicit_bzero(buf, sizeof(buf));
	return r;
}
