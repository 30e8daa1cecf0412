// SPDX-License-Identifier: Apache-2.0
/* spec.activeDeadlineSeconds (an extension: Kip does not send it): that
 * long after the agent first had the pod's spec (the kubelet counts from
 * the pod's start time, before any pull), every unit is stopped (preStop,
 * then the signal within the grace), reported terminated with the reason
 * DeadlineExceeded, and nothing starts or restarts again: the pod has
 * failed. The clock is the agent's: an agent restart starts it afresh. */
#include <stdio.h>

#include "log.h"
#include "sup-internal.h"

#define DEADLINE_MESSAGE                                                       \
	"Pod was active on the node longer than the specified deadline"

void deadline_tick(struct supervisor *s)
{
	uint64_t now = s->ops->now();

	if (!s->has_spec || !s->spec.active_deadline_s || s->deadline_hit)
		return;
	if (!s->pod_seen_ns) {
		s->pod_seen_ns = now;
		return;
	}
	if (now - s->pod_seen_ns <
	    (uint64_t)s->spec.active_deadline_s * 1000000000u)
		return;
	log_warn("the pod passed its activeDeadlineSeconds (%lld): it fails",
		 (long long)s->spec.active_deadline_s);
	s->deadline_hit = true;
	s->pod_failed = true; /* nothing starts or restarts */
	for (size_t i = 0; i < s->n_units; i++) {
		struct unit_rec *u = &s->units[i];

		unit_pull_cancel(s, u);
		if (u->phase != PH_RUNNING)
			continue;
		u->kill_reason = "DeadlineExceeded";
		snprintf(u->kill_message, sizeof(u->kill_message), "%s",
			 DEADLINE_MESSAGE);
		unit_stop(s, u, s->spec.termination_grace_s);
	}
}
