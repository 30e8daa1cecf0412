// SPDX-License-Identifier: Apache-2.0
/* Image references, parsed the way Docker parses them (the grammar of
 * distribution/reference plus Docker's normalisation of short names):
 *
 *   reference := name [":" tag] ["@" digest]
 *   name      := [domain "/"] path-component ["/" path-component]*
 *
 * The first component is a registry only when it looks like a host (holds
 * '.' or ':' or is "localhost"); everything else lives on Docker Hub, where
 * a one-component name gets "library/" in front. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "digest.h"
#include "pull-internal.h"
#include "pull.h"
#include "util.h"

#define REF_MAX 4096
#define REPO_MAX 255
#define TAG_MAX 128
#define PORT_MAX 65535

/* Every name under which Docker Hub may be written in a reference. */
static const char *const hub_aliases[] = {
    "docker.io",
    "index.docker.io",
    DOCKER_HUB_HOST,
};

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
	return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool is_word(char c)
{
	return is_alnum(c) || c == '_';
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') ||
	       (c >= 'A' && c <= 'F');
}

/* path-component := [a-z0-9]+ (separator [a-z0-9]+)*
 * separator      := "." | "_" | "__" | "-"+ */
static bool path_component_ok(const char *s, size_t n)
{
	size_t i = 0, j;

	if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
		return false;
	while (i < n) {
		if (is_lower_alnum(s[i])) {
			i++;
			continue;
		}
		j = i + 1;
		if (s[i] == '-')
			while (j < n && s[j] == '-')
				j++;
		else if (s[i] == '_' && j < n && s[j] == '_')
			j++;
		else if (s[i] != '.' && s[i] != '_')
			return false;
		if (j >= n || !is_lower_alnum(s[j]))
			return false;
		i = j;
	}
	return true;
}

/* domain-component := [A-Za-z0-9] | [A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9],
 * joined by single dots. An IPv4 address is a special case of this. */
static bool domain_name_ok(const char *s, size_t n)
{
	size_t start = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && s[i] != '.') {
			if (!is_alnum(s[i]) && s[i] != '-')
				return false;
			continue;
		}
		if (i == start || s[start] == '-' || s[i - 1] == '-')
			return false;
		start = i + 1;
	}
	return true;
}

static bool port_ok(const char *s, size_t n)
{
	unsigned long v = 0;

	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v >= 1 && v <= PORT_MAX;
}

/* host := domain-name | "[" IPv6 "]", then an optional ":" port. */
static bool registry_ok(const char *s, size_t n)
{
	size_t hn;

	if (n > 0 && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close || close == s + 1)
			return false;
		hn = (size_t)(close - s) + 1;
		for (size_t i = 1; i + 1 < hn; i++)
			if (!is_hex(s[i]) && s[i] != ':')
				return false;
	} else {
		const char *colon = memchr(s, ':', n);

		hn = colon ? (size_t)(colon - s) : n;
		if (!domain_name_ok(s, hn))
			return false;
	}
	if (hn == n)
		return true;
	return s[hn] == ':' && port_ok(s + hn + 1, n - hn - 1);
}

static bool has_upper(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] >= 'A' && s[i] <= 'Z')
			return true;
	return false;
}

static int check_repository(const char *ref, const char *repo, struct cerr *e)
{
	size_t n = strlen(repo);
	const char *p = repo, *slash;

	if (n == 0)
		return cerr_set(
		    e, EINVAL,
		    "invalid reference '%.200s': repository is empty", ref);
	if (n > REPO_MAX)
		return cerr_set(e, EINVAL,
				"invalid reference '%.200s': repository is "
				"longer than %d characters",
				ref, REPO_MAX);
	if (has_upper(repo, n))
		return cerr_set(e, EINVAL,
				"invalid reference '%.200s': repository '%s' "
				"must be lowercase",
				ref, repo);
	for (;;) {
		slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		if (!path_component_ok(p, len))
			return cerr_set(
			    e, EINVAL,
			    "invalid reference '%.200s': repository "
			    "component '%.*s' must be lowercase letters and "
			    "digits separated by '.', '_', '__' or dashes",
			    ref, (int)len, p);
		if (!slash)
			return 0;
		p = slash + 1;
	}
}

static int check_tag(const char *ref, const char *tag, struct cerr *e)
{
	size_t n = strlen(tag);

	if (n == 0)
		return cerr_set(
		    e, EINVAL, "invalid reference '%.200s': tag is empty", ref);
	if (n > TAG_MAX)
		return cerr_set(
		    e, EINVAL,
		    "invalid reference '%.200s': tag is longer than "
		    "%d characters",
		    ref, TAG_MAX);
	if (!is_word(tag[0]))
		return cerr_set(e, EINVAL,
				"invalid reference '%.200s': tag '%.130s' must "
				"start with a letter, digit or '_'",
				ref, tag);
	for (size_t i = 1; i < n; i++)
		if (!is_word(tag[i]) && tag[i] != '.' && tag[i] != '-')
			return cerr_set(e, EINVAL,
					"invalid reference '%.200s': tag "
					"'%.130s' may hold only letters, "
					"digits, '_', '.' and '-'",
					ref, tag);
	return 0;
}

static int check_digest(const char *ref, const char *digest, struct cerr *e)
{
	struct cerr sub = {0};

	if (!*digest)
		return cerr_set(e, EINVAL,
				"invalid reference '%.200s': digest is empty",
				ref);
	if (digest_validate(digest, &sub) < 0)
		return cerr_set(e, EINVAL, "invalid reference '%.200s': %s",
				ref, sub.msg);
	return 0;
}

static bool is_hub_alias(const char *host)
{
	for (size_t i = 0; i < ARRAY_SIZE(hub_aliases); i++)
		if (!strcmp(host, hub_aliases[i]))
			return true;
	return false;
}

/* Split "name" (no tag, no digest) into registry and repository as Docker
 * does, adding "library/" to one-component Docker Hub names. */
static int split_name(const char *ref, const char *name, struct image_ref *r,
		      struct cerr *e)
{
	const char *slash = strchr(name, '/');
	size_t n = slash ? (size_t)(slash - name) : 0;
	bool is_host = slash && (memchr(name, '.', n) || memchr(name, ':', n) ||
				 (n == 9 && !memcmp(name, "localhost", 9)));

	if (is_host) {
		if (!registry_ok(name, n))
			return cerr_set(e, EINVAL,
					"invalid reference '%.200s': registry "
					"'%.*s' is not a valid host[:port]",
					ref, (int)n, name);
		r->registry = xstrndup(name, n);
		name = slash + 1;
		if (is_hub_alias(r->registry)) {
			free(r->registry);
			r->registry = xstrdup(DOCKER_HUB_HOST);
		}
	} else {
		r->registry = xstrdup(DOCKER_HUB_HOST);
	}
	if (!strcmp(r->registry, DOCKER_HUB_HOST) && *name &&
	    !strchr(name, '/'))
		r->repository = xasprintf("library/%s", name);
	else
		r->repository = xstrdup(name);
	return check_repository(ref, r->repository, e);
}

/* Docker refuses a bare 64-hex string: it is an image ID, not a name. */
static bool is_image_id(const char *s)
{
	return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

static int ref_parse_into(const char *s, struct image_ref *r, struct cerr *e)
{
	cleanup_free char *name = NULL;
	const char *at = strchr(s, '@');
	size_t name_len = at ? (size_t)(at - s) : strlen(s);
	char *colon, *slash;

	if (is_image_id(s))
		return cerr_set(e, EINVAL,
				"invalid reference '%s': a 64-hex image ID is "
				"not a repository name",
				s);
	if (at) {
		r->digest = xstrdup(at + 1);
		if (check_digest(s, r->digest, e) < 0)
			return -1;
	}
	name = xstrndup(s, name_len);
	/* A tag is what follows the last ':' after the last '/', so that
	 * "host:5000/app" keeps its port. */
	colon = strrchr(name, ':');
	slash = strrchr(name, '/');
	if (colon && (!slash || colon > slash)) {
		*colon = '\0';
		r->tag = xstrdup(colon + 1);
		if (check_tag(s, r->tag, e) < 0)
			return -1;
	} else if (!r->digest) {
		r->tag = xstrdup("latest");
	}
	if (!*name)
		return cerr_set(
		    e, EINVAL,
		    "invalid reference '%.200s': repository is empty", s);
	return split_name(s, name, r, e);
}

int ref_parse(const char *s, struct image_ref *out, struct cerr *e)
{
	struct image_ref r = {0};

	memset(out, 0, sizeof(*out));
	if (!s || !*s)
		return cerr_set(e, EINVAL, "empty image reference");
	if (strlen(s) > REF_MAX)
		return cerr_set(e, EINVAL,
				"invalid reference '%.200s...': longer than %d "
				"characters",
				s, REF_MAX);
	/* Refused before anything echoes the input into a message. */
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return cerr_set(e, EINVAL,
					"invalid reference: it holds a control "
					"character");
	if (ref_parse_into(s, &r, e) < 0) {
		ref_free(&r);
		return -1;
	}
	*out = r;
	return 0;
}

void ref_free(struct image_ref *r)
{
	if (!r)
		return;
	free(r->registry);
	free(r->repository);
	free(r->tag);
	free(r->digest);
	memset(r, 0, sizeof(*r));
}

char *ref_string(const struct image_ref *r)
{
	if (!r || !r->registry || !r->repository)
		return NULL;
	return xasprintf("%s/%s%s%s%s%s", r->registry, r->repository,
			 r->tag ? ":" : "", r->tag ? r->tag : "",
			 r->digest ? "@" : "", r->digest ? r->digest : "");
}

/* ---- the registry an image names (used by the agent without the rest
 * of the puller: see agent/base/pullproc.h) ---- */

char *pull_registry_of(const char *image, struct cerr *e)
{
	struct image_ref ref = {0};
	char *host;

	if (ref_parse(image, &ref, e) < 0)
		return NULL;
	host = xstrdup(ref.registry);
	ref_free(&ref);
	return host;
}

/* "https://index.docker.io/v1/" → "index.docker.io"; Hub aliases → the
 * Hub's registry host. */
static void registry_key(const char *in, char *out, size_t outsz)
{
	const char *p = strstr(in, "://");
	size_t n;

	p = p ? p + 3 : in;
	n = strcspn(p, "/");
	snprintf(out, outsz, "%.*s", (int)n, p);
	if (!strcmp(out, "docker.io") || !strcmp(out, "index.docker.io"))
		snprintf(out, outsz, "%s", DOCKER_HUB_HOST);
}

bool pull_same_registry(const char *a, const char *b)
{
	char ka[256], kb[256];

	registry_key(a, ka, sizeof(ka));
	registry_key(b, kb, sizeof(kb));
	return strcasecmp(ka, kb) == 0;
}
