// SPDX-License-Identifier: Apache-2.0
/* Probe attempts off the supervisor thread. An exec probe waits for its
 * command and an httpGet or tcpSocket probe for the network, each up to
 * its timeoutSeconds: each attempt runs on a short-lived thread of its
 * own, and its result comes back on the runner's eventfd, which the
 * supervisor watches in its epoll set as it watches pidfds. A job holds
 * copies of what it needs, so a new spec or a moved unit record cannot
 * pull anything from under it; the supervisor matches a result to its
 * unit by name, kind and run number and drops it when that run is over. */
#ifndef CELL_PROBEJOB_H
#define CELL_PROBEJOB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "probe.h"

struct probe_runner;

struct probe_job {
	struct probe_job *next;
	struct probe_runner *runner;
	char *unit;
	bool is_init;
	int seq;	    /* the run it was taken for */
	uint64_t run_token; /* and that run's probes_init time */
	enum probe_which which;
	struct probe probe; /* a deep copy */
	char *monitor_bin, *unit_dir, *default_host;
	enum probe_result result;
	char why[200];
};

struct probe_runner {
	pthread_mutex_t mu;
	pthread_cond_t idle;
	int evfd;		/* readable when a result is in */
	size_t running;		/* attempts under way */
	struct probe_job *done; /* results not yet taken */
};

int probe_runner_init(struct probe_runner *r, struct cerr *e);
/* Run the job's attempt on a thread; its result goes to r->done. */
void probe_runner_start(struct probe_runner *r, struct probe_job *j);
/* The results in so far (a list through ->next), oldest first. */
struct probe_job *probe_runner_take(struct probe_runner *r);
/* Wait for the attempts under way (each bounded by its timeout), free
 * their results. */
void probe_runner_fini(struct probe_runner *r);

struct probe_job *probe_job_new(const char *unit, bool is_init, int seq,
				enum probe_which w, const struct probe *p,
				const struct probe_ctx *c);
void probe_job_free(struct probe_job *j);

#endif
