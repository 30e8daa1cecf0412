// SPDX-License-Identifier: Apache-2.0
/* The agent's seccomp policy: which profile a unit gets, and a cache of
 * compiled filters so that each (profile, capability set) is built once. */
#include "seccomp-policy.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "path.h"
#include "seccomp-profile.h"
#include "util.h"

#define CACHE_MAX 64

struct cached {
	char *key; /* "<profile>\n<caps,…>" */
	void *bpf;
	size_t len;
};

static struct {
	pthread_mutex_t lock;
	bool ready, unconfined;
	char *localhost_dir;
	struct sc_profile def;
	struct cached cache[CACHE_MAX];
	size_t n, next; /* next: the slot to reuse when full */
} P = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A filter is compiled in libseccomp's own database, built and freed
 * whole: about 0.8 MiB a time, left free in the middle of the heap, which
 * the idle agent then carried until its first quiet spell (issue 28: most
 * of what its idle RSS grew). It goes back at once. */
static int compile(const struct sc_profile *p, char *const *caps, void **bpf,
		   size_t *len, struct cerr *e)
{
	int rc = sc_compile(p, caps, bpf, len, e);

#ifdef __GLIBC__ /* musl's allocator gives back on its own */
	malloc_trim(0);
#endif
	return rc;
}

/* A profile from an open file: regular files only (a FIFO or a device
 * would block a read of the whole), at most SC_PROFILE_MAX. */
static int read_profile_fd(int fd, struct sc_profile *out, struct cerr *e)
{
	struct buf b;
	struct stat st;
	int rc;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return cerr_set(e, EINVAL, "not a regular file");
	buf_init(&b, SC_PROFILE_MAX);
	if (fs_read_fd(fd, &b, e) < 0) {
		buf_free(&b);
		return -1;
	}
	rc = sc_profile_parse(b.data ? b.data : "", b.len, out, e);
	buf_free(&b);
	return rc;
}

static int read_profile(const char *path, struct sc_profile *out,
			struct cerr *e)
{
	cleanup_close int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return cerr_sys(e, "open");
	return read_profile_fd(fd, out, e);
}

int seccomp_policy_init(const struct seccomp_policy_opts *o, struct cerr *e)
{
	static char *const no_caps[] = {NULL};
	void *bpf;
	size_t len;

	P.unconfined = o->unconfined;
	P.localhost_dir = o->localhost_dir ? xstrdup(o->localhost_dir) : NULL;
	if (o->profile_file) {
		if (read_profile(o->profile_file, &P.def, e) < 0)
			return cerr_prefix(e, "seccomp profile %s",
					   o->profile_file);
	} else if (sc_profile_parse(sc_default_profile,
				    (size_t)sc_default_profile_size, &P.def,
				    e) < 0)
		return cerr_prefix(e, "built-in seccomp profile");
	/* Built once here so that a profile libseccomp refuses stops the
	 * agent now, not the first unit. */
	if (compile(&P.def, no_caps, &bpf, &len, e) < 0)
		return cerr_prefix(e, "seccomp profile %s",
				   o->profile_file ? o->profile_file
						   : "(built-in)");
	free(bpf);
	P.ready = true;
	return 0;
}

void seccomp_policy_free(void)
{
	sc_profile_free(&P.def);
	for (size_t i = 0; i < P.n; i++) {
		free(P.cache[i].key);
		free(P.cache[i].bpf);
	}
	free(P.localhost_dir);
	P.n = P.next = 0;
	P.localhost_dir = NULL;
	P.ready = false;
}

static char *cache_key(const char *profile, char *const *caps)
{
	struct buf b;
	char *s;
	size_t n;

	buf_init(&b, 0);
	buf_append(&b, profile, strlen(profile), NULL);
	for (size_t i = 0; caps && caps[i]; i++) {
		buf_append(&b, "\n", 1, NULL);
		buf_append(&b, caps[i], strlen(caps[i]), NULL);
	}
	buf_append(&b, "", 1, NULL);
	s = buf_steal(&b, &n);
	return s;
}

/* Compile (or find) the filter of profile p, named name, for caps. */
static int build(const char *name, const struct sc_profile *p,
		 char *const *caps, void **bpf, size_t *len, struct cerr *e)
{
	cleanup_free char *key = cache_key(name, caps);
	struct cached *c;
	int rc = 0;

	pthread_mutex_lock(&P.lock);
	for (size_t i = 0; i < P.n; i++)
		if (!strcmp(P.cache[i].key, key)) {
			*len = P.cache[i].len;
			*bpf = xmemdup(P.cache[i].bpf, *len);
			goto out;
		}
	if (!p) { /* a Localhost profile not yet read */
		rc = 1;
		goto out;
	}
	if (compile(p, caps, bpf, len, e) < 0) {
		rc = -1;
		goto out;
	}
	c = &P.cache[P.n < CACHE_MAX ? P.n++ : P.next++ % CACHE_MAX];
	free(c->key);
	free(c->bpf);
	c->key = steal_ptr(&key);
	c->bpf = xmemdup(*bpf, *len);
	c->len = *len;
out:
	pthread_mutex_unlock(&P.lock);
	return rc;
}

/* A Localhost profile: read when a unit starts (as the kubelet does), its
 * filter kept while the file stays the same (name, inode, size, mtime). */
static int localhost(const char *file, char *const *caps, void **bpf,
		     size_t *len, struct cerr *e)
{
	cleanup_close int dirfd = -1, fd = -1;
	cleanup_free char *key = NULL;
	struct sc_profile p;
	char rel[PATH_MAX_INPUT];
	struct stat st;
	int rc;

	if (!P.localhost_dir)
		return cerr_set(e, EINVAL,
				"seccompProfile Localhost: the agent has no "
				"--seccomp-profile-dir");
	if (path_clean(file, rel, sizeof(rel), e) < 0 || !*rel)
		return cerr_prefix(e, "seccompProfile %s", file);
	dirfd = open(P.localhost_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return cerr_sys(e, "open %s", P.localhost_dir);
	fd = path_open_beneath(dirfd, rel, O_RDONLY | O_NONBLOCK | O_CLOEXEC, 0,
			       e);
	if (fd < 0 || fstat(fd, &st) < 0)
		return cerr_prefix(e, "seccomp profile %s/%s", P.localhost_dir,
				   rel);
	key = xasprintf("localhost/%s@%llu/%lld/%lld.%09ld", rel,
			(unsigned long long)st.st_ino, (long long)st.st_size,
			(long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	rc = build(key, NULL, caps, bpf, len, e);
	if (rc <= 0)
		return rc;
	if (read_profile_fd(fd, &p, e) < 0)
		return cerr_prefix(e, "seccomp profile %s/%s", P.localhost_dir,
				   rel);
	rc = build(key, &p, caps, bpf, len, e);
	sc_profile_free(&p);
	return rc < 0 ? cerr_prefix(e, "seccomp profile %s", file) : 0;
}

int seccomp_policy_for(const struct seccomp_ref *unit,
		       const struct seccomp_ref *pod, char *const *caps,
		       void **bpf, size_t *len, struct cerr *e)
{
	const struct seccomp_ref *r = unit && unit->type ? unit : pod;

	*bpf = NULL;
	*len = 0;
	/* Fail closed: a policy never loaded (an agent start that skipped
	 * seccomp_policy_init, or one that failed) must not read as "no
	 * filter". */
	if (!P.ready)
		return cerr_set(e, EPERM,
				"seccomp: the agent's policy is not loaded; "
				"no unit starts without its filter");
	if (!r || !r->type)
		return P.unconfined
			   ? 0
			   : build("default", &P.def, caps, bpf, len, e);
	if (!strcmp(r->type, "Unconfined"))
		return 0;
	if (!strcmp(r->type, "Localhost"))
		return localhost(r->localhost, caps, bpf, len, e);
	/* RuntimeDefault: the agent's profile, even under --seccomp
	 * unconfined (that flag only sets what units get by default). */
	return build("default", &P.def, caps, bpf, len, e);
}
