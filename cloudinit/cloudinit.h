// SPDX-License-Identifier: Apache-2.0
/* cell-cloudinit: a minimal cloud-init for cells. It finds the cloud,
 * fetches meta-data and user data, and applies the #cloud-config modules,
 * scripts and boothooks beneath a root directory, once per instance. */
#ifndef CELL_CLOUDINIT_H
#define CELL_CLOUDINIT_H

#include <stdbool.h>
#include <stdio.h>

#include "buf.h"
#include "err.h"

enum ci_ds_kind {
	CI_DS_AUTO,
	CI_DS_EC2,
	CI_DS_GCE,
	CI_DS_AZURE,
	CI_DS_NOCLOUD,
	CI_DS_FILE,
	CI_DS_URL,
};

struct ci_opts {
	enum ci_ds_kind datasource;
	const char *root;	   /* "/" by default */
	const char *state_dir;	   /* NULL: ROOT/var/lib/cell-cloudinit */
	const char *log_file;	   /* NULL: ROOT/var/log/cell-cloudinit.log */
	const char *file;	   /* --file */
	const char *meta_data;	   /* --meta-data (file datasource) */
	const char *url;	   /* --url */
	const char *seed_dir;	   /* --seed-dir (NoCloud) */
	const char *cidata_device; /* --cidata-device (NoCloud) */
	const char *ec2_url, *gce_url, *azure_url;
	const char *azure_ovf_device; /* NULL: /dev/sr0, /dev/cdrom */
	const char *azure_wireserver; /* NULL: 168.63.129.16 */
	const char *instance_id;      /* overrides the meta-data's */
	const char *default_user;     /* gets top-level ssh keys; "root" */
	double timeout;		      /* seconds for finding and fetching */
	bool chroot_commands;	      /* run commands chrooted into the root */
	bool set_hostname;	      /* sethostname() even with a --root */
	/* Canonical cloud-init's behaviour where ours differs on purpose
	 * (docs/cloudinit.md "Kept divergences"): */
	bool canonical_hosts;	    /* /etc/hosts only per manage_etc_hosts */
	bool canonical_yaml;	    /* bad YAML is a warning, not an error */
	bool canonical_write_files; /* stop at the first failing entry */
};

/* Exit codes of cell-cloudinit. */
enum {
	CI_EXIT_OK = 0,
	CI_EXIT_FAILED = 1,   /* a module failed, or no datasource answered */
	CI_EXIT_DOCUMENT = 2, /* usage error, or errors in the user data */
};

/* Find, fetch and apply; returns an exit code. Logs as it goes. */
int ci_run(const struct ci_opts *o);
/* Parse a user-data file without applying it and print every problem as
 * "FILE:LINE: error|warning: message" on out. CI_EXIT_OK when there are
 * no errors (warnings allowed), else CI_EXIT_DOCUMENT. */
int ci_validate(const char *path, FILE *out);

/* The instance's private IPv4 addresses from whichever metadata service
 * answers (EC2 IMDSv2 with v1 fallback, GCE, Azure): the primary and the
 * first secondary (NULL when it has none). cell-net's pod IP. */
struct ci_addr_opts {
	const char *ec2_url, *gce_url, *azure_url; /* NULL: 169.254.169.254 */
	double timeout;				   /* seconds; 5 when 0 */
};
int ci_cloud_addresses(const struct ci_addr_opts *o, char **primary,
		       char **secondary, struct cerr *e);

/* ---- for cell-boot (boot/): the same metadata clients and write_files
 * writer, without the modules. bootapi.c. ---- */
struct ci_userdata {
	char *source;	   /* "ec2 (IMDSv2)", "gce", "azure (ovf-env.xml)"… */
	char *instance_id; /* from the meta-data */
	struct buf data;   /* the raw user data (maybe empty) */
};
/* Find the datasource as o asks (auto probes EC2, GCE and Azure; unset
 * URLs mean the link-local address) and fetch its user data. */
int ci_fetch_userdata(const struct ci_opts *o, struct ci_userdata *out,
		      struct cerr *e);
void ci_userdata_free(struct ci_userdata *u);
/* Parse user data and write its write_files (and milpa_files) entries
 * whose path lies under `prefix` ("/tmp/itzo") into `dir` instead, with
 * their modes, each atomically. A document with errors writes nothing.
 * Returns the number of files written. */
int ci_write_prefixed_files(const void *ud, size_t len, const char *prefix,
			    const char *dir, struct cerr *e);
/* GET paths ("latest/meta-data/instance-id") from EC2's IMDS with a
 * session token (IMDSv1 when there is none), all at once, retrying until
 * `timeout` seconds. out[i] is the body, or NULL when IMDS said 404. */
int ci_ec2_get(const char *base, const char *const *paths, size_t n,
	       double timeout, char **out, struct cerr *e);
#endif
