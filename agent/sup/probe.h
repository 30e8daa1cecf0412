// SPDX-License-Identifier: Apache-2.0
/* Container probes (liveness, readiness, startup) with Kubernetes semantics.
 *
 * probe_once runs one attempt (exec through `cell-monitor exec`, httpGet
 * over a plain socket or OpenSSL, tcpSocket), bounded by the probe's
 * timeout. The unit_probes state machine decides when each probe is due and
 * what the results mean (thresholds, initial delay, startup gating); it is
 * driven by the caller's clock so the supervisor can fold it into its own event
 * loop:
 *
 *   probes_init(&s, u, now)                    when a run of the unit starts
 *   deadline = probes_next_due(&s)             0: nothing to wait for
 *   ... at or after deadline:
 *   probes_run_due(&s, u, &ctx, now, &out)     out.ready, out.started,
 *                                              out.kill (restart the unit)
 *
 * probes_run_due runs the due attempts synchronously, each up to its
 * timeout_s. The supervisor runs them elsewhere instead (probejob.h):
 *
 *   n = probes_take_due(&s, u, now, which)     marks them in flight
 *   ... later, one attempt's result:
 *   probes_result(&s, u, which[i], r, why, now)
 *   probes_outcome(&s, u, &out) */
#ifndef CELL_PROBE_H
#define CELL_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "podspec.h"

enum probe_result { PROBE_SUCCESS, PROBE_FAILURE };

struct probe_ctx;
/* One attempt; why gets the reason of a failure ("HTTP 500"). */
typedef enum probe_result (*probe_attempt_fn)(const struct probe *p,
					      const struct probe_ctx *c,
					      char *why, size_t whysz);

struct probe_ctx {
	const char *monitor_bin;  /* for exec probes */
	const char *unit_dir;	  /* the running unit's directory */
	const char *default_host; /* httpGet/tcpSocket without a host;
				     NULL: 127.0.0.1 */
	/* Test seam: the attempt probes_run_due makes; NULL is probe_once. */
	probe_attempt_fn attempt;
	void *opaque; /* for attempt's use */
};

enum probe_result probe_once(const struct probe *p, const struct probe_ctx *c,
			     char *why, size_t whysz);
/* An httpGet probe's response head in b[0..n) (what a container sent): 0
 * while incomplete, -1 when malformed, else the final response's status
 * code, with [*start, *end) its status line and headers (interim 1xx
 * responses before it skipped) and *body the body bytes to read and drop
 * (Content-Length, capped at 10 KiB). Pure, for the fuzz harness. */
int probe_http_head(const char *b, size_t n, size_t *start, size_t *end,
		    size_t *body);

/* One probe's schedule and consecutive results. */
struct probe_state {
	bool scheduled; /* next_due_ns is meaningful */
	uint64_t next_due_ns;
	int successes, failures; /* consecutive */
	bool ok;		 /* the thresholded result */
	bool in_flight;		 /* an attempt runs; its result is to come */
};

/* PROBE_POST_START and PROBE_PRE_STOP: a lifecycle hook's one attempt,
 * run like a probe's (lifecycle.c), never part of a unit's probes. */
enum probe_which {
	PROBE_STARTUP,
	PROBE_LIVENESS,
	PROBE_READINESS,
	PROBE_POST_START,
	PROBE_PRE_STOP
};

struct unit_probes {
	uint64_t started_at_ns; /* when the run started (initial delays) */
	struct probe_state liveness, readiness, startup;
	bool started; /* no startup probe, or it has succeeded */
	bool kill;    /* a failure threshold was reached; nothing runs more */
	char why[256];
};

struct probe_outcome {
	bool ready;
	int started;   /* 0 or 1 (unit_status.started) */
	bool kill;     /* restart the unit (then probes_init again) */
	char why[256]; /* the last failure ("Liveness probe failed: …") */
};

void probes_init(struct unit_probes *s, const struct unit_spec *u,
		 uint64_t now_ns);
/* The earliest time a probe is due; 0 when none is scheduled. */
uint64_t probes_next_due(const struct unit_probes *s);
/* Run every probe due at now_ns (startup first, so that liveness and
 * readiness may start in the same call) and report the unit's state. Also
 * fills out when nothing is due. */
void probes_run_due(struct unit_probes *s, const struct unit_spec *u,
		    const struct probe_ctx *c, uint64_t now_ns,
		    struct probe_outcome *out);
/* The probes due at now_ns, each marked in flight (its next period
 * counted): startup alone until it has succeeded. Returns how many, in
 * which[]. */
size_t probes_take_due(struct unit_probes *s, const struct unit_spec *u,
		       uint64_t now_ns, enum probe_which which[3]);
/* Fold in one attempt's result (why: the failure's reason). */
void probes_result(struct unit_probes *s, const struct unit_spec *u,
		   enum probe_which w, enum probe_result r, const char *why,
		   uint64_t now_ns);
const struct probe *probe_of(const struct unit_spec *u, enum probe_which w);
/* The current state without running anything. */
void probes_outcome(const struct unit_probes *s, const struct unit_spec *u,
		    struct probe_outcome *out);

#endif
