// SPDX-License-Identifier: Apache-2.0
/* The image config blob (OCI image-spec config.md, which Docker's
 * application/vnd.docker.container.image.v1+json also follows): only the
 * parts a runtime needs, typed. Fields are optional unless the spec makes
 * them essential (rootfs), but a field that is present must have the right
 * type: a config that says "Cmd": 5 is broken, not empty. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "digest.h"
#include "jsonutil.h"
#include "pull-internal.h"
#include "util.h"

/* The same cap as a manifest's layer count: one diff_id per layer. */
#define DIFF_IDS_MAX 1024

/* A string field; absent and null give NULL, and so does "" when
 * empty_is_null (Docker writes "WorkingDir": "" for "unset"). */
static int opt_string(const json_t *obj, const char *key, bool empty_is_null,
		      char **out, struct cerr *e)
{
	const json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return cerr_set(e, EINVAL, "'%s' is not a string", key);
	if (empty_is_null && !*json_string_value(v))
		return 0;
	*out = xstrdup(json_string_value(v));
	return 0;
}

/* ExposedPorts and Volumes are objects whose keys are the data (values are
 * always {}); their keys become a NULL-terminated vector in document
 * order. */
static int object_keys(const json_t *obj, const char *key, char ***out,
		       struct cerr *e)
{
	const json_t *o = json_object_get(obj, key);
	const char *k;
	json_t *v;
	size_t i = 0;
	char **vec;

	*out = NULL;
	if (!o || json_is_null(o))
		return 0;
	if (!json_is_object(o))
		return cerr_set(e, EINVAL, "'%s' is not an object", key);
	vec = xcalloc(json_object_size(o) + 1, sizeof(char *));
	/* json_object_foreach wants a non-const object; it only reads. */
	json_object_foreach((json_t *)o, k, v)
	{
		vec[i++] = xstrdup(k);
	}
	*out = vec;
	return 0;
}

static int parse_runtime(const json_t *cfg, struct image_config *c,
			 struct cerr *e)
{
	if (!cfg || json_is_null(cfg))
		return 0;
	if (!json_is_object(cfg))
		return cerr_set(e, EINVAL, "'config' is not an object");
	if (jstrv(cfg, "Env", &c->env, e) < 0 ||
	    jstrv(cfg, "Entrypoint", &c->entrypoint, e) < 0 ||
	    jstrv(cfg, "Cmd", &c->cmd, e) < 0 ||
	    opt_string(cfg, "WorkingDir", true, &c->working_dir, e) < 0 ||
	    opt_string(cfg, "User", true, &c->user, e) < 0 ||
	    opt_string(cfg, "StopSignal", true, &c->stop_signal, e) < 0 ||
	    object_keys(cfg, "ExposedPorts", &c->exposed_ports, e) < 0 ||
	    object_keys(cfg, "Volumes", &c->volumes, e) < 0)
		return cerr_prefix(e, "config");
	return 0;
}

static int parse_rootfs(const json_t *root, struct image_config *c,
			struct cerr *e)
{
	const json_t *rf = json_object_get(root, "rootfs"), *ids, *v;
	const char *type;
	size_t i;

	if (!json_is_object(rf))
		return cerr_set(e, EINVAL,
				"'rootfs' is missing or not an object");
	type = jstr(rf, "type");
	if (!type || strcmp(type, "layers") != 0)
		return cerr_set(e, EINVAL, "rootfs type must be 'layers'");
	ids = json_object_get(rf, "diff_ids");
	if (!json_is_array(ids))
		return cerr_set(e, EINVAL,
				"'rootfs.diff_ids' is missing or not an array");
	if (json_array_size(ids) > DIFF_IDS_MAX)
		return cerr_set(e, EINVAL,
				"%zu diff_ids exceed the limit of %d",
				json_array_size(ids), DIFF_IDS_MAX);
	c->diff_ids = xcalloc(json_array_size(ids) + 1, sizeof(char *));
	json_array_foreach(ids, i, v)
	{
		if (!json_is_string(v))
			return cerr_set(e, EINVAL,
					"rootfs.diff_ids[%zu] is not a string",
					i);
		if (digest_validate(json_string_value(v), e) < 0)
			return cerr_prefix(e, "rootfs.diff_ids[%zu]", i);
		c->diff_ids[i] = xstrdup(json_string_value(v));
		c->n_diff_ids = i + 1;
	}
	return 0;
}

static int parse_config(const json_t *root, struct image_config *c,
			struct cerr *e)
{
	if (opt_string(root, "os", false, &c->os, e) < 0 ||
	    opt_string(root, "architecture", false, &c->architecture, e) < 0 ||
	    opt_string(root, "variant", true, &c->variant, e) < 0)
		return -1;
	if (parse_runtime(json_object_get(root, "config"), c, e) < 0)
		return -1;
	return parse_rootfs(root, c, e);
}

int image_config_parse(const char *buf, size_t len, struct image_config *out,
		       struct cerr *e)
{
	cleanup_json json_t *root = NULL;

	memset(out, 0, sizeof(*out));
	if (!buf || len == 0)
		return cerr_set(e, EINVAL, "image config: empty document");
	if (len > CONFIG_MAX)
		return cerr_set(
		    e, EFBIG, "image config: %zu bytes exceed the limit of %u",
		    len, CONFIG_MAX);
	root = json_parse_object(buf, len, e);
	if (!root)
		return cerr_prefix(e, "image config");
	if (parse_config(root, out, e) < 0) {
		image_config_free(out);
		return cerr_prefix(e, "image config");
	}
	return 0;
}

void image_config_free(struct image_config *c)
{
	if (!c)
		return;
	free(c->os);
	free(c->architecture);
	free(c->variant);
	strv_free(c->env);
	strv_free(c->entrypoint);
	strv_free(c->cmd);
	free(c->working_dir);
	free(c->user);
	free(c->stop_signal);
	strv_free(c->exposed_ports);
	strv_free(c->volumes);
	strv_free(c->diff_ids);
	memset(c, 0, sizeof(*c));
}
