// SPDX-License-Identifier: Apache-2.0
/* Helper processes of the agent (see pullproc.h). */
#include "pullproc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procspawn.h"
#include "jsonutil.h"
#include "log.h"
#include "util.h"

char *pullproc_beside_self(const char *name)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0)
		return xstrdup(name);
	self[n] = '\0';
	return xasprintf("%s/%s", dirname(self), name);
}

static int creds_pipe(const char *text, size_t len, struct cerr *e)
{
	int p[2];

	/* A pipe holds 64 KiB: the write cannot block. */
	if (len > 60 * 1024)
		return cerr_set(e, E2BIG, "credentials are over 60 KiB");
	if (pipe2(p, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	if (write(p[1], text, len) != (ssize_t)len) {
		cerr_sys(e, "write credentials");
		close(p[0]);
		p[0] = -1;
	}
	close(p[1]);
	return p[0];
}

int pullproc_creds(const char *user, const char *pass, struct cerr *e)
{
	json_t *j = json_pack("{s:s, s:s}", "username", user ? user : "",
			      "password", pass ? pass : "");
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	int fd;

	json_decref(j);
	if (!text)
		return cerr_set(e, EINVAL, "credentials are not valid UTF-8");
	fd = creds_pipe(text, strlen(text), e);
	explicit_bzero(text, strlen(text));
	free(text);
	return fd;
}

int pullproc_spawn(char *const argv[], int stdin_fd, struct pullproc *p,
		   struct cerr *e)
{
	int out[2];
	int stdio[3];

	memset(p, 0, sizeof(*p));
	p->pidfd = p->outfd = -1;
	p->started_ns = now_ns();
	if (pipe2(out, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	stdio[0] = stdin_fd;
	stdio[1] = stdio[2] = out[1];
	p->pidfd =
	    spawn_pidfd(argv, NULL, stdio, SPAWN_DIE_WITH_US, &p->pid, e);
	close(out[1]);
	if (p->pidfd < 0) {
		close(out[0]);
		return cerr_prefix(e, "start %s", argv[0]);
	}
	p->outfd = out[0];
	fcntl(p->outfd, F_SETFL, O_NONBLOCK);
	return 0;
}

static void take_line(struct pullproc *p)
{
	json_t *j = NULL;
	const char *ev;

	p->line[p->line_len] = '\0';
	if (p->line_len > 0 && p->line[0] == '{')
		j = json_loads(p->line, 0, NULL);
	ev = json_string_value(json_object_get(j, "event"));
	if (ev && !strcmp(ev, "error")) {
		free(p->error);
		p->error = jstrdup(j, "message");
		p->error_code =
		    (int)json_integer_value(json_object_get(j, "code"));
	} else if (ev && !strcmp(ev, "warning")) {
		free(p->warning);
		p->warning = jstrdup(j, "message");
	} else if (ev && !strcmp(ev, "layer_done") &&
		   !json_is_true(json_object_get(j, "cached"))) {
		json_int_t d =
		    json_integer_value(json_object_get(j, "downloaded"));
		if (d > 0)
			p->bytes += (uint64_t)d;
	} else if (!j && p->line_len > 0) {
		free(p->last);
		p->last = xstrdup(p->line);
	}
	json_decref(j);
	p->line_len = 0;
}

void pullproc_feed(struct pullproc *p, const char *buf, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			take_line(p);
			continue;
		}
		/* An over-long line is cut, never grown. */
		if (p->line_len < sizeof(p->line) - 1)
			p->line[p->line_len++] = buf[i];
	}
}

void pullproc_drain(struct pullproc *p)
{
	char buf[4096];
	ssize_t n;

	while (p->outfd >= 0 && (n = read(p->outfd, buf, sizeof(buf))) > 0)
		pullproc_feed(p, buf, (size_t)n);
}

void pullproc_clear(struct pullproc *p)
{
	free(p->error);
	free(p->last);
	free(p->warning);
	p->error = p->last = p->warning = NULL;
	p->line_len = 0;
}

static void release(struct pullproc *p)
{
	if (p->outfd >= 0)
		close(p->outfd);
	if (p->pidfd >= 0)
		close(p->pidfd);
	pullproc_clear(p);
	p->outfd = p->pidfd = -1;
}

int pullproc_finish(struct pullproc *p, struct cerr *e)
{
	int code;

	pullproc_drain(p);
	if (p->line_len)
		take_line(p);
	code = spawn_wait(p->pidfd, false);
	if (code == 0) {
		release(p);
		return 0;
	}
	if (p->error)
		cerr_set(e, p->error_code > 0 ? p->error_code : EIO, "%s",
			 p->error);
	else if (code > 128)
		cerr_set(e, EIO,
			 "the helper (pid %d) was killed by signal %d%s%s",
			 (int)p->pid, code - 128, p->last ? ": " : "",
			 p->last ? p->last : "");
	else
		cerr_set(e, EIO, "the helper (pid %d) exited %d%s%s",
			 (int)p->pid, code, p->last ? ": " : "",
			 p->last ? p->last : "");
	release(p);
	return -1;
}

void pullproc_kill(struct pullproc *p)
{
	if (p->pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
		spawn_wait(p->pidfd, false);
	}
	release(p);
}

int pullproc_run(char *const argv[], int stdin_fd, struct cerr *e)
{
	struct pullproc p;

	if (pullproc_spawn(argv, stdin_fd, &p, e) < 0)
		return -1;
	for (;;) {
		struct pollfd fds[2] = {{.fd = p.outfd, .events = POLLIN},
					{.fd = p.pidfd, .events = POLLIN}};

		if (poll(fds, 2, -1) < 0 && errno != EINTR)
			break;
		pullproc_drain(&p);
		if (fds[1].revents)
			break;
	}
	return pullproc_finish(&p, e);
}
