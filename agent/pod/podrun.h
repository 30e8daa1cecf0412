// SPDX-License-Identifier: Apache-2.0
/* The pure decisions of running a pod, kept apart from the machinery so they
 * can be tested one by one: Kubernetes command/args semantics, environment
 * merging, user and group resolution against the image's own /etc files,
 * capability sets, restart policy and back-off. */
#ifndef CELL_PODRUN_H
#define CELL_PODRUN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "podspec.h"
#include "err.h"
#include "pull.h"

/* argv per Kubernetes: command replaces Entrypoint (and drops Cmd), args
 * replace Cmd. $(VAR) references are left alone: the controller expands
 * them before it sends the spec. EINVAL when the result is empty. */
char **podrun_argv(const struct unit_spec *u, const struct image_config *img,
		   struct cerr *e);

/* What the runtime adds to a unit's environment, as Docker and Itzo do. */
struct podrun_env_defaults {
	const char *hostname; /* HOSTNAME: over the image's, under the unit's */
	const char *home;     /* HOME unless set (podrun_user's home) */
	bool tty;	      /* TERM=xterm unless set */
};

/* The environment: the image's Env, then HOSTNAME, then the unit's env in
 * order, each name once (a later definition replaces an earlier one);
 * secretKeyRef values come from the pod's secrets (ENOENT when a secret or
 * key is missing). PATH, HOME and TERM are defaults: set only when missing.
 * Values are not $(VAR)-expanded (the controller side did that). */
char **podrun_env(const struct unit_spec *u, const struct pod_spec *pod,
		  const struct image_config *img,
		  const struct podrun_env_defaults *d, struct cerr *e);

struct podrun_user {
	uid_t uid;
	gid_t gid;
	gid_t *groups; /* supplementary, from /etc/group and the pod spec */
	size_t n_groups;
	char *home; /* from /etc/passwd; "/root" for root without an entry,
		     * else "/" when unknown */
};

/* Resolve who the unit runs as: the image's User ("name", "uid",
 * "name:group", "uid:gid"), overridden by runAsUser/runAsGroup of the unit,
 * then of the pod; names are looked up in the rootfs' /etc/passwd and
 * /etc/group (read beneath rootfd, never the host's). */
int podrun_user(const struct unit_spec *u, const struct pod_spec *pod,
		const struct image_config *img, int rootfd,
		struct podrun_user *out, struct cerr *e);
void podrun_user_free(struct podrun_user *u);

/* The capability names ("CAP_CHOWN", …) the unit gets: the default set,
 * then drop (with "ALL"), then add (with "ALL"). EINVAL for an unknown
 * name. */
char **podrun_caps(const struct unit_spec *u, struct cerr *e);

/* The image's StopSignal ("SIGQUIT", "quit", "3", "SIGRTMIN+3") as a
 * number, as Docker parses it; SIGTERM when spec is NULL or empty. EINVAL
 * for anything else. */
int podrun_stop_signal(const char *spec, int *sig, struct cerr *e);

/* Whether a unit that ended with exit_code restarts under the policy. */
bool podrun_should_restart(enum restart_policy p, int exit_code);

/* Back-off before restart number n (1-based): 10 s doubling to 5 min,
 * in seconds. */
unsigned podrun_backoff_s(int n);

#endif
