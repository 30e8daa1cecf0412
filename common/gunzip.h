// SPDX-License-Identifier: Apache-2.0
/* gzip decoding, one implementation for layers, user data and packages.
 * ISA-L's inflate: several times faster than zlib's on x86 (a layer's
 * unpack is bound by it). Every member's header is parsed and its trailer
 * (CRC-32 and length) checked; concatenated members are one stream
 * (RFC 1952). Link -lisal where this object is used. */
#ifndef CELL_GUNZIP_H
#define CELL_GUNZIP_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "err.h"

/* Whether p starts with the gzip magic (1f 8b). */
bool gunzip_is_gzip(const void *p, size_t n);

/* Streaming: as much of in as fits into out; *consumed and *produced say
 * how much. After a member's trailer, the next call starts a new member
 * (so bytes after a member must be gzip, or the call fails). EBADMSG for
 * corrupt data or a trailer that does not match. */
struct gunzip;
struct gunzip *gunzip_new(void);
int gunzip_run(struct gunzip *g, const void *in, size_t in_len,
	       size_t *consumed, void *out, size_t out_cap, size_t *produced,
	       struct cerr *e);
/* A member has ended (its trailer checked) and no byte of another has been
 * given since. */
bool gunzip_member_done(const struct gunzip *g);
void gunzip_free(struct gunzip *g);

/* A whole buffer into out, whose max is what defuses a gzip bomb (EFBIG).
 * Zero padding after the last member is tolerated, as gzip(1) does;
 * anything else after it, or a truncated member, is EBADMSG. */
int gunzip_buf(const void *in, size_t len, struct buf *out, struct cerr *e);

#endif
