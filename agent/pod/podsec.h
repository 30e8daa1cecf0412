// SPDX-License-Identifier: Apache-2.0
/* A unit's securityContext extensions (docs/agent-wire.md) applied to its
 * run config: pure, so each rule is tested without a container. */
#ifndef CELL_PODSEC_H
#define CELL_PODSEC_H

#include "podspec.h"
#include "err.h"
#include "runtime.h"

/* Once rc's uid and caps are resolved: runAsNonRoot (EPERM, with the
 * kubelet's CreateContainerConfigError text), readOnlyRootFilesystem,
 * allowPrivilegeEscalation (no_new_privs), privileged (every capability,
 * /proc unmasked), procMount. */
int podsec_apply(const struct unit_spec *u, const struct pod_spec *pod,
		 struct run_config *rc, struct cerr *e);

#endif
