// SPDX-License-Identifier: Apache-2.0
/* Small helpers used everywhere: allocation that aborts on exhaustion (the
 * house rule: out-of-memory aborts), string builders, number parsing. */
#ifndef CELL_UTIL_H
#define CELL_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "err.h"

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* A copy of n bytes (which may hold NULs) and a NUL after them. */
void *xmemdup(const void *p, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *xvasprintf(const char *fmt, va_list ap)
    __attribute__((format(printf, 1, 0)));

bool str_has_prefix(const char *s, const char *prefix);
bool str_has_suffix(const char *s, const char *suffix);
/* Free a NULL-terminated array of strings and the array itself. */
void strv_free(char **v);
size_t strv_len(char *const *v);
/* A deep copy of a NULL-terminated vector (NULL stays NULL). */
char **strv_dup(char *const *v);

/* Parse a whole decimal string into [min, max]; no trailing junk. */
int parse_int64(const char *s, int64_t min, int64_t max, int64_t *out,
		struct cerr *e);

/* Monotonic clock in nanoseconds. */
uint64_t now_ns(void);
/* Wall clock (CLOCK_REALTIME) in nanoseconds since the epoch. */
int64_t wall_ns(void);
/* 64 random bits for unique names (never blocks: before the kernel's pool
 * is ready, the clocks and the pid). Not for keys. */
uint64_t rand_u64(void);

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A vector that grows by doubling; n and cap are size_t fields. */
#define VEC_PUSH(arr, n, cap)                                                  \
	({                                                                     \
		if ((n) == (cap)) {                                            \
			(cap) = (cap) ? 2 * (cap) : 4;                         \
			(arr) = xrealloc((arr), (cap) * sizeof(*(arr)));       \
		}                                                              \
		memset(&(arr)[(n)], 0, sizeof(*(arr)));                        \
		&(arr)[(n)++];                                                 \
	})

#endif
