// SPDX-License-Identifier: Apache-2.0
/* The hostile-tar extraction core (unpack.c): image layers (cell-pull) and
 * deploy packages (cell-unpack, agent/pod/package.c) both go through it.
 *
 * Whatever the policy, nothing is ever written outside rootfd: names are
 * cleaned and ".." fails the archive, every parent is resolved beneath the
 * root, the last component is never followed, removals never follow links.
 * A policy only narrows or rewrites what an archive may ask for. Binaries
 * that link this need libarchive; common/ does not. */
#ifndef CELL_UNPACK_H
#define CELL_UNPACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

struct archive;

enum unpack_mode {
	UNPACK_FLAT,	/* whiteouts delete from rootfd (flattened rootfs) */
	UNPACK_OVERLAY, /* whiteouts become overlayfs form in a layer dir */
};

struct unpack_stats {
	uint64_t entries;
	uint64_t bytes;
};

/* What an archive may do beyond the rules above. Zeroed fields are the
 * layer's (OCI image) behaviour except where noted. */
struct unpack_policy {
	enum unpack_mode mode;
	bool whiteouts;	 /* ".wh." names are OCI whiteouts */
	bool xattrs;	 /* apply the entries' extended attributes */
	bool no_devices; /* skip device nodes and fifos (sockets always are) */
	/* Directories are made 0700 and get their mode and owner at the end
	 * (so that a 0555 one still receives its entries without root). */
	bool defer_dir_modes;
	/* Hardlinks only to regular files (never to a symlink, whose target
	 * would then mean something else at another depth). */
	bool hardlink_regular_only;
	/* Errors that a hostile archive causes (a climbing path, a bad link,
	 * an unreadable archive) get EINVAL: the sender's fault. */
	bool hostile_einval;
	mode_t perm_mask;   /* of the headers' permissions; 0: 07777 */
	uint64_t max_bytes; /* of data in all; 0: no cap */
	/* Free space (bytes available to unprivileged writers) that must be
	 * left on rootfd's filesystem: checked as data is written; going
	 * below fails with ENOSPC "does not fit". 0: none (a full disk still
	 * fails with ENOSPC); UNPACK_RESERVE_DEFAULT: unpack_reserve's. */
	uint64_t reserve_bytes;
	uint64_t max_entries;
	const char *what; /* "layer entry": error messages name entries so */
	void *ctx;
	/* The cleaned name to extract, rewritten in place (shorter only); 0
	 * to skip the entry, -1 with e set to fail. NULL: as it is. */
	int (*map_name)(void *ctx, char *name, struct cerr *e);
	/* A symlink's target to store in out (size n); pfd is the link's
	 * real parent directory. NULL: stored as it is. */
	int (*link_target)(void *ctx, int pfd, const char *target, char *out,
			   size_t n, struct cerr *e);
	/* A hardlink's cleaned target, rewritten in place like map_name. */
	int (*map_hardlink)(void *ctx, char *target, struct cerr *e);
};

#define UNPACK_RESERVE_DEFAULT UINT64_MAX

/* OCI whiteouts in a layer's names, and overlayfs's mark of an opaque
 * directory (a whiteout itself becomes a character device 0/0). */
#define WH_PREFIX ".wh."
#define WH_META ".wh..wh."
#define WH_OPAQUE ".wh..wh..opq"
#define OVL_OPAQUE_XATTR "trusted.overlay.opaque"

/* Extended attributes a layer must never set (overlayfs's own
 * trusted.overlay.* and user.overlay.*): dropped, as Docker does. The lazy
 * layers (estargz.c) drop the same. */
bool unpack_xattr_forbidden(const char *name);

/* The reserve in bytes on a filesystem of size fs_bytes: want, or for
 * UNPACK_RESERVE_DEFAULT 5% of the filesystem and at most 256 MiB (a
 * cell's 10 GB disk keeps 256 MiB; a 1 GiB test image 51 MiB). */
static inline uint64_t unpack_reserve(uint64_t want, uint64_t fs_bytes)
{
	uint64_t pct = fs_bytes / 20;

	if (want != UNPACK_RESERVE_DEFAULT)
		return want;
	return pct < (256ull << 20) ? pct : (256ull << 20);
}

/* Read every entry of an archive reader and apply it beneath rootfd as the
 * policy says. A hostile entry fails the whole archive with a clear error
 * (what is already written stays: callers extract into a new directory). */
int unpack_archive(struct archive *a, int rootfd,
		   const struct unpack_policy *pol, struct unpack_stats *st,
		   struct cerr *e);
/* An OCI layer: unpack_archive with the layer policy of mode, keeping
 * reserve bytes free (see reserve_bytes). */
int unpack_layer(struct archive *a, int rootfd, enum unpack_mode mode,
		 uint64_t reserve, struct unpack_stats *st, struct cerr *e);
/* An eStargz layer (its descriptor names a TOC digest): the same, without
 * eStargz's own entries at the root (stargz.index.json,
 * .prefetch.landmark, .no.prefetch.landmark), as a lazy mount shows it. */
int unpack_layer_estargz(struct archive *a, int rootfd, enum unpack_mode mode,
			 uint64_t reserve, struct unpack_stats *st,
			 struct cerr *e);
/* Convenience for tests and tools: a tar (any compression libarchive knows)
 * from an fd. */
int unpack_layer_fd(int tarfd, int rootfd, enum unpack_mode mode,
		    struct unpack_stats *st, struct cerr *e);

#endif
