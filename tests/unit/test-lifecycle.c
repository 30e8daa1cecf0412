// SPDX-License-Identifier: Apache-2.0
/* agent/sup/lifecycle.c on a fake clock and a fake probe runner: what each
 * hook's end asks unit.c to do (struct hook_step), above all that a preStop's
 * end sends the signal with what is left of the grace counted from the hook's
 * start, 2 s at least, also for a unit whose spec is gone (issue 31). */
#include <string.h>

#include "../lib/tap.h"
#include "probejob.h"
#include "podspec.h"
#include "sup-internal.h"

#define S 1000000000ull

static uint64_t fake_now;
static struct probe_job *started;

static uint64_t now(void)
{
	return fake_now;
}

static void probe_start(struct probe_runner *r, struct probe_job *j)
{
	(void)r;
	probe_job_free(started);
	started = j;
}

static const struct sup_ops fake_ops = {.now = now, .probe_start = probe_start};

struct fixture {
	struct supervisor s;
	struct unit_spec us;
	struct unit_rec u;
};

static char unit_name[] = "u";

static void setup(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->s.ops = &fake_ops;
	f->s.o.monitor_bin = "cell-monitor";
	f->s.spec.termination_grace_s = 7;
	f->us.name = unit_name;
	f->us.pre_stop.kind = PROBE_SLEEP;
	f->us.pre_stop.sleep_s = 1;
	f->us.post_start.kind = PROBE_SLEEP;
	f->u.name = unit_name;
	f->u.spec = &f->us;
	f->u.seq = 3;
	f->u.phase = PH_RUNNING;
	fake_now = 100 * S;
}

/* The started job, ended with result r (the runner's answer). */
static struct probe_job *ended(enum probe_result r)
{
	started->result = r;
	return started;
}

static void test_pre_stop(void)
{
	struct fixture f;
	struct hook_step st;

	setup(&f);
	ok(!hook_pre_stop(&f.s, &f.u, "/run/3", 0) && !started,
	   "grace 0: no hook (a forced stop)");
	ok(hook_pre_stop(&f.s, &f.u, "/run/3", 5) && started &&
	       started->probe.timeout_s == 5 && f.u.pre_stop_pending,
	   "the hook starts, bounded by the whole grace");
	ok(!hook_pre_stop(&f.s, &f.u, "/run/3", 5),
	   "a stop asked again while it runs starts no second hook");
	/* The unit leaves the spec while its hook runs (issue 31). */
	f.u.spec = NULL;
	f.u.removed = true;
	fake_now += 1 * S + S / 2;
	st = hook_done(&f.s, &f.u, ended(PROBE_SUCCESS));
	ok(st.next == HOOK_SIGNAL && st.grace_s == 4 && !f.u.pre_stop_pending,
	   "its end sends the signal with the grace left (5 - 1.5 s: %lld), "
	   "with no spec",
	   (long long)st.grace_s);
	st = hook_done(&f.s, &f.u, started);
	ok(st.next == HOOK_NOTHING, "a result taken twice asks nothing more");

	setup(&f);
	hook_pre_stop(&f.s, &f.u, "/run/3", 3);
	fake_now += 3 * S + S / 10;
	st = hook_done(&f.s, &f.u, ended(PROBE_FAILURE));
	ok(st.next == HOOK_SIGNAL && st.grace_s == HOOK_MIN_GRACE_S,
	   "a failed hook cut at the grace: the signal, with the 2 s minimum");

	setup(&f);
	hook_pre_stop(&f.s, &f.u, "/run/3", 3);
	hook_run_over(&f.u); /* the unit exited during its hook */
	ok(hook_done(&f.s, &f.u, ended(PROBE_SUCCESS)).next == HOOK_NOTHING,
	   "the run ended meanwhile: nothing to signal");
	hook_pre_stop(&f.s, &f.u, "/run/3", 3);
	ok(hook_abandon(&f.s, &f.u).next == HOOK_SIGNAL &&
	       !f.u.pre_stop_pending,
	   "the agent stops during the hook: the signal goes now");
	ok(hook_abandon(&f.s, &f.u).next == HOOK_NOTHING,
	   "and no hook under way: nothing");
}

static void test_stale_result(void)
{
	struct fixture f;
	struct probe_job *old;

	setup(&f);
	hook_pre_stop(&f.s, &f.u, "/run/3", 5);
	old = started;
	started = NULL;
	/* A pod restart: a new record counts from the same run number. */
	hook_run_over(&f.u);
	fake_now += S;
	hook_pre_stop(&f.s, &f.u, "/run/3", 5);
	old->result = PROBE_SUCCESS;
	ok(hook_done(&f.s, &f.u, old).next == HOOK_NOTHING &&
	       f.u.pre_stop_pending,
	   "an older stop's hook result is not this stop's");
	probe_job_free(old);
	f.u.seq = 4;
	ok(hook_done(&f.s, &f.u, ended(PROBE_SUCCESS)).next == HOOK_NOTHING,
	   "a result for a run that is over asks nothing");
}

static void test_post_start(void)
{
	struct fixture f;
	struct hook_step st;

	setup(&f);
	ok(hook_post_start(&f.s, &f.u, "/run/3") && f.u.post_start_pending &&
	       !f.u.ready && f.u.started == 0,
	   "postStart: neither started nor ready while it runs");
	st = hook_done(&f.s, &f.u, ended(PROBE_SUCCESS));
	ok(st.next == HOOK_STARTED && !f.u.post_start_pending,
	   "postStart success: probes begin");
	hook_post_start(&f.s, &f.u, "/run/3");
	st = hook_done(&f.s, &f.u, ended(PROBE_FAILURE));
	ok(st.next == HOOK_KILL && st.grace_s == 7 && f.u.kill_reason &&
	       !strcmp(f.u.kill_reason, "FailedPostStartHook"),
	   "postStart failure: killed with the pod's grace");
}

/* The pull child's lazy words (issue 29): the agent's --lazy-pull and
 * the pod's annotation, from a PodParameters body through the wire parser
 * to the argv. */
static void test_lazy_argv(void)
{
	static const char *const bodies[] = {
	    "{\"spec\":{\"units\":[{\"name\":\"u\",\"image\":\"i\"}]}}",
	    "{\"spec\":{\"units\":[{\"name\":\"u\",\"image\":\"i\"}]},"
	    "\"Annotations\":{\"pod.elotl.co/lazy-pull\":\"false\"}}",
	    "{\"spec\":{\"units\":[{\"name\":\"u\",\"image\":\"i\"}]},"
	    "\"Annotations\":{\"pod.elotl.co/lazy-pull\":\"Off\"}}",
	    "{\"spec\":{\"units\":[{\"name\":\"u\",\"image\":\"i\"}]},"
	    "\"Annotations\":{\"pod.elotl.co/lazy-pull\":\"true\"}}",
	};
	static const bool lazy[] = {true, false, false, true};
	struct fixture f;

	setup(&f);
	for (size_t i = 0; i < sizeof(bodies) / sizeof(*bodies); i++) {
		struct pod_spec p = {0};
		struct cerr e = {0};
		const char *argv[4] = {"cell-pull", NULL, NULL, NULL};
		size_t n;

		if (wire_parse_pod(bodies[i], strlen(bodies[i]), &p, &e) < 0) {
			ok(0, "body %zu parses: %s", i, e.msg);
			continue;
		}
		f.s.o.lazy_pull_off = false;
		n = unit_pull_lazy_argv(&f.s, &p, argv, 1);
		ok(lazy[i] ? n == 1 && !argv[1]
			   : n == 3 && !strcmp(argv[1], "--lazy") &&
				 !strcmp(argv[2], "off"),
		   "body %zu, --lazy-pull on: %s", i,
		   lazy[i] ? "no lazy words" : "--lazy off");
		f.s.o.lazy_pull_off = true;
		argv[1] = argv[2] = NULL;
		n = unit_pull_lazy_argv(&f.s, &p, argv, 1);
		ok(n == 3 && !strcmp(argv[1], "--lazy") &&
		       !strcmp(argv[2], "off"),
		   "body %zu, --lazy-pull off: --lazy off", i);
		pod_spec_free(&p);
	}
}

int main(void)
{
	test_lazy_argv();
	test_pre_stop();
	test_stale_result();
	test_post_start();
	probe_job_free(started);
	return tap_done();
}
