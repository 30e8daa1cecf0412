// SPDX-License-Identifier: Apache-2.0
/* Pod sysctls (runtime/sysctl.c): which are namespaced, what is refused, and
 * applying them inside a namespace of our own (never the host's: this test
 * makes a throwaway IPC namespace). Runs as root for setns. */
/* The fixtures build vectors from string literals. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "buf.h"
#include "fsutil.h"
#include "sysctl.h"
#include "util.h"

static void test_names(void)
{
	static const struct {
		const char *name;
		enum sysctl_ns want;
	} cases[] = {
	    {"kernel.shmmax", SYSCTL_IPC},
	    {"kernel.shm_rmid_forced", SYSCTL_IPC},
	    {"kernel/msgmax", SYSCTL_IPC},
	    {"kernel.sem", SYSCTL_IPC},
	    {"fs.mqueue.msg_max", SYSCTL_IPC},
	    {"net.core.somaxconn", SYSCTL_NET},
	    {"net.ipv4.ip_local_port_range", SYSCTL_NET},
	    {"kernel.semx", SYSCTL_REFUSED},
	    {"kernel.domainname", SYSCTL_REFUSED},
	    {"vm.overcommit_memory", SYSCTL_REFUSED},
	    {"fs.file-max", SYSCTL_REFUSED},
	    {"kernel.shm/../../vm/x", SYSCTL_REFUSED},
	    {"net..core", SYSCTL_REFUSED},
	    {".net.core", SYSCTL_REFUSED},
	    {"", SYSCTL_REFUSED},
	    {"NET.core.x", SYSCTL_REFUSED},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		ok(sysctl_namespace(cases[i].name) == cases[i].want, "%s: %d",
		   cases[i].name, (int)cases[i].want);
}

static void test_check(void)
{
	struct cerr e = {0};

	ok(sysctl_check("kernel.shmmax", "1000", true, false, &e) == 0,
	   "IPC sysctl in the unit's own IPC namespace");
	ok(sysctl_check("kernel.shmmax", "1000", false, false, &e) < 0 &&
	       e.code == EPERM && strstr(e.msg, "host's IPC"),
	   "never in the host's IPC namespace (%s)", e.msg);
	ok(sysctl_check("net.core.somaxconn", "1024", true, false, &e) < 0 &&
	       e.code == EPERM && strstr(e.msg, "network namespace"),
	   "net.* refused without a pod netns (%s)", e.msg);
	ok(sysctl_check("net.core.somaxconn", "1024", true, true, &e) == 0,
	   "net.* fine in a pod netns");
	ok(sysctl_check("vm.swappiness", "1", true, true, &e) < 0 &&
	       e.code == EPERM && strstr(e.msg, "not namespaced"),
	   "non-namespaced refused (%s)", e.msg);
	ok(sysctl_check("kernel.shmmax", "1\n2", true, true, &e) < 0 &&
	       e.code == EINVAL,
	   "a value with a newline refused");
	ok(sysctl_write("vm.swappiness", "1", &e) < 0 && e.code == EPERM,
	   "sysctl_write refuses a host-wide sysctl itself");
}

static char *read_sysctl(const char *path)
{
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 4096);
	if (fs_read_file(path, &b, &e) < 0) {
		buf_free(&b);
		return xstrdup("");
	}
	return buf_steal(&b, NULL);
}

/* path read by a child in the IPC namespace nsfd (/proc/sys/kernel follows
 * the reader's IPC namespace). */
static char *read_in(int nsfd, const char *path)
{
	int p[2];
	char line[64] = "";
	ssize_t n;
	pid_t pid;

	if (pipe(p) < 0)
		abort();
	pid = fork();
	if (pid == 0) {
		char *v;

		close(p[0]);
		if (setns(nsfd, CLONE_NEWIPC) < 0)
			_exit(1);
		v = read_sysctl(path);
		if (write(p[1], v, strlen(v)) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], line, sizeof(line) - 1);
	close(p[0]);
	waitpid(pid, NULL, 0);
	line[n > 0 ? n : 0] = '\0';
	return xstrdup(line);
}

/* A process parked in a new IPC namespace; *nsfd is that namespace. */
static pid_t ipc_holder(int *nsfd)
{
	int p[2];
	char c;
	pid_t pid;
	char path[64];

	if (pipe(p) < 0)
		abort();
	pid = fork();
	if (pid == 0) {
		if (unshare(CLONE_NEWIPC) < 0)
			_exit(1);
		if (write(p[1], "x", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(p[1]);
	if (read(p[0], &c, 1) != 1)
		abort();
	close(p[0]);
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)pid);
	*nsfd = open(path, O_RDONLY | O_CLOEXEC);
	return pid;
}

static void test_apply_in(void)
{
	char *host_before = read_sysctl("/proc/sys/kernel/shmmni");
	char *names[] = {"kernel.shmmni", NULL}, *values[] = {"1234", NULL};
	char *bad[] = {"net.core.somaxconn", NULL};
	struct cerr e = {0};
	int nsfd = -1;
	pid_t holder = ipc_holder(&nsfd);
	char *inside, *host_after;

	ok(nsfd >= 0, "a throwaway IPC namespace");
	ok(sysctl_apply_in(nsfd, CLONE_NEWIPC, names, values, 1, &e) == 0,
	   "applied in it (%s)", e.msg);
	host_after = read_sysctl("/proc/sys/kernel/shmmni");
	inside = read_in(nsfd, "/proc/sys/kernel/shmmni");
	is_str(inside, "1234\n", "the namespace has the value");
	is_str(host_after, host_before, "the host's value is untouched");
	ok(sysctl_apply_in(nsfd, CLONE_NEWIPC, bad, values, 1, &e) < 0 &&
	       strstr(e.msg, "not of this namespace"),
	   "a net.* sysctl is not written into an IPC namespace (%s)", e.msg);
	kill(holder, SIGKILL);
	waitpid(holder, NULL, 0);
	close(nsfd);
	free(inside);
	free(host_before);
	free(host_after);
}

int main(void)
{
	test_names();
	test_check();
	test_apply_in();
	return tap_done();
}
