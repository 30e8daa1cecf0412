// SPDX-License-Identifier: Apache-2.0
/* Probes: one attempt of each kind, and the per-unit state machine with the
 * kubelet's rules (pkg/kubelet/prober/worker.go). See probe.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "buf.h"
#include "cleanup.h"
#include "probe.h"
#include "runtime.h"
#include "util.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

#define NS_PER_S 1000000000ull
#define PROBE_BODY_MAX (10u << 10) /* the kubelet reads 10 KiB of body */
#define PROBE_DEFAULT_HOST "127.0.0.1"

static int timeout_ms(const struct probe *p)
{
	/* Kubernetes' default and minimum is 1 s. */
	return (p->timeout_s > 0 ? p->timeout_s : 1) * 1000;
}

static const char *probe_host(const struct probe *p, const struct probe_ctx *c)
{
	if (p->host && *p->host)
		return p->host;
	if (c->default_host && *c->default_host)
		return c->default_host;
	return PROBE_DEFAULT_HOST;
}

/* A named port the unit does not declare stays unresolved (port 0). */
static bool port_ok(const struct probe *p, char *why, size_t whysz)
{
	if (p->port > 0 && p->port <= 65535)
		return true;
	if (p->port_name)
		snprintf(why, whysz, "port \"%s\": no such named port",
			 p->port_name);
	else
		snprintf(why, whysz, "invalid port %d", p->port);
	return false;
}

/* ================================ exec ================================ */

/* Wait for pid up to ms; on timeout it is killed (the command dies with its
 * `cell-monitor exec`, which sets PDEATHSIG) and reaped. Returns the wait
 * status, or -1 on timeout. */
static int wait_timeout(pid_t pid, int ms, bool *timed_out)
{
	cleanup_close int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
	uint64_t deadline = now_ns() + (uint64_t)ms * 1000000u;
	int status = 0, r = 1;

	*timed_out = false;
	while (pfd >= 0) {
		uint64_t t = now_ns();
		int left = t >= deadline ? 0 : (int)((deadline - t) / 1000000u);
		struct pollfd pf = {.fd = pfd, .events = POLLIN};

		r = poll(&pf, 1, left);
		if (r >= 0 || errno != EINTR)
			break;
	}
	/* Without a pidfd (old kernel) we cannot bound the wait: kill. A
	 * timed-out command's whole tree goes (its cgroup), then the helper
	 * if it lingers. */
	if (r == 0 || pfd < 0) {
		*timed_out = r == 0;
		if (pfd >= 0 && runtime_exec_end(pfd) == 0) {
			struct pollfd pf = {.fd = pfd, .events = POLLIN};
			poll(&pf, 1, 2000);
		}
		kill(pid, SIGKILL);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR)
			return -1;
	}
	return *timed_out || pfd < 0 ? -1 : status;
}

static enum probe_result probe_exec(const struct probe *p,
				    const struct probe_ctx *c, char *why,
				    size_t whysz)
{
	struct exec_opts o = {.argv = p->exec_command,
			      .stdin_fd = -1,
			      .stdout_fd = -1,
			      .stderr_fd = -1};
	struct cerr e = {0};
	bool timed_out;
	pid_t pid;
	int st;

	if (!p->exec_command || !p->exec_command[0]) {
		snprintf(why, whysz, "exec: no command");
		return PROBE_FAILURE;
	}
	if (!c->monitor_bin || !c->unit_dir) {
		snprintf(why, whysz, "exec: no unit to run in");
		return PROBE_FAILURE;
	}
	pid = runtime_exec(c->monitor_bin, c->unit_dir, &o, &e);
	if (pid < 0) {
		snprintf(why, whysz, "exec %s: %s", p->exec_command[0], e.msg);
		return PROBE_FAILURE;
	}
	st = wait_timeout(pid, timeout_ms(p), &timed_out);
	if (timed_out) {
		snprintf(why, whysz, "command timed out after %ds",
			 timeout_ms(p) / 1000);
		return PROBE_FAILURE;
	}
	if (st < 0) {
		snprintf(why, whysz, "exec %s: cannot wait for it",
			 p->exec_command[0]);
		return PROBE_FAILURE;
	}
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return PROBE_SUCCESS;
	snprintf(why, whysz, "command %s exited with %d", p->exec_command[0],
		 WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
	return PROBE_FAILURE;
}

/* ================================ http ================================ */

/* A small HTTP/1.1 client: one GET, "Connection: close", plain or TLS over a
 * non-blocking socket, every step (connect, handshake, send, headers, body)
 * bounded by one deadline. The agent must not link libcurl for this (its
 * dependency tree costs megabytes of resident memory). */

#define HTTP_HEAD_MAX (16u << 10) /* status line and headers */
#define HTTP_USER_AGENT "kube-probe/cell"

/* What a probe asks for; the strings are borrowed. */
struct http_req {
	const char *host; /* a name, an IPv4 or a bare IPv6 literal */
	int port;
	bool https;
	const char *path; /* as sent */
};

/* One connection; ssl is NULL for plain HTTP. */
struct conn {
	int fd;
	SSL *ssl;
	uint64_t deadline;
};

static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static SSL_CTX *tls_ctx;

static void tls_init_once(void)
{
	tls_ctx = SSL_CTX_new(TLS_client_method());
	if (!tls_ctx)
		return;
	/* As the kubelet: HTTPS probes do not verify certificates. */
	SSL_CTX_set_verify(tls_ctx, SSL_VERIFY_NONE, NULL);
	/* Many servers close without close_notify; that is an EOF here. */
	SSL_CTX_set_options(tls_ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
}

/* No SSL_shutdown: the exchange is over whatever the server thinks, and a
 * close_notify could wait on, or write to, a closed connection. */
static void conn_close(struct conn *cn)
{
	/* Leave nothing of ours in this thread's OpenSSL error queue. */
	ERR_clear_error();
	SSL_free(cn->ssl);
	if (cn->fd >= 0)
		close(cn->fd);
}

static int ms_left(uint64_t deadline)
{
	uint64_t t = now_ns();

	/* Rounded up: poll(0) with time left would spin. */
	return t >= deadline ? 0 : (int)((deadline - t + 999999u) / 1000000u);
}

/* Wait until fd is ready for events or deadline: 0, ETIMEDOUT or errno. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd pf = {.fd = fd, .events = events};

	for (;;) {
		int r = poll(&pf, 1, ms_left(deadline));

		if (r > 0)
			return 0;
		if (r == 0)
			return ETIMEDOUT;
		if (errno != EINTR)
			return errno;
	}
}

/* probe_http turns ETIMEDOUT into "timeout after Ns". */
static int io_err(struct cerr *e, int err)
{
	return cerr_set(e, err, "%s", strerror(err));
}

/* A socket call failed with errno: 0 to call it again once fd is ready for
 * events, else -1 with e set. */
static int sock_again(const struct conn *cn, short events, struct cerr *e)
{
	int err = errno;

	if (err == EINTR)
		return 0;
	if (err != EAGAIN && err != EWOULDBLOCK)
		return io_err(e, err);
	err = wait_fd(cn->fd, events, cn->deadline);
	return err ? io_err(e, err) : 0;
}

/* A TLS call returned r: 1 to call it again (the socket is ready for what
 * it wants), 0 at EOF, -1 with e set. */
static int tls_again(const struct conn *cn, int r, struct cerr *e)
{
	int err = SSL_get_error(cn->ssl, r);
	const char *reason;
	unsigned long lib;

	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		err = wait_fd(cn->fd,
			      err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT,
			      cn->deadline);
		return err ? io_err(e, err) : 1;
	}
	if (err == SSL_ERROR_ZERO_RETURN)
		return 0;
	if (err == SSL_ERROR_SYSCALL && errno == EINTR)
		return 1;
	if (err == SSL_ERROR_SYSCALL) /* errno 0: an EOF */
		return errno ? io_err(e, errno) : 0;
	lib = ERR_peek_last_error();
	reason = lib ? ERR_reason_error_string(lib) : NULL;
	return cerr_set(e, EPROTO, "TLS: %s", reason ? reason : "error");
}

/* SNI names a server; an IP literal is not sent (RFC 6066). */
static bool ip_literal(const char *host)
{
	struct in_addr a;

	return strchr(host, ':') || inet_aton(host, &a);
}

static int tls_connect(struct conn *cn, const char *host, struct cerr *e)
{
	int r;

	pthread_once(&tls_once, tls_init_once);
	if (!tls_ctx)
		return cerr_set(e, ENOMEM, "TLS: cannot create a context");
	cn->ssl = SSL_new(tls_ctx);
	if (!cn->ssl || !SSL_set_fd(cn->ssl, cn->fd))
		return cerr_set(e, ENOMEM, "TLS: cannot set up a connection");
	if (!ip_literal(host) && !SSL_set_tlsext_host_name(cn->ssl, host))
		return cerr_set(e, EINVAL, "TLS: invalid server name");
	do {
		ERR_clear_error();
		r = SSL_connect(cn->ssl);
		if (r == 1)
			return 0;
	} while ((r = tls_again(cn, r, e)) == 1);
	if (r == 0)
		return cerr_set(e, ECONNRESET, "TLS: connection closed");
	return cerr_prefix(e, "TLS handshake");
}

/* Bytes read (waiting for some up to the deadline), 0 at EOF, or -1. */
static ssize_t conn_read(const struct conn *cn, char *b, size_t len,
			 struct cerr *e)
{
	for (;;) {
		size_t got = 0;
		ssize_t r;

		if (cn->ssl) {
			ERR_clear_error();
			if (SSL_read_ex(cn->ssl, b, len, &got) == 1)
				return (ssize_t)got;
			r = tls_again(cn, 0, e);
			if (r <= 0)
				return r;
			continue;
		}
		r = recv(cn->fd, b, len, 0);
		if (r >= 0)
			return r;
		if (sock_again(cn, POLLIN, e) < 0)
			return -1;
	}
}

/* Writing to a connection the server closed raises SIGPIPE, which send()
 * avoids with MSG_NOSIGNAL; OpenSSL writes with write(), so TLS relies on
 * cell-agent's main ignoring SIGPIPE (as it does, for the API's sockets). */
static int conn_write(const struct conn *cn, const char *b, size_t len,
		      struct cerr *e)
{
	while (len > 0) {
		size_t done = 0;
		ssize_t r;
		int again;

		if (cn->ssl) {
			ERR_clear_error();
			if (SSL_write_ex(cn->ssl, b, len, &done) != 1) {
				again = tls_again(cn, 0, e);
				if (again <= 0)
					return again ? -1 : io_err(e, EPIPE);
				continue;
			}
		} else {
			r = send(cn->fd, b, len, MSG_NOSIGNAL);
			if (r < 0) {
				if (sock_again(cn, POLLOUT, e) < 0)
					return -1;
				continue;
			}
			done = (size_t)r;
		}
		b += done;
		len -= done;
	}
	return 0;
}

static char *http_url(const struct http_req *rq)
{
	bool v6 = strchr(rq->host, ':') != NULL;

	return xasprintf("%s://%s%s%s:%d%s", rq->https ? "https" : "http",
			 v6 ? "[" : "", rq->host, v6 ? "]" : "", rq->port,
			 rq->path);
}

/* The path as sent: with a leading '/', and the bytes that would break the
 * request line (controls, space, non-ASCII) percent-encoded, as the
 * kubelet's URL encoding does. */
static char *http_path(const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	const char *s = path && *path ? path : "/";
	char *out = xmalloc(3 * strlen(s) + 2), *o = out;

	if (*s != '/')
		*o++ = '/';
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch > ' ' && ch < 0x7f) {
			*o++ = *s;
			continue;
		}
		*o++ = '%';
		*o++ = hex[ch >> 4];
		*o++ = hex[ch & 15];
	}
	*o = '\0';
	return out;
}

/* A header name is an RFC 9110 token, roughly: no controls, spaces or
 * colons. */
static bool hdr_name_ok(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f || *s == ':')
			return false;
	return true;
}

/* A value has no controls but tab: a CR or LF would end the header and let
 * the pod spec write its own. */
static bool hdr_value_ok(const char *s)
{
	for (; *s; s++)
		if (((unsigned char)*s < ' ' && *s != '\t') || *s == 0x7f)
			return false;
	return true;
}

/* The host goes into the Host header: no controls or spaces. */
static bool host_ok(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

static bool user_has(const struct probe *p, const char *name)
{
	for (size_t i = 0; i < p->n_http_headers; i++) {
		const char *n = p->http_headers[i].name;

		if (n && !strcasecmp(n, name))
			return true;
	}
	return false;
}

static void put(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s), NULL); /* no cap: cannot fail */
}

/* User headers come after our defaults and replace those of the same name
 * (Host, User-Agent, Accept), as the kubelet's do. */
static int put_user_headers(struct buf *b, const struct probe *p,
			    struct cerr *e)
{
	for (size_t i = 0; i < p->n_http_headers; i++) {
		const struct kv *h = &p->http_headers[i];
		const char *v = h->value ? h->value : "";

		if (!h->name || !*h->name)
			continue;
		if (!hdr_name_ok(h->name))
			return cerr_set(e, EINVAL,
					"invalid HTTP header name (httpHeaders"
					"[%zu])",
					i);
		if (!hdr_value_ok(v))
			return cerr_set(e, EINVAL,
					"invalid HTTP header value for \"%s\"",
					h->name);
		put(b, h->name);
		put(b, *v ? ": " : ":");
		put(b, v);
		put(b, "\r\n");
	}
	return 0;
}

/* The request, or NULL with e set. */
static char *http_request(const struct probe *p, const struct http_req *rq,
			  struct cerr *e)
{
	bool v6 = strchr(rq->host, ':') != NULL;
	bool dflt = rq->port == (rq->https ? 443 : 80);
	cleanup_free char *host =
	    xasprintf("%s%s%s", v6 ? "[" : "", rq->host, v6 ? "]" : "");
	struct buf b;

	if (!host_ok(rq->host)) {
		cerr_set(e, EINVAL, "invalid host");
		return NULL;
	}
	buf_init(&b, 0);
	put(&b, "GET ");
	put(&b, rq->path);
	put(&b, " HTTP/1.1\r\n");
	if (!user_has(p, "Host")) {
		put(&b, "Host: ");
		put(&b, host);
		if (!dflt) {
			char port[16];

			snprintf(port, sizeof(port), ":%d", rq->port);
			put(&b, port);
		}
		put(&b, "\r\n");
	}
	if (!user_has(p, "User-Agent"))
		put(&b, "User-Agent: " HTTP_USER_AGENT "\r\n");
	if (put_user_headers(&b, p, e) < 0) {
		buf_free(&b);
		return NULL;
	}
	if (!user_has(p, "Accept"))
		put(&b, "Accept: */*\r\n");
	put(&b, "Connection: close\r\n\r\n");
	return buf_steal(&b, NULL);
}

/* The end of the header block (after its empty line) if b[0..n) has it.
 * Bare LF line ends are accepted, as Go's client does. */
static bool head_end(const char *b, size_t n, size_t *end)
{
	for (size_t i = 0; i < n; i++) {
		if (b[i] != '\n')
			continue;
		if (i + 1 < n && b[i + 1] == '\n') {
			*end = i + 2;
			return true;
		}
		if (i + 2 < n && b[i + 1] == '\r' && b[i + 2] == '\n') {
			*end = i + 3;
			return true;
		}
	}
	return false;
}

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

/* "HTTP/1.x NNN[ reason]" on the first line: the code, or -1. */
static int parse_status(const char *b, size_t len)
{
	const char *eol = memchr(b, '\n', len);
	size_t l = eol ? (size_t)(eol - b) : 0;

	if (l && b[l - 1] == '\r')
		l--;
	if (l < 12 || memcmp(b, "HTTP/1.", 7) || !digit(b[7]) || b[8] != ' ')
		return -1;
	if (!digit(b[9]) || !digit(b[10]) || !digit(b[11]) || b[9] == '0')
		return -1;
	if (l > 12 && b[12] != ' ')
		return -1;
	return (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0');
}

/* Read up to the end of the final response's headers: its status code, or
 * -1 with e set. b holds *n bytes, the headers end at *end. Each read
 * parses the buffer again from the start (at most HTTP_HEAD_MAX bytes). */
static int read_head(const struct conn *cn, char *b, size_t *n, size_t *end,
		     struct cerr *e)
{
	for (;;) {
		size_t start, body;
		int code = probe_http_head(b, *n, &start, end, &body);
		ssize_t r;

		if (code > 0) {
			memmove(b, b + start, *n - start);
			*n -= start;
			*end -= start;
			return code;
		}
		if (code < 0)
			return cerr_set(e, EPROTO, "malformed HTTP response");
		if (*n == HTTP_HEAD_MAX)
			return cerr_set(e, EMSGSIZE,
					"response headers too large");
		r = conn_read(cn, b + *n, HTTP_HEAD_MAX - *n, e);
		if (r < 0)
			return -1;
		if (r == 0)
			return cerr_set(e, EPROTO, "%s",
					*n ? "malformed HTTP response"
					   : "empty reply from server");
		*n += (size_t)r;
	}
}

/* How much body to read: none after 204 or 304, Content-Length when given,
 * else up to EOF; at most PROBE_BODY_MAX. Stopping at Content-Length keeps a
 * server that ignores "Connection: close" from holding the probe until its
 * deadline. */
static size_t body_want(const char *b, size_t end, int code)
{
	static const char cl[] = "Content-Length:";
	const char *s = b, *lim = b + end;
	size_t v = 0;

	if (code == 204 || code == 304)
		return 0;
	while ((s = memchr(s, '\n', (size_t)(lim - s))) && ++s < lim) {
		if ((size_t)(lim - s) <= sizeof(cl) ||
		    strncasecmp(s, cl, sizeof(cl) - 1))
			continue;
		s += sizeof(cl) - 1;
		while (s < lim && (*s == ' ' || *s == '\t'))
			s++;
		if (s == lim || !digit(*s))
			break;
		for (; s < lim && digit(*s) && v < PROBE_BODY_MAX; s++)
			v = v * 10 + (size_t)(*s - '0');
		return v < PROBE_BODY_MAX ? v : PROBE_BODY_MAX;
	}
	return PROBE_BODY_MAX;
}

int probe_http_head(const char *b, size_t n, size_t *start, size_t *end,
		    size_t *body)
{
	size_t s = 0;

	for (;;) {
		int code;

		if (!head_end(b + s, n - s, end))
			return 0;
		code = parse_status(b + s, *end);
		if (code < 0)
			return -1;
		*end += s;
		/* An interim response (103 Early Hints): the final one
		 * follows, as it does for the kubelet's client. */
		if (code >= 200 || code == 101) {
			*start = s;
			*body = body_want(b + s, *end - s, code);
			return code;
		}
		s = *end;
	}
}

/* The body is read (so the server sees a normal exchange, not a reset for
 * unread data) but dropped; have bytes came with the headers. Its errors do
 * not matter: the status line has decided. */
static void drain(const struct conn *cn, char *b, size_t have, size_t want)
{
	struct cerr e;

	while (have < want) {
		size_t len =
		    want - have < HTTP_HEAD_MAX ? want - have : HTTP_HEAD_MAX;
		ssize_t r = conn_read(cn, b, len, &e);

		if (r <= 0)
			break;
		have += (size_t)r;
	}
}

static int tcp_dial(const char *host, int port, uint64_t deadline, int *fd,
		    struct cerr *e);

/* One exchange: the status code, or -1 with e set. */
static int http_get(const struct probe *p, const struct http_req *rq,
		    struct cerr *e)
{
	_cleanup_(conn_close) struct conn cn = {.fd = -1};
	cleanup_free char *req = http_request(p, rq, e);
	cleanup_free char *b = NULL;
	size_t n = 0, end = 0;
	int code;

	if (!req)
		return -1;
	cn.deadline = now_ns() + (uint64_t)timeout_ms(p) * 1000000u;
	if (tcp_dial(rq->host, rq->port, cn.deadline, &cn.fd, e) < 0)
		return -1;
	if (rq->https && tls_connect(&cn, rq->host, e) < 0)
		return -1;
	if (conn_write(&cn, req, strlen(req), e) < 0)
		return -1;
	b = xmalloc(HTTP_HEAD_MAX);
	code = read_head(&cn, b, &n, &end, e);
	if (code >= 0)
		drain(&cn, b, n - end, body_want(b, end, code));
	return code;
}

static enum probe_result probe_http(const struct probe *p,
				    const struct probe_ctx *c, char *why,
				    size_t whysz)
{
	bool https = p->scheme && !strcasecmp(p->scheme, "HTTPS");
	cleanup_free char *path = http_path(p->path), *url = NULL;
	struct http_req rq = {probe_host(p, c), p->port, https, path};
	struct cerr e = {0};
	int code;

	if (!port_ok(p, why, whysz))
		return PROBE_FAILURE;
	url = http_url(&rq);
	code = http_get(p, &rq, &e);
	if (code >= 200 && code < 400)
		return PROBE_SUCCESS;
	if (code >= 0)
		snprintf(why, whysz, "HTTP %d", code);
	else if (e.code == ETIMEDOUT)
		snprintf(why, whysz, "Get %s: timeout after %ds", url,
			 timeout_ms(p) / 1000);
	else
		snprintf(why, whysz, "Get %s: %s", url, e.msg);
	return PROBE_FAILURE;
}

/* ================================ tcp ================================= */

/* Connect to one address before deadline: 0 when connected (the socket in
 * *out if out is not NULL), else errno. */
static int tcp_try(const struct addrinfo *ai, uint64_t deadline, int *out)
{
	cleanup_close int fd = socket(
	    ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
	    ai->ai_protocol);
	int err = 0;
	socklen_t len = sizeof(err);

	if (fd < 0)
		return errno;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
		if (errno != EINPROGRESS)
			return errno;
		err = wait_fd(fd, POLLOUT, deadline);
		if (err)
			return err;
		if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			return errno;
		if (err)
			return err;
	}
	if (out)
		*out = steal_fd(&fd);
	return 0;
}

/* Resolve host and connect to its addresses in turn, all before deadline: 0
 * (the socket in *fd if fd is not NULL), or -1 with e set, e->code being
 * ETIMEDOUT when the deadline passed. */
static int tcp_dial(const char *host, int port, uint64_t deadline, int *fd,
		    struct cerr *e)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
				 .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL;
	char serv[16];
	int err = ECONNREFUSED, g;

	snprintf(serv, sizeof(serv), "%d", port);
	g = getaddrinfo(host, serv, &hints, &res);
	if (g != 0)
		return cerr_set(e, EHOSTUNREACH, "%s", gai_strerror(g));
	for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		err = tcp_try(ai, deadline, fd);
		if (err == 0 || err == ETIMEDOUT)
			break;
	}
	freeaddrinfo(res);
	return err ? io_err(e, err) : 0;
}

static enum probe_result probe_tcp(const struct probe *p,
				   const struct probe_ctx *c, char *why,
				   size_t whysz)
{
	const char *host = probe_host(p, c);
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms(p) * 1000000u;
	struct cerr e = {0};

	if (!port_ok(p, why, whysz))
		return PROBE_FAILURE;
	if (tcp_dial(host, p->port, deadline, NULL, &e) == 0)
		return PROBE_SUCCESS;
	snprintf(why, whysz, "dial tcp %s:%d: %s", host, p->port,
		 e.code == ETIMEDOUT ? "i/o timeout" : e.msg);
	return PROBE_FAILURE;
}

/* A lifecycle hook's sleep: its seconds, cut at the hook's timeout (a
 * preStop's grace period). */
static enum probe_result hook_sleep(const struct probe *p)
{
	int64_t s = p->sleep_s;
	struct timespec ts;

	if (p->timeout_s > 0 && s > p->timeout_s)
		s = p->timeout_s;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = 0;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return PROBE_SUCCESS;
}

enum probe_result probe_once(const struct probe *p, const struct probe_ctx *c,
			     char *why, size_t whysz)
{
	if (whysz)
		*why = '\0';
	switch (p->kind) {
	case PROBE_EXEC:
		return probe_exec(p, c, why, whysz);
	case PROBE_HTTP:
		return probe_http(p, c, why, whysz);
	case PROBE_TCP:
		return probe_tcp(p, c, why, whysz);
	case PROBE_SLEEP:
		return hook_sleep(p);
	case PROBE_NONE:
		break;
	}
	snprintf(why, whysz, "no probe handler");
	return PROBE_FAILURE;
}

/* =========================== the state machine ========================== */

static uint64_t secs(int s)
{
	return s > 0 ? (uint64_t)s * NS_PER_S : 0;
}

static uint64_t period_ns(const struct probe *p)
{
	/* Kubernetes' default period; a zero would spin. */
	return secs(p->period_s > 0 ? p->period_s : 10);
}

static int fail_threshold(const struct probe *p)
{
	return p->failure_threshold > 0 ? p->failure_threshold : 3;
}

static void schedule_first(struct probe_state *ps, const struct probe *p,
			   uint64_t start, uint64_t now)
{
	uint64_t due = start + secs(p->initial_delay_s);

	ps->scheduled = true;
	ps->next_due_ns = due > now ? due : now;
}

void probes_init(struct unit_probes *s, const struct unit_spec *u,
		 uint64_t now_ns)
{
	memset(s, 0, sizeof(*s));
	s->started_at_ns = now_ns;
	/* The kubelet's initial results: liveness succeeds, readiness and
	 * startup fail until a probe says otherwise. */
	s->liveness.ok = true;
	s->started = u->startup.kind == PROBE_NONE;
	if (!s->started) {
		schedule_first(&s->startup, &u->startup, now_ns, now_ns);
		return;
	}
	if (u->liveness.kind != PROBE_NONE)
		schedule_first(&s->liveness, &u->liveness, now_ns, now_ns);
	if (u->readiness.kind != PROBE_NONE)
		schedule_first(&s->readiness, &u->readiness, now_ns, now_ns);
}

uint64_t probes_next_due(const struct unit_probes *s)
{
	const struct probe_state *all[] = {&s->startup, &s->liveness,
					   &s->readiness};
	uint64_t best = 0;

	if (s->kill)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(all); i++) {
		if (all[i]->scheduled && !all[i]->in_flight &&
		    (best == 0 || all[i]->next_due_ns < best))
			best = all[i]->next_due_ns;
	}
	return best;
}

/* Take one probe if due: its next run is a fixed rate from the previous
 * due time (like the kubelet's ticker), skipping periods the caller
 * missed; it stays in flight (not due again) until its result is in. */
static bool take_one(struct probe_state *ps, const struct probe *p,
		     uint64_t now)
{
	uint64_t per = period_ns(p);

	if (!ps->scheduled || ps->in_flight || ps->next_due_ns > now)
		return false;
	ps->next_due_ns += per;
	if (ps->next_due_ns <= now)
		ps->next_due_ns = now + per;
	ps->in_flight = true;
	return true;
}

/* Fold one result into the probe's consecutive counts and thresholds. */
static void fold(struct unit_probes *s, struct probe_state *ps,
		 const struct probe *p, const char *label, enum probe_result r,
		 const char *why)
{
	ps->in_flight = false;
	if (r == PROBE_SUCCESS) {
		ps->failures = 0;
		if (++ps->successes >= p->success_threshold)
			ps->ok = true;
		return;
	}
	ps->successes = 0;
	snprintf(s->why, sizeof(s->why), "%s probe failed: %s", label,
		 why && *why ? why : "unknown error");
	if (++ps->failures >= fail_threshold(p))
		ps->ok = false;
}

const struct probe *probe_of(const struct unit_spec *u, enum probe_which w)
{
	return w == PROBE_STARTUP      ? &u->startup
	       : w == PROBE_LIVENESS   ? &u->liveness
	       : w == PROBE_POST_START ? &u->post_start
	       : w == PROBE_PRE_STOP   ? &u->pre_stop
				       : &u->readiness;
}

size_t probes_take_due(struct unit_probes *s, const struct unit_spec *u,
		       uint64_t now_ns, enum probe_which which[3])
{
	size_t n = 0;

	if (s->kill)
		return 0;
	if (!s->started) {
		if (take_one(&s->startup, &u->startup, now_ns))
			which[n++] = PROBE_STARTUP;
		return n;
	}
	if (take_one(&s->liveness, &u->liveness, now_ns))
		which[n++] = PROBE_LIVENESS;
	if (take_one(&s->readiness, &u->readiness, now_ns))
		which[n++] = PROBE_READINESS;
	return n;
}

static void startup_result(struct unit_probes *s, const struct unit_spec *u,
			   enum probe_result r, const char *why, uint64_t now)
{
	fold(s, &s->startup, &u->startup, "Startup", r, why);
	if (s->startup.ok) {
		/* Done for this run: liveness and readiness take over, with
		 * their initial delays still counted from the start. */
		s->started = true;
		s->startup.scheduled = false;
		if (u->liveness.kind != PROBE_NONE)
			schedule_first(&s->liveness, &u->liveness,
				       s->started_at_ns, now);
		if (u->readiness.kind != PROBE_NONE)
			schedule_first(&s->readiness, &u->readiness,
				       s->started_at_ns, now);
	} else if (s->startup.failures >= fail_threshold(&u->startup)) {
		s->kill = true;
	}
}

/* An attempt that outlasted its period: the next one a period after it
 * ended, never back to back on a slow endpoint. */
static void not_before(struct probe_state *ps, const struct probe *p,
		       uint64_t now)
{
	if (ps->scheduled && ps->next_due_ns <= now)
		ps->next_due_ns = now + period_ns(p);
}

void probes_result(struct unit_probes *s, const struct unit_spec *u,
		   enum probe_which w, enum probe_result r, const char *why,
		   uint64_t now_ns)
{
	if (s->kill)
		return;
	not_before(w == PROBE_STARTUP	 ? &s->startup
		   : w == PROBE_LIVENESS ? &s->liveness
					 : &s->readiness,
		   probe_of(u, w), now_ns);
	switch (w) {
	case PROBE_STARTUP:
		if (!s->started)
			startup_result(s, u, r, why, now_ns);
		break;
	case PROBE_LIVENESS:
		fold(s, &s->liveness, &u->liveness, "Liveness", r, why);
		if (!s->liveness.ok)
			s->kill = true;
		break;
	case PROBE_READINESS:
		fold(s, &s->readiness, &u->readiness, "Readiness", r, why);
		break;
	case PROBE_POST_START:
	case PROBE_PRE_STOP:
		break; /* lifecycle.c's */
	}
}

/* One probe, taken and run here. */
static void run_one(struct unit_probes *s, const struct unit_spec *u,
		    enum probe_which w, const struct probe_ctx *c, uint64_t now)
{
	probe_attempt_fn fn = c->attempt ? c->attempt : probe_once;
	struct probe_state *ps = w == PROBE_STARTUP    ? &s->startup
				 : w == PROBE_LIVENESS ? &s->liveness
						       : &s->readiness;
	const struct probe *p = probe_of(u, w);
	char why[200] = "";
	enum probe_result r;

	if (!take_one(ps, p, now))
		return;
	r = fn(p, c, why, sizeof(why));
	probes_result(s, u, w, r, why, now);
}

void probes_run_due(struct unit_probes *s, const struct unit_spec *u,
		    const struct probe_ctx *c, uint64_t now_ns,
		    struct probe_outcome *out)
{
	if (!s->kill && !s->started)
		run_one(s, u, PROBE_STARTUP, c, now_ns);
	if (!s->kill && s->started)
		run_one(s, u, PROBE_LIVENESS, c, now_ns);
	if (!s->kill && s->started)
		run_one(s, u, PROBE_READINESS, c, now_ns);
	probes_outcome(s, u, out);
}

void probes_outcome(const struct unit_probes *s, const struct unit_spec *u,
		    struct probe_outcome *out)
{
	out->started = s->started ? 1 : 0;
	out->kill = s->kill;
	if (!s->started || s->kill)
		out->ready = false;
	else if (u->readiness.kind == PROBE_NONE)
		out->ready = true;
	else
		out->ready = s->readiness.ok;
	snprintf(out->why, sizeof(out->why), "%s", s->why);
}
