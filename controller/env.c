// SPDX-License-Identifier: Apache-2.0
/* Container environments as the virtual-kubelet resolves them before Kip's
 * provider sees the pod (PopulateEnvironmentVariables): envFrom ConfigMaps
 * (data) and Secrets, with prefixes, names that are no environment
 * variable skipped; then env in order, values with $(VAR) expanded from
 * what is defined so far, valueFrom configMapKeyRef, secretKeyRef and
 * fieldRef resolved (a resourceFieldRef, or an optional reference that is
 * missing, leaves the variable unset); envFrom emptied. The virtual-kubelet
 * rebuilds env from a Go map, so Kip's order is random; cellctl sorts it by
 * name. Service variables (FromServices) come from the Services given to
 * cellctl (-f, --kubernetes-service): default/kubernetes always, the pod's
 * namespace's only with enableServiceLinks (default true); headless ones
 * never. They are visible to $(VAR) and lose to the container's own. */
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
		const json_t *obj = k8s_find_object(
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

static int key_ref(const json_t *objects, const json_t *ref, bool secret,
		   char **out, struct cerr *e)
{
	const json_t *obj = k8s_find_object(
	    objects, secret ? "Secret" : "ConfigMap", js(ref, "name"));
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

/* $(VAR) in a value: the container's variables so far, then the
 * services' (expansion.MappingFuncFor(res, svcEnv)). */
static char *expand_value(const char *v, const json_t *res, const json_t *svc)
{
	json_t *look;
	char *out;

	if (!svc || json_object_size(svc) == 0)
		return k8s_expand(v, res);
	look = json_deep_copy(svc);
	json_object_update(look, (json_t *)res);
	out = k8s_expand(v, look);
	json_decref(look);
	return out;
}

static int one_var(const json_t *pod, const json_t *objects,
		   const struct convert_opts *o, const char *container,
		   const json_t *ev, json_t *res, const json_t *svc,
		   struct cerr *e)
{
	const json_t *vf = json_object_get(ev, "valueFrom"), *r;
	cleanup_free char *val = NULL;
	json_t *s;

	if (!json_is_object(vf))
		val = expand_value(js(ev, "value"), res, svc);
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

/* ---- service variables (virtual-kubelet's envvars.go) ---- */

/* ToUpper, '-' to '_' (makeEnvVariableName). */
static char *svc_var_name(const char *s)
{
	char *n = xstrdup(s);

	for (char *p = n; *p; p++)
		*p = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
	return n;
}

static void set_str(json_t *m, const char *k, const char *v)
{
	json_object_set_new(m, k, json_string(v));
}

/* net.JoinHostPort: an IPv6 address in brackets. */
static char *host_port(const char *ip, json_int_t port)
{
	return strchr(ip, ':') ? xasprintf("[%s]:%lld", ip, (long long)port)
			       : xasprintf("%s:%lld", ip, (long long)port);
}

static void link_vars(const char *prefix, const char *ip, const json_t *sp,
		      bool first, json_t *m)
{
	json_int_t port = json_integer_value(json_object_get(sp, "port"));
	const char *proto = *js(sp, "protocol") ? js(sp, "protocol") : "TCP";
	cleanup_free char *lower = xstrdup(proto), *upper = xstrdup(proto);
	cleanup_free char *hp = host_port(ip, port), *url = NULL, *pp = NULL;
	cleanup_free char *num = xasprintf("%lld", (long long)port);

	for (char *p = lower; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (char *p = upper; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	url = xasprintf("%s://%s", lower, hp);
	if (first) {
		cleanup_free char *k = xasprintf("%s_PORT", prefix);
		set_str(m, k, url);
	}
	pp = xasprintf("%s_PORT_%lld_%s", prefix, (long long)port, upper);
	set_str(m, pp, url);
	static const char *const sfx[] = {"_PROTO", "_PORT", "_ADDR"};
	const char *val[] = {lower, num, ip};
	for (size_t i = 0; i < 3; i++) {
		cleanup_free char *k = xasprintf("%s%s", pp, sfx[i]);
		set_str(m, k, val[i]);
	}
}

/* One Service's variables (FromServices); nothing for a headless one or
 * one without ports. */
static void service_vars(const json_t *svc, json_t *m)
{
	const json_t *spec = json_object_get(svc, "spec");
	const json_t *ports = json_object_get(spec, "ports"), *sp;
	const char *ip = js(spec, "clusterIP");
	cleanup_free char *prefix =
	    svc_var_name(js(json_object_get(svc, "metadata"), "name"));
	cleanup_free char *host = NULL, *port = NULL, *num = NULL;
	size_t i;

	if (!*ip || !strcmp(ip, "None") || json_array_size(ports) == 0)
		return;
	host = xasprintf("%s_SERVICE_HOST", prefix);
	set_str(m, host, ip);
	port = xasprintf("%s_SERVICE_PORT", prefix);
	num = xasprintf("%lld", (long long)json_integer_value(json_object_get(
				    json_array_get(ports, 0), "port")));
	set_str(m, port, num);
	json_array_foreach(ports, i, sp)
	{
		if (!*js(sp, "name"))
			continue;
		cleanup_free char *pn = svc_var_name(js(sp, "name"));
		cleanup_free char *k = xasprintf("%s_%s", port, pn);
		cleanup_free char *v = xasprintf(
		    "%lld",
		    (long long)json_integer_value(json_object_get(sp, "port")));
		set_str(m, k, v);
	}
	json_array_foreach(ports, i, sp)
	{
		link_vars(prefix, ip, sp, i == 0, m);
	}
}

/* getServiceEnvVarMap: the Services a pod in its namespace sees. A
 * Service given without a namespace is in the pod's, as kubectl would
 * create it. */
static json_t *service_env(const json_t *pod, const json_t *objects)
{
	const json_t *meta = json_object_get(pod, "metadata");
	const json_t *spec = json_object_get(pod, "spec");
	const json_t *links = json_object_get(spec, "enableServiceLinks");
	const char *ns =
	    *js(meta, "namespace") ? js(meta, "namespace") : "default";
	bool enable = !json_is_false(links);
	json_t *chosen = json_object(), *m = json_object(), *o;
	const char *k;
	size_t i;

	json_array_foreach(objects, i, o)
	{
		const json_t *om = json_object_get(o, "metadata");
		const char *name = js(om, "name");
		const char *sns =
		    *js(om, "namespace") ? js(om, "namespace") : ns;

		if (strcmp(js(o, "kind"), "Service") != 0 || !*name)
			continue;
		if (!strcmp(sns, "default") && !strcmp(name, "kubernetes")) {
			if (!json_object_get(chosen, name))
				json_object_set(chosen, name, o);
		} else if (!strcmp(sns, ns) && enable) {
			json_object_set(chosen, name, o);
		}
	}
	json_object_foreach(chosen, k, o)
	{
		service_vars(o, m);
	}
	json_decref(chosen);
	return m;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int container_env(const json_t *pod, json_t *c, const json_t *objects,
			 const struct convert_opts *o, const json_t *svc,
			 struct cerr *e)
{
	json_t *res = json_object(), *ev, *list, *v;
	const char **names;
	const char *k;
	size_t i, n = 0;

	if (env_from(c, objects, res, e) < 0)
		goto fail;
	json_array_foreach(json_object_get(c, "env"), i, ev)
	{
		if (one_var(pod, objects, o, js(c, "name"), ev, res, svc, e) <
		    0)
			goto fail;
	}
	json_object_foreach((json_t *)svc, k, v)
	{
		if (!json_object_get(res, k))
			json_object_set(res, k, v);
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
	json_t *svc = service_env(pod, objects);
	size_t i;

	for (size_t l = 0; l < 2; l++)
		json_array_foreach(json_object_get(spec, lists[l]), i, c)
		{
			if (json_is_object(c) &&
			    container_env(pod, c, objects, o, svc, e) < 0) {
				json_decref(svc);
				return -1;
			}
		}
	json_decref(svc);
	return 0;
}
