// SPDX-License-Identifier: Apache-2.0
/* cell-monitor: the single-threaded helper that sets a unit up and stays as
 * its monitor, and the agent's side of the protocol with it.
 *
 * The monitor is an explicit state machine driven by one poll loop:
 *
 *   state \ event   output     SIGTERM        timer     SIGCHLD(init)
 *   RUNNING         log it     TERM → init,   -         → EXITED
 *                              arm timer
 *   STOPPING        log it     KILL at once   KILL      → EXITED
 *   EXITED          log it     ignored        -         -
 *
 * EXITED ends when both pipes reach EOF (or a short deadline passes, should
 * something outside the unit hold them); then exit.json is written and the
 * monitor exits 0. Signals arrive through a signalfd, so nothing runs in a
 * signal handler. A SIGTERM sent with sigqueue() carries the grace period
 * in its value; a plain kill(1) uses run.json's. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "procspawn.h"
#include "runtime.h"
#include "util.h"

#define EXIT_SLOT ".exit.slot"
#define EXIT_SLOT_BYTES 8192u /* an exit record is well under 4 KiB */
#define DRAIN_MS 5000 /* pipes held open by something outside the unit */

void monitor_decide_exit(int wstatus, int64_t oom_kills,
			 struct unit_runtime_state *st)
{
	if (WIFSIGNALED(wstatus)) {
		st->signal = WTERMSIG(wstatus);
		st->exit_code = 128 + st->signal;
	} else {
		st->signal = 0;
		st->exit_code = WEXITSTATUS(wstatus);
	}
	st->oom_killed = oom_kills > 0;
	free(st->reason);
	/* An OOM kill that the unit survived (a child of it died, the
	 * unit exited 0) does not turn a success into a failure. */
	st->reason = xstrdup(st->exit_code == 0 ? "Completed"
			     : st->oom_killed	? "OOMKilled"
						: "Error");
	st->exited = true;
}

/* Write name in dir whole or not at all (fs_replace: no fsync). The files
 * must survive the agent or the monitor dying, which rename gives; a
 * machine that reboots has lost its units anyway. */
static int write_atomic(const char *dir, const char *name, const char *text,
			struct cerr *e)
{
	cleanup_free char *dst = xasprintf("%s/%s", dir, name);

	return fs_replace(dst, text, strlen(text), 0644, e);
}

/* One line to whoever waits for us; the fd is closed after it. */
static void report(int *fd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void report(int *fd, const char *fmt, ...)
{
	char line[REPORT_MAX];
	va_list ap;
	int n;

	if (*fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	for (int i = 0; i < n; i++)
		if (line[i] == '\n')
			line[i] = ' ';
	line[n++] = '\n';
	if (fs_write_all(*fd, line, (size_t)n) < 0)
		log_warn("report to the agent: %s", strerror(errno));
	close(*fd);
	*fd = -1;
}

/* =============================== run mode =============================== */

struct spawn_fds {
	int sock[2];			  /* [0] monitor, [1] child */
	int out[2], err[2];		  /* pipes */
	int devnull, netns, ipcns, pidns; /* devnull: the stdin FIFO */
	int own_pidns; /* to go back to once the init is born */
};

struct monitor {
	char *dir;
	struct run_config cfg;
	struct cgroup cg;
	struct crilog log;
	int sync_fd, sigfd, timerfd;
	int out_fd, err_fd; /* read ends of the unit's stdout and stderr */
	/* A tty unit: out_fd is the terminal's master; what an attach
	 * writes into the stdin FIFO (tty_in) goes to tty_master. */
	int tty_in, tty_master;
	int exit_slot;		/* EXIT_SLOT, reserved at start; -1 once used */
	struct spawn_fds spawn; /* until the init has exec'd */
	pid_t init;
	uint64_t init_start;
	bool init_done, stopping;
	int wstatus;
	int64_t started_ns, finished_ns;
	int64_t drain_until; /* monotonic ms */
};

static int64_t mono_ms(void)
{
	return (int64_t)(now_ns() / 1000000);
}

/* Leave the agent: a new session (no terminal, no group the agent's
 * killer could take along), and a fork so that the agent is not our parent
 * and never has to reap us. The first process exits at once. */
static int detach(struct cerr *e)
{
	pid_t pid;

	if (setsid() < 0 && getpgrp() != getpid())
		return cerr_sys(e, "setsid");
	pid = fork();
	if (pid < 0)
		return cerr_sys(e, "fork");
	if (pid > 0)
		_exit(0);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return cerr_sys(e, "become a subreaper");
	umask(022);
	if (chdir("/") < 0)
		return cerr_sys(e, "chdir /");
	return 0;
}

/* One monitor per unit directory, and one run per monitor. */
static int claim_dir(struct monitor *m, struct cerr *e)
{
	cleanup_free char *lock = xasprintf("%s/monitor.lock", m->dir);
	cleanup_free char *st = xasprintf("%s/state.json", m->dir);
	cleanup_free char *ex = xasprintf("%s/exit.json", m->dir);
	int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return cerr_sys(e, "open %s", lock);
	/* The fd stays open (and locked) for the monitor's life. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return cerr_set(e, EBUSY, "unit %s already has a monitor",
				m->dir);
	if (fs_exists(st) || fs_exists(ex))
		return cerr_set(e, EEXIST,
				"unit %s has already run; a new run needs a "
				"new unit directory",
				m->dir);
	return 0;
}

static int load_config(const char *dir, struct run_config *c, struct cerr *e)
{
	cleanup_free char *p = xasprintf("%s/run.json", dir);
	struct buf b;
	int rc;

	buf_init(&b, RUNCONFIG_MAX);
	rc = fs_read_file(p, &b, e);
	if (rc == 0)
		rc = runconfig_parse(b.data, b.len, c, e);
	buf_free(&b);
	if (rc < 0)
		return cerr_prefix(e, "run.json");
	return 0;
}

/* The OOM killer should pick a unit's process, never its monitor (the
 * container init resets this for itself). */
static void protect_from_oom(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, "-999", 4) < 0)
		log_debug("oom_score_adj: %s", strerror(errno));
	close(fd);
}

static int setup_signals(struct monitor *m, struct cerr *e)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGQUIT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return cerr_sys(e, "sigprocmask");
	signal(SIGPIPE, SIG_IGN);
	m->sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	m->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	if (m->sigfd < 0 || m->timerfd < 0)
		return cerr_sys(e, "signalfd");
	return 0;
}

static int setup_cgroup(struct monitor *m, struct cerr *e)
{
	struct cg_layout l;
	struct cg_limits lim = {m->cfg.memory_limit, m->cfg.cpu_quota,
				m->cfg.pids_limit,   m->cfg.pod_memory_limit,
				m->cfg.devices,	     m->cfg.n_devices};
	int rc;

	if (cg_detect_env(&l, e) < 0)
		return cerr_prefix(e, "cgroup");
	rc = cg_create(&l, m->cfg.cgroup_path, &lim, &m->cg, e);
	cg_layout_free(&l);
	if (rc < 0)
		return cerr_prefix(e, "cgroup %s", m->cfg.cgroup_path);
	return 0;
}

static int setup_log(struct monitor *m, struct cerr *e)
{
	cleanup_free char *dir = xstrdup(m->cfg.log_path);
	char *slash = strrchr(dir, '/');

	if (slash && slash != dir) {
		*slash = '\0';
		if (fs_mkdir_p(dir, 0755, e) < 0)
			return cerr_prefix(e, "log directory");
	}
	if (crilog_open(&m->log, m->cfg.log_path, m->cfg.log_max_bytes, e) < 0)
		return -1;
	m->log.max_files = (int)m->cfg.log_max_files;
	/* A log shipper's view; the unit runs without it if it fails. */
	if (m->cfg.log_link) {
		struct cerr le = {0};
		if (crilog_link(m->cfg.log_path, m->cfg.log_link, &le) < 0)
			log_warn("%s", le.msg);
	}
	return 0;
}

static int open_ns(const char *path, int *fd, struct cerr *e)
{
	*fd = -1;
	if (!path)
		return 0;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return cerr_sys(e, "open namespace %s", path);
	return 0;
}

/* Read the child's verdict: EOF with nothing written means its exec
 * succeeded (the socket is close-on-exec). */
static int child_verdict(int fd, char *msg, size_t sz)
{
	size_t n = 0;

	for (;;) {
		ssize_t r = read(fd, msg + n, sz - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || n + (size_t)r >= sz - 1) {
			n += r > 0 ? (size_t)r : 0;
			break;
		}
		n += (size_t)r;
	}
	msg[n] = '\0';
	return n ? -1 : 0;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0) {
			close(fds[i]);
			fds[i] = -1;
		}
}

/* The workload's stdin. With `stdin: true` a FIFO in the unit directory
 * that an interactive attach writes into (runtime_stdin_path), opened
 * read-write, so the workload holds a writer itself and never reads an
 * end: a shell waits for commands instead of exiting at once. Without it
 * /dev/null, as under the kubelet: a shell reads EOF and exits 0. */
static int open_stdin(const char *dir, bool fifo, struct cerr *e)
{
	cleanup_free char *p = xasprintf("%s/stdin", dir);
	int fd;

	if (!fifo) {
		fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		return fd < 0 ? cerr_sys(e, "open /dev/null") : fd;
	}

	if (mkfifo(p, 0600) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkfifo %s", p);
	fd = open(p, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return cerr_sys(e, "open %s", p);
	return fd;
}

/* A terminal for a tty unit: out[0] its master (the log reads it),
 * out[1] its slave (the unit's stdin, stdout and stderr). */
static int open_tty(int out[2], struct cerr *e)
{
	char name[64];
	struct winsize ws = {.ws_row = 24, .ws_col = 80};

	out[0] = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (out[0] < 0 || grantpt(out[0]) < 0 || unlockpt(out[0]) < 0 ||
	    ptsname_r(out[0], name, sizeof(name)) != 0)
		return cerr_sys(e, "open a terminal");
	out[1] = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (out[1] < 0)
		return cerr_sys(e, "open %s", name);
	ioctl(out[0], TIOCSWINSZ, &ws); /* a size until an attach sets one */
	return 0;
}

static int open_spawn_fds(const char *dir, const struct run_config *c,
			  struct spawn_fds *f, struct cerr *e)
{
	memset(f, 0xff, sizeof(*f)); /* every fd -1 */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, f->sock) < 0 ||
	    (c->tty ? open_tty(f->out, e) < 0 : pipe2(f->out, O_CLOEXEC) < 0) ||
	    pipe2(f->err, O_CLOEXEC) < 0)
		return e->code ? -1 : cerr_sys(e, "pipe");
	/* A tty unit's attach input comes through the FIFO too. */
	f->devnull = open_stdin(dir, c->open_stdin || c->tty, e);
	if (f->devnull < 0)
		return -1;
	if (open_ns(c->netns_path, &f->netns, e) < 0 ||
	    open_ns(c->ipc_ns_path, &f->ipcns, e) < 0 ||
	    open_ns(c->pid_ns_path, &f->pidns, e) < 0)
		return -1;
	/* Joining a PID namespace applies to our children: the init will
	 * be born in it. */
	if (f->pidns >= 0 &&
	    (open_ns("/proc/self/ns/pid", &f->own_pidns, e) < 0 ||
	     setns(f->pidns, CLONE_NEWPID) < 0))
		return cerr_sys(e, "join PID namespace %s", c->pid_ns_path);
	return 0;
}

static pid_t clone_init(const struct run_config *c, const char *bundle,
			struct spawn_fds *f, struct cerr *e)
{
	unsigned long flags = CLONE_NEWNS | CLONE_NEWUTS | SIGCHLD;
	pid_t pid;

	flags |= f->pidns < 0 ? CLONE_NEWPID : 0;
	flags |= f->ipcns < 0 ? CLONE_NEWIPC : 0;
	/* The raw syscall has fork() semantics (no new stack), which is
	 * safe here: the monitor has one thread. */
	pid = (pid_t)syscall(SYS_clone, flags, NULL, NULL, NULL, NULL);
	if (pid < 0)
		return cerr_sys(e, "clone");
	if (pid == 0) {
		struct ctr_child_args a = {
		    .cfg = c,
		    .bundle = bundle,
		    .sync_fd = f->sock[1],
		    .peer_fd = f->sock[0],
		    .stdin_fd = c->tty ? f->out[1] : f->devnull,
		    .stdout_fd = f->out[1],
		    .stderr_fd = c->tty ? f->out[1] : f->err[1],
		    .netns_fd = f->netns,
		    .ipcns_fd = f->ipcns,
		};
		ctr_child(&a);
	}
	return pid;
}

/* Clone the init, which sets up its mount namespace, mounts and
 * pivot_root at once and then waits for "go" (monitor_run makes the unit's
 * cgroups meanwhile). */
static int spawn_init(struct monitor *m, struct cerr *e)
{
	struct spawn_fds *f = &m->spawn;

	if (open_spawn_fds(m->dir, &m->cfg, f, e) < 0)
		return -1;
	m->init = clone_init(&m->cfg, m->dir, f, e);
	/* Back to our own PID namespace for children: a process whose
	 * children would be born elsewhere cannot even create a thread. */
	if (f->own_pidns >= 0 && setns(f->own_pidns, CLONE_NEWPID) < 0)
		log_warn("return to our PID namespace: %s", strerror(errno));
	if (m->init < 0)
		return -1;
	close_fds((int[]){f->sock[1], f->out[1], f->err[1]}, 3);
	f->sock[1] = f->out[1] = f->err[1] = -1;
	m->init_start = proc_start_time(m->init);
	return 0;
}

/* Put the init into the unit's cgroups, then let it go on to its
 * credentials and exec. msg gets the container's own error when that
 * fails. */
static int start_init(struct monitor *m, char *msg, size_t msgsz,
		      struct cerr *e)
{
	struct spawn_fds *f = &m->spawn;
	int rc = -1;

	msg[0] = '\0';
	if (cg_enter(&m->cg, m->init, e) < 0) {
		kill(m->init, SIGKILL);
		goto out;
	}
	/* "g" comes with the init's pid as the host sees it (the hooks' OCI
	 * state). An init that already failed has written why and gone
	 * (EPIPE): read that below. */
	char go[1 + sizeof(int32_t)] = "g";
	int32_t pid32 = (int32_t)m->init;

	memcpy(go + 1, &pid32, sizeof(pid32));
	if (write(f->sock[0], go, sizeof(go)) != (ssize_t)sizeof(go) &&
	    errno != EPIPE) {
		cerr_sys(e, "start the container init");
		goto out;
	}
	if (child_verdict(f->sock[0], msg, msgsz) < 0) {
		cerr_set(e, EIO, "%s", msg);
		goto out;
	}
	m->started_ns = wall_ns();
	m->out_fd = steal_fd(&f->out[0]);
	m->err_fd = steal_fd(&f->err[0]);
	if (m->cfg.tty) {
		m->tty_master = fcntl(m->out_fd, F_DUPFD_CLOEXEC, 3);
		m->tty_in = steal_fd(&f->devnull);
	}
	rc = 0;
out:
	close_fds((int *)f, sizeof(*f) / sizeof(int));
	return rc;
}

static int write_state(struct monitor *m, struct cerr *e)
{
	struct unit_runtime_state st = {
	    .monitor_pid = getpid(),
	    .monitor_start = proc_start_time(getpid()),
	    .container_pid = m->init,
	    .container_start = m->init_start,
	    .started_at_ns = m->started_ns,
	};
	cleanup_free char *text = NULL;
	char *dirs[CG_MAX_DIRS + 1] = {0};

	for (size_t i = 0; i < m->cg.n; i++)
		dirs[i] = m->cg.dirs[i];
	st.cgroups = dirs;
	text = runstate_to_json(&st);
	return write_atomic(m->dir, "state.json", text, e);
}

/* Space for exit.json, taken before the workload starts (written, not
 * fallocated, so that the filesystem has charged its blocks; overwriting
 * them in place needs no new ones, written back or not, so no fsync): a
 * unit that ends while the state filesystem is full still gets its exit
 * record, never "cell-monitor died". */
static int reserve_exit(struct monitor *m, struct cerr *e)
{
	cleanup_free char *p = xasprintf("%s/%s", m->dir, EXIT_SLOT);
	static const char zero[4096];

	m->exit_slot =
	    open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (m->exit_slot < 0)
		return cerr_sys(e, "create %s", p);
	for (size_t n = 0; n < EXIT_SLOT_BYTES; n += sizeof(zero))
		if (fs_write_all(m->exit_slot, zero, sizeof(zero)) < 0)
			return cerr_sys(e, "reserve %s", p);
	return 0;
}

/* exit.json through the reserved slot: overwritten in place, cut to size
 * (which only frees) and renamed. Without a slot (or for a record too big
 * for it), the usual write. Safe to call again after a failure. */
static int put_exit(struct monitor *m, const char *text, struct cerr *e)
{
	cleanup_free char *slot = xasprintf("%s/%s", m->dir, EXIT_SLOT);
	cleanup_free char *dst = xasprintf("%s/exit.json", m->dir);
	size_t n = strlen(text);

	if (m->exit_slot < 0 || n > EXIT_SLOT_BYTES)
		return write_atomic(m->dir, "exit.json", text, e);
	if (fs_pwrite_all(m->exit_slot, text, n, 0) < 0 ||
	    ftruncate(m->exit_slot, (off_t)n) < 0)
		return cerr_sys(e, "write %s", slot);
	if (rename(slot, dst) < 0)
		return cerr_sys(e, "rename %s", slot);
	close(m->exit_slot);
	m->exit_slot = -1;
	return 0;
}

/* With persist, a failed write is tried again with back-off (1 s doubling
 * to 30 s) until it succeeds: the monitor outlives its unit rather than
 * leave the agent to guess the exit (it would say 137 "cell-monitor
 * died"). The agent keeps seeing the unit running until then. */
static void write_exit(struct monitor *m, struct unit_runtime_state *st,
		       bool persist)
{
	cleanup_free char *text = NULL;
	struct cerr e = {0};
	unsigned wait_s = 1;

	st->started_at_ns = m->started_ns;
	st->finished_at_ns = m->finished_ns ? m->finished_ns : wall_ns();
	text = runexit_to_json(st);
	while (put_exit(m, text, &e) < 0) {
		if (!persist) {
			log_error("%s", e.msg);
			return;
		}
		log_error("%s; trying again in %u s", e.msg, wait_s);
		sleep(wait_s);
		wait_s = wait_s >= 16 ? 30 : wait_s * 2;
		e = (struct cerr){0};
	}
}

/* ---- the loop ---- */

static void kill_unit(struct monitor *m)
{
	struct cerr e = {0};

	if (!m->init_done)
		kill(m->init, SIGKILL);
	/* A shared PID namespace does not die with our init: the cgroup
	 * finds the rest. */
	if (cg_kill_all(&m->cg, &e) < 0)
		log_warn("%s", e.msg);
}

static void begin_stop(struct monitor *m, int grace)
{
	struct itimerspec t = {.it_value = {grace, 0}};
	/* The image's StopSignal (run.json), as Docker and containerd use it.
	 */
	int sig = m->cfg.stop_signal > 0 ? (int)m->cfg.stop_signal : SIGTERM;

	if (m->init_done)
		return;
	if (m->stopping || grace <= 0) {
		log_info("stop: SIGKILL");
		kill_unit(m);
		return;
	}
	log_info("stop: signal %d, SIGKILL in %d s", sig, grace);
	m->stopping = true;
	kill(m->init, sig);
	timerfd_settime(m->timerfd, 0, &t, NULL);
}

static void reap(struct monitor *m)
{
	int status;
	pid_t pid;

	/* As the subreaper we may inherit orphans: reap them all. */
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (pid != m->init || m->init_done)
			continue;
		m->init_done = true;
		m->wstatus = status;
		m->finished_ns = wall_ns();
		m->drain_until = mono_ms() + DRAIN_MS;
		kill_unit(m);
	}
}

static void on_signals(struct monitor *m)
{
	struct signalfd_siginfo si;

	while (read(m->sigfd, &si, sizeof(si)) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap(m);
			break;
		case SIGTERM:
		case SIGINT:
			begin_stop(m, si.ssi_code == SI_QUEUE
					  ? si.ssi_int
					  : (int)m->cfg.grace_seconds);
			break;
		default: /* SIGHUP, SIGQUIT: the monitor stays */
			break;
		}
	}
}

static void on_output(struct monitor *m, int *fd, enum crilog_stream s)
{
	char b[65536];
	ssize_t n = read(*fd, b, sizeof(b));
	struct cerr e = {0};

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		close(*fd);
		*fd = -1;
		return;
	}
	if (crilog_write(&m->log, s, b, (size_t)n, &e) < 0)
		log_warn("%s", e.msg);
}

/* An attach's input, from the stdin FIFO into the terminal. */
static void on_tty_input(struct monitor *m)
{
	char b[4096];
	ssize_t n = read(m->tty_in, b, sizeof(b));

	for (ssize_t off = 0; n > 0 && off < n;) {
		ssize_t w = write(m->tty_master, b + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break; /* the unit is gone: its input with it */
		off += w;
	}
}

static void loop(struct monitor *m)
{
	for (;;) {
		struct pollfd p[] = {
		    {m->sigfd, POLLIN, 0},
		    {m->timerfd, POLLIN, 0},
		    {m->out_fd, POLLIN, 0},
		    {m->err_fd, POLLIN, 0},
		    {m->init_done ? -1 : m->tty_in, POLLIN, 0}};
		int timeout = -1;

		if (m->init_done) {
			if (m->out_fd < 0 && m->err_fd < 0)
				return;
			timeout = (int)(m->drain_until - mono_ms());
			if (timeout <= 0) {
				log_warn("unit output still open after exit");
				return;
			}
		}
		if (poll(p, ARRAY_SIZE(p), timeout) < 0 && errno != EINTR)
			return;
		if (p[0].revents)
			on_signals(m);
		if (p[1].revents) {
			uint64_t x;
			if (read(m->timerfd, &x, sizeof(x)) > 0)
				kill_unit(m);
		}
		/* Output before exit: EOF comes after the data. */
		if (p[2].revents)
			on_output(m, &m->out_fd, CRILOG_STDOUT);
		if (p[3].revents)
			on_output(m, &m->err_fd, CRILOG_STDERR);
		if (p[4].revents)
			on_tty_input(m);
	}
}

static void finish(struct monitor *m)
{
	struct unit_runtime_state st = {0};
	struct cerr e = {0};

	monitor_decide_exit(m->wstatus, cg_oom_kills(&m->cg), &st);
	write_exit(m, &st, true);
	log_info("unit %s: %s, exit code %d", m->cfg.id, st.reason,
		 st.exit_code);
	runtime_state_free(&st);
	if (cg_destroy(&m->cg, &e) < 0)
		log_warn("%s", e.msg);
	if (m->log.dropped)
		log_warn("%llu bytes of output lost to log write errors",
			 (unsigned long long)m->log.dropped);
}

/* A failure before the workload ran: exit.json says StartError, the agent
 * hears the message, nothing is left behind. */
static int start_failed(struct monitor *m, const struct cerr *err,
			bool dir_claimed)
{
	struct unit_runtime_state st = {.exit_code = 128};

	log_error("%s", err->msg);
	if (m->init > 0) {
		kill(m->init, SIGKILL);
		waitpid(m->init, NULL, 0);
	}
	if (m->cg.n) {
		cg_kill_all(&m->cg, NULL);
		cg_destroy(&m->cg, NULL);
	}
	if (dir_claimed) {
		st.reason = xstrdup("StartError");
		st.message = xstrdup(err->msg);
		/* Once: the agent hears the error on the sync pipe. */
		write_exit(m, &st, false);
		runtime_state_free(&st);
	}
	report(&m->sync_fd, "error %d %s", err->code, err->msg);
	return 1;
}

static void monitor_free(struct monitor *m)
{
	close_fds((int *)&m->spawn, sizeof(m->spawn) / sizeof(int));
	crilog_close(&m->log);
	if (m->exit_slot >= 0)
		close(m->exit_slot);
	cg_free(&m->cg);
	runconfig_free(&m->cfg);
	free(m->dir);
}

int monitor_run(const char *unit_dir, int sync_fd)
{
	struct monitor m = {.sync_fd = sync_fd,
			    .sigfd = -1,
			    .timerfd = -1,
			    .out_fd = -1,
			    .err_fd = -1,
			    .tty_in = -1,
			    .tty_master = -1,
			    .exit_slot = -1,
			    .log = {.fd = -1}};
	struct cerr e = {0};
	char msg[REPORT_MAX];
	int rc = 0;

	memset(&m.spawn, 0xff, sizeof(m.spawn)); /* every fd -1 */
	m.dir = realpath(unit_dir, NULL);
	if (!m.dir) {
		cerr_sys(&e, "unit directory %s", unit_dir);
		return start_failed(&m, &e, false);
	}
	if (detach(&e) < 0 || claim_dir(&m, &e) < 0) {
		rc = start_failed(&m, &e, false);
		goto out;
	}
	protect_from_oom();
	/* The init is cloned before the unit's cgroups are made: its mounts
	 * need none, and the first cgroup change of a start (here the first
	 * mkdir) may wait for the kernel's attach lock to warm up, an RCU
	 * grace period of milliseconds (agent/base/cgprime.c). It waits for
	 * "go", after its mounts, until it is in them. */
	if (load_config(m.dir, &m.cfg, &e) < 0 || reserve_exit(&m, &e) < 0 ||
	    setup_signals(&m, &e) < 0 || setup_log(&m, &e) < 0 ||
	    hooks_write_bundle(m.dir, &m.cfg, &e) < 0 ||
	    spawn_init(&m, &e) < 0 || setup_cgroup(&m, &e) < 0 ||
	    start_init(&m, msg, sizeof(msg), &e) < 0 ||
	    write_state(&m, &e) < 0) {
		rc = start_failed(&m, &e, true);
		goto out;
	}
	report(&m.sync_fd, "ok %d", (int)getpid());
	log_info("unit %s: started, init pid %d", m.cfg.id, (int)m.init);
	loop(&m);
	finish(&m);
out:
	monitor_free(&m);
	return rc;
}

/* ============================== exec mode ============================== */

/* The unit's environment with extra entries added or replacing. */
static char **merge_env(char *const *base, char *const *extra)
{
	size_t nb = strv_len(base), ne = strv_len(extra), n = 0;
	char **v = xcalloc(nb + ne + 1, sizeof(char *));

	for (size_t i = 0; i < nb; i++) {
		size_t kl = strcspn(base[i], "=");
		bool replaced = false;
		for (size_t k = 0; k < ne && !replaced; k++)
			replaced = !strncmp(extra[k], base[i], kl) &&
				   extra[k][kl] == '=';
		if (!replaced)
			v[n++] = xstrdup(base[i]);
	}
	for (size_t k = 0; k < ne; k++)
		v[n++] = xstrdup(extra[k]);
	return v;
}

static int block_forwarded(sigset_t *set)
{
	static const int sigs[] = {SIGTERM, SIGINT,  SIGHUP,   SIGQUIT,
				   SIGUSR1, SIGUSR2, SIGWINCH, SIGCHLD};

	sigemptyset(set);
	for (size_t i = 0; i < ARRAY_SIZE(sigs); i++)
		sigaddset(set, sigs[i]);
	sigaddset(set, EXEC_END_SIGNAL);
	signal(SIGPIPE, SIG_IGN);
	if (sigprocmask(SIG_BLOCK, set, NULL) < 0)
		return -1;
	return signalfd(-1, set, SFD_CLOEXEC);
}

/* Pass signals on to the command until it exits; its status is ours.
 * EXEC_END_SIGNAL (the agent: the stream is gone; or our parent died)
 * kills the command's whole cgroup instead. */
static int forward_until_exit(int sigfd, pid_t child, const struct cgroup *cg)
{
	struct signalfd_siginfo si;
	int status;

	while (read(sigfd, &si, sizeof(si)) == sizeof(si) || errno == EINTR) {
		if ((int)si.ssi_signo == EXEC_END_SIGNAL) {
			struct cerr e = {0};
			if (cg_kill_all(cg, &e) < 0)
				log_warn("exec: %s", e.msg);
			kill(child, SIGKILL);
			continue;
		}
		if (si.ssi_signo != SIGCHLD) {
			kill(child, (int)si.ssi_signo);
			continue;
		}
		pid_t r = waitpid(child, &status, WNOHANG);
		if (r == child)
			return WIFSIGNALED(status) ? 128 + WTERMSIG(status)
						   : WEXITSTATUS(status);
	}
	return 255;
}

/* The command's own cgroup, exec-<our pid> below the unit's in every
 * hierarchy: limits and usage are the unit's (cgroups are hierarchical),
 * and the tree the command starts can be killed whole, wherever it puts
 * itself (its own session, a double fork) and without touching the unit. */
static int make_exec_cgroup(char *const *unit_dirs, struct cgroup *cg,
			    struct cerr *e)
{
	size_t n = strv_len(unit_dirs);
	char **dirs = xcalloc(n + 1, sizeof(char *));
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		dirs[i] = xasprintf("%s/exec-%d", unit_dirs[i], (int)getpid());
		if (rc == 0 && mkdir(dirs[i], 0755) < 0 && errno != EEXIST)
			rc = cerr_sys(e, "exec cgroup %s", dirs[i]);
	}
	cg_from_dirs(cg, dirs);
	strv_free(dirs);
	if (rc < 0)
		cg_destroy(cg, NULL);
	return rc;
}

/* Join the unit: its cgroups first (so that we are counted with the unit),
 * then its namespaces but the mount namespace, which only the command
 * joins: we stay where the cgroup files are. */
static int join_unit(const char *dir, struct run_config *c,
		     struct cgroup *exec_cg, int *mntns_fd, struct cerr *e)
{
	struct unit_runtime_state st = {0};
	struct cgroup cg;
	int rc = -1;

	if (load_config(dir, c, e) < 0 || runtime_read_state(dir, &st, e) < 0)
		goto out;
	if (!st.started || st.exited) {
		cerr_set(e, ESRCH, "unit is not running");
		goto out;
	}
	cg_from_dirs(&cg, st.cgroups);
	rc = cg_enter(&cg, getpid(), e);
	cg_free(&cg);
	if (rc == 0)
		rc = make_exec_cgroup(st.cgroups, exec_cg, e);
	if (rc == 0)
		rc = ctr_join_namespaces(st.container_pid, st.container_start,
					 mntns_fd, e);
out:
	runtime_state_free(&st);
	return rc;
}

/* The command is over (or was never started): what it left goes too. */
static void end_exec_cgroup(struct cgroup *cg)
{
	struct cerr e = {0};

	if (cg_kill_all(cg, &e) < 0 || cg_destroy(cg, &e) < 0)
		log_warn("exec: %s", e.msg);
	cg_free(cg);
}

int monitor_exec(const char *unit_dir, int sync_fd, char *const *argv,
		 char *const *env, const char *cwd)
{
	struct run_config c = {0};
	struct cgroup cg = {0};
	struct cerr e = {0};
	cleanup_close int sigfd = -1, mntns = -1;
	char **full_env = NULL, msg[REPORT_MAX];
	int sock[2] = {-1, -1}, rc = 127;
	sigset_t set;
	pid_t pid;

	cg_free(&cg);
	/* Blocked first: an end asked for during setup is not lost. The
	 * agent's thread that started us going away ends the exec too. */
	sigfd = block_forwarded(&set);
	if (sigfd < 0 || prctl(PR_SET_PDEATHSIG, EXEC_END_SIGNAL) < 0) {
		cerr_sys(&e, "exec setup");
		goto fail;
	}
	if (join_unit(unit_dir, &c, &cg, &mntns, &e) < 0)
		goto fail;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) < 0) {
		cerr_sys(&e, "exec setup");
		goto fail;
	}
	full_env = merge_env(c.env, env);
	/* Fork: a PID namespace applies to children only. */
	pid = fork();
	if (pid < 0) {
		cerr_sys(&e, "fork");
		goto fail;
	}
	if (pid == 0) {
		struct ctr_exec_args a = {
		    .cfg = &c,
		    .argv = argv,
		    .env = full_env,
		    .cwd = cwd ? cwd : c.cwd,
		    .exec_cg = &cg,
		    .mntns_fd = mntns,
		    .sync_fd = sock[1],
		    .peer_fd = sock[0],
		};
		ctr_exec_child(&a);
	}
	close(sock[1]);
	sock[1] = -1;
	if (child_verdict(sock[0], msg, sizeof(msg)) < 0) {
		waitpid(pid, NULL, 0);
		cerr_set(&e, EIO, "%s", msg);
		goto fail;
	}
	report(&sync_fd, "ok %d", (int)getpid());
	rc = forward_until_exit(sigfd, pid, &cg);
	goto out;
fail:
	log_error("%s", e.msg);
	report(&sync_fd, "error %d %s", e.code, e.msg);
out:
	end_exec_cgroup(&cg);
	close_fds(sock, 2);
	strv_free(full_env);
	runconfig_free(&c);
	return rc;
}
