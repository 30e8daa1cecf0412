// SPDX-License-Identifier: Apache-2.0
/* cell-cloudinit: a minimal, fast cloud-init for cells. Parses options and
 * hands over to the library (cloudinit.h); exit 0 all applied, 1 a module
 * failed or no datasource, 2 usage error or errors in the user data. */
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "abspath.h"
#include "cli.h"
#include "cloudinit.h"
#include "log.h"
#include "util.h"

static const char usage_text[] =
    "Usage: cell-cloudinit [options]\n"
    "       cell-cloudinit --validate FILE\n"
    "\n"
    "Find the cloud, fetch meta-data and user data, and apply the user\n"
    "data (#cloud-config, scripts, boothooks; gzip and MIME multipart)\n"
    "once per instance.\n"
    "\n"
    "  --datasource KIND     auto (default), ec2, gce, azure, nocloud, "
    "file, url\n"
    "  --file PATH           user data from a file (datasource file)\n"
    "  --meta-data PATH      NoCloud-style meta-data for file and url\n"
    "  --url URL             user data from a URL (datasource url)\n"
    "  --seed-dir DIR        NoCloud seed with user-data and meta-data\n"
    "  --cidata-device DEV   NoCloud filesystem (default: label cidata)\n"
    "  --ec2-url URL         EC2 IMDS base (http://169.254.169.254)\n"
    "  --gce-url URL         GCE metadata base (same)\n"
    "  --azure-url URL       Azure IMDS base (same)\n"
    "  --azure-ovf-device D  Azure provisioning medium with ovf-env.xml\n"
    "                        (/dev/sr0 or /dev/cdrom when present)\n"
    "  --azure-wireserver H  host[:port] to report ready to\n"
    "                        (168.63.129.16)\n"
    "  --timeout SECONDS     limit for finding and fetching (default 30)\n"
    "  --instance-id ID      use ID instead of the meta-data's\n"
    "  --root DIR            apply beneath DIR (default /)\n"
    "  --state-dir DIR       per-instance markers (ROOT/var/lib/"
    "cell-cloudinit)\n"
    "  --log-file PATH       log and command output (ROOT/var/log/"
    "cell-cloudinit.log;\n"
    "                        \"\" for none)\n"
    "  --default-user NAME   gets top-level and meta-data SSH keys (root)\n"
    "  --chroot-commands     run commands chrooted into --root\n"
    "  --set-hostname        call sethostname() even with --root\n"
    "  --canonical-hosts     touch /etc/hosts only as manage_etc_hosts says\n"
    "  --canonical-yaml      a cloud-config that is not YAML is a warning\n"
    "  --canonical-write-files  stop write_files at the first failing entry\n"
    "  --validate FILE       check a user-data file, apply nothing\n"
    "  -v, --verbose         debug logging;  -q, --quiet  warnings only\n"
    "  -h, --help            this text;  --version  print the version\n"
    "\n"
    "Exit status: 0 all applied, 1 a module failed or no datasource,\n"
    "2 usage error or errors in the user data.\n";

enum { OPT_DS = CLI_ID0, OPT_TIMEOUT, OPT_VALIDATE, OPT_VERSION };

/* Options that only store their argument, or set a flag, in ci_opts. */
#define S(name, field) CLI_S(name, struct ci_opts, field)
#define B(name, field) CLI_B(name, struct ci_opts, field)
static const struct cli_opt opts[] = {
    {"datasource", CLI_ID_ARG, OPT_DS},
    S("file", file),
    S("meta-data", meta_data),
    S("url", url),
    S("seed-dir", seed_dir),
    S("cidata-device", cidata_device),
    S("ec2-url", ec2_url),
    S("gce-url", gce_url),
    S("azure-url", azure_url),
    S("azure-ovf-device", azure_ovf_device),
    S("azure-wireserver", azure_wireserver),
    {"timeout", CLI_ID_ARG, OPT_TIMEOUT},
    S("instance-id", instance_id),
    S("root", root),
    S("state-dir", state_dir),
    S("log-file", log_file),
    S("default-user", default_user),
    B("chroot-commands", chroot_commands),
    B("set-hostname", set_hostname),
    B("canonical-hosts", canonical_hosts),
    B("canonical-yaml", canonical_yaml),
    B("canonical-write-files", canonical_write_files),
    {"validate", CLI_ID_ARG, OPT_VALIDATE},
    {"verbose", CLI_ID, 'v'},
    {"quiet", CLI_ID, 'q'},
    {"help", CLI_ID, 'h'},
    {"version", CLI_ID, OPT_VERSION},
};
#undef S
#undef B

static const char *const ds_names[] = {
    [CI_DS_AUTO] = "auto",   [CI_DS_EC2] = "ec2",	  [CI_DS_GCE] = "gce",
    [CI_DS_AZURE] = "azure", [CI_DS_NOCLOUD] = "nocloud", [CI_DS_FILE] = "file",
    [CI_DS_URL] = "url",
};

struct cli {
	struct ci_opts o;
	bool ds_set;
	const char *validate;
	enum log_level level;
};

#define usage_error(...)                                                       \
	cli_usage_error("cell-cloudinit", CI_EXIT_DOCUMENT, __VA_ARGS__)

static int set_ds(struct cli *c, const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(ds_names); i++)
		if (!strcmp(name, ds_names[i])) {
			c->o.datasource = (enum ci_ds_kind)i;
			c->ds_set = true;
			return 0;
		}
	return usage_error("unknown datasource '%s'", name);
}

static int set_timeout(struct cli *c, const char *s)
{
	char *end;
	double t = strtod(s, &end);

	if (end == s || *end || !(t >= 0.1 && t <= 3600))
		return usage_error("--timeout %s: want 0.1 to 3600 seconds", s);
	c->o.timeout = t;
	return 0;
}

static int one_opt(struct cli *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_DS:
		return set_ds(c, arg);
	case OPT_TIMEOUT:
		return set_timeout(c, arg);
	case OPT_VALIDATE:
		c->validate = arg;
		return 0;
	case 'v':
	case 'q':
		c->level = opt == 'v' ? LOG_DEBUG : LOG_WARN;
		return 0;
	case 'h':
		fputs(usage_text, stdout);
		exit(0);
	case OPT_VERSION:
		printf("cell-cloudinit %s\n", CELL_VERSION);
		exit(0);
	default:
		return CI_EXIT_DOCUMENT; /* getopt said why */
	}
}

/* Path flags absolute from the start: commands run with --root as their
 * directory, and the markers and log must not move with it. */
static int abs_flags(struct ci_opts *o)
{
	static const char *const names[] = {"file", "meta-data", "seed-dir",
					    "state-dir", "log-file"};
	const char **const paths[] = {&o->file, &o->meta_data, &o->seed_dir,
				      &o->state_dir, &o->log_file};

	return abs_path_flags("cell-cloudinit", names, paths,
			      ARRAY_SIZE(names));
}

/* --file and --url pick their datasource; a conflicting one is an error. */
static int check(struct cli *c)
{
	struct ci_opts *o = &c->o;
	enum ci_ds_kind implied = o->file  ? CI_DS_FILE
				  : o->url ? CI_DS_URL
					   : CI_DS_AUTO;

	if (o->file && o->url)
		return usage_error("%s", "--file and --url exclude each other");
	if (implied != CI_DS_AUTO && c->ds_set && o->datasource != implied)
		return usage_error(
		    "--datasource %s conflicts with --file/--url",
		    ds_names[o->datasource]);
	if (implied != CI_DS_AUTO)
		o->datasource = implied;
	if (o->datasource == CI_DS_FILE && !o->file)
		return usage_error("%s", "--datasource file needs --file");
	if (o->datasource == CI_DS_URL && !o->url)
		return usage_error("%s", "--datasource url needs --url");
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c = {.level = LOG_INFO};
	const struct cli_parser cli = {"vqh", opts, ARRAY_SIZE(opts), &c.o};
	char root[PATH_MAX];
	int opt, r;

	umask(022);
	signal(SIGPIPE, SIG_IGN);
	opterr = 1;
	while ((opt = cli_next(&cli, argc, argv)) != -1)
		if ((r = one_opt(&c, opt, optarg)) != 0)
			return r;
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	log_init("cell-cloudinit", c.level);
	if (c.validate)
		return ci_validate(c.validate, stdout);
	if ((r = check(&c)) != 0)
		return r;
	if (!realpath(c.o.root ? c.o.root : "/", root))
		return usage_error("--root %s: no such directory", c.o.root);
	c.o.root = root;
	if (abs_flags(&c.o) < 0)
		return CI_EXIT_DOCUMENT;
	return ci_run(&c.o);
}
