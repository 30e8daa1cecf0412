// SPDX-License-Identifier: Apache-2.0
/* cell-boot: the network half of a cell's boot, run by cell-agent as a
 * child so that libcurl never enters the agent. One attempt per run: it
 * fills the boot directory from SSM Parameter Store or user data, and
 * replaces the agent binary when the boot files ask for another version.
 * The agent retries with back-off (docs/boot.md). */
#ifndef CELL_BOOT_H
#define CELL_BOOT_H

#include <stdbool.h>

enum boot_source { BOOT_AUTO, BOOT_SSM, BOOT_USERDATA, BOOT_DIR };

struct boot_opts {
	enum boot_source source;
	const char *boot_dir;	  /* /tmp/itzo */
	const char *userdata_dir; /* the path user data writes: /tmp/itzo */
	const char *ec2_url;	  /* IMDS base (http://169.254.169.254) */
	const char *gce_url, *azure_url;
	const char *azure_ovf_device, *azure_wireserver;
	const char *ssm_endpoint; /* NULL: https://ssm.<region>.amazonaws.com */
	const char *ca_bundle;	  /* NULL: the system's */
	const char *region;	  /* NULL: AWS_REGION, else IMDS */
	const char *instance_id;  /* NULL: IMDS */
	const char *param_base;	  /* /kip/cells */
	const char *agent_path;	  /* the binary a self-update replaces */
	const char *agent_version; /* the running agent's version */
	const char *state_dir;	   /* where the update marker lives */
	bool update_only;	   /* --source dir: only the version check */
	bool grow_root;		   /* --grow-root: only that, at boot */
	double timeout;		   /* seconds per metadata/SSM exchange */
};

/* Exit codes of cell-boot, which the agent acts on. */
enum {
	BOOT_EXIT_OK = 0,     /* the boot directory is complete */
	BOOT_EXIT_FAILED = 1, /* try again later (the reason was logged) */
	BOOT_EXIT_USAGE = 2,
	BOOT_EXIT_UPDATED = 3, /* a new agent is in place: re-exec it */
};

int boot_run(const struct boot_opts *o);
/* --grow-root (growroot.c): the root partition and ext4 grown to the disk;
 * always BOOT_EXIT_OK (a failure is logged as a warning). */
int boot_grow_root(void);

#endif
