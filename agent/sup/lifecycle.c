// SPDX-License-Identifier: Apache-2.0
/* Lifecycle hooks (an extension of the wire: Kip sends none), with the
 * kubelet's rules: postStart runs right after the run started, and until
 * it ends the unit is neither started nor ready and no probe runs; if it
 * fails, the unit is killed with the reason FailedPostStartHook (and
 * restarted as the policy says). preStop runs before the stop signal,
 * inside the grace period: the signal follows the hook with what is left
 * of the grace, 2 s at least (the kubelet's minimumGracePeriodInSeconds).
 * A hook's one attempt runs on the probe runner's threads, as a probe's
 * does, so the supervisor thread never waits for it.
 *
 * This file decides and keeps the hook's state in the record; what
 * follows a hook's end (probes, a kill, the signal) is unit.c's to carry
 * out (hook_done's answer), so the two never call each other in a circle.
 * A hook's end never needs the unit's spec: a unit removed by a new spec,
 * or by a pod restart, has none by then, and still needs its signal. */
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "log.h"
#include "sup-internal.h"
#include "util.h"

#define POST_START_TIMEOUT_S 300 /* the kubelet has none; we bound it */

static void hook_run(struct supervisor *s, struct unit_rec *u, const char *run,
		     enum probe_which w, int timeout_s, uint64_t token)
{
	cleanup_free char *pod_ip = podnet_netns(s) ? podnet_pod_ip(s) : NULL;
	struct probe_ctx c = {.monitor_bin = s->o.monitor_bin,
			      .unit_dir = run,
			      .default_host = pod_ip};
	struct probe_job *j = probe_job_new(u->name, u->is_init, u->seq, w,
					    probe_of(u->spec, w), &c);

	j->probe.timeout_s = timeout_s > 0 ? timeout_s : 1;
	j->run_token = token;
	s->ops->probe_start(&s->probes, j);
}

bool hook_post_start(struct supervisor *s, struct unit_rec *u, const char *run)
{
	if (!u->spec || u->spec->post_start.kind == PROBE_NONE)
		return false;
	u->post_start_pending = true;
	u->started = 0;
	u->ready = false;
	hook_run(s, u, run, PROBE_POST_START, POST_START_TIMEOUT_S, 0);
	return true;
}

bool hook_pre_stop(struct supervisor *s, struct unit_rec *u, const char *run,
		   int64_t grace)
{
	/* Grace 0 is a forced stop: the kubelet runs no hook then. A record
	 * without a spec (found at start-up, its unit no longer in the
	 * spec) has no hook to run. */
	if (!u->spec || u->spec->pre_stop.kind == PROBE_NONE || grace <= 0 ||
	    u->pre_stop_pending)
		return false;
	u->pre_stop_pending = true;
	u->stop_grace_s = grace;
	/* The grace counts from here, the hook's start (killContainer). */
	u->stop_begin_ns = s->ops->now();
	/* Still running (as under the kubelet), and so recorded: an agent
	 * restart during the hook finds it running, and a stop asked again
	 * runs the hook again rather than leaving it unstopped. */
	hook_run(s, u, run, PROBE_PRE_STOP, (int)grace, u->stop_begin_ns);
	return true;
}

void hook_run_over(struct unit_rec *u)
{
	u->post_start_pending = false;
	u->pre_stop_pending = false;
}

static int64_t grace_left(const struct supervisor *s, const struct unit_rec *u)
{
	uint64_t spent = s->ops->now() - u->stop_begin_ns;
	int64_t left = u->stop_grace_s - (int64_t)(spent / 1000000000u);

	return left < HOOK_MIN_GRACE_S ? HOOK_MIN_GRACE_S : left;
}

static struct hook_step post_start_done(struct supervisor *s,
					struct unit_rec *u,
					const struct probe_job *j)
{
	if (u->phase != PH_RUNNING || !u->post_start_pending)
		return (struct hook_step){HOOK_NOTHING, 0};
	u->post_start_pending = false;
	if (j->result == PROBE_SUCCESS)
		return (struct hook_step){HOOK_STARTED, 0};
	log_warn("unit %s: postStart hook failed: %s; killing it", u->name,
		 j->why);
	u->kill_reason = "FailedPostStartHook";
	snprintf(u->kill_message, sizeof(u->kill_message), "%s", j->why);
	return (struct hook_step){HOOK_KILL, s->spec.termination_grace_s};
}

static struct hook_step pre_stop_done(struct supervisor *s, struct unit_rec *u,
				      const struct probe_job *j)
{
	/* The token tells this stop's hook from an earlier one of a run
	 * with the same number (a pod restart counts runs from 1 again). */
	if (u->phase != PH_RUNNING || !u->pre_stop_pending ||
	    j->run_token != u->stop_begin_ns)
		return (struct hook_step){HOOK_NOTHING, 0};
	if (j->result != PROBE_SUCCESS)
		log_warn("unit %s: preStop hook failed: %s", u->name, j->why);
	u->pre_stop_pending = false;
	return (struct hook_step){HOOK_SIGNAL, grace_left(s, u)};
}

struct hook_step hook_abandon(struct supervisor *s, struct unit_rec *u)
{
	if (u->phase != PH_RUNNING || !u->pre_stop_pending)
		return (struct hook_step){HOOK_NOTHING, 0};
	log_warn("unit %s: preStop hook not over as the agent stops; "
		 "signalling it now",
		 u->name);
	u->pre_stop_pending = false;
	return (struct hook_step){HOOK_SIGNAL, grace_left(s, u)};
}

struct hook_step hook_done(struct supervisor *s, struct unit_rec *u,
			   const struct probe_job *j)
{
	if (j->seq != u->seq)
		return (struct hook_step){HOOK_NOTHING,
					  0}; /* that run is over */
	if (j->which == PROBE_POST_START)
		return post_start_done(s, u, j);
	return pre_stop_done(s, u, j);
}
