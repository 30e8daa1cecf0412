// SPDX-License-Identifier: Apache-2.0
/* The downward API's values that the controller side resolves: a
 * fieldRef (metadata.*, spec.*, status.podIP, as the virtual-kubelet), and
 * (an extension: Kip leaves resourceFieldRef empty and downwardAPI volumes
 * out) a container's resources with a divisor, and the files of a
 * downwardAPI volume or projected source, rendered like the kubelet's
 * (pkg/fieldpath FormatMap, ExtractResourceValueByContainerName). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "ctl-internal.h"
#include "jsonutil.h"
#include "quantity.h"
#include "util.h"

static const json_t *container_named(const json_t *pod, const char *name)
{
	static const char *const lists[] = {"containers", "initContainers"};
	const json_t *spec = jget(pod, "spec"), *c;
	size_t i;

	for (size_t l = 0; l < ARRAY_SIZE(lists); l++)
		json_array_foreach(jget(spec, lists[l]), i, c)
		{
			if (!strcmp(js(c, "name"), name))
				return c;
		}
	return NULL;
}

/* A quantity as an exact integer (milli for cpu); 0 when absent. */
static int qty_of(const json_t *v, bool milli, int64_t *out, struct cerr *e)
{
	char num[32];
	const char *s = json_string_value(v);

	*out = 0;
	if (json_is_integer(v)) {
		snprintf(num, sizeof(num), "%lld",
			 (long long)json_integer_value(v));
		s = num;
	}
	if (!s || !*s)
		return 0;
	return milli ? quantity_milli(s, out, e) : quantity_value(s, out, e);
}

/* ceil(a / b) for a >= 0, b > 0 */
static int64_t div_up(int64_t a, int64_t b)
{
	return a / b + (a % b != 0);
}

int downward_resource(const json_t *pod, const char *container,
		      const json_t *rfr, char **out, struct cerr *e)
{
	const char *res = js(rfr, "resource"), *dot = strchr(res, '.');
	const char *cname =
	    *js(rfr, "containerName") ? js(rfr, "containerName") : container;
	const json_t *c = cname ? container_named(pod, cname) : NULL;
	bool cpu = dot && !strcmp(dot + 1, "cpu");
	int64_t v = 0, d = 0;

	if (!c)
		return cerr_set(e, EINVAL,
				"resourceFieldRef %s: no container \"%s\"", res,
				cname ? cname : "");
	if (!dot ||
	    (strncmp(res, "limits.", 7) && strncmp(res, "requests.", 9)))
		return cerr_set(e, EINVAL,
				"resourceFieldRef %s is not supported", res);
	cleanup_free char *kind = xstrndup(res, (size_t)(dot - res));
	if (qty_of(jget(jget(jget(c, "resources"), kind), dot + 1), cpu, &v,
		   e) < 0 ||
	    qty_of(jget(rfr, "divisor"), cpu, &d, e) < 0)
		return cerr_prefix(e, "resourceFieldRef %s", res);
	if (d <= 0)
		d = cpu ? 1000 : 1;
	*out = xasprintf("%lld", (long long)div_up(v, d));
	return 0;
}

/* Go's %q of s (the ASCII cases a label or annotation holds). */
static void go_quote(struct buf *b, const char *s)
{
	struct cerr e = {0};

	buf_append(b, "\"", 1, &e);
	for (; *s; s++) {
		char esc[8];
		const char *x = NULL;
		unsigned char ch = (unsigned char)*s;

		if (ch == '"')
			x = "\\\"";
		else if (ch == '\\')
			x = "\\\\";
		else if (ch == '\n')
			x = "\\n";
		else if (ch == '\t')
			x = "\\t";
		else if (ch == '\r')
			x = "\\r";
		else if (ch < 0x20 || ch == 0x7f) {
			snprintf(esc, sizeof(esc), "\\x%02x", ch);
			x = esc;
		}
		if (x)
			buf_append(b, x, strlen(x), &e);
		else
			buf_append(b, s, 1, &e);
	}
	buf_append(b, "\"", 1, &e);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* FormatMap: k="v" lines by sorted key, no newline after the last. */
char *downward_format_map(const json_t *m)
{
	size_t n = 0, i = 0;
	const char *k;
	json_t *v;
	struct buf b;
	struct cerr e = {0};
	const char **keys = xcalloc(json_object_size(m) + 1, sizeof(char *));

	json_object_foreach((json_t *)m, k, v)
	{
		keys[n++] = k;
	}
	qsort(keys, n, sizeof(*keys), cmp_str);
	buf_init(&b, 64u << 20);
	for (i = 0; i < n; i++) {
		if (i)
			buf_append(&b, "\n", 1, &e);
		buf_append(&b, keys[i], strlen(keys[i]), &e);
		buf_append(&b, "=", 1, &e);
		go_quote(&b,
			 json_string_value(json_object_get(m, keys[i])) ?: "");
	}
	free(keys);
	buf_append(&b, "", 0, &e);
	return b.data ? buf_steal(&b, NULL) : xstrdup("");
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
