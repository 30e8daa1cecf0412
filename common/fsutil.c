// SPDX-License-Identifier: Apache-2.0
#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

int fs_mkdir_p(const char *path, mode_t mode, struct cerr *e)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);

	if (len == 0 || len >= sizeof(tmp))
		return cerr_set(e, ENAMETOOLONG, "bad directory path '%s'",
				path);
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, mode) < 0 && errno != EEXIST)
			return cerr_sys(e, "mkdir %s", tmp);
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkdir %s", tmp);
	return 0;
}

int fs_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int fs_pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (n == 0) {
			errno = ENOSPC;
			return -1;
		}
		p += n;
		off += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A temporary beside path, created exclusively: <path>.tmp.<host>.<pid>.
 * <random>. The directory may be shared by writers on several hosts (a
 * shared image cache on NFS), where pids repeat: the host names the
 * writer, the random part and O_EXCL make sure no two writers ever share
 * a temporary, whatever the hosts are called. */
static int open_temp(const char *path, mode_t mode, char **tmp, struct cerr *e)
{
	char host[33] = "";

	if (gethostname(host, sizeof(host) - 1) < 0 || !host[0])
		snprintf(host, sizeof(host), "host");
	for (char *c = host; *c; c++)
		if (*c == '/')
			*c = '-';
	for (int tries = 0; tries < 16; tries++) {
		int fd;

		*tmp = xasprintf("%s.tmp.%s.%d.%016llx", path, host,
				 (int)getpid(), (unsigned long long)rand_u64());
		fd = open(*tmp,
			  O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
			  mode);
		if (fd >= 0 || errno != EEXIST) {
			if (fd < 0)
				cerr_sys(e, "create %s", *tmp);
			return fd;
		}
		free(*tmp);
		*tmp = NULL;
	}
	return cerr_set(e, EEXIST, "no free temporary name beside %s", path);
}

static int write_rename(const char *path, const void *data, size_t len,
			mode_t mode, bool sync, struct cerr *e)
{
	cleanup_free char *tmp = NULL;
	cleanup_close int fd = -1;

	fd = open_temp(path, mode, &tmp, e);
	if (fd < 0)
		return -1;
	if (fchmod(fd, mode) < 0 || fs_write_all(fd, data, len) < 0 ||
	    (sync && fsync(fd) < 0)) {
		cerr_sys(e, "write %s", tmp);
		unlink(tmp);
		return -1;
	}
	if (rename(tmp, path) < 0) {
		cerr_sys(e, "rename %s", tmp);
		unlink(tmp);
		return -1;
	}
	return sync ? fs_sync_dir_of(path, e) : 0;
}

int fs_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
		    struct cerr *e)
{
	return write_rename(path, data, len, mode, true, e);
}

int fs_replace(const char *path, const void *data, size_t len, mode_t mode,
	       struct cerr *e)
{
	return write_rename(path, data, len, mode, false, e);
}

int fs_sync_dir_of(const char *path, struct cerr *e)
{
	const char *slash = strrchr(path, '/');
	cleanup_free char *dir =
	    !slash ? xstrdup(".")
		   : xstrndup(path, slash == path ? 1 : (size_t)(slash - path));
	cleanup_close int fd = -1;

	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		return cerr_sys(e, "sync directory %s", dir);
	return 0;
}

int fs_read_fd(int fd, struct buf *out, struct cerr *e)
{
	char chunk[65536];

	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return cerr_sys(e, "read");
		}
		if (n == 0)
			return 0;
		if (buf_append(out, chunk, (size_t)n, e) < 0)
			return -1;
	}
}

int fs_read_file(const char *path, struct buf *out, struct cerr *e)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return cerr_sys(e, "open %s", path);
	if (fs_read_fd(fd, out, e) < 0)
		return cerr_prefix(e, "%s", path);
	return 0;
}

const char *fs_type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "a regular file";
	case S_IFDIR:
		return "a directory";
	case S_IFIFO:
		return "a fifo";
	case S_IFCHR:
		return "a character device";
	case S_IFBLK:
		return "a block device";
	case S_IFSOCK:
		return "a socket";
	case S_IFLNK:
		return "a symlink";
	default:
		return "of an unknown type";
	}
}

int fs_read_regular(int pathfd, struct buf *out, struct cerr *e)
{
	char self[64];
	cleanup_close int fd = -1;
	struct stat st;

	if (fstat(pathfd, &st) < 0)
		return cerr_sys(e, "stat");
	if (!S_ISREG(st.st_mode))
		return cerr_set(e, EINVAL, "is %s, not a regular file",
				fs_type_name(st.st_mode));
	/* The O_PATH fd pins the inode checked above: reopening it through
	 * /proc cannot land on another file. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pathfd);
	fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return cerr_sys(e, "reopen");
	return fs_read_fd(fd, out, e);
}

int fs_read_regular_file(const char *path, struct buf *out, struct cerr *e)
{
	cleanup_close int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return cerr_sys(e, "open %s", path);
	if (fs_read_regular(fd, out, e) < 0)
		return cerr_prefix(e, "%s", path);
	return 0;
}

static int rm_tree(int parent, const char *name, dev_t dev, int depth,
		   struct cerr *e)
{
	struct stat st;
	int fd;
	DIR *d;
	struct dirent *de;

	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : cerr_sys(e, "stat %s", name);
	if (!S_ISDIR(st.st_mode)) {
		if (unlinkat(parent, name, 0) < 0 && errno != ENOENT)
			return cerr_sys(e, "unlink %s", name);
		return 0;
	}
	if (st.st_dev != dev)
		return cerr_set(e, EXDEV, "%s is a mount point; not removing",
				name);
	if (depth > 4096)
		return cerr_set(e, ELOOP, "directory tree too deep at %s",
				name);
	fd = openat(parent, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cerr_sys(e, "open %s", name);
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return cerr_sys(e, "opendir %s", name);
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (rm_tree(dirfd(d), de->d_name, dev, depth + 1, e) < 0) {
			closedir(d);
			return -1;
		}
	}
	closedir(d);
	if (unlinkat(parent, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return cerr_sys(e, "rmdir %s", name);
	return 0;
}

int fs_subdir_at(int dirfd, const char *name, mode_t mode, struct cerr *e)
{
	int fd;

	if (mkdirat(dirfd, name, mode) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkdir %s", name);
	fd = openat(dirfd, name,
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cerr_sys(e, "open %s", name);
	return fd;
}

int fs_rm_rf_at(int dirfd, const char *name, struct cerr *e)
{
	struct stat st;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : cerr_sys(e, "stat %s", name);
	return rm_tree(dirfd, name, st.st_dev, 0, e);
}

int fs_rm_rf(const char *path, struct cerr *e)
{
	return fs_rm_rf_at(AT_FDCWD, path, e);
}

bool fs_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

bool fs_is_mountpoint(const char *path)
{
	cleanup_free char *parent = xasprintf("%s/..", path);
	struct stat a, b;

	if (stat(path, &a) < 0 || stat(parent, &b) < 0)
		return false;
	return a.st_dev != b.st_dev || a.st_ino == b.st_ino;
}

void fs_mountinfo_unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

static int longer_first(const void *a, const void *b)
{
	size_t la = strlen(*(char *const *)a), lb = strlen(*(char *const *)b);

	return la < lb ? 1 : la > lb ? -1 : 0;
}

char **fs_mounts_beneath(const char *dir)
{
	cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
	cleanup_free char *line = NULL;
	size_t cap = 0, n = 0, dl = strlen(dir);
	char **v = NULL;

	while (dl > 0 && dir[dl - 1] == '/') /* "/" and "/a/" as "" and "/a" */
		dl--;

	while (f && getline(&line, &cap, f) > 0) {
		char *save = NULL, *mp = strtok_r(line, " ", &save);

		for (int i = 0; mp && i < 4; i++)
			mp = strtok_r(NULL, " ", &save);
		if (!mp)
			continue;
		fs_mountinfo_unescape(mp);
		if (strncmp(mp, dir, dl) || mp[dl] != '/' || !mp[dl + 1])
			continue;
		v = xrealloc(v, (n + 2) * sizeof(char *));
		v[n++] = xstrdup(mp);
		v[n] = NULL;
	}
	if (n > 1)
		qsort(v, n, sizeof(char *), longer_first);
	return v;
}
