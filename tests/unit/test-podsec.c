// SPDX-License-Identifier: Apache-2.0
/* agent/pod/podsec.c: the securityContext extensions on a run config. */
#include <errno.h>
#include <string.h>

#include "../lib/tap.h"
#include "podsec.h"
#include "util.h"

static int apply(struct unit_spec *u, struct pod_spec *p, uint32_t uid,
		 struct run_config *rc, struct cerr *e)
{
	memset(rc, 0, sizeof(*rc));
	rc->uid = uid;
	rc->no_new_privs = uid != 0; /* unit.c's default */
	return podsec_apply(u, p, rc, e);
}

static bool has_cap(char **caps, const char *name)
{
	for (size_t i = 0; caps && caps[i]; i++)
		if (!strcmp(caps[i], name))
			return true;
	return false;
}

int main(void)
{
	struct unit_spec u = {0};
	struct pod_spec p = {0};
	struct run_config rc;
	struct cerr e = {0};

	ok(apply(&u, &p, 0, &rc, &e) == 0 && !rc.readonly_rootfs &&
	       !rc.no_new_privs && !rc.proc_unmasked,
	   "nothing set: as before");
	p.run_as_non_root = true;
	ok(apply(&u, &p, 0, &rc, &e) < 0 && e.code == EPERM &&
	       strstr(e.msg, "CreateContainerConfigError"),
	   "pod runAsNonRoot refuses uid 0: %s", e.msg);
	ok(apply(&u, &p, 1000, &rc, &e) == 0, "and lets uid 1000 run");
	u.run_as_non_root = TRI_FALSE;
	ok(apply(&u, &p, 0, &rc, &e) == 0, "the unit's false wins");
	p.run_as_non_root = false;
	u.run_as_non_root = TRI_TRUE;
	ok(apply(&u, &p, 0, &rc, &e) < 0, "the unit's true alone refuses");
	u.run_as_non_root = TRI_UNSET;
	u.read_only_root = true;
	u.allow_priv_esc = TRI_FALSE;
	ok(apply(&u, &p, 0, &rc, &e) == 0 && rc.readonly_rootfs &&
	       rc.no_new_privs,
	   "readOnlyRootFilesystem; allowPrivilegeEscalation false for root");
	u.allow_priv_esc = TRI_TRUE;
	ok(apply(&u, &p, 1000, &rc, &e) == 0 && !rc.no_new_privs,
	   "allowPrivilegeEscalation true for a non-root uid");
	u.proc_unmasked = true;
	ok(apply(&u, &p, 0, &rc, &e) == 0 && rc.proc_unmasked,
	   "procMount Unmasked");
	u.proc_unmasked = false;
	u.privileged = true;
	u.allow_priv_esc = TRI_UNSET;
	ok(apply(&u, &p, 1000, &rc, &e) == 0 && rc.proc_unmasked &&
	       !rc.no_new_privs && has_cap(rc.caps, "CAP_CHOWN"),
	   "privileged: capabilities, /proc unmasked, no no_new_privs");
	strv_free(rc.caps);
	return tap_done();
}
