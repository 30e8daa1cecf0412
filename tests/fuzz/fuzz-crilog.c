// SPDX-License-Identifier: Apache-2.0
/* Fuzz the CRI log reader (runtime/crilog.c), which every log path reads
 * through. Beyond "no crash, no leak": the lines it produces do not depend
 * on how the bytes are cut (a follower reads whatever a write left), and a
 * record that parses prints back, in CRI form, to a record that parses to
 * the same fields. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "runtime.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int collect(const struct crilog_line *ln, void *ud)
{
	crilog_format_line(ud, CRILOG_CRI, ln);
	return 0;
}

static void run(const char *p, size_t n, bool join, size_t step,
		struct buf *out)
{
	struct crilog_reader r;

	crilog_reader_init(&r, join, collect, out);
	for (size_t i = 0; i < n; i += step)
		crilog_reader_feed(&r, p + i, n - i < step ? n - i : step);
	crilog_reader_finish(&r);
	crilog_reader_free(&r);
}

static void check_record(const char *p, size_t n)
{
	struct crilog_record c, again;
	struct crilog_line ln;
	struct buf b;

	if (crilog_parse_record(p, n, &c) < 0)
		return;
	ln = (struct crilog_line){c.ts_ns, c.stream, c.partial, c.text, c.len};
	buf_init(&b, 0);
	crilog_format_line(&b, CRILOG_CRI, &ln);
	/* Without its newline. */
	if (crilog_parse_record(b.data, b.len - 1, &again) < 0 ||
	    again.ts_ns != c.ts_ns || again.stream != c.stream ||
	    again.partial != c.partial || again.len != c.len ||
	    memcmp(again.text, c.text, c.len) != 0)
		abort();
	buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data;
	struct buf whole, cut;
	const char *nl;

	if (size > (1u << 20))
		return 0;
	for (int join = 0; join < 2; join++) {
		buf_init(&whole, 0);
		buf_init(&cut, 0);
		run(p, size, join, size ? size : 1, &whole);
		run(p, size, join, 1 + size % 7, &cut);
		if (whole.len != cut.len ||
		    (whole.len && memcmp(whole.data, cut.data, whole.len)))
			abort();
		buf_free(&whole);
		buf_free(&cut);
	}
	nl = memchr(p, '\n', size);
	check_record(p, nl ? (size_t)(nl - p) : size);
	return 0;
}
