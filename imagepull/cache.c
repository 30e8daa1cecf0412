// SPDX-License-Identifier: Apache-2.0
/* The content-addressed cache: blobs by digest, unpacked layers by diff-id.
 * Entries appear only by rename() of a finished, verified temporary, so a
 * crashed pull leaves at most a tmp/ entry that the next holder of the same
 * lock clears (or resumes, for a partial blob). flock() locks die with their
 * process, which is what makes that recovery safe. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "pull-internal.h"
#include "util.h"

static const char *const cache_dirs[] = {
    "blobs",  "blobs/sha256",  "blobs/sha512",
    "layers", "layers/sha256", "layers/sha512",
    "l",      "tmp",	       "locks",
    "images", "mounts",
};

char *cache_path(const struct cache *c, const char *fmt, ...)
{
	cleanup_free char *rel = NULL;
	va_list ap;

	va_start(ap, fmt);
	rel = xvasprintf(fmt, ap);
	va_end(ap);
	return xasprintf("%s/%s", c->root, rel);
}

int cache_open(const char *root, enum cache_lock how, struct cache *c,
	       struct cerr *e)
{
	int op = how == CACHE_GC	   ? LOCK_EX
		 : how == CACHE_USE_NOWAIT ? LOCK_SH | LOCK_NB
					   : LOCK_SH;

	c->root = NULL;
	c->fd = c->gc_lock = -1;
	c->shared_layout = false;
	if (fs_mkdir_p(root, 0700, e) < 0)
		return cerr_prefix(e, "cache %s", root);
	c->root = realpath(root, NULL);
	if (!c->root)
		return cerr_sys(e, "cache %s", root);
	c->fd = open(c->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (c->fd < 0)
		return cerr_sys(e, "open cache %s", c->root);
	for (size_t i = 0; i < ARRAY_SIZE(cache_dirs); i++)
		if (mkdirat(c->fd, cache_dirs[i], 0700) < 0 && errno != EEXIST)
			return cerr_sys(e, "mkdir %s/%s", c->root,
					cache_dirs[i]);
	c->gc_lock =
	    openat(c->fd, "locks/gc", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (c->gc_lock < 0 || flock(c->gc_lock, op) < 0)
		return cerr_sys(e, "lock %s/locks/gc", c->root);
	return 0;
}

void cache_close(struct cache *c)
{
	if (c->gc_lock >= 0)
		close(c->gc_lock);
	if (c->fd >= 0)
		close(c->fd);
	free(c->root);
	c->root = NULL;
	c->fd = c->gc_lock = -1;
}

/* "sha256:abc" → "sha256/abc" (the digest was validated by the caller). */
static char *digest_rel(const char *digest)
{
	char *s = xstrdup(digest);
	char *colon = strchr(s, ':');
	if (colon)
		*colon = '/';
	return s;
}

int cache_lock(const struct cache *c, const char *digest, struct cerr *e)
{
	cleanup_free char *name = xasprintf("locks/%s", digest);
	int fd;

	*strchr(name, ':') = '-';
	fd = openat(c->fd, name, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return cerr_sys(e, "lock %s", name);
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			cerr_sys(e, "flock %s", name);
			close(fd);
			return -1;
		}
	}
	return fd;
}

bool cache_has_blob(const struct cache *c, const char *digest, int64_t size)
{
	cleanup_free char *rel = digest_rel(digest);
	cleanup_free char *p = xasprintf("blobs/%s", rel);
	struct stat st;

	if (fstatat(c->fd, p, &st, 0) < 0 || !S_ISREG(st.st_mode))
		return false;
	return size < 0 || st.st_size == size;
}

#define HASH_CHUNK (1u << 16)

static int hash_fd(int fd, struct hasher *h, struct buf *keep, struct cerr *e)
{
	/* On the heap: the agent's API threads have small stacks. */
	cleanup_free unsigned char *chunk = xmalloc(HASH_CHUNK);

	for (;;) {
		ssize_t n = read(fd, chunk, HASH_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cerr_sys(e, "read");
		if (n == 0)
			return 0;
		hasher_update(h, chunk, (size_t)n);
		if (keep && buf_append(keep, chunk, (size_t)n, e) < 0)
			return -1;
	}
}

/* Hash a committed blob, optionally keeping its bytes; remove it when the
 * digest does not match. */
static int check_blob(const struct cache *c, const char *digest,
		      struct buf *keep, struct cerr *e)
{
	cleanup_free char *rel = digest_rel(digest);
	cleanup_free char *p = xasprintf("blobs/%s", rel);
	cleanup_close int fd = openat(c->fd, p, O_RDONLY | O_CLOEXEC);
	char got[DIGEST_STR_MAX];
	struct hasher h;

	if (fd < 0)
		return cerr_sys(e, "cached blob %s", digest);
	if (hasher_init(&h, digest, e) < 0)
		return -1;
	if (hash_fd(fd, &h, keep, e) < 0) {
		hasher_free(&h);
		return cerr_prefix(e, "cached blob %s", digest);
	}
	hasher_final(&h, got);
	if (strcmp(got, digest) != 0) {
		unlinkat(c->fd, p, 0);
		return cerr_set(e, EBADMSG,
				"cached blob %s is corrupt (hashes to %s); "
				"removed",
				digest, got);
	}
	return 0;
}

int cache_read_blob(const struct cache *c, const char *digest, struct buf *out,
		    struct cerr *e)
{
	return check_blob(c, digest, out, e);
}

int cache_verify_blob(const struct cache *c, const char *digest, struct cerr *e)
{
	return check_blob(c, digest, NULL, e);
}

int cache_put_blob(const struct cache *c, const char *digest, const void *data,
		   size_t len, struct cerr *e)
{
	cleanup_free char *rel = digest_rel(digest);
	cleanup_free char *p = cache_path(c, "blobs/%s", rel);

	return fs_write_atomic(p, data, len, c->shared_layout ? 0644 : 0600, e);
}

bool cache_has_layer(const struct cache *c, const char *diff_id)
{
	cleanup_free char *rel = digest_rel(diff_id);
	cleanup_free char *p = xasprintf("layers/%s", rel);
	struct stat st;

	if (c->shared_layout) {
		/* Complete only with its record, as a cell will read it. */
		struct shared s = {.fd = c->fd};
		struct cerr ignore = {0};
		int fd = shared_layer_open(&s, diff_id, &ignore);

		if (fd >= 0)
			close(fd);
		return fd >= 0;
	}
	return fstatat(c->fd, p, &st, 0) == 0 && S_ISDIR(st.st_mode);
}

int cache_make_shared(struct cache *c, struct cerr *e)
{
	static const char text[] = SHARE_MARKER_TEXT "\n";
	cleanup_free char *marker = cache_path(c, SHARE_MARKER);

	c->shared_layout = true;
	if (mkdirat(c->fd, "tags", 0755) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkdir %s/tags", c->root);
	/* Cells read the share as root, which NFS usually squashes. */
	if (fchmodat(c->fd, ".", 0755, 0) < 0)
		return cerr_sys(e, "chmod %s", c->root);
	for (size_t i = 0; i < ARRAY_SIZE(cache_dirs); i++)
		if (fchmodat(c->fd, cache_dirs[i], 0755, 0) < 0)
			return cerr_sys(e, "chmod %s/%s", c->root,
					cache_dirs[i]);
	if (faccessat(c->fd, SHARE_MARKER, F_OK, 0) == 0)
		return 0;
	return fs_write_atomic(marker, text, sizeof(text) - 1, 0644, e);
}

int cache_record_image(const struct cache *c, const char *ref,
		       const char *const *digests, size_t n,
		       const struct cache_image *img, struct cerr *e)
{
	cleanup_json json_t *j = json_object(), *blobs = json_array(),
			    *layers = json_array();
	char key[DIGEST_STR_MAX];
	cleanup_free char *text = NULL, *p = NULL;

	for (size_t i = 0; i < n; i++)
		json_array_append_new(blobs, json_string(digests[i]));
	for (size_t i = 0; i < img->n_diff_ids; i++)
		json_array_append_new(layers, json_string(img->diff_ids[i]));
	json_object_set_new(j, "ref", json_string(ref));
	json_object_set_new(j, "config", json_string(img->config));
	json_object_set_new(j, "platform", json_string(img->platform));
	json_object_set(j, "blobs", blobs);
	json_object_set(j, "layers", layers);
	text = json_dumps(j, JSON_INDENT(1));
	if (!text || digest_buf("sha256", ref, strlen(ref), key, e) < 0)
		return cerr_set(e, ENOMEM, "record image");
	p = cache_path(c, "images/%s.json", digest_hex(key));
	return fs_write_atomic(p, text, strlen(text),
			       c->shared_layout ? 0644 : 0600, e);
}

void cache_image_free(struct cache_image *img)
{
	free(img->config);
	free(img->platform);
	for (size_t i = 0; i < img->n_diff_ids; i++)
		free(img->diff_ids[i]);
	free(img->diff_ids);
	memset(img, 0, sizeof(*img));
}

static bool digest_ok(const char *d)
{
	struct cerr ignore = {0};

	return d && digest_validate(d, &ignore) == 0;
}

static int image_from_json(json_t *j, struct cache_image *img)
{
	json_t *layers = json_object_get(j, "layers"), *v;
	const char *cfg = json_string_value(json_object_get(j, "config"));
	const char *plat = json_string_value(json_object_get(j, "platform"));
	size_t i;

	/* Records written before "config" and "platform" were kept cannot
	 * be served from the cache: the next pull rewrites them. */
	if (!cfg || !plat || !json_is_array(layers) || !digest_ok(cfg))
		return -1;
	img->config = xstrdup(cfg);
	img->platform = xstrdup(plat);
	img->diff_ids = xcalloc(json_array_size(layers) + 1, sizeof(char *));
	json_array_foreach(layers, i, v)
	{
		if (!digest_ok(json_string_value(v)))
			return -1;
		img->diff_ids[img->n_diff_ids++] =
		    xstrdup(json_string_value(v));
	}
	return 0;
}

int cache_find_image(const struct cache *c, const char *ref,
		     struct cache_image *img, struct cerr *e)
{
	char key[DIGEST_STR_MAX];
	cleanup_free char *p = NULL;
	cleanup_json json_t *j = NULL;
	struct buf b;
	int r;

	memset(img, 0, sizeof(*img));
	if (digest_buf("sha256", ref, strlen(ref), key, e) < 0)
		return -1;
	p = cache_path(c, "images/%s.json", digest_hex(key));
	buf_init(&b, IMAGE_RECORD_MAX);
	r = fs_read_file(p, &b, e);
	if (r == 0)
		j = json_loadb(b.data ? b.data : "", b.len, 0, NULL);
	buf_free(&b);
	if (r < 0)
		return -1;
	if (!j ||
	    strcmp(json_string_value(json_object_get(j, "ref")) ?: "", ref) !=
		0 ||
	    image_from_json(j, img) < 0) {
		cache_image_free(img);
		return cerr_set(e, ENOENT, "image record %s is not usable", p);
	}
	return 0;
}
