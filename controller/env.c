// SPDX-License-Identifier: Apache-2.0
/* Container environments as the virtual-kubelet resolves them before Kip's
 * provider sees the pod (PopulateEnvironmentVariables): envFrom ConfigMaps
 * (data) and Secrets, with prefixes, names that are no environment
 * variable skipped; then env in order, values with $(VAR) expanded from
 * what is defined so far, valueFrom configMapKeyRef, secretKeyRef and
 * fieldRef resolved (a resourceFieldRef, or an optional reference that is
 * missing, leaves the variable unset); envFrom emptied. The virtual-kubelet
 * rebuilds env from a Go map, so Kip's order is random; cellctl sorts it by
 * name. No services exist here, so no service variables are added. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "buf.h"
#include "cleanup.h"
#include "ctl-internal.h"
#include "jsonutil.h"
#include "util.h"

/* Kubernetes $(VAR) expansion (k8s.io/kubernetes third_party expansion):
 * "$$" is a literal "$", "$(NAME)" the variable or itself when unset. */
char *k8s_expand(const char *in, const json_t *env)
{
	struct buf b;
	char *out;
	size_t n = in ? strlen(in) : 0;
	struct cerr e = {0};

	buf_init(&b, 0);
	for (size_t i = 0; i < n; i++) {
		const char *close;
		if (in[i] != '$' || i + 1 >= n) {
			buf_append(&b, in + i, 1, &e);
			continue;
		}
		if (in[i + 1] == '$') {
			buf_append(&b, "$", 1, &e);
			i++;
		} else if (in[i + 1] == '(' &&
			   (close = memchr(in + i + 2, ')', n - i - 2))) {
			size_t nl = (size_t)(close - (in + i + 2));
			cleanup_free char *name = xstrndup(in + i + 2, nl);
			const char *val =
			    json_string_value(json_object_get(env, name));
			if (val)
				buf_append(&b, val, strlen(val), &e);
			else
				buf_append(&b, in + i, nl + 3, &e);
			i += nl + 2;
		} else if (in[i + 1] == '(') {
			buf_append(&b, "$(", 2, &e);
			i++;
		} else {
			buf_append(&b, in + i, 2, &e);
			i++;
		}
	}
	buf_append(&b, "", 0, &e);
	out = buf_steal(&b, NULL);
	return out ? out : xstrdup("");
}

static bool env_name_ok(const char *s)
{
	if (!*s || isdigit((unsigned char)*s))
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("-._", *s))
			return false;
	return true;
}

static const json_t *find(const json_t *objects, const char *kind,
			  const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach(objects, i, o)
	{
		if (!strcmp(js(o, "kind"), kind) &&
		    !strcmp(js(json_object_get(o, "metadata"), "name"), name))
			return o;
	}
	return NULL;
}

/* A key of a ConfigMap (data) or Secret (data, base64; stringData as the
 * API server folds it into data). NULL when absent. */
static char *key_value(const json_t *obj, bool secret, const char *key)
{
	const char *s;
	struct buf b;
	struct cerr e = {0};

	if (!secret)
		return (s = json_string_value(
			    json_object_get(json_object_get(obj, "data"), key)))
			   ? xstrdup(s)
			   : NULL;
	if ((s = json_string_value(
		 json_object_get(json_object_get(obj, "stringData"), key))))
		return xstrdup(s);
	s = json_string_value(
	    json_object_get(json_object_get(obj, "data"), key));
	if (!s)
		return NULL;
	buf_init(&b, 16u << 20);
	if (b64_decode(s, strlen(s), B64_PADDED, &b, &e) < 0 ||
	    buf_append(&b, "", 0, &e) < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

static void all_keys(const json_t *obj, bool secret, json_t *keys)
{
	const char *k;
	json_t *v;

	json_object_foreach(json_object_get(obj, "data"), k, v)
	{
		json_object_set_new(keys, k, json_true());
	}
	if (secret)
		json_object_foreach(json_object_get(obj, "stringData"), k, v)
		{
			json_object_set_new(keys, k, json_true());
		}
}

static int env_from(const json_t *c, const json_t *objects, json_t *res,
		    struct cerr *e)
{
	json_t *ef, *keys, *v;
	const char *k;
	size_t i;

	json_array_foreach(json_object_get(c, "envFrom"), i, ef)
	{
		const json_t *ref = json_object_get(ef, "configMapRef");
		bool secret = !json_is_object(ref);
		if (secret)
			ref = json_object_get(ef, "secretRef");
		if (!json_is_object(ref))
			continue;
		const json_t *obj = find(
		    objects, secret ? "Secret" : "ConfigMap", js(ref, "name"));
		if (!obj) {
			if (json_is_true(json_object_get(ref, "optional")))
				continue;
			return cerr_set(e, ENOENT, "%s \"%s\" not found",
					secret ? "secret" : "configmap",
					js(ref, "name"));
		}
		keys = json_object();
		all_keys(obj, secret, keys);
		json_object_foreach(keys, k, v)
		{
			cleanup_free char *name =
			    xasprintf("%s%s", js(ef, "prefix"), k);
			cleanup_free char *val = key_value(obj, secret, k);
			if (env_name_ok(name) && val)
				json_object_set_new(res, name,
						    json_string(val));
		}
		json_decref(keys);
	}
	return 0;
}

/* metadata.labels['k'] and metadata.annotations['k'] */
static const char *meta_map_field(const json_t *meta, const char *path)
{
	const char *map = str_has_prefix(path, "metadata.labels[") ? "labels"
			  : str_has_prefix(path, "metadata.annotations[")
			      ? "annotations"
			      : NULL;
	const char *open = strchr(path, '[');
	size_t n = strlen(path);

	if (!map || n < 4 || path[n - 1] != ']' ||
	    (open[1] != '\'' && open[1] != '"') || path[n - 2] != open[1])
		return NULL;
	cleanup_free char *key = xstrndup(open + 2, n - (open + 2 - path) - 2);
	return js(json_object_get(meta, map), key);
}

int pod_field_ref(const json_t *pod, const json_t *fr,
		  const struct convert_opts *o, char **out, struct cerr *e)
{
	const json_t *meta = json_object_get(pod, "metadata");
	const json_t *spec = json_object_get(pod, "spec");
	const char *p = js(fr, "fieldPath"), *v = NULL;

	if (!strcmp(p, "metadata.name") || !strcmp(p, "metadata.namespace") ||
	    !strcmp(p, "metadata.uid"))
		v = js(meta, p + 9);
	else if (!strcmp(p, "spec.nodeName"))
		v = o->node_name ? o->node_name : "";
	else if (!strcmp(p, "spec.serviceAccountName"))
		/* The API server's admission sets "default" (an extension:
		 * Kip passes on what the pod it got says). */
		v = *js(spec, "serviceAccountName") || o->kip
			? js(spec, "serviceAccountName")
			: "default";
	else if (!strcmp(p, "status.podIP"))
		/* Not known yet when the virtual-kubelet resolves; cellctl
		 * knows it from --pod-ip (an extension). */
		v = o->kip || !o->pod_ip ? "" : o->pod_ip;
	else if (!strcmp(p, "status.hostIP"))
		v = "";
	else
		v = meta_map_field(meta, p);
	if (!v)
		return cerr_set(e, EINVAL, "fieldRef %s is not supported", p);
	*out = xstrdup(v);
	return 0;
}

static int key_ref(const json_t *objects, const json_t *ref, bool secret,
		   char **out, struct cerr *e)
{
	const json_t *obj =
	    find(objects, secret ? "Secret" : "ConfigMap", js(ref, "name"));
	bool optional = json_is_true(json_object_get(ref, "optional"));

	*out = obj ? key_value(obj, secret, js(ref, "key")) : NULL;
	if (*out || optional)
		return 0;
	if (!obj)
		return cerr_set(e, ENOENT, "%s \"%s\" not found",
				secret ? "secret" : "configmap",
				js(ref, "name"));
	return cerr_set(e, ENOENT, "%s \"%s\" doesn't contain the \"%s\" key",
			secret ? "secret" : "configmap", js(ref, "name"),
			js(ref, "key"));
}

static int one_var(const json_t *pod, const json_t *objects,
		   const struct convert_opts *o, const char *container,
		   const json_t *ev, json_t *res, struct cerr *e)
{
	const json_t *vf = json_object_get(ev, "valueFrom"), *r;
	cleanup_free char *val = NULL;
	json_t *s;

	if (!json_is_object(vf))
		val = k8s_expand(js(ev, "value"), res);
	else if (json_is_object(r = json_object_get(vf, "configMapKeyRef")) &&
		 key_ref(objects, r, false, &val, e) < 0)
		return -1;
	else if (json_is_object(r = json_object_get(vf, "secretKeyRef")) &&
		 key_ref(objects, r, true, &val, e) < 0)
		return -1;
	else if (json_is_object(r = json_object_get(vf, "fieldRef")) &&
		 pod_field_ref(pod, r, o, &val, e) < 0)
		return -1;
	else if (json_is_object(r = json_object_get(vf, "resourceFieldRef")) &&
		 !o->kip && downward_resource(pod, container, r, &val, e) < 0)
		return -1;
	if (!val)
		return 0; /* resourceFieldRef (Kip), or an optional one */
	s = json_string(val);
	if (!s)
		return cerr_set(e, EINVAL, "%s: the value is not UTF-8 text",
				js(ev, "name"));
	json_object_set_new(res, js(ev, "name"), s);
	return 0;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int container_env(const json_t *pod, json_t *c, const json_t *objects,
			 const struct convert_opts *o, struct cerr *e)
{
	json_t *res = json_object(), *ev, *list, *v;
	const char **names;
	const char *k;
	size_t i, n = 0;

	if (env_from(c, objects, res, e) < 0)
		goto fail;
	json_array_foreach(json_object_get(c, "env"), i, ev)
	{
		if (one_var(pod, objects, o, js(c, "name"), ev, res, e) < 0)
			goto fail;
	}
	names = xcalloc(json_object_size(res) + 1, sizeof(*names));
	json_object_foreach(res, k, v)
	{
		names[n++] = k;
	}
	qsort(names, n, sizeof(*names), cmp_names);
	list = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(
		    list, json_pack("{s:s,s:O}", "name", names[i], "value",
				    json_object_get(res, names[i])));
	free(names);
	json_object_set_new(c, "env", list);
	json_object_del(c, "envFrom");
	json_decref(res);
	return 0;
fail:
	json_decref(res);
	return cerr_prefix(e, "container %s: env", js(c, "name"));
}

int pod_env_resolve(json_t *pod, const json_t *objects,
		    const struct convert_opts *o, struct cerr *e)
{
	static const char *const lists[] = {"initContainers", "containers"};
	json_t *spec = json_object_get(pod, "spec"), *c;
	size_t i;

	for (size_t l = 0; l < 2; l++)
		json_array_foreach(json_object_get(spec, lists[l]), i, c)
		{
			if (json_is_object(c) &&
			    container_env(pod, c, objects, o, e) < 0)
				return -1;
		}
	return 0;
}
