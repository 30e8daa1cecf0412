// SPDX-License-Identifier: Apache-2.0
/* The user-data blob: what kind it is (cloud-config, script, boothook,
 * MIME multipart, gzip), unwrapped recursively into one struct ci_config.
 * Pure: buffer in, struct and problems out; no I/O, no logging, which is
 * what makes it fuzzable (tests/fuzz/fuzz-userdata.c). */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ci-internal.h"
#include "util.h"

static bool starts(const char *p, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);
	return n >= k && !memcmp(p, prefix, k);
}

static bool starts_ci(const char *p, size_t n, const char *prefix)
{
	size_t k = strlen(prefix);
	return n >= k && !strncasecmp(p, prefix, k);
}

/* The kinds by first bytes, as cloud-init's type_from_starts_with; the
 * longer "#cloud-config-…" spellings must be tested before #cloud-config. */
enum ci_kind ci_userdata_kind(const char *p, size_t n, const char **what)
{
	static const char *const unsupported[] = {
	    "#cloud-config-archive", "#cloud-config-jsonp",
	    "#include-once",	     "#include",
	    "#part-handler",	     "#upstart-job",
	    "## template: jinja",
	};
	size_t i = 0;

	*what = NULL;
	while (i < n && isspace((unsigned char)p[i]))
		i++;
	if (i == n)
		return CI_KIND_EMPTY;
	if (gunzip_is_gzip(p, n))
		return CI_KIND_GZIP;
	for (size_t k = 0; k < ARRAY_SIZE(unsupported); k++)
		if (starts(p, n, unsupported[k])) {
			*what = unsupported[k];
			return CI_KIND_UNSUPPORTED;
		}
	if (starts(p, n, "#cloud-config"))
		return CI_KIND_CLOUD_CONFIG;
	if (starts(p, n, "#cloud-boothook"))
		return CI_KIND_BOOTHOOK;
	if (starts(p, n, "#!"))
		return CI_KIND_SCRIPT;
	if (starts_ci(p, n, "Content-Type:") ||
	    starts_ci(p, n, "MIME-Version:"))
		return CI_KIND_MIME;
	return CI_KIND_UNKNOWN;
}

/* A script's file name as cloud-init's clean_filename makes it: '/'
 * becomes '_', characters outside [A-Za-z0-9_.()-] are dropped; a part
 * without a usable name is part-NNN, its 1-based place among the parts. */
static char *script_name(struct ci_parse *ps, const char *filename)
{
	static const char ok[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
	    "vwxyz0123456789_-.()";
	char name[129];
	size_t k = 0;

	for (const char *f = filename; f && *f && k < sizeof(name) - 1; f++) {
		if (*f == '/')
			name[k++] = '_';
		else if (strchr(ok, *f))
			name[k++] = *f;
	}
	name[k] = '\0';
	if (!k || !strcmp(name, ".") || !strcmp(name, ".."))
		return xasprintf("part-%03d", ps->n_parts ? ps->n_parts : 1);
	return xstrdup(name);
}

/* A later part of the same name replaces the earlier one, as the file it
 * is written to does in cloud-init. */
static struct ci_script *script_slot(struct ci_script **v, size_t *n,
				     size_t *cap, char *name)
{
	struct ci_script *s;

	for (size_t i = 0; i < *n; i++) {
		if (strcmp((*v)[i].name, name))
			continue;
		s = &(*v)[i];
		free(s->body);
		free(s->name);
		s->name = name;
		return s;
	}
	s = VEC_PUSH(*v, *n, *cap);
	s->name = name;
	return s;
}

void ci_parse_script(struct ci_parse *ps, bool boothook, const char *p,
		     size_t n, const char *filename)
{
	struct ci_config *c = ps->cfg;
	struct ci_script *s;

	if (boothook) {
		/* cloud-init strips the "#cloud-boothook" line; what is left
		 * runs as a script (through /bin/sh without a #! line). */
		const char *nl = memchr(p, '\n', n);
		size_t skip = !starts(p, n, "#cloud-boothook") ? 0
			      : nl ? (size_t)(nl - p) + 1
				   : n;
		s = script_slot(&c->boothooks, &c->n_boothooks,
				&c->cap_boothooks, script_name(ps, filename));
		p += skip;
		n -= skip;
	} else {
		s = script_slot(&c->scripts, &c->n_scripts, &c->cap_scripts,
				script_name(ps, filename));
	}
	s->body = xmemdup(p, n);
	s->len = n;
}

/* Replace one placeholder in text; NULL value leaves it (with a warning,
 * since the command would then see the literal "$public_ipv4"). */
static void substitute(struct ci_parse *ps, struct buf *text, const char *name,
		       const char *value)
{
	struct buf out;
	struct cerr e = {0};
	size_t nlen = strlen(name), i = 0;
	const char *hit;

	hit = memmem(text->data, text->len, name, nlen);
	if (!hit)
		return;
	if (!value) {
		int line = 1;
		for (const char *q = text->data; q < hit; q++)
			line += *q == '\n';
		ci_problem_add(&ps->cfg->problems, CI_WARN, ps->part, line,
			       "%s is used but the meta-data has no value for "
			       "it; left as is",
			       name);
		return;
	}
	buf_init(&out, CI_MAX_USERDATA);
	for (;;) {
		size_t at = hit ? (size_t)(hit - text->data) : text->len;

		if (buf_append(&out, text->data + i, at - i, &e) < 0 || !hit)
			break;
		if (buf_append(&out, value, strlen(value), &e) < 0)
			break;
		i = at + nlen;
		hit = memmem(text->data + i, text->len - i, name, nlen);
	}
	if (e.code) {
		ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part, 0,
			       "substituting %s: %s", name, e.msg);
		buf_free(&out);
		return;
	}
	buf_free(text);
	*text = out;
}

void ci_parse_cloud_config(struct ci_parse *ps, const char *p, size_t n)
{
	struct buf text;
	struct cerr e = {0};
	static const struct ci_vars none;
	const struct ci_vars *v = ps->vars ? ps->vars : &none;

	ps->cfg->cloud_config = true;
	buf_init(&text, CI_MAX_USERDATA);
	if (buf_append(&text, p, n, &e) < 0) {
		ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part, 0,
			       "cloud-config: %s", e.msg);
		return;
	}
	if (ps->vars) {
		substitute(ps, &text, "$private_ipv4", v->private_ipv4);
		substitute(ps, &text, "$public_ipv4", v->public_ipv4);
	}
	ci_cloud_config_parse(ps, text.data, text.len);
	buf_free(&text);
}

void ci_parse_gzip(struct ci_parse *ps, const char *p, size_t n,
		   const char *filename, int depth)
{
	struct buf out;
	struct cerr e = {0};

	/* One budget for every gunzip in the document, so nesting cannot
	 * multiply the cap. */
	buf_init(&out, CI_MAX_USERDATA - ps->inflated);
	if (ps->inflated >= CI_MAX_USERDATA || gunzip_buf(p, n, &out, &e) < 0) {
		if (!e.code)
			cerr_set(&e, EFBIG, "data exceeds the limit");
		ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part, 0,
			       "compressed user data: %s (limit %u bytes "
			       "decompressed)",
			       e.msg, CI_MAX_USERDATA);
		buf_free(&out);
		return;
	}
	ps->inflated += out.len;
	ci_parse_blob(ps, out.data, out.len, filename, depth + 1);
	buf_free(&out);
}

void ci_parse_blob(struct ci_parse *ps, const char *p, size_t n,
		   const char *filename, int depth)
{
	struct ci_problems *pr = &ps->cfg->problems;
	const char *what;

	if (depth > CI_MAX_MIME_DEPTH) {
		ci_problem_add(pr, CI_ERROR, ps->part, 0,
			       "user data nested more than %d levels deep",
			       CI_MAX_MIME_DEPTH);
		return;
	}
	switch (ci_userdata_kind(p, n, &what)) {
	case CI_KIND_GZIP:
		ci_parse_gzip(ps, p, n, filename, depth);
		break;
	case CI_KIND_CLOUD_CONFIG:
		ci_parse_cloud_config(ps, p, n);
		break;
	case CI_KIND_SCRIPT:
		ci_parse_script(ps, false, p, n, filename);
		break;
	case CI_KIND_BOOTHOOK:
		ci_parse_script(ps, true, p, n, filename);
		break;
	case CI_KIND_MIME:
		ci_mime_parse(ps, p, n, depth + 1);
		break;
	case CI_KIND_EMPTY:
		break;
	case CI_KIND_UNSUPPORTED:
		ci_problem_add(pr, CI_WARN, ps->part, 1,
			       "'%s' user data is not supported; ignored",
			       what);
		break;
	case CI_KIND_UNKNOWN: {
		int k = 0;
		while ((size_t)k < n && k < 20 && isprint((unsigned char)p[k]))
			k++;
		ci_problem_add(pr, CI_WARN, ps->part, 1,
			       "user data of unknown type (starts with "
			       "'%.*s'); ignored",
			       k, p);
		break;
	}
	}
}

static bool type_in(const char *type, const char *const *list)
{
	for (; *list; list++)
		if (!strcmp(type, *list))
			return true;
	return false;
}

/* One decoded part of a MIME multipart (mime.c calls it through
 * ps->part_fn), by its content type. */
static void parse_part(struct ci_parse *ps, const char *type, const char *fn,
		       const char *p, size_t n, int depth)
{
	static const char *const by_content[] = {
	    "",
	    "text/plain",
	    "text/x-not-multipart",
	    "application/octet-stream",
	    "application/x-gzip",
	    "application/gzip",
	    "application/x-gzip-compressed",
	    NULL};
	static const char *const unsupported[] = {
	    "text/x-include-url",
	    "text/x-include-once-url",
	    "text/cloud-config-archive",
	    "text/cloud-config-jsonp",
	    "text/part-handler",
	    "text/upstart-job",
	    "text/jinja2",
	    "text/x-shellscript-per-boot",
	    "text/x-shellscript-per-instance",
	    "text/x-shellscript-per-once",
	    NULL};

	if (gunzip_is_gzip(p, n)) {
		/* A gzip'd part is unwrapped first; its type then comes from
		 * its content, as cloud-init does. */
		ci_parse_gzip(ps, p, n, fn, depth);
	} else if (type_in(type, by_content)) {
		ci_parse_blob(ps, p, n, fn, depth);
	} else if (!strcmp(type, "text/cloud-config")) {
		ci_parse_cloud_config(ps, p, n);
	} else if (!strcmp(type, "text/x-shellscript")) {
		ci_parse_script(ps, false, p, n, fn);
	} else if (!strcmp(type, "text/cloud-boothook")) {
		ci_parse_script(ps, true, p, n, fn);
	} else if (type_in(type, unsupported)) {
		ci_problem_add(&ps->cfg->problems, CI_WARN, ps->part, 0,
			       "%s parts are not supported; ignored", type);
	} else {
		ci_problem_add(&ps->cfg->problems, CI_WARN, ps->part, 0,
			       "unknown content type '%s'; part ignored", type);
	}
}

int ci_userdata_parse(const void *data, size_t len, const struct ci_vars *vars,
		      struct ci_config *out)
{
	struct ci_parse ps = {.cfg = out, .vars = vars, .part_fn = parse_part};

	memset(out, 0, sizeof(*out));
	if (len > CI_MAX_USERDATA) {
		ci_problem_add(&out->problems, CI_ERROR, NULL, 0,
			       "user data is %zu bytes, over the limit of %u",
			       len, CI_MAX_USERDATA);
		return -1;
	}
	ci_parse_blob(&ps, data, len, NULL, 0);
	free(ps.part);
	return out->problems.errors ? -1 : 0;
}
