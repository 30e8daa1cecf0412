// SPDX-License-Identifier: Apache-2.0
/* Base64 (RFC 4648): encoding, and decoding for the places that read it:
 * secrets in PodParameters (strict and canonical, as Go's encoding/json writes
 * []byte), docker config.json "auth" (padded, as Go's StdEncoding reads it),
 * and cloud-init user data (lenient: whitespace, the URL-safe alphabet, missing
 * padding), and the agent's and cellctl's websocket stream frames (padded or
 * not). */
#ifndef CELL_BASE64_H
#define CELL_BASE64_H

#include <stddef.h>

#include "buf.h"
#include "err.h"

enum {
	B64_PADDED = 1 << 0, /* length a multiple of 4, '=' only at the end */
	B64_CANONICAL = 1 << 1, /* unused bits of the last group must be 0 */
	B64_LENIENT = 1 << 2,	/* skip whitespace; accept '-' '_'; padding
				   optional */
};

/* Append the decoded bytes of in[0..n) to out (whose cap applies); EINVAL
 * with the offset of the first bad character. */
int b64_decode(const char *in, size_t n, unsigned flags, struct buf *out,
	       struct cerr *e);

/* Standard padded base64 of p[0..n), NUL-terminated, owned. */
char *b64_encode_str(const void *p, size_t n);

/* The same into out, which holds B64_ENCODED_LEN(n) + 1 bytes (a NUL ends
 * the text); returns the text's length. n < 2^31. */
#define B64_ENCODED_LEN(n) (4 * (((n) + 2) / 3))
size_t b64_encode(const void *p, size_t n, char *out);

#endif
