// SPDX-License-Identifier: Apache-2.0
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fsutil.h"
#include "util.h"

static const char *log_prog = "cell";
static enum log_level log_level = LOG_WARN;
static int log_fd = 2;
static int log_fd2 = -1;

/* The file sink. Its lines are written under the lock, so that a rotation
 * never interleaves with a write. */
static struct {
	pthread_mutex_t mu;
	char *path;
	int fd;
	int64_t size, max_bytes;
	int max_files;
} file = {PTHREAD_MUTEX_INITIALIZER, NULL, -1, 0, 0, 2};

void log_init(const char *prog, enum log_level level)
{
	log_prog = prog;
	log_level = level;
}

void log_set_fd(int fd)
{
	log_fd = fd;
}

void log_add_fd(int fd)
{
	log_fd2 = fd;
}

enum log_level log_get_level(void)
{
	return log_level;
}

const char *log_get_prog(void)
{
	return log_prog;
}

int log_get_fd(void)
{
	return log_fd;
}

static int open_append(const char *path)
{
	return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY,
		    0640);
}

int log_add_file(const char *path, int64_t max_bytes, int max_files,
		 struct cerr *e)
{
	char *dup = xstrdup(path);
	struct stat st;
	int fd, rc = 0;

	if (fs_mkdir_p(dirname(dup), 0755, e) < 0) {
		free(dup);
		return cerr_prefix(e, "log file %s", path);
	}
	free(dup);
	fd = open_append(path);
	if (fd < 0)
		return cerr_sys(e, "log file %s", path);
	pthread_mutex_lock(&file.mu);
	if (file.fd >= 0)
		close(file.fd);
	free(file.path);
	file.path = xstrdup(path);
	file.fd = fd;
	file.size = fstat(fd, &st) == 0 ? st.st_size : 0;
	file.max_bytes = max_bytes;
	file.max_files = max_files < 2 ? 2 : max_files;
	pthread_mutex_unlock(&file.mu);
	return rc;
}

void log_close_file(void)
{
	pthread_mutex_lock(&file.mu);
	if (file.fd >= 0)
		close(file.fd);
	free(file.path);
	file.path = NULL;
	file.fd = -1;
	pthread_mutex_unlock(&file.mu);
}

/* Under the lock. A failed rename keeps writing to the current file: a log
 * that cannot rotate must not stop the program or lose its lines. */
static void rotate(void)
{
	char from[4096], to[4096];
	int fd;

	for (int k = file.max_files - 1; k >= 1; k--) {
		if (k == 1)
			snprintf(from, sizeof(from), "%s", file.path);
		else
			snprintf(from, sizeof(from), "%s.%d", file.path, k - 1);
		snprintf(to, sizeof(to), "%s.%d", file.path, k);
		if (rename(from, to) < 0 && errno != ENOENT && k == 1)
			return;
	}
	fd = open_append(file.path);
	if (fd < 0)
		return;
	close(file.fd);
	file.fd = fd;
	file.size = 0;
}

static void write_file(const char *line, size_t n)
{
	char ts[40];
	int64_t ns = wall_ns();
	time_t sec = (time_t)(ns / 1000000000);
	struct tm tm;
	size_t tl;

	gmtime_r(&sec, &tm);
	tl = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	tl += (size_t)snprintf(ts + tl, sizeof(ts) - tl, ".%06dZ ",
			       (int)(ns % 1000000000 / 1000));
	pthread_mutex_lock(&file.mu);
	if (file.fd >= 0) {
		if (file.max_bytes > 0 && file.size > 0 &&
		    file.size + (int64_t)(tl + n) > file.max_bytes)
			rotate();
		/* One write per line, as for the fds. */
		char buf[2200];
		memcpy(buf, ts, tl);
		memcpy(buf + tl, line, n);
		if (write(file.fd, buf, tl + n) > 0)
			file.size += (int64_t)(tl + n);
	}
	pthread_mutex_unlock(&file.mu);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
	static const char *names[] = {"error", "warning", "info", "debug"};
	char line[2048];
	int n;
	va_list ap;

	if (level > log_level)
		return;
	n = snprintf(line, sizeof(line), "%s: %s: ", log_prog, names[level]);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(line))
		vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	n = (int)strnlen(line, sizeof(line) - 2);
	line[n++] = '\n';
	/* One write() per line keeps lines whole when threads log at once. */
	if (write(log_fd, line, (size_t)n) < 0) {
		/* Nowhere to say so. */
	}
	if (log_fd2 >= 0 && write(log_fd2, line, (size_t)n) < 0) {
		/* Nowhere to say so. */
	}
	write_file(line, (size_t)n);
}
