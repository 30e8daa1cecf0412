// SPDX-License-Identifier: Apache-2.0
/* Decoders for user data: base64 (write_files encodings, MIME parts, Azure)
 * and gzip (compressed user data and gz contents). gzip goes through
 * ISA-L's inflate, which the tree already links for cell-pull; the output
 * buffer's cap is what defuses a gzip bomb. */
#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "ci-internal.h"
#include "cleanup.h"
#include "util.h"

bool ci_is_gzip(const void *p, size_t n)
{
	const unsigned char *b = p;
	return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

/* Lenient, as cloud-init reads it: whitespace, the URL-safe alphabet and
 * missing padding are all fine. */
int ci_b64_decode(const char *in, size_t len, struct buf *out, struct cerr *e)
{
	return b64_decode(in, len, B64_LENIENT, out, e);
}

/* One inflate step into the spare room of out. */
static int inflate_step(struct inflate_state *s, struct buf *out,
			struct cerr *e)
{
	char chunk[16384];
	int r;

	s->next_out = (uint8_t *)chunk;
	s->avail_out = sizeof(chunk);
	r = isal_inflate(s);
	if (r == ISAL_INCORRECT_CHECKSUM)
		return cerr_set(e, EBADMSG, "gzip: checksum mismatch");
	if (r < 0)
		return cerr_set(e, EBADMSG, "gzip: corrupt data");
	if (buf_append(out, chunk, sizeof(chunk) - s->avail_out, e) < 0)
		return cerr_prefix(e, "gzip");
	return 0;
}

int ci_gunzip(const void *in, size_t len, struct buf *out, struct cerr *e)
{
	cleanup_free struct inflate_state *s = xmalloc(sizeof(*s));
	const uint8_t *p = in;

	if (len > UINT32_MAX)
		return cerr_set(e, EFBIG, "gzip: input too large");
	isal_inflate_init(s);
	s->crc_flag = ISAL_GZIP; /* parse the header, check the trailer */
	s->next_in = (uint8_t *)(uintptr_t)p;
	s->avail_in = (uint32_t)len;
	for (;;) {
		size_t before_in = s->avail_in, before_out = out->len;

		if (inflate_step(s, out, e) < 0)
			return -1;
		if (s->block_state == ISAL_BLOCK_FINISH) {
			/* RFC 1952: concatenated members are one stream;
			 * trailing zero padding is tolerated as gzip does. */
			const uint8_t *rest = s->next_in;
			size_t left = s->avail_in;

			while (left && *rest == 0)
				rest++, left--;
			if (!left)
				break;
			if (!ci_is_gzip(rest, left))
				return cerr_set(e, EBADMSG,
						"gzip: trailing garbage");
			isal_inflate_reset(s);
			s->crc_flag = ISAL_GZIP;
			s->next_in = (uint8_t *)(uintptr_t)rest;
			s->avail_in = (uint32_t)left;
			continue;
		}
		if (s->avail_in == 0 && before_in == 0 &&
		    out->len == before_out)
			return cerr_set(e, EBADMSG, "gzip: truncated stream");
	}
	if (!out->data && buf_append(out, "", 0, e) < 0)
		return -1;
	return 0;
}
