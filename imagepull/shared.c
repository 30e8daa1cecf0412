// SPDX-License-Identifier: Apache-2.0
/* The shared cache as a cell reads it: a read-only second tier under the
 * local cache (docs/imagepull.md, "The shared cache").
 *
 * The share is written by another machine, so nothing in it is trusted:
 * every path is walked one component at a time with O_NOFOLLOW (a symlink
 * anywhere on our own paths fails the lookup, it is never followed), files
 * must be regular and are read with a size bound (O_NONBLOCK: a FIFO cannot
 * hang us), records are parsed by sharerec.c, and blobs are hashed before
 * their bytes are believed. A layer's tree is never walked by the cell at
 * all: its directory is handed to overlayfs as a lower layer by descriptor
 * (/proc/self/fd/N), so whatever links it holds are only ever seen inside
 * the container's root. Curl-free: the agent calls this in process. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "fsutil.h"
#include "path.h"
#include "pull-internal.h"
#include "util.h"

/* Open rel (our own spelling: clean, no "..") beneath dirfd, refusing a
 * symlink at every component. */
static int walk_open(int dirfd, const char *rel, int flags, struct cerr *e)
{
	if (!*rel)
		return cerr_set(e, EINVAL, "empty path");
	return path_open_at(dirfd, rel, flags | O_NOFOLLOW, 0, PATH_NO_LINKS,
			    e);
}

/* A small regular file of the share, whole, at most out->max bytes. */
static int read_small(int dirfd, const char *rel, struct buf *out,
		      struct cerr *e)
{
	cleanup_close int fd = walk_open(dirfd, rel, O_RDONLY | O_NONBLOCK, e);
	struct stat st;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0)
		return cerr_sys(e, "%s", rel);
	if (!S_ISREG(st.st_mode))
		return cerr_set(e, EINVAL, "%s is not a regular file", rel);
	if ((uint64_t)st.st_size > out->max)
		return cerr_set(e, EFBIG, "%s is %lld bytes (limit %zu)", rel,
				(long long)st.st_size, out->max);
	if (fs_read_fd(fd, out, e) < 0)
		return cerr_prefix(e, "%s", rel);
	return 0;
}

int shared_open(const char *dir, struct shared *s, struct cerr *e)
{
	struct buf b;
	int r;

	s->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	s->root = NULL;
	if (s->fd < 0)
		return cerr_sys(e, "shared cache %s", dir);
	buf_init(&b, 256);
	r = read_small(s->fd, SHARE_MARKER, &b, e);
	if (r == 0 &&
	    (b.len < strlen(SHARE_MARKER_TEXT) ||
	     memcmp(b.data, SHARE_MARKER_TEXT, strlen(SHARE_MARKER_TEXT)) != 0))
		r = cerr_set(e, EINVAL, "%s does not say \"%s\"", SHARE_MARKER,
			     SHARE_MARKER_TEXT);
	buf_free(&b);
	if (r < 0) {
		close(s->fd);
		s->fd = -1;
		/* An empty directory is what a failed NFS mount leaves. */
		return cerr_prefix(e,
				   "shared cache %s (not populated, or not "
				   "mounted)",
				   dir);
	}
	s->root = xstrdup(dir);
	return 0;
}

void shared_close(struct shared *s)
{
	if (s->fd >= 0)
		close(s->fd);
	free(s->root);
	s->root = NULL;
	s->fd = -1;
}

static char *digest_rel(const char *dir, const char *digest)
{
	char *s = xasprintf("%s/%s", dir, digest);

	*strchr(s + strlen(dir) + 1, ':') = '/';
	return s;
}

#define OPAQUE_XATTR "trusted.overlay.opaque"

/* Did the share keep what the populator wrote: the opaque xattr, the 0/0
 * character device of a whiteout? */
static int check_probes(int diff, const struct share_layer_rec *rec,
			struct cerr *e)
{
	struct stat st;
	char v[2] = "";
	int fd;

	if (rec->opaque) {
		fd = strcmp(rec->opaque, ".")
			 ? walk_open(diff, rec->opaque, O_RDONLY | O_DIRECTORY,
				     e)
			 : dup(diff);
		if (fd < 0)
			return cerr_prefix(e, "opaque probe");
		if (fgetxattr(fd, OPAQUE_XATTR, v, sizeof(v)) != 1 ||
		    v[0] != 'y') {
			close(fd);
			return cerr_set(e, EOPNOTSUPP,
					"%s lost its opaque mark (a share "
					"without trusted.* xattrs, as NFS)",
					rec->opaque);
		}
		close(fd);
	}
	if (rec->whiteout) {
		if (fstatat(diff, rec->whiteout, &st, AT_SYMLINK_NOFOLLOW) <
			0 ||
		    !S_ISCHR(st.st_mode) || st.st_rdev != 0)
			return cerr_set(e, EOPNOTSUPP,
					"whiteout %s is not a 0/0 device on "
					"the share",
					rec->whiteout);
	}
	return 0;
}

/* The populator's side: walk its own freshly unpacked tree (depth
 * bounded) for the first opaque directory and whiteout. */
static void probe_walk(int dirfd, const char *rel, int depth, char **opaque,
		       char **whiteout)
{
	int fd = dup(dirfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)) && (!*opaque || !*whiteout)) {
		cleanup_free char *p = NULL;
		struct stat st;
		char v[2] = "";
		int sub;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		p = *rel ? xasprintf("%s/%s", rel, de->d_name)
			 : xstrdup(de->d_name);
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISCHR(st.st_mode) && st.st_rdev == 0 && !*whiteout) {
			*whiteout = steal_ptr(&p);
			continue;
		}
		if (!S_ISDIR(st.st_mode) || depth > 64)
			continue;
		sub = openat(dirfd, de->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			continue;
		if (!*opaque &&
		    fgetxattr(sub, OPAQUE_XATTR, v, sizeof(v)) == 1 &&
		    v[0] == 'y')
			*opaque = xstrdup(p);
		probe_walk(sub, p, depth + 1, opaque, whiteout);
		close(sub);
	}
	closedir(d);
}

void shared_find_probes(int rootfd, char **opaque, char **whiteout)
{
	char v[2] = "";

	*opaque = *whiteout = NULL;
	if (fgetxattr(rootfd, OPAQUE_XATTR, v, sizeof(v)) == 1 && v[0] == 'y')
		*opaque = xstrdup(".");
	probe_walk(rootfd, "", 0, opaque, whiteout);
}

int shared_layer_open(const struct shared *s, const char *diff_id,
		      struct cerr *e)
{
	cleanup_free char *rel = digest_rel("layers", diff_id);
	cleanup_close int dir = -1;
	struct share_layer_rec rec = {0};
	struct buf b;
	int r, fd;

	if (digest_validate(diff_id, e) < 0)
		return -1;
	dir = walk_open(s->fd, rel, O_RDONLY | O_DIRECTORY, e);
	if (dir < 0)
		return -1;
	buf_init(&b, SHARE_REC_MAX);
	r = read_small(dir, "complete", &b, e);
	if (r == 0)
		r = share_layer_rec_parse(b.data, b.len, &rec, e);
	buf_free(&b);
	if (r < 0) {
		/* A layer without its record is half written (or damaged):
		 * never used. */
		if (e->code == ENOENT)
			e->code = EBADMSG;
		return cerr_prefix(e, "%s", rel);
	}
	r = strcmp(rec.diff_id, diff_id);
	if (r != 0) {
		cerr_set(e, EBADMSG, "%s: its completion record names %s", rel,
			 rec.diff_id);
		share_layer_rec_free(&rec);
		return -1;
	}
	fd = walk_open(dir, "diff", O_RDONLY | O_DIRECTORY, e);
	if (fd >= 0 && check_probes(fd, &rec, e) < 0) {
		close(fd);
		fd = -1;
	}
	share_layer_rec_free(&rec);
	if (fd < 0)
		return cerr_prefix(e, "%s", rel);
	return fd;
}

int shared_read_blob(const struct shared *s, const char *digest,
		     struct buf *out, struct cerr *e)
{
	cleanup_free char *rel = NULL;
	char got[DIGEST_STR_MAX];

	if (digest_validate(digest, e) < 0)
		return -1;
	rel = digest_rel("blobs", digest);
	if (read_small(s->fd, rel, out, e) < 0 ||
	    digest_buf(digest, out->data ? out->data : "", out->len, got, e) <
		0)
		return -1;
	if (strcmp(got, digest) != 0)
		return cerr_set(e, EBADMSG, "%s is corrupt (hashes to %s)", rel,
				got);
	return 0;
}

int shared_blob_fd(const struct shared *s, const char *digest, int64_t size,
		   struct cerr *e)
{
	cleanup_free char *rel = NULL;
	struct stat st;
	int fd;

	if (digest_validate(digest, e) < 0)
		return -1;
	rel = digest_rel("blobs", digest);
	fd = walk_open(s->fd, rel, O_RDONLY | O_NONBLOCK, e);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (size >= 0 && st.st_size != size)) {
		close(fd);
		return cerr_set(e, EBADMSG,
				"%s is not a regular file of %lld bytes", rel,
				(long long)size);
	}
	return fd;
}

int shared_find_tag(const struct shared *s, const char *ref,
		    const char *platform, struct share_tag_rec *rec,
		    struct cerr *e)
{
	cleanup_free char *rel = share_tag_key(ref, platform);
	struct buf b;
	int r;

	memset(rec, 0, sizeof(*rec));
	buf_init(&b, SHARE_REC_MAX);
	r = read_small(s->fd, rel, &b, e);
	if (r == 0)
		r = share_tag_rec_parse(b.data, b.len, rec, e);
	buf_free(&b);
	if (r == 0 &&
	    (strcmp(rec->ref, ref) || strcmp(rec->platform, platform)))
		r = cerr_set(e, EINVAL, "%s is the record of %s (%s)", rel,
			     rec->ref, rec->platform);
	if (r < 0) {
		share_tag_rec_free(rec);
		return cerr_prefix(e, "shared tag record");
	}
	return 0;
}
