// SPDX-License-Identifier: Apache-2.0
/* cell-unpack: the agent's deploy-package extractor, a child process so
 * that libarchive (and whatever a hostile package does to it) stays out of
 * cell-agent.
 *
 *   cell-unpack --packages-dir DIR --name NAME < package
 *
 * Extracts the package (read from stdin) into DIR/NAME as deploy_package
 * does (agent/pod/deploy.h). On failure it prints one JSON line on stdout,
 * {"event":"error","code":ERRNO,"message":...}, and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "deploy.h"
#include "log.h"

static int fail(const struct cerr *e)
{
	json_t *j = json_pack("{s:s, s:i, s:s}", "event", "error", "code",
			      e->code, "message", e->msg);
	char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;

	if (line)
		printf("%s\n", line);
	fprintf(stderr, "cell-unpack: %s\n", e->msg);
	free(line);
	json_decref(j);
	return 1;
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *name = NULL;
	struct cerr e = {0};
	int dfd;

	log_init("cell-unpack", LOG_WARN);
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--packages-dir"))
			dir = argv[i + 1];
		else if (!strcmp(argv[i], "--name"))
			name = argv[i + 1];
	}
	if (!dir || !name || argc != 5) {
		fprintf(stderr, "usage: cell-unpack --packages-dir DIR --name "
				"NAME < package\n");
		return 2;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		cerr_sys(&e, "open %s", dir);
		return fail(&e);
	}
	if (deploy_package(dfd, name, 0, &e) < 0)
		return fail(&e);
	close(dfd);
	return 0;
}
