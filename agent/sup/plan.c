// SPDX-License-Identifier: Apache-2.0
/* The supervisor's planners (see plan.h): the kubelet's rules for restarts,
 * back-off, init units and spec changes, as functions of their inputs. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "podrun.h"
#include "util.h"

static void add(struct plan *p, enum plan_op op, size_t unit, int64_t grace)
{
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 8;
		p->v = xrealloc(p->v, p->cap * sizeof(*p->v));
	}
	p->v[p->n++] = (struct plan_action){op, unit, grace};
}

static void wake_at(struct plan *p, uint64_t t, uint64_t now)
{
	if (t > now && (p->wake_ns == 0 || t < p->wake_ns))
		p->wake_ns = t;
}

void plan_free(struct plan *p)
{
	free(p->v);
	memset(p, 0, sizeof(*p));
}

uint64_t plan_backoff_ns(int n, uint64_t unit_ns)
{
	return (uint64_t)podrun_backoff_s(n) * unit_ns;
}

/* ---- plan_tick ---- */

static bool active(const struct plan_unit *u)
{
	return u->phase == PH_RUNNING || u->phase == PH_STOPPING;
}

/* Waiting, no pull under way, back-off over. */
static bool due(const struct plan_unit *u, uint64_t now)
{
	return u->phase == PH_WAITING && !u->pulling && now >= u->not_before_ns;
}

/* Find the run's monitor; one still setting up is looked at again soon. */
static void adopt(const struct plan_pod *pod, size_t i, struct plan *out)
{
	add(out, PLAN_ADOPT, i, 0);
	wake_at(out, pod->now_ns + PLAN_ADOPT_RETRY_NS, pod->now_ns);
}

/* Init units one after the other, each to success. True once all have
 * succeeded; else what the current one needs is in out. */
static bool init_units(const struct plan_pod *pod, struct plan *out)
{
	for (size_t i = 0; i < pod->n_units; i++) {
		const struct plan_unit *u = &pod->units[i];

		if (!u->is_init || u->removed)
			continue;
		if (u->phase == PH_EXITED && u->succeeded)
			continue;
		if (u->phase == PH_EXITED || u->phase == PH_FAILED) {
			add(out, PLAN_POD_FAILED, i, 0); /* for good */
			return false;
		}
		if (due(u, pod->now_ns))
			add(out, PLAN_START, i, 0);
		else if (u->phase == PH_WAITING)
			wake_at(out, u->not_before_ns, pod->now_ns);
		else if (u->phase == PH_RUNNING && u->probe_kill)
			add(out, PLAN_STOP, i, pod->grace_s);
		else if (active(u) && !u->watched)
			adopt(pod, i, out);
		return false;
	}
	return true;
}

static void regular_unit(const struct plan_pod *pod, size_t i, struct plan *out)
{
	const struct plan_unit *u = &pod->units[i];
	uint64_t now = pod->now_ns;

	if (u->phase == PH_RUNNING && u->probe_kill) {
		add(out, PLAN_STOP, i, pod->grace_s);
		return;
	}
	if (active(u) && !u->watched) {
		adopt(pod, i, out); /* its monitor was setting up */
		return;
	}
	if (u->phase == PH_RUNNING && u->probe_due_ns) {
		if (u->probe_due_ns <= now)
			add(out, PLAN_PROBE, i, 0);
		else
			wake_at(out, u->probe_due_ns, now);
	}
	if (u->is_init || u->removed)
		return;
	if (due(u, now))
		add(out, PLAN_START, i, 0);
	else if (u->phase == PH_WAITING && !u->pulling)
		wake_at(out, u->not_before_ns, now);
}

void plan_tick(const struct plan_pod *pod, struct plan *out)
{
	bool any_removed = false;

	out->wake_ns = 0;
	if (!pod->has_spec)
		return;
	for (size_t i = 0; i < pod->n_units; i++)
		if (pod->units[i].removed && !active(&pod->units[i]))
			any_removed = true;
	if (pod->pod_restarting) {
		bool left = false;

		/* Their exits wake us; a run whose monitor was still setting
		 * up when it was asked to stop is found first, and told. */
		for (size_t i = 0; i < pod->n_units; i++)
			if (active(&pod->units[i])) {
				left = true;
				if (!pod->units[i].watched)
					adopt(pod, i, out);
			}
		if (!left)
			add(out, PLAN_FINISH_RESTART, 0, 0);
		return;
	}
	if (any_removed) {
		add(out, PLAN_DROP_STOPPED, 0, 0);
		return; /* the indices change: plan again */
	}
	if (pod->pod_failed)
		return;
	add(out, PLAN_NET, 0, 0);
	if (!init_units(pod, out))
		return;
	for (size_t i = 0; i < pod->n_units; i++)
		regular_unit(pod, i, out);
}

/* ---- plan_spec ---- */

static const struct unit_spec *find_spec(const struct unit_spec *v, size_t n,
					 const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

static const char *fp(const char *s)
{
	return s ? s : "";
}

/* Any change of initUnits (one added, removed, reordered or changed)
 * restarts the pod, as the kubelet does for an init container's image. */
static bool init_changed(const struct plan_unit *units, size_t n,
			 const struct plan_next *next)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		const struct plan_unit *u = &units[i];

		if (!u->is_init || u->removed)
			continue;
		if (k >= next->n_init_units ||
		    strcmp(u->name, next->init_units[k].name) ||
		    strcmp(fp(u->fingerprint),
			   fp(next->init_units[k].fingerprint)))
			return true;
		k++;
	}
	return k != next->n_init_units;
}

static bool stoppable(const struct plan_unit *u)
{
	return u->phase == PH_RUNNING || u->pulling;
}

void plan_spec(const struct plan_unit *units, size_t n_units,
	       const struct plan_next *next, struct plan *out)
{
	out->wake_ns = 0;
	if (next->net_changed || init_changed(units, n_units, next)) {
		add(out, PLAN_POD_RESTART, 0, 0);
		for (size_t i = 0; i < n_units; i++)
			if (stoppable(&units[i]))
				add(out, PLAN_STOP, i, next->grace_s);
		return;
	}
	for (size_t i = 0; i < n_units; i++) {
		const struct plan_unit *u = &units[i];
		const struct unit_spec *ns;

		if (u->is_init)
			continue;
		ns = find_spec(next->units, next->n_units, u->name);
		if (!ns) {
			if (!u->removed)
				add(out, PLAN_REMOVE, i, 0);
			if (stoppable(u))
				add(out, PLAN_STOP, i, next->grace_s);
			continue;
		}
		if (!strcmp(fp(u->fingerprint), fp(ns->fingerprint)))
			continue; /* the same unit: left alone */
		if (u->phase == PH_RUNNING) {
			add(out, PLAN_RESTART, i, 0);
			add(out, PLAN_STOP, i, next->grace_s);
		} else if (u->phase == PH_STOPPING) {
			add(out, PLAN_RESPEC, i, 0);
		} else {
			add(out, PLAN_RESET, i, 0); /* cancels its pull */
		}
	}
}

/* ---- plan_exit ---- */

void plan_exit(const struct plan_exit_in *in, struct plan_exit_out *out)
{
	enum restart_policy p = in->policy;

	out->backoff_n = in->backoff_n;
	out->not_before_ns = 0;
	/* Init units run to success: Always behaves as OnFailure. */
	if (in->is_init && p == RESTART_ALWAYS)
		p = RESTART_ON_FAILURE;
	if (in->going) {
		out->kind = EXIT_STAY;
		return;
	}
	if (in->restart_after_stop) {
		out->kind = EXIT_RESTART_NOW;
		out->backoff_n = 0;
		return;
	}
	if (!podrun_should_restart(p, in->exit_code)) {
		out->kind = EXIT_STAY;
		return;
	}
	if (in->ran_ns >= PLAN_LONG_RUN_NS)
		out->backoff_n = 0;
	out->backoff_n++;
	out->kind = EXIT_BACKOFF;
	out->not_before_ns =
	    in->now_ns + plan_backoff_ns(out->backoff_n, in->backoff_unit_ns);
}
