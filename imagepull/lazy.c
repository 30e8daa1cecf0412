// SPDX-License-Identifier: Apache-2.0
/* A lazy eStargz layer (lazy.h): its TOC fetched and checked, its chunks
 * fetched with range requests, each checked against its chunkDigest
 * before it is kept (on local disk, named by that digest) or served. */
#include "lazy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "gunzip.h"
#include "log.h"
#include "util.h"

/* One range request of the background fetch: small enough that an
 * on-demand read waits little behind it. */
#define SPAN_BG_MAX (4u << 20)
/* The prefetch in one request (the landmark's offset) at most. */
#define SPAN_PREFETCH_MAX (512u << 20)
/* A member's compressed bytes: gzip's worst case over ESGZ_CHUNK_MAX. */
#define MEMBER_MAX (ESGZ_CHUNK_MAX + (1u << 20))

static void chunk_name(const struct esgz_chunk *c, char out[DIGEST_STR_MAX])
{
	snprintf(out, DIGEST_STR_MAX, "%s", c->digest);
	out[strcspn(out, ":")] = '-';
}

/* The verified chunk's file, or -1. */
static int chunk_open(const struct lazy_layer *l, const struct esgz_chunk *c)
{
	char name[DIGEST_STR_MAX];
	struct stat st;
	int fd;

	chunk_name(c, name);
	fd = openat(l->chunk_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != c->size) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool chunk_here(const struct lazy_layer *l, const struct esgz_chunk *c)
{
	int fd = chunk_open(l, c);

	if (fd < 0)
		return false;
	close(fd);
	return true;
}

static int chunk_store(struct lazy_layer *l, const struct esgz_chunk *c,
		       const void *data, struct cerr *e)
{
	char name[DIGEST_STR_MAX], tmp[DIGEST_STR_MAX + 32];
	cleanup_close int fd = -1;

	chunk_name(c, name);
	snprintf(tmp, sizeof(tmp), ".tmp.%s.%llx", name,
		 (unsigned long long)rand_u64());
	fd = openat(l->chunk_dir, tmp,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return cerr_sys(e, "chunk %s", name);
	if (fs_write_all(fd, data, c->size) < 0 ||
	    renameat(l->chunk_dir, tmp, l->chunk_dir, name) < 0) {
		cerr_sys(e, "chunk %s", name);
		unlinkat(l->chunk_dir, tmp, 0);
		return -1;
	}
	return 0;
}

/* Decompress the member at gz (n bytes) to the chunk's bytes, check them
 * and keep them. A chunk that does not match its digest is never kept: EIO
 * (the reader sees an I/O error). */
static int chunk_from_member(struct lazy_layer *l, const struct esgz_chunk *c,
			     const uint8_t *gz, size_t n, struct cerr *e)
{
	struct gunzip *g = gunzip_new();
	cleanup_free char *out = xmalloc(c->size ? c->size : 1);
	char scratch[64 << 10], got[DIGEST_STR_MAX];
	uint64_t skipped = 0, have = 0;
	size_t pos = 0;
	int r = -1;

	while (have < c->size) {
		bool skip = skipped < c->inner;
		size_t cap = skip ? (c->inner - skipped < sizeof(scratch)
					 ? (size_t)(c->inner - skipped)
					 : sizeof(scratch))
				  : (size_t)(c->size - have);
		size_t used = 0, made = 0;

		if (gunzip_run(g, gz + pos, n - pos, &used,
			       skip ? scratch : out + have, cap, &made, e) < 0)
			goto out;
		if (!used && !made) {
			cerr_set(e, EIO, "member at %llu ends before its chunk",
				 (unsigned long long)c->offset);
			goto out;
		}
		pos += used;
		if (skip)
			skipped += made;
		else
			have += made;
	}
	if (digest_buf(c->digest, out, c->size, got, e) < 0)
		goto out;
	if (strcmp(got, c->digest)) {
		atomic_fetch_add(&l->st.refused, 1);
		log_warn(
		    "lazy layer %s: chunk at %llu: digest %s, the TOC says "
		    "%s; not served",
		    l->digest, (unsigned long long)c->offset, got, c->digest);
		cerr_set(e, EIO, "chunk at %llu: digest mismatch",
			 (unsigned long long)c->offset);
		goto out;
	}
	r = chunk_store(l, c, out, e);
out:
	gunzip_free(g);
	if (r < 0 && e->code != EIO && e->code != ENOSPC)
		e->code = EIO;
	return r;
}

/* Chunks [i, j) in one range request. */
static int fetch_span(struct lazy_layer *l, size_t i, size_t j, bool ondemand,
		      struct cerr *e)
{
	const struct esgz_chunk *ch = l->toc.chunks;
	uint64_t from = ch[i].offset, to = ch[j - 1].end;
	struct buf b;
	int r = 0;

	buf_init(&b, (size_t)(to - from));
	if (registry_get_range(l->reg, l->digest, from, (size_t)(to - from), &b,
			       e) < 0) {
		buf_free(&b);
		e->code = EIO;
		return -1;
	}
	if (ondemand)
		atomic_fetch_add(&l->st.ondemand_bytes, b.len);
	else
		atomic_fetch_add(&l->st.background_bytes, b.len);
	for (size_t k = i; k < j && r == 0; k++) {
		if (k > i && ch[k].offset == ch[k - 1].offset && !ondemand &&
		    chunk_here(l, &ch[k]))
			continue;
		if (!chunk_here(l, &ch[k]))
			r = chunk_from_member(
			    l, &ch[k],
			    (const uint8_t *)b.data + (ch[k].offset - from),
			    (size_t)(ch[k].end - ch[k].offset), e);
	}
	buf_free(&b);
	return r;
}

static int chunk_get(struct lazy_layer *l, size_t idx, struct cerr *e)
{
	const struct esgz_chunk *c = &l->toc.chunks[idx];
	int fd = chunk_open(l, c), r;
	uint64_t t0;

	if (fd >= 0)
		return fd;
	if (c->end - c->offset > MEMBER_MAX)
		return cerr_set(e, EIO, "chunk at %llu: member too large",
				(unsigned long long)c->offset);
	pthread_mutex_lock(&l->mu);
	l->reading++;
	pthread_mutex_unlock(&l->mu);
	t0 = now_ns();
	r = fetch_span(l, idx, idx + 1, true, e);
	atomic_fetch_add(&l->st.ondemand_fetches, 1);
	atomic_fetch_add(&l->st.ondemand_ns, now_ns() - t0);
	pthread_mutex_lock(&l->mu);
	l->reading--;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	if (r < 0)
		return -1;
	fd = chunk_open(l, c);
	if (fd < 0)
		return cerr_set(e, EIO, "chunk at %llu vanished",
				(unsigned long long)c->offset);
	return fd;
}

int lazy_read(struct lazy_layer *l, const struct esgz_node *nd, uint64_t off,
	      size_t len, char *out, size_t *got, struct cerr *e)
{
	size_t first, n;

	*got = 0;
	if (off >= nd->size)
		return 0;
	if (len > nd->size - off)
		len = (size_t)(nd->size - off);
	esgz_chunks_for(&l->toc, nd, off, len, &first, &n);
	for (size_t k = first; k < first + n; k++) {
		const struct esgz_chunk *c = &l->toc.chunks[k];
		uint64_t a = off > c->file_off ? off : c->file_off;
		uint64_t b = off + len < c->file_off + c->size
				 ? off + len
				 : c->file_off + c->size;
		cleanup_close int fd = chunk_get(l, k, e);
		ssize_t r;

		if (fd < 0)
			return -1;
		r = pread(fd, out + (a - off), (size_t)(b - a),
			  (off_t)(a - c->file_off));
		if (r != (ssize_t)(b - a))
			return cerr_set(e, EIO, "read chunk");
	}
	*got = len;
	return 0;
}

int lazy_prefetch(struct lazy_layer *l, struct cerr *e)
{
	size_t j = 0;

	while (j < l->toc.n_chunks &&
	       l->toc.chunks[j].offset < l->toc.prefetch_end)
		j++;
	if (!j)
		return 0;
	if (l->toc.chunks[j - 1].end > SPAN_PREFETCH_MAX)
		return 0; /* too large for one request: on demand instead */
	return fetch_span(l, 0, j, false, e);
}

static void *background(void *arg)
{
	struct lazy_layer *l = arg;
	const struct esgz_chunk *ch = l->toc.chunks;
	size_t i = 0, failures = 0;

	while (i < l->toc.n_chunks) {
		struct cerr e = {0};
		size_t j = i + 1;

		if (chunk_here(l, &ch[i])) {
			i++;
			continue;
		}
		while (j < l->toc.n_chunks &&
		       ch[j].end - ch[i].offset <= SPAN_BG_MAX)
			j++;
		pthread_mutex_lock(&l->mu);
		while (l->reading > 0 && !l->stop)
			pthread_cond_wait(&l->cv, &l->mu);
		if (l->stop) {
			pthread_mutex_unlock(&l->mu);
			return NULL;
		}
		pthread_mutex_unlock(&l->mu);
		if (fetch_span(l, i, j, false, &e) < 0) {
			log_warn("lazy layer %s: background fetch: %s",
				 l->digest, e.msg);
			if (++failures > 8)
				return NULL; /* reads still fetch on demand */
			nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
			continue;
		}
		i = j;
	}
	log_info("lazy layer %s: every chunk fetched and verified", l->digest);
	return NULL;
}

void lazy_background_start(struct lazy_layer *l)
{
	if (pthread_create(&l->bg, NULL, background, l) == 0)
		l->bg_running = true;
}

bool lazy_complete(struct lazy_layer *l)
{
	for (size_t i = 0; i < l->toc.n_chunks; i++)
		if (!chunk_here(l, &l->toc.chunks[i]))
			return false;
	return true;
}

static int get_toc(struct lazy_layer *l, const char *toc_digest, struct cerr *e)
{
	struct buf tail, gz;
	uint64_t toc_off;
	size_t fs, tail_len = ESGZ_FOOTER_SIZE, json_len;
	cleanup_free char *json = NULL;
	char got[DIGEST_STR_MAX];
	int r = -1;

	if (l->size < ESGZ_LEGACY_FOOTER_SIZE)
		return cerr_set(e, EINVAL, "a blob of %llu bytes has no footer",
				(unsigned long long)l->size);
	if (l->size < tail_len)
		tail_len = ESGZ_LEGACY_FOOTER_SIZE;
	buf_init(&tail, tail_len);
	buf_init(&gz, ESGZ_TOC_GZ_MAX);
	if (registry_get_range(l->reg, l->digest, l->size - tail_len, tail_len,
			       &tail, e) < 0 ||
	    esgz_footer_parse(tail.data, tail.len, l->size, &toc_off, &fs, e) <
		0)
		goto out;
	if (l->size - fs - toc_off > ESGZ_TOC_GZ_MAX) {
		cerr_set(e, EFBIG, "TOC of %llu bytes exceeds %u",
			 (unsigned long long)(l->size - fs - toc_off),
			 ESGZ_TOC_GZ_MAX);
		goto out;
	}
	if (registry_get_range(l->reg, l->digest, toc_off,
			       (size_t)(l->size - fs - toc_off), &gz, e) < 0 ||
	    esgz_toc_extract(gz.data, gz.len, &json, &json_len, e) < 0 ||
	    digest_buf(toc_digest, json, json_len, got, e) < 0)
		goto out;
	if (strcmp(got, toc_digest)) {
		cerr_set(e, EBADMSG, "TOC digest %s, the manifest says %s", got,
			 toc_digest);
		goto out;
	}
	r = esgz_toc_parse(json, json_len, toc_off, &l->toc, e);
out:
	buf_free(&tail);
	buf_free(&gz);
	return r;
}

int lazy_open(struct registry *reg, const struct cache *c,
	      const struct descriptor *d, struct lazy_layer **out,
	      struct cerr *e)
{
	struct lazy_layer *l = xcalloc(1, sizeof(*l));
	cleanup_free char *dir = NULL;
	char name[DIGEST_STR_MAX];

	l->reg = reg;
	l->chunk_dir = -1;
	l->size = (uint64_t)d->size;
	snprintf(l->digest, sizeof(l->digest), "%s", d->digest);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	if (!d->toc_digest) {
		cerr_set(e, EINVAL, "not an eStargz layer (no %s annotation)",
			 ESGZ_TOC_ANNOTATION);
		goto fail;
	}
	if (get_toc(l, d->toc_digest, e) < 0)
		goto fail;
	snprintf(name, sizeof(name), "%s", d->digest);
	name[strcspn(name, ":")] = '-';
	dir = cache_path(c, "lazy/%s/chunks", name);
	if (fs_mkdir_p(dir, 0700, e) < 0)
		goto fail;
	l->chunk_dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->chunk_dir < 0) {
		cerr_sys(e, "%s", dir);
		goto fail;
	}
	*out = l;
	return 0;
fail:
	cerr_prefix(e, "lazy layer %s", d->digest);
	lazy_close(l);
	return -1;
}

void lazy_close(struct lazy_layer *l)
{
	if (!l)
		return;
	if (l->bg_running) {
		pthread_mutex_lock(&l->mu);
		l->stop = true;
		pthread_cond_broadcast(&l->cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->bg, NULL);
	}
	if (l->chunk_dir >= 0)
		close(l->chunk_dir);
	esgz_toc_free(&l->toc);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}
