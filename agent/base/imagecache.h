// SPDX-License-Identifier: Apache-2.0
/* The shared image cache as the agent sees it: a directory the pullers
 * read as a second, read-only tier of the image cache (docs/boot.md,
 * "Shared image cache"). Either given as is (--shared-image-cache DIR) or
 * an NFS export (imageCacheEndpoint in cell_config.yaml) that a background
 * thread mounts read-only, retrying with back-off; until it is mounted,
 * and if it never is, pulls simply go to the registry. Nothing here ever
 * blocks the API or a pod's start. */
#ifndef CELL_AGENT_IMAGECACHE_H
#define CELL_AGENT_IMAGECACHE_H

struct imagecache_opts {
	const char *dir;	/* --shared-image-cache: used as is */
	const char *endpoint;	/* "host:/path": mounted on mount_dir */
	const char *mount_dir;	/* default /nfs */
	const char *mount_opts; /* words for mount(8); default "-o ro" */
	const char *mount_cmd;	/* mount(8) (a test seam); /bin/mount */
	int retry_ms;		/* first back-off step (default 1000) */
};

/* Start: with an endpoint, the mount thread (detached; it ends once the
 * share is mounted). */
void imagecache_start(const struct imagecache_opts *o);
/* The directory to pass to the pullers, or NULL while there is none. */
const char *imagecache_dir(void);
/* The argv of the mount command for o (NULL-terminated; strv_free it).
 * Read-only whatever the options say: "-o ro" always comes last. */
char **imagecache_mount_argv(const struct imagecache_opts *o);

#endif
