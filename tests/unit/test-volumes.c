/* Unit tests of pod volumes and unit mounts (agent/volumes.c). Runs as
 * root for the tmpfs of a memory emptyDir. */
/* The fixtures build spec structs from string literals. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "fsutil.h"
#include "util.h"
#include "volumes.h"

#define TMPFS_MAGIC 0x01021994

static char *path_in(const char *dir, const char *rel)
{
	return xasprintf("%s/%s", dir, rel);
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
	ok(m.n == 4 && str_has_suffix(m.v[2].source, "/packages/cfg/sub") &&
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
	vm[0].name = "nope";
	ok(vol_unit_mounts(&pod, &u, src, &d, &m, &e) < 0 && e.code == ENOENT,
	   "unknown volume refused (%s)", e.msg);
	v[3].path = "relative";
	ok(vol_prepare(&pod, &d, &src, &e) < 0 && e.code == EINVAL,
	   "relative hostPath refused");

	umount2(src[1], MNT_DETACH);
	strv_free(src);
	fs_rm_rf(top, &e);
	free(vols);
	free(pkgs);
	free(hosts);
	free(cfg);
	return tap_done();
}
