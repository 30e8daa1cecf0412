// SPDX-License-Identifier: Apache-2.0
#include "gunzip.h"

#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <stdint.h>
#include <stdlib.h>

#include "cleanup.h"
#include "util.h"

struct gunzip {
	struct inflate_state s;
	bool done; /* a member ended and no byte of the next was given */
};

bool gunzip_is_gzip(const void *p, size_t n)
{
	const unsigned char *b = p;
	return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

struct gunzip *gunzip_new(void)
{
	struct gunzip *g = xmalloc(sizeof(*g));

	isal_inflate_init(&g->s);
	g->s.crc_flag = ISAL_GZIP; /* parse the header, check the trailer */
	g->done = false;
	return g;
}

static uint32_t clamp32(size_t n)
{
	return (uint32_t)(n > UINT32_MAX ? UINT32_MAX : n);
}

int gunzip_run(struct gunzip *g, const void *in, size_t in_len,
	       size_t *consumed, void *out, size_t out_cap, size_t *produced,
	       struct cerr *e)
{
	struct inflate_state *s = &g->s;
	int r;

	*consumed = *produced = 0;
	if (g->done && !in_len)
		return 0;
	if (g->done) {
		isal_inflate_reset(s);
		s->crc_flag = ISAL_GZIP;
		g->done = false;
	}
	s->next_in = (uint8_t *)(uintptr_t)in;
	s->avail_in = clamp32(in_len);
	s->next_out = out;
	s->avail_out = clamp32(out_cap);
	r = isal_inflate(s);
	*consumed = (size_t)((const uint8_t *)s->next_in - (const uint8_t *)in);
	*produced = (size_t)((uint8_t *)s->next_out - (uint8_t *)out);
	if (r == ISAL_INCORRECT_CHECKSUM)
		return cerr_set(e, EBADMSG, "gzip: checksum mismatch");
	if (r < 0)
		return cerr_set(e, EBADMSG, "gzip: corrupt data (isa-l %d)", r);
	g->done = s->block_state == ISAL_BLOCK_FINISH;
	return 0;
}

bool gunzip_member_done(const struct gunzip *g)
{
	return g->done;
}

void gunzip_free(struct gunzip *g)
{
	free(g);
}

/* Past the zero padding after a member: what is left, or NULL when
 * nothing is. */
static const uint8_t *skip_zeros(const uint8_t *p, size_t *left)
{
	while (*left && *p == 0)
		p++, (*left)--;
	return *left ? p : NULL;
}

int gunzip_buf(const void *in, size_t len, struct buf *out, struct cerr *e)
{
	cleanup_free struct gunzip *g = gunzip_new();
	const uint8_t *p = in;
	char chunk[16384];

	for (;;) {
		size_t used, n;

		if (g->done && !(p = skip_zeros(p, &len)))
			break;
		if (g->done && !gunzip_is_gzip(p, len))
			return cerr_set(e, EBADMSG, "gzip: trailing garbage");
		if (gunzip_run(g, p, len, &used, chunk, sizeof(chunk), &n, e) <
		    0)
			return -1;
		if (buf_append(out, chunk, n, e) < 0)
			return cerr_prefix(e, "gzip");
		/* Input ended inside a member: ISA-L keeps what it read
		 * ahead, so only a step with no progress at all is the end. */
		if (!used && !n && !g->done)
			return cerr_set(e, EBADMSG, "gzip: truncated stream");
		p += used;
		len -= used;
	}
	if (!out->data && buf_append(out, "", 0, e) < 0)
		return -1;
	return 0;
}
