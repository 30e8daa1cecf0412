// SPDX-License-Identifier: Apache-2.0
/* Fuzz the parser of a helper child's output (agent/base/pullproc.c): JSON
 * progress lines, an error line, log lines, arbitrary bytes from a child
 * a hostile layer may have taken over. The error is kept only from an
 * {"event":"error"} line, and lines never grow past the cap. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pullproc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pullproc p;

	memset(&p, 0, sizeof(p));
	p.pidfd = p.outfd = -1;
	/* In two pieces, as reads may split it. */
	pullproc_feed(&p, (const char *)data, size / 2);
	pullproc_feed(&p, (const char *)data + size / 2, size - size / 2);
	pullproc_feed(&p, "\n", 1);
	if (p.line_len != 0)
		abort();
	if (p.error && !memmem(data, size, "error", 5))
		abort();
	if (p.last && strlen(p.last) >= PULLPROC_LINE_MAX)
		abort();
	pullproc_clear(&p);
	return 0;
}
