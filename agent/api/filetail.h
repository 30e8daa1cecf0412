// SPDX-License-Identifier: Apache-2.0
/* The tail of a file on the cell's disk (file/). Knows nothing of HTTP. */
#ifndef CELL_FILETAIL_H
#define CELL_FILETAIL_H

#include <stdint.h>

#include "buf.h"
#include "err.h"

#define FILE_TAIL_DEFAULT 4096
#define FILE_TAIL_MAX (10u << 20)

/* The tail of a regular file: the last `lines` lines (when > 0) within
 * the last `bytes` bytes (FILE_TAIL_DEFAULT when both are 0; never more
 * than FILE_TAIL_MAX). ENOENT when missing, EINVAL when not a regular
 * file. */
int file_tail(const char *path, int64_t lines, int64_t bytes, struct buf *out,
	      struct cerr *e);

#endif
