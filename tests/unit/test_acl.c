/* SPDX-License-Identifier: BSD-3-Clause */
/* test_acl.c -- the --acl file: parsing, errors naming the line, rights of each subject */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "acl.h"
#include "faults.h"

static char tmpdir[256];

/* load -- acl_load of @text written to a file; its return, *out set on success */
static int load(const char *text, struct acl **out, char *err, size_t errlen)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/acl", tmpdir);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return acl_load(path, out, err, errlen);
}

static struct acl_subject user(const char *name)
{
	struct acl_subject s = {0};
	snprintf(s.user, sizeof(s.user), "%s", name);
	return s;
}

static void acl_rights__union_of_matching_rules(void **state)
{
	struct acl *a;
	char err[256];
	assert_int_equal(load("# comment\n"
			      "\n"
			      "user:alice  alice-*   rw,create   # her own\n"
			      "user:alice  shared    ro\n"
			      "user:bob    shared    rw\n"
			      "token       tok-?     rw\n"
			      "local       scratch   ro\n"
			      "*           public    ro\n",
			      &a, err, sizeof(err)),
			 0);
	struct acl_subject alice = user("alice"), bob = user("bob");
	assert_int_equal(acl_rights(a, &alice, "alice-1"), ACL_READ | ACL_WRITE | ACL_CREATE);
	assert_int_equal(acl_rights(a, &alice, "shared"), ACL_READ);
	assert_int_equal(acl_rights(a, &bob, "shared"), ACL_READ | ACL_WRITE);
	assert_int_equal(acl_rights(a, &bob, "alice-1"), 0);
	assert_int_equal(acl_rights(a, &alice, "public"), ACL_READ);
	assert_int_equal(acl_rights(a, &alice, "scratch"), 0);
	/* the token client is not local, and a named client is neither */
	struct acl_subject tok = {.token = true, .local = true};
	assert_int_equal(acl_rights(a, &tok, "tok-1"), ACL_READ | ACL_WRITE);
	assert_int_equal(acl_rights(a, &tok, "tok-12"), 0);
	assert_int_equal(acl_rights(a, &tok, "scratch"), 0);
	struct acl_subject loc = {.local = true};
	assert_int_equal(acl_rights(a, &loc, "scratch"), ACL_READ);
	assert_int_equal(acl_rights(a, &loc, "tok-1"), 0);
	struct acl_subject named_local = user("alice");
	named_local.local = true;
	named_local.token = true;
	assert_int_equal(acl_rights(a, &named_local, "scratch"), 0);
	assert_int_equal(acl_rights(a, &named_local, "tok-1"), 0);
	struct acl_subject nobody = {0};
	assert_int_equal(acl_rights(a, &nobody, "public"), ACL_READ);
	assert_int_equal(acl_rights(a, &nobody, "shared"), 0);
	/* the fault switch of the control grants everything */
	rdax_faults.acl_ignore = true;
	assert_int_equal(acl_rights(a, &nobody, "shared"), ACL_ALL);
	rdax_faults.acl_ignore = false;
	acl_delete(&a);
	assert_null(a);
	/* no ACL: every right */
	assert_int_equal(acl_rights(NULL, &nobody, "x"), ACL_ALL);
}

/*
 * acl_rights_every__star_rules_only -- the rights on every volume name come
 * from rules whose VOLUMES is "*" alone: a pattern that happens to match
 * every volume there is now ("v*") does not speak for names to come
 */
static void acl_rights_every__star_rules_only(void **state)
{
	struct acl *a;
	char err[256];
	assert_int_equal(load("user:admin  *     rw,create\n"
			      "user:alice  *     ro\n"
			      "user:alice  v*    rw,create\n"
			      "local       [a-z]* create\n"
			      "*           *     ro\n",
			      &a, err, sizeof(err)),
			 0);
	struct acl_subject admin = user("admin"), alice = user("alice"), loc = {.local = true};
	assert_int_equal(acl_rights_every(a, &admin), ACL_ALL);
	assert_int_equal(acl_rights(a, &alice, "v1"), ACL_ALL);
	assert_int_equal(acl_rights_every(a, &alice), ACL_READ); /* her own "*" and anyone's */
	assert_int_equal(acl_rights(a, &loc, "x"), ACL_READ | ACL_CREATE);
	assert_int_equal(acl_rights_every(a, &loc), ACL_READ);
	rdax_faults.acl_ignore = true;
	assert_int_equal(acl_rights_every(a, &loc), ACL_ALL);
	rdax_faults.acl_ignore = false;
	acl_delete(&a);
	assert_int_equal(acl_rights_every(NULL, &loc), ACL_ALL); /* no ACL: every right */
}

static void acl_load__errors_name_the_line(void **state)
{
	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"user:alice vol\n", ":1: not 'SUBJECT VOLUMES RIGHTS'"},
	    {"# ok\nuser:alice vol rw extra\n", ":2: not 'SUBJECT VOLUMES RIGHTS'"},
	    {"alice vol rw\n", ":1: the subject is not"},
	    {"user: vol rw\n", ":1: the subject is not"},
	    {"user:alice vol rx\n", ":1: the rights are not"},
	    {"user:alice vol ro,,\n", ":1: the rights are not"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct acl *a = NULL;
		char err[256] = "";
		assert_int_equal(load(bad[i].text, &a, err, sizeof(err)), -EINVAL);
		assert_null(a);
		if (!strstr(err, bad[i].want))
			fail_msg("'%s': got '%s', want '%s'", bad[i].text, err, bad[i].want);
	}
	struct acl *a = NULL;
	char err[256];
	assert_int_equal(acl_load("/nonexistent/acl", &a, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "No such file"));
}

static int setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/rdax-test-acl-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/acl", tmpdir);
	unlink(path);
	rmdir(tmpdir);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(acl_rights__union_of_matching_rules),
	    cmocka_unit_test(acl_rights_every__star_rules_only),
	    cmocka_unit_test(acl_load__errors_name_the_line),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
