// SPDX-License-Identifier: Apache-2.0
/* fsGroup ownership of a volume's tree (fsgroup.c). */
#ifndef CELL_FSGROUP_H
#define CELL_FSGROUP_H

#include <stdbool.h>
#include <sys/types.h>

#include "err.h"

/* The group and bits on every directory and regular file below dir (not
 * crossing mounts, never following links); with on_root_mismatch, nothing
 * when the root is already right. */
int fsgroup_apply(const char *dir, gid_t gid, bool on_root_mismatch, bool ro,
		  struct cerr *e);

#endif
