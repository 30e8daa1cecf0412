// SPDX-License-Identifier: Apache-2.0
/* Running the user's commands: fork + execve (never via a shell helper), with
 * stdin from /dev/null and stdout/stderr on the log file, so that a
 * command that leaves a daemon behind ("agent &") cannot hold a pipe of
 * ours open and stall the boot.
 *
 * Where they run: with --root / (a real boot) they simply run. With another
 * root they run on the host with that root as their working directory and
 * CLOUDINIT_ROOT set, unless --chroot-commands asks for chroot(root); the
 * command then sees the root as "/" (it needs its own /bin/sh). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ci-internal.h"
#include "log.h"
#include "util.h"

#define DEFAULT_PATH                                                           \
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

extern char **environ;

static char **make_env(const struct ci_ctx *c, const char **path)
{
	size_t n = strv_len(environ), k = 0;
	char **env = xcalloc(n + 4, sizeof(char *));
	bool have_path = false;

	*path = DEFAULT_PATH;
	for (size_t i = 0; i < n; i++) {
		if (str_has_prefix(environ[i], "CLOUDINIT_ROOT=") ||
		    str_has_prefix(environ[i], "INSTANCE_ID="))
			continue;
		if (str_has_prefix(environ[i], "PATH=")) {
			*path = environ[i] + 5;
			have_path = true;
		}
		env[k++] = xstrdup(environ[i]);
	}
	/* A boot environment may have no PATH at all. */
	if (!have_path)
		env[k++] = xstrdup("PATH=" DEFAULT_PATH);
	env[k++] = xasprintf("CLOUDINIT_ROOT=%s", c->o->root);
	/* Boothooks get the instance id, as in cloud-init; so does all. */
	env[k++] = xasprintf("INSTANCE_ID=%s", c->st ? c->st->iid : "");
	return env;
}

/* Async-signal-safe error report from the child. */
static void child_fail(const char *what, const char *arg, int err)
{
	char num[16];
	int i = (int)sizeof(num);
	ssize_t r;

	num[--i] = '\n';
	do
		num[--i] = (char)('0' + err % 10);
	while ((err /= 10) && i > 0);
	r = write(2, "cell-cloudinit: ", 16);
	r = write(2, what, strlen(what));
	r = write(2, arg, strlen(arg));
	r = write(2, ": errno ", 8);
	r = write(2, num + i, sizeof(num) - (size_t)i);
	(void)r;
	_exit(127);
}

/* execvpe without its allocations: only execve between fork and exec. */
static void exec_path(char *const *argv, char *const *env, const char *path)
{
	char full[4096];
	int err = ENOENT;

	if (strchr(argv[0], '/')) {
		execve(argv[0], argv, env);
		child_fail("exec ", argv[0], errno);
	}
	for (const char *p = path; *p;) {
		const char *colon = strchr(p, ':');
		size_t dl = colon ? (size_t)(colon - p) : strlen(p);
		size_t al = strlen(argv[0]);

		if (dl + 1 + al < sizeof(full)) {
			memcpy(full, dl ? p : ".", dl ? dl : 1);
			full[dl ? dl : 1] = '/';
			memcpy(full + (dl ? dl : 1) + 1, argv[0], al + 1);
			execve(full, argv, env);
			if (errno != ENOENT && errno != ENOTDIR)
				err = errno;
		}
		p += dl + (colon ? 1 : 0);
		if (!colon)
			break;
	}
	child_fail("exec ", argv[0], err);
}

static void child(const struct ci_ctx *c, char *const *argv, char *const *env,
		  const char *path)
{
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (dup2(c->null_fd, 0) < 0 || dup2(c->out_fd, 1) < 0 ||
	    dup2(c->out_fd, 2) < 0)
		_exit(127);
	if (c->o->chroot_commands && !c->host_root) {
		if (chroot(c->o->root) < 0)
			child_fail("chroot ", c->o->root, errno);
		if (chdir("/") < 0)
			child_fail("chdir ", "/", errno);
	} else if (chdir(c->o->root) < 0) {
		child_fail("chdir ", c->o->root, errno);
	}
	exec_path(argv, env, path);
}

int ci_exec(const struct ci_ctx *c, const char *what, const char *shell,
	    char *const *argv, int *status, struct cerr *e)
{
	char *sh[] = {(char *)"/bin/sh", (char *)"-c", (char *)shell, NULL};
	char *const *av = argv ? argv : sh;
	const char *path;
	char **env = make_env(c, &path);
	pid_t pid;

	if (shell) {
		ci_log(LOG_INFO, "%s: running '%s'", what, shell);
	} else {
		char line[512];
		size_t n = 0;
		for (char *const *a = argv; *a && n < sizeof(line) - 1; a++)
			n += (size_t)snprintf(line + n, sizeof(line) - n,
					      "%s%s", n ? " " : "", *a);
		ci_log(LOG_INFO, "%s: running [%s]", what, line);
	}
	pid = fork();
	if (pid == 0)
		child(c, av, env, path);
	strv_free(env);
	if (pid < 0)
		return cerr_sys(e, "%s: fork", what);
	while (waitpid(pid, status, 0) < 0) {
		if (errno != EINTR)
			return cerr_sys(e, "%s: waitpid", what);
	}
	return 0;
}

int ci_exec_status(const char *what, int status, struct cerr *e)
{
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFEXITED(status))
		return cerr_set(e, EIO, "%s: exit status %d", what,
				WEXITSTATUS(status));
	if (WIFSIGNALED(status))
		return cerr_set(e, EINTR, "%s: killed by signal %d", what,
				WTERMSIG(status));
	return cerr_set(e, EIO, "%s: wait status %#x", what, status);
}
