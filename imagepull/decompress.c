// SPDX-License-Identifier: Apache-2.0
/* Streaming decompression of layer blobs: gzip through common/gunzip
 * (ISA-L), zstd through libzstd. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "gunzip.h"
#include "pull-internal.h"
#include "util.h"

struct decomp {
	enum compression c;
	bool finished; /* a gzip member or zstd frame has ended */
	struct gunzip *gz;
	ZSTD_DStream *zs;
};

enum compression compression_sniff(const void *p, size_t n)
{
	const unsigned char *b = p;

	if (gunzip_is_gzip(p, n))
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
		d->gz = gunzip_new();
	} else if (c == COMP_ZSTD) {
		d->zs = ZSTD_createDStream();
		if (!d->zs)
			abort();
		ZSTD_initDStream(d->zs);
	}
	return d;
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
		/* Concatenated gzip members are one stream (RFC 1952). */
		r = gunzip_run(d->gz, in, in_len, consumed, out, out_cap,
			       produced, e);
		d->finished = gunzip_member_done(d->gz);
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
	gunzip_free(d->gz);
	if (d->zs)
		ZSTD_freeDStream(d->zs);
	free(d);
}
