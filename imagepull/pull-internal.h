/* What only cell-pull's own files and tests share. Parsers are pure: buffer
 * in, struct and error out (which is what makes them fuzzable). */
#ifndef CELL_PULL_INTERNAL_H
#define CELL_PULL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "pull.h"

/* Hard caps on documents from the registry. */
#define MANIFEST_MAX (4u << 20)
#define CONFIG_MAX (8u << 20)
#define AUTHFILE_MAX (1u << 20)
#define WWW_AUTH_MAX 8192

#define DOCKER_HUB_HOST "registry-1.docker.io"

/* ---- ref.c: image references, parsed as Docker does ---- */
struct image_ref {
	char *registry;   /* "host[:port]"; Docker Hub is DOCKER_HUB_HOST */
	char *repository; /* "library/busybox" */
	char *tag;        /* NULL only when a digest is given without a tag */
	char *digest;     /* "sha256:…" or NULL */
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
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
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
	bool has_platform;
	struct platform platform;
};

enum manifest_kind { MANIFEST_IMAGE, MANIFEST_INDEX };

struct manifest {
	enum manifest_kind kind;
	char *media_type;
	struct descriptor config;        /* MANIFEST_IMAGE */
	struct descriptor *layers;       /* MANIFEST_IMAGE */
	size_t n_layers;
	struct descriptor *manifests;    /* MANIFEST_INDEX */
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

/* ---- config.c ---- */
int image_config_parse(const char *buf, size_t len, struct image_config *out,
		       struct cerr *e);
void image_config_free(struct image_config *c);

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
 * "https://host/v1/" …; Docker Hub under its index.docker.io names). Sets
 * *user/*pass to NULL when there is no entry. */
int authfile_lookup(const char *json, size_t len, const char *registry,
		    char **user, char **pass, struct cerr *e);
/* Parse a token endpoint reply: "token" or "access_token", "expires_in"
 * (seconds; 60 when absent). */
int token_reply_parse(const char *json, size_t len, char **token,
		      long *expires_in, struct cerr *e);

/* ---- unpack.c: apply one uncompressed tar layer ---- */
struct archive;
enum unpack_mode {
	UNPACK_FLAT,    /* whiteouts delete from rootfd (flattened rootfs) */
	UNPACK_OVERLAY, /* whiteouts become overlayfs form in a layer dir */
};
struct unpack_stats {
	uint64_t entries;
	uint64_t bytes;
};
/* Read every entry of a (tar) archive reader and apply it beneath rootfd.
 * Nothing is ever written outside rootfd: a hostile entry fails the whole
 * layer with a clear error. */
int unpack_layer(struct archive *a, int rootfd, enum unpack_mode mode,
		 struct unpack_stats *st, struct cerr *e);
/* Convenience for tests and tools: a tar (any compression libarchive knows)
 * from an fd. */
int unpack_layer_fd(int tarfd, int rootfd, enum unpack_mode mode,
		    struct unpack_stats *st, struct cerr *e);

#endif
