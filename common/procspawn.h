/* Starting a helper program from a threaded process: posix_spawn (vfork +
 * exec, nothing runs in between), stdio from given fds or /dev/null, signal
 * mask and dispositions reset, optionally in a session of its own. */
#ifndef CELL_PROCSPAWN_H
#define CELL_PROCSPAWN_H

#include <stdbool.h>
#include <sys/types.h>

#include "err.h"

/* stdio[i] < 0 → /dev/null. Returns the pid, or -1 with e set. */
pid_t spawn_program(const char *bin, char *const argv[], const int stdio[3],
		    bool new_session, struct cerr *e);

#endif
