// SPDX-License-Identifier: Apache-2.0
/* pull_image(): resolve a reference to a manifest and config, run the layer
 * pipelines, then make the rootfs (flattened, or an overlay mount). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "digest.h"
#include "fetch.h"
#include "fsutil.h"
#include "lazy.h"
#include "log.h"
#include "pull-internal.h"
#include "util.h"

#define DEFAULT_PARALLEL 4
#define DEFAULT_RETRIES 8
#define MAX_PARALLEL 32

struct pull {
	const struct pull_opts *o;
	struct image_ref ref;
	struct platform plat;
	struct cache cache;
	struct registry *reg;
	char *index_digest;
	char manifest_digest[DIGEST_STR_MAX];
	struct manifest m;
	struct buf config_raw;
	struct image_config config;
	struct fetch f;
	struct layer_job *layers;
	int next_blob, next_layer; /* work queues, under f.mu */
	bool flat;
	int target_fd;
	struct shared sh;  /* the read-only second tier; sh.fd < 0: none */
	int *lower_fds;	   /* per layer: a shared layer's fd, or -1 */
	int layers_shared; /* how many layers the share gave in place */
	/* Lazy layers (eStargz, served through FUSE): per layer, its
	 * server and its lowerdir (lazy/<algo>-<hex>/mnt) or NULL. */
	struct lazyproc *procs;
	char **lower_names;
	int layers_lazy;
	char *user, *pass; /* the registry credentials, for the servers */
};

/* ---- warnings the user should see (the agent shows them) ---- */

__attribute__((format(printf, 2, 3))) static void warn(struct pull *p,
						       const char *fmt, ...)
{
	cleanup_free char *msg = NULL;
	va_list ap;

	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	log_warn("%s", msg);
	if (p->o->progress) {
		struct pull_event ev = {
		    .kind = PULL_EV_WARNING, .layer = -1, .message = msg};
		p->o->progress(&ev, p->o->progress_arg);
	}
}

/* ---- the shared tier: small blobs ---- */

/* A manifest or config from the share, hashed, and copied into the local
 * cache (a few KiB: a restart then needs no share to find it). */
static int shared_small_blob(struct pull *p, const char *digest,
			     struct buf *body)
{
	struct cerr e = {0};

	if (p->sh.fd < 0)
		return -1;
	buf_reset(body);
	if (shared_read_blob(&p->sh, digest, body, &e) < 0) {
		if (e.code != ENOENT)
			warn(p, "shared cache: %s; asking the registry", e.msg);
		buf_reset(body);
		return -1;
	}
	if (cache_put_blob(&p->cache, digest, body->data, body->len, &e) < 0)
		log_warn("%s", e.msg);
	return 0;
}

/* ---- resolution ---- */

/* A manifest by tag (digest computed) or by digest (checked; the cache
 * answers when it can). */
static int get_manifest(struct pull *p, const char *reference, const char *want,
			struct buf *body, char **ctype, struct cerr *e)
{
	char got[DIGEST_STR_MAX];

	if (want && ((cache_has_blob(&p->cache, want, -1) &&
		      cache_read_blob(&p->cache, want, body, e) == 0) ||
		     shared_small_blob(p, want, body) == 0)) {
		memcpy(p->manifest_digest, want, strlen(want) + 1);
		return 0;
	}
	cerr_clear(e);
	buf_reset(body);
	if (registry_get_manifest(p->reg, reference, body, ctype, e) < 0)
		return -1;
	if (digest_buf(want ? want : "sha256", body->data, body->len, got, e) <
	    0)
		return -1;
	if (want && strcmp(got, want) != 0)
		return cerr_set(e, EBADMSG,
				"manifest %s: digest mismatch (the data "
				"hashes to %s)",
				want, got);
	memcpy(p->manifest_digest, got, sizeof(got));
	return cache_put_blob(&p->cache, got, body->data, body->len, e);
}

/* A single-platform image (no index, or the index's pick) for another
 * architecture than the one wanted is refused here, with the platform it
 * has: started, it would only fail with "exec format error". A config
 * that names no architecture is taken (old or hand-made images). */
static int check_config_platform(struct pull *p, struct cerr *e)
{
	struct platform have = {0};
	cleanup_free char *want = NULL, *is = NULL;

	if (!p->config.architecture || !*p->config.architecture)
		return 0;
	snprintf(have.os, sizeof(have.os), "%s",
		 p->config.os && *p->config.os ? p->config.os : p->plat.os);
	snprintf(have.arch, sizeof(have.arch), "%s", p->config.architecture);
	platform_normalize(&have);
	if (!strcmp(have.os, p->plat.os) && !strcmp(have.arch, p->plat.arch))
		return 0;
	want = platform_string(&p->plat);
	is = platform_string(&have);
	return cerr_set(e, ENOEXEC,
			"no image for platform %s: %s is a single-platform "
			"image (available: %s)",
			want, p->o->image, is);
}

static int get_config(struct pull *p, struct cerr *e)
{
	const struct descriptor *d = &p->m.config;
	char got[DIGEST_STR_MAX];

	buf_init(&p->config_raw, CONFIG_MAX);
	if (cache_has_blob(&p->cache, d->digest, d->size) &&
	    cache_read_blob(&p->cache, d->digest, &p->config_raw, e) == 0)
		goto parse;
	cerr_clear(e);
	if (shared_small_blob(p, d->digest, &p->config_raw) == 0)
		goto parse;
	buf_reset(&p->config_raw);
	if (d->size > (int64_t)CONFIG_MAX)
		return cerr_set(e, EFBIG, "config %s is %lld bytes (limit %u)",
				d->digest, (long long)d->size, CONFIG_MAX);
	if (registry_get_blob(p->reg, d->digest, &p->config_raw, e) < 0)
		return -1;
	if (digest_buf(d->digest, p->config_raw.data, p->config_raw.len, got,
		       e) < 0)
		return -1;
	if (strcmp(got, d->digest) != 0)
		return cerr_set(e, EBADMSG,
				"config %s: digest mismatch (the data hashes "
				"to %s)",
				d->digest, got);
	if (cache_put_blob(&p->cache, d->digest, p->config_raw.data,
			   p->config_raw.len, e) < 0)
		return -1;
parse:
	if (image_config_parse(p->config_raw.data, p->config_raw.len,
			       &p->config, e) < 0)
		return cerr_prefix(e, "config %s", d->digest);
	if (check_config_platform(p, e) < 0)
		return -1;
	if (p->config.n_diff_ids != p->m.n_layers)
		return cerr_set(e, EINVAL,
				"config lists %zu diff-ids for %zu layers",
				p->config.n_diff_ids, p->m.n_layers);
	return 0;
}

static int select_from_index(struct pull *p, struct buf *body, char **ctype,
			     struct cerr *e)
{
	const struct descriptor *d = manifest_select(&p->m, &p->plat, e);
	cleanup_free char *want = NULL;

	if (!d)
		return -1;
	want = xstrdup(d->digest);
	p->index_digest = xstrdup(p->manifest_digest);
	manifest_free(&p->m);
	free(*ctype);
	*ctype = NULL;
	if (get_manifest(p, want, want, body, ctype, e) < 0)
		return -1;
	if (manifest_parse(body->data, body->len, *ctype, &p->m, e) < 0)
		return cerr_prefix(e, "manifest %s", want);
	if (p->m.kind != MANIFEST_IMAGE)
		return cerr_set(e, EINVAL, "manifest %s is a nested index",
				want);
	return 0;
}

/* A tag is still asked of the registry (it may have moved). When the
 * share records it and the registry cannot answer, the share's image is
 * used: asked once, not through the retry ladder, so a refused connection
 * falls back at once and a silent one after the connect timeout. */
static int tag_manifest(struct pull *p, struct buf *body, char **ctype,
			struct cerr *e)
{
	struct share_tag_rec tr = {0};
	struct cerr miss = {0};
	cleanup_free char *ref = NULL, *plat = NULL;
	bool have = false;
	int r, old = 0;

	if (p->sh.fd >= 0) {
		ref = ref_string(&p->ref);
		plat = platform_string(&p->plat);
		have = shared_find_tag(&p->sh, ref, plat, &tr, &miss) == 0;
		if (!have && miss.code != ENOENT)
			log_warn("%s", miss.msg);
	}
	if (have)
		old = registry_set_retries(p->reg, 0);
	r = get_manifest(p, p->ref.tag, NULL, body, ctype, e);
	if (have)
		registry_set_retries(p->reg, old);
	if (r < 0 && have && registry_unreachable(p->reg)) {
		warn(p,
		     "registry unreachable (%s); using the shared cache's "
		     "record of %s: %s",
		     e->msg, ref, tr.manifest);
		cerr_clear(e);
		free(*ctype);
		*ctype = NULL;
		r = get_manifest(p, tr.manifest, tr.manifest, body, ctype, e);
	}
	share_tag_rec_free(&tr);
	return r;
}

static int resolve(struct pull *p, struct cerr *e)
{
	struct buf body;
	cleanup_free char *ctype = NULL;
	int ret = -1;

	buf_init(&body, MANIFEST_MAX);
	if ((p->ref.digest ? get_manifest(p, p->ref.digest, p->ref.digest,
					  &body, &ctype, e)
			   : tag_manifest(p, &body, &ctype, e)) < 0 ||
	    manifest_parse(body.data, body.len, ctype, &p->m, e) < 0)
		goto out;
	if (p->m.kind == MANIFEST_INDEX &&
	    select_from_index(p, &body, &ctype, e) < 0)
		goto out;
	for (size_t i = 0; i < p->m.n_layers; i++) {
		enum compression c;
		if (layer_compression(p->m.layers[i].media_type, &c, e) < 0)
			goto out;
	}
	ret = get_config(p, e);
out:
	buf_free(&body);
	return ret;
}

/* ---- the layer pipelines ---- */

static void *blob_worker(void *arg)
{
	struct pull *p = arg;

	for (;;) {
		struct blob_job *b = NULL;

		pthread_mutex_lock(&p->f.mu);
		while (!p->f.aborted && p->next_blob < p->f.n_blobs &&
		       !p->f.blobs[p->next_blob].needed)
			p->next_blob++;
		if (!p->f.aborted && p->next_blob < p->f.n_blobs)
			b = &p->f.blobs[p->next_blob++];
		pthread_mutex_unlock(&p->f.mu);
		if (!b)
			return NULL;
		blob_job_run(&p->f, b);
	}
}

static void layer_done(struct pull *p, struct layer_job *l, bool cached)
{
	struct pull_event ev = {
	    .kind = PULL_EV_LAYER_DONE,
	    .layer = l->index,
	    .n_layers = (int)p->m.n_layers,
	    .digest = l->blob->desc->digest,
	    .downloaded = l->blob->written,
	    .size = (uint64_t)l->blob->desc->size,
	    .cached = cached,
	};
	fetch_emit(&p->f, &ev);
}

/* A shared cache's layer: tmp/layer-<hex>.<host>.<pid>.<random>/{diff/,
 * complete}, renamed whole into layers/ (the record inside it, so the entry
 * appears with its record or not at all). The name is unique per populator
 * (pids repeat across hosts, and so may host names: the random part), so a
 * populator on another host whose NFS lacks working locks cannot write
 * into ours; a crash leaves it in tmp/ for --gc. */
static int shared_layer(struct pull *p, struct layer_job *l, struct cerr *e)
{
	const struct cache *c = &p->cache;
	char host[64] = "host";
	cleanup_free char *tmp = NULL, *diff = NULL, *done = NULL, *text = NULL;
	cleanup_free char *dst = xasprintf("layers/%s", l->diff_id);
	cleanup_close int lock = -1, root = -1;
	struct share_layer_rec rec = {.diff_id = (char *)l->diff_id,
				      .blob = (char *)l->blob->desc->digest};
	int fd, r;

	gethostname(host, sizeof(host) - 1);
	tmp = xasprintf("tmp/layer-%s.%s.%d.%016llx", digest_hex(l->diff_id),
			host, (int)getpid(), (unsigned long long)rand_u64());
	diff = xasprintf("%s/diff", tmp);
	done = xasprintf("%s/complete", tmp);
	*strchr(dst, ':') = '/';
	if ((r = fetch_layer_claim(c, l->diff_id, tmp, &lock, e)) != 0)
		return r < 0 ? -1 : 0;
	if (mkdirat(c->fd, diff, 0755) < 0)
		return cerr_sys(e, "mkdir %s/%s", c->root, diff);
	root = openat(c->fd, diff, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return cerr_sys(e, "open %s/%s", c->root, diff);
	if (layer_unpack(&p->f, l, root, UNPACK_OVERLAY, e) < 0)
		goto fail;
	shared_find_probes(root, &rec.opaque, &rec.whiteout);
	text = share_layer_rec_format(&rec);
	free(rec.opaque);
	free(rec.whiteout);
	fd = openat(c->fd, done, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || fs_write_all(fd, text, strlen(text)) < 0 ||
	    fsync(fd) < 0) {
		cerr_sys(e, "write %s/%s", c->root, done);
		if (fd >= 0)
			close(fd);
		goto fail;
	}
	close(fd);
	/* A stale entry without a valid record (a crash, damage) makes way;
	 * one that another populator finished meanwhile is kept. */
	if (renameat(c->fd, tmp, c->fd, dst) < 0) {
		int err = errno;

		if (cache_has_layer(c, l->diff_id))
			goto drop;
		if ((err == ENOTEMPTY || err == EEXIST) &&
		    fs_rm_rf_at(c->fd, dst, e) == 0 &&
		    renameat(c->fd, tmp, c->fd, dst) == 0)
			return 0;
		errno = err;
		cerr_sys(e, "commit layer %s", l->diff_id);
		goto fail;
	}
	return 0;
drop:;
	struct cerr ignore = {0};
	fs_rm_rf_at(c->fd, tmp, &ignore);
	return 0;
fail:;
	struct cerr ignore2 = {0};
	fs_rm_rf_at(c->fd, tmp, &ignore2);
	return -1;
}

static void *layer_worker(void *arg)
{
	struct pull *p = arg;

	for (;;) {
		struct layer_job *l = NULL;
		struct cerr e = {0};
		int r;

		pthread_mutex_lock(&p->f.mu);
		while (!p->f.aborted && p->next_layer < (int)p->m.n_layers &&
		       !p->layers[p->next_layer].needed)
			p->next_layer++;
		if (!p->f.aborted && p->next_layer < (int)p->m.n_layers)
			l = &p->layers[p->next_layer++];
		pthread_mutex_unlock(&p->f.mu);
		if (!l)
			return NULL;
		r = p->flat
			? layer_unpack(&p->f, l, p->target_fd, UNPACK_FLAT, &e)
		    : p->cache.shared_layout
			? shared_layer(p, l, &e)
			: fetch_overlay_layer(&p->f, l, &e);
		if (r < 0) {
			cerr_prefix(&e, "layer %d (%s)", l->index,
				    l->blob->desc->digest);
			fetch_abort(&p->f, &e);
			return NULL;
		}
		layer_done(p, l, l->blob->cached);
	}
}

/* An overlay layer the local cache lacks: in place from the share when
 * it has it whole (its record names this diff-id). */
static bool use_shared_layer(struct pull *p, size_t i)
{
	const char *diff_id = p->config.diff_ids[i];
	struct cerr e = {0};

	if (p->sh.fd < 0)
		return false;
	p->lower_fds[i] = shared_layer_open(&p->sh, diff_id, &e);
	if (p->lower_fds[i] >= 0) {
		p->layers_shared++;
		return true;
	}
	warn(p, "shared cache: layer %s: %s; pulling it", diff_id,
	     e.code == ENOENT ? "not there" : e.msg);
	return false;
}

/* An eStargz layer of an overlay pull the cache lacks is served lazily,
 * unless lazy pulling is off (cell-pull --lazy off). */
static bool lazy_wanted(const struct pull *p, size_t i)
{
	return p->o->lazy_exe && p->o->mount_at && !p->flat &&
	       !p->cache.shared_layout && p->m.layers[i].toc_digest;
}

/* One blob job per distinct layer digest; which layers need work. */
static int plan(struct pull *p)
{
	size_t n = p->m.n_layers;
	int needed = 0;

	p->f.blobs = xcalloc(n, sizeof(*p->f.blobs));
	p->layers = xcalloc(n, sizeof(*p->layers));
	p->lower_fds = xcalloc(n + 1, sizeof(int));
	p->lower_names = xcalloc(n + 1, sizeof(char *));
	p->procs = xcalloc(n + 1, sizeof(*p->procs));
	for (size_t i = 0; i < n; i++) {
		p->lower_fds[i] = -1;
		p->procs[i].start_lock = p->procs[i].pidfd = -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct layer_job *l = &p->layers[i];
		struct blob_job *b = NULL;

		for (int j = 0; j < p->f.n_blobs && !b; j++)
			if (!strcmp(p->f.blobs[j].desc->digest,
				    p->m.layers[i].digest))
				b = &p->f.blobs[j];
		if (!b) {
			b = &p->f.blobs[p->f.n_blobs++];
			b->fetch = &p->f;
			b->desc = &p->m.layers[i];
			b->first_layer = (int)i;
			b->fd = b->wfd = -1;
			pthread_mutex_init(&b->mu, NULL);
			pthread_cond_init(&b->cv, NULL);
		}
		l->index = (int)i;
		l->diff_id = p->config.diff_ids[i];
		l->blob = b;
		l->needed = p->flat || !cache_has_layer(&p->cache, l->diff_id);
		for (size_t j = 0; j < i && l->needed && !p->flat; j++)
			if (!strcmp(p->layers[j].diff_id, l->diff_id))
				l->needed = false; /* one unpack per diff-id */
		if (l->needed && !p->flat && use_shared_layer(p, i))
			l->needed = false;
		if (l->needed && lazy_wanted(p, i)) {
			l->needed = false;
			l->lazy = true;
		}
		b->needed = b->needed || l->needed;
		needed += l->needed;
	}
	return needed;
}

static void cleanup_jobs(struct pull *p)
{
	for (int i = 0; i < p->f.n_blobs; i++) {
		struct blob_job *b = &p->f.blobs[i];
		if (b->fd >= 0)
			close(b->fd);
		if (b->wfd >= 0)
			close(b->wfd);
		hasher_free(&b->hash);
		pthread_mutex_destroy(&b->mu);
		pthread_cond_destroy(&b->cv);
	}
	for (size_t i = 0; p->lower_fds && i < p->m.n_layers; i++)
		if (p->lower_fds[i] >= 0)
			close(p->lower_fds[i]);
	for (size_t i = 0; p->lower_names && i < p->m.n_layers; i++) {
		free(p->lower_names[i]);
		lazyproc_release(&p->procs[i]);
	}
	free(p->lower_names);
	free(p->procs);
	p->lower_names = NULL;
	p->procs = NULL;
	free(p->lower_fds);
	free(p->f.blobs);
	free(p->layers);
	p->lower_fds = NULL;
	p->f.blobs = NULL;
	p->layers = NULL;
}

static int run_threads(struct pull *p, int n_blob, int n_layer, struct cerr *e)
{
	pthread_t th[2 * MAX_PARALLEL];
	int started = 0;

	for (int i = 0; i < n_blob + n_layer; i++) {
		if (pthread_create(&th[started], NULL,
				   i < n_blob ? blob_worker : layer_worker,
				   p) != 0) {
			struct cerr te;
			cerr_set(&te, EAGAIN, "cannot start a thread");
			fetch_abort(&p->f, &te);
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	if (p->f.aborted) {
		*e = p->f.first_err;
		return -1;
	}
	return 0;
}

/* The layers plan() left needed, downloaded and unpacked. */
static int fetch_needed(struct pull *p, struct cerr *e)
{
	int par = p->o->parallel > 0 ? p->o->parallel : DEFAULT_PARALLEL;
	int n_layers = 0, n_blobs = 0, lw;

	if (par > MAX_PARALLEL)
		par = MAX_PARALLEL;
	for (size_t i = 0; i < p->m.n_layers; i++)
		n_layers += p->layers[i].needed;
	for (int i = 0; i < p->f.n_blobs; i++)
		n_blobs += p->f.blobs[i].needed;
	p->next_blob = p->next_layer = 0;
	/* A flattened rootfs takes its layers strictly in order. */
	lw = p->flat ? (n_layers ? 1 : 0) : (n_layers < par ? n_layers : par);
	return run_threads(p, n_blobs < par ? n_blobs : par, lw, e);
}

/* A lazy layer whose server failed: pulled as any other. */
static void unlazy(struct pull *p, size_t i, const struct cerr *why)
{
	warn(p, "lazy layer %s: %s; pulling it", p->m.layers[i].digest,
	     why->msg);
	lazyproc_release(&p->procs[i]);
	p->layers[i].lazy = false;
	p->layers[i].needed = true;
	p->layers[i].blob->needed = true;
}

/* Start (or adopt) the server of each lazy layer: they fetch their TOCs
 * and prefetch while the other layers download. */
static void start_lazy(struct pull *p)
{
	cleanup_free char *image = xasprintf(
	    "%s/%s@%s", p->ref.registry, p->ref.repository, p->manifest_digest);
	const struct lazyproc_spec spec = {
	    .exe = p->o->lazy_exe,
	    .image = image,
	    .username = p->user,
	    .password = p->pass,
	    .registry_url = p->o->registry_url,
	    .ca_file = p->o->ca_file,
	    .insecure = p->o->insecure,
	    .retries = p->o->retries,
	};

	for (size_t i = 0; i < p->m.n_layers; i++) {
		struct cerr e = {0};

		if (p->layers[i].lazy &&
		    lazyproc_start(&p->cache, p->m.layers[i].digest, &spec,
				   &p->procs[i], &e) < 0)
			unlazy(p, i, &e);
	}
}

/* Wait for the servers; the lowerdir of each that serves (at every
 * position of its diff-id: the overlay takes the topmost). Those that
 * failed are left needed, all else not: returns how many. */
static int wait_lazy(struct pull *p)
{
	bool *failed = xcalloc(p->m.n_layers + 1, sizeof(bool));
	int n_failed = 0;

	for (size_t i = 0; i < p->m.n_layers; i++) {
		struct cerr e = {0};

		if (!p->layers[i].lazy)
			continue;
		if (lazyproc_wait(&p->cache, &p->procs[i], &e) < 0) {
			warn(p, "lazy layer %s: %s; pulling it",
			     p->m.layers[i].digest, e.msg);
			lazyproc_release(&p->procs[i]);
			p->layers[i].lazy = false;
			failed[i] = true;
			n_failed++;
			continue;
		}
		p->layers_lazy++;
		for (size_t j = 0; j < p->m.n_layers; j++)
			if (!strcmp(p->layers[j].diff_id,
				    p->layers[i].diff_id) &&
			    !p->lower_names[j])
				p->lower_names[j] =
				    lazyproc_mount_name(p->m.layers[i].digest);
	}
	for (int i = 0; n_failed && i < p->f.n_blobs; i++)
		p->f.blobs[i].needed = false;
	for (size_t i = 0; n_failed && i < p->m.n_layers; i++) {
		p->layers[i].needed = failed[i];
		p->layers[i].blob->needed |= failed[i];
	}
	free(failed);
	return n_failed;
}

static int fetch_layers(struct pull *p, struct cerr *e)
{
	pthread_mutex_init(&p->f.mu, NULL);
	p->f.cache = &p->cache;
	p->f.shared = p->sh.fd >= 0 ? &p->sh : NULL;
	p->f.reg = p->reg;
	p->f.validate = p->o->validate_cache;
	p->f.reserve =
	    p->o->keep_free ? p->o->keep_free : UNPACK_RESERVE_DEFAULT;
	p->f.n_layers = (int)p->m.n_layers;
	p->f.progress = p->o->progress;
	p->f.progress_arg = p->o->progress_arg;
	plan(p);
	start_lazy(p);
	for (size_t i = 0; i < p->m.n_layers; i++)
		if (!p->layers[i].needed)
			layer_done(p, &p->layers[i], true);
	if (fetch_needed(p, e) < 0)
		return -1;
	/* Layers whose server failed: a second round, as a full pull. */
	return wait_lazy(p) ? fetch_needed(p, e) : 0;
}

/* ---- targets ---- */

static int open_empty_dir(const char *path, struct cerr *e)
{
	cleanup_dir DIR *d = NULL;
	struct dirent *de;
	int fd;

	if (fs_mkdir_p(path, 0755, e) < 0)
		return -1;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return cerr_sys(e, "open %s", path);
	d = opendir(path);
	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			close(fd);
			return cerr_set(e, EEXIST,
					"%s is not empty; extract into a new "
					"or empty directory",
					path);
		}
	return fd;
}

/* After a failed flattened pull the target is emptied again: it was empty
 * before, so nothing of the user's is lost. */
static void empty_dir(int fd)
{
	int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	struct cerr e = {0};

	while (d && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			fs_rm_rf_at(fd, de->d_name, &e);
	if (d)
		closedir(d);
}

/* A populated tag: what a cell uses when the registry is down. Written
 * last, after every entry it names is whole. */
static int record_tag(struct pull *p, const char *ref, const char *plat,
		      struct cerr *e)
{
	struct share_tag_rec tr = {.ref = (char *)ref,
				   .platform = (char *)plat,
				   .manifest = p->manifest_digest,
				   .config = p->m.config.digest};
	cleanup_free char *text = share_tag_rec_format(&tr);
	cleanup_free char *rel = share_tag_key(ref, plat);
	cleanup_free char *path = cache_path(&p->cache, "%s", rel);

	return fs_write_atomic(path, text, strlen(text), 0644, e);
}

static int record(struct pull *p, struct cerr *e)
{
	size_t n = p->m.n_layers, k = 0;
	const char **digests = xcalloc(n + 3, sizeof(char *));
	cleanup_free char *ref = ref_string(&p->ref);
	int ret;

	if (p->index_digest)
		digests[k++] = p->index_digest;
	digests[k++] = p->manifest_digest;
	digests[k++] = p->m.config.digest;
	for (size_t i = 0; i < n; i++)
		digests[k++] = p->m.layers[i].digest;
	cleanup_free char *plat = platform_string(&p->plat);
	struct cache_image img = {
	    .config = p->m.config.digest,
	    .platform = plat,
	    .diff_ids = p->config.diff_ids,
	    .n_diff_ids = p->config.n_diff_ids,
	};

	ret = cache_record_image(&p->cache, ref, digests, k, &img, e);
	free(digests);
	if (ret == 0 && p->cache.shared_layout && p->ref.tag && !p->ref.digest)
		ret = record_tag(p, ref, plat, e);
	return ret;
}

/* ---- the entry point ---- */

static int setup(struct pull *p, const struct pull_opts *o, struct cerr *e)
{
	struct registry_opts ro = {
	    .username = o->username,
	    .password = o->password,
	    .registry_url = o->registry_url,
	    .ca_file = o->ca_file,
	    .insecure = o->insecure,
	    .retries = o->retries > 0 ? o->retries : DEFAULT_RETRIES,
	};
	cleanup_free char *fuser = NULL, *fpass = NULL;

	if (!o->image || !*o->image)
		return cerr_set(e, EINVAL, "no image given");
	if (o->extract_to && o->mount_at)
		return cerr_set(e, EINVAL,
				"choose one of extract-to and mount");
	if (ref_parse(o->image, &p->ref, e) < 0)
		return -1;
	if (o->platform ? platform_parse(o->platform, &p->plat, e) < 0
			: (platform_default(&p->plat), 0))
		return -1;
	if (o->auth_file && !o->username) {
		struct buf b;
		int r;

		buf_init(&b, AUTHFILE_MAX);
		r = fs_read_file(o->auth_file, &b, e);
		/* An empty config.json means "no credentials", as for Docker.
		 */
		if (r == 0 && b.len)
			r = authfile_lookup(b.data, b.len, p->ref.registry,
					    &fuser, &fpass, e);
		buf_free(&b);
		if (r < 0)
			return -1;
		ro.username = fuser;
		ro.password = fpass;
	}
	p->user = ro.username ? xstrdup(ro.username) : NULL;
	p->pass = ro.password ? xstrdup(ro.password) : NULL;
	if (cache_open(o->workdir ? o->workdir : DEFAULT_WORKDIR, CACHE_USE,
		       &p->cache, e) < 0)
		return -1;
	if (o->populate && (o->extract_to || o->mount_at))
		return cerr_set(e, EINVAL,
				"populate fills a shared cache; it mounts "
				"and extracts nothing");
	if (o->populate && cache_make_shared(&p->cache, e) < 0)
		return -1;
	if (o->shared_cache && !o->populate) {
		struct cerr se = {0};

		if (shared_open(o->shared_cache, &p->sh, &se) < 0)
			warn(p, "%s; pulling from the registry", se.msg);
	}
	return registry_open(&p->ref, &ro, &p->reg, e);
}

static int make_rootfs(struct pull *p, struct cerr *e)
{
	if (p->o->mount_at)
		return overlay_mount(&p->cache, p->config.diff_ids,
				     p->config.n_diff_ids, p->lower_fds,
				     p->lower_names, p->o->mount_at,
				     p->o->upper_dir, e);
	return 0;
}

static void fill_result(struct pull *p, struct pull_result *res)
{
	res->manifest_digest = xstrdup(p->manifest_digest);
	res->config_digest = xstrdup(p->m.config.digest);
	res->config_json = buf_steal(&p->config_raw, &res->config_len);
	res->config = p->config;
	memset(&p->config, 0, sizeof(p->config));
	res->n_layers = (int)p->m.n_layers;
	res->layers_shared = p->layers_shared;
	res->layers_lazy = p->layers_lazy;
	for (size_t i = 0; i < p->m.n_layers; i++)
		res->layers_cached +=
		    !p->layers[i].lazy &&
		    (!p->layers[i].needed || p->layers[i].blob->cached);
}

static void lazy_ready(void *arg)
{
	struct pull *p = arg;

	lazyproc_ready(&p->cache, p->o->lazy_layer);
	if (p->o->progress) {
		struct pull_event ev = {.kind = PULL_EV_DONE,
					.layer = -1,
					.n_layers = (int)p->m.n_layers};
		p->o->progress(&ev, p->o->progress_arg);
	}
}

/* cell-pull --lazy-layer: one eStargz layer of the resolved image,
 * served in this process until it is unmounted. */
static int serve_lazy(struct pull *p, struct cerr *e)
{
	const struct descriptor *d = NULL;
	const char *diff_id = NULL;
	struct lazy_layer *l;
	int r, lock;

	for (size_t i = 0; i < p->m.n_layers; i++)
		if (!strcmp(p->m.layers[i].digest, p->o->lazy_layer)) {
			d = &p->m.layers[i];
			diff_id = p->config.diff_ids[i];
		}
	if (!d)
		return cerr_set(e, ENOENT, "the image has no layer %s",
				p->o->lazy_layer);
	if (!p->o->mount_at)
		return cerr_set(e, EINVAL, "--lazy-layer needs --mount");
	if ((lock = lazyproc_claim(&p->cache, d->digest, e)) < 0)
		return -1;
	if (lazy_open(p->reg, &p->cache, d, diff_id, &l, e) < 0) {
		lazyproc_leave(&p->cache, d->digest, lock);
		return -1;
	}
	/* A server lives long: it holds off no gc (its lock in lazy/ tells
	 * the gc it is there; its promotion takes the gc lock for a while). */
	close(p->cache.gc_lock);
	p->cache.gc_lock = -1;
	/* Nor does it hold the directory it was started in (a unit's, when
	 * a pull started it), which an unmount could then not take away. */
	if (chdir("/") < 0)
		log_warn("chdir /: %m");
	lazy_stats_start(l);
	r = lazyfs_serve(l, p->o->mount_at, lazy_ready, p, e);
	log_info("lazy layer %s: %llu bytes on demand (%llu fetches, %llu ms), "
		 "%llu in the background, %llu chunks refused%s",
		 l->digest, (unsigned long long)l->st.ondemand_bytes,
		 (unsigned long long)l->st.ondemand_fetches,
		 (unsigned long long)(l->st.ondemand_ns / 1000000),
		 (unsigned long long)l->st.background_bytes,
		 (unsigned long long)l->st.refused,
		 atomic_load(&l->promoted) ? ", promoted" : "");
	lazy_close(l);
	lazyproc_leave(&p->cache, d->digest, lock);
	return r;
}

static int pull_once(const struct pull_opts *o, struct pull_result *res,
		     struct cerr *e)
{
	struct pull p = {.o = o, .target_fd = -1, .sh = {.fd = -1}};
	int ret = -1;

	memset(res, 0, sizeof(*res));
	p.flat = o->extract_to != NULL;
	p.cache.fd = p.cache.gc_lock = -1;
	if (setup(&p, o, e) < 0 || resolve(&p, e) < 0)
		goto out;
	if (o->lazy_layer) {
		ret = serve_lazy(&p, e);
		goto out;
	}
	if (o->progress) {
		struct pull_event ev = {.kind = PULL_EV_RESOLVED,
					.layer = -1,
					.n_layers = (int)p.m.n_layers};
		o->progress(&ev, o->progress_arg);
	}
	if (p.flat && (p.target_fd = open_empty_dir(o->extract_to, e)) < 0)
		goto out;
	if (fetch_layers(&p, e) < 0 || make_rootfs(&p, e) < 0 ||
	    record(&p, e) < 0) {
		if (p.target_fd >= 0)
			empty_dir(p.target_fd);
		goto out;
	}
	fill_result(&p, res);
	if (o->progress) {
		struct pull_event ev = {.kind = PULL_EV_DONE,
					.layer = -1,
					.n_layers = (int)p.m.n_layers};
		o->progress(&ev, o->progress_arg);
	}
	ret = 0;
out:
	if (ret < 0)
		cerr_prefix(e, "pull %s", o->image ? o->image : "");
	if (p.target_fd >= 0)
		close(p.target_fd);
	cleanup_jobs(&p);
	registry_close(p.reg);
	shared_close(&p.sh);
	cache_close(&p.cache);
	manifest_free(&p.m);
	image_config_free(&p.config);
	buf_free(&p.config_raw);
	ref_free(&p.ref);
	free(p.index_digest);
	free(p.user);
	if (p.pass)
		explicit_bzero(p.pass, strlen(p.pass));
	free(p.pass);
	return ret;
}

/* A blob of the share that fails its check (it is read in place, for a
 * flattened rootfs or a layer the share has packed only) fails the pull
 * midway: the pull runs again without the share, from the registry. */
int pull_image(const struct pull_opts *o, struct pull_result *res,
	       struct cerr *e)
{
	struct pull_opts again;
	cleanup_free char *msg = NULL;

	if (pull_once(o, res, e) == 0)
		return 0;
	if (!o->shared_cache || o->populate || e->code != EBADMSG)
		return -1;
	msg = xasprintf("shared cache: %s; pulling again from the registry",
			e->msg);
	log_warn("%s", msg);
	if (o->progress) {
		struct pull_event ev = {
		    .kind = PULL_EV_WARNING, .layer = -1, .message = msg};
		o->progress(&ev, o->progress_arg);
	}
	again = *o;
	again.shared_cache = NULL;
	cerr_clear(e);
	return pull_once(&again, res, e);
}

void pull_result_free(struct pull_result *r)
{
	free(r->manifest_digest);
	free(r->config_digest);
	free(r->config_json);
	image_config_free(&r->config);
	memset(r, 0, sizeof(*r));
}
