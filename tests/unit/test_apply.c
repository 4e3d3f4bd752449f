/*
 * CUnit tests for target/control/apply.c: a change planned without
 * reactors, connections or portals (the running target is made from a
 * small configuration, as the admin fuzzer does), and an addition carried
 * out.  The plan must say what differs, refuse what may not change while
 * it runs (with the key named), keep the restart keys, and leave the
 * running configuration as it was.
 */
#include <CUnit/Basic.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "target/control/control.h"
#include "target/iscsi/iscsi.h"
#include "target/runtime/runtime.h"

#include "unit_run.h"

#define IQN "iqn.2026-11.org.isert.unit:apply"

static char file_path[] = "/tmp/isert-test-apply-XXXXXX";

/*
 * A document: global keys, r0's and f0's keys (ram and file, LUNs 0 and 1),
 * more backstores and more LUNs; NULL for r0 or f0 gives the running ones'.
 */
static char *doc_of(const char *global, const char *r0, const char *f0, const char *backstores, const char *luns)
{
	static char buf[4096], f0_default[128];
	snprintf(f0_default, sizeof(f0_default), "\"path\":\"%s\",\"size\":\"1M\"", file_path);
	snprintf(buf, sizeof(buf),
		 "{\"global\":{%s},\"backstores\":[{\"name\":\"r0\",\"type\":\"ram\",%s},"
		 "{\"name\":\"f0\",\"type\":\"file\",%s}%s],"
		 "\"targets\":[{\"iqn\":\"" IQN "\",\"tpgs\":[{\"tag\":1,\"enable\":true,\"demo_mode\":true,"
		 "\"luns\":[{\"lun\":0,\"backstore\":\"r0\"},{\"lun\":1,\"backstore\":\"f0\"}%s]}]}]}",
		 global, r0 ? r0 : "\"size\":\"1M\"", f0 ? f0 : f0_default, backstores, luns);
	return buf;
}

static char *doc(const char *global, const char *backstores, const char *luns)
{
	return doc_of(global, NULL, NULL, backstores, luns);
}

static struct config *load(const char *text)
{
	struct config *c = NULL;
	char err[512];
	if (config_load_string(text, "<unit>", &c, err, sizeof(err)))
		fprintf(stderr, "load: %s\n", err);
	return c;
}

static int setup(void)
{
	int fd = mkstemp(file_path);
	if (fd < 0)
		return 1;
	close(fd);
	struct config *c = load(doc("", "", ""));
	char err[512];
	if (!c || iscsi_setup(c, NULL, 0, err, sizeof(err))) {
		fprintf(stderr, "setup: %s\n", err);
		return 1;
	}
	return 0;
}

static int teardown(void)
{
	apply_free();
	iscsi_free();
	unlink(file_path);
	return 0;
}

/* The plan's steps as "op path" lines. */
static void steps_text(const struct apply_plan *p, char *out, size_t n)
{
	json_object *s = apply_plan_steps(p);
	size_t used = 0;
	out[0] = 0;
	for (size_t i = 0; i < json_object_array_length(s); i++) {
		json_object *st = json_object_array_get_idx(s, i), *op, *path;
		json_object_object_get_ex(st, "op", &op);
		json_object_object_get_ex(st, "path", &path);
		used += (size_t)snprintf(out + used, n - used, "%s %s\n", json_object_get_string(op),
					 json_object_get_string(path));
	}
}

/* Plan the whole document text; rc, the steps and the error. */
static int plan(const char *text, char *steps, size_t n, char *err, size_t errlen)
{
	struct apply_plan *p = NULL;
	struct config *c = load(text);
	if (!c)
		return -100;
	char *before = config_to_json(rt_config());
	err[0] = steps[0] = 0;
	int rc = apply_plan_whole(c, &p, err, errlen);
	if (!rc)
		steps_text(p, steps, n);
	apply_plan_free(p);
	char *after = config_to_json(rt_config());
	CU_ASSERT_STRING_EQUAL(before, after); /* planning changes nothing that runs */
	free(before);
	free(after);
	return rc;
}

static void test_same(void)
{
	char steps[1024], err[512];
	CU_ASSERT_EQUAL(plan(doc("", "", ""), steps, sizeof(steps), err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(steps, "");
}

static void test_steps(void)
{
	char steps[1024], err[512];
	int rc = plan(doc("", ",{\"name\":\"r1\",\"type\":\"ram\",\"size\":\"1M\"}", ",{\"lun\":2,\"backstore\":\"r1\"}"),
		      steps, sizeof(steps), err, sizeof(err));
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_STRING_EQUAL(steps, "create /backstores/r1\ncreate /iscsi/" IQN "/tpg1/luns/lun2\n");
}

static void test_restart_keys(void)
{
	struct apply_plan *p = NULL;
	char err[512];
	struct config *c = load(doc("\"reactors\":3,\"max_sessions\":7", "", ""));
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL_FATAL(apply_plan_whole(c, &p, err, sizeof(err)), 0);
	json_object *r = apply_plan_restart(p);
	CU_ASSERT_EQUAL(json_object_array_length(r), 1);
	CU_ASSERT_STRING_EQUAL(json_object_get_string(json_object_array_get_idx(r, 0)), "reactors");
	char steps[512];
	steps_text(p, steps, sizeof(steps));
	/* The key that applies is a step; the one that needs a restart is not. */
	CU_ASSERT_STRING_EQUAL(steps, "set /global/max_sessions\n");
	apply_plan_free(p);
}

static void test_identity_in_use(void)
{
	char steps[1024], err[512], f0[256];
	/* f0's path changes while LUN 1 uses it: refused, naming the key. */
	snprintf(f0, sizeof(f0), "\"path\":\"%s.other\",\"size\":\"1M\"", file_path);
	CU_ASSERT_EQUAL(plan(doc_of("", NULL, f0, "", ""), steps, sizeof(steps), err, sizeof(err)), -EBUSY);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'f0': path cannot change while LUNs use it: remove its LUNs first"));
	/* Any key but size and write_cache is the backstore's identity. */
	CU_ASSERT_EQUAL(plan(doc_of("", "\"size\":\"1M\",\"thin\":true", NULL, "", ""), steps, sizeof(steps), err,
			     sizeof(err)), -EBUSY);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'r0': thin cannot change"));
	CU_ASSERT_EQUAL(plan(doc_of("", "\"size\":\"1M\",\"write_cache\":true", NULL, "", ""), steps, sizeof(steps),
			     err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(steps, "set /backstores/r0/write_cache\n");
}

static void test_resize_rules(void)
{
	char steps[1024], err[512], f0[256];
	/* A ram backstore never changes size while it runs. */
	CU_ASSERT_EQUAL(plan(doc_of("", "\"size\":\"2M\"", NULL, "", ""), steps, sizeof(steps), err, sizeof(err)),
			-EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstore 'r0': size: a ram backstore cannot be resized while it runs"));
	/* A file grows (planned: the file is not touched), and never shrinks below what it has. */
	snprintf(f0, sizeof(f0), "\"path\":\"%s\",\"size\":\"4M\"", file_path);
	CU_ASSERT_EQUAL(plan(doc_of("", NULL, f0, "", ""), steps, sizeof(steps), err, sizeof(err)), 0);
	CU_ASSERT_STRING_EQUAL(steps, "set /backstores/f0/size\n");
	CU_ASSERT_EQUAL(backstore_size(rt_store_at(1)->bs), 1u << 20);
	snprintf(f0, sizeof(f0), "\"path\":\"%s\",\"size\":512", file_path);
	CU_ASSERT_EQUAL(plan(doc_of("", NULL, f0, "", ""), steps, sizeof(steps), err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "is smaller than the current 1048576 bytes"));
}

static void test_additions(void)
{
	struct apply_plan *p = NULL;
	struct apply_result res;
	char err[512], steps[512];
	/* One backstore: the loader's rules and words, as the next element of the array. */
	json_object *b = json_tokener_parse("{\"name\":\"r9\",\"type\":\"ram\",\"size\":\"1M\",\"serial\":\"r0\"}");
	CU_ASSERT_EQUAL(apply_plan_backstore(b, &p, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "backstores[2]"));
	json_object_put(b);
	b = json_tokener_parse("{\"name\":\"r9\",\"type\":\"ram\",\"size\":\"1M\"}");
	CU_ASSERT_EQUAL_FATAL(apply_plan_backstore(b, &p, err, sizeof(err)), 0);
	json_object_put(b);
	steps_text(p, steps, sizeof(steps));
	CU_ASSERT_STRING_EQUAL(steps, "create /backstores/r9\n");
	CU_ASSERT_EQUAL(rt_config()->nbackstores, 2); /* planned only */
	CU_ASSERT_EQUAL(apply_execute(p, &res, err, sizeof(err)), 0);
	apply_plan_free(p);
	CU_ASSERT_EQUAL_FATAL(rt_config()->nbackstores, 3);
	CU_ASSERT_STRING_EQUAL(rt_config()->backstores[2].name, "r9");
	CU_ASSERT_PTR_NOT_NULL(rt_store_at(2)->lu);
	CU_ASSERT_PTR_EQUAL(rt_store_named("r9", NULL), rt_store_at(2));
	/* One LUN, on it: numbered by the caller, checked by the loader's code. */
	json_object *l = json_tokener_parse("{\"lun\":1,\"backstore\":\"r9\"}");
	CU_ASSERT_EQUAL(apply_plan_lun(0, 0, l, &p, err, sizeof(err)), -EINVAL);
	json_object_put(l);
	l = json_tokener_parse("{\"lun\":5,\"backstore\":\"r9\"}");
	CU_ASSERT_EQUAL_FATAL(apply_plan_lun(0, 0, l, &p, err, sizeof(err)), 0);
	json_object_put(l);
	steps_text(p, steps, sizeof(steps));
	CU_ASSERT_STRING_EQUAL(steps, "create /iscsi/" IQN "/tpg1/luns/lun5\n");
	CU_ASSERT_EQUAL(apply_execute(p, &res, err, sizeof(err)), 0);
	apply_plan_free(p);
	CU_ASSERT_EQUAL(rt_config()->targets[0].tpgs[0].nluns, 3);
	CU_ASSERT_EQUAL(rt_config()->targets[0].tpgs[0].luns[2].backstore_index, 2);
}

int main(void)
{
	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	CU_pSuite s = CU_add_suite("apply", setup, teardown);
	CU_add_test(s, "same", test_same);
	CU_add_test(s, "steps", test_steps);
	CU_add_test(s, "restart_keys", test_restart_keys);
	CU_add_test(s, "identity_in_use", test_identity_in_use);
	CU_add_test(s, "resize_rules", test_resize_rules);
	CU_add_test(s, "additions", test_additions);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	return unit_run();
}
