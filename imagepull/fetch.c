// SPDX-License-Identifier: Apache-2.0
/* Layer pipelines. Each layer blob is downloaded by one thread into a spool
 * file in the cache (hashing as it goes) while another thread decompresses
 * and unpacks it from that spool as the bytes land: the blob is never read
 * twice from the network nor unpacked after the fact. Overlay layers unpack
 * concurrently; a flattened rootfs applies the layers in order while later
 * ones keep downloading. */
#include <archive.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cleanup.h"
#include "digest.h"
#include "fsutil.h"
#include "log.h"
#include "pull-internal.h"
#include "fetch.h"
#include "util.h"

#define IO_CHUNK (256u << 10)
#define PROGRESS_STEP (1u << 20)

/* ---- shared by the pipelines ---- */

void fetch_abort(struct fetch *f, const struct cerr *e)
{
	pthread_mutex_lock(&f->mu);
	if (!f->aborted) {
		f->aborted = true;
		f->first_err = *e;
	}
	pthread_mutex_unlock(&f->mu);
	for (int i = 0; i < f->n_blobs; i++) {
		pthread_mutex_lock(&f->blobs[i].mu);
		pthread_cond_broadcast(&f->blobs[i].cv);
		pthread_mutex_unlock(&f->blobs[i].mu);
	}
}

void fetch_emit(struct fetch *f, const struct pull_event *ev)
{
	if (!f->progress)
		return;
	pthread_mutex_lock(&f->mu);
	f->progress(ev, f->progress_arg);
	pthread_mutex_unlock(&f->mu);
}

/* ---- blob side: download into the spool ---- */

static void blob_publish(struct blob_job *b, uint64_t avail, bool done)
{
	pthread_mutex_lock(&b->mu);
	b->avail = avail;
	b->done = done;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

static void blob_fail(struct fetch *f, struct blob_job *b, const struct cerr *e)
{
	pthread_mutex_lock(&b->mu);
	b->failed = true;
	b->err = *e;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	fetch_abort(f, e);
}

static void report(struct fetch *f, struct blob_job *b, bool force)
{
	struct pull_event ev = {.kind = PULL_EV_LAYER};

	if (!f->progress)
		return;
	if (!force && b->written - b->reported < PROGRESS_STEP)
		return;
	b->reported = b->written;
	ev.layer = b->first_layer;
	ev.n_layers = f->n_layers;
	ev.digest = b->desc->digest;
	ev.downloaded = b->written;
	ev.size = (uint64_t)b->desc->size;
	fetch_emit(f, &ev);
}

/* How often a download looks at the free space (as unpacking does). */
#define SPOOL_CHECK_BYTES (4u << 20)

/* A download stops before the cache's disk goes below the reserve. */
static int spool_room(struct blob_job *b, size_t n, struct cerr *e)
{
	uint64_t reserve = b->fetch->reserve;
	struct statvfs sv;
	uint64_t avail;

	if (!reserve || b->written / SPOOL_CHECK_BYTES ==
			    (b->written + n) / SPOOL_CHECK_BYTES)
		return 0;
	if (fstatvfs(b->wfd, &sv) < 0)
		return 0; /* the write itself will tell */
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	reserve = unpack_reserve(reserve, (uint64_t)sv.f_blocks * sv.f_frsize);
	if (avail >= reserve + SPOOL_CHECK_BYTES)
		return 0;
	return cerr_set(e, ENOSPC,
			"does not fit: no space left above the reserve: %llu "
			"MiB free, and pulling keeps %llu MiB free on the "
			"cache's disk; blob %s is %lld MiB",
			(unsigned long long)(avail >> 20),
			(unsigned long long)(reserve >> 20), b->desc->digest,
			(long long)(b->desc->size >> 20));
}

static int spool_sink(void *arg, const void *p, size_t n, struct cerr *e)
{
	struct blob_job *b = arg;

	if (b->fetch->aborted)
		return cerr_set(e, ECANCELED, "pull aborted");
	if (b->written + n > (uint64_t)b->desc->size)
		return cerr_set(e, EFBIG,
				"blob is larger than the %lld bytes the "
				"manifest says",
				(long long)b->desc->size);
	if (spool_room(b, n, e) < 0)
		return -1;
	if (fs_pwrite_all(b->wfd, p, n, (off_t)b->written) < 0)
		return cerr_sys(e, "write spool");
	hasher_update(&b->hash, p, n);
	b->written += n;
	blob_publish(b, b->written, false);
	report(b->fetch, b, false);
	return 0;
}

/* Re-hash what a crashed pull left in the spool so the download resumes
 * where it stopped. */
static int resume_spool(struct blob_job *b, struct cerr *e)
{
	unsigned char *chunk;
	struct stat st;
	uint64_t off = 0;

	if (fstat(b->wfd, &st) < 0)
		return cerr_sys(e, "stat spool");
	if ((uint64_t)st.st_size > (uint64_t)b->desc->size) {
		if (ftruncate(b->wfd, 0) < 0)
			return cerr_sys(e, "truncate spool");
		return 0;
	}
	chunk = xmalloc(IO_CHUNK);
	while (off < (uint64_t)st.st_size) {
		ssize_t n = pread(b->wfd, chunk, IO_CHUNK, (off_t)off);
		if (n <= 0)
			break;
		hasher_update(&b->hash, chunk, (size_t)n);
		off += (uint64_t)n;
	}
	free(chunk);
	b->written = off;
	if (off)
		log_info("resuming %s at byte %llu", b->desc->digest,
			 (unsigned long long)off);
	return 0;
}

/* Open the spool, resume it, publish a reader fd, then stream. */
static int download(struct fetch *f, struct blob_job *b, const char *tmp,
		    struct cerr *e)
{
	char got[DIGEST_STR_MAX];
	int rfd;

	b->wfd = openat(f->cache->fd, tmp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (b->wfd < 0)
		return cerr_sys(e, "create %s/%s", f->cache->root, tmp);
	if (hasher_init(&b->hash, b->desc->digest, e) < 0)
		return -1;
	if (resume_spool(b, e) < 0)
		return -1;
	rfd = openat(f->cache->fd, tmp, O_RDONLY | O_CLOEXEC);
	if (rfd < 0)
		return cerr_sys(e, "open %s", tmp);
	pthread_mutex_lock(&b->mu);
	b->fd = rfd;
	pthread_mutex_unlock(&b->mu);
	blob_publish(b, b->written, false);
	if (b->written < (uint64_t)b->desc->size &&
	    registry_stream_blob(f->reg, b->desc->digest, b->written,
				 spool_sink, b, e) < 0)
		return -1;
	if (b->written != (uint64_t)b->desc->size)
		return cerr_set(e, EBADMSG,
				"blob %s: got %llu bytes, the manifest says "
				"%lld",
				b->desc->digest, (unsigned long long)b->written,
				(long long)b->desc->size);
	hasher_final(&b->hash, got);
	if (strcmp(got, b->desc->digest) != 0)
		return cerr_set(e, EBADMSG,
				"blob %s: digest mismatch (the data hashes to "
				"%s)",
				b->desc->digest, got);
	return 0;
}

static int commit_blob(struct fetch *f, struct blob_job *b, const char *tmp,
		       struct cerr *e)
{
	cleanup_free char *dst = xasprintf("blobs/%s", b->desc->digest);

	*strchr(dst, ':') = '/';
	/* A shared cache is read by other machines' (squashed) root. */
	if (f->cache->shared_layout && fchmodat(f->cache->fd, tmp, 0644, 0) < 0)
		return cerr_sys(e, "chmod blob %s", b->desc->digest);
	if (renameat(f->cache->fd, tmp, f->cache->fd, dst) < 0)
		return cerr_sys(e, "commit blob %s", b->desc->digest);
	return 0;
}

/* The blob is whole at fd (the cache's or the share's): nothing to
 * download. */
static bool blob_from(struct blob_job *b, int fd)
{
	pthread_mutex_lock(&b->mu);
	b->fd = fd;
	b->cached = true;
	pthread_mutex_unlock(&b->mu);
	b->written = (uint64_t)b->desc->size;
	return true;
}

/* Use the cached blob when it is there (and good, if asked to check). */
static bool use_cached_blob(struct fetch *f, struct blob_job *b)
{
	cleanup_free char *p = xasprintf("blobs/%s", b->desc->digest);
	struct cerr e = {0};
	int fd;

	*strchr(p, ':') = '/';
	if (!cache_has_blob(f->cache, b->desc->digest, b->desc->size))
		return false;
	if (f->validate &&
	    cache_verify_blob(f->cache, b->desc->digest, &e) < 0) {
		log_warn("%s; downloading it again", e.msg);
		return false;
	}
	fd = openat(f->cache->fd, p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	return blob_from(b, fd);
}

/* The blob from the shared tier, read in place: a flattened rootfs, or a
 * layer the share has packed but not unpacked. Its bytes are believed only
 * through the diff-id check of the unpack. */
static bool use_shared_blob(struct fetch *f, struct blob_job *b)
{
	struct cerr e = {0};
	int fd;

	if (!f->shared)
		return false;
	fd = shared_blob_fd(f->shared, b->desc->digest, b->desc->size, &e);
	if (fd < 0) {
		if (e.code != ENOENT)
			log_warn("shared cache: %s; downloading it", e.msg);
		return false;
	}
	return blob_from(b, fd);
}

void blob_job_run(struct fetch *f, struct blob_job *b)
{
	cleanup_free char *tmp = xasprintf("tmp/blob-%s", b->desc->digest);
	cleanup_close int lock = -1;
	struct cerr e = {0};

	*strchr(tmp, ':') = '-';
	lock = cache_lock(f->cache, b->desc->digest, &e);
	if (lock < 0)
		goto fail;
	if (use_cached_blob(f, b) || use_shared_blob(f, b)) {
		blob_publish(b, b->written, true);
		report(f, b, true);
		return;
	}
	if (download(f, b, tmp, &e) < 0 || commit_blob(f, b, tmp, &e) < 0) {
		unlinkat(f->cache->fd, tmp, 0);
		goto fail;
	}
	blob_publish(b, b->written, true);
	report(f, b, true);
	return;
fail:
	blob_fail(f, b, &e);
}

/* ---- layer side: read the spool as it grows ----
 *
 * A decompression thread (producer) reads the spool, inflates and hashes
 * the tar stream for the diff-id, and fills a small ring of chunks; the
 * layer thread (consumer) hands the chunks to libarchive and writes files.
 * Inflating and writing each take about half the work, so the two cores
 * share it; the ring bounds memory at RING_N chunks. */

#define RING_N 8

struct ring {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned char *buf[RING_N];
	size_t len[RING_N];
	int head, count; /* head: next chunk for the consumer */
	bool held;	 /* the consumer still reads buf[head] */
	bool eof, failed, stop;
	struct cerr err;
};

struct producer {
	struct fetch *f;
	struct blob_job *b;
	struct ring *ring;
	uint64_t off;
	struct decomp *d;
	unsigned char *in;
	size_t in_pos, in_len;
	bool in_eof;
	struct hasher diff;
};

/* Wait for bytes at off; returns bytes read, 0 at the end, -1 on error. */
static ssize_t blob_read(struct producer *pr, void *p, size_t n, struct cerr *e)
{
	struct blob_job *b = pr->b;
	struct fetch *f = pr->f;
	uint64_t off = pr->off;
	int fd;

	pthread_mutex_lock(&b->mu);
	while (b->avail <= off && !b->done && !b->failed && !f->aborted &&
	       !pr->ring->stop)
		pthread_cond_wait(&b->cv, &b->mu);
	if (b->failed) {
		*e = b->err;
		pthread_mutex_unlock(&b->mu);
		return -1;
	}
	if (b->avail <= off && !b->done) {
		pthread_mutex_unlock(&b->mu);
		return cerr_set(e, ECANCELED, "pull aborted");
	}
	if (b->avail <= off) {
		pthread_mutex_unlock(&b->mu);
		return 0;
	}
	if (n > b->avail - off)
		n = (size_t)(b->avail - off);
	fd = b->fd;
	pthread_mutex_unlock(&b->mu);
	ssize_t r = pread(fd, p, n, (off_t)off);
	if (r < 0)
		return cerr_sys(e, "read spool");
	return r;
}

/* Fill the input buffer from the spool. */
static int refill(struct producer *pr, struct cerr *e)
{
	ssize_t n;

	if (pr->in_pos) {
		memmove(pr->in, pr->in + pr->in_pos, pr->in_len - pr->in_pos);
		pr->in_len -= pr->in_pos;
		pr->in_pos = 0;
	}
	n = blob_read(pr, pr->in + pr->in_len, IO_CHUNK - pr->in_len, e);
	if (n < 0)
		return -1;
	pr->off += (uint64_t)n;
	pr->in_len += (size_t)n;
	pr->in_eof = n == 0;
	return 0;
}

/* Produce up to cap bytes of tar stream into out; 0 at its end. */
static ssize_t produce(struct producer *pr, unsigned char *out, size_t cap,
		       struct cerr *e)
{
	if (!pr->d) {
		while (pr->in_len < 4 && !pr->in_eof)
			if (refill(pr, e) < 0)
				return -1;
		pr->d = decomp_new(compression_sniff(pr->in, pr->in_len));
	}
	for (;;) {
		size_t used = 0, made = 0;
		bool end;

		if (pr->in_pos < pr->in_len) {
			if (decomp_run(pr->d, pr->in + pr->in_pos,
				       pr->in_len - pr->in_pos, &used, out, cap,
				       &made, &end, e) < 0)
				return -1;
			pr->in_pos += used;
			if (made) {
				hasher_update(&pr->diff, out, made);
				return (ssize_t)made;
			}
			if (used)
				continue;
		}
		if (pr->in_eof) {
			if (!decomp_finished(pr->d) || pr->in_pos < pr->in_len)
				return cerr_set(e, EBADMSG,
						"compressed layer data is "
						"truncated");
			return 0;
		}
		if (refill(pr, e) < 0)
			return -1;
	}
}

/* Take a free slot; false when told to stop. */
static bool ring_slot(struct ring *q, int *slot)
{
	pthread_mutex_lock(&q->mu);
	while (q->count == RING_N && !q->stop)
		pthread_cond_wait(&q->cv, &q->mu);
	*slot = (q->head + q->count) % RING_N;
	pthread_mutex_unlock(&q->mu);
	return !q->stop;
}

static void *producer_main(void *arg)
{
	struct producer *pr = arg;
	struct ring *q = pr->ring;
	struct cerr e = {0};
	int slot;

	while (ring_slot(q, &slot)) {
		ssize_t n = produce(pr, q->buf[slot], IO_CHUNK, &e);

		pthread_mutex_lock(&q->mu);
		if (n < 0) {
			q->failed = true;
			q->err = e;
		} else if (n == 0) {
			q->eof = true;
		} else {
			q->len[slot] = (size_t)n;
			q->count++;
		}
		pthread_cond_broadcast(&q->cv);
		pthread_mutex_unlock(&q->mu);
		if (n <= 0)
			break;
	}
	return NULL;
}

struct consumer {
	struct ring *ring;
	struct cerr *e;
	uint64_t reserve;
	bool estargz; /* hide eStargz's own entries, as a lazy mount does */
	bool failed;
};

static la_ssize_t read_cb(struct archive *a, void *arg, const void **out)
{
	struct consumer *c = arg;
	struct ring *q = c->ring;
	la_ssize_t n;

	pthread_mutex_lock(&q->mu);
	if (q->held) { /* libarchive is done with the previous chunk */
		q->held = false;
		q->head = (q->head + 1) % RING_N;
		q->count--;
		pthread_cond_broadcast(&q->cv);
	}
	while (q->count == 0 && !q->eof && !q->failed)
		pthread_cond_wait(&q->cv, &q->mu);
	if (q->count) {
		q->held = true;
		*out = q->buf[q->head];
		n = (la_ssize_t)q->len[q->head];
	} else if (q->failed) {
		*c->e = q->err;
		c->failed = true;
		n = -1;
	} else {
		n = 0;
	}
	pthread_mutex_unlock(&q->mu);
	if (n < 0 && a)
		archive_set_error(a, EIO, "%s", c->e->msg);
	return n;
}

static void ring_init(struct ring *q)
{
	memset(q, 0, sizeof(*q));
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cv, NULL);
	for (int i = 0; i < RING_N; i++)
		q->buf[i] = xmalloc(IO_CHUNK);
}

/* Stop the producer (it may wait for the spool or for a slot) and reap. */
static void ring_finish(struct ring *q, struct blob_job *b, pthread_t th)
{
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
	pthread_mutex_lock(&b->mu);
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
	pthread_join(th, NULL);
	for (int i = 0; i < RING_N; i++)
		free(q->buf[i]);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
}

/* Apply the tar stream from the ring; drain it so the diff-id covers the
 * whole stream, tar padding included. */
static int consume(struct consumer *c, int rootfd, enum unpack_mode mode,
		   struct cerr *e)
{
	struct archive *a = archive_read_new();
	struct unpack_stats st = {0};
	const void *dummy;
	int ret = -1;

	archive_read_support_format_tar(a);
	if (archive_read_open(a, c, NULL, read_cb, NULL) != ARCHIVE_OK) {
		if (!c->failed)
			cerr_set(e, EIO, "%s", archive_error_string(a));
	} else if ((c->estargz ? unpack_layer_estargz(a, rootfd, mode,
						      c->reserve, &st, e)
			       : unpack_layer(a, rootfd, mode, c->reserve, &st,
					      e)) == 0) {
		while (read_cb(NULL, c, &dummy) > 0)
			;
		ret = c->failed ? -1 : 0;
	}
	if (ret < 0 && c->failed)
		*e = c->ring->err; /* the root cause, not libarchive's echo */
	archive_read_free(a);
	return ret;
}

/* A layer that fails to decode while its blob still downloads most likely
 * has a corrupt blob: wait for the download's own verdict and report that
 * (a digest mismatch) rather than its echo in the decoder (a bad checksum).
 * Refusals of hostile entries are not decode errors and fail at once. */
static void prefer_blob_error(struct fetch *f, struct blob_job *b,
			      struct cerr *e)
{
	if (e->code != EBADMSG && e->code != EIO && e->code != EILSEQ)
		return;
	pthread_mutex_lock(&b->mu);
	while (!b->done && !b->failed && !f->aborted)
		pthread_cond_wait(&b->cv, &b->mu);
	if (b->failed)
		*e = b->err;
	pthread_mutex_unlock(&b->mu);
}

/* Unpack one layer from its blob into rootfd and check its diff-id. */
int layer_unpack(struct fetch *f, struct layer_job *l, int rootfd,
		 enum unpack_mode mode, struct cerr *e)
{
	struct ring q;
	struct producer pr = {.f = f, .b = l->blob, .ring = &q};
	struct consumer c = {.ring = &q,
			     .e = e,
			     .reserve = f->reserve,
			     .estargz = l->blob->desc->toc_digest != NULL};
	char got[DIGEST_STR_MAX];
	pthread_t th;
	int ret;

	if (hasher_init(&pr.diff, l->diff_id, e) < 0)
		return -1;
	ring_init(&q);
	pr.in = xmalloc(IO_CHUNK);
	if (pthread_create(&th, NULL, producer_main, &pr) != 0) {
		ret = cerr_set(e, EAGAIN, "cannot start a thread");
		goto out_nothread;
	}
	ret = consume(&c, rootfd, mode, e);
	ring_finish(&q, l->blob, th);
	if (ret == 0) {
		hasher_final(&pr.diff, got);
		if (strcmp(got, l->diff_id) != 0)
			ret = cerr_set(e, EBADMSG,
				       "layer %s: uncompressed content hashes "
				       "to %s, the config says %s",
				       l->blob->desc->digest, got, l->diff_id);
	}
	if (ret < 0)
		prefer_blob_error(f, l->blob, e);
	goto out;
out_nothread:
	for (int i = 0; i < RING_N; i++)
		free(q.buf[i]);
out:
	hasher_free(&pr.diff);
	decomp_free(pr.d);
	free(pr.in);
	return ret;
}

/* ---- into the cache ---- */

/* The layer's lock into *lock, and tmp made afresh for it: 1 when the
 * layer is in the cache already (another pull put it in), 0, or -1. */
int fetch_layer_claim(const struct cache *c, const char *diff_id,
		      const char *tmp, int *lock, struct cerr *e)
{
	*lock = cache_lock(c, diff_id, e);
	if (*lock < 0)
		return -1;
	if (cache_has_layer(c, diff_id))
		return 1;
	if (fs_rm_rf_at(c->fd, tmp, e) < 0)
		return -1;
	if (mkdirat(c->fd, tmp, 0755) < 0)
		return cerr_sys(e, "mkdir %s/%s", c->root, tmp);
	return 0;
}

/* Unpack one layer into the cache: tmp/layer-…, then rename. */
int fetch_overlay_layer(struct fetch *f, struct layer_job *l, struct cerr *e)
{
	const struct cache *c = f->cache;
	cleanup_free char *tmp = xasprintf("tmp/layer-%s", l->diff_id);
	cleanup_free char *dst = xasprintf("layers/%s", l->diff_id);
	cleanup_close int lock = -1, root = -1;
	int r;

	*strchr(tmp, ':') = '-';
	*strchr(dst, ':') = '/';
	if ((r = fetch_layer_claim(c, l->diff_id, tmp, &lock, e)) != 0)
		return r < 0 ? -1 : 0;
	root = openat(c->fd, tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return cerr_sys(e, "open %s/%s", c->root, tmp);
	if (layer_unpack(f, l, root, UNPACK_OVERLAY, e) < 0 ||
	    renameat(c->fd, tmp, c->fd, dst) < 0) {
		if (!e->code)
			cerr_sys(e, "commit layer %s", l->diff_id);
		struct cerr ignore = {0};
		fs_rm_rf_at(c->fd, tmp, &ignore);
		return -1;
	}
	return 0;
}
