// SPDX-License-Identifier: Apache-2.0
/* The supervisor: one thread owns the pod. It takes the newest spec the
 * API queued, works out what changed, starts and stops units, restarts them
 * by the pod's policy, and publishes a status snapshot that the API threads
 * read without waiting. Events come through one epoll set: an eventfd for
 * new specs and the monitors' pidfds for exits; back-off deadlines set the
 * timeout. The state directory is the source of truth: after an agent
 * restart the pod spec and every unit record come back from it and running
 * units are re-adopted through their monitors. */
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cdi.h"
#include "buf.h"
#include "cleanup.h"
#include "digest.h"
#include "fsutil.h"
#include "log.h"
#include "metrics.h"
#include "runtime.h"
#include "pullproc.h"
#include "sup-internal.h"
#include "util.h"
#include "netaddr.h"
#include "volumes.h"

#define POD_FILE "pod.json"
/* Present while a pod restart is under way: an agent killed between its
 * steps (some records gone, some not) starts it over at restore. */
#define RESTART_FILE "pod-restart"
#define TICK_MS 1000
#define TRIM_QUIET_S 10 /* no event for this long: trim the heap */

static uint64_t real_now(void)
{
	return now_ns();
}

const struct sup_ops sup_real_ops = {
    .now = real_now,
    .runtime_start = runtime_start,
    .runtime_stop = runtime_stop,
    .pull_spawn = pullproc_spawn,
    .pull_cached = pull_from_cache,
    .probe_start = probe_runner_start,
};

/* ---- unit records from a spec ---- */

static struct unit_rec *find_unit(struct supervisor *s, const char *name,
				  bool is_init)
{
	for (size_t i = 0; i < s->n_units; i++)
		if (s->units[i].is_init == is_init && s->units[i].name &&
		    !strcmp(s->units[i].name, name))
			return &s->units[i];
	return NULL;
}

/* Where a unit's records and runs live. Init and regular units have
 * separate namespaces: units/<name> and units/init.<name> (a '.' is never
 * in a unit name, which is a DNS label). Before that, init units used
 * units/init-<name>, which a regular unit "init-<name>" shared: state left
 * by such an agent is still adopted from there (legacy_init_dir). */
static char *unit_dir(const struct supervisor *s, const char *name,
		      bool is_init)
{
	return xasprintf("%s/units/%s%s", s->o.state_dir,
			 is_init ? "init." : "", name);
}

/* An init unit's record from before the split: units/init-<name> whose
 * unit.json says it is the init unit <name>. */
static char *legacy_init_dir(const struct supervisor *s, const char *name)
{
	char *dir = xasprintf("%s/units/init-%s", s->o.state_dir, name);
	struct unit_rec probe = {
	    .name = (char *)name, .is_init = true, .dir = dir};
	struct cerr e = {0};

	if (record_matches(&probe, &e))
		return dir;
	free(dir);
	return NULL;
}

static void init_rec(struct supervisor *s, struct unit_rec *u,
		     const struct unit_spec *us, bool is_init)
{
	memset(u, 0, sizeof(*u));
	u->name = xstrdup(us->name);
	u->is_init = is_init;
	u->spec = us;
	u->fingerprint = xstrdup(us->fingerprint ? us->fingerprint : "");
	u->image = xstrdup(us->image);
	u->pidfd = -1;
	u->started = -1;
	u->dir = unit_dir(s, us->name, is_init);
	u->state.kind = STATE_WAITING;
	u->state.reason = xstrdup("ContainerCreating");
}

/* Records for every unit of the spec, keeping those that already exist
 * (matched by name); records of units no longer in the spec are kept,
 * marked removed, until they have stopped. */
static void merge_records(struct supervisor *s)
{
	size_t n = s->spec.n_init_units + s->spec.n_units, k = 0;
	struct unit_rec *nu = xcalloc(n + s->n_units, sizeof(*nu));

	for (size_t pass = 0; pass < 2; pass++) {
		bool init = pass == 0;
		const struct unit_spec *v =
		    init ? s->spec.init_units : s->spec.units;
		size_t cnt = init ? s->spec.n_init_units : s->spec.n_units;

		for (size_t i = 0; i < cnt; i++) {
			struct unit_rec *old = find_unit(s, v[i].name, init);
			if (old) {
				nu[k] = *old;
				old->name = NULL; /* moved */
			} else {
				init_rec(s, &nu[k], &v[i], init);
			}
			nu[k].spec = &v[i];
			nu[k].removed = false;
			k++;
		}
	}
	for (size_t i = 0; i < s->n_units; i++)
		if (s->units[i].name) {
			nu[k] = s->units[i];
			nu[k].spec = NULL;
			nu[k].removed = true;
			k++;
		}
	free(s->units);
	s->units = nu;
	s->n_units = k;
}

/* ---- applying a new spec ---- */

/* What the planners see of the records (borrowing their strings). */
static struct plan_unit *plan_view(const struct supervisor *s)
{
	struct plan_unit *v = xcalloc(s->n_units + 1, sizeof(*v));

	for (size_t i = 0; i < s->n_units; i++) {
		const struct unit_rec *u = &s->units[i];
		bool running = u->phase == PH_RUNNING && u->spec;

		v[i] = (struct plan_unit){
		    .name = u->name,
		    .fingerprint = u->fingerprint,
		    .is_init = u->is_init,
		    .removed = u->removed,
		    .phase = u->phase,
		    .pulling = u->pull != NULL,
		    .watched = u->pidfd >= 0,
		    .succeeded = u->state.kind == STATE_TERMINATED &&
				 u->state.exit_code == 0,
		    .probe_kill = running && u->probes.kill,
		    .not_before_ns = u->not_before_ns,
		    .probe_due_ns = running ? probes_next_due(&u->probes) : 0};
	}
	return v;
}

static const struct unit_spec *next_spec_of(const struct pod_spec *next,
					    const char *name)
{
	for (size_t i = 0; i < next->n_units; i++)
		if (!strcmp(next->units[i].name, name))
			return &next->units[i];
	return NULL;
}

/* The unit runs the next spec's version of itself from now on. */
static void respec(struct unit_rec *u, const struct pod_spec *next)
{
	const struct unit_spec *ns = next_spec_of(next, u->name);

	if (!ns)
		return;
	free(u->fingerprint);
	u->fingerprint = xstrdup(ns->fingerprint ? ns->fingerprint : "");
	free(u->image);
	u->image = xstrdup(ns->image);
}

static void restart_mark(struct supervisor *s, bool on)
{
	cleanup_free char *p = xasprintf("%s/%s", s->o.state_dir, RESTART_FILE);
	struct cerr e = {0};

	if (on && fs_replace(p, "", 0, 0600, &e) < 0)
		log_warn("pod restart: %s", e.msg);
	if (!on && unlink(p) < 0 && errno != ENOENT)
		log_warn("pod restart: unlink %s: %m", p);
}

static bool restart_marked(const struct supervisor *s)
{
	cleanup_free char *p = xasprintf("%s/%s", s->o.state_dir, RESTART_FILE);

	return fs_exists(p);
}

/* Carry out plan_spec's decisions for the next spec. */
static void apply_spec_plan(struct supervisor *s, const struct plan *p,
			    const struct pod_spec *next)
{
	bool pod_restart = false;

	for (size_t i = 0; i < p->n; i++) {
		const struct plan_action *a = &p->v[i];
		struct unit_rec *u =
		    a->unit < s->n_units ? &s->units[a->unit] : NULL;

		switch (a->op) {
		case PLAN_POD_RESTART:
			s->pod_restarting = true;
			restart_mark(s, true);
			pod_restart = true;
			break;
		case PLAN_REMOVE:
			u->removed = true;
			break;
		case PLAN_STOP:
			unit_stop(s, u, a->grace_s);
			break;
		case PLAN_RESTART:
			respec(u, next);
			u->restart_after_stop = true;
			break;
		case PLAN_RESPEC:
			respec(u, next);
			break;
		case PLAN_RESET:
			respec(u, next);
			unit_pull_cancel(s, u); /* the old image */
			u->phase = PH_WAITING;
			u->not_before_ns = 0;
			break;
		default:
			break;
		}
	}
	/* Every record goes with the old spec; only after the stops, which
	 * start each unit's preStop hook from it. */
	for (size_t k = 0; k < s->n_units && pod_restart; k++) {
		s->units[k].spec = NULL;
		s->units[k].removed = true;
	}
}

static void plan_next_spec(struct supervisor *s, const struct pod_spec *next,
			   bool net_changed)
{
	cleanup_free struct plan_unit *view = plan_view(s);
	struct plan_next pn = {.init_units = next->init_units,
			       .units = next->units,
			       .n_init_units = next->n_init_units,
			       .n_units = next->n_units,
			       .grace_s = next->termination_grace_s,
			       .net_changed = net_changed};
	struct plan p = {0};

	plan_spec(view, s->n_units, &pn, &p);
	apply_spec_plan(s, &p, next);
	plan_free(&p);
}

static int prepare_volumes(struct supervisor *s, struct cerr *e)
{
	cleanup_free char *vols = xasprintf("%s/volumes", s->o.state_dir);
	struct vol_dirs d = {.volumes_dir = vols,
			     .packages_dir = s->o.packages_dir};

	strv_free(s->vol_sources);
	s->vol_sources = NULL;
	return vol_prepare(&s->spec, &d, &s->vol_sources, e);
}

/* A pod restart: nothing of it runs now, so its volumes may be walked
 * again (fsGroupChangePolicy) before the first unit starts over. */
static void pod_restart_volumes(struct supervisor *s)
{
	struct cerr e = {0};

	if (vol_fsgroup_restart(&s->spec, s->vol_sources, &e) < 0)
		log_error("volumes: %s", e.msg);
}

/* Each warning of a spec is logged once: Kip sends the same spec again on
 * every change of any part of it. */
static void log_warnings(struct supervisor *s, const struct pod_spec *p)
{
	char **seen = s->warned;

	for (size_t i = 0; i < p->n_warnings; i++) {
		bool old = false;

		for (size_t j = 0; seen && seen[j] && !old; j++)
			old = !strcmp(seen[j], p->warnings[i]);
		if (!old)
			log_warn("pod spec: %s", p->warnings[i]);
	}
	s->warned = strv_dup(p->warnings);
	strv_free(seen);
}

/* A parsed spec on the heap, as the queue holds it. */
static void spec_drop(struct pod_spec *p)
{
	if (!p)
		return;
	pod_spec_free(p);
	free(p);
}

/* The spec sup_update_pod parsed (and its text, for pod.json's readers),
 * both owned from here on. */
static void take_spec(struct supervisor *s, char *body, struct pod_spec *next)
{
	struct cerr e = {0};

	log_warnings(s, next);
	if (s->has_spec)
		plan_next_spec(
		    s, next, podnet_changed(s, next) || podns_changed(s, next));
	if (s->has_spec)
		pod_spec_free(&s->spec);
	s->spec = *next;
	free(next);
	s->has_spec = true;
	free(s->spec_body);
	s->spec_body = body;
	if (!s->pod_restarting)
		merge_records(s);
	if (prepare_volumes(s, &e) < 0)
		log_error("volumes: %s", e.msg);
}

/* ---- driving the units: plan_tick's actions ---- */

static bool active(const struct unit_rec *u)
{
	return u->phase == PH_RUNNING || u->phase == PH_STOPPING;
}

/* Forget records of removed units once they have stopped. */
static void drop_removed(struct supervisor *s)
{
	size_t k = 0;

	for (size_t i = 0; i < s->n_units; i++) {
		struct unit_rec *u = &s->units[i];
		if (u->removed && !active(u)) {
			struct cerr e = {0};
			unit_pull_cancel(s, u);
			unit_drop_run(u, u->seq);
			unit_drop_run(u, u->seq - 1);
			if (fs_rm_rf(u->dir, &e) < 0)
				log_warn("remove %s: %s", u->dir, e.msg);
			metrics_forget_unit(u->name);
			unit_rec_free(u);
			continue;
		}
		s->units[k++] = *u;
	}
	s->n_units = k;
}

enum applied { APPLIED, GATED, PLAN_AGAIN };

static enum applied apply_one(struct supervisor *s, const struct plan_action *a)
{
	/* Pod-wide actions carry no unit (and a pod may have none). */
	struct unit_rec *u = a->unit < s->n_units ? &s->units[a->unit] : NULL;

	switch (a->op) {
	case PLAN_FINISH_RESTART:
		drop_removed(s);
		restart_mark(s, false);
		podnet_release(s);
		pod_restart_volumes(s);
		s->pod_restarting = false;
		s->pod_failed = false;
		merge_records(s);
		return PLAN_AGAIN;
	case PLAN_DROP_STOPPED:
		drop_removed(s);
		return PLAN_AGAIN;
	case PLAN_NET:
		return podnet_ensure(s) ? APPLIED : GATED;
	case PLAN_POD_FAILED:
		if (!s->pod_failed)
			log_warn("init unit %s failed: the pod fails", u->name);
		s->pod_failed = true;
		return GATED;
	case PLAN_START:
		unit_start(s, u);
		break;
	case PLAN_ADOPT:
		unit_adopt(s, u);
		break;
	case PLAN_PROBE:
		unit_probe(s, u);
		break;
	case PLAN_STOP:
		unit_stop(s, u, a->grace_s);
		break;
	default:
		break;
	}
	return APPLIED;
}

static void make_plan(struct supervisor *s, struct plan *p)
{
	cleanup_free struct plan_unit *view = plan_view(s);
	struct plan_pod pod = {.has_spec = s->has_spec,
			       .pod_failed = s->pod_failed,
			       .pod_restarting = s->pod_restarting,
			       .grace_s = s->spec.termination_grace_s,
			       .units = view,
			       .n_units = s->n_units,
			       .now_ns = s->ops->now()};

	plan_tick(&pod, p);
}

/* After an agent restart, before anything starts: adopt what still runs
 * (a monitor still setting up is asked again soon). True while one is
 * still pending. */
static bool adopt_pending(struct supervisor *s)
{
	bool pending = false;

	for (size_t i = 0; i < s->n_units; i++) {
		struct unit_rec *u = &s->units[i];

		if (u->pidfd >= 0 ||
		    (u->phase != PH_RUNNING && u->phase != PH_STOPPING))
			continue;
		unit_adopt(s, u);
		if (u->pidfd < 0 &&
		    (u->phase == PH_RUNNING || u->phase == PH_STOPPING))
			pending = true;
	}
	return pending;
}

/* The records say what runs; the spec on disk is the one in force, and
 * it may be newer than what runs (saved, answered 200, and the agent
 * killed before it carried the change out). Compare them as a new spec
 * is compared: a changed unit restarts, a removed one stops, a changed
 * network, PID/IPC namespace option or initUnits restarts the pod. */
static void recheck_spec(struct supervisor *s)
{
	bool restart = podnet_differs(s, NULL) || restart_marked(s);

	for (size_t i = 0; i < s->n_units && !restart; i++) {
		const struct unit_rec *u = &s->units[i];
		if (!u->removed && active(u))
			restart = podnet_differs(s, u->net) ||
				  podns_differs(s, u->podns);
	}
	plan_next_spec(s, &s->spec, restart);
}

static void reconcile(struct supervisor *s)
{
	struct plan p = {0};

	netagent_tick(s);
	podimds_tick(s, podnet_netns(s));
	sweep_pod_cgroup(s);
	if (s->recheck) {
		if (adopt_pending(s)) {
			s->wake_ns = s->ops->now() + PLAN_ADOPT_RETRY_NS;
			return;
		}
		s->recheck = false;
		if (s->has_spec)
			recheck_spec(s);
	}
	podns_tick(s);
	deadline_tick(s);
	lazyfail_tick(s);
	/* A plan that changed the records (dropped some, started the pod
	 * over) is made again; twice is the most a tick needs. */
	for (int round = 0; round < 4; round++) {
		enum applied r = APPLIED;

		make_plan(s, &p);
		for (size_t i = 0; i < p.n && r == APPLIED; i++)
			r = apply_one(s, &p.v[i]);
		plan_free(&p);
		if (r != PLAN_AGAIN)
			break;
	}
	/* The next deadline as things stand now (a start that failed has
	 * just set a back-off). */
	make_plan(s, &p);
	s->wake_ns = p.wake_ns;
	plan_free(&p);
}

static int next_timeout_ms(const struct supervisor *s)
{
	uint64_t now = s->ops->now(), best = (uint64_t)TICK_MS * 1000000;
	uint64_t due[] = {netagent_next_due(s), s->wake_ns};

	for (size_t i = 0; i < ARRAY_SIZE(due); i++) {
		if (!due[i])
			continue;
		if (due[i] <= now)
			return 0;
		if (due[i] - now < best)
			best = due[i] - now;
	}
	return (int)(best / 1000000) + 1;
}

/* ---- the published snapshot ---- */

/* The podIP Kip expects back (pod_controller.go handlePodStatusReply drops a
 * reply whose podIP differs from the pod's address): the instance's primary
 * IP for a hostNetwork pod (setPodDispatchingParams gives such a pod the
 * node's private IP), else the PodIP the controller sent (the units are
 * in its namespace, agent/sup/podnet.c). Without one the units share the
 * host's network: the primary IP too. */
static char *pod_ip(const struct supervisor *s)
{
	char ip[64] = "";
	struct cerr e = {0};

	if (s->has_spec && s->spec.ns_network != NS_NODE && s->spec.pod_ip &&
	    *s->spec.pod_ip)
		return xstrdup(s->spec.pod_ip);
	if (net_primary_ipv4(ip, sizeof(ip), &e) < 0)
		log_warn("pod IP: %s", e.msg);
	return xstrdup(ip);
}

static void fill_status(const struct unit_rec *u, struct unit_status *o)
{
	o->name = u->name;
	o->image = u->image;
	o->devices = u->devices;
	/* A completed init unit is ready, as the kubelet reports it and
	 * Kip's status conversion expects. */
	o->ready = (u->ready && u->phase == PH_RUNNING) ||
		   (u->is_init && u->state.kind == STATE_TERMINATED &&
		    u->state.exit_code == 0);
	o->started = u->phase == PH_RUNNING ? u->started : 0;
	o->restart_count = u->restart_count;
	o->state = u->state;
	o->last_state = u->last_state;
}

/* resourceUsage: pod-wide numbers and each running unit's cgroups. */
static void collect_usage(struct supervisor *s, struct pod_status *ps)
{
	struct usage_unit *uu = xcalloc(s->n_units + 1, sizeof(*uu));
	struct unit_runtime_state *st = xcalloc(s->n_units + 1, sizeof(*st));
	size_t n = 0;
	struct cerr e = {0};

	for (size_t i = 0; i < s->n_units; i++) {
		const struct unit_rec *u = &s->units[i];
		cleanup_free char *run = NULL;

		if (u->removed || u->phase != PH_RUNNING)
			continue;
		run = unit_run_dir(u, u->seq);
		if (runtime_read_state(run, &st[n], &e) < 0 || !st[n].cgroups)
			continue;
		uu[n].name = u->name;
		uu[n].cgroup_dirs = st[n].cgroups;
		n++;
	}
	/* netRx/netTx: the pod's own interface, as a unit in its network
	 * namespace sees it (the host's interfaces only with the host's
	 * network), not every interface of the host. */
	char netdev[64];
	struct stats_paths paths = {0};
	if (n > 0 && st[0].container_pid > 0) {
		snprintf(netdev, sizeof(netdev), "/proc/%d/net/dev",
			 (int)st[0].container_pid);
		paths.proc_net_dev = netdev;
	}
	if (stats_collect(&s->stats, &paths, uu, n, s->o.state_dir, &ps->usage,
			  &ps->n_usage, &e) < 0)
		log_warn("resource usage: %s", e.msg);
	for (size_t i = 0; i < n; i++)
		runtime_state_free(&st[i]);
	free(st);
	free(uu);
}

/* While the pod restarts, the new spec's units are what the status
 * describes, from the moment the spec is taken (as the kubelet lists a
 * new pod's containers): waiting in ContainerCreating until the old
 * units have stopped and the new records exist. */
static void fill_restarting(const struct supervisor *s, struct pod_status *ps)
{
	static char creating[] = "ContainerCreating";

	for (int pass = 0; pass < 2; pass++) {
		bool init = pass == 0;
		const struct unit_spec *v =
		    init ? s->spec.init_units : s->spec.units;
		size_t n = init ? s->spec.n_init_units : s->spec.n_units;

		for (size_t i = 0; i < n; i++) {
			struct unit_status *o =
			    init ? &ps->init_units[ps->n_init_units++]
				 : &ps->units[ps->n_units++];

			o->name = v[i].name;
			o->image = v[i].image;
			o->started = 0;
			o->state.kind = STATE_WAITING;
			o->state.reason = creating;
		}
	}
}

static char *status_text(struct supervisor *s, const char *ip)
{
	struct pod_status ps = {0};
	size_t n = s->n_units + s->spec.n_units + s->spec.n_init_units + 1;
	/* The status describes the spec in force (issue 18); a unit a new
	 * spec removed, or the units of a deleted pod (a spec with no unit
	 * at all), stay in it, running, until their process is gone, as a
	 * kubelet reports a terminating container (issue 31). A pod restart
	 * lists the new spec's units only (fill_restarting). */
	bool deleted = s->has_spec && !s->spec.n_units && !s->spec.n_init_units;
	char *text;

	ps.units = xcalloc(n, sizeof(*ps.units));
	ps.init_units = xcalloc(n, sizeof(*ps.init_units));
	if (s->pod_restarting && !deleted)
		fill_restarting(s, &ps);
	for (size_t i = 0; i < s->n_units && (!s->pod_restarting || deleted);
	     i++) {
		const struct unit_rec *u = &s->units[i];
		if (u->removed && !active(u))
			continue;
		if (u->is_init)
			fill_status(u, &ps.init_units[ps.n_init_units++]);
		else
			fill_status(u, &ps.units[ps.n_units++]);
	}
	collect_usage(s, &ps);
	ps.pod_ip = (char *)ip;
	text = wire_status_json(&ps);
	stats_free(ps.usage, ps.n_usage);
	free(ps.units);
	free(ps.init_units);
	return text;
}

/* What the API may ask of each unit; regular units first. */
static struct unit_view *unit_views(struct supervisor *s, size_t *n)
{
	struct unit_view *v = xcalloc(s->n_units + 1, sizeof(*v));
	size_t k = 0;

	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < s->n_units; i++) {
			const struct unit_rec *u = &s->units[i];
			if (u->removed || u->is_init != (pass == 1))
				continue;
			v[k].name = xstrdup(u->name);
			v[k].log = xasprintf("%s/%d/log", u->dir, u->seq);
			v[k].prev_log =
			    xasprintf("%s/%d/log", u->dir, u->seq - 1);
			v[k].is_init = u->is_init;
			v[k].running = u->state.kind == STATE_RUNNING;
			v[k].fingerprint =
			    xstrdup(u->fingerprint && !s->pod_restarting
					? u->fingerprint
					: "");
			k++;
		}
	*n = k;
	return v;
}

static void unit_views_free(struct unit_view *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].log);
		free(v[i].prev_log);
		free(v[i].fingerprint);
	}
	free(v);
}

/* What a change of restarts the pod besides initUnits: its network and
 * its PID/IPC namespace options. */
static char *pod_wide_key(const struct pod_spec *p)
{
	cleanup_free char *net = podnet_key(p);
	cleanup_free char *ns = podns_key(p);

	return xasprintf("%s %s", net, ns);
}

/* Does the queued spec restart the pod, against the snapshot's? Its
 * initUnits differ (in order, by fingerprint) or its network or PID/IPC
 * namespaces do. Under s->mu. */
static bool pending_restarts(const struct supervisor *s)
{
	const struct pod_spec *p = s->pending_spec;
	cleanup_free char *net = pod_wide_key(p);
	size_t k = 0;

	if (s->status_net && strcmp(net, s->status_net))
		return true;
	for (size_t i = 0; i < s->n_views; i++) {
		const struct unit_view *v = &s->views[i];
		if (!v->is_init)
			continue;
		if (k >= p->n_init_units ||
		    strcmp(v->name, p->init_units[k].name) ||
		    !p->init_units[k].fingerprint ||
		    strcmp(v->fingerprint, p->init_units[k].fingerprint))
			return true;
		k++;
	}
	return k != p->n_init_units;
}

/* status_text from status_base, and the queued spec if one waits. Under
 * s->mu. */
static void status_refresh(struct supervisor *s)
{
	free(s->status_text);
	s->status_text =
	    s->pending_spec
		? pending_status_json(s->status_base, s->pending_spec, s->views,
				      s->n_views, pending_restarts(s))
		: xstrdup(s->status_base ? s->status_base : "{}");
}

static void publish(struct supervisor *s)
{
	char *ip = pod_ip(s);
	char *text = status_text(s, ip);
	char *net = s->has_spec ? pod_wide_key(&s->spec) : NULL;
	size_t n;
	struct unit_view *v = unit_views(s, &n);

	pthread_mutex_lock(&s->mu);
	free(s->status_base);
	s->status_base = text;
	free(s->status_net);
	s->status_net = net;
	unit_views_free(s->views, s->n_views);
	s->views = v;
	s->n_views = n;
	status_refresh(s);
	free(s->pod_ip_text);
	s->pod_ip_text = ip;
	pthread_mutex_unlock(&s->mu);
	metrics_sup_publish(s);
}

/* ---- the thread ---- */

static char *take_pending(struct supervisor *s, struct pod_spec **spec,
			  bool *quit)
{
	char *body;
	uint64_t v;

	if (read(s->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_warn("eventfd: %m");
	pthread_mutex_lock(&s->mu);
	body = s->pending;
	*spec = s->pending_spec;
	s->pending = NULL;
	s->pending_spec = NULL;
	*quit = s->quit;
	pthread_mutex_unlock(&s->mu);
	return body;
}

static void take_probe_results(struct supervisor *s)
{
	struct probe_job *j = probe_runner_take(&s->probes);

	while (j) {
		struct probe_job *next = j->next;
		struct unit_rec *u = find_unit(s, j->unit, j->is_init);

		if (u)
			unit_probe_done(s, u, j);
		probe_job_free(j);
		j = next;
	}
}

/* The agent is stopping while preStop hooks run: nothing would act on
 * their ends (the next agent does not know they ran), and a stop a
 * monitor was never asked for leaves the unit running for good. So the
 * loop waits for those hooks, each cut at its grace by the probe runner,
 * and sends each signal as it would have; the monitors carry the stops
 * out after the agent has gone. A result later than its grace and a
 * little more is not waited for: the signal goes without it. */
#define HOOK_WAIT_SLACK_NS (2 * 1000000000ull)

static uint64_t pre_stops_due(const struct supervisor *s)
{
	uint64_t due = 0;

	for (size_t i = 0; i < s->n_units; i++) {
		const struct unit_rec *u = &s->units[i];
		uint64_t t = u->stop_begin_ns +
			     (uint64_t)u->stop_grace_s * 1000000000ull +
			     HOOK_WAIT_SLACK_NS;

		if (u->phase == PH_RUNNING && u->pre_stop_pending && t > due)
			due = t;
	}
	return due;
}

static void finish_pre_stops(struct supervisor *s)
{
	uint64_t due, now;

	if (pre_stops_due(s))
		log_info("stopping: waiting for the preStop hooks under way");
	while ((due = pre_stops_due(s)) && (now = s->ops->now()) < due) {
		struct pollfd p = {.fd = s->probes.evfd, .events = POLLIN};

		if (poll(&p, 1, (int)((due - now) / 1000000) + 1) < 0 &&
		    errno != EINTR)
			break;
		take_probe_results(s);
	}
	for (size_t i = 0; i < s->n_units; i++) {
		struct unit_rec *u = &s->units[i];

		unit_hook_follow(s, u, hook_abandon(s, u));
	}
}

/* Units whose stop is under way when the agent stops: their monitors end
 * them without the agent, but a run that ends after the agent has gone
 * keeps its rootfs mount and cgroup until the next agent sweeps them. A
 * stop with no grace left ends in milliseconds, so the loop waits a
 * little for those monitors and sweeps what ends (a deleted pod and then
 * the agent's stop leave nothing). Longer stops are the monitors' alone. */
#define QUIT_STOP_WAIT_MS 1000

static void finish_stops(struct supervisor *s)
{
	uint64_t end = s->ops->now() + QUIT_STOP_WAIT_MS * 1000000ull, now;
	cleanup_free struct pollfd *p = xcalloc(s->n_units + 1, sizeof(*p));

	while ((now = s->ops->now()) < end) {
		size_t n = 0;

		for (size_t i = 0; i < s->n_units; i++)
			if (s->units[i].phase == PH_STOPPING &&
			    s->units[i].pidfd >= 0)
				p[n++] = (struct pollfd){
				    .fd = s->units[i].pidfd, .events = POLLIN};
		if (!n || (poll(p, n, (int)((end - now) / 1000000) + 1) < 0 &&
			   errno != EINTR))
			break;
		for (size_t k = 0; k < n; k++)
			for (size_t i = 0; i < s->n_units && p[k].revents; i++)
				if (s->units[i].pidfd == p[k].fd) {
					unit_exited(s, &s->units[i]);
					break;
				}
	}
	drop_removed(s);
	sweep_pod_cgroup(s);
}

/* Free heap back to the kernel once the loop has been quiet a while: what
 * a burst of specs, streams and status texts left free in malloc's arenas
 * is otherwise kept at its high-water mark (docs/agent.md "Soak"). Once
 * per quiet spell, never while busy (a trim costs a walk of the arenas). */
static void trim_when_quiet(struct supervisor *s, int n_events)
{
	uint64_t now = s->ops->now();

	if (n_events > 0 || !s->busy_ns) {
		if (n_events > 0)
			s->busy_ns = now;
		return;
	}
	if (now - s->busy_ns < (uint64_t)TRIM_QUIET_S * 1000000000)
		return;
#ifdef __GLIBC__ /* musl (the static build) gives freed pages back itself */
	malloc_trim(0);
#endif
	s->busy_ns = 0;
}

static void *sup_main(void *arg)
{
	struct supervisor *s = arg;
	struct epoll_event ev[16];

	for (;;) {
		int n = epoll_wait(s->epfd, ev, 16, next_timeout_ms(s));
		bool quit = false;
		struct pod_spec *spec = NULL;
		char *body;

		trim_when_quiet(s, n);
		s->unwatched = false;
		for (int i = 0; i < n; i++) {
			if (s->na.pid && ev[i].data.fd == s->na.pidfd)
				netagent_exited(s);
			if (ev[i].data.fd == s->probes.evfd)
				take_probe_results(s);
		}
		for (int i = 0; i < n && !s->unwatched; i++)
			for (size_t k = 0; k < s->n_units; k++) {
				struct unit_rec *u = &s->units[k];
				int fd = ev[i].data.fd;

				if (fd == s->evfd || fd == s->probes.evfd)
					break;
				if (u->pidfd == fd) {
					unit_exited(s, u);
					break;
				}
				if (u->pull && (u->pull->pidfd == fd ||
						u->pull->outfd == fd)) {
					unit_pull_event(s, u, fd);
					break;
				}
			}
		body = take_pending(s, &spec, &quit);
		if (quit) {
			free(body);
			spec_drop(spec);
			finish_pre_stops(s);
			finish_stops(s);
			return NULL;
		}
		if (body)
			take_spec(s, body, spec);
		reconcile(s);
		publish(s);
	}
}

/* ---- start-up: the state directory back into memory ---- */

static void restore(struct supervisor *s)
{
	cleanup_free char *path = xasprintf("%s/%s", s->o.state_dir, POD_FILE);
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, UPDATEPOD_MAX);
	if (fs_read_file(path, &b, &e) < 0) {
		buf_free(&b);
		return; /* a fresh cell */
	}
	if (wire_parse_pod(b.data, b.len, &s->spec, &e) < 0) {
		log_error("saved pod spec %s: %s", path, e.msg);
		buf_free(&b);
		return;
	}
	s->has_spec = true;
	s->spec_body = buf_steal(&b, NULL);
	merge_records(s);
	podnet_restore(s);
	podns_restore(s);
	for (size_t i = 0; i < s->n_units; i++) {
		struct unit_rec *u = &s->units[i];
		char *legacy;

		if (u->is_init && !fs_exists(u->dir) &&
		    (legacy = legacy_init_dir(s, u->name))) {
			free(u->dir);
			u->dir = legacy;
		}
		if (record_load(u, &e) == 0) {
			unit_adopt_starting(s, u);
			unit_adopt(s, u);
		}
	}
	s->recheck = true;
	if (prepare_volumes(s, &e) < 0)
		log_error("volumes: %s", e.msg);
}

/* The instance's memory (MemTotal) minus the agent's reserve: a cap for
 * the pod's units together, so a runaway pod cannot starve the agent that
 * reports on it. 0 when off or unknown. */
static int64_t pod_memory_cap(int64_t reserve)
{
	struct buf b;
	struct cerr e = {0};
	const char *p;
	long long kb = 0;

	if (reserve < 0)
		return 0;
	buf_init(&b, 1u << 20);
	if (fs_read_file("/proc/meminfo", &b, &e) == 0 &&
	    (p = strstr(b.data, "MemTotal:")))
		kb = strtoll(p + 9, NULL, 10);
	buf_free(&b);
	if (kb <= 0 || kb * 1024 <= reserve)
		return 0;
	return kb * 1024 - reserve;
}

static void copy_opts(struct supervisor *s, const struct sup_opts *o)
{
	size_t n = 0;

	s->o.state_dir = xstrdup(o->state_dir);
	s->o.image_cache = xstrdup(o->image_cache);
	s->o.monitor_bin = xstrdup(o->monitor_bin);
	s->o.pull_bin = xstrdup(o->pull_bin ? o->pull_bin : "cell-pull");
	s->o.packages_dir = xstrdup(o->packages_dir);
	s->o.pod_memory_reserve = o->pod_memory_reserve;
	s->pod_memory_cap = pod_memory_cap(o->pod_memory_reserve);
	s->o.pull_keep_free_mib = o->pull_keep_free_mib;
	s->o.log_max_bytes = o->log_max_bytes;
	s->o.log_max_files = o->log_max_files;
	s->o.lazy_pull_off = o->lazy_pull_off;
	s->o.containers_log_dir =
	    o->containers_log_dir && *o->containers_log_dir
		? xstrdup(o->containers_log_dir)
		: NULL;
	s->o.cdi_spec_dirs =
	    xstrdup(o->cdi_spec_dirs ? o->cdi_spec_dirs : CDI_DEFAULT_DIRS);
	while (o->insecure_registries && o->insecure_registries[n])
		n++;
	s->insecure = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		s->insecure[i] = xstrdup(o->insecure_registries[i]);
}

/* The records sweep_at_start added: units no longer in the spec whose
 * monitors still run (the agent died while stopping them). Adopted and
 * stopped; with no spec left, no preStop runs. */
static void stop_swept(struct supervisor *s)
{
	for (size_t i = 0; i < s->n_units; i++) {
		struct unit_rec *u = &s->units[i];

		if (!u->removed || u->spec || u->pidfd >= 0)
			continue;
		unit_adopt(s, u);
		unit_stop(s, u, s->has_spec ? s->spec.termination_grace_s : 0);
	}
}

int sup_start(const struct sup_opts *o, struct supervisor **out, struct cerr *e)
{
	struct supervisor *s = xcalloc(1, sizeof(*s));
	struct epoll_event ev = {.events = EPOLLIN};
	char tag[DIGEST_STR_MAX];
	cleanup_free char *units = xasprintf("%s/units", o->state_dir);

	copy_opts(s, o);
	s->ops = &sup_real_ops;
	if (digest_buf("sha256", o->state_dir, strlen(o->state_dir), tag, e) <
	    0)
		return -1;
	snprintf(s->cgroup_tag, sizeof(s->cgroup_tag), "%.16s",
		 digest_hex(tag));
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->save_mu, NULL);
	s->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	ev.data.fd = s->evfd;
	if (s->evfd < 0 || s->epfd < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &ev) < 0)
		return cerr_sys(e, "supervisor event loop");
	if (probe_runner_init(&s->probes, e) < 0)
		return -1;
	ev.data.fd = s->probes.evfd;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->probes.evfd, &ev) < 0)
		return cerr_sys(e, "supervisor event loop");
	if (fs_mkdir_p(units, 0700, e) < 0 ||
	    fs_mkdir_p(o->packages_dir, 0755, e) < 0)
		return -1;
	restore(s);
	sweep_at_start(s);
	stop_swept(s);
	netagent_restore(s);
	publish(s);
	if (pthread_create(&s->th, NULL, sup_main, s) != 0)
		return cerr_set(e, EAGAIN, "cannot start the supervisor");
	/* Named for top -H and gdb, and for the tests that hold this thread
	 * alone to catch a spec still queued (test_agent_durable.py). */
	pthread_setname_np(s->th, "cell-sup");
	*out = s;
	return 0;
}

static void sup_free(struct supervisor *s)
{
	probe_runner_fini(&s->probes); /* attempts end within their timeouts */
	for (size_t i = 0; i < s->n_units; i++) {
		if (s->units[i].pidfd >= 0)
			close(s->units[i].pidfd);
		unit_rec_free(&s->units[i]);
	}
	free(s->units);
	if (s->has_spec)
		pod_spec_free(&s->spec);
	free(s->spec_body);
	free(s->pending);
	spec_drop(s->pending_spec);
	free(s->status_text);
	free(s->status_base);
	free(s->status_net);
	unit_views_free(s->views, s->n_views);
	free(s->pod_ip_text);
	strv_free(s->vol_sources);
	strv_free(s->fsgroup_seen);
	strv_free(s->warned);
	strv_free(s->lazy_logged);
	strv_free(s->insecure);
	podimds_stop(s);
	podnet_free(&s->net);
	netagent_free(s);
	free((char *)s->o.state_dir);
	free((char *)s->o.image_cache);
	free((char *)s->o.monitor_bin);
	free((char *)s->o.pull_bin);
	free((char *)s->o.packages_dir);
	free((char *)s->o.containers_log_dir);
	free((char *)s->o.cdi_spec_dirs);
	close(s->evfd);
	close(s->epfd);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->save_mu);
	free(s);
}

/* Stop the supervisor thread. Units keep running: their monitors do not
 * depend on the agent, and the next agent re-adopts them. */
void sup_stop(struct supervisor *s)
{
	uint64_t one = 1;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->quit = true;
	pthread_mutex_unlock(&s->mu);
	if (write(s->evfd, &one, sizeof(one)) < 0)
		log_warn("eventfd: %m");
	pthread_join(s->th, NULL);
	sup_free(s);
}

/* ---- what the API threads call ---- */

int sup_update_pod(struct supervisor *s, const char *body, size_t len,
		   struct cerr *e)
{
	cleanup_free char *path = xasprintf("%s/%s", s->o.state_dir, POD_FILE);
	struct pod_spec *next = xmalloc(sizeof(*next));
	uint64_t one = 1;

	if (wire_parse_pod(body, len, next, e) < 0) {
		free(next);
		return -1;
	}
	/* The reply is 200 only once the spec is on disk (synced, directory
	 * too): a crash or a stop before the supervisor takes it then brings
	 * it back from the state directory. A failed write (ENOSPC, EIO)
	 * leaves the old file and the old spec in force, and the caller
	 * answers an error the controller sends again. save_mu keeps the
	 * order on disk the order of the queue (newest wins both). */
	pthread_mutex_lock(&s->save_mu);
	if (fs_write_atomic(path, body, len, 0600, e) < 0) {
		pthread_mutex_unlock(&s->save_mu);
		spec_drop(next);
		return cerr_prefix(e, "save pod spec");
	}
	pthread_mutex_lock(&s->mu);
	free(s->pending); /* newest wins */
	spec_drop(s->pending_spec);
	s->pending_spec = next;
	s->pending = xmemdup(body, len);
	s->pending_len = len;
	/* From now on status describes this spec (the spec in force), not
	 * the previous pod, until the supervisor's own snapshot of it. */
	status_refresh(s);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->save_mu);
	if (write(s->evfd, &one, sizeof(one)) < 0)
		return cerr_sys(e, "wake the supervisor");
	return 0;
}

char *sup_status_json(struct supervisor *s)
{
	char *t;

	pthread_mutex_lock(&s->mu);
	t = xstrdup(s->status_text ? s->status_text : "{}");
	pthread_mutex_unlock(&s->mu);
	return t;
}

/* The view of unit ("" = the first one; first_regular: the first regular
 * unit only, as the status's unitStatus[0]), under s->mu; NULL when none. */
static const struct unit_view *find_view(const struct supervisor *s,
					 const char *unit, bool first_regular)
{
	for (size_t i = 0; i < s->n_views; i++) {
		const struct unit_view *v = &s->views[i];
		if (!unit || !*unit)
			return first_regular && v->is_init ? NULL : v;
		if (!strcmp(v->name, unit))
			return v;
	}
	return NULL;
}

char *sup_log_path(struct supervisor *s, const char *unit, bool previous,
		   struct cerr *e)
{
	const struct unit_view *v;
	char *p = NULL;

	pthread_mutex_lock(&s->mu);
	v = find_view(s, unit, false);
	if (v)
		p = xstrdup(previous ? v->prev_log : v->log);
	pthread_mutex_unlock(&s->mu);
	if (!p)
		cerr_set(e, ENOENT, "no unit '%s' in this pod",
			 unit && *unit ? unit : "(first)");
	return p;
}

int sup_unit_running(struct supervisor *s, const char *unit)
{
	const struct unit_view *v;
	int r;

	pthread_mutex_lock(&s->mu);
	v = find_view(s, unit, true);
	r = v ? v->running : -1;
	pthread_mutex_unlock(&s->mu);
	return r;
}

char *sup_pod_ip(struct supervisor *s)
{
	char *ip;

	pthread_mutex_lock(&s->mu);
	ip = xstrdup(s->pod_ip_text ? s->pod_ip_text : "");
	pthread_mutex_unlock(&s->mu);
	return ip;
}
