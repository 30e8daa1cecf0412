// SPDX-License-Identifier: Apache-2.0
/* cell-boot: one attempt at filling the boot directory (and at updating
 * the agent). cell-agent runs it; it also works by hand. Every seam is a
 * flag with an environment fallback, which is how tests reach it through
 * the agent. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abspath.h"
#include "boot.h"
#include "cli.h"
#include "log.h"
#include "util.h"

static void usage(FILE *f)
{
	fputs("usage: cell-boot [options]\n"
	      "  --source auto|ssm|userdata|dir   (auto)\n"
	      "  --boot-dir DIR        where the boot files go (/tmp/itzo)\n"
	      "  --userdata-dir DIR    the write_files path of boot files in\n"
	      "                        user data (/tmp/itzo)\n"
	      "  --ec2-url URL --gce-url URL --azure-url URL\n"
	      "                        metadata services (CELL_BOOT_EC2_URL…)\n"
	      "  --azure-ovf-device D --azure-wireserver H\n"
	      "                        Azure provisioning medium, wire server\n"
	      "                        (CELL_BOOT_AZURE_OVF_DEVICE, "
	      "…WIRESERVER)\n"
	      "  --ssm-endpoint URL    (AWS_ENDPOINT_URL_SSM)\n"
	      "  --ca-bundle FILE      CAs for HTTPS (AWS_CA_BUNDLE)\n"
	      "  --region R --instance-id I   (AWS_REGION; else IMDS)\n"
	      "  --param-base PATH     SSM parameter base (/kip/cells)\n"
	      "  --agent-path P --agent-version V --state-dir D\n"
	      "                        the agent a self-update replaces\n"
	      "  --update-only         only the version check\n"
	      "  --grow-root           only grow the root partition and its\n"
	      "                        ext4 to the disk (at boot; off with\n"
	      "                        CELL_BOOT_GROW_ROOT=0 or the kernel's\n"
	      "                        cell.growroot=0)\n"
	      "  --timeout S           per exchange (10)\n"
	      "  -v --verbose, -h --help, --version\n"
	      "exit: 0 done, 1 not yet (retry), 2 usage, 3 agent updated\n",
	      f);
}

enum { O_SOURCE = CLI_ID0, O_TIMEOUT, O_VERSION };

#define S(name, field) CLI_S(name, struct boot_opts, field)
static const struct cli_opt opts[] = {
    {"source", CLI_ID_ARG, O_SOURCE},
    S("boot-dir", boot_dir),
    S("userdata-dir", userdata_dir),
    S("ec2-url", ec2_url),
    S("gce-url", gce_url),
    S("azure-url", azure_url),
    S("azure-ovf-device", azure_ovf_device),
    S("azure-wireserver", azure_wireserver),
    S("ssm-endpoint", ssm_endpoint),
    S("ca-bundle", ca_bundle),
    S("region", region),
    S("instance-id", instance_id),
    S("param-base", param_base),
    S("agent-path", agent_path),
    S("agent-version", agent_version),
    S("state-dir", state_dir),
    CLI_B("update-only", struct boot_opts, update_only),
    CLI_B("grow-root", struct boot_opts, grow_root),
    {"timeout", CLI_ID_ARG, O_TIMEOUT},
    {"verbose", CLI_ID, 'v'},
    {"help", CLI_ID, 'h'},
    {"version", CLI_ID, O_VERSION},
};
#undef S

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static int parse_source(const char *s, enum boot_source *out)
{
	static const char *const names[] = {"auto", "ssm", "userdata", "dir"};

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*out = (enum boot_source)i;
			return 0;
		}
	fprintf(stderr,
		"cell-boot: --source %s: want auto, ssm, userdata "
		"or dir\n",
		s);
	return -1;
}

static int set(struct boot_opts *o, int c, const char *arg)
{
	char *end;

	switch (c) {
	case O_SOURCE:
		return parse_source(arg, &o->source);
	case O_TIMEOUT:
		o->timeout = strtod(arg, &end);
		if (*end || !(o->timeout > 0 && o->timeout <= 3600)) {
			fprintf(stderr,
				"cell-boot: --timeout %s: want 0.1 "
				"to 3600 seconds\n",
				arg);
			return -1;
		}
		break;
	default:
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct boot_opts o = {
	    .boot_dir = "/tmp/itzo",
	    .userdata_dir = "/tmp/itzo",
	    .ec2_url = env("CELL_BOOT_EC2_URL"),
	    .gce_url = env("CELL_BOOT_GCE_URL"),
	    .azure_url = env("CELL_BOOT_AZURE_URL"),
	    .azure_ovf_device = env("CELL_BOOT_AZURE_OVF_DEVICE"),
	    .azure_wireserver = env("CELL_BOOT_AZURE_WIRESERVER"),
	    .ssm_endpoint = env("AWS_ENDPOINT_URL_SSM"),
	    .ca_bundle = env("AWS_CA_BUNDLE"),
	    .instance_id = env("CELL_BOOT_INSTANCE_ID"),
	    .state_dir = "/var/lib/cell-agent",
	    .agent_version = CELL_VERSION,
	    .timeout = 10,
	};
	const struct cli_parser cli = {"vh", opts, ARRAY_SIZE(opts), &o};
	int c, verbose = 0, rc;

	log_init("cell-boot", LOG_INFO);
	while ((c = cli_next(&cli, argc, argv)) != -1) {
		if (c == 'v') {
			verbose++;
		} else if (c == 'h') {
			usage(stdout);
			return 0;
		} else if (c == O_VERSION) {
			printf("cell-boot %s\n", CELL_VERSION);
			return 0;
		} else if (c == '?' || set(&o, c, optarg) < 0) {
			usage(stderr);
			return BOOT_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cell-boot: unexpected argument '%s'\n",
			argv[optind]);
		return BOOT_EXIT_USAGE;
	}
	{
		static const char *const names[] = {"boot-dir", "userdata-dir",
						    "ca-bundle", "agent-path",
						    "state-dir"};
		const char **const paths[] = {&o.boot_dir, &o.userdata_dir,
					      &o.ca_bundle, &o.agent_path,
					      &o.state_dir};

		if (abs_path_flags("cell-boot", names, paths,
				   ARRAY_SIZE(names)) < 0)
			return BOOT_EXIT_USAGE;
	}
	if (verbose)
		log_init("cell-boot", LOG_DEBUG);
	if (o.grow_root)
		return boot_grow_root();
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = boot_run(&o);
	curl_global_cleanup();
	return rc;
}
