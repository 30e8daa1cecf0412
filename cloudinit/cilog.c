// SPDX-License-Identifier: Apache-2.0
/* cell-cloudinit's log: each line to stderr (log.h) and, once the log file
 * is open, to the log file (--log-file) in cloud-init's format. Below every
 * other file of cloudinit/, so that none of them reaches up into the module
 * runner only to log. */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "ci-internal.h"
#include "log.h"

static int log_file = -1;

void ci_log_set_file(int fd)
{
	log_file = fd;
}

void ci_log(int level, const char *fmt, ...)
{
	static const char *const names[] = {"error", "warning", "info",
					    "debug"};
	char msg[2048], line[2200], when[32];
	time_t now = time(NULL);
	struct tm tm;
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg((enum log_level)level, "%s", msg);
	/* The file keeps info even when stderr is quieter. */
	if (log_file < 0 || level < 0 || level > LOG_DEBUG ||
	    (level > LOG_INFO && level > (int)log_get_level()))
		return;
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	n = snprintf(line, sizeof(line), "%s cell-cloudinit: %s: %s\n", when,
		     names[level], msg);
	if (n > (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 1;
	if (write(log_file, line, (size_t)n) < 0)
		return;
}
