// SPDX-License-Identifier: Apache-2.0
/* cell-imds: the metadata proxy for a pod that Kip launched with an
 * instance profile (pod.elotl.co/instance-profile). The agent starts it
 * with fd 0 a socket listening at 169.254.169.254:80 inside the pod's
 * namespace (netsetup's net_imds_listen); it runs in the cell's namespace
 * and asks the real metadata service (--upstream, default
 * http://169.254.169.254) for what agent/pod/imdsreq.c allows: the IMDSv2
 * token, the role's credentials, the placement, the identity document.
 *
 *   cell-imds [--upstream http://IPv4[:PORT]] < listening socket
 *
 * A child, not a thread of the agent: it parses what units send. One
 * connection at a time, one request per connection, every step under a
 * deadline and a size cap: a unit that stalls delays only its own pod's
 * requests, by at most CLIENT_MS. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "imdsreq.h"
#include "log.h"
#include "util.h"

#define CLIENT_MS 5000	      /* the pod's request head */
#define UPSTREAM_MS 5000      /* connect, ask and read the reply */
#define REPLY_MAX (64u << 10) /* credentials are ~1.5 KiB */

static uint64_t ms_left(uint64_t deadline_ns)
{
	uint64_t now = now_ns();
	return now >= deadline_ns ? 0 : (deadline_ns - now) / 1000000 + 1;
}

/* Wait for fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, uint64_t deadline_ns)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r;

	do {
		r = poll(&p, 1, (int)ms_left(deadline_ns));
	} while (r < 0 && errno == EINTR);
	return r;
}

static int write_all(int fd, const char *b, size_t n, uint64_t deadline_ns)
{
	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (wait_fd(fd, POLLOUT, deadline_ns) <= 0)
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read until EOF, the cap or the deadline; 0 at EOF within the cap. */
static int read_all(int fd, char *b, size_t cap, size_t *len,
		    uint64_t deadline_ns, bool stop_at_head)
{
	*len = 0;
	for (;;) {
		ssize_t r;
		if (stop_at_head && imds_head_end(b, *len))
			return 0;
		if (*len == cap)
			return -1;
		if (wait_fd(fd, POLLIN, deadline_ns) <= 0)
			return -1;
		r = recv(fd, b + *len, cap - *len, MSG_DONTWAIT);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r < 0)
			return -1;
		if (r == 0)
			return stop_at_head ? -1 : 0;
		*len += (size_t)r;
	}
}

static void answer(int c, int status, const char *why)
{
	char msg[256];
	const char *text = status == 403   ? "Forbidden"
			   : status == 405 ? "Method Not Allowed"
			   : status == 431 ? "Request Header Fields Too Large"
			   : status == 502 ? "Bad Gateway"
					   : "Bad Request";
	int n = snprintf(msg, sizeof(msg),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
			 status, text, strlen(why) + 1, why);

	write_all(c, msg, (size_t)n, now_ns() + 1000000000ull);
}

static int connect_upstream(const struct sockaddr_in *up, uint64_t deadline)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int err = 0;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return -1;
	if (connect(fd, (const struct sockaddr *)up, sizeof(*up)) < 0 &&
	    (errno != EINPROGRESS || wait_fd(fd, POLLOUT, deadline) <= 0 ||
	     getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* The allowed request, rebuilt from what was judged (nothing else of the
 * pod's head goes on), and the service's reply back as it came. */
static void relay(int c, const struct imds_req *r, const struct sockaddr_in *up,
		  const char *host)
{
	uint64_t deadline = now_ns() + UPSTREAM_MS * 1000000ull;
	char head[1024], *reply = xmalloc(REPLY_MAX);
	size_t len = 0;
	int n =
	    snprintf(head, sizeof(head),
		     "%s %s HTTP/1.1\r\nHost: %s\r\n%s%s%s%s%s%s%s"
		     "Connection: close\r\n\r\n",
		     r->method, r->target, host,
		     r->token[0] ? "X-aws-ec2-metadata-token: " : "", r->token,
		     r->token[0] ? "\r\n" : "",
		     r->ttl[0] ? "X-aws-ec2-metadata-token-ttl-seconds: " : "",
		     r->ttl, r->ttl[0] ? "\r\n" : "",
		     !strcmp(r->method, "PUT") ? "Content-Length: 0\r\n" : "");
	int u = connect_upstream(up, deadline);

	if (u < 0 || write_all(u, head, (size_t)n, deadline) < 0 ||
	    read_all(u, reply, REPLY_MAX, &len, deadline, false) < 0) {
		log_warn("%s %s: the metadata service did not answer in time "
			 "or in %u bytes",
			 r->method, r->target, REPLY_MAX);
		answer(c, 502, "the metadata service did not answer");
	} else {
		write_all(c, reply, len, now_ns() + CLIENT_MS * 1000000ull);
	}
	if (u >= 0)
		close(u);
	free(reply);
}

static void serve(int c, const struct sockaddr_in *up, const char *host)
{
	char buf[IMDS_HEAD_MAX];
	size_t len = 0;
	struct imds_req r;
	int status;

	if (read_all(c, buf, sizeof(buf), &len,
		     now_ns() + CLIENT_MS * 1000000ull, true) < 0 &&
	    len < sizeof(buf))
		return; /* gone or stalled: nothing to answer */
	status = imds_req_judge(buf, len, &r);
	if (status != 200) {
		log_info("refused (%d, %s)", status, r.reason);
		answer(c, status, r.reason);
		return;
	}
	log_debug("%s %s", r.method, r.target);
	relay(c, &r, up, host);
}

/* "http://A.B.C.D[:PORT]" with an optional trailing '/'. */
static int parse_upstream(const char *url, struct sockaddr_in *sa,
			  char host[32])
{
	const char *h = url + 7, *colon;
	char ip[16];
	size_t n;
	int64_t port = 80;
	struct cerr e = {0};

	memset(sa, 0, sizeof(*sa));
	if (strncmp(url, "http://", 7))
		return -1;
	n = strcspn(h, ":/");
	colon = h[n] == ':' ? h + n : NULL;
	if (n == 0 || n >= sizeof(ip))
		return -1;
	memcpy(ip, h, n);
	ip[n] = '\0';
	if (inet_pton(AF_INET, ip, &sa->sin_addr) != 1)
		return -1;
	if (colon) {
		char p[8];
		size_t pn = strcspn(colon + 1, "/");
		if (pn == 0 || pn >= sizeof(p))
			return -1;
		memcpy(p, colon + 1, pn);
		p[pn] = '\0';
		if (parse_int64(p, 1, 65535, &port, &e) < 0)
			return -1;
	}
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	snprintf(host, 32, "%s", ip);
	return 0;
}

int main(int argc, char **argv)
{
	const char *url = IMDS_UPSTREAM;
	enum log_level level = LOG_INFO;
	struct sockaddr_in up;
	char host[32];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--upstream") && i + 1 < argc)
			url = argv[++i];
		else if (!strcmp(argv[i], "-v"))
			level = LOG_DEBUG;
		else {
			fprintf(stderr, "usage: cell-imds [--upstream "
					"http://IPv4[:PORT]] [-v] < socket\n");
			return 2;
		}
	}
	log_init("cell-imds", level);
	if (parse_upstream(url, &up, host) < 0) {
		fprintf(stderr, "cell-imds: bad --upstream %s\n", url);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		int c = accept4(0, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0 && (errno == EINTR || errno == ECONNABORTED))
			continue;
		if (c < 0 && (errno == EMFILE || errno == ENFILE)) {
			usleep(100000);
			continue;
		}
		if (c < 0) {
			fprintf(stderr, "cell-imds: accept: %s\n",
				strerror(errno));
			return 1;
		}
		serve(c, &up, host);
		close(c);
	}
}
