// SPDX-License-Identifier: Apache-2.0
/* HTTP for the metadata services and the URL datasource, over libcurl's
 * multi interface so that probes and meta-data requests run at once.
 *
 * libcurl is loaded with dlopen() on first use rather than linked: Debian's
 * libcurl drags in some thirty libraries (OpenSSL, GnuTLS pieces, LDAP,
 * SSH, IDN…) whose mere loading costs ~6 MiB of RSS and milliseconds of
 * relocation, which a boot from a NoCloud seed or a file never needs. The
 * function table below is typed from <curl/curl.h>, so the compiler still
 * checks every call. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "ci-internal.h"
#include "util.h"

#define API(name) __typeof__(&curl_##name) name
static struct {
	bool tried, ok;
	char why[256];
	API(global_init);
	API(easy_init);
	API(easy_setopt);
	API(easy_getinfo);
	API(easy_cleanup);
	API(easy_strerror);
	API(slist_append);
	API(slist_free_all);
	API(multi_init);
	API(multi_add_handle);
	API(multi_remove_handle);
	API(multi_perform);
	API(multi_poll);
	API(multi_info_read);
	API(multi_cleanup);
} cu;
#undef API

#ifdef CELL_STATIC
/* A static build (make static) links libcurl: the table points at it. */
static void *open_curl(void)
{
	return &cu;
}
#define SYMBOL(h, name) ((void *)&curl_##name)
#else
static void *open_curl(void)
{
	static const char *const names[] = {"libcurl.so.4",
					    "libcurl-gnutls.so.4"};
	const char *env = getenv("CELL_CLOUDINIT_LIBCURL");
	void *h = NULL;

	if (env && *env)
		h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
	for (size_t i = 0; !h && !env && i < ARRAY_SIZE(names); i++)
		h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
	return h;
}
#define SYMBOL(h, name) dlsym(h, "curl_" #name)
#endif

static bool load_curl(void)
{
	void *h;

	if (cu.tried)
		return cu.ok;
	cu.tried = true;
	h = open_curl();
	if (!h) {
		const char *d = dlerror();
		snprintf(cu.why, sizeof(cu.why), "%s", d ? d : "not found");
		return false;
	}
#define SYM(name)                                                              \
	do {                                                                   \
		*(void **)&cu.name = SYMBOL(h, name);                          \
		if (!cu.name) {                                                \
			snprintf(cu.why, sizeof(cu.why),                       \
				 "libcurl lacks curl_" #name);                 \
			return false;                                          \
		}                                                              \
	} while (0)
	SYM(global_init);
	SYM(easy_init);
	SYM(easy_setopt);
	SYM(easy_getinfo);
	SYM(easy_cleanup);
	SYM(easy_strerror);
	SYM(slist_append);
	SYM(slist_free_all);
	SYM(multi_init);
	SYM(multi_add_handle);
	SYM(multi_remove_handle);
	SYM(multi_perform);
	SYM(multi_poll);
	SYM(multi_info_read);
	SYM(multi_cleanup);
#undef SYM
	if (cu.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(cu.why, sizeof(cu.why), "curl_global_init failed");
		return false;
	}
	cu.ok = true;
	return true;
}

bool ci_http_available(struct cerr *e)
{
	if (load_curl())
		return true;
	cerr_set(e, ENOSYS, "cannot load libcurl: %s", cu.why);
	return false;
}

void ci_http_req_init(struct ci_http_req *r, const char *url, size_t max)
{
	memset(r, 0, sizeof(*r));
	r->url = url;
	r->max_body = max;
	buf_init(&r->body, max);
}

void ci_http_req_reset(struct ci_http_req *r)
{
	r->status = 0;
	buf_free(&r->body);
	buf_init(&r->body, r->max_body);
	free(r->header_value);
	r->header_value = NULL;
	cerr_clear(&r->err);
}

void ci_http_req_free(struct ci_http_req *r)
{
	buf_free(&r->body);
	free(r->header_value);
	r->header_value = NULL;
}

/* One request in flight (or waiting for its next try). */
struct slot {
	struct ci_http_req *r;
	CURL *h;
	struct curl_slist *hdrs;
	uint64_t next_ns; /* when the next try may start */
	long backoff_ms;
	bool done;
	bool overflow;
	char errbuf[CURL_ERROR_SIZE];
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct slot *s = ud;
	struct cerr e;

	if (buf_append(&s->r->body, p, size * n, &e) < 0) {
		s->overflow = true;
		return 0; /* aborts the transfer */
	}
	return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct slot *s = ud;
	const char *want = s->r->want_header;
	size_t len = size * n, wl = strlen(want);

	if (len > wl + 1 && !strncasecmp(p, want, wl) && p[wl] == ':' &&
	    !s->r->header_value) {
		const char *v = p + wl + 1;
		size_t vl = len - wl - 1;
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' ||
			      v[vl - 1] == ' '))
			vl--;
		if (vl < 256)
			s->r->header_value = xstrndup(v, vl);
	}
	return len;
}

static long ms_left(uint64_t deadline_ns)
{
	uint64_t now = now_ns();
	return now >= deadline_ns ? 0 : (long)((deadline_ns - now) / 1000000);
}

static int start(CURLM *m, struct slot *s, uint64_t deadline, long try_ms)
{
	struct ci_http_req *r = s->r;
	long t = ms_left(deadline);
	CURL *h = cu.easy_init();

	if (!h)
		abort(); /* only fails on out of memory */
	if (t > try_ms)
		t = try_ms;
	ci_http_req_reset(r);
	s->overflow = false;
	s->errbuf[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(r->headers) && r->headers[i]; i++)
		s->hdrs = cu.slist_append(s->hdrs, r->headers[i]);
	cu.easy_setopt(h, CURLOPT_URL, r->url);
	cu.easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	cu.easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	cu.easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	cu.easy_setopt(h, CURLOPT_TIMEOUT_MS, t > 1 ? t : 1L);
	cu.easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, t > 1 ? t : 1L);
	cu.easy_setopt(h, CURLOPT_USERAGENT, "cell-cloudinit/" CELL_VERSION);
	cu.easy_setopt(h, CURLOPT_HTTPHEADER, s->hdrs);
	cu.easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	cu.easy_setopt(h, CURLOPT_WRITEDATA, s);
	cu.easy_setopt(h, CURLOPT_ERRORBUFFER, s->errbuf);
	cu.easy_setopt(h, CURLOPT_PRIVATE, s);
	if (r->method)
		cu.easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
	if (r->post)
		cu.easy_setopt(h, CURLOPT_POSTFIELDS, r->post);
	if (r->want_header) {
		cu.easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
		cu.easy_setopt(h, CURLOPT_HEADERDATA, s);
	}
	if (r->follow) {
		cu.easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
		cu.easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
	}
	/* A proxy in the environment must not see metadata requests. */
	if (!r->use_proxy)
		cu.easy_setopt(h, CURLOPT_NOPROXY, "*");
	s->h = h;
	return cu.multi_add_handle(m, h) == CURLM_OK ? 0 : -1;
}

static void stop(CURLM *m, struct slot *s)
{
	if (s->h) {
		cu.multi_remove_handle(m, s->h);
		cu.easy_cleanup(s->h);
		s->h = NULL;
	}
	cu.slist_free_all(s->hdrs);
	s->hdrs = NULL;
}

/* A finished transfer: record the outcome in the request. */
static void finish(CURLM *m, struct slot *s, CURLcode rc)
{
	struct ci_http_req *r = s->r;

	cu.easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &r->status);
	if (s->overflow) {
		cerr_set(&r->err, EFBIG, "%s: reply over %zu bytes", r->url,
			 r->max_body);
		r->status = 0;
	} else if (rc != CURLE_OK) {
		cerr_set(&r->err,
			 rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : EIO,
			 "%s: %s", r->url,
			 s->errbuf[0] ? s->errbuf : cu.easy_strerror(rc));
		r->status = 0;
	}
	stop(m, s);
}

/* Silence, 429 and 5xx may pass; a reply over the cap will not shrink. */
static bool transient(const struct ci_http_req *r)
{
	if (r->err.code == EFBIG)
		return false;
	return r->status == 0 || r->status == 429 || r->status >= 500;
}

/* Start the slots whose time has come, give up on all at the deadline;
 * returns when the next pending one is due. */
static uint64_t schedule(CURLM *m, struct slot *sl, size_t n, size_t *open,
			 uint64_t deadline, long try_ms)
{
	uint64_t now = now_ns(), wake = deadline;

	for (size_t i = 0; i < n; i++) {
		struct slot *s = &sl[i];

		if (s->done || s->h)
			continue;
		if (now >= deadline) {
			s->done = true, (*open)--;
			if (!s->r->err.code)
				cerr_set(&s->r->err, ETIMEDOUT,
					 "%s: no answer in time", s->r->url);
		} else if (now >= s->next_ns) {
			if (start(m, s, deadline, try_ms) < 0)
				s->done = true, (*open)--;
		} else if (s->next_ns < wake) {
			wake = s->next_ns;
		}
	}
	return wake;
}

/* A finished transfer: done, the winner (1), or due again after back-off.
 * A definite answer that a probe rejects means "not this cloud": only
 * silence, 429 and 5xx are retried. */
static int settle(struct slot *s, ci_http_accept_fn accept, size_t *open)
{
	bool ok = accept ? accept(s->r) : !transient(s->r);

	if (ok || !transient(s->r)) {
		s->done = true, (*open)--;
		return ok && accept ? 1 : 0;
	}
	s->next_ns = now_ns() + (uint64_t)s->backoff_ms * 1000000;
	s->backoff_ms = s->backoff_ms < 500 ? s->backoff_ms * 2 : 1000;
	return 0;
}

/* The shared loop: accept == NULL runs a batch (each request until it has
 * a final answer); else a race that ends with the first accepted one. */
static int engine(struct slot *sl, size_t n, ci_http_accept_fn *accept,
		  uint64_t deadline, long try_ms)
{
	CURLM *m = cu.multi_init();
	int winner = -1;
	size_t open = n;

	while (open && winner < 0) {
		uint64_t wake = schedule(m, sl, n, &open, deadline, try_ms);
		CURLMsg *msg;
		int running, left;
		long wait;

		cu.multi_perform(m, &running);
		while ((msg = cu.multi_info_read(m, &left))) {
			struct slot *s;

			if (msg->msg != CURLMSG_DONE)
				continue;
			cu.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
					(char **)&s);
			finish(m, s, msg->data.result);
			if (settle(s, accept ? accept[s - sl] : NULL, &open))
				winner = (int)(s - sl);
		}
		if (!open || winner >= 0)
			break;
		wait =
		    (long)((wake > now_ns() ? wake - now_ns() : 0) / 1000000);
		cu.multi_poll(m, NULL, 0, (int)(wait < 100 ? wait + 1 : 100),
			      NULL);
	}
	for (size_t i = 0; i < n; i++)
		stop(m, &sl[i]);
	cu.multi_cleanup(m);
	return winner;
}

static struct slot *slots(struct ci_http_req *reqs, size_t n)
{
	struct slot *sl = xcalloc(n, sizeof(*sl));

	for (size_t i = 0; i < n; i++) {
		sl[i].r = &reqs[i];
		sl[i].backoff_ms = 100;
	}
	return sl;
}

int ci_http_run(struct ci_http_req *reqs, size_t n, uint64_t deadline_ns,
		long try_ms, struct cerr *e)
{
	struct slot *sl;

	if (!ci_http_available(e))
		return -1;
	sl = slots(reqs, n);
	engine(sl, n, NULL, deadline_ns, try_ms);
	free(sl);
	return 0;
}

int ci_http_race(struct ci_http_req *reqs, size_t n, ci_http_accept_fn *accept,
		 uint64_t deadline_ns, long try_ms, struct cerr *e)
{
	struct slot *sl;
	int w;

	if (!ci_http_available(e))
		return -1;
	sl = slots(reqs, n);
	w = engine(sl, n, accept, deadline_ns, try_ms);
	free(sl);
	if (w < 0)
		return cerr_set(e, ETIMEDOUT, "no metadata service answered");
	return w;
}
