// SPDX-License-Identifier: Apache-2.0
/* The supervisor: the one owner of pod state. The API threads hand it work
 * and read snapshots; it runs the pod (images, volumes, units, restarts,
 * probes) in its own thread and keeps the state directory up to date. */
#ifndef CELL_SUPERVISOR_H
#define CELL_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct supervisor;

struct sup_opts {
	const char *state_dir;	 /* source of truth; survives restarts */
	const char *image_cache; /* cell-pull workdir */
	const char *monitor_bin; /* path of cell-monitor */
	const char *pull_bin;	 /* path of cell-pull */
	const char *const *insecure_registries;
	const char *packages_dir; /* deploy packages: <dir>/<name>/ */
	/* The pod's units together may use the instance's memory minus this
	 * (bytes); -1: no pod-wide cap. */
	int64_t pod_memory_reserve;
	/* cell-pull --keep-free-mib; 0: its default. */
	int64_t pull_keep_free_mib;
	/* Unit logs: rotation (0: 10 MiB, 5 files) and the kubelet-style
	 * links <dir>/<pod>_<namespace>_<unit>-<id>.log (NULL: none). */
	int64_t log_max_bytes;
	int log_max_files;
	const char *containers_log_dir;
	/* CDI spec directories, ':'-separated (NULL: /etc/cdi:/var/run/cdi). */
	const char *cdi_spec_dirs;
	/* --pod-metadata allow: no metadata block, no proxy (netsetup's
	 * allow_metadata). */
	bool pod_metadata_allow;
	/* --lazy-pull off: every pull child gets --lazy off. */
	bool lazy_pull_off;
};

/* Load state from state_dir (re-adopting running units) and start the
 * supervisor thread. */
int sup_start(const struct sup_opts *o, struct supervisor **out,
	      struct cerr *e);
void sup_stop(struct supervisor *s);

/* Queue a PodParameters body; newest wins. EINVAL (with a reason) when the
 * body does not parse; the caller answers 400 then. */
int sup_update_pod(struct supervisor *s, const char *body, size_t len,
		   struct cerr *e);
/* A PodStatusReply JSON text (caller frees). */
char *sup_status_json(struct supervisor *s);
/* The log file of a unit's current run ("" = the first unit) and, when
 * previous is set, of its previous run; NULL with ENOENT when unknown. */
char *sup_log_path(struct supervisor *s, const char *unit, bool previous,
		   struct cerr *e);
/* Whether a unit runs ("" = the first regular unit): 1 yes, 0 no, -1 no
 * such unit. */
int sup_unit_running(struct supervisor *s, const char *unit);
/* The pod IP the status reports (caller frees; "" when none is known). */
char *sup_pod_ip(struct supervisor *s);

#endif
