// SPDX-License-Identifier: Apache-2.0
/* The agent's seccomp policy (agent/pod/seccomp-policy.c): it fails closed when
 * never loaded, and a Localhost profile is read only from beneath the
 * profile directory (issue 27). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "fsutil.h"
#include "seccomp-policy.h"
#include "util.h"

static char *const no_caps[] = {NULL};

static int policy_for(const char *type, const char *file, void **bpf,
		      struct cerr *e)
{
	struct seccomp_ref r = {.type = (char *)type,
				.localhost = (char *)file};
	size_t len;

	cerr_clear(e);
	return seccomp_policy_for(type ? &r : NULL, NULL, no_caps, bpf, &len,
				  e);
}

static void test_uninitialised_refuses(void)
{
	struct cerr e = {0};
	void *bpf = (void *)1;

	ok(policy_for(NULL, NULL, &bpf, &e) < 0 && e.code == EPERM &&
	       bpf == NULL,
	   "never loaded: a unit without a profile is refused: %s", e.msg);
	ok(policy_for("Unconfined", NULL, &bpf, &e) < 0 && e.code == EPERM,
	   "never loaded: even Unconfined is refused: %s", e.msg);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f || fputs(text, f) < 0 || fclose(f) != 0)
		abort();
}

static void test_localhost_beneath(const char *dir)
{
	static const char prof[] = "{\"defaultAction\": \"SCMP_ACT_ALLOW\"}";
	struct seccomp_policy_opts o = {.localhost_dir = NULL};
	char root[512], path[600], outside[600];
	struct cerr e = {0};
	void *bpf = NULL;

	snprintf(root, sizeof(root), "%s/profiles", dir);
	snprintf(outside, sizeof(outside), "%s/outside.json", dir);
	if (mkdir(root, 0755) < 0)
		abort();
	write_file(outside, prof);
	snprintf(path, sizeof(path), "%s/ok.json", root);
	write_file(path, prof);
	snprintf(path, sizeof(path), "%s/abs.json", root);
	if (symlink(outside, path) < 0)
		abort();
	snprintf(path, sizeof(path), "%s/up.json", root);
	if (symlink("../outside.json", path) < 0)
		abort();
	o.localhost_dir = root;
	ok(seccomp_policy_init(&o, &e) == 0, "loaded: %s", e.msg);
	ok(policy_for(NULL, NULL, &bpf, &e) == 0 && bpf, "default: a filter");
	free(bpf);
	ok(policy_for("Localhost", "ok.json", &bpf, &e) == 0 && bpf,
	   "Localhost ok.json: %s", e.msg);
	free(bpf);
	bpf = NULL;
	ok(policy_for("Localhost", "../outside.json", &bpf, &e) < 0 && !bpf,
	   "'..' refused: %s", e.msg);
	ok(policy_for("Localhost", "/../outside.json", &bpf, &e) < 0 && !bpf,
	   "'/..' refused: %s", e.msg);
	ok(policy_for("Localhost", "abs.json", &bpf, &e) < 0 && !bpf,
	   "a link to an absolute path out of the root refused: %s", e.msg);
	ok(policy_for("Localhost", "up.json", &bpf, &e) < 0 && !bpf,
	   "a link climbing out of the root refused: %s", e.msg);
	seccomp_policy_free();
	ok(policy_for(NULL, NULL, &bpf, &e) < 0 && e.code == EPERM,
	   "freed: refused again: %s", e.msg);
}

int main(void)
{
	char dir[] = "/tmp/test-seccomp-policy-XXXXXX";
	struct cerr e = {0};

	if (!mkdtemp(dir))
		abort();
	test_uninitialised_refuses();
	test_localhost_beneath(dir);
	if (fs_rm_rf(dir, &e) < 0)
		fprintf(stderr, "# rm %s: %s\n", dir, e.msg);
	return tap_done();
}
