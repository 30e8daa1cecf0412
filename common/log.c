#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *log_prog = "cell";
static enum log_level log_level = LOG_WARN;
static int log_fd = 2;

void log_init(const char *prog, enum log_level level)
{
	log_prog = prog;
	log_level = level;
}

void log_set_fd(int fd)
{
	log_fd = fd;
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
	if (write(log_fd, line, (size_t)n) < 0)
		return;
}
