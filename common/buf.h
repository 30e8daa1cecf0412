// SPDX-License-Identifier: Apache-2.0
/* A growable byte buffer with a hard cap: every buffer that holds outside
 * input says how large it may grow. Always NUL-terminated for convenience. */
#ifndef CELL_BUF_H
#define CELL_BUF_H

#include <stddef.h>

#include "err.h"

struct buf {
	char *data;
	size_t len;
	size_t cap;
	size_t max; /* hard cap on len; 0 means "no cap" (internal data only) */
};

void buf_init(struct buf *b, size_t max);
/* Fails with EFBIG (leaving b unchanged) when len would exceed max. */
int buf_append(struct buf *b, const void *p, size_t n, struct cerr *e);
void buf_reset(struct buf *b);
void buf_free(struct buf *b);
/* Take the data out; the buffer is left empty. */
char *buf_steal(struct buf *b, size_t *len);

#endif
