// SPDX-License-Identifier: Apache-2.0
/* Fuzz image reference and platform parsing. Beyond "no crash, no leak", a
 * parsed reference must print to a string that parses back to the same
 * fields: the puller stores and compares references in that form. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pull-internal.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_round_trip(const struct image_ref *r)
{
	struct image_ref again;
	struct cerr e = {0};
	char *s = ref_string(r);

	if (!s)
		abort();
	/* A long registry can push the printed form past the input cap. */
	if (strlen(s) <= 4096) {
		if (ref_parse(s, &again, &e) < 0)
			abort();
		if (!same(r->registry, again.registry) ||
		    !same(r->repository, again.repository) ||
		    !same(r->tag, again.tag) || !same(r->digest, again.digest))
			abort();
		ref_free(&again);
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1);
	struct image_ref r;
	struct platform p;
	struct cerr e = {0};

	memcpy(s, data, size);
	s[size] = '\0';
	if (ref_parse(s, &r, &e) == 0) {
		if (!r.registry || !r.repository || (!r.tag && !r.digest))
			abort();
		check_round_trip(&r);
		ref_free(&r);
	} else if (r.registry || r.repository || r.tag || r.digest) {
		abort();
	}
	if (platform_parse(s, &p, &e) == 0) {
		struct platform q = p;

		/* Normalisation is idempotent. */
		platform_normalize(&q);
		if (memcmp(&p, &q, sizeof(p)) != 0)
			abort();
	}
	free(s);
	return 0;
}
