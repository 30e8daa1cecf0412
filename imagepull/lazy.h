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
	atomic_uint_fast64_t failed_reads; /* lazy_read calls that failed */
};

/* The last failed read's cause, one line of printable ASCII for the
 * unit's status (docs/imagepull.md "Counters"): "range read of layer
 * sha256:0123456789ab... from reg:5000: timed out after 3 tries". */
#define LAZY_FAILURE_MAX 160

struct lazy_layer {
	struct registry *reg; /* borrowed; thread-safe */
	char digest[DIGEST_STR_MAX];
	char diff_id[DIGEST_STR_MAX]; /* "": never promoted */
	char toc_digest[DIGEST_STR_MAX];
	char *cache_root; /* for the promotion, which opens the cache anew */
	uint64_t size;
	struct esgz_toc toc;
	int dir;       /* <workdir>/lazy/<algo>-<hex> */
	int chunk_dir; /* <dir>/chunks: verified chunks */
	/* The blob as it arrives in order (prefetch, then the background
	 * fetch), hashed as it grows: <dir>/blob.part. When it is whole and
	 * its digest and every chunk check out, it is the blob the ordinary
	 * unpacker turns into a cached layer (lazy_promote). */
	int spool;
	uint64_t spool_pos; /* the in-order, hashed prefix (under mu) */
	/* Members reads fetched beyond spool_pos, already in the spool (under
	 * mu): the background fetch hashes them from there, never fetches
	 * them again. Sorted, disjoint. */
	struct lazy_range {
		uint64_t from, to;
	} * have;
	size_t n_have, cap_have;
	uint64_t span_to;  /* the background's request under way: its end */
	size_t next_chunk; /* the first chunk not yet taken from the spool */
	struct hasher spool_hash;
	atomic_bool promoted;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int reading;	   /* on-demand fetches under way: background waits */
	uint8_t *fetching; /* per chunk: a read is fetching it (under mu) */
	bool stop, bg_running;
	pthread_t bg;
	struct lazy_stats st;
	/* The stats file's writers (the thread, a failed read) take turns
	 * under stats_mu, which also guards last_failure. */
	pthread_mutex_t stats_mu;
	char last_failure[LAZY_FAILURE_MAX];
	/* The stats file's writer (lazy_stats_start): under mu. */
	pthread_t stats_th;
	pthread_cond_t stats_cv;
	bool stats_running, stats_stop;
};

/* Fetch the footer and the TOC of layer d (which must carry a TOC digest
 * annotation), check the TOC against it, parse it; chunks are kept under
 * the cache's lazy/<algo>-<hex>/chunks/. diff_id (the config's, or NULL):
 * once the background fetch has the whole blob, the layer is unpacked
 * into layers/<diff_id> as a full pull would. */
int lazy_open(struct registry *reg, const struct cache *c,
	      const struct descriptor *d, const char *diff_id,
	      struct lazy_layer **out, struct cerr *e);
void lazy_close(struct lazy_layer *l);
/* File data of node: [off, off + len) into out; *got is short only at
 * the end of the file. Each chunk is checked against its chunkDigest
 * before a byte of it is copied: a mismatch is EIO. A failure is counted
 * (failed_reads), its cause kept as last_failure, and the stats file
 * written at once, before the reader sees its EIO. */
int lazy_read(struct lazy_layer *l, const struct esgz_node *nd, uint64_t off,
	      size_t len, char *out, size_t *got, struct cerr *e);
/* The prioritized files (before .prefetch.landmark) in one range
 * request: the blob's first bytes, into the spool. */
int lazy_prefetch(struct lazy_layer *l, struct cerr *e);
/* Start fetching the rest of the blob in order, a span at a time, giving
 * way to on-demand reads; each chunk is taken from it as its member
 * arrives; at the end the layer is promoted (lazy_promote). */
void lazy_background_start(struct lazy_layer *l);
/* The whole blob is in the spool and checks out, every chunk too: commit
 * it into blobs/ and unpack it into layers/ with the ordinary unpacker
 * (diff-id checked), so the next pull mounts it without FUSE. Takes the
 * cache's gc lock shared while it writes, never waiting for a gc. */
int lazy_promote(struct lazy_layer *l, struct cerr *e);
/* Have all chunks arrived? */
bool lazy_complete(struct lazy_layer *l);
/* <dir>/stats: this server's counters, for the agent's metrics
 * (docs/imagepull.md "Lazy pulling", "Counters"), written whole under a
 * temporary name and renamed. lazy_stats_start writes it every
 * CELL_PULL_LAZY_STATS_MS (5000) from a thread of its own; lazy_close
 * stops that thread and writes it a last time. */
void lazy_stats_write(struct lazy_layer *l);
void lazy_stats_start(struct lazy_layer *l);

/* ---- lazyproc.c: a lazy layer's serving process ----
 * <workdir>/lazy/<algo>-<hex>/ holds, besides chunks/ and blob.part:
 *   lock    flock'ed (exclusive) by the serving process for its life
 *   pid     its pid, written once it holds the lock
 *   ready   there once the FUSE mount is up and the prefetch done
 *   mnt/    the FUSE mount point
 *   start   flock'ed by a puller while it starts or adopts the server
 *   log     the server's stderr
 * The server is a cell-pull (--lazy-layer) in a session of its own: it
 * outlives the pull that started it (an agent killed -9 included), and
 * the next pull of an image with that layer adopts it by its lock. */
struct lazyproc_spec {
	const char *exe;   /* cell-pull */
	const char *image; /* "registry/repository@<manifest digest>" */
	const char *username, *password;
	const char *registry_url, *ca_file;
	const char *const *insecure;
	int retries;
};
struct lazyproc {
	char name[DIGEST_STR_MAX]; /* "<algo>-<hex>" */
	int start_lock;		   /* held from start to ready */
	int pidfd;		   /* the server we started, or -1 (adopted) */
	bool adopted;
};
/* "lazy/<algo>-<hex>/mnt": the layer's lowerdir, relative to the cache. */
char *lazyproc_mount_name(const char *digest);
/* Start the server of layer digest, or find the one already serving it. */
int lazyproc_start(const struct cache *c, const char *digest,
		   const struct lazyproc_spec *s, struct lazyproc *p,
		   struct cerr *e);
/* Wait until it serves (mount up, prefetch done), or fail with the end
 * of its log when it dies first. */
int lazyproc_wait(const struct cache *c, struct lazyproc *p, struct cerr *e);
void lazyproc_release(struct lazyproc *p);
/* The server's side: take the layer's lock (EBUSY: served already),
 * write the pid; lazyproc_ready once it serves; lazyproc_leave at exit
 * (the lock stays until the process ends). */
int lazyproc_claim(const struct cache *c, const char *digest, struct cerr *e);
void lazyproc_ready(const struct cache *c, const char *digest);
void lazyproc_leave(const struct cache *c, const char *digest, int lock);
/* gc: every lazy layer no overlay mount uses: its FUSE mount detached,
 * its server gone (it ends when its mount does; SIGKILL after 10 s), its
 * directory removed. */
int lazyproc_gc(const struct cache *c, struct pull_gc_stats *st,
		struct cerr *e);

/* lazyfs.c: serve l at mountpoint (the kernel's FUSE protocol on
 * /dev/fuse) until it is unmounted or a SIGHUP, SIGINT or SIGTERM comes;
 * ready() is called once the mount is there and the prefetch done. */
int lazyfs_serve(struct lazy_layer *l, const char *mountpoint,
		 void (*ready)(void *arg), void *arg, struct cerr *e);

#endif
