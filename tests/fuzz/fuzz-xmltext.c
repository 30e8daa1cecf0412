// SPDX-License-Identifier: Apache-2.0
/* Fuzz the bounded XML reader behind Azure's ovf-env.xml and goal state:
 * any bytes as either document. The outputs must be what was promised:
 * decoded user data within its cap, goal state fields all or none. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ci_ovf o;
	struct cerr e = {0};
	char *inc, *cid, *iid;

	if (ci_ovf_parse((const char *)data, size, &o, &e) == 0) {
		if (o.userdata.len > CI_MAX_USERDATA ||
		    (!o.has_userdata && o.userdata.len))
			abort();
		ci_ovf_free(&o);
	}
	cerr_clear(&e);
	if (ci_goalstate_parse((const char *)data, size, &inc, &cid, &iid,
			       &e) == 0) {
		if (!inc || !cid || !iid)
			abort();
		free(inc);
		free(cid);
		free(iid);
	} else if (inc || cid || iid) {
		abort();
	}
	return 0;
}
