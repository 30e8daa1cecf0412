// SPDX-License-Identifier: Apache-2.0
/* OCI hooks, as CDI specs ask for them (nvidia-ctk's create-symlinks and
 * update-ldcache are createContainer hooks). They run in the container
 * init, which is where the OCI runtime spec puts them: createContainer in
 * the container's namespaces before pivot_root, startContainer after it,
 * before the workload's exec. Each gets the OCI state on stdin and a
 * bounded time; its stderr (the first HOOK_ERR_MAX bytes) becomes the
 * start error when it fails, so a unit's reason says what went wrong. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "runtime.h"
#include "util.h"

#define HOOK_ERR_MAX 1024

const char *hooks_kind_name(enum run_hook_kind k)
{
	return k == HOOK_START_CONTAINER ? "startContainer" : "createContainer";
}

static char *state_json(const struct run_config *c, enum run_hook_kind k,
			const char *bundle, pid_t pid)
{
	cleanup_json json_t *o = json_object();
	char *s;

	json_object_set_new(o, "ociVersion", json_string("1.0.2"));
	json_object_set_new(o, "id", json_string(c->id));
	json_object_set_new(
	    o, "status",
	    json_string(k == HOOK_CREATE_CONTAINER ? "creating" : "created"));
	json_object_set_new(o, "pid", json_integer(pid));
	json_object_set_new(o, "bundle", json_string(bundle ? bundle : "/"));
	json_object_set_new(o, "annotations", json_object());
	s = json_dumps(o, JSON_COMPACT);
	if (!s)
		abort();
	return s;
}

static __attribute__((noreturn)) void exec_hook(const struct run_hook *h,
						int in, int err)
{
	char *const def_argv[] = {h->path, NULL};
	char *const no_env[] = {NULL};
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (dup2(in, 0) < 0 || dup2(null >= 0 ? null : err, 1) < 0 ||
	    dup2(err, 2) < 0)
		_exit(127);
	syscall(SYS_close_range, 3, ~0U, 0);
	execve(h->path, h->args && h->args[0] ? h->args : def_argv,
	       h->env ? h->env : no_env);
	dprintf(2, "exec %s: %s", h->path, strerror(errno));
	_exit(127);
}

static int64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Read the hook's stderr until the hook has exited (and its stderr is
 * drained or held open only by something it left behind) or the deadline
 * passes, which kills it. 0 when it exited, 1 on a timeout. */
static int wait_hook(pid_t pid, int err, int64_t deadline, char *msg,
		     size_t msgsz, int *status)
{
	size_t n = 0;
	bool exited = false, eof = false;

	while (!(exited && eof)) {
		struct pollfd p = {err, POLLIN, 0};
		int64_t left = deadline - mono_ms();
		char b[512];
		ssize_t r;

		if (!exited && waitpid(pid, status, WNOHANG) == pid)
			exited = true;
		if (left <= 0 && !exited)
			break;
		/* Once it exited, only what is already in the pipe. */
		if (eof ||
		    poll(&p, 1, exited ? 0 : (int)(left < 50 ? left : 50)) <=
			0) {
			if (exited)
				break;
			continue;
		}
		r = read(err, b, sizeof(b));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			eof = true;
			continue;
		}
		for (ssize_t i = 0; i < r && n + 1 < msgsz; i++)
			msg[n++] = b[i] == '\n' ? ' ' : b[i];
	}
	msg[n] = '\0';
	if (exited)
		return 0;
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0 && errno == EINTR)
		;
	return 1;
}

static int run_one(const struct run_hook *h, const char *state, struct cerr *e)
{
	int in[2], err[2], status = 0, r;
	char msg[HOOK_ERR_MAX + 1];
	pid_t pid;

	if (pipe2(in, O_CLOEXEC) < 0)
		return cerr_sys(e, "pipe");
	if (pipe2(err, O_CLOEXEC) < 0) {
		close(in[0]);
		close(in[1]);
		return cerr_sys(e, "pipe");
	}
	pid = fork();
	if (pid == 0)
		exec_hook(h, in[0], err[1]);
	close(in[0]);
	close(err[1]);
	if (pid < 0) {
		close(in[1]);
		close(err[0]);
		return cerr_sys(e, "fork");
	}
	/* The state is small (well under a pipe's buffer): this write does
	 * not wait on the hook reading it. */
	signal(SIGPIPE, SIG_IGN);
	(void)fs_write_all(in[1], state, strlen(state));
	close(in[1]);
	r = wait_hook(pid, err[0], mono_ms() + (int64_t)h->timeout_s * 1000,
		      msg, sizeof(msg), &status);
	close(err[0]);
	signal(SIGPIPE, SIG_DFL);
	if (r > 0)
		return cerr_set(e, ETIMEDOUT, "timed out after %d s%s%s",
				h->timeout_s, msg[0] ? ": " : "", msg);
	if (r < 0)
		return cerr_sys(e, "wait");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status))
		return cerr_set(e, EIO, "killed by signal %d%s%s",
				WTERMSIG(status), msg[0] ? ": " : "", msg);
	return cerr_set(e, EIO, "exit status %d%s%s", WEXITSTATUS(status),
			msg[0] ? ": " : "", msg);
}

int hooks_run(const struct run_config *c, enum run_hook_kind k,
	      const char *bundle, pid_t pid, struct cerr *e)
{
	cleanup_free char *state = NULL;

	for (size_t i = 0; i < c->n_hooks; i++) {
		const struct run_hook *h = &c->hooks[i];

		if (h->kind != k)
			continue;
		if (!state)
			state = state_json(c, k, bundle, pid);
		if (run_one(h, state, e) < 0)
			return cerr_prefix(e, "%s hook %s", hooks_kind_name(k),
					   h->path);
	}
	return 0;
}

int hooks_write_bundle(const char *bundle, const struct run_config *c,
		       struct cerr *e)
{
	cleanup_json json_t *o = NULL;
	cleanup_free char *text = NULL, *p = NULL;
	json_t *root, *proc, *env = json_array(), *args = json_array();

	if (!c->n_hooks) {
		json_decref(env);
		json_decref(args);
		return 0;
	}
	o = json_object();
	root = json_object();
	proc = json_object();
	json_object_set_new(o, "ociVersion", json_string("1.0.2"));
	json_object_set_new(root, "path", json_string(c->rootfs));
	json_object_set_new(root, "readonly", json_boolean(c->readonly_rootfs));
	json_object_set_new(o, "root", root);
	for (size_t i = 0; c->env && c->env[i]; i++)
		json_array_append_new(env, json_string(c->env[i]));
	for (size_t i = 0; c->argv && c->argv[i]; i++)
		json_array_append_new(args, json_string(c->argv[i]));
	json_object_set_new(proc, "args", args);
	json_object_set_new(proc, "env", env);
	json_object_set_new(proc, "cwd", json_string(c->cwd));
	json_object_set_new(o, "process", proc);
	text = json_dumps(o, JSON_COMPACT);
	if (!text)
		abort();
	p = xasprintf("%s/config.json", bundle);
	return fs_replace(p, text, strlen(text), 0600, e);
}
