// SPDX-License-Identifier: Apache-2.0
/* The API's HTTP endpoints (WIRE.md): one request handler takes every URI
 * and dispatches on the path itself, so that an unknown route is a
 * plain-text 404 like every other error, and the %3F log URL is handled in
 * one place. The replies, routes and query parsing here serve the
 * websocket streams (streams.c) too. */

#include "api-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgprime.h"
#include "podspec.h"
#include "cleanup.h"
#include "deploy.h"
#include "filetail.h"
#include "fsutil.h"
#include "log.h"
#include "logread.h"
#include "metrics.h"
#include "pullproc.h"
#include "rootgrow.h"
#include "util.h"

#define QUERY_VALUE_MAX 4096
/* A body we refuse is read and thrown away up to this much, so that the
 * client sees our answer instead of a reset; past it the connection is
 * closed. */
#define DRAIN_MAX (16u << 20)

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
int reply(struct mg_connection *c, int status, const char *ctype,
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

int reply_text(struct mg_connection *c, int status, const char *text)
{
	return reply(c, status, "text/plain; charset=utf-8", text,
		     strlen(text));
}

int reply_err(struct mg_connection *c, const struct cerr *e)
{
	int status = api_http_status(e->code);
	const struct mg_request_info *ri = mg_get_request_info(c);

	log_info("%s %.200s: %d %s", ri->request_method, ri->local_uri, status,
		 e->msg);
	return reply_text(c, status, e->msg);
}

int reply_errf(struct mg_connection *c, int code, const char *fmt, ...)
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

int route_parse(const struct mg_request_info *ri, struct route *r)
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
 * the backend's typed answers
 * ====================================================================== */

void status_pod_ip(struct api *a, char *out, size_t n)
{
	cleanup_free char *ip = a->b.pod_ip ? a->b.pod_ip(a->b.ctx) : NULL;

	snprintf(out, n, "%s", ip && *ip ? ip : "127.0.0.1");
}

int status_unit_running(struct api *a, const char *unit)
{
	return a->b.unit_running ? a->b.unit_running(a->b.ctx, unit) : -1;
}

/* ======================================================================
 * HTTP endpoints
 * ====================================================================== */

static int h_updatepod(struct api *a, struct mg_connection *c,
		       const struct route *route)
{
	struct buf body;
	struct cerr e = {0};
	int rc;

	buf_init(&body, UPDATEPOD_MAX);
	if (read_body(c, &body, &e) < 0) {
		if (e.code == EFBIG)
			drain_body(c, body.len);
		buf_free(&body);
		return reply_err(c, &e);
	}
	cgprime_kick(); /* a start may follow: overlap its lock's wait */
	if (!a->b.update_pod)
		rc = cerr_set(&e, ENOTSUP, "updatepod is not supported");
	else
		rc = a->b.update_pod(a->b.ctx, body.data ? body.data : "",
				     body.len, &e);
	buf_free(&body);
	if (rc < 0) {
		/* Only a body that does not parse is the client's fault; any
		 * other failure (the spec could not be saved: ENOSPC, EIO) is
		 * 503, which Kip's next full sync sends again. The old spec
		 * stays in force meanwhile. */
		if (e.code != EINVAL)
			e.code = EAGAIN;
		return reply_err(c, &e);
	}
	return reply_text(c, 200, "");
}

static int h_status(struct api *a, struct mg_connection *c,
		    const struct route *r)
{
	cleanup_free char *s =
	    a->b.status_json ? a->b.status_json(a->b.ctx) : NULL;

	if (!s)
		return reply_errf(c, EIO, "no status available");
	return reply(c, 200, "application/json", s, strlen(s));
}

bool unit_name_ok(const char *u)
{
	size_t n = strnlen(u, UNIT_NAME_MAX + 1);

	if (n > UNIT_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)u[i] < ' ' || u[i] == '/' || u[i] == 127)
			return false;
	return true;
}

int logq_parse(const struct route *r, struct logq *q, struct cerr *e)
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

char *log_path(struct api *a, const char *unit, bool previous, struct cerr *e)
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

/* A tail read into out (rc from the reader; e its error when < 0) as the
 * reply: the text, or the error. out is freed. */
static int reply_tail(struct mg_connection *c, int rc, struct buf *out,
		      struct cerr *e)
{
	int status = rc < 0 ? reply_err(c, e)
			    : reply(c, 200, "text/plain; charset=utf-8",
				    out->data ? out->data : "", out->len);

	buf_free(out);
	return status;
}

static int h_logs(struct api *a, struct mg_connection *c, const struct route *r)
{
	struct logq q;
	struct cerr e = {0};
	cleanup_free char *path = NULL;
	cleanup_close int fd = -1;
	struct buf out;
	struct stat st;

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
	return reply_tail(c,
			  logread_tail(path, fd, st.st_size, q.lines, q.bytes,
				       q.metadata, &out, &e),
			  &out, &e);
}

static int h_file(struct api *a, struct mg_connection *c, const struct route *r)
{
	char path[QUERY_VALUE_MAX];
	int64_t lines, bytes;
	struct cerr e = {0};
	struct buf out;
	int f = query_get(r, "path", path, sizeof(path));

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
	return reply_tail(c, file_tail(path, lines, bytes, &out, &e), &out, &e);
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

/* Kip calls resizevolume right after the cloud resized the volume, and
 * the kernel may not have seen the new size yet: then there is nothing
 * to grow, and growing again a moment later works. So, as Itzo did, the
 * partition is tried up to 30 times and a whole-disk filesystem up to 15,
 * a second apart (CELL_AGENT_RESIZE_INTERVAL_MS), until one grows. A call
 * with truly nothing to grow takes that long and still succeeds. Only the
 * calling API worker waits; every other request is served meanwhile. */
static unsigned resize_interval_ms(void)
{
	const char *v = getenv("CELL_AGENT_RESIZE_INTERVAL_MS");
	struct cerr e = {0};
	int64_t ms;

	if (v && parse_int64(v, 0, 60000, &ms, &e) == 0)
		return (unsigned)ms;
	return 1000;
}

static int h_resize(struct api *a, struct mg_connection *c,
		    const struct route *r)
{
	struct rootgrow_opts o = {
	    .root_device = getenv("CELL_AGENT_ROOT_DEVICE"),
	    .root_mount = getenv("CELL_AGENT_ROOT_MOUNT"),
	    .tool = getenv("CELL_AGENT_PARTITION_TOOL"),
	    .part_tries = 30,
	    .fs_tries = 15,
	    .interval_ms = resize_interval_ms(),
	};
	struct rootgrow_result res;
	struct cerr e = {0};
	struct buf log;
	int status;

	buf_init(&log, 64 * 1024);
	pthread_mutex_lock(&a->resize_mu);
	if (rootgrow(&o, &res, &log, &e) < 0) {
		/* The request is fine; the cell could not do it. */
		e.code = EIO;
		status = reply_err(c, &e);
	} else {
		log_info("resizevolume: %s: %s from %llu to %llu MiB", res.part,
			 res.fs_grown ? "grown" : "nothing to grow",
			 (unsigned long long)(res.fs_before >> 20),
			 (unsigned long long)(res.fs_after >> 20));
		status = reply(c, 200, "text/plain; charset=utf-8",
			       log.data ? log.data : "", log.len);
	}
	pthread_mutex_unlock(&a->resize_mu);
	buf_free(&log);
	return status;
}

#define METRICS_MAX (16u << 20)

int api_metrics(struct mg_connection *c)
{
	struct buf b;
	int status;

	buf_init(&b, METRICS_MAX);
	metrics_render(&b);
	status =
	    reply(c, 200, METRICS_CONTENT_TYPE, b.data ? b.data : "", b.len);
	buf_free(&b);
	return status;
}

static int h_metrics(struct api *a, struct mg_connection *c,
		     const struct route *r)
{
	return api_metrics(c);
}

static int h_ping(struct api *a, struct mg_connection *c, const struct route *r)
{
	return reply_text(c, 200, "pong");
}

static int h_version(struct api *a, struct mg_connection *c,
		     const struct route *r)
{
	return reply_text(c, 200, a->version);
}

/* How a route's name matches the path below /rest/v1/. */
enum route_match {
	RM_EXACT, /* the name only */
	RM_DIR,	  /* the name, or the name and '/' */
	RM_SUB,	  /* the name, '/' and anything */
	RM_TREE,  /* the name, or the name, '/' and anything */
};

/* Every endpoint, once: dispatch() and the metrics' route label both read
 * it. A websocket stream has no handler here (streams.c). */
static const struct route_def {
	const char *name;
	enum route_match match;
	const char *method;
	int (*fn)(struct api *a, struct mg_connection *c,
		  const struct route *r);
} routes[] = {
    {"ping", RM_EXACT, "GET", h_ping},
    {"version", RM_EXACT, "GET", h_version},
    {"status", RM_EXACT, "GET", h_status},
    {"updatepod", RM_EXACT, "POST", h_updatepod},
    {"logs", RM_TREE, "GET", h_logs},
    {"file", RM_DIR, "GET", h_file},
    {"deploy", RM_SUB, "POST", h_deploy},
    {"resizevolume", RM_EXACT, "POST", h_resize},
    {"metrics", RM_EXACT, "GET", h_metrics},
    {"exec", RM_DIR, NULL, NULL},
    {"attach", RM_DIR, NULL, NULL},
    {"portforward", RM_DIR, NULL, NULL},
};

static bool route_matches(const struct route_def *d, const char *p)
{
	size_t n = strlen(d->name);

	if (strncmp(p, d->name, n))
		return false;
	p += n;
	switch (d->match) {
	case RM_EXACT:
		return !*p;
	case RM_DIR:
		return !*p || !strcmp(p, "/");
	case RM_SUB:
		return *p == '/';
	case RM_TREE:
		return !*p || *p == '/';
	}
	return false;
}

static const struct route_def *route_find(const char *p)
{
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
		if (route_matches(&routes[i], p))
			return &routes[i];
	return NULL;
}

const char *route_label(const char *path)
{
	size_t n = strcspn(path, "/");

	for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
		if (strlen(routes[i].name) == n &&
		    !strncmp(routes[i].name, path, n))
			return routes[i].name;
	return "other";
}

bool is_stream_route(const char *p)
{
	const struct route_def *d = route_find(p);

	return d && !d->fn;
}

static int dispatch(struct api *a, struct mg_connection *c,
		    const struct route *r)
{
	const struct route_def *d = route_find(r->path);

	if (!d)
		return reply_errf(c, ENOENT, "no such endpoint: %.200s",
				  mg_get_request_info(c)->local_uri);
	if (!d->fn)
		return reply_errf(c, EINVAL, "%s needs a websocket upgrade",
				  r->path);
	if (strcmp(mg_get_request_info(c)->request_method, d->method))
		return -1;
	return d->fn(a, c, r);
}

int on_request(struct mg_connection *c, void *cbdata)
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
	metrics_api_request(route_label(r.path), status);
	log_debug("%s %.200s: %d", ri->request_method, ri->local_uri, status);
	return status;
}
