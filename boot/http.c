// SPDX-License-Identifier: Apache-2.0
/* libcurl for cell-boot: one request at a time (the metadata services go
 * through cloudinit's client; this is SSM and the agent download). SSM
 * requests are signed by libcurl itself (CURLOPT_AWS_SIGV4). */
#include <curl/curl.h>
#include <errno.h>
#include <string.h>

#include "boot-internal.h"
#include "digest.h"
#include "fsutil.h"

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	struct cerr e = {0};

	return buf_append(b, p, size * n, &e) < 0 ? 0 : size * n;
}

static CURL *easy(const char *url, const char *ca_bundle, long timeout_ms,
		  char *errbuf)
{
	CURL *h = curl_easy_init();

	if (!h)
		return NULL;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 timeout_ms < 10000 ? timeout_ms : 10000L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "cell-boot/" CELL_VERSION);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	if (ca_bundle)
		curl_easy_setopt(h, CURLOPT_CAINFO, ca_bundle);
	return h;
}

static int finish(CURL *h, CURLcode rc, const char *errbuf, long *status,
		  bool too_big, struct cerr *e)
{
	*status = 0;
	if (rc == CURLE_WRITE_ERROR && too_big)
		return cerr_set(e, EFBIG, "reply over the size cap");
	if (rc != CURLE_OK)
		return cerr_set(e, EIO, "%s",
				*errbuf ? errbuf : curl_easy_strerror(rc));
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

int boot_http(struct boot_http *r, struct cerr *e)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	CURL *h = easy(r->url, r->ca_bundle,
		       r->timeout_ms > 0 ? r->timeout_ms : 10000, errbuf);
	CURLcode rc;
	int ret;

	if (!h)
		return cerr_set(e, ENOMEM, "curl_easy_init");
	for (size_t i = 0; i < 6 && r->headers[i]; i++)
		hdrs = curl_slist_append(hdrs, r->headers[i]);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &r->reply);
	if (r->body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body);
	if (r->method)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
	if (r->sigv4) {
		curl_easy_setopt(h, CURLOPT_AWS_SIGV4, r->sigv4);
		curl_easy_setopt(h, CURLOPT_USERPWD, r->userpwd);
	}
	buf_reset(&r->reply);
	rc = curl_easy_perform(h);
	ret = finish(h, rc, errbuf, &r->status,
		     r->reply.max && r->reply.len + 16384 > r->reply.max, e);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return ret;
}

struct sink {
	int fd;
	size_t n, max;
	struct hasher hs;
	bool failed;
};

static size_t on_file(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t len = size * n;

	if (s->n + len > s->max || fs_write_all(s->fd, p, len) < 0) {
		s->failed = true;
		return 0;
	}
	s->n += len;
	hasher_update(&s->hs, p, len);
	return len;
}

int boot_http_download(const char *url, const char *ca_bundle, int fd,
		       size_t max, char digest[DIGEST_STR_MAX], struct cerr *e)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct sink s = {.fd = fd, .max = max};
	CURL *h;
	CURLcode rc;
	long status;
	int ret;

	if (hasher_init(&s.hs, "sha256", e) < 0)
		return -1;
	h = easy(url, ca_bundle, 600000, errbuf);
	if (!h) {
		hasher_free(&s.hs);
		return cerr_set(e, ENOMEM, "curl_easy_init");
	}
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_file);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	rc = curl_easy_perform(h);
	ret = finish(h, rc, errbuf, &status, s.n >= max, e);
	if (ret == 0 && s.failed)
		ret = cerr_sys(e, "write");
	if (ret == 0 && status != 200)
		ret = cerr_set(e, EPROTO, "HTTP %ld", status);
	curl_easy_cleanup(h);
	if (ret == 0)
		hasher_final(&s.hs, digest);
	else
		hasher_free(&s.hs);
	return ret < 0 ? cerr_prefix(e, "GET %s", url) : 0;
}
