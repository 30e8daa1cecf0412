// SPDX-License-Identifier: Apache-2.0
/* A process's state and start time from /proc: the start time tells a pid
 * from a later process that reuses it. Used by the monitor, its clients and
 * the container side (ctr_join_namespaces). */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

/* Field 3 (state) and 22 (starttime) of /proc/<pid>/stat; the command name
 * in field 2 may hold spaces and parentheses, so parsing starts after the
 * last ')'. */
uint64_t proc_stat(pid_t pid, char *state)
{
	char p[64], b[1024], *s;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	b[n] = '\0';
	s = strrchr(b, ')');
	if (!s || sscanf(s + 2,
			 "%c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%*u %*u %*d %*d %*d %*d %*d %*d %llu",
			 state, &start) != 2)
		return 0;
	return start;
}

uint64_t proc_start_time(pid_t pid)
{
	char state;

	return proc_stat(pid, &state);
}
