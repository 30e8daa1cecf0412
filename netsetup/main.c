// SPDX-License-Identifier: Apache-2.0
/* cell-net: set up, tear down and show the pod's network. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abspath.h"
#include "cli.h"
#include "cloudinit.h"
#include "log.h"
#include "netsetup.h"
#include "util.h"

enum { EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_NONE = 3 };

static const char usage_text[] =
    "Usage: cell-net setup [--pod-ip IP | --host-network] [options]\n"
    "       cell-net teardown [--name NAME]\n"
    "       cell-net show [--name NAME]\n"
    "\n"
    "The pod's network around the cell's secondary IP: a network namespace\n"
    "kept at NETNS_DIR/NAME, a veth pair (the pod end eth0 with POD_IP/32\n"
    "behind the link-local gateway " NET_GATEWAY "), a proxy neighbour\n"
    "entry for the pod IP on the primary interface, ip_forward, masquerade\n"
    "to outside the VPC's private ranges and hostPort DNAT (nat chains\n"
    "CELL-MASQ and CELL-HOSTPORT). Teardown removes exactly what setup made\n"
    "and restores the sysctls it changed; setup twice changes nothing.\n"
    "The pod's traffic to the metadata service (" NET_IMDS_IP ",\n" NET_IMDS_IP6
    ") is refused in the filter table's FORWARD chain\n"
    "(chain CELL-IMDS) unless --allow-metadata.\n"
    "\n"
    "  --name NAME          namespace name (default " NET_DEFAULT_NAME ")\n"
    "  --pod-ip IP          the pod's (secondary) IP; default: the cloud's\n"
    "                       metadata service\n"
    "  --primary-ip IP      the cell's primary IP (hostPort DNAT); default:\n"
    "                       the primary interface's address\n"
    "  --primary-if IF      the primary interface; default: the default\n"
    "                       route's\n"
    "  --host-veth IF       host end of the veth (default veth-NAME)\n"
    "  --host-network       no namespace (a hostNetwork pod); prints the\n"
    "                       primary interface and IP\n"
    "  --allow-metadata     no metadata block: the pod reaches the cell's\n"
    "                       user data and the role's credentials\n"
    "  --private-cidr CIDR  also kept unmasqueraded (besides 10/8,\n"
    "                       172.16/12, 192.168/16); repeatable\n"
    "  --port H:C[/tcp|/udp][@HOSTIP]  hostPort H to the pod's port C;\n"
    "                       repeatable\n"
    "  --netns-dir DIR      (env CELL_NET_NETNS_DIR) "
    "default " NET_DEFAULT_NETNS_DIR "\n"
    "  --state-dir DIR      (env CELL_NET_STATE_DIR) "
    "default " NET_DEFAULT_STATE_DIR "\n"
    "  --metadata-timeout S seconds for the metadata lookup (default 5)\n"
    "  -v, --verbose        more logging\n"
    "  -h, --help           this text\n"
    "\n"
    "Environment for the metadata lookup: CELL_NET_EC2_URL, CELL_NET_GCE_URL,\n"
    "CELL_NET_AZURE_URL (the clouds' link-local services by default).\n"
    "Exit status: 0 done, 1 failed, 2 usage error, 3 no such pod network.\n";

struct cli {
	struct net_opts o;
	struct net_port ports[NET_MAX_PORTS];
	char *cidrs[NET_MAX_CIDRS + 1];
	size_t n_cidrs;
	double md_timeout;
	char *md_primary, *md_secondary;
};

#define usage_error(...) cli_usage_error("cell-net", EXIT_USAGE, __VA_ARGS__)

static int add_port(struct cli *c, const char *s)
{
	struct cerr e = {0};

	if (c->o.n_ports >= NET_MAX_PORTS)
		return usage_error("too many --port options (%s)", s);
	if (net_parse_port(s, &c->ports[c->o.n_ports], &e) < 0)
		return usage_error("--port: %s", e.msg);
	c->o.n_ports++;
	return 0;
}

static int add_cidr(struct cli *c, const char *s)
{
	struct cerr e = {0};
	uint32_t a;
	int plen;

	if (c->n_cidrs >= NET_MAX_CIDRS)
		return usage_error("too many --private-cidr options (%s)", s);
	if (net_parse_cidr(s, &a, &plen, &e) < 0)
		return usage_error("--private-cidr: %s", e.msg);
	c->cidrs[c->n_cidrs++] = (char *)s;
	return 0;
}

static int parse_args(int argc, char **argv, struct cli *c)
{
#define S(name, field) CLI_S(name, struct net_opts, field)
	static const struct cli_opt opts[] = {
	    S("name", name),
	    S("pod-ip", pod_ip),
	    S("primary-ip", primary_ip),
	    S("primary-if", primary_if),
	    S("host-veth", host_veth),
	    CLI_B("host-network", struct net_opts, host_network),
	    CLI_B("allow-metadata", struct net_opts, allow_metadata),
	    {"private-cidr", CLI_ID_ARG, 'c'},
	    {"port", CLI_ID_ARG, 'r'},
	    S("netns-dir", netns_dir),
	    S("state-dir", state_dir),
	    {"metadata-timeout", CLI_ID_ARG, 'T'},
	    {"verbose", CLI_ID, 'v'},
	    {"help", CLI_ID, 'h'},
	};
#undef S
	const struct cli_parser cli = {"vh", opts, ARRAY_SIZE(opts), &c->o};
	int ch, r, verbose = 0;
	char *end;

	while ((ch = cli_next(&cli, argc, argv)) != -1) {
		switch (ch) {
		case 'v':
			verbose++;
			break;
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		case 'c':
			if ((r = add_cidr(c, optarg)))
				return r;
			break;
		case 'r':
			if ((r = add_port(c, optarg)))
				return r;
			break;
		case 'T':
			c->md_timeout = strtod(optarg, &end);
			if (*end || c->md_timeout <= 0 || c->md_timeout > 600)
				return usage_error("bad --metadata-timeout %s",
						   optarg);
			break;
		default:
			return usage_error("%s", "bad option");
		}
	}
	log_init("cell-net", verbose ? LOG_DEBUG : LOG_WARN);
	/* Absolute from the start: the namespace's bind mount and the
	 * state file are found again by later runs from elsewhere. */
	{
		static const char *const names[] = {"netns-dir", "state-dir"};
		const char **const paths[] = {&c->o.netns_dir, &c->o.state_dir};

		if (abs_path_flags("cell-net", names, paths, 2) < 0)
			return 2;
	}
	return 0;
}

/* The pod IP (and the primary IP) from the cloud when not given. */
static int from_metadata(struct cli *c, struct cerr *e)
{
	struct ci_addr_opts mo = {
	    .ec2_url = getenv("CELL_NET_EC2_URL"),
	    .gce_url = getenv("CELL_NET_GCE_URL"),
	    .azure_url = getenv("CELL_NET_AZURE_URL"),
	    .timeout = c->md_timeout ? c->md_timeout : 5,
	};

	if (ci_cloud_addresses(&mo, &c->md_primary, &c->md_secondary, e) < 0)
		return cerr_prefix(e, "no --pod-ip, and the metadata service");
	if (!c->md_secondary)
		return cerr_set(e, EADDRNOTAVAIL,
				"no --pod-ip, and the instance has no "
				"secondary IP in its metadata");
	c->o.pod_ip = c->md_secondary;
	if (!c->o.primary_ip)
		c->o.primary_ip = c->md_primary;
	return 0;
}

static int do_setup(struct cli *c)
{
	struct net_info info = {0};
	struct cerr e = {0};

	if (!c->o.pod_ip && !c->o.host_network && from_metadata(c, &e) < 0) {
		fprintf(stderr, "cell-net: %s\n", e.msg);
		return EXIT_FAIL;
	}
	if (net_setup(&c->o, &info, &e) < 0) {
		fprintf(stderr, "cell-net: %s\n", e.msg);
		return e.code == EINVAL ? EXIT_USAGE : EXIT_FAIL;
	}
	printf("netns=%s\npod_ip=%s\nprimary_if=%s\nprimary_ip=%s\n"
	       "host_veth=%s\nstate=%s\n",
	       info.netns_path ? info.netns_path : "", info.pod_ip,
	       info.primary_if, info.primary_ip,
	       info.host_veth ? info.host_veth : "",
	       info.found ? "found" : "created");
	net_info_free(&info);
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c = {0};
	struct cerr e = {0};
	const char *cmd;
	int r;

	if (argc < 2)
		return usage_error("%s", "a command is needed");
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage_text, stdout);
		return 0;
	}
	cmd = argv[1];
	c.o.netns_dir = getenv("CELL_NET_NETNS_DIR");
	c.o.state_dir = getenv("CELL_NET_STATE_DIR");
	if ((r = parse_args(argc - 1, argv + 1, &c)))
		return r;
	if (optind != argc - 1)
		return usage_error("unexpected argument '%s'",
				   argv[optind + 1]);
	c.cidrs[c.n_cidrs] = NULL;
	c.o.private_cidrs = c.n_cidrs ? c.cidrs : NULL;
	c.o.ports = c.ports;
	if (!strcmp(cmd, "setup"))
		r = do_setup(&c);
	else if (!strcmp(cmd, "teardown"))
		r = net_teardown(&c.o, &e) < 0
			? (e.code == ENOENT ? EXIT_NONE : EXIT_FAIL)
			: 0;
	else if (!strcmp(cmd, "show"))
		r = net_show(&c.o, stdout, &e) < 0
			? (e.code == ENOENT ? EXIT_NONE : EXIT_FAIL)
			: 0;
	else
		return usage_error("unknown command '%s'", cmd);
	if (r && e.code)
		fprintf(stderr, "cell-net: %s\n", e.msg);
	free(c.md_primary);
	free(c.md_secondary);
	return r;
}
