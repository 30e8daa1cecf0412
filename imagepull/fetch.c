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

/* ---- blob side: download into the spool ---- */

static void blob_publish(struct blob_job *b, uint64_t avail, bool done)
{
	pthread_mutex_lock(&b->mu);
	b->avail = avail;
	b->done = done;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}

static void blob_fail(struct fetch *f, struct blob_job *b,
		      const struct cerr *e)
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
	if (pwrite(b->wfd, p, n, (off_t)b->written) != (ssize_t)n)
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
				b->desc->digest,
				(unsigned long long)b->written,
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
	if (renameat(f->cache->fd, tmp, f->cache->fd, dst) < 0)
		return cerr_sys(e, "commit blob %s", b->desc->digest);
	return 0;
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
	if (f->validate && cache_verify_blob(f->cache, b->desc->digest, &e) < 0) {
		log_warn("%s; downloading it again", e.msg);
		return false;
	}
	fd = openat(f->cache->fd, p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	pthread_mutex_lock(&b->mu);
	b->fd = fd;
	b->cached = true;
	pthread_mutex_unlock(&b->mu);
	b->written = (uint64_t)b->desc->size;
	return true;
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
	if (use_cached_blob(f, b)) {
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

/* ---- layer side: read the spool as it grows ---- */

/* Wait for bytes at off; returns bytes read, 0 at the end, -1 on error. */
static ssize_t blob_read(struct fetch *f, struct blob_job *b, uint64_t off,
			 void *p, size_t n, struct cerr *e)
{
	int fd;

	pthread_mutex_lock(&b->mu);
	while (b->avail <= off && !b->done && !b->failed && !f->aborted)
		pthread_cond_wait(&b->cv, &b->mu);
	if (b->failed || (f->aborted && b->avail <= off && !b->done)) {
		pthread_mutex_unlock(&b->mu);
		if (b->failed) {
			*e = b->err;
			return -1;
		}
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

struct reader {
	struct fetch *f;
	struct blob_job *b;
	uint64_t off;
	struct decomp *d;
	unsigned char *in, *out;
	size_t in_pos, in_len;
	bool in_eof;
	struct hasher diff;
	struct cerr *e;
	bool failed;
};

/* Fill the input buffer from the spool; false at its end. */
static int refill(struct reader *r)
{
	ssize_t n;

	if (r->in_pos) {
		memmove(r->in, r->in + r->in_pos, r->in_len - r->in_pos);
		r->in_len -= r->in_pos;
		r->in_pos = 0;
	}
	n = blob_read(r->f, r->b, r->off, r->in + r->in_len,
		      IO_CHUNK - r->in_len, r->e);
	if (n < 0)
		return -1;
	r->off += (uint64_t)n;
	r->in_len += (size_t)n;
	r->in_eof = n == 0;
	return 0;
}

static la_ssize_t read_cb(struct archive *a, void *arg, const void **out)
{
	struct reader *r = arg;

	if (r->failed)
		return -1;
	if (!r->d) {
		while (r->in_len < 4 && !r->in_eof)
			if (refill(r) < 0)
				goto fail;
		r->d = decomp_new(compression_sniff(r->in, r->in_len));
	}
	for (;;) {
		size_t used = 0, made = 0;
		bool end;

		if (r->in_pos < r->in_len) {
			if (decomp_run(r->d, r->in + r->in_pos,
				       r->in_len - r->in_pos, &used, r->out,
				       IO_CHUNK, &made, &end, r->e) < 0)
				goto fail;
			r->in_pos += used;
			if (made) {
				hasher_update(&r->diff, r->out, made);
				*out = r->out;
				return (la_ssize_t)made;
			}
			if (used)
				continue;
		}
		if (r->in_eof) {
			if (!decomp_finished(r->d) || r->in_pos < r->in_len) {
				cerr_set(r->e, EBADMSG,
					 "compressed layer data is truncated");
				goto fail;
			}
			return 0;
		}
		if (refill(r) < 0)
			goto fail;
	}
fail:
	r->failed = true;
	archive_set_error(a, EIO, "%s", r->e->msg);
	return -1;
}

/* Unpack one layer from its blob into rootfd and check its diff-id. */
int layer_unpack(struct fetch *f, struct layer_job *l, int rootfd,
		 enum unpack_mode mode, struct cerr *e)
{
	struct reader r = {.f = f, .b = l->blob, .e = e};
	struct archive *a = archive_read_new();
	struct unpack_stats st = {0};
	char got[DIGEST_STR_MAX];
	int ret = -1;
	const void *dummy;

	r.in = xmalloc(IO_CHUNK);
	r.out = xmalloc(IO_CHUNK);
	if (hasher_init(&r.diff, l->diff_id, e) < 0)
		goto out;
	archive_read_support_format_tar(a);
	if (archive_read_open(a, &r, NULL, read_cb, NULL) != ARCHIVE_OK) {
		if (!r.failed)
			cerr_set(e, EIO, "%s", archive_error_string(a));
		goto out;
	}
	if (unpack_layer(a, rootfd, mode, &st, e) < 0)
		goto out;
	/* The diff-id covers the whole stream, tar padding included. */
	while (read_cb(a, &r, &dummy) > 0)
		;
	if (r.failed)
		goto out;
	hasher_final(&r.diff, got);
	if (strcmp(got, l->diff_id) != 0) {
		cerr_set(e, EBADMSG,
			 "layer %s: uncompressed content hashes to %s, the "
			 "config says %s",
			 l->blob->desc->digest, got, l->diff_id);
		goto out;
	}
	ret = 0;
out:
	if (ret < 0 && r.failed && !e->msg[0])
		cerr_set(e, EIO, "layer read failed");
	archive_read_free(a);
	hasher_free(&r.diff);
	decomp_free(r.d);
	free(r.in);
	free(r.out);
	return ret;
}
