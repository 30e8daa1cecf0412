// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the supervisor's decisions (agent/sup/plan.c) on a fake clock:
 * restart policies, back-off with its cap and reset, init units in order,
 * spec changes (and the reordered spec Kip re-sends, which restarts
 * nothing), probes that stop a unit, readiness and startup gating. A small
 * executor here applies the plans the way agent/sup/supervisor.c does (a start
 * is a run at once, a stop an exit 137), so sequences of runs are checked
 * as a whole, not only single decisions. */
/* The fixtures build spec structs from string literals. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../lib/listen.h"
#include "../lib/tap.h"
#include "podspec.h"
#include "plan.h"
#include "probe.h"
#include "probejob.h"
#include "sup-internal.h"
#include "util.h"

#define S 1000000000ull

static size_t count_op(const struct plan *p, enum plan_op op)
{
	size_t n = 0;

	for (size_t i = 0; i < p->n; i++)
		n += p->v[i].op == op;
	return n;
}

static bool has(const struct plan *p, enum plan_op op, size_t unit)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].op == op && p->v[i].unit == unit)
			return true;
	return false;
}

/* ---- a fake executor: a pod of units on a fake clock ---- */

struct sim {
	enum restart_policy policy;
	uint64_t now;
	struct plan_unit u[4];
	int backoff_n[4];
	uint64_t started[4];
	int starts[4];
	bool pod_failed;
	size_t n;
};

static void sim_init(struct sim *s, enum restart_policy p, size_t n_init,
		     size_t n)
{
	static const char *names[] = {"a", "b", "c", "d"};

	memset(s, 0, sizeof(*s));
	s->policy = p;
	s->now = 1000 * S;
	s->n = n;
	for (size_t i = 0; i < n; i++) {
		s->u[i].name = names[i];
		s->u[i].is_init = i < n_init;
		s->u[i].phase = PH_WAITING;
		s->u[i].fingerprint = "f";
	}
}

/* One tick: plan, then do what it says. */
static void sim_tick(struct sim *s, struct plan *out)
{
	struct plan_pod pod = {.has_spec = true,
			       .pod_failed = s->pod_failed,
			       .grace_s = 30,
			       .units = s->u,
			       .n_units = s->n,
			       .now_ns = s->now};

	plan_free(out);
	plan_tick(&pod, out);
	for (size_t i = 0; i < out->n; i++) {
		struct plan_action *a = &out->v[i];
		struct plan_unit *u = &s->u[a->unit];

		if (a->op == PLAN_POD_FAILED)
			s->pod_failed = true;
		if (a->op == PLAN_START) {
			u->phase = PH_RUNNING;
			u->watched = true;
			s->started[a->unit] = s->now;
			s->starts[a->unit]++;
		}
		if (a->op == PLAN_STOP)
			u->phase = PH_STOPPING;
	}
}

/* Unit i's run ends with code after running for ran. */
static enum plan_exit_kind sim_exit(struct sim *s, size_t i, int code)
{
	struct plan_exit_in in = {.policy = s->policy,
				  .is_init = s->u[i].is_init,
				  .going = s->pod_failed,
				  .exit_code = code,
				  .ran_ns = s->now - s->started[i],
				  .backoff_n = s->backoff_n[i],
				  .now_ns = s->now,
				  .backoff_unit_ns = S};
	struct plan_exit_out out;

	plan_exit(&in, &out);
	s->backoff_n[i] = out.backoff_n;
	s->u[i].watched = false;
	s->u[i].succeeded = code == 0;
	s->u[i].phase = out.kind == EXIT_STAY ? PH_EXITED : PH_WAITING;
	s->u[i].not_before_ns = out.not_before_ns;
	return out.kind;
}

/* ---- back-off ---- */

static void test_backoff(void)
{
	static const unsigned want[] = {10, 20, 40, 80, 160, 300, 300, 300};

	for (int n = 1; n <= 8; n++)
		ok(plan_backoff_ns(n, S) == want[n - 1] * S,
		   "back-off before restart %d: %us", n, want[n - 1]);
	ok(plan_backoff_ns(3, 1000000) == 40 * 1000000ull,
	   "back-off: the unit scales it (tests' milliseconds)");
}

/* An Always unit that keeps failing: 10 s, 20 s, … 300 s apart, never
 * started early; a run of 10 minutes resets the back-off. */
static void test_crash_loop(void)
{
	struct sim s;
	struct plan p = {0};
	uint64_t gaps[8];
	bool early = false;

	sim_init(&s, RESTART_ALWAYS, 0, 1);
	sim_tick(&s, &p);
	ok(s.starts[0] == 1 && has(&p, PLAN_NET, 0),
	   "crash loop: the first run starts at once, after the network");
	for (int k = 0; k < 8; k++) {
		uint64_t exited;

		s.now += 1 * S;
		ok(sim_exit(&s, 0, 1) == EXIT_BACKOFF,
		   "crash loop: exit %d backs off", k + 1);
		exited = s.now;
		sim_tick(&s, &p);
		early |= s.starts[0] != k + 1;
		ok(p.wake_ns == s.u[0].not_before_ns,
		   "crash loop: the plan wakes at the back-off's end");
		s.now = p.wake_ns - 1;
		sim_tick(&s, &p);
		early |= s.starts[0] != k + 1;
		s.now += 1;
		sim_tick(&s, &p);
		gaps[k] = s.now - exited;
	}
	ok(!early, "crash loop: never started before its back-off ended");
	ok(gaps[0] == 10 * S && gaps[1] == 20 * S && gaps[2] == 40 * S &&
	       gaps[3] == 80 * S && gaps[4] == 160 * S && gaps[5] == 300 * S &&
	       gaps[7] == 300 * S,
	   "crash loop: 10, 20, 40, 80, 160, 300, 300 s (the kubelet's)");
	s.now += 600 * S; /* a long run */
	sim_exit(&s, 0, 1);
	ok(s.u[0].not_before_ns == s.now + 10 * S,
	   "crash loop: a 10-minute run resets the back-off to 10 s");
	s.now += 599 * S;
	sim_tick(&s, &p);
	s.now += 599 * S;
	sim_exit(&s, 0, 1);
	ok(s.u[0].not_before_ns == s.now + 20 * S,
	   "crash loop: a shorter run does not");
	plan_free(&p);
}

/* ---- restart policies ---- */

static enum plan_exit_kind exit_kind(enum restart_policy p, bool init, int code)
{
	struct plan_exit_in in = {.policy = p,
				  .is_init = init,
				  .exit_code = code,
				  .now_ns = S,
				  .backoff_unit_ns = S};
	struct plan_exit_out out;

	plan_exit(&in, &out);
	return out.kind;
}

static void test_policies(void)
{
	struct plan_exit_in in = {.policy = RESTART_ALWAYS,
				  .exit_code = 1,
				  .backoff_n = 4,
				  .now_ns = 50 * S,
				  .backoff_unit_ns = S};
	struct plan_exit_out out;

	ok(exit_kind(RESTART_ALWAYS, false, 0) == EXIT_BACKOFF &&
	       exit_kind(RESTART_ALWAYS, false, 2) == EXIT_BACKOFF,
	   "Always: restarts after success and failure");
	ok(exit_kind(RESTART_ON_FAILURE, false, 0) == EXIT_STAY &&
	       exit_kind(RESTART_ON_FAILURE, false, 137) == EXIT_BACKOFF,
	   "OnFailure: restarts only after a failure");
	ok(exit_kind(RESTART_NEVER, false, 0) == EXIT_STAY &&
	       exit_kind(RESTART_NEVER, false, 1) == EXIT_STAY,
	   "Never: stays terminated");
	ok(exit_kind(RESTART_ALWAYS, true, 0) == EXIT_STAY &&
	       exit_kind(RESTART_ALWAYS, true, 1) == EXIT_BACKOFF,
	   "init units: Always behaves as OnFailure");
	plan_exit(&in, &out);
	ok(out.kind == EXIT_BACKOFF && out.backoff_n == 5 &&
	       out.not_before_ns == 50 * S + 160 * S,
	   "restart 5 waits 160 s");
	in.going = true;
	plan_exit(&in, &out);
	ok(out.kind == EXIT_STAY && out.backoff_n == 4,
	   "a removed unit (or a pod restarting or failed) stays down");
	in.going = false;
	in.restart_after_stop = true;
	plan_exit(&in, &out);
	ok(out.kind == EXIT_RESTART_NOW && out.backoff_n == 0 &&
	       out.not_before_ns == 0,
	   "stopped for a spec change: runs again at once, back-off reset");
}

/* ---- init units ---- */

static void test_init_order(void)
{
	struct sim s;
	struct plan p = {0};

	/* a, b: init units; c, d: regular. */
	sim_init(&s, RESTART_ALWAYS, 2, 4);
	sim_tick(&s, &p);
	ok(s.starts[0] == 1 && !s.starts[1] && !s.starts[2] && !s.starts[3],
	   "init: only the first init unit starts");
	s.now += 5 * S;
	sim_tick(&s, &p);
	ok(s.starts[0] == 1 && !s.starts[1], "init: b waits while a runs");
	sim_exit(&s, 0, 0);
	sim_tick(&s, &p);
	ok(s.starts[1] == 1 && !s.starts[2], "init: a done, then b alone");
	s.now += 1 * S;
	ok(sim_exit(&s, 1, 3) == EXIT_BACKOFF,
	   "init (Always): a failed init unit backs off");
	sim_tick(&s, &p);
	ok(!s.starts[2] && !count_op(&p, PLAN_POD_FAILED) &&
	       p.wake_ns == s.now + 10 * S,
	   "init: regular units wait out b's back-off");
	s.now += 10 * S;
	sim_tick(&s, &p);
	ok(s.starts[1] == 2 && !s.starts[2], "init: b runs again");
	sim_exit(&s, 1, 0);
	sim_tick(&s, &p);
	ok(s.starts[0] == 1 && s.starts[1] == 2 && s.starts[2] == 1 &&
	       s.starts[3] == 1,
	   "init: all succeeded; every regular unit starts, init units not "
	   "again");
	plan_free(&p);

	sim_init(&s, RESTART_ON_FAILURE, 1, 2);
	sim_tick(&s, &p);
	sim_exit(&s, 0, 1);
	sim_tick(&s, &p);
	ok(!s.pod_failed && !s.starts[1],
	   "init (OnFailure): a failure is retried, the pod waits");
	plan_free(&p);

	sim_init(&s, RESTART_NEVER, 2, 3);
	sim_tick(&s, &p);
	ok(sim_exit(&s, 0, 1) == EXIT_STAY, "init (Never): a failure stays");
	sim_tick(&s, &p);
	ok(s.pod_failed && has(&p, PLAN_POD_FAILED, 0) && !s.starts[1] &&
	       !s.starts[2],
	   "init (Never): the pod fails; nothing after it starts");
	s.now += 3600 * S;
	sim_tick(&s, &p);
	ok(p.n == 0 && !s.starts[2], "init (Never): and nothing ever does");
	plan_free(&p);

	sim_init(&s, RESTART_NEVER, 1, 2);
	sim_tick(&s, &p);
	sim_exit(&s, 0, 0);
	sim_tick(&s, &p);
	ok(!s.pod_failed && s.starts[1] == 1,
	   "init (Never): success goes on to the regular units");
	s.u[0].phase = PH_FAILED; /* a setup error (startFailure) */
	s.u[0].succeeded = false;
	s.pod_failed = false;
	sim_tick(&s, &p);
	ok(has(&p, PLAN_POD_FAILED, 0), "init: a setup failure fails the pod");
	plan_free(&p);
}

/* ---- plan_tick's other cases ---- */

static void test_tick(void)
{
	struct plan_unit u[3] = {
	    {.name = "a", .phase = PH_RUNNING, .watched = false},
	    {.name = "b", .phase = PH_WAITING, .pulling = true},
	    {.name = "c",
	     .phase = PH_RUNNING,
	     .watched = true,
	     .probe_due_ns = 7 * S}};
	struct plan_pod pod = {.has_spec = true,
			       .grace_s = 12,
			       .units = u,
			       .n_units = 3,
			       .now_ns = 5 * S};
	struct plan p = {0};

	plan_tick(&pod, &p);
	ok(has(&p, PLAN_ADOPT, 0), "tick: a run without a watch is adopted");
	ok(p.wake_ns == 5 * S + PLAN_ADOPT_RETRY_NS,
	   "tick: and looked at again soon (its monitor may be setting up)");
	ok(!has(&p, PLAN_START, 1), "tick: a pulling unit is left to its pull");
	plan_free(&p);
	u[0].phase = PH_STOPPING; /* asked to stop while its monitor set up */
	plan_tick(&pod, &p);
	ok(has(&p, PLAN_ADOPT, 0),
	   "tick: a stopping run without a watch is adopted too");
	plan_free(&p);
	u[0].phase = PH_RUNNING;
	u[0].watched = true; /* adopted */
	plan_tick(&pod, &p);
	ok(!has(&p, PLAN_PROBE, 2) && p.wake_ns == 7 * S,
	   "tick: a probe not yet due sets the wake-up");
	plan_free(&p);
	pod.now_ns = 7 * S;
	u[2].probe_kill = false;
	plan_tick(&pod, &p);
	ok(has(&p, PLAN_PROBE, 2), "tick: a due probe is started");
	plan_free(&p);
	u[2].probe_kill = true;
	plan_tick(&pod, &p);
	ok(has(&p, PLAN_STOP, 2) && !has(&p, PLAN_PROBE, 2) &&
	       p.v[p.n - 1].grace_s == 12,
	   "tick: a failed liveness probe stops the unit with the grace");
	plan_free(&p);
	u[2].probe_kill = false;

	pod.has_spec = false;
	plan_tick(&pod, &p);
	ok(p.n == 0, "tick: no spec, nothing to do");
	plan_free(&p);
	pod.has_spec = true;

	u[1].removed = true;
	u[1].pulling = false;
	u[1].phase = PH_EXITED;
	plan_tick(&pod, &p);
	ok(p.n == 1 && p.v[0].op == PLAN_DROP_STOPPED,
	   "tick: a removed unit that stopped is dropped first");
	plan_free(&p);

	pod.pod_restarting = true;
	plan_tick(&pod, &p);
	ok(p.n == 0, "pod restart: waits while units still run");
	plan_free(&p);
	u[0].watched = false;
	u[0].phase = PH_STOPPING;
	plan_tick(&pod, &p);
	ok(p.n == 1 && has(&p, PLAN_ADOPT, 0),
	   "pod restart: a stopping run without a watch is adopted");
	plan_free(&p);
	u[0].watched = true;
	u[0].phase = u[2].phase = PH_EXITED;
	plan_tick(&pod, &p);
	ok(p.n == 1 && p.v[0].op == PLAN_FINISH_RESTART,
	   "pod restart: once all stopped, starts over");
	plan_free(&p);
}

/* ---- spec changes ---- */

static struct plan plan_for(struct plan_unit *u, size_t n,
			    struct unit_spec *init, size_t n_init,
			    struct unit_spec *units, size_t n_units, bool net)
{
	struct plan_next next = {.init_units = init,
				 .units = units,
				 .n_init_units = n_init,
				 .n_units = n_units,
				 .grace_s = 7,
				 .net_changed = net};
	struct plan p = {0};

	plan_spec(u, n, &next, &p);
	return p;
}

static void test_spec_changes(void)
{
	struct plan_unit u[4] = {
	    {.name = "i",
	     .is_init = true,
	     .phase = PH_EXITED,
	     .fingerprint = "i1"},
	    {.name = "a", .phase = PH_RUNNING, .fingerprint = "a1"},
	    {.name = "b", .phase = PH_WAITING, .fingerprint = "b1"},
	    {.name = "c", .phase = PH_STOPPING, .fingerprint = "c1"}};
	struct unit_spec init[] = {{.name = "i", .fingerprint = "i1"},
				   {.name = "j", .fingerprint = "j1"}};
	struct unit_spec same[] = {{.name = "c", .fingerprint = "c1"},
				   {.name = "a", .fingerprint = "a1"},
				   {.name = "b", .fingerprint = "b1"}};
	struct unit_spec changed[] = {{.name = "a", .fingerprint = "a2"},
				      {.name = "b", .fingerprint = "b2"},
				      {.name = "c", .fingerprint = "c2"},
				      {.name = "new", .fingerprint = "n1"}};
	struct plan p;

	p = plan_for(u, 4, init, 1, same, 3, false);
	ok(p.n == 0, "spec: the same units (in another order) change nothing");
	plan_free(&p);

	p = plan_for(u, 4, init, 1, changed, 4, false);
	ok(has(&p, PLAN_RESTART, 1) && has(&p, PLAN_STOP, 1),
	   "spec: a changed running unit stops, to run again");
	ok(has(&p, PLAN_RESET, 2) && !has(&p, PLAN_STOP, 2),
	   "spec: a changed waiting unit starts afresh (its pull cancelled)");
	ok(has(&p, PLAN_RESPEC, 3) && !has(&p, PLAN_STOP, 3),
	   "spec: a changed stopping unit takes the new spec");
	ok(p.v[1].op == PLAN_STOP && p.v[1].grace_s == 7,
	   "spec: stops with the new spec's grace period");
	ok(!count_op(&p, PLAN_POD_RESTART) && !has(&p, PLAN_STOP, 0),
	   "spec: regular units' changes leave the init units alone");
	plan_free(&p);

	p = plan_for(u, 4, init, 1, same + 1, 1, false);
	ok(has(&p, PLAN_REMOVE, 2) && !has(&p, PLAN_STOP, 2) &&
	       has(&p, PLAN_REMOVE, 3) && p.n == 2,
	   "spec: removed units go; only running ones need a stop");
	plan_free(&p);
	p = plan_for(u, 4, init, 1, same + 2, 1, false);
	ok(has(&p, PLAN_REMOVE, 1) && has(&p, PLAN_STOP, 1) &&
	       !has(&p, PLAN_REMOVE, 2),
	   "spec: a removed running unit is stopped; the others untouched");
	plan_free(&p);

	p = plan_for(u, 4, init, 2, same, 3, false);
	ok(p.n >= 1 && p.v[0].op == PLAN_POD_RESTART && has(&p, PLAN_STOP, 1) &&
	       count_op(&p, PLAN_STOP) == 1,
	   "spec: an init unit added restarts the pod (running units stop)");
	plan_free(&p);
	p = plan_for(u, 4, NULL, 0, same, 3, false);
	ok(count_op(&p, PLAN_POD_RESTART) == 1,
	   "spec: an init unit removed restarts the pod");
	plan_free(&p);
	init[0].fingerprint = "i2";
	p = plan_for(u, 4, init, 1, same, 3, false);
	ok(count_op(&p, PLAN_POD_RESTART) == 1,
	   "spec: an init unit changed restarts the pod");
	plan_free(&p);
	init[0].fingerprint = "i1";
	p = plan_for(u, 4, init, 1, same, 3, true);
	ok(count_op(&p, PLAN_POD_RESTART) == 1,
	   "spec: a new pod IP or hostNetwork restarts the pod");
	plan_free(&p);
}

/* What Kip sends again after any change of the pod: env and volumeMounts
 * rebuilt from Go maps, in another order. Through the real parser. */
static const char pod_v1[] =
    "{\"spec\":{\"restartPolicy\":\"Always\",\"units\":[{\"name\":\"a\","
    "\"image\":\"busybox\",\"env\":[{\"name\":\"X\",\"value\":\"1\"},"
    "{\"name\":\"Y\",\"value\":\"2\"}],\"volumeMounts\":[{\"name\":\"v1\","
    "\"mountPath\":\"/one\"},{\"name\":\"v2\",\"mountPath\":\"/two\"}]}],"
    "\"volumes\":[{\"name\":\"v1\",\"emptyDir\":{}},{\"name\":\"v2\","
    "\"emptyDir\":{}}]}}";
static const char pod_v2[] =
    "{\"spec\":{\"volumes\":[{\"name\":\"v2\",\"emptyDir\":{}},{\"name\":"
    "\"v1\",\"emptyDir\":{}}],\"units\":[{\"volumeMounts\":[{\"mountPath\":"
    "\"/two\",\"name\":\"v2\"},{\"name\":\"v1\",\"mountPath\":\"/one\"}],"
    "\"env\":[{\"name\":\"Y\",\"value\":\"2\"},{\"value\":\"1\",\"name\":"
    "\"X\"}],\"image\":\"busybox\",\"name\":\"a\"}],\"restartPolicy\":"
    "\"Always\"}}";
static const char pod_v3[] =
    "{\"spec\":{\"restartPolicy\":\"Always\",\"units\":[{\"name\":\"a\","
    "\"image\":\"busybox\",\"env\":[{\"name\":\"X\",\"value\":\"1\"},"
    "{\"name\":\"Y\",\"value\":\"3\"}],\"volumeMounts\":[{\"name\":\"v1\","
    "\"mountPath\":\"/one\"},{\"name\":\"v2\",\"mountPath\":\"/two\"}]}],"
    "\"volumes\":[{\"name\":\"v1\",\"emptyDir\":{}},{\"name\":\"v2\","
    "\"emptyDir\":{}}]}}";

static void test_kip_resend(void)
{
	struct pod_spec a, b, c;
	struct cerr e = {0};
	struct plan_unit u = {.name = "a", .phase = PH_RUNNING};
	struct plan p;
	int ra = wire_parse_pod(pod_v1, strlen(pod_v1), &a, &e);
	int rb = wire_parse_pod(pod_v2, strlen(pod_v2), &b, &e);
	int rc = wire_parse_pod(pod_v3, strlen(pod_v3), &c, &e);

	ok(ra == 0 && rb == 0 && rc == 0, "resend: the specs parse (%s)",
	   e.msg);
	if (ra || rb || rc)
		return;
	u.fingerprint = a.units[0].fingerprint;
	p = plan_for(&u, 1, NULL, 0, b.units, b.n_units, false);
	ok(p.n == 0, "resend: env and mounts in another order restart nothing");
	plan_free(&p);
	p = plan_for(&u, 1, NULL, 0, c.units, c.n_units, false);
	ok(has(&p, PLAN_RESTART, 0) && has(&p, PLAN_STOP, 0),
	   "resend: a changed env value restarts the unit");
	plan_free(&p);
	pod_spec_free(&a);
	pod_spec_free(&b);
	pod_spec_free(&c);
}

/* ---- probes in the plan ---- */

static void test_liveness_restart(void)
{
	struct unit_spec us = {.name = "a",
			       .liveness = {.kind = PROBE_TCP,
					    .period_s = 5,
					    .failure_threshold = 2,
					    .success_threshold = 1}};
	struct unit_probes pr;
	struct sim s;
	struct plan p = {0};
	enum probe_which w[3];

	sim_init(&s, RESTART_ALWAYS, 0, 1);
	sim_tick(&s, &p);
	probes_init(&pr, &us, s.now);
	s.u[0].probe_due_ns = probes_next_due(&pr);
	sim_tick(&s, &p);
	ok(has(&p, PLAN_PROBE, 0), "liveness: due at once without a delay");
	ok(probes_take_due(&pr, &us, s.now, w) == 1 && w[0] == PROBE_LIVENESS,
	   "liveness: taken, in flight");
	ok(probes_next_due(&pr) == 0,
	   "liveness: not due again while its attempt runs");
	probes_result(&pr, &us, PROBE_LIVENESS, PROBE_FAILURE, "refused",
		      s.now);
	ok(!pr.kill && probes_next_due(&pr) == s.now + 5 * S,
	   "liveness: one failure is under the threshold; next in 5 s");
	s.now += 5 * S;
	probes_take_due(&pr, &us, s.now, w);
	probes_result(&pr, &us, PROBE_LIVENESS, PROBE_FAILURE, "refused",
		      s.now);
	s.u[0].probe_kill = pr.kill;
	sim_tick(&s, &p);
	ok(pr.kill && has(&p, PLAN_STOP, 0) && s.u[0].phase == PH_STOPPING,
	   "liveness: the second failure stops the unit (%s)", pr.why);
	s.now += 1 * S;
	ok(sim_exit(&s, 0, 137) == EXIT_BACKOFF,
	   "liveness: Always restarts it after a back-off");
	s.u[0].probe_kill = false;
	s.now += 10 * S;
	sim_tick(&s, &p);
	ok(s.starts[0] == 2, "liveness: and it runs again");
	plan_free(&p);
	s.policy = RESTART_NEVER;
	s.u[0].probe_kill = true;
	sim_tick(&s, &p);
	ok(sim_exit(&s, 0, 137) == EXIT_STAY,
	   "liveness: under Never a killed unit stays terminated");
	plan_free(&p);
}

static void test_readiness_startup(void)
{
	struct unit_spec us = {.name = "a",
			       .startup = {.kind = PROBE_TCP,
					   .period_s = 1,
					   .failure_threshold = 3,
					   .success_threshold = 1},
			       .liveness = {.kind = PROBE_TCP,
					    .initial_delay_s = 20,
					    .period_s = 10,
					    .failure_threshold = 3,
					    .success_threshold = 1},
			       .readiness = {.kind = PROBE_TCP,
					     .period_s = 2,
					     .failure_threshold = 1,
					     .success_threshold = 2}};
	struct unit_probes pr;
	struct probe_outcome o;
	enum probe_which w[3];
	uint64_t t0 = 100 * S;

	probes_init(&pr, &us, t0);
	probes_outcome(&pr, &us, &o);
	ok(!o.started && !o.ready, "startup: not started, not ready at first");
	ok(probes_take_due(&pr, &us, t0, w) == 1 && w[0] == PROBE_STARTUP,
	   "startup: alone at first (liveness and readiness wait for it)");
	probes_result(&pr, &us, PROBE_STARTUP, PROBE_SUCCESS, "", t0);
	probes_outcome(&pr, &us, &o);
	ok(o.started && !o.ready, "startup: succeeded; not yet ready");
	ok(probes_take_due(&pr, &us, t0, w) == 1 && w[0] == PROBE_READINESS,
	   "readiness: due at once; liveness waits its initial delay");
	probes_result(&pr, &us, PROBE_READINESS, PROBE_SUCCESS, "", t0);
	probes_outcome(&pr, &us, &o);
	ok(!o.ready, "readiness: one success of two is not enough");
	ok(probes_take_due(&pr, &us, t0 + 2 * S, w) == 1,
	   "readiness: again a period later");
	probes_result(&pr, &us, PROBE_READINESS, PROBE_SUCCESS, "", t0 + 2 * S);
	probes_outcome(&pr, &us, &o);
	ok(o.ready, "readiness: ready after two successes");
	probes_take_due(&pr, &us, t0 + 4 * S, w);
	probes_result(&pr, &us, PROBE_READINESS, PROBE_FAILURE, "HTTP 500",
		      t0 + 4 * S);
	probes_outcome(&pr, &us, &o);
	ok(!o.ready && !o.kill,
	   "readiness: a failure makes it unready, never stops it");
	ok(probes_take_due(&pr, &us, t0 + 20 * S, w) == 2 &&
	       w[0] == PROBE_LIVENESS,
	   "liveness: due once its delay from the start has passed");
	probes_result(&pr, &us, PROBE_READINESS, PROBE_SUCCESS, "",
		      t0 + 27 * S);
	ok(probes_next_due(&pr) == t0 + 29 * S,
	   "readiness: an attempt that outlasted its period runs again a "
	   "period after it ended");

	probes_init(&pr, &us, t0);
	for (int i = 0; i < 3; i++) {
		probes_take_due(&pr, &us, t0 + (uint64_t)i * S, w);
		probes_result(&pr, &us, PROBE_STARTUP, PROBE_FAILURE, "no",
			      t0 + (uint64_t)i * S);
	}
	probes_outcome(&pr, &us, &o);
	ok(o.kill && !o.started,
	   "startup: the failure threshold stops the unit");
	/* A result that arrives after the kill changes nothing. */
	probes_result(&pr, &us, PROBE_STARTUP, PROBE_SUCCESS, "", t0 + 3 * S);
	probes_outcome(&pr, &us, &o);
	ok(o.kill && !o.started, "startup: a late success is ignored");
}

/* ---- probe attempts off the supervisor thread ---- */

/* Wait (up to 10 s) for n results; returns how many came. */
static size_t collect(struct probe_runner *r, struct probe_job **got, size_t n)
{
	size_t k = 0;

	for (int waited = 0; k < n && waited < 100; waited++) {
		struct pollfd pf = {.fd = r->evfd, .events = POLLIN};
		struct probe_job *j;

		if (poll(&pf, 1, 100) <= 0)
			continue;
		for (j = probe_runner_take(r); j; j = j->next)
			if (k < n)
				got[k++] = j;
	}
	return k;
}

static void test_probe_runner(void)
{
	struct probe_runner r;
	struct cerr e = {0};
	int port = 0, fd = listen_any(&port);
	struct probe slow = {.kind = PROBE_HTTP,
			     .path = "/healthz",
			     .port = port,
			     .timeout_s = 1};
	struct probe quick = {.kind = PROBE_TCP, .port = port, .timeout_s = 1};
	struct probe_ctx c = {0};
	struct probe_job *got[2] = {0};
	uint64_t t0;

	ok(fd >= 0 && probe_runner_init(&r, &e) == 0, "runner: set up");
	t0 = now_ns();
	probe_runner_start(
	    &r, probe_job_new("a", false, 3, PROBE_LIVENESS, &slow, &c));
	probe_runner_start(
	    &r, probe_job_new("b", true, 1, PROBE_READINESS, &quick, &c));
	/* A loose upper bound: the attempt itself takes its 1 s timeout. */
	ok(now_ns() - t0 < 500 * 1000000ull,
	   "runner: starting attempts does not wait for them");
	ok(collect(&r, got, 2) == 2, "runner: both results come back");
	ok(got[0] && !strcmp(got[0]->unit, "b") && got[0]->is_init &&
	       got[0]->seq == 1 && got[0]->which == PROBE_READINESS &&
	       got[0]->result == PROBE_SUCCESS,
	   "runner: the quick tcp probe first, with its unit, run and kind");
	ok(got[1] && !strcmp(got[1]->unit, "a") && got[1]->seq == 3 &&
	       got[1]->result == PROBE_FAILURE && *got[1]->why,
	   "runner: the unanswered http probe fails by its timeout (%s)",
	   got[1] ? got[1]->why : "");
	probe_job_free(got[0]);
	probe_job_free(got[1]);
	/* One still running at the end is waited for, its result freed
	 * (ASan and the leak checker see to the rest). */
	probe_runner_start(
	    &r, probe_job_new("a", false, 4, PROBE_LIVENESS, &slow, &c));
	probe_runner_fini(&r);
	close(fd);
}

/* What status says between a new spec's 200 and the supervisor taking
 * it (issue 18): kept, changed, new, removed; all waiting on a restart. */
static void test_pending_status(void)
{
	const char *snap =
	    "{\"unitStatus\":[{\"name\":\"keep\",\"restartCount\":2,"
	    "\"state\":{\"running\":{}}},{\"name\":\"chg\",\"restartCount\":1,"
	    "\"state\":{\"terminated\":{\"exitCode\":3}},\"lastState\":{}},"
	    "{\"name\":\"gone\",\"state\":{\"running\":{}}}],"
	    "\"initUnitStatus\":[],\"podIP\":\"10.0.0.1\"}";
	struct unit_view views[] = {{.name = "keep", .fingerprint = "k1"},
				    {.name = "chg", .fingerprint = "c1"},
				    {.name = "gone", .fingerprint = "g1"}};
	struct unit_spec units[] = {
	    {.name = "keep", .image = "i", .fingerprint = "k1"},
	    {.name = "chg", .image = "i", .fingerprint = "c2"},
	    {.name = "new", .image = "i", .fingerprint = "n1"}};
	struct pod_spec next = {.units = units, .n_units = 3};
	char *t = pending_status_json(snap, &next, views, 3, false);

	ok(strstr(
	       t,
	       "\"name\":\"keep\",\"restartCount\":2,\"state\":{\"running\"") !=
	       NULL,
	   "pending status: an unchanged unit keeps its entry");
	ok(!strstr(t, "exitCode") && !strstr(t, "gone") &&
	       strstr(t, "\"name\":\"new\""),
	   "pending status: changed and new units wait, a removed one goes");
	ok(strstr(t, "podIP") != NULL, "pending status: the rest is kept");
	free(t);
	t = pending_status_json(snap, &next, views, 3, true);
	ok(!strstr(t, "running"), "pending status: a pod restart: all wait");
	free(t);
}

int main(void)
{
	test_pending_status();
	test_backoff();
	test_policies();
	test_crash_loop();
	test_init_order();
	test_tick();
	test_spec_changes();
	test_kip_resend();
	test_liveness_restart();
	test_readiness_startup();
	test_probe_runner();
	return tap_done();
}
