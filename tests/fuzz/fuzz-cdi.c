// SPDX-License-Identifier: Apache-2.0
/* Fuzz the CDI spec parser (JSON and YAML, agent/pod/cdi.c) and the resolver on
 * top of it: whatever parses is whole (a known version, a valid kind, at
 * least one device, absolute paths, env entries with a '='), a failure
 * always says why, and resolving every device of the spec (and "=all")
 * neither crashes nor leaks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cdi.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_edits(const struct cdi_edits *x)
{
	if (!x->env)
		abort();
	for (size_t i = 0; x->env[i]; i++)
		if (!strchr(x->env[i], '=') || x->env[i][0] == '=')
			abort();
	for (size_t i = 0; i < x->n_nodes; i++)
		if (x->nodes[i].path[0] != '/')
			abort();
	for (size_t i = 0; i < x->n_mounts; i++)
		if (x->mounts[i].host_path[0] != '/' ||
		    x->mounts[i].container_path[0] != '/')
			abort();
	for (size_t i = 0; i < x->n_hooks; i++)
		if (x->hooks[i].path[0] != '/' || !x->hooks[i].name[0])
			abort();
}

static void resolve_all(struct cdi_spec *s)
{
	struct cdi_registry r = {.specs = s, .n_specs = 1};
	char **names = xcalloc(s->n_devices + 2, sizeof(char *));
	struct cdi_edits x;
	struct cerr e = {0};

	for (size_t i = 0; i < s->n_devices; i++)
		names[i] = xasprintf("%s=%s", s->kind, s->devices[i].name);
	names[s->n_devices] = xasprintf("%s=all", s->kind);
	if (cdi_resolve(&r, names, &x, &e) == 0) {
		check_edits(&x);
		cdi_edits_free(&x);
	} else if (!e.msg[0]) {
		abort();
	}
	strv_free(names);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cdi_spec s;
	struct cerr e = {0};

	if (cdi_spec_parse((const char *)data, size, &s, &e) < 0) {
		if (!e.msg[0])
			abort();
		return 0;
	}
	if (!s.n_devices || !strchr(s.kind, '/') || !s.version)
		abort();
	check_edits(&s.edits);
	for (size_t i = 0; i < s.n_devices; i++)
		check_edits(&s.devices[i].edits);
	resolve_all(&s);
	cdi_spec_free(&s);
	return 0;
}
