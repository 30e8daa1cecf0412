// SPDX-License-Identifier: Apache-2.0
/* The supervisor's own state, shared by supervisor.c (the loop and the API
 * calls), unit.c (starting and finishing one run of a unit) and record.c
 * (what survives an agent restart). Everything here is owned by the
 * supervisor thread, except the fields under `mu` in struct supervisor. */
#ifndef CELL_SUP_INTERNAL_H
#define CELL_SUP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "podspec.h"
#include "plan.h"
#include "probe.h"
#include "probejob.h"
#include "pull.h"
#include "stats.h"
#include "supervisor.h"

struct unit_rec {
	char *name;
	bool is_init;
	const struct unit_spec *spec; /* in sup->spec; NULL when removed */
	char *fingerprint; /* of the spec its current run started with */
	char *net;	   /* podnet_key of the pod its current run joined */
	char *podns; /* podns_key of the spec its current run started in */
	char *image;
	enum unit_phase phase;
	int restart_count;
	int seq;		/* the run number: its directory's name */
	int starting;		/* > seq: that run's monitor is being started */
	uint64_t not_before_ns; /* monotonic: back-off until then */
	int backoff_n;		/* restarts in a row without a long run */
	bool removed;		/* drop the record once it has stopped */
	bool restart_after_stop; /* its spec changed: run again at once */
	bool ready;
	int started; /* -1 null, 0, 1 */
	int pidfd;
	struct pullproc *pull;	   /* its image pull, while one runs */
	struct unit_probes probes; /* this run's probes (when spec has any) */
	struct unit_state state, last_state;
	char *dir;	/* <state>/units/<name>, units/init.<name> for init */
	char **devices; /* the CDI devices of its current run, or NULL */
	/* Lifecycle hooks of the current run (lifecycle.c). */
	bool post_start_pending; /* not started nor ready until it ends */
	bool pre_stop_pending;	 /* the stop signal waits for it */
	bool stop_later; /* asked to stop while its monitor set up: once up */
	int64_t stop_grace_s;
	uint64_t stop_begin_ns;
	const char *kill_reason; /* the terminated reason, or NULL */
	char kill_message[200];
	/* lazyfail.c: the lazy layers under run lazy_seq's rootfs
	 * ("<algo>-<hex>", NULL: none), and their failed reads when that run
	 * began (0 for a run adopted after an agent restart). */
	char **lazy_layers;
	int lazy_seq;
	uint64_t lazy_base;
};

/* podnet.c: the pod's network namespace (netsetup/). */
struct podnet {
	bool ready;	  /* set up (or found) for the current spec */
	char *netns_path; /* what units join */
	char *key, *base; /* what it was set up for: with and without ports */
};

/* podimds.c: the metadata proxy child of a pod with an instance profile. */
struct podimds {
	pid_t pid; /* 0: not running */
	int pidfd;
	char *netns; /* the namespace it serves */
	uint64_t started_ns, not_before_ns, backoff_ns;
};

/* netagent.c: kube-router. */
struct netagent {
	pid_t pid; /* 0: not running */
	uint64_t start_time;
	int pidfd;
	uint64_t not_before_ns, started_ns;
	int backoff_n;
	char *why; /* why it is not running, logged once */
};

/* What the executor does through: the real table wraps the runtime, the
 * pull helper, the probe runner and the monotonic clock; a test can put
 * fakes here. */
struct pullproc;
struct sup_ops {
	uint64_t (*now)(void); /* monotonic ns */
	pid_t (*runtime_start)(const char *monitor_bin, const char *run,
			       struct cerr *e);
	int (*runtime_stop)(const char *run, int grace_s, struct cerr *e);
	int (*pull_spawn)(char *const argv[], int stdin_fd, struct pullproc *p,
			  struct cerr *e);
	/* The cache's answer, in process (pull_from_cache): 1 mounted, 0
	 * ask the puller child, -1 the mount failed (the child retries and
	 * reports). */
	int (*pull_cached)(const struct pull_cached_opts *o, struct cerr *e);
	/* Run one probe attempt off the supervisor thread; its result comes
	 * back through the runner's eventfd. */
	void (*probe_start)(struct probe_runner *r, struct probe_job *j);
};

extern const struct sup_ops sup_real_ops;

struct supervisor {
	struct sup_opts o;
	const struct sup_ops *ops;
	char **insecure;
	char cgroup_tag[17]; /* from the state dir: unit cgroups never clash */
	pthread_t th;
	int evfd, epfd;
	struct probe_runner probes; /* probe attempts on their own threads */
	uint64_t wake_ns;	    /* the last plan's next deadline */
	uint64_t busy_ns; /* the loop's last event; 0: heap trimmed since */
	/* Shared with the API threads, under mu. */
	pthread_mutex_t mu;
	pthread_mutex_t save_mu; /* API threads writing pod.json, in turn */
	char *pending;
	size_t pending_len;
	struct pod_spec *pending_spec; /* pending, parsed once (by the API) */
	char *status_text;
	/* The typed answers the API asks for, published with status_text:
	 * regular units first, then init units. */
	struct unit_view {
		char *name;
		char *log, *prev_log; /* the current and the previous run's */
		char *fingerprint;    /* of the spec it runs */
		bool is_init, running;
	} * views;
	size_t n_views;
	char *pod_ip_text;
	/* A spec queued and not yet taken (pending_spec above): status
	 * describes it already (pendstatus.c), from the supervisor's last
	 * snapshot (status_base) and the network and PID/IPC namespaces
	 * that snapshot's spec wanted (status_net). */
	char *status_base, *status_net;
	bool quit;
	/* Owned by the supervisor thread. */
	char *spec_body;
	struct pod_spec spec;
	bool has_spec;
	struct unit_rec *units; /* init units first, in order */
	size_t n_units;
	char **vol_sources;
	char **fsgroup_seen;	/* volumes.c's: package versions walked */
	char **warned;		/* the last spec's warnings, logged once */
	int64_t pod_memory_cap; /* bytes for all units together; 0 none */
	bool pod_failed;
	bool pod_restarting; /* initUnits changed: stop all, then start over */
	/* After an agent restart: the records (what runs) are still to be
	 * compared with the spec in force, once every run is adopted. */
	bool recheck;
	/* A watched descriptor was closed while the loop handled a batch of
	 * events: the rest of the batch may name its number, reused by a
	 * descriptor opened since (a pull's pidfd, then the unit's monitor
	 * pidfd). The loop drops the rest; epoll is level-triggered and
	 * reports what is still ready at the next wait. */
	bool unwatched;
	bool pod_cgroup_live; /* a unit ran since the pod's cgroups last went */
	uint64_t pod_seen_ns; /* activeDeadlineSeconds counts from here */
	bool deadline_hit;
	struct stats_state stats;
	struct podnet net;
	struct netagent na;
	struct podimds imds;
	pid_t podns_pid; /* the pod's PID/IPC namespace holder, or 0 */
	uint64_t podns_start;
	/* lazyfail.c: layers whose failures the log has had; the last look. */
	char **lazy_logged;
	uint64_t lazy_checked_ns;
};

/* unit.c */
/* Starts the run's image pull; unit_pull_event carries on. */
int unit_start(struct supervisor *s, struct unit_rec *u);
void unit_pull_event(struct supervisor *s, struct unit_rec *u, int fd);
void unit_pull_cancel(struct supervisor *s, struct unit_rec *u);
/* Lazy pulling for the pod: the agent's --lazy-pull and the pod's
 * pod.elotl.co/lazy-pull annotation; and the words it puts in a pull
 * child's argv at argv[n] (the new n; two at most). */
bool unit_lazy_pull(const struct supervisor *s, const struct pod_spec *pod);
size_t unit_pull_lazy_argv(const struct supervisor *s,
			   const struct pod_spec *pod, const char **argv,
			   size_t n);
void unit_exited(struct supervisor *s, struct unit_rec *u);
/* Stop the unit's run: SIGTERM, SIGKILL after grace seconds (the grace of
 * the spec that asked for the stop). */
void unit_stop(struct supervisor *s, struct unit_rec *u, int64_t grace);
/* Re-adopt a unit's current run after an agent restart. */
void unit_adopt(struct supervisor *s, struct unit_rec *u);
/* Before unit_adopt: make a run the record says was being started the
 * current one when its monitor got going. */
void unit_adopt_starting(struct supervisor *s, struct unit_rec *u);
/* Remove a run's directory (its rootfs unmounted first). */
void unit_drop_run(const struct unit_rec *u, int seq);
void unit_watch(struct supervisor *s, struct unit_rec *u, int pidfd);
/* Start the unit's due probes off this thread; a failed liveness or
 * startup probe makes the plan stop it (the restart policy then decides). */
void unit_probe(struct supervisor *s, struct unit_rec *u);
/* One probe attempt's result for u (dropped when its run is over). */
void unit_probe_done(struct supervisor *s, struct unit_rec *u,
		     const struct probe_job *j);

/* lifecycle.c: lifecycle hooks on the probe runner's threads. It decides;
 * unit.c carries out what a hook's end asks for (hook_done's step). */
#define HOOK_MIN_GRACE_S 2 /* the kubelet's minimumGracePeriodInSeconds */
enum hook_next {
	HOOK_NOTHING, /* that run or that stop is over: nothing follows */
	HOOK_STARTED, /* postStart succeeded: started, ready, probes begin */
	HOOK_KILL,    /* postStart failed (kill_reason set): stop the unit */
	HOOK_SIGNAL,  /* preStop ended: send the stop signal with grace_s */
};
struct hook_step {
	enum hook_next next;
	int64_t grace_s;
};
/* Right after a run (in directory run) started: start its postStart hook
 * (true when there is one; the unit is then neither started nor ready
 * until it ends). */
bool hook_post_start(struct supervisor *s, struct unit_rec *u, const char *run);
/* Before the stop signal: start the preStop hook with the grace period
 * as its bound, the grace counted from now (true when there is one: the
 * signal waits for it). */
bool hook_pre_stop(struct supervisor *s, struct unit_rec *u, const char *run,
		   int64_t grace);
/* A hook attempt's result, and what unit.c does next: postStart success
 * lets probes begin, failure kills the unit (FailedPostStartHook);
 * preStop's end (success, failure or cut at the grace) sends the signal
 * with what is left of the grace, HOOK_MIN_GRACE_S at least. Needs no
 * spec: a removed unit has none by then. */
struct hook_step hook_done(struct supervisor *s, struct unit_rec *u,
			   const struct probe_job *j);
/* The run ended: a hook still under way decides nothing any more. */
void hook_run_over(struct unit_rec *u);
/* The agent stops before a preStop hook's end: the signal goes now, with
 * what is left of the grace (HOOK_SIGNAL; nothing when none runs). */
struct hook_step hook_abandon(struct supervisor *s, struct unit_rec *u);
/* unit.c: carry out what hook_done or hook_abandon asked for. */
void unit_hook_follow(struct supervisor *s, struct unit_rec *u,
		      struct hook_step step);
void unit_send_stop(struct supervisor *s, struct unit_rec *u, int64_t grace);

/* lazyfail.c: a lazy layer's failed reads (its server's stats file) on
 * the status of the units whose rootfs has it below, as running.message,
 * and logged once per layer. */
void lazyfail_tick(struct supervisor *s);
/* A run just started: its layers, and their failures so far (not its). */
void lazyfail_run_started(const struct supervisor *s, struct unit_rec *u);
/* At the run's end: "lazy pull: <cause>" when its layers failed reads
 * during it, else NULL (caller frees). */
char *lazyfail_exit_message(struct supervisor *s, struct unit_rec *u);
/* The lazy layers (names) of the overlay mounted at mp, the last mount
 * there, from /proc/self/mountinfo's text (changed in place); pure. */
char **lazyfail_layers_parse(char *mountinfo, const char *mp);

/* deadline.c: past spec.activeDeadlineSeconds, stop every unit with the
 * reason DeadlineExceeded and fail the pod (once per tick). */
void deadline_tick(struct supervisor *s);

/* pendstatus.c */
/* The status text once next is in force, from the supervisor's snapshot
 * text and its views; restart: next restarts the pod (every unit waits). */
char *pending_status_json(const char *text, const struct pod_spec *next,
			  const struct unit_view *views, size_t n_views,
			  bool restart);

/* sweep.c */
/* After restore: remove unit directories, runs, mounts and cgroups no
 * record names and no live process uses; add a record (removed, not yet
 * adopted) for a unit no longer in the spec whose monitor still runs: the
 * caller adopts and stops it. */
void sweep_at_start(struct supervisor *s);
/* With no unit running or stopping: remove the pod's now empty cgroup
 * directory in each hierarchy (once per emptying). */
void sweep_pod_cgroup(struct supervisor *s);
/* Remove a run (or unit) directory: a dead monitor's cgroups, every mount
 * below it, then the tree. */
void run_dir_remove(const char *run);
/* Does a running process name something below run (a monitor about to
 * take its lock, an exec, a pull)? */
bool run_dir_in_use(const char *run);

/* podns.c: namespaceOptions.pid and .ipc (POD: one namespace for the
 * pod's units, held by `cell-monitor pod-init`; NODE: the cell's). */
void podns_restore(struct supervisor *s);
/* run.json's PID and IPC namespace paths for a unit of the spec in force
 * (NULL: one of its own); starts the holder when needed. */
int podns_paths(struct supervisor *s, char **pid_path, char **ipc_path,
		struct cerr *e);
bool podns_changed(const struct supervisor *s, const struct pod_spec *next);
/* The PID and IPC options a run starts with, as a string its record keeps
 * (caller frees); after a restart, does a record's differ from the spec in
 * force (a change saved and the agent killed before it restarted the pod)?
 * A record without one (an older agent's) is taken as current. */
char *podns_key(const struct pod_spec *p);
bool podns_differs(const struct supervisor *s, const char *run_key);
/* The /dev/shm a unit binds: the pod's tmpfs (ipc POD), the cell's (NODE),
 * or NULL for its own. */
int podns_shm(struct supervisor *s, char **out, struct cerr *e);
/* Ends the holder once no unit runs. */
void podns_tick(struct supervisor *s);

/* podnet.c */
/* After an agent restart: find the recorded network and keep it. */
void podnet_restore(struct supervisor *s);
/* What the pod's network depends on (pod IP, hostNetwork), as a string
 * that changes when the network must (caller frees). */
char *podnet_key(const struct pod_spec *p);
/* Does the network found at restore, or the one a record's run joined,
 * differ from what the spec in force wants? */
bool podnet_differs(const struct supervisor *s, const char *run_key);
/* Does next change the pod IP or hostNetwork (a pod restart)? */
bool podnet_changed(const struct supervisor *s, const struct pod_spec *next);
/* With every unit stopped: tear the network down unless the spec still
 * wants the same one. */
void podnet_release(struct supervisor *s);
/* Before units start: set up (or update hostPorts); false = not ready yet. */
bool podnet_ensure(struct supervisor *s);
/* The namespace units join, or NULL for the host's. */
const char *podnet_netns(const struct supervisor *s);
/* The pod IP when the units are in its namespace (probes dial it), else
 * NULL (caller frees). */
char *podnet_pod_ip(const struct supervisor *s);
void podnet_free(struct podnet *pn);

/* podimds.c: start, restart or stop the metadata proxy as the spec and
 * the pod network (its namespace, podnet_netns; NULL: none) say; stop it.
 * podnet.c calls these, never the other way round. */
void podimds_tick(struct supervisor *s, const char *netns);
void podimds_stop(struct supervisor *s);

/* netagent.c */
char **netagent_argv(const char *bin, const char *kubeconfig, const char *node,
		     const char *ip);
uint64_t netagent_unit_ms(void);
/* Start it when wanted and due; stop it when no longer wanted. */
void netagent_tick(struct supervisor *s);
void netagent_exited(struct supervisor *s);
void netagent_restore(struct supervisor *s);
uint64_t netagent_next_due(const struct supervisor *s);
void netagent_free(struct supervisor *s);

/* metrics-sup.c: what a metrics scrape needs, published after each pass
 * (agent/base/metrics.h). */
void metrics_sup_publish(struct supervisor *s);

/* record.c */
int record_save(const struct unit_rec *u, struct cerr *e);
/* Load u's record from u->dir; ENOENT when none, or when the one there is
 * another unit's (another name, or init where u is not). */
int record_load(struct unit_rec *u, struct cerr *e);
bool record_matches(const struct unit_rec *u, struct cerr *e);
void unit_state_clear(struct unit_state *st);
void unit_state_copy(struct unit_state *dst, const struct unit_state *src);
void unit_rec_free(struct unit_rec *u);
/* <unit dir>/<seq>: a run's directory (here, below unit.c and its
 * neighbours, which all name runs). */
char *unit_run_dir(const struct unit_rec *u, int seq);

#endif
