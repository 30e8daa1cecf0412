// SPDX-License-Identifier: Apache-2.0
/* cell-pull-cached: cell-pull's front for the agent, without libcurl.
 *
 *   cell-pull-cached --image REF --mount DIR [cell-pull's options]
 *
 * When the cache can answer (pull_from_cache: a digest or a non-latest tag
 * already pulled for this platform) it mounts the image and saves its
 * config, in a few milliseconds. Otherwise, or for any option it does not
 * know, it execs cell-pull from its own directory with the same arguments
 * and the same descriptors (the credentials pipe on stdin is still unread),
 * so the process the agent watches simply becomes the full pull. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "pull.h"

/* The options this front reads; any other makes it hand over at once.
 * The ones it ignores only matter when the registry is asked. */
static bool take(struct pull_cached_opts *o, const char *k, const char *v)
{
	if (!strcmp(k, "--image"))
		o->image = v;
	else if (!strcmp(k, "--workdir"))
		o->workdir = v;
	else if (!strcmp(k, "--mount"))
		o->mount_at = v;
	else if (!strcmp(k, "--upper-dir"))
		o->upper_dir = v;
	else if (!strcmp(k, "--save-config"))
		o->save_config = v;
	else if (!strcmp(k, "--shared-cache"))
		o->shared_cache = v;
	else if (strcmp(k, "--progress") && strcmp(k, "--insecure-registry") &&
		 strcmp(k, "--credentials-fd") &&
		 strcmp(k, "--keep-free-mib") && strcmp(k, "--lazy"))
		return false;
	return true;
}

/* cell-pull beside this binary: found through /proc/self/exe, or through
 * argv[0] where /proc is not mounted (a bare chroot), or else on PATH. */
static int hand_over(char **argv)
{
	char self[PATH_MAX], full[PATH_MAX + 16];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0 && strchr(argv[0], '/')) {
		snprintf(self, sizeof(self), "%s", argv[0]);
		n = (ssize_t)strlen(self);
	}
	if (n < 0) {
		execvp("cell-pull", argv);
		fprintf(stderr, "cell-pull-cached: cell-pull: %s\n",
			strerror(errno));
		return 1;
	}
	self[n] = '\0';
	snprintf(full, sizeof(full), "%s/cell-pull", dirname(self));
	argv[0] = full;
	execv(full, argv);
	fprintf(stderr, "cell-pull-cached: exec %s: %s\n", full,
		strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	struct pull_cached_opts o = {0};
	struct cerr e = {0};
	bool json = false;
	int i;

	log_init("cell-pull-cached", LOG_WARN);
	for (i = 1; i + 1 < argc && take(&o, argv[i], argv[i + 1]); i += 2)
		json |= !strcmp(argv[i], "--progress") &&
			!strcmp(argv[i + 1], "json");
	if (i != argc)
		return hand_over(argv);
	switch (pull_from_cache(&o, &e)) {
	case 1:
		if (json)
			printf("{\"event\":\"done\",\"cached\":true}\n");
		return 0;
	case -1:
		/* cell-pull does it again, and reports what fails. */
		log_warn("%s; asking cell-pull", e.msg);
		break;
	}
	return hand_over(argv);
}
