// SPDX-License-Identifier: Apache-2.0
#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Fill e (when there is one) from fmt; "': strerror(saved)'" after it
 * when saved is not 0. */
static void vset(struct cerr *e, int code, int saved, const char *fmt,
		 va_list ap)
{
	size_t n;

	if (!e)
		return;
	e->code = code ? code : EIO;
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	n = strlen(e->msg);
	if (saved)
		snprintf(e->msg + n, sizeof(e->msg) - n, ": %s",
			 strerror(saved));
}

int cerr_set(struct cerr *e, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vset(e, code, 0, fmt, ap);
	va_end(ap);
	return -1;
}

int cerr_sys(struct cerr *e, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	vset(e, saved, saved, fmt, ap);
	va_end(ap);
	errno = saved;
	return -1;
}

/* "context: old". When that is too long for the buffer, its middle gives
 * way: the outermost context and the innermost cause (the end of the
 * chain, the one that says what went wrong) are kept. */
int cerr_prefix(struct cerr *e, const char *fmt, ...)
{
	static const char cut[] = "...";
	const size_t max = sizeof(e->msg) - 1, front = max / 4;
	char head[CERR_MSG_MAX], all[2 * CERR_MSG_MAX];
	va_list ap;
	size_t n;

	if (!e)
		return -1;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	snprintf(all, sizeof(all), "%s: %s", head, e->msg);
	n = strlen(all);
	if (n <= max) {
		memcpy(e->msg, all, n + 1);
	} else {
		size_t back = max - front - strlen(cut);
		memcpy(e->msg, all, front);
		memcpy(e->msg + front, cut, strlen(cut));
		memcpy(e->msg + front + strlen(cut), all + n - back, back + 1);
	}
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
