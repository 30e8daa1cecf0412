// SPDX-License-Identifier: Apache-2.0
/* What the agent's state no longer names goes: unit directories, their
 * overlay mounts and their cgroups. An agent killed (-9, a crash, the
 * instance's OOM killer) between two steps of removing a unit leaves these
 * behind, and nothing else would ever remove them; so at start-up the
 * agent sweeps everything below <state>/units and the pod's cgroups that no
 * record names. Nothing a live unit owns is touched: a run directory that
 * a running process names (its monitor, an exec, a pull) stays, and a
 * removed unit whose monitor still runs gets a record, marked removed,
 * that the supervisor adopts and stops the normal way. Also here: the
 * pod's cgroup directories, removed in each hierarchy once the pod has no
 * unit left. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "log.h"
#include "runtime.h"
#include "sup-internal.h"
#include "util.h"

#define CMDLINE_MAX (256u << 10)

static void add_arg(char ***v, size_t *n, const char *a, size_t len)
{
	*v = xrealloc(*v, (*n + 2) * sizeof(char *));
	(*v)[(*n)++] = xstrndup(a, len);
	(*v)[*n] = NULL;
}

/* Every argument of every process that names units or something below it (the
 * monitors' run directories, cell-pull's --mount target, exec helpers). */
static char **live_args(const char *units)
{
	cleanup_dir DIR *d = opendir("/proc");
	struct dirent *de;
	char **v = xcalloc(1, sizeof(char *));
	size_t n = 0, ul = strlen(units);

	while (d && (de = readdir(d))) {
		cleanup_free char *p = NULL;
		struct buf b;
		struct cerr e = {0};

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		p = xasprintf("/proc/%s/cmdline", de->d_name);
		buf_init(&b, CMDLINE_MAX);
		if (fs_read_file(p, &b, &e) < 0)
			b.len = 0; /* gone meanwhile, or a kernel thread */
		for (size_t off = 0, al; off < b.len; off += al + 1) {
			const char *a = b.data + off;
			al = strnlen(a, b.len - off);
			if (al >= ul && !strncmp(a, units, ul) &&
			    (al == ul || a[ul] == '/'))
				add_arg(&v, &n, a, al);
		}
		buf_free(&b);
	}
	return v;
}

/* Does a running process name dir, or something below it? */
static bool in_use(char *const *args, const char *dir)
{
	size_t dl = strlen(dir);

	for (; *args; args++)
		if (!strncmp(*args, dir, dl) &&
		    ((*args)[dl] == '\0' || (*args)[dl] == '/'))
			return true;
	return false;
}

void run_dir_remove(const char *run)
{
	struct cerr e = {0};
	char **mps;

	/* Kills what is left in the cgroups of a dead monitor; a live one's
	 * run is never handed here. */
	if (runtime_cleanup(run, &e) < 0)
		log_warn("clean up %s: %s", run, e.msg);
	mps = fs_mounts_beneath(run);
	for (size_t i = 0; mps && mps[i]; i++)
		if (umount2(mps[i], MNT_DETACH) < 0 && errno != EINVAL)
			log_warn("unmount %s: %m", mps[i]);
	strv_free(mps);
	if (fs_rm_rf(run, &e) < 0)
		log_warn("remove %s: %s", run, e.msg);
}

bool run_dir_in_use(const char *run)
{
	char **args = live_args(run);
	bool used = args[0] != NULL;

	strv_free(args);
	return used;
}

/* Does the run's own record say its monitor lives (or is starting)? Asked
 * as well as the command lines: a state directory spelled differently by
 * a later agent must not make a live run look abandoned. */
static bool monitor_lives(const char *run)
{
	struct unit_runtime_state st;
	struct cerr e = {0};
	bool alive;

	if (runtime_read_state(run, &st, &e) < 0)
		return e.code == EAGAIN;
	alive = !st.exited && runtime_monitor_alive(&st);
	runtime_state_free(&st);
	return alive;
}

/* A run directory's number, or -1 for anything else in a unit's. */
static int run_seq(const char *n)
{
	int64_t v;

	return parse_int64(n, 1, 1000000000, &v, NULL) == 0 ? (int)v : -1;
}

/* The cgroup leaf of a live run: <unit name>-<seq>, as unit.c names it. */
static void keep_cgroup(char ***keep, const char *name, const char *seq)
{
	size_t n = strv_len(*keep);

	*keep = xrealloc(*keep, (n + 2) * sizeof(char *));
	(*keep)[n] = xasprintf("%s-%s", name, seq);
	(*keep)[n + 1] = NULL;
}

/* Run directories of dir other than keep_a and keep_b (0: none) go, unless
 * in use; the runs in use are noted in keep. Returns how many are in use. */
static int sweep_runs(const char *dir, const char *name, int keep_a, int keep_b,
		      char *const *args, char ***keep)
{
	cleanup_dir DIR *d = opendir(dir);
	struct dirent *de;
	int live = 0;

	while (d && (de = readdir(d))) {
		cleanup_free char *run = NULL;
		int seq;

		if ((seq = run_seq(de->d_name)) < 0)
			continue;
		run = xasprintf("%s/%s", dir, de->d_name);
		if (in_use(args, run) || monitor_lives(run)) {
			keep_cgroup(keep, name, de->d_name);
			live++;
		} else if (seq != keep_a && seq != keep_b) {
			log_info("removing %s: no record names it", run);
			run_dir_remove(run);
		}
	}
	return live;
}

/* A unit no longer in the spec whose monitor still runs (the agent died
 * while stopping it): a record, marked removed, so that the supervisor
 * adopts and stops it and it goes the normal way. */
static void adopt_removed(struct supervisor *s, const char *dir,
			  const char *name, bool is_init)
{
	struct unit_rec *u;
	struct cerr e = {0};

	s->units = xrealloc(s->units, (s->n_units + 1) * sizeof(*u));
	u = &s->units[s->n_units];
	memset(u, 0, sizeof(*u));
	u->name = xstrdup(name);
	u->is_init = is_init;
	u->dir = xstrdup(dir);
	u->fingerprint = xstrdup("");
	u->image = xstrdup("");
	u->pidfd = -1;
	u->started = -1;
	if (record_load(u, &e) < 0) {
		log_warn("unit directory %s: %s; left alone", dir, e.msg);
		unit_rec_free(u);
		return;
	}
	s->n_units++;
	u->removed = true;
	log_info("unit %s: no longer in the spec and still running; stopping "
		 "it",
		 name);
}

static const struct unit_rec *rec_of_dir(const struct supervisor *s,
					 const char *dir)
{
	for (size_t i = 0; i < s->n_units; i++)
		if (s->units[i].dir && !strcmp(s->units[i].dir, dir))
			return &s->units[i];
	return NULL;
}

/* A unit directory no record names. */
static void sweep_orphan(struct supervisor *s, const char *dir,
			 char *const *args, char ***keep)
{
	cleanup_free char *path = xasprintf("%s/unit.json", dir);
	cleanup_json json_t *j = NULL;
	cleanup_free char *name = NULL;
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 1u << 20);
	if (fs_read_file(path, &b, &e) == 0)
		j = json_parse_object(b.data, b.len, &e);
	buf_free(&b);
	name = j ? jstrdup(j, "name") : NULL;
	if (!name)
		name = xstrdup(strrchr(dir, '/') + 1);
	if (sweep_runs(dir, name, 0, 0, args, keep) > 0) {
		if (j)
			adopt_removed(s, dir, name,
				      json_is_true(json_object_get(j, "init")));
		return;
	}
	log_info("removing %s: no record names it", dir);
	run_dir_remove(dir);
}

/* Each hierarchy's cell/<tag>/ child not in keep: its processes killed,
 * then removed. keep NULL: only empty directories go (the pod's own, and
 * cell/ when no other pod uses it). */
static void sweep_cgroups(const struct supervisor *s, char *const *keep)
{
	struct cg_layout l;
	struct cerr e = {0};

	if (cg_detect_env(&l, &e) < 0)
		return;
	for (size_t i = 0; i < l.n; i++) {
		cleanup_free char *cell = xasprintf("%s/cell", l.h[i].base);
		cleanup_free char *pod =
		    xasprintf("%s/%s", cell, s->cgroup_tag);
		cleanup_dir DIR *d = keep ? opendir(pod) : NULL;
		struct dirent *de;

		while (d && (de = readdir(d))) {
			struct cgroup cg;
			char *dirs[2] = {NULL, NULL};

			if (de->d_type != DT_DIR || de->d_name[0] == '.')
				continue;
			for (size_t k = 0; keep[k]; k++)
				if (!strcmp(keep[k], de->d_name))
					goto next;
			dirs[0] = xasprintf("%s/%s", pod, de->d_name);
			log_info("removing cgroup %s: no live unit owns it",
				 dirs[0]);
			cg_from_dirs(&cg, dirs);
			free(dirs[0]);
			if (cg_kill_all(&cg, &e) < 0 || cg_destroy(&cg, &e) < 0)
				log_warn("cgroup: %s", e.msg);
			cg_free(&cg);
		next:;
		}
		/* Fails while anything is left in them, as it should. */
		if (rmdir(pod) == 0)
			rmdir(cell);
	}
	cg_layout_free(&l);
}

void sweep_at_start(struct supervisor *s)
{
	cleanup_free char *units = xasprintf("%s/units", s->o.state_dir);
	cleanup_dir DIR *d = opendir(units);
	char **args = live_args(units);
	char **keep = xcalloc(1, sizeof(char *));
	struct dirent *de;

	while (d && (de = readdir(d))) {
		cleanup_free char *dir = NULL;
		const struct unit_rec *u;

		if (de->d_name[0] == '.' || de->d_type != DT_DIR)
			continue;
		dir = xasprintf("%s/%s", units, de->d_name);
		u = rec_of_dir(s, dir);
		if (u)
			sweep_runs(dir, u->name, u->seq, u->seq - 1, args,
				   &keep);
		else
			sweep_orphan(s, dir, args, &keep);
	}
	sweep_cgroups(s, keep);
	strv_free(keep);
	strv_free(args);
	s->pod_cgroup_live = false;
}

void sweep_pod_cgroup(struct supervisor *s)
{
	for (size_t i = 0; i < s->n_units; i++)
		if (s->units[i].phase == PH_RUNNING ||
		    s->units[i].phase == PH_STOPPING) {
			s->pod_cgroup_live = true;
			return;
		}
	if (s->pod_cgroup_live)
		sweep_cgroups(s, NULL);
	s->pod_cgroup_live = false;
}
