// SPDX-License-Identifier: Apache-2.0
/* Which platforms an image has, asked of its registry (the Docker Registry
 * HTTP API V2, as cell-pull speaks it): the index's entries, or a single
 * image's config. cellctl needs only the answer "does every image of this
 * pod have an arm64 (amd64) variant" to choose an instance type; the cell
 * still picks its platform from the index when it pulls.
 *
 * regplat_parse is pure (a manifest body in, the platforms out; fuzzed:
 * tests/fuzz/fuzz-regplat.c); regplat_query does the requests: anonymous,
 * with the registry's bearer-token challenge answered (Docker Hub asks for
 * one even for public images), plain HTTP for the hosts named insecure. */
#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cellctl.h"
#include "cleanup.h"
#include "jsonutil.h"
#include "util.h"

#define BODY_MAX (4u << 20)
#define ACCEPT_MANIFESTS                                                       \
	"Accept: application/vnd.oci.image.index.v1+json, "                    \
	"application/vnd.docker.distribution.manifest.list.v2+json, "          \
	"application/vnd.oci.image.manifest.v1+json, "                         \
	"application/vnd.docker.distribution.manifest.v2+json"

void regplat_free(struct regplat *p)
{
	free(p->list);
	free(p->config);
	memset(p, 0, sizeof(*p));
}

/* Append "os/arch[/variant]" to p->list, and the arch's bit for linux. */
static void add_platform(struct regplat *p, const char *os, const char *arch,
			 const char *variant)
{
	char *old = p->list;

	if (!os || !arch || !strcmp(os, "unknown")) /* attestations */
		return;
	p->list = xasprintf("%s%s%s/%s%s%s", old ? old : "", old ? ", " : "",
			    os, arch, variant && *variant ? "/" : "",
			    variant && *variant ? variant : "");
	free(old);
	if (!strcmp(os, "linux"))
		p->archs |= arch_bit(arch);
}

/* Printable and short, as it lands in an error message. */
static const char *field(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	if (!s || strlen(s) > 32)
		return NULL;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c <= 0x20 || *c == 0x7f || *c == ',')
			return NULL;
	return s;
}

int regplat_parse(const char *body, size_t len, struct regplat *p,
		  struct cerr *e)
{
	cleanup_json json_t *j = json_parse_object(body, len, e);
	const json_t *ms, *m;
	const char *dg;
	size_t i;

	memset(p, 0, sizeof(*p));
	if (!j)
		return cerr_prefix(e, "manifest");
	ms = json_object_get(j, "manifests");
	if (json_is_array(ms)) {
		json_array_foreach(ms, i, m)
		{
			const json_t *pf = json_object_get(m, "platform");
			if (i >= 256)
				break;
			add_platform(p, field(pf, "os"),
				     field(pf, "architecture"),
				     field(pf, "variant"));
		}
		p->indexed = true;
		if (!p->list)
			p->list = xstrdup("");
		return 0;
	}
	/* An image manifest: its config says (a blob of its own). */
	dg = json_string_value(
	    json_object_get(json_object_get(j, "config"), "digest"));
	if (dg) {
		if (strncmp(dg, "sha256:", 7) || strlen(dg) != 71 ||
		    strspn(dg + 7, "0123456789abcdef") != 64)
			return cerr_set(e, EPROTO,
					"manifest: config digest is not "
					"sha256:<64 hex>");
		p->config = xstrdup(dg);
		return 0;
	}
	/* An image config. */
	if (field(j, "architecture")) {
		add_platform(p, field(j, "os") ? field(j, "os") : "linux",
			     field(j, "architecture"), field(j, "variant"));
		if (!p->list)
			p->list = xstrdup("");
		return 0;
	}
	return cerr_set(e, EPROTO,
			"manifest: neither an index, an image manifest nor "
			"a config");
}

/* ---- the image reference, by Docker's rules ---- */

struct imgref {
	char *host; /* "registry-1.docker.io" for Docker Hub */
	char *name; /* "library/busybox" */
	char *ref;  /* tag or digest */
};

static void imgref_free(struct imgref *r)
{
	free(r->host);
	free(r->name);
	free(r->ref);
}

static int imgref_parse(const char *image, struct imgref *r, struct cerr *e)
{
	cleanup_free char *s = xstrdup(image);
	char *slash = strchr(s, '/'), *rest = s, *at, *colon;

	memset(r, 0, sizeof(*r));
	if (!*s || strlen(s) > 512 ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyz"
		      "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789._-/:@+") != strlen(s))
		return cerr_set(e, EINVAL, "invalid image reference \"%.80s\"",
				image);
	if (slash && (memchr(s, '.', (size_t)(slash - s)) ||
		      memchr(s, ':', (size_t)(slash - s)) ||
		      !strncmp(s, "localhost/", 10))) {
		*slash = '\0';
		r->host = xstrdup(s);
		rest = slash + 1;
	} else {
		r->host = xstrdup("registry-1.docker.io");
	}
	if (!strcmp(r->host, "docker.io") ||
	    !strcmp(r->host, "index.docker.io")) {
		free(r->host);
		r->host = xstrdup("registry-1.docker.io");
	}
	at = strchr(rest, '@');
	if (at) {
		*at = '\0';
		r->ref = xstrdup(at + 1);
	}
	colon = strrchr(rest, ':');
	if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		if (!r->ref)
			r->ref = xstrdup(colon + 1);
	}
	if (!r->ref)
		r->ref = xstrdup("latest");
	if (!*rest || !*r->ref) {
		imgref_free(r);
		return cerr_set(e, EINVAL, "invalid image reference \"%.80s\"",
				image);
	}
	r->name = strchr(rest, '/') || strcmp(r->host, "registry-1.docker.io")
		      ? xstrdup(rest)
		      : xasprintf("library/%s", rest);
	return 0;
}

/* ---- HTTP ---- */

static size_t on_body(char *d, size_t sz, size_t n, void *ud)
{
	struct cerr e = {0}; /* over the cap: curl fails the transfer */

	return buf_append(ud, d, sz * n, &e) < 0 ? 0 : sz * n;
}

static size_t on_header(char *d, size_t sz, size_t n, void *ud)
{
	char **chal = ud;

	if (n * sz > 19 && !strncasecmp(d, "WWW-Authenticate:", 17)) {
		free(*chal);
		*chal = xstrndup(d + 17, sz * n - 17);
	}
	return sz * n;
}

/* GET url into body; *status the HTTP status, *chal a WWW-Authenticate. */
static int get(const char *url, const char *auth, long timeout_ms,
	       struct buf *body, long *status, char **chal, struct cerr *e)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hd = curl_slist_append(NULL, ACCEPT_MANIFESTS);
	cleanup_free char *authz =
	    auth ? xasprintf("Authorization: Bearer %s", auth) : NULL;
	CURLcode rc;

	if (!h || !hd)
		return cerr_set(e, ENOMEM, "curl");
	if (authz)
		hd = curl_slist_append(hd, authz);
	buf_reset(body);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L); /* blobs: storage */
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, chal);
	rc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	curl_slist_free_all(hd);
	curl_easy_cleanup(h);
	if (rc != CURLE_OK)
		return cerr_set(e, EIO, "GET %s: %s", url,
				curl_easy_strerror(rc));
	return 0;
}

/* `key="value"` out of a Bearer challenge (NULL when absent). */
static char *chal_param(const char *chal, const char *key)
{
	cleanup_free char *pat = xasprintf("%s=\"", key);
	const char *p = strstr(chal, pat), *q;

	if (!p)
		return NULL;
	p += strlen(pat);
	q = strchr(p, '"');
	return q ? xstrndup(p, (size_t)(q - p)) : NULL;
}

/* The anonymous token a Bearer challenge asks for, NULL on failure. */
static char *fetch_token(const char *chal, const char *name, long timeout_ms,
			 struct cerr *e)
{
	cleanup_free char *realm = NULL, *service = NULL, *url = NULL;
	cleanup_json json_t *j = NULL;
	cleanup_free char *ignore = NULL;
	struct buf b;
	long status = 0;
	const char *tok;
	char *out = NULL;

	if (!strstr(chal, "Bearer") || !(realm = chal_param(chal, "realm"))) {
		cerr_set(e, EACCES, "the registry wants credentials");
		return NULL;
	}
	service = chal_param(chal, "service");
	url = xasprintf("%s%sservice=%s&scope=repository:%s:pull", realm,
			strchr(realm, '?') ? "&" : "?", service ? service : "",
			name);
	buf_init(&b, 1 << 16);
	if (get(url, NULL, timeout_ms, &b, &status, &ignore, e) == 0 &&
	    status != 200)
		cerr_set(e, EACCES, "token %s: HTTP %ld", realm, status);
	else if (status == 200 && (j = json_parse_object(b.data, b.len, e)) &&
		 ((tok = json_string_value(json_object_get(j, "token"))) ||
		  (tok =
		       json_string_value(json_object_get(j, "access_token")))))
		out = xstrdup(tok);
	else if (status == 200)
		cerr_set(e, EPROTO, "token %s: no token", realm);
	buf_free(&b);
	return out;
}

static bool insecure_host(const char *host, const char *insecure)
{
	cleanup_free char *l = xstrdup(insecure ? insecure : "");
	char *save = NULL;

	for (char *t = strtok_r(l, ", ", &save); t;
	     t = strtok_r(NULL, ", ", &save))
		if (!strcmp(t, host))
			return true;
	return false;
}

/* GET /v2/<name>/<kind>/<ref>, answering one token challenge. */
static int reg_get(const struct imgref *r, const char *kind, const char *ref,
		   const char *scheme, char **token, long timeout_ms,
		   struct buf *body, struct cerr *e)
{
	cleanup_free char *url = xasprintf("%s://%s/v2/%s/%s/%s", scheme,
					   r->host, r->name, kind, ref);
	cleanup_free char *chal = NULL;
	long status = 0;

	if (get(url, *token, timeout_ms, body, &status, &chal, e) < 0)
		return -1;
	if (status == 401 && !*token && chal) {
		*token = fetch_token(chal, r->name, timeout_ms, e);
		if (!*token)
			return cerr_prefix(e, "GET %s", url);
		free(chal);
		chal = NULL;
		if (get(url, *token, timeout_ms, body, &status, &chal, e) < 0)
			return -1;
	}
	if (status != 200)
		return cerr_set(e, status == 404 ? ENOENT : EPROTO,
				"GET %s: HTTP %ld", url, status);
	return 0;
}

int regplat_query(const char *image, const char *insecure, long timeout_ms,
		  struct regplat *out, struct cerr *e)
{
	struct imgref r;
	cleanup_free char *token = NULL;
	const char *scheme;
	struct buf b;
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (imgref_parse(image, &r, e) < 0)
		return -1;
	scheme = insecure_host(r.host, insecure) ? "http" : "https";
	buf_init(&b, BODY_MAX);
	if (reg_get(&r, "manifests", r.ref, scheme, &token, timeout_ms, &b, e) <
		0 ||
	    regplat_parse(b.data ? b.data : "", b.len, out, e) < 0)
		goto done;
	if (out->config) {
		cleanup_free char *cfg = out->config;
		out->config = NULL;
		if (reg_get(&r, "blobs", cfg, scheme, &token, timeout_ms, &b,
			    e) < 0 ||
		    regplat_parse(b.data ? b.data : "", b.len, out, e) < 0)
			goto done;
		if (out->config) { /* a config that names a config */
			cerr_set(e, EPROTO, "config %s is a manifest", cfg);
			goto done;
		}
	}
	ret = 0;
done:
	if (ret < 0) {
		regplat_free(out);
		cerr_prefix(e, "platforms of %s", image);
	}
	buf_free(&b);
	imgref_free(&r);
	return ret;
}
