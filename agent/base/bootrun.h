// SPDX-License-Identifier: Apache-2.0
/* The agent's side of boot: run cell-boot (which may use the network and
 * links libcurl) as a child until the boot directory is complete, with
 * back-off, logging why it waits; re-exec when cell-boot installed a new
 * agent. The agent itself only ever reads the boot directory. */
#ifndef CELL_AGENT_BOOTRUN_H
#define CELL_AGENT_BOOTRUN_H

#include <stdbool.h>

struct bootrun_opts {
	const char *source; /* auto, ssm, userdata, dir */
	const char *boot_dir, *state_dir;
	const char *helper; /* cell-boot */
	const char *self;   /* this binary, for a self-update */
	char **argv;	    /* the command line, to re-exec with */
};

/* Returns 0 once the boot directory is complete; -1 on a usage error.
 * Does not return after a self-update (it execs the new agent). */
int bootrun(const struct bootrun_opts *o);
/* On SIGHUP: ask cell-boot whether the boot files want another version;
 * true when it installed one (the caller stops its threads and calls
 * bootrun_reexec). */
bool bootrun_update_ready(const struct bootrun_opts *o);
void bootrun_reexec(const struct bootrun_opts *o);

#endif
