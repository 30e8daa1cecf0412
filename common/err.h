// SPDX-License-Identifier: Apache-2.0
/* Error values: an errno-style code plus a human message, with context
 * prepended at module boundaries ("pull busybox: fetch blob …: connect …"). */
#ifndef CELL_ERR_H
#define CELL_ERR_H

#include <stddef.h>

#define CERR_MSG_MAX 1024

struct cerr {
	int code; /* errno value; 0 when no error is set */
	char msg[CERR_MSG_MAX];
};

/* Each setter returns -1 so that callers can write `return cerr_set(...)`. */
int cerr_set(struct cerr *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like cerr_set with code = errno, appending ": strerror(errno)". */
int cerr_sys(struct cerr *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepend "context: " to the message already in e. */
int cerr_prefix(struct cerr *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cerr_clear(struct cerr *e);

#endif
