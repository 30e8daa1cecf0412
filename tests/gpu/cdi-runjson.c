// SPDX-License-Identifier: Apache-2.0
/* cdi-runjson: a unit's run.json with CDI devices applied, exactly as
 * cell-agent does it (agent/pod/cdiapply.c), for tests/gpu/run-gpu-check.sh on
 * a machine with a real GPU but no registry to pull from:
 *
 *   cdi-runjson DIRS DEVICE... < base-run.json > run.json
 *
 * DIRS is a ':'-separated list of CDI spec directories, each DEVICE a
 * qualified name (nvidia.com/gpu=all). Errors go to stderr, exit 1. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "cdiapply.h"
#include "fsutil.h"
#include "log.h"
#include "runtime.h"
#include "util.h"

int main(int argc, char **argv)
{
	struct cdi_opts o = {0};
	struct run_config rc;
	struct cerr e = {0};
	struct buf in;
	char *out;

	log_init("cdi-runjson", LOG_INFO);
	if (argc < 3) {
		fputs("usage: cdi-runjson DIRS DEVICE... < base > run.json\n",
		      stderr);
		return 2;
	}
	buf_init(&in, RUNCONFIG_MAX);
	if (fs_read_fd(0, &in, &e) < 0 ||
	    runconfig_parse(in.data ? in.data : "", in.len, &rc, &e) < 0) {
		fprintf(stderr, "cdi-runjson: base run.json: %s\n", e.msg);
		return 1;
	}
	o.dirs = argv[1];
	o.nvidia_ctl = getenv("CELL_NVIDIACTL");
	o.generate_output = getenv("CELL_CDI_GENERATE_OUTPUT");
	if (cdi_apply(&o, argv + 2, &rc, &e) < 0) {
		fprintf(stderr, "cdi-runjson: %s\n", e.msg);
		return 1;
	}
	out = runconfig_to_json(&rc);
	puts(out);
	free(out);
	runconfig_free(&rc);
	buf_free(&in);
	return 0;
}
