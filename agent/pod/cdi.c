// SPDX-License-Identifier: Apache-2.0
/* CDI specs: parsing (JSON or YAML into struct cdi_spec), loading the spec
 * directories, resolving device names. The only agent file that reads CDI
 * text; YAML becomes the same jansson tree as JSON through common/yamljson
 * (as sigs.k8s.io/yaml, which the reference library uses, reads it; with
 * yamltree's node and depth caps, aliases counted expanded). Then one typed
 * reader (common/jsonutil's checked getters) checks every field. Following
 * SPEC.md, an unknown field is an error, as is a cdiVersion we do not
 * know. */
#include "cdi.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "util.h"
#include "yamljson.h"

#define CDI_STR_MAX 4096

/* The versions nvidia-ctk and the reference library write today. */
static const char *const known_versions[] = {
    "0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0",
    "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0",
};

/* =========================== the typed reader =========================== */

static int only_keys(const json_t *o, const char *where,
		     const char *const *keys, struct cerr *e)
{
	const char *k;
	json_t *v;

	json_object_foreach((json_t *)o, k, v)
	{
		bool ok = false;

		for (size_t i = 0; keys[i] && !ok; i++)
			ok = !strcmp(k, keys[i]);
		if (!ok)
			return cerr_set(e, EINVAL,
					"%s%sunknown field \"%.64s\"", where,
					*where ? ": " : "", k);
	}
	return 0;
}

/* A string field (common/jsonutil, CDI_STR_MAX bytes); a YAML name left
 * unquoted ("name: 0") reads as an integer and counts as its text. */
static int get_string(const json_t *o, const char *where, const char *key,
		      bool required, char **out, struct cerr *e)
{
	json_t *v = jget(o, key);

	*out = NULL;
	if (json_is_integer(v)) {
		*out = xasprintf("%lld", (long long)json_integer_value(v));
		return 0;
	}
	return required ? jget_str_req(o, where, key, CDI_STR_MAX, out, e)
			: jget_str(o, where, key, CDI_STR_MAX, out, e);
}

static int get_strings(const json_t *o, const char *where, const char *key,
		       char ***out, struct cerr *e)
{
	*out = NULL;
	return jget_strv(o, where, key, CDI_MAX_ENTRIES, CDI_STR_MAX, out, e);
}

/* The array at key, each element an object (NULL when absent). */
static int get_list(const json_t *o, const char *where, const char *key,
		    json_t **out, struct cerr *e)
{
	char p[JSON_PATH_MAX];
	json_t *x;
	size_t i;

	if (jget_arr(o, where, key, CDI_MAX_ENTRIES, out, e) < 0)
		return -1;
	json_array_foreach(*out, i, x) if (!json_is_object(x))
	{
		jpath(p, where, key, (long)i);
		return jbad(e, p, NULL, "not an object");
	}
	return 0;
}

static bool abs_path(const char *p)
{
	return p && p[0] == '/';
}

static int parse_node(const json_t *o, const char *where, struct cdi_node *n,
		      struct cerr *e)
{
	static const char *const keys[] = {
	    "path",	"hostPath",    "type", "major", "minor",
	    "fileMode", "permissions", "uid",  "gid",	NULL};
	cleanup_free char *type = NULL;
	int64_t v;

	if (only_keys(o, where, keys, e) < 0 ||
	    get_string(o, where, "path", true, &n->path, e) < 0 ||
	    get_string(o, where, "hostPath", false, &n->host_path, e) < 0 ||
	    get_string(o, where, "type", false, &type, e) < 0 ||
	    get_string(o, where, "permissions", false, &n->permissions, e) <
		0 ||
	    jget_int(o, where, "major", 0, 0xfff, &n->major, &n->has_major, e) <
		0 ||
	    jget_int(o, where, "minor", 0, 0xfffff, &n->minor, &n->has_minor,
		     e) < 0 ||
	    jget_int(o, where, "fileMode", 0, 0177777, &v, &n->has_mode, e) < 0)
		return -1;
	n->mode = (uint32_t)v;
	if (jget_int(o, where, "uid", 0, UINT32_MAX - 1, &v, &n->has_uid, e) <
	    0)
		return -1;
	n->uid = (uint32_t)v;
	if (jget_int(o, where, "gid", 0, UINT32_MAX - 1, &v, &n->has_gid, e) <
	    0)
		return -1;
	n->gid = (uint32_t)v;
	if (!abs_path(n->path) ||
	    (n->host_path && *n->host_path && !abs_path(n->host_path)))
		return cerr_set(e, EINVAL, "%s: path not absolute", where);
	if (type && *type) {
		if (strlen(type) != 1 || !strchr("cbup", type[0]))
			return cerr_set(e, EINVAL,
					"%s.type: \"%.16s\" is not "
					"c, b, u or p",
					where, type);
		n->type = type[0] == 'u' ? 'c' : type[0];
	}
	if (n->permissions && *n->permissions &&
	    strcmp(n->permissions, "none") &&
	    (strlen(n->permissions) > 3 ||
	     strspn(n->permissions, "rwm") != strlen(n->permissions)))
		return cerr_set(e, EINVAL,
				"%s.permissions: \"%.16s\" is not "
				"rwm",
				where, n->permissions);
	return 0;
}

static int parse_mount(const json_t *o, const char *where, struct cdi_mount *m,
		       struct cerr *e)
{
	static const char *const keys[] = {"hostPath", "containerPath", "type",
					   "options", NULL};

	if (only_keys(o, where, keys, e) < 0 ||
	    get_string(o, where, "hostPath", true, &m->host_path, e) < 0 ||
	    get_string(o, where, "containerPath", true, &m->container_path, e) <
		0 ||
	    get_string(o, where, "type", false, &m->type, e) < 0 ||
	    get_strings(o, where, "options", &m->options, e) < 0)
		return -1;
	if (!abs_path(m->host_path) || !abs_path(m->container_path))
		return cerr_set(e, EINVAL, "%s: path not absolute", where);
	return 0;
}

static int parse_hook(const json_t *o, const char *where, struct cdi_hook *h,
		      struct cerr *e)
{
	static const char *const keys[] = {"hookName", "path",	  "args",
					   "env",      "timeout", NULL};
	bool has;
	int64_t t;

	if (only_keys(o, where, keys, e) < 0 ||
	    get_string(o, where, "hookName", true, &h->name, e) < 0 ||
	    get_string(o, where, "path", true, &h->path, e) < 0 ||
	    get_strings(o, where, "args", &h->args, e) < 0 ||
	    get_strings(o, where, "env", &h->env, e) < 0 ||
	    jget_int(o, where, "timeout", 1, INT32_MAX, &t, &has, e) < 0)
		return -1;
	h->timeout = has ? (int)t : 0;
	if (!abs_path(h->path))
		return cerr_set(e, EINVAL, "%s.path: not absolute", where);
	return 0;
}

static int parse_gids(const json_t *o, const char *where, struct cdi_edits *x,
		      struct cerr *e)
{
	json_t *v = json_object_get(o, "additionalGids"), *g;
	size_t i;

	if (!v || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) > CDI_MAX_ENTRIES)
		return cerr_set(e, EINVAL, "%s.additionalGids: not a list",
				where);
	x->gids = xcalloc(json_array_size(v) + 1, sizeof(*x->gids));
	json_array_foreach(v, i, g)
	{
		if (!json_is_integer(g) || json_integer_value(g) < 0 ||
		    json_integer_value(g) > UINT32_MAX - 1)
			return cerr_set(e, EINVAL,
					"%s.additionalGids[%zu]: not "
					"a group id",
					where, i);
		if (json_integer_value(g)) /* 0 is ignored, says the spec */
			x->gids[x->n_gids++] = (uint32_t)json_integer_value(g);
	}
	return 0;
}

/* Present but empty is as good as absent; anything in it we cannot
 * apply, and say so rather than run without it. */
static int refuse_nonempty(const json_t *o, const char *where, const char *key,
			   struct cerr *e)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v) ||
	    (json_is_array(v) && !json_array_size(v)) ||
	    (json_is_object(v) && !json_object_size(v)))
		return 0;
	return cerr_set(e, ENOTSUP, "%s.%s: not supported by this runtime",
			where, key);
}

#define PARSE_LIST(o, where, key, arr, n, fn)                                  \
	do {                                                                   \
		json_t *l_;                                                    \
		size_t i_;                                                     \
		json_t *x_;                                                    \
		if (get_list(o, where, key, &l_, e) < 0)                       \
			return -1;                                             \
		if (!l_)                                                       \
			break;                                                 \
		arr = xcalloc(json_array_size(l_) + 1, sizeof(*arr));          \
		json_array_foreach(l_, i_, x_)                                 \
		{                                                              \
			char w_[300];                                          \
			snprintf(w_, sizeof(w_), "%s.%s[%zu]", where, key,     \
				 i_);                                          \
			n++;                                                   \
			if (fn(x_, w_, &arr[i_], e) < 0)                       \
				return -1;                                     \
		}                                                              \
	} while (0)

static int parse_edits(const json_t *o, const char *where, struct cdi_edits *x,
		       struct cerr *e)
{
	static const char *const keys[] = {
	    "env",	"deviceNodes", "mounts", "hooks", "additionalGids",
	    "intelRdt", "netDevices",  NULL};

	if (!json_is_object(o))
		return cerr_set(e, EINVAL, "%s: not an object", where);
	if (only_keys(o, where, keys, e) < 0 ||
	    get_strings(o, where, "env", &x->env, e) < 0)
		return -1;
	for (size_t i = 0; x->env && x->env[i]; i++)
		if (!strchr(x->env[i], '=') || x->env[i][0] == '=')
			return cerr_set(
			    e, EINVAL, "%s.env[%zu]: not NAME=value", where, i);
	PARSE_LIST(o, where, "deviceNodes", x->nodes, x->n_nodes, parse_node);
	PARSE_LIST(o, where, "mounts", x->mounts, x->n_mounts, parse_mount);
	PARSE_LIST(o, where, "hooks", x->hooks, x->n_hooks, parse_hook);
	if (parse_gids(o, where, x, e) < 0 ||
	    refuse_nonempty(o, where, "intelRdt", e) < 0 ||
	    refuse_nonempty(o, where, "netDevices", e) < 0)
		return -1;
	if (!x->env)
		x->env = xcalloc(1, sizeof(char *));
	return 0;
}

/* A name segment: alphanumerics at both ends, '-', '_', '.' between. */
static bool good_segment(const char *s, size_t n, bool dots)
{
	if (!n || n > 63 || !isalnum((unsigned char)s[0]) ||
	    !isalnum((unsigned char)s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("-_", s[i]) &&
		    !(dots && s[i] == '.'))
			return false;
	return true;
}

/* "vendor.com/class": a DNS subdomain prefix, a slash, a name. */
static bool good_kind(const char *k)
{
	const char *slash = strchr(k, '/');
	size_t pl;

	if (!slash || strchr(slash + 1, '/'))
		return false;
	pl = (size_t)(slash - k);
	if (!pl || pl > 253 || k[0] == '.' || k[pl - 1] == '.')
		return false;
	for (size_t i = 0; i < pl; i++)
		if (!isalnum((unsigned char)k[i]) && k[i] != '-' && k[i] != '.')
			return false;
	return good_segment(slash + 1, strlen(slash + 1), true);
}

static int parse_device(const json_t *o, const char *where,
			struct cdi_device *d, struct cerr *e)
{
	static const char *const keys[] = {"name", "annotations",
					   "containerEdits", NULL};
	json_t *ed;
	char w[300];

	if (only_keys(o, where, keys, e) < 0 ||
	    get_string(o, where, "name", true, &d->name, e) < 0)
		return -1;
	if (!good_segment(d->name, strlen(d->name), true))
		return cerr_set(e, EINVAL,
				"%s.name: \"%.64s\" is not a device "
				"name",
				where, d->name);
	ed = json_object_get(o, "containerEdits");
	snprintf(w, sizeof(w), "%s.containerEdits", where);
	if (!ed || json_is_null(ed)) {
		d->edits.env = xcalloc(1, sizeof(char *));
		return 0;
	}
	return parse_edits(ed, w, &d->edits, e);
}

static int parse_root(const json_t *root, struct cdi_spec *s, struct cerr *e)
{
	static const char *const keys[] = {"cdiVersion",     "kind",
					   "annotations",    "devices",
					   "containerEdits", NULL};
	json_t *ed, *ann;
	bool known = false;

	if (only_keys(root, "", keys, e) < 0 ||
	    get_string(root, "", "cdiVersion", true, &s->version, e) < 0 ||
	    get_string(root, "", "kind", true, &s->kind, e) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(known_versions); i++)
		known = known || !strcmp(s->version, known_versions[i]);
	if (!known)
		return cerr_set(e, ENOTSUP, "unsupported cdiVersion \"%.32s\"",
				s->version);
	if (!good_kind(s->kind))
		return cerr_set(e, EINVAL,
				"kind: \"%.64s\" is not "
				"vendor.com/class",
				s->kind);
	ann = json_object_get(root, "annotations");
	if (ann && !json_is_null(ann) && !json_is_object(ann))
		return cerr_set(e, EINVAL, "annotations: not a mapping");
	PARSE_LIST(root, "", "devices", s->devices, s->n_devices, parse_device);
	if (!s->n_devices)
		return cerr_set(e, EINVAL,
				"devices: none (a spec must name "
				"at least one)");
	for (size_t i = 0; i < s->n_devices; i++)
		for (size_t j = 0; j < i; j++)
			if (!strcmp(s->devices[i].name, s->devices[j].name))
				return cerr_set(e, EINVAL, "devices: %s twice",
						s->devices[i].name);
	ed = json_object_get(root, "containerEdits");
	if (!ed || json_is_null(ed)) {
		s->edits.env = xcalloc(1, sizeof(char *));
		return 0;
	}
	return parse_edits(ed, "containerEdits", &s->edits, e);
}

int cdi_spec_parse(const char *text, size_t len, struct cdi_spec *out,
		   struct cerr *e)
{
	cleanup_json json_t *root = NULL;

	memset(out, 0, sizeof(*out));
	if (len > CDI_SPEC_MAX)
		return cerr_set(e, EFBIG, "larger than %u bytes", CDI_SPEC_MAX);
	if (memchr(text, '\0', len))
		return cerr_set(e, EINVAL, "holds a NUL byte");
	root = yaml_json_parse(text, len, e);
	if (!root)
		return -1;
	if (!json_is_object(root))
		return cerr_set(e, EINVAL, "not a mapping");
	if (parse_root(root, out, e) < 0) {
		cdi_spec_free(out);
		return -1;
	}
	return 0;
}

void cdi_edits_free(struct cdi_edits *x)
{
	strv_free(x->env);
	for (size_t i = 0; i < x->n_nodes; i++) {
		free(x->nodes[i].path);
		free(x->nodes[i].host_path);
		free(x->nodes[i].permissions);
	}
	free(x->nodes);
	for (size_t i = 0; i < x->n_mounts; i++) {
		free(x->mounts[i].host_path);
		free(x->mounts[i].container_path);
		free(x->mounts[i].type);
		strv_free(x->mounts[i].options);
	}
	free(x->mounts);
	for (size_t i = 0; i < x->n_hooks; i++) {
		free(x->hooks[i].name);
		free(x->hooks[i].path);
		strv_free(x->hooks[i].args);
		strv_free(x->hooks[i].env);
	}
	free(x->hooks);
	free(x->gids);
	memset(x, 0, sizeof(*x));
}

void cdi_spec_free(struct cdi_spec *s)
{
	if (!s)
		return;
	free(s->version);
	free(s->kind);
	for (size_t i = 0; i < s->n_devices; i++) {
		free(s->devices[i].name);
		cdi_edits_free(&s->devices[i].edits);
	}
	free(s->devices);
	cdi_edits_free(&s->edits);
	free(s->path);
	memset(s, 0, sizeof(*s));
}

/* ============================= the registry ============================= */

static bool spec_file(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && ((n > 5 && !strcmp(name + n - 5, ".json")) ||
				  (n > 5 && !strcmp(name + n - 5, ".yaml")) ||
				  (n > 4 && !strcmp(name + n - 4, ".yml")));
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void add_error(struct cdi_registry *r, char *msg)
{
	r->errors = xrealloc(r->errors, (r->n_errors + 1) * sizeof(char *));
	r->errors[r->n_errors++] = msg;
}

static void load_file(struct cdi_registry *r, const char *path)
{
	struct buf b;
	struct cerr e = {0};
	struct cdi_spec s;

	buf_init(&b, CDI_SPEC_MAX);
	if (fs_read_file(path, &b, &e) < 0 ||
	    cdi_spec_parse(b.data ? b.data : "", b.len, &s, &e) < 0) {
		add_error(r, xasprintf("%s: %s", path, e.msg));
		buf_free(&b);
		return;
	}
	buf_free(&b);
	s.path = xstrdup(path);
	r->specs = xrealloc(r->specs, (r->n_specs + 1) * sizeof(*r->specs));
	r->specs[r->n_specs++] = s;
}

static void load_dir(struct cdi_registry *r, const char *dir)
{
	cleanup_dir DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0;

	if (!d)
		return; /* a directory that is not there holds no spec */
	while ((de = readdir(d)) && n < CDI_MAX_FILES) {
		if (!spec_file(de->d_name))
			continue;
		names = xrealloc(names, (n + 1) * sizeof(char *));
		names[n++] = xasprintf("%s/%s", dir, de->d_name);
	}
	if (n)
		qsort(names, n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < n; i++) {
		if (r->n_specs + r->n_errors < CDI_MAX_FILES)
			load_file(r, names[i]);
		free(names[i]);
	}
	free(names);
}

void cdi_registry_load(const char *dirs, struct cdi_registry *r)
{
	cleanup_free char *copy = xstrdup(dirs ? dirs : CDI_DEFAULT_DIRS);
	char *save = NULL;

	memset(r, 0, sizeof(*r));
	for (char *d = strtok_r(copy, ":", &save); d;
	     d = strtok_r(NULL, ":", &save))
		if (*d)
			load_dir(r, d);
}

void cdi_registry_free(struct cdi_registry *r)
{
	for (size_t i = 0; i < r->n_specs; i++)
		cdi_spec_free(&r->specs[i]);
	free(r->specs);
	for (size_t i = 0; i < r->n_errors; i++)
		free(r->errors[i]);
	free(r->errors);
	memset(r, 0, sizeof(*r));
}

bool cdi_registry_has_kind(const struct cdi_registry *r, const char *kind)
{
	for (size_t i = 0; i < r->n_specs; i++)
		if (!strcmp(r->specs[i].kind, kind))
			return true;
	return false;
}

/* ============================== resolution ============================== */

int cdi_parse_name(const char *q, char *kind, size_t kind_sz, char *name,
		   size_t name_sz, struct cerr *e)
{
	const char *eq = strchr(q, '=');
	size_t kl;

	if (!eq || (kl = (size_t)(eq - q)) >= kind_sz ||
	    strlen(eq + 1) >= name_sz)
		return cerr_set(e, EINVAL,
				"\"%.128s\" is not "
				"vendor.com/class=name",
				q);
	memcpy(kind, q, kl);
	kind[kl] = '\0';
	memcpy(name, eq + 1, strlen(eq + 1) + 1);
	if (!good_kind(kind) || !good_segment(name, strlen(name), true))
		return cerr_set(e, EINVAL,
				"\"%.128s\" is not "
				"vendor.com/class=name",
				q);
	return 0;
}

static char **strv_concat(char **a, char *const *b)
{
	size_t na = strv_len(a), nb = strv_len(b);

	a = xrealloc(a, (na + nb + 1) * sizeof(char *));
	for (size_t i = 0; i < nb; i++)
		a[na + i] = xstrdup(b[i]);
	a[na + nb] = NULL;
	return a;
}

/* Append a copy of x's edits to out. */
static void merge(struct cdi_edits *out, const struct cdi_edits *x)
{
	out->env = strv_concat(out->env, x->env);
	out->nodes = xrealloc(out->nodes, (out->n_nodes + x->n_nodes + 1) *
					      sizeof(*out->nodes));
	for (size_t i = 0; i < x->n_nodes; i++) {
		struct cdi_node n = x->nodes[i];

		n.path = xstrdup(n.path);
		n.host_path = n.host_path ? xstrdup(n.host_path) : NULL;
		n.permissions = n.permissions ? xstrdup(n.permissions) : NULL;
		out->nodes[out->n_nodes++] = n;
	}
	out->mounts = xrealloc(out->mounts, (out->n_mounts + x->n_mounts + 1) *
						sizeof(*out->mounts));
	for (size_t i = 0; i < x->n_mounts; i++) {
		const struct cdi_mount *m = &x->mounts[i];

		out->mounts[out->n_mounts++] = (struct cdi_mount){
		    xstrdup(m->host_path), xstrdup(m->container_path),
		    m->type ? xstrdup(m->type) : NULL, strv_dup(m->options)};
	}
	out->hooks = xrealloc(out->hooks, (out->n_hooks + x->n_hooks + 1) *
					      sizeof(*out->hooks));
	for (size_t i = 0; i < x->n_hooks; i++) {
		const struct cdi_hook *h = &x->hooks[i];

		out->hooks[out->n_hooks++] = (struct cdi_hook){
		    xstrdup(h->name), xstrdup(h->path), strv_dup(h->args),
		    strv_dup(h->env), h->timeout};
	}
	out->gids = xrealloc(out->gids, (out->n_gids + x->n_gids + 1) *
					    sizeof(*out->gids));
	for (size_t i = 0; i < x->n_gids; i++)
		out->gids[out->n_gids++] = x->gids[i];
}

/* The one spec defining kind=name; EEXIST when two files do. */
static int find_device(const struct cdi_registry *r, const char *kind,
		       const char *name, size_t *si, size_t *di, struct cerr *e)
{
	bool found = false;

	for (size_t i = 0; i < r->n_specs; i++) {
		const struct cdi_spec *s = &r->specs[i];

		if (strcmp(s->kind, kind))
			continue;
		for (size_t j = 0; j < s->n_devices; j++) {
			if (strcmp(s->devices[j].name, name))
				continue;
			if (found)
				return cerr_set(
				    e, EEXIST,
				    "CDIDeviceConflict: %s=%s is defined by "
				    "both %s and %s",
				    kind, name, r->specs[*si].path, s->path);
			found = true;
			*si = i;
			*di = j;
		}
	}
	return found ? 1 : 0;
}

struct picked {
	bool *spec_used;
	bool **dev_used;
};

static void pick(const struct cdi_registry *r, struct picked *p, size_t si,
		 size_t di, struct cdi_edits *out)
{
	if (p->dev_used[si][di])
		return;
	if (!p->spec_used[si]) {
		p->spec_used[si] = true;
		merge(out, &r->specs[si].edits);
	}
	p->dev_used[si][di] = true;
	merge(out, &r->specs[si].devices[di].edits);
}

static int resolve_one(const struct cdi_registry *r, struct picked *p,
		       const char *q, struct cdi_edits *out, struct cerr *e)
{
	char kind[300], name[80];
	size_t si = 0, di = 0;
	bool any = false;
	int f;

	if (cdi_parse_name(q, kind, sizeof(kind), name, sizeof(name), e) < 0)
		return -1;
	f = find_device(r, kind, name, &si, &di, e);
	if (f < 0)
		return -1;
	if (f > 0) {
		pick(r, p, si, di, out);
		return 0;
	}
	if (strcmp(name, "all"))
		return cerr_set(e, ENODEV, "CDIDeviceNotFound: %s", q);
	/* No device named "all": every device of the kind. */
	for (size_t i = 0; i < r->n_specs; i++) {
		if (strcmp(r->specs[i].kind, kind))
			continue;
		for (size_t j = 0; j < r->specs[i].n_devices; j++) {
			if (find_device(r, kind, r->specs[i].devices[j].name,
					&si, &di, e) < 0)
				return -1;
			pick(r, p, i, j, out);
			any = true;
		}
	}
	if (!any)
		return cerr_set(e, ENODEV, "CDIDeviceNotFound: %s", q);
	return 0;
}

int cdi_resolve(const struct cdi_registry *r, char *const *names,
		struct cdi_edits *out, struct cerr *e)
{
	struct picked p = {xcalloc(r->n_specs + 1, sizeof(bool)),
			   xcalloc(r->n_specs + 1, sizeof(bool *))};
	int rc = 0;

	memset(out, 0, sizeof(*out));
	out->env = xcalloc(1, sizeof(char *));
	for (size_t i = 0; i < r->n_specs; i++)
		p.dev_used[i] =
		    xcalloc(r->specs[i].n_devices + 1, sizeof(bool));
	for (size_t i = 0; names && names[i] && rc == 0; i++)
		rc = resolve_one(r, &p, names[i], out, e);
	for (size_t i = 0; i < r->n_specs; i++)
		free(p.dev_used[i]);
	free(p.dev_used);
	free(p.spec_used);
	if (rc < 0)
		cdi_edits_free(out);
	return rc;
}
