// SPDX-License-Identifier: Apache-2.0
/* cell-pull as a library: the agent calls pull_image() in-process. */
#ifndef CELL_PULL_H
#define CELL_PULL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The parts of an image's config that a runtime needs. */
struct image_config {
	char *os, *architecture, *variant;
	char **env;	      /* "K=V" strings; NULL-terminated, may be NULL */
	char **entrypoint;    /* NULL when unset */
	char **cmd;	      /* NULL when unset */
	char *working_dir;    /* NULL when unset */
	char *user;	      /* NULL when unset */
	char *stop_signal;    /* NULL when unset */
	char **exposed_ports; /* "80/tcp" … */
	char **volumes;
	char **diff_ids; /* one per layer, bottom first */
	size_t n_diff_ids;
};
/* An image config blob (config.c); the agent reads the copy a pull left
 * beside the rootfs. */
int image_config_parse(const char *buf, size_t len, struct image_config *out,
		       struct cerr *e);
void image_config_free(struct image_config *c);

enum pull_event_kind {
	PULL_EV_RESOLVED, /* manifest and config known; n_layers set */
	PULL_EV_LAYER,	  /* progress of one layer */
	PULL_EV_LAYER_DONE,
	PULL_EV_DONE,
	PULL_EV_WARNING, /* message: something the user should see */
};

struct pull_event {
	enum pull_event_kind kind;
	int layer; /* index, bottom first; -1 for image-wide events */
	int n_layers;
	const char *digest;  /* the layer's blob digest */
	uint64_t downloaded; /* compressed bytes fetched so far */
	uint64_t size;	     /* compressed size from the manifest */
	bool cached;	     /* the layer needed no download */
	const char *message; /* PULL_EV_WARNING */
};

typedef void (*pull_progress_fn)(const struct pull_event *ev, void *arg);

struct pull_opts {
	const char *image;	/* reference, Docker's rules */
	const char *workdir;	/* cache root */
	const char *extract_to; /* flattened rootfs here, or NULL */
	const char *mount_at;	/* overlay mount here, or NULL */
	const char *upper_dir; /* overlay upper/work parent; default in cache */
	const char *username;  /* registry credentials, or NULL */
	const char *password;
	const char *auth_file;	  /* docker config.json, or NULL */
	const char *registry_url; /* base URL that overrides the ref's host */
	const char *const *insecure; /* hosts reached over plain HTTP */
	const char *platform; /* "os/arch[/variant]"; NULL = this machine */
	const char *ca_file;  /* extra CA bundle for registry TLS */
	int parallel;	      /* concurrent layers; 0 = default (4) */
	int retries;	      /* per request; 0 = default (8) */
	bool validate_cache;  /* re-hash cached blobs before use */
	/* Free space a pull never eats into, on the disk it unpacks to and
	 * the cache's; an image that would need it fails with ENOSPC ("does
	 * not fit") and what it wrote is removed. 0: the default, 5% of the
	 * filesystem and at most 256 MiB (unpack_reserve). */
	uint64_t keep_free;
	/* A read-only second tier (an NFS share a cluster job populates):
	 * its layers are used in place, its configs and manifests after a
	 * hash check; tags are still asked of the registry, and the share's
	 * record is used when the registry cannot be reached. */
	const char *shared_cache;
	/* Write the workdir as a shared cache (cell-pull --populate). */
	bool populate;
	/* Serve this eStargz layer of the image (its blob digest) read-only
	 * through FUSE at mount_at, chunks fetched on demand, until it is
	 * unmounted or a SIGTERM comes (cell-pull --lazy-layer). PULL_EV_DONE
	 * says the mount is ready. */
	const char *lazy_layer;
	/* An overlay pull (mount_at) serves the image's eStargz layers (the
	 * manifest's TOC digest annotation) lazily, each by a process of its
	 * own: this program, run with --lazy-layer (cell-pull's own path).
	 * NULL: lazy pulling is off, every layer is pulled whole. */
	const char *lazy_exe;
	pull_progress_fn progress;
	void *progress_arg;
};

struct pull_result {
	char *manifest_digest;
	char *config_digest;
	char *config_json; /* the raw config blob */
	size_t config_len;
	struct image_config config;
	int n_layers;
	int layers_cached; /* how many needed no download */
	int layers_shared; /* of those, used in place from the shared tier */
	int layers_lazy;   /* served lazily through FUSE (not in cached) */
};

int pull_image(const struct pull_opts *o, struct pull_result *res,
	       struct cerr *e);
/* The registry host an image reference names, as pull_image will contact
 * it ("registry-1.docker.io" for Docker Hub); NULL with e set when the
 * reference is malformed. */
char *pull_registry_of(const char *image, struct cerr *e);
/* Do two registry names mean the same registry? Docker Hub's aliases
 * (docker.io, index.docker.io, registry-1.docker.io, with or without a
 * scheme or a /v1/ path) all match each other. */
bool pull_same_registry(const char *a, const char *b);
void pull_result_free(struct pull_result *r);
/* Release the library's process-wide state (libcurl's), for a caller that
 * is about to unload it; no pull may be running. */
void pull_library_cleanup(void);

/* The cache's answer for a --mount pull, without the registry (cached.c,
 * curl-free: cell-pull-cached links only this and the cache, and the agent
 * calls it in process for a unit start). Served: a
 * reference by digest, or by a tag other than "latest" (Kubernetes'
 * IfNotPresent default), whose record, config blob and unpacked layers are
 * all in the cache and were pulled for this machine's platform. Returns 1
 * with the overlay mounted and the config saved, 0 when the registry must
 * be asked (nothing was changed), -1 with e set when the mount failed. */
struct pull_cached_opts {
	const char *image, *workdir, *mount_at, *upper_dir, *save_config;
	const char *shared_cache; /* layers found there are used in place */
	bool no_wait; /* a gc holding the cache is a miss, not a wait */
	/* The unit asked for IfNotPresent or Never: a cached image serves
	 * for any tag, "latest" too (the default policy re-resolves it). */
	bool any_tag;
};
int pull_from_cache(const struct pull_cached_opts *o, struct cerr *e);

/* Undo a --mount: unmount DIR (the upper layer stays in the cache). */
int pull_unmount(const char *mountpoint, struct cerr *e);
/* Reclaim space: remove leftovers of crashed pulls and every blob or layer
 * that no recorded image uses. */
struct pull_gc_stats {
	uint64_t removed_files;
	uint64_t removed_bytes;
};
int pull_gc(const char *workdir, struct pull_gc_stats *st, struct cerr *e);

#endif
