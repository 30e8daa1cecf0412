// SPDX-License-Identifier: Apache-2.0
/* What only cell-pull's own files and tests share. Parsers are pure: buffer
 * in, struct and error out (which is what makes them fuzzable). */
#ifndef CELL_PULL_INTERNAL_H
#define CELL_PULL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "pull.h"

/* Hard caps on documents from the registry. */
#define MANIFEST_MAX (4u << 20)
#define CONFIG_MAX (8u << 20)
#define DEFAULT_WORKDIR "/var/lib/cell/images"
#define AUTHFILE_MAX (1u << 20)
#define WWW_AUTH_MAX 8192

#define DOCKER_HUB_HOST "registry-1.docker.io"

/* ---- ref.c: image references, parsed as Docker does ---- */
struct image_ref {
	char *registry;	  /* "host[:port]"; Docker Hub is DOCKER_HUB_HOST */
	char *repository; /* "library/busybox" */
	char *tag;	  /* NULL only when a digest is given without a tag */
	char *digest;	  /* "sha256:…" or NULL */
};
int ref_parse(const char *s, struct image_ref *out, struct cerr *e);
void ref_free(struct image_ref *r);
/* "registry/repository[:tag][@digest]" */
char *ref_string(const struct image_ref *r);

/* ---- platform.c ---- */
struct platform {
	char os[32];
	char arch[32];
	char variant[32]; /* "" when none */
};
int platform_parse(const char *s, struct platform *p, struct cerr *e);
/* This machine: linux plus uname's architecture in Go's spelling. */
void platform_default(struct platform *p);
/* Canonical spellings: x86_64 → amd64, aarch64 → arm64, arm64 without a
 * variant → v8, armhf → arm/v7 and so on. */
void platform_normalize(struct platform *p);

/* ---- manifest.c ---- */
#define MT_DOCKER_MANIFEST                                                     \
	"application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST                                                         \
	"application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_ACCEPT                                                              \
	MT_OCI_INDEX ", " MT_DOCKER_LIST ", " MT_OCI_MANIFEST                  \
		     ", " MT_DOCKER_MANIFEST

enum compression { COMP_NONE, COMP_GZIP, COMP_ZSTD };

struct descriptor {
	char *media_type;
	char *digest;
	int64_t size;
	char *toc_digest; /* eStargz: the TOC's digest annotation, or NULL */
	bool has_platform;
	struct platform platform;
};

enum manifest_kind { MANIFEST_IMAGE, MANIFEST_INDEX };

struct manifest {
	enum manifest_kind kind;
	char *media_type;
	struct descriptor config;  /* MANIFEST_IMAGE */
	struct descriptor *layers; /* MANIFEST_IMAGE */
	size_t n_layers;
	struct descriptor *manifests; /* MANIFEST_INDEX */
	size_t n_manifests;
};

/* content_type is the HTTP Content-Type (may be NULL); the document's own
 * mediaType wins when present. Every digest is validated. */
int manifest_parse(const char *buf, size_t len, const char *content_type,
		   struct manifest *out, struct cerr *e);
void manifest_free(struct manifest *m);
const struct descriptor *manifest_select(const struct manifest *index,
					 const struct platform *want,
					 struct cerr *e);
/* The compression of a layer media type; EINVAL for unknown types. */
int layer_compression(const char *media_type, enum compression *out,
		      struct cerr *e);

/* ---- auth.c ---- */
struct www_auth {
	char *scheme; /* "Bearer" or "Basic" as sent */
	char *realm;
	char *service;
	char *scope;
	char *error;
};
int www_auth_parse(const char *header, struct www_auth *out, struct cerr *e);
void www_auth_free(struct www_auth *w);
/* Look registry up in a docker config.json ("auths": host, "https://host",
 * "https://host/v1/"; Docker Hub under its index.docker.io names). Sets
 * *user and *pass to NULL when there is no entry. */
int authfile_lookup(const char *json, size_t len, const char *registry,
		    char **user, char **pass, struct cerr *e);
/* Parse a token endpoint reply: "token" or "access_token", "expires_in"
 * (seconds; 60 when absent). */
int token_reply_parse(const char *json, size_t len, char **token,
		      long *expires_in, struct cerr *e);

/* ---- unpack.c: the extraction core, see unpack.h ---- */
#include "unpack.h"

/* ---- decompress.c: streaming gzip (ISA-L), zstd and plain layers ---- */
struct decomp;
/* Guess from the first bytes (gzip and zstd magic); the media type is only a
 * hint, as in Docker. */
enum compression compression_sniff(const void *p, size_t n);
struct decomp *decomp_new(enum compression c);
/* Consume input and produce output. *end is set once the compressed stream
 * ended (for plain streams: never; the caller ends at end of input). */
int decomp_run(struct decomp *d, const void *in, size_t in_len,
	       size_t *consumed, void *out, size_t out_cap, size_t *produced,
	       bool *end, struct cerr *e);
/* After the input ran out: is the stream complete? */
bool decomp_finished(const struct decomp *d);
void decomp_free(struct decomp *d);

/* ---- registry.c: the distribution API over libcurl ---- */
struct registry;
struct registry_opts {
	const char *username, *password; /* NULL: anonymous */
	const char *registry_url;	 /* overrides the ref's host */
	const char *ca_file;
	const char *const *insecure; /* hosts reached over plain HTTP */
	int retries;		     /* attempts after the first */
};
int registry_open(const struct image_ref *ref, const struct registry_opts *o,
		  struct registry **out, struct cerr *e);
void registry_close(struct registry *r);
/* GET a manifest by tag or digest into body (capped at MANIFEST_MAX). */
int registry_get_manifest(struct registry *r, const char *reference,
			  struct buf *body, char **content_type,
			  struct cerr *e);
/* GET a small blob into body (body->max is the cap). */
int registry_get_blob(struct registry *r, const char *digest, struct buf *body,
		      struct cerr *e);
/* Stream a blob from byte offset to sink. A dropped connection or a 5xx is
 * retried with back-off and resumed with Range where it stopped. A sink that
 * returns < 0 aborts the transfer (its error is in e). */
typedef int (*blob_sink_fn)(void *arg, const void *p, size_t n, struct cerr *e);
int registry_stream_blob(struct registry *r, const char *digest,
			 uint64_t offset, blob_sink_fn sink, void *arg,
			 struct cerr *e);
/* Blob bytes [from, from + len) into body (Range; a 206 is required). A
 * try is cut after CELL_PULL_RANGE_TIMEOUT_MS (20 s) and retried
 * CELL_PULL_RANGE_RETRIES (2) times: a stalled registry is an error in
 * bounded time. A 401 renews the token as any request does. On failure
 * why (REGISTRY_WHY_MAX bytes, or NULL) says it in a few words for a
 * status line: "timed out after 3 tries", "HTTP 503 after 3 tries",
 * "connection refused after 3 tries", "HTTP 404". */
#define REGISTRY_WHY_MAX 64
int registry_get_range(struct registry *r, const char *digest, uint64_t from,
		       size_t len, struct buf *body, char *why, struct cerr *e);
/* The registry's host (and port) as it is contacted: "host:5000". */
const char *registry_host(const struct registry *r);
/* Change the retries of the next requests (the shared tier's tag fallback
 * asks once); returns the old value. */
int registry_set_retries(struct registry *r, int retries);
/* Did the last failed request fail without an HTTP answer (refused,
 * timed out, DNS) or with a 5xx: the registry cannot serve now. */
bool registry_unreachable(const struct registry *r);

/* ---- cache.c: the content-addressed cache under --workdir ----
 * blobs/sha256/<hex>     verified blobs: manifests, configs, layers
 * layers/sha256/<hex>/   unpacked layers by diff-id, overlayfs form
 * l/<12 hex>             short names for overlay lowerdirs
 * tmp/                   work in progress: blob-<hex>, layer-<hex>
 * locks/                 flock files, one per digest, plus "gc"
 * images/<hex>.json      one record per pulled reference
 * mounts/<16 hex>/       upper and work dirs of --mount targets */
struct cache {
	char *root;
	int fd;
	int gc_lock; /* held shared for a pull's lifetime, exclusive by gc */
	/* A shared cache being populated (cell-pull --populate): layers are
	 * layers/<algo>/<hex>/{diff/,complete}, readable by all. */
	bool shared_layout;
};
/* How cache_open takes locks/gc: shared for a pull (waiting out a gc),
 * shared or not at all (EWOULDBLOCK) for a caller that must not wait, or
 * exclusive for gc. */
enum cache_lock { CACHE_USE, CACHE_USE_NOWAIT, CACHE_GC };
int cache_open(const char *root, enum cache_lock how, struct cache *c,
	       struct cerr *e);
void cache_close(struct cache *c);
/* A path under the cache root; the caller frees it. */
char *cache_path(const struct cache *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Exclusive flock on locks/<algo>-<hex>; returns the fd to close. */
int cache_lock(const struct cache *c, const char *digest, struct cerr *e);
/* A committed blob of the given size (size < 0: any). */
bool cache_has_blob(const struct cache *c, const char *digest, int64_t size);
/* Read a small committed blob and check its digest; ENOENT when absent;
 * a corrupt blob is removed and reported as EBADMSG. */
int cache_read_blob(const struct cache *c, const char *digest, struct buf *out,
		    struct cerr *e);
/* Re-hash a committed blob; a corrupt one is removed (EBADMSG). */
int cache_verify_blob(const struct cache *c, const char *digest,
		      struct cerr *e);
/* Store a small blob whose digest the caller has checked. */
int cache_put_blob(const struct cache *c, const char *digest, const void *data,
		   size_t len, struct cerr *e);
bool cache_has_layer(const struct cache *c, const char *diff_id);
/* Turn the cache into a shared one (populate): its marker, modes that
 * other machines' root (often squashed to nobody) can read. */
int cache_make_shared(struct cache *c, struct cerr *e);
/* What a record of a pulled reference says about its image: enough to
 * mount it again without the registry (cached.c). */
struct cache_image {
	char *config;	/* the config blob's digest */
	char *platform; /* "os/arch[/variant]" it was picked for */
	char **diff_ids;
	size_t n_diff_ids;
};
#define IMAGE_RECORD_MAX (1u << 20)
/* Record a successful pull: every blob it used (for gc) and img. */
int cache_record_image(const struct cache *c, const char *ref,
		       const char *const *digests, size_t n,
		       const struct cache_image *img, struct cerr *e);
/* The record of ref (ref_string's spelling); ENOENT when there is none or
 * it is not usable (written by an older cell-pull, or damaged). */
int cache_find_image(const struct cache *c, const char *ref,
		     struct cache_image *img, struct cerr *e);
void cache_image_free(struct cache_image *img);

/* ---- mount.c: overlayfs over cached layers ----
 * lower_fds (NULL, or one per diff-id): a layer whose fd is >= 0 is used
 * through that descriptor (a shared layer) instead of the local cache.
 * lower_names (NULL, or one per diff-id): a layer whose name is set is
 * that directory, relative to the cache root (a lazy layer's FUSE mount,
 * lazy/<algo>-<hex>/mnt: by name, so the gc sees in mountinfo who uses
 * it). */
int overlay_mount(const struct cache *c, char *const *diff_ids, size_t n,
		  const int *lower_fds, char *const *lower_names,
		  const char *target, const char *upper_parent, struct cerr *e);

/* ---- sharerec.c: the shared cache's records (pure, fuzzed) ----
 * layers/<algo>/<hex>/complete   {"version":1,"diff_id":…,"blob":…}
 * tags/<sha256(ref platform)>.json
 *        {"version":1,"ref":…,"platform":…,"manifest":…,"config":…} */
#define SHARE_REC_MAX (64u << 10)
#define SHARE_MARKER "cell-shared-cache"
#define SHARE_MARKER_TEXT "cell shared image cache 1"
struct share_layer_rec {
	char *diff_id;
	char *blob; /* the compressed blob it was unpacked from, or NULL */
	/* Probes (NULL: none): an opaque directory and a whiteout of the
	 * layer ("." is its root). A share that lost them (NFS keeps no
	 * trusted.* xattrs; some servers no device nodes) would show a lower
	 * layer's files: a cell checks them before using the layer. */
	char *opaque, *whiteout;
};
int share_layer_rec_parse(const char *buf, size_t len,
			  struct share_layer_rec *out, struct cerr *e);
char *share_layer_rec_format(const struct share_layer_rec *r);
void share_layer_rec_free(struct share_layer_rec *r);
struct share_tag_rec {
	char *ref;	/* ref_string's spelling */
	char *platform; /* "os/arch[/variant]" */
	char *manifest; /* the image manifest for that platform */
	char *config;
};
int share_tag_rec_parse(const char *buf, size_t len, struct share_tag_rec *out,
			struct cerr *e);
char *share_tag_rec_format(const struct share_tag_rec *r);
void share_tag_rec_free(struct share_tag_rec *r);
/* "tags/<hex>.json", the record's path for ref on platform. */
char *share_tag_key(const char *ref, const char *platform);

/* ---- shared.c: reading the shared cache (curl-free) ---- */
struct shared {
	char *root;
	int fd; /* -1: none */
};
/* Open a shared cache; it must hold its marker (an empty mount point, a
 * failed NFS mount, is not a cache). */
int shared_open(const char *dir, struct shared *s, struct cerr *e);
void shared_close(struct shared *s);
/* The unpacked layer's directory (an fd for overlayfs), when its
 * completion record is there and names diff_id; EBADMSG when damaged or
 * half written, ENOENT when absent. */
int shared_layer_open(const struct shared *s, const char *diff_id,
		      struct cerr *e);
/* A small blob (manifest, config), hashed against digest. */
int shared_read_blob(const struct shared *s, const char *digest,
		     struct buf *out, struct cerr *e);
/* A layer blob to read (its content is checked by the diff-id). */
int shared_blob_fd(const struct shared *s, const char *digest, int64_t size,
		   struct cerr *e);
int shared_find_tag(const struct shared *s, const char *ref,
		    const char *platform, struct share_tag_rec *rec,
		    struct cerr *e);
/* "os/arch[/variant]" */
char *platform_string(const struct platform *p);
/* The populator's probes of a layer it unpacked (its own tree): the first
 * opaque directory and whiteout found, or NULL. */
void shared_find_probes(int rootfd, char **opaque, char **whiteout);

#endif
