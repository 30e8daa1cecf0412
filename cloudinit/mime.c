// SPDX-License-Identifier: Apache-2.0
/* MIME multipart user data, as cloud-init's write-mime-multipart and
 * Python's email package make it: a header block, then parts between
 * "--boundary" lines, each with its own headers. Parts may be base64 or
 * quoted-printable, gzip'd, or multipart again (nesting is capped). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "util.h"

/* One (unfolded) header line; it lives on the stack of each nesting level. */
#define MIME_HEADER_MAX 16384

struct mime_headers {
	char type[128];	    /* media type, lowercased; "" when absent */
	char boundary[80];  /* RFC 2046: at most 70 characters */
	char encoding[32];  /* Content-Transfer-Encoding, lowercased */
	char filename[128]; /* from Content-Disposition or name= */
};

static void copy_lower(char *dst, size_t cap, const char *s, size_t n)
{
	size_t k = n < cap - 1 ? n : cap - 1;
	for (size_t i = 0; i < k; i++)
		dst[i] = (char)tolower((unsigned char)s[i]);
	dst[k] = '\0';
}

static void trim(const char **s, size_t *n)
{
	while (*n && isspace((unsigned char)**s))
		(*s)++, (*n)--;
	while (*n && isspace((unsigned char)(*s)[*n - 1]))
		(*n)--;
}

/* The value of parameter `name` in "type/sub; a=b; name="v"". */
static void header_param(const char *v, size_t n, const char *name, char *dst,
			 size_t cap)
{
	size_t k = strlen(name);

	for (size_t i = 0; i < n; i++) {
		const char *s;
		size_t len;

		if (v[i] != ';')
			continue;
		i++;
		while (i < n && isspace((unsigned char)v[i]))
			i++;
		if (n - i <= k || strncasecmp(v + i, name, k) ||
		    v[i + k] != '=')
			continue;
		s = v + i + k + 1;
		len = n - (i + k + 1);
		if (len && *s == '"') {
			const char *q = memchr(s + 1, '"', len - 1);
			len = q ? (size_t)(q - s - 1) : len - 1;
			s++;
		} else {
			const char *q = memchr(s, ';', len);
			len = q ? (size_t)(q - s) : len;
			trim(&s, &len);
		}
		if (len < cap) {
			memcpy(dst, s, len);
			dst[len] = '\0';
		}
		return;
	}
}

static void header_one(struct mime_headers *h, const char *name, size_t nlen,
		       const char *v, size_t vlen)
{
	trim(&v, &vlen);
	if (nlen == 12 && !strncasecmp(name, "content-type", 12)) {
		size_t t = 0;
		while (t < vlen && v[t] != ';' && !isspace((unsigned char)v[t]))
			t++;
		copy_lower(h->type, sizeof(h->type), v, t);
		header_param(v, vlen, "boundary", h->boundary,
			     sizeof(h->boundary));
		if (!h->filename[0])
			header_param(v, vlen, "name", h->filename,
				     sizeof(h->filename));
	} else if (nlen == 25 &&
		   !strncasecmp(name, "content-transfer-encoding", 25)) {
		copy_lower(h->encoding, sizeof(h->encoding), v, vlen);
	} else if (nlen == 19 &&
		   !strncasecmp(name, "content-disposition", 19)) {
		header_param(v, vlen, "filename", h->filename,
			     sizeof(h->filename));
	}
}

/* Parse the header block (folded lines unfolded); *body is where the
 * content starts, after the blank line. */
static int headers_parse(const char *p, size_t n, struct mime_headers *h,
			 size_t *body)
{
	char line[MIME_HEADER_MAX];
	size_t i = 0, ll = 0;

	memset(h, 0, sizeof(*h));
	for (;;) {
		const char *nl = memchr(p + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - p) : n, len = end - i;
		const char *s = p + i;
		bool blank;

		if (len && s[len - 1] == '\r')
			len--;
		blank = len == 0;
		/* A line starting with blanks continues the previous one. */
		if (!blank && (*s == ' ' || *s == '\t') && ll) {
			if (ll + len >= sizeof(line))
				return -1;
			memcpy(line + ll, s, len);
			ll += len;
		} else {
			const char *colon = ll ? memchr(line, ':', ll) : NULL;
			if (colon)
				header_one(h, line, (size_t)(colon - line),
					   colon + 1,
					   ll - (size_t)(colon - line) - 1);
			if (len >= sizeof(line))
				return -1;
			memcpy(line, s, len);
			ll = len;
		}
		i = nl ? end + 1 : n;
		if (blank || !nl) {
			*body = i;
			return 0;
		}
	}
}

static int qp_decode(const char *p, size_t n, struct buf *out, struct cerr *e)
{
	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (c == '=' && i + 1 < n &&
		    (p[i + 1] == '\n' || p[i + 1] == '\r')) {
			i += p[i + 1] == '\r' && i + 2 < n && p[i + 2] == '\n'
				 ? 2
				 : 1;
			continue; /* a soft line break */
		}
		if (c == '=' && i + 2 < n &&
		    isxdigit((unsigned char)p[i + 1]) &&
		    isxdigit((unsigned char)p[i + 2])) {
			char hex[3] = {p[i + 1], p[i + 2], 0};
			c = (char)strtol(hex, NULL, 16);
			i += 2;
		}
		if (buf_append(out, &c, 1, e) < 0)
			return -1;
	}
	return buf_append(out, "", 0, e);
}

/* Undo the transfer encoding into out; -1 with a problem when unknown. */
static int transfer_decode(struct ci_parse *ps, const struct mime_headers *h,
			   const char *p, size_t n, struct buf *out)
{
	struct cerr e = {0};
	int r;

	if (!strcmp(h->encoding, "base64"))
		r = ci_b64_decode(p, n, out, &e);
	else if (!strcmp(h->encoding, "quoted-printable"))
		r = qp_decode(p, n, out, &e);
	else if (!h->encoding[0] || !strcmp(h->encoding, "7bit") ||
		 !strcmp(h->encoding, "8bit") || !strcmp(h->encoding, "binary"))
		r = buf_append(out, p, n, &e);
	else
		r = cerr_set(&e, EINVAL, "unknown transfer encoding '%s'",
			     h->encoding);
	if (r < 0)
		ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part, 0,
			       "%s; part ignored", e.msg);
	return r;
}

static void mime_entity(struct ci_parse *ps, const struct mime_headers *h,
			const char *body, size_t n, int depth);

static void one_part(struct ci_parse *ps, const char *part, size_t len,
		     int depth)
{
	struct mime_headers h;
	size_t off;

	/* The line break before a delimiter belongs to it (RFC 2046). */
	if (len && part[len - 1] == '\n')
		len--;
	if (len && part[len - 1] == '\r')
		len--;
	if (headers_parse(part, len, &h, &off) < 0)
		ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part, 0,
			       "MIME part headers too long; part ignored");
	else
		mime_entity(ps, &h, part + off, len - off, depth);
}

/* Whether the line at p is a delimiter: "--boundary" then "--" (the last
 * one) or only blanks up to the line end. */
static int delimiter(const char *p, size_t n, const char *d, size_t dl)
{
	size_t i = dl;

	if (n < dl || memcmp(p, d, dl))
		return 0;
	if (n - i >= 2 && !memcmp(p + i, "--", 2))
		return 2;
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r'))
		i++;
	return i == n || p[i] == '\n' ? 1 : 0;
}

/* Split a multipart body at its boundary lines and handle each part. */
static void multipart(struct ci_parse *ps, const char *boundary, const char *p,
		      size_t n, int depth)
{
	char delim[96];
	size_t dl = (size_t)snprintf(delim, sizeof(delim), "--%s", boundary);
	const char *part = NULL;

	for (size_t i = 0; i < n;) {
		const char *nl = memchr(p + i, '\n', n - i);
		size_t end = nl ? (size_t)(nl - p) + 1 : n;
		int d = delimiter(p + i, n - i, delim, dl);

		if (d && part)
			one_part(ps, part, (size_t)(p + i - part), depth);
		if (d == 2)
			return;
		if (d)
			part = p + end;
		i = end;
	}
	if (!part) {
		ci_problem_add(&ps->cfg->problems, CI_WARN, ps->part, 0,
			       "multipart user data without a '--%s' line",
			       boundary);
		return;
	}
	/* Python's email package, and so cloud-init, takes the last part
	 * even without the closing delimiter. */
	ci_problem_add(&ps->cfg->problems, CI_WARN, ps->part, 0,
		       "multipart user data has no closing boundary '--%s--'",
		       boundary);
	one_part(ps, part, (size_t)(p + n - part), depth);
}

static void mime_entity(struct ci_parse *ps, const struct mime_headers *h,
			const char *body, size_t n, int depth)
{
	char *saved = ps->part;
	struct buf dec;

	if (depth > CI_MAX_MIME_DEPTH) {
		ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part, 0,
			       "MIME nested more than %d levels deep",
			       CI_MAX_MIME_DEPTH);
		return;
	}
	if (!strncmp(h->type, "multipart/", 10)) {
		if (!h->boundary[0])
			ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part,
				       0, "%s without a boundary", h->type);
		else
			multipart(ps, h->boundary, body, n, depth + 1);
		return;
	}
	if (++ps->n_parts > CI_MAX_MIME_PARTS) {
		if (ps->n_parts == CI_MAX_MIME_PARTS + 1)
			ci_problem_add(&ps->cfg->problems, CI_ERROR, NULL, 0,
				       "more than %d MIME parts; the rest are "
				       "ignored",
				       CI_MAX_MIME_PARTS);
		return;
	}
	ps->part = xasprintf("part %d (%s)", ps->n_parts,
			     h->type[0] ? h->type : "no type");
	buf_init(&dec, CI_MAX_USERDATA);
	if (transfer_decode(ps, h, body, n, &dec) == 0)
		ps->part_fn(ps, h->type, h->filename[0] ? h->filename : NULL,
			    dec.data, dec.len, depth);
	buf_free(&dec);
	free(ps->part);
	ps->part = saved;
}

void ci_mime_parse(struct ci_parse *ps, const char *p, size_t n, int depth)
{
	struct mime_headers h;
	size_t off;

	if (headers_parse(p, n, &h, &off) < 0) {
		ci_problem_add(&ps->cfg->problems, CI_ERROR, ps->part, 0,
			       "MIME headers too long");
		return;
	}
	mime_entity(ps, &h, p + off, n - off, depth);
}
