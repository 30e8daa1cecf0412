// SPDX-License-Identifier: Apache-2.0
/* Content digests ("sha256:<hex>", "sha512:<hex>") over OpenSSL's EVP. */
#ifndef CELL_DIGEST_H
#define CELL_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define DIGEST_STR_MAX 136 /* "sha512:" + 128 hex + NUL, rounded up */

struct hasher {
	void *ctx; /* EVP_MD_CTX */
	char algo[8];
};

/* Check the form "<algo>:<hex>" with a supported algorithm and the right
 * number of lowercase hex digits. */
int digest_validate(const char *digest, struct cerr *e);
/* Start a hasher for the algorithm named in digest (or "sha256"). */
int hasher_init(struct hasher *h, const char *digest_or_algo, struct cerr *e);
void hasher_update(struct hasher *h, const void *p, size_t n);
/* Writes "<algo>:<hex>" into out; the hasher is released. */
void hasher_final(struct hasher *h, char out[DIGEST_STR_MAX]);
void hasher_free(struct hasher *h);
/* One-shot: digest of a buffer with the algorithm of `like`. */
int digest_buf(const char *like, const void *p, size_t n,
	       char out[DIGEST_STR_MAX], struct cerr *e);
/* The hex part of a digest string. */
const char *digest_hex(const char *digest);

#endif
