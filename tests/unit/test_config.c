/* CUnit tests for the configuration (target/config/): loading, validation messages, round-trip, save, changes. */
#include "target/config/config.h"
#include "common/proto/iscsi_name.h"

#include <CUnit/Basic.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit_run.h"

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

static char errbuf[1024];

/* The source tree, found from the test binary (build/tests/unit/test_config)
 * and this file's path as the compiler saw it, so cwd does not matter. */
static char srcroot[PATH_MAX];

static void find_srcroot(void)
{
	char exe[PATH_MAX], file[PATH_MAX];
	const char *suffix = "/tests/unit/test_config.c";
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	if (n <= 0)
		return;
	exe[n] = '\0';
	if (__FILE__[0] == '/') {
		snprintf(file, sizeof(file), "%s", __FILE__);
	} else {
		/* builddir = dirname^3(exe) */
		char *d = dirname(dirname(dirname(exe)));
		snprintf(file, sizeof(file), "%s/%s", d, __FILE__);
	}
	size_t fl = strlen(file), sl = strlen(suffix);
	if (fl > sl && !strcmp(file + fl - sl, suffix))
		file[fl - sl] = '\0';
	if (!realpath(file, srcroot))
		srcroot[0] = '\0';
}

static char *src_path(const char *rel)
{
	static char buf[PATH_MAX + 64];

	snprintf(buf, sizeof(buf), "%s/%s", srcroot, rel);
	return buf;
}

static struct config *load_ok(const char *json)
{
	struct config *c = NULL;
	int r = config_load_string(json, "t.json", &c, errbuf, sizeof(errbuf));

	if (r)
		fprintf(stderr, "\nunexpected error: %s\n", errbuf);
	CU_ASSERT_EQUAL(r, 0);
	return c;
}

/* Load must fail and the message must contain want. */
static void load_bad(const char *json, const char *want)
{
	struct config *c = (struct config *)1;
	int r;

	errbuf[0] = '\0';
	r = config_load_string(json, "t.json", &c, errbuf, sizeof(errbuf));
	CU_ASSERT_EQUAL(r, -EINVAL);
	CU_ASSERT_PTR_NULL(c);
	if (!strstr(errbuf, want))
		fprintf(stderr, "\nwanted \"%s\"\n   got \"%s\"\n", want, errbuf);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, want));
	if (r == 0)
		config_free(c);
}

#define BS_RAM "\"backstores\":[{\"name\":\"r\",\"type\":\"ram\",\"size\":1048576}]"
#define TGT(tpg) "\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\",\"tpgs\":[{" tpg "}]}]"
#define DOC(tpg) "{" BS_RAM "," TGT(tpg) "}"
#define LUN0 "\"luns\":[{\"lun\":0,\"backstore\":\"r\"}]"

/* ---------------------------------------------------------------- default */

static void test_default(void)
{
	struct config *c = load_ok(config_default_json);

	if (!c)
		return;
	CU_ASSERT_STRING_EQUAL(c->origin, "t.json");
	CU_ASSERT_EQUAL(c->nbackstores, 1);
	CU_ASSERT_STRING_EQUAL(c->backstores[0].name, "ram0");
	CU_ASSERT_PTR_EQUAL(c->backstores[0].bs.name, c->backstores[0].name);
	CU_ASSERT_EQUAL(c->backstores[0].bs.type, BACKSTORE_RAM);
	CU_ASSERT_EQUAL(c->backstores[0].bs.size, 1ull << 30);
	CU_ASSERT_EQUAL(c->backstores[0].bs.block_size, 512);
	CU_ASSERT_PTR_NULL(c->backstores[0].path);
	CU_ASSERT_EQUAL(c->ntargets, 1);
	CU_ASSERT_STRING_EQUAL(c->targets[0].iqn, "iqn.2026-11.org.isert:default");
	CU_ASSERT_TRUE(iscsi_name_valid(c->targets[0].iqn));
	CU_ASSERT_EQUAL(c->targets[0].ntpgs, 1);
	struct cfg_tpg *t = &c->targets[0].tpgs[0];
	CU_ASSERT_EQUAL(t->tag, 1);
	CU_ASSERT_TRUE(t->enable);
	CU_ASSERT_TRUE(t->demo_mode);
	CU_ASSERT_FALSE(t->demo_write_protect);
	CU_ASSERT_PTR_NULL(t->demo_chap.userid);
	CU_ASSERT_EQUAL(t->nportals, 1);
	CU_ASSERT_STRING_EQUAL(t->portals[0].host, "127.0.0.1");
	CU_ASSERT_EQUAL(t->portals[0].port, 3260);
	CU_ASSERT_FALSE(t->portals[0].iser);
	CU_ASSERT_EQUAL(t->nluns, 1);
	CU_ASSERT_EQUAL(t->luns[0].lun, 0);
	CU_ASSERT_EQUAL(t->luns[0].backstore_index, 0);
	CU_ASSERT_EQUAL(t->nacls, 0);
	/* parameter defaults */
	CU_ASSERT_EQUAL(t->params.max_recv_dsl, 262144);
	CU_ASSERT_EQUAL(t->params.max_burst, 1048576);
	CU_ASSERT_EQUAL(t->params.first_burst, 65536);
	CU_ASSERT_EQUAL(t->params.max_outstanding_r2t, 1);
	CU_ASSERT_FALSE(t->params.initial_r2t);
	CU_ASSERT_TRUE(t->params.immediate_data);
	CU_ASSERT_TRUE(t->params.header_digest);
	CU_ASSERT_TRUE(t->params.data_digest);
	CU_ASSERT_EQUAL(t->params.default_time2wait, 2);
	CU_ASSERT_EQUAL(t->params.default_time2retain, 20);
	CU_ASSERT_EQUAL(t->params.max_connections, 1);
	CU_ASSERT_EQUAL(t->params.queue_depth, 128);
	CU_ASSERT_EQUAL(t->params.nop_in_interval, 0);
	CU_ASSERT_EQUAL(c->reactors, 0);
	CU_ASSERT_EQUAL(c->poll_mode, REACTOR_EVENT);
	CU_ASSERT_EQUAL(c->iser_srq, 0);
	CU_ASSERT_PTR_NULL(c->admin_socket);
	CU_ASSERT_FALSE(c->discovery_auth_required);
	config_free(c);
}

/* configs/default.json says the same as the embedded default. */
static void test_default_file_matches(void)
{
	struct config *a = load_ok(config_default_json), *b = NULL;
	int r = config_load_file(src_path("configs/default.json"), &b, errbuf, sizeof(errbuf));

	CU_ASSERT_EQUAL_FATAL(r, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	char *ja = config_to_json(a), *jb = config_to_json(b);
	CU_ASSERT_PTR_NOT_NULL(ja);
	CU_ASSERT_PTR_NOT_NULL(jb);
	if (ja && jb)
		CU_ASSERT_STRING_EQUAL(ja, jb);
	free(ja);
	free(jb);
	config_free(a);
	config_free(b);
}

static void test_examples(void)
{
	struct config *c = NULL;
	int r = config_load_file(src_path("configs/example-acl-chap.json"), &c, errbuf, sizeof(errbuf));

	if (r)
		fprintf(stderr, "\n%s\n", errbuf);
	CU_ASSERT_EQUAL_FATAL(r, 0);
	CU_ASSERT_EQUAL(c->nbackstores, 3);
	CU_ASSERT_EQUAL(c->backstores[0].bs.type, BACKSTORE_FILE);
	CU_ASSERT_EQUAL(c->backstores[0].bs.size, 20ull << 30);
	CU_ASSERT_EQUAL(c->backstores[0].bs.block_size, 4096);
	CU_ASSERT_TRUE(c->backstores[0].bs.thin);
	CU_ASSERT_STRING_EQUAL(c->backstores[0].serial, "VOL0-7f3a");
	CU_ASSERT_EQUAL(c->backstores[1].bs.size, 256ull << 20);
	CU_ASSERT_TRUE(c->backstores[2].bs.readonly);
	CU_ASSERT_EQUAL(c->backstores[2].bs.size, 0);
	struct cfg_tpg *t = &c->targets[0].tpgs[0];
	CU_ASSERT_EQUAL(t->nacls, 2);
	CU_ASSERT_TRUE(t->luns[2].read_only);
	CU_ASSERT_EQUAL(t->luns[2].backstore_index, 2);
	CU_ASSERT_STRING_EQUAL(t->acls[0].chap.userid, "db1");
	CU_ASSERT_PTR_NULL(t->acls[0].chap.mutual_userid);
	CU_ASSERT_STRING_EQUAL(t->acls[1].chap.mutual_userid, "storage1");
	CU_ASSERT_EQUAL(t->acls[1].luns[1].mapped_lun, 5);
	CU_ASSERT_EQUAL(t->acls[1].luns[1].tpg_lun, 2);
	CU_ASSERT_TRUE(t->acls[1].luns[1].write_protect);
	CU_ASSERT_FALSE(t->params.data_digest);
	CU_ASSERT_EQUAL(t->params.queue_depth, 64);
	CU_ASSERT_TRUE(c->discovery_auth_required);
	CU_ASSERT_STRING_EQUAL(c->discovery_chap.userid, "discovery");
	CU_ASSERT_STRING_EQUAL(c->admin_socket, "/run/isertd.sock");
	config_free(c);

	r = config_load_file(src_path("configs/example-nvme-iser.json"), &c, errbuf, sizeof(errbuf));
	if (r)
		fprintf(stderr, "\n%s\n", errbuf);
	CU_ASSERT_EQUAL_FATAL(r, 0);
	CU_ASSERT_EQUAL(c->backstores[0].bs.type, BACKSTORE_BLOCK);
	CU_ASSERT_STRING_EQUAL(c->backstores[0].bs.path, "/dev/nvme0n1");
	t = &c->targets[0].tpgs[0];
	CU_ASSERT_EQUAL(t->nportals, 2);
	CU_ASSERT_TRUE(t->portals[0].iser);
	CU_ASSERT_STRING_EQUAL(t->portals[0].host, "0.0.0.0");
	CU_ASSERT_FALSE(t->portals[1].iser);
	CU_ASSERT_NOT_EQUAL(t->portals[1].port, 3260);
	CU_ASSERT_EQUAL(c->poll_mode, REACTOR_ADAPTIVE);
	config_free(c);
}

/* Secrets are masked by their place: chap and demo_chap objects, wherever they sit. */
static void test_redact(void)
{
	struct config *c = NULL;
	int r = config_load_file(src_path("configs/example-acl-chap.json"), &c, errbuf, sizeof(errbuf));
	CU_ASSERT_EQUAL_FATAL(r, 0);
	json_object *doc = config_to_obj(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	config_redact(doc);
	const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	CU_ASSERT_PTR_NULL(strstr(text, c->targets[0].tpgs[0].acls[0].chap.password));
	CU_ASSERT_PTR_NULL(strstr(text, c->targets[0].tpgs[0].acls[1].chap.mutual_password));
	CU_ASSERT_PTR_NULL(strstr(text, c->discovery_chap.password));
	CU_ASSERT_PTR_NOT_NULL(strstr(text, "\"userid\":\"db1\""));
	json_object_put(doc);
	config_free(c);

	/* Admin parameters: a chap anywhere, a chap that is not an object, a demo_chap; null stays null. */
	json_object *p = json_tokener_parse("{\"a\":[{\"chap\":{\"userid\":\"u\",\"password\":\"s1\","
					    "\"mutual_password\":\"s2\"}}],\"chap\":\"s3\",\"x\":{\"demo_chap\":"
					    "{\"password\":[\"s4\"]}},\"y\":{\"chap\":null},\"password\":\"plain\"}");
	config_redact(p);
	CU_ASSERT_STRING_EQUAL(json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN),
			       "{\"a\":[{\"chap\":{\"userid\":\"u\",\"password\":\"********\","
			       "\"mutual_password\":\"********\"}}],\"chap\":\"********\",\"x\":{\"demo_chap\":"
			       "{\"password\":\"********\"}},\"y\":{\"chap\":null},\"password\":\"plain\"}");
	json_object_put(p);

	/* One value by its place (plans). */
	json_object *v = json_object_new_string("s5"), *m = config_redacted("chap", "password", v);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(m), CONFIG_REDACTED);
	json_object_put(m);
	m = config_redacted("acls", "password", v); /* not a chap's member: not a secret */
	CU_ASSERT_STRING_EQUAL(json_object_get_string(m), "s5");
	json_object_put(m);
	m = config_redacted(NULL, "demo_chap", v);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(m), CONFIG_REDACTED);
	json_object_put(m);
	json_object_put(v);

	/* Errors never quote a value in a secret's place. */
	load_bad("{\"discovery\":{\"chap\":{\"userid\":\"d\",\"password\":12345678901234}}}",
		 "discovery.chap.password: must be a string, got (not shown");
	load_bad("{\"discovery\":{\"chap\":\"my-secret-value\"}}", "discovery.chap: must be an object, got (not shown");
	CU_ASSERT_PTR_NULL(strstr(errbuf, "my-secret-value"));
	load_bad("{\"discovery\":{\"chap\":{\"userid\":\"d\",\"password\":\"********\"}}}", "is the mask");
}

/* Member path of o ("a.0.chap.password": object members and array indexes), a reference taken. */
static json_object *member(json_object *o, const char *path)
{
	char buf[128];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *save = NULL, *k = strtok_r(buf, ".", &save); o && k; k = strtok_r(NULL, ".", &save)) {
		if (json_object_is_type(o, json_type_array))
			o = json_object_array_get_idx(o, (size_t)atoi(k));
		else if (!json_object_object_get_ex(o, k, &o))
			o = NULL;
	}
	return json_object_get(o);
}

/* Every byte of the string zero (its length kept). */
static bool wiped(json_object *s)
{
	const char *b = json_object_get_string(s);
	int n = json_object_get_string_len(s);
	for (int i = 0; i < n; i++)
		if (b[i])
			return false;
	return n > 0;
}

#define SECRETS_DOC                                                                                     \
	"{\"a\":[{\"chap\":{\"userid\":\"u\",\"password\":\"secret-1\",\"mutual_password\":\"secret-2\"}}],"   \
	"\"chap\":\"secret-3\",\"x\":{\"demo_chap\":{\"password\":[\"secret-4\"]}},\"password\":\"plain\"}"

/* The secrets of a tree isertd is done with are overwritten before json-c frees them (config_redact's drop too). */
static void test_wipe_secrets(void)
{
	static const char *const secret[] = { "a.0.chap.password", "a.0.chap.mutual_password", "chap",
					      "x.demo_chap.password.0" };
	static const char *const kept[] = { "a.0.chap.userid", "password" };
	json_object *ref[6];
	for (int pass = 0; pass < 3; pass++) {
		json_object *p = json_tokener_parse(SECRETS_DOC);
		for (int i = 0; i < 4; i++)
			ref[i] = member(p, secret[i]);
		for (int i = 0; i < 2; i++)
			ref[4 + i] = member(p, kept[i]);
		if (pass == 0) {
			/* The masked copy a log line shows leaves the caller's tree alone. */
			json_object_put(config_redacted(NULL, "params", p));
			for (int i = 0; i < 4; i++)
				CU_ASSERT_FALSE(wiped(ref[i]));
		} else if (pass == 1) {
			config_redact(p); /* drops the secrets it masks */
		} else {
			config_wipe_secrets(p);
		}
		for (int i = 0; i < 4; i++)
			CU_ASSERT_EQUAL(wiped(ref[i]), pass > 0);
		CU_ASSERT_STRING_EQUAL(json_object_get_string(ref[4]), "u");
		CU_ASSERT_STRING_EQUAL(json_object_get_string(ref[5]), "plain");
		json_object_put(p);
		for (int i = 0; i < 6; i++)
			json_object_put(ref[i]);
	}
}

/* ------------------------------------------------------------- validation */

static void test_errors_paths(void)
{
	load_bad(DOC("\"tag\":1,\"portals\":[{\"ip\":\"127.0.0.1\"},{\"ip\":\"127.0.0.1\",\"port\":70000}]"),
		 "t.json: targets[0].tpgs[0].portals[1].port: must be 1-65535, got 70000");
	load_bad(DOC("\"tag\":1,\"portl\":[]"),
		 "t.json: targets[0].tpgs[0].portl: unknown key (expected one of: tag, enable");
	load_bad("{\"backstore\":[]}", "t.json: backstore: unknown key");
	load_bad("{" BS_RAM ",\"targets\":[{\"tpgs\":[]}]}", "t.json: targets[0].iqn: required field missing");
	load_bad(DOC("\"portals\":[]"), "targets[0].tpgs[0].tag: required field missing");
	load_bad(DOC("\"tag\":0"), "targets[0].tpgs[0].tag: must be 1-65535, got 0");
	load_bad(DOC("\"tag\":65536"), "tag: must be 1-65535, got 65536");
	load_bad(DOC("\"tag\":-1"), "tag: must be 1-65535, got -1");
	load_bad(DOC("\"tag\":1.5"), "tag: must be an integer, got 1.5");
	load_bad(DOC("\"tag\":\"1\""), "tag: must be an integer, got \"1\"");
	load_bad(DOC("\"tag\":99999999999999999999999"), "tag: must be 1-65535");
	load_bad(DOC("\"tag\":1,\"enable\":\"yes\""), "enable: must be true or false, got \"yes\"");
	load_bad(DOC("\"tag\":1,\"enable\":null"), "enable: must be true or false, got null");
	load_bad("{\"targets\":{}}", "t.json: targets: must be an array, got {}");
	load_bad("{\"targets\":[3]}", "t.json: targets[0]: must be an object, got 3");
	load_bad("[]", "t.json: the document must be a JSON object");
}

static void test_errors_backstores(void)
{
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"block_size\":1000}]}",
		 "backstores[0].block_size: must be 512, 1024, 2048 or 4096, got 1000");
	/* 1024 and 2048 are block sizes the backstores serve (one rule: backstore_check_geometry) */
	struct config *k = load_ok("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"block_size\":2048}]}");
	CU_ASSERT_PTR_NOT_NULL(k);
	config_free(k);
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":1000}]}",
		 "backstores[0].size: must be a multiple of the block size 512, got 1000");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4608,\"block_size\":4096}]}",
		 "size: must be a multiple of the block size 4096");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":0}]}",
		 "backstores[0].size: must be greater than 0 for a ram backstore");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\"}]}",
		 "backstores[0].size: required field missing");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":\"1X\"}]}",
		 "size: must be a byte count or a number with a K, M, G or T suffix");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":\"1.5G\"}]}", "size: must be a byte count");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":\"\"}]}", "size: must be a byte count");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":\"99999999999T\"}]}", "size: too large");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"tape\",\"size\":4096}]}",
		 "backstores[0].type: must be \"ram\", \"file\", \"block\", \"nvme\" or \"rbd\", got \"tape\"");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"file\"}]}", "backstores[0].path: required field missing");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"file\",\"path\":\"x.img\"}]}",
		 "path: must be an absolute path");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"path\":\"/x\"}]}",
		 "path: not allowed for a ram backstore");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"file\",\"path\":\"/x\",\"preallocate\":true}]}",
		 "backstores[0].preallocate: not for a file backstore (only ram)");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"thin\":true,\"preallocate\":true}]}",
		 "backstores[0].preallocate: not with thin");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"preallocate\":1}]}",
		 "backstores[0].preallocate: must be");
	load_bad("{\"backstores\":[{\"name\":\"a b\",\"type\":\"ram\",\"size\":4096}]}",
		 "backstores[0].name: may hold only letters");
	load_bad("{\"backstores\":[{\"name\":\"\",\"type\":\"ram\",\"size\":4096}]}", "name: must not be empty");
	load_bad("{\"backstores\":[{\"name\":\"a\\u0000b\",\"type\":\"ram\",\"size\":4096}]}",
		 "name: must not contain a NUL character");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096},"
		 "{\"name\":\"a\",\"type\":\"ram\",\"size\":4096}]}",
		 "backstores[1].name: duplicate backstore name \"a\", also in backstores[0]");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"file\",\"path\":\"/x\"},"
		 "{\"name\":\"b\",\"type\":\"block\",\"path\":\"/x\"}]}",
		 "backstores[1].path: \"/x\" is already used by backstores[0]");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"serial\":\"a b\"}]}",
		 "serial: must not contain spaces");
	/* One serial, one LU: configured twice, or configured as another's name (a name is its serial). */
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"serial\":\"S1\"},"
		 "{\"name\":\"b\",\"type\":\"ram\",\"size\":4096},"
		 "{\"name\":\"c\",\"type\":\"ram\",\"size\":4096,\"serial\":\"S1\"}]}",
		 "backstores[2].serial: \"S1\" is already the serial of backstores[0] (\"a\"): each LU of one isertd");
	load_bad("{\"backstores\":[{\"name\":\"b\",\"type\":\"ram\",\"size\":4096},"
		 "{\"name\":\"c\",\"type\":\"ram\",\"size\":4096,\"serial\":\"b\"}]}",
		 "backstores[1].serial: \"b\" is already the serial of backstores[0] (\"b\", whose serial is its name)");
	load_bad("{\"backstores\":[{\"name\":\"c\",\"type\":\"ram\",\"size\":4096,\"serial\":\"b\"},"
		 "{\"name\":\"b\",\"type\":\"ram\",\"size\":4096}]}",
		 "backstores[0].serial: \"b\" is already the serial of backstores[1] (\"b\", whose serial is its name)");
	/* A name equal to an rbd or nvme backstore's name does not clash: their serial is the store's own. */
	config_free(load_ok("{\"backstores\":[{\"name\":\"n\",\"type\":\"nvme\",\"path\":\"/dev/ng0n1\"},"
			    "{\"name\":\"c\",\"type\":\"ram\",\"size\":4096,\"serial\":\"n\"}]}"));
	/* backstore.create's check (one object added) refuses it too. */
	struct config *c1 = load_ok("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"serial\":\"S1\"}]}");
	struct cfg_backstore nb;
	json_object *o = json_tokener_parse("{\"name\":\"z\",\"type\":\"ram\",\"size\":4096,\"serial\":\"S1\"}");
	CU_ASSERT_EQUAL(config_check_backstore(c1, o, "backstore.create", &nb, errbuf, sizeof(errbuf)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "backstores[1].serial: \"S1\" is already the serial of backstores[0]"));
	json_object_put(o);
	config_free(c1);

	/* suffixes are powers of 1024; "iB"/"B" tails accepted */
	struct config *c = load_ok("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":\"3K\"},"
				   "{\"name\":\"b\",\"type\":\"ram\",\"size\":\"2MiB\"},"
				   "{\"name\":\"c\",\"type\":\"ram\",\"size\":\"1t\"},"
				   "{\"name\":\"d\",\"type\":\"block\",\"path\":\"/dev/x\",\"size\":0}]}");
	if (c) {
		CU_ASSERT_EQUAL(c->backstores[0].bs.size, 3072);
		CU_ASSERT_EQUAL(c->backstores[1].bs.size, 2u << 20);
		CU_ASSERT_EQUAL(c->backstores[2].bs.size, 1ull << 40);
		CU_ASSERT_EQUAL(c->backstores[3].bs.size, 0);
		CU_ASSERT_EQUAL(c->backstores[3].bs.block_size, 0);
		CU_ASSERT_EQUAL(c->ntargets, 0);
	}
	config_free(c);
}

static void test_errors_luns_acls(void)
{
	load_bad(DOC("\"tag\":1,\"luns\":[{\"lun\":16384,\"backstore\":\"r\"}]"),
		 "targets[0].tpgs[0].luns[0].lun: must be 0-16383, got 16384");
	load_bad(DOC("\"tag\":1,\"luns\":[{\"lun\":0,\"backstore\":\"nope\"}]"),
		 "targets[0].tpgs[0].luns[0].backstore: no backstore named \"nope\"");
	load_bad(DOC("\"tag\":1,\"luns\":[{\"lun\":3,\"backstore\":\"r\"},{\"lun\":3,\"backstore\":\"r\"}]"),
		 "luns[1].lun: duplicate LUN 3");
	load_bad(DOC("\"tag\":1," LUN0 ",\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\","
		     "\"mapped_luns\":[{\"mapped_lun\":0,\"tpg_lun\":1}]}]"),
		 "acls[0].mapped_luns[0].tpg_lun: the portal group has no LUN 1");
	load_bad(DOC("\"tag\":1," LUN0 ",\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\","
		     "\"mapped_luns\":[{\"mapped_lun\":2,\"tpg_lun\":0},{\"mapped_lun\":2,\"tpg_lun\":0}]}]"),
		 "acls[0].mapped_luns[1].mapped_lun: duplicate mapped LUN 2");
	load_bad(DOC("\"tag\":1," LUN0 ",\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\"},"
		     "{\"initiator\":\"iqn.2026-11.org.x:i\"}]"),
		 "acls[1].initiator: duplicate initiator \"iqn.2026-11.org.x:i\", also in acls[0]");
	load_bad(DOC("\"tag\":1,\"acls\":[{\"initiator\":\"eui.0123456789abcdef\"},"
		     "{\"initiator\":\"eui.0123456789ABCDEF\"}]"),
		 "acls[1].initiator: duplicate initiator");
	load_bad(DOC("\"tag\":1,\"acls\":[{\"initiator\":\"iqn.bogus\"}]"),
		 "acls[0].initiator: not a valid iSCSI name");
	load_bad(DOC("\"tag\":1,\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\",\"mapped_luns\":[{\"tpg_lun\":0}]}]"),
		 "mapped_luns[0].mapped_lun: required field missing");
	load_bad(DOC("\"tag\":1,\"portals\":[{\"ip\":\"localhost\"}]"),
		 "portals[0].ip: must be a numeric IPv4 or IPv6 address");
	load_bad(DOC("\"tag\":1,\"portals\":[{\"ip\":\"::1\",\"port\":3260},{\"ip\":\"0:0::1\"}]"),
		 "portals[1]: duplicate portal [0:0::1]:3260 (iser false), same as portals[0]");
	/* same address and port over TCP and iSER are distinct listeners */
	struct config *c = load_ok(DOC("\"tag\":1,\"portals\":[{\"ip\":\"0.0.0.0\"},{\"ip\":\"0.0.0.0\",\"iser\":true}]"));
	if (c)
		CU_ASSERT_EQUAL(c->targets[0].tpgs[0].nportals, 2);
	config_free(c);
	load_bad(DOC("\"tag\":1,\"portals\":[{\"ip\":\"::1\",\"tos\":256}]"), "portals[0].tos: must be 0-255, got 256");
	/* one listener (address, port, transport) in two TPGs: one ToS */
	load_bad("{\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\",\"tpgs\":[{\"tag\":1,\"portals\":[{\"ip\":\"::1\","
		 "\"tos\":104}]},{\"tag\":2,\"portals\":[{\"ip\":\"::1\"}]}]}]}",
		 "targets[0].tpgs[1].portals[0].tos: 0, but targets[0].tpgs[0].portals[0] has 104: they are one listener");
	c = load_ok("{\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\",\"tpgs\":[{\"tag\":1,\"portals\":[{\"ip\":\"::1\","
		    "\"tos\":104},{\"ip\":\"::1\",\"iser\":true}]},{\"tag\":2,\"portals\":[{\"ip\":\"::1\",\"tos\":104}]}]}]}");
	if (c) {
		CU_ASSERT_EQUAL(c->targets[0].tpgs[0].portals[0].tos, 104);
		CU_ASSERT_EQUAL(c->targets[0].tpgs[0].portals[1].tos, 0);
		char *out = config_to_json(c);
		/* written back where set, and only there */
		CU_ASSERT_PTR_NOT_NULL(out && strstr(out, "\"tos\": 104"));
		CU_ASSERT_PTR_NULL(out ? strstr(strstr(out, "\"tos\": 104") + 1, "\"tos\": 0") : NULL);
		free(out);
	}
	config_free(c);
	load_bad("{\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\",\"tpgs\":[{\"tag\":1},{\"tag\":1}]}]}",
		 "targets[0].tpgs[1].tag: duplicate portal group tag 1, also in tpgs[0]");
	load_bad("{\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\"},{\"iqn\":\"iqn.2026-11.org.test:t\"}]}",
		 "targets[1].iqn: duplicate target");
	load_bad("{\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:T\"}]}", "targets[0].iqn: not a valid iSCSI name");
}

static void test_errors_chap_params_global(void)
{
	load_bad(DOC("\"tag\":1,\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\","
		     "\"chap\":{\"userid\":\"u\",\"password\":\"short\"}}]"),
		 "acls[0].chap.password: CHAP secret must be at least 12 characters");
	load_bad(DOC("\"tag\":1,\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\","
		     "\"chap\":{\"mutual_userid\":\"t\",\"mutual_password\":\"0123456789abc\"}}]"),
		 "acls[0].chap: mutual CHAP requires one-way CHAP");
	load_bad(DOC("\"tag\":1,\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\","
		     "\"chap\":{\"userid\":\"u\",\"password\":\"0123456789abc\",\"mutual_userid\":\"t\","
		     "\"mutual_password\":\"0123456789abc\"}}]"),
		 "chap.mutual_password: must differ from password");
	load_bad(DOC("\"tag\":1,\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\","
		     "\"chap\":{\"userid\":\"u\",\"password\":\"0123456789abc\",\"mutual_userid\":\"t\"}}]"),
		 "chap: mutual CHAP needs both mutual_userid and mutual_password");
	load_bad(DOC("\"tag\":1,\"demo_chap\":{\"userid\":\"u\"}"), "demo_chap.password: required field missing");
	load_bad(DOC("\"tag\":1,\"demo_chap\":{\"userid\":\"u\",\"password\":\"0123456789abc\",\"secret\":1}"),
		 "demo_chap.secret: unknown key");
	load_bad(DOC("\"tag\":1,\"params\":{\"MaxBurstLength\":4096,\"FirstBurstLength\":8192}"),
		 "params.FirstBurstLength: must not exceed MaxBurstLength (4096), got 8192");
	load_bad(DOC("\"tag\":1,\"params\":{\"MaxRecvDataSegmentLength\":16777216}"),
		 "params.MaxRecvDataSegmentLength: must be 512-16777215, got 16777216");
	load_bad(DOC("\"tag\":1,\"params\":{\"HeaderDigest\":\"CRC32C\"}"), "params.HeaderDigest: must include None");
	load_bad(DOC("\"tag\":1,\"params\":{\"DataDigest\":\"MD5\"}"), "params.DataDigest: must be \"CRC32C,None\" or \"None\"");
	load_bad(DOC("\"tag\":1,\"params\":{\"InitialR2T\":\"yes\"}"), "params.InitialR2T: must be true, false, \"Yes\" or \"No\"");
	load_bad(DOC("\"tag\":1,\"params\":{\"DataPDUInOrder\":true}"), "params.DataPDUInOrder: unknown key");
	load_bad(DOC("\"tag\":1,\"params\":{\"MaxConnections\":0}"), "params.MaxConnections: must be 1-65535, got 0");
	load_bad("{\"discovery\":{\"auth_required\":true}}",
		 "discovery.auth_required: is true but no discovery chap is configured");
	load_bad("{\"global\":{\"poll_mode\":\"spin\"}}", "global.poll_mode: must be \"event\", \"busy\" or \"adaptive\", got \"spin\"");
	load_bad("{\"global\":{\"reactors\":5000}}", "global.reactors: must be 0-1024, got 5000");
	load_bad("{\"global\":{\"iser_srq\":100}}",
		 "global.iser_srq: must be 0 (each connection posts its own receives) or 160-65536, got 100");
	load_bad("{\"global\":{\"iser_srq\":70000}}", "global.iser_srq: must be 0-65536, got 70000");

	struct config *c = load_ok(DOC("\"tag\":1,\"params\":{\"InitialR2T\":\"Yes\",\"ImmediateData\":\"No\","
				       "\"HeaderDigest\":\"None\",\"DataDigest\":\"None,CRC32C\"}"));
	if (c) {
		struct cfg_params *pr = &c->targets[0].tpgs[0].params;
		CU_ASSERT_TRUE(pr->initial_r2t);
		CU_ASSERT_FALSE(pr->immediate_data);
		CU_ASSERT_FALSE(pr->header_digest);
		CU_ASSERT_TRUE(pr->data_digest);
		CU_ASSERT_EQUAL(pr->max_burst, 1048576);
	}
	config_free(c);
	c = load_ok("{\"global\":{\"poll_mode\":\"busy\",\"reactors\":3,\"iser_srq\":1024},\"discovery\":{\"auth_required\":false,"
		    "\"chap\":{\"userid\":\"d\",\"password\":\"0123456789abc\",\"mutual_userid\":\"m\","
		    "\"mutual_password\":\"cba9876543210\"}}}");
	if (c) {
		CU_ASSERT_EQUAL(c->poll_mode, REACTOR_BUSY_POLL);
		CU_ASSERT_EQUAL(c->reactors, 3);
		CU_ASSERT_EQUAL(c->iser_srq, 1024);
		CU_ASSERT_STRING_EQUAL(c->discovery_chap.mutual_password, "cba9876543210");
	}
	config_free(c);
}

/* The limits a peer runs into (docs/security.md): defaults, ranges, errors naming the key, and file mode. */
static void test_limits(void)
{
	struct config *c = load_ok(DOC("\"tag\":1"));
	if (c) {
		CU_ASSERT_EQUAL(c->login_timeout_s, 15);
		CU_ASSERT_EQUAL(c->max_connections, 4096);
		CU_ASSERT_EQUAL(c->max_connections_per_portal, 4096);
		CU_ASSERT_EQUAL(c->max_connections_per_host, 256);
		CU_ASSERT_EQUAL(c->max_sessions, 4096);
		CU_ASSERT_EQUAL(c->tcp_keepalive_s, 30);
		CU_ASSERT_EQUAL(c->buffer_pool_mb, 2048);
		CU_ASSERT_EQUAL(c->shutdown_timeout_s, 10);
		CU_ASSERT_EQUAL(c->adaptive_spin_us, 50);
		CU_ASSERT_EQUAL(c->targets[0].tpgs[0].params.max_immediate, 16);
		CU_ASSERT_EQUAL(c->targets[0].tpgs[0].params.session_buffer_mb, 64);
		CU_ASSERT_FALSE(c->targets[0].tpgs[0].demo_target_reset);
		CU_ASSERT_FALSE(config_has_secrets(c));
	}
	config_free(c);
	load_bad("{\"global\":{\"login_timeout\":0}}", "global.login_timeout: must be 1-3600, got 0");
	load_bad("{\"global\":{\"max_connections\":0}}", "global.max_connections: must be 1-1048576, got 0");
	load_bad("{\"global\":{\"max_connections_per_host\":-1}}", "global.max_connections_per_host");
	load_bad("{\"global\":{\"buffer_pool_mb\":8}}", "global.buffer_pool_mb: must be 16-1048576, got 8");
	load_bad("{\"global\":{\"shutdown_timeout\":\"5\"}}", "global.shutdown_timeout");
	load_bad("{\"global\":{\"adaptive_spin_us\":100001}}", "global.adaptive_spin_us: must be 0-100000, got 100001");
	load_bad("{\"global\":{\"max_conns\":5}}", "global.max_conns: unknown key");
	load_bad(DOC("\"tag\":1,\"params\":{\"MaxImmediateCommands\":0}"),
		 "params.MaxImmediateCommands: must be 1-1024, got 0");
	load_bad(DOC("\"tag\":1,\"params\":{\"SessionBufferMB\":70000}"),
		 "params.SessionBufferMB: must be 1-65536, got 70000");
	load_bad(DOC("\"tag\":1,\"demo_target_reset\":\"yes\""), "demo_target_reset");
	load_bad(DOC("\"tag\":1," LUN0 ",\"acls\":[{\"initiator\":\"iqn.2026-11.org.x:i\",\"allow_target_reset\":1}]"),
		 "acls[0].allow_target_reset");
	c = load_ok("{\"global\":{\"login_timeout\":3,\"max_connections\":10,\"max_connections_per_portal\":5,"
		    "\"max_connections_per_host\":2,\"max_sessions\":4,\"tcp_keepalive\":0,\"buffer_pool_mb\":64,"
		    "\"shutdown_timeout\":1,\"adaptive_spin_us\":0},\"discovery\":{\"chap\":{\"userid\":\"d\",\"password\":\"0123456789abc\"}}}");
	if (c) {
		CU_ASSERT_EQUAL(c->login_timeout_s, 3);
		CU_ASSERT_EQUAL(c->max_connections_per_host, 2);
		CU_ASSERT_EQUAL(c->tcp_keepalive_s, 0);
		CU_ASSERT_TRUE(config_has_secrets(c));
		/* Saved with every limit, and loads back the same. */
		char *j = config_to_json(c);
		CU_ASSERT(j && strstr(j, "\"max_connections_per_host\": 2"));
		struct config *d = j ? load_ok(j) : NULL;
		CU_ASSERT(d && d->shutdown_timeout_s == 1 && d->buffer_pool_mb == 64 && d->adaptive_spin_us == 0);
		config_free(d);
		free(j);
	}
	config_free(c);
}

static void test_syntax_errors(void)
{
	load_bad("{\n  \"targets\": [\n    {\"iqn\": tru}\n  ]\n}\n", "t.json: line 3, column 16: JSON syntax error");
	load_bad("{\"a\":1,}", "line 1, column 8: JSON syntax error");
	load_bad("{\"targets\":[]", "line 1, column 14: JSON syntax error: unexpected end of document");
	load_bad("{} x", "line 1, column 4: JSON syntax error");
	load_bad("", "JSON syntax error");
	load_bad("{/* comment */}", "line 1, column 2: JSON syntax error");
	load_bad("{\"global\":{\"admin_socket\":\"\xff\"}}", "JSON syntax error");
	/* multi-byte characters count as one column */
	load_bad("{\"\xc3\xa9\xc3\xa9\":x}", "line 1, column 7:");
}

/* ---------------------------------------------------------------- names */

static void test_iscsi_names(void)
{
	static const char *good[] = {
		"iqn.2026-11.org.isert:default", "iqn.1994-05.com.redhat:2d6c9e8f1a",
		"iqn.2001-04.com.example", "iqn.2001-04.com.example:storage:diskarrays-sn-a8675309",
		"iqn.2001-04.com.example:storage.tape1.sys1.xyz", "iqn.1991-05.com.microsoft:host_1",
		"eui.02004567A425678D", "eui.0123456789abcdef", "naa.52004567BA64678D",
		"naa.62004567BA64678D0123456789ABCDEF",
	};
	static const char *bad[] = {
		"", "iqn.", "iqn.2026-11", "iqn.2026-11.", "iqn.2026-13.org.x", "iqn.2026-00.org.x",
		"iqn.26-11.org.x", "iqn.2026-1.org.x", "iqn.2026-11.org..x", "iqn.2026-11.org.x.",
		"iqn.2026-11.Org.x", "iqn.2026-11.org.x:", "iqn.2026-11.org.x:UPPER", "iqn.2026-11.org.x:a b",
		"iqn.2026-11.org_x:a", "IQN.2026-11.org.x", "eui.0123", "eui.0123456789abcdefg",
		"eui.0123456789abcdeg", "naa.0123456789abcdef01", "naa.0123456789abcdez", "foo.bar",
		"iqn.2026-11.org.x:a/b",
	};
	char longname[300];

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		if (!iscsi_name_valid(good[i]))
			fprintf(stderr, "\nrejected good name %s\n", good[i]);
		CU_ASSERT_TRUE(iscsi_name_valid(good[i]));
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		if (iscsi_name_valid(bad[i]))
			fprintf(stderr, "\naccepted bad name %s\n", bad[i]);
		CU_ASSERT_FALSE(iscsi_name_valid(bad[i]));
	}
	CU_ASSERT_FALSE(iscsi_name_valid(NULL));
	/* 223 bytes is the limit */
	strcpy(longname, "iqn.2026-11.org.x:");
	size_t l = strlen(longname);
	memset(longname + l, 'a', 223 - l);
	longname[223] = '\0';
	CU_ASSERT_TRUE(iscsi_name_valid(longname));
	longname[223] = 'a';
	longname[224] = '\0';
	CU_ASSERT_FALSE(iscsi_name_valid(longname));
}

static void test_hostport(void)
{
	static const struct { const char *in, *host; uint16_t port; } good[] = {
		{ "127.0.0.1", "127.0.0.1", 3260 },
		{ "127.0.0.1:3261", "127.0.0.1", 3261 },
		{ "0.0.0.0:1", "0.0.0.0", 1 },
		{ "[::1]:3260", "::1", 3260 },
		{ "[::1]:65535", "::1", 65535 },
		{ "[fe80::1]", "fe80::1", 3260 },
		{ "::1", "::1", 3260 },
		{ "::", "::", 3260 },
		{ "2001:db8::1:3261", "2001:db8::1:3261", 3260 }, /* unbracketed v6: all address */
	};
	static const char *bad[] = {
		"", "localhost", "localhost:3260", "example.com", "127.0.0.1:", "127.0.0.1:0",
		"127.0.0.1:65536", "127.0.0.1:+1", "127.0.0.1:32x", "127.0.0.1:003260", "[::1", "[::1]x",
		"[::1]:", "[127.0.0.1]:3260", ":3260", "[]:3260", "1.2.3.4.5", "::1::2",
		"[::1]:99999999999999999999",
	};

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		char *h = NULL;
		uint16_t port = 0;
		int r = config_parse_hostport(good[i].in, &h, &port);
		if (r)
			fprintf(stderr, "\nrejected %s\n", good[i].in);
		CU_ASSERT_EQUAL(r, 0);
		if (!r) {
			CU_ASSERT_STRING_EQUAL(h, good[i].host);
			CU_ASSERT_EQUAL(port, good[i].port);
		}
		free(h);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char *h = NULL;
		uint16_t port = 0;
		int r = config_parse_hostport(bad[i], &h, &port);
		if (!r)
			fprintf(stderr, "\naccepted %s\n", bad[i]);
		CU_ASSERT_EQUAL(r, -EINVAL);
		CU_ASSERT_PTR_NULL(h);
		free(h);
	}
	CU_ASSERT_EQUAL(config_parse_hostport(NULL, &(char *){ NULL }, &(uint16_t){ 0 }), -EINVAL);
}

static void test_override_portals(void)
{
	struct config *c = load_ok("{" BS_RAM ",\"targets\":["
				   "{\"iqn\":\"iqn.2026-11.org.test:a\",\"tpgs\":[{\"tag\":1,\"portals\":["
				   "{\"ip\":\"1.2.3.4\"},{\"ip\":\"1.2.3.5\"}]},{\"tag\":2}]},"
				   "{\"iqn\":\"iqn.2026-11.org.test:b\",\"tpgs\":[{\"tag\":1,\"portals\":[{\"ip\":\"::\",\"iser\":true}]}]}]}");

	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(config_override_portals(c, "[::1]:3299", errbuf, sizeof(errbuf)), 0);
	struct cfg_tpg *tp[] = { &c->targets[0].tpgs[0], &c->targets[0].tpgs[1], &c->targets[1].tpgs[0] };
	for (size_t i = 0; i < ARRAY_SIZE(tp); i++) {
		CU_ASSERT_EQUAL(tp[i]->nportals, 1);
		CU_ASSERT_STRING_EQUAL(tp[i]->portals[0].host, "::1");
		CU_ASSERT_EQUAL(tp[i]->portals[0].port, 3299);
		CU_ASSERT_FALSE(tp[i]->portals[0].iser);
	}
	/* a bad override leaves the config as it was */
	CU_ASSERT_EQUAL(config_override_portals(c, "nohost:1", errbuf, sizeof(errbuf)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "nohost:1"));
	CU_ASSERT_STRING_EQUAL(tp[0]->portals[0].host, "::1");
	CU_ASSERT_EQUAL(config_override_portals_iser(c, "10.0.0.1", true, errbuf, sizeof(errbuf)), 0);
	CU_ASSERT_STRING_EQUAL(tp[2]->portals[0].host, "10.0.0.1");
	CU_ASSERT_EQUAL(tp[2]->portals[0].port, 3260);
	CU_ASSERT_TRUE(tp[2]->portals[0].iser);
	/* the result still serialises and reloads */
	char *j = config_to_json(c);
	struct config *d = load_ok(j);
	CU_ASSERT_PTR_NOT_NULL(d);
	if (d)
		CU_ASSERT_STRING_EQUAL(d->targets[0].tpgs[1].portals[0].host, "10.0.0.1");
	free(j);
	config_free(d);
	config_free(c);

	c = load_ok("{}");
	CU_ASSERT_EQUAL(config_override_portals(c, "127.0.0.1", errbuf, sizeof(errbuf)), -ENOENT);
	config_free(c);

	/* isertd --portal A --portal B: every TPG gets both (only the last survived before) */
	c = load_ok("{" BS_RAM ",\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:a\",\"tpgs\":[{\"tag\":1},{\"tag\":2}]}]}");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	const char *two[] = { "127.0.0.1:3301", "[::1]:3302" };
	CU_ASSERT_EQUAL(config_set_portals(c, two, 2, false, errbuf, sizeof(errbuf)), 0);
	for (size_t i = 0; i < 2; i++) {
		struct cfg_tpg *t = &c->targets[0].tpgs[i];
		CU_ASSERT_EQUAL_FATAL(t->nportals, 2);
		CU_ASSERT_STRING_EQUAL(t->portals[0].host, "127.0.0.1");
		CU_ASSERT_EQUAL(t->portals[0].port, 3301);
		CU_ASSERT_STRING_EQUAL(t->portals[1].host, "::1");
		CU_ASSERT_EQUAL(t->portals[1].port, 3302);
	}
	/* the same portal twice, or a bad one among good ones: refused, nothing changed */
	const char *dup[] = { "10.0.0.1", "10.0.0.1:3260" }, *bad[] = { "10.0.0.1", "x:1" };
	CU_ASSERT_EQUAL(config_set_portals(c, dup, 2, false, errbuf, sizeof(errbuf)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "given twice"));
	CU_ASSERT_EQUAL(config_set_portals(c, bad, 2, false, errbuf, sizeof(errbuf)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "x:1"));
	CU_ASSERT_EQUAL(c->targets[0].tpgs[1].nportals, 2);
	CU_ASSERT_STRING_EQUAL(c->targets[0].tpgs[1].portals[0].host, "127.0.0.1");
	config_free(c);
}

/* ------------------------------------------------- one object added */

/* What the loader says of a whole document, config_check_* must say of the one object. */
static void check_one_backstore(struct config *c, const char *obj, const char *doc)
{
	char err2[1024] = "";
	struct cfg_backstore b;
	json_object *o = json_tokener_parse(obj);
	int r = config_check_backstore(c, o, "t.json", &b, err2, sizeof(err2));
	json_object_put(o);
	load_bad(doc, "backstores[1]");
	CU_ASSERT_EQUAL(r, -EINVAL);
	if (strcmp(err2, errbuf))
		fprintf(stderr, "\nfile: %s\none:  %s\n", errbuf, err2);
	CU_ASSERT_STRING_EQUAL(err2, errbuf);
}

static void test_one_object(void)
{
	struct config *c = load_ok("{\"backstores\":[{\"name\":\"r\",\"type\":\"ram\",\"size\":1048576},"
				   "{\"name\":\"f\",\"type\":\"file\",\"path\":\"/tmp/x.img\"}],"
				   "\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:a\",\"tpgs\":[{\"tag\":1,"
				   "\"luns\":[{\"lun\":0,\"backstore\":\"r\"}]}]}]}");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	/* the same words as the file: a repeated name, a repeated path, a bad size, an unknown key */
#define DOC1(x) "{\"backstores\":[{\"name\":\"r\",\"type\":\"ram\",\"size\":1048576}," x "]}"
	struct config *c1 = load_ok("{\"backstores\":[{\"name\":\"r\",\"type\":\"ram\",\"size\":1048576}]}");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c1);
	check_one_backstore(c1, "{\"name\":\"r\",\"type\":\"ram\",\"size\":4096}",
			    DOC1("{\"name\":\"r\",\"type\":\"ram\",\"size\":4096}"));
	check_one_backstore(c1, "{\"name\":\"s\",\"type\":\"ram\",\"size\":1000}",
			    DOC1("{\"name\":\"s\",\"type\":\"ram\",\"size\":1000}"));
	check_one_backstore(c1, "{\"name\":\"s\",\"type\":\"ram\",\"size\":4096,\"colour\":1}",
			    DOC1("{\"name\":\"s\",\"type\":\"ram\",\"size\":4096,\"colour\":1}"));
#undef DOC1
	config_free(c1);
	char err2[512] = "";
	struct cfg_backstore b;
	json_object *o = json_tokener_parse("{\"name\":\"g\",\"type\":\"file\",\"path\":\"/tmp/x.img\"}");
	CU_ASSERT_EQUAL(config_check_backstore(c, o, "t.json", &b, err2, sizeof(err2)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err2, "backstores[2].path: \"/tmp/x.img\" is already used by backstores[1]"));
	json_object_put(o);
	/* a good one appends */
	o = json_tokener_parse("{\"name\":\"g\",\"type\":\"ram\",\"size\":\"8M\"}");
	CU_ASSERT_EQUAL_FATAL(config_check_backstore(c, o, "t.json", &b, err2, sizeof(err2)), 0);
	json_object_put(o);
	CU_ASSERT_EQUAL(b.bs.size, 8u << 20);
	CU_ASSERT_EQUAL(config_append_backstore(c, &b), 0);
	CU_ASSERT_EQUAL(c->nbackstores, 3);
	CU_ASSERT_STRING_EQUAL(c->backstores[2].name, "g");
	/* LUNs: a repeated number, a backstore that does not exist, then one that does */
	struct cfg_lun l;
	o = json_tokener_parse("{\"lun\":0,\"backstore\":\"g\"}");
	CU_ASSERT_EQUAL(config_check_lun(c, 0, 0, o, "t.json", &l, err2, sizeof(err2)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(err2, "t.json: targets[0].tpgs[0].luns[1].lun: duplicate LUN 0");
	json_object_put(o);
	o = json_tokener_parse("{\"lun\":1,\"backstore\":\"nope\"}");
	CU_ASSERT_EQUAL(config_check_lun(c, 0, 0, o, "t.json", &l, err2, sizeof(err2)), -EINVAL);
	CU_ASSERT_STRING_EQUAL(err2, "t.json: targets[0].tpgs[0].luns[1].backstore: no backstore named \"nope\"");
	json_object_put(o);
	o = json_tokener_parse("{\"lun\":7,\"backstore\":\"g\",\"read_only\":true}");
	CU_ASSERT_EQUAL_FATAL(config_check_lun(c, 0, 0, o, "t.json", &l, err2, sizeof(err2)), 0);
	json_object_put(o);
	CU_ASSERT_EQUAL(l.backstore_index, 2);
	CU_ASSERT_EQUAL(config_append_lun(c, 0, 0, &l), 0);
	CU_ASSERT_EQUAL(c->targets[0].tpgs[0].nluns, 2);
	/* what was appended serialises and loads again */
	char *j = config_to_json(c);
	struct config *d = load_ok(j);
	CU_ASSERT_PTR_NOT_NULL(d);
	if (d)
		CU_ASSERT_TRUE(d->targets[0].tpgs[0].luns[1].read_only && d->targets[0].tpgs[0].luns[1].lun == 7);
	free(j);
	config_free(d);
	config_free(c);
}

/* ------------------------------------------------------------ round trip */

/* Append to a document being built in a buffer of cap bytes. */
static void __attribute__((format(printf, 3, 4))) append(char *doc, size_t cap, const char *fmt, ...)
{
	size_t n = strlen(doc);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(doc + n, cap - n, fmt, ap);
	va_end(ap);
}

static bool str_eq(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static bool chap_eq(const struct cfg_chap *a, const struct cfg_chap *b)
{
	return str_eq(a->userid, b->userid) && str_eq(a->password, b->password) &&
	       str_eq(a->mutual_userid, b->mutual_userid) &&
	       str_eq(a->mutual_password, b->mutual_password) && str_eq(a->password_file, b->password_file) &&
	       str_eq(a->mutual_password_file, b->mutual_password_file);
}

static bool tpg_eq(const struct cfg_tpg *a, const struct cfg_tpg *b)
{
	if (a->tag != b->tag || a->enable != b->enable || a->demo_mode != b->demo_mode ||
	    a->demo_write_protect != b->demo_write_protect || !chap_eq(&a->demo_chap, &b->demo_chap) ||
	    a->nportals != b->nportals || a->nluns != b->nluns || a->nacls != b->nacls ||
	    memcmp(&a->params, &b->params, sizeof(a->params)))
		return false;
	for (size_t i = 0; i < a->nportals; i++)
		if (!str_eq(a->portals[i].host, b->portals[i].host) ||
		    a->portals[i].port != b->portals[i].port || a->portals[i].iser != b->portals[i].iser)
			return false;
	for (size_t i = 0; i < a->nluns; i++)
		if (a->luns[i].lun != b->luns[i].lun || !str_eq(a->luns[i].backstore, b->luns[i].backstore) ||
		    a->luns[i].backstore_index != b->luns[i].backstore_index ||
		    a->luns[i].read_only != b->luns[i].read_only)
			return false;
	for (size_t i = 0; i < a->nacls; i++) {
		const struct cfg_acl *x = &a->acls[i], *y = &b->acls[i];
		if (!str_eq(x->initiator, y->initiator) || !chap_eq(&x->chap, &y->chap) || x->nluns != y->nluns)
			return false;
		for (size_t k = 0; k < x->nluns; k++)
			if (memcmp(&x->luns[k], &y->luns[k], sizeof(x->luns[k])))
				return false;
	}
	return true;
}

/* ------------------------------------------------------------------- alua */

#define TGT2(alua) "{" BS_RAM ",\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\",\"tpgs\":[{\"tag\":1},{\"tag\":2}]" \
	alua "}]}"

static void roundtrip(struct config *a);

#define RBD_BS(extra) "{\"backstores\":[{\"name\":\"a\",\"type\":\"rbd\"" extra "}]}"

/* type rbd: pool and image required, the Ceph keys only there, written back as given. */
static void test_rbd(void)
{
	struct config *c = NULL;
	int r = config_load_file(src_path("configs/example-rbd-gateway.json"), &c, errbuf, sizeof(errbuf));
	if (r)
		fprintf(stderr, "\n%s\n", errbuf);
	CU_ASSERT_EQUAL_FATAL(r, 0);
	const struct backstore_cfg *b = &c->backstores[0].bs;
	CU_ASSERT_EQUAL(b->type, BACKSTORE_RBD);
	CU_ASSERT_STRING_EQUAL(b->rbd.pool, "rbd");
	CU_ASSERT_STRING_EQUAL(b->rbd.image, "vm-datastore");
	CU_ASSERT_STRING_EQUAL(b->rbd.client_id, "iscsi-gw");
	CU_ASSERT_STRING_EQUAL(b->rbd.keyring, "/etc/ceph/ceph.client.iscsi-gw.keyring");
	CU_ASSERT_PTR_NULL(b->rbd.ns);
	CU_ASSERT_PTR_NULL(b->path);
	CU_ASSERT_TRUE(b->thin);   /* RBD allocates on write: thin unless told otherwise */
	CU_ASSERT_EQUAL(b->size, 0);
	roundtrip(c);
	config_free(c);

	c = load_ok(RBD_BS(",\"pool\":\"p\",\"image\":\"i\",\"namespace\":\"n\",\"cluster\":\"c2\","
			   "\"size\":\"2G\",\"thin\":false,\"block_size\":4096"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(c->backstores[0].bs.rbd.ns, "n");
	CU_ASSERT_STRING_EQUAL(c->backstores[0].bs.rbd.cluster, "c2");
	CU_ASSERT_EQUAL(c->backstores[0].bs.size, 2ull << 30);
	CU_ASSERT_FALSE(c->backstores[0].bs.thin);
	roundtrip(c);
	config_free(c);

	load_bad(RBD_BS(",\"image\":\"i\""), "backstores[0].pool: required field missing");
	load_bad(RBD_BS(",\"pool\":\"p\""), "backstores[0].image: required field missing");
	load_bad(RBD_BS(",\"pool\":\"p\",\"image\":\"i\",\"path\":\"/dev/rbd0\""),
		 "backstores[0].path: not allowed for an rbd backstore (give pool and image)");
	load_bad(RBD_BS(",\"pool\":\"p/q\",\"image\":\"i\""), "backstores[0].pool: must not contain '/'");
	load_bad(RBD_BS(",\"pool\":\"p\",\"image\":\"i@snap\""), "backstores[0].image: must not contain");
	load_bad(RBD_BS(",\"pool\":\"p\",\"image\":\"i\",\"conf\":\"ceph.conf\""),
		 "backstores[0].conf: must be an absolute path");
	load_bad(RBD_BS(",\"pool\":\"p\",\"image\":\"i\",\"keyring\":\"k\""),
		 "backstores[0].keyring: must be an absolute path");
	load_bad(RBD_BS(",\"pool\":\"p\",\"image\":\"" "0123456789012345678901234567890123456789"
			"01234567890123456789012345678901234567890123456789012345\""),
		 "backstores[0].image: must be at most 95 characters, got 96");
	load_bad(RBD_BS(",\"pool\":\"p\",\"image\":\"i\",\"client_id\":3"),
		 "backstores[0].client_id: must be a string");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"ram\",\"size\":4096,\"pool\":\"p\"}]}",
		 "backstores[0].pool: only for an rbd backstore");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"file\",\"path\":\"/x\",\"conf\":\"/c\"}]}",
		 "backstores[0].conf: only for an rbd backstore");
}

#define NVME_BS(extra) "{\"backstores\":[{\"name\":\"a\",\"type\":\"nvme\"" extra "}]}"

/* type nvme: a path (the generic char device) required, block's keys otherwise, written back as given. */
static void test_nvme(void)
{
	struct config *c = load_ok(NVME_BS(",\"path\":\"/dev/ng0n1\",\"thin\":true,\"write_cache\":true"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	const struct backstore_cfg *b = &c->backstores[0].bs;
	CU_ASSERT_EQUAL(b->type, BACKSTORE_NVME);
	CU_ASSERT_STRING_EQUAL(b->path, "/dev/ng0n1");
	CU_ASSERT_TRUE(b->thin);
	CU_ASSERT_TRUE(b->write_cache);
	CU_ASSERT_EQUAL(b->size, 0);
	CU_ASSERT_EQUAL(b->block_size, 0);
	roundtrip(c);
	char *j = config_to_json(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(j);
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"nvme\""));
	free(j);
	config_free(c);

	c = load_ok(NVME_BS(",\"path\":\"/dev/ng1n2\",\"size\":\"1G\",\"block_size\":4096,\"readonly\":true,"
			    "\"serial\":\"ns2\""));
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(c->backstores[0].bs.size, 1ull << 30);
	CU_ASSERT_EQUAL(c->backstores[0].bs.block_size, 4096);
	CU_ASSERT_TRUE(c->backstores[0].bs.readonly);
	roundtrip(c);
	config_free(c);

	load_bad(NVME_BS(""), "backstores[0].path: required field missing");
	load_bad(NVME_BS(",\"path\":\"ng0n1\""), "backstores[0].path: must be an absolute path");
	load_bad(NVME_BS(",\"path\":\"/dev/ng0n1\",\"pool\":\"p\""), "backstores[0].pool: only for an rbd backstore");
	load_bad(NVME_BS(",\"path\":\"/dev/ng0n1\",\"block_size\":520"), "backstores[0].block_size: must be 512");
	load_bad(NVME_BS(",\"path\":\"/dev/ng0n1\",\"size\":1000"), "backstores[0].size: must be a multiple");
	load_bad(NVME_BS(",\"path\":\"/dev/ng0n1\",\"bogus\":1"), "backstores[0].bogus");
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"nvm\",\"path\":\"/dev/ng0n1\"}]}",
		 "backstores[0].type: must be \"ram\", \"file\", \"block\", \"nvme\" or \"rbd\", got \"nvm\"");
	/* The same path twice is refused as for block. */
	load_bad("{\"backstores\":[{\"name\":\"a\",\"type\":\"nvme\",\"path\":\"/dev/ng0n1\"},"
		 "{\"name\":\"b\",\"type\":\"nvme\",\"path\":\"/dev/ng0n1\"}]}", "backstores[1]");
}

static void test_alua(void)
{
	/* Without "alua": one group 1, active/optimized, every portal group; implicit only; not written back. */
	struct config *c = load_ok(TGT2(""));
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	const struct cfg_target *t = &c->targets[0];
	CU_ASSERT_FALSE(t->alua_given);
	CU_ASSERT_EQUAL(t->alua_modes, SCSI_ALUA_IMPLICIT);
	CU_ASSERT_EQUAL_FATAL(t->nalua_groups, 1);
	CU_ASSERT_EQUAL(t->alua_groups[0].id, 1);
	CU_ASSERT_EQUAL(t->alua_groups[0].state, ALUA_ACTIVE_OPTIMIZED);
	CU_ASSERT_EQUAL_FATAL(t->alua_groups[0].ntpgs, 2);
	CU_ASSERT_EQUAL(t->alua_groups[0].tpgs[0], 1);
	CU_ASSERT_EQUAL(t->alua_groups[0].tpgs[1], 2);
	char *j = config_to_json(c);
	CU_ASSERT_PTR_NULL(strstr(j, "alua"));
	free(j);
	config_free(c);

	/* Every key, each state name, remote ports; written back as read. */
	c = load_ok(TGT2(",\"alua\":{\"mode\":\"both\",\"transition_time\":255,\"groups\":["
			 "{\"id\":65535,\"state\":\"standby\",\"preferred\":true,\"tpgs\":[2],\"remote_ports\":[9,65535]},"
			 "{\"id\":1,\"state\":\"transitioning\",\"tpgs\":[1]},"
			 "{\"id\":3,\"state\":\"unavailable\"},{\"id\":4,\"state\":\"active_nonoptimized\"},"
			 "{\"id\":5,\"state\":\"active_optimized\",\"remote_ports\":[]}]}"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	t = &c->targets[0];
	CU_ASSERT_TRUE(t->alua_given);
	CU_ASSERT_EQUAL(t->alua_modes, SCSI_ALUA_IMPLICIT | SCSI_ALUA_EXPLICIT);
	CU_ASSERT_EQUAL(t->alua_transition_time, 255);
	CU_ASSERT_EQUAL_FATAL(t->nalua_groups, 5);
	CU_ASSERT_EQUAL(t->alua_groups[0].id, 65535);
	CU_ASSERT_EQUAL(t->alua_groups[0].state, ALUA_STANDBY);
	CU_ASSERT_TRUE(t->alua_groups[0].preferred);
	CU_ASSERT_EQUAL(t->alua_groups[0].nremote, 2);
	CU_ASSERT_EQUAL(t->alua_groups[0].remote_ports[1], 65535);
	CU_ASSERT_EQUAL(t->alua_groups[1].state, ALUA_TRANSITIONING);
	CU_ASSERT_EQUAL(t->alua_groups[2].state, ALUA_UNAVAILABLE);
	CU_ASSERT_EQUAL(t->alua_groups[3].state, ALUA_ACTIVE_NONOPTIMIZED);
	roundtrip(c);
	j = config_to_json(c);
	struct config *b = load_ok(j);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_TRUE(b->targets[0].alua_given && b->targets[0].nalua_groups == 5 &&
		       b->targets[0].alua_groups[0].nremote == 2 && b->targets[0].alua_groups[0].preferred);
	free(j);
	config_free(b);
	config_free(c);
	c = load_ok(TGT2(",\"alua\":{\"mode\":\"explicit\",\"groups\":[{\"id\":1,\"tpgs\":[1,2]}]}"));
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(c->targets[0].alua_modes, SCSI_ALUA_EXPLICIT);
	CU_ASSERT_EQUAL(c->targets[0].alua_groups[0].state, ALUA_ACTIVE_OPTIMIZED);
	config_free(c);

	/* Each rule, with the field named. */
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1]}]}"),
		 "targets[0].alua.groups: portal group tag 2 (tpgs[1]) is in no target port group");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1]},{\"id\":1,\"tpgs\":[2]}]}"),
		 "targets[0].alua.groups[1].id: duplicate target port group id 1, also in groups[0]");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2,3]}]}"),
		 "targets[0].alua.groups[0].tpgs[2]: the target has no portal group with tag 3");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2]},{\"id\":2,\"tpgs\":[2]}]}"),
		 "targets[0].alua.groups[1].tpgs[0]: relative port 2 is already in groups[0]");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2,1]}]}"),
		 "targets[0].alua.groups[0].tpgs[2]: 1 is listed twice");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2],\"remote_ports\":[2]}]}"),
		 "targets[0].alua.groups[0].remote_ports[0]: 2 is the tag of one of this target's portal groups");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2],\"remote_ports\":[7]},"
		      "{\"id\":2,\"remote_ports\":[7]}]}"),
		 "targets[0].alua.groups[1].remote_ports[0]: relative port 7 is already in groups[0]");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2],\"remote_ports\":[0]}]}"),
		 "targets[0].alua.groups[0].remote_ports[0]: must be 1-65535");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2],\"state\":\"Standby\"}]}"),
		 "targets[0].alua.groups[0].state: must be \"active_optimized\", \"active_nonoptimized\", \"standby\", "
		 "\"unavailable\" or \"transitioning\", got \"Standby\"");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":0,\"tpgs\":[1,2]}]}"), "targets[0].alua.groups[0].id: must be 1-65535");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"tpgs\":[1,2]}]}"), "targets[0].alua.groups[0].id: required");
	load_bad(TGT2(",\"alua\":{\"groups\":[]}"), "targets[0].alua.groups: at least one target port group");
	load_bad(TGT2(",\"alua\":{\"mode\":\"both\"}"), "targets[0].alua.groups: required");
	load_bad(TGT2(",\"alua\":{\"mode\":\"all\",\"groups\":[{\"id\":1,\"tpgs\":[1,2]}]}"),
		 "targets[0].alua.mode: must be \"implicit\", \"explicit\" or \"both\", got \"all\"");
	load_bad(TGT2(",\"alua\":{\"transition_time\":256,\"groups\":[{\"id\":1,\"tpgs\":[1,2]}]}"),
		 "targets[0].alua.transition_time: must be 0-255");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2],\"prefered\":true}]}"),
		 "targets[0].alua.groups[0].prefered: unknown key");
	load_bad(TGT2(",\"alua\":[{\"id\":1}]"), "targets[0].alua: must be an object");
	load_bad(TGT2(",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":\"1,2\"}]}"),
		 "targets[0].alua.groups[0].tpgs: must be an array");
	/* Bounds: 256 groups, 255 ports in one (TARGET PORT COUNT is one byte). */
	char *doc = malloc(64 * 1024), *p = doc;
	if (!doc) {
		CU_FAIL("out of memory");
		return;
	}
	p += sprintf(p, "{" BS_RAM ",\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\",\"tpgs\":[{\"tag\":1},{\"tag\":2}],"
		     "\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[1,2],\"remote_ports\":[");
	for (int i = 0; i < 254; i++)
		p += sprintf(p, "%s%d", i ? "," : "", 100 + i);
	sprintf(p, "]}]}}]}");
	load_bad(doc, "targets[0].alua.groups[0]: at most 255 ports (tpgs and remote_ports together), got 256");
	p = doc;
	p += sprintf(p, "{\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\",\"alua\":{\"groups\":[");
	for (int i = 0; i < 257; i++)
		p += sprintf(p, "%s{\"id\":%d}", i ? "," : "", i + 1);
	sprintf(p, "]}}]}");
	load_bad(doc, "targets[0].alua.groups: at most 256 entries allowed, got 257");
	/* One limit for portal groups: 255 load (the default group holds them all), 256 do not, with or without alua. */
	for (int n = 255; n <= 256; n++) {
		for (int with_alua = 0; with_alua < 2; with_alua++) {
			doc[0] = 0;
			append(doc, 64 * 1024, "{\"targets\":[{\"iqn\":\"iqn.2026-11.org.test:t\",\"tpgs\":[");
			for (int i = 0; i < n; i++)
				append(doc, 64 * 1024, "%s{\"tag\":%d}", i ? "," : "", i + 1);
			append(doc, 64 * 1024, "]");
			if (with_alua) {
				append(doc, 64 * 1024, ",\"alua\":{\"groups\":[{\"id\":1,\"tpgs\":[");
				for (int i = 0; i < 128; i++)
					append(doc, 64 * 1024, "%s%d", i ? "," : "", i + 1);
				append(doc, 64 * 1024, "]},{\"id\":2,\"tpgs\":[");
				for (int i = 128; i < n; i++)
					append(doc, 64 * 1024, "%s%d", i > 128 ? "," : "", i + 1);
				append(doc, 64 * 1024, "]}]}");
			}
			append(doc, 64 * 1024, "}]}");
			if (n == 255) {
				struct config *c = load_ok(doc);
				CU_ASSERT_EQUAL(c->targets[0].nalua_groups, with_alua ? 2 : 1);
				CU_ASSERT_EQUAL(c->targets[0].alua_groups[0].ntpgs, with_alua ? 128 : 255);
				config_free(c);
			} else {
				load_bad(doc, "targets[0].tpgs: at most 255 portal groups per target, got 256: an ALUA target "
					      "port group reports at most 255 ports");
			}
		}
	}
	free(doc);
}

static bool config_eq(const struct config *a, const struct config *b)
{
	if (a->nbackstores != b->nbackstores || a->ntargets != b->ntargets ||
	    !chap_eq(&a->discovery_chap, &b->discovery_chap) ||
	    a->discovery_auth_required != b->discovery_auth_required || a->reactors != b->reactors ||
	    a->iser_srq != b->iser_srq ||
	    a->poll_mode != b->poll_mode || !str_eq(a->admin_socket, b->admin_socket) ||
	    !str_eq(a->state_dir, b->state_dir))
		return false;
	for (size_t i = 0; i < a->nbackstores; i++) {
		const struct cfg_backstore *x = &a->backstores[i], *y = &b->backstores[i];
		if (!str_eq(x->name, y->name) || !str_eq(x->path, y->path) || !str_eq(x->serial, y->serial) ||
		    x->bs.type != y->bs.type || x->bs.size != y->bs.size || x->bs.block_size != y->bs.block_size ||
		    x->bs.thin != y->bs.thin || x->bs.write_cache != y->bs.write_cache ||
		    x->bs.readonly != y->bs.readonly || x->bs.preallocate != y->bs.preallocate ||
		    !str_eq(x->bs.name, y->name) || !str_eq(x->bs.path, y->path))
			return false;
	}
	for (size_t i = 0; i < a->ntargets; i++) {
		const struct cfg_target *x = &a->targets[i], *y = &b->targets[i];
		if (!str_eq(x->iqn, y->iqn) || !str_eq(x->alias, y->alias) || x->ntpgs != y->ntpgs)
			return false;
		for (size_t j = 0; j < x->ntpgs; j++)
			if (!tpg_eq(&x->tpgs[j], &y->tpgs[j]))
				return false;
		if (x->alua_given != y->alua_given || x->alua_modes != y->alua_modes ||
		    x->alua_transition_time != y->alua_transition_time || x->nalua_groups != y->nalua_groups)
			return false;
		for (size_t j = 0; j < x->nalua_groups; j++) {
			const struct cfg_alua_group *g = &x->alua_groups[j], *h = &y->alua_groups[j];
			if (g->id != h->id || g->state != h->state || g->preferred != h->preferred ||
			    g->ntpgs != h->ntpgs || g->nremote != h->nremote ||
			    (g->ntpgs && memcmp(g->tpgs, h->tpgs, g->ntpgs * sizeof(*g->tpgs))) ||
			    (g->nremote && memcmp(g->remote_ports, h->remote_ports, g->nremote * sizeof(*g->remote_ports))))
				return false;
		}
	}
	return true;
}

static void roundtrip(struct config *a)
{
	char *j1 = config_to_json(a), *j2;
	struct config *b;

	CU_ASSERT_PTR_NOT_NULL_FATAL(j1);
	b = load_ok(j1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_TRUE(config_eq(a, b));
	j2 = config_to_json(b);
	CU_ASSERT_STRING_EQUAL(j1, j2);
	free(j1);
	free(j2);
	config_free(b);
}

static void test_roundtrip(void)
{
	const char *files[] = { "configs/default.json", "configs/example-acl-chap.json",
				"configs/example-nvme-iser.json", "configs/packaged.json" };

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		struct config *c = NULL;
		CU_ASSERT_EQUAL_FATAL(config_load_file(src_path(files[i]), &c, errbuf, sizeof(errbuf)), 0);
		roundtrip(c);
		config_free(c);
	}
	/* non-default values everywhere, so a dropped field shows */
	struct config *c = load_ok(
		"{\"backstores\":[{\"name\":\"f\",\"type\":\"file\",\"path\":\"/tmp/a b/\\u00e9.img\",\"size\":8192,"
		"\"block_size\":4096,\"thin\":true,\"write_cache\":true,\"readonly\":true,\"serial\":\"S1\"},"
		"{\"name\":\"r\",\"type\":\"ram\",\"size\":8192,\"preallocate\":true}],"
		"\"targets\":[{\"iqn\":\"eui.0123456789ABCDEF\",\"alias\":\"x \\\"y\\\"\",\"tpgs\":[{\"tag\":7,\"enable\":false,"
		"\"demo_mode\":true,\"demo_write_protect\":true,"
		"\"demo_chap\":{\"userid\":\"d\",\"password\":\"0123456789abc\"},"
		"\"portals\":[{\"ip\":\"::\",\"port\":1,\"iser\":true}],"
		"\"luns\":[{\"lun\":16383,\"backstore\":\"f\",\"read_only\":true}],"
		"\"acls\":[{\"initiator\":\"naa.0123456789abcdef\",\"mapped_luns\":[{\"mapped_lun\":9,\"tpg_lun\":16383,"
		"\"write_protect\":true}]}],"
		"\"params\":{\"MaxRecvDataSegmentLength\":512,\"MaxBurstLength\":16777215,\"FirstBurstLength\":512,"
		"\"MaxOutstandingR2T\":65535,\"InitialR2T\":true,\"ImmediateData\":false,\"HeaderDigest\":\"None\","
		"\"DataDigest\":\"None\",\"DefaultTime2Wait\":3600,\"DefaultTime2Retain\":0,\"MaxConnections\":8,"
		"\"QueueDepth\":1,\"NopInInterval\":30}}]}],"
		"\"discovery\":{\"auth_required\":true,\"chap\":{\"userid\":\"u\",\"password\":\"0123456789abc\","
		"\"mutual_userid\":\"m\",\"mutual_password\":\"0123456789abd\"}},"
		"\"global\":{\"reactors\":2,\"poll_mode\":\"adaptive\",\"iser_srq\":4096,\"admin_socket\":\"/run/x.sock\"}}");
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_STRING_EQUAL(c->backstores[0].path, "/tmp/a b/\xc3\xa9.img");
	CU_ASSERT_TRUE(c->backstores[1].bs.preallocate);
	roundtrip(c);
	/* the serialised form keeps '/' unescaped for readable paths */
	char *j = config_to_json(c);
	CU_ASSERT_PTR_NOT_NULL(strstr(j, "\"/run/x.sock\""));
	free(j);
	config_free(c);
}

/* ------------------------------------------------------------------ files */

static void test_save_file(void)
{
	char dir[] = "/tmp/test_config.XXXXXX", path[PATH_MAX], bad[PATH_MAX];
	struct config *c = load_ok(config_default_json), *d = NULL;
	struct stat st;

	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/saved.json", dir);
	/* replaces an existing file */
	FILE *f = fopen(path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	fputs("old", f);
	fclose(f);
	CU_ASSERT_EQUAL(config_save_file(c, path, errbuf, sizeof(errbuf)), 0);
	CU_ASSERT_EQUAL(stat(path, &st), 0);
	CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
	CU_ASSERT_EQUAL(config_load_file(path, &d, errbuf, sizeof(errbuf)), 0);
	CU_ASSERT_PTR_NOT_NULL(d);
	if (d) {
		CU_ASSERT_TRUE(config_eq(c, d));
		CU_ASSERT_STRING_EQUAL(d->origin, path);
	}
	config_free(d);
	/* no temporary left behind */
	DIR *dh = opendir(dir);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(dh)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(dh);
	CU_ASSERT_EQUAL(n, 1);

	snprintf(bad, sizeof(bad), "%s/missing/x.json", dir);
	CU_ASSERT_EQUAL(config_save_file(c, bad, errbuf, sizeof(errbuf)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, bad));
	unlink(path);
	rmdir(dir);
	config_free(c);
}

static void test_load_file_errors(void)
{
	char path[] = "/tmp/test_config_nul.XXXXXX";
	struct config *c = NULL;
	int fd;

	CU_ASSERT_EQUAL(config_load_file("/nonexistent/x.json", &c, errbuf, sizeof(errbuf)), -ENOENT);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "/nonexistent/x.json: cannot open"));
	CU_ASSERT_EQUAL(config_load_file("/tmp", &c, errbuf, sizeof(errbuf)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "not a regular file"));
	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_EQUAL(write(fd, "{}\0{}", 5), 5);
	close(fd);
	CU_ASSERT_EQUAL(config_load_file(path, &c, errbuf, sizeof(errbuf)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "NUL byte"));
	CU_ASSERT_PTR_NULL(c);
	/* syntax errors name the file */
	fd = open(path, O_WRONLY | O_TRUNC);
	CU_ASSERT_EQUAL(write(fd, "{\n\n  x", 6), 6);
	close(fd);
	CU_ASSERT_EQUAL(config_load_file(path, &c, errbuf, sizeof(errbuf)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, path));
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "line 3, column 3"));
	unlink(path);
	/* a NULL/short error buffer is tolerated */
	CU_ASSERT_EQUAL(config_load_string("{\"x\":1}", NULL, &c, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(config_load_string("{\"x\":1}", NULL, &c, errbuf, 4), -EINVAL);
	CU_ASSERT_EQUAL(strlen(errbuf), 3);
}

/* ------------------------------------------------------------------- fuzz */

static void check_any(const char *doc)
{
	struct config *c = NULL;
	int r;

	errbuf[0] = '\0';
	r = config_load_string(doc, "fuzz", &c, errbuf, sizeof(errbuf));
	if (r == 0) {
		CU_ASSERT_PTR_NOT_NULL(c);
		char *j = config_to_json(c);
		CU_ASSERT_PTR_NOT_NULL(j);
		free(j);
		config_free(c);
	} else {
		CU_ASSERT(r < 0);
		CU_ASSERT_PTR_NULL(c);
		CU_ASSERT(strncmp(errbuf, "fuzz: ", 6) == 0);
	}
}

static char *read_all(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static void test_fuzz(void)
{
	char *doc = read_all(src_path("configs/example-acl-chap.json"));
	size_t len, last, fails = 0, oks = 0;
	unsigned seed = 12345;

	CU_ASSERT_PTR_NOT_NULL_FATAL(doc);
	len = strlen(doc);
	last = (size_t)(strrchr(doc, '}') - doc);
	char *buf = malloc(len + 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	/* every truncation before the closing brace fails cleanly */
	for (size_t n = 0; n <= last; n++) {
		struct config *c = NULL;
		memcpy(buf, doc, n);
		buf[n] = '\0';
		errbuf[0] = '\0';
		CU_ASSERT_EQUAL(config_load_string(buf, "trunc", &c, errbuf, sizeof(errbuf)), -EINVAL);
		CU_ASSERT_PTR_NULL(c);
		CU_ASSERT(strncmp(errbuf, "trunc: ", 7) == 0);
	}
	/* random byte mutations: any outcome but a crash, leak or silent failure */
	static const char alphabet[] = "{}[]\",:0123456789-.eEtfnul \\x\x01\xc3\xff";
	for (int iter = 0; iter < 3000; iter++) {
		memcpy(buf, doc, len + 1);
		int edits = 1 + (int)(rand_r(&seed) % 4);
		for (int k = 0; k < edits; k++) {
			size_t pos = (size_t)rand_r(&seed) % len;
			buf[pos] = alphabet[(size_t)rand_r(&seed) % (sizeof(alphabet) - 1)];
		}
		check_any(buf);
		if (errbuf[0])
			fails++;
		else
			oks++;
	}
	CU_ASSERT(fails > 0);
	/* pure garbage */
	for (int iter = 0; iter < 500; iter++) {
		size_t n = (size_t)rand_r(&seed) % 64;
		for (size_t k = 0; k < n; k++)
			buf[k] = alphabet[(size_t)rand_r(&seed) % (sizeof(alphabet) - 1)];
		buf[n] = '\0';
		check_any(buf);
	}
	free(buf);
	free(doc);

	/* deep nesting is refused, not recursed into */
	char *deep = malloc(200001);
	CU_ASSERT_PTR_NOT_NULL_FATAL(deep);
	memset(deep, '[', 100000);
	memset(deep + 100000, ']', 100000);
	deep[200000] = '\0';
	check_any(deep);
	CU_ASSERT_PTR_NOT_NULL(strstr(errbuf, "JSON syntax error"));
	free(deep);
	(void)oks;
}

/* global.state_dir: where APTPL state lives (docs/reservations.md). */
/* global.admin_https: its shape, principals, token hash files; and what config_to_json writes back. */
static void test_admin_https(void)
{
	char dir[] = "/tmp/isert-unit-https-XXXXXX", hash[PATH_MAX], doc[4096], bad[PATH_MAX];
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
	snprintf(hash, sizeof(hash), "%s/t.sha256", dir);
	snprintf(bad, sizeof(bad), "%s/bad.sha256", dir);
	FILE *f = fopen(hash, "w");
	fputs("sha256:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", f);
	fclose(f);
	chmod(hash, 0600);
	f = fopen(bad, "w");
	fputs("sha256:XYZ\n", f);
	fclose(f);
	chmod(bad, 0600);
#define HTTPS(extra, principals)                                                                        \
	snprintf(doc, sizeof(doc),                                                                   \
		 "{\"global\":{\"admin_https\":{\"listen\":\"127.0.0.1:8443\",\"certificate\":\"/c.pem\","  \
		 "\"key\":\"/k.pem\"%s,\"principals\":[%s]}}," BS_RAM "," TGT("\"tag\":1") "}", extra, principals)
	HTTPS(",\"client_ca\":\"/ca.pem\"", "{\"name\":\"ops\",\"role\":\"operator\",\"subject\":\"CN=ops\"},"
	      "{\"name\":\"csi\",\"role\":\"admin\",\"token_hash_file\":\"%s\",\"targets\":[\"iqn.2026-11.org.test:t\"]}");
	char doc2[4096];
	snprintf(doc2, sizeof(doc2), doc, hash);
	struct config *c = load_ok(doc2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	const struct cfg_admin_https *h = c->admin_https;
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	CU_ASSERT_EQUAL(h->nprincipals, 2);
	CU_ASSERT_EQUAL(h->principals[0].role, CFG_ROLE_OPERATOR);
	CU_ASSERT_EQUAL(h->principals[1].role, CFG_ROLE_ADMIN);
	CU_ASSERT_EQUAL(h->principals[1].token_sha256[1], 0x11);
	CU_ASSERT_EQUAL(h->principals[1].token_sha256[31], 0xff);
	CU_ASSERT_EQUAL(h->principals[1].ntargets, 1);
	CU_ASSERT_EQUAL(h->max_connections, 32);
	CU_ASSERT_EQUAL(h->max_connections_per_address, 4);
	CU_ASSERT_EQUAL(h->request_timeout_s, 10);
	char *text = config_to_json(c);
	struct config *c2 = load_ok(text);
	char *text2 = c2 ? config_to_json(c2) : NULL;
	CU_ASSERT_STRING_EQUAL(text, text2 ? text2 : "");
	CU_ASSERT_PTR_NULL(strstr(text, "0011223344")); /* the hash stays in its file */
	free(text);
	free(text2);
	config_free(c2);
	config_free(c);

	HTTPS("", "");
	load_bad(doc, "global.admin_https.principals: is empty");
	HTTPS("", "{\"name\":\"a\",\"role\":\"root\",\"token_hash_file\":\"/x\"}");
	load_bad(doc, "principals[0].role: must be \"reader\", \"operator\" or \"admin\", got \"root\"");
	HTTPS("", "{\"name\":\"a b\",\"role\":\"admin\",\"token_hash_file\":\"/x\"}");
	load_bad(doc, "principals[0].name: 'a b': use letters, digits");
	HTTPS("", "{\"name\":\"a\",\"role\":\"admin\"}");
	load_bad(doc, "principals[0]: give exactly one of subject, san");
	HTTPS("", "{\"name\":\"a\",\"role\":\"admin\",\"subject\":\"CN=a\"}");
	load_bad(doc, "principals[0]: names a client certificate, but admin_https has no client_ca");
	HTTPS(",\"client_ca\":\"/ca\"", "{\"name\":\"a\",\"role\":\"admin\",\"subject\":\"CN=a\",\"san\":\"a\"}");
	load_bad(doc, "give exactly one of subject, san");
	HTTPS(",\"client_ca\":\"/ca\"", "{\"name\":\"a\",\"role\":\"admin\",\"san\":\"a\"},"
	      "{\"name\":\"a\",\"role\":\"reader\",\"san\":\"b\"}");
	load_bad(doc, "principals[1].name: 'a' is also principals[0]'s name");
	HTTPS(",\"client_ca\":\"/ca\"", "{\"name\":\"a\",\"role\":\"admin\",\"san\":\"a\",\"targets\":[]}");
	load_bad(doc, "principals[0].targets: is empty");
	HTTPS(",\"client_ca\":\"/ca\"", "{\"name\":\"a\",\"role\":\"admin\",\"san\":\"a\",\"targets\":[5]}");
	load_bad(doc, "principals[0].targets[0]: must be a target's name");
	HTTPS(",\"request_timeout\":0", "{\"name\":\"a\",\"role\":\"admin\",\"token_hash_file\":\"/x\"}");
	load_bad(doc, "admin_https.request_timeout");
	HTTPS(",\"listen\":1", "");
	load_bad(doc, "admin_https");
	HTTPS(",\"colour\":1", "{\"name\":\"a\",\"role\":\"admin\",\"token_hash_file\":\"/x\"}");
	load_bad(doc, "admin_https.colour: unknown key");
	HTTPS("", "{\"name\":\"a\",\"role\":\"admin\",\"token_hash_file\":\"%s\"}");
	snprintf(doc2, sizeof(doc2), doc, bad);
	load_bad(doc2, "global.admin_https.principals[0].token_hash_file: ");
	load_bad(doc2, "must hold one line \"sha256:\" and 64 lowercase hex digits");
	HTTPS("", "{\"name\":\"a\",\"role\":\"admin\",\"token_hash_file\":\"%s/none\"}");
	snprintf(doc2, sizeof(doc2), doc, dir);
	load_bad(doc2, "cannot open");
	chmod(hash, 0644);
	HTTPS("", "{\"name\":\"a\",\"role\":\"admin\",\"token_hash_file\":\"%s\"}");
	snprintf(doc2, sizeof(doc2), doc, hash);
	load_bad(doc2, "chmod 600");
	snprintf(doc, sizeof(doc), "{\"global\":{\"admin_https\":{\"listen\":\"localhost:1\",\"certificate\":\"/c\","
		 "\"key\":\"/k\",\"principals\":[]}}}");
	load_bad(doc, "admin_https.listen: must be HOST:PORT with a numeric address");
#undef HTTPS
	unlink(hash);
	unlink(bad);
	rmdir(dir);
}

static void test_state_dir(void)
{
	struct config *c, *c2;
	char *json, *big;

	c = load_ok("{}");
	CU_ASSERT_PTR_NULL(c->state_dir);
	CU_ASSERT_STRING_EQUAL(config_state_dir(c), CONFIG_DEFAULT_STATE_DIR);
	config_free(c);
	c = load_ok("{\"global\":{\"state_dir\":\"none\"}}");
	CU_ASSERT_PTR_NULL(config_state_dir(c));
	config_free(c);
	c = load_ok("{\"global\":{\"state_dir\":\"/srv/isert/state\"}}");
	CU_ASSERT_STRING_EQUAL(config_state_dir(c), "/srv/isert/state");
	json = config_to_json(c);
	CU_ASSERT_PTR_NOT_NULL_FATAL(json);
	c2 = load_ok(json);
	CU_ASSERT_STRING_EQUAL(c2->state_dir, "/srv/isert/state");
	config_free(c2);
	free(json);
	config_free(c);
	load_bad("{\"global\":{\"state_dir\":\"var/lib/isert\"}}",
		 "global.state_dir: must be an absolute path (at most 1024 bytes) or \"none\", got \"var/lib/isert\"");
	load_bad("{\"global\":{\"state_dir\":\"\"}}", "global.state_dir: must not be empty");
	load_bad("{\"global\":{\"state_dir\":7}}", "global.state_dir: must be a string");
	load_bad("{\"global\":{\"state_dir\":\"/a\\nb\"}}", "global.state_dir: must not contain control characters");
	big = malloc(1100);
	CU_ASSERT_PTR_NOT_NULL_FATAL(big);
	snprintf(big, 1100, "{\"global\":{\"state_dir\":\"/%01024d\"}}", 0);
	load_bad(big, "global.state_dir: must be at most 1024 characters, got 1025");
	free(big);
	CU_ASSERT_TRUE(config_valid_state_dir("/"));
	CU_ASSERT_TRUE(config_valid_state_dir("none"));
	CU_ASSERT_FALSE(config_valid_state_dir("None"));
	CU_ASSERT_FALSE(config_valid_state_dir(""));
}

int main(void)
{
	CU_pSuite s;

	find_srcroot();
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite("config", NULL, NULL);
	CU_add_test(s, "default config", test_default);
	CU_add_test(s, "one object added (admin socket)", test_one_object);
	CU_add_test(s, "configs/default.json matches", test_default_file_matches);
	CU_add_test(s, "example configs", test_examples);
	CU_add_test(s, "secrets masked", test_redact);
	CU_add_test(s, "secrets wiped", test_wipe_secrets);
	CU_add_test(s, "error paths and types", test_errors_paths);
	CU_add_test(s, "backstore validation", test_errors_backstores);
	CU_add_test(s, "lun/acl/portal validation", test_errors_luns_acls);
	CU_add_test(s, "chap/params/global validation", test_errors_chap_params_global);
	CU_add_test(s, "limits", test_limits);
	CU_add_test(s, "alua", test_alua);
	CU_add_test(s, "syntax errors", test_syntax_errors);
	CU_add_test(s, "iSCSI names", test_iscsi_names);
	CU_add_test(s, "host:port", test_hostport);
	CU_add_test(s, "override portals", test_override_portals);
	CU_add_test(s, "round trip", test_roundtrip);
	CU_add_test(s, "rbd backstores", test_rbd);
	CU_add_test(s, "nvme backstores", test_nvme);
	CU_add_test(s, "global.state_dir", test_state_dir);
	CU_add_test(s, "global.admin_https", test_admin_https);
	CU_add_test(s, "save file", test_save_file);
	CU_add_test(s, "load file errors", test_load_file_errors);
	CU_add_test(s, "fuzz", test_fuzz);
	CU_basic_set_mode(CU_BRM_NORMAL);
	return unit_run();
}
