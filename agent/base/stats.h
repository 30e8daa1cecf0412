// SPDX-License-Identifier: Apache-2.0
/* Resource usage for PodStatusReply's resourceUsage (WIRE.md): per-unit
 * cgroup counters (v1, v2 and hybrid hosts), pod-wide CPU and memory
 * percentages, the pod filesystem and the network interfaces. Values come
 * out as name → decimal number text, ready for struct pod_status.usage.
 * Every source is optional: a missing or malformed file omits its keys. */
#ifndef CELL_AGENT_STATS_H
#define CELL_AGENT_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podspec.h"
#include "err.h"

struct usage_unit {
	const char *name;
	/* The unit's cgroup directories as the monitor recorded them
	 * (unit_runtime_state.cgroups): one per v1 hierarchy, or the one v2
	 * directory; NULL-terminated. NULL: no cgroup (no per-unit keys). */
	char *const *cgroup_dirs;
};

/* Where the host files are; NULL members mean the real ones. */
struct stats_paths {
	const char *meminfo;	  /* "/proc/meminfo" */
	const char *proc_net_dev; /* "/proc/net/dev" */
};

/* What `cpu` is computed against: the previous sample. Start zeroed and
 * pass the same struct to every call. */
struct stats_state {
	uint64_t (*clock)(void); /* monotonic ns; NULL: now_ns (tests inject) */
	long ncpu;		 /* CPUs of the machine; 0: online CPUs */
	bool primed;		 /* prev_* hold a sample */
	uint64_t prev_ns;	 /* clock at the previous sample */
	uint64_t prev_cpu_ns;	 /* all units' cumulative CPU then */
};

/* Collect the resourceUsage keys into *out (n_out entries; free with
 * stats_free). fs_path names the filesystem for disk and fs* ("/" when
 * NULL); paths may be NULL. Fails only on bad arguments (EINVAL): every
 * unreadable source just omits its keys. */
int stats_collect(struct stats_state *st, const struct stats_paths *paths,
		  const struct usage_unit *units, size_t n, const char *fs_path,
		  struct kv **out, size_t *n_out, struct cerr *e);
void stats_free(struct kv *v, size_t n);

/* One unit's counters now, for the metrics (agent/base/metrics.c); -1 where a
 * source is missing. */
struct stats_unit {
	int64_t cpu_ns, working_set, rss;
};
void stats_unit_read(char *const *cgroup_dirs, struct stats_unit *out);
/* The same in two steps, for a reader that samples often: which of the
 * dirs hold the CPU and memory files (looked up once per run), */
struct stats_unit_src {
	int cpu_idx, mem_idx; /* -1: none */
	bool cpu_v1, mem_v2;
};
void stats_unit_resolve(char *const *cgroup_dirs, struct stats_unit_src *src);
/* Then only those files, through directory fds (O_PATH) the caller keeps:
 * no walk of the long cgroup paths on every sample. -1: none. */
void stats_unit_read_at(int cpu_dirfd, int mem_dirfd,
			const struct stats_unit_src *src,
			struct stats_unit *out);

#endif
