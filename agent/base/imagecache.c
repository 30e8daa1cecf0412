// SPDX-License-Identifier: Apache-2.0
/* The shared image cache's mount (see imagecache.h). Itzo's launcher ran
 * `mount -t nfs <opts> <endpoint> <dir>` once, before the agent, and a
 * failure there stopped the cell's boot add-ons; here the mount is the
 * agent's background work: the API is up first, a failed mount is a
 * warning and a retry with back-off, and every pull meanwhile goes to the
 * registry. The share is mounted read-only whatever its options say. */
#include "imagecache.h"

#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "procspawn.h"
#include "util.h"

#define MOUNT_TIMEOUT_S 120
#define RETRY_MAX_MS (5 * 60 * 1000)

static _Atomic(const char *) ready_dir;

const char *imagecache_dir(void)
{
	return atomic_load(&ready_dir);
}

char **imagecache_mount_argv(const struct imagecache_opts *o)
{
	const char *opts = o->mount_opts ? o->mount_opts : "-o ro";
	size_t cap = 8 + strlen(opts), n = 0;
	char **v = xcalloc(cap, sizeof(char *));
	const char *p = opts;

	v[n++] = xstrdup(o->mount_cmd ? o->mount_cmd : "/bin/mount");
	v[n++] = xstrdup("-t");
	v[n++] = xstrdup("nfs");
	while (*p) {
		const char *q;

		while (isspace((unsigned char)*p))
			p++;
		for (q = p; *q && !isspace((unsigned char)*q); q++)
			;
		if (q > p)
			v[n++] = xstrndup(p, (size_t)(q - p));
		p = q;
	}
	/* The last -o wins in mount(8): a cell never writes the share. */
	v[n++] = xstrdup("-o");
	v[n++] = xstrdup("ro");
	v[n++] = xstrdup(o->endpoint);
	v[n++] = xstrdup(o->mount_dir ? o->mount_dir : "/nfs");
	v[n] = NULL;
	return v;
}

/* Is dir a mount point? By /proc/self/mountinfo: a bind mount (the tests'
 * stand-in for NFS) has its parent's device number. */
static bool mounted(const char *dir)
{
	cleanup_free char *abs = realpath(dir, NULL);
	cleanup_free char *parent = NULL;
	char **v;
	bool found = false;

	if (!abs)
		return false;
	parent = xstrdup(abs);
	*strrchr(parent, '/') = '\0';
	v = fs_mounts_beneath(parent);
	for (size_t i = 0; v && v[i] && !found; i++)
		found = !strcmp(v[i], abs);
	strv_free(v);
	return found;
}

struct mounter {
	struct imagecache_opts o;
	char *dir;
};

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0)
		;
}

/* One try; true once the share is mounted. */
static bool try_mount(struct mounter *m, int attempt)
{
	char **argv = imagecache_mount_argv(&m->o);
	struct buf out;
	struct cerr e = {0};
	int rc;

	buf_init(&out, 4096);
	if (fs_mkdir_p(m->dir, 0755, &e) < 0)
		rc = -1;
	else
		rc = spawn_run(argv, &out, MOUNT_TIMEOUT_S, &e);
	if (rc == 0 && mounted(m->dir)) {
		log_info("image cache: %s mounted read-only on %s",
			 m->o.endpoint, m->dir);
	} else {
		char *msg = out.len ? xstrndup(out.data, out.len) : NULL;

		for (char *c = msg; c && *c; c++)
			if (*c == '\n')
				*c = ' ';
		log_warn("image cache: mount %s on %s failed (try %d: %s); "
			 "pulls go to the registry meanwhile",
			 m->o.endpoint, m->dir, attempt,
			 e.code ? e.msg
			 : msg	? msg
				: (rc == 0 ? "not a mount point afterwards"
					   : "exit status"));
		free(msg);
		rc = -1;
	}
	buf_free(&out);
	strv_free(argv);
	return rc == 0;
}

/* The mounter's own copies; its dir is the caller's to keep or free. */
static void mounter_free(struct mounter *m)
{
	free((char *)m->o.endpoint);
	free((char *)m->o.mount_opts);
	free((char *)m->o.mount_cmd);
	free(m);
}

static void *mount_main(void *arg)
{
	struct mounter *m = arg;
	int delay = m->o.retry_ms > 0 ? m->o.retry_ms : 1000;

	for (int attempt = 1;; attempt++) {
		/* An agent restarted (or upgraded) finds it mounted. */
		if (mounted(m->dir) || try_mount(m, attempt))
			break;
		sleep_ms(delay);
		delay = delay > RETRY_MAX_MS / 2 ? RETRY_MAX_MS : 2 * delay;
	}
	/* The directory stays for the agent's life (ready_dir); the rest
	 * goes. */
	atomic_store(&ready_dir, m->dir);
	mounter_free(m);
	return NULL;
}

void imagecache_start(const struct imagecache_opts *o)
{
	struct mounter *m;
	pthread_t th;

	if (o->dir && *o->dir) {
		atomic_store(&ready_dir, (const char *)xstrdup(o->dir));
		if (o->endpoint && *o->endpoint)
			log_warn("image cache: --shared-image-cache %s wins "
				 "over imageCacheEndpoint %s",
				 o->dir, o->endpoint);
		return;
	}
	if (!o->endpoint || !*o->endpoint)
		return;
	m = xcalloc(1, sizeof(*m));
	m->o = *o;
	m->o.endpoint = xstrdup(o->endpoint);
	m->o.mount_opts = o->mount_opts ? xstrdup(o->mount_opts) : NULL;
	m->o.mount_cmd = o->mount_cmd ? xstrdup(o->mount_cmd) : NULL;
	m->dir = xstrdup(o->mount_dir && *o->mount_dir ? o->mount_dir : "/nfs");
	if (m->o.retry_ms <= 0) { /* a test seam */
		const char *v = getenv("CELL_AGENT_IMAGE_CACHE_RETRY_MS");
		int64_t ms;

		if (v && parse_int64(v, 1, RETRY_MAX_MS, &ms, NULL) == 0)
			m->o.retry_ms = (int)ms;
	}
	if (pthread_create(&th, NULL, mount_main, m) != 0) {
		log_warn("image cache: cannot start the mount thread; pulls "
			 "go to the registry");
		free(m->dir);
		mounter_free(m);
		return;
	}
	pthread_detach(th);
}
