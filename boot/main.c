// SPDX-License-Identifier: Apache-2.0
/* cell-boot: one attempt at filling the boot directory (and at updating
 * the agent). cell-agent runs it; it also works by hand. Every seam is a
 * flag with an environment fallback, which is how tests reach it through
 * the agent. */
#include <curl/curl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abspath.h"
#include "boot.h"
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
	      "  --timeout S           per exchange (10)\n"
	      "  -v --verbose, -h --help, --version\n"
	      "exit: 0 done, 1 not yet (retry), 2 usage, 3 agent updated\n",
	      f);
}

enum {
	O_SOURCE = 256,
	O_BOOT,
	O_UDDIR,
	O_EC2,
	O_GCE,
	O_AZURE,
	O_AZURE_OVF,
	O_AZURE_WIRE,
	O_SSM,
	O_CA,
	O_REGION,
	O_IID,
	O_BASE,
	O_APATH,
	O_AVER,
	O_STATE,
	O_UPDATE,
	O_TIMEOUT,
	O_VERSION,
};

static const struct option longopts[] = {
    {"source", required_argument, NULL, O_SOURCE},
    {"boot-dir", required_argument, NULL, O_BOOT},
    {"userdata-dir", required_argument, NULL, O_UDDIR},
    {"ec2-url", required_argument, NULL, O_EC2},
    {"gce-url", required_argument, NULL, O_GCE},
    {"azure-url", required_argument, NULL, O_AZURE},
    {"azure-ovf-device", required_argument, NULL, O_AZURE_OVF},
    {"azure-wireserver", required_argument, NULL, O_AZURE_WIRE},
    {"ssm-endpoint", required_argument, NULL, O_SSM},
    {"ca-bundle", required_argument, NULL, O_CA},
    {"region", required_argument, NULL, O_REGION},
    {"instance-id", required_argument, NULL, O_IID},
    {"param-base", required_argument, NULL, O_BASE},
    {"agent-path", required_argument, NULL, O_APATH},
    {"agent-version", required_argument, NULL, O_AVER},
    {"state-dir", required_argument, NULL, O_STATE},
    {"update-only", no_argument, NULL, O_UPDATE},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

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
	case O_BOOT:
		o->boot_dir = arg;
		break;
	case O_UDDIR:
		o->userdata_dir = arg;
		break;
	case O_EC2:
		o->ec2_url = arg;
		break;
	case O_GCE:
		o->gce_url = arg;
		break;
	case O_AZURE:
		o->azure_url = arg;
		break;
	case O_AZURE_OVF:
		o->azure_ovf_device = arg;
		break;
	case O_AZURE_WIRE:
		o->azure_wireserver = arg;
		break;
	case O_SSM:
		o->ssm_endpoint = arg;
		break;
	case O_CA:
		o->ca_bundle = arg;
		break;
	case O_REGION:
		o->region = arg;
		break;
	case O_IID:
		o->instance_id = arg;
		break;
	case O_BASE:
		o->param_base = arg;
		break;
	case O_APATH:
		o->agent_path = arg;
		break;
	case O_AVER:
		o->agent_version = arg;
		break;
	case O_STATE:
		o->state_dir = arg;
		break;
	case O_UPDATE:
		o->update_only = true;
		break;
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
	int c, verbose = 0, rc;

	log_init("cell-boot", LOG_INFO);
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
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
	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = boot_run(&o);
	curl_global_cleanup();
	return rc;
}
