// SPDX-License-Identifier: Apache-2.0
#include "base64.h"

#include <errno.h>

#include "util.h"

static int b64_value(unsigned char c, unsigned flags)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || (c == '-' && (flags & B64_LENIENT)))
		return 62;
	if (c == '/' || (c == '_' && (flags & B64_LENIENT)))
		return 63;
	return -1;
}

static int is_space(unsigned char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* What is left after the last full byte must be a valid ending: 0 bits
 * (groups of 4), 2 bits (2 chars), 4 bits (3 chars); never 6. */
static int check_end(int bits, unsigned acc, size_t pad, size_t chars,
		     unsigned flags, struct cerr *e)
{
	if (bits >= 6 || pad > 2)
		return cerr_set(e, EINVAL, "truncated base64");
	if ((flags & B64_PADDED) && (chars + pad) % 4)
		return cerr_set(e, EINVAL, "base64 without its padding");
	if ((flags & B64_PADDED) && pad && (chars + pad) % 4 == 0 &&
	    ((chars % 4 == 2 && pad != 2) || (chars % 4 == 3 && pad != 1)))
		return cerr_set(e, EINVAL, "base64 with wrong padding");
	if ((flags & B64_CANONICAL) && (acc & ((1u << bits) - 1)))
		return cerr_set(e, EINVAL, "base64 with non-zero unused bits");
	return 0;
}

int b64_decode(const char *in, size_t n, unsigned flags, struct buf *out,
	       struct cerr *e)
{
	unsigned acc = 0;
	int bits = 0;
	size_t pad = 0, chars = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		int v;
		char byte;

		if ((flags & B64_LENIENT) && is_space(c))
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		v = b64_value(c, flags);
		if (v < 0 || pad)
			return cerr_set(
			    e, EINVAL, "invalid base64 character at offset %zu",
			    i);
		chars++;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits < 8)
			continue;
		bits -= 8;
		byte = (char)((acc >> bits) & 0xff);
		acc &= (1u << bits) - 1;
		if (buf_append(out, &byte, 1, e) < 0)
			return -1;
	}
	if (check_end(bits, acc, pad, chars, flags, e) < 0)
		return -1;
	/* Leave out a valid (possibly empty) NUL-terminated string. */
	return buf_append(out, "", 0, e);
}

/* Standard alphabet, padded, NUL-terminated (EVP_EncodeBlock's output).
 * Our own, so that cell-monitor, which writes run.json's seccomp program,
 * never loads libcrypto. */
size_t b64_encode(const void *p, size_t n, char *out)
{
	static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				  "abcdefghijklmnopqrstuvwxyz0123456789+/";
	const unsigned char *in = p;
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16;
		size_t left = n - i;

		if (left > 1)
			v |= (unsigned)in[i + 1] << 8;
		if (left > 2)
			v |= in[i + 2];
		out[o++] = abc[v >> 18 & 63];
		out[o++] = abc[v >> 12 & 63];
		out[o++] = left > 1 ? abc[v >> 6 & 63] : '=';
		out[o++] = left > 2 ? abc[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

char *b64_encode_str(const void *p, size_t n)
{
	char *out = xmalloc(B64_ENCODED_LEN(n) + 1);

	b64_encode(p, n, out);
	return out;
}
