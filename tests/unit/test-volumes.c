// SPDX-License-Identifier: Apache-2.0
/* Unit tests of pod volumes and unit mounts (agent/pod/volumes.c). Runs as
 * root for the tmpfs of a memory emptyDir. */
/* The fixtures build spec structs from string literals. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "fsgroup.h"
#include "fsutil.h"
#include "util.h"
#include "volumes.h"

#define TMPFS_MAGIC 0x01021994

static char *path_in(const char *dir, const char *rel)
{
	return xasprintf("%s/%s", dir, rel);
}

/* packagePath: the path beneath the package, a file or a directory, and
 * the resolvconf/etchosts mounts not doubled when the unit has its own. */
static void package_path_cases(const char *top, const struct vol_dirs *d)
{
	char *rc = path_in(top, "packages/resolvconf/etc/resolv.conf");
	char *tree = path_in(top, "packages/tree/data/sub");
	struct volume v[] = {
	    {.name = "resolvconf",
	     .kind = VOL_PACKAGE_PATH,
	     .path = "/etc/resolv.conf"},
	    {.name = "tree", .kind = VOL_PACKAGE_PATH, .path = "data"},
	    {.name = "whole", .kind = VOL_PACKAGE_PATH, .path = ""},
	    {.name = "etchosts", .kind = VOL_PACKAGE_PATH, .path = "/no/hosts"},
	};
	struct volume_mount vm[] = {
	    {.name = "resolvconf", .mount_path = "/etc/resolv.conf"},
	    {.name = "tree", .mount_path = "/t", .sub_path = "sub"},
	    {.name = "whole", .mount_path = "/w"},
	};
	struct unit_spec u = {.name = "u", .mounts = vm, .n_mounts = 3};
	struct pod_spec pod = {.volumes = v, .n_volumes = 3};
	struct unit_mounts m;
	struct cerr e = {0};
	char **src = NULL;
	size_t n_rc = 0;
	struct stat st;

	fs_mkdir_p(tree, 0755, &e);
	{
		char *etc = path_in(top, "packages/resolvconf/etc");

		fs_mkdir_p(etc, 0755, &e);
		free(etc);
	}
	fs_write_atomic(rc, "nameserver 10.0.0.2\n", 21, 0644, &e);
	ok(vol_prepare(&pod, d, &src, &e) == 0, "packagePath prepare (%s)",
	   e.msg);
	ok(vol_unit_mounts(&pod, &u, src, d, &m, &e) == 0,
	   "packagePath mounts (%s)", e.msg);
	for (size_t i = 0; i < m.n; i++)
		n_rc += !strcmp(m.v[i].target, "/etc/resolv.conf");
	/* etchosts from the package dir (not mounted by the unit), then the
	 * unit's three mounts. */
	ok(m.n == 4 && n_rc == 1, "/etc/resolv.conf bound once (%zu, %zu)", m.n,
	   n_rc);
	/* Never a resolved host path: the package, and the path beneath it
	 * for the monitor to resolve at the mount. */
	ok(m.n == 4 && str_has_suffix(m.v[1].source, "/packages/resolvconf") &&
	       m.v[1].sub_path && !strcmp(m.v[1].sub_path, "etc/resolv.conf") &&
	       stat(rc, &st) == 0 && S_ISREG(st.st_mode),
	   "file source: path beneath the package (%s)",
	   m.n == 4 ? m.v[1].source : "");
	ok(m.n == 4 && str_has_suffix(m.v[2].source, "/packages/tree") &&
	       m.v[2].sub_path && !strcmp(m.v[2].sub_path, "data/sub"),
	   "directory source, then subPath beneath it (%s)",
	   m.n == 4 ? m.v[2].sub_path : "");
	ok(m.n == 4 && str_has_suffix(m.v[3].source, "/packages/whole"),
	   "empty path: the whole package");
	vol_unit_mounts_free(&m);

	/* etchosts/etc/hosts exists (main made it); /no/hosts does not. */
	vm[2].name = "etchosts";
	vm[2].mount_path = "/etc/hosts";
	pod.n_volumes = 4;
	strv_free(src);
	ok(vol_prepare(&pod, d, &src, &e) == 0, "prepare again");
	ok(vol_unit_mounts(&pod, &u, src, d, &m, &e) < 0 && e.code == ENOENT &&
	       strstr(e.msg, "/no/hosts is not in package etchosts"),
	   "missing packagePath: a clear error (%s)", e.msg);
	v[3].path = "/etc";
	ok(vol_unit_mounts(&pod, &u, src, d, &m, &e) == 0,
	   "etchosts as a directory");
	vol_unit_mounts_free(&m);
	strv_free(src);
	free(rc);
	free(tree);
}

/* One hostPath volume of type type at path, prepared: 0 or the error. */
static int host_path(const char *path, const char *type, struct cerr *e)
{
	struct volume v = {.name = "h",
			   .kind = VOL_HOST_PATH,
			   .path = (char *)path,
			   .host_path_type = (char *)type};
	struct pod_spec pod = {.volumes = &v, .n_volumes = 1};
	char tmpl[] = "/tmp/volumes-XXXXXX", *vols = mkdtemp(tmpl);
	struct vol_dirs d = {.volumes_dir = vols, .packages_dir = vols};
	char **src = NULL;
	int r = vol_prepare(&pod, &d, &src, e);
	struct cerr ign;

	strv_free(src);
	fs_rm_rf(vols, &ign);
	return r;
}

/* hostPath.type as the kubelet checks it, with its messages. */
static void host_path_types(const char *top)
{
	char *dir = path_in(top, "hp-dir"), *file = path_in(top, "hp-file");
	char *fifo = path_in(top, "hp-fifo"), *sock = path_in(top, "hp-sock");
	char *missing = path_in(top, "hp-missing");
	char *newdir = path_in(top, "hp-new/a/b"), *newf = path_in(top, "hp-f");
	struct cerr e = {0};
	struct stat st;

	fs_mkdir_p(dir, 0755, &e);
	fs_write_atomic(file, "x", 1, 0644, &e);
	mkfifo(fifo, 0644);
	mknod(sock, S_IFSOCK | 0644, 0);
	ok(host_path(dir, "Directory", &e) == 0 &&
	       host_path(file, "File", &e) == 0 &&
	       host_path(sock, "Socket", &e) == 0 &&
	       host_path("/dev/null", "CharDevice", &e) == 0 &&
	       host_path(fifo, "", &e) == 0,
	   "matching types pass; \"\" checks nothing (%s)", e.msg);
	ok(host_path(file, "Directory", &e) < 0 &&
	       strstr(e.msg, "hostPath type check failed: ") &&
	       strstr(e.msg, "hp-file is not a directory, it's a File"),
	   "a file for Directory: %s", e.msg);
	ok(host_path(dir, "File", &e) < 0 &&
	       strstr(e.msg, "is not a file, it's a Directory"),
	   "a directory for File: %s", e.msg);
	ok(host_path(file, "Socket", &e) < 0 &&
	       strstr(e.msg, "is not a socket file, it's a File"),
	   "Socket: %s", e.msg);
	ok(host_path(file, "CharDevice", &e) < 0 &&
	       strstr(e.msg, "is not a character device, it's a File"),
	   "CharDevice: %s", e.msg);
	ok(host_path("/dev/null", "BlockDevice", &e) < 0 &&
	       strstr(e.msg, "is not a block device, it's a CharDevice"),
	   "BlockDevice: %s", e.msg);
	ok(host_path(fifo, "File", &e) < 0 &&
	       strstr(e.msg, "unable to determine its type"),
	   "a FIFO is no type the kubelet knows: %s", e.msg);
	ok(host_path(missing, "Directory", &e) < 0 && e.code == ENOENT &&
	       strstr(e.msg, "hp-missing doesn't exist"),
	   "missing path: %s", e.msg);
	ok(host_path(missing, "Dir", &e) < 0 &&
	       strstr(e.msg, "Dir is an invalid volume type"),
	   "unknown type: %s", e.msg);
	ok(host_path(newdir, "DirectoryOrCreate", &e) == 0 &&
	       stat(newdir, &st) == 0 && S_ISDIR(st.st_mode) &&
	       (st.st_mode & 07777) == 0755,
	   "DirectoryOrCreate makes it, parents included (%s)", e.msg);
	ok(host_path(newf, "FileOrCreate", &e) == 0 && stat(newf, &st) == 0 &&
	       S_ISREG(st.st_mode) && st.st_size == 0,
	   "FileOrCreate makes an empty file (%s)", e.msg);
	ok(host_path(file, "DirectoryOrCreate", &e) < 0 &&
	       strstr(e.msg, "is not a directory, it's a File"),
	   "DirectoryOrCreate over a file: %s", e.msg);
	ok(host_path(dir, "FileOrCreate", &e) < 0 &&
	       strstr(e.msg, "is not a file, it's a Directory"),
	   "FileOrCreate over a directory: %s", e.msg);
	free(dir);
	free(file);
	free(fifo);
	free(sock);
	free(missing);
	free(newdir);
	free(newf);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? st.st_mode & 07777 : (mode_t)-1;
}

static gid_t gid_of(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 ? st.st_gid : (gid_t)-1;
}

/* The fsGroup walk: the group and bits below a root, links never
 * followed (a link to a file outside is left as it is, and so is that
 * file), OnRootMismatch, and once per volume set-up. */
static void fsgroup_cases(const char *top)
{
	char *root = path_in(top, "fsg"), *sub = path_in(top, "fsg/d");
	char *file = path_in(top, "fsg/d/f"), *outside = path_in(top, "secret");
	char *link = path_in(top, "fsg/d/l");
	struct cerr e = {0};
	int fd;

	fs_mkdir_p(sub, 0700, &e);
	chmod(root, 0755);
	chmod(sub, 0700);
	fd = open(file, O_CREAT | O_WRONLY, 0600);
	close(fd);
	fd = open(outside, O_CREAT | O_WRONLY, 0600);
	close(fd);
	ok(symlink(outside, link) == 0, "a link to a file outside");
	ok(fsgroup_apply(root, 2000, false, false, &e) == 0, "walk (%s)",
	   e.msg);
	ok(gid_of(root) == 2000 && mode_of(root) == 02775, "root %o",
	   mode_of(root));
	ok(gid_of(sub) == 2000 && mode_of(sub) == 02770, "directory %o",
	   mode_of(sub));
	ok(gid_of(file) == 2000 && mode_of(file) == 0660, "file %o",
	   mode_of(file));
	ok(gid_of(outside) != 2000 && mode_of(outside) == 0600,
	   "the link's target untouched (%o)", mode_of(outside));
	chmod(sub, 0700);
	ok(fsgroup_apply(root, 2000, true, false, &e) == 0 &&
	       mode_of(sub) == 0700,
	   "OnRootMismatch: a right root leaves the tree alone");
	ok(fsgroup_apply(root, 3000, true, true, &e) == 0 &&
	       gid_of(sub) == 3000 && mode_of(sub) == 02750 &&
	       mode_of(file) == 0660,
	   "a wrong root walks again; read-only bits (%o)", mode_of(sub));
	free(root);
	free(sub);
	free(file);
	free(outside);
	free(link);
}

/* An emptyDir gets the pod's fsGroup when it is made, and never again:
 * what a unit left there (an initdb's 0700) stays so. */
static void fsgroup_once(const char *top)
{
	char *vols = path_in(top, "fsg-volumes");
	struct vol_dirs d = {.volumes_dir = vols, .packages_dir = vols};
	struct volume v[] = {{.name = "data", .kind = VOL_EMPTY_DIR}};
	struct pod_spec pod = {.volumes = v,
			       .n_volumes = 1,
			       .has_fs_group = true,
			       .fs_group = 2000};
	struct cerr e = {0};
	char **src = NULL, *pg = NULL;

	ok(vol_prepare(&pod, &d, &src, &e) == 0, "prepare (%s)", e.msg);
	ok(gid_of(src[0]) == 2000 && mode_of(src[0]) == 02777,
	   "a new emptyDir is the group's, 2777 (%o)", mode_of(src[0]));
	pg = path_in(src[0], "pgdata");
	mkdir(pg, 0700);
	chmod(pg, 0700);
	ok(chown(pg, 999, 999) == 0, "a unit's directory, 0700");
	strv_free(src);
	ok(vol_prepare(&pod, &d, &src, &e) == 0 && mode_of(pg) == 0700 &&
	       gid_of(pg) == 999,
	   "the same spec again: the unit's 0700 directory unchanged (%o)",
	   mode_of(pg));
	ok(vol_fsgroup_restart(&pod, src, &e) == 0 && mode_of(pg) == 02770 &&
	       gid_of(pg) == 2000,
	   "a pod restart with policy Always walks again (%o)", mode_of(pg));
	strv_free(src);
	free(pg);
	free(vols);
}

int main(void)
{
	char tmpl[] = "/tmp/volumes-XXXXXX";
	char *top = mkdtemp(tmpl);
	char *vols = path_in(top, "volumes"), *pkgs = path_in(top, "packages");
	char *hosts = path_in(top, "packages/etchosts/etc");
	char *cfg = path_in(top, "packages/cfg/sub");
	struct vol_dirs d = {.volumes_dir = vols, .packages_dir = pkgs};
	struct volume v[] = {
	    {.name = "scratch", .kind = VOL_EMPTY_DIR},
	    {.name = "mem",
	     .kind = VOL_EMPTY_DIR,
	     .memory = true,
	     .size_limit = 1 << 20},
	    {.name = "cfg", .kind = VOL_CONFIG_MAP},
	    {.name = "host", .kind = VOL_HOST_PATH, .path = top},
	};
	struct volume_mount vm[] = {
	    {.name = "scratch", .mount_path = "/data"},
	    {.name = "cfg", .mount_path = "/etc/app", .sub_path = "sub"},
	    {.name = "host", .mount_path = "/host", .read_only = true},
	};
	struct unit_spec u = {.name = "u", .mounts = vm, .n_mounts = 3};
	struct pod_spec pod = {.volumes = v, .n_volumes = 4};
	struct unit_mounts m;
	struct cerr e = {0};
	char **src = NULL;
	struct statfs sf;
	struct stat st;

	fs_mkdir_p(hosts, 0755, &e);
	fs_mkdir_p(cfg, 0755, &e);
	{
		char *h = path_in(hosts, "hosts");
		fs_write_atomic(h, "127.0.0.1 localhost\n", 20, 0644, &e);
		free(h);
	}
	ok(vol_prepare(&pod, &d, &src, &e) == 0, "prepare (%s)", e.msg);
	ok(stat(src[0], &st) == 0 && (st.st_mode & 0777) == 0777,
	   "emptyDir exists, mode 0777");
	ok(statfs(src[1], &sf) == 0 && sf.f_type == TMPFS_MAGIC,
	   "memory emptyDir is a tmpfs");
	ok(str_has_suffix(src[2], "/packages/cfg"), "configMap from package");
	ok(!strcmp(src[3], top), "hostPath as given");

	ok(vol_unit_mounts(&pod, &u, src, &d, &m, &e) == 0, "mounts (%s)",
	   e.msg);
	ok(m.n == 4 && !strcmp(m.v[0].target, "/etc/hosts") && m.v[0].read_only,
	   "/etc/hosts from the etchosts package");
	ok(m.n == 4 && !strcmp(m.v[1].target, "/data") && !m.v[1].read_only,
	   "emptyDir mount writable");
	ok(m.n == 4 && str_has_suffix(m.v[2].source, "/packages/cfg") &&
	       m.v[2].sub_path && !strcmp(m.v[2].sub_path, "sub") &&
	       m.v[2].read_only,
	   "configMap subPath, read-only (%s)", m.n == 4 ? m.v[2].source : "");
	ok(m.n == 4 && m.v[3].read_only, "readOnly honoured");
	vol_unit_mounts_free(&m);

	/* subPath hostile cases: a '..', and a symlink out of the volume. */
	vm[1].sub_path = "../../etc";
	ok(vol_unit_mounts(&pod, &u, src, &d, &m, &e) < 0 && e.code == EINVAL,
	   "subPath with .. refused (%s)", e.msg);
	{
		char *l = path_in(top, "packages/cfg/out");
		ok(symlink("/etc", l) == 0, "escaping symlink made");
		free(l);
	}
	vm[1].sub_path = "out/ssh";
	ok(vol_unit_mounts(&pod, &u, src, &d, &m, &e) < 0 && e.code == EXDEV,
	   "subPath through an escaping symlink refused (%s)", e.msg);
	vm[1].sub_path = "new/dir";
	ok(vol_unit_mounts(&pod, &u, src, &d, &m, &e) == 0 &&
	       access(cfg, F_OK) == 0,
	   "missing subPath created inside the volume");
	vol_unit_mounts_free(&m);
	/* The kubelet's SafeMakeDir: each made directory gets the volume
	 * root's mode, the umask notwithstanding (0777 for an emptyDir). */
	vm[0].sub_path = "a/b";
	{
		mode_t old = umask(022);
		char *ab = path_in(src[0], "a/b");
		char *a = path_in(src[0], "a");
		struct stat sa, sb;

		ok(vol_unit_mounts(&pod, &u, src, &d, &m, &e) == 0 &&
		       stat(a, &sa) == 0 && stat(ab, &sb) == 0 &&
		       (sa.st_mode & 07777) == 0777 &&
		       (sb.st_mode & 07777) == 0777,
		   "subPath directories made with the emptyDir's mode 0777 "
		   "(%o %o)",
		   sa.st_mode & 07777, sb.st_mode & 07777);
		umask(old);
		free(a);
		free(ab);
		vol_unit_mounts_free(&m);
	}
	vm[0].sub_path = NULL;
	vm[0].name = "nope";
	ok(vol_unit_mounts(&pod, &u, src, &d, &m, &e) < 0 && e.code == ENOENT,
	   "unknown volume refused (%s)", e.msg);
	vm[0].name = "scratch";
	v[3].path = "relative";
	{
		char **bad = NULL;

		ok(vol_prepare(&pod, &d, &bad, &e) < 0 && e.code == EINVAL &&
		       bad && !*bad[3] && !strcmp(bad[0], src[0]),
		   "relative hostPath refused, the other volumes prepared");
		ok(vol_unit_mounts(&pod, &u, bad, &d, &m, &e) < 0 &&
		       e.code == EINVAL && strstr(e.msg, "volumeMount host"),
		   "a unit mounting it gets the error (%s)", e.msg);
		strv_free(bad);
	}
	v[3].path = top;
	package_path_cases(top, &d);
	host_path_types(top);
	fsgroup_cases(top);
	fsgroup_once(top);

	umount2(src[1], MNT_DETACH);
	strv_free(src);
	fs_rm_rf(top, &e);
	free(vols);
	free(pkgs);
	free(hosts);
	free(cfg);
	return tap_done();
}
