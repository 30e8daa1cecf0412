// SPDX-License-Identifier: Apache-2.0
/* A pod's fsGroup on its volumes (an extension: Kip does not send it), as
 * the kubelet's SetVolumeOwnership does: every file and directory gets the
 * group, files the group's rw bits (r for a read-only volume), directories
 * those and x plus setgid, so what units create there is the group's too.
 * With fsGroupChangePolicy OnRootMismatch a volume whose root is already
 * so is left alone.
 *
 * The tree may be one that units write while the walk runs, so nothing is
 * changed by name: each entry is opened beneath a directory descriptor the
 * walk holds, without following a link (O_NOFOLLOW), checked to be the
 * entry that was listed (same device and inode, a directory or a regular
 * file), and changed through that descriptor (fchown, fchmod, or chmod of
 * /proc/self/fd/N, which names the held object and nothing else). An
 * entry swapped for a link or another file in between is skipped. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsgroup.h"

/* Deeper trees fail the walk: each level holds two descriptors. */
#define FSGROUP_MAX_DEPTH 256

struct walk {
	gid_t gid;
	bool ro;
	dev_t dev; /* the walk does not cross mounts */
};

static mode_t wanted_bits(bool dir, bool ro)
{
	mode_t m = ro ? 0440 : 0660;

	return dir ? (m | 0110 | S_ISGID) : m;
}

/* The group, then the bits (chown clears setgid on files), on the object
 * fd holds; st is its fstat. */
static int fix(int fd, const struct stat *st, const struct walk *w,
	       struct cerr *e)
{
	bool dir = S_ISDIR(st->st_mode);
	mode_t mode = (st->st_mode & 07777) | wanted_bits(dir, w->ro);
	char p[32];

	if (st->st_gid != w->gid &&
	    fchownat(fd, "", (uid_t)-1, w->gid, AT_EMPTY_PATH) < 0)
		return cerr_sys(e, "chown");
	if (st->st_gid == w->gid && (st->st_mode & 07777) == mode)
		return 0;
	if (dir)
		return fchmod(fd, mode) < 0 ? cerr_sys(e, "chmod") : 0;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	return chmod(p, mode) < 0 ? cerr_sys(e, "chmod") : 0;
}

/* name in dir, opened without following a link and checked to be what
 * fstatat listed (*st, refreshed); -1 with errno 0 for an entry to skip. */
static int open_entry(int dir, const char *name, struct stat *st)
{
	bool isdir = S_ISDIR(st->st_mode);
	int flags = isdir ? O_RDONLY | O_DIRECTORY | O_NONBLOCK : O_PATH;
	struct stat now;
	int fd = openat(dir, name, flags | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		/* Gone, or swapped for a link or a non-directory. */
		if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
			errno = 0;
		return -1;
	}
	if (fstat(fd, &now) < 0 || now.st_dev != st->st_dev ||
	    now.st_ino != st->st_ino ||
	    (now.st_mode & S_IFMT) != (st->st_mode & S_IFMT)) {
		close(fd);
		errno = 0;
		return -1;
	}
	*st = now;
	return fd;
}

static int walk_dir(int dir, const struct walk *w, int depth, struct cerr *e);

static int visit(int dir, const char *name, const struct walk *w, int depth,
		 struct cerr *e)
{
	cleanup_close int fd = -1;
	struct stat st;

	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : cerr_sys(e, "stat %s", name);
	if (st.st_dev != w->dev ||
	    (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode)))
		return 0;
	fd = open_entry(dir, name, &st);
	if (fd < 0)
		return errno ? cerr_sys(e, "open %s", name) : 0;
	if (fix(fd, &st, w, e) < 0 ||
	    (S_ISDIR(st.st_mode) && walk_dir(fd, w, depth + 1, e) < 0))
		return cerr_prefix(e, "%s", name);
	return 0;
}

/* Every entry below the directory dir holds (itself already fixed). */
static int walk_dir(int dir, const struct walk *w, int depth, struct cerr *e)
{
	cleanup_dir DIR *d = NULL;
	struct dirent *de;
	int fd;

	if (depth > FSGROUP_MAX_DEPTH)
		return cerr_set(e, ELOOP, "deeper than %d directories",
				FSGROUP_MAX_DEPTH);
	fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return cerr_sys(e, "open directory");
	}
	while ((errno = 0, de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (visit(dir, de->d_name, w, depth, e) < 0)
			return -1;
	}
	return errno ? cerr_sys(e, "read directory") : 0;
}

static bool root_ok(const struct stat *st, gid_t gid, bool ro)
{
	mode_t want = wanted_bits(true, ro);

	return st->st_gid == gid && (st->st_mode & want) == want;
}

int fsgroup_apply(const char *dir, gid_t gid, bool on_root_mismatch, bool ro,
		  struct cerr *e)
{
	cleanup_close int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					     O_NONBLOCK | O_CLOEXEC);
	struct walk w = {.gid = gid, .ro = ro};
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0)
		return cerr_sys(e, "fsGroup %u on %s", (unsigned)gid, dir);
	if (on_root_mismatch && root_ok(&st, gid, ro))
		return 0;
	w.dev = st.st_dev;
	if (fix(fd, &st, &w, e) < 0 || walk_dir(fd, &w, 0, e) < 0)
		return cerr_prefix(e, "fsGroup %u on %s", (unsigned)gid, dir);
	return 0;
}
