// SPDX-License-Identifier: Apache-2.0
/* cell-agent's REST API (WIRE.md): civetweb over mutual TLS on port 6421,
 * the endpoints under /rest/v1/ (routes.c), and the websocket streams
 * (streams.c: exec, attach, port-forward, log follow).
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
	/* The terminal's size when the command starts (cellctl's "Rows" and
	 * "Cols"; 0 when not sent): a resize message comes only after the
	 * command has started, too late for one that asks at once. */
	unsigned short rows, cols;
};

struct api_backend {
	void *ctx;
	/* Queue a PodParameters body; EINVAL (with the reason) makes a 400. */
	int (*update_pod)(void *ctx, const char *body, size_t len,
			  struct cerr *e);
	/* A PodStatusReply JSON text (caller frees), or NULL. */
	char *(*status_json)(void *ctx);
	/* Whether a unit runs ("" = the first regular unit): 1 yes, 0 no, -1
	 * no such unit. NULL: unknown (attach and log follow then go on). */
	int (*unit_running)(void *ctx, const char *unit);
	/* The pod IP that port-forward dials (caller frees); NULL or "":
	 * 127.0.0.1. */
	char *(*pod_ip)(void *ctx);
	/* The CRI log file of a unit's current (or previous) run; NULL with
	 * ENOENT when the unit is unknown. */
	char *(*log_path)(void *ctx, const char *unit, bool previous,
			  struct cerr *e);
	/* Start req->command for the unit with the given stdio (the child's
	 * ends: stdin, stdout, stderr; with a TTY all three are the pty's
	 * slave, which the process must make its controlling terminal:
	 * spawn_pidfd does both). Returns a pidfd of the process, which must be
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
	/* TLS handshake bounds (agent/api/tls.h); 0 = the defaults. */
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

/* ---- metrics-listen.c: the plain-HTTP listener ---- */

struct metrics_listener;
/* addr: "PORT" (on 127.0.0.1), "A.B.C.D:PORT" or "[V6]:PORT"; serves GET
 * /metrics and GET /rest/v1/metrics only, without TLS (off by default:
 * --metrics-listen). EINVAL for an address of another form. */
int metrics_listen(const char *addr, struct metrics_listener **out,
		   struct cerr *e);
/* civetweb's listening_ports for addr (caller frees), NULL and EINVAL for
 * anything but the three forms above. */
char *metrics_listen_spec(const char *addr, struct cerr *e);
int metrics_listener_port(const struct metrics_listener *l);
void metrics_listener_stop(struct metrics_listener *l);

#endif
