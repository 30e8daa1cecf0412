// SPDX-License-Identifier: Apache-2.0
/* A flat YAML map of strings to strings: the SSM boot payload and
 * cell_config.yaml. Pure (text in, entries out), capped, fuzzed
 * (tests/fuzz/fuzz-yamlmap.c). Nested maps, sequences, aliases, duplicate
 * keys, NUL bytes and non-scalar values are errors with a line number. */
#ifndef CELL_YAMLMAP_H
#define CELL_YAMLMAP_H

#include <stddef.h>

#include "err.h"

#define YAMLMAP_MAX_ENTRIES 256

struct yamlmap_entry {
	char *key, *value;
	int line; /* 1-based line of the key */
};

struct yamlmap {
	struct yamlmap_entry *v;
	size_t n;
};

/* An empty document is an empty map. */
int yamlmap_parse(const char *text, size_t len, struct yamlmap *out,
		  struct cerr *e);
/* The value at key, or NULL. */
const char *yamlmap_get(const struct yamlmap *m, const char *key);
void yamlmap_free(struct yamlmap *m);

#endif
