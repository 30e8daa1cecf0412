// SPDX-License-Identifier: Apache-2.0
/* Fuzz the instance-profile credentials document IMDS serves: accepted
 * means all three strings and an expiry are there. */
#include <stdint.h>
#include <stdlib.h>

#include "boot-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct aws_creds c;
	struct cerr e = {0};

	if (aws_creds_parse((const char *)data, size, &c, &e) == 0) {
		if (!c.akid || !c.secret || !c.token || !c.expires)
			abort();
		aws_creds_free(&c);
	}
	return 0;
}
