// SPDX-License-Identifier: Apache-2.0
/* Kubernetes manifests (YAML or JSON) into one jansson value. YAML goes
 * through common/yamltree (the project's one reader of YAML documents, with
 * its node and depth caps) and becomes JSON the way sigs.k8s.io/yaml reads it:
 * YAML 1.1 plain scalars become null, booleans, integers or floats; quoted
 * scalars stay strings. This is the only controller file that sees YAML. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cellctl.h"
#include "ctl-internal.h"
#include "yamltree.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"

#define MANIFEST_MAX (4u << 20)

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

json_t *kdoc_parse(const char *text, size_t len, struct cerr *e)
{
	size_t i = 0;
	struct ytree t;
	json_error_t je;
	json_t *j;
	int line = 0;

	if (len > MANIFEST_MAX) {
		cerr_set(e, EFBIG, "manifest over %u bytes", MANIFEST_MAX);
		return NULL;
	}
	while (i < len && isspace((unsigned char)text[i]))
		i++;
	if (i < len && (text[i] == '{' || text[i] == '[')) {
		j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
		if (!j)
			cerr_set(e, EINVAL, "JSON line %d: %s", je.line,
				 je.text);
		return j;
	}
	if (ytree_parse(text, len, &t, &line, e) < 0) {
		cerr_prefix(e, "YAML line %d", line);
		return NULL;
	}
	j = to_json(t.root, e);
	ytree_free(&t);
	return j;
}

json_t *kdoc_load(const char *path, struct cerr *e)
{
	struct buf b;
	json_t *j = NULL;

	buf_init(&b, MANIFEST_MAX);
	if (fs_read_file(path, &b, e) == 0)
		j = kdoc_parse(b.data ? b.data : "", b.len, e);
	buf_free(&b);
	if (!j)
		cerr_prefix(e, "%s", path);
	return j;
}

const json_t *k8s_find_object(const json_t *objects, const char *kind,
			      const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach(objects, i, o)
	{
		if (!strcmp(js(o, "kind"), kind) &&
		    !strcmp(js(jget(o, "metadata"), "name"), name))
			return o;
	}
	return NULL;
}
