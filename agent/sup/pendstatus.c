// SPDX-License-Identifier: Apache-2.0
/* What `status` says between a new spec's 200 and the supervisor taking
 * it: the spec in force is the new one, so the status describes it at
 * once. A unit the new spec leaves as it was keeps its entry; a new or
 * changed unit (every unit, when the pod restarts) is waiting in
 * ContainerCreating; a removed one is gone, unless the new spec has no
 * unit at all (a deleted pod), whose units stay until they have stopped. The
 * supervisor's next snapshot, made once it has taken the spec, replaces this.
 * Runs on an API thread, from the published snapshot only. */
#include <jansson.h>
#include <string.h>

#include "cleanup.h"
#include "jsonutil.h"
#include "sup-internal.h"
#include "util.h"

static const struct unit_view *view_of(const struct unit_view *v, size_t n,
				       const char *name, bool is_init)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].is_init == is_init && !strcmp(v[i].name, name))
			return &v[i];
	return NULL;
}

static json_t *entry_of(const json_t *arr, const char *name)
{
	size_t i;
	json_t *u;

	json_array_foreach(arr, i, u)
	{
		const char *n = json_string_value(json_object_get(u, "name"));
		if (n && !strcmp(n, name))
			return u;
	}
	return NULL;
}

static json_t *creating(const struct unit_spec *us, const json_t *old)
{
	json_t *u = json_object();
	json_t *w = json_object();
	json_t *rc = old ? json_object_get(old, "restartCount") : NULL;
	json_t *last = old ? json_object_get(old, "lastState") : NULL;

	json_object_set_new(u, "name", json_string(us->name));
	json_object_set_new(u, "image",
			    json_string(us->image ? us->image : ""));
	json_object_set_new(u, "ready", json_false());
	json_object_set_new(u, "started", json_false());
	json_object_set_new(u, "restartCount",
			    rc ? json_copy(rc) : json_integer(0));
	json_object_set_new(w, "reason", json_string("ContainerCreating"));
	json_object_set_new(w, "startFailure", json_false());
	json_object_set_new(u, "state", json_pack("{s:o}", "waiting", w));
	json_object_set_new(u, "lastState",
			    last ? json_deep_copy(last) : json_object());
	return u;
}

static json_t *units_for(const json_t *old_arr, const struct unit_spec *v,
			 size_t n, bool is_init, const struct unit_view *views,
			 size_t n_views, bool restart)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		const struct unit_view *w =
		    view_of(views, n_views, v[i].name, is_init);
		json_t *old = w ? entry_of(old_arr, v[i].name) : NULL;
		bool same = !restart && old && w->fingerprint &&
			    v[i].fingerprint &&
			    !strcmp(w->fingerprint, v[i].fingerprint);

		json_array_append_new(arr, same ? json_deep_copy(old)
						: creating(&v[i], old));
	}
	return arr;
}

char *pending_status_json(const char *text, const struct pod_spec *next,
			  const struct unit_view *views, size_t n_views,
			  bool restart)
{
	cleanup_json json_t *root = json_loads(text ? text : "{}", 0, NULL);
	json_t *units, *inits;

	if (!json_is_object(root))
		return xstrdup(text ? text : "{}");
	/* A deleted pod (no units at all): what runs stays listed until
	 * its stop is over (status_text's rule), so the text stands. */
	if (!next->n_units && !next->n_init_units)
		return json_dumps(root, JSON_COMPACT);
	units = units_for(json_object_get(root, "unitStatus"), next->units,
			  next->n_units, false, views, n_views, restart);
	inits =
	    units_for(json_object_get(root, "initUnitStatus"), next->init_units,
		      next->n_init_units, true, views, n_views, restart);
	json_object_set_new(root, "unitStatus", units);
	json_object_set_new(root, "initUnitStatus", inits);
	return json_dumps(root, JSON_COMPACT);
}
