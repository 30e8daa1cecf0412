// SPDX-License-Identifier: Apache-2.0
/* Pod sysctls (spec.securityContext.sysctls): which may be set, and setting
 * them inside a namespace. Only namespaced sysctls are ever written, and
 * only into a namespace of the pod's own: kernel.shm*, kernel.msg*,
 * kernel.sem and fs.mqueue.* in the unit's IPC namespace; net.* in the
 * pod's network namespace. Anything else is refused, never applied to the
 * host. */
#ifndef CELL_SYSCTL_H
#define CELL_SYSCTL_H

#include <stdbool.h>

#include "err.h"

enum sysctl_ns { SYSCTL_REFUSED, SYSCTL_IPC, SYSCTL_NET };

/* The namespace a sysctl belongs to by name, or SYSCTL_REFUSED for one
 * that is not namespaced (or not a sysctl name at all). Accepts the "."
 * and "/" spellings. */
enum sysctl_ns sysctl_namespace(const char *name);

/* Whether name=value may be applied to a unit: EPERM with the reason when
 * not (a non-namespaced sysctl; net.* while the pod has no network
 * namespace of its own; an IPC one while the unit shares the host's IPC
 * namespace), EINVAL for a malformed value. */
int sysctl_check(const char *name, const char *value, bool own_ipc_ns,
		 bool own_net_ns, struct cerr *e);

/* Write name=value under /proc/sys in the caller's current namespaces.
 * Refuses (EPERM) a name that is not namespaced. */
int sysctl_write(const char *name, const char *value, struct cerr *e);

/* Apply n sysctls inside the namespace nsfd (CLONE_NEWIPC or CLONE_NEWNET,
 * as nstype): a child joins it and writes them, so the caller's own
 * namespaces are never touched. For a pod-level namespace (cell-net's pod
 * netns); units apply theirs as they start. */
int sysctl_apply_in(int nsfd, int nstype, char *const *names,
		    char *const *values, size_t n, struct cerr *e);

#endif
