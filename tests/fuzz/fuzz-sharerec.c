// SPDX-License-Identifier: Apache-2.0
/* Fuzz the shared image cache's records (imagepull/sharerec.c): a layer's
 * completion record and a tag record, read by every cell from a share that
 * other machines write. Beyond "no crash, no leak": a record that parses
 * holds only valid digests, and formats to a record that parses back to
 * the same fields (the populator writes what the cells read). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "digest.h"
#include "pull-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_digest(const char *d)
{
	struct cerr e = {0};

	if (!d || digest_validate(d, &e) < 0)
		abort();
}

static void layer(const char *buf, size_t size)
{
	struct share_layer_rec r, again;
	struct cerr e = {0};
	char *text;

	if (share_layer_rec_parse(buf, size, &r, &e) < 0) {
		if (r.diff_id || r.blob)
			abort();
		return;
	}
	check_digest(r.diff_id);
	if (r.blob)
		check_digest(r.blob);
	text = share_layer_rec_format(&r);
	if (share_layer_rec_parse(text, strlen(text), &again, &e) < 0 ||
	    strcmp(again.diff_id, r.diff_id) || (!r.blob != !again.blob) ||
	    (r.blob && strcmp(r.blob, again.blob)))
		abort();
	free(text);
	share_layer_rec_free(&again);
	share_layer_rec_free(&r);
}

static void tag(const char *buf, size_t size)
{
	struct share_tag_rec r, again;
	struct cerr e = {0};
	char *text;

	if (share_tag_rec_parse(buf, size, &r, &e) < 0) {
		if (r.ref || r.platform || r.manifest || r.config)
			abort();
		return;
	}
	check_digest(r.manifest);
	check_digest(r.config);
	text = share_tag_rec_format(&r);
	if (share_tag_rec_parse(text, strlen(text), &again, &e) < 0 ||
	    strcmp(again.ref, r.ref) || strcmp(again.platform, r.platform) ||
	    strcmp(again.manifest, r.manifest) ||
	    strcmp(again.config, r.config))
		abort();
	free(text);
	share_tag_rec_free(&again);
	share_tag_rec_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	layer((const char *)data, size);
	tag((const char *)data, size);
	return 0;
}
