// SPDX-License-Identifier: Apache-2.0
/* resourceUsage collection (see stats.h). The cgroup, /proc and statvfs
 * readers are deliberately forgiving of absence and strict about form: a
 * kernel without a counter, or a unit whose cgroup is already gone, costs
 * only its own keys, while text that is not a plain decimal is never
 * half-parsed into a wrong number. */
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "util.h"

#define STATS_FILE_MAX (64u << 10)
/* net/dev grows by ~130 bytes per interface; hosts with many veths exist. */
#define STATS_NETDEV_MAX (1u << 20)
/* v1 reports "no limit" as PAGE_COUNTER_MAX pages (9223372036854771712 on
 * 4 KiB pages, less on larger pages); no real limit comes near 4 EiB. */
#define V1_UNLIMITED (INT64_C(1) << 62)

enum { U_CPU, U_USAGE, U_WS, U_AVAIL, U_RSS, U_PGFAULT, U_PGMAJ, U_N };
static const char *const unit_keys[U_N] = {
    "cpuUsage",	 "memoryUsage",	     "memoryWorkingSet",      "memoryAvailable",
    "memoryRSS", "memoryPageFaults", "memoryMajorPageFaults",
};

struct kvlist {
	struct kv *v;
	size_t n, cap;
};

static void kv_add(struct kvlist *l, char *name, char *value)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 32;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n].name = name;
	l->v[l->n].value = value;
	l->n++;
}

static void add_int(struct kvlist *l, const char *name, int64_t v)
{
	kv_add(l, xstrdup(name), xasprintf("%lld", (long long)v));
}

static void add_pct(struct kvlist *l, const char *name, double v)
{
	kv_add(l, xstrdup(name), xasprintf("%.2f", v));
}

/* A whole token of decimal digits only: parse_int64 alone would take
 * leading blanks and signs. -1 when it is anything else. */
static int64_t parse_count(const char *s, size_t len)
{
	char tmp[32];
	int64_t v;

	if (len == 0 || len >= sizeof(tmp) || strspn(s, "0123456789") < len)
		return -1;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	if (parse_int64(tmp, 0, INT64_MAX, &v, NULL) < 0)
		return -1;
	return v;
}

/* Read a file under a cap into b (NUL-terminated); -1 when it is missing,
 * unreadable or too large. */
static int read_capped(const char *path, size_t max, struct buf *b)
{
	struct cerr e = {0};

	buf_init(b, max);
	if (fs_read_file(path, b, &e) < 0) {
		buf_free(b);
		return -1;
	}
	if (!b->data) /* empty file: keep callers' string handling simple */
		buf_append(b, "", 0, NULL);
	return b->data ? 0 : -1;
}

static char *join(const char *dir, const char *name)
{
	return xasprintf("%s/%s", dir, name);
}

static bool dir_has(const char *dir, const char *name)
{
	cleanup_free char *p = join(dir, name);

	return fs_exists(p);
}

/* A one-number file ("123\n"); -1 when missing or malformed. *is_max is
 * set for v2's literal "max" (no limit). */
static int64_t read_single(const char *dir, const char *name, bool *is_max)
{
	cleanup_free char *p = join(dir, name);
	struct buf b;
	size_t len;
	int64_t v = -1;

	if (is_max)
		*is_max = false;
	if (read_capped(p, STATS_FILE_MAX, &b) < 0)
		return -1;
	len = b.len;
	if (len && b.data[len - 1] == '\n')
		len--;
	if (is_max && len == 3 && !memcmp(b.data, "max", 3))
		*is_max = true;
	else
		v = parse_count(b.data, len);
	buf_free(&b);
	return v;
}

/* The value of `key` in a "key value" per line file (cpu.stat,
 * memory.stat); -1 when absent or not a plain count. */
static int64_t keyed_value(const struct buf *b, const char *key)
{
	size_t klen = strlen(key);
	const char *p = b->data, *end = b->data + b->len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		if ((size_t)(eol - p) > klen && !memcmp(p, key, klen) &&
		    p[klen] == ' ')
			return parse_count(p + klen + 1,
					   (size_t)(eol - p - klen - 1));
		p = eol + 1;
	}
	return -1;
}

static int read_keyed(const char *dir, const char *name, struct buf *b)
{
	cleanup_free char *p = join(dir, name);

	return read_capped(p, STATS_FILE_MAX, b);
}

/* Cumulative CPU ns. v1 cpuacct.usage first: on v1 a cpu.stat exists too
 * (throttling counters) but has no usage_usec; v2's cpu.stat always has
 * it, with or without the cpu controller enabled. */
static int64_t unit_cpu_ns(char *const *dirs)
{
	struct buf b;
	int64_t v;

	for (size_t i = 0; dirs[i]; i++)
		if (dir_has(dirs[i], "cpuacct.usage"))
			return read_single(dirs[i], "cpuacct.usage", NULL);
	for (size_t i = 0; dirs[i]; i++) {
		if (read_keyed(dirs[i], "cpu.stat", &b) < 0)
			continue;
		v = keyed_value(&b, "usage_usec");
		buf_free(&b);
		if (v >= 0)
			return v <= INT64_MAX / 1000 ? v * 1000 : -1;
	}
	return -1;
}

/* The directory holding the memory controller's files, and whether it is
 * a v2 one (v2 cgroups all have cgroup.controllers; on hybrid hosts the
 * unified directory has no memory files, so it is never picked). */
static const char *memory_dir(char *const *dirs, bool *v2)
{
	static const char *const marks[] = {"memory.stat", "memory.current",
					    "memory.usage_in_bytes"};

	for (size_t i = 0; dirs[i]; i++)
		for (size_t j = 0; j < ARRAY_SIZE(marks); j++)
			if (dir_has(dirs[i], marks[j])) {
				*v2 = dir_has(dirs[i], "cgroup.controllers");
				return dirs[i];
			}
	return NULL;
}

/* v1 counters of the whole subtree (total_*), falling back to the cgroup's
 * own: usage_in_bytes is hierarchical, so its companions should be too. */
static int64_t v1_stat(const struct buf *b, const char *key)
{
	cleanup_free char *total = xasprintf("total_%s", key);
	int64_t v = keyed_value(b, total);

	return v >= 0 ? v : keyed_value(b, key);
}

static void unit_memory(char *const *dirs, int64_t *v)
{
	bool v2 = false, is_max = false;
	const char *dir = memory_dir(dirs, &v2);
	struct buf b;
	int64_t inactive = -1, limit;

	if (!dir)
		return;
	v[U_USAGE] = read_single(
	    dir, v2 ? "memory.current" : "memory.usage_in_bytes", NULL);
	if (read_keyed(dir, "memory.stat", &b) == 0) {
		inactive = v2 ? keyed_value(&b, "inactive_file")
			      : keyed_value(&b, "total_inactive_file");
		v[U_RSS] = v2 ? keyed_value(&b, "anon") : v1_stat(&b, "rss");
		v[U_PGFAULT] =
		    v2 ? keyed_value(&b, "pgfault") : v1_stat(&b, "pgfault");
		v[U_PGMAJ] = v2 ? keyed_value(&b, "pgmajfault")
				: v1_stat(&b, "pgmajfault");
		buf_free(&b);
	}
	/* cAdvisor's working set: usage less inactive file pages, >= 0. */
	if (v[U_USAGE] >= 0 && inactive >= 0)
		v[U_WS] = v[U_USAGE] > inactive ? v[U_USAGE] - inactive : 0;
	limit = read_single(dir, v2 ? "memory.max" : "memory.limit_in_bytes",
			    v2 ? &is_max : NULL);
	if (v[U_WS] >= 0 && limit >= 0 && !is_max && limit < V1_UNLIMITED)
		v[U_AVAIL] = limit > v[U_WS] ? limit - v[U_WS] : 0;
}

static void unit_sample(const struct usage_unit *u, int64_t *v)
{
	for (size_t k = 0; k < U_N; k++)
		v[k] = -1;
	if (!u->cgroup_dirs)
		return;
	v[U_CPU] = unit_cpu_ns(u->cgroup_dirs);
	unit_memory(u->cgroup_dirs, v);
}

void stats_unit_read(char *const *cgroup_dirs, struct stats_unit *out)
{
	struct usage_unit u = {.cgroup_dirs = cgroup_dirs};
	int64_t v[U_N];

	unit_sample(&u, v);
	out->cpu_ns = v[U_CPU];
	out->working_set = v[U_WS];
	out->rss = v[U_RSS];
}

void stats_unit_resolve(char *const *cgroup_dirs, struct stats_unit_src *src)
{
	const char *mem;

	*src = (struct stats_unit_src){.cpu_idx = -1, .mem_idx = -1};
	for (int i = 0; cgroup_dirs && cgroup_dirs[i] && src->cpu_idx < 0; i++)
		if (dir_has(cgroup_dirs[i], "cpuacct.usage")) {
			src->cpu_idx = i;
			src->cpu_v1 = true;
		}
	for (int i = 0; cgroup_dirs && cgroup_dirs[i] && src->cpu_idx < 0; i++)
		if (dir_has(cgroup_dirs[i], "cpu.stat") &&
		    dir_has(cgroup_dirs[i], "cgroup.controllers"))
			src->cpu_idx = i;
	mem = cgroup_dirs ? memory_dir(cgroup_dirs, &src->mem_v2) : NULL;
	for (int i = 0; mem && cgroup_dirs[i]; i++)
		if (cgroup_dirs[i] == mem)
			src->mem_idx = i;
}

/* name under dirfd, read whole (openat: no walk of the long cgroup path). */
static int read_capped_at(int dirfd, const char *name, struct buf *b)
{
	struct cerr e = {0};
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	int rc;

	buf_init(b, STATS_FILE_MAX);
	if (fd < 0)
		return -1;
	rc = fs_read_fd(fd, b, &e);
	close(fd);
	if (rc < 0 || !b->data) {
		buf_free(b);
		return -1;
	}
	return 0;
}

static int64_t read_single_at(int dirfd, const char *name)
{
	struct buf b;
	size_t len;
	int64_t v;

	if (read_capped_at(dirfd, name, &b) < 0)
		return -1;
	len = b.len;
	if (len && b.data[len - 1] == '\n')
		len--;
	v = parse_count(b.data, len);
	buf_free(&b);
	return v;
}

void stats_unit_read_at(int cpu_dirfd, int mem_dirfd,
			const struct stats_unit_src *src,
			struct stats_unit *out)
{
	struct buf b;
	int64_t usage, inactive = -1;
	bool v2 = src->mem_v2;

	*out = (struct stats_unit){-1, -1, -1};
	if (cpu_dirfd >= 0 && src->cpu_v1)
		out->cpu_ns = read_single_at(cpu_dirfd, "cpuacct.usage");
	else if (cpu_dirfd >= 0 &&
		 read_capped_at(cpu_dirfd, "cpu.stat", &b) == 0) {
		int64_t v = keyed_value(&b, "usage_usec");
		out->cpu_ns = v >= 0 && v <= INT64_MAX / 1000 ? v * 1000 : -1;
		buf_free(&b);
	}
	if (mem_dirfd < 0)
		return;
	usage = read_single_at(mem_dirfd,
			       v2 ? "memory.current" : "memory.usage_in_bytes");
	if (read_capped_at(mem_dirfd, "memory.stat", &b) == 0) {
		inactive = v2 ? keyed_value(&b, "inactive_file")
			      : keyed_value(&b, "total_inactive_file");
		out->rss = v2 ? keyed_value(&b, "anon") : v1_stat(&b, "rss");
		buf_free(&b);
	}
	if (usage >= 0 && inactive >= 0)
		out->working_set = usage > inactive ? usage - inactive : 0;
}

/* MemTotal in bytes from a meminfo text ("MemTotal:   16314928 kB"). */
static int64_t mem_total(const char *path)
{
	struct buf b;
	const char *p, *num;
	size_t len;
	int64_t kb = -1;

	if (read_capped(path, STATS_FILE_MAX, &b) < 0)
		return -1;
	p = b.data;
	if (!str_has_prefix(p, "MemTotal:")) {
		p = strstr(p, "\nMemTotal:");
		p = p ? p + 1 : NULL;
	}
	if (p) {
		num = p + strlen("MemTotal:");
		num += strspn(num, " \t");
		len = strspn(num, "0123456789");
		if (!strncmp(num + len, " kB\n", 4) ||
		    !strcmp(num + len, " kB"))
			kb = parse_count(num, len);
	}
	buf_free(&b);
	return kb >= 0 && kb <= INT64_MAX / 1024 ? kb * 1024 : -1;
}

enum { NET_RX, NET_RX_ERR, NET_TX, NET_TX_ERR, NET_N };

/* One "  eth0: rx-bytes rx-packets rx-errs ... tx-bytes tx-packets tx-errs
 * ..." line into add[]; false for loopback and anything malformed. */
static bool net_line(const char *p, const char *eol, int64_t *add)
{
	static const int col[NET_N] = {0, 2, 8, 10};
	const char *colon = memchr(p, ':', (size_t)(eol - p));
	const char *tok[11];
	size_t tlen[11], nt = 0;

	if (!colon)
		return false;
	p += strspn(p, " \t");
	if (colon - p == 2 && !memcmp(p, "lo", 2))
		return false;
	for (p = colon + 1; p < eol && nt < ARRAY_SIZE(tok);) {
		size_t n;

		while (p < eol && (*p == ' ' || *p == '\t'))
			p++;
		for (n = 0; p + n < eol && p[n] != ' ' && p[n] != '\t';)
			n++;
		if (!n)
			break;
		tok[nt] = p;
		tlen[nt++] = n;
		p += n;
	}
	if (nt < ARRAY_SIZE(tok))
		return false;
	for (size_t k = 0; k < NET_N; k++)
		if ((add[k] = parse_count(tok[col[k]], tlen[col[k]])) < 0)
			return false;
	return true;
}

/* Sums over the non-loopback interfaces; false when unreadable. */
static bool net_totals(const char *path, int64_t *sum)
{
	struct buf b;
	const char *p, *end;
	int64_t add[NET_N];

	if (read_capped(path, STATS_NETDEV_MAX, &b) < 0)
		return false;
	memset(sum, 0, NET_N * sizeof(*sum));
	for (p = b.data, end = b.data + b.len; p < end;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;

		if (net_line(p, eol, add))
			for (size_t k = 0; k < NET_N; k++)
				sum[k] = add[k] > INT64_MAX - sum[k]
					     ? INT64_MAX
					     : sum[k] + add[k];
		p = eol + 1;
	}
	buf_free(&b);
	return true;
}

static void add_net(struct kvlist *l, const char *path)
{
	static const char *const names[NET_N] = {"netRx", "netRxErrors",
						 "netTx", "netTxErrors"};
	int64_t sum[NET_N];

	if (!net_totals(path, sum))
		return;
	for (size_t k = 0; k < NET_N; k++)
		add_int(l, names[k], sum[k]);
}

static int64_t clamp64(unsigned long long v)
{
	return v > (unsigned long long)INT64_MAX ? INT64_MAX : (int64_t)v;
}

/* df's arithmetic: used = blocks - free; the percentage is of what
 * unprivileged writers can reach (used + available). */
static void add_fs(struct kvlist *l, const char *path)
{
	struct statvfs s;
	unsigned long long fr, used, avail;

	if (statvfs(path, &s) < 0)
		return;
	fr = s.f_frsize ? s.f_frsize : s.f_bsize;
	/* Some file systems report odd free counts; never wrap. */
	used = s.f_blocks > s.f_bfree
		   ? (unsigned long long)(s.f_blocks - s.f_bfree) * fr
		   : 0;
	avail = (unsigned long long)s.f_bavail * fr;
	add_pct(l, "disk",
		used + avail ? 100.0 * (double)used / (double)(used + avail)
			     : 0.0);
	add_int(l, "fsAvailable", clamp64(avail));
	add_int(l, "fsCapacity", clamp64((unsigned long long)s.f_blocks * fr));
	add_int(l, "fsUsed", clamp64(used));
	add_int(l, "fsInodesFree", clamp64(s.f_ffree));
	add_int(l, "fsInodes", clamp64(s.f_files));
	add_int(l, "fsInodesUsed",
		clamp64(s.f_files > s.f_ffree ? s.f_files - s.f_ffree : 0));
}

static int64_t sat_add(int64_t a, int64_t b)
{
	return b > INT64_MAX - a ? INT64_MAX : a + b;
}

/* Percent of all the machine's CPUs the units used since the previous
 * call. A drop in the total (a unit's cgroup recreated on restart) has no
 * meaningful delta, so that interval reports 0 and re-bases. */
static double cpu_percent(struct stats_state *st, int64_t total_cpu)
{
	uint64_t now = st->clock ? st->clock() : now_ns();
	long ncpu = st->ncpu > 0 ? st->ncpu : sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t cpu = (uint64_t)total_cpu;
	double pct = 0.0;

	if (ncpu < 1)
		ncpu = 1;
	if (st->primed && now > st->prev_ns && cpu >= st->prev_cpu_ns) {
		pct = 100.0 * (double)(cpu - st->prev_cpu_ns) /
		      ((double)(now - st->prev_ns) * (double)ncpu);
		if (pct > 100.0) /* sampling skew between clock and counters */
			pct = 100.0;
	}
	st->primed = true;
	st->prev_ns = now;
	st->prev_cpu_ns = cpu;
	return pct;
}

static void add_units(struct kvlist *l, const struct usage_unit *units,
		      size_t n, int64_t (*v)[U_N])
{
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < U_N; k++)
			if (v[i][k] >= 0)
				kv_add(l,
				       xasprintf("%s.%s", units[i].name,
						 unit_keys[k]),
				       xasprintf("%lld", (long long)v[i][k]));
}

int stats_collect(struct stats_state *st, const struct stats_paths *paths,
		  const struct usage_unit *units, size_t n, const char *fs_path,
		  struct kv **out, size_t *n_out, struct cerr *e)
{
	const char *meminfo =
	    paths && paths->meminfo ? paths->meminfo : "/proc/meminfo";
	const char *netdev = paths && paths->proc_net_dev ? paths->proc_net_dev
							  : "/proc/net/dev";
	struct kvlist l = {0};
	int64_t(*v)[U_N], cpu = 0, ws = 0, total;

	if (!st || !out || !n_out || (n && !units))
		return cerr_set(e, EINVAL, "stats: bad arguments");
	for (size_t i = 0; i < n; i++)
		if (!units[i].name)
			return cerr_set(e, EINVAL, "stats: unit %zu unnamed",
					i);
	v = xcalloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		unit_sample(&units[i], v[i]);
		cpu = v[i][U_CPU] >= 0 ? sat_add(cpu, v[i][U_CPU]) : cpu;
		ws = v[i][U_WS] >= 0 ? sat_add(ws, v[i][U_WS]) : ws;
	}
	add_pct(&l, "cpu", cpu_percent(st, cpu));
	if ((total = mem_total(meminfo)) > 0)
		add_pct(&l, "memory", 100.0 * (double)ws / (double)total);
	add_fs(&l, fs_path ? fs_path : "/");
	add_net(&l, netdev);
	add_units(&l, units, n, v);
	free(v);
	*out = l.v;
	*n_out = l.n;
	return 0;
}

void stats_free(struct kv *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		free(v[i].name);
		free(v[i].value);
	}
	free(v);
}
