// SPDX-License-Identifier: Apache-2.0
/* Fuzz the unit directory's JSON parsers (run.json, state.json, exit.json)
 * and RFC 3339 parsing. Beyond "no crash, no leak": a run.json that parses
 * must serialize to a text that parses to the same serialization (the
 * agent writes what the monitor reads), and whatever is accepted must hold
 * the invariants the monitor relies on. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A ".." component, not two dots inside a name: "p.." is a fine cgroup. */
static int has_dotdot(const char *p)
{
	for (const char *c = p; (c = strstr(c, "..")); c++)
		if ((c == p || c[-1] == '/') && (c[2] == '\0' || c[2] == '/'))
			return 1;
	return 0;
}

static void check_invariants(const struct run_config *c)
{
	if (!c->id || !c->rootfs || c->rootfs[0] != '/' || !c->argv ||
	    !c->argv[0] || !c->env || !c->cwd || c->cwd[0] != '/' ||
	    !c->cgroup_path || c->cgroup_path[0] == '/' ||
	    has_dotdot(c->cgroup_path) || !c->log_path || c->memory_limit < 0 ||
	    c->cpu_quota < 0 || c->pids_limit < 0 || c->grace_seconds < 0 ||
	    c->n_groups > RUN_MAX_GROUPS)
		abort();
	for (size_t i = 0; i < c->n_mounts; i++)
		if (!c->mounts[i].target || c->mounts[i].target[0] != '/' ||
		    !c->mounts[i].type)
			abort();
	for (size_t i = 0; c->caps && c->caps[i]; i++)
		if (strncmp(c->caps[i], "CAP_", 4))
			abort();
}

static void fuzz_runconfig(const char *s, size_t n)
{
	struct run_config a, b;
	struct cerr e = {0};
	char *j1, *j2;

	if (runconfig_parse(s, n, &a, &e) < 0)
		return;
	check_invariants(&a);
	j1 = runconfig_to_json(&a);
	if (runconfig_parse(j1, strlen(j1), &b, &e) < 0)
		abort();
	j2 = runconfig_to_json(&b);
	if (strcmp(j1, j2))
		abort();
	free(j1);
	free(j2);
	runconfig_free(&a);
	runconfig_free(&b);
}

static void fuzz_state(const char *s, size_t n)
{
	struct unit_runtime_state st = {0};
	struct cerr e = {0};

	if (runstate_parse(s, n, &st, &e) == 0) {
		if (st.monitor_pid <= 0 || st.container_pid <= 0)
			abort();
		free(runstate_to_json(&st));
	}
	runtime_state_free(&st);
	if (runexit_parse(s, n, &st, &e) == 0) {
		if (!st.reason || st.exit_code < 0 || st.exit_code > 255)
			abort();
		free(runexit_to_json(&st));
	}
	runtime_state_free(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1);
	int64_t ns;

	memcpy(s, data, size);
	s[size] = '\0';
	fuzz_runconfig(s, size);
	fuzz_state(s, size);
	if (crilog_parse_time(s, size, &ns) == 0) {
		char t[40];
		int64_t again;

		/* Normalized to UTC with 9 digits, it parses to the same. */
		crilog_format_time(ns, t);
		if (ns >= 0 && (crilog_parse_time(t, strlen(t), &again) < 0 ||
				again != ns))
			abort();
	}
	free(s);
	return 0;
}
