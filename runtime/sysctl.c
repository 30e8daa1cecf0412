// SPDX-License-Identifier: Apache-2.0
#include "sysctl.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

#define SYSCTL_NAME_MAX 256
#define SYSCTL_VALUE_MAX 4096

/* "kernel.shmmax" and "kernel/shmmax" alike, as the kubelet accepts. */
static bool normalize(const char *name, char *out, size_t n)
{
	size_t len = strlen(name);

	if (len == 0 || len >= n)
		return false;
	for (size_t i = 0; i <= len; i++) {
		char c = name[i];

		if (c == '/')
			c = '.';
		if (c && !((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			   c == '_' || c == '-' || c == '.'))
			return false;
		out[i] = c;
	}
	/* No empty component, nothing that climbs. */
	return out[0] != '.' && out[len - 1] != '.' && !strstr(out, "..");
}

enum sysctl_ns sysctl_namespace(const char *name)
{
	char n[SYSCTL_NAME_MAX];

	if (!normalize(name, n, sizeof(n)))
		return SYSCTL_REFUSED;
	if (str_has_prefix(n, "kernel.shm") ||
	    str_has_prefix(n, "kernel.msg") || !strcmp(n, "kernel.sem") ||
	    str_has_prefix(n, "fs.mqueue."))
		return SYSCTL_IPC;
	if (str_has_prefix(n, "net."))
		return SYSCTL_NET;
	return SYSCTL_REFUSED;
}

int sysctl_check(const char *name, const char *value, bool own_ipc_ns,
		 bool own_net_ns, struct cerr *e)
{
	if (!value || strlen(value) > SYSCTL_VALUE_MAX || strpbrk(value, "\n"))
		return cerr_set(e, EINVAL, "sysctl %s: bad value", name);
	switch (sysctl_namespace(name)) {
	case SYSCTL_IPC:
		if (!own_ipc_ns)
			return cerr_set(e, EPERM,
					"sysctl %s: the unit shares the "
					"host's IPC namespace",
					name);
		return 0;
	case SYSCTL_NET:
		if (!own_net_ns)
			return cerr_set(e, EPERM,
					"sysctl %s: net.* needs the pod's own "
					"network namespace (units share the "
					"cell's for now)",
					name);
		return 0;
	case SYSCTL_REFUSED:
	default:
		return cerr_set(e, EPERM,
				"sysctl %s: not namespaced (only "
				"kernel.shm*, kernel.msg*, kernel.sem, "
				"fs.mqueue.* and net.*)",
				name);
	}
}

int sysctl_write(const char *name, const char *value, struct cerr *e)
{
	char n[SYSCTL_NAME_MAX];
	cleanup_free char *path = NULL;
	cleanup_close int fd = -1;
	size_t len = strlen(value);

	if (sysctl_namespace(name) == SYSCTL_REFUSED ||
	    !normalize(name, n, sizeof(n)))
		return cerr_set(e, EPERM, "sysctl %s: not namespaced", name);
	for (char *p = n; *p; p++)
		if (*p == '.')
			*p = '/';
	path = xasprintf("/proc/sys/%s", n);
	fd = open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cerr_sys(e, "sysctl %s", name);
	if (write(fd, value, len) != (ssize_t)len)
		return cerr_sys(e, "sysctl %s=%s", name, value);
	return 0;
}

int sysctl_apply_in(int nsfd, int nstype, char *const *names,
		    char *const *values, size_t n, struct cerr *e)
{
	int pipefd[2], status;
	char msg[sizeof(e->msg)];
	ssize_t got;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return cerr_sys(e, "fork");
	}
	if (pid == 0) {
		struct cerr ce = {0};

		close(pipefd[0]);
		if (setns(nsfd, nstype) < 0)
			cerr_sys(&ce, "join namespace");
		for (size_t i = 0; i < n && !ce.code; i++)
			if ((nstype == CLONE_NEWNET) !=
			    (sysctl_namespace(names[i]) == SYSCTL_NET))
				cerr_set(&ce, EPERM,
					 "sysctl %s: not of this namespace",
					 names[i]);
			else
				sysctl_write(names[i], values[i], &ce);
		if (ce.code && write(pipefd[1], ce.msg, strlen(ce.msg)) < 0)
			_exit(2);
		_exit(ce.code ? 1 : 0);
	}
	close(pipefd[1]);
	got = read(pipefd[0], msg, sizeof(msg) - 1);
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	msg[got > 0 ? got : 0] = '\0';
	return cerr_set(e, EPERM, "%s", got > 0 ? msg : "sysctl child failed");
}
