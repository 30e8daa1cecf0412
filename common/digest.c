// SPDX-License-Identifier: Apache-2.0
#include "digest.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

static const EVP_MD *md_for(const char *algo, size_t *hexlen)
{
	if (!strcmp(algo, "sha256")) {
		*hexlen = 64;
		return EVP_sha256();
	}
	if (!strcmp(algo, "sha512")) {
		*hexlen = 128;
		return EVP_sha512();
	}
	return NULL;
}

static int split_algo(const char *d, char algo[8])
{
	const char *colon = strchr(d, ':');
	size_t n = colon ? (size_t)(colon - d) : strlen(d);

	if (n == 0 || n >= 8)
		return -1;
	memcpy(algo, d, n);
	algo[n] = '\0';
	return 0;
}

int digest_validate(const char *digest, struct cerr *e)
{
	char algo[8];
	size_t hexlen;
	const char *hex;

	if (split_algo(digest, algo) < 0 || !strchr(digest, ':') ||
	    !md_for(algo, &hexlen))
		return cerr_set(e, EINVAL, "unsupported digest '%.80s'",
				digest);
	hex = strchr(digest, ':') + 1;
	if (strlen(hex) != hexlen || strspn(hex, "0123456789abcdef") != hexlen)
		return cerr_set(e, EINVAL, "malformed digest '%.80s'", digest);
	return 0;
}

int hasher_init(struct hasher *h, const char *digest_or_algo, struct cerr *e)
{
	size_t hexlen;
	const EVP_MD *md;

	h->ctx = NULL;
	if (split_algo(digest_or_algo, h->algo) < 0 ||
	    !(md = md_for(h->algo, &hexlen)))
		return cerr_set(e, EINVAL, "unsupported digest '%.80s'",
				digest_or_algo);
	h->ctx = EVP_MD_CTX_new();
	if (!h->ctx || !EVP_DigestInit_ex(h->ctx, md, NULL))
		abort();
	return 0;
}

void hasher_update(struct hasher *h, const void *p, size_t n)
{
	if (n)
		EVP_DigestUpdate(h->ctx, p, n);
}

void hasher_final(struct hasher *h, char out[DIGEST_STR_MAX])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;
	size_t o;

	EVP_DigestFinal_ex(h->ctx, md, &len);
	o = (size_t)snprintf(out, DIGEST_STR_MAX, "%s:", h->algo);
	for (unsigned i = 0; i < len && o + 3 <= DIGEST_STR_MAX; i++)
		o += (size_t)snprintf(out + o, 3, "%02x", md[i]);
	hasher_free(h);
}

void hasher_free(struct hasher *h)
{
	if (h->ctx)
		EVP_MD_CTX_free(h->ctx);
	h->ctx = NULL;
}

int digest_buf(const char *like, const void *p, size_t n,
	       char out[DIGEST_STR_MAX], struct cerr *e)
{
	struct hasher h;

	if (hasher_init(&h, like, e) < 0)
		return -1;
	hasher_update(&h, p, n);
	hasher_final(&h, out);
	return 0;
}

const char *digest_hex(const char *digest)
{
	const char *c = strchr(digest, ':');
	return c ? c + 1 : digest;
}
