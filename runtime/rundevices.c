// SPDX-License-Identifier: Apache-2.0
/* run.json's "devices" and "hooks": the container edits the agent resolved
 * from CDI specs (agent/pod/cdi.c). Checked here as strictly as the rest of
 * run.json, because the monitor acts on them as root: absolute clean paths,
 * a known device type, sane numbers, a bounded count. */
#include <errno.h>
#include <string.h>

#include "jsonutil.h"
#include "path.h"
#include "runtime.h"
#include "util.h"

#define DEV_STR_MAX 4096

static int check_path(const char *what, const char *p, struct cerr *e)
{
	char clean[PATH_MAX_INPUT];

	if (!p || p[0] != '/' || strlen(p) > DEV_STR_MAX)
		return cerr_set(e, EINVAL, "%s: not an absolute path", what);
	if (path_clean(p, clean, sizeof(clean), e) < 0)
		return cerr_prefix(e, "%s", what);
	if (!clean[0])
		return cerr_set(e, EINVAL, "%s: is /", what);
	return 0;
}

static int get_u32(const json_t *o, const char *key, uint32_t max, uint32_t def,
		   uint32_t *out, struct cerr *e)
{
	int64_t v = def;

	if (jget_int(o, "", key, 0, max, &v, NULL, e) < 0)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int parse_access(const char *a, char out[4], struct cerr *e)
{
	size_t k = 0;

	if (!a)
		a = "rwm";
	if (strlen(a) > 3)
		return cerr_set(e, EINVAL, "access: '%.8s' is not rwm", a);
	for (const char *p = a; *p; p++) {
		if (!strchr("rwm", *p) || memchr(out, *p, k))
			return cerr_set(e, EINVAL, "access: '%s' is not rwm",
					a);
		out[k++] = *p;
	}
	out[k] = '\0';
	return 0;
}

static int parse_device(const json_t *d, struct run_device *rd, struct cerr *e)
{
	const char *type = jstr(d, "type");

	if (!json_is_object(d))
		return cerr_set(e, EINVAL, "not an object");
	rd->path = jstrdup(d, "path");
	rd->host_path = jstrdup(d, "hostPath");
	if (check_path("path", rd->path, e) < 0 ||
	    (rd->host_path && check_path("hostPath", rd->host_path, e) < 0))
		return -1;
	if (!type || (strcmp(type, "c") && strcmp(type, "b")))
		return cerr_set(e, EINVAL, "type: not c or b");
	rd->type = type[0];
	if (get_u32(d, "major", 0xfff, 0, &rd->major, e) < 0 ||
	    get_u32(d, "minor", 0xfffff, 0, &rd->minor, e) < 0 ||
	    get_u32(d, "mode", 07777, 0666, &rd->mode, e) < 0 ||
	    get_u32(d, "uid", UINT32_MAX - 1, 0, &rd->uid, e) < 0 ||
	    get_u32(d, "gid", UINT32_MAX - 1, 0, &rd->gid, e) < 0)
		return -1;
	return parse_access(jstr(d, "access"), rd->access, e);
}

static int parse_hook(const json_t *h, struct run_hook *rh, struct cerr *e)
{
	const char *kind = jstr(h, "kind");
	long long t;

	if (!json_is_object(h))
		return cerr_set(e, EINVAL, "not an object");
	if (kind && !strcmp(kind, "createContainer"))
		rh->kind = HOOK_CREATE_CONTAINER;
	else if (kind && !strcmp(kind, "startContainer"))
		rh->kind = HOOK_START_CONTAINER;
	else
		return cerr_set(e, EINVAL,
				"kind: not createContainer or "
				"startContainer");
	rh->path = jstrdup(h, "path");
	if (check_path("path", rh->path, e) < 0 ||
	    jstrv(h, "args", &rh->args, e) < 0 ||
	    jstrv(h, "env", &rh->env, e) < 0)
		return -1;
	if (strv_len(rh->args) > RUN_MAX_ARGS ||
	    strv_len(rh->env) > RUN_MAX_ARGS)
		return cerr_set(e, EINVAL, "too many args or env entries");
	if (jint(h, "timeout", RUN_HOOK_TIMEOUT_S, &t, e) < 0)
		return -1;
	if (t < 1 || t > RUN_HOOK_TIMEOUT_MAX)
		return cerr_set(e, ERANGE, "timeout: %lld not in 1..%d", t,
				RUN_HOOK_TIMEOUT_MAX);
	rh->timeout_s = (int)t;
	return 0;
}

int runconfig_parse_devices(const json_t *root, struct run_config *c,
			    struct cerr *e)
{
	json_t *devs, *hooks, *v;
	size_t i;

	if (jget_arr(root, "", "devices", RUN_MAX_DEVICES, &devs, e) < 0 ||
	    jget_arr(root, "", "hooks", RUN_MAX_HOOKS, &hooks, e) < 0)
		return -1;
	if (devs && json_array_size(devs)) {
		c->devices =
		    xcalloc(json_array_size(devs), sizeof(*c->devices));
		json_array_foreach(devs, i, v)
		{
			c->n_devices++;
			if (parse_device(v, &c->devices[i], e) < 0)
				return cerr_prefix(e, "devices[%zu]", i);
		}
	}
	if (hooks && json_array_size(hooks)) {
		c->hooks = xcalloc(json_array_size(hooks), sizeof(*c->hooks));
		json_array_foreach(hooks, i, v)
		{
			c->n_hooks++;
			if (parse_hook(v, &c->hooks[i], e) < 0)
				return cerr_prefix(e, "hooks[%zu]", i);
		}
	}
	return 0;
}

static json_t *strv_json(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static json_t *device_json(const struct run_device *d)
{
	json_t *o = json_object();
	char type[2] = {d->type, 0};

	json_object_set_new(o, "path", json_string(d->path));
	if (d->host_path)
		json_object_set_new(o, "hostPath", json_string(d->host_path));
	json_object_set_new(o, "type", json_string(type));
	json_object_set_new(o, "major", json_integer(d->major));
	json_object_set_new(o, "minor", json_integer(d->minor));
	json_object_set_new(o, "mode", json_integer(d->mode));
	json_object_set_new(o, "uid", json_integer(d->uid));
	json_object_set_new(o, "gid", json_integer(d->gid));
	json_object_set_new(o, "access", json_string(d->access));
	return o;
}

static json_t *hook_json(const struct run_hook *h)
{
	json_t *o = json_object();

	json_object_set_new(o, "kind", json_string(hooks_kind_name(h->kind)));
	json_object_set_new(o, "path", json_string(h->path));
	if (h->args)
		json_object_set_new(o, "args", strv_json(h->args));
	if (h->env)
		json_object_set_new(o, "env", strv_json(h->env));
	json_object_set_new(o, "timeout", json_integer(h->timeout_s));
	return o;
}

void runconfig_devices_to_json(const struct run_config *c, json_t *o)
{
	json_t *a;

	if (c->n_devices) {
		a = json_array();
		for (size_t i = 0; i < c->n_devices; i++)
			json_array_append_new(a, device_json(&c->devices[i]));
		json_object_set_new(o, "devices", a);
	}
	if (c->n_hooks) {
		a = json_array();
		for (size_t i = 0; i < c->n_hooks; i++)
			json_array_append_new(a, hook_json(&c->hooks[i]));
		json_object_set_new(o, "hooks", a);
	}
}

void runconfig_devices_free(struct run_config *c)
{
	for (size_t i = 0; i < c->n_devices; i++) {
		free(c->devices[i].path);
		free(c->devices[i].host_path);
	}
	free(c->devices);
	for (size_t i = 0; i < c->n_hooks; i++) {
		free(c->hooks[i].path);
		strv_free(c->hooks[i].args);
		strv_free(c->hooks[i].env);
	}
	free(c->hooks);
	c->devices = NULL;
	c->hooks = NULL;
	c->n_devices = c->n_hooks = 0;
}
