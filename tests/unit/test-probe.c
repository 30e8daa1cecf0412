// SPDX-License-Identifier: Apache-2.0
/* Unit tests of probes (agent/sup/probe.c): tcp, http and https attempts
 * against sockets opened here, and the state machine with a fake attempt and a
 * synthetic clock. Exec probes need a running unit: integration tests. */
/* The fixtures build spec structs from string literals. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "../lib/listen.h"
#include "../lib/tap.h"
#include "probe.h"
#include "util.h"

#define S 1000000000ull

static void test_tcp(void)
{
	struct probe p = {.kind = PROBE_TCP, .timeout_s = 1};
	struct probe_ctx c = {0};
	char why[256];
	int port, fd = listen_any(&port);

	ok(fd >= 0, "listening on 127.0.0.1:%d", port);
	p.port = port;
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_SUCCESS,
	   "tcp: connects to a listening port");
	close(fd);
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "refused"),
	   "tcp: a closed port fails (%s)", why);
	p.host = "127.0.0.1";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE,
	   "tcp: explicit host");
	p.port = 0;
	p.port_name = "web";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "\"web\"") && strstr(why, "named port"),
	   "tcp: an unresolved named port fails (%s)", why);
}

/* ---- a tiny HTTP server: one connection at a time ---- */

struct server {
	int fd, port;
	SSL_CTX *tls; /* NULL: plain HTTP */
	pthread_t th;
	pthread_mutex_t mu;
	char last_req[4096];
	char sni[256];
	int n_reqs;
};

/* Responses by path; NULL for the paths serve_one handles itself. */
static const char *reply(const char *req)
{
	if (strstr(req, "GET /fail "))
		return "HTTP/1.1 500 Internal Server Error\r\n"
		       "Content-Length: 4\r\nConnection: close\r\n\r\nboom";
	if (strstr(req, "GET /moved "))
		return "HTTP/1.1 302 Found\r\nLocation: /fail\r\n"
		       "Content-Length: 0\r\nConnection: close\r\n\r\n";
	if (strstr(req, "GET /perm "))
		return "HTTP/1.1 301 Moved Permanently\r\nLocation: /fail\r\n"
		       "Content-Length: 0\r\n\r\n";
	if (strstr(req, "GET /malformed "))
		return "HTTP/1.1 OK\r\nContent-Length: 0\r\n\r\n";
	if (strstr(req, "GET /early "))
		return "HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"
		       "HTTP/1.1 204 No Content\r\n\r\n";
	if (strstr(req, "GET /slow ") || strstr(req, "GET /stall ") ||
	    strstr(req, "GET /keep ") || strstr(req, "GET /big ") ||
	    strstr(req, "GET /empty "))
		return NULL;
	return "HTTP/1.1 200 OK\r\n"
	       "Content-Length: 2\r\nConnection: close\r\n\r\nok";
}

static void record(struct server *sv, const char *req, const char *sni)
{
	pthread_mutex_lock(&sv->mu);
	snprintf(sv->last_req, sizeof(sv->last_req), "%s", req);
	snprintf(sv->sni, sizeof(sv->sni), "%s", sni ? sni : "");
	sv->n_reqs++;
	pthread_mutex_unlock(&sv->mu);
}

/* Hold the connection until the client hangs up (its timeout). */
static void wait_hangup(int cfd)
{
	char b[512];

	while (read(cfd, b, sizeof(b)) > 0)
		;
}

static void write_str(int cfd, const char *s)
{
	if (write(cfd, s, strlen(s)) < 0)
		return; /* the client may be gone */
}

/* Headers over the client's 16 KiB cap. */
static void write_big(int cfd)
{
	char pad[1024];

	memset(pad, 'a', sizeof(pad));
	write_str(cfd, "HTTP/1.1 200 OK\r\n");
	for (int i = 0; i < 20; i++) {
		write_str(cfd, "X-Pad: ");
		if (write(cfd, pad, sizeof(pad)) < 0)
			return;
		write_str(cfd, "\r\n");
	}
	write_str(cfd, "\r\n");
}

static void serve_one(struct server *sv, int cfd)
{
	char req[4096];
	size_t n = 0;
	ssize_t r;
	const char *resp;

	while (n < sizeof(req) - 1 &&
	       (r = read(cfd, req + n, sizeof(req) - 1 - n)) > 0) {
		n += (size_t)r;
		req[n] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[n] = '\0';
	record(sv, req, NULL);
	resp = reply(req);
	if (resp)
		write_str(cfd, resp);
	else if (strstr(req, "GET /stall "))
		write_str(cfd, "HTTP/1.1 200 OK\r\n\r\npart of it");
	else if (strstr(req, "GET /keep "))
		/* Keeps the connection open despite "Connection: close". */
		write_str(cfd,
			  "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
	else if (strstr(req, "GET /big "))
		write_big(cfd);
	if (resp || strstr(req, "GET /empty "))
		return;
	wait_hangup(cfd);
}

static void tls_serve_one(struct server *sv, int cfd)
{
	SSL *ssl = SSL_new(sv->tls);
	const char *resp;
	char req[4096];
	size_t n = 0;
	int r;

	if (!ssl || !SSL_set_fd(ssl, cfd) || SSL_accept(ssl) != 1) {
		SSL_free(ssl);
		return;
	}
	while (n < sizeof(req) - 1 &&
	       (r = SSL_read(ssl, req + n, (int)(sizeof(req) - 1 - n))) > 0) {
		n += (size_t)r;
		req[n] = '\0';
		if (strstr(req, "\r\n\r\n"))
			break;
	}
	req[n] = '\0';
	record(sv, req, SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name));
	resp = reply(req);
	if (resp && SSL_write(ssl, resp, (int)strlen(resp)) > 0)
		SSL_shutdown(ssl);
	SSL_free(ssl);
}

static void *server_main(void *arg)
{
	struct server *sv = arg;
	int cfd;

	while ((cfd = accept(sv->fd, NULL, NULL)) >= 0) {
		if (sv->tls)
			tls_serve_one(sv, cfd);
		else
			serve_one(sv, cfd);
		close(cfd);
	}
	return NULL;
}

static void last_req(struct server *sv, char *out, size_t n)
{
	pthread_mutex_lock(&sv->mu);
	snprintf(out, n, "%s", sv->last_req);
	pthread_mutex_unlock(&sv->mu);
}

static int n_reqs(struct server *sv)
{
	int n;

	pthread_mutex_lock(&sv->mu);
	n = sv->n_reqs;
	pthread_mutex_unlock(&sv->mu);
	return n;
}

static bool server_start(struct server *sv, int fd)
{
	sv->fd = fd;
	return fd >= 0 && pthread_create(&sv->th, NULL, server_main, sv) == 0;
}

static void server_stop(struct server *sv)
{
	shutdown(sv->fd, SHUT_RDWR);
	pthread_join(sv->th, NULL);
	close(sv->fd);
}

/* One attempt, timed; why in why. */
static enum probe_result timed(const struct probe *p, char *why, size_t n,
			       double *secs)
{
	struct probe_ctx c = {.default_host = "127.0.0.1"};
	uint64_t t0 = now_ns();
	enum probe_result r = probe_once(p, &c, why, n);

	*secs = (double)(now_ns() - t0) / S;
	return r;
}

static void test_http(void)
{
	struct server sv = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct kv hdrs[] = {{"X-Probe", "yes"}, {"Host", "example.test"}};
	struct probe p = {.kind = PROBE_HTTP,
			  .timeout_s = 1,
			  .path = "/healthz",
			  .http_headers = hdrs,
			  .n_http_headers = 2};
	struct probe_ctx c = {.default_host = "127.0.0.1"};
	char why[256], req[4096], want[256];
	uint64_t t0, el;

	ok(server_start(&sv, listen_any(&sv.port)), "http server on :%d",
	   sv.port);
	p.port = sv.port;
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_SUCCESS,
	   "http: 200 succeeds (%s)", why);
	last_req(&sv, req, sizeof(req));
	ok(strstr(req, "GET /healthz HTTP/1.1\r\n") != NULL, "http: path sent");
	ok(strstr(req, "\r\nX-Probe: yes\r\n") != NULL, "http: header sent");
	ok(strstr(req, "\r\nHost: example.test\r\n") != NULL &&
	       !strstr(req, "Host: 127"),
	   "http: Host header overrides");
	ok(strstr(req, "User-Agent: kube-probe/") != NULL,
	   "http: kube-probe user agent");
	p.path = "fail";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE, "http: 500");
	is_str(why, "HTTP 500", "http: why names the status");
	p.path = "/moved";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_SUCCESS,
	   "http: 302 succeeds, not followed");
	last_req(&sv, req, sizeof(req));
	ok(strstr(req, "GET /moved ") != NULL, "http: redirect not followed");
	p.path = "/slow";
	t0 = now_ns();
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "timeout"),
	   "http: slow server times out (%s)", why);
	el = now_ns() - t0;
	ok(el >= 900000000ull && el < 2000000000ull,
	   "http: timeout honoured (%.2f s)", (double)el / S);
	snprintf(want, sizeof(want),
		 "Get http://127.0.0.1:%d/slow: "
		 "timeout after 1s",
		 sv.port);
	is_str(why, want, "http: timeout why");
	p.port = 0;
	p.port_name = "metrics";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "metrics"),
	   "http: unresolved named port (%s)", why);
	server_stop(&sv);
	p.port = sv.port;
	p.path = "/";
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "Get http://127.0.0.1:"),
	   "http: connection refused fails (%s)", why);
	snprintf(want, sizeof(want),
		 "Get http://127.0.0.1:%d/: "
		 "Connection refused",
		 sv.port);
	is_str(why, want, "http: connection refused why");
}

/* The request a probe without user headers sends, and user headers that
 * would break it. */
static void test_http_request(void)
{
	struct server sv = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct kv accept[] = {{"accept", "application/json"}, {"", "x"}};
	struct kv bad_value[] = {{"X-A", "1\r\nX-Injected: yes"}};
	struct kv bad_name[] = {{"X-A\nX-Injected", "yes"}};
	struct probe p = {.kind = PROBE_HTTP, .timeout_s = 1, .path = "a b"};
	char why[256], req[4096], want[256];
	double secs;
	int n;

	ok(server_start(&sv, listen_any(&sv.port)), "http server on :%d",
	   sv.port);
	p.port = sv.port;
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_SUCCESS,
	   "request: 200 (%s)", why);
	last_req(&sv, req, sizeof(req));
	snprintf(want, sizeof(want),
		 "GET /a%%20b HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
		 "User-Agent: kube-probe/cell\r\nAccept: */*\r\n"
		 "Connection: close\r\n\r\n",
		 sv.port);
	is_str(req, want, "request: defaults, path escaped");
	p.http_headers = accept;
	p.n_http_headers = 2;
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_SUCCESS,
	   "request: user Accept (%s)", why);
	last_req(&sv, req, sizeof(req));
	ok(strstr(req, "\r\naccept: application/json\r\n") &&
	       !strstr(req, "*/*"),
	   "request: a user Accept replaces ours, an empty name is skipped");
	n = n_reqs(&sv);
	p.http_headers = bad_value;
	p.n_http_headers = 1;
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_FAILURE &&
	       strstr(why, "invalid HTTP header value for \"X-A\""),
	   "request: CR/LF in a header value refused (%s)", why);
	p.http_headers = bad_name;
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_FAILURE &&
	       strstr(why, "invalid HTTP header name"),
	   "request: LF in a header name refused (%s)", why);
	ok(n_reqs(&sv) == n, "request: nothing sent for a bad header");
	server_stop(&sv);
}

struct resp_case {
	const char *path;
	enum probe_result want;
	const char *why; /* a part of it */
	double min_s, max_s;
};

/* Responses: status lines, interim responses, header caps, and bodies. */
static void test_http_responses(void)
{
	struct server sv = {.mu = PTHREAD_MUTEX_INITIALIZER};
	const struct resp_case cases[] = {
	    {"/perm", PROBE_SUCCESS, "", 0, 0.9},
	    {"/fail", PROBE_FAILURE, "HTTP 500", 0, 0.9},
	    {"/malformed", PROBE_FAILURE, "malformed HTTP response", 0, 0.9},
	    {"/early", PROBE_SUCCESS, "", 0, 0.9},
	    {"/big", PROBE_FAILURE, "response headers too large", 0, 0.9},
	    {"/empty", PROBE_FAILURE, "empty reply from server", 0, 0.9},
	    /* Headers, then a body that never ends: the status decides,
	     * reading the body stops at the deadline. */
	    {"/stall", PROBE_SUCCESS, "", 0.9, 2},
	    /* Content-Length read: no wait for a close (well under the
	     * 1 s deadline). */
	    {"/keep", PROBE_SUCCESS, "", 0, 0.9},
	};
	struct probe p = {.kind = PROBE_HTTP, .timeout_s = 1};
	char why[256];
	double secs;

	ok(server_start(&sv, listen_any(&sv.port)), "http server on :%d",
	   sv.port);
	p.port = sv.port;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct resp_case *k = &cases[i];

		p.path = k->path;
		ok(timed(&p, why, sizeof(why), &secs) == k->want &&
		       strstr(why, k->why) && secs >= k->min_s &&
		       secs < k->max_s,
		   "response %s: %s in %.2f s (%s)", k->path,
		   k->want == PROBE_SUCCESS ? "success" : "failure", secs, why);
	}
	server_stop(&sv);
}

/* A listening socket on ::1 and an ephemeral port. */
static int listen_any6(int *port)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6,
				 .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	*port = ntohs(a.sin6_port);
	return fd;
}

static void test_http_ipv6(void)
{
	struct server sv = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct probe p = {.kind = PROBE_HTTP, .timeout_s = 1, .host = "::1"};
	char why[256], req[4096], want[256];
	double secs;

	ok(server_start(&sv, listen_any6(&sv.port)), "http server on [::1]:%d",
	   sv.port);
	p.port = sv.port;
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_SUCCESS,
	   "ipv6: 200 (%s)", why);
	last_req(&sv, req, sizeof(req));
	snprintf(want, sizeof(want), "\r\nHost: [::1]:%d\r\n", sv.port);
	ok(strstr(req, want) != NULL, "ipv6: Host in brackets");
	server_stop(&sv);
	snprintf(want, sizeof(want), "Get http://[::1]:%d/: ", sv.port);
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_FAILURE &&
	       str_has_prefix(why, want),
	   "ipv6: brackets in the why (%s)", why);
}

/* A throwaway self-signed certificate for "localhost". */
static SSL_CTX *tls_server_ctx(void)
{
	EVP_PKEY *key = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	X509_NAME *nm = x ? X509_get_subject_name(x) : NULL;
	bool good = key && x && ctx && nm;

	good = good && ASN1_INTEGER_set(X509_get_serialNumber(x), 1) &&
	       X509_gmtime_adj(X509_getm_notBefore(x), 0) &&
	       X509_gmtime_adj(X509_getm_notAfter(x), 3600) &&
	       X509_set_pubkey(x, key) &&
	       X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC,
					  (const unsigned char *)"localhost",
					  -1, -1, 0) &&
	       X509_set_issuer_name(x, nm) && X509_sign(x, key, EVP_sha256()) &&
	       SSL_CTX_use_certificate(ctx, x) == 1 &&
	       SSL_CTX_use_PrivateKey(ctx, key) == 1;
	X509_free(x);
	EVP_PKEY_free(key);
	if (!good) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static void test_https(void)
{
	struct server sv = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct server plain = {.mu = PTHREAD_MUTEX_INITIALIZER};
	struct probe p = {.kind = PROBE_HTTP,
			  .timeout_s = 1,
			  .scheme = "HTTPS",
			  .host = "localhost",
			  .path = "/tls"};
	char why[256], req[4096], want[256];
	double secs;

	sv.tls = tls_server_ctx();
	ok(sv.tls && server_start(&sv, listen_any(&sv.port)),
	   "https server on :%d", sv.port);
	p.port = sv.port;
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_SUCCESS,
	   "https: 200 from a self-signed server (%s)", why);
	last_req(&sv, req, sizeof(req));
	snprintf(want, sizeof(want),
		 "GET /tls HTTP/1.1\r\nHost: localhost:%d\r\n", sv.port);
	ok(str_has_prefix(req, want), "https: request over TLS");
	pthread_mutex_lock(&sv.mu);
	is_str(sv.sni, "localhost", "https: SNI names the host");
	pthread_mutex_unlock(&sv.mu);
	p.host = "127.0.0.1";
	p.path = "/fail";
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_FAILURE &&
	       !strcmp(why, "HTTP 500"),
	   "https: 500 fails (%s)", why);
	pthread_mutex_lock(&sv.mu);
	is_str(sv.sni, "", "https: no SNI for an IP literal");
	pthread_mutex_unlock(&sv.mu);
	server_stop(&sv);
	SSL_CTX_free(sv.tls);

	/* A server that never answers the ClientHello: the handshake is
	 * bounded by the probe's timeout too. */
	ok(server_start(&plain, listen_any(&plain.port)), "http server on :%d",
	   plain.port);
	p.port = plain.port;
	snprintf(want, sizeof(want),
		 "Get https://127.0.0.1:%d/fail: "
		 "timeout after 1s",
		 plain.port);
	ok(timed(&p, why, sizeof(why), &secs) == PROBE_FAILURE &&
	       !strcmp(why, want) && secs >= 0.9 && secs < 2,
	   "https: handshake times out in %.2f s (%s)", secs, why);
	server_stop(&plain);
}

static void test_exec_errors(void)
{
	char *cmd[] = {"true", NULL};
	struct probe p = {.kind = PROBE_EXEC, .timeout_s = 1};
	struct probe_ctx c = {.monitor_bin = "/nonexistent/cell-monitor",
			      .unit_dir = "/nonexistent/unit"};
	char why[256] = "";

	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "no command"),
	   "exec: no command fails (%s)", why);
	p.exec_command = cmd;
	ok(probe_once(&p, &c, why, sizeof(why)) == PROBE_FAILURE &&
	       strstr(why, "exec true: "),
	   "exec: runtime_exec error is a failure (%s)", why);
}

/* ---- the state machine, with scripted results ---- */

struct script {
	const struct unit_spec *u;
	/* per probe: results to return in order ('s'/'f'), then repeats the
	 * last one */
	const char *live, *ready, *start;
	size_t n_live, n_ready, n_start; /* calls made */
};

static char next_result(const char *seq, size_t *n)
{
	size_t len = strlen(seq), i = *n < len ? *n : len - 1;

	(*n)++;
	return seq[i];
}

static enum probe_result fake(const struct probe *p, const struct probe_ctx *c,
			      char *why, size_t whysz)
{
	struct script *sc = c->opaque;
	char r;

	if (p == &sc->u->liveness)
		r = next_result(sc->live, &sc->n_live);
	else if (p == &sc->u->readiness)
		r = next_result(sc->ready, &sc->n_ready);
	else
		r = next_result(sc->start, &sc->n_start);
	if (r == 's')
		return PROBE_SUCCESS;
	snprintf(why, whysz, "HTTP 500");
	return PROBE_FAILURE;
}

static struct probe mk(int delay, int period, int succ, int fail)
{
	return (struct probe){.kind = PROBE_HTTP,
			      .port = 80,
			      .initial_delay_s = delay,
			      .timeout_s = 1,
			      .period_s = period,
			      .success_threshold = succ,
			      .failure_threshold = fail};
}

static void test_no_probes(void)
{
	struct unit_spec u = {.name = "u"};
	struct probe_ctx c = {.attempt = fake};
	struct unit_probes s;
	struct probe_outcome o;

	probes_init(&s, &u, 5 * S);
	ok(probes_next_due(&s) == 0, "no probes: nothing due");
	probes_run_due(&s, &u, &c, 5 * S, &o);
	ok(o.ready && o.started == 1 && !o.kill && !*o.why,
	   "no probes: started and ready");
}

static void test_readiness(void)
{
	struct unit_spec u = {.name = "u", .readiness = mk(5, 10, 2, 3)};
	struct script sc = {.u = &u, .ready = "sssfffffs"};
	struct probe_ctx c = {.attempt = fake, .opaque = &sc};
	struct unit_probes s;
	struct probe_outcome o;
	uint64_t t0 = 100 * S;
	/* ready after each run: s(1<2) s s f f f f f s */
	const bool want[] = {0, 1, 1, 1, 1, 0, 0, 0, 0};
	bool all = true;

	probes_init(&s, &u, t0);
	ok(probes_next_due(&s) == t0 + 5 * S, "readiness: initial delay");
	probes_run_due(&s, &u, &c, t0 + 4 * S, &o);
	ok(sc.n_ready == 0 && !o.ready && o.started == 1,
	   "readiness: not run before due; starts not ready");
	for (int i = 0; i < 9; i++) {
		uint64_t due = probes_next_due(&s);

		all = all && due == t0 + 5 * S + (uint64_t)i * 10 * S;
		probes_run_due(&s, &u, &c, due, &o);
		if (o.ready != want[i] || o.kill)
			printf("# run %d: ready %d want %d\n", i, o.ready,
			       want[i]);
		all = all && o.ready == want[i] && !o.kill;
	}
	ok(all && sc.n_ready == 9,
	   "readiness: toggles with success/failure thresholds, exact period");
	is_str(o.why, "Readiness probe failed: HTTP 500", "readiness: why");
	probes_run_due(&s, &u, &c, probes_next_due(&s) + 25 * S, &o);
	ok(sc.n_ready == 10 &&
	       probes_next_due(&s) == t0 + 5 * S + 9 * 10 * S + 25 * S + 10 * S,
	   "readiness: a late caller skips missed periods, runs once");
	ok(o.ready, "readiness: second success makes it ready again");
}

static void test_liveness(void)
{
	struct unit_spec u = {.name = "u", .liveness = mk(0, 3, 1, 3)};
	struct script sc = {.u = &u, .live = "sffsfff"};
	struct probe_ctx c = {.attempt = fake, .opaque = &sc};
	struct unit_probes s;
	struct probe_outcome o;
	bool nokill = true;

	probes_init(&s, &u, S);
	ok(probes_next_due(&s) == S, "liveness: due at once without a delay");
	for (int i = 0; i < 6; i++) {
		probes_run_due(&s, &u, &c, S + (uint64_t)i * 3 * S, &o);
		nokill = nokill && !o.kill && o.ready;
	}
	ok(nokill && sc.n_live == 6,
	   "liveness: fewer than 3 consecutive failures do not kill");
	probes_run_due(&s, &u, &c, 19 * S, &o);
	ok(o.kill && sc.n_live == 7, "liveness: third failure in a row kills");
	is_str(o.why, "Liveness probe failed: HTTP 500", "liveness: why");
	ok(!o.ready && probes_next_due(&s) == 0,
	   "liveness: after kill nothing runs, not ready");
	probes_run_due(&s, &u, &c, 100 * S, &o);
	ok(sc.n_live == 7 && o.kill, "liveness: kill is sticky until init");
	probes_init(&s, &u, 200 * S);
	sc.live = "s";
	probes_run_due(&s, &u, &c, 200 * S, &o);
	ok(!o.kill && o.ready && !*o.why, "liveness: init resets the state");
}

static void test_startup(void)
{
	struct unit_spec u = {.name = "u",
			      .startup = mk(2, 1, 1, 5),
			      .liveness = mk(10, 7, 1, 1),
			      .readiness = mk(0, 4, 1, 3)};
	struct script sc = {
	    .u = &u, .start = "fffs", .live = "s", .ready = "s"};
	struct probe_ctx c = {.attempt = fake, .opaque = &sc};
	struct unit_probes s;
	struct probe_outcome o;
	bool gated = true;

	probes_init(&s, &u, 0);
	ok(probes_next_due(&s) == 2 * S, "startup: initial delay");
	for (int i = 0; i < 3; i++) {
		probes_run_due(&s, &u, &c, (2 + (uint64_t)i) * S, &o);
		gated = gated && o.started == 0 && !o.ready && !o.kill;
	}
	ok(gated && sc.n_start == 3 && sc.n_live == 0 && sc.n_ready == 0,
	   "startup: liveness and readiness wait for startup");
	probes_run_due(&s, &u, &c, 5 * S, &o);
	ok(o.started == 1 && sc.n_start == 4, "startup: success starts");
	ok(sc.n_ready == 1 && o.ready,
	   "startup: readiness runs as soon as started");
	ok(sc.n_live == 0 && probes_next_due(&s) == 9 * S,
	   "startup: liveness keeps its initial delay from the run start");
	probes_run_due(&s, &u, &c, 9 * S, &o);
	ok(sc.n_ready == 2 && sc.n_live == 0 && probes_next_due(&s) == 10 * S,
	   "startup: readiness on its own period");
	probes_run_due(&s, &u, &c, 10 * S, &o);
	ok(sc.n_live == 1 && sc.n_start == 4 && !o.kill,
	   "startup: liveness runs, startup no more");

	/* A startup probe that never succeeds kills at its threshold. */
	sc = (struct script){.u = &u, .start = "f", .live = "s", .ready = "s"};
	probes_init(&s, &u, 0);
	for (int i = 0; i < 4; i++)
		probes_run_due(&s, &u, &c, (2 + (uint64_t)i) * S, &o);
	ok(!o.kill && o.started == 0, "startup: 4 failures of 5 do not kill");
	probes_run_due(&s, &u, &c, 6 * S, &o);
	ok(o.kill && o.started == 0 && !o.ready && sc.n_live == 0,
	   "startup: failure threshold kills");
	is_str(o.why, "Startup probe failed: HTTP 500", "startup: why");
}

int main(void)
{
	/* As cell-agent's main does: TLS writes to a closed connection rely
	 * on it (agent/sup/probe.c), and so do this file's servers. */
	signal(SIGPIPE, SIG_IGN);
	test_tcp();
	test_http();
	test_http_request();
	test_http_responses();
	test_http_ipv6();
	test_https();
	test_exec_errors();
	test_no_probes();
	test_readiness();
	test_liveness();
	test_startup();
	return tap_done();
}
