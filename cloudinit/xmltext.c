// SPDX-License-Identifier: Apache-2.0
/* A small bounded XML reader for the two Azure documents cells read:
 * ovf-env.xml from the provisioning medium and the wire server's goal
 * state. It finds the text of the first element at a path of local names
 * (namespace prefixes ignored), decoding the five predefined entities,
 * character references and CDATA. No DTDs (a <!DOCTYPE is refused, so no
 * entity expansion can happen), no external anything, depth and sizes
 * capped. Pure: fuzzed by tests/fuzz/fuzz-xmltext.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"
#include "util.h"

#define XML_MAX_DEPTH 32
#define XML_MAX_NAME 128

struct xr {
	const char *p, *end;
	const char *const *path;
	size_t path_len;
	char stack[XML_MAX_DEPTH][XML_MAX_NAME];
	size_t depth;
	size_t matched; /* how many leading path entries the stack matches */
	struct buf *out;
	bool found, in_target;
};

static bool starts(const struct xr *x, const char *s)
{
	size_t n = strlen(s);

	return (size_t)(x->end - x->p) >= n && !memcmp(x->p, s, n);
}

/* Skip past `until`; EPROTO when the document ends first. */
static int skip_past(struct xr *x, const char *until, struct cerr *e)
{
	size_t n = strlen(until);

	for (; x->p + n <= x->end; x->p++)
		if (!memcmp(x->p, until, n)) {
			x->p += n;
			return 0;
		}
	return cerr_set(e, EPROTO, "unterminated markup (want \"%s\")", until);
}

static bool name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.' ||
	       c == ':' || (unsigned char)c >= 0x80;
}

/* The local name (after the last ':') of the tag name at p. */
static int read_name(struct xr *x, char out[XML_MAX_NAME], struct cerr *e)
{
	const char *s = x->p, *local;

	while (x->p < x->end && name_char(*x->p))
		x->p++;
	if (x->p == s)
		return cerr_set(e, EPROTO, "a tag without a name");
	local = s;
	for (const char *q = s; q < x->p; q++)
		if (*q == ':')
			local = q + 1;
	if (x->p - local >= XML_MAX_NAME || x->p == local)
		return cerr_set(e, EPROTO, "a tag name too long or empty");
	memcpy(out, local, (size_t)(x->p - local));
	out[x->p - local] = '\0';
	return 0;
}

static int emit(struct xr *x, const char *p, size_t n, struct cerr *e)
{
	if (!x->in_target)
		return 0;
	return buf_append(x->out, p, n, e);
}

static int put_utf8(struct xr *x, unsigned long cp, struct cerr *e)
{
	char b[4];
	size_t n;

	if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return cerr_set(e, EPROTO, "a bad character reference");
	if (cp < 0x80) {
		b[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		b[0] = (char)(0xC0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		b[0] = (char)(0xE0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		b[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		b[0] = (char)(0xF0 | (cp >> 18));
		b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		b[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return emit(x, b, n, e);
}

static int entity(struct xr *x, struct cerr *e)
{
	static const struct {
		const char *name, *text;
	} ents[] = {{"&lt;", "<"},
		    {"&gt;", ">"},
		    {"&amp;", "&"},
		    {"&quot;", "\""},
		    {"&apos;", "'"}};
	const char *semi;
	unsigned long cp;
	char *end;

	for (size_t i = 0; i < ARRAY_SIZE(ents); i++)
		if (starts(x, ents[i].name)) {
			x->p += strlen(ents[i].name);
			return emit(x, ents[i].text, 1, e);
		}
	semi =
	    memchr(x->p, ';',
		   (size_t)(x->end - x->p) < 12 ? (size_t)(x->end - x->p) : 12);
	if (!starts(x, "&#") || !semi)
		return cerr_set(e, EPROTO, "an unknown entity reference");
	if (x->p[2] == 'x')
		cp = strtoul(x->p + 3, &end, 16);
	else
		cp = strtoul(x->p + 2, &end, 10);
	if (end != semi || end == x->p + 2 || end == x->p + 3)
		return cerr_set(e, EPROTO, "a bad character reference");
	x->p = semi + 1;
	return put_utf8(x, cp, e);
}

static int text(struct xr *x, struct cerr *e)
{
	while (x->p < x->end && *x->p != '<') {
		const char *s = x->p;
		if (*x->p == '&') {
			if (entity(x, e) < 0)
				return -1;
			continue;
		}
		while (x->p < x->end && *x->p != '<' && *x->p != '&')
			x->p++;
		if (emit(x, s, (size_t)(x->p - s), e) < 0)
			return -1;
	}
	return 0;
}

/* Attributes are skipped, honouring quotes (a '>' may sit in a value). */
static int skip_attrs(struct xr *x, bool *empty, struct cerr *e)
{
	while (x->p < x->end) {
		char c = *x->p;
		if (c == '"' || c == '\'') {
			const char *q =
			    memchr(x->p + 1, c, (size_t)(x->end - x->p - 1));
			if (!q)
				break;
			x->p = q + 1;
			continue;
		}
		if (c == '<')
			return cerr_set(e, EPROTO, "'<' inside a tag");
		if (c == '>') {
			*empty = x->p[-1] == '/';
			x->p++;
			return 0;
		}
		x->p++;
	}
	return cerr_set(e, EPROTO, "an unterminated tag");
}

static void update_match(struct xr *x)
{
	size_t m = 0;

	while (m < x->depth && m < x->path_len &&
	       !strcmp(x->stack[m], x->path[m]))
		m++;
	x->matched = m;
	x->in_target = !x->found && m == x->path_len && x->depth == m;
}

static int open_tag(struct xr *x, struct cerr *e)
{
	char name[XML_MAX_NAME];
	bool empty = false;

	if (read_name(x, name, e) < 0 || skip_attrs(x, &empty, e) < 0)
		return -1;
	if (x->depth == XML_MAX_DEPTH)
		return cerr_set(e, EPROTO, "nested deeper than %d",
				XML_MAX_DEPTH);
	memcpy(x->stack[x->depth++], name, sizeof(name));
	update_match(x);
	if (empty) {
		if (x->in_target)
			x->found = true;
		x->depth--;
		update_match(x);
	}
	return 0;
}

static int close_tag(struct xr *x, struct cerr *e)
{
	char name[XML_MAX_NAME];

	if (read_name(x, name, e) < 0)
		return -1;
	while (x->p < x->end && (*x->p == ' ' || *x->p == '\t' ||
				 *x->p == '\n' || *x->p == '\r'))
		x->p++;
	if (x->p == x->end || *x->p != '>')
		return cerr_set(e, EPROTO, "a bad closing tag");
	x->p++;
	if (!x->depth || strcmp(x->stack[x->depth - 1], name) != 0)
		return cerr_set(e, EPROTO, "</%s> closes the wrong element",
				name);
	if (x->in_target)
		x->found = true;
	x->depth--;
	update_match(x);
	return 0;
}

static int markup(struct xr *x, struct cerr *e)
{
	if (starts(x, "<!--"))
		return skip_past(x, "-->", e);
	if (starts(x, "<?"))
		return skip_past(x, "?>", e);
	if (starts(x, "<![CDATA[")) {
		const char *s = x->p + 9;
		x->p = s;
		if (skip_past(x, "]]>", e) < 0)
			return -1;
		return emit(x, s, (size_t)(x->p - 3 - s), e);
	}
	if (starts(x, "<!"))
		return cerr_set(e, EPROTO, "DTDs are not accepted");
	x->p++;
	if (x->p < x->end && *x->p == '/') {
		x->p++;
		return close_tag(x, e);
	}
	return open_tag(x, e);
}

int ci_xml_text(const char *xml, size_t len, const char *const *path,
		size_t path_len, struct buf *out, struct cerr *e)
{
	struct xr x = {.p = xml,
		       .end = xml + len,
		       .path = path,
		       .path_len = path_len,
		       .out = out};

	if (!path_len || path_len > XML_MAX_DEPTH)
		return cerr_set(e, EINVAL, "a bad XML path");
	while (x.p < x.end && !x.found) {
		int r = *x.p == '<' ? markup(&x, e) : text(&x, e);
		if (r < 0)
			return cerr_prefix(e, "XML at byte %zu",
					   (size_t)(x.p - xml));
	}
	return x.found ? 1 : 0;
}
