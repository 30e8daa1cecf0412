// SPDX-License-Identifier: Apache-2.0
/* Pod volumes and the mounts each unit gets. A volume's contents live on
 * the host: emptyDir under the state dir (a tmpfs for medium "Memory"),
 * configMap/secret/projected/packagePath in the deploy package of the same
 * name, hostPath where it says. A unit's volumeMounts become bind mounts;
 * subPath is resolved beneath its volume and can never leave it. */
#include "volumes.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsgroup.h"
#include "fsutil.h"
#include "path.h"
#include "util.h"

/* The pod's fsGroup on an emptyDir, when it is set up: before any unit
 * can write there, and once (a root that already has the group is left
 * alone, whatever the policy: an init unit's 0700 directory must reach
 * the next unit as it left it, as on a kubelet). */
static int empty_dir_fsgroup(const struct pod_spec *pod, const char *dir,
			     struct cerr *e)
{
	if (!pod->has_fs_group)
		return 0;
	return fsgroup_apply(dir, (gid_t)pod->fs_group, true, false, e);
}

static int prepare_empty_dir(const struct pod_spec *pod, const struct volume *v,
			     const char *dir, struct cerr *e)
{
	cleanup_free char *opts = NULL;

	/* emptyDir is world-writable, as the kubelet makes it (once: the
	 * mode is fsGroup's, or the pod's, afterwards). */
	if (mkdir(dir, 0777) == 0) {
		if (chmod(dir, 0777) < 0)
			return cerr_sys(e, "chmod %s", dir);
	} else if (errno != EEXIST) {
		return cerr_sys(e, "mkdir %s", dir);
	}
	if (!v->memory || fs_is_mountpoint(dir))
		return empty_dir_fsgroup(pod, dir, e);
	opts = v->size_limit > 0
		   ? xasprintf("mode=0777,size=%lld", (long long)v->size_limit)
		   : xstrdup("mode=0777");
	if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return cerr_sys(e, "mount tmpfs for emptyDir %s", v->name);
	return empty_dir_fsgroup(pod, dir, e);
}

/* The kubelet's names of file types (hostutil's GetFileType), NULL for
 * the types it does not know (a FIFO, …). */
static const char *kube_file_type(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFSOCK:
		return "Socket";
	case S_IFBLK:
		return "BlockDevice";
	case S_IFCHR:
		return "CharDevice";
	case S_IFDIR:
		return "Directory";
	case S_IFREG:
		return "File";
	default:
		return NULL;
	}
}

/* hostPath.type, checked as the kubelet checks it (pkg/volume/hostpath
 * checkType), with its messages: "" checks nothing; DirectoryOrCreate and
 * FileOrCreate make a missing path (0755 directories, parents included; an
 * empty 0644 file, parent not) and check nothing more; the others (and the
 * OrCreate ones on an existing path) need that type, links followed. */
static int host_path_check(const char *path, const char *type, struct cerr *e)
{
	static const struct {
		const char *type, *want, *what;
	} types[] = {
	    {"DirectoryOrCreate", "Directory", "directory"},
	    {"Directory", "Directory", "directory"},
	    {"FileOrCreate", "File", "file"},
	    {"File", "File", "file"},
	    {"Socket", "Socket", "socket file"},
	    {"CharDevice", "CharDevice", "character device"},
	    {"BlockDevice", "BlockDevice", "block device"},
	};
	struct stat st;
	const char *got;
	size_t i;

	if (!type || !*type)
		return 0;
	for (i = 0; i < ARRAY_SIZE(types); i++)
		if (!strcmp(type, types[i].type))
			break;
	if (i == ARRAY_SIZE(types))
		return cerr_set(e, EINVAL, "%s is an invalid volume type",
				type);
	if (stat(path, &st) < 0 && errno == ENOENT) {
		if (!strcmp(type, "DirectoryOrCreate"))
			return fs_mkdir_p(path, 0755, e);
		if (!strcmp(type, "FileOrCreate")) {
			int fd = open(
			    path, O_RDONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC,
			    0644);
			if (fd < 0 && errno != EEXIST)
				return cerr_sys(e, "create hostPath %s", path);
			if (fd >= 0)
				close(fd);
			return 0;
		}
		return cerr_set(e, ENOENT, "hostPath %s doesn't exist", path);
	}
	if (stat(path, &st) < 0)
		return cerr_sys(e,
				"hostPath type check failed, %s is not a "
				"%s, unable to determine its type",
				path, types[i].what);
	got = kube_file_type(st.st_mode);
	if (!got)
		return cerr_set(e, EINVAL,
				"hostPath type check failed, %s is not a %s, "
				"unable to determine its type: only recognise "
				"file, directory, socket, block device and "
				"character device",
				path, types[i].what);
	if (strcmp(got, types[i].want))
		return cerr_set(e, ENOTDIR,
				"hostPath type check failed: %s is not a %s, "
				"it's a %s",
				path, types[i].what, got);
	return 0;
}

/* Where a volume's contents are on the host; created when needed. */
static char *volume_source(const struct pod_spec *pod, const struct volume *v,
			   const struct vol_dirs *d, struct cerr *e)
{
	char *p;

	switch (v->kind) {
	case VOL_EMPTY_DIR:
		p = xasprintf("%s/%s", d->volumes_dir, v->name);
		if (prepare_empty_dir(pod, v, p, e) < 0) {
			free(p);
			return NULL;
		}
		return p;
	case VOL_HOST_PATH:
		if (!v->path || v->path[0] != '/') {
			cerr_set(e, EINVAL,
				 "hostPath volume %s: path must be "
				 "absolute",
				 v->name);
			return NULL;
		}
		if (host_path_check(v->path, v->host_path_type, e) < 0)
			return NULL;
		return xstrdup(v->path);
	case VOL_UNKNOWN:
		cerr_set(e, ENOTSUP,
			 "volume %s: no source this cell supports (emptyDir, "
			 "packagePath, configMap, secret, hostPath, projected)",
			 v->name);
		return NULL;
	default:
		/* configMap, secret, projected, packagePath: the package the
		 * controller deployed under the volume's name (an empty
		 * directory when it sent none). */
		p = xasprintf("%s/%s", d->packages_dir, v->name);
		if (fs_mkdir_p(p, 0755, e) < 0) {
			free(p);
			return NULL;
		}
		return p;
	}
}

int vol_prepare(const struct pod_spec *pod, const struct vol_dirs *d,
		char ***sources, struct cerr *e)
{
	char **out = xcalloc(pod->n_volumes + 1, sizeof(char *));
	int rc = 0;

	if (fs_mkdir_p(d->volumes_dir, 0755, e) < 0) {
		free(out);
		return -1;
	}
	/* A volume that cannot be prepared gets "" and is tried again when a
	 * unit that mounts it starts (its error becomes that unit's
	 * startFailure); the others are still ready. */
	for (size_t i = 0; i < pod->n_volumes; i++) {
		struct cerr ve = {0};

		out[i] = volume_source(pod, &pod->volumes[i], d, &ve);
		if (out[i])
			continue;
		out[i] = xstrdup("");
		if (rc == 0) {
			*e = ve;
			cerr_prefix(e, "volume %s", pod->volumes[i].name);
			rc = -1;
		}
	}
	*sources = out;
	return rc;
}

/* A missing subPath is made as the kubelet's SafeMakeDir makes it: each
 * missing directory beneath the volume, opened without following a link
 * once made, and given the mode of the volume's root (0777 for an
 * emptyDir, 2777 with fsGroup: so the pod's users, and its group by the
 * setgid bit, can use it whatever the umask). Every lookup is beneath
 * base: a racing unit can at worst move where inside the volume it lands. */
static int make_sub_path(int base, const char *rel, mode_t perm, struct cerr *e)
{
	char prefix[PATH_MAX_INPUT];
	size_t len = strlen(rel);

	for (size_t end = 0; end <= len; end++) {
		cleanup_close int fd = -1, parent = -1, made = -1;
		char *name;

		if (rel[end] != '/' && rel[end] != '\0')
			continue;
		memcpy(prefix, rel, end);
		prefix[end] = '\0';
		fd = path_open_beneath(base, prefix, O_PATH, 0, e);
		if (fd >= 0)
			continue;
		if (e->code != ENOENT)
			return -1;
		cerr_clear(e);
		name = strrchr(prefix, '/');
		if (name) {
			*name++ = '\0';
			parent = path_open_beneath(base, prefix, O_PATH, 0, e);
			if (parent < 0)
				return -1;
		} else {
			name = prefix;
			parent = fcntl(base, F_DUPFD_CLOEXEC, 0);
			if (parent < 0)
				return cerr_sys(e, "subPath %s", rel);
		}
		if (mkdirat(parent, name, perm) < 0 && errno != EEXIST)
			return cerr_sys(e, "mkdir subPath %s", rel);
		made = openat(parent, name,
			      O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (made < 0 || fchmod(made, perm) < 0)
			return cerr_sys(e, "subPath %s", rel);
	}
	return 0;
}

/* A packagePath volume's path beneath the package of the volume's name
 * (all of it when the path is empty), a file or a directory, cleaned into
 * rel. The package is looked up when a unit starts, since the controller
 * may deploy it after the pod spec. */
static int package_path(const struct volume *v, int pkg, char *rel,
			struct cerr *e)
{
	cleanup_close int fd = -1;

	if (!v->path || !*v->path) {
		*rel = '\0';
		return 0;
	}
	if (path_clean(v->path, rel, PATH_MAX_INPUT, e) < 0)
		return -1;
	fd = path_open_beneath(pkg, rel, O_PATH, 0, e);
	if (fd < 0 && e->code == ENOENT)
		return cerr_set(e, ENOENT,
				"packagePath %s is not in package %s (not "
				"deployed yet?)",
				v->path, v->name);
	return fd < 0 ? -1 : 0;
}

static const struct volume *find_volume(const struct pod_spec *pod,
					const char *name, size_t *idx)
{
	for (size_t i = 0; i < pod->n_volumes; i++)
		if (!strcmp(pod->volumes[i].name, name)) {
			*idx = i;
			return &pod->volumes[i];
		}
	return NULL;
}

static void add_mount(struct unit_mounts *m, char *source, char *sub,
		      const char *target, bool ro)
{
	m->v = xrealloc(m->v, (m->n + 1) * sizeof(*m->v));
	m->v[m->n].source = source;
	m->v[m->n].sub_path = sub;
	m->v[m->n].target = xstrdup(target);
	m->v[m->n].read_only = ro;
	m->n++;
}

static bool mounts_target(const struct unit_spec *u, const char *target)
{
	char a[PATH_MAX_INPUT], b[PATH_MAX_INPUT];
	struct cerr e = {0};

	if (path_clean(target, a, sizeof(a), &e) < 0)
		return false;
	for (size_t i = 0; i < u->n_mounts; i++)
		if (path_clean(u->mounts[i].mount_path, b, sizeof(b), &e) ==
			0 &&
		    !strcmp(a, b))
			return true;
	return false;
}

/* /etc/hosts and /etc/resolv.conf from the controller's packages, for a
 * unit that does not mount them itself (Kip mounts its resolvconf and
 * etchosts packagePath volumes on every unit; a bare client may not). */
static void add_dns_files(const struct unit_spec *u, const struct vol_dirs *d,
			  struct unit_mounts *m)
{
	static const char *const files[][2] = {
	    {"etchosts", "/etc/hosts"},
	    {"resolvconf", "/etc/resolv.conf"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		cleanup_free char *pkg =
		    xasprintf("%s/%s", d->packages_dir, files[i][0]);
		cleanup_close int root =
		    open(pkg, O_PATH | O_DIRECTORY | O_CLOEXEC);
		struct cerr e = {0};
		struct stat st;
		int fd;

		if (mounts_target(u, files[i][1]) || root < 0)
			continue;
		fd = path_open_beneath(root, files[i][1] + 1, O_PATH, 0, &e);
		if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
			add_mount(m, steal_ptr(&pkg), xstrdup(files[i][1] + 1),
				  files[i][1], true);
		if (fd >= 0)
			close(fd);
	}
}

/* What a volumeMount binds: the volume's root (prepared again if that
 * failed before) as *src, and beneath it packagePath.path then the
 * subPath (made when missing) as *sub, NULL for the root itself. */
static int mount_source(const struct pod_spec *pod, const struct volume *v,
			const char *prepared, const struct volume_mount *vm,
			const struct vol_dirs *d, char **src, char **sub,
			struct cerr *e)
{
	cleanup_free char *root = prepared && *prepared
				      ? xstrdup(prepared)
				      : volume_source(pod, v, d, e);
	char rel[PATH_MAX_INPUT] = "", subp[PATH_MAX_INPUT] = "";
	cleanup_close int rootfd = -1, base = -1;
	struct stat st;

	if (!root)
		return -1;
	rootfd = open(root, O_PATH | O_CLOEXEC);
	if (rootfd < 0 || fstat(rootfd, &st) < 0)
		return cerr_sys(e, "open %s", root);
	if (v->kind == VOL_PACKAGE_PATH && package_path(v, rootfd, rel, e) < 0)
		return -1;
	if (vm->sub_path && *vm->sub_path) {
		if (path_clean(vm->sub_path, subp, sizeof(subp), e) < 0)
			return cerr_prefix(e, "subPath");
		base = path_open_beneath(rootfd, rel, O_PATH, 0, e);
		if (base < 0 ||
		    make_sub_path(base, subp, st.st_mode & 07777, e) < 0)
			return -1;
	}
	if (*rel && *subp)
		*sub = xasprintf("%s/%s", rel, subp);
	else if (*rel || *subp)
		*sub = xstrdup(*rel ? rel : subp);
	else
		*sub = NULL;
	*src = steal_ptr(&root);
	return 0;
}

int vol_unit_mounts(const struct pod_spec *pod, const struct unit_spec *u,
		    char *const *sources, const struct vol_dirs *d,
		    struct unit_mounts *out, struct cerr *e)
{
	memset(out, 0, sizeof(*out));
	add_dns_files(u, d, out);
	for (size_t i = 0; i < u->n_mounts; i++) {
		const struct volume_mount *vm = &u->mounts[i];
		size_t idx = 0;
		const struct volume *v = find_volume(pod, vm->name, &idx);
		char *src = NULL, *sub = NULL;

		if (!v) {
			vol_unit_mounts_free(out);
			return cerr_set(e, ENOENT,
					"unit %s: volumeMount of unknown "
					"volume %s",
					u->name, vm->name);
		}
		if (mount_source(pod, v, sources ? sources[idx] : NULL, vm, d,
				 &src, &sub, e) < 0) {
			vol_unit_mounts_free(out);
			return cerr_prefix(e, "unit %s: volumeMount %s",
					   u->name, vm->name);
		}
		add_mount(out, src, sub, vm->mount_path,
			  vm->read_only || v->kind == VOL_SECRET ||
			      v->kind == VOL_CONFIG_MAP ||
			      v->kind == VOL_PROJECTED);
	}
	return 0;
}

/* What a package's fsGroup walk saw: its version in force (pkgswap's
 * ..data link, a new inode at each deploy), "-" before its first. */
static char *package_stamp(const char *name, const char *dir)
{
	cleanup_free char *link = xasprintf("%s/..data", dir);
	struct stat st;

	if (lstat(link, &st) < 0)
		return xasprintf("%s@-", name);
	return xasprintf("%s@%llu.%lld", name, (unsigned long long)st.st_ino,
			 (long long)st.st_ctime);
}

static bool seen_has(char *const *seen, const char *stamp)
{
	for (size_t i = 0; seen && seen[i]; i++)
		if (!strcmp(seen[i], stamp))
			return true;
	return false;
}

/* Each stamp of name replaced by stamp. */
static void seen_set(char ***seen, const char *name, char *stamp)
{
	size_t n = strlen(name), k = 0, len = strv_len(*seen);
	char **v = xcalloc(len + 2, sizeof(char *));

	for (size_t i = 0; i < len; i++) {
		char *s = (*seen)[i];

		if (!strncmp(s, name, n) && s[n] == '@')
			free(s);
		else
			v[k++] = s;
	}
	v[k] = stamp;
	free(*seen);
	*seen = v;
}

static bool unit_uses(const struct unit_spec *u, const char *volume)
{
	for (size_t k = 0; k < u->n_mounts; k++)
		if (!strcmp(u->mounts[k].name, volume))
			return true;
	return false;
}

int vol_fsgroup_packages(const struct pod_spec *pod, const struct unit_spec *u,
			 char *const *sources, char ***seen, struct cerr *e)
{
	if (!pod->has_fs_group || !sources)
		return 0;
	for (size_t i = 0; i < pod->n_volumes; i++) {
		const struct volume *v = &pod->volumes[i];
		char *stamp;

		if (v->kind == VOL_EMPTY_DIR || v->kind == VOL_HOST_PATH ||
		    v->kind == VOL_UNKNOWN || !sources[i] || !*sources[i] ||
		    !unit_uses(u, v->name))
			continue;
		stamp = package_stamp(v->name, sources[i]);
		if (seen_has(*seen, stamp)) {
			free(stamp);
			continue;
		}
		if (fsgroup_apply(sources[i], (gid_t)pod->fs_group,
				  pod->fs_group_on_root_mismatch, true,
				  e) < 0) {
			free(stamp);
			return cerr_prefix(e, "volume %s", v->name);
		}
		seen_set(seen, v->name, stamp);
	}
	return 0;
}

int vol_fsgroup_restart(const struct pod_spec *pod, char *const *sources,
			struct cerr *e)
{
	if (!pod->has_fs_group || !sources)
		return 0;
	for (size_t i = 0; i < pod->n_volumes; i++)
		if (pod->volumes[i].kind == VOL_EMPTY_DIR && sources[i] &&
		    *sources[i] &&
		    fsgroup_apply(sources[i], (gid_t)pod->fs_group,
				  pod->fs_group_on_root_mismatch, false, e) < 0)
			return cerr_prefix(e, "volume %s",
					   pod->volumes[i].name);
	return 0;
}

void vol_unit_mounts_free(struct unit_mounts *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].source);
		free(m->v[i].sub_path);
		free(m->v[i].target);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

static int image_dir(int rootfd, const char *dir, uid_t uid, gid_t gid,
		     struct cerr *e)
{
	char clean[PATH_MAX_INPUT];
	cleanup_close int fd = -1, parent = -1;
	const char *base;
	struct stat st;

	if (path_clean(dir, clean, sizeof(clean), e) < 0)
		return -1;
	if (!*clean)
		return 0; /* VOLUME / */
	fd =
	    path_open_at(rootfd, clean, O_PATH | O_CLOEXEC, 0, PATH_IN_ROOT, e);
	if (fd >= 0) {
		if (fstat(fd, &st) < 0)
			return cerr_sys(e, "stat");
		if (!S_ISDIR(st.st_mode))
			return cerr_set(e, ENOTDIR,
					"exists in the image and is %s",
					fs_type_name(st.st_mode));
		return 0;
	}
	if (e->code != ENOENT)
		return -1;
	cerr_clear(e);
	parent =
	    path_open_parent_at(rootfd, clean, true, PATH_IN_ROOT, &base, e);
	if (parent < 0)
		return -1;
	if (mkdirat(parent, base, 0755) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkdir");
	if (fchownat(parent, base, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
		return cerr_sys(e, "chown");
	return 0;
}

int vol_image_dirs(int rootfd, char *const *dirs, uid_t uid, gid_t gid,
		   struct cerr *e)
{
	for (size_t i = 0; dirs && dirs[i]; i++)
		if (image_dir(rootfd, dirs[i], uid, gid, e) < 0)
			return cerr_prefix(e, "the image's VOLUME %.256s",
					   dirs[i]);
	return 0;
}
