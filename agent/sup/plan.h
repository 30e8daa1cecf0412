// SPDX-License-Identifier: Apache-2.0
/* The supervisor's decisions, apart from doing them: what a pod's units
 * should do next, given what the records say and what time it is. Pure:
 * no I/O, no clock reads, no globals; the supervisor (the executor) builds
 * the view, calls a planner, and applies the actions it returns through
 * its ops table (sup-internal.h). tests/unit/test-supervisor.c drives these
 * on a fake clock.
 *
 *   plan_tick    records + now → start, stop, probe, adopt, …, wake at T
 *   plan_spec    records + the next spec → which units stop, restart, go
 *   plan_exit    one run's end → stay terminated, restart now, or back off
 *   plan_backoff_ns   the delay before restart n */
#ifndef CELL_PLAN_H
#define CELL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podspec.h"

enum unit_phase {
	PH_WAITING,  /* not started yet, or waiting for its back-off */
	PH_RUNNING,  /* a monitor is watching it */
	PH_STOPPING, /* asked to stop; the exit is still to come */
	PH_EXITED,   /* over, and it will not run again (policy or pod) */
	PH_FAILED,   /* could not start; the pod fails (startFailure) */
};

/* What the planners see of one unit record. */
struct plan_unit {
	const char *name;
	const char *fingerprint; /* of the spec it runs (plan_spec) */
	bool is_init;
	bool removed; /* no longer in the spec: goes once stopped */
	enum unit_phase phase;
	bool pulling;		/* its image pull runs */
	bool watched;		/* a pidfd watches its run */
	bool succeeded;		/* its last run exited 0 */
	bool probe_kill;	/* a liveness/startup probe failed for good */
	uint64_t not_before_ns; /* back-off: not to start before */
	uint64_t probe_due_ns;	/* its next probe; 0 none */
};

enum plan_op {
	/* plan_tick */
	PLAN_FINISH_RESTART, /* all stopped: drop the records, release the
				network, fresh records for the new spec */
	PLAN_DROP_STOPPED,   /* forget removed units that have stopped */
	PLAN_NET,	     /* the pod's network, set up or checked; a
				gate: nothing after it when not ready */
	PLAN_POD_FAILED,     /* an init unit failed for good */
	PLAN_START,	     /* a new run: its image pull first */
	PLAN_ADOPT,	     /* RUNNING without a watch: find its monitor */
	PLAN_PROBE,	     /* start its due probes */
	PLAN_STOP, /* SIGTERM, SIGKILL after grace_s; cancels a pull */
	/* plan_spec */
	PLAN_POD_RESTART, /* initUnits or the network changed: every record
			     goes (each running one also gets a PLAN_STOP) */
	PLAN_REMOVE,	  /* the unit left the spec (and stops) */
	PLAN_RESTART,	  /* changed while running: run again once stopped */
	PLAN_RESET,	  /* changed while not running: start afresh now */
	PLAN_RESPEC,	  /* changed while stopping: take the new spec */
};

struct plan_action {
	enum plan_op op;
	size_t unit; /* index into the view's units */
	int64_t grace_s;
};

struct plan {
	struct plan_action *v;
	size_t n, cap;
	uint64_t wake_ns; /* the next deadline after now; 0 none */
};

struct plan_pod {
	bool has_spec;
	bool pod_failed;
	bool pod_restarting; /* waiting for every unit to stop */
	int64_t grace_s;     /* the spec's terminationGracePeriodSeconds */
	const struct plan_unit *units; /* init units first, in order */
	size_t n_units;
	uint64_t now_ns;
};

void plan_tick(const struct plan_pod *pod, struct plan *out);

/* The next spec, as plan_spec compares it: names and fingerprints. */
struct plan_next {
	const struct unit_spec *init_units, *units;
	size_t n_init_units, n_units;
	int64_t grace_s;
	bool net_changed; /* pod IP or hostNetwork changed */
};

void plan_spec(const struct plan_unit *units, size_t n_units,
	       const struct plan_next *next, struct plan *out);

/* One run ended. */
struct plan_exit_in {
	enum restart_policy policy;
	bool is_init;
	bool going; /* removed, or the pod restarts or failed */
	bool restart_after_stop;
	int exit_code;
	uint64_t ran_ns; /* how long the run lasted */
	int backoff_n;	 /* restarts in a row without a long run */
	uint64_t now_ns;
	uint64_t backoff_unit_ns; /* a second, or less for tests */
};

enum plan_exit_kind {
	EXIT_STAY,	  /* PH_EXITED: it will not run again */
	EXIT_RESTART_NOW, /* its spec changed: run again at once */
	EXIT_BACKOFF,	  /* CrashLoopBackOff until not_before_ns */
};

struct plan_exit_out {
	enum plan_exit_kind kind;
	int backoff_n;
	uint64_t not_before_ns;
};

void plan_exit(const struct plan_exit_in *in, struct plan_exit_out *out);

/* The back-off before restart n (1, 2, …): 10 units doubling, at most 300
 * (the kubelet's 10 s to 5 min). */
uint64_t plan_backoff_ns(int n, uint64_t unit_ns);
/* A run at least this long resets the back-off (10 minutes). */
#define PLAN_LONG_RUN_NS (600ull * 1000000000ull)

/* How soon a run whose monitor is still setting up is looked at again. */
#define PLAN_ADOPT_RETRY_NS (50ull * 1000000ull)

void plan_free(struct plan *p);

#endif
