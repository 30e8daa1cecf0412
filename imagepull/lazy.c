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
#include "fetch.h"
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

/* [from, to) is in the spool now: remember it, merged with its
 * neighbours, when the in-order prefix has not reached it. Under mu. */
static void have_add(struct lazy_layer *l, uint64_t from, uint64_t to)
{
	size_t i = 0, j;

	if (to <= l->spool_pos)
		return;
	while (i < l->n_have && l->have[i].to < from)
		i++;
	j = i;
	while (j < l->n_have && l->have[j].from <= to) {
		from = l->have[j].from < from ? l->have[j].from : from;
		to = l->have[j].to > to ? l->have[j].to : to;
		j++;
	}
	if (j == i) { /* a new range at i */
		if (l->n_have == l->cap_have) {
			l->cap_have = l->cap_have ? 2 * l->cap_have : 16;
			l->have =
			    xrealloc(l->have, l->cap_have * sizeof(*l->have));
		}
		memmove(&l->have[i + 1], &l->have[i],
			(l->n_have - i) * sizeof(*l->have));
		l->n_have++;
	} else if (j > i + 1) { /* ranges i..j-1 become one */
		memmove(&l->have[i + 1], &l->have[j],
			(l->n_have - j) * sizeof(*l->have));
		l->n_have -= j - i - 1;
	}
	l->have[i].from = from;
	l->have[i].to = to;
}

/* A member a read fetched, into the spool at its place, so that the
 * background fetch does not ask for it again. Best effort: a failed write
 * only costs that. */
static void spool_put(struct lazy_layer *l, uint64_t off, const void *p,
		      size_t n)
{
	uint64_t pos;

	pthread_mutex_lock(&l->mu);
	pos = l->spool_pos;
	pthread_mutex_unlock(&l->mu);
	if (off + n <= pos || fs_pwrite_all(l->spool, p, n, (off_t)off) < 0)
		return;
	pthread_mutex_lock(&l->mu);
	have_add(l, off, off + n);
	pthread_mutex_unlock(&l->mu);
}

/* "sha256:0123456789ab...": a layer in a status line. */
static void short_digest(const char *digest, char out[32])
{
	const char *hex = strchr(digest, ':');
	size_t algo = hex ? (size_t)(hex - digest) + 1 : 0;

	snprintf(out, 32, "%.*s%.12s...", (int)(algo < 16 ? algo : 16), digest,
		 digest + algo);
}

/* Chunk i by itself, for a read: its member in one range request. On
 * failure line says why, for the unit's status (LAZY_FAILURE_MAX). */
static int fetch_chunk(struct lazy_layer *l, size_t i, char *line,
		       struct cerr *e)
{
	const struct esgz_chunk *c = &l->toc.chunks[i];
	char why[REGISTRY_WHY_MAX], layer[32];
	struct buf b;
	int r;

	short_digest(l->digest, layer);
	buf_init(&b, (size_t)(c->end - c->offset));
	if (registry_get_range(l->reg, l->digest, c->offset,
			       (size_t)(c->end - c->offset), &b, why, e) < 0) {
		buf_free(&b);
		e->code = EIO;
		snprintf(line, LAZY_FAILURE_MAX,
			 "range read of layer %s from %s: %s", layer,
			 registry_host(l->reg), why[0] ? why : "failed");
		return -1;
	}
	atomic_fetch_add(&l->st.ondemand_bytes, b.len);
	spool_put(l, c->offset, b.data, b.len);
	r = chunk_here(l, c)
		? 0
		: chunk_from_member(l, c, (const uint8_t *)b.data, b.len, e);
	buf_free(&b);
	if (r < 0)
		snprintf(line, LAZY_FAILURE_MAX, "layer %s: %s", layer, e->msg);
	return r;
}

/* The background fetch has c's member in its span under way: wait for
 * it (a span is at most 4 MiB). True when it waited. */
static bool wait_span(struct lazy_layer *l, const struct esgz_chunk *c)
{
	bool waited = false;

	pthread_mutex_lock(&l->mu);
	while (!l->stop && l->spool_pos <= c->offset && c->end <= l->span_to) {
		pthread_cond_wait(&l->cv, &l->mu);
		waited = true;
	}
	pthread_mutex_unlock(&l->mu);
	return waited;
}

/* Another read fetching chunk idx (the kernel reads ahead on several
 * threads): wait for it, then look again. Under mu; true when it took
 * the fetch for the caller. */
static bool claim_fetch(struct lazy_layer *l, size_t idx)
{
	bool waited = false;

	while (l->fetching[idx] && !l->stop) {
		pthread_cond_wait(&l->cv, &l->mu);
		waited = true;
	}
	if (waited)
		return false;
	l->fetching[idx] = 1;
	l->reading++;
	return true;
}

static int chunk_get(struct lazy_layer *l, size_t idx, char *line,
		     struct cerr *e)
{
	const struct esgz_chunk *c = &l->toc.chunks[idx];
	int fd = chunk_open(l, c), r;
	uint64_t t0;

	if (fd >= 0)
		return fd;
	if (c->end - c->offset > MEMBER_MAX)
		return cerr_set(e, EIO, "chunk at %llu: member too large",
				(unsigned long long)c->offset);
	if (wait_span(l, c) && (fd = chunk_open(l, c)) >= 0)
		return fd;
	pthread_mutex_lock(&l->mu);
	while (!claim_fetch(l, idx)) {
		pthread_mutex_unlock(&l->mu);
		if ((fd = chunk_open(l, c)) >= 0)
			return fd;
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	t0 = now_ns();
	r = fetch_chunk(l, idx, line, e);
	atomic_fetch_add(&l->st.ondemand_fetches, 1);
	atomic_fetch_add(&l->st.ondemand_ns, now_ns() - t0);
	pthread_mutex_lock(&l->mu);
	l->fetching[idx] = 0;
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

/* [off, off + len) of nd into out; line: why not (fetch_chunk). */
static int read_chunks(struct lazy_layer *l, const struct esgz_node *nd,
		       uint64_t off, size_t len, char *out, char *line,
		       struct cerr *e)
{
	size_t first, n;

	esgz_chunks_for(&l->toc, nd, off, len, &first, &n);
	for (size_t k = first; k < first + n; k++) {
		const struct esgz_chunk *c = &l->toc.chunks[k];
		uint64_t a = off > c->file_off ? off : c->file_off;
		uint64_t b = off + len < c->file_off + c->size
				 ? off + len
				 : c->file_off + c->size;
		cleanup_close int fd = chunk_get(l, k, line, e);
		ssize_t r;

		if (fd < 0)
			return -1;
		r = pread(fd, out + (a - off), (size_t)(b - a),
			  (off_t)(a - c->file_off));
		if (r != (ssize_t)(b - a))
			return cerr_set(e, EIO, "read chunk");
	}
	return 0;
}

/* A read failed: counted, its cause kept (printable ASCII, one line: the
 * agent's parser takes nothing else), and the stats file written now, so
 * that the agent can tell the unit's status before the unit acts on its
 * EIO (an exit, say). */
static void read_failed(struct lazy_layer *l, const char *line,
			const struct cerr *e)
{
	char layer[32];

	atomic_fetch_add(&l->st.failed_reads, 1);
	short_digest(l->digest, layer);
	pthread_mutex_lock(&l->stats_mu);
	if (line[0])
		snprintf(l->last_failure, sizeof(l->last_failure), "%s", line);
	else
		snprintf(l->last_failure, sizeof(l->last_failure),
			 "layer %s: %s", layer, e->msg);
	for (char *p = l->last_failure; *p; p++)
		if (*p < 0x20 || *p > 0x7e)
			*p = '?';
	pthread_mutex_unlock(&l->stats_mu);
	lazy_stats_write(l);
}

int lazy_read(struct lazy_layer *l, const struct esgz_node *nd, uint64_t off,
	      size_t len, char *out, size_t *got, struct cerr *e)
{
	char line[LAZY_FAILURE_MAX] = "";

	*got = 0;
	if (off >= nd->size)
		return 0;
	if (len > nd->size - off)
		len = (size_t)(nd->size - off);
	if (read_chunks(l, nd, off, len, out, line, e) < 0) {
		read_failed(l, line, e);
		return -1;
	}
	*got = len;
	return 0;
}

/* The chunks whose members lie whole in the spool now, kept (those not
 * here yet). A chunk that fails its digest is counted and left out: reads
 * of it are EIO, and the layer is never promoted. */
static void take_chunks(struct lazy_layer *l)
{
	const struct esgz_chunk *ch = l->toc.chunks;

	for (; l->next_chunk < l->toc.n_chunks &&
	       ch[l->next_chunk].end <= l->spool_pos;
	     l->next_chunk++) {
		const struct esgz_chunk *c = &ch[l->next_chunk];
		size_t n = (size_t)(c->end - c->offset);
		struct cerr e = {0};
		uint8_t *gz;

		if (n > MEMBER_MAX || chunk_here(l, c))
			continue;
		gz = xmalloc(n ? n : 1);
		if (pread(l->spool, gz, n, (off_t)c->offset) != (ssize_t)n)
			log_warn("lazy layer %s: read spool: %m", l->digest);
		else if (chunk_from_member(l, c, gz, n, &e) < 0)
			log_warn("lazy layer %s: %s", l->digest, e.msg);
		free(gz);
	}
}

/* Blob bytes [spool_pos, to) in one range request, into the spool. */
static int fetch_span(struct lazy_layer *l, uint64_t to, struct cerr *e)
{
	uint64_t from = l->spool_pos;
	struct buf b;

	buf_init(&b, (size_t)(to - from));
	if (registry_get_range(l->reg, l->digest, from, (size_t)(to - from), &b,
			       NULL, e) < 0) {
		buf_free(&b);
		e->code = EIO;
		return -1;
	}
	atomic_fetch_add(&l->st.background_bytes, b.len);
	if (fs_pwrite_all(l->spool, b.data, b.len, (off_t)from) < 0) {
		buf_free(&b);
		return cerr_sys(e, "write %s spool", l->digest);
	}
	hasher_update(&l->spool_hash, b.data, b.len);
	buf_free(&b);
	pthread_mutex_lock(&l->mu);
	l->spool_pos = to;
	pthread_mutex_unlock(&l->mu);
	take_chunks(l);
	return 0;
}

/* Blob bytes [spool_pos, to) in one range request, into the spool. A
 * read of a chunk in that span waits for it (wait_span) rather than
 * fetching the same bytes a second time. */
static int advance(struct lazy_layer *l, uint64_t to, struct cerr *e)
{
	int r;

	pthread_mutex_lock(&l->mu);
	l->span_to = to;
	pthread_mutex_unlock(&l->mu);
	r = fetch_span(l, to, e);
	pthread_mutex_lock(&l->mu);
	l->span_to = 0;
	pthread_cond_broadcast(&l->cv);
	pthread_mutex_unlock(&l->mu);
	return r;
}

/* The spool's bytes [spool_pos, to), which reads put there: hashed in
 * order, not fetched. */
static int skip_had(struct lazy_layer *l, uint64_t to, struct cerr *e)
{
	size_t n = 1u << 20;
	char *buf = xmalloc(n);
	uint64_t at = l->spool_pos;

	while (at < to) {
		size_t k = to - at < n ? (size_t)(to - at) : n;

		if (pread(l->spool, buf, k, (off_t)at) != (ssize_t)k) {
			free(buf);
			return cerr_sys(e, "read %s spool", l->digest);
		}
		hasher_update(&l->spool_hash, buf, k);
		at += k;
	}
	free(buf);
	pthread_mutex_lock(&l->mu);
	l->spool_pos = to;
	pthread_mutex_unlock(&l->mu);
	take_chunks(l);
	return 0;
}

/* A span ends where a member does, so that a read of a member in the
 * span under way can wait for it (wait_span) and none is fetched twice:
 * to, moved to the end of the member it cuts. */
static uint64_t member_end(const struct lazy_layer *l, uint64_t to)
{
	const struct esgz_chunk *ch = l->toc.chunks;
	size_t lo = 0, hi = l->toc.n_chunks;

	while (lo < hi) { /* the first chunk at or after to */
		size_t mid = lo + (hi - lo) / 2;

		if (ch[mid].offset < to)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo > 0 && ch[lo - 1].end > to)
		return ch[lo - 1].end;
	return to;
}

/* Where the background goes next from spool_pos: *to, and whether the
 * spool has those bytes already (a read put them there). */
static bool next_span(struct lazy_layer *l, uint64_t *to)
{
	uint64_t pos = l->spool_pos;
	bool had = false;
	size_t i = 0;

	pthread_mutex_lock(&l->mu);
	while (i < l->n_have && l->have[i].to <= pos)
		i++;
	if (i) {
		memmove(l->have, &l->have[i],
			(l->n_have - i) * sizeof(*l->have));
		l->n_have -= i;
	}
	*to = l->size - pos > SPAN_BG_MAX ? pos + SPAN_BG_MAX : l->size;
	if (l->n_have && l->have[0].from <= pos) {
		*to = l->have[0].to;
		had = true;
	} else if (l->n_have && l->have[0].from < *to) {
		*to = l->have[0].from; /* where a member a read took starts */
	} else {
		*to = member_end(l, *to);
	}
	pthread_mutex_unlock(&l->mu);
	return had;
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
	return advance(l, l->toc.chunks[j - 1].end, e);
}

static bool stopped(struct lazy_layer *l)
{
	bool s;

	pthread_mutex_lock(&l->mu);
	s = l->stop;
	pthread_mutex_unlock(&l->mu);
	return s;
}

/* The rest of the blob, in order, each span after the reads waiting. */
static int fetch_rest(struct lazy_layer *l)
{
	size_t failures = 0;

	while (l->spool_pos < l->size) {
		struct cerr e = {0};
		uint64_t to;

		if (next_span(l, &to)) {
			if (skip_had(l, to, &e) < 0) {
				log_warn("lazy layer %s: %s", l->digest, e.msg);
				return -1;
			}
			continue;
		}
		pthread_mutex_lock(&l->mu);
		while (l->reading > 0 && !l->stop)
			pthread_cond_wait(&l->cv, &l->mu);
		pthread_mutex_unlock(&l->mu);
		if (stopped(l))
			return -1;
		if (advance(l, to, &e) < 0) {
			log_warn("lazy layer %s: background fetch: %s",
				 l->digest, e.msg);
			if (++failures > 8)
				return -1; /* reads still fetch on demand */
			nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
		}
	}
	return 0;
}

static void *background(void *arg)
{
	struct lazy_layer *l = arg;
	char got[DIGEST_STR_MAX];
	struct cerr e = {0};

	if (fetch_rest(l) < 0)
		return NULL;
	hasher_final(&l->spool_hash, got);
	if (strcmp(got, l->digest)) {
		log_warn("lazy layer %s: the blob hashes to %s; not promoted",
			 l->digest, got);
		return NULL;
	}
	if (!lazy_complete(l)) {
		log_warn("lazy layer %s: chunks refused; not promoted",
			 l->digest);
		return NULL;
	}
	log_info("lazy layer %s: every chunk fetched and verified", l->digest);
	if (!l->diff_id[0])
		return NULL;
	if (lazy_promote(l, &e) < 0)
		log_warn("lazy layer %s: promotion: %s", l->digest, e.msg);
	else
		log_info("lazy layer %s: promoted to layers/%s", l->digest,
			 l->diff_id);
	return NULL;
}

void lazy_background_start(struct lazy_layer *l)
{
	if (pthread_create(&l->bg, NULL, background, l) == 0)
		l->bg_running = true;
}

/* The cache with its gc lock held shared, without waiting for a gc: a gc
 * waits for this server to end, and it must not wait for the gc. */
static int open_cache(struct lazy_layer *l, struct cache *c, struct cerr *e)
{
	for (;;) {
		if (cache_open(l->cache_root, CACHE_USE_NOWAIT, c, e) == 0)
			return 0;
		cache_close(c);
		if (e->code != EWOULDBLOCK || stopped(l))
			return -1;
		cerr_clear(e);
		nanosleep(&(struct timespec){.tv_sec = 1}, NULL);
	}
}

/* blob.part into blobs/ (kept when another pull put it there first). */
static int commit_spool(struct lazy_layer *l, const struct cache *c,
			struct cerr *e)
{
	cleanup_free char *dst = xasprintf("blobs/%s", l->digest);
	cleanup_close int lock = cache_lock(c, l->digest, e);

	if (lock < 0)
		return -1;
	*strchr(dst, ':') = '/';
	if (cache_has_blob(c, l->digest, (int64_t)l->size)) {
		unlinkat(l->dir, "blob.part", 0);
		return 0;
	}
	if (fsync(l->spool) < 0 ||
	    renameat(l->dir, "blob.part", c->fd, dst) < 0)
		return cerr_sys(e, "commit blob %s", l->digest);
	return 0;
}

int lazy_promote(struct lazy_layer *l, struct cerr *e)
{
	struct cache c = {.fd = -1, .gc_lock = -1};
	struct descriptor d = {.digest = l->digest,
			       .size = (int64_t)l->size,
			       .toc_digest = l->toc_digest};
	struct fetch f = {.cache = &c, .reserve = UNPACK_RESERVE_DEFAULT};
	struct blob_job b = {.fetch = &f, .desc = &d, .fd = -1, .wfd = -1};
	struct layer_job lj = {.diff_id = l->diff_id, .blob = &b};
	cleanup_free char *path = xasprintf("blobs/%s", l->digest);
	int r = -1;

	*strchr(path, ':') = '/';
	pthread_mutex_init(&f.mu, NULL);
	pthread_mutex_init(&b.mu, NULL);
	pthread_cond_init(&b.cv, NULL);
	if (open_cache(l, &c, e) < 0 || commit_spool(l, &c, e) < 0)
		goto out;
	b.fd = openat(c.fd, path, O_RDONLY | O_CLOEXEC);
	if (b.fd < 0) {
		cerr_sys(e, "open %s", path);
		goto out;
	}
	b.avail = b.written = l->size;
	b.done = b.cached = true;
	r = fetch_overlay_layer(&f, &lj, e);
	if (r == 0)
		atomic_store(&l->promoted, true);
out:
	if (b.fd >= 0)
		close(b.fd);
	pthread_cond_destroy(&b.cv);
	pthread_mutex_destroy(&b.mu);
	pthread_mutex_destroy(&f.mu);
	cache_close(&c);
	return r;
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
			       &tail, NULL, e) < 0 ||
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
			       (size_t)(l->size - fs - toc_off), &gz, NULL,
			       e) < 0 ||
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
	      const struct descriptor *d, const char *diff_id,
	      struct lazy_layer **out, struct cerr *e)
{
	struct lazy_layer *l = xcalloc(1, sizeof(*l));
	cleanup_free char *dir = NULL;
	char name[DIGEST_STR_MAX];

	l->reg = reg;
	l->dir = l->chunk_dir = l->spool = -1;
	l->size = (uint64_t)d->size;
	snprintf(l->digest, sizeof(l->digest), "%s", d->digest);
	snprintf(l->diff_id, sizeof(l->diff_id), "%s", diff_id ? diff_id : "");
	l->cache_root = xstrdup(c->root);
	pthread_mutex_init(&l->mu, NULL);
	pthread_cond_init(&l->cv, NULL);
	pthread_cond_init(&l->stats_cv, NULL);
	pthread_mutex_init(&l->stats_mu, NULL);
	if (!d->toc_digest) {
		cerr_set(e, EINVAL, "not an eStargz layer (no %s annotation)",
			 ESGZ_TOC_ANNOTATION);
		goto fail;
	}
	snprintf(l->toc_digest, sizeof(l->toc_digest), "%s", d->toc_digest);
	if (get_toc(l, d->toc_digest, e) < 0 ||
	    hasher_init(&l->spool_hash, l->digest, e) < 0)
		goto fail;
	l->fetching = xcalloc(l->toc.n_chunks + 1, 1);
	snprintf(name, sizeof(name), "%s", d->digest);
	name[strcspn(name, ":")] = '-';
	dir = cache_path(c, "lazy/%s/chunks", name);
	if (fs_mkdir_p(dir, 0700, e) < 0)
		goto fail;
	l->chunk_dir = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	l->dir = openat(l->chunk_dir, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (l->chunk_dir < 0 || l->dir < 0) {
		cerr_sys(e, "%s", dir);
		goto fail;
	}
	/* A spool an earlier server left is started afresh: its bytes were
	 * never checked, and the chunks it gave are kept anyway. */
	l->spool =
	    openat(l->dir, "blob.part",
		   O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (l->spool < 0) {
		cerr_sys(e, "%s/../blob.part", dir);
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
	if (l->stats_running) {
		pthread_mutex_lock(&l->mu);
		l->stats_stop = true;
		pthread_cond_broadcast(&l->stats_cv);
		pthread_mutex_unlock(&l->mu);
		pthread_join(l->stats_th, NULL);
		lazy_stats_write(l); /* the closing counts */
	}
	if (l->spool >= 0) {
		close(l->spool);
		if (l->dir >= 0 && !atomic_load(&l->promoted))
			unlinkat(l->dir, "blob.part", 0);
	}
	hasher_free(&l->spool_hash);
	free(l->have);
	free(l->fetching);
	if (l->chunk_dir >= 0)
		close(l->chunk_dir);
	if (l->dir >= 0)
		close(l->dir);
	free(l->cache_root);
	esgz_toc_free(&l->toc);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	pthread_cond_destroy(&l->stats_cv);
	pthread_mutex_destroy(&l->stats_mu);
	free(l);
}

/* ---- the stats file ---- */

void lazy_stats_write(struct lazy_layer *l)
{
	char buf[512];
	int n, fd;

	if (l->dir < 0)
		return;
	pthread_mutex_lock(&l->stats_mu);
	n = snprintf(buf, sizeof(buf),
		     "pid %ld\ndemand_bytes %llu\nbackground_bytes %llu\n"
		     "demand_fetches %llu\ndemand_ns %llu\nrefused %llu\n"
		     "failed_reads %llu\n%s%s%s",
		     (long)getpid(),
		     (unsigned long long)atomic_load(&l->st.ondemand_bytes),
		     (unsigned long long)atomic_load(&l->st.background_bytes),
		     (unsigned long long)atomic_load(&l->st.ondemand_fetches),
		     (unsigned long long)atomic_load(&l->st.ondemand_ns),
		     (unsigned long long)atomic_load(&l->st.refused),
		     (unsigned long long)atomic_load(&l->st.failed_reads),
		     l->last_failure[0] ? "last_failure " : "", l->last_failure,
		     l->last_failure[0] ? "\n" : "");
	fd =
	    openat(l->dir, "stats.tmp",
		   O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd >= 0 && write(fd, buf, (size_t)n) != n) {
		close(fd);
		fd = -1;
		unlinkat(l->dir, "stats.tmp", 0);
	}
	if (fd >= 0) {
		close(fd);
		if (renameat(l->dir, "stats.tmp", l->dir, "stats") < 0)
			unlinkat(l->dir, "stats.tmp", 0);
	}
	pthread_mutex_unlock(&l->stats_mu);
}

static void *stats_main(void *arg)
{
	struct lazy_layer *l = arg;
	const char *env = getenv("CELL_PULL_LAZY_STATS_MS");
	long ms = env ? strtol(env, NULL, 10) : 5000;
	struct timespec t;

	if (ms < 10 || ms > 3600000)
		ms = 5000;
	pthread_mutex_lock(&l->mu);
	while (!l->stats_stop) {
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_sec += ms / 1000;
		t.tv_nsec += (ms % 1000) * 1000000;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&l->stats_cv, &l->mu, &t);
		if (l->stats_stop)
			break;
		pthread_mutex_unlock(&l->mu);
		lazy_stats_write(l);
		pthread_mutex_lock(&l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

void lazy_stats_start(struct lazy_layer *l)
{
	lazy_stats_write(l);
	if (pthread_create(&l->stats_th, NULL, stats_main, l) == 0)
		l->stats_running = true;
	else
		log_warn("lazy layer %s: no stats thread", l->digest);
}
