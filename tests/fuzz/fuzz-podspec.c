// SPDX-License-Identifier: Apache-2.0
/* Fuzz the controller ↔ cell JSON: the bytes as a PodParameters body and,
 * when they parse, a PodStatusReply built from the pod (with the pod's own
 * strings and secret bytes as reasons, messages and usage values), which
 * must serialize to JSON that jansson reads back with the right shape. The
 * first bytes also go to the Kubernetes quantity parser. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "podspec.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_probe(const struct probe *p)
{
	if (p->kind == PROBE_NONE)
		return;
	if (p->timeout_s < 1 || p->period_s < 1 || p->success_threshold < 1 ||
	    p->failure_threshold < 1 || p->initial_delay_s < 0)
		abort();
	if (p->kind == PROBE_EXEC && (!p->exec_command || !p->exec_command[0]))
		abort();
	if (p->kind != PROBE_EXEC && !(p->port > 0) == !p->port_name)
		abort(); /* a number or a name, never both or neither */
	if (p->kind == PROBE_HTTP && (!p->path || !p->scheme))
		abort();
}

static bool has_volume(const struct pod_spec *p, const char *name)
{
	for (size_t i = 0; i < p->n_volumes; i++)
		if (!strcmp(p->volumes[i].name, name))
			return true;
	return false;
}

static void check_unit(const struct pod_spec *p, const struct unit_spec *u)
{
	if (!u->name || !*u->name || strlen(u->name) > 63 || !u->image ||
	    !*u->image || !u->fingerprint || !u->termination_message_path ||
	    !u->termination_message_policy || u->n_env > WIRE_MAX_ENV)
		abort();
	/* A mount of a volume the pod lacks is accepted with a warning. */
	for (size_t i = 0; i < u->n_mounts; i++)
		if ((!has_volume(p, u->mounts[i].name) && !p->n_warnings) ||
		    u->mounts[i].mount_path[0] != '/')
			abort();
	if (u->memory_limit < 0 || u->cpu_millis < 0)
		abort();
	for (size_t i = 0; i < u->n_env; i++)
		if (!u->env[i].value == !u->env[i].secret_name)
			abort(); /* a literal or a secret reference */
	for (size_t i = 0; i < u->n_ports; i++)
		if (u->ports[i].container_port < 0 || !u->ports[i].protocol)
			abort();
	check_probe(&u->liveness);
	check_probe(&u->readiness);
	check_probe(&u->startup);
}

static void check_spec(const struct pod_spec *p)
{
	size_t items = 0;

	if (p->n_units > WIRE_MAX_UNITS || p->n_init_units > WIRE_MAX_UNITS ||
	    p->n_volumes > WIRE_MAX_VOLUMES ||
	    p->n_warnings > WIRE_MAX_WARNINGS)
		abort();
	for (size_t i = 0; i < p->n_units; i++)
		check_unit(p, &p->units[i]);
	for (size_t i = 0; i < p->n_init_units; i++)
		check_unit(p, &p->init_units[i]);
	for (size_t i = 0; i < p->n_secrets; i++)
		for (size_t j = 0; j < p->secrets[i].n_items; j++, items++)
			if (p->secrets[i].item_len[j] > WIRE_MAX_SECRET_VALUE ||
			    p->secrets[i]
				.items[j]
				.value[p->secrets[i].item_len[j]])
				abort();
	if (items > WIRE_MAX_SECRET_ITEMS)
		abort();
	/* Only the two prefixes the agent acts on are kept (podspec.h). */
	for (size_t i = 0; i < p->n_annotations; i++)
		if (strncmp(p->annotations[i].name, "pod.elotl.co/", 13) &&
		    strncmp(p->annotations[i].name, "cdi.k8s.io/", 11))
			abort();
}

/* Reasons, messages and usage text from the pod itself: env values and
 * secret bytes may be anything, including invalid UTF-8. */
static char *some_text(const struct pod_spec *p, size_t i)
{
	if (p->n_secrets && p->secrets[i % p->n_secrets].n_items) {
		const struct secret *s = &p->secrets[i % p->n_secrets];
		return s->items[i % s->n_items].value;
	}
	if (p->n_units && p->units[i % p->n_units].n_env)
		return p->units[i % p->n_units].env[0].value;
	return NULL;
}

static void fill_unit_status(const struct pod_spec *p,
			     const struct unit_spec *u, size_t i,
			     struct unit_status *st)
{
	int64_t t =
	    (int64_t)(strlen(u->fingerprint) * 1000000007u) * (i % 2 ? -1 : 1);

	memset(st, 0, sizeof(*st));
	st->name = u->name;
	st->image = u->image;
	st->ready = i % 2;
	st->started = (int)(i % 3) - 1;
	st->restart_count = (int)i - 2;
	st->state.kind = (enum unit_state_kind)(i % 4);
	st->state.reason = some_text(p, i);
	st->state.message = some_text(p, i + 1);
	st->state.start_failure = i % 5 == 0;
	st->state.exit_code = (int)i * 37 - 100;
	st->state.started_at_ns = t;
	st->state.finished_at_ns = t + (int64_t)i;
	st->last_state.kind = (enum unit_state_kind)((i + 3) % 4);
	st->last_state.message = st->state.reason;
}

static void check_reply(const char *txt, const struct pod_status *s)
{
	json_t *r = json_loads(txt, 0, NULL), *u;

	if (!json_is_object(r) ||
	    json_array_size(json_object_get(r, "unitStatus")) != s->n_units ||
	    json_array_size(json_object_get(r, "initUnitStatus")) !=
		s->n_init_units ||
	    !json_is_string(json_object_get(r, "podIP")))
		abort();
	u = json_object_get(r, "resourceUsage");
	if (u && (!json_is_object(u) || !json_object_size(u) || !s->n_usage))
		abort();
	for (size_t i = 0; i < s->n_units; i++) {
		json_t *x = json_array_get(json_object_get(r, "unitStatus"), i);
		if (json_object_size(x) != 7 ||
		    json_object_size(json_object_get(x, "state")) > 1 ||
		    !json_is_integer(json_object_get(x, "restartCount")))
			abort();
	}
	json_decref(r);
}

static void fuzz_status(const struct pod_spec *p)
{
	struct pod_status s = {0};
	size_t nu = p->n_secrets + p->n_annotations;
	char *txt;

	s.n_units = p->n_units;
	s.n_init_units = p->n_init_units;
	s.units = xcalloc(p->n_units, sizeof(*s.units));
	s.init_units = xcalloc(p->n_init_units, sizeof(*s.init_units));
	for (size_t i = 0; i < p->n_units; i++)
		fill_unit_status(p, &p->units[i], i, &s.units[i]);
	for (size_t i = 0; i < p->n_init_units; i++)
		fill_unit_status(p, &p->init_units[i], i + 7, &s.init_units[i]);
	s.usage = xcalloc(nu, sizeof(*s.usage));
	for (size_t i = 0; i < p->n_annotations; i++)
		s.usage[s.n_usage++] = p->annotations[i];
	for (size_t i = 0; i < p->n_secrets; i++)
		s.usage[s.n_usage++] =
		    (struct kv){p->secrets[i].name, some_text(p, i)};
	s.pod_ip = p->pod_ip;
	txt = wire_status_json(&s);
	check_reply(txt, &s);
	free(txt);
	free(s.units);
	free(s.init_units);
	free(s.usage);
}

static void fuzz_quantity(const uint8_t *data, size_t size)
{
	char q[128];
	int64_t v = -1;
	size_t n = size < sizeof(q) - 1 ? size : sizeof(q) - 1;

	memcpy(q, data, n);
	q[n] = '\0';
	if (quantity_value(q, &v, NULL) == 0 && v < 0)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pod_spec p, again;
	struct cerr e = {0};

	fuzz_quantity(data, size);
	if (wire_parse_pod((const char *)data, size, &p, &e) < 0) {
		if (!e.code || !e.msg[0] || p.units || p.n_units || p.volumes)
			abort();
		return 0;
	}
	check_spec(&p);
	/* Parsing is deterministic: the same bytes, the same fingerprints. */
	if (wire_parse_pod((const char *)data, size, &again, &e) < 0 ||
	    again.n_units != p.n_units)
		abort();
	for (size_t i = 0; i < p.n_units; i++)
		if (strcmp(p.units[i].fingerprint, again.units[i].fingerprint))
			abort();
	pod_spec_free(&again);
	fuzz_status(&p);
	pod_spec_free(&p);
	return 0;
}
