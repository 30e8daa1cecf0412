// SPDX-License-Identifier: Apache-2.0
/* Unit tests of resourceUsage collection (agent/base/stats.c) against fake
 * cgroup v1/v2 trees, meminfo and net/dev, plus one real sample. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "fsutil.h"
#include "stats.h"
#include "util.h"

static char tmp[] = "/tmp/test-stats-XXXXXX";
static uint64_t fake_now;

static uint64_t fake_clock(void)
{
	return fake_now;
}

static char *tpath(const char *rel)
{
	return xasprintf("%s/%s", tmp, rel);
}

static void put(const char *rel, const char *text)
{
	char *p = tpath(rel), *slash = strrchr(p, '/');
	struct cerr e = {0};

	*slash = '\0';
	fs_mkdir_p(p, 0755, &e);
	*slash = '/';
	if (fs_write_atomic(p, text, strlen(text), 0644, &e) < 0)
		printf("# put %s: %s\n", p, e.msg);
	free(p);
}

static const char *get(const struct kv *v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return v[i].value;
	return NULL;
}

static const char netdev[] =
    "Inter-|   Receive                            |  Transmit\n"
    " face |bytes    packets errs drop fifo frame compressed multicast|"
    "bytes    packets errs drop fifo colls carrier compressed\n"
    "    lo: 999999 10 5 0 0 0 0 0 999999 10 5 0 0 0 0 0\n"
    "  eth0: 100 3 1 0 0 0 0 0 200 4 2 0 0 0 0 0\n"
    "  eth1:300 3 4 0 0 0 0 0 400 4 8 0 0 0 0 0\n"
    "  bad0: 1 2 x 0 0 0 0 0 5 6 7 0 0 0 0 0\n"
    "  short: 1 2 3\n"
    "garbage without colon\n"
    "  neg0: -1 2 3 0 0 0 0 0 5 6 7 0 0 0 0 0";

static void fake_tree(void)
{
	/* v2 unit "web": memory.max set. */
	put("v2/web/cgroup.controllers", "cpu memory pids\n");
	put("v2/web/cpu.stat", "usage_usec 1500\nuser_usec 1000\n"
			       "system_usec 500\n");
	put("v2/web/memory.current", "1000000\n");
	put("v2/web/memory.stat", "anon 600000\nfile 400000\n"
				  "inactive_file 300000\nactive_file 100000\n"
				  "pgfault 42\npgmajfault 7\n");
	put("v2/web/memory.max", "2000000\n");
	/* v2 unit "side": no limit. */
	put("v2/side/cgroup.controllers", "memory\n");
	put("v2/side/cpu.stat", "usage_usec 0\n");
	put("v2/side/memory.current", "50000\n");
	put("v2/side/memory.stat", "anon 1\ninactive_file 0\npgfault 1\n"
				   "pgmajfault 0\n");
	put("v2/side/memory.max", "max\n");
	/* v1 unit "db": memory + cpu,cpuacct hierarchies, "unlimited". */
	put("v1/memory/db/memory.usage_in_bytes", "500000\n");
	put("v1/memory/db/memory.stat",
	    "rss 1\npgfault 1\ntotal_inactive_file 600000\ntotal_rss 1234\n"
	    "total_pgfault 9\ntotal_pgmajfault 1\n");
	put("v1/memory/db/memory.limit_in_bytes", "9223372036854771712\n");
	put("v1/cpu,cpuacct/db/cpu.stat", "nr_periods 0\nnr_throttled 0\n");
	put("v1/cpu,cpuacct/db/cpuacct.usage", "2000000000\n");
	put("meminfo", "MemFree:  1 kB\nMemTotal:       1000 kB\n"
		       "MemAvailable:    500 kB\n");
	put("netdev", netdev);
}

static void check_fs(const struct kv *v, size_t n, const char *path)
{
	struct statvfs s;
	int64_t cap = -1, used = -1, avail = -1, ino = -1, ifree = -1,
		iused = -1;
	double disk = -1;
	const char *d = get(v, n, "disk");
	const char *keys[] = {"fsCapacity", "fsUsed",	    "fsAvailable",
			      "fsInodes",   "fsInodesFree", "fsInodesUsed"};
	int64_t *vals[] = {&cap, &used, &avail, &ino, &ifree, &iused};
	bool all = true;

	for (size_t i = 0; i < 6; i++)
		all = all && get(v, n, keys[i]) &&
		      parse_int64(get(v, n, keys[i]), 0, INT64_MAX, vals[i],
				  NULL) == 0;
	ok(all, "%s: all fs keys are integers", path);
	ok(statvfs(path, &s) == 0 &&
	       cap == (int64_t)(s.f_blocks * s.f_frsize) &&
	       ino == (int64_t)s.f_files,
	   "%s: fsCapacity %lld and fsInodes %lld match statvfs", path,
	   (long long)cap, (long long)ino);
	ok(used + avail <= cap && iused + ifree == ino,
	   "%s: used + available <= capacity; inodes add up", path);
	if (d)
		disk = strtod(d, NULL);
	ok(d && disk >= 0 && disk <= 100, "%s: disk %s is a percentage", path,
	   d ? d : "(none)");
}

static void test_fake(void)
{
	char *web[] = {tpath("v2/web"), NULL};
	char *side[] = {tpath("v2/side"), NULL};
	char *db[] = {tpath("v1/cpu,cpuacct/db"), tpath("v1/memory/db"), NULL};
	struct usage_unit units[] = {
	    {"web", web}, {"side", side}, {"db", db}, {"none", NULL}};
	char *mi = tpath("meminfo"), *nd = tpath("netdev");
	struct stats_paths paths = {.meminfo = mi, .proc_net_dev = nd};
	struct stats_state st = {.clock = fake_clock, .ncpu = 2};
	struct cerr e = {0};
	struct kv *v = NULL;
	size_t n = 0;
	static const char *const want[][2] = {
	    {"cpu", "0.00"},
	    /* (700000 + 0 + 50000) / 1024000 */
	    {"memory", "73.24"},
	    {"netRx", "400"},
	    {"netRxErrors", "5"},
	    {"netTx", "600"},
	    {"netTxErrors", "10"},
	    {"web.cpuUsage", "1500000"},
	    {"web.memoryUsage", "1000000"},
	    {"web.memoryWorkingSet", "700000"},
	    {"web.memoryAvailable", "1300000"},
	    {"web.memoryRSS", "600000"},
	    {"web.memoryPageFaults", "42"},
	    {"web.memoryMajorPageFaults", "7"},
	    {"side.cpuUsage", "0"},
	    {"side.memoryUsage", "50000"},
	    {"side.memoryWorkingSet", "50000"},
	    {"side.memoryAvailable", NULL},
	    {"side.memoryRSS", "1"},
	    {"db.cpuUsage", "2000000000"},
	    {"db.memoryUsage", "500000"},
	    {"db.memoryWorkingSet", "0"},
	    {"db.memoryAvailable", NULL},
	    {"db.memoryRSS", "1234"},
	    {"db.memoryPageFaults", "9"},
	    {"db.memoryMajorPageFaults", "1"},
	    {"none.cpuUsage", NULL},
	    {"none.memoryUsage", NULL},
	};

	fake_tree();
	fake_now = 5000000000ull;
	ok(stats_collect(&st, &paths, units, 4, tmp, &v, &n, &e) == 0,
	   "collect over fake v1 + v2 units (%s)", e.msg);
	for (size_t i = 0; i < ARRAY_SIZE(want); i++)
		is_str(get(v, n, want[i][0]), want[i][1], "%s", want[i][0]);
	check_fs(v, n, tmp);
	ok(n == 13 + 7 + 6 + 6, "%zu keys: 13 pod-wide, 7 + 6 + 6 per unit", n);
	stats_free(v, n);

	/* One second later web used 0.5 s more and db 1 s: 1.5 s of 2 CPUs. */
	put("v2/web/cpu.stat", "usage_usec 501500\n");
	put("v1/cpu,cpuacct/db/cpuacct.usage", "3000000000\n");
	fake_now += 1000000000ull;
	ok(stats_collect(&st, &paths, units, 4, tmp, &v, &n, &e) == 0,
	   "second sample");
	is_str(get(v, n, "cpu"), "75.00", "cpu from two samples");
	is_str(get(v, n, "web.cpuUsage"), "501500000", "web cumulative ns");
	stats_free(v, n);

	/* A restart recreates a cgroup and the total drops: 0, re-based. */
	put("v1/cpu,cpuacct/db/cpuacct.usage", "0\n");
	fake_now += 1000000000ull;
	stats_collect(&st, &paths, units, 4, tmp, &v, &n, &e);
	is_str(get(v, n, "cpu"), "0.00", "a counter drop reports 0");
	stats_free(v, n);
	put("v1/cpu,cpuacct/db/cpuacct.usage", "200000000\n");
	fake_now += 1000000000ull;
	stats_collect(&st, &paths, units, 4, tmp, &v, &n, &e);
	is_str(get(v, n, "cpu"), "10.00", "then rates from the new base");
	stats_free(v, n);

	for (size_t i = 0; web[i]; i++)
		free(web[i]);
	free(side[0]);
	free(db[0]);
	free(db[1]);
	free(mi);
	free(nd);
}

static void test_missing_and_malformed(void)
{
	char *gone[] = {tpath("v2/gone"), NULL};
	char *bad[] = {tpath("v2/bad"), NULL};
	char *half[] = {tpath("v2/half"), NULL};
	struct usage_unit units[] = {
	    {"gone", gone}, {"bad", bad}, {"half", half}};
	char *mi = tpath("badmeminfo"), *nd = tpath("nonexistent");
	struct stats_paths paths = {.meminfo = mi, .proc_net_dev = nd};
	struct stats_state st = {.clock = fake_clock, .ncpu = 1};
	struct cerr e = {0};
	struct kv *v = NULL;
	size_t n = 0;
	char *big = xmalloc(70000);
	static const char *const absent[] = {"memory",
					     "netRx",
					     "netTx",
					     "gone.cpuUsage",
					     "gone.memoryUsage",
					     "bad.cpuUsage",
					     "bad.memoryUsage",
					     "bad.memoryWorkingSet",
					     "bad.memoryAvailable",
					     "bad.memoryRSS",
					     "bad.memoryPageFaults",
					     "bad.memoryMajorPageFaults",
					     "half.cpuUsage",
					     "half.memoryWorkingSet",
					     "half.memoryAvailable",
					     "half.memoryPageFaults"};

	put("v2/bad/cgroup.controllers", "memory\n");
	put("v2/bad/cpu.stat", "usage_usec -5\n");
	put("v2/bad/memory.current", "12abc\n");
	put("v2/bad/memory.stat", "anon 1e5\ninactive_file  3\npgfault +4\n"
				  "pgmajfault 99999999999999999999\n");
	put("v2/bad/memory.max", "max2\n");
	/* half: usage and a valid stat but a giant stat file elsewhere. */
	put("v2/half/cgroup.controllers", "memory\n");
	put("v2/half/memory.current", "4096\n");
	memset(big, 'x', 69999);
	big[69999] = '\0';
	put("v2/half/cpu.stat", big);
	put("v2/half/memory.stat", "anon 5\npgmajfault 2\n");
	put("badmeminfo", "MemTotal: abc kB\n");

	ok(stats_collect(&st, &paths, units, 3, tmp, &v, &n, &e) == 0,
	   "collect succeeds despite missing and malformed files");
	for (size_t i = 0; i < ARRAY_SIZE(absent); i++)
		is_str(get(v, n, absent[i]), NULL, "%s omitted", absent[i]);
	is_str(get(v, n, "cpu"), "0.00", "cpu still reported");
	is_str(get(v, n, "half.memoryUsage"), "4096", "half: usage kept");
	is_str(get(v, n, "half.memoryRSS"), "5", "half: rss kept");
	is_str(get(v, n, "half.memoryMajorPageFaults"), "2",
	       "half: major faults kept");
	ok(get(v, n, "fsCapacity") != NULL, "fs keys independent of the rest");
	stats_free(v, n);

	/* No file system and no units at all: still a reply. */
	ok(stats_collect(&st, &paths, NULL, 0, "/nonexistent/x", &v, &n, &e) ==
		   0 &&
	       !get(v, n, "disk") && !get(v, n, "fsCapacity") &&
	       get(v, n, "cpu"),
	   "unknown fs path omits fs keys only");
	stats_free(v, n);
	ok(stats_collect(&st, &paths, NULL, 2, NULL, &v, &n, &e) < 0 &&
	       e.code == EINVAL,
	   "units NULL with n > 0 is EINVAL");
	free(big);
	free(gone[0]);
	free(bad[0]);
	free(half[0]);
	free(mi);
	free(nd);
}

/* The process's own cgroup directories, as the monitor would record them. */
static char **self_dirs(void)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[4096], **dirs = xcalloc(16, sizeof(*dirs));
	size_t n = 0;
	bool v2_only = fs_exists("/sys/fs/cgroup/cgroup.controllers");

	while (f && n < 15 && fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'),
		     *c2 = c1 ? strchr(c1 + 1, ':') : 0;

		if (!c2 || !str_has_prefix(c2 + 1, "/"))
			continue;
		c2[strcspn(c2, "\n")] = '\0';
		*c2 = '\0';
		if (!strcmp(c1 + 1, ""))
			dirs[n++] =
			    xasprintf("/sys/fs/cgroup%s%s",
				      v2_only ? "" : "/unified", c2 + 1);
		else if (!str_has_prefix(c1 + 1, "name="))
			dirs[n++] =
			    xasprintf("/sys/fs/cgroup/%s%s", c1 + 1, c2 + 1);
	}
	if (f)
		fclose(f);
	return dirs;
}

static void test_real(void)
{
	char **dirs = self_dirs();
	struct usage_unit u = {"self", dirs};
	struct stats_state st = {0};
	struct cerr e = {0};
	struct kv *v = NULL;
	size_t n = 0;

	ok(stats_collect(&st, NULL, &u, 1, "/", &v, &n, &e) == 0,
	   "real sample of our own cgroups (%zu dirs)", strv_len(dirs));
	check_fs(v, n, "/");
	is_str(get(v, n, "cpu"), "0.00", "real: first cpu sample is 0");
	ok(get(v, n, "memory") && get(v, n, "netRx"),
	   "real: memory and netRx present");
	for (size_t i = 0; i < n; i++)
		if (str_has_prefix(v[i].name, "self."))
			printf("# %s = %s\n", v[i].name, v[i].value);
	stats_free(v, n);
	strv_free(dirs);
}

/* The metrics' two-step reader: the files are found once, then read
 * through directory fds; the same numbers as stats_unit_read. */
static void test_resolved(void)
{
	char *web[] = {tpath("v2/web"), NULL};
	char *db[] = {tpath("v1/cpu,cpuacct/db"), tpath("v1/memory/db"), NULL};
	char **sets[] = {web, db};

	for (size_t k = 0; k < 2; k++) {
		struct stats_unit_src src;
		struct stats_unit a, b;
		char *const *d = sets[k];
		int cfd, mfd;

		stats_unit_resolve(d, &src);
		cfd = src.cpu_idx >= 0 ? open(d[src.cpu_idx], O_PATH) : -1;
		mfd = src.mem_idx >= 0 ? open(d[src.mem_idx], O_PATH) : -1;
		stats_unit_read_at(cfd, mfd, &src, &a);
		stats_unit_read(d, &b);
		ok(src.cpu_idx >= 0 && src.mem_idx >= 0 &&
		       src.cpu_v1 == (k == 1) && src.mem_v2 == (k == 0),
		   "resolved: cpu %d (v1 %d), memory %d (v2 %d)", src.cpu_idx,
		   src.cpu_v1, src.mem_idx, src.mem_v2);
		ok(a.cpu_ns == b.cpu_ns && a.working_set == b.working_set &&
		       a.rss == b.rss && a.cpu_ns > 0 && a.rss > 0,
		   "read at: %lld %lld %lld", (long long)a.cpu_ns,
		   (long long)a.working_set, (long long)a.rss);
		close(cfd);
		close(mfd);
	}
	free(web[0]);
	free(db[0]);
	free(db[1]);
}

int main(void)
{
	struct cerr e = {0};

	if (!mkdtemp(tmp)) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return tap_done();
	}
	test_fake();
	test_resolved();
	test_missing_and_malformed();
	test_real();
	fs_rm_rf(tmp, &e);
	return tap_done();
}
