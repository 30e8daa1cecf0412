// SPDX-License-Identifier: Apache-2.0
/* CRI log writer and reader: record format, partial lines, long-line
 * splitting, rotation, and tails by lines and bytes. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "buf.h"
#include "fsutil.h"
#include "logread.h"
#include "runtime.h"
#include "util.h"

static char dir[] = "/tmp/test-crilog-XXXXXX";
static int64_t fake_now = 1700000000123456789LL;

static int64_t fake_clock(void)
{
	return fake_now;
}

static char *slurp(const char *path)
{
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 0);
	if (fs_read_file(path, &b, &e) < 0) {
		buf_free(&b);
		return xstrdup("");
	}
	return buf_steal(&b, NULL);
}

static char *path_of(const char *name)
{
	return xasprintf("%s/%s", dir, name);
}

static void open_log(struct crilog *l, const char *name, int64_t max)
{
	char *p = path_of(name);
	struct cerr e = {0};

	unlink(p);
	if (crilog_open(l, p, max, &e) < 0)
		printf("# %s\n", e.msg);
	l->clock = fake_clock;
	free(p);
}

static void w(struct crilog *l, enum crilog_stream s, const char *text)
{
	struct cerr e = {0};

	if (crilog_write(l, s, text, strlen(text), &e) < 0)
		printf("# write: %s\n", e.msg);
}

static void test_time(void)
{
	char t[40];
	int64_t ns = 0;

	crilog_format_time(1000000001LL, t);
	is_str(t, "1970-01-01T00:00:01.000000001Z", "format: nanoseconds");
	crilog_format_time(fake_now, t);
	is_str(t, "2023-11-14T22:13:20.123456789Z", "format: 2023");
	ok(crilog_parse_time(t, strlen(t), &ns) == 0 && ns == fake_now,
	   "parse: round trip");
	ok(crilog_parse_time("2023-11-14T23:13:20.5+01:00", 27, &ns) == 0 &&
	       ns == 1700000000500000000LL,
	   "parse: offset and short fraction");
	ok(crilog_parse_time("2023-11-14T22:13:20Z", 20, &ns) == 0 &&
	       ns == 1700000000000000000LL,
	   "parse: no fraction");
	ok(crilog_parse_time("2023-11-14 22:13:20Z", 20, &ns) < 0,
	   "parse: space instead of T refused");
	ok(crilog_parse_time("2023-13-14T22:13:20Z", 20, &ns) < 0,
	   "parse: month 13 refused");
	ok(crilog_parse_time("2023-11-14T22:13:20.Z", 21, &ns) < 0,
	   "parse: empty fraction refused");
	ok(crilog_parse_time("2023-11-14T22:13:20", 19, &ns) < 0,
	   "parse: zone required");
}

#define TS "2023-11-14T22:13:20.123456789Z"

static void test_writer_format(void)
{
	struct crilog l;
	char *p, *got;

	open_log(&l, "fmt.log", 0);
	w(&l, CRILOG_STDOUT, "hello\nworld\n");
	w(&l, CRILOG_STDERR, "oops\n");
	w(&l, CRILOG_STDOUT, "\n");
	crilog_close(&l);
	p = path_of("fmt.log");
	got = slurp(p);
	is_str(got,
	       TS " stdout F hello\n" TS " stdout F world\n" TS
		  " stderr F oops\n" TS " stdout F \n",
	       "full lines become F records; an empty line is an empty F");
	free(got);
	free(p);
}

static void test_writer_partial(void)
{
	struct crilog l;
	char *p, *got;

	open_log(&l, "partial.log", 0);
	w(&l, CRILOG_STDOUT, "abc");
	w(&l, CRILOG_STDOUT, "def\nghi");
	w(&l, CRILOG_STDOUT, "\n");
	crilog_close(&l);
	p = path_of("partial.log");
	got = slurp(p);
	is_str(got,
	       TS " stdout P abc\n" TS " stdout F def\n" TS " stdout P ghi\n" TS
		  " stdout F \n",
	       "a piece without newline is written at once as P");
	free(got);
	free(p);
}

/* A full disk (here RLIMIT_FSIZE, in a child) cuts a write short: the
 * cut record is taken back, so the next one starts a line of its own. */
static void test_writer_short_write(void)
{
	char *p = path_of("short.log"), *got;
	struct stat st;
	int status = -1;
	pid_t pid = fork();

	if (pid == 0) {
		struct crilog l;
		struct rlimit rl;
		struct cerr e = {0};
		char big[200];

		signal(SIGXFSZ, SIG_IGN);
		memset(big, 'x', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\n';
		open_log(&l, "short.log", 0);
		w(&l, CRILOG_STDOUT, "before\n");
		getrlimit(RLIMIT_FSIZE, &rl);
		rl.rlim_cur = (rlim_t)l.size + 100;
		setrlimit(RLIMIT_FSIZE, &rl);
		if (crilog_write(&l, CRILOG_STDOUT, big, sizeof(big), &e) == 0)
			_exit(2); /* the limit did not bite */
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_FSIZE, &rl);
		w(&l, CRILOG_STDOUT, "after\n");
		_exit(l.dropped == sizeof(big) + strlen(TS " stdout F ") ? 0
									 : 3);
	}
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "the short write failed and was counted as dropped (%d)", status);
	got = slurp(p);
	is_str(got, TS " stdout F before\n" TS " stdout F after\n",
	       "the cut record is gone; the next one is whole");
	ok(stat(p, &st) == 0 && st.st_size == (off_t)strlen(got),
	   "nothing after the last record");
	free(got);
	free(p);
}

static void test_writer_long(void)
{
	size_t n = 2 * CRILOG_CHUNK + 100;
	char *line = xmalloc(n + 2), *p, *got, *r2, *r3;
	struct crilog l;
	size_t hdr = strlen(TS " stdout P ");

	memset(line, 'x', n);
	line[n] = '\n';
	line[n + 1] = '\0';
	open_log(&l, "long.log", 0);
	w(&l, CRILOG_STDOUT, line);
	line[n] = '\0';
	w(&l, CRILOG_STDOUT, line); /* no newline: all P */
	crilog_close(&l);
	p = path_of("long.log");
	got = slurp(p);
	r2 = got + hdr + CRILOG_CHUNK + 1;
	r3 = r2 + hdr + CRILOG_CHUNK + 1;
	ok(!strncmp(got, TS " stdout P ", hdr) &&
	       got[hdr + CRILOG_CHUNK] == '\n',
	   "first 16 KiB piece is P");
	ok(!strncmp(r2, TS " stdout P ", hdr) && r2[hdr + CRILOG_CHUNK] == '\n',
	   "second 16 KiB piece is P");
	ok(!strncmp(r3, TS " stdout F ", hdr) && r3[hdr + 100] == '\n',
	   "the rest ends the line as F");
	ok(strlen(got) == 6 * hdr + 2 * n + 6, "second line: three P records");
	ok(!strstr(r3 + hdr + 101, " stdout F "), "no F without a newline");
	free(got);
	free(p);
	free(line);
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void test_rotation(void)
{
	struct crilog l;
	char *p = path_of("rot.log"), *old = path_of("rot.log.1"), *a, *b;
	size_t rec = strlen(TS " stdout F line-00\n");
	struct stat st;

	unlink(old);
	open_log(&l, "rot.log", (int64_t)(3 * rec));
	for (int i = 0; i < 8; i++) {
		char t[16];
		snprintf(t, sizeof(t), "line-%02d\n", i);
		w(&l, CRILOG_STDOUT, t);
	}
	crilog_close(&l);
	a = slurp(old);
	b = slurp(p);
	ok(stat(old, &st) == 0 && (size_t)st.st_size == 3 * rec,
	   "rotated file holds whole records up to the limit");
	ok(count_lines(b) == 2 && strstr(b, "line-07\n") &&
	       strstr(b, "line-06\n"),
	   "current file has the newest records");
	ok(strstr(a, "line-03") && strstr(a, "line-05") &&
	       !strstr(a, "line-02"),
	   "one old file is kept");
	free(a);
	free(b);
	/* A record larger than the limit still gets written whole. */
	open_log(&l, "rot.log", 10);
	w(&l, CRILOG_STDOUT, "a long record\n");
	w(&l, CRILOG_STDOUT, "another\n");
	crilog_close(&l);
	b = slurp(p);
	is_str(b, TS " stdout F another\n", "oversized records rotate alone");
	free(b);
	free(p);
	free(old);
}

struct collect {
	struct buf b;
};

static int collect_line(const struct crilog_line *ln, void *ud)
{
	struct collect *c = ud;
	char t[64];

	snprintf(t, sizeof(t), "%s%s:", ln->stream ? "err" : "out",
		 ln->partial ? "(partial)" : "");
	buf_append(&c->b, t, strlen(t), NULL);
	buf_append(&c->b, ln->text, ln->len, NULL);
	buf_append(&c->b, "|", 1, NULL);
	return 0;
}

static void test_reader(void)
{
	char *p = path_of("read.log");
	const char *text = "2023-11-14T22:13:20.000000001Z stdout P ab\n"
			   "2023-11-14T22:13:20.000000002Z stderr F e1\n"
			   "garbage line\n"
			   "2023-11-14T22:13:20.000000003Z stdout F cd\n"
			   "2023-11-14T22:13:20.000000004Z stdout F \n"
			   "2023-11-14T22:13:20.000000005Z stdbad F x\n"
			   "2023-11-14T22:13:20.000000006Z stderr P tail";
	const char *text2 = "2023-11-14T22:13:20.000000006Z stderr P tail\n";
	struct collect c;
	struct cerr e = {0};

	fs_write_atomic(p, text, strlen(text), 0644, &e);
	buf_init(&c.b, 0);
	crilog_foreach(p, false, collect_line, &c, &e);
	is_str(c.b.data, "err:e1|out:abcd|out:|",
	       "P records joined; malformed and unterminated records skipped");
	buf_free(&c.b);
	fs_write_atomic(p, text2, strlen(text2), 0644, &e);
	buf_init(&c.b, 0);
	crilog_foreach(p, false, collect_line, &c, &e);
	is_str(c.b.data, "err(partial):tail|",
	       "a line the file ends in is reported as partial");
	buf_free(&c.b);
	free(p);
}

static char *tail(const char *name, int64_t lines, int64_t bytes,
		  enum crilog_format f, bool rotated, int64_t since)
{
	struct crilog_tail_opts o = {lines, bytes, since, rotated, f};
	char *p = path_of(name);
	struct buf out;
	struct cerr e = {0};

	buf_init(&out, 1u << 20);
	if (crilog_tail(p, &o, &out, &e) < 0)
		printf("# tail: %s\n", e.msg);
	free(p);
	return buf_steal(&out, NULL);
}

static void test_tail(void)
{
	struct crilog l;
	char *s;

	open_log(&l, "tail.log", 0);
	w(&l, CRILOG_STDOUT, "one\ntwo\n");
	fake_now += 1000;
	w(&l, CRILOG_STDERR, "three\n");
	w(&l, CRILOG_STDOUT, "fo");
	w(&l, CRILOG_STDOUT, "ur\nfive");
	crilog_close(&l);
	fake_now -= 1000;
	s = tail("tail.log", -1, -1, CRILOG_PLAIN, false, 0);
	is_str(s, "one\ntwo\nthree\nfour\nfive", "plain: everything");
	free(s);
	s = tail("tail.log", 2, -1, CRILOG_PLAIN, false, 0);
	is_str(s, "four\nfive", "last 2 lines (the partial one counts)");
	free(s);
	s = tail("tail.log", 0, -1, CRILOG_PLAIN, false, 0);
	is_str(s, "", "last 0 lines");
	free(s);
	s = tail("tail.log", -1, 6, CRILOG_PLAIN, false, 0);
	is_str(s, "r\nfive", "last 6 bytes");
	free(s);
	s = tail("tail.log", 3, 10, CRILOG_PLAIN, false, 0);
	is_str(s, "\nfour\nfive", "lines, then bytes");
	free(s);
	s = tail("tail.log", 1, -1, CRILOG_TIMESTAMPS, false, 0);
	is_str(s, "2023-11-14T22:13:20.123457789Z five\n", "timestamps format");
	free(s);
	s = tail("tail.log", 2, -1, CRILOG_CRI, false, 0);
	is_str(s,
	       "2023-11-14T22:13:20.123457789Z stdout F four\n"
	       "2023-11-14T22:13:20.123457789Z stdout P five\n",
	       "CRI format, one record per line");
	free(s);
	s = tail("tail.log", -1, -1, CRILOG_PLAIN, false, fake_now + 1);
	is_str(s, "three\nfour\nfive", "since");
	free(s);
}

static void test_tail_rotated_and_big(void)
{
	struct crilog l;
	char *s, line[64];

	open_log(&l, "big.log", 4096);
	for (int i = 0; i < 2000; i++) {
		snprintf(line, sizeof(line), "n%04d\n", i);
		w(&l, CRILOG_STDOUT, line);
	}
	crilog_close(&l);
	s = tail("big.log", 1, -1, CRILOG_PLAIN, true, 0);
	is_str(s, "n1999\n", "newest line across rotation");
	free(s);
	s = tail("big.log", -1, 12, CRILOG_PLAIN, true, 0);
	is_str(s, "n1998\nn1999\n", "bytes mode over a rotated log");
	free(s);
	s = tail("big.log", -1, -1, CRILOG_PLAIN, true, 0);
	ok(strstr(s, "n1999\n") && !strstr(s, "n0000\n") &&
	       strstr(s, "\n") == s + 5,
	   "rotated then current, whole lines only");
	free(s);
	s = tail("missing.log", -1, -1, CRILOG_PLAIN, true, 0);
	is_str(s, "", "a missing log is empty, not an error");
	free(s);
}

/* Rotation keeps max_files files: path.K shifts up, the oldest drops. */
static void test_rotation_many(void)
{
	struct crilog l;
	char line[64], *s;
	char *p = path_of("many.log"), *p3 = path_of("many.log.3"),
	     *p4 = path_of("many.log.4");

	open_log(&l, "many.log", 512);
	l.max_files = 4;
	for (int i = 0; i < 500; i++) {
		snprintf(line, sizeof(line), "m%04d\n", i);
		w(&l, CRILOG_STDOUT, line);
	}
	crilog_close(&l);
	ok(access(p3, F_OK) == 0 && access(p4, F_OK) < 0,
	   "max_files 4: path, .1, .2, .3 and no .4");
	s = tail("many.log", -1, -1, CRILOG_PLAIN, true, 0);
	{
		/* Consecutive from the oldest kept line to the last. */
		int first = -1, prev = -1, bad = 0;
		for (char *q = s; *q; q = strchr(q, '\n') + 1) {
			int n = (int)strtol(q + 1, NULL, 10);
			if (first < 0)
				first = n;
			else if (n != prev + 1)
				bad++;
			prev = n;
		}
		ok(first > 0 && prev == 499 && !bad,
		   "all kept files, oldest first, each line once (%d..%d)",
		   first, prev);
	}
	free(s);
	free(p);
	free(p3);
	free(p4);
}

/* A line whose P record is in one file and its F in the next. */
static void test_line_across_rotation(void)
{
	struct crilog l;
	char *big = xmalloc(CRILOG_CHUNK + 101), *s, *want;

	memset(big, 'z', CRILOG_CHUNK + 100);
	big[CRILOG_CHUNK + 100] = '\0';
	open_log(&l, "span.log", 1024);
	l.max_files = 5;
	w(&l, CRILOG_STDOUT, "before\n");
	w(&l, CRILOG_STDOUT, big);
	w(&l, CRILOG_STDOUT, "\nafter\n");
	crilog_close(&l);
	want = xasprintf("before\n%s\nafter\n", big);
	s = tail("span.log", -1, -1, CRILOG_PLAIN, true, 0);
	ok(!strcmp(s, want), "a line split over two files is read once, whole");
	free(s);
	s = tail("span.log", 2, -1, CRILOG_CRI, true, 0);
	{
		char *nl = strchr(s, '\n');
		ok(!strncmp(s + 31, "stdout F zzz", 12) && nl &&
		       nl - s == 31 + 9 + CRILOG_CHUNK + 100 &&
		       !strcmp(nl + 32, "stdout F after\n"),
		   "CRI format: its pieces merged into one F line");
	}
	free(s);
	free(want);
	free(big);
}

static int to_buf(const struct crilog_line *ln, void *ud)
{
	crilog_format_line(ud, CRILOG_CRI, ln);
	return 0;
}

/* Without join, every record is a line of its own, as a follower sends. */
static void test_reader_stream(void)
{
	struct crilog_reader r;
	struct buf b;
	const char *in = "2023-11-14T22:13:20.000000001Z stdout P ab\n"
			 "2023-11-14T22:13:20.000000002Z stdout F cd\n"
			 "2023-11-14T22:13:20.000000003Z stderr F e";

	buf_init(&b, 0);
	crilog_reader_init(&r, false, to_buf, &b);
	/* Byte by byte: records wait for their newline. */
	for (size_t i = 0; i < strlen(in); i++)
		crilog_reader_feed(&r, in + i, 1);
	is_str(b.data,
	       "2023-11-14T22:13:20.000000001Z stdout P ab\n"
	       "2023-11-14T22:13:20.000000002Z stdout F cd\n",
	       "unjoined: records as they come, the cut one held back");
	crilog_reader_next_file(&r);
	crilog_reader_feed(&r, "\n", 1);
	crilog_reader_finish(&r);
	is_str(b.data,
	       "2023-11-14T22:13:20.000000001Z stdout P ab\n"
	       "2023-11-14T22:13:20.000000002Z stdout F cd\n",
	       "a record cut by the end of a file is dropped");
	crilog_reader_free(&r);
	buf_free(&b);
}

static void test_link(void)
{
	char *d = path_of("containers"), *log = path_of("link.log");
	char *name = crilog_link_name(d, "ns1_web", "app", "cell/x/app-1");
	char *again = crilog_link_name(d, "ns1_web", "app", "cell/x/app-1");
	char *other = crilog_link_name(d, "ns1_web", "app", "cell/x/app-2");
	char *dangling = xasprintf("%s/web_ns1_app-old.log", d);
	char *foreign = xasprintf("%s/db_ns1_x-old.log", d);
	struct cerr e = {0};
	char got[4096];
	ssize_t n;

	ok(name && !strncmp(name + strlen(d), "/web_ns1_app-", 13) &&
	       strlen(name) == strlen(d) + 13 + 64 + 4 &&
	       !strcmp(name, again) && strcmp(name, other),
	   "link name: <pod>_<ns>_<unit>-<64 hex>.log, one per run (%s)", name);
	fs_mkdir_p(d, 0755, &e);
	ok(symlink("/nonexistent/x", dangling) == 0 &&
	       symlink("/nonexistent/y", foreign) == 0,
	   "two dangling links planted");
	ok(crilog_link(log, name, &e) == 0, "link made (%s)", e.msg);
	n = readlink(name, got, sizeof(got) - 1);
	ok(n > 0 && (got[n] = 0, !strcmp(got, log)), "it points at the log");
	ok(crilog_link(log, name, &e) == 0, "made again: replaced");
	ok(access(dangling, F_OK) < 0 && readlink(dangling, got, 8) < 0,
	   "this pod's dangling links are removed");
	ok(readlink(foreign, got, 8) > 0, "another pod's are left alone");
	free(d);
	free(log);
	free(name);
	free(again);
	free(other);
	free(dangling);
	free(foreign);
}

/* ---- a follower across a rotation under way (agent/api/logread.c) ---- */

static void put_rec(const char *name, const char *text)
{
	char *p = path_of(name);
	int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	char *rec =
	    xasprintf("2026-11-27T10:00:00.000000000Z stdout F %s\n", text);

	if (fd < 0 || write(fd, rec, strlen(rec)) != (ssize_t)strlen(rec))
		printf("# write %s: %m\n", p);
	if (fd >= 0)
		close(fd);
	free(rec);
	free(p);
}

static void mv(const char *from, const char *to)
{
	char *a = path_of(from), *b = path_of(to);

	if (rename(a, b) < 0)
		printf("# rename %s: %m\n", a);
	free(a);
	free(b);
}

static int to_text(void *ud, int stream, const char *p, size_t n)
{
	struct cerr e = {0};

	(void)stream;
	return buf_append(ud, p, n, &e);
}

/* The writer's last step of a rotation, a moment after the follower found
 * path.1 missing: the current file becomes f.log.1, a new one holds "d". */
static void *finish_rotation(void *arg)
{
	(void)arg;
	nanosleep(&(struct timespec){0, 10000000}, NULL);
	mv("f.log", "f.log.1");
	put_rec("f.log", "d");
	return NULL;
}

/* A follower that catches a rotation half done (path.1 renamed to path.2,
 * the current file not yet to path.1) waits for it rather than losing the
 * file that was path.1, and reads the file it follows next only once. */
static void test_follow_rotation_under_way(void)
{
	char *p = path_of("f.log");
	struct cerr e = {0};
	struct logtail *t;
	struct buf b;
	pthread_t th;

	put_rec("f.log", "a");
	t = logtail_open(p, false, &e);
	ok(t != NULL, "logtail_open (%s)", e.msg);
	if (!t) {
		free(p);
		return;
	}
	buf_init(&b, 0);
	put_rec("f.log", "a2");
	mv("f.log", "f.log.1"); /* rotation 1: "b" in the new file */
	put_rec("f.log", "b");
	mv("f.log.1", "f.log.2"); /* rotation 2: "c" in the new file */
	mv("f.log", "f.log.1");
	put_rec("f.log", "c");
	mv("f.log.2", "f.log.3"); /* rotation 3, under way */
	mv("f.log.1", "f.log.2");
	pthread_create(&th, NULL, finish_rotation, NULL);
	/* Up to 2 s for the writer thread on a loaded machine. */
	for (int i = 0;
	     i < 400 && !memmem(b.data ? b.data : "", b.len, "d\n", 2); i++) {
		if (logtail_read(t, to_text, &b, &e) < 0) {
			printf("# logtail_read: %s\n", e.msg);
			break;
		}
		nanosleep(&(struct timespec){0, 5000000}, NULL);
	}
	pthread_join(th, NULL);
	for (size_t i = 0; i < b.len; i++) /* one line for the TAP output */
		if (b.data[i] == '\n')
			b.data[i] = '|';
	ok(b.len == 9 && !memcmp(b.data, "a2|b|c|d|", 9),
	   "a follower across a rotation under way: every line once (%.*s)",
	   (int)b.len, b.data ? b.data : "");
	buf_free(&b);
	logtail_free(t);
	free(p);
}

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_time();
	test_writer_format();
	test_writer_partial();
	test_writer_short_write();
	test_writer_long();
	test_rotation();
	test_reader();
	test_tail();
	test_tail_rotated_and_big();
	test_rotation_many();
	test_line_across_rotation();
	test_reader_stream();
	test_link();
	test_follow_rotation_under_way();
	{
		struct cerr e = {0};
		fs_rm_rf(dir, &e);
	}
	return tap_done();
}
