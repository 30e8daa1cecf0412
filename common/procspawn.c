/* posix_spawn for helper programs; see procspawn.h. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include "procspawn.h"

extern char **environ;

pid_t spawn_program(const char *bin, char *const argv[], const int stdio[3],
		    bool new_session, struct cerr *e)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	int hi[3] = {-1, -1, -1}, rc;
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
	posix_spawnattr_init(&at);
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&at, &none);
	posix_spawnattr_setsigdefault(&at, &all);
	posix_spawnattr_setflags(
	    &at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
		     (new_session ? POSIX_SPAWN_SETSID : 0));
	rc = posix_spawn(&pid, bin, &fa, &at, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&at);
	for (int i = 0; i < 3; i++)
		if (hi[i] >= 0)
			close(hi[i]);
	if (rc != 0) {
		errno = rc;
		return cerr_sys(e, "spawn %s", bin);
	}
	return pid;
}
