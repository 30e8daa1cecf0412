// SPDX-License-Identifier: Apache-2.0
/* What a pod may ask the metadata service through the agent's proxy: what
 * an AWS SDK needs for the instance role's credentials and the region,
 * nothing else (never user-data: it holds the cell's key). The target is
 * compared with the allowed paths byte for byte; only a role name and a
 * placement key vary, from small alphabets without '%', '/', '?' or a
 * leading '.', so no encoding, dot segment or query reaches the service
 * in a form that means something else there. Only the IMDSv2 token
 * headers are passed on; a request with a body is refused (no
 * smuggling: the proxy reads one head and no more). */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "imdsreq.h"

#define CREDS "/latest/meta-data/iam/security-credentials/"
#define PLACEMENT "/latest/meta-data/placement/"

static const char *const exact_get[] = {
    CREDS,
    PLACEMENT,
    "/latest/dynamic/instance-identity/document",
};

/* AWS role names: letters, digits and +=,.@_- (1-64). */
static bool role_char(char c)
{
	return isalnum((unsigned char)c) || strchr("+=,.@_-", c);
}

static bool placement_char(char c)
{
	return islower((unsigned char)c) || isdigit((unsigned char)c) ||
	       c == '-';
}

/* prefix + one name of 1-64 chars of the alphabet, not starting with '.'
 * ("." and ".." are dot segments, not names). */
static bool named(const char *t, const char *prefix, bool (*ok)(char))
{
	size_t n = strlen(prefix), len;

	if (strncmp(t, prefix, n))
		return false;
	t += n;
	len = strlen(t);
	if (len < 1 || len > 64 || t[0] == '.')
		return false;
	for (size_t i = 0; i < len; i++)
		if (!ok(t[i]))
			return false;
	return true;
}

static bool allowed(const char *method, const char *t)
{
	if (!strcmp(method, "PUT"))
		return !strcmp(t, "/latest/api/token");
	for (size_t i = 0; i < sizeof(exact_get) / sizeof(exact_get[0]); i++)
		if (!strcmp(t, exact_get[i]))
			return true;
	return named(t, CREDS, role_char) ||
	       named(t, PLACEMENT, placement_char);
}

static int refuse(struct imds_req *r, int status, const char *why)
{
	snprintf(r->reason, sizeof(r->reason), "%s", why);
	return status;
}

/* "METHOD SP TARGET SP HTTP/1.x"; the target is copied only when it is
 * of printable bytes without spaces and fits. */
static int request_line(const char *l, size_t n, struct imds_req *r)
{
	const char *sp1 = memchr(l, ' ', n), *sp2;
	size_t mlen, tlen;

	if (!sp1)
		return refuse(r, 400, "bad request line");
	mlen = (size_t)(sp1 - l);
	sp2 = memchr(sp1 + 1, ' ', n - mlen - 1);
	if (!sp2)
		return refuse(r, 400, "bad request line");
	tlen = (size_t)(sp2 - sp1 - 1);
	if (n - (size_t)(sp2 + 1 - l) != 8 ||
	    (memcmp(sp2 + 1, "HTTP/1.1", 8) && memcmp(sp2 + 1, "HTTP/1.0", 8)))
		return refuse(r, 400, "bad request line");
	if (tlen == 0 || tlen > IMDS_TARGET_MAX)
		return refuse(r, 403, "target not allowed");
	for (size_t i = 0; i < tlen; i++)
		if (sp1[1 + i] <= 0x20 || sp1[1 + i] >= 0x7f)
			return refuse(r, 400, "bad request line");
	if (!((mlen == 3 && !memcmp(l, "GET", 3)) ||
	      (mlen == 3 && !memcmp(l, "PUT", 3))))
		return refuse(r, 405, "method not allowed");
	memcpy(r->method, l, 3);
	memcpy(r->target, sp1 + 1, tlen);
	return 200;
}

static bool token_char(char c)
{
	return isalnum((unsigned char)c) || strchr("+/=_-", c);
}

/* Copy a header's value into out (size cap+1) when every byte passes. */
static bool take(char *out, size_t cap, const char *v, size_t n,
		 bool (*ok)(char))
{
	if (n == 0 || n > cap || out[0])
		return false; /* empty, too long or repeated */
	for (size_t i = 0; i < n; i++)
		if (!ok(v[i]))
			return false;
	memcpy(out, v, n);
	out[n] = '\0';
	return true;
}

static bool digit(char c)
{
	return isdigit((unsigned char)c);
}

static bool is(const char *name, size_t n, const char *want)
{
	return strlen(want) == n && !strncasecmp(name, want, n);
}

static int header(const char *l, size_t n, struct imds_req *r)
{
	const char *colon = memchr(l, ':', n), *v;
	size_t nlen, vlen;

	if (!colon || colon == l || l[0] == ' ' || l[0] == '\t')
		return refuse(r, 400, "bad header");
	nlen = (size_t)(colon - l);
	for (size_t i = 0; i < nlen; i++)
		if (!isgraph((unsigned char)l[i]))
			return refuse(r, 400, "bad header");
	v = colon + 1;
	vlen = n - nlen - 1;
	while (vlen && (*v == ' ' || *v == '\t'))
		v++, vlen--;
	while (vlen && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	if (is(l, nlen, "X-aws-ec2-metadata-token"))
		return take(r->token, IMDS_TOKEN_MAX, v, vlen, token_char)
			   ? 200
			   : refuse(r, 400, "bad token header");
	if (is(l, nlen, "X-aws-ec2-metadata-token-ttl-seconds"))
		return take(r->ttl, sizeof(r->ttl) - 1, v, vlen, digit)
			   ? 200
			   : refuse(r, 400, "bad token TTL header");
	if (is(l, nlen, "Transfer-Encoding") ||
	    (is(l, nlen, "Content-Length") && !(vlen == 1 && v[0] == '0')))
		return refuse(r, 400, "a request body");
	return 200;
}

size_t imds_head_end(const char *buf, size_t len)
{
	for (size_t i = 0; i + 3 < len; i++)
		if (!memcmp(buf + i, "\r\n\r\n", 4))
			return i + 4;
	return 0;
}

int imds_req_judge(const char *buf, size_t len, struct imds_req *r)
{
	size_t end = len > IMDS_HEAD_MAX ? 0 : imds_head_end(buf, len);
	size_t at = 0, lines = 0;
	int status = 200;

	memset(r, 0, sizeof(*r));
	if (!end)
		return refuse(r, len > IMDS_HEAD_MAX ? 431 : 400,
			      "incomplete or oversized head");
	while (status == 200 && at + 2 < end) {
		const char *l = buf + at;
		const char *crlf = memchr(l, '\r', end - at);
		size_t n = (size_t)(crlf - l);

		if (crlf[1] != '\n' || memchr(l, '\n', n) || memchr(l, 0, n))
			return refuse(r, 400, "bad line ending");
		if (++lines > IMDS_HEADERS_MAX + 1)
			return refuse(r, 431, "too many headers");
		status = lines == 1 ? request_line(l, n, r) : header(l, n, r);
		at += n + 2;
	}
	if (status != 200)
		return status;
	if (!allowed(r->method, r->target))
		return refuse(r, 403, "target not allowed");
	return 200;
}
