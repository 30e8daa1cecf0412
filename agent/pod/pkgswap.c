// SPDX-License-Identifier: Apache-2.0
/* A deployed package's layout, and the swap that puts a new version in
 * place while units have it mounted.
 *
 * A unit bind-mounts packages/<name>/ (configMap, secret, projected,
 * packagePath): the mount holds that directory's inode, so replacing the
 * directory would leave the unit with the old one, emptied when it is
 * removed. So the directory stays and its content changes, the kubelet's
 * way (AtomicWriter):
 *
 *   packages/<name>/..<12 hex>/   a version: the package as extracted
 *   packages/<name>/..data        -> ..<12 hex>, the version in force
 *   packages/<name>/<top>         -> ..data/<top>, one per top-level entry
 *
 * A redeploy moves the new version in, points ..data at it with one
 * rename (every name flips at once: a reader sees the old tree or the new
 * one), adds the links of new top-level names, drops those of names gone,
 * and removes the old version. Names that start with ".." are the
 * layout's; a package's own top-level entries named so stay inside its
 * version, unlinked. A directory in the old layout (a real tree, from an
 * agent before this one) is converted name by name, each exchanged with
 * its link in one renameat2. Deploys of one name are serialised with
 * flock on its directory. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "deploy.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1U << 0)
#define RENAME_EXCHANGE (1U << 1)
#endif

#define DATA_LINK "..data"
#define DATA_TMP "..data_tmp"
#define LINK_TMP "..link_tmp"

static int rename2(int fromfd, const char *from, int tofd, const char *to,
		   unsigned int flags)
{
	return (int)syscall(SYS_renameat2, fromfd, from, tofd, to, flags);
}

static bool is_layout_name(const char *n)
{
	return n[0] == '.' && n[1] == '.';
}

static bool is_dot(const char *n)
{
	return !strcmp(n, ".") || !strcmp(n, "..");
}

/* Remove whatever is at name (a link, a file or a tree). */
static void remove_entry(int dirfd, const char *name, const char *pkg)
{
	struct cerr e = {0};

	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return;
	if (fs_rm_rf_at(dirfd, name, &e) < 0)
		log_warn("deploy %s: remove %s: %s", pkg, name, e.msg);
}

/* Point ..data at ver with one rename (replacing the old link). */
static int set_data(int dfd, const char *ver, struct cerr *e)
{
	unlinkat(dfd, DATA_TMP, 0); /* a crash's leftover */
	if (symlinkat(ver, dfd, DATA_TMP) < 0)
		return cerr_sys(e, "symlink %s", DATA_TMP);
	if (renameat(dfd, DATA_TMP, dfd, DATA_LINK) < 0) {
		cerr_sys(e, "rename %s", DATA_TMP);
		unlinkat(dfd, DATA_TMP, 0);
		return -1;
	}
	return 0;
}

/* Whether name is already the link ..data/name. */
static bool is_our_link(int dfd, const char *name)
{
	char t[NAME_MAX + 16], want[NAME_MAX + 16];
	ssize_t n = readlinkat(dfd, name, t, sizeof(t) - 1);

	if (n < 0)
		return false;
	t[n] = '\0';
	snprintf(want, sizeof(want), "%s/%s", DATA_LINK, name);
	return !strcmp(t, want);
}

/* Make name the link ..data/name: a new name is renamed in, an existing
 * entry (an old-layout tree or file) is exchanged with the link in one
 * step, then removed. */
static int link_name(int dfd, const char *name, const char *pkg, struct cerr *e)
{
	cleanup_free char *target = NULL;

	if (is_our_link(dfd, name))
		return 0;
	target = xasprintf("%s/%s", DATA_LINK, name);
	unlinkat(dfd, LINK_TMP, 0);
	if (symlinkat(target, dfd, LINK_TMP) < 0)
		return cerr_sys(e, "symlink %s", name);
	if (rename2(dfd, LINK_TMP, dfd, name, RENAME_EXCHANGE) == 0) {
		remove_entry(dfd, LINK_TMP, pkg);
		return 0;
	}
	if (errno == ENOENT &&
	    rename2(dfd, LINK_TMP, dfd, name, RENAME_NOREPLACE) == 0)
		return 0;
	cerr_sys(e, "link %s", name);
	unlinkat(dfd, LINK_TMP, 0);
	return -1;
}

/* Each top-level entry of version verfd gets its link. */
static int link_all(int dfd, int verfd, const char *pkg, struct cerr *e)
{
	cleanup_dir DIR *d = NULL;
	struct dirent *de;
	int fd = openat(verfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		return cerr_sys(e, "open the new version");
	}
	while ((de = readdir(d))) {
		if (is_dot(de->d_name))
			continue;
		if (is_layout_name(de->d_name)) {
			log_warn("deploy %s: top-level entry %s is not "
				 "linked (names starting with .. are the "
				 "layout's)",
				 pkg, de->d_name);
			continue;
		}
		if (link_name(dfd, de->d_name, pkg, e) < 0)
			return -1;
	}
	return 0;
}

/* Drop what the new version does not have: links (or old-layout entries)
 * of names gone, old versions, leftovers of a crash. */
static void prune(int dfd, int verfd, const char *ver, const char *pkg)
{
	cleanup_dir DIR *d = NULL;
	struct dirent *de;
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;

	if (fd < 0 || !(d = fdopendir(fd))) {
		if (fd >= 0)
			close(fd);
		log_warn("deploy %s: cannot list the package to prune it", pkg);
		return;
	}
	while ((de = readdir(d))) {
		const char *n = de->d_name;

		if (is_dot(n) || !strcmp(n, DATA_LINK) || !strcmp(n, ver))
			continue;
		if (!is_layout_name(n) &&
		    fstatat(verfd, n, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue; /* still in the package */
		remove_entry(dfd, n, pkg);
	}
}

/* Put the extracted package at pkgdirfd/tmp in force as packages/name. */
int deploy_swap_in(int pkgdirfd, const char *tmp, const char *name,
		   struct cerr *e)
{
	cleanup_close int dfd = -1, verfd = -1;
	char ver[NAME_MAX + 1];

	/* ".tmp-<hex>" becomes "..<hex>": random, and a layout name. */
	snprintf(ver, sizeof(ver), "..%s", strrchr(tmp, '-') + 1);
	dfd = fs_subdir_at(pkgdirfd, name, 0755, e);
	if (dfd < 0)
		return -1;
	if (flock(dfd, LOCK_EX) < 0)
		return cerr_sys(e, "lock %s", name);
	if (renameat(pkgdirfd, tmp, dfd, ver) < 0)
		return cerr_sys(e, "move the new version in");
	verfd =
	    openat(dfd, ver, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (verfd < 0) {
		cerr_sys(e, "open %s", ver);
		goto fail;
	}
	/* The flip: every linked name now reads the new version. New names
	 * appear just after, names gone vanish just after. */
	if (set_data(dfd, ver, e) < 0 || link_all(dfd, verfd, name, e) < 0)
		goto fail;
	prune(dfd, verfd, ver, name);
	return 0;
fail:
	/* ..data may already point at ver: then keep it (a half-linked new
	 * version is still better than a link to nothing); else drop it. */
	{
		char t[NAME_MAX + 1];
		ssize_t n = readlinkat(dfd, DATA_LINK, t, sizeof(t) - 1);

		if (n < 0 || (size_t)n != strlen(ver) || memcmp(t, ver, n))
			remove_entry(dfd, ver, name);
	}
	return -1;
}
