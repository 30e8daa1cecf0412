// SPDX-License-Identifier: Apache-2.0
/* The cache's fast path: mount an image that an earlier pull left in the
 * cache without loading libcurl (see pull.h, pull_from_cache).
 *
 * Starting cell-pull costs tens of milliseconds in the dynamic loader
 * (libcurl's 40-odd libraries) before it can even ask the registry, and a
 * unit's every start or restart would run it. This file uses only the
 * cache, the reference parser, the config parser and the overlay mount, so
 * the agent can call it in process (no child at all for a hit) and the
 * binary that links it (cell-pull-cached) stays small; when it cannot
 * answer, that binary execs cell-pull with the same arguments.
 *
 * Which references may skip the registry is the kubelet's default pull
 * policy: IfNotPresent for a digest or a tag other than "latest", Always
 * for "latest". A digest names fixed content; a moved non-latest tag is
 * seen only once the cache forgets it (cell-pull --gc, or a new cell). */
#include "pull-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

static bool may_skip_registry(const struct image_ref *r)
{
	return r->digest || (r->tag && strcmp(r->tag, "latest") != 0);
}

static bool same_platform(const char *recorded)
{
	struct platform p;
	char here[sizeof(p.os) + sizeof(p.arch) + sizeof(p.variant) + 4];

	platform_default(&p);
	snprintf(here, sizeof(here), "%s/%s%s%s", p.os, p.arch,
		 p.variant[0] ? "/" : "", p.variant);
	return !strcmp(here, recorded);
}

/* The config blob (digest checked by cache_read_blob), when its diff-ids
 * are the record's and every layer is unpacked in the cache, or whole in
 * the shared tier (fds[i] then holds it). */
static bool usable(const struct cache *c, const struct shared *sh,
		   const struct cache_image *img, int *fds, struct buf *config)
{
	struct image_config ic = {0};
	struct cerr e = {0};
	bool ok;

	for (size_t i = 0; i < img->n_diff_ids; i++) {
		if (cache_has_layer(c, img->diff_ids[i]))
			continue;
		if (sh->fd < 0)
			return false;
		fds[i] = shared_layer_open(sh, img->diff_ids[i], &e);
		if (fds[i] < 0) {
			log_debug("cache: %s", e.msg);
			return false;
		}
	}
	if (cache_read_blob(c, img->config, config, &e) < 0 &&
	    (sh->fd < 0 || (buf_reset(config),
			    shared_read_blob(sh, img->config, config, &e)) < 0))
		ok = false;
	else if (image_config_parse(config->data ? config->data : "",
				    config->len, &ic, &e) < 0)
		ok = false;
	else
		ok = true;
	if (!ok) {
		log_info("cache: config %s: %s", img->config, e.msg);
		return false;
	}
	ok = ic.n_diff_ids == img->n_diff_ids;
	for (size_t i = 0; ok && i < ic.n_diff_ids; i++)
		ok = !strcmp(ic.diff_ids[i], img->diff_ids[i]);
	image_config_free(&ic);
	return ok;
}

static int serve(const struct pull_cached_opts *o, const struct cache *c,
		 const struct shared *sh, const struct cache_image *img,
		 struct cerr *e)
{
	struct buf config;
	int *fds = xcalloc(img->n_diff_ids + 1, sizeof(int));
	int r = 0;

	for (size_t i = 0; i < img->n_diff_ids; i++)
		fds[i] = -1;
	buf_init(&config, CONFIG_MAX);
	if (usable(c, sh, img, fds, &config)) {
		r = o->save_config ? fs_replace(o->save_config, config.data,
						config.len, 0644, e)
				   : 0;
		if (r == 0)
			r = overlay_mount(c, img->diff_ids, img->n_diff_ids,
					  fds, NULL, o->mount_at, o->upper_dir,
					  e);
		r = r < 0 ? -1 : 1;
	}
	for (size_t i = 0; i < img->n_diff_ids; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	buf_free(&config);
	return r;
}

int pull_from_cache(const struct pull_cached_opts *o, struct cerr *e)
{
	struct image_ref ref = {0};
	struct cache c = {.fd = -1, .gc_lock = -1};
	struct cache_image img = {0};
	struct shared sh = {.fd = -1};
	struct cerr miss = {0};
	cleanup_free char *name = NULL;
	int r = 0;

	if (!o->image || !o->mount_at || ref_parse(o->image, &ref, &miss) < 0 ||
	    (!o->any_tag && !may_skip_registry(&ref)))
		goto out;
	name = ref_string(&ref);
	if (cache_open(o->workdir ? o->workdir : DEFAULT_WORKDIR,
		       o->no_wait ? CACHE_USE_NOWAIT : CACHE_USE, &c,
		       &miss) < 0 ||
	    cache_find_image(&c, name, &img, &miss) < 0 ||
	    !same_platform(img.platform))
		goto out;
	/* A share that is not there (not mounted yet) is only a miss for
	 * layers the local cache lacks; the puller says so loudly. */
	if (o->shared_cache && shared_open(o->shared_cache, &sh, &miss) < 0)
		cerr_clear(&miss);
	r = serve(o, &c, &sh, &img, e);
	if (r < 0)
		cerr_prefix(e, "pull %s (cached)", o->image);
out:
	if (miss.code)
		log_debug("cache: %s: %s", o->image ? o->image : "", miss.msg);
	cache_image_free(&img);
	shared_close(&sh);
	cache_close(&c);
	ref_free(&ref);
	return r;
}
