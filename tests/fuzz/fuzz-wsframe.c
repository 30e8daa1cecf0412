// SPDX-License-Identifier: Apache-2.0
/* Fuzz the websocket frame head parser and the stream message decoder:
 * a frame that parses must fit in the input, and rebuilding its payload as
 * a client frame must parse back to the same length and opcode. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ws_frame f, g;
	struct cerr e = {0};
	const uint8_t mask[4] = {9, 8, 7, 6};
	struct buf b;
	int ch;

	buf_init(&b, 0);
	if (ws_frame_parse(data, size, &f, &e) == 1) {
		if (f.hdr_len > size || f.len > size - f.hdr_len)
			abort();
		if (ws_frame_build(f.opcode, data + f.hdr_len, f.len, mask, &b,
				   &e) < 0 ||
		    ws_frame_parse((uint8_t *)b.data, b.len, &g, &e) != 1 ||
		    g.len != f.len || g.opcode != f.opcode)
			abort();
	}
	buf_reset(&b);
	if (ws_msg_decode((const char *)data, size, &ch, &b, &e) == 0 &&
	    (ch < 0 || ch > 9))
		abort();
	buf_free(&b);
	return 0;
}
