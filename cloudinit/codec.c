// SPDX-License-Identifier: Apache-2.0
/* base64 for user data (write_files encodings, MIME parts, Azure); gzip
 * is common/gunzip's gunzip_buf, whose output cap defuses a gzip bomb. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "ci-internal.h"
#include "cleanup.h"
#include "util.h"

/* Lenient, as cloud-init reads it: whitespace, the URL-safe alphabet and
 * missing padding are all fine. */
int ci_b64_decode(const char *in, size_t len, struct buf *out, struct cerr *e)
{
	return b64_decode(in, len, B64_LENIENT, out, e);
}
