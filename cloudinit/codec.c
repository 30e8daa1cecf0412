/* Decoders for user data: base64 (write_files encodings, MIME parts, Azure)
 * and gzip (compressed user data and gz contents). gzip goes through
 * ISA-L's inflate, which the tree already links for cell-pull; the output
 * buffer's cap is what defuses a gzip bomb. */
#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "util.h"

bool ci_is_gzip(const void *p, size_t n)
{
	const unsigned char *b = p;
	return n >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-') /* '-' and '_': the URL-safe alphabet */
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

int ci_b64_decode(const char *in, size_t len, struct buf *out, struct cerr *e)
{
	unsigned acc = 0;
	int bits = 0;
	size_t pad = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		int v;
		char byte;

		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		v = b64_value(c);
		if (v < 0 || pad)
			return cerr_set(
			    e, EINVAL, "invalid base64 character at offset %zu",
			    i);
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits < 8)
			continue;
		bits -= 8;
		byte = (char)((acc >> bits) & 0xff);
		if (buf_append(out, &byte, 1, e) < 0)
			return -1;
	}
	/* Six leftover bits cannot end a valid encoding. */
	if (bits >= 6 || pad > 2)
		return cerr_set(e, EINVAL, "truncated base64");
	if (!out->data && buf_append(out, "", 0, e) < 0)
		return -1;
	return 0;
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
