// SPDX-License-Identifier: Apache-2.0
/* The controller ↔ cell JSON (WIRE.md): PodParameters in (this file),
 * PodStatusReply out (wirestatus.c). These two are the only agent files
 * that touch jansson for these; the rest of the agent sees struct pod_spec
 * and struct pod_status.
 *
 * The controller is Go: it sends every field of its structs, known to us or
 * not, with null for empty slices, maps and pointers. So null is "absent"
 * everywhere, unknown keys are ignored, and a wrong type is an error that
 * names its JSON path ("spec.units[1].ports[0].containerPort: not an
 * integer"). docs/agent-wire.md lists what we checked against Kip's source. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "podspec.h"
#include "base64.h"
#include "cleanup.h"
#include "jsonutil.h"
#include "util.h"

#define UID_MAX_WIRE 4294967294LL /* (uid_t)-1 means "unchanged" */

/* ---- warnings, and the wire's own getters over common/jsonutil's ---- */

/* Warnings of the parse under way (wire_parse_pod sets this for its own
 * thread): inputs that are accepted but cannot take effect. The parser
 * stays pure: they end up in pod_spec.warnings for the caller to log. */
static __thread char ***warn_sink;
static __thread size_t *warn_n;

__attribute__((format(printf, 1, 2))) static void warnf(const char *fmt, ...)
{
	va_list ap;
	char *w;

	if (!warn_sink || *warn_n >= WIRE_MAX_WARNINGS)
		return;
	va_start(ap, fmt);
	w = xvasprintf(fmt, ap);
	va_end(ap);
	*warn_sink = xrealloc(*warn_sink, (*warn_n + 2) * sizeof(char *));
	(*warn_sink)[(*warn_n)++] = w;
	(*warn_sink)[*warn_n] = NULL;
}

static int check_len(const json_t *v, const char *at, const char *key,
		     struct cerr *e)
{
	size_t n = json_string_length(v);

	if (n > WIRE_MAX_STR)
		return jbad(e, at, key, "too long (%zu bytes, max %u)", n,
			    WIRE_MAX_STR);
	return 0;
}

/* A string with def when absent or "" (Go's zero value). */
static int get_str_def(const json_t *o, const char *at, const char *key,
		       const char *def, char **out, struct cerr *e)
{
	if (jget_str(o, at, key, WIRE_MAX_STR, out, e) < 0)
		return -1;
	if (!*out || !**out) {
		free(*out);
		*out = xstrdup(def);
	}
	return 0;
}

/* An int32 field where 0 or absent means def (Kubernetes' probe fields). */
static int get_int_def(const json_t *o, const char *at, const char *key,
		       int def, int *out, struct cerr *e)
{
	int64_t v = 0;

	if (jget_int(o, at, key, 0, INT32_MAX, &v, NULL, e) < 0)
		return -1;
	*out = v ? (int)v : def;
	return 0;
}

/* ---- small validators ---- */

/* RFC 1123 label: what Kubernetes requires of container and volume names,
 * and what makes a name safe as one path component. */
static bool is_dns_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static bool has_dotdot(const char *p)
{
	for (const char *c = p; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return true;
		c += n;
		while (*c == '/')
			c++;
	}
	return false;
}

static int get_label(const json_t *o, const char *at, char **out,
		     struct cerr *e)
{
	if (jget_str_req(o, at, "name", WIRE_MAX_STR, out, e) < 0)
		return -1;
	if (!is_dns_label(*out))
		return jbad(e, at, "name",
			    "\"%s\" is not a DNS-1123 label (a-z, 0-9, '-', "
			    "at most 63)",
			    *out);
	return 0;
}

/* ---- secrets, credentials, annotations ---- */

/* Strict standard base64 (RFC 4648 §4), as Go's encoding/json writes []byte:
 * padded, no whitespace, and unused bits zero so that each byte string has
 * exactly one spelling. The result is NUL-terminated for convenience. */
static int secret_b64(const char *s, size_t n, char **out, size_t *outlen)
{
	struct buf b;

	buf_init(&b, 0);
	if (b64_decode(s, n, B64_PADDED | B64_CANONICAL, &b, NULL) < 0) {
		buf_free(&b);
		return -1;
	}
	*out = buf_steal(&b, outlen);
	return 0;
}

static int parse_secret(const char *name, json_t *items, const char *at,
			struct secret *s, struct cerr *e)
{
	const char *key;
	json_t *v;
	size_t i = 0;

	s->name = xstrdup(name);
	if (!items)
		return 0;
	if (!json_is_object(items))
		return jbad(e, at, NULL, "not an object");
	s->n_items = json_object_size(items);
	s->items = xcalloc(s->n_items, sizeof(*s->items));
	s->item_len = xcalloc(s->n_items, sizeof(*s->item_len));
	json_object_foreach(items, key, v)
	{
		char p[JSON_PATH_MAX];
		const char *b = json_is_null(v) ? "" : json_string_value(v);
		size_t n = json_is_null(v) ? 0 : json_string_length(v);

		snprintf(p, sizeof(p), "%s[\"%s\"]", at, key);
		s->items[i].name = xstrdup(key);
		if (!b)
			return jbad(e, p, NULL, "not a string");
		if (strlen(key) > WIRE_MAX_STR)
			return jbad(e, p, NULL, "key too long");
		if (n > (WIRE_MAX_SECRET_VALUE + 2) / 3 * 4)
			return jbad(e, p, NULL, "longer than %u bytes",
				    WIRE_MAX_SECRET_VALUE);
		if (secret_b64(b, n, &s->items[i].value, &s->item_len[i]) < 0)
			return jbad(e, p, NULL, "not valid base64");
		if (s->item_len[i] > WIRE_MAX_SECRET_VALUE)
			return jbad(e, p, NULL, "longer than %u bytes",
				    WIRE_MAX_SECRET_VALUE);
		i++;
	}
	return 0;
}

/* secrets: name → key → base64 bytes. Kip's controller sends null here
 * (it never fills PodParameters.Secrets); older controllers filled it. */
static int parse_secrets(const json_t *root, struct pod_spec *out,
			 struct cerr *e)
{
	int r;
	json_t *o, *v;
	const char *name;
	size_t i = 0, items = 0;

	if ((r = jget_obj(root, "", "secrets", &o, e)) <= 0)
		return r;
	if (json_object_size(o) > WIRE_MAX_SECRET_ITEMS)
		return jbad(e, "secrets", NULL, "too many secrets (max %d)",
			    WIRE_MAX_SECRET_ITEMS);
	out->n_secrets = json_object_size(o);
	out->secrets = xcalloc(out->n_secrets, sizeof(*out->secrets));
	json_object_foreach(o, name, v)
	{
		char p[JSON_PATH_MAX];

		snprintf(p, sizeof(p), "secrets[\"%s\"]", name);
		if (strlen(name) > WIRE_MAX_STR)
			return jbad(e, p, NULL, "name too long");
		items += json_is_object(v) ? json_object_size(v) : 0;
		if (items > WIRE_MAX_SECRET_ITEMS)
			return jbad(e, "secrets", NULL,
				    "too many items (max %d)",
				    WIRE_MAX_SECRET_ITEMS);
		if (parse_secret(name, jget(o, name), p, &out->secrets[i++],
				 e) < 0)
			return -1;
	}
	return 0;
}

static int parse_credentials(const json_t *root, struct pod_spec *out,
			     struct cerr *e)
{
	int r;
	json_t *o, *v;
	const char *host;

	if ((r = jget_obj(root, "", "credentials", &o, e)) <= 0)
		return r;
	if (json_object_size(o) > WIRE_MAX_LIST)
		return jbad(e, "credentials", NULL, "too many entries");
	out->credentials =
	    xcalloc(json_object_size(o), sizeof(*out->credentials));
	json_object_foreach(o, host, v)
	{
		struct credential *c;
		char p[JSON_PATH_MAX];

		snprintf(p, sizeof(p), "credentials[\"%s\"]", host);
		if (json_is_null(v))
			continue; /* nothing to log in with */
		if (!json_is_object(v))
			return jbad(e, p, NULL, "not an object");
		if (strlen(host) > WIRE_MAX_STR)
			return jbad(e, p, NULL, "host too long");
		c = &out->credentials[out->n_credentials++];
		c->host = xstrdup(host);
		if (jget_str(v, p, "server", WIRE_MAX_STR, &c->server, e) < 0 ||
		    jget_str(v, p, "username", WIRE_MAX_STR, &c->username, e) <
			0 ||
		    jget_str(v, p, "password", WIRE_MAX_STR, &c->password, e) <
			0)
			return -1;
	}
	return 0;
}

/* Only pod.elotl.co/ keys mean anything to a cell; the controller already
 * filters, and whatever else arrives is ignored unchecked. */
static int parse_annotations(const json_t *root, struct pod_spec *out,
			     struct cerr *e)
{
	static const char prefix[] = "pod.elotl.co/", cdi[] = "cdi.k8s.io/";
	int r;
	json_t *o, *v;
	const char *key;

	if ((r = jget_obj(root, "", "Annotations", &o, e)) <= 0)
		return r;
	if (json_object_size(o) > WIRE_MAX_LIST)
		return jbad(e, "Annotations", NULL, "too many entries");
	out->annotations =
	    xcalloc(json_object_size(o), sizeof(*out->annotations));
	json_object_foreach(o, key, v)
	{
		struct kv *a = &out->annotations[out->n_annotations];
		char p[JSON_PATH_MAX];

		if (!str_has_prefix(key, prefix) && !str_has_prefix(key, cdi))
			continue;
		snprintf(p, sizeof(p), "Annotations[\"%s\"]", key);
		if (v && !json_is_null(v) && !json_is_string(v))
			return jbad(e, p, NULL, "not a string");
		if (strlen(key) > WIRE_MAX_STR ||
		    (json_is_string(v) && check_len(v, p, NULL, e) < 0))
			return jbad(e, p, NULL, "too long");
		a->name = xstrdup(key);
		a->value =
		    xstrdup(json_is_string(v) ? json_string_value(v) : "");
		out->n_annotations++;
	}
	return 0;
}

/* ---- volumes ---- */

static const char *const volume_kinds[] = {
    [VOL_EMPTY_DIR] = "emptyDir",   [VOL_PACKAGE_PATH] = "packagePath",
    [VOL_CONFIG_MAP] = "configMap", [VOL_SECRET] = "secret",
    [VOL_HOST_PATH] = "hostPath",   [VOL_PROJECTED] = "projected",
};

/* emptyDir.sizeLimit: Kip sends an int64 of bytes; a Kubernetes quantity
 * string is accepted too. */
static int parse_size_limit(const json_t *o, const char *at, int64_t *out,
			    struct cerr *e)
{
	json_t *v = jget(o, "sizeLimit");
	double d;

	if (!v)
		return 0;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return jbad(e, at, "sizeLimit", "negative");
		*out = json_integer_value(v);
		return 0;
	}
	if (json_is_real(v)) {
		d = ceil(json_real_value(v));
		if (!(d >= 0 && d < 9223372036854775808.0))
			return jbad(e, at, "sizeLimit", "out of range");
		*out = (int64_t)d;
		return 0;
	}
	if (!json_is_string(v))
		return jbad(e, at, "sizeLimit", "not a number or quantity");
	if (check_len(v, at, "sizeLimit", e) < 0)
		return -1;
	if (quantity_value(json_string_value(v), out, e) < 0) {
		e->code =
		    EINVAL; /* a bad value in the body, whatever the kind */
		return cerr_prefix(e, "%s.sizeLimit", at);
	}
	return 0;
}

static int parse_volume_source(const json_t *src, const char *at,
			       struct volume *v, struct cerr *e)
{
	char *medium = NULL;
	int64_t mode = -1;

	switch (v->kind) {
	case VOL_EMPTY_DIR:
		if (jget_str(src, at, "medium", WIRE_MAX_STR, &medium, e) < 0)
			return -1;
		v->memory = medium && !strcmp(medium, "Memory");
		if (medium && *medium && !v->memory) {
			jbad(e, at, "medium",
			     "\"%s\" is not \"\" or \"Memory\"", medium);
			free(medium);
			return -1;
		}
		free(medium);
		return parse_size_limit(src, at, &v->size_limit, e);
	case VOL_HOST_PATH:
		if (jget_str(src, at, "type", WIRE_MAX_STR, &v->host_path_type,
			     e) < 0 ||
		    jget_str_req(src, at, "path", WIRE_MAX_STR, &v->path, e) <
			0)
			return -1;
		if (v->path[0] != '/' || has_dotdot(v->path))
			return jbad(e, at, "path", "not absolute or has '..'");
		return 0;
	case VOL_PACKAGE_PATH:
		/* "" or absent: the whole package. */
		if (jget_str(src, at, "path", WIRE_MAX_STR, &v->path, e) < 0)
			return -1;
		if (!v->path)
			v->path = xstrdup("");
		if (has_dotdot(v->path))
			return jbad(e, at, "path", "has '..'");
		return 0;
	case VOL_CONFIG_MAP:
	case VOL_SECRET:
		if (jget_str(src, at,
			     v->kind == VOL_SECRET ? "secretName" : "name",
			     WIRE_MAX_STR, &v->source_name, e) < 0)
			return -1;
		break;
	case VOL_PROJECTED:
		if (jget_arr(src, at, "sources", WIRE_MAX_LIST, &(json_t *){0},
			     e) < 0)
			return -1;
		break;
	case VOL_UNKNOWN:
		return 0;
	}
	if (jget_int(src, at, "defaultMode", 0, 07777, &mode, NULL, e) < 0)
		return -1;
	v->default_mode = (int)mode;
	return 0;
}

static int parse_volume(const json_t *o, const char *at, struct volume *v,
			struct cerr *e)
{
	json_t *src = NULL, *s;
	char p[JSON_PATH_MAX];
	int n = 0;

	v->default_mode = -1;
	if (!json_is_object(o))
		return jbad(e, at, NULL, "not an object");
	if (get_label(o, at, &v->name, e) < 0)
		return -1;
	for (size_t k = 0; k < ARRAY_SIZE(volume_kinds); k++) {
		if (jget_obj(o, at, volume_kinds[k], &s, e) < 0)
			return -1;
		if (!s)
			continue;
		if (n++)
			return jbad(e, at, NULL,
				    "volume \"%s\" has both %s and %s; exactly "
				    "one source is allowed",
				    v->name, volume_kinds[v->kind],
				    volume_kinds[k]);
		v->kind = (enum volume_kind)k;
		src = s;
	}
	if (!src) {
		/* A kind this cell does not know (or none): accepted, and a
		 * unit that mounts it fails to start with the reason. */
		v->kind = VOL_UNKNOWN;
		warnf("%s: volume \"%s\" has no source this cell supports "
		      "(emptyDir, packagePath, configMap, secret, hostPath, "
		      "projected); units that mount it will not start",
		      at, v->name);
		return 0;
	}
	jpath(p, at, volume_kinds[v->kind], -1);
	return parse_volume_source(src, p, v, e);
}

static int parse_volumes(const json_t *spec, struct pod_spec *out,
			 struct cerr *e)
{
	int r;
	json_t *a, *v;
	size_t i;

	if ((r = jget_arr(spec, "spec", "volumes", WIRE_MAX_VOLUMES, &a, e)) <=
	    0)
		return r;
	out->n_volumes = json_array_size(a);
	out->volumes = xcalloc(out->n_volumes, sizeof(*out->volumes));
	json_array_foreach(a, i, v)
	{
		char p[JSON_PATH_MAX];

		jpath(p, "spec", "volumes", (long)i);
		if (parse_volume(v, p, &out->volumes[i], e) < 0)
			return -1;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(out->volumes[j].name, out->volumes[i].name))
				return jbad(e, p, "name",
					    "\"%s\" is used twice",
					    out->volumes[i].name);
	}
	return 0;
}

/* ---- units ---- */

/* A literal value, or valueFrom.secretKeyRef. Other valueFrom sources
 * (fieldRef, configMapKeyRef) are not on the wire; one that arrives is
 * ignored and the literal value stands. */
static int parse_env(const json_t *o, const char *at, struct env_var *ev,
		     struct cerr *e)
{
	json_t *from, *ref;
	char p[JSON_PATH_MAX];

	if (!json_is_object(o))
		return jbad(e, at, NULL, "not an object");
	if (jget_str_req(o, at, "name", WIRE_MAX_STR, &ev->name, e) < 0 ||
	    jget_str(o, at, "value", WIRE_MAX_STR, &ev->value, e) < 0 ||
	    jget_obj(o, at, "valueFrom", &from, e) < 0)
		return -1;
	if (strchr(ev->name, '='))
		return jbad(e, at, "name", "\"%s\" contains '='", ev->name);
	jpath(p, at, "valueFrom", -1);
	if (from && jget_obj(from, p, "secretKeyRef", &ref, e) < 0)
		return -1;
	if (from && ref) {
		jpath(p, at, "valueFrom.secretKeyRef", -1);
		if (jget_str_req(ref, p, "name", WIRE_MAX_STR, &ev->secret_name,
				 e) < 0 ||
		    jget_str_req(ref, p, "key", WIRE_MAX_STR, &ev->secret_key,
				 e) < 0)
			return -1;
		free(ev->value);
		ev->value = NULL;
	} else if (!ev->value) {
		ev->value = xstrdup("");
	}
	return 0;
}

static const struct volume *find_volume(const struct pod_spec *pod,
					const char *name)
{
	for (size_t i = 0; i < pod->n_volumes; i++)
		if (!strcmp(pod->volumes[i].name, name))
			return &pod->volumes[i];
	return NULL;
}

static int parse_mount(const json_t *o, const char *at,
		       const struct pod_spec *pod, struct volume_mount *m,
		       struct cerr *e)
{
	if (!json_is_object(o))
		return jbad(e, at, NULL, "not an object");
	if (jget_str_req(o, at, "name", WIRE_MAX_STR, &m->name, e) < 0 ||
	    jget_str_req(o, at, "mountPath", WIRE_MAX_STR, &m->mount_path, e) <
		0 ||
	    jget_str(o, at, "subPath", WIRE_MAX_STR, &m->sub_path, e) < 0 ||
	    jget_bool(o, at, "readOnly", &m->read_only, e) < 0)
		return -1;
	/* Kip drops volumes it cannot convert (a PVC, downwardAPI, …) but
	 * keeps the mounts: accepted, and the unit fails to start saying so. */
	if (!find_volume(pod, m->name))
		warnf("%s: no volume \"%s\" in the pod; the unit will not "
		      "start",
		      at, m->name);
	if (m->mount_path[0] != '/' || has_dotdot(m->mount_path))
		return jbad(e, at, "mountPath",
			    "\"%s\" is not absolute or has '..'",
			    m->mount_path);
	if (m->sub_path && !*m->sub_path) {
		free(m->sub_path);
		m->sub_path = NULL;
	}
	if (m->sub_path && (m->sub_path[0] == '/' || has_dotdot(m->sub_path)))
		return jbad(e, at, "subPath", "\"%s\" is absolute or has '..'",
			    m->sub_path);
	return 0;
}

static int parse_port(const json_t *o, const char *at, struct port *pt,
		      struct cerr *e)
{
	static const char *const protocols[] = {"TCP", "UDP", "SCTP", "ICMP"};
	int64_t cport = 0, hport = 0;
	bool has_cport = false;

	if (!json_is_object(o))
		return jbad(e, at, NULL, "not an object");
	if (jget_str(o, at, "name", WIRE_MAX_STR, &pt->name, e) < 0 ||
	    jget_int(o, at, "containerPort", 0, 65535, &cport, &has_cport, e) <
		0 ||
	    jget_int(o, at, "hostPort", 0, 65535, &hport, NULL, e) < 0 ||
	    get_str_def(o, at, "protocol", "TCP", &pt->protocol, e) < 0 ||
	    jget_str(o, at, "hostIP", WIRE_MAX_STR, &pt->host_ip, e) < 0)
		return -1;
	/* Ports only name a probe's port here: a port without a number or
	 * with a protocol we do not know is kept, with a warning. */
	if (!cport)
		warnf("%s: no containerPort", at);
	pt->container_port = (int)cport;
	pt->host_port = (int)hport;
	for (size_t i = 0; i < ARRAY_SIZE(protocols); i++)
		if (!strcmp(pt->protocol, protocols[i]))
			return 0;
	warnf("%s: protocol \"%s\" is not TCP, UDP, SCTP or ICMP", at,
	      pt->protocol);
	return 0;
}

/* A list of objects at key, each parsed by fn into an array of size elem. */
static int env_fn(const json_t *o, const char *at, void *ctx, void *elem,
		  struct cerr *e)
{
	return parse_env(o, at, elem, e);
}

static int mount_fn(const json_t *o, const char *at, void *ctx, void *elem,
		    struct cerr *e)
{
	return parse_mount(o, at, ctx, elem, e);
}

static int port_fn(const json_t *o, const char *at, void *ctx, void *elem,
		   struct cerr *e)
{
	return parse_port(o, at, elem, e);
}

/* {name, value} pairs: sysctls, httpHeaders, dnsConfig.options. With ctx
 * (&kv_value_default) an absent value becomes ""; dnsConfig.options keep
 * NULL, since an option may have no value at all ("rotate"). */
static bool kv_value_default = true;

static int kv_fn(const json_t *o, const char *at, void *ctx, void *elem,
		 struct cerr *e)
{
	struct kv *kv = elem;

	if (!json_is_object(o))
		return jbad(e, at, NULL, "not an object");
	if (jget_str_req(o, at, "name", WIRE_MAX_STR, &kv->name, e) < 0 ||
	    jget_str(o, at, "value", WIRE_MAX_STR, &kv->value, e) < 0)
		return -1;
	if (ctx && !kv->value)
		kv->value = xstrdup("");
	return 0;
}

/* securityContext.seccompProfile {type, localhostProfile}: an extension
 * (docs/agent-wire.md), checked here so a bad one fails the spec. */
static int parse_seccomp_ref(const json_t *sc, const char *at,
			     struct seccomp_ref *out, struct cerr *e)
{
	json_t *sp;
	char p[JSON_PATH_MAX];
	int r;

	if ((r = jget_obj(sc, at, "seccompProfile", &sp, e)) <= 0)
		return r;
	jpath(p, at, "seccompProfile", -1);
	if (jget_str_req(sp, p, "type", WIRE_MAX_STR, &out->type, e) < 0 ||
	    jget_str(sp, p, "localhostProfile", WIRE_MAX_STR, &out->localhost,
		     e) < 0)
		return -1;
	if (strcmp(out->type, "Unconfined") &&
	    strcmp(out->type, "RuntimeDefault") &&
	    strcmp(out->type, "Localhost"))
		return jbad(e, p, "type",
			    "want Unconfined, RuntimeDefault or Localhost");
	if (!strcmp(out->type, "Localhost") !=
	    (out->localhost && *out->localhost))
		return jbad(e, p, "localhostProfile",
			    "required for Localhost, and only for it");
	return 0;
}

/* A Go *bool: TRI_UNSET when absent or null. */
static int get_tri(const json_t *o, const char *at, const char *key,
		   enum tri *out, struct cerr *e)
{
	bool b = false;

	if (!jget(o, key))
		return 0;
	if (jget_bool(o, at, key, &b, e) < 0)
		return -1;
	*out = b ? TRI_TRUE : TRI_FALSE;
	return 0;
}

/* Kip's api.SecurityContext has these fields without JSON tags, so Go
 * spells them with capitals (and Kip's converter sends them as null); the
 * Kubernetes spelling is read when the Go one is absent. */
static const char *go_or_k8s(const json_t *o, const char *go, const char *k8s)
{
	return jget(o, go) ? go : k8s;
}

/* Extensions of a unit's securityContext (docs/agent-wire.md). */
static int parse_unit_security_ext(const json_t *sc, const char *p,
				   struct unit_spec *out, struct cerr *e)
{
	cleanup_free char *pm = NULL;
	const char *k;
	enum tri ro = TRI_UNSET, priv = TRI_UNSET;

	if (get_tri(sc, p,
		    go_or_k8s(sc, "ReadOnlyRootFilesystem",
			      "readOnlyRootFilesystem"),
		    &ro, e) < 0 ||
	    get_tri(sc, p, go_or_k8s(sc, "RunAsNonRoot", "runAsNonRoot"),
		    &out->run_as_non_root, e) < 0 ||
	    get_tri(sc, p,
		    go_or_k8s(sc, "AllowPrivilegeEscalation",
			      "allowPrivilegeEscalation"),
		    &out->allow_priv_esc, e) < 0 ||
	    get_tri(sc, p, go_or_k8s(sc, "Privileged", "privileged"), &priv,
		    e) < 0 ||
	    jget_str(sc, p, k = go_or_k8s(sc, "ProcMount", "procMount"),
		     WIRE_MAX_STR, &pm, e) < 0)
		return -1;
	out->read_only_root = ro == TRI_TRUE;
	out->privileged = priv == TRI_TRUE;
	if (pm && *pm && strcmp(pm, "Default") && strcmp(pm, "Unmasked"))
		return jbad(e, p, k, "\"%s\" is not Default or Unmasked", pm);
	out->proc_unmasked = pm && !strcmp(pm, "Unmasked");
	return 0;
}

static int parse_unit_security(const json_t *u, const char *at,
			       struct unit_spec *out, struct cerr *e)
{
	int r;
	json_t *sc, *caps;
	char p[JSON_PATH_MAX], q[JSON_PATH_MAX];

	if ((r = jget_obj(u, at, "securityContext", &sc, e)) <= 0)
		return r;
	jpath(p, at, "securityContext", -1);
	if (jget_int(sc, p, "runAsUser", 0, UID_MAX_WIRE, &out->run_as_user,
		     &out->has_run_as_user, e) < 0 ||
	    jget_int(sc, p, "runAsGroup", 0, UID_MAX_WIRE, &out->run_as_group,
		     &out->has_run_as_group, e) < 0 ||
	    parse_seccomp_ref(sc, p, &out->seccomp, e) < 0 ||
	    parse_unit_security_ext(sc, p, out, e) < 0 ||
	    jget_obj(sc, p, "capabilities", &caps, e) < 0)
		return -1;
	if (!caps)
		return 0;
	jpath(q, p, "capabilities", -1);
	/* Itzo's Capabilities.Drop has a broken struct tag, so Go spells it
	 * "Drop"; Kip writes "drop". Either is accepted, "drop" first. */
	if (jget_strv(caps, q, "add", WIRE_MAX_LIST, WIRE_MAX_STR,
		      &out->caps_add, e) < 0 ||
	    jget_strv(caps, q, jget(caps, "drop") ? "drop" : "Drop",
		      WIRE_MAX_LIST, WIRE_MAX_STR, &out->caps_drop, e) < 0)
		return -1;
	return 0;
}

/* ---- probes ---- */

/* A probe port: a number, or a name that is resolved against the unit's
 * ports as the kubelet does (a named port first, then a numeric string). A
 * name we cannot resolve is kept in port_name and port stays 0. */
static int parse_probe_port(const json_t *h, const char *at,
			    const struct unit_spec *u, struct probe *pr,
			    struct cerr *e)
{
	json_t *v = jget(h, "port");
	int64_t n;
	const char *s;

	if (!v || (json_is_string(v) && !*json_string_value(v)) ||
	    (json_is_integer(v) && json_integer_value(v) == 0)) {
		warnf("%s: no port; the probe is ignored", at);
		pr->kind = PROBE_NONE;
		return 0;
	}
	if (json_is_integer(v))
		return jget_int(h, at, "port", 1, 65535, &n, NULL, e) < 0
			   ? -1
			   : (pr->port = (int)n, 0);
	if (!json_is_string(v))
		return jbad(e, at, "port", "not an integer or a port name");
	if (check_len(v, at, "port", e) < 0)
		return -1;
	s = json_string_value(v);
	/* A named port sent without a number (accepted with a warning) does
	 * not resolve: the name is kept, as for an unknown one. */
	for (size_t i = 0; i < u->n_ports; i++)
		if (u->ports[i].name && !strcmp(u->ports[i].name, s) &&
		    u->ports[i].container_port > 0) {
			pr->port = u->ports[i].container_port;
			return 0;
		}
	if (*s && strspn(s, "0123456789") == strlen(s)) {
		if (parse_int64(s, 1, 65535, &n, NULL) < 0)
			return jbad(e, at, "port", "\"%s\" is out of range", s);
		pr->port = (int)n;
		return 0;
	}
	pr->port_name = xstrdup(s);
	return 0;
}

static int parse_http_get(const json_t *h, const char *at,
			  const struct unit_spec *u, struct probe *pr,
			  struct cerr *e)
{
	pr->kind = PROBE_HTTP;
	if (get_str_def(h, at, "path", "/", &pr->path, e) < 0 ||
	    jget_str(h, at, "host", WIRE_MAX_STR, &pr->host, e) < 0 ||
	    get_str_def(h, at, "scheme", "HTTP", &pr->scheme, e) < 0 ||
	    parse_probe_port(h, at, u, pr, e) < 0 ||
	    jget_list(h, at, "httpHeaders", WIRE_MAX_LIST, sizeof(struct kv),
		      (void **)&pr->http_headers, &pr->n_http_headers, kv_fn,
		      &kv_value_default, e) < 0)
		return -1;
	if (strcmp(pr->scheme, "HTTP") && strcmp(pr->scheme, "HTTPS"))
		return jbad(e, at, "scheme", "\"%s\" is not HTTP or HTTPS",
			    pr->scheme);
	return 0;
}

/* One of exec, httpGet, tcpSocket (exactly one, as Kubernetes requires),
 * then the timing fields with Kubernetes' defaults where 0 or absent. */
static int parse_probe_handler(const json_t *o, const char *at,
			       const struct unit_spec *u, struct probe *pr,
			       struct cerr *e)
{
	static const char *const kinds[] = {"exec", "httpGet", "tcpSocket"};
	json_t *h[3];
	char p[JSON_PATH_MAX];
	int n = 0, k = 0;

	for (int i = 0; i < 3; i++) {
		if (jget_obj(o, at, kinds[i], &h[i], e) < 0)
			return -1;
		if (h[i] && !n++)
			k = i;
	}
	if (n > 1)
		return jbad(e, at, NULL,
			    "more than one of exec, httpGet, tcpSocket");
	if (n == 0) {
		/* What Kip sends for a handler it cannot convert (grpc, a
		 * newer kind): the probe cannot run, so it is ignored. */
		warnf("%s: no handler this cell supports (exec, httpGet, "
		      "tcpSocket); the probe is ignored",
		      at);
		return 0;
	}
	jpath(p, at, kinds[k], -1);
	if (k == 1)
		return parse_http_get(h[k], p, u, pr, e);
	if (k == 2) {
		pr->kind = PROBE_TCP;
		return jget_str(h[k], p, "host", WIRE_MAX_STR, &pr->host, e) < 0
			   ? -1
			   : parse_probe_port(h[k], p, u, pr, e);
	}
	pr->kind = PROBE_EXEC;
	if (jget_strv(h[k], p, "command", WIRE_MAX_LIST, WIRE_MAX_STR,
		      &pr->exec_command, e) < 0)
		return -1;
	if (!pr->exec_command || !pr->exec_command[0]) {
		warnf("%s: no command; the probe is ignored", p);
		pr->kind = PROBE_NONE;
	}
	return 0;
}

static int parse_probe(const json_t *u, const char *at, const char *key,
		       const struct unit_spec *unit, struct probe *pr,
		       struct cerr *e)
{
	int r;
	json_t *o;
	char p[JSON_PATH_MAX];

	if ((r = jget_obj(u, at, key, &o, e)) <= 0)
		return r;
	jpath(p, at, key, -1);
	if (parse_probe_handler(o, p, unit, pr, e) < 0 ||
	    get_int_def(o, p, "initialDelaySeconds", 0, &pr->initial_delay_s,
			e) < 0 ||
	    get_int_def(o, p, "timeoutSeconds", 1, &pr->timeout_s, e) < 0 ||
	    get_int_def(o, p, "periodSeconds", 10, &pr->period_s, e) < 0 ||
	    get_int_def(o, p, "successThreshold", 1, &pr->success_threshold,
			e) < 0 ||
	    get_int_def(o, p, "failureThreshold", 3, &pr->failure_threshold,
			e) < 0)
		return -1;
	return 0;
}

/* One lifecycle hook: sleep{seconds}, or a probe's handler (exec,
 * httpGet, tcpSocket), without the probe's timings. */
static int parse_hook(const json_t *lc, const char *at, const char *go,
		      const char *k8s, const struct unit_spec *unit,
		      struct probe *h, struct cerr *e)
{
	const char *key = go_or_k8s(lc, go, k8s);
	json_t *o, *sl;
	char p[JSON_PATH_MAX], q[JSON_PATH_MAX];
	int r;

	if ((r = jget_obj(lc, at, key, &o, e)) <= 0)
		return r;
	jpath(p, at, key, -1);
	if (jget_obj(o, p, "sleep", &sl, e) < 0)
		return -1;
	if (sl) {
		jpath(q, p, "sleep", -1);
		h->kind = PROBE_SLEEP;
		return jget_int(sl, q, "seconds", 0, INT32_MAX, &h->sleep_s,
				NULL, e);
	}
	if (parse_probe_handler(o, p, unit, h, e) < 0)
		return -1;
	if (h->kind == PROBE_TCP) {
		/* The kubelet accepts it and runs nothing (deprecated). */
		warnf("%s: tcpSocket hooks do nothing", p);
		probe_free(h);
		memset(h, 0, sizeof(*h));
	}
	return 0;
}

/* lifecycle{postStart, preStop}: an extension (Kip's api.Lifecycle has
 * no JSON tags, so "PostStart"/"PreStop" are read first). */
static int parse_lifecycle(const json_t *u, const char *at,
			   struct unit_spec *out, struct cerr *e)
{
	json_t *lc;
	char p[JSON_PATH_MAX];
	int r;

	if ((r = jget_obj(u, at, "lifecycle", &lc, e)) <= 0)
		return r;
	jpath(p, at, "lifecycle", -1);
	if (parse_hook(lc, p, "PostStart", "postStart", out, &out->post_start,
		       e) < 0 ||
	    parse_hook(lc, p, "PreStop", "preStop", out, &out->pre_stop, e) < 0)
		return -1;
	return 0;
}

static int parse_pull_policy(const json_t *u, const char *at,
			     struct unit_spec *out, struct cerr *e)
{
	static const char *const names[] = {
	    [PULL_DEFAULT] = "",
	    [PULL_IF_NOT_PRESENT] = "IfNotPresent",
	    [PULL_ALWAYS] = "Always",
	    [PULL_NEVER] = "Never",
	};
	cleanup_free char *s = NULL;

	if (get_str_def(u, at, "imagePullPolicy", "", &s, e) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			out->pull_policy = (enum pull_policy)i;
			return 0;
		}
	return jbad(e, at, "imagePullPolicy",
		    "\"%s\" is not Always, Never or IfNotPresent", s);
}

/* ---- a unit ---- */

/* One limit of a ResourceList: a quantity string (what Go's Quantity
 * marshals to) or a JSON number. */
static int parse_limit(const json_t *lim, const char *at, const char *key,
		       bool milli, int64_t *out, struct cerr *e)
{
	json_t *v = jget(lim, key);
	char p[JSON_PATH_MAX];
	int r;

	if (!v)
		return 0;
	jpath(p, at, key, -1);
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		if (milli && json_integer_value(v) > INT64_MAX / 1000)
			return jbad(e, p, NULL, "out of range");
		*out = json_integer_value(v) * (milli ? 1000 : 1);
		return 0;
	}
	if (!json_is_string(v))
		return jbad(e, p, NULL, "not a quantity");
	if (check_len(v, p, NULL, e) < 0)
		return -1;
	r = milli ? quantity_milli(json_string_value(v), out, e)
		  : quantity_value(json_string_value(v), out, e);
	if (r < 0) {
		e->code = EINVAL;
		return cerr_prefix(e, "%s", p);
	}
	return 0;
}

/* resources.limits.{memory,cpu}. Kip's ResourceRequirements has no JSON
 * tags, so it arrives as {"Limits":…,"Requests":…}; the Kubernetes
 * spelling "limits" is read too. Requests are not limits. */
static int parse_unit_resources(const json_t *u, const char *at,
				struct unit_spec *out, struct cerr *e)
{
	json_t *res, *lim = NULL;
	char p[JSON_PATH_MAX], q[JSON_PATH_MAX];

	if (jget_obj(u, at, "resources", &res, e) < 0)
		return -1;
	if (!res)
		return 0;
	jpath(p, at, "resources", -1);
	if (jget_obj(res, p, "Limits", &lim, e) < 0)
		return -1;
	if (!lim && jget_obj(res, p, "limits", &lim, e) < 0)
		return -1;
	if (!lim)
		return 0;
	jpath(q, p, jget(res, "Limits") ? "Limits" : "limits", -1);
	if (parse_limit(lim, q, "memory", false, &out->memory_limit, e) < 0 ||
	    parse_limit(lim, q, "cpu", true, &out->cpu_millis, e) < 0)
		return -1;
	return 0;
}

struct keyed {
	json_t *v;
	const char *k1, *k2;
	size_t i;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int c = strcmp(x->k1, y->k1);

	if (!c)
		c = strcmp(x->k2, y->k2);
	return c ? c : (x->i > y->i) - (x->i < y->i); /* stable */
}

static const char *str_or_empty(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* Sort the array at key by two string members, stably (a name given twice
 * keeps its order: the later one wins). */
static void sort_list(json_t *u, const char *key, const char *k1,
		      const char *k2)
{
	json_t *a = json_object_get(u, key);
	size_t n = json_array_size(a);
	struct keyed *v;

	if (n < 2)
		return;
	v = xcalloc(n, sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(a, i);
		v[i] = (struct keyed){json_incref(x), str_or_empty(x, k1),
				      str_or_empty(x, k2), i};
	}
	qsort(v, n, sizeof(*v), keyed_cmp);
	json_array_clear(a);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, v[i].v);
	free(v);
}

/* Every field of the unit's JSON, known or not, in one canonical text:
 * any change of any field restarts the unit (WIRE.md). Key order does not
 * count, nor the order of env and volumeMounts: the controller rebuilds
 * those lists from Go maps (virtual-kubelet's env population) on every
 * sync, and the same spec in another order must restart nothing. */
static char *fingerprint(const json_t *u)
{
	json_t *c = json_deep_copy(u);
	char *s;

	if (!c)
		abort(); /* only on out-of-memory: the house rule */
	sort_list(c, "env", "name", "");
	sort_list(c, "volumeMounts", "mountPath", "name");
	s = json_dumps(c, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(c);
	if (!s)
		abort();
	return s;
}

static int parse_unit_fields(const json_t *u, const char *at,
			     const struct pod_spec *pod, struct unit_spec *out,
			     struct cerr *e)
{
	if (get_label(u, at, &out->name, e) < 0 ||
	    jget_str_req(u, at, "image", WIRE_MAX_STR, &out->image, e) < 0 ||
	    jget_strv(u, at, "command", WIRE_MAX_LIST, WIRE_MAX_STR,
		      &out->command, e) < 0 ||
	    jget_strv(u, at, "args", WIRE_MAX_LIST, WIRE_MAX_STR, &out->args,
		      e) < 0 ||
	    jget_str(u, at, "workingDir", WIRE_MAX_STR, &out->working_dir, e) <
		0 ||
	    jget_bool(u, at, "tty", &out->tty, e) < 0 ||
	    jget_bool(u, at, "stdin", &out->stdin_open, e) < 0 ||
	    jget_bool(u, at, "stdinOnce", &out->stdin_once, e) < 0 ||
	    parse_pull_policy(u, at, out, e) < 0 ||
	    parse_unit_resources(u, at, out, e) < 0 ||
	    jget_list(u, at, "env", WIRE_MAX_ENV, sizeof(struct env_var),
		      (void **)&out->env, &out->n_env, env_fn, NULL, e) < 0 ||
	    jget_list(u, at, "volumeMounts", WIRE_MAX_LIST,
		      sizeof(struct volume_mount), (void **)&out->mounts,
		      &out->n_mounts, mount_fn, (void *)pod, e) < 0 ||
	    jget_list(u, at, "ports", WIRE_MAX_LIST, sizeof(struct port),
		      (void **)&out->ports, &out->n_ports, port_fn, NULL,
		      e) < 0 ||
	    parse_unit_security(u, at, out, e) < 0)
		return -1;
	/* Probes last: a named probe port refers to the ports above. */
	if (parse_probe(u, at, "livenessProbe", out, &out->liveness, e) < 0 ||
	    parse_probe(u, at, "readinessProbe", out, &out->readiness, e) < 0 ||
	    parse_probe(u, at, "startupProbe", out, &out->startup, e) < 0 ||
	    parse_lifecycle(u, at, out, e) < 0)
		return -1;
	return 0;
}

static int parse_unit(const json_t *u, const char *at, void *ctx, void *elem,
		      struct cerr *e)
{
	struct unit_spec *out = elem;
	char **pol;

	if (!json_is_object(u))
		return jbad(e, at, NULL, "not an object");
	if (parse_unit_fields(u, at, ctx, out, e) < 0 ||
	    get_str_def(u, at, "terminationMessagePath", "/dev/termination-log",
			&out->termination_message_path, e) < 0 ||
	    get_str_def(u, at, "terminationMessagePolicy", "File",
			&out->termination_message_policy, e) < 0)
		return -1;
	pol = &out->termination_message_policy;
	if (strcmp(*pol, "File") && strcmp(*pol, "FallbackToLogsOnError"))
		return jbad(e, at, "terminationMessagePolicy",
			    "\"%s\" is not File or FallbackToLogsOnError",
			    *pol);
	out->fingerprint = fingerprint(u);
	return 0;
}

/* Unit names are unique over units and initUnits: logs, status and exec
 * address a unit by name alone. */
static int check_unit_names(const struct pod_spec *p, struct cerr *e)
{
	size_t n = p->n_init_units + p->n_units;

	for (size_t i = 0; i < n; i++) {
		const struct unit_spec *a =
		    i < p->n_init_units ? &p->init_units[i]
					: &p->units[i - p->n_init_units];
		for (size_t j = 0; j < i; j++) {
			const struct unit_spec *b =
			    j < p->n_init_units
				? &p->init_units[j]
				: &p->units[j - p->n_init_units];
			if (!strcmp(a->name, b->name))
				return cerr_set(e, EINVAL,
						"spec: unit name \"%s\" is "
						"used twice",
						a->name);
		}
	}
	return 0;
}

/* ---- the pod ---- */

/* Extensions: fsGroup, fsGroupChangePolicy, runAsNonRoot (tagged in Kip's
 * api.PodSecurityContext, but its converter never fills them). */
static int parse_pod_security_ext(const json_t *sc, struct pod_spec *out,
				  struct cerr *e)
{
	static const char at[] = "spec.securityContext";
	cleanup_free char *pol = NULL;

	if (jget_int(sc, at, "fsGroup", 0, UID_MAX_WIRE, &out->fs_group,
		     &out->has_fs_group, e) < 0 ||
	    jget_str(sc, at, "fsGroupChangePolicy", WIRE_MAX_STR, &pol, e) <
		0 ||
	    jget_bool(sc, at, "runAsNonRoot", &out->run_as_non_root, e) < 0)
		return -1;
	if (pol && *pol && strcmp(pol, "Always") &&
	    strcmp(pol, "OnRootMismatch"))
		return jbad(e, at, "fsGroupChangePolicy",
			    "\"%s\" is not Always or OnRootMismatch", pol);
	out->fs_group_on_root_mismatch = pol && !strcmp(pol, "OnRootMismatch");
	return 0;
}

static int parse_pod_security(const json_t *spec, struct pod_spec *out,
			      struct cerr *e)
{
	static const char at[] = "spec.securityContext";
	int r;
	const char *const ns_keys[] = {"network", "pid", "ipc"};
	enum ns_mode *ns[] = {&out->ns_network, &out->ns_pid, &out->ns_ipc};
	json_t *sc, *nso, *groups;

	/* Without namespaceOptions each unit has its own PID and IPC
	 * namespace (the v1 PodSpec's default, and Kip's); with them, a key
	 * left out is POD (0, Go's zero: omitempty drops it). */
	out->ns_pid = out->ns_ipc = NS_CONTAINER;
	if ((r = jget_obj(spec, "spec", "securityContext", &sc, e)) <= 0)
		return r;
	if (jget_obj(sc, at, "namespaceOptions", &nso, e) < 0 ||
	    parse_seccomp_ref(sc, at, &out->seccomp, e) < 0 ||
	    jget_int(sc, at, "runAsUser", 0, UID_MAX_WIRE, &out->run_as_user,
		     &out->has_run_as_user, e) < 0 ||
	    jget_int(sc, at, "runAsGroup", 0, UID_MAX_WIRE, &out->run_as_group,
		     &out->has_run_as_group, e) < 0 ||
	    jget_arr(sc, at, "supplementalGroups", WIRE_MAX_LIST, &groups, e) <
		0 ||
	    jget_list(sc, at, "sysctls", WIRE_MAX_LIST, sizeof(struct kv),
		      (void **)&out->sysctls, &out->n_sysctls, kv_fn,
		      &kv_value_default, e) < 0 ||
	    parse_pod_security_ext(sc, out, e) < 0)
		return -1;
	for (size_t i = 0; nso && i < ARRAY_SIZE(ns_keys); i++) {
		int64_t m = 0;
		if (jget_int(nso, "spec.securityContext.namespaceOptions",
			     ns_keys[i], NS_POD, NS_NODE, &m, NULL, e) < 0)
			return -1;
		*ns[i] = (enum ns_mode)m;
	}
	out->n_supplemental_groups = groups ? json_array_size(groups) : 0;
	out->supplemental_groups =
	    groups ? xcalloc(out->n_supplemental_groups, sizeof(int64_t))
		   : NULL;
	for (size_t i = 0; i < out->n_supplemental_groups; i++) {
		json_t *g = json_array_get(groups, i);
		char p[JSON_PATH_MAX];

		jpath(p, at, "supplementalGroups", (long)i);
		if (!json_is_integer(g))
			return jbad(e, p, NULL, "not an integer");
		if (json_integer_value(g) < 0 ||
		    json_integer_value(g) > UID_MAX_WIRE)
			return jbad(e, p, NULL, "out of range");
		out->supplemental_groups[i] = json_integer_value(g);
	}
	return 0;
}

static int alias_fn(const json_t *o, const char *at, void *ctx, void *elem,
		    struct cerr *e)
{
	struct host_alias *h = elem;

	if (!json_is_object(o))
		return jbad(e, at, NULL, "not an object");
	if (jget_str_req(o, at, "ip", WIRE_MAX_STR, &h->ip, e) < 0 ||
	    jget_strv(o, at, "hostnames", WIRE_MAX_LIST, WIRE_MAX_STR,
		      &h->hostnames, e) < 0)
		return -1;
	return 0;
}

static int parse_dns(const json_t *spec, struct pod_spec *out, struct cerr *e)
{
	static const char at[] = "spec.dnsConfig";
	json_t *dc;

	if (jget_str(spec, "spec", "dnsPolicy", WIRE_MAX_STR, &out->dns_policy,
		     e) < 0 ||
	    jget_obj(spec, "spec", "dnsConfig", &dc, e) < 0 ||
	    jget_list(spec, "spec", "hostAliases", WIRE_MAX_LIST,
		      sizeof(struct host_alias), (void **)&out->host_aliases,
		      &out->n_host_aliases, alias_fn, NULL, e) < 0)
		return -1;
	if (!dc)
		return 0;
	if (jget_strv(dc, at, "nameservers", WIRE_MAX_LIST, WIRE_MAX_STR,
		      &out->dns_nameservers, e) < 0 ||
	    jget_strv(dc, at, "searches", WIRE_MAX_LIST, WIRE_MAX_STR,
		      &out->dns_searches, e) < 0 ||
	    jget_list(dc, at, "options", WIRE_MAX_LIST, sizeof(struct kv),
		      (void **)&out->dns_options, &out->n_dns_options, kv_fn,
		      NULL, e) < 0)
		return -1;
	return 0;
}

static int parse_restart_policy(const json_t *spec, struct pod_spec *out,
				struct cerr *e)
{
	static const char *const names[] = {
	    [RESTART_ALWAYS] = "Always",
	    [RESTART_ON_FAILURE] = "OnFailure",
	    [RESTART_NEVER] = "Never",
	};
	cleanup_free char *s = NULL;

	if (get_str_def(spec, "spec", "restartPolicy", "Always", &s, e) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			out->restart_policy = (enum restart_policy)i;
			return 0;
		}
	return jbad(e, "spec", "restartPolicy",
		    "\"%s\" is not Always, OnFailure or Never", s);
}

/* spec.resources.memory sizes the instance; the agent also makes it the
 * memory limit of each unit, so a runaway unit is OOM-killed and reported
 * rather than taking the cell down. The other resource fields are for the
 * controller. */
static int parse_resources(const json_t *spec, struct pod_spec *out,
			   struct cerr *e)
{
	json_t *res;
	char *mem = NULL;
	int ret = 0;

	if (jget_obj(spec, "spec", "resources", &res, e) < 0)
		return -1;
	if (!res)
		return 0;
	if (jget_str(res, "spec.resources", "memory", WIRE_MAX_STR, &mem, e) <
		0 ||
	    jget_str(res, "spec.resources", "gpu", WIRE_MAX_STR, &out->gpu, e) <
		0) {
		free(mem);
		return -1;
	}
	if (mem && *mem && quantity_value(mem, &out->memory_limit, e) < 0) {
		e->code = EINVAL;
		ret = cerr_prefix(e, "spec.resources.memory");
	}
	free(mem);
	return ret;
}

static int parse_spec(const json_t *root, struct pod_spec *out, struct cerr *e)
{
	json_t *spec;
	bool has_grace;

	if (jget_obj(root, "", "spec", &spec, e) < 0)
		return -1;
	if (!spec)
		return jbad(e, "spec", NULL, "required");
	if (jget_str(spec, "spec", "phase", WIRE_MAX_STR, &out->phase, e) < 0 ||
	    parse_restart_policy(spec, out, e) < 0 ||
	    jget_str(spec, "spec", "hostname", WIRE_MAX_STR, &out->hostname,
		     e) < 0 ||
	    jget_str(spec, "spec", "subdomain", WIRE_MAX_STR, &out->subdomain,
		     e) < 0 ||
	    jget_int(spec, "spec", "terminationGracePeriodSeconds", 0,
		     INT32_MAX, &out->termination_grace_s, &has_grace, e) < 0 ||
	    jget_int(spec, "spec", "activeDeadlineSeconds", 0, INT32_MAX,
		     &out->active_deadline_s, NULL, e) < 0 ||
	    parse_pod_security(spec, out, e) < 0 ||
	    parse_dns(spec, out, e) < 0 || parse_resources(spec, out, e) < 0)
		return -1;
	/* Volumes before units: a mount must name one of them. */
	if (parse_volumes(spec, out, e) < 0 ||
	    jget_list(spec, "spec", "initUnits", WIRE_MAX_UNITS,
		      sizeof(struct unit_spec), (void **)&out->init_units,
		      &out->n_init_units, parse_unit, out, e) < 0 ||
	    jget_list(spec, "spec", "units", WIRE_MAX_UNITS,
		      sizeof(struct unit_spec), (void **)&out->units,
		      &out->n_units, parse_unit, out, e) < 0)
		return -1;
	return check_unit_names(out, e);
}

int wire_parse_pod(const char *buf, size_t len, struct pod_spec *out,
		   struct cerr *e)
{
	cleanup_json json_t *root = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > UPDATEPOD_MAX)
		return cerr_set(e, EFBIG, "PodParameters: %zu bytes, max %u",
				len, UPDATEPOD_MAX);
	root = json_parse_object(buf, len, e);
	if (!root)
		return -1;
	out->termination_grace_s = 30;
	warn_sink = &out->warnings;
	warn_n = &out->n_warnings;
	rc = parse_secrets(root, out, e) < 0 ||
		     parse_credentials(root, out, e) < 0 ||
		     parse_annotations(root, out, e) < 0 ||
		     jget_str(root, "", "PodName", WIRE_MAX_STR, &out->pod_name,
			      e) < 0 ||
		     jget_str(root, "", "NodeName", WIRE_MAX_STR,
			      &out->node_name, e) < 0 ||
		     jget_str(root, "", "PodIP", WIRE_MAX_STR, &out->pod_ip,
			      e) < 0 ||
		     jget_str(root, "", "PodHostname", WIRE_MAX_STR,
			      &out->pod_hostname, e) < 0 ||
		     parse_spec(root, out, e) < 0
		 ? -1
		 : 0;
	warn_sink = NULL;
	warn_n = NULL;
	if (rc < 0)
		pod_spec_free(out);
	return rc;
}

/* ---- freeing ---- */

static void kvs_free(struct kv *kv, size_t n)
{
	for (size_t i = 0; kv && i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

void probe_free(struct probe *p)
{
	strv_free(p->exec_command);
	free(p->path);
	free(p->host);
	free(p->scheme);
	kvs_free(p->http_headers, p->n_http_headers);
	free(p->port_name);
}

static void unit_free(struct unit_spec *u)
{
	free(u->name);
	free(u->image);
	strv_free(u->command);
	strv_free(u->args);
	for (size_t i = 0; u->env && i < u->n_env; i++) {
		free(u->env[i].name);
		free(u->env[i].value);
		free(u->env[i].secret_name);
		free(u->env[i].secret_key);
	}
	free(u->env);
	for (size_t i = 0; u->mounts && i < u->n_mounts; i++) {
		free(u->mounts[i].name);
		free(u->mounts[i].mount_path);
		free(u->mounts[i].sub_path);
	}
	free(u->mounts);
	for (size_t i = 0; u->ports && i < u->n_ports; i++) {
		free(u->ports[i].name);
		free(u->ports[i].protocol);
		free(u->ports[i].host_ip);
	}
	free(u->ports);
	free(u->working_dir);
	strv_free(u->caps_add);
	strv_free(u->caps_drop);
	free(u->seccomp.type);
	free(u->seccomp.localhost);
	probe_free(&u->liveness);
	probe_free(&u->readiness);
	probe_free(&u->startup);
	probe_free(&u->post_start);
	probe_free(&u->pre_stop);
	free(u->termination_message_path);
	free(u->termination_message_policy);
	free(u->fingerprint);
}

static void units_free(struct unit_spec *u, size_t n)
{
	for (size_t i = 0; u && i < n; i++)
		unit_free(&u[i]);
	free(u);
}

static void pod_lists_free(struct pod_spec *p)
{
	for (size_t i = 0; p->volumes && i < p->n_volumes; i++) {
		free(p->volumes[i].name);
		free(p->volumes[i].path);
		free(p->volumes[i].host_path_type);
		free(p->volumes[i].source_name);
	}
	free(p->volumes);
	for (size_t i = 0; p->secrets && i < p->n_secrets; i++) {
		free(p->secrets[i].name);
		kvs_free(p->secrets[i].items, p->secrets[i].n_items);
		free(p->secrets[i].item_len);
	}
	free(p->secrets);
	for (size_t i = 0; p->credentials && i < p->n_credentials; i++) {
		free(p->credentials[i].host);
		free(p->credentials[i].username);
		free(p->credentials[i].password);
		free(p->credentials[i].server);
	}
	free(p->credentials);
	for (size_t i = 0; p->host_aliases && i < p->n_host_aliases; i++) {
		free(p->host_aliases[i].ip);
		strv_free(p->host_aliases[i].hostnames);
	}
	free(p->host_aliases);
}

void pod_spec_free(struct pod_spec *p)
{
	if (!p)
		return;
	free(p->pod_name);
	free(p->node_name);
	free(p->pod_ip);
	free(p->pod_hostname);
	free(p->phase);
	free(p->gpu);
	units_free(p->units, p->n_units);
	units_free(p->init_units, p->n_init_units);
	pod_lists_free(p);
	free(p->supplemental_groups);
	free(p->seccomp.type);
	free(p->seccomp.localhost);
	kvs_free(p->sysctls, p->n_sysctls);
	kvs_free(p->annotations, p->n_annotations);
	free(p->hostname);
	free(p->subdomain);
	free(p->dns_policy);
	strv_free(p->dns_nameservers);
	strv_free(p->dns_searches);
	kvs_free(p->dns_options, p->n_dns_options);
	strv_free(p->warnings);
	memset(p, 0, sizeof(*p));
}
