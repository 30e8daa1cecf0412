// SPDX-License-Identifier: Apache-2.0
#include "buf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

void buf_init(struct buf *b, size_t max)
{
	b->data = NULL;
	b->len = b->cap = 0;
	b->max = max;
}

int buf_append(struct buf *b, const void *p, size_t n, struct cerr *e)
{
	if (b->max && (n > b->max || b->len > b->max - n))
		return cerr_set(e, EFBIG, "data exceeds the limit of %zu bytes",
				b->max);
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n + 1)
			cap *= 2;
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void buf_free(struct buf *b)
{
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
}

char *buf_steal(struct buf *b, size_t *len)
{
	char *d = b->data ? b->data : xstrdup("");
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->cap = 0;
	return d;
}
