// SPDX-License-Identifier: Apache-2.0
/* Fuzz the agent's parser of a lazy layer server's stats file
 * (agent/base/lazystats.c): written by a child that parses registry data,
 * so anything may be there. A parse either fails leaving out untouched or
 * gives values of at most 2^63-1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lazystats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lazystats st, before;
	uint64_t pid = 7;

	memset(&st, 0xa5, sizeof(st));
	before = st;
	if (lazystats_parse((const char *)data, size, &st, &pid) < 0) {
		if (memcmp(&st, &before, sizeof(st)) || pid != 7)
			abort();
		return 0;
	}
	if (size > LAZYSTATS_FILE_MAX || pid > INT64_MAX ||
	    st.demand_bytes > INT64_MAX || st.refused > INT64_MAX ||
	    !memchr(data, '\n', size))
		abort();
	return 0;
}
