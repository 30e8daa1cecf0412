// SPDX-License-Identifier: Apache-2.0
/* Starting programs from a threaded process; see procspawn.h. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "log.h"
#include "procspawn.h"
#include "util.h"

/* musl has no close_range() wrapper; the raw system call works on both. */
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

extern char **environ;

pid_t spawn_program(const char *bin, char *const argv[], const int stdio[3],
		    bool new_session, struct cerr *e)
{
	return spawn_program_fd3(bin, argv, stdio, -1, new_session, e);
}

pid_t spawn_program_fd3(const char *bin, char *const argv[], const int stdio[3],
			int fd3, bool new_session, struct cerr *e)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int hi[4] = {-1, -1, -1, -1}, rc;
	sigset_t none, all;
	pid_t pid = -1;

	posix_spawn_file_actions_init(&fa);
	for (int i = 0; i < 3; i++) {
		/* Above the stdio range and close-on-exec: the dup2s cannot
		 * clobber one another, and nothing leaks elsewhere. */
		if (stdio[i] >= 0 &&
		    (hi[i] = fcntl(stdio[i], F_DUPFD_CLOEXEC, 10)) >= 0)
			posix_spawn_file_actions_adddup2(&fa, hi[i], i);
		else
			posix_spawn_file_actions_addopen(
			    &fa, i, "/dev/null", i ? O_WRONLY : O_RDONLY, 0);
	}
	if (fd3 >= 0) {
		if ((hi[3] = fcntl(fd3, F_DUPFD_CLOEXEC, 10)) < 0) {
			rc = errno;
			goto out;
		}
		posix_spawn_file_actions_adddup2(&fa, hi[3], 3);
	}
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(
	    &at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
		     (new_session ? POSIX_SPAWN_SETSID : 0));
	rc = posix_spawn(&pid, bin, &fa, &at, argv, environ);
	posix_spawnattr_destroy(&at);
out:
	posix_spawn_file_actions_destroy(&fa);
	for (int i = 0; i < 4; i++)
		if (hi[i] >= 0)
			close(hi[i]);
	if (rc != 0) {
		errno = rc;
		return cerr_sys(e, "spawn %s", bin);
	}
	return pid;
}

int spawn_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* The child's side of spawn_pidfd, between clone and exec: only
 * async-signal-safe calls, errors go to the parent through errfd. */
static __attribute__((noreturn)) void spawn_child(char *const argv[],
						  char *const envp[],
						  const int stdio[3],
						  unsigned flags, int errfd)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;
	int fds[3];
	int err;

	/* Signals: no mask, no handlers, nothing ignored (civetweb ignores
	 * SIGPIPE, and ignored signals survive exec). */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	/* Dies with the thread that started it (the supervisor's, or a
	 * worker: both live as long as the agent). */
	if ((flags & SPAWN_DIE_WITH_US) && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		goto fail;
	if ((flags & (SPAWN_SETSID | SPAWN_TTY)) && setsid() < 0)
		goto fail;
	/* Move the fds above 2 first, so that dup2 onto 0..2 cannot clobber
	 * one still needed. */
	for (int i = 0; i < 3; i++) {
		fds[i] = stdio[i] >= 0 ? stdio[i]
				       : open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fds[i] < 0 ||
		    (fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)) < 0)
			goto fail;
	}
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			goto fail;
	if ((flags & SPAWN_TTY) && ioctl(0, TIOCSCTTY, 0) < 0)
		goto fail;
	/* Whatever else is open (a descriptor someone forgot to mark
	 * close-on-exec) stays with us. */
	syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
	execve(argv[0], argv, envp ? envp : environ);
fail:
	err = errno;
	if (write(errfd, &err, sizeof(err)) < 0)
		_exit(127);
	_exit(127);
}

/* fork, with a pidfd from the start (no window in which the pid could be
 * reaped and reused before we hold it). clone3 first; the older clone for
 * kernels or sandboxes that refuse clone3. */
static pid_t clone_pidfd(int *pidfd)
{
	struct clone_args ca = {
	    .flags = CLONE_PIDFD,
	    .pidfd = (uint64_t)(uintptr_t)pidfd,
	    .exit_signal = SIGCHLD,
	};
	long r = syscall(SYS_clone3, &ca, sizeof(ca));

	if (r < 0 && errno == ENOSYS)
		r = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, pidfd, NULL,
			    NULL);
	return (pid_t)r;
}

int spawn_pidfd(char *const argv[], char *const envp[], const int stdio[3],
		unsigned flags, pid_t *pid, struct cerr *e)
{
	int sync[2], pidfd = -1, err = 0;
	pid_t p;
	ssize_t n;

	if (!argv || !argv[0])
		return cerr_set(e, EINVAL, "nothing to run");
	if (pipe2(sync, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	p = clone_pidfd(&pidfd);
	if (p < 0) {
		close(sync[0]);
		close(sync[1]);
		return cerr_sys(e, "clone");
	}
	if (p == 0)
		spawn_child(argv, envp, stdio, flags, sync[1]);
	close(sync[1]);
	do
		n = read(sync[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(sync[0]);
	if (n == sizeof(err)) { /* exec failed; reap the child */
		spawn_wait(pidfd, false);
		close(pidfd);
		errno = err;
		return cerr_sys(e, "exec %s", argv[0]);
	}
	if (pid)
		*pid = p;
	return pidfd;
}

int spawn_wait(int pidfd, bool nohang)
{
	siginfo_t si;

	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PIDFD, (id_t)pidfd, &si,
			   WEXITED | __WALL | (nohang ? WNOHANG : 0)) == 0)
			break;
		if (errno != EINTR)
			return -1;
	}
	if (si.si_pid == 0)
		return -2;
	if (si.si_code == CLD_EXITED)
		return si.si_status;
	return 128 + si.si_status;
}

/* Read what the tool prints until it closes its end or the deadline. */
static void collect_output(int fd, struct buf *out, uint64_t deadline)
{
	char chunk[4096];
	struct cerr ig = {0};

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = now_ns();
		int ms =
		    now >= deadline ? 0 : (int)((deadline - now) / 1000000);
		ssize_t r;

		if (ms == 0 || poll(&p, 1, ms) == 0)
			return;
		r = read(fd, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		if (out->max && out->len + (size_t)r > out->max)
			continue; /* keep reading so the tool can finish */
		buf_append(out, chunk, (size_t)r, &ig);
	}
}

int spawn_run(char *const argv[], struct buf *out, int timeout_s,
	      struct cerr *e)
{
	int p[2], pidfd, rc;
	int stdio[3];
	uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000;

	if (pipe2(p, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	stdio[0] = -1;
	stdio[1] = stdio[2] = p[1];
	pidfd = spawn_pidfd(argv, NULL, stdio, 0, NULL, e);
	close(p[1]);
	if (pidfd < 0) {
		close(p[0]);
		return -1;
	}
	collect_output(p[0], out, deadline);
	close(p[0]);
	/* Output closed; give the process what is left of its time to
	 * exit. */
	{
		struct pollfd pp = {.fd = pidfd, .events = POLLIN};
		uint64_t now = now_ns();

		if (now < deadline)
			poll(&pp, 1, (int)((deadline - now) / 1000000) + 1);
	}
	rc = spawn_wait(pidfd, true);
	if (rc == -2) {
		spawn_signal(pidfd, SIGKILL);
		log_warn("%s: killed after %d s", argv[0], timeout_s);
		rc = spawn_wait(pidfd, false);
	}
	close(pidfd);
	if (rc < 0)
		return cerr_sys(e, "wait for %s", argv[0]);
	return rc;
}

char *spawn_find_program(const char *name)
{
	const char *path = getenv("PATH");
	cleanup_free char *dirs = NULL;
	char *save = NULL;

	if (strchr(name, '/'))
		return access(name, X_OK) == 0 ? xstrdup(name) : NULL;
	dirs = xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *d = strtok_r(dirs, ":", &save); d;
	     d = strtok_r(NULL, ":", &save)) {
		cleanup_free char *p = NULL;

		if (*d != '/')
			continue;
		p = xasprintf("%s/%s", d, name);
		if (access(p, X_OK) == 0)
			return steal_ptr(&p);
	}
	return NULL;
}
