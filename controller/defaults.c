// SPDX-License-Identifier: Apache-2.0
/* The API server's defaults (k8s.io/kubernetes pkg/apis/core/v1
 * defaults.go) for the fields convert.go reads: Kip only ever sees pods the
 * API server has defaulted, so a manifest from a file gets them first.
 * Fields Kip drops (terminationMessagePath, imagePullPolicy, …) are left
 * alone. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cellctl.h"

static json_t *obj_at(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (!json_is_object(v)) {
		v = json_object();
		json_object_set_new(o, k, v);
	}
	return v;
}

static void def_str(json_t *o, const char *k, const char *v)
{
	const char *s = json_string_value(json_object_get(o, k));

	if (!s || !*s)
		json_object_set_new(o, k, json_string(v));
}

static void def_int(json_t *o, const char *k, long long v)
{
	json_t *x = json_object_get(o, k);

	if (!x || json_is_null(x) ||
	    (json_is_integer(x) && json_integer_value(x) == 0))
		json_object_set_new(o, k, json_integer(v));
}

/* A list of strings, or absent: what the API server's schema insists on
 * for the lists cellctl copies. */
static int strv_check(const json_t *o, const char *k, const char *at,
		      struct cerr *e)
{
	const json_t *v = json_object_get(o, k), *x;
	size_t i;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return cerr_set(e, EINVAL, "%s.%s: not a list", at, k);
	json_array_foreach(v, i, x)
	{
		if (!json_is_string(x))
			return cerr_set(e, EINVAL, "%s.%s[%zu]: not a string",
					at, k, i);
	}
	return 0;
}

static int container_lists(const json_t *c, const char *at, struct cerr *e)
{
	static const char *const probes[] = {"livenessProbe", "readinessProbe",
					     "startupProbe"};
	const json_t *caps = json_object_get(
	    json_object_get(c, "securityContext"), "capabilities");

	if (strv_check(c, "command", at, e) < 0 ||
	    strv_check(c, "args", at, e) < 0 ||
	    strv_check(caps, "add", at, e) < 0 ||
	    strv_check(caps, "drop", at, e) < 0)
		return -1;
	for (size_t i = 0; i < 3; i++)
		if (strv_check(
			json_object_get(json_object_get(c, probes[i]), "exec"),
			"command", at, e) < 0)
			return -1;
	return 0;
}

static void probe_defaults(json_t *p)
{
	json_t *h;

	if (!json_is_object(p))
		return;
	def_int(p, "timeoutSeconds", 1);
	def_int(p, "periodSeconds", 10);
	def_int(p, "successThreshold", 1);
	def_int(p, "failureThreshold", 3);
	if (json_is_object(h = json_object_get(p, "httpGet"))) {
		def_str(h, "path", "/");
		def_str(h, "scheme", "HTTP");
	}
}

static int containers(json_t *list, const char *what, struct cerr *e)
{
	json_t *c, *port;
	size_t i, j;

	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list))
		return cerr_set(e, EINVAL, "spec.%s is not a list", what);
	json_array_foreach(list, i, c)
	{
		char at[64];
		if (!json_is_object(c))
			return cerr_set(e, EINVAL, "spec.%s[%zu] is not a map",
					what, i);
		snprintf(at, sizeof(at), "spec.%s[%zu]", what, i);
		if (container_lists(c, at, e) < 0)
			return -1;
		json_array_foreach(json_object_get(c, "ports"), j, port)
		{
			if (json_is_object(port))
				def_str(port, "protocol", "TCP");
		}
		probe_defaults(json_object_get(c, "livenessProbe"));
		probe_defaults(json_object_get(c, "readinessProbe"));
		probe_defaults(json_object_get(c, "startupProbe"));
	}
	return 0;
}

static void volume_defaults(json_t *v)
{
	static const char *const sources[] = {
	    "secret",	   "hostPath",	"configMap",
	    "emptyDir",	   "projected", "persistentVolumeClaim",
	    "downwardAPI", "nfs",	"csi",
	    "ephemeral"};
	json_t *s;
	bool any = false;

	for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++)
		any |= json_is_object(json_object_get(v, sources[i]));
	if (!any) /* SetDefaults_Volume: no source is an emptyDir */
		json_object_set_new(v, "emptyDir", json_object());
	if (json_is_object(s = json_object_get(v, "secret")))
		def_int(s, "defaultMode", 0644);
	if (json_is_object(s = json_object_get(v, "configMap")))
		def_int(s, "defaultMode", 0644);
	if (json_is_object(s = json_object_get(v, "projected")))
		def_int(s, "defaultMode", 0644);
	if (json_is_object(s = json_object_get(v, "hostPath")) &&
	    !json_is_string(json_object_get(s, "type")))
		json_object_set_new(s, "type", json_string(""));
}

int pod_defaults(json_t *pod, struct cerr *e)
{
	json_t *meta, *spec, *v;
	size_t i;

	if (!json_is_object(pod))
		return cerr_set(e, EINVAL, "the manifest is not a map");
	if (!json_is_string(json_object_get(pod, "kind")) ||
	    strcmp(json_string_value(json_object_get(pod, "kind")), "Pod"))
		return cerr_set(e, EINVAL, "not a v1 Pod (kind \"%s\")",
				json_string_value(json_object_get(pod, "kind"))
				    ?: "");
	meta = obj_at(pod, "metadata");
	spec = json_object_get(pod, "spec");
	if (!json_is_object(spec))
		return cerr_set(e, EINVAL, "the pod has no spec");
	def_str(meta, "namespace", "default");
	def_str(spec, "restartPolicy", "Always");
	def_str(spec, "dnsPolicy", "ClusterFirst");
	obj_at(spec, "securityContext");
	if (containers(json_object_get(spec, "containers"), "containers", e) <
		0 ||
	    containers(json_object_get(spec, "initContainers"),
		       "initContainers", e) < 0)
		return -1;
	json_t *dc = json_object_get(spec, "dnsConfig"), *ha;
	if (strv_check(dc, "nameservers", "spec.dnsConfig", e) < 0 ||
	    strv_check(dc, "searches", "spec.dnsConfig", e) < 0)
		return -1;
	json_array_foreach(json_object_get(spec, "hostAliases"), i, ha)
	{
		if (strv_check(ha, "hostnames", "spec.hostAliases", e) < 0)
			return -1;
	}
	json_array_foreach(json_object_get(spec, "volumes"), i, v)
	{
		if (!json_is_object(v))
			return cerr_set(e, EINVAL,
					"spec.volumes[%zu] is not a map", i);
		volume_defaults(v);
	}
	return 0;
}
