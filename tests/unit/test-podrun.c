// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the pure pod-running decisions (agent/pod/podrun.c). */
/* The fixtures build spec structs from string literals. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "fsutil.h"
#include "podrun.h"
#include "util.h"

static char *joined(char **v)
{
	struct buf b;

	buf_init(&b, 0);
	for (size_t i = 0; v && v[i]; i++) {
		if (i)
			buf_append(&b, "|", 1, NULL);
		buf_append(&b, v[i], strlen(v[i]), NULL);
	}
	return buf_steal(&b, NULL);
}

static void check_argv(char **cmd, char **args, const char *want,
		       const char *what)
{
	char *ep[] = {"/entry", "-x", NULL}, *cm[] = {"default", NULL};
	struct image_config img = {.entrypoint = ep, .cmd = cm};
	struct unit_spec u = {.name = "u", .command = cmd, .args = args};
	struct cerr e = {0};
	char **argv = podrun_argv(&u, &img, &e);
	char *got = joined(argv);

	is_str(got, want, "argv: %s", what);
	free(got);
	strv_free(argv);
}

static void test_argv(void)
{
	char *cmd[] = {"/bin/sh", "-c", "echo $(A)", NULL};
	char *args[] = {"$(B)", "$$(A)", "$(NOPE)", NULL};
	struct image_config none = {0};
	struct unit_spec u = {.name = "u"};
	struct cerr e = {0};

	check_argv(NULL, NULL, "/entry|-x|default", "image entrypoint + cmd");
	check_argv(cmd, NULL, "/bin/sh|-c|echo $(A)",
		   "command drops image cmd; no second expansion");
	check_argv(NULL, args, "/entry|-x|$(B)|$$(A)|$(NOPE)",
		   "args replace cmd, verbatim");
	check_argv(cmd, args, "/bin/sh|-c|echo $(A)|$(B)|$$(A)|$(NOPE)",
		   "command and args");
	{
		char *empty[] = {NULL};

		check_argv(empty, empty, "/entry|-x|default",
			   "command [] and args [] are the image's");
		check_argv(empty, args, "/entry|-x|$(B)|$$(A)|$(NOPE)",
			   "command [] keeps the entrypoint");
		check_argv(cmd, empty, "/bin/sh|-c|echo $(A)",
			   "args [] with a command: no image cmd");
	}
	ok(podrun_argv(&u, &none, &e) == NULL && e.code == EINVAL,
	   "no command at all is an error (%s)", e.msg);
}

static void test_env(void)
{
	char *img_env[] = {"PATH=/img/bin", "A=img", "HOSTNAME=imghost",
			   "A=img2", NULL};
	struct image_config img = {.env = img_env};
	struct kv item = {.name = "k", .value = "s3cr3t"};
	size_t item_len = 6;
	struct secret sec = {
	    .name = "db", .items = &item, .item_len = &item_len, .n_items = 1};
	struct pod_spec pod = {.secrets = &sec, .n_secrets = 1};
	struct env_var ev[] = {
	    {.name = "A", .value = "unit"},
	    {.name = "C", .value = "$(A)-$$(PATH)"},
	    {.name = "S", .secret_name = "db", .secret_key = "k"},
	    {.name = "C", .value = "again"},
	};
	struct unit_spec u = {.name = "u", .env = ev, .n_env = 4};
	struct podrun_env_defaults d = {.hostname = "web-0", .home = "/root"};
	struct cerr e = {0};
	char **env = podrun_env(&u, &pod, &img, &d, &e);
	char *got = joined(env);

	is_str(got,
	       "PATH=/img/bin|A=unit|HOSTNAME=web-0|C=again|S=s3cr3t|"
	       "HOME=/root",
	       "env: unit over image in place, each name once, secret "
	       "resolved, HOSTNAME and HOME");
	free(got);
	strv_free(env);
	u.n_env = 2;
	env = podrun_env(&u, &pod, &img, NULL, &e);
	got = joined(env);
	is_str(got, "PATH=/img/bin|A=unit|HOSTNAME=imghost|C=$(A)-$$(PATH)",
	       "values are not expanded again");
	free(got);
	strv_free(env);
	{
		struct env_var mine[] = {{.name = "HOSTNAME", .value = "mine"},
					 {.name = "HOME", .value = "/h"},
					 {.name = "TERM", .value = "vt100"}};
		struct unit_spec v = {.name = "v", .env = mine, .n_env = 3};

		d.tty = true;
		env = podrun_env(&v, &pod, NULL, &d, &e);
		got = joined(env);
		is_str(got,
		       "HOSTNAME=mine|HOME=/h|TERM=vt100|PATH=/usr/local/sbin:/"
		       "usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		       "the unit's own HOSTNAME, HOME and TERM stand");
		free(got);
		strv_free(env);
		v.n_env = 0;
		env = podrun_env(&v, &pod, NULL, &d, &e);
		got = joined(env);
		ok(strstr(got, "TERM=xterm") != NULL, "TTY unit: TERM=xterm");
		free(got);
		strv_free(env);
		d.tty = false;
		env = podrun_env(&v, &pod, NULL, &d, &e);
		got = joined(env);
		ok(strstr(got, "TERM=") == NULL, "no TTY: no TERM");
		free(got);
		strv_free(env);
	}
	u.n_env = 3;
	ev[2].secret_key = "missing";
	ok(podrun_env(&u, &pod, &img, &d, &e) == NULL && e.code == ENOENT,
	   "missing secret key is an error (%s)", e.msg);
	u.n_env = 0;
	img.env = NULL;
	env = podrun_env(&u, &pod, &img, NULL, &e);
	ok(env && env[0] && str_has_prefix(env[0], "PATH=/usr/local/sbin"),
	   "a default PATH");
	strv_free(env);
}

static void write_str(const char *path, const char *s)
{
	struct cerr e = {0};
	fs_write_atomic(path, s, strlen(s), 0644, &e);
}

static int make_root(char *dir)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/etc", dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/etc/passwd", dir);
	write_str(path, "root:x:0:0:root:/root:/bin/sh\n"
			"app:x:1000:1001:App:/home/app:/bin/sh\n"
			"nobody:x:65534:65534::/nonexistent:/bin/false\n");
	snprintf(path, sizeof(path), "%s/etc/group", dir);
	write_str(path, "root:x:0:\nappgrp:x:1001:\nwheel:x:10:app,other\n"
			"video:x:44:app\nstaff:x:50:\n");
	return open(dir, O_PATH | O_DIRECTORY);
}

static void test_user(void)
{
	char tmpl[] = "/tmp/podrun-XXXXXX";
	char *dir = mkdtemp(tmpl);
	int root = make_root(dir);
	struct image_config img = {0};
	struct unit_spec u = {.name = "u"};
	struct pod_spec pod = {0};
	struct podrun_user r;
	struct cerr e = {0};
	int64_t supp[] = {2000};

	img.user = "app";
	ok(podrun_user(&u, &pod, &img, root, &r, &e) == 0 && r.uid == 1000 &&
	       r.gid == 1001 && !strcmp(r.home, "/home/app") &&
	       r.n_groups == 3 && r.groups[0] == 1001,
	   "named user: uid, primary gid, home, primary and member groups");
	podrun_user_free(&r);
	img.user = "app:staff";
	ok(podrun_user(&u, &pod, &img, root, &r, &e) == 0 && r.gid == 50,
	   "user:group by name");
	podrun_user_free(&r);
	img.user = "4242:4343";
	ok(podrun_user(&u, &pod, &img, root, &r, &e) == 0 && r.uid == 4242 &&
	       r.gid == 4343 && !strcmp(r.home, "/"),
	   "numeric user not in passwd");
	podrun_user_free(&r);
	img.user = "0";
	ok(podrun_user(&u, &pod, &img, root, &r, &e) == 0 &&
	       !strcmp(r.home, "/root"),
	   "root: home from passwd");
	podrun_user_free(&r);
	{
		int empty = open("/proc/self/fdinfo", O_PATH | O_DIRECTORY);

		img.user = NULL;
		ok(podrun_user(&u, &pod, &img, empty, &r, &e) == 0 &&
		       r.uid == 0 && !strcmp(r.home, "/root"),
		   "root without a passwd: HOME=/root");
		podrun_user_free(&r);
		img.user = "1234";
		ok(podrun_user(&u, &pod, &img, empty, &r, &e) == 0 &&
		       !strcmp(r.home, "/"),
		   "others without an entry: HOME=/");
		podrun_user_free(&r);
		close(empty);
	}
	img.user = "ghost";
	ok(podrun_user(&u, &pod, &img, root, &r, &e) < 0 && e.code == ENOENT,
	   "unknown user name is an error (%s)", e.msg);
	img.user = NULL;
	u.has_run_as_user = true;
	u.run_as_user = 65534;
	pod.supplemental_groups = supp;
	pod.n_supplemental_groups = 1;
	ok(podrun_user(&u, &pod, &img, root, &r, &e) == 0 && r.uid == 65534 &&
	       r.gid == 65534 && r.n_groups == 2 && r.groups[0] == 65534 &&
	       r.groups[1] == 2000,
	   "runAsUser takes the passwd gid; supplementalGroups added");
	podrun_user_free(&r);
	pod.has_run_as_group = true;
	pod.run_as_group = 7;
	ok(podrun_user(&u, &pod, &img, root, &r, &e) == 0 && r.gid == 7,
	   "pod runAsGroup");
	podrun_user_free(&r);
	/* The Kubernetes docs' security-context demo: id prints
	 * groups=3000,4000 (and the fsGroup) under the kubelet. */
	u.run_as_user = 1000;
	pod.run_as_group = 3000;
	supp[0] = 4000;
	pod.has_fs_group = true;
	pod.fs_group = 2000;
	ok(podrun_user(&u, &pod, &img, root, &r, &e) == 0 && r.gid == 3000 &&
	       r.n_groups == 5 && r.groups[0] == 3000 && r.groups[3] == 4000 &&
	       r.groups[4] == 2000,
	   "primary group first among the groups, then member groups, "
	   "supplementalGroups and fsGroup");
	podrun_user_free(&r);
	pod.has_fs_group = false;
	close(root);
	fs_rm_rf(dir, &e);
}

/* An image's /etc/passwd or /etc/group that is a FIFO, a device node or a
 * socket is refused at once (a FIFO would block the agent for good). */
static void test_user_etc_not_regular(void)
{
	static const char *const files[] = {"passwd", "group"};
	struct image_config img = {.user = "app"};
	struct unit_spec u = {.name = "u"};
	struct pod_spec pod = {0};

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		char tmpl[] = "/tmp/podrun-XXXXXX", path[256];
		char *dir = mkdtemp(tmpl);
		int root = make_root(dir);
		struct podrun_user r;
		struct cerr e = {0};

		snprintf(path, sizeof(path), "%s/etc/%s", dir, files[i]);
		unlink(path);
		ok(mkfifo(path, 0644) == 0, "mkfifo %s", path);
		alarm(10); /* the old code blocks here forever */
		ok(podrun_user(&u, &pod, &img, root, &r, &e) < 0 &&
		       e.code == EINVAL && strstr(e.msg, "fifo") &&
		       strstr(e.msg, files[i]),
		   "a FIFO as /etc/%s is refused: %s", files[i], e.msg);
		alarm(0);
		close(root);
		fs_rm_rf(dir, &e);
	}
}

static void test_caps(void)
{
	char *drop[] = {"NET_RAW", "cap_mknod", NULL},
	     *add[] = {"NET_ADMIN", NULL};
	char *all[] = {"ALL", NULL}, *bad[] = {"FLY", NULL};
	struct unit_spec u = {.name = "u"};
	struct cerr e = {0};
	char **c = podrun_caps(&u, &e);
	char *got = joined(c);

	ok(c && strv_len(c) == 14, "default set has 14 capabilities");
	ok(strstr(got, "CAP_CHOWN") && strstr(got, "CAP_NET_RAW") &&
	       !strstr(got, "CAP_SYS_ADMIN"),
	   "default set: %s", got);
	free(got);
	strv_free(c);
	u.caps_drop = drop;
	u.caps_add = add;
	c = podrun_caps(&u, &e);
	got = joined(c);
	ok(!strstr(got, "CAP_NET_RAW") && !strstr(got, "CAP_MKNOD") &&
	       strstr(got, "CAP_NET_ADMIN"),
	   "drop and add: %s", got);
	free(got);
	strv_free(c);
	u.caps_drop = all;
	u.caps_add = NULL;
	c = podrun_caps(&u, &e);
	ok(c && strv_len(c) == 0, "drop ALL leaves nothing");
	strv_free(c);
	u.caps_add = bad;
	ok(podrun_caps(&u, &e) == NULL && e.code == EINVAL,
	   "unknown capability refused (%s)", e.msg);
}

static void test_restart(void)
{
	ok(podrun_should_restart(RESTART_ALWAYS, 0), "Always restarts on 0");
	ok(!podrun_should_restart(RESTART_ON_FAILURE, 0),
	   "OnFailure keeps a success");
	ok(podrun_should_restart(RESTART_ON_FAILURE, 137),
	   "OnFailure restarts a failure");
	ok(!podrun_should_restart(RESTART_NEVER, 1), "Never never restarts");
	ok(podrun_backoff_s(1) == 10 && podrun_backoff_s(2) == 20 &&
	       podrun_backoff_s(5) == 160 && podrun_backoff_s(6) == 300 &&
	       podrun_backoff_s(50) == 300,
	   "back-off 10 s doubling to 5 min");
}

static void test_resources(void)
{
	const char *ok_body =
	    "{\"spec\":{\"resources\":{\"memory\":\"64Mi\",\"cpu\":\"1\"},"
	    "\"units\":[{\"name\":\"a\",\"image\":\"busybox\"}]}}";
	const char *bad_body =
	    "{\"spec\":{\"resources\":{\"memory\":\"lots\"},"
	    "\"units\":[{\"name\":\"a\",\"image\":\"busybox\"}]}}";
	struct pod_spec p;
	struct cerr e = {0};

	ok(wire_parse_pod(ok_body, strlen(ok_body), &p, &e) == 0 &&
	       p.memory_limit == 64 << 20,
	   "spec.resources.memory becomes the unit memory limit");
	pod_spec_free(&p);
	ok(wire_parse_pod(bad_body, strlen(bad_body), &p, &e) < 0 &&
	       e.code == EINVAL && strstr(e.msg, "spec.resources.memory"),
	   "a bad memory quantity is refused (%s)", e.msg);
}

int main(void)
{
	test_resources();
	test_argv();
	test_env();
	test_user();
	test_user_etc_not_regular();
	test_caps();
	test_restart();
	return tap_done();
}
