// SPDX-License-Identifier: Apache-2.0
/* A tiny TAP producer for the C unit tests: `ok` lines, a plan at the end,
 * exit status 1 when anything failed. */
#ifndef CELL_TAP_H
#define CELL_TAP_H

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                          \
	do {                                                                   \
		int _c = !!(cond);                                             \
		tap_n++;                                                       \
		if (!_c)                                                       \
			tap_failed++;                                          \
		printf("%sok %d - ", _c ? "" : "not ", tap_n);                 \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
		if (!_c)                                                       \
			printf("#   failed at %s:%d: %s\n", __FILE__,          \
			       __LINE__, #cond);                               \
	} while (0)

#define is_str(got, want, ...)                                                 \
	do {                                                                   \
		const char *_g = (got), *_w = (want);                          \
		int _same = (_g && _w) ? !strcmp(_g, _w) : _g == _w;           \
		ok(_same, __VA_ARGS__);                                        \
		if (!_same)                                                    \
			printf("#   got '%s', want '%s'\n",                    \
			       _g ? _g : "(null)", _w ? _w : "(null)");        \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	fflush(stdout);
	return tap_failed ? 1 : 0;
}

#endif
