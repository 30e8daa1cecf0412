// SPDX-License-Identifier: Apache-2.0
/* YAML → jansson (yamljson.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "yamljson.h"
#include "yamltree.h"

static bool is_float(const char *s)
{
	char *end;

	if (!strcmp(s, ".inf") || !strcmp(s, "-.inf") || !strcmp(s, ".nan"))
		return false; /* JSON has no such numbers: keep the text */
	if (!*s || !(isdigit((unsigned char)*s) || *s == '-' || *s == '+' ||
		     *s == '.'))
		return false;
	strtod(s, &end);
	return *end == 0 && strpbrk(s, "0123456789");
}

static json_t *scalar(const struct ynode *n)
{
	bool b;
	long long i;

	if (!n->plain || n->tag)
		return json_stringn(n->value, n->len);
	if (ynode_is_null(n))
		return json_null();
	if (ynode_bool(n, &b) == 0)
		return json_boolean(b);
	if (ynode_int(n, &i) == 0)
		return json_integer(i);
	if (is_float(n->value))
		return json_real(strtod(n->value, NULL));
	return json_stringn(n->value, n->len);
}

static json_t *to_json(const struct ynode *n, struct cerr *e)
{
	json_t *j;

	if (!n)
		return json_null();
	if (n->type == Y_SCALAR) {
		j = scalar(n);
		if (!j)
			cerr_set(e, EINVAL, "line %d: not UTF-8 text", n->line);
		return j;
	}
	j = n->type == Y_SEQ ? json_array() : json_object();
	for (size_t i = 0; i < n->n; i += n->type == Y_MAP ? 2 : 1) {
		json_t *v = to_json(n->kids[i + (n->type == Y_MAP)], e);
		if (!v) {
			json_decref(j);
			return NULL;
		}
		if (n->type == Y_SEQ) {
			json_array_append_new(j, v);
			continue;
		}
		const struct ynode *k = n->kids[i];
		if (k->type != Y_SCALAR) {
			json_decref(v);
			json_decref(j);
			cerr_set(e, EINVAL, "line %d: a key that is not text",
				 k->line);
			return NULL;
		}
		json_object_setn_new(j, k->value, k->len, v);
	}
	return j;
}

json_t *yaml_to_json(const char *text, size_t len, struct cerr *e)
{
	struct ytree t;
	json_t *j;
	int line = 0;

	if (ytree_parse(text, len, &t, &line, e) < 0) {
		cerr_prefix(e, "YAML line %d", line);
		return NULL;
	}
	j = to_json(t.root, e);
	ytree_free(&t);
	return j;
}

json_t *yaml_json_parse(const char *text, size_t len, struct cerr *e)
{
	size_t i = 0;
	json_error_t je;
	json_t *j;

	while (i < len && isspace((unsigned char)text[i]))
		i++;
	if (i < len && (text[i] == '{' || text[i] == '[')) {
		j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
		if (!j)
			cerr_set(e, EINVAL, "JSON line %d: %s", je.line,
				 je.text);
		return j;
	}
	return yaml_to_json(text, len, e);
}
