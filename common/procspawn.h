// SPDX-License-Identifier: Apache-2.0
/* Starting programs from a threaded process. spawn_program: posix_spawn
 * (vfork + exec, nothing runs in between) for a helper reaped by pid.
 * spawn_pidfd: clone with a pidfd for processes the caller watches in a
 * poll loop (exec streams, helper children), with a controlling terminal
 * or a death signal when asked. Both: stdio from given fds or /dev/null,
 * signal mask and dispositions reset, optionally in a session of its
 * own. */
#ifndef CELL_PROCSPAWN_H
#define CELL_PROCSPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"

/* An executable named name: name itself when it holds a '/', else the
 * first in $PATH (/usr/local/bin:/usr/bin:/bin when unset) whose directory
 * is absolute (a relative entry would depend on the caller's working
 * directory); NULL when there is none. Caller frees. */
char *spawn_find_program(const char *name);

/* stdio[i] < 0 → /dev/null. Returns the pid, or -1 with e set. */
pid_t spawn_program(const char *bin, char *const argv[], const int stdio[3],
		    bool new_session, struct cerr *e);
/* The same with fd3 as the child's fd 3 (a report pipe; < 0: none). */
pid_t spawn_program_fd3(const char *bin, char *const argv[], const int stdio[3],
			int fd3, bool new_session, struct cerr *e);

#define SPAWN_SETSID 1u	     /* new session (and process group) */
#define SPAWN_TTY 2u	     /* stdio[0] becomes the controlling tty */
#define SPAWN_DIE_WITH_US 4u /* SIGKILL when the caller's thread dies */

/* Start argv[0] (a path) with stdio[0..2] as its standard fds (-1: /dev/
 * null), every other fd closed, signals reset, envp (NULL: this process's
 * environment). Returns a pidfd (clone3 CLONE_PIDFD: no pid-reuse race);
 * *pid gets the pid. An exec failure is reported here (ENOENT, EACCES…),
 * not as an exit status. Reap it with spawn_wait: a waitpid(-1) elsewhere
 * in the process would steal its status (spawn_wait then says -1), so the
 * rest of the process must reap only its own children. */
int spawn_pidfd(char *const argv[], char *const envp[], const int stdio[3],
		unsigned flags, pid_t *pid, struct cerr *e);
/* Reap the process of pidfd (blocking unless nohang). The exit code in
 * shell form (128+N for signal N); -2 with nohang while it runs; -1 on
 * error. */
int spawn_wait(int pidfd, bool nohang);
/* pidfd_send_signal(2). */
int spawn_signal(int pidfd, int sig);
/* Run argv to completion with stdout+stderr captured in out (up to its
 * cap), killing it after timeout_s. Returns the exit code or -1 (e set). */
int spawn_run(char *const argv[], struct buf *out, int timeout_s,
	      struct cerr *e);

#endif
