// SPDX-License-Identifier: Apache-2.0
/* Fuzz the streamed multipart/form-data parser. The input is a body for
 * boundary "XyZ"; its first byte picks how it is cut into pieces. Whatever
 * the pieces, the parser must reach the same verdict and deliver the same
 * bytes (the boundary search across piece edges is the delicate part), and
 * never more bytes than it was given. The same bytes also go through the
 * Content-Type boundary parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "deploy.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int to_buf(void *ud, const void *p, size_t n, struct cerr *e)
{
	return buf_append(ud, p, n, e);
}

static int run(const uint8_t *p, size_t n, size_t step, struct buf *out)
{
	struct mpart *m = mpart_new("XyZ", "package", to_buf, out);
	struct cerr e = {0};
	int r = 0;

	buf_init(out, 0);
	for (size_t i = 0; i < n && r == 0; i += step)
		r = mpart_feed(m, p + i, n - i < step ? n - i : step, &e);
	if (r == 0)
		r = mpart_finish(m, &e);
	if (r < 0 && !e.msg[0])
		abort(); /* every failure says why */
	mpart_free(m);
	return r;
}

static void fuzz_content_type(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1), b[MPART_BOUNDARY_MAX + 1];
	struct cerr e = {0};

	memcpy(s, data, size);
	s[size] = '\0';
	if (mpart_boundary(s, b, sizeof(b), &e) == 0) {
		size_t n = strlen(b);
		if (n == 0 || n > MPART_BOUNDARY_MAX)
			abort();
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)b[i] < ' ')
				abort();
	}
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct buf whole, cut;
	size_t step;
	int r1, r2;

	fuzz_content_type(data, size);
	if (size < 1)
		return 0;
	step = 1 + data[0] % 17;
	r1 = run(data + 1, size - 1, size, &whole);
	r2 = run(data + 1, size - 1, step, &cut);
	if (r1 != r2)
		abort();
	/* On success both saw the whole field: the same bytes. */
	if (r1 == 0 && (whole.len != cut.len ||
			(whole.len && memcmp(whole.data, cut.data, whole.len))))
		abort();
	if (whole.len > size || cut.len > size)
		abort();
	buf_free(&whole);
	buf_free(&cut);
	return 0;
}
