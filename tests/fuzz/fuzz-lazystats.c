// SPDX-License-Identifier: Apache-2.0
/* Fuzz the agent's parser of a lazy layer server's stats file
 * (agent/base/lazystats.c): written by a child that parses registry data,
 * so anything may be there. A parse either fails leaving out, pid and the
 * failure text untouched, or gives values of at most 2^63-1 and a failure
 * text that is printable ASCII, shorter than its cap, and there only with
 * failed reads. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lazystats.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct lazystats st, before;
	uint64_t pid = 7;
	char why[LAZYSTATS_FAILURE_MAX + 1], why_before[sizeof(why)];
	size_t len;

	memset(&st, 0xa5, sizeof(st));
	before = st;
	memset(why, 0x5a, sizeof(why));
	memcpy(why_before, why, sizeof(why));
	if (lazystats_parse((const char *)data, size, &st, &pid, why) < 0) {
		if (memcmp(&st, &before, sizeof(st)) || pid != 7 ||
		    memcmp(why, why_before, sizeof(why)))
			abort();
		return 0;
	}
	if (size > LAZYSTATS_FILE_MAX || pid > INT64_MAX ||
	    st.demand_bytes > INT64_MAX || st.refused > INT64_MAX ||
	    st.failed_reads > INT64_MAX || !memchr(data, '\n', size))
		abort();
	/* The text stays within its cap (the byte past it untouched). */
	if (why[LAZYSTATS_FAILURE_MAX] != 0x5a ||
	    !memchr(why, '\0', LAZYSTATS_FAILURE_MAX))
		abort();
	len = strlen(why);
	if (len && (!st.failed_reads || why[0] == ' '))
		abort();
	for (size_t i = 0; i < len; i++)
		if (why[i] < 0x20 || why[i] > 0x7e)
			abort();
	return 0;
}
