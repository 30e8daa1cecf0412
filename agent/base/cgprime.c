// SPDX-License-Identifier: Apache-2.0
/* Priming the kernel's cgroup attach lock ahead of a unit start.
 *
 * Every write to a cgroup.procs file takes cgroup_threadgroup_rwsem for
 * writing, and a writer that finds that lock idle waits for an RCU grace
 * period first (rcu_sync): 8-12 ms on a loaded 2-core host, well over half
 * of a start where runc takes 20 ms. A writer that comes within a grace
 * period of the last one does not wait (0.01 ms). A start's one such write
 * is the monitor's, putting the container init into its cgroups (cgroup v1,
 * and v2 without CLONE_INTO_CGROUP or favordynmods).
 *
 * So when a start is coming (updatepod received, a unit about to start),
 * a thread of the agent writes the agent's own pid into the cgroup.procs of
 * the cgroup it is already in: a move to where it is, which changes
 * nothing but takes the lock. Its grace period then passes while the agent
 * syncs pod.json, mounts the image and spawns the monitor; it writes again
 * every 2 ms (each write then costs microseconds) until the start is done
 * (100 ms at most), so the monitor finds the lock warm. The thread waits on an
 * eventfd; kicks while it is busy merge. Where no cgroup.procs of ours can be
 * written, priming is off. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <linux/magic.h>
#include <sys/eventfd.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "cgprime.h"
#include "log.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int kick_fd = -1;
static int procs_fd = -1;

/* The cgroup.procs of the cgroup this process is in, in the first
 * hierarchy where it can be opened: the lock is one for all of them. */
static int open_procs(const char *path)
{
	struct statfs sf;
	int fd = open(path, O_WRONLY | O_CLOEXEC);

	/* Only the kernel's file: never a look-alike in a test tree. */
	if (fd >= 0 &&
	    (fstatfs(fd, &sf) < 0 || (sf.f_type != CGROUP_SUPER_MAGIC &&
				      sf.f_type != CGROUP2_SUPER_MAGIC))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int open_own_procs(void)
{
	static const char root[] = "/sys/fs/cgroup";
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096], path[4200];
	int fd = -1;

	while (f && fd < 0 && fgets(line, sizeof(line), f)) {
		char *ctl = strchr(line, ':'), *rel, *comma;

		if (!ctl || !(rel = strchr(ctl + 1, ':')))
			continue;
		*rel++ = '\0';
		rel[strcspn(rel, "\n")] = '\0';
		ctl++;
		if (!*ctl) { /* v2: hybrid's unified, else the root itself */
			snprintf(path, sizeof(path),
				 "%s/unified%s/cgroup.procs", root, rel);
			fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd < 0) {
				snprintf(path, sizeof(path),
					 "%s%s/cgroup.procs", root, rel);
				fd = open(path, O_WRONLY | O_CLOEXEC);
			}
			continue;
		}
		if (!strncmp(ctl, "name=", 5))
			ctl += 5;
		if ((comma = strchr(ctl, ',')))
			*comma = '\0';
		snprintf(path, sizeof(path), "%s/%s%s/cgroup.procs", root, ctl,
			 rel);
		fd = open_procs(path);
	}
	if (f)
		fclose(f);
	return fd;
}

/* The lock is kept warm from a kick until the start is done (or, at the
 * latest, WARM_MS): the kernel lets it go cold one grace period after the
 * last writer, and the monitor's write comes 10-30 ms after updatepod. */
#define WARM_MS 100
#define EVERY_MS 2

static _Atomic int64_t warm_until;

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *primer(void *arg)
{
	char pid[24];
	int n = snprintf(pid, sizeof(pid), "%d", (int)getpid());
	struct pollfd p = {.fd = kick_fd, .events = POLLIN};

	(void)arg;
	for (;;) {
		bool warm = mono_ms() < atomic_load(&warm_until);
		uint64_t v;

		if (poll(&p, 1, warm ? EVERY_MS : -1) < 0 && errno != EINTR)
			return NULL;
		if (p.revents & POLLIN) {
			ssize_t r = read(kick_fd, &v, sizeof(v));
			(void)r;
		}
		if (mono_ms() >= atomic_load(&warm_until))
			continue;
		if (write(procs_fd, pid, (size_t)n) < 0) {
			log_debug("cgroup priming off: %m");
			return NULL;
		}
	}
}

static void start(void)
{
	pthread_t th;
	pthread_attr_t at;

	procs_fd = open_own_procs();
	if (procs_fd < 0)
		return;
	kick_fd = eventfd(0, EFD_CLOEXEC);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 64 * 1024);
	if (kick_fd < 0 || pthread_create(&th, &at, primer, NULL) != 0) {
		close(procs_fd);
		procs_fd = -1;
	}
	pthread_attr_destroy(&at);
}

void cgprime_init(void)
{
	pthread_once(&once, start);
}

void cgprime_kick(void)
{
	uint64_t one = 1;
	ssize_t w;

	pthread_once(&once, start);
	if (procs_fd < 0)
		return;
	atomic_store(&warm_until, mono_ms() + WARM_MS);
	w = write(kick_fd, &one, sizeof(one));
	(void)w; /* a full counter is a kick already pending */
}

void cgprime_done(void)
{
	atomic_store(&warm_until, 0);
}
