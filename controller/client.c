// SPDX-License-Identifier: Apache-2.0
/* One cell over mutual TLS, the way Kip's nodeclient drives it: the cell is
 * verified against the controller's own CA only, by the name MilpaNode
 * (never by IP: the URL names MilpaNode and CURLOPT_CONNECT_TO sends the
 * connection to the cell's address), 10 s to connect, 120 s per call, 3 s
 * for ping, one kept-alive connection per cell. */
#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cellctl.h"
#include "cleanup.h"
#include "jsonutil.h"
#include "util.h"

#define CALL_TIMEOUT_MS 120000L
#define CONNECT_TIMEOUT_MS 10000L
#define PING_TIMEOUT_MS 3000L
#define REPLY_MAX (64u << 20)

static int split_addr(const char *addr, char **host, int *port, struct cerr *e)
{
	const char *colon;
	int64_t p = CTL_PORT;

	if (!addr || !*addr)
		return cerr_set(e, EINVAL, "no cell address (--cell ADDR)");
	if (addr[0] == '[') {
		const char *end = strchr(addr, ']');
		if (!end)
			return cerr_set(e, EINVAL, "bad address %s", addr);
		*host = xstrndup(addr + 1, (size_t)(end - addr - 1));
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			goto bad;
	} else if ((colon = strrchr(addr, ':')) && strchr(addr, ':') == colon) {
		*host = xstrndup(addr, (size_t)(colon - addr));
	} else {
		*host = xstrdup(addr); /* a bare IPv6 address or a name */
		colon = NULL;
	}
	if (colon && parse_int64(colon + 1, 1, 65535, &p, e) < 0)
		goto bad;
	*port = (int)p;
	return 0;
bad:
	free(*host);
	*host = NULL;
	return cerr_set(e, EINVAL, "bad cell address %s (HOST[:PORT])", addr);
}

int cell_init(struct ctl_cell *c, const char *addr, const char *pki_dir,
	      struct cerr *e)
{
	bool v6;

	memset(c, 0, sizeof(*c));
	if (!pki_dir)
		return cerr_set(e, EINVAL, "no PKI directory (--pki DIR)");
	if (split_addr(addr, &c->host, &c->port, e) < 0)
		return -1;
	v6 = strchr(c->host, ':') != NULL;
	c->ca = xasprintf("%s/ca.crt", pki_dir);
	c->cert = xasprintf("%s/client.crt", pki_dir);
	c->key = xasprintf("%s/client.key", pki_dir);
	c->base = xasprintf("https://%s:%d/", CTL_SERVER_NAME, c->port);
	c->connect_to =
	    xasprintf("%s:%d:%s%s%s:%d", CTL_SERVER_NAME, c->port,
		      v6 ? "[" : "", c->host, v6 ? "]" : "", c->port);
	c->timeout_ms = CALL_TIMEOUT_MS;
	c->curl = curl_easy_init();
	if (!c->curl) {
		cell_free(c);
		return cerr_set(e, ENOMEM, "curl_easy_init");
	}
	return 0;
}

void cell_free(struct ctl_cell *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->host);
	free(c->ca);
	free(c->cert);
	free(c->key);
	free(c->base);
	free(c->connect_to);
	memset(c, 0, sizeof(*c));
}

int cell_curl_setup(struct ctl_cell *c, void *curl, const char *url,
		    struct cerr *e)
{
	struct curl_slist *ct = curl_slist_append(NULL, c->connect_to);
	CURL *h = curl;

	/* The list must outlive the handle's transfers; keep one per cell by
	 * hanging it on the handle's private pointer. */
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CONNECT_TO, ct);
	curl_easy_setopt(h, CURLOPT_PRIVATE, ct);
	curl_easy_setopt(h, CURLOPT_CAINFO, c->ca);
	curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert);
	curl_easy_setopt(h, CURLOPT_SSLKEY, c->key);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(h, CURLOPT_SSLVERSION, CURL_SSLVERSION_TLSv1_2);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
	(void)e;
	return 0;
}

static void drop_connect_to(CURL *h)
{
	struct curl_slist *ct = NULL;

	curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&ct);
	curl_slist_free_all(ct);
	curl_easy_setopt(h, CURLOPT_PRIVATE, NULL);
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct buf *b = ud;
	struct cerr e = {0};

	return buf_append(b, p, sz * n, &e) < 0 ? 0 : sz * n;
}

int cell_request(struct ctl_cell *c, const char *method, const char *path,
		 const char *ctype, const void *body, size_t len,
		 long timeout_ms, struct buf *out, long *status, struct cerr *e)
{
	cleanup_free char *url = xasprintf("%srest/v1/%s", c->base, path);
	cleanup_free char *cth =
	    ctype ? xasprintf("Content-Type: %s", ctype) : NULL;
	struct curl_slist *hdrs = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *h = c->curl;
	CURLcode rc;

	curl_easy_reset(h);
	cell_curl_setup(c, h, url, e);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
			 timeout_ms > 0 ? timeout_ms : c->timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	if (!strcmp(method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POST, 1L);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)len);
	}
	if (cth)
		hdrs = curl_slist_append(hdrs, cth);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	rc = curl_easy_perform(h);
	curl_slist_free_all(hdrs);
	drop_connect_to(h);
	if (rc != CURLE_OK)
		return cerr_set(
		    e,
		    rc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT : ECONNREFUSED,
		    "%s %s (%s:%d): %s", method, path, c->host, c->port,
		    *errbuf ? errbuf : curl_easy_strerror(rc));
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	return 0;
}

static int not_ok(struct cerr *e, const char *method, const char *path,
		  long status, const struct buf *b)
{
	int n = (int)(b->len > 300 ? 300 : b->len);

	while (n > 0 && (b->data[n - 1] == '\n' || b->data[n - 1] == '\r'))
		n--;
	return cerr_set(e, EREMOTEIO, "%s %s: HTTP %ld: %.*s", method, path,
			status, n, b->data ? b->data : "");
}

int cell_get_ok(struct ctl_cell *c, const char *path, long timeout_ms,
		struct buf *out, struct cerr *e)
{
	long st = 0;

	if (cell_request(c, "GET", path, NULL, NULL, 0, timeout_ms, out, &st,
			 e) < 0)
		return -1;
	return st == 200 ? 0 : not_ok(e, "GET", path, st, out);
}

int cell_ping(struct ctl_cell *c, struct cerr *e)
{
	struct buf b;
	int r;

	buf_init(&b, 4096);
	r = cell_get_ok(c, "ping", PING_TIMEOUT_MS, &b, e);
	if (r == 0 && strcasecmp(b.data ? b.data : "", "pong") != 0)
		r = cerr_set(e, EPROTO, "ping: expected pong, got \"%.40s\"",
			     b.data ? b.data : "");
	buf_free(&b);
	return r;
}

json_t *cell_status(struct ctl_cell *c, struct cerr *e)
{
	struct buf b;
	long st = 0;
	json_t *j = NULL;

	buf_init(&b, REPLY_MAX);
	/* Kip does not check this status code; it parses the body. */
	if (cell_request(c, "GET", "status", NULL, NULL, 0, 0, &b, &st, e) ==
	    0) {
		j = json_parse_object(b.data ? b.data : "", b.len, e);
		if (!j)
			cerr_prefix(e, "status (HTTP %ld)", st);
	}
	buf_free(&b);
	return j;
}

int cell_update_pod(struct ctl_cell *c, const json_t *params, struct cerr *e)
{
	cleanup_free char *body = json_dumps(params, JSON_COMPACT);
	struct buf b;
	long st = 0;
	int r;

	buf_init(&b, REPLY_MAX);
	r = cell_request(c, "POST", "updatepod", "application/json", body,
			 strlen(body), 0, &b, &st, e);
	if (r == 0 && st != 200)
		r = not_ok(e, "POST", "updatepod", st, &b);
	buf_free(&b);
	return r;
}

int cell_deploy(struct ctl_cell *c, const char *pod, const char *name,
		const void *pkg, size_t len, struct cerr *e)
{
	cleanup_free char *path = xasprintf("deploy/%s/%s", pod, name);
	cleanup_free char *url = xasprintf("%srest/v1/%s", c->base, path);
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *h = c->curl;
	curl_mime *mime;
	curl_mimepart *part;
	struct buf b;
	long st = 0;
	CURLcode rc;
	int r = 0;

	buf_init(&b, REPLY_MAX);
	curl_easy_reset(h);
	cell_curl_setup(c, h, url, e);
	mime = curl_mime_init(h);
	part = curl_mime_addpart(mime);
	curl_mime_name(part, "package");
	curl_mime_filename(part, name);
	curl_mime_type(part, "application/octet-stream");
	curl_mime_data(part, pkg, len);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	rc = curl_easy_perform(h);
	drop_connect_to(h);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, NULL);
	curl_mime_free(mime);
	if (rc != CURLE_OK)
		r = cerr_set(e, ECONNREFUSED, "POST %s (%s:%d): %s", path,
			     c->host, c->port,
			     *errbuf ? errbuf : curl_easy_strerror(rc));
	else if (curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st), st != 200)
		r = not_ok(e, "POST", path, st, &b);
	buf_free(&b);
	return r;
}
