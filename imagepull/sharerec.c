// SPDX-License-Identifier: Apache-2.0
/* The two records of the shared image cache (docs/imagepull.md, "The
 * shared cache"): a layer's completion record and a tag record. A cell
 * reads them from a share that other machines write, so they are outside
 * input: parsed here, pure (buffer in, struct out), capped, and every
 * digest validated. fuzz-sharerec.c fuzzes both parsers. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "jsonutil.h"
#include "pull-internal.h"
#include "util.h"

#define SHARE_REC_VERSION 1

static bool digest_ok(const char *d)
{
	struct cerr ignore = {0};

	return d && digest_validate(d, &ignore) == 0;
}

/* A probe path inside a layer: relative, no "." or ".." components but
 * "." alone (the layer's root), bounded. */
static bool probe_ok(const char *p)
{
	const char *c = p;

	if (!p || !*p || strlen(p) > 4096 || p[0] == '/')
		return false;
	if (!strcmp(p, "."))
		return true;
	while (*c) {
		size_t n = strcspn(c, "/");

		if (n == 0 || (n == 1 && c[0] == '.') ||
		    (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n;
		if (*c == '/')
			c++;
		if (!*c && c[-1] == '/')
			return false;
	}
	return true;
}

static json_t *parse_versioned(const char *buf, size_t len, const char *what,
			       struct cerr *e)
{
	json_t *j;
	long long v;

	if (len > SHARE_REC_MAX)
		return cerr_set(e, EFBIG, "%s is %zu bytes (limit %u)", what,
				len, SHARE_REC_MAX),
		       NULL;
	j = json_parse_object(buf ? buf : "", len, e);
	if (!j)
		return cerr_prefix(e, "%s", what), NULL;
	if (jint(j, "version", 0, &v, e) < 0 || v != SHARE_REC_VERSION) {
		json_decref(j);
		return cerr_set(e, EINVAL, "%s: not version %d", what,
				SHARE_REC_VERSION),
		       NULL;
	}
	return j;
}

int share_layer_rec_parse(const char *buf, size_t len,
			  struct share_layer_rec *out, struct cerr *e)
{
	cleanup_json json_t *j = NULL;
	const char *diff, *blob, *opq, *wh;

	memset(out, 0, sizeof(*out));
	j = parse_versioned(buf, len, "completion record", e);
	if (!j)
		return -1;
	diff = jstr(j, "diff_id");
	blob = jstr(j, "blob");
	opq = jstr(j, "opaque");
	wh = jstr(j, "whiteout");
	if ((opq && !probe_ok(opq)) || (wh && !probe_ok(wh)))
		return cerr_set(e, EINVAL, "completion record: bad probe path");
	if (!digest_ok(diff))
		return cerr_set(e, EINVAL,
				"completion record: no valid diff_id");
	if (blob && !digest_ok(blob))
		return cerr_set(e, EINVAL, "completion record: bad blob");
	out->diff_id = xstrdup(diff);
	out->blob = blob ? xstrdup(blob) : NULL;
	out->opaque = opq ? xstrdup(opq) : NULL;
	out->whiteout = wh ? xstrdup(wh) : NULL;
	return 0;
}

void share_layer_rec_free(struct share_layer_rec *r)
{
	free(r->diff_id);
	free(r->blob);
	free(r->opaque);
	free(r->whiteout);
	memset(r, 0, sizeof(*r));
}

char *share_layer_rec_format(const struct share_layer_rec *r)
{
	cleanup_json json_t *j = json_pack(
	    "{s:i, s:s}", "version", SHARE_REC_VERSION, "diff_id", r->diff_id);

	if (!j)
		abort();
	if (r->blob)
		json_object_set_new(j, "blob", json_string(r->blob));
	if (r->opaque)
		json_object_set_new(j, "opaque", json_string(r->opaque));
	if (r->whiteout)
		json_object_set_new(j, "whiteout", json_string(r->whiteout));
	return json_dumps(j, JSON_COMPACT);
}

int share_tag_rec_parse(const char *buf, size_t len, struct share_tag_rec *out,
			struct cerr *e)
{
	cleanup_json json_t *j = NULL;
	const char *ref, *plat, *man, *cfg;

	memset(out, 0, sizeof(*out));
	j = parse_versioned(buf, len, "tag record", e);
	if (!j)
		return -1;
	ref = jstr(j, "ref");
	plat = jstr(j, "platform");
	man = jstr(j, "manifest");
	cfg = jstr(j, "config");
	if (!ref || !*ref || strlen(ref) > 4096 || !plat || !*plat ||
	    strlen(plat) > 100)
		return cerr_set(e, EINVAL, "tag record: no ref or platform");
	if (!digest_ok(man) || !digest_ok(cfg))
		return cerr_set(e, EINVAL,
				"tag record: manifest or config is not a "
				"digest");
	out->ref = xstrdup(ref);
	out->platform = xstrdup(plat);
	out->manifest = xstrdup(man);
	out->config = xstrdup(cfg);
	return 0;
}

void share_tag_rec_free(struct share_tag_rec *r)
{
	free(r->ref);
	free(r->platform);
	free(r->manifest);
	free(r->config);
	memset(r, 0, sizeof(*r));
}

char *share_tag_rec_format(const struct share_tag_rec *r)
{
	cleanup_json json_t *j =
	    json_pack("{s:i, s:s, s:s, s:s, s:s}", "version", SHARE_REC_VERSION,
		      "ref", r->ref, "platform", r->platform, "manifest",
		      r->manifest, "config", r->config);

	if (!j)
		abort();
	return json_dumps(j, JSON_COMPACT);
}

char *share_tag_key(const char *ref, const char *platform)
{
	cleanup_free char *s = xasprintf("%s %s", ref, platform);
	char d[DIGEST_STR_MAX];

	if (digest_buf("sha256", s, strlen(s), d, NULL) < 0)
		abort();
	return xasprintf("tags/%s.json", digest_hex(d));
}
