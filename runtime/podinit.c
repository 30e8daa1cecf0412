// SPDX-License-Identifier: Apache-2.0
/* cell-monitor pod-init: PID 1 of a pod's shared PID (and IPC) namespace.
 *
 * shareProcessNamespace (namespaceOptions.pid POD) puts every unit of the
 * pod into one PID namespace. Its PID 1 must outlive any one unit (when a
 * namespace's init exits the kernel kills everything in it) and must reap
 * the orphans that are reparented to it, which is what the kubelet's pause
 * container does. A cell has no pause image, so this small process is the
 * pod's PID 1: it holds the namespaces, reaps, and does nothing else.
 *
 * Launch: `cell-monitor pod-init ROOT` starts a new session, unshares a
 * PID and an IPC namespace, forks the holder (PID 1 there) and prints its
 * host pid on stdout, then exits; the holder is reparented at once, as a
 * monitor is, and outlives agent restarts. It owns nothing a unit could
 * use against the host: it chroots into ROOT (an empty directory, so
 * /proc/1/root inside the pod leads nowhere), drops every capability,
 * sets no_new_privs and is not dumpable, and keeps no descriptor but
 * /dev/null. SIGTERM or SIGKILL from the agent ends it, and the kernel
 * then kills whatever is left in the namespace. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime.h"

static void drop_privileges(void)
{
	struct __user_cap_header_struct h = {.version =
						 _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2];

	memset(d, 0, sizeof(d));
	for (int c = 0; c <= 63; c++)
		prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	syscall(SYS_capset, &h, d);
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

/* PID 1: reap until told to stop. Signals are taken synchronously, so
 * nothing runs in a handler. */
static _Noreturn void holder(const char *root)
{
	sigset_t set;
	int sig, fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
	}
	for (int i = 3; i < 1024; i++)
		close(i);
	prctl(PR_SET_NAME, "pod-init", 0, 0, 0);
	if (chroot(root) < 0 || chdir("/") < 0)
		_exit(1);
	drop_privileges();
	sigfillset(&set);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (;;) {
		if (sigwait(&set, &sig) != 0)
			continue;
		if (sig == SIGTERM || sig == SIGINT)
			_exit(0);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}

int runtime_pod_init(const char *root, struct cerr *e)
{
	pid_t pid;

	if (setsid() < 0 && errno != EPERM)
		return cerr_sys(e, "setsid");
	if (unshare(CLONE_NEWPID | CLONE_NEWIPC) < 0)
		return cerr_sys(e, "unshare a PID and an IPC namespace");
	pid = fork();
	if (pid < 0)
		return cerr_sys(e, "fork");
	if (pid == 0)
		holder(root);
	printf("%d\n", (int)pid);
	return fflush(stdout) == 0 ? 0 : cerr_sys(e, "write the pid");
}
