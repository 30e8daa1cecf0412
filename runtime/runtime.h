// SPDX-License-Identifier: Apache-2.0
/* The container runtime: what the agent's supervisor uses to start, watch,
 * stop and exec into units, and what cell-monitor (the single-threaded
 * helper that sets a unit up and stays as its monitor) is built from.
 *
 * Process model (docs/agent-runtime.md has the long version):
 *
 *   cell-agent ──posix_spawn──▶ cell-monitor run ──fork──▶ monitor
 *   (threaded)                  (exits at once)            │
 * clone(NEWNS|NEWPID| ▼  NEWUTS|NEWIPC) container init
 *
 * The monitor is never the agent's child (it is forked away and lives in its
 * own session), so an agent crash or restart leaves it and its container
 * alone; everything the agent needs later is in the unit directory:
 *
 *   run.json     written by the agent (atomically) before runtime_start
 *   state.json   written by the monitor once the workload has been exec'd
 *   exit.json    written by the monitor when the unit is over (or failed to
 *                start); the monitor exits right after. It is written over
 *                .exit.slot, space the monitor reserves before the unit
 *                starts, so a full filesystem cannot lose it; a write that
 *                still fails is retried until it succeeds
 *   monitor.log  the monitor's own diagnostics
 *   monitor.lock flock()ed by the live monitor: one monitor per unit dir
 *
 * A unit directory holds exactly one run: the monitor refuses a directory
 * that already has state.json or exit.json, which is what makes "nothing is
 * started twice" hold across agent restarts. */
#ifndef CELL_RUNTIME_H
#define CELL_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"

/* ======================= run.json: the unit's recipe =======================
 */

#define RUNCONFIG_MAX (1u << 20) /* run.json cap */
#define RUN_MAX_GROUPS 256
#define RUN_MAX_MOUNTS 256
#define RUN_MAX_ARGS 65536 /* argv and env entries each */

/* Mount flags in run.json's "options" ("ro", "nosuid", "nodev", "noexec",
 * "rbind") map onto these MS_* bits. */
struct run_mount {
	char *source; /* host path for "bind"; a name for others */
	/* "bind" only, or NULL: a clean relative path that the monitor
	 * resolves beneath source by descriptor (PATH_BENEATH: no link may
	 * leave it) and mounts by that descriptor. A subPath lives in a
	 * volume a unit can write: only the monitor's own lookup, at the
	 * mount, can be trusted (CVE-2017-1002101, CVE-2021-25741). */
	char *sub_path;
	char *target;	     /* absolute path inside the container */
	char *type;	     /* "bind", "tmpfs", "proc", "mqueue", … */
	unsigned long flags; /* MS_RDONLY MS_NOSUID MS_NODEV MS_NOEXEC MS_REC */
	char *data;	     /* fs options ("size=64m,mode=1777") or NULL */
};

/* A device node given to the unit (CDI's deviceNodes, as the agent resolved
 * them): made in the container and allowed in its device cgroup with access. */
#define RUN_MAX_DEVICES 256
struct run_device {
	char *path;	 /* absolute, inside the container */
	char *host_path; /* bound instead where mknod is refused */
	char type;	 /* 'c' or 'b' */
	uint32_t major, minor;
	uint32_t mode; /* permission bits (0666) */
	uint32_t uid, gid;
	char access[4]; /* the cgroup's "rwm" subset; "" none */
};

/* OCI hooks (CDI's hooks): createContainer runs in the container's mount
 * namespace once its mounts are made, before pivot_root (the path is the
 * host's); startContainer after pivot_root, before the workload (the path
 * is the container's). Both read the OCI state on stdin; a failure or a
 * timeout fails the start with the hook's stderr. */
#define RUN_MAX_HOOKS 64
#define RUN_HOOK_TIMEOUT_S 30 /* when the spec gives none */
#define RUN_HOOK_TIMEOUT_MAX 600
enum run_hook_kind { HOOK_CREATE_CONTAINER, HOOK_START_CONTAINER };
struct run_hook {
	enum run_hook_kind kind;
	char *path;
	char **args, **env; /* args[0] is argv[0]; NULL: {path} and none */
	int timeout_s;
};

struct run_config {
	char *id;     /* for messages and the cgroup leaf only */
	char *rootfs; /* absolute path of the unpacked image */
	bool readonly_rootfs;
	char **argv;	   /* argv[0] is searched in the container's PATH */
	char **env;	   /* "NAME=value", passed as is */
	char *cwd;	   /* absolute, inside the container; "/" by default */
	uint32_t uid, gid; /* numeric, already resolved by the agent */
	uint32_t *groups;  /* supplementary groups */
	size_t n_groups;
	/* The final capability set ("CAP_CHOWN", …): it becomes the bounding,
	 * permitted and effective sets. A non-root uid loses them at exec
	 * unless they are also listed as ambient. */
	char **caps;
	char **ambient_caps; /* subset of caps */
	bool no_new_privs;
	/* A seccomp BPF program (the agent's sc_compile, run.json "seccomp"
	 * in base64), installed right before execve; NULL: unconfined. */
	void *seccomp_bpf;
	size_t seccomp_len;
	bool proc_unmasked; /* no masked or read-only /proc, /sys paths */
	char *hostname;	    /* NULL: the host's name, copied into the new
			       UTS namespace */
	char *netns_path;   /* NULL: stay in the monitor's net namespace */
	char *pid_ns_path;  /* NULL: a new PID namespace */
	char *ipc_ns_path;  /* NULL: a new IPC namespace */
	/* Namespaced sysctls written in the container's namespaces before
	 * its root is set up (sysctl.h): net.* only with netns_path. */
	char **sysctl_names, **sysctl_values;
	struct run_mount *mounts;
	size_t n_mounts;
	char *cgroup_path;    /* relative: "cell/<pod>/<unit>" */
	int64_t memory_limit; /* bytes, 0 = none */
	/* bytes, 0 = none: a cap on the parent cgroup, shared by the pod's
	 * units (the instance's memory minus the agent's reserve). */
	int64_t pod_memory_limit;
	int64_t cpu_quota;     /* millicores, 0 = none */
	int64_t pids_limit;    /* 0 = none */
	char *log_path;	       /* CRI log file (absolute) */
	int64_t log_max_bytes; /* rotate to log_path.1 beyond this; 0 never */
	int64_t log_max_files; /* files kept, the current one included (2) */
	char *log_link; /* NULL, or a symlink to log_path made at start */
	int64_t grace_seconds; /* SIGTERM → SIGKILL delay on stop */
	int64_t stop_signal;   /* the image's StopSignal; SIGTERM by default */
	bool tty; /* stdin, stdout, stderr on a terminal; attach input via the
		   * stdin FIFO, output into the log as stdout */
	struct run_device *devices; /* besides the default /dev */
	size_t n_devices;
	struct run_hook *hooks; /* in order, per kind */
	size_t n_hooks;
	/* stdin: a FIFO in the run directory; else /dev/null */
	bool open_stdin;
};

/* Parse run.json. Pure: no system calls, so it is fuzzed. Every field is
 * checked (absolute paths without "..", known capability names, sane
 * numbers) so that the monitor can trust the struct. */
int runconfig_parse(const char *buf, size_t len, struct run_config *out,
		    struct cerr *e);
/* The canonical JSON text of c (caller frees). */
char *runconfig_to_json(const struct run_config *c);
/* run.json's "devices" and "hooks" (rundevices.c), for the two above. */
struct json_t;
int runconfig_parse_devices(const struct json_t *root, struct run_config *c,
			    struct cerr *e);
void runconfig_devices_to_json(const struct run_config *c, struct json_t *o);
void runconfig_devices_free(struct run_config *c);
void runconfig_free(struct run_config *c);

/* ================= state.json and exit.json: what happened =================
 */

struct unit_runtime_state {
	bool started; /* state.json was written */
	pid_t monitor_pid;
	uint64_t monitor_start; /* /proc/<pid>/stat starttime: detects reuse */
	pid_t container_pid;	/* the container init, in the host's PID ns */
	uint64_t container_start;
	int64_t started_at_ns; /* wall clock of the workload's exec */
	char **cgroups;	       /* the unit's cgroup directories */
	bool exited;	       /* exit.json was written (or the monitor died) */
	int exit_code;	       /* 128+N for a signal N */
	int signal;	       /* 0 unless killed by a signal */
	bool oom_killed;
	char *reason;  /* Completed Error OOMKilled StartError */
	char *message; /* StartError's text, or NULL */
	int64_t finished_at_ns;
	bool monitor_lost; /* no exit.json and the monitor is gone */
};

int runstate_parse(const char *buf, size_t len, struct unit_runtime_state *st,
		   struct cerr *e);
int runexit_parse(const char *buf, size_t len, struct unit_runtime_state *st,
		  struct cerr *e);
char *runstate_to_json(const struct unit_runtime_state *st);
char *runexit_to_json(const struct unit_runtime_state *st);
/* Everything above in one object, for `cell-monitor state`. */
char *runtime_status_json(const struct unit_runtime_state *st, bool alive);
void runtime_state_free(struct unit_runtime_state *st);

/* ===================== the agent's side (client API) ===================== */

/* Start the unit whose run.json is in unit_dir: spawn `monitor_bin run` and
 * wait until it reports. Returns the monitor's pid once the workload has
 * been exec'd. A setup failure returns -1 with the container's own message
 * ("exec /bin/nope: No such file or directory", "mount /proc: …"); the
 * monitor has then written exit.json (reason StartError) and is gone. Safe
 * to call from a threaded process: nothing runs between fork and exec. */
pid_t runtime_start(const char *monitor_bin, const char *unit_dir,
		    struct cerr *e);
/* What the monitor wrote. ENOENT when neither state.json nor exit.json is
 * there yet, EAGAIN while a monitor is still setting the unit up (an agent
 * that restarted in the middle of runtime_start must wait, not start it
 * again). When the monitor died without writing exit.json the result is
 * exited with monitor_lost set, exit_code 137 and reason "Error". */
int runtime_read_state(const char *unit_dir, struct unit_runtime_state *st,
		       struct cerr *e);
/* True while the monitor described by st is running (pid and start time
 * both match, so a reused pid is not mistaken for it). */
bool runtime_monitor_alive(const struct unit_runtime_state *st);
/* A pidfd for the monitor (readable when it exits), for the agent's event
 * loop; ESRCH when it is gone. */
int runtime_pidfd(const struct unit_runtime_state *st, struct cerr *e);
/* Ask the monitor to stop the unit: SIGTERM to the container init, SIGKILL
 * after grace_seconds (< 0: run.json's grace; 0: SIGKILL at once). Returns
 * without waiting; watch the pidfd or poll runtime_read_state. A unit that
 * has already exited is not an error. */
int runtime_stop(const char *unit_dir, int grace_seconds, struct cerr *e);
/* Remove what a dead monitor left behind (its cgroups), killing anything
 * still in them. Harmless when there is nothing to do. */
int runtime_cleanup(const char *unit_dir, struct cerr *e);

/* `cell-monitor pod-init ROOT` (podinit.c): start the holder of a pod's
 * shared PID and IPC namespaces, its PID 1, chrooted into the empty
 * directory ROOT, in a session of its own; print its pid. SIGTERM ends
 * it (and with it everything left in the namespace). */
int runtime_pod_init(const char *root, struct cerr *e);

struct exec_opts {
	char *const *argv; /* searched in the unit's PATH */
	char *const *env;  /* "NAME=value" added to (or replacing in) the
			      unit's environment; NULL for none */
	const char *cwd;   /* NULL: the unit's working directory */
	bool tty;	   /* not supported yet */
	int stdin_fd, stdout_fd, stderr_fd; /* -1: /dev/null */
};
/* Run a command inside a running unit (its namespaces, cgroups, uid, gid,
 * groups, capabilities and no_new_privs) through `monitor_bin exec`.
 * Returns the pid of that process (a child of the caller) once the command
 * has been exec'd; it exits with the command's status (128+N for a signal).
 * -1 with the reason ("exec nope: executable file not found in $PATH",
 * "unit is not running") otherwise. */
pid_t runtime_exec(const char *monitor_bin, const char *unit_dir,
		   const struct exec_opts *o, struct cerr *e);
/* End an exec early (its stream closed, its probe timed out): the command
 * and everything it started are killed through their cgroup, which is then
 * removed, and `cell-monitor exec` exits 137. Returns at once; wait on the
 * pidfd. SIGKILL to `cell-monitor exec` kills the command only. */
#define EXEC_END_SIGNAL (SIGRTMIN + 1)
int runtime_exec_end(int pidfd);
/* The longest report line cell-monitor writes to the agent: "ok <pid>" or
 * "error <errno> <message>". */
#define REPORT_MAX 2048

/* ======================= CRI log files (crilog.c) ======================= */

/* Records are `<RFC3339Nano UTC> <stdout|stderr> <F|P> <text>\n`: F ends a
 * line, P is a piece of one (a line longer than CRILOG_CHUNK, or the end of
 * a read without a newline yet). */
#define CRILOG_CHUNK 16384

enum crilog_stream { CRILOG_STDOUT = 0, CRILOG_STDERR = 1 };

struct crilog {
	char *path;
	int fd;
	int64_t max_bytes; /* 0: never rotate */
	int max_files;	   /* kept, the current one included; < 2: 2 */
	int64_t size;
	int64_t (*clock)(void); /* wall clock in ns; tests inject one */
	uint64_t dropped;	/* bytes lost to write errors (disk full) */
};

int crilog_open(struct crilog *l, const char *path, int64_t max_bytes,
		struct cerr *e);
/* Point link at the log (a symlink, replaced atomically), as the kubelet
 * does in /var/log/containers; dangling links in its directory that start
 * with the same "<pod>_<namespace>_" (earlier runs whose files are gone)
 * are removed. */
int crilog_link(const char *log_path, const char *link, struct cerr *e);
/* The kubelet's name for a run's log link:
 * <dir>/<pod>_<namespace>_<unit>-<64 hex>.log, from pod_name
 * "<namespace>_<pod>"; the hex is the sha256 of run_key (unique per run),
 * the shape of a container ID, which log shippers' patterns expect. */
char *crilog_link_name(const char *dir, const char *pod_name, const char *unit,
		       const char *run_key);
/* Append what a stream produced. Never buffers: complete lines become F
 * records, a trailing piece becomes a P record at once. Rotates (path.K →
 * path.K+1, path → path.1, keeping max_files files) before a record that
 * would take the file past max_bytes. */
int crilog_write(struct crilog *l, enum crilog_stream s, const char *p,
		 size_t n, struct cerr *e);
void crilog_close(struct crilog *l);
/* "2006-01-02T15:04:05.123456789Z" (always 9 digits); out has 40 bytes. */
void crilog_format_time(int64_t ns, char *out);
/* RFC 3339 with optional fraction and Z or ±hh:mm; -1 when malformed. */
int crilog_parse_time(const char *s, size_t n, int64_t *ns);

/* One record, parsed: text points into the record. */
struct crilog_record {
	int64_t ts_ns;
	enum crilog_stream stream;
	bool partial; /* P */
	const char *text;
	size_t len;
};
/* Pure; -1 when the record is malformed. */
int crilog_parse_record(const char *r, size_t n, struct crilog_record *out);

/* A reassembled line: P records joined with the F that ends them. */
struct crilog_line {
	int64_t ts_ns; /* of the line's first record */
	enum crilog_stream stream;
	bool partial; /* the input ended before the line did (or, without
			 join, this record is a P) */
	const char *text;
	size_t len;
};
typedef int (*crilog_line_fn)(const struct crilog_line *ln, void *ud);

/* The one CRI log reader: bytes in, lines out. Records are split at
 * newlines (an incomplete one waits for more bytes), parsed (malformed
 * ones are skipped) and, with join, P records are joined with the F that
 * ends them, per stream; without join every record is a line of its own
 * (partial for P), which is what a follower passes on as it comes. */
struct crilog_reader {
	bool join, skipping, stop;
	crilog_line_fn fn;
	void *ud;
	struct buf rec;	    /* an incomplete record */
	struct buf line[2]; /* join: a stream's P records so far */
	int64_t ts[2];
};
void crilog_reader_init(struct crilog_reader *r, bool join, crilog_line_fn fn,
			void *ud);
/* -1 once fn has returned < 0 (nothing more is passed on). */
int crilog_reader_feed(struct crilog_reader *r, const char *p, size_t n);
/* The next bytes come from another file (a rotation): an incomplete
 * record is dropped. */
void crilog_reader_next_file(struct crilog_reader *r);
/* The end of the input: joined lines not finished are passed on, partial. */
int crilog_reader_finish(struct crilog_reader *r);
void crilog_reader_free(struct crilog_reader *r);

/* At most this many rotated files path.1 … path.N are looked at. */
#define CRILOG_ROTATED_MAX 64
/* Read path.N … path.1 (when with_rotated) and then the current file into
 * r, then finish r. The current file is cur_fd up to cur_end when cur_fd
 * >= 0 (a rotated file with its inode is skipped: it was renamed after
 * cur_fd was opened), else path. */
int crilog_foreach_fd(const char *path, bool with_rotated, int cur_fd,
		      off_t cur_end, struct crilog_reader *r, struct cerr *e);
/* crilog_foreach_fd with a joining reader over path. fn returning < 0
 * stops the walk. */
int crilog_foreach(const char *path, bool with_rotated, crilog_line_fn fn,
		   void *ud, struct cerr *e);

enum crilog_format {
	CRILOG_PLAIN,	   /* the text, as the workload wrote it */
	CRILOG_TIMESTAMPS, /* "<RFC3339Nano> <text>" (kubectl --timestamps) */
	CRILOG_CRI,	   /* "<RFC3339Nano> <stream> F|P <text>" per line */
};
struct crilog_tail_opts {
	int64_t lines;	  /* only the last N lines; < 0: all */
	int64_t bytes;	  /* only the last N bytes of the result; < 0 all */
	int64_t since_ns; /* only lines at or after; 0: all */
	bool with_rotated;
	enum crilog_format format;
};
/* One line as a client sees it, appended to b. */
void crilog_format_line(struct buf *b, enum crilog_format f,
			const struct crilog_line *ln);
/* The selected lines of path's files (crilog_foreach_fd) appended to out
 * (whose cap bounds the result: EFBIG). */
int crilog_tail_fd(const char *path, int cur_fd, off_t cur_end,
		   const struct crilog_tail_opts *o, struct buf *out,
		   struct cerr *e);
int crilog_tail(const char *path, const struct crilog_tail_opts *o,
		struct buf *out, struct cerr *e);

/* ============ internals shared by cell-monitor and the tests ============ */

/* ---- cgroup.c: one cgroup per unit on v1, v2 and hybrid hosts ---- */

#define CG_MAX_DIRS 8

enum cg_mode { CG_V1 = 1, CG_V2 = 2, CG_HYBRID = 3 };

struct cg_hier {
	bool v2;
	char *base; /* unit cgroups are created below this directory */
	bool memory, cpu, pids; /* controllers it can apply */
	bool io;		/* v2: io is there to enable (best effort) */
	bool devices;		/* the v1 devices hierarchy */
};

struct cg_layout {
	enum cg_mode mode;
	struct cg_hier h[CG_MAX_DIRS];
	size_t n;
};

/* The child of a unit's cgroup that its processes join (the limits are on
 * the unit's cgroup, out of their reach: cgroup.c). */
#define CG_LEAF "ctr"

struct cg_limits {
	int64_t memory; /* bytes, 0 none */
	int64_t cpu_millis;
	int64_t pids;
	int64_t parent_memory; /* on the unit's parent (the pod), 0 none */
	/* Allowed besides the default list, each with its access. */
	const struct run_device *devices;
	size_t n_devices;
};

struct cgroup {
	char *dirs[CG_MAX_DIRS]; /* the unit's directory in each hierarchy */
	bool v2[CG_MAX_DIRS];
	size_t n;
	/* Index of the dir holding each controller, -1: none. */
	int memory, cpu, pids, devices;
};

/* Find the hierarchies under root (CELL_CGROUP_ROOT or /sys/fs/cgroup):
 * v2 when root/cgroup.controllers exists, v1 controller directories
 * otherwise, plus root/unified on hybrid hosts. self_cgroup is the text of
 * /proc/self/cgroup: when given, unit cgroups nest below the caller's own
 * cgroup in each hierarchy instead of below the hierarchy's root. */
int cg_detect(const char *root, const char *self_cgroup, struct cg_layout *l,
	      struct cerr *e);
void cg_layout_free(struct cg_layout *l);
/* cg_detect as cell-monitor sees it: CELL_CGROUP_ROOT (default
 * /sys/fs/cgroup), nested below the caller's own cgroups when
 * CELL_CGROUP_NEST is set (a test seam, and delegation). The agent uses it
 * to find its units' cgroups: the monitors it starts inherit both. */
int cg_detect_env(struct cg_layout *l, struct cerr *e);
/* Create rel (clean, relative) in every hierarchy, enable controllers on
 * the way down (v2), apply the limits and the device allowlist (v1 devices
 * controller; a BPF device program on v2). ENOTSUP when a limit is asked
 * for and no hierarchy has the controller. Rolls back on failure. */
int cg_create(const struct cg_layout *l, const char *rel,
	      const struct cg_limits *lim, struct cgroup *cg, struct cerr *e);
/* Rebuild from the directory list in state.json (for exec and cleanup). */
void cg_from_dirs(struct cgroup *cg, char *const *dirs);
/* Move pid into the unit: its CG_LEAF child where it has one. */
int cg_enter(const struct cgroup *cg, pid_t pid, struct cerr *e);
/* How many OOM kills the kernel counted in the unit's memory cgroup; -1
 * when it keeps no such counter. */
int64_t cg_oom_kills(const struct cgroup *cg);
/* SIGKILL everything in the cgroup (cgroup.kill where the kernel has it,
 * else repeated passes over cgroup.procs) and wait until it is empty. */
int cg_kill_all(const struct cgroup *cg, struct cerr *e);
/* rmdir the unit's directories (parents are shared and left alone). */
int cg_destroy(struct cgroup *cg, struct cerr *e);
void cg_free(struct cgroup *cg);

/* ---- container.c: the container init's setup, and joining a unit ---- */

enum mount_op_kind {
	MOP_MOUNT,   /* mount(source, target, fstype, flags, data) */
	MOP_BIND,    /* bind source (host path) onto target */
	MOP_MKNOD,   /* a character device node (bind from the host when
			mknod is refused) */
	MOP_SYMLINK, /* target → source */
	MOP_MASK,    /* hide target: /dev/null over a file, an empty
			read-only tmpfs over a directory */
	MOP_RDONLY,  /* bind target onto itself read-only */
};

struct mount_op {
	enum mount_op_kind kind;
	const char *source;
	const char *target; /* absolute, inside the container */
	const char *fstype;
	unsigned long flags;
	/* MOP_MOUNT: filesystem options; MOP_BIND: the run_mount's
	 * sub_path, resolved beneath source at the mount, or NULL. */
	const char *data;
	unsigned dev_major, dev_minor; /* MOP_MKNOD */
	bool optional;		       /* skip when the target is missing */
	/* MOP_MKNOD of a unit's own device (type, mode, owner); NULL for
	 * the default /dev. */
	const struct run_device *dev;
};

/* The mount plan for a unit: /proc, a minimal /dev, /sys read-only, the
 * run.json mounts, masked and read-only paths. Pure; borrows from c. */
int ctr_plan_mounts(const struct run_config *c, struct mount_op **ops,
		    size_t *n, struct cerr *e);
/* Carry the plan out beneath rootfd (a bind mount of the rootfs in the
 * caller's own mount namespace). */
int ctr_apply_mounts(int rootfd, const struct mount_op *ops, size_t n,
		     struct cerr *e);
/* Open rel beneath rootfd as if rootfd were "/" (symlinks, absolute ones
 * included, cannot leave it), creating missing directories when mkdirs is
 * set (where the links lead, still inside). common/path.c's PATH_IN_ROOT. */
int ctr_open_in_root(int rootfd, const char *rel, int flags, bool mkdirs,
		     struct cerr *e);

/* What the container init does after clone(), as one call: runs in the
 * child, reports errors through errfd and never returns. */
struct ctr_child_args {
	const struct run_config *cfg;
	const char *bundle; /* the unit directory: the hooks' OCI state */
	int sync_fd;	    /* read "go", write errors; CLOEXEC */
	int peer_fd;	    /* the monitor's end: closed first */
	int stdin_fd, stdout_fd, stderr_fd; /* become 0, 1, 2 */
	int netns_fd, ipcns_fd;		    /* -1: none to join */
};
__attribute__((noreturn)) void ctr_child(const struct ctr_child_args *a);

/* `cell-monitor exec`'s child, already in the unit's namespaces but the
 * mount namespace: joins exec_cg (its own cgroup below the unit's, so that
 * the whole tree it starts can be killed at once) and mntns_fd, becomes a
 * session leader (with stdin as its controlling terminal when stdin is
 * one), then credentials, cwd, exec. Errors go to sync_fd. */
struct ctr_exec_args {
	const struct run_config *cfg;
	char *const *argv, *const *env;
	const char *cwd;
	const struct cgroup *exec_cg;
	int mntns_fd, sync_fd, peer_fd;
};
__attribute__((noreturn)) void ctr_exec_child(const struct ctr_exec_args *a);
/* Credentials, capabilities and no_new_privs as run.json asks. */
int ctr_set_creds(const struct run_config *c, struct cerr *e);
/* execve argv with PATH taken from env; returns only on failure. */
int ctr_execvpe(char *const *argv, char *const *env, struct cerr *e);
/* Join a running unit: namespaces of pid (ipc, uts, net, pid, and mnt
 * unless mntns_fd is given, which then gets the mount namespace to join
 * later), then the caller must fork for the PID namespace to apply. */
int ctr_join_namespaces(pid_t pid, uint64_t start_time, int *mntns_fd,
			struct cerr *e);

/* ---- hooks.c: OCI hooks and the bundle they read ---- */

/* Run c's hooks of kind k in order, each with the OCI state (status,
 * the container's pid as the host sees it, bundle) on stdin, within its
 * timeout. EIO with "<kind> hook <path>: <why>: <stderr>" on failure. */
int hooks_run(const struct run_config *c, enum run_hook_kind k,
	      const char *bundle, pid_t pid, struct cerr *e);
/* <bundle>/config.json: the little of an OCI config that hooks read
 * (root.path, process), written only when c has hooks. */
int hooks_write_bundle(const char *bundle, const struct run_config *c,
		       struct cerr *e);
const char *hooks_kind_name(enum run_hook_kind k);

/* ---- monitor.c ---- */

/* `cell-monitor run`: become the unit's monitor. sync_fd (-1 none) gets
 * "ok <pid>\n" or "error <message>\n". Returns the process exit status. */
int monitor_run(const char *unit_dir, int sync_fd);
/* `cell-monitor exec`: run argv inside the unit; returns the exit status
 * to exit with (the command's, or 128+N). */
int monitor_exec(const char *unit_dir, int sync_fd, char *const *argv,
		 char *const *env, const char *cwd);
/* Exit code and reason for a wait status: 128+N on signal N; OOMKilled
 * when the cgroup saw an OOM kill and the unit failed. */
void monitor_decide_exit(int wstatus, int64_t oom_kills,
			 struct unit_runtime_state *st);
/* Start time (field 22 of /proc/<pid>/stat) or 0 when gone. */
uint64_t proc_start_time(pid_t pid);
/* The same, and field 3 (the state letter) into *state. */
uint64_t proc_stat(pid_t pid, char *state);

#endif
