// SPDX-License-Identifier: Apache-2.0
/* The supervisor's side of the metrics: after each pass it publishes what
 * a scrape needs to know about the pod (metrics_publish), built from its
 * own records. A run's cgroups and container pid come from its state.json,
 * read once per run and kept here (supervisor thread only). */
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "runtime.h"
#include "sup-internal.h"
#include "util.h"

#define RUNS_MAX 256

static struct run_seen {
	char *name;
	int seq;
	bool is_init;
	char **cgroups;
	struct stats_unit_src src;
	pid_t container_pid;
} seen[RUNS_MAX];
static size_t n_seen;

static void seen_free(struct run_seen *r)
{
	free(r->name);
	strv_free(r->cgroups);
	memset(r, 0, sizeof(*r));
}

/* The run's state.json, once per run. */
static const struct run_seen *run_of(const struct unit_rec *u)
{
	struct unit_runtime_state st = {0};
	struct cerr e = {0};
	char *run;
	struct run_seen *r;

	for (size_t i = 0; i < n_seen; i++)
		if (seen[i].seq == u->seq && seen[i].is_init == u->is_init &&
		    !strcmp(seen[i].name, u->name))
			return &seen[i];
	run = unit_run_dir(u, u->seq);
	if (runtime_read_state(run, &st, &e) < 0 || !st.started) {
		free(run);
		runtime_state_free(&st);
		return NULL;
	}
	free(run);
	/* Full: the oldest entry goes (a unit's older runs first, in
	 * practice). */
	if (n_seen == RUNS_MAX) {
		seen_free(&seen[0]);
		memmove(&seen[0], &seen[1], (RUNS_MAX - 1) * sizeof(seen[0]));
		n_seen--;
	}
	r = &seen[n_seen++];
	r->name = xstrdup(u->name);
	r->seq = u->seq;
	r->is_init = u->is_init;
	r->cgroups = strv_dup(st.cgroups);
	stats_unit_resolve(r->cgroups, &r->src);
	r->container_pid = st.container_pid;
	runtime_state_free(&st);
	return r;
}

static enum metrics_state state_of(const struct unit_rec *u)
{
	switch (u->state.kind) {
	case STATE_RUNNING:
		return MS_RUNNING;
	case STATE_TERMINATED:
		return MS_TERMINATED;
	default:
		return MS_WAITING;
	}
}

static void fill_names(struct metrics_snap *m, const char *pod_name)
{
	const char *us = pod_name ? strchr(pod_name, '_') : NULL;

	if (us) {
		m->namespace = xstrndup(pod_name, (size_t)(us - pod_name));
		m->pod = xstrdup(us + 1);
	} else {
		m->namespace = xstrdup("");
		m->pod = xstrdup(pod_name ? pod_name : "");
	}
}

void metrics_sup_publish(struct supervisor *s)
{
	struct metrics_snap *m;

	if (!s->has_spec) {
		metrics_publish(NULL);
		return;
	}
	m = xcalloc(1, sizeof(*m));
	fill_names(m, s->spec.pod_name);
	m->fs_path = xstrdup(s->o.state_dir);
	m->units = xcalloc(s->n_units + 1, sizeof(*m->units));
	for (size_t i = 0; i < s->n_units; i++) {
		const struct unit_rec *u = &s->units[i];
		struct metrics_unit *mu = &m->units[m->n_units];
		const struct run_seen *r;

		if (u->removed)
			continue;
		m->n_units++;
		mu->name = xstrdup(u->name);
		mu->is_init = u->is_init;
		mu->ready = u->ready;
		mu->state = state_of(u);
		mu->restarts = u->restart_count;
		if (u->seq > 0)
			mu->log_path = xasprintf("%s/%d/log", u->dir, u->seq);
		if (mu->state != MS_RUNNING || !(r = run_of(u)))
			continue;
		mu->cgroups = strv_dup(r->cgroups);
		mu->cpu_idx = r->src.cpu_idx;
		mu->mem_idx = r->src.mem_idx;
		mu->cpu_v1 = r->src.cpu_v1;
		mu->mem_v2 = r->src.mem_v2;
		if (!m->net_pid)
			m->net_pid = r->container_pid;
	}
	metrics_publish(m);
}
