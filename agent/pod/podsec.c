// SPDX-License-Identifier: Apache-2.0
/* securityContext beyond what Kip sends: see podsec.h. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/capability.h>
#include <sys/prctl.h>

#include "podsec.h"
#include "util.h"

/* Every capability the agent itself holds in its bounding set: all of
 * them on an instance; fewer where the agent runs confined (a test's
 * container), where asking for more would fail the start. */
static char **all_caps(void)
{
	char **out = xcalloc(65, sizeof(char *));
	size_t k = 0;
	int last = (int)cap_max_bits() - 1;

	for (int c = 0; c <= last && c < 64; c++) {
		char *n;

		if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) != 1)
			continue;
		n = cap_to_name((cap_value_t)c);
		out[k] = xasprintf("%s", n);
		cap_free(n);
		for (char *p = out[k]; *p; p++)
			*p = (char)toupper((unsigned char)*p);
		k++;
	}
	return out;
}

int podsec_apply(const struct unit_spec *u, const struct pod_spec *pod,
		 struct run_config *rc, struct cerr *e)
{
	bool non_root = u->run_as_non_root == TRI_UNSET
			    ? pod->run_as_non_root
			    : u->run_as_non_root == TRI_TRUE;

	/* The kubelet's verifyRunAsNonRoot, with its message. */
	if (non_root && rc->uid == 0)
		return cerr_set(e, EPERM,
				"CreateContainerConfigError: container has "
				"runAsNonRoot and image will run as root");
	rc->readonly_rootfs = u->read_only_root;
	if (u->allow_priv_esc == TRI_FALSE)
		rc->no_new_privs = true;
	else if (u->allow_priv_esc == TRI_TRUE)
		rc->no_new_privs = false;
	rc->proc_unmasked = u->proc_unmasked;
	if (u->privileged) {
		/* The only pod on its instance: privileged is the instance's
		 * root inside the unit's namespaces. */
		strv_free(rc->caps);
		rc->caps = all_caps();
		rc->no_new_privs = false;
		rc->proc_unmasked = true;
	}
	return 0;
}
