// SPDX-License-Identifier: Apache-2.0
/* Fuzz the httpGet probe's response-head parser (agent/sup/probe.c): bytes a
 * container sends back. Beyond "no crash": a complete head lies inside the
 * input, its code has three digits, the body to read stays under the
 * kubelet's 10 KiB, and the answer depends only on the bytes up to the
 * head's end (a response read in pieces is judged as one read whole). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *b = (const char *)data;
	size_t start = 0, end = 0, body = 0, s2, e2, b2;
	int code = probe_http_head(b, size, &start, &end, &body);

	if (code <= 0)
		return 0;
	if (code < 100 || code > 999 || start >= end || end > size ||
	    body > (10u << 10))
		abort();
	if (probe_http_head(b, end, &s2, &e2, &b2) != code || s2 != start ||
	    e2 != end || b2 != body)
		abort();
	return 0;
}
