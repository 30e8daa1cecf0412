// SPDX-License-Identifier: Apache-2.0
/* The streaming verbs: exec, attach, port-forward. Each is a websocket
 * whose first message is the raw JSON parameters (ExecParams,
 * AttachParams, PortForwardParams); then channel 0 carries stdin (or the
 * forwarded bytes), 1 stdout, 2 stderr, 3 the exit code, 4 a terminal
 * resize. With -t the local terminal goes raw and SIGWINCH becomes a
 * resize message. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include "cleanup.h"
#include "ctl-internal.h"
#include "fsutil.h"
#include "util.h"

struct stream_opts {
	bool interactive, tty;
	const char *unit, *pod;
};

static const char exec_usage[] =
    "usage: cellctl exec --cell ADDR [-i] [-t] [-c UNIT] [--pod NS_NAME] "
    "-- CMD [ARG…]\n"
    "  run CMD inside a unit (its namespaces, cgroup, user, environment);\n"
    "  -i sends stdin, -t gives it a terminal (raw mode, resized with the\n"
    "  window). The exit status is CMD's; 1 when it could not start.\n";
static const char attach_usage[] =
    "usage: cellctl attach --cell ADDR [-i] [-t] [-c UNIT]\n"
    "  a unit's output (and, with -i, its stdin) until it ends\n";

static int stream_opts(int argc, char **argv, struct ctl_global *g,
		       const char *usage, struct stream_opts *o)
{
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"stdin", no_argument, NULL, 'i'},
	    {"tty", no_argument, NULL, 't'},
	    {"container", required_argument, NULL, 'c'},
	    {"unit", required_argument, NULL, 'c'},
	    {"pod", required_argument, NULL, 'p'},
	    {NULL, 0, NULL, 0}};
	int c;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "hitc:o:", lo, g)) != -1) {
		if (c == G_HELP)
			return fputs(usage, stdout), 0;
		if (c == 'i')
			o->interactive = true;
		else if (c == 't')
			o->tty = true;
		else if (c == 'c')
			o->unit = optarg;
		else if (c == 'p')
			o->pod = optarg;
		else
			return ctl_usage(usage);
	}
	return -1;
}

/* ---- the terminal ---- */

static struct termios saved_tio;
static bool tio_saved;

static void restore_tty(void)
{
	if (tio_saved)
		tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_tio);
	tio_saved = false;
}

static void raw_tty(void)
{
	struct termios t;

	if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tio) < 0)
		return;
	t = saved_tio;
	cfmakeraw(&t);
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &t) == 0) {
		tio_saved = true;
		atexit(restore_tty);
	}
}

static int send_resize(struct ws *w, struct cerr *e)
{
	struct winsize ws;
	char msg[128];
	int n;

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row)
		return 0;
	n = snprintf(msg, sizeof(msg),
		     "{\"Rows\":%u,\"Cols\":%u,\"X\":%u,\"Y\":%u}", ws.ws_row,
		     ws.ws_col, ws.ws_xpixel, ws.ws_ypixel);
	return ws_send_chan(w, 4, msg, (size_t)n, e);
}

/* The terminal's size in the parameters too: the agent sets it before the
 * command starts, where the first resize message would come after. */
static void first_size(json_t *params)
{
	struct winsize ws;

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row)
		return;
	json_object_set_new(params, "Rows", json_integer(ws.ws_row));
	json_object_set_new(params, "Cols", json_integer(ws.ws_col));
}

static int winch_fd(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGWINCH);
	sigprocmask(SIG_BLOCK, &s, NULL);
	return signalfd(-1, &s, SFD_CLOEXEC | SFD_NONBLOCK);
}

/* ---- exec and attach ---- */

/* Relay until the exit code (exec) or the end of the stream: the remote
 * exit code, or -1 with e set. */
static int relay(struct ws *w, const struct stream_opts *o, bool want_code,
		 struct cerr *e)
{
	cleanup_close int sfd = o->tty ? winch_fd() : -1;
	bool in_open = o->interactive;
	struct buf p;
	int code = want_code ? -2 : 0, ch, r;

	buf_init(&p, 0);
	for (;;) {
		struct pollfd pf[3] = {
		    {.fd = ws_fd(w), .events = POLLIN},
		    {.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN},
		    {.fd = sfd, .events = POLLIN}};
		while ((r = ws_recv(w, 0, &ch, &p, e)) == WS_MSG) {
			if (ch == 1 || ch == 2) {
				fs_write_all(ch == 2 ? STDERR_FILENO
						     : STDOUT_FILENO,
					     p.data ? p.data : "", p.len);
			} else if (ch == 3) {
				int64_t v = -1;
				struct cerr e2 = {0};
				buf_append(&p, "", 0, &e2);
				parse_int64(p.data, INT32_MIN, INT32_MAX, &v,
					    &e2);
				code = (int)v;
				goto out;
			}
		}
		if (r < 0 || r == WS_CLOSED)
			break;
		if (poll(pf, 3, 30000) < 0 && errno != EINTR) {
			r = cerr_sys(e, "poll");
			break;
		}
		if (pf[1].revents) {
			char tmp[8192];
			ssize_t n = read(STDIN_FILENO, tmp, sizeof(tmp));
			/* The protocol has no end-of-input message: at EOF
			 * stdin just stops. */
			if (n <= 0)
				in_open = false;
			else if (ws_send_chan(w, 0, tmp, (size_t)n, e) < 0)
				break;
		}
		if (pf[2].revents) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == sizeof(si))
				;
			if (send_resize(w, e) < 0)
				break;
		}
	}
out:
	buf_free(&p);
	if (r < 0)
		return -1;
	if (code == -2)
		return cerr_set(e, ECONNRESET,
				"the stream ended without an exit code");
	if (code == -1) /* the agent's "could not start" */
		return cerr_set(e, EREMOTEIO, "the command could not start");
	return code;
}

/* The first unit's name when none was given. */
static int default_unit(struct ctl_cell *c, struct stream_opts *o, char **owned,
			struct cerr *e)
{
	json_t *st;
	const char *n;

	if (o->unit)
		return 0;
	st = cell_status(c, e);
	if (!st)
		return -1;
	n = json_string_value(json_object_get(
	    json_array_get(json_object_get(st, "unitStatus"), 0), "name"));
	if (!n) {
		json_decref(st);
		return cerr_set(e, ENOENT, "the cell runs no unit");
	}
	*owned = xstrdup(n);
	o->unit = *owned;
	json_decref(st);
	return 0;
}

static int run_stream(struct ctl_global *g, const char *verb,
		      struct stream_opts *o, json_t *params, bool want_code)
{
	struct ctl_cell cell;
	struct cerr e = {0};
	cleanup_free char *unit = NULL, *text = NULL;
	struct ws *w = NULL;
	int r;

	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail(verb, &e);
	r = default_unit(&cell, o, &unit, &e);
	if (r == 0) {
		json_object_set_new(params, "UnitName", json_string(o->unit));
		json_object_set_new(params, "PodName",
				    json_string(o->pod ? o->pod : ""));
		if (o->tty)
			first_size(params);
		text = json_dumps(params, JSON_COMPACT);
		r = ws_open(&cell, want_code ? "exec/" : "attach/", &w, &e);
	}
	if (r == 0)
		r = ws_send_text(w, text, strlen(text), &e);
	if (r == 0 && o->tty) {
		raw_tty();
		r = send_resize(w, &e);
	}
	if (r == 0)
		r = relay(w, o, want_code, &e);
	restore_tty();
	ws_close(w);
	cell_free(&cell);
	if (r < 0)
		return ctl_fail(verb, &e);
	if (r == -1 || r > 255)
		return EXIT_REMOTE;
	return r;
}

int cmd_exec(int argc, char **argv, struct ctl_global *g)
{
	struct stream_opts o = {0};
	json_t *params, *cmd;
	int r = stream_opts(argc, argv, g, exec_usage, &o);

	if (r >= 0)
		return r;
	if (optind >= argc)
		return ctl_usage(exec_usage);
	cmd = json_array();
	for (int i = optind; i < argc; i++)
		json_array_append_new(cmd, json_string(argv[i]));
	params = json_pack("{s:o,s:b,s:b,s:b}", "Command", cmd, "Interactive",
			   o.interactive, "TTY", o.tty, "SkipNSEnter", 0);
	r = run_stream(g, "exec", &o, params, true);
	json_decref(params);
	return r;
}

int cmd_attach(int argc, char **argv, struct ctl_global *g)
{
	struct stream_opts o = {0};
	json_t *params;
	int r = stream_opts(argc, argv, g, attach_usage, &o);

	if (r >= 0)
		return r;
	if (optind != argc)
		return ctl_usage(attach_usage);
	params =
	    json_pack("{s:b,s:b}", "Interactive", o.interactive, "TTY", o.tty);
	r = run_stream(g, "attach", &o, params, false);
	json_decref(params);
	return r;
}

/* ---- port-forward ---- */

struct fwd {
	struct ctl_cell *cell; /* shared settings; each stream its own handle */
	int sock;
	int port;
	const char *pod;
};

static void fwd_relay(struct ws *w, int sock)
{
	struct cerr e = {0};
	struct buf p;
	int ch, r;

	buf_init(&p, 0);
	for (;;) {
		struct pollfd pf[2] = {{.fd = ws_fd(w), .events = POLLIN},
				       {.fd = sock, .events = POLLIN}};
		while ((r = ws_recv(w, 0, &ch, &p, &e)) == WS_MSG)
			if (ch == 1 && p.len &&
			    fs_write_all(sock, p.data, p.len) < 0)
				goto out;
		if (r != WS_NONE)
			break;
		if (poll(pf, 2, 30000) < 0 && errno != EINTR)
			break;
		if (pf[1].revents) {
			char tmp[16384];
			ssize_t n = read(sock, tmp, sizeof(tmp));
			if (n <= 0 ||
			    ws_send_chan(w, 0, tmp, (size_t)n, &e) < 0)
				break;
		}
	}
out:
	buf_free(&p);
}

static void *fwd_conn(void *arg)
{
	struct fwd *f = arg;
	struct cerr e = {0};
	struct ws *w = NULL;
	char port[16];
	json_t *pj;
	cleanup_free char *params = NULL;

	snprintf(port, sizeof(port), "%d", f->port);
	pj = json_pack("{s:s,s:s}", "PodName", f->pod, "Port", port);
	params = json_dumps(pj, JSON_COMPACT);
	json_decref(pj);

	if (ws_open(f->cell, "portforward/", &w, &e) == 0 &&
	    ws_send_text(w, params, strlen(params), &e) == 0)
		fwd_relay(w, f->sock);
	if (e.code)
		fprintf(stderr, "cellctl port-forward: %s\n", e.msg);
	ws_close(w);
	close(f->sock);
	free(f);
	return NULL;
}

static int listen_on(int port, struct cerr *e)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return cerr_sys(e, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 64) < 0) {
		close(fd);
		return cerr_sys(e, "listen on 127.0.0.1:%d", port);
	}
	return fd;
}

int cmd_port_forward(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl port-forward LOCAL:REMOTE --cell ADDR [--pod "
	    "NS_NAME]\n"
	    "  listen on 127.0.0.1:LOCAL; each connection is forwarded to\n"
	    "  the pod IP's port REMOTE over its own websocket. Runs until\n"
	    "  interrupted.\n";
	struct stream_opts o = {0};
	struct ctl_cell cell;
	struct cerr e = {0};
	int64_t lp, rp;
	char *colon;
	int r = stream_opts(argc, argv, g, usage, &o), lfd;

	if (r >= 0)
		return r;
	if (argc - optind != 1 || !(colon = strchr(argv[optind], ':')))
		return ctl_usage(usage);
	*colon = 0;
	if (parse_int64(argv[optind], 0, 65535, &lp, &e) < 0 ||
	    parse_int64(colon + 1, 1, 65535, &rp, &e) < 0)
		return ctl_usage(usage);
	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail("port-forward", &e);
	lfd = listen_on((int)lp, &e);
	if (lfd < 0)
		return ctl_fail("port-forward", &e);
	if (!lp) {
		struct sockaddr_in a;
		socklen_t al = sizeof(a);
		getsockname(lfd, (struct sockaddr *)&a, &al);
		lp = ntohs(a.sin_port);
	}
	printf("Forwarding from 127.0.0.1:%lld -> %lld\n", (long long)lp,
	       (long long)rp);
	fflush(stdout);
	for (;;) {
		int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;
		struct fwd *f;
		if (s < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		f = xcalloc(1, sizeof(*f));
		*f = (struct fwd){&cell, s, (int)rp, o.pod ? o.pod : ""};
		if (pthread_create(&t, NULL, fwd_conn, f) != 0) {
			close(s);
			free(f);
			continue;
		}
		pthread_detach(t);
	}
	cerr_sys(&e, "accept");
	close(lfd);
	cell_free(&cell);
	return ctl_fail("port-forward", &e);
}
