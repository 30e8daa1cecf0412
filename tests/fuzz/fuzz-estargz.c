// SPDX-License-Identifier: Apache-2.0
/* Fuzz the eStargz footer, TOC member and TOC (imagepull/estargz.c): all
 * three come from a registry we do not trust. Beyond "no crash, no leak":
 * a TOC that parses keeps its promises: every chunk lies before the TOC
 * and after the one before it, every file's chunks cover it exactly, every
 * name is clean and its directory is a directory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "estargz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct esgz_toc *t)
{
	for (size_t i = 0; i < t->n_chunks; i++) {
		const struct esgz_chunk *c = &t->chunks[i];

		if (c->offset >= c->end || c->end > t->toc_offset || !c->size ||
		    c->size > ESGZ_CHUNK_MAX)
			abort();
		if (i && (c->offset < t->chunks[i - 1].offset ||
			  (c->offset == t->chunks[i - 1].offset &&
			   c->inner < t->chunks[i - 1].inner)))
			abort();
	}
	for (size_t i = 0; i < t->n_nodes; i++) {
		const struct esgz_node *n = &t->nodes[i];
		uint64_t at = 0;

		for (size_t c = 0; c < n->n_chunks; c++) {
			if (t->chunks[n->first_chunk + c].file_off != at)
				abort();
			at += t->chunks[n->first_chunk + c].size;
		}
		if (S_ISREG(n->mode) && at != n->size)
			abort();
	}
	for (size_t i = 1; i < t->n_dents; i++) {
		const struct esgz_dent *d = &t->dents[i];

		size_t l = strlen(d->path);

		if (!l || d->path[0] == '/' || !strcmp(d->path, "..") ||
		    !strncmp(d->path, "../", 3) || strstr(d->path, "/../") ||
		    (l >= 3 && !strcmp(d->path + l - 3, "/..")) ||
		    !S_ISDIR(t->nodes[d->parent].mode))
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct esgz_toc t;
	struct cerr e = {0};
	uint64_t off;
	size_t fs, len;
	char *json;

	esgz_footer_parse(data, size, (uint64_t)size + 100, &off, &fs, &e);
	if (esgz_toc_extract(data, size, &json, &len, &e) == 0) {
		if (esgz_toc_parse(json, len, 1u << 20, &t, &e) == 0) {
			check(&t);
			esgz_toc_free(&t);
		}
		free(json);
	}
	if (esgz_toc_parse((const char *)data, size, 1u << 20, &t, &e) == 0) {
		check(&t);
		esgz_toc_free(&t);
	}
	return 0;
}
