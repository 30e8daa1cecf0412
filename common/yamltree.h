// SPDX-License-Identifier: Apache-2.0
/* YAML documents as a small tree of nodes with line numbers (yamltree.c):
 * the project's reader of whole YAML documents (cloud-config, cellctl's
 * manifests), over libyaml, with caps on nodes (aliases expanded) and
 * depth. */
#ifndef CELL_YAMLTREE_H
#define CELL_YAMLTREE_H

#include <stdbool.h>
#include <stddef.h>

#include "err.h"

#define YTREE_MAX_NODES 100000 /* nodes, aliases expanded */
#define YTREE_MAX_DEPTH 64

enum ynode_type { Y_SCALAR, Y_SEQ, Y_MAP };

struct ynode {
	enum ynode_type type;
	int line;    /* 1-based */
	char *value; /* Y_SCALAR: NUL-terminated (may hold NULs) */
	size_t len;  /* Y_SCALAR */
	bool plain;  /* unquoted scalar: subject to null/bool/int rules */
	char *tag;   /* explicit tag ("tag:yaml.org,2002:binary") or NULL */
	struct ynode **kids; /* Y_SEQ items; Y_MAP key, value, key, … */
	size_t n, cap;
};

struct ytree {
	struct ynode *root; /* NULL for an empty document */
	size_t nodes;
};

/* Parse one YAML document. On a syntax error: -1, *line and e say where
 * and what. */
int ytree_parse(const char *text, size_t len, struct ytree *t, int *line,
		struct cerr *e);
void ytree_free(struct ytree *t);
/* Plain null, "~", "null" or an empty plain scalar. */
bool ynode_is_null(const struct ynode *n);
/* YAML 1.1 booleans (yes/no/on/off/true/false), as PyYAML reads them;
 * quoted strings with those words count too, as cloud-init's is_true. */
int ynode_bool(const struct ynode *n, bool *out);
/* YAML 1.1 integers: decimal, 0-prefixed octal, 0x hex, 0b binary. */
int ynode_int(const struct ynode *n, long long *out);
/* The value at key in a mapping, or NULL. */
const struct ynode *ynode_get(const struct ynode *map, const char *key);

#endif
