// SPDX-License-Identifier: Apache-2.0
/* Deploy packages, the parts that stay in the agent's process: the streamed
 * multipart parser, package names, and cleaning up after interrupted
 * deploys. The extractor is agent/pod/package.c (it needs libarchive and runs
 * in the cell-unpack child, see agent/base/pullproc.h). */
#include "deploy.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "path.h"
#include "util.h"

/* ======================================================================
 * multipart/form-data
 * ====================================================================== */

#define MP_CHUNK 65536

enum mp_state { MP_PREAMBLE, MP_AFTER_DELIM, MP_HEADERS, MP_BODY, MP_DONE };

struct mpart {
	char delim[4 + MPART_BOUNDARY_MAX + 1]; /* "\r\n--" + boundary */
	size_t dlen;
	char *field;
	mpart_sink sink;
	void *ud;
	enum mp_state st;
	bool in_field; /* the current part is the wanted one */
	bool found;    /* the wanted part ended */
	bool failed;
	size_t preamble;
	char *buf; /* bytes not yet processed */
	size_t len, cap;
};

static bool is_token_char(char c)
{
	return c > ' ' && c < 127 && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* Parse one "name=value" parameter at *pp (after a ';'); value is a token or
 * a quoted string with backslash escapes. Returns 1 with a parameter, 0 at
 * the end, -1 when malformed. */
static int next_param(const char **pp, char *name, size_t nsz, char *val,
		      size_t vsz)
{
	const char *p = *pp;
	size_t n = 0, v = 0;

	while (*p == ' ' || *p == '\t' || *p == ';')
		p++;
	if (!*p)
		return 0;
	while (is_token_char(*p) && n + 1 < nsz)
		name[n++] = *p++;
	name[n] = '\0';
	while (*p == ' ' || *p == '\t')
		p++;
	if (n == 0 || *p++ != '=')
		return -1;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (*p == '\\' && p[1])
				p++;
			if (v + 1 >= vsz)
				return -1;
			val[v++] = *p;
		}
		if (*p++ != '"')
			return -1;
	} else {
		while (is_token_char(*p)) {
			if (v + 1 >= vsz)
				return -1;
			val[v++] = *p++;
		}
	}
	val[v] = '\0';
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p && *p != ';')
		return -1;
	*pp = p;
	return 1;
}

int mpart_boundary(const char *ct, char *out, size_t outsz, struct cerr *e)
{
	static const char type[] = "multipart/form-data";
	const char *p = ct;
	char name[64], val[MPART_BOUNDARY_MAX + 2];
	int r;

	if (!ct)
		return cerr_set(e, EINVAL, "no Content-Type (want %s)", type);
	while (*p == ' ')
		p++;
	if (strncasecmp(p, type, sizeof(type) - 1) != 0)
		return cerr_set(e, EINVAL, "Content-Type is not %s", type);
	p += sizeof(type) - 1;
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p && *p != ';')
		return cerr_set(e, EINVAL, "Content-Type is not %s", type);
	while ((r = next_param(&p, name, sizeof(name), val, sizeof(val))) > 0) {
		size_t n = strlen(val);

		if (strcasecmp(name, "boundary") != 0)
			continue;
		if (n == 0 || n > MPART_BOUNDARY_MAX || n >= outsz)
			return cerr_set(e, EINVAL,
					"multipart boundary of %zu bytes", n);
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)val[i] < ' ' || val[i] == 127)
				return cerr_set(e, EINVAL,
						"control byte in the multipart "
						"boundary");
		memcpy(out, val, n + 1);
		return 0;
	}
	if (r < 0)
		return cerr_set(e, EINVAL, "malformed Content-Type parameters");
	return cerr_set(e, EINVAL, "Content-Type has no boundary");
}

struct mpart *mpart_new(const char *boundary, const char *field,
			mpart_sink sink, void *ud)
{
	struct mpart *m = xcalloc(1, sizeof(*m));
	size_t bl = strnlen(boundary, MPART_BOUNDARY_MAX);

	memcpy(m->delim, "\r\n--", 4);
	memcpy(m->delim + 4, boundary, bl);
	m->dlen = 4 + bl;
	m->field = xstrdup(field);
	m->sink = sink;
	m->ud = ud;
	m->cap = MP_CHUNK + MPART_HEADERS_MAX + sizeof(m->delim);
	m->buf = xmalloc(m->cap);
	/* The first delimiter may open the body without a CRLF before it:
	 * pretend one was there, and it is found like all the others. */
	memcpy(m->buf, "\r\n", 2);
	m->len = 2;
	m->st = MP_PREAMBLE;
	return m;
}

void mpart_free(struct mpart *m)
{
	if (!m)
		return;
	free(m->field);
	free(m->buf);
	free(m);
}

static void consume(struct mpart *m, size_t n)
{
	memmove(m->buf, m->buf + n, m->len - n);
	m->len -= n;
}

static int emit(struct mpart *m, size_t n, struct cerr *e)
{
	if (m->in_field && n && m->sink(m->ud, m->buf, n, e) < 0)
		return -1;
	return 0;
}

/* Content-Disposition: form-data; name="package"; filename="x" */
static void part_disposition(struct mpart *m, const char *v)
{
	char name[64], val[256];
	int r;

	while (*v == ' ' || *v == '\t')
		v++;
	if (strncasecmp(v, "form-data", 9) != 0)
		return;
	v += 9;
	while ((r = next_param(&v, name, sizeof(name), val, sizeof(val))) > 0)
		if (!strcasecmp(name, "name") && !strcmp(val, m->field) &&
		    !m->found)
			m->in_field = true;
}

/* The header block of a part, CRLF-separated lines; only the disposition
 * matters. */
static void part_headers(struct mpart *m, char *h, size_t n)
{
	static const char cd[] = "content-disposition:";
	char *line = h, *end = h + n;

	m->in_field = false;
	if (!h || !n)
		return;
	while (line < end) {
		char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);

		if (!eol)
			eol = end;
		*eol = '\0';
		if (!strncasecmp(line, cd, sizeof(cd) - 1))
			part_disposition(m, line + sizeof(cd) - 1);
		line = eol + 2;
	}
}

/* PREAMBLE and BODY: look for the next delimiter; body bytes before it go
 * to the sink (if the part is the wanted one), keeping back a tail that
 * could be the start of a delimiter cut in two. */
static int mp_scan(struct mpart *m, struct cerr *e)
{
	char *d = memmem(m->buf, m->len, m->delim, m->dlen);
	size_t i = d ? (size_t)(d - m->buf)
		     : (m->len >= m->dlen ? m->len - (m->dlen - 1) : 0);

	if (m->st == MP_PREAMBLE) {
		m->preamble += i;
		if (m->preamble > MPART_PREAMBLE_MAX)
			return cerr_set(e, EINVAL,
					"no multipart boundary in the first %d "
					"bytes",
					MPART_PREAMBLE_MAX);
	} else if (emit(m, i, e) < 0) {
		return -1;
	}
	if (!d) {
		consume(m, i);
		return 0;
	}
	consume(m, i + m->dlen);
	if (m->st == MP_BODY && m->in_field) {
		m->found = true;
		m->in_field = false;
	}
	m->st = MP_AFTER_DELIM;
	return 1;
}

/* After a delimiter: "--" closes the body, else optional padding and a
 * CRLF open the next part. */
static int mp_after_delim(struct mpart *m, struct cerr *e)
{
	size_t i;

	if (m->len >= 2 && m->buf[0] == '-' && m->buf[1] == '-') {
		m->st = MP_DONE;
		return 1;
	}
	for (i = 0; i < m->len && (m->buf[i] == ' ' || m->buf[i] == '\t'); i++)
		;
	if (i > 256)
		return cerr_set(e, EINVAL, "junk after a boundary");
	if (i + 2 > m->len)
		return 0;
	if (m->buf[i] != '\r' || m->buf[i + 1] != '\n')
		return cerr_set(e, EINVAL, "junk after a boundary");
	consume(m, i + 2);
	m->st = MP_HEADERS;
	return 1;
}

static int mp_headers(struct mpart *m, struct cerr *e)
{
	char *d;
	size_t i;

	if (m->len >= 2 && m->buf[0] == '\r' && m->buf[1] == '\n') {
		consume(m, 2); /* a part without headers */
		m->in_field = false;
		m->st = MP_BODY;
		return 1;
	}
	d = memmem(m->buf, m->len, "\r\n\r\n", 4);
	if (!d) {
		/* Not before a terminator that starts within the cap could
		 * have arrived whole: the verdict must not depend on how the
		 * body was cut. */
		if (m->len >= MPART_HEADERS_MAX + 4)
			return cerr_set(e, EINVAL,
					"part headers longer than %d bytes",
					MPART_HEADERS_MAX);
		return 0;
	}
	i = (size_t)(d - m->buf);
	if (i > MPART_HEADERS_MAX)
		return cerr_set(e, EINVAL, "part headers longer than %d bytes",
				MPART_HEADERS_MAX);
	part_headers(m, m->buf, i + 2);
	consume(m, i + 4);
	m->st = MP_BODY;
	return 1;
}

/* One step of the state machine over the buffered bytes. Returns 1 when it
 * made progress, 0 when it needs more input, -1 on error. */
static int mp_step(struct mpart *m, struct cerr *e)
{
	switch (m->st) {
	case MP_PREAMBLE:
	case MP_BODY:
		return mp_scan(m, e);
	case MP_AFTER_DELIM:
		return mp_after_delim(m, e);
	case MP_HEADERS:
		return mp_headers(m, e);
	case MP_DONE:
		m->len = 0; /* the epilogue is ignored */
		return 0;
	}
	return 0;
}

int mpart_feed(struct mpart *m, const void *p, size_t n, struct cerr *e)
{
	const char *in = p;

	if (m->failed)
		return cerr_set(e, EINVAL, "multipart parser already failed");
	while (n) {
		size_t take = m->cap - m->len;
		int r;

		if (take > n)
			take = n;
		memcpy(m->buf + m->len, in, take);
		m->len += take;
		in += take;
		n -= take;
		while ((r = mp_step(m, e)) > 0)
			;
		if (r < 0) {
			m->failed = true;
			return -1;
		}
	}
	return 0;
}

int mpart_finish(struct mpart *m, struct cerr *e)
{
	if (m->failed)
		return cerr_set(e, EINVAL, "multipart parser already failed");
	if (m->st != MP_DONE)
		return cerr_set(e, EINVAL,
				"multipart body ends before its closing "
				"boundary");
	if (!m->found)
		return cerr_set(e, EINVAL, "no form field '%s'", m->field);
	return 0;
}

/* ======================================================================
 * packages
 * ====================================================================== */

bool deploy_name_ok(const char *name)
{
	size_t n = strnlen(name, DEPLOY_NAME_MAX + 1);

	if (n == 0 || n > DEPLOY_NAME_MAX || name[0] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("._-", name[i]))
			return false;
	return true;
}

int deploy_cleanup(int pkgdirfd, struct cerr *e)
{
	cleanup_dir DIR *d = NULL;
	struct dirent *de;
	int fd = fcntl(pkgdirfd, F_DUPFD_CLOEXEC, 3);

	if (fd < 0)
		return cerr_sys(e, "dup");
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return cerr_sys(e, "opendir");
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] != '.' || !strstr(de->d_name, ".tmp-"))
			continue;
		if (fs_rm_rf_at(pkgdirfd, de->d_name, e) < 0)
			return cerr_prefix(e, "remove %s", de->d_name);
	}
	return 0;
}
