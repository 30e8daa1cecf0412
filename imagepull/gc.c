// SPDX-License-Identifier: Apache-2.0
/* pull_gc(): reclaim space. Under the exclusive gc lock no pull runs, so
 * everything in tmp/ and locks/ is a leftover, and every blob or layer that
 * no image record names can go. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "lazy.h"
#include "pull-internal.h"
#include "util.h"

struct keep {
	char **v;
	size_t n, cap;
};

static void keep_add(struct keep *k, const char *s)
{
	if (k->n == k->cap) {
		k->cap = k->cap ? 2 * k->cap : 64;
		k->v = xrealloc(k->v, k->cap * sizeof(char *));
	}
	k->v[k->n++] = xstrdup(s);
}

static bool keep_has(const struct keep *k, const char *s)
{
	for (size_t i = 0; i < k->n; i++)
		if (!strcmp(k->v[i], s))
			return true;
	return false;
}

static void keep_free(struct keep *k)
{
	for (size_t i = 0; i < k->n; i++)
		free(k->v[i]);
	free(k->v);
}

static void add_array(struct keep *k, json_t *a)
{
	size_t i;
	json_t *v;

	json_array_foreach(a, i, v) if (json_is_string(v))
	    keep_add(k, json_string_value(v));
}

/* Collect what the image records still use. */
static int read_records(const struct cache *c, struct keep *blobs,
			struct keep *layers, struct cerr *e)
{
	cleanup_free char *dir = cache_path(c, "images");
	cleanup_dir DIR *d = opendir(dir);
	struct dirent *de;

	if (!d)
		return cerr_sys(e, "open %s", dir);
	while ((de = readdir(d))) {
		cleanup_free char *p = NULL;
		cleanup_json json_t *j = NULL;
		struct buf b;

		if (!str_has_suffix(de->d_name, ".json"))
			continue;
		p = xasprintf("%s/%s", dir, de->d_name);
		buf_init(&b, 1u << 20);
		if (fs_read_file(p, &b, e) == 0)
			j = json_parse_object(b.data, b.len, e);
		buf_free(&b);
		if (!j)
			return cerr_prefix(e, "image record %s", p);
		add_array(blobs, json_object_get(j, "blobs"));
		add_array(layers, json_object_get(j, "layers"));
	}
	return 0;
}

static uint64_t tree_bytes(int parent, const char *name)
{
	struct stat st;
	uint64_t sum = 0;
	int fd;
	DIR *d;
	struct dirent *de;

	if (fstatat(parent, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (!S_ISDIR(st.st_mode))
		return (uint64_t)st.st_blocks * 512;
	fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			sum += tree_bytes(dirfd(d), de->d_name);
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	return sum + (uint64_t)st.st_blocks * 512;
}

/* A directory of the cache to list: fd for the *at calls on its entries,
 * the DIR on a duplicate of it. NULL with errno set when it cannot be
 * opened (ENOENT: not there). */
static DIR *open_dir_at(int cache_fd, const char *rel, int *fd)
{
	int dfd;
	DIR *d;

	*fd = openat(cache_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0)
		return NULL;
	dfd = fcntl(*fd, F_DUPFD_CLOEXEC, 3);
	d = dfd >= 0 ? fdopendir(dfd) : NULL;
	if (!d && dfd >= 0)
		close(dfd);
	return d;
}

/* One entry of a swept directory goes, counted. */
static int remove_entry(int fd, const char *name, struct pull_gc_stats *st,
			struct cerr *e)
{
	st->removed_bytes += tree_bytes(fd, name);
	st->removed_files++;
	return fs_rm_rf_at(fd, name, e);
}

/* Whether an entry of a swept directory stays: name, and digest
 * ("algo:name") when the directory holds digests. */
typedef bool keep_fn(const struct cache *c, const struct keep *keep,
		     const char *name, const char *digest);

/* Those that `keep` names; keep == NULL keeps none. */
static bool kept(const struct cache *c, const struct keep *keep,
		 const char *name, const char *digest)
{
	return keep && keep_has(keep, digest ? digest : name);
}

/* Remove the entries of dir (algo-named digests when algo is set) that
 * fn does not keep. */
static int sweep(const struct cache *c, const char *dir, const char *algo,
		 keep_fn *fn, const struct keep *keep, struct pull_gc_stats *st,
		 struct cerr *e)
{
	cleanup_free char *rel =
	    algo ? xasprintf("%s/%s", dir, algo) : xstrdup(dir);
	cleanup_close int fd = -1;
	cleanup_dir DIR *d = open_dir_at(c->fd, rel, &fd);
	struct dirent *de;

	if (!d)
		return errno == ENOENT ? 0 : cerr_sys(e, "open %s", rel);
	while ((de = readdir(d))) {
		cleanup_free char *digest = NULL;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		digest = algo ? xasprintf("%s:%s", algo, de->d_name) : NULL;
		if (fn(c, keep, de->d_name, digest))
			continue;
		if (remove_entry(fd, de->d_name, st, e) < 0)
			return -1;
	}
	return 0;
}

/* Short lowerdir names whose layer is gone. */
static void sweep_links(const struct cache *c)
{
	cleanup_close int fd = -1;
	cleanup_dir DIR *d = open_dir_at(c->fd, "l", &fd);
	struct dirent *de;
	struct stat st;

	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' && fstatat(fd, de->d_name, &st, 0) < 0)
			unlinkat(fd, de->d_name, 0);
}

/* A shared cache's layer entries without a valid completion record (left
 * by a crash between steps, or damaged) go, even when a record names them:
 * no cell would use them, and the next populate writes them whole. */
static bool complete(const struct cache *c, const struct keep *keep,
		     const char *name, const char *digest)
{
	return name[0] == '.' || cache_has_layer(c, digest);
}

/* Half-written tag records (fs_write_atomic's temporaries). */
static void sweep_tag_temps(const struct cache *c, struct pull_gc_stats *st)
{
	cleanup_close int fd = -1;
	cleanup_dir DIR *d = open_dir_at(c->fd, "tags", &fd);
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' &&
		    !str_has_suffix(de->d_name, ".json") &&
		    unlinkat(fd, de->d_name, 0) == 0)
			st->removed_files++;
}

int pull_gc(const char *workdir, struct pull_gc_stats *st, struct cerr *e)
{
	struct cache c;
	struct keep blobs = {0}, layers = {0}, gc = {0};
	int ret = -1;

	memset(st, 0, sizeof(*st));
	if (cache_open(workdir, CACHE_GC, &c, e) < 0)
		goto out;
	keep_add(&gc, "gc");
	if (read_records(&c, &blobs, &layers, e) < 0 ||
	    lazyproc_gc(&c, st, e) < 0 ||
	    sweep(&c, "tmp", NULL, kept, NULL, st, e) < 0 ||
	    sweep(&c, "locks", NULL, kept, &gc, st, e) < 0 ||
	    sweep(&c, "blobs", "sha256", kept, &blobs, st, e) < 0 ||
	    sweep(&c, "blobs", "sha512", kept, &blobs, st, e) < 0 ||
	    sweep(&c, "layers", "sha256", kept, &layers, st, e) < 0 ||
	    sweep(&c, "layers", "sha512", kept, &layers, st, e) < 0)
		goto out;
	sweep_links(&c);
	if (faccessat(c.fd, SHARE_MARKER, F_OK, 0) == 0) {
		c.shared_layout = true;
		if (sweep(&c, "layers", "sha256", complete, NULL, st, e) < 0 ||
		    sweep(&c, "layers", "sha512", complete, NULL, st, e) < 0)
			goto out;
		sweep_tag_temps(&c, st);
	}
	ret = 0;
out:
	if (ret < 0)
		cerr_prefix(e, "gc %s", workdir);
	keep_free(&blobs);
	keep_free(&layers);
	keep_free(&gc);
	cache_close(&c);
	return ret;
}
