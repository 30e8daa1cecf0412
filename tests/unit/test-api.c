// SPDX-License-Identifier: Apache-2.0
/* The REST API in-process: a fake backend, throwaway certificates made
 * here with OpenSSL, libcurl with client certificates as the HTTP client
 * and a small websocket client of our own over OpenSSL.
 *
 * CELL_API_BENCH=<seconds> also runs the load measurement (status
 * requests per second over kept-alive mutual TLS, 16 clients); without it
 * a short run checks that 16 kept-alive clients all get through. */
#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "api.h"
#include "filetail.h"
#include "parttable.h"
#include "procspawn.h"
#include "fsutil.h"
#include "util.h"

static char dir[256];  /* everything of this test lives here */
static char boot[300]; /* ca.crt, server.crt, server.key */
static int port;

/* ======================================================================
 * PKI
 * ====================================================================== */

static EVP_PKEY *new_key(void)
{
	return EVP_EC_gen("P-256");
}

static void add_ext(X509 *c, X509 *issuer, int nid, const char *val)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ex;

	X509V3_set_ctx(&ctx, issuer, c, NULL, NULL, 0);
	ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, val);
	X509_add_ext(c, ex, -1);
	X509_EXTENSION_free(ex);
}

/* A certificate for key, signed by ikey (issuer NULL: self-signed), valid
 * from `from` to `to` days relative to now. */
static X509 *make_cert(EVP_PKEY *key, X509 *issuer, EVP_PKEY *ikey,
		       const char *cn, const char *eku, long from, long to)
{
	X509 *c = X509_new();
	X509_NAME *n = X509_NAME_new();
	static long serial = 1;

	X509_set_version(c, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
	X509_gmtime_adj(X509_getm_notBefore(c), from * 86400);
	X509_gmtime_adj(X509_getm_notAfter(c), to * 86400);
	X509_set_pubkey(c, key);
	X509_NAME_add_entry_by_txt(n, "O", MBSTRING_ASC,
				   (const unsigned char *)"Elotl", -1, -1, 0);
	X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
				   (const unsigned char *)cn, -1, -1, 0);
	X509_set_subject_name(c, n);
	X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : n);
	X509_NAME_free(n);
	if (!issuer) {
		add_ext(c, c, NID_basic_constraints, "critical,CA:TRUE");
		add_ext(c, c, NID_key_usage, "critical,keyCertSign,cRLSign");
	} else {
		add_ext(c, issuer, NID_basic_constraints, "critical,CA:FALSE");
		add_ext(c, issuer, NID_key_usage,
			"critical,digitalSignature,keyAgreement");
		add_ext(c, issuer, NID_ext_key_usage, eku);
		if (!strcmp(eku, "serverAuth"))
			add_ext(c, issuer, NID_subject_alt_name,
				"DNS:MilpaNode");
	}
	X509_sign(c, issuer ? ikey : key, EVP_sha256());
	return c;
}

static void write_cert(const char *path, X509 *c)
{
	FILE *f = fopen(path, "w");
	PEM_write_X509(f, c);
	fclose(f);
}

static void write_key(const char *path, EVP_PKEY *k)
{
	FILE *f = fopen(path, "w");
	PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
	fclose(f);
	chmod(path, 0600);
}

static char *dpath(const char *name)
{
	return xasprintf("%s/%s", dir, name);
}

/* boot/ca.crt, boot/server.{crt,key}; client, expired and other-CA client
 * certificates in dir. */
static void make_pki(void)
{
	EVP_PKEY *ca = new_key(), *ca2 = new_key(), *k;
	X509 *cac = make_cert(ca, NULL, NULL, "Milpa Server CA", "", -1, 3650);
	X509 *ca2c =
	    make_cert(ca2, NULL, NULL, "Milpa Server CA", "", -1, 3650);
	struct {
		const char *name;
		X509 *issuer;
		EVP_PKEY *ikey;
		const char *eku;
		long from, to;
	} leaves[] = {
	    {"boot/server", cac, ca, "serverAuth", -1, 365},
	    {"client", cac, ca, "clientAuth", -1, 365},
	    {"expired", cac, ca, "clientAuth", -10, -1},
	    {"other", ca2c, ca2, "clientAuth", -1, 365},
	    {"serverascli", cac, ca, "serverAuth", -1, 365},
	};
	char *p;

	p = dpath("boot/ca.crt");
	write_cert(p, cac);
	free(p);
	for (size_t i = 0; i < ARRAY_SIZE(leaves); i++) {
		X509 *c;
		char *cp = xasprintf("%s/%s.crt", dir, leaves[i].name);
		char *kp = xasprintf("%s/%s.key", dir, leaves[i].name);

		k = new_key();
		c = make_cert(k, leaves[i].issuer, leaves[i].ikey, "MilpaNode",
			      leaves[i].eku, leaves[i].from, leaves[i].to);
		write_cert(cp, c);
		write_key(kp, k);
		X509_free(c);
		EVP_PKEY_free(k);
		free(cp);
		free(kp);
	}
	X509_free(cac);
	X509_free(ca2c);
	EVP_PKEY_free(ca);
	EVP_PKEY_free(ca2);
}

/* ======================================================================
 * the fake backend
 * ====================================================================== */

static pthread_mutex_t fake_mu = PTHREAD_MUTEX_INITIALIZER;
static int fake_updates;
static bool fake_running = true;
static pid_t fake_last_pid;

static int fake_update(void *ctx, const char *body, size_t len, struct cerr *e)
{
	json_error_t je;
	json_t *j = json_loadb(body, len, 0, &je);

	(void)ctx;
	if (!j || !json_is_object(j)) {
		json_decref(j);
		return cerr_set(e, EINVAL, "malformed PodParameters: %s",
				je.text);
	}
	json_decref(j);
	pthread_mutex_lock(&fake_mu);
	fake_updates++;
	pthread_mutex_unlock(&fake_mu);
	return 0;
}

static char *fake_status(void *ctx)
{
	bool run;

	(void)ctx;
	pthread_mutex_lock(&fake_mu);
	run = fake_running;
	pthread_mutex_unlock(&fake_mu);
	return xasprintf("{\"unitStatus\":[{\"name\":\"app\",\"state\":{%s}},"
			 "{\"name\":\"side\",\"state\":{\"running\":{}}}],"
			 "\"initUnitStatus\":[],\"podIP\":\"127.0.0.1\"}",
			 run ? "\"running\":{\"startedAt\":\"2024-01-01T00:00:"
			       "00Z\"}"
			     : "\"terminated\":{\"exitCode\":0}");
}

/* The same answers as fake_status, typed. */
static int fake_unit_running(void *ctx, const char *unit)
{
	int r;

	(void)ctx;
	if (!strcmp(unit, "side"))
		return 1;
	if (*unit && strcmp(unit, "app") != 0)
		return -1;
	pthread_mutex_lock(&fake_mu);
	r = fake_running;
	pthread_mutex_unlock(&fake_mu);
	return r;
}

static char *fake_pod_ip(void *ctx)
{
	(void)ctx;
	return xstrdup("127.0.0.1");
}

static char *fake_log_path(void *ctx, const char *unit, bool previous,
			   struct cerr *e)
{
	(void)ctx;
	if (!*unit)
		unit = "app";
	if (strcmp(unit, "app") != 0 && strcmp(unit, "side") != 0) {
		cerr_set(e, ENOENT, "no unit '%s'", unit);
		return NULL;
	}
	return xasprintf("%s/logs/%s%s.log", dir, unit, previous ? ".0" : "");
}

static int fake_exec(void *ctx, const struct api_exec_req *req,
		     const int stdio[3], struct cerr *e)
{
	pid_t pid;
	int fd;

	(void)ctx;
	fd = spawn_pidfd(req->command, NULL, stdio,
			 SPAWN_SETSID | (req->tty ? SPAWN_TTY : 0), &pid, e);
	pthread_mutex_lock(&fake_mu);
	fake_last_pid = fd >= 0 ? pid : 0;
	pthread_mutex_unlock(&fake_mu);
	return fd;
}

static const struct api_backend fake = {
    .update_pod = fake_update,
    .status_json = fake_status,
    .unit_running = fake_unit_running,
    .pod_ip = fake_pod_ip,
    .log_path = fake_log_path,
    .exec_start = fake_exec,
};

/* ======================================================================
 * HTTP client
 * ====================================================================== */

struct resp {
	long code;
	CURLcode rc;
	struct buf body;
	long conns;
};

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
	struct resp *r = ud;
	struct cerr e = {0};

	buf_append(&r->body, p, sz * n, &e);
	return sz * n;
}

/* cert: a basename in dir ("client"), NULL for none. */
static CURL *client(const char *cert)
{
	CURL *c = curl_easy_init();
	static char resolve[64];
	static struct curl_slist *rl;
	char *ca = dpath("boot/ca.crt");

	if (!rl) {
		snprintf(resolve, sizeof(resolve), "MilpaNode:%d:127.0.0.1",
			 port);
		rl = curl_slist_append(NULL, resolve);
	}
	curl_easy_setopt(c, CURLOPT_RESOLVE, rl);
	curl_easy_setopt(c, CURLOPT_CAINFO, ca);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
	if (cert) {
		char *cp = xasprintf("%s/%s.crt", dir, cert);
		char *kp = xasprintf("%s/%s.key", dir, cert);
		curl_easy_setopt(c, CURLOPT_SSLCERT, cp);
		curl_easy_setopt(c, CURLOPT_SSLKEY, kp);
		free(cp);
		free(kp);
	}
	free(ca);
	return c;
}

static void req(CURL *c, const char *method, const char *path, const char *body,
		size_t blen, struct resp *r)
{
	char *url = xasprintf("https://MilpaNode:%d/rest/v1/%s", port, path);

	memset(r, 0, sizeof(*r));
	buf_init(&r->body, 0);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)blen);
	} else {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	}
	r->rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
	curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &r->conns);
	if (!r->body.data)
		buf_append(&r->body, "", 0, &(struct cerr){0});
	free(url);
}

/* One request on a fresh client with the usual certificate. */
static void get1(const char *path, struct resp *r)
{
	CURL *c = client("client");

	req(c, "GET", path, NULL, 0, r);
	curl_easy_cleanup(c);
}

/* ======================================================================
 * TLS
 * ====================================================================== */

static void test_tls(void)
{
	static const struct {
		const char *cert;
		const char *what;
	} bad[] = {
	    {NULL, "no client certificate"},
	    {"other", "a certificate of another CA"},
	    {"expired", "an expired certificate"},
	    {"serverascli", "a certificate without clientAuth"},
	};
	struct resp r;
	int before;

	pthread_mutex_lock(&fake_mu);
	before = fake_updates;
	pthread_mutex_unlock(&fake_mu);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		for (int v = 0; v < 2; v++) {
			CURL *c = client(bad[i].cert);

			/* TLS 1.2 finishes the handshake only after the server
			 * has checked the client: a refusal is a handshake
			 * error there. With 1.3 the client finishes first and
			 * reads the alert afterwards. */
			if (v == 0)
				curl_easy_setopt(
				    c, CURLOPT_SSLVERSION,
				    CURL_SSLVERSION_TLSv1_2 |
					CURL_SSLVERSION_MAX_TLSv1_2);
			req(c, "POST", "updatepod", "{}", 2, &r);
			ok(r.rc != CURLE_OK && r.code == 0,
			   "TLS 1.%d with %s: refused (curl %d, HTTP %ld)",
			   2 + v, bad[i].what, r.rc, r.code);
			/* 35: the server's alert; 60: curl names the alert
			 * "certificate expired" as a verification failure. */
			if (v == 0)
				ok(r.rc == CURLE_SSL_CONNECT_ERROR ||
				       r.rc == CURLE_PEER_FAILED_VERIFICATION,
				   "TLS 1.2 with %s: refused in the handshake "
				   "(curl %d)",
				   bad[i].what, r.rc);
			buf_free(&r.body);
			curl_easy_cleanup(c);
		}
	}
	pthread_mutex_lock(&fake_mu);
	ok(fake_updates == before, "no refused client reached a handler");
	pthread_mutex_unlock(&fake_mu);
	{
		CURL *c = client("client");
		curl_easy_setopt(c, CURLOPT_SSLVERSION,
				 CURL_SSLVERSION_TLSv1_1 |
				     CURL_SSLVERSION_MAX_TLSv1_1);
		req(c, "GET", "ping", NULL, 0, &r);
		ok(r.rc != CURLE_OK, "TLS 1.1 is refused (curl %d)", r.rc);
		buf_free(&r.body);
		curl_easy_cleanup(c);
	}
	{
		CURL *c = client("client");
		curl_easy_setopt(c, CURLOPT_SSLVERSION,
				 CURL_SSLVERSION_TLSv1_2 |
				     CURL_SSLVERSION_MAX_TLSv1_2);
		req(c, "GET", "ping", NULL, 0, &r);
		ok(r.rc == CURLE_OK && r.code == 200, "TLS 1.2 with a good "
						      "client certificate");
		buf_free(&r.body);
		curl_easy_cleanup(c);
	}
}

/* ======================================================================
 * simple endpoints
 * ====================================================================== */

static void test_simple(void)
{
	CURL *c = client("client");
	struct resp r;
	struct buf big;
	long conns = 0;

	req(c, "GET", "ping", NULL, 0, &r);
	ok(r.code == 200, "ping: 200");
	is_str(r.body.data, "pong", "ping: pong");
	conns += r.conns;
	buf_free(&r.body);
	req(c, "GET", "version", NULL, 0, &r);
	ok(r.code == 200 && r.body.len > 0, "version: 200 '%s'", r.body.data);
	conns += r.conns;
	buf_free(&r.body);
	req(c, "POST", "updatepod",
	    "{\"spec\":{\"units\":[]},\"PodName\":\"ns_p\",\"Unknown\":1}", 50,
	    &r);
	ok(r.code == 200, "updatepod: 200 (unknown fields are ignored)");
	conns += r.conns;
	buf_free(&r.body);
	req(c, "POST", "updatepod", "{\"spec\": [", 10, &r);
	ok(r.code == 400 && strstr(r.body.data, "malformed"),
	   "updatepod with bad JSON: 400 with the reason ('%s')", r.body.data);
	conns += r.conns;
	buf_free(&r.body);
	req(c, "GET", "status", NULL, 0, &r);
	ok(r.code == 200 && strstr(r.body.data, "\"unitStatus\""),
	   "status: 200 JSON");
	conns += r.conns;
	buf_free(&r.body);
	ok(conns == 1, "five requests on one kept-alive connection (%ld)",
	   conns);
	req(c, "GET", "nosuch", NULL, 0, &r);
	ok(r.code == 404 && strstr(r.body.data, "no such endpoint"),
	   "unknown route: 404 in plain text");
	buf_free(&r.body);
	req(c, "GET", "../../etc/passwd", NULL, 0, &r);
	ok(r.code == 404, "a path outside the API: 404");
	buf_free(&r.body);
	req(c, "GET", "updatepod", NULL, 0, &r);
	ok(r.code == 405, "GET updatepod: 405");
	buf_free(&r.body);
	req(c, "GET", "exec/", NULL, 0, &r);
	ok(r.code == 400, "exec/ without a websocket upgrade: 400");
	buf_free(&r.body);
	buf_init(&big, 0);
	for (size_t i = 0; i < (9u << 20) / 16; i++)
		buf_append(&big, "{\"a\":\"bbbbbbb\"} ", 16, &(struct cerr){0});
	req(c, "POST", "updatepod", big.data, big.len, &r);
	ok(r.code == 413, "updatepod over 8 MiB: 413 (got %ld, curl %d)",
	   r.code, r.rc);
	buf_free(&r.body);
	req(c, "GET", "ping", NULL, 0, &r);
	ok(r.code == 200, "and the agent still answers");
	buf_free(&r.body);
	buf_free(&big);
	curl_easy_cleanup(c);
}

/* Requests that break every rule, on a raw TLS connection. */
static SSL_CTX *cli_ctx(const char *cert)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	char *ca = dpath("boot/ca.crt");

	SSL_CTX_load_verify_locations(ctx, ca, NULL);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	if (cert) {
		char *cp = xasprintf("%s/%s.crt", dir, cert);
		char *kp = xasprintf("%s/%s.key", dir, cert);
		SSL_CTX_use_certificate_file(ctx, cp, SSL_FILETYPE_PEM);
		SSL_CTX_use_PrivateKey_file(ctx, kp, SSL_FILETYPE_PEM);
		free(cp);
		free(kp);
	}
	free(ca);
	return ctx;
}

static SSL *tls_connect(SSL_CTX *ctx, int *fdp)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	SSL *ssl;
	struct timeval tv = {.tv_sec = 2};

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return NULL;
	}
	ssl = SSL_new(ctx);
	SSL_set_fd(ssl, fd);
	SSL_set_tlsext_host_name(ssl, "MilpaNode");
	SSL_set1_host(ssl, "MilpaNode");
	if (SSL_connect(ssl) != 1) {
		SSL_free(ssl);
		close(fd);
		return NULL;
	}
	*fdp = fd;
	return ssl;
}

/* Send raw bytes, read whatever comes back (until close or timeout). */
static void raw_exchange(SSL_CTX *ctx, const char *data, size_t n,
			 struct buf *out)
{
	int fd;
	SSL *ssl = tls_connect(ctx, &fd);
	char b[4096];
	int r;

	buf_init(out, 1 << 20);
	if (!ssl)
		return;
	SSL_write(ssl, data, (int)n);
	while ((r = SSL_read(ssl, b, sizeof(b))) > 0)
		buf_append(out, b, (size_t)r, &(struct cerr){0});
	SSL_free(ssl);
	close(fd);
	buf_append(out, "", 0, &(struct cerr){0});
}

static void test_malformed(void)
{
	SSL_CTX *ctx = cli_ctx("client");
	struct buf out;
	char *hdrs = xmalloc(40000);
	static const char *const reqs[] = {
	    "GARBAGE\r\n\r\n",
	    "GET /rest/v1/ping HTTP/9.9\r\n\r\n",
	    "POST /rest/v1/updatepod HTTP/1.1\r\nContent-Length: "
	    "-5\r\nConnection: close\r\n\r\n",
	    "POST /rest/v1/updatepod HTTP/1.1\r\nContent-Length: 100\r\n"
	    "Connection: close\r\n\r\n{\"truncated",
	    "POST /rest/v1/updatepod HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
	    "Connection: close\r\n\r\nzz\r\n",
	    "GET /rest/v1/logs/app?lines=-1 HTTP/1.1\r\nConnection: "
	    "close\r\n\r\n",
	    "GET /rest/v1/logs/app?lines=1e9999 HTTP/1.1\r\nConnection: "
	    "close\r\n\r\n",
	    "GET /rest/v1/file/?path=%00 HTTP/1.1\r\nConnection: close\r\n\r\n",
	    "GET /rest/v1/logs/%2e%2e%2fetc HTTP/1.1\r\nConnection: "
	    "close\r\n\r\n",
	    "POST /rest/v1/deploy/p/x HTTP/1.1\r\nContent-Type: "
	    "multipart/form-data; boundary=b\r\nContent-Length: 20\r\n"
	    "Connection: close\r\n\r\n--b\r\nhalf a part",
	    "GET /rest/v1/exec/ HTTP/1.1\r\nUpgrade: websocket\r\nConnection: "
	    "Upgrade\r\nSec-WebSocket-Version: 13\r\n\r\n",
	};
	struct resp r;

	for (size_t i = 0; i < ARRAY_SIZE(reqs); i++) {
		raw_exchange(ctx, reqs[i], strlen(reqs[i]), &out);
		ok(1, "malformed request %zu answered: %.40s", i,
		   out.data && out.len ? out.data : "(closed)");
		buf_free(&out);
	}
	/* 40 kB of headers: over civetweb's 16 KiB cap. */
	memcpy(hdrs, "GET /rest/v1/ping HTTP/1.1\r\n", 28);
	for (size_t i = 28; i + 20 <= 39988; i += 20)
		memcpy(hdrs + i, "X-Filler: aaaaaaaa\r\n", 20);
	memcpy(hdrs + 39988, "\r\n\r\n", 4);
	raw_exchange(ctx, hdrs, 39992, &out);
	ok(!out.len || strstr(out.data, " 413 ") || strstr(out.data, " 400 "),
	   "oversized headers refused");
	buf_free(&out);
	free(hdrs);
	SSL_CTX_free(ctx);
	get1("ping", &r);
	ok(r.code == 200, "after all that, ping still answers");
	buf_free(&r.body);
}

/* ======================================================================
 * file/ and logs/
 * ====================================================================== */

static void write_file(const char *path, const char *data, size_t n)
{
	struct cerr e = {0};

	fs_write_atomic(path, data, n, 0644, &e);
}

static void test_file(void)
{
	char *p = dpath("f.txt"), *url;
	struct resp r;
	struct buf big;
	int fd;

	write_file(p, "one\ntwo\nthree\nfour\n", 19);
	url = xasprintf("file/?path=%s", p);
	get1(url, &r);
	ok(r.code == 200 && !strcmp(r.body.data, "one\ntwo\nthree\nfour\n"),
	   "file/: whole small file");
	buf_free(&r.body);
	free(url);
	url = xasprintf("file/?path=%s&lines=2", p);
	get1(url, &r);
	is_str(r.body.data, "three\nfour\n", "file/ lines=2");
	buf_free(&r.body);
	free(url);
	url = xasprintf("file/?path=%s&bytes=5", p);
	get1(url, &r);
	is_str(r.body.data, "four\n", "file/ bytes=5");
	buf_free(&r.body);
	free(url);
	get1("file/", &r);
	ok(r.code == 400 && strstr(r.body.data, "path"),
	   "file/ without path: 400");
	buf_free(&r.body);
	url = xasprintf("file/?path=%s/missing", dir);
	get1(url, &r);
	ok(r.code == 404, "file/ of a missing file: 404");
	buf_free(&r.body);
	free(url);
	url = xasprintf("file/?path=%s", dir);
	get1(url, &r);
	ok(r.code == 400, "file/ of a directory: 400");
	buf_free(&r.body);
	free(url);
	get1("file/?path=/dev/zero", &r);
	ok(r.code == 400, "file/ of a device: 400 (it would never end)");
	buf_free(&r.body);
	/* 12 MiB: the default is the last 4096 bytes, the cap 10 MiB. */
	free(p);
	p = dpath("big.txt");
	buf_init(&big, 0);
	for (int i = 0; i < 12 * 1024; i++) {
		char line[1024];
		memset(line, 'a' + i % 26, sizeof(line));
		line[1023] = '\n';
		buf_append(&big, line, sizeof(line), &(struct cerr){0});
	}
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	fs_write_all(fd, big.data, big.len);
	close(fd);
	url = xasprintf("file/?path=%s", p);
	get1(url, &r);
	ok(r.code == 200 && r.body.len == 4096, "file/ default: last 4096 "
						"bytes");
	buf_free(&r.body);
	free(url);
	url = xasprintf("file/?path=%s&bytes=99999999999", p);
	get1(url, &r);
	ok(r.code == 200 && r.body.len == FILE_TAIL_MAX,
	   "file/ capped at 10 MiB (%zu)", r.body.len);
	buf_free(&r.body);
	free(url);
	url = xasprintf("file/?path=%s&lines=1000000", p);
	get1(url, &r);
	ok(r.code == 200 && r.body.len <= FILE_TAIL_MAX,
	   "file/ lines are capped at 10 MiB too");
	buf_free(&r.body);
	free(url);
	url = xasprintf("file/?path=%s&bytes=abc", p);
	get1(url, &r);
	ok(r.code == 400, "file/ bytes=abc: 400");
	buf_free(&r.body);
	free(url);
	buf_free(&big);
	free(p);
}

static const char cri_log[] =
    "2024-01-01T00:00:00.000000001Z stdout F first line\n"
    "2024-01-01T00:00:01.000000001Z stderr F an error\n"
    "2024-01-01T00:00:02.000000001Z stdout P split \n"
    "2024-01-01T00:00:03.000000001Z stdout F line\n"
    "2024-01-01T00:00:04.000000001Z stdout F last line\n";

static void test_logs(void)
{
	char *p = dpath("logs/app.log");
	struct resp r;

	write_file(p, cri_log, sizeof(cri_log) - 1);
	get1("logs/app", &r);
	is_str(r.body.data, "first line\nan error\nsplit line\nlast line\n",
	       "logs: plain lines, partial lines joined");
	buf_free(&r.body);
	get1("logs/", &r);
	ok(r.code == 200 && strstr(r.body.data, "last line"),
	   "logs/ with no unit: the first unit");
	buf_free(&r.body);
	get1("logs/app?lines=2", &r);
	is_str(r.body.data, "split line\nlast line\n", "logs lines=2");
	buf_free(&r.body);
	get1("logs/app?bytes=10", &r);
	is_str(r.body.data, "last line\n", "logs bytes=10");
	buf_free(&r.body);
	get1("logs/app?lines=2&metadata=1", &r);
	is_str(r.body.data,
	       "2024-01-01T00:00:02.000000001Z stdout F split line\n"
	       "2024-01-01T00:00:04.000000001Z stdout F last line\n",
	       "logs metadata=1: CRI lines, partials merged");
	buf_free(&r.body);
	get1("logs/app%3Flines=1&metadata=1", &r);
	is_str(r.body.data,
	       "2024-01-01T00:00:04.000000001Z stdout F last "
	       "line\n",
	       "logs: the query inside the path (%%3F) works too");
	buf_free(&r.body);
	get1("logs/nosuch", &r);
	ok(r.code == 404, "logs of an unknown unit: 404");
	buf_free(&r.body);
	get1("logs/side", &r);
	ok(r.code == 200 && r.body.len == 0,
	   "logs of a unit that has not written yet: 200, empty");
	buf_free(&r.body);
	get1("logs/app?follow=1", &r);
	ok(r.code == 400, "follow without a websocket: 400");
	buf_free(&r.body);
	free(p);
}

/* ======================================================================
 * deploy/
 * ====================================================================== */

struct tar_ent {
	const char *name;
	const char *data;  /* regular file contents */
	const char *link;  /* symlink target */
	const char *hlink; /* hardlink target */
	bool dir;
};

static void make_tgz(const struct tar_ent *ents, size_t n, struct buf *out)
{
	struct archive *a = archive_write_new();
	size_t cap = 1 << 20, used = 0;
	char *mem = xmalloc(cap);

	archive_write_add_filter_gzip(a);
	archive_write_set_format_pax_restricted(a);
	archive_write_open_memory(a, mem, cap, &used);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();

		archive_entry_set_pathname(e, ents[i].name);
		archive_entry_set_perm(e, ents[i].dir ? 0755 : 0640);
		if (ents[i].dir) {
			archive_entry_set_filetype(e, AE_IFDIR);
		} else if (ents[i].link) {
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_symlink(e, ents[i].link);
		} else if (ents[i].hlink) {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_hardlink(e, ents[i].hlink);
		} else {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_size(
			    e, (la_int64_t)strlen(ents[i].data));
		}
		archive_write_header(a, e);
		if (ents[i].data)
			archive_write_data(a, ents[i].data,
					   strlen(ents[i].data));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	buf_init(out, 0);
	buf_append(out, mem, used, &(struct cerr){0});
	free(mem);
}

static void deploy(const char *path, const void *pkg, size_t n,
		   const char *field, struct resp *r)
{
	CURL *c = client("client");
	curl_mime *m = curl_mime_init(c);
	curl_mimepart *part = curl_mime_addpart(m);
	char *url = xasprintf("https://MilpaNode:%d/rest/v1/%s", port, path);

	curl_mime_name(part, field);
	curl_mime_filename(part, "pkg.tar.gz");
	curl_mime_data(part, pkg, n);
	memset(r, 0, sizeof(*r));
	buf_init(&r->body, 0);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_MIMEPOST, m);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	r->rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->code);
	buf_append(&r->body, "", 0, &(struct cerr){0});
	curl_mime_free(m);
	curl_easy_cleanup(c);
	free(url);
}

static void test_deploy(void)
{
	static const struct tar_ent good[] = {
	    {.name = "./ROOTFS/etc", .dir = true},
	    {.name = "./ROOTFS/etc/resolv.conf",
	     .data = "nameserver 10.0.0.2\n"},
	    {.name = "./ROOTFS/link", .link = "ROOTFS/etc/resolv.conf"},
	    {.name = "README", .data = "outside ROOTFS: skipped\n"},
	};
	static const struct tar_ent evil[] = {
	    {.name = "ROOTFS/ok", .data = "fine\n"},
	    {.name = "ROOTFS/../../escaped", .data = "gotcha\n"},
	};
	struct buf pkg;
	struct resp r;
	char *p, got[64] = "";
	ssize_t n;

	make_tgz(good, ARRAY_SIZE(good), &pkg);
	deploy("deploy/ns_pod/resolvconf", pkg.data, pkg.len, "package", &r);
	ok(r.code == 200, "deploy: 200 (%ld %s)", r.code, r.body.data);
	buf_free(&r.body);
	p = dpath("packages/resolvconf/etc/resolv.conf");
	ok(fs_exists(p), "the file landed in packages/resolvconf/etc/");
	free(p);
	p = dpath("packages/resolvconf/..data/link"); /* agent/pod/pkgswap.c */
	n = readlink(p, got, sizeof(got) - 1);
	got[n > 0 ? n : 0] = '\0';
	is_str(got, "etc/resolv.conf", "a ROOTFS/ link points inside");
	free(p);
	p = dpath("packages/resolvconf/README");
	ok(!fs_exists(p), "entries outside ROOTFS/ are skipped");
	free(p);
	deploy("deploy/ns_pod/../x", pkg.data, pkg.len, "package", &r);
	ok(r.code == 400 || r.code == 404, "deploy to ../x refused (%ld)",
	   r.code);
	buf_free(&r.body);
	deploy("deploy/ns_pod/.hidden", pkg.data, pkg.len, "package", &r);
	ok(r.code == 400, "a name starting with '.' refused");
	buf_free(&r.body);
	deploy("deploy/ns_pod/resolvconf", pkg.data, pkg.len, "other", &r);
	ok(r.code == 400 && strstr(r.body.data, "package"),
	   "no 'package' field: 400 (%s)", r.body.data);
	buf_free(&r.body);
	deploy("deploy/ns_pod/resolvconf", "not a tarball", 13, "package", &r);
	ok(r.code == 400, "not a tar.gz: 400 (%s)", r.body.data);
	buf_free(&r.body);
	buf_free(&pkg);
	make_tgz(evil, ARRAY_SIZE(evil), &pkg);
	deploy("deploy/ns_pod/resolvconf", pkg.data, pkg.len, "package", &r);
	ok(r.code == 400, "a package with ../ is refused: 400 (%s)",
	   r.body.data);
	buf_free(&r.body);
	p = dpath("packages/resolvconf/etc/resolv.conf");
	ok(fs_exists(p), "and the old package is still there");
	free(p);
	p = dpath("escaped");
	ok(!fs_exists(p), "nothing escaped");
	free(p);
	buf_free(&pkg);
	{
		CURL *c = client("client");
		req(c, "POST", "deploy/p/n", "abc", 3, &r);
		ok(r.code == 400, "deploy without multipart: 400");
		buf_free(&r.body);
		curl_easy_cleanup(c);
	}
}

/* ======================================================================
 * a small websocket client
 * ====================================================================== */

struct wsc {
	SSL_CTX *ctx;
	SSL *ssl;
	int fd;
	struct buf in;
};

static int wsc_open(struct wsc *w, const char *path, const char *cert)
{
	char req[1024];
	char b[4096];
	int r;

	memset(w, 0, sizeof(*w));
	buf_init(&w->in, 0);
	w->ctx = cli_ctx(cert);
	w->ssl = tls_connect(w->ctx, &w->fd);
	if (!w->ssl)
		return -1;
	snprintf(req, sizeof(req),
		 "GET /rest/v1/%s HTTP/1.1\r\nHost: MilpaNode\r\n"
		 "Upgrade: websocket\r\nConnection: Upgrade\r\n"
		 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
		 "Sec-WebSocket-Version: 13\r\n"
		 "Content-Type: application/x-www-form-urlencoded\r\n\r\n",
		 path);
	SSL_write(w->ssl, req, (int)strlen(req));
	/* Read the reply headers. */
	while (
	    !memmem(w->in.data ? w->in.data : "", w->in.len, "\r\n\r\n", 4)) {
		r = SSL_read(w->ssl, b, sizeof(b));
		if (r <= 0)
			return -1;
		buf_append(&w->in, b, (size_t)r, &(struct cerr){0});
	}
	{
		char *end = memmem(w->in.data, w->in.len, "\r\n\r\n", 4) + 4;
		size_t hl = (size_t)(end - w->in.data);
		bool up = !strncmp(w->in.data, "HTTP/1.1 101", 12);

		memmove(w->in.data, end, w->in.len - hl);
		w->in.len -= hl;
		return up ? 0 : -1;
	}
}

static void wsc_close(struct wsc *w)
{
	if (w->ssl)
		SSL_free(w->ssl);
	if (w->fd > 0)
		close(w->fd);
	SSL_CTX_free(w->ctx);
	buf_free(&w->in);
	memset(w, 0, sizeof(*w));
}

static int wsc_send(struct wsc *w, int op, const void *p, size_t n)
{
	unsigned char h[14] = {(unsigned char)(0x80 | op)};
	unsigned char mask[4] = {1, 2, 3, 4};
	size_t hl = 2;
	char *f;
	int r;

	if (n < 126) {
		h[1] = (unsigned char)(0x80 | n);
	} else if (n < 65536) {
		h[1] = 0x80 | 126;
		h[2] = (unsigned char)(n >> 8);
		h[3] = (unsigned char)n;
		hl = 4;
	} else {
		h[1] = 0x80 | 127;
		for (int i = 0; i < 8; i++)
			h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
		hl = 10;
	}
	memcpy(h + hl, mask, 4);
	hl += 4;
	f = xmalloc(hl + n);
	memcpy(f, h, hl);
	for (size_t i = 0; i < n; i++)
		f[hl + i] = (char)(((const unsigned char *)p)[i] ^ mask[i % 4]);
	r = SSL_write(w->ssl, f, (int)(hl + n));
	free(f);
	return r > 0 ? 0 : -1;
}

/* One frame: its opcode and payload; -1 on timeout, -3 when the
 * connection is gone. */
static int wsc_recv(struct wsc *w, int *op, struct buf *out, int timeout_ms)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000;

	for (;;) {
		if (w->in.len >= 2) {
			unsigned char *h = (unsigned char *)w->in.data;
			uint64_t len = h[1] & 127;
			size_t hl = 2;

			if (len == 126 && w->in.len >= 4) {
				len = (uint64_t)h[2] << 8 | h[3];
				hl = 4;
			} else if (len == 127 && w->in.len >= 10) {
				len = 0;
				for (int i = 0; i < 8; i++)
					len = len << 8 | h[2 + i];
				hl = 10;
			}
			if ((len < 126 || hl > 2) && w->in.len >= hl + len) {
				*op = h[0] & 15;
				buf_reset(out);
				buf_append(out, w->in.data + hl, (size_t)len,
					   &(struct cerr){0});
				memmove(w->in.data, w->in.data + hl + len,
					w->in.len - hl - (size_t)len);
				w->in.len -= hl + (size_t)len;
				return 0;
			}
		}
		{
			char b[16384];
			struct pollfd p = {.fd = w->fd, .events = POLLIN};
			uint64_t now = now_ns();
			int r;

			if (now >= deadline)
				return -1;
			if (!SSL_pending(w->ssl) &&
			    poll(&p, 1,
				 (int)((deadline - now) / 1000000) + 1) <= 0)
				return -1;
			r = SSL_read(w->ssl, b, sizeof(b));
			if (r <= 0)
				return -3;
			buf_append(&w->in, b, (size_t)r, &(struct cerr){0});
		}
	}
}

static int wsc_send_ch(struct wsc *w, int ch, const char *p, size_t n)
{
	char *f = xmalloc(2 + 4 * (n / 3 + 2));
	int len;

	f[0] = (char)('0' + ch);
	len = EVP_EncodeBlock((unsigned char *)f + 1, (const unsigned char *)p,
			      (int)n);
	len = wsc_send(w, 1, f, (size_t)len + 1);
	free(f);
	return len;
}

/* The next data frame: its channel and decoded payload (pings answered);
 * -1 on timeout, -2 for a close frame, -3 when the connection is gone. */
static int wsc_recv_ch(struct wsc *w, int *ch, struct buf *out, int timeout_ms)
{
	struct buf f;
	int op;

	buf_init(&f, 0);
	for (;;) {
		int r = wsc_recv(w, &op, &f, timeout_ms);

		if (r < 0) {
			buf_free(&f);
			return r;
		}
		if (op == 9) {
			wsc_send(w, 10, f.data, f.len);
			continue;
		}
		if (op == 8) {
			buf_free(&f);
			return -2;
		}
		if (op == 1 || op == 2)
			break;
	}
	*ch = f.len ? f.data[0] - '0' : -1;
	buf_reset(out);
	if (f.len > 1) {
		unsigned char *d = xmalloc(f.len);
		int n = EVP_DecodeBlock(d, (unsigned char *)f.data + 1,
					(int)f.len - 1);
		size_t pad = 0;

		while (pad < 2 && f.data[f.len - 1 - pad] == '=')
			pad++;
		buf_append(out, d, (size_t)n - pad, &(struct cerr){0});
		free(d);
	}
	buf_append(out, "", 0, &(struct cerr){0});
	buf_free(&f);
	return 0;
}

/* Collect channels 1 and 2 until channel 3 (returned) or the end. */
static int collect(struct wsc *w, struct buf *o1, struct buf *o2,
		   int timeout_ms, char *code, size_t csz)
{
	struct buf d;
	int ch, r;

	buf_init(&d, 0);
	buf_init(o1, 0);
	buf_init(o2, 0);
	code[0] = '\0';
	while ((r = wsc_recv_ch(w, &ch, &d, timeout_ms)) == 0) {
		if (ch == 1)
			buf_append(o1, d.data, d.len, &(struct cerr){0});
		else if (ch == 2)
			buf_append(o2, d.data, d.len, &(struct cerr){0});
		else if (ch == 3) {
			snprintf(code, csz, "%s", d.data);
			break;
		}
	}
	buf_append(o1, "", 0, &(struct cerr){0});
	buf_append(o2, "", 0, &(struct cerr){0});
	buf_free(&d);
	return r;
}

/* ======================================================================
 * streams
 * ====================================================================== */

static void test_exec(void)
{
	struct wsc w;
	struct buf o1, o2, d;
	char code[32];
	int ch;
	static const char p1[] =
	    "{\"PodName\":\"ns_p\",\"UnitName\":\"app\",\"Command\":[\"/bin/"
	    "sh\","
	    "\"-c\",\"echo out; echo err >&2; exit 3\"],\"Extra\":true}";
	static const char p2[] =
	    "{\"UnitName\":\"app\",\"Command\":[\"/bin/cat\"],\"Interactive\":"
	    "true}";
	static const char p3[] =
	    "{\"UnitName\":\"app\",\"Command\":[\"/bin/sh\",\"-c\",\"read x; "
	    "stty size; tty >/dev/null && echo tty; echo e >&2\"],"
	    "\"Interactive\":true,\"TTY\":true}";
	pid_t pid;

	ok(wsc_open(&w, "exec/", "client") == 0, "exec: websocket upgrade");
	wsc_send(&w, 1, p1, strlen(p1));
	collect(&w, &o1, &o2, 5000, code, sizeof(code));
	is_str(o1.data, "out\n", "exec: stdout on channel 1");
	is_str(o2.data, "err\n", "exec: stderr on channel 2");
	is_str(code, "3", "exec: the exit code on channel 3");
	buf_free(&o1);
	buf_free(&o2);
	wsc_close(&w);

	ok(wsc_open(&w, "exec/", "client") == 0, "exec cat: upgrade");
	wsc_send(&w, 1, p2, strlen(p2));
	wsc_send_ch(&w, 0, "hello\n", 6);
	buf_init(&d, 0);
	ok(wsc_recv_ch(&w, &ch, &d, 5000) == 0 && ch == 1 &&
	       !strcmp(d.data, "hello\n"),
	   "exec: stdin reaches the process and comes back");
	pthread_mutex_lock(&fake_mu);
	pid = fake_last_pid;
	pthread_mutex_unlock(&fake_mu);
	wsc_close(&w);
	for (int i = 0; i < 100 && kill(pid, 0) == 0; i++)
		usleep(20000);
	ok(pid > 0 && kill(pid, 0) < 0, "closing the socket kills the "
					"process");

	ok(wsc_open(&w, "exec", "client") == 0, "exec tty: upgrade");
	wsc_send(&w, 1, p3, strlen(p3));
	{
		static const char rs[] =
		    "{\"Rows\":33,\"Cols\":101,\"X\":0,\"Y\":0}";
		wsc_send_ch(&w, 4, rs, strlen(rs));
	}
	usleep(100000);
	wsc_send_ch(&w, 0, "\n", 1);
	collect(&w, &o1, &o2, 5000, code, sizeof(code));
	ok(strstr(o1.data, "33 101") != NULL,
	   "exec tty: resized to 33x101 "
	   "('%s')",
	   o1.data);
	ok(strstr(o1.data, "tty") && strstr(o1.data, "e\r\n"),
	   "exec tty: a terminal, stderr on channel 1 too");
	ok(o2.len == 0, "exec tty: nothing on channel 2");
	is_str(code, "0", "exec tty: exit 0");
	buf_free(&o1);
	buf_free(&o2);
	wsc_close(&w);

	ok(wsc_open(&w, "exec/", "client") == 0, "exec bad params: upgrade");
	wsc_send(&w, 1, "not json", 8);
	collect(&w, &o1, &o2, 5000, code, sizeof(code));
	ok(o2.len > 0, "exec bad params: the reason on channel 2 (%s)",
	   o2.data);
	is_str(code, "-1", "exec bad params: exit code -1");
	buf_free(&o1);
	buf_free(&o2);
	wsc_close(&w);

	ok(wsc_open(&w, "exec/", "client") == 0, "exec missing binary");
	wsc_send(&w, 1,
		 "{\"UnitName\":\"app\",\"Command\":[\"/no/such/binary\"]}",
		 48);
	collect(&w, &o1, &o2, 5000, code, sizeof(code));
	is_str(code, "-1", "exec of a missing binary: -1 (%s)", o2.data);
	buf_free(&o1);
	buf_free(&o2);
	buf_free(&d);
	wsc_close(&w);
}

static void append_log(const char *name, const char *line)
{
	char *p = xasprintf("%s/logs/%s", dir, name);
	int fd = open(p, O_WRONLY | O_APPEND | O_CREAT, 0644);

	fs_write_all(fd, line, strlen(line));
	close(fd);
	free(p);
}

static void test_follow(void)
{
	struct wsc w;
	struct buf d;
	int ch;
	char *p = dpath("logs/app.log"), *p1 = dpath("logs/app.log.1");

	buf_init(&d, 0);
	write_file(p, cri_log, sizeof(cri_log) - 1);
	ok(wsc_open(&w, "logs/app%3Ffollow=1&metadata=1", "client") == 0,
	   "log follow through the %%3F URL: upgrade");
	usleep(100000);
	append_log("app.log", "2024-01-01T00:00:05Z stdout F new one\n");
	ok(wsc_recv_ch(&w, &ch, &d, 3000) == 0 && ch == 1 &&
	       !strcmp(d.data,
		       "2024-01-01T00:00:05.000000000Z stdout F new one\n"),
	   "follow metadata=1: the new line in CRI form (%s)", d.data);
	rename(p, p1);
	append_log("app.log", "2024-01-01T00:00:06Z stderr F rotated\n");
	ok(wsc_recv_ch(&w, &ch, &d, 3000) == 0 &&
	       !strcmp(d.data,
		       "2024-01-01T00:00:06.000000000Z stderr F rotated\n"),
	   "follow: a rotated log is picked up (%s)", d.data);
	wsc_close(&w);

	ok(wsc_open(&w, "logs/app?follow=1&lines=1", "client") == 0,
	   "log follow, plain, lines=1: upgrade");
	ok(wsc_recv_ch(&w, &ch, &d, 3000) == 0 && !strcmp(d.data, "rotated\n"),
	   "follow lines=1: the last line first (%s)", d.data);
	append_log("app.log", "2024-01-01T00:00:07Z stdout P par\n");
	append_log("app.log", "2024-01-01T00:00:07Z stdout F tial\n");
	{
		struct buf all;
		buf_init(&all, 0);
		for (int i = 0;
		     i < 3 && !strstr(all.data ? all.data : "", "partial\n");
		     i++)
			if (wsc_recv_ch(&w, &ch, &d, 3000) == 0)
				buf_append(&all, d.data, d.len,
					   &(struct cerr){0});
		buf_append(&all, "", 0, &(struct cerr){0});
		is_str(all.data, "partial\n", "follow: partial lines joined");
		buf_free(&all);
	}
	pthread_mutex_lock(&fake_mu);
	fake_running = false;
	pthread_mutex_unlock(&fake_mu);
	{
		int r;
		while ((r = wsc_recv_ch(&w, &ch, &d, 4000)) == 0 && ch != 2)
			;
		ok(r == 0 && ch == 2 && strstr(d.data, "not running"),
		   "follow ends when the unit stops ('%s')", d.data);
		ok(wsc_recv_ch(&w, &ch, &d, 4000) < 0, "and the stream closes");
	}
	pthread_mutex_lock(&fake_mu);
	fake_running = true;
	pthread_mutex_unlock(&fake_mu);
	wsc_close(&w);
	ok(wsc_open(&w, "logs/nosuch?follow=1", "client") < 0,
	   "follow of an unknown unit: refused before the upgrade");
	wsc_close(&w);
	buf_free(&d);
	free(p);
	free(p1);
}

static void *echo_server(void *arg)
{
	int lfd = *(int *)arg, fd;
	char b[4096];
	ssize_t n;

	fd = accept(lfd, NULL, NULL);
	while (fd >= 0 && (n = read(fd, b, sizeof(b))) > 0)
		if (write(fd, b, (size_t)n) < 0)
			break;
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void test_portforward(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	pthread_t t;
	struct wsc w;
	struct buf d;
	char params[128];
	int ch;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	bind(lfd, (struct sockaddr *)&sa, sizeof(sa));
	listen(lfd, 1);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	pthread_create(&t, NULL, echo_server, &lfd);
	buf_init(&d, 0);
	snprintf(params, sizeof(params), "{\"PodName\":\"p\",\"Port\":\"%d\"}",
		 ntohs(sa.sin_port));
	ok(wsc_open(&w, "portforward/", "client") == 0, "portforward: "
							"upgrade");
	wsc_send(&w, 1, params, strlen(params));
	ok(wsc_recv_ch(&w, &ch, &d, 3000) == 0 && ch == 1 && d.len == 0,
	   "portforward: an empty channel-1 frame first");
	wsc_send_ch(&w, 0, "ping over tcp", 13);
	ok(wsc_recv_ch(&w, &ch, &d, 3000) == 0 && ch == 1 &&
	       !strcmp(d.data, "ping over tcp"),
	   "portforward: bytes go to the port and back");
	wsc_close(&w);
	pthread_join(t, NULL);
	close(lfd);
	ok(wsc_open(&w, "portforward/", "client") == 0, "portforward to a "
							"closed port");
	{
		static const char pp[] = "{\"PodName\":\"p\",\"Port\":\"1\"}";
		wsc_send(&w, 1, pp, strlen(pp));
	}
	ok(wsc_recv_ch(&w, &ch, &d, 3000) == 0 && ch == 2 &&
	       strstr(d.data, "connect"),
	   "portforward to a closed port: the error on channel 2 (%s)", d.data);
	wsc_close(&w);
	buf_free(&d);
}

/* A peer that never answers pings is dropped; one that does stays. */
static void test_silent_peer(void)
{
	struct wsc w, w2;
	struct buf d;
	int op, ch, r = 0, pings = 0;
	uint64_t t0;
	char *p = dpath("logs/app.log");

	buf_init(&d, 0);
	write_file(p, "", 0);
	ok(wsc_open(&w, "logs/app?follow=1", "client") == 0 &&
	       wsc_open(&w2, "logs/app?follow=1", "client") == 0,
	   "two followers");
	/* w2 answers pings for 2.5 s (the test's silence limit is 1 s);
	 * w reads nothing meanwhile. */
	t0 = now_ns();
	while (now_ns() - t0 < 2500000000ull)
		(void)wsc_recv_ch(&w2, &ch, &d, 100);
	while ((r = wsc_recv(&w, &op, &d, 1000)) == 0)
		pings += op == 9;
	ok(r == -3 && pings >= 2,
	   "the silent peer got pings (%d), then was dropped", pings);
	append_log("app.log", "2024-01-01T00:00:08Z stdout F still here\n");
	while ((r = wsc_recv_ch(&w2, &ch, &d, 2000)) == 0 &&
	       !strstr(d.data, "still here"))
		;
	ok(r == 0, "the one that answers pings is still served");
	wsc_close(&w);
	wsc_close(&w2);
	buf_free(&d);
	free(p);
}

/* ======================================================================
 * process helpers
 * ====================================================================== */

static void test_spawn(void)
{
	char sh[] = "/bin/sh", c[] = "-c", none[] = "/no/such";
	char s1[] = "echo hi; echo err >&2; exit 7", s3[] = "kill -9 $$";
	char *argv1[] = {sh, c, s1, NULL};
	char *argv2[] = {none, NULL};
	char *argv3[] = {sh, c, s3, NULL};
	struct buf out;
	struct cerr e = {0};
	int fd;

	buf_init(&out, 1024);
	ok(spawn_run(argv1, &out, 10, &e) == 7, "spawn_run: exit code");
	ok(out.data && strstr(out.data, "hi") && strstr(out.data, "err"),
	   "spawn_run: stdout and stderr captured");
	buf_free(&out);
	ok(spawn_run(argv2, &out, 10, &e) < 0 && e.code == ENOENT,
	   "spawn_run of a missing binary: ENOENT (%s)", e.msg);
	buf_free(&out);
	fd = spawn_pidfd(argv3, NULL, (int[3]){-1, -1, -1}, 0, NULL, &e);
	ok(fd >= 0 && spawn_wait(fd, false) == 137, "spawn_wait: 128+9 for "
						    "SIGKILL");
	close(fd);
	/* A long run that prints little: its exit code after its output. */
	{
		char s4[] = "sleep 0.3; exit 5";
		char *argv4[] = {sh, c, s4, NULL};

		buf_init(&out, 1024);
		ok(spawn_run(argv4, &out, 10, &e) == 5,
		   "spawn_run waits for the "
		   "exit after the output");
		buf_free(&out);
	}
	{
		char s5[] = "sleep 30";
		char *argv5[] = {sh, c, s5, NULL};
		uint64_t t0 = now_ns();

		buf_init(&out, 1024);
		ok(spawn_run(argv5, &out, 1, &e) == 137 &&
		       now_ns() - t0 < 5000000000ull,
		   "spawn_run kills a tool at its deadline");
		buf_free(&out);
	}
}

/* ======================================================================
 * partition tables (resizevolume's built-in grower)
 * ====================================================================== */

static void put32le(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64le(unsigned char *p, uint64_t v)
{
	put32le(p, (uint32_t)v);
	put32le(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32le(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

/* An independent CRC-32 (bitwise), to check the grower's. */
static uint32_t crc32_slow(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
	}
	return ~c;
}

static int image(const char *name, uint64_t bytes)
{
	char *p = dpath(name);
	int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (ftruncate(fd, (off_t)bytes) < 0)
		ok(0, "ftruncate");
	free(p);
	return fd;
}

/* Checked pread/pwrite (the test fails on a short transfer). */
static void pw(int fd, const void *b, size_t n, off_t off)
{
	if (pwrite(fd, b, n, off) != (ssize_t)n)
		ok(0, "pwrite %zu bytes at %lld", n, (long long)off);
}

static void pr(int fd, void *b, size_t n, off_t off)
{
	if (pread(fd, b, n, off) != (ssize_t)n)
		ok(0, "pread %zu bytes at %lld", n, (long long)off);
}

static void write_gpt(int fd, uint64_t sectors, uint64_t first, uint64_t last,
		      uint64_t first2)
{
	unsigned char mbr[512] = {0}, hdr[512] = {0};
	unsigned char *ents = xcalloc(128, 128);

	mbr[446 + 4] = 0xee;
	put32le(mbr + 446 + 8, 1);
	put32le(mbr + 446 + 12, (uint32_t)(sectors - 1));
	mbr[510] = 0x55;
	mbr[511] = 0xaa;
	ents[0] = 0xaf; /* any non-zero type */
	put64le(ents + 32, first);
	put64le(ents + 40, last);
	if (first2) {
		ents[128] = 0xaf;
		put64le(ents + 128 + 32, first2);
		put64le(ents + 128 + 40, first2 + 100);
	}
	memcpy(hdr, "EFI PART", 8);
	put32le(hdr + 8, 0x10000);
	put32le(hdr + 12, 92);
	put64le(hdr + 24, 1);
	put64le(hdr + 32, sectors - 1);
	put64le(hdr + 40, 34);
	put64le(hdr + 48, sectors - 34);
	put64le(hdr + 72, 2);
	put32le(hdr + 80, 128);
	put32le(hdr + 84, 128);
	put32le(hdr + 88, crc32_slow(ents, 128 * 128));
	put32le(hdr + 16, crc32_slow(hdr, 92));
	pw(fd, mbr, 512, 0);
	pw(fd, hdr, 512, 512);
	pw(fd, ents, 128 * 128, 1024);
	free(ents);
}

static void test_grow_table(void)
{
	struct cerr e = {0};
	uint64_t start = 0, len = 0;
	unsigned char mbr[512] = {0}, hdr[512], bk[512];
	unsigned char *ents = xmalloc(128 * 128);
	int fd;

	/* MBR: partition 1 from 2048, 10 MiB, on a disk grown to 64 MiB. */
	fd = image("mbr.img", 64 << 20);
	mbr[446 + 4] = 0x83;
	put32le(mbr + 446 + 8, 2048);
	put32le(mbr + 446 + 12, 20480);
	mbr[510] = 0x55;
	mbr[511] = 0xaa;
	pw(fd, mbr, 512, 0);
	ok(parttable_grow(fd, 1, &start, &len, &e) == 0 &&
	       start == 2048 * 512 && len == (64 << 20) - 2048 * 512,
	   "MBR: partition 1 grown to the end of the disk (%s)", e.msg);
	ok(parttable_grow(fd, 1, &start, &len, &e) == 1,
	   "MBR: a second time there is nothing to grow");
	ok(parttable_grow(fd, 2, &start, &len, &e) < 0 && e.code == ENOENT,
	   "MBR: no partition 2");
	ok(parttable_grow(fd, 5, &start, &len, &e) < 0 && e.code == ENOTSUP,
	   "MBR: logical partitions are not grown");
	/* A partition after it limits the growth. */
	put32le(mbr + 446 + 12, 20480);
	mbr[462 + 4] = 0x83;
	put32le(mbr + 462 + 8, 65536);
	put32le(mbr + 462 + 12, 2048);
	pw(fd, mbr, 512, 0);
	ok(parttable_grow(fd, 1, &start, &len, &e) == 0 &&
	       len == (65536 - 2048) * 512ull,
	   "MBR: grown up to the next partition");
	close(fd);

	/* GPT: 32 MiB disk image, then grown to 96 MiB. */
	fd = image("gpt.img", 32 << 20);
	write_gpt(fd, (32 << 20) / 512, 2048, 20479, 0);
	if (ftruncate(fd, 96 << 20) < 0)
		ok(0, "ftruncate");
	ok(parttable_grow(fd, 1, &start, &len, &e) == 0 &&
	       start == 2048 * 512 &&
	       len == ((96 << 20) / 512 - 34 - 2048 + 1) * 512ull,
	   "GPT: grown to the last usable sector (%s)", e.msg);
	pr(fd, hdr, 512, 512);
	pr(fd, bk, 512, (96 << 20) - 512);
	pr(fd, ents, 128 * 128, 1024);
	{
		uint32_t crc = get32le(hdr + 16);
		put32le(hdr + 16, 0);
		ok(crc == crc32_slow(hdr, 92) &&
		       get32le(hdr + 88) == crc32_slow(ents, 128 * 128),
		   "GPT: header and entry checksums are right");
	}
	ok(!memcmp(bk, "EFI PART", 8) &&
	       get32le(bk + 24) == (96 << 20) / 512 - 1,
	   "GPT: the backup header moved to the new end");
	ok(parttable_grow(fd, 1, &start, &len, &e) == 1,
	   "GPT: a second time there is nothing to grow");
	close(fd);
	fd = image("gpt2.img", 32 << 20);
	write_gpt(fd, (32 << 20) / 512, 2048, 20479, 40000);
	if (ftruncate(fd, 96 << 20) < 0)
		ok(0, "ftruncate");
	ok(parttable_grow(fd, 1, &start, &len, &e) == 0 &&
	       len == (40000 - 2048) * 512ull,
	   "GPT: grown up to the next partition");
	/* A damaged header is refused, not rewritten. */
	pw(fd, "X", 1, 512 + 100 - 8);
	pw(fd, "\xff", 1, 512 + 16);
	ok(parttable_grow(fd, 1, &start, &len, &e) < 0 && e.code == EINVAL,
	   "GPT: a bad checksum is refused (%s)", e.msg);
	close(fd);
	fd = image("none.img", 1 << 20);
	ok(parttable_grow(fd, 1, &start, &len, &e) < 0 && e.code == EINVAL,
	   "no partition table: EINVAL");
	close(fd);
	free(ents);
}

/* ======================================================================
 * load
 * ====================================================================== */

struct loadarg {
	uint64_t until;
	long n, fails, conns;
	uint64_t *lat;
	size_t nlat, caplat;
};

static size_t discard(char *p, size_t s, size_t n, void *u)
{
	(void)p;
	(void)u;
	return s * n;
}

static void *load_worker(void *arg)
{
	struct loadarg *la = arg;
	CURL *c = client("client");
	char *url = xasprintf("https://MilpaNode:%d/rest/v1/status", port);

	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	while (now_ns() < la->until || la->n < 20) {
		uint64_t t = now_ns();
		long code = 0, nc = 0;

		if (curl_easy_perform(c) != CURLE_OK ||
		    (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code),
		     code != 200))
			la->fails++;
		curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &nc);
		la->conns += nc;
		la->n++;
		if (la->nlat == la->caplat) {
			la->caplat = la->caplat ? la->caplat * 2 : 4096;
			la->lat =
			    xrealloc(la->lat, la->caplat * sizeof(*la->lat));
		}
		la->lat[la->nlat++] = now_ns() - t;
	}
	curl_easy_cleanup(c);
	free(url);
	return NULL;
}

static int cmp64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void test_load(double seconds)
{
	enum { N = 16 };
	pthread_t t[N];
	struct loadarg la[N];
	uint64_t t0 = now_ns(), *all;
	long total = 0, fails = 0, conns = 0;
	size_t nall = 0;
	double el;

	memset(la, 0, sizeof(la));
	for (int i = 0; i < N; i++) {
		la[i].until = t0 + (uint64_t)(seconds * 1e9);
		pthread_create(&t[i], NULL, load_worker, &la[i]);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		total += la[i].n;
		fails += la[i].fails;
		conns += la[i].conns;
		nall += la[i].nlat;
	}
	el = (double)(now_ns() - t0) / 1e9;
	all = xmalloc(nall * sizeof(*all));
	nall = 0;
	for (int i = 0; i < N; i++) {
		memcpy(all + nall, la[i].lat, la[i].nlat * sizeof(*all));
		nall += la[i].nlat;
		free(la[i].lat);
	}
	qsort(all, nall, sizeof(*all), cmp64);
	ok(fails == 0,
	   "load: %ld status requests from 16 clients, none "
	   "failed",
	   total);
	ok(conns == N, "load: one kept-alive connection per client (%ld)",
	   conns);
	printf("# load: %.0f status requests/s over mutual TLS (16 "
	       "kept-alive clients, %.1f s); p50 %.2f ms, p99 %.2f ms\n",
	       (double)total / el, el, (double)all[nall / 2] / 1e6,
	       (double)all[nall * 99 / 100] / 1e6);
	free(all);
}

/* ======================================================================
 * main
 * ====================================================================== */

static void cleanup_dir(void)
{
	struct cerr e = {0};

	fs_rm_rf(dir, &e);
}

int main(void)
{
	struct api_opts o = {.bind_addr = "127.0.0.1",
			     .version = "test-1.2.3",
			     .ws_ping_ms = 300,
			     .ws_silence_ms = 1000};
	struct api *a = NULL;
	struct cerr e = {0};
	const char *bench = getenv("CELL_API_BENCH");
	char *pk, *logs, *unpack;

	signal(SIGPIPE, SIG_IGN);
	snprintf(dir, sizeof(dir), "/tmp/test-api-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	atexit(cleanup_dir);
	snprintf(boot, sizeof(boot), "%s/boot", dir);
	mkdir(boot, 0700);
	logs = dpath("logs");
	mkdir(logs, 0755);
	free(logs);
	make_pki();
	pk = dpath("packages");
	o.boot_dir = boot;
	o.packages_dir = pk;
	/* The extractor runs as a child: the build's cell-unpack. */
	o.unpack_bin = unpack =
	    xasprintf("%s/bin/cell-unpack",
		      getenv("CELL_BUILD") ? getenv("CELL_BUILD") : "build");
	curl_global_init(CURL_GLOBAL_ALL);
	ok(api_start(&o, &fake, &a, &e) == 0, "api_start (%s)", e.msg);
	if (!a)
		return tap_done();
	port = api_port(a);
	ok(port > 0, "listening on port %d", port);
	test_tls();
	test_simple();
	test_malformed();
	test_file();
	test_logs();
	test_deploy();
	test_exec();
	test_follow();
	test_portforward();
	test_silent_peer();
	test_spawn();
	test_grow_table();
	test_load(bench ? strtod(bench, NULL) : 0.3);
	api_stop(a);
	ok(1, "api_stop returned");
	{
		struct api_opts bad = o;
		bad.boot_dir = dir; /* no ca.crt here */
		ok(api_start(&bad, &fake, &a, &e) < 0 && e.code == ENOENT,
		   "missing boot files: a clear error (%s)", e.msg);
	}
	free(pk);
	free(unpack);
	curl_global_cleanup();
	return tap_done();
}
