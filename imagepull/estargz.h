// SPDX-License-Identifier: Apache-2.0
/* eStargz layers (stargz-snapshotter's docs/estargz.md): the footer, the
 * TOC (stargz.index.json) and the tree it describes, as typed structs.
 * estargz.c is pure (buffer in, struct and cerr out; fuzzed by
 * tests/fuzz/fuzz-estargz.c) and refuses a hostile TOC with the rules the
 * hostile-tar core (unpack.c) applies to a tar: a ".." component, a
 * hardlink that leaves the tree or names no earlier file, a name twice,
 * sizes, entries and names beyond caps, and, the TOC's own risks, chunks
 * that overlap, go backwards, leave gaps or lie beyond the TOC. */
#ifndef CELL_ESTARGZ_H
#define CELL_ESTARGZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "digest.h"
#include "err.h"

#define ESGZ_FOOTER_SIZE 51
#define ESGZ_LEGACY_FOOTER_SIZE 47
#define ESGZ_TOC_NAME "stargz.index.json"
#define ESGZ_TOC_ANNOTATION "containerd.io/snapshot/stargz/toc.digest"
#define ESGZ_PREFETCH_LANDMARK ".prefetch.landmark"
#define ESGZ_NO_PREFETCH_LANDMARK ".no.prefetch.landmark"

/* Caps on what a registry may make us hold. */
#define ESGZ_TOC_GZ_MAX (64u << 20)    /* the TOC's gzip member */
#define ESGZ_TOC_JSON_MAX (128u << 20) /* its JSON */
#define ESGZ_ENTRIES_MAX (1u << 20)
#define ESGZ_CHUNK_MAX (32u << 20)   /* one chunk, decompressed */
#define ESGZ_FILE_MAX (64ull << 30)  /* one regular file */
#define ESGZ_XATTRS_MAX (64u * 1024) /* names + values, per entry */
#define ESGZ_LINK_MAX 4096	     /* a symlink's target */

struct esgz_chunk {
	uint64_t offset;   /* the gzip member holding it, in the blob */
	uint64_t end;	   /* where that member's compressed bytes end */
	uint64_t inner;	   /* innerOffset: where it starts, decompressed */
	uint64_t file_off; /* chunkOffset: its place in the file */
	uint64_t size;	   /* decompressed bytes (never 0) */
	char digest[DIGEST_STR_MAX];
};

struct esgz_xattr {
	char *name;
	void *value;
	size_t len;
};

/* One inode: what stat shows. Whiteouts are already in overlayfs's form
 * (a character device 0/0 under the victim's name; an opaque directory
 * carries trusted.overlay.opaque "y"), as unpack.c writes a layer. */
struct esgz_node {
	mode_t mode; /* S_IFxxx | permissions */
	uint32_t uid, gid;
	uint32_t nlink;
	uint64_t size;
	dev_t rdev;
	int64_t mtime;
	char *link; /* symlink target */
	size_t first_chunk, n_chunks;
	struct esgz_xattr *xattrs;
	size_t n_xattrs;
	bool opaque;
	size_t *children; /* directory entries (indexes into dents), by name */
	size_t n_children, cap_children;
};

/* One name: a directory entry. Hard links are several names of a node. */
struct esgz_dent {
	char *path;	  /* cleaned, "" for the root */
	const char *base; /* last component, inside path */
	size_t parent;	  /* the directory's node */
	size_t node;
};

struct esgz_toc {
	struct esgz_node *nodes; /* [0] is the root directory */
	size_t n_nodes;
	struct esgz_dent *dents; /* [0] is the root's */
	size_t n_dents;
	struct esgz_chunk *chunks; /* in blob order */
	size_t n_chunks;
	uint64_t toc_offset;
	/* Blob bytes [0, prefetch_end) hold the prioritized files (0: no
	 * .prefetch.landmark). */
	uint64_t prefetch_end;
	uint64_t data_bytes; /* sum of regular file sizes */
};

/* The footer at the end of a blob of blob_size bytes: tail holds its last
 * n bytes (n >= 51, or 47 for the legacy stargz footer). Sets the TOC's
 * offset and the footer's size. EINVAL when it is not eStargz. */
int esgz_footer_parse(const void *tail, size_t n, uint64_t blob_size,
		      uint64_t *toc_offset, size_t *footer_size,
		      struct cerr *e);
/* The TOC's gzip member (blob bytes [toc_offset, size - footer)): the JSON
 * of its one tar entry, stargz.index.json, into *json (owned, *len). */
int esgz_toc_extract(const void *gz, size_t n, char **json, size_t *len,
		     struct cerr *e);
/* Parse and check a TOC. */
int esgz_toc_parse(const char *json, size_t len, uint64_t toc_offset,
		   struct esgz_toc *out, struct cerr *e);
void esgz_toc_free(struct esgz_toc *t);
/* The dent of name in directory node dir, or (size_t)-1. */
size_t esgz_lookup(const struct esgz_toc *t, size_t dir, const char *name);
/* The chunks of node covering [off, off + len): *first and *n. */
void esgz_chunks_for(const struct esgz_toc *t, const struct esgz_node *nd,
		     uint64_t off, uint64_t len, size_t *first, size_t *n);

#endif
