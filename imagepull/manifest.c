// SPDX-License-Identifier: Apache-2.0
/* Image manifests and indexes, Docker's (schema2, manifest list) and OCI's,
 * turned into one typed struct. Everything here comes from a registry, so
 * every digest is validated, every array has a cap and every field's type
 * is checked before use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "digest.h"
#include "jsonutil.h"
#include "pull-internal.h"
#include "util.h"

#define LAYERS_MAX 1024
#define INDEX_MAX 4096
#define CONTENT_TYPE_MAX 256

static const struct {
	const char *type;
	enum manifest_kind kind;
} manifest_types[] = {
    {MT_DOCKER_MANIFEST, MANIFEST_IMAGE},
    {MT_OCI_MANIFEST, MANIFEST_IMAGE},
    {MT_DOCKER_LIST, MANIFEST_INDEX},
    {MT_OCI_INDEX, MANIFEST_INDEX},
};

static const char *const schema1_types[] = {
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
};

static const struct {
	const char *type;
	enum compression comp;
} layer_types[] = {
    {"application/vnd.docker.image.rootfs.diff.tar.gzip", COMP_GZIP},
    {"application/vnd.docker.image.rootfs.diff.tar", COMP_NONE},
    {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip", COMP_GZIP},
    {"application/vnd.oci.image.layer.v1.tar", COMP_NONE},
    {"application/vnd.oci.image.layer.v1.tar+gzip", COMP_GZIP},
    {"application/vnd.oci.image.layer.v1.tar+zstd", COMP_ZSTD},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar", COMP_NONE},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip", COMP_GZIP},
    {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd", COMP_ZSTD},
};

static void descriptor_free(struct descriptor *d)
{
	free(d->media_type);
	free(d->digest);
	free(d->toc_digest);
	memset(d, 0, sizeof(*d));
}

static int copy_platform_field(char dst[32], const char *src, const char *what,
			       struct cerr *e)
{
	size_t n = strlen(src);

	if (n == 0 || n >= 32)
		return cerr_set(e, EINVAL, "platform %s must be 1 to 31 bytes",
				what);
	for (size_t i = 0; i < n; i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
			    src[i]))
			return cerr_set(e, EINVAL,
					"platform %s '%.40s' holds a character "
					"other than letters, digits, '_', '.' "
					"and '-'",
					what, src);
	memcpy(dst, src, n + 1);
	return 0;
}

static int parse_platform(const json_t *j, struct platform *p, struct cerr *e)
{
	const char *os = jstr(j, "os"), *arch = jstr(j, "architecture");
	const json_t *variant = json_object_get(j, "variant");

	memset(p, 0, sizeof(*p));
	if (!json_is_object(j))
		return cerr_set(e, EINVAL, "platform is not an object");
	if (!os || !arch)
		return cerr_set(e, EINVAL,
				"platform needs os and architecture strings");
	if (variant && !json_is_null(variant) && !json_is_string(variant))
		return cerr_set(e, EINVAL, "platform variant is not a string");
	if (copy_platform_field(p->os, os, "os", e) < 0 ||
	    copy_platform_field(p->arch, arch, "architecture", e) < 0)
		return -1;
	if (json_is_string(variant) && *json_string_value(variant) &&
	    copy_platform_field(p->variant, json_string_value(variant),
				"variant", e) < 0)
		return -1;
	platform_normalize(p);
	return 0;
}

/* Fields are assigned only once all are valid, so a failed descriptor owns
 * nothing. */
static int parse_descriptor(const json_t *j, struct descriptor *d,
			    bool need_type, bool with_platform, struct cerr *e)
{
	const json_t *mt, *dg, *sz, *pf, *an, *tocd;

	if (!json_is_object(j))
		return cerr_set(e, EINVAL, "descriptor is not an object");
	mt = json_object_get(j, "mediaType");
	if (mt && !json_is_string(mt))
		return cerr_set(e, EINVAL, "mediaType is not a string");
	if (need_type && (!mt || !*json_string_value(mt)))
		return cerr_set(e, EINVAL, "mediaType is missing");
	dg = json_object_get(j, "digest");
	if (!json_is_string(dg))
		return cerr_set(e, EINVAL, "digest is missing");
	if (digest_validate(json_string_value(dg), e) < 0)
		return -1;
	sz = json_object_get(j, "size");
	if (!json_is_integer(sz))
		return cerr_set(e, EINVAL, "size is missing or not an integer");
	if (json_integer_value(sz) < 0)
		return cerr_set(e, EINVAL, "size is negative");
	an = json_object_get(j, "annotations");
	tocd = json_is_object(an)
		   ? json_object_get(an,
				     "containerd.io/snapshot/stargz/toc.digest")
		   : NULL;
	/* An eStargz layer's TOC digest (lazy pulling); one that is not a
	 * digest makes it an ordinary layer. */
	if (tocd &&
	    (!json_is_string(tocd) ||
	     digest_validate(json_string_value(tocd), &(struct cerr){0}) < 0))
		tocd = NULL;
	pf = json_object_get(j, "platform");
	if (with_platform && pf && !json_is_null(pf)) {
		if (parse_platform(pf, &d->platform, e) < 0)
			return -1;
		d->has_platform = true;
	}
	d->media_type = mt ? xstrdup(json_string_value(mt)) : NULL;
	d->digest = xstrdup(json_string_value(dg));
	d->size = json_integer_value(sz);
	d->toc_digest = tocd ? xstrdup(json_string_value(tocd)) : NULL;
	return 0;
}

/* The array is allocated (zeroed) before parsing so that manifest_free can
 * release whatever a failure leaves behind. */
static int parse_descriptors(const json_t *root, const char *key, size_t max,
			     bool need_type, bool with_platform,
			     struct descriptor **out, size_t *n, struct cerr *e)
{
	const json_t *a = json_object_get(root, key), *v;
	size_t i;

	if (!json_is_array(a))
		return cerr_set(e, EINVAL, "'%s' is missing or not an array",
				key);
	if (json_array_size(a) > max)
		return cerr_set(e, EINVAL, "%zu %s exceed the limit of %zu",
				json_array_size(a), key, max);
	*out = xcalloc(json_array_size(a), sizeof(**out));
	*n = json_array_size(a);
	json_array_foreach(a, i, v)
	{
		if (parse_descriptor(v, &(*out)[i], need_type, with_platform,
				     e) < 0)
			return cerr_prefix(e, "%s[%zu]", key, i);
	}
	return 0;
}

static int check_schema_version(const json_t *root, struct cerr *e)
{
	const json_t *v = json_object_get(root, "schemaVersion");

	if (!v)
		return cerr_set(e, EINVAL, "schemaVersion is missing");
	if (!json_is_integer(v))
		return cerr_set(e, EINVAL, "schemaVersion is not an integer");
	if (json_integer_value(v) == 1)
		return cerr_set(e, EINVAL,
				"schema1 manifests are not supported");
	if (json_integer_value(v) != 2)
		return cerr_set(e, EINVAL, "unsupported schemaVersion %lld",
				(long long)json_integer_value(v));
	return 0;
}

/* 1 for a known manifest type (kind and canonical spelling set), 0 for an
 * unknown one, -1 (error set) for schema1. */
static int classify(const char *type, enum manifest_kind *kind,
		    const char **canon, struct cerr *e)
{
	for (size_t i = 0; i < ARRAY_SIZE(schema1_types); i++)
		if (!strcasecmp(type, schema1_types[i]))
			return cerr_set(e, EINVAL,
					"schema1 manifests are not supported");
	for (size_t i = 0; i < ARRAY_SIZE(manifest_types); i++) {
		if (!strcasecmp(type, manifest_types[i].type)) {
			*kind = manifest_types[i].kind;
			*canon = manifest_types[i].type;
			return 1;
		}
	}
	return 0;
}

/* The media type of an HTTP Content-Type: parameters and blanks dropped. */
static void content_type_base(const char *ct, char out[CONTENT_TYPE_MAX])
{
	size_t n;

	out[0] = '\0';
	if (!ct)
		return;
	ct += strspn(ct, " \t");
	n = strcspn(ct, "; \t");
	if (n < CONTENT_TYPE_MAX) {
		memcpy(out, ct, n);
		out[n] = '\0';
	}
}

/* The document's own mediaType decides; then the Content-Type; then the
 * shape. A document's unknown mediaType is an error, while an unknown
 * Content-Type (registries send application/json or octet-stream) is not. */
static int decide_kind(const json_t *root, const char *content_type,
		       enum manifest_kind *kind, const char **canon,
		       struct cerr *e)
{
	const json_t *mt = json_object_get(root, "mediaType");
	char ct[CONTENT_TYPE_MAX];
	int r;

	if (mt && !json_is_string(mt))
		return cerr_set(e, EINVAL, "mediaType is not a string");
	if (mt) {
		r = classify(json_string_value(mt), kind, canon, e);
		if (r == 0)
			return cerr_set(e, EINVAL,
					"unsupported manifest media type "
					"'%.200s'",
					json_string_value(mt));
		return r < 0 ? -1 : 0;
	}
	content_type_base(content_type, ct);
	r = *ct ? classify(ct, kind, canon, e) : 0;
	if (r != 0)
		return r < 0 ? -1 : 0;
	/* Without a declared type only OCI documents are plausible: Docker's
	 * always carry their mediaType. */
	if (json_is_array(json_object_get(root, "manifests"))) {
		*kind = MANIFEST_INDEX;
		*canon = MT_OCI_INDEX;
	} else if (json_object_get(root, "layers")) {
		*kind = MANIFEST_IMAGE;
		*canon = MT_OCI_MANIFEST;
	} else {
		return cerr_set(e, EINVAL,
				"neither an image manifest nor an index (no "
				"mediaType, no 'layers', no 'manifests')");
	}
	return 0;
}

static int parse_image(const json_t *root, struct manifest *m, struct cerr *e)
{
	const json_t *cfg = json_object_get(root, "config");

	if (!cfg)
		return cerr_set(e, EINVAL, "'config' is missing");
	if (parse_descriptor(cfg, &m->config, false, false, e) < 0)
		return cerr_prefix(e, "config");
	return parse_descriptors(root, "layers", LAYERS_MAX, true, false,
				 &m->layers, &m->n_layers, e);
}

int manifest_parse(const char *buf, size_t len, const char *content_type,
		   struct manifest *out, struct cerr *e)
{
	cleanup_json json_t *root = NULL;
	const char *canon = NULL;
	int r;

	memset(out, 0, sizeof(*out));
	if (!buf || len == 0)
		return cerr_set(e, EINVAL, "manifest: empty document");
	if (len > MANIFEST_MAX)
		return cerr_set(e, EFBIG,
				"manifest: %zu bytes exceed the limit of %u",
				len, MANIFEST_MAX);
	root = json_parse_object(buf, len, e);
	if (!root)
		return cerr_prefix(e, "manifest");
	if (check_schema_version(root, e) < 0 ||
	    decide_kind(root, content_type, &out->kind, &canon, e) < 0)
		return cerr_prefix(e, "manifest");
	out->media_type = xstrdup(canon);
	if (out->kind == MANIFEST_INDEX)
		r = parse_descriptors(root, "manifests", INDEX_MAX, false, true,
				      &out->manifests, &out->n_manifests, e);
	else
		r = parse_image(root, out, e);
	if (r < 0) {
		manifest_free(out);
		return cerr_prefix(e, "manifest");
	}
	return 0;
}

void manifest_free(struct manifest *m)
{
	if (!m)
		return;
	free(m->media_type);
	descriptor_free(&m->config);
	for (size_t i = 0; i < m->n_layers; i++)
		descriptor_free(&m->layers[i]);
	free(m->layers);
	for (size_t i = 0; i < m->n_manifests; i++)
		descriptor_free(&m->manifests[i]);
	free(m->manifests);
	memset(m, 0, sizeof(*m));
}

/* Entries for os "unknown" are attestations and signatures, not images. */
static bool selectable(const struct descriptor *d)
{
	return d->has_platform && strcmp(d->platform.os, "unknown") != 0;
}

static bool same_os_arch(const struct platform *a, const struct platform *b)
{
	return !strcmp(a->os, b->os) && !strcmp(a->arch, b->arch);
}

static bool is_image_type(const char *mt)
{
	return mt && (!strcmp(mt, MT_DOCKER_MANIFEST) ||
		      !strcmp(mt, MT_OCI_MANIFEST));
}

/* "linux/amd64, linux/arm64/v8, …" into out, cut short with "..." when the
 * index lists more than fits. */
static void list_platforms(const struct manifest *m, char *out, size_t size)
{
	size_t o = 0;
	int n;

	out[0] = '\0';
	for (size_t i = 0; i < m->n_manifests; i++) {
		const struct platform *p = &m->manifests[i].platform;

		if (!selectable(&m->manifests[i]))
			continue;
		n = snprintf(out + o, size - o - 5, "%s%s/%s%s%s",
			     o ? ", " : "", p->os, p->arch,
			     *p->variant ? "/" : "", p->variant);
		if (n < 0 || (size_t)n >= size - o - 5) {
			snprintf(out + o, size - o, "%s...", o ? ", " : "");
			return;
		}
		o += (size_t)n;
	}
}

static const struct descriptor *find(const struct manifest *m,
				     const struct platform *w, int pass)
{
	for (size_t i = 0; i < m->n_manifests; i++) {
		const struct descriptor *d = &m->manifests[i];

		if (pass == 3 && !d->has_platform &&
		    is_image_type(d->media_type))
			return d;
		if (!selectable(d) || !same_os_arch(&d->platform, w))
			continue;
		if (pass == 1 && !strcmp(d->platform.variant, w->variant))
			return d;
		if (pass == 2 && *w->variant && !*d->platform.variant)
			return d;
	}
	return NULL;
}

/* First the exact platform; then, for a wanted variant, an entry that names
 * none; last an image entry that names no platform at all (as containerd
 * does: such an index describes a single-platform image). Normalisation has
 * already made arm64 "" and "v8" the same. */
const struct descriptor *manifest_select(const struct manifest *index,
					 const struct platform *want,
					 struct cerr *e)
{
	struct platform w;
	const struct descriptor *d = NULL;
	char avail[600];

	if (!index || index->kind != MANIFEST_INDEX || !want) {
		cerr_set(e, EINVAL,
			 "manifest_select needs an index and a "
			 "platform");
		return NULL;
	}
	w = *want;
	platform_normalize(&w);
	for (int pass = 1; pass <= 3 && !d; pass++)
		d = find(index, &w, pass);
	if (d)
		return d;
	list_platforms(index, avail, sizeof(avail));
	cerr_set(e, ENOENT,
		 "no image for platform %s/%s%s%s in the index (%s%s)", w.os,
		 w.arch, *w.variant ? "/" : "", w.variant,
		 *avail ? "available: " : "it lists no platforms", avail);
	return NULL;
}

int layer_compression(const char *media_type, enum compression *out,
		      struct cerr *e)
{
	if (!media_type || !*media_type)
		return cerr_set(e, EINVAL, "layer has no media type");
	for (size_t i = 0; i < ARRAY_SIZE(layer_types); i++) {
		if (!strcmp(media_type, layer_types[i].type)) {
			*out = layer_types[i].comp;
			return 0;
		}
	}
	return cerr_set(e, EINVAL, "unsupported layer media type '%.200s'",
			media_type);
}
