// SPDX-License-Identifier: Apache-2.0
/* cell-agent: the supervisor plus the REST API, and the flags that start
 * them. Flags come from the command line and from cell_config.yaml in the
 * boot directory, whose keys starting with "itzoFlag" become flags
 * ("itzoFlag-port: 6421" is --port 6421); the command line wins. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "abspath.h"
#include "cgprime.h"
#include "api.h"
#include "bootrun.h"
#include "cleanup.h"
#include "cdiapply.h"
#include "cli.h"
#include "fsutil.h"
#include "imagecache.h"
#include "lazystats.h"
#include "log.h"
#include "metrics.h"
#include "pullproc.h"
#include "quantity.h"
#include "runtime.h"
#include "seccomp-policy.h"
#include "supervisor.h"
#include "util.h"
#include "yamlmap.h"

#define CONFIG_MAX (1u << 20)
#define CONFIG_FLAGS_MAX 64
#define AGENT_ARENAS 2 /* malloc arenas (M_ARENA_MAX) */

struct opts {
	int port;
	const char *boot_dir, *state_dir, *image_cache, *monitor_bin;
	const char *boot_source, *boot_helper;
	const char *pull_bin, *unpack_bin;
	const char **insecure; /* NULL-terminated */
	size_t n_insecure;
	bool plain_http;
	int verbose;
	int64_t pod_memory_reserve; /* -1: no pod-wide cap */
	int64_t pull_keep_free;	    /* bytes; 0: cell-pull's default */
	/* The agent's own log file (Kip reads it through file/) and the
	 * units' logs: size-rotated; links for log shippers. */
	const char *agent_log, *containers_log_dir;
	const char *cdi_spec_dirs; /* CDI spec directories, ':'-separated */
	/* CDI kinds pod annotations may ask for (NULL: nvidia.com/gpu) */
	const char *cdi_annotation_kinds;
	int64_t agent_log_max, container_log_max;
	int agent_log_files, container_log_files;
	/* The shared image cache (imagecache.h). */
	struct imagecache_opts ic;
	/* Seccomp (docs/agent-runtime.md): the default profile (NULL: the
	 * built-in one), off, and where Localhost profiles live. */
	const char *seccomp_profile, *seccomp_dir;
	bool seccomp_unconfined;
	/* The plain-HTTP metrics listener's address; NULL: none. */
	const char *metrics_listen;
	/* --pod-metadata allow: pods reach the metadata service (no block,
	 * no proxy; docs/netsetup.md "The metadata service"). */
	bool pod_metadata_allow;
	/* --lazy-pull off: the pull child gets --lazy off (no eStargz layer
	 * is served through FUSE; docs/imagepull.md "Lazy pulling"). */
	bool lazy_pull_off;
};

enum {
	O_PORT = CLI_ID0,
	O_INSECURE_REG,
	O_POD_RESERVE,
	O_PULL_KEEP_FREE,
	O_LAZY_PULL,
	O_VERSION,
	O_BOOT_SOURCE,
	O_AGENT_LOG_MAX,
	O_AGENT_LOG_FILES,
	O_CTR_LOG_MAX,
	O_CTR_LOG_FILES,
	O_SECCOMP,
	O_SECCOMP_PROFILE,
	O_METRICS_LISTEN,
	O_POD_METADATA
};

#define S(name, field) CLI_S(name, struct opts, field)
static const struct cli_opt opts[] = {
    {"port", CLI_ID_ARG, O_PORT},
    S("boot-dir", boot_dir),
    {"boot-source", CLI_ID_ARG, O_BOOT_SOURCE},
    S("boot-helper", boot_helper),
    S("state-dir", state_dir),
    S("image-cache", image_cache),
    S("monitor-bin", monitor_bin),
    S("pull-bin", pull_bin),
    S("unpack-bin", unpack_bin),
    {"insecure-registry", CLI_ID_ARG, O_INSECURE_REG},
    CLI_B("insecure-plain-http", struct opts, plain_http),
    {"pod-memory-reserve", CLI_ID_ARG, O_POD_RESERVE},
    {"pull-keep-free", CLI_ID_ARG, O_PULL_KEEP_FREE},
    {"lazy-pull", CLI_ID_ARG, O_LAZY_PULL},
    S("agent-log", agent_log),
    {"agent-log-max-size", CLI_ID_ARG, O_AGENT_LOG_MAX},
    {"agent-log-max-files", CLI_ID_ARG, O_AGENT_LOG_FILES},
    {"container-log-max-size", CLI_ID_ARG, O_CTR_LOG_MAX},
    {"container-log-max-files", CLI_ID_ARG, O_CTR_LOG_FILES},
    S("containers-log-dir", containers_log_dir),
    S("shared-image-cache", ic.dir),
    S("image-cache-endpoint", ic.endpoint),
    S("image-cache-mount-dir", ic.mount_dir),
    S("image-cache-mount-opts", ic.mount_opts),
    S("image-cache-mount-cmd", ic.mount_cmd),
    S("cdi-spec-dirs", cdi_spec_dirs),
    S("cdi-annotation-kinds", cdi_annotation_kinds),
    {"seccomp", CLI_ID_ARG, O_SECCOMP},
    {"metrics-listen", CLI_ID_ARG, O_METRICS_LISTEN},
    {"pod-metadata", CLI_ID_ARG, O_POD_METADATA},
    {"seccomp-profile", CLI_ID_ARG, O_SECCOMP_PROFILE},
    S("seccomp-profile-dir", seccomp_dir),
    {"verbose", CLI_ID, 'v'},
    {"help", CLI_ID, 'h'},
    {"version", CLI_ID, O_VERSION},
};
#undef S

static void usage(FILE *f)
{
	fputs(
	    "usage: cell-agent [options]\n"
	    "  --port N                 HTTPS port (6421)\n"
	    "  --boot-dir DIR           ca.crt, server.crt, server.key,\n"
	    "                           cell_config.yaml (/tmp/itzo)\n"
	    "  --boot-source S          auto|ssm|userdata|dir: where the boot\n"
	    "                           files come from (auto; docs/boot.md)\n"
	    "  --boot-helper PATH       cell-boot (next to cell-agent)\n"
	    "  --state-dir DIR          pod state, units, packages\n"
	    "                           (/var/lib/cell-agent)\n"
	    "  --image-cache DIR        image layers (/var/lib/cell/images)\n"
	    "  --shared-image-cache DIR a populated shared cache (read-only\n"
	    "                           second tier; cell-pull --populate)\n"
	    "  --image-cache-endpoint HOST:/PATH  NFS export of one, mounted\n"
	    "                           read-only in the background\n"
	    "  --image-cache-mount-dir DIR   where (/nfs)\n"
	    "  --image-cache-mount-opts S    mount(8) words (\"-o ro\")\n"
	    "  --image-cache-mount-cmd PATH  mount(8) (/bin/mount)\n"
	    "  --monitor-bin PATH       cell-monitor (next to cell-agent)\n"
	    "  --pod-memory-reserve Q   the pod may use the instance's memory\n"
	    "                           minus Q (default 256Mi; off: no cap)\n"
	    "  --pull-bin PATH          the image puller (cell-pull-cached, "
	    "its\n"
	    "                           cache front, else cell-pull, next to\n"
	    "                           cell-agent)\n"
	    "  --pull-keep-free Q       free space image pulls never unpack\n"
	    "                           into (cell-pull's --keep-free-mib;\n"
	    "                           default 5% of the disk, <= 256Mi)\n"
	    "  --lazy-pull on|off       serve eStargz layers lazily (on,\n"
	    "                           default) or pull them whole (off)\n"
	    "  --unpack-bin PATH        cell-unpack, the deploy-package\n"
	    "                           extractor (next to cell-agent)\n"
	    "  --insecure-registry H    plain HTTP to registry H (repeatable)\n"
	    "  --insecure-plain-http    TESTS ONLY: serve the API without TLS\n"
	    "  --agent-log PATH         also log to PATH, size-rotated\n"
	    "                           (/var/log/itzo/itzo.log; \"\": none)\n"
	    "  --agent-log-max-size N   rotate it beyond N bytes (10Mi)\n"
	    "  --agent-log-max-files N  files kept, the current one included "
	    "(5)\n"
	    "  --container-log-max-size N, --container-log-max-files N\n"
	    "                           the same for unit logs (10Mi, 5)\n"
	    "  --containers-log-dir DIR links <pod>_<ns>_<unit>-<id>.log to "
	    "unit\n"
	    "                           logs (/var/log/containers; \"\": "
	    "none)\n"
	    "  --cdi-spec-dirs D1:D2    CDI spec directories for units' "
	    "devices\n"
	    "                           (/etc/cdi:/var/run/cdi)\n"
	    "  --cdi-annotation-kinds K1,K2  CDI kinds pod annotations may "
	    "ask\n"
	    "                           for (nvidia.com/gpu; \"\": none)\n"
	    "  --seccomp MODE           default (units get the seccomp "
	    "profile)\n"
	    "                           or unconfined (units without a\n"
	    "                           seccompProfile get none)\n"
	    "  --seccomp-profile FILE   the default profile (built in: "
	    "Debian's\n"
	    "                           containers seccomp.json)\n"
	    "  --seccomp-profile-dir D  Localhost profiles "
	    "(/var/lib/cell/seccomp)\n"
	    "  --metrics-listen ADDR    also serve GET /metrics over plain "
	    "HTTP\n"
	    "                           on ADDR (PORT: 127.0.0.1:PORT; "
	    "0.0.0.0:PORT,\n"
	    "                           [::]:PORT explicit; off by default)\n"
	    "  --pod-metadata MODE      filter: pods reach no metadata "
	    "service;\n"
	    "                           one with an instance profile gets\n"
	    "                           credentials and region through a\n"
	    "                           proxy (default). allow: pods reach "
	    "it\n"
	    "                           all, the cell's user data included\n"
	    "  -v, --verbose            debug logging\n"
	    "  --version, -h --help\n"
	    "cell_config.yaml keys itzoFlag-<flag> set flags (\"itzoFlag-port: "
	    "6421\");\nimageCacheEndpoint, imageCacheMountDir and "
	    "imageCacheMountOpts set the\nimage-cache-* flags, as Itzo's "
	    "launcher read them.\n",
	    f);
}

/* ---- cell_config.yaml ---- */

/* Kip's cellConfig keys for the image cache (Itzo's launcher read them:
 * pkg/addons/nfs.go), as the flags of the same meaning. */
static const char *const cache_keys[][2] = {
    {"imageCacheEndpoint", "image-cache-endpoint"},
    {"imageCacheMountDir", "image-cache-mount-dir"},
    {"imageCacheMountOpts", "image-cache-mount-opts"},
};

/* The flag a config key names ("itzoFlag-port" → "port"), or NULL. */
static const char *config_flag(const char *key)
{
	for (size_t i = 0; i < ARRAY_SIZE(cache_keys); i++)
		if (!strcmp(key, cache_keys[i][0]))
			return cache_keys[i][1];
	if (strncmp(key, "itzoFlag", 8) != 0)
		return NULL;
	key += 8;
	while (*key == '-' || *key == '_')
		key++;
	return *key ? key : NULL;
}

static const struct cli_opt *find_opt(const char *name)
{
	for (size_t i = 0; i < ARRAY_SIZE(opts); i++)
		if (!strcmp(opts[i].name, name))
			return &opts[i];
	return NULL;
}

/* Flags the boot configuration may not set: it lives in the boot
 * directory, and plain HTTP would weaken the cell. */
static bool refused_in_config(const char *name)
{
	static const char *const names[] = {
	    "insecure-plain-http", "help",	 "version", "boot-dir",
	    "boot-source",	   "boot-helper"};

	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/* YAML 1.1 booleans as Kip writes them (yaml.Marshal quotes them:
 * "true"); an empty value means "set". 1 true, 0 false, -1 neither. */
static int boolean(const char *v)
{
	static const char *const yes[] = {"", "true", "yes", "on", "y", "1"};
	static const char *const no[] = {"false", "no", "off", "n", "0"};

	for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
		if (!strcasecmp(v, yes[i]))
			return 1;
	for (size_t i = 0; i < ARRAY_SIZE(no); i++)
		if (!strcasecmp(v, no[i]))
			return 0;
	return -1;
}

/* Turn one key/value into argv words. Flags that would weaken the cell
 * (plain HTTP) or that only the old agent had are refused loudly. A boolean
 * flag becomes "--name" or nothing, never "--name false" (the old launcher
 * passed the value as a word of its own, which ended flag parsing). */
static void add_config_flag(const char *key, const char *val, char **argv,
			    int *argc)
{
	const char *name = config_flag(key);
	const struct cli_opt *o = name ? find_opt(name) : NULL;

	if (!name) {
		log_info("cell_config.yaml: %s kept for add-ons", key);
		return;
	}
	if (!o || refused_in_config(name)) {
		log_warn("cell_config.yaml: ignoring %s (not a flag this agent "
			 "takes from the boot configuration)",
			 key);
		return;
	}
	if (*argc + 2 >= CONFIG_FLAGS_MAX) {
		log_warn("cell_config.yaml: too many flags, ignoring %s", key);
		return;
	}
	if (o->kind == CLI_TRUE || o->kind == CLI_ID) {
		int b = boolean(val);
		if (b < 0)
			log_warn("cell_config.yaml: %s: \"%s\" is not a "
				 "boolean; ignored",
				 key, val);
		if (b == 1)
			argv[(*argc)++] = xasprintf("--%s", name);
		return;
	}
	argv[(*argc)++] = xasprintf("--%s", name);
	argv[(*argc)++] = xstrdup(val);
}

/* Read the flat string map; append the flags it holds to argv. A file that
 * is not such a map is reported and ignored: the agent must still come up
 * for the controller to reach it. */
static int read_config(const char *path, char **argv, int *argc, struct cerr *e)
{
	struct yamlmap m;
	struct buf b;

	buf_init(&b, CONFIG_MAX);
	if (fs_read_file(path, &b, e) < 0) {
		buf_free(&b);
		if (e->code != ENOENT)
			return -1;
		cerr_clear(e);
		return 0;
	}
	if (yamlmap_parse(b.data, b.len, &m, e) < 0) {
		buf_free(&b);
		return -1;
	}
	for (size_t i = 0; i < m.n; i++)
		add_config_flag(m.v[i].key, m.v[i].value, argv, argc);
	yamlmap_free(&m);
	buf_free(&b);
	return 0;
}

/* ---- flags ---- */

static int parse_port(const char *s, int *port)
{
	int64_t v;
	struct cerr e = {0};

	if (parse_int64(s, 1, 65535, &v, &e) < 0) {
		fprintf(stderr, "cell-agent: --port: %s\n", e.msg);
		return -1;
	}
	*port = (int)v;
	return 0;
}

/* A size as a Kubernetes quantity ("10Mi", "4096"), as the kubelet's
 * containerLogMaxSize takes it. */
static int parse_size(const char *flag, const char *s, int64_t *out)
{
	struct cerr e = {0};

	if (quantity_value(s, out, &e) < 0 || *out < 1) {
		fprintf(stderr, "cell-agent: --%s: %s\n", flag,
			e.code ? e.msg : "must be at least 1 byte");
		return -1;
	}
	return 0;
}

static int parse_count(const char *flag, const char *s, int *out)
{
	int64_t v;
	struct cerr e = {0};

	if (parse_int64(s, 2, 64, &v, &e) < 0) {
		fprintf(stderr, "cell-agent: --%s: %s\n", flag, e.msg);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* The log flags; 1 when c is not one of them. */
static int parse_log_arg(int c, struct opts *o)
{
	switch (c) {
	case O_AGENT_LOG_MAX:
		return parse_size("agent-log-max-size", optarg,
				  &o->agent_log_max);
	case O_AGENT_LOG_FILES:
		return parse_count("agent-log-max-files", optarg,
				   &o->agent_log_files);
	case O_CTR_LOG_MAX:
		return parse_size("container-log-max-size", optarg,
				  &o->container_log_max);
	case O_CTR_LOG_FILES:
		return parse_count("container-log-max-files", optarg,
				   &o->container_log_files);
	default:
		return 1;
	}
}

/* 0 taken, 1 not a seccomp, metrics or lazy-pull flag, -1 bad. */
static int parse_seccomp_arg(int c, struct opts *o)
{
	switch (c) {
	case O_SECCOMP:
		if (strcmp(optarg, "unconfined") && strcmp(optarg, "default")) {
			fprintf(stderr,
				"cell-agent: --seccomp %s: want default "
				"or unconfined\n",
				optarg);
			return -1;
		}
		o->seccomp_unconfined = !strcmp(optarg, "unconfined");
		return 0;
	case O_POD_METADATA:
		if (strcmp(optarg, "allow") && strcmp(optarg, "filter")) {
			fprintf(stderr,
				"cell-agent: --pod-metadata %s: want filter "
				"or allow\n",
				optarg);
			return -1;
		}
		o->pod_metadata_allow = !strcmp(optarg, "allow");
		return 0;
	case O_SECCOMP_PROFILE:
		o->seccomp_profile = *optarg ? optarg : NULL;
		return 0;
	case O_METRICS_LISTEN:
		o->metrics_listen = *optarg ? optarg : NULL;
		return 0;
	case O_LAZY_PULL:
		if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
			fprintf(stderr,
				"cell-agent: --lazy-pull %s: want on or off\n",
				optarg);
			return -1;
		}
		o->lazy_pull_off = !strcmp(optarg, "off");
		return 0;
	default:
		return 1;
	}
}

/* 0 go on, 1 exit 0 (help, version), -1 exit 2. */
/* Every path flag absolute from here on: the state directory reaches
 * the puller (which changes directory to mount), the monitor and the
 * units' cgroup names, so a relative one would mean something else
 * there. */
static int abs_flags(struct opts *o)
{
	static const char *const names[] = {"boot-dir", "state-dir",
					    "image-cache", "agent-log",
					    "containers-log-dir"};
	const char **const paths[] = {&o->boot_dir, &o->state_dir,
				      &o->image_cache, &o->agent_log,
				      &o->containers_log_dir};

	if (abs_path_flags("cell-agent", names, paths, ARRAY_SIZE(names)) < 0 ||
	    abs_prog_flag("cell-agent", "monitor-bin", &o->monitor_bin) < 0 ||
	    abs_prog_flag("cell-agent", "boot-helper", &o->boot_helper) < 0 ||
	    abs_prog_flag("cell-agent", "pull-bin", &o->pull_bin) < 0 ||
	    abs_prog_flag("cell-agent", "unpack-bin", &o->unpack_bin) < 0)
		return -1;
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	const struct cli_parser cli = {"vh", opts, ARRAY_SIZE(opts), o};
	int c, r;

	optind = 1;
	while ((c = cli_next(&cli, argc, argv)) != -1) {
		switch (c) {
		case O_PORT:
			if (parse_port(optarg, &o->port) < 0)
				return -1;
			break;
		case O_BOOT_SOURCE:
			if (strcmp(optarg, "auto") && strcmp(optarg, "ssm") &&
			    strcmp(optarg, "userdata") &&
			    strcmp(optarg, "dir")) {
				fprintf(stderr,
					"cell-agent: --boot-source %s: want "
					"auto, ssm, userdata or dir\n",
					optarg);
				return -1;
			}
			o->boot_source = optarg;
			break;
		case O_INSECURE_REG:
			o->insecure = xrealloc(
			    o->insecure, (o->n_insecure + 2) * sizeof(char *));
			o->insecure[o->n_insecure++] = optarg;
			o->insecure[o->n_insecure] = NULL;
			break;
		case O_POD_RESERVE: {
			struct cerr qe = {0};

			if (!strcmp(optarg, "off")) {
				o->pod_memory_reserve = -1;
				break;
			}
			if (quantity_value(optarg, &o->pod_memory_reserve,
					   &qe) < 0) {
				fprintf(stderr,
					"cell-agent: --pod-memory-reserve: "
					"%s\n",
					qe.msg);
				return -1;
			}
			break;
		}
		case O_PULL_KEEP_FREE: {
			struct cerr qe = {0};

			if (quantity_value(optarg, &o->pull_keep_free, &qe) <
				0 ||
			    o->pull_keep_free < (1 << 20)) {
				fprintf(stderr,
					"cell-agent: --pull-keep-free: %s\n",
					qe.code ? qe.msg : "at least 1Mi");
				return -1;
			}
			break;
		}
		case 'v':
			o->verbose++;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case O_VERSION:
			printf("cell-agent %s\n", CELL_VERSION);
			return 1;
		default:
			r = parse_seccomp_arg(c, o);
			if (r == 1)
				r = parse_log_arg(c, o);
			if (r < 0)
				return -1;
			if (r == 0)
				break;
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cell-agent: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	return abs_flags(o);
}

/* The boot directory, from the command line only (the config file lives
 * there). */
static const char *cli_boot_dir(int argc, char **argv)
{
	const char *d = "/tmp/itzo";

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--boot-dir") && i + 1 < argc)
			d = argv[++i];
		else if (!strncmp(argv[i], "--boot-dir=", 11))
			d = argv[i] + 11;
		else if (!strcmp(argv[i], "--"))
			break;
	}
	return d;
}

/* The command line after the config file's flags, so that it wins. */
static char **merged_argv(int argc, char **argv, int *n_out)
{
	static char *cfg[CONFIG_FLAGS_MAX];
	char **all;
	int n = 0;
	struct cerr e = {0};
	cleanup_free char *path =
	    xasprintf("%s/cell_config.yaml", cli_boot_dir(argc, argv));

	if (read_config(path, cfg, &n, &e) < 0)
		log_warn("%s: %s (ignored)", path, e.msg);
	all = xcalloc((size_t)(argc + n + 1), sizeof(char *));
	all[0] = argv[0];
	for (int i = 0; i < n; i++)
		all[1 + i] = cfg[i];
	for (int i = 1; i < argc; i++)
		all[n + i] = argv[i];
	*n_out = argc + n;
	return all;
}

static char *self_path(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0)
		return NULL;
	self[n] = '\0';
	return xstrdup(self);
}

/* A helper binary next to this one. */
static char *beside_self(const char *self, const char *name)
{
	cleanup_free char *d = self ? xstrdup(self) : NULL;

	return d ? xasprintf("%s/%s", dirname(d), name) : xstrdup(name);
}

/* ---- the backend: the supervisor behind the API ---- */

struct agent {
	struct supervisor *sup;
	const char *monitor_bin;
};

static int be_update(void *ctx, const char *body, size_t len, struct cerr *e)
{
	return sup_update_pod(((struct agent *)ctx)->sup, body, len, e);
}

static char *be_status(void *ctx)
{
	return sup_status_json(((struct agent *)ctx)->sup);
}

static int be_unit_running(void *ctx, const char *unit)
{
	return sup_unit_running(((struct agent *)ctx)->sup, unit);
}

static char *be_pod_ip(void *ctx)
{
	return sup_pod_ip(((struct agent *)ctx)->sup);
}

static char *be_log_path(void *ctx, const char *unit, bool previous,
			 struct cerr *e)
{
	return sup_log_path(((struct agent *)ctx)->sup, unit, previous, e);
}

/* exec through `cell-monitor exec` in the unit's current run directory,
 * which is where its log lives (<run>/log). A TTY is the pty the API made
 * as the command's stdio; the command makes it its controlling terminal.
 * SkipNSEnter is ignored: a command always runs in its unit. */
static int be_exec(void *ctx, const struct api_exec_req *req,
		   const int stdio[3], struct cerr *e)
{
	struct agent *a = ctx;
	cleanup_free char *log = sup_log_path(a->sup, req->unit_name, false, e);
	struct exec_opts o = {
	    .argv = req->command,
	    .stdin_fd = stdio[0],
	    .stdout_fd = stdio[1],
	    .stderr_fd = stdio[2],
	};
	pid_t pid;
	int fd;

	if (!log)
		return -1;
	pid = runtime_exec(a->monitor_bin, dirname(log), &o, e);
	if (pid < 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return cerr_sys(e, "pidfd_open %d", (int)pid);
	return fd;
}

/* An interactive attach writes into the unit's stdin FIFO (made by its
 * monitor in the run directory, next to the log). */
static int be_attach_stdin(void *ctx, const char *unit, struct cerr *e)
{
	struct agent *a = ctx;
	cleanup_free char *log = sup_log_path(a->sup, unit, false, e);
	cleanup_free char *p = NULL;
	int fd;

	if (!log)
		return -1;
	p = xasprintf("%s/stdin", dirname(log));
	fd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT)
		return cerr_set(e, EINVAL, "unit %s was not started with stdin",
				unit && *unit ? unit : "(first)");
	if (fd < 0)
		return cerr_sys(e, "open %s", p);
	return fd;
}

/* The stream is gone: the command's whole tree dies (its cgroup). */
static void be_exec_end(void *ctx, int pidfd)
{
	(void)ctx;
	if (runtime_exec_end(pidfd) < 0)
		log_debug("exec end: %s", strerror(errno));
}

/* ---- main ---- */

static int run(const struct opts *o, const sigset_t *sigs,
	       const struct bootrun_opts *bo)
{
	struct agent ag = {.monitor_bin = o->monitor_bin};
	cleanup_free char *pkgs = xasprintf("%s/packages", o->state_dir);
	struct sup_opts so = {
	    .state_dir = o->state_dir,
	    .image_cache = o->image_cache,
	    .monitor_bin = o->monitor_bin,
	    .pull_bin = o->pull_bin,
	    .insecure_registries = o->insecure,
	    .packages_dir = pkgs,
	    .pod_memory_reserve = o->pod_memory_reserve,
	    .pull_keep_free_mib = (o->pull_keep_free + (1 << 20) - 1) >> 20,
	    .log_max_bytes = o->container_log_max,
	    .log_max_files = o->container_log_files,
	    .containers_log_dir = o->containers_log_dir,
	    .cdi_spec_dirs = o->cdi_spec_dirs,
	    .pod_metadata_allow = o->pod_metadata_allow,
	    .lazy_pull_off = o->lazy_pull_off,
	};
	struct api_backend b = {
	    .ctx = &ag,
	    .update_pod = be_update,
	    .status_json = be_status,
	    .unit_running = be_unit_running,
	    .pod_ip = be_pod_ip,
	    .log_path = be_log_path,
	    .exec_start = be_exec,
	    .exec_end = be_exec_end,
	    .attach_stdin = be_attach_stdin,
	};
	struct api_opts ao = {
	    .port = o->port,
	    .boot_dir = o->boot_dir,
	    .packages_dir = pkgs,
	    .version = CELL_VERSION,
	    .insecure_plain_http = o->plain_http,
	    .unpack_bin = o->unpack_bin,
	};
	struct api *api = NULL;
	struct metrics_listener *ml = NULL;
	struct cerr e = {0};
	int sig;

	lazystats_set_dir(o->image_cache); /* the lazy layers' counters */
	/* The controller reads this file through file/ when a user debugs a
	 * cell; a cell whose /var/log cannot take it still serves. */
	if (o->agent_log && *o->agent_log &&
	    log_add_file(o->agent_log, o->agent_log_max, o->agent_log_files,
			 &e) < 0) {
		log_warn("%s", e.msg);
		cerr_clear(&e);
	}
	struct seccomp_policy_opts sco = {
	    .profile_file = o->seccomp_profile,
	    .unconfined = o->seccomp_unconfined,
	    .localhost_dir = o->seccomp_dir,
	};
	/* A bad profile (or CDI kind) stops the agent here, with its line. */
	if (seccomp_policy_init(&sco, &e) < 0 ||
	    cdi_set_annotation_kinds(o->cdi_annotation_kinds, &e) < 0) {
		log_error("%s", e.msg);
		return 1;
	}
	imagecache_start(&o->ic);
	cgprime_init();
	if (fs_mkdir_p(o->state_dir, 0700, &e) < 0 ||
	    sup_start(&so, &ag.sup, &e) < 0) {
		log_error("%s", e.msg);
		return 1;
	}
	if (api_start(&ao, &b, &api, &e) < 0) {
		log_error("%s", e.msg);
		sup_stop(ag.sup);
		return 1;
	}
	if (o->metrics_listen) {
		if (metrics_listen(o->metrics_listen, &ml, &e) < 0) {
			log_error("%s", e.msg);
			api_stop(api);
			sup_stop(ag.sup);
			return 1;
		}
		log_info("metrics over plain HTTP on %s (port %d)",
			 o->metrics_listen, metrics_listener_port(ml));
	}
	log_info("cell-agent %s: serving %s on port %d", CELL_VERSION,
		 o->plain_http ? "PLAIN HTTP" : "mutual TLS", api_port(api));
	for (;;) {
		sig = sigwaitinfo(sigs, NULL);
		if (sig < 0 && errno == EINTR)
			continue;
		if (sig != SIGHUP || bootrun_update_ready(bo))
			break;
	}
	log_info("signal %d: stopping", sig);
	metrics_listener_stop(ml);
	api_stop(api);
	sup_stop(ag.sup);
	/* Units are not the agent's children in spirit: they keep running
	 * through the exec, and the new agent re-adopts them. */
	if (sig == SIGHUP)
		bootrun_reexec(bo);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {
	    .port = 6421,
	    .boot_dir = "/tmp/itzo",
	    .state_dir = "/var/lib/cell-agent",
	    .image_cache = "/var/lib/cell/images",
	    .pod_memory_reserve = 256ll << 20,
	    .agent_log = "/var/log/itzo/itzo.log",
	    .agent_log_max = 10 << 20,
	    .agent_log_files = 5,
	    .container_log_max = 10 << 20,
	    .container_log_files = 5,
	    .containers_log_dir = "/var/log/containers",
	    .cdi_spec_dirs = "/etc/cdi:/var/run/cdi",
	    .seccomp_dir = "/var/lib/cell/seccomp",
	};
	cleanup_free char *monitor = NULL, *helper = NULL;
	cleanup_free char *pull = NULL, *unpack = NULL;
	cleanup_free char *self = self_path();
	struct bootrun_opts bo;
	sigset_t sigs;
	char **all;
	int n, r;

	/* Two malloc arenas, not glibc's 8 per core: each of the agent's
	 * ~35 threads would otherwise get one of 16 (on 2 cores), every one
	 * kept at its own high-water mark, which is how the RSS crept up
	 * under churn (docs/agent.md "Soak"). And glibc's default thresholds
	 * held fixed: by default one large block freed raises them (up to
	 * 32 MiB), after which large blocks come from the heap and its free
	 * top is kept rather than given back. */
#ifdef __GLIBC__ /* the static build's musl has one allocator, no knobs */
	mallopt(M_ARENA_MAX, AGENT_ARENAS);
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	mallopt(M_TRIM_THRESHOLD, 128 << 10);
#endif
	log_init("cell-agent", LOG_INFO);
	metrics_init();
	/* The command line alone first: --help and bad flags never wait for
	 * a boot, and the boot step fills the directory that
	 * cell_config.yaml's flags then come from. */
	{
		struct opts cli = o;
		r = parse_args(argc, argv, &cli);
		free(cli.insecure);
		if (r != 0)
			return r > 0 ? 0 : 2;
		if (cli.verbose)
			log_init("cell-agent", LOG_DEBUG);
		helper = cli.boot_helper ? xstrdup(cli.boot_helper)
					 : beside_self(self, "cell-boot");
		bo = (struct bootrun_opts){
		    .source = cli.boot_source ? cli.boot_source : "auto",
		    .boot_dir = cli.boot_dir,
		    .state_dir = cli.state_dir,
		    .helper = helper,
		    .self = self,
		    .argv = argv,
		};
		if (bootrun(&bo) < 0)
			return 1;
	}
	all = merged_argv(argc, argv, &n);
	r = parse_args(n, all, &o);
	if (r != 0) {
		free(o.insecure);
		free(all);
		return r > 0 ? 0 : 2;
	}
	if (o.verbose)
		log_init("cell-agent", LOG_DEBUG);
	log_debug("flags: %d words from the command line and cell_config.yaml",
		  n - 1);
	if (!o.monitor_bin)
		o.monitor_bin = monitor = beside_self(self, "cell-monitor");
	/* cell-pull-cached mounts a cached image without loading libcurl
	 * and execs cell-pull otherwise; an install without it (an older
	 * layout) runs cell-pull itself. */
	if (!o.pull_bin) {
		o.pull_bin = pull = beside_self(self, "cell-pull-cached");
		if (access(pull, X_OK) < 0) {
			free(pull);
			o.pull_bin = pull = beside_self(self, "cell-pull");
		}
	}
	if (!o.unpack_bin)
		o.unpack_bin = unpack = beside_self(self, "cell-unpack");
	if (o.plain_http)
		for (int i = 0; i < 3; i++)
			log_warn(
			    "--insecure-plain-http: THE API HAS NO TLS AND NO "
			    "CLIENT AUTHENTICATION. FOR TESTS ONLY; NEVER "
			    "ON A REAL CELL.");
	/* Signals are taken synchronously by the main thread; every thread
	 * started after this inherits the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = run(&o, &sigs, &bo);
	free(o.insecure);
	free(all); /* the strings it points to outlive it */
	return r;
}
