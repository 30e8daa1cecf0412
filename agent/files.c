/* What the API reads and changes on the cell's own disk: tails of files
 * (file/), unit logs in CRI form (logs/, plain and followed), and the root
 * volume (resizevolume). Nothing here knows about HTTP. */
#include "api.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <linux/blkpg.h>

#include "cleanup.h"
#include "runtime.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

/* I/O buffers live on the heap: civetweb's workers, which call most of
 * this, run on stacks of about 100 KiB in Debian's build. */
#define CHUNK 65536
/* How much one logtail_read passes on before it lets its caller send. */
#define LOGTAIL_BUDGET (1u << 20)

/* ======================================================================
 * file/ tails
 * ====================================================================== */

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

int files_tail(const char *path, int64_t lines, int64_t bytes, struct buf *out,
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

/* ======================================================================
 * unit logs: tails and following, through crilog's one reader
 * ====================================================================== */

int files_log_tail(const char *path, int fd, off_t end, int64_t lines,
		   int64_t bytes, bool metadata, struct buf *out,
		   struct cerr *e)
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
	t->wd_file = inotify_add_watch(t->ifd, t->path, FILE_EVENTS);
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

/* The file we were reading has been rotated away (renamed to path.K): the
 * files rotated after it, path.K-1 … path.1, hold lines we have not seen,
 * then the new path. Each is opened before the chain is checked again, so
 * that a rotation meanwhile is noticed (and the search is repeated)
 * rather than a file read twice or skipped. */
static int read_rotated_after(struct logtail *t, struct cerr *e)
{
	for (int tries = 0; tries < 4; tries++) {
		int fds[CRILOG_ROTATED_MAX], k, n = 0, rc = 0;
		struct stat st;

		for (k = 1; k <= CRILOG_ROTATED_MAX; k++) {
			cleanup_free char *p = xasprintf("%s.%d", t->path, k);
			if (stat(p, &st) < 0)
				return 0; /* rotated out of reach: lost */
			if (st.st_ino == t->ino && st.st_dev == t->dev)
				break;
		}
		if (k > CRILOG_ROTATED_MAX)
			return 0;
		for (int j = k - 1; j >= 1; j--) {
			cleanup_free char *p = xasprintf("%s.%d", t->path, j);
			int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOCTTY);
			if (fd >= 0)
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
		if (fd < 0)
			return cerr_sys(e, "open %s", t->path);
		/* Opened first: whatever is rotated after this moment is
		 * this file, read from here on. */
		if (read_rotated_after(t, e) < 0) {
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

/* ======================================================================
 * resizevolume
 * ====================================================================== */

static uint32_t crc32_ieee(const void *p, size_t n)
{
	static uint32_t table[256];
	static bool init;
	const unsigned char *s = p;
	uint32_t c = 0xffffffffu;

	if (!init) { /* idempotent, so a race between threads is harmless */
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t v = i;
			for (int k = 0; k < 8; k++)
				v = (v & 1) ? 0xedb88320u ^ (v >> 1) : v >> 1;
			table[i] = v;
		}
		init = true;
	}
	while (n--)
		c = table[(c ^ *s++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t le64(const unsigned char *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static int rw_at(int fd, void *p, size_t n, uint64_t off, bool write,
		 struct cerr *e)
{
	ssize_t r =
	    write ? pwrite(fd, p, n, (off_t)off) : pread(fd, p, n, (off_t)off);

	if (r < 0)
		return cerr_sys(e, "%s at %llu", write ? "write" : "read",
				(unsigned long long)off);
	if ((size_t)r != n)
		return cerr_set(e, EIO, "short %s at %llu",
				write ? "write" : "read",
				(unsigned long long)off);
	return 0;
}

struct disk {
	int fd;
	uint64_t bytes;
	uint32_t ss; /* logical sector size */
	unsigned char mbr[512];
};

static int mbr_grow(struct disk *d, int partno, uint64_t *start, uint64_t *len,
		    struct cerr *e)
{
	unsigned char *ent;
	uint64_t first, size, limit = d->bytes / d->ss;

	if (partno < 1 || partno > 4)
		return cerr_set(e, ENOTSUP,
				"partition %d: only primary MBR partitions "
				"can be grown",
				partno);
	ent = d->mbr + 446 + 16 * (partno - 1);
	if (ent[4] == 0)
		return cerr_set(e, ENOENT, "no MBR partition %d", partno);
	if (ent[4] == 0x05 || ent[4] == 0x0f || ent[4] == 0x85)
		return cerr_set(e, ENOTSUP, "partition %d is extended", partno);
	first = le32(ent + 8);
	size = le32(ent + 12);
	for (int i = 0; i < 4; i++) {
		const unsigned char *o = d->mbr + 446 + 16 * i;
		if (i != partno - 1 && o[4] && le32(o + 8) > first &&
		    le32(o + 8) < limit)
			limit = le32(o + 8);
	}
	if (limit - first > 0xffffffffu)
		limit = first + 0xffffffffu; /* the most MBR can say */
	*start = first * d->ss;
	if (limit <= first + size) {
		*len = size * d->ss;
		return 1;
	}
	put32(ent + 12, (uint32_t)(limit - first));
	ent[5] = 0xfe; /* CHS end: "beyond CHS", as fdisk writes it */
	ent[6] = 0xff;
	ent[7] = 0xff;
	*len = (limit - first) * d->ss;
	return rw_at(d->fd, d->mbr, 512, 0, true, e);
}

struct gpt {
	unsigned char *hdr; /* one sector */
	unsigned char *ents;
	uint32_t hsize, nents, esize;
	size_t ebytes;
	uint64_t ents_lba;
};

static int gpt_read(struct disk *d, struct gpt *g, struct cerr *e)
{
	uint32_t crc;

	g->hdr = xmalloc(d->ss);
	if (rw_at(d->fd, g->hdr, d->ss, d->ss, false, e) < 0)
		return -1;
	if (memcmp(g->hdr, "EFI PART", 8) != 0)
		return cerr_set(e, EINVAL, "no GPT header");
	g->hsize = le32(g->hdr + 12);
	if (g->hsize < 92 || g->hsize > d->ss)
		return cerr_set(e, EINVAL, "GPT header size %u", g->hsize);
	crc = le32(g->hdr + 16);
	put32(g->hdr + 16, 0);
	if (crc32_ieee(g->hdr, g->hsize) != crc)
		return cerr_set(e, EINVAL, "GPT header checksum mismatch");
	put32(g->hdr + 16, crc);
	g->ents_lba = le64(g->hdr + 72);
	g->nents = le32(g->hdr + 80);
	g->esize = le32(g->hdr + 84);
	if (g->esize < 128 || g->esize > 4096 || g->esize % 8 ||
	    g->nents == 0 || g->nents > 4096)
		return cerr_set(e, EINVAL, "GPT entry table %u x %u", g->nents,
				g->esize);
	g->ebytes = (size_t)g->nents * g->esize;
	g->ents = xmalloc(g->ebytes);
	if (rw_at(d->fd, g->ents, g->ebytes, g->ents_lba * d->ss, false, e) < 0)
		return -1;
	if (crc32_ieee(g->ents, g->ebytes) != le32(g->hdr + 88))
		return cerr_set(e, EINVAL, "GPT entries checksum mismatch");
	return 0;
}

static void gpt_seal(struct gpt *g, unsigned char *hdr)
{
	put32(hdr + 88, crc32_ieee(g->ents, g->ebytes));
	put32(hdr + 16, 0);
	put32(hdr + 16, crc32_ieee(hdr, g->hsize));
}

/* Write the backup table at the disk's (new) end, then the primary one,
 * then the protective MBR's size. */
static int gpt_write(struct disk *d, struct gpt *g, uint64_t last,
		     uint64_t bents, struct cerr *e)
{
	cleanup_free unsigned char *bk = xmalloc(d->ss);
	unsigned char *pm = d->mbr + 446;

	memcpy(bk, g->hdr, d->ss);
	put64(bk + 24, last); /* my LBA */
	put64(bk + 32, 1);    /* the other header */
	put64(bk + 72, bents);
	gpt_seal(g, bk);
	gpt_seal(g, g->hdr);
	if (rw_at(d->fd, g->ents, g->ebytes, bents * d->ss, true, e) < 0 ||
	    rw_at(d->fd, bk, d->ss, last * d->ss, true, e) < 0 ||
	    rw_at(d->fd, g->ents, g->ebytes, g->ents_lba * d->ss, true, e) <
		0 ||
	    rw_at(d->fd, g->hdr, d->ss, d->ss, true, e) < 0)
		return -1;
	for (int i = 0; i < 4; i++, pm += 16)
		if (pm[4] == 0xee)
			put32(pm + 12, last > 0xffffffffu ? 0xffffffffu
							  : (uint32_t)last);
	return rw_at(d->fd, d->mbr, 512, 0, true, e);
}

static int gpt_grow(struct disk *d, int partno, uint64_t *start, uint64_t *len,
		    struct cerr *e)
{
	struct gpt g = {0};
	uint64_t last = d->bytes / d->ss - 1, bents, limit, first, end;
	unsigned char *ent;
	int r = -1;

	if (gpt_read(d, &g, e) < 0)
		goto out;
	if (partno < 1 || (uint32_t)partno > g.nents) {
		r = cerr_set(e, ENOENT, "no GPT partition %d", partno);
		goto out;
	}
	ent = g.ents + (size_t)(partno - 1) * g.esize;
	first = le64(ent + 32);
	end = le64(ent + 40);
	bents = last - (g.ebytes + d->ss - 1) / d->ss;
	limit = bents - 1; /* the new last usable LBA */
	if (!first || first > end || limit <= g.ents_lba) {
		r = cerr_set(e, EINVAL,
			     "GPT partition %d is empty or the "
			     "disk too small",
			     partno);
		goto out;
	}
	for (uint32_t i = 0; i < g.nents; i++) {
		const unsigned char *o = g.ents + (size_t)i * g.esize;
		if (le64(o + 32) > first && le64(o + 32) - 1 < limit)
			limit = le64(o + 32) - 1;
	}
	*start = first * d->ss;
	*len = (end - first + 1) * d->ss;
	if (limit <= end) {
		r = 1;
		goto out;
	}
	put64(ent + 40, limit);
	put64(g.hdr + 32, last);
	put64(g.hdr + 48, bents - 1);
	*len = (limit - first + 1) * d->ss;
	r = gpt_write(d, &g, last, bents, e);
out:
	free(g.hdr);
	free(g.ents);
	return r;
}

int files_grow_table(int fd, int partno, uint64_t *start, uint64_t *len,
		     struct cerr *e)
{
	struct disk d = {.fd = fd, .ss = 512};
	struct stat st;
	int r, gpt = 0;

	if (fstat(fd, &st) < 0)
		return cerr_sys(e, "stat");
	if (S_ISBLK(st.st_mode)) {
		int ss = 512;
		if (ioctl(fd, BLKGETSIZE64, &d.bytes) < 0)
			return cerr_sys(e, "BLKGETSIZE64");
		if (ioctl(fd, BLKSSZGET, &ss) == 0 && ss >= 512 && ss <= 65536)
			d.ss = (uint32_t)ss;
	} else {
		d.bytes = (uint64_t)st.st_size;
	}
	if (d.bytes < 64 * (uint64_t)d.ss)
		return cerr_set(e, EINVAL, "disk too small");
	if (rw_at(fd, d.mbr, 512, 0, false, e) < 0)
		return -1;
	if (d.mbr[510] != 0x55 || d.mbr[511] != 0xaa)
		return cerr_set(e, EINVAL, "no partition table");
	for (int i = 0; i < 4; i++)
		gpt |= d.mbr[446 + 16 * i + 4] == 0xee;
	r = gpt ? gpt_grow(&d, partno, start, len, e)
		: mbr_grow(&d, partno, start, len, e);
	if (r == 0 && fsync(fd) < 0)
		return cerr_sys(e, "fsync");
	return r;
}

/* ---- finding the root device ---- */

/* Undo mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* Walk /proc/self/mountinfo. With mnt: the device number of what is
 * mounted there (the last such mount wins: it hides the ones before it).
 * Without: whether *dev is mounted anywhere (1) or not (0). */
static int mountinfo_find(const char *mnt, dev_t *dev, struct cerr *e)
{
	cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	bool found = false;

	if (!f)
		return cerr_sys(e, "open /proc/self/mountinfo");
	while (fgets(line, sizeof(line), f)) {
		char *save = NULL, *tok[5];
		unsigned maj, min;
		int i;

		tok[0] = strtok_r(line, " ", &save);
		for (i = 1; tok[i - 1] && i < 5; i++)
			tok[i] = strtok_r(NULL, " ", &save);
		if (i < 5 || !tok[4] ||
		    sscanf(tok[2], "%u:%u", &maj, &min) != 2)
			continue;
		if (!mnt) {
			if (makedev(maj, min) == *dev)
				return 1;
			continue;
		}
		unescape(tok[4]);
		if (strcmp(tok[4], mnt) != 0)
			continue;
		*dev = makedev(maj, min);
		found = true;
	}
	if (mnt && !found)
		return cerr_set(e, ENOENT, "nothing is mounted at %s", mnt);
	return 0;
}

struct rootdev {
	char part[PATH_MAX]; /* the device that holds the filesystem */
	char disk[PATH_MAX]; /* its whole disk; "" when not a partition */
	int partno;
	dev_t dev;
};

/* From a device number to /dev names through sysfs: a partition's sysfs
 * directory sits inside its disk's and has a "partition" file. */
static int sysfs_names(dev_t dev, struct rootdev *r, struct cerr *e)
{
	char link[128], real[PATH_MAX], pf[PATH_MAX + 16], num[32];
	cleanup_fclose FILE *f = NULL;
	char *base, *slash;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(dev),
		 minor(dev));
	if (!realpath(link, real))
		return cerr_sys(e, "%s", link);
	base = strrchr(real, '/') + 1;
	if (!r->part[0])
		snprintf(r->part, sizeof(r->part), "/dev/%s", base);
	snprintf(pf, sizeof(pf), "%s/partition", real);
	f = fopen(pf, "re");
	if (!f)
		return 0; /* a whole disk: nothing to grow but the fs */
	if (!fgets(num, sizeof(num), f) || sscanf(num, "%d", &r->partno) != 1 ||
	    r->partno < 1)
		return cerr_set(e, EINVAL, "bad %s", pf);
	slash = base - 1;
	*slash = '\0';
	snprintf(r->disk, sizeof(r->disk), "/dev/%s", strrchr(real, '/') + 1);
	return 0;
}

static int find_root(const struct resize_opts *o, struct rootdev *r,
		     struct cerr *e)
{
	dev_t dev;
	struct stat st;

	memset(r, 0, sizeof(*r));
	if (o->root_device && *o->root_device) {
		if (stat(o->root_device, &st) < 0)
			return cerr_sys(e, "%s", o->root_device);
		if (!S_ISBLK(st.st_mode))
			return cerr_set(e, EINVAL, "%s is not a block device",
					o->root_device);
		snprintf(r->part, sizeof(r->part), "%s", o->root_device);
		dev = st.st_rdev;
	} else if (mountinfo_find(o->root_mount ? o->root_mount : "/", &dev,
				  e) < 0) {
		return -1;
	}
	r->dev = dev;
	return sysfs_names(dev, r, e);
}

/* A tool by name in the usual places (the agent may run with a bare
 * PATH). */
static char *find_tool(const char *name)
{
	static const char *const dirs[] = {"/usr/local/sbin", "/usr/local/bin",
					   "/usr/sbin",	      "/usr/bin",
					   "/sbin",	      "/bin"};

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
		char *p = xasprintf("%s/%s", dirs[i], name);
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	return NULL;
}

static int grow_builtin(const struct rootdev *r, struct buf *log,
			struct cerr *e)
{
	cleanup_close int fd = open(r->disk, O_RDWR | O_CLOEXEC);
	struct blkpg_partition p = {.pno = r->partno};
	struct blkpg_ioctl_arg a = {
	    .op = BLKPG_RESIZE_PARTITION, .datalen = sizeof(p), .data = &p};
	uint64_t start, len;
	struct cerr ig = {0};
	char msg[160];
	int g;

	if (fd < 0)
		return cerr_sys(e, "open %s", r->disk);
	g = files_grow_table(fd, r->partno, &start, &len, e);
	if (g < 0)
		return cerr_prefix(e, "%s partition %d", r->disk, r->partno);
	snprintf(msg, sizeof(msg), "%s partition %d: %s, %llu bytes\n", r->disk,
		 r->partno, g ? "NOCHANGE" : "grown", (unsigned long long)len);
	buf_append(log, msg, strlen(msg), &ig);
	/* Tell the kernel the partition's new size; it allows that while the
	 * partition is mounted, unlike a re-read of the whole table. */
	p.start = (long long)start;
	p.length = (long long)len;
	if (ioctl(fd, BLKPG, &a) < 0)
		return cerr_sys(e, "BLKPG resize %s partition %d", r->disk,
				r->partno);
	return 0;
}

static int grow_growpart(const char *tool, const struct rootdev *r,
			 struct buf *log, struct cerr *e)
{
	char num[16];
	char *argv[] = {(char *)tool, (char *)r->disk, num, NULL};
	size_t before = log->len;
	int rc;

	snprintf(num, sizeof(num), "%d", r->partno);
	rc = api_run(argv, log, 120, e);
	if (rc < 0)
		return -1;
	/* growpart exits 1 with NOCHANGE when the partition is already as
	 * large as it can be: that is success for us. */
	if (rc == 0 || (rc == 1 && memmem(log->data + before, log->len - before,
					  "NOCHANGE", 8)))
		return 0;
	return cerr_set(e, EIO, "growpart %s %d exited %d: %.300s", r->disk,
			r->partno, rc, log->data + before);
}

/* A filesystem that is not mounted (only reachable through the test
 * seam: a cell's root always is) is resized offline, which resize2fs
 * allows only after a forced check. e2fsck exits 1 when it fixed
 * something, which is fine; 4 and up is not. */
static int fsck_first(const struct rootdev *r, struct buf *log, struct cerr *e)
{
	cleanup_free char *fsck = find_tool("e2fsck");
	char *argv[] = {fsck, (char *)"-f", (char *)"-p", (char *)r->part,
			NULL};
	size_t before = log->len;
	int rc;

	if (!fsck)
		return cerr_set(e, ENOENT, "e2fsck is not installed");
	rc = api_run(argv, log, 600, e);
	if (rc < 0)
		return -1;
	if (rc > 1)
		return cerr_set(e, EIO, "e2fsck %s exited %d: %.300s", r->part,
				rc, log->data + before);
	return 0;
}

int files_resize_root(const struct resize_opts *o, struct buf *log,
		      struct cerr *e)
{
	struct rootdev r;
	cleanup_free char *growpart = NULL, *resize2fs = NULL;
	const char *tool = o->tool ? o->tool : "";
	int rc;

	if (find_root(o, &r, e) < 0)
		return cerr_prefix(e, "find the root device");
	log_info("resizevolume: filesystem on %s, disk %s, partition %d",
		 r.part, r.disk[0] ? r.disk : "(none)", r.partno);
	if (r.disk[0]) {
		if (strcmp(tool, "builtin") != 0)
			growpart = find_tool("growpart");
		if (!strcmp(tool, "growpart") && !growpart)
			return cerr_set(e, ENOENT, "growpart is not installed");
		if ((growpart ? grow_growpart(growpart, &r, log, e)
			      : grow_builtin(&r, log, e)) < 0)
			return -1;
	}
	if (mountinfo_find(NULL, &r.dev, e) == 0 && fsck_first(&r, log, e) < 0)
		return -1;
	resize2fs = find_tool("resize2fs");
	if (!resize2fs)
		return cerr_set(e, ENOENT, "resize2fs is not installed");
	{
		char *argv[] = {resize2fs, r.part, NULL};
		size_t before = log->len;

		rc = api_run(argv, log, 600, e);
		if (rc < 0)
			return -1;
		if (rc != 0)
			return cerr_set(e, EIO,
					"resize2fs %s exited %d: %.300s",
					r.part, rc, log->data + before);
	}
	return 0;
}
