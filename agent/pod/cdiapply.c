// SPDX-License-Identifier: Apache-2.0
/* Which CDI devices a unit gets, and their edits turned into its run.json.
 *
 * Requests: a pod whose spec.resources.gpu is not empty gets every device
 * of kind nvidia.com/gpu ("nvidia.com/gpu=all") in every unit, as Itzo gave
 * every unit of a GPU pod the GPUs (pkg/host/nvidia.go); the annotations
 * cdi.k8s.io/<name> (the Kubernetes prefix) and pod.elotl.co/cdi-<name>
 * (what Kip forwards) add named devices, a comma-separated list of
 * vendor.com/class=name each.
 *
 * Edits, in the order the runtime applies them: device nodes (type and
 * numbers from the host's node when the spec leaves them out; a node that
 * is nowhere is an error, not a unit without its device), mounts (bind
 * only, read-only unless the spec says rw), environment (the unit's own
 * wins), extra groups, and createContainer/startContainer hooks. Anything
 * else is refused with a reason rather than half applied. */
#include "cdiapply.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cdi.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "procspawn.h"
#include "buf.h"
#include "util.h"

#define GPU_ALL "nvidia.com/gpu=all"
#define GPU_KIND "nvidia.com/gpu"

static void push(char ***v, size_t *n, const char *s)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i], s))
			return;
	*v = xrealloc(*v, (*n + 2) * sizeof(char *));
	(*v)[(*n)++] = xstrdup(s);
	(*v)[*n] = NULL;
}

/* ---- which kinds a pod's annotations may ask for ---- */

/* Set once at start (cdi_set_annotation_kinds), read by the supervisor. */
static char **ann_kinds;
static bool ann_kinds_set;

int cdi_set_annotation_kinds(const char *list, struct cerr *e)
{
	char **v = NULL;
	size_t n = 0;
	cleanup_free char *copy = xstrdup(list ? list : CDI_ANN_KINDS_DEFAULT);
	char *save = NULL;

	for (char *t = strtok_r(copy, ", \t", &save); t;
	     t = strtok_r(NULL, ", \t", &save)) {
		cleanup_free char *q = xasprintf("%s=x", t);
		char kind[256], name[256];

		if (cdi_parse_name(q, kind, sizeof(kind), name, sizeof(name),
				   e) < 0 ||
		    strcmp(kind, t)) {
			strv_free(v);
			return cerr_set(e, EINVAL,
					"--cdi-annotation-kinds: %s is not a "
					"CDI kind (vendor.com/class)",
					t);
		}
		push(&v, &n, t);
	}
	strv_free(ann_kinds);
	ann_kinds = v;
	ann_kinds_set = true;
	return 0;
}

static bool kind_allowed(const char *kind)
{
	if (!ann_kinds_set)
		return !strcmp(kind, CDI_ANN_KINDS_DEFAULT);
	for (size_t i = 0; ann_kinds && ann_kinds[i]; i++)
		if (!strcmp(ann_kinds[i], kind))
			return true;
	return false;
}

/* A request of a kind the agent does not give to annotations becomes a
 * refusal that cdi_apply reports (cdi_requests has no error to return,
 * and the unit must not start without what it asked for). A qualified
 * name never starts with CDI_REFUSED. */
static void push_request(char ***v, size_t *n, const char *key, const char *req)
{
	char kind[256], name[256];
	struct cerr e = {0};
	cleanup_free char *why = NULL;

	if (cdi_parse_name(req, kind, sizeof(kind), name, sizeof(name), &e) <
		0 ||
	    kind_allowed(kind)) {
		push(v, n, req); /* a bad name: cdi_resolve says so */
		return;
	}
	why = xasprintf(CDI_REFUSED "annotation %s asks for %s: kind %s is "
				    "not one pod annotations may ask for "
				    "(--cdi-annotation-kinds)",
			key, req, kind);
	push(v, n, why);
}

static void push_list(char ***v, size_t *n, const char *key, const char *list)
{
	cleanup_free char *copy = xstrdup(list);
	char *save = NULL;

	for (char *t = strtok_r(copy, ", \t", &save); t;
	     t = strtok_r(NULL, ", \t", &save))
		push_request(v, n, key, t);
}

char **cdi_requests(const char *gpu, const struct kv *ann, size_t n_ann)
{
	char **v = NULL;
	size_t n = 0;

	/* The pod's own GPUs (spec.resources.gpu, Kip's GPU pods) are the
	 * agent's decision, not an annotation's: never gated. */
	if (gpu && *gpu)
		push(&v, &n, GPU_ALL);
	for (size_t i = 0; i < n_ann; i++) {
		const char *k = ann[i].name;

		if (!ann[i].value || (!str_has_prefix(k, CDI_ANN_PREFIX) &&
				      !str_has_prefix(k, CDI_ANN_ELOTL)))
			continue;
		push_list(&v, &n, k, ann[i].value);
	}
	return v;
}

/* ---- device nodes ---- */

static int fill_from_host(const struct cdi_node *in, struct run_device *d,
			  struct cerr *e)
{
	const char *host =
	    in->host_path && *in->host_path ? in->host_path : in->path;
	struct stat st;
	bool need = !in->type || !in->has_major || !in->has_minor;

	d->type = in->type;
	d->major = (uint32_t)in->major;
	d->minor = (uint32_t)in->minor;
	d->mode = in->has_mode ? in->mode & 07777 : 0666;
	if (stat(host, &st) < 0) {
		if (need)
			return cerr_sys(e, "CDI device node %s", host);
		return 0;
	}
	if (!S_ISCHR(st.st_mode) && !S_ISBLK(st.st_mode))
		return cerr_set(e, EINVAL, "CDI device node %s: not a device",
				host);
	if (!in->type)
		d->type = S_ISBLK(st.st_mode) ? 'b' : 'c';
	if (!in->has_major)
		d->major = major(st.st_rdev);
	if (!in->has_minor)
		d->minor = minor(st.st_rdev);
	if (!in->has_mode)
		d->mode = st.st_mode & 07777;
	return 0;
}

static int add_node(const struct cdi_node *in, struct run_config *rc,
		    struct cerr *e)
{
	struct run_device d = {0};
	const char *p = in->permissions;

	for (size_t i = 0; i < rc->n_devices; i++)
		if (!strcmp(rc->devices[i].path, in->path))
			return 0; /* two devices share it (nvidiactl) */
	if (in->type == 'p')
		return cerr_set(e, ENOTSUP,
				"CDI device node %s: a FIFO is "
				"not supported",
				in->path);
	if (rc->n_devices >= RUN_MAX_DEVICES)
		return cerr_set(e, E2BIG, "more than %d CDI device nodes",
				RUN_MAX_DEVICES);
	if (fill_from_host(in, &d, e) < 0)
		return -1;
	if (d.type != 'c' && d.type != 'b')
		return cerr_set(e, EINVAL, "CDI device node %s: bad type",
				in->path);
	snprintf(d.access, sizeof(d.access), "%s",
		 !p || !*p	      ? "rwm"
		 : !strcmp(p, "none") ? ""
				      : p);
	d.uid = in->has_uid ? in->uid : 0;
	d.gid = in->has_gid ? in->gid : 0;
	d.path = xstrdup(in->path);
	if (in->host_path && *in->host_path)
		d.host_path = xstrdup(in->host_path);
	rc->devices =
	    xrealloc(rc->devices, (rc->n_devices + 1) * sizeof(*rc->devices));
	rc->devices[rc->n_devices++] = d;
	return 0;
}

/* ---- mounts ---- */

static bool has_opt(char *const *opts, const char *o)
{
	for (size_t i = 0; opts && opts[i]; i++)
		if (!strcmp(opts[i], o))
			return true;
	return false;
}

static int add_mount(const struct cdi_mount *m, struct run_config *rc,
		     struct cerr *e)
{
	bool bind = !m->type || !*m->type || !strcmp(m->type, "bind") ||
		    !strcmp(m->type, "none") || has_opt(m->options, "bind") ||
		    has_opt(m->options, "rbind");
	struct run_mount *r;
	struct stat st;

	if (!bind)
		return cerr_set(e, ENOTSUP,
				"CDI mount %s: type %s is not "
				"supported (bind mounts only)",
				m->container_path, m->type);
	if (stat(m->host_path, &st) < 0)
		return cerr_sys(e, "CDI mount %s", m->host_path);
	if (rc->n_mounts >= RUN_MAX_MOUNTS)
		return cerr_set(e, E2BIG, "more than %d mounts",
				RUN_MAX_MOUNTS);
	rc->mounts = xrealloc(rc->mounts, (rc->n_mounts + 1) * sizeof(*r));
	r = &rc->mounts[rc->n_mounts++];
	memset(r, 0, sizeof(*r));
	r->source = xstrdup(m->host_path);
	r->target = xstrdup(m->container_path);
	r->type = xstrdup("bind");
	/* Read-only unless the spec says rw: a driver library is not the
	 * unit's to change. */
	r->flags = MS_BIND | (has_opt(m->options, "rbind") ? MS_REC : 0) |
		   (has_opt(m->options, "rw") ? 0 : MS_RDONLY) |
		   (has_opt(m->options, "nosuid") ? MS_NOSUID : 0) |
		   (has_opt(m->options, "nodev") ? MS_NODEV : 0) |
		   (has_opt(m->options, "noexec") ? MS_NOEXEC : 0);
	return 0;
}

/* ---- env, groups, hooks ---- */

static bool env_has(char *const *env, const char *entry)
{
	size_t k = strcspn(entry, "=");

	for (size_t i = 0; env && env[i]; i++)
		if (!strncmp(env[i], entry, k) && env[i][k] == '=')
			return true;
	return false;
}

static void add_env(char *const *cdi_env, struct run_config *rc)
{
	size_t n = strv_len(rc->env);

	for (size_t i = 0; cdi_env && cdi_env[i]; i++) {
		if (env_has(rc->env, cdi_env[i]))
			continue; /* the unit's own wins */
		rc->env = xrealloc(rc->env, (n + 2) * sizeof(char *));
		rc->env[n++] = xstrdup(cdi_env[i]);
		rc->env[n] = NULL;
	}
}

static void add_gids(const uint32_t *g, size_t n, struct run_config *rc)
{
	for (size_t i = 0; i < n; i++) {
		bool have = false;

		for (size_t j = 0; j < rc->n_groups && !have; j++)
			have = rc->groups[j] == g[i];
		if (have || rc->n_groups >= RUN_MAX_GROUPS)
			continue;
		rc->groups = xrealloc(rc->groups,
				      (rc->n_groups + 1) * sizeof(*rc->groups));
		rc->groups[rc->n_groups++] = g[i];
	}
}

static int add_hook(const struct cdi_hook *h, struct run_config *rc,
		    struct cerr *e)
{
	struct run_hook r = {0};

	if (!strcmp(h->name, "createContainer"))
		r.kind = HOOK_CREATE_CONTAINER;
	else if (!strcmp(h->name, "startContainer"))
		r.kind = HOOK_START_CONTAINER;
	else
		return cerr_set(e, ENOTSUP,
				"CDI hook %s (%s): only "
				"createContainer and "
				"startContainer hooks are "
				"supported",
				h->name, h->path);
	if (rc->n_hooks >= RUN_MAX_HOOKS)
		return cerr_set(e, E2BIG, "more than %d CDI hooks",
				RUN_MAX_HOOKS);
	r.path = xstrdup(h->path);
	r.args = strv_dup(h->args);
	r.env = strv_dup(h->env);
	r.timeout_s = h->timeout <= 0			  ? RUN_HOOK_TIMEOUT_S
		      : h->timeout > RUN_HOOK_TIMEOUT_MAX ? RUN_HOOK_TIMEOUT_MAX
							  : h->timeout;
	rc->hooks = xrealloc(rc->hooks, (rc->n_hooks + 1) * sizeof(r));
	rc->hooks[rc->n_hooks++] = r;
	return 0;
}

int cdi_apply_edits(const struct cdi_edits *x, struct run_config *rc,
		    struct cerr *e)
{
	for (size_t i = 0; i < x->n_nodes; i++)
		if (add_node(&x->nodes[i], rc, e) < 0)
			return -1;
	for (size_t i = 0; i < x->n_mounts; i++)
		if (add_mount(&x->mounts[i], rc, e) < 0)
			return -1;
	for (size_t i = 0; i < x->n_hooks; i++)
		if (add_hook(&x->hooks[i], rc, e) < 0)
			return -1;
	add_env(x->env, rc);
	add_gids(x->gids, x->n_gids, rc);
	return 0;
}

/* ---- nvidia-ctk: a spec for the host's driver, once ---- */

static bool tried_generate;

/* The host has an NVIDIA driver but no spec names its GPUs: have
 * nvidia-ctk write one, once per agent (it takes seconds and its answer
 * does not change until the driver does). NULL, or what is missing. */
static char *maybe_generate(const struct cdi_opts *o,
			    const struct cdi_registry *r)
{
	const char *ctl = o->nvidia_ctl ? o->nvidia_ctl : "/dev/nvidiactl";
	const char *out = o->generate_output ? o->generate_output
					     : "/var/run/cdi/nvidia.yaml";
	cleanup_free char *ctk = NULL, *out_arg = NULL, *dir = NULL;
	struct buf log;
	struct cerr e = {0};
	int code;

	if (!fs_exists(ctl) || cdi_registry_has_kind(r, GPU_KIND))
		return NULL;
	ctk = spawn_find_program(o->nvidia_ctk ? o->nvidia_ctk : "nvidia-ctk");
	if (!ctk) {
		log_warn("%s exists but no CDI spec names %s and nvidia-ctk is "
			 "not installed: install nvidia-container-toolkit "
			 "(docs/image-build.md) to give GPU pods their GPUs",
			 ctl, GPU_KIND);
		return xasprintf("%s exists but nvidia-ctk is not installed "
				 "to write a CDI spec for it",
				 ctl);
	}
	if (tried_generate)
		return xasprintf("%s cdi generate made no spec for %s", ctk,
				 GPU_KIND);
	tried_generate = true;
	dir = xstrdup(out);
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	if (fs_mkdir_p(dir, 0755, &e) < 0)
		log_warn("%s", e.msg);
	out_arg = xasprintf("--output=%s", out);
	char cdi[] = "cdi", gen[] = "generate";
	char *argv[] = {ctk, cdi, gen, out_arg, NULL};
	buf_init(&log, 64 * 1024);
	code = spawn_run(argv, &log, 120, &e);
	log_info("%s exists and no CDI spec names %s: ran %s cdi generate "
		 "%s: exit %d%s%s",
		 ctl, GPU_KIND, ctk, out_arg, code, code < 0 ? ": " : "",
		 code < 0 ? e.msg : "");
	if (log.len)
		log_info("nvidia-ctk: %.*s",
			 (int)(log.len > 2000 ? 2000 : log.len), log.data);
	buf_free(&log);
	if (code != 0)
		return xasprintf("%s cdi generate failed (exit %d)", ctk, code);
	return NULL;
}

void cdi_reset_generate(void)
{
	tried_generate = false;
}

/* "<message>; <more>", within the message's room. */
static void append(struct cerr *e, const char *more)
{
	size_t n = strnlen(e->msg, sizeof(e->msg));

	snprintf(e->msg + n, sizeof(e->msg) - n, "; %s", more);
}

static void log_spec_errors(const struct cdi_registry *r)
{
	for (size_t i = 0; i < r->n_errors; i++)
		log_warn("CDI spec %s", r->errors[i]);
}

int cdi_apply(const struct cdi_opts *o, char *const *requests,
	      struct run_config *rc, struct cerr *e)
{
	struct cdi_registry r;
	struct cdi_edits x;
	cleanup_free char *missing = NULL;
	int rc_ = 0;

	if (!requests || !requests[0])
		return 0;
	for (size_t i = 0; requests[i]; i++)
		if (str_has_prefix(requests[i], CDI_REFUSED))
			return cerr_set(e, EPERM, "CDIDeviceRefused: %s",
					requests[i] + strlen(CDI_REFUSED));
	cdi_registry_load(o->dirs, &r);
	for (size_t i = 0; requests[i]; i++)
		if (str_has_prefix(requests[i], GPU_KIND "=")) {
			missing = maybe_generate(o, &r);
			if (!missing && !cdi_registry_has_kind(&r, GPU_KIND)) {
				cdi_registry_free(&r);
				cdi_registry_load(o->dirs, &r);
			}
			break;
		}
	log_spec_errors(&r);
	if (cdi_resolve(&r, requests, &x, e) < 0) {
		if (!str_has_prefix(e->msg, "CDI"))
			cerr_prefix(e, "CDI");
		/* Say why the device may be missing: a spec that did not
		 * parse, or the tool that would have written one. */
		if (missing)
			append(e, missing);
		for (size_t i = 0; i < r.n_errors && i < 3; i++)
			append(e, r.errors[i]);
		cdi_registry_free(&r);
		return -1;
	}
	rc_ = cdi_apply_edits(&x, rc, e);
	if (rc_ < 0 && !str_has_prefix(e->msg, "CDI"))
		cerr_prefix(e, "CDI");
	cdi_edits_free(&x);
	cdi_registry_free(&r);
	return rc_;
}
