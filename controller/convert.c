// SPDX-License-Identifier: Apache-2.0
/* A Kubernetes v1 Pod into PodParameters, field for field as Kip does it:
 * pkg/server/convert.go (k8sToMilpaPod, containerToUnit, k8sToMilpaVolume,
 * k8sProbeToMilpaProbe, aggregateResources, addAnnotationsToMilpaPod),
 * the pod registry's instance selection (preCreatePod), and
 * pod_controller.go's updatePodUnits (ExpandCommandAndArgs, the elotl
 * annotations, the pod hostname). The JSON is what Go's encoding/json
 * writes for Kip's api types after the registry's store round trip: the
 * same omitempty rules, empty lists dropped, nil pointers left out, and
 * the untagged SecurityContext fields as null. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "ctl-internal.h"
#include "jsonutil.h"
#include "util.h"

#define GPU_RESOURCE "nvidia.com/gpu"
#define ELOTL_PREFIX "pod.elotl.co/"

/* Copy o[k] to out[k] when it is a non-empty string (omitempty). */
static void copy_str(json_t *out, const json_t *o, const char *k)
{
	if (*js(o, k))
		json_object_set_new(out, k, json_string(js(o, k)));
}

/* Copy a number (int32/int64 with omitempty: 0 is left out). */
static void copy_int(json_t *out, const json_t *o, const char *k)
{
	json_t *v = jget(o, k);
	if (json_is_integer(v) && json_integer_value(v) != 0)
		json_object_set_new(out, k,
				    json_integer(json_integer_value(v)));
}

/* A pointer field (*int64, *int32, *bool): kept whenever present. */
static void copy_ptr(json_t *out, const json_t *o, const char *k)
{
	json_t *v = jget(o, k);
	if (v)
		json_object_set(out, k, v);
}

/* A list of strings, left out when empty. */
static void copy_strv(json_t *out, const json_t *o, const char *k)
{
	json_t *v = jget(o, k);
	if (json_is_array(v) && json_array_size(v))
		json_object_set_new(out, k, json_deep_copy(v));
}

/* ---- probes ---- */

static json_t *probe(const json_t *kp)
{
	json_t *mp, *h;

	if (!kp)
		return NULL;
	mp = json_object();
	if ((h = jget(kp, "exec"))) {
		json_t *x = json_object();
		copy_strv(x, h, "command");
		json_object_set_new(mp, "exec", x);
	} else if ((h = jget(kp, "httpGet"))) {
		json_t *x = json_object(), *hdrs = jget(h, "httpHeaders");
		copy_str(x, h, "path");
		json_object_set_new(x, "port",
				    jget(h, "port") ? json_copy(jget(h, "port"))
						    : json_integer(0));
		copy_str(x, h, "host");
		copy_str(x, h, "scheme");
		if (json_array_size(hdrs)) {
			json_t *a = json_array(), *hd;
			size_t i;
			json_array_foreach(hdrs, i, hd)
			{
				json_array_append_new(
				    a, json_pack("{s:s,s:s}", "name",
						 js(hd, "name"), "value",
						 js(hd, "value")));
			}
			json_object_set_new(x, "httpHeaders", a);
		}
		json_object_set_new(mp, "httpGet", x);
	} else if ((h = jget(kp, "tcpSocket"))) {
		json_t *x = json_object();
		json_object_set_new(x, "port",
				    jget(h, "port") ? json_copy(jget(h, "port"))
						    : json_integer(0));
		copy_str(x, h, "host");
		json_object_set_new(mp, "tcpSocket", x);
	}
	copy_int(mp, kp, "initialDelaySeconds");
	copy_int(mp, kp, "timeoutSeconds");
	copy_int(mp, kp, "periodSeconds");
	copy_int(mp, kp, "successThreshold");
	copy_int(mp, kp, "failureThreshold");
	return mp;
}

/* ---- units ---- */

/* Kip's untagged SecurityContext fields (Go spells them with capitals):
 * Kip sends them null; as extensions they carry the Kubernetes values. */
static const char *const untagged[][2] = {
    {"Privileged", "privileged"},
    {"SELinuxOptions", NULL},
    {"WindowsOptions", NULL},
    {"RunAsNonRoot", "runAsNonRoot"},
    {"ReadOnlyRootFilesystem", "readOnlyRootFilesystem"},
    {"AllowPrivilegeEscalation", "allowPrivilegeEscalation"},
    {"ProcMount", "procMount"}};

static json_t *security_context(const json_t *sc, bool kip)
{
	json_t *out = json_object(), *caps = jget(sc, "capabilities");

	if (caps) {
		json_t *c = json_object();
		copy_strv(c, caps, "add");
		copy_strv(c, caps, "drop");
		json_object_set_new(out, "capabilities", c);
	}
	copy_ptr(out, sc, "runAsUser");
	copy_ptr(out, sc, "runAsGroup");
	/* Kip's api.SecurityContext has these without json tags: Go writes
	 * them under their Go names, always null (convert.go never sets them).
	 */
	for (size_t i = 0; i < ARRAY_SIZE(untagged); i++) {
		json_t *v =
		    untagged[i][1] && !kip ? jget(sc, untagged[i][1]) : NULL;
		json_object_set_new(out, untagged[i][0],
				    v ? json_copy(v) : json_null());
	}
	return out;
}

static json_t *unit_env(const json_t *env)
{
	json_t *out = json_array(), *v;
	size_t i;

	json_array_foreach(env, i, v)
	{
		/* Kip's api.EnvVar has no valueFrom (convert.go copies Name
		 * and Value): the virtual-kubelet resolved them (env.c). */
		json_t *x = json_pack("{s:s}", "name", js(v, "name"));
		copy_str(x, v, "value");
		json_array_append_new(out, x);
	}
	return out;
}

static json_t *unit_mounts(const json_t *vms)
{
	json_t *out = json_array(), *v;
	size_t i;

	json_array_foreach(vms, i, v)
	{
		json_t *x = json_pack("{s:s,s:s}", "name", js(v, "name"),
				      "mountPath", js(v, "mountPath"));
		copy_str(x, v, "subPath");
		json_array_append_new(out, x);
	}
	json_array_append_new(out, json_pack("{s:s,s:s}", "name", "resolvconf",
					     "mountPath", "/etc/resolv.conf"));
	json_array_append_new(out, json_pack("{s:s,s:s}", "name", "etchosts",
					     "mountPath", "/etc/hosts"));
	return out;
}

/* An array of one new object per element of list, each filled by fill
 * from its element (an absent or non-array list: empty). */
static json_t *map_objects(const json_t *list,
			   void (*fill)(json_t *x, const json_t *v))
{
	json_t *out = json_array(), *v;
	size_t i;

	json_array_foreach(list, i, v)
	{
		json_t *x = json_object();
		fill(x, v);
		json_array_append_new(out, x);
	}
	return out;
}

static void unit_port(json_t *x, const json_t *v)
{
	copy_str(x, v, "name");
	copy_int(x, v, "hostPort");
	json_object_set_new(
	    x, "containerPort",
	    json_integer(json_integer_value(jget(v, "containerPort"))));
	copy_str(x, v, "protocol");
	copy_str(x, v, "hostIP");
}

static json_t *unit_ports(const json_t *ports)
{
	return map_objects(ports, unit_port);
}

static void set_nonempty(json_t *o, const char *k, json_t *arr)
{
	if (json_array_size(arr))
		json_object_set_new(o, k, arr);
	else
		json_decref(arr);
}

static void expand_list(json_t *unit, const char *k, const json_t *envmap)
{
	json_t *a = json_object_get(unit, k), *v;
	size_t i;

	json_array_foreach(a, i, v)
	{
		cleanup_free char *x = k8s_expand(json_string_value(v), envmap);
		json_array_set_new(a, i, json_string(x));
	}
}

/* A lifecycle handler as the cell reads it: a probe's handler (exec,
 * httpGet, tcpSocket) or sleep. */
static json_t *hook(const json_t *h)
{
	json_t *x;

	if (!h)
		return NULL;
	if (jget(h, "sleep"))
		return json_pack("{s:O}", "sleep", jget(h, "sleep"));
	x = probe(h);
	return x;
}

/* The extensions of a unit (docs/agent-wire.md); Kip sends none. */
static void unit_extensions(json_t *u, const json_t *c)
{
	const json_t *lc = jget(c, "lifecycle");

	if (lc) {
		json_t *x = json_object(), *h;
		if ((h = hook(jget(lc, "postStart"))))
			json_object_set_new(x, "PostStart", h);
		if ((h = hook(jget(lc, "preStop"))))
			json_object_set_new(x, "PreStop", h);
		json_object_set_new(u, "lifecycle", x);
	}
	copy_str(u, c, "imagePullPolicy");
	if (!*js(c, "imagePullPolicy")) {
		/* The API server's default: Always for :latest or no tag. */
		const char *img = js(c, "image"), *slash = strrchr(img, '/');
		const char *colon = strrchr(slash ? slash : img, ':');
		bool latest =
		    !strchr(img, '@') && (!colon || !strcmp(colon, ":latest"));
		json_object_set_new(
		    u, "imagePullPolicy",
		    json_string(latest ? "Always" : "IfNotPresent"));
	}
	if (json_is_true(jget(c, "stdin")))
		json_object_set_new(u, "stdin", json_true());
	if (json_is_true(jget(c, "stdinOnce")))
		json_object_set_new(u, "stdinOnce", json_true());
	if (json_is_true(jget(c, "tty")))
		json_object_set_new(u, "tty", json_true());
}

static int container_to_unit(const json_t *c, bool expand,
			     const struct convert_opts *o, json_t **out,
			     struct cerr *e)
{
	json_t *u = json_object(), *env = jget(c, "env");
	static const char *const probes[] = {"livenessProbe", "readinessProbe",
					     "startupProbe"};

	if (!*js(c, "name")) {
		json_decref(u);
		return cerr_set(e, EINVAL, "a container without a name");
	}
	json_object_set_new(u, "name", json_string(js(c, "name")));
	copy_str(u, c, "image");
	copy_strv(u, c, "command");
	copy_strv(u, c, "args");
	set_nonempty(u, "env", unit_env(env));
	set_nonempty(u, "volumeMounts", unit_mounts(jget(c, "volumeMounts")));
	set_nonempty(u, "ports", unit_ports(jget(c, "ports")));
	copy_str(u, c, "workingDir");
	if (jget(c, "securityContext"))
		json_object_set_new(
		    u, "securityContext",
		    security_context(jget(c, "securityContext"), o->kip));
	for (size_t i = 0; i < ARRAY_SIZE(probes); i++)
		if (jget(c, probes[i]))
			json_object_set_new(u, probes[i],
					    probe(jget(c, probes[i])));
	/* api.ResourceRequirements: a struct (omitempty never drops it)
	 * whose maps have no json tags and are never filled. */
	json_object_set_new(u, "resources",
			    json_pack("{s:n,s:n}", "Limits", "Requests"));
	if (!o->kip)
		unit_extensions(u, c);
	if (expand) {
		/* pkg/util/expand.go: units only, not init units. */
		json_t *m = json_object(), *v;
		size_t i;
		json_array_foreach(env, i, v)
		{
			json_object_set_new(m, js(v, "name"),
					    json_string(js(v, "value")));
		}
		expand_list(u, "command", m);
		expand_list(u, "args", m);
		json_decref(m);
	}
	*out = u;
	return 0;
}

static int units(const json_t *list, bool expand, const struct convert_opts *o,
		 json_t **out, struct cerr *e)
{
	json_t *a, *c;
	size_t i;

	if (!json_array_size(list)) {
		*out = json_null();
		return 0;
	}
	a = json_array();
	json_array_foreach(list, i, c)
	{
		json_t *u = NULL;
		if (container_to_unit(c, expand, o, &u, e) < 0) {
			json_decref(a);
			return -1;
		}
		json_array_append_new(a, u);
	}
	*out = a;
	return 0;
}

/* ---- resources (aggregateResources) ---- */

char *fmt_cpu(int64_t milli)
{
	float f = (float)milli / 1000.0f;
	return xasprintf("%.2f", (double)f);
}

char *fmt_mem(int64_t bytes)
{
	float f = (float)bytes / (float)(1024 * 1024 * 1024);
	return xasprintf("%.2fGi", (double)f);
}

/* A quantity from JSON: a string, or a number as YAML gives "cpu: 1". */
static int qty(const json_t *v, bool milli, int64_t *out, struct cerr *e)
{
	char tmp[64];
	const char *s = json_string_value(v);

	*out = 0;
	if (!v)
		return 0;
	if (json_is_integer(v)) {
		snprintf(tmp, sizeof(tmp), "%lld",
			 (long long)json_integer_value(v));
		s = tmp;
	} else if (json_is_real(v)) {
		snprintf(tmp, sizeof(tmp), "%.17g", json_real_value(v));
		s = tmp;
	}
	if (!s)
		return cerr_set(e, EINVAL, "a resource quantity not a string");
	return milli ? quantity_milli(s, out, e) : quantity_value(s, out, e);
}

static int one_resource(const json_t *res, const char *name, bool milli,
			int64_t *out, struct cerr *e)
{
	const json_t *lim = jget(jget(res, "limits"), name);
	const json_t *req = jget(jget(res, "requests"), name);

	if (qty(lim, milli, out, e) < 0)
		return cerr_prefix(e, "limits.%s", name);
	if (*out <= 0 && qty(req, milli, out, e) < 0)
		return cerr_prefix(e, "requests.%s", name);
	return 0;
}

static bool gpu_prefix(const char *label, const char **rest)
{
	static const char *const prefixes[] = {
	    "node.elotl.co/gpu-", "cloud.google.com/gke-accelerator"};
	for (size_t i = 0; i < ARRAY_SIZE(prefixes); i++)
		if (str_has_prefix(label, prefixes[i])) {
			*rest = label + strlen(prefixes[i]);
			return true;
		}
	return false;
}

static int aggregate(const json_t *containers, const json_t *selector,
		     json_t *rs, struct cerr *e)
{
	int64_t cpu = 0, mem = 0, gpus = 0, v;
	json_t *c, *val;
	size_t i;
	const char *key, *rest;

	json_array_foreach(containers, i, c)
	{
		const json_t *res = jget(c, "resources");
		if (one_resource(res, "cpu", true, &v, e) < 0)
			return cerr_prefix(e, "container %s", js(c, "name"));
		cpu += v;
		if (one_resource(res, "memory", false, &v, e) < 0)
			return cerr_prefix(e, "container %s", js(c, "name"));
		mem += v;
		if (qty(jget(jget(res, "limits"), GPU_RESOURCE), false, &v, e) <
		    0)
			return cerr_prefix(e, "container %s", js(c, "name"));
		gpus += v;
	}
	if (cpu > 0) {
		cleanup_free char *c2 = fmt_cpu(cpu);
		json_object_set_new(rs, "cpu", json_string(c2));
	}
	if (mem > 0) {
		cleanup_free char *m = fmt_mem(mem);
		json_object_set_new(rs, "memory", json_string(m));
	}
	if (gpus <= 0)
		return 0;
	cleanup_free char *g = xasprintf("%lld", (long long)gpus);
	json_object_foreach((json_t *)selector, key, val)
	{
		if (!gpu_prefix(key, &rest))
			continue;
		const char *type = json_string_value(val);
		cleanup_free char *g2 =
		    xasprintf("%s %s", g, type && *type ? type : rest);
		json_object_set_new(rs, "gpu", json_string(g2));
		return 0;
	}
	json_object_set_new(rs, "gpu", json_string(g));
	return 0;
}

/* ---- volumes (k8sToMilpaVolume) ---- */

static json_t *key_to_paths(const json_t *items)
{
	json_t *out = json_array(), *it;
	size_t i;

	json_array_foreach(items, i, it)
	{
		json_t *x = json_pack("{s:s,s:s}", "key", js(it, "key"), "path",
				      js(it, "path"));
		copy_ptr(x, it, "mode");
		json_array_append_new(out, x);
	}
	return out;
}

static json_t *object_ref_source(const json_t *src, const char *name_key,
				 const char *out_key, bool with_mode)
{
	json_t *x = json_object();

	if (*js(src, name_key))
		json_object_set_new(x, out_key, json_string(js(src, name_key)));
	set_nonempty(x, "items", key_to_paths(jget(src, "items")));
	if (with_mode)
		copy_ptr(x, src, "defaultMode");
	copy_ptr(x, src, "optional");
	return x;
}

static json_t *volume(const json_t *v, bool kip, struct cerr *e)
{
	json_t *out = json_pack("{s:s}", "name", js(v, "name")), *s;
	int64_t size = 0;

	if ((s = jget(v, "secret"))) {
		json_object_set_new(
		    out, "secret",
		    object_ref_source(s, "secretName", "secretName", true));
	} else if ((s = jget(v, "hostPath"))) {
		json_t *x = json_pack("{s:s}", "path", js(s, "path"));
		copy_ptr(x, s, "type");
		json_object_set_new(out, "hostPath", x);
	} else if ((s = jget(v, "configMap"))) {
		json_object_set_new(out, "configMap",
				    object_ref_source(s, "name", "name", true));
	} else if ((s = jget(v, "emptyDir"))) {
		json_t *x = json_object();
		copy_str(x, s, "medium");
		/* SizeLimit.AsInt64(): 0 when it is no whole number. */
		if (qty(jget(s, "sizeLimit"), false, &size, e) < 0) {
			json_decref(out);
			json_decref(x);
			return NULL;
		}
		if (size)
			json_object_set_new(x, "sizeLimit", json_integer(size));
		json_object_set_new(out, "emptyDir", x);
	} else if ((s = jget(v, "projected"))) {
		json_t *x = json_object(), *srcs = json_array(), *src;
		size_t i;
		json_array_foreach(jget(s, "sources"), i, src)
		{
			json_t *p = json_object(), *r;
			if ((r = jget(src, "secret")))
				json_object_set_new(p, "secret",
						    object_ref_source(r, "name",
								      "name",
								      false));
			else if ((r = jget(src, "configMap")))
				json_object_set_new(p, "configMap",
						    object_ref_source(r, "name",
								      "name",
								      false));
			else if ((r = jget(src, "downwardAPI")) && !kip)
				json_object_set(p, "downwardAPI", r);
			json_array_append_new(srcs, p);
		}
		json_object_set_new(x, "sources", srcs);
		copy_ptr(x, s, "defaultMode");
		json_object_set_new(out, "projected", x);
	} else if ((s = jget(v, "downwardAPI")) && !kip) {
		/* An extension: its files come in a package, as a projected
		 * volume's (podfiles.c renders them). */
		json_t *x = json_object();
		json_object_set_new(
		    x, "sources",
		    json_pack("[{s:O}]", "downwardAPI", (json_t *)s));
		copy_ptr(x, s, "defaultMode");
		json_object_set_new(out, "projected", x);
	} else {
		/* Kip: an unsupported volume becomes a memory emptyDir. */
		json_object_set_new(out, "emptyDir",
				    json_pack("{s:s}", "medium", "Memory"));
	}
	return out;
}

static json_t *package_volume(const char *name, const char *path)
{
	return json_pack("{s:s,s:{s:s}}", "name", name, "packagePath", "path",
			 path);
}

static int volumes(const json_t *list, bool kip, json_t **out, struct cerr *e)
{
	json_t *a = json_array(), *v;
	size_t i;

	json_array_foreach(list, i, v)
	{
		json_t *x = volume(v, kip, e);
		if (!x) {
			json_decref(a);
			return cerr_prefix(e, "volume %s", js(v, "name"));
		}
		json_array_append_new(a, x);
	}
	json_array_append_new(a,
			      package_volume("resolvconf", "/etc/resolv.conf"));
	json_array_append_new(a, package_volume("etchosts", "/etc/hosts"));
	*out = a;
	return 0;
}

/* ---- the pod ---- */

static json_t *pod_security(const json_t *spec, const json_t *sc, bool kip)
{
	json_t *out = json_object(), *ns = json_object(), *a, *v;
	size_t i;

	/* Modes: 0 pod (left out: omitempty), 1 container, 2 node. */
	if (json_is_true(jget(spec, "hostNetwork")))
		json_object_set_new(ns, "network", json_integer(2));
	json_object_set_new(
	    ns, "pid",
	    json_integer(json_is_true(jget(spec, "hostPID")) ? 2 : 1));
	json_object_set_new(
	    ns, "ipc",
	    json_integer(json_is_true(jget(spec, "hostIPC")) ? 2 : 1));
	json_object_set_new(out, "namespaceOptions", ns);
	copy_ptr(out, sc, "runAsUser");
	copy_ptr(out, sc, "runAsGroup");
	if (json_array_size(jget(sc, "supplementalGroups")))
		json_object_set_new(
		    out, "supplementalGroups",
		    json_deep_copy(jget(sc, "supplementalGroups")));
	a = json_array();
	json_array_foreach(jget(sc, "sysctls"), i, v)
	{
		json_array_append_new(a, json_pack("{s:s,s:s}", "name",
						   js(v, "name"), "value",
						   js(v, "value")));
	}
	set_nonempty(out, "sysctls", a);
	if (!kip) { /* extensions: tagged in Kip's type, never filled */
		copy_ptr(out, sc, "fsGroup");
		copy_str(out, sc, "fsGroupChangePolicy");
		copy_ptr(out, sc, "runAsNonRoot");
	}
	return out;
}

static void dns_option(json_t *x, const json_t *o)
{
	copy_str(x, o, "name");
	copy_ptr(x, o, "value");
}

static json_t *dns_config(const json_t *dc)
{
	json_t *out = json_object();

	copy_strv(out, dc, "nameservers");
	copy_strv(out, dc, "searches");
	set_nonempty(out, "options",
		     map_objects(jget(dc, "options"), dns_option));
	return out;
}

static void host_alias(json_t *x, const json_t *h)
{
	copy_str(x, h, "ip");
	copy_strv(x, h, "hostnames");
}

static json_t *host_aliases(const json_t *list)
{
	return map_objects(list, host_alias);
}

static bool parse_go_bool(const char *s, bool *out)
{
	static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
	static const char *const f[] = {"0",	 "f",	  "F",
					"FALSE", "false", "False"};
	for (size_t i = 0; i < ARRAY_SIZE(t); i++) {
		if (!strcmp(s, t[i]))
			return (*out = true);
		if (!strcmp(s, f[i]))
			return !(*out = false);
	}
	return false;
}

/* addAnnotationsToMilpaPod */
static void launch_annotations(const json_t *ann, json_t *spec, json_t *rs)
{
	const char *lt = js(ann, ELOTL_PREFIX "launch-type");
	const char *it = js(ann, ELOTL_PREFIX "instance-type");
	const char *pip = js(ann, ELOTL_PREFIX "private-ip-only");
	const char *vs = js(ann, ELOTL_PREFIX "volume-size");
	bool b;

	if (!strcasecmp(lt, "spot"))
		json_object_set_new(spec, "spot",
				    json_pack("{s:s}", "policy", "Always"));
	if (!strcasecmp(lt, "dedicated"))
		json_object_set_new(spec, "dedicated", json_true());
	if (*it)
		json_object_set_new(spec, "instanceType", json_string(it));
	if (!strncasecmp(it, "mac1", 4)) {
		json_object_set_new(spec, "spot",
				    json_pack("{s:s}", "policy", "Never"));
		json_object_set_new(spec, "dedicated", json_true());
	}
	if (*pip && parse_go_bool(pip, &b) && b)
		json_object_set_new(rs, "privateIPOnly", json_true());
	if (*vs)
		json_object_set_new(rs, "volumeSize", json_string(vs));
}

/* preCreatePod: instanceselector.ResourcesToInstanceType. */
static int choose_instance(json_t *spec, json_t *rs,
			   const struct convert_opts *o, struct cerr *e)
{
	struct select_req r = {
	    .cpu = json_string_value(json_object_get(rs, "cpu")),
	    .memory = json_string_value(json_object_get(rs, "memory")),
	    .gpu = json_string_value(json_object_get(rs, "gpu")),
	    .instance_type =
		json_string_value(json_object_get(spec, "instanceType")),
	    .dedicated_cpu = false,
	    .sustained_cpu = -1,
	    .default_type = o->default_instance_type,
	    .archs = o->image_archs,
	};
	const char *type = NULL;
	int sustained = -1;

	if (inst_select(o->instances, &r, &type, &sustained, e) < 0)
		return -1;
	json_object_set_new(spec, "instanceType", json_string(type));
	if (sustained >= 0)
		json_object_set_new(rs, "sustainedCPU",
				    json_boolean(sustained));
	return 0;
}

/* Kip forwards pod.elotl.co/ keys only; cellctl also passes Kubernetes'
 * CDI device annotations (cdi.k8s.io/<name>: vendor.com/class=name), which
 * the agent honours like pod.elotl.co/cdi-<name>. */
static json_t *elotl_annotations(const json_t *ann)
{
	json_t *out = json_object(), *v;
	const char *k;

	json_object_foreach((json_t *)ann, k, v)
	{
		if ((str_has_prefix(k, ELOTL_PREFIX) ||
		     str_has_prefix(k, "cdi.k8s.io/")) &&
		    json_is_string(v))
			json_object_set(out, k, v);
	}
	return out;
}

static int build_spec(const json_t *ps, const json_t *ann,
		      const struct convert_opts *o, json_t **out,
		      struct cerr *e)
{
	json_t *spec = json_object(), *rs = json_object(), *x, *ips, *v;
	size_t i;

	json_object_set_new(spec, "phase", json_string("Running"));
	json_object_set_new(spec, "restartPolicy",
			    json_string(js(ps, "restartPolicy")));
	if (units(jget(ps, "initContainers"), false, o, &x, e) < 0)
		goto fail;
	json_object_set_new(spec, "initUnits", x);
	if (units(jget(ps, "containers"), true, o, &x, e) < 0)
		goto fail;
	if (json_is_null(x)) {
		json_decref(x);
		cerr_set(e, EINVAL, "the pod has no containers");
		goto fail;
	}
	json_object_set_new(spec, "units", x);
	ips = json_null();
	if (json_array_size(jget(ps, "imagePullSecrets"))) {
		json_decref(ips);
		ips = json_array();
		json_array_foreach(jget(ps, "imagePullSecrets"), i, v)
		{
			json_array_append_new(ips, json_string(js(v, "name")));
		}
	}
	json_object_set_new(spec, "imagePullSecrets", ips);
	json_object_set_new(spec, "spot",
			    json_pack("{s:s}", "policy", "Never"));
	if (jget(ps, "securityContext"))
		json_object_set_new(
		    spec, "securityContext",
		    pod_security(ps, jget(ps, "securityContext"), o->kip));
	if (!o->kip)
		copy_ptr(spec, ps, "activeDeadlineSeconds");
	copy_str(spec, ps, "dnsPolicy");
	if (jget(ps, "dnsConfig"))
		json_object_set_new(spec, "dnsConfig",
				    dns_config(jget(ps, "dnsConfig")));
	if (volumes(jget(ps, "volumes"), o->kip, &x, e) < 0)
		goto fail;
	json_object_set_new(spec, "volumes", x);
	if (aggregate(jget(ps, "containers"), jget(ps, "nodeSelector"), rs, e) <
	    0)
		goto fail;
	copy_str(spec, ps, "hostname");
	copy_str(spec, ps, "subdomain");
	set_nonempty(spec, "hostAliases",
		     host_aliases(jget(ps, "hostAliases")));
	launch_annotations(ann, spec, rs);
	if (choose_instance(spec, rs, o, e) < 0)
		goto fail;
	json_object_set_new(spec, "resources", rs);
	*out = spec;
	return 0;
fail:
	json_decref(spec);
	json_decref(rs);
	return -1;
}

int pod_convert(json_t *pod, json_t *objects, const struct convert_opts *o,
		struct converted *out, struct cerr *e)
{
	const json_t *meta = jget(pod, "metadata"), *ps = jget(pod, "spec");
	const json_t *ann = jget(meta, "annotations");
	json_t *spec = NULL;
	cleanup_free char *hostname = NULL;

	memset(out, 0, sizeof(*out));
	if (strcmp(js(pod, "kind"), "Pod") != 0 || !ps)
		return cerr_set(e, EINVAL, "not a v1 Pod (kind \"%s\")",
				js(pod, "kind"));
	if (!*js(meta, "name"))
		return cerr_set(e, EINVAL, "the pod has no metadata.name");
	out->pod_name =
	    xasprintf("%s_%s", js(meta, "namespace"), js(meta, "name"));
	if (pod_env_resolve(pod, objects, o, e) < 0 ||
	    build_spec(ps, ann, o, &spec, e) < 0 ||
	    pod_hostname(pod, o, &hostname, e) < 0)
		goto fail;
	out->params = json_pack(
	    "{s:n,s:{},s:o,s:o,s:s,s:s,s:s,s:s}", "secrets", "credentials",
	    "spec", spec, "Annotations", elotl_annotations(ann), "PodName",
	    out->pod_name, "NodeName", o->node_name ? o->node_name : "",
	    "PodIP", o->pod_ip ? o->pod_ip : "", "PodHostname", hostname);
	spec = NULL;
	if (pod_packages(pod, objects, o, out, e) < 0)
		goto fail;
	return 0;
fail:
	json_decref(spec);
	converted_free(out);
	return cerr_prefix(e, "pod %s", js(meta, "name"));
}

void converted_free(struct converted *c)
{
	json_decref(c->params);
	free(c->pod_name);
	for (size_t i = 0; i < c->n_pkgs; i++) {
		for (size_t j = 0; j < c->pkgs[i].n; j++) {
			free(c->pkgs[i].files[j].path);
			free(c->pkgs[i].files[j].data);
		}
		free(c->pkgs[i].files);
		free(c->pkgs[i].name);
	}
	free(c->pkgs);
	memset(c, 0, sizeof(*c));
}
