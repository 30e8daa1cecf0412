// SPDX-License-Identifier: Apache-2.0
/* cell-boot as a child: wait for it, retry with back-off (from 1 s,
 * doubling to 30 s; CELL_BOOT_RETRY_MS sets the first step), and exec the
 * new agent after a self-update. Runs before any thread or pod work. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bootrun.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "procspawn.h"
#include "util.h"

enum { EXIT_OK = 0, EXIT_RETRY = 1, EXIT_USAGE = 2, EXIT_UPDATED = 3 };

static bool complete(const char *dir)
{
	static const char *const need[] = {"ca.crt", "server.crt",
					   "server.key"};

	for (size_t i = 0; i < ARRAY_SIZE(need); i++) {
		cleanup_free char *p = xasprintf("%s/%s", dir, need[i]);
		if (!fs_exists(p))
			return false;
	}
	return true;
}

static bool wants_version(const char *dir)
{
	static const char *const names[] = {"itzo_version",
					    "cell_agent_version"};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		cleanup_free char *p = xasprintf("%s/%s", dir, names[i]);
		if (fs_exists(p))
			return true;
	}
	return false;
}

/* The helper's exit code, or -1 when it could not run. */
static int run_helper(const struct bootrun_opts *o, bool update_only)
{
	const char *argv[16];
	struct cerr e = {0};
	int n = 0, status;
	pid_t pid;

	argv[n++] = o->helper;
	argv[n++] = "--source";
	argv[n++] = update_only ? "dir" : o->source;
	argv[n++] = "--boot-dir";
	argv[n++] = o->boot_dir;
	argv[n++] = "--state-dir";
	argv[n++] = o->state_dir;
	argv[n++] = "--agent-version";
	argv[n++] = CELL_VERSION;
	if (o->self) {
		argv[n++] = "--agent-path";
		argv[n++] = o->self;
	}
	if (update_only)
		argv[n++] = "--update-only";
	if (log_get_level() >= LOG_DEBUG)
		argv[n++] = "--verbose";
	argv[n] = NULL;
	/* posix_spawn: the agent has threads by now (a SIGHUP check). */
	pid = spawn_program(o->helper, (char *const *)argv, (int[]){0, 1, 2},
			    false, &e);
	if (pid < 0) {
		log_error("boot: %s", e.msg);
		return -1;
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFSIGNALED(status)) {
		log_error("boot: %s killed by signal %d", o->helper,
			  WTERMSIG(status));
		return -1;
	}
	return WEXITSTATUS(status);
}

static void pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

void bootrun_reexec(const struct bootrun_opts *o)
{
	sigset_t none;

	/* The new image blocks what it waits for itself; until then it must
	 * stay killable. */
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	log_info("boot: a new cell-agent is installed at %s; re-executing "
		 "(running pods stay up and are re-adopted)",
		 o->self);
	execv(o->self, o->argv);
	log_error("boot: re-exec %s: %s; going on with the running agent",
		  o->self, strerror(errno));
}

int bootrun(const struct bootrun_opts *o)
{
	const char *env = getenv("CELL_BOOT_RETRY_MS");
	long step = env && *env ? strtol(env, NULL, 10) : 1000;
	long wait = step > 0 ? step : 1000;
	bool dir = !strcmp(o->source, "dir");
	/* auto with the files present needs the network only for a
	 * version the files ask for. */
	bool local = dir || !strcmp(o->source, "auto");
	int attempt = 0, rc;

	for (;; attempt++) {
		if (dir && !complete(o->boot_dir)) {
			rc = EXIT_RETRY;
			log_info(
			    "boot: waiting for ca.crt, server.crt and "
			    "server.key in %s (cell-cloudinit writes them)",
			    o->boot_dir);
		} else if (local && complete(o->boot_dir) &&
			   !wants_version(o->boot_dir)) {
			return 0;
		} else {
			rc = run_helper(o, dir);
		}
		if (rc == EXIT_OK)
			return 0;
		if (rc == EXIT_USAGE) {
			log_error("boot: %s refused its arguments", o->helper);
			return -1;
		}
		if (rc == EXIT_UPDATED) {
			bootrun_reexec(o);
			return 0;
		}
		/* An agent restarted on a booted cell has its files: a source
		 * that is gone or down (the parameter deleted, IMDS slow)
		 * must not keep it from serving. */
		if (!dir && complete(o->boot_dir)) {
			log_warn(
			    "boot: %s (%s) failed; using the files already "
			    "in %s",
			    o->helper, o->source, o->boot_dir);
			return 0;
		}
		log_info("boot: attempt %d (%s) not done (%s exit %d); next in "
			 "%.1f s",
			 attempt + 1, o->source, o->helper, rc, wait / 1000.0);
		pause_ms(wait);
		wait = wait * 2 > 30000 ? 30000 : wait * 2;
	}
}

bool bootrun_update_ready(const struct bootrun_opts *o)
{
	int rc;

	if (!wants_version(o->boot_dir)) {
		log_info("SIGHUP: the boot files ask for no version");
		return false;
	}
	rc = run_helper(o, true);
	if (rc != EXIT_UPDATED)
		log_info("SIGHUP: no new agent installed (%s exit %d)",
			 o->helper, rc);
	return rc == EXIT_UPDATED;
}
