// SPDX-License-Identifier: Apache-2.0
/* The agent's helper processes: cell-pull (image pulls) and cell-unpack
 * (deploy packages) run as children, so the agent never maps libcurl or
 * libarchive, and a crash or a hostile layer stays in the child.
 *
 * A helper's stdout and stderr come back on one non-blocking pipe
 * (`outfd`): JSON lines of progress, and on failure one
 * {"event":"error","code":N,"message":...} line that becomes the error.
 * Its pidfd says when it is over. The supervisor watches both in its
 * event loop (a pull never blocks it); the API runs cell-unpack to
 * completion on its worker with pullproc_run. Credentials go in on the
 * child's stdin (pullproc_creds), never in argv or the environment. */
#ifndef CELL_PULLPROC_H
#define CELL_PULLPROC_H

#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define PULLPROC_LINE_MAX 4096

struct pullproc {
	int pidfd, outfd;
	pid_t pid;
	char line[PULLPROC_LINE_MAX]; /* the line being read */
	size_t line_len;
	char *error; /* the helper's error line's message */
	int error_code;
	char *last;	     /* its last line that was not JSON (a log line) */
	char *warning;	     /* its last {"event":"warning"} line's message */
	uint64_t started_ns; /* monotonic, at the spawn */
	uint64_t bytes;	     /* downloaded, from its layer_done lines */
};

/* <dir of this executable>/name, or name when that cannot be read. */
char *pullproc_beside_self(const char *name);
/* A pipe's read end holding {"username","password"} (close it after
 * the spawn); -1 with e set. */
int pullproc_creds(const char *user, const char *pass, struct cerr *e);
int pullproc_spawn(char *const argv[], int stdin_fd, struct pullproc *p,
		   struct cerr *e);
/* Read what the helper wrote so far. */
void pullproc_drain(struct pullproc *p);
/* Take n bytes of the helper's output (what pullproc_drain reads; the
 * parser of the child's lines, pure, fuzzed by fuzz-helperout.c). */
void pullproc_feed(struct pullproc *p, const char *buf, size_t n);
/* Forget what was parsed (error, last line). */
void pullproc_clear(struct pullproc *p);
/* Once the pidfd is readable: reap it; 0 if it exited 0, else -1 with e
 * holding its error line (or how it died). Frees p's resources. */
int pullproc_finish(struct pullproc *p, struct cerr *e);
/* Kill it (SIGKILL), reap it, free p's resources. */
void pullproc_kill(struct pullproc *p);
/* Spawn and wait (for the API's workers). */
int pullproc_run(char *const argv[], int stdin_fd, struct cerr *e);

#endif
