// SPDX-License-Identifier: Apache-2.0
/* The network agent: kube-router, as Itzo ran it (host/networkagent.go),
 * for Services and network policies on the cell. It runs when the spec has
 * a NodeName, a `kubeconfig` package is deployed and kube-router is
 * installed; it is restarted with the units' back-off (10 s doubling to
 * 5 min, reset after 10 min of running) and writes to a log file that is
 * rotated (one old copy, ".1") when it passes 10 MiB at a start. Like the
 * monitors it is not the agent's child for long: it has its own session
 * and is recorded (pid and start time) in <state>/netagent.json, so that
 * an agent restart re-adopts it instead of starting a second one. Its
 * absence is logged once, never fatal.
 *
 * Seams: CELL_AGENT_KUBE_ROUTER (the binary; default kube-router on
 * PATH), CELL_AGENT_NETAGENT_LOG (default /var/log/kube-router.log),
 * CELL_AGENT_BACKOFF_UNIT_MS. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "log.h"
#include "netsetup.h"
#include "podrun.h"
#include "runtime.h"
#include "procspawn.h"
#include "sup-internal.h"
#include "util.h"

#define NA_FILE "netagent.json"
#define NA_LOG_MAX (10 * 1024 * 1024)
#define NA_RESET_NS (600ull * 1000000000ull)
#define NA_DEPTH 4

/* The command line (pure; tests/unit checks it). */
char **netagent_argv(const char *bin, const char *kubeconfig, const char *node,
		     const char *ip)
{
	char **v = xcalloc(11, sizeof(char *));
	size_t n = 0;

	v[n++] = xstrdup(bin);
	v[n++] = xasprintf("--kubeconfig=%s", kubeconfig);
	v[n++] = xasprintf("--hostname-override=%s", node);
	v[n++] = xasprintf("--ip-address-override=%s", ip);
	v[n++] = xstrdup("--hairpin-mode=true");
	v[n++] = xstrdup("--disable-source-dest-check=false");
	v[n++] = xstrdup("--enable-pod-egress=false");
	v[n++] = xstrdup("--enable-cni=false");
	v[n++] = xstrdup("--run-router=false");
	v[n++] = xstrdup("--v=2");
	return v;
}

static char *find_on_path(const char *name)
{
	const char *env = getenv("CELL_AGENT_KUBE_ROUTER");

	if (env && *env)
		return access(env, X_OK) == 0 ? xstrdup(env) : NULL;
	return spawn_find_program(name);
}

/* The file named "kubeconfig" in the package (as Itzo walked it). */
static char *find_kubeconfig(const char *dir, int depth)
{
	cleanup_dir DIR *d = depth < NA_DEPTH ? opendir(dir) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d))) {
		cleanup_free char *p = NULL;
		char *found;
		if (de->d_name[0] == '.')
			continue;
		p = xasprintf("%s/%s", dir, de->d_name);
		if (de->d_type == DT_REG && !strcmp(de->d_name, "kubeconfig"))
			return steal_ptr(&p);
		if (de->d_type == DT_DIR &&
		    (found = find_kubeconfig(p, depth + 1)))
			return found;
	}
	return NULL;
}

static const char *log_path(void)
{
	const char *v = getenv("CELL_AGENT_NETAGENT_LOG");
	return v && *v ? v : "/var/log/kube-router.log";
}

static int open_log(void)
{
	const char *p = log_path();
	struct stat st;

	if (stat(p, &st) == 0 && st.st_size > NA_LOG_MAX) {
		cleanup_free char *old = xasprintf("%s.1", p);
		if (rename(p, old) < 0)
			log_warn("rotate %s: %m", p);
	}
	return open(p, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
}

static void save(struct supervisor *s)
{
	cleanup_free char *path = xasprintf("%s/%s", s->o.state_dir, NA_FILE);
	cleanup_json json_t *j =
	    json_pack("{s:I,s:I}", "pid", (json_int_t)s->na.pid, "startTime",
		      (json_int_t)s->na.start_time);
	cleanup_free char *text = json_dumps(j, 0);
	struct cerr e = {0};

	if (!s->na.pid) {
		unlink(path);
		return;
	}
	if (fs_write_atomic(path, text, strlen(text), 0600, &e) < 0)
		log_warn("network agent: %s", e.msg);
}

static void watch(struct supervisor *s, pid_t pid)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	s->na.pid = pid;
	s->na.start_time = proc_start_time(pid);
	s->na.pidfd = fd;
	ev.data.fd = fd;
	if (fd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
		log_error("network agent: watch pid %d: %m", (int)pid);
	save(s);
}

/* Why it cannot run now (logged once per reason), or NULL. */
static void missing(struct supervisor *s, const char *why)
{
	if (s->na.why && !strcmp(s->na.why, why))
		return;
	free(s->na.why);
	s->na.why = xstrdup(why);
	log_warn("network agent not started: %s", why);
}

static void start(struct supervisor *s)
{
	cleanup_free char *bin = find_on_path("kube-router");
	cleanup_free char *kc = NULL, *pkg = NULL, *ifn = NULL, *ip = NULL;
	char **argv;
	struct cerr e = {0};
	int logfd, stdio[3];
	pid_t pid;

	/* The version in force (its top-level names are links into it,
	 * agent/pod/pkgswap.c); the path through ..data stays right after a
	 * redeploy. */
	pkg = xasprintf("%s/kubeconfig/..data", s->o.packages_dir);
	if (!bin)
		return missing(s, "kube-router is not installed");
	if (!(kc = find_kubeconfig(pkg, 0)))
		return missing(s, "no kubeconfig package deployed");
	if (net_primary(&ifn, &ip, &e) < 0)
		return missing(s, e.msg);
	logfd = open_log();
	stdio[0] = -1;
	stdio[1] = stdio[2] = logfd;
	argv = netagent_argv(bin, kc, s->spec.node_name, ip);
	pid = spawn_program(bin, argv, stdio, true, &e);
	strv_free(argv);
	if (logfd >= 0)
		close(logfd);
	if (pid < 0) {
		s->na.not_before_ns =
		    now_ns() + podrun_backoff_s(++s->na.backoff_n) *
				   netagent_unit_ms() * 1000000ull;
		return missing(s, e.msg);
	}
	free(s->na.why);
	s->na.why = NULL;
	s->na.started_ns = now_ns();
	log_info("network agent %s started (pid %d, node %s, IP %s)", bin,
		 (int)pid, s->spec.node_name, ip);
	watch(s, pid);
}

uint64_t netagent_unit_ms(void)
{
	const char *v = getenv("CELL_AGENT_BACKOFF_UNIT_MS");
	int64_t unit_ms = 1000;

	if (v)
		parse_int64(v, 1, 1000, &unit_ms, NULL);
	return (uint64_t)unit_ms;
}

void netagent_tick(struct supervisor *s)
{
	bool wanted = s->has_spec && s->spec.node_name && *s->spec.node_name;

	if (s->na.pid && !wanted) {
		log_info("network agent: no NodeName; stopping it");
		kill(s->na.pid, SIGTERM);
		return;
	}
	if (!wanted || s->na.pid || now_ns() < s->na.not_before_ns)
		return;
	start(s);
}

void netagent_exited(struct supervisor *s)
{
	int status = 0;
	bool long_run = now_ns() - s->na.started_ns > NA_RESET_NS;

	epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->na.pidfd, NULL);
	close(s->na.pidfd);
	s->unwatched = true;
	/* Our child unless it was re-adopted after an agent restart. */
	if (waitpid(s->na.pid, &status, WNOHANG) > 0)
		log_warn("network agent (pid %d) exited with status %d",
			 (int)s->na.pid, status);
	else
		log_warn("network agent (pid %d) exited", (int)s->na.pid);
	s->na.pid = 0;
	s->na.pidfd = -1;
	if (long_run)
		s->na.backoff_n = 0;
	s->na.not_before_ns = now_ns() + podrun_backoff_s(++s->na.backoff_n) *
					     netagent_unit_ms() * 1000000ull;
	save(s);
}

void netagent_restore(struct supervisor *s)
{
	cleanup_free char *path = xasprintf("%s/%s", s->o.state_dir, NA_FILE);
	struct buf b;
	struct cerr e = {0};
	cleanup_json json_t *j = NULL;
	long long pid = 0, st = 0;

	s->na.pidfd = -1;
	buf_init(&b, 4096);
	if (fs_read_file(path, &b, &e) == 0)
		j = json_parse_object(b.data, b.len, &e);
	buf_free(&b);
	if (!j || jint(j, "pid", 0, &pid, &e) < 0 ||
	    jint(j, "startTime", 0, &st, &e) < 0 || pid <= 1 || pid > 4194304)
		return;
	if (proc_start_time((pid_t)pid) != (uint64_t)st) {
		unlink(path); /* it ended while the agent was away */
		return;
	}
	log_info("network agent (pid %lld) re-adopted", pid);
	s->na.started_ns = now_ns();
	watch(s, (pid_t)pid);
}

uint64_t netagent_next_due(const struct supervisor *s)
{
	return !s->na.pid && s->has_spec && s->spec.node_name &&
		       *s->spec.node_name
		   ? s->na.not_before_ns
		   : 0;
}

void netagent_free(struct supervisor *s)
{
	if (s->na.pidfd >= 0)
		close(s->na.pidfd);
	free(s->na.why);
}
