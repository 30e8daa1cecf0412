// SPDX-License-Identifier: Apache-2.0
/* libyaml's events become a small tree of nodes that remember their line,
 * so that every later complaint about the document can name one. This is
 * the only file that sees libyaml. Aliases are expanded by copying, with
 * the node count capped, so an alias bomb ("billion laughs") fails early
 * instead of eating memory. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util.h"
#include "yamltree.h"

struct anchor {
	char *name;
	struct ynode *node;
	bool complete; /* an alias to an open container would be a cycle */
};

struct builder {
	struct ytree *t;
	struct ynode *stack[YTREE_MAX_DEPTH];
	int depth;
	struct anchor *anchors;
	size_t n_anchors, cap_anchors;
	int docs;
};

static void ynode_free(struct ynode *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n; i++)
		ynode_free(n->kids[i]);
	free(n->kids);
	free(n->value);
	free(n->tag);
	free(n);
}

void ytree_free(struct ytree *t)
{
	ynode_free(t->root);
	t->root = NULL;
	t->nodes = 0;
}

static struct ynode *node_new(struct builder *b, enum ynode_type type, int line,
			      struct cerr *e)
{
	struct ynode *n;

	if (b->t->nodes >= YTREE_MAX_NODES) {
		cerr_set(e, EFBIG, "document has more than %d YAML nodes",
			 YTREE_MAX_NODES);
		return NULL;
	}
	b->t->nodes++;
	n = xcalloc(1, sizeof(*n));
	n->type = type;
	n->line = line;
	return n;
}

static void kid_add(struct ynode *parent, struct ynode *kid)
{
	struct ynode **slot = VEC_PUSH(parent->kids, parent->n, parent->cap);
	*slot = kid;
}

/* Deep copy for an alias; depth is where the copy lands. */
static struct ynode *node_copy(struct builder *b, const struct ynode *src,
			       int depth, struct cerr *e)
{
	struct ynode *n;

	if (depth > YTREE_MAX_DEPTH) {
		cerr_set(e, ELOOP, "YAML nesting deeper than %d levels",
			 YTREE_MAX_DEPTH);
		return NULL;
	}
	n = node_new(b, src->type, src->line, e);
	if (!n)
		return NULL;
	n->plain = src->plain;
	n->len = src->len;
	if (src->value) {
		n->value = xmalloc(src->len + 1);
		memcpy(n->value, src->value, src->len + 1);
	}
	n->tag = src->tag ? xstrdup(src->tag) : NULL;
	for (size_t i = 0; i < src->n; i++) {
		struct ynode *k = node_copy(b, src->kids[i], depth + 1, e);
		if (!k) {
			ynode_free(n);
			return NULL;
		}
		kid_add(n, k);
	}
	return n;
}

/* Hang a finished or just-opened node on the current container. */
static int attach(struct builder *b, struct ynode *n, const yaml_char_t *anc,
		  struct cerr *e)
{
	if (b->depth == 0) {
		if (b->t->root) {
			ynode_free(n);
			return cerr_set(e, EINVAL, "more than one root node");
		}
		b->t->root = n;
	} else {
		kid_add(b->stack[b->depth - 1], n);
	}
	if (anc) {
		struct anchor *a =
		    VEC_PUSH(b->anchors, b->n_anchors, b->cap_anchors);
		a->name = xstrdup((const char *)anc);
		a->node = n;
		a->complete = n->type == Y_SCALAR;
	}
	return 0;
}

static int on_alias(struct builder *b, const yaml_event_t *ev, int line,
		    struct cerr *e)
{
	const char *name = (const char *)ev->data.alias.anchor;
	struct ynode *copy;

	for (size_t i = b->n_anchors; i-- > 0;) {
		struct anchor *a = &b->anchors[i];
		if (strcmp(a->name, name))
			continue;
		if (!a->complete)
			return cerr_set(e, ELOOP,
					"alias *%.64s refers to itself", name);
		copy = node_copy(b, a->node, b->depth, e);
		if (!copy)
			return -1;
		return attach(b, copy, NULL, e);
	}
	return cerr_set(e, ENOENT, "unknown alias *%.64s", name);
}

static char *tag_dup(const yaml_char_t *tag)
{
	/* "!" is the non-specific tag of quoted scalars: no tag at all. */
	if (!tag || !strcmp((const char *)tag, "!"))
		return NULL;
	return xstrdup((const char *)tag);
}

static int on_scalar(struct builder *b, const yaml_event_t *ev, int line,
		     struct cerr *e)
{
	struct ynode *n = node_new(b, Y_SCALAR, line, e);

	if (!n)
		return -1;
	n->len = ev->data.scalar.length;
	n->value = xmemdup(ev->data.scalar.value, n->len);
	n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
	n->tag = tag_dup(ev->data.scalar.tag);
	return attach(b, n, ev->data.scalar.anchor, e);
}

static int on_start(struct builder *b, enum ynode_type type,
		    const yaml_char_t *anchor, const yaml_char_t *tag, int line,
		    struct cerr *e)
{
	struct ynode *n;

	if (b->depth >= YTREE_MAX_DEPTH)
		return cerr_set(e, ELOOP, "YAML nesting deeper than %d levels",
				YTREE_MAX_DEPTH);
	n = node_new(b, type, line, e);
	if (!n)
		return -1;
	n->tag = tag_dup(tag);
	if (attach(b, n, anchor, e) < 0)
		return -1;
	b->stack[b->depth++] = n;
	return 0;
}

static void on_end(struct builder *b)
{
	struct ynode *n = b->stack[--b->depth];

	for (size_t i = 0; i < b->n_anchors; i++)
		if (b->anchors[i].node == n)
			b->anchors[i].complete = true;
}

/* 1 at the end of the stream, 0 to go on, -1 on error. */
static int on_event(struct builder *b, const yaml_event_t *ev, struct cerr *e)
{
	int line = (int)ev->start_mark.line + 1;

	switch (ev->type) {
	case YAML_STREAM_END_EVENT:
		return 1;
	case YAML_DOCUMENT_START_EVENT:
		if (++b->docs > 1)
			return cerr_set(e, EINVAL,
					"more than one YAML document "
					"(a second '---')");
		return 0;
	case YAML_SCALAR_EVENT:
		return on_scalar(b, ev, line, e);
	case YAML_ALIAS_EVENT:
		return on_alias(b, ev, line, e);
	case YAML_SEQUENCE_START_EVENT:
		return on_start(b, Y_SEQ, ev->data.sequence_start.anchor,
				ev->data.sequence_start.tag, line, e);
	case YAML_MAPPING_START_EVENT:
		return on_start(b, Y_MAP, ev->data.mapping_start.anchor,
				ev->data.mapping_start.tag, line, e);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		on_end(b);
		return 0;
	default:
		return 0;
	}
}

static void syntax_error(const yaml_parser_t *p, int *line, struct cerr *e)
{
	*line = (int)p->problem_mark.line + 1;
	if (p->context)
		cerr_set(e, EINVAL, "YAML syntax error: %s %s (from line %d)",
			 p->problem ? p->problem : "error", p->context,
			 (int)p->context_mark.line + 1);
	else
		cerr_set(e, EINVAL, "YAML syntax error: %s",
			 p->problem ? p->problem : "error");
}

int ytree_parse(const char *text, size_t len, struct ytree *t, int *line,
		struct cerr *e)
{
	struct builder b = {.t = t};
	yaml_parser_t p;
	int r = 0;

	memset(t, 0, sizeof(*t));
	*line = 0;
	if (!yaml_parser_initialize(&p))
		abort(); /* only fails on out of memory */
	/* libyaml asserts on a NULL input, even an empty one. */
	yaml_parser_set_input_string(
	    &p, (const unsigned char *)(text ? text : ""), text ? len : 0);
	while (r == 0) {
		yaml_event_t ev;

		if (!yaml_parser_parse(&p, &ev)) {
			syntax_error(&p, line, e);
			r = -1;
			break;
		}
		r = on_event(&b, &ev, e);
		if (r < 0)
			*line = (int)ev.start_mark.line + 1;
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	for (size_t i = 0; i < b.n_anchors; i++)
		free(b.anchors[i].name);
	free(b.anchors);
	if (r < 0) {
		ytree_free(t);
		return -1;
	}
	return 0;
}

static bool word_in(const char *s, const char *const *words)
{
	for (; *words; words++)
		if (!strcmp(s, *words))
			return true;
	return false;
}

bool ynode_is_null(const struct ynode *n)
{
	static const char *const nulls[] = {"",	    "~",    "null",
					    "Null", "NULL", NULL};

	if (!n)
		return true;
	if (n->type != Y_SCALAR)
		return false;
	if (n->tag)
		return !strcmp(n->tag, "tag:yaml.org,2002:null");
	return n->plain && word_in(n->value, nulls);
}

int ynode_bool(const struct ynode *n, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", NULL};
	static const char *const no[] = {"no", "false", "off", NULL};
	char low[8];
	size_t i;

	if (!n || n->type != Y_SCALAR || n->len >= sizeof(low))
		return -1;
	/* PyYAML takes yes/Yes/YES but not yEs; cloud-init's is_true lowers
	 * quoted strings. Both end up case-blind in practice. */
	for (i = 0; i < n->len; i++)
		low[i] = (char)((n->value[i] >= 'A' && n->value[i] <= 'Z')
				    ? n->value[i] + 32
				    : n->value[i]);
	low[i] = '\0';
	if (word_in(low, yes))
		*out = true;
	else if (word_in(low, no))
		*out = false;
	else
		return -1;
	return 0;
}

int ynode_int(const struct ynode *n, long long *out)
{
	const char *s;
	unsigned long long v = 0;
	unsigned base = 10;
	bool neg = false, digits = false;

	if (!n || n->type != Y_SCALAR ||
	    (!n->plain &&
	     !(n->tag && !strcmp(n->tag, "tag:yaml.org,2002:int"))))
		return -1;
	s = n->value;
	if (*s == '-' || *s == '+')
		neg = *s++ == '-';
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		base = 16, s += 2;
	else if (s[0] == '0' && (s[1] == 'b' || s[1] == 'B'))
		base = 2, s += 2;
	else if (s[0] == '0' && s[1])
		base = 8, s += 1; /* YAML 1.1, as PyYAML: 0644 is octal */
	for (; *s; s++) {
		unsigned d;

		if (*s == '_')
			continue;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (*s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			return -1;
		if (d >= base || v > (unsigned long long)LLONG_MAX / base)
			return -1;
		v = v * base + d;
		digits = true;
	}
	if (!digits || v > (unsigned long long)LLONG_MAX)
		return -1;
	*out = neg ? -(long long)v : (long long)v;
	return 0;
}

const struct ynode *ynode_get(const struct ynode *map, const char *key)
{
	const struct ynode *found = NULL;

	if (!map || map->type != Y_MAP)
		return NULL;
	for (size_t i = 0; i + 1 < map->n; i += 2) {
		const struct ynode *k = map->kids[i];
		if (k->type == Y_SCALAR && !strcmp(k->value, key))
			found = map->kids[i + 1];
	}
	return found;
}
