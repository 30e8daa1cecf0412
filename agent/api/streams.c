// SPDX-License-Identifier: Apache-2.0
/* The API's websocket streams (WIRE.md): exec, attach, port-forward and
 * log follow. civetweb's worker stays in its read loop and hands the
 * client's frames over; each stream has a pump thread of its own, which
 * moves bytes from the process, the log file or the forwarded port to the
 * socket, sends pings and drops a silent peer. */

#include "api-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "base64.h"
#include "cleanup.h"
#include "connsock.h"
#include "jsonutil.h"
#include "log.h"
#include "metrics.h"
#include "logread.h"
#include "procspawn.h"
#include "util.h"

/* A stream holds a worker for its whole life; keep some for requests. */
#define MAX_STREAMS 16
/* What a client may send in one websocket message (fragments joined). */
#define WS_MSG_MAX (4u << 20)
/* stdin (or port-forward) bytes waiting for the process (or the port). */
#define STDIN_QUEUE_MAX (1u << 20)
/* After a process exits, output still in the pipes is sent; a grandchild
 * that keeps them open must not hold the exit code back for long. */
#define DRAIN_AFTER_EXIT_NS (300ull * 1000000)
/* How long the peer gets to answer our close frame. */
#define CLOSE_WAIT_NS (2ull * 1000000000)
/* How long the backend's exec_end gets before SIGKILL. */
#define EXEC_END_WAIT_NS (2ull * 1000000000)

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
	struct buf dec;	  /* its payload, decoded */
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

static int ws_send(struct stream *s, int ch, const void *p, size_t n)
{
	size_t cap = 1 + B64_ENCODED_LEN(n) + 1;
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
		    (code = spawn_wait(s->pidfd, true)) != -2) {
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
		if (req->rows) {
			struct winsize ws = {.ws_row = req->rows,
					     .ws_col = req->cols};
			if (ioctl(m, TIOCSWINSZ, &ws) < 0)
				log_debug("exec: size: %s", strerror(errno));
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

/* Optional "Rows" and "Cols" (cellctl sends them, Kip does not): anything
 * but two integers from 1 to 65535 is no size. */
static void first_size(const json_t *j, struct api_exec_req *req)
{
	long long rows = 0, cols = 0;
	struct cerr ignore = {0};

	if (jint(j, "Rows", 0, &rows, &ignore) < 0 ||
	    jint(j, "Cols", 0, &cols, &ignore) < 0 || rows < 1 ||
	    rows > 65535 || cols < 1 || cols > 65535)
		return;
	req->rows = (unsigned short)rows;
	req->cols = (unsigned short)cols;
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
	first_size(j, req);
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
	return logread_tail(p, fd, off, s->q.lines, s->q.bytes, s->q.metadata,
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
	buf_init(&s->dec, WS_MSG_MAX);
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
		 * (spawn_pidfd's SETSID). It is ours and not reaped yet (alive
		 * or a zombie), so neither its pid nor its group can have been
		 * reused. */
		if (s->pid > 0 && getpgid(s->pid) == s->pid)
			kill(-s->pid, SIGKILL);
		spawn_signal(s->pidfd, SIGKILL);
		spawn_wait(s->pidfd, false);
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
	buf_free(&s->dec);
	buf_free(&s->in);
	buf_free(&s->first);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	atomic_fetch_sub(&s->a->streams, 1);
	free(s);
}

/* Before the handshake: route, parameters, limits. A rejection is a plain
 * HTTP error, which is all a client can see at this point. */
int ws_connect(const struct mg_connection *cc, void *cbdata)
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
		metrics_api_request(route_label(r.path),
				    reply_errf(c, EBUSY, "too many streams"));
		return 1;
	}
	s = stream_new(a, c, k);
	if (k == ST_LOGS &&
	    (logq_parse(&r, &s->q, &e) < 0 || tail_begin(s, &e) < 0)) {
		stream_free(s);
		reply_err(c, &e);
		return 1;
	}
	s->sock =
	    connsock_find(ri->remote_addr, ri->remote_port, ri->server_port);
	if (s->sock < 0)
		log_warn("stream: socket not found; a silent peer will linger");
	mg_set_user_connection_data(c, s);
	metrics_api_request(route_label(r.path), 101); /* the upgrade */
	return 0;
}

void ws_ready(struct mg_connection *c, void *cbdata)
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
	struct cerr e = {0};
	const char *d;
	size_t len;
	int ch;

	if (!s->got_params && s->kind != ST_LOGS)
		return ws_params(s, p, n);
	if (n == 0)
		return 1;
	ch = p[0] - '0';
	/* Padding optional, as the old agent read it. */
	buf_reset(&s->dec);
	if (b64_decode(p + 1, n - 1, 0, &s->dec, &e) < 0) {
		log_debug("stream: a frame that is not base64: %s", e.msg);
		return 1;
	}
	d = s->dec.data ? s->dec.data : "";
	len = s->dec.len;
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
		return queue_input(s, d, len) < 0 ? 0 : 1;
	if (ch == 4 && s->kind == ST_EXEC)
		exec_resize(s, d, len);
	return 1;
}

int ws_data(struct mg_connection *c, int bits, char *p, size_t n, void *cbdata)
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

void ws_on_close(const struct mg_connection *c, void *cbdata)
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
