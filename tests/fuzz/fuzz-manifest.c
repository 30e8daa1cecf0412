// SPDX-License-Identifier: Apache-2.0
/* Fuzz the registry documents: the same bytes as a manifest (with each kind
 * of Content-Type), as an index to select from, and as an image config. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "pull-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const content_types[] = {
    NULL,
    MT_DOCKER_MANIFEST,
    MT_DOCKER_LIST "; charset=utf-8",
    MT_OCI_MANIFEST,
    MT_OCI_INDEX,
    "application/json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
};

static const char *const wanted[] = {
    "linux/amd64",    "linux/arm64",   "linux/arm/v7",	  "linux/arm/v6",
    "linux/amd64/v3", "windows/amd64", "unknown/unknown",
};

static void check_descriptor(const struct descriptor *d)
{
	if (!d->digest || digest_validate(d->digest, NULL) < 0 || d->size < 0)
		abort();
}

static void select_all(const struct manifest *m)
{
	struct platform p;
	struct cerr e = {0};
	const struct descriptor *d;

	platform_default(&p);
	d = manifest_select(m, &p, &e);
	if (!d && e.code != ENOENT)
		abort();
	for (size_t i = 0; i < sizeof(wanted) / sizeof(wanted[0]); i++) {
		if (platform_parse(wanted[i], &p, &e) < 0)
			abort();
		d = manifest_select(m, &p, &e);
		if (d &&
		    (d < m->manifests || d >= m->manifests + m->n_manifests))
			abort();
	}
}

static void check_manifest(const struct manifest *m)
{
	enum compression c;
	struct cerr e = {0};

	if (!m->media_type)
		abort();
	if (m->kind == MANIFEST_INDEX) {
		for (size_t i = 0; i < m->n_manifests; i++)
			check_descriptor(&m->manifests[i]);
		select_all(m);
		return;
	}
	check_descriptor(&m->config);
	for (size_t i = 0; i < m->n_layers; i++) {
		check_descriptor(&m->layers[i]);
		if (!m->layers[i].media_type)
			abort();
		layer_compression(m->layers[i].media_type, &c, &e);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct manifest m;
	struct image_config c;
	struct cerr e = {0};
	size_t n_types = sizeof(content_types) / sizeof(content_types[0]);

	/* Which Content-Type comes along is a function of the input, so that
	 * every one is tried without running each input n_types times. */
	if (manifest_parse(buf, size, content_types[size % n_types], &m, &e) ==
	    0) {
		check_manifest(&m);
		manifest_free(&m);
	}
	if (image_config_parse(buf, size, &c, &e) == 0) {
		if (!c.diff_ids || c.diff_ids[c.n_diff_ids])
			abort();
		for (size_t i = 0; i < c.n_diff_ids; i++)
			if (digest_validate(c.diff_ids[i], NULL) < 0)
				abort();
		image_config_free(&c);
	}
	return 0;
}
