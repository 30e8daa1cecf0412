// SPDX-License-Identifier: Apache-2.0
/* The metrics registry and the text exposition (format 0.0.4). See
 * metrics.h for what feeds it and docs/agent.md "Metrics" for every
 * family. */
#include "metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "lazystats.h"
#include "stats.h"
#include "util.h"

#define NAME_MAX_LEN 256
#define MAX_ROWS 1024 /* per table: routes × codes, images, probes */
#define NB 11	      /* histogram buckets, +Inf apart */

static const double bounds[NB] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
				  0.5,	 1,    2.5,   5,    10};

struct api_row {
	char route[32];
	int code;
	uint64_t n;
};

struct pull_row {
	char image[NAME_MAX_LEN];
	uint64_t ok, failed, ns, bytes, hit_local, hit_shared;
};

struct probe_row {
	char unit[NAME_MAX_LEN];
	int which;
	uint64_t ok, failed, ns, bucket[NB];
	uint64_t oom; /* which == -1: the unit's OOM kills */
};

static struct {
	pthread_mutex_t mu;
	int64_t start_wall_ns, start_mono_ns;
	struct api_row api[MAX_ROWS];
	size_t n_api;
	uint64_t hs_failed, hs_timeout, hs_limit;
	struct pull_row *pulls;
	size_t n_pulls;
	struct probe_row *probes;
	size_t n_probes;
	struct metrics_snap *snap;
} M = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t wall_now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void metrics_init(void)
{
	M.start_wall_ns = wall_now_ns();
	M.start_mono_ns = (int64_t)now_ns();
}

/* ---- the snapshot ---- */

static void snap_free(struct metrics_snap *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_units; i++) {
		free(s->units[i].name);
		strv_free(s->units[i].cgroups);
		free(s->units[i].log_path);
	}
	free(s->units);
	free(s->namespace);
	free(s->pod);
	free(s->fs_path);
	free(s);
}

static void snap_put(struct metrics_snap *s)
{
	bool last;

	if (!s)
		return;
	pthread_mutex_lock(&M.mu);
	last = --s->refs == 0;
	pthread_mutex_unlock(&M.mu);
	if (last)
		snap_free(s);
}

void metrics_publish(struct metrics_snap *s)
{
	struct metrics_snap *old;

	if (s)
		s->refs = 1;
	pthread_mutex_lock(&M.mu);
	old = M.snap;
	M.snap = s;
	pthread_mutex_unlock(&M.mu);
	snap_put(old);
}

static struct metrics_snap *snap_get(void)
{
	struct metrics_snap *s;

	pthread_mutex_lock(&M.mu);
	s = M.snap;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&M.mu);
	return s;
}

/* ---- hooks ---- */

void metrics_api_request(const char *route, int code)
{
	size_t i;

	pthread_mutex_lock(&M.mu);
	for (i = 0; i < M.n_api; i++)
		if (M.api[i].code == code && !strcmp(M.api[i].route, route))
			break;
	if (i == M.n_api && M.n_api < MAX_ROWS) {
		snprintf(M.api[i].route, sizeof(M.api[i].route), "%s", route);
		M.api[i].code = code;
		M.n_api++;
	}
	if (i < M.n_api)
		M.api[i].n++;
	pthread_mutex_unlock(&M.mu);
}

void metrics_handshake_failure(const char *reason)
{
	pthread_mutex_lock(&M.mu);
	if (!strcmp(reason, "timeout"))
		M.hs_timeout++;
	else if (!strcmp(reason, "limit"))
		M.hs_limit++;
	else
		M.hs_failed++;
	pthread_mutex_unlock(&M.mu);
}

/* The row of image (made when missing); NULL when the table is full. Under
 * M.mu. */
static struct pull_row *pull_row(const char *image)
{
	for (size_t i = 0; i < M.n_pulls; i++)
		if (!strcmp(M.pulls[i].image, image))
			return &M.pulls[i];
	if (M.n_pulls >= MAX_ROWS || strlen(image) >= NAME_MAX_LEN)
		return NULL;
	M.pulls = xrealloc(M.pulls, (M.n_pulls + 1) * sizeof(*M.pulls));
	memset(&M.pulls[M.n_pulls], 0, sizeof(*M.pulls));
	snprintf(M.pulls[M.n_pulls].image, NAME_MAX_LEN, "%s", image);
	return &M.pulls[M.n_pulls++];
}

void metrics_pull(const char *image, uint64_t ns, uint64_t bytes, bool ok)
{
	struct pull_row *r;

	pthread_mutex_lock(&M.mu);
	if ((r = pull_row(image))) {
		*(ok ? &r->ok : &r->failed) += 1;
		r->ns += ns;
		r->bytes += bytes;
	}
	pthread_mutex_unlock(&M.mu);
}

void metrics_cache_hit(const char *image, const char *tier)
{
	struct pull_row *r;

	pthread_mutex_lock(&M.mu);
	if ((r = pull_row(image)))
		*(!strcmp(tier, "shared") ? &r->hit_shared : &r->hit_local) +=
		    1;
	pthread_mutex_unlock(&M.mu);
}

static struct probe_row *probe_row(const char *unit, int which)
{
	for (size_t i = 0; i < M.n_probes; i++)
		if (M.probes[i].which == which &&
		    !strcmp(M.probes[i].unit, unit))
			return &M.probes[i];
	if (M.n_probes >= MAX_ROWS || strlen(unit) >= NAME_MAX_LEN)
		return NULL;
	M.probes = xrealloc(M.probes, (M.n_probes + 1) * sizeof(*M.probes));
	memset(&M.probes[M.n_probes], 0, sizeof(*M.probes));
	snprintf(M.probes[M.n_probes].unit, NAME_MAX_LEN, "%s", unit);
	M.probes[M.n_probes].which = which;
	return &M.probes[M.n_probes++];
}

void metrics_probe(const char *unit, int which, bool success, uint64_t ns)
{
	struct probe_row *r;
	double s = (double)ns / 1e9;

	pthread_mutex_lock(&M.mu);
	if ((r = probe_row(unit, which))) {
		*(success ? &r->ok : &r->failed) += 1;
		r->ns += ns;
		for (size_t k = 0; k < NB; k++)
			if (s <= bounds[k])
				r->bucket[k]++;
	}
	pthread_mutex_unlock(&M.mu);
}

void metrics_oom(const char *unit)
{
	struct probe_row *r;

	pthread_mutex_lock(&M.mu);
	if ((r = probe_row(unit, -1)))
		r->oom++;
	pthread_mutex_unlock(&M.mu);
}

void metrics_forget_unit(const char *unit)
{
	size_t k = 0;

	pthread_mutex_lock(&M.mu);
	for (size_t i = 0; i < M.n_probes; i++)
		if (strcmp(M.probes[i].unit, unit))
			M.probes[k++] = M.probes[i];
	M.n_probes = k;
	pthread_mutex_unlock(&M.mu);
}

/* ---- the text format ---- */

static void out_printf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void out_printf(struct buf *b, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		buf_append(b, tmp,
			   (size_t)n < sizeof(tmp) ? (size_t)n
						   : sizeof(tmp) - 1,
			   NULL);
}

static void family(struct buf *b, const char *name, const char *type,
		   const char *help)
{
	out_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with the format's escapes (\\, \", \n). */
static void label_value(struct buf *b, const char *v)
{
	while (*v) {
		size_t n = strcspn(v, "\\\"\n");

		buf_append(b, v, n, NULL);
		v += n;
		if (!*v)
			break;
		buf_append(b,
			   *v == '\n'  ? "\\n"
			   : *v == '"' ? "\\\""
				       : "\\\\",
			   2, NULL);
		v++;
	}
}

/* Counts are whole numbers: printed as such (most samples), without
 * printf's floating-point path. */
static void format_value(struct buf *b, double v)
{
	char tmp[40], *p = tmp + sizeof(tmp);
	uint64_t n;

	if (v >= 0 && v < 9007199254740992.0 && v == (double)(uint64_t)v) {
		n = (uint64_t)v;
		*--p = '\n';
		do
			*--p = (char)('0' + n % 10);
		while (n /= 10);
		*--p = ' ';
		buf_append(b, p, (size_t)(tmp + sizeof(tmp) - p), NULL);
		return;
	}
	out_printf(b, " %.17g\n", v);
}

/* name{k1="v1",…} value: labels as NULL-terminated key, value pairs. */
static void sample(struct buf *b, const char *name, const char *const *labels,
		   double value)
{
	buf_append(b, name, strlen(name), NULL);
	for (size_t i = 0; labels && labels[i]; i += 2) {
		buf_append(b, i ? "," : "{", 1, NULL);
		buf_append(b, labels[i], strlen(labels[i]), NULL);
		buf_append(b, "=\"", 2, NULL);
		label_value(b, labels[i + 1]);
		buf_append(b, "\"", 1, NULL);
	}
	if (labels && labels[0])
		buf_append(b, "}", 1, NULL);
	format_value(b, value);
}

/* ---- directory fds kept between scrapes ---- */

/* Reading a cgroup file by its full path walks a dozen components each
 * time: a scrape keeps an O_PATH fd of each directory it reads and opens
 * files relative to it. Entries no scrape used last time are closed.
 * Scrapes take turns (scrape_mu); nothing else touches the cache. */
#define DIRFD_MAX 256
static pthread_mutex_t scrape_mu = PTHREAD_MUTEX_INITIALIZER;
static struct dirfd_ent {
	char *path;
	int fd;
	bool used;
} fdc[DIRFD_MAX];
static size_t n_fdc;

static int dir_fd(const char *path)
{
	int fd;

	for (size_t i = 0; i < n_fdc; i++)
		if (!strcmp(fdc[i].path, path)) {
			fdc[i].used = true;
			return fdc[i].fd;
		}
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || n_fdc == DIRFD_MAX)
		return fd; /* the caller closes one that is not cached */
	fdc[n_fdc++] = (struct dirfd_ent){xstrdup(path), fd, true};
	return fd;
}

static bool dir_fd_cached(int fd)
{
	for (size_t i = 0; i < n_fdc; i++)
		if (fdc[i].fd == fd)
			return true;
	return false;
}

static void dir_fd_sweep(void)
{
	size_t k = 0;

	for (size_t i = 0; i < n_fdc; i++) {
		if (fdc[i].used) {
			fdc[i].used = false;
			fdc[k++] = fdc[i];
			continue;
		}
		close(fdc[i].fd);
		free(fdc[i].path);
	}
	n_fdc = k;
}

static void dir_fd_put(int fd)
{
	if (fd >= 0 && !dir_fd_cached(fd))
		close(fd);
}

/* ---- per unit, per pod ---- */

struct unit_now {
	struct stats_unit st;
	int64_t log_bytes;
};

static int64_t file_size(int dirfd, const char *name)
{
	struct stat st;

	return fstatat(dirfd, name, &st, 0) == 0 ? (int64_t)st.st_size : -1;
}

/* The bytes of a unit run's log files: the current one and its rotations
 * (crilog's <path>.1 …). */
static int64_t log_bytes(const char *path)
{
	const char *slash = strrchr(path, '/');
	char dir[4200], name[300];
	int64_t sum, n;
	int fd;

	if (!slash || slash == path || (size_t)(slash - path) >= sizeof(dir))
		return -1;
	snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if ((fd = dir_fd(dir)) < 0)
		return -1;
	sum = file_size(fd, slash + 1);
	for (int k = 1; sum >= 0 && k <= 64; k++) {
		snprintf(name, sizeof(name), "%s.%d", slash + 1, k);
		if ((n = file_size(fd, name)) < 0)
			break;
		sum += n;
	}
	dir_fd_put(fd);
	return sum;
}

#define UNIT_LABELS(s, u)                                                      \
	{                                                                      \
		"namespace", (s)->namespace, "pod", (s)->pod, "container",     \
		    (u)->name, NULL                                            \
	}

static void render_units(struct buf *b, const struct metrics_snap *s)
{
	struct unit_now *now = xcalloc(s->n_units + 1, sizeof(*now));
	static const char *const state_names[] = {"waiting", "running",
						  "terminated"};

	for (size_t i = 0; i < s->n_units; i++) {
		now[i].st = (struct stats_unit){-1, -1, -1};
		const struct metrics_unit *u = &s->units[i];
		struct stats_unit_src src = {.cpu_idx = u->cpu_idx,
					     .mem_idx = u->mem_idx,
					     .cpu_v1 = u->cpu_v1,
					     .mem_v2 = u->mem_v2};

		if (u->cgroups) {
			int cfd = u->cpu_idx >= 0
				      ? dir_fd(u->cgroups[u->cpu_idx])
				      : -1;
			int mfd = u->mem_idx >= 0
				      ? dir_fd(u->cgroups[u->mem_idx])
				      : -1;

			stats_unit_read_at(cfd, mfd, &src, &now[i].st);
			dir_fd_put(cfd);
			dir_fd_put(mfd);
		}
		now[i].log_bytes =
		    s->units[i].log_path ? log_bytes(s->units[i].log_path) : -1;
	}
#define EACH_UNIT(cond, name, expr)                                            \
	for (size_t i = 0; i < s->n_units; i++) {                              \
		const struct metrics_unit *u = &s->units[i];                   \
		const char *l[] = UNIT_LABELS(s, u);                           \
		(void)u;                                                       \
		if (cond)                                                      \
			sample(b, name, l, (double)(expr));                    \
	}
	family(b, "container_cpu_usage_seconds_total", "counter",
	       "Cumulative CPU time of the unit's current run in seconds.");
	EACH_UNIT(now[i].st.cpu_ns >= 0, "container_cpu_usage_seconds_total",
		  (double)now[i].st.cpu_ns / 1e9);
	family(b, "container_memory_working_set_bytes", "gauge",
	       "Memory usage less inactive file pages (cAdvisor's working "
	       "set).");
	EACH_UNIT(now[i].st.working_set >= 0,
		  "container_memory_working_set_bytes", now[i].st.working_set);
	family(b, "container_memory_rss", "gauge",
	       "Anonymous memory of the unit (RSS).");
	EACH_UNIT(now[i].st.rss >= 0, "container_memory_rss", now[i].st.rss);
	family(b, "kube_pod_container_status_restarts_total", "counter",
	       "Restarts of the unit.");
	EACH_UNIT(true, "kube_pod_container_status_restarts_total",
		  u->restarts);
	family(b, "kube_pod_container_status_ready", "gauge",
	       "1 when the unit is ready.");
	EACH_UNIT(true, "kube_pod_container_status_ready", u->ready);
	for (int k = 0; k < 3; k++) {
		char name[64];

		snprintf(name, sizeof(name), "kube_pod_container_status_%s",
			 state_names[k]);
		family(b, name, "gauge", "1 when the unit is in this state.");
		EACH_UNIT(true, name, u->state == (enum metrics_state)k);
	}
	family(b, "kubelet_container_log_filesystem_used_bytes", "gauge",
	       "Bytes of the unit's current run's log files on disk.");
	EACH_UNIT(now[i].log_bytes >= 0,
		  "kubelet_container_log_filesystem_used_bytes",
		  now[i].log_bytes);
#undef EACH_UNIT
	free(now);
}

enum { NI_RXB, NI_RXP, NI_TXB, NI_TXP, NI_N };

struct netif {
	char name[32];
	uint64_t v[NI_N];
};

/* /proc/<pid>/net/dev's interfaces but lo: bytes and packets. */
static size_t read_netdev(pid_t pid, struct netif *out, size_t max)
{
	char path[64], *line, *save = NULL;
	struct buf b;
	struct cerr e = {0};
	size_t n = 0;

	snprintf(path, sizeof(path), "/proc/%d/net/dev", (int)pid);
	buf_init(&b, 1u << 20);
	if (fs_read_file(path, &b, &e) < 0 || !b.len) {
		buf_free(&b);
		return 0;
	}
	buf_append(&b, "", 1, NULL);
	for (line = strtok_r(b.data, "\n", &save); line && n < max;
	     line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':'), *name = line;
		unsigned long long c[16];

		if (!colon)
			continue;
		*colon = '\0';
		name += strspn(name, " ");
		if (!strcmp(name, "lo") ||
		    sscanf(colon + 1,
			   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu",
			   &c[0], &c[1], &c[2], &c[3], &c[4], &c[5], &c[6],
			   &c[7], &c[8], &c[9]) != 10)
			continue;
		snprintf(out[n].name, sizeof(out[n].name), "%s", name);
		out[n].v[NI_RXB] = c[0];
		out[n].v[NI_RXP] = c[1];
		out[n].v[NI_TXB] = c[8];
		out[n].v[NI_TXP] = c[9];
		n++;
	}
	buf_free(&b);
	return n;
}

static void render_pod(struct buf *b, const struct metrics_snap *s)
{
	static const char *const names[NI_N] = {
	    "container_network_receive_bytes_total",
	    "container_network_receive_packets_total",
	    "container_network_transmit_bytes_total",
	    "container_network_transmit_packets_total"};
	static const char *const helps[NI_N] = {
	    "Bytes received by the pod's interface.",
	    "Packets received by the pod's interface.",
	    "Bytes sent by the pod's interface.",
	    "Packets sent by the pod's interface."};
	struct netif ifs[16];
	size_t n = s->net_pid > 0 ? read_netdev(s->net_pid, ifs, 16) : 0;
	struct statvfs vfs;
	const char *pl[] = {"namespace", s->namespace, "pod", s->pod, NULL};

	for (int k = 0; k < NI_N; k++) {
		family(b, names[k], "counter", helps[k]);
		for (size_t i = 0; i < n; i++) {
			const char *l[] = {
			    "namespace", s->namespace, "pod", s->pod,
			    "interface", ifs[i].name,  NULL};
			sample(b, names[k], l, (double)ifs[i].v[k]);
		}
	}
	if (s->fs_path && statvfs(s->fs_path, &vfs) == 0) {
		double bs = (double)vfs.f_frsize;

		family(b, "container_fs_usage_bytes", "gauge",
		       "Bytes used on the filesystem of the pod's state.");
		sample(b, "container_fs_usage_bytes", pl,
		       bs * (double)(vfs.f_blocks - vfs.f_bfree));
		family(b, "container_fs_limit_bytes", "gauge",
		       "Size of the filesystem of the pod's state.");
		sample(b, "container_fs_limit_bytes", pl,
		       bs * (double)vfs.f_blocks);
	}
}

/* ---- counters ---- */

struct copied {
	struct api_row api[MAX_ROWS];
	size_t n_api;
	uint64_t hs[3];
	struct pull_row *pulls;
	size_t n_pulls;
	struct probe_row *probes;
	size_t n_probes;
};

/* memcpy of n items that may be none (a NULL array then). */
static void copy_items(void *dst, const void *src, size_t n, size_t size)
{
	if (n)
		memcpy(dst, src, n * size);
}

static void copy_counters(struct copied *c)
{
	pthread_mutex_lock(&M.mu);
	copy_items(c->api, M.api, M.n_api, sizeof(*M.api));
	c->n_api = M.n_api;
	c->hs[0] = M.hs_failed;
	c->hs[1] = M.hs_timeout;
	c->hs[2] = M.hs_limit;
	c->n_pulls = M.n_pulls;
	c->pulls = xmalloc((M.n_pulls + 1) * sizeof(*M.pulls));
	copy_items(c->pulls, M.pulls, M.n_pulls, sizeof(*M.pulls));
	c->n_probes = M.n_probes;
	c->probes = xmalloc((M.n_probes + 1) * sizeof(*M.probes));
	copy_items(c->probes, M.probes, M.n_probes, sizeof(*M.probes));
	pthread_mutex_unlock(&M.mu);
}

static const char *const probe_types[] = {"Startup", "Liveness", "Readiness"};

static void render_probes(struct buf *b, const struct metrics_snap *s,
			  const struct copied *c)
{
	const char *ns = s ? s->namespace : "", *pod = s ? s->pod : "";
	char le[32];

	family(b, "prober_probe_total", "counter",
	       "Probe attempts by type and result.");
	for (size_t i = 0; i < c->n_probes; i++) {
		const struct probe_row *r = &c->probes[i];

		for (int ok = 1; r->which >= 0 && ok >= 0; ok--) {
			const char *l[] = {
			    "namespace",  ns,
			    "pod",	  pod,
			    "container",  r->unit,
			    "probe_type", probe_types[r->which],
			    "result",	  ok ? "successful" : "failed",
			    NULL};
			sample(b, "prober_probe_total", l,
			       (double)(ok ? r->ok : r->failed));
		}
	}
	family(b, "prober_probe_duration_seconds", "histogram",
	       "How long probe attempts took.");
	for (size_t i = 0; i < c->n_probes; i++) {
		const struct probe_row *r = &c->probes[i];
		const char *l[] = {
		    "namespace",  ns,
		    "pod",	  pod,
		    "container",  r->unit,
		    "probe_type", r->which >= 0 ? probe_types[r->which] : "",
		    "le",	  le,
		    NULL};

		if (r->which < 0)
			continue;
		for (size_t k = 0; k <= NB; k++) {
			if (k < NB)
				snprintf(le, sizeof(le), "%g", bounds[k]);
			else
				snprintf(le, sizeof(le), "+Inf");
			sample(b, "prober_probe_duration_seconds_bucket", l,
			       (double)(k < NB ? r->bucket[k]
					       : r->ok + r->failed));
		}
		l[8] = NULL; /* no "le" */
		sample(b, "prober_probe_duration_seconds_sum", l,
		       (double)r->ns / 1e9);
		sample(b, "prober_probe_duration_seconds_count", l,
		       (double)(r->ok + r->failed));
	}
	family(b, "container_oom_events_total", "counter",
	       "Units ended by the OOM killer.");
	for (size_t i = 0; s && i < s->n_units; i++) {
		uint64_t n = 0;
		const char *l[] = UNIT_LABELS(s, &s->units[i]);

		for (size_t k = 0; k < c->n_probes; k++)
			if (c->probes[k].which < 0 &&
			    !strcmp(c->probes[k].unit, s->units[i].name))
				n = c->probes[k].oom;
		sample(b, "container_oom_events_total", l, (double)n);
	}
}

static void render_pulls(struct buf *b, const struct copied *c)
{
	static const char *const tiers[] = {"local", "shared"};

	family(b, "cell_image_pulls_total", "counter",
	       "Image pulls by the puller, by result.");
	for (size_t i = 0; i < c->n_pulls; i++)
		for (int ok = 1; ok >= 0; ok--) {
			const char *l[] = {"image", c->pulls[i].image, "result",
					   ok ? "success" : "failure", NULL};
			sample(
			    b, "cell_image_pulls_total", l,
			    (double)(ok ? c->pulls[i].ok : c->pulls[i].failed));
		}
	family(b, "cell_image_pull_duration_seconds_total", "counter",
	       "Seconds spent pulling the image.");
	for (size_t i = 0; i < c->n_pulls; i++) {
		const char *l[] = {"image", c->pulls[i].image, NULL};
		sample(b, "cell_image_pull_duration_seconds_total", l,
		       (double)c->pulls[i].ns / 1e9);
	}
	family(b, "cell_image_pull_bytes_total", "counter",
	       "Bytes downloaded for the image's layers.");
	for (size_t i = 0; i < c->n_pulls; i++) {
		const char *l[] = {"image", c->pulls[i].image, NULL};
		sample(b, "cell_image_pull_bytes_total", l,
		       (double)c->pulls[i].bytes);
	}
	family(b, "cell_image_cache_hits_total", "counter",
	       "Starts served from an image cache without a pull, by tier "
	       "(the shared tier reads 0 until cells have one).");
	for (size_t i = 0; i < c->n_pulls; i++)
		for (int t = 0; t < 2; t++) {
			const char *l[] = {"image", c->pulls[i].image, "tier",
					   tiers[t], NULL};
			sample(b, "cell_image_cache_hits_total", l,
			       (double)(t ? c->pulls[i].hit_shared
					  : c->pulls[i].hit_local));
		}
}

/* The lazy eStargz layers' servers' counters (lazystats.h). */
static void render_lazy(struct buf *b)
{
	struct lazystats t;
	const char *demand[] = {"how", "demand", NULL};
	const char *background[] = {"how", "background", NULL};

	lazystats_totals(&t);
	family(b, "cell_lazy_bytes_total", "counter",
	       "Compressed bytes lazy eStargz layers fetched: for reads "
	       "(demand) or ahead of them (prefetch and background).");
	sample(b, "cell_lazy_bytes_total", demand, (double)t.demand_bytes);
	sample(b, "cell_lazy_bytes_total", background,
	       (double)t.background_bytes);
	family(b, "cell_lazy_demand_fetch_seconds", "summary",
	       "On-demand chunk fetches of lazy layers: their time.");
	sample(b, "cell_lazy_demand_fetch_seconds_sum", NULL,
	       (double)t.demand_ns / 1e9);
	sample(b, "cell_lazy_demand_fetch_seconds_count", NULL,
	       (double)t.demand_fetches);
	family(b, "cell_lazy_chunks_refused_total", "counter",
	       "Lazy layers' chunks whose digest did not match the TOC's "
	       "(never served).");
	sample(b, "cell_lazy_chunks_refused_total", NULL, (double)t.refused);
	family(b, "cell_lazy_reads_failed_total", "counter",
	       "Reads of lazy layers answered with an I/O error (the registry "
	       "stalled or failed, a chunk refused).");
	sample(b, "cell_lazy_reads_failed_total", NULL, (double)t.failed_reads);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n += de->d_name[0] != '.';
	closedir(d);
	return n - 1; /* opendir's own */
}

static int64_t self_rss(void)
{
	char buf[128];
	long long size, res;
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%lld %lld", &size, &res) != 2)
		return -1;
	return res * sysconf(_SC_PAGESIZE);
}

static void render_agent(struct buf *b, const struct copied *c)
{
	static const char *const reasons[] = {"failed", "timeout", "limit"};
	struct rusage ru;
	int64_t rss = self_rss();
	int fds = count_fds();

	family(b, "process_resident_memory_bytes", "gauge",
	       "The agent's resident memory.");
	if (rss >= 0)
		sample(b, "process_resident_memory_bytes", NULL, (double)rss);
	family(b, "process_open_fds", "gauge",
	       "The agent's open file descriptors.");
	if (fds >= 0)
		sample(b, "process_open_fds", NULL, fds);
	family(b, "process_cpu_seconds_total", "counter",
	       "The agent's user and system CPU time.");
	if (getrusage(RUSAGE_SELF, &ru) == 0)
		sample(b, "process_cpu_seconds_total", NULL,
		       (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			   (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) /
			       1e6);
	family(b, "process_start_time_seconds", "gauge",
	       "When the agent started (Unix time).");
	sample(b, "process_start_time_seconds", NULL,
	       (double)M.start_wall_ns / 1e9);
	family(b, "cell_agent_uptime_seconds", "gauge",
	       "Seconds since the agent started.");
	sample(b, "cell_agent_uptime_seconds", NULL,
	       (double)((int64_t)now_ns() - M.start_mono_ns) / 1e9);
	family(b, "cell_agent_api_requests_total", "counter",
	       "API requests by route and HTTP status.");
	for (size_t i = 0; i < c->n_api; i++) {
		char code[16];
		const char *l[] = {"route", c->api[i].route, "code", code,
				   NULL};

		snprintf(code, sizeof(code), "%d", c->api[i].code);
		sample(b, "cell_agent_api_requests_total", l,
		       (double)c->api[i].n);
	}
	family(b, "cell_agent_tls_handshake_failures_total", "counter",
	       "TLS handshakes that did not complete, by reason.");
	for (int k = 0; k < 3; k++) {
		const char *l[] = {"reason", reasons[k], NULL};
		sample(b, "cell_agent_tls_handshake_failures_total", l,
		       (double)c->hs[k]);
	}
}

void metrics_render(struct buf *out)
{
	struct metrics_snap *s = snap_get();
	struct copied *c = xmalloc(sizeof(*c));

	copy_counters(c);
	pthread_mutex_lock(&scrape_mu);
	if (s) {
		render_units(out, s);
		render_pod(out, s);
	}
	dir_fd_sweep();
	pthread_mutex_unlock(&scrape_mu);
	render_probes(out, s, c);
	render_pulls(out, c);
	render_lazy(out);
	render_agent(out, c);
	free(c->pulls);
	free(c->probes);
	free(c);
	snap_put(s);
}
