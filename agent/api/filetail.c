// SPDX-License-Identifier: Apache-2.0
/* file/: the tail of a file on the cell's disk. Nothing here knows about
 * HTTP. */
#include "filetail.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "util.h"

/* I/O buffers live on the heap: civetweb's workers, which call most of
 * this, run on stacks of about 100 KiB in Debian's build. */
#define CHUNK 65536

static int pread_full(int fd, struct buf *out, off_t off, size_t n,
		      struct cerr *e)
{
	cleanup_free char *chunk = xmalloc(CHUNK);

	while (n) {
		size_t want = n < CHUNK ? n : CHUNK;
		ssize_t r = pread(fd, chunk, want, off);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return cerr_sys(e, "read");
		}
		if (r == 0)
			break; /* the file shrank meanwhile */
		if (buf_append(out, chunk, (size_t)r, e) < 0)
			return -1;
		off += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Where the last `lines` lines of [floor, size) start, scanning backwards
 * (a newline that ends the file does not start another line). */
static int lines_start(int fd, off_t size, off_t floor, int64_t lines,
		       off_t *start, struct cerr *e)
{
	cleanup_free char *chunk = xmalloc(CHUNK);
	off_t pos = size;
	int64_t seen = 0;
	bool last = true;

	while (pos > floor) {
		size_t n = (size_t)(pos - floor) < CHUNK ? (size_t)(pos - floor)
							 : CHUNK;
		ssize_t r = pread(fd, chunk, n, pos - (off_t)n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return cerr_sys(e, "read");
		if ((size_t)r != n)
			break; /* shrank meanwhile: take what we have */
		for (size_t i = n; i-- > 0;) {
			bool nl = chunk[i] == '\n';

			if (last) {
				last = false;
				if (nl)
					continue;
			}
			if (nl && ++seen == lines) {
				*start = pos - (off_t)n + (off_t)i + 1;
				return 0;
			}
		}
		pos -= (off_t)n;
	}
	*start = floor;
	return 0;
}

int file_tail(const char *path, int64_t lines, int64_t bytes, struct buf *out,
	      struct cerr *e)
{
	cleanup_close int fd = -1;
	struct stat st;
	off_t floor, start;
	size_t maxb;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		return cerr_sys(e, "open %s", path);
	if (fstat(fd, &st) < 0)
		return cerr_sys(e, "stat %s", path);
	/* A FIFO or a device could block or never end. */
	if (!S_ISREG(st.st_mode))
		return cerr_set(e, EINVAL, "%s is not a regular file", path);
	if (bytes > 0)
		maxb = bytes < FILE_TAIL_MAX ? (size_t)bytes : FILE_TAIL_MAX;
	else
		maxb = lines > 0 ? FILE_TAIL_MAX : FILE_TAIL_DEFAULT;
	floor = st.st_size > (off_t)maxb ? st.st_size - (off_t)maxb : 0;
	start = floor;
	if (lines > 0 &&
	    lines_start(fd, st.st_size, floor, lines, &start, e) < 0)
		return -1;
	return pread_full(fd, out, start, (size_t)(st.st_size - start), e);
}
