// SPDX-License-Identifier: Apache-2.0
/* Seccomp profiles (runtime/seccomp*.c): the parser on the built-in
 * profile and on broken ones, containers/common's includes/excludes, and
 * compiled filters installed in a child that then calls blocked, allowed
 * and capability-gated syscalls. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "runtime.h"
#include "seccomp-profile.h"
#include "util.h"

static bool has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

static void test_default(void)
{
	struct sc_profile p;
	struct cerr e = {0};
	size_t allow = 0;

	ok(sc_default_profile_size > 1000, "the built-in profile is there");
	ok(sc_profile_parse(sc_default_profile, sc_default_profile_size, &p,
			    &e) == 0,
	   "the built-in profile parses: %s", e.msg);
	ok(p.default_action == SCMP_ACT_ERRNO(ENOSYS), "its default is ENOSYS");
	ok(has(p.arches, "x86_64") && has(p.arches, "x86") &&
	       has(p.arches, "x32"),
	   "archMap: x86_64 with x86 and x32");
	for (size_t i = 0; i < p.n_rules; i++)
		allow += p.rules[i].action == SCMP_ACT_ALLOW;
	ok(p.n_rules > 20 && allow > 10, "%zu rules", p.n_rules);
	sc_profile_free(&p);
}

static const char gated[] =
    "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [\n"
    " {\"names\": [\"chroot\"], \"action\": \"SCMP_ACT_ERRNO\",\n"
    "  \"errnoRet\": 13, \"excludes\": {\"caps\": [\"CAP_SYS_CHROOT\"]}},\n"
    " {\"names\": [\"getppid\"], \"action\": \"SCMP_ACT_ERRNO\",\n"
    "  \"errno\": \"EPERM\", \"includes\": {\"arches\": [\"amd64\"],\n"
    "  \"minKernel\": \"3.0\"}},\n"
    " {\"names\": [\"getpgrp\"], \"action\": \"SCMP_ACT_ERRNO\",\n"
    "  \"includes\": {\"minKernel\": \"999.0\"}},\n"
    " {\"name\": \"personality\", \"action\": \"SCMP_ACT_ERRNO\",\n"
    "  \"errnoRet\": 22, \"args\": [{\"index\": 0, \"value\": 8,\n"
    "  \"op\": \"SCMP_CMP_EQ\"}]}]}\n";

static void test_rules(void)
{
	struct sc_profile p;
	struct cerr e = {0};
	char *with[] = {"cap_sys_chroot", NULL}, *without[] = {NULL};
	int k[2] = {6, 1};

	ok(sc_profile_parse(gated, sizeof(gated) - 1, &p, &e) == 0,
	   "a small profile parses: %s", e.msg);
	ok(p.n_rules == 4, "four rules");
	ok(!sc_rule_applies(&p.rules[0], with, "amd64", k),
	   "excludes.caps: gone with the capability");
	ok(sc_rule_applies(&p.rules[0], without, "amd64", k),
	   "excludes.caps: kept without it");
	ok(sc_rule_applies(&p.rules[1], without, "amd64", k) &&
	       !sc_rule_applies(&p.rules[1], without, "arm64", k),
	   "includes.arches");
	ok(!sc_rule_applies(&p.rules[2], without, "amd64", k),
	   "includes.minKernel");
	ok(p.rules[3].n_args == 1 && p.rules[3].args[0].value == 8, "args");
	sc_profile_free(&p);
}

static void bad(const char *text, const char *want, const char *what)
{
	struct sc_profile p;
	struct cerr e = {0};

	ok(sc_profile_parse(text, strlen(text), &p, &e) < 0 &&
	       strstr(e.msg, want),
	   "%s: \"%s\" in \"%s\"", what, want, e.msg);
}

static void test_bad(void)
{
	bad("{\n\"defaultAction\": \"SCMP_ACT_ALLOW\",\n\"syscalls\": [\n}",
	    "line 4", "a syntax error says its line");
	bad("{\"defaultAction\": \"SCMP_ACT_ALLOW\",\n\"syscalls\": [\n"
	    "{\"names\": [\"read\"],\n \"action\": \"SCMP_ACT_FOO\"}]}",
	    "line 4: syscalls[0]: unknown action",
	    "a bad action says its line and place");
	bad("{\"defaultAction\": \"SCMP_ACT_NOTIFY\"}", "not supported",
	    "notify is refused");
	bad("{\"defaultAction\": \"SCMP_ACT_ERRNO\", \"defaultErrno\": "
	    "\"EWHAT\"}",
	    "unknown errno", "an unknown errno name");
	bad("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"architectures\": "
	    "[\"SCMP_ARCH_Z80\"]}",
	    "unknown architecture", "an unknown architecture");
	bad("{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": "
	    "[{\"action\": \"SCMP_ACT_ALLOW\"}]}",
	    "no name", "a rule without names");
	bad("[]", "not a JSON object", "not an object");
}

/* In a child: no_new_privs, the filter, then f's checks (exit 0: all
 * held). */
static int in_child(const void *bpf, size_t len, int (*f)(void))
{
	pid_t pid = fork();
	int st;

	if (pid == 0) {
		struct cerr e = {0};

		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		if (sc_install(bpf, len, &e) < 0)
			_exit(99);
		_exit(f());
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int check_default(void)
{
	int bad = 0;

	/* Debian's profile (podman's): kexec_load and userfaultfd are named
	 * with EPERM; add_key is not named, so it gets the default, ENOSYS;
	 * bpf is EPERM without CAP_SYS_ADMIN. */
	errno = 0;
	bad |= syscall(SYS_kexec_load, 0, 0, 0, 0) != -1 || errno != EPERM;
	errno = 0;
	bad |= (syscall(SYS_add_key, "user", "x", "y", 1, 0) != -1 ||
		errno != ENOSYS)
	       << 1;
	errno = 0;
	bad |= (syscall(SYS_bpf, 0, 0, 0) != -1 || errno != EPERM) << 5;
	errno = 0;
	bad |= (syscall(SYS_userfaultfd, 0) != -1 || errno != EPERM) << 6;
	errno = 0;
	bad |= (syscall(SYS_chroot, "/nonexistent") != -1 || errno != EPERM)
	       << 2;
	/* Not named by the profile: its default, ENOSYS. */
	errno = 0;
	bad |= (syscall(1000) != -1 || errno != ENOSYS) << 3;
	bad |= (getpid() <= 0) << 4;
	return bad;
}

static int check_chroot_cap(void)
{
	errno = 0;
	/* Allowed by the filter: the kernel's own answer. */
	return syscall(SYS_chroot, "/nonexistent") != -1 || errno != ENOENT;
}

static void test_filters(void)
{
	struct sc_profile p;
	struct cerr e = {0};
	char *none[] = {NULL}, *chroot_cap[] = {"CAP_SYS_CHROOT", NULL};
	void *bpf;
	size_t len;
	int r;

	if (sc_profile_parse(sc_default_profile, sc_default_profile_size, &p,
			     &e) < 0)
		abort();
	ok(sc_compile(&p, none, &bpf, &len, &e) == 0 && len % 8 == 0 &&
	       len > 100,
	   "the default compiles (%zu bytes): %s", len, e.msg);
	r = in_child(bpf, len, check_default);
	ok(r == 0,
	   "kexec_load, bpf, userfaultfd, chroot EPERM; add_key and "
	   "an unknown one ENOSYS (%d)",
	   r);
	free(bpf);
	ok(sc_compile(&p, chroot_cap, &bpf, &len, &e) == 0,
	   "with CAP_SYS_CHROOT: %s", e.msg);
	r = in_child(bpf, len, check_chroot_cap);
	ok(r == 0, "chroot opens with CAP_SYS_CHROOT (%d)", r);
	free(bpf);
	sc_profile_free(&p);
}

static void test_runconfig(void)
{
	static const char rj[] =
	    "{\"id\": \"x\", \"rootfs\": \"/r\", \"args\": [\"sh\"], "
	    "\"cgroup\": {\"path\": \"c/u\"}, \"log\": {\"path\": \"/l\"}, "
	    "\"seccomp\": \"AAAAAAAAAAA=\"}";
	struct run_config c;
	struct cerr e = {0};
	char *s;

	ok(runconfig_parse(rj, sizeof(rj) - 1, &c, &e) == 0 &&
	       c.seccomp_len == 8,
	   "run.json seccomp: one instruction: %s", e.msg);
	s = runconfig_to_json(&c);
	ok(strstr(s, "\"seccomp\": \"AAAAAAAAAAA=\"") != NULL, "written back");
	free(s);
	runconfig_free(&c);
	s = xstrdup(rj);
	/* "AAAAAAAAAAA=" (8 bytes) becomes "AAAA" (3 bytes). */
	memmove(strstr(s, "AAAAAAAAAAA="), "AAAA\"}", 7);
	ok(runconfig_parse(s, strlen(s), &c, &e) < 0 &&
	       strstr(e.msg, "not a BPF program"),
	   "a program that is not whole instructions is refused: %s", e.msg);
	free(s);
}

int main(void)
{
	test_default();
	test_rules();
	test_bad();
	test_filters();
	test_runconfig();
	return tap_done();
}
