/* Loading and unloading the pull module (see pullmod.h). */
#include "pullmod.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

#define NS_PER_MS 1000000ull

/* Threads that were there before the module was (the agent's own, at load
 * and once the API is up); one not among them may run module code. */
#define KNOWN_MAX 256

static struct {
	pthread_mutex_t mu;
	void *handle;
	const struct pullmod_ops *ops;
	int refs;
	uint64_t last_put_ns;
	pid_t known[KNOWN_MAX];
	size_t n_known;
} mod = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool is_known(pid_t tid)
{
	for (size_t i = 0; i < mod.n_known; i++)
		if (mod.known[i] == tid)
			return true;
	return false;
}

/* Visit every thread of this process; stops early when fn says false. */
static bool each_thread(bool (*fn)(pid_t tid))
{
	cleanup_dir DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int64_t tid;

	if (!d)
		return false;
	while ((de = readdir(d)))
		if (parse_int64(de->d_name, 1, INT32_MAX, &tid, NULL) == 0 &&
		    !fn((pid_t)tid))
			return false;
	return true;
}

static bool remember(pid_t tid)
{
	if (!is_known(tid) && mod.n_known < KNOWN_MAX)
		mod.known[mod.n_known++] = tid;
	return true;
}

void pullmod_note_threads(void)
{
	pthread_mutex_lock(&mod.mu);
	each_thread(remember);
	pthread_mutex_unlock(&mod.mu);
}

static char *module_path(void)
{
	const char *env = getenv("CELL_AGENT_PULLMOD");
	char exe[PATH_MAX];
	ssize_t n;

	if (env && *env)
		return xstrdup(env);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return xstrdup("/usr/local/lib/cell/pullmod.so");
	exe[n] = '\0';
	return xasprintf("%s/../lib/cell/pullmod.so", dirname(exe));
}

static uint64_t linger_ns(void)
{
	const char *env = getenv("CELL_AGENT_PULLMOD_LINGER_MS");
	int64_t ms = PULLMOD_LINGER_MS;

	if (env && parse_int64(env, 0, INT32_MAX, &ms, NULL) < 0)
		ms = PULLMOD_LINGER_MS;
	return (uint64_t)ms * NS_PER_MS;
}

static int load(struct cerr *e)
{
	cleanup_free char *path = module_path();
	pullmod_init_fn init;
	uint64_t t0 = now_ns();
	void *h;

	each_thread(remember);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return cerr_set(e, ENOENT, "load the pull module: %s",
				dlerror());
	*(void **)&init = dlsym(h, PULLMOD_ENTRY);
	mod.ops =
	    init ? init(log_get_prog(), log_get_level(), log_get_fd()) : NULL;
	if (!mod.ops || mod.ops->abi != PULLMOD_ABI) {
		dlclose(h);
		mod.ops = NULL;
		return cerr_set(e, ENOEXEC,
				"%s is not a pull module of this agent", path);
	}
	mod.handle = h;
	log_debug("loaded %s in %.1f ms", path,
		  (double)(now_ns() - t0) / NS_PER_MS);
	return 0;
}

const struct pullmod_ops *pullmod_get(struct cerr *e)
{
	const struct pullmod_ops *ops = NULL;

	pthread_mutex_lock(&mod.mu);
	if (mod.handle || load(e) == 0) {
		mod.refs++;
		ops = mod.ops;
	}
	pthread_mutex_unlock(&mod.mu);
	return ops;
}

void pullmod_put(void)
{
	pthread_mutex_lock(&mod.mu);
	if (mod.refs > 0 && --mod.refs == 0)
		mod.last_put_ns = now_ns();
	pthread_mutex_unlock(&mod.mu);
}

uint64_t pullmod_next_due(void)
{
	uint64_t due = 0;

	pthread_mutex_lock(&mod.mu);
	if (mod.handle && mod.refs == 0)
		due = mod.last_put_ns + linger_ns();
	pthread_mutex_unlock(&mod.mu);
	return due;
}

/* A thread started while the module was loaded may still run in it (a
 * resolver thread that libcurl detached from an abandoned lookup): then
 * the unload waits, and is tried again at the next tick. */
static bool safe_to_unload(void)
{
	return each_thread(is_known);
}

void pullmod_tick(uint64_t now)
{
	pthread_mutex_lock(&mod.mu);
	if (mod.handle && mod.refs == 0 &&
	    now >= mod.last_put_ns + linger_ns()) {
		if (safe_to_unload()) {
			mod.ops->fini();
			dlclose(mod.handle);
			mod.handle = NULL;
			mod.ops = NULL;
			/* Give back what the pull's threads left in their
			 * malloc arenas (buffers, libarchive's state). */
			malloc_trim(0);
			log_debug("unloaded the pull module");
		} else {
			mod.last_put_ns = now;
		}
	}
	pthread_mutex_unlock(&mod.mu);
}

int pullmod_loaded(void)
{
	int loaded;

	pthread_mutex_lock(&mod.mu);
	loaded = mod.handle != NULL;
	pthread_mutex_unlock(&mod.mu);
	return loaded;
}
