// SPDX-License-Identifier: Apache-2.0
/* Logging. Libraries log only through here, and only at debug/info level for
 * diagnostics; errors travel as struct cerr. The main() of each binary picks
 * the level and the sinks: stderr (or another fd) by default, plus at most
 * one second fd and one size-rotated file. */
#ifndef CELL_LOG_H
#define CELL_LOG_H

#include <stdint.h>

#include "err.h"

enum log_level { LOG_ERROR = 0, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_init(const char *prog, enum log_level level);
void log_set_fd(int fd);
enum log_level log_get_level(void);
const char *log_get_prog(void);
int log_get_fd(void);
/* A second sink: every line is also written to fd (-1: none). */
void log_add_fd(int fd);
/* A file sink as well: lines with an RFC 3339 UTC time in front, appended
 * to path (its directory is made); before a line would take it past
 * max_bytes (> 0) it is rotated: path.K → path.K+1, path → path.1, keeping
 * max_files files in all (at least 2). Replaces an earlier file sink. */
int log_add_file(const char *path, int64_t max_bytes, int max_files,
		 struct cerr *e);
/* Close the file sink (lines go to the fds only). */
void log_close_file(void);
void log_msg(enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
