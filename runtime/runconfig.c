// SPDX-License-Identifier: Apache-2.0
/* The unit directory's JSON formats: run.json (the agent's recipe for one
 * unit), state.json and exit.json (what the monitor reports). This is the
 * only file of the runtime that touches jansson; the parsers are pure
 * (buffer in, struct and error out) so that they can be fuzzed, and they
 * check every field so that the monitor can trust what it gets. */
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>

#include "base64.h"
#include "jsonutil.h"
#include "path.h"
#include "runtime.h"
#include "sysctl.h"
#include "util.h"

#define STR_MAX 4096
#define HOSTNAME_MAX 64
#define GRACE_MAX (365LL * 86400)

/* The getters are common/jsonutil's jget_*, each naming its field in its
 * error; a required field that is absent is "missing". */
static int need(const void *v, const char *key, struct cerr *e)
{
	return v ? 0 : cerr_set(e, EINVAL, "%s: missing", key);
}

/* ---- field checks ---- */

/* Absolute, and no ".." component: the monitor resolves these beneath a
 * root and must not be asked to climb. */
static int check_abs_path(const char *what, const char *p, struct cerr *e)
{
	char clean[PATH_MAX_INPUT];

	if (!p)
		return 0;
	if (p[0] != '/')
		return cerr_set(e, EINVAL, "%s: '%.200s' is not absolute", what,
				p);
	if (path_clean(p, clean, sizeof(clean), e) < 0)
		return cerr_prefix(e, "%s", what);
	return 0;
}

static int check_hostname(const char *h, struct cerr *e)
{
	size_t n;

	if (!h)
		return 0;
	n = strlen(h);
	if (n == 0 || n > HOSTNAME_MAX)
		return cerr_set(e, EINVAL, "hostname: length %zu not in 1..%d",
				n, HOSTNAME_MAX);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)h[i]) && h[i] != '-' &&
		    h[i] != '.' && h[i] != '_')
			return cerr_set(e, EINVAL,
					"hostname: bad character at %zu", i);
	return 0;
}

static int check_env(char **env, struct cerr *e)
{
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (!eq || eq == env[i])
			return cerr_set(e, EINVAL, "env[%zu]: not NAME=value",
					i);
	}
	return 0;
}

/* The cgroup path is created under every hierarchy: relative and already
 * in clean form, so that what is created is exactly what was asked. */
static int check_cgroup_path(const char *p, struct cerr *e)
{
	char clean[PATH_MAX_INPUT];

	if (!p)
		return 0;
	if (p[0] == '/' || path_clean(p, clean, sizeof(clean), e) < 0 ||
	    strcmp(clean, p) != 0 || !*p)
		return cerr_set(e, EINVAL,
				"cgroup.path: '%.200s' is not a clean relative "
				"path",
				p);
	for (const char *c = p; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7f)
			return cerr_set(e, EINVAL,
					"cgroup.path: control character");
	return 0;
}

/* "net_admin", "NET_ADMIN" and "CAP_NET_ADMIN" all become "CAP_NET_ADMIN";
 * duplicates are dropped. libcap's table says which names exist. */
static int normalize_caps(const char *what, char **caps, struct cerr *e)
{
	size_t o = 0;

	for (size_t i = 0; caps && caps[i]; i++) {
		char low[64];
		const char *name = caps[i];
		cap_value_t v;
		size_t n;

		if (!strncasecmp(name, "CAP_", 4))
			name += 4;
		n = strlen(name);
		if (n == 0 || n + 5 > sizeof(low))
			return cerr_set(e, EINVAL, "%s[%zu]: bad name", what,
					i);
		memcpy(low, "cap_", 4);
		for (size_t k = 0; k <= n; k++)
			low[4 + k] = (char)tolower((unsigned char)name[k]);
		if (strspn(low + 4, "abcdefghijklmnopqrstuvwxyz_") != n ||
		    cap_from_name(low, &v) < 0)
			return cerr_set(e, EINVAL,
					"%s[%zu]: unknown capability '%.64s'",
					what, i, caps[i]);
		for (size_t k = 0; low[k]; k++)
			low[k] = (char)toupper((unsigned char)low[k]);
		free(caps[i]);
		caps[i] = NULL;
		bool dup = false;
		for (size_t k = 0; k < o; k++)
			dup = dup || !strcmp(caps[k], low);
		if (!dup)
			caps[o++] = xstrdup(low);
	}
	if (caps)
		caps[o] = NULL;
	return 0;
}

static bool strv_has(char *const *v, const char *s)
{
	for (size_t i = 0; v && v[i]; i++)
		if (!strcmp(v[i], s))
			return true;
	return false;
}

/* ---- mounts ---- */

static const struct {
	const char *name;
	unsigned long flag;
} mount_opts[] = {
    {"ro", MS_RDONLY},	   {"nosuid", MS_NOSUID}, {"nodev", MS_NODEV},
    {"noexec", MS_NOEXEC}, {"rbind", MS_REC},
};

static int parse_mount_opts(const json_t *m, unsigned long *flags,
			    struct cerr *e)
{
	json_t *a, *v;
	size_t i;
	int r;

	*flags = 0;
	if ((r = jget_arr(m, "", "options", SIZE_MAX, &a, e)) <= 0)
		return r;
	json_array_foreach(a, i, v)
	{
		const char *s = json_string_value(v);
		size_t k;

		if (!s)
			return cerr_set(e, EINVAL, "options[%zu]: not a string",
					i);
		if (!strcmp(s, "rw") || !strcmp(s, "bind"))
			continue;
		for (k = 0; k < ARRAY_SIZE(mount_opts); k++)
			if (!strcmp(s, mount_opts[k].name))
				break;
		if (k == ARRAY_SIZE(mount_opts))
			return cerr_set(e, EINVAL,
					"options[%zu]: unknown option '%.32s'",
					i, s);
		*flags |= mount_opts[k].flag;
	}
	return 0;
}

/* A subPath is relative and clean: path_clean would leave it as it is. */
static int check_sub_path(const char *sub, struct cerr *e)
{
	char clean[PATH_MAX_INPUT];

	if (path_clean(sub, clean, sizeof(clean), e) < 0)
		return cerr_prefix(e, "subPath");
	if (!*sub || strcmp(clean, sub))
		return cerr_set(e, EINVAL,
				"subPath: not a clean relative path");
	return 0;
}

static int parse_mount(const json_t *m, struct run_mount *rm, struct cerr *e)
{
	if (!json_is_object(m))
		return cerr_set(e, EINVAL, "not an object");
	if (jget_str(m, "", "source", STR_MAX, &rm->source, e) < 0 ||
	    jget_str(m, "", "target", STR_MAX, &rm->target, e) < 0 ||
	    need(rm->target, "target", e) < 0 ||
	    jget_str(m, "", "type", STR_MAX, &rm->type, e) < 0 ||
	    need(rm->type, "type", e) < 0 ||
	    jget_str(m, "", "data", STR_MAX, &rm->data, e) < 0 ||
	    jget_str(m, "", "subPath", STR_MAX, &rm->sub_path, e) < 0 ||
	    parse_mount_opts(m, &rm->flags, e) < 0 ||
	    check_abs_path("target", rm->target, e) < 0)
		return -1;
	if (!*rm->type || strlen(rm->type) > 32 ||
	    strspn(rm->type, "abcdefghijklmnopqrstuvwxyz0123456789_.") !=
		strlen(rm->type))
		return cerr_set(e, EINVAL, "type: bad filesystem type");
	if (!strcmp(rm->type, "bind")) {
		if (need(rm->source, "source", e) < 0)
			return -1;
		if (rm->sub_path && check_sub_path(rm->sub_path, e) < 0)
			return -1;
		return check_abs_path("source", rm->source, e);
	}
	if (rm->sub_path)
		return cerr_set(e, EINVAL, "subPath: on a %s mount", rm->type);
	if (rm->flags & MS_REC)
		return cerr_set(e, EINVAL, "options: rbind on a %s mount",
				rm->type);
	return 0;
}

static int parse_mounts(const json_t *root, struct run_config *c,
			struct cerr *e)
{
	json_t *a, *m;
	size_t i;
	int r;

	if ((r = jget_arr(root, "", "mounts", RUN_MAX_MOUNTS, &a, e)) <= 0)
		return r;
	c->mounts = xcalloc(json_array_size(a) + 1, sizeof(*c->mounts));
	json_array_foreach(a, i, m)
	{
		c->n_mounts = i + 1;
		if (parse_mount(m, &c->mounts[i], e) < 0)
			return cerr_prefix(e, "mounts[%zu]", i);
	}
	return 0;
}

/* ---- the rest of run.json ---- */

static int parse_user(const json_t *root, struct run_config *c, struct cerr *e)
{
	json_t *a, *v;
	int64_t uid = 0, gid = 0;
	size_t i;
	int r;

	if (jget_int(root, "", "uid", 0, UINT32_MAX - 1, &uid, NULL, e) < 0 ||
	    jget_int(root, "", "gid", 0, UINT32_MAX - 1, &gid, NULL, e) < 0)
		return -1;
	c->uid = (uint32_t)uid;
	c->gid = (uint32_t)gid;
	if ((r = jget_arr(root, "", "groups", RUN_MAX_GROUPS, &a, e)) <= 0)
		return r;
	c->groups = xcalloc(json_array_size(a) + 1, sizeof(*c->groups));
	json_array_foreach(a, i, v)
	{
		json_int_t g = json_integer_value(v);
		if (!json_is_integer(v) || g < 0 || g > UINT32_MAX - 1)
			return cerr_set(e, EINVAL, "groups[%zu]: not a gid", i);
		c->groups[c->n_groups++] = (uint32_t)g;
	}
	return 0;
}

static int parse_caps(const json_t *root, struct run_config *c, struct cerr *e)
{
	if (jget_strv(root, "", "capabilities", RUN_MAX_ARGS, SIZE_MAX,
		      &c->caps, e) < 0 ||
	    jget_strv(root, "", "ambientCapabilities", RUN_MAX_ARGS, SIZE_MAX,
		      &c->ambient_caps, e) < 0 ||
	    normalize_caps("capabilities", c->caps, e) < 0 ||
	    normalize_caps("ambientCapabilities", c->ambient_caps, e) < 0)
		return -1;
	for (size_t i = 0; c->ambient_caps && c->ambient_caps[i]; i++)
		if (!strv_has(c->caps, c->ambient_caps[i]))
			return cerr_set(e, EINVAL,
					"ambientCapabilities: %s is not in "
					"capabilities",
					c->ambient_caps[i]);
	return 0;
}

static int parse_namespaces(const json_t *root, struct run_config *c,
			    struct cerr *e)
{
	json_t *ns;

	if (jget_obj(root, "", "namespaces", &ns, e) < 0)
		return -1;
	if (!ns)
		return 0;
	if (jget_str(ns, "", "network", STR_MAX, &c->netns_path, e) < 0 ||
	    jget_str(ns, "", "pid", STR_MAX, &c->pid_ns_path, e) < 0 ||
	    jget_str(ns, "", "ipc", STR_MAX, &c->ipc_ns_path, e) < 0 ||
	    check_abs_path("network", c->netns_path, e) < 0 ||
	    check_abs_path("pid", c->pid_ns_path, e) < 0 ||
	    check_abs_path("ipc", c->ipc_ns_path, e) < 0)
		return cerr_prefix(e, "namespaces");
	return 0;
}

/* "sysctls": {"name": "value"}: namespaced ones only, net.* only in a
 * network namespace of the pod's (the monitor never writes the host's). */
static int parse_sysctls(const json_t *root, struct run_config *c,
			 struct cerr *e)
{
	json_t *o, *v;
	const char *k;
	size_t n = 0;

	if (jget_obj(root, "", "sysctls", &o, e) < 0)
		return -1;
	if (!o)
		return 0;
	if (json_object_size(o) > 256)
		return cerr_set(e, EINVAL, "sysctls: too many");
	c->sysctl_names = xcalloc(json_object_size(o) + 1, sizeof(char *));
	c->sysctl_values = xcalloc(json_object_size(o) + 1, sizeof(char *));
	json_object_foreach(o, k, v)
	{
		if (!json_is_string(v))
			return cerr_set(e, EINVAL,
					"sysctls.%.64s: not a string", k);
		if (sysctl_check(k, json_string_value(v), true,
				 c->netns_path != NULL, e) < 0)
			return cerr_prefix(e, "sysctls");
		c->sysctl_names[n] = xstrdup(k);
		c->sysctl_values[n++] = xstrdup(json_string_value(v));
	}
	return 0;
}

static int parse_cgroup_log(const json_t *root, struct run_config *c,
			    struct cerr *e)
{
	json_t *cg, *log;

	if (jget_obj(root, "", "cgroup", &cg, e) < 0 ||
	    jget_obj(root, "", "log", &log, e) < 0)
		return -1;
	if (need(cg, "cgroup", e) < 0)
		return -1;
	if (jget_str(cg, "", "path", STR_MAX, &c->cgroup_path, e) < 0 ||
	    need(c->cgroup_path, "path", e) < 0 ||
	    check_cgroup_path(c->cgroup_path, e) < 0 ||
	    jget_int(cg, "", "memoryLimit", 0, INT64_MAX / 2, &c->memory_limit,
		     NULL, e) < 0 ||
	    jget_int(cg, "", "podMemoryLimit", 0, INT64_MAX / 2,
		     &c->pod_memory_limit, NULL, e) < 0 ||
	    jget_int(cg, "", "cpuQuota", 0, 1000000000, &c->cpu_quota, NULL,
		     e) < 0 ||
	    jget_int(cg, "", "pidsLimit", 0, INT32_MAX, &c->pids_limit, NULL,
		     e) < 0)
		return cerr_prefix(e, "cgroup");
	if (need(log, "log", e) < 0)
		return -1;
	c->log_max_files = 2;
	if (jget_str(log, "", "path", STR_MAX, &c->log_path, e) < 0 ||
	    need(c->log_path, "path", e) < 0 ||
	    check_abs_path("path", c->log_path, e) < 0 ||
	    jget_int(log, "", "maxBytes", 0, INT64_MAX / 2, &c->log_max_bytes,
		     NULL, e) < 0 ||
	    jget_int(log, "", "maxFiles", 2, CRILOG_ROTATED_MAX + 1,
		     &c->log_max_files, NULL, e) < 0 ||
	    jget_str(log, "", "link", STR_MAX, &c->log_link, e) < 0 ||
	    (c->log_link && check_abs_path("link", c->log_link, e) < 0))
		return cerr_prefix(e, "log");
	return 0;
}

static int parse_process(const json_t *root, struct run_config *c,
			 struct cerr *e)
{
	c->grace_seconds = 30;
	c->stop_signal = SIGTERM;
	if (jget_str(root, "", "id", STR_MAX, &c->id, e) < 0 ||
	    need(c->id, "id", e) < 0 ||
	    jget_str(root, "", "rootfs", STR_MAX, &c->rootfs, e) < 0 ||
	    need(c->rootfs, "rootfs", e) < 0 ||
	    check_abs_path("rootfs", c->rootfs, e) < 0 ||
	    jget_bool(root, "", "readonlyRootfs", &c->readonly_rootfs, e) < 0 ||
	    jget_strv(root, "", "args", RUN_MAX_ARGS, SIZE_MAX, &c->argv, e) <
		0 ||
	    jget_strv(root, "", "env", RUN_MAX_ARGS, SIZE_MAX, &c->env, e) <
		0 ||
	    check_env(c->env, e) < 0 ||
	    jget_str(root, "", "cwd", STR_MAX, &c->cwd, e) < 0 ||
	    check_abs_path("cwd", c->cwd, e) < 0 ||
	    jget_str(root, "", "hostname", STR_MAX, &c->hostname, e) < 0 ||
	    check_hostname(c->hostname, e) < 0 ||
	    jget_bool(root, "", "noNewPrivileges", &c->no_new_privs, e) < 0 ||
	    jget_bool(root, "", "procUnmasked", &c->proc_unmasked, e) < 0 ||
	    jget_int(root, "", "graceSeconds", 0, GRACE_MAX, &c->grace_seconds,
		     NULL, e) < 0 ||
	    jget_int(root, "", "stopSignal", 1, SIGRTMAX, &c->stop_signal, NULL,
		     e) < 0 ||
	    jget_bool(root, "", "tty", &c->tty, e) < 0 ||
	    jget_bool(root, "", "stdin", &c->open_stdin, e) < 0)
		return -1;
	if (!*c->id || strlen(c->id) > 256)
		return cerr_set(e, EINVAL, "id: length not in 1..256");
	if (!c->argv || !c->argv[0] || !*c->argv[0])
		return cerr_set(e, EINVAL, "args: missing or empty");
	if (!c->env)
		c->env = xcalloc(1, sizeof(char *));
	if (!c->cwd)
		c->cwd = xstrdup("/");
	return 0;
}

/* "seccomp": the BPF program in base64, at most the kernel's 4096
 * instructions of 8 bytes. */
static int parse_seccomp(const json_t *root, struct run_config *c,
			 struct cerr *e)
{
	json_t *v = json_object_get(root, "seccomp");
	struct buf b;

	buf_init(&b, 4096 * 8);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return cerr_set(e, EINVAL, "seccomp: not a string");
	if (b64_decode(json_string_value(v), json_string_length(v), B64_PADDED,
		       &b, e) < 0) {
		buf_free(&b);
		return cerr_prefix(e, "seccomp");
	}
	if (!b.len || b.len % 8) {
		buf_free(&b);
		return cerr_set(e, EINVAL, "seccomp: not a BPF program");
	}
	c->seccomp_bpf = buf_steal(&b, &c->seccomp_len);
	return 0;
}

int runconfig_parse(const char *buf, size_t len, struct run_config *out,
		    struct cerr *e)
{
	cleanup_json json_t *root = NULL;

	memset(out, 0, sizeof(*out));
	if (len > RUNCONFIG_MAX)
		return cerr_set(e, EFBIG, "run.json is larger than %u bytes",
				RUNCONFIG_MAX);
	root = json_parse_object(buf, len, e);
	if (!root)
		return -1;
	if (parse_process(root, out, e) < 0 || parse_user(root, out, e) < 0 ||
	    parse_caps(root, out, e) < 0 ||
	    parse_namespaces(root, out, e) < 0 ||
	    parse_sysctls(root, out, e) < 0 || parse_mounts(root, out, e) < 0 ||
	    parse_cgroup_log(root, out, e) < 0 ||
	    runconfig_parse_devices(root, out, e) < 0 ||
	    parse_seccomp(root, out, e) < 0) {
		runconfig_free(out);
		return -1;
	}
	return 0;
}

void runconfig_free(struct run_config *c)
{
	if (!c)
		return;
	free(c->id);
	free(c->rootfs);
	strv_free(c->argv);
	strv_free(c->env);
	free(c->cwd);
	free(c->groups);
	strv_free(c->caps);
	strv_free(c->ambient_caps);
	free(c->hostname);
	free(c->netns_path);
	free(c->pid_ns_path);
	free(c->ipc_ns_path);
	strv_free(c->sysctl_names);
	strv_free(c->sysctl_values);
	for (size_t i = 0; i < c->n_mounts; i++) {
		free(c->mounts[i].source);
		free(c->mounts[i].target);
		free(c->mounts[i].sub_path);
		free(c->mounts[i].type);
		free(c->mounts[i].data);
	}
	free(c->mounts);
	free(c->cgroup_path);
	free(c->log_path);
	free(c->log_link);
	runconfig_devices_free(c);
	free(c->seccomp_bpf);
	memset(c, 0, sizeof(*c));
}

/* ---- serialization ---- */

static json_t *jstrv_new(char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static void set_str(json_t *o, const char *key, const char *s)
{
	if (s)
		json_object_set_new(o, key, json_string(s));
}

static json_t *mount_to_json(const struct run_mount *m)
{
	json_t *o = json_object(), *opts = json_array();

	set_str(o, "source", m->source);
	set_str(o, "subPath", m->sub_path);
	set_str(o, "target", m->target);
	set_str(o, "type", m->type);
	for (size_t k = 0; k < ARRAY_SIZE(mount_opts); k++)
		if (m->flags & mount_opts[k].flag)
			json_array_append_new(opts,
					      json_string(mount_opts[k].name));
	json_object_set_new(o, "options", opts);
	set_str(o, "data", m->data);
	return o;
}

static json_t *limits_to_json(const struct run_config *c)
{
	json_t *cg = json_object();

	set_str(cg, "path", c->cgroup_path);
	json_object_set_new(cg, "memoryLimit", json_integer(c->memory_limit));
	if (c->pod_memory_limit)
		json_object_set_new(cg, "podMemoryLimit",
				    json_integer(c->pod_memory_limit));
	json_object_set_new(cg, "cpuQuota", json_integer(c->cpu_quota));
	json_object_set_new(cg, "pidsLimit", json_integer(c->pids_limit));
	return cg;
}

char *runconfig_to_json(const struct run_config *c)
{
	cleanup_json json_t *o = json_object();
	json_t *groups = json_array(), *ns = json_object(), *mounts,
	       *log = json_object();
	char *s;

	set_str(o, "id", c->id);
	set_str(o, "rootfs", c->rootfs);
	json_object_set_new(o, "readonlyRootfs",
			    json_boolean(c->readonly_rootfs));
	json_object_set_new(o, "args", jstrv_new(c->argv));
	json_object_set_new(o, "env", jstrv_new(c->env));
	set_str(o, "cwd", c->cwd);
	json_object_set_new(o, "uid", json_integer(c->uid));
	json_object_set_new(o, "gid", json_integer(c->gid));
	for (size_t i = 0; i < c->n_groups; i++)
		json_array_append_new(groups, json_integer(c->groups[i]));
	json_object_set_new(o, "groups", groups);
	json_object_set_new(o, "capabilities", jstrv_new(c->caps));
	json_object_set_new(o, "ambientCapabilities",
			    jstrv_new(c->ambient_caps));
	json_object_set_new(o, "noNewPrivileges",
			    json_boolean(c->no_new_privs));
	if (c->proc_unmasked)
		json_object_set_new(o, "procUnmasked", json_true());
	set_str(o, "hostname", c->hostname);
	set_str(ns, "network", c->netns_path);
	set_str(ns, "pid", c->pid_ns_path);
	set_str(ns, "ipc", c->ipc_ns_path);
	json_object_set_new(o, "namespaces", ns);
	if (c->sysctl_names && c->sysctl_names[0]) {
		json_t *sc = json_object();

		for (size_t i = 0; c->sysctl_names[i]; i++)
			json_object_set_new(sc, c->sysctl_names[i],
					    json_string(c->sysctl_values[i]));
		json_object_set_new(o, "sysctls", sc);
	}
	mounts = json_array();
	for (size_t i = 0; i < c->n_mounts; i++)
		json_array_append_new(mounts, mount_to_json(&c->mounts[i]));
	json_object_set_new(o, "mounts", mounts);
	json_object_set_new(o, "cgroup", limits_to_json(c));
	set_str(log, "path", c->log_path);
	json_object_set_new(log, "maxBytes", json_integer(c->log_max_bytes));
	json_object_set_new(log, "maxFiles", json_integer(c->log_max_files));
	set_str(log, "link", c->log_link);
	json_object_set_new(o, "log", log);
	json_object_set_new(o, "graceSeconds", json_integer(c->grace_seconds));
	if (c->stop_signal && c->stop_signal != SIGTERM)
		json_object_set_new(o, "stopSignal",
				    json_integer(c->stop_signal));
	json_object_set_new(o, "tty", json_boolean(c->tty));
	runconfig_devices_to_json(c, o);
	if (c->seccomp_bpf) {
		char *b = b64_encode_str(c->seccomp_bpf, c->seccomp_len);

		json_object_set_new(o, "seccomp", json_string(b));
		free(b);
	}
	json_object_set_new(o, "stdin", json_boolean(c->open_stdin));
	s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	if (!s)
		abort();
	return s;
}

/* ---- state.json and exit.json ---- */

static int get_u64(const json_t *o, const char *key, uint64_t *out,
		   struct cerr *e)
{
	int64_t v = 0;

	if (jget_int(o, "", key, 0, INT64_MAX, &v, NULL, e) < 0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

int runstate_parse(const char *buf, size_t len, struct unit_runtime_state *st,
		   struct cerr *e)
{
	cleanup_json json_t *o = json_parse_object(buf, len, e);
	int64_t mpid = 0, cpid = 0;

	if (!o)
		return cerr_prefix(e, "state.json");
	if (jget_int(o, "", "monitorPid", 1, INT32_MAX, &mpid, NULL, e) < 0 ||
	    get_u64(o, "monitorStart", &st->monitor_start, e) < 0 ||
	    jget_int(o, "", "containerPid", 1, INT32_MAX, &cpid, NULL, e) < 0 ||
	    get_u64(o, "containerStart", &st->container_start, e) < 0 ||
	    jget_int(o, "", "startedAtNs", 0, INT64_MAX, &st->started_at_ns,
		     NULL, e) < 0 ||
	    jget_strv(o, "", "cgroups", RUN_MAX_ARGS, SIZE_MAX, &st->cgroups,
		      e) < 0)
		return cerr_prefix(e, "state.json");
	if (mpid == 0 || cpid == 0)
		return cerr_set(e, EINVAL, "state.json: pids missing");
	for (size_t i = 0; st->cgroups && st->cgroups[i]; i++)
		if (check_abs_path("cgroups", st->cgroups[i], e) < 0)
			return cerr_prefix(e, "state.json");
	if (st->cgroups && strv_len(st->cgroups) > CG_MAX_DIRS)
		return cerr_set(e, EINVAL, "state.json: too many cgroups");
	st->monitor_pid = (pid_t)mpid;
	st->container_pid = (pid_t)cpid;
	st->started = true;
	return 0;
}

int runexit_parse(const char *buf, size_t len, struct unit_runtime_state *st,
		  struct cerr *e)
{
	cleanup_json json_t *o = json_parse_object(buf, len, e);
	int64_t code = 0, sig = 0;

	if (!o)
		return cerr_prefix(e, "exit.json");
	if (jget_int(o, "", "exitCode", 0, 255, &code, NULL, e) < 0 ||
	    jget_int(o, "", "signal", 0, 64, &sig, NULL, e) < 0 ||
	    jget_bool(o, "", "oomKilled", &st->oom_killed, e) < 0 ||
	    jget_str(o, "", "reason", STR_MAX, &st->reason, e) < 0 ||
	    need(st->reason, "reason", e) < 0 ||
	    jget_str(o, "", "message", STR_MAX, &st->message, e) < 0 ||
	    jget_int(o, "", "finishedAtNs", 0, INT64_MAX, &st->finished_at_ns,
		     NULL, e) < 0)
		return cerr_prefix(e, "exit.json");
	/* A start failure has no state.json: exit.json carries startedAt. */
	if (!st->started && jget_int(o, "", "startedAtNs", 0, INT64_MAX,
				     &st->started_at_ns, NULL, e) < 0)
		return cerr_prefix(e, "exit.json");
	st->exit_code = (int)code;
	st->signal = (int)sig;
	st->exited = true;
	return 0;
}

static char *dump(json_t *o)
{
	char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);

	json_decref(o);
	if (!s)
		abort();
	return s;
}

static void set_time(json_t *o, const char *key, int64_t ns)
{
	char t[40], k[64];

	snprintf(k, sizeof(k), "%sNs", key);
	json_object_set_new(o, k, json_integer(ns));
	if (ns) {
		/* For people reading the file; parsers use the Ns field. */
		crilog_format_time(ns, t);
		json_object_set_new(o, key, json_string(t));
	}
}

char *runstate_to_json(const struct unit_runtime_state *st)
{
	json_t *o = json_object();

	json_object_set_new(o, "monitorPid", json_integer(st->monitor_pid));
	json_object_set_new(o, "monitorStart",
			    json_integer((json_int_t)st->monitor_start));
	json_object_set_new(o, "containerPid", json_integer(st->container_pid));
	json_object_set_new(o, "containerStart",
			    json_integer((json_int_t)st->container_start));
	set_time(o, "startedAt", st->started_at_ns);
	json_object_set_new(o, "cgroups", jstrv_new(st->cgroups));
	return dump(o);
}

char *runexit_to_json(const struct unit_runtime_state *st)
{
	json_t *o = json_object();

	json_object_set_new(o, "exitCode", json_integer(st->exit_code));
	json_object_set_new(o, "signal", json_integer(st->signal));
	json_object_set_new(o, "oomKilled", json_boolean(st->oom_killed));
	set_str(o, "reason", st->reason);
	set_str(o, "message", st->message);
	set_time(o, "startedAt", st->started_at_ns);
	set_time(o, "finishedAt", st->finished_at_ns);
	return dump(o);
}

char *runtime_status_json(const struct unit_runtime_state *st, bool alive)
{
	json_t *o = json_object();

	json_object_set_new(o, "started", json_boolean(st->started));
	json_object_set_new(o, "running", json_boolean(alive && !st->exited));
	json_object_set_new(o, "exited", json_boolean(st->exited));
	json_object_set_new(o, "monitorPid", json_integer(st->monitor_pid));
	json_object_set_new(o, "containerPid", json_integer(st->container_pid));
	json_object_set_new(o, "cgroups", jstrv_new(st->cgroups));
	json_object_set_new(o, "monitorLost", json_boolean(st->monitor_lost));
	if (st->exited) {
		json_object_set_new(o, "exitCode", json_integer(st->exit_code));
		json_object_set_new(o, "signal", json_integer(st->signal));
		json_object_set_new(o, "oomKilled",
				    json_boolean(st->oom_killed));
		set_str(o, "reason", st->reason);
		set_str(o, "message", st->message);
	}
	set_time(o, "startedAt", st->started_at_ns);
	set_time(o, "finishedAt", st->finished_at_ns);
	return dump(o);
}

void runtime_state_free(struct unit_runtime_state *st)
{
	if (!st)
		return;
	strv_free(st->cgroups);
	free(st->reason);
	free(st->message);
	memset(st, 0, sizeof(*st));
}
