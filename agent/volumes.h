// SPDX-License-Identifier: Apache-2.0
/* Pod volumes on the host and the bind mounts of each unit (volumes.c). */
#ifndef CELL_VOLUMES_H
#define CELL_VOLUMES_H

#include <stdbool.h>
#include <stddef.h>

#include "agent-internal.h"
#include "err.h"

struct vol_dirs {
	const char *volumes_dir;  /* emptyDir volumes live here */
	const char *packages_dir; /* deploy packages: <dir>/<name>/ */
};

struct unit_mount {
	char *source; /* host path */
	char *target; /* path inside the container */
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
 * each volumeMount (a packagePath volume's path resolved beneath its
 * package, a file or a directory, and ENOENT when missing; subPath resolved
 * beneath the volume; configMap, secret and projected volumes read-only). */
int vol_unit_mounts(const struct pod_spec *pod, const struct unit_spec *u,
		    char *const *sources, const struct vol_dirs *d,
		    struct unit_mounts *out, struct cerr *e);
void vol_unit_mounts_free(struct unit_mounts *m);
/* The image's VOLUME directories (config.Volumes), made in the unit's
 * rootfs as Itzo makes them: a missing one is created (its missing
 * parents 0755 root-owned) and given to the unit's uid and gid; one the
 * image has keeps the owner and mode the image gives it (Docker). A path
 * that exists as something else is an error. */
int vol_image_dirs(int rootfd, char *const *dirs, uid_t uid, gid_t gid,
		   struct cerr *e);

#endif
