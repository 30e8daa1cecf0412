// SPDX-License-Identifier: Apache-2.0
/* See lazystats.h. */
#include "lazystats.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* The required keys first, then the optional ones. */
static const char *const keys[] = {
    "pid",	 "demand_bytes", "background_bytes", "demand_fetches",
    "demand_ns", "refused",	 "failed_reads",     "last_failure"};
#define N_KEYS (sizeof(keys) / sizeof(*keys))
#define N_REQUIRED 6
#define K_FAILED 6
#define K_LAST 7

static int parse_num(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 19 || (n > 1 && s[0] == '0'))
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v > (uint64_t)INT64_MAX)
		return -1;
	*out = v;
	return 0;
}

/* last_failure's text: printable ASCII, not empty, not led by a space. */
static int parse_text(const char *s, size_t n)
{
	if (n == 0 || n >= LAZYSTATS_FAILURE_MAX || s[0] == ' ')
		return -1;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e)
			return -1;
	return 0;
}

int lazystats_parse(const char *buf, size_t n, struct lazystats *out,
		    uint64_t *pid, char *failure)
{
	uint64_t v[N_KEYS] = {0};
	bool seen[N_KEYS] = {0};
	const char *text = NULL;
	size_t text_len = 0, pos = 0;

	if (n > LAZYSTATS_FILE_MAX)
		return -1;
	while (pos < n) {
		const char *line = buf + pos, *nl, *sp, *val;
		size_t len, k, klen, vlen;

		nl = memchr(line, '\n', n - pos);
		if (!nl)
			return -1;
		len = (size_t)(nl - line);
		sp = memchr(line, ' ', len);
		if (!sp)
			return -1;
		klen = (size_t)(sp - line);
		val = sp + 1;
		vlen = len - klen - 1;
		for (k = 0; k < N_KEYS; k++)
			if (klen == strlen(keys[k]) &&
			    !memcmp(line, keys[k], klen))
				break;
		if (k == N_KEYS || seen[k])
			return -1;
		if (k == K_LAST) {
			if (parse_text(val, vlen) < 0)
				return -1;
			text = val;
			text_len = vlen;
		} else if (parse_num(val, vlen, &v[k]) < 0) {
			return -1;
		}
		seen[k] = true;
		pos += len + 1;
	}
	for (size_t k = 0; k < N_REQUIRED; k++)
		if (!seen[k])
			return -1;
	if (text && v[K_FAILED] == 0)
		return -1; /* a cause of no failure */
	*pid = v[0];
	out->demand_bytes = v[1];
	out->background_bytes = v[2];
	out->demand_fetches = v[3];
	out->demand_ns = v[4];
	out->refused = v[5];
	out->failed_reads = v[K_FAILED];
	if (failure) {
		memcpy(failure, text ? text : "", text_len);
		failure[text_len] = '\0';
	}
	return 0;
}

/* ---- the scrape's table ---- */

struct layer_row {
	char name[80]; /* "<algo>-<hex>" */
	uint64_t pid;
	struct lazystats last;
	bool seen; /* in this scan */
};

static struct {
	pthread_mutex_t mu;
	char *dir;
	struct layer_row rows[LAZYSTATS_LAYERS_MAX];
	size_t n_rows;
	struct lazystats retired; /* layers gone, servers replaced */
} L = {.mu = PTHREAD_MUTEX_INITIALIZER};

void lazystats_set_dir(const char *image_cache)
{
	pthread_mutex_lock(&L.mu);
	free(L.dir);
	L.dir = image_cache ? xasprintf("%s/lazy", image_cache) : NULL;
	pthread_mutex_unlock(&L.mu);
}

static void add(struct lazystats *to, const struct lazystats *s)
{
	to->demand_bytes += s->demand_bytes;
	to->background_bytes += s->background_bytes;
	to->demand_fetches += s->demand_fetches;
	to->demand_ns += s->demand_ns;
	to->refused += s->refused;
	to->failed_reads += s->failed_reads;
}

/* One layer's file: 0 parsed, -1 not there or refused. Never follows a
 * link, never blocks on a FIFO, never reads more than the cap. */
static int read_one(int dirfd, const char *name, struct lazystats *st,
		    uint64_t *pid, char *failure)
{
	char path[128], buf[LAZYSTATS_FILE_MAX + 1];
	struct stat sb;
	ssize_t n;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s/stats", name) >=
	    sizeof(path))
		return -1;
	fd =
	    openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) ||
	    sb.st_size > LAZYSTATS_FILE_MAX) {
		close(fd);
		return -1;
	}
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0 || n > LAZYSTATS_FILE_MAX)
		return -1;
	return lazystats_parse(buf, (size_t)n, st, pid, failure);
}

static struct layer_row *row_of(const char *name)
{
	for (size_t i = 0; i < L.n_rows; i++)
		if (!strcmp(L.rows[i].name, name))
			return &L.rows[i];
	if (L.n_rows == LAZYSTATS_LAYERS_MAX)
		return NULL;
	memset(&L.rows[L.n_rows], 0, sizeof(L.rows[0]));
	snprintf(L.rows[L.n_rows].name, sizeof(L.rows[0].name), "%s", name);
	return &L.rows[L.n_rows++];
}

static bool counts_less(const struct lazystats *a, const struct lazystats *b)
{
	return a->demand_bytes < b->demand_bytes ||
	       a->background_bytes < b->background_bytes ||
	       a->demand_fetches < b->demand_fetches ||
	       a->demand_ns < b->demand_ns || a->refused < b->refused ||
	       a->failed_reads < b->failed_reads;
}

static void scan(void)
{
	DIR *d;
	struct dirent *de;
	size_t looked = 0;
	int fd;

	for (size_t i = 0; i < L.n_rows; i++)
		L.rows[i].seen = false;
	if (!L.dir ||
	    (fd = open(L.dir,
		       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    !(d = fdopendir(fd)))
		goto retire;
	while ((de = readdir(d)) && looked < LAZYSTATS_LAYERS_MAX) {
		struct lazystats st;
		struct layer_row *r;
		uint64_t pid;

		if (de->d_name[0] == '.' ||
		    strlen(de->d_name) >= sizeof(L.rows[0].name))
			continue;
		looked++;
		if (read_one(dirfd(d), de->d_name, &st, &pid, NULL) < 0) {
			/* Not written yet, or refused: what it said last
			 * stands until its directory goes. */
			for (size_t i = 0; i < L.n_rows; i++)
				if (!strcmp(L.rows[i].name, de->d_name))
					L.rows[i].seen = true;
			continue;
		}
		if (!(r = row_of(de->d_name)))
			continue;
		/* A new server counts from 0: what the old one counted is
		 * kept. */
		if (r->pid && (r->pid != pid || counts_less(&st, &r->last)))
			add(&L.retired, &r->last);
		r->pid = pid;
		r->last = st;
		r->seen = true;
	}
	closedir(d);
retire:
	for (size_t i = 0; i < L.n_rows;) {
		if (L.rows[i].seen) {
			i++;
			continue;
		}
		add(&L.retired, &L.rows[i].last);
		L.rows[i] = L.rows[--L.n_rows];
	}
}

void lazystats_totals(struct lazystats *out)
{
	pthread_mutex_lock(&L.mu);
	scan();
	*out = L.retired;
	for (size_t i = 0; i < L.n_rows; i++)
		add(out, &L.rows[i].last);
	pthread_mutex_unlock(&L.mu);
}

int lazystats_layer(const char *name, struct lazystats *st, char *failure)
{
	uint64_t pid;
	int fd, r = -1;

	if (!name[0] || name[0] == '.' || strchr(name, '/'))
		return -1;
	pthread_mutex_lock(&L.mu);
	if (L.dir && (fd = open(L.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					   O_CLOEXEC)) >= 0) {
		r = read_one(fd, name, st, &pid, failure);
		close(fd);
	}
	pthread_mutex_unlock(&L.mu);
	return r;
}
