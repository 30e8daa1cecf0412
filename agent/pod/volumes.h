// SPDX-License-Identifier: Apache-2.0
/* Pod volumes on the host and the bind mounts of each unit (volumes.c). */
#ifndef CELL_VOLUMES_H
#define CELL_VOLUMES_H

#include <stdbool.h>
#include <stddef.h>

#include "podspec.h"
#include "err.h"

struct vol_dirs {
	const char *volumes_dir;  /* emptyDir volumes live here */
	const char *packages_dir; /* deploy packages: <dir>/<name>/ */
};

struct unit_mount {
	char *source;	/* host path: a volume's root, a package, a file */
	char *sub_path; /* NULL, or clean and relative: the monitor resolves
			 * it beneath source at the mount (a unit may change
			 * what it names at any time) */
	char *target;	/* path inside the container */
	bool read_only;
};

struct unit_mounts {
	struct unit_mount *v;
	size_t n;
};

/* Make every volume's host directory exist (tmpfs for memory emptyDirs);
 * *sources[i] is volume i's host path (a NULL-terminated vector), "" for a
 * volume that failed (the first failure is returned; the rest are still
 * prepared, and a unit mounting a failed one retries it). */
int vol_prepare(const struct pod_spec *pod, const struct vol_dirs *d,
		char ***sources, struct cerr *e);
/* The bind mounts of unit u: /etc/hosts and /etc/resolv.conf from the
 * controller's packages unless the unit mounts those paths itself, then
 * each volumeMount (a packagePath volume's path beneath its package, a
 * file or a directory, and ENOENT when missing; a missing subPath made
 * beneath the volume as the kubelet makes it; configMap, secret and
 * projected volumes read-only). Nothing is resolved to a host path: each
 * mount is a root the agent owns plus a sub_path for the monitor. */
int vol_unit_mounts(const struct pod_spec *pod, const struct unit_spec *u,
		    char *const *sources, const struct vol_dirs *d,
		    struct unit_mounts *out, struct cerr *e);
void vol_unit_mounts_free(struct unit_mounts *m);
/* fsGroup is applied when a volume is set up, never at a unit's start
 * (the kubelet's SetVolumeOwnership at SetUp): an emptyDir in vol_prepare,
 * when it is made (its root does not have the group yet); a package volume
 * (configMap, secret, projected, packagePath: read-only for the pod, or
 * the controller's) here, before the first unit that mounts it starts
 * after each deploy of it. *seen (the caller's, a vector) remembers the
 * version each walk saw. Not hostPath, as the kubelet. */
int vol_fsgroup_packages(const struct pod_spec *pod, const struct unit_spec *u,
			 char *const *sources, char ***seen, struct cerr *e);
/* A pod restart (every unit stopped, starting over): each emptyDir walked
 * again, with fsGroupChangePolicy (Always: all of it; OnRootMismatch:
 * only when its root lost the group). */
int vol_fsgroup_restart(const struct pod_spec *pod, char *const *sources,
			struct cerr *e);
/* The image's VOLUME directories (config.Volumes), made in the unit's
 * rootfs as Itzo makes them: a missing one is created (its missing
 * parents 0755 root-owned) and given to the unit's uid and gid; one the
 * image has keeps the owner and mode the image gives it (Docker). A path
 * that exists as something else is an error. */
int vol_image_dirs(int rootfd, char *const *dirs, uid_t uid, gid_t gid,
		   struct cerr *e);

#endif
