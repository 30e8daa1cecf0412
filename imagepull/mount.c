// SPDX-License-Identifier: Apache-2.0
/* overlayfs over the cached layers. The mount data of mount(2) is limited to
 * one page, so lowerdirs are named by short relative symlinks (l/<12 hex>)
 * and the mount is made with the cache root as working directory, as
 * Docker's overlay2 driver does. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "digest.h"
#include "fsutil.h"
#include "pull-internal.h"
#include "util.h"

#define SHORT_LEN 12
#define MOUNT_DATA_MAX 4000 /* a page, less some room */

/* Make l/<short> point at the layer; returns the short relative name. */
static char *short_name(const struct cache *c, const char *diff_id,
			struct cerr *e)
{
	const char *hex = digest_hex(diff_id);
	char algo[8] = "";
	char *name = xasprintf("l/%.*s", SHORT_LEN, hex);
	cleanup_free char *target = NULL;
	char cur[PATH_MAX];
	ssize_t n;

	memcpy(algo, diff_id,
	       (size_t)(hex - 1 - diff_id) < 7 ? (size_t)(hex - 1 - diff_id)
					       : 7);
	target = xasprintf("../layers/%s/%s", algo, hex);
	n = readlinkat(c->fd, name, cur, sizeof(cur) - 1);
	if (n >= 0) {
		cur[n] = '\0';
		if (!strcmp(cur, target))
			return name;
		unlinkat(c->fd, name, 0); /* a stale or colliding link */
	}
	if (symlinkat(target, c->fd, name) < 0 && errno != EEXIST) {
		cerr_sys(e, "symlink %s/%s", c->root, name);
		free(name);
		return NULL;
	}
	return name;
}

/* A layer whose root is opaque (it had a top-level ".wh..wh..opq") hides
 * every layer below it. overlayfs ignores the opaque xattr on a lowerdir's
 * root, so those layers are left out of the mount instead. */
static bool root_opaque(const struct cache *c, const char *diff_id, int fd,
			const char *name)
{
	cleanup_free char *p = name ? cache_path(c, "%s", name)
				    : cache_path(c, "layers/%s", diff_id);
	char v[2] = "";

	if (!name)
		*strrchr(p, ':') = '/';
	if (fd >= 0)
		return fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v)) ==
			   1 &&
		       v[0] == 'y';
	return getxattr(p, "trusted.overlay.opaque", v, sizeof(v)) == 1 &&
	       v[0] == 'y';
}

/* Build "lowerdir=top:…:bottom" with each layer once: a layer that recurs
 * only matters at its topmost position. */
static int lowerdirs(const struct cache *c, char *const *diff_ids, size_t n,
		     const int *fds, char *const *names, struct buf *out,
		     struct cerr *e)
{
	if (buf_append(out, "lowerdir=", 9, e) < 0)
		return -1;
	for (size_t i = n; i-- > 0;) {
		bool dup = false;
		cleanup_free char *s = NULL;

		for (size_t j = i + 1; j < n; j++)
			dup = dup || !strcmp(diff_ids[i], diff_ids[j]);
		if (dup)
			continue;
		/* A shared layer by its descriptor: the directory that was
		 * checked, never a path in the share that could change or
		 * lead elsewhere since. */
		if (fds && fds[i] >= 0)
			s = xasprintf("/proc/self/fd/%d", fds[i]);
		else if (names && names[i])
			s = xstrdup(names[i]); /* a lazy layer's FUSE mount */
		else
			s = short_name(c, diff_ids[i], e);
		if (!s)
			return -1;
		if ((out->len > 9 && buf_append(out, ":", 1, e) < 0) ||
		    buf_append(out, s, strlen(s), e) < 0)
			return cerr_prefix(e, "overlay mount options");
		if (root_opaque(c, diff_ids[i], fds ? fds[i] : -1,
				names ? names[i] : NULL))
			break;
	}
	return 0;
}

static char *default_upper_parent(const struct cache *c, const char *target)
{
	char d[DIGEST_STR_MAX];

	digest_buf("sha256", target, strlen(target), d, NULL);
	return cache_path(c, "mounts/%.16s", digest_hex(d));
}

int overlay_mount(const struct cache *c, char *const *diff_ids, size_t n,
		  const int *lower_fds, char *const *lower_names,
		  const char *target, const char *upper_parent, struct cerr *e)
{
	cleanup_free char *abs = NULL, *up = NULL, *upper = NULL, *work = NULL;
	cleanup_close int cwd = -1;
	struct buf opts;
	int ret;

	if (n == 0)
		return cerr_set(e, EINVAL, "image has no layers to mount");
	if (fs_mkdir_p(target, 0755, e) < 0)
		return -1;
	abs = realpath(target, NULL);
	if (!abs)
		return cerr_sys(e, "%s", target);
	if (fs_is_mountpoint(abs))
		return cerr_set(e, EBUSY,
				"%s is already a mount point; unmount it "
				"first (cell-pull --unmount)",
				abs);
	up =
	    upper_parent ? xstrdup(upper_parent) : default_upper_parent(c, abs);
	upper = xasprintf("%s/upper", up);
	work = xasprintf("%s/work", up);
	if (fs_mkdir_p(upper, 0755, e) < 0 || fs_mkdir_p(work, 0700, e) < 0)
		return -1;
	buf_init(&opts, MOUNT_DATA_MAX);
	ret = lowerdirs(c, diff_ids, n, lower_fds, lower_names, &opts, e);
	if (ret == 0) {
		cleanup_free char *rest =
		    xasprintf(",upperdir=%s,workdir=%s", upper, work);
		ret = buf_append(&opts, rest, strlen(rest), e);
		if (ret < 0)
			cerr_prefix(e, "overlay mount options (%zu layers)", n);
	}
	if (ret == 0) {
		/* Relative lowerdirs resolve against the cwd at mount time. */
		cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (cwd < 0 || fchdir(c->fd) < 0)
			ret = cerr_sys(e, "chdir %s", c->root);
		else if (mount("overlay", abs, "overlay", 0, opts.data) < 0)
			ret = cerr_sys(e, "mount overlay on %s", abs);
		if (cwd >= 0 && fchdir(cwd) < 0 && ret == 0)
			ret = cerr_sys(e, "chdir back");
	}
	buf_free(&opts);
	return ret;
}

int pull_unmount(const char *mountpoint, struct cerr *e)
{
	if (umount2(mountpoint, UMOUNT_NOFOLLOW) < 0)
		return cerr_sys(e, "unmount %s", mountpoint);
	return 0;
}
