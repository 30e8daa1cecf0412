/* cell-agent's REST API (WIRE.md): civetweb over mutual TLS on port 6421,
 * the endpoints under /rest/v1/, and the websocket streams (exec, attach,
 * port-forward, log follow).
 *
 * The API owns no pod state: it calls a backend, a table of function
 * pointers, which cell-agent fills with the supervisor's calls and the unit
 * tests with fakes. */
#ifndef CELL_API_H
#define CELL_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"

/* ExecParams / AttachParams, the first message of an exec or attach
 * stream. */
struct api_exec_req {
	char *pod_name;
	char *unit_name; /* "" = the first unit */
	char **command;	 /* NULL-terminated; exec only */
	bool interactive, tty, skip_nsenter;
};

struct api_backend {
	void *ctx;
	/* Queue a PodParameters body; EINVAL (with the reason) makes a 400. */
	int (*update_pod)(void *ctx, const char *body, size_t len,
			  struct cerr *e);
	/* A PodStatusReply JSON text (caller frees), or NULL. */
	char *(*status_json)(void *ctx);
	/* The CRI log file of a unit's current (or previous) run; NULL with
	 * ENOENT when the unit is unknown. */
	char *(*log_path)(void *ctx, const char *unit, bool previous,
			  struct cerr *e);
	/* Start req->command for the unit with the given stdio (the child's
	 * ends: stdin, stdout, stderr; with a TTY all three are the pty's
	 * slave, which the process must make its controlling terminal:
	 * api_spawn does both). Returns a pidfd of the process, which must be
	 * a child of this process, or -1 with e set. NULL: exec answers -1. */
	int (*exec_start)(void *ctx, const struct api_exec_req *req,
			  const int stdio[3], struct cerr *e);
	/* End an exec whose stream has gone: the process of pidfd and
	 * everything it started. The API waits a moment for the process to
	 * exit, then SIGKILLs it (and its process group when it leads one).
	 * NULL: only the SIGKILL. */
	void (*exec_end)(void *ctx, int pidfd);
	/* The write end of a unit's stdin for an interactive attach; NULL or
	 * -1 (ENOTSUP): attach streams output only. */
	int (*attach_stdin)(void *ctx, const char *unit, struct cerr *e);
};

struct api_opts {
	int port;		  /* 6421 */
	const char *boot_dir;	  /* ca.crt, server.crt, server.key */
	const char *packages_dir; /* deploy/ lands in <dir>/<name>/ */
	const char *version;	  /* the body of GET version */
	bool insecure_plain_http; /* tests only: no TLS at all */
	const char *bind_addr;	  /* NULL = all interfaces */
	int num_threads;	  /* 0 = the default (32) */
	/* Websocket keep-alive: ping period and how long a silent peer is
	 * kept; 0 = WIRE.md's 10 s and 15 s (tests shorten them). */
	int ws_ping_ms, ws_silence_ms;
	const char *unpack_bin; /* cell-unpack: extracts deploy packages */
	/* TLS handshake bounds (agent/tls.h); 0 = the defaults. */
	int handshake_ms, per_source;
};

struct api;

int api_start(const struct api_opts *o, const struct api_backend *b,
	      struct api **out, struct cerr *e);
void api_stop(struct api *a);
/* The port actually bound (for tests that ask for port 0). */
int api_port(const struct api *a);

/* Map an errno value to the HTTP status of an error reply: ENOENT 404,
 * EINVAL 400, EFBIG 413, EACCES/EPERM 403, ... default 500. */
int api_http_status(int err);

/* ---- process spawning, for backends, exec and the volume tools ---- */

#define API_SPAWN_SETSID 1u	 /* new session (and process group) */
#define API_SPAWN_TTY 2u	 /* stdio[0] becomes the controlling tty */
#define API_SPAWN_DIE_WITH_US 4u /* SIGKILL when the agent dies (helpers) */

/* Start argv[0] (a path) with stdio[0..2] as its standard fds (-1: /dev/
 * null), every other fd closed, signals reset, envp (NULL: this process's
 * environment). Returns a pidfd (clone3 CLONE_PIDFD: no pid-reuse race);
 * *pid gets the pid. An exec failure is reported here (ENOENT, EACCES…),
 * not as an exit status. Reap it with api_wait: a waitpid(-1) elsewhere in
 * the process would steal its status (api_wait then says -1), so the rest
 * of the agent must reap only its own children. */
int api_spawn(char *const argv[], char *const envp[], const int stdio[3],
	      unsigned flags, pid_t *pid, struct cerr *e);
/* Reap the process of pidfd (blocking unless nohang). The exit code in
 * shell form (128+N for signal N); -2 with nohang while it runs; -1 on
 * error. */
int api_wait(int pidfd, bool nohang);
/* Run argv to completion with stdout+stderr captured in out (up to its
 * cap), killing it after timeout_s. Returns the exit code or -1 (e set). */
int api_run(char *const argv[], struct buf *out, int timeout_s, struct cerr *e);

/* ---- files.c: file tails, unit logs, the root volume ---- */

#define FILE_TAIL_DEFAULT 4096
#define FILE_TAIL_MAX (10u << 20)

/* The tail of a regular file: the last `lines` lines (when > 0) within
 * the last `bytes` bytes (FILE_TAIL_DEFAULT when both are 0; never more
 * than FILE_TAIL_MAX). ENOENT when missing, EINVAL when not a regular
 * file. */
int files_tail(const char *path, int64_t lines, int64_t bytes, struct buf *out,
	       struct cerr *e);

/* Unit logs, read with crilog's reader (runtime.h). What a client sees
 * is the text of each line (partial lines joined), or with metadata whole
 * CRI lines, partial ones merged into one "F" line with the first part's
 * time. */

/* The last lines/bytes of a unit's log: path's rotated files, then the
 * current one, which is fd up to end when fd >= 0 (else path). 0 and 0:
 * as much as fits in FILE_TAIL_MAX. */
int files_log_tail(const char *path, int fd, off_t end, int64_t lines,
		   int64_t bytes, bool metadata, struct buf *out,
		   struct cerr *e);

/* Following a log file as it grows: inotify on the file and on its
 * directory. A rotation (the name comes back as a new file) is followed
 * without losing or repeating a line: the old file is drained, then the
 * files rotated after it (path.K-1 … path.1) and the new one from its
 * start. Truncation: read again from the start. Lines go to emit with
 * their stream (1 stdout, 2 stderr): the text as it comes (a partial
 * record without its newline), or with metadata whole CRI lines. */
typedef int (*logtail_emit)(void *ud, int stream, const char *p, size_t n);
struct logtail;
struct logtail *logtail_open(const char *path, bool metadata, struct cerr *e);
/* The fd to poll for input (inotify). */
int logtail_fd(const struct logtail *t);
/* The current file and the offset reached, for an initial tail. */
int logtail_file(const struct logtail *t, off_t *offset);
/* Emit whatever is new (drains inotify events too). */
int logtail_read(struct logtail *t, logtail_emit emit, void *ud,
		 struct cerr *e);
/* Follow another file from its start (a new run of the unit) once the
 * current one is drained; a no-op when it is the same path. */
int logtail_switch(struct logtail *t, const char *path, logtail_emit emit,
		   void *ud, struct cerr *e);
void logtail_free(struct logtail *t);

/* Grow the partition that holds the root filesystem to the end of its
 * disk, then the ext4 filesystem on it. Seams: root_device names the
 * block device directly (CELL_AGENT_ROOT_DEVICE); else the device mounted
 * at root_mount ("/") per /proc/self/mountinfo. The partition table is
 * grown by growpart when it is installed, else by the built-in MBR/GPT
 * code (tool = "growpart" or "builtin" forces one). `log` collects the
 * tools' output. */
struct resize_opts {
	const char *root_device;
	const char *root_mount;
	const char *tool;
};
int files_resize_root(const struct resize_opts *o, struct buf *log,
		      struct cerr *e);

/* Exposed for the unit tests: grow partition partno (1-based) of the
 * MBR or GPT disk image/device open as fd to the end of the disk (or the
 * next partition). *start and *len (bytes) describe the result; 0 when
 * grown, 1 when there was nothing to grow. */
int files_grow_table(int fd, int partno, uint64_t *start, uint64_t *len,
		     struct cerr *e);

#endif
