// SPDX-License-Identifier: Apache-2.0
/* The container init's side of a unit: what runs between clone() and
 * execve() of the workload, and what `cell-monitor exec` uses to join a
 * running unit.
 *
 * Setup is split as bubblewrap does it: ctr_plan_mounts() turns run.json
 * into a list of mount operations (pure, unit-tested), ctr_apply_mounts()
 * carries the list out. Every target is resolved beneath the rootfs with
 * RESOLVE_IN_ROOT semantics, because the rootfs is image content: a symlink
 * in it (absolute or climbing) must land inside the rootfs, never on the
 * host. Mounts are made onto /proc/self/fd/N of the resolved target, so no
 * path is looked up twice. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cleanup.h"
#include "path.h"
#include "keyring.h"
#include "seccomp-profile.h"
#include "runtime.h"
#include "sysctl.h"
#include "util.h"

#define DEFAULT_PATH                                                           \
	"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

struct cell_mount_attr {
	uint64_t attr_set, attr_clr, propagation, userns_fd;
};

/* ====================== resolution beneath the rootfs ======================
 * common/path.c does the resolving (PATH_IN_ROOT: openat2 RESOLVE_IN_ROOT,
 * or its component walk); what is added here is making what is missing. */

int ctr_open_in_root(int rootfd, const char *rel, int flags, bool mkdirs,
		     struct cerr *e)
{
	char clean[PATH_MAX_INPUT];
	const char *base;
	int fd;

	if (path_clean(rel, clean, sizeof(clean), e) < 0)
		return -1;
	fd = path_open_at(rootfd, clean, flags, 0, PATH_IN_ROOT, e);
	if (fd >= 0 || e->code != ENOENT || !mkdirs || !*clean)
		return fd;
	cerr_clear(e);
	cleanup_close int pfd =
	    path_open_parent_at(rootfd, clean, true, PATH_IN_ROOT, &base, e);
	if (pfd < 0)
		return -1;
	if (mkdirat(pfd, base, 0755) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkdir /%s", clean);
	return path_open_at(rootfd, clean, flags, 0, PATH_IN_ROOT, e);
}

/* The directory that holds rel's last component, created as needed. */
static int open_parent(int rootfd, const char *rel, const char **base,
		       struct cerr *e)
{
	return path_open_parent_at(rootfd, rel, true, PATH_IN_ROOT, base, e);
}

/* A mount target: resolved, and created (a directory, or an empty file
 * for a bind of a file) when missing. */
static int ensure_target(int rootfd, const char *target, bool dir,
			 struct cerr *e)
{
	char rel[PATH_MAX_INPUT];
	const char *base;
	int fd;

	fd = ctr_open_in_root(rootfd, target, O_PATH, false, e);
	if (fd >= 0 || e->code != ENOENT)
		return fd;
	if (dir)
		return ctr_open_in_root(rootfd, target, O_PATH, true, e);
	if (path_clean(target, rel, sizeof(rel), e) < 0 || !*rel)
		return cerr_set(e, EINVAL, "bad target %s", target);
	cleanup_close int pfd = open_parent(rootfd, rel, &base, e);
	if (pfd < 0)
		return -1;
	fd = openat(pfd, base,
		    O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0 && errno != EEXIST)
		return cerr_sys(e, "create %s", target);
	if (fd >= 0)
		close(fd);
	return ctr_open_in_root(rootfd, target, O_PATH, false, e);
}

/* ============================ the mount plan ============================ */

#define MNT_BASE (MS_NOSUID | MS_NODEV | MS_NOEXEC)

static const struct mount_op base_ops[] = {
    {MOP_MOUNT, "proc", "/proc", "proc", MNT_BASE, NULL, 0, 0, false, NULL},
    {MOP_MOUNT, "tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_STRICTATIME,
     "mode=755,size=65536k", 0, 0, false, NULL},
    {MOP_MKNOD, "/dev/null", "/dev/null", NULL, 0, NULL, 1, 3, false, NULL},
    {MOP_MKNOD, "/dev/zero", "/dev/zero", NULL, 0, NULL, 1, 5, false, NULL},
    {MOP_MKNOD, "/dev/full", "/dev/full", NULL, 0, NULL, 1, 7, false, NULL},
    {MOP_MKNOD, "/dev/random", "/dev/random", NULL, 0, NULL, 1, 8, false, NULL},
    {MOP_MKNOD, "/dev/urandom", "/dev/urandom", NULL, 0, NULL, 1, 9, false,
     NULL},
    {MOP_MKNOD, "/dev/tty", "/dev/tty", NULL, 0, NULL, 5, 0, false, NULL},
    {MOP_MOUNT, "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
     "newinstance,ptmxmode=0666,mode=0620,gid=5", 0, 0, false, NULL},
    {MOP_SYMLINK, "pts/ptmx", "/dev/ptmx", NULL, 0, NULL, 0, 0, false, NULL},
    {MOP_SYMLINK, "/proc/self/fd", "/dev/fd", NULL, 0, NULL, 0, 0, false, NULL},
    {MOP_SYMLINK, "/proc/self/fd/0", "/dev/stdin", NULL, 0, NULL, 0, 0, false,
     NULL},
    {MOP_SYMLINK, "/proc/self/fd/1", "/dev/stdout", NULL, 0, NULL, 0, 0, false,
     NULL},
    {MOP_SYMLINK, "/proc/self/fd/2", "/dev/stderr", NULL, 0, NULL, 0, 0, false,
     NULL},
    {MOP_MOUNT, "shm", "/dev/shm", "tmpfs", MNT_BASE, "mode=1777,size=65536k",
     0, 0, false, NULL},
    {MOP_MOUNT, "mqueue", "/dev/mqueue", "mqueue", MNT_BASE, NULL, 0, 0, false,
     NULL},
    {MOP_MOUNT, "sysfs", "/sys", "sysfs", MNT_BASE | MS_RDONLY, NULL, 0, 0,
     false, NULL},
};

/* Docker's defaults: kernel interfaces a container has no business with
 * are hidden, and the writable knobs of /proc made read-only. */
static const char *const masked_paths[] = {
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
};
static const char *const readonly_paths[] = {
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

int ctr_plan_mounts(const struct run_config *c, struct mount_op **ops,
		    size_t *n, struct cerr *e)
{
	size_t max = ARRAY_SIZE(base_ops) + c->n_devices + c->n_mounts +
		     ARRAY_SIZE(masked_paths) + ARRAY_SIZE(readonly_paths);
	struct mount_op *o = xcalloc(max, sizeof(*o));
	size_t k = 0;

	for (size_t i = 0; i < ARRAY_SIZE(base_ops); i++)
		o[k++] = base_ops[i];
	/* CDI's device nodes, once the /dev tmpfs is there; the cgroup
	 * allows exactly these besides the defaults. */
	for (size_t i = 0; i < c->n_devices; i++) {
		const struct run_device *d = &c->devices[i];

		o[k++] = (struct mount_op){
		    .kind = MOP_MKNOD,
		    .source = d->host_path ? d->host_path : d->path,
		    .target = d->path,
		    .dev_major = d->major,
		    .dev_minor = d->minor,
		    .dev = d,
		};
	}
	/* The unit's own mounts come after /dev and /proc exist, so that
	 * one may target /dev/termination-log or a file in /proc. */
	for (size_t i = 0; i < c->n_mounts; i++) {
		const struct run_mount *m = &c->mounts[i];
		bool bind = !strcmp(m->type, "bind");

		if (m->target[0] != '/') {
			free(o);
			return cerr_set(e, EINVAL,
					"mount target %s: not absolute",
					m->target);
		}
		o[k++] = (struct mount_op){
		    .kind = bind ? MOP_BIND : MOP_MOUNT,
		    .source = m->source ? m->source : m->type,
		    .target = m->target,
		    .fstype = bind ? NULL : m->type,
		    .flags = m->flags,
		    .data = bind ? m->sub_path : m->data,
		};
	}
	/* Masks last, so that no mount of the unit can uncover them
	 * (procMount Unmasked and privileged units go without). */
	for (size_t i = 0; !c->proc_unmasked && i < ARRAY_SIZE(masked_paths);
	     i++)
		o[k++] = (struct mount_op){.kind = MOP_MASK,
					   .target = masked_paths[i],
					   .optional = true};
	for (size_t i = 0; !c->proc_unmasked && i < ARRAY_SIZE(readonly_paths);
	     i++)
		o[k++] = (struct mount_op){.kind = MOP_RDONLY,
					   .target = readonly_paths[i],
					   .optional = true};
	*ops = o;
	*n = k;
	return 0;
}

/* ======================== carrying the plan out ======================== */

static const char *fdpath(int fd, char *buf)
{
	snprintf(buf, 32, "/proc/self/fd/%d", fd);
	return buf;
}

/* Flags a bind remount must keep (the kernel refuses to drop locked ones
 * and silently clears the others). */
static unsigned long kept_flags(int fd)
{
	struct statvfs sv;
	unsigned long f = 0;

	if (fstatvfs(fd, &sv) < 0)
		return 0;
	f |= (sv.f_flag & ST_NOSUID) ? MS_NOSUID : 0;
	f |= (sv.f_flag & ST_NODEV) ? MS_NODEV : 0;
	f |= (sv.f_flag & ST_NOEXEC) ? MS_NOEXEC : 0;
	f |= (sv.f_flag & ST_NOATIME) ? MS_NOATIME : 0;
	f |= (sv.f_flag & ST_NODIRATIME) ? MS_NODIRATIME : 0;
	f |= (sv.f_flag & ST_RELATIME) ? MS_RELATIME : 0;
	return f;
}

/* Apply MS_RDONLY/NOSUID/NODEV/NOEXEC to the bind mount whose root fd
 * holds (opened after the mount: the fd used to mount points below it). */
static int remount_fd(int fd, const char *target, unsigned long flags,
		      struct cerr *e)
{
	unsigned long want =
	    flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC);
	char p[32];

	if (flags & MS_REC) {
		/* Read-only all the way down where the kernel can (5.12+). */
		struct cell_mount_attr a = {.attr_set =
						((want & MS_RDONLY) ? 0x1 : 0) |
						((want & MS_NOSUID) ? 0x2 : 0) |
						((want & MS_NODEV) ? 0x4 : 0) |
						((want & MS_NOEXEC) ? 0x8 : 0)};
		if (syscall(SYS_mount_setattr, fd, "",
			    AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) == 0)
			return 0;
		if (errno != ENOSYS)
			return cerr_sys(e, "set attributes of %s", target);
	}
	if (mount(NULL, fdpath(fd, p), NULL,
		  MS_BIND | MS_REMOUNT | want | kept_flags(fd), NULL) < 0)
		return cerr_sys(e, "remount %s", target);
	return 0;
}

/* The same on a fresh lookup of target. */
static int remount_bind(int rootfd, const char *target, unsigned long flags,
			struct cerr *e)
{
	cleanup_close int fd =
	    ctr_open_in_root(rootfd, target, O_PATH, false, e);

	if (fd < 0)
		return -1;
	return remount_fd(fd, target, flags, e);
}

static int op_mount(int rootfd, const struct mount_op *op, struct cerr *e)
{
	cleanup_close int fd = ensure_target(rootfd, op->target, true, e);
	char p[32];

	if (fd < 0)
		return cerr_prefix(e, "mount %s", op->target);
	if (mount(op->source, fdpath(fd, p), op->fstype, op->flags, op->data) ==
	    0)
		return 0;
	if (!strcmp(op->fstype, "sysfs") && errno == EPERM) {
		/* A network namespace we may not mount sysfs for: the
		 * host's /sys, read-only, is the next best thing. */
		if (mount("/sys", p, NULL, MS_BIND | MS_REC, NULL) == 0)
			return remount_bind(rootfd, op->target,
					    op->flags | MS_REC, e);
	}
	return cerr_sys(e, "mount %s", op->target);
}

/* What a bind mounts, as a descriptor: source (a host path the agent
 * chose: a volume's root, a package, a file of its own), then sub_path
 * beneath it. A subPath lies in a volume that a unit can write while this
 * runs, so it is resolved here, at the mount, and never handed on as a
 * name: a link on the way may not leave the volume (EXDEV), and what is
 * mounted is the object this lookup found. */
static int open_bind_source(const struct mount_op *op, struct cerr *e)
{
	cleanup_close int root = -1;
	int fd;

	root =
	    open(op->source, O_PATH | O_CLOEXEC | (op->data ? O_DIRECTORY : 0));
	if (root < 0)
		return cerr_sys(e, "bind %s", op->source);
	if (!op->data)
		return steal_fd(&root);
	fd = path_open_beneath(root, op->data, O_PATH, 0, e);
	if (fd < 0)
		return cerr_prefix(e, "bind %s subPath %s", op->source,
				   op->data);
	return fd;
}

/* After the mount, target (looked up again) must be the object that was
 * opened: a target or source swapped under us (a racing unit) fails the
 * start rather than leave something else mounted. Returns the mounted
 * root's fd, for the remount. */
static int check_mounted(int rootfd, const struct mount_op *op,
			 const struct stat *src, struct cerr *e)
{
	cleanup_close int fd =
	    ctr_open_in_root(rootfd, op->target, O_PATH, false, e);
	struct stat st;
	char p[32];

	if (fd < 0)
		return cerr_prefix(e, "bind %s", op->target);
	if (fstat(fd, &st) < 0)
		return cerr_sys(e, "bind %s: stat", op->target);
	if (st.st_dev == src->st_dev && st.st_ino == src->st_ino)
		return steal_fd(&fd);
	umount2(fdpath(fd, p), MNT_DETACH);
	return cerr_set(e, EXDEV,
			"bind %s on %s: the mounted object is not the one "
			"opened (changed during the mount)",
			op->source, op->target);
}

static int op_bind(int rootfd, const struct mount_op *op, struct cerr *e)
{
	struct stat src;
	cleanup_close int sfd = open_bind_source(op, e), fd = -1, mfd = -1;
	char s[32], p[32];

	if (sfd < 0)
		return -1;
	if (fstat(sfd, &src) < 0)
		return cerr_sys(e, "bind %s", op->source);
	fd = ensure_target(rootfd, op->target, S_ISDIR(src.st_mode), e);
	if (fd < 0)
		return cerr_prefix(e, "bind %s", op->source);
	if (mount(fdpath(sfd, s), fdpath(fd, p), NULL,
		  MS_BIND | (op->flags & MS_REC), NULL) < 0)
		return cerr_sys(e, "bind %s on %s", op->source, op->target);
	mfd = check_mounted(rootfd, op, &src, e);
	if (mfd < 0)
		return -1;
	if (op->flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC))
		return remount_fd(mfd, op->target, op->flags, e);
	return 0;
}

/* The parent directory of an absolute target; *base points into rel. */
static int open_target_parent(int rootfd, const char *target, char *rel,
			      const char **base, struct cerr *e)
{
	if (path_clean(target, rel, PATH_MAX_INPUT, e) < 0 || !*rel)
		return cerr_set(e, EINVAL, "bad target %s", target);
	return open_parent(rootfd, rel, base, e);
}

/* mknod as root in the init user namespace; a bind of the host's node
 * where mknod is refused (a user namespace, a devices cgroup). */
static int op_mknod(int rootfd, const struct mount_op *op, struct cerr *e)
{
	char rel[PATH_MAX_INPUT];
	const char *base;
	cleanup_close int pfd =
	    open_target_parent(rootfd, op->target, rel, &base, e);

	const struct run_device *d = op->dev;
	mode_t type = d && d->type == 'b' ? S_IFBLK : S_IFCHR;
	mode_t mode = d ? (d->mode & 07777) : 0666;

	if (pfd < 0)
		return cerr_prefix(e, "mknod %s", op->target);
	if (mknodat(pfd, base, type | mode,
		    makedev(op->dev_major, op->dev_minor)) == 0) {
		if (d && (d->uid || d->gid) &&
		    fchownat(pfd, base, d->uid, d->gid, AT_SYMLINK_NOFOLLOW) <
			0)
			return cerr_sys(e, "chown %s", op->target);
		return 0;
	}
	if (errno == EEXIST && !d)
		return 0;
	if (errno == EEXIST)
		return cerr_set(e, EEXIST,
				"mknod %s: already in the "
				"container's /dev",
				op->target);
	if (errno != EPERM)
		return cerr_sys(e, "mknod %s", op->target);
	struct mount_op b = {
	    .kind = MOP_BIND, .source = op->source, .target = op->target};
	return op_bind(rootfd, &b, e);
}

static int op_symlink(int rootfd, const struct mount_op *op, struct cerr *e)
{
	char rel[PATH_MAX_INPUT];
	const char *base;
	cleanup_close int pfd =
	    open_target_parent(rootfd, op->target, rel, &base, e);

	if (pfd < 0)
		return cerr_prefix(e, "symlink %s", op->target);
	if (symlinkat(op->source, pfd, base) < 0 && errno != EEXIST)
		return cerr_sys(e, "symlink %s", op->target);
	return 0;
}

/* A missing optional target is fine: not every kernel has every file. */
static int open_optional(int rootfd, const struct mount_op *op, int *fd,
			 struct cerr *e)
{
	*fd = ctr_open_in_root(rootfd, op->target, O_PATH, false, e);
	if (*fd < 0 && e->code == ENOENT && op->optional) {
		cerr_clear(e);
		return 0;
	}
	return *fd < 0 ? -1 : 1;
}

/* A mask or a read-only path is a kernel file: the container's procfs or
 * sysfs. Anything else there (a unit's mount over it, a link the image or
 * a shared volume put in its way) would take the mask instead of the
 * file it is for, leaving the file open (runc's CVE-2025-31133 and
 * CVE-2025-52881 had that shape): refused. */
static int check_kernel_fs(int fd, const char *target, struct cerr *e)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return cerr_sys(e, "statfs %s", target);
	if (sf.f_type != PROC_SUPER_MAGIC && sf.f_type != SYSFS_MAGIC)
		return cerr_set(e, EXDEV,
				"%s is not the kernel's (filesystem %#lx): a "
				"mount or link over it is refused",
				target, (unsigned long)sf.f_type);
	return 0;
}

/* The host's /dev/null, checked to be the null device: the mask is bound
 * from this descriptor, never from a path looked up again. */
static int open_devnull(struct cerr *e)
{
	int fd = open("/dev/null", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return cerr_sys(e, "open /dev/null");
	if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode) ||
	    st.st_rdev != makedev(1, 3)) {
		close(fd);
		return cerr_set(e, EXDEV, "/dev/null is not the null device");
	}
	return fd;
}

static int op_mask(int rootfd, const struct mount_op *op, struct cerr *e)
{
	cleanup_close int fd = -1, null = -1;
	struct stat st;
	char p[32], np[32];
	int rc = open_optional(rootfd, op, &fd, e);

	if (rc <= 0)
		return rc;
	if (fstat(fd, &st) < 0)
		return cerr_sys(e, "mask %s", op->target);
	if (check_kernel_fs(fd, op->target, e) < 0)
		return cerr_prefix(e, "mask");
	if (S_ISDIR(st.st_mode))
		rc = mount("tmpfs", fdpath(fd, p), "tmpfs", MS_RDONLY, NULL);
	else if ((null = open_devnull(e)) < 0)
		return cerr_prefix(e, "mask %s", op->target);
	else
		rc =
		    mount(fdpath(null, np), fdpath(fd, p), NULL, MS_BIND, NULL);
	if (rc < 0)
		return cerr_sys(e, "mask %s", op->target);
	return 0;
}

static int op_rdonly(int rootfd, const struct mount_op *op, struct cerr *e)
{
	cleanup_close int fd = -1;
	char p[32];
	int rc = open_optional(rootfd, op, &fd, e);

	if (rc <= 0)
		return rc;
	if (check_kernel_fs(fd, op->target, e) < 0)
		return cerr_prefix(e, "read-only");
	if (mount(fdpath(fd, p), p, NULL, MS_BIND | MS_REC, NULL) < 0)
		return cerr_sys(e, "bind %s read-only", op->target);
	return remount_bind(rootfd, op->target, MS_RDONLY | MS_REC, e);
}

int ctr_apply_mounts(int rootfd, const struct mount_op *ops, size_t n,
		     struct cerr *e)
{
	static int (*const run[])(int, const struct mount_op *,
				  struct cerr *) = {
	    [MOP_MOUNT] = op_mount, [MOP_BIND] = op_bind,
	    [MOP_MKNOD] = op_mknod, [MOP_SYMLINK] = op_symlink,
	    [MOP_MASK] = op_mask,   [MOP_RDONLY] = op_rdonly,
	};

	for (size_t i = 0; i < n; i++)
		if (run[ops[i].kind](rootfd, &ops[i], e) < 0)
			return -1;
	return 0;
}

/* ===================== credentials and capabilities ===================== */

static uint64_t cap_mask(char *const *names)
{
	uint64_t m = 0;

	for (size_t i = 0; names && names[i]; i++) {
		char low[64];
		cap_value_t v;
		size_t k;

		for (k = 0; names[i][k] && k + 1 < sizeof(low); k++)
			low[k] = (char)tolower((unsigned char)names[i][k]);
		low[k] = '\0';
		if (cap_from_name(low, &v) == 0 && v >= 0 && v < 64)
			m |= 1ULL << v;
	}
	return m;
}

static int set_caps(uint64_t want, uint64_t ambient, struct cerr *e)
{
	cap_t c = cap_init();
	int rc = 0;

	for (cap_value_t v = 0; v < 64; v++) {
		if (!(want & (1ULL << v)))
			continue;
		cap_set_flag(c, CAP_PERMITTED, 1, &v, CAP_SET);
		cap_set_flag(c, CAP_EFFECTIVE, 1, &v, CAP_SET);
		/* Inheritable only where ambient needs it (the lesson of
		 * CVE-2022-24769). */
		if (ambient & (1ULL << v))
			cap_set_flag(c, CAP_INHERITABLE, 1, &v, CAP_SET);
	}
	if (cap_set_proc(c) < 0)
		rc = cerr_sys(e, "set capabilities");
	cap_free(c);
	return rc;
}

/* The unit's seccomp filter. With no_new_privs it goes on last, right
 * before execve (late); without, the kernel wants CAP_SYS_ADMIN for it, so
 * it goes on first, while the process still has every capability (runc's
 * order), and the profile must allow the credential calls that follow. */
static int ctr_seccomp(const struct run_config *c, bool late, struct cerr *e)
{
	if (!c->seccomp_bpf || late != c->no_new_privs)
		return 0;
	return sc_install(c->seccomp_bpf, c->seccomp_len, e);
}

int ctr_set_creds(const struct run_config *c, struct cerr *e)
{
	uint64_t want = cap_mask(c->caps), amb = cap_mask(c->ambient_caps);
	gid_t groups[RUN_MAX_GROUPS];

	if (ctr_seccomp(c, false, e) < 0)
		return -1;

	/* The bounding set first, while CAP_SETPCAP is still ours. */
	for (int v = 0; v < 64; v++)
		if (!(want & (1ULL << v)) &&
		    prctl(PR_CAPBSET_DROP, v, 0, 0, 0) < 0 && errno != EINVAL)
			return cerr_sys(e, "drop capability %d", v);
	for (size_t i = 0; i < c->n_groups; i++)
		groups[i] = c->groups[i];
	/* Keep permitted capabilities across the uid change; capset below
	 * trims them to the final set. */
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
		return cerr_sys(e, "keep capabilities");
	if (setgroups(c->n_groups, groups) < 0)
		return cerr_sys(e, "setgroups");
	if (setresgid(c->gid, c->gid, c->gid) < 0)
		return cerr_sys(e, "setgid %u", c->gid);
	if (setresuid(c->uid, c->uid, c->uid) < 0)
		return cerr_sys(e, "setuid %u", c->uid);
	if (set_caps(want, amb, e) < 0)
		return -1;
	prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 &&
	    errno != EINVAL)
		return cerr_sys(e, "clear ambient capabilities");
	for (int v = 0; v < 64; v++)
		if ((amb & (1ULL << v)) &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, v, 0, 0) < 0)
			return cerr_sys(e, "raise ambient capability %d", v);
	if (c->no_new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return cerr_sys(e, "no_new_privs");
	return 0;
}

/* ================================ exec ================================ */

static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], name, n) && env[i][n] == '=')
			return env[i] + n + 1;
	return NULL;
}

int ctr_execvpe(char *const *argv, char *const *env, struct cerr *e)
{
	const char *file = argv[0], *path = env_get(env, "PATH");
	bool eacces = false;

	if (strchr(file, '/')) {
		execve(file, argv, env);
		return cerr_sys(e, "exec %s", file);
	}
	if (!path)
		path = DEFAULT_PATH;
	for (const char *d = path;; d++) {
		size_t dl = strcspn(d, ":");
		char full[PATH_MAX_INPUT];

		if (dl + strlen(file) + 3 <= sizeof(full)) {
			/* An empty PATH element means the current directory. */
			if (dl)
				snprintf(full, sizeof(full), "%.*s/%s", (int)dl,
					 d, file);
			else
				snprintf(full, sizeof(full), "./%s", file);
			execve(full, argv, env);
			if (errno == EACCES)
				eacces = true;
			else if (errno != ENOENT && errno != ENOTDIR &&
				 errno != ESTALE && errno != ENODEV)
				return cerr_sys(e, "exec %s", full);
		}
		d += dl;
		if (!*d)
			break;
	}
	if (eacces)
		return cerr_set(e, EACCES, "exec %s: Permission denied", file);
	return cerr_set(e, ENOENT,
			"exec %s: executable file not found in $PATH", file);
}

/* The working directory, which must be inside the container: a path
 * through /proc/self/fd/N of a descriptor the runtime still holds would
 * put the workload in a host directory (CVE-2024-21626). The kernel says
 * "(unreachable)" for a directory outside the root, which getcwd reports
 * as ENOENT or as a path not starting with '/'. */
static int ctr_chdir(const char *cwd, struct cerr *e)
{
	char buf[PATH_MAX_INPUT];

	if (chdir(cwd) < 0)
		return cerr_sys(e, "chdir %s", cwd);
	if (!getcwd(buf, sizeof(buf)) || buf[0] != '/')
		return cerr_set(e, EXDEV,
				"working directory %s: outside the container",
				cwd);
	return 0;
}

/* ========================== the container init ========================== */

static int setup_root(const struct ctr_child_args *a, pid_t host_pid,
		      struct cerr *e)
{
	const struct run_config *c = a->cfg;
	cleanup_free struct mount_op *ops = NULL;
	cleanup_close int rootfd = -1, cwdfd = -1;
	size_t n;

	/* Nothing done here may reach the host's mount tree; and host
	 * unmounts still propagate in until pivot_root drops the rest. */
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
		return cerr_sys(e, "make / a slave mount");
	if (mount(c->rootfs, c->rootfs, NULL, MS_BIND | MS_REC, NULL) < 0)
		return cerr_sys(e, "bind rootfs %s", c->rootfs);
	rootfd = open(c->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return cerr_sys(e, "open rootfs %s", c->rootfs);
	if (ctr_plan_mounts(c, &ops, &n, e) < 0 ||
	    ctr_apply_mounts(rootfd, ops, n, e) < 0)
		return -1;
	/* createContainer hooks: the container's mounts are made, its root
	 * is still c->rootfs as the host names it (what the OCI state's
	 * bundle config says), and the hook's path is the host's. */
	if (hooks_run(c, HOOK_CREATE_CONTAINER, a->bundle, host_pid, e) < 0)
		return -1;
	/* The working directory is created when missing, as Docker does. */
	cwdfd = ctr_open_in_root(rootfd, c->cwd, O_PATH | O_DIRECTORY, true, e);
	if (cwdfd < 0)
		return cerr_prefix(e, "working directory");
	if (fchdir(rootfd) < 0)
		return cerr_sys(e, "chdir rootfs");
	/* pivot_root(".", "."): the old root ends up on top of the new one
	 * and is detached at once, with every host mount below it. */
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return cerr_sys(e, "pivot_root %s", c->rootfs);
	if (umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return cerr_sys(e, "detach the old root");
	if (c->readonly_rootfs &&
	    mount(NULL, "/", NULL,
		  MS_REMOUNT | MS_BIND | MS_RDONLY | kept_flags(rootfd),
		  NULL) < 0)
		return cerr_sys(e, "remount / read-only");
	return 0;
}

static void reset_signals(void)
{
	sigset_t all;
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	sigemptyset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
}

/* The monitor's "g": the unit is in its cgroups. It comes with the init's
 * pid as the host sees it, for the hooks' OCI state. EOF: the monitor
 * died. */
static int wait_go(int fd, pid_t *host_pid)
{
	char go[1 + sizeof(int32_t)];
	int32_t pid32;
	size_t got = 0;

	while (got < sizeof(go)) {
		ssize_t r = read(fd, go + got, sizeof(go) - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	memcpy(&pid32, go + 1, sizeof(pid32));
	*host_pid = pid32;
	return 0;
}

static int child_setup(const struct ctr_child_args *a, struct cerr *e)
{
	const struct run_config *c = a->cfg;
	/* createContainer hooks run before pivot_root and need the host's
	 * pid: a unit with hooks takes "g" first and gives up the overlap of
	 * its mounts with the monitor's cgroup writes. */
	bool hooks_early = c->n_hooks > 0;
	pid_t host_pid = 0;
	int fd;

	if (a->netns_fd >= 0 && setns(a->netns_fd, CLONE_NEWNET) < 0)
		return cerr_sys(e, "join network namespace %s", c->netns_path);
	if (a->ipcns_fd >= 0 && setns(a->ipcns_fd, CLONE_NEWIPC) < 0)
		return cerr_sys(e, "join IPC namespace %s", c->ipc_ns_path);
	/* In the container's own IPC (and pod network) namespace now, with
	 * the host's /proc still reachable: /proc/sys resolves to ours. */
	for (size_t i = 0; c->sysctl_names && c->sysctl_names[i]; i++)
		if (sysctl_write(c->sysctl_names[i], c->sysctl_values[i], e) <
		    0)
			return -1;
	/* The monitor protects itself from the OOM killer; the unit must
	 * not inherit that. Written here, through the host's /proc: after
	 * pivot_root the path is the container's, where a unit's mount over
	 * /proc/1 could send the write to another file (CVE-2025-52881). */
	fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t w = write(fd, "0", 1);
		(void)w; /* best effort: an older kernel may refuse */
		close(fd);
	}
	if (hooks_early && wait_go(a->sync_fd, &host_pid) < 0)
		_exit(127);
	umask(0);
	if (setup_root(a, host_pid, e) < 0)
		return -1;
	umask(022);
	if (c->hostname && sethostname(c->hostname, strlen(c->hostname)) < 0)
		return cerr_sys(e, "sethostname");
	/* startContainer hooks: inside the container, still root, before
	 * the workload (a unit with hooks has its "go" already). */
	if (hooks_run(c, HOOK_START_CONTAINER, a->bundle, host_pid, e) < 0)
		return -1;
	if (dup2(a->stdin_fd, 0) < 0 || dup2(a->stdout_fd, 1) < 0 ||
	    dup2(a->stderr_fd, 2) < 0)
		return cerr_sys(e, "set up stdio");
	if (ctr_isolate_keyring(e) < 0 || ctr_set_creds(c, e) < 0)
		return -1;
	if (ctr_chdir(c->cwd, e) < 0)
		return -1;
	/* Only 0, 1, 2 reach the workload; the sync socket closes on exec,
	 * which is how the monitor learns that exec succeeded. */
	syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
	/* Everything above is the runtime's own work in the container's new
	 * namespaces, and none of it runs the workload or needs its cgroups:
	 * it overlaps the monitor's making of the cgroups and its
	 * cgroup.procs writes (whose first one waits for an RCU grace period
	 * on cgroup v1, milliseconds). Only exec (and, with no_new_privs, the
	 * seccomp filter) is left: wait until the monitor has put us into
	 * the unit's cgroups, unless a unit with hooks did so first. */
	if (!hooks_early && wait_go(a->sync_fd, &host_pid) < 0)
		_exit(127);
	return 0;
}

static __attribute__((noreturn)) void child_fail(int fd, const struct cerr *e)
{
	size_t n = strnlen(e->msg, sizeof(e->msg));

	if (write(fd, e->msg, n) < 0)
		_exit(126);
	_exit(127);
}

/* The first steps of a child of the monitor (a unit's init, an exec). */
static void child_start(int peer_fd)
{
	/* It dies with its monitor (a unit's container; an exec: its
	 * `cell-monitor exec`, which is how a probe that timed out is
	 * killed). */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	/* Until execve this process is cell-monitor, a host binary, and the
	 * units of a shared PID namespace (or, for an exec, the unit's own)
	 * can see it: not dumpable, so that none may open its /proc/PID/exe
	 * (or ptrace it) to reach the binary (CVE-2019-5736). execve makes
	 * the workload dumpable again. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* The monitor's end of the socket came along with clone(); with it
	 * open here, a dead monitor would never read as EOF. */
	close(peer_fd);
	reset_signals();
}

void ctr_child(const struct ctr_child_args *a)
{
	struct cerr e = {0};

	child_start(a->peer_fd);
	/* child_setup waits for the monitor's "g" (the unit's cgroups) after
	 * the mounts, before credentials and exec. */
	if (child_setup(a, &e) < 0 || ctr_seccomp(a->cfg, true, &e) < 0)
		child_fail(a->sync_fd, &e);
	ctr_execvpe(a->cfg->argv, a->cfg->env, &e);
	child_fail(a->sync_fd, &e);
}

/* ======================= joining a running unit ======================= */

void ctr_exec_child(const struct ctr_exec_args *a)
{
	struct cerr e = {0};

	child_start(a->peer_fd);
	/* "0" is the writer itself: this pid is the PID namespace's. */
	if (a->exec_cg && cg_enter(a->exec_cg, 0, &e) < 0)
		child_fail(a->sync_fd, &e);
	if (a->mntns_fd >= 0 && setns(a->mntns_fd, CLONE_NEWNS) < 0) {
		cerr_sys(&e, "join mnt namespace");
		child_fail(a->sync_fd, &e);
	}
	/* Out of cell-monitor's session (which is the agent's): a session and
	 * process group of its own, and a terminal's hang-up and job control
	 * where the command has a terminal. */
	if (setsid() < 0) {
		cerr_sys(&e, "setsid");
		child_fail(a->sync_fd, &e);
	}
	if (isatty(0) && ioctl(0, TIOCSCTTY, 0) < 0) {
		cerr_sys(&e, "make the terminal the controlling one");
		child_fail(a->sync_fd, &e);
	}
	if (ctr_isolate_keyring(&e) < 0 || ctr_set_creds(a->cfg, &e) < 0)
		child_fail(a->sync_fd, &e);
	if (ctr_chdir(a->cwd, &e) < 0)
		child_fail(a->sync_fd, &e);
	syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
	if (ctr_seccomp(a->cfg, true, &e) < 0)
		child_fail(a->sync_fd, &e);
	ctr_execvpe(a->argv, (char *const *)a->env, &e);
	child_fail(a->sync_fd, &e);
}

int ctr_join_namespaces(pid_t pid, uint64_t start_time, int *mntns_fd,
			struct cerr *e)
{
	static const struct {
		const char *name;
		int type;
	} ns[] = {{"ipc", CLONE_NEWIPC},
		  {"uts", CLONE_NEWUTS},
		  {"net", CLONE_NEWNET},
		  {"pid", CLONE_NEWPID},
		  {"mnt", CLONE_NEWNS}};
	int fds[ARRAY_SIZE(ns)];
	int rc = 0;

	for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
		char p[64];
		snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, ns[i].name);
		fds[i] = open(p, O_RDONLY | O_CLOEXEC);
		if (fds[i] < 0 && rc == 0)
			rc = cerr_sys(e, "open %s", p);
	}
	/* Opened first, checked second: the fds cannot change identity,
	 * a pid could. */
	if (rc == 0 && proc_start_time(pid) != start_time)
		rc = cerr_set(e, ESRCH, "unit is not running");
	for (size_t i = 0; i < ARRAY_SIZE(ns); i++) {
		char self[64];
		struct stat a, b;

		snprintf(self, sizeof(self), "/proc/self/ns/%s", ns[i].name);
		/* Joining a namespace we are already in is skipped (the mnt
		 * namespace refuses it on some kernels). */
		bool same = fds[i] >= 0 && fstat(fds[i], &a) == 0 &&
			    stat(self, &b) == 0 && a.st_ino == b.st_ino &&
			    a.st_dev == b.st_dev;
		if (mntns_fd && ns[i].type == CLONE_NEWNS) {
			/* For the caller's child: the caller stays where the
			 * cgroup files are. */
			*mntns_fd = rc == 0 && !same ? fds[i] : -1;
			if (*mntns_fd >= 0)
				continue;
		} else if (rc == 0 && !same && setns(fds[i], ns[i].type) < 0)
			rc = cerr_sys(e, "join %s namespace", ns[i].name);
		if (fds[i] >= 0)
			close(fds[i]);
	}
	return rc;
}
