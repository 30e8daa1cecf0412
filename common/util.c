// SPDX-License-Identifier: Apache-2.0
#include "util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static void oom(void)
{
	static const char msg[] = "fatal: out of memory\n";
	ssize_t r = write(2, msg, sizeof(msg) - 1);
	(void)r;
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		oom();
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		oom();
	return p;
}

void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p)
		oom();
	return p;
}

char *xstrndup(const char *s, size_t n)
{
	char *p = strndup(s, n);
	if (!p)
		oom();
	return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
	char *p;

	if (vasprintf(&p, fmt, ap) < 0)
		oom();
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	char *p;
	va_list ap;

	va_start(ap, fmt);
	p = xvasprintf(fmt, ap);
	va_end(ap);
	return p;
}

bool str_has_prefix(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

bool str_has_suffix(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && memcmp(s + a - b, suffix, b) == 0;
}

void strv_free(char **v)
{
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

size_t strv_len(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

int parse_int64(const char *s, int64_t min, int64_t max, int64_t *out,
		struct cerr *e)
{
	char *end;
	long long v;

	if (!s || !*s)
		return cerr_set(e, EINVAL, "empty number");
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end)
		return cerr_set(e, EINVAL, "not a number: '%s'", s);
	if (v < min || v > max)
		return cerr_set(e, ERANGE, "%s is out of range [%lld, %lld]", s,
				(long long)min, (long long)max);
	*out = v;
	return 0;
}

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t wall_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

uint64_t rand_u64(void)
{
	uint64_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == sizeof(v))
		return v;
	return (uint64_t)wall_ns() ^ (now_ns() << 17) ^
	       ((uint64_t)getpid() << 40);
}

void *xmemdup(const void *p, size_t n)
{
	char *q = xmalloc(n + 1);

	if (n)
		memcpy(q, p, n);
	q[n] = '\0';
	return q;
}

char **strv_dup(char *const *v)
{
	size_t n = strv_len(v);
	char **out;

	if (!v)
		return NULL;
	out = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		out[i] = xstrdup(v[i]);
	return out;
}
