// SPDX-License-Identifier: Apache-2.0
/* Streaming decompression of layer blobs. gzip goes through ISA-L's inflate,
 * several times faster than zlib's on x86; zstd through libzstd. */
#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "pull-internal.h"
#include "util.h"

struct decomp {
	enum compression c;
	bool finished; /* a complete stream (or member) has been decoded */
	bool started;  /* any input seen since the last member ended */
	struct inflate_state *gz;
	ZSTD_DStream *zs;
};

enum compression compression_sniff(const void *p, size_t n)
{
	const unsigned char *b = p;

	if (n >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return COMP_GZIP;
	if (n >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f &&
	    b[3] == 0xfd)
		return COMP_ZSTD;
	return COMP_NONE;
}

struct decomp *decomp_new(enum compression c)
{
	struct decomp *d = xcalloc(1, sizeof(*d));

	d->c = c;
	if (c == COMP_GZIP) {
		d->gz = xmalloc(sizeof(*d->gz));
		isal_inflate_init(d->gz);
		d->gz->crc_flag = ISAL_GZIP; /* parse header, check trailer */
	} else if (c == COMP_ZSTD) {
		d->zs = ZSTD_createDStream();
		if (!d->zs)
			abort();
		ZSTD_initDStream(d->zs);
	}
	return d;
}

static int run_gzip(struct decomp *d, const void *in, size_t in_len,
		    size_t *consumed, void *out, size_t out_cap,
		    size_t *produced, struct cerr *e)
{
	struct inflate_state *s = d->gz;
	int r;

	if (d->finished) {
		/* Concatenated gzip members are one stream (RFC 1952). */
		isal_inflate_reset(s);
		s->crc_flag = ISAL_GZIP;
		d->finished = false;
	}
	s->next_in = (uint8_t *)(uintptr_t)in;
	s->avail_in = (uint32_t)(in_len > UINT32_MAX ? UINT32_MAX : in_len);
	s->next_out = out;
	s->avail_out = (uint32_t)(out_cap > UINT32_MAX ? UINT32_MAX : out_cap);
	r = isal_inflate(s);
	*consumed = (size_t)((const uint8_t *)s->next_in - (const uint8_t *)in);
	*produced = (size_t)((uint8_t *)s->next_out - (uint8_t *)out);
	if (r == ISAL_INCORRECT_CHECKSUM)
		return cerr_set(e, EBADMSG, "gzip: checksum mismatch");
	if (r < 0)
		return cerr_set(e, EBADMSG, "gzip: corrupt data (isa-l %d)", r);
	if (s->block_state == ISAL_BLOCK_FINISH)
		d->finished = true;
	return 0;
}

static int run_zstd(struct decomp *d, const void *in, size_t in_len,
		    size_t *consumed, void *out, size_t out_cap,
		    size_t *produced, struct cerr *e)
{
	ZSTD_inBuffer ib = {in, in_len, 0};
	ZSTD_outBuffer ob = {out, out_cap, 0};
	size_t r = ZSTD_decompressStream(d->zs, &ob, &ib);

	*consumed = ib.pos;
	*produced = ob.pos;
	if (ZSTD_isError(r))
		return cerr_set(e, EBADMSG, "zstd: %s", ZSTD_getErrorName(r));
	/* 0 means a frame is complete and fully flushed; a following frame
	 * simply starts again. */
	d->finished = r == 0;
	return 0;
}

int decomp_run(struct decomp *d, const void *in, size_t in_len,
	       size_t *consumed, void *out, size_t out_cap, size_t *produced,
	       bool *end, struct cerr *e)
{
	int r = 0;

	*end = false;
	switch (d->c) {
	case COMP_NONE: {
		size_t n = in_len < out_cap ? in_len : out_cap;
		memcpy(out, in, n);
		*consumed = *produced = n;
		return 0;
	}
	case COMP_GZIP:
		r = run_gzip(d, in, in_len, consumed, out, out_cap, produced,
			     e);
		break;
	case COMP_ZSTD:
		r = run_zstd(d, in, in_len, consumed, out, out_cap, produced,
			     e);
		break;
	}
	if (r == 0 && d->finished && *consumed == in_len)
		*end = true;
	return r;
}

bool decomp_finished(const struct decomp *d)
{
	return d->c == COMP_NONE || d->finished;
}

void decomp_free(struct decomp *d)
{
	if (!d)
		return;
	free(d->gz);
	if (d->zs)
		ZSTD_freeDStream(d->zs);
	free(d);
}
