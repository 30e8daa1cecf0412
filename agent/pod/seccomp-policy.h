// SPDX-License-Identifier: Apache-2.0
/* The seccomp filter of each unit (docs/agent-runtime.md "Seccomp"):
 * the agent's default profile (built in, or --seccomp-profile FILE), none
 * (--seccomp unconfined, or a seccompProfile of type Unconfined), or a
 * Localhost profile under --seccomp-profile-dir. Filters are built once per
 * (profile, capability set) and kept. Thread-safe. */
#ifndef CELL_SECCOMP_POLICY_H
#define CELL_SECCOMP_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "podspec.h"
#include "err.h"

struct seccomp_policy_opts {
	const char *profile_file;  /* NULL: the built-in default */
	bool unconfined;	   /* units without a seccompProfile get none */
	const char *localhost_dir; /* Localhost profiles; NULL: refused */
};

/* Load and check the default profile (parsed and compiled once, so a bad
 * one stops the agent at start with its line). */
int seccomp_policy_init(const struct seccomp_policy_opts *o, struct cerr *e);
/* The BPF program for a unit (*bpf NULL: unconfined; caller frees). ref
 * is the unit's seccompProfile, else pod's, else neither. EPERM before
 * seccomp_policy_init has succeeded (fails closed). */
int seccomp_policy_for(const struct seccomp_ref *unit,
		       const struct seccomp_ref *pod, char *const *caps,
		       void **bpf, size_t *len, struct cerr *e);
void seccomp_policy_free(void);

#endif
