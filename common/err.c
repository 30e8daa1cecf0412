// SPDX-License-Identifier: Apache-2.0
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void vset(struct cerr *e, int code, const char *fmt, va_list ap)
{
	e->code = code ? code : EIO;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
}

int cerr_set(struct cerr *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vset(e, code, fmt, ap);
	va_end(ap);
	return -1;
}

int cerr_sys(struct cerr *e, const char *fmt, ...)
{
	int saved = errno;
	size_t n;
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vset(e, saved, fmt, ap);
	va_end(ap);
	n = strlen(e->msg);
	snprintf(e->msg + n, sizeof(e->msg) - n, ": %s", strerror(saved));
	errno = saved;
	return -1;
}

int cerr_prefix(struct cerr *e, const char *fmt, ...)
{
	char head[CERR_MSG_MAX], old[CERR_MSG_MAX];
	va_list ap;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	snprintf(e->msg, sizeof(e->msg), "%s: %s", head, old);
	if (!e->code)
		e->code = EIO;
	return -1;
}

void cerr_clear(struct cerr *e)
{
	if (!e)
		return;
	e->code = 0;
	e->msg[0] = '\0';
}
