// SPDX-License-Identifier: Apache-2.0
/* A small load generator for bench/agent.sh: N concurrent clients, each on
 * one kept-alive mutual-TLS connection, GET a URL as fast as the server
 * answers for a fixed time; prints requests/s and latency percentiles.
 * (wrk and ab cannot present a client certificate.)
 *
 *   statusload URL CA CERT KEY CLIENTS SECONDS
 *
 * The server is verified by the name in URL's host (MilpaNode), which is
 * resolved to 127.0.0.1 as the controller's own resolution would do.
 *
 * Plain OpenSSL and one epoll loop rather than libcurl: on a two-core cell
 * the load generator shares the CPU with the agent, and curl's per-request
 * work cost more than the agent's, so the figure said more about curl.
 * One request in flight per connection, as the controller sends them. */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 256
#define MAX_SAMPLES (1u << 22)
#define RESP_MAX (1u << 20)

struct client {
	SSL *ssl;
	int fd;
	double start;
	char *buf;
	size_t len;
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* host, port and path of https://HOST:PORT/PATH */
static int parse_url(const char *url, char *host, size_t hn, int *port,
		     const char **path)
{
	const char *h = strstr(url, "://"), *slash, *colon;

	h = h ? h + 3 : url;
	slash = strchr(h, '/');
	*path = slash ? slash : "/";
	colon = memchr(h, ':', slash ? (size_t)(slash - h) : strlen(h));
	*port = colon ? (int)strtol(colon + 1, NULL, 10) : 443;
	snprintf(host, hn, "%.*s",
		 (int)((colon	? colon
			: slash ? slash
				: h + strlen(h)) -
		       h),
		 h);
	return *port > 0 ? 0 : -1;
}

static int dial(int port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("connect");
		exit(1);
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void send_request(struct client *c, const char *req, size_t n)
{
	c->len = 0;
	c->start = now_s();
	if (SSL_write(c->ssl, req, (int)n) != (int)n) {
		fprintf(stderr, "statusload: write failed\n");
		exit(1);
	}
}

/* 1 with a whole response (*ok: status 200), 0 when more is needed, -1 on
 * a broken connection. */
static int take_response(struct client *c, int *ok)
{
	for (;;) {
		int r = SSL_read(c->ssl, c->buf + c->len,
				 (int)(RESP_MAX - 1 - c->len));
		char *end, *cl;
		size_t hdr, body;

		if (r <= 0) {
			int err = SSL_get_error(c->ssl, r);
			return err == SSL_ERROR_WANT_READ ? 0 : -1;
		}
		c->len += (size_t)r;
		c->buf[c->len] = '\0';
		end = strstr(c->buf, "\r\n\r\n");
		if (!end)
			continue;
		hdr = (size_t)(end + 4 - c->buf);
		cl = strcasestr(c->buf, "\r\nContent-Length:");
		body = cl && cl < end ? strtoul(cl + 17, NULL, 10) : 0;
		if (c->len < hdr + body)
			continue;
		*ok = !strncmp(c->buf, "HTTP/1.1 200 ", 13);
		return 1;
	}
}

int main(int argc, char **argv)
{
	struct client cl[MAX_CLIENTS];
	struct epoll_event ev[MAX_CLIENTS];
	char host[256], req[512];
	const char *path;
	double *lat, t0, end;
	int clients, secs, port, ep;
	size_t n = 0, errors = 0, rn;
	SSL_CTX *ctx;

	if (argc != 7) {
		fprintf(stderr,
			"usage: statusload URL CA CERT KEY CLIENTS SECONDS\n");
		return 2;
	}
	clients = (int)strtol(argv[5], NULL, 10);
	secs = (int)strtol(argv[6], NULL, 10);
	if (clients < 1 || clients > MAX_CLIENTS || secs < 1 ||
	    parse_url(argv[1], host, sizeof(host), &port, &path) < 0)
		return 2;
	rn = (size_t)snprintf(req, sizeof(req),
			      "GET %s HTTP/1.1\r\nHost: %s:%d\r\n\r\n", path,
			      host, port);
	ctx = SSL_CTX_new(TLS_client_method());
	if (!ctx || SSL_CTX_load_verify_locations(ctx, argv[2], NULL) != 1 ||
	    SSL_CTX_use_certificate_chain_file(ctx, argv[3]) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, argv[4], SSL_FILETYPE_PEM) != 1) {
		ERR_print_errors_fp(stderr);
		return 1;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* A whole record in one read(); safe here: the server sends nothing
	 * but the answer to the one request in flight. */
	SSL_CTX_set_read_ahead(ctx, 1);
	lat = malloc(MAX_SAMPLES * sizeof(double));
	ep = epoll_create1(EPOLL_CLOEXEC);
	for (int i = 0; i < clients; i++) {
		struct epoll_event e = {.events = EPOLLIN,
					.data.u32 = (uint32_t)i};

		cl[i].fd = dial(port);
		cl[i].ssl = SSL_new(ctx);
		cl[i].buf = malloc(RESP_MAX);
		SSL_set_tlsext_host_name(cl[i].ssl, host);
		SSL_set1_host(cl[i].ssl, host);
		SSL_set_fd(cl[i].ssl, cl[i].fd);
		if (SSL_connect(cl[i].ssl) != 1) {
			ERR_print_errors_fp(stderr);
			return 1;
		}
		/* Non-blocking from here: SSL_read says WANT_READ. */
		BIO_set_nbio(SSL_get_rbio(cl[i].ssl), 1);
		epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &e);
	}
	t0 = now_s();
	end = t0 + secs;
	for (int i = 0; i < clients; i++)
		send_request(&cl[i], req, rn);
	while (now_s() < end) {
		int k = epoll_wait(ep, ev, clients, 100);

		for (int j = 0; j < k; j++) {
			struct client *c = &cl[ev[j].data.u32];
			int ok = 0, r = take_response(c, &ok);

			if (r < 0) {
				fprintf(stderr,
					"statusload: connection lost\n");
				return 1;
			}
			if (r == 0)
				continue;
			if (!ok)
				errors++;
			else if (n < MAX_SAMPLES)
				lat[n++] = now_s() - c->start;
			send_request(c, req, rn);
		}
	}
	qsort(lat, n, sizeof(double), cmp);
	printf("requests %zu errors %zu seconds %.2f rps %.0f p50_ms %.2f "
	       "p99_ms %.2f\n",
	       n, errors, now_s() - t0, (double)n / (now_s() - t0),
	       n ? lat[n / 2] * 1e3 : 0.0, n ? lat[n * 99 / 100] * 1e3 : 0.0);
	return errors ? 1 : 0;
}
