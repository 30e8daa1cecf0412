// SPDX-License-Identifier: Apache-2.0
/* The pod's PID and IPC namespace options (namespaceOptions.pid/.ipc, as
 * Kip's converter writes them with the CRI's meanings):
 *
 *   CONTAINER (1)  each unit its own namespace (Kip's default; also what a
 *                  spec without namespaceOptions gets)
 *   NODE (2)       the cell's: hostPID, hostIPC
 *   POD (0)        one namespace for all the pod's units:
 *                  shareProcessNamespace for pid
 *
 * A pod-wide namespace is held by `cell-monitor pod-init` (runtime/podinit.c),
 * the pod's PID 1: started when the first unit that needs it starts,
 * recorded in <state>/podns.json so a restarted agent keeps it, and ended
 * (SIGTERM; the kernel kills what is left in it) once no unit runs. A change
 * of either option restarts the pod, as a change of its network does.
 *
 * POSIX shared memory lives in /dev/shm, not in the IPC namespace: with
 * ipc POD the units share a tmpfs (<state>/podshm, made with the holder,
 * gone with it), with ipc NODE they get the cell's /dev/shm, as the
 * kubelet's runtimes give the pod sandbox's or the host's. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "procspawn.h"
#include "runtime.h"
#include "sup-internal.h"
#include "util.h"

#define PODNS_FILE "podns.json"

static char *record_path(const struct supervisor *s)
{
	return xasprintf("%s/%s", s->o.state_dir, PODNS_FILE);
}

static bool holder_alive(const struct supervisor *s)
{
	return s->podns_pid > 0 &&
	       proc_start_time(s->podns_pid) == s->podns_start;
}

static char *shm_dir(const struct supervisor *s)
{
	return xasprintf("%s/podshm", s->o.state_dir);
}

static void shm_release(const struct supervisor *s)
{
	cleanup_free char *d = shm_dir(s);

	if (fs_is_mountpoint(d) && umount2(d, MNT_DETACH) < 0)
		log_warn("unmount %s: %m", d);
	if (rmdir(d) < 0 && errno != ENOENT)
		log_warn("remove %s: %m", d);
}

static void forget(struct supervisor *s)
{
	cleanup_free char *p = record_path(s);

	s->podns_pid = 0;
	s->podns_start = 0;
	if (unlink(p) < 0 && errno != ENOENT)
		log_warn("remove %s: %m", p);
}

void podns_restore(struct supervisor *s)
{
	cleanup_free char *p = record_path(s);
	char text[64] = "";
	long long pid = 0;
	unsigned long long start = 0;
	FILE *f = fopen(p, "re");

	if (!f)
		return;
	if (!fgets(text, sizeof(text), f) ||
	    sscanf(text, "%lld %llu", &pid, &start) != 2 || pid <= 0 ||
	    pid > INT32_MAX)
		pid = 0;
	fclose(f);
	s->podns_pid = (pid_t)pid;
	s->podns_start = start;
	if (holder_alive(s))
		log_info("pod namespaces: holder %d found and kept",
			 (int)s->podns_pid);
	else {
		forget(s);
		shm_release(s);
	}
}

/* Start the holder: `cell-monitor pod-init ROOT` prints its pid. */
static int start_holder(struct supervisor *s, struct cerr *e)
{
	cleanup_free char *root = xasprintf("%s/podns-root", s->o.state_dir);
	cleanup_free char *rec = record_path(s);
	char *argv[] = {(char *)s->o.monitor_bin, (char *)"pod-init", root,
			NULL};
	struct buf out;
	int rc;
	long long pid = 0;
	char text[64];

	if (mkdir(root, 0555) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkdir %s", root);
	buf_init(&out, 4096);
	rc = spawn_run(argv, &out, 10, e);
	if (rc == 0 && out.len > 0 && out.len < 32) {
		char num[32];
		memcpy(num, out.data, out.len);
		num[out.len] = '\0';
		pid = strtoll(num, NULL, 10);
	}
	if (rc != 0 || pid <= 0) {
		if (rc >= 0)
			cerr_set(e, EIO, "pod-init exited %d: %.200s", rc,
				 out.data ? out.data : "");
		buf_free(&out);
		return cerr_prefix(e, "start the pod's namespaces");
	}
	buf_free(&out);
	s->podns_pid = (pid_t)pid;
	s->podns_start = proc_start_time(s->podns_pid);
	snprintf(text, sizeof(text), "%d %llu\n", (int)s->podns_pid,
		 (unsigned long long)s->podns_start);
	if (fs_replace(rec, text, strlen(text), 0600, e) < 0) {
		kill(s->podns_pid, SIGKILL);
		forget(s);
		return -1;
	}
	log_info("pod namespaces: holder %d started (PID 1 of the pod)",
		 (int)s->podns_pid);
	return 0;
}

static char *holder_ns(struct supervisor *s, const char *which, struct cerr *e)
{
	if (!holder_alive(s) && start_holder(s, e) < 0)
		return NULL;
	return xasprintf("/proc/%d/ns/%s", (int)s->podns_pid, which);
}

/* run.json's namespace path for one mode: NULL with *e clear means a new
 * one for the unit. */
static int ns_path(struct supervisor *s, enum ns_mode m, const char *which,
		   char **out, struct cerr *e)
{
	*out = NULL;
	switch (m) {
	case NS_NODE:
		/* The monitor's own, which is the cell's. */
		*out = xasprintf("/proc/self/ns/%s", which);
		return 0;
	case NS_POD:
		*out = holder_ns(s, which, e);
		return *out ? 0 : -1;
	default:
		return 0;
	}
}

int podns_paths(struct supervisor *s, char **pid_path, char **ipc_path,
		struct cerr *e)
{
	if (ns_path(s, s->spec.ns_pid, "pid", pid_path, e) < 0)
		return -1;
	if (ns_path(s, s->spec.ns_ipc, "ipc", ipc_path, e) < 0) {
		free(*pid_path);
		*pid_path = NULL;
		return -1;
	}
	return 0;
}

bool podns_changed(const struct supervisor *s, const struct pod_spec *next)
{
	return s->spec.ns_pid != next->ns_pid || s->spec.ns_ipc != next->ns_ipc;
}

char *podns_key(const struct pod_spec *p)
{
	return xasprintf("pid=%d ipc=%d", (int)p->ns_pid, (int)p->ns_ipc);
}

bool podns_differs(const struct supervisor *s, const char *run_key)
{
	cleanup_free char *want = NULL;

	if (!s->has_spec || !run_key || !*run_key)
		return false;
	want = podns_key(&s->spec);
	return strcmp(run_key, want) != 0;
}

/* With no unit running or stopping, the holder goes: the next unit that
 * needs it starts a fresh one. */
void podns_tick(struct supervisor *s)
{
	if (s->podns_pid <= 0)
		return;
	for (size_t i = 0; i < s->n_units; i++)
		if (s->units[i].phase == PH_RUNNING ||
		    s->units[i].phase == PH_STOPPING)
			return;
	if (holder_alive(s)) {
		log_info("pod namespaces: no unit left, holder %d ends",
			 (int)s->podns_pid);
		kill(s->podns_pid, SIGTERM);
	}
	forget(s);
	shm_release(s);
}

int podns_shm(struct supervisor *s, char **out, struct cerr *e)
{
	cleanup_free char *d = NULL;

	*out = NULL;
	if (s->spec.ns_ipc == NS_NODE) {
		*out = xstrdup("/dev/shm");
		return 0;
	}
	if (s->spec.ns_ipc != NS_POD)
		return 0;
	d = shm_dir(s);
	if (mkdir(d, 0755) < 0 && errno != EEXIST)
		return cerr_sys(e, "mkdir %s", d);
	/* As the unit's own: 64 MiB, like Docker's and the kubelet's. */
	if (!fs_is_mountpoint(d) &&
	    mount("shm", d, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=1777,size=65536k") < 0)
		return cerr_sys(e, "mount the pod's /dev/shm on %s", d);
	*out = steal_ptr(&d);
	return 0;
}
