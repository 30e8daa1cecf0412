// SPDX-License-Identifier: Apache-2.0
/* CRI log files: the writer the monitor feeds with what a unit prints, and
 * the reader the agent serves logs from.
 *
 * A record is `<RFC3339Nano UTC> <stdout|stderr> <F|P> <text>\n`. The writer
 * never holds data back: a complete line becomes an F record, a line longer
 * than CRILOG_CHUNK is cut into P records ending in an F, and the tail of a
 * read without its newline is written as a P record at once (the rest of
 * the line follows in later records). Nothing waits in the monitor's memory,
 * so a monitor that dies loses nothing it had read. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "runtime.h"
#include "util.h"

#define RECORD_MAX (CRILOG_CHUNK + 64) /* one record, with its header */
#define READ_LINE_MAX (1u << 16)       /* reader: longer records skipped */
#define ASSEMBLE_MAX (1u << 20)	       /* reader: a line's P records */

static const char *const stream_names[] = {"stdout", "stderr"};

void crilog_format_time(int64_t ns, char *out)
{
	time_t sec = (time_t)(ns / 1000000000);
	long frac = (long)(ns % 1000000000);
	struct tm tm;
	size_t n;

	if (frac < 0) {
		frac += 1000000000;
		sec--;
	}
	gmtime_r(&sec, &tm);
	n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, 40 - n, ".%09ldZ", frac);
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's
 * days_from_civil): timegm() is neither pure nor everywhere. */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

static int digits(const char *s, size_t n, int64_t *v)
{
	*v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		*v = *v * 10 + (s[i] - '0');
	}
	return 0;
}

int crilog_parse_time(const char *s, size_t n, int64_t *ns)
{
	int64_t y, mo, d, h, mi, se, frac = 0, off = 0;
	size_t i = 19;

	if (n < 20 || s[4] != '-' || s[7] != '-' ||
	    (s[10] != 'T' && s[10] != 't') || s[13] != ':' || s[16] != ':' ||
	    digits(s, 4, &y) || digits(s + 5, 2, &mo) || digits(s + 8, 2, &d) ||
	    digits(s + 11, 2, &h) || digits(s + 14, 2, &mi) ||
	    digits(s + 17, 2, &se) || mo < 1 || mo > 12 || d < 1 || d > 31 ||
	    h > 23 || mi > 59 || se > 60)
		return -1;
	if (s[i] == '.') {
		size_t k = 0;
		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, k++)
			if (k < 9)
				frac = frac * 10 + (s[i] - '0');
		if (k == 0)
			return -1;
		for (; k < 9; k++)
			frac *= 10;
	}
	if (i + 1 == n && (s[i] == 'Z' || s[i] == 'z')) {
		off = 0;
	} else if (i + 6 == n && (s[i] == '+' || s[i] == '-') &&
		   s[i + 3] == ':') {
		int64_t oh, om;
		if (digits(s + i + 1, 2, &oh) || digits(s + i + 4, 2, &om))
			return -1;
		off = (oh * 60 + om) * 60 * (s[i] == '-' ? -1 : 1);
	} else {
		return -1;
	}
	*ns = ((days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se -
		off) *
	       1000000000) +
	      frac;
	return 0;
}

/* ---- writer ---- */

int crilog_open(struct crilog *l, const char *path, int64_t max_bytes,
		struct cerr *e)
{
	struct stat st;

	memset(l, 0, sizeof(*l));
	l->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (l->fd < 0)
		return cerr_sys(e, "open log %s", path);
	if (fstat(l->fd, &st) == 0)
		l->size = st.st_size;
	l->path = xstrdup(path);
	l->max_bytes = max_bytes;
	l->clock = wall_ns;
	return 0;
}

/* The "<pod>_<namespace>_" of a link's name, or NULL. */
static char *pod_prefix(const char *base)
{
	const char *u1 = strchr(base, '_'),
		   *u2 = u1 ? strchr(u1 + 1, '_') : NULL;

	return u2 ? xstrndup(base, (size_t)(u2 - base) + 1) : NULL;
}

static void remove_dangling(const char *dir, const char *prefix)
{
	cleanup_dir DIR *d = opendir(dir);
	struct dirent *de;

	while (d && prefix && (de = readdir(d))) {
		struct stat st;
		if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) <
			0 ||
		    !S_ISLNK(st.st_mode))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, 0) < 0 &&
		    errno == ENOENT)
			unlinkat(dirfd(d), de->d_name, 0);
	}
}

int crilog_link(const char *log_path, const char *link, struct cerr *e)
{
	cleanup_free char *dir = xstrdup(link);
	cleanup_free char *tmp = xasprintf("%s.tmp-%d", link, (int)getpid());
	char *slash = strrchr(dir, '/');
	cleanup_free char *prefix = NULL;

	if (!slash)
		return cerr_set(e, EINVAL, "log link %s: not a path", link);
	*slash = '\0';
	prefix = pod_prefix(slash + 1);
	if (fs_mkdir_p(*dir ? dir : "/", 0755, e) < 0)
		return cerr_prefix(e, "log link");
	remove_dangling(*dir ? dir : "/", prefix);
	unlink(tmp);
	if (symlink(log_path, tmp) < 0)
		return cerr_sys(e, "log link %s", tmp);
	if (rename(tmp, link) < 0) {
		cerr_sys(e, "log link %s", link);
		unlink(tmp);
		return -1;
	}
	return 0;
}

void crilog_close(struct crilog *l)
{
	if (l->fd >= 0)
		close(l->fd);
	free(l->path);
	l->path = NULL;
	l->fd = -1;
}

/* path.K → path.K+1 (the oldest is overwritten), path → path.1, then a
 * fresh path. Renames only: a reader holding a file keeps it. */
static int rotate(struct crilog *l, struct cerr *e)
{
	cleanup_free char *old = xasprintf("%s.1", l->path);
	int keep = l->max_files < 2 ? 1 : l->max_files - 1, fd;

	for (int k = keep; k >= 2; k--) {
		cleanup_free char *from = xasprintf("%s.%d", l->path, k - 1);
		cleanup_free char *to = xasprintf("%s.%d", l->path, k);
		if (rename(from, to) < 0 && errno != ENOENT)
			return cerr_sys(e, "rotate %s", from);
	}
	if (rename(l->path, old) < 0)
		return cerr_sys(e, "rotate %s", l->path);
	fd = open(l->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (fd < 0)
		return cerr_sys(e, "open log %s", l->path);
	close(l->fd);
	l->fd = fd;
	l->size = 0;
	return 0;
}

static int flush(struct crilog *l, struct buf *b, struct cerr *e)
{
	int rc = 0;

	if (!b->len)
		return 0;
	if (fs_write_all(l->fd, b->data, b->len) < 0) {
		/* A full disk must not block the unit: the pipe keeps being
		 * drained and what cannot be written is counted. A short
		 * write is taken back, so that the file ends at a record's
		 * end and the next record is not glued to a cut one. */
		l->dropped += b->len;
		rc = cerr_sys(e, "write log %s", l->path);
		if (ftruncate(l->fd, l->size) < 0)
			log_warn("log %s: cannot take back a short write: %m",
				 l->path);
	} else {
		l->size += (int64_t)b->len;
	}
	buf_reset(b);
	return rc;
}

static int add_record(struct crilog *l, struct buf *b, const char *hdr,
		      size_t hlen, char tag, const char *p, size_t n,
		      struct cerr *e)
{
	size_t rlen = hlen + 3 + n;
	char t[3] = {tag, ' ', 0};
	int rc = 0;

	if (l->max_bytes > 0 &&
	    l->size + (int64_t)(b->len + rlen) > l->max_bytes &&
	    l->size + (int64_t)b->len > 0) {
		rc = flush(l, b, e);
		if (l->size > 0 && rotate(l, e) < 0)
			rc = -1;
	}
	buf_append(b, hdr, hlen, NULL);
	buf_append(b, t, 2, NULL);
	buf_append(b, p, n, NULL);
	buf_append(b, "\n", 1, NULL);
	if (b->len >= 4 * RECORD_MAX && flush(l, b, e) < 0)
		rc = -1;
	return rc;
}

int crilog_write(struct crilog *l, enum crilog_stream s, const char *p,
		 size_t n, struct cerr *e)
{
	char ts[40], hdr[64];
	size_t hlen, i = 0;
	struct buf b;
	int rc = 0;

	if (l->fd < 0 || n == 0)
		return 0;
	crilog_format_time(l->clock(), ts);
	hlen =
	    (size_t)snprintf(hdr, sizeof(hdr), "%s %s ", ts, stream_names[s]);
	buf_init(&b, 0);
	while (i < n) {
		const char *nl = memchr(p + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - p) : n;

		/* Pieces of at most CRILOG_CHUNK; only the piece that ends
		 * at a newline is F. */
		do {
			size_t len =
			    end - i > CRILOG_CHUNK ? CRILOG_CHUNK : end - i;
			bool last = i + len == end;
			char tag = last && nl ? 'F' : 'P';
			if (add_record(l, &b, hdr, hlen, tag, p + i, len, e) <
			    0)
				rc = -1;
			i += len;
		} while (i < end);
		if (nl)
			i = end + 1;
	}
	if (flush(l, &b, e) < 0)
		rc = -1;
	buf_free(&b);
	return rc;
}

/* ---- reader ----
 *
 * The one reader of CRI log files: the API's logs, follow and attach, the
 * termination-message fallback and `cell-monitor logs` all go through
 * crilog_reader. */

int crilog_parse_record(const char *r, size_t n, struct crilog_record *out)
{
	const char *sp1 = memchr(r, ' ', n), *p;

	if (!sp1 || crilog_parse_time(r, (size_t)(sp1 - r), &out->ts_ns) < 0)
		return -1;
	p = sp1 + 1;
	n -= (size_t)(p - r);
	if (n >= 7 && !memcmp(p, "stdout ", 7))
		out->stream = CRILOG_STDOUT;
	else if (n >= 7 && !memcmp(p, "stderr ", 7))
		out->stream = CRILOG_STDERR;
	else
		return -1;
	p += 7, n -= 7;
	if (n < 1 || (p[0] != 'F' && p[0] != 'P') || (n > 1 && p[1] != ' '))
		return -1;
	out->partial = p[0] == 'P';
	p += n > 1 ? 2 : 1;
	n -= n > 1 ? 2 : 1;
	out->text = p;
	out->len = n;
	return 0;
}

void crilog_reader_init(struct crilog_reader *r, bool join, crilog_line_fn fn,
			void *ud)
{
	memset(r, 0, sizeof(*r));
	r->join = join;
	r->fn = fn;
	r->ud = ud;
	buf_init(&r->rec, READ_LINE_MAX);
	buf_init(&r->line[0], 0);
	buf_init(&r->line[1], 0);
}

void crilog_reader_free(struct crilog_reader *r)
{
	buf_free(&r->rec);
	buf_free(&r->line[0]);
	buf_free(&r->line[1]);
}

static int emit(struct crilog_reader *r, int s, bool partial)
{
	struct crilog_line ln = {
	    .ts_ns = r->ts[s],
	    .stream = (enum crilog_stream)s,
	    .partial = partial,
	    .text = r->line[s].data ? r->line[s].data : "",
	    .len = r->line[s].len,
	};
	int rc = r->fn(&ln, r->ud);

	buf_reset(&r->line[s]);
	r->ts[s] = 0;
	if (rc < 0)
		r->stop = true;
	return rc;
}

/* One whole record; a malformed one is skipped. */
static void feed_record(struct crilog_reader *r, const char *p, size_t n)
{
	struct crilog_record c;
	int s;

	if (crilog_parse_record(p, n, &c) < 0)
		return;
	if (!r->join) {
		struct crilog_line ln = {c.ts_ns, c.stream, c.partial, c.text,
					 c.len};
		if (r->fn(&ln, r->ud) < 0)
			r->stop = true;
		return;
	}
	s = (int)c.stream;
	if (r->line[s].len + c.len > ASSEMBLE_MAX)
		emit(r, s, false); /* a runaway line is cut, not hoarded */
	if (r->ts[s] == 0)
		r->ts[s] = c.ts_ns;
	buf_append(&r->line[s], c.text, c.len, NULL);
	if (!c.partial)
		emit(r, s, false);
}

int crilog_reader_feed(struct crilog_reader *r, const char *p, size_t n)
{
	for (size_t i = 0; i < n && !r->stop;) {
		const char *nl = memchr(p + i, '\n', n - i);
		size_t len = nl ? (size_t)(nl - p - i) : n - i;

		if (!r->skipping && buf_append(&r->rec, p + i, len, NULL) < 0)
			r->skipping =
			    true; /* longer than any record we write */
		i += len + (nl ? 1 : 0);
		if (!nl)
			continue;
		if (!r->skipping)
			feed_record(r, r->rec.data ? r->rec.data : "",
				    r->rec.len);
		r->skipping = false;
		buf_reset(&r->rec);
	}
	return r->stop ? -1 : 0;
}

void crilog_reader_next_file(struct crilog_reader *r)
{
	/* Records are never split across files: what is left was cut
	 * short by a write in progress, or by a truncation. */
	buf_reset(&r->rec);
	r->skipping = false;
}

int crilog_reader_finish(struct crilog_reader *r)
{
	/* Unfinished lines last, oldest first. */
	int first = (r->ts[1] && (!r->ts[0] || r->ts[1] < r->ts[0])) ? 1 : 0;

	for (int k = 0; k < 2 && !r->stop; k++) {
		int s = first ^ k;
		if (r->line[s].len || r->ts[s])
			emit(r, s, true);
	}
	return r->stop ? -1 : 0;
}

/* Feed fd from its start up to end (< 0: its end). */
static int feed_fd(struct crilog_reader *r, int fd, off_t end, const char *path,
		   struct cerr *e)
{
	cleanup_free char *chunk = xmalloc(65536);
	off_t off = 0;

	while (!r->stop && (end < 0 || off < end)) {
		size_t want = 65536;
		ssize_t n;

		if (end >= 0 && (off_t)want > end - off)
			want = (size_t)(end - off);
		n = pread(fd, chunk, want, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return cerr_sys(e, "read %s", path);
		if (n == 0)
			break;
		off += n;
		crilog_reader_feed(r, chunk, (size_t)n);
	}
	crilog_reader_next_file(r);
	return 0;
}

/* How many rotated files path.1, path.2, … there are. */
static int count_rotated(const char *path)
{
	int n = 0;

	while (n < CRILOG_ROTATED_MAX) {
		cleanup_free char *p = xasprintf("%s.%d", path, n + 1);
		if (access(p, F_OK) < 0)
			break;
		n++;
	}
	return n;
}

int crilog_foreach_fd(const char *path, bool with_rotated, int cur_fd,
		      off_t cur_end, struct crilog_reader *r, struct cerr *e)
{
	struct stat cur = {0};
	int rc = 0;

	if (cur_fd >= 0 && fstat(cur_fd, &cur) < 0)
		return cerr_sys(e, "stat %s", path);
	for (int k = with_rotated ? count_rotated(path) : 0; k > 0 && rc == 0;
	     k--) {
		cleanup_free char *p = xasprintf("%s.%d", path, k);
		cleanup_close int fd = open(p, O_RDONLY | O_CLOEXEC);
		struct stat st;

		if (fd < 0 || fstat(fd, &st) < 0)
			continue; /* rotated away meanwhile */
		/* The current file itself, renamed by a rotation since it
		 * was opened: read once, below. */
		if (cur_fd >= 0 && st.st_ino == cur.st_ino &&
		    st.st_dev == cur.st_dev)
			continue;
		rc = feed_fd(r, fd, -1, p, e);
	}
	if (rc == 0 && cur_fd >= 0)
		rc = feed_fd(r, cur_fd, cur_end, path, e);
	if (rc == 0 && cur_fd < 0) {
		cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			rc = feed_fd(r, fd, -1, path, e);
		else if (errno != ENOENT)
			rc = cerr_sys(e, "open %s", path);
	}
	if (rc == 0)
		crilog_reader_finish(r);
	return rc;
}

int crilog_foreach(const char *path, bool with_rotated, crilog_line_fn fn,
		   void *ud, struct cerr *e)
{
	struct crilog_reader r;
	int rc;

	crilog_reader_init(&r, true, fn, ud);
	rc = crilog_foreach_fd(path, with_rotated, -1, -1, &r, e);
	crilog_reader_free(&r);
	return rc;
}

/* ---- tail ---- */

struct saved_line {
	int64_t ts;
	int stream;
	bool partial;
	char *text;
	size_t len;
};

struct tail_state {
	const struct crilog_tail_opts *o;
	struct saved_line *ring; /* the last o->lines lines */
	size_t cap, n, head;
	struct buf text; /* the formatted result so far */
	int64_t keep;	 /* bytes mode: how much of text matters */
};

static void format_line(struct buf *b, enum crilog_format f, int64_t ts,
			int stream, bool partial, const char *t, size_t n)
{
	char hdr[64] = "", tbuf[40];
	int hl = 0;

	if (f != CRILOG_PLAIN) {
		crilog_format_time(ts, tbuf);
		if (f == CRILOG_TIMESTAMPS)
			hl = snprintf(hdr, sizeof(hdr), "%s ", tbuf);
		else
			hl =
			    snprintf(hdr, sizeof(hdr), "%s %s %c ", tbuf,
				     stream_names[stream], partial ? 'P' : 'F');
	}
	buf_append(b, hdr, (size_t)hl, NULL);
	buf_append(b, t, n, NULL);
	if (!partial || f != CRILOG_PLAIN)
		buf_append(b, "\n", 1, NULL);
}

void crilog_format_line(struct buf *b, enum crilog_format f,
			const struct crilog_line *ln)
{
	format_line(b, f, ln->ts_ns, (int)ln->stream, ln->partial, ln->text,
		    ln->len);
}

/* Bytes mode without a line count: only the end of the text matters, so
 * the buffer slides instead of growing with the whole file. */
static void trim_front(struct tail_state *t)
{
	size_t keep = (size_t)t->keep;

	if (t->keep < 0 || t->text.len <= 2 * keep + 65536)
		return;
	memmove(t->text.data, t->text.data + t->text.len - keep, keep);
	t->text.len = keep;
	t->text.data[keep] = '\0';
}

static int tail_line(const struct crilog_line *ln, void *ud)
{
	struct tail_state *t = ud;
	struct saved_line *s;

	if (t->o->since_ns && ln->ts_ns < t->o->since_ns)
		return 0;
	if (t->o->lines < 0) {
		format_line(&t->text, t->o->format, ln->ts_ns, ln->stream,
			    ln->partial, ln->text, ln->len);
		trim_front(t);
		return 0;
	}
	if (t->o->lines == 0)
		return 0;
	if (t->n == t->cap && t->cap < (size_t)t->o->lines) {
		/* Grow the ring, unrolling it so that head is 0. */
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct saved_line *r;
		if (ncap > (size_t)t->o->lines)
			ncap = (size_t)t->o->lines;
		r = xcalloc(ncap, sizeof(*r));
		for (size_t i = 0; i < t->n; i++)
			r[i] = t->ring[(t->head + i) % t->cap];
		free(t->ring);
		t->ring = r;
		t->cap = ncap;
		t->head = 0;
	}
	if (t->n == t->cap) {
		s = &t->ring[t->head];
		free(s->text);
		t->head = (t->head + 1) % t->cap;
	} else {
		s = &t->ring[(t->head + t->n++) % t->cap];
	}
	*s = (struct saved_line){ln->ts_ns, ln->stream, ln->partial,
				 xstrndup(ln->text, ln->len), ln->len};
	return 0;
}

int crilog_tail(const char *path, const struct crilog_tail_opts *o,
		struct buf *out, struct cerr *e)
{
	return crilog_tail_fd(path, -1, -1, o, out, e);
}

int crilog_tail_fd(const char *path, int cur_fd, off_t cur_end,
		   const struct crilog_tail_opts *o, struct buf *out,
		   struct cerr *e)
{
	struct tail_state t = {.o = o, .keep = o->bytes};
	struct crilog_reader r;
	const char *start;
	size_t len;
	int rc;

	buf_init(&t.text, 0);
	if (o->lines >= 0)
		t.keep = -1; /* trimmed after the lines are chosen */
	crilog_reader_init(&r, true, tail_line, &t);
	rc = crilog_foreach_fd(path, o->with_rotated, cur_fd, cur_end, &r, e);
	crilog_reader_free(&r);
	for (size_t i = 0; i < t.n; i++) {
		struct saved_line *s = &t.ring[(t.head + i) % t.cap];
		format_line(&t.text, o->format, s->ts, s->stream, s->partial,
			    s->text, s->len);
		free(s->text);
	}
	free(t.ring);
	start = t.text.data ? t.text.data : "";
	len = t.text.len;
	if (o->bytes >= 0 && len > (size_t)o->bytes) {
		start += len - (size_t)o->bytes;
		len = (size_t)o->bytes;
	}
	if (rc == 0 && buf_append(out, start, len, e) < 0)
		rc = -1;
	buf_free(&t.text);
	return rc;
}
