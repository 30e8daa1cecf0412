// SPDX-License-Identifier: Apache-2.0
/* Sysctls through /proc/sys (the net.* ones belong to the namespace of the
 * thread that opens the file) and network namespaces kept by bind mounts,
 * the way `ip netns add` keeps them so that `ip netns` sees ours. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include <linux/magic.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "net-internal.h"
#include "util.h"

#define SYSCTL_MAX 4096

static int sysctl_open(const char *path, int flags, struct cerr *e)
{
	cleanup_free char *p = NULL;
	int fd;

	if (!*path || path[0] == '/' || strstr(path, ".."))
		return cerr_set(e, EINVAL, "bad sysctl path '%s'", path);
	p = xasprintf("/proc/sys/%s", path);
	fd = open(p, flags | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return cerr_sys(e, "open %s", p);
	return fd;
}

char *net_sysctl_get(const char *path, struct cerr *e)
{
	cleanup_close int fd = sysctl_open(path, O_RDONLY, e);
	struct buf b;
	char *v;

	if (fd < 0)
		return NULL;
	buf_init(&b, SYSCTL_MAX);
	if (fs_read_fd(fd, &b, e) < 0) {
		buf_free(&b);
		cerr_prefix(e, "read sysctl %s", path);
		return NULL;
	}
	while (b.len && (b.data[b.len - 1] == '\n'))
		b.len--;
	v = xstrndup(b.len ? b.data : "", b.len);
	buf_free(&b);
	return v;
}

int net_sysctl_set(const char *path, const char *value, struct cerr *e)
{
	cleanup_close int fd = sysctl_open(path, O_WRONLY, e);

	if (fd < 0)
		return -1;
	if (fs_write_all(fd, value, strlen(value)) < 0)
		return cerr_sys(e, "write sysctl %s = %s", path, value);
	return 0;
}

/* As iproute2 does: the netns directory is a shared mount point, so that a
 * namespace mounted here is seen from mount namespaces made later. */
static int share_dir(const char *dir, struct cerr *e)
{
	if (fs_mkdir_p(dir, 0755, e) < 0)
		return -1;
	if (mount("", dir, "none", MS_SHARED | MS_REC, NULL) == 0)
		return 0;
	if (errno != EINVAL)
		return cerr_sys(e, "make %s shared", dir);
	if (mount(dir, dir, "none", MS_BIND | MS_REC, NULL) < 0 ||
	    mount("", dir, "none", MS_SHARED | MS_REC, NULL) < 0)
		return cerr_sys(e, "bind-mount %s on itself", dir);
	return 0;
}

/* A new namespace for this thread, bound to path, then back to the old. */
static int bind_new_ns(const char *path, struct cerr *e)
{
	cleanup_close int self =
	    open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int r = 0;

	if (self < 0)
		return cerr_sys(e, "open own network namespace");
	if (unshare(CLONE_NEWNET) < 0)
		return cerr_sys(e, "unshare a network namespace");
	if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0)
		r = cerr_sys(e, "bind-mount the namespace on %s", path);
	if (setns(self, CLONE_NEWNET) < 0)
		abort(); /* the thread cannot be left in the pod's namespace */
	return r;
}

int net_netns_create(const char *dir, const char *path, struct cerr *e)
{
	int fd;

	if (share_dir(dir, e) < 0)
		return -1;
	fd = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
	if (fd < 0)
		return errno == EEXIST
			   ? cerr_set(e, EEXIST,
				      "%s exists and is not cell-net's", path)
			   : cerr_sys(e, "create %s", path);
	close(fd);
	if (bind_new_ns(path, e) < 0) {
		unlink(path);
		return -1;
	}
	return 0;
}

int net_netns_remove(const char *path, struct cerr *e)
{
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return cerr_sys(e, "unmount %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return cerr_sys(e, "remove %s", path);
	return 0;
}

bool net_netns_present(const char *path)
{
	struct statfs s;

	return statfs(path, &s) == 0 && s.f_type == NSFS_MAGIC;
}
