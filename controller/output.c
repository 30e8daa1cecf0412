// SPDX-License-Identifier: Apache-2.0
/* Printing replies: JSON, YAML (block style; every string double-quoted,
 * which is valid YAML and needs no escaping rules of its own), and the
 * pod's phase as Kip's controller reads a status reply. */
#include <string.h>

#include "cleanup.h"
#include "ctl-internal.h"

void print_json(FILE *f, const json_t *j)
{
	cleanup_free char *s = json_dumps(j, JSON_INDENT(2) | JSON_ENCODE_ANY);

	fprintf(f, "%s\n", s ? s : "null");
}

static void scalar(FILE *f, const json_t *j)
{
	cleanup_free char *s = json_dumps(j, JSON_ENCODE_ANY);

	fputs(s ? s : "null", f);
}

static bool is_empty_container(const json_t *j)
{
	return (json_is_object(j) && !json_object_size(j)) ||
	       (json_is_array(j) && !json_array_size(j));
}

static void yaml_at(FILE *f, const json_t *j, int ind, bool inline_first);

static void yaml_value(FILE *f, const json_t *v, int ind)
{
	if ((json_is_object(v) || json_is_array(v)) && !is_empty_container(v)) {
		fputc('\n', f);
		yaml_at(f, v, ind, false);
	} else {
		fputc(' ', f);
		scalar(f, v);
		fputc('\n', f);
	}
}

static void yaml_at(FILE *f, const json_t *j, int ind, bool inline_first)
{
	const char *k;
	json_t *v;
	size_t i;
	bool first = true;

	if (json_is_object(j) && json_object_size(j)) {
		json_object_foreach((json_t *)j, k, v)
		{
			if (!(first && inline_first))
				fprintf(f, "%*s", ind, "");
			first = false;
			json_t *key = json_string(k);
			scalar(f, key);
			json_decref(key);
			fputc(':', f);
			yaml_value(f, v, ind + 2);
		}
	} else if (json_is_array(j) && json_array_size(j)) {
		json_array_foreach(j, i, v)
		{
			if (!(first && inline_first))
				fprintf(f, "%*s", ind, "");
			first = false;
			fputs("-", f);
			if (json_is_object(v) && json_object_size(v)) {
				fputc(' ', f);
				yaml_at(f, v, ind + 2, true);
			} else {
				yaml_value(f, v, ind + 2);
			}
		}
	} else {
		fprintf(f, "%*s", inline_first ? 0 : ind, "");
		scalar(f, j);
		fputc('\n', f);
	}
}

void print_yaml(FILE *f, const json_t *j)
{
	yaml_at(f, j, 0, false);
}

static json_t *state_of(const json_t *u, const char *which)
{
	return json_object_get(json_object_get(u, "state"), which);
}

void pod_counts(const json_t *status, int *ready, int *total, int *restarts)
{
	json_t *u;
	size_t i;

	*ready = *total = *restarts = 0;
	json_array_foreach(json_object_get(status, "unitStatus"), i, u)
	{
		(*total)++;
		*ready += json_is_true(json_object_get(u, "ready"));
		*restarts +=
		    (int)json_integer_value(json_object_get(u, "restartCount"));
	}
}

static const char *str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));
	return s ? s : "";
}

/* A unit that cannot start fails the pod (Kip: waiting.startFailure). */
static bool start_failed(const json_t *list, char *reason, size_t n)
{
	json_t *u, *w;
	size_t i;

	json_array_foreach(list, i, u)
	{
		w = state_of(u, "waiting");
		if (json_is_true(json_object_get(w, "startFailure"))) {
			snprintf(reason, n, "%s: %s", str(u, "name"),
				 str(w, "reason"));
			return true;
		}
	}
	return false;
}

const char *pod_phase(const json_t *status, const char *restart_policy,
		      char *reason, size_t n)
{
	const json_t *units = json_object_get(status, "unitStatus");
	const json_t *inits = json_object_get(status, "initUnitStatus");
	bool always = !strcmp(restart_policy, "Always");
	int running = 0, done = 0, failed = 0, total = 0;
	json_t *u, *t;
	size_t i;

	reason[0] = 0;
	if (start_failed(inits, reason, n) || start_failed(units, reason, n))
		return "Failed";
	json_array_foreach(inits, i, u)
	{
		t = state_of(u, "terminated");
		if (t && json_integer_value(json_object_get(t, "exitCode")) &&
		    !strcmp(restart_policy, "Never")) {
			snprintf(
			    reason, n, "init unit %s: %s (exit %lld)",
			    str(u, "name"), str(t, "reason"),
			    json_integer_value(json_object_get(t, "exitCode")));
			return "Failed";
		}
	}
	json_array_foreach(units, i, u)
	{
		total++;
		running += state_of(u, "running") != NULL;
		if ((t = state_of(u, "terminated"))) {
			done++;
			if (json_integer_value(
				json_object_get(t, "exitCode"))) {
				failed++;
				snprintf(reason, n, "%s: %s (exit %lld)",
					 str(u, "name"), str(t, "reason"),
					 json_integer_value(
					     json_object_get(t, "exitCode")));
			}
		} else if (state_of(u, "waiting") && !reason[0]) {
			snprintf(reason, n, "%s: %s", str(u, "name"),
				 str(state_of(u, "waiting"), "reason"));
		}
	}
	if (!total)
		return "Pending";
	if (!always && failed &&
	    (done == total || !strcmp(restart_policy, "Never")))
		return "Failed";
	if (!always && done == total)
		return "Succeeded";
	if (running + done == total && running) {
		if (!failed)
			reason[0] = 0;
		return "Running";
	}
	return "Pending";
}
