// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the common library: errors, buffers, safe paths, digests. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "base64.h"
#include "buf.h"
#include "cli.h"
#include "cleanup.h"
#include "digest.h"
#include "err.h"
#include "fsutil.h"
#include "gunzip.h"
#include "netaddr.h"
#include "log.h"
#include "path.h"
#include "procspawn.h"
#include "util.h"

static void test_err(void)
{
	struct cerr e = {0};

	ok(cerr_set(&e, ENOENT, "blob %s", "x") == -1, "cerr_set returns -1");
	cerr_prefix(&e, "pull %s", "busybox");
	is_str(e.msg, "pull busybox: blob x", "context is prepended");
	ok(e.code == ENOENT, "code kept");
	errno = EACCES;
	cerr_sys(&e, "open %s", "f");
	is_str(e.msg, "open f: Permission denied", "cerr_sys appends strerror");
}

/* A chain longer than the buffer keeps its innermost cause (and its
 * outermost context); the middle gives way. */
static void test_err_long_chain(void)
{
	static const char cause[] = "write layer: No space left on device";
	struct cerr e = {0};
	size_t n;

	cerr_set(&e, ENOSPC, "%s", cause);
	for (int i = 0; i < 60; i++)
		cerr_prefix(&e, "step %02d of a long way down", i);
	n = strlen(e.msg);
	ok(n == sizeof(e.msg) - 1, "the message fills the buffer (%zu)", n);
	ok(n >= strlen(cause) && !strcmp(e.msg + n - strlen(cause), cause),
	   "the innermost cause is kept");
	ok(!strncmp(e.msg, "step 59 of a long way down: ", 28),
	   "the outermost context is kept");
	ok(strstr(e.msg, "...") != NULL, "the cut is marked");
	ok(e.code == ENOSPC, "code kept");
}

static void test_buf(void)
{
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 8);
	ok(buf_append(&b, "1234", 4, &e) == 0, "append within cap");
	ok(buf_append(&b, "56789", 5, &e) < 0 && e.code == EFBIG,
	   "append over cap fails with EFBIG");
	ok(b.len == 4 && !strcmp(b.data, "1234"),
	   "failed append changes nothing");
	buf_free(&b);
}

static void test_clean(void)
{
	char out[64];
	struct cerr e = {0};

	ok(path_clean("/a//b/./c/", out, sizeof(out), &e) == 0 &&
	       !strcmp(out, "a/b/c"),
	   "clean collapses and strips");
	ok(path_clean("./", out, sizeof(out), &e) == 0 && !strcmp(out, ""),
	   "root becomes empty");
	ok(path_clean("a/../b", out, sizeof(out), &e) < 0 && e.code == EINVAL,
	   "'..' refused");
	ok(path_clean("..", out, sizeof(out), &e) < 0, "bare '..' refused");
	ok(path_clean("a/..b/c..", out, sizeof(out), &e) == 0,
	   "names with dots are fine");
	ok(path_clean("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		      "aaaaaaaaaaaaaaa",
		      out, sizeof(out), &e) < 0 &&
	       e.code == ENAMETOOLONG,
	   "too long refused");
}

static void test_beneath(bool fallback)
{
	char tmpl[] = "/tmp/cell-path-XXXXXX";
	char *dir = mkdtemp(tmpl);
	cleanup_close int root = -1;
	struct cerr e = {0};
	const char *base;
	int fd;
	const char *how = fallback ? "fallback" : "openat2";

	path_force_fallback(fallback);
	ok(dir != NULL, "%s: tmpdir", how);
	root = open(dir, O_PATH | O_DIRECTORY);
	ok(mkdirat(root, "real", 0755) == 0, "%s: mkdir", how);
	ok(symlinkat("real", root, "rel") == 0 &&
	       symlinkat("/etc", root, "abs") == 0 &&
	       symlinkat("../..", root, "up") == 0 &&
	       symlinkat("real/../real", root, "zig") == 0,
	   "%s: links", how);
	fd = path_open_beneath(root, "rel/f", O_WRONLY | O_CREAT, 0644, &e);
	ok(fd >= 0, "%s: create through a relative link", how);
	if (fd >= 0)
		close(fd);
	ok(faccessat(root, "real/f", F_OK, 0) == 0, "%s: landed inside", how);
	fd = path_open_beneath(root, "abs/passwd", O_RDONLY, 0, &e);
	ok(fd < 0 && e.code == EXDEV, "%s: absolute link refused (%s)", how,
	   e.msg);
	fd = path_open_beneath(root, "up/x", O_WRONLY | O_CREAT, 0644, &e);
	ok(fd < 0 && (e.code == EXDEV || e.code == ELOOP),
	   "%s: escaping link refused", how);
	fd = path_open_beneath(root, "zig/f", O_RDONLY, 0, &e);
	ok(fd >= 0, "%s: zigzag link that stays inside works", how);
	if (fd >= 0)
		close(fd);
	fd = path_open_parent(root, "new/deep/dir/file", true, &base, &e);
	ok(fd >= 0 && !strcmp(base, "file"), "%s: parents created", how);
	if (fd >= 0)
		close(fd);
	ok(faccessat(root, "new/deep/dir", F_OK, 0) == 0, "%s: dirs exist",
	   how);
	fd = path_open_parent(root, "abs/x/y", true, &base, &e);
	ok(fd < 0 && e.code == EXDEV,
	   "%s: mkdirs through absolute link refused", how);
	ok(access("/etc/x", F_OK) != 0, "%s: nothing created outside", how);
	fd = path_open_parent(root, "rel/sub/f", true, &base, &e);
	ok(fd >= 0, "%s: mkdirs through relative link", how);
	if (fd >= 0)
		close(fd);
	ok(faccessat(root, "real/sub", F_OK, 0) == 0,
	   "%s: created in link target", how);
	ok(fs_rm_rf(dir, &e) == 0 && access(dir, F_OK) != 0, "%s: rm -rf", how);
	path_force_fallback(false);
}

/* The same file? (inode and device) */
static bool same_file(int fd, int dirfd, const char *rel)
{
	struct stat a, b;

	return fd >= 0 && fstat(fd, &a) == 0 &&
	       fstatat(dirfd, rel, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	       a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

static void test_in_root(bool fallback)
{
	char tmpl[] = "/tmp/cell-inroot-XXXXXX";
	char *top = mkdtemp(tmpl), dir[64], esc[128], out[PATH_MAX_INPUT];
	cleanup_close int root = -1, topfd = -1;
	struct cerr e = {0};
	const char *base, *how = fallback ? "fallback" : "openat2";
	int fd;

	path_force_fallback(fallback);
	ok(top != NULL, "%s: tmpdir", how);
	snprintf(dir, sizeof(dir), "%s/root", top);
	topfd = open(top, O_PATH | O_DIRECTORY);
	/* A secret beside the root that no lookup may reach. */
	ok(mkdirat(topfd, "root", 0755) == 0 &&
	       mkdirat(topfd, "outside", 0755) == 0 &&
	       close(openat(topfd, "outside/secret", O_CREAT | O_WRONLY,
			    0600)) == 0,
	   "%s: root and outside", how);
	root = open(dir, O_PATH | O_DIRECTORY);
	snprintf(esc, sizeof(esc), "%s/outside/secret", top);
	ok(mkdirat(root, "etc", 0755) == 0 && mkdirat(root, "var", 0755) == 0 &&
	       close(openat(root, "etc/passwd", O_CREAT | O_WRONLY, 0644)) ==
		   0 &&
	       symlinkat("/etc", root, "abs") == 0 &&
	       symlinkat("../../../../../etc", root, "up") == 0 &&
	       symlinkat("/../../etc/../../etc", root, "updown") == 0 &&
	       symlinkat(esc, root, "esc") == 0 &&
	       symlinkat("../../outside/secret", root, "esc2") == 0 &&
	       symlinkat("loop2", root, "loop1") == 0 &&
	       symlinkat("/loop1", root, "loop2") == 0 &&
	       symlinkat("/run", root, "var/run") == 0 &&
	       symlinkat("../run/stub/resolv.conf", root, "etc/resolv.conf") ==
		   0,
	   "%s: links", how);

	fd = path_open_at(root, "abs/passwd", O_RDONLY, 0, PATH_IN_ROOT, &e);
	ok(same_file(fd, root, "etc/passwd"), "%s: absolute link is the root's",
	   how);
	if (fd >= 0)
		close(fd);
	fd = path_open_at(root, "up/passwd", O_RDONLY, 0, PATH_IN_ROOT, &e);
	ok(same_file(fd, root, "etc/passwd"), "%s: '..' stops at the root",
	   how);
	if (fd >= 0)
		close(fd);
	fd = path_open_at(root, "updown/passwd", O_RDONLY, 0, PATH_IN_ROOT, &e);
	ok(same_file(fd, root, "etc/passwd"), "%s: '/..' is the root", how);
	if (fd >= 0)
		close(fd);
	fd = path_open_at(root, "esc", O_RDONLY, 0, PATH_IN_ROOT, &e);
	ok(fd < 0 && e.code == ENOENT,
	   "%s: absolute link to a host path stays inside (%s)", how, e.msg);
	fd = path_open_at(root, "esc2", O_RDONLY, 0, PATH_IN_ROOT, &e);
	ok(fd < 0 && e.code == ENOENT, "%s: climbing link stays inside", how);
	fd = path_open_at(root, "esc", O_WRONLY | O_CREAT, 0644, PATH_IN_ROOT,
			  &e);
	ok(fd < 0 || !same_file(fd, topfd, "outside/secret"),
	   "%s: create through an escaping link never opens the secret", how);
	if (fd >= 0)
		close(fd);
	fd = path_open_at(root, "loop1/x", O_RDONLY, 0, PATH_IN_ROOT, &e);
	ok(fd < 0 && e.code == ELOOP, "%s: link loop fails (%s)", how, e.msg);
	fd = path_open_at(root, "abs/passwd", O_RDONLY, 0, PATH_BENEATH, &e);
	ok(fd < 0 && e.code == EXDEV, "%s: beneath still refuses", how);

	fd = path_open_parent_at(root, "var/run/app/ready", true, PATH_IN_ROOT,
				 &base, &e);
	ok(fd >= 0 && !strcmp(base, "ready") &&
	       faccessat(root, "run/app", F_OK, AT_SYMLINK_NOFOLLOW) == 0,
	   "%s: parents made through /var/run -> /run (%s)", how, e.msg);
	if (fd >= 0)
		close(fd);

	ok(path_resolve_in_root(root, "abs/passwd", true, out, sizeof(out),
				&e) == 0 &&
	       !strcmp(out, "etc/passwd"),
	   "%s: resolve absolute link: '%s'", how, out);
	ok(path_resolve_in_root(root, "var/run/x/y", true, out, sizeof(out),
				&e) == 0 &&
	       !strcmp(out, "run/x/y"),
	   "%s: resolve with missing tail: '%s'", how, out);
	ok(path_resolve_in_root(root, "etc/resolv.conf", true, out, sizeof(out),
				&e) == 0 &&
	       !strcmp(out, "run/stub/resolv.conf"),
	   "%s: resolve a dangling last link: '%s'", how, out);
	ok(path_resolve_in_root(root, "etc/resolv.conf", false, out,
				sizeof(out), &e) == 0 &&
	       !strcmp(out, "etc/resolv.conf"),
	   "%s: last link kept without follow: '%s'", how, out);
	ok(path_resolve_in_root(root, "esc2", true, out, sizeof(out), &e) ==
		   0 &&
	       !strcmp(out, "outside/secret"),
	   "%s: escape spelt inside the root: '%s'", how, out);
	ok(path_resolve_in_root(root, "up", true, out, sizeof(out), &e) == 0 &&
	       !strcmp(out, "etc"),
	   "%s: resolve a climbing dir link: '%s'", how, out);
	ok(path_resolve_in_root(root, "loop1", true, out, sizeof(out), &e) <
		   0 &&
	       e.code == ELOOP,
	   "%s: resolve a loop fails", how);
	ok(path_resolve_in_root(root, "", true, out, sizeof(out), &e) == 0 &&
	       !strcmp(out, ""),
	   "%s: the root itself", how);
	/* PATH_NO_LINKS: no link at all, even one that stays inside. */
	ok(symlinkat("etc", root, "rel") == 0, "%s: a link inside", how);
	fd = path_open_at(root, "etc/passwd", O_RDONLY, 0, PATH_NO_LINKS, &e);
	ok(same_file(fd, root, "etc/passwd"), "%s: no links: a plain path",
	   how);
	if (fd >= 0)
		close(fd);
	fd = path_open_at(root, "rel/passwd", O_RDONLY, 0, PATH_NO_LINKS, &e);
	ok(fd < 0 && e.code == ELOOP && strstr(e.msg, "symlink"),
	   "%s: no links: one on the way refused (%s)", how, e.msg);
	fd = path_open_at(root, "rel", O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0,
			  PATH_NO_LINKS, &e);
	ok(fd < 0 && strstr(e.msg, "symlink"),
	   "%s: no links: the last one refused (%s)", how, e.msg);
	ok(fs_rm_rf(top, &e) == 0, "%s: rm -rf", how);
	path_force_fallback(false);
}

static void test_digest(void)
{
	char out[DIGEST_STR_MAX];
	struct cerr e = {0};

	ok(digest_buf("sha256", "abc", 3, out, &e) == 0, "digest abc");
	is_str(
	    out,
	    "sha256:"
	    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
	    "sha256 of abc");
	ok(digest_validate(out, &e) == 0, "valid digest");
	ok(digest_validate("sha256:BA78", &e) < 0,
	   "short/upper digest refused");
	ok(digest_validate("md5:abc", &e) < 0, "unknown algorithm refused");
}

static bool b64_is(const char *in, unsigned flags, const char *want)
{
	struct buf b;
	struct cerr e = {0};
	bool same;

	buf_init(&b, 32);
	if (b64_decode(in, strlen(in), flags, &b, &e) < 0) {
		buf_free(&b);
		return want == NULL;
	}
	same = want && b.len == strlen(want) && !memcmp(b.data, want, b.len);
	buf_free(&b);
	return same;
}

static void test_base64(void)
{
	unsigned strict = B64_PADDED | B64_CANONICAL;

	ok(b64_is("aGk=", strict, "hi") && b64_is("", strict, ""),
	   "b64: padded");
	ok(b64_is("aGk", strict, NULL) && b64_is("aGk", B64_LENIENT, "hi"),
	   "b64: missing padding only when lenient");
	ok(b64_is("aGl=", B64_PADDED, "hi") && b64_is("aGl=", strict, NULL),
	   "b64: non-zero unused bits refused when canonical");
	ok(b64_is("aG k=\n", strict, NULL) &&
	       b64_is("aG k=\n", B64_LENIENT, "hi"),
	   "b64: whitespace only when lenient");
	ok(b64_is("-_8=", B64_LENIENT, "\xfb\xff") &&
	       b64_is("-_8=", B64_PADDED, NULL),
	   "b64: URL-safe alphabet only when lenient");
	ok(b64_is("a===", B64_LENIENT, NULL) &&
	       b64_is("a=Gk", B64_PADDED, NULL),
	   "b64: bad padding refused");
	ok(b64_is("aGVsbG8gd29ybGQgYW5kIG1vcmUgYW5kIG1vcmUgYW5kIG1vcmUgYW5kIG1v"
		  "cmUgYW5kIG1vcmUgYW5k",
		  B64_LENIENT, NULL),
	   "b64: output over the cap refused");
}

static void test_default_route(void)
{
	static const char hdr[] =
	    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask"
	    "\t\tMTU\tWindow\tIRTT\n";
	char name[16] = "";
	char *t;

	t = xasprintf(
	    "%s"
	    "eth1\t0000A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	    "eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
	    "ens5\t00000000\t0102A8C0\t0003\t0\t0\t50\t00000000\t0\t0\t0\n"
	    "dead\t00000000\t0103A8C0\t0002\t0\t0\t1\t00000000\t0\t0\t0\n",
	    hdr);
	ok(net_default_route_iface(t, name, sizeof(name)) == 0 &&
	       !strcmp(name, "ens5"),
	   "default route: lowest metric, up only (%s)", name);
	free(t);
	ok(net_default_route_iface(hdr, name, sizeof(name)) < 0,
	   "no default route");
	ok(net_default_route_iface("garbage\n\n eth0 zz\n", name,
				   sizeof(name)) < 0,
	   "garbage is no route");
	{
		char ip[64];
		struct cerr e = {0};

		ok(net_primary_ipv4(ip, sizeof(ip), &e) == 0 && *ip,
		   "this host has a primary IPv4 address (%s)", ip);
	}
}

/* The second sinks: an fd, and a file rotated by size. */
static void test_log_sinks(void)
{
	char dir[] = "/tmp/cell-log-XXXXXX";
	int p[2];
	char got[256] = "";
	ssize_t n;
	struct cerr e = {0};
	struct stat st;
	bool small = true;

	if (!mkdtemp(dir) || pipe(p) < 0) {
		ok(0, "log sinks: set up");
		return;
	}
	char *path = xasprintf("%s/sub/agent.log", dir);
	log_init("t", LOG_INFO);
	log_set_fd(-1); /* not the TAP output */
	log_add_fd(p[1]);
	log_info("to the fd %d", 7);
	n = read(p[0], got, sizeof(got) - 1);
	ok(n > 0 && !strcmp(got, "t: info: to the fd 7\n"), "log_add_fd");
	ok(log_add_file(path, 300, 3, &e) == 0,
	   "log_add_file makes its "
	   "directory (%s)",
	   e.msg);
	log_add_fd(-1);
	for (int i = 0; i < 40; i++)
		log_warn("line %02d of the file sink", i);
	log_close_file();
	for (int k = 0; k < 3; k++) {
		char *f = k ? xasprintf("%s.%d", path, k) : xstrdup(path);
		small &= stat(f, &st) == 0 && st.st_size <= 300;
		free(f);
	}
	{
		char *f3 = xasprintf("%s.3", path);
		struct buf b;
		buf_init(&b, 0);
		ok(small && access(f3, F_OK) < 0,
		   "rotated: 3 files of at most 300 bytes");
		ok(fs_read_file(path, &b, &e) == 0 && b.len > 28 &&
		       !strncmp(b.data + 28, "t: warning: line", 16) &&
		       strstr(b.data, "line 39 of the file sink\n") &&
		       b.data[4] == '-' && b.data[27] == ' ',
		   "a timestamp, then the line; the newest last");
		buf_free(&b);
		free(f3);
	}
	log_set_fd(2);
	close(p[0]);
	close(p[1]);
	fs_rm_rf(dir, &e);
	free(path);
}

/* The child's fd 3 is the given one (cell-monitor's report pipe). */
static void test_spawn_fd3(void)
{
	const char *argv[] = {"/bin/sh", "-c", "echo report >&3", NULL};
	struct cerr e = {0};
	char got[64] = "";
	int p[2], status = -1;
	ssize_t n = 0, r;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid = spawn_program_fd3(argv[0], (char *const *)argv,
				(int[]){-1, -1, 2}, p[1], false, &e);
	close(p[1]);
	while (pid > 0 &&
	       (r = read(p[0], got + n, sizeof(got) - 1 - (size_t)n)) > 0)
		n += r;
	got[n] = '\0';
	close(p[0]);
	if (pid > 0)
		waitpid(pid, &status, 0);
	is_str(got, "report\n", "spawn: fd 3 is the report pipe");
	ok(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "spawn: the child ran (%s)", e.msg);
	ok(spawn_program_fd3("/nonexistent", (char *const *)argv,
			     (int[]){-1, -1, -1}, -1, false, &e) < 0 &&
	       e.code == ENOENT,
	   "spawn: a missing program is an error");
}

/* mountinfo's escapes, and the mounts beneath a directory (deepest
 * first: /proc/sys/fs/binfmt_misc, when mounted, comes before
 * /proc/sys... and /proc). No privilege needed: the test reads this
 * process's table. */
static void test_mounts_beneath(void)
{
	char esc[] = "/a\\040b\\011c/d";
	char **v = fs_mounts_beneath("/");
	char **none = fs_mounts_beneath("/proc/self/fd");
	bool proc = false, ordered = true;

	fs_mountinfo_unescape(esc);
	ok(!strcmp(esc, "/a b\tc/d"), "mountinfo escapes undone");
	ok(v && v[0], "mounts beneath / found");
	for (size_t i = 0; v && v[i]; i++) {
		proc = proc || !strcmp(v[i], "/proc");
		if (v[i + 1] && strlen(v[i + 1]) > strlen(v[i]))
			ordered = false;
	}
	ok(proc, "/proc is among them");
	ok(ordered, "deepest first");
	ok(none == NULL, "nothing beneath /proc/self/fd");
	strv_free(v);
	strv_free(none);
}

/* An atomic write's temporary is its own: created exclusively under a name
 * with the host, the pid and a random part. A file of the name the pid
 * alone gave (another host's writer with our pid, on a shared NFS
 * directory) is never truncated, written or renamed. */
static void test_write_atomic_temp(void)
{
	char dir[] = "/tmp/cell-atomic-XXXXXX";
	struct cerr e = {0};
	struct buf b;
	int n = 0;

	if (!mkdtemp(dir)) {
		ok(0, "write_atomic: set up");
		return;
	}
	char *path = xasprintf("%s/tag.json", dir);
	char *theirs = xasprintf("%s.tmp.%d", path, (int)getpid());
	ok(fs_write_atomic(theirs, "theirs", 6, 0644, &e) == 0, "their temp");
	ok(fs_write_atomic(path, "ours", 4, 0644, &e) == 0 &&
	       fs_replace(path, "ours2", 5, 0644, &e) == 0,
	   "write beside their temporary (%s)", e.msg);
	buf_init(&b, 64);
	ok(fs_read_file(theirs, &b, &e) == 0 && b.len == 6 &&
	       !memcmp(b.data, "theirs", 6),
	   "their temporary is untouched");
	b.len = 0;
	ok(fs_read_file(path, &b, &e) == 0 && b.len == 5 &&
	       !memcmp(b.data, "ours2", 5),
	   "ours is in place");
	buf_free(&b);
	{
		DIR *d = opendir(dir);
		struct dirent *de;

		while (d && (de = readdir(d)))
			n += de->d_name[0] != '.';
		if (d)
			closedir(d);
	}
	ok(n == 2, "no temporary of ours left (%d entries)", n);
	fs_rm_rf(dir, &e);
	free(theirs);
	free(path);
}

/* ---- cli ---- */

struct cli_test {
	const char *dir;
	bool flag;
};

/* Table options land in the struct; the rest come back by id, in order. */
static void test_cli(void)
{
	static const struct cli_opt opts[] = {
	    CLI_S("dir", struct cli_test, dir),
	    CLI_B("flag", struct cli_test, flag),
	    {"num", CLI_ID_ARG, CLI_ID0},
	    {"verbose", CLI_ID, 'v'},
	};
	char a0[] = "prog", a1[] = "--num", a2[] = "7", a3[] = "--dir=/d",
	     a4[] = "-v", a5[] = "--flag", a6[] = "--bogus", a7[] = "rest";
	char *argv[] = {a0, a1, a2, a3, a4, a5, a6, a7, NULL};
	struct cli_test t = {0};
	const struct cli_parser cli = {"+v", opts, ARRAY_SIZE(opts), &t};
	int ids[4], n = 0, c;

	optind = 1;
	opterr = 0;
	while ((c = cli_next(&cli, 8, argv)) != -1 && n < 4)
		ids[n++] = c == CLI_ID0 ? (int)strtol(optarg, NULL, 10) : c;
	ok(n == 3 && ids[0] == 7 && ids[1] == 'v' && ids[2] == '?' && t.dir &&
	       !strcmp(t.dir, "/d") && t.flag && optind == 7,
	   "cli: strings and flags stored, the rest returned (%d)", n);
	opterr = 1;
}

/* ---- gunzip ---- */

static size_t gz_into(const char *s, unsigned char *out, size_t cap)
{
	struct isal_zstream z;

	isal_deflate_init(&z);
	z.gzip_flag = IGZIP_GZIP;
	z.end_of_stream = 1;
	z.next_in = (uint8_t *)(uintptr_t)s;
	z.avail_in = (uint32_t)strlen(s);
	z.next_out = out;
	z.avail_out = (uint32_t)cap;
	if (isal_deflate(&z) != COMP_OK || z.avail_in)
		abort();
	return cap - z.avail_out;
}

/* Two members fed a byte at a time into a 3-byte window: the streaming
 * decoder (layers, packages) must give the whole text, member by member. */
static void test_gunzip_stream(void)
{
	unsigned char in[8192], out[3];
	char text[64] = "";
	size_t len = gz_into("hello ", in, sizeof(in) / 2), pos = 0, tl = 0;
	struct gunzip *g = gunzip_new();
	struct cerr e = {0};
	int steps = 0, ends = 0;
	bool was_done = false;

	len += gz_into("world", in + len, sizeof(in) / 2);
	while ((pos < len || !gunzip_member_done(g)) && steps++ < 10000) {
		size_t used, made;

		if (gunzip_run(g, in + pos, pos < len ? 1 : 0, &used, out,
			       sizeof(out), &made, &e) < 0)
			break;
		pos += used;
		memcpy(text + tl, out, made);
		tl += made;
		if (gunzip_member_done(g) && !was_done)
			ends++;
		was_done = gunzip_member_done(g);
	}
	text[tl] = '\0';
	ok(!e.code && !strcmp(text, "hello world") && ends == 2,
	   "gunzip: two members a byte at a time (%s, %d ends, %s)", text, ends,
	   e.msg);
	gunzip_free(g);
}

static void test_gunzip_buf(void)
{
	unsigned char in[8192];
	size_t len = gz_into("data", in, sizeof(in));
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 64);
	memcpy(in + len, "xx", 2);
	ok(gunzip_buf(in, len + 2, &b, &e) < 0 && e.code == EBADMSG &&
	       strstr(e.msg, "trailing garbage"),
	   "gunzip: bytes after the last member refused (%s)", e.msg);
	buf_free(&b);
	in[len - 8] ^= 1; /* the CRC-32 */
	buf_init(&b, 64);
	ok(gunzip_buf(in, len, &b, &e) < 0 && e.code == EBADMSG &&
	       strstr(e.msg, "checksum"),
	   "gunzip: a wrong CRC-32 refused (%s)", e.msg);
	buf_free(&b);
	in[len - 8] ^= 1;
	in[len - 1] ^= 1; /* the length */
	buf_init(&b, 64);
	ok(gunzip_buf(in, len, &b, &e) < 0 && e.code == EBADMSG,
	   "gunzip: a wrong length refused (%s)", e.msg);
	buf_free(&b);
}

/* The one PATH search (agent: kube-router, nvidia-ctk): a relative entry
 * is never searched, a name with a '/' is taken as it is. */
static void test_find_program(void)
{
	char *old = getenv("PATH") ? xstrdup(getenv("PATH")) : NULL;
	cleanup_free char *abs = NULL, *rel = NULL, *slash = NULL;
	cleanup_free char *copy = xmemdup("a\0b", 3);
	cleanup_free char *cwd = getcwd(NULL, 0);

	ok(!memcmp(copy, "a\0b", 3) && copy[3] == '\0',
	   "xmemdup copies NULs and ends with one");
	setenv("PATH", "bin:/bin:/usr/bin", 1);
	abs = spawn_find_program("sh");
	ok(abs && abs[0] == '/', "sh found in an absolute PATH entry: %s",
	   abs ? abs : "(none)");
	if (chdir("/") == 0)
		setenv("PATH", "bin", 1);
	rel = spawn_find_program("sh");
	ok(!rel, "a relative PATH entry is not searched");
	slash = spawn_find_program("/bin/sh");
	ok(slash && !strcmp(slash, "/bin/sh"), "a name with '/' is itself");
	if (old)
		setenv("PATH", old, 1);
	free(old);
	ok(cwd && chdir(cwd) == 0, "back in %s", cwd ? cwd : "(none)");
}

int main(void)
{
	test_find_program();
	test_write_atomic_temp();
	test_default_route();
	test_log_sinks();
	test_base64();
	test_err();
	test_err_long_chain();
	test_buf();
	test_clean();
	test_beneath(false);
	test_beneath(true);
	test_in_root(false);
	test_in_root(true);
	test_digest();
	test_spawn_fd3();
	test_mounts_beneath();
	test_cli();
	test_gunzip_stream();
	test_gunzip_buf();
	return tap_done();
}
