// SPDX-License-Identifier: Apache-2.0
/* A small MBR/GPT partition-table editor: enough to grow one partition
 * to the end of its disk, as growpart would (rootgrow.c's built-in
 * fallback). Pure: works on an open fd, knows nothing of mounts. */
#ifndef CELL_PARTTABLE_H
#define CELL_PARTTABLE_H

#include <stdint.h>

#include "err.h"

/* Grow partition partno (1-based) of the
 * MBR or GPT disk image/device open as fd to the end of the disk (or the
 * next partition). *start and *len (bytes) describe the result; 0 when
 * grown, 1 when there was nothing to grow. */
int parttable_grow(int fd, int partno, uint64_t *start, uint64_t *len,
		   struct cerr *e);

#endif
