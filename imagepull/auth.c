// SPDX-License-Identifier: Apache-2.0
/* Registry authentication inputs: the WWW-Authenticate challenge of a 401
 * (RFC 7235), a docker config.json with stored credentials, and the reply
 * of a token endpoint (the distribution token spec). Whatever comes out of
 * here ends up in request headers or URLs, so control characters are
 * refused rather than passed along. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "cleanup.h"
#include "jsonutil.h"
#include "pull-internal.h"
#include "util.h"

/* The distribution token spec: 60 s when absent and never less. The upper
 * bound only keeps the caller's arithmetic safe; a 401 refreshes anyway. */
#define TOKEN_TTL_DEFAULT 60
#define TOKEN_TTL_MAX 86400
#define TOKEN_REPLY_MAX AUTHFILE_MAX
#define HOST_MAX 256

/* ---- WWW-Authenticate ---- */

/* RFC 7230 tchar. */
static bool is_tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_ws(char c)
{
	return c == ' ' || c == '\t';
}

static size_t token_len(const char *s)
{
	size_t n = 0;

	while (is_tchar(s[n]))
		n++;
	return n;
}

static size_t skip_ws(const char *s, size_t i)
{
	while (is_ws(s[i]))
		i++;
	return i;
}

/* Whether what follows a ',' starts the next challenge (or is the end):
 * a scheme is a token not followed by '=', where an auth-param's name is. */
static bool next_challenge(const char *s)
{
	size_t n;

	s += strspn(s, " \t,");
	if (!*s)
		return true;
	n = token_len(s);
	return n > 0 && s[skip_ws(s, n)] != '=';
}

/* RFC 7235 token68 ("Negotiate abc=="), which Basic and Bearer never send:
 * true when one fills the rest of this challenge. */
static bool is_token68(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz"
			     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~+/");

	if (n == 0)
		return false;
	n += strspn(s + n, "=");
	n = skip_ws(s, n);
	return s[n] == '\0' || (s[n] == ',' && next_challenge(s + n));
}

/* qdtext and quoted-pair allow HTAB, SP, VCHAR and obs-text: everything but
 * the other control characters and DEL. */
static bool quoted_ok(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

/* A quoted-string starting at s[*i] == '"', unescaped into *out. */
static int parse_quoted(const char *s, size_t *i, char **out, struct cerr *e)
{
	size_t j = *i + 1, o = 0;
	cleanup_free char *v = xmalloc(strlen(s + j) + 1);

	for (; s[j] != '"'; j++) {
		if (s[j] == '\\')
			j++;
		if (s[j] == '\0')
			return cerr_set(e, EINVAL,
					"unterminated quoted string");
		if (!quoted_ok((unsigned char)s[j]))
			return cerr_set(e, EINVAL,
					"control character in quoted string");
		v[o++] = s[j];
	}
	v[o] = '\0';
	*i = j + 1;
	*out = steal_ptr(&v);
	return 0;
}

/* Keep the parameters the registry flow uses; ignore the rest. A repeated
 * one is refused: two realms would be ambiguous. */
static int store_param(struct www_auth *w, const char *key, size_t n, char *val,
		       struct cerr *e)
{
	static const struct {
		const char *name;
		size_t off;
	} known[] = {
	    {"realm", offsetof(struct www_auth, realm)},
	    {"service", offsetof(struct www_auth, service)},
	    {"scope", offsetof(struct www_auth, scope)},
	    {"error", offsetof(struct www_auth, error)},
	};

	for (size_t k = 0; k < ARRAY_SIZE(known); k++) {
		char **slot = (char **)((char *)w + known[k].off);

		if (strlen(known[k].name) != n ||
		    strncasecmp(key, known[k].name, n) != 0)
			continue;
		if (*slot) {
			free(val);
			return cerr_set(e, EINVAL, "parameter '%s' given twice",
					known[k].name);
		}
		*slot = val;
		return 0;
	}
	free(val);
	return 0;
}

static int parse_value(const char *s, size_t *i, const char *key, size_t kn,
		       char **val, struct cerr *e)
{
	size_t n;

	if (s[*i] == '"')
		return parse_quoted(s, i, val, e);
	n = token_len(s + *i);
	if (n == 0)
		return cerr_set(e, EINVAL, "parameter '%.*s' has no value",
				(int)(kn > 64 ? 64 : kn), key);
	*val = xstrndup(s + *i, n);
	*i += n;
	return 0;
}

/* #auth-param after the scheme. A name not followed by '=' after a comma
 * starts a second challenge: only the first one is used. */
static int parse_params(const char *s, size_t i, struct www_auth *w,
			struct cerr *e)
{
	bool first = true;

	for (;; first = false) {
		const char *key;
		size_t kn;
		char *val = NULL;

		while (is_ws(s[i]) || s[i] == ',')
			i++;
		if (!s[i])
			return 0;
		key = s + i;
		kn = token_len(key);
		if (kn == 0)
			return cerr_set(
			    e, EINVAL,
			    "expected a parameter name at offset %zu", i);
		i = skip_ws(s, i + kn);
		if (s[i] != '=') {
			if (first)
				return cerr_set(e, EINVAL,
						"expected '=' after '%.*s'",
						(int)(kn > 64 ? 64 : kn), key);
			return 0;
		}
		i = skip_ws(s, i + 1);
		if (parse_value(s, &i, key, kn, &val, e) < 0 ||
		    store_param(w, key, kn, val, e) < 0)
			return -1;
		i = skip_ws(s, i);
		if (s[i] && s[i] != ',')
			return cerr_set(e, EINVAL,
					"expected ',' after parameter '%.*s'",
					(int)(kn > 64 ? 64 : kn), key);
	}
}

static int parse_challenge(const char *s, struct www_auth *w, struct cerr *e)
{
	size_t i = skip_ws(s, 0), n = token_len(s + i), j;

	if (n == 0)
		return cerr_set(e, EINVAL, "missing authentication scheme");
	w->scheme = xstrndup(s + i, n);
	i += n;
	j = skip_ws(s, i);
	/* "Negotiate, Bearer realm=…": a scheme without parameters, then the
	 * next challenge. */
	if (s[j] == '\0' || (s[j] == ',' && next_challenge(s + j)))
		return 0;
	if (j == i)
		return cerr_set(e, EINVAL,
				"expected a blank after the scheme '%s'",
				w->scheme);
	if (is_token68(s + j))
		return 0;
	return parse_params(s, j, w, e);
}

int www_auth_parse(const char *header, struct www_auth *out, struct cerr *e)
{
	struct www_auth w = {0};

	memset(out, 0, sizeof(*out));
	if (!header || !*header)
		return cerr_set(e, EINVAL, "WWW-Authenticate: empty header");
	if (strnlen(header, WWW_AUTH_MAX + 1) > WWW_AUTH_MAX)
		return cerr_set(e, EFBIG,
				"WWW-Authenticate: longer than %d bytes",
				WWW_AUTH_MAX);
	if (parse_challenge(header, &w, e) < 0) {
		www_auth_free(&w);
		return cerr_prefix(e, "WWW-Authenticate");
	}
	*out = w;
	return 0;
}

void www_auth_free(struct www_auth *w)
{
	if (!w)
		return;
	free(w->scheme);
	free(w->realm);
	free(w->service);
	free(w->scope);
	free(w->error);
	memset(w, 0, sizeof(*w));
}

/* ---- docker config.json ---- */

/* "auth" is base64("user:password"). Like Docker, NUL bytes around the
 * password are dropped; anywhere else they would cut a C string short. */
static int decode_auth(const char *key, const char *b64, char **user,
		       char **pass, struct cerr *e)
{
	size_t len;
	struct buf b;
	cleanup_free unsigned char *raw = NULL;
	char *colon, *nul, *p, *end;

	/* Padded, as Go's base64.StdEncoding (which Docker uses) wants it. */
	buf_init(&b, 0);
	if (b64_decode(b64, strlen(b64), B64_PADDED, &b, NULL) < 0) {
		buf_free(&b);
		return cerr_set(e, EINVAL,
				"auth of '%.100s' is not valid base64", key);
	}
	raw = (unsigned char *)buf_steal(&b, &len);
	colon = memchr(raw, ':', len);
	nul = memchr(raw, '\0', len);
	if (!colon || colon == (char *)raw || (nul && nul < colon))
		return cerr_set(e, EINVAL,
				"auth of '%.100s' does not hold user:password",
				key);
	p = colon + 1;
	end = (char *)raw + len;
	while (p < end && *p == '\0')
		p++;
	while (end > p && end[-1] == '\0')
		end--;
	if (memchr(p, '\0', (size_t)(end - p)))
		return cerr_set(e, EINVAL, "auth of '%.100s' holds a NUL byte",
				key);
	*user = xstrndup((char *)raw, (size_t)(colon - (char *)raw));
	*pass = xstrndup(p, (size_t)(end - p));
	return 0;
}

/* 1 with credentials set, 0 when the entry holds none we can use (an
 * identity token, or the empty {} a credential helper leaves), -1 on error. */
static int decode_entry(const char *key, const json_t *ent, char **user,
			char **pass, struct cerr *e)
{
	const json_t *auth, *u, *p;

	if (!json_is_object(ent))
		return cerr_set(e, EINVAL,
				"auths entry '%.100s' is not an "
				"object",
				key);
	auth = json_object_get(ent, "auth");
	if (auth && !json_is_null(auth) && !json_is_string(auth))
		return cerr_set(e, EINVAL, "auth of '%.100s' is not a string",
				key);
	if (json_is_string(auth) && *json_string_value(auth))
		return decode_auth(key, json_string_value(auth), user, pass,
				   e) < 0
			   ? -1
			   : 1;
	u = json_object_get(ent, "username");
	p = json_object_get(ent, "password");
	if (!json_is_string(u) || !*json_string_value(u))
		return 0;
	if (p && !json_is_null(p) && !json_is_string(p))
		return cerr_set(e, EINVAL,
				"password of '%.100s' is not a string", key);
	*user = xstrdup(json_string_value(u));
	*pass = xstrdup(json_is_string(p) ? json_string_value(p) : "");
	return 1;
}

static bool is_hub(const char *host)
{
	return !strcasecmp(host, DOCKER_HUB_HOST) ||
	       !strcasecmp(host, "docker.io") ||
	       !strcasecmp(host, "index.docker.io");
}

/* Docker's ConvertToHostname: the key without scheme and path. */
static bool key_matches(const char *key, const char *registry)
{
	char host[HOST_MAX];
	size_t n;

	if (!strncasecmp(key, "https://", 8))
		key += 8;
	else if (!strncasecmp(key, "http://", 7))
		key += 7;
	n = strcspn(key, "/");
	if (n == 0 || n >= sizeof(host))
		return false;
	memcpy(host, key, n);
	host[n] = '\0';
	return !strcasecmp(host, registry) ||
	       (is_hub(host) && is_hub(registry));
}

/* As Docker: the canonical key first ("https://index.docker.io/v1/" for
 * Docker Hub, the registry itself otherwise), then any key that names the
 * same host, in file order. */
static int lookup(const json_t *auths, const char *registry, char **user,
		  char **pass, struct cerr *e)
{
	const char *canon =
	    is_hub(registry) ? "https://index.docker.io/v1/" : registry;
	const json_t *ent = json_object_get(auths, canon);
	const char *key;
	json_t *v;
	int r;

	if (ent && (r = decode_entry(canon, ent, user, pass, e)) != 0)
		return r;
	json_object_foreach((json_t *)auths, key, v)
	{
		if (v == ent || !key_matches(key, registry))
			continue;
		if ((r = decode_entry(key, v, user, pass, e)) != 0)
			return r;
	}
	return 0;
}

int authfile_lookup(const char *json, size_t len, const char *registry,
		    char **user, char **pass, struct cerr *e)
{
	cleanup_json json_t *root = NULL;
	const json_t *auths;

	*user = *pass = NULL;
	if (!registry || !*registry)
		return cerr_set(e, EINVAL, "auth file: no registry to look up");
	if (!json || len == 0)
		return cerr_set(e, EINVAL, "auth file: empty document");
	if (len > AUTHFILE_MAX)
		return cerr_set(e, EFBIG,
				"auth file: %zu bytes exceed the limit of %u",
				len, AUTHFILE_MAX);
	root = json_parse_object(json, len, e);
	if (!root)
		return cerr_prefix(e, "auth file");
	auths = json_object_get(root, "auths");
	if (!auths || json_is_null(auths))
		return 0;
	if (!json_is_object(auths))
		return cerr_set(e, EINVAL,
				"auth file: 'auths' is not an object");
	if (lookup(auths, registry, user, pass, e) < 0)
		return cerr_prefix(e, "auth file");
	return 0;
}

/* ---- token endpoint reply ---- */

/* The token goes into an Authorization header: visible ASCII only. */
static bool header_safe(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

static int parse_ttl(const json_t *root, long *out, struct cerr *e)
{
	const json_t *v = json_object_get(root, "expires_in");
	double d;

	*out = TOKEN_TTL_DEFAULT;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_number(v))
		return cerr_set(e, EINVAL, "expires_in is not a number");
	/* Some token servers send 300.0; the spec means whole seconds. */
	d = json_number_value(v);
	if (isnan(d) || d < TOKEN_TTL_DEFAULT)
		*out = TOKEN_TTL_DEFAULT;
	else if (d > TOKEN_TTL_MAX)
		*out = TOKEN_TTL_MAX;
	else
		*out = (long)d;
	return 0;
}

int token_reply_parse(const char *json, size_t len, char **token,
		      long *expires_in, struct cerr *e)
{
	cleanup_json json_t *root = NULL;
	const char *t;

	*token = NULL;
	*expires_in = TOKEN_TTL_DEFAULT;
	if (!json || len == 0)
		return cerr_set(e, EINVAL, "token reply: empty document");
	if (len > TOKEN_REPLY_MAX)
		return cerr_set(e, EFBIG,
				"token reply: %zu bytes exceed the limit of %u",
				len, TOKEN_REPLY_MAX);
	root = json_parse_object(json, len, e);
	if (!root)
		return cerr_prefix(e, "token reply");
	t = jstr(root, "token");
	if (!t || !*t)
		t = jstr(root, "access_token");
	if (!t || !*t)
		return cerr_set(e, EINVAL,
				"token reply: neither 'token' nor "
				"'access_token' is set");
	if (!header_safe(t))
		return cerr_set(e, EINVAL,
				"token reply: the token holds characters not "
				"allowed in an HTTP header");
	if (parse_ttl(root, expires_in, e) < 0)
		return cerr_prefix(e, "token reply");
	*token = xstrdup(t);
	return 0;
}
