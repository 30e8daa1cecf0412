// SPDX-License-Identifier: Apache-2.0
/* Lifecycle hooks (an extension of the wire: Kip sends none), with the
 * kubelet's rules: postStart runs right after the run started, and until
 * it ends the unit is neither started nor ready and no probe runs; if it
 * fails, the unit is killed with the reason FailedPostStartHook (and
 * restarted as the policy says). preStop runs before the stop signal,
 * inside the grace period: the signal follows the hook with what is left
 * of the grace, 2 s at least (the kubelet's minimumGracePeriodInSeconds).
 * A hook's one attempt runs on the probe runner's threads, as a probe's
 * does, so the supervisor thread never waits for it. */
#include <stdio.h>
#include <string.h>

#include "cleanup.h"
#include "log.h"
#include "sup-internal.h"
#include "util.h"

#define POST_START_TIMEOUT_S 300 /* the kubelet has none; we bound it */
#define MIN_GRACE_S 2

static void hook_run(struct supervisor *s, struct unit_rec *u,
		     enum probe_which w, int timeout_s)
{
	cleanup_free char *run = unit_run_dir(u, u->seq);
	cleanup_free char *pod_ip = podnet_netns(s) ? podnet_pod_ip(s) : NULL;
	struct probe_ctx c = {.monitor_bin = s->o.monitor_bin,
			      .unit_dir = run,
			      .default_host = pod_ip};
	struct probe_job *j = probe_job_new(u->name, u->is_init, u->seq, w,
					    probe_of(u->spec, w), &c);

	j->probe.timeout_s = timeout_s > 0 ? timeout_s : 1;
	s->ops->probe_start(&s->probes, j);
}

bool hook_post_start(struct supervisor *s, struct unit_rec *u)
{
	if (!u->spec || u->spec->post_start.kind == PROBE_NONE)
		return false;
	u->post_start_pending = true;
	u->started = 0;
	u->ready = false;
	hook_run(s, u, PROBE_POST_START, POST_START_TIMEOUT_S);
	return true;
}

bool hook_pre_stop(struct supervisor *s, struct unit_rec *u, int64_t grace)
{
	/* Grace 0 is a forced stop: the kubelet runs no hook then. */
	if (!u->spec || u->spec->pre_stop.kind == PROBE_NONE || grace <= 0 ||
	    u->pre_stop_pending)
		return false;
	u->pre_stop_pending = true;
	u->stop_grace_s = grace;
	u->stop_begin_ns = s->ops->now();
	/* Still running (as under the kubelet), and so recorded: an agent
	 * restart during the hook finds it running, and a stop asked again
	 * runs the hook again rather than leaving it unstopped. */
	hook_run(s, u, PROBE_PRE_STOP, (int)grace);
	return true;
}

static void post_start_done(struct supervisor *s, struct unit_rec *u,
			    const struct probe_job *j)
{
	if (u->phase != PH_RUNNING || !u->post_start_pending)
		return;
	if (j->result == PROBE_SUCCESS) {
		unit_probes_restart(s, u); /* started, ready, probes from now */
		return;
	}
	log_warn("unit %s: postStart hook failed: %s; killing it", u->name,
		 j->why);
	u->post_start_pending = false;
	u->kill_reason = "FailedPostStartHook";
	snprintf(u->kill_message, sizeof(u->kill_message), "%s", j->why);
	unit_stop(s, u, s->spec.termination_grace_s);
}

static void pre_stop_done(struct supervisor *s, struct unit_rec *u,
			  const struct probe_job *j)
{
	uint64_t spent = s->ops->now() - u->stop_begin_ns;
	int64_t left = u->stop_grace_s - (int64_t)(spent / 1000000000u);

	if (u->phase != PH_RUNNING || !u->pre_stop_pending)
		return;
	if (j->result != PROBE_SUCCESS)
		log_warn("unit %s: preStop hook failed: %s", u->name, j->why);
	unit_send_stop(s, u, left < MIN_GRACE_S ? MIN_GRACE_S : left);
}

void hook_done(struct supervisor *s, struct unit_rec *u,
	       const struct probe_job *j)
{
	if (j->seq != u->seq || !u->spec)
		return; /* that run is over */
	if (j->which == PROBE_POST_START)
		post_start_done(s, u, j);
	else
		pre_stop_done(s, u, j);
}
