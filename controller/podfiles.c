// SPDX-License-Identifier: Apache-2.0
/* What Kip deploys before updatepod (pkg/server/deploy_util.go): one
 * package per configMap, secret and projected volume (emptyDir and
 * hostPath ones empty), resolvconf with the pod's /etc/resolv.conf and
 * etchosts with its /etc/hosts; and the pod's hostname
 * (pkg/util/hostname.go). The DNS rules are the kubelet's
 * (dns.Configurer.GetPodDNS) for the policies Default, ClusterFirst,
 * ClusterFirstWithHostNet and None, merged with dnsConfig. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "cleanup.h"
#include "ctl-internal.h"
#include "jsonutil.h"
#include "util.h"

#define HOSTNAME_MAX 63
#define DEFAULT_MODE 0644

/* ---- hostname ---- */

static bool dns1123_label(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 63 || !isalnum((unsigned char)s[0]) ||
	    !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)s[i]) ||
		      isdigit((unsigned char)s[i]) || s[i] == '-'))
			return false;
	return true;
}

static int host_and_domain(const json_t *pod, const struct convert_opts *o,
			   char **host, char **domain, struct cerr *e)
{
	const json_t *meta = jget(pod, "metadata"), *ps = jget(pod, "spec");
	const char *h = js(ps, "hostname"), *sub = js(ps, "subdomain");
	size_t n;

	if (*h && !dns1123_label(h))
		return cerr_set(e, EINVAL,
				"pod Hostname \"%s\" is not a valid DNS label",
				h);
	if (*sub && !dns1123_label(sub))
		return cerr_set(e, EINVAL,
				"pod Subdomain \"%s\" is not a valid DNS label",
				sub);
	*host = xstrdup(*h ? h : js(meta, "name"));
	n = strlen(*host);
	if (n > HOSTNAME_MAX) {
		n = HOSTNAME_MAX;
		while (n && ((*host)[n - 1] == '-' || (*host)[n - 1] == '.'))
			n--;
		(*host)[n] = 0;
	}
	*domain = *sub ? xasprintf("%s.%s.svc.%s", sub, js(meta, "namespace"),
				   o->cluster_domain)
		       : xstrdup("");
	return 0;
}

int pod_hostname(const json_t *pod, const struct convert_opts *o, char **out,
		 struct cerr *e)
{
	cleanup_free char *h = NULL, *d = NULL;

	if (host_and_domain(pod, o, &h, &d, e) < 0)
		return -1;
	*out = *d ? xasprintf("%s.%s", h, d) : steal_ptr(&h);
	return 0;
}

/* ---- packages ---- */

static struct pkg *add_pkg(struct converted *c, const char *name)
{
	struct pkg *p;

	c->pkgs = xrealloc(c->pkgs, (c->n_pkgs + 1) * sizeof(*c->pkgs));
	p = &c->pkgs[c->n_pkgs++];
	memset(p, 0, sizeof(*p));
	p->name = xstrdup(name);
	return p;
}

/* A file in p; a later one of the same path replaces it (Go's map). */
static void add_file(struct pkg *p, const char *path, const void *data,
		     size_t len, int mode)
{
	struct pkg_file *f = NULL;

	for (size_t i = 0; i < p->n; i++)
		if (!strcmp(p->files[i].path, path)) {
			f = &p->files[i];
			free(f->path);
			free(f->data);
		}
	if (!f) {
		p->files = xrealloc(p->files, (p->n + 1) * sizeof(*p->files));
		f = &p->files[p->n++];
	}
	f->path = xstrdup(path);
	f->data = xmemdup(data, len);
	f->len = len;
	f->mode = mode;
}

/* One key's bytes from a ConfigMap (data, binaryData) or a Secret (data
 * base64, stringData). 0 found, 1 absent, -1 bad. */
static int object_key(const json_t *obj, bool secret, const char *key,
		      struct buf *out, struct cerr *e)
{
	const char *s;

	buf_reset(out);
	if (!secret && (s = json_string_value(jget(jget(obj, "data"), key))))
		return buf_append(out, s, strlen(s), e);
	if (secret &&
	    (s = json_string_value(jget(jget(obj, "stringData"), key))))
		return buf_append(out, s, strlen(s), e);
	s = json_string_value(
	    jget(jget(obj, secret ? "data" : "binaryData"), key));
	if (!s)
		return 1;
	if (b64_decode(s, strlen(s), B64_PADDED, out, e) < 0)
		return cerr_prefix(e, "key %s", key);
	return 0;
}

static void all_keys(const json_t *obj, bool secret, json_t *items)
{
	static const char *const cm[] = {"data", "binaryData"};
	static const char *const sec[] = {"data", "stringData"};
	const char *const *maps = secret ? sec : cm;
	const char *k;
	json_t *v;

	for (int i = 0; i < 2; i++)
		json_object_foreach(jget(obj, maps[i]), k, v)
		{
			json_array_append_new(items,
					      json_pack("{s:s}", "key", k));
		}
}

/* getConfigMapFiles / getSecretFiles */
static int source_files(struct pkg *p, const json_t *objects, bool secret,
			const char *name, const json_t *items_in,
			const json_t *default_mode, const json_t *optional,
			struct cerr *e)
{
	const char *kind = secret ? "Secret" : "ConfigMap";
	const json_t *obj = k8s_find_object(objects, kind, name);
	bool opt = json_is_true(optional);
	int mode =
	    default_mode ? (int)json_integer_value(default_mode) : DEFAULT_MODE;
	json_t *items = json_array_size(items_in)
			    ? json_incref((json_t *)items_in)
			    : json_array(),
	       *it;
	struct buf data;
	size_t i;
	int r = 0;

	if (!obj && !opt) {
		json_decref(items);
		return cerr_set(e, ENOENT,
				"%s \"%s\" not found (give it with -f FILE or "
				"--from-literal)",
				secret ? "secret" : "configMap", name);
	}
	if (!json_array_size(items_in))
		all_keys(obj, secret, items);
	buf_init(&data, 64u << 20);
	json_array_foreach(items, i, it)
	{
		const char *key = js(it, "key"), *path = js(it, "path");
		r = obj ? object_key(obj, secret, key, &data, e) : 1;
		if (r < 0)
			break;
		if (r == 1 && opt) {
			r = 0;
			continue;
		}
		if (r == 1) {
			r = cerr_set(e, ENOENT,
				     "%s %s references non-existent key: %s",
				     kind, name, key);
			break;
		}
		add_file(
		    p, *path ? path : key, data.data ? data.data : "", data.len,
		    jget(it, "mode") ? (int)json_integer_value(jget(it, "mode"))
				     : mode);
	}
	buf_free(&data);
	json_decref(items);
	return r;
}

/* One downwardAPI item's text: a fieldRef (labels and annotations whole,
 * as the kubelet writes them) or a resourceFieldRef. */
static int downward_item(const json_t *pod, const json_t *it,
			 const struct convert_opts *o, char **out,
			 struct cerr *e)
{
	const json_t *fr = jget(it, "fieldRef"), *meta = jget(pod, "metadata");
	const char *fp = js(fr, "fieldPath");

	if (jget(it, "resourceFieldRef"))
		return downward_resource(pod, NULL,
					 jget(it, "resourceFieldRef"), out, e);
	if (!strcmp(fp, "metadata.labels") ||
	    !strcmp(fp, "metadata.annotations")) {
		*out = downward_format_map(jget(meta, fp + 9));
		return 0;
	}
	return pod_field_ref(pod, fr, o, out, e);
}

/* The files of a downwardAPI volume or projected source (an extension:
 * Kip drops these volumes). */
static int downward_files(struct pkg *p, const json_t *pod, const json_t *d,
			  const json_t *default_mode,
			  const struct convert_opts *o, struct cerr *e)
{
	int mode =
	    default_mode ? (int)json_integer_value(default_mode) : DEFAULT_MODE;
	const json_t *it;
	size_t i;

	json_array_foreach(jget(d, "items"), i, it)
	{
		cleanup_free char *text = NULL;
		if (downward_item(pod, it, o, &text, e) < 0)
			return cerr_prefix(e, "%s", js(it, "path"));
		add_file(p, js(it, "path"), text, strlen(text),
			 jget(it, "mode")
			     ? (int)json_integer_value(jget(it, "mode"))
			     : mode);
	}
	return 0;
}

static int volume_package(const json_t *pod, const json_t *v,
			  const json_t *objects, const struct convert_opts *o,
			  struct converted *c, struct cerr *e)
{
	struct pkg *p = add_pkg(c, js(v, "name"));
	const json_t *s, *src;
	size_t i;

	if ((s = jget(v, "configMap")))
		return source_files(p, objects, false, js(s, "name"),
				    jget(s, "items"), jget(s, "defaultMode"),
				    jget(s, "optional"), e);
	if ((s = jget(v, "secret")))
		return source_files(p, objects, true, js(s, "secretName"),
				    jget(s, "items"), jget(s, "defaultMode"),
				    jget(s, "optional"), e);
	if ((s = jget(v, "downwardAPI")) && !o->kip)
		return downward_files(p, pod, s, jget(s, "defaultMode"), o, e);
	if (!(s = jget(v, "projected")))
		return 0; /* emptyDir, hostPath: an empty package */
	json_array_foreach(jget(s, "sources"), i, src)
	{
		const json_t *r;
		bool sec = (r = jget(src, "secret")) != NULL;
		if (!r && (r = jget(src, "downwardAPI")) && !o->kip) {
			if (downward_files(p, pod, r, jget(s, "defaultMode"), o,
					   e) < 0)
				return -1;
			continue;
		}
		if (!sec && !(r = jget(src, "configMap")))
			continue;
		if (source_files(p, objects, sec, js(r, "name"),
				 jget(r, "items"), jget(s, "defaultMode"),
				 jget(r, "optional"), e) < 0)
			return -1;
	}
	return 0;
}

/* ---- resolv.conf ---- */

struct dns {
	json_t *servers, *searches, *options; /* arrays of strings */
};

static void add_unique(json_t *a, const char *s)
{
	json_t *v;
	size_t i;

	json_array_foreach(a, i, v)
	{
		if (!strcmp(json_string_value(v), s))
			return;
	}
	json_array_append_new(a, json_string(s));
}

/* An option "name[:value]" replaces one of the same name. */
static void add_option(json_t *a, const char *opt)
{
	size_t n = strcspn(opt, ":");
	json_t *v;
	size_t i;

	json_array_foreach(a, i, v)
	{
		const char *s = json_string_value(v);
		if (strcspn(s, ":") == n && !strncmp(s, opt, n)) {
			json_array_set_new(a, i, json_string(opt));
			return;
		}
	}
	json_array_append_new(a, json_string(opt));
}

static void parse_resolv(const char *text, struct dns *d)
{
	cleanup_free char *copy = xstrdup(text ? text : "");
	char *save = NULL, *line;

	for (line = strtok_r(copy, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *s2 = NULL, *w = strtok_r(line, " \t\r", &s2);
		json_t *dst = NULL;
		if (!w || *w == '#' || *w == ';')
			continue;
		if (!strcmp(w, "nameserver"))
			dst = d->servers;
		else if (!strcmp(w, "search") || !strcmp(w, "domain"))
			dst = d->searches;
		else if (!strcmp(w, "options"))
			dst = d->options;
		if (dst == d->searches)
			json_array_clear(dst); /* the last search line wins */
		for (w = strtok_r(NULL, " \t\r", &s2); w && dst;
		     w = strtok_r(NULL, " \t\r", &s2))
			if (dst == d->options)
				add_option(dst, w);
			else
				add_unique(dst, w);
	}
}

static char *resolv_conf(const json_t *pod, const struct convert_opts *o)
{
	const json_t *ps = jget(pod, "spec"), *dc = jget(ps, "dnsConfig"), *v;
	const char *policy = js(ps, "dnsPolicy"),
		   *ns = js(jget(pod, "metadata"), "namespace");
	bool hostnet = json_is_true(jget(ps, "hostNetwork"));
	struct dns d = {json_array(), json_array(), json_array()};
	struct buf b;
	struct cerr e = {0};
	size_t i;
	char *out;

	bool cluster = (!strcmp(policy, "ClusterFirst") && !hostnet) ||
		       !strcmp(policy, "ClusterFirstWithHostNet");
	/* The kubelet falls back to Default without a cluster DNS. */
	if (cluster && o->cluster_dns && *o->cluster_dns) {
		json_t *host = json_array();
		struct dns hd = {json_array(), host, json_array()};
		parse_resolv(o->host_resolv, &hd);
		add_unique(d.servers, o->cluster_dns);
		json_array_append_new(
		    d.searches,
		    json_sprintf("%s.svc.%s", ns, o->cluster_domain));
		json_array_append_new(
		    d.searches, json_sprintf("svc.%s", o->cluster_domain));
		add_unique(d.searches, o->cluster_domain);
		json_array_foreach(host, i, v)
		{
			add_unique(d.searches, json_string_value(v));
		}
		add_option(d.options, "ndots:5");
		json_decref(hd.servers);
		json_decref(hd.searches);
		json_decref(hd.options);
	} else if (strcmp(policy, "None") != 0) {
		parse_resolv(o->host_resolv, &d);
	}
	json_array_foreach(jget(dc, "nameservers"), i, v)
	{
		add_unique(d.servers, json_string_value(v));
	}
	json_array_foreach(jget(dc, "searches"), i, v)
	{
		add_unique(d.searches, json_string_value(v));
	}
	json_array_foreach(jget(dc, "options"), i, v)
	{
		cleanup_free char *opt =
		    jget(v, "value")
			? xasprintf("%s:%s", js(v, "name"), js(v, "value"))
			: xstrdup(js(v, "name"));
		add_option(d.options, opt);
	}
	/* createResolvconf */
	buf_init(&b, 0);
	json_array_foreach(d.servers, i, v)
	{
		cleanup_free char *l =
		    xasprintf("nameserver %s\n", json_string_value(v));
		buf_append(&b, l, strlen(l), &e);
	}
	const char *kw[] = {"search", "options"};
	json_t *lists[] = {d.searches, d.options};
	for (int k = 0; k < 2; k++) {
		if (!json_array_size(lists[k]))
			continue;
		buf_append(&b, kw[k], strlen(kw[k]), &e);
		json_array_foreach(lists[k], i, v)
		{
			buf_append(&b, " ", 1, &e);
			buf_append(&b, json_string_value(v),
				   strlen(json_string_value(v)), &e);
		}
		buf_append(&b, "\n", 1, &e);
	}
	buf_append(&b, "", 0, &e);
	json_decref(d.servers);
	json_decref(d.searches);
	json_decref(d.options);
	out = buf_steal(&b, NULL);
	return out ? out : xstrdup("");
}

/* ---- /etc/hosts (managedHostsFileContent) ---- */

static char *etc_hosts(const json_t *pod, const struct convert_opts *o,
		       struct cerr *e)
{
	cleanup_free char *h = NULL, *d = NULL;
	const json_t *ps = jget(pod, "spec"), *a, *name;
	struct buf b;
	size_t i, j;
	char *out;

	if (host_and_domain(pod, o, &h, &d, e) < 0)
		return NULL;
	buf_init(&b, 0);
#define PUT(s) buf_append(&b, (s), strlen(s), e)
	PUT("# Kubernetes-managed hosts file.\n"
	    "127.0.0.1\tlocalhost\n"
	    "::1\tlocalhost ip6-localhost ip6-loopback\n"
	    "fe00::0\tip6-localnet\n"
	    "fe00::0\tip6-mcastprefix\n"
	    "fe00::1\tip6-allnodes\n"
	    "fe00::2\tip6-allrouters\n");
	/* Kip writes the line even without a pod IP ("\t<name>"); a line
	 * without an address is no hosts entry, so it is left out. */
	if (o->pod_ip && *o->pod_ip) {
		cleanup_free char *l =
		    *d ? xasprintf("%s\t%s.%s\t%s\n", o->pod_ip, h, d, h)
		       : xasprintf("%s\t%s\n", o->pod_ip, h);
		PUT(l);
	}
	if (json_array_size(jget(ps, "hostAliases")))
		PUT("\n# Entries added by HostAliases.\n");
	json_array_foreach(jget(ps, "hostAliases"), i, a)
	{
		PUT(js(a, "ip"));
		PUT("\t");
		json_array_foreach(jget(a, "hostnames"), j, name)
		{
			if (j)
				PUT("\t");
			PUT(json_string_value(name) ? json_string_value(name)
						    : "");
		}
		PUT("\n");
	}
#undef PUT
	buf_append(&b, "", 0, e);
	out = buf_steal(&b, NULL);
	return out ? out : xstrdup("");
}

int pod_packages(const json_t *pod, const json_t *objects,
		 const struct convert_opts *o, struct converted *c,
		 struct cerr *e)
{
	const json_t *v;
	cleanup_free char *resolv = NULL, *hosts = NULL;
	size_t i;

	json_array_foreach(jget(jget(pod, "spec"), "volumes"), i, v)
	{
		if (volume_package(pod, v, objects, o, c, e) < 0)
			return cerr_prefix(e, "volume %s", js(v, "name"));
	}
	/* Kip deploys empty resolvconf/etchosts packages in the loop above
	 * and then the real ones; only the real ones are sent here. */
	resolv = resolv_conf(pod, o);
	add_file(add_pkg(c, "resolvconf"), "/etc/resolv.conf", resolv,
		 strlen(resolv), 0644);
	hosts = etc_hosts(pod, o, e);
	if (!hosts)
		return -1;
	add_file(add_pkg(c, "etchosts"), "/etc/hosts", hosts, strlen(hosts),
		 0644);
	return 0;
}
