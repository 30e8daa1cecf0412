// SPDX-License-Identifier: Apache-2.0
/* A client for the registry HTTP API (OCI distribution / Docker registry v2)
 * over libcurl: manifests and blobs, bearer-token and basic auth, retries
 * with back-off, resumable blob streams. Connections, DNS and TLS sessions are
 * shared between the threads that fetch layers in parallel. */
#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "jsonutil.h"
#include "cleanup.h"
#include "log.h"
#include "pull-internal.h"
#include "util.h"

#define HDR_MAX 8192	 /* one stored response header */
#define ERRBODY_MAX 4096 /* error replies kept for the message */
#define TOKEN_MAX (64u << 10)
#define SLACK_NS (10ull * 1000000000ull)

struct registry {
	char *base; /* "https://host" */
	char *repository;
	char *user, *pass;
	char *ca_file;
	bool plain_http;
	bool http_fallback; /* loopback: plain HTTP if TLS is not spoken */
	int retries;
	bool unreachable;    /* the last failure had no HTTP answer, or a 5xx */
	long max_recv_speed; /* test seam: CELL_PULL_MAX_RECV_SPEED */
	long retry_base_ms;  /* test seam: CELL_PULL_RETRY_BASE_MS */
	long connect_ms;     /* test seam: CELL_PULL_CONNECT_TIMEOUT_MS */
	long range_ms; /* a range read's limit: CELL_PULL_RANGE_TIMEOUT_MS */
	int range_retries; /* and its retries: CELL_PULL_RANGE_RETRIES */
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t auth_mu;
	char *auth_header;     /* "Authorization: …" or NULL */
	uint64_t auth_expires; /* monotonic ns; 0 = never */
	unsigned auth_gen;
};

/* One HTTP exchange and what came back. */
struct req {
	char *url;
	const char *accept;
	uint64_t range_from; /* 0: no Range header (unless ranged) */
	uint64_t range_to;   /* ranged: the last byte wanted */
	bool ranged;	     /* a bounded range read (lazy layers) */
	long timeout_ms;     /* whole attempt, 0: none */
	int retries;	     /* -1: the registry's */
	long status;
	char *ctype, *www_auth, *content_range;
	struct buf errbody;
	struct buf *body;  /* in-memory reply, or NULL */
	blob_sink_fn sink; /* streamed reply, or NULL */
	void *sink_arg;
	uint64_t delivered; /* bytes handed to body/sink in this attempt */
	uint64_t skip;	    /* bytes to drop: the server ignored Range */
	struct cerr *sink_e;
	bool sink_failed;
	bool range_checked;
	long max_speed;	  /* test seam: bytes/s, 0 = unlimited */
	uint64_t t_start; /* when this attempt began, for max_speed */
	/* How the request ended when it failed: its tries, and curl's code
	 * of the last (CURLE_OK: an HTTP answer, q->status). */
	int tries;
	CURLcode last;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static bool curl_ready;
static void curl_init_once(void)
{
	curl_ready = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

void pull_library_cleanup(void)
{
	if (curl_ready)
		curl_global_cleanup();
	curl_ready = false;
}

static void share_lock(CURL *h, curl_lock_data d, curl_lock_access a, void *u)
{
	struct registry *r = u;
	pthread_mutex_lock(&r->share_mu[d]);
}

static void share_unlock(CURL *h, curl_lock_data d, void *u)
{
	struct registry *r = u;
	pthread_mutex_unlock(&r->share_mu[d]);
}

static bool host_is_insecure(const char *host, const char *const *list)
{
	size_t hl = strcspn(host, ":");

	for (; list && *list; list++) {
		if (!strcmp(*list, host))
			return true;
		/* An entry without a port covers every port of that host. */
		if (!strchr(*list, ':') && strlen(*list) == hl &&
		    !strncmp(*list, host, hl))
			return true;
	}
	return false;
}

/* A registry on this machine: 127.0.0.0/8, ::1 or localhost. Like Docker,
 * such a registry may speak plain HTTP without being listed: TLS is tried
 * first, and plain HTTP only when the handshake shows it is not spoken. */
static bool host_is_loopback(const char *host)
{
	char h[256];
	struct in_addr a4;
	struct in6_addr a6;
	size_t n;

	if (host[0] == '[') {
		const char *end = strchr(host, ']');

		n = end ? (size_t)(end - host - 1) : 0;
		host++;
	} else {
		n = strcspn(host, ":");
	}
	if (n == 0 || n >= sizeof(h))
		return false;
	memcpy(h, host, n);
	h[n] = '\0';
	if (!strcasecmp(h, "localhost"))
		return true;
	if (inet_pton(AF_INET, h, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, h, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static long env_long(const char *name, long def)
{
	const char *v = getenv(name);
	int64_t n;

	if (!v || parse_int64(v, 0, 1L << 40, &n, NULL) < 0)
		return def;
	return (long)n;
}

int registry_open(const struct image_ref *ref, const struct registry_opts *o,
		  struct registry **out, struct cerr *e)
{
	struct registry *r = xcalloc(1, sizeof(*r));

	pthread_once(&curl_once, curl_init_once);
	if (o->registry_url) {
		r->base = xstrdup(o->registry_url);
		while (str_has_suffix(r->base, "/"))
			r->base[strlen(r->base) - 1] = '\0';
		if (!str_has_prefix(r->base, "https://") &&
		    !str_has_prefix(r->base, "http://")) {
			free(r->base);
			free(r);
			return cerr_set(e, EINVAL,
					"registry URL '%s' must start with "
					"https:// or http://",
					o->registry_url);
		}
		r->plain_http = str_has_prefix(r->base, "http://");
	} else {
		r->plain_http = host_is_insecure(ref->registry, o->insecure);
		r->http_fallback =
		    !r->plain_http && host_is_loopback(ref->registry);
		r->base = xasprintf("%s://%s", r->plain_http ? "http" : "https",
				    ref->registry);
	}
	r->repository = xstrdup(ref->repository);
	r->user = o->username ? xstrdup(o->username) : NULL;
	r->pass = o->password ? xstrdup(o->password) : NULL;
	r->ca_file = o->ca_file ? xstrdup(o->ca_file) : NULL;
	r->retries = o->retries > 0 ? o->retries : 0;
	r->max_recv_speed = env_long("CELL_PULL_MAX_RECV_SPEED", 0);
	r->retry_base_ms = env_long("CELL_PULL_RETRY_BASE_MS", 250);
	r->connect_ms = env_long("CELL_PULL_CONNECT_TIMEOUT_MS", 10000);
	r->range_ms = env_long("CELL_PULL_RANGE_TIMEOUT_MS", 20000);
	r->range_retries = (int)env_long("CELL_PULL_RANGE_RETRIES", 2);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&r->share_mu[i], NULL);
	pthread_mutex_init(&r->auth_mu, NULL);
	r->share = curl_share_init();
	curl_share_setopt(r->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(r->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(r->share, CURLSHOPT_USERDATA, r);
	curl_share_setopt(r->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	curl_share_setopt(r->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(r->share, CURLSHOPT_SHARE,
			  CURL_LOCK_DATA_SSL_SESSION);
	*out = r;
	return 0;
}

void registry_close(struct registry *r)
{
	if (!r)
		return;
	curl_share_cleanup(r->share);
	for (int i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&r->share_mu[i]);
	pthread_mutex_destroy(&r->auth_mu);
	free(r->base);
	free(r->repository);
	free(r->user);
	free(r->pass);
	free(r->ca_file);
	free(r->auth_header);
	free(r);
}

/* ---- response callbacks ---- */

static void keep_header(char **slot, const char *v, size_t n)
{
	while (n && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	while (n && (*v == ' ' || *v == '\t')) {
		v++;
		n--;
	}
	free(*slot);
	*slot = xstrndup(v, n > HDR_MAX ? HDR_MAX : n);
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t len = size * n;
	const char *colon = memchr(p, ':', len);

	if (len >= 5 && !strncmp(p, "HTTP/", 5)) {
		/* A new response (after a redirect): forget the old headers. */
		const char *sp = memchr(p, ' ', len);

		free(q->ctype);
		free(q->www_auth);
		free(q->content_range);
		q->ctype = q->www_auth = q->content_range = NULL;
		q->status = sp ? strtol(sp + 1, NULL, 10) : 0;
		/* A server that ignores Range sends the whole blob again:
		 * drop what we already have. */
		q->skip = q->status == 200 ? q->range_from : 0;
		q->range_checked = false;
		return len;
	}
	if (!colon)
		return len;
	size_t kl = (size_t)(colon - p), vl = len - kl - 1;
	if (kl == 12 && !strncasecmp(p, "content-type", 12))
		keep_header(&q->ctype, colon + 1, vl);
	else if (kl == 16 && !strncasecmp(p, "www-authenticate", 16))
		keep_header(&q->www_auth, colon + 1, vl);
	else if (kl == 13 && !strncasecmp(p, "content-range", 13))
		keep_header(&q->content_range, colon + 1, vl);
	return len;
}

/* The CELL_PULL_MAX_RECV_SPEED seam: hold a transfer to an average rate so
 * that tests can interrupt it in the middle. (curl's own rate limit lets
 * loopback bursts through.) */
static void throttle(const struct req *q)
{
	uint64_t due =
	    q->t_start + q->delivered * 1000000000ull / (uint64_t)q->max_speed;
	uint64_t now = now_ns();

	if (due > now) {
		struct timespec ts = {
		    .tv_sec = (time_t)((due - now) / 1000000000ull),
		    .tv_nsec = (long)((due - now) % 1000000000ull),
		};
		nanosleep(&ts, NULL);
	}
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct req *q = arg;
	size_t len = size * n;

	if (q->status < 200 || q->status > 299) {
		size_t room = ERRBODY_MAX - q->errbody.len;
		buf_append(&q->errbody, p, len < room ? len : room, NULL);
		return len;
	}
	if (q->ranged && q->status != 206) {
		cerr_set(q->sink_e, EPROTO,
			 "the registry answered a range read with HTTP %ld",
			 q->status);
		q->sink_failed = true;
		return 0;
	}
	if (q->status == 206 && !q->range_checked) {
		unsigned long long from = ~0ull;
		if (!q->content_range ||
		    sscanf(q->content_range, "bytes %llu-", &from) != 1 ||
		    from != q->range_from) {
			cerr_set(q->sink_e, EPROTO,
				 "server answered Range %llu- with '%s'",
				 (unsigned long long)q->range_from,
				 q->content_range ? q->content_range : "");
			q->sink_failed = true;
			return 0;
		}
		q->range_checked = true;
	}
	if (q->skip) {
		size_t drop = q->skip < len ? (size_t)q->skip : len;
		q->skip -= drop;
		p += drop;
		len -= drop;
		if (!len)
			return size * n;
	}
	if (q->body) {
		if (buf_append(q->body, p, len, q->sink_e) < 0) {
			q->sink_failed = true;
			return 0;
		}
	} else if (q->sink(q->sink_arg, p, len, q->sink_e) < 0) {
		q->sink_failed = true;
		return 0;
	}
	q->delivered += len;
	if (q->max_speed)
		throttle(q);
	return size * n;
}

/* ---- one attempt ---- */

static CURL *easy_for(struct registry *r, struct req *q,
		      struct curl_slist **hdrs, const char *auth)
{
	CURL *h = curl_easy_init();
	char range[64];

	if (!h)
		abort();
	curl_easy_setopt(h, CURLOPT_URL, q->url);
	curl_easy_setopt(h, CURLOPT_SHARE, r->share);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR,
			 r->plain_http ? "http,https" : "https");
	curl_easy_setopt(h, CURLOPT_USERAGENT, "cell-pull/" CELL_VERSION);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 r->connect_ms > 0 ? r->connect_ms : 10000L);
	/* A transfer that stalls for 30 s is dropped and retried. */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L * 1024);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, q);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
	if (r->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, r->ca_file);
	if (q->accept) {
		cleanup_free char *a = xasprintf("Accept: %s", q->accept);
		*hdrs = curl_slist_append(*hdrs, a);
	}
	if (auth)
		*hdrs = curl_slist_append(*hdrs, auth);
	if (q->ranged) {
		snprintf(range, sizeof(range), "Range: bytes=%llu-%llu",
			 (unsigned long long)q->range_from,
			 (unsigned long long)q->range_to);
		*hdrs = curl_slist_append(*hdrs, range);
	} else if (q->range_from) {
		snprintf(range, sizeof(range), "Range: bytes=%llu-",
			 (unsigned long long)q->range_from);
		*hdrs = curl_slist_append(*hdrs, range);
	}
	/* A range read serves a process blocked in read(2): a stalled
	 * registry must give it an error in bounded time, not 30 s of
	 * silence per try. */
	if (q->timeout_ms)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, q->timeout_ms);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
	return h;
}

static void req_reset(struct req *q)
{
	free(q->ctype);
	free(q->www_auth);
	free(q->content_range);
	q->ctype = q->www_auth = q->content_range = NULL;
	buf_free(&q->errbody);
	buf_init(&q->errbody, ERRBODY_MAX);
	q->status = 0;
	q->delivered = 0;
	q->skip = 0;
	q->sink_failed = false;
}

/* Run one attempt. Returns the CURLcode; q->status holds the HTTP status. */
static CURLcode perform(struct registry *r, struct req *q, const char *auth,
			char *curl_msg, size_t msgsz)
{
	struct curl_slist *hdrs = NULL;
	CURL *h;
	CURLcode c;

	req_reset(q);
	q->max_speed = r->max_recv_speed;
	q->t_start = now_ns();
	curl_msg[0] = '\0';
	h = easy_for(r, q, &hdrs, auth);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, curl_msg);
	c = curl_easy_perform(h);
	if (c == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &q->status);
	if (!curl_msg[0])
		snprintf(curl_msg, msgsz, "%s", curl_easy_strerror(c));
	curl_easy_cleanup(h);
	curl_slist_free_all(hdrs);
	return c;
}

static bool curl_retryable(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_CONNECT:
	case CURLE_PARTIAL_FILE:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
	case CURLE_SSL_CONNECT_ERROR:
		return true;
	default:
		return false;
	}
}

static void backoff(struct registry *r, int attempt)
{
	uint64_t ms = (uint64_t)r->retry_base_ms << (attempt < 5 ? attempt : 5);
	struct timespec ts;

	if (ms > 8000)
		ms = 8000;
	/* Up to a quarter of jitter keeps parallel layers from retrying in
	 * lockstep. */
	ms += (uint64_t)rand() % (ms / 4 + 1);
	ts.tv_sec = (time_t)(ms / 1000);
	ts.tv_nsec = (long)(ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

/* Turn a registry error reply into a short message: the distribution
 * spec's {"errors":[{"code":…,"message":…}]} or the first line of text. */
static void describe_reply(const struct req *q, char *out, size_t outsz)
{
	const char *b = q->errbody.data ? q->errbody.data : "";
	json_error_t je;
	json_t *j = json_loadb(b, q->errbody.len, 0, &je), *first;

	first = j ? json_array_get(json_object_get(j, "errors"), 0) : NULL;
	if (first && json_is_string(json_object_get(first, "code")))
		snprintf(
		    out, outsz, "%s: %s",
		    json_string_value(json_object_get(first, "code")),
		    json_is_string(json_object_get(first, "message"))
			? json_string_value(json_object_get(first, "message"))
			: "");
	else
		snprintf(out, outsz, "%.*s", (int)strcspn(b, "\r\n"), b);
	if (j)
		json_decref(j);
}

/* ---- authentication ---- */

static char *b64(const char *s)
{
	size_t n = strlen(s);
	char *out = xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
	return out;
}

static char *basic_header(const char *user, const char *pass)
{
	cleanup_free char *up = xasprintf("%s:%s", user, pass ? pass : "");
	cleanup_free char *enc = b64(up);
	return xasprintf("Authorization: Basic %s", enc);
}

static char *auth_current(struct registry *r, unsigned *gen)
{
	char *h = NULL;

	pthread_mutex_lock(&r->auth_mu);
	if (r->auth_expires && now_ns() + SLACK_NS > r->auth_expires) {
		/* Expired: go without, the 401 brings a fresh token. */
		free(r->auth_header);
		r->auth_header = NULL;
		r->auth_expires = 0;
	}
	if (r->auth_header)
		h = xstrdup(r->auth_header);
	*gen = r->auth_gen;
	pthread_mutex_unlock(&r->auth_mu);
	return h;
}

/* A loopback registry answered TLS with plain HTTP: switch this registry
 * (and this request) to http://, once. */
static bool to_plain_http(struct registry *r, struct req *q)
{
	char *url;

	pthread_mutex_lock(&r->auth_mu);
	if (r->http_fallback && str_has_prefix(r->base, "https://")) {
		char *b = xasprintf("http://%s", r->base + 8);

		log_info("%s speaks plain HTTP (a loopback registry)", b);
		free(r->base);
		r->base = b;
		r->plain_http = true;
	}
	pthread_mutex_unlock(&r->auth_mu);
	if (!r->plain_http || !str_has_prefix(q->url, "https://"))
		return false;
	url = xasprintf("http://%s", q->url + 8);
	free(q->url);
	q->url = url;
	return true;
}

static int request(struct registry *r, struct req *q, bool registry_auth,
		   const char *fixed_auth, struct cerr *e);

/* Ask the token server named by a Bearer challenge for a token. */
static int fetch_token(struct registry *r, const struct www_auth *w,
		       char **token, long *expires, struct cerr *e)
{
	struct req q = {.retries = -1};
	struct buf body;
	cleanup_free char *scope = NULL, *basic = NULL;
	CURL *esc = curl_easy_init();
	char *svc_e, *scope_e;
	int ret;

	if (!w->realm)
		return cerr_set(e, EPROTO, "bearer challenge without realm");
	if (str_has_prefix(w->realm, "http://") && !r->plain_http)
		return cerr_set(e, EPROTO,
				"token realm %s is plain HTTP; refusing to "
				"send credentials",
				w->realm);
	scope = w->scope ? xstrdup(w->scope)
			 : xasprintf("repository:%s:pull", r->repository);
	svc_e = curl_easy_escape(esc, w->service ? w->service : "", 0);
	scope_e = curl_easy_escape(esc, scope, 0);
	q.url = xasprintf("%s%sservice=%s&scope=%s", w->realm,
			  strchr(w->realm, '?') ? "&" : "?", svc_e, scope_e);
	curl_free(svc_e);
	curl_free(scope_e);
	curl_easy_cleanup(esc);
	buf_init(&body, TOKEN_MAX);
	q.body = &body;
	q.sink_e = e;
	if (r->user)
		basic = basic_header(r->user, r->pass);
	ret = request(r, &q, false, basic, e);
	if (ret == 0)
		ret = token_reply_parse(body.data, body.len, token, expires, e);
	if (ret < 0)
		cerr_prefix(e, "get token from %s", w->realm);
	free(q.url);
	buf_free(&body);
	req_reset(&q);
	buf_free(&q.errbody);
	return ret;
}

/* A 401 arrived. Work out new credentials unless another thread already
 * did (the generation moved on). */
static int auth_challenge(struct registry *r, const struct req *q, unsigned gen,
			  struct cerr *e)
{
	struct www_auth w = {0};
	int ret = 0;

	pthread_mutex_lock(&r->auth_mu);
	if (r->auth_gen != gen)
		goto out;
	if (!q->www_auth || www_auth_parse(q->www_auth, &w, e) < 0) {
		ret = cerr_set(e, EACCES,
			       "401 Unauthorized without a usable challenge");
		goto out;
	}
	if (!strcasecmp(w.scheme, "basic")) {
		if (!r->user) {
			ret = cerr_set(e, EACCES,
				       "401 Unauthorized: the registry wants "
				       "credentials (--username/--password or "
				       "--auth-file)");
			goto out;
		}
		free(r->auth_header);
		r->auth_header = basic_header(r->user, r->pass);
		r->auth_expires = 0;
	} else if (!strcasecmp(w.scheme, "bearer")) {
		char *tok = NULL;
		long exp = 0;

		if (fetch_token(r, &w, &tok, &exp, e) < 0) {
			ret = -1;
			goto out;
		}
		free(r->auth_header);
		r->auth_header = xasprintf("Authorization: Bearer %s", tok);
		r->auth_expires = now_ns() + (uint64_t)exp * 1000000000ull;
		free(tok);
	} else {
		ret = cerr_set(e, EACCES, "unsupported auth scheme '%s'",
			       w.scheme);
		goto out;
	}
	r->auth_gen++;
out:
	pthread_mutex_unlock(&r->auth_mu);
	www_auth_free(&w);
	return ret;
}

/* ---- the request loop: retries, auth, resumption ---- */

static int status_error(const struct req *q, struct cerr *e)
{
	char why[512];
	int code = q->status == 404			  ? ENOENT
		   : q->status == 401 || q->status == 403 ? EACCES
							  : EPROTO;

	describe_reply(q, why, sizeof(why));
	if (q->status == 401)
		return cerr_set(e, code, "401 Unauthorized%s%s",
				why[0] ? ": " : "", why);
	return cerr_set(e, code, "HTTP %ld%s%s", q->status, why[0] ? ": " : "",
			why);
}

static int request(struct registry *r, struct req *q, bool registry_auth,
		   const char *fixed_auth, struct cerr *e)
{
	int attempt = 0, auth_rounds = 0;
	char cmsg[CURL_ERROR_SIZE];

	for (;;) {
		unsigned gen = 0;
		cleanup_free char *auth =
		    registry_auth ? auth_current(r, &gen)
				  : (fixed_auth ? xstrdup(fixed_auth) : NULL);
		CURLcode c;
		bool retry;

		if (q->body)
			buf_reset(q->body);
		c = perform(r, q, auth, cmsg, sizeof(cmsg));
		q->tries = attempt + 1;
		q->last = c;
		if (q->sink_failed)
			return -1;
		int max_retries = q->retries >= 0 ? q->retries : r->retries;

		if (q->sink && q->delivered) {
			/* Resume after what arrived; progress earns fresh
			 * retries. */
			q->range_from += q->delivered;
			if (q->delivered >= (1u << 20))
				attempt = 0;
		}
		if (c == CURLE_OK && q->status == 401 && registry_auth &&
		    auth_rounds++ < 2) {
			if (auth_challenge(r, q, gen, e) < 0)
				return -1;
			continue;
		}
		if (c == CURLE_OK && (q->status == 200 || q->status == 206))
			return 0;
		retry = c == CURLE_OK ? (q->status >= 500 || q->status == 429)
				      : curl_retryable(c);
		if (c == CURLE_SSL_CONNECT_ERROR &&
		    strstr(cmsg, "wrong version number") && to_plain_http(r, q))
			continue;
		if (!retry || attempt >= max_retries) {
			r->unreachable = retry;
			if (c == CURLE_SSL_CONNECT_ERROR &&
			    strstr(cmsg, "wrong version number"))
				return cerr_set(e, EPROTO,
						"%s: TLS handshake failed; the "
						"registry seems to speak plain "
						"HTTP (allow that with "
						"--insecure-registry HOST)",
						cmsg);
			if (c != CURLE_OK)
				return cerr_set(e,
						c == CURLE_COULDNT_CONNECT
						    ? ECONNREFUSED
						    : EIO,
						"%s", cmsg);
			return status_error(q, e);
		}
		if (c == CURLE_OK)
			snprintf(cmsg, sizeof(cmsg), "HTTP %ld", q->status);
		log_info("%s: %s; retrying (%d of %d)", q->url, cmsg,
			 attempt + 1, max_retries);
		backoff(r, attempt++);
	}
}

/* ---- public calls ---- */

/* Run a registry request for q->url and release it; what/ref name it in an
 * error ("blob sha256:…: HTTP 404"). */
static int run_req(struct registry *r, struct req *q, const char *what,
		   const char *ref, char **content_type, struct cerr *e)
{
	int ret;

	q->sink_e = e;
	ret = request(r, q, true, NULL, e);
	if (ret == 0 && content_type)
		*content_type = q->ctype ? xstrdup(q->ctype) : NULL;
	if (ret < 0)
		cerr_prefix(e, "%s %s", what, ref);
	free(q->url);
	req_reset(q);
	buf_free(&q->errbody);
	return ret;
}

int registry_get_manifest(struct registry *r, const char *reference,
			  struct buf *body, char **content_type, struct cerr *e)
{
	struct req q = {.accept = MT_ACCEPT, .body = body, .retries = -1};

	q.url = xasprintf("%s/v2/%s/manifests/%s", r->base, r->repository,
			  reference);
	return run_req(r, &q, "manifest", reference, content_type, e);
}

int registry_get_blob(struct registry *r, const char *digest, struct buf *body,
		      struct cerr *e)
{
	struct req q = {.body = body, .retries = -1};

	q.url = xasprintf("%s/v2/%s/blobs/%s", r->base, r->repository, digest);
	return run_req(r, &q, "blob", digest, NULL, e);
}

int registry_stream_blob(struct registry *r, const char *digest,
			 uint64_t offset, blob_sink_fn sink, void *arg,
			 struct cerr *e)
{
	struct req q = {
	    .sink = sink, .sink_arg = arg, .range_from = offset, .retries = -1};

	q.url = xasprintf("%s/v2/%s/blobs/%s", r->base, r->repository, digest);
	return run_req(r, &q, "blob", digest, NULL, e);
}

/* A failed range read in a few words for a status line (lazy.h
 * lazy_failure): what ended it, and after how many tries. */
static void range_why(const struct req *q, bool short_body, char *why, size_t n)
{
	char tries[32] = "";

	if (q->tries > 1)
		snprintf(tries, sizeof(tries), " after %d tries", q->tries);
	if (short_body)
		snprintf(why, n, "a short reply");
	else if (q->sink_failed)
		snprintf(why, n,
			 q->status != 206 ? "HTTP %ld instead of 206"
					  : "a reply for another range",
			 q->status);
	else if (q->last == CURLE_OPERATION_TIMEDOUT)
		snprintf(why, n, "timed out%s", tries);
	else if (q->last == CURLE_COULDNT_CONNECT)
		snprintf(why, n, "connection refused%s", tries);
	else if (q->last != CURLE_OK)
		snprintf(why, n, "%s%s", curl_easy_strerror(q->last), tries);
	else
		snprintf(why, n, "HTTP %ld%s", q->status, tries);
}

int registry_get_range(struct registry *r, const char *digest, uint64_t from,
		       size_t len, struct buf *body, char *why, struct cerr *e)
{
	struct req q = {.body = body,
			.ranged = true,
			.range_from = from,
			.range_to = from + len - 1,
			.timeout_ms = r->range_ms,
			.retries = r->range_retries};
	int ret;

	if (why)
		why[0] = '\0';
	if (!len)
		return cerr_set(e, EINVAL, "an empty range");
	q.url = xasprintf("%s/v2/%s/blobs/%s", r->base, r->repository, digest);
	q.sink_e = e;
	ret = request(r, &q, true, NULL, e);
	if (ret < 0) {
		if (why)
			range_why(&q, false, why, REGISTRY_WHY_MAX);
		cerr_prefix(e, "blob %s", digest);
	}
	free(q.url);
	req_reset(&q);
	buf_free(&q.errbody);
	if (ret < 0)
		return -1;
	if (body->len != len) {
		if (why)
			range_why(&q, true, why, REGISTRY_WHY_MAX);
		return cerr_set(
		    e, EPROTO, "blob %s: range %llu+%zu: %zu bytes came",
		    digest, (unsigned long long)from, len, body->len);
	}
	return 0;
}

const char *registry_host(const struct registry *r)
{
	const char *h = strstr(r->base, "://");

	return h ? h + 3 : r->base;
}

int registry_set_retries(struct registry *r, int retries)
{
	int old = r->retries;

	r->retries = retries;
	return old;
}

bool registry_unreachable(const struct registry *r)
{
	return r->unreachable;
}
