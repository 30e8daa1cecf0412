// SPDX-License-Identifier: Apache-2.0
/* Unit logs for the API: tails (logs/) and following (logs/ with
 * follow, attach), in CRI form or as text, through crilog's one reader.
 * Nothing here knows about HTTP. */
#include "logread.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "filetail.h"
#include "log.h"
#include "runtime.h"
#include "util.h"

/* I/O buffers live on the heap: civetweb's workers, which call most of
 * this, run on stacks of about 100 KiB in Debian's build. */
#define CHUNK 65536
/* How much one logtail_read passes on before it lets its caller send. */
#define LOGTAIL_BUDGET (1u << 20)

int logread_tail(const char *path, int fd, off_t end, int64_t lines,
		 int64_t bytes, bool metadata, struct buf *out, struct cerr *e)
{
	struct crilog_tail_opts o = {
	    .lines = lines > 0 ? lines : -1,
	    .bytes = bytes > 0 && bytes < FILE_TAIL_MAX ? bytes : FILE_TAIL_MAX,
	    .with_rotated = true,
	    .format = metadata ? CRILOG_CRI : CRILOG_PLAIN,
	};

	return crilog_tail_fd(path, fd, end, &o, out, e);
}

struct logtail {
	char *path;
	char *next; /* a path to switch to once this one is drained */
	int fd;
	dev_t dev;
	ino_t ino;
	off_t off;
	int ifd; /* inotify */
	int wd_file;
	bool metadata;
	struct crilog_reader rd;
	/* Where the reader's lines go during one logtail_read. */
	logtail_emit emit;
	void *ud;
	struct buf line;
	bool failed;
};

#define FILE_EVENTS                                                            \
	(IN_MODIFY | IN_CLOSE_WRITE | IN_MOVE_SELF | IN_DELETE_SELF | IN_ATTRIB)

static int watch_dir(struct logtail *t, struct cerr *e)
{
	cleanup_free char *dup = xstrdup(t->path);

	/* The directory tells when the name comes back (rotation). */
	if (inotify_add_watch(t->ifd, dirname(dup), IN_CREATE | IN_MOVED_TO) <
	    0)
		return cerr_sys(e, "inotify on the directory of %s", t->path);
	return 0;
}

/* Follow fd (an open file of this log) from offset off. */
static int follow_fd(struct logtail *t, int fd, off_t off, struct cerr *e)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return cerr_set(e, EINVAL, "%s is not a regular file", t->path);
	}
	if (t->fd >= 0)
		close(t->fd);
	if (t->wd_file >= 0)
		inotify_rm_watch(t->ifd, t->wd_file);
	t->fd = fd;
	t->dev = st.st_dev;
	t->ino = st.st_ino;
	t->off = off < 0 ? st.st_size : off;
	/* The file we hold, not the name: the name may be between files
	 * (a rotation renamed it and has not made the next yet). */
	{
		char self[32];
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		t->wd_file = inotify_add_watch(t->ifd, self, FILE_EVENTS);
	}
	if (t->wd_file < 0)
		return cerr_sys(e, "inotify on %s", t->path);
	return 0;
}

/* Open t->path from offset off and watch it. */
static int open_current(struct logtail *t, off_t off, struct cerr *e)
{
	int fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	if (fd < 0)
		return cerr_sys(e, "open %s", t->path);
	return follow_fd(t, fd, off, e);
}

struct logtail *logtail_open(const char *path, bool metadata, struct cerr *e)
{
	struct logtail *t = xcalloc(1, sizeof(*t));

	t->fd = t->wd_file = -1;
	t->path = xstrdup(path);
	t->metadata = metadata;
	buf_init(&t->line, 0);
	t->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (t->ifd < 0) {
		cerr_sys(e, "inotify_init1");
		goto fail;
	}
	if (watch_dir(t, e) < 0 || open_current(t, -1, e) < 0)
		goto fail;
	return t;
fail:
	logtail_free(t);
	return NULL;
}

void logtail_free(struct logtail *t)
{
	if (!t)
		return;
	if (t->fd >= 0)
		close(t->fd);
	if (t->ifd >= 0)
		close(t->ifd);
	if (t->rd.fn)
		crilog_reader_free(&t->rd);
	buf_free(&t->line);
	free(t->path);
	free(t->next);
	free(t);
}

int logtail_fd(const struct logtail *t)
{
	return t->ifd;
}

int logtail_file(const struct logtail *t, off_t *offset)
{
	*offset = t->off;
	return t->fd;
}

static void drain_events(struct logtail *t)
{
	char ev[4096]
	    __attribute__((aligned(__alignof__(struct inotify_event))));

	while (read(t->ifd, ev, sizeof(ev)) > 0)
		;
}

/* A line from the reader, formatted as the client sees it: the text as it
 * comes (a P record's without its newline, the rest follows), or with
 * metadata whole CRI lines, P records joined. */
static int pass_line(const struct crilog_line *ln, void *ud)
{
	struct logtail *t = ud;
	int r;

	buf_reset(&t->line);
	crilog_format_line(&t->line, t->metadata ? CRILOG_CRI : CRILOG_PLAIN,
			   ln);
	r = t->emit(t->ud, ln->stream == CRILOG_STDERR ? 2 : 1,
		    t->line.data ? t->line.data : "", t->line.len);
	if (r < 0)
		t->failed = true;
	return r;
}

/* Read fd from *off up to the budget (or its end when budget is 0). 1:
 * more is waiting, 0: at its end. */
static int read_fd(struct logtail *t, int fd, off_t *off, size_t budget,
		   struct cerr *e)
{
	cleanup_free char *chunk = xmalloc(CHUNK);
	size_t done = 0;

	while (!budget || done < budget) {
		ssize_t r = pread(fd, chunk, CHUNK, *off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return cerr_sys(e, "read %s", t->path);
		if (r == 0)
			return 0;
		*off += r;
		done += (size_t)r;
		if (crilog_reader_feed(&t->rd, chunk, (size_t)r) < 0 ||
		    t->failed)
			return cerr_set(e, EPIPE, "stream closed");
	}
	return 1;
}

/* Where t's file is among path.1 … path.MAX; MAX + 1 when out of reach.
 * A missing name below it is no gap in time: a rotation under way renames
 * path.K-1 to path.K from the top down (path to path.1 last), so at every
 * moment the names that exist still run from the newest to the oldest. */
static int find_rotated(const struct logtail *t)
{
	struct stat st;
	int k;

	for (k = 1; k <= CRILOG_ROTATED_MAX; k++) {
		cleanup_free char *p = xasprintf("%s.%d", t->path, k);
		if (stat(p, &st) == 0 && st.st_ino == t->ino &&
		    st.st_dev == t->dev)
			break;
	}
	return k;
}

/* The file we were reading has been rotated away (renamed to path.K): the
 * files rotated after it, path.K-1 … path.1, hold lines we have not seen,
 * up to the file we opened to follow next (nx), itself rotated meanwhile
 * maybe: it is read by the caller, never here. Each is opened before the
 * chain is checked again, so that a rotation meanwhile is noticed (and
 * the search is repeated) rather than a file read twice or skipped. */
static int read_rotated_after(struct logtail *t, const struct stat *nx,
			      struct cerr *e)
{
	for (int tries = 0; tries < 8; tries++) {
		int fds[CRILOG_ROTATED_MAX], k = find_rotated(t), n = 0, rc = 0;
		struct stat st;

		if (k > CRILOG_ROTATED_MAX)
			return 0; /* rotated out of reach: lost */
		for (int j = k - 1; j >= 1; j--) {
			cleanup_free char *p = xasprintf("%s.%d", t->path, j);
			int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
			if (fd < 0)
				continue;
			if (fstat(fd, &st) == 0 && st.st_ino == nx->st_ino &&
			    st.st_dev == nx->st_dev) {
				close(fd);
				break;
			}
			fds[n++] = fd;
		}
		{
			cleanup_free char *p = xasprintf("%s.%d", t->path, k);
			bool same = stat(p, &st) == 0 && st.st_ino == t->ino &&
				    st.st_dev == t->dev;
			for (int i = 0; same && i < n && rc == 0; i++) {
				off_t off = 0;
				crilog_reader_next_file(&t->rd);
				rc = read_fd(t, fds[i], &off, 0, e);
			}
			for (int i = 0; i < n; i++)
				close(fds[i]);
			if (!same)
				continue;
		}
		return rc;
	}
	return 0;
}

int logtail_read(struct logtail *t, logtail_emit emit, void *ud, struct cerr *e)
{
	struct stat st;
	int r;

	if (!t->rd.fn)
		crilog_reader_init(&t->rd, t->metadata, pass_line, t);
	t->emit = emit;
	t->ud = ud;
	drain_events(t);
	if (fstat(t->fd, &st) == 0 && st.st_size < t->off) {
		t->off = 0; /* truncated in place (copytruncate) */
		crilog_reader_next_file(&t->rd);
	}
	r = read_fd(t, t->fd, &t->off, LOGTAIL_BUDGET, e);
	if (r != 0)
		return r;
	if (t->next) {
		free(t->path);
		t->path = steal_ptr(&t->next);
		crilog_reader_next_file(&t->rd);
		if (open_current(t, 0, e) < 0)
			return -1;
		return 1;
	}
	/* Drained: if the name now holds another file, it was rotated. */
	if (stat(t->path, &st) == 0 &&
	    (st.st_ino != t->ino || st.st_dev != t->dev)) {
		int fd =
		    open(t->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
		if (fd < 0 || fstat(fd, &st) < 0) {
			cerr_sys(e, "open %s", t->path);
			if (fd >= 0)
				close(fd);
			return -1;
		}
		/* Opened first: whatever is rotated after this moment is
		 * this file, read from here on. The old file first, to its
		 * end: the writer may have added to it (the rest of a line
		 * cut into P records, say) between our last read and the
		 * rotation. */
		if (read_fd(t, t->fd, &t->off, 0, e) < 0 ||
		    read_rotated_after(t, &st, e) < 0) {
			close(fd);
			return -1;
		}
		crilog_reader_next_file(&t->rd);
		if (follow_fd(t, fd, 0, e) < 0)
			return -1;
		return 1;
	}
	return 0;
}

int logtail_switch(struct logtail *t, const char *path, logtail_emit emit,
		   void *ud, struct cerr *e)
{
	if (!strcmp(path, t->path))
		return 0;
	free(t->next);
	t->next = xstrdup(path);
	return logtail_read(t, emit, ud, e) < 0 ? -1 : 0;
}
