// SPDX-License-Identifier: Apache-2.0
/* Lazy eStargz layers (docs/imagepull.md "Lazy pulling"): a layer read
 * chunk by chunk over HTTP range requests (lazy.c) and served read-only
 * through FUSE (lazyfs.c) by a cell-pull process of its own. */
#ifndef CELL_LAZY_H
#define CELL_LAZY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "estargz.h"
#include "pull-internal.h"

struct lazy_stats {
	atomic_uint_fast64_t ondemand_bytes; /* compressed, fetched for reads */
	atomic_uint_fast64_t background_bytes; /* prefetch and background */
	atomic_uint_fast64_t ondemand_fetches, ondemand_ns;
	atomic_uint_fast64_t refused; /* chunks whose digest did not match */
};

struct lazy_layer {
	struct registry *reg; /* borrowed; thread-safe */
	char digest[DIGEST_STR_MAX];
	uint64_t size;
	struct esgz_toc toc;
	int chunk_dir; /* <workdir>/lazy/<hex>/chunks: verified chunks */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int reading; /* on-demand fetches under way: background waits */
	bool stop, bg_running;
	pthread_t bg;
	struct lazy_stats st;
};

/* Fetch the footer and the TOC of layer d (which must carry a TOC digest
 * annotation), check the TOC against it, parse it; chunks are kept under
 * the cache's lazy/<hex>/chunks/. */
int lazy_open(struct registry *reg, const struct cache *c,
	      const struct descriptor *d, struct lazy_layer **out,
	      struct cerr *e);
void lazy_close(struct lazy_layer *l);
/* File data of node: [off, off + len) into out; *got is short only at
 * the end of the file. Each chunk is checked against its chunkDigest
 * before a byte of it is copied: a mismatch is EIO. */
int lazy_read(struct lazy_layer *l, const struct esgz_node *nd, uint64_t off,
	      size_t len, char *out, size_t *got, struct cerr *e);
/* The prioritized files (before .prefetch.landmark) in one range
 * request. */
int lazy_prefetch(struct lazy_layer *l, struct cerr *e);
/* Start fetching every chunk not yet on disk, one span at a time, giving
 * way to on-demand reads. */
void lazy_background_start(struct lazy_layer *l);
/* Have all chunks arrived? */
bool lazy_complete(struct lazy_layer *l);

/* lazyfs.c: serve l at mountpoint until it is unmounted or a SIGTERM or
 * SIGINT comes; ready() is called once the mount is there and the
 * prefetch done. */
int lazyfs_serve(struct lazy_layer *l, const char *mountpoint,
		 void (*ready)(void *arg), void *arg, struct cerr *e);

#endif
