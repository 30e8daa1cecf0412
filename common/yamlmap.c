// SPDX-License-Identifier: Apache-2.0
/* libyaml events into a flat string map. The whole document is checked
 * before anything is returned, so a caller that writes the entries out
 * never acts on half a payload. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "util.h"
#include "yamlmap.h"

void yamlmap_free(struct yamlmap *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->v[i].key);
		free(m->v[i].value);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

const char *yamlmap_get(const struct yamlmap *m, const char *key)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->v[i].key, key))
			return m->v[i].value;
	return NULL;
}

struct ymp {
	struct yamlmap *m;
	char *key; /* a key waiting for its value */
	int key_line, depth;
	size_t cap;
	bool done;
};

static int add(struct ymp *p, const char *value, struct cerr *e)
{
	if (yamlmap_get(p->m, p->key))
		return cerr_set(e, EINVAL, "line %d: duplicate key \"%s\"",
				p->key_line, p->key);
	if (p->m->n == YAMLMAP_MAX_ENTRIES)
		return cerr_set(e, EFBIG, "line %d: more than %d keys",
				p->key_line, YAMLMAP_MAX_ENTRIES);
	if (p->m->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 8;
		p->m->v = xrealloc(p->m->v, p->cap * sizeof(*p->m->v));
	}
	p->m->v[p->m->n++] = (struct yamlmap_entry){
	    .key = p->key, .value = xstrdup(value), .line = p->key_line};
	p->key = NULL;
	return 0;
}

static int scalar(struct ymp *p, const yaml_event_t *ev, int line,
		  struct cerr *e)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;

	if (p->depth != 1)
		return cerr_set(e, EINVAL, "line %d: not a map of strings",
				line);
	if (strlen(s) != len)
		return cerr_set(e, EINVAL, "line %d: a NUL byte in a %s", line,
				p->key ? "value" : "key");
	if (!p->key) {
		if (!len)
			return cerr_set(e, EINVAL, "line %d: an empty key",
					line);
		p->key = xstrdup(s);
		p->key_line = line;
		return 0;
	}
	return add(p, s, e);
}

static int event(struct ymp *p, const yaml_event_t *ev, struct cerr *e)
{
	int line = (int)ev->start_mark.line + 1;

	switch (ev->type) {
	case YAML_MAPPING_START_EVENT:
		if (p->depth++ != 0)
			return cerr_set(e, EINVAL,
					"line %d: a nested map (values must be "
					"strings)",
					line);
		return 0;
	case YAML_MAPPING_END_EVENT:
		p->depth--;
		return 0;
	case YAML_SCALAR_EVENT:
		return scalar(p, ev, line, e);
	case YAML_SEQUENCE_START_EVENT:
		return cerr_set(e, EINVAL,
				"line %d: a list (values must be strings)",
				line);
	case YAML_ALIAS_EVENT:
		return cerr_set(e, EINVAL, "line %d: an alias", line);
	case YAML_DOCUMENT_START_EVENT:
		if (p->m->n || p->depth)
			return cerr_set(
			    e, EINVAL, "line %d: more than one document", line);
		return 0;
	case YAML_STREAM_END_EVENT:
		p->done = true;
		return 0;
	default:
		return 0;
	}
}

int yamlmap_parse(const char *text, size_t len, struct yamlmap *out,
		  struct cerr *e)
{
	struct ymp p = {.m = out};
	yaml_parser_t yp;
	int r = 0;

	memset(out, 0, sizeof(*out));
	if (!yaml_parser_initialize(&yp))
		return cerr_set(e, ENOMEM, "yaml_parser_initialize");
	yaml_parser_set_input_string(&yp, (const unsigned char *)text, len);
	while (!p.done && r == 0) {
		yaml_event_t ev;

		if (!yaml_parser_parse(&yp, &ev)) {
			r = cerr_set(
			    e, EINVAL, "line %zu: %s", yp.problem_mark.line + 1,
			    yp.problem ? yp.problem : "malformed YAML");
			break;
		}
		r = event(&p, &ev, e);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&yp);
	if (r == 0 && p.key)
		r = cerr_set(e, EINVAL, "line %d: a key without a value",
			     p.key_line);
	free(p.key);
	if (r < 0)
		yamlmap_free(out);
	return r;
}
