// SPDX-License-Identifier: Apache-2.0
/* The metadata proxy's judge (agent/pod/imdsreq.c, used by cell-imds): a
 * pod's request head in, a verdict and the few fields passed on out. Pure
 * and capped; fuzzed (tests/fuzz/fuzz-imdsreq.c). */
#ifndef CELL_IMDSREQ_H
#define CELL_IMDSREQ_H

#include <stddef.h>

#define IMDS_UPSTREAM "http://169.254.169.254" /* the real service */
#define IMDS_HEAD_MAX 8192  /* a request head beyond this: 431 */
#define IMDS_TARGET_MAX 256 /* request target */
#define IMDS_TOKEN_MAX 256  /* X-aws-ec2-metadata-token */
#define IMDS_HEADERS_MAX 32 /* header lines */

struct imds_req {
	char method[4]; /* "GET" or "PUT" */
	char target[IMDS_TARGET_MAX + 1];
	char token[IMDS_TOKEN_MAX + 1]; /* "" = none */
	char ttl[6];			/* "" = none; 1-5 digits */
	char reason[64];		/* why refused */
};

/* Judge the head buf[0..len) (up to and including the blank line). 200:
 * pass r on; else the status to answer: 400 malformed, 403 not a path an
 * SDK needs for credentials or region, 405 another method, 431 too many
 * headers. The target must match the allowed paths byte for byte: no
 * query, no percent-encoding, no dot segments, no doubled slashes. */
int imds_req_judge(const char *buf, size_t len, struct imds_req *r);

/* The end of the head in buf (the offset past "\r\n\r\n"), or 0 while it
 * has not arrived. */
size_t imds_head_end(const char *buf, size_t len);

#endif
