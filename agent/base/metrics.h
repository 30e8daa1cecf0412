// SPDX-License-Identifier: Apache-2.0
/* Prometheus metrics (text exposition format 0.0.4) for GET
 * /rest/v1/metrics and the optional plain-HTTP listener (docs/agent.md
 * "Metrics"). Names follow cAdvisor, the kubelet and kube-state-metrics
 * where a counterpart exists.
 *
 * Two kinds of input, neither of which ever waits for a scrape:
 *   - counters fed by hooks (API requests, handshakes, pulls, probes, OOM
 *     kills), each a few instructions under a mutex no scrape holds while
 *     it formats (it copies first);
 *   - the pod's shape (units, states, cgroups, the pod's network), which
 *     the supervisor publishes as an immutable, reference-counted snapshot
 *     (metrics_publish): a scrape takes a reference, never the supervisor's
 *     lock.
 * Cgroup and /proc counters are read by the scraping thread itself. */
#ifndef CELL_METRICS_H
#define CELL_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"

#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* ---- the supervisor's snapshot ---- */

enum metrics_state { MS_WAITING, MS_RUNNING, MS_TERMINATED };

struct metrics_unit {
	char *name;
	bool is_init, ready;
	enum metrics_state state;
	int restarts;
	char **cgroups; /* the current run's cgroup dirs; NULL: none */
	/* Which of them hold the CPU and memory files (stats.h), found once
	 * per run. */
	int cpu_idx, mem_idx;
	bool cpu_v1, mem_v2;
	char *log_path; /* the current run's CRI log */
};

struct metrics_snap {
	char *namespace, *pod; /* from PodName "<namespace>_<name>" */
	/* A process in the pod's own network namespace (its interface is
	 * read through /proc/<pid>/net/dev); 0: none (host network, or no
	 * unit running). */
	pid_t net_pid;
	char *fs_path; /* the filesystem of the pod's state */
	struct metrics_unit *units;
	size_t n_units;
	int refs; /* metrics.c's business */
};

/* Replace the published snapshot (metrics takes s; NULL: no pod). */
void metrics_publish(struct metrics_snap *s);

/* ---- hooks ---- */

void metrics_init(void); /* the agent's start time */
/* route: the first path component below /rest/v1/ ("status", "logs"). */
void metrics_api_request(const char *route, int code);
/* reason: "failed", "timeout" or "limit". */
void metrics_handshake_failure(const char *reason);
/* A pull by the helper: its time, bytes downloaded, success. */
void metrics_pull(const char *image, uint64_t ns, uint64_t bytes, bool ok);
/* An image mounted from a cache without a pull: tier "local" or
 * "shared" (the shared cache tier; nothing reports it yet). */
void metrics_cache_hit(const char *image, const char *tier);
/* which: 0 startup, 1 liveness, 2 readiness (enum probe_which). */
void metrics_probe(const char *unit, int which, bool success, uint64_t ns);
void metrics_oom(const char *unit);
/* Forget a unit's counters (it left the spec). */
void metrics_forget_unit(const char *unit);

/* The whole exposition into out. */
void metrics_render(struct buf *out);

#endif
