// SPDX-License-Identifier: Apache-2.0
/* The agent's side of the protocol with cell-monitor (monitor.c): start a
 * monitor and read its one-line report, read the state it records, stop it,
 * clean up after it, and start `cell-monitor exec` in a running unit. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "procspawn.h"
#include "runtime.h"
#include "util.h"

#define STATE_MAX (64u << 10)
#define START_TIMEOUT_MS 120000

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

int runtime_exec_end(int pidfd)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, EXEC_END_SIGNAL, NULL,
			    0);
}

/* The helper (common/procspawn) with stdio[0..2] (-1: /dev/null) and the
 * write end of a fresh pipe as fd 3; *rd gets its read end. */
static pid_t spawn_helper(const char *bin, const char **argv,
			  const int stdio[3], bool new_session, int *rd,
			  struct cerr *e)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	pid = spawn_program_fd3(bin, (char *const *)argv, stdio, p[1],
				new_session, e);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	*rd = p[0];
	return pid;
}

/* The helper's one line: "ok <pid>" or "error <errno> <message>". */
static pid_t read_report(int fd, struct cerr *e)
{
	char line[REPORT_MAX];
	size_t n = 0;
	int code = 0, off = 0;

	while (n < sizeof(line) - 1) {
		struct pollfd p = {fd, POLLIN, 0};
		int r = poll(&p, 1, START_TIMEOUT_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			return cerr_set(e, ETIMEDOUT,
					"no report from "
					"cell-monitor in %d s",
					START_TIMEOUT_MS / 1000);
		ssize_t k = read(fd, line + n, sizeof(line) - 1 - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	if (!strncmp(line, "ok ", 3))
		return (pid_t)strtol(line + 3, NULL, 10);
	if (sscanf(line, "error %d %n", &code, &off) >= 1 && off > 0)
		return cerr_set(e, code, "%s", line + off);
	return cerr_set(e, EIO, "cell-monitor ended without a report%s%s",
			n ? ": " : "", line);
}

pid_t runtime_start(const char *monitor_bin, const char *unit_dir,
		    struct cerr *e)
{
	cleanup_free char *logp = xasprintf("%s/monitor.log", unit_dir);
	const char *argv[] = {monitor_bin, "run",    "--sync-fd",
			      "3",	   unit_dir, NULL};
	cleanup_close int logfd = -1, rd = -1;
	pid_t first, pid;
	int status;

	logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0)
		return cerr_sys(e, "open %s", logp);
	first = spawn_helper(monitor_bin, argv, (int[]){-1, logfd, logfd}, true,
			     &rd, e);
	if (first < 0)
		return -1;
	/* The first process forks the monitor and exits at once. A
	 * supervisor that reaps every child may beat us to it: ECHILD. */
	while (waitpid(first, &status, 0) < 0 && errno == EINTR)
		;
	pid = read_report(rd, e);
	if (pid < 0)
		return cerr_prefix(e, "start %s", unit_dir);
	return pid;
}

static int read_json_file(const char *dir, const char *name,
			  int (*parse)(const char *, size_t,
				       struct unit_runtime_state *,
				       struct cerr *),
			  struct unit_runtime_state *st, struct cerr *e)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, name);
	struct buf b;
	int rc;

	buf_init(&b, STATE_MAX);
	rc = fs_read_file(p, &b, e);
	if (rc < 0 && e->code == ENOENT) {
		buf_free(&b);
		return 0;
	}
	if (rc == 0)
		rc = parse(b.data, b.len, st, e);
	buf_free(&b);
	return rc < 0 ? -1 : 1;
}

/* A monitor holds monitor.lock from before it reads run.json until it
 * exits: a held lock without state.json means setup is under way. */
static bool monitor_starting(const char *unit_dir)
{
	cleanup_free char *p = xasprintf("%s/monitor.lock", unit_dir);
	cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);

	return fd >= 0 && flock(fd, LOCK_SH | LOCK_NB) < 0 &&
	       errno == EWOULDBLOCK;
}

int runtime_read_state(const char *unit_dir, struct unit_runtime_state *st,
		       struct cerr *e)
{
	int rc;

	memset(st, 0, sizeof(*st));
	if (read_json_file(unit_dir, "state.json", runstate_parse, st, e) < 0)
		goto fail;
	rc = read_json_file(unit_dir, "exit.json", runexit_parse, st, e);
	if (rc < 0)
		goto fail;
	if (!st->started && rc == 0)
		return monitor_starting(unit_dir)
			   ? cerr_set(e, EAGAIN, "unit %s is starting",
				      unit_dir)
			   : cerr_set(e, ENOENT, "unit %s has not started",
				      unit_dir);
	if (st->exited || runtime_monitor_alive(st))
		return 0;
	/* The monitor may have written exit.json just before it went. */
	rc = read_json_file(unit_dir, "exit.json", runexit_parse, st, e);
	if (rc < 0)
		goto fail;
	if (rc == 0) {
		st->exited = st->monitor_lost = true;
		st->exit_code = 128 + SIGKILL;
		st->signal = SIGKILL;
		st->reason = xstrdup("Error");
		st->message =
		    xstrdup("cell-monitor died; the unit died with it");
		st->finished_at_ns = wall_ns();
	}
	return 0;
fail:
	runtime_state_free(st);
	return -1;
}

bool runtime_monitor_alive(const struct unit_runtime_state *st)
{
	char state = 0;

	return st->started && st->monitor_pid > 0 &&
	       proc_stat(st->monitor_pid, &state) == st->monitor_start &&
	       st->monitor_start != 0 && state != 'Z' && state != 'X';
}

int runtime_pidfd(const struct unit_runtime_state *st, struct cerr *e)
{
	int fd;

	if (!st->started)
		return cerr_set(e, ESRCH, "unit has not started");
	fd = (int)syscall(SYS_pidfd_open, st->monitor_pid, 0);
	if (fd < 0)
		return cerr_sys(e, "pidfd_open %d", (int)st->monitor_pid);
	/* The pidfd pins the process; the start time proves it is ours. */
	if (!runtime_monitor_alive(st)) {
		close(fd);
		return cerr_set(e, ESRCH, "monitor %d is gone",
				(int)st->monitor_pid);
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

int runtime_stop(const char *unit_dir, int grace_seconds, struct cerr *e)
{
	struct unit_runtime_state st;
	siginfo_t si;
	int fd, rc = 0;

	if (runtime_read_state(unit_dir, &st, e) < 0)
		return -1;
	if (st.exited) {
		runtime_state_free(&st);
		return 0;
	}
	fd = runtime_pidfd(&st, e);
	runtime_state_free(&st);
	if (fd < 0)
		return e->code == ESRCH ? 0 : -1;
	/* sigqueue semantics: SI_QUEUE carries the grace to the monitor. */
	memset(&si, 0, sizeof(si));
	si.si_signo = SIGTERM;
	si.si_code = SI_QUEUE;
	si.si_pid = getpid();
	si.si_uid = getuid();
	si.si_value.sival_int = grace_seconds;
	if (syscall(SYS_pidfd_send_signal, fd, SIGTERM,
		    grace_seconds < 0 ? NULL : &si, 0) < 0 &&
	    errno != ESRCH)
		rc = cerr_sys(e, "signal the monitor of %s", unit_dir);
	close(fd);
	return rc;
}

int runtime_cleanup(const char *unit_dir, struct cerr *e)
{
	struct unit_runtime_state st;
	struct cgroup cg;
	int rc;

	if (runtime_read_state(unit_dir, &st, e) < 0)
		return e->code == ENOENT ? 0 : -1;
	if (runtime_monitor_alive(&st)) {
		runtime_state_free(&st);
		return cerr_set(e, EBUSY, "the monitor of %s is running",
				unit_dir);
	}
	cg_from_dirs(&cg, st.cgroups);
	runtime_state_free(&st);
	rc = cg_kill_all(&cg, e);
	if (rc == 0)
		rc = cg_destroy(&cg, e);
	cg_free(&cg);
	return rc;
}

pid_t runtime_exec(const char *monitor_bin, const char *unit_dir,
		   const struct exec_opts *o, struct cerr *e)
{
	size_t na = strv_len(o->argv), ne = strv_len(o->env), k = 0;
	cleanup_free const char **argv =
	    xcalloc(na + 2 * ne + 10, sizeof(char *));
	cleanup_close int rd = -1;
	pid_t pid, ok;

	if (o->tty)
		return cerr_set(e, ENOTSUP, "exec with a tty is not supported");
	if (na == 0)
		return cerr_set(e, EINVAL, "exec: no command");
	argv[k++] = monitor_bin;
	argv[k++] = "exec";
	argv[k++] = "--sync-fd";
	argv[k++] = "3";
	for (size_t i = 0; i < ne; i++) {
		argv[k++] = "--env";
		argv[k++] = o->env[i];
	}
	if (o->cwd) {
		argv[k++] = "--cwd";
		argv[k++] = o->cwd;
	}
	argv[k++] = unit_dir;
	argv[k++] = "--";
	for (size_t i = 0; i < na; i++)
		argv[k++] = o->argv[i];
	pid = spawn_helper(monitor_bin, argv,
			   (int[]){o->stdin_fd, o->stdout_fd, o->stderr_fd},
			   false, &rd, e);
	if (pid < 0)
		return -1;
	ok = read_report(rd, e);
	if (ok < 0) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return -1;
	}
	return pid;
}
