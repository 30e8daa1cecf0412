/* Base64 decoding (RFC 4648) for the three places that read it: secrets in
 * PodParameters (strict and canonical, as Go's encoding/json writes []byte),
 * docker config.json "auth" (padded, as Go's StdEncoding reads it), and
 * cloud-init user data (lenient: whitespace, the URL-safe alphabet, missing
 * padding). */
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

#endif
