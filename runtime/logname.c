// SPDX-License-Identifier: Apache-2.0
/* The name of a unit's log link in the containers' log directory, as the
 * kubelet names it. Its own file: the sha256 needs libcrypto, which only
 * the agent (the one caller) should load; cell-monitor links crilog.c and
 * starts on every unit start. */
#include <string.h>

#include "cleanup.h"
#include "digest.h"
#include "runtime.h"
#include "util.h"

char *crilog_link_name(const char *dir, const char *pod_name, const char *unit,
		       const char *run_key)
{
	const char *pn = pod_name && *pod_name ? pod_name : "default_pod";
	const char *us = strchr(pn, '_');
	cleanup_free char *ns =
	    us ? xstrndup(pn, (size_t)(us - pn)) : xstrdup("default");
	char d[DIGEST_STR_MAX];
	struct cerr e = {0};

	if (digest_buf("sha256", run_key, strlen(run_key), d, &e) < 0)
		return NULL;
	return xasprintf("%s/%s_%s_%s-%s.log", dir, us ? us + 1 : pn, ns, unit,
			 digest_hex(d));
}
