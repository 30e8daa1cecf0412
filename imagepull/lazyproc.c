// SPDX-License-Identifier: Apache-2.0
/* A lazy layer's serving process (lazy.h "lazyproc"): started by a pull,
 * found and adopted by the next, stopped by the gc.
 *
 * One process per layer, not per image: a layer two images share is
 * served (and fetched) once, and each server is the --lazy-layer mode of
 * cell-pull, so a server that fails fails alone. It lives in a session of
 * its own and outlives the pull that started it (an agent killed -9
 * included): its lock in the layer's directory says it is there, its
 * mount point under the cache is where every overlay finds it. It ends
 * when its FUSE mount does: the gc detaches the mount once no overlay
 * names it, and the kernel ends the connection when the last user (an
 * overlay's private copy of the mount) is gone. */
#include "lazy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "procspawn.h"
#include "util.h"

/* How long a pull waits for a server's mount and prefetch (a prefetch
 * is one request of up to 512 MiB). */
#define READY_WAIT_S 600
/* How long the gc waits for a server to end once its mount is gone. */
#define GC_WAIT_MS 5000
#define LOG_TAIL (16u << 10)

static void layer_name(const char *digest, char out[DIGEST_STR_MAX])
{
	snprintf(out, DIGEST_STR_MAX, "%s", digest);
	out[strcspn(out, ":")] = '-';
}

char *lazyproc_mount_name(const char *digest)
{
	char name[DIGEST_STR_MAX];

	layer_name(digest, name);
	return xasprintf("lazy/%s/mnt", name);
}

static void sleep_ms(long ms)
{
	nanosleep(&(struct timespec){.tv_sec = ms / 1000,
				     .tv_nsec = (ms % 1000) * 1000000},
		  NULL);
}

/* lazy/<name>/<file>, opened (created) for a lock. */
static int lock_file(const struct cache *c, const char *name, const char *file,
		     struct cerr *e)
{
	cleanup_free char *rel = xasprintf("lazy/%s/%s", name, file);
	int fd =
	    openat(c->fd, rel, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0)
		return cerr_sys(e, "open %s/%s", c->root, rel);
	return fd;
}

/* Does a process hold lazy/<name>/<file> locked? */
static bool held(const struct cache *c, const char *name, const char *file)
{
	struct cerr e = {0};
	int fd = lock_file(c, name, file, &e);
	bool h;

	if (fd < 0)
		return false;
	h = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return h;
}

/* Does a server hold the layer's lock? */
static bool served(const struct cache *c, const char *name)
{
	return held(c, name, "lock");
}

static bool here(const struct cache *c, const char *name, const char *file)
{
	cleanup_free char *rel = xasprintf("lazy/%s/%s", name, file);

	return faccessat(c->fd, rel, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

static void drop(const struct cache *c, const char *name, const char *file)
{
	cleanup_free char *rel = xasprintf("lazy/%s/%s", name, file);

	unlinkat(c->fd, rel, 0);
}

static void detach(const struct cache *c, const char *name)
{
	cleanup_free char *mnt = cache_path(c, "lazy/%s/mnt", name);

	if (umount2(mnt, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL &&
	    errno != ENOENT)
		log_warn("unmount %s: %m", mnt);
}

/* ---- the server's side ---- */

int lazyproc_claim(const struct cache *c, const char *digest, struct cerr *e)
{
	char name[DIGEST_STR_MAX], pid[24];
	cleanup_free char *mnt = NULL, *pidf = NULL;
	int fd, tries = 0;

	layer_name(digest, name);
	mnt = cache_path(c, "lazy/%s/mnt", name);
	if (fs_mkdir_p(mnt, 0755, e) < 0 ||
	    (fd = lock_file(c, name, "lock", e)) < 0)
		return -1;
	/* A probe (served()) holds it shared for an instant: try a while. */
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK || ++tries == 50) {
			close(fd);
			return cerr_set(e, EBUSY,
					"lazy layer %s is served already",
					digest);
		}
		sleep_ms(10);
	}
	drop(c, name, "ready");
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	pidf = cache_path(c, "lazy/%s/pid", name);
	if (fs_write_atomic(pidf, pid, strlen(pid), 0600, e) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void lazyproc_ready(const struct cache *c, const char *digest)
{
	char name[DIGEST_STR_MAX], pid[24];
	cleanup_free char *p = NULL;
	struct cerr e = {0};

	layer_name(digest, name);
	p = cache_path(c, "lazy/%s/ready", name);
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	if (fs_write_atomic(p, pid, strlen(pid), 0600, &e) < 0)
		log_warn("%s", e.msg);
}

/* The lock itself is not let go: it goes with the process, which ends
 * next (the kernel closes a dying process's files after its memory is
 * gone), so a gc that finds the lock free finds no server left either. */
void lazyproc_leave(const struct cache *c, const char *digest, int lock)
{
	char name[DIGEST_STR_MAX];

	if (lock < 0)
		return;
	layer_name(digest, name);
	drop(c, name, "ready");
	drop(c, name, "pid");
}

/* ---- the puller's side ---- */

static void add(const char **v, size_t *n, const char *a, const char *b)
{
	v[(*n)++] = a;
	if (b)
		v[(*n)++] = b;
}

/* Credentials on a pipe (the server's stdin), as the agent passes them. */
static int creds_pipe(const struct lazyproc_spec *s, struct cerr *e)
{
	json_t *j = json_pack("{s:s, s:s}", "username", s->username, "password",
			      s->password ? s->password : "");
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int p[2] = {-1, -1};
	size_t len = text ? strlen(text) : 0;

	json_decref(j);
	if (!text)
		return cerr_set(e, EINVAL, "credentials are not valid UTF-8");
	if (len > 60 * 1024) /* a pipe holds 64 KiB: the write cannot block */
		cerr_set(e, E2BIG, "credentials are over 60 KiB");
	else if (pipe2(p, O_CLOEXEC) < 0)
		cerr_sys(e, "pipe");
	else if (write(p[1], text, len) != (ssize_t)len) {
		cerr_sys(e, "write credentials");
		close(p[0]);
		p[0] = -1;
	}
	if (p[1] >= 0)
		close(p[1]);
	explicit_bzero(text, len);
	free(text);
	return p[0];
}

static int spawn_server(const struct cache *c, const char *digest,
			const struct lazyproc_spec *s, struct lazyproc *p,
			struct cerr *e)
{
	cleanup_free char *mnt = cache_path(c, "lazy/%s/mnt", p->name);
	cleanup_free char *logp = xasprintf("lazy/%s/log", p->name);
	cleanup_free const char **argv = NULL;
	char retries[16];
	size_t n = 0, n_insecure = 0;
	cleanup_close int logfd = -1;
	int credfd = -1;
	pid_t pid;

	while (s->insecure && s->insecure[n_insecure])
		n_insecure++;
	argv = xcalloc(24 + 2 * n_insecure, sizeof(*argv));
	add(argv, &n, s->exe, NULL);
	add(argv, &n, "--image", s->image);
	add(argv, &n, "--workdir", c->root);
	add(argv, &n, "--mount", mnt);
	add(argv, &n, "--lazy-layer", digest);
	add(argv, &n, "--progress", "none");
	add(argv, &n, "-v", NULL);
	if (s->registry_url)
		add(argv, &n, "--registry-url", s->registry_url);
	if (s->ca_file)
		add(argv, &n, "--ca-file", s->ca_file);
	for (size_t i = 0; i < n_insecure; i++)
		add(argv, &n, "--insecure-registry", s->insecure[i]);
	if (s->retries > 0) {
		snprintf(retries, sizeof(retries), "%d", s->retries);
		add(argv, &n, "--retries", retries);
	}
	if (s->username) {
		if ((credfd = creds_pipe(s, e)) < 0)
			return -1;
		add(argv, &n, "--credentials-fd", "0");
	}
	logfd =
	    openat(c->fd, logp,
		   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (logfd < 0) {
		if (credfd >= 0)
			close(credfd);
		return cerr_sys(e, "open %s/%s", c->root, logp);
	}
	p->pidfd =
	    spawn_pidfd((char *const *)argv, NULL,
			(int[3]){credfd, logfd, logfd}, SPAWN_SETSID, &pid, e);
	if (credfd >= 0)
		close(credfd);
	if (p->pidfd < 0)
		return cerr_prefix(e, "start the server of lazy layer %s",
				   digest);
	log_info("lazy layer %s: server started (pid %d)", digest, (int)pid);
	return 0;
}

int lazyproc_start(const struct cache *c, const char *digest,
		   const struct lazyproc_spec *s, struct lazyproc *p,
		   struct cerr *e)
{
	cleanup_free char *dir = NULL;
	bool busy;

	memset(p, 0, sizeof(*p));
	p->start_lock = p->pidfd = -1;
	layer_name(digest, p->name);
	dir = cache_path(c, "lazy/%s", p->name);
	if (fs_mkdir_p(dir, 0700, e) < 0 ||
	    (p->start_lock = lock_file(c, p->name, "start", e)) < 0)
		return -1;
	/* Another pull starting this layer, or a server running: its
	 * server is ours too. Never a wait here: a pull holds the start
	 * locks of all its layers at once, and two images may list two
	 * layers in opposite orders. */
	busy = flock(p->start_lock, LOCK_EX | LOCK_NB) < 0;
	if (busy && errno != EWOULDBLOCK)
		return cerr_sys(e, "flock %s/start", dir);
	if (busy || served(c, p->name)) {
		lazyproc_release(p);
		p->adopted = true;
		log_info("lazy layer %s: adopting its server", digest);
		return 0;
	}
	/* A server that died may have left its mount (ENOTCONN) and its
	 * ready mark behind. */
	detach(c, p->name);
	drop(c, p->name, "ready");
	return spawn_server(c, digest, s, p, e);
}

/* The last line of the server's log: why it ended. */
static void log_tail(const struct cache *c, const char *name, char *out,
		     size_t n)
{
	cleanup_free char *p = cache_path(c, "lazy/%s/log", name);
	cleanup_close int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char buf[LOG_TAIL + 1];
	off_t size;
	ssize_t got;
	char *line;

	snprintf(out, n, "no log");
	if (fd < 0 || (size = lseek(fd, 0, SEEK_END)) < 0)
		return;
	got = pread(fd, buf, LOG_TAIL,
		    size > (off_t)LOG_TAIL ? size - (off_t)LOG_TAIL : 0);
	if (got <= 0)
		return;
	buf[got] = '\0';
	while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r'))
		buf[--got] = '\0';
	line = strrchr(buf, '\n');
	snprintf(out, n, "%s", line ? line + 1 : buf);
}

int lazyproc_wait(const struct cache *c, struct lazyproc *p, struct cerr *e)
{
	cleanup_free char *mnt = cache_path(c, "lazy/%s/mnt", p->name);
	uint64_t deadline = now_ns() + (uint64_t)READY_WAIT_S * 1000000000u;
	char why[512];

	for (long ms = 1;; ms = ms < 20 ? ms * 2 : 20) {
		if (here(c, p->name, "ready") && fs_is_mountpoint(mnt))
			break;
		if (p->pidfd >= 0 && spawn_wait(p->pidfd, true) != -2) {
			log_tail(c, p->name, why, sizeof(why));
			return cerr_set(e, EIO,
					"the server of lazy layer %s ended: %s",
					p->name, why);
		}
		if (p->adopted && !served(c, p->name) &&
		    !held(c, p->name, "start"))
			return cerr_set(e, EIO,
					"the server of lazy layer %s ended",
					p->name);
		/* A server whose mount a gc detached while a user (in another
		 * mount namespace) kept it: it ends with that user. */
		if (p->adopted && here(c, p->name, "ready") &&
		    served(c, p->name) && !fs_is_mountpoint(mnt))
			return cerr_set(e, EBUSY,
					"lazy layer %s: its server has no "
					"mount (detached by a gc while in "
					"use)",
					p->name);
		if (now_ns() > deadline)
			return cerr_set(e, ETIMEDOUT,
					"lazy layer %s: no mount after %d s",
					p->name, READY_WAIT_S);
		sleep_ms(ms);
	}
	lazyproc_release(p);
	return 0;
}

/* The server is not reaped: it outlives this process, and its parent
 * becomes init (or the nearest subreaper) when this process ends. */
void lazyproc_release(struct lazyproc *p)
{
	if (p->start_lock >= 0)
		close(p->start_lock);
	if (p->pidfd >= 0)
		close(p->pidfd);
	p->start_lock = p->pidfd = -1;
}

/* ---- the gc's side ---- */

/* Does an overlay mount (in this mount namespace) name mnt, the relative
 * name lazy/<name>/mnt or the absolute path, as a lower directory? */
static bool in_use(const struct cache *c, const char *name)
{
	cleanup_free char *rel = xasprintf("lazy/%s/mnt", name);
	cleanup_free char *abs = cache_path(c, "%s", rel);
	struct buf b;
	struct cerr e = {0};
	bool used = false;
	char *line, *save = NULL;

	buf_init(&b, 16u << 20);
	if (fs_read_file("/proc/self/mountinfo", &b, &e) < 0) {
		buf_free(&b);
		return true; /* cannot tell: keep it */
	}
	for (line = strtok_r(b.data, "\n", &save); line && !used;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sep = strstr(line, " - overlay ");
		char *low = sep ? strstr(sep, "lowerdir=") : NULL;

		if (!low)
			continue;
		low += strlen("lowerdir=");
		low[strcspn(low, ", ")] = '\0';
		fs_mountinfo_unescape(low);
		for (char *s2 = NULL, *d = strtok_r(low, ":", &s2); d && !used;
		     d = strtok_r(NULL, ":", &s2))
			used = !strcmp(d, rel) || !strcmp(d, abs);
	}
	buf_free(&b);
	return used;
}

/* The layer's mount detached and its server ended: true when nothing of
 * it runs any more. */
static bool stop(const struct cache *c, const char *name)
{
	cleanup_free char *mnt = cache_path(c, "lazy/%s/mnt", name);

	detach(c, name);
	for (int waited = 0; served(c, name) && waited < GC_WAIT_MS;
	     waited += 20)
		sleep_ms(20);
	if (served(c, name)) {
		log_warn("lazy layer %s: its server still has users (another "
			 "mount namespace?); kept for the next gc",
			 name);
		return false;
	}
	detach(c, name); /* a mount a dead server left */
	return !fs_is_mountpoint(mnt);
}

int lazyproc_gc(const struct cache *c, struct pull_gc_stats *st, struct cerr *e)
{
	cleanup_dir DIR *d = NULL;
	struct dirent *de;
	int fd;

	fd = openat(c->fd, "lazy", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : cerr_sys(e, "open lazy");
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return cerr_sys(e, "open lazy");
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || in_use(c, de->d_name) ||
		    !stop(c, de->d_name))
			continue;
		if (fs_rm_rf_at(dirfd(d), de->d_name, e) < 0)
			return cerr_prefix(e, "lazy/%s", de->d_name);
		st->removed_files++;
	}
	return 0;
}
