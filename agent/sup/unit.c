// SPDX-License-Identifier: Apache-2.0
/* One run of a unit: pull its image into a fresh rootfs, work out the run
 * recipe (argv, env, user, capabilities, mounts), hand it to cell-monitor,
 * and later turn what the monitor recorded into Kubernetes status and a
 * restart decision. Each run has its own directory <unit>/<seq>/ so a
 * restart never reuses a rootfs or a log; the previous run's directory
 * stays for `logs?previous`. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cdiapply.h"
#include "cgprime.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "metrics.h"
#include "podrun.h"
#include "imagecache.h"
#include "podsec.h"
#include "pullproc.h"
#include "runtime.h"
#include "seccomp-policy.h"
#include "sup-internal.h"
#include "sysctl.h"
#include "util.h"
#include "volumes.h"

#define LOG_MAX_BYTES (10ll << 20)
#define LOG_MAX_FILES 5
#define TERM_MSG_MAX 4096
#define FALLBACK_LINES 80

/* The back-off's "second". CELL_AGENT_BACKOFF_UNIT_MS (a test seam)
 * shrinks the kubelet's seconds to that many milliseconds each. */
static uint64_t backoff_unit_ns(void)
{
	const char *v = getenv("CELL_AGENT_BACKOFF_UNIT_MS");
	int64_t unit_ms = 1000;

	if (v)
		parse_int64(v, 1, 1000, &unit_ms, NULL);
	return (uint64_t)unit_ms * 1000000ull;
}

static void set_waiting(struct unit_rec *u, const char *reason, bool failure)
{
	unit_state_clear(&u->state);
	u->state.kind = STATE_WAITING;
	u->state.reason = xstrdup(reason);
	u->state.start_failure = failure;
}

/* Remove a run's directory, unmounting its rootfs first. */
void unit_drop_run(const struct unit_rec *u, int seq)
{
	cleanup_free char *run = unit_run_dir(u, seq);

	if (seq <= 0 || !fs_exists(run))
		return;
	run_dir_remove(run);
}

static const struct credential *creds_for(const struct pod_spec *pod,
					  const char *image)
{
	cleanup_free char *host = pull_registry_of(image, NULL);

	for (size_t i = 0; host && i < pod->n_credentials; i++)
		if (pull_same_registry(pod->credentials[i].host, host))
			return &pod->credentials[i];
	return NULL;
}

static bool flat_rootfs(const struct pod_spec *pod)
{
	for (size_t i = 0; i < pod->n_annotations; i++)
		if (!strcmp(pod->annotations[i].name,
			    "pod.elotl.co/image-overlay-rootfs"))
			return pod->annotations[i].value &&
			       !strcmp(pod->annotations[i].value, "false");
	return false;
}

/* The annotation pod.elotl.co/lazy-pull: "false" (or "off", "no", "0")
 * turns lazy pulling off for the pod; anything else leaves the agent's
 * --lazy-pull. */
bool unit_lazy_pull(const struct supervisor *s, const struct pod_spec *pod)
{
	static const char *const no[] = {"false", "off", "no", "0"};

	if (s->o.lazy_pull_off)
		return false;
	for (size_t i = 0; i < pod->n_annotations; i++) {
		const char *v = pod->annotations[i].value;

		if (strcmp(pod->annotations[i].name, "pod.elotl.co/lazy-pull"))
			continue;
		for (size_t j = 0; v && j < sizeof(no) / sizeof(*no); j++)
			if (!strcasecmp(v, no[j]))
				return false;
	}
	return true;
}

/* The lazy words of a pull child's argv at argv[n] (--lazy off, or
 * nothing: cell-pull's default serves eStargz layers lazily); the new n. */
size_t unit_pull_lazy_argv(const struct supervisor *s,
			   const struct pod_spec *pod, const char **argv,
			   size_t n)
{
	if (!unit_lazy_pull(s, pod)) {
		argv[n++] = "--lazy";
		argv[n++] = "off";
	}
	return n;
}

/* Start cell-pull for the unit's image; the supervisor's loop watches it
 * (unit_pull_event). Credentials go in on its stdin. */
/* imagePullPolicy Always: cell-pull itself, which resolves the tag in the
 * registry, not its cache front (cell-pull-cached serves a cached tag
 * without asking). NULL when the puller is not the front. */
static char *registry_puller(const char *bin)
{
	const char *slash = strrchr(bin, '/');
	const char *base = slash ? slash + 1 : bin;

	if (strcmp(base, "cell-pull-cached"))
		return NULL;
	return xasprintf("%.*scell-pull", (int)(base - bin), bin);
}

static int pull_start(struct supervisor *s, struct unit_rec *u, const char *run,
		      struct cerr *e)
{
	const struct credential *c = creds_for(&s->spec, u->spec->image);
	cleanup_free char *root = xasprintf("%s/rootfs", run);
	cleanup_free char *upper = xasprintf("%s/overlay", run);
	cleanup_free char *config = xasprintf("%s/image-config.json", run);
	/* Twenty-two: each fixed option below at most once and the NULL;
	 * then a pair per insecure registry. */
	size_t n = 0, cap = 22 + 2 * strv_len(s->insecure);
	cleanup_free const char **argv = xcalloc(cap, sizeof(*argv));
	char keep_free[24];
	int credfd = -1, rc;
	struct epoll_event ev = {.events = EPOLLIN};
	cleanup_free char *always_bin = registry_puller(s->o.pull_bin);

	argv[n++] = u->spec->pull_policy == PULL_ALWAYS && always_bin
			? always_bin
			: s->o.pull_bin;
	argv[n++] = "--image";
	argv[n++] = u->spec->image;
	argv[n++] = "--workdir";
	argv[n++] = s->o.image_cache;
	argv[n++] = flat_rootfs(&s->spec) ? "--extract-to" : "--mount";
	argv[n++] = root;
	if (!flat_rootfs(&s->spec)) {
		argv[n++] = "--upper-dir";
		argv[n++] = upper;
	}
	argv[n++] = "--save-config";
	argv[n++] = config;
	argv[n++] = "--progress";
	argv[n++] = "json";
	n = unit_pull_lazy_argv(s, &s->spec, argv, n);
	if (s->o.pull_keep_free_mib > 0) {
		snprintf(keep_free, sizeof(keep_free), "%lld",
			 (long long)s->o.pull_keep_free_mib);
		argv[n++] = "--keep-free-mib";
		argv[n++] = keep_free;
	}
	if (imagecache_dir()) {
		argv[n++] = "--shared-cache";
		argv[n++] = imagecache_dir();
	}
	for (size_t i = 0; s->insecure && s->insecure[i]; i++) {
		argv[n++] = "--insecure-registry";
		argv[n++] = s->insecure[i];
	}
	if (c) {
		credfd = pullproc_creds(c->username, c->password, e);
		if (credfd < 0)
			return -1;
		argv[n++] = "--credentials-fd";
		argv[n++] = "0";
	}
	argv[n] = NULL;
	assert(n < cap);
	u->pull = xcalloc(1, sizeof(*u->pull));
	rc = s->ops->pull_spawn((char *const *)argv, credfd, u->pull, e);
	if (credfd >= 0)
		close(credfd);
	if (rc < 0) {
		free(u->pull);
		u->pull = NULL;
		return -1;
	}
	/* By fd, as unit_watch: the record array moves. A pull the loop
	 * does not watch would never end the unit's wait: stop it. */
	ev.data.fd = u->pull->pidfd;
	rc = epoll_ctl(s->epfd, EPOLL_CTL_ADD, u->pull->pidfd, &ev);
	ev.data.fd = u->pull->outfd;
	if (rc == 0)
		rc = epoll_ctl(s->epfd, EPOLL_CTL_ADD, u->pull->outfd, &ev);
	if (rc < 0) {
		cerr_sys(e, "watch the pull of %s", u->spec->image);
		unit_pull_cancel(s, u);
		return -1;
	}
	return 0;
}

/* Stop watching the unit's pull; kill it when it still runs. */
void unit_pull_cancel(struct supervisor *s, struct unit_rec *u)
{
	if (!u->pull)
		return;
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, u->pull->pidfd, NULL);
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, u->pull->outfd, NULL);
	s->unwatched = true;
	pullproc_kill(u->pull);
	free(u->pull);
	u->pull = NULL;
	unit_drop_run(u, u->seq + 1); /* its half-made rootfs */
}

static int read_image_config(const char *run, struct image_config *ic,
			     struct cerr *e)
{
	cleanup_free char *path = xasprintf("%s/image-config.json", run);
	struct buf b;
	int rc;

	buf_init(&b, 8u << 20);
	rc = fs_read_file(path, &b, e);
	if (rc == 0)
		rc = image_config_parse(b.data ? b.data : "", b.len, ic, e);
	buf_free(&b);
	return rc < 0 ? cerr_prefix(e, "image config") : 0;
}

/* What the container writes at terminationMessagePath lands here. */
static char *termination_file(const char *run, struct cerr *e)
{
	char *p = xasprintf("%s/termination-log", run);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);

	if (fd < 0 || fchmod(fd, 0666) < 0) {
		cerr_sys(e, "create %s", p);
		if (fd >= 0)
			close(fd);
		free(p);
		return NULL;
	}
	close(fd);
	return p;
}

static void add_bind(struct run_config *rc, char *src, char *sub,
		     const char *dst, bool ro)
{
	struct run_mount *m;

	rc->mounts = xrealloc(rc->mounts, (rc->n_mounts + 1) * sizeof(*m));
	m = &rc->mounts[rc->n_mounts++];
	memset(m, 0, sizeof(*m));
	m->source = src;
	m->sub_path = sub;
	m->target = xstrdup(dst);
	m->type = xstrdup("bind");
	m->flags = MS_BIND | MS_REC | (ro ? MS_RDONLY : 0);
}

static int add_mounts(struct supervisor *s, struct unit_rec *u, const char *run,
		      struct run_config *rc, struct cerr *e)
{
	struct vol_dirs d = {.packages_dir = s->o.packages_dir};
	cleanup_free char *vols = xasprintf("%s/volumes", s->o.state_dir);
	struct unit_mounts m;
	const char *tpath = u->spec->termination_message_path;
	char *tfile;

	d.volumes_dir = vols;
	/* First, so that a volume the unit mounts at /dev/shm still wins. */
	if (podns_shm(s, &tfile, e) < 0)
		return -1;
	if (tfile)
		add_bind(rc, tfile, NULL, "/dev/shm", false);
	if (vol_fsgroup_packages(&s->spec, u->spec, s->vol_sources,
				 &s->fsgroup_seen, e) < 0 ||
	    vol_unit_mounts(&s->spec, u->spec, s->vol_sources, &d, &m, e) < 0)
		return -1;
	for (size_t i = 0; i < m.n; i++) {
		add_bind(rc, m.v[i].source, m.v[i].sub_path, m.v[i].target,
			 m.v[i].read_only);
		m.v[i].source = NULL;
		m.v[i].sub_path = NULL;
	}
	vol_unit_mounts_free(&m);
	if (tpath && tpath[0] == '/') {
		tfile = termination_file(run, e);
		if (!tfile)
			return -1;
		add_bind(rc, tfile, NULL, tpath, false);
	}
	return 0;
}

/* The pod's sysctls for this run: every one must be namespaced and land in
 * a namespace of the pod's own; one that cannot is refused, and the unit
 * does not start (the kubelet's SysctlForbidden), rather than run without
 * it or touch the host. */
static int add_sysctls(const struct pod_spec *pod, struct run_config *rc,
		       struct cerr *e)
{
	size_t n = pod->n_sysctls;

	if (!n)
		return 0;
	rc->sysctl_names = xcalloc(n + 1, sizeof(char *));
	rc->sysctl_values = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		const struct kv *s = &pod->sysctls[i];

		/* kernel.shm*, msg*, sem: only in an IPC namespace of the
		 * pod's (its own or the pod's shared one), never the cell's. */
		if (sysctl_check(s->name, s->value, pod->ns_ipc != NS_NODE,
				 rc->netns_path != NULL, e) < 0)
			return cerr_prefix(e, "SysctlForbidden");
		rc->sysctl_names[i] = xstrdup(s->name);
		rc->sysctl_values[i] = xstrdup(s->value);
	}
	return 0;
}

/* The pod's CDI devices (a GPU pod's nvidia.com/gpu=all, annotations),
 * the same in every unit; remembered for the status. */
static int add_devices(struct supervisor *s, struct unit_rec *u,
		       struct run_config *rc, struct cerr *e)
{
	struct cdi_opts o = {.dirs = s->o.cdi_spec_dirs,
			     .nvidia_ctl = getenv("CELL_NVIDIACTL"),
			     .nvidia_ctk = getenv("CELL_NVIDIA_CTK"),
			     .generate_output =
				 getenv("CELL_CDI_GENERATE_OUTPUT")};
	char **req = cdi_requests(s->spec.gpu, s->spec.annotations,
				  s->spec.n_annotations);
	int r = cdi_apply(&o, req, rc, e);

	strv_free(u->devices);
	u->devices = r == 0 ? req : NULL;
	if (r < 0)
		strv_free(req);
	return r;
}

static char *hostname_of(const struct pod_spec *pod)
{
	const char *h = pod->hostname && *pod->hostname ? pod->hostname
			: pod->pod_hostname && *pod->pod_hostname
			    ? pod->pod_hostname
			    : NULL;
	const char *us;

	if (h)
		return xstrndup(h, 63);
	/* "<namespace>_<name>" → "<name>" */
	us = pod->pod_name ? strchr(pod->pod_name, '_') : NULL;
	return xstrndup(us		? us + 1
			: pod->pod_name ? pod->pod_name
					: "cell",
			63);
}

/* Everything the monitor needs, from the spec and the image. */
static int build_config(struct supervisor *s, struct unit_rec *u,
			const char *run, const struct image_config *img,
			struct run_config *rc, struct cerr *e)
{
	cleanup_close int rootfd = -1;
	struct podrun_user who;
	struct podrun_env_defaults env_def = {0};
	const struct unit_spec *us = u->spec;

	memset(rc, 0, sizeof(*rc));
	rc->id = xasprintf("%s-%d", u->name, u->seq + 1);
	rc->rootfs = xasprintf("%s/rootfs", run);
	rootfd = open(rc->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return cerr_sys(e, "open %s", rc->rootfs);
	rc->hostname = hostname_of(&s->spec);
	if (podrun_user(us, &s->spec, img, rootfd, &who, e) < 0)
		return -1;
	env_def.hostname = rc->hostname;
	env_def.home = who.home;
	env_def.tty = us->tty;
	if (!(rc->env = podrun_env(us, &s->spec, img, &env_def, e)) ||
	    !(rc->argv = podrun_argv(us, img, e)) ||
	    !(rc->caps = podrun_caps(us, e))) {
		podrun_user_free(&who);
		return -1;
	}
	if (vol_image_dirs(rootfd, img->volumes, who.uid, who.gid, e) < 0) {
		podrun_user_free(&who);
		return -1;
	}
	rc->uid = who.uid;
	rc->gid = who.gid;
	rc->groups = (uint32_t *)who.groups;
	rc->n_groups = who.n_groups;
	who.groups = NULL;
	podrun_user_free(&who);
	rc->no_new_privs = rc->uid != 0;
	if (podsec_apply(us, &s->spec, rc, e) < 0)
		return -1;
	if (seccomp_policy_for(&us->seccomp, &s->spec.seccomp, rc->caps,
			       &rc->seccomp_bpf, &rc->seccomp_len, e) < 0)
		return -1;
	/* stdin: true: a FIFO an interactive attach writes into; else the
	 * workload reads /dev/null (EOF), as under the kubelet. */
	rc->open_stdin = us->stdin_open;
	rc->cwd =
	    xstrdup(us->working_dir && *us->working_dir	    ? us->working_dir
		    : img->working_dir && *img->working_dir ? img->working_dir
							    : "/");
	rc->cgroup_path =
	    xasprintf("cell/%s/%s-%d", s->cgroup_tag, u->name, u->seq + 1);
	rc->log_path = xasprintf("%s/log", run);
	rc->log_max_bytes =
	    s->o.log_max_bytes > 0 ? s->o.log_max_bytes : LOG_MAX_BYTES;
	rc->log_max_files =
	    s->o.log_max_files >= 2 ? s->o.log_max_files : LOG_MAX_FILES;
	if (s->o.containers_log_dir)
		rc->log_link =
		    crilog_link_name(s->o.containers_log_dir, s->spec.pod_name,
				     u->name, rc->cgroup_path);
	rc->grace_seconds = s->spec.termination_grace_s;
	{
		int sig;

		if (podrun_stop_signal(img->stop_signal, &sig, e) < 0)
			return -1;
		rc->stop_signal = sig;
	}
	rc->tty = us->tty; /* an extension: Kip never sends tty */
	/* The unit's own limits only: spec.resources is what Kip sized the
	 * instance by (requests included), not a limit for any unit. */
	rc->memory_limit = us->memory_limit;
	rc->pod_memory_limit = s->pod_memory_cap;
	rc->cpu_quota = us->cpu_millis;
	if (podnet_netns(s)) /* before the sysctls: net.* need it */
		rc->netns_path = xstrdup(podnet_netns(s));
	if (podns_paths(s, &rc->pid_ns_path, &rc->ipc_ns_path, e) < 0)
		return -1;
	if (add_sysctls(&s->spec, rc, e) < 0 ||
	    add_mounts(s, u, run, rc, e) < 0)
		return -1;
	return add_devices(s, u, rc, e);
}

/* run.json for the monitor, which reads it at once: replaced, not synced
 * (a reboot ends the run it describes). */
static int write_config(const char *run, const struct run_config *rc,
			struct cerr *e)
{
	cleanup_free char *text = runconfig_to_json(rc);
	cleanup_free char *p = xasprintf("%s/run.json", run);

	return fs_replace(p, text, strlen(text), 0600, e);
}

void unit_watch(struct supervisor *s, struct unit_rec *u, int pidfd)
{
	/* By fd, not by pointer: the record array moves when specs change. */
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = pidfd};

	u->pidfd = pidfd;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, pidfd, &ev) < 0)
		log_error("epoll add for %s: %m", u->name);
}

/* Probes count from now: a unit that starts running, and one re-adopted
 * after an agent restart, waits out its initial delays again (as after a
 * kubelet restart) and is ready only once its readiness probe says so. */
static void unit_probes_restart(struct supervisor *s, struct unit_rec *u)
{
	struct probe_outcome out;

	if (!u->spec)
		return;
	probes_init(&u->probes, u->spec, s->ops->now());
	probes_outcome(&u->probes, u->spec, &out);
	u->started = out.started;
	u->ready = out.ready;
}

static void set_running(struct supervisor *s, struct unit_rec *u,
			int64_t started_at)
{
	unit_state_clear(&u->state);
	u->state.kind = STATE_RUNNING;
	u->state.started_at_ns = started_at;
	u->phase = PH_RUNNING;
	u->started = 1;
	u->ready = true;
	unit_probes_restart(s, u);
}

/* Start the unit's due probes on the runner's threads; their results
 * come back through unit_probe_done. */
void unit_probe(struct supervisor *s, struct unit_rec *u)
{
	cleanup_free char *run = NULL, *pod_ip = NULL;
	struct probe_ctx c = {.monitor_bin = s->o.monitor_bin};
	enum probe_which w[3];
	size_t n;

	if (u->phase != PH_RUNNING || !u->spec || u->post_start_pending)
		return;
	n = probes_take_due(&u->probes, u->spec, s->ops->now(), w);
	if (!n)
		return;
	run = unit_run_dir(u, u->seq);
	pod_ip = podnet_netns(s) ? podnet_pod_ip(s) : NULL;
	c.unit_dir = run;
	c.default_host = pod_ip; /* in its own namespace: the pod IP */
	for (size_t i = 0; i < n; i++) {
		struct probe_job *j =
		    probe_job_new(u->name, u->is_init, u->seq, w[i],
				  probe_of(u->spec, w[i]), &c);

		j->run_token = u->probes.started_at_ns;
		s->ops->probe_start(&s->probes, j);
	}
}

/* What a hook's end asks for (lifecycle.c decides, this file acts). */
void unit_hook_follow(struct supervisor *s, struct unit_rec *u,
		      struct hook_step step)
{
	switch (step.next) {
	case HOOK_STARTED:
		unit_probes_restart(s, u);
		break;
	case HOOK_KILL:
		unit_stop(s, u, step.grace_s);
		break;
	case HOOK_SIGNAL:
		unit_send_stop(s, u, step.grace_s);
		break;
	case HOOK_NOTHING:
		break;
	}
}

void unit_probe_done(struct supervisor *s, struct unit_rec *u,
		     const struct probe_job *j)
{
	struct probe_outcome out;

	if (j->which == PROBE_POST_START || j->which == PROBE_PRE_STOP) {
		unit_hook_follow(s, u, hook_done(s, u, j));
		return;
	}
	/* A record made again (a pod restart) counts runs from 1 again:
	 * the token tells this run from an older one with the same number. */
	if (u->phase != PH_RUNNING || !u->spec || j->seq != u->seq ||
	    j->run_token != u->probes.started_at_ns)
		return; /* that run is over */
	probes_result(&u->probes, u->spec, j->which, j->result, j->why,
		      s->ops->now());
	probes_outcome(&u->probes, u->spec, &out);
	u->started = out.started;
	u->ready = out.ready;
	if (out.kill) /* the plan stops it */
		log_warn("unit %s: %s; stopping it", u->name, out.why);
}

/* After the monitor confirmed the exec: watch it. */
static int watch_run(struct supervisor *s, struct unit_rec *u, const char *run,
		     struct cerr *e)
{
	struct unit_runtime_state st = {0};
	int pidfd;

	if (runtime_read_state(run, &st, e) < 0)
		return -1;
	pidfd = runtime_pidfd(&st, e);
	set_running(s, u, st.started_at_ns ? st.started_at_ns : wall_ns());
	runtime_state_free(&st);
	u->kill_reason = NULL;
	hook_post_start(s, u, run);
	if (pidfd < 0) /* it already ended: the exit is processed now */
		return 1;
	unit_watch(s, u, pidfd);
	return 0;
}

/* After the pull: the recipe, then cell-monitor. */
static int configure_and_start(struct supervisor *s, struct unit_rec *u,
			       const char *run, struct cerr *e)
{
	struct image_config ic = {0};
	struct run_config rc;
	int ret;
	pid_t pid;

	if (read_image_config(run, &ic, e) < 0)
		return -1;
	ret = build_config(s, u, run, &ic, &rc, e);
	if (ret == 0)
		ret = write_config(run, &rc, e);
	runconfig_free(&rc);
	image_config_free(&ic);
	if (ret < 0)
		return -1;
	pid = s->ops->runtime_start(s->o.monitor_bin, run, e);
	cgprime_done();
	return pid;
}

/* The cell's own disk, not the unit, is at fault: full or read-only.
 * (Not EIO: the monitor's client reports other start failures so.) */
static bool storage_trouble(int code)
{
	return code == ENOSPC || code == EDQUOT || code == EROFS;
}

static void start_failed(struct supervisor *s, struct unit_rec *u, bool pulled,
			 const struct cerr *e)
{
	struct cerr ignore = {0};

	log_warn("unit %s: %s", u->name, e->msg);
	if (str_has_prefix(e->msg, "CDI")) {
		/* A device the cell does not have, or a spec that cannot be
		 * applied (yet: specs and drivers may come later): wait with
		 * the reason, never start without it. */
		set_waiting(u, e->msg, false);
		u->not_before_ns =
		    s->ops->now() +
		    plan_backoff_ns(++u->backoff_n, backoff_unit_ns());
	} else if (!pulled || storage_trouble(e->code)) {
		/* Image trouble is often passing, and so is a full state
		 * filesystem: wait and retry, never a startFailure (Kip
		 * fails the pod on one). */
		cleanup_free char *why = xasprintf(
		    "%s: %s", pulled ? "CreateContainerError" : "ErrImagePull",
		    e->msg);
		set_waiting(u, why, false);
		u->not_before_ns =
		    s->ops->now() +
		    plan_backoff_ns(++u->backoff_n, backoff_unit_ns());
	} else {
		set_waiting(u, e->msg, true);
		u->phase = PH_FAILED;
	}
	unit_drop_run(u, u->seq + 1);
	record_save(u, &ignore);
}

/* The image is in place (run/rootfs, run/image-config.json): start the
 * run and watch it. */
static void start_pulled(struct supervisor *s, struct unit_rec *u,
			 const char *run)
{
	struct cerr e = {0};
	int r;

	/* The run is recorded before its monitor starts: an agent killed
	 * between the two finds it at restore (unit_adopt_starting), rather
	 * than a live run that no record names. */
	u->starting = u->seq + 1;
	u->stop_later = false;
	free(u->net);
	u->net = podnet_key(&s->spec);
	free(u->podns);
	u->podns = podns_key(&s->spec);
	record_save(u, &e);
	/* Its cgroups go below the pod's: swept once nothing runs, even when
	 * it ends (or fails to start) before the loop sees it running. */
	s->pod_cgroup_live = true;
	if (configure_and_start(s, u, run, &e) < 0) {
		u->starting = 0;
		start_failed(s, u, true, &e);
		return;
	}
	u->starting = 0;
	if (u->seq > 0)
		u->restart_count++;
	u->seq++;
	lazyfail_run_started(s, u);
	r = watch_run(s, u, run, &e);
	record_save(u, &e);
	if (r > 0)
		unit_exited(s, u);
}

/* A cached image mounted here and now: no child to exec for the common
 * start and restart, which is most of a start's time otherwise. Never
 * waits: a gc holding the cache makes it a miss. Anything but a clean hit
 * goes to the puller child, which reports what fails. */
static bool from_cache(struct supervisor *s, struct unit_rec *u,
		       const char *run)
{
	/* Never the shared cache here: a hard NFS mount whose server stops
	 * answering hangs whoever touches it, and this is the supervisor's
	 * thread. An image with shared layers goes to the child
	 * (cell-pull-cached serves it in a few milliseconds). */
	cleanup_free char *root = xasprintf("%s/rootfs", run);
	cleanup_free char *upper = xasprintf("%s/overlay", run);
	cleanup_free char *config = xasprintf("%s/image-config.json", run);
	struct pull_cached_opts o = {.image = u->spec->image,
				     .workdir = s->o.image_cache,
				     .mount_at = root,
				     .upper_dir = upper,
				     .save_config = config,
				     .no_wait = true};
	struct cerr e = {0}, ignore = {0};

	if (flat_rootfs(&s->spec) || u->spec->pull_policy == PULL_ALWAYS)
		return false; /* Always: the puller resolves the tag again */
	o.any_tag = u->spec->pull_policy == PULL_IF_NOT_PRESENT ||
		    u->spec->pull_policy == PULL_NEVER;
	switch (s->ops->pull_cached(&o, &e)) {
	case 1:
		metrics_cache_hit(u->spec->image, "local");
		return true;
	case -1: /* the config may be saved: the child starts afresh */
		log_warn("unit %s: %s; asking the puller", u->name, e.msg);
		unit_drop_run(u, u->seq + 1);
		fs_mkdir_p(run, 0700, &ignore);
		break;
	}
	return false;
}

/* imagePullPolicy Never and the image is not in the cache: the kubelet's
 * ErrImageNeverPull, waiting (not a startFailure) and tried again after a
 * back-off, as for any image trouble. */
static void never_pull(struct supervisor *s, struct unit_rec *u)
{
	cleanup_free char *why = xasprintf(
	    "ErrImageNeverPull: Container image \"%s\" is not present with "
	    "pull policy of Never",
	    u->spec->image);
	struct cerr ignore = {0};

	log_warn("unit %s: %s", u->name, why);
	set_waiting(u, why, false);
	u->not_before_ns =
	    s->ops->now() + plan_backoff_ns(++u->backoff_n, backoff_unit_ns());
	unit_drop_run(u, u->seq + 1);
	record_save(u, &ignore);
}

/* The next run begins with its image: mounted from the cache at once, or
 * pulled by a child the supervisor's loop watches (unit_pull_event carries
 * on when it ends). */
int unit_start(struct supervisor *s, struct unit_rec *u)
{
	cleanup_free char *run = unit_run_dir(u, u->seq + 1);
	struct cerr e = {0};

	cgprime_kick();
	unit_drop_run(u, u->seq - 1); /* keep only the previous run */
	unit_drop_run(u, u->seq + 1); /* a start that never got going */
	if (fs_rm_rf(run, &e) < 0 || fs_mkdir_p(run, 0700, &e) < 0) {
		start_failed(s, u, false, &e);
		return -1;
	}
	if (from_cache(s, u, run)) {
		start_pulled(s, u, run);
		return 0;
	}
	if (u->spec->pull_policy == PULL_NEVER) {
		never_pull(s, u);
		return -1;
	}
	if (pull_start(s, u, run, &e) < 0) {
		start_failed(s, u, false, &e);
		return -1;
	}
	return 0;
}

/* What the puller warned of (the shared cache's stale tag used while the
 * registry was down): in the agent's log, and in the running unit's
 * status as its message, which Kip shows with the pod. */
static void pull_warning(struct unit_rec *u, const char *warning)
{
	struct cerr e = {0};

	if (!warning)
		return;
	log_warn("unit %s: %s", u->name, warning);
	if (u->state.kind != STATE_RUNNING)
		return;
	free(u->state.message);
	u->state.message = xstrdup(warning);
	record_save(u, &e);
}

/* An event on one of the unit's pull's descriptors (fd). */
void unit_pull_event(struct supervisor *s, struct unit_rec *u, int fd)
{
	cleanup_free char *run = unit_run_dir(u, u->seq + 1);
	cleanup_free char *warning = NULL;
	struct cerr e = {0};
	uint64_t bytes, took;
	int r;

	if (fd == u->pull->outfd) {
		pullproc_drain(u->pull);
		return;
	}
	if (!u->spec) { /* removed meanwhile */
		unit_pull_cancel(s, u);
		unit_drop_run(u, u->seq + 1);
		return;
	}
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, u->pull->pidfd, NULL);
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, u->pull->outfd, NULL);
	s->unwatched = true; /* closed below; the start may reuse the fds */
	pullproc_drain(u->pull);
	warning = u->pull->warning ? xstrdup(u->pull->warning) : NULL;
	took = now_ns() - u->pull->started_ns;
	r = pullproc_finish(u->pull, &e);
	bytes = u->pull->bytes; /* its last lines read by the finish */
	metrics_pull(u->spec->image, took, bytes, r == 0);
	free(u->pull);
	u->pull = NULL;
	if (r < 0) {
		cerr_prefix(&e, "pull %s", u->spec ? u->spec->image : "");
		start_failed(s, u, false, &e);
		return;
	}
	start_pulled(s, u, run);
	pull_warning(u, warning);
}

/* The termination message: what the unit wrote to its
 * terminationMessagePath, else (FallbackToLogsOnError, on failure) the tail
 * of its log. */
static char *termination_message(const struct unit_rec *u, const char *run,
				 int exit_code)
{
	cleanup_free char *p = xasprintf("%s/termination-log", run);
	cleanup_free char *logp = xasprintf("%s/log", run);
	struct crilog_tail_opts t = {.lines = FALLBACK_LINES,
				     .bytes = TERM_MSG_MAX,
				     .format = CRILOG_PLAIN};
	struct buf b;
	struct cerr e = {0};
	const char *policy =
	    u->spec ? u->spec->termination_message_policy : NULL;

	buf_init(&b, TERM_MSG_MAX);
	/* The container writes this file: read it only as a regular file. */
	if (fs_read_regular_file(p, &b, &e) < 0 && e.code == EFBIG)
		b.len = TERM_MSG_MAX; /* keep the first 4 KiB */
	if (b.len == 0 && exit_code != 0 && policy &&
	    !strcmp(policy, "FallbackToLogsOnError")) {
		buf_free(&b);
		buf_init(&b, TERM_MSG_MAX * 2);
		crilog_tail(logp, &t, &b, &e);
	}
	if (b.len == 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

static void set_terminated(struct supervisor *s, struct unit_rec *u,
			   const char *run, const struct unit_runtime_state *st)
{
	unit_state_clear(&u->state);
	u->state.kind = STATE_TERMINATED;
	u->state.exit_code = st->exit_code;
	u->state.reason = xstrdup(st->reason	  ? st->reason
				  : st->exit_code ? "Error"
						  : "Completed");
	u->state.message = st->message
			       ? xstrdup(st->message)
			       : termination_message(u, run, st->exit_code);
	if (u->kill_reason) { /* the agent killed it, and says why */
		free(u->state.reason);
		free(u->state.message);
		u->state.reason = xstrdup(u->kill_reason);
		u->state.message = xstrdup(u->kill_message);
		u->kill_reason = NULL;
	} else if (!u->state.message) {
		/* Its lazy layers failed its reads: likely why it ended. */
		u->state.message = lazyfail_exit_message(s, u);
	}
	hook_run_over(u);
	u->state.started_at_ns = st->started_at_ns;
	u->state.finished_at_ns =
	    st->finished_at_ns ? st->finished_at_ns : wall_ns();
	u->ready = false;
}

/* After an exit: restart (now or after a back-off), or stay terminated,
 * as plan_exit decides. */
static void after_exit(struct supervisor *s, struct unit_rec *u)
{
	const struct unit_state *t = &u->state;
	struct plan_exit_in in = {
	    .policy = s->spec.restart_policy,
	    .is_init = u->is_init,
	    .going = u->removed || s->pod_restarting || s->pod_failed,
	    .restart_after_stop = u->restart_after_stop,
	    .exit_code = t->exit_code,
	    .ran_ns = (uint64_t)(t->finished_at_ns - t->started_at_ns),
	    .backoff_n = u->backoff_n,
	    .now_ns = s->ops->now(),
	    .backoff_unit_ns = backoff_unit_ns()};
	struct plan_exit_out out;

	plan_exit(&in, &out);
	u->backoff_n = out.backoff_n;
	u->restart_after_stop = false;
	switch (out.kind) {
	case EXIT_STAY:
		u->phase = PH_EXITED;
		return;
	case EXIT_RESTART_NOW:
		unit_state_copy(&u->last_state, &u->state);
		u->not_before_ns = 0;
		u->phase = PH_WAITING;
		return;
	case EXIT_BACKOFF:
		u->not_before_ns = out.not_before_ns;
		unit_state_copy(&u->last_state, &u->state);
		set_waiting(u, "CrashLoopBackOff", false);
		u->phase = PH_WAITING;
		return;
	}
}

/* A wake-up for a monitor that still runs is not an exit: ending the
 * run would start another beside it and orphan this one. Watched again
 * (a fresh pidfd) when it can be; true then. */
static bool still_running(struct supervisor *s, struct unit_rec *u,
			  const char *run)
{
	struct unit_runtime_state st = {0};
	struct cerr e = {0};
	int pidfd = -1;

	if (runtime_read_state(run, &st, &e) == 0 && !st.exited &&
	    runtime_monitor_alive(&st))
		pidfd = runtime_pidfd(&st, &e);
	runtime_state_free(&st);
	if (pidfd < 0)
		return false;
	log_warn("unit %s: woken for run %d, whose monitor still runs", u->name,
		 u->seq);
	unit_watch(s, u, pidfd);
	return true;
}

void unit_exited(struct supervisor *s, struct unit_rec *u)
{
	cleanup_free char *run = unit_run_dir(u, u->seq);
	struct unit_runtime_state st = {0};
	struct cerr e = {0};

	if (u->pidfd >= 0) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, u->pidfd, NULL);
		close(u->pidfd);
		u->pidfd = -1;
		s->unwatched = true;
	}
	if (still_running(s, u, run))
		return;
	if (runtime_read_state(run, &st, &e) < 0 || !st.exited) {
		st.exited = true;
		st.exit_code = 137;
		free(st.reason);
		st.reason = xstrdup("Error");
		st.finished_at_ns = wall_ns();
		log_warn("unit %s: no exit record (%s)", u->name, e.msg);
	}
	runtime_cleanup(run, &e);
	if (st.oom_killed || (st.reason && !strcmp(st.reason, "OOMKilled")))
		metrics_oom(u->name);
	set_terminated(s, u, run, &st);
	runtime_state_free(&st);
	after_exit(s, u);
	record_save(u, &e);
}

void unit_send_stop(struct supervisor *s, struct unit_rec *u, int64_t grace)
{
	cleanup_free char *run = unit_run_dir(u, u->seq);
	struct cerr e = {0};

	int r = s->ops->runtime_stop(run, (int)grace, &e);

	/* A run adopted after an agent restart whose monitor is still
	 * setting up (no state.json yet) has nothing to signal: it is told
	 * once unit_adopt finds it, with what is left of the grace; else it
	 * would run on, "stopping" for good. */
	u->stop_later = r < 0 && u->pidfd < 0;
	if (u->stop_later) {
		log_info("unit %s: stopped once its monitor is up (%s)",
			 u->name, e.msg);
		u->stop_grace_s = grace;
		u->stop_begin_ns = s->ops->now();
	} else if (r < 0)
		log_warn("stop %s: %s", u->name, e.msg);
	u->phase = PH_STOPPING;
}

/* The stop unit_send_stop could not deliver, now that the monitor is up. */
static void send_late_stop(struct supervisor *s, struct unit_rec *u)
{
	uint64_t spent = s->ops->now() - u->stop_begin_ns;
	int64_t left = u->stop_grace_s - (int64_t)(spent / 1000000000u);

	unit_send_stop(s, u, left < 0 ? 0 : left);
}

void unit_stop(struct supervisor *s, struct unit_rec *u, int64_t grace)
{
	cleanup_free char *run = NULL;

	unit_pull_cancel(s, u);
	if (u->phase != PH_RUNNING || u->pre_stop_pending)
		return; /* a preStop under way: its end sends the signal */
	run = unit_run_dir(u, u->seq);
	if (hook_pre_stop(s, u, run, grace))
		return; /* the signal follows the hook (unit_hook_follow) */
	unit_send_stop(s, u, grace);
}

/* After an agent restart, when the record says a run was being started:
 * a run whose monitor got going (or is still setting up) becomes the
 * unit's current run, as if the agent had lived to record it. */
void unit_adopt_starting(struct supervisor *s, struct unit_rec *u)
{
	cleanup_free char *run = NULL;
	struct unit_runtime_state st = {0};
	struct cerr e = {0};
	int n = u->starting;

	(void)s;
	u->starting = 0;
	if (n != u->seq + 1)
		return;
	run = unit_run_dir(u, n);
	if (runtime_read_state(run, &st, &e) < 0 && e.code != EAGAIN &&
	    !run_dir_in_use(run))
		return; /* never got going: unit_start removes the directory */
	runtime_state_free(&st);
	if (u->seq > 0)
		u->restart_count++;
	u->seq = n;
	u->phase = PH_RUNNING;
	log_info("unit %s: run %d was being started; adopting it", u->name, n);
	if (record_save(u, &e) < 0)
		log_warn("unit %s: %s", u->name, e.msg);
}

/* After an agent restart: find the unit's current run where the monitor
 * left it. */
void unit_adopt(struct supervisor *s, struct unit_rec *u)
{
	cleanup_free char *run = unit_run_dir(u, u->seq);
	struct unit_runtime_state st = {0};
	struct cerr e = {0};
	int pidfd;

	if (u->phase != PH_RUNNING && u->phase != PH_STOPPING)
		return;
	if (u->seq <= 0 || runtime_read_state(run, &st, &e) < 0) {
		/* A monitor just spawned has not taken its lock yet: its
		 * command line names the run. */
		if (e.code == EAGAIN ||
		    (u->seq > 0 && e.code == ENOENT && run_dir_in_use(run))) {
			/* A monitor still holds the run but has not written
			 * state.json yet: never start a second copy. The plan
			 * asks again shortly (PLAN_ADOPT_RETRY_NS); nothing
			 * here waits. */
			log_debug("unit %s: %s", u->name, e.msg);
			return;
		}
		u->phase = PH_WAITING; /* never got going: start afresh */
		return;
	}
	if (!st.exited && (pidfd = runtime_pidfd(&st, &e)) >= 0) {
		log_info("unit %s: re-adopted run %d (monitor %d)", u->name,
			 u->seq, (int)st.monitor_pid);
		unit_watch(s, u, pidfd);
		if (u->phase == PH_RUNNING && u->state.kind != STATE_RUNNING)
			set_running(s, u, /* a run unit_adopt_starting found */
				    st.started_at_ns ? st.started_at_ns
						     : wall_ns());
		else if (u->phase == PH_RUNNING)
			unit_probes_restart(s, u);
		else if (u->stop_later)
			send_late_stop(s, u);
		runtime_state_free(&st);
		return;
	}
	runtime_state_free(&st);
	unit_exited(s, u);
}
