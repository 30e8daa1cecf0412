/* The REST API on civetweb. One request handler takes every URI and
 * dispatches on the path itself (so that an unknown route is a plain-text
 * 404 like every other error, and the %3F log URL is handled in one place);
 * one websocket handler does the same for the streams.
 *
 * Threads: civetweb's workers run the handlers. A websocket stream also
 * has a pump thread of its own, which moves bytes from the process, the
 * log file or the forwarded port to the socket, sends pings and drops a
 * silent peer; the worker stays in civetweb's read loop and hands the
 * client's frames over. */

#include "api.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "agent-internal.h"
#include "cleanup.h"
#include "deploy.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "log.h"
#include "pullproc.h"
#include "path.h"
#include "tls.h"
#include "util.h"

/* musl has no close_range() wrapper; the raw system call works on both. */
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

#define API_PREFIX "/rest/v1/"
#define DEFAULT_THREADS 32
/* A stream holds a worker for its whole life; keep some for requests. */
#define MAX_STREAMS 16
#define QUERY_VALUE_MAX 4096
#define UNIT_NAME_MAX 253
#define IO_CHUNK 32768
/* What a client may send in one websocket message (fragments joined). */
#define WS_MSG_MAX (4u << 20)
/* stdin (or port-forward) bytes waiting for the process (or the port). */
#define STDIN_QUEUE_MAX (1u << 20)
#define PING_EVERY_MS 10000
#define SILENT_DROP_MS 15000
/* After a process exits, output still in the pipes is sent; a grandchild
 * that keeps them open must not hold the exit code back for long. */
#define DRAIN_AFTER_EXIT_NS (300ull * 1000000)
/* How long the peer gets to answer our close frame. */
#define CLOSE_WAIT_NS (2ull * 1000000000)
/* How long the backend's exec_end gets before SIGKILL. */
#define EXEC_END_WAIT_NS (2ull * 1000000000)
/* A body we refuse is read and thrown away up to this much, so that the
 * client sees our answer instead of a reset; past it the connection is
 * closed. */
#define DRAIN_MAX (16u << 20)

struct api {
	struct mg_context *ctx;
	struct api_backend b;
	int port;
	bool plain;
	char *ca, *crt, *key;
	char *version;
	char *packages_dir;
	char *unpack_bin;
	int pkgdirfd;
	struct tls_gate *gate; /* NULL with plain HTTP */
	atomic_int streams;
	uint64_t ping_ns, silence_ns;
	pthread_mutex_t resize_mu;
};

/* ======================================================================
 * replies
 * ====================================================================== */

int api_http_status(int err)
{
	switch (err) {
	case 0:
		return 200;
	case ENOENT:
	case ESRCH:
		return 404;
	case EINVAL:
	case EILSEQ:
	case ENAMETOOLONG:
	case EXDEV:
	case ELOOP:
	case ENOTDIR:
	case EISDIR:
		return 400;
	case EFBIG:
	case E2BIG:
	case EMSGSIZE:
		return 413;
	case EACCES:
	case EPERM:
		return 403;
	case EBUSY:
	case EAGAIN:
		return 503;
	default:
		return 500;
	}
}

static const char *reason(int status)
{
	switch (status) {
	case 200:
		return "OK";
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 413:
		return "Payload Too Large";
	case 503:
		return "Service Unavailable";
	default:
		return status >= 500 ? "Internal Server Error" : "Error";
	}
}

/* Does this connection stay open after the reply? HTTP/1.0 and an
 * explicit "Connection: close" end it. */
static bool wants_close(struct mg_connection *c)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	const char *h = mg_get_header(c, "Connection");

	if (h && !strcasecmp(h, "close"))
		return true;
	return !ri->http_version || strcmp(ri->http_version, "1.1") != 0;
}

/* The whole reply in one write: one TLS record and one packet for small
 * replies, which is most of them (status, ping). Buffers on worker paths
 * stay small or on the heap: civetweb's workers run on 256 KiB stacks
 * (USE_STACK_SIZE in the Makefile). */
static int reply(struct mg_connection *c, int status, const char *ctype,
		 const void *body, size_t len)
{
	char hdr[256];
	bool close = wants_close(c);
	int n;

	if (close)
		mg_disable_connection_keep_alive(c);
	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n"
		     "Content-Length: %zu\r\nCache-Control: no-store\r\n%s\r\n",
		     status, reason(status), ctype, len,
		     close ? "Connection: close\r\n" : "");
	if (len <= 4096) {
		char one[256 + 4096];

		memcpy(one, hdr, (size_t)n);
		if (len)
			memcpy(one + n, body, len);
		mg_write(c, one, (size_t)n + len);
	} else {
		mg_write(c, hdr, (size_t)n);
		mg_write(c, body, len);
	}
	return status;
}

static int reply_text(struct mg_connection *c, int status, const char *text)
{
	return reply(c, status, "text/plain; charset=utf-8", text,
		     strlen(text));
}

static int reply_err(struct mg_connection *c, const struct cerr *e)
{
	int status = api_http_status(e->code);
	const struct mg_request_info *ri = mg_get_request_info(c);

	log_info("%s %.200s: %d %s", ri->request_method, ri->local_uri, status,
		 e->msg);
	return reply_text(c, status, e->msg);
}

static int reply_errf(struct mg_connection *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int reply_errf(struct mg_connection *c, int code, const char *fmt, ...)
{
	struct cerr e = {.code = code};
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	va_end(ap);
	return reply_err(c, &e);
}

/* ======================================================================
 * requests: route, query, body
 * ====================================================================== */

/* A request's route: the path below /rest/v1/ and its query, which may
 * arrive the normal way or, from the controller's log-follow URL, inside
 * the path with its '?' percent-encoded (civetweb has decoded it by
 * then). */
struct route {
	char path[PATH_MAX_INPUT];
	const char *q1; /* the query found inside the path, or NULL */
	const char *q2; /* the query string proper, or NULL */
};

static int route_parse(const struct mg_request_info *ri, struct route *r)
{
	const char *u = ri->local_uri;
	size_t n;
	char *q;

	memset(r, 0, sizeof(*r));
	if (!u || strncmp(u, API_PREFIX, sizeof(API_PREFIX) - 1) != 0)
		return -1;
	u += sizeof(API_PREFIX) - 1;
	n = strlen(u);
	if (n >= sizeof(r->path))
		return -1;
	memcpy(r->path, u, n + 1);
	q = strchr(r->path, '?');
	if (q) {
		*q = '\0';
		r->q1 = q + 1;
	}
	r->q2 = ri->query_string;
	return 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Find name in one query string and decode its value into out. 1 found,
 * 0 not, -1 too long. */
static int query_find(const char *q, const char *name, char *out, size_t osz)
{
	size_t nl = strlen(name);

	while (q && *q) {
		const char *amp = strchr(q, '&'),
			   *end = amp ? amp : q + strlen(q);
		size_t o = 0;

		if ((size_t)(end - q) >= nl && !strncmp(q, name, nl) &&
		    (q + nl == end || q[nl] == '=')) {
			for (const char *p = q + nl + (q + nl < end); p < end;
			     p++) {
				char ch = *p;

				if (ch == '+')
					ch = ' ';
				else if (ch == '%' && end - p > 2 &&
					 hexval(p[1]) >= 0 &&
					 hexval(p[2]) >= 0) {
					ch = (char)(hexval(p[1]) * 16 +
						    hexval(p[2]));
					p += 2;
				}
				if (o + 1 >= osz)
					return -1;
				out[o++] = ch;
			}
			out[o] = '\0';
			return 1;
		}
		q = amp ? amp + 1 : NULL;
	}
	return 0;
}

static int query_get(const struct route *r, const char *name, char *out,
		     size_t osz)
{
	int f = query_find(r->q1, name, out, osz);

	return f != 0 ? f : query_find(r->q2, name, out, osz);
}

/* A non-negative integer parameter (0 when absent). */
static int query_int(const struct route *r, const char *name, int64_t *v,
		     struct cerr *e)
{
	char s[32];
	int f = query_get(r, name, s, sizeof(s));

	*v = 0;
	if (f < 0)
		return cerr_set(e, EINVAL, "parameter %s is too long", name);
	if (f == 0 || !s[0])
		return 0;
	/* Out of range (a negative count) is the client's mistake like any
	 * other bad number: 400, not the 500 that ERANGE would map to. */
	if (parse_int64(s, 0, INT64_MAX, v, e) < 0) {
		e->code = EINVAL;
		return cerr_prefix(e, "parameter %s", name);
	}
	return 0;
}

/* A flag: present and not "0"/"false". */
static bool query_flag(const struct route *r, const char *name)
{
	char s[16];

	if (query_get(r, name, s, sizeof(s)) <= 0)
		return false;
	return s[0] && strcmp(s, "0") != 0 && strcasecmp(s, "false") != 0;
}

/* Read and discard what is left of a refused body, up to DRAIN_MAX; past
 * that, the connection is closed instead. */
static void drain_body(struct mg_connection *c, uint64_t already)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	cleanup_free char *chunk = xmalloc(IO_CHUNK);
	uint64_t n = already;
	int r;

	if (ri->content_length > 0 &&
	    (uint64_t)ri->content_length > DRAIN_MAX + already) {
		mg_disable_connection_keep_alive(c);
		return;
	}
	while ((r = mg_read(c, chunk, IO_CHUNK)) > 0) {
		n += (uint64_t)r;
		if (n > DRAIN_MAX) {
			mg_disable_connection_keep_alive(c);
			return;
		}
	}
}

/* The whole body into out (whose max is the cap): EFBIG beyond it. */
static int read_body(struct mg_connection *c, struct buf *out, struct cerr *e)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	cleanup_free char *chunk = xmalloc(IO_CHUNK);
	int r;

	if (ri->content_length > 0 && (uint64_t)ri->content_length > out->max)
		return cerr_set(e, EFBIG, "body of %lld bytes is over %zu",
				ri->content_length, out->max);
	while ((r = mg_read(c, chunk, IO_CHUNK)) > 0)
		if (buf_append(out, chunk, (size_t)r, e) < 0)
			return cerr_set(e, EFBIG, "body is over %zu bytes",
					out->max);
	if (r < 0)
		return cerr_set(e, EIO, "reading the request body failed");
	return 0;
}

/* ======================================================================
 * processes
 * ====================================================================== */

static int sys_pidfd_send_signal(int pidfd, int sig)
{
	return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* The child's side of api_spawn, between clone and exec: only
 * async-signal-safe calls, errors go to the parent through errfd. */
static __attribute__((noreturn)) void spawn_child(char *const argv[],
						  char *const envp[],
						  const int stdio[3],
						  unsigned flags, int errfd)
{
	extern char **environ;
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;
	int fds[3];
	int err;

	/* Signals: no mask, no handlers, nothing ignored (civetweb ignores
	 * SIGPIPE, and ignored signals survive exec). */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL);
	/* Dies with the thread that started it (the supervisor's, or a
	 * worker: both live as long as the agent). */
	if ((flags & API_SPAWN_DIE_WITH_US) &&
	    prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		goto fail;
	if ((flags & (API_SPAWN_SETSID | API_SPAWN_TTY)) && setsid() < 0)
		goto fail;
	/* Move the fds above 2 first, so that dup2 onto 0..2 cannot clobber
	 * one still needed. */
	for (int i = 0; i < 3; i++) {
		fds[i] = stdio[i] >= 0 ? stdio[i]
				       : open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fds[i] < 0 ||
		    (fds[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 3)) < 0)
			goto fail;
	}
	for (int i = 0; i < 3; i++)
		if (dup2(fds[i], i) < 0)
			goto fail;
	if ((flags & API_SPAWN_TTY) && ioctl(0, TIOCSCTTY, 0) < 0)
		goto fail;
	/* Whatever else is open (a descriptor someone forgot to mark
	 * close-on-exec) stays with us. */
	syscall(SYS_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
	execve(argv[0], argv, envp ? envp : environ);
fail:
	err = errno;
	if (write(errfd, &err, sizeof(err)) < 0)
		_exit(127);
	_exit(127);
}

/* fork, with a pidfd from the start (no window in which the pid could be
 * reaped and reused before we hold it). clone3 first; the older clone for
 * kernels or sandboxes that refuse clone3. */
static pid_t clone_pidfd(int *pidfd)
{
	struct clone_args ca = {
	    .flags = CLONE_PIDFD,
	    .pidfd = (uint64_t)(uintptr_t)pidfd,
	    .exit_signal = SIGCHLD,
	};
	long r = syscall(SYS_clone3, &ca, sizeof(ca));

	if (r < 0 && errno == ENOSYS)
		r = syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, NULL, pidfd, NULL,
			    NULL);
	return (pid_t)r;
}

int api_spawn(char *const argv[], char *const envp[], const int stdio[3],
	      unsigned flags, pid_t *pid, struct cerr *e)
{
	int sync[2], pidfd = -1, err = 0;
	pid_t p;
	ssize_t n;

	if (!argv || !argv[0])
		return cerr_set(e, EINVAL, "nothing to run");
	if (pipe2(sync, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	p = clone_pidfd(&pidfd);
	if (p < 0) {
		close(sync[0]);
		close(sync[1]);
		return cerr_sys(e, "clone");
	}
	if (p == 0)
		spawn_child(argv, envp, stdio, flags, sync[1]);
	close(sync[1]);
	do
		n = read(sync[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(sync[0]);
	if (n == sizeof(err)) { /* exec failed; reap the child */
		api_wait(pidfd, false);
		close(pidfd);
		errno = err;
		return cerr_sys(e, "exec %s", argv[0]);
	}
	if (pid)
		*pid = p;
	return pidfd;
}

int api_wait(int pidfd, bool nohang)
{
	siginfo_t si;

	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PIDFD, (id_t)pidfd, &si,
			   WEXITED | __WALL | (nohang ? WNOHANG : 0)) == 0)
			break;
		if (errno != EINTR)
			return -1;
	}
	if (si.si_pid == 0)
		return -2;
	if (si.si_code == CLD_EXITED)
		return si.si_status;
	return 128 + si.si_status;
}

/* Read what the tool prints until it closes its end or the deadline. */
static void collect_output(int fd, struct buf *out, uint64_t deadline)
{
	char chunk[4096];
	struct cerr ig = {0};

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		uint64_t now = now_ns();
		int ms =
		    now >= deadline ? 0 : (int)((deadline - now) / 1000000);
		ssize_t r;

		if (ms == 0 || poll(&p, 1, ms) == 0)
			return;
		r = read(fd, chunk, sizeof(chunk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		if (out->max && out->len + (size_t)r > out->max)
			continue; /* keep reading so the tool can finish */
		buf_append(out, chunk, (size_t)r, &ig);
	}
}

int api_run(char *const argv[], struct buf *out, int timeout_s, struct cerr *e)
{
	int p[2], pidfd, rc;
	int stdio[3];
	uint64_t deadline = now_ns() + (uint64_t)timeout_s * 1000000000;

	if (pipe2(p, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	stdio[0] = -1;
	stdio[1] = stdio[2] = p[1];
	pidfd = api_spawn(argv, NULL, stdio, 0, NULL, e);
	close(p[1]);
	if (pidfd < 0) {
		close(p[0]);
		return -1;
	}
	collect_output(p[0], out, deadline);
	close(p[0]);
	/* Output closed; give the process what is left of its time to
	 * exit. */
	{
		struct pollfd pp = {.fd = pidfd, .events = POLLIN};
		uint64_t now = now_ns();

		if (now < deadline)
			poll(&pp, 1, (int)((deadline - now) / 1000000) + 1);
	}
	rc = api_wait(pidfd, true);
	if (rc == -2) {
		sys_pidfd_send_signal(pidfd, SIGKILL);
		log_warn("%s: killed after %d s", argv[0], timeout_s);
		rc = api_wait(pidfd, false);
	}
	close(pidfd);
	if (rc < 0)
		return cerr_sys(e, "wait for %s", argv[0]);
	return rc;
}

/* ======================================================================
 * status JSON: the pod IP and whether a unit runs
 * ====================================================================== */

static json_t *status_get(struct api *a)
{
	cleanup_free char *s =
	    a->b.status_json ? a->b.status_json(a->b.ctx) : NULL;

	return s ? json_loads(s, 0, NULL) : NULL;
}

/* The pod IP that port-forward dials ("" in the status: localhost). */
static void status_pod_ip(struct api *a, char *out, size_t n)
{
	cleanup_json json_t *j = status_get(a);
	const char *ip = j ? jstr(j, "podIP") : NULL;

	snprintf(out, n, "%s", ip && *ip ? ip : "127.0.0.1");
}

static json_t *find_unit(json_t *j, const char *unit)
{
	static const char *const lists[] = {"unitStatus", "initUnitStatus"};

	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		json_t *arr = json_object_get(j, lists[l]), *u;
		size_t i;

		if (!*unit && l == 0 && json_array_size(arr))
			return json_array_get(arr, 0);
		json_array_foreach(arr, i, u)
		{
			const char *n = jstr(u, "name");
			if (n && !strcmp(n, unit))
				return u;
		}
	}
	return NULL;
}

/* 1 running, 0 not, -1 unknown (no status, or the unit is not in it). */
static int status_unit_running(struct api *a, const char *unit)
{
	cleanup_json json_t *j = status_get(a);
	json_t *u = j ? find_unit(j, unit) : NULL, *st;

	if (!u)
		return -1;
	st = json_object_get(u, "state");
	return json_is_object(json_object_get(st, "running")) ? 1 : 0;
}

/* ======================================================================
 * HTTP endpoints
 * ====================================================================== */

static int h_updatepod(struct api *a, struct mg_connection *c)
{
	struct buf body;
	struct cerr e = {0};
	int r;

	buf_init(&body, UPDATEPOD_MAX);
	if (read_body(c, &body, &e) < 0) {
		if (e.code == EFBIG)
			drain_body(c, body.len);
		buf_free(&body);
		return reply_err(c, &e);
	}
	if (!a->b.update_pod)
		r = cerr_set(&e, ENOTSUP, "updatepod is not supported");
	else
		r = a->b.update_pod(a->b.ctx, body.data ? body.data : "",
				    body.len, &e);
	buf_free(&body);
	if (r < 0) {
		/* Only a body that does not parse is the client's fault. */
		if (e.code != EINVAL)
			e.code = EIO;
		return reply_err(c, &e);
	}
	return reply_text(c, 200, "");
}

static int h_status(struct api *a, struct mg_connection *c)
{
	cleanup_free char *s =
	    a->b.status_json ? a->b.status_json(a->b.ctx) : NULL;

	if (!s)
		return reply_errf(c, EIO, "no status available");
	return reply(c, 200, "application/json", s, strlen(s));
}

static bool unit_name_ok(const char *u)
{
	size_t n = strnlen(u, UNIT_NAME_MAX + 1);

	if (n > UNIT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)u[i] < ' ' || u[i] == '/' || u[i] == 127)
			return false;
	return true;
}

struct logq {
	char unit[UNIT_NAME_MAX + 1];
	int64_t lines, bytes;
	bool follow, metadata, previous;
};

static int logq_parse(const struct route *r, struct logq *q, struct cerr *e)
{
	const char *u = r->path + 4; /* after "logs" */

	memset(q, 0, sizeof(*q));
	if (*u == '/')
		u++;
	if (!unit_name_ok(u))
		return cerr_set(e, EINVAL, "bad unit name");
	snprintf(q->unit, sizeof(q->unit), "%s", u);
	if (query_int(r, "lines", &q->lines, e) < 0 ||
	    query_int(r, "bytes", &q->bytes, e) < 0)
		return -1;
	q->follow = query_flag(r, "follow");
	q->metadata = query_flag(r, "metadata");
	q->previous = query_flag(r, "previous");
	return 0;
}

static char *log_path(struct api *a, const char *unit, bool previous,
		      struct cerr *e)
{
	char *p;

	if (!a->b.log_path) {
		cerr_set(e, ENOENT, "no logs");
		return NULL;
	}
	p = a->b.log_path(a->b.ctx, unit, previous, e);
	if (!p && !e->code)
		cerr_set(e, ENOENT, "no unit '%s'", unit);
	if (!p && e->code != ENOENT)
		e->code = EIO;
	return p;
}

static int h_logs(struct api *a, struct mg_connection *c, const struct route *r)
{
	struct logq q;
	struct cerr e = {0};
	cleanup_free char *path = NULL;
	cleanup_close int fd = -1;
	struct buf out;
	struct stat st;
	int status;

	if (logq_parse(r, &q, &e) < 0)
		return reply_err(c, &e);
	if (q.follow)
		return reply_errf(c, EINVAL,
				  "follow needs a websocket upgrade");
	path = log_path(a, q.unit, q.previous, &e);
	if (!path)
		return reply_err(c, &e);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT)
		return reply_text(c, 200, ""); /* the unit has not run yet */
	if (fd < 0 || fstat(fd, &st) < 0) {
		cerr_sys(&e, "log of unit '%s'", q.unit);
		e.code = EIO;
		return reply_err(c, &e);
	}
	buf_init(&out, 0);
	if (files_log_tail(path, fd, st.st_size, q.lines, q.bytes, q.metadata,
			   &out, &e) < 0)
		status = reply_err(c, &e);
	else
		status = reply(c, 200, "text/plain; charset=utf-8",
			       out.data ? out.data : "", out.len);
	buf_free(&out);
	return status;
}

static int h_file(struct mg_connection *c, const struct route *r)
{
	char path[QUERY_VALUE_MAX];
	int64_t lines, bytes;
	struct cerr e = {0};
	struct buf out;
	int f = query_get(r, "path", path, sizeof(path)), status;

	if (f < 0)
		return reply_errf(c, EINVAL, "path parameter is too long");
	if (f == 0 || !path[0])
		return reply_errf(c, EINVAL, "missing path parameter");
	/* A relative path would be resolved against the agent's working
	 * directory, which means nothing to the controller. */
	if (path[0] != '/')
		return reply_errf(c, EINVAL, "path '%.200s' is not absolute",
				  path);
	if (query_int(r, "lines", &lines, &e) < 0 ||
	    query_int(r, "bytes", &bytes, &e) < 0)
		return reply_err(c, &e);
	buf_init(&out, 0);
	if (files_tail(path, lines, bytes, &out, &e) < 0)
		status = reply_err(c, &e);
	else
		status = reply(c, 200, "text/plain; charset=utf-8",
			       out.data ? out.data : "", out.len);
	buf_free(&out);
	return status;
}

struct upload {
	int fd;
	uint64_t n;
};

static int upload_sink(void *ud, const void *p, size_t n, struct cerr *e)
{
	struct upload *u = ud;

	u->n += n;
	if (u->n > DEPLOY_UPLOAD_MAX)
		return cerr_set(e, EFBIG, "package is over %llu MiB",
				DEPLOY_UPLOAD_MAX >> 20);
	if (fs_write_all(u->fd, p, n) < 0)
		return cerr_sys(e, "write the package to disk");
	return 0;
}

/* An unnamed file in the packages directory (same filesystem, and it
 * vanishes with the process whatever happens). */
static int upload_file(struct api *a, struct cerr *e)
{
	int fd = openat(a->pkgdirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	char name[64];

	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR))
		return fd >= 0 ? fd : cerr_sys(e, "temporary file");
	snprintf(name, sizeof(name), ".upload-%d-%llu", (int)getpid(),
		 (unsigned long long)now_ns());
	fd = openat(a->pkgdirfd, name,
		    O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return cerr_sys(e, "temporary file");
	unlinkat(a->pkgdirfd, name, 0);
	return fd;
}

/* Stream the multipart body through the parser into fd. */
static int receive_package(struct mg_connection *c, const char *boundary,
			   int fd, struct cerr *e)
{
	struct upload u = {.fd = fd};
	struct mpart *m = mpart_new(boundary, "package", upload_sink, &u);
	cleanup_free char *chunk = xmalloc(IO_CHUNK);
	uint64_t total = 0;
	int r, rc = -1;

	while ((r = mg_read(c, chunk, IO_CHUNK)) > 0) {
		total += (uint64_t)r;
		if (total > DEPLOY_UPLOAD_MAX + (1u << 20)) {
			cerr_set(e, EFBIG, "request body is over %llu MiB",
				 DEPLOY_UPLOAD_MAX >> 20);
			goto out;
		}
		if (mpart_feed(m, chunk, (size_t)r, e) < 0)
			goto out;
	}
	if (r < 0) {
		cerr_set(e, EIO, "reading the request body failed");
		goto out;
	}
	rc = mpart_finish(m, e);
out:
	mpart_free(m);
	return rc;
}

/* The extractor needs libarchive: it runs as a child, cell-unpack, with
 * the package on its stdin. */
static int deploy_in_child(struct api *a, const char *name, int fd,
			   struct cerr *e)
{
	const char *argv[] = {
	    a->unpack_bin, "--packages-dir", a->packages_dir, "--name", name,
	    NULL};

	return pullproc_run((char *const *)argv, fd, e);
}

static int h_deploy(struct api *a, struct mg_connection *c,
		    const struct route *r)
{
	const struct mg_request_info *ri = mg_get_request_info(c);
	const char *pod = r->path + 7, *slash = strchr(pod, '/'), *name;
	char boundary[MPART_BOUNDARY_MAX + 1];
	struct cerr e = {0};
	cleanup_close int fd = -1;

	if (!slash || slash == pod || strchr(slash + 1, '/'))
		return reply_errf(c, EINVAL,
				  "want deploy/<pod>/<name>, got '%.200s'",
				  r->path);
	name = slash + 1;
	if (!deploy_name_ok(name))
		return reply_errf(c, EINVAL, "bad package name '%.200s'", name);
	if (mpart_boundary(mg_get_header(c, "Content-Type"), boundary,
			   sizeof(boundary), &e) < 0)
		return reply_err(c, &e);
	if (ri->content_length > 0 &&
	    (uint64_t)ri->content_length > DEPLOY_UPLOAD_MAX + (1u << 20)) {
		mg_disable_connection_keep_alive(c);
		return reply_errf(c, EFBIG, "package is over %llu MiB",
				  DEPLOY_UPLOAD_MAX >> 20);
	}
	fd = upload_file(a, &e);
	if (fd < 0 || receive_package(c, boundary, fd, &e) < 0) {
		/* The rest of the body is not worth reading: close. */
		mg_disable_connection_keep_alive(c);
		return reply_err(c, &e);
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		cerr_sys(&e, "rewind the package");
		return reply_err(c, &e);
	}
	if (deploy_in_child(a, name, fd, &e) < 0)
		return reply_err(c, &e);
	log_info("deployed package %s for pod %.*s", name, (int)(slash - pod),
		 pod);
	return reply_text(c, 200, "");
}

static int h_resize(struct api *a, struct mg_connection *c)
{
	struct resize_opts o = {
	    .root_device = getenv("CELL_AGENT_ROOT_DEVICE"),
	    .root_mount = getenv("CELL_AGENT_ROOT_MOUNT"),
	    .tool = getenv("CELL_AGENT_PARTITION_TOOL"),
	};
	struct cerr e = {0};
	struct buf log;
	int status;

	buf_init(&log, 64 * 1024);
	pthread_mutex_lock(&a->resize_mu);
	if (files_resize_root(&o, &log, &e) < 0) {
		/* The request is fine; the cell could not do it. */
		e.code = EIO;
		status = reply_err(c, &e);
	} else {
		status = reply(c, 200, "text/plain; charset=utf-8",
			       log.data ? log.data : "", log.len);
	}
	pthread_mutex_unlock(&a->resize_mu);
	buf_free(&log);
	return status;
}

static bool is_stream_route(const char *p)
{
	return !strcmp(p, "exec") || !strcmp(p, "exec/") ||
	       !strcmp(p, "attach") || !strcmp(p, "attach/") ||
	       !strcmp(p, "portforward") || !strcmp(p, "portforward/");
}

static bool method_is(struct mg_connection *c, const char *m)
{
	return !strcmp(mg_get_request_info(c)->request_method, m);
}

static int dispatch(struct api *a, struct mg_connection *c,
		    const struct route *r)
{
	const char *p = r->path;
	bool get = method_is(c, "GET"), post = method_is(c, "POST");

	if (!strcmp(p, "ping"))
		return get ? reply_text(c, 200, "pong") : -1;
	if (!strcmp(p, "version"))
		return get ? reply_text(c, 200, a->version) : -1;
	if (!strcmp(p, "status"))
		return get ? h_status(a, c) : -1;
	if (!strcmp(p, "updatepod"))
		return post ? h_updatepod(a, c) : -1;
	if (!strcmp(p, "logs") || !strncmp(p, "logs/", 5))
		return get ? h_logs(a, c, r) : -1;
	if (!strcmp(p, "file") || !strcmp(p, "file/"))
		return get ? h_file(c, r) : -1;
	if (!strncmp(p, "deploy/", 7))
		return post ? h_deploy(a, c, r) : -1;
	if (!strcmp(p, "resizevolume"))
		return post ? h_resize(a, c) : -1;
	if (is_stream_route(p))
		return reply_errf(c, EINVAL, "%s needs a websocket upgrade", p);
	return reply_errf(c, ENOENT, "no such endpoint: %.200s",
			  mg_get_request_info(c)->local_uri);
}

static int on_request(struct mg_connection *c, void *cbdata)
{
	struct api *a = cbdata;
	const struct mg_request_info *ri = mg_get_request_info(c);
	struct route r;
	int status;

	if (route_parse(ri, &r) < 0)
		return reply_errf(c, ENOENT, "no such endpoint: %.200s",
				  ri->local_uri ? ri->local_uri : "");
	status = dispatch(a, c, &r);
	if (status < 0)
		status = reply_text(c, 405, "method not allowed\n");
	log_debug("%s %.200s: %d", ri->request_method, ri->local_uri, status);
	return status;
}

/* ======================================================================
 * websocket streams
 * ====================================================================== */

enum stream_kind { ST_LOGS, ST_EXEC, ST_ATTACH, ST_PORTFORWARD };

struct stream {
	struct api *a;
	struct mg_connection *conn;
	enum stream_kind kind;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool closed;  /* the close handler has run: conn is going away */
	bool started; /* the pump thread runs */
	bool ending;  /* the pump has said goodbye */
	pthread_t thread;
	int wake[2];
	int sock; /* the connection's socket, or -1 when not found */
	_Atomic uint64_t last_rx;
	bool in_eof; /* the client's stdin has ended */
	bool got_params;
	bool params_ok; /* the parameters were good: the pump may run */
	uint64_t params_by;
	struct buf first; /* a log's tail, sent before it is followed */
	struct buf msg;	  /* a fragmented message being joined */
	struct buf in;	  /* bytes for the process or the port */
	/* exec */
	int pidfd, in_fd, out_fd, err_fd, tty_fd;
	pid_t pid;
	/* logs and attach */
	struct logq q;
	struct logtail *tail;
	/* port-forward */
	int pf_fd;
};

/* ---- framing: one ASCII digit, then standard base64 ---- */

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64_encode(const unsigned char *in, size_t n, char *out)
{
	size_t o = 0, i;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 |
			     in[i + 2];
		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = b64[(v >> 6) & 63];
		out[o++] = b64[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 |
			     (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
		out[o++] = b64[v >> 18];
		out[o++] = b64[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	return o;
}

static int b64_val(char c)
{
	const char *p = c ? strchr(b64, c) : NULL;

	return p ? (int)(p - b64) : -1;
}

/* Decode in place (padding optional); -1 when not base64. */
static ssize_t b64_decode(char *s, size_t n)
{
	size_t o = 0;
	uint32_t acc = 0;
	int bits = 0, pad = 0;

	for (size_t i = 0; i < n; i++) {
		int v;

		if (s[i] == '=') {
			if (++pad > 2)
				return -1;
			continue;
		}
		if (pad || (v = b64_val(s[i])) < 0)
			return -1;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			s[o++] = (char)(acc >> bits);
		}
	}
	return (ssize_t)o;
}

static int ws_send(struct stream *s, int ch, const void *p, size_t n)
{
	size_t cap = 1 + (n + 2) / 3 * 4;
	char stackbuf[4096];
	char *f = cap <= sizeof(stackbuf) ? stackbuf : xmalloc(cap);
	int r;

	f[0] = (char)('0' + ch);
	cap = 1 + b64_encode(p, n, f + 1);
	r = mg_websocket_write(s->conn, MG_WEBSOCKET_OPCODE_TEXT, f, cap);
	if (f != stackbuf)
		free(f);
	return r > 0 ? 0 : -1;
}

static int ws_send_text(struct stream *s, int ch, const char *text)
{
	return ws_send(s, ch, text, strlen(text));
}

/* Send in pieces small enough for the peer's buffers. */
static int ws_send_all(struct stream *s, int ch, const char *p, size_t n)
{
	while (n) {
		size_t k = n < 65536 ? n : 65536;

		if (ws_send(s, ch, p, k) < 0)
			return -1;
		p += k;
		n -= k;
	}
	return 0;
}

static void ws_close_frame(struct stream *s, int code)
{
	unsigned char b[2] = {(unsigned char)(code >> 8), (unsigned char)code};

	mg_websocket_write(s->conn, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE,
			   (const char *)b, 2);
}

/* ---- the socket under a connection ----
 *
 * civetweb 1.15 cannot close a websocket from another thread, and its read
 * loop never gives up on a silent peer. Shutting the socket down does
 * both, so the pump needs the fd: it is the one whose two ends match the
 * connection's addresses. It is used only while the close handler has not
 * run (under s->mu), so it cannot be a reused number. */
static bool addr_is(const struct sockaddr_storage *ss, const char *ip, int port)
{
	char buf[INET6_ADDRSTRLEN];
	const void *a;
	int p;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;
		a = &in->sin_addr;
		p = ntohs(in->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		a = &in6->sin6_addr;
		p = ntohs(in6->sin6_port);
	} else {
		return false;
	}
	if (p != port || !inet_ntop(ss->ss_family, a, buf, sizeof(buf)))
		return false;
	/* civetweb prints v4-mapped peers of a v6 socket without "::ffff:". */
	return !strcmp(buf, ip) ||
	       (!strncmp(buf, "::ffff:", 7) && !strcmp(buf + 7, ip));
}

static int find_sock(const struct mg_request_info *ri)
{
	cleanup_dir DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	while (d && (de = readdir(d))) {
		struct sockaddr_storage peer, local;
		socklen_t pl = sizeof(peer), ll = sizeof(local);
		int64_t fd;
		struct cerr e = {0};

		if (parse_int64(de->d_name, 0, INT_MAX, &fd, &e) < 0)
			continue;
		if (getpeername((int)fd, (struct sockaddr *)&peer, &pl) < 0 ||
		    getsockname((int)fd, (struct sockaddr *)&local, &ll) < 0)
			continue;
		if (addr_is(&peer, ri->remote_addr, ri->remote_port) &&
		    (local.ss_family == AF_INET
			 ? ntohs(((struct sockaddr_in *)&local)->sin_port)
			 : ntohs(((struct sockaddr_in6 *)&local)->sin6_port)) ==
			ri->server_port)
			return (int)fd;
	}
	return -1;
}

/* Drop the connection under civetweb's feet: its read loop ends and the
 * close handler runs. */
static void stream_hangup(struct stream *s)
{
	pthread_mutex_lock(&s->mu);
	if (!s->closed && s->sock >= 0)
		shutdown(s->sock, SHUT_RDWR);
	pthread_mutex_unlock(&s->mu);
}

static bool stream_closed(struct stream *s)
{
	bool c;

	pthread_mutex_lock(&s->mu);
	c = s->closed;
	pthread_mutex_unlock(&s->mu);
	return c;
}

static void stream_wake(struct stream *s)
{
	char b = 1;

	if (write(s->wake[1], &b, 1) < 0 && errno != EAGAIN)
		log_debug("stream wake: %s", strerror(errno));
}

static void drain_wake(struct stream *s)
{
	char b[64];

	while (read(s->wake[0], b, sizeof(b)) > 0)
		;
}

/* The pump's goodbye: a close frame, a moment for the peer to answer it,
 * then the socket is shut. */
static void stream_finish(struct stream *s, int code)
{
	struct timespec ts;
	uint64_t until = now_ns() + CLOSE_WAIT_NS;

	pthread_mutex_lock(&s->mu);
	s->ending = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	ws_close_frame(s, code);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(CLOSE_WAIT_NS / 1000000000);
	pthread_mutex_lock(&s->mu);
	while (!s->closed && now_ns() < until)
		if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == ETIMEDOUT)
			break;
	if (!s->closed && s->sock >= 0)
		shutdown(s->sock, SHUT_RDWR);
	pthread_mutex_unlock(&s->mu);
}

/* Pings and the silence check, for every pump loop. Returns the poll
 * timeout in ms until the next check, or -1 when the peer is gone. */
static int keepalive(struct stream *s, uint64_t *next_ping)
{
	uint64_t now = now_ns(), last = atomic_load(&s->last_rx);

	if (now - last > s->a->silence_ns) {
		log_info("stream: peer silent for %llu ms, dropping it",
			 (unsigned long long)(s->a->silence_ns / 1000000));
		stream_hangup(s);
		return -1;
	}
	if (now >= *next_ping) {
		if (mg_websocket_write(s->conn, MG_WEBSOCKET_OPCODE_PING, "",
				       0) <= 0)
			return -1;
		*next_ping = now + s->a->ping_ns;
	}
	{
		uint64_t t = *next_ping < last + s->a->silence_ns
				 ? *next_ping
				 : last + s->a->silence_ns;
		return t > now ? (int)((t - now) / 1000000) + 1 : 0;
	}
}

/* ---- stdin (and port-forward) queue: worker → pump ---- */

static int queue_input(struct stream *s, const char *p, size_t n)
{
	struct cerr e = {0};
	int r = 0;

	pthread_mutex_lock(&s->mu);
	/* Back-pressure: the worker waits while the process is not reading,
	 * as a TCP sender would. */
	while (s->in.len + n > STDIN_QUEUE_MAX && s->in.len && !s->ending &&
	       !s->closed) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&s->cv, &s->mu, &ts);
	}
	if (!s->ending && n)
		r = buf_append(&s->in, p, n, &e);
	pthread_mutex_unlock(&s->mu);
	stream_wake(s);
	return r;
}

/* Write what is queued to fd (non-blocking). -1 when fd is gone. */
static int flush_input(struct stream *s, int fd)
{
	ssize_t w;

	pthread_mutex_lock(&s->mu);
	w = s->in.len ? write(fd, s->in.data, s->in.len) : 0;
	if (w > 0) {
		memmove(s->in.data, s->in.data + w, s->in.len - (size_t)w);
		s->in.len -= (size_t)w;
		pthread_cond_broadcast(&s->cv);
	}
	pthread_mutex_unlock(&s->mu);
	if (w < 0 && errno != EAGAIN && errno != EINTR)
		return -1;
	return 0;
}

static bool input_pending(struct stream *s)
{
	bool p;

	pthread_mutex_lock(&s->mu);
	p = s->in.len > 0;
	pthread_mutex_unlock(&s->mu);
	return p;
}

/* Once everything queued has been written after the client's end of
 * stdin, the process sees the end too: its pipe is closed; a terminal gets
 * its EOF character (^D), as if typed, and stays open for the output. */
static void close_input_at_eof(struct stream *s)
{
	bool eof;

	pthread_mutex_lock(&s->mu);
	eof = s->in_eof && s->in.len == 0;
	pthread_mutex_unlock(&s->mu);
	if (!eof || s->in_fd < 0)
		return;
	if (s->tty_fd >= 0) {
		struct termios t;
		char c = 4;

		if (tcgetattr(s->tty_fd, &t) == 0 && t.c_cc[VEOF])
			c = (char)t.c_cc[VEOF];
		if (write(s->in_fd, &c, 1) < 0 && errno == EAGAIN)
			return; /* the terminal is full: next time */
	}
	close(s->in_fd);
	s->in_fd = -1;
}

/* ---- exec ---- */

/* Read once from an output fd and send it on ch. 0 data, 1 end, -1 the
 * socket failed. */
static int pump_output(struct stream *s, int *fd, int ch)
{
	char b[IO_CHUNK];
	ssize_t r = read(*fd, b, sizeof(b));

	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (r <= 0) { /* EOF, or EIO from a pty whose slave is gone */
		close(*fd);
		*fd = -1;
		return 1;
	}
	return ws_send(s, ch, b, (size_t)r) < 0 ? -1 : 0;
}

struct pollset {
	struct pollfd p[6];
	int n;
};

static int ps_add(struct pollset *ps, int fd, short ev)
{
	if (fd < 0 || !ev)
		return -1;
	ps->p[ps->n] = (struct pollfd){.fd = fd, .events = ev};
	return ps->n++;
}

static short ps_rev(const struct pollset *ps, int i)
{
	return i >= 0 ? ps->p[i].revents : 0;
}

static void exec_loop(struct stream *s)
{
	uint64_t next_ping = now_ns() + s->a->ping_ns, exited_at = 0;
	int code = -1;

	for (;;) {
		struct pollset ps = {.n = 0};
		int iw, io, ie, ip, ii, t = keepalive(s, &next_ping);

		if (t < 0 || stream_closed(s))
			return;
		if (exited_at && ((s->out_fd < 0 && s->err_fd < 0) ||
				  now_ns() > exited_at + DRAIN_AFTER_EXIT_NS))
			break;
		iw = ps_add(&ps, s->wake[0], POLLIN);
		io = ps_add(&ps, s->out_fd, POLLIN);
		ie = ps_add(&ps, s->err_fd, POLLIN);
		ip = ps_add(&ps, exited_at ? -1 : s->pidfd, POLLIN);
		ii = ps_add(&ps, s->in_fd, input_pending(s) ? POLLOUT : 0);
		if (exited_at)
			t = 20;
		if (poll(ps.p, (nfds_t)ps.n, t) < 0 && errno != EINTR)
			return;
		if (ps_rev(&ps, iw))
			drain_wake(s);
		if (ps_rev(&ps, io) && pump_output(s, &s->out_fd, 1) < 0)
			return;
		if (ps_rev(&ps, ie) && pump_output(s, &s->err_fd, 2) < 0)
			return;
		if (ps_rev(&ps, ii) && flush_input(s, s->in_fd) < 0) {
			close(s->in_fd);
			s->in_fd = -1;
		}
		close_input_at_eof(s);
		if (ps_rev(&ps, ip) &&
		    (code = api_wait(s->pidfd, true)) != -2) {
			exited_at = now_ns();
			close(s->pidfd);
			s->pidfd = -1;
		}
	}
	{
		char num[16];
		snprintf(num, sizeof(num), "%d", code);
		ws_send_text(s, 3, num);
	}
	stream_finish(s, 1000);
}

/* The child's ends of stdin/stdout/stderr; ours go into s. */
static int exec_stdio(struct stream *s, const struct api_exec_req *req,
		      int child[3], struct cerr *e)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2];

	if (req->tty) {
		char name[64];
		int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC), sl;

		if (m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 ||
		    ptsname_r(m, name, sizeof(name)) != 0) {
			if (m >= 0)
				close(m);
			return cerr_sys(e, "pty");
		}
		sl = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
		if (sl < 0) {
			close(m);
			return cerr_sys(e, "open %s", name);
		}
		child[0] = child[1] = child[2] = sl;
		s->tty_fd = m;
		s->out_fd = fcntl(m, F_DUPFD_CLOEXEC, 3);
		s->in_fd = req->interactive ? fcntl(m, F_DUPFD_CLOEXEC, 3) : -1;
		return 0;
	}
	if (req->interactive && pipe2(in, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0) {
		int saved = errno;
		int *fds[] = {in, out};

		for (int i = 0; i < 2; i++)
			for (int j = 0; j < 2 && (i || req->interactive); j++)
				if (fds[i][j] >= 0)
					close(fds[i][j]);
		errno = saved;
		return cerr_sys(e, "pipe");
	}
	child[0] = in[0];
	child[1] = out[1];
	child[2] = err[1];
	s->in_fd = in[1];
	s->out_fd = out[0];
	s->err_fd = err[0];
	return 0;
}

static void close_child_ends(int child[3])
{
	for (int i = 0; i < 3; i++) {
		bool dup = false;
		for (int j = 0; j < i; j++)
			dup |= child[j] == child[i];
		if (child[i] >= 0 && !dup)
			close(child[i]);
	}
}

static int parse_exec(const char *js, size_t n, bool exec,
		      struct api_exec_req *req, struct cerr *e)
{
	cleanup_json json_t *j = json_parse_object(js, n, e);
	json_t *v;

	if (!j)
		return cerr_prefix(e, "%s parameters",
				   exec ? "exec" : "attach");
	req->pod_name = xstrdup(jstr(j, "PodName") ? jstr(j, "PodName") : "");
	req->unit_name =
	    xstrdup(jstr(j, "UnitName") ? jstr(j, "UnitName") : "");
	req->interactive = json_is_true(json_object_get(j, "Interactive"));
	req->tty = json_is_true(json_object_get(j, "TTY"));
	req->skip_nsenter = json_is_true(json_object_get(j, "SkipNSEnter"));
	if (!unit_name_ok(req->unit_name))
		return cerr_set(e, EINVAL, "bad UnitName");
	if (!exec)
		return 0;
	if (jstrv(j, "Command", &req->command, e) < 0)
		return cerr_prefix(e, "exec parameters");
	v = json_object_get(j, "Command");
	if (!req->command || !req->command[0] || json_array_size(v) > 65536)
		return cerr_set(e, EINVAL, "no command to run");
	return 0;
}

static void exec_req_free(struct api_exec_req *r)
{
	free(r->pod_name);
	free(r->unit_name);
	strv_free(r->command);
	memset(r, 0, sizeof(*r));
}

/* The pid behind a pidfd, from its fdinfo. */
static pid_t pidfd_pid(int pidfd)
{
	char path[64], line[128];
	cleanup_fclose FILE *f = NULL;
	int pid = -1;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	f = fopen(path, "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %d", &pid) == 1)
			break;
	return (pid_t)pid;
}

static int exec_begin(struct stream *s, const char *js, size_t n,
		      struct cerr *e)
{
	struct api_exec_req req = {0};
	int child[3] = {-1, -1, -1}, r = -1;

	if (parse_exec(js, n, true, &req, e) < 0)
		goto out;
	if (!s->a->b.exec_start) {
		cerr_set(e, ENOTSUP, "exec is not supported here");
		goto out;
	}
	if (exec_stdio(s, &req, child, e) < 0)
		goto out;
	s->pidfd = s->a->b.exec_start(s->a->b.ctx, &req, child, e);
	close_child_ends(child);
	if (s->pidfd < 0)
		goto out;
	s->pid = pidfd_pid(s->pidfd);
	for (int *fd = &s->in_fd; fd <= &s->tty_fd; fd++)
		if (*fd >= 0)
			fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
	log_info("exec in unit '%s': %s%s", req.unit_name, req.command[0],
		 req.tty ? " (tty)" : "");
	r = 0;
out:
	exec_req_free(&req);
	return r;
}

/* Channel 4: {"Rows":…, "Cols":…, "X":…, "Y":…} */
static void exec_resize(struct stream *s, const char *js, size_t n)
{
	cleanup_json json_t *j = NULL;
	struct winsize ws = {0};
	struct cerr e = {0};
	long long v[4];
	static const char *const k[] = {"Rows", "Cols", "X", "Y"};

	if (s->tty_fd < 0)
		return;
	j = json_parse_object(js, n, &e);
	if (!j)
		return;
	for (int i = 0; i < 4; i++)
		if (jint(j, k[i], 0, &v[i], &e) < 0 || v[i] < 0 || v[i] > 65535)
			return;
	ws.ws_row = (unsigned short)v[0];
	ws.ws_col = (unsigned short)v[1];
	ws.ws_xpixel = (unsigned short)v[2];
	ws.ws_ypixel = (unsigned short)v[3];
	if (ioctl(s->tty_fd, TIOCSWINSZ, &ws) < 0)
		log_debug("exec: resize: %s", strerror(errno));
}

/* ---- logs and attach ---- */

struct outq {
	struct stream *s;
	struct buf b[3]; /* per channel */
};

static int outq_emit(void *ud, int stream, const char *p, size_t n)
{
	struct outq *o = ud;
	struct cerr e = {0};
	int ch = o->s->kind == ST_ATTACH && stream == 2 ? 2 : 1;

	if (buf_append(&o->b[ch], p, n, &e) < 0)
		return -1;
	/* Flush as it fills, so a burst does not wait for the whole read. */
	if (o->b[ch].len >= 65536) {
		int r = ws_send_all(o->s, ch, o->b[ch].data, o->b[ch].len);
		buf_reset(&o->b[ch]);
		return r;
	}
	return 0;
}

static int outq_flush(struct outq *o)
{
	for (int ch = 1; ch <= 2; ch++) {
		if (!o->b[ch].len)
			continue;
		if (ws_send_all(o->s, ch, o->b[ch].data, o->b[ch].len) < 0)
			return -1;
		buf_reset(&o->b[ch]);
	}
	return 0;
}

/* Once a second: has the unit a new log file (restarted), and does it
 * still run? 1 keep going, 0 the unit stopped and its log is drained. */
static int tail_tick(struct stream *s, struct outq *o, bool *quiet)
{
	struct cerr e = {0};
	cleanup_free char *p = log_path(s->a, s->q.unit, false, &e);
	int running = status_unit_running(s->a, s->q.unit);

	if (p && logtail_switch(s->tail, p, outq_emit, o, &e) < 0)
		return -1;
	if (running != 0) {
		*quiet = false;
		return 1;
	}
	/* Not running: one more quiet second to drain, then stop. */
	if (!*quiet) {
		*quiet = true;
		return 1;
	}
	return 0;
}

static void tail_loop(struct stream *s)
{
	struct outq o = {.s = s};
	uint64_t next_ping = now_ns() + s->a->ping_ns, next_tick = 0;
	bool quiet = false, more = true;
	struct cerr e = {0};

	for (int i = 0; i < 3; i++)
		buf_init(&o.b[i], 0);
	for (;;) {
		struct pollset ps = {.n = 0};
		int t = keepalive(s, &next_ping), r;

		if (t < 0 || stream_closed(s))
			goto out;
		int ii;

		ps_add(&ps, s->wake[0], POLLIN);
		ps_add(&ps, logtail_fd(s->tail), POLLIN);
		ii = ps_add(&ps, s->in_fd, input_pending(s) ? POLLOUT : 0);
		if (poll(ps.p, (nfds_t)ps.n, more ? 0 : (t < 1000 ? t : 1000)) <
			0 &&
		    errno != EINTR)
			goto out;
		drain_wake(s);
		if ((ps_rev(&ps, ii) & POLLOUT) &&
		    flush_input(s, s->in_fd) < 0) {
			close(s->in_fd);
			s->in_fd = -1;
		}
		close_input_at_eof(s);
		r = logtail_read(s->tail, outq_emit, &o, &e);
		if (r < 0 || outq_flush(&o) < 0)
			goto out;
		more = r > 0;
		if (more || now_ns() < next_tick)
			continue;
		next_tick = now_ns() + 1000000000;
		r = tail_tick(s, &o, &quiet);
		if (r < 0 || outq_flush(&o) < 0)
			goto out;
		if (r == 0) {
			char msg[UNIT_NAME_MAX + 32];
			snprintf(msg, sizeof(msg), "Unit %s is not running\n",
				 s->q.unit);
			ws_send_text(s, 2, msg);
			stream_finish(s, 1000);
			goto out;
		}
	}
out:
	for (int i = 0; i < 3; i++)
		buf_free(&o.b[i]);
}

/* Resolve the unit's log and start following it; with lines or bytes,
 * what is already there goes first. */
static int tail_begin(struct stream *s, struct cerr *e)
{
	cleanup_free char *p = log_path(s->a, s->q.unit, s->q.previous, e);
	off_t off;
	int fd;

	if (!p)
		return -1;
	s->tail = logtail_open(p, s->kind == ST_LOGS && s->q.metadata, e);
	if (!s->tail)
		return -1;
	if (!s->q.lines && !s->q.bytes)
		return 0;
	/* From the same open file, up to where following starts: no line is
	 * lost or sent twice in between. */
	fd = logtail_file(s->tail, &off);
	return files_log_tail(p, fd, off, s->q.lines, s->q.bytes, s->q.metadata,
			      &s->first, e);
}

static int attach_begin(struct stream *s, const char *js, size_t n,
			struct cerr *e)
{
	struct api_exec_req req = {0};
	int r = -1;

	if (parse_exec(js, n, false, &req, e) < 0)
		goto out;
	snprintf(s->q.unit, sizeof(s->q.unit), "%s", req.unit_name);
	if (status_unit_running(s->a, s->q.unit) == 0) {
		cerr_set(e, ESRCH,
			 "Could not find running process for unit "
			 "named %s",
			 s->q.unit);
		goto out;
	}
	if (tail_begin(s, e) < 0)
		goto out;
	if (req.interactive && s->a->b.attach_stdin) {
		struct cerr ig = {0};
		s->in_fd = s->a->b.attach_stdin(s->a->b.ctx, s->q.unit, &ig);
		if (s->in_fd >= 0)
			fcntl(s->in_fd, F_SETFL,
			      fcntl(s->in_fd, F_GETFL) | O_NONBLOCK);
		else
			log_info("attach %s: no stdin: %s", s->q.unit, ig.msg);
	}
	r = 0;
out:
	exec_req_free(&req);
	return r;
}

/* ---- port-forward ---- */

static int dial(const char *ip, int port, struct cerr *e)
{
	struct sockaddr_storage ss = {0};
	socklen_t sl;
	int fd, err = 0;
	socklen_t el = sizeof(err);
	struct pollfd p;

	if (inet_pton(AF_INET, ip, &((struct sockaddr_in *)&ss)->sin_addr) ==
	    1) {
		ss.ss_family = AF_INET;
		((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
		sl = sizeof(struct sockaddr_in);
	} else if (inet_pton(AF_INET6, ip,
			     &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		ss.ss_family = AF_INET6;
		((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
		sl = sizeof(struct sockaddr_in6);
	} else {
		return cerr_set(e, EINVAL, "bad pod IP '%s'", ip);
	}
	fd =
	    socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return cerr_sys(e, "socket");
	if (connect(fd, (struct sockaddr *)&ss, sl) < 0 &&
	    errno != EINPROGRESS) {
		cerr_sys(e, "error connecting to port %d", port);
		close(fd);
		return -1;
	}
	p = (struct pollfd){.fd = fd, .events = POLLOUT};
	if (poll(&p, 1, 5000) <= 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
		errno = err ? err : ETIMEDOUT;
		cerr_sys(e, "error connecting to port %d", port);
		close(fd);
		return -1;
	}
	return fd;
}

static int pf_begin(struct stream *s, const char *js, size_t n, struct cerr *e)
{
	cleanup_json json_t *j = json_parse_object(js, n, e);
	json_t *pv = j ? json_object_get(j, "Port") : NULL;
	int64_t port = 0;
	char ip[INET6_ADDRSTRLEN + 1];

	if (!j)
		return cerr_prefix(e, "port-forward parameters");
	/* The controller sends the port as a string; accept a number too. */
	if (json_is_integer(pv))
		port = json_integer_value(pv);
	else if (!json_is_string(pv) ||
		 parse_int64(json_string_value(pv), 1, 65535, &port, e) < 0)
		return cerr_set(e, EINVAL,
				"bad Port in port-forward "
				"parameters");
	if (port < 1 || port > 65535)
		return cerr_set(e, EINVAL, "bad Port %lld", (long long)port);
	status_pod_ip(s->a, ip, sizeof(ip));
	s->pf_fd = dial(ip, (int)port, e);
	if (s->pf_fd < 0)
		return -1;
	/* The controller tests a forward by waiting for this first frame. */
	return ws_send(s, 1, "", 0);
}

static void pf_loop(struct stream *s)
{
	uint64_t next_ping = now_ns() + s->a->ping_ns;

	for (;;) {
		struct pollset ps = {.n = 0};
		int t = keepalive(s, &next_ping), r;

		if (t < 0 || stream_closed(s))
			return;
		ps_add(&ps, s->wake[0], POLLIN);
		ps_add(&ps, s->pf_fd,
		       POLLIN | (input_pending(s) ? POLLOUT : 0));
		if (poll(ps.p, 2, t) < 0 && errno != EINTR)
			return;
		if (ps.p[0].revents)
			drain_wake(s);
		if ((ps.p[1].revents & POLLOUT) && flush_input(s, s->pf_fd) < 0)
			break;
		if (ps.p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			r = pump_output(s, &s->pf_fd, 1);
			if (r < 0)
				return;
			if (r > 0)
				break; /* the pod side hung up */
		}
	}
	stream_finish(s, 1000);
}

/* ---- the stream's life ---- */

/* exec/attach/port-forward: the pump starts with the connection, waiting
 * for the parameters (which the worker handles) while it keeps the peer
 * alive, and gives up on one that never sends them. */
static bool wait_params(struct stream *s)
{
	uint64_t next_ping = now_ns() + s->a->ping_ns;
	bool ok = false;

	for (;;) {
		struct timespec ts;
		int t = keepalive(s, &next_ping);

		if (t < 0)
			return false;
		pthread_mutex_lock(&s->mu);
		ok = s->params_ok;
		if (!ok && !s->closed && !s->ending) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += t / 1000 + 1;
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
			ok = s->params_ok;
		}
		pthread_mutex_unlock(&s->mu);
		if (ok)
			return true;
		if (stream_closed(s) || s->ending)
			return false;
		if (now_ns() > s->params_by) {
			log_info("stream: no parameters within 30 s");
			return false;
		}
	}
}

static void *pump_main(void *arg)
{
	struct stream *s = arg;

	if (s->kind != ST_LOGS && !wait_params(s))
		goto out;
	if (s->first.len && ws_send_all(s, 1, s->first.data, s->first.len) < 0)
		goto out;
	buf_free(&s->first);
	switch (s->kind) {
	case ST_EXEC:
		exec_loop(s);
		break;
	case ST_LOGS:
	case ST_ATTACH:
		tail_loop(s);
		break;
	case ST_PORTFORWARD:
		pf_loop(s);
		break;
	}
out:
	/* Whatever ended the pump, the connection goes too. */
	stream_hangup(s);
	return NULL;
}

static int pump_start(struct stream *s, struct cerr *e)
{
	int r = pthread_create(&s->thread, NULL, pump_main, s);

	if (r) {
		errno = r;
		return cerr_sys(e, "pthread_create");
	}
	s->started = true;
	return 0;
}

static struct stream *stream_new(struct api *a, struct mg_connection *c,
				 enum stream_kind kind)
{
	struct stream *s = xcalloc(1, sizeof(*s));

	s->a = a;
	s->conn = c;
	s->kind = kind;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->pidfd = s->in_fd = s->out_fd = s->err_fd = s->tty_fd = -1;
	s->pf_fd = s->sock = -1;
	s->wake[0] = s->wake[1] = -1;
	atomic_store(&s->last_rx, now_ns());
	s->params_by = now_ns() + 30ull * 1000000000;
	buf_init(&s->msg, WS_MSG_MAX);
	buf_init(&s->in, 0);
	buf_init(&s->first, 0);
	if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) < 0)
		log_warn("stream: pipe: %s", strerror(errno));
	return s;
}

/* The backend's end of an exec, given a moment to work. */
static void exec_end(struct stream *s)
{
	struct pollfd p = {.fd = s->pidfd, .events = POLLIN};
	uint64_t until = now_ns() + EXEC_END_WAIT_NS;

	/* A pidfd is readable once its process has exited. */
	if (!s->a->b.exec_end || poll(&p, 1, 0) != 0)
		return;
	s->a->b.exec_end(s->a->b.ctx, s->pidfd);
	while (now_ns() < until) {
		int r = poll(&p, 1, (int)((until - now_ns()) / 1000000) + 1);
		if (r > 0 || (r < 0 && errno != EINTR))
			break;
	}
}

/* Kill what the stream started (the backend's way, then the whole process
 * group: the command may have children) and release everything. */
static void stream_free(struct stream *s)
{
	if (s->pidfd >= 0) {
		exec_end(s);
		/* Its children too, when it leads a process group of its own
		 * (api_spawn's SETSID). It is ours and not reaped yet (alive or
		 * a zombie), so neither its pid nor its group can have been
		 * reused. */
		if (s->pid > 0 && getpgid(s->pid) == s->pid)
			kill(-s->pid, SIGKILL);
		sys_pidfd_send_signal(s->pidfd, SIGKILL);
		api_wait(s->pidfd, false);
		close(s->pidfd);
	}
	for (int *fd = &s->in_fd; fd <= &s->tty_fd; fd++)
		if (*fd >= 0)
			close(*fd);
	if (s->pf_fd >= 0)
		close(s->pf_fd);
	for (int i = 0; i < 2; i++)
		if (s->wake[i] >= 0)
			close(s->wake[i]);
	logtail_free(s->tail);
	buf_free(&s->msg);
	buf_free(&s->in);
	buf_free(&s->first);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	atomic_fetch_sub(&s->a->streams, 1);
	free(s);
}

/* Before the handshake: route, parameters, limits. A rejection is a plain
 * HTTP error, which is all a client can see at this point. */
static int ws_connect(const struct mg_connection *cc, void *cbdata)
{
	struct mg_connection *c = (struct mg_connection *)cc;
	struct api *a = cbdata;
	const struct mg_request_info *ri = mg_get_request_info(c);
	struct route r;
	struct stream *s;
	struct cerr e = {0};
	enum stream_kind k;

	if (route_parse(ri, &r) < 0) {
		reply_errf(c, ENOENT, "no such stream");
		return 1;
	}
	if (!strcmp(r.path, "logs") || !strncmp(r.path, "logs/", 5))
		k = ST_LOGS;
	else if (!strncmp(r.path, "exec", 4) && is_stream_route(r.path))
		k = ST_EXEC;
	else if (!strncmp(r.path, "attach", 6) && is_stream_route(r.path))
		k = ST_ATTACH;
	else if (is_stream_route(r.path))
		k = ST_PORTFORWARD;
	else {
		reply_errf(c, ENOENT, "no such stream: %.200s", r.path);
		return 1;
	}
	if (atomic_fetch_add(&a->streams, 1) >= MAX_STREAMS) {
		atomic_fetch_sub(&a->streams, 1);
		reply_errf(c, EBUSY, "too many streams");
		return 1;
	}
	s = stream_new(a, c, k);
	if (k == ST_LOGS &&
	    (logq_parse(&r, &s->q, &e) < 0 || tail_begin(s, &e) < 0)) {
		stream_free(s);
		reply_err(c, &e);
		return 1;
	}
	s->sock = find_sock(ri);
	if (s->sock < 0)
		log_warn("stream: socket not found; a silent peer will linger");
	mg_set_user_connection_data(c, s);
	return 0;
}

static void ws_ready(struct mg_connection *c, void *cbdata)
{
	struct stream *s = mg_get_user_connection_data(c);
	struct cerr e = {0};

	(void)cbdata;
	if (!s)
		return;
	s->conn = c;
	atomic_store(&s->last_rx, now_ns());
	if (pump_start(s, &e) < 0) {
		log_warn("stream: %s", e.msg);
		stream_hangup(s);
	}
}

/* The first message of exec/attach/port-forward: its parameters. */
static int ws_params(struct stream *s, const char *p, size_t n)
{
	struct cerr e = {0};
	int r;

	s->got_params = true;
	if (s->kind == ST_EXEC)
		r = exec_begin(s, p, n, &e);
	else if (s->kind == ST_ATTACH)
		r = attach_begin(s, p, n, &e);
	else
		r = pf_begin(s, p, n, &e);
	if (r < 0) {
		char msg[CERR_MSG_MAX + 2];

		/* The old agent's way: the reason on stderr, exit code -1. */
		log_info("stream: %s", e.msg);
		snprintf(msg, sizeof(msg), "%s\n", e.msg);
		ws_send_text(s, 2, msg);
		if (s->kind != ST_PORTFORWARD)
			ws_send_text(s, 3, "-1");
		pthread_mutex_lock(&s->mu);
		s->ending = true;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		ws_close_frame(s, 1000);
		return 0;
	}
	pthread_mutex_lock(&s->mu);
	s->params_ok = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return 1;
}

/* A whole message from the client (fragments joined). */
static int ws_message(struct stream *s, char *p, size_t n)
{
	ssize_t len;
	int ch;

	if (!s->got_params && s->kind != ST_LOGS)
		return ws_params(s, p, n);
	if (n == 0)
		return 1;
	ch = p[0] - '0';
	len = b64_decode(p + 1, n - 1);
	if (len < 0) {
		log_debug("stream: a frame that is not base64");
		return 1;
	}
	if (ch == 0 && len == 0 && s->kind != ST_PORTFORWARD) {
		/* An empty stdin frame is the end of stdin (the controller
		 * never sends one: it stops sending instead). */
		pthread_mutex_lock(&s->mu);
		s->in_eof = true;
		pthread_mutex_unlock(&s->mu);
		stream_wake(s);
		return 1;
	}
	if (ch == 0 && (s->in_fd >= 0 || s->pf_fd >= 0))
		return queue_input(s, p + 1, (size_t)len) < 0 ? 0 : 1;
	if (ch == 4 && s->kind == ST_EXEC)
		exec_resize(s, p + 1, (size_t)len);
	return 1;
}

static int ws_data(struct mg_connection *c, int bits, char *p, size_t n,
		   void *cbdata)
{
	struct stream *s = mg_get_user_connection_data(c);
	int op = bits & 0x0f;
	struct cerr e = {0};
	int r;

	(void)cbdata;
	if (!s)
		return 0;
	atomic_store(&s->last_rx, now_ns());
	switch (op) {
	case MG_WEBSOCKET_OPCODE_PING:
		mg_websocket_write(c, MG_WEBSOCKET_OPCODE_PONG, p, n);
		return 1;
	case MG_WEBSOCKET_OPCODE_PONG:
		return 1;
	case MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE:
		if (!s->ending)
			mg_websocket_write(c, op, p, n < 2 ? n : 2);
		return 0;
	case MG_WEBSOCKET_OPCODE_TEXT:
	case MG_WEBSOCKET_OPCODE_BINARY:
		buf_reset(&s->msg);
		/* fall through */
	case MG_WEBSOCKET_OPCODE_CONTINUATION:
		if (buf_append(&s->msg, p, n, &e) < 0) {
			ws_close_frame(s, 1009);
			return 0;
		}
		break;
	default:
		return 1;
	}
	if (!(bits & 0x80))
		return 1; /* more fragments to come */
	{
		static char empty[1];
		r = ws_message(s, s->msg.data ? s->msg.data : empty,
			       s->msg.len);
	}
	buf_reset(&s->msg);
	return r;
}

static void ws_close(const struct mg_connection *c, void *cbdata)
{
	struct stream *s = mg_get_user_connection_data(c);

	(void)cbdata;
	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->closed = true;
	pthread_cond_broadcast(&s->cv);
	/* Unblock a pump stuck writing to a peer that does not read. */
	if (s->sock >= 0)
		shutdown(s->sock, SHUT_RDWR);
	pthread_mutex_unlock(&s->mu);
	stream_wake(s);
	if (s->started)
		pthread_join(s->thread, NULL);
	mg_set_user_connection_data(c, NULL);
	stream_free(s);
}

/* ======================================================================
 * TLS, start and stop
 * ====================================================================== */

static int on_log(const struct mg_connection *c, const char *msg)
{
	(void)c;
	/* Failed handshakes land here; they are the refusals we want. */
	log_debug("civetweb: %s", msg);
	return 1;
}

static int check_file(const char *path, struct cerr *e)
{
	if (access(path, R_OK) < 0)
		return cerr_sys(e, "boot file %s", path);
	return 0;
}

static int start_civetweb(struct api *a, const struct api_opts *o,
			  struct cerr *e)
{
	char threads[16];
	struct mg_callbacks cb = {.log_message = on_log};
	const char *opts[40];
	int n = 0;
	char errtxt[256] = "";
	unsigned errcode = 0;
	struct mg_error_data ed = {.code = &errcode,
				   .text = errtxt,
				   .text_buffer_size = sizeof(errtxt)};
	struct mg_init_data init = {.callbacks = &cb, .user_data = a};

	snprintf(threads, sizeof(threads), "%d",
		 o->num_threads > 0 ? o->num_threads : DEFAULT_THREADS);
#define OPT(k, v) (opts[n++] = (k), opts[n++] = (v))
	/* Connections come from the gate (agent/tls.c) once their handshake
	 * is done, and only after the handlers below are set: civetweb
	 * listens on nothing. */
	OPT("listening_ports", "");
	OPT("num_threads", threads);
	OPT("request_timeout_ms", "15000");
	OPT("enable_keep_alive", "yes");
	OPT("keep_alive_timeout_ms", "30000");
	OPT("websocket_timeout_ms", "1000");
	OPT("tcp_nodelay", "1");
	OPT("max_request_size", "16384");
	OPT("decode_url", "yes");
	OPT("enable_directory_listing", "no");
	OPT("connection_queue", "64");
#undef OPT
	opts[n] = NULL;
	init.configuration_options = opts;
	a->ctx = mg_start2(&init, &ed);
	if (!a->ctx)
		return cerr_set(e, EIO, "start civetweb: %s", errtxt);
	mg_set_request_handler(a->ctx, "**", on_request, a);
	mg_set_websocket_handler(a->ctx, "**", ws_connect, ws_ready, ws_data,
				 ws_close, a);
	return 0;
}

static int hand_over(void *arg, int fd, void *ssl)
{
	struct api *a = arg;

	return mg_hand_over_tls(a->ctx, fd, ssl);
}

static int start_gate(struct api *a, const struct api_opts *o, struct cerr *e)
{
	struct tls_gate_opts g = {
	    .bind_addr = o->bind_addr,
	    .port = o->port,
	    .files = {.ca = a->ca, .crt = a->crt, .key = a->key},
	    .handshake_ms = o->handshake_ms,
	    .per_source = o->per_source,
	    .plain = a->plain,
	    .hand_over = hand_over,
	    .arg = a,
	};

	if (tls_gate_start(&g, &a->gate, e) < 0)
		return cerr_prefix(e, "start the HTTPS server on port %d",
				   o->port);
	a->port = tls_gate_port(a->gate);
	return 0;
}

static void init_library(void)
{
	mg_init_library(MG_FEATURES_TLS | MG_FEATURES_WEBSOCKET);
}

int api_start(const struct api_opts *o, const struct api_backend *b,
	      struct api **out, struct cerr *e)
{
	struct api *a = xcalloc(1, sizeof(*a));
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	a->b = *b;
	a->pkgdirfd = -1;
	a->plain = o->insecure_plain_http;
	a->ping_ns =
	    (uint64_t)(o->ws_ping_ms > 0 ? o->ws_ping_ms : PING_EVERY_MS) *
	    1000000;
	a->silence_ns = (uint64_t)(o->ws_silence_ms > 0 ? o->ws_silence_ms
							: SILENT_DROP_MS) *
			1000000;
	a->version = xstrdup(o->version ? o->version : CELL_VERSION);
	a->packages_dir = xstrdup(o->packages_dir);
	a->unpack_bin = o->unpack_bin ? xstrdup(o->unpack_bin)
				      : pullproc_beside_self("cell-unpack");
	a->ca = xasprintf("%s/ca.crt", o->boot_dir);
	a->crt = xasprintf("%s/server.crt", o->boot_dir);
	a->key = xasprintf("%s/server.key", o->boot_dir);
	pthread_mutex_init(&a->resize_mu, NULL);
	if (!a->plain &&
	    (check_file(a->ca, e) < 0 || check_file(a->crt, e) < 0 ||
	     check_file(a->key, e) < 0))
		goto fail;
	if (fs_mkdir_p(a->packages_dir, 0755, e) < 0)
		goto fail;
	a->pkgdirfd = open(a->packages_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (a->pkgdirfd < 0) {
		cerr_sys(e, "open %s", a->packages_dir);
		goto fail;
	}
	if (deploy_cleanup(a->pkgdirfd, e) < 0)
		goto fail;
	pthread_once(&once, init_library);
	if (start_civetweb(a, o, e) < 0)
		goto fail;
	if (start_gate(a, o, e) < 0)
		goto fail;
	*out = a;
	return 0;
fail:
	api_stop(a);
	return cerr_prefix(e, "api");
}

void api_stop(struct api *a)
{
	if (!a)
		return;
	tls_gate_stop(a->gate);
	if (a->ctx)
		mg_stop(a->ctx);
	if (a->pkgdirfd >= 0)
		close(a->pkgdirfd);
	pthread_mutex_destroy(&a->resize_mu);
	free(a->ca);
	free(a->crt);
	free(a->key);
	free(a->version);
	free(a->packages_dir);
	free(a->unpack_bin);
	free(a);
}

int api_port(const struct api *a)
{
	return a->port;
}
