#include "path.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

#define MAX_SYMLINKS 40
#define MAX_DEPTH 512

static bool force_fallback;
static int have_openat2 = -1; /* -1 unknown, 0 no, 1 yes */

void path_force_fallback(bool on)
{
	force_fallback = on;
}

int path_clean(const char *in, char *out, size_t outsz, struct cerr *e)
{
	size_t o = 0;
	const char *p = in;

	while (*p) {
		const char *s;
		size_t n;

		while (*p == '/')
			p++;
		s = p;
		while (*p && *p != '/')
			p++;
		n = (size_t)(p - s);
		if (n == 0 || (n == 1 && s[0] == '.'))
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.')
			return cerr_set(e, EINVAL,
					"path '%s' has a '..' component", in);
		if (o + n + 2 > outsz)
			return cerr_set(e, ENAMETOOLONG,
					"path '%.64s…' is too long", in);
		if (o)
			out[o++] = '/';
		memcpy(out + o, s, n);
		o += n;
	}
	if (outsz == 0)
		return cerr_set(e, ENAMETOOLONG, "no room for path");
	out[o] = '\0';
	return 0;
}

static int sys_openat2(int dirfd, const char *path, int flags, mode_t mode)
{
	struct open_how how = {
	    .flags = (unsigned)flags | O_CLOEXEC,
	    .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
	};
	int fd, tries = 0;

	do
		fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	while (fd < 0 && errno == EAGAIN && ++tries < 16);
	return fd;
}

/* Prepend link target t to the remaining path held in rest. */
static int splice_link(char *rest, size_t restsz, const char *t, size_t tlen)
{
	size_t rl = strlen(rest);

	if (tlen + 1 + rl + 1 > restsz) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memmove(rest + tlen + 1, rest, rl + 1);
	memcpy(rest, t, tlen);
	rest[tlen] = rl ? '/' : '\0';
	return 0;
}

/* The fallback: walk component by component, never following a symlink
 * without checking where it goes. */
static int walk_beneath(int rootfd, const char *rel, int flags, mode_t mode)
{
	int stack[MAX_DEPTH], depth = 0, links = 0, ret = -1;
	char rest[PATH_MAX_INPUT * 2];

	if (strlen(rel) >= sizeof(rest)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(rest, rel, strlen(rel) + 1);
	stack[0] = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
	if (stack[0] < 0)
		return -1;
	for (;;) {
		char name[256];
		char *s = rest, *slash;
		size_t n;
		bool last;
		struct stat st;
		int fd, top = stack[depth];

		while (*s == '/')
			s++;
		if (s != rest)
			memmove(rest, s, strlen(s) + 1);
		if (!rest[0]) { /* the path named the directory itself */
			ret = openat(top, ".", flags | O_CLOEXEC, mode);
			break;
		}
		slash = strchr(rest, '/');
		n = slash ? (size_t)(slash - rest) : strlen(rest);
		if (n >= sizeof(name)) {
			errno = ENAMETOOLONG;
			break;
		}
		memcpy(name, rest, n);
		name[n] = '\0';
		memmove(rest, rest + n, strlen(rest + n) + 1);
		last = rest[strspn(rest, "/")] == '\0';
		if (!strcmp(name, "."))
			continue;
		if (!strcmp(name, "..")) {
			if (depth == 0) {
				errno = EXDEV;
				break;
			}
			close(stack[depth--]);
			continue;
		}
		if (last && (flags & O_NOFOLLOW)) {
			ret = openat(top, name, flags | O_CLOEXEC, mode);
			break;
		}
		if (fstatat(top, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (last && errno == ENOENT && (flags & O_CREAT))
				ret = openat(top, name,
					     flags | O_CLOEXEC | O_NOFOLLOW,
					     mode);
			break;
		}
		if (S_ISLNK(st.st_mode)) {
			char t[PATH_MAX_INPUT];
			ssize_t tl = readlinkat(top, name, t, sizeof(t) - 1);

			if (tl < 0)
				break;
			if (++links > MAX_SYMLINKS) {
				errno = ELOOP;
				break;
			}
			if (tl == 0 || t[0] == '/') {
				errno = EXDEV;
				break;
			}
			if (splice_link(rest, sizeof(rest), t, (size_t)tl) < 0)
				break;
			continue;
		}
		if (last) {
			ret = openat(top, name, flags | O_CLOEXEC | O_NOFOLLOW,
				     mode);
			break;
		}
		if (!S_ISDIR(st.st_mode)) {
			errno = ENOTDIR;
			break;
		}
		if (depth + 1 >= MAX_DEPTH) {
			errno = ELOOP;
			break;
		}
		fd = openat(top, name,
			    O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			break;
		stack[++depth] = fd;
	}
	{
		int saved = errno;
		while (depth >= 0)
			close(stack[depth--]);
		errno = saved;
	}
	return ret;
}

static int open_beneath_raw(int rootfd, const char *rel, int flags, mode_t mode)
{
	if (!force_fallback && have_openat2 != 0) {
		int fd = sys_openat2(rootfd, *rel ? rel : ".", flags, mode);
		if (fd >= 0 || errno != ENOSYS) {
			have_openat2 = 1;
			return fd;
		}
		have_openat2 = 0;
	}
	return walk_beneath(rootfd, rel, flags, mode);
}

int path_open_beneath(int rootfd, const char *rel, int flags, mode_t mode,
		      struct cerr *e)
{
	int fd = open_beneath_raw(rootfd, rel, flags, mode);

	if (fd < 0) {
		if (errno == EXDEV || errno == ELOOP)
			return cerr_set(e, errno,
					"'%s' resolves outside the root", rel);
		return cerr_sys(e, "open '%s'", rel);
	}
	return fd;
}

/* Slow path of path_open_parent: resolve each prefix of dir in turn and
 * create the ones that are missing, inside the directory already resolved. */
static int mkdirs_beneath(int rootfd, const char *dir, struct cerr *e)
{
	char prefix[PATH_MAX_INPUT];
	size_t len = strlen(dir), start = 0;
	int prev;

	if (len >= sizeof(prefix))
		return cerr_set(e, ENAMETOOLONG, "path '%.64s…' is too long",
				dir);
	prev = fcntl(rootfd, F_DUPFD_CLOEXEC, 3);
	if (prev < 0)
		return cerr_sys(e, "dup");
	for (size_t i = 0; i <= len; i++) {
		int fd;

		if (dir[i] != '/' && dir[i] != '\0')
			continue;
		memcpy(prefix, dir, i);
		prefix[i] = '\0';
		fd = open_beneath_raw(rootfd, prefix, O_PATH | O_DIRECTORY, 0);
		if (fd < 0 && errno == ENOENT) {
			if (mkdirat(prev, prefix + start, 0755) < 0 &&
			    errno != EEXIST) {
				cerr_sys(e, "mkdir '%s'", prefix);
				close(prev);
				return -1;
			}
			fd = open_beneath_raw(rootfd, prefix,
					      O_PATH | O_DIRECTORY, 0);
		}
		if (fd < 0) {
			int saved = errno;
			close(prev);
			errno = saved;
			if (errno == EXDEV || errno == ELOOP)
				return cerr_set(
				    e, errno, "'%s' resolves outside the root",
				    dir);
			return cerr_sys(e, "open '%s'", prefix);
		}
		close(prev);
		prev = fd;
		start = i + 1;
	}
	return prev;
}

int path_open_parent(int rootfd, const char *rel, bool mkdirs,
		     const char **base, struct cerr *e)
{
	const char *slash = strrchr(rel, '/');
	char dir[PATH_MAX_INPUT];
	size_t n;
	int fd;

	if (!*rel)
		return cerr_set(e, EINVAL, "empty path has no parent");
	*base = slash ? slash + 1 : rel;
	n = slash ? (size_t)(slash - rel) : 0;
	if (n >= sizeof(dir))
		return cerr_set(e, ENAMETOOLONG, "path '%.64s…' is too long",
				rel);
	memcpy(dir, rel, n);
	dir[n] = '\0';
	fd = open_beneath_raw(rootfd, dir, O_PATH | O_DIRECTORY, 0);
	if (fd >= 0)
		return fd;
	if (errno == ENOENT && mkdirs)
		return mkdirs_beneath(rootfd, dir, e);
	if (errno == EXDEV || errno == ELOOP)
		return cerr_set(e, errno, "'%s' resolves outside the root",
				rel);
	return cerr_sys(e, "open parent of '%s'", rel);
}
