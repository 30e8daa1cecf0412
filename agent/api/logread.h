// SPDX-License-Identifier: Apache-2.0
/* Unit logs for the API (logs/, attach): tails and following, through
 * crilog's one reader (runtime.h). Knows nothing of HTTP. */
#ifndef CELL_LOGREAD_H
#define CELL_LOGREAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"

/* Unit logs, read with crilog's reader (runtime.h). What a client sees
 * is the text of each line (partial lines joined), or with metadata whole
 * CRI lines, partial ones merged into one "F" line with the first part's
 * time. */

/* The last lines/bytes of a unit's log: path's rotated files, then the
 * current one, which is fd up to end when fd >= 0 (else path). 0 and 0:
 * as much as fits in FILE_TAIL_MAX. */
int logread_tail(const char *path, int fd, off_t end, int64_t lines,
		 int64_t bytes, bool metadata, struct buf *out, struct cerr *e);

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

#endif
