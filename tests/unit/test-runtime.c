// SPDX-License-Identifier: Apache-2.0
/* The runtime's pure parts and the parts that work on a fake root: run.json
 * parsing and serialization, state.json/exit.json, exit decisions, cgroup
 * layouts (v1, v2, hybrid, nested) on a plain directory tree, the mount
 * plan, and resolution beneath a rootfs full of hostile symlinks. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "buf.h"
#include "fsutil.h"
#include "path.h"
#include "runtime.h"
#include "util.h"

static char tmp[] = "/tmp/test-runtime-XXXXXX";

static const char full_json[] =
    "{\"id\":\"pod_web\",\"rootfs\":\"/var/lib/cell/rootfs/web\","
    "\"readonlyRootfs\":true,\"args\":[\"nginx\",\"-g\",\"daemon off;\"],"
    "\"env\":[\"PATH=/usr/bin:/bin\",\"A=b=c\"],\"cwd\":\"/srv\","
    "\"uid\":101,\"gid\":102,\"groups\":[4,27],"
    "\"capabilities\":[\"chown\",\"CAP_KILL\",\"NET_BIND_SERVICE\",\"KILL\"],"
    "\"ambientCapabilities\":[\"net_bind_service\"],"
    "\"noNewPrivileges\":true,\"hostname\":\"web-0\","
    "\"namespaces\":{\"network\":\"/run/netns/pod\",\"pid\":null},"
    "\"mounts\":[{\"source\":\"/var/lib/cell/vol/data\",\"subPath\":"
    "\"pg/data\",\"target\":"
    "\"/data\",\"type\":\"bind\",\"options\":[\"rbind\",\"ro\"]},"
    "{\"target\":\"/scratch\",\"type\":\"tmpfs\",\"options\":[\"nosuid\","
    "\"nodev\"],\"data\":\"size=64m\"}],"
    "\"cgroup\":{\"path\":\"cell/pod/web\",\"memoryLimit\":134217728,"
    "\"cpuQuota\":250,\"pidsLimit\":64},"
    "\"log\":{\"path\":\"/var/log/cell/web/0.log\",\"maxBytes\":1048576},"
    "\"graceSeconds\":5,\"tty\":false}";

static const char min_json[] =
    "{\"id\":\"u\",\"rootfs\":\"/r\",\"args\":[\"/bin/true\"],"
    "\"cgroup\":{\"path\":\"cell/u\"},\"log\":{\"path\":\"/l/u.log\"}}";

static int parse(const char *json, struct run_config *c, struct cerr *e)
{
	return runconfig_parse(json, strlen(json), c, e);
}

static void test_parse_full(void)
{
	struct run_config c;
	struct cerr e = {0};

	ok(parse(full_json, &c, &e) == 0, "full run.json parses (%s)", e.msg);
	is_str(c.id, "pod_web", "id");
	ok(c.readonly_rootfs && c.no_new_privs && !c.tty, "booleans");
	ok(strv_len(c.argv) == 3 && !strcmp(c.argv[2], "daemon off;"), "args");
	is_str(c.env[1], "A=b=c", "env keeps '=' in values");
	ok(c.uid == 101 && c.gid == 102 && c.n_groups == 2 && c.groups[1] == 27,
	   "user");
	ok(strv_len(c.caps) == 3, "capabilities deduplicated");
	is_str(c.caps[0], "CAP_CHOWN", "capability names normalized");
	is_str(c.ambient_caps[0], "CAP_NET_BIND_SERVICE", "ambient");
	is_str(c.netns_path, "/run/netns/pod", "netns");
	ok(!c.pid_ns_path && !c.ipc_ns_path, "null namespaces mean new ones");
	ok(c.n_mounts == 2 && c.mounts[0].flags == (MS_REC | MS_RDONLY) &&
	       c.mounts[1].flags == (MS_NOSUID | MS_NODEV),
	   "mount options");
	is_str(c.mounts[1].data, "size=64m", "mount data");
	is_str(c.mounts[0].sub_path, "pg/data", "a bind's subPath");
	ok(c.memory_limit == 134217728 && c.cpu_quota == 250 &&
	       c.pids_limit == 64,
	   "limits");
	ok(c.log_max_bytes == 1048576 && c.grace_seconds == 5, "log, grace");
	runconfig_free(&c);
}

static void test_parse_defaults(void)
{
	struct run_config c;
	struct cerr e = {0};

	ok(parse(min_json, &c, &e) == 0, "minimal run.json parses (%s)", e.msg);
	is_str(c.cwd, "/", "cwd defaults to /");
	ok(c.env && !c.env[0], "env defaults to empty");
	ok(c.grace_seconds == 30, "grace defaults to 30");
	ok(!c.caps && c.uid == 0 && !c.hostname, "no caps, root, no hostname");
	runconfig_free(&c);
}

static void expect_error(const char *json, const char *needle)
{
	struct run_config c;
	struct cerr e = {0};
	int rc = parse(json, &c, &e);

	ok(rc < 0 && strstr(e.msg, needle), "refused: %s", needle);
	if (rc == 0)
		runconfig_free(&c);
	else if (!strstr(e.msg, needle))
		printf("#   message: %s\n", e.msg);
}

#define BASE_HEAD "{\"id\":\"u\",\"rootfs\":\"/r\",\"args\":[\"x\"],"
#define BASE_TAIL "\"cgroup\":{\"path\":\"c/u\"},\"log\":{\"path\":\"/l\"}}"

static void test_parse_errors(void)
{
	expect_error("[]", "not an object");
	expect_error("{\"rootfs\":\"/r\"}", "id: missing");
	expect_error("{\"id\":\"u\",\"rootfs\":\"r\"}", "not absolute");
	expect_error(BASE_HEAD "\"cwd\":\"/a/../b\"," BASE_TAIL, "'..'");
	expect_error("{\"id\":\"u\",\"rootfs\":\"/r\",\"args\":[]," BASE_TAIL,
		     "args: missing or empty");
	expect_error(BASE_HEAD "\"env\":[\"NOEQUALS\"]," BASE_TAIL,
		     "env[0]: not NAME=value");
	expect_error(BASE_HEAD "\"capabilities\":[\"SYS_MAGIC\"]," BASE_TAIL,
		     "unknown capability");
	expect_error(BASE_HEAD "\"capabilities\":[\"CHOWN\"],"
			       "\"ambientCapabilities\":[\"KILL\"]," BASE_TAIL,
		     "not in capabilities");
	expect_error(BASE_HEAD "\"hostname\":\"a b\"," BASE_TAIL,
		     "hostname: bad character");
	expect_error(BASE_HEAD "\"uid\":-1," BASE_TAIL, "uid");
	expect_error(BASE_HEAD "\"uid\":\"0\"," BASE_TAIL, "not an integer");
	expect_error(BASE_HEAD "\"tty\":1," BASE_TAIL, "tty: not a boolean");
	expect_error(BASE_HEAD "\"mounts\":[{\"target\":\"/x\",\"type\":"
			       "\"tmpfs\",\"options\":[\"rbind\"]}]," BASE_TAIL,
		     "rbind on a tmpfs");
	expect_error(BASE_HEAD
		     "\"mounts\":[{\"target\":\"/x\",\"type\":"
		     "\"tmpfs\",\"options\":[\"shared\"]}]," BASE_TAIL,
		     "unknown option");
	expect_error(BASE_HEAD "\"mounts\":[{\"target\":\"/x\",\"type\":"
			       "\"bind\"}]," BASE_TAIL,
		     "mounts[0]: source: missing");
	expect_error(BASE_HEAD
		     "\"mounts\":[{\"source\":\"/a\",\"target\":"
		     "\"/x/../../etc\",\"type\":\"bind\"}]," BASE_TAIL,
		     "'..'");
	expect_error(BASE_HEAD
		     "\"mounts\":[{\"source\":\"/a\",\"subPath\":\"b/../../c\","
		     "\"target\":\"/x\",\"type\":\"bind\"}]," BASE_TAIL,
		     "subPath");
	expect_error(BASE_HEAD
		     "\"mounts\":[{\"source\":\"/a\",\"subPath\":\"/etc\","
		     "\"target\":\"/x\",\"type\":\"bind\"}]," BASE_TAIL,
		     "not a clean relative path");
	expect_error(BASE_HEAD
		     "\"mounts\":[{\"subPath\":\"a\",\"target\":\"/x\","
		     "\"type\":\"tmpfs\"}]," BASE_TAIL,
		     "subPath: on a tmpfs mount");
	expect_error(BASE_HEAD "\"cgroup\":{\"path\":\"/abs\"},"
			       "\"log\":{\"path\":\"/l\"}}",
		     "not a clean relative path");
	expect_error(BASE_HEAD "\"cgroup\":{\"path\":\"a//b\"},"
			       "\"log\":{\"path\":\"/l\"}}",
		     "not a clean relative path");
	expect_error(BASE_HEAD "\"cgroup\":{\"path\":\"a/u\",\"memoryLimit\":"
			       "-5},\"log\":{\"path\":\"/l\"}}",
		     "out of range");
	expect_error(BASE_HEAD "\"cgroup\":{\"path\":\"a/u\"}}",
		     "log: missing");
}

static void test_round_trip(void)
{
	struct run_config a, b;
	struct cerr e = {0};
	char *s1, *s2;

	parse(full_json, &a, &e);
	s1 = runconfig_to_json(&a);
	ok(runconfig_parse(s1, strlen(s1), &b, &e) == 0,
	   "serialized run.json parses again (%s)", e.msg);
	s2 = runconfig_to_json(&b);
	is_str(s2, s1, "serialization is a fixed point");
	free(s1);
	free(s2);
	runconfig_free(&a);
	runconfig_free(&b);
}

static void test_state_files(void)
{
	char d0[] = "/sys/fs/cgroup/memory/c/u", reason[] = "OOMKilled";
	char *dirs[] = {d0, NULL};
	struct unit_runtime_state st = {.monitor_pid = 10,
					.monitor_start = 1234,
					.container_pid = 11,
					.container_start = 1240,
					.started_at_ns = 5,
					.cgroups = dirs},
				  back = {0}, ex = {0};
	struct cerr e = {0};
	char *s = runstate_to_json(&st);

	ok(runstate_parse(s, strlen(s), &back, &e) == 0 && back.started &&
	       back.monitor_pid == 10 && back.monitor_start == 1234 &&
	       back.container_pid == 11 && back.container_start == 1240 &&
	       back.started_at_ns == 5 && !strcmp(back.cgroups[0], dirs[0]),
	   "state.json round trip (%s)", e.msg);
	free(s);
	ex.exit_code = 137;
	ex.signal = 9;
	ex.oom_killed = true;
	ex.reason = reason;
	ex.finished_at_ns = 99;
	s = runexit_to_json(&ex);
	ok(runexit_parse(s, strlen(s), &back, &e) == 0 && back.exited &&
	       back.exit_code == 137 && back.signal == 9 && back.oom_killed &&
	       !strcmp(back.reason, "OOMKilled") && back.finished_at_ns == 99,
	   "exit.json round trip (%s)", e.msg);
	free(s);
	runtime_state_free(&back);
	ok(runstate_parse("{\"monitorPid\":0}", 16, &back, &e) < 0,
	   "state.json without pids refused");
	runtime_state_free(&back);
	ok(runexit_parse("{\"exitCode\":300,\"reason\":\"x\"}", 30, &back, &e) <
	       0,
	   "exit code out of range refused");
	runtime_state_free(&back);
}

static void test_decide_exit(void)
{
	struct unit_runtime_state st = {0};

	monitor_decide_exit(0, 0, &st);
	ok(st.exit_code == 0 && !strcmp(st.reason, "Completed"), "exit 0");
	monitor_decide_exit(3 << 8, -1, &st);
	ok(st.exit_code == 3 && !strcmp(st.reason, "Error"), "exit 3: Error");
	monitor_decide_exit(SIGKILL, 0, &st);
	ok(st.exit_code == 137 && st.signal == 9 && !st.oom_killed &&
	       !strcmp(st.reason, "Error"),
	   "SIGKILL: 137, Error");
	monitor_decide_exit(SIGKILL, 1, &st);
	ok(st.exit_code == 137 && st.oom_killed &&
	       !strcmp(st.reason, "OOMKilled"),
	   "SIGKILL with an OOM kill: OOMKilled");
	monitor_decide_exit(0, 2, &st);
	ok(st.oom_killed && !strcmp(st.reason, "Completed"),
	   "OOM of a child, unit exit 0: still Completed");
	monitor_decide_exit(SIGTERM, 0, &st);
	ok(st.exit_code == 143, "SIGTERM: 143");
	runtime_state_free(&st);
}

/* ---- cgroups on a fake root ---- */

static void put(const char *path, const char *text)
{
	struct cerr e = {0};
	char *d = xstrdup(path);

	*strrchr(d, '/') = '\0';
	fs_mkdir_p(d, 0755, &e);
	fs_write_atomic(path, text, strlen(text), 0644, &e);
	free(d);
}

static char *get(const char *sub, const char *file)
{
	char *p = xasprintf("%s/%s/%s", tmp, sub, file);
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 0);
	if (fs_read_file(p, &b, &e) < 0) {
		free(p);
		buf_free(&b);
		return xstrdup("(missing)");
	}
	free(p);
	return buf_steal(&b, NULL);
}

static void check_file(const char *sub, const char *file, const char *want,
		       const char *what)
{
	char *s = get(sub, file);
	is_str(s, want, "%s", what);
	free(s);
}

static void test_cgroup_v2(void)
{
	char *root = xasprintf("%s/v2", tmp), *p;
	struct cg_layout l;
	struct cgroup cg;
	struct cg_limits lim = {64 << 20, 500, 32, 1 << 30, NULL, 0};
	struct cerr e = {0};

	p = xasprintf("%s/cgroup.controllers", root);
	put(p, "cpuset cpu io memory hugetlb pids rdma\n");
	free(p);
	ok(cg_detect(root, NULL, &l, &e) == 0 && l.mode == CG_V2 && l.n == 1 &&
	       l.h[0].v2 && l.h[0].memory && l.h[0].cpu && l.h[0].pids,
	   "v2 detected with its controllers (%s)", e.msg);
	ok(cg_create(&l, "cell/pod/u", &lim, &cg, &e) == 0,
	   "v2 cgroup created (%s)", e.msg);
	check_file("v2/cell/pod/u", "memory.max", "67108864", "v2 memory.max");
	check_file("v2/cell/pod/u", "memory.oom.group", "1", "v2 oom.group");
	check_file("v2/cell/pod/u", "cpu.max", "50000 100000",
		   "v2 cpu.max for 500m");
	check_file("v2/cell/pod/u", "pids.max", "32", "v2 pids.max");
	check_file("v2/cell/pod", "memory.max", "1073741824",
		   "the pod's cap on the parent");
	check_file("v2/cell/pod", "cgroup.subtree_control", "+io",
		   "controllers enabled in the parent");
	check_file("v2", "cgroup.subtree_control", "+io",
		   "controllers enabled at the root");
	p = get("v2/cell/pod/u", "cgroup.subtree_control");
	is_str(p, "(missing)", "not in the leaf");
	free(p);
	ok(cg_enter(&cg, 4242, &e) == 0, "enter");
	check_file("v2/cell/pod/u/" CG_LEAF, "cgroup.procs", "4242",
		   "pid written to the leaf's cgroup.procs, below the limits");
	p = get("v2/cell/pod/u", "cgroup.procs");
	is_str(p, "(missing)", "not into the cgroup that holds the limits");
	free(p);
	p = xasprintf("%s/memory.events", cg.dirs[0]);
	put(p, "low 0\nhigh 0\nmax 5\noom 1\noom_kill 2\noom_group_kill 0\n");
	free(p);
	ok(cg_oom_kills(&cg) == 2, "oom_kill from memory.events");
	ok(cg_create(&l, "cell/pod/u", &lim, &(struct cgroup){0}, &e) < 0 &&
	       strstr(e.msg, "in use"),
	   "a leaf in use is not reused (%s)", e.msg);
	ok(cg_destroy(&cg, &e) == 0, "destroy");
	p = xasprintf("%s/cell/pod/u", root);
	ok(!fs_exists(p), "leaf removed");
	free(p);
	p = xasprintf("%s/cell/pod", root);
	ok(fs_exists(p), "parents kept");
	free(p);
	cg_free(&cg);
	cg_layout_free(&l);
	free(root);
}

/* Controllers already on in an ancestor's subtree_control are not
 * written again, and io is not asked for where the kernel has no io
 * here: each write takes the cgroup mutex on a start's path. */
static void test_cgroup_v2_enable_once(void)
{
	static const char *const levels[] = {"v2on", "v2on/cell",
					     "v2on/cell/pod"};
	char *root = xasprintf("%s/v2on", tmp), *p;
	struct cg_layout l;
	struct cgroup cg;
	struct cg_limits lim = {64 << 20, 500, 32, 0, NULL, 0};
	struct cerr e = {0};

	p = xasprintf("%s/cgroup.controllers", root);
	put(p, "cpu memory pids\n");
	free(p);
	for (size_t i = 0; i < ARRAY_SIZE(levels); i++) {
		p = xasprintf("%s/%s/cgroup.subtree_control", tmp, levels[i]);
		put(p, "cpu memory pids\n");
		free(p);
	}
	ok(cg_detect(root, NULL, &l, &e) == 0 && !l.h[0].io,
	   "no io among the controllers (%s)", e.msg);
	ok(cg_create(&l, "cell/pod/u", &lim, &cg, &e) == 0,
	   "v2 cgroup created (%s)", e.msg);
	for (size_t i = 0; i < ARRAY_SIZE(levels); i++)
		check_file(levels[i], "cgroup.subtree_control",
			   "cpu memory pids\n",
			   "nothing written where all is on already");
	check_file("v2on/cell/pod/u", "memory.max", "67108864",
		   "the limits still set");
	ok(cg_destroy(&cg, &e) == 0, "destroy");
	cg_free(&cg);
	cg_layout_free(&l);
	free(root);
}

static void make_v1(const char *root)
{
	static const char *const names[] = {"memory", "cpu,cpuacct", "pids",
					    "blkio"};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		char *p = xasprintf("%s/%s/cgroup.procs", root, names[i]);
		put(p, "");
		free(p);
	}
	char *a = xasprintf("%s/cpu", root), *b = xasprintf("%s/cpuacct", root);
	ok(symlink("cpu,cpuacct", a) == 0 && symlink("cpu,cpuacct", b) == 0,
	   "v1 tree with a combined cpu,cpuacct");
	free(a);
	free(b);
}

static void test_cgroup_v1(void)
{
	char *root = xasprintf("%s/v1", tmp), *p;
	struct cg_layout l;
	struct cgroup cg;
	struct cg_limits lim = {1 << 30, 2000, 100, 3ll << 30, NULL, 0};
	struct cerr e = {0};

	make_v1(root);
	p = xasprintf("%s/devices/cgroup.procs", root);
	put(p, "");
	free(p);
	ok(cg_detect(root, NULL, &l, &e) == 0 && l.mode == CG_V1 && l.n == 5,
	   "v1: memory, cpu,cpuacct (once), pids, blkio, devices → %zu (%s)",
	   l.n, e.msg);
	ok(cg_create(&l, "cell/u", &lim, &cg, &e) == 0,
	   "v1 cgroup created (%s)", e.msg);
	check_file("v1/memory/cell/u", "memory.limit_in_bytes", "1073741824",
		   "v1 memory limit");
	check_file("v1/memory/cell/u", "memory.memsw.limit_in_bytes",
		   "1073741824", "v1 memsw equal (no swap)");
	check_file("v1/cpu/cell/u", "cpu.cfs_quota_us", "200000",
		   "v1 quota for 2 CPUs");
	check_file("v1/cpu/cell/u", "cpu.cfs_period_us", "100000", "v1 period");
	check_file("v1/pids/cell/u", "pids.max", "100", "v1 pids.max");
	check_file("v1/memory/cell", "memory.limit_in_bytes", "3221225472",
		   "v1: the pod's cap on the parent");
	check_file("v1/devices/cell/u", "devices.deny", "a",
		   "v1 devices: everything denied first");
	check_file("v1/devices/cell/u", "devices.allow", "c 136:* rwm",
		   "v1 devices: then the allowlist (pts last)");
	p = xasprintf("%s/memory.oom_control", cg.dirs[cg.memory]);
	put(p, "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n");
	free(p);
	ok(cg_oom_kills(&cg) == 1, "oom_kill from memory.oom_control");
	cg_destroy(&cg, &e);
	cg_free(&cg);
	cg_layout_free(&l);
	free(root);
}

/* CDI devices: allowed after the defaults, with their own access. */
static void test_cgroup_v1_devices(void)
{
	char *root = xasprintf("%s/v1d", tmp), *p;
	struct run_device dev = {
	    .type = 'c', .major = 195, .minor = 255, .access = "rw"};
	struct cg_limits lim = {0, 0, 0, 0, &dev, 1};
	struct cg_layout l;
	struct cgroup cg;
	struct cerr e = {0};

	make_v1(root);
	p = xasprintf("%s/devices/cgroup.procs", root);
	put(p, "");
	free(p);
	ok(cg_detect(root, NULL, &l, &e) == 0 &&
	       cg_create(&l, "cell/u", &lim, &cg, &e) == 0,
	   "v1 cgroup with a CDI device (%s)", e.msg);
	check_file("v1d/devices/cell/u", "devices.allow", "c 195:255 rw",
		   "v1 devices: the CDI device last, with its access");
	cg_destroy(&cg, &e);
	cg_free(&cg);
	cg_layout_free(&l);
	free(root);
}

static void test_devices_round_trip(void)
{
	static const char j[] =
	    "{\"id\":\"u\",\"rootfs\":\"/r\",\"args\":[\"/bin/true\"],"
	    "\"cgroup\":{\"path\":\"cell/u\"},\"log\":{\"path\":\"/l\"},"
	    "\"devices\":[{\"path\":\"/dev/nvidia0\",\"type\":\"c\","
	    "\"major\":195,\"minor\":0,\"access\":\"rw\"}],"
	    "\"hooks\":[{\"kind\":\"startContainer\",\"path\":\"/h\","
	    "\"args\":[\"h\",\"x\"],\"timeout\":7}]}";
	static const char *const bad[] = {
	    "\"devices\":[{\"path\":\"dev/x\",\"type\":\"c\"}]",
	    "\"devices\":[{\"path\":\"/dev/x\",\"type\":\"p\"}]",
	    "\"devices\":[{\"path\":\"/dev/x\",\"type\":\"c\",\"access\":"
	    "\"rwx\"}]",
	    "\"hooks\":[{\"kind\":\"poststop\",\"path\":\"/h\"}]",
	    "\"hooks\":[{\"kind\":\"startContainer\",\"path\":\"/h\","
	    "\"timeout\":0}]",
	};
	struct run_config a, b;
	struct cerr e = {0};
	char *s1, *s2;

	ok(parse(j, &a, &e) == 0 && a.n_devices == 1 && a.n_hooks == 1 &&
	       a.devices[0].major == 195 && a.devices[0].mode == 0666 &&
	       a.hooks[0].kind == HOOK_START_CONTAINER &&
	       a.hooks[0].timeout_s == 7,
	   "devices and hooks parse (%s)", e.msg);
	s1 = runconfig_to_json(&a);
	ok(parse(s1, &b, &e) == 0, "their JSON parses again");
	s2 = runconfig_to_json(&b);
	is_str(s2, s1, "devices and hooks round-trip");
	free(s1);
	free(s2);
	runconfig_free(&a);
	runconfig_free(&b);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		char *t = xasprintf("{\"id\":\"u\",\"rootfs\":\"/r\",\"args\":"
				    "[\"/x\"],\"cgroup\":{\"path\":\"c/u\"},"
				    "\"log\":{\"path\":\"/l\"},%s}",
				    bad[i]);
		cerr_clear(&e);
		ok(parse(t, &a, &e) < 0 && e.msg[0], "refused: %s", e.msg);
		free(t);
	}
}

static void test_cgroup_hybrid_nested(void)
{
	char *root = xasprintf("%s/hy", tmp), *p;
	const char *self = "12:pids:/\n4:memory:/agent/slice\n"
			   "2:cpu,cpuacct:/\n1:name=systemd:/x\n0::/agent\n";
	struct cg_layout l;
	struct cgroup cg;
	struct cg_limits lim = {1 << 20, 0, 0, 0, NULL, 0};
	struct cerr e = {0};

	make_v1(root);
	p = xasprintf("%s/unified/cgroup.controllers", root);
	put(p, "");
	free(p);
	ok(cg_detect(root, self, &l, &e) == 0 && l.mode == CG_HYBRID,
	   "hybrid detected (%s)", e.msg);
	ok(l.n == 5 && l.h[4].v2 && !l.h[4].memory, "v2 without controllers");
	p = xasprintf("%s/memory/agent/slice", root);
	is_str(l.h[0].base, p, "nested below our own memory cgroup");
	free(p);
	p = xasprintf("%s/unified/agent", root);
	is_str(l.h[4].base, p, "nested below our own v2 cgroup");
	free(p);
	/* Our own cgroups exist on a real host. */
	for (size_t i = 0; i < l.n; i++)
		fs_mkdir_p(l.h[i].base, 0755, &e);
	ok(cg_create(&l, "u1", &lim, &cg, &e) == 0 && cg.n == 5 &&
	       cg.memory == 0,
	   "hybrid unit: memory limit on v1 (%s)", e.msg);
	check_file("hy/memory/agent/slice/u1", "memory.limit_in_bytes",
		   "1048576", "limit written in the nested cgroup");
	cg_destroy(&cg, &e);
	cg_free(&cg);
	lim.pids = 5;
	cg_layout_free(&l);
	/* Without a pids hierarchy a pids limit cannot be honoured. */
	p = xasprintf("%s/pids", root);
	fs_rm_rf(p, &e);
	free(p);
	cg_detect(root, NULL, &l, &e);
	ok(cg_create(&l, "u2", &lim, &cg, &e) < 0 && e.code == ENOTSUP,
	   "missing controller: ENOTSUP (%s)", e.msg);
	p = xasprintf("%s/memory/u2", root);
	ok(!fs_exists(p), "rolled back");
	free(p);
	ok(cg_create(&l, "../x", &lim, &cg, &e) < 0, "'..' refused");
	cg_layout_free(&l);
	ok(cg_detect("/nonexistent-cgroup-root", NULL, &l, &e) < 0,
	   "no hierarchy: error");
	free(root);
}

/* ---- the mount plan ---- */

static void test_plan(void)
{
	struct run_config c;
	struct mount_op *ops;
	size_t n, i_user = 0, i_mask = 0;
	struct cerr e = {0};
	bool has_null = false, has_sda = false, sys_ro = false;

	parse(full_json, &c, &e);
	ok(ctr_plan_mounts(&c, &ops, &n, &e) == 0, "plan built");
	is_str(ops[0].target, "/proc", "proc first");
	is_str(ops[1].target, "/dev", "then a tmpfs /dev");
	for (size_t i = 0; i < n; i++) {
		if (!strcmp(ops[i].target, "/data") && !i_user)
			i_user = i;
		if (ops[i].kind == MOP_MASK && !i_mask)
			i_mask = i;
		has_null |= ops[i].kind == MOP_MKNOD &&
			    !strcmp(ops[i].target, "/dev/null");
		has_sda |= strstr(ops[i].target, "sda") != NULL;
		sys_ro |= !strcmp(ops[i].target, "/sys") &&
			  (ops[i].flags & MS_RDONLY);
	}
	ok(has_null && !has_sda && sys_ro, "device nodes, /sys read-only");
	ok(i_user > 1 && ops[i_user].kind == MOP_BIND &&
	       ops[i_user + 1].kind == MOP_MOUNT &&
	       !strcmp(ops[i_user + 1].fstype, "tmpfs"),
	   "unit mounts after the base ones");
	ok(i_mask > i_user && ops[i_mask].optional, "masks last, optional");
	is_str(ops[n - 1].target, "/proc/sysrq-trigger",
	       "read-only /proc paths at the end");
	free(ops);
	runconfig_free(&c);
}

/* ---- resolution beneath a root ---- */

static char *fd_path(int fd)
{
	char p[64], t[4096];
	ssize_t n;

	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	n = readlink(p, t, sizeof(t) - 1);
	t[n > 0 ? n : 0] = '\0';
	return xstrdup(t);
}

static void check_resolves(int rootfd, const char *root, const char *rel,
			   const char *want, const char *what)
{
	struct cerr e = {0};
	int fd = ctr_open_in_root(rootfd, rel, O_PATH, false, &e);
	char *got = fd >= 0 ? fd_path(fd) : xstrdup(e.msg);
	char *w = xasprintf("%s%s", root, want);

	is_str(got, w, "%s", what);
	if (fd >= 0)
		close(fd);
	free(got);
	free(w);
}

static void test_in_root(bool walk)
{
	char *root = xasprintf("%s/root%d", tmp, walk), *p;
	struct cerr e = {0};
	int rootfd, fd;

	path_force_fallback(walk);
	p = xasprintf("%s/etc/passwd", root);
	put(p, "x");
	free(p);
#define LINK(target, name)                                                     \
	do {                                                                   \
		char *l = xasprintf("%s/%s", root, name);                      \
		if (symlink(target, l) < 0)                                    \
			perror("symlink");                                     \
		free(l);                                                       \
	} while (0)
	LINK("/etc", "abs");
	LINK("../../../../../etc", "up");
	LINK("/", "slash");
	LINK("loop", "loop");
	LINK("/nowhere/deeper", "dangling");
	rootfd = open(root, O_PATH | O_DIRECTORY);
	check_resolves(rootfd, root, "abs/passwd", "/etc/passwd",
		       walk ? "walk: absolute symlink stays inside"
			    : "openat2: absolute symlink stays inside");
	check_resolves(rootfd, root, "/up/passwd", "/etc/passwd",
		       walk ? "walk: climbing symlink stops at the root"
			    : "openat2: climbing symlink stops at the root");
	check_resolves(rootfd, root, "slash/slash/abs", "/etc",
		       walk ? "walk: / is the root" : "openat2: / is the root");
	fd = ctr_open_in_root(rootfd, "loop/x", O_PATH, false, &e);
	ok(fd < 0 && e.code == ELOOP, "%s: symlink loop is ELOOP",
	   walk ? "walk" : "openat2");
	fd = ctr_open_in_root(rootfd, "slash/new/dir", O_PATH, true, &e);
	p = fd >= 0 ? fd_path(fd) : xstrdup(e.msg);
	char *w = xasprintf("%s/new/dir", root);
	is_str(p, w, "%s: mkdirs through a symlink stays inside",
	       walk ? "walk" : "openat2");
	free(w);
	free(p);
	if (fd >= 0)
		close(fd);
	/* A dangling link is made good inside the root (common/path.c's
	 * rule for a /var/run -> /run with no /run), never on the host. */
	fd = ctr_open_in_root(rootfd, "dangling/x", O_PATH, true, &e);
	p = fd >= 0 ? fd_path(fd) : xstrdup(e.msg);
	w = xasprintf("%s/nowhere/deeper/x", root);
	is_str(p, w, "%s: a dangling symlink is followed inside the root",
	       walk ? "walk" : "openat2");
	free(w);
	free(p);
	if (fd >= 0)
		close(fd);
	ok(!fs_exists("/nowhere"), "nothing created on the host");
	ok(ctr_open_in_root(rootfd, "a/../../b", O_PATH, true, &e) < 0,
	   "'..' in the input refused");
	close(rootfd);
	path_force_fallback(false);
	free(root);
}

int main(void)
{
	struct cerr e = {0};

	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	test_parse_full();
	test_parse_defaults();
	test_parse_errors();
	test_round_trip();
	test_state_files();
	test_decide_exit();
	test_cgroup_v2();
	test_cgroup_v2_enable_once();
	test_cgroup_v1();
	test_cgroup_hybrid_nested();
	test_cgroup_v1_devices();
	test_devices_round_trip();
	test_plan();
	test_in_root(false);
	test_in_root(true);
	fs_rm_rf(tmp, &e);
	return tap_done();
}
