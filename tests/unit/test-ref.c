// SPDX-License-Identifier: Apache-2.0
/* Unit tests of image reference parsing: Docker's normalisation of short
 * names and the distribution grammar, table-driven. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "cleanup.h"
#include "pull-internal.h"
#include "util.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define D256 "sha256:" HEX64
#define D512 "sha512:" HEX64 HEX64
#define HUB DOCKER_HUB_HOST

static const struct {
	const char *in, *registry, *repository, *tag, *digest;
} good[] = {
    {"busybox", HUB, "library/busybox", "latest", NULL},
    {"busybox:1.36", HUB, "library/busybox", "1.36", NULL},
    {"busybox:LATEST_x.y-z", HUB, "library/busybox", "LATEST_x.y-z", NULL},
    {"user/app", HUB, "user/app", "latest", NULL},
    {"user/app:v1.0-rc_1", HUB, "user/app", "v1.0-rc_1", NULL},
    {"docker.io/busybox", HUB, "library/busybox", "latest", NULL},
    {"docker.io/library/busybox", HUB, "library/busybox", "latest", NULL},
    {"index.docker.io/user/app", HUB, "user/app", "latest", NULL},
    {"index.docker.io/alpine:3", HUB, "library/alpine", "3", NULL},
    {"registry-1.docker.io/alpine", HUB, "library/alpine", "latest", NULL},
    {"127.0.0.1:5000/a/b", "127.0.0.1:5000", "a/b", "latest", NULL},
    {"localhost/x", "localhost", "x", "latest", NULL},
    {"localhost:5000/x:tag", "localhost:5000", "x", "tag", NULL},
    {"example.com/x", "example.com", "x", "latest", NULL},
    {"Example.COM/app", "Example.COM", "app", "latest", NULL},
    {"ghcr.io/org/team/app:1", "ghcr.io", "org/team/app", "1", NULL},
    {"quay.io/a_b/c__d/e--f/g.h", "quay.io", "a_b/c__d/e--f/g.h", "latest",
     NULL},
    {"my-registry.local:443/ns/app", "my-registry.local:443", "ns/app",
     "latest", NULL},
    {"[::1]:5000/app", "[::1]:5000", "app", "latest", NULL},
    {"[fe80::1]/app", "[fe80::1]", "app", "latest", NULL},
    {"localhost:5000", HUB, "library/localhost", "5000", NULL},
    {"example.com", HUB, "library/example.com", "latest", NULL},
    {"a-b---c/d", HUB, "a-b---c/d", "latest", NULL},
    {"x", HUB, "library/x", "latest", NULL},
    {"0/1", HUB, "0/1", "latest", NULL},
    {"busybox@" D256, HUB, "library/busybox", NULL, D256},
    {"busybox:1.36@" D256, HUB, "library/busybox", "1.36", D256},
    {"ghcr.io/a/b@" D512, "ghcr.io", "a/b", NULL, D512},
    {"localhost:5000/a:t@" D256, "localhost:5000", "a", "t", D256},
    {"user/" HEX64, HUB, "user/" HEX64, "latest", NULL},
};

static const struct {
	const char *in, *msg;
} bad[] = {
    {"", "empty image reference"},
    {"Busybox", "must be lowercase"},
    {"user/App", "must be lowercase"},
    {"busybox:", "tag is empty"},
    {"busybox:-x", "tag '-x' must start"},
    {"busybox:.x", "must start with a letter"},
    {"busybox:tag!", "may hold only"},
    {"busybox:a:b", "component 'busybox:a'"},
    {"busybox@sha256:abc", "malformed digest"},
    {"busybox@", "digest is empty"},
    {"busybox@md5:" HEX64, "unsupported digest"},
    {"busybox@sha256:" HEX64 "@x", "malformed digest"},
    {"busybox@SHA256:" HEX64, "unsupported digest"},
    {"a..b", "component 'a..b'"},
    {"a___b", "component 'a___b'"},
    {"a_.b", "component"},
    {"-a", "component '-a'"},
    {"a-", "component 'a-'"},
    {"_", "component '_'"},
    {"a//b", "component ''"},
    {"/a", "component ''"},
    {"a/", "component ''"},
    {"example.com/", "repository is empty"},
    {":tag", "repository is empty"},
    {"@" D256, "repository is empty"},
    {"host:99999/a", "registry 'host:99999'"},
    {"host:0/a", "registry 'host:0'"},
    {"host:/a", "registry 'host:'"},
    {"bad_host.com/a", "registry 'bad_host.com'"},
    {"-host.com/a", "registry '-host.com'"},
    {"host-.com/a", "registry 'host-.com'"},
    {"a..com/x", "registry 'a..com'"},
    {"[zz]:5000/a", "registry '[zz]:5000'"},
    {"[]/a", "component '[]'"},
    {"[::1/a", "registry '[::1'"},
    {"[::1]x/a", "registry '[::1]x'"},
    {HEX64, "image ID"},
    {"busy box", "component 'busy box'"},
    {"busy\tbox", "control character"},
    {"busybox\x7f", "control character"},
    {"a/b:tag@sha256:short", "malformed digest"},
    {"a/b@sha256:" HEX64 ":x", "malformed digest"},
    {"a/b:t@", "digest is empty"},
};

static void test_good(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		struct image_ref r;
		struct cerr e = {0};
		const char *in = good[i].in;

		if (ref_parse(in, &r, &e) < 0) {
			ok(0, "'%s' parses (%s)", in, e.msg);
			continue;
		}
		is_str(r.registry, good[i].registry, "'%s': registry", in);
		is_str(r.repository, good[i].repository, "'%s': repository",
		       in);
		is_str(r.tag, good[i].tag, "'%s': tag", in);
		is_str(r.digest, good[i].digest, "'%s': digest", in);
		ref_free(&r);
		ok(!r.registry && !r.tag, "'%s': ref_free zeroes", in);
	}
}

static void test_bad(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		struct image_ref r;
		struct cerr e = {0};
		int rc = ref_parse(bad[i].in, &r, &e);

		ok(rc < 0 && e.code == EINVAL && strstr(e.msg, bad[i].msg),
		   "'%s' refused: %s", bad[i].in, e.msg);
		if (rc < 0 && !strstr(e.msg, bad[i].msg))
			printf("#   want message containing '%s'\n",
			       bad[i].msg);
		ok(!r.registry && !r.repository && !r.tag && !r.digest,
		   "'%s': nothing left behind", bad[i].in);
		if (rc == 0)
			ref_free(&r);
	}
}

static void test_messages(void)
{
	struct image_ref r;
	struct cerr e = {0};

	ok(ref_parse(NULL, &r, &e) < 0 && e.code == EINVAL, "NULL refused");
	ok(ref_parse("busybox:-x", &r, &e) < 0 &&
	       str_has_prefix(e.msg, "invalid reference 'busybox:-x': tag"),
	   "message names the reference and the part: %s", e.msg);
}

static char *repeat(char c, size_t n)
{
	char *s = xmalloc(n + 1);

	memset(s, c, n);
	s[n] = '\0';
	return s;
}

static void test_lengths(void)
{
	struct image_ref r;
	struct cerr e = {0};
	cleanup_free char *r255 = repeat('a', 255);
	cleanup_free char *r256 = repeat('a', 256);
	cleanup_free char *huge = repeat('a', 5000);
	cleanup_free char *t128 = NULL, *t129 = NULL, *s = NULL;

	s = xasprintf("example.com/%s", r255);
	ok(ref_parse(s, &r, &e) == 0, "255-character repository accepted");
	ref_free(&r);
	free(s);
	s = xasprintf("example.com/%s", r256);
	ok(ref_parse(s, &r, &e) < 0 && strstr(e.msg, "longer than 255"),
	   "256-character repository refused: %.80s", e.msg);
	ok(ref_parse(huge, &r, &e) < 0 && strstr(e.msg, "longer than 4096"),
	   "5000-character reference refused");
	t128 = repeat('t', 128);
	t129 = repeat('t', 129);
	free(s);
	s = xasprintf("a:%s", t128);
	ok(ref_parse(s, &r, &e) == 0 && strlen(r.tag) == 128,
	   "128-character tag accepted");
	ref_free(&r);
	free(s);
	s = xasprintf("a:%s", t129);
	ok(ref_parse(s, &r, &e) < 0 && strstr(e.msg, "tag is longer"),
	   "129-character tag refused");
}

static void test_string(void)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
	    {"busybox", HUB "/library/busybox:latest"},
	    {"docker.io/user/app:1", HUB "/user/app:1"},
	    {"localhost:5000/a/b", "localhost:5000/a/b:latest"},
	    {"a@" D256, HUB "/library/a@" D256},
	    {"a:t@" D256, HUB "/library/a:t@" D256},
	};
	struct image_ref zero = {0};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct image_ref r, again;
		struct cerr e = {0};
		cleanup_free char *s = NULL, *s2 = NULL;

		ok(ref_parse(cases[i].in, &r, &e) == 0, "'%s' parses",
		   cases[i].in);
		s = ref_string(&r);
		is_str(s, cases[i].out, "ref_string of '%s'", cases[i].in);
		ok(ref_parse(s, &again, &e) == 0 && (s2 = ref_string(&again)) &&
		       !strcmp(s, s2),
		   "'%s' round-trips", s);
		ref_free(&r);
		ref_free(&again);
	}
	ok(ref_string(&zero) == NULL, "ref_string of an empty ref is NULL");
	ref_free(&zero);
	ref_free(NULL);
	ok(1, "ref_free accepts zeroed and NULL refs");
}

int main(void)
{
	test_good();
	test_bad();
	test_messages();
	test_lengths();
	test_string();
	return tap_done();
}
