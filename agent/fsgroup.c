// SPDX-License-Identifier: Apache-2.0
/* A pod's fsGroup on its volumes (an extension: Kip does not send it), as
 * the kubelet's SetVolumeOwnership does: every file and directory gets the
 * group, files the group's rw bits (r for a read-only volume), directories
 * those and x plus setgid, so what units create there is the group's too.
 * With fsGroupChangePolicy OnRootMismatch a volume whose root is already
 * so is left alone. Symlinks are never followed nor changed. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsgroup.h"

static __thread gid_t walk_gid;
static __thread bool walk_ro;
static __thread int walk_errno;

static mode_t wanted_bits(bool dir, bool ro)
{
	mode_t m = ro ? 0440 : 0660;

	return dir ? (m | 0110 | S_ISGID) : m;
}

static int visit(const char *path, const struct stat *st, int type,
		 struct FTW *f)
{
	bool dir = type == FTW_D || type == FTW_DP;

	(void)f;
	if (type == FTW_SL || type == FTW_SLN || type == FTW_NS ||
	    type == FTW_DNR)
		return 0;
	if (!dir && !S_ISREG(st->st_mode))
		return 0;
	if (st->st_gid != walk_gid && lchown(path, (uid_t)-1, walk_gid) < 0) {
		walk_errno = errno;
		return 1;
	}
	/* chown clears setgid on files; the mode is set after it. */
	if (chmod(path, (st->st_mode & 07777) | wanted_bits(dir, walk_ro)) <
	    0) {
		walk_errno = errno;
		return 1;
	}
	return 0;
}

bool fsgroup_root_ok(const char *dir, gid_t gid, bool ro)
{
	struct stat st;
	mode_t want = wanted_bits(true, ro);

	return stat(dir, &st) == 0 && st.st_gid == gid &&
	       (st.st_mode & want) == want;
}

int fsgroup_apply(const char *dir, gid_t gid, bool on_root_mismatch, bool ro,
		  struct cerr *e)
{
	if (on_root_mismatch && fsgroup_root_ok(dir, gid, ro))
		return 0;
	walk_gid = gid;
	walk_ro = ro;
	walk_errno = 0;
	if (nftw(dir, visit, 16, FTW_PHYS | FTW_MOUNT) != 0)
		return cerr_set(e, walk_errno ? walk_errno : EIO,
				"fsGroup %u on %s: %s", (unsigned)gid, dir,
				strerror(walk_errno ? walk_errno : EIO));
	return 0;
}
