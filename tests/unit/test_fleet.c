/*
 * CUnit tests for the fleet's document as data (target/config/fleet.c):
 * import from three gateways' files, a gateway's configuration composed and
 * decomposed again, an edit on one gateway seen by the others, the fleet's
 * rules, and hostile documents.
 */
#include "target/config/fleet.h"
#include "target/config/config.h"

#include <CUnit/Basic.h>
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit_run.h"

#define T "iqn.2026-11.org.isert:fleet"

static char err[1024];

/* Gateway n's file (1-3) as the per-gateway way writes it: its tag in "tpgs", the others' in "remote_ports". */
static json_object *gateway_file(int n, const char *image)
{
	char text[2048], groups[512] = "";
	size_t off = 0;
	for (int g = 1; g <= 3; g++)
		off += (size_t)snprintf(groups + off, sizeof(groups) - off, "%s{\"id\": %d, \"state\": \"active_optimized\", "
					"\"%s\": [%d]}", g > 1 ? "," : "", g, g == n ? "tpgs" : "remote_ports", g);
	snprintf(text, sizeof(text),
		 "{\"backstores\": [{\"name\": \"disk\", \"type\": \"rbd\", \"pool\": \"rbd\", \"image\": \"%s\"},"
		 "                 {\"name\": \"scratch\", \"type\": \"ram\", \"size\": \"1M\"}],"
		 " \"global\": {\"reactors\": %d, \"login_timeout\": 20},"
		 " \"targets\": [{\"iqn\": \"" T "\", \"alua\": {\"mode\": \"both\", \"groups\": [%s]},"
		 "   \"tpgs\": [{\"tag\": %d, \"demo_mode\": true,"
		 "     \"portals\": [{\"ip\": \"127.0.0.1\", \"port\": %d}],"
		 "     \"luns\": [{\"lun\": 0, \"backstore\": \"disk\"}]}]}]}",
		 image, n, groups, n, 3260 + n);
	struct config *c = NULL;
	int rc = config_load_string(text, "test", &c, err, sizeof(err));
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	json_object *o = config_to_obj(c);
	config_free(c);
	return o;
}

static json_object *import3(const char *image_c, int *rc)
{
	json_object *cfgs[3] = { gateway_file(1, "shared"), gateway_file(2, "shared"), gateway_file(3, image_c) };
	const char *names[3] = { "gw-a", "gw-b", "gw-c" };
	json_object *doc = NULL;
	err[0] = 0;
	*rc = config_fleet_import(cfgs, names, 3, &doc, err, sizeof(err));
	for (int i = 0; i < 3; i++)
		json_object_put(cfgs[i]);
	return doc;
}

static json_object *at(json_object *o, const char *key)
{
	json_object *v = NULL;
	json_object_object_get_ex(o, key, &v);
	return v;
}

static json_object *idx(json_object *a, size_t i)
{
	return json_object_array_get_idx(a, i);
}

static void test_import(void)
{
	int rc;
	json_object *doc = import3("shared", &rc);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL(json_object_array_length(at(doc, "gateways")), 3);
	/* The rbd store shared, each ram store its gateway's own; the fleet's global key shared, reactors each one's. */
	CU_ASSERT_EQUAL(json_object_array_length(at(doc, "backstores")), 1);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(at(idx(at(doc, "backstores"), 0), "name")), "disk");
	json_object *gb = idx(at(doc, "gateways"), 1);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(at(gb, "name")), "gw-b");
	CU_ASSERT_EQUAL(json_object_array_length(at(gb, "backstores")), 1);
	CU_ASSERT_EQUAL(json_object_get_int(at(at(gb, "global"), "reactors")), 2);
	CU_ASSERT_EQUAL(json_object_get_int(at(at(doc, "global"), "login_timeout")), 20);
	CU_ASSERT_PTR_NULL(at(at(doc, "global"), "reactors"));
	/* ALUA groups fleet-wide: each group's relative ports, whichever gateway serves them. */
	json_object *groups = at(at(idx(at(doc, "targets"), 0), "alua"), "groups");
	for (int g = 0; g < 3; g++) {
		json_object *ports = at(idx(groups, (size_t)g), "tpgs");
		CU_ASSERT_EQUAL(json_object_array_length(ports), 1);
		CU_ASSERT_EQUAL(json_object_get_int(idx(ports, 0)), g + 1);
		CU_ASSERT_PTR_NULL(at(idx(groups, (size_t)g), "remote_ports"));
	}
	CU_ASSERT_EQUAL(json_object_array_length(at(at(idx(at(doc, "targets"), 0), "tpg"), "luns")), 1);
	json_object_put(doc);

	/* gw-c's LUN is another image: refused, the difference shown. */
	doc = import3("other", &rc);
	CU_ASSERT_EQUAL(rc, -EINVAL);
	CU_ASSERT_PTR_NULL(doc);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstores[0].image"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "\"shared\" on gw-a, \"other\" on gw-c"));
}

/* Composed for gw-b, written back by the configuration code, decomposed: the same document. */
static void test_round_trip(void)
{
	int rc;
	json_object *doc = import3("shared", &rc), *c = NULL, *nd = NULL;
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL_FATAL(config_fleet_compose(doc, "gw-b", &c, err, sizeof(err)), 0);
	struct config *cfg = NULL;
	CU_ASSERT_EQUAL_FATAL(config_load_doc(c, "gw-b", &cfg, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(cfg->ntargets, 1);
	CU_ASSERT_EQUAL(cfg->targets[0].ntpgs, 1);
	CU_ASSERT_EQUAL(cfg->targets[0].tpgs[0].tag, 2);
	CU_ASSERT_EQUAL(cfg->targets[0].tpgs[0].portals[0].port, 3262);
	CU_ASSERT_EQUAL(cfg->nbackstores, 2);
	json_object *back = config_to_obj(cfg);
	config_free(cfg);
	CU_ASSERT_EQUAL(config_fleet_decompose(doc, "gw-b", back, &nd, err, sizeof(err)), 0);
	CU_ASSERT_TRUE(json_object_equal(doc, nd));
	json_object_put(back);
	json_object_put(nd);
	json_object_put(c);
	CU_ASSERT_EQUAL(config_fleet_compose(doc, "gw-x", &c, err, sizeof(err)), -ENOENT);
	json_object_put(doc);
}

/* A LUN added through gw-a is in every gateway's configuration; a portal of gw-a's in gw-a's alone. */
static void test_edit_everywhere(void)
{
	int rc;
	json_object *doc = import3("shared", &rc), *a = NULL, *nd = NULL, *b = NULL;
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL_FATAL(config_fleet_compose(doc, "gw-a", &a, err, sizeof(err)), 0);
	json_object *bs = json_object_new_object(), *lun = json_object_new_object(), *portal = json_object_new_object();
	json_object_object_add(bs, "name", json_object_new_string("disk2"));
	json_object_object_add(bs, "type", json_object_new_string("rbd"));
	json_object_object_add(bs, "pool", json_object_new_string("rbd"));
	json_object_object_add(bs, "image", json_object_new_string("disk2"));
	json_object_array_add(at(a, "backstores"), bs);
	json_object *tpg = idx(at(idx(at(a, "targets"), 0), "tpgs"), 0);
	json_object_object_add(lun, "lun", json_object_new_int(1));
	json_object_object_add(lun, "backstore", json_object_new_string("disk2"));
	json_object_array_add(at(tpg, "luns"), lun);
	json_object_object_add(portal, "ip", json_object_new_string("127.0.0.2"));
	json_object_object_add(portal, "port", json_object_new_int(3260));
	json_object_array_add(at(tpg, "portals"), portal);
	CU_ASSERT_EQUAL_FATAL(config_fleet_decompose(doc, "gw-a", a, &nd, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(config_fleet_check(nd, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(config_fleet_compose(nd, "gw-c", &b, err, sizeof(err)), 0);
	json_object *ctpg = idx(at(idx(at(b, "targets"), 0), "tpgs"), 0);
	CU_ASSERT_EQUAL(json_object_array_length(at(ctpg, "luns")), 2);
	CU_ASSERT_EQUAL(json_object_array_length(at(ctpg, "portals")), 1);
	CU_ASSERT_EQUAL(json_object_get_int(at(ctpg, "tag")), 3);
	CU_ASSERT_EQUAL(json_object_array_length(at(b, "backstores")), 3); /* disk, disk2, its scratch */
	json_object_put(b);
	json_object_put(nd);
	json_object_put(a);
	json_object_put(doc);
}

/* A gateway added serves nothing until it has a portal group; its first one holds what the target's hold. */
static void test_membership(void)
{
	int rc;
	json_object *doc = import3("shared", &rc), *d = NULL, *nd = NULL;
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL(config_fleet_gateway_add(doc, "gw-a", err, sizeof(err)), -EEXIST);
	CU_ASSERT_EQUAL(config_fleet_gateway_add(doc, "bad name", err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(config_fleet_gateway_add(doc, "gw-d", err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(config_fleet_check(doc, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(config_fleet_compose(doc, "gw-d", &d, err, sizeof(err)), 0);
	json_object *t = idx(at(d, "targets"), 0);
	CU_ASSERT_EQUAL(json_object_array_length(at(t, "tpgs")), 0);
	json_object *tpg = json_object_new_object();
	json_object_object_add(tpg, "tag", json_object_new_int(4));
	json_object_object_add(tpg, "luns", json_object_new_array());
	json_object_array_add(at(t, "tpgs"), tpg);
	/* Its group 4 in no ALUA group would be refused by the loader: put it in group 1. */
	json_object_array_add(at(idx(at(at(t, "alua"), "groups"), 0), "tpgs"), json_object_new_int(4));
	CU_ASSERT_EQUAL_FATAL(config_fleet_decompose(doc, "gw-d", d, &nd, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(config_fleet_check(nd, err, sizeof(err)), 0);
	/* The new group joined the target's LUN; its empty "luns" did not empty the target's. */
	CU_ASSERT_EQUAL(json_object_array_length(at(at(idx(at(nd, "targets"), 0), "tpg"), "luns")), 1);
	CU_ASSERT_EQUAL(config_fleet_gateway_remove(nd, "gw-d", err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(config_fleet_gateway_remove(nd, "gw-d", err, sizeof(err)), -ENOENT);
	/* FLEET_MAX_GATEWAYS: the one past it refused, by the method and by the check. */
	char name[16];
	for (int i = 3; i < FLEET_MAX_GATEWAYS; i++) {
		snprintf(name, sizeof(name), "more-%d", i);
		CU_ASSERT_EQUAL(config_fleet_gateway_add(nd, name, err, sizeof(err)), 0);
	}
	CU_ASSERT_EQUAL(config_fleet_check(nd, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(config_fleet_gateway_add(nd, "one-more", err, sizeof(err)), -ENOSPC);
	json_object *g = json_object_new_object();
	json_object_object_add(g, "name", json_object_new_string("one-more"));
	json_object_array_add(at(nd, "gateways"), g);
	CU_ASSERT_EQUAL(config_fleet_check(nd, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "1-64 gateways"));
	json_object_put(nd);
	json_object_put(d);
	json_object_put(doc);
}

static void test_rules(void)
{
	int rc;
	json_object *doc = import3("shared", &rc), *a = NULL, *nd = NULL;
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	/* One relative port, two gateways. */
	json_object *e = idx(at(idx(at(doc, "gateways"), 2), "tpgs"), 0);
	json_object_object_add(e, "tag", json_object_new_int(2));
	CU_ASSERT_EQUAL(config_fleet_check(doc, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "relative port 2 of target " T " is served by gateway gw-b and by gateway gw-c"));
	json_object_object_add(e, "tag", json_object_new_int(3));
	CU_ASSERT_EQUAL(config_fleet_check(doc, err, sizeof(err)), 0);
	/* A shared store under two target names: a gateway serving one serves both. */
	static const char *const two =
		"{\"format\": \"isert-fleet\", \"backstores\": [{\"name\": \"disk\", \"type\": \"rbd\", \"pool\": \"rbd\","
		" \"image\": \"i\"}], \"targets\": [{\"iqn\": \"" T "\", \"tpg\": {\"luns\": [{\"lun\": 0, \"backstore\": \"disk\"}]}},"
		" {\"iqn\": \"" T "2\", \"tpg\": {\"luns\": [{\"lun\": 0, \"backstore\": \"disk\"}]}}],"
		" \"gateways\": [{\"name\": \"a\", \"tpgs\": [{\"target\": \"" T "\", \"tag\": 1}, {\"target\": \"" T "2\", \"tag\": 1}]},"
		" {\"name\": \"b\", \"tpgs\": [{\"target\": \"" T "\", \"tag\": 2}]}]}";
	json_object *o = json_tokener_parse(two);
	CU_ASSERT_EQUAL(config_fleet_check(o, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore disk is a LUN of target " T "2, and gateway b serves other targets"));
	json_object *e2 = json_tokener_parse("{\"target\": \"" T "2\", \"tag\": 2}");
	json_object_array_add(at(idx(at(o, "gateways"), 1), "tpgs"), e2);
	CU_ASSERT_EQUAL(config_fleet_check(o, err, sizeof(err)), 0);
	json_object_put(o);
	/* A secret is never written in the document. */
	CU_ASSERT_EQUAL_FATAL(config_fleet_compose(doc, "gw-a", &a, err, sizeof(err)), 0);
	json_object *chap = json_object_new_object();
	json_object_object_add(chap, "userid", json_object_new_string("u"));
	json_object_object_add(chap, "password", json_object_new_string("secret-0123456789"));
	json_object_object_add(idx(at(idx(at(a, "targets"), 0), "tpgs"), 0), "demo_chap", chap);
	CU_ASSERT_EQUAL(config_fleet_decompose(doc, "gw-a", a, &nd, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "password_file"));
	json_object_put(a);
	/* The shape: an unknown key, a target with tpgs, a gateway serving a target the fleet lacks. */
	static const char *const bad[] = {
		"{\"format\": \"isert-fleet\", \"gateways\": [{\"name\": \"a\"}], \"extra\": 1}",
		"{\"format\": \"other\", \"gateways\": [{\"name\": \"a\"}]}",
		"{\"format\": \"isert-fleet\", \"gateways\": []}",
		"{\"format\": \"isert-fleet\", \"gateways\": [{\"name\": \"a\"}, {\"name\": \"a\"}]}",
		"{\"format\": \"isert-fleet\", \"targets\": [{\"iqn\": \"" T "\", \"tpgs\": []}], \"gateways\": [{\"name\": \"a\"}]}",
		"{\"format\": \"isert-fleet\", \"gateways\": [{\"name\": \"a\", \"tpgs\": [{\"target\": \"" T "\", \"tag\": 1}]}]}",
		"{\"format\": \"isert-fleet\", \"gateways\": [{\"name\": \"a\", \"global\": {\"reactors\": -1}}]}",
		"{\"format\": \"isert-fleet\", \"gateways\": [7], \"targets\": [1, \"x\"]}",
		"[]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_object *o = json_tokener_parse(bad[i]);
		err[0] = 0;
		CU_ASSERT_EQUAL(config_fleet_check(o, err, sizeof(err)), -EINVAL);
		CU_ASSERT_NOT_EQUAL(err[0], 0);
		json_object_put(o);
	}
	json_object_put(doc);
}

/* Every document damaged byte by byte is refused or taken, never a crash (run under the sanitizers too). */
static void test_hostile(void)
{
	int rc;
	json_object *doc = import3("shared", &rc);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
	size_t len = strlen(text);
	char *buf = malloc(len + 1);
	unsigned seed = 47, taken = 0;
	for (int round = 0; round < 3000; round++) {
		memcpy(buf, text, len + 1);
		for (int k = 0; k < 1 + round % 4; k++)
			buf[rand_r(&seed) % len] = "{}[]\",:0a-1 tx"[rand_r(&seed) % 15];
		json_object *o = json_tokener_parse(buf), *c = NULL;
		if (!o)
			continue;
		if (config_fleet_check(o, err, sizeof(err)) == 0) {
			taken++;
			CU_ASSERT_EQUAL(config_fleet_compose(o, "gw-a", &c, err, sizeof(err)) == 0 || c == NULL, 1);
		}
		json_object_put(c);
		json_object_put(o);
	}
	CU_ASSERT_TRUE(taken > 0); /* some damage leaves a valid document (a port, a name): those were composed */
	free(buf);
	json_object_put(doc);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("fleet", NULL, NULL);
	CU_add_test(s, "import of three gateways' files", test_import);
	CU_add_test(s, "composed and decomposed", test_round_trip);
	CU_add_test(s, "an edit on one gateway, seen by the others", test_edit_everywhere);
	CU_add_test(s, "gateways added and removed", test_membership);
	CU_add_test(s, "the fleet's rules", test_rules);
	CU_add_test(s, "hostile documents", test_hostile);
	CU_basic_set_mode(CU_BRM_NORMAL);
	return unit_run();
}
